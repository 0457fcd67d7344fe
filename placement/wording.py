"""Counts in messages and reports written as English does: ``1 block evaluated``, ``2 blocks evaluated``."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` with its noun phrase (``singular`` for one, else ``plural``, by default the singular's first
    word with an ``s``: ``block evaluated`` -> ``blocks evaluated``); thousands separated by commas."""
    if count == 1:
        return f"1 {singular}"
    if plural is None:
        first, _, rest = singular.partition(" ")
        plural = f"{first}s" + (f" {rest}" if rest else "")
    return f"{count:,} {plural}"
