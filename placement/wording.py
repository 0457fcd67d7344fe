"""Counts in messages and reports written as English does (``1 block evaluated``, ``2 blocks evaluated``), and
recorded numbers as a person gave them."""

from __future__ import annotations

import unicodedata
from typing import Iterable


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` with its noun phrase (``singular`` for one, else ``plural``, by default the singular's first
    word with an ``s``, or ``es`` after a hiss: ``block evaluated`` -> ``blocks evaluated``, ``micro-batch`` ->
    ``micro-batches``); thousands separated by commas."""
    if count == 1:
        return f"1 {singular}"
    if plural is None:
        first, _, rest = singular.partition(" ")
        ending = "es" if first.endswith(("s", "x", "z", "ch", "sh")) else "s"
        plural = f"{first}{ending}" + (f" {rest}" if rest else "")
    return f"{count:,} {plural}"


def first_few(texts: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``texts``, joined by commas, and how many more (``a, b, c and 2 more``)."""
    more = f" and {len(texts) - shown} more" if len(texts) > shown else ""
    return f"{', '.join(texts[:shown])}{more}"


def as_given(value: float) -> str:
    """A recorded number as a person (or an option) would give it: a whole number below 10^16 without a
    fraction or an exponent (``123456789``, not ``1.23457e+08``), any other exactly (its ``repr``: ``1e+300``)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else repr(value)


def rounded_duration(seconds: float) -> str:
    """``seconds`` as a rounded duration, as a progress line's estimate gives it: ``40 s``, ``12 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def written_otherwise(name: str, names: Iterable[str], what: str) -> str:
    """Where ``name``, refused as none of ``names``, is one of them written with other Unicode characters (the same
    text once both are normalised, NFKC: an accent typed as a combining mark, a full-width letter), the clause that
    says so, naming the ``what`` it meant and both spellings' code points, which print alike; else ``""``."""
    same = [known for known in names if known != name
            and unicodedata.normalize("NFKC", known) == unicodedata.normalize("NFKC", name)]
    if not same:
        return ""
    return (f"; it is the {what} {same[0]!r} written with other Unicode characters ({ascii(name)}, not "
            f"{ascii(same[0])}): write it as the catalogue does")
