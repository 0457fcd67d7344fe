"""The exact co-design: the designs and pipeline placement that maximise throughput, or throughput
per watt, over a grid, under per-chip area and power budgets, proven optimal; of the plans that
tie, the one of fewest watts, then least area (:mod:`.result`).

Method
------
1. Candidates (:mod:`.space`): the grid cut to the budgets (a down-closed region, pruned without
   costing a design), each design costed on every node (:mod:`.opcost`), dominated designs
   dropped (on node times, TDP and area: never needed in an optimal plan, ties included).
2. *Heterogeneous* (a design per stage): one DP over ideals whose transitions choose the design
   of each stage (:func:`.pipeline.design_dp`; pool layers, so the DP never enumerates design
   assignments), over the designs undominated on node times alone, gives the least max load
   ``T*``. For throughput per watt, a DP over the same ideals whose state is the Pareto
   front of (max load, summed TDP) per ideal and number of stages (:func:`.frontier.per_watt_dp`:
   its docstring states the recurrence and why dominance and its bound keep the optimum); the
   optimum is the least (max load × summed TDP) on the front of the whole graph, the TDP counted
   over the chips the plan uses. Before it, every design whose energy bound
   (:func:`energy_bounds`: a stage on it makes max load × watts at least that) exceeds the score
   of the best one-chip plan is pruned. Then the tie-break: :func:`.frontier.least_power_dp`, the
   plan of fewest watts, then least area, whose every stage's load is within a cap ``C`` — for
   throughput ``C = T* · (1 + TIE)``, so its plans are exactly those that tie; per watt, ``C`` is
   the max load at which the front's pair of fewest watts among those that tie reaches the tie
   bound, so its plans of those watts are exactly the ones that tie (and none of fewer watts
   does: the front holds the least max load of every summed TDP).
3. *Homogeneous* (one design for every chip): the DP of :mod:`placement.solvers.dp` per design,
   designs taken by increasing lower bound (:func:`.space.time_lower_bounds`; for throughput per
   watt, the larger of the total compute and the largest colour class, times the TDP, since
   ``max load · chips used ≥ total compute``); once a design's bound exceeds the tie bound of
   the best value found, it and every later design are pruned. Per watt, every chip count's best
   plan (:func:`.pipeline.layer_plans`) is a candidate; for throughput, each design whose least
   max load ties gets the fewest chips that reach the tie bound (:func:`.frontier.least_power_dp`
   on that design). Of all candidates, :func:`.result.preferred` keeps the tie-break's choice.

The objective values: throughput = ``1000 / T`` batches per second for a max load of ``T``
ms; throughput per watt = that divided by the summed TDP of the chips used. The chosen plan is
re-checked by :func:`placement.verification.evaluate.evaluate` (:func:`.outcome.finish`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from placement.codesign.grid import Grid
from placement.codesign.frontier import SLACK, least_power_dp, per_watt_dp
from placement.codesign.outcome import Best, finish, infeasible
from placement.codesign.pipeline import design_dp, design_instance, layer_plans, pool_layers
from placement.codesign.result import preferred, tie_bound
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
    pareto = space.subset(undominated(space))
    dominated = len(space.designs) - len(pareto.designs)
    usable = workload.usable_chips(chips)
    work: dict[str, int] = {}
    if homogeneous:
        best, ran, runs = _homogeneous(workload, pareto, usable, per_watt, max_ideals)
        bound_pruned = len(pareto.designs) - len(ran)
    elif per_watt:
        best, runs, bound_pruned, work = _heterogeneous_per_watt(workload, pareto, usable, max_ideals)
    else:
        fastest = pareto.subset(undominated(pareto, by_cost=False))
        (best, runs), bound_pruned = _heterogeneous(workload, fastest, pareto, usable, max_ideals), 0
    pruned_by = {"area": space.over_area, "power": space.over_power, "dominated": dominated, "bound": bound_pruned}
    return finish(workload, space, best, chips, homogeneous, objective, "exact", start, pruned_by, runs,
                  stats={"within_budgets": len(space.designs), "undominated": len(pareto.designs), **work})


def _homogeneous(workload: Workload, c: Candidates, chips: int, per_watt: bool,
                 max_ideals: int) -> tuple[Best | None, list[int], int]:
    """The best homogeneous plan (module docstring, 3.), the designs (rows of ``c``) whose DP ran (the others
    were pruned by their bound), and the DP runs made."""
    bounds = time_lower_bounds(workload, c.times, chips)
    if per_watt:   # on c ≤ chips chips: max load · c ≥ total compute, and ≥ the largest class (c ≥ 1)
        bounds = np.maximum(class_times(workload, c.times), c.times.sum(axis=1)) * c.tdp
    order = np.argsort(bounds, kind="stable")
    area = c.area
    least = math.inf
    options: list[tuple[float, float, float, Best]] = []   # per watt: (score, watts, area, plan)
    fastest: list[tuple[int, object, float, object]] = []   # throughput: (design, its instance, least max load, plan)
    ran: list[int] = []
    for t in order:
        if bounds[t] > tie_bound(least):   # it and every later design: no plan of them ties with the best
            break
        design = c.designs[t]
        ran.append(int(t))
        problem = design_instance(workload, [design], c.times[[t]], [chips])
        if not per_watt:
            solution = solve_dp(problem, max_ideals=max_ideals)
            if solution.plan is not None:
                fastest.append((int(t), problem, solution.objective, solution.plan))
                least = min(least, solution.objective)
            continue
        plans, _, _ = layer_plans(problem, build_layers(problem), max_ideals=max_ideals)
        for _, value, plan in plans:
            score = value * plan.non_empty * float(c.tdp[t])
            options.append((score, plan.non_empty * float(c.tdp[t]), plan.non_empty * float(area[t]),
                            Best(score, value, plan, (design,))))
            least = min(least, score)
    runs = len(ran)
    if not per_watt:   # of the designs whose least max load ties, each on the fewest chips that tie
        cap = tie_bound(least)
        for t, problem, value, plan in fastest:
            if value > cap:
                continue
            design = c.designs[t]
            low = least_power_dp(problem, pool_layers(1, chips), c.tdp[[t]], area[[t]], cap, max_ideals=max_ideals)
            runs += 1
            if low.plan is None:   # only by rounding beyond the tie: the DP's plan
                options.append((value, plan.non_empty * float(c.tdp[t]), plan.non_empty * float(area[t]),
                                Best(value, value, plan, (design,))))
            else:
                options.append((low.time_ms, low.power_w, low.area_mm2, Best(low.time_ms, low.time_ms, low.plan,
                                                                              (design,))))
    return preferred(options, least), ran, runs


def _heterogeneous(workload: Workload, fastest: Candidates, c: Candidates, chips: int,
                   max_ideals: int) -> tuple[Best | None, int]:
    """The best throughput plan with a design per stage (module docstring, 2.): the least max load over the
    designs ``fastest`` (undominated on node times), then the plan of fewest watts, then least area, over the
    designs ``c`` whose every stage is within its tie bound; with the DP runs made (2, or 1 without a plan)."""
    problem = design_instance(workload, fastest.designs, fastest.times, [chips] * len(fastest.designs))
    run = design_dp(problem, chips, max_ideals=max_ideals)
    if run.plan is None:
        return None, 1
    low, designs = _least_power(workload, c, chips, tie_bound(run.time_ms), max_ideals)
    if low.plan is None:   # only by rounding beyond the tie: the DP's plan
        return Best(run.time_ms, run.time_ms, run.plan, fastest.designs), 2
    return Best(low.time_ms, low.time_ms, low.plan, designs), 2


def _least_power(workload: Workload, c: Candidates, chips: int, cap: float, max_ideals: int):
    """:func:`.frontier.least_power_dp` on at most ``chips`` chips of any designs of ``c``, every stage within
    ``cap``; with the designs the plan's device types name."""
    problem = design_instance(workload, c.designs, c.times, [chips] * len(c.designs))
    return least_power_dp(problem, pool_layers(len(c.designs), chips), c.tdp, c.area, cap,
                          max_ideals=max_ideals), c.designs


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
    chip: its load is its compute; a bound only when the model fits a chip's DRAM), then the tie-break
    (module docstring, 2.); with the DP runs (2, or 1 without a plan), the designs pruned by that bound,
    and the front DP's work (ideals, blocks costed, front pairs kept)."""
    single = c.times.sum(axis=1) * c.tdp
    fits = sum(node.memory for node in workload.instance.nodes) <= DRAM_BYTES
    ub = float(single.min()) if fits else math.inf
    keep = np.flatnonzero(energy_bounds(workload, c) <= ub * (1 + SLACK))
    kept = c.subset(keep)
    problem = design_instance(workload, kept.designs, kept.times, [chips] * len(kept.designs))
    run = per_watt_dp(problem, kept.tdp, chips, max_ideals=max_ideals)
    work = {"ideals": run.ideals, "blocks": run.blocks, "front_pairs": run.pairs}
    if run.plan is None:
        return None, 1, len(c.designs) - len(keep), work
    best = Best(run.time_ms * run.power_w, run.time_ms, run.plan, kept.designs)
    # the pair's max load reaches the tie bound at tie_bound(score) / its watts; never below its own max load
    cap = max(tie_bound(run.score) / run.power_w, run.time_ms) if run.power_w > 0 else run.time_ms
    low, designs = _least_power(workload, kept, chips, cap, max_ideals)
    if low.plan is not None and low.power_w <= run.power_w:   # else only by rounding beyond the tie
        best = Best(low.time_ms * low.power_w, low.time_ms, low.plan, designs)
    return best, 2, len(c.designs) - len(keep), work


__all__ = ["solve_exact"]
