"""One run of the DP over ideals (:mod:`placement.solvers.dp`) on a given family of ideals.

Model
-----
The family is any down-closed set of ideals of the contracted forward graph
(:mod:`placement.solvers.ideals`) that holds ∅ and V: all the ideals (the full DP), or
the prefixes of a few topological orders (the chain DP, :mod:`placement.solvers.chain_dp`).
:func:`fill` fills, for every ideal ``I`` of the family and every layer ``L``, the table
``dp[L][I]`` of the recurrence of :mod:`placement.solvers.dp` (with ``stages``: its
exact-``N`` table ``e``). Layers are the vectors of device counts ``n ≤ k`` numbered in
mixed radix, ``prev[L][t]`` the layer ``L - e_t``; ideals are processed in a linear
extension of ⊆ (by compute on the first type, then size). Each cell keeps its value, the
ideal ``I'`` it extends (``parent``) and its ``choice``: the type ``t`` of the block
``I \\ I'``, or ``T + t`` when it takes ``dp[L - e_t][I]`` (a device of type ``t`` left
unused; never in exact-``N`` mode). :func:`extract` walks these back from ``dp[k][V]``, or
from the best ``e[L][V]`` with ``|L| = N``, into a plan with its devices in pipeline order.

An upper bound ``UB`` (∞: none) prunes the run: values above it are never needed, and a
device of type ``t`` holds at most :func:`_device_capacity` of work ``Σ_v min_t p_t(v)``
in any plan of max-load ``≤ UB`` (a fractional knapsack bound), so a layer is skipped
for ``I`` when the work of ``I`` cannot fit its devices, or the work of ``V \\ I`` the
devices left (with ``stages=N``: the best ``N - |L|`` of the devices left).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.instance import Instance
from placement.problem.memory_fit import CLEAR, LENIENT, as_written, decimal_unit, which_bind
from placement.plan import DeviceAssignment, Plan
from placement.solvers import _dp_kernels as K
from placement.solvers.ideals import Contraction, csr, edge_positions, sorted_distinct
from placement.wording import counted

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Graph:
    """Supernode-level arrays shared by the chain DP and the ideal DP."""

    contraction: Contraction
    comp: np.ndarray       # (S, T) compute per type (unsupported nodes contribute 0)
    unsup: np.ndarray      # (S, T) number of nodes unsupported on the type
    mem: np.ndarray        # (S, 1) memory in the unit of memcap; with mem_lo, the high part (mem_scale)
    pmin: np.ndarray       # (S, 1) Σ min_t p_t(v)
    pred_ptr: np.ndarray   # predecessors of each supernode in the contracted graph (CSR)
    pred_idx: np.ndarray
    touch_ptr: np.ndarray  # per supernode s, the cost nodes u with s ∈ N[u], ascending (CSR)
    touch_idx: np.ndarray
    degree: np.ndarray     # |N[u]| per cost node
    cost: np.ndarray
    memcap: np.ndarray
    pays: np.ndarray
    work_nodes: np.ndarray  # (N, T+1) per node: pmin(v), then p_t(v) (inf if unsupported)
    #: where one float per size would not sum exactly: sizes and bounds as ``mem · mem_scale + mem_lo``
    #: (:func:`_split_memory`); else ``mem_lo`` and ``memcap_lo`` 0 and ``mem_scale`` 1
    mem_lo: np.ndarray      # (S, 1)
    memcap_lo: np.ndarray
    mem_scale: float
    memory_exact: bool = True  # memory in whole numbers whose sums are exact, in one part or two (_split_memory)


@dataclass(frozen=True)
class Layers:
    counts: np.ndarray       # (L, T)
    prev: np.ndarray         # (L, T)
    full: int

    @property
    def size(self) -> np.ndarray:
        """Number of devices per layer."""
        return self.counts.sum(axis=1)

    @property
    def above(self) -> np.ndarray:
        """``(L, T)``: the layer with one device of type t more (-1 if none), the inverse of ``prev``."""
        above = np.full_like(self.prev, -1)
        layer, kind = np.nonzero(self.prev >= 0)
        above[self.prev[layer, kind], kind] = layer
        return above


def build_graph(problem: Instance, contraction: Contraction, relaxed_memory: bool = False) -> Graph:
    """The supernode-level arrays of the DP, in numpy operations over the nodes and edges (linear time).
    Where the memory sizes have no exact unit, they are held in two whole parts (:func:`_split_memory`), and
    where those overflow too, rounded; ``relaxed_memory`` then rounds them the other way
    (:func:`_rounded_memory`): the DP then admits every block that fits, and some that do not."""
    types = problem.device_types
    nodes = problem.nodes
    n_types = len(types)
    size = contraction.size
    of = np.asarray(contraction.of_node, dtype=np.int64)
    times = np.array([[math.inf if p is None else p for p in node.times] for node in nodes],
                     dtype=np.float64).reshape(len(nodes), n_types)
    supported = np.isfinite(times)
    exists = np.array([t.count > 0 for t in types], dtype=np.bool_)
    cheapest = np.where(supported & exists, times, math.inf).min(axis=1, initial=math.inf)

    def per_supernode(weights: np.ndarray) -> np.ndarray:  # sums in node order, as the evaluator's
        return np.bincount(of, weights=weights, minlength=size).astype(np.float64)

    comp = np.column_stack([per_supernode(np.where(supported[:, t], times[:, t], 0.0)) for t in range(n_types)])
    unsup = np.column_stack([per_supernode(~supported[:, t]) for t in range(n_types)]).astype(np.int64)
    sizes = [node.memory for node in nodes]
    binding_types = which_bind(sizes, [t.memory for t in types])   # the model's rule, not the rounded total
    binding = [t.memory for t, b in zip(types, binding_types) if b]
    # a node that no type with a binding bound runs never counts against a bound: its size (a CPU-only
    # node's 1e16 bytes) is left out of the sums, where it would leave the others no exact unit
    bounded = supported[:, [t for t, b in enumerate(binding_types) if b]].any(axis=1)
    sizes = [size if runs else 0.0 for size, runs in zip(sizes, bounded)]
    total = math.fsum(sizes)
    unit = decimal_unit(sizes + binding, total) if binding else 1.0
    # in an exact unit, a block's memory as a difference of prefix sums is exact (memory_fit)
    scaled_sizes = np.array(sizes, dtype=np.float64) * (unit or 1.0)
    capacity = [t.memory * (unit or 1.0) if b else math.inf for t, b in zip(types, binding_types)]
    split = None if unit is not None else _split_memory(sizes, capacity, of, size)
    if unit is None and split is None:
        scaled_sizes, capacity = _rounded_memory(sizes, capacity, total, relaxed_memory)
    mem = per_supernode(scaled_sizes)[:, None]
    mem_lo, capacity_lo, mem_scale = np.zeros((size, 1)), [0.0] * len(capacity), 1.0
    if split is not None:
        (mem, mem_lo), (capacity, capacity_lo), mem_scale = split
    pmin = per_supernode(cheapest)[:, None]
    work_nodes = np.column_stack([cheapest, times])
    # Cost nodes: positive transfer cost and a successor in another supernode; N[u] as supernodes.
    out_cost = np.array([node.out_cost for node in nodes], dtype=np.float64)
    src, dst = edge_positions(problem)
    owner = np.concatenate([src, np.arange(len(nodes), dtype=np.int64)])
    group = np.concatenate([of[dst], of])
    paying = out_cost[owner] > 0
    pairs = sorted_distinct(owner[paying] * max(size, 1) + group[paying])   # (node, supernode of N[node]), sorted
    u, g = pairs // max(size, 1), pairs % max(size, 1)
    groups = np.bincount(u, minlength=len(nodes))
    eligible = groups >= 2
    cost_index = np.cumsum(eligible) - 1                              # cost nodes numbered in node order
    keep = eligible[u]
    cu, g = cost_index[u[keep]], g[keep]
    by_supernode = np.lexsort((cu, g))
    touch_idx = cu[by_supernode].astype(np.int64)
    touch_ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(g, minlength=size), out=touch_ptr[1:])
    succ_ptr, succ_idx = csr(contraction.succ)
    by_target = np.argsort(succ_idx, kind="stable")
    pred_idx = np.repeat(np.arange(size, dtype=np.int64), np.diff(succ_ptr))[by_target]
    pred_ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(succ_idx, minlength=size), out=pred_ptr[1:])
    return Graph(contraction, comp, unsup, mem, pmin, pred_ptr, pred_idx, touch_ptr, touch_idx,
                 groups[eligible].astype(np.int64), out_cost[eligible],
                 np.array(capacity, dtype=np.float64),
                 np.array([t.pays_comm for t in types], dtype=np.bool_), work_nodes, mem_lo,
                 np.array(capacity_lo, dtype=np.float64), mem_scale, unit is not None or split is not None)


def _split_memory(sizes: list[float], bounds: list[float], of: np.ndarray,
                  size: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[list[float], list[float]], float] | None:
    """Memory as written where no unit makes it whole numbers whose sums stay below ``2^53``
    (:func:`placement.problem.memory_fit.decimal_unit`; sizes of 17 significant digits, GiB computed from bytes):
    in the least unit in which every size and bound (``bounds``, ``inf`` where it does not bind) is whole as
    written, each supernode's memory ``N`` (its nodes' summed exactly; supernode of node ``v``: ``of[v]``, of
    ``size``) and each bound is split as ``hi · 2^shift + lo`` with ``0 ≤ lo < 2^shift``, the least ``shift``
    that keeps the sum of every ``hi`` below ``2^52``. Every sum and difference of either part over ideals is
    then exact in floating point, and so is the sign of ``Δhi · 2^shift + Δlo`` (the DP's test,
    :func:`placement.solvers._dp_kernels.dp_range`): memory is decided as the evaluator decides it. Returns the
    parts ``(hi, lo)`` per supernode (``(S, 1)`` each), the bounds' ``(hi, lo)`` and ``2^shift``; ``None`` where
    the ``lo`` parts of ``size`` supernodes could reach ``2^52`` (sizes some 30 orders of magnitude apart)."""
    finite = [b for b in bounds if math.isfinite(b)]
    written = [as_written(x) for x in sizes]
    unit = math.lcm(*(f.denominator for f in written), *(as_written(b).denominator for b in finite))
    per = [0] * size
    for v, w in zip(of.tolist(), written):
        per[v] += int(w * unit)
    total = sum(per)
    shift = max(0, total.bit_length() - 52)
    if (size + 1) << shift >= 2 ** 52:
        return None
    hi = np.array([float(w >> shift) for w in per])[:, None]
    lo = np.array([float(w & ((1 << shift) - 1)) for w in per])[:, None]
    caps, caps_lo = [], []
    for b in bounds:
        whole = int(as_written(b) * unit) if math.isfinite(b) else None
        if whole is None or whole >= total:   # no set of nodes exceeds it
            caps.append(math.inf)
            caps_lo.append(0.0)
        else:
            caps.append(float(whole >> shift))
            caps_lo.append(float(whole & ((1 << shift) - 1)))
    return (hi, lo), (caps, caps_lo), float(2 ** shift)


def _rounded_memory(sizes: list[float], bounds: list[float], total: float,
                    relaxed: bool = False) -> tuple[np.ndarray, list[float]]:
    """Sizes and bounds where no unit makes them exact integers (:func:`decimal_unit`), not even in two parts
    (:func:`_split_memory`): in the power of
    two that brings the total near ``2^52``, sizes rounded up and bounds, less twice
    :data:`placement.problem.memory_fit.CLEAR` of themselves, rounded down. Every sum is then an exact
    integer, and every set of nodes the DP lets a device hold fits it by the model's rule with room
    to spare (the rule decides such a sum on its rounded value), so every plan it finds is valid;
    the DP may miss plans that fill a bound to within that margin, so its optimum is no proof.

    ``relaxed``: the other way, sizes rounded down and bounds, plus
    :data:`placement.problem.memory_fit.LENIENT` of themselves, rounded up. Every set that fits by the
    model's rule is then admitted (its scaled sizes sum to at most its floating-point sum, which is
    within ``LENIENT`` of the bound), so the DP's optimum is a lower bound, and its plan, where the
    evaluator finds it valid, is optimal."""
    unit = math.ldexp(1.0, 52 - max(1, math.frexp(max(total, 1e-300))[1]))
    scaled = np.array(sizes, dtype=np.float64) * unit
    if relaxed:
        return np.floor(scaled), [math.ceil(M * (1 + LENIENT) * unit) if math.isfinite(M) else M for M in bounds]
    return np.ceil(scaled), [math.floor(M * (1 - 2 * CLEAR) * unit) if math.isfinite(M) else M for M in bounds]


def _device_capacity(work_nodes: np.ndarray, t: int, budget: float) -> float:
    """Most Σ pmin(v) one device of type t can hold with Σ p_t(v) ≤ budget (fractional knapsack bound).

    Every plan with max-load ≤ budget puts on each device of type t a node set
    whose pmin-work is at most this value, so Σ over devices bounds the work
    any set of devices can take.
    """
    pmin, p = work_nodes[:, 0], work_nodes[:, t + 1]
    usable = np.isfinite(p) & (p > 0) & (pmin > 0)  # pmin ≤ p here, so nodes with p = 0 carry no work
    ratio = np.zeros(len(p))
    ratio[usable] = pmin[usable] / p[usable]
    capacity = 0.0
    for v in np.argsort(-ratio, kind="stable"):
        if ratio[v] <= 0 or budget <= 0:
            break
        take = min(p[v], budget)
        capacity += take * ratio[v]
        budget -= take
    return capacity


def build_layers(problem: Instance, ideals: int = 2) -> Layers:
    """Every combination of device counts (a layer: how many devices of each type a prefix of the
    pipeline uses), numbered in mixed radix, with the layer one device of each type fewer. Refused
    (:func:`check_states`, :func:`check_layers`) where the DP's tables for ``ideals`` ideals (at least ∅
    and V), or those with the combinations themselves, would be too large, before any is built."""
    factors = [t.count + 1 for t in problem.device_types]   # the values each type's count takes
    n_layers = math.prod(factors)
    check_states(ideals, n_layers, factors)
    check_layers(ideals, n_layers, factors)
    radix = np.cumprod([1] + factors)[:-1].astype(np.int64)   # a type's step in the numbering
    number = np.arange(n_layers, dtype=np.int64)
    counts = np.empty((n_layers, len(factors)), dtype=np.int64)
    for t, factor in enumerate(factors):
        counts[:, t] = (number // radix[t]) % factor
    prev = number[:, None] - radix[None, :]
    prev[counts == 0] = -1
    return Layers(counts, prev, n_layers - 1)


@dataclass
class Table:
    """A DP run's arrays, ideals in processing order."""

    bits: np.ndarray       # (n, words) the ideals as packed bitsets over supernodes (no words: a prefix family)
    dp: np.ndarray
    parent: np.ndarray
    choice: np.ndarray
    counters: np.ndarray
    full: int
    popcount: np.ndarray                # supernodes per ideal
    prefix: np.ndarray | None = None    # a prefix family's order (ideal of k supernodes: prefix[1:k + 1])


