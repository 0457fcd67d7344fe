"""``placement.solve`` for a Piper instance: the exact DP, then the independent evaluator.

:func:`solve_piper` runs :func:`placement.parallel.dp.solve_parallel` (exact for the largest stage
time per sample under the schedule's memory model), re-evaluates its plan with
:func:`placement.verification.parallel.evaluate_parallel`, and returns a
:class:`~placement.parallel.result.ParallelResult` whose value is the evaluator's. ``optimal``
stands only when the plan passes every check and the two values agree to
:data:`placement.solving.AGREEMENT_TOLERANCE`; ``infeasible`` when the DP proves no plan fits; otherwise
``no_solution`` with the reason.

With ``objective="time-per-batch"`` (schedules ``gpipe`` and ``1f1b``) the value is the schedule's
exact time per batch (:mod:`placement.parallel.timing`), minimised by
:func:`placement.parallel.batch_search.search_time_per_batch`; the plan is checked by the evaluator
(devices, memory, contiguity) and its time per batch re-computed by the event simulator
(:func:`placement.simulation.parallel.simulate_parallel`, code shared with neither; for a ``feasible``
plan only up to :data:`SIMULATOR_CHECK_TASKS` tasks, to stay within seconds — ``stats["simulator_check"]``
says which); ``optimal`` only when the search proved it, else ``feasible`` with the bound ``m·M*`` and the gap.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

from placement.errors import InvalidParameterError, LimitExceededError
from placement.io.piper import PiperInstance
from placement.parallel.batch_search import BATCH_SCHEDULES, EXHAUSTIVE_NODES, BatchSearch, search_time_per_batch
from placement.parallel.devices import at_most, check_memory, describe, device_counts
from placement.parallel.dp import DEFAULT_MAX_SETS, solve_parallel
from placement.parallel.handoff import megatron_config
from placement.parallel.interleaved import INTERLEAVED, check_chunks, solve_interleaved
from placement.parallel.result import ParallelResult
from placement.parallel.schedules import check_schedule
from placement.parallel.timing import FORWARD_SHARE, time_per_batch
from placement.parameters import MAX_TIME_LIMIT, callback, integer, number
from placement.problem.memory_fit import LENIENT
from placement.result import Status
from placement.solving import AGREEMENT_TOLERANCE
from placement.verification.parallel import evaluate_parallel

#: a ``feasible`` time-per-batch plan is re-simulated when its batch has at most this many tasks (2·m·stages;
#: the event simulator takes about 1 s per 100,000); an ``optimal`` one always is
SIMULATOR_CHECK_TASKS = 150_000
#: objectives of a Piper instance: Piper's largest stage time per sample, or the schedule's exact time per batch
OBJECTIVES = ("throughput", "time-per-batch")


def _check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise InvalidParameterError("objective", f"must be one of {', '.join(map(repr, OBJECTIVES))} for a Piper "
                                                 f"instance, not {objective!r}")


def check_piper_request(*, method: str, objective: str, contiguity: str | None, accelerators: int | None,
                        cpus: int | None, stages: int | None, backward: str) -> None:
    """Refuse the keywords of :func:`placement.solve` that do not apply to a Piper instance: ``contiguity``
    given at all (``None`` where not given; its plans are of class ``stages``, as verify refuses it given)."""
    _check_objective(objective)
    if contiguity is not None:
        raise InvalidParameterError("contiguity", f"does not apply to a Piper instance (its plans are pipelines of "
                                                  f"data- and tensor-parallel stages, class 'stages'); leave it out, "
                                                  f"not {contiguity!r}")
    fixed = (("method", method, "auto"), ("backward", backward, "joint"))
    for name, value, default in fixed:
        if value != default:
            raise InvalidParameterError(name, f"must be {default!r} for a Piper instance (its plans are pipelines "
                                              f"of data- and tensor-parallel stages, solved by one exact DP), not "
                                              f"{value!r}")
    for name, value in (("accelerators", accelerators), ("cpus", cpus)):
        if value is not None:
            raise InvalidParameterError(name, "does not apply to a Piper instance; give its device count as devices=N")
    if stages is not None:
        raise InvalidParameterError("stages", "does not apply to a Piper instance: its DP chooses the number of "
                                              "stages with their data- and tensor-parallel degrees")


def interleaved_refusal(name: str) -> InvalidParameterError:
    """The refusal of ``name``, an option of the DP that :func:`solve_interleaved` does not take."""
    why = ("whose time per batch is Piper's, forward share 1/3" if name == "forward_share" else
           "whose search is bounded by its time limit")
    return InvalidParameterError(name, f"does not apply to schedule='interleaved', {why} (it takes devices, memory, "
                                       "chunks, time_limit)")


def solve_piper(instance: PiperInstance, *, devices: int | dict[str, int] | str | None = None,
                memory: float | None = None,
                schedule: str = "piper", max_sets: int | None = None,
                progress: Callable[[str], None] | None = None, objective: str = "throughput",
                forward_share: float | None = None, chunks: int | None = None,
                time_limit: float | None = None) -> ParallelResult:
    """The optimal plan of ``instance`` on ``devices`` devices (default ``maxDevices``) of ``memory``
    bytes each (default ``maxMemoryPerDevice``) for ``schedule``'s memory model (``piper``, ``1f1b``,
    ``gpipe``); ``max_sets``: the most successor-closed sets the DP enumerates (default 200,000). With
    ``deviceTypes``, ``devices`` counts per type (:mod:`placement.parallel.devices`) and each type gives its memory.
    ``objective``: ``throughput`` (Piper's largest stage time per sample) or ``time-per-batch`` (the exact
    time per batch of ``gpipe`` or ``1f1b``, with the forward share ``forward_share`` of each node's time
    per sample, default 1/3: :mod:`placement.parallel.timing`); the result's ``time_per_batch`` is that of its
    plan either way. ``schedule="interleaved"``: ``chunks`` model chunks per device group (default 2), solved
    within ``time_limit`` seconds (default :data:`~placement.parallel.interleaved.DEFAULT_TIME_LIMIT`, 8)
    by :func:`placement.parallel.interleaved.solve_interleaved`, which takes neither ``max_sets`` nor
    ``forward_share`` (its time per batch is Piper's, forward share 1/3): not given they are ``None``, and
    given, whatever their value, they are refused there. The other schedules' DP runs to the end
    unless given ``time_limit`` (objective ``throughput``): past it, the best pipeline along one topological
    order is returned, ``feasible``, with the bound Σ of the nodes' least ``t · time`` over the devices (``optimal``
    where its value meets that bound)."""
    result = _solved(instance, devices=devices, memory=memory, schedule=schedule, max_sets=max_sets,
                     progress=progress, objective=objective, forward_share=forward_share, chunks=chunks,
                     time_limit=time_limit)
    return dataclasses.replace(result, instance=instance.name)   # checked a PiperInstance there


def _solved(instance: PiperInstance, *, devices: int | dict[str, int] | str | None, memory: float | None,
            schedule: str, max_sets: int | None, progress: Callable[[str], None] | None, objective: str,
            forward_share: float | None, chunks: int | None, time_limit: float | None) -> ParallelResult:
    """:func:`solve_piper`'s answer, without the instance's name."""
    started = time.perf_counter()
    if not isinstance(instance, PiperInstance):
        raise InvalidParameterError("instance", f"must be a PiperInstance (placement.load reads a Piper file into "
                                                f"one), not {type(instance).__name__}")
    given_devices, devices = devices, device_counts(instance, devices)
    memory = number("memory", memory, optional=True)
    check_memory(instance, memory)
    check_schedule(schedule)
    _check_objective(objective)
    if objective == "time-per-batch" and schedule not in BATCH_SCHEDULES:
        raise InvalidParameterError("schedule", f"must be one of {', '.join(map(repr, BATCH_SCHEDULES))} with "
                                                f"objective='time-per-batch', not {schedule!r}")
    forward_share = number("forward_share", forward_share, largest=1.0, optional=True)
    max_sets = integer("max_sets", max_sets, smallest=1, optional=True)
    callback("progress", progress)
    if not instance.device_types:   # with types, each type gives its memory
        memory = instance.max_memory_per_device if memory is None else memory
    check_chunks(schedule, chunks)
    if schedule == INTERLEAVED:
        for name, value in (("max_sets", max_sets), ("forward_share", forward_share)):
            if value is not None:   # given, whatever its value
                raise interleaved_refusal(name)
        # devices and chunks as given: a refusal of a value left out says where it came from
        return solve_interleaved(instance, devices=given_devices, memory=memory, chunks=chunks,
                                 time_limit=time_limit, progress=progress)
    if time_limit is not None and objective == "time-per-batch":
        raise InvalidParameterError("time_limit", "does not apply to objective='time-per-batch' (its search runs "
                                                  "to the end)")
    time_limit = number("time_limit", time_limit, positive=True, largest=MAX_TIME_LIMIT, optional=True)
    forward_share = FORWARD_SHARE if forward_share is None else forward_share
    deadline = None if time_limit is None else started + time_limit
    # no plan uses more than (stages ≤ nodes)·(d ≤ mbsInBatch)·(largest t) devices: the DP gets that many
    reachable = len(instance.nodes) * instance.microbatches_in_batch * max(
        (t for node in instance.nodes for t in node.configurations), default=1)
    max_sets = DEFAULT_MAX_SETS if max_sets is None else max_sets
    if objective == "time-per-batch":
        return _solve_time_per_batch(instance, at_most(devices, reachable), devices, memory, schedule, max_sets,
                                     forward_share, progress, started)
    found = solve_parallel(instance, devices=at_most(devices, reachable), memory=memory, schedule=schedule,
                           max_sets=max_sets, progress=progress, deadline=deadline)
    if progress is not None:
        progress(f"DP over {found.stats.get('sets', 0):,} successor-closed sets: {found.runtime_s:.2f} s")

    def answer(status, plan=None, value=None, bound=None, evaluation=None, message=""):
        handoff = megatron_config(instance, plan) if plan is not None else None
        batch = None
        if plan is not None:
            try:
                batch = time_per_batch(instance, plan, schedule, forward_share=forward_share,
                                       deadline=math.inf if deadline is None else deadline)
            except InvalidParameterError as exc:   # the schedule's order deadlocks: no time per batch to report
                found.stats["time_per_batch"] = str(exc)
            except LimitExceededError as exc:      # a batch too long to lay out as a task graph, or the time limit
                found.stats["time_per_batch"] = f"not computed: {exc}"
        return ParallelResult(status, plan, value, bound, devices, memory, schedule, evaluation, handoff,
                              time.perf_counter() - started, message, found.stats, batch_time=batch,
                              forward_share=forward_share)

    stopped = found.stats.get("out_of_time")
    if stopped and found.plan is None:
        return answer(Status.NO_SOLUTION, bound=found.stats["lower_bound"],
                      message=f"{stopped.split('; ')[0]}, and no pipeline along the topological order fits")
    if found.plan is None:
        reason = found.stats.get("reason") or _why_no_plan(instance, at_most(devices, reachable), schedule, max_sets)
        return answer(Status.INFEASIBLE, bound=math.inf,
                      message=f"no plan on {describe(devices, memory)}: {reason}")
    evaluation = evaluate_parallel(instance, found.plan, devices=devices, memory=memory)
    if not evaluation.ok and found.stats.get("memory_rounded") and not stopped:
        # the DP's bounds were widened (a relaxation: its optimum bounds every plan's) and its plan needs the
        # slack: the DP again on bounds narrowed as much, whose plans all fit
        strict = solve_parallel(instance, devices=at_most(devices, reachable), memory=memory, schedule=schedule,
                                max_sets=max_sets, deadline=deadline, strict_memory=True)
        checked = None if strict.plan is None else evaluate_parallel(instance, strict.plan, devices=devices,
                                                                      memory=memory)
        if checked is not None and checked.ok and not strict.stats.get("out_of_time") and \
                abs(checked.value - strict.value) <= AGREEMENT_TOLERANCE * max(abs(strict.value), 1e-300):
            widened, found = found.value, strict
            proven = checked.value <= widened + AGREEMENT_TOLERANCE * max(abs(widened), 1e-300)
            return answer(Status.OPTIMAL if proven else Status.FEASIBLE, strict.plan, checked.value,
                          min(widened, checked.value), checked,
                          message="" if proven else "the memory figures have no unit in which the DP's sums are "
                                                    "exact (placement.problem.memory_fit): its optimum on bounds "
                                                    f"widened by {LENIENT:g}, {widened:.6g}, needs that slack, and "
                                                    f"its plan on bounds narrowed by {LENIENT:g} is not proven "
                                                    "optimal")
    if not evaluation.ok:
        narrowed = (f"; on memory bounds narrowed by {LENIENT:g} (the memory figures have no unit in which the "
                    "DP's sums are exact) it finds no plan that passes it either") if found.stats.get(
                        "memory_rounded") and not stopped else ""
        return answer(Status.NO_SOLUTION, evaluation=evaluation, bound=found.value if narrowed else None,
                      message="the DP's plan failed the independent check: " + "; ".join(evaluation.violations)
                      + narrowed)
    if abs(evaluation.value - found.value) > AGREEMENT_TOLERANCE * max(abs(found.value), 1e-300):
        return answer(Status.NO_SOLUTION, evaluation=evaluation,
                      message=f"the DP claims {found.value!r}, the evaluator computes {evaluation.value!r}")
    if stopped:
        lower = found.stats["lower_bound"]
        if evaluation.value <= lower * (1 + AGREEMENT_TOLERANCE):   # the order's plan meets the bound of every plan
            return answer(Status.OPTIMAL, found.plan, evaluation.value, min(lower, evaluation.value), evaluation,
                          message=f"{stopped}, which meets the bound of every plan")
        return answer(Status.FEASIBLE, found.plan, evaluation.value, min(lower, evaluation.value), evaluation,
                      message=stopped)
    return answer(Status.OPTIMAL, found.plan, evaluation.value, min(found.value, evaluation.value), evaluation)


def _why_no_plan(instance: PiperInstance, devices: int | dict[str, int], schedule: str, max_sets: int) -> str:
    """Why the DP found no plan where it names no node that fits nowhere: the DP again on devices of unbounded
    memory tells whether memory is what every plan lacks, or devices (each stage takes ``t · d`` of them, ``t``
    a tensor-parallel degree every node of the stage has a TMPC for)."""
    unbounded = dataclasses.replace(instance, device_types=tuple(dataclasses.replace(kind, memory=math.inf)
                                                                 for kind in instance.device_types))
    again = solve_parallel(unbounded, devices=devices, memory=None if instance.device_types else math.inf,
                           schedule=schedule, max_sets=max_sets)
    if again.plan is not None:
        return "no pipeline of the devices fits every stage's memory"
    return again.stats.get("reason") or ("every plan needs more devices, whatever their memory (a stage takes t·d "
                                         "devices of its own, t a tensor-parallel degree every node of the stage "
                                         "has a TMPC for)")


def _search_story(stats: dict, proven: bool, found_plan: bool) -> str:
    """What the time-per-batch search did and whether it proved its plan optimal (or, without a plan, that
    none exists), in words."""
    steps = []
    if stats.get("candidates"):
        steps.append(f"{stats['candidates']} uniform-degree plans tried")
    if "branch_and_bound_nodes" in stats:
        steps.append(f"branch and bound over {stats['branch_and_bound_nodes']:,} partial plans "
                     + ("completed" if stats.get("branch_and_bound_completed") else "stopped at its step limit"))
    if not found_plan:
        return ("no plan exists" if proven else "no plan found") + (f" ({'; '.join(steps)})" if steps else "")
    if proven and not steps:
        steps.append("the throughput optimum's plan meets the bound m·M*")
    return ("proven" if proven else "not proven") + (f" ({'; '.join(steps)})" if steps else "")


def _solve_time_per_batch(instance: PiperInstance, reachable, devices, memory, schedule: str, max_sets: int,
                          forward_share: float, progress, started: float) -> ParallelResult:
    """``objective="time-per-batch"``: the search, the evaluator's check of the plan's constraints and the
    simulator's re-computation of its time per batch (module docstring)."""
    found = search_time_per_batch(instance, devices=reachable, memory=memory, schedule=schedule,
                                  forward_share=forward_share, max_sets=max_sets, progress=progress)
    if progress is not None:
        progress(f"time-per-batch search: {_search_story(found.stats, found.proven, found.plan is not None)}")

    def answer(status, plan=None, value=None, bound=None, evaluation=None, message=""):
        handoff = megatron_config(instance, plan) if plan is not None else None
        return ParallelResult(status, plan, value, bound, devices, memory, schedule, evaluation, handoff,
                              time.perf_counter() - started, message, found.stats, "time-per-batch",
                              value if plan is not None else None, forward_share=forward_share)

    if found.plan is None:
        reason = found.stats["dp"].get("reason") or _why_no_plan(instance, reachable, schedule, max_sets)
        return answer(Status.INFEASIBLE, bound=math.inf, message=f"no plan on {describe(devices, memory)}: {reason}")
    evaluation = evaluate_parallel(instance, found.plan, devices=devices, memory=memory)
    narrowed = ""
    if not evaluation.ok and found.stats["dp"].get("memory_rounded"):
        again = _narrowed_search(instance, found, reachable, memory, schedule, max_sets, forward_share)
        if again.plan is None and again.proven:
            found = again
            return answer(Status.INFEASIBLE, bound=math.inf,
                          message=f"no plan on {describe(devices, memory)}: no pipeline of the devices fits every "
                                  "stage's memory (the branch and bound over every plan, memory decided exactly)")
        if again.plan is None:
            narrowed = (f"; on memory bounds narrowed by {LENIENT:g} (the memory figures have no unit in which the "
                        "DP's sums are exact) it finds no plan that passes it either")
        else:
            found = again
            evaluation = evaluate_parallel(instance, found.plan, devices=devices, memory=memory)
    if not evaluation.ok:
        return answer(Status.NO_SOLUTION, evaluation=evaluation,
                      message="the search's plan failed the independent check: " + "; ".join(evaluation.violations)
                      + narrowed)
    tasks = 2 * instance.microbatches_in_batch * len(found.plan.stages)
    if not found.proven and tasks > SIMULATOR_CHECK_TASKS:
        found.stats["simulator_check"] = f"skipped: {tasks:,} tasks (more than {SIMULATOR_CHECK_TASKS:,})"
        return answer(Status.FEASIBLE, found.plan, found.value, found.bound, evaluation)
    from placement.simulation.parallel import simulate_parallel

    simulated = simulate_parallel(instance, found.plan, schedule, forward_share=forward_share,
                                  allreduce="piper").time_per_batch
    found.stats["simulator_check"] = "agrees"
    if abs(simulated - found.value) > AGREEMENT_TOLERANCE * max(abs(found.value), 1e-300):
        return answer(Status.NO_SOLUTION, evaluation=evaluation,
                      message=f"the search claims a time per batch of {found.value!r}, the simulator measures "
                              f"{simulated!r}")
    if found.proven:
        return answer(Status.OPTIMAL, found.plan, found.value, found.bound, evaluation)
    return answer(Status.FEASIBLE, found.plan, found.value, found.bound, evaluation,
                  message=_unproven(found.stats, instance))


