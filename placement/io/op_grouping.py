"""Operators of an :class:`~placement.io.opgraph.OpGraph` grouped into placement nodes.

Granularity
-----------
* ``operator``: one node per operator.
* ``module``: one node per *run*: a maximal sequence of consecutive operators (in program
  order) with the same module key. The key of an operator is the innermost module call
  enclosing it, after truncating its module path to ``module_depth`` levels (``None``: no
  truncation, i.e. leaf modules). Operators outside every module have the key ``""``,
  named ``(model)``. A key met again after another key starts a new node (named
  ``key#1``, ``key#2``, ...). Because nodes are intervals of a topological order, the
  node graph is acyclic.

The nodes' edges (with their sizes) and ``out_bytes`` are those of
:mod:`placement.io.opgraph` ("Node quantities").
"""

from __future__ import annotations

from typing import Iterable

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.io.opgraph import GraphNode, Op, OpGraph, PlacementGraph

GRANULARITIES = ("operator", "module")
ROOT_NAME = "(model)"


def _module_key(op: Op, depth: int | None) -> str:
    path = op.module_path if depth is None else op.module_path[:depth]
    return path[-1] if path else ""


def _module_calls(ops: tuple[Op, ...], aliases: tuple[tuple[str, ...], ...] = ()
                  ) -> tuple[list[set[str]], dict[str, int]]:
    """Per operator, the modules whose call begins at it; and the number of calls of each module,
    a module registered under several names (``aliases``) counting its calls under all of them."""
    begins: list[set[str]] = []
    calls: dict[str, int] = {}
    previous: set[str] = set()
    for op in ops:
        current = set(op.module_calls)
        started = {fqn for fqn, call in zip(op.module_path, op.module_calls) if call not in previous}
        for fqn in started:
            calls[fqn] = calls.get(fqn, 0) + 1
        begins.append(started)
        previous = current
    for names in aliases:
        total = sum(calls.get(fqn, 0) for fqn in names)
        calls.update((fqn, total) for fqn in names if fqn in calls)
    return begins, calls


def check_grouping(granularity: str, module_depth: int | None) -> None:
    """Refuse a ``granularity`` or ``module_depth`` that :func:`group_ops` cannot group by (before a model is
    exported or read, which can take seconds)."""
    if granularity not in GRANULARITIES:
        raise InvalidParameterError("granularity", f"must be one of {', '.join(map(repr, GRANULARITIES))}, "
                                                   f"not {granularity!r}")
    if module_depth is not None and module_depth < 1:
        raise InvalidParameterError("module_depth", f"must be a positive integer or None, not {module_depth!r}")
    if module_depth is not None and granularity != "module":
        raise InvalidParameterError("module_depth", f"applies to granularity='module' only, not {granularity!r}")


def group_ops(graph: OpGraph, granularity: str = "operator", module_depth: int | None = None) -> PlacementGraph:
    """Group the operators of ``graph`` into placement nodes (module docstring, "Granularity")."""
    check_grouping(granularity, module_depth)
    ops = graph.ops
    if not ops:
        raise InvalidInstanceError(f"the model {graph.name!r} has no operators to place")
    runs: list[tuple[str, list[int]]] = []
    for i, op in enumerate(ops):
        key = op.name if granularity == "operator" else _module_key(op, module_depth)
        if runs and granularity == "module" and runs[-1][0] == key:
            runs[-1][1].append(i)
        else:
            runs.append((key, [i]))

    begins, calls = _module_calls(ops, graph.aliases)
    order = {fqn: k for k, fqn in enumerate(_outer_first(ops))}
    first_call: dict[str, tuple[int, int]] = {}   # module -> its first operator, and its place outermost first
    for i, op in enumerate(ops):
        for fqn in op.module_path:
            first_call.setdefault(fqn, (i, order[fqn]))
    first_name = {fqn: min((name for name in names if name in first_call), key=first_call.__getitem__)
                  for names in graph.aliases for fqn in names if fqn in first_call}
    seen: dict[str, int] = {}
    nodes: list[GraphNode] = []
    for key, members in runs:
        first = ops[members[0]]
        if granularity == "operator":
            name, module = key, (first.module_path[-1] if first.module_path else "")
        else:
            module = key
            base = key or ROOT_NAME
            count = seen.get(base, 0)
            seen[base] = count + 1
            name = base if count == 0 else f"{base}#{count}"
        starts = tuple(sorted((fqn for fqn in begins[members[0]] if calls[fqn] == 1), key=order.__getitem__))
        repeats = tuple(dict.fromkeys(first_name.get(fqn, fqn) for fqn in sorted(
            (fqn for fqn in begins[members[0]] if calls[fqn] > 1), key=order.__getitem__)))
        inner = tuple(sorted((fqn for i in members[1:] for fqn in begins[i] if calls[fqn] == 1), key=order.__getitem__))
        nodes.append(GraphNode(name, module, tuple(members), starts, repeats, inner))

    node_of = [0] * len(ops)
    for v, node in enumerate(nodes):
        for i in node.ops:
            node_of[i] = v
    edge_tensors: dict[tuple[int, int], set[tuple[int, int]]] = {}
    leaving: list[set[tuple[int, int]]] = [set() for _ in nodes]
    for j, op in enumerate(ops):
        b = node_of[j]
        for producer, index in op.inputs:
            a = node_of[producer]
            if a == b:
                continue
            tensors = edge_tensors.setdefault((a, b), set())
            if index >= 0:
                tensors.add((producer, index))
                leaving[a].add((producer, index))
    carried = sorted(edge_tensors.items())
    edges = tuple((a, b, float(sum(ops[i].outputs[k] for i, k in tensors))) for (a, b), tensors in carried)
    out_bytes = tuple(float(sum(ops[i].outputs[k] for i, k in tensors)) for tensors in leaving)
    return PlacementGraph(graph, tuple(nodes), edges, out_bytes, granularity,
                          module_depth if granularity == "module" else None,
                          tuple(tuple(sorted(tensors)) for _, tensors in carried))


def _outer_first(ops: Iterable[Op]) -> list[str]:
    """Module names ordered outermost first (by depth, then first appearance)."""
    depth: dict[str, tuple[int, int]] = {}
    for op in ops:
        for level, fqn in enumerate(op.module_path):
            depth.setdefault(fqn, (level, len(depth)))
    return sorted(depth, key=depth.__getitem__)
