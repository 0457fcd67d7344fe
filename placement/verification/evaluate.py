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
supported nodes only; memory ``Σ node.memory`` within the device type's bound (summed exactly on the
sizes as written: :func:`placement.problem.memory_fit.fits`);
nodes of one colour on one device; at most ``count`` non-empty devices per
type; and the requested contiguity class: ``none`` (nothing more), ``sets`` or ``stages``
(:mod:`placement.verification.contiguity` defines and checks those two), with
``stages`` ⊆ ``sets`` ⊆ ``none`` for every plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from placement.collector import collector_paused
from placement.errors import InvalidParameterError
from placement.problem.instance import Instance
from placement.problem.memory_fit import fits, written_sum_text
from placement.plan import Plan
from placement.verification.contiguity import pipeline_order, sets_violations, stages_violations
from placement.wording import written_otherwise

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
    def max_forward_load(self) -> float:
        """``max_i FW_i``: the largest forward load of a device (0 with none)."""
        return max((r.forward_load for r in self.devices), default=0.0)

    @property
    def max_backward_load(self) -> float:
        """``max_i BW_i``: the largest backward load of a device (0 with none)."""
        return max((r.backward_load for r in self.devices), default=0.0)

    @property
    def gpipe_time(self) -> float:
        """The ``throughput-gpipe`` objective: ``max_i FW_i + max_i BW_i`` over the devices."""
        return self.max_forward_load + self.max_backward_load

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
    if math.isfinite(x) and x.is_integer() and abs(x) <= 2 ** 53:
        return str(int(x))
    return repr(x)


#: the most items a violation lists (a plan may repeat a node a million times)
LISTED = 10


def _join(items: Sequence[object]) -> str:
    """The items, comma-separated; past :data:`LISTED`, the first of them and how many more."""
    shown = ", ".join(str(i) for i in items[:LISTED])
    return shown if len(items) <= LISTED else f"{shown}, and {len(items) - LISTED:,} more"


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
            violations.append(f"device {d}: unknown device type {dev.type!r}"
                              + written_otherwise(dev.type, (t.name for t in problem.device_types), "device type"))
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

def _device_report(problem: Instance, position: int, type_name: str, nodes: list[int],
                   succ: list[list[int]], pred: list[list[int]]) -> tuple[DeviceReport, list[str]]:
    """The loads of one device; ``succ`` and ``pred`` are the instance's adjacency by node position."""
    violations: list[str] = []
    try:
        t = problem.type_index(type_name)
    except KeyError:
        t = None
    dtype = problem.device_types[t] if t is not None else None
    members = set(nodes)

    forward_times: list[float] = []
    backward_times: list[float] = []
    sizes = []
    for v in nodes:
        node = problem.node(v)
        sizes.append(node.memory)
        if t is None:
            continue
        p = node.times[t]
        if p is None:
            violations.append(f"device {position} ({type_name}): node {v} is not supported on {type_name}")
            continue
        (backward_times if node.backward else forward_times).append(p)

    # In(S) ∪ Out(S): the sources u of edges crossing S either way, found from the edges at S's nodes
    boundary: set[int] = set()
    nodes_at = problem.nodes
    for v in members:
        at = problem.index_of(v)
        if any(nodes_at[w].id not in members for w in succ[at]):
            boundary.add(v)
        boundary.update(nodes_at[u].id for u in pred[at] if nodes_at[u].id not in members)
    forward_costs: list[float] = []
    backward_costs: list[float] = []
    if dtype is not None and dtype.pays_comm:
        for u in boundary:
            node = problem.node(u)
            (backward_costs if node.backward else forward_costs).append(node.out_cost)
    # exactly rounded sums: a load does not depend on the order a plan or a file lists nodes in
    compute_fw, compute_bw = math.fsum(forward_times), math.fsum(backward_times)
    comm_fw, comm_bw = math.fsum(forward_costs), math.fsum(backward_costs)

    bound = dtype.memory if dtype is not None else math.inf
    memory = math.fsum(sizes)
    if not fits(sizes, bound):
        shown = fmt_number(memory) if memory > bound else \
            f"{written_sum_text(sizes)} (summed as written; {fmt_number(memory)} in floating point)"
        violations.append(f"device {position} ({type_name}): memory {shown} exceeds the bound {fmt_number(bound)}")
    compute = compute_fw + compute_bw
    comm = comm_fw + comm_bw
    report = DeviceReport(position=position, type=type_name, nodes=tuple(nodes), compute=compute,
                          comm=comm, load=compute + comm, memory=memory, memory_bound=bound,
                          forward_load=compute_fw + comm_fw, backward_load=compute_bw + comm_bw)
    return report, violations


# ----------------------------------------------------------------------------------------
# the evaluator
# ----------------------------------------------------------------------------------------

@collector_paused()
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
    succ, pred = problem.adjacency()
    for d, dev in enumerate(plan.devices):
        report, device_violations = _device_report(problem, d, dev.type, device_nodes[d], succ, pred)
        reports.append(report)
        violations.extend(device_violations)

    class_devices: dict[int, dict[int, None]] = {}     # ordered sets
    for n in problem.nodes:
        if n.colour is not None:
            class_devices.setdefault(n.colour, {}).update(dict.fromkeys(where[n.id]))
    for colour, devices in class_devices.items():
        if len(devices) > 1:
            violations.append(f"colour {colour} is split over devices {_join(sorted(devices))}")

    for t in problem.device_types:
        used = sum(1 for d, dev in enumerate(plan.devices) if dev.type == t.name and device_nodes[d])
        if used > t.count:
            exist = "none exists" if t.count == 0 else f"only {t.count} {'exists' if t.count == 1 else 'exist'}"
            violations.append(f"device type {t.name}: {used} device{'' if used == 1 else 's'} used, but {exist}")

    stages = stages_violations(problem, where, len(plan.devices))
    # a plan in stages is in sets (every set is then an interval of a pipeline order): the sets check
    # runs where it is asked for or where it decides the finest class
    sets = sets_violations(problem, plan, device_nodes) if contiguity == "sets" or stages else []
    if contiguity == "sets":
        violations.extend(sets)
    elif contiguity == "stages":
        violations.extend(stages)
    finest = "stages" if not stages else ("sets" if not sets else "none")

    return Evaluation(devices=tuple(reports),
                      max_load=max((r.load for r in reports), default=0.0),
                      violations=tuple(violations), contiguity=contiguity, finest_class=finest,
                      inferred=tuple(inferred))


def with_inferred(plan: Plan, evaluation: Evaluation) -> Plan:
    """``plan`` with each node that ``evaluation`` (of it, with ``infer_from_colours``) placed by its
    colour class listed on that device, after the device's own nodes."""
    inferred = set(evaluation.inferred)
    if not inferred:
        return plan
    return Plan(tuple(replace(dev, nodes=dev.nodes + tuple(v for v in report.nodes if v in inferred))
                      for dev, report in zip(plan.devices, evaluation.devices)))


__all__ = ["CONTIGUITY_CLASSES", "DeviceReport", "Evaluation", "check_contiguity", "evaluate", "fmt_number",
           "pipeline_order", "with_inferred"]
