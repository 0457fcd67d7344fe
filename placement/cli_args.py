"""Option value types shared by the subcommands.

Each function parses one shape of value, or raises :class:`argparse.ArgumentTypeError`
with a one-line message that quotes what was given (argparse then prints the usage and
exits with status 2).
"""

from __future__ import annotations

import argparse
import math


def _integer(text: str, smallest: int, noun: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = smallest - 1
    if value < smallest:
        raise argparse.ArgumentTypeError(f"expected a {noun}, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    return _integer(text, 0, "non-negative integer")


def positive_int(text: str) -> int:
    return _integer(text, 1, "positive integer")


def _number(text: str, noun: str, *, positive: bool = False, below_one: bool = False,
            up_to_one: bool = False) -> float:
    """A finite number ≥ 0 (> 0 when ``positive``; < 1 or ≤ 1 when asked); ``noun`` names it."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    ok = (math.isfinite(value) and (value > 0 if positive else value >= 0)
          and (not below_one or value < 1) and (not up_to_one or value <= 1))
    if not ok:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    return _number(text, "a finite positive number", positive=True)


def byte_count(text: str) -> float:
    return _number(text, "a finite non-negative number of bytes")


def relative_gap(text: str) -> float:
    return _number(text, "a relative gap of at least 0 and below 1", below_one=True)


def fraction(text: str) -> float:
    return _number(text, "a number between 0 and 1", up_to_one=True)
