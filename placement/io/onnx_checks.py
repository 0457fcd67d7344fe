"""Checks that an ONNX graph is one the importer can read, and its nodes in an order it can cost.

ONNX requires (and ``onnx.checker`` tests) that the names a graph uses are text, that every
tensor is written once, and that every node reads only the graph's inputs, its initializers
and what earlier nodes wrote. A graph that breaks these was read as if it did not: a node
stored before the node it reads lost that edge (and a plan could run it first), a tensor
written twice kept its last writer. Here:

* a name that is not valid UTF-8 (protobuf hands it over as bytes), or an empty operator type, is an error
  naming the node;
* a node of the default domain with more or fewer inputs or outputs than its operator's schema
  allows is an error naming the node;
* a tensor written twice, or read and never written, is an error naming the node and tensor;
* after shape inference, a node of the default domain that binds one type variable of its
  operator's schema to two element types (an ``Add`` of float and int64) is an error naming both;
* nodes stored out of order are put in a topological order (the stored order where it is one);
  a cycle is an error naming a node on it.

The values a control-flow node's subgraphs read from the main graph count as its inputs.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from placement.errors import InvalidInstanceError
from placement.problem.instance import find_cycle, least_first_order


def _text(value: Any, model: str, where: str) -> str:
    if isinstance(value, str):
        return value
    shown = bytes(value).decode("utf-8", "backslashreplace") if isinstance(value, (bytes, bytearray)) else repr(value)
    raise InvalidInstanceError(f"{model}: {where} ('{shown}') is not valid UTF-8 text")


def check_text(graph: Any, model: str) -> None:
    """Every name of ``graph`` the importer reads is text (module docstring)."""
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        _text(value.name, model, "the tensor name")
    for k, node in enumerate(graph.node):
        label = _text(node.name, model, f"the name of node {k}") or f"node {k}"
        if not _text(node.op_type, model, f"the operator type of {label}"):   # onnx.checker refuses it too
            raise InvalidInstanceError(f"{model}: node {repr(node.name) if node.name else k} has no operator type "
                                       "(its op_type is empty)")
        _text(node.domain, model, f"the domain of {label}")
        for name in (*node.input, *node.output):
            _text(name, model, f"a tensor name of {label}")
        for prop in node.metadata_props:
            _text(prop.key, model, f"a metadata key of {label}")
            _text(prop.value, model, f"a metadata value of {label}")


def check_single_definitions(graph: Any, model: str) -> None:
    """No two initializers (dense or sparse) and no two graph inputs of ``graph`` share a name: ONNX names each
    tensor once, and onnx's shape inference took one for the other (two weights ``W`` of other shapes: "a shape
    the model declares contradicts its operators")."""
    for what, names in (("initializers", [init.name for init in graph.initializer]
                         + [sparse.values.name for sparse in graph.sparse_initializer]),
                        ("graph inputs", [value.name for value in graph.input])):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise InvalidInstanceError(f"{model}: two {what} are named {name!r} (an ONNX tensor has one name "
                                           "and one definition); rename one and the nodes that read it")
            seen.add(name)