def _narrowed_search(instance: PiperInstance, widened: BatchSearch, reachable, memory, schedule: str,
                     max_sets: int, forward_share: float) -> BatchSearch:
    """The time-per-batch search again on memory bounds narrowed by :data:`LENIENT`, where the memory figures
    have no unit in which the DP's sums are exact and the plan of the search on widened bounds needs that slack
    (the independent check refuses it): the narrowed search's plan, which fits, with the widened search's bound
    ``m·M*`` (the DP's optimum on widened bounds bounds every plan), proven where it meets that bound or where the
    branch and bound (memory decided exactly) completes, which without a plan proves that none fits."""
    again = search_time_per_batch(instance, devices=reachable, memory=memory, schedule=schedule,
                                  forward_share=forward_share, max_sets=max_sets, strict_memory=True)
    if again.plan is None:
        return again
    lower = widened.bound   # finite: the widened search had a plan, whose time bounds it from above
    proven = again.proven or again.value <= lower * (1 + AGREEMENT_TOLERANCE)
    stats = {**again.stats, "widened_bound": lower}
    return dataclasses.replace(again, bound=again.value if proven else min(max(again.bound, lower), again.value),
                               proven=proven, stats=stats)


def _unproven(stats: dict, instance: PiperInstance) -> str:
    """Why the time-per-batch search left its plan unproven, and what its bound is."""
    if "widened_bound" in stats:
        stopped = (f"; the branch and bound over every plan stopped at its step limit "
                   f"({stats['branch_and_bound_nodes']:,} partial plans)" if "branch_and_bound_nodes" in stats else "")
        return ("the memory figures have no unit in which the DP's sums are exact (placement.problem.memory_fit): "
                f"the plan is the search's on memory bounds narrowed by {LENIENT:g}, and the bound the search's on "
                f"bounds widened by {LENIENT:g} (m·M* of its DP, or its branch and bound's){stopped}")
    bound = "the bound is m·M* (the batch's micro-batches times the least time per sample)"
    if "branch_and_bound_nodes" in stats:
        return (f"the branch and bound over every plan stopped at its step limit ({stats['branch_and_bound_nodes']:,} "
                f"partial plans); {bound}")
    reach = "deviceTypes" if instance.device_types else f"{len(instance.nodes)} nodes"
    return (f"the plan does not meet the bound, and the branch and bound over every plan runs only on instances of at "
            f"most {EXHAUSTIVE_NODES} nodes without deviceTypes (this one has {reach}); {bound}")


__all__ = ["OBJECTIVES", "SIMULATOR_CHECK_TASKS", "check_piper_request", "interleaved_refusal", "solve_piper"]
