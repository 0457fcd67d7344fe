"""Text rendering of a :class:`placement.parallel.ParallelResult`: status, value, and one row per stage."""

from __future__ import annotations

from placement.io.piper import PiperInstance
from placement.parallel.devices import describe
from placement.parallel.result import ParallelResult
from placement.report.table import cell, format_table, percent, printable
from placement.wording import counted


def node_ranges(ids) -> str:
    """Node ids as ranges of consecutive ids: ``0-4,7``."""
    parts, start = [], None
    for k, v in enumerate(ids):
        if start is None:
            start = v
        if k + 1 == len(ids) or ids[k + 1] != v + 1:
            parts.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ",".join(parts)


def format_parallel_result(instance: PiperInstance, result: ParallelResult) -> str:
    """The answer as text: a header, the stages (nodes, d, t, how many nodes run a TMPC other than their
    first listed — the JSON names them —, time per sample, memory, micro-batches in flight) and the Megatron-style hand-off."""
    lines = [f"instance {printable(instance.name) or '-'}: {counted(len(instance.nodes), 'node')}, "
             f"{describe(result.devices, result.memory)}, "
             f"{counted(instance.microbatches_in_batch, 'micro-batch')} per batch, "
             f"schedule {result.schedule}",
             f"status {result.status}" + (f": {result.message}" if result.message else "")]
    if result.plan is None or result.evaluation is None:
        return "\n".join(lines) + "\n"
    if result.objective == "time-per-batch":
        lines.append(f"time per batch {cell(result.value)} (bound {cell(result.bound)}, gap {percent(result.gap, 2)}), "
                     f"largest stage time per sample {cell(result.evaluation.value)}, "
                     f"{counted(result.plan.devices, 'device')} used")
    else:
        unit = "group" if result.plan.chunks != 1 else "stage"   # interleaved: a group runs several stages
        why = result.stats.get("time_per_batch") if result.time_per_batch is None else None
        lines.append(f"largest {unit} time per sample {cell(result.value)} (bound {cell(result.bound)}), "
                     f"time per batch {cell(result.time_per_batch)}{f' ({why})' if why else ''}, "
                     f"{counted(result.plan.devices, 'device')} used")
    nodes = {n.id: n for n in instance.nodes}
    typed = bool(instance.device_types)
    groups = len(result.plan.stages) // result.plan.chunks if result.plan.chunks != 1 else 0
    rows = [["stage", *(["group"] if groups else []), "nodes", *(["type"] if typed else []), "d", "t", "not 1st TMPC",
             "time/sample", "memory", "in flight"]]
    for i, (stage, ev) in enumerate(zip(result.plan.stages, result.evaluation.stages)):
        others = sum(c != nodes[v].configurations[stage.t][0].id for v, c in stage.tmpcs.items())
        rows.append([str(i), *([str(i % groups)] if groups else []), node_ranges(stage.nodes),
                     *([stage.device_type] if typed else []), str(stage.d), str(stage.t),
                     f"{others}/{len(stage.nodes)}", cell(ev.time_per_sample), cell(ev.memory), str(ev.in_flight)])
    first = 2 if groups else 1   # the nodes column
    lines += format_table(rows, left=(first, first + 1) if typed else (first,))
    mega = result.megatron or {}
    if mega.get("expressible"):
        lines.append(f"Megatron-style: tensor {mega['tensor']}, pipeline {mega['pipeline']}, data {mega['data']}"
                     + (f", virtual pipeline {mega['virtual_pipeline']}" if "virtual_pipeline" in mega else ""))
        for stage, by_tmpc in (mega.get("other_tmpcs") or {}).items():
            for tmpc, held in by_tmpc.items():
                lines.append(f"  stage {stage} runs {tmpc!r} on node{'s' if len(held) > 1 else ''} {node_ranges(held)}")
    elif mega:
        lines.append(f"Megatron-style: not expressible ({mega['reason']})")
    return "\n".join(lines) + "\n"


__all__ = ["format_parallel_result", "node_ranges"]
