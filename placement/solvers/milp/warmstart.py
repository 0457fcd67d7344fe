"""Starting plans for the MILP: the DP's optimum where the DP applies, else a chain-DP plan.

The DP (:func:`placement.solvers.dp.solve_dp`) solves ``stages`` throughput exactly; its
plan is also a valid start for the larger classes ``sets`` and ``none``, for the
``throughput-gpipe`` objective, and for the latency model (one call per device, calls in
pipeline order, so no two calls feed each other). Where the graph has more ideals than
``max_ideals``, the chain DP over a few topological orders gives a plan instead.
"""

from __future__ import annotations

from typing import Callable

from placement.errors import LimitError
from placement.model.problem import Problem
from placement.plan import Plan
from placement.solution import Status
from placement.solvers.dp import solve_chain, solve_dp
from placement.solvers.ideals import DEFAULT_MAX_IDEALS


def default_warm_start(problem: Problem, max_ideals: int = DEFAULT_MAX_IDEALS,
                       progress: Callable[[str], None] | None = None) -> Plan | None:
    """A good feasible plan quickly, or ``None`` when neither DP finds one."""
    try:
        solution = solve_dp(problem, max_ideals=max_ideals)
        source = "DP optimum (stages, throughput)"
    except LimitError:
        solution = solve_chain(problem)
        source = "chain DP"
    if solution.status not in (Status.OPTIMAL, Status.FEASIBLE):
        if progress is not None:
            progress("no warm start: the DP found no plan")
        return None
    if progress is not None:
        progress(f"warm start from the {source}: max-load {solution.objective:.6g} ({solution.runtime_s:.2f} s)")
    return solution.plan