def topological_nodes(graph: Any, model: str, extra_reads: Callable[[Any], Iterable[str]]) -> list[Any] | None:
    """The nodes of ``graph`` in a topological order, or ``None`` where the stored order is one (module
    docstring); ``extra_reads(node)`` are the further names a node reads (its subgraphs' outer reads)."""
    nodes = list(graph.node)

    def label(k: int) -> str:
        return repr(nodes[k].name) if nodes[k].name else f"{k} ({nodes[k].op_type})"

    given = {value.name for value in graph.input} | {init.name for init in graph.initializer}
    given |= {init.values.name for init in graph.sparse_initializer}
    writer: dict[str, int] = {}
    for k, node in enumerate(nodes):
        for name in node.output:
            if not name:
                continue
            if name in given or name in writer:
                first = "a graph input or initializer" if name in given else f"node {label(writer[name])}"
                raise InvalidInstanceError(f"{model}: node {label(k)} writes {name!r}, which {first} already "
                                           "holds (an ONNX tensor is written once)")
            writer[name] = k
    needs: list[set[int]] = []
    for k, node in enumerate(nodes):
        sources = set()
        for name in (*node.input, *extra_reads(node)):
            if not name or name in given:
                continue
            if name not in writer:
                raise InvalidInstanceError(f"{model}: node {label(k)} reads {name!r}, which is no graph input, "
                                           "initializer or output of a node")
            sources.add(writer[name])
        needs.append(sources)
    for value in graph.output:   # a graph output nothing writes (onnx.checker refuses it): no output recorded
        if value.name not in given and value.name not in writer:
            raise InvalidInstanceError(f"{model}: the graph output {value.name!r} is no graph input, initializer "
                                       "or output of a node")
    if all(source < k for k, sources in enumerate(needs) for source in sources):
        return None
    readers: list[list[int]] = [[] for _ in nodes]
    for k, sources in enumerate(needs):
        for source in sources:
            readers[source].append(k)
    order = least_first_order(len(nodes), readers)
    if len(order) < len(nodes):
        cycle = find_cycle(len(nodes), readers) or [min(set(range(len(nodes))) - set(order))]
        raise InvalidInstanceError(f"{model}: the graph has a cycle through node {label(min(cycle))}")
    return [nodes[k] for k in order]


def default_opset(model: Any) -> int | None:
    """The model's opset of the default domain (``None``: it imports none)."""
    return next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)


def check_default_opset(model: Any, name: str, onnx: Any) -> None:
    """The model imports an opset of the default domain that onnx defines (1 to the newest it knows): at another,
    onnx's schemas, shape inference among them, read every operator at the newest opset it knows, whose
    inputs, attributes and shapes may not be those of the opset the model declares. An opset above the newest
    may be one a newer onnx defines; none defines one below 1."""
    newest = onnx.defs.onnx_opset_version()
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx") and not 1 <= entry.version <= newest:
            newer = f", or install an onnx that defines opset {entry.version}" if entry.version > newest else ""
            raise InvalidInstanceError(f"{name}: the model imports opset {entry.version} of the default ONNX domain, "
                                       f"which onnx {onnx.__version__} does not define (it defines opsets 1 to "
                                       f"{newest}), so its operators cannot be read at it; export the model at "
                                       f"an opset from 1 to {newest}{newer}")


def _defined_nodes(model: Any) -> Iterator[tuple[int, Any, Any]]:
    """``(position, node, schema)`` for the nodes of the default domain whose operator ONNX defines, not
    deprecated, at the model's opset; none where the model imports no default-domain opset."""
    from onnx import defs

    opset = default_opset(model)
    if opset is None:
        return
    for k, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = defs.get_schema(node.op_type, opset, "")
        except Exception:   # onnx's SchemaError: not defined at this opset
            continue
        if not schema.deprecated:
            yield k, node, schema


def _later_nodes(model: Any) -> Iterator[tuple[int, Any, Any]]:
    """``(position, node, schema)`` for the nodes of the default domain whose operator ONNX does not define at the
    model's opset but at a later one, ``schema`` that of the first opset that defines it (not deprecated)."""
    from onnx import defs

    opset = default_opset(model)
    if opset is None:
        return
    newest = defs.onnx_opset_version()
    for k, node in enumerate(model.graph.node):
        if (node.domain not in ("", "ai.onnx") or not defs.has(node.op_type, "")
                or _schema(node.op_type, opset) is not None):
            continue
        schema = next((found for version in range(opset + 1, newest + 1)
                       if (found := _schema(node.op_type, version)) is not None), None)
        if schema is not None and not schema.deprecated:
            yield k, node, schema


def _schema(op_type: str, opset: int) -> Any:
    """The schema of the default domain's ``op_type`` at ``opset``, or ``None`` where it is not defined there."""
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, "")
    except Exception:   # onnx's SchemaError: not defined at this opset
        return None


