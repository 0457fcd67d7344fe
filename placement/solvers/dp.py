"""Exact DP over ideals for the throughput objective under ``stages`` contiguity (DESIGN.md §3).

Model
-----
A plan in ``stages`` is a pipeline: a chain of ideals ∅ ⊂ I_1 ⊂ … ⊂ I_m = V of
the contracted forward graph (:mod:`placement.solvers.ideals`), each block
``X_j = I_j \\ I_{j-1}`` (with the backward mates of its classes) on its own
device. With device types ``t`` (count ``k_t``), a layer ``L`` is a vector of
device counts ``n ≤ k`` and::

    dp[L][∅] = 0
    dp[L][I] = min( min_t dp[L - e_t][I],
                    min_t min_{I' ⊊ I, X = I \\ I' fits type t} max(dp[L - e_t][I'], load_t(X)) )

``load_t(X)`` is the load of DESIGN.md §2 (compute on type ``t``, plus
communication if ``t`` pays it); ``X`` fits ``t`` when every node is supported
on ``t`` and the memory of ``X`` is within ``t``'s bound. The optimum is
``dp[k][V]``; for training graphs (backward mates in the blocks) this is the
PipeDream objective, forward and backward loads adding up on each device.

Exactly ``N`` stages (``stages=N``): the plans with exactly ``N`` non-empty
devices (any mix of types, at most ``k_t`` of type ``t``). The table drops the
transition that leaves a device unused, so ``e[L][I]`` is the least max-load of
``I`` as a pipeline of exactly ``|L|`` non-empty blocks, one per device of ``L``::

    e[0][∅] = 0,   e[L][∅] = ∞ for L ≠ 0
    e[L][I] = min_t min_{I' ⊊ I, X = I \\ I' fits type t} max(e[L - e_t][I'], load_t(X))

and the optimum is ``min_{L ≤ k, |L| = N} e[L][V]`` (∞: no such plan, status
``infeasible``). Zero-cost classes are not merged in this mode (a zero-time
class may be a stage of its own, and merging it could lose the only plans with
``N`` stages); colour classes and the cycles of the extended graph are, since
every plan keeps them on one device. So ``N`` above the number of supernodes is
infeasible.

Speed (all of it exact):

* an upper bound ``UB`` from the same DP restricted to prefixes of a few
  topological orders (a chain DP); values above ``UB`` are never needed;
* candidates ``I'`` are scanned in decreasing compute order and the scan stops
  when the compute of ``X`` alone reaches the best value found for ``I``;
* communication comes from per-ideal cut sums (see :mod:`._dp_kernels`);
* a layer is skipped for ``I`` when the work of ``I``, or of ``V \\ I``, cannot
  fit its devices under ``UB``.

With ``stages=N`` the same rules hold for ``e``: ``UB`` comes from the chain DP
in the same mode (∞ when no chain plan has ``N`` stages, and then nothing is
pruned by it); the rest ``V \\ I`` must fit the best ``N - |L|`` of the devices
left after ``L``; and a layer is skipped for ``I`` when ``I`` has fewer
supernodes than ``|L|``, ``V \\ I`` fewer than ``N - |L|``, or (for ``I = V``)
``|L| ≠ N``. Without ``stages`` the DP runs as if this mode did not exist.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.solvers import _dp_kernels as K
from placement.parameters import stage_count
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, Contraction, contract, enumerate_ideals

Progress = Callable[[str], None]


@dataclass(frozen=True)
class _Graph:
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
class _Layers:
    counts: np.ndarray       # (L, T)
    prev: np.ndarray         # (L, T)
    full: int

    @property
    def size(self) -> np.ndarray:
        """Number of devices per layer."""
        return self.counts.sum(axis=1)


def _build_graph(problem: Instance, contraction: Contraction) -> _Graph:
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
    return _Graph(contraction, comp, unsup, mem, pmin, np.array(ptr, dtype=np.int64),
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


def _build_layers(problem: Instance) -> _Layers:
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
    return _Layers(counts, prev, n_layers - 1)


def _to_words(masks: list[int], n_bits: int) -> np.ndarray:
    words = max(1, (n_bits + 63) // 64)
    buf = b"".join(m.to_bytes(words * 8, "little") for m in masks)
    return np.frombuffer(buf, dtype="<u8").reshape(len(masks), words).copy()


@dataclass
class _Table:
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


def _run(problem: Instance, graph: _Graph, layers: _Layers, masks: list[int], ub: float,
         progress: Progress | None, label: str, stages: int | None = None) -> _Table:
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
    return _Table(masks, dp, parent, choice, counters, full)


def _extract(problem: Instance, graph: _Graph, layers: _Layers, table: _Table,
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


def _topological_orders(contraction: Contraction) -> list[list[int]]:
    """A few linear extensions of the contracted graph, to seed the upper bound."""
    size = contraction.size
    succ = contraction.succ
    orders = [list(range(size))]
    # Depth-first: finish a branch before starting the next one (reverse postorder).
    seen = [False] * size
    post: list[int] = []
    indeg = [0] * size
    for s in range(size):
        for w in succ[s]:
            indeg[w] += 1
    for root in range(size - 1, -1, -1):
        if indeg[root] or seen[root]:
            continue
        stack = [(root, iter(sorted(succ[root], reverse=True)))]
        seen[root] = True
        while stack:
            v, it = stack[-1]
            for w in it:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, iter(sorted(succ[w], reverse=True))))
                    break
            else:
                post.append(v)
                stack.pop()
    orders.append(post[::-1])
    # Kahn's algorithm preferring the most recently enabled vertex.
    remaining = indeg[:]
    ready = [s for s in range(size) if remaining[s] == 0]
    lifo = []
    while ready:
        v = ready.pop()
        lifo.append(v)
        for w in succ[v]:
            remaining[w] -= 1
            if remaining[w] == 0:
                ready.append(w)
    orders.append(lifo)
    return orders


def _prefix_masks(order: list[int]) -> list[int]:
    masks = [0]
    for s in order:
        masks.append(masks[-1] | (1 << s))
    return masks


def _upper_bound(problem: Instance, graph: _Graph, layers: _Layers, contraction: Contraction,
                 stages: int | None) -> tuple[float, Plan | None]:
    """The best plan of the chain DP over a few topological orders (in the same mode as the DP)."""
    best, best_plan = math.inf, None
    for order in _topological_orders(contraction):
        chain = _run(problem, graph, layers, _prefix_masks(order), math.inf, None, "chain", stages)
        value, plan = _extract(problem, graph, layers, chain, stages)
        if plan is not None and value < best:
            best, best_plan = value, plan
    return best, best_plan


def solve_dp(problem: Instance, *, max_ideals: int = DEFAULT_MAX_IDEALS,
             progress: Progress | None = None, merge_zero_cost: bool = True,
             stages: int | None = None) -> Solution:
    """Optimal ``stages`` plan for the throughput objective; status ``optimal`` or ``infeasible``.

    ``stages=N`` asks for exactly ``N`` non-empty devices (the recurrence ``e`` of the module
    docstring): the plan is optimal among those plans, and the status is ``infeasible`` when
    there is none. ``N`` must be from 1 to the number of devices (:class:`InvalidParameterError`
    otherwise). Raises :class:`LimitExceededError` when the contracted graph has more than
    ``max_ideals`` ideals. ``merge_zero_cost=False`` keeps every colour class
    as its own supernode (slower; for cross-checks; with ``stages`` this is always so).
    The plan's loads are not stored: verify it with
    :func:`placement.verification.evaluate.evaluate`.
    """
    start = time.perf_counter()
    stages = stage_count(problem, stages)
    contraction = contract(problem, merge_zero_cost and stages is None)
    if stages is not None and stages > contraction.size:
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, "dp", runtime_s=time.perf_counter() - start,
                        stats={"nodes": len(problem.nodes), "supernodes": contraction.size, "stages": stages},
                        message=f"no plan has {stages} non-empty stages: the graph has {contraction.size} "
                                f"part{'' if contraction.size == 1 else 's'} "
                                "that a pipeline can separate (colour classes and cycles stay on one device)")
    graph = _build_graph(problem, contraction)
    layers = _build_layers(problem)

    try:
        masks = enumerate_ideals(contraction, max_ideals)  # fail fast, before any solving
    except LimitExceededError as exc:
        if stages is None:
            raise
        raise LimitExceededError(f"{exc} (with stages, zero-cost classes are not merged, so there are more "
                                 "ideals than without)", exc.parameter) from None
    if progress is not None:
        progress(f"{len(masks):,} ideals over {contraction.size} supernodes")
    ub, ub_plan = _upper_bound(problem, graph, layers, contraction, stages)
    chain_time = time.perf_counter() - start
    if progress is not None:
        progress(f"upper bound from chain DP: {ub:.6g} ({chain_time:.2f} s)")

    table = _run(problem, graph, layers, masks, ub, progress, "dp", stages)
    value, plan = _extract(problem, graph, layers, table, stages)
    if plan is None and ub_plan is not None:  # cannot happen: the DP admits every block of the chain plan
        return Solution(Status.ERROR, None, math.inf, 0.0, "dp", runtime_s=time.perf_counter() - start,
                        message="internal error: the DP lost the upper-bound plan; please report this instance")
    stats = {
        "nodes": len(problem.nodes),
        "supernodes": contraction.size,
        "zero_cost_merges": contraction.merged_zero_cost,
        "ideals": len(masks),
        "layers": len(layers.counts),
        "upper_bound": ub if math.isfinite(ub) else None,
        "pairs_in_window": int(table.counters[K.WINDOW]),
        "pairs_examined": int(table.counters[K.SUBSET]),
        "blocks_evaluated": int(table.counters[K.EVALUATED]),
        "dp_value": value if math.isfinite(value) else None,
    }
    if stages is not None:
        stats["stages"] = stages
    runtime = time.perf_counter() - start
    if plan is None:
        what = "no pipeline of the available devices" if stages is None else \
            f"no pipeline of exactly {stages} non-empty {'stage' if stages == 1 else 'stages'}"
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, "dp", runtime_s=runtime, stats=stats,
                        message=f"{what} satisfies the memory and support constraints")
    return Solution(Status.OPTIMAL, plan, value, value, "dp", runtime_s=runtime, stats=stats)


def solve_chain(problem: Instance, *, stages: int | None = None) -> Solution:
    """A good ``stages`` plan fast: the exact DP restricted to the prefixes of a few topological orders.

    No ideals are enumerated, so it runs where the full DP would refuse; the plan is optimal among
    plans whose stages are intervals of one of those orders, so the status is ``feasible`` (with the
    trivial bound 0), or ``infeasible`` only in the sense that no such plan exists (``no_solution``).
    ``stages=N`` restricts it to plans of exactly ``N`` non-empty stages (as in :func:`solve_dp`).
    """
    start = time.perf_counter()
    stages = stage_count(problem, stages)
    contraction = contract(problem, stages is None)
    graph = _build_graph(problem, contraction)
    layers = _build_layers(problem)
    best, best_plan = _upper_bound(problem, graph, layers, contraction, stages)
    runtime = time.perf_counter() - start
    if best_plan is None:
        what = "" if stages is None else f" into exactly {stages} stages"
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp", runtime_s=runtime,
                        message=f"no interval split{what} of the tried topological orders fits the devices")
    return Solution(Status.FEASIBLE, best_plan, best, 0.0, "chain-dp", runtime_s=runtime)


__all__ = ["solve_dp", "solve_chain"]
