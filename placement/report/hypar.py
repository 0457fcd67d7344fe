"""Plain-text report of ``placement.hypar``: the setting, choices per layer, totals, elements per level."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from placement.costmodel.hypar import BYTES_PER_ELEMENT, LETTERS, SIDES, hierarchy_levels, partition_letters
from placement.report.table import format_table, printable
from placement.wording import counted

if TYPE_CHECKING:
    from placement.api import HyparResult


def _amount(x: Fraction) -> str:
    """An exact amount: whole numbers in full, others rounded to 3 decimals from the exact fraction
    (a float would lose digits past 2^53)."""
    if x.denominator == 1:
        return f"{x.numerator:,}"
    thousandths = round(x * 1000)
    whole, rest = divmod(abs(thousandths), 1000)
    return f"{'-' if thousandths < 0 else ''}{whole:,}.{rest:03d}"


def _gigabytes(amount: Fraction | int) -> str:
    """``amount`` bytes in GB (10^9 bytes) to 4 decimals, or to 5 significant digits from 10^12 GB on,
    computed from the exact amount: a float of it overflowed past 1.8e308 bytes."""
    gb = Fraction(amount) / 10 ** 9
    if gb < 10 ** 12:
        return f"{float(gb):.4f}"
    digits = len(str(gb.numerator // gb.denominator)) - 1           # gb = m · 10^digits, 1 ≤ m < 10
    mantissa = gb / 10 ** digits
    if round(mantissa, 4) >= 10:
        mantissa, digits = mantissa / 10, digits + 1
    return f"{float(mantissa):.4f}e+{digits:02d}"


def format_hypar(result: HyparResult) -> str:
    """The report of a :class:`placement.api.HyparResult`: setting, choices per layer, totals, elements per level."""
    network, accelerators, batch, types = result.network, result.accelerators, result.batch, result.types
    plans, skipped = result.plans, result.skipped
    levels = hierarchy_levels(accelerators)
    kinds = [layer.kind for layer in network.layers]
    lines = [
        f"network   {printable(network.name)}: {counted(len(network.layers), 'weighted layer', 'weighted layers')} "
        f"({kinds.count('conv')} conv, "
        f"{kinds.count('fc')} fc), {counted(network.parameters, 'weight')}",
        f"setting   {accelerators} accelerators ({counted(levels, 'level')}), batch {batch}, partition types "
        f"{', '.join(types)}",
        f"model     {BYTES_PER_ELEMENT} bytes per element, both sides of a pair: bytes = "
        f"{BYTES_PER_ELEMENT * SIDES} x elements",
        "",
        "choices per layer, top level first (" + ", ".join(f"{LETTERS[t]} = {t}" for t in types) + ")",
    ]
    rows = [("layer", "kind") + tuple(p.planner for p in plans)]
    for l, layer in enumerate(network.layers):
        rows.append((layer.name, layer.kind) + tuple(partition_letters(p.partition[l]) for p in plans))
    lines += format_table(rows, left=set(range(len(rows[0]))))
    lines.append("")
    baseline = next((p.communication.bytes for p in plans if p.planner == "all-dp"), None)
    rows = [("planner", "elements", "bytes", "GB", "of all-dp", "search s")]
    for p in plans:
        share = f"{float(p.communication.bytes / baseline):.4f}" if baseline else "-"
        rows.append((p.planner, _amount(p.communication.elements), _amount(p.communication.bytes),
                     _gigabytes(p.communication.bytes), share, f"{p.runtime_s:.4f}"))
    lines += format_table(rows, left={0})
    lines.append("")
    lines.append("elements per level (2^h pairs x the amount of one pair)")
    rows = [("level", "pairs") + tuple(p.planner for p in plans)]
    for h in range(levels):
        rows.append((str(h), str(2 ** h)) + tuple(_amount(p.communication.levels[h].elements) for p in plans))
    lines += format_table(rows, left=set())
    for name, why in skipped.items():
        lines.append(f"{name}: skipped: {why}")
    lines += [f"note: {printable(note)}" for note in result.notes]   # a name's newline too
    return "\n".join(lines) + "\n"
