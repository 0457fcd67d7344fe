"""Solution methods by name. Every method takes a Problem and returns a Solution."""

from __future__ import annotations

from typing import Any, Callable

from placement.errors import UsageError
from placement.model.problem import Problem
from placement.solution import Solution


def _dp(problem: Problem, **options: Any) -> Solution:
    from placement.solvers.dp import solve_dp

    return solve_dp(problem, max_ideals=options.get("max_ideals", 200_000), progress=options.get("progress"))


METHODS: dict[str, Callable[..., Solution]] = {"dp": _dp}


def solve(problem: Problem, method: str = "dp", **options: Any) -> Solution:
    """Solve ``problem`` with the named method; options are method-specific."""
    try:
        run = METHODS[method]
    except KeyError:
        raise UsageError(f"unknown method {method!r}; choose from {', '.join(sorted(METHODS))}") from None
    return run(problem, **options)
