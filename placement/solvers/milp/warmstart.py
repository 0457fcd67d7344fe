"""Starting plans for the MILP: the DP's optimum where the DP applies, else a chain-DP plan.

The DP (:func:`placement.solvers.dp.solve_dp`) solves ``stages`` throughput exactly; its
plan is also a valid start for the larger classes ``sets`` and ``none``, for the
``throughput-gpipe`` objective, and for the latency model (one call per device, calls in
pipeline order, so no two calls feed each other). Where the graph has more ideals than
``max_ideals``, the chain DP over a few topological orders gives a plan instead. For the
latency objective the latency greedy (:mod:`placement.solvers.baselines.latency_greedy`), the
latency chain DP (:mod:`placement.solvers.baselines.latency_chain`) and the module-chain plan
(:mod:`placement.solvers.baselines.latency_modules`) are tried with the chain DP's pipeline and
every node on one device of each type that takes them all (:func:`whole_graph_plans`), and the
plan of lowest latency is the start; the DP runs only when none of them finds a plan. The DP
optimises throughput, not latency, so its optimum has no claim to be the better start, and on
branchy graphs it takes the share of the time limit the latency improvements
(:mod:`placement.solvers.baselines.latency_moves`) and the MILP would use: on the published
InceptionV3 latency instance (12 accelerators, 8 CPUs) the DP needs about 100 s, while the
latency chain DP's plan (1325.48) takes 0.1 s and the module-chain plan (1199.70) about 8 s.

Past its deadline (a share of the MILP's time limit), once its table would not end by the deadline at its
pace so far (:func:`placement.solvers.dp.deadline_watch`, ``hopeless``: the time it would have spent goes to
the MILP), or above ``max_ideals``, the DP stops and the chain DP's plan is the start. On the published
InceptionV3 latency instance under the throughput objective (12 accelerators, 8 CPUs), whose table takes about
100 s, the DP stopped after 1.2 s of it, where it ran to its deadline at half the limit, and the MILP proved
the chain DP's plan optimal in 14 s, where it took 34 s. First the chain DP runs over the prefixes of one
topological order cut into at most 1,000 intervals (:func:`placement.solvers.chain_dp.solve_coarse_chain`,
about linear time in the graph: a pipeline to fall back on), then, where the deadline has not passed
yet, over every prefix of a few orders, searching only for better plans, for at most a second past the
deadline. Where the
intervals give no plan, the fine chain DP has a share of the time limit as long again past the
deadline (where they ran out of time it is not run: it does more work), and where it stops too
(on a graph of 20,000 nodes and random edges it does not finish in a minute), the greedy fill
(:mod:`placement.solvers.baselines.greedy`, linear time, not always a pipeline) is the start, or, on a
catalogue of other device types than accelerators and CPUs, which it does not take, every node on one
device of the type that runs them all fastest (:func:`whole_graph_start`). The DPs' progress lines
reach the caller prefixed ``warm start:``. For latency, the whole-graph plans come first, with their
latencies (sums and a longest path, computed in linear time); once the deadline has passed with a plan in hand, the fine
chain DP and the baselines not yet run are skipped, and so are the pipelines not yet evaluated (the
baselines' plans come evaluated): on a chain of 100,000 nodes one evaluation takes one to three seconds.

With ``stages=N`` (exactly ``N`` non-empty devices) the start is the DP's optimum among the
plans with ``N`` stages (above ``max_ideals`` ideals, the chain DP's best such plan); for latency
the chain DP's best such plan and the latency baselines' plans only when they have exactly ``N``
non-empty devices, the DP when none has; no start when none finds one.
"""

from __future__ import annotations

import math
import time
from typing import Callable

from placement.errors import LimitExceededError, PlacementError
from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.sigint import absorb_echoes
from placement.solution import Solution, Status
from placement.solvers.baselines.latency_chain import solve_latency_chain
from placement.solvers.baselines.latency_greedy import solve_latency_greedy
from placement.solvers.baselines.latency_modules import solve_latency_modules
from placement.solvers.chain_dp import solve_coarse_chain
from placement.solvers.dp import DPInterrupted, deadline_watch, plan_in_hand, solve_chain, solve_dp
from placement.solvers.ideals import DEFAULT_MAX_IDEALS
from placement.verification.latency import evaluate_latency


