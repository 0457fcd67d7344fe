"""One run of the DP over ideals (:mod:`placement.solvers.dp`) on a given family of ideals.

Model
-----
The family is any down-closed set of ideals of the contracted forward graph
(:mod:`placement.solvers.ideals`) that holds ∅ and V: all the ideals (the full DP), or
the prefixes of a few topological orders (the chain DP, :mod:`placement.solvers.chain_dp`).
:func:`run` fills, for every ideal ``I`` of the family and every layer ``L``, the table
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
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solvers import _dp_kernels as K
from placement.solvers.ideals import Contraction

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Graph:
    """Supernode-level arrays shared by the chain DP and the ideal DP."""

    contraction: Contraction
    comp: np.ndarray       # (S, T) compute per type (unsupported nodes contribute 0)
    unsup: np.ndarray      # (S, T) number of nodes unsupported on the type
    mem: np.ndarray        # (S, 1)
    pmin: np.ndarray       # (S, 1) Σ min_t p_t(v)
    nbr_ptr: np.ndarray
    nbr_idx: np.ndarray
    cost: np.ndarray
    memcap: np.ndarray
    pays: np.ndarray
    work_nodes: np.ndarray  # (N, T+1) per node: pmin(v), then p_t(v) (inf if unsupported)


@dataclass(frozen=True)
class Layers:
    counts: np.ndarray       # (L, T)
    prev: np.ndarray         # (L, T)
    full: int

    @property
    def size(self) -> np.ndarray:
        """Number of devices per layer."""
        return self.counts.sum(axis=1)


def build_graph(problem: Instance, contraction: Contraction) -> Graph:
    types = problem.device_types
    n_types = len(types)
    size = contraction.size
    comp = np.zeros((size, n_types))
    unsup = np.zeros((size, n_types), dtype=np.int64)
    mem = np.zeros((size, 1))
    pmin = np.zeros((size, 1))
    work_nodes = np.zeros((len(problem.nodes), n_types + 1))
    for s, members in enumerate(contraction.members):
        for v in members:
            node = problem.nodes[v]
            usable = [p for p, t in zip(node.times, types) if p is not None and t.count > 0]
            cheapest = min(usable)
            pmin[s, 0] += cheapest
            mem[s, 0] += node.memory
            work_nodes[v, 0] = cheapest
            for t, p in enumerate(node.times):
                work_nodes[v, t + 1] = math.inf if p is None else p
                if p is None:
                    unsup[s, t] += 1
                else:
                    comp[s, t] += p
    # Cost nodes: positive transfer cost and a successor in another supernode.
    succ = problem.successors()
    of_node = contraction.of_node
    ptr = [0]
    idx: list[int] = []
    cost: list[float] = []
    for v, node in enumerate(problem.nodes):
        if node.out_cost <= 0:
            continue
        groups = {of_node[v]} | {of_node[w] for w in succ[v]}
        if len(groups) < 2:
            continue
        idx.extend(sorted(groups))
        ptr.append(len(idx))
        cost.append(node.out_cost)
    return Graph(contraction, comp, unsup, mem, pmin, np.array(ptr, dtype=np.int64),
                 np.array(idx, dtype=np.int64), np.array(cost, dtype=np.float64),
                 np.array([t.memory for t in types], dtype=np.float64),
                 np.array([t.pays_comm for t in types], dtype=np.bool_), work_nodes)


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


def build_layers(problem: Instance) -> Layers:
    caps = [t.count for t in problem.device_types]
    radix = np.cumprod([1] + [c + 1 for c in caps[:-1]])
    n_layers = int(np.prod([c + 1 for c in caps]))
    counts = np.zeros((n_layers, len(caps)), dtype=np.int64)
    prev = np.full((n_layers, len(caps)), -1, dtype=np.int64)
    for L in range(n_layers):
        rest = L
        for t in range(len(caps)):
            counts[L, t] = rest % (caps[t] + 1)
            rest //= caps[t] + 1
            if counts[L, t] > 0:
                prev[L, t] = L - radix[t]
    return Layers(counts, prev, n_layers - 1)


def _to_words(masks: list[int], n_bits: int) -> np.ndarray:
    words = max(1, (n_bits + 63) // 64)
    buf = b"".join(m.to_bytes(words * 8, "little") for m in masks)
    return np.frombuffer(buf, dtype="<u8").reshape(len(masks), words).copy()


@dataclass
class Table:
    """A DP run's arrays, ideals in processing order."""

    masks: list[int]
    dp: np.ndarray
    parent: np.ndarray
    choice: np.ndarray
    counters: np.ndarray
    full: int


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


