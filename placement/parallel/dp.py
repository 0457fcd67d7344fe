"""Exact DP over successor-closed sets for Piper's problem, with the schedule's memory model.

Model (Piper, msr-fiddle/piper ``algo.cpp``; see ``docs/piper.md``)
-------------------------------------------------------------------
A plan is a pipeline of stages ``X_0, …, X_{S−1}``, each a contiguous node set with a tensor-
parallel degree ``t_i`` (every node of the stage has TMPCs for it), a data-parallel degree
``d_i`` dividing ``m = mbsInBatch``, and one TMPC per node. Constraints: ``Σ d_i·t_i ≤``
``devices``; ``Σ d_i ≤ m`` (Piper's ``boundOnS = min(mbsInBatch, maxDevices)``, line 704);
each device of stage ``i`` holds ``Σ_v memoryUsageA_v·y_i + memoryUsageB_v ≤ memory`` with
``y_i`` the micro-batches in flight of the schedule (:mod:`placement.parallel.schedules`).
Objective: the largest stage time per sample (:mod:`placement.parallel._kernels`).

Recurrence. Let ``I`` range over the successor-closed sets (unions of the last stages). With
``dp[∅, 0, 0] = 0``::

    dp[I, k, s] = min over J ⊊ I, t, d:  max(dp[J, k − d·t, s − d], TPS(I \\ J, t, d, y))

``k`` the devices and ``s`` the sum of data-parallel degrees of the stages in ``I``, exactly,
``y = ⌈s / d⌉`` (``1f1b``, ``piper``) or ``m / d`` (``gpipe``), and ``TPS`` the least time per
sample of the stage over the TMPC choices that fit (an exact knapsack; ``mode="greedy"``
uses Piper's heuristic instead, for the baseline). The optimum is
``min_{k ≤ devices, s ≤ m} dp[V, k, s]``. Piper's table is the same with "at most ``k``, at most
``s``" (lines 849–930); with an exact stage cost that is monotone in ``y`` the two have the same
optimum. When ``s`` cannot matter (every degree ``t`` is 1, so ``s = k``; or ``gpipe`` with
``m ≥ devices``) the table drops it.

Device types (``deviceTypes``, docs/piper.md): each stage runs on one type, whose speed divides
the profiled times, whose bandwidth divides the transfers and whose memory bounds the stage's; a
CPU type takes ``t = 1`` only. ``k`` becomes the vector of devices per type, coded as one index
(mixed radix, :func:`placement.parallel._kernels.fill`); the recurrence is the same with
``k − d·t·e_τ`` for a stage on type ``τ``, so the optimum is exact for every type's bound. An
instance without types is the one-type case, computed by exactly the same operations as before
types existed (a speed of 1.0 divides exactly).

Memory is decided on the sizes and bounds as written (``docs/piper.md``; 0.2 + 0.1 fits 0.3), as the evaluator
decides it. Where they are whole numbers of one unit with the whole graph's memory below ``2^53`` in it, the DP
runs in that unit and its sums are exact (:func:`exact_memory`). Where no such unit exists (17 significant
digits; sizes in GiB computed from bytes), a stage whose floating-point memory is below its bound narrowed by
1e-8 fits; one nearer is valued by :func:`placement.parallel._kernels.knapsack_written`, whose choices are
compared and admitted on their sizes as written, whole numbers of the unit split into two parts whose sums stay
exact in floating point (:func:`written_fit`): a plan that fills a device exactly is found, and one a unit
over is refused. Only where even the parts overflow (sizes twenty or more orders of magnitude apart) does the
DP run on bounds widened by 1e-8 (its optimum bounds every plan's) or narrowed (every plan it admits fits),
and the evaluator has the last word (:func:`lenient_memory`, :mod:`placement.parallel.solve`).

Speed, all of it exact: the DP first runs over the prefixes of one topological order (a chain:
``n + 1`` sets), whose optimum ``c`` is the value of a real plan; the full run then needs no value
above ``c`` — it skips stages whose time exceeds ``c``, and device counts that leave the rest of
the graph (or the later stages) fewer devices than they need at ``c`` (``d·t ≥ Σ_v min t·time /
c``). Stages whose nodes all have a dominant TMPC (:mod:`placement.parallel.tables`) take their
sums as differences of per-set prefix sums (unless their rounding could reach :data:`SUM_TOLERANCE` of
the least value a plan can have: every stage is then summed apart) and their boundary from the two sets'
cuts; the knapsack runs only where the fastest choice does not fit, and (exact mode) only where the stage
could lower its cell: with the cell's value as its ceiling, and not where a lower bound (the least
times; a value or bound at fewer micro-batches in flight, as the exact value never falls as ``y``
grows) already reaches it. The chain's pass visits each set's last stages smallest first, so that
its large stages meet low ceilings.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

from placement.errors import InvalidParameterError, LimitExceededError
from placement.io.piper import PiperInstance
from placement.kernels import compiling_note
from placement.parallel import _kernels as K
from placement.parallel.devices import check_memory, device_counts
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.parallel.schedules import check_schedule, in_flight, uses_suffix
from placement.parallel.tables import Family, Tables, all_sets, build_tables, chain_sets
from placement.problem.memory_fit import EXACT_TOTAL, LENIENT, as_written
from placement.problem.units import sums_as_written

#: the most successor-closed sets the DP enumerates by default
DEFAULT_MAX_SETS = 200_000
#: the most table cells (sets × device counts × degree sums) the DP allocates
MAX_CELLS = 50_000_000
MODES = ("exact", "greedy")
#: the rounding a stage value taken as a difference of two per-set sums may carry, relative to the least value
#: any plan can have (the plan's reconstruction allows 1e-9): beyond it, stages are valued by their own sums
SUM_TOLERANCE = 1e-10

#: families of at most this many sets are first tried with the plain-Python kernels when the compiled
#: ones are not in numba's cache yet ...
INTERPRETED_SETS = 2_000
#: ... for at most this many seconds, after which the kernels are compiled
INTERPRETED_SECONDS = 1.0
#: under a deadline closer than this many seconds, kernels not in numba's cache yet are not compiled (some seconds
#: of compilation, which reads no clock: 6 s on two cores): the DP runs in plain Python to the deadline
COMPILE_SECONDS = 10.0
#: how the kernels come to be compiled, where a deadline kept them from it
NOT_COMPILED = f"a solve with no time limit, or one of at least {COMPILE_SECONDS:g} s, compiles them once per install"


@dataclass(frozen=True)
class ParallelSolution:
    """What the DP found: ``value`` (largest stage time per sample; ``inf`` when nothing fits) and
    its ``plan`` (``None`` when nothing fits), with counters in ``stats``."""

    value: float
    plan: ParallelPlan | None
    runtime_s: float
    stats: dict[str, Any] = field(default_factory=dict)


def degree_pairs(tables: Tables, devices: int, microbatches: int,
                 allowed: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """The (degree index, d) pairs a stage may take: ``d`` divides ``m``, ``d ≤ m``, ``d·t ≤ devices``
    (Piper's loops, lines 1097 and 1160), filtered by ``allowed`` ``(t, d)`` pairs when given."""
    out = []
    for k, t in enumerate(tables.degrees):
        for d in range(1, min(devices // t, microbatches) + 1):
            if microbatches % d == 0 and (allowed is None or (t, d) in allowed):
                out.append((k, d))
    return out


@dataclass(frozen=True)
class DeviceTypes:
    """The types a solve plans on, as the kernels read them (one unnamed type without ``deviceTypes``)."""

    names: tuple[str, ...]
    counts: tuple[int, ...]
    memory: tuple[float, ...]
    bandwidth: tuple[float, ...]
    speed: tuple[float, ...]
    cpu: tuple[bool, ...]


def exact_memory(types: DeviceTypes, tables: Tables, m: int,
                 strict: bool = False) -> tuple[DeviceTypes, Tables, bool]:
    """``types`` and ``tables`` with every memory figure and bound in the unit ``1/q``, ``q`` the least
    common denominator of their shortest decimal forms (0.1, 0.7 and 0.7999999999999999 as whole
    numbers of ``10^-16``), where the whole graph's memory at the most micro-batches in flight (any
    sum or difference the DP takes) stays below ``2^53`` in it
    (:data:`placement.problem.memory_fit.EXACT_TOTAL`): the DP's sums then decide the model's rule exactly
    (0.1 + 0.7 does not fit 0.7999999999999999, as the evaluator finds).
    Where data sum exactly already (bytes), :func:`lenient_memory` changes nothing; where no such
    unit exists, it widens the bounds (narrows them, ``strict``) and the evaluator has the last word: the
    third value says whether it did (:func:`solve_parallel` then decides on the sizes as written where
    :func:`written_fit` splits them, and keeps these bounds only where it does not)."""
    bounds = [b for b in types.memory if math.isfinite(b)]
    if not bounds:
        return types, tables, False
    mem_a, mem_b = np.abs(tables.mem_a), np.abs(tables.mem_b)
    most_in_flight = max(m, sum(types.counts) + 1)
    if summed_as_written(mem_a, mem_b, bounds, most_in_flight):
        return types, tables, False
    written = {x: as_written(x) for x in {*map(float, mem_a.ravel()), *map(float, mem_b.ravel()), *bounds}}
    q = math.lcm(*(f.denominator for f in written.values()))
    whole = max(float(np.sum((mem_a * most_in_flight + mem_b).max(axis=(1, 2)))), max(bounds))
    if not all(map(math.isfinite, written)) or Fraction(whole) * q > EXACT_TOTAL:   # q may exceed every float
        rounded = lenient_memory(types, tables, m, strict)
        return rounded, tables, rounded != types

    def scaled(array: np.ndarray) -> np.ndarray:
        return np.vectorize(lambda x: float(written[abs(float(x))] * q) * (1 if x >= 0 else -1), otypes=[float])(array)

    return (replace(types, memory=tuple(float(written[b] * q) if math.isfinite(b) else b for b in types.memory)),
            replace(tables, mem_a=scaled(tables.mem_a), mem_b=scaled(tables.mem_b)), False)


def summed_as_written(mem_a: np.ndarray, mem_b: np.ndarray, bounds: list[float], most_in_flight: int) -> bool:
    """Whether the DP's floating-point memory figures ``mem_a · y + mem_b`` (``y ≤ most_in_flight``), their sums and
    the ``bounds`` are those of the figures as written (:func:`sums_as_written` of ``mem_a`` itself, its products
    at ``most_in_flight``, ``mem_b`` and the bounds). Of the products alone, 0.05 · 5 = 0.25 and 0.2 · 5 = 1.0
    are as written, but 0.05 · 3 + 0.2 · 3 is 0.7500000000000001, and a stage of 0.75 did not fit a device of 0.75."""
    a = list(map(float, mem_a.ravel()))
    return sums_as_written([*a, *(v * most_in_flight for v in a), *map(float, mem_b.ravel()), *bounds])


@dataclass(frozen=True)
class WrittenFit:
    """The memory figures as written, for a stage's fit decided exactly on floating-point numbers
    (:func:`placement.parallel._kernels.knapsack_written`): each figure is a whole number ``N`` of a unit in which
    all are (the least common denominator of their shortest decimal forms), split as ``N = hi · 2^shift + lo``
    with ``0 ≤ lo < 2^shift``. ``figures[j, r, k, l]``: ``hi``, ``lo`` of ``mem_a`` (``j`` = 0, 1) and of
    ``mem_b`` (2, 3); ``capacity[:, τ]``: ``hi``, ``lo`` of type ``τ``'s bytes per device (``inf``, 0
    unbounded); ``wide[τ]``: those bytes widened by :data:`LENIENT`, which every choice that fits meets in floating
    point."""

    shift: int
    figures: np.ndarray
    capacity: np.ndarray
    wide: tuple[float, ...]


def written_fit(types: DeviceTypes, tables: Tables, most_in_flight: int) -> WrittenFit | None:
    """The :class:`WrittenFit` of ``types`` and ``tables`` (their memory as written, not widened or narrowed),
    with ``shift`` such that the ``lo`` parts of a stage's memory (at most ``n·(most_in_flight + 1)`` terms) sum
    below ``2^52``; ``None`` where the ``hi`` parts of the whole graph's largest memory and a capacity's do not
    stay below ``2^52`` too (no sum is then exact in two parts), or no unit exists (a figure not finite).
    Where no figure is negative, one above every bound (a TMPC that fits no device, as 1e30 beside sizes of 17
    digits) stands as one unit above the largest bound: every stage that holds it (``y ≥ 1``) is over every bound
    either way, and neither its magnitude nor its digits then keep the others from splitting."""
    n = len(tables.ids)
    figures = [*map(float, tables.mem_a.ravel()), *map(float, tables.mem_b.ravel())]
    bounds = [float(b) for b in types.memory if math.isfinite(b)]
    if not all(map(math.isfinite, figures)) or not bounds:
        return None
    written = {x: as_written(x) for x in {*figures, *bounds}}
    top = max(written[b] for b in bounds)
    beyond = {x for x in figures if written[x] > top} if min(figures, default=0.0) >= 0 else set()
    unit = math.lcm(*(f.denominator for x, f in written.items() if x not in beyond))
    shift = (2 ** 52 // (n * (most_in_flight + 1) + 1)).bit_length() - 1

    if shift < 1:   # so many terms a stage that no part below 2^52 holds their sum (micro-batches near 2^53)
        return None

    def split(x: float) -> tuple[int, int]:
        whole = int(top * unit) + 1 if x in beyond else int(written[x] * unit)
        return whole >> shift, whole - ((whole >> shift) << shift)

    parts = {x: split(x) for x in written}
    if any(abs(hi) >= 2 ** 52 for hi, _ in parts.values()):   # each, as a float, exact
        return None
    high = np.vectorize(lambda x: float(parts[float(x)][0]), otypes=[float])
    low = np.vectorize(lambda x: float(parts[float(x)][1]), otypes=[float])
    a_high, b_high = high(tables.mem_a), high(tables.mem_b)
    if float(np.abs(a_high * most_in_flight + np.abs(b_high)).max(axis=(1, 2)).sum()) >= 2 ** 52:
        return None
    capacity = np.array([[float(parts[b][0]) if math.isfinite(b) else math.inf for b in types.memory],
                         [float(parts[b][1]) if math.isfinite(b) else 0.0 for b in types.memory]])
    return WrittenFit(shift, np.stack([a_high, low(tables.mem_a), b_high, low(tables.mem_b)]), capacity,
                      tuple(b * (1 + LENIENT) for b in types.memory))


def lenient_memory(types: DeviceTypes, tables: Tables, m: int, strict: bool = False) -> DeviceTypes:
    """``types`` with memory bounds ``1 + LENIENT`` times larger where the DP's floating-point sums of the
    memory data are not exact (sizes such as 0.1 and 0.2, which the model reads as written: they fit a
    bound of 0.3 although their sum in floating point is above it). The DP then misses no plan the
    model lets fit (its optimum bounds every plan's), and the independent check, which reads the sizes as
    written, refuses a plan that only the slack let in. ``strict``: ``1 − LENIENT`` times, so that every plan
    the DP admits fits, though it may miss some that fit exactly. Integer sizes (bytes) sum exactly, and
    their bounds stay as they are."""
    if summed_as_written(np.abs(tables.mem_a), np.abs(tables.mem_b), [b for b in types.memory if math.isfinite(b)], m):
        return types
    return replace(types, memory=tuple(b * (1 - LENIENT if strict else 1 + LENIENT) for b in types.memory))


def device_types(instance: PiperInstance, devices: int | dict[str, int], memory: float) -> DeviceTypes:
    """The :class:`DeviceTypes` of ``instance`` with ``devices`` resolved by
    :func:`placement.parallel.devices.device_counts` (``memory``: the one type's bytes per device)."""
    if not isinstance(devices, dict):
        return DeviceTypes(("",), (devices,), (memory,), (instance.bandwidth,), (1.0,), (False,))
    types = instance.device_types
    return DeviceTypes(tuple(t.name for t in types), tuple(devices[t.name] for t in types),
                       tuple(t.memory for t in types),
                       tuple(instance.bandwidth if t.bandwidth is None else t.bandwidth for t in types),
                       tuple(t.speed for t in types), tuple(t.cpu for t in types))


def typed_pairs(tables: Tables, types: DeviceTypes, microbatches: int,
                allowed: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, int, int]]:
    """The (type index, degree index, d) triples a stage may take: :func:`degree_pairs` on each type's
    count, ``t = 1`` only on a CPU type."""
    return [(tau, k, d) for tau, count in enumerate(types.counts)
            for k, d in degree_pairs(tables, count, microbatches, allowed)
            if not types.cpu[tau] or tables.degrees[k] == 1]


def memory_model(instance: PiperInstance, devices, memory: float | None, tables: Tables | None = None,
                 strict_memory: bool = False,
                 mode: str = "exact") -> tuple[DeviceTypes, Tables, WrittenFit | None, bool]:
    """The device types and tables as the DP's stage values read them, for :func:`solve_parallel`'s ``devices``,
    ``memory``, ``strict_memory`` and ``mode``: memory in the exact unit of :func:`exact_memory` where there is
    one; else, in exact mode, the bounds narrowed with the sizes as written beside them (:func:`written_fit`, the
    third value), or, where they do not split so, the bounds widened (narrowed with ``strict_memory``: the fourth
    value says so)."""
    devices = device_counts(instance, devices)
    check_memory(instance, memory)
    capacity = instance.max_memory_per_device if memory is None else memory
    types = device_types(instance, devices, capacity)
    m = instance.microbatches_in_batch
    tables = build_tables(instance) if tables is None else tables
    written = types
    types, tables, rounded = exact_memory(types, tables, m, strict_memory)
    fit = written_fit(written, tables, max(m, sum(types.counts) + 1)) if rounded and mode == "exact" else None
    if fit is not None:   # the narrowed bounds clear a stage; one near a bound is decided on the sizes as written
        types, rounded = lenient_memory(written, tables, m, strict=True), False
    return types, tables, fit, rounded


def solve_parallel(instance: PiperInstance, *, devices: int | dict[str, int] | str | None = None,
                   memory: float | None = None,
                   schedule: str = "piper", mode: str = "exact", allowed: Sequence[tuple[int, int]] | None = None,
                   max_sets: int = DEFAULT_MAX_SETS, compiled: bool | None = None,
                   tables: Tables | None = None, sets: Family | None = None,
                   progress: Callable[[str], None] | None = None, deadline: float | None = None,
                   strict_memory: bool = False, below: float = math.inf) -> ParallelSolution:
    """The optimal plan of ``instance`` with ``devices`` devices of ``memory`` bytes (default: the
    instance's), for ``schedule``'s memory model (module docstring). For an instance with device
    types, ``devices`` gives counts per type (:mod:`placement.parallel.devices`) and ``memory`` must be
    ``None``.

    ``mode="greedy"`` replaces the exact knapsack by Piper's heuristic (its value is Piper's);
    ``allowed``: only these ``(t, d)`` pairs for every stage (baselines). ``compiled``: numba or plain
    Python (default: plain Python for a table of at most 2,000 cells; numba for a larger one, except that
    while the compiled kernels are not in numba's cache a family of at most :data:`INTERPRETED_SETS` sets is
    first tried in plain Python for :data:`INTERPRETED_SECONDS`; the results are the same either way).
    ``tables``/``sets``: reuse a previous build.
    ``progress`` hears how many successor-closed sets there are (where listing them ends a second or more after
    the call began), when the kernels must be compiled first (once per install, some seconds), and how far the
    pass along one topological order, then the DP over the sets, has come, about once a second.
    Past ``deadline`` (a :func:`time.perf_counter` value) the DP over the sets stops, and the plan is the
    best pipeline along one topological order (its pass runs to the end: a chain's sets are one more than its
    nodes), with ``stats["out_of_time"]`` saying
    how far the DP came and ``stats["lower_bound"]`` a bound on every plan: the least device time of all
    nodes (Σ of the least ``t · time``, at the largest speed) over the devices. Where the memory figures have no
    exact unit in which the DP's sums fit (:func:`exact_memory`), the DP (exact mode) decides memory on the sizes
    as written, split into two whole parts (:func:`written_fit`; ``stats["memory_as_written"]``): exactly, as
    the evaluator does. Where they do not split so either, or in greedy mode, ``stats["memory_rounded"]`` says
    that its bounds were widened (the optimum bounds every plan's, but its plan may need the slack) or, with
    ``strict_memory``, narrowed (every plan it admits fits, but it may miss one that fits exactly).
    ``below`` (exact mode): only a plan of value below it is wanted. Once a plan is known (one stage on every node,
    or the pass along one topological order), the DP skips every stage above it, and where the optimum is not below
    it there is no plan, with ``stats["none_below"]`` (a plan fits, above it); without either plan no stage is
    skipped, so that no plan still shows that none fits.
    """
    started = time.perf_counter()
    check_schedule(schedule)
    if mode not in MODES:
        raise InvalidParameterError("mode", f"must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
    m = instance.microbatches_in_batch
    types, tables, fit, rounded = memory_model(instance, devices, memory, tables, strict_memory, mode)
    # the table's least size (below), known before the stage degrees are listed: that loops over every device count
    least = math.prod(min(c, sum(types.counts), m) + 1 for c in types.counts)
    if (len(tables.ids) + 1) * least > MAX_CELLS:
        raise LimitExceededError(f"the DP table would have at least {(len(tables.ids) + 1) * least:,} cells (more than "
                                 f"{MAX_CELLS:,}): at least {len(tables.ids) + 1:,} sets × {least:,} device counts; "
                                 "lower devices", "devices")
    pairs = typed_pairs(tables, types, m, allowed)
    unplaceable = _node_without_degree(tables, pairs)
    if unplaceable is not None:   # every node sits in some stage: a proof that nothing fits
        return ParallelSolution(math.inf, None, time.perf_counter() - started, {"reason": unplaceable})
    alone = _node_alone(tables, pairs, types.memory if fit is None else fit.wide, None if uses_suffix(schedule) else m)
    if alone is not None:   # every node sits in some stage with y ≥ 1: a proof that nothing fits
        return ParallelSolution(math.inf, None, time.perf_counter() - started,
                                {"reason": f"node {alone} alone exceeds the memory at every allowed degree"})
    sets = listed_sets(tables, max_sets, progress, started) if sets is None else sets
    suffix = uses_suffix(schedule)
    total = sum(types.counts)
    multi = any(tables.degrees[k] > 1 for _, k, _ in pairs)
    collapsed = not (multi and (suffix or m < total))
    cap = min(total, m) if collapsed and not multi else total
    codes = Codes(tuple(min(c, cap) for c in types.counts))
    width = 1 if collapsed else min(total, m) + 1
    cells = len(sets.size) * codes.count * width
    if cells > MAX_CELLS:
        raise LimitExceededError(f"the DP table would have {cells:,} cells (more than {MAX_CELLS:,}): "
                                 f"{len(sets.size):,} sets × {codes.count} device counts × {width} degree sums; "
                                 "lower devices", "devices")
    ys = np.arange(cap + 2) if suffix else np.array([m // d for _, _, d in pairs], dtype=np.int64)
    arrays = _arrays(tables, sets, ys, max(types.speed))
    if not _differences_hold(tables, types, m, arrays["wtot"]):   # no dominant options: every stage summed apart
        tables = replace(tables, dominant=np.full_like(tables.dominant, -1))
        arrays = _arrays(tables, sets, ys, max(types.speed))
    stats: dict[str, Any] = {"sets": len(sets.size), "degree_pairs": len(pairs), "collapsed": collapsed,
                             "memory_rounded": rounded, "memory_as_written": fit is not None}

    # Ceilings, each the value of a real plan (Piper's heuristic picks fitting TMPCs): one stage on
    # all nodes, then the pipelines along one topological order.
    whole = list(range(len(tables.ids)))
    ceiling = min((stage_choice(tables, whole, k, d, in_flight(schedule, d, d, m), m, types.memory[tau],
                                types.bandwidth[tau], "greedy", types.speed[tau])[0]
                   for tau, k, d in pairs if d <= cap), default=math.inf)
    stats["one_stage_value"] = ceiling if math.isfinite(ceiling) else None
    capped = mode == "exact" and below < ceiling < math.inf   # a plan fits: every stage above below is skipped
    if capped:
        ceiling = below
    chain = chain_sets(tables)
    chain_arrays = _arrays(tables, chain, ys, max(types.speed))

    given_deadline = math.inf if deadline is None else deadline
    chain_found: list[tuple] = []   # the chain's last complete pass, the plan past the given deadline
    filled = [0]   # the sets the DP over every set has filled, past the given deadline

    def passes(kernels, deadline: float):
        """The chain's DP (its optimum lowers the ceiling), then the DP over every set; ``None`` when a
        pass stopped at ``deadline`` (:func:`time.perf_counter`; the chain's, only before the given one)."""
        chain_dp = _run(kernels, tables, chain, chain_arrays, pairs, cap, codes, width, collapsed, suffix, m, types,
                        fit, mode, ceiling, deadline if deadline < given_deadline else math.inf, descending=True,
                        tell=_every_second(progress, time.perf_counter(), "DP along one topological order (its "
                                           "plan bounds the DP over the sets)"))
        if chain_dp[2][4]:
            return None
        chain_found[:] = [chain_dp]
        lowered = min(ceiling, _best(chain_dp[0], chain.full, codes)[0])
        if mode == "exact" and below < lowered < math.inf:   # the chain's plan fits
            lowered = below
            stats["none_below"] = below

        def tell(done: int, count: int) -> None:
            filled[0] = done
            if shown is not None:
                shown(done, count)

        shown = _every_second(progress, time.perf_counter())
        # without a given deadline the chain's plan is never read: its table holds the full pass's where they agree
        # in size (a graph of one topological order)
        room = chain_found.pop()[:2] if given_deadline == math.inf else None
        full = _run(kernels, tables, sets, arrays, pairs, cap, codes, width, collapsed, suffix, m, types, fit, mode,
                    lowered, deadline, tell=tell, room=room)
        return None if full[2][4] else (lowered, *full)

    found = _fill_both(passes, cells, len(sets.size), compiled, stats, progress,
                       _knapsacks_needed(tables, types, int(ys.max()) if len(ys) else 0), mode == "greedy",
                       fit is not None, given_deadline)
    if found is None:   # past the given deadline: the chain's plan
        stats["out_of_time"] = (f"the time limit ran out while the DP filled its table ({filled[0]:,} of "
                                f"{len(sets.size):,} sets); the plan is the best pipeline along one topological order")
        if stats.get("not_compiled"):
            stats["out_of_time"] += f"; the DP ran in plain Python, its compiled kernels not cached ({NOT_COMPILED})"
        stats["lower_bound"] = arrays["wtot"] / total
        value, plan = math.inf, None
        if chain_found:
            chain_dp, (chain_set, chain_q), _ = chain_found[0]
            value, k, s = _best(chain_dp, chain.full, codes)
            if math.isfinite(value):
                plan = _reconstruct(tables, chain, chain_dp, chain_set, chain_q, pairs, k, s, codes, collapsed,
                                    schedule, m, types, fit, mode, value)
        return ParallelSolution(value, plan, time.perf_counter() - started, stats)
    ceiling, dp, (par_set, par_q), counters = found
    stats["chain_value"] = ceiling if math.isfinite(ceiling) else None
    value, k, s = _best(dp, sets.full, codes)
    if capped:
        stats["none_below"] = below
    if "none_below" in stats and value < stats["none_below"]:   # the optimum, below the cap
        del stats["none_below"]
    stats.update(pairs=int(counters[0]), stage_evaluations=int(counters[1]), knapsacks=int(counters[2]))
    if mode == "greedy":
        stats["greedy_not_monotone"] = int(counters[3])
    if not math.isfinite(value):
        return ParallelSolution(math.inf, None, time.perf_counter() - started, stats)
    plan = _reconstruct(tables, sets, dp, par_set, par_q, pairs, k, s, codes, collapsed, schedule, m, types, fit,
                        mode, value)
    return ParallelSolution(value, plan, time.perf_counter() - started, stats)


def listed_sets(tables: Tables, max_sets: int, progress: Callable[[str], None] | None, began: float) -> Family:
    """:func:`placement.parallel.tables.all_sets`, and, where they are listed a second or more after ``began`` (a
    :func:`time.perf_counter` value: a long graph, whose tables take seconds more), a line to ``progress`` saying
    how many there are."""
    sets = all_sets(tables, max_sets)
    if progress is not None and time.perf_counter() - began >= 1.0:
        progress(f"{len(sets.size):,} successor-closed sets over {len(tables.ids):,} nodes")
    return sets


def _every_second(progress: Callable[[str], None] | None, began: float,
                  what: str = "DP over the sets") -> Callable[[int, int], None] | None:
    """A ``tell(done, count)`` for :func:`_run` that passes a line on the pass ``what`` to ``progress`` at most
    once a second, the first a second after the first call (the first call's wait may be the kernels compiling,
    which their own line announces: a pass of a tiny instance says nothing more), with the seconds since
    ``began``; ``None`` without ``progress``."""
    if progress is None:
        return None
    last: list[float | None] = [None]

    def tell(done: int, count: int) -> None:
        now = time.perf_counter()
        if last[0] is None:
            last[0] = now
        elif now - last[0] >= 1.0:
            last[0] = now
            progress(f"{what}: {done:,} of {count:,} filled, {now - began:.0f} s (each set is "
                     "compared with those before it: the later take longer)")
    return tell


def _fill_both(passes: Callable, cells: int, sets: int, compiled: bool | None, stats: dict[str, Any],
               progress: Callable[[str], None] | None, knapsacks: bool, greedy: bool, written: bool,
               deadline: float = math.inf):
    """The result of ``passes`` (the chain's pass and the full one) with the kernels :func:`solve_parallel`
    chooses: plain Python for a table of at most 2,000 cells; else compiled, except that while they are not
    in numba's cache a family of at most :data:`INTERPRETED_SETS` sets is first tried in plain Python for
    :data:`INTERPRETED_SECONDS` (a second process compiles the stage evaluation meanwhile, which is stopped if
    that try succeeds); under a ``deadline`` closer than :data:`COMPILE_SECONDS`, kernels that would have to be
    compiled are not: plain Python runs to the deadline. ``knapsacks``, ``greedy``, ``written``: whether a stage
    may need a knapsack, Piper's greedy one, and memory decided on the sizes as written, which choose the stage
    evaluation the fill calls (:func:`placement.parallel._kernels.evaluator`). ``None`` where a pass stopped past
    ``deadline``."""
    def late() -> bool:
        return time.perf_counter() > deadline

    if compiled is False or compiled is None and cells <= 2_000:
        if compiled is None:
            stats["interpreted"] = True
        return passes(K.interpreted(greedy), deadline)
    kind = K.evaluator(knapsacks, greedy, written)
    if compiled is None and deadline - time.perf_counter() < COMPILE_SECONDS and \
            (K.fill_compiles() or K.functions_compile(kind)):   # compiling would take the time left, or more
        stats["interpreted"] = stats["not_compiled"] = True
        if progress is not None:
            progress(f"the DP's kernels are not in numba's cache, and compiling them (some seconds) would run past "
                     f"the deadline: plain Python until then ({NOT_COMPILED})")
        return passes(K.interpreted(greedy), deadline)
    kernels = K.kernels(True, kind, aside=True)
    try:
        if compiled is None and sets <= INTERPRETED_SETS and K.must_compile(kernels):
            found = passes(K.interpreted(greedy), min(deadline, time.perf_counter() + INTERPRETED_SECONDS))
            stats["interpreted"] = found is not None
            if found is not None or late():
                return found
        if progress is not None and K.must_compile(kernels):
            progress(compiling_note("the DP's kernels", "them"))
        found = passes(kernels, deadline)
        if found is None and not late():   # a stage needed a knapsack after all (rounding at the capacity)
            found = passes(K.kernels(True, K.evaluator(True, greedy, written)), deadline)
        return found
    finally:
        kernels.close()


def _differences_hold(tables: Tables, types: DeviceTypes, m: int, least_work: float) -> bool:
    """Whether the fill's fast stage values (:func:`placement.parallel._kernels.fill`), differences of two per-set
    sums of the dominant options' times and parameter sizes (:func:`_arrays`), are within :data:`SUM_TOLERANCE` of
    the least value any plan can have: ``least_work`` (Σ of the least ``t · time``, at the largest speed) over the
    devices. A sum of ``n`` non-negative terms is within ``(n − 1)·ε/2`` of their total, so a difference is within
    ``(n − 1)·ε`` times the larger sum: beside a TMPC far slower than the others (1e17 against 6) that is more
    than a whole stage's time, which the difference then lost, and the DP valued a stage of one fast node at
    its boundary alone."""
    n = len(tables.ids)
    has = tables.dominant >= 0
    dom = np.maximum(tables.dominant, 0)[:, :, None]
    time_sum = (np.take_along_axis(tables.time, dom, axis=2)[:, :, 0] * has).sum(axis=0).max(initial=0.0)
    params_sum = (np.take_along_axis(tables.params, dom, axis=2)[:, :, 0] * has).sum(axis=0).max(initial=0.0)
    error = max(n - 1, 0) * float(np.finfo(np.float64).eps) * (
        float(time_sum) / min(types.speed) + 4.0 * float(params_sum) / (m * min(types.bandwidth)))
    return error <= SUM_TOLERANCE * least_work / sum(types.counts)


def _knapsacks_needed(tables: Tables, types: DeviceTypes, most_in_flight: int) -> bool:
    """Whether some stage may need a knapsack: unless every node has a dominant option at every degree
    (every stage then takes its dominant options, :func:`placement.parallel._kernels.fill`'s ``fast``)
    and all nodes' dominant options together fit the smallest device with ``most_in_flight`` micro-batches
    in flight, the largest number any stage holds. Then the fill compiled without them serves."""
    available = tables.options > 0
    if np.any(available & (tables.dominant < 0)):
        return True
    dom = np.maximum(tables.dominant, 0)[:, :, None]
    mem_a = np.maximum(np.take_along_axis(tables.mem_a, dom, axis=2)[:, :, 0], 0.0)
    mem_b = np.maximum(np.take_along_axis(tables.mem_b, dom, axis=2)[:, :, 0], 0.0)
    need = (np.where(available, mem_a * most_in_flight + mem_b, 0.0)).sum(axis=0)   # per degree index
    return bool(np.any(need > min(types.memory) * (1.0 - 1e-9)))


def _node_without_degree(tables: Tables, pairs) -> str | None:
    """Why a node can be in no stage, where it has TMPCs at none of the tensor-parallel degrees of
    ``pairs`` (the degrees the devices, the micro-batches and the allowed pairs leave); else ``None``."""
    usable = sorted({tables.degrees[k] for _, k, _ in pairs})
    for r in range(len(tables.ids)):
        if not any(tables.options[r, k] for _, k, _ in pairs):
            own = sorted(t for k, t in enumerate(tables.degrees) if tables.options[r, k])
            left = (f"t = {', '.join(map(str, usable))} only" if usable else
                    "no tensor-parallel degree t that any node has")
            return (f"node {tables.ids[r]} fits no stage: it has TMPCs at t = {', '.join(map(str, own))} only, "
                    f"and the devices leave {left} (a stage takes t·d devices)")
    return None


def _node_alone(tables: Tables, pairs, memory: Sequence[float], gpipe_m: int | None) -> int | None:
    """The id of a node whose least memory alone exceeds its type's memory at every (type, degree, d) of
    ``pairs``, with the fewest micro-batches in flight there: ``y = 1`` (suffix schedules: ``y ≥ 1``) or
    ``y = m / d`` (``gpipe``, ``gpipe_m = m``). Every node sits in some stage, so then no plan fits."""
    placed = sorted({(tau, k, 1 if gpipe_m is None else gpipe_m // d) for tau, k, d in pairs})
    for r in range(len(tables.ids)):
        if all(tables.mem_a[r, k, l] * y + tables.mem_b[r, k, l] > memory[tau] for tau, k, y in placed
               for l in range(tables.options[r, k])):
            return tables.ids[r]
    return None


@dataclass(frozen=True)
class Codes:
    """Device counts per type ``(k_0, …, k_{T−1})``, ``k_τ ≤ bound[τ]``, coded as one index
    ``Σ k_τ·stride[τ]`` (one type: the count itself)."""

    bound: tuple[int, ...]

    @property
    def stride(self) -> np.ndarray:
        return np.cumprod([1] + [b + 1 for b in self.bound[:-1]]).astype(np.int64)

    @property
    def count(self) -> int:
        return math.prod(b + 1 for b in self.bound)   # Python's integers: no overflow

    def digits(self) -> np.ndarray:
        """``digits[code, τ]``: ``k_τ`` of every code."""
        index = np.arange(self.count, dtype=np.int64)[:, None]
        radix = np.array([b + 1 for b in self.bound], dtype=np.int64)[None, :]
        return (index // self.stride[None, :]) % radix


def _arrays(tables: Tables, sets: Family, ys: np.ndarray, fastest: float) -> dict[str, np.ndarray]:
    """Per-set sums of the dominant options and of the least memory at each ``y`` of ``ys``, bit masks
    per degree, and the device lower bounds (:func:`placement.parallel._kernels.fill`; ``fastest``: the
    largest speed of a device type, which divides the least ``t·time``)."""
    n, degrees = tables.options.shape
    words = sets.bits.shape[1]
    dom = np.maximum(tables.dominant, 0)
    pick = lambda a: np.take_along_axis(a, dom[:, :, None], axis=2)[:, :, 0] * (tables.dominant >= 0)  # noqa: E731
    member = sets.member.astype(np.float64)
    missing = np.zeros((degrees, words), dtype=np.uint64)
    nondom = np.zeros((degrees, words), dtype=np.uint64)
    for r in range(n):
        for k in range(degrees):
            bit = np.uint64(1) << np.uint64(r & 63)
            if tables.options[r, k] == 0:
                missing[k, r >> 6] |= bit
            elif tables.dominant[r, k] < 0:
                nondom[k, r >> 6] |= bit
    e_in = np.take_along_axis(tables.sync_in, dom[tables.dst][:, :, None], axis=2)[:, :, 0]
    e_out = np.take_along_axis(tables.sync_out, dom[tables.src][:, :, None], axis=2)[:, :, 0]
    scale = np.array(tables.degrees, dtype=np.float64)[None, :, None]
    available = np.arange(tables.time.shape[2])[None, None, :] < tables.options[:, :, None]
    least = np.where(available, tables.time * scale, np.inf).min(axis=(1, 2)) / fastest
    least[~np.isfinite(least)] = 0.0
    available_mem = np.where(available[:, :, :, None], tables.mem_a[:, :, :, None] * ys[None, None, None, :]
                             + tables.mem_b[:, :, :, None], np.inf).min(axis=2)     # (n, degrees, len(ys))
    available_mem[~np.isfinite(available_mem)] = 0.0
    lowm = (member @ available_mem.reshape(n, -1)).reshape(len(sets.size), degrees, len(ys))
    return {"missing": missing, "nondom": nondom, "lowm": lowm, "f_time": member @ pick(tables.time),
            "f_params": member @ pick(tables.params), "f_a": member @ pick(tables.mem_a),
            "f_b": member @ pick(tables.mem_b), "f_in": 2.0 * (tables.cost[:, None] + e_in),
            "f_out": 2.0 * (tables.cost[:, None] + e_out), "wlb": member @ least, "wtot": float(least.sum())}


#: the most calls one fill is cut into: between two, the clock is read, progress told and Ctrl-C heard
FILL_CALLS = 64


def fill_stretches(count: int, calls: int = FILL_CALLS) -> list[int]:
    """Bounds ``0 = b_0 < b_1 < ... = count`` of the stretches of the sets by size that the calls of one
    fill take, of about equal work: set ``a`` is compared with the sets before it, so the work up to it
    grows as ``a²`` and the bounds as ``count · sqrt(j / calls)``."""
    cuts = {min(count, math.ceil(count * math.sqrt(j / calls))) for j in range(1, calls + 1)} if count else set()
    return [0, *sorted(cuts - {0})]


def _run(kernels, tables: Tables, sets: Family, arrays, pairs, cap, codes: Codes, width, collapsed, suffix, m,
         types: DeviceTypes, fit: WrittenFit | None, mode, ceiling, deadline, descending=False,
         tell: Callable[[int, int], None] | None = None, room: tuple[np.ndarray, np.ndarray] | None = None):
    """One fill over ``sets`` (:func:`placement.parallel._kernels.fill`), in the calls of
    :func:`fill_stretches`; it stops (``counters[4] = 1``) past ``deadline`` (:func:`time.perf_counter`), read
    between calls and, in plain Python, within them; ``tell(done, count)`` hears after each call.
    ``fit``: the sizes as written, on which a stage near the narrowed bounds ``types.memory`` is decided
    (:func:`placement.parallel._kernels.evaluate`).
    ``descending``: each set's subsets in decreasing size (its last stage smallest first), for a pass whose
    value alone is read: small stages set low cell values early, which then bound the knapsacks of large
    ones, but ties between plans may fall the other way.
    Returns the table, the (set, pair) of each finite cell's last stage (``int32``: sets and pairs stay below
    2^31, as the table's cells do) and the counters. ``room``: the table and parents of a pass no longer read,
    filled in place where they have this pass's shape (the fill sets every cell of a set before reading it, and
    reads parents only where the cell is finite): a second table of the same size is neither allocated nor
    touched for the first time, which costs more than the fill of a sparse one."""
    count = len(sets.size)
    by_size = np.argsort(sets.size, kind="stable").astype(np.int64)
    shape = (count, codes.count, width)
    if room is not None and room[0].shape == shape:   # every cell the fill reads, it sets first
        dp, parent = room
    else:
        dp, parent = np.empty(shape), np.empty((2, *shape), dtype=np.int32)
    counters = np.zeros(5, dtype=np.int64)
    digits = codes.digits()
    rising = mode != "greedy" and bool((tables.mem_a >= 0).all())   # exact stage values rise with y
    config = np.array([cap, width, collapsed, suffix, m, mode == "greedy", rising, descending, 0, 0,
                       0 if fit is None else fit.shift], dtype=np.int64)
    kinds = _kinds(types, fit)
    opt, sync, ends, ptr = tables.packed
    if fit is not None:
        opt = np.ascontiguousarray(np.concatenate([opt, fit.figures]))
    pair_rows = np.array([[k for _, k, _ in pairs], [d for _, _, d in pairs], [tau for tau, _, _ in pairs]],
                         dtype=np.int64).reshape(3, len(pairs))
    arguments = (np.stack([by_size, sets.size.astype(np.int64)]), sets.bits, np.array(tables.degrees, dtype=np.int64),
                 pair_rows, config, kinds, np.array([codes.bound, codes.stride], dtype=np.int64),
                 np.hstack([digits, digits.sum(axis=1)[:, None]]), np.stack([arrays["missing"], arrays["nondom"]]),
                 np.stack([arrays["f_time"], arrays["f_params"], arrays["f_a"], arrays["f_b"]]),
                 np.stack([arrays["f_in"], arrays["f_out"]]), arrays["lowm"], arrays["wlb"],
                 np.array([arrays["wtot"], ceiling, deadline, time.perf_counter()], dtype=np.float64),
                 sets.cut_ptr, sets.cut_idx, tables.cost, sync, ends, ptr, opt, tables.options, dp, parent, counters,
                 *K.workspace(count, tables.options.shape[0], tables.time.shape[2], sets.bits.shape[1], cap, suffix,
                              len(pairs), codes.count, width))
    stretches = fill_stretches(count)
    for lo, hi in zip(stretches, stretches[1:]):
        config[8], config[9] = lo, hi
        kernels.fill(*arguments)
        if counters[4]:
            break
        if tell is not None:
            tell(hi, count)
        if hi < count and time.perf_counter() > deadline:
            counters[4] = 1
            break
    return dp, parent, counters


def _kinds(types: DeviceTypes, fit: WrittenFit | None) -> np.ndarray:
    """The device types as :func:`placement.parallel._kernels.fill` reads them: (bytes per device, bandwidth,
    speed, widened bytes per device) per type, and with ``fit`` the bytes as written split (``fit.capacity``)."""
    kinds = np.array([types.memory, types.bandwidth, types.speed, types.memory if fit is None else fit.wide],
                     dtype=np.float64)
    return kinds if fit is None else np.ascontiguousarray(np.vstack([kinds, fit.capacity]))


def _best(dp: np.ndarray, full: int, codes: Codes) -> tuple[float, int, int]:
    """The least value over device counts and degree sums; ties to the fewest devices (then the least
    code: the fewest of the last types), then the least sum."""
    table = dp[full]
    value = float(table.min()) if table.size else math.inf
    if not math.isfinite(value):
        return math.inf, -1, -1
    ks, ss = np.nonzero(table == value)
    first = np.lexsort((ss, ks, codes.digits().sum(axis=1)[ks]))[0]
    return value, int(ks[first]), int(ss[first])


def stage_choice(tables: Tables, nodes: list[int], k: int, d: int, y: int, m: int, capacity: float,
                 bandwidth: float, mode: str, speed: float = 1.0, fit: WrittenFit | None = None,
                 tau: int = 0) -> tuple[float, list[int]]:
    """The stage value and the option of each of ``nodes`` (node numbers, ascending) at degree index
    ``k`` on devices of ``capacity`` bytes, ``bandwidth`` and ``speed``: the dominant options where they
    all exist and fit, else the knapsack of ``mode``. With ``fit`` (exact mode; ``capacity`` narrowed, type
    ``tau``), as :func:`placement.parallel._kernels.evaluate` values it: the dominant options where they fit
    ``capacity``, else the exact knapsack on the widened bound where its choice fits as written, else the one
    on the sizes as written (:func:`placement.parallel._kernels.knapsack_written`)."""
    n, _, width = tables.time.shape
    if any(tables.options[r, k] == 0 for r in nodes):
        return math.inf, []
    words = (n + 63) // 64
    xb = np.zeros(words, dtype=np.uint64)
    for r in nodes:
        xb[r >> 6] |= np.uint64(1) << np.uint64(r & 63)
    count = np.zeros(n, dtype=np.int64)
    rows = np.zeros(n, dtype=np.int64)
    buffers = np.zeros((7, n, width))
    opt, sync, ends, ptr = tables.packed
    items = K.stage_items(xb, k, opt, tables.options, tables.cost, sync, ends, ptr, rows, count, buffers)
    K.item_costs(items, count, buffers, d, y, m, bandwidth, speed)
    cost, mem = buffers[5], buffers[6]
    dominant = [int(tables.dominant[r, k]) for r in nodes]
    if all(l >= 0 for l in dominant) and sum(mem[i, l] for i, l in enumerate(dominant)) <= capacity:
        return sum(cost[i, l] for i, l in enumerate(dominant)), dominant
    choice = np.zeros(items, dtype=np.int64)
    if fit is not None and mode == "exact" and math.isfinite(fit.capacity[0, tau]):
        bound = np.vstack([np.zeros((4, fit.capacity.shape[1])), fit.capacity])   # rows 4, 5: as the fill's
        split = np.concatenate([opt, fit.figures])
        value = K.knapsack_exact(count[:items], cost[:items], mem[:items], fit.wide[tau], math.inf, choice)
        if value < math.inf and not K.fits_as_written(items, rows, choice, k, y, split, bound, tau, fit.shift):
            value = K.knapsack_written(count[:items], cost[:items], mem[:items], fit.wide[tau], math.inf, choice, rows,
                                       k, y, split, bound, tau, fit.shift)
        return value, choice.tolist()
    knapsack = K.knapsack_greedy if mode == "greedy" else K.knapsack_exact
    value = knapsack(count[:items], cost[:items], mem[:items], capacity, math.inf, choice)
    return value, choice.tolist()


def _reconstruct(tables, sets, dp, par_set, par_q, pairs, k, s, codes: Codes, collapsed, schedule, m,
                 types: DeviceTypes, fit: WrittenFit | None, mode, value) -> ParallelPlan:
    stages = []
    current = sets.full
    totals = codes.digits().sum(axis=1)
    stride = codes.stride
    while sets.size[current] > 0:
        nxt, q = int(par_set[current, k, s]), int(par_q[current, k, s])
        tau, degree_index, d = pairs[q]
        t = tables.degrees[degree_index]
        nodes = np.flatnonzero(sets.member[current] & ~sets.member[nxt]).tolist()
        suffix_sum = int(totals[k]) if collapsed else s
        y = in_flight(schedule, suffix_sum, d, m)
        stage_value, choice = stage_choice(tables, nodes, degree_index, d, y, m, types.memory[tau],
                                           types.bandwidth[tau], mode, types.speed[tau], fit, tau)
        if not stage_value <= value * (1 + 1e-9):   # cannot happen: the table holds this stage's value
            raise AssertionError(f"stage value {stage_value} above the DP's optimum {value}")
        tmpcs = {tables.ids[r]: tables.tmpc_ids[r][degree_index][l] for r, l in zip(nodes, choice)}
        stages.append(ParallelStage(tuple(sorted(tables.ids[r] for r in nodes)), d, t, tmpcs, types.names[tau]))
        k -= d * t * int(stride[tau])
        s = 0 if collapsed else s - d
        current = nxt
    return ParallelPlan(tuple(stages), schedule)


__all__ = ["DEFAULT_MAX_SETS", "MODES", "DeviceTypes", "ParallelSolution", "degree_pairs", "device_types",
           "memory_model", "solve_parallel", "stage_choice", "typed_pairs"]
