"""Kernels of the DP over successor-closed sets for Piper's model (:mod:`placement.parallel.dp`).

Plain Python over numpy arrays, compiled by numba for large families (:func:`kernels`).

Stage cost (Piper's time per sample of a stage, msr-fiddle/piper ``algo.cpp``,
``Graph::getAllTPSsForIdealPair``, lines 1125–1195): node ``v`` with option ``l`` in stage
``X`` of data-parallel degree ``d`` contributes::

    (edge_l(v, X) / d + 4·(d − 1)·params_l / (d · m)) / bandwidth + time_l / speed / d

where ``edge_l(v, X)`` sums ``2·(communicationCost + syncTimeFw[u])`` over the in-edges from
``u ∉ X`` and ``2·(communicationCost + syncTimeBw[w])`` over the out-edges to ``w ∉ X``; its
memory is ``mem_a_l · y + mem_b_l``. The stage's time per sample is the sum of the chosen
options' contributions, subject to ``Σ memory ≤ capacity``. ``speed``, ``bandwidth`` and
``capacity`` are those of the stage's device type (one type: speed 1, the instance's bandwidth
and memory; dividing by a speed of 1.0 is exact, so the values are those of Piper's formula).

Choosing the options (one per node) is a multiple-choice knapsack:

* :func:`knapsack_exact` solves it exactly by dynamic programming over Pareto fronts: after
  the first ``i`` nodes, the non-dominated (memory, cost) pairs of their partial choices.
  Every optimal choice restricted to the first ``i`` nodes is (or is matched by) a front point,
  because replacing that partial choice by one with no more memory and no more cost keeps the
  rest feasible and the total no worse; pruning a point whose memory plus the least memory of
  the remaining nodes exceeds the capacity, or whose cost plus their least cost exceeds the
  ceiling, drops only completions that are infeasible or above the ceiling.
* :func:`knapsack_greedy` is Piper's heuristic (``Graph::solveKnapsack`` with
  ``KNAPSACK_FAST_HEURISTIC``, lines 1267–1428), reproduced for the baseline.
"""

from __future__ import annotations

from functools import lru_cache
from time import perf_counter
from types import SimpleNamespace

import numpy as np

INF = np.inf


def knapsack_exact(count, cost, mem, capacity, ceiling, choice):
    """Least ``Σ cost[i, choice[i]]`` with ``Σ mem[i, choice[i]] ≤ capacity``, or ``inf`` when no choice
    fits or the least exceeds ``ceiling``; fills ``choice`` when finite (module docstring)."""
    n = count.shape[0]
    rest_cost = np.empty(n + 1)
    rest_mem = np.empty(n + 1)
    rest_cost[n] = 0.0
    rest_mem[n] = 0.0
    for i in range(n - 1, -1, -1):
        mc = INF
        mm = INF
        for l in range(count[i]):
            mc = min(mc, cost[i, l])
            mm = min(mm, mem[i, l])
        rest_cost[i] = rest_cost[i + 1] + mc
        rest_mem[i] = rest_mem[i + 1] + mm
    if rest_mem[0] > capacity or rest_cost[0] > ceiling:
        return INF
    size = 64
    fc = np.empty(size)
    fm = np.empty(size)
    back = np.empty(size, dtype=np.int64)
    opt = np.empty(size, dtype=np.int64)
    start = np.empty(n + 2, dtype=np.int64)
    start[0] = 0
    fc[0] = 0.0
    fm[0] = 0.0
    back[0] = -1
    opt[0] = -1
    start[1] = 1
    for i in range(n):
        lo = start[i]
        hi = start[i + 1]
        m = (hi - lo) * count[i]
        cc = np.empty(m)
        cm = np.empty(m)
        cp = np.empty(m, dtype=np.int64)
        co = np.empty(m, dtype=np.int64)
        k = 0
        for p in range(lo, hi):
            for l in range(count[i]):
                c = fc[p] + cost[i, l]
                w = fm[p] + mem[i, l]
                if w + rest_mem[i + 1] > capacity or c + rest_cost[i + 1] > ceiling:
                    continue
                cc[k] = c
                cm[k] = w
                cp[k] = p
                co[k] = l
                k += 1
        if k == 0:
            return INF
        order = stable_order(cm[:k])
        if hi + k > size:
            while hi + k > size:
                size *= 2
            fc2 = np.empty(size)
            fm2 = np.empty(size)
            back2 = np.empty(size, dtype=np.int64)
            opt2 = np.empty(size, dtype=np.int64)
            for p in range(hi):   # element by element: numba's slice assignment is slow to compile
                fc2[p] = fc[p]
                fm2[p] = fm[p]
                back2[p] = back[p]
                opt2[p] = opt[p]
            fc, fm, back, opt = fc2, fm2, back2, opt2
        end = hi
        for j in range(k):
            a = order[j]
            if end > hi and cm[a] == fm[end - 1]:
                if cc[a] < fc[end - 1]:  # same memory, cheaper: replaces the last point
                    fc[end - 1] = cc[a]
                    back[end - 1] = cp[a]
                    opt[end - 1] = co[a]
                continue
            if end > hi and cc[a] >= fc[end - 1]:
                continue  # dominated: no less memory and no less cost than the last point kept
            fc[end] = cc[a]
            fm[end] = cm[a]
            back[end] = cp[a]
            opt[end] = co[a]
            end += 1
        start[i + 2] = end
    best = start[n + 1] - 1   # costs fall as memory grows along the front: the last point is cheapest
    value = fc[best]
    p = best
    for i in range(n - 1, -1, -1):
        choice[i] = opt[p]
        p = back[p]
    return value


