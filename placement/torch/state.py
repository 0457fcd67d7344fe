"""State the model writes in place: the operators that read it, as it is, share a stage.

Every stage holds its own copy of the parameters and buffers its operators read
(:mod:`placement.torch.partition`). State the forward pass writes in place (a running mean,
BatchNorm's running statistics, a step counter, an embedding renormalised by ``max_norm``) is
written in one stage's copy only. An operator of another stage that reads the state itself
would read a copy that never changes after the first micro-batch; one that writes it again
would write its own copy; and the gradients come out wrong without an error. So these
operators are kept on one stage (:func:`keep_written_buffers_together`, one colour class,
which every plan keeps on one device):

* every operator that writes into the state, or into a value sharing its memory (a view of
  it, the result of an in-place operator on it);
* every operator that reads the state itself;
* every operator that reads a value sharing its memory before the last write in program order
  (the unsplit model would show it that write's effect on values received earlier).

A value sharing the state's memory that is read after the last write leaves the writers'
stage as a copy taken after every write, so it travels on as any other value.

Activations written in place (``nn.ReLU(inplace=True)``, ``x += y``, a write through a view) are
one value per stage too: a stage sends its values when its operators are done, and a stage
that receives a value holds its own copy. So an operator must see exactly the writes that
precede it in program order, and two rules, per write ``W`` into the memory of an activation
(a value computed by an operator that is no view, or a model input, and the values sharing its
memory), keep it so (:func:`written_activations`):

* an operator ``R`` that reads that memory before ``W`` and from which no path of values leads
  to ``W`` shares ``W``'s stage: on a later stage it would receive the value after ``W``;
* an operator that reads, after ``W``, a value sharing that memory that was made before ``W``
  (the activation itself, or a view taken before the write) sees ``W`` only where that value was
  made on ``W``'s stage: the operator that made it shares ``W``'s stage (for a model input,
  which is no operator's, the reader does), and so do the views between the activation and that
  value, and between the activation and the value ``W`` writes into (a stage receives each value
  as its own copy, so a write reaches another value only through views made on its stage).

A reader that depends on ``W`` through values, or reads a value made at or after ``W``, needs
neither: the paths of values order it, and the value it reads left its stage after ``W``. So
a chain of in-place operators, each reading the last one's result (a ReLU after a
normalisation, a residual ``x += f(x)`` per layer), constrains no stage boundary.

An operator that reads its argument's memory by storage offset and strides
(:data:`placement.torch.contiguity.READS_STORAGE`: ``as_strided`` of a transposed slice reads the
memory of the tensor it was sliced from) reads other elements, or past the end, where that
argument is a stage's received copy, whose storage holds its values alone, densely. So it shares a
stage with the operators its argument's memory comes from (:func:`storage_views`): the views and
in-place operators between the argument and the value that owns the memory, and the operator that
computes that value (a model input, parameter or buffer is no operator's: its views alone).

Stages exchange strided tensors only (gloo sends no sparse one): an operator whose result is sparse
shares a stage with the operators that read it (:func:`sparse_values`).
"""

from __future__ import annotations

import operator
from typing import Any, Iterator, Mapping

from placement.problem.union_find import UnionFind


def written_state(program: Any) -> dict[str, set[str]]:
    """Per parameter or buffer (qualified name) the exported ``program`` writes in place, the names of
    the operators that must share its stage (module docstring)."""
    from placement.torch.contiguity import state_accesses

    nodes = list(program.graph.nodes)
    state = {spec.arg.name: spec.target for spec in program.graph_signature.input_specs
             if spec.kind.name in ("BUFFER", "PARAMETER") and getattr(spec.arg, "name", None) is not None}
    position = {n: i for i, n in enumerate(nodes)}
    out: dict[str, set[str]] = {}
    for n in nodes:
        if n.op != "placeholder" or n.name not in state:
            continue
        writers, readers = state_accesses(n, nodes, position)
        if writers:
            last = max(position[w] for w in writers)
            out[state[n.name]] = {r.name for r in readers if n in r.all_input_nodes or position[r] <= last}
    return out


def _operator_of(value: Any) -> Any:
    """The operator of the imported graph that computes the FX ``value``: an item of a tuple is its
    operator's, and a dropout in evaluation or of probability 0, which the graph leaves out, passes on its input's (a
    model input stays itself)."""
    from placement.io.torch_export import is_identity_dropout

    while value.op == "call_function" and (value.target is operator.getitem or is_identity_dropout(value)):
        value = value.args[0]
    return value


