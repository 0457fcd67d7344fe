"""The independent evaluator: loads and validity of a plan (DESIGN.md §2).

This module is the check of every solver, so it imports nothing from
:mod:`placement.solvers` and recomputes everything from the :class:`Instance`,
edge by edge, in the plainest way that is still fast enough for the published
instances.

Model implemented
-----------------
For a device of type ``t`` holding the node set ``S``::

    load(S)    = compute(S) + comm(S)
    compute(S) = Σ_{v∈S} times[t](v)                        (unsupported nodes add 0; a violation)
    comm(S)    = [t pays comm] (Σ_{u∈In(S)} c(u) + Σ_{u∈Out(S)} c(u))
    In(S)      = { u ∉ S : u has a successor in S }
    Out(S)     = { u ∈ S : u has a successor outside S }

with ``c(u) = node.out_cost``; each boundary node is paid once per device and
direction. ``forward_load`` is the compute of the forward nodes of ``S`` plus
``c(u)`` for the forward boundary nodes ``u``; ``backward_load`` is the rest.

Constraints checked (each failure is one line in ``Evaluation.violations``):
every instance node placed exactly once; no unknown node ids or device types;
supported nodes only; memory ``Σ node.memory`` within the device type's bound;
nodes of one colour on one device; at most ``count`` non-empty devices per
type; and the requested contiguity class:

* ``none`` — nothing more.
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
  is on each of them, so ``stages`` ⊆ ``sets`` ⊆ ``none`` holds for every plan.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance, find_cycle
from placement.plan import Plan

CONTIGUITY_CLASSES = ("none", "sets", "stages")


def check_contiguity(contiguity: str) -> str:
    """``contiguity`` when it names a contiguity class; else an :class:`InvalidParameterError`."""
    if contiguity not in CONTIGUITY_CLASSES:
        raise InvalidParameterError("contiguity", f"must be one of {', '.join(map(repr, CONTIGUITY_CLASSES))}, "
                                                  f"not {contiguity!r}")
    return contiguity


@dataclass(frozen=True)
class DeviceReport:
    """Verified figures of one device of a plan."""

    position: int            # index in plan.devices
    type: str                # device type name
    nodes: tuple[int, ...]   # node ids (listed known ids, de-duplicated, then inferred ones)
    compute: float
    comm: float
    load: float
    memory: float
    memory_bound: float
    forward_load: float
    backward_load: float


@dataclass(frozen=True)
class Evaluation:
    """The verdict on a plan: per-device figures, max load, violations, contiguity class."""

    devices: tuple[DeviceReport, ...]
    max_load: float
    violations: tuple[str, ...]
    contiguity: str          # the class that was checked
    finest_class: str        # "stages" | "sets" | "none": the smallest class the plan belongs to
    inferred: tuple[int, ...]

    @property
    def valid(self) -> bool:
        return not self.violations

    @property
    def gpipe_time(self) -> float:
        """The ``throughput-gpipe`` objective: ``max_i FW_i + max_i BW_i`` over the devices."""
        return (max((r.forward_load for r in self.devices), default=0.0)
                + max((r.backward_load for r in self.devices), default=0.0))

    def objective(self, kind: str) -> float:
        """The value of the objective ``throughput`` (max load) or ``throughput-gpipe``."""
        if kind == "throughput":
            return self.max_load
        if kind == "throughput-gpipe":
            return self.gpipe_time
        raise InvalidParameterError("kind", f"must be 'throughput' or 'throughput-gpipe', not {kind!r}")


def fmt_number(x: float) -> str:
    """A number as messages print it: integral values without ``.0``, others exactly (``repr``)."""
    x = float(x)
    if math.isfinite(x) and x.is_integer() and abs(x) < 2 ** 53:
        return str(int(x))
    return repr(x)


def _join(items: Sequence[object]) -> str:
    return ", ".join(str(i) for i in items)


# ----------------------------------------------------------------------------------------
# placement: node id -> device positions
# ----------------------------------------------------------------------------------------

def _placements(problem: Instance, plan: Plan, infer_from_colours: bool
                ) -> tuple[list[list[int]], dict[int, list[int]], list[int], list[str]]:
    """Per device the known node ids it holds; per node id its device positions (with repeats).

    Returns ``(device_nodes, where, inferred, violations)``.
    """
    violations: list[str] = []
    known = {n.id for n in problem.nodes}
    type_names = {t.name for t in problem.device_types}
    device_nodes: list[list[int]] = []
    where: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    for d, dev in enumerate(plan.devices):
        if dev.type not in type_names:
            violations.append(f"device {d}: unknown device type {dev.type!r}")
        held: list[int] = []
        seen: set[int] = set()
        for v in dev.nodes:
            if v not in known:
                violations.append(f"device {d} ({dev.type}): node {v} is not in the instance")
                continue
            where[v].append(d)
            if v not in seen:
                seen.add(v)
                held.append(v)
        device_nodes.append(held)

    inferred: list[int] = []
    ambiguous: set[int] = set()
    if infer_from_colours:
        class_devices: dict[int, set[int]] = {}
        for n in problem.nodes:
            if n.colour is not None:
                class_devices.setdefault(n.colour, set()).update(where[n.id])
        for n in problem.nodes:
            if where[n.id] or n.colour is None:
                continue
            devices = sorted(class_devices[n.colour])
            if len(devices) == 1:
                inferred.append(n.id)
            elif len(devices) > 1:
                ambiguous.add(n.id)
                violations.append(f"node {n.id} cannot be inferred from colour {n.colour}: "
                                  f"its class is on devices {_join(devices)}")
        for v in inferred:  # decided on the listed nodes only, applied afterwards
            d = next(iter(class_devices[problem.node(v).colour]))
            where[v].append(d)
            device_nodes[d].append(v)

    for n in problem.nodes:
        places = where[n.id]
        if len(places) > 1:
            violations.append(f"node {n.id} is placed {len(places)} times (devices {_join(places)})")
        elif not places and n.id not in ambiguous:
            violations.append(f"node {n.id} is not placed")
    return device_nodes, where, inferred, violations


# ----------------------------------------------------------------------------------------
# loads
# ----------------------------------------------------------------------------------------

def _device_report(problem: Instance, position: int, type_name: str, nodes: list[int]
                   ) -> tuple[DeviceReport, list[str]]:
    violations: list[str] = []
    try:
        t = problem.type_index(type_name)
    except KeyError:
        t = None
    dtype = problem.device_types[t] if t is not None else None
    members = set(nodes)

    compute_fw = compute_bw = memory = 0.0
    for v in nodes:
        node = problem.node(v)
        memory += node.memory
        if t is None:
            continue
        p = node.times[t]
        if p is None:
            violations.append(f"device {position} ({type_name}): node {v} is not supported on {type_name}")
            continue
        if node.backward:
            compute_bw += p
        else:
            compute_fw += p

    boundary: set[int] = set()  # In(S) ∪ Out(S): the sources u of edges crossing S either way
    for e in problem.edges:
        if (e.src in members) != (e.dst in members):
            boundary.add(e.src)
    comm_fw = comm_bw = 0.0
    if dtype is not None and dtype.pays_comm:
        for u in sorted(boundary, key=problem.index_of):
            node = problem.node(u)
            if node.backward:
                comm_bw += node.out_cost
            else:
                comm_fw += node.out_cost

    bound = dtype.memory if dtype is not None else math.inf
    if memory > bound:
        violations.append(f"device {position} ({type_name}): memory {fmt_number(memory)} "
                          f"exceeds the bound {fmt_number(bound)}")
    compute = compute_fw + compute_bw
    comm = comm_fw + comm_bw
    report = DeviceReport(position=position, type=type_name, nodes=tuple(nodes), compute=compute,
                          comm=comm, load=compute + comm, memory=memory, memory_bound=bound,
                          forward_load=compute_fw + comm_fw, backward_load=compute_bw + comm_bw)
    return report, violations


# ----------------------------------------------------------------------------------------
# contiguity
# ----------------------------------------------------------------------------------------

def _sets_violations(problem: Instance, plan: Plan, device_nodes: list[list[int]]) -> list[str]:
    """One line per device whose forward nodes are not convex in the forward graph."""
    fsucc: dict[int, list[int]] = {n.id: [] for n in problem.nodes if not n.backward}
    for e in problem.edges:
        if e.src in fsucc and e.dst in fsucc and e.dst not in fsucc[e.src]:
            fsucc[e.src].append(e.dst)
    out: list[str] = []
    for d, nodes in enumerate(device_nodes):
        inside = [v for v in nodes if v in fsucc]
        members = set(inside)
        # breadth-first search over forward nodes outside the set, started from the set
        parent: dict[int, int] = {}
        queue: deque[int] = deque()
        for v in inside:
            for w in fsucc[v]:
                if w not in members and w not in parent:
                    parent[w] = v
                    queue.append(w)
        witness: list[int] | None = None
        while queue and witness is None:
            y = queue.popleft()
            for z in fsucc[y]:
                if z in members:
                    path = [z, y]
                    while path[-1] not in members:
                        path.append(parent[path[-1]])
                    witness = path[::-1]
                    break
                if z not in parent:
                    parent[z] = y
                    queue.append(z)
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
    succ: list[list[int]] = [[] for _ in labels]
    for x, y in edges:
        for i in on[x]:
            for j in on[y]:
                if i != j and j not in succ[i]:
                    succ[i].append(j)
    return labels, succ


def _stages_violations(problem: Instance, where: dict[int, list[int]], n_devices: int) -> list[str]:
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
        for v in dev.nodes:
            if v in where and d not in where[v]:
                where[v].append(d)
    labels, succ = _quotient(problem, where, len(plan.devices))
    indegree = [0] * len(labels)
    for i in range(len(labels)):
        for j in succ[i]:
            indegree[j] += 1
    ready = [i for i in range(len(labels)) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(labels):
        return None
    return tuple(i for i in order if i < len(plan.devices))


# ----------------------------------------------------------------------------------------
# the evaluator
# ----------------------------------------------------------------------------------------

def evaluate(problem: Instance, plan: Plan, contiguity: str = "none",
             infer_from_colours: bool = False) -> Evaluation:
    """Verify ``plan`` against ``problem``: per-device loads, max load, violations.

    ``contiguity`` is the class to check (``none``, ``sets`` or ``stages``);
    ``finest_class`` reports the smallest class the plan belongs to whatever was
    asked. With ``infer_from_colours`` a node the plan does not list is placed on
    the one device holding listed nodes of its colour class (``inferred``); a
    class listed on several devices makes that inference a violation.
    """
    check_contiguity(contiguity)
    device_nodes, where, inferred, violations = _placements(problem, plan, infer_from_colours)

    reports: list[DeviceReport] = []
    for d, dev in enumerate(plan.devices):
        report, device_violations = _device_report(problem, d, dev.type, device_nodes[d])
        reports.append(report)
        violations.extend(device_violations)

    class_devices: dict[int, list[int]] = {}
    for n in problem.nodes:
        if n.colour is not None:
            class_devices.setdefault(n.colour, [])
            for d in where[n.id]:
                if d not in class_devices[n.colour]:
                    class_devices[n.colour].append(d)
    for colour, devices in class_devices.items():
        if len(devices) > 1:
            violations.append(f"colour {colour} is split over devices {_join(sorted(devices))}")

    for t in problem.device_types:
        used = sum(1 for d, dev in enumerate(plan.devices) if dev.type == t.name and device_nodes[d])
        if used > t.count:
            violations.append(f"device type {t.name}: {used} devices used, but only {t.count} exist")

    sets = _sets_violations(problem, plan, device_nodes)
    stages = _stages_violations(problem, where, len(plan.devices))
    if contiguity == "sets":
        violations.extend(sets)
    elif contiguity == "stages":
        violations.extend(stages)
    finest = "stages" if not stages else ("sets" if not sets else "none")

    return Evaluation(devices=tuple(reports),
                      max_load=max((r.load for r in reports), default=0.0),
                      violations=tuple(violations), contiguity=contiguity, finest_class=finest,
                      inferred=tuple(inferred))
