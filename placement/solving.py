"""``placement.solve``: one call from an instance to a verified :class:`placement.Result`.

The request (objective, contiguity class, options) is checked against what the chosen method
declares in :mod:`placement.solvers.registry`; the method runs; its plan is re-checked by the
independent evaluator (:mod:`placement.verification.check`), whatever the method. The Result's value
is the evaluator's; a plan that fails the check, or whose value disagrees with the method's
claim, is never returned: the status is then ``no_solution`` and the message says why.

Claims are certified (:func:`certified`): ``optimal`` and ``infeasible`` stand only when the
method is exact (the DP, whose table is a proof, or the MILP, whose backend answer is checked
in :mod:`placement.solvers.milp.outcome`) and an ``optimal`` comes with a bound equal to its
value; otherwise the status drops to ``feasible`` (with a plan) or ``no_solution``, and the
message says why. A bound above the verified value of the plan is refuted and not reported.

``method="auto"`` takes the DP where it applies (objective ``throughput``, contiguity
``stages``) and the graph has at most ``max_ideals`` ideals; otherwise, or when the DP refuses
for the number of ideals or runs out of ``time_limit``, or finds no plan where its memory checks
round (which proves nothing), the MILP (within what is left of it). The Result's ``method`` says
which ran. With ``auto`` the
MILP's options (``backend``, ``time_limit``, ...) are accepted and used if the MILP runs; when the DP
solves it, the message names those given that went unused.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from os import PathLike
from typing import Any, Callable, Mapping

from placement.errors import (Interrupted, InvalidParameterError, InvalidPlanError, LimitExceededError,
                              SolverUnavailableError, unwritable)
from placement.loading import override_devices
from placement.parameters import (MAX_SEED, MAX_THREADS, MAX_TIME_LIMIT, callback, integer, keywords_checked, number,
                                  one_of, recordable, stage_count)
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.problem.objectives import OBJECTIVES, check_objective
from placement.problem.split import SPLIT_DEFAULTS, refuse_split_options, refuse_unused_w_share
from placement.result import Result, Stage, Status

#: relative tolerance between a method's claimed value and the evaluator's recomputation
AGREEMENT_TOLERANCE = 1e-9
AUTO = "auto"
#: the solver options and the values they take where not given (``None``); an option given, whatever its value
#: (its default too), is refused where it does not apply
_DEFAULTS: dict[str, Any] = {"backend": None, "time_limit": None, "gap": 0.0, "threads": None, "seed": 0,
                             "stages": None, "calls": 1, "warm_start": True, "max_ideals": None, "log": None,
                             "split": None, "restarts": None}
#: the solver options a Piper instance's DP takes (``stages`` it refuses with its own message)
_PIPER_TAKES = ("time_limit", "max_ideals", "stages")


@keywords_checked
def solve(instance: Instance | str | PathLike[str] | Mapping[str, Any], *, method: str = AUTO,
          objective: str = "throughput", contiguity: str | None = None, backend: str | None = None,
          time_limit: float | None = None, gap: float | None = None, threads: int | None = None,
          seed: int | None = None,
          stages: int | None = None, accelerators: int | None = None, cpus: int | None = None,
          memory: float | None = None, calls: int | None = None, warm_start: bool | Any = None,
          progress: Callable[[str], None] | None = None, max_ideals: int | None = None, log: str | None = None,
          split: Any = None, restarts: int | None = None, backward: str = "joint", w_placement: str | None = None,
          inter_layer: bool | None = None, w_share: float | None = None,
          devices: int | str | dict[str, int] | None = None, schedule: str | None = None,
          chunks: int | None = None, forward_share: float | None = None) -> Result:
    """Place ``instance`` optimally; see the module docstring and ``docs/api.md``.

    ``instance`` is an :class:`Instance`, a file path or a decoded document (read by
    :func:`placement.load`). ``stages=N`` asks for exactly ``N`` non-empty stages;
    ``accelerators``, ``cpus`` and ``memory`` override the instance's accelerator count, CPU
    count and accelerator memory (bytes). ``time_limit`` (seconds) bounds the whole call with the
    MILP or ``local-search`` (default 60 for the MILP: warm start, model and solver together), ``gap`` lets it stop at that relative gap, ``threads`` and ``seed`` go to its solver,
    ``log`` names a file for the solver's log, ``warm_start`` starts it from the DP's plan (``True``),
    from nothing (``False``) or from a given plan (a Result, Plan, plan document or file),
    ``calls`` is the number of calls per accelerator of the latency model. ``gap``, ``seed``, ``warm_start``
    and ``calls`` not given (``None``) are 0.0, 0, ``True`` and 1; given, even at those values, they are
    refused where they do not apply, as every solver option is. ``progress``
    receives one-line messages while solving. ``split`` (a plan or plan file) is what method
    ``expert`` evaluates; ``restarts`` the number of restarts of ``local-search``;
    ``max_ideals`` the most ideals the DP enumerates (default 200,000). ``backward="split"`` places each
    backward node's B and W tasks apart (``w_placement`` ``"any"``, ``"adjacent"`` or ``"home"``, ``inter_layer``,
    ``w_share``: the W part of a backward node's time where the instance gives none; docs/backward-split.md;
    not given: ``"any"``, ``False``, 0.5; refused, even at those values, where the backward is not split).
    A Piper instance (data- and tensor-parallel stages) is solved by :func:`placement.parallel.solve_piper`
    with ``devices``, ``memory``, ``schedule`` (``piper``, the default, ``1f1b``, ``gpipe``, or ``interleaved`` with
    ``chunks`` per device group and ``time_limit``), ``objective``
    (``throughput``: Piper's; ``time-per-batch``: the schedule's, with ``forward_share`` of each node's time per
    sample in its forward, default 1/3), ``max_ideals`` (not under ``interleaved``,
    whose search its time limit bounds) and ``progress``, and
    returns a :class:`placement.parallel.ParallelResult` (docs/piper.md); for one with ``deviceTypes``,
    ``devices`` counts per type (``{"a100": 8, "v100": 16}`` or ``"a100:8,v100:16"``).
    """
    from placement.solvers.registry import METHODS

    started = time.perf_counter()
    from placement.loading import is_piper, loaded_as_overridden

    read = {"instance": instance, "warm_start": warm_start, "split": split}   # the files the solve reads, if any
    for name, value in (("accelerators", accelerators), ("cpus", cpus), ("calls", calls)):
        recordable(name, value)   # the Result records each (overrides, the verdict's calls)
    instance = loaded_as_overridden(instance, lambda: {"accelerators": accelerators, "cpus": cpus, "memory": memory})
    given = dict(backend=backend, time_limit=time_limit, gap=gap, threads=threads, seed=seed, stages=stages,
                 calls=calls, warm_start=warm_start, max_ideals=max_ideals, log=log, split=split, restarts=restarts,
                 w_placement=w_placement, inter_layer=inter_layer, w_share=w_share)
    if is_piper(instance):
        from placement.parallel.solve import check_piper_request, interleaved_refusal, solve_piper

        check_piper_request(method=method, objective=objective, contiguity=contiguity, accelerators=accelerators,
                            cpus=cpus, stages=stages, backward=backward)
        for name, value in given.items():
            if name not in _PIPER_TAKES and value is not None:
                raise InvalidParameterError(name, "does not apply to a Piper instance, whose one exact DP has "
                                                  "its own options (it takes devices, memory, schedule, chunks, "
                                                  "objective, forward_share, max_ideals, time_limit)")
        max_ideals = integer("max_ideals", max_ideals, smallest=1, optional=True)   # named as the caller names it
        if max_ideals is not None and schedule == "interleaved":
            raise interleaved_refusal("max_ideals")
        return solve_piper(instance, devices=devices, memory=memory, schedule="piper" if schedule is None else schedule,
                           max_sets=max_ideals, progress=progress, objective=objective, chunks=chunks,
                           time_limit=time_limit, forward_share=forward_share)
    piper_only = {"devices": devices, "schedule": schedule, "chunks": chunks, "forward_share": forward_share}
    if any(value is not None for value in piper_only.values()):
        named = next(name for name, value in piper_only.items() if value is not None)
        raise InvalidParameterError(named,
                                    "applies to Piper instances only (data- and tensor-parallel stages)")
    one_of("method", method, (AUTO, *METHODS))
    if objective == "time-per-batch":
        raise InvalidParameterError("objective", f"{objective!r} applies to Piper instances only (data- and "
                                                 f"tensor-parallel stages); this instance takes one of "
                                                 f"{', '.join(map(repr, OBJECTIVES))}")
    one_of("objective", objective, OBJECTIVES)
    from placement.verification.evaluate import check_contiguity

    if contiguity is not None:
        check_contiguity(contiguity)
    if objective == "latency" and contiguity not in (None, "none"):
        raise InvalidParameterError("contiguity", f"{contiguity!r} does not apply to objective='latency' (the latency "
                                                  "model places calls, not pipeline stages, and its plans are of "
                                                  "class 'none'); leave it out or give 'none'")
    contiguity = "stages" if contiguity is None or objective == "latency" else contiguity
    options = {
        "backend": _backend(backend),
        "time_limit": number("time_limit", time_limit, positive=True, largest=MAX_TIME_LIMIT, optional=True),
        "gap": number("gap", _DEFAULTS["gap"] if gap is None else gap, below_one=True),
        "threads": integer("threads", threads, smallest=1, largest=MAX_THREADS, optional=True),
        "seed": integer("seed", _DEFAULTS["seed"] if seed is None else seed, largest=MAX_SEED),
        "stages": integer("stages", stages, smallest=1, optional=True),
        "calls": integer("calls", _DEFAULTS["calls"] if calls is None else calls, smallest=1),
        "warm_start": _warm_start(_DEFAULTS["warm_start"] if warm_start is None else warm_start),
        "max_ideals": integer("max_ideals", max_ideals, smallest=1, optional=True), "log": _log(log, read),
        "split": split, "restarts": integer("restarts", restarts, smallest=1, optional=True),
        "progress": callback("progress", progress), "objective": objective, "contiguity": contiguity,
    }
    problem = override_devices(instance, accelerators, cpus, memory)
    check_objective(problem, objective)
    if calls is not None and objective != "latency":
        raise InvalidParameterError("calls", "applies to objective='latency' only")
    from placement.problem.split import BACKWARD_MODES, split_model

    one_of("backward", backward, BACKWARD_MODES)
    model = split_model(w_placement, inter_layer, w_share)
    if backward == "split":
        from placement.backward_split import check_split_request, solve_split

        check_split_request(problem, method, options, {name: given[name] for name in _DEFAULTS})
        _refuse_unused_seed(options["backend"], seed)
        refuse_unused_w_share(problem, w_share)
        try:
            return _recording(solve_split(problem, model, options, started), problem, accelerators, cpus, memory)
        except Interrupted as exc:
            raise Interrupted(_recording(exc.result, problem, accelerators, cpus, memory)) from None
    refuse_split_options(**{name: given[name] for name in SPLIT_DEFAULTS})
    stage_count(problem, options["stages"])   # after the split's refusal: it takes no stage count at all

    names = [method] if method != AUTO else ["dp", "milp"]
    for name in names:
        _check_request(METHODS[name], problem, options, given, auto=method == AUTO)
    if "milp" in names:
        _refuse_unused_seed(options["backend"], seed)
    chose_the_milp = None   # why auto takes the MILP at once
    if method == AUTO:
        method = "dp" if objective == "throughput" and contiguity == "stages" else "milp"
        if method == "milp":
            chose_the_milp = f"objective={objective!r}" if objective != "throughput" else f"contiguity={contiguity!r}"
    if method == "milp":
        solver = "method 'milp'" if chose_the_milp is None else f"method 'auto' solving {chose_the_milp} with the MILP"
        _refuse_unused_max_ideals(options["backend"], options["warm_start"], max_ideals, solver)
    try:
        method, solution = _method_run(method, names, problem, options, started)
    except SolverUnavailableError as exc:
        if chose_the_milp is None:
            raise
        raise SolverUnavailableError(f"method 'auto' solves {chose_the_milp} with the MILP (the DP solves "
                                     f"objective='throughput' with contiguity='stages'): {exc}") from None
    except KeyboardInterrupt as exc:   # Ctrl-C in the DP or a MILP search: its best plan goes on, verified
        found = _in_hand(exc, method)
        if found is None:
            raise
        name, in_hand = found
        interrupted = _verified(problem, certified(METHODS[name], in_hand), name, options, started)
        raise Interrupted(_recording(interrupted, problem, accelerators, cpus, memory)) from None
    if method == "dp" and options["log"] is not None and progress is not None:
        progress(f"the DP solved this, so nothing went to the MILP solver's log {options['log']}")
    if method == "dp" and names != [method]:   # auto: say which of the MILP's options went unused
        unused = [name for name in _DEFAULTS
                  if name not in METHODS["dp"].options and name != "time_limit" and given[name] is not None]
        if unused:
            named = ", ".join(f"{name}={options[name]!r}" for name in unused)
            note = (f"the DP solved this (method 'auto'), so {named} (the MILP's) "
                    f"{'was' if len(unused) == 1 else 'were'} not used")
            solution = replace(solution, message="; ".join(m for m in (solution.message, note) if m))
    return _recording(_verified(problem, certified(METHODS[method], solution), method, options, started),
                      problem, accelerators, cpus, memory)


def _in_hand(exc: KeyboardInterrupt, method: str) -> tuple[str, Any] | None:
    """The method and the solution of the plan in hand that the interrupt ``exc`` carries: a MILP search's
    (:class:`placement.solvers.milp.interrupt.SearchInterrupted`), or, where ``method`` is the DP, the DP's
    (:class:`placement.solvers.dp.DPInterrupted`; one from the DP that starts a MILP is not the method's
    answer), or a search method's (:class:`placement.sigint.PlanInHand`); ``None`` where it carries none."""
    from placement.sigint import PlanInHand
    from placement.solvers.dp import DPInterrupted
    from placement.solvers.milp.interrupt import SearchInterrupted

    if isinstance(exc, PlanInHand):
        return method, exc.solution
    if isinstance(exc, SearchInterrupted) and exc.solution is not None:
        return "milp", exc.solution
    if isinstance(exc, DPInterrupted) and method == "dp" and exc.solution is not None:
        return "dp", exc.solution
    return None


