"""Plain-text summary of a simulated batch of a data- and tensor-parallel pipeline plan."""

from __future__ import annotations

from placement.report.table import cell, format_table, printable
from placement.simulation.parallel import ParallelSimulation
from placement.wording import counted


def format_parallel_simulation(result: ParallelSimulation, title: str = "") -> str:
    """The schedule, time per batch and per sample, and per stage its degrees, task lengths, micro-batches
    held and peak memory per device."""
    lines = []
    if title:
        lines.append(f"instance        {printable(title)}")
    chunks = f", {result.chunks} chunks per rank" if result.chunks > 1 else ""
    lines.append(f"schedule        {result.schedule}{chunks}, {counted(result.microbatches, 'micro-batch')} per batch, "
                 f"forward share {result.forward_share:.6g}, all-reduce {result.allreduce}")
    lines.append(f"time per batch  {result.time_per_batch:.9g}  (fill, drain and all-reduce included)")
    lines.append(f"time per sample {result.time_per_sample:.9g}  (largest busy time of a replica / micro-batches: "
                 "no fill or drain)")
    lines.append(f"tasks           {result.tasks}")
    lines.append("")
    rows = [["stage", "rank", "chunk", "d", "t", "type", "F", "B", "in flight", "peak memory/device"]]
    for s in result.stages:
        rows.append([str(s.index), str(s.rank), str(s.chunk), str(s.d), str(s.t), s.device_type or "-",
                     cell(s.forward), cell(s.backward), str(s.peak_in_flight), cell(result.peak_memory(s.index))])
    lines.extend(format_table(rows, left={5}))
    return "\n".join(lines) + "\n"