def stable_order(keys):
    """The positions of ``keys`` in the order of their values, ties in position order (NaN last): a stable
    argsort, whose answer is unique. Plain Python uses numpy's; the compiled kernels use
    :func:`merge_order`, the same permutation at a small fraction of the compile time of numba's."""
    return np.argsort(keys, kind="stable")


def merge_order(keys):
    """:func:`stable_order` by a bottom-up merge sort."""
    k = keys.shape[0]
    order = np.empty(k, dtype=np.int64)
    for i in range(k):
        order[i] = i
    other = np.empty(k, dtype=np.int64)
    width = 1
    while width < k:
        lo = 0
        while lo < k:
            mid = min(lo + width, k)
            hi = min(lo + 2 * width, k)
            i = lo
            j = mid
            o = lo
            while i < mid and j < hi:
                a = keys[order[i]]
                b = keys[order[j]]
                if b < a or (a != a and b == b):   # b first only when strictly smaller (NaN counts as largest)
                    other[o] = order[j]
                    j += 1
                else:
                    other[o] = order[i]
                    i += 1
                o += 1
            while i < mid:
                other[o] = order[i]
                i += 1
                o += 1
            while j < hi:
                other[o] = order[j]
                j += 1
                o += 1
            lo = hi
        order, other = other, order
        width *= 2
    return order


def first_least(row, count):
    """The first position of the least of ``row[:count]`` (Piper's tie rule: strictly smaller replaces)."""
    best = 0
    for l in range(1, count):
        if row[best] > row[l]:
            best = l
    return best


def knapsack_greedy(count, cost, mem, capacity, choice):
    """Piper's fast heuristic (``algo.cpp`` lines 1267–1428): the fastest option of every node if that
    fits; ``inf`` if even the least-memory options do not; otherwise, from the fastest, apply the swaps
    to other options in increasing order of extra cost per byte saved (ties by node, then option)
    until the memory fits. Fills ``choice``; ``cost`` is Piper's time-per-sample contribution."""
    n = count.shape[0]
    total = 0.0
    for i in range(n):
        choice[i] = first_least(cost[i], count[i])
        total += mem[i, choice[i]]
    if total <= capacity:
        value = 0.0
        for i in range(n):
            value += cost[i, choice[i]]
        return value
    lowest = 0.0
    for i in range(n):
        lowest += mem[i, first_least(mem[i], count[i])]
    if lowest > capacity:
        return INF
    shave = total - capacity
    m = 0
    for i in range(n):
        m += count[i]
    ratio = np.empty(m)
    who = np.empty(m, dtype=np.int64)
    which = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(n):
        for l in range(count[i]):
            saving = mem[i, choice[i]] - mem[i, l]
            if saving > 1e-9:
                ratio[k] = (cost[i, l] - cost[i, choice[i]]) / saving
                who[k] = i
                which[k] = l
                k += 1
    order = stable_order(ratio[:k])   # ties keep (node, option) order
    for j in range(k):
        i = who[order[j]]
        l = which[order[j]]
        shave -= mem[i, choice[i]] - mem[i, l]
        choice[i] = l
        if shave < 1e-9:
            break
    value = 0.0
    for i in range(n):
        value += cost[i, choice[i]]
    return value


