"""MILP formulations of the placement model, solved by any backend (DESIGN.md §2, §3).

:func:`solve_milp` picks the formulation from the objective and contiguity class:

* ``throughput`` / ``throughput-gpipe`` × ``stages`` — :mod:`.stages`;
* ``throughput`` / ``throughput-gpipe`` × ``sets`` — :mod:`.sets`;
* ``throughput`` / ``throughput-gpipe`` × ``none`` — :mod:`.none`;
* ``latency`` (inference; every accelerator call contiguous) — :mod:`.latency`.

Backends: :mod:`.backends`; statuses, bounds and verification: :mod:`.outcome`.
"""

from __future__ import annotations

from typing import Callable

from placement.errors import UsageError
from placement.problem.objectives import OBJECTIVES, check_objective
from placement.problem.instance import Instance
from placement.plan import Plan
from placement.solution import Solution
from placement.solvers.milp.backends import BACKENDS, SolveOptions, check_backend_available
from placement.solvers.milp.driver import Formulation, solve_throughput
from placement.solvers.milp.latency import DEFAULT_CALLS, solve_milp_latency
from placement.solvers.milp.none import NoContiguity
from placement.solvers.milp.sets import ContiguousSets
from placement.solvers.milp.stages import Stages
from placement.verification.evaluate import CONTIGUITY_CLASSES

DEFAULT_TIME_LIMIT = 60.0


def _formulation(contiguity: str) -> Formulation:
    if contiguity == "stages":
        return Stages()
    if contiguity == "sets":
        return ContiguousSets()
    if contiguity == "none":
        return NoContiguity()
    raise UsageError(f"unknown contiguity class {contiguity!r}; choose from {', '.join(CONTIGUITY_CLASSES)}")


def solve_milp(problem: Instance, contiguity: str = "stages", objective: str = "throughput",
               backend: str = "cp-sat", time_limit: float = DEFAULT_TIME_LIMIT, gap: float = 0.0,
               threads: int = 1, seed: int = 0, log_path: str | None = None, warm_start: Plan | None = None,
               calls: int = DEFAULT_CALLS, progress: Callable[[str], None] | None = None) -> Solution:
    """Optimal (or bounded, at the time limit) plan by MILP; see the module docstring.

    ``time_limit`` (seconds) is always set; ``gap`` lets the solver stop at that relative gap
    (the status is then ``feasible`` unless the gap closed); ``log_path`` receives the solver
    log; ``warm_start`` is a plan to start from; ``calls`` is the number of calls per
    accelerator of the latency model (the latency objective ignores ``contiguity``);
    ``progress`` receives one-line messages (model size, improving solutions).
    """
    if not isinstance(time_limit, (int, float)) or not 0 < time_limit < float("inf"):
        raise UsageError(f"the time limit must be a positive number of seconds, got {time_limit!r}")
    if not 0 <= gap < 1:
        raise UsageError(f"the relative gap must be at least 0 and below 1, got {gap!r}")
    if threads < 1:
        raise UsageError(f"threads must be at least 1, got {threads}")
    try:
        check_backend_available(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_objective(problem, objective)
    options = SolveOptions(float(time_limit), float(gap), int(threads), int(seed), log_path)
    if objective == "latency":
        return solve_milp_latency(problem, backend=backend, options=options, calls=calls, warm_start=warm_start,
                                  progress=progress)
    return solve_throughput(problem, _formulation(contiguity), objective, backend, options, warm_start,
                            progress=progress)


__all__ = ["solve_milp", "BACKENDS", "DEFAULT_TIME_LIMIT", "OBJECTIVES", "DEFAULT_CALLS"]
