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

from placement.simulation.simulator import SimulationResult, holding, in_flight_profile
from placement.whole_file import replacing_about

KIND_NAMES = {"F": "forward", "B": "backward", "W": "weight gradient", "recv": "receive", "send": "send"}
PROCESS_ID = 1


def trace_events(result: SimulationResult, title: str = "", unit_us: float = 1000.0) -> dict[str, Any]:
    """The trace document of ``result`` (a dict ready for ``json.dump``)."""
    return {"traceEvents": list(_events(result, title, unit_us)), "displayTimeUnit": "ms",
            "otherData": _other_data(result, unit_us)}


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
    for k, event in enumerate(_events(result, title, unit_us)):
        fh.write((", " if k else "") + json.dumps(event, allow_nan=False))
    fh.write('], "displayTimeUnit": "ms", "otherData": ')
    fh.write(json.dumps(_other_data(result, unit_us), allow_nan=False))
    fh.write("}\n")


def _events(result: SimulationResult, title: str, unit_us: float) -> Iterator[dict[str, Any]]:
    """The trace's events: the tracks' names and order, every task, and the in-flight counters."""
    yield {"name": "process_name", "ph": "M", "pid": PROCESS_ID, "tid": 0,
           "args": {"name": title or f"pipeline ({result.schedule})"}}
    has_link = [s.link_time is not None for s in result.stages]
    for st in result.stages:
        tid = _track(st.index, False)
        yield {"name": "thread_name", "ph": "M", "pid": PROCESS_ID, "tid": tid,
               "args": {"name": f"stage {st.index}: device {st.position} ({st.type})"}}
        yield {"name": "thread_sort_index", "ph": "M", "pid": PROCESS_ID, "tid": tid, "args": {"sort_index": tid}}
        if has_link[st.index]:
            yield {"name": "thread_name", "ph": "M", "pid": PROCESS_ID, "tid": tid + 1,
                   "args": {"name": f"stage {st.index}: link"}}
            yield {"name": "thread_sort_index", "ph": "M", "pid": PROCESS_ID, "tid": tid + 1,
                   "args": {"sort_index": tid + 1}}
    for task in result.tasks.busy():
        kind, j, begin, finish = task.kind, task.microbatch, task.start, task.end
        yield {"name": f"{kind} {j}", "cat": KIND_NAMES[kind], "ph": "X", "pid": PROCESS_ID,
               "tid": _track(task.stage, task.on_link), "ts": begin * unit_us, "dur": (finish - begin) * unit_us,
               "args": {"micro-batch": j, "kind": KIND_NAMES[kind], "start": begin, "end": finish}}
    yield from _in_flight_counters(result, unit_us)


def _other_data(result: SimulationResult, unit_us: float) -> dict[str, Any]:
    return {"schedule": result.schedule, "communication": result.comm, "micro-batches": result.microbatches,
            "time per sample": result.time_per_sample, "iteration time": result.iteration_time,
            "max load": result.max_load, "time unit (us)": unit_us}


def _track(stage: int, on_link: bool) -> int:
    return 2 * stage + 1 + (1 if on_link else 0)


def _in_flight_counters(result: SimulationResult, unit_us: float) -> Iterator[dict[str, Any]]:
    """Per stage a counter event at every change of the number of micro-batches it holds."""
    for st in result.stages:
        times, counts = in_flight_profile(*holding(result.tasks, st.index, result.microbatches))
        name = f"stage {st.index} in flight"
        for t, c in zip(times.tolist(), counts.tolist()):
            yield {"name": name, "ph": "C", "pid": PROCESS_ID, "ts": t * unit_us, "args": {"micro-batches": c}}
