"""An exact DP for one interleaved shape over chains of successor-closed sets, memory left out.

Used by :mod:`placement.parallel.interleaved` first for every shape when the graph has at most
:data:`MAX_SETS` successor-closed sets ``J`` (the unions of the last chunks). It ignores memory, so
each node takes the TMPC cheapest for its chunk; its optimum is a bound on the shape, and the
shape's optimum when its plan fits the memory.

A plan of ``K = S·v`` chunks is a chain ``∅ = J_0 ⊊ J_1 ⊊ … ⊊ J_K = V``; step ``k`` adds chunk
``X = J_k ∖ J_{k−1}``, which is chunk ``K − k`` in pipeline order and runs on group ``(K − k) mod S``.
Its time per sample (its share of the group's) is exact for the pair ``(J_{k−1}, J_k)``:
``cost(J, I) = Σ_{u ∈ I∖J} min_o (a(u,o) + Σ_{p → u, p ∉ I} in(p→u, o)
+ Σ_{u → w, w ∈ J} out(u→w, o))``
with ``a``, ``in``, ``out`` as in :mod:`.interleaved_cpsat` (a node's TMPC moves only its own terms,
so the cheapest per node is the cheapest for the chunk). The DP keeps, per step and set, the
vectors of group loads so far that no other is at most everywhere (:func:`_best_chain`), under a
ceiling on every load; :func:`solve_chain` raises the ceiling from a bound of the shape until a plan
appears. Times are the floats of the instance (no scaling).
"""

from __future__ import annotations

import math
import time

import numpy as np

from placement.io.piper import PiperInstance
from placement.parallel.interleaved import Shape, node_costs, plan_of
from placement.parallel.interleaved_cpsat import ShapeOutcome

#: the most successor-closed sets for which the DP runs (its pair costs are quadratic in them)
MAX_SETS = 400


def chain_sets(instance: PiperInstance) -> np.ndarray | None:
    """Membership rows (sets × nodes in the instance's order) of every successor-closed set, the empty set
    first and the full set last; ``None`` above :data:`MAX_SETS`."""
    from placement.errors import LimitExceededError
    from placement.parallel.tables import all_sets, build_tables

    tables = build_tables(instance)
    try:
        sets = all_sets(tables, MAX_SETS)
    except LimitExceededError:
        return None
    number = {u: r for r, u in enumerate(tables.ids)}
    member = sets.member[:, [number[node.id] for node in instance.nodes]]
    order = np.argsort(member.sum(axis=1), kind="stable")
    return member[order]


def pair_costs(instance: PiperInstance, shape: Shape, member: np.ndarray,
               deadline: float = math.inf) -> tuple[np.ndarray, np.ndarray] | None:
    """``cost[J, I]`` (``inf`` unless ``J ⊊ I``) and the cheapest option ``pick[J, I, u]`` (module docstring);
    ``None`` past ``deadline`` (:func:`time.perf_counter`), read once per edge and per set ``J`` (a second or
    more for a few hundred sets)."""
    t, d, bw = shape.t, shape.d, instance.bandwidth
    position = {node.id: i for i, node in enumerate(instance.nodes)}
    n, count = len(instance.nodes), len(member)
    width = max(len(node.configurations[t]) for node in instance.nodes)
    costs = node_costs(instance, shape)
    own = np.full((n, width), np.inf)
    for node in instance.nodes:
        own[position[node.id], :len(costs[node.id])] = costs[node.id]
    inside = np.zeros((count, n, width))    # per I: Σ in-sides of edges from outside I
    outside = np.zeros((count, n, width))   # per J: Σ out-sides of edges into J
    nodes = {node.id: node for node in instance.nodes}
    for e in instance.edges:
        if time.perf_counter() > deadline:
            return None
        u, w = position[e.src], position[e.dst]
        for o, c in enumerate(nodes[e.dst].configurations[t]):
            inside[:, w, o] += (~member[:, u]) * 2 * (e.communication_cost + c.sync_time_fw[e.src]) / (d * bw)
        for o, c in enumerate(nodes[e.src].configurations[t]):
            outside[:, u, o] += member[:, w] * 2 * (e.communication_cost + c.sync_time_bw[e.dst]) / (d * bw)
    cost = np.full((count, count), np.inf)
    pick = np.zeros((count, count, n), dtype=np.int64)
    for j in range(count):
        if time.perf_counter() > deadline:
            return None
        larger = np.flatnonzero((member[j][None, :] <= member).all(axis=1) & (member.sum(axis=1) > member[j].sum()))
        if not len(larger):
            continue
        total = own[None, :, :] + inside[larger] + outside[j][None, :, :]
        best = total.argmin(axis=2)
        least = np.take_along_axis(total, best[:, :, None], axis=2)[:, :, 0]
        chunk = member[larger] & ~member[j][None, :]
        cost[j, larger] = np.where(chunk, least, 0.0).sum(axis=1)
        pick[j, larger] = best
    return cost, pick


