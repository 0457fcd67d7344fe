"""Event-driven simulation of one training batch of a data- and tensor-parallel pipeline plan.

:func:`simulate_parallel` runs a plan of a :class:`~placement.io.piper.PiperInstance` (stages
with data-parallel degree ``d``, tensor-parallel degree ``t`` and one TMPC per node; see
:mod:`.parallel_model` for what each task costs) through one batch of ``m`` micro-batches
under a schedule (:mod:`.parallel_orders`: GPipe, 1F1B, interleaved 1F1B with ``v`` chunks)
and measures it from the simulated events.

Model
-----
Resources: every replica of every pipeline rank is one compute resource (its ``t`` tensor-
parallel devices run each task together) that runs its forward and backward tasks in the
schedule's order (an ``ordered`` resource of :mod:`.engine`); a task starts when the replica
is free, it is the task's turn, and its inputs are there: the forward of micro-batch ``j`` on
stage ``k`` waits for the forwards of ``j`` on every stage with an edge into ``k``, the
backward for the backwards of ``j`` on every stage ``k`` has an edge into, and for its own
forward. A point-to-point transfer is paid inside the tasks of both ends (see
:mod:`.parallel_model`). At the end of the batch the ``d`` replicas of a rank run a ring
all-reduce of their gradients: replica ``r`` has a link to replica ``r + 1 mod d`` (an
``ordered`` resource of its own), and step ``s`` (``0 ≤ s < 2(d − 1)``) on it starts when both
ends have finished their last task of the batch (both are in the collective) and, for
``s ≥ 1``, step ``s − 1`` into ``r`` has arrived (the chunk it forwards). A replica's batch
ends when the last step into it ends. The event core is :func:`.engine.execute`: every task
here has its place in a fixed order, which is what its ``ordered`` resources run.

Figures
-------
* ``time_per_batch``: when the last task of the batch (all-reduce steps included) ends —
  fill, drain and every wait included: the schedule's time per batch.
* ``time_per_sample``: the steady-state time per micro-batch without fill and drain, Piper's
  objective: per replica, its busy time in the batch (its tasks, and the all-reduce steps it
  sends) divided by ``m``, the largest over all replicas. A replica of stage ``k`` runs
  ``m/d`` micro-batches, so this is ``(F_k + B_k)/d + 2(d − 1)/d · W / (m · bandwidth)`` (with
  ``allreduce="piper"``: ``4(d − 1)/d``), measured from the event times.
* memory per device: the resident ``Σ memoryUsageB`` of the rank's chunks, plus for every
  micro-batch the device holds (from the start of its forward to the end of its backward on
  that chunk) the chunk's ``Σ memoryUsageA``. A replica runs one task at a time, so its
  allocation and free events happen in its order; the peak is the largest running total over
  them (a micro-batch freed at the moment another is allocated does not count twice).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from placement.errors import InvalidParameterError, InvalidPlanError, LimitExceededError
from placement.io.piper import PiperInstance
from placement.io.plans import recorded_figure
from placement.jsonfile import json_value_text
from placement.parameters import integer, number, one_of
from placement.simulation.engine import ORDERED, Deadlock, TaskGraph, compiles_first, compiling, execute
from placement.simulation.parallel_model import (ALLREDUCE_MODELS, PIPER, RING, Layout, build_layout,
                                                 ring_step_time, stage_specs)
from placement.simulation.program import BYTES_PER_TASK, DEFAULT_MEMORY_LIMIT, check_task_count
from placement.simulation.schedules import SCHEDULES as PIPELINE_SCHEDULES
from placement.simulation.parallel_orders import (BACKWARD, FORWARD, GPIPE, INTERLEAVED, ONE_F_ONE_B,
                                                  PARALLEL_SCHEDULES, PIPER_SCHEDULE, gpipe, in_flight_limit,
                                                  interleaved, one_f_one_b)
from placement.wording import counted

#: default forward share of a node's time per sample (backward ≈ twice the forward)
FORWARD_SHARE = 1.0 / 3.0


@dataclass(frozen=True)
class ParallelStageResult:
    """One stage of the plan: per micro-batch task lengths on one replica, and what it held."""

    index: int
    rank: int
    chunk: int
    d: int
    t: int
    device_type: str
    forward: float             # F: receive + φ·compute + send
    backward: float            # B: receive + (1 − φ)·compute + send
    static_memory: float       # Σ memoryUsageB, per device
    activation_memory: float   # Σ memoryUsageA per micro-batch held, per device
    peak_in_flight: int        # most micro-batches of this stage one replica held at once


@dataclass(frozen=True)
class ReplicaResult:
    """One data-parallel replica of a pipeline rank (``t`` devices that run every task together)."""

    rank: int
    replica: int
    devices: int               # t
    busy: float                # time running its tasks and sending its all-reduce steps
    allreduce: float           # time sending its all-reduce steps (2(d − 1) steps)
    finish: float              # when its batch ends (its last task, or the last all-reduce step into it)
    peak_memory: float         # per device: resident memory + the largest activation memory held
    peak_in_flight: int        # most micro-batches (over all its chunks) held at once


@dataclass(frozen=True, eq=False)
class ParallelSimulation:
    """The simulated batch of a data- and tensor-parallel pipeline plan (see the module's figures)."""

    schedule: str
    chunks: int
    microbatches: int
    forward_share: float
    allreduce: str
    time_per_batch: float
    time_per_sample: float
    stages: tuple[ParallelStageResult, ...]
    replicas: tuple[ReplicaResult, ...]
    tasks: int
    notes: tuple[str, ...] = ()

    def peak_memory(self, stage: int) -> float:
        """The largest memory of a device of ``stage`` (over the replicas of its rank)."""
        rank = self.stages[stage].rank
        return max(r.peak_memory for r in self.replicas if r.rank == rank)

    def to_json(self) -> dict[str, Any]:
        """The figures as strict JSON."""
        from dataclasses import asdict

        from placement.jsonfile import strict_json

        return strict_json({
            "format": "placement-parallel-simulation/1", "schedule": self.schedule, "chunks": self.chunks,
            "microbatches": self.microbatches, "forward_share": self.forward_share, "allreduce": self.allreduce,
            "time_per_batch": self.time_per_batch, "time_per_sample": self.time_per_sample, "tasks": self.tasks,
            "stages": [asdict(s) | {"peak_memory": self.peak_memory(s.index)} for s in self.stages],
            "replicas": [asdict(r) for r in self.replicas], "notes": list(self.notes)})


def simulate_parallel(instance: PiperInstance, plan: Any, schedule: str | None = None, chunks: int | None = None,
                      microbatches: int | None = None, forward_share: float = FORWARD_SHARE,
                      allreduce: str = RING, unit_scale: float = 1.0,
                      checked_on: tuple[Any, float | None] | None = None,
                      progress: Callable[[str], None] | None = None) -> ParallelSimulation:
    """Simulate one batch of ``plan`` on ``instance`` under ``schedule`` (see the module docstring).

    ``plan``: a sequence of stages in pipeline order, each a
    :class:`placement.parallel.plan.ParallelStage` or any object with ``nodes``, ``d``,
    ``t``, ``tmpcs`` (node id -> TMPC id) and optionally ``device_type``, or an object whose
    ``stages`` is such a sequence (a :class:`placement.parallel.plan.ParallelPlan`, whose
    ``schedule`` and ``chunks`` are then the defaults). ``schedule``: ``gpipe``, ``1f1b``,
    ``piper`` (Piper's model: the 1F1B order, read for ``time_per_sample``) or ``interleaved``
    (then ``chunks = v ≥ 2`` model chunks per rank, by default the plan's; the stages are the ``p·v``
    virtual stages and stage ``k`` runs on rank ``k mod p``); default the plan's, else ``1f1b``.
    ``chunks`` given under another schedule is refused, whatever its value (1 too).
    ``microbatches``: per batch (default the instance's ``mbsInBatch``); each replica of a
    stage with ``d`` replicas runs ``microbatches / d``. ``forward_share``: the forward's part
    of each node's time per sample. ``allreduce``: ``ring`` (``2(d − 1)/d · W`` bytes per
    replica) or ``piper`` (``4(d − 1)/d · W``, Piper's objective). ``unit_scale``: the factor
    applied to every ``timePerSample`` (``1e-3`` for the milliseconds of ``gnmt.json``).
    ``checked_on``: ``(devices, memory)`` (as :func:`refuse_invalid` takes them) to check the plan on
    before the run, under the schedule and micro-batches simulated (which decide the micro-batches
    each stage holds); ``None``: no check. The result's ``notes`` say where the all-reduce differs from
    the planner's (a ring, where a stage has replicas). ``progress``, a callable taking one line of text,
    hears when the run compiles the event engine first (:func:`placement.simulation.engine.compiles_first`).

    Raises :class:`~placement.errors.InvalidParameterError` naming ``plan`` for a plan that is not a valid
    pipeline of the instance (as :func:`placement.simulate` does for any instance), or another bad parameter.
    """
    if schedule is None:
        schedule = getattr(plan, "schedule", None) or ONE_F_ONE_B
    if isinstance(schedule, str) and schedule not in PARALLEL_SCHEDULES and schedule in PIPELINE_SCHEDULES:
        here = "; 1F1B here is '1f1b'" if schedule.startswith("1f1b") else ""
        raise InvalidParameterError("schedule", f"must be one of {', '.join(map(repr, PARALLEL_SCHEDULES))}, not "
                                                f"{schedule!r} ({schedule!r} schedules a plan whose stages have no "
                                                f"data- or tensor-parallel degrees{here})")
    one_of("schedule", schedule, PARALLEL_SCHEDULES)
    recorded = getattr(plan, "chunks", None) or 1   # model chunks per device group the plan was solved for
    given = chunks is not None
    chunks = integer("chunks", recorded if chunks is None else chunks, smallest=1)
    if recorded > 1 and chunks != recorded:
        raise InvalidParameterError("chunks", f"must be the plan's {recorded} model chunks per device group (its "
                                              f"stages record them), not {chunks}")
    if recorded > 1 and schedule != INTERLEAVED:
        raise InvalidParameterError("schedule", f"{schedule!r} cannot run the plan, which is interleaved ({recorded} "
                                                f"model chunks per device group); use 'interleaved'")
    if schedule == INTERLEAVED and not given and chunks < 2:   # a default of 1 the caller never gave
        raise InvalidParameterError("chunks", "must be given under the interleaved schedule (model chunks per "
                                              "device group, at least 2): the plan records none")
    if schedule == INTERLEAVED and chunks < 2:
        raise InvalidParameterError("chunks", f"must be at least 2 under the interleaved schedule, not {chunks}")
    if schedule != INTERLEAVED and given:   # whatever its value: 1 too, as solve refuses it
        raise InvalidParameterError("chunks", f"applies to the 'interleaved' schedule only, not to {schedule!r}")
    m = integer("microbatches", instance.microbatches_in_batch if microbatches is None else microbatches,
                smallest=1)
    share = number("forward_share", forward_share, largest=1.0)
    one_of("allreduce", allreduce, ALLREDUCE_MODELS)
    unit = number("unit_scale", unit_scale, positive=True)
    specs = stage_specs(plan)
    check_task_count(2 * m * len(specs), m)   # first: the check's schedule orders grow with m too
    if checked_on is not None:
        # the batch planned for is checked as verify checks it, Piper's Σ d ≤ m included; another one as run
        refuse_invalid(instance, plan, *checked_on, schedule=schedule,
                       microbatches=None if m == instance.microbatches_in_batch else m, chunks=chunks)
    layout = build_layout(instance, specs, chunks, m, share, unit)
    _check_ring_tasks(layout)
    run = _Run(layout, schedule, allreduce)
    overflow = f"{unit:g} makes the batch's times overflow past the float range"
    if not np.isfinite(run.graph.duration).all():   # a task of infinite time, or of none (0 · inf: NaN)
        raise InvalidParameterError("unit_scale", overflow)
    if progress is not None and compiles_first(run.graph):
        progress(compiling())
    try:
        start, end = execute(run.graph)
    except Deadlock as exc:
        raise InvalidParameterError("schedule", f"{schedule!r} deadlocks on this plan: {len(exc.waiting)} tasks "
                                                "can never start") from None
    start_a, end_a = np.asarray(start), np.asarray(end)
    if not np.isfinite(end_a).all():
        raise InvalidParameterError("unit_scale", overflow)
    replicas, in_flight = run.measure(start_a, end_a)
    stages = tuple(ParallelStageResult(s.index, s.rank, s.chunk, s.d, s.t, s.device_type, s.forward, s.backward,
                                       s.static_memory, s.activation_memory, in_flight[s.index])
                   for s in layout.stages)
    ring = allreduce == RING and any(stage.d > 1 for stage in stages)
    notes = ("all-reduce ring, 2(d-1)/d of the parameters per replica; the planner's figures use Piper's 4(d-1)/d "
             f"(allreduce={PIPER!r})",) if ring else ()
    return ParallelSimulation(schedule, chunks, m, share, allreduce, float(end_a.max()),
                              max(r.busy for r in replicas) / m, stages, tuple(replicas), len(run.graph), notes)


def _given(source: Any) -> str:
    """What :func:`read_parallel_plan` says it was given instead of a parallel plan: a plan that places nodes on
    devices is named as one, since its type (a Result's plan is a tuple) does not say so."""
    from placement.plan import Plan
    from placement.result import Result, Stage

    if isinstance(source, Result):
        what = "a Result"
    elif isinstance(source, Plan):
        what = "a Plan"
    elif isinstance(source, (tuple, list)) and source and all(isinstance(s, Stage) for s in source):
        what = "a Result's plan (its stages)"
    else:
        return type(source).__name__
    return f"{what}: it places nodes on devices, as plans of instances without data- and tensor-parallel stages do"


def read_parallel_plan(source: Any) -> tuple[Any, Any, float | None]:
    """The parallel plan ``source`` holds (a :class:`ParallelPlan`, a
    :class:`placement.parallel.result.ParallelResult`, a plan file or its decoded document, as ``placement
    solve --out`` writes it for a Piper instance, or a record whose ``plan`` is one), with the devices and
    memory it records (``None`` where it records none); :class:`InvalidPlanError` if it holds none, and
    :class:`InvalidParameterError` naming ``plan`` for anything else, such as a plan that places nodes on devices
    (a :class:`placement.Plan`, a :class:`placement.Result` or its stages)."""
    from placement.parallel.plan import ParallelPlan   # the plan's data, read here only: the run needs none of it
    from placement.parallel.result import PLAN_FORMAT, ParallelResult

    if isinstance(source, ParallelPlan):
        return source, None, None

    if isinstance(source, ParallelResult):
        if source.plan is None:
            raise InvalidPlanError(f"the result holds no plan ({source.status})")
        return source.plan, source.devices, source.memory
    if isinstance(source, (str, os.PathLike)):
        from placement.jsonfile import load_json

        source = load_json(source, InvalidPlanError)   # its errors name the file
    if not isinstance(source, Mapping):
        raise InvalidParameterError("plan", "must be a plan of a Piper instance (a ParallelPlan, a ParallelResult, a "
                                            f"plan document (dict) or a plan file path), not {_given(source)}")
    from placement.jsonfile import refuse_huge_integers

    refuse_huge_integers(source, InvalidPlanError)   # a decoded document's, as a file's are refused
    doc = source.get("plan", source)
    _refuse_another_document(doc if isinstance(doc, Mapping) else source)   # a record's own fields are its own
    written = doc.get("format", PLAN_FORMAT) if isinstance(doc, Mapping) else PLAN_FORMAT
    if written != PLAN_FORMAT:
        raise InvalidPlanError(f"unknown plan format {json_value_text(written)} (a parallel plan is {PLAN_FORMAT!r})")
    plan = ParallelPlan.from_json(doc)
    record = doc if isinstance(doc, Mapping) else source
    devices = record.get("devices", source.get("devices"))
    memory = record.get("memory", source.get("memory"))
    if isinstance(devices, Mapping) and devices and all(isinstance(k, str) and _count(c) is not None
                                                        for k, c in devices.items()):
        devices = {k: _count(c) for k, c in devices.items()}
    elif devices is not None and _count(devices):
        devices = _count(devices)
    elif devices is not None:   # a record that says something else, or a count of no device (solve refuses it)
        raise InvalidPlanError(f"the plan's 'devices' must be a device count or counts per device type, not "
                               f"{_shown(devices)}")
    if memory is not None:
        figure = recorded_figure(memory)
        if figure is None or not math.isfinite(figure) or figure < 0:
            raise InvalidPlanError(f"the plan's 'memory' must be a number of bytes, not {json_value_text(memory)}")
        memory = memory if type(memory) in (int, float) else figure   # numpy's numbers as the floats they hold
    return plan, devices, memory


def recorded_forward_share(source: Any) -> float | None:
    """The forward share ``source`` records its time per batch was timed with (a
    :class:`placement.parallel.result.ParallelResult`'s, or the ``forwardShare`` of a plan document or of the
    plan of a record, as :func:`read_parallel_plan` reads them), or ``None`` where it records none (a bare
    :class:`ParallelPlan`, a document written without one); :class:`InvalidPlanError` for a recorded share
    that is no number from 0 to 1."""
    from placement.parallel.result import ParallelResult

    if isinstance(source, ParallelResult):
        return source.forward_share
    if not isinstance(source, Mapping):
        return None
    doc = source.get("plan", source)
    record = doc if isinstance(doc, Mapping) else source
    share = record.get("forwardShare", source.get("forwardShare"))
    if share is None:
        return None
    figure = recorded_figure(share)
    if figure is None or not 0 <= figure <= 1:
        raise InvalidPlanError(f"the plan's 'forwardShare' must be a number from 0 to 1 (the forward's share of "
                               f"each node's time per sample), not {json_value_text(share)}")
    return figure


def _shown(value: Any) -> str:
    """A recorded value as a message shows it, as JSON spells it (``null``, ``true``; an object with its entries,
    which say which count is wrong)."""
    return json.dumps(value, default=repr) if isinstance(value, Mapping) else json_value_text(value)


def _refuse_another_document(document: Mapping[str, Any]) -> None:
    """:class:`InvalidPlanError` naming what ``document`` is where it is no parallel plan and its fields say what
    (:func:`placement.loading.named_document`, :func:`placement.loading.design_document`): read as a plan, a
    split's form was refused as an unknown plan format, a verdict's fields as misspellings, a co-design result
    for its list 'plan'."""
    from placement.loading import design_document, named_document

    other = named_document(document) or design_document(document)
    if other:
        raise InvalidPlanError(f"the document is {other}, not a parallel plan, which has a list 'stages'")


def _count(value: Any) -> int | None:
    """A recorded device count as an integer, where it is a non-negative one (``10.0`` is 10, as an ordinary plan
    file reads a count: :func:`placement.io.plans.whole_number`); else ``None``."""
    from placement.io.plans import whole_number

    count = whole_number(value)
    return count if count is not None and count >= 0 else None


def refuse_invalid(instance: PiperInstance, plan: Any, devices: Any = None, memory: float | None = None, *,
                   schedule: str | None = None, microbatches: int | None = None, chunks: int | None = None) -> None:
    """:class:`InvalidParameterError` naming ``plan``, with the first violation the independent evaluator
    finds in ``plan`` (:func:`placement.verification.parallel_check.evaluate_plan`) on ``devices`` devices (a
    count, or
    counts per device type) of ``memory`` bytes, by default the instance's: more devices than there
    are, a stage over its memory, ... The memory is
    that of ``schedule``'s micro-batches in flight with ``microbatches`` per batch (default the plan's
    schedule and the instance's ``mbsInBatch``); a plan run interleaved with ``chunks`` chunks per rank
    is checked as the interleaved plan it then is (a rank holds several of its stages)."""
    from placement.verification.parallel_check import evaluate_plan, typed_counts_refusal

    refusal = typed_counts_refusal(instance, devices, memory)
    if refusal:
        raise InvalidPlanError(refusal)
    checked = plan
    if plan.chunks == 1 and schedule == INTERLEAVED and chunks is not None and chunks > 1:
        from placement.parallel.plan import ParallelPlan

        checked = ParallelPlan(plan.stages, INTERLEAVED, chunks)
    evaluation = evaluate_plan(instance, checked, devices=devices, memory=memory, schedule=schedule,
                               microbatches=microbatches)
    if evaluation.violations:
        count = len(evaluation.violations)
        more = f" (and {count - 1} more)" if count > 1 else ""
        m = instance.microbatches_in_batch if microbatches is None else microbatches
        run = schedule if schedule is not None else plan.schedule
        setting = (f" run under {run!r} with {counted(m, 'micro-batch')} per batch"
                   if run != plan.schedule or m != instance.microbatches_in_batch else "")
        raise InvalidParameterError("plan", f"is not valid for this instance{setting}: {evaluation.violations[0]}"
                                            f"{more}")


def _check_ring_tasks(layout: Layout) -> None:
    """Refuse a plan whose all-reduce rings (``2(d − 1)`` steps on each of a rank's ``d`` links) and batch
    together make more tasks than the simulator's memory limit takes (:func:`check_task_count` counts the
    batch's alone)."""
    ranks = layout.stages[:layout.ranks]
    ring = sum(2 * (s.d - 1) * s.d for s in ranks)
    tasks = 2 * layout.microbatches * len(layout.stages) + ring
    if ring and tasks * BYTES_PER_TASK > DEFAULT_MEMORY_LIMIT:
        widest = max(ranks, key=lambda s: s.d)
        raise LimitExceededError(f"the all-reduce rings make {ring:,} tasks (2(d − 1)·d for a stage of d replicas; "
                                 f"stage {widest.index} has d = {widest.d}), {tasks:,} with the batch's, about "
                                 f"{tasks * BYTES_PER_TASK / 2**30:.3g} GiB to simulate, over the simulator's "
                                 f"fixed limit of {DEFAULT_MEMORY_LIMIT / 2**30:.3g} GiB")


class _Run:
    """The task graph of one batch: ids of every task, per replica its order, per rank its ring."""

    def __init__(self, layout: Layout, schedule: str, allreduce: str) -> None:
        self.layout = layout
        graph = self.graph = TaskGraph()
        m, p, v = layout.microbatches, layout.ranks, layout.chunks
        stages = layout.stages
        degrees = [s.d for s in stages]
        self.compute: dict[tuple[int, int], int] = {}
        for rank in range(p):
            for r in range(stages[rank].d):
                self.compute[(rank, r)] = graph.add_resource(ORDERED)
        # forward and backward task ids, per stage, per global micro-batch
        self.fwd = [[graph.add_task(self.compute[(s.rank, j % s.d)], s.forward) for j in range(m)] for s in stages]
        self.bwd = [[graph.add_task(self.compute[(s.rank, j % s.d)], s.backward) for j in range(m)] for s in stages]
        for s in stages:
            k = s.index
            for j in range(m):
                for u in s.upstream:
                    graph.add_dependency(self.fwd[u][j], self.fwd[k][j])
                for w in s.downstream:
                    graph.add_dependency(self.bwd[w][j], self.bwd[k][j])
                graph.add_dependency(self.fwd[k][j], self.bwd[k][j])
        self.order: dict[tuple[int, int], list[int]] = {}
        for rank in range(p):
            d = stages[rank].d
            local = m // d
            for r in range(d):
                if schedule == GPIPE:
                    steps = gpipe(local)
                elif schedule in (ONE_F_ONE_B, PIPER_SCHEDULE):
                    steps = one_f_one_b(local, in_flight_limit(degrees, rank) - 1)
                else:
                    steps = interleaved(local, p, v, rank)
                tasks = [(self.fwd if kind == FORWARD else self.bwd)[chunk * p + rank][l * d + r]
                         for kind, chunk, l in steps]
                self.order[(rank, r)] = tasks
                graph.set_order(self.compute[(rank, r)], tasks)
        # ring all-reduce per rank: ring[rank][r] = the steps replica r sends to r + 1 mod d
        self.ring: dict[int, list[list[int]]] = {}
        for rank in range(p):
            d = stages[rank].d
            if d == 1:
                continue
            length = ring_step_time(layout, rank, allreduce)
            links = [graph.add_resource(ORDERED) for _ in range(d)]
            sent = [[graph.add_task(links[r], length) for _ in range(2 * (d - 1))] for r in range(d)]
            for r in range(d):
                last, next_last = self.order[(rank, r)][-1], self.order[(rank, (r + 1) % d)][-1]
                for step, task in enumerate(sent[r]):
                    graph.add_dependency(last, task)
                    graph.add_dependency(next_last, task)
                    if step:
                        graph.add_dependency(sent[(r - 1) % d][step - 1], task)
                graph.set_order(links[r], sent[r])
            self.ring[rank] = sent

    def measure(self, start: np.ndarray, end: np.ndarray) -> tuple[list[ReplicaResult], list[int]]:
        """Per replica its busy time, finish and peak memory; per stage its peak of micro-batches held."""
        layout = self.layout
        stages = layout.stages
        p = layout.ranks
        in_flight = [0] * len(stages)
        replicas = []
        for (rank, r), tasks in self.order.items():
            d = stages[rank].d
            mine = layout.rank_stages(rank)
            static = math.fsum(s.static_memory for s in mine)
            held = [0] * len(mine)          # per chunk: micro-batches held now
            memory = static
            peak_memory, peak_count = static, 0
            kinds = self._kinds(rank, r)
            for task, (kind, chunk) in zip(tasks, kinds):
                if kind == FORWARD:          # allocated when the forward starts
                    held[chunk] += 1
                    memory += mine[chunk].activation_memory
                    peak_memory = max(peak_memory, memory)
                    peak_count = max(peak_count, sum(held))
                    index = chunk * p + rank
                    in_flight[index] = max(in_flight[index], held[chunk])
                else:                        # freed when the backward ends
                    held[chunk] -= 1
                    memory -= mine[chunk].activation_memory
            compute_busy = float(np.sum(end[tasks] - start[tasks]))
            finish = float(end[tasks[-1]])
            allreduce = 0.0
            if d > 1:
                sent = self.ring[rank][r]
                allreduce = float(np.sum(end[sent] - start[sent]))
                finish = float(end[self.ring[rank][(r - 1) % d][-1]])
            replicas.append(ReplicaResult(rank, r, stages[rank].t, compute_busy + allreduce, allreduce, finish,
                                          peak_memory, peak_count))
        return replicas, in_flight

    def _kinds(self, rank: int, r: int) -> list[tuple[str, int]]:
        """(kind, chunk) of each task in the order of replica ``r`` of ``rank``, from the task ids."""
        kinds = {}
        for s in self.layout.rank_stages(rank):
            for j in range(r, self.layout.microbatches, s.d):
                kinds[self.fwd[s.index][j]] = (FORWARD, s.chunk)
                kinds[self.bwd[s.index][j]] = (BACKWARD, s.chunk)
        return [kinds[t] for t in self.order[(rank, r)]]


__all__ = ["FORWARD_SHARE", "ParallelSimulation", "ParallelStageResult", "ReplicaResult", "recorded_forward_share",
           "simulate_parallel"]