def _activations(program: Any, nodes: list[Any], position: Mapping[Any, int]) -> Iterator[tuple[Any, Any, Any, Any]]:
    """Each activation of the exported ``program`` (``nodes`` its graph's nodes, at ``position``): a value
    an operator computes in memory of its own, or a model input, with its aliases (each value sharing
    its memory, and the value it was made from) and the operators that write into them and read them."""
    from placement.torch.contiguity import accesses, alias_tree, aliases_argument, state_root

    state = {spec.arg.name for spec in program.graph_signature.input_specs
             if spec.kind.name in ("BUFFER", "PARAMETER", "CONSTANT_TENSOR")
             and getattr(spec.arg, "name", None) is not None}
    for root in nodes:
        if root.op == "placeholder":
            if root.name in state:
                continue
        elif (root.op != "call_function" or state_root(root) is not None
              or any(aliases_argument(root, a) for a in root.all_input_nodes)):
            continue
        aliases = alias_tree(root)
        writers, readers = accesses(aliases, position)
        yield root, aliases, writers, readers


def activations(program: Any) -> list[tuple[Any, Any, Any, Any]]:
    """Each activation of the exported ``program`` with its aliases, writers and readers (as
    :func:`_activations` yields them), found once for :func:`written_activations` and
    :func:`received_writes`, which otherwise each walk the graph's aliases again."""
    nodes = list(program.graph.nodes)
    return list(_activations(program, nodes, {n: i for i, n in enumerate(nodes)}))


