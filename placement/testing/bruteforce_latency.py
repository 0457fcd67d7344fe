"""Exhaustive search for the latency objective: the test oracle for tiny inference graphs.

Search space
------------
Every plan of the latency model (DESIGN.md §2) up to the symmetry of devices
of one type:

* each colour class goes, whole, to one device: to a device of a type that
  pays communication (an *accelerator*) or to the *pool* of a type that does
  not (a CPU type; pool nodes run in parallel without limit, so which core of
  the type holds them does not matter and the plan lists one device per pool).
  A CPU type whose memory bound is finite has no pool: its classes are packed
  onto its cores as onto accelerators (every packing, up to the symmetry of the
  cores), so that one that fits is found whenever one exists;
* the nodes of each accelerator are split into an ordered sequence of
  non-empty calls — any set partition of its nodes, in any order — with at most
  ``max_calls`` calls per accelerator (``None``, the default: no limit other
  than the accelerator's node count, so every ordered partition is searched).
  Nodes of one colour class may be in different calls of their device;
* accelerators of one type are interchangeable: a class goes to an already
  opened accelerator of the type or to the next new one.

Nodes are taken in a fixed order; a node either joins an existing call of its
class's device or starts a new call at any position of that device's sequence,
so every ordered partition is produced exactly once. The only pruning skips
plans that cannot be valid (a class whose nodes a type does not support, a
device over its memory bound by more than 1e-8 relative: the evaluator reads
sizes as written, so that 0.1 + 0.2 fits 0.3, which a floating-point sum exceeds). Every complete plan is judged by the
independent evaluator :func:`placement.verification.latency.evaluate_latency`, which
rejects non-contiguous calls and calls that wait on each other in a cycle; the
valid plan of least latency (the first found on ties) is returned as
``optimal`` with ``bound == objective``, or ``infeasible`` when no plan is valid.

Exactly ``N`` devices (``stages=N``): a pool, or a core of a CPU type with a
memory bound, holding ``m`` colour classes may be listed as up to ``m`` devices
of its type without changing any time (CPU nodes run in parallel without limit,
and a part of a core's classes fits where the whole did), as long as the type
has devices holding no node. A plan counts when ``N`` lies between its least
and its largest number of devices holding a node; its pools and cores are then
split (classes dealt round the devices, the first split first) so that exactly
``N`` devices hold a node, and that plan is judged.
"""

from __future__ import annotations

import math
import time

from placement.errors import InvalidParameterError, LimitExceededError
from placement.problem.objectives import check_objective
from placement.problem.instance import Instance
from placement.problem.memory_fit import LENIENT
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.parameters import stage_count
from placement.verification.latency import evaluate_latency

MAX_NODES = 8
MAX_PLANS = 50_000  # about 10 s at some 200 µs per evaluation


class _Search:
    """The recursion of the module docstring; ``visit`` is called with every complete plan."""

    def __init__(self, problem: Instance, max_calls: int | None) -> None:
        self.problem = problem
        self.max_calls = max_calls if max_calls is not None else len(problem.nodes)
        types = problem.device_types
        self.types = types
        self.classes = problem.colour_classes()
        self.class_of = [0] * len(problem.nodes)
        for c, members in enumerate(self.classes):
            for v in members:
                self.class_of[v] = c
        self.supported = [[all(problem.nodes[v].times[t] is not None for v in members) and types[t].count > 0
                           for t in range(len(types))] for members in self.classes]
        self.class_memory = [sum(problem.nodes[v].memory for v in members) for members in self.classes]
        self.order = problem.topological_positions()
        # state
        self.device_of_class: list[tuple[int, int] | None] = [None] * len(self.classes)  # (type, number)
        self.opened = [0] * len(types)
        self.calls: dict[tuple[int, int], list[list[int]]] = {}
        self.pools: dict[int, list[int]] = {}
        self.cores: set[tuple[int, int]] = set()    # the keys of ``calls`` that are CPU cores (one "call")
        self.memory: dict[tuple[int, int], float] = {}

    def run(self, visit) -> None:
        self._place(0, visit)

    def _plan(self) -> Plan:
        nodes = self.problem.nodes
        devices = []
        for (t, j) in sorted(self.calls):
            calls = [c for c in self.calls[(t, j)] if c]
            if not calls:
                continue
            ids = tuple(nodes[v].id for call in calls for v in call)
            call_ids = (tuple(tuple(nodes[v].id for v in call) for call in calls)
                        if len(calls) > 1 and (t, j) not in self.cores else ())
            devices.append(DeviceAssignment(self.types[t].name, ids, call_ids))
        for t in sorted(self.pools):
            if self.pools[t]:
                devices.append(DeviceAssignment(self.types[t].name, tuple(nodes[v].id for v in self.pools[t])))
        return Plan(tuple(devices))

    def _into_calls(self, k: int, v: int, key: tuple[int, int], visit) -> None:
        calls = self.calls[key]
        for call in calls:                       # join an existing call
            call.append(v)
            self._place(k + 1, visit)
            call.pop()
        if len(calls) < self.max_calls:           # or start a new one at any position
            for position in range(len(calls) + 1):
                calls.insert(position, [v])
                self._place(k + 1, visit)
                calls.pop(position)

    def _place(self, k: int, visit) -> None:
        if k == len(self.order):
            visit(self._plan())
            return
        v = self.order[k]
        c = self.class_of[v]
        where = self.device_of_class[c]
        if where is not None:
            t, j = where
            if j < 0:
                self.pools[t].append(v)
                self._place(k + 1, visit)
                self.pools[t].pop()
            elif where in self.cores:
                self.calls[where][0].append(v)
                self._place(k + 1, visit)
                self.calls[where][0].pop()
            else:
                self._into_calls(k, v, where, visit)
            return
        for t, dtype in enumerate(self.types):
            if not self.supported[c][t]:
                continue
            if not dtype.pays_comm and math.isinf(dtype.memory):
                self.device_of_class[c] = (t, -1)
                self.pools.setdefault(t, []).append(v)
                self._place(k + 1, visit)
                self.pools[t].pop()
                continue
            for j in range(min(self.opened[t] + 1, dtype.count)):
                key = (t, j)
                if self.memory.get(key, 0.0) + self.class_memory[c] > dtype.memory * (1 + LENIENT):
                    continue   # clearly over: the evaluator decides the rest, on the sizes as written
                new = j == self.opened[t]
                if new:
                    self.opened[t] += 1
                    self.calls[key] = [] if dtype.pays_comm else [[]]
                    if not dtype.pays_comm:
                        self.cores.add(key)
                self.memory[key] = self.memory.get(key, 0.0) + self.class_memory[c]
                self.device_of_class[c] = key
                if dtype.pays_comm:
                    self._into_calls(k, v, key, visit)
                else:
                    self.calls[key][0].append(v)
                    self._place(k + 1, visit)
                    self.calls[key][0].pop()
                self.memory[key] -= self.class_memory[c]
                if new:
                    self.opened[t] -= 1
                    del self.calls[key]
                    self.cores.discard(key)
        self.device_of_class[c] = None


