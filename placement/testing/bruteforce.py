"""Exhaustive search: the test oracle for tiny graphs (throughput objectives, any contiguity class).

Every assignment of colour classes to devices is enumerated up to the symmetry
of devices of one type (they are interchangeable, so device indices of a type
are opened in order: a class goes to an already opened device of that type or to
the next new one). Each complete assignment is judged by the independent
evaluator :func:`placement.verification.evaluate.evaluate` under the requested
contiguity class; the best valid one (lowest max load, first found on ties) is
returned as ``optimal`` with ``bound == objective``, or ``infeasible`` when no
assignment is valid. The objective is ``throughput`` (max load) or
``throughput-gpipe`` (max forward load + max backward load, as the evaluator
computes them). With ``stages=N`` only the assignments with exactly ``N``
non-empty devices count (``infeasible`` when there is none).

Two prunings skip only assignments that cannot be valid or better, and are
therefore safe: a partial assignment is abandoned when a device exceeds its
memory bound or holds a node its type does not support, and when a device's
compute alone (a lower bound on its final load, since communication is
non-negative) already reaches the best value found (for ``throughput-gpipe`` too:
``max FW + max BW ≥ max (FW + BW)``, the max load). Both tests allow a
relative slack of 1e-9, so rounding from summing in another order than the
evaluator cannot prune a plan the evaluator would accept or rank better. With
``stages=N``, no device is opened beyond the ``N``-th, and a partial assignment
is abandoned when the classes left cannot fill the devices still to open.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

from placement.errors import InvalidParameterError, LimitExceededError
from placement.parameters import stage_count
from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.verification.evaluate import CONTIGUITY_CLASSES, evaluate, pipeline_order

MAX_CLASSES = 10
MAX_LABELLINGS = 50_000  # about 5 s when no pruning applies (about 100 µs per evaluation)
_SLACK = 1e-9  # prune only clear losers: the evaluator may sum in another order


def count_labellings(n_classes: int, counts: tuple[int, ...]) -> int:
    """Number of canonical assignments of ``n_classes`` classes to devices of types with ``counts``."""

    @lru_cache(maxsize=None)
    def completions(i: int, opened: tuple[int, ...]) -> int:
        if i == n_classes:
            return 1
        total = 0
        for t, count in enumerate(counts):
            total += opened[t] * completions(i + 1, opened)
            if opened[t] < count:
                total += completions(i + 1, opened[:t] + (opened[t] + 1,) + opened[t + 1:])
        return total

    return completions(0, tuple(0 for _ in counts))



def brute_force(problem: Instance, contiguity: str = "stages", *, objective: str = "throughput",
                stages: int | None = None, max_classes: int = MAX_CLASSES,
                max_labellings: int = MAX_LABELLINGS) -> Solution:
    """The optimal plan by exhaustive search (with ``stages=N``: among plans with exactly ``N``
    non-empty devices); :class:`LimitExceededError` above the size limits."""
    if objective not in ("throughput", "throughput-gpipe"):
        raise InvalidParameterError("objective", f"must be 'throughput' or 'throughput-gpipe' for brute force, "
                                                 f"not {objective!r}")
    if contiguity not in CONTIGUITY_CLASSES:
        raise InvalidParameterError("contiguity", f"must be one of {', '.join(map(repr, CONTIGUITY_CLASSES))}, "
                                                  f"not {contiguity!r}")
    stages = stage_count(problem, stages)
    start = time.perf_counter()
    classes = problem.colour_classes()
    types = problem.device_types
    counts = tuple(t.count for t in types)
    if len(classes) > max_classes:
        raise LimitExceededError(f"brute force refuses {len(classes)} colour classes (limit {max_classes}); "
                         "it is meant for tiny graphs")
    n_labellings = count_labellings(len(classes), counts)
    if n_labellings > max_labellings:
        raise LimitExceededError(f"brute force refuses {n_labellings} assignments of {len(classes)} colour classes "
                         f"to {sum(counts)} devices (limit {max_labellings}); it is meant for tiny graphs")

    nodes = problem.nodes
    # per class and type: compute time (None if some node is unsupported there) and memory
    class_time: list[list[float | None]] = []
    class_memory: list[float] = []
    for members in classes:
        class_memory.append(sum(nodes[i].memory for i in members))
        row: list[float | None] = []
        for t in range(len(types)):
            times = [nodes[i].times[t] for i in members]
            row.append(None if any(p is None for p in times) else sum(times))  # type: ignore[arg-type]
        class_time.append(row)

    slots = [(t, j) for t in range(len(types)) for j in range(counts[t])]
    slot_index = {s: k for k, s in enumerate(slots)}
    compute = [0.0] * len(slots)
    memory = [0.0] * len(slots)
    choice = [-1] * len(classes)
    opened = [0] * len(types)
    best = {"load": math.inf, "plan": None}
    stats = {"labellings": n_labellings, "evaluated": 0, "valid": 0}

    def leaf() -> None:
        held: list[list[int]] = [[] for _ in slots]
        for c, members in enumerate(classes):
            held[choice[c]].extend(nodes[i].id for i in members)
        plan = Plan(tuple(DeviceAssignment(types[slots[k][0]].name, tuple(sorted(held[k], key=problem.index_of)))
                          for k in range(len(slots)) if held[k]))
        stats["evaluated"] += 1
        ev = evaluate(problem, plan, contiguity)
        if ev.valid:
            stats["valid"] += 1
            value = ev.objective(objective)
            if value < best["load"]:
                best["load"], best["plan"] = value, plan

    def place(c: int) -> None:
        if c == len(classes):
            if stages is None or sum(opened) == stages:
                leaf()
            return
        if stages is not None and sum(opened) + len(classes) - c < stages:
            return  # the classes left cannot fill the devices still to open
        for t in range(len(types)):
            p = class_time[c][t]
            if p is None:
                continue
            for j in range(min(opened[t] + 1, counts[t])):
                if stages is not None and j == opened[t] and sum(opened) == stages:
                    continue  # no device beyond the N-th
                k = slot_index[(t, j)]
                if (memory[k] + class_memory[c] > types[t].memory * (1 + _SLACK)
                        or compute[k] + p >= best["load"] * (1 + _SLACK)):
                    continue
                new = j == opened[t]
                if new:
                    opened[t] += 1
                compute[k] += p
                memory[k] += class_memory[c]
                choice[c] = k
                place(c + 1)
                compute[k] -= p
                memory[k] -= class_memory[c]
                if new:
                    opened[t] -= 1

    place(0)
    runtime = time.perf_counter() - start
    plan = best["plan"]
    if plan is None:
        with_stages = "" if stages is None else f" with exactly {stages} non-empty devices"
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, method="bruteforce",
                        objective_kind=objective, contiguity=contiguity, runtime_s=runtime, stats=stats,
                        message=f"no valid plan under contiguity {contiguity}{with_stages}")
    order = pipeline_order(problem, plan)
    if order is not None:
        plan = Plan(tuple(plan.devices[d] for d in order))
    return Solution(Status.OPTIMAL, plan, best["load"], best["load"], method="bruteforce",
                    objective_kind=objective, contiguity=contiguity, runtime_s=runtime, stats=stats)
