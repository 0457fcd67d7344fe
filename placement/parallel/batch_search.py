"""The plan of least time per batch under GPipe or 1F1B: a search with a proven lower bound.

Objective: the exact time per batch ``T(plan)`` of :mod:`placement.parallel.timing` (longest path
of the schedule's task graph, all-reduce ``"piper"``: ``4(d − 1)/d · W / bandwidth`` per batch),
over the plans of the schedule's memory model (:mod:`placement.parallel.dp`: contiguous stages,
``Σ d·t ≤ devices``, ``Σ d ≤ m``, memory per device with the schedule's micro-batches in flight).

Lower bound. For every plan, ``T(plan) ≥ m · max_k TPS_k(plan)`` with ``TPS_k`` Piper's time per
sample of stage ``k``. Proof: a replica of stage ``k`` runs its ``n_k = m / d_k`` forwards and
backwards one at a time, ``n_k·c_k`` in all (``c_k = F_k + B_k`` its time per micro-batch), and
after its last task sends ``2(d_k − 1)`` ring steps of ``2·W_k / (d_k·bandwidth)`` one after
another on its link, so the batch lasts at least ``n_k·c_k + 4(d_k − 1)·W_k / (d_k·bandwidth)``
``= m·(c_k / d_k + 4(d_k − 1)·W_k / (d_k·m·bandwidth)) = m·TPS_k`` (Piper's time per sample,
``algo.cpp`` lines 1125–1195). Hence, with ``M*`` the least ``max_k TPS_k`` over the plans that
fit (the DP's optimum), every plan has ``T ≥ m·M*``: that is the bound reported.

Search:

1. The DP's plan (optimal for ``max_k TPS_k``) is the first incumbent. When its ``T`` meets
   ``m·M*`` (single-stage plans do: nothing waits) it is optimal.
2. When that plan does not meet the bound — 1F1B stalls on it (with ``y_k`` micro-batches in flight and data-parallel
   degrees that do not run in step, a replica waits for round trips), or its fill and drain (the first micro-batch
   reaches the last stage, the last comes back) leave the bottleneck idle — the DP restricted to one degree ``d`` for
   every stage is run for every divisor ``d`` of ``m`` up to the devices (:func:`candidate_degrees`), smallest first;
   every plan found is a candidate. ``Σ d ≤ m`` caps such a plan at ``m / d`` stages, so the large degrees are the
   few-stage plans (``d > m/2``: one stage, which nothing makes wait) and the small ones the many-stage plans.
   Skipped: the degree the DP's plan already has at every stage (the restricted DP's optimum is ``M*`` again); a
   degree whose plans keep too few devices busy to beat the incumbent (``m·L / (d·⌊devices/d⌋) ≥`` its ``T``, ``L``
   the least device time of all nodes: :func:`_uniform_floor`); and under 1F1B every degree above one at which no
   plan fits (a uniform plan keeps its stages, devices per stage at most ``d·t``, and micro-batches in flight ``y_k =
   S − k`` at a smaller degree: none fits there either). Each runs with the incumbent's ``T / m`` as its cap
   (``below``): a plan beats the incumbent only where its ``m·TPS`` is below that ``T``, so once a plan is known to
   fit the DP skips every stage above the cap (on gnmt at 10 devices the two restricted DPs took 7.6 s uncapped);
   where it knows none, it skips none, and no plan shows that none fits. The loop stops when a candidate meets the
   bound. Then, on instances without device types, the best single stage of every shape ``(t, d)`` with ``d ≤ m/2``
   (:func:`single_stage_shapes`: the DP on ``d·t`` devices restricted to ``(t, d)``, which allows one stage alone,
   under the same cap): a single stage keeps its bottleneck busy, so it meets ``m·TPS``, where the uniform DP at that
   ``d`` may prefer more stages of a lower ``TPS`` that wait for one another; in order of their floor ``m·L_t/d``,
   stopping where it reaches the incumbent's ``T``. Last, the plans of two, then three stages (:data:`FEW_STAGES`) of
   least ``T`` below the incumbent's, each stage of any (type,) ``t`` and ``d`` with the TMPCs of the DP's stage
   value (:mod:`placement.parallel.few_stages`): under few micro-batches the fill and drain make these, often of
   mixed degrees, better than the DP's plan of more stages or of its non-bottleneck stages on as few devices as their
   values allow. (Heuristics for the incumbent: the bound and the proof do not depend on them.)
3. On instances of at most :data:`EXHAUSTIVE_NODES` nodes and one device type, a branch and bound over every plan
   (stages front to back: a predecessor-closed set of what is left, ``t``, ``d``, and the
   TMPC choices that are not dominated in (compute, boundary bytes, parameters, activation and
   resident memory) — ``T`` is non-decreasing in every task and ring step length, so a dominated
   choice never does better) prunes a partial plan when ``m·TPS_k`` of a placed stage, or
   ``m·Σ_v least_v / (devices left)`` for the nodes left (``least_v`` the least ``t·timePerSample``
   of node ``v``: no stage runs faster than its work over its devices), is at least the
   incumbent's ``T``, or when a placed stage exceeds the memory already (its micro-batches in
   flight only grow as later stages are added; its memory is summed exactly on the sizes as
   written, so that 0.1 + 0.2 fits 0.3 as the evaluator finds). When it finishes within
   ``max_nodes`` steps the incumbent is optimal.

Otherwise the result is the best candidate, with the bound ``m·M*`` and its gap.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from placement.io.piper import PiperInstance
from placement.parallel.devices import device_counts
from placement.parallel.dp import listed_sets, solve_parallel
from placement.parallel.few_stages import DEFAULT_MAX_PLANS, DEFAULT_MAX_WORK, MAX_COMBINATIONS, few_stage_plan
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.parallel.tables import build_tables
from placement.parallel.timing import FORWARD_SHARE, StageTimes, batch_time, time_per_batch
from placement.problem.memory_fit import as_written

#: instances of at most this many nodes get the exhaustive branch and bound
EXHAUSTIVE_NODES = 8
#: the most partial plans the branch and bound extends before it gives up (8-node chains of two TMPCs per
#: degree, measured: 14,000-56,000 steps, 0.5-4.5 s)
DEFAULT_MAX_NODES = 100_000
#: the stage counts of the few-stage candidates (:mod:`placement.parallel.few_stages`)
FEW_STAGES = (2, 3)
#: schedules whose time per batch the search minimises
BATCH_SCHEDULES = ("gpipe", "1f1b")


def few_stage_budget() -> dict[str, int]:
    """The limits of the few-stage candidates (:func:`placement.parallel.few_stages.few_stage_plan`), shared by
    the searches of every stage count in :data:`FEW_STAGES`: each runs within what the ones before it left."""
    return {"max_work": DEFAULT_MAX_WORK, "max_plans": DEFAULT_MAX_PLANS, "max_combinations": MAX_COMBINATIONS}


@dataclass(frozen=True)
class BatchSearch:
    """``value``: the exact time per batch of ``plan`` (``inf`` and ``None`` when nothing fits);
    ``bound``: a proven lower bound on every plan's; ``proven``: ``value`` is the optimum."""

    value: float
    plan: ParallelPlan | None
    bound: float
    proven: bool
    piper_value: float
    stats: dict[str, Any] = field(default_factory=dict)