def written_activations(program: Any, found: list[tuple[Any, Any, Any, Any]] | None = None) -> dict[str, set[str]]:
    """Per activation the exported ``program`` writes in place (named by the operator that computes
    it, or the model input), the names of the operators that must share a stage with a write into it,
    where two or more must (module docstring). Parameters and buffers are :func:`written_state`'s.
    ``found``: the program's :func:`activations`, where the caller has them."""
    from placement.io.torch_export import is_identity_dropout
    from placement.torch.contiguity import writes_into

    nodes = list(program.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    together = UnionFind(len(nodes))
    grouped: set[int] = set()

    def join(a: Any, b: Any) -> None:
        a, b = _operator_of(a), _operator_of(b)
        if a.op == "placeholder" or b.op == "placeholder":   # what reads a model input says so itself
            return
        together.union(position[a], position[b])
        grouped.update((position[a], position[b]))

    def leads(start: Any, target: Any) -> bool:
        """Whether a path of values leads from ``start`` to ``target`` (searched among the nodes between)."""
        seen, stack, end = {start}, [start], position[target]
        while stack:
            for user in stack.pop().users:
                if user is target:
                    return True
                if user not in seen and position[user] < end:
                    seen.add(user)
                    stack.append(user)
        return False

    for root, aliases, writers, readers in found if found is not None else activations(program):

        def made_on_the_way(value: Any) -> list[Any]:
            """The aliases between ``root`` and ``value``, ``value`` included and ``root`` not."""
            way = []
            while aliases[value] is not None:
                way.append(value)
                value = aliases[value]
            return way

        for w in writers:
            if is_identity_dropout(w):   # in evaluation it writes nothing
                continue
            written = [b for b in w.all_input_nodes if b in aliases and writes_into(w, b)]
            for r in readers:
                if r is w:
                    continue
                if position[r] < position[w]:
                    if not leads(r, w):
                        join(r, w)
                    continue
                for a in r.all_input_nodes:
                    if a in aliases and position[a] < position[w]:
                        join(w, r if _operator_of(a).op == "placeholder" else a)
                        # and the write reaches ``a`` there only through the views both were made by
                        for made in {v for b in [a, *written] for v in made_on_the_way(b)}:
                            join(w, made)
    groups: dict[int, set[str]] = {}
    first: dict[int, int] = {}   # per group its earliest node (the node at position i is nodes[i])
    for i in grouped:
        key = together.find(i)
        groups.setdefault(key, set()).add(nodes[i].name)
        first[key] = min(first.get(key, i), i)
    return {nodes[first[key]].name: names for key, names in groups.items()}


def _owns_dense_memory(value: Any) -> bool:
    """Whether the FX ``value`` is computed by an operator into memory of its own that it fills exactly: no view or
    in-place result of another value (:func:`placement.torch.contiguity.alias_sources`), traced contiguous, at
    storage offset 0 and with a storage of its own size. A later stage receives it as a contiguous tensor of its
    own, memory laid out as the model's, so what reads that memory by offset and strides reads the same elements."""
    import torch

    from placement.torch.contiguity import alias_sources

    example = value.meta.get("val")
    if value.op != "call_function" or len(alias_sources(value)) > 1 or not isinstance(example, torch.Tensor):
        return False
    try:
        size = example.untyped_storage().nbytes()
    except (NotImplementedError, RuntimeError):   # a tensor without storage: not known
        return False
    return (example.is_contiguous() and example.storage_offset() == 0
            and size == example.numel() * example.element_size())


def storage_views(program: Any) -> dict[str, set[str]]:
    """Per group of operators of the exported ``program`` that must share a stage because one of them reads
    memory by storage offset and strides (module docstring; named by its first operator in program order), the
    names of the operators: each such reader, and the operators that make the value it reads from the memory of
    another (views, in-place results: :func:`placement.torch.contiguity.alias_sources`) back to the operator that
    computes that memory, where one does. A reader of a value that owns its dense memory (:func:`_owns_dense_memory`)
    needs no group: a later stage receives that memory as the model lays it out."""
    from placement.torch.contiguity import alias_sources, storage_read

    nodes = list(program.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    together = UnionFind(len(nodes))
    grouped: set[int] = set()
    for node in nodes:
        value = storage_read(node)
        if value is None or _owns_dense_memory(value):
            continue
        for source in alias_sources(value):
            made = _operator_of(source)
            if made.op == "call_function" and made is not node:
                together.union(position[node], position[made])
                grouped.update((position[node], position[made]))
    groups: dict[int, list[int]] = {}
    for i in sorted(grouped):
        groups.setdefault(together.find(i), []).append(i)
    return {nodes[members[0]].name: {nodes[i].name for i in members} for members in groups.values()}


def sparse_values(program: Any) -> dict[str, set[str]]:
    """Per operator of the exported ``program`` whose result is a sparse tensor (a layout other than strided),
    named by that operator, the names of it and of the operators that read the result: pipeline stages exchange
    strided tensors only (gloo sends no other), so the result stays on the stage that makes it. A ``getitem`` of
    such a result counts as the operator it selects from."""
    import torch

    groups: dict[str, set[str]] = {}
    for node in program.graph.nodes:
        example = node.meta.get("val")
        if node.op != "call_function" or not isinstance(example, torch.Tensor) or example.layout == torch.strided:
            continue
        made = node.args[0] if node.target is operator.getitem else node
        group = groups.setdefault(made.name, {made.name})
        group.update(user.name for user in node.users if user.op == "call_function")
    return groups


def input_storage_reads(program: Any) -> list[tuple[str, str, str]]:
    """Per operator of the exported ``program`` that reads the memory of a model input by storage offset and strides
    (:data:`placement.torch.contiguity.READS_STORAGE`), of the input itself or of a view of it: the operator's schema
    name, the node's name and the input's name (its argument of ``forward``). A pipeline gives each stage its
    micro-batches as views of the step's batch (stage 0) or as dense copies of their values (a later stage), so what
    such an operator reads there is not what it reads in the model."""
    from placement.torch.contiguity import alias_sources, storage_read

    inputs = {spec.arg.name for spec in program.graph_signature.input_specs
              if spec.kind.name == "USER_INPUT" and getattr(spec.arg, "name", None) is not None}
    found = []
    for node in program.graph.nodes:
        value = storage_read(node)
        root = alias_sources(value)[-1] if value is not None else None
        if root is not None and root.op == "placeholder" and root.name in inputs:
            found.append((node.target._schema.name.split("::")[-1], node.name, str(root.target)))
    return found


def received_writes(program: Any, pg: Any, found: list[tuple[Any, Any, Any, Any]] | None = None
                    ) -> list[tuple[int, int]]:
    """The pairs ``(u, v)`` of forward nodes of ``pg`` (imported from ``program``) where an operator of
    ``v`` writes in place into a floating-point activation an operator of ``u`` computes, or into a value
    sharing its memory, ``u != v``. Where ``v`` runs on a later stage than ``u``, a torch pipeline
    stage receives that value as a leaf that requires a gradient (in training), and autograd refuses
    to write into one: ``pipe_split_module`` copies it at the boundary, the split points of the model
    itself cannot. ``found``: the program's :func:`activations`, where the caller has them."""
    import torch

    from placement.io.torch_export import is_identity_dropout

    node_of = {op.name: v for v in range(len(pg.nodes)) for op in pg.node_ops(v)}
    pairs: set[tuple[int, int]] = set()
    for root, _, writers, _ in found if found is not None else activations(program):
        example = root.meta.get("val")
        if root.op != "call_function" or not (isinstance(example, torch.Tensor) and example.is_floating_point()):
            continue
        u = node_of.get(_operator_of(root).name)
        if u is None:
            continue
        for w in writers:
            v = node_of.get(w.name)
            if v is not None and v != u and not is_identity_dropout(w):
                pairs.add((u, v))
    return sorted(pairs)


def non_contiguous_reads(program: Any, pg: Any) -> list[tuple[int, int]]:
    """The pairs ``(u, v)`` of forward nodes of ``pg`` (imported from ``program``) where an operator of ``v``
    reads a tensor an operator of ``u`` computes, ``u != v``, laid out non-contiguous when traced (a
    transpose, an RNN's batch-first output). Where ``v`` runs on a later stage than ``u``, torch's pipeline
    runtime sends that value as it is, and gloo sends contiguous tensors only (``input tensor has to be
    contiguous`` at the first step): the split points leave the model's layout as it is, where
    ``pipe_split_module`` sends such a value contiguous. Sparse values are not listed: they are refused as
    such (the ``sparse_values`` colour classes)."""
    from placement.torch.contiguity import laid_out_apart

    node_of = {op.name: v for v in range(len(pg.nodes)) for op in pg.node_ops(v)}
    pairs: set[tuple[int, int]] = set()
    for reader in program.graph.nodes:
        v = node_of.get(reader.name) if reader.op == "call_function" else None
        if v is None:
            continue
        for value in reader.all_input_nodes:
            if value.op != "call_function" or not laid_out_apart(value.meta.get("val")):   # sparse: refused apart
                continue
            u = node_of.get(_operator_of(value).name)
            if u is not None and u != v:
                pairs.add((u, v))
    return sorted(pairs)


def _byte_range(tensor: Any) -> tuple[int, int]:
    """The bytes of its storage that ``tensor`` (not empty; torch's strides are never negative) may read:
    from its first element to one past its last."""
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.storage_offset() * tensor.element_size(), (tensor.storage_offset() + span) * tensor.element_size()


def shared_storage(model: Any, written: Mapping[str, set[str]], trained: bool = False) -> list[list[str]]:
    """The groups of distinct parameters and buffers of ``model`` (names) whose memory overlaps (views of
    one tensor, connected by overlapping byte ranges of one storage), where one of them is written in place
    (``written``, :func:`written_state`), or, with ``trained``, is a parameter that needs a gradient (an
    optimiser step writes it in place): every stage copies each of them on its own, so a write into one
    would not show in the copies of the others. Views of disjoint parts of one storage (an RNN's weights
    flattened into one buffer) are apart already, and tensors on the ``meta`` device hold no memory; sparse
    tensors (a graph's adjacency) have no strided memory to compare, and every stage copies them as any other."""
    import torch

    by_storage: dict[tuple[str, int], dict[int, tuple[str, tuple[int, int]]]] = {}
    for name, tensor in (*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)):
        if (tensor is not None and tensor.numel() > 0 and tensor.device.type != "meta"
                and tensor.layout == torch.strided):
            storage = (str(tensor.device), tensor.untyped_storage().data_ptr())
            by_storage.setdefault(storage, {}).setdefault(id(tensor), (name, _byte_range(tensor)))
    stepped = ({name for name, p in model.named_parameters(remove_duplicate=False) if p.requires_grad}
               if trained else set())
    groups = []
    for tensors in by_storage.values():
        ranked = sorted(tensors.values(), key=lambda entry: entry[1])
        end = -1
        for name, (start, stop) in ranked:   # overlapping ranges, swept in order of their start
            if start >= end:
                groups.append([])
            groups[-1].append(name)
            end = max(end, stop)
    return [sorted(names) for names in groups
            if len(names) > 1 and any(name in written or name in stepped for name in names)]


def buffer_readers(pg: Any, written: Mapping[str, set[str]]) -> dict[str, tuple[int, ...]]:
    """Per parameter or buffer of ``written`` (:func:`written_state`) whose operators lie in two or more
    forward nodes of ``pg``, those nodes (ascending)."""
    node_of = {op.name: v for v in range(len(pg.nodes)) for op in pg.node_ops(v)}
    readers = {name: sorted({node_of[op] for op in ops if op in node_of}) for name, ops in sorted(written.items())}
    return {name: tuple(nodes) for name, nodes in readers.items() if len(nodes) >= 2}


def keep_written_buffers_together(instance: Mapping[str, Any], pg: Any, readers: Mapping[str, tuple[int, ...]],
                                  activations: Mapping[str, tuple[int, ...]] | None = None,
                                  views: Mapping[str, tuple[int, ...]] | None = None,
                                  sparse: Mapping[str, tuple[int, ...]] | None = None) -> dict:
    """``instance`` (of ``pg``, written by :func:`placement.io.opgraph.to_instance`, possibly with
    added nodes) with the readers of each buffer in ``readers``, the nodes of each group of
    ``activations`` (:func:`written_activations` through :func:`buffer_readers`), those of each group
    of ``views`` (:func:`storage_views`, likewise) and those of each group of ``sparse``
    (:func:`sparse_values`, likewise), in one colour class, with their backward nodes and every
    node of their classes; ``about.written_buffers``, ``about.written_activations``,
    ``about.storage_views`` and ``about.sparse_values`` record them."""
    activations = activations or {}
    views = views or {}
    sparse = sparse or {}
    if not readers and not activations and not views and not sparse:
        return dict(instance)
    classes = UnionFind(len(pg.nodes))
    groups = [*readers.values(), *activations.values(), *views.values(), *sparse.values()]
    for nodes in groups:
        for v in nodes[1:]:
            classes.union(v, nodes[0])
    merged = {v: classes.find(v) for nodes in groups for v in nodes}
    nodes = []
    for node in instance["nodes"]:
        colour = node.get("colorClass", node["id"] if node["id"] < len(pg.nodes) else None)
        if colour in merged:
            node = dict(node, colorClass=merged[colour])
        nodes.append(node)
    about = dict(instance.get("about", {}))
    if readers:
        about["written_buffers"] = {name: list(v) for name, v in readers.items()}
    if activations:
        about["written_activations"] = {name: list(v) for name, v in activations.items()}
    if views:
        about["storage_views"] = {name: list(v) for name, v in views.items()}
    if sparse:
        about["sparse_values"] = {name: list(v) for name, v in sparse.items()}
    return {**instance, "about": about, "nodes": nodes}


def in_place_groups(program: Any, pg: Any, found: list[tuple[Any, Any, Any, Any]] | None = None
                    ) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]],
                               dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """The forward nodes of ``pg`` (imported from ``program``) that must share a stage: per parameter
    or buffer the program writes in place, its readers (:func:`written_state`), per activation
    it writes in place, the nodes ordered against the write (:func:`written_activations`), per
    memory read by storage offset and strides, the nodes it comes from and its readers (:func:`storage_views`),
    and per sparse result, the node that makes it and its readers (:func:`sparse_values`), each through
    :func:`buffer_readers`. ``found``: the program's :func:`activations`, where the caller has them."""
    return (buffer_readers(pg, written_state(program)), buffer_readers(pg, written_activations(program, found)),
            buffer_readers(pg, storage_views(program)), buffer_readers(pg, sparse_values(program)))