def default_warm_start(problem: Instance, max_ideals: int = DEFAULT_MAX_IDEALS,
                       progress: Callable[[str], None] | None = None, objective: str = "throughput",
                       stages: int | None = None, deadline: float | None = None) -> Plan | None:
    """A good feasible plan quickly (with exactly ``stages`` non-empty devices when given), or ``None``
    when no method finds one. Past ``deadline`` (a ``time.perf_counter()`` value) the DP stops and
    the chain DP gives the plan."""
    return warm_start_and_bound(problem, max_ideals, progress, objective, stages, deadline)[0]


#: seconds the chain DPs may run past the deadline where a plan is in hand (or, for the one over
#: intervals, would be the first)
GRACE_S = 1.0


def coarse_start(problem: Instance, stages: int | None, deadline: float | None,
                 progress: Callable[[str], None] | None = None) -> Solution:
    """A pipeline in about linear time: the chain DP over intervals of a topological order
    (:func:`placement.solvers.chain_dp.solve_coarse_chain`), given :data:`GRACE_S` past ``deadline``;
    ``no_solution`` where it refuses (its tables too large for many device types) or runs late (then
    its stats say ``out_of_time``)."""
    grace = None if deadline is None else max(deadline, time.perf_counter()) + GRACE_S
    try:
        return solve_coarse_chain(problem, stages=stages, progress=deadline_watch(grace, progress))
    except LimitExceededError as exc:
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp", message=str(exc),
                        stats={"out_of_time": exc.parameter == "time_limit"})


def warm_start_and_bound(problem: Instance, max_ideals: int = DEFAULT_MAX_IDEALS,
                         progress: Callable[[str], None] | None = None, objective: str = "throughput",
                         stages: int | None = None, deadline: float | None = None) -> tuple[Plan | None, float]:
    """:func:`default_warm_start`'s plan and, where the DP found it for the ``throughput`` objective,
    the DP's lower bound on every ``stages`` plan (with exactly ``stages`` stages when given; its
    optimum, or less where its sums may round); else 0."""
    if objective != "latency":
        plan, bound = pipeline_start_and_bound(problem, max_ideals, progress, stages, deadline)
        return plan, bound if objective == "throughput" else 0.0
    return latency_warm_start(problem, max_ideals, progress, stages, deadline)[0], 0.0


class LatencyStartInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`latency_warm_start`: ``start`` is ``(plan, latency)`` of the best valid plan it had
    found by then, or ``None``. A :class:`KeyboardInterrupt`, so code that does not look for it stops as before."""

    def __init__(self, start: tuple[Plan, float] | None) -> None:
        super().__init__("interrupted")
        self.start = start


def latency_warm_start(problem: Instance, max_ideals: int = DEFAULT_MAX_IDEALS,
                       progress: Callable[[str], None] | None = None, stages: int | None = None,
                       deadline: float | None = None, calls: int = 1) -> tuple[Plan | None, float | None]:
    """:func:`default_warm_start`'s plan for the latency objective and the latency the latency evaluator
    found for it (``None`` where the plan is the DP's pipeline, not evaluated, or there is none); the
    latency greedy may use ``calls`` calls per accelerator, the other plans one. Ctrl-C raises
    :class:`LatencyStartInterrupted` with the best plan found by then."""
    candidates: list[Plan] = []    # plans of unknown latency, pipelines first
    # the whole-graph plans and the baselines' plans, with their latencies
    scored: list[tuple[float, Plan]] = whole_graph_plans(problem) if stages in (None, 1) else []
    try:
        return _latency_start(problem, max_ideals, progress, stages, deadline, calls, candidates, scored)
    except KeyboardInterrupt:
        absorb_echoes(time.perf_counter())   # the same SIGINT again would cut the evaluation short
        found = scored + evaluated(problem, candidates, None, have_one=False)
        best = min(found, key=lambda item: item[0]) if found else None
        raise LatencyStartInterrupted(None if best is None else (best[1], best[0])) from None


def _latency_start(problem: Instance, max_ideals: int, progress: Callable[[str], None] | None, stages: int | None,
                   deadline: float | None, calls: int, candidates: list[Plan],
                   scored: list[tuple[float, Plan]]) -> tuple[Plan | None, float | None]:
    """:func:`latency_warm_start`, which holds the plans found, scored or not, in ``scored`` and ``candidates`` as
    they come (for Ctrl-C)."""
    told = None if progress is None else (lambda line: progress(f"warm start: {line}"))   # the DPs' own lines
    coarse = coarse_start(problem, stages, deadline, told)   # one call per device, in pipeline order: a latency plan
    if coarse.plan is not None:
        candidates.append(coarse.plan)

    def late() -> bool:
        """Past the deadline with a plan in hand: what is not run yet is skipped."""
        return deadline is not None and time.perf_counter() > deadline and bool(candidates or scored)

    try:
        if late():
            raise LimitExceededError("the time limit ran out before it could start", parameter="time_limit")
        chain = solve_chain(problem, stages=stages, progress=deadline_watch(deadline, told))
        if chain.status is Status.FEASIBLE and chain.plan is not None:
            candidates.append(chain.plan)
    except LimitExceededError as exc:
        if progress is not None:
            progress(f"the chain DP gives no starting plan: {exc}")
    for baseline in (solve_latency_greedy, solve_latency_chain, solve_latency_modules):
        if late():
            if progress is not None:
                progress(f"{baseline.__name__.removeprefix('solve_').replace('_', '-')} skipped: the warm start's "
                         "share of the time limit has run out")
            continue
        try:
            more = {"calls": calls} if baseline is solve_latency_greedy else {}
            found = baseline(problem, objective="latency", deadline=deadline, **more)
        except PlacementError:  # the baselines take the two-type catalogue only
            continue
        usable = found.status is Status.FEASIBLE and found.plan is not None
        if usable and (stages is None or found.plan.non_empty == stages):
            scored.append((found.objective, found.plan))
        if progress is not None and usable:
            said = f" ({found.message})" if found.message else ""
            progress(f"starting plan from {found.method}: latency {found.objective:.6g} "
                     f"({found.runtime_s:.2f} s){said}")
        elif progress is not None:
            progress(found.message or f"{found.method} found no plan")
    scored.extend(evaluated(problem, candidates, deadline, have_one=bool(scored)))
    if not scored:
        return pipeline_start(problem, max_ideals, progress, stages, deadline), None
    latency, best = min(scored, key=lambda item: item[0])
    if progress is not None:
        progress(f"warm start for latency: {latency:.6g}")
    return best, latency


def evaluated(problem: Instance, plans: list[Plan], deadline: float | None, have_one: bool) -> list[tuple[float, Plan]]:
    """``(latency, plan)`` for the valid ones of ``plans``, each evaluated once (equal plans once in all);
    past ``deadline`` only until one is valid, counting a valid plan in hand (``have_one``): on a graph
    of 100,000 nodes one evaluation takes seconds."""
    out: list[tuple[float, Plan]] = []
    seen: set[Plan] = set()
    for plan in plans:
        if plan in seen:
            continue
        if (have_one or out) and deadline is not None and time.perf_counter() > deadline:
            break
        seen.add(plan)
        evaluation = evaluate_latency(problem, plan)
        if evaluation.valid:
            out.append((evaluation.latency, plan))
    return out


def whole_graph_plans(problem: Instance) -> list[tuple[float, Plan]]:
    """``(latency, plan)``: every node on one device, for each device type that takes every node, with
    the plan's latency under the model of :mod:`placement.verification.latency`: on a type that pays
    communication one call that receives and sends nothing, the sum of the times; on one that does not
    (the CPUs: each node runs as soon as its inputs are ready, so one core stands for all of them), the
    longest path. Plans that a search may never reach on a graph whose best plan is one of them (a
    chain on its fastest accelerator, a wide graph on the CPUs)."""
    from placement.problem.bounds import longest_path
    from placement.problem.memory_fit import fits

    ids = tuple(n.id for n in problem.nodes)
    plans = []
    for t, kind in enumerate(problem.device_types):
        if kind.count and all(n.times[t] is not None for n in problem.nodes) and fits(
                (n.memory for n in problem.nodes), kind.memory):
            times = [n.times[t] for n in problem.nodes]
            latency = sum(times) if kind.pays_comm else longest_path(problem, times)
            plans.append((latency, Plan((DeviceAssignment(kind.name, ids),))))
    return plans


def whole_graph_start(problem: Instance) -> tuple[float, Plan] | None:
    """``(max-load, plan)`` of the best plan that puts every node on one device, over the device types that
    take every node within their memory (``None`` where none does): a one-stage pipeline, found in linear
    time on any catalogue, where the chain DPs are refused or ran out of time and the greedy fill does not
    apply. Nothing crosses its device, so its load is the sum of the nodes' times there."""
    from placement.problem.memory_fit import fits

    ids = tuple(n.id for n in problem.nodes)
    best: tuple[float, Plan] | None = None
    for t, kind in enumerate(problem.device_types):
        if kind.count and all(n.times[t] is not None for n in problem.nodes) and fits(
                (n.memory for n in problem.nodes), kind.memory):
            load = math.fsum(n.times[t] for n in problem.nodes)
            if best is None or load < best[0]:
                best = (load, Plan((DeviceAssignment(kind.name, ids),)))
    return best


def greedy_start(problem: Instance) -> Solution | None:
    """The greedy baseline's plan (accelerators filled in topological order), where it has a valid one:
    a start found in linear time where the DPs ran out of theirs."""
    from placement.solvers.baselines.greedy import solve_greedy

    try:
        found = solve_greedy(problem, objective="throughput")
    except PlacementError:   # an instance it does not take (device types other than accelerators and CPUs)
        return None
    return found if found.plan is not None and found.status in (Status.OPTIMAL, Status.FEASIBLE) else None


def _greedy_if_better(problem: Instance, value: float, stages: int | None, deadline: float | None,
                      progress: Callable[[str], None] | None) -> Solution | None:
    """The greedy fill's plan where it is better than the chain DPs' of max-load ``value`` (their orders
    cut at whole intervals: on a chain of 100,000 nodes over 1,001 devices they gave 909.88, the greedy fill
    126.74, near the optimum), else ``None``; not sought for ``stages=N`` or past ``deadline``."""
    if stages is not None or deadline is not None and time.perf_counter() >= deadline:
        return None
    greedy = greedy_start(problem)
    if greedy is None or greedy.objective >= value:
        return None
    if progress is not None:
        progress(f"warm start from the greedy fill: max-load {greedy.objective:.6g}, below the chain DP's "
                 f"{value:.6g}")
    return greedy


def pipeline_start(problem: Instance, max_ideals: int, progress: Callable[[str], None] | None,
                   stages: int | None = None, deadline: float | None = None) -> Plan | None:
    """The DP's optimal pipeline, or a chain-DP plan above ``max_ideals`` ideals or past ``deadline``
    (exactly ``stages`` stages when given)."""
    return pipeline_start_and_bound(problem, max_ideals, progress, stages, deadline)[0]


def pipeline_start_and_bound(problem: Instance, max_ideals: int, progress: Callable[[str], None] | None,
                             stages: int | None = None, deadline: float | None = None) -> tuple[Plan | None, float]:
    """:func:`pipeline_start`'s plan and, where the DP found it, the DP's lower bound on every
    ``stages`` plan's throughput (its optimum, or less where its sums may round; else 0)."""
    what = "stages, throughput" if stages is None else f"stages, throughput, {stages} stages"
    share = None if deadline is None else max(1.0, deadline - time.perf_counter())
    told = None if progress is None else (lambda line: progress(f"warm start: {line}"))   # the DP's own lines
    try:
        if deadline is not None and time.perf_counter() >= deadline:   # not even the ideals get counted
            raise LimitExceededError("the time limit ran out before the DP could start", parameter="time_limit")
        solution = solve_dp(problem, max_ideals=max_ideals, stages=stages,
                            progress=deadline_watch(deadline, told, hopeless=True))
        source = f"DP optimum ({what})"
    except LimitExceededError as exc:
        coarse = coarse_start(problem, stages, deadline, told)   # to fall back on
        fallback = coarse if coarse.plan is not None else None
        if progress is not None and fallback is not None:
            progress(f"warm start: the chain DP over intervals of a topological order: max-load "
                     f"{coarse.objective:.6g} ({coarse.runtime_s:.2f} s)")
        kept = plan_in_hand(exc, problem)   # the DP's upper bound, found before its deadline stopped it
        from_dp = kept is not None and (fallback is None or kept[0] < fallback.objective)   # then the fallback
        if from_dp:
            fallback = Solution(Status.FEASIBLE, kept[1], kept[0], 0.0, "chain-dp")
            if progress is not None:
                progress(f"warm start: the plan the DP held, {kept[2]}: max-load {kept[0]:.6g}")
        try:   # the chain DP gets a share as long again past the deadline, a second at most with a plan in hand
            later = None if deadline is None or share is None else \
                max(deadline, time.perf_counter()) + (min(share, GRACE_S) if fallback is not None else share)
            if later is not None and time.perf_counter() >= later:
                raise LimitExceededError("the time limit ran out before it could start", parameter="time_limit")
            if fallback is not None and deadline is not None and time.perf_counter() >= deadline:
                raise LimitExceededError("not run: the time limit ran out, and " +
                                         ("the DP held a plan" if from_dp else "the intervals gave a plan"),
                                         parameter="time_limit")
            if coarse.stats.get("out_of_time"):   # the DP over every prefix is more work still
                raise LimitExceededError(f"not run: the chain DP over intervals ran out of time ({coarse.message})",
                                         parameter="time_limit")
            try:
                solution = solve_chain(problem, stages=stages, progress=deadline_watch(later, told),
                                       ceiling=fallback.objective if fallback is not None else math.inf)
            except KeyboardInterrupt as stop:   # Ctrl-C: the plan in hand goes on, the intervals' where the better
                held = getattr(stop, "solution", None)
                if fallback is not None and (held is None or held.plan is None or fallback.objective <= held.objective):
                    from placement.sigint import absorb_echoes

                    absorb_echoes(time.perf_counter())
                    raise DPInterrupted(fallback) from None
                raise
        except LimitExceededError as chain_exc:
            if fallback is not None:
                greedy = _greedy_if_better(problem, fallback.objective, stages, deadline, progress)
                if greedy is not None:
                    return greedy.plan, 0.0
                if progress is not None:
                    fallen = "the plan the DP held" if from_dp else "the chain DP over intervals"
                    progress(f"warm start from {fallen} ({fallback.objective:.6g}): the chain DP "
                             f"stopped ({chain_exc})")
                return fallback.plan, 0.0
            greedy = greedy_start(problem) if stages is None else None
            if greedy is None and stages in (None, 1):   # the greedy fill takes accelerators and CPUs only
                whole = whole_graph_start(problem)
                if whole is not None:
                    if progress is not None:
                        progress(f"warm start from every node on one device ({whole[0]:.6g}): the chain DP "
                                 f"stopped ({chain_exc})")
                    return whole[1], 0.0
            if progress is not None:
                progress(f"no warm start: {chain_exc}" if greedy is None else f"warm start from the greedy fill "
                         f"({greedy.objective:.6g}): the chain DP stopped ({chain_exc})")
            return (None, 0.0) if greedy is None else (greedy.plan, 0.0)
        source = "chain DP" if stages is None else f"chain DP ({stages} stages)"
        if solution.plan is None and fallback is not None:   # nothing better than the fallback's plan
            solution, source = fallback, ("plan the DP held" if from_dp else source + " over intervals of a "
                                                                                "topological order")
        if exc.parameter == "time_limit":
            source += ", the DP not finishing within its share of the time limit"
        if solution.plan is not None:
            greedy = _greedy_if_better(problem, solution.objective, stages, deadline, progress)
            if greedy is not None:
                return greedy.plan, 0.0
    if solution.status not in (Status.OPTIMAL, Status.FEASIBLE):
        if progress is not None:
            progress("no warm start: the DP found no plan")
        return None, 0.0
    if progress is not None:
        progress(f"warm start from the {source}: max-load {solution.objective:.6g} ({solution.runtime_s:.2f} s)")
    return solution.plan, solution.bound     # the chain DP proves no bound: its solution's is 0