def solve_chain(instance: PiperInstance, shape: Shape, member: np.ndarray, *, cutoff: float | None,
                time_limit: float, floor: float = 0.0) -> ShapeOutcome:
    """The best plan of ``shape`` whose every group load is at most ``cutoff`` (module docstring), or a proof
    that there is none; ``no_solution`` when :data:`MAX_LABELS` or the time ran out first.

    The DP runs under rising ceilings ``floor·(1 + 10^-6·2^i)`` (``floor`` a bound on the shape's value),
    then ``cutoff``: a tight ceiling prunes hard, the first ceiling with a plan gives the optimum (plans
    above it are worse), and every ceiling without one is a proven bound. The time runs from the first of
    the pair costs (:func:`pair_costs`), which the DP reads."""
    started = time.perf_counter()
    costs = pair_costs(instance, shape, member, started + time_limit)
    if costs is None:                # out of time before the DP began: ``floor`` is all that is proven
        return ShapeOutcome("no_solution", None, None, floor, time.perf_counter() - started, {"model": "chain-dp"})
    cost, pick = costs
    top = math.inf if cutoff is None else cutoff
    ceilings = [floor * (1 + 1e-6 * 2 ** i) for i in range(18) if floor > 0 and floor * (1 + 1e-6 * 2 ** i) < top]
    proven = floor
    for ceiling in ceilings + [top]:
        found = _best_chain(instance, shape, member, cost, ceiling, started + time_limit)
        wall = time.perf_counter() - started
        if found is None:            # out of labels or time
            return ShapeOutcome("no_solution", None, None, proven, wall, {"model": "chain-dp"})
        if found is not False:
            value, chain = found
            return ShapeOutcome("optimal", _decode(instance, shape, member, pick, chain), value, value, wall,
                                {"model": "chain-dp"})
        proven = ceiling             # no plan at or below this ceiling
    return ShapeOutcome("infeasible", None, None, top, time.perf_counter() - started, {"model": "chain-dp"})


#: the most (set, step, load vector) labels the DP keeps before it gives up
MAX_LABELS = 2_000_000


def _pareto(loads: np.ndarray, deadline: float) -> np.ndarray | None:
    """Indices of the rows of ``loads`` that no other row is at most everywhere (one of equal rows kept);
    ``None`` past ``deadline``."""
    order = np.lexsort(loads.T[::-1])
    loads = loads[order]
    if loads.shape[1] == 2:          # sorted by the first load: keep the rows whose second load drops
        second = loads[:, 1]
        prior = np.minimum.accumulate(np.concatenate(([np.inf], second[:-1])))
        return order[second < prior]
    keep = []
    for r in range(len(loads)):
        if r % 256 == 0 and time.perf_counter() > deadline:
            return None
        if not keep or not (loads[keep] <= loads[r]).all(axis=1).any():
            keep.append(r)
    return order[keep]