def _method_run(method: str, names: list[str], problem: Instance, options: Mapping[str, Any],
                started: float) -> tuple[str, Any]:
    """The method that answered and its solution: ``method``, or where ``names`` holds both (``auto``) and
    the DP refuses or finds nothing that proves something, the MILP."""
    from placement.solvers.registry import METHODS

    try:
        solution = _run(METHODS[method], problem, options, started)
    except LimitExceededError as exc:
        if names == [method] and method == "dp" and exc.parameter == "max_ideals":   # the method asked for by name
            raise LimitExceededError(f"{exc}; method='milp' (or 'auto', which takes it where the DP refuses) "
                                     "has no such limit", parameter="max_ideals") from None
        if names == [method]:
            raise
        from placement.solvers.dp import plan_in_hand

        kept = plan_in_hand(exc, problem) if options["warm_start"] is True else None
        if kept is not None:   # the DP's upper bound, found before its time ran out, starts the MILP
            options = {**options, "warm_start": kept[1]}
        said = (f"the DP refuses ({exc}); solving the MILP instead"
                + ("" if kept is None else f", from the plan the DP held ({kept[0]:.6g})"))
        note = (f"the MILP solved this (method 'auto'): the DP refused it ({exc})"
                + ("" if kept is None else f"; the MILP started from the plan the DP held, {kept[2]}"))
        try:
            return "milp", _milp_instead(problem, options, started, said, note)
        except SolverUnavailableError as missing:
            raise SolverUnavailableError(f"method 'auto' needs the MILP here, since the DP refuses ({exc}): "
                                         f"{missing}", parameter=exc.parameter) from None
        except KeyboardInterrupt as stop:
            if kept is None or _in_hand(stop, "milp") is not None:
                raise
            raise _held_by_the_dp(problem, kept, started, str(exc)) from None
    if method == "dp" and names != [method]:
        return _milp_where_the_dp_proves_nothing(problem, options, started, solution)
    return method, solution


