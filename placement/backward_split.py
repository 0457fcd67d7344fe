"""``placement.solve(..., backward="split")``: the split-backward model from request to verified Result.

The request is checked (a training instance, objective ``throughput`` or ``throughput-gpipe``,
contiguity ``stages``, method ``auto`` or ``milp``, only the MILP's options); the MILP of
:mod:`placement.solvers.milp.split` runs, warm-started from the unsplit optimum; its plan is
re-checked by the independent evaluator :mod:`placement.verification.split`, and the Result's
value is the evaluator's. The model: ``docs/backward-split.md``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance
from placement.problem.split import SplitModel, check_training
from placement.result import Result, Stage, Status

#: the options of :func:`placement.solve` the split MILP takes (the others must keep their defaults)
SPLIT_OPTIONS = ("backend", "time_limit", "gap", "threads", "seed", "log", "warm_start", "progress",
                 "objective", "contiguity")
SPLIT_OBJECTIVES = ("throughput", "throughput-gpipe")


def check_split_request(problem: Instance, method: str, options: Mapping[str, Any],
                        defaults: Mapping[str, Any]) -> None:
    """Refuse what the split model does not solve, naming the parameter."""
    check_training(problem)
    if method not in ("auto", "milp"):
        raise InvalidParameterError("method", f"{method!r} does not place split backward tasks; "
                                              "backward='split' is solved by method 'milp' (or 'auto')")
    if options["objective"] not in SPLIT_OBJECTIVES:
        raise InvalidParameterError("objective", f"{options['objective']!r} does not apply to backward='split' "
                                                 f"(it solves {', '.join(map(repr, SPLIT_OBJECTIVES))})")
    if options["contiguity"] != "stages":
        raise InvalidParameterError("contiguity", f"{options['contiguity']!r} does not apply to backward='split', "
                                                  "whose previous and next stages need a pipeline; use 'stages'")
    for name, default in defaults.items():
        if name not in SPLIT_OPTIONS and options.get(name, default) != default:
            raise InvalidParameterError(name, "does not apply to backward='split'")


def solve_split(problem: Instance, model: SplitModel, options: Mapping[str, Any], started: float) -> Result:
    """The verified Result of the split MILP on ``problem`` (``options`` as :func:`placement.solve` checked them)."""
    from placement.solvers.milp import DEFAULT_TIME_LIMIT
    from placement.solvers.milp.split import solve_split_milp

    objective = options["objective"]
    limit = DEFAULT_TIME_LIMIT if options["time_limit"] is None else options["time_limit"]
    warm = options["warm_start"]
    solution = solve_split_milp(
        problem.with_reachable_counts(), model, objective, backend=options["backend"] or "cp-sat",
        time_limit=limit, gap=options["gap"], threads=options["threads"] or 1, seed=options["seed"],
        log_path=options["log"], warm_start=warm,
        progress=options["progress"], deadline=started + limit)
    return verified_split(problem, model, solution, objective, options["backend"] or "cp-sat", started)


def verified_split(problem: Instance, model: SplitModel, solution: Any, objective: str, backend: str,
                   started: float) -> Result:
    """The Result of ``solution`` after the split evaluator's check: its value is the evaluator's, a plan
    that fails the check or disagrees with the method's value is never returned."""
    from placement.solution import Status as method_status
    from placement.verification.split import check_split_plan

    backward = {"mode": "split", "w_placement": model.w_placement, "inter_layer": model.inter_layer,
                "w_share": model.w_share}
    common = dict(method="milp", backend=backend, objective=objective, contiguity="stages",
                  stats=dict(solution.stats), instance=problem.name, backward=backward)
    message = solution.message
    status = Status.INFEASIBLE if solution.status is method_status.INFEASIBLE else Status.NO_SOLUTION
    verification = None
    if solution.plan is not None:
        verification = check_split_plan(problem, solution.plan, model, objective)
        value, evaluation = verification.value, verification.report[0]
        if not verification.valid:
            message = "the plan failed independent verification: " + verification.violations[0]
        elif not math.isclose(solution.objective, value, rel_tol=1e-9, abs_tol=1e-9):
            message = f"the method's value {solution.objective!r} disagrees with the verified {value!r}"
        elif solution.status in (method_status.OPTIMAL, method_status.FEASIBLE):
            proven = solution.status is method_status.OPTIMAL
            bound = value if proven else min(solution.bound, value)
            stages = tuple(Stage(dev.type, dev.nodes, r.load, r.memory, (), dev.b_tasks, dev.w_tasks)
                           for dev, r in zip(solution.plan.devices, evaluation.devices))
            gap = 0.0 if proven or value <= 0 else max(0.0, (value - bound) / value)
            return Result(status=Status.OPTIMAL if proven else Status.FEASIBLE, value=value, bound=bound, gap=gap,
                          plan=stages, runtime_s=time.perf_counter() - started, verification=verification,
                          verified=True, message=message, **common)
    bound = solution.bound if math.isfinite(solution.bound) and solution.bound > 0 else None
    return Result(status=status, value=None, bound=bound, gap=None, plan=(), runtime_s=time.perf_counter() - started,
                  verification=verification, verified=False, message=message, **common)