class _Cap(Exception):
    """Raised inside the counting pass once the plan count passes the limit."""


def count_latency_plans(problem: Instance, max_calls: int | None = None, limit: int | None = None) -> int:
    """Number of plans the search visits (``limit + 1`` as soon as it exceeds ``limit``)."""
    count = 0

    def visit(_: Plan) -> None:
        nonlocal count
        count += 1
        if limit is not None and count > limit:
            raise _Cap

    try:
        _Search(problem, max_calls).run(visit)
    except _Cap:
        pass
    return count


def with_stages(problem: Instance, plan: Plan, stages: int) -> Plan | None:
    """``plan`` with its pools (devices of types that pay no communication) split so that exactly
    ``stages`` devices hold a node, or ``None`` when no split gets there (see the module docstring)."""
    pays = {t.name: t.pays_comm for t in problem.device_types}
    count = {t.name: t.count for t in problem.device_types}
    class_of = {}
    for c, members in enumerate(problem.colour_classes()):
        for v in members:
            class_of[problem.nodes[v].id] = c
    devices = [dev for dev in plan.devices if dev.nodes]
    extra = stages - len(devices)
    if extra < 0:
        return None
    spare = dict(count)                  # devices of each type not yet holding a node
    for dev in devices:
        spare[dev.type] -= 1
    out = []
    for dev in devices:
        if pays[dev.type] or extra == 0:
            out.append(dev)
            continue
        classes: dict[int, list[int]] = {}
        for v in dev.nodes:
            classes.setdefault(class_of[v], []).append(v)
        parts = 1 + min(extra, spare[dev.type], len(classes) - 1)
        extra -= parts - 1
        spare[dev.type] -= parts - 1
        dealt: list[list[int]] = [[] for _ in range(parts)]
        for k, members in enumerate(classes.values()):
            dealt[k % parts].extend(members)
        out.extend(DeviceAssignment(dev.type, tuple(ids)) for ids in dealt)
    return Plan(tuple(out)) if extra == 0 else None


def brute_force_latency(problem: Instance, max_calls: int | None = None, *, max_nodes: int = MAX_NODES,
                        max_plans: int = MAX_PLANS, stages: int | None = None) -> Solution:
    """The latency-optimal plan over the search space of the module docstring (with ``stages=N``:
    among plans in which exactly ``N`` devices hold a node).

    :class:`InvalidParameterError` for training graphs and bad parameter values;
    :class:`LimitExceededError` above ``max_nodes`` nodes or ``max_plans`` plans to evaluate.
    """
    check_objective(problem, "latency")
    if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1):
        raise InvalidParameterError("max_calls", f"must be a positive integer or None, not {max_calls!r}")
    stages = stage_count(problem, stages)
    if len(problem.nodes) > max_nodes:
        raise LimitExceededError(f"latency brute force refuses {len(problem.nodes)} nodes (limit {max_nodes}); "
                         "it is meant for tiny graphs")
    start = time.perf_counter()
    n_plans = count_latency_plans(problem, max_calls, max_plans)
    if n_plans > max_plans:
        raise LimitExceededError(f"latency brute force refuses more than {max_plans} plans of {len(problem.nodes)} nodes "
                         "(lower max_calls or use a smaller graph)")
    best: dict[str, object] = {"latency": math.inf, "plan": None}
    stats = {"plans": n_plans, "valid": 0, "max_calls": max_calls}
    if stages is not None:
        stats["stages"] = stages

    def visit(plan: Plan) -> None:
        if stages is not None:
            split = with_stages(problem, plan, stages)
            if split is None:
                return
            plan = split
        ev = evaluate_latency(problem, plan)
        if ev.valid:
            stats["valid"] += 1
            if ev.latency < best["latency"]:  # type: ignore[operator]
                best["latency"], best["plan"] = ev.latency, plan

    _Search(problem, max_calls).run(visit)
    runtime = time.perf_counter() - start
    plan = best["plan"]
    if plan is None:
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, method="bruteforce-latency",
                        objective_kind="latency", contiguity="none", runtime_s=runtime, stats=stats,
                        message="no valid plan under the latency model")
    value = float(best["latency"])  # type: ignore[arg-type]
    return Solution(Status.OPTIMAL, plan, value, value, method="bruteforce-latency", objective_kind="latency",
                    contiguity="none", runtime_s=runtime, stats=stats)
