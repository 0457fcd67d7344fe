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
import math
from pathlib import Path
from typing import IO, Any, Iterator

from placement.simulation.simulator import SimulationResult, holding, in_flight_profile
from placement.whole_file import replacing_about

KIND_NAMES = {"F": "forward", "B": "backward", "W": "weight gradient", "recv": "receive", "send": "send"}
PROCESS_ID = 1


def trace_events(result: SimulationResult, title: str = "", unit_us: float = 1000.0) -> dict[str, Any]:
    """The trace document of ``result`` (a dict ready for ``json.dump``)."""
    return {"traceEvents": [json.loads(text) for text in _event_texts(result, title, unit_us)],
            "displayTimeUnit": "ms", "otherData": _other_data(result, unit_us)}


def write_trace(result: SimulationResult, path: str | Path, title: str = "", unit_us: float = 1000.0,
                parameter: str = "path") -> None:
    """Write the trace of ``result`` to ``path`` (the text ``json.dump`` gives :func:`trace_events`, written
    event by event, so that a long run's trace takes no more memory than its tasks);
    :class:`InvalidParameterError` about ``parameter`` if it cannot be written."""
    with replacing_about(path, parameter) as fh:   # whole or not at all: a run stopped leaves no half document
        dump_trace(result, fh, title, unit_us)


def dump_trace(result: SimulationResult, fh: IO[str], title: str = "", unit_us: float = 1000.0) -> None:
    """Write the trace document of ``result`` into the open text file ``fh``, event by event."""
    fh.write('{"traceEvents": [')
    for k, text in enumerate(_event_texts(result, title, unit_us)):
        fh.write((", " if k else "") + text)
    fh.write('], "displayTimeUnit": "ms", "otherData": ')
    fh.write(json.dumps(_other_data(result, unit_us), allow_nan=False))
    fh.write("}\n")


def _event_texts(result: SimulationResult, title: str, unit_us: float) -> Iterator[str]:
    """The trace's events as ``json.dumps`` writes them: the tracks' names and order, every task, and the
    in-flight counters. The many task and counter events, whose names and fields are fixed words, numbers
    and kinds, are formatted directly (``repr`` of a float is the text ``json.dumps`` gives it): a long run's
    trace is written in less than half the time that encoding each event's dict takes."""
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
    tasks = result.tasks
    for stage, kind, j, begin, finish, on_link in zip(tasks.stage.tolist(), tasks.kind.tolist(),
                                                      tasks.microbatch.tolist(), tasks.start.tolist(),
                                                      tasks.end.tolist(), tasks.on_link.tolist()):
        if not finish > begin:   # what TaskTable.busy leaves out
            continue
        category = KIND_NAMES[kind]
        yield (f'{{"name": "{kind} {j}", "cat": "{category}", "ph": "X", "pid": {PROCESS_ID}, '
               f'"tid": {_track(stage, on_link)}, "ts": {_number(begin * unit_us)}, '
               f'"dur": {_number((finish - begin) * unit_us)}, "args": {{"micro-batch": {j}, '
               f'"kind": "{category}", "start": {_number(begin)}, "end": {_number(finish)}}}}}')
    for st in result.stages:   # per stage a counter event at every change of the micro-batches it holds
        times, counts = in_flight_profile(*holding(result.tasks, st.index, result.microbatches))
        for t, c in zip(times.tolist(), counts.tolist()):
            yield (f'{{"name": "stage {st.index} in flight", "ph": "C", "pid": {PROCESS_ID}, '
                   f'"ts": {_number(t * unit_us)}, "args": {{"micro-batches": {c}}}}}')


def _number(x: float) -> str:
    """A float as ``json.dumps`` writes it, refusing what it refuses with ``allow_nan=False``."""
    if not math.isfinite(x):
        raise ValueError(f"Out of range float values are not JSON compliant: {x!r}")
    return float.__repr__(x)


def _other_data(result: SimulationResult, unit_us: float) -> dict[str, Any]:
    return {"schedule": result.schedule, "communication": result.comm, "micro-batches": result.microbatches,
            "time per sample": result.time_per_sample, "iteration time": result.iteration_time,
            "max load": result.max_load, "time unit (us)": unit_us}


def _track(stage: int, on_link: bool) -> int:
    return 2 * stage + 1 + (1 if on_link else 0)
