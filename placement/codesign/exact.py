"""The exact co-design: the designs and pipeline placement that maximise throughput, or throughput
per watt, over a grid, under per-chip area and power budgets, proven optimal.

Method
------
1. Candidates (:mod:`.space`): the grid cut to the budgets (a down-closed region, pruned without
   costing a design), each design costed on every node (:mod:`.opcost`), dominated designs
   dropped (never needed in an optimal plan).
2. *Heterogeneous* (a design per stage): one DP over ideals whose transitions choose the design
   of each stage (:func:`.pipeline.design_dp`; pool layers, so the DP never enumerates design
   assignments). For throughput per watt, a DP over the same ideals whose state is the Pareto
   front of (max load, summed TDP) per ideal and number of stages (:func:`.frontier.per_watt_dp`:
   its docstring states the recurrence and why dominance and its bound keep the optimum); the
   optimum is the least (max load × summed TDP) on the front of the whole graph, the TDP counted
   over the chips the plan uses. Before it, every design whose energy bound
   (:func:`energy_bounds`: a stage on it makes max load × watts at least that) exceeds the score
   of the best one-chip plan is pruned.
3. *Homogeneous* (one design for every chip): the DP of :mod:`placement.solvers.dp` per design,
   designs taken by increasing lower bound (:func:`.space.time_lower_bounds`; for throughput per
   watt, the larger of the total compute and the largest colour class, times the TDP, since
   ``max load · chips used ≥ total compute``); once a design's
   bound reaches the best value found, it and every later design are pruned.

The objective values: throughput = ``1000 / T`` batches per second for a max load of ``T``
ms; throughput per watt = that divided by the summed TDP of the chips used. The chosen plan is
re-checked by :func:`placement.verification.evaluate.evaluate` (:func:`.outcome.finish`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from placement.codesign.grid import Grid
from placement.codesign.frontier import SLACK, per_watt_dp
from placement.codesign.outcome import Best, finish, infeasible
from placement.codesign.pipeline import design_dp, design_instance, layer_plans
from placement.codesign.space import Candidates, candidates, class_times, time_lower_bounds, undominated
from placement.codesign.template import DRAM_BYTES
from placement.codesign.workload import Workload
from placement.solvers.dp import solve_dp
from placement.solvers.dp_table import build_layers
from placement.solvers.ideals import DEFAULT_MAX_IDEALS


def solve_exact(workload: Workload, grid: Grid, chips: int, area_mm2: float, power_w: float, *,
                homogeneous: bool = False, objective: str = "throughput",
                max_ideals: int = DEFAULT_MAX_IDEALS):
    """The proven co-design optimum over ``grid`` (module docstring); a :class:`.result.CodesignResult`."""
    start = time.perf_counter()
    per_watt = objective == "perf-per-watt"
    space = candidates(workload, grid, area_mm2, power_w)
    if not space.designs:
        return infeasible(workload, space, chips, homogeneous, objective, "exact", start, area_mm2, power_w)
    pareto = space.subset(undominated(space, per_watt))
    dominated = len(space.designs) - len(pareto.designs)
    usable = workload.usable_chips(chips)
    work: dict[str, int] = {}
    if homogeneous:
        best, ran = _homogeneous(workload, pareto, usable, per_watt, max_ideals)
        runs, bound_pruned = len(ran), len(pareto.designs) - len(ran)
    elif per_watt:
        best, runs, bound_pruned, work = _heterogeneous_per_watt(workload, pareto, usable, max_ideals)
    else:
        best, runs, bound_pruned = _heterogeneous(workload, pareto, usable, max_ideals), 1, 0
    pruned_by = {"area": space.over_area, "power": space.over_power, "dominated": dominated, "bound": bound_pruned}
    return finish(workload, space, best, chips, homogeneous, objective, "exact", start, pruned_by, runs,
                  stats={"within_budgets": len(space.designs), "undominated": len(pareto.designs), **work})


def _homogeneous(workload: Workload, c: Candidates, chips: int, per_watt: bool,
                 max_ideals: int) -> tuple[Best | None, list[int]]:
    """The best homogeneous plan, and the designs (rows of ``c``) that a DP ran on; the others were
    pruned by their bound."""
    bounds = time_lower_bounds(workload, c.times, chips)
    if per_watt:   # on c ≤ chips chips: max load · c ≥ total compute, and ≥ the largest class (c ≥ 1)
        bounds = np.maximum(class_times(workload, c.times), c.times.sum(axis=1)) * c.tdp
    order = np.argsort(bounds, kind="stable")
    best: Best | None = None
    ran: list[int] = []
    for t in order:
        if best is not None and bounds[t] >= best.score:
            break
        design = c.designs[t]
        ran.append(int(t))
        if not per_watt:
            solution = solve_dp(design_instance(workload, [design], c.times[[t]], [chips]), max_ideals=max_ideals)
            if solution.plan is not None and (best is None or solution.objective < best.score):
                best = Best(solution.objective, solution.objective, solution.plan, (design,))
            continue
        problem = design_instance(workload, [design], c.times[[t]], [chips])
        plans, _, _ = layer_plans(problem, build_layers(problem), max_ideals=max_ideals)
        for _, value, plan in plans:
            score = value * plan.non_empty * float(c.tdp[t])
            if best is None or score < best.score:
                best = Best(score, value, plan, (design,))
    return best, ran


def _heterogeneous(workload: Workload, c: Candidates, chips: int, max_ideals: int) -> Best | None:
    problem = design_instance(workload, c.designs, c.times, [chips] * len(c.designs))
    run = design_dp(problem, chips, max_ideals=max_ideals)
    if run.plan is None:
        return None
    return Best(run.time_ms, run.time_ms, run.plan, c.designs)


def energy_bounds(workload: Workload, c: Candidates) -> np.ndarray:
    """Per design ``d``, a lower bound on (max load × summed TDP) of any plan with a stage on ``d``.

    With stage loads ``ℓ_s ≤ T`` on designs ``d_s``: ``T · Σ_s TDP(d_s) ≥ Σ_s TDP(d_s) · ℓ_s ≥
    Σ_C TDP(d_C) · time_{d_C}(C)`` over the colour classes ``C`` (each on one stage, ``d_C`` its
    design), which is at least ``E = Σ_C e(C)`` with ``e(C) = min_d TDP(d) · time_d(C)``; a stage on
    ``d`` holds at least one class, whose term exceeds ``e(C)`` by ``TDP(d) · time_d(C) − e(C) ≥ 0``,
    so the bound is ``E + min_C (TDP(d) · time_d(C) − e(C))``.
    """
    classes = workload.instance.colour_classes()
    energy = np.column_stack([c.times[:, members].sum(axis=1) for members in classes]) * c.tdp[:, None]
    least = energy.min(axis=0)
    return least.sum() + (energy - least).min(axis=1)


def _heterogeneous_per_watt(workload: Workload, c: Candidates, chips: int,
                            max_ideals: int) -> tuple[Best | None, int, int, dict[str, int]]:
    """The Pareto-front DP (:func:`.frontier.per_watt_dp`) over the designs of ``c`` whose
    :func:`energy_bounds` do not exceed the score of the best one-chip plan (the whole model on one
    chip: its load is its compute; a bound only when the model fits a chip's DRAM); with the DP runs
    (1), the designs pruned by that bound, and the DP's work (ideals, blocks costed, front pairs kept)."""
    single = c.times.sum(axis=1) * c.tdp
    fits = sum(node.memory for node in workload.instance.nodes) <= DRAM_BYTES
    ub = float(single.min()) if fits else math.inf
    keep = np.flatnonzero(energy_bounds(workload, c) <= ub * (1 + SLACK))
    kept = c.subset(keep)
    problem = design_instance(workload, kept.designs, kept.times, [chips] * len(kept.designs))
    run = per_watt_dp(problem, kept.tdp, chips, max_ideals=max_ideals)
    best = None if run.plan is None else Best(run.score, run.time_ms, run.plan, kept.designs)
    work = {"ideals": run.ideals, "blocks": run.blocks, "front_pairs": run.pairs}
    return best, 1, len(c.designs) - len(keep), work


__all__ = ["solve_exact"]