def search_time_per_batch(instance: PiperInstance, *, devices: int, memory: float, schedule: str,
                          forward_share: float = FORWARD_SHARE, max_sets: int, max_nodes: int = DEFAULT_MAX_NODES,
                          tolerance: float = 1e-9, progress: Callable[[str], None] | None = None,
                          strict_memory: bool = False) -> BatchSearch:
    """The plan of least time per batch found, the bound ``m·M*`` and whether it is proven optimal
    (module docstring); ``tolerance``: relative slack within which ``T`` meets the bound. ``strict_memory``:
    the DP's memory bounds, where the memory figures have no unit in which its sums are exact and do not split
    into two parts that sum exactly either, are narrowed (every plan it finds fits) rather than widened
    (:func:`placement.parallel.dp.solve_parallel`); ``m·M*``
    is then no bound on every plan, and only a completed branch and bound proves the plan optimal (or, where it
    finds none, that no plan fits)."""
    m = instance.microbatches_in_batch
    started = time.perf_counter()
    tables = build_tables(instance)
    sets = listed_sets(tables, max_sets, progress, started)
    found = solve_parallel(instance, devices=devices, memory=memory, schedule=schedule, tables=tables, sets=sets,
                           progress=progress, strict_memory=strict_memory)
    stats: dict[str, Any] = {"dp": dict(found.stats), "candidates": 0}
    exhaustive = len(instance.nodes) <= EXHAUSTIVE_NODES and not instance.device_types
    if found.plan is None and not strict_memory:
        return BatchSearch(math.inf, None, math.inf, True, math.inf, stats)
    if found.plan is None and not exhaustive:     # a narrowed DP may miss plans that fit exactly: nothing shown
        return BatchSearch(math.inf, None, 0.0, False, math.inf, stats)
    bound = 0.0 if strict_memory else m * found.value    # T ≥ 0 is all a narrowed DP's optimum shows
    best_plan = found.plan
    best = math.inf if best_plan is None else time_per_batch(instance, best_plan, schedule,
                                                             forward_share=forward_share)
    stats["dp_plan_time_per_batch"] = best

    def proven_by_bound() -> bool:
        return best <= bound * (1 + tolerance)

    stalls = best_plan is not None and schedule == "1f1b" and best > time_per_batch(
        instance, best_plan, "gpipe", forward_share=forward_share) * (1 + tolerance)
    stats["dp_plan_stalls"] = stalls
    if best_plan is not None and not proven_by_bound():
        none_fits = math.inf    # under 1F1B, the least degree at which no uniform plan fits
        total = _device_total(instance, devices)
        least = 0.0 if instance.device_types else math.fsum(least_device_times(instance).values())
        for d in candidate_degrees(best_plan, m, total):
            if d >= none_fits or proven_by_bound():
                break
            if m * _uniform_floor(least, d, total) >= best:
                continue
            # only a plan of m·TPS below the incumbent can beat it (T ≥ m·TPS): the DP skips stages above that
            uniform = solve_parallel(instance, devices=devices, memory=memory, schedule=schedule, tables=tables,
                                     sets=sets, allowed=[(t, d) for t in tables.degrees], strict_memory=strict_memory,
                                     below=best / m)
            stats["candidates"] += 1
            if uniform.plan is None and schedule == "1f1b" and "none_below" not in uniform.stats:
                none_fits = d
            if uniform.plan is None or m * uniform.value >= best:
                continue
            value = time_per_batch(instance, uniform.plan, schedule, forward_share=forward_share)
            if value < best:
                best, best_plan = value, uniform.plan
        stats["single_stage_candidates"] = 0
        for floor, t, d in single_stage_shapes(instance, m, total):
            if proven_by_bound() or m * floor >= best:
                break
            single = solve_parallel(instance, devices=d * t, memory=memory, schedule=schedule, tables=tables,
                                    sets=sets, allowed=[(t, d)], strict_memory=strict_memory, below=best / m)
            stats["single_stage_candidates"] += 1
            if single.plan is None or m * single.value >= best:
                continue
            value = time_per_batch(instance, single.plan, schedule, forward_share=forward_share)
            if value < best:
                best, best_plan = value, single.plan
        left = few_stage_budget()    # one budget for all stage counts: what the searches of fewer stages left
        for stages in FEW_STAGES:
            if proven_by_bound() or min(left.values()) <= 0:
                break
            value, plan, counters = few_stage_plan(instance, devices=devices, memory=memory, schedule=schedule,
                                                   stages=stages, incumbent=best, tables=tables, sets=sets,
                                                   forward_share=forward_share, strict_memory=strict_memory, **left)
            stats[f"{stages}_stage_search"] = counters
            left = {"max_work": left["max_work"] - counters["work"], "max_plans": left["max_plans"] - counters["plans"],
                    "max_combinations": left["max_combinations"] - counters["combinations"]}
            if plan is not None:
                best, best_plan = value, plan
    proven = proven_by_bound()
    if not proven and exhaustive:
        search = _BranchAndBound(instance, devices, memory, schedule, forward_share, best, max_nodes)
        completed = search.run()
        stats["branch_and_bound_nodes"] = search.visited
        stats["branch_and_bound_completed"] = completed
        if search.plan is not None:
            best, best_plan = search.best, search.plan
        if completed:
            proven, bound = True, best
    return BatchSearch(best, best_plan, min(bound, best), proven, found.value, stats)