def stage_items(xbits, k, time, params, mem_a, mem_b, options, cost, sync_in, sync_out, src, dst,
                in_ptr, in_idx, out_ptr, out_idx, nodes, count, it_time, it_edge, it_params, it_a, it_b):
    """Fill the per-node option data of stage ``X`` (bitset ``xbits``) at degree index ``k``; returns
    the number of nodes (in increasing node number)."""
    n = options.shape[0]
    width = time.shape[2]
    items = 0
    for r in range(n):
        if (xbits[r >> 6] >> np.uint64(r & 63)) & np.uint64(1) == 0:
            continue
        nodes[items] = r
        count[items] = options[r, k]
        for l in range(width):
            edge = 0.0
            if l < options[r, k]:
                for q in range(in_ptr[r], in_ptr[r + 1]):
                    e = in_idx[q]
                    u = src[e]
                    if (xbits[u >> 6] >> np.uint64(u & 63)) & np.uint64(1) == 0:
                        edge += 2.0 * (cost[e] + sync_in[e, k, l])
                for q in range(out_ptr[r], out_ptr[r + 1]):
                    e = out_idx[q]
                    w = dst[e]
                    if (xbits[w >> 6] >> np.uint64(w & 63)) & np.uint64(1) == 0:
                        edge += 2.0 * (cost[e] + sync_out[e, k, l])
            it_edge[items, l] = edge
            it_time[items, l] = time[r, k, l]
            it_params[items, l] = params[r, k, l]
            it_a[items, l] = mem_a[r, k, l]
            it_b[items, l] = mem_b[r, k, l]
        items += 1
    return items


def item_costs(items, count, it_time, it_edge, it_params, it_a, it_b, d, y, m, bandwidth, speed, cost, mem):
    """Piper's contribution and memory of every option (module docstring) at degree ``d`` and ``y``."""
    for i in range(items):
        for l in range(count[i]):
            cost[i, l] = ((it_edge[i, l] / d + 4.0 * (d - 1) * it_params[i, l] / d / m) / bandwidth
                          + it_time[i, l] / speed / d)
            mem[i, l] = it_a[i, l] * y + it_b[i, l]


def equal_params(items, count, it_params):
    """Whether every node's options have one parameter size."""
    for i in range(items):
        for l in range(1, count[i]):
            if it_params[i, l] != it_params[i, 0]:
                return False
    return True


