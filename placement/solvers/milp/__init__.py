"""MILP formulations of the placement model, solved by any backend (DESIGN.md §2, §3).

:func:`solve_milp` picks the formulation from the objective and contiguity class:

* ``throughput`` / ``throughput-gpipe`` × ``stages`` — :mod:`.stages`;
* ``throughput`` / ``throughput-gpipe`` × ``sets`` — :mod:`.sets`;
* ``throughput`` / ``throughput-gpipe`` × ``none`` — :mod:`.none`;
* ``latency`` (inference; every accelerator call contiguous) — :mod:`.latency`.

Each takes ``stages=N``: exactly ``N`` devices hold at least one node (rows in each module).

Backends: :mod:`.backends`; statuses, bounds and verification: :mod:`.outcome`.
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Callable

from placement.errors import InvalidParameterError
from placement.problem.bounds import class_without_device
from placement.problem.objectives import OBJECTIVES, check_objective
from placement.problem.instance import Instance
from placement.plan import Plan
from placement.solution import Solution, Status
from placement.parameters import stage_count
from placement.solvers.milp.backends import BACKENDS, SolveOptions, check_backend_available
from placement.solvers.milp.driver import Formulation, solve_throughput
from placement.solvers.milp.latency import DEFAULT_CALLS, solve_milp_latency
from placement.solvers.milp.none import NoContiguity
from placement.solvers.milp.sets import ContiguousSets
from placement.solvers.milp.stages import Stages
from placement.verification.evaluate import CONTIGUITY_CLASSES

DEFAULT_TIME_LIMIT = 60.0
FORMULATIONS: dict[str, type[Formulation]] = {"stages": Stages, "sets": ContiguousSets, "none": NoContiguity}


def formulation(contiguity: str, stages: int | None) -> Formulation:
    """The formulation of ``contiguity`` (one of :data:`FORMULATIONS`) for exactly ``stages`` non-empty devices."""
    if contiguity not in FORMULATIONS:
        raise InvalidParameterError("contiguity", f"must be one of {', '.join(map(repr, CONTIGUITY_CLASSES))}, "
                                                  f"not {contiguity!r}")
    return FORMULATIONS[contiguity](stages)


def _check_options(time_limit: object, gap: object, threads: object) -> None:
    def real(x: object) -> bool:
        return isinstance(x, numbers.Real) and not isinstance(x, bool)

    if not real(time_limit) or not 0 < time_limit < float("inf"):  # type: ignore[operator]
        raise InvalidParameterError("time_limit", f"must be a finite number of seconds > 0, not {time_limit!r}")
    if not real(gap) or not 0 <= gap < 1:  # type: ignore[operator]
        raise InvalidParameterError("gap", f"must be a number ≥ 0 and < 1, not {gap!r}")
    if not isinstance(threads, numbers.Integral) or isinstance(threads, bool) or threads < 1:
        raise InvalidParameterError("threads", f"must be a positive integer, not {threads!r}")


def infeasible_before_solving(problem: Instance, stages: int | None, objective: str, contiguity: str,
                              started: float) -> Solution | None:
    """The MILP's answer where the instance alone shows that no plan exists: ``infeasible`` where a colour
    class fits no device (:func:`placement.problem.bounds.class_without_device`, memory summed as the evaluator
    sums it, so the answer holds on every backend, floating-point ones included), or where ``stages`` (exactly
    that many non-empty devices) exceeds the colour classes, since each non-empty device holds one class or
    more; else ``None``."""
    classes = len(problem.colour_classes())
    stats = {"nodes": len(problem.nodes), "colour_classes": classes}
    why = class_without_device(problem)
    if why is None and stages is not None and stages > classes:
        stats["stages"] = stages
        why = (f"no plan has {stages} non-empty devices: the graph has {classes} colour "
               f"class{'' if classes == 1 else 'es'} (nodes of one colour share a device)")
    if why is None:
        return None
    return Solution(Status.INFEASIBLE, None, math.inf, math.inf, "milp", objective_kind=objective,
                    contiguity=contiguity, runtime_s=time.perf_counter() - started, stats=stats, message=why)


def solve_milp(problem: Instance, contiguity: str = "stages", objective: str = "throughput",
               backend: str = "cp-sat", time_limit: float = DEFAULT_TIME_LIMIT, gap: float = 0.0,
               threads: int = 1, seed: int = 0, log_path: str | None = None, warm_start: Plan | None = None,
               calls: int = DEFAULT_CALLS, progress: Callable[[str], None] | None = None,
               stages: int | None = None, deadline: float | None = None, own_start: bool = True,
               check: Callable[[], Plan | None] | None = None, start_bound: float = 0.0,
               start_latency: float | None = None) -> Solution:
    """Optimal (or bounded, at the time limit) plan by MILP; see the module docstring.

    ``time_limit`` (seconds) is always set; ``gap`` lets the solver stop at that relative gap
    (the status is then ``feasible`` unless the gap closed); ``log_path`` receives the solver
    log; ``warm_start`` is a plan to start from (not used when it breaks a constraint, ``stages``
    included); ``calls`` is the number of calls per accelerator of the latency model (the
    latency objective ignores ``contiguity``); ``progress`` receives one-line messages (model
    size, improving solutions). ``stages=N`` asks for exactly ``N`` non-empty devices (for
    ``latency``: devices holding at least one node, the CPU cores that run nodes included);
    ``N`` is from 1 to the number of devices. ``deadline`` (a ``time.perf_counter()`` value) bounds
    the model building and the solver together: the solver gets what is left of it, at most
    ``time_limit``, and a model not built by then is not solved (the warm start, verified, is
    returned as ``feasible``, else ``no_solution``). Bad values raise :class:`InvalidParameterError`,
    a backend that cannot run here :class:`SolverUnavailableError`. ``own_start=False`` also keeps the
    plan a formulation builds with its model (the packing bound's assignment of :mod:`.none`) from the
    solver: a run asked to start from nothing starts from nothing. ``check`` finds a plan that a
    floating-point backend's claim of optimality is checked against where there is no start
    (:func:`.driver.checked_claim`). ``start_bound``: a lower bound on the objective of every plan of
    the request, proven where the start was found (the DP's ``stages`` optimum for ``throughput``); a
    start that meets it ends the search as optimal. ``start_latency``: the latency evaluator's value of
    ``warm_start``, a valid plan, where the caller has it (it is then not evaluated again).
    """
    from placement.solvers.milp.confirm import CONFIRMING, confirm_deadline, confirmed

    started = time.perf_counter()
    _check_options(time_limit, gap, threads)
    check_backend_available(backend)
    check_objective(problem, objective)
    stages = stage_count(problem, stages)
    no_plan = infeasible_before_solving(problem, stages, objective, contiguity, started)
    if no_plan is not None:
        return no_plan
    options = SolveOptions(float(time_limit), float(gap), int(threads), int(seed), log_path, deadline=deadline)
    if objective == "latency":
        first = solve_milp_latency(problem, backend=backend, options=options, calls=calls, warm_start=warm_start,
                                   progress=progress, stages=stages, check=check, start_latency=start_latency)
    else:
        first = solve_throughput(problem, formulation(contiguity, stages), objective, backend, options, warm_start,
                                 progress=progress, own_start=own_start, check=check, start_bound=start_bound)

    def rerun(plan: Plan) -> Solution:   # the same request on CP-SAT, from the plan to confirm
        if progress is not None:
            progress(f"confirming {backend}'s proof with {CONFIRMING}")
        return solve_milp(problem, contiguity, objective, CONFIRMING, time_limit, gap, threads, seed, None, plan,
                          calls, progress, stages, confirm_deadline(deadline, time_limit, started), own_start, None,
                          start_bound)

    return confirmed(backend, first, rerun)


__all__ = ["solve_milp", "BACKENDS", "DEFAULT_TIME_LIMIT", "OBJECTIVES", "DEFAULT_CALLS"]
