"""The plan of least time per batch among those of two or three stages: candidates of the time-per-batch search.

Under a batch of few micro-batches the fill and drain of a pipeline weigh as much as its bottleneck, and the plan
of least time per batch often has two or three stages of mixed degrees, where the DP's plan (least largest time per
sample, :mod:`placement.parallel.dp`) has more stages, or as many with its other stages on as few devices as their
values allow: its objective does not see the time a micro-batch takes through them. This search enumerates the
plans of ``S`` stages (``S`` = 2, 3) of the DP's model — the successor-closed sets ``∅ ⊊ J ⊊ I ⊊ V`` of its family
give the stages ``V \\ I``, ``I \\ J``, ``J`` (``S = 2``: ``V \\ I``, ``I``), every (type, ``t``, ``d``) of each
(:func:`placement.parallel.dp.typed_pairs`) with ``Σ d·t`` within each type's count and ``Σ d ≤ m`` — each stage
with the TMPCs of least time per sample at its micro-batches in flight that fit (the DP's stage value,
:func:`placement.parallel.dp.stage_choice`), and values each plan by its exact time per batch
(:func:`placement.parallel.timing.time_per_batch`).

Pruning, exact (every plan skipped takes at least the incumbent's ``T``): with ``C_k`` a lower bound on stage
``k``'s forward and backward of one micro-batch (its nodes' least times per sample at ``t`` over the type's speed,
plus ``2·`` the bytes of its edges to other stages over the type's bandwidth), a replica of stage ``k`` runs its
``m/d_k`` micro-batches one after another, after the forwards of the first through any chain of stages that send
to one another and to ``k``, and before the backwards there of the last: ``T ≥ Σ_chain C_i + (m/d_k)·C_k``
(:meth:`_Search.bounds`); and ``T ≥ m·TPS_k`` (:mod:`placement.parallel.batch_search`). The combinations of the
stages' (type, ``t``, ``d``) of every split are bounded at once (splits in batches, as arrays of a row per split),
and those below the incumbent are tried in increasing bound over all splits, until the bound reaches the incumbent:
each stage valued (skipped where ``m`` times its value reaches the incumbent, or the bound with the stages' exact
times per micro-batch does), then the plan timed. The TMPCs are those of least ``TPS``, not of least ``T``, and
memory is checked exactly on the sizes as written before a plan is taken
(:func:`placement.verification.parallel.evaluate_parallel`): a candidate, not a proof. At most ``max_plans`` plans
are timed (each a longest path over the batch's tasks: the first found is most often the best, and the bound leaves
many near it on a long batch), stage values computed over at most ``max_work`` nodes in all (each a knapsack over its
nodes at worst; none for a stage whose nodes' least memory is over the device's) and ``max_combinations``
combinations bounded: past them the search stops with the best plan so far.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from placement.io.piper import PiperInstance
from placement.parallel.dp import memory_model, stage_choice, typed_pairs
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.parallel.schedules import in_flight
from placement.parallel.tables import Family, Tables
from placement.parallel.timing import time_per_batch
from placement.verification.parallel import evaluate_parallel

#: the most work on stage values one search does: Σ over the stage values computed of their nodes (each value a
#: knapsack over the stage's nodes at worst)
DEFAULT_MAX_WORK = 5_000
#: the most plans one search times (each a longest path over the batch's tasks)
DEFAULT_MAX_PLANS = 30
#: the most combinations of the stages' (type, t, d) one search bounds (arrays of that many floating-point numbers)
MAX_COMBINATIONS = 2_000_000
#: three-stage plans are searched where the pruning leaves at most this many sets to end the first stage (pairs of
#: them are enumerated)
MAX_THREE_STAGE_SETS = 2_000
#: the most elements of an array per stage that the bound of a batch of splits takes (splits × combinations, nodes
#: or edges): splits are bounded in batches of at most this size
BATCH_ELEMENTS = 1 << 18


def few_stage_plan(instance: PiperInstance, *, devices, memory: float | None, schedule: str, stages: int,
                   incumbent: float, tables: Tables, sets: Family, forward_share: float, strict_memory: bool = False,
                   max_work: int = DEFAULT_MAX_WORK, max_plans: int = DEFAULT_MAX_PLANS,
                   max_combinations: int = MAX_COMBINATIONS) -> tuple[float, ParallelPlan | None, dict[str, Any]]:
    """The least time per batch below ``incumbent`` over the plans of exactly ``stages`` (2 or 3) stages (module
    docstring), its plan (``incumbent, None`` where none is below it) and counters: ``evaluations`` (stage values
    computed), ``work`` (their nodes), ``over_memory`` (stages skipped for memory), ``plans`` (plans timed),
    ``combinations`` (bounded), ``best_at`` (plans timed before the best), ``stopped`` (past a limit) and ``skipped``
    (three stages over too many sets)."""
    m = instance.microbatches_in_batch
    types, tables, fit, _ = memory_model(instance, devices, memory, tables, strict_memory)
    pairs = typed_pairs(tables, types, m)
    search = _Search(instance, tables, types, fit, pairs, schedule, forward_share, incumbent, max_work,
                     devices, memory, max_combinations, stages)
    member, full = sets.member, sets.full
    least = search.least_sums(member)         # (N, degree indices): the nodes' least times per sample
    rest = search.least_sums(~member)         # of V \ I
    inner = np.flatnonzero((sets.size > 0) & (sets.size < sets.size[full]))
    # the bytes of the edges into each set, which both stages of a split at it send or receive
    cut = np.bincount(np.repeat(np.arange(len(sets.size)), np.diff(sets.cut_ptr)),
                      weights=tables.cost[sets.cut_idx], minlength=len(sets.size))
    inner = inner[np.argsort(sets.size[inner], kind="stable")]
    # the sets that may end the first stage (the rest before them, one stage at its fastest (type, t, d), is below
    # the incumbent) and those that may be the last stage (the set alone, likewise); with three stages the rest
    # before the last and the set after the first are two stages, which that bound does not bound
    ends_first = m * search.fastest(rest[inner], cut[inner]) < incumbent
    alone = m * search.fastest(least[inner], cut[inner]) < incumbent
    first, last = inner[ends_first], inner[alone]
    try:
        if stages == 2:
            both = inner[ends_first & alone]
            for start in range(0, len(both), search.batch):
                i = both[start:start + search.batch]
                search.collect([(member[full] & ~member[i], rest[i]), (member[i], least[i])])
        elif len(first) <= MAX_THREE_STAGE_SETS:
            for i in first:
                inside = last[np.all((sets.bits[last] & ~sets.bits[i]) == 0, axis=1) & (last != i)]
                # of I \ J, a difference: lowered by its rounding (0 where neither sum is finite)
                with np.errstate(invalid="ignore"):
                    middle = np.nan_to_num(np.maximum(least[i] - least[inside] - 1e-9 * least[i], 0.0), nan=0.0)
                below = m * search.fastest(middle, np.zeros(len(inside))) < incumbent
                inside, middle = inside[below], middle[below]
                for start in range(0, len(inside), search.batch):
                    j, part = inside[start:start + search.batch], slice(start, start + search.batch)
                    search.collect([(np.broadcast_to(member[full] & ~member[i], (len(j), member.shape[1])),
                                     np.broadcast_to(rest[i], (len(j), rest.shape[1]))),
                                    (member[i] & ~member[j], middle[part]), (member[j], least[j])])
        else:
            search.stats["skipped"] = True
    except _Stop:   # the combinations collected are still tried
        search.stats["stopped"] = True
    try:
        search.run(max_plans)
    except _Stop:
        search.stats["stopped"] = True
    return search.best, search.plan, search.stats


def _nodes(row: np.ndarray) -> tuple[int, ...]:
    return tuple(int(r) for r in np.flatnonzero(row))


class _Stop(Exception):
    """The search reached one of its limits."""


class _Search:
    """The plans of given stages (their nodes as a boolean row over the node rows, with their least times per
    degree index), back to front."""

    def __init__(self, instance: PiperInstance, tables: Tables, types, fit, pairs, schedule: str, share: float,
                 incumbent: float, max_work: int, devices, memory, max_combinations: int = MAX_COMBINATIONS,
                 stages: int = 2) -> None:
        self.instance, self.tables, self.types, self.fit, self.pairs = instance, tables, types, fit, pairs
        self.schedule, self.share, self.best, self.plan = schedule, share, incumbent, None
        self.devices, self.memory, self.limit = devices, memory, max_work
        self.max_combinations = max_combinations
        #: the splits bounded at once
        self.batch = max(1, BATCH_ELEMENTS // max(len(pairs) ** stages, len(tables.src), len(tables.ids), 1))
        self.m = instance.microbatches_in_batch
        available = np.arange(tables.time.shape[2])[None, None, :] < tables.options[:, :, None]
        least = np.where(available, tables.params, np.inf).min(axis=2)        # (n, degree indices)
        self.least_params = np.where(np.isfinite(least), least, 0.0)
        self.least_time = np.where(available, tables.time, np.inf).min(axis=2)   # (n, degree indices)
        self.values: dict[tuple, tuple[float, list[int]]] = {}
        self.stats: dict[str, Any] = {"evaluations": 0, "work": 0, "over_memory": 0, "plans": 0,
                                      "combinations": 0, "stopped": False}
        self.found: list[tuple[np.ndarray, np.ndarray, int]] = []   # (bounds, pairs per stage, split) kept
        self.splits: list[list] = []

    def least_sums(self, member: np.ndarray) -> np.ndarray:
        """Per set (rows of ``member``) and degree index, the Σ of its nodes' least time per sample (``inf``
        where one has no TMPC at that degree)."""
        least = self.least_time
        finite = np.where(np.isfinite(least), least, 0.0)
        missing = member.astype(np.float64) @ (~np.isfinite(least)).astype(np.float64)
        return np.where(missing > 0, np.inf, member.astype(np.float64) @ finite)

    def fastest(self, least: np.ndarray, cut: np.ndarray) -> np.ndarray:
        """Per row of ``least`` (Σ of least times per degree index) and of ``cut`` (bytes of the edges that leave
        or enter the stage), the least ``TPS`` bound of its stage over every (type, ``t``, ``d``): ``(least[t] /
        speed + 2·cut / bandwidth) / d`` (each edge costs its end ``2·(bytes + sync)``, syncs non-negative)."""
        types = self.types
        bounds = [(least[:, index] / types.speed[tau] + 2 * cut / types.bandwidth[tau]) / d
                  for tau, index, d in self.pairs]
        return np.min(bounds, axis=0) if bounds else np.full(len(least), np.inf)

    def boundary(self, inside: np.ndarray) -> np.ndarray:
        """Per stage (rows of ``inside``, boolean over the node rows), the bytes of the edges with one end in it and
        the other not."""
        return (inside[:, self.tables.src] != inside[:, self.tables.dst]) @ self.tables.cost

    def sends(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """Per row of the stages ``first`` and ``second`` (boolean rows over the node rows), whether an edge leads
        from a node of the one to a node of the other."""
        return np.any(first[:, self.tables.src] & second[:, self.tables.dst], axis=1)

    def collect(self, stages: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """The plans of the splits ``stages`` (front to back, each stage's boolean rows over the node rows and Σ of
        their least times per degree index, a row per split) that may be below the incumbent: the (type, ``t``,
        ``d``) of every stage at once, those within the devices and ``Σ d ≤ m`` whose bound (:meth:`bounds`) is
        below it; past ``max_combinations`` bounded, the splits within it are kept and the search stops."""
        bound, choices = self.bounds([least for _, least in stages], [inside for inside, _ in stages])
        count, width = bound.shape
        within = count if width == 0 else min(count, max(0, (self.max_combinations - self.stats["combinations"])
                                                         // width))
        self.stats["combinations"] += min(count, within + 1) * width
        keep = bound[:within] < self.best
        for row in np.flatnonzero(keep.any(axis=1)):
            pick = np.flatnonzero(keep[row])
            self.found.append((bound[row, pick], choices[:, pick], len(self.splits)))
            self.splits.append([(inside[row], least[row]) for inside, least in stages])
        if within < count:
            raise _Stop

    def run(self, max_plans: int) -> None:
        """The plans collected, by bound over all splits, while it is below the incumbent: each stage valued (back
        to front: a stage's micro-batches in flight depend on the later ones' ``d``) unless ``m`` times a value,
        or the bound with the stages' own times per micro-batch (:meth:`chained`), reaches the incumbent; at most
        ``max_plans`` timed."""
        if not self.found:
            return
        bound = np.concatenate([b for b, _, _ in self.found])
        choices = np.concatenate([q for _, q, _ in self.found], axis=1)
        split = np.concatenate([np.full(len(b), k) for b, _, k in self.found])
        for flat in np.argsort(bound, kind="stable"):
            if not bound[flat] < self.best:
                break
            if self.stats["plans"] >= max_plans:
                raise _Stop
            self._try(self.splits[split[flat]], [int(q) for q in choices[:, flat]])

    def _try(self, stages, qs: list[int]) -> None:
        """The plan of ``stages`` at the pairs ``qs``, where its bounds leave it below the incumbent."""
        m = self.m
        chosen, suffix, times = [], 0, []
        for (inside, _), q in zip(stages[::-1], qs[::-1]):
            nodes = _nodes(inside)
            tau, index, d = self.pairs[q]
            suffix += d
            value, choice = self._value(nodes, q, in_flight(self.schedule, suffix, d, m))
            if not m * value < self.best:
                return
            chosen.append((nodes, tau, index, d, choice))
            times.append(self.per_microbatch(nodes, tau, index, d, choice, value))
        if self.chained(stages, times[::-1], [d for *_, d, _ in chosen[::-1]]) < self.best:
            self._leaf(chosen[::-1])

    def per_microbatch(self, nodes, tau: int, index: int, d: int, choice: list[int], value: float) -> float:
        """A stage's forward and backward of one micro-batch, ``c = d·TPS − 4·(d − 1)·W / (m·bandwidth)`` (its
        value ``TPS = c/d + 4·(d − 1)·W / (d·m·bandwidth)`` with the parameters ``W`` of its TMPCs), lowered by
        1e-9 of the first term against the rounding of the difference."""
        tables = self.tables
        weights = float(sum(tables.params[r, index, l] for r, l in zip(nodes, choice)))
        return d * value * (1 - 1e-9) - 4 * (d - 1) * weights / (self.m * self.types.bandwidth[tau])

    def chained(self, stages, times: list[float], degrees: list[int]) -> float:
        """The bound of :meth:`bounds` with the stages' times per micro-batch ``times`` (front to back)."""
        before: list[float] = []
        bound = 0.0
        for k in range(len(stages)):
            before.append(max((before[i] + times[i] for i in range(k)
                               if self.sends(stages[i][0][None, :], stages[k][0][None, :])[0]), default=0.0))
            bound = max(bound, before[k] + self.m // degrees[k] * times[k])
        return bound

    def bounds(self, least: list[np.ndarray], nodes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """For splits into the stages ``nodes`` (front to back, each a boolean array of a row per split over the node
        rows) with Σ of least times ``least`` (likewise, a row per split over the degree indices), per split and
        combination of the stages' pairs (flat, in the order of ``numpy.indices``): a lower bound on the time per
        batch, ``inf`` where the combination exceeds the devices of a type or ``Σ d ≤ m``; and each stage's pair
        per combination (a row per stage). The bound: with ``C_k`` the least time of stage ``k`` per micro-batch
        (its Σ at ``t`` over the type's speed, and ``2·`` the bytes of its edges to other stages over the type's
        bandwidth: its forward and backward of a micro-batch take at least that), a replica of stage ``k`` runs its
        ``m/d_k`` micro-batches one after another, after the forwards of the first through a chain ``P`` of stages
        that send to one another and to ``k`` (an edge from each to the next), and before the backwards there of the
        last, or before its ring all-reduce (``4·(d_k − 1)·W_k / (d_k·bandwidth)``, ``W_k`` the Σ of its nodes'
        least parameters): ``T ≥ max(Σ_{i∈P} C_i, ring) + (m/d_k)·C_k`` for every ``k`` and ``P`` (the longest
        ``P``, over the stages in order)."""
        pairs, m, types = self.pairs, self.m, self.types
        tau = np.array([p[0] for p in pairs])
        d = np.array([p[2] for p in pairs], dtype=np.float64)
        width = d * np.array([self.tables.degrees[p[1]] for p in pairs])
        speed = np.array([types.speed[p[0]] for p in pairs])
        count = len(least)
        grid = np.indices((len(pairs),) * count).reshape(count, -1)
        bandwidth = np.array([types.bandwidth[p[0]] for p in pairs])
        index = [p[1] for p in pairs]
        cost = [row[:, index][:, grid[k]] / speed[grid[k]] + 2 * self.boundary(nodes[k])[:, None] / bandwidth[grid[k]]
                for k, row in enumerate(least)]
        bound, before = np.zeros((len(least[0]), grid.shape[1])), []
        for k in range(count):
            # the longest chain into stage k: costs are non-negative, so 0 where no earlier stage sends to it
            before.append(np.zeros_like(bound))
            for i in range(k):
                before[k] = np.maximum(before[k], np.where(self.sends(nodes[i], nodes[k])[:, None],
                                                           before[i] + cost[i], 0.0))
            weights = (nodes[k].astype(np.float64) @ self.least_params)[:, index][:, grid[k]]
            ring = 4 * (d[grid[k]] - 1) * weights / (d[grid[k]] * bandwidth[grid[k]])
            bound = np.maximum(bound, np.maximum(before[k], ring) + m / d[grid[k]] * cost[k])
        over = sum(d[grid[k]] for k in range(count)) > m
        for kind, limit in enumerate(types.counts):
            over |= sum(np.where(tau[grid[k]] == kind, width[grid[k]], 0.0) for k in range(count)) > limit
        bound[np.broadcast_to(over, bound.shape) | np.isnan(bound)] = np.inf
        return bound, grid

    def _value(self, nodes: tuple[int, ...], q: int, y: int) -> tuple[float, list[int]]:
        """The DP's stage value and TMPC choice (:func:`placement.parallel.dp.stage_choice`); ``inf`` without it
        where the nodes' least memory at ``y`` micro-batches in flight exceeds the device's (by more than 1e-6:
        the bound the DP's sums may be decided on, :data:`placement.problem.memory_fit.LENIENT`, is within it)."""
        key = (nodes, q, y)
        if key not in self.values and self._too_large(nodes, q, y):
            self.stats["over_memory"] += 1
            self.values[key] = (np.inf, [])
        if key not in self.values:
            self.stats["evaluations"] += 1
            self.stats["work"] += len(nodes)
            if self.stats["work"] > self.limit:
                raise _Stop
            tau, index, d = self.pairs[q]
            types = self.types
            self.values[key] = stage_choice(self.tables, list(nodes), index, d, y, self.m, types.memory[tau],
                                            types.bandwidth[tau], "exact", types.speed[tau], self.fit, tau)
        return self.values[key]

    def _too_large(self, nodes: tuple[int, ...], q: int, y: int) -> bool:
        tau, index, _ = self.pairs[q]
        tables = self.tables
        rows = list(nodes)
        available = np.arange(tables.time.shape[2])[None, :] < tables.options[rows, index][:, None]
        held = np.where(available, tables.mem_a[rows, index] * y + tables.mem_b[rows, index], np.inf).min(axis=1)
        capacity = self.types.memory[tau] if self.fit is None else self.fit.wide[tau]
        return bool(held.sum() > capacity * (1 + 1e-6))

    def _leaf(self, stages: list) -> None:
        tables = self.tables
        plan = ParallelPlan(tuple(
            ParallelStage(tuple(sorted(tables.ids[r] for r in nodes)), d, tables.degrees[index],
                          {tables.ids[r]: tables.tmpc_ids[r][index][l] for r, l in zip(nodes, choice)},
                          self.types.names[tau])
            for nodes, tau, index, d, choice in stages), self.schedule)
        self.stats["plans"] += 1
        value = time_per_batch(self.instance, plan, self.schedule, forward_share=self.share)
        if value < self.best:
            self.stats["best_at"] = self.stats["plans"]
        if value < self.best and evaluate_parallel(self.instance, plan, devices=self.devices, memory=self.memory).ok:
            self.best, self.plan = value, plan


__all__ = ["DEFAULT_MAX_PLANS", "DEFAULT_MAX_WORK", "few_stage_plan"]
