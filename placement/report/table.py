"""The one table renderer of the command line: aligned columns under a header and a rule."""

from __future__ import annotations

import math
import unicodedata
from typing import Iterable, Sequence


def format_table(rows: Sequence[Sequence[str]], *, left: Iterable[int] = (), rule: bool = True) -> list[str]:
    """Lines of ``rows`` (the first is the header) in columns two spaces apart.

    Columns whose index is in ``left`` are left-aligned (text), the others right-aligned
    (numbers); ``rule`` puts a line of dashes under the header. Trailing blanks are cut. A cell's
    characters that do not print (a newline, a right-to-left override in a layer's name) are
    written as escapes (:func:`printable`): they had split or reordered the table. Widths are the
    columns a terminal gives the text (:func:`display_width`).
    """
    if not rows:
        return []
    rows = [[printable(str(c)) for c in row] for row in rows]
    left = set(left)
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]

    def padded(i: int, text: str, w: int) -> str:
        blank = " " * (w - display_width(text))
        return text + blank if i in left else blank + text

    lines = ["  ".join(padded(i, cell, w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def display_width(text: str) -> int:
    """The columns ``text`` takes on a terminal: two for a wide character (CJK, most emoji), none for a
    combining mark, one for any other (a name in Chinese had shifted the columns after it)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def printable(text: str) -> str:
    """``text`` with every character that does not print (``str.isprintable``) as its escape:
    ``a\\nb`` for a newline, ``\\u202e`` for a right-to-left override."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def cell(x: float | None) -> str:
    """A number for a table cell: six significant digits, ``inf``, or ``-`` for none (a negative zero is 0)."""
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x + 0:.6g}"   # + 0: a negative zero is 0


def percent(share: float, decimals: int = 1) -> str:
    """``share`` as a percentage with ``decimals`` decimals, or with two significant digits where those
    would round a share of 1e-9 or more to zero (``0.0011%``): a gap shown as ``0.0%`` is a gap below the
    1e-9 that floating-point sums leave in a proven optimum."""
    text = f"{share:.{decimals}%}"
    if abs(share) >= 1e-9 and math.isfinite(share) and float(text.rstrip("%")) == 0:
        digits = 1 - math.floor(math.log10(abs(share) * 100))
        return f"{share * 100:.{digits}f}%"
    return text
