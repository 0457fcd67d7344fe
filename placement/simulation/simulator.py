"""Run a plan through a pipeline schedule and measure it (DESIGN.md §5).

Figures reported
----------------
* ``time_per_sample`` — steady-state schedules (``stream``, ``1f1b-async``): with
  ``c[j]`` the time micro-batch ``j`` finishes its last task, the window
  ``a = ⌊m/2⌋ .. b = m − 1 − ⌊m/8⌋`` leaves warm-up and cool-down out; there the
  run is periodic, ``c[j + p] = c[j] + p·λ``, and ``λ`` is the time per sample
  (:func:`steady_rate`). Without a period in the window the average slope is
  reported with a note (the run was too short to settle). Flush schedules:
  ``iteration_time / m``.
* ``iteration_time`` — flush schedules: the time the last task of the one
  iteration ends (the makespan).
* per stage: ``busy``, the time its compute resource runs the tasks of the micro-batches
  the measured span holds: for steady-state schedules the window's ``b − a`` micro-batches
  (``b`` brought down to a whole number of periods, so that the span ``[c[a], c[b]]`` is
  ``(b − a)·λ``) times the stage's work per micro-batch
  (:func:`work_per_microbatch`), for flush schedules every task of the iteration;
  ``utilisation = busy / span`` (in a steady state, the stage's work per micro-batch over
  ``λ``, however near the drain the window ends or whatever the phase of a longer period);
  a window without a period (not settled) counts the time each resource ran within it instead;
  and the same for its link in the ``link`` mode. ``bubble_fraction`` is
  ``1 − Σ busy / (S × span)`` over the stages' compute resources.
* per stage ``peak_in_flight``: the most micro-batches held at once, a
  micro-batch being held from the start of its ``F`` to the end of its last task
  on the stage (``B``, or ``W`` when the backward is split; ``F`` for inference),
  counted in the order the stage runs its tasks (:func:`in_flight_peak`); one
  released at the moment another starts does not count twice.
  ``peak_memory = static memory + peak_in_flight × activation bytes``
  (unknown when the instance gives no tensor sizes); for a split plan the bytes per micro-batch
  also hold one buffer per tensor its moved W tasks read (:func:`split_memory`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from placement.errors import InvalidParameterError, LimitExceededError
from placement.parameters import integer
from placement.problem.instance import Instance
from placement.plan import Plan
from placement.simulation.engine import Deadlock, compiles_first, compiling, execute
from placement.simulation.engine_simpy import execute_simpy
from placement.simulation.pipeline import (BACKWARD, FORWARD, WEIGHT, Pipeline, build_pipeline,
                                          invalid_plan_error)
from placement.problem.split import DEFAULT_W_SHARE
from placement.simulation.program import (DEFAULT_MEMORY_LIMIT, INLINE, Program, TaskLabel, build_program,
                                          build_unit, stream_window, weight_work)
from placement.simulation.schedules import SCHEDULES, Schedule, get_schedule
from placement.wording import counted

ENGINES = ("heap", "simpy")

#: the tasks from which a run through the event engine says what it is doing (4·10^6 tasks ran 40 s, silent)
TOLD_TASKS = 10 ** 6
MAX_PERIOD = 64            # longest steady-state period (in micro-batches) looked for
PERIOD_TOLERANCE = 1e-9    # relative: completion gaps this close count as equal
SLOWER = 1e-9              # relative: a time per sample this far above the load model's is noted
SETTLED_TOLERANCE = 1e-9   # relative: a time per sample this far below the load model is no steady state

#: the end of a refusal of a run's task table past ``memory_limit`` where ``keep_tasks=False`` would stream it
FIGURES_ONLY = "keep the figures only with keep_tasks=False (no task table), in memory independent of the micro-batches"

#: the most micro-batches a run takes: counts and times built from them stay exact in floating point
#: and far from the 64-bit integers of the streamed evaluation (2^62 micro-batches overflowed them)
MAX_MICROBATCHES = 2 ** 53


class TaskRecord(NamedTuple):
    """One task as it ran: stage, kind (F, B, W, recv, send), micro-batch, start, end, on the link?"""

    stage: int
    kind: str
    microbatch: int
    start: float
    end: float
    on_link: bool


@dataclass(frozen=True, eq=False)
class TaskTable:
    """Every task of a run, column by column (numpy arrays of one length); iterates as :class:`TaskRecord`."""

    stage: np.ndarray        # int
    kind: np.ndarray         # str: F, B, W, recv, send
    microbatch: np.ndarray   # int
    start: np.ndarray        # float
    end: np.ndarray          # float
    on_link: np.ndarray      # bool

    @classmethod
    def empty(cls) -> TaskTable:
        """The table of no task (what a run asked for its figures only returns)."""
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype="<U4"), np.zeros(0, dtype=np.int64),
                   np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))

    def __len__(self) -> int:
        return len(self.start)

    def __iter__(self) -> Iterator[TaskRecord]:
        for row in zip(self.stage.tolist(), self.kind.tolist(), self.microbatch.tolist(), self.start.tolist(),
                       self.end.tolist(), self.on_link.tolist()):
            yield TaskRecord(*row)

    def busy(self) -> Iterator[TaskRecord]:
        """The tasks that took time (``end > start``), in table order."""
        return (task for task in self if task.end > task.start)


@dataclass(frozen=True)
class StageResult:
    """What one stage did during the run."""

    index: int                         # the stage's place in the pipeline (0: the first stage)
    position: int                      # its device's place in the plan (the plan file's order)
    type: str
    task_times: dict[str, float]       # per micro-batch: kind -> length on the compute resource
    link_time: float | None            # per micro-batch time on its link (link mode), else None
    busy: float
    utilisation: float
    link_busy: float | None
    link_utilisation: float | None
    peak_in_flight: int
    static_memory: float
    activation_bytes: float | None
    peak_memory: float | None
    memory_bound: float
    #: split-backward plans: the most bytes reserved at once for the inputs of W parts whose layer is
    #: elsewhere (one buffer per tensor and micro-batch in flight); None for joint plans
    peak_w_inputs: float | None = None
    w_inputs_per_microbatch: float | None = None   # those bytes for one micro-batch

    @property
    def bubble_fraction(self) -> float:
        return 1.0 - self.utilisation


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """The measured run of a plan under a schedule."""

    schedule: str
    comm: str
    microbatches: int
    w_fraction: float | None
    stages: tuple[StageResult, ...]
    tasks: TaskTable
    makespan: float
    time_per_sample: float | None
    iteration_time: float | None
    steady_window: tuple[int, int] | None      # micro-batches a, b of the slope (steady-state schedules)
    period: int | None                         # micro-batches per period of the steady state, if found
    span: tuple[float, float]                  # the time interval utilisation is measured over
    bubble_fraction: float
    max_load: float                            # the evaluator's max load of the plan (split plans too)
    model_time_per_sample: float | None        # the load model's steady-state time per sample (see _model)
    notes: tuple[str, ...]
    split_plan: bool = False                   # a split-backward plan (its loads derived by the simulator)
    w_times: bool = False                      # W tasks took the instance's weight-gradient times

    def kept_tasks(self, use: str) -> TaskTable:
        """The task table, which ``use`` (``"trace it"``) needs; :class:`InvalidParameterError` about ``result``
        where the run kept none (every run has tasks: it was simulated with ``keep_tasks=False``)."""
        if not len(self.tasks):
            raise InvalidParameterError("result", f"holds no task table (it was simulated with keep_tasks=False); "
                                                  f"simulate with keep_tasks=True to {use}")
        return self.tasks

    def to_json(self) -> dict[str, Any]:
        """The run's figures as strict JSON: the headline numbers and one entry per stage (the task
        table is left out; a trace file holds it)."""
        from placement.jsonfile import strict_json

        return strict_json({
            "format": "placement-simulation/1", "schedule": self.schedule, "comm": self.comm,
            "microbatches": self.microbatches, "w_fraction": self.w_fraction, "makespan": self.makespan,
            "time_per_sample": self.time_per_sample, "iteration_time": self.iteration_time,
            "steady_window": self.steady_window, "period": self.period, "span": self.span,
            "bubble_fraction": self.bubble_fraction, "max_load": self.max_load,
            "model_time_per_sample": self.model_time_per_sample, "notes": self.notes, "split_plan": self.split_plan,
            "w_times": self.w_times,
            "stages": [asdict(stage) for stage in self.stages],
        })


def kept_tasks(result: Any, use: str) -> TaskTable:
    """The task table of ``result``, a :class:`SimulationResult` that kept it, which ``use`` (``"trace it"``)
    needs (:meth:`SimulationResult.kept_tasks`); :class:`InvalidParameterError` about ``result`` where it is no
    such run: a Piper instance's run, which keeps no task table, or another value."""
    if not isinstance(result, SimulationResult):
        import sys

        parallel = sys.modules.get("placement.simulation.parallel")   # loaded wherever such a run was made
        piper = parallel is not None and isinstance(result, parallel.ParallelSimulation)
        raise InvalidParameterError("result", "must be a SimulationResult (placement.simulate's run of a plan of one "
                                              f"device per stage), not {type(result).__name__}"
                                    + (": a Piper instance's run (data- and tensor-parallel stages) keeps no task "
                                       "table" if piper else ""))
    return result.kept_tasks(use)


