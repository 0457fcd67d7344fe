"""MILP formulations of the placement model, solved by any backend (DESIGN.md §3).

:func:`solve_milp` dispatches on the contiguity class; only ``stages`` is
formulated so far (:mod:`.stages`). Backends: :mod:`.backends`.
"""

from __future__ import annotations

from placement.errors import UsageError
from placement.model.problem import Problem
from placement.plan import Plan
from placement.solution import Solution
from placement.solvers.milp.backends import BACKENDS
from placement.solvers.milp.stages import DEFAULT_TIME_LIMIT, solve_milp_stages


def solve_milp(problem: Problem, contiguity: str = "stages", backend: str = "cp-sat",
               time_limit: float = DEFAULT_TIME_LIMIT, threads: int = 1, seed: int = 0,
               warm_start: Plan | None = None) -> Solution:
    """Throughput-optimal plan by MILP; ``contiguity`` must be ``stages`` for now."""
    if contiguity != "stages":
        raise UsageError(f"the MILP supports contiguity 'stages' only so far, not {contiguity!r}")
    if backend not in BACKENDS:
        raise UsageError(f"unknown MILP backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return solve_milp_stages(problem, backend=backend, time_limit=time_limit, threads=threads, seed=seed,
                             warm_start=warm_start)


__all__ = ["solve_milp", "BACKENDS", "DEFAULT_TIME_LIMIT"]
