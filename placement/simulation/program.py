"""The task graph of one run: a pipeline, a schedule, a number of micro-batches, a communication mode.

Resources: one compute resource per stage (``ordered``: the schedule's order;
``W`` tasks are fillers) and, in the ``link`` mode, one link per stage that pays
communication (``fifo``). A stage choosing a filler takes the oldest ready
micro-batch first. A link ranks its ready transfers by the stage's task order:
the receive of the ``k``-th task ranks ``k − 1.5`` and its send ``k``, so the link
fetches the next task's inputs while the stage computes and sends each output
before fetching further ahead (receive ``k+1``, send ``k``, receive ``k+2``, …).

Communication modes:

* ``inline`` (default, the load model): a task's length is receive + compute +
  send of its call (:meth:`Stage.task_time`), so a stage is busy exactly its
  evaluator load per micro-batch and a stream's time per sample is the max load.
* ``link``: a task is its compute only; its receive and send are separate tasks
  on the stage's link, which overlaps with compute. A receive waits for the
  producers' sends (or, from a stage that pays no communication, their compute);
  the task waits for its receive and its send waits for it. A stage that pays no
  communication reads from and writes to host memory directly. Per micro-batch a
  stage's link is busy its communication time, so a stream's time per sample is
  ``max over stages of max(compute, communication)``: the overlapped variant of
  the load model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from placement.errors import InvalidParameterError, LimitExceededError
from placement.parameters import number
from placement.problem.split import DEFAULT_W_SHARE
from placement.simulation.engine import FIFO, ORDERED, TaskGraph
from placement.simulation.pipeline import BACKWARD, FORWARD, WEIGHT, Pipeline, Stage
from placement.simulation.schedules import Schedule, in_flight_cap, stage_order, warmup_counts
from placement.wording import counted

INLINE = "inline"
LINK = "link"
COMM_MODES = (INLINE, LINK)
RECEIVE = "recv"
SEND = "send"
#: Default bound on the memory a run may take (the task graph, the engine's state and the task table).
DEFAULT_MEMORY_LIMIT = 2 * 2**30
#: Memory per task of a run, measured (a 1f1b-async run of 3.6 million tasks through the compiled engine peaked
#: at 1.49 GiB, of which 0.17 GiB the interpreter, numpy and numba: 382 bytes a task): the task graph's lists,
#: the engine's state and the task table together.
BYTES_PER_TASK = 400


@dataclass(frozen=True)
class TaskLabel:
    """What a task of one micro-batch is: its stage, kind (F, B, W, recv, send) and resource."""

    stage: int
    kind: str
    on_link: bool


@dataclass
class Program:
    """A task graph of ``microbatches`` copies of one micro-batch's tasks.

    Task ``t`` of micro-batch ``j`` has the id ``j · len(labels) + t`` and the label
    ``labels[t]``.
    """

    graph: TaskGraph
    labels: list[TaskLabel]
    microbatches: int
    compute_resource: list[int]
    link_resource: list[int | None]
    task_times: list[dict[str, float]]   # per stage: kind -> length of its tasks on the compute resource

    def label(self, task: int) -> tuple[TaskLabel, int]:
        """The label and micro-batch of task id ``task``."""
        j, t = divmod(task, len(self.labels))
        return self.labels[t], j


def stream_window(stages: int, comm: str) -> int:
    """Micro-batches a stream lets into the pipeline at once: ``S`` (``2S`` with link transfers).

    Micro-batch ``j`` enters (its first tasks may start) once micro-batch ``j − W``
    has finished everywhere. A micro-batch's path through the tasks is at most the
    sum of all stage loads, ``≤ S × max load`` (with links, at most
    ``Σ (compute + comm) ≤ 2S × max(compute, comm)``), so ``W`` micro-batches per
    round trip keep the bottleneck busy while the stages before it cannot run ahead
    without bound.
    """
    return stages if comm == INLINE else 2 * stages


@dataclass
class Unit:
    """The tasks of one micro-batch: a task graph whose task ``t`` has the label ``labels[t]``;
    ``main[(s, kind)]`` is the compute task of that stage and kind, ``gate``/``output`` the tasks
    that receive its inputs and after which its outputs are out (``main`` itself inline)."""

    graph: TaskGraph
    labels: list[TaskLabel]
    compute_resource: list[int]
    link_resource: list[int | None]
    task_times: list[dict[str, float]]
    main: dict[tuple[int, str], int]
    gate: dict[tuple[int, str], int]
    output: dict[tuple[int, str], int]


def weight_work(stage: Stage, w_fraction: float | None) -> float:
    """The compute of a stage's W task (a joint plan under a schedule that splits the backward):
    ``w_fraction`` of its backward compute; where that is ``None``, the weight-gradient times its
    instance gives (:attr:`Stage.weight`, at most the backward compute), else
    :data:`~placement.problem.split.DEFAULT_W_SHARE` of it (:mod:`placement.simulation.pipeline`,
    "Split backward")."""
    backward = stage.compute[BACKWARD]
    if w_fraction is None and stage.weight is not None:
        return min(stage.weight, backward)
    return (DEFAULT_W_SHARE if w_fraction is None else w_fraction) * backward


def build_unit(pipeline: Pipeline, schedule: Schedule, comm: str, w_fraction: float | None) -> Unit:
    """The tasks, resources and dependencies of one micro-batch (no order, no window).

    A stage whose W call would do nothing (no weight-gradient work, nothing to receive or send: a split plan's
    stage without W tasks, or a W share of 0) has no W task: a filler of no length still waited for idle
    time, and the stage held every micro-batch until then (all 8 of 8 under split-backward where 1F1B
    holds 3)."""
    stages = pipeline.stages
    n = len(stages)
    kinds = (FORWARD, BACKWARD) if schedule.training else (FORWARD,)
    if pipeline.split:
        kinds = (FORWARD, BACKWARD, WEIGHT)   # the plan's own W calls, fillers under every schedule
    one = TaskGraph()     # the tasks of one micro-batch
    labels: list[TaskLabel] = []
    compute_resource = [one.add_resource(ORDERED) for _ in stages]
    link_resource: list[int | None] = [
        one.add_resource(FIFO) if comm == LINK and st.pays_comm and st.comm > 0 else None for st in stages]

    def task(resource: int, duration: float, label: TaskLabel, filler: bool = False) -> int:
        labels.append(label)
        return one.add_task(resource, duration, filler)

    def compute_time(s: int, kind: str) -> float:
        st = stages[s]
        base = st.task_time(kind) if comm == INLINE else st.compute[kind]
        if kind == BACKWARD and schedule.split_backward and not pipeline.split:
            base -= weight_work(st, w_fraction)
        return base

    task_times = [{k: compute_time(s, k) for k in kinds} for s in range(n)]
    read = {source for needs in pipeline.inputs.values() for source in needs}

    def idle_weight(s: int) -> bool:   # a split plan's W call that does nothing and feeds nothing
        st = stages[s]
        return st.compute[WEIGHT] + st.receive[WEIGHT] + st.send[WEIGHT] == 0 and (s, WEIGHT) not in read

    lags = w_lags(pipeline, schedule)
    main: dict[tuple[int, str], int] = {}
    gate: dict[tuple[int, str], int] = {}     # the task that receives the inputs of (s, kind)
    output: dict[tuple[int, str], int] = {}   # the task after which the outputs of (s, kind) are out
    for s, st in enumerate(stages):
        link = link_resource[s]
        for kind in kinds:
            if kind == WEIGHT and idle_weight(s):
                continue
            key = (s, kind)
            work = task(compute_resource[s], task_times[s][kind], TaskLabel(s, kind, False),
                        filler=kind == WEIGHT and lags[s] is None)
            main[key] = gate[key] = output[key] = work
            if link is not None and st.receive[kind] > 0:
                gate[key] = task(link, st.receive[kind], TaskLabel(s, RECEIVE, True))
                one.add_dependency(gate[key], work)
            if link is not None and st.send[kind] > 0:
                output[key] = task(link, st.send[kind], TaskLabel(s, SEND, True))
                one.add_dependency(work, output[key])
        if schedule.split_backward and not pipeline.split:
            task_times[s][WEIGHT] = weight_work(st, w_fraction)
            if task_times[s][WEIGHT] == 0:
                continue
            weight = task(compute_resource[s], task_times[s][WEIGHT], TaskLabel(s, WEIGHT, False), filler=True)
            one.add_dependency(main[(s, BACKWARD)], weight)
            main[(s, WEIGHT)] = weight
    for s in range(n):
        for kind in kinds:
            if (s, kind) not in gate:
                continue
            for source, source_kind in pipeline.inputs[(s, kind)]:
                if (source, source_kind) in output:
                    one.add_dependency(output[(source, source_kind)], gate[(s, kind)])
        if schedule.training:
            one.add_dependency(main[(s, FORWARD)], main[(s, BACKWARD)])

    return Unit(one, labels, compute_resource, link_resource, task_times, main, gate, output)


def build_program(pipeline: Pipeline, schedule: Schedule, microbatches: int, comm: str = INLINE,
                  w_fraction: float | None = None, memory_limit: float = DEFAULT_MEMORY_LIMIT,
                  building: Callable[[int], None] | None = None) -> Program:
    """The tasks, dependencies and per-stage orders of ``microbatches`` micro-batches.

    Memory grows linearly with the tasks (:data:`BYTES_PER_TASK` each): a run whose tasks would
    take more than ``memory_limit`` bytes is refused with :class:`LimitExceededError` before
    anything is built for it; ``building`` hears the number of tasks once they are found to fit."""
    if comm not in COMM_MODES:
        raise InvalidParameterError("comm", f"must be one of {', '.join(map(repr, COMM_MODES))}, not {comm!r}")
    if microbatches < 1:
        raise InvalidParameterError("microbatches", f"must be a positive integer, not {microbatches!r}")
    number("w_fraction", w_fraction, largest=1.0, optional=True)
    unit = build_unit(pipeline, schedule, comm, w_fraction)
    one, labels, main, gate, output = unit.graph, unit.labels, unit.main, unit.gate, unit.output
    compute_resource, link_resource, task_times = unit.compute_resource, unit.link_resource, unit.task_times
    n = len(pipeline.stages)
    size = len(one)
    _check_memory(size, microbatches, n, memory_limit, schedule.flush)
    if building is not None:
        building(size * microbatches)
    graph = one.replicate(microbatches, priority_step=1.0)   # fillers: older micro-batches first
    if not schedule.training:
        window = stream_window(n, comm)
        sources = [t for t in range(size) if one.predecessor_count[t] == 0]
        sinks = [t for t in range(size) if not one.successors[t]]
        for j in range(window, microbatches):
            for t in sinks:
                for u in sources:
                    graph.add_dependency(t + (j - window) * size, u + j * size)
    caps = stage_caps(pipeline, schedule)
    lags = w_lags(pipeline, schedule)
    if schedule.order == "fill-drain" and pipeline.split:
        # a split plan's GPipe flushes between the phases: no stage starts its backward calls before every
        # stage has run all its forwards, so the time per sample grows by max FW + max BW per micro-batch
        for s in range(n):
            for s2 in range(n):
                graph.add_dependency(main[(s2, FORWARD)] + (microbatches - 1) * size, main[(s, BACKWARD)])
    warm = warmup_counts(schedule, n, microbatches, caps)
    for s in range(n):
        order = [(kind, j) for kind, j in stage_order(schedule, s, n, microbatches, warm=warm[s], w_lag=lags[s])
                 if (s, kind) in main]   # a W call that does nothing has no task (build_unit)
        graph.set_order(compute_resource[s], [main[(s, kind)] + j * size for kind, j in order])
        if caps[s] is not None:
            # F(j) waits until the stage has finished every task of micro-batch j - cap.
            held = [main[key] for key in main if key[0] == s and key[1] != FORWARD]
            for j in range(caps[s], microbatches):
                for t in held:
                    graph.add_dependency(t + (j - caps[s]) * size, main[(s, FORWARD)] + j * size)
        if link_resource[s] is not None:
            # A link sends a task's outputs right after it and fetches the next task's inputs while it
            # runs: the receive of the k-th task in the stage's order ranks k - 1.5, its send k.
            for k, (kind, j) in enumerate(order):
                if gate[(s, kind)] != main[(s, kind)]:
                    graph.priority[gate[(s, kind)] + j * size] = k - 1.5
                if output[(s, kind)] != main[(s, kind)]:
                    graph.priority[output[(s, kind)] + j * size] = float(k)
    return Program(graph, labels, microbatches, compute_resource, link_resource, task_times)


def w_lags(pipeline: Pipeline, schedule: Schedule) -> list[int | None]:
    """Per stage, how many rounds its W call trails its B under ``schedule`` (``None``: W fills idle time).

    1F1B on a split plan runs ``W(j − δ)`` right after ``B(j)``: ``δ = 0`` when the stage's W receives
    nothing from another stage's B (what it reads is there by its ``B(j)``: its own tensors, forward
    outputs, and what its B call received); when it receives the output of the B of stages ``k ≠ i``,
    which the round of ``B(j)`` may not have produced yet (a chain of B calls between ``i`` and ``k`` may
    take up to one round per stage), ``δ = 1 + max |k − i|``."""
    if not (pipeline.split and schedule.weight_calls_in_order):
        return [None] * len(pipeline.stages)
    lags = []
    for s in range(len(pipeline.stages)):
        distances = [abs(k - s) for k, kind in pipeline.inputs[(s, WEIGHT)] if kind == BACKWARD and k != s]
        lags.append(1 + max(distances) if distances else 0)
    return lags


def stage_caps(pipeline: Pipeline, schedule: Schedule) -> list[int | None]:
    """Per stage, the most micro-batches it may hold under ``schedule`` (``None``: no limit of its own):
    the schedule's limit (:func:`in_flight_cap`), lowered to what the device's memory bound holds
    beside its node memory where the activations per micro-batch are known.

    A split plan under 1F1B (``1f1b-async``, ``1f1b-flush``): stage ``i`` admits at most
    ``S − i + δ_i`` micro-batches (``δ_i`` its W lag, :func:`w_lags`): ``F(j)`` waits for the end of its
    last call of micro-batch ``j − (S − i + δ_i)``, the call just before ``F(j)`` in its order, so the
    limit is the order's own and is reached once ``m ≥ S − i + δ_i``."""
    n = len(pipeline.stages)
    caps: list[int | None] = []
    if pipeline.split and schedule.weight_calls_in_order:
        return [n - s + (lag or 0) for s, lag in enumerate(w_lags(pipeline, schedule))]
    for s, st in enumerate(pipeline.stages):
        fits = None
        if schedule.zero_bubble is not None and st.activation_bytes and math.isfinite(st.memory_bound):
            fits = st.most_held(in_flight_cap(schedule, s, n))
            if fits is not None and fits < 1:
                raise InvalidParameterError(
                    "schedule", f"{schedule.name!r} cannot run this plan: {st.label} holds node memory "
                                f"{st.static_memory:.6g} and {st.activation_bytes:.6g} bytes of activations per "
                                f"micro-batch, over its memory bound {st.memory_bound:.6g}")
        caps.append(in_flight_cap(schedule, s, n, fits))
    return caps


