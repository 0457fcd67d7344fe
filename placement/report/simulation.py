"""Plain-text summary of a simulated run: the headline figures and a table of the stages."""

from __future__ import annotations

from placement.simulation.schedules import SCHEDULES
from placement.simulation.simulator import SimulationResult
from placement.report.table import cell, format_table, printable
from placement.wording import counted


def figure(value: float) -> str:
    """A time of the summary: nine significant digits (a simulated average carries rounding noise past them),
    or a whole number in full, which nine digits would round (1000000002 read 1e+09 beside a max load that
    is exactly that)."""
    if float(value).is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:.9g}"


def format_simulation(result: SimulationResult, title: str = "") -> str:
    """The schedule, time per sample or iteration time against the load model, bubbles, and per stage
    the task lengths, utilisation, micro-batches in flight and peak memory."""
    lines = []
    if title:
        lines.append(f"instance        {printable(title)}")
    lines.append(f"schedule        {result.schedule} ({SCHEDULES[result.schedule].summary}), "
                 f"{counted(result.microbatches, 'micro-batch')}, communication {result.comm}")
    if result.w_times:
        lines.append(f"weight grads    the instance's weight-gradient times ({result.w_fraction:.3g} of the backward "
                     "compute) run as W tasks")
    elif result.w_fraction is not None:
        lines.append(f"weight grads    {result.w_fraction:g} of each backward's compute runs as W tasks")
    if result.iteration_time is not None:
        per_sample = figure(result.time_per_sample)
        lines.append(f"iteration       {figure(result.iteration_time)}  (time per sample {per_sample})")
    elif result.time_per_sample is not None and result.steady_window is not None:
        a, b = result.steady_window
        how = "steady state" if result.period is not None else "average, no steady state"
        lines.append(f"time per sample {figure(result.time_per_sample)}  ({how}, micro-batches {a}..{b})")
    else:
        lines.append("time per sample -  (no steady state measured)")
    model = result.model_time_per_sample
    if model is not None and result.time_per_sample is not None:
        what = "max load" if result.comm == "inline" else "max over stages of max(compute, comm)"
        if model > 0:
            lines.append(f"load model      {figure(model)}  ({what}); simulated / model = "
                         f"{result.time_per_sample / model:.9f}")
        else:  # every time and cost is 0: no ratio to speak of
            lines.append(f"load model      {figure(model)}  ({what})")
    lines.append(f"max load        {figure(result.max_load)}  "
                 + ("(split plan: its calls' loads)" if result.split_plan else "(verified plan)"))
    lines.append(f"makespan        {figure(result.makespan)}")
    lines.append(f"bubble fraction {result.bubble_fraction:.2%}")
    lines.append("")

    kinds = [k for k in ("F", "B", "W") if any(k in s.task_times for s in result.stages)]
    link = any(s.link_time is not None for s in result.stages)
    header = ["stage", "device", "type", *kinds] + (["link"] if link else []) + \
             ["busy", "util"] + (["link util"] if link else []) + ["in flight", "peak memory/bound"] + \
             (["W inputs"] if result.split_plan else [])
    rows = [header]
    for s in result.stages:
        row = [str(s.index), str(s.position), s.type, *(cell(s.task_times.get(k)) for k in kinds)]
        if link:
            row.append(cell(s.link_time))
        row += [cell(s.busy), f"{s.utilisation:.1%}"]
        if link:
            row.append("-" if s.link_utilisation is None else f"{s.link_utilisation:.1%}")
        row += [str(s.peak_in_flight), f"{cell(s.peak_memory)}/{cell(s.memory_bound)}"]
        if result.split_plan:
            row.append(cell(s.peak_w_inputs))
        rows.append(row)
    lines.extend(format_table(rows, left={2}))
    if result.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines) + "\n"
