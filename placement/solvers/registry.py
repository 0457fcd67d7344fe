"""Solution methods by name. Every method takes a Instance and returns a Solution."""

from __future__ import annotations

from typing import Any, Callable

from placement.errors import UsageError
from placement.problem.instance import Instance
from placement.solution import Solution
from placement.solvers.baselines import BASELINES
from placement.solvers.ideals import DEFAULT_MAX_IDEALS


def _dp(problem: Instance, **options: Any) -> Solution:
    from placement.solvers.dp import solve_dp

    if options.get("contiguity", "stages") != "stages":
        raise UsageError("the DP solves contiguity 'stages' only; use --method milp for other classes")
    if options.get("objective", "throughput") != "throughput":
        raise UsageError("the DP solves the throughput objective only; use --method milp for "
                         f"{options['objective']}")
    return solve_dp(problem, max_ideals=options.get("max_ideals", DEFAULT_MAX_IDEALS),
                    progress=options.get("progress"))


def _milp(problem: Instance, **options: Any) -> Solution:
    """The MILP; ``warm_start`` is a plan, ``None``, or ``"auto"`` (default: from the DP, see
    :mod:`placement.solvers.milp.warmstart`)."""
    backend = options.get("backend", "cp-sat")
    package, extra = ("pulp", "PuLP") if backend.startswith("pulp") else ("ortools", "OR-Tools")
    try:
        __import__(package)
    except ImportError:
        raise UsageError(f"the MILP backend {backend} needs {extra}: pip install 'placement[milp]'") from None
    from placement.solvers.milp.backends import check_backend_available

    try:  # before any work: a typo or a missing solver should not cost a DP run first
        check_backend_available(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from placement.solvers.milp import DEFAULT_CALLS, DEFAULT_TIME_LIMIT, solve_milp
    from placement.solvers.milp.warmstart import default_warm_start

    progress = options.get("progress")
    warm_start = options.get("warm_start", "auto")
    if isinstance(warm_start, str):
        if warm_start != "auto":
            raise UsageError(f"warm_start must be a plan, None or 'auto', not {warm_start!r}")
        warm_start = default_warm_start(problem, options.get("max_ideals", DEFAULT_MAX_IDEALS), progress,
                                        options.get("objective", "throughput"))
    return solve_milp(problem, contiguity=options.get("contiguity", "stages"),
                      objective=options.get("objective", "throughput"), backend=backend,
                      time_limit=options.get("time_limit", DEFAULT_TIME_LIMIT), gap=options.get("gap", 0.0),
                      threads=options.get("threads", 1), seed=options.get("seed", 0),
                      log_path=options.get("log_path"), warm_start=warm_start,
                      calls=options.get("calls", DEFAULT_CALLS), progress=progress)


METHODS: dict[str, Callable[..., Solution]] = {"dp": _dp, "milp": _milp, **BASELINES}


def solve(problem: Instance, method: str = "dp", **options: Any) -> Solution:
    """Solve ``problem`` with the named method; options are method-specific."""
    try:
        run = METHODS[method]
    except KeyError:
        raise UsageError(f"unknown method {method!r}; choose from {', '.join(sorted(METHODS))}") from None
    return run(problem, **options)