def _split_verdict(problem: Instance, plan: Plan, w_placement: str, inter_layer: bool | None,
                   w_share: float) -> tuple[Any, Any]:
    """The split model ``plan`` is checked under, and the evaluator's verdict: ``inter_layer=None`` takes the
    variant without B on the previous stage where the plan is valid there (every B task on its layer's
    stage: no no-cycle rule, as ``verify`` checks a plan that records no variant), else the one with it. A plan
    valid under neither has the verdict of the variant without it where it runs every B task on its layer's
    stage (the no-cycle rule of the other does not hold it), as ``verify`` gives it."""
    from placement.problem.split import SplitModel
    from placement.verification.split import evaluate_split

    if inter_layer is not None:
        model = SplitModel(w_placement, inter_layer, w_share)
        return model, evaluate_split(problem, plan, model)
    home = SplitModel(w_placement, False, w_share)
    verdict = evaluate_split(problem, plan, home)
    layer = {v: d for d, dev in enumerate(plan.devices) for v in dev.nodes}
    if verdict.valid or all(d == layer.get(u) for u, d in verdict.b_device.items()):
        return home, verdict
    model = SplitModel(w_placement, True, w_share)
    return model, evaluate_split(problem, plan, model)


def simulate(problem: Instance, plan: Plan, schedule: str = "stream", microbatches: int = 64,
             comm: str = INLINE, w_fraction: float | None = None, engine: str = "heap",
             memory_limit: float = DEFAULT_MEMORY_LIMIT, keep_tasks: bool = True,
             progress: Callable[[str], None] | None = None, w_placement: str = "any",
             inter_layer: bool | None = None, calls: int | None = None) -> SimulationResult:
    """Run ``plan`` (a valid ``stages`` plan of ``problem``) under ``schedule`` for ``microbatches``.

    ``comm`` is ``inline`` (communication inside each call, as in the load model)
    or ``link`` (separate link resources); ``w_fraction`` the weight-gradient
    share of the backward compute (the schedules that split the backward; default: the
    weight-gradient times the instance gives, else 0.5, :mod:`.pipeline`); ``engine``
    ``heap`` (the built-in core) or ``simpy`` (same model, run by SimPy). A run whose tasks would
    take more than ``memory_limit`` bytes (default 2 GiB) is refused with
    :class:`placement.errors.LimitExceededError` before it starts (naming ``keep_tasks=False`` where that
    runs it). ``keep_tasks=False`` asks for the
    figures only (the task table comes back empty): a steady-state schedule with communication
    inline then runs in memory independent of the micro-batches (:mod:`.streaming`); other runs, and
    those the streamed evaluation cannot hold, go through the event engine and drop the table.
    ``progress``, if given, receives a line every few million tasks of a long streamed run.
    A split-backward plan must be valid under the variant ``w_placement`` / ``inter_layer`` of the
    split model (by default the most permissive that takes it: W anywhere, and B also on the previous
    stage where the plan runs one there, whose B calls must then wait in no cycle), as
    :func:`placement.verification.split.evaluate_split` checks it. A plan whose devices list calls (one
    solved for latency) runs each device's calls as one stage, and is refused where one sample could not run
    them (calls that wait on each other in a cycle, or more per accelerator than ``calls``, the limit it was
    solved with), as ``verify`` finds it invalid.
    """
    from placement.simulation.split import build_split_pipeline, is_split_plan

    if is_split_plan(plan):
        # a split plan fixes its W calls: w_fraction is the W share of backward nodes without their own
        model, verdict = _split_verdict(problem, plan, w_placement, inter_layer,
                                        DEFAULT_W_SHARE if w_fraction is None else w_fraction)
        if not verdict.valid:
            raise invalid_plan_error(verdict.evaluation.violations)
        # the max load is the evaluator's, as for joint plans (its exactly rounded sums, not the stages' running ones)
        pipeline = replace(build_split_pipeline(problem, plan, model), max_load=verdict.evaluation.max_load)
        return _split_share(simulate_pipeline(pipeline, schedule, microbatches, comm, None, engine, memory_limit,
                                              keep_tasks, progress), problem, pipeline, model.w_share)
    pipeline = build_pipeline(problem, plan)
    several = [d for d, dev in enumerate(plan.devices) if len(dev.calls) > 1]
    if several or calls is not None:   # calls one sample could not run make no valid plan, whatever is simulated
        from placement.verification.check import call_order_violations

        unrunnable = call_order_violations(problem, plan, calls)
        if unrunnable:
            raise invalid_plan_error(unrunnable)
    result = simulate_pipeline(pipeline, schedule, microbatches, comm, w_fraction, engine, memory_limit, keep_tasks,
                               progress)
    if several:   # a latency plan's calls: the schedules run a stage's nodes as one call per micro-batch
        listed = ", ".join(map(str, several))
        result = replace(result, notes=result.notes + (
            (f"devices {listed} run the nodes of their" if len(several) > 1 else f"device {listed} runs the nodes of its")
            + " calls as one stage, one call per micro-batch: the plan's calls order a single sample (objective "
              "latency), which a pipeline schedule does not follow",))
    return result


