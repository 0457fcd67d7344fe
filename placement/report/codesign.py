"""Text of a co-design result (:class:`placement.codesign.result.CodesignResult`) for the command line."""

from __future__ import annotations

from placement.report.table import cell, format_table
from placement.wording import counted


def format_codesign(result) -> str:
    """The status and objective, the design of every stage with its nodes, and the search's counts."""
    unit = "batches/s/W" if result.objective == "perf-per-watt" else "batches/s"
    lines = [f"status: {result.status} ({result.method}, {result.objective}, "
             f"{'homogeneous' if result.homogeneous else 'a design per stage'}, "
             f"at most {counted(result.chips, 'chip')})"]
    if result.message:
        lines.append(result.message)
    if result.plan is not None:
        lines.append(f"value: {cell(result.value)} {unit}; {cell(result.time_per_input_ms)} ms per batch; "
                     f"{cell(result.power_w)} W over the chips used")
        rows = [["stage", "design", "area mm²", "TDP W", "nodes"]]
        stages = [dev for dev in result.plan.devices if dev.nodes]
        for s, (design, dev) in enumerate(zip(result.designs, stages)):
            rows.append([str(s), design.label, cell(design.area_mm2), cell(design.tdp_w), str(len(dev.nodes))])
        lines.extend(format_table(rows, left=(1,)))
    # a baseline's counts are the exact method's where no design is within the budgets (all pruned by area or power)
    if result.method in ("exact", "exhaustive") or result.pruned_by:
        pruned = ", ".join(f"{n:,} {why}" for why, n in result.pruned_by.items() if n)
        lines.append(f"designs: {result.grid_designs:,} in the grid, {result.evaluated:,} evaluated, "
                     f"{result.pruned:,} pruned{' (' + pruned + ')' if pruned else ''}; "
                     f"{counted(result.dp_runs, 'DP run', 'DP runs')}; {result.runtime_s:.3f} s")
    else:   # a baseline counts the design combinations it placed (one DP run each), not designs, and prunes none
        lines.append(f"designs: {result.grid_designs:,} in the grid; "
                     f"{counted(result.evaluated, 'design combination placed', 'design combinations placed')}; "
                     f"{result.runtime_s:.3f} s")
    if result.shapeless_nodes:
        nodes = counted(result.shapeless_nodes, "node has no operator shapes and was",
                        "nodes have no operator shapes and were")
        lines.append(f"note: {nodes} costed at full array utilisation")
    return "\n".join(lines)
