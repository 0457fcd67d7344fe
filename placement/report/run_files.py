"""A simulated run's trace and Gantt chart written together: both files whole, or, where either cannot be
drawn or written, neither of them replaced (the chart is drawn before anything is written)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from placement.report.gantt import chart_format, draw_gantt
from placement.report.trace import dump_trace
from placement.simulation.simulator import SimulationResult
from placement.whole_file import replacing_about


def write_run_files(result: SimulationResult, trace: str | Path | None = None, gantt: str | Path | None = None,
                    name: str = "", trace_title: str = "") -> None:
    """Write the trace of ``result`` to ``trace`` and its chart (``name`` heading it) to ``gantt``, each where
    given; :class:`InvalidParameterError` about ``trace`` or ``gantt``, the file that cannot be written, in
    which case neither file is replaced (short of the last rename failing once the first is done)."""
    file_format = chart_format(gantt, parameter="gantt") if gantt else ""
    figure = draw_gantt(result, name) if gantt else None
    with contextlib.ExitStack() as outputs:
        if trace:
            fh = outputs.enter_context(replacing_about(trace, "trace"))
            dump_trace(result, fh, trace_title)
        if gantt:
            chart = outputs.enter_context(replacing_about(gantt, "gantt", binary=True))
            figure.savefig(chart, format=file_format)