def _held_by_the_dp(problem: Instance, kept: tuple[float, Any, str], started: float, refusal: str) -> KeyboardInterrupt:
    """The interrupt of ``auto``'s MILP stopped by Ctrl-C before its search gave a plan, where the MILP took over
    from the DP that ran out of time (``refusal``) holding ``kept`` (``(value, plan, source)``): that plan goes on,
    as an interrupt of the DP itself carries it (:class:`placement.solvers.dp.DPInterrupted`), with the instance's
    lower bound."""
    from placement.solvers.dp import InHand

    held = InHand()
    held.started = started
    held.keep(*kept)
    stop = held.interrupted(problem)
    stop.solution = replace(stop.solution, message=f"{stop.solution.message}; the DP refused it ({refusal}), and the "
                                                   "MILP that took over (method 'auto') was interrupted before it "
                                                   "found a better plan")
    return stop


def _milp_where_the_dp_proves_nothing(problem: Instance, options: Mapping[str, Any], started: float,
                                      solution: Any) -> tuple[str, Any]:
    """``auto`` after the DP: where its memory checks rounded (no unit makes the sizes exact integers)
    and it found no plan, or one it cannot prove optimal, or where its floating-point sums of times and costs
    may be off by more than they tell plans apart (times of 1e9 beside times of 1e-9: its plan is then no
    optimum, nor its bound the optimum's), the MILP's answer where it finds a plan (a better one, or a proof),
    whose solvers scale such times apart; otherwise, or without the MILP's solvers installed, the DP's. Ctrl-C in
    the MILP makes the same choice between its plan in hand and the DP's, raising the DP's on in a
    :class:`placement.solvers.dp.DPInterrupted`."""
    from placement.errors import SolverUnavailableError
    from placement.solution import Status as MethodStatus

    unproven = (solution.status is MethodStatus.FEASIBLE
                and any(key in (solution.stats or {}) for key in ("relaxed_memory_value", "rounding_error")))
    if not unproven and (solution.plan is not None or solution.status is not MethodStatus.NO_SOLUTION):
        return "dp", solution
    found = "found no plan" if solution.plan is None else "proves no optimum"
    try:
        milp = _milp_instead(problem, options, started, f"the DP {found} ({solution.message}); solving the MILP "
                                                        "instead",
                             f"the MILP ran instead (method 'auto'): the DP {found} ({solution.message})")
    except SolverUnavailableError as exc:
        return "dp", replace(solution, message=f"{solution.message}; the MILP, which may find a plan, cannot run "
                                               f"here ({exc})")
    except KeyboardInterrupt as exc:   # the MILP's plan in hand goes on where it is the better one, else the DP's
        from placement.solvers.dp import DPInterrupted
        from placement.solvers.milp.interrupt import SearchInterrupted

        milp = exc.solution if isinstance(exc, SearchInterrupted) else None
        if solution.plan is None or milp is not None and _takes_the_milp(solution, milp):
            raise
        proven = 0.0 if milp is None else _milp_bound(milp)
        raise DPInterrupted(replace(solution, bound=min(solution.objective, max(solution.bound, proven)),
                                    message=f"{solution.message}; the MILP ran too (method 'auto'), and the "
                                            "search was interrupted before it found a better plan")) from None
    if _takes_the_milp(solution, milp):
        return "milp", milp
    bound = min(solution.objective, max(solution.bound, _milp_bound(milp)))   # both bound the same optimum
    return "dp", replace(solution, bound=bound, message=f"{solution.message}; the MILP ran too (method 'auto') and "
                                                        f"found no better plan ({milp.status.value}, bound "
                                                        f"{milp.bound:.6g})")


