"""Exact units: a power of ten or two in which every given value is an integer.

Sums of integers below ``2^53`` are exact in floating point, so a method that sums times or
sizes in such a unit adds them without rounding (the CP-SAT models' time scale, the memory rows
of the MILPs, the DP's block memory). A value counts as an integer in a unit when it times the
unit is an integer whose quotient by the unit is the value again; the smallest such power of ten
reads the value as its shortest decimal form.
"""

from __future__ import annotations

import math
from typing import Sequence

#: the candidate units, in increasing order: 2^-40 … 2^40 and 10^-12 … 10^12
UNITS = tuple(sorted({2.0 ** k for k in range(-40, 41)} | {10.0 ** k for k in range(-12, 13)}))


def exact_unit(values: Sequence[float], largest: float, cap: float) -> float | None:
    """The smallest of :data:`UNITS` in which every value is an integer (module docstring), with
    ``largest`` times it at most ``cap``; past them (values finer than 10^-12 and 2^-40), the power of
    ten of the values' longest shortest decimal form, or the power of two of their finest binary
    digit, where one of them is such a unit; ``None`` when there is none."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)

    def integral(unit: float) -> bool:
        with np.errstate(over="ignore"):
            scaled = array * unit
        whole = np.round(scaled)
        return bool(np.array_equal(scaled, whole) and np.array_equal(whole / unit, array))

    for unit in UNITS:
        if largest * unit > cap:
            return None
        if integral(unit):
            return unit
    finer = sorted(unit for unit in _finest_units(array.tolist()) if unit > UNITS[-1] and largest * unit <= cap)
    return next((unit for unit in finer if integral(unit)), None)


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