def _check_memory(tasks_per_microbatch: int, microbatches: int, stages: int, memory_limit: float,
                  flush: bool = False) -> None:
    """Refuse a run whose tasks would need more than ``memory_limit`` bytes; a schedule that runs to a steady
    state needs about ``4 · stages`` micro-batches to reach it, one that ends in a flush (``flush``) runs the
    micro-batches of its iteration, however many."""
    need = tasks_per_microbatch * microbatches * BYTES_PER_TASK
    if need > memory_limit:
        fits = int(memory_limit // (tasks_per_microbatch * BYTES_PER_TASK))
        room = (f"at most {fits:,} micro-batches fit" if fits > 1 else "only 1 micro-batch fits" if fits
                else "not one micro-batch fits")
        raise LimitExceededError(
            f"{counted(microbatches, 'micro-batch')} of {tasks_per_microbatch} tasks{' each' * (microbatches > 1)} "
            f"would take about {need / 2**30:.3g} GiB, over the limit memory_limit = {memory_limit / 2**30:.3g} GiB; "
            f"{room}{'' if flush else f' (a steady state needs about {4 * stages})'}, or raise memory_limit",
            "memory_limit")


def check_task_count(tasks: int, microbatches: int) -> None:
    """Refuse a batch whose ``tasks`` (a forward and a backward per micro-batch and stage) would take
    more memory to simulate than the pipeline simulator's limit."""
    if tasks * BYTES_PER_TASK > DEFAULT_MEMORY_LIMIT:
        fits = microbatches * DEFAULT_MEMORY_LIMIT // (tasks * BYTES_PER_TASK)
        room = (f"at most {counted(fits, 'micro-batch', 'micro-batches')} fit{'s' if fits == 1 else ''}" if fits
                else "not even 1 micro-batch fits")
        raise LimitExceededError(f"{microbatches:,} micro-batches make {tasks:,} tasks, about "
                                 f"{tasks * BYTES_PER_TASK / 2**30:.3g} GiB to simulate, over the simulator's "
                                 f"fixed limit of {DEFAULT_MEMORY_LIMIT / 2**30:.3g} GiB; {room}", "microbatches")