def _takes_the_milp(dp: Any, milp: Any) -> bool:
    """Whether ``auto`` answers with the MILP's solution ``milp`` rather than the DP's ``dp``: the DP has no
    plan, or the MILP proves its own optimal, or has a better plan."""
    from placement.solution import Status as MethodStatus

    return dp.plan is None or milp.status is MethodStatus.OPTIMAL or (
        milp.plan is not None and milp.objective < dp.objective)


def _milp_bound(milp: Any) -> float:
    """The lower bound the MILP's solution ``milp`` proves on the optimum (0 where it proves none)."""
    from placement.solution import Status as MethodStatus

    return milp.bound if milp.status in (MethodStatus.FEASIBLE, MethodStatus.NO_SOLUTION) else 0.0


def _milp_instead(problem: Instance, options: Mapping[str, Any], started: float, said: str, note: str) -> Any:
    """``auto``'s MILP where the DP gave no answer: ``said`` on the progress before it runs, ``note`` first
    in its message."""
    from placement.solvers.registry import METHODS

    if options["progress"] is not None:
        options["progress"](said)
    try:
        found = _run(METHODS["milp"], problem, options, started)
    except KeyboardInterrupt as exc:   # the plan in hand of an interrupted search keeps the note too
        from placement.solvers.dp import DPInterrupted
        from placement.solvers.milp.interrupt import SearchInterrupted

        if isinstance(exc, SearchInterrupted) and exc.solution is not None:
            exc.solution = replace(exc.solution, message="; ".join(m for m in (note, exc.solution.message) if m))
        elif isinstance(exc, DPInterrupted):   # in the DP that starts the MILP: not the DP method's answer
            raise KeyboardInterrupt from None
        raise
    return replace(found, message="; ".join(m for m in (note, found.message) if m))


