"""Solution methods by name. Every method takes a Problem and returns a Solution."""

from __future__ import annotations

from typing import Any, Callable

from placement.errors import UsageError
from placement.model.problem import Problem
from placement.solution import Solution
from placement.solvers.ideals import DEFAULT_MAX_IDEALS


def _dp(problem: Problem, **options: Any) -> Solution:
    from placement.solvers.dp import solve_dp

    if options.get("contiguity", "stages") != "stages":
        raise UsageError("the DP solves contiguity 'stages' only; use --method milp for other classes")
    return solve_dp(problem, max_ideals=options.get("max_ideals", DEFAULT_MAX_IDEALS),
                    progress=options.get("progress"))


def _milp(problem: Problem, **options: Any) -> Solution:
    try:
        import ortools  # noqa: F401
    except ImportError:
        raise UsageError("the MILP needs OR-Tools: pip install 'placement[milp]'") from None
    from placement.solvers.milp import DEFAULT_TIME_LIMIT, solve_milp

    return solve_milp(problem, contiguity=options.get("contiguity", "stages"),
                      backend=options.get("backend", "cp-sat"),
                      time_limit=options.get("time_limit", DEFAULT_TIME_LIMIT),
                      threads=options.get("threads", 1), seed=options.get("seed", 0))


METHODS: dict[str, Callable[..., Solution]] = {"dp": _dp, "milp": _milp}


def solve(problem: Problem, method: str = "dp", **options: Any) -> Solution:
    """Solve ``problem`` with the named method; options are method-specific."""
    try:
        run = METHODS[method]
    except KeyError:
        raise UsageError(f"unknown method {method!r}; choose from {', '.join(sorted(METHODS))}") from None
    return run(problem, **options)
