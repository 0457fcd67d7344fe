"""Model data shared by the throughput formulations: groups, slots, scaled times and costs.

A formulation places *groups* of nodes (colour classes, or the supernodes of
:func:`placement.solvers.ideals.contract`) on *slots*: one per device that exists, or,
when exactly ``N`` non-empty devices are asked for (``stages=N``), ``N`` slots that must
all be used.
For group ``v`` and device type ``k`` (a type with ``count > 0``):
``pf[v][k]`` / ``pb[v][k]`` are the summed times of its forward / backward nodes, or
``None`` when ``k`` does not support all of the group; ``m[v]`` is its memory.
Cost nodes are the original nodes ``u`` with ``c(u) > 0`` whose closed neighbourhood
``N[u] = {u} ∪ succ(u)`` meets two groups; ``r(u)`` is ``u``'s group and ``W(u)`` the
other groups of ``N[u]``. A node ``u`` is in ``In(S) ∪ Out(S)`` of a device's set ``S``
exactly when ``N[u]`` meets both ``S`` and its complement, which needs two groups.

Numbers. Backends that need integers (CP-SAT) get times multiplied by a unit
``scale`` (a power of two or ten) under which every time and cost is an integer and
no coefficient times a variable's bound in one row exceeds ``max_product``: then the
model is exact. Otherwise the scale is the largest power of two within that cap and
every time and cost is rounded *down*: each plan's value in the model is then at most
its true value, so the model's optimum and every bound proven on it are valid lower
bounds of the true optimum, while the objective reported is always the evaluator's
exact value of the decoded plan. A load row (L) holds coefficients up to the largest
time of one group or cost, ``widest``, beside a target bounded by the largest load
``load_ub``, so the cap reads ``widest · load_ub ≤ max_product`` (the other rows have
0/1 variables and small coefficients, or coefficient 1 on a target). The default,
``2^62`` (:data:`placement.solvers.milp.driver.DEFAULT_MAX_PRODUCT`), is what CP-SAT
handles: it checks only each row's total activity, yet multiplies one term's coefficient
by *another* variable's bound, and with ``widest`` and ``load_ub`` both near ``2^40``
(the former cap on ``load_ub`` alone) it called feasible models infeasible (see
:mod:`.backends.cpsat`). Where that scale rounds and a valid plan's value is known (the start's),
times and costs are first capped at the power of two at or above twice that value
(:func:`capped_to`), which no plan worth finding reaches, and the cap stands for the largest load:
the rounding unit then follows that value, not the instance's largest time (unless it is fine
enough already). Memory is scaled exactly where a power of two or ten allows it under ``2^53``; else
it is written in exact (Python) integers of the least unit in which the groups' sizes, summed as
written, and the binding bounds are whole, where they add up to at most ``2^61`` in it (sizes in
gigabytes computed in floating point, such as 0.30000000000000004, need 10^-17); and otherwise in
integers rounded down from the exact values times a power of two (:func:`_admitting_memory`): the
rows then admit every plan that fits, so bounds and infeasibility stay proofs, and a plan that fits
only by the rounding fails verification: the throughput models are then solved again with its
devices' groups kept off every device of their type (:func:`.driver.refitted`). (Rounded the other
way, sizes up and bounds down, every plan found would fit but the model could miss plans that fit,
so neither its bound nor an infeasibility verdict would be a proof: ``memory_exact`` False, which
only values that are not finite leave now.)

Floating-point backends (CBC, SCIP, HiGHS, PuLP) get times and costs multiplied by the power
of two that brings the largest load into ``[2^9, 2^10)`` (:func:`float_scaling`): exact, and it
keeps their absolute tolerances small against every load. In the instance's own units, times
near 1e-9 fell inside those tolerances (a plan 58% above the optimum was proven "optimal") and
times near 1e9 lost plans in the big-M rows. Their memory rows are scaled the same way, and sizes
too small for their tolerances are left out (:func:`_float_memory`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence, TypeVar

from placement.problem.instance import Instance
from placement.problem.memory_fit import as_written, decimal_sum, decimal_unit, fits, which_bind, written_sum
from placement.problem.units import exact_unit

MEMORY_MAX_SCALED = 2.0 ** 53
Number = TypeVar("Number", float, Fraction)


@dataclass(frozen=True)
class Scaling:
    """``value_in_model = round(value · scale)`` (an integer backend's) or ``value · scale`` (a
    floating-point one's, ``integer`` False); ``exact`` when no rounding happened."""

    scale: float
    exact: bool
    integer: bool = True


def choose_scale(values: Sequence[float], largest: float, max_scaled: float, *, written: bool = False) -> Scaling:
    """Smallest power of two or ten making every value an integer with ``largest · scale ≤ max_scaled``
    (:func:`placement.problem.units.exact_unit`; with ``written``, one in which the values are their shortest
    decimal forms, as memory is summed); else the largest power of two within the cap (``exact`` False)."""
    unit = exact_unit(values, largest, max_scaled, written=written)
    if unit is not None:
        return Scaling(unit, True)
    if largest <= 0:
        return Scaling(1.0, True)
    return rounding_scale(largest, max_scaled)


def rounding_scale(largest: float, max_scaled: float) -> Scaling:
    """The largest power of two ``s`` with ``largest · s ≤ max_scaled`` (``largest > 0``), as an inexact scale."""
    # a difference of logarithms: the quotient itself overflows for a tiny ``largest``; the power
    # is capped within a float's range
    return Scaling(2.0 ** min(math.floor(math.log2(max_scaled) - math.log2(largest)), 1000), False)


FLOAT_TARGET = 2.0 ** 10
"""A floating-point backend's model has its largest load scaled to about this (module docstring)."""


def float_scaling(values: Sequence[float], largest: float) -> Scaling:
    """The power of two that brings ``largest`` (a bound on every load) into ``[2^9, 2^10)`` for a
    floating-point backend, whose tolerances are absolute (1e-6 and so on): times of 1e-9 would all
    look equal to it, and times of 1e9 would make its big-M rows lose the difference between plans.
    Multiplying by a power of two is exact unless a value falls below the normal range, where
    :func:`float_time` rounds it down to 0 (``exact`` False)."""
    if not largest > 0 or not math.isfinite(largest):
        return Scaling(1.0, True)
    scale = 2.0 ** max(-1000, min(1000, math.log2(FLOAT_TARGET) - math.ceil(math.log2(largest))))
    return Scaling(scale, all(a == 0 or abs(a * scale) >= sys.float_info.min for a in values), integer=False)


def float_time(a: float, scaling: Scaling) -> float:
    """``a`` in a floating-point backend's model: times the scale, 0 where that falls below the normal
    range (rounded down, so that no model load exceeds its true value)."""
    q = a * scaling.scale
    return 0.0 if 0 < q < sys.float_info.min else q


def scaling_note(scaling: Scaling, backend: str) -> str | None:
    """What an inexact ``scaling`` did to the times, for ``backend``'s result note; ``None`` when exact."""
    if scaling.exact:
        return None
    if scaling.integer:
        return f"times rounded down to multiples of {rounding_unit(scaling.scale)} for {backend}"
    return (f"times below {sys.float_info.min / scaling.scale:.3g} taken as 0 for {backend} (beside the largest "
            "load they are below a float's range)")


def rounding_unit(scale: float) -> str:
    """The multiple times are rounded down to under a power-of-two ``scale``, as text: ``2^-20`` for
    ``scale = 2^20``, ``2^286`` for ``scale = 2^-286``."""
    return f"2^{-round(math.log2(scale))}"


@dataclass(frozen=True)
class MemoryData:
    """Sizes and bounds in model units; a bound that cannot bind (at least the total size) is ``inf``."""

    sizes: tuple[float, ...]
    bounds: tuple[float, ...]
    binds: bool          # some bound is below the total size
    exact: bool          # False: sizes rounded up and bounds down (every plan found fits; not every fitting plan is found)
    #                      True: exact, or (integer backends) rounded to admit every plan that fits, bounds proven
    admitting: bool = False   # rounded to admit every plan that fits (:func:`_admitting_memory`)


def scale_memory(sizes: Sequence[float], bounds: Sequence[float], integer: bool,
                 binds: Sequence[bool] | None = None,
                 written: Callable[[], Sequence[Fraction]] | None = None, copies: int = 1) -> MemoryData:
    """Memory for the model: exact where a power of two or ten under ``2^53`` makes every size and
    binding bound an integer, or, for an integer backend, in exact integers of the unit in which the
    sizes and bounds as written are whole (:func:`_integer_memory`), else rounded to admit every plan
    that fits (:func:`_admitting_memory`); see the module docstring. ``binds`` says which bounds the
    whole graph does not fit, by the model's rule on the nodes' sizes as written
    (:func:`placement.problem.memory_fit.fits`; the sizes here are sums, rounded); by default, those
    below the exact sum of ``sizes`` as written (``written``). ``written`` gives the sizes' exact values
    (each the sum of its nodes' sizes as written), called only where those are needed; by default each size
    as written. ``copies``: the most times one row holds each size (the latency model's row of an
    accelerator, once per call)."""
    total = sum(sizes)
    exact: list[Fraction] | None = None
    if binds is None:   # below the sizes' exact sum: their float sum hides 12.1 + 2e-19 > 12.1
        exact = list(written()) if written else [as_written(a) for a in sizes]
        whole = sum(exact, Fraction(0))
        binds = [math.isfinite(M) and as_written(M) < whole for M in bounds]
    binding = [M for M, b in zip(bounds, binds) if b]
    if not integer:
        return _float_memory(sizes, bounds, total, binding, binds)
    scaling = (choose_scale(list(sizes) + binding, total, MEMORY_MAX_SCALED, written=True) if binding
               else Scaling(1.0, True))
    if binding:
        if exact is None:
            exact = list(written()) if written else [as_written(a) for a in sizes]
        if scaling.exact and any(as_written(a) != w for a, w in zip(sizes, exact)):
            # a sum rounded to a float: 0.30000000000000004 + 0.6000000000000001 is 0.9000000000000001,
            # which a bound of 0.9000000000000001 meets, but as written the sum is 0.90000000000000014
            scaling = rounding_scale(total, MEMORY_MAX_SCALED)
        if not scaling.exact:
            whole = _integer_memory(exact, bounds, binds, copies)
            if whole is not None:
                return whole
            admitting = _admitting_memory(exact, bounds, binds, copies)
            if admitting is not None:
                return admitting

    def model(a: float, up: bool) -> float:
        q = a * scaling.scale
        return float(round(q)) if scaling.exact else float(math.ceil(q) if up else math.floor(q))

    return MemoryData(tuple(model(a, True) for a in sizes),
                      tuple(model(M, False) if b else math.inf for M, b in zip(bounds, binds)),
                      bool(binding), scaling.exact)


#: the most a memory row's coefficients and its bound may add up to in integer memory (:func:`_row_activity`): then
#: within CP-SAT's overflow limit of ``2^62``
MEMORY_MAX_INTEGER = 2 ** 61


def _row_activity(written: Sequence[Fraction], limits: Sequence[Fraction], types: int, copies: int = 1) -> Fraction:
    """The most a memory row's coefficients and its bound add up to (CP-SAT checks that against its overflow
    limit): a slot's row (:func:`placement.solvers.milp.rows.slot_rows`) holds every size and, per type, up to
    their total again; a device's row, every size and its bound, or every size ``copies`` times (the latency
    model's row of an accelerator holds a node's size once per call)."""
    total = sum((abs(value) for value in written), Fraction(0))
    return max(types + 1, copies) * total + max(limits, default=Fraction(0))


def _integer_memory(written: Sequence[Fraction], bounds: Sequence[float], binds: Sequence[bool],
                    copies: int = 1) -> MemoryData | None:
    """Memory in exact integers for an integer backend: the sizes ``written`` (exact) and the binding bounds as
    written, times the least common multiple of their denominators (the least unit in which all are whole);
    ``None`` where some value is not finite or a row's activity (:func:`_row_activity`) passes
    :data:`MEMORY_MAX_INTEGER` in it. The
    integers are Python's own, past a float's exact range: sizes in gigabytes computed in floating point
    (0.30000000000000004 beside 0.3) have no power of ten under ``2^53`` that makes them whole, and their
    rounded rows had left CP-SAT's proofs unused (``feasible`` at the simple bound where the optimum was
    proven on exact data)."""
    limits = [M for M, b in zip(bounds, binds) if b]
    if not all(map(math.isfinite, [*map(float, written), *limits])):
        return None
    exact_limits = [as_written(M) for M in limits]
    unit = math.lcm(*(value.denominator for value in [*written, *exact_limits]))
    if _row_activity(written, exact_limits, len(bounds), copies) * unit > MEMORY_MAX_INTEGER:
        return None
    return MemoryData(tuple(int(value * unit) for value in written),
                      tuple(int(as_written(M) * unit) if b else math.inf for M, b in zip(bounds, binds)),
                      bool(limits), True)


def _admitting_memory(written: Sequence[Fraction], bounds: Sequence[float],
                      binds: Sequence[bool], copies: int = 1) -> MemoryData | None:
    """Memory for an integer backend where exact integers would pass :data:`MEMORY_MAX_INTEGER`
    (:func:`_integer_memory`): the sizes ``written`` (exact) and the binding bounds as written times the largest
    power of two ``s`` that keeps them within it, each rounded down, exactly. A device whose sizes fit as written
    (``Σ w ≤ M``) then fits in the rows (``Σ ⌊w·s⌋ ≤ ⌊Σ w·s⌋ ≤ ⌊M·s⌋``): the model misses no plan, so its bounds
    and an infeasibility verdict are proofs, and the rows decide memory exactly but for devices over their bound
    by less than one part in about ``2^61 / n`` (n groups), whose plans fail the verification every plan goes
    through (the start is then returned). Sizes in GiB computed from bytes (``bytes / 2**30``, 17 digits each,
    of 10^-23 and finer) are such data: rounded the other way (sizes up, bounds down, so that every plan found
    fits, but not every plan that fits is found), CP-SAT's proofs on them went unused. ``None`` where some value
    is not finite."""
    limits = [as_written(M) for M, b in zip(bounds, binds) if b]
    if not all(map(math.isfinite, [*map(float, written), *map(float, limits)])):
        return None
    total = _row_activity(written, limits, len(bounds), copies)
    if total <= 0:
        return None
    above = total.numerator.bit_length() - total.denominator.bit_length()   # 2^above ≥ total, exactly
    while Fraction(2) ** above < total:
        above += 1
    scale = Fraction(MEMORY_MAX_INTEGER) / Fraction(2) ** above   # total · scale ≤ 2^61
    return MemoryData(tuple(math.floor(value * scale) for value in written),
                      tuple(math.floor(as_written(M) * scale) if b else math.inf for M, b in zip(bounds, binds)),
                      bool(limits), True, admitting=True)


#: sizes below this many model units are left out of a floating-point backend's memory rows: about
#: 1e-6 of the largest binding bound, below the solvers' tolerances
FLOAT_MEMORY_RESOLUTION = 2.0 ** -10
#: the finest step of the memory data (the unit in which every size and binding bound is an integer),
#: relative to the largest binding bound, that a floating-point backend's memory rows tell apart: below
#: it a plan one byte over a bound of gigabytes is within the solvers' tolerances, and they took such
#: plans, or "proved" a worse plan optimal; their models then decide memory only approximately
FLOAT_MEMORY_DECIDES = 1e-6
#: the largest binding bound, in the memory data's own unit, up to which a floating-point backend's memory rows
#: hold whole multiples of that unit (:func:`_whole_memory`): integers this small are exact in every solver
FLOAT_MEMORY_WHOLE = 2.0 ** 20


def _float_memory(sizes: Sequence[float], bounds: Sequence[float], total: float, binding: list[float],
                  binds: Sequence[bool]) -> MemoryData:
    """Memory for a floating-point backend: times the power of two that brings the largest binding bound
    into ``[2^9, 2^10)``, as :func:`float_scaling` does for times, or, where that leaves fractions and the
    data have a unit of their own that keeps the bounds small (:func:`_whole_memory`), that unit. Sizes in
    bytes near 10^15 reached the solvers' limits on coefficients (HiGHS takes 10^15 for infinite) and gave
    false proofs of optimality and infeasibility. Sizes below :data:`FLOAT_MEMORY_RESOLUTION` are taken as 0: a
    coefficient of 2.6e-7 beside bounds of 845 made CBC's preprocessing cut off the optimum, and CBC,
    HiGHS and PuLP then "proved" plans optimal that were not. Leaving them out relaxes the rows, so
    the model misses no plan and its bound stays valid; a plan it returns may exceed a bound by the
    sizes left out, which the verification of every plan catches (:mod:`.outcome`). Where the memory
    data's finest step is below :data:`FLOAT_MEMORY_DECIDES` of the largest binding bound (byte sizes
    beside bounds of gigabytes), the rows decide memory only within the solvers' tolerances: the data
    is then marked inexact, so that no proof or bound of the solver is used (:mod:`.outcome`)."""
    if not binding:
        return MemoryData(tuple(sizes), tuple(math.inf for _ in bounds), False, True)
    to_integers = decimal_unit(list(sizes) + binding, total + sum(binding))   # every value times it: an integer
    scale = float_scaling([], max(binding)).scale
    if (to_integers is not None and to_integers * max(binding) <= FLOAT_MEMORY_WHOLE
            and not all(float(a * scale).is_integer() for a in list(sizes) + binding)):
        return _whole_memory(sizes, bounds, binds, to_integers)
    scaled = [a * scale for a in sizes]
    scaled = [0.0 if q < FLOAT_MEMORY_RESOLUTION else q for q in scaled]
    # the data's finest step: that of the sizes as written, else of their binary values (0.30000000000000004 beside
    # 0.6000000000000001 is a whole number of 2^-52, a step far below the solvers' tolerances)
    step = to_integers or exact_unit(list(sizes) + binding, total + sum(binding), MEMORY_MAX_SCALED)
    decides = step is None or step * max(binding) * FLOAT_MEMORY_DECIDES <= 1.0
    return MemoryData(tuple(scaled), tuple(M * scale if b else math.inf for M, b in zip(bounds, binds)),
                      True, decides)


def _whole_memory(sizes: Sequence[float], bounds: Sequence[float], binds: Sequence[bool], unit: float) -> MemoryData:
    """Memory for a floating-point backend in whole multiples of the data's own ``unit`` (every size and
    binding bound times it is an integer), where the power of two of :func:`_float_memory` leaves fractions:
    the rows then hold small integers and decide memory exactly, as the model reads it. Scaled by that
    power of two, sizes 0.1 and 0.2 beside a bound of 0.3 summed to one ulp past it, and PuLP's CBC
    preprocessing declared a model with a plan infeasible."""
    return MemoryData(tuple(float(round(a * unit)) for a in sizes),
                      tuple(float(round(M * unit)) if b else math.inf for M, b in zip(bounds, binds)), True, True)


@dataclass(frozen=True)
class CostNode:
    """An original node ``u`` (position) whose output may cross a device boundary."""

    u: int
    r: int                    # its group
    W: tuple[int, ...]        # the other groups of N[u]
    c: float                  # c(u), model units
    backward: bool            # charged to the backward load (throughput-gpipe)


@dataclass(frozen=True)
class GroupData:
    groups: tuple[tuple[int, ...], ...]          # node positions per group
    types: tuple[int, ...]                        # device-type positions with count > 0
    counts: tuple[int, ...]                       # count per entry of `types`
    pays: tuple[bool, ...]                        # pays_comm per entry of `types`
    pf: tuple[tuple[float | None, ...], ...]      # forward time per group and type, model units
    pb: tuple[tuple[float | None, ...], ...]      # backward time per group and type, model units
    m: tuple[float, ...]                          # memory per group, model units
    M: tuple[float, ...]                          # memory bound per type, model units (inf: cannot bind)
    memory_binds: bool
    memory_exact: bool
    cost_nodes: tuple[CostNode, ...]
    scaling: Scaling
    load_ub: float                                # no load exceeds this, model units
    stages: int | None = None                     # exactly this many non-empty devices (None: any number)
    alone: tuple[tuple[bool, ...], ...] = ()      # per group and type, whether the group alone fits it, as written


    @property
    def slots(self) -> int:
        """Number of slots: one per device, or ``stages`` (every slot then used)."""
        return sum(self.counts) if self.stages is None else self.stages

    def p(self, v: int, k: int) -> float | None:
        """Time of group ``v`` on type ``k`` (model units), ``None`` when unsupported."""
        f, b = self.pf[v][k], self.pb[v][k]
        return None if f is None or b is None else f + b

    def fits(self, v: int) -> list[int]:
        """Types that support every node of group ``v`` and have room for it."""
        return [k for k in range(len(self.types)) if self.p(v, k) is not None
                and (self.alone[v][k] if self.alone else self.m[v] <= self.M[k])]

    def cheapest(self) -> dict[int, float]:
        """Each group's least time over the types it fits (model units); groups that fit none are left out."""
        return {v: min(self.p(v, k) for k in self.fits(v)) for v in range(len(self.groups))  # type: ignore[type-var]
                if self.fits(v)}


#: the rounding unit, relative to the start's value, below which the scale is left as the whole data sets it
FINE_ENOUGH = 2.0 ** -24


def capped_to(upper: float | None, largest: float, unit: float) -> float | None:
    """The cap on times and costs that lets an integer backend's scale use a plan of value ``upper``: the
    power of two at or above ``2·upper``; ``None`` where it would not lower ``largest`` (the largest load),
    or where the scale's rounding ``unit`` is already at most ``upper`` · :data:`FINE_ENOUGH` (then a load
    of up to 16 times rounds by less than the 1e-6 of ``upper`` a proof is held to, and the model is left as
    it was: on ResNet-50 inference ``none``, whose unit 2^-21 is that fine, the capped model's bound after
    120 s was 33.025, the uncapped one's 33.036, over three seeds).

    A plan no worse than ``upper`` has no load above it, so it holds no group on a type where the
    group's time exceeds the cap and cuts no cost above it on a paying device; such times and costs
    may be lowered to the cap, and the loads bounded by it, without changing that plan's value in the
    model or making any plan's value larger than its true value (rounding down, as the scale's rounding
    does: every bound proven stays a bound of the true optimum). The scale then needs to fit only
    ``cap²`` into the product the backend handles, in place of the largest time times the largest
    load: times of 10^6 on a device no good plan uses had rounded the times of a plan of value 1 to
    multiples of 2^-9, and CP-SAT's proof, on those, left a gap of 0.4%. The cap is a power of two, so
    that every power-of-two scale writes it exactly."""
    if upper is None or not 0 < upper < math.inf or unit <= upper * FINE_ENOUGH:
        return None
    cap = 2.0 ** math.ceil(math.log2(2 * upper))
    return cap if cap < largest else None


#: the value, in model units, below which a floating-point backend's proof and bound are not used
#: (:data:`placement.solvers.milp.outcome.FLOAT_RESOLUTION`)
FLOAT_WORKS_AT = 1.0


def float_cap(upper: float | None, largest: float, scaling: Scaling) -> float | None:
    """The cap on times and costs of a floating-point backend's model, as :func:`capped_to` is an integer
    backend's: the power of two at or above ``2·upper``, where the scale of the largest load ``largest``
    leaves a plan of value ``upper`` (the start's) below :data:`FLOAT_WORKS_AT` model units, so that neither
    the solver's proof nor its bound would be used; ``None`` elsewhere, or where the cap would not lower
    ``largest``. The same argument holds: no plan at least as good as the start's holds a time or cuts a cost
    above the cap, so capping changes neither its value nor the optimum, and makes no plan's value larger than
    its true value. CPU times of 10^12 beside accelerator times of 1 had left a plan of 2.5 at 1.2e-9 model
    units: CBC, SCIP, HiGHS and PuLP each stopped at the simple bound 2.0; capped at 8, they prove 2.5."""
    if upper is None or not 0 < upper < math.inf or upper * scaling.scale >= FLOAT_WORKS_AT:
        return None
    cap = 2.0 ** math.ceil(math.log2(2 * upper))
    return cap if cap < largest else None


def memory_binds(problem: Instance, types: Sequence[int]) -> list[bool]:
    """Per device type (positions ``types``), whether its memory bound is below the whole graph's
    memory by the model's rule (:func:`placement.problem.memory_fit.which_bind`)."""
    return which_bind([v.memory for v in problem.nodes], [problem.device_types[t].memory for t in types])


def fits_alone(problem: Instance, groups: Sequence[Sequence[int]], types: Sequence[int],
               binds: Sequence[bool]) -> list[list[bool]]:
    """Per group (node positions) and device type (positions ``types``, ``binds`` saying whose bound binds):
    whether the group alone fits the type's memory, decided on its nodes' sizes as written
    (:func:`placement.problem.memory_fit.fits`). Rows rounded to admit every plan that fits
    (:func:`_admitting_memory`) may admit a group over a bound by less than their rounding; this keeps it off."""
    return [[not bind or fits([problem.nodes[v].memory for v in members], problem.device_types[t].memory)
             for t, bind in zip(types, binds)] for members in groups]


def counted_sizes(sizes: Sequence[Number], runs: Sequence[Sequence[bool]], binds: Sequence[bool]) -> list[Number]:
    """``sizes`` as the memory rows count them: a group that no device with a binding bound runs (``runs[g][k]``:
    whether the ``k``-th device type or device of ``binds`` runs group ``g``) never counts against a bound, so its
    size (a CPU-only node's 1e16 bytes) is 0, where it would leave the others no exact unit (as in the DP's sums)."""
    return [size if any(b and r for b, r in zip(binds, row)) else type(size)(0) for size, row in zip(sizes, runs)]


def prepare(problem: Instance, groups: Sequence[Sequence[int]], integer: bool, max_product: float,
            stages: int | None = None, by_direction: bool = True, upper: float | None = None) -> GroupData:
    """The data of the groups ``groups`` (node positions), scaled for an integer backend if ``integer``;
    ``stages``: the number of slots, all used (``None``: one slot per device); ``upper``: the value of a
    valid plan (the start's), which the scale may use (:func:`capped_to`, :func:`float_cap`).

    Cost nodes whose groups form the same set ``{r(u)} ∪ W(u)`` are cut by exactly the same device
    sets, so they become one cost node with the summed cost (the first one's ``u`` and ``r``); with
    ``by_direction`` only those of one direction are merged (the loads of ``throughput-gpipe``
    charge forward and backward costs apart). In a training graph, a forward node's output and the
    gradient sent back over the same edge are such a pair."""
    nodes = problem.nodes
    types = tuple(t for t, dt in enumerate(problem.device_types) if dt.count > 0)
    of_node = {u: g for g, members in enumerate(groups) for u in members}
    pf_raw: list[list[float | None]] = []
    pb_raw: list[list[float | None]] = []
    m_raw: list[float] = []
    for members in groups:
        rf: list[float | None] = []
        rb: list[float | None] = []
        for t in types:
            times = [nodes[v].times[t] for v in members]
            if any(q is None for q in times):
                rf.append(None)
                rb.append(None)
                continue
            rf.append(float(sum(nodes[v].times[t] for v in members if not nodes[v].backward)))  # type: ignore[misc]
            rb.append(float(sum(nodes[v].times[t] for v in members if nodes[v].backward)))  # type: ignore[misc]
        pf_raw.append(rf)
        pb_raw.append(rb)
        m_raw.append(decimal_sum(nodes[v].memory for v in members))   # 0.1 + 0.2 fits 0.3, as verified
    succ = problem.successors()
    merged: dict[tuple, list] = {}
    for u, node in enumerate(nodes):
        if node.out_cost <= 0:
            continue
        r = of_node[u]
        W = tuple(sorted({of_node[w] for w in succ[u]} - {r}))
        if not W:
            continue
        key = (frozenset(W) | {r}, node.backward if by_direction else None)
        if key in merged:
            merged[key][3] += float(node.out_cost)
        else:
            merged[key] = [u, r, W, float(node.out_cost), node.backward]
    cost_raw = [tuple(entry) for entry in merged.values()]
    pays = tuple(problem.device_types[t].pays_comm for t in types)
    total_cost = sum(c for *_, c, _ in cost_raw)

    def type_max(pf: list[list[float | None]], pb: list[list[float | None]], costs: float) -> list[float]:
        return [sum((pf[v][k] or 0.0) + (pb[v][k] or 0.0) for v in range(len(groups))) + (costs if pays[k] else 0.0)
                for k in range(len(types))]

    largest = max(type_max(pf_raw, pb_raw, total_cost) + [0.0])

    def spread() -> tuple[list[float], float]:
        """Every time and cost, and the largest load-row coefficient: one group's whole time on one type
        (the throughput objective's), or one cost."""
        values = [q for row in pf_raw + pb_raw for q in row if q is not None] + [c for *_, c, _ in cost_raw]
        widest = max([sum(q or 0.0 for q in pair) for rf, rb in zip(pf_raw, pb_raw) for pair in zip(rf, rb)]
                     + [c for *_, c, _ in cost_raw] + [0.0])
        return values, widest

    values, widest = spread()
    binds = memory_binds(problem, types)
    runs = [[q is not None for q in rf] for rf in pf_raw]
    m_raw = counted_sizes(m_raw, runs, binds)
    memory = scale_memory(m_raw, [problem.device_types[t].memory for t in types], integer, binds,
                          lambda: counted_sizes([written_sum(nodes[v].memory for v in members) for members in groups],
                                                runs, binds))

    cap: float | None = None
    if integer:
        # widest·scale · load_ub ≤ widest·largest·scale² ≤ max_product (module docstring)
        scaling = choose_scale(values, math.sqrt(widest * largest), math.sqrt(max_product))
        cap = capped_to(upper, largest, 1 / scaling.scale) if not scaling.exact and memory.exact else None
        if cap is not None:
            pf_raw = [[None if q is None else min(q, cap) for q in row] for row in pf_raw]
            pb_raw = [[None if q is None else min(q, cap) for q in row] for row in pb_raw]
            cost_raw = [(u, r, W, min(c, cap), back) for u, r, W, c, back in cost_raw]
            values, widest = spread()
            largest = cap
            scaling = choose_scale(values, math.sqrt(widest * largest), math.sqrt(max_product))
    else:
        scaling = float_scaling(values, largest)
        cap = float_cap(upper, largest, scaling)
        if cap is not None:
            pf_raw = [[None if q is None else min(q, cap) for q in row] for row in pf_raw]
            pb_raw = [[None if q is None else min(q, cap) for q in row] for row in pb_raw]
            cost_raw = [(u, r, W, min(c, cap), back) for u, r, W, c, back in cost_raw]
            values, widest = spread()
            scaling = float_scaling(values, cap)

    def t_model(a: float) -> float:
        if not integer:
            return float_time(a, scaling)
        return float(round(a * scaling.scale) if scaling.exact else math.floor(a * scaling.scale))

    pf = tuple(tuple(None if q is None else t_model(q) for q in row) for row in pf_raw)
    pb = tuple(tuple(None if q is None else t_model(q) for q in row) for row in pb_raw)
    cost_nodes = tuple(CostNode(u, r, W, t_model(c), back) for u, r, W, c, back in cost_raw)
    load_ub = max(type_max([list(r) for r in pf], [list(r) for r in pb], sum(cn.c for cn in cost_nodes)) + [0.0])
    if cap is not None:   # a power of two times the scale: exact
        load_ub = min(load_ub, t_model(cap))
    return GroupData(
        groups=tuple(tuple(g) for g in groups), types=types,
        counts=tuple(problem.device_types[t].count for t in types), pays=pays, pf=pf, pb=pb,
        m=memory.sizes, M=memory.bounds, memory_binds=memory.binds, memory_exact=memory.exact,
        cost_nodes=cost_nodes, scaling=scaling,
        load_ub=load_ub, stages=stages,
        alone=tuple(map(tuple, fits_alone(problem, groups, types, binds))) if memory.admitting else ())