def _recording(result: Result, problem: Instance, accelerators: Any, cpus: Any, memory: Any) -> Result:
    """``result`` with the device overrides it was solved with (checked by then), which ``verify`` and
    ``simulate`` take by default, and a note where the instance records no node times."""
    given = {"accelerators": accelerators, "cpus": cpus, "memory": memory}
    overrides = {name: int(value) if name != "memory" else (value if isinstance(value, int) else float(value))
                 for name, value in given.items() if value is not None}
    result = replace(result, overrides=overrides) if overrides else result
    note = _untimed_note(problem, result.objective)
    return replace(result, message="; ".join(m for m in (result.message, note) if m)) if note else result


def _untimed_note(instance: Instance, objective: str) -> str:
    """A note where every node of ``instance`` takes time 0 on every device type (a template whose times
    are yet to be given, as the co-design's model files are): its plans' loads (under the latency
    ``objective``, its latency) are communication alone, or all 0. Empty otherwise."""
    if any(t for node in instance.nodes for t in node.times):
        return ""
    latency = objective == "latency"
    paying = any(t.pays_comm and t.count > 0 for t in instance.device_types)
    if paying and any(node.out_cost for node in instance.nodes):
        return ("every node's time is 0 on every device type (the instance records no times): "
                + ("latency is" if latency else "loads are") + " communication alone")
    return ("every node's time, and every transfer a device pays, is 0 (the instance records no times): every plan "
            f"that fits the memory has {'latency' if latency else 'max load'} 0")


def certified(spec: Any, solution: Any) -> Any:
    """``solution`` with only the claims ``spec`` can prove: ``optimal`` and ``infeasible`` come from an
    exact method only (the registry's ``exact``), ``optimal`` only with a bound equal to its value.
    Another claim drops to ``feasible`` (with a plan) or ``no_solution`` (without), the message
    saying why."""
    from placement.solution import Status as MethodStatus

    def dropped(why: str) -> Any:
        status = MethodStatus.FEASIBLE if solution.plan is not None else MethodStatus.NO_SOLUTION
        note = f"{why}: reported as {status.value}"
        return replace(solution, status=status, bound=solution.bound if spec.exact else 0.0,
                       message="; ".join(m for m in (solution.message, note) if m))

    if solution.status is MethodStatus.INFEASIBLE and not spec.exact:
        return dropped(f"method {spec.name!r} is a heuristic; its 'infeasible' is no proof")
    if solution.status is not MethodStatus.OPTIMAL:
        return solution
    if not spec.exact:
        return dropped(f"method {spec.name!r} is a heuristic; its 'optimal' is no proof")
    if solution.plan is None:
        return dropped(f"method {spec.name!r} claimed optimal without a plan")
    if not math.isclose(solution.bound, solution.objective, rel_tol=AGREEMENT_TOLERANCE, abs_tol=AGREEMENT_TOLERANCE):
        return dropped(f"method {spec.name!r} claimed optimal with the bound {solution.bound!r} "
                       f"below its value {solution.objective!r}")
    return solution


