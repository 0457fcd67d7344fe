"""Whether the memory of a device's nodes fits its bound, decided exactly.

The model's rule is ``Σ m(v) ≤ M`` over the nodes a device holds (DESIGN.md §2). Summed in
floating point the rule rounds, and depends on the order of the terms: sizes 0.1 and 0.2 sum to
0.30000000000000004, above a bound of 0.3 that whoever wrote these numbers meant them to meet,
and a DP that takes a block's memory as a difference of two prefix sums found
(0.1 + 0.2) − 0.1 above 0.2. Here every number is read as its shortest decimal form (what
``repr`` prints: the number as a JSON file or a Python literal gave it), and the sum is compared
exactly. A sum clearly apart from the bound (by more than :data:`CLEAR` relative) is decided on
``math.fsum`` alone, so the exact sum is taken only for the few that are close.

:func:`decimal_unit` gives the DP (and any other method that sums memory in floating point) a
unit in which every size and bound is an integer and their total at most :data:`EXACT_TOTAL` (just
below ``2^53``): its sums and differences are then exact and agree with :func:`fits`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable, Sequence

from placement.problem.units import exact_unit

#: relative distance from the bound beyond which the rounded sum decides
CLEAR = 1e-9
#: the largest integer up to which every integer is a float
EXACT_INTEGERS = 2.0 ** 53
#: the largest total, itself a rounded sum, that shows every sum of its terms to be exact: a little below
#: :data:`EXACT_INTEGERS` (by more than any float sum of fewer than 10^6 terms can be off), since sizes
#: 2^53 and 1 sum to 2^53 + 1, which rounds to 2^53 and would pass that
EXACT_TOTAL = EXACT_INTEGERS * (1 - CLEAR)
#: the relative excess over a bound that a relaxation (a lower bound, a search that leaves the verdict
#: to the evaluator) lets fit: every sum :func:`fits` accepts, read either way and summed in floating
#: point, is within it
LENIENT = 1e-8


def fits(sizes: Iterable[float], bound: float) -> bool:
    """Whether ``Σ sizes ≤ bound``, exactly on the sizes as written (module docstring)."""
    return fits_counted(((size, 1) for size in sizes), bound)


def fits_summed(total: float, sizes: Iterable[float], bound: float) -> bool:
    """:func:`fits` for a search that keeps ``total``, the sizes' floating-point sum in any order: decided
    on it where it is apart from ``bound`` by more than twice :data:`CLEAR` relative (beyond the
    rounding of any sum of fewer than 10^6 sizes), else by :func:`fits` on ``sizes``, read only then.
    A search that adds one size at a time then pays for the exact rule only near the bound."""
    if math.isinf(bound):
        return bound > 0
    margin = 2 * CLEAR * max(abs(bound), abs(total))
    if total < bound - margin:
        return True
    if total > bound + margin:
        return False
    return fits(sizes, bound)


def which_bind(sizes: Sequence[float], bounds: Iterable[float]) -> list[bool]:
    """Per bound, whether it is below the sum of ``sizes`` by the model's rule (:func:`fits`): a bound the
    whole of ``sizes`` meets never binds, whatever a floating-point sum says (0.7 + 0.1 against
    0.7999999999999999, which the sum equals but the sizes as written exceed)."""
    return [not fits(sizes, bound) for bound in bounds]


def fits_counted(terms: Iterable[tuple[float, int]], bound: float) -> bool:
    """Whether ``Σ size · count ≤ bound`` over ``terms`` (sizes, whole counts), exactly on the sizes and
    the bound as written (:func:`fits` for sizes held ``count`` times: a stage's activations of ``y``
    micro-batches beside its parameters)."""
    terms = list(terms)
    if math.isinf(bound):
        return bound > 0
    total = math.fsum(size * count for size, count in terms)
    margin = CLEAR * max(abs(bound), abs(total))
    if total < bound - margin:
        return True
    if total > bound + margin:
        return False
    if all(_whole(size) for size, _ in terms):   # byte counts: summed as integers, as written
        return sum(int(size) * count for size, count in terms) <= as_written(bound)
    return sum((as_written(size) * count for size, count in terms), Fraction(0)) <= as_written(bound)


def _whole(value: float) -> bool:
    """Whether ``value`` is an integer below 2^53 in magnitude: its shortest decimal form is then that
    integer's digits, so it reads as ``int(value)``."""
    return abs(value) < EXACT_INTEGERS and float(value).is_integer()


def as_written(value: float) -> Fraction:
    """``value`` read as its shortest decimal form (what ``repr`` prints), exactly."""
    value = float(value)
    return Fraction(int(value)) if _whole(value) else Fraction(repr(value))


def written_sum(values: Iterable[float]) -> Fraction:
    """The exact sum of ``values`` read as their shortest decimal forms (what ``repr`` prints)."""
    return sum(map(as_written, values), Fraction(0))


def written_sum_text(sizes: Iterable[float]) -> str:
    """``Σ sizes`` on the sizes as written, exactly, as decimal text (``9007199254740993`` for 2^53 and 1,
    whose floating-point sum is 2^53): what a message shows where the rounded sum would look like it fits."""
    return decimal_text(written_sum(sizes))


def decimal_text(total: Fraction) -> str:
    """``total``, a sum of sizes as written (a fraction whose denominator divides a power of ten), as exact
    decimal text: ``0.90000000000000014`` for 0.30000000000000004 + 0.6000000000000001."""
    places = 0   # decimal forms: the denominator is 2^a·5^b, so some 10^places is a multiple of it
    while (10 ** places) % total.denominator:
        places += 1
    digits = str(abs(total.numerator) * 10 ** places // total.denominator).rjust(places + 1, "0")
    whole, fraction = digits[:len(digits) - places], digits[len(digits) - places:].rstrip("0")
    return ("-" if total < 0 else "") + whole + (f".{fraction}" if fraction else "")


def decimal_sum(sizes: Iterable[float]) -> float:
    """``Σ sizes`` on the sizes as written (their shortest decimal forms), rounded once to the nearest
    float: the memory of a colour class of sizes 0.1 and 0.2 is 0.3, which fits a bound of 0.3 as
    :func:`fits` says (summed in floating point it is 0.30000000000000004, which does not)."""
    sizes = [float(a) for a in sizes]
    if all(a.is_integer() for a in sizes) and math.fsum(abs(a) for a in sizes) <= EXACT_TOTAL:
        return float(sum(sizes))   # integers summing to below 2^53: the float sum is exact
    if any(not math.isfinite(a) for a in sizes):
        return math.fsum(sizes)
    return float(written_sum(sizes))


def decimal_unit(values: Sequence[float], total: float) -> float | None:
    """The unit of :func:`placement.problem.units.exact_unit` for ``values`` whose sum is ``total``,
    with that sum at most :data:`EXACT_TOTAL`; ``None`` when there is none. In that unit every sum of
    the values is exact, and a value is its shortest decimal form."""
    return exact_unit(values, total, EXACT_TOTAL, written=True)
