"""The contiguity classes ``sets`` and ``stages`` of a plan, as the evaluator checks them (DESIGN.md §2).

Part of the independent evaluator (:mod:`placement.verification.evaluate`): it imports
nothing from :mod:`placement.solvers` and recomputes everything from the :class:`Instance`.

Model implemented
-----------------
* ``sets`` — every device's forward nodes form a convex set of the forward graph
  (forward nodes, edges between them): no forward path leaves it and re-enters.
* ``stages`` — the devices can be ordered so that stage indices never decrease
  along the edges of the extended forward graph H. H has the forward nodes, one
  virtual vertex per *orphan* colour class (a class with backward nodes and no
  forward node; an uncoloured backward node is one), the forward→forward edges,
  and for every backward→backward edge ``a→b`` touching an orphan class the
  mirrored edge ``mate(b)→mate(a)`` (``mate(x)``: the first forward node of x's
  class in instance order, or the class's virtual vertex). Equivalently the
  quotient of H by device is acyclic. An H-vertex that is on no device is its own
  pseudo-device in that quotient, and one on several devices (an invalid plan)
  is on each of them, so ``stages`` ⊆ ``sets`` ⊆ ``none`` (no condition) holds for every plan.

A plan in ``stages`` has its devices put in such an order by :func:`pipeline_order`.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Mapping

from placement.problem.instance import Instance, find_cycle, least_first_order
from placement.plan import Plan


def convexity_witness(nodes: Iterable[int], succ: Mapping[int, list[int]],
                      rank: Mapping[int, int] | None = None) -> list[int] | None:
    """A path that leaves the set ``nodes`` and re-enters it, or ``None`` when the set is convex.

    Breadth-first search over the vertices outside the set, started from the set's successors
    (in the order ``nodes`` gives them, so that the witness reported is deterministic). With
    ``rank``, a topological numbering of every vertex, the search skips the vertices ranked after
    the set's last member: every vertex on a path back into the set ranks before the member it
    reaches, so the witness is the same, and the work stays within the set's span of the order.
    """
    nodes = list(nodes)
    members = set(nodes)
    limit = max((rank[v] for v in nodes), default=-1) if rank is not None else None
    parent: dict[int, int] = {}
    queue: deque[int] = deque()
    for v in nodes:
        for w in succ[v]:
            if w not in members and w not in parent and (limit is None or rank[w] < limit):  # type: ignore[index]
                parent[w] = v
                queue.append(w)
    while queue:
        y = queue.popleft()
        for z in succ[y]:
            if z in members:
                path = [z, y]
                while path[-1] not in members:
                    path.append(parent[path[-1]])
                return path[::-1]
            if z not in parent and (limit is None or rank[z] < limit):  # type: ignore[index]
                parent[z] = y
                queue.append(z)
    return None


def topological_rank_by_id(problem: Instance) -> dict[int, int] | None:
    """Each node id's place in the instance's topological order, or ``None`` if the order does not
    reach every node (a cycle)."""
    if len(problem.topological_positions()) != len(problem.nodes):
        return None
    return {node.id: place for node, place in zip(problem.nodes, problem.topological_rank())}


def sets_violations(problem: Instance, plan: Plan, device_nodes: list[list[int]]) -> list[str]:
    """One line per device whose forward nodes are not convex in the forward graph."""
    fsucc: dict[int, list[int]] = {n.id: [] for n in problem.nodes if not n.backward}
    seen: set[tuple[int, int]] = set()   # a set, not the lists: a node may have thousands of successors
    for e in problem.edges:
        if e.src in fsucc and e.dst in fsucc and (e.src, e.dst) not in seen:
            seen.add((e.src, e.dst))
            fsucc[e.src].append(e.dst)
    rank = topological_rank_by_id(problem)
    out: list[str] = []
    for d, nodes in enumerate(device_nodes):
        witness = convexity_witness([v for v in nodes if v in fsucc], fsucc, rank)
        if witness is not None:
            out.append(f"sets: device {d} ({plan.devices[d].type}): forward path "
                       f"{' -> '.join(map(str, witness))} leaves and re-enters its forward nodes")
    return out


def _extended_forward_graph(problem: Instance) -> tuple[dict[str, list[int]], list[tuple[str, str]]]:
    """The vertices of H, each with the node ids whose devices it takes, and H's edges.

    A forward node ``v`` is the vertex ``"node v"``; an orphan class is the
    virtual vertex ``"colour c"``, or ``"node b"`` for an uncoloured backward
    node ``b``, and takes the devices of all the class's nodes.
    """
    forward_of: dict[int, int] = {}   # colour -> its first forward node in instance order
    for n in problem.nodes:
        if not n.backward and n.colour is not None and n.colour not in forward_of:
            forward_of[n.colour] = n.id
    vertices: dict[str, list[int]] = {}
    mate: dict[int, str] = {}         # node id -> its vertex of H
    orphan: set[int] = set()
    for n in problem.nodes:
        if n.backward and n.colour is not None and n.colour in forward_of:
            mate[n.id] = f"node {forward_of[n.colour]}"
            continue
        if not n.backward or n.colour is None:
            key = f"node {n.id}"
        else:
            key = f"colour {n.colour}"
        vertices.setdefault(key, []).append(n.id)
        mate[n.id] = key
        if n.backward:
            orphan.add(n.id)
    edges: list[tuple[str, str]] = []
    for e in problem.edges:
        a, b = problem.node(e.src), problem.node(e.dst)
        if not a.backward and not b.backward:
            edges.append((mate[a.id], mate[b.id]))
        elif a.backward and b.backward and (a.id in orphan or b.id in orphan):
            edges.append((mate[b.id], mate[a.id]))   # mirrored
    return vertices, edges


def _quotient(problem: Instance, where: dict[int, list[int]], n_devices: int
              ) -> tuple[list[str], list[list[int]]]:
    """Labels and successor lists of the quotient of H by device.

    Vertices ``0 .. n_devices-1`` are the plan's devices; an H-vertex on no
    device becomes a pseudo-device of its own, labelled ``"unplaced <vertex>"``.
    """
    vertices, edges = _extended_forward_graph(problem)
    labels = [str(d) for d in range(n_devices)]
    on: dict[str, list[int]] = {}
    for key, ids in vertices.items():
        devices = sorted({d for v in ids for d in where[v]})
        if not devices:
            labels.append(f"unplaced {key}")
            devices = [len(labels) - 1]
        on[key] = devices
    # successors in the order first met (dicts as ordered sets: a node repeated on many devices
    # would make list lookups cubic)
    succ: list[dict[int, None]] = [{} for _ in labels]
    for x, y in edges:
        for i in on[x]:
            for j in on[y]:
                if i != j:
                    succ[i].setdefault(j)
    return labels, [list(s) for s in succ]


def stages_violations(problem: Instance, where: dict[int, list[int]], n_devices: int) -> list[str]:
    labels, succ = _quotient(problem, where, n_devices)
    cycle = find_cycle(len(labels), succ)
    if cycle is None:
        return []
    return ["stages: no pipeline order of the devices exists: cycle "
            + " -> ".join(labels[i] for i in cycle + cycle[:1])]


def pipeline_order(problem: Instance, plan: Plan) -> tuple[int, ...] | None:
    """Device positions in a pipeline order (stage indices never decrease along H), or ``None``.

    Uses the nodes the plan lists (no colour inference); ties go to the lower position.
    """
    where: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    for d, dev in enumerate(plan.devices):
        for v in dict.fromkeys(dev.nodes):
            if v in where:
                where[v].append(d)
    labels, succ = _quotient(problem, where, len(plan.devices))
    order = least_first_order(len(labels), succ)
    if len(order) < len(labels):
        return None
    return tuple(i for i in order if i < len(plan.devices))
