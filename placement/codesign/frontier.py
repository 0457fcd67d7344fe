"""Throughput per watt with a design per stage: the DP over ideals whose states are Pareto fronts of
(max load, summed TDP).

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

The ideals, their per-design compute sums, memory and the supernode graph are those of the placement
DP (:func:`placement.solvers.dp_table.prepare`); a block's transfers are
``Σ_u c(u)·[N[u] meets X and N[u] ⊄ X]`` over the cost nodes ``u`` (``N[u] = {u} ∪ succ(u)``, as
supernodes), from the counts ``|N[u] ∩ I|`` per ideal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from placement.codesign.pipeline import pool_layers
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Instance
from placement.solvers.dp_table import build_graph, prepare
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, Contraction, contract, enumerate_ideals

#: Relative slack of the bound: a pair is dropped when its bound exceeds the best score by more.
SLACK = 1e-9

#: Families of ideals up to this size use the interpreted kernels (compiling costs more).
INTERPRETED_IDEALS = 5_000


@dataclass(frozen=True)
class FrontRun:
    """The least ``T · P`` (``score``, ms·W per batch), its max load ``time_ms`` and plan (``None``: no
    plan), and the work: ``ideals``, ``blocks`` (pairs ``I' ⊊ I`` whose block extended the new pairs
    of ``I'``, summed over the levels) and ``pairs`` ((T, P) pairs ever kept in a front)."""

    score: float
    time_ms: float
    plan: Plan | None
    ideals: int
    blocks: int
    pairs: int


def per_watt_dp(problem: Instance, tdp: Sequence[float], chips: int, *,
                max_ideals: int = DEFAULT_MAX_IDEALS) -> FrontRun:
    """The least (max load × summed TDP) of a pipeline of at most ``chips`` stages over ``problem``'s
    design types of TDPs ``tdp`` (module docstring)."""
    power = np.asarray(tdp, dtype=np.float64)
    contraction = contract(problem)
    graph = build_graph(problem, contraction)
    family = enumerate_ideals(contraction, max_ideals)
    n = len(family[0])
    data = prepare(graph, pool_layers(len(power), 1), family, compiled=n > INTERPRETED_IDEALS)
    supernodes = contraction.size
    member = np.unpackbits(data.bits.view(np.uint8), axis=1, bitorder="little")[:, :supernodes].astype(np.float64)
    incidence = np.zeros((supernodes, len(graph.cost)))
    for s in range(supernodes):
        incidence[s, graph.touch_idx[graph.touch_ptr[s]:graph.touch_ptr[s + 1]]] = 1.0
    touched = member @ incidence                         # |N[u] ∩ I| per ideal and cost node
    comp = data.comp_t.T                                 # (ideals, designs) compute of the ideal
    least_energy = (graph.comp * power[None, :]).min(axis=1) if len(power) else np.zeros(supernodes)
    rest_energy = np.maximum(least_energy.sum() - member @ least_energy, 0.0)
    by_power = np.argsort(power, kind="stable")
    memcap = float(graph.memcap.min()) if len(graph.memcap) else 0.0
    empty, full = int(np.argmin(data.popcount)), int(np.argmax(data.popcount))

    # Pairs: max load, summed TDP, the pair extended, its ideal, the design of the last block.
    T, P, prev, where, design = [0.0], [0.0], [-1], [empty], [-1]
    fronts: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(n)]
    fronts[empty] = np.zeros(1, dtype=np.int64)
    fresh = [ids.copy() for ids in fronts]
    best, best_score = -1, math.inf
    blocks = 0
    others = [i for i in np.argsort(data.popcount, kind="stable") if i not in (empty, full)]
    sources: dict[int, tuple[np.ndarray, np.ndarray]] = {}
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
            if i not in sources:   # the ideals I' ⊊ I whose block fits a chip's memory, and its transfers
                below = np.flatnonzero(data.popcount < data.popcount[i])
                below = below[((data.bits[below] & ~data.bits[i]) == 0).all(axis=1)
                              & (data.mem[i] - data.mem[below] <= memcap)]
                crossing = touched[i] - touched[below]
                sources[i] = below, ((crossing > 0) & (crossing < graph.degree)) @ graph.cost
            src, comm = sources[i]
            now = has_fresh[src]
            src, comm = src[now], comm[now]
            if not len(src):
                continue
            blocks += len(src)
            load = comp[i][None, :] - comp[src] + comm[:, None]          # (sources, designs)
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
    return FrontRun(best_score, T[best], _plan(problem, contraction, data.bits, best, prev, where, design),
                    n, blocks, len(T))


def _plan(problem: Instance, contraction: Contraction, bits: np.ndarray, point: int, prev: list[int], where: list[int],
          design: list[int]) -> Plan:
    """The pipeline of a pair, walked back to ``∅``: one device per block, in pipeline order."""
    devices = []
    while prev[point] >= 0:
        before = prev[point]
        block = bits[where[point]] & ~bits[where[before]]
        nodes = []
        for s in np.flatnonzero(np.unpackbits(block.view(np.uint8), bitorder="little")):
            nodes.extend(problem.nodes[v].id for v in contraction.members[s])
        devices.append(DeviceAssignment(problem.device_types[design[point]].name, tuple(nodes)))
        point = before
    return Plan(tuple(reversed(devices)))


__all__ = ["FrontRun", "per_watt_dp"]
