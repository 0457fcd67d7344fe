"""Plain-text rendering of the check of a data- and tensor-parallel plan (``placement verify`` on a Piper
instance): per stage its verified figures, the verdict, the simulated batch, the ledger and the notes."""

from __future__ import annotations

from typing import Any, Mapping

from placement.io.piper import PiperInstance
from placement.problem.instance import format_number
from placement.report.parallel import node_ranges
from placement.report.table import cell, format_table, printable
from placement.report.text import verdict_lines
from placement.verification.parallel_check import ParallelVerification
from placement.wording import counted


def _stages(record: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """The stages of the plan ``record`` holds (itself, or its ``plan``), as the check read them (node ``1.0`` is
    node 1, a degree ``2.0`` is 2); none where it holds no plan that reads."""
    from placement.errors import InvalidPlanError
    from placement.parallel.plan import ParallelPlan

    document = record.get("plan", record) if isinstance(record, Mapping) else None
    try:
        return ParallelPlan.from_json(document).stages
    except InvalidPlanError:
        return ()


def format_parallel_verification(instance: PiperInstance, verified: ParallelVerification,
                                 record: Mapping[str, Any] | None = None) -> str:
    """The verdict as text; ``record`` (the plan file's document) gives the stages' nodes and degrees."""
    stages = _stages(record)
    devices = verified.devices if verified.devices is not None else (
        {t.name: t.count for t in instance.device_types} if instance.device_types else instance.max_devices)
    where = (", ".join(f"{k}:{v}" for k, v in devices.items()) + " devices" if isinstance(devices, Mapping)
             else counted(devices, "device"))
    if not instance.device_types:   # exactly: a violation may turn on the last digit
        memory = instance.max_memory_per_device if verified.memory is None else verified.memory
        where += f" of {format_number(memory)} bytes"
    chunks = f", {verified.chunks} chunks per device group" if verified.chunks > 1 else ""
    lines = [f"instance {printable(instance.name) or '-'}: checked on {where}, schedule {verified.schedule}{chunks}, "
             f"{counted(instance.microbatches_in_batch, 'micro-batch')} per batch"]
    report = verified.report
    if report is not None and report.stages:
        rows = [["stage", "nodes", "d", "t", "time/sample", "memory", "in flight"]]
        for i, ev in enumerate(report.stages):
            stage = stages[i] if i < len(stages) else None
            rows.append([str(i), node_ranges(list(stage.nodes)) if stage else "-", str(stage.d) if stage else "-",
                         str(stage.t) if stage else "-", cell(ev.time_per_sample), cell(ev.memory), str(ev.in_flight)])
        lines += format_table(rows, left=(1,))
    if verified.valid:
        unit = "device group" if verified.chunks > 1 else "stage"
        lines.append(f"largest {unit} time per sample {cell(verified.value)}  (the evaluator's, Piper's objective)")
        share = f", forward share {verified.forward_share:.6g}" if verified.forward_share != 1.0 / 3.0 else ""
        batch = (f"{cell(verified.time_per_batch)}  (one batch simulated under {verified.schedule}{share}, Piper's "
                 "all-reduce)" if verified.time_per_batch is not None else f"-  ({verified.batch_note})")
        lines.append(f"time per batch {batch}")
    lines += verdict_lines(tuple(verified.violations))   # the first few, as for every other plan
    ledger = verified.ledger
    if ledger is not None:
        lines.append("")
        lines.append(f"ledger: {ledger.verdict}")
        rows = [["stage", "F in", "F out", "E in", "E out", "resharding", "dW/batch", "bytes/sample/device",
                 "comm", "compute"]]
        for r in ledger.stages:
            rows.append([str(r.stage), cell(r.activations_in), cell(r.activations_out), cell(r.errors_in),
                         cell(r.errors_out), cell(r.resharding), cell(r.gradients_per_batch),
                         cell(r.bytes_per_device), cell(r.communication), cell(r.compute)])
        lines += format_table(rows)
        if ledger.links:
            lines.append("links (bytes per sample): " + ", ".join(f"{i}->{j} {cell(b)}"
                                                                  for (i, j), b in sorted(ledger.links.items())))
    lines += [f"note: {n}" for n in verified.notes]
    return "\n".join(lines) + "\n"


__all__ = ["format_parallel_verification"]