def _run(spec: Any, problem: Instance, options: Mapping[str, Any], started: float) -> Any:
    """Run the method; a ``time_limit`` is what is left of it since ``started`` (it bounds the whole call)."""
    from placement.solvers.ideals import DEFAULT_MAX_IDEALS

    kwargs = {k: options[k] for k in spec.options}
    if spec.name == "milp":
        from placement.solvers.milp import DEFAULT_TIME_LIMIT

        kwargs["deadline"] = started + (DEFAULT_TIME_LIMIT if options["time_limit"] is None else options["time_limit"])
    elif kwargs.get("time_limit") is not None:
        kwargs["time_limit"] = max(1e-3, kwargs["time_limit"] - (time.perf_counter() - started))
    elif spec.name == "dp" and options["time_limit"] is not None:  # auto: the DP within the time limit
        from placement.solvers.dp import deadline_watch

        kwargs["progress"] = deadline_watch(started + options["time_limit"], kwargs.get("progress"), hopeless=True)
    if "max_ideals" in kwargs and kwargs["max_ideals"] is None:
        kwargs["max_ideals"] = DEFAULT_MAX_IDEALS
    if "calls" in kwargs:  # a device's calls are non-empty: more than one per node cannot be used
        kwargs["calls"] = min(kwargs["calls"], len(problem.nodes))
    return spec.function()(problem.with_reachable_counts(options["stages"]), **kwargs)


def _check_request(spec: Any, problem: Instance, options: Mapping[str, Any], given: Mapping[str, Any],
                   auto: bool) -> None:
    """Refuse what ``spec`` does not solve: objective, class, catalogue, and (unless ``auto``) the options
    ``given`` (not ``None``, whatever the value)."""
    from placement.solvers.registry import METHODS, TWO_TYPES

    if auto:
        used = set().union(*(METHODS[m].options for m in ("dp", "milp")))
        unused = [k for k in _DEFAULTS if k not in used and given[k] is not None]
        if unused:
            raise InvalidParameterError(unused[0], "applies to a baseline method only; method='auto' runs the "
                                                   "DP or the MILP")
        return
    where = f"method {spec.name!r}"
    if options["objective"] not in spec.objectives:
        raise InvalidParameterError("objective", f"{options['objective']!r} is not solved by {where} "
                                                 f"(it solves {', '.join(map(repr, spec.objectives))})")
    if options["objective"] != "latency" and options["contiguity"] not in spec.contiguity:
        raise InvalidParameterError("contiguity", f"{options['contiguity']!r} is not solved by {where} (it solves "
                                                  f"{', '.join(map(repr, spec.contiguity))}; method 'milp' solves "
                                                  "every class)")
    if spec.catalogue == TWO_TYPES:
        other = {t.name for t in problem.device_types} - {ACCELERATOR, CPU}
        if other:
            from placement.solvers.baselines.common import other_types_refusal

            raise other_types_refusal(spec.name, other, problem)
        swapped = next((t for t in problem.device_types if (t.name == ACCELERATOR) != t.pays_comm), None)
        if swapped is not None:
            raise InvalidParameterError("method", f"{spec.name!r} takes the device types {ACCELERATOR!r}, which "
                                                  f"pays communication, and {CPU!r}, which does not; this instance's "
                                                  f"{swapped.name!r} {'pays' if swapped.pays_comm else 'does not pay'} "
                                                  "it")
    for name in _DEFAULTS:
        if name not in spec.options and given[name] is not None:
            takes = ", ".join(sorted(k for k in spec.options if k in _DEFAULTS)) or "none of the solver options"
            raise InvalidParameterError(name, f"does not apply to {where} (it takes {takes})")


def _verified(problem: Instance, solution: Any, method: str, options: Mapping[str, Any], started: float) -> Result:
    """The Result of ``solution`` after the independent check of its plan; a plan of a coarser class
    than the one asked for (a baseline's) says so in the message."""
    from placement.problem.canonical import listed_as
    from placement.verification.check import check_plan
    from placement.verification.evaluate import CONTIGUITY_CLASSES

    objective = options["objective"]
    if solution.plan is not None:   # every method's plan lists a device's nodes as the caller's instance does
        solution = replace(solution, plan=listed_as(problem, solution.plan))
    contiguity = "none" if objective == "latency" else solution.contiguity
    common = dict(method=method, backend=(options["backend"] or "cp-sat") if method == "milp" else None,
                  objective=objective, contiguity=contiguity, stats=dict(solution.stats), instance=problem.name,
                  stages=options["stages"])
    verification = None
    if solution.plan is not None:
        verification = check_plan(problem, solution.plan, objective=objective, contiguity=contiguity,
                                  calls=options["calls"] if objective == "latency" else None)
        if verification.notes:
            solution = replace(solution, message="; ".join(m for m in (solution.message, *verification.notes) if m))

    def plan_stages(reports: Any) -> tuple[Stage, ...]:
        return tuple(Stage(dev.type, dev.nodes, r.load, r.memory, dev.calls)
                     for dev, r in zip(solution.plan.devices, reports) if dev.nodes)

    asked = options["contiguity"]
    if (objective != "latency" and solution.plan is not None and contiguity in CONTIGUITY_CLASSES
            and CONTIGUITY_CLASSES.index(contiguity) < CONTIGUITY_CLASSES.index(asked)):  # coarser
        note = f"method {method!r} does not keep to contiguity {asked!r}: its plan is of class {contiguity!r}"
        solution = replace(solution, message="; ".join(m for m in (solution.message, note) if m))
    from placement.solution import Status as MethodStatus

    if solution.plan is None and solution.status in (MethodStatus.INFEASIBLE, MethodStatus.NO_SOLUTION):
        from placement.problem.bounds import class_without_device, memory_without_room

        why = (class_without_device(problem) or memory_without_room(problem)
               or _class_left_and_reentered(problem, objective, solution.contiguity, options["calls"]))
        if why is not None and why not in solution.message:   # a reason no model states: the binding constraint
            solution = replace(solution, message="; ".join(m for m in (solution.message, why) if m))
    if not solution.bound > 0:   # a heuristic proves nothing: the instance's own bounds hold for it too
        from placement.problem.bounds import heuristic_bound

        solution = replace(solution, bound=heuristic_bound(problem, objective, options["calls"]))
    return verified_result(solution, verification, plan_stages, common, started, stages=options["stages"])


