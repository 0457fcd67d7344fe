"""Plain-text summaries of an evaluated plan."""

from __future__ import annotations

from placement.problem.instance import Instance
from placement.verification.evaluate import Evaluation
from placement.report.table import cell, format_table, printable
from placement.wording import counted


def topological_places(problem: Instance) -> dict[int, int]:
    """Each node id's place in the instance's topological order (computed once per table)."""
    return {v: k for k, v in enumerate(problem.topological_ids())}


def node_span(problem: Instance, nodes: tuple[int, ...], places: dict[int, int], forward_only: bool = True) -> str:
    """Names of the first and last node of ``nodes`` (forward ones only, where ``forward_only``: a device's
    split points) in topological order (``places``: :func:`topological_places`); ``-`` for none."""
    known = [v for v in nodes if v in places and not (forward_only and problem.node(v).backward)]
    if not known:
        return "-"
    first, last = (problem.node(min(known, key=places.__getitem__)).name,
                   problem.node(max(known, key=places.__getitem__)).name)
    return first if first == last else f"{first} .. {last}"


def format_evaluation(problem: Instance, evaluation: Evaluation, extra: tuple[str, ...] = (),
                      objective: str = "throughput") -> str:
    """A table of the devices (load, compute, comm, memory, first..last forward node), the max load,
    the class, the violations (the evaluation's, then ``extra``: those of checks it does not make). Under
    the ``throughput-gpipe`` objective the table adds each device's forward and backward loads (what the
    objective sums the largest of), and the max-load line the objective's value."""
    gpipe = objective == "throughput-gpipe"
    header = ("device", "type", "#nodes", "compute", "comm", "load") + (("forward", "backward") if gpipe else ()) \
        + ("memory/bound", "forward nodes")
    rows = [header]
    places = topological_places(problem)
    for r in evaluation.devices:
        rows.append((str(r.position), r.type, str(len(r.nodes)), cell(r.compute), cell(r.comm), cell(r.load))
                    + ((cell(r.forward_load), cell(r.backward_load)) if gpipe else ())
                    + (f"{cell(r.memory)}/{cell(r.memory_bound)}", node_span(problem, r.nodes, places)))
    lines = format_table(rows, left={1, len(header) - 1})   # text columns read better left-aligned
    title = f"instance {printable(problem.name)}: " if problem.name else ""
    lines.append("")
    violations = tuple(evaluation.violations) + tuple(extra)
    # an invalid plan's loads are those of what it places: no value of the plan
    fw_bw = (f"FW+BW {evaluation.gpipe_time:.10g} (max forward {evaluation.max_forward_load:.10g} + max backward "
             f"{evaluation.max_backward_load:.10g}), " if gpipe else "")
    lines.append(f"{title}{fw_bw}max load {evaluation.max_load:.10g}"
                 + ("  (of the nodes placed as the plan places them; the plan is invalid)" if violations else ""))
    lines.append(f"contiguity checked: {evaluation.contiguity}; finest class: {evaluation.finest_class}")
    if evaluation.inferred:
        lines.append(f"placed by colour inference: {counted(len(evaluation.inferred), 'node')}")
    lines.extend(verdict_lines(violations))
    return "\n".join(lines) + "\n"


VIOLATIONS_SHOWN = 20
"""Violations a text report lists; the rest are counted (the JSON report lists every one)."""


def verdict_lines(violations: tuple[str, ...]) -> list[str]:
    """``valid: no violations``, or ``INVALID: N violations`` and one indented line each, up to
    :data:`VIOLATIONS_SHOWN` of them (a name's newline in one written as an escape, as the tables write it)."""
    if not violations:
        return ["valid: no violations"]
    count = len(violations)
    lines = [f"INVALID: {count} violation{'' if count == 1 else 's'}"]
    lines += [f"  {printable(v)}" for v in violations[:VIOLATIONS_SHOWN]]
    if count > VIOLATIONS_SHOWN:
        lines.append(f"  ... and {count - VIOLATIONS_SHOWN} more (the JSON report lists them all)")
    return lines
