"""Hypothesis strategies: tiny random placement problems and plans for them.

All numbers are small integers or multiples of 0.25, so every sum the
evaluator and the solvers form is exact in floating point and results can be
compared with ``==``.
"""

from __future__ import annotations

import dataclasses
import math
import random

from hypothesis import strategies as st

from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance
from placement.plan import DeviceAssignment, Plan

quarters = st.integers(0, 16).map(lambda q: q / 4)          # 0, 0.25, ..., 4
cpu_quarters = st.integers(0, 32).map(lambda q: q / 4)      # 0, 0.25, ..., 8


def node_id(position: int) -> int:
    """Ids differ from positions (catches id/index mix-ups)."""
    return 2 * position + 1


@st.composite
def problems(draw, max_nodes: int = 9, training: bool | None = None, max_accelerators: int = 3,
             max_cpus: int = 2) -> Instance:
    """A random valid :class:`Instance` with at most ``max_nodes`` nodes.

    Forward nodes form a random DAG (edges go from lower to higher forward
    index). In the training shape (``training`` True, or drawn when None) most
    forward nodes get a backward mate of the same colour, forward edges are
    mirrored between mates, some forward nodes feed their own mate (activation
    edges), and sometimes one *orphan* backward node (uncoloured or with a colour
    of its own) sits first or last in the backward pass. Occasionally a colour
    class joins two forward nodes (and their mates). Devices: 1..max_accelerators
    accelerators (memory bound sometimes binding), 0..max_cpus CPU cores; some
    nodes are unsupported on accelerators. Every node fits some existing device.
    """
    if training is None:
        training = draw(st.booleans())
    accelerators = draw(st.integers(1, max_accelerators))
    cpus = draw(st.integers(0, max_cpus))
    bound = draw(st.one_of(st.just(math.inf), st.integers(1, 6).map(float)))

    n_forward = draw(st.integers(1, max(1, max_nodes // 2) if training else max_nodes))
    pairs = [(i, j) for i in range(n_forward) for j in range(i + 1, n_forward)]
    fw_edges = sorted(draw(st.sets(st.sampled_from(pairs), max_size=2 * n_forward))) if pairs else []

    # node descriptors: (kind, forward index); kinds "f" forward, "b" mate, "o" orphan
    kinds: list[tuple[str, int]] = [("f", i) for i in range(n_forward)]
    mates: dict[int, int] = {}
    orphan_at: str | None = None
    if training:
        room = max_nodes - n_forward
        for i in range(n_forward):
            if room > 0 and draw(st.integers(0, 4)) > 0:
                mates[i] = len(kinds)
                kinds.append(("b", i))
                room -= 1
        if room > 0 and draw(st.booleans()):
            orphan_at = draw(st.sampled_from(["first", "last"]))
            kinds.append(("o", -1))
    n = len(kinds)

    colour: list[int | None] = [None] * n
    if training:
        for i in range(n_forward):
            colour[i] = i
            if i in mates:
                colour[mates[i]] = i
        if orphan_at is not None and draw(st.booleans()):
            colour[n - 1] = n_forward + 100   # an orphan class with a colour of its own
    else:
        for i in range(n_forward):
            colour[i] = i if draw(st.booleans()) else None
    if n_forward >= 2 and draw(st.integers(0, 3)) == 0:   # an extra class joining two forward nodes
        u, w = sorted(draw(st.lists(st.integers(0, n_forward - 1), min_size=2, max_size=2, unique=True)))
        joined = 1000 + u
        for pos in (u, w):
            colour[pos] = joined
            if pos in mates:
                colour[mates[pos]] = joined

    edges: set[tuple[int, int]] = set(fw_edges)
    if training:
        for u, w in fw_edges:                           # mirrored backward edges
            if u in mates and w in mates:
                edges.add((mates[w], mates[u]))
        for i, b in mates.items():                      # activation edges v -> mate(v)
            if draw(st.integers(0, 2)) == 0:
                edges.add((i, b))
        if orphan_at is not None:
            o = n - 1
            if draw(st.booleans()):
                edges.add((n_forward - 1, o))           # e.g. the output feeds the loss gradient
            for b in sorted(mates.values()):
                if draw(st.booleans()):
                    edges.add((o, b) if orphan_at == "first" else (b, o))

    nodes: list[Node] = []
    for pos, (kind, _) in enumerate(kinds):
        memory = float(draw(st.integers(0, 3)))
        supported = draw(st.integers(0, 5)) > 0
        if cpus == 0:                      # the accelerators must be able to take every node
            supported = True
            memory = min(memory, bound)
        acc = draw(quarters) if supported else None
        nodes.append(Node(id=node_id(pos), name=f"{kind}{pos}", times=(acc, draw(cpu_quarters)),
                          memory=memory, backward=kind != "f", colour=colour[pos],
                          out_cost=draw(quarters)))
    order = draw(st.permutations(range(n)))  # input order need not be topological
    types = (DeviceType(ACCELERATOR, accelerators, bound, True), DeviceType(CPU, cpus, math.inf, False))
    return Instance(tuple(nodes[i] for i in order),
                   tuple(Edge(node_id(a), node_id(b)) for a, b in sorted(edges)),
                   types, name="hypothesis")


@st.composite
def plans(draw, problem: Instance, unplaced: bool = True) -> Plan:
    """A random plan for ``problem``: each node on one of the existing devices (or, rarely, on none)."""
    slots = [t.name for t in problem.device_types for _ in range(t.count)]
    held: list[list[int]] = [[] for _ in slots]
    top = len(slots) if unplaced else len(slots) - 1
    for node in problem.nodes:
        k = draw(st.integers(0, top))
        if k < len(slots):
            held[k].append(node.id)
    order = draw(st.permutations(range(len(slots))))
    return Plan(tuple(DeviceAssignment(slots[k], tuple(held[k])) for k in order))


@st.composite
def colour_respecting_plans(draw, problem: Instance) -> Plan:
    """A random plan that keeps colour classes together and places every node."""
    slots = [t.name for t in problem.device_types for _ in range(t.count)]
    held: list[list[int]] = [[] for _ in slots]
    for members in problem.colour_classes():
        k = draw(st.integers(0, len(slots) - 1))
        held[k].extend(problem.nodes[i].id for i in members)
    order = draw(st.permutations(range(len(slots))))
    return Plan(tuple(DeviceAssignment(slots[k], tuple(held[k])) for k in order))


@st.composite
def three_type_problems(draw, max_nodes: int = 6, training: bool | None = None) -> Instance:
    """A problem of :func:`problems` with a third device type ``slow``: 0–1 devices that pay
    communication, with their own memory bound and a time per node that is the accelerator
    time times 1, 1.5 or 2, or unsupported (when the node is unsupported on accelerators, or
    drawn so)."""
    base = draw(problems(max_nodes=max_nodes, training=training, max_accelerators=2, max_cpus=1))
    count = draw(st.integers(0, 1))
    bound = draw(st.one_of(st.just(math.inf), st.integers(2, 6).map(float)))
    nodes = []
    for n in base.nodes:
        acc = n.times[0]
        slow = None if acc is None or draw(st.integers(0, 4)) == 0 else acc * draw(st.sampled_from([1.0, 1.5, 2.0]))
        nodes.append(Node(n.id, n.name, (acc, n.times[1], slow), n.memory, n.backward, n.colour, n.out_cost))
    types = base.device_types + (DeviceType("slow", count, bound, True),)
    return Instance(tuple(nodes), base.edges, types, name="hypothesis-3")


def trust_instances(*names: str) -> list[Instance]:
    """The instances of ``../shared/trust`` named (counterexamples found by cross-checks, to pin with
    ``@example``), those that are present; none where the shared data are absent."""
    from pathlib import Path

    from placement.loading import load

    folder = Path(__file__).resolve().parents[2] / "shared" / "trust"
    return [load(folder / name) for name in names if (folder / name).is_file()]


def shuffled(problem: Instance, seed: int) -> Instance:
    """``problem`` with its nodes and edges listed in another order (the same graph, the same ids)."""
    rng = random.Random(seed)
    nodes, edges = list(problem.nodes), list(problem.edges)
    rng.shuffle(nodes)
    rng.shuffle(edges)
    return dataclasses.replace(problem, nodes=tuple(nodes), edges=tuple(edges))
