"""The MILP as a method of :func:`placement.solve`: its keywords turned into :func:`solve_milp`'s.

``warm_start`` is a plan to start from, or ``True``, which starts the solver from :func:`.warmstart.default_warm_start` (the DP's
optimum where the DP applies, which then also bounds the ``stages`` model of the ``throughput``
objective, a chain-DP plan above ``max_ideals`` ideals; for the latency
objective the best of the chain DP's plan, the latency greedy, the latency chain DP, the
module-chain plan and every node on one device of each type that takes them all, the DP only
when none of them finds a plan); ``False`` starts from nothing, and then a floating-point
backend's claim of optimality is checked against that plan, found after the solve (a better one
refutes it). A latency start, given or found, is first improved by moving colour classes to the
CPUs (:mod:`placement.solvers.baselines.latency_moves`) within the warm start's share of the time. A
start that breaks a constraint of the request is never used (the formulation checks it).
``stages=N`` goes to both the start (the DP's best plan with exactly ``N`` stages) and the MILP.
``time_limit=None`` is :data:`DEFAULT_TIME_LIMIT` seconds, ``threads=None`` one thread,
``backend=None`` CP-SAT.

Throughput models are built on :func:`placement.problem.canonical.canonical`'s listing of the instance,
so that the order a file lists its nodes and edges in does not steer the search (latency models keep the
caller's listing: their start already tries orders by node id, :mod:`placement.solvers.baselines.latency_chain`);
:func:`placement.solve` lists every method's plan back as the caller's instance.

The time limit covers the whole call: the warm start may use up to :data:`WARM_START_SHARE` of
it (the DP stops there and the chain DP's plan is the start), and the model building and the
solver share what is left (:func:`placement.solvers.milp.solve_milp`'s ``deadline``).
"""

from __future__ import annotations

import time
from typing import Callable

from placement.plan import Plan
from placement.problem.canonical import canonical
from placement.problem.instance import Instance
from placement.solution import Solution
from placement.solvers.ideals import DEFAULT_MAX_IDEALS
from placement.solvers.dp import DPInterrupted
from placement.parameters import stage_count
from placement.solvers.milp import DEFAULT_TIME_LIMIT, formulation, infeasible_before_solving, solve_milp
from placement.solvers.milp.backends import check_backend_available
from placement.solvers.milp.driver import interrupted_start
from placement.solvers.milp.latency import interrupted_start as interrupted_latency_start
from placement.solvers.baselines.latency_moves import moved_to_cpus
from placement.solvers.milp.warmstart import (LatencyStartInterrupted, default_warm_start, latency_warm_start,
                                              warm_start_and_bound)

DEFAULT_BACKEND = "cp-sat"
#: the most of the time limit the default warm start may take
WARM_START_SHARE = 0.5
#: the least time the check of a floating-point backend's claim of optimality gets, where the run
#: started from nothing (placement.solvers.milp.driver.checked_claim), past the deadline if need be
CHECK_SECONDS = 1.0


def run_milp(instance: Instance, *, contiguity: str, objective: str, backend: str | None, time_limit: float | None,
             gap: float, threads: int | None, seed: int, log: str | None, warm_start: bool | Plan, calls: int,
             progress: Callable[[str], None] | None, max_ideals: int | None, stages: int | None = None,
             deadline: float | None = None) -> Solution:
    """The MILP with :func:`placement.solve`'s keywords; ``deadline`` (a ``time.perf_counter()`` value,
    default: ``time_limit`` from now) is when the whole call must end."""
    backend = backend or DEFAULT_BACKEND
    check_backend_available(backend)  # before any work: the warm start runs the DP
    time_limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    began = time.perf_counter()
    deadline = began + time_limit if deadline is None else deadline
    no_plan = infeasible_before_solving(instance, stage_count(instance, stages), objective, contiguity, began)
    if no_plan is not None:   # before the warm start, which would search for such a plan
        return no_plan
    if objective != "latency":   # the latency start's orders are the file's and the ids' (latency_chain)
        instance = canonical(instance)
    start = warm_start if isinstance(warm_start, Plan) else None
    start_deadline = began + WARM_START_SHARE * (deadline - began)
    proven, start_latency = 0.0, None   # the latency start's latency, where the warm start evaluated it
    if warm_start is True and objective == "latency":
        try:
            start, start_latency = latency_warm_start(instance, max_ideals or DEFAULT_MAX_IDEALS, progress, stages,
                                                      deadline=start_deadline, calls=calls)
        except LatencyStartInterrupted as exc:   # Ctrl-C in the latency start: its best plan goes on, as a start would
            if exc.start is None:
                raise
            raise interrupted_latency_start(instance, backend, began, *exc.start, calls, stages) from None
    elif warm_start is True:
        try:
            start, proven = warm_start_and_bound(instance, max_ideals or DEFAULT_MAX_IDEALS, progress, objective,
                                                 stages, deadline=start_deadline)
        except DPInterrupted as exc:   # Ctrl-C in the warm start's DP: the plan it held goes on, as a start would
            if exc.solution is None:
                raise
            raise interrupted_start(instance, formulation(contiguity, stages), objective, backend,
                                    exc.solution.plan, began) from None
    if start is not None and objective == "latency":
        try:
            start, start_latency = moved_to_cpus(instance, start, start_latency, start_deadline, stages, progress)
        except KeyboardInterrupt:   # Ctrl-C while colour classes move to the CPUs: the start in hand goes on
            raise interrupted_latency_start(instance, backend, began, start, start_latency, calls, stages) from None

    def check() -> Plan | None:
        """The default warm start, found after the solve within what is left of the deadline."""
        return default_warm_start(instance, max_ideals or DEFAULT_MAX_IDEALS, None, objective, stages,
                                  deadline=max(deadline, time.perf_counter() + CHECK_SECONDS))

    return solve_milp(instance, contiguity=contiguity, objective=objective, backend=backend,
                      time_limit=time_limit, gap=gap, threads=threads or 1, seed=seed, log_path=log,
                      warm_start=start, calls=calls, progress=progress, stages=stages,
                      deadline=deadline, own_start=warm_start is not False, check=check,
                      start_bound=proven if contiguity == "stages" else 0.0, start_latency=start_latency)
