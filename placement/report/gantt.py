"""A simulated run as a Gantt chart (PNG, SVG or PDF): stages as rows, tasks coloured by kind, micro-batch numbers.

Rows top to bottom follow the pipeline; in the ``link`` mode each stage's link
gets a row under it. A task's micro-batch number is written inside its bar when
the bar is wide enough to hold it. Needs matplotlib (the ``plot`` extra); it is
drawn with the non-interactive Agg canvas, so no display is needed and no
global backend is changed.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from placement.errors import InvalidParameterError, SolverUnavailableError
from placement.parameters import keywords_checked
from placement.report.literal_text import literal
from placement.simulation.simulator import SimulationResult, kept_tasks
from placement.whole_file import replacing_about, text_path
from placement.wording import counted

COLOURS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868", "recv": "#8172b3", "send": "#937860"}
LABELS = {"F": "forward", "B": "backward", "W": "weight gradient", "recv": "receive", "send": "send"}
MAX_LABELS = 3000      # micro-batch numbers drawn at most (beyond that the chart is too dense to read them)
WIDTH_IN = 14.0
ROW_IN = 0.42
DPI = 120
LEFT, RIGHT = 0.15, 0.90   # the axes' share of the figure width
CHART_FORMATS = ("png", "svg", "pdf")   # a chart file's suffix names its format; no suffix means PNG


def chart_format(path: str | Path, parameter: str = "path") -> str:
    """The format a chart at ``path`` is written in, from its suffix; :class:`InvalidParameterError` about
    ``parameter`` for a suffix that names no chart format (``gantt.txt`` would otherwise hold a PNG under a
    text file's name), as for a ``path`` that is no file path (:func:`placement.whole_file.text_path`)."""
    suffix = Path(text_path(path, parameter)).suffix.lower().lstrip(".")
    if suffix and suffix not in CHART_FORMATS:
        raise InvalidParameterError(parameter, f"must name a .png, .svg or .pdf file, not .{suffix}: {path}")
    return suffix or "png"


def matplotlib_modules() -> tuple[Any, Any, Any]:
    """matplotlib's figure, Agg backend and patches modules; :class:`SolverUnavailableError` when it is missing."""
    try:
        figure = importlib.import_module("matplotlib.figure")
        agg = importlib.import_module("matplotlib.backends.backend_agg")
        patches = importlib.import_module("matplotlib.patches")
    except ImportError:
        raise SolverUnavailableError("the Gantt chart needs matplotlib: pip install 'placement[plot]'") from None
    return figure, agg, patches


@keywords_checked
def write_gantt(result: SimulationResult, path: str | Path, name: str = "", parameter: str = "path") -> None:
    """Draw the run of ``result`` and save it at ``path``, in the format its suffix names (PNG without one);
    ``name`` (the instance) heads the title; names are drawn as written (:mod:`.literal_text`).
    :class:`InvalidParameterError` about ``parameter`` where ``path`` cannot be written."""
    file_format = chart_format(path, parameter=parameter)
    figure = draw_gantt(result, name)
    with replacing_about(path, parameter, binary=True) as fh:   # whole or not at all: a full disk leaves no half chart
        figure.savefig(fh, format=file_format)


@keywords_checked
def draw_gantt(result: SimulationResult, name: str = "") -> Any:
    """The Gantt chart of ``result`` as a matplotlib figure (on the Agg canvas), ``name`` heading its title;
    ``result`` must hold its tasks (:meth:`~placement.simulation.simulator.SimulationResult.kept_tasks`)."""
    tasks = kept_tasks(result, "draw it")
    figure_module, agg, patches = matplotlib_modules()
    rows: list[tuple[int, bool, str]] = []
    for st in result.stages:
        rows.append((st.index, False, literal(f"stage {st.index}  (device {st.position}, {st.type})")))
        if st.link_time is not None:
            rows.append((st.index, True, f"stage {st.index} link"))
    row_of = {(stage, on_link): k for k, (stage, on_link, _) in enumerate(rows)}

    fig = figure_module.Figure(figsize=(WIDTH_IN, 1.6 + ROW_IN * len(rows)), dpi=DPI)
    agg.FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    horizon = result.makespan if result.makespan > 0 else 1.0
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for task in tasks.busy():
        row = row_of[(task.stage, task.on_link)]
        bars.setdefault((row, task.kind), []).append((task.start, task.end - task.start))

    for (row, kind), spans in bars.items():
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=COLOURS[kind], edgecolor="white", linewidth=0.4)

    # micro-batch numbers where a bar is wide enough: about 7 px per digit at this size
    px_per_unit = WIDTH_IN * DPI * (RIGHT - LEFT) / horizon
    drawn = 0
    for task in tasks:
        if drawn >= MAX_LABELS:
            break
        label = str(task.microbatch)
        if (task.end - task.start) * px_per_unit < 7 * len(label) + 4:
            continue
        ax.text((task.start + task.end) / 2, row_of[(task.stage, task.on_link)], label, ha="center",
                va="center", fontsize=7, color="white")
        drawn += 1

    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, horizon)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for _, _, label in rows], fontsize=8)
    ax.set_xlabel("time")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    kinds = [k for k in COLOURS if any(kind == k for _, kind in bars)]
    ax.legend(handles=[patches.Patch(color=COLOURS[k], label=LABELS[k]) for k in kinds],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(literal(f"{name}  |  {headline(result)}" if name else headline(result)), fontsize=10, loc="left")
    fig.subplots_adjust(left=LEFT, right=RIGHT, top=1 - 0.55 / fig.get_figheight(),
                        bottom=0.6 / fig.get_figheight())
    return fig


def headline(result: SimulationResult) -> str:
    """Schedule, micro-batches, communication mode, iteration or time per sample, bubble fraction."""
    microbatches = counted(result.microbatches, "micro-batch")
    parts = [f"{result.schedule}, {microbatches}, communication {result.comm}"]
    if result.iteration_time is not None:
        parts.append(f"iteration {result.iteration_time:.6g}")
    if result.time_per_sample is not None:
        parts.append(f"time per sample {result.time_per_sample:.6g}")
    parts.append(f"bubble {result.bubble_fraction:.1%}")
    return "  |  ".join(parts)
