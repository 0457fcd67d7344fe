"""A simulated run as a Chrome trace (the JSON trace-event format that Perfetto and chrome://tracing open).

One track per stage (its tasks) and, in the ``link`` mode, one per stage link
(its receives and sends); every task is a complete event (``"ph": "X"``) named
by kind and micro-batch (``F 3``), with the micro-batch, kind and times in its
``args``. A counter track per stage shows the micro-batches it holds in flight.
Trace timestamps are microseconds: an instance time unit is taken as
``unit_us`` microseconds (1000 by default: the published instances give times in
milliseconds). Tasks of length zero are left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any, Iterator

import numpy as np

from placement.parameters import keywords_checked, number
from placement.simulation.simulator import SimulationResult, holding, in_flight_profile, kept_tasks
from placement.whole_file import replacing_about

KIND_NAMES = {"F": "forward", "B": "backward", "W": "weight gradient", "recv": "receive", "send": "send"}
PROCESS_ID = 1


@keywords_checked
def trace_events(result: SimulationResult, title: str = "", unit_us: float = 1000.0) -> dict[str, Any]:
    """The trace document of ``result`` (a dict ready for ``json.dump``); ``result`` must hold its tasks
    (:meth:`~placement.simulation.simulator.SimulationResult.kept_tasks`), and ``unit_us``, the microseconds of
    one time unit of the instance, be a finite number > 0 (:class:`InvalidParameterError` otherwise)."""
    kept_tasks(result, "trace it")
    unit_us = number("unit_us", unit_us, positive=True)
    return {"traceEvents": [json.loads(text) for text in _event_texts(result, title, unit_us)],
            "displayTimeUnit": "ms", "otherData": _other_data(result, unit_us)}


@keywords_checked
def write_trace(result: SimulationResult, path: str | Path, title: str = "", unit_us: float = 1000.0,
                parameter: str = "path") -> None:
    """Write the trace of ``result`` to ``path`` (the text ``json.dump`` gives :func:`trace_events`, written
    event by event, so that a long run's trace takes no more memory than its tasks);
    :class:`InvalidParameterError` about ``parameter`` if it cannot be written."""
    with replacing_about(path, parameter) as fh:   # whole or not at all: a run stopped leaves no half document
        dump_trace(result, fh, title, unit_us)


def dump_trace(result: SimulationResult, fh: IO[str], title: str = "", unit_us: float = 1000.0) -> None:
    """Write the trace document of ``result`` into the open text file ``fh``, event by event."""
    kept_tasks(result, "trace it")
    unit_us = number("unit_us", unit_us, positive=True)
    fh.write('{"traceEvents": [')
    for k, text in enumerate(_event_texts(result, title, unit_us)):
        fh.write((", " if k else "") + text)
    fh.write('], "displayTimeUnit": "ms", "otherData": ')
    fh.write(json.dumps(_other_data(result, unit_us), allow_nan=False))
    fh.write("}\n")


def _event_texts(result: SimulationResult, title: str, unit_us: float) -> Iterator[str]:
    """The trace's events as ``json.dumps`` writes them: the tracks' names and order, every task, and the
    in-flight counters. The many task and counter events, whose names and fields are fixed words, numbers
    and kinds, are formatted directly from the task table's columns (``repr`` of a float is the text
    ``json.dumps`` gives it; the times are the same products and differences in numpy's float64): a long run's
    trace is written in a third of the time that encoding each event's dict takes."""
    def metadata(name: str, tid: int, args: dict[str, Any]) -> str:
        return json.dumps({"name": name, "ph": "M", "pid": PROCESS_ID, "tid": tid, "args": args}, allow_nan=False)

    yield metadata("process_name", 0, {"name": title or f"pipeline ({result.schedule})"})
    for st in result.stages:
        tid = _track(st.index, False)
        yield metadata("thread_name", tid, {"name": f"stage {st.index}: device {st.position} ({st.type})"})
        yield metadata("thread_sort_index", tid, {"sort_index": tid})
        if st.link_time is not None:
            yield metadata("thread_name", tid + 1, {"name": f"stage {st.index}: link"})
            yield metadata("thread_sort_index", tid + 1, {"sort_index": tid + 1})
    tasks = result.kept_tasks("trace it")
    took = tasks.end > tasks.start   # what TaskTable.busy keeps
    begin, finish = tasks.start[took], tasks.end[took]
    with np.errstate(over="ignore", invalid="ignore"):   # refused below, as json.dumps refuses them
        ts, dur = begin * unit_us, (finish - begin) * unit_us
    _refuse_non_finite(begin, finish, ts, dur)
    tids = _track(tasks.stage[took], tasks.on_link[took])
    for kind, j, tid, at, length, a, b in zip(tasks.kind[took].tolist(), tasks.microbatch[took].tolist(),
                                             tids.tolist(), ts.tolist(), dur.tolist(), begin.tolist(), finish.tolist()):
        category = KIND_NAMES[kind]
        yield (f'{{"name": "{kind} {j}", "cat": "{category}", "ph": "X", "pid": {PROCESS_ID}, "tid": {tid}, '
               f'"ts": {at!r}, "dur": {length!r}, "args": {{"micro-batch": {j}, "kind": "{category}", '
               f'"start": {a!r}, "end": {b!r}}}}}')
    for st in result.stages:   # per stage a counter event at every change of the micro-batches it holds
        times, counts = in_flight_profile(*holding(result.tasks, st.index, result.microbatches))
        with np.errstate(over="ignore", invalid="ignore"):
            at_us = times * unit_us
        _refuse_non_finite(at_us)
        for t, c in zip(at_us.tolist(), counts.tolist()):
            yield (f'{{"name": "stage {st.index} in flight", "ph": "C", "pid": {PROCESS_ID}, "ts": {t!r}, '
                   f'"args": {{"micro-batches": {c}}}}}')


def _refuse_non_finite(*columns: np.ndarray) -> None:
    """Refuse what ``json.dumps`` refuses with ``allow_nan=False``: a time that is not finite."""
    for column in columns:
        if not np.isfinite(column).all():
            raise ValueError("Out of range float values are not JSON compliant: "
                             f"{float(column[~np.isfinite(column)][0])!r}")


def _other_data(result: SimulationResult, unit_us: float) -> dict[str, Any]:
    return {"schedule": result.schedule, "communication": result.comm, "micro-batches": result.microbatches,
            "time per sample": result.time_per_sample, "iteration time": result.iteration_time,
            "max load": result.max_load, "time unit (us)": unit_us}


def _track(stage: Any, on_link: Any) -> Any:
    """The track (thread id) of a stage's tasks, or of its link's; numbers or numpy columns of them."""
    return 2 * stage + 1 + on_link
