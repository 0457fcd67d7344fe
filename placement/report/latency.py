"""Plain-text summary of a plan evaluated under the latency objective."""

from __future__ import annotations

import math
import re

from placement.problem.instance import Instance
from placement.report.text import node_span, topological_places, verdict_lines
from placement.verification.latency import LatencyEvaluation
from placement.report.table import format_table, printable


#: runs of more CPU nodes than this in a critical chain are shown by their ends and their count
CPU_RUN_SHOWN = 4
#: the label of an accelerator call in a critical chain (any other element is a node on a CPU)
_CALL = re.compile(r"device \d+ call \d+")


def _num(x: float) -> str:
    return "-" if math.isinf(x) else f"{x + 0:.6g}"   # + 0: a negative zero is 0, any other number itself


def chain_text(critical: tuple[str, ...]) -> str:
    """The critical chain as one line, each run of more than :data:`CPU_RUN_SHOWN` CPU nodes in a row
    written as its first and last node and the count between (a chain of 32,000 CPU nodes filled
    half a megabyte)."""
    parts: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > CPU_RUN_SHOWN:
            parts.extend((run[0], f"... {len(run) - 2:,} more CPU nodes ...", run[-1]))
        else:
            parts.extend(run)
        run.clear()

    for label in critical:
        if not _CALL.fullmatch(label):
            run.append(label)
            continue
        flush()
        parts.append(label)
    flush()
    return " -> ".join(parts)


def format_latency(problem: Instance, evaluation: LatencyEvaluation, extra: tuple[str, ...] = ()) -> str:
    """A table of the calls (start, receive, compute, send, end), the CPU nodes, the latency, the violations
    (the evaluation's, then ``extra``: those of checks it does not make)."""
    header = ("device", "call", "type", "#nodes", "start", "receive", "compute", "send", "end", "nodes")
    rows = [header]
    places = topological_places(problem)
    for c in evaluation.calls:
        rows.append((str(c.device), str(c.index), c.type, str(len(c.nodes)), _num(c.start), _num(c.receive),
                     _num(c.compute), _num(c.send), _num(c.end), node_span(problem, c.nodes, places, False)))
    lines = format_table(rows, left={2, 9})
    if evaluation.cpu_nodes:
        last = max(evaluation.cpu_nodes, key=lambda r: r.end)
        lines.append("")
        if len(evaluation.cpu_nodes) == 1:
            lines.append(f"1 node on CPU (it runs alone, as soon as its inputs are ready), finishing at "
                         f"{_num(last.end)} (node {last.node})")
        else:
            lines.append(f"{len(evaluation.cpu_nodes)} nodes on CPU (each runs alone, as soon as its inputs are "
                         f"ready); the last finishes at {_num(last.end)} (node {last.node})")
    lines.append("")
    title = f"instance {printable(problem.name)}: " if problem.name else ""
    lines.append(f"{title}latency {evaluation.latency:.10g}" if math.isfinite(evaluation.latency)
                 else f"{title}latency not computed (see the violations)")
    if evaluation.critical:
        lines.append("critical chain: " + chain_text(evaluation.critical))
    lines.extend(verdict_lines(tuple(evaluation.violations) + tuple(extra)))
    return "\n".join(lines) + "\n"
