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
    ``largest`` times it at most ``cap``; ``None`` when there is none."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    for unit in UNITS:
        if largest * unit > cap:
            return None
        with np.errstate(over="ignore"):
            scaled = array * unit
        whole = np.round(scaled)
        if np.array_equal(scaled, whole) and np.array_equal(whole / unit, array):
            return unit
    return None


def sums_exactly(values: Sequence[float]) -> bool:
    """Whether floating-point sums and differences of ``values`` (finite, non-negative) are exact:
    every value is a multiple of one power of two ``2^-k`` and their total is below ``2^(53−k)``,
    so that every partial sum is an integer below ``2^53`` in that unit (the total is itself rounded:
    2^53 and 1 sum to 2^53, so a total of exactly ``2^(53−k)`` proves nothing)."""
    if not all(map(math.isfinite, values)):
        return False
    unit = max((x.as_integer_ratio()[1] for x in values), default=1)   # a power of two, 2^k
    return math.fsum(values) < math.ldexp(1.0, 53 - (unit.bit_length() - 1))
