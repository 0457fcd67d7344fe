"""The ``If`` nodes of an ONNX graph whose condition is known, replaced by the branch they take.

The TorchScript exporter writes a Python ``if`` on a tensor's rank or size as an ``If`` node whose
condition the graph computes from a ``Shape`` (``nn.LocalResponseNorm`` at opset 11 and later branches
on ``x.dim() == 3``). With static shapes the condition is a constant, which the evaluation of shape
arithmetic (:mod:`placement.io.onnx_shapes`) finds, and the model runs only one branch: the importer
costs the nodes of that branch, in the ``If``'s module (its node name's ``/a/b/`` prefix and its
metadata), rather than refusing an operator whose work it cannot see.

The branch's nodes keep their names for what they compute; each of its outputs computed by one of its
nodes is renamed to the ``If`` output it becomes, and any other (a value from outside the branch, or
an output listed twice) is passed on by an ``Identity``, a view. A branch whose inner subgraphs read a
value so renamed, or whose names are taken outside it, stays an ``If``.
"""

from __future__ import annotations

from typing import Any


def subgraphs(node: Any) -> list[Any]:
    """The graphs ``node`` holds as attributes (an ``If``'s branches, a ``Loop``'s body), in attribute order."""
    return [sub for attr in node.attribute for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)]


def graph_attribute(node: Any, name: str) -> Any | None:
    """The graph ``node`` holds as its attribute ``name`` (an ``If``'s ``then_branch``, a ``Loop``'s ``body``), or
    ``None``."""
    return next((attr.g for attr in node.attribute if attr.name == name and attr.HasField("g")), None)


def names_in(graph: Any, skip: int | None = None) -> set[str]:
    """Every tensor name ``graph`` and its subgraphs define or read; of the node at position ``skip``, only
    its own inputs and outputs."""
    names = {value.name for value in (*graph.input, *graph.output, *graph.value_info)}
    names |= {init.name for init in graph.initializer}
    names |= {sparse.values.name for sparse in graph.sparse_initializer}
    for k, node in enumerate(graph.node):
        names.update(node.input)
        names.update(node.output)
        if k != skip:
            for sub in subgraphs(node):
                names |= names_in(sub)
    names.discard("")
    return names


def _branch(node: Any, condition: Any) -> Any | None:
    """The subgraph an ``If`` runs for the known ``condition`` (a one-element array), or ``None``."""
    if condition.size != 1:
        return None
    wanted = "then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"
    return graph_attribute(node, wanted)


def _taken(node: Any, branch: Any, outside: set[str]) -> tuple[list[Any], list[Any]] | None:
    """The nodes and initializers that replace the ``If`` ``node`` running ``branch`` (module docstring),
    or ``None`` where it stays."""
    from onnx import helper

    if len(branch.output) != len(node.output):
        return None
    computed = {name for inner in branch.node for name in inner.output if name}
    if (computed | {init.name for init in branch.initializer}) & outside or branch.sparse_initializer:
        return None
    renamed: dict[str, str] = {}
    passed: list[tuple[str, str]] = []
    for inner_name, outer_name in zip((value.name for value in branch.output), node.output):
        if not outer_name:
            continue
        if inner_name in computed and inner_name not in renamed:
            renamed[inner_name] = outer_name
        else:
            passed.append((renamed.get(inner_name, inner_name), outer_name))
    if any(names_in(sub) & set(renamed) for inner in branch.node for sub in subgraphs(inner)):
        return None
    prefix = node.name.rpartition("/")[0] + "/" if node.name.startswith("/") else ""
    nodes = []
    for j, inner in enumerate(branch.node):
        copy = type(inner)()
        copy.CopyFrom(inner)
        copy.input[:] = [renamed.get(name, name) for name in inner.input]
        copy.output[:] = [renamed.get(name, name) for name in inner.output]
        copy.name = prefix + (inner.name.rpartition("/")[2] or f"{inner.op_type}_{j}")
        if not copy.metadata_props:
            copy.metadata_props.extend(node.metadata_props)
        nodes.append(copy)
    for source, target in passed:
        identity = helper.make_node("Identity", [source], [target], name=f"{prefix}Identity_{target}")
        identity.metadata_props.extend(node.metadata_props)
        nodes.append(identity)
    return nodes, list(branch.initializer)


def take_known_branches(graph: Any, values: dict[str, Any]) -> bool:
    """Replace, in place, each ``If`` node of ``graph`` (the default domain) whose condition is among the
    known ``values`` by the nodes of the branch it takes (module docstring). Whether any was."""
    replaced: dict[int, list[Any]] = {}
    initializers: list[Any] = []
    for k, node in enumerate(graph.node):
        if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        condition = values.get(node.input[0])
        branch = _branch(node, condition) if condition is not None else None
        if branch is None:
            continue
        taken = _taken(node, branch, names_in(graph, skip=k))
        if taken is not None:
            replaced[k], more = taken
            initializers += more
    if not replaced:
        return False
    nodes = [inner for k, node in enumerate(graph.node) for inner in replaced.get(k, [node])]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(initializers)
    return True