def _best_devices(rest: np.ndarray, per_device: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per layer: the summed capacity of the ``wanted[L]`` largest of the devices ``rest[L]``."""
    out = np.zeros(len(rest))
    by_capacity = np.argsort(-per_device, kind="stable")
    for L in range(len(rest)):
        left = int(wanted[L])
        for t in by_capacity:
            if left <= 0:
                break
            take = min(left, int(rest[L, t]))
            out[L] += take * per_device[t]
            left -= take
    return out


#: Families of more than this much work (ideals² × types × layers: what the windows could scan) start on the
#: compiled kernels, as do all where those are set up in the process already. The others start
#: interpreted, and a run under a ceiling moves to the compiled kernels where its size
#: (:func:`run_units`) passes :data:`INTERPRETED_UNITS`. The work is far above what the windows hold on
#: most graphs (ResNet-50's layer graph: 1.6 million units, 2,262 pairs scanned, 0.05 s interpreted), so
#: it cannot tell alone which runs pay for loading the compiled kernels (about 0.4 s) or compiling them.
COMPILED_FROM_WORK = 20_000_000
#: Families of more than this many ideals × (1 + edges per supernode) also start compiled: building their
#: tables (the ideals' maxima and cuts) takes about 2-3 µs a unit interpreted (a 700-node total order:
#: 245,000 units, 0.63 s).
COMPILED_FROM_ENTRIES = 100_000
#: Run units past which a run moves to the compiled kernels: about what loading them from numba's cache
#: costs interpreted (a unit takes 0.1-0.9 µs: the bundled BERT-Base training graph's largest run, 416,780
#: units, about 0.25 s), and, while they are not cached yet (a fresh install), what compiling them costs.
INTERPRETED_UNITS = 500_000
INTERPRETED_UNITS_UNCOMPILED = 5_000_000


def prefix_family(order: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The prefixes ∅ ⊂ {o_1} ⊂ {o_1, o_2} ⊂ … of an order, as a family ``(parent, added)``."""
    parent = np.arange(-1, len(order), dtype=np.int64)
    added = np.array([-1] + list(order), dtype=np.int64)
    return parent, added


def is_prefix_family(family: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether every ideal of the family but ∅ adds one supernode to the one before it: the family is
    the prefixes of one order, a chain under ⊆ (as :func:`prefix_family` builds it, or the enumeration
    of all ideals of a graph that has no others)."""
    parent = family[0]
    return bool(np.array_equal(parent[1:], np.arange(len(parent) - 1)))


def starts_compiled(n: int, graph: Graph, layers: Layers, compiled: bool | None = None) -> bool:
    """Whether the DP over a family of ``n`` ideals starts on the compiled kernels: ``compiled`` where given,
    else where they are set up in this process already, or the family's work (``n² × types × layers``)
    exceeds :data:`COMPILED_FROM_WORK` or its tables :data:`COMPILED_FROM_ENTRIES`. A family that starts
    interpreted by default moves to them for a large run (:func:`fill`)."""
    if compiled is not None:
        return compiled
    entries = n * (1 + len(graph.pred_idx) / max(1, graph.contraction.size))
    return (n * n * graph.comp.shape[1] * len(layers.counts) > COMPILED_FROM_WORK or entries > COMPILED_FROM_ENTRIES
            or K.ready())


def window_pairs(comp_t: np.ndarray, ceiling: float) -> int:
    """The candidates a run under ``ceiling`` scans at most: for each type ``t`` (``comp_t[t]``: every ideal's
    compute on it) and ideal ``I``, the ideals before ``I`` in the order of compute whose compute is above
    ``A_t(I) − ceiling`` (a window ends where the compute alone reaches the ceiling, or sooner)."""
    n_types, n = comp_t.shape
    if not math.isfinite(ceiling):
        return n_types * n * (n - 1) // 2
    pairs = 0
    for t in range(n_types):
        values = np.sort(comp_t[t])
        first = np.searchsorted(values, values - ceiling, "right")
        pairs += int(np.maximum(np.arange(n) - first, 0).sum())
    return pairs


def run_units(comp_t: np.ndarray, n_layers: int, ceiling: float) -> int:
    """The size of a run under ``ceiling`` over a family with computes ``comp_t`` (types × ideals) and
    ``n_layers`` device layers: each ideal visits every layer on every type, and each candidate of its
    windows (:func:`window_pairs`) checks up to every layer."""
    return n_layers * (window_pairs(comp_t, ceiling) + comp_t.size)


#: Families of at least this many ideals announce their table build in the progress, and builds
#: that take at least this many seconds report their time
LARGE_FAMILY, PREPARE_NOTED_S = 50_000, 1.0
#: ideals whose data :func:`prepare` makes in one kernel call, between two looks at the deadline and at Ctrl-C
#: (about 0.3 s on the 2×1000 ladder's 501,501 ideals, where one call for the whole family took 17 s)
BUILD_CHUNK = 10_000

#: Bytes one entry of the ideals' maxima and cuts (:func:`._dp_kernels.family_data`) takes at most: three
#: int64 arrays, each grown by doubling, so at most twice the entries and, while one is copied, three times
BYTES_PER_ENTRY = 3 * 3 * 8
#: Bytes the DP keeps per ideal and combination of device counts: its value, parent and choice
BYTES_PER_STATE = 3 * 8


def memory_budget() -> float:
    """Bytes the DP's tables may take: 80% of the memory available now (``MemAvailable`` of
    ``/proc/meminfo``), else half the physical memory, else no limit."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return 0.8 * int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return math.inf


def value_columns(n_types: int) -> int:
    """The sums every ideal keeps (:func:`prepare`): compute and unsupported nodes per type, memory in its
    two parts (:class:`Graph`'s ``mem`` and ``mem_lo``) and ``Σ pmin``."""
    return 2 * n_types + 3


def bytes_per_ideal(n_values: int, supernodes: int, n_types: int, n_layers: int, bitsets: bool = True) -> int:
    """Bytes every ideal takes in the tables besides its maxima and cuts: its sums, bitset row (where
    ``bitsets``) and offsets (twice: as found and in processing order), its places in the orders per
    type, and its value, parent and choice per layer."""
    words = max(1, (supernodes + 63) // 64) if bitsets else 0
    return 2 * 8 * (n_values + words + 5) + 4 * 8 * n_types + BYTES_PER_STATE * n_layers


def most_ideals(graph: Graph, layers: Layers, budget: float | None = None) -> int:
    """The most ideals whose fixed-size data fits ``budget`` (default: :func:`memory_budget`) even without
    bitset rows, and at most ``2^62`` (the kernels count in 64-bit integers): a count past it cannot be
    solved here, so counting need go no further."""
    budget = memory_budget() if budget is None else budget
    n_types = graph.comp.shape[1]
    per_ideal = bytes_per_ideal(value_columns(n_types), graph.contraction.size, n_types, len(layers.counts), False)
    return int(min(budget / per_ideal, MAX_STATE_BYTES / (BYTES_PER_STATE * len(layers.counts)), 2.0 ** 62))


def too_many_for_memory(most: int, graph: Graph, layers: Layers) -> LimitExceededError:
    """The refusal of a graph with more than ``most`` (:func:`most_ideals`) ideals: :func:`check_states`'s
    where the tables per combination of device counts bind, else the memory's."""
    try:
        check_states(most + 1, len(layers.counts), more=True)
    except LimitExceededError as exc:
        return exc
    return LimitExceededError(
        f"more than {most:,} ideals in the contracted graph ({counted(graph.contraction.size, 'supernode')}): the "
        f"DP's tables would take more than the {memory_budget() / 2.0 ** 30:,.1f} GiB of memory it may use (80% of "
        "the memory available), so counting stopped there; coarsen the graph by giving nodes that belong together "
        "one colour class, or solve the MILP")


#: the most (ideal, combination of device counts) entries the DP fills between two deadline checks
STATES_PER_CHUNK = 2 ** 16

#: the pairs of the window (ideal, ideal below it) the first call of the kernel examines at most before it
#: returns; later calls take as many as the last one examined in CHUNK_S, at most eight times as many as it
#: could
FIRST_PAIRS = 2 ** 16

#: about how long one call of the kernel runs before the DP looks at the clock, the deadline and Ctrl-C again
CHUNK_S = 0.25

#: the most bytes the DP's value, parent and choice per ideal and combination of device counts may take,
#: whatever the memory: a catalogue of many device types multiplies the combinations (6 types of 8 devices
#: and a CPU: 9^6 · 2 of them, 12.7 GB of tables for a 500-node chain, and filling one ideal's column
#: touches a page of every combination's row). The published instances need at most about 0.1 GiB; two
#: types of 64 and 32 devices on two parallel chains of 150 nodes (22,801 ideals) need 1.1 GiB.
MAX_STATE_BYTES = 2 * 2 ** 30


def check_states(n: int, n_layers: int, factors: list[int] | None = None, more: bool = False) -> None:
    """:class:`LimitExceededError` where the DP's value, parent and choice for ``n`` ideals (``more``: more
    than ``n - 1``, where the count stopped there) and ``n_layers`` combinations of device counts
    (``factors``, where they are every combination: each type's count plus one) exceed
    :data:`MAX_STATE_BYTES`."""
    states = n * BYTES_PER_STATE * n_layers
    if states > MAX_STATE_BYTES:
        gib = 2.0 ** 30
        shown = f" ({' × '.join(map(str, factors))})" if factors and len(factors) <= 16 else ""
        ideals = f"more than {n - 1:,} ideals" if more else f"{n:,} ideals"
        # where the count stopped, the ideals may be far more: fewer devices alone need not make room for them
        coarsen = "coarsen the graph by giving nodes that belong together one colour class, " if more else ""
        raise LimitExceededError(
            f"the DP keeps a value per ideal and combination of device counts: {ideals} × {n_layers:,} "
            f"combinations{shown} would take {'more than ' if more else ''}{states / gib:,.2f} GiB, more than the "
            f"{MAX_STATE_BYTES / gib:,.0f} GiB it may; {coarsen}give fewer devices or device types (types that "
            "differ little as one), or solve the MILP", "max_ideals")


#: Bytes each combination of device counts takes per device type while :func:`build_layers` builds them:
#: its count and its layer with one device fewer (int64 each), and as much again for the temporaries
BYTES_PER_LAYER_AND_TYPE = 4 * 8


def check_layers(n: int, n_layers: int, factors: list[int]) -> None:
    """:class:`LimitExceededError` where the combinations of device counts themselves (each type's count
    and the layer one device fewer, :func:`build_layers`) and the DP's value, parent and choice per
    combination for ``n`` ideals together exceed :data:`MAX_STATE_BYTES`: with few ideals (the chain DP
    over a few intervals) and many device types, the combinations take more than the values."""
    need = n_layers * (n * BYTES_PER_STATE + BYTES_PER_LAYER_AND_TYPE * len(factors))
    if need > MAX_STATE_BYTES:
        gib = 2.0 ** 30
        shown = f" ({' × '.join(map(str, factors))})" if len(factors) <= 16 else ""
        raise LimitExceededError(
            f"the DP's {n_layers:,} combinations of device counts{shown} over {len(factors)} device types, with a "
            f"value per combination for each of {n:,} ideals, would take {need / gib:,.2f} GiB, more than the "
            f"{MAX_STATE_BYTES / gib:,.0f} GiB it may; give fewer devices or device types (types that differ little "
            "as one), or solve the MILP", "max_ideals")


def check_memory(n: int, graph: Graph, layers: Layers, budget: float | None = None, bitsets: bool = True) -> int:
    """The bytes of the fixed-size data of ``n`` ideals (:func:`bytes_per_ideal`; ``bitsets``: with a
    bitset row each); :class:`LimitExceededError` when they exceed ``budget`` (default:
    :func:`memory_budget`), or when the tables per ideal and combination of device counts exceed
    :data:`MAX_STATE_BYTES`."""
    budget = memory_budget() if budget is None else budget
    n_types = graph.comp.shape[1]
    n_layers = len(layers.counts)
    check_states(n, n_layers)
    fixed = n * bytes_per_ideal(value_columns(n_types), graph.contraction.size, n_types, n_layers, bitsets)
    if fixed > budget:
        raise _too_big(n, fixed, budget, "")
    return fixed


def _too_big(n: int, need: float, budget: float, how: str) -> LimitExceededError:
    gib = 2.0 ** 30
    return LimitExceededError(
        f"the DP's tables for {n:,} ideals would take up to about {need / gib:,.1f} GiB{how}, more than the "
        f"{budget / gib:,.1f} GiB of memory it may use (80% of the memory available); coarsen the graph by "
        "giving nodes that belong together one colour class, or solve the MILP")


def family_arrays(n: int, n_values: int, n_vertices: int, store_bits: bool) -> tuple[np.ndarray, ...]:
    """The arrays :func:`._dp_kernels.family_data` fills for a family of ``n`` ideals of ``n_vertices``
    supernodes and ``n_values`` additive quantities, ideal 0 (∅) done: ``sums, bits, popcount, max_ptr, max_buf,
    cut_ptr, cut_buf, cut_count, cut_cost`` (``bits`` without columns unless ``store_bits``; the buffers of maxima
    and cuts sized for two entries per ideal, grown as needed) and ``is_pred``, the kernel's scratch."""
    words = max(1, (n_vertices + 63) // 64) if store_bits else 0
    return (np.zeros((n, n_values)), np.zeros((n, words), dtype=np.uint64), np.zeros(n, dtype=np.int64),
            np.zeros(n + 1, dtype=np.int64), np.empty(2 * n + 16, dtype=np.int64), np.zeros(n + 1, dtype=np.int64),
            np.empty(2 * n + 16, dtype=np.int64), np.empty(2 * n + 16, dtype=np.int64), np.zeros(n),
            np.zeros(max(n_vertices, 1), dtype=np.bool_))


def prepare(graph: Graph, layers: Layers, family: tuple[np.ndarray, np.ndarray],
            compiled: bool | None = None, keep_bits: bool = True, progress: Progress | None = None,
            label: str = "dp") -> SimpleNamespace:
    """The per-ideal data of a family ``(parent, added)`` of ideals (:mod:`._dp_kernels`) in
    processing order, ready for any number of :func:`fill` runs. ``compiled``: use the
    numba-compiled kernels (``True``), the interpreted ones (``False``), or (``None``) start as
    :func:`starts_compiled` says and let :func:`fill` move to the compiled kernels for a large run
    (:func:`run_units`; ``data.may_compile``).
    ``keep_bits=False``: a prefix family (:func:`is_prefix_family`) gets no bitset rows (its ideals
    are told apart by their sizes, and a block is a stretch of its order: memory linear in the family
    instead of quadratic); ``data.prefix`` is then its order.
    The data are made in chunks of :data:`BUILD_CHUNK` ideals, after each of which ``progress``'s ``poll``
    (:func:`placement.solvers.dp.deadline_watch`) is called, as :func:`fill` calls it, with the share of the
    family done, and may stop the build by raising; Ctrl-C is heard there too (a family of 501,501 ideals took
    17 s to build, in one call that heard neither)."""
    parent_of, added = family
    n = len(parent_of)
    n_types = graph.comp.shape[1]
    nested = is_prefix_family(family)
    store_bits = keep_bits or not nested
    start_compiled = starts_compiled(n, graph, layers, compiled)
    kernels = K.kernels(start_compiled)
    values = np.hstack([graph.comp, graph.unsup, graph.mem, graph.mem_lo, graph.pmin]).astype(np.float64)
    budget = memory_budget()
    fixed = check_memory(n, graph, layers, budget, store_bits)
    max_entries = int(min((budget - fixed) // BYTES_PER_ENTRY, 2 ** 62))
    sums, bits, popcount, max_ptr, max_buf, cut_ptr, cut_buf, cut_count, cutc, is_pred = family_arrays(
        n, values.shape[1], graph.contraction.size, store_bits)
    started = last = time.perf_counter()
    done = 0
    while done < n:
        hi = min(n, done + BUILD_CHUNK)
        max_buf, cut_buf, cut_count, done = kernels.family_data(
            done, hi, parent_of, added, values, graph.pred_ptr, graph.pred_idx, graph.touch_ptr, graph.touch_idx,
            graph.degree, graph.cost, max_entries, store_bits, sums, bits, popcount, max_ptr, max_buf, cut_ptr,
            cut_buf, cut_count, cutc, is_pred)
        if done < hi:   # the entries so far, spread over every ideal at the same rate
            entries = (max_ptr[done] + cut_ptr[done]) * n / max(done, 1)
            raise _too_big(n, fixed + entries * BYTES_PER_ENTRY, budget,
                           f" (after {done:,} ideals, their maxima and cuts, the nodes whose outputs cross each "
                           f"ideal, held {int(max_ptr[done] + cut_ptr[done]):,} entries)")
        if progress is not None and done < n:
            last = _told(progress, f"{label}: tables of {done:,}/{n:,} ideals built", done / n, started, last)
    per_type, unsup = sums[:, :n_types], sums[:, n_types:2 * n_types]
    mem, mem_lo, pmin = sums[:, 2 * n_types], sums[:, 2 * n_types + 1], sums[:, 2 * n_types + 2]
    # Processing order: by compute on the first type, then size (a linear extension of ⊆).
    order0 = np.lexsort((popcount, per_type[:, 0]))
    bits, popcount, cutc = bits[order0], popcount[order0], cutc[order0]
    per_type, unsup, mem, mem_lo, pmin = per_type[order0], unsup[order0], mem[order0], mem_lo[order0], pmin[order0]
    cut_lo, cut_hi = cut_ptr[:-1][order0], cut_ptr[1:][order0]
    max_lo, max_hi = max_ptr[:-1][order0], max_ptr[1:][order0]
    order = np.empty((n_types, n), dtype=np.int64)
    pos = np.empty((n_types, n), dtype=np.int64)
    for t in range(n_types):
        order[t] = np.lexsort((popcount, per_type[:, t]))
        pos[t, order[t]] = np.arange(n)
    reach = np.zeros(n, dtype=np.int64)   # a prefix's cost nodes touched, with repeats (dp_range)
    if nested:
        np.cumsum(np.diff(graph.touch_ptr)[added[order0][1:]], out=reach[1:])
    return SimpleNamespace(kernels=kernels, may_compile=compiled is None and not start_compiled,
                           n=n, bits=bits, popcount=popcount, nested=nested, added=added[order0], reach=reach,
                           prefix=None if store_bits else added, cutc=cutc, cut_lo=cut_lo,
                           cut_hi=cut_hi, cut_buf=cut_buf, cut_count=cut_count, max_lo=max_lo, max_hi=max_hi,
                           max_buf=max_buf, order=order, pos=pos, mem=mem, mem_lo=mem_lo, pmin=pmin,
                           comp_t=np.ascontiguousarray(per_type.T), unsup_t=np.ascontiguousarray(unsup.T))


def fill(problem: Instance, graph: Graph, layers: Layers, data: SimpleNamespace, ub: float,
         progress: Progress | None, label: str, stages: int | None = None) -> Table:
    """Run the DP over a prepared family (:func:`prepare`; any down-closed family containing ∅ and V)
    under the upper bound ``ub``; with ``stages``, the exact-``N`` table ``e`` of the module docstring.
    ``progress`` gets a line about once a second; where it has a ``poll(message, done, spent, line)`` method
    (:func:`placement.solvers.dp.deadline_watch`), that is called in its place after every chunk of ideals (a
    fiftieth of the family, or 256 ideals, fewer where the layers would make a chunk more than
    :data:`STATES_PER_CHUNK` entries), and may stop the run by raising. Where ``data.may_compile``, a run
    of more than :data:`INTERPRETED_UNITS` units (:func:`run_units`; while the compiled kernels are not in
    numba's cache, :data:`INTERPRETED_UNITS_UNCOMPILED`) moves ``data`` to the compiled kernels, saying so
    through ``progress`` where that compiles them; both kernels give the same table."""
    n, popcount, pmin = data.n, data.popcount, data.pmin
    full = int(np.argmax(popcount))
    pmin_total = float(pmin[full])
    counts = layers.counts
    rest = np.array([t.count for t in problem.device_types]) - counts
    size = layers.size
    # devices free after the layer, or (exact N) still to be filled; <= 0 skips the layer below V
    rest_devices = rest.sum(axis=1) if stages is None else stages - size
    if math.isfinite(ub):
        ceiling = ub + 1e-9 * max(1.0, abs(ub))
        per_device = np.array([_device_capacity(graph.work_nodes, t, ceiling) if problem.device_types[t].count else 0.0
                               for t in range(counts.shape[1])])
        slack = 1 + 1e-9
        # an ideal's work and the work left are floating-point sums of up to every node's, each within
        # a few units in the last place of the total: the work left, a difference, may be off by that
        # much however small it is
        summed = pmin_total * (graph.work_nodes.shape[0] + 2) * 2.0 ** -51 + 1e-12
        layer_cap = (counts * per_device).sum(axis=1) * slack + summed
        if stages is None:
            rest_cap = (rest * per_device).sum(axis=1) * slack + summed
        else:
            rest_cap = _best_devices(rest, per_device, np.maximum(rest_devices, 0)) * slack + summed
    else:
        ceiling = math.inf
        layer_cap = np.full(len(counts), math.inf)
        rest_cap = np.full(len(counts), math.inf)

    n_layers = len(counts)
    dp = np.empty((n_layers, n))
    parent = np.empty((n_layers, n), dtype=np.int64)
    choice = np.empty((n_layers, n), dtype=np.int64)
    counters = np.zeros(3, dtype=np.int64)
    inside = np.zeros(len(graph.degree), dtype=np.int64)   # the kernel's counts of a growing block (all 0 between)
    # a fiftieth of the family, or 256 ideals, and fewer where each ideal has many layers to fill
    chunk = max(1, min(max(256, n // 50), STATES_PER_CHUNK // n_layers))
    kernel = K.range_kernel(n_layers, stages is not None)
    above = layers.above if kernel == "dp_range_classes" else None
    if data.may_compile:
        _move_to_compiled(data, run_units(data.comp_t, n_layers, ceiling), progress, kernel)
    fill_range = getattr(data.kernels, kernel)   # the kernels are those of the whole run from here
    start = time.perf_counter()   # after any compiling: the table's pace (poll) is that of its kernels alone
    last = start
    most = chunk
    pairs = FIRST_PAIRS
    lo = 0
    while lo < n:
        hi = min(n, lo + chunk)
        began = time.perf_counter()
        window = int(counters[K.WINDOW])
        hi = int(fill_range(lo, hi, data.bits, data.comp_t, data.unsup_t, data.mem, data.mem_lo,
                            graph.memcap, graph.memcap_lo, graph.mem_scale, graph.pays, data.cutc,
                            data.cut_lo, data.cut_hi, data.cut_buf, data.cut_count, graph.cost,
                            data.max_lo, data.max_hi, data.max_buf, data.order, data.pos, layers.prev,
                            layer_cap, rest_cap, rest_devices, pmin, pmin_total, full, ceiling,
                            stages is not None, size, popcount, data.nested, data.added, data.reach,
                            graph.touch_ptr, graph.touch_idx, graph.degree, inside, dp, parent, choice,
                            counters, pairs, above))
        now = time.perf_counter()
        took = max(now - began, 1e-6)
        # the next chunk: as many ideals as take about CHUNK_S at this chunk's pace (later ideals have more
        # ideals below them to pair with: on 923,523 ideals one chunk of the size above took 50 s, with no
        # progress line and no Ctrl-C heard meanwhile), never more than that size; and the kernel stops
        # within the pairs of the window it examines in about CHUNK_S at this chunk's pace, growing at most
        # eightfold a chunk (the pace by ideals alone is no guide where the pairs per ideal jump: on 3,442,953
        # ideals, three parallel chains of 150, a chunk after one of 0.01 s took 58 s)
        chunk = max(1, min(most, int((hi - lo) * CHUNK_S / took)))
        examined = int(counters[K.WINDOW]) - window
        if examined > 0:
            pairs = max(FIRST_PAIRS, min(8 * pairs, int(examined * CHUNK_S / took)))
        lo = hi
        if progress is not None:
            last = _told(progress, f"{label}: {hi:,}/{n:,} ideals ({100 * hi / n:.0f}%), "
                                   f"{int(counters[K.EVALUATED]):,} blocks evaluated", hi / n, start, last, now)
    return Table(data.bits, dp, parent, choice, counters, full, popcount, data.prefix)


def _told(progress: Progress, where: str, done: float, start: float, last: float, now: float | None = None) -> float:
    """After a chunk of a table's work begun at ``start`` (``time.perf_counter()`` values), ``done`` the share of
    it done and ``where`` what that is: a line through ``progress`` a second, then one per tenth of the time so far,
    the last at ``last``, with its seconds; where ``progress`` has a ``poll`` method (:func:`.dp.deadline_watch`),
    that is called instead, every chunk, with the share and the seconds (the pace) and whether a line is due,
    and may stop the run by raising. Returns the time of the last line."""
    now = time.perf_counter() if now is None else now
    where = f"{where}, {now - start:.1f} s"
    line = now - last > max(1.0, (now - start) / 10)
    if line:
        last = now
    poll = getattr(progress, "poll", None)
    if poll is not None:
        poll(where, done, now - start, line)
    elif line:
        progress(where)
    return last


def _move_to_compiled(data: SimpleNamespace, units: int, progress: Progress | None, kernel: str) -> None:
    """Hand ``data`` the compiled kernels for a run of ``units`` (:func:`run_units`) past
    :data:`INTERPRETED_UNITS`, or, while the compiled kernel ``kernel`` (the one that fills the table:
    :func:`placement.solvers._dp_kernels.range_kernel`) is not cached, past :data:`INTERPRETED_UNITS_UNCOMPILED`
    (then compiling it, which is announced). Telling whether it is cached imports numba, so a run past the first
    limit pays for that even where it stays interpreted."""
    if units <= INTERPRETED_UNITS:
        return
    compiles = K.must_compile((kernel,))   # the family's data is built: its runs need only that kernel
    if compiles and units <= INTERPRETED_UNITS_UNCOMPILED:
        return
    if compiles and progress is not None:
        progress(compiling())
    data.kernels, data.may_compile = K.compiled(), False


def compiling() -> str:
    """What a DP run says before it compiles its kernels (:func:`placement.kernels.compiling_note`)."""
    from placement.kernels import compiling_note

    return compiling_note("the DP's kernels", "them")


# Ceilings tried, as multiples of the instance's lower bound, when no upper bound is known (the ideals are the
# prefixes of one order): dense near 1, where the speed-weighted bound puts the optimum of a chain (a 10,000-node
# chain: 0.14 s, against 0.24 s with 1.05 and 1.3 first, a run at 1.05 below the optimum and one at 1.3 far above)
CEILINGS = (1.01, 1.03, 1.1, 1.3, 2.0, 4.0)


def best_plan(problem: Instance, graph: Graph, layers: Layers, family: tuple[np.ndarray, np.ndarray], ub: float,
              progress: Progress | None, label: str, stages: int | None = None,
              compiled: bool | None = None) -> tuple[Table, float, Plan | None]:
    """:func:`prepare`, :func:`fill` and :func:`extract`. Without an upper bound (``ub = ∞``), the run first takes
    ceilings a little above the instance's lower bound
    (:func:`placement.problem.bounds.throughput_lower_bound`, valid for every plan), then larger
    ones, and last none: a run under a ceiling ``C`` finds the optimum whenever it is at most ``C``
    (values above ``C`` are never needed) and no plan otherwise, so the first plan found is optimal,
    and a tight ceiling prunes most pairs. The table's counters add up every run."""
    ceilings = [ub]
    if not math.isfinite(ub):
        from placement.problem.bounds import throughput_lower_bound
        lb = throughput_lower_bound(problem)["bound"]
        if 0 < lb < math.inf:
            ceilings = [lb * f for f in CEILINGS] + ceilings
    counters = np.zeros(3, dtype=np.int64)
    started = time.perf_counter()
    if progress is not None and len(family[0]) >= LARGE_FAMILY:
        progress(f"{label}: building the tables of {len(family[0]):,} ideals (sums, maxima, cuts)")
    data = prepare(graph, layers, family, compiled, keep_bits=False, progress=progress, label=label)
    if progress is not None and time.perf_counter() - started >= PREPARE_NOTED_S:
        progress(f"{label}: tables built in {time.perf_counter() - started:.1f} s")
    for i, ceiling in enumerate(ceilings, 1):
        # each try counts the ideals from 0 again: its lines say which try they are about
        named = label if len(ceilings) == 1 else f"{label}, try {i} of {len(ceilings)}"
        table = fill(problem, graph, layers, data, ceiling, progress, named, stages)
        counters += table.counters
        value, plan = extract(problem, graph, layers, table, stages)
        if plan is not None:
            break
    table.counters[:] = counters
    return table, value, plan


def extract(problem: Instance, graph: Graph, layers: Layers, table: Table,
            stages: int | None = None) -> tuple[float, Plan | None]:
    """Value and plan of dp[all devices][V] (with ``stages``: of the best e[L][V], |L| = N), devices in
    pipeline order."""
    L, i = layers.full, table.full
    if stages is not None:
        candidates = [c for c in np.flatnonzero(layers.size == stages) if table.choice[c, i] >= 0]
        if not candidates:
            return math.inf, None
        L = int(min(candidates, key=lambda c: table.dp[c, i]))
    value = float(table.dp[L, i])
    if not math.isfinite(value) or table.choice[L, i] < 0 and i != 0:
        return math.inf, None
    n_types = len(problem.device_types)
    blocks: list[tuple[int, np.ndarray]] = []  # (type, supernodes)
    while i != 0:
        c = int(table.choice[L, i])
        if c < 0:
            return math.inf, None
        if c >= n_types:
            L = int(layers.prev[L, c - n_types])
            continue
        j = int(table.parent[L, i])
        if table.prefix is not None:
            blocks.append((c, np.sort(table.prefix[1 + table.popcount[j]:1 + table.popcount[i]])))
        else:
            block = table.bits[i] & ~table.bits[j]
            blocks.append((c, np.flatnonzero(np.unpackbits(block.view(np.uint8), bitorder="little"))))
        L, i = int(layers.prev[L, c]), j
    devices = []
    for t, supernodes in reversed(blocks):
        nodes = []
        for s in supernodes:
            nodes.extend(problem.nodes[v].id for v in graph.contraction.members[s])
        devices.append(DeviceAssignment(problem.device_types[t].name, tuple(nodes)))
    return value, Plan(tuple(devices))