def check_schemas(model: Any, name: str) -> None:
    """Every node of the default domain whose operator ONNX defines at the model's opset has as many
    inputs and outputs as the operator's schema allows (trailing empty names, omitted optional ones,
    not counted): a ``Relu`` given two inputs was imported and costed as it stood. An operator the default
    domain defines only at a later opset (ONNX Runtime writes ``LayerNormalization`` there at opset 12) is
    costed by name, as that operator: its node has as many as the schema of the first opset that defines it
    allows (an ``Attention`` of one input at opset 18 failed its costing, which reads three). Nothing else of
    the schema is asked: deprecated operators, attributes of older opsets, and every other domain were
    imported before and still are (costed by name, or by the bytes they move)."""
    opset = default_opset(model)
    later = list(_later_nodes(model))
    first = {k for k, _, _ in later}   # positions of the nodes asked by the schema of a later opset
    for k, node, schema in sorted((*_defined_nodes(model), *later), key=lambda found: found[0]):
        for what, names, least, most in (("input", node.input, schema.min_input, schema.max_input),
                                         ("output", node.output, schema.min_output, schema.max_output)):
            count = len(names)
            while count and not names[count - 1]:
                count -= 1
            if not least <= count <= most:
                allowed = f"{least}" if least == most else f"{least} to {most}" if most < 2 ** 31 - 1 else \
                    f"at least {least}"
                at = (f"at opset {schema.since_version}, the first that defines it (the model imports opset {opset})"
                      if k in first else f"at opset {opset}")
                raise InvalidInstanceError(f"{name}: node {node.name or f'{node.op_type}_{k}'!r} ({node.op_type}) has "
                                           f"{count} {what}{'' if count == 1 else 's'}; {node.op_type} takes "
                                           f"{allowed} {at}")


def check_element_types(model: Any, name: str) -> None:
    """Every node of the default domain binds each type variable of its operator's schema (``T`` of
    ``Add``, of ``MatMul``, of ``Concat``'s inputs) to one element type, as far as ``model`` (after
    shape inference) gives the element types of its tensors: an ``Add`` of a float and an int64 tensor
    cannot run, and was costed as if it could. Operators the default domain does not define at the
    model's opset, deprecated ones, and heterogeneous variadic parameters (``Loop``'s) are not asked."""
    from onnx import TensorProto, defs

    graph = model.graph
    types = {value.name: value.type.tensor_type.elem_type
             for value in (*graph.input, *graph.value_info, *graph.output)
             if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type}
    types.update((init.name, init.data_type) for init in graph.initializer if init.data_type)
    known = set(TensorProto.DataType.values())   # another number is an error the tensor table names
    types = {tensor: elem_type for tensor, elem_type in types.items() if elem_type in known}
    for k, node, schema in _defined_nodes(model):
        variables = {constraint.type_param_str for constraint in schema.type_constraints}
        bound: dict[str, tuple[str, int]] = {}
        for formals, actuals in ((schema.inputs, node.input), (schema.outputs, node.output)):
            for position, tensor in enumerate(actuals):
                if not formals:
                    break
                formal = formals[min(position, len(formals) - 1)]
                if position >= len(formals) and formal.option != defs.OpSchema.FormalParameterOption.Variadic:
                    break
                variadic = formal.option == defs.OpSchema.FormalParameterOption.Variadic
                if (not tensor or tensor not in types or formal.type_str not in variables
                        or (variadic and not formal.is_homogeneous)):
                    continue
                first = bound.setdefault(formal.type_str, (tensor, types[tensor]))
                if first[1] != types[tensor]:
                    kind = TensorProto.DataType.Name
                    raise InvalidInstanceError(
                        f"{name}: node {node.name or f'{node.op_type}_{k}'!r} ({node.op_type}) cannot run: its "
                        f"operator takes one element type for {formal.type_str}, but {first[0]!r} is "
                        f"{kind(first[1])} and {tensor!r} is {kind(types[tensor])}")
