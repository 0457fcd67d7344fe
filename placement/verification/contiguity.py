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


class _ExtendedForwardGraph:
    """The vertices of H, numbered in order of first appearance, and H's edges between vertex numbers.

    A forward node ``v`` is the vertex ``"node v"``; an orphan class is the
    virtual vertex ``"colour c"``, or ``"node b"`` for an uncoloured backward
    node ``b``, and takes the devices of all the class's nodes.
    """

    def __init__(self, problem: Instance) -> None:
        nodes = problem.nodes
        forward_of: dict[int, int] = {}   # colour -> its first forward node in instance order
        for n in nodes:
            if not n.backward and n.colour is not None and n.colour not in forward_of:
                forward_of[n.colour] = n.id
        #: per vertex, the node position it is, or -1 for an orphan class (its nodes in ``classes``)
        self.position: list[int] = []
        #: orphan class vertex -> (colour, node positions)
        self.classes: dict[int, tuple[int, list[int]]] = {}
        of_node: dict[int, int] = {}       # node id -> its own vertex
        of_colour: dict[int, int] = {}     # colour -> its orphan class's vertex
        mate = [0] * len(nodes)            # node position -> its vertex of H
        orphan = [False] * len(nodes)
        pending: list[tuple[int, int]] = []   # (position, colour): backward nodes of a forward node's class
        for i, n in enumerate(nodes):
            if n.backward and n.colour is not None and n.colour in forward_of:
                pending.append((i, n.colour))
                continue
            if not n.backward or n.colour is None:
                vertex = of_node[n.id] = len(self.position)
                self.position.append(i)
            elif n.colour in of_colour:
                vertex = of_colour[n.colour]
                self.classes[vertex][1].append(i)
            else:
                vertex = of_colour[n.colour] = len(self.position)
                self.position.append(-1)
                self.classes[vertex] = (n.colour, [i])
            mate[i] = vertex
            orphan[i] = n.backward
        for i, colour in pending:
            mate[i] = of_node[forward_of[colour]]
        src, dst = problem.edge_positions()
        #: H's edges (vertex numbers), in edge order
        self.edges: list[tuple[int, int]] = []
        for a, b in zip(src.tolist(), dst.tolist()):
            back_a, back_b = nodes[a].backward, nodes[b].backward
            if not back_a and not back_b:
                self.edges.append((mate[a], mate[b]))
            elif back_a and back_b and (orphan[a] or orphan[b]):
                self.edges.append((mate[b], mate[a]))   # mirrored
        self._nodes = nodes

    def name(self, vertex: int) -> str:
        position = self.position[vertex]
        return f"node {self._nodes[position].id}" if position >= 0 else f"colour {self.classes[vertex][0]}"

    def members(self, vertex: int) -> list[int]:
        """The node positions whose devices ``vertex`` takes."""
        position = self.position[vertex]
        return [position] if position >= 0 else self.classes[vertex][1]


def _quotient(problem: Instance, where: dict[int, list[int]], n_devices: int
              ) -> tuple[list[str], list[list[int]]]:
    """Labels and successor lists of the quotient of H by device.

    Vertices ``0 .. n_devices-1`` are the plan's devices; an H-vertex on no
    device becomes a pseudo-device of its own, labelled ``"unplaced <vertex>"``.
    """
    h = _ExtendedForwardGraph(problem)
    nodes = problem.nodes
    labels = [str(d) for d in range(n_devices)]
    on: list[list[int]] = []
    for vertex, position in enumerate(h.position):
        if position >= 0:
            devices = where[nodes[position].id]
            if len(devices) > 1:
                devices = sorted(set(devices))
        else:
            devices = sorted({d for i in h.classes[vertex][1] for d in where[nodes[i].id]})
        if not devices:
            labels.append(f"unplaced {h.name(vertex)}")
            devices = [len(labels) - 1]
        on.append(devices)
    # successors in the order first met (dicts as ordered sets: a node repeated on many devices
    # would make list lookups cubic)
    succ: list[dict[int, None]] = [{} for _ in labels]
    for x, y in h.edges:
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