#: the most colour classes :func:`_class_left_and_reentered` searches (it is a hint, not a proof)
_CLASSES_SEARCHED = 1000


def _class_left_and_reentered(problem: Instance, objective: str, contiguity: str, calls: int) -> str | None:
    """Where a solve found no plan, a colour class whose forward nodes a path of forward nodes leaves and
    re-enters, where that binds: in a contiguous set (contiguity ``stages`` or ``sets``) the nodes of the
    path go with the class, and one latency call cannot hold it. ``None`` where there is none (among the
    first :data:`_CLASSES_SEARCHED` classes of several forward nodes) or it does not bind."""
    if not (calls == 1 if objective == "latency" else contiguity in ("stages", "sets")):
        return None
    from placement.verification.contiguity import convexity_witness, topological_rank_by_id

    forward = {n.id for n in problem.nodes if not n.backward}
    succ: dict[int, list[int]] = {v: [] for v in forward}
    for edge in problem.edges:
        if edge.src in forward and edge.dst in forward:
            succ[edge.src].append(edge.dst)
    rank = topological_rank_by_id(problem)
    classes = (ids for ids in ([problem.nodes[i].id for i in members if problem.nodes[i].id in forward]
                               for members in problem.colour_classes()) if len(ids) > 1)
    for _, ids in zip(range(_CLASSES_SEARCHED), classes):
        path = convexity_witness(ids, succ, rank)
        if path is not None:
            named = ", ".join(map(str, ids[:8])) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            then = ("one call cannot hold it (calls=2 lets its device run it in two)" if objective == "latency"
                    else f"in contiguity {contiguity!r} its device holds that path's nodes too")
            return (f"the path {' -> '.join(map(str, path))} leaves and re-enters the colour class of nodes "
                    f"{named}: {then}")
    return None


def verified_result(solution: Any, verification: Any, plan_stages: Callable[[Any], tuple[Stage, ...]],
                    common: dict[str, Any], started: float, *, stages: int | None = None) -> Result:
    """The Result of a method's ``solution`` given ``verification``, the independent check of its plan
    (``None`` when it has none): the value is the evaluator's; a plan that fails the check, whose
    value disagrees with the method's, or (``stages``) with another number of non-empty stages is never
    returned; a method's bound above the verified value is refuted and not used. ``plan_stages`` makes
    the Result's stages from the check's device reports; ``common``: the other Result fields."""
    from placement.solution import Status as MethodStatus

    message = solution.message
    status = {MethodStatus.INFEASIBLE: Status.INFEASIBLE}.get(solution.status, Status.NO_SOLUTION)
    if verification is not None:
        claimed, value = solution.objective, verification.value
        if not verification.valid:   # with the method's own notes (why its model let the plan through)
            violation = verification.violations[0]
            notes = [part for part in solution.message.split("; ") if part and violation not in part]
            message = "; ".join(["the plan failed independent verification: " + violation] + notes)
        elif not math.isclose(claimed, value, rel_tol=AGREEMENT_TOLERANCE, abs_tol=AGREEMENT_TOLERANCE):
            message = "; ".join(m for m in (f"the method's value {claimed!r} disagrees with the verified {value!r}",
                                            solution.message) if m)
        elif stages is not None and solution.plan.non_empty != stages:
            message = f"the plan has {solution.plan.non_empty} non-empty stages, not stages={stages}"
        elif solution.status in (MethodStatus.OPTIMAL, MethodStatus.FEASIBLE):
            proven = solution.status is MethodStatus.OPTIMAL
            bound = value if proven else min(solution.bound, value)
            if not proven and solution.bound > value * (1 + AGREEMENT_TOLERANCE) + AGREEMENT_TOLERANCE:
                bound = 0.0   # the verified plan refutes the method's bound
                message = "; ".join(m for m in (message, f"the method's bound {solution.bound!r} is above the "
                                                          f"verified value {value!r}: not used") if m)
            gap = 0.0 if proven or value <= 0 else max(0.0, (value - bound) / value)
            return Result(status=Status.OPTIMAL if proven else Status.FEASIBLE, value=value, bound=bound, gap=gap,
                          plan=plan_stages(verification.report[0].devices), runtime_s=time.perf_counter() - started,
                          verification=verification, verified=True, message=message, **common)
        common["stats"]["rejected_plan"] = [[dev.type, list(dev.nodes)] for dev in solution.plan.devices]
        common["stats"]["claimed_value"] = claimed
    bound = solution.bound if math.isfinite(solution.bound) and solution.bound > 0 else None
    return Result(status=status, value=None, bound=bound, gap=None, plan=(), runtime_s=time.perf_counter() - started,
                  verification=verification, verified=False, message=message, **common)


