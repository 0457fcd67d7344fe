"""Throughput per watt with a design per stage: the DP over ideals whose states are Pareto fronts of
(max load, summed TDP); and the DP that, under a cap on every stage's load, finds the plan of
fewest watts, then least area (the tie-break of :mod:`.result`).

Model
-----
On the design instance of :mod:`.pipeline` (designs ``D``, design ``t`` of TDP ``P_t``), a plan is a
chain of ideals ``∅ = I_0 ⊊ I_1 ⊊ … ⊊ I_m = V`` (``m ≤ k`` non-empty stages), stage ``s`` holding the
block ``X_s = I_s \\ I_{s−1}`` on a chip of design ``t_s`` with load ``ℓ_{t_s}(X_s)`` = its compute on
``t_s`` plus its transfers (DESIGN.md §2; transfers and memory do not depend on the design, a block
fits when its memory is within a chip's DRAM). With ``T = max_s ℓ_{t_s}(X_s)`` (ms per batch) and
``P = Σ_s P_{t_s}`` (W; empty chips draw nothing), throughput per watt is ``1000 / (T · P)``: the DP
minimises the *score* ``T · P``.

Recurrence
----------
``F_c(I)`` is the Pareto front of the pairs ``(T, P)`` of the pipelines of at most ``c`` stages that
place ``I``: for each summed TDP the least max load, no pair kept that another pair matches or beats
in both. With ``F_0(∅) = {(0, 0)}``::

    F_c(I) = Pareto( F_{c−1}(I) ∪ { (max(T', ℓ_t(I \\ I')), P' + P_t) :
                                    I' ⊊ I, (T', P') ∈ F_{c−1}(I'), t ∈ D(I', I) } )

where ``D(I', I)`` holds the designs Pareto-optimal in ``(ℓ_t(I \\ I'), P_t)`` for that block; the
optimum is the least ``T · P`` over ``F_k(V)``. Only the pairs new in ``F_{c−1}(I')`` are extended at
level ``c`` (the others were extended at an earlier level, into pairs that ``F_{c−1}(I)`` holds).

Why it is exact
---------------
*Dominance.* The extension ``(T', P') ↦ (max(T', ℓ), P' + p)`` and the score ``T · P`` (``T, P ≥ 0``)
do not decrease in ``T'``, ``P'``, ``ℓ`` or ``p``. So if ``(T₁, P₁) ≤ (T₂, P₂)`` in both coordinates,
every completion of the second is matched by the same completion of the first, with a score no
larger; and likewise for a design ``t₁`` with ``ℓ_{t₁}(X) ≤ ℓ_{t₂}(X)`` and ``P_{t₁} ≤ P_{t₂}`` on the
same block. Dropping dominated pairs and designs therefore keeps an optimal plan.

*Bound.* For a pair ``(T', P')`` of ``I``, a completion with later stages ``s`` has ``T ≥ T'`` and
``T ≥ ℓ_s``, so ``T · P = T · P' + Σ_s T · P_{t_s} ≥ T' · P' + Σ_s P_{t_s} · ℓ_s ≥ T' · P' + E(V \\ I)``,
``E(V \\ I) = Σ_{σ ∉ I} min_t P_t · time_t(σ)`` over the supernodes ``σ`` (a stage's load is at least
its compute, and every supernode lies in one stage). Pairs whose bound exceeds the best score found
(the best plan of ``V`` so far; ``V`` is extended first at every level) are dropped, with a relative
slack of :data:`SLACK` so that rounding never drops an optimal pair.

*Ties.* Of the pairs of ``F_k(V)`` whose score is within :data:`.result.TIE` of the least, the one of
least ``P`` (then least ``T``) is returned (:class:`FrontRun`); :data:`SLACK` is at least
:data:`.result.TIE`, so the bound drops no pair that ties. For each summed TDP the front holds the
least max load, so no plan that ties draws fewer watts than that pair.

Least power under a cap
-----------------------
:func:`least_power_dp`: given a cap ``C`` on the max load, the plan of least summed TDP, then of
least summed area (``A_t``: the area of design ``t``), among the plans on the chips of given
layers (:class:`placement.solvers.dp_table.Layers`: a layer is a set of chips still free, and
``prev[L][t]`` the layer with one chip of design ``t`` fewer; pool layers for any designs on at
most ``k`` chips, or the sub-multisets of given chips) whose every stage has load at most ``C``.
With ``W_L(∅) = (0, 0)`` for every layer::

    W_L(I) = lexmin { W_{prev[L][t]}(I') + (P_t, A_t) : I' ⊊ I, t with a chip in L, ℓ_t(I \\ I') ≤ C }

compared lexicographically (watts, then area): both are sums over the stages, so the least of a
sum is the least of the last stage added to the least of the rest; chips left free in ``L`` draw
nothing (``W`` of ``∅`` is 0 in every layer). ``W_full(V)`` is the answer. Watts compare exactly
(sums of multiples of 2^-10 W); areas as floats. The co-design runs it after the least max load
``T*`` (throughput: ``C = T* · (1 + TIE)``) or the least ``T · P`` (per watt: ``C`` the max load at
which the pair of least ``P`` among those that tie reaches the tie bound) is known, so that among
the plans that tie it returns the one of fewest watts, then least area.

The ideals, their per-design compute sums, memory and the supernode graph are those of the placement
DP (:func:`placement.solvers.dp_table.prepare`); a block's transfers are
``Σ_u c(u)·[N[u] meets X and N[u] ⊄ X]`` over the cost nodes ``u`` (``N[u] = {u} ∪ succ(u)``, as
supernodes), from the counts ``|N[u] ∩ I|`` per ideal. Both DPs list, for every ideal, the ideals
below it whose block fits a chip (:class:`_Blocks`): work quadratic in the number of ideals. Under a cap,
only the ideals whose least compute (every node on its fastest design) is within the cap of the ideal's
are looked at, and the lists are not kept; with pool layers, a block takes of the designs within the cap
the one of fewest watts, then least area (the stages before it do not depend on its design).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from placement.codesign.pipeline import pool_layers
from placement.codesign.result import tie_bound
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Instance
from placement.solvers.dp_table import Graph, Layers, build_graph, prepare
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, enumerate_ideals

#: Relative slack of the bound: a pair is dropped when its bound exceeds the best score by more.
#: At least :data:`.result.TIE`, so that no pair that ties is dropped.
SLACK = 1e-9

#: Families of ideals up to this size use the interpreted kernels (compiling costs more).
INTERPRETED_IDEALS = 5_000

#: The most candidate entries (layers × blocks × designs) :func:`least_power_dp` compares at once.
CHUNK_ENTRIES = 1 << 22


class _Blocks:
    """The ideals of a design instance of ``designs`` design types and, per ideal ``I``, the ideals
    ``I' ⊊ I`` whose block ``I \\ I'`` fits a chip's memory with the block's transfers (module docstring);
    a block's load on design ``t`` is its compute on ``t`` plus those transfers."""

    def __init__(self, problem: Instance, designs: int, max_ideals: int) -> None:
        self.problem = problem
        self.contraction = contract(problem)
        self.graph = graph = build_graph(problem, self.contraction)
        family = enumerate_ideals(self.contraction, max_ideals)
        self.n = n = len(family[0])
        self.data = data = prepare(graph, pool_layers(designs, 1), family, compiled=n > INTERPRETED_IDEALS)
        supernodes = self.contraction.size
        self.member = np.unpackbits(data.bits.view(np.uint8), axis=1,
                                    bitorder="little")[:, :supernodes].astype(np.float64)
        incidence = np.zeros((supernodes, len(graph.cost)))
        for s in range(supernodes):
            incidence[s, graph.touch_idx[graph.touch_ptr[s]:graph.touch_ptr[s + 1]]] = 1.0
        self.touched = self.member @ incidence               # |N[u] ∩ I| per ideal and cost node
        self.comp = data.comp_t.T                             # (ideals, designs) compute of the ideal
        self.memcap, self.memcap_lo = _least_bound(graph)
        self.empty, self.full = int(np.argmin(data.popcount)), int(np.argmax(data.popcount))
        self._sources: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # the least compute of each ideal, each node on its fastest design: a block's compute on any design is
        # at least the difference of its two ideals' (times are not negative)
        self.floor = self.member @ graph.comp.min(axis=1) if graph.comp.size else np.zeros(n)
        self.by_floor = np.argsort(self.floor, kind="stable")
        self.sorted_floor = self.floor[self.by_floor]

    def sources(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The ideals ``I' ⊊ I`` (``I`` the ideal ``i``) whose block fits a chip's memory, and the block's transfers."""
        if i not in self._sources:
            self._sources[i] = self._fitting(i, np.arange(self.n))
        return self._sources[i]

    def within(self, i: int, cap: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sources` less (some of) the blocks whose compute alone exceeds ``cap`` on every design: only the
        ideals whose least compute (``floor``) is within ``cap`` of ``I``'s are looked at, with a slack of
        10^-9 of the whole graph's for rounding, so no block of load at most ``cap`` is left out. Not kept."""
        slack = 1e-9 * abs(float(self.floor[self.full])) + 1e-300
        lo = np.searchsorted(self.sorted_floor, self.floor[i] - cap - slack, side="left")
        hi = np.searchsorted(self.sorted_floor, self.floor[i] + slack, side="right")
        return self._fitting(i, self.by_floor[lo:hi])

    def _fitting(self, i: int, among: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ideals of ``among`` strictly inside ideal ``i`` whose block fits a chip's memory, in index order,
        and the block's transfers."""
        data, graph = self.data, self.graph
        below = np.sort(among[data.popcount[among] < data.popcount[i]])
        # the block's memory against the bound in the DP's two whole parts (dp_range): the sign is exact
        over = ((data.mem[i] - data.mem[below] - self.memcap) * graph.mem_scale
                + (data.mem_lo[i] - data.mem_lo[below] - self.memcap_lo))
        below = below[((data.bits[below] & ~data.bits[i]) == 0).all(axis=1) & (over <= 0)]
        crossing = self.touched[i] - self.touched[below]
        return below, ((crossing > 0) & (crossing < graph.degree)) @ graph.cost

    def loads(self, i: int, src: np.ndarray, comm: np.ndarray) -> np.ndarray:
        """(sources, designs): the load of the block from each ideal of ``src`` to the ideal ``i`` on each design."""
        return self.comp[i][None, :] - self.comp[src] + comm[:, None]

    def plan(self, steps: Sequence[tuple[int, int, int]]) -> Plan:
        """The pipeline of the blocks ``(from ideal, to ideal, design)``, in pipeline order: one device each."""
        devices = []
        for before, after, design in steps:
            block = self.data.bits[after] & ~self.data.bits[before]
            nodes = []
            for s in np.flatnonzero(np.unpackbits(block.view(np.uint8), bitorder="little")):
                nodes.extend(self.problem.nodes[v].id for v in self.contraction.members[s])
            devices.append(DeviceAssignment(self.problem.device_types[design].name, tuple(nodes)))
        return Plan(tuple(devices))


def _least_bound(graph: Graph) -> tuple[float, float]:
    """The least memory bound of the design types, as the DP holds it: ``(high, low)`` parts of
    ``high · mem_scale + low`` (:class:`placement.solvers.dp_table.Graph`; ``low < mem_scale``, so the
    least pair is the least bound); ``(0, 0)`` without types."""
    if not len(graph.memcap):
        return 0.0, 0.0
    t = min(range(len(graph.memcap)), key=lambda t: (graph.memcap[t], graph.memcap_lo[t]))
    return float(graph.memcap[t]), float(graph.memcap_lo[t])


@dataclass(frozen=True)
class FrontRun:
    """The least ``T · P`` (``score``, ms·W per batch) and, of the pairs that tie with it (module
    docstring), the one of least summed TDP: its max load ``time_ms``, ``power_w`` and plan (``None``: no
    plan); and the work: ``ideals``, ``blocks`` (pairs ``I' ⊊ I`` whose block extended the new pairs of
    ``I'``, summed over the levels) and ``pairs`` ((T, P) pairs ever kept in a front)."""

    score: float
    time_ms: float
    plan: Plan | None
    ideals: int
    blocks: int
    pairs: int
    power_w: float = math.inf


def per_watt_dp(problem: Instance, tdp: Sequence[float], chips: int, *,
                max_ideals: int = DEFAULT_MAX_IDEALS) -> FrontRun:
    """The least (max load × summed TDP) of a pipeline of at most ``chips`` stages over ``problem``'s
    design types of TDPs ``tdp`` (module docstring)."""
    power = np.asarray(tdp, dtype=np.float64)
    blocks_of = _Blocks(problem, len(power), max_ideals)
    graph, data, n = blocks_of.graph, blocks_of.data, blocks_of.n
    supernodes = blocks_of.contraction.size
    least_energy = (graph.comp * power[None, :]).min(axis=1) if len(power) else np.zeros(supernodes)
    rest_energy = np.maximum(least_energy.sum() - blocks_of.member @ least_energy, 0.0)
    by_power = np.argsort(power, kind="stable")
    empty, full = blocks_of.empty, blocks_of.full

    # Pairs: max load, summed TDP, the pair extended, its ideal, the design of the last block.
    T, P, prev, where, design = [0.0], [0.0], [-1], [empty], [-1]
    fronts: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(n)]
    fronts[empty] = np.zeros(1, dtype=np.int64)
    fresh = [ids.copy() for ids in fronts]
    best, best_score = -1, math.inf
    blocks = 0
    others = [i for i in np.argsort(data.popcount, kind="stable") if i not in (empty, full)]
    for _ in range(chips):
        fresh_count = np.array([len(ids) for ids in fresh])
        fresh_ids = np.concatenate(fresh)
        fresh_start = np.cumsum(fresh_count) - fresh_count
        has_fresh = fresh_count > 0
        if not has_fresh.any():
            break
        created: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(n)]
        level_T, level_P = np.asarray(T), np.asarray(P)   # the pairs read at this level are all older
        for i in [full] + others:
            src, comm = blocks_of.sources(i)
            now = has_fresh[src]
            src, comm = src[now], comm[now]
            if not len(src):
                continue
            blocks += len(src)
            load = blocks_of.loads(i, src, comm)                          # (sources, designs)
            ordered = load[:, by_power]
            shifted = np.minimum.accumulate(ordered, axis=1)[:, :-1]
            useful = np.zeros_like(ordered, dtype=bool)                  # Pareto in (block load, TDP)
            useful[:, by_power] = ordered < np.hstack((np.full((len(src), 1), math.inf), shifted))
            counts = fresh_count[src]                                     # the new pairs of each source
            rows = np.repeat(np.arange(len(src)), counts)
            ids = fresh_ids[np.repeat(fresh_start[src] - np.cumsum(counts) + counts, counts) + np.arange(len(rows))]
            pair, t = np.nonzero(useful[rows])
            new_T = np.maximum(level_T[ids[pair]], load[rows[pair], t])
            new_P = level_P[ids[pair]] + power[t]
            new_prev, new_design = ids[pair], t
            within = new_T * new_P + rest_energy[i] <= best_score * (1 + SLACK)
            new_T, new_P, new_prev, new_design = new_T[within], new_P[within], new_prev[within], new_design[within]
            old = fronts[i]
            all_T = np.concatenate((level_T[old], new_T))
            all_P = np.concatenate((level_P[old], new_P))
            is_new = np.concatenate((np.zeros(len(old), dtype=bool), np.ones(len(new_T), dtype=bool)))
            order = np.lexsort((is_new, all_T, all_P))
            sorted_T = all_T[order]
            kept = order[sorted_T < np.concatenate(([math.inf], np.minimum.accumulate(sorted_T)[:-1]))]
            added = kept[is_new[kept]] - len(old)
            if not len(added):
                continue
            start = len(T)
            T.extend(new_T[added].tolist())
            P.extend(new_P[added].tolist())
            prev.extend(new_prev[added].tolist())
            where.extend([int(i)] * len(added))
            design.extend(new_design[added].tolist())
            ids = np.arange(start, len(T), dtype=np.int64)
            fronts[i] = np.concatenate((old[kept[~is_new[kept]]], ids))
            created[i] = ids
            if i == full:
                scores = new_T[added] * new_P[added]
                if scores.min() < best_score:
                    best_score, best = float(scores.min()), int(ids[np.argmin(scores)])
        fresh = created
    if best < 0:
        return FrontRun(math.inf, math.inf, None, n, blocks, len(T))
    bound = tie_bound(best_score)   # of the pairs of V that tie, the least P, then the least T
    chosen = min((int(p) for p in fronts[full] if T[p] * P[p] <= bound), key=lambda p: (P[p], T[p]), default=best)
    steps = []
    point = chosen
    while prev[point] >= 0:   # walked back to the empty ideal
        steps.append((where[prev[point]], where[point], design[point]))
        point = prev[point]
    return FrontRun(best_score, T[chosen], blocks_of.plan(steps[::-1]), n, blocks, len(T), P[chosen])


@dataclass(frozen=True)
class PowerRun:
    """The plan of least summed TDP, then least summed area, whose every stage's load is within a cap
    (:func:`least_power_dp`): its max load ``time_ms``, ``power_w``, ``area_mm2`` and plan (``None``: no
    plan within the cap), and the number of ``ideals``."""

    time_ms: float
    power_w: float
    area_mm2: float
    plan: Plan | None
    ideals: int


def least_power_dp(problem: Instance, layers: Layers, tdp: Sequence[float], area: Sequence[float], cap: float, *,
                   max_ideals: int = DEFAULT_MAX_IDEALS) -> PowerRun:
    """The plan on the chips of ``layers`` (the design types of ``problem``, of TDPs ``tdp`` and areas ``area``)
    of least summed TDP, then least summed area, among those whose every stage has load at most ``cap`` (module
    docstring: ``W_L(I)``)."""
    power, size = np.asarray(tdp, dtype=np.float64), np.asarray(area, dtype=np.float64)
    blocks = _Blocks(problem, len(power), max_ideals)
    n, m = blocks.n, len(layers.counts)
    watts, silicon = np.full((m + 1, n), math.inf), np.full((m + 1, n), math.inf)   # row m: no layer (prev −1)
    watts[:m, blocks.empty] = silicon[:m, blocks.empty] = 0.0
    prev = np.where(layers.prev < 0, m, layers.prev)
    back_src, back_design = np.full((m, n), -1, dtype=np.int64), np.full((m, n), -1, dtype=np.int64)
    back_load = np.zeros((m, n))
    rows = np.arange(m)
    # pool layers (every layer's chips of any design): the layer before a stage does not depend on its design,
    # so of the designs that fit a block only the one of fewest watts, then least area (then first), can be best
    pooled = bool((layers.prev == layers.prev[:, :1]).all())
    by_cost = np.lexsort((size, power))   # stable: equal designs keep their order
    for i in np.argsort(blocks.data.popcount, kind="stable"):
        if i == blocks.empty:
            continue
        src, comm = blocks.within(int(i), cap)
        load = blocks.loads(int(i), src, comm)
        if pooled:
            fits = load[:, by_cost] <= cap
            pick_src = np.flatnonzero(fits.any(axis=1))
            pick_design = by_cost[fits[pick_src].argmax(axis=1)]
        else:
            pick_src, pick_design = np.nonzero(load <= cap)
        step = max(1, CHUNK_ENTRIES // max(m, 1))
        for lo in range(0, len(pick_src), step):   # the candidates (block, design) in chunks, each for every layer
            s, t = pick_src[lo:lo + step], pick_design[lo:lo + step]
            before = prev[:, t]                                     # (layers, candidates)
            w = watts[before, src[s]] + power[t]
            a = silicon[before, src[s]] + size[t]
            least = w.min(axis=1)
            j = np.where(w == least[:, None], a, math.inf).argmin(axis=1)
            w_j, a_j = w[rows, j], a[rows, j]
            better = (w_j < watts[:m, i]) | ((w_j == watts[:m, i]) & (a_j < silicon[:m, i]))
            if better.any():
                watts[:m, i] = np.where(better, w_j, watts[:m, i])
                silicon[:m, i] = np.where(better, a_j, silicon[:m, i])
                back_src[better, i] = src[s[j[better]]]
                back_design[better, i] = t[j[better]]
                back_load[better, i] = load[s[j[better]], t[j[better]]]
    layer, i = layers.full, blocks.full
    if not math.isfinite(watts[layer, i]):
        return PowerRun(math.inf, math.inf, math.inf, None, n)
    total_w, total_a = float(watts[layer, i]), float(silicon[layer, i])
    steps, time_ms = [], 0.0
    while i != blocks.empty:
        before, t = int(back_src[layer, i]), int(back_design[layer, i])
        time_ms = max(time_ms, float(back_load[layer, i]))
        steps.append((before, i, t))
        layer, i = int(layers.prev[layer, t]), before
    return PowerRun(time_ms, total_w, total_a, blocks.plan(steps[::-1]), n)


__all__ = ["FrontRun", "PowerRun", "least_power_dp", "per_watt_dp"]
