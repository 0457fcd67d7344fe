"""Exact units: a power of ten or two in which every given value is an integer.

Sums of integers below ``2^53`` are exact in floating point, so a method that sums times or
sizes in such a unit adds them without rounding (the CP-SAT models' time scale, the memory rows
of the MILPs, the DP's block memory). A value counts as an integer in a unit when it times the
unit is an integer whose quotient by the unit is the value again. Where sums must be those of the
values as written (``written``), a power of ten counts only where that integer is the value's shortest
decimal form times it: near ``2^53`` the product may round to the next integer, which reads as the value too.
"""

from __future__ import annotations

import math
from typing import Sequence

#: the candidate units, in increasing order: 2^-40 … 2^40 and 10^-12 … 10^12
UNITS = tuple(sorted({2.0 ** k for k in range(-40, 41)} | {10.0 ** k for k in range(-12, 13)}))


def exact_unit(values: Sequence[float], largest: float, cap: float, *, written: bool = False) -> float | None:
    """The smallest of :data:`UNITS` in which every value is an integer (module docstring), with
    ``largest`` times it at most ``cap``; past them (values finer than 10^-12 and 2^-40), the power of
    ten of the values' longest shortest decimal form, or the power of two of their finest binary
    digit, where one of them is such a unit; ``None`` when there is none. With ``written`` (sums that
    must be the sums of the values as written, as memory's are), a power of ten counts only where every
    value times it is its shortest decimal form times it (:func:`_reads_as_written`), and a power of two only
    where every value's binary value is its shortest decimal form: 0.1 + 0.2 computed in floating point,
    0.30000000000000004, is a whole number of 2^-52, but 2^-52 times that number is not 0.30000000000000004,
    and 0.30000000000000004 and 0.6000000000000001 summed in that unit met a bound of 0.9000000000000001
    that, as written, they exceed by 4e-17."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    binary_as_written: list[bool] = []   # found once, when a power of two is first in question

    def integral(unit: float) -> bool:
        with np.errstate(over="ignore"):
            scaled = array * unit
        whole = np.round(scaled)
        return bool(np.array_equal(scaled, whole) and np.array_equal(whole / unit, array))

    def allowed(unit: float) -> bool:
        if not written:
            return True
        if _power_of_ten(unit):
            return _reads_as_written(array.tolist(), unit)
        if not binary_as_written:
            binary_as_written.append(all(map(binary_is_as_written, array.tolist())))
        return binary_as_written[0]

    for unit in UNITS:
        if largest * unit > cap:
            return None
        if integral(unit) and allowed(unit):
            return unit
    finer = sorted(unit for unit in _finest_units(array.tolist()) if unit > UNITS[-1] and largest * unit <= cap)
    return next((unit for unit in finer if integral(unit) and allowed(unit)), None)


def _reads_as_written(values: Sequence[float], unit: float) -> bool:
    """Whether every value times ``unit``, a power of ten ``10^k``, computed in floating point, is the value's
    shortest decimal form times ``10^k`` exactly. Products near ``2^53``, and those by a power of ten that is no
    float (``10.0 ** 23`` is 10^23 + 8388608), may round to the next integer, whose quotient by the unit is the
    value again: 8.457479737107438e-08 times ``10.0 ** 23`` is 8457479737107439, not 8457479737107438."""
    from decimal import Decimal

    k = round(math.log10(unit))
    return all(math.isfinite(x * unit) and Decimal(repr(x)).scaleb(k) == int(x * unit) for x in set(values))


def _power_of_ten(unit: float) -> bool:
    """Whether ``unit`` is a power of ten as a float (``10.0 ** k``)."""
    return unit > 0 and unit == 10.0 ** round(math.log10(unit))


def binary_is_as_written(value: float) -> bool:
    """Whether ``value``'s binary value is exactly its shortest decimal form (what ``repr`` prints): true of
    integers below 2^53 and of 0.375, not of 0.30000000000000004 (0.3000000000000000444...)."""
    from decimal import Decimal

    if value.is_integer() and abs(value) < 2.0 ** 53:
        return True
    return not math.isfinite(value) or Decimal(value) == Decimal(repr(value))


def _finest_units(values: list[float]) -> list[float]:
    """The power of ten ``10^k``, ``k`` the most digits after the point of a value's shortest decimal form,
    and the power of two ``2^k``, ``k`` the most binary digits after the point of a value, each where it
    is a finite float."""
    from decimal import Decimal

    finite = [x for x in values if math.isfinite(x)]
    decimals = max((-Decimal(repr(x)).as_tuple().exponent for x in finite), default=0)
    binary = max((x.as_integer_ratio()[1].bit_length() - 1 for x in finite), default=0)
    return [10.0 ** k for k in (decimals,) if k <= 308] + [math.ldexp(1.0, k) for k in (binary,) if k <= 1023]


def sums_exactly(values: Sequence[float]) -> bool:
    """Whether floating-point sums and differences of ``values`` (finite, non-negative) are exact:
    every value is a multiple of one power of two ``2^-k`` and their total is below ``2^(53−k)``,
    so that every partial sum is an integer below ``2^53`` in that unit (the total is itself rounded:
    2^53 and 1 sum to 2^53, so a total of exactly ``2^(53−k)`` proves nothing)."""
    if not all(map(math.isfinite, values)):
        return False
    unit = max((x.as_integer_ratio()[1] for x in values), default=1)   # a power of two, 2^k
    return math.fsum(values) < math.ldexp(1.0, 53 - (unit.bit_length() - 1))


def sums_as_written(values: Sequence[float]) -> bool:
    """:func:`sums_exactly`, and every value's binary value is its shortest decimal form
    (:func:`binary_is_as_written`): floating-point sums of the values are then the sums of the values as
    written, as memory is summed. 0.30000000000000004 and 0.6000000000000001 sum exactly in floating point, to
    0.9000000000000001, but as written to 0.90000000000000014."""
    return sums_exactly(values) and all(binary_is_as_written(float(x)) for x in values)
