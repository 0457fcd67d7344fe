"""Plain-text summaries of an evaluated plan."""

from __future__ import annotations

from placement.problem.instance import Instance
from placement.verification.evaluate import Evaluation
from placement.report.table import cell, format_table


def _span(problem: Instance, nodes: tuple[int, ...]) -> str:
    """Names of the first and last forward node a device holds, in topological order: its split points."""
    order = {v: k for k, v in enumerate(problem.topological_ids())}
    forward = sorted((v for v in nodes if v in order and not problem.node(v).backward), key=order.__getitem__)
    if not forward:
        return "-"
    first, last = problem.node(forward[0]).name, problem.node(forward[-1]).name
    return first if first == last else f"{first} .. {last}"


def format_evaluation(problem: Instance, evaluation: Evaluation, extra: tuple[str, ...] = ()) -> str:
    """A table of the devices (load, compute, comm, memory, first..last forward node), the max load,
    the class, the violations (the evaluation's, then ``extra``: those of checks it does not make)."""
    header = ("device", "type", "#nodes", "compute", "comm", "load", "memory/bound", "forward nodes")
    rows = [header]
    for r in evaluation.devices:
        rows.append((str(r.position), r.type, str(len(r.nodes)), cell(r.compute), cell(r.comm),
                     cell(r.load), f"{cell(r.memory)}/{cell(r.memory_bound)}", _span(problem, r.nodes)))
    lines = format_table(rows, left={1, 7})   # text columns read better left-aligned
    title = f"instance {problem.name}: " if problem.name else ""
    lines.append("")
    lines.append(f"{title}max load {evaluation.max_load:.10g}")
    lines.append(f"contiguity checked: {evaluation.contiguity}; finest class: {evaluation.finest_class}")
    if evaluation.inferred:
        lines.append(f"placed by colour inference: {len(evaluation.inferred)} nodes")
    lines.extend(verdict_lines(tuple(evaluation.violations) + tuple(extra)))
    return "\n".join(lines) + "\n"


VIOLATIONS_SHOWN = 20
"""Violations a text report lists; the rest are counted (the JSON report lists every one)."""


def verdict_lines(violations: tuple[str, ...]) -> list[str]:
    """``valid: no violations``, or ``INVALID: N violations`` and one indented line each, up to
    :data:`VIOLATIONS_SHOWN` of them."""
    if not violations:
        return ["valid: no violations"]
    count = len(violations)
    lines = [f"INVALID: {count} violation{'' if count == 1 else 's'}"]
    lines += [f"  {v}" for v in violations[:VIOLATIONS_SHOWN]]
    if count > VIOLATIONS_SHOWN:
        lines.append(f"  ... and {count - VIOLATIONS_SHOWN} more (the JSON report lists them all)")
    return lines