def _split_share(result: SimulationResult, problem: Instance, pipeline: Pipeline, share: float) -> SimulationResult:
    """``result`` of a split plan with the W share its W parts took: ``share`` of every backward node's time,
    or, where the instance gives weight-gradient times, the share of the backward compute they come to
    (:func:`placement.problem.split.split_times`), with a note where some backward nodes give none."""
    backward = [n for n in problem.nodes if n.backward]
    given = sum(n.weight_times is not None for n in backward)
    if not given:
        return replace(result, w_fraction=share)
    b_work = sum(st.compute[BACKWARD] for st in pipeline.stages)
    w_work = sum(st.compute[WEIGHT] for st in pipeline.stages)
    notes = result.notes
    if given < len(backward):
        notes += (f"backward nodes that give no weight-gradient time split their time {share:g} to W",)
    return replace(result, w_fraction=w_work / (b_work + w_work) if b_work + w_work > 0 else share, w_times=True,
                   notes=notes)


def simulate_pipeline(pipeline: Pipeline, schedule: str = "stream", microbatches: int = 64,
                      comm: str = INLINE, w_fraction: float | None = None, engine: str = "heap",
                      memory_limit: float = DEFAULT_MEMORY_LIMIT, keep_tasks: bool = True,
                      progress: Callable[[str], None] | None = None) -> SimulationResult:
    """:func:`simulate` on a pipeline already built by :func:`build_pipeline`."""
    microbatches = integer("microbatches", microbatches, smallest=1, largest=MAX_MICROBATCHES)  # type: ignore[assignment]
    if engine not in ENGINES:
        raise InvalidParameterError("engine", f"must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    sched = get_schedule(schedule)
    _check_fit(pipeline, sched, w_fraction)
    splits = sched.split_backward and not pipeline.split   # W tasks this run makes from the backward
    fraction = w_fraction if splits else None
    # a run whose figures keep_tasks=False takes from the streamed evaluation, in memory independent of the run
    streams = (engine == "heap" and comm == INLINE and not sched.flush and not sched.split_backward
               and not pipeline.split)
    if streams and not keep_tasks:
        result = _streamed(pipeline, sched, microbatches, progress, memory_limit)
        if result is not None:
            return _with_model_note(result, comm)

    what = f"({microbatches:,} micro-batches over {counted(len(pipeline.stages), 'stage')}, {sched.name})"

    def building(tasks: int) -> None:   # millions of tasks take seconds to build
        if progress is not None and tasks >= TOLD_TASKS:
            progress(f"building {counted(tasks, 'task')} {what}")

    try:
        program = build_program(pipeline, sched, microbatches, comm, fraction, memory_limit, building)
    except LimitExceededError as exc:   # the task table asked for is what is too large: the figures alone fit
        if not streams or not keep_tasks:
            raise
        raise LimitExceededError(f"{exc}, or {FIGURES_ONLY}", exc.parameter) from None
    if progress is not None and len(program.graph) >= TOLD_TASKS:   # millions of tasks run for tens of seconds
        progress(f"running {counted(len(program.graph), 'task')} {what} through the {engine} engine")
    if progress is not None and engine == "heap" and compiles_first(program.graph):
        progress(compiling())
    dispatched: list[int] = []
    try:
        if engine == "heap":
            start, end = execute(program.graph, dispatched)
        else:
            start, end = execute_simpy(program.graph, dispatched)
    except Deadlock as exc:
        label, j = program.label(exc.waiting[0])
        raise InvalidParameterError("schedule", f"{sched.name!r} deadlocks on this plan: {len(exc.waiting)} tasks "
                                                f"can never start, first {label.kind} of micro-batch {j} on "
                                                f"{pipeline.stages[label.stage].label}") from None
    result = _measure(pipeline, sched, program, comm, fraction, np.asarray(start), np.asarray(end),
                      dispatch_rank(dispatched))
    if splits:   # the W share this run used: as given, or what the stages' weight times come to
        times = w_fraction is None and any(st.weight is not None for st in pipeline.stages)
        notes = result.notes
        if times and any(st.weight is None and st.compute[BACKWARD] > 0 for st in pipeline.stages):
            notes += (f"stages whose backward nodes do not all give a weight-gradient time split their backward "
                      f"compute {DEFAULT_W_SHARE:g} to W",)
        result = replace(result, w_fraction=w_fraction if w_fraction is not None else weight_share(pipeline),
                         w_times=times, notes=notes)
    result = _with_model_note(result, comm)
    # figures only: a run the streamed evaluation could not hold came through the event engine
    return result if keep_tasks else replace(result, tasks=TaskTable.empty())


def _with_model_note(result: SimulationResult, comm: str) -> SimulationResult:
    """``result`` with a note where its steady state, communication inline, is slower than the load
    model says every valid plan runs (docs/simulator.md, Limits: where that does not hold)."""
    model, measured = result.model_time_per_sample, result.time_per_sample
    if comm != INLINE or model is None or measured is None or measured <= model * (1 + SLOWER):
        return result
    return replace(result, notes=result.notes + (
        f"the run is slower than the load model ({measured:.9g} against {model:.9g} per sample): stages wait "
        "on each other within a micro-batch, as where a backward task reads the forward output of a later "
        "stage (docs/simulator.md, Limits)",))


def weight_share(pipeline: Pipeline) -> float:
    """The share of the backward compute a joint plan's W tasks take without a ``w_fraction``
    (:func:`placement.simulation.program.weight_work`), over all stages."""
    backward = sum(st.compute[BACKWARD] for st in pipeline.stages)
    if backward <= 0:
        return DEFAULT_W_SHARE
    return sum(weight_work(st, None) for st in pipeline.stages) / backward


def _check_fit(pipeline: Pipeline, schedule: Schedule, w_fraction: float | None) -> None:
    if schedule.training and not pipeline.training:
        raise InvalidParameterError("schedule", f"{schedule.name!r} trains, but the instance has no backward "
                                                "nodes: use schedule='stream'")
    if not schedule.training and pipeline.training:
        raise InvalidParameterError("schedule", f"{schedule.name!r} runs inference graphs only, but the instance has "
                                                "backward nodes: use schedule='1f1b-async' for a steady-state "
                                                "training pipeline")
    if w_fraction is not None and not schedule.split_backward:
        splitting = ", ".join(repr(s.name) for s in SCHEDULES.values() if s.split_backward)
        raise InvalidParameterError("w_fraction", f"applies to the schedules that split the backward ({splitting}) "
                                                  f"only, not {schedule.name!r}")


def _measure(pipeline: Pipeline, schedule: Schedule, program: Program, comm: str, w_fraction: float | None,
             start: np.ndarray, end: np.ndarray, rank: np.ndarray) -> SimulationResult:
    m = program.microbatches
    labels = program.labels
    size = len(labels)
    n = len(pipeline.stages)
    tasks = TaskTable(
        stage=np.tile(np.array([lab.stage for lab in labels], dtype=np.int64), m),
        kind=np.tile(np.array([lab.kind for lab in labels]), m),
        microbatch=np.repeat(np.arange(m, dtype=np.int64), size),
        start=start, end=end,
        on_link=np.tile(np.array([lab.on_link for lab in labels], dtype=bool), m))
    makespan = float(end.max()) if len(end) else 0.0
    completion = end.reshape(m, size).max(axis=1)

    def rate(a: int, b: int) -> tuple[float, int | None]:
        return steady_rate(completion, a, b)

    window, span, iteration, per_sample, period, notes, counted = _headline(
        schedule, m, n, makespan, rate, lambda j: float(completion[j]), _model(pipeline, schedule, comm))
    if counted is None:   # no period: the time each resource ran within the span, as it ran
        # a task inside the span counts its length, not end - start: at a time of 1e9 a task of 1e-6 loses a
        # tenth of its length to rounding in the difference
        inside = (start >= span[0]) & (end <= span[1])
        overlap = np.where(inside, np.asarray(program.graph.duration, dtype=float),
                           np.clip(np.minimum(end, span[1]) - np.maximum(start, span[0]), 0.0, None))
        compute = ~tasks.on_link
        busy = np.bincount(tasks.stage[compute], weights=overlap[compute], minlength=n)
        link_busy = np.bincount(tasks.stage[~compute], weights=overlap[~compute], minlength=n)
    else:
        work, link_work = work_per_microbatch(labels, program.graph.duration[:size], n)
        busy, link_busy = counted * work, counted * link_work
    peaks = [in_flight_peak(tasks, s, m, rank) for s in range(n)]
    held = split_memory(pipeline, peaks) if pipeline.split else None
    return _result(pipeline, schedule, comm, w_fraction, m, program.task_times, program.link_resource, tasks,
                   makespan, window, span, iteration, per_sample, period, busy, link_busy, peaks, notes, held)


def _streamed(pipeline: Pipeline, schedule: Schedule, m: int, progress: Callable[[str], None] | None = None,
              memory_limit: float = DEFAULT_MEMORY_LIMIT) -> SimulationResult | None:
    """The figures of a steady-state run with communication inline, in memory independent of ``m``
    (:mod:`placement.simulation.streaming`); ``None`` where that evaluation cannot run it. Its tables grow
    with the square of the stages: past ``memory_limit`` bytes the run is refused
    (:class:`LimitExceededError`)."""
    from placement.simulation.streaming import HISTORY, OK, stream_bytes, stream_figures

    unit = build_unit(pipeline, schedule, INLINE, 0.0)
    graph = unit.graph
    n = len(pipeline.stages)
    size = len(graph)
    preds: list[list[int]] = [[] for _ in range(size)]
    for t, successors in enumerate(graph.successors):
        for w in successors:
            preds[w].append(t)
    pred_ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum([len(p) for p in preds], out=pred_ptr[1:])
    pred_idx = np.array([t for p in preds for t in p], dtype=np.int64)
    first = np.array([unit.main[(s, FORWARD)] for s in range(n)], dtype=np.int64)
    last = np.array([unit.main[(s, BACKWARD if schedule.training else FORWARD)] for s in range(n)], dtype=np.int64)
    window = 0 if schedule.training else stream_window(n, INLINE)
    need = stream_bytes(n, window, size, m)
    if need > memory_limit:
        raise LimitExceededError(
            f"the run of {n:,} stages keeps {size:,} tasks of each of the micro-batches a steady state holds: "
            f"{need / 2**30:.3g} GiB, over the limit memory_limit = {memory_limit / 2**30:.3g} GiB; plan fewer "
            "stages or raise memory_limit", "memory_limit")
    sources = np.array([c == 0 for c in graph.predecessor_count], dtype=np.bool_)
    sinks = np.array([t for t in range(size) if not graph.successors[t]], dtype=np.int64)
    a, b = m // 2, m - 1 - m // 8
    p_max = min(MAX_PERIOD, (b - a) // 2) if b > a else 0
    run_args = (m, n, schedule.training, np.array(graph.duration, dtype=np.float64), pred_ptr, pred_idx, first,
                last, window, sources, sinks, a, b, p_max, progress)
    status, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peaks, history, _ = stream_figures(*run_args)
    if status != OK:
        return None

    def rate(a: int, b: int) -> tuple[float, int | None]:
        for p in range(1, p_max + 1):   # as steady_rate, from the gaps' least, largest and summed values
            if gap_max[p] - gap_min[p] <= PERIOD_TOLERANCE * max(abs(gap_max[p]), 1e-300):
                return float(gap_sum[p]) / (b - a + 1 - p) / p, p
        return (float(c_b) - float(c_a)) / (b - a), None

    def completion_at(j: int) -> float:   # the history holds c[b − HISTORY + 1 .. b]: a window ends there
        return float(c_a) if j == a else float(history[j % HISTORY])

    window, span, iteration, per_sample, period, notes, counted = _headline(
        schedule, m, n, float(makespan), rate, completion_at, _model(pipeline, schedule, INLINE))
    if counted is None:   # no period: a second pass measures the time each stage ran within the span
        status, *_, busy = stream_figures(*run_args, span=span)
        if status != OK:
            return None
    else:
        busy = counted * work_per_microbatch(unit.labels, graph.duration, n)[0]
    return _result(pipeline, schedule, INLINE, None, m, unit.task_times, unit.link_resource, TaskTable.empty(),
                   float(makespan), window, span, iteration, per_sample, period, busy, np.zeros(n),
                   [int(p) for p in peaks], notes)


def _headline(schedule: Schedule, m: int, n: int, makespan: float, rate: Callable[[int, int], tuple],
              completion_at: Callable[[int], float], floor: float | None) -> tuple:
    """The steady window, measured span, iteration time, time per sample, period, notes and the number of
    micro-batches whose work the span holds (``None`` for a window without a period, whose span holds parts
    of the tasks of more micro-batches than it completes: its busy time is measured as the tasks ran);
    ``rate(a, b)`` is :func:`steady_rate` over micro-batches
    ``a..b`` and ``completion_at(j)`` is ``c[j]`` (asked for ``j = a`` and ``b − MAX_PERIOD ≤ j ≤ b``).

    A window in which a period ``p`` is found is ended at a whole number of periods (``b − a`` a multiple
    of ``p``), so that its span is ``(b − a) · λ`` and holds the work of ``b − a`` micro-batches
    however the tasks of a period lie within it.

    ``floor`` is the load model's time per sample (:func:`_model`): every micro-batch keeps the
    busiest resource that long, so no steady state is faster. A period found faster than that is a
    regime the run has not left yet (a stage that finishes each micro-batch last, at its own rhythm,
    while a busier stage falls behind slowly): it is reported as no period, with a note."""
    notes: list[str] = []
    period: int | None = None
    if schedule.flush:
        return None, (0.0, makespan), makespan, makespan / m, None, notes, m
    a, b = m // 2, m - 1 - m // 8
    # a window of no length measures no rate, where micro-batches take time (times all 0 take none)
    no_length = b > a and completion_at(b) <= completion_at(a) and makespan > 0 and (floor is None or floor > 0)
    if b > a and not no_length:
        per_sample, period = rate(a, b)
        c_a, c_b = completion_at(a), completion_at(b)
        if floor is not None and per_sample < floor * (1 - SETTLED_TOLERANCE):
            rhythm, period = per_sample, None
            per_sample = (c_b - c_a) / (b - a)   # the average slope, which a period's rate is only where it fits
            notes.append(f"not settled within micro-batches {a}..{b}: they complete every {rhythm:.9g}, "
                         f"faster than the busiest stage works per micro-batch ({floor:.9g}); the time per "
                         "sample is their average slope; run more micro-batches")
        elif period is None:
            notes.append(f"no periodic steady state within micro-batches {a}..{b}: the time per sample is "
                         "their average slope; run more micro-batches")
        else:
            b -= (b - a) % period
            c_b = completion_at(b)
        window, span, counted = (a, b), (c_a, c_b), (None if period is None else b - a)
    else:
        window, span, per_sample, period, counted = None, (0.0, makespan), None, None, m
        notes.append(f"micro-batches {a}..{b} complete at one time ({completion_at(a):.9g}): no time per sample "
                     "can be measured from them; run more micro-batches" if no_length else
                     "a steady state needs at least 3 micro-batches")
    if m < 4 * n:
        notes.append(f"the run may be too short for a steady state: use at least 4 x {n} stages "
                     f"= {4 * n} micro-batches")
    return window, span, None, per_sample, period, notes, counted


def work_per_microbatch(labels: list[TaskLabel], durations: Sequence[float],
                        n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per stage, the time the tasks of one micro-batch (``labels`` and ``durations`` of a micro-batch's tasks)
    take on its compute resource and on its link: every micro-batch runs the same tasks, so a span holding
    the work of ``k`` micro-batches keeps the stage busy ``k`` times that."""
    stage = np.array([label.stage for label in labels], dtype=np.int64)
    on_link = np.array([label.on_link for label in labels], dtype=bool)
    duration = np.asarray(durations, dtype=float)
    return (np.bincount(stage[~on_link], weights=duration[~on_link], minlength=n),
            np.bincount(stage[on_link], weights=duration[on_link], minlength=n))


def _share(part: float, whole: float) -> float:
    """``part / whole`` within [0, 1] (0 when ``whole`` is 0): busy time summed task by task can exceed the
    span it lies in by a rounding error (utilisation 1.0000000000000002, bubble fraction -2e-16)."""
    return min(max(part / whole, 0.0), 1.0) if whole > 0 else 0.0


def _result(pipeline: Pipeline, schedule: Schedule, comm: str, w_fraction: float | None, m: int,
            task_times: list[dict[str, float]], link_resource: list[int | None], tasks: TaskTable, makespan: float,
            window: tuple[int, int] | None, span: tuple[float, float], iteration: float | None,
            per_sample: float | None, period: int | None, busy: np.ndarray, link_busy: np.ndarray,
            peaks: list[int], notes: list[str],
            held: list[tuple[float, float, float]] | None = None) -> SimulationResult:
    """The :class:`SimulationResult` of a run from its measured figures."""
    n = len(pipeline.stages)
    width = span[1] - span[0]
    stage_results = []
    for s, st in enumerate(pipeline.stages):
        in_flight = peaks[s]
        peak_memory = (None if st.activation_bytes is None
                       else st.static_memory + in_flight * st.activation_bytes)
        w_inputs = w_one = None
        if held is not None:
            peak_memory, w_inputs, w_one = st.static_memory + held[s][0], held[s][1], held[s][2]
        link = link_resource[s] is not None
        stage_results.append(StageResult(
            index=s, position=st.position, type=st.type, task_times=dict(task_times[s]),
            link_time=st.comm if link else None,
            busy=float(busy[s]), utilisation=_share(float(busy[s]), width),
            link_busy=float(link_busy[s]) if link else None,
            link_utilisation=_share(float(link_busy[s]), width) if link else None,
            peak_in_flight=in_flight, static_memory=st.static_memory, activation_bytes=st.activation_bytes,
            peak_memory=peak_memory, memory_bound=st.memory_bound, peak_w_inputs=w_inputs,
            w_inputs_per_microbatch=w_one))
        buffers = w_input_sizes(pipeline, s) if held is not None else ()
        if peak_memory is not None and not st.holds(in_flight, buffers):
            notes.append(f"{st.label}: peak memory {peak_memory:.6g} exceeds its bound {st.memory_bound:.6g}")
    if any(st.activation_bytes is None for st in pipeline.stages):
        notes.append("some tensor sizes are missing from the instance: activation memory is unknown there")
    if pipeline.unsized:
        notes.append("some tensor sizes are missing from the instance: a split plan's memory counts them as 0 bytes, "
                     "as its planner does")

    bubble = 1.0 - _share(float(np.sum(busy)), n * width) if width > 0 else 0.0
    return SimulationResult(
        schedule=schedule.name, comm=comm, microbatches=m, w_fraction=w_fraction,
        stages=tuple(stage_results), tasks=tasks, makespan=makespan, time_per_sample=per_sample,
        iteration_time=iteration, steady_window=window, period=period, span=span, bubble_fraction=bubble,
        max_load=pipeline.max_load, model_time_per_sample=_model(pipeline, schedule, comm),
        notes=tuple(notes), split_plan=pipeline.split)


def steady_rate(completion: np.ndarray, a: int, b: int) -> tuple[float, int | None]:
    """Time per sample in the steady state seen in micro-batches ``a..b``, and its period.

    A deterministic pipeline settles into a periodic regime: ``c[j + p] = c[j] + p·λ``
    for some period ``p``. The smallest ``p ≤ MAX_PERIOD`` (and ``≤ (b − a)/2``) for
    which every gap ``c[j + p] − c[j]`` in the window agrees gives ``λ`` exactly; with
    none, the average slope ``(c[b] − c[a]) / (b − a)`` is returned with period ``None``.
    """
    window = completion[a:b + 1]
    for p in range(1, min(MAX_PERIOD, (b - a) // 2) + 1):
        gaps = window[p:] - window[:-p]
        if gaps.max() - gaps.min() <= PERIOD_TOLERANCE * max(abs(gaps.max()), 1e-300):
            return float(gaps.mean()) / p, p
    return float(window[-1] - window[0]) / (b - a), None


def dispatch_rank(dispatched: list[int]) -> np.ndarray:
    """Per task id, its place in the order the engine started the tasks (``dispatched``, every task once)."""
    rank = np.empty(len(dispatched), dtype=np.int64)
    rank[np.asarray(dispatched, dtype=np.int64)] = np.arange(len(dispatched))
    return rank


def in_flight_peak(tasks: TaskTable, stage: int, microbatches: int, rank: np.ndarray) -> int:
    """The most micro-batches ``stage`` holds at once, counted in the order the stage runs its tasks
    (``rank``: per task, its place in the order the engine started them): a micro-batch is taken by its
    first ``F`` there and released by its last task there.

    On a stage whose tasks take time this is the count over time (held from the start of the ``F`` to
    the end of the last task; one released at the moment another is taken does not count twice).
    Where tasks take no time the order still tells what the stage holds between them: a stage of
    zero-time tasks under 1F1B holds the micro-batches its warm-up forwards took (counted over time,
    each was held for no time, and the count was 0).
    """
    mine = np.flatnonzero(~tasks.on_link & (tasks.stage == stage))
    if not len(mine):
        return 0
    # the order the stage ran them (it runs one task at a time): the order the engine started them in
    # (``rank``), which at one start puts tasks of no time in the order it chose (a W of no time that an F
    # waited for, under an admission limit, before that F)
    run = mine[np.argsort(rank[mine], kind="stable")]
    position = np.arange(len(run))
    batches = tasks.microbatch[run]
    forward = tasks.kind[run] == FORWARD
    taken = np.full(microbatches, np.iinfo(np.int64).max)
    released = np.full(microbatches, -1)
    np.minimum.at(taken, batches[forward], position[forward])
    np.maximum.at(released, batches, position)
    held = taken < np.iinfo(np.int64).max
    count = int(held.sum())
    places = np.concatenate([taken[held], released[held]])
    deltas = np.concatenate([np.ones(count, dtype=np.int64), -np.ones(count, dtype=np.int64)])
    # a take before the release at one place (a stage whose only task is the F takes, then releases)
    counts = np.cumsum(deltas[np.lexsort((-deltas, places))])
    return int(max(counts.max(initial=0), 0))


def holding(tasks: TaskTable, stage: int, microbatches: int) -> tuple[np.ndarray, np.ndarray]:
    """Per micro-batch, when ``stage`` takes and releases it: the start of its ``F`` there, the end of its
    last compute task there."""
    mine = ~tasks.on_link & (tasks.stage == stage)
    batches = tasks.microbatch[mine]
    forward = tasks.kind[mine] == FORWARD
    held_from = np.full(microbatches, np.inf)
    held_to = np.full(microbatches, -np.inf)
    np.minimum.at(held_from, batches[forward], tasks.start[mine][forward])
    np.maximum.at(held_to, batches, tasks.end[mine])
    return held_from, held_to


def split_memory(pipeline: Pipeline, peaks: list[int]) -> list[tuple[float, float, float]]:
    """Per stage of a split plan, ``(most bytes reserved at once for micro-batches in flight, most of them for
    W inputs, W-input bytes of one micro-batch)``; ``peaks`` are the stages' most micro-batches in flight
    (:func:`in_flight_peak`), each holding the same buffers.

    A stage reserves one micro-batch's buffers when it starts the micro-batch's ``F`` and frees them at the end
    of its last call of the micro-batch (its ``W`` call): the activations (its forward outputs) and one buffer
    per tensor its W call reads for a part whose layer is elsewhere (received into it by the call that reads
    it first; one copy per tensor; the stage's own forward outputs are activations already).
    """
    out = []
    for s, st in enumerate(pipeline.stages):
        kept = 0.0
        for size in w_input_sizes(pipeline, s):
            kept += size
        footprint = (st.activation_bytes or 0.0) + kept
        out.append((peaks[s] * footprint, peaks[s] * kept, kept))
    return out


def w_input_sizes(pipeline: Pipeline, s: int) -> list[float]:
    """The bytes of the buffers stage ``s`` of a split plan keeps per micro-batch for its W inputs
    (:func:`split_memory`): one per tensor its W call reads for a part whose layer is elsewhere, less its own
    forward outputs."""
    seen: set[int] = set()
    sizes = []
    for w in pipeline.w_inputs[s]:
        if w.node in seen or (w.stage == s and w.kind == FORWARD):
            continue
        seen.add(w.node)
        sizes.append(w.size)
    return sizes


def in_flight_profile(held_from: np.ndarray, held_to: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The moments the number of held micro-batches changes and that number after every change at the moment,
    for a trace's counter track (the peak is :func:`in_flight_peak`'s).

    A micro-batch is held on ``[held_from, held_to)``: one released at the moment
    another is taken does not count twice, and one held for no time not at all.
    """
    times = np.concatenate([held_to, held_from])
    ones = np.ones(len(held_to), dtype=np.int64)
    deltas = np.concatenate([-ones, ones])
    order = np.lexsort((deltas, times))     # at one moment, releases before new holds
    times, counts = times[order], np.cumsum(deltas[order])
    last = np.append(times[1:] != times[:-1], True)
    return times[last], counts[last]


def _model(pipeline: Pipeline, schedule: Schedule, comm: str) -> float | None:
    """The load model's steady-state time per sample for this mode (steady-state schedules only).

    ``inline``: the max load. ``link``: the overlapped variant, the max over stages
    of ``max(compute, communication)``. A stream reaches it; ``1f1b-async`` keeps
    at most ``S − i`` micro-batches in flight on stage ``i``, which reaches it in
    the ``inline`` mode but may not when separate transfers lengthen the round trip.
    """
    if schedule.flush:
        return None
    if comm == INLINE:
        return pipeline.max_load
    return max(max(sum(st.compute.values()), st.comm) for st in pipeline.stages)
