"""Plots of a co-design sweep's records (:mod:`placement.codesign.sweep`), as PNG files.

* ``throughput-area-power.png`` — the optimal throughput of every configuration against the
  area (left) and the TDP (right) of its largest chip, one colour per model, one marker per
  chip count;
* ``pareto.png`` — per model, throughput against TDP with the Pareto front (no other
  configuration of the model has at least the throughput at no more power) drawn as a step line;
* ``designs-per-stage.png`` — per model, the designs of its configuration with the most chips
  (among those, the one with the most distinct designs, then the largest budget): tensor MACs
  (cores × width × depth) and vector lanes of each stage's chip, the buffer in MB written above.

Needs matplotlib (the ``plot`` extra); it is imported only when a plot is drawn. Names are drawn as
written (:mod:`placement.report.literal_text`). Records whose
status is ``error`` are left out.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any, Sequence

from placement.codesign.grid import SMALLEST_BUFFER_MB
from placement.errors import InvalidParameterError, SolverUnavailableError
from placement.report.literal_text import literal

DPI = 120
MARKERS = "os^Dvp*hX<>"


def matplotlib_modules() -> tuple[Any, Any]:
    """matplotlib's figure and Agg backend modules; :class:`SolverUnavailableError` when it is missing."""
    try:
        figure = importlib.import_module("matplotlib.figure")
        agg = importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError:
        raise SolverUnavailableError("the sweep plots need matplotlib: pip install 'placement[plot]'") from None
    return figure, agg


def _figure(width: float, height: float) -> Any:
    figure_module, agg = matplotlib_modules()
    fig = figure_module.Figure(figsize=(width, height), dpi=DPI)
    agg.FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> None:
    """Save ``fig`` at ``path`` in the format its suffix names (matplotlib's default, PNG, without one),
    whole or not at all: a full disk leaves no half chart."""
    from placement.whole_file import replacing

    with replacing(path, binary=True) as fh:
        fig.savefig(fh, format=Path(path).suffix.lstrip(".").lower() or None)


