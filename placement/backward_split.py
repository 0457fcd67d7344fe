"""``placement.solve(..., backward="split")``: the split-backward model from request to verified Result.

The request is checked (a training instance, objective ``throughput`` or ``throughput-gpipe``,
contiguity ``stages``, method ``auto`` or ``milp``, only the MILP's options); the MILP of
:mod:`placement.solvers.milp.split` runs, warm-started from the unsplit optimum; its plan is
re-checked by the independent evaluator :mod:`placement.verification.split`, and the Result's
value is the evaluator's. The model: ``docs/backward-split.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from placement.errors import Interrupted, InvalidParameterError
from placement.plan import Plan
from placement.problem.instance import Instance
from placement.problem.split import SplitModel, check_training
from placement.result import Result, Stage

#: the options of :func:`placement.solve` the split MILP takes (the others must not be given)
SPLIT_OPTIONS = ("backend", "time_limit", "gap", "threads", "seed", "log", "warm_start", "progress",
                 "objective", "contiguity")
SPLIT_OBJECTIVES = ("throughput", "throughput-gpipe")


def check_split_request(problem: Instance, method: str, options: Mapping[str, Any],
                        given: Mapping[str, Any]) -> None:
    """Refuse what the split model does not solve, naming the parameter: among them the options ``given``
    (not ``None``, whatever the value) that it does not take."""
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
    for name, value in given.items():
        if name not in SPLIT_OPTIONS and value is not None:
            raise InvalidParameterError(name, "does not apply to backward='split'")


def solve_split(problem: Instance, model: SplitModel, options: Mapping[str, Any], started: float) -> Result:
    """The verified Result of the split MILP on ``problem`` (``options`` as :func:`placement.solve` checked them)."""
    from placement.solvers.milp import DEFAULT_TIME_LIMIT
    from placement.solvers.milp.interrupt import SearchInterrupted
    from placement.solvers.milp.split import solve_split_milp

    objective = options["objective"]
    limit = DEFAULT_TIME_LIMIT if options["time_limit"] is None else options["time_limit"]
    warm = options["warm_start"]
    try:
        solution = solve_split_milp(
            problem.with_reachable_counts(), model, objective, backend=options["backend"] or "cp-sat",
            time_limit=limit, gap=options["gap"], threads=options["threads"] or 1, seed=options["seed"],
            log_path=options["log"], warm_start=warm,
            progress=options["progress"], deadline=started + limit)
    except SearchInterrupted as exc:   # Ctrl-C in the search: its best plan goes on, verified, in the interrupt
        if exc.solution is None:
            raise
        raise Interrupted(verified_split(problem, model, exc.solution, objective, options["backend"] or "cp-sat",
                                         started)) from None
    return verified_split(problem, model, solution, objective, options["backend"] or "cp-sat", started)


def explicit_tasks(problem: Instance, plan: Plan) -> Plan:
    """``plan`` with every backward node's B and W task listed on the device that runs it: a task no device
    lists runs on its layer's device, so a plan of the split model (a warm start, say) that moves nothing
    still reads as a split plan (the simulator then replays its W calls and the split schedules)."""
    backward = [n.id for n in problem.nodes if n.backward]
    listed_b = {u for d in plan.devices for u in d.b_tasks}
    listed_w = {u for d in plan.devices for u in d.w_tasks}
    devices = []
    for dev in plan.devices:
        here = set(dev.nodes)
        b = set(dev.b_tasks) | {u for u in backward if u in here and u not in listed_b}
        w = set(dev.w_tasks) | {u for u in backward if u in here and u not in listed_w}
        devices.append(replace(dev, b_tasks=tuple(u for u in backward if u in b),
                               w_tasks=tuple(u for u in backward if u in w)))
    return Plan(tuple(devices))


def verified_split(problem: Instance, model: SplitModel, solution: Any, objective: str, backend: str,
                   started: float) -> Result:
    """The Result of ``solution`` after the split evaluator's check, as :func:`placement.solving.verified_result`
    makes every Result: its value is the evaluator's, a plan that fails the check or disagrees with the
    method's value is never returned, and ``optimal`` needs the method's bound to equal its value."""
    from placement.solvers.registry import METHODS
    from placement.solving import certified, verified_result
    from placement.verification.split import check_split_plan

    solution = certified(METHODS["milp"], solution)
    if solution.plan is not None:
        solution = replace(solution, plan=explicit_tasks(problem, solution.plan))
    backward = {"mode": "split", "w_placement": model.w_placement, "inter_layer": model.inter_layer,
                "w_share": model.w_share}
    common = dict(method="milp", backend=backend, objective=objective, contiguity="stages",
                  stats=dict(solution.stats), instance=problem.name, backward=backward)
    verification = None
    if solution.plan is not None:
        verification = check_split_plan(problem, solution.plan, model, objective)

    def plan_stages(reports: Any) -> tuple[Stage, ...]:
        return tuple(Stage(dev.type, dev.nodes, r.load, r.memory, (), dev.b_tasks, dev.w_tasks)
                     for dev, r in zip(solution.plan.devices, reports))

    return verified_result(solution, verification, plan_stages, common, started)