def run(problem: Instance, graph: Graph, layers: Layers, masks: list[int], ub: float,
        progress: Progress | None, label: str, stages: int | None = None) -> Table:
    """Run the DP over the given ideals (any down-closed family containing ∅ and V); with ``stages``,
    the exact-``N`` table ``e`` of the module docstring."""
    bits = _to_words(masks, graph.contraction.size)
    per_type = K.ideal_sums(bits, np.ascontiguousarray(graph.comp))
    unsup = K.ideal_sums(bits, np.ascontiguousarray(graph.unsup))
    mem = K.ideal_sums(bits, graph.mem)[:, 0]
    pmin = K.ideal_sums(bits, graph.pmin)[:, 0]
    popcount = np.array([m.bit_count() for m in masks], dtype=np.int64)
    # Processing order: by compute on the first type, then size (a linear extension of ⊆).
    order0 = np.lexsort((popcount, per_type[:, 0]))
    bits = bits[order0]
    per_type, unsup, mem, pmin, popcount = per_type[order0], unsup[order0], mem[order0], pmin[order0], popcount[order0]
    masks = [masks[k] for k in order0]
    n = len(masks)
    n_types = per_type.shape[1]
    order = np.empty((n_types, n), dtype=np.int64)
    pos = np.empty((n_types, n), dtype=np.int64)
    for t in range(n_types):
        order[t] = np.lexsort((popcount, per_type[:, t]))
        pos[t, order[t]] = np.arange(n)
    cutc, cutbits = K.cut_data(bits, graph.nbr_ptr, graph.nbr_idx, graph.cost)

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
        layer_cap = (counts * per_device).sum(axis=1) * slack + 1e-12
        if stages is None:
            rest_cap = (rest * per_device).sum(axis=1) * slack + 1e-12
        else:
            rest_cap = _best_devices(rest, per_device, np.maximum(rest_devices, 0)) * slack + 1e-12
    else:
        ceiling = math.inf
        layer_cap = np.full(len(counts), math.inf)
        rest_cap = np.full(len(counts), math.inf)

    n_layers = len(counts)
    dp = np.empty((n_layers, n))
    parent = np.empty((n_layers, n), dtype=np.int64)
    choice = np.empty((n_layers, n), dtype=np.int64)
    counters = np.zeros(3, dtype=np.int64)
    comp_t = np.ascontiguousarray(per_type.T)
    unsup_t = np.ascontiguousarray(unsup.T)
    chunk = max(256, n // 50)
    start = time.perf_counter()
    last = start
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        K.dp_range(lo, hi, bits, comp_t, unsup_t, mem, graph.memcap, graph.pays, cutc, cutbits,
                   graph.nbr_ptr, graph.nbr_idx, graph.cost, order, pos, layers.prev, layer_cap,
                   rest_cap, rest_devices, pmin, pmin_total, full, ceiling, stages is not None, size, popcount,
                   dp, parent, choice, counters)
        now = time.perf_counter()
        if progress is not None and now - last > 1.0:
            last = now
            progress(f"{label}: {hi:,}/{n:,} ideals ({100 * hi / n:.0f}%), "
                     f"{int(counters[K.EVALUATED]):,} blocks evaluated, {now - start:.1f} s")
    return Table(masks, dp, parent, choice, counters, full)


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
    blocks: list[tuple[int, int]] = []  # (type, supernode mask)
    while i != 0:
        c = int(table.choice[L, i])
        if c < 0:
            return math.inf, None
        if c >= n_types:
            L = int(layers.prev[L, c - n_types])
            continue
        j = int(table.parent[L, i])
        blocks.append((c, table.masks[i] & ~table.masks[j]))
        L, i = int(layers.prev[L, c]), j
    devices = []
    for t, mask in reversed(blocks):
        nodes = []
        while mask:
            low = mask & -mask
            s = low.bit_length() - 1
            mask ^= low
            nodes.extend(problem.nodes[v].id for v in graph.contraction.members[s])
        devices.append(DeviceAssignment(problem.device_types[t].name, tuple(nodes)))
    return value, Plan(tuple(devices))