def solved(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with a throughput (status not ``error``)."""
    found = [r for r in records if r.get("status") != "error" and r.get("throughput") is not None]
    for record in found:
        _check_plottable(record)
    return found


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _design_value(key: str, value: Any) -> bool:
    """Whether ``value`` is one a grid holds for the template parameter ``key`` (:mod:`.grid`): a whole number
    from 1 to 2^20, ``buffer_mb`` a number from 2^-20 to 2^20. A sweep's designs are the grid's; a larger
    count (2^64 tensor cores) overflowed the plot's integer axes."""
    if not _finite(value) or value > 2**20:
        return False
    return value >= SMALLEST_BUFFER_MB if key == "buffer_mb" else (value >= 1 and float(value).is_integer())


def _check_plottable(record: dict[str, Any]) -> None:
    """:class:`InvalidParameterError` (parameter ``out``) naming the first field of a solved record the
    plots read that is not what a sweep writes."""
    config, designs = record.get("config"), record.get("designs")
    checks = [("config", isinstance(config, dict)), ("designs", isinstance(designs, list))]
    if isinstance(config, dict):
        checks += [("config.model", isinstance(config.get("model"), str))]
        checks += [(f"config.{key}", _finite(config.get(key))) for key in ("chips", "area_mm2", "power_w")]
    checks += [(key, _finite(record.get(key))) for key in ("throughput", "area_mm2", "tdp_w")]
    for k, design in enumerate(designs if isinstance(designs, list) else []):
        ok = isinstance(design, dict) and isinstance(design.get("label"), str) and all(
            _design_value(key, design.get(key)) for key in ("tensor_cores", "array_width", "array_depth",
                                                            "vector_cores", "vector_lanes", "buffer_mb"))
        checks.append((f"designs[{k}]", ok))
    bad = next((name for name, ok in checks if not ok), None)
    if bad is not None:
        raise InvalidParameterError("out", f"record {record.get('id')!r} cannot be plotted: its field {bad} is not "
                                           "what a sweep writes")


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points ``(cost, value)`` that no other point dominates (cost ≤ and value ≥, one strictly),
    by increasing cost; among equal points one is kept."""
    front: list[tuple[float, float]] = []
    for cost, value in sorted(set(points), key=lambda p: (p[0], -p[1])):
        if not front or value > front[-1][1]:
            front.append((cost, value))
    return front


def _models(records: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({r["config"]["model"] for r in records})


def _label(model: str) -> str:
    """The model's name as the plots draw it (its file's stem), written as it is."""
    return literal(Path(model).stem if model.endswith(".json") else model)


def plot_throughput(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Throughput against the largest chip's area and TDP, one colour per model, one marker per k."""
    fig = _figure(12, 5)
    axes = fig.subplots(1, 2, sharey=True)
    chips = sorted({r["config"]["chips"] for r in records})
    for colour, model in enumerate(_models(records)):
        for marker, k in zip(MARKERS, chips):
            mine = [r for r in records if r["config"]["model"] == model and r["config"]["chips"] == k]
            if not mine:
                continue
            label = f"{_label(model)}, k={k}"
            for ax, key in zip(axes, ("area_mm2", "tdp_w")):
                ax.scatter([r[key] for r in mine], [r["throughput"] for r in mine], color=f"C{colour % 10}",
                           marker=marker, s=24, alpha=0.8, label=label if key == "area_mm2" else None)
    axes[0].set_xlabel("area of the largest chip (mm²)")
    axes[1].set_xlabel("TDP of the largest chip (W)")
    axes[0].set_ylabel("throughput (batches/s, proven optimum over the grid)")
    for ax in axes:
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    fig.legend(loc="upper center", ncol=min(6, max(1, len(_models(records)) * len(chips))), fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    _save(fig, path)
    return Path(path)


def plot_pareto(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Per model: throughput against TDP, every configuration, and the Pareto front as a step line."""
    models = _models(records)
    fig = _figure(5 * min(len(models), 3), 4 * ((len(models) + 2) // 3))
    axes = fig.subplots((len(models) + 2) // 3, min(len(models), 3), squeeze=False).ravel()
    for ax, model in zip(axes, models):
        points = [(r["tdp_w"], r["throughput"]) for r in records if r["config"]["model"] == model]
        ax.scatter(*zip(*points), s=14, color="0.6", label="configurations")
        front = pareto_front(points)
        ax.step(*zip(*front), where="post", color="C3", label="Pareto front")
        ax.scatter(*zip(*front), s=22, color="C3")
        ax.set_title(_label(model))
        ax.set_xlabel("TDP of the largest chip (W)")
        ax.set_ylabel("throughput (batches/s)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[len(models):]:
        ax.set_visible(False)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def macs(design: dict[str, Any]) -> int:
    """The MACs of a design's tensor cores: cores × array width × array depth."""
    return int(design["tensor_cores"]) * int(design["array_width"]) * int(design["array_depth"])


def plot_designs(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Per model, the designs per stage of its configuration with the most chips (then the most distinct
    designs, then the largest budget)."""
    models = _models(records)
    fig = _figure(5 * min(len(models), 3), 4 * ((len(models) + 2) // 3))
    axes = fig.subplots((len(models) + 2) // 3, min(len(models), 3), squeeze=False).ravel()
    for ax, model in zip(axes, models):
        mine = [r for r in records if r["config"]["model"] == model]
        best = max(mine, key=lambda r: (r["config"]["chips"], len({d["label"] for d in r["designs"]}),
                                        r["config"]["area_mm2"], r["config"]["power_w"], r["throughput"]))
        designs = best["designs"]
        stages = list(range(len(designs)))
        ax.bar([s - 0.2 for s in stages], [macs(d) for d in designs], width=0.4, color="C0", label="tensor MACs")
        ax2 = ax.twinx()
        ax2.bar([s + 0.2 for s in stages], [d["vector_cores"] * d["vector_lanes"] for d in designs], width=0.4,
                color="C1", label="vector lanes")
        for s, d in zip(stages, designs):
            ax.annotate(f"{d['buffer_mb']:g} MB", (s, macs(d)), ha="center", va="bottom", fontsize=7)
        cfg = best["config"]
        ax.set_title(f"{_label(model)}: k={cfg['chips']}, {cfg['area_mm2']:g} mm², {cfg['power_w']:g} W", fontsize=9)
        ax.set_xticks(stages)
        ax.set_xlabel("pipeline stage")
        ax.set_ylabel("tensor MACs")
        ax2.set_ylabel("vector lanes")
        handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
        ax2.legend(handles=handles, fontsize=7, loc="lower right", framealpha=0.9)
    for ax in axes[len(models):]:
        ax.set_visible(False)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def write_plots(records: Sequence[dict[str, Any]], folder: str | Path) -> list[Path]:
    """The three plots of the solved ``records`` in ``folder`` (created); their paths. No solved
    record: no plot."""
    records = solved(records)
    if not records:
        return []
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [plot_throughput(records, folder / "throughput-area-power.png"),
            plot_pareto(records, folder / "pareto.png"),
            plot_designs(records, folder / "designs-per-stage.png")]