def fill(by_size, bits, size, degrees, q_k, q_d, q_t, K, S1, collapsed, suffix, m, tcap, tbw, speed, tcount,
         stride, digits, total, greedy, missing, nondom, f_time, f_params, f_a, f_b, f_in, f_out, lowm, wlb, wtot, ceiling,
         cut_ptr, cut_idx, src, dst, cost, sync_in, sync_out, in_ptr, in_idx, out_ptr, out_idx,
         time, params, mem_a, mem_b, options, dp, par_set, par_q, stats, deadline, xb, ints, floats, cache, kept,
         kept_choice, has):
    """Fill ``dp[I, k, s]``: the least largest stage time per sample of a pipeline of the nodes of the
    successor-closed set ``I`` on exactly ``k`` devices whose data-parallel degrees sum to exactly ``s``
    (``collapsed``: one column, ``s`` not tracked — every degree is 1, so ``s`` is the device count, or
    the schedule's memory ignores ``s``). With device types, ``k`` is a code of the count per type:
    ``k = Σ_τ k_τ · stride[τ]`` (``digits[k, τ] = k_τ``, ``total[k] = Σ_τ k_τ``); pair ``q`` puts a
    stage of degrees ``(t, q_d[q])`` on type ``q_t[q]``, whose ``tcount``, ``tcap`` (bytes per device),
    ``tbw`` (bandwidth) and ``speed`` apply; ``K`` bounds the total. One type: ``k`` is the count. Values above ``ceiling`` (the value of a known plan) are never needed:
    stages above it are skipped, and so are device counts that cannot leave the rest of the graph
    (or the later stages) enough devices at that ceiling (``wlb``: Σ over nodes of the least
    ``t · time``; a stage at time per sample ``≤ c`` needs ``d·t ≥ wlb(X) / c`` devices; the count is
    rounded up only past a relative and an absolute slack of 1e-9, as sums in another order may
    leave a rest of ``+1e-17`` where the exact rest is 0).
    ``lowm[I, k, j]``: Σ over the nodes of ``I`` of their least memory at degree index ``k`` and
    ``y = j`` (suffix schedules) or ``y = m / q_d[j]`` (``gpipe``): a stage whose difference exceeds
    the capacity fits no choice. Where every node of the stage has options of equal parameter
    size, the options' costs at another ``d`` are one affine map of those at the first (``1/d``
    times, plus the same constant per node), so the knapsack's choice at ``y`` is kept for every ``d``.
    ``stats``: [pairs, stage evaluations, knapsacks, greedy values not monotone in y, stopped]: the fill
    stops (``stopped`` = 1, the table unfinished) when :func:`past` says ``deadline`` has passed (plain
    Python only: compiled, it runs to the end). ``xb`` to ``has``: scratch arrays (:func:`workspace`)."""
    N = by_size.shape[0]
    W = bits.shape[1]
    n = options.shape[0]
    width = time.shape[2]
    Q = q_k.shape[0]
    T = tcount.shape[0]
    codes = total.shape[0]
    slack = ceiling * (1.0 + 1e-12)
    windows = ceiling > 0.0 and ceiling < INF
    nodes = ints[0]
    count = ints[1]
    choice = ints[2]
    it_time = floats[0]
    it_edge = floats[1]
    it_params = floats[2]
    it_a = floats[3]
    it_b = floats[4]
    c_cost = floats[5]
    c_mem = floats[6]
    ycap = cache.shape[0]
    has[0] = True
    for a in range(N):
        I = by_size[a]
        for kk in range(codes):
            for ss in range(S1):
                dp[I, kk, ss] = INF
                par_set[I, kk, ss] = -1
                par_q[I, kk, ss] = -1
        if size[I] == 0:
            dp[I, 0, 0] = 0.0
            continue
        rest = 0
        if windows:
            rest = int(np.ceil((wtot - wlb[I]) / ceiling * (1.0 - 1e-9) - 1e-9))
        kcap = K - rest
        if kcap < 1:
            continue
        for b in range(a):
            J = by_size[b]
            if size[J] >= size[I]:
                break
            if not has[J]:
                continue
            sub = True
            for w in range(W):
                if bits[J, w] & ~bits[I, w]:
                    sub = False
                    break
            if not sub:
                continue
            stats[0] += 1
            if past(deadline):
                stats[4] = 1
                return
            for w in range(W):
                xb[w] = bits[I, w] & ~bits[J, w]
            jlo = 0
            if windows:
                jlo = int(np.ceil(wlb[J] / ceiling * (1.0 - 1e-9) - 1e-9))
            for k in range(degrees.shape[0]):
                bad = False
                fast = True
                for w in range(W):
                    if xb[w] & missing[k, w]:
                        bad = True
                    if xb[w] & nondom[k, w]:
                        fast = False
                if bad:
                    continue
                t = degrees[k]
                ct = 0.0
                cp = 0.0
                ca = 0.0
                cb = 0.0
                ce = 0.0
                if fast:
                    ct = f_time[I, k] - f_time[J, k]
                    cp = f_params[I, k] - f_params[J, k]
                    ca = f_a[I, k] - f_a[J, k]
                    cb = f_b[I, k] - f_b[J, k]
                    for q in range(cut_ptr[I], cut_ptr[I + 1]):   # entering I from outside: into X unless into J
                        e = cut_idx[q]
                        v = dst[e]
                        if (bits[J, v >> 6] >> np.uint64(v & 63)) & np.uint64(1) == 0:
                            ce += f_in[e, k]
                    for q in range(cut_ptr[J], cut_ptr[J + 1]):   # entering J: from X when from inside I
                        e = cut_idx[q]
                        u = src[e]
                        if (bits[I, u >> 6] >> np.uint64(u & 63)) & np.uint64(1) != 0:
                            ce += f_out[e, k]
                built = -1
                pequal = True
                for tau in range(T):
                    capacity = tcap[tau]
                    bandwidth = tbw[tau]
                    spd = speed[tau]
                    mtol = capacity * (1.0 - 1e-12)
                    for z in range(ycap + Q):
                        kept[z] = False
                    for q in range(Q):
                        if q_k[q] != k or q_t[q] != tau:
                            continue
                        d = q_d[q]
                        dt = d * t
                        if dt > kcap - jlo:
                            continue
                        lb = 0.0
                        if fast:
                            lb = (ce / d + 4.0 * (d - 1) * cp / d / m) / bandwidth + ct / spd / d
                        else:
                            if built < 0:
                                built = stage_items(xb, k, time, params, mem_a, mem_b, options, cost, sync_in, sync_out,
                                                    src, dst, in_ptr, in_idx, out_ptr, out_idx, nodes, count, it_time,
                                                    it_edge, it_params, it_a, it_b)
                                pequal = equal_params(built, count, it_params)
                            item_costs(built, count, it_time, it_edge, it_params, it_a, it_b, d, m // d, m, bandwidth,
                                       spd, c_cost, c_mem)   # only the costs are read: any y (an int64, as below)
                            for i in range(built):
                                low = INF
                                for l in range(count[i]):
                                    low = min(low, c_cost[i, l])
                                lb += low
                        if lb > slack:
                            continue
                        for y in range(ycap):
                            cache[y] = -1.0
                        for kp in range(jlo, codes):   # a code is at least its total
                            tk = total[kp]
                            if tk < jlo or tk > kcap - dt or digits[kp, tau] + dt > tcount[tau]:
                                continue
                            s_lo = 0
                            s_hi = 0
                            if not collapsed:
                                s_hi = min(tk, S1 - 1 - d)
                            for sp in range(s_lo, s_hi + 1):
                                prev = dp[J, kp, sp]
                                if prev >= INF or prev > slack:
                                    continue
                                kn = kp + dt * stride[tau]
                                sn = 0 if collapsed else sp + d
                                sval = total[kn] if collapsed else sn
                                y = m // d
                                slot = 0
                                if suffix:
                                    y = (sval + d - 1) // d
                                    slot = y
                                val = cache[slot]
                                if val < 0.0:
                                    stats[1] += 1
                                    if past(deadline):
                                        stats[4] = 1
                                        return
                                    low = slot if suffix else q
                                    if fast and ca * y + cb <= mtol:
                                        val = lb
                                    elif lowm[I, k, low] - lowm[J, k, low] > capacity * (1.0 + 1e-9):
                                        val = INF
                                    else:
                                        if built < 0:
                                            built = stage_items(xb, k, time, params, mem_a, mem_b, options, cost,
                                                                sync_in, sync_out, src, dst, in_ptr, in_idx, out_ptr,
                                                                out_idx, nodes, count, it_time, it_edge, it_params,
                                                                it_a, it_b)
                                            pequal = equal_params(built, count, it_params)
                                        item_costs(built, count, it_time, it_edge, it_params, it_a, it_b, d, y, m,
                                                   bandwidth, spd, c_cost, c_mem)
                                        key = y if suffix else ycap + q
                                        if not greedy and pequal and kept[key]:
                                            val = 0.0
                                            for i in range(built):
                                                val += c_cost[i, kept_choice[key, i]]
                                        else:
                                            stats[2] += 1
                                            val = knapsack_greedy(count[:built], c_cost[:built], c_mem[:built],
                                                                  capacity, choice)
                                            if greedy:
                                                if suffix:
                                                    for z in range(1, ycap):
                                                        if cache[z] >= 0.0 and ((z < y and cache[z] > val * (1 + 1e-12))
                                                                                or (z > y and cache[z] * (1 + 1e-12) < val)):
                                                            stats[3] += 1
                                            elif val < INF:   # the greedy value is that of a fitting choice: a ceiling
                                                val = knapsack_exact(count[:built], c_cost[:built], c_mem[:built],
                                                                     capacity, min(slack, val * (1.0 + 1e-12)), choice)
                                                if val < INF and pequal:
                                                    kept[key] = True
                                                    for i in range(built):
                                                        kept_choice[key, i] = choice[i]
                                    cache[slot] = val
                                cand = max(prev, val)
                                if cand < dp[I, kn, sn]:
                                    dp[I, kn, sn] = cand
                                    par_set[I, kn, sn] = J
                                    par_q[I, kn, sn] = q
                                    has[I] = True


