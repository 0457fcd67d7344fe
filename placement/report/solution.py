"""Plain-text report of a :class:`placement.Result`: the summary, then the evaluator's report."""

from __future__ import annotations

from placement.problem.instance import Instance
from placement.report.table import percent, printable
from placement.result import Result, Status, Verification
from placement.wording import counted

OBJECTIVE_LABELS = {"throughput": "max-load", "throughput-gpipe": "FW+BW", "latency": "latency"}
_STAT_LABELS = (("ideals", "ideal", "ideals"), ("pairs_examined", "ideal pair examined", "ideal pairs examined"),
                ("blocks_evaluated", "block evaluated", "blocks evaluated"), ("supernodes", "supernode", "supernodes"),
                ("variables", "variable", "variables"), ("rows", "row", "rows"))


def figure(x: float) -> str:
    """A value for the summary: six decimals where that shows it exactly enough (``3.362709``),
    else seven significant digits in exponent form (``1.000000e+90``, ``2.500000e-09``); 0 as
    ``0.000000``."""
    if x == 0 or 1e-3 <= abs(x) < 1e15:
        return f"{x:.6f}"
    return f"{x:.6e}"


def format_summary(instance: Instance, result: Result) -> str:
    """Instance, method, status, verified value, bound and gap, note, runtime with the method's counts."""
    method = result.method + (f" ({result.backend})" if result.backend else "")
    stages = f", stages {result.stages}" if result.stages is not None else ""
    # as given (the check's), not as the method may have capped it at the node count
    calls = result.verification.calls if result.verification is not None else result.stats.get("calls_per_accelerator")
    # a latency plan's calls are contiguous by the model; the contiguity class is no parameter of it
    shape = (f", {calls} calls per accelerator" if calls and calls > 1 else "") if result.objective == "latency" \
        else f", contiguity {result.contiguity}"
    lines = [
        f"instance    {printable(instance.name) or '-'}",   # an unnamed one: read from a stream or a document
        f"method      {method} (objective {result.objective}{shape}{stages})",
        f"status      {result.status}",
    ]
    if result.value is not None:
        label = OBJECTIVE_LABELS.get(result.objective, result.objective)
        lines.append(f"{label:<11} {figure(result.value)}  (verified independently)")
        lines.append(_bound_line(result))
    elif result.status is Status.NO_SOLUTION and result.bound:
        lines.append(f"bound       {figure(result.bound)}")
    if result.message:
        lines.append(f"note        {printable(result.message)}")   # a name's newline splits no line
    counts = ", ".join(counted(result.stats[k], one, many) for k, one, many in _STAT_LABELS
                       if isinstance(result.stats.get(k), int))
    lines.append(f"runtime     {result.runtime_s:.3f} s" + (f"  ({counts})" if counts else ""))
    return "\n".join(lines) + "\n"


def _bound_line(result: Result) -> str:
    """The summary's bound and gap of a plan, saying by how much where the gap rounds to 0, and that a
    plan is optimal where its bound meets it without its status claiming so; ``none recorded`` for a
    result without them (a plan file may record none)."""
    if result.bound is None or result.gap is None:
        return "bound       none recorded"
    gap = percent(result.gap, 2)
    if result.status is Status.FEASIBLE and result.gap and float(gap.rstrip("%")) == 0:   # say by how much
        gap = f"{result.gap * 100:.2g}%"
    elif result.status is Status.FEASIBLE and result.gap == 0:   # e.g. a heuristic's plan that meets a bound
        gap += "  (the bound meets the value: this plan is optimal, though its status does not claim it)"
    return f"bound       {figure(result.bound)}   gap {gap}"


def format_verification(instance: Instance, verification: Verification) -> str:
    """The evaluator's report of a :class:`placement.Verification`: the device table and the verdict (for
    the latency objective, the calls' schedule and the verdict); one verdict covers the report's own
    violations and those its checks do not make (the call limit)."""
    from placement.report.text import format_evaluation
    from placement.verification.check import violations_beyond

    evaluation, latency, _ = verification.report
    shown = latency if latency is not None else evaluation
    extra = violations_beyond(verification.violations, shown.violations)
    if latency is not None:
        from placement.report.latency import format_latency

        return format_latency(instance, latency, extra)
    return format_evaluation(instance, evaluation, extra, verification.objective)


def format_result(instance: Instance, result: Result) -> str:
    """:func:`format_summary`, then the evaluator's report of the returned plan (if any)."""
    text = format_summary(instance, result)
    if result.verified and result.verification is not None and result.verification.report is not None:
        text += "\n" + format_verification(instance, result.verification)
    return text