def together_note(readers: Mapping[str, tuple[int, ...]], pg: Any,
                  activations: Mapping[str, tuple[int, ...]] | None = None,
                  views: Mapping[str, tuple[int, ...]] | None = None,
                  sparse: Mapping[str, tuple[int, ...]] | None = None) -> str:
    """Why some nodes share a stage, for a message when no plan fits."""
    notes = []
    if readers:
        parts = [f"{name!r} (written in place; read by {', '.join(pg.nodes[v].name for v in nodes)})"
                 for name, nodes in readers.items()]
        notes.append("the nodes that read a parameter or buffer the model writes in place share one stage, "
                     "which holds its only up-to-date copy: " + "; ".join(parts))
    if activations:
        parts = [f"{', '.join(pg.nodes[v].name for v in nodes)} (around the value of {name!r})"
                 for name, nodes in activations.items()]
        notes.append("the nodes that write an activation in place share a stage with those that must see "
                     "it before or after the write: " + "; ".join(parts))
    if views:
        parts = [f"{', '.join(pg.nodes[v].name for v in nodes)} (around the memory of {name!r})"
                 for name, nodes in views.items()]
        notes.append("the nodes of an operator that reads a tensor's memory by storage offset and strides "
                     "(as_strided) share a stage with those that make that memory and the views of it it reads, "
                     "which a later stage receives as a copy of their values alone: " + "; ".join(parts))
    if sparse:
        parts = [f"{', '.join(pg.nodes[v].name for v in nodes)} (around the sparse result of {name!r})"
                 for name, nodes in sparse.items()]
        notes.append("the node that makes a sparse tensor shares a stage with those that read it, as stages "
                     "exchange strided tensors only: " + "; ".join(parts))
    return "; ".join(notes)
