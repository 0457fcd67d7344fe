"""Improve a latency plan by moving whole colour classes from the accelerators to the CPUs.

Model
-----
The latency model of DESIGN.md §2 (one sample, inference): a CPU node runs as soon as its inputs
are ready, CPUs pay no transfers, and an accelerator call lasts its inputs' transfers, its
compute and its outputs' transfers. A node whose output is large but whose CPU time is short (an
embedding table that is read at the start and again at the end of a language model) can cost a
call far more as a transfer than it costs on a CPU, where it runs beside the accelerators.

Descent: take the colour classes that are on accelerators, heaviest total transfer ``Σ c(v)``
first; move one whole class to the CPUs (every member supported there) and keep the move when
the independent evaluator (:func:`placement.verification.latency.evaluate_latency`) finds the
plan valid (calls still contiguous, memory within bounds) and faster; sweep again after any
improvement, until a sweep improves nothing or the deadline passes. With ``stages`` the plans
must keep that many non-empty devices. After :data:`HEARTBEAT_S` seconds without a line (an
improvement or the last such note), ``progress`` is told how many classes this sweep has tried.
The result is never slower than the plan given; a plan whose latency meets the longest-path bound is
returned as it is, no move tried.
"""

from __future__ import annotations

import math
import time
from typing import Callable

from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.problem.bounds import latency_lower_bound, meets
from placement.verification.latency import evaluate_latency

#: seconds without an improvement after which the descent says how far it has come
HEARTBEAT_S = 10.0


def move_classes_to_cpus(problem: Instance, plan: Plan, deadline: float = math.inf, stages: int | None = None,
                         progress: Callable[[str], None] | None = None) -> Plan:
    """The descent of the module docstring from ``plan``; ``deadline`` is a ``time.perf_counter()`` value.
    ``plan`` itself when the instance has no CPU device or no move helps."""
    return moved_to_cpus(problem, plan, None, deadline, stages, progress)[0]


def moved_to_cpus(problem: Instance, plan: Plan, latency: float | None, deadline: float = math.inf,
                  stages: int | None = None, progress: Callable[[str], None] | None = None
                  ) -> tuple[Plan, float | None]:
    """:func:`move_classes_to_cpus` from ``plan`` of valid latency ``latency`` (``None``: not evaluated yet),
    with the latency of the plan it returns (``None`` where it evaluated none: the start is ``latency``'s)."""
    types = problem.device_types
    cpus = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    if len(cpus) != 1 or time.perf_counter() >= deadline:   # late: not even the start is evaluated again
        return plan, latency
    cpu = cpus[0]
    nodes = problem.nodes
    if latency is None:
        evaluation = evaluate_latency(problem, plan)
        if not evaluation.valid:
            return plan, None
        latency = evaluation.latency
    if meets(latency_lower_bound(problem), latency):   # no move can beat the longest path: none is tried
        return plan, latency
    best = latency
    classes = [c for c in problem.colour_classes() if all(nodes[i].times[cpu] is not None for i in c)]
    classes.sort(key=lambda c: -sum(nodes[i].out_cost for i in c))
    improved = True
    said = time.perf_counter()
    while improved and time.perf_counter() < deadline:
        improved = False
        on_cpu = {n for d in plan.devices if d.type == types[cpu].name for n in d.nodes}   # whole classes
        for tried, members in enumerate(classes):
            now = time.perf_counter()
            if now >= deadline:
                break
            if progress is not None and now - said >= HEARTBEAT_S:
                progress(f"moving colour classes to the CPUs: {tried:,} of {len(classes):,} classes tried in this "
                         f"sweep, latency {best:.6g}")
                said = now
            ids = {nodes[i].id for i in members}
            if ids & on_cpu:
                continue
            candidate = _moved(problem, plan, ids, types[cpu].name)
            if stages is not None and candidate.non_empty != stages:
                continue
            found = evaluate_latency(problem, candidate)
            if found.valid and found.latency < best:
                plan, best, improved = candidate, found.latency, True
                on_cpu |= ids
                if progress is not None:
                    progress(f"latency {best:.6g}: class of node {min(ids)} moved to the CPUs")
                    said = time.perf_counter()
    return plan, best


def _moved(problem: Instance, plan: Plan, ids: set[int], cpu: str) -> Plan:
    """``plan`` with the nodes ``ids`` taken off their accelerators and added to its first CPU device
    (a new one when it has none)."""
    devices = []
    added = False
    for device in plan.devices:
        if device.type == cpu and not added:
            joined = set(device.nodes) | ids
            devices.append(DeviceAssignment(cpu, tuple(sorted(joined, key=problem.index_of))))
            added = True
            continue
        rest = tuple(n for n in device.nodes if n not in ids)
        if rest or device.type == cpu:
            calls = tuple(kept for kept in (tuple(n for n in call if n not in ids) for call in device.calls) if kept)
            devices.append(DeviceAssignment(device.type, rest, calls=calls))
    if not added:
        devices.append(DeviceAssignment(cpu, tuple(sorted(ids, key=problem.index_of))))
    return Plan(tuple(devices))