def workspace(sets, nodes, width, words, devices, suffix, pairs):
    """The scratch arrays of :func:`fill` (``xb, ints, floats, cache, kept, kept_choice, has``) for ``sets``
    sets of ``nodes`` nodes with ``width`` options at most, ``words`` words per bitset, a total of
    ``devices`` and ``pairs`` (type, degree, d) pairs; allocated here so that the compiled fill allocates
    nothing (each array type numba allocates costs its own compilation on a fresh install)."""
    ycap = devices + 2 if suffix else 1
    return (np.zeros(words, dtype=np.uint64), np.zeros((3, nodes), dtype=np.int64), np.zeros((7, nodes, width)),
            np.empty(ycap), np.zeros(ycap + pairs, dtype=np.bool_), np.zeros((ycap + pairs, nodes), dtype=np.int64),
            np.zeros(sets, dtype=np.bool_))


def past(deadline):
    """Whether the clock (:func:`time.perf_counter`) is past ``deadline``: the plain-Python fill's budget."""
    return perf_counter() > deadline


def never_past(deadline):
    """:func:`past` in the compiled kernels, which run to the end."""
    return False


def interpreted() -> SimpleNamespace:
    """The kernels as plain Python (small families: no compilation)."""
    return SimpleNamespace(fill=fill, knapsack_exact=knapsack_exact, knapsack_greedy=knapsack_greedy,
                           stage_items=stage_items, item_costs=item_costs, equal_params=equal_params)


@lru_cache(maxsize=1)
def compiled() -> SimpleNamespace:
    """The kernels compiled by numba (:func:`placement.kernels.compile_kernel`)."""
    from placement.kernels import compile_kernel

    first = {"first_least": compile_kernel(first_least), "stable_order": compile_kernel(merge_order),
             "past": compile_kernel(never_past)}
    helpers = {f.__name__: compile_kernel(f, first) for f in (knapsack_exact, knapsack_greedy, stage_items,
                                                               item_costs, equal_params)}
    return SimpleNamespace(fill=compile_kernel(fill, {**first, **helpers}), **helpers)


def kernels(use_compiled: bool) -> SimpleNamespace:
    return compiled() if use_compiled else interpreted()


def must_compile(namespace: SimpleNamespace) -> bool:
    """Whether running ``namespace.fill`` compiles it first: compiled kernels neither compiled in this
    process nor found in numba's on-disk cache (that cache's index for the current source; where it
    cannot be read, the answer is yes)."""
    from placement.kernels import is_cached

    return not is_cached(namespace.fill)