def candidate_degrees(plan: ParallelPlan, microbatches: int, devices: int) -> list[int]:
    """The degrees of the uniform-degree candidates (module docstring), ascending: every divisor ``d`` of
    ``microbatches`` up to ``devices`` but the one every stage of ``plan`` (the DP's) already has."""
    same = {s.d for s in plan.stages}
    return [d for d in range(1, min(devices, microbatches) + 1)
            if microbatches % d == 0 and same != {d}]


def single_stage_shapes(instance: PiperInstance, microbatches: int, devices: int) -> list[tuple[float, int, int]]:
    """The shapes ``(t, d)`` of the single-stage candidates (module docstring) on an instance without device
    types (none with them), each with its floor ``L_t / d`` (``L_t`` the Σ over the nodes of their least
    ``timePerSample`` at degree ``t``: a stage of all nodes at ``(t, d)`` has ``TPS ≥ C / d ≥ L_t / d``), by
    floor: ``t`` every degree all nodes have, ``d`` every divisor of ``microbatches`` up to ``microbatches / 2``
    with ``d·t ≤ devices`` (a larger ``d`` allows one stage alone, which the uniform-degree candidates find)."""
    if instance.device_types:
        return []
    common = set.intersection(*(set(node.configurations) for node in instance.nodes))
    shapes = []
    for t in sorted(common):
        least = math.fsum(min(c.time_per_sample for c in node.configurations[t]) for node in instance.nodes)
        shapes += [(least / d, t, d) for d in range(1, microbatches // 2 + 1)
                   if microbatches % d == 0 and d * t <= devices]
    return sorted(shapes)


def _uniform_floor(least: float, d: int, devices: int) -> float:
    """A lower bound on ``max_k TPS_k`` of every plan whose stages all have degree ``d``: ``L / (d·⌊devices/d⌋)``,
    ``L = least`` the least device time of all nodes (Σ of the least ``t · timePerSample``; give ``0`` on an
    instance with device types, where it bounds nothing). Its stages' ``t_k`` sum to at most ``⌊devices/d⌋`` and
    their compute ``C_k`` satisfies ``Σ t_k·C_k ≥ L``, so some stage has ``C_k ≥ L / ⌊devices/d⌋`` and
    ``TPS_k ≥ C_k / d``."""
    return least / (d * (devices // d))


def least_device_times(instance: PiperInstance) -> dict[int, float]:
    """Per node (by id), its least device time per sample: the least ``t · timePerSample`` over its TMPCs (no
    stage runs it on fewer device-seconds)."""
    return {node.id: min(t * c.time_per_sample for t, cs in node.configurations.items() for c in cs)
            for node in instance.nodes}


def _device_total(instance: PiperInstance, devices) -> int:
    """The devices of every type together (``devices``: a count, or counts per type)."""
    counts = device_counts(instance, devices)
    return sum(counts.values()) if isinstance(counts, dict) else counts


class _Stop(Exception):
    """The branch and bound ran out of steps."""


class _BranchAndBound:
    """Every plan of a small instance, pruned by the bounds of the module docstring."""

    def __init__(self, instance: PiperInstance, devices: int, memory: float, schedule: str, forward_share: float,
                 incumbent: float, max_nodes: int) -> None:
        self.instance, self.devices, self.schedule = instance, devices, schedule
        # the memory rule on the sizes and the bound as written (placement.problem.memory_fit): exact sums
        self.room = as_written(memory) if math.isfinite(memory) else math.inf
        self.share, self.best, self.plan, self.max_nodes, self.visited = forward_share, incumbent, None, max_nodes, 0
        self.m = instance.microbatches_in_batch
        self.nodes = {node.id: node for node in instance.nodes}
        self.preds: dict[int, set[int]] = {v: set() for v in self.nodes}
        for e in instance.edges:
            self.preds[e.dst].add(e.src)
        self.least = least_device_times(instance)
        self.options: dict[tuple[frozenset, int], list[tuple[tuple[float, ...], dict[int, str]]]] = {}

    def run(self) -> bool:
        try:
            self._extend([], frozenset(self.nodes), 0, 0)
        except _Stop:
            return False
        return True

    def _ideals(self, rest: frozenset):
        members = sorted(rest)
        for size in range(1, len(members) + 1):
            for first in itertools.combinations(members, size):
                chosen = set(first)
                if all(self.preds[v] & rest <= chosen for v in first):
                    yield frozenset(first)

    def _stage_options(self, block: frozenset, t: int):
        """Non-dominated TMPC choices of ``block`` at degree ``t``: ((C, boundary bytes, W, A, R), choice)."""
        key = (block, t)
        if key not in self.options:
            ordered = sorted(block)
            into = [e for e in self.instance.edges if e.dst in block and e.src not in block]
            out_of = [e for e in self.instance.edges if e.src in block and e.dst not in block]
            found = []
            for combo in itertools.product(*(self.nodes[v].configurations[t] for v in ordered)):
                chosen = dict(zip(ordered, combo))
                boundary = (math.fsum(2 * (e.communication_cost + chosen[e.dst].sync_time_fw[e.src]) for e in into)
                            + math.fsum(2 * (e.communication_cost + chosen[e.src].sync_time_bw[e.dst])
                                        for e in out_of))
                vector = (math.fsum(c.time_per_sample for c in combo), boundary,
                          math.fsum(c.parameter_size for c in combo),
                          sum((as_written(c.memory_usage_a) for c in combo), Fraction(0)),   # memory as written
                          sum((as_written(c.memory_usage_b) for c in combo), Fraction(0)))
                found.append((vector, {v: c.id for v, c in chosen.items()}))
            self.options[key] = [(vec, ch) for vec, ch in found
                                 if not any(all(a <= b for a, b in zip(other, vec)) and other != vec
                                            for other, _ in found)]
        return self.options[key]

    def _in_flight(self, degrees: list[int], k: int) -> int:
        if self.schedule == "gpipe":
            return self.m // degrees[k]
        return -(-sum(degrees[k:]) // degrees[k])

    def _extend(self, placed: list, rest: frozenset, used: int, degree_sum: int) -> None:
        m, bandwidth = self.m, self.instance.bandwidth
        for block in self._ideals(rest):
            left = rest - block
            common = set.intersection(*(set(self.nodes[v].configurations) for v in block))
            for t in sorted(common):
                for d in range(1, (self.devices - used) // t + 1):
                    if m % d or degree_sum + d + (1 if left else 0) > m:
                        continue
                    spare = self.devices - used - d * t
                    if left and (spare < 1 or m * math.fsum(self.least[v] for v in left) / spare >= self.best):
                        continue
                    for vector, choice in self._stage_options(block, t):
                        self.visited += 1
                        if self.visited > self.max_nodes:
                            raise _Stop
                        compute, boundary, weights, activations, resident = vector
                        per_microbatch = compute + boundary / bandwidth
                        busy = (m // d) * per_microbatch + 4 * (d - 1) * weights / (d * bandwidth)
                        if busy >= self.best:
                            continue
                        stages = placed + [(block, d, t, vector, choice)]
                        degrees = [s[1] for s in stages]
                        if any(s[3][3] * self._in_flight(degrees, k) + s[3][4] > self.room
                               for k, s in enumerate(stages)):
                            continue
                        if left:
                            self._extend(stages, left, used + d * t, degree_sum + d)
                        else:
                            self._leaf(stages)

    def _leaf(self, stages: list) -> None:
        stage_of = {v: k for k, s in enumerate(stages) for v in s[0]}
        upstream: list[set[int]] = [set() for _ in stages]
        downstream: list[set[int]] = [set() for _ in stages]
        for e in self.instance.edges:
            a, b = stage_of[e.src], stage_of[e.dst]
            if a != b:
                downstream[a].add(b)
                upstream[b].add(a)
        bandwidth = self.instance.bandwidth
        times = [StageTimes(boundary / (2 * bandwidth) + self.share * compute,
                            boundary / (2 * bandwidth) + (1 - self.share) * compute, d, weights / bandwidth,
                            tuple(sorted(upstream[k])), tuple(sorted(downstream[k])))
                 for k, (_, d, _, (compute, boundary, weights, _, _), _) in enumerate(stages)]
        value = batch_time(times, self.m, self.schedule)
        if value < self.best:
            self.best = value
            self.plan = ParallelPlan(tuple(ParallelStage(tuple(sorted(block)), d, t, choice)
                                           for block, d, t, _, choice in stages), self.schedule)


__all__ = ["BATCH_SCHEDULES", "DEFAULT_MAX_NODES", "EXHAUSTIVE_NODES", "FEW_STAGES", "BatchSearch",
           "candidate_degrees", "search_time_per_batch", "single_stage_shapes"]