def _backend(backend: Any) -> str | None:
    if backend is None:
        return None
    if not isinstance(backend, str):
        raise InvalidParameterError("backend", f"must be a backend name or None, not {backend!r}")
    from placement.solvers.milp.backends import check_backend_name

    check_backend_name(backend)
    return backend


def _backend_capabilities(backend: str | None) -> tuple[str, dict[str, bool]]:
    """The MILP backend ``backend`` names (``None``: the default) and its declared capabilities."""
    from placement.solvers.milp.backends import backend_capabilities
    from placement.solvers.milp.entry import DEFAULT_BACKEND

    name = backend or DEFAULT_BACKEND
    return name, backend_capabilities(name)


def _refuse_unused_seed(backend: str | None, seed: Any) -> None:
    """Refuse a ``seed`` given (not ``None``, whatever its value) for a MILP ``backend`` that is given none
    (its ``seed`` capability: CBC behind OR-Tools, PuLP's solvers), as an option a method does not use is."""
    if seed is None:
        return
    from placement.solvers.milp.backends import BACKENDS, backend_capabilities

    name, capabilities = _backend_capabilities(backend)
    if not capabilities["seed"]:
        takers = [n for n in BACKENDS if backend_capabilities(n)["seed"]]
        raise InvalidParameterError("seed", f"does not apply to backend {name!r}, which takes no seed (backends "
                                            f"{', '.join(map(repr, takers[:-1]))} and {takers[-1]!r} take one)")


def _refuse_unused_max_ideals(backend: str | None, warm_start: Any, max_ideals: Any, solver: str) -> None:
    """Refuse a ``max_ideals`` given (not ``None``) to the MILP where no DP runs: it bounds the DP of the MILP's own
    warm start (``warm_start=True``) and, on a floating-point backend, the DP of the plan its claim of optimality is
    checked against; a backend of integer data (CP-SAT) started from nothing or from a given plan runs neither.
    ``solver`` names the method that runs the MILP, as the refusal says it."""
    if max_ideals is None or warm_start is True:
        return
    name, capabilities = _backend_capabilities(backend)
    if capabilities["integer_only"]:
        started = "warm_start=False" if warm_start is False else "a warm_start plan"
        raise InvalidParameterError("max_ideals", f"does not apply to {solver} on backend {name!r} with {started} "
                                                  "(it bounds the DP of the MILP's own warm start)")


def _warm_start(warm_start: Any) -> Any:
    """``True``, ``False`` (numpy's booleans too), or the plan a plan-like value holds (see
    :func:`placement.io.plans.as_plan`)."""
    from placement.problem.instance import is_flag

    if is_flag(warm_start):
        return bool(warm_start)
    from placement.io.plans import as_plan

    try:
        return as_plan(warm_start)
    except (InvalidPlanError, InvalidParameterError) as exc:
        raise InvalidParameterError("warm_start", f"must be True, False or a plan ({exc})") from None


def _log(log: Any, read: Mapping[str, Any]) -> str | None:
    """The solver log's path, checked before any work (:func:`placement.whole_file.probe_writable`, and
    :func:`placement.whole_file.empty_write`: ``/dev/full`` is refused here); the solver appends its log to the
    file. A write that fails once the search has begun (a disk that filled) is a
    :class:`~placement.errors.LogWriteWarning`, and the result is kept. A file that one of the parameters ``read``
    names (the instance, a plan to start from) is refused: the log appended to it would spoil it."""
    if log is not None and not isinstance(log, (str, PathLike)):
        raise InvalidParameterError("log", f"must be a file path or None, not {type(log).__name__}")
    if log is None:
        return None
    if not os.fspath(log):   # no file: probing it wrote "cannot be written: : Is a directory"
        raise InvalidParameterError("log", "must be a file path or None, not an empty name")
    for name, given in read.items():
        if isinstance(given, (str, PathLike)) and _same_file(log, given):
            raise InvalidParameterError("log", f"names the file given as {name} ({os.fspath(given)}): the solver's "
                                               "log appended to it would spoil it; choose another file")
    from placement.whole_file import empty_write, probe_writable

    try:
        probe_writable(log, replaced=False)   # appended to; a run refused later leaves no empty log behind
        empty_write(log)
    except OSError as exc:
        raise unwritable(log, exc, "log") from None
    return os.fspath(log)


def _same_file(path: Any, other: Any) -> bool:
    """Whether the paths ``path`` and ``other`` both name one existing file."""
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):   # either missing, or a name no file can have
        return False