def _best_chain(instance, shape, member, cost, ceiling, deadline):
    """The chain of least largest group load among those whose loads are all at most ``ceiling``
    (``(value, chain)``), ``False`` when none exists, ``None`` when the labels or the time ran out.

    Labels: per step ``k`` and set ``J_k``, the vectors of group loads so far that no other label of
    the same step and set is at most everywhere (a dominated label's every completion is dominated by
    the same completion of the other, so the least largest load survives); a label is dropped when a
    load exceeds the ceiling, or when the groups still to receive chunks lack the room for the least
    work left outside ``J_k``. Every chain within the ceiling is thus represented at the end, and the
    least largest load among the last labels is the optimum within the ceiling."""
    K, S = shape.groups * shape.chunks, shape.groups
    count, n = member.shape
    least = np.array([min(c) for c in node_costs(instance, shape).values()])
    rest = ((~member) * least[None, :]).sum(axis=1)          # least work outside each set
    room_needed = rest - 1e-12 * np.maximum(1.0, rest)
    size = member.sum(axis=1)
    successors = [np.flatnonzero(np.isfinite(cost[j])) for j in range(count)]
    # per step: set -> (loads (F × S), parent set per label, parent label index per label)
    steps: list[dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = [
        {0: (np.zeros((1, S)), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))}]
    kept = 0
    for k in range(K):
        group = (K - k - 1) % S
        later = np.array(sorted({(K - q - 1) % S for q in range(k + 1, K)}), dtype=np.int64)
        gathered: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        for j, (loads, _, _) in steps[-1].items():
            if time.perf_counter() > deadline:
                return None
            succ = successors[j]
            succ = succ[n - size[succ] >= K - k - 1]
            if k == K - 1:
                succ = succ[succ == count - 1]
            if not len(succ):
                continue
            if len(loads) * len(succ) * S > 4 * MAX_LABELS:
                return None
            new = np.repeat(loads[:, None, :], len(succ), axis=1)          # F × |succ| × S
            new[:, :, group] += cost[j, succ][None, :]
            room = (ceiling - new[:, :, later]).sum(axis=2) if len(later) else np.zeros(new.shape[:2])
            fits = (new[:, :, group] <= ceiling) & (room >= room_needed[succ][None, :])
            labels, targets = np.nonzero(fits)
            for t in np.unique(targets):
                chosen = labels[targets == t]
                gathered.setdefault(int(succ[t]), []).append((new[chosen, t], np.full(len(chosen), j), chosen))
        current = {}
        for i, parts in gathered.items():
            loads = np.concatenate([p[0] for p in parts])
            if len(loads) > MAX_LABELS:
                return None
            keep = _pareto(loads, deadline)
            if keep is None:
                return None
            current[i] = (loads[keep], np.concatenate([p[1] for p in parts])[keep],
                          np.concatenate([p[2] for p in parts])[keep])
            kept += len(keep)
            if kept > MAX_LABELS:
                return None
        steps.append(current)
    if count - 1 not in steps[-1]:
        return False
    loads, parent, index = steps[-1][count - 1]
    r = int(loads.max(axis=1).argmin())
    value = float(loads[r].max())
    chain, i = [count - 1], count - 1
    for k in range(K, 0, -1):
        _, parent, index = steps[k][i]
        i, r = int(parent[r]), int(index[r])
        chain.append(i)
    return value, tuple(reversed(chain))


def _decode(instance, shape, member, pick, chain):
    K = shape.groups * shape.chunks
    chunk_of, choice = {}, {}
    for k in range(1, K + 1):
        j, i = chain[k - 1], chain[k]
        for p, node in enumerate(instance.nodes):
            if member[i, p] and not member[j, p]:
                chunk_of[node.id] = K - k
                choice[node.id] = int(pick[j, i, p])
    return plan_of(instance, shape, chunk_of, choice)


__all__ = ["MAX_SETS", "chain_sets", "pair_costs", "solve_chain"]
