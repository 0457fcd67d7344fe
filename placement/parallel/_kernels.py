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


def knapsack_greedy(count, cost, mem, capacity, ceiling, choice):
    """Piper's fast heuristic (``algo.cpp`` lines 1267–1428): the fastest option of every node if that
    fits; ``inf`` if even the least-memory options do not; otherwise, from the fastest, apply the swaps
    to other options in increasing order of extra cost per byte saved (ties by node, then option)
    until the memory fits. Fills ``choice``; ``cost`` is Piper's time-per-sample contribution.
    The swaps are ranked against the fastest options, so a second swap of one node can give back
    memory the first saved: a choice that still does not fit when the swaps run out is ``inf`` (no
    plan), never a value. Whether a choice fits is decided on its sum taken afresh, against ``capacity``
    itself: no slack in bytes, which beside sizes of 1e-18 would admit a choice over the bound (and, as the
    DP's ceiling, hide every plan that fits). ``ceiling`` is not read (the signature is
    :func:`knapsack_exact`'s, so either is the fill's ``knapsack``)."""
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
    tol = 1e-9 * total   # beyond the rounding of the running difference below
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
            if saving > 0.0:
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
        if shave < tol:
            # the running difference loses the small sizes beside a large one (1e15 + 1.3 − 1e15 is 1.25):
            # the swaps stop only where the sum of the sizes chosen, taken afresh, fits
            fresh = 0.0
            for r in range(n):
                fresh += mem[r, choice[r]]
            shave = fresh - capacity   # of the sign of the comparison (a difference of floats is exact in sign)
            if fresh <= capacity:
                break
    if shave > 0.0:   # taken afresh, or above the rounding
        return INF
    value = 0.0
    for i in range(n):
        value += cost[i, choice[i]]
    return value


def stage_items(xbits, k, opt, options, cost, sync, ends, ptr, nodes, count, it):
    """Fill the per-node option data of stage ``X`` (bitset ``xbits``) at degree index ``k``: ``it[0]``
    time, ``it[1]`` edge term, ``it[2]`` parameters, ``it[3]``, ``it[4]`` memory coefficients, row ``i``
    for the ``i``-th node of ``X`` in increasing node number (``nodes[i]``, ``count[i]`` options);
    returns the number of nodes. The tables are packed (:attr:`placement.parallel.tables.Tables.packed`): ``opt`` = (time, params,
    mem_a, mem_b), ``sync`` = (sync_in, sync_out), ``ends`` = (src, dst, in_idx, out_idx), ``ptr`` =
    (in_ptr, out_ptr)."""
    n = options.shape[0]
    width = opt.shape[3]
    items = 0
    for r in range(n):
        if (xbits[r >> 6] >> np.uint64(r & 63)) & np.uint64(1) == 0:
            continue
        nodes[items] = r
        count[items] = options[r, k]
        for l in range(width):
            edge = 0.0
            if l < options[r, k]:
                for q in range(ptr[0, r], ptr[0, r + 1]):
                    e = ends[2, q]
                    u = ends[0, e]
                    if (xbits[u >> 6] >> np.uint64(u & 63)) & np.uint64(1) == 0:
                        edge += 2.0 * (cost[e] + sync[0, e, k, l])
                for q in range(ptr[1, r], ptr[1, r + 1]):
                    e = ends[3, q]
                    w = ends[1, e]
                    if (xbits[w >> 6] >> np.uint64(w & 63)) & np.uint64(1) == 0:
                        edge += 2.0 * (cost[e] + sync[1, e, k, l])
            it[0, items, l] = opt[0, r, k, l]
            it[1, items, l] = edge
            it[2, items, l] = opt[1, r, k, l]
            it[3, items, l] = opt[2, r, k, l]
            it[4, items, l] = opt[3, r, k, l]
        items += 1
    return items


def item_costs(items, count, it, d, y, m, bandwidth, speed):
    """Piper's contribution (into ``it[5]``) and memory (into ``it[6]``) of every option (module
    docstring) at degree ``d`` and ``y``, from the rows :func:`stage_items` filled."""
    for i in range(items):
        for l in range(count[i]):
            it[5, i, l] = ((it[1, i, l] / d + 4.0 * (d - 1) * it[2, i, l] / d / m) / bandwidth
                           + it[0, i, l] / speed / d)
            it[6, i, l] = it[3, i, l] * y + it[4, i, l]


def equal_params(items, count, it):
    """Whether every node's options have one parameter size (``it[2]``, as :func:`stage_items` fills it)."""
    for i in range(items):
        for l in range(1, count[i]):
            if it[2, i, l] != it[2, i, 0]:
                return False
    return True


def evaluate(what, xb, k, opt, options, cost, sync, ends, ptr, ints, floats, state, kept, cache, stats, config, d, y,
             bandwidth, speed, capacity, key, target, slack, types, tau, stage_items, item_costs, equal_params,
             knapsack, written_value):
    """A stage's value for :func:`fill` (the stage ``X`` = bitset ``xb`` at degree index ``k``, data-parallel
    degree ``d`` and ``y`` micro-batches in flight, on devices of ``capacity`` bytes, ``bandwidth`` and
    ``speed``). ``what = 0``: a lower bound at every ``y``, the sum of each node's least contribution;
    ``what = 1``: the least time per sample over the choices that fit — Piper's greedy knapsack in greedy
    mode (``config[5]``), else the exact one with ``min(slack, target)`` as its ceiling, where an answer
    above ``target`` sets ``state[2]`` and returns ``target`` (a lower bound, not the value).

    ``state`` = (items built for this stage, −1 before the first call; whether its nodes' options share
    one parameter size; above; stop — set only by :func:`no_evaluate`). ``kept[key]``: an exact choice of
    this stage at the same ``y`` and another ``d``, which stays optimal when the parameter sizes are shared
    (:func:`fill`); ``ints`` = (nodes, count, choice) and ``floats`` the stage's items
    (:func:`stage_items`, :func:`item_costs`). The last five arguments are the helpers it calls
    (``knapsack``: :func:`knapsack_greedy` in greedy mode, else :func:`knapsack_exact`; ``written_value``:
    :func:`written_value`, or its stub where no sizes are decided as written).

    Sizes decided as written (``config[10] > 0``, exact mode; ``types[:, tau]``: the device type's column of
    :func:`fill`): the knapsack on the widened bound ``types[3, tau]``, which every choice that fits meets, so
    that its value bounds theirs; :func:`written_value` then decides on the sizes as written. Given its stub
    (a NaN), the evaluation sets ``state[3]``, as :func:`no_evaluate` does: the caller reruns with
    :func:`written_value`."""
    state[2] = 0
    n = options.shape[0]
    count = ints[1]
    choice = ints[2]
    c_cost = floats[5]
    c_mem = floats[6]
    m = config[4]
    greedy = config[5] != 0
    if state[0] < 0:
        state[0] = stage_items(xb, k, opt, options, cost, sync, ends, ptr, ints[0], count, floats)
        state[1] = 1 if equal_params(state[0], count, floats) else 0
    built = state[0]
    item_costs(built, count, floats, d, y, m, bandwidth, speed)   # what = 0 reads only the costs
    if what == 0:
        lb = 0.0
        for i in range(built):
            low = INF
            for l in range(count[i]):
                low = min(low, c_cost[i, l])
            lb += low
        return lb
    if not greedy and state[1] != 0 and kept[key, n] != 0:
        val = 0.0
        for i in range(built):
            val += c_cost[i, kept[key, i]]
        return val
    stats[2] += 1
    if greedy:
        val = knapsack(count[:built], c_cost[:built], c_mem[:built], capacity, INF, choice)
        if config[3] != 0:   # suffix schedules: count the values not monotone in y
            for z in range(1, cache.shape[1]):
                if cache[0, z] >= 0.0 and ((z < y and cache[0, z] > val * (1 + 1e-12))
                                           or (z > y and cache[0, z] * (1 + 1e-12) < val)):
                    stats[3] += 1
        return val
    top = slack
    cut = target < top
    if cut:   # only a value below the cell's matters
        top = target
    if config[10] > 0 and types[4, tau] < INF:   # memory decided on the sizes as written
        val = knapsack(count[:built], c_cost[:built], c_mem[:built], types[3, tau], top, choice)
        if val < INF:
            val = written_value(val, count[:built], c_cost[:built], c_mem[:built], types[3, tau], top, choice,
                                ints[0], k, y, opt, types, tau, config[10])
            if val != val:   # the stub: the fill stops, and the caller reruns with the sizes decided as written
                state[3] = 1
                return 0.0
    else:
        val = knapsack(count[:built], c_cost[:built], c_mem[:built], capacity, top, choice)
    if val < INF and state[1] != 0:
        kept[key, n] = 1
        for i in range(built):
            kept[key, i] = choice[i]
    if val >= INF and cut:   # the value is unknown, above ``top``
        state[2] = 1
        return top
    return val


def written_value(value, count, cost, mem, capacity, ceiling, choice, nodes, k, y, opt, types, tau, shift):
    """A stage's value with memory decided on the sizes as written, from ``value``, the exact knapsack's on the
    widened bound ``capacity`` (its options in ``choice``), which bounds that of every choice that fits: ``value``
    where its choice fits as written (:func:`fits_as_written`), otherwise (a choice within the rounding of the
    bound) :func:`knapsack_written`'s. Compiled apart from :func:`evaluate`, and only for a fill that reads the
    sizes as written (:func:`evaluator`): most instances have an exact unit and never call it."""
    if fits_as_written(count.shape[0], nodes, choice, k, y, opt, types, tau, shift):
        return value
    return knapsack_written(count, cost, mem, capacity, ceiling, choice, nodes, k, y, opt, types, tau, shift)


def knapsack_written(count, cost, mem, capacity, ceiling, choice, nodes, k, y, opt, types, tau, shift):
    """:func:`knapsack_exact` with ``Σ mem ≤`` the bound of type ``tau`` decided on the sizes as written
    (``capacity`` is that bound widened, which every choice that fits meets in floating point). The sizes as
    written are whole numbers ``N`` of one unit, split as ``N = hi · 2^shift + lo`` (``opt[4:8, r, k, l]``:
    ``mem_a``'s ``hi``, ``lo``, then ``mem_b``'s; ``types[4:6, tau]``: the bound's), so that the sums of the
    ``hi`` and of the ``lo`` parts stay whole numbers below ``2^52`` (:func:`placement.parallel.dp.written_fit`):
    they, and comparisons of ``hi · 2^shift + lo``, are exact in floating point. Each front point carries its
    memory so, and a point is dropped only where a point kept before it is no costlier and no larger in that
    exact memory (decided on the floating-point sums where they are apart by more than ``tol``, beyond their
    rounding: ``4·(n + 4)·2^-53`` of the capacity); the answer is the least-cost final point that fits as
    written. The argument of :func:`knapsack_exact` holds with that exact memory: every choice that fits is
    matched by a final point no costlier that fits. A front kept on floating-point memory alone drops a choice
    that fits for one that does not where their sums round alike. ``nodes``, ``k``, ``y``: the items' nodes,
    degree index and micro-batches in flight."""
    n = count.shape[0]
    scale = 2.0 ** shift
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
    tol = 4.0 * (n + 4) * 1.1102230246251565e-16 * capacity
    size = 64
    fc = np.empty(size)
    fm = np.empty(size)
    fh = np.empty(size)
    fl = np.empty(size)
    back = np.empty(size, dtype=np.int64)
    opt_ = np.empty(size, dtype=np.int64)
    start = np.empty(n + 2, dtype=np.int64)
    start[0] = 0
    fc[0] = 0.0
    fm[0] = 0.0
    fh[0] = 0.0
    fl[0] = 0.0
    back[0] = -1
    opt_[0] = -1
    start[1] = 1
    for i in range(n):
        lo = start[i]
        hi = start[i + 1]
        r = nodes[i]
        m = (hi - lo) * count[i]
        cc = np.empty(m)
        cm = np.empty(m)
        ch = np.empty(m)
        cl = np.empty(m)
        cp = np.empty(m, dtype=np.int64)
        co = np.empty(m, dtype=np.int64)
        c = 0
        for p in range(lo, hi):
            for l in range(count[i]):
                a = fc[p] + cost[i, l]
                w = fm[p] + mem[i, l]
                if w + rest_mem[i + 1] > capacity or a + rest_cost[i + 1] > ceiling:
                    continue
                cc[c] = a
                cm[c] = w
                ch[c] = fh[p] + opt[4, r, k, l] * y + opt[6, r, k, l]
                cl[c] = fl[p] + opt[5, r, k, l] * y + opt[7, r, k, l]
                cp[c] = p
                co[c] = l
                c += 1
        if c == 0:
            return INF
        order = stable_order(cm[:c])
        if hi + c > size:
            while hi + c > size:
                size *= 2
            fc2 = np.empty(size)
            fm2 = np.empty(size)
            fh2 = np.empty(size)
            fl2 = np.empty(size)
            back2 = np.empty(size, dtype=np.int64)
            opt2 = np.empty(size, dtype=np.int64)
            for p in range(hi):   # element by element: numba's slice assignment is slow to compile
                fc2[p] = fc[p]
                fm2[p] = fm[p]
                fh2[p] = fh[p]
                fl2[p] = fl[p]
                back2[p] = back[p]
                opt2[p] = opt_[p]
            fc, fm, fh, fl, back, opt_ = fc2, fm2, fh2, fl2, back2, opt2
        end = hi
        below = hi            # the kept points up to here are below the next candidate's memory by more than tol
        cheapest = INF        # ... and the least cost among them
        for j in range(c):
            a = order[j]
            while below < end and fm[below] <= cm[a] - tol:
                cheapest = min(cheapest, fc[below])
                below += 1
            if cheapest <= cc[a]:
                continue   # dominated: a point no costlier and surely smaller in memory
            dominated = False
            for p in range(below, end):   # near in memory: decided on the exact sums
                if fc[p] <= cc[a] and (fh[p] - ch[a]) * scale <= cl[a] - fl[p]:
                    dominated = True
                    break
            if dominated:
                continue
            fc[end] = cc[a]
            fm[end] = cm[a]
            fh[end] = ch[a]
            fl[end] = cl[a]
            back[end] = cp[a]
            opt_[end] = co[a]
            end += 1
        start[i + 2] = end
    best = -1
    for p in range(start[n], start[n + 1]):
        if (best < 0 or fc[p] < fc[best]) and (fh[p] - types[4, tau]) * scale <= types[5, tau] - fl[p]:
            best = p
    if best < 0:
        return INF
    value = fc[best]
    p = best
    for i in range(n - 1, -1, -1):
        choice[i] = opt_[p]
        p = back[p]
    return value


def fits_as_written(built, nodes, choice, k, y, opt, types, tau, shift):
    """Whether the options ``choice`` of the stage's ``built`` nodes (``nodes``) at degree index ``k`` with ``y``
    micro-batches in flight fit the bound of type ``tau`` on the sizes as written, exactly (the split sizes of
    :func:`knapsack_written`, summed as it sums them)."""
    high = 0.0
    low = 0.0
    for i in range(built):
        r = nodes[i]
        l = choice[i]
        high += opt[4, r, k, l] * y + opt[6, r, k, l]
        low += opt[5, r, k, l] * y + opt[7, r, k, l]
    return (high - types[4, tau]) * 2.0 ** shift <= types[5, tau] - low


def no_evaluate(what, xb, k, opt, options, cost, sync, ends, ptr, ints, floats, state, kept, cache, stats, config, d,
                y, bandwidth, speed, capacity, key, target, slack, types, tau, stage_items, item_costs, equal_params,
                knapsack, written_value):
    """The stand-in for :func:`evaluate` where no stage should need it: sets ``state[3]``, on which the
    fill stops."""
    state[3] = 1
    return 0.0


def no_stage_items(xbits, k, opt, options, cost, sync, ends, ptr, nodes, count, it):
    """The stand-in for :func:`stage_items` beside :func:`no_evaluate`: never called."""
    return -1


def no_item_costs(items, count, it, d, y, m, bandwidth, speed):
    """The stand-in for :func:`item_costs` beside :func:`no_evaluate`: never called."""


def no_equal_params(items, count, it):
    """The stand-in for :func:`equal_params` beside :func:`no_evaluate`: never called."""
    return False


def no_knapsack(count, cost, mem, capacity, ceiling, choice):
    """The stand-in for the knapsack beside :func:`no_evaluate`: never called."""
    return np.nan


def no_written_value(value, count, cost, mem, capacity, ceiling, choice, nodes, k, y, opt, types, tau, shift):
    """The stand-in for :func:`written_value` where no sizes are decided as written: NaN, on which
    :func:`evaluate` stops the fill."""
    return np.nan


def fill(sizes, bits, degrees, pairs, config, types, type_counts, codes, masks, fsum, fcut, lowm, wlb, limits,
         cut_ptr, cut_idx, cost, sync, ends, ptr, opt, options, dp, parent, stats, xb, ints, floats, cache, kept, has,
         state, spans, evaluate, stage_items, item_costs, equal_params, knapsack, written_value):
    """Fill ``dp[I, k, s]``: the least largest stage time per sample of a pipeline of the nodes of the
    successor-closed set ``I`` on exactly ``k`` devices whose data-parallel degrees sum to exactly ``s``
    (``collapsed``: one column, ``s`` not tracked — every degree is 1, so ``s`` is the device count, or
    the schedule's memory ignores ``s``). With device types, ``k`` is a code of the count per type:
    ``k = Σ_τ k_τ · stride[τ]`` (``codes[k, τ] = k_τ``, ``codes[k, T] = Σ_τ k_τ``); pair ``q`` (column
    ``q`` of ``pairs``: degree index, ``d``, type) puts a stage of degrees ``(t, d)`` on type ``τ``,
    whose count (``type_counts[0, τ]``), bytes per device, bandwidth and speed (``types[:, τ]``)
    apply; ``K`` bounds the total. One type: ``k`` is the count. Values above ``ceiling`` (the value
    of a known plan) are never needed:
    stages above it are skipped, and so are device counts that cannot leave the rest of the graph
    (or the later stages) enough devices at that ceiling (``wlb``: Σ over nodes of the least
    ``t · time``; a stage at time per sample ``≤ c`` needs ``d·t ≥ wlb(X) / c`` devices; the count is
    rounded up only past a relative and an absolute slack of 1e-9, as sums in another order may
    leave a rest of ``+1e-17`` where the exact rest is 0).
    ``lowm[I, k, j]``: Σ over the nodes of ``I`` of their least memory at degree index ``k`` and
    ``y = j`` (suffix schedules) or ``y = m / d`` of pair ``j`` (``gpipe``): a stage whose difference
    exceeds the widened capacity (``types[3, τ]``: the capacity itself, unless its sizes are decided as written)
    fits no choice (past a slack of 1e-9 of ``lowm[I]``: the difference of two
    sums loses the small sizes beside a large one, 2.5e14 + 1.3 − 2.5e14 being 1.3125). Where every
    node of the stage has options of equal parameter size, the options' costs at another ``d`` are one
    affine map of those at the first (``1/d`` times, plus the same constant per node), so the
    knapsack's choice at ``y`` is kept for every ``d``.
    A stage value is needed only where it could lower its cell: none is computed where the previous
    stages' value already reaches the cell's, and the exact knapsack runs with the cell's value as
    its ceiling (an answer above it is kept as a lower bound of that ``y``, ``cache[1]``, not as the
    value). Greedy mode (Piper's values) evaluates every stage, as Piper does.

    Packed arguments (few of them keep numba's compilation short): ``sizes`` = (sets by size, set
    sizes); ``config`` = (K, columns S1, collapsed, suffix, m, greedy,
    rising: exact values that never fall as ``y`` grows, so that a value or bound at ``y`` bounds every
    larger ``y`` — true when no option's memory per micro-batch is negative; descending: each set's
    subsets in decreasing size, for a pass whose value alone is read; then the stretch ``[lo, hi)`` of the
    sets by size that this call fills: the sets before it filled by earlier calls, on the same ``dp``,
    ``parent``, ``stats`` and ``has``; then the shift of the sizes as written, 0 where they are not read:
    :func:`evaluate`); ``types`` = (bytes per device, bandwidth, speed, widened bytes per device, and the
    bytes as written split as :func:`knapsack_written` reads them) per type; ``type_counts`` = (count,
    stride) per type; ``masks`` = (options missing, options not dominant) per degree index as
    bitsets; ``fsum`` = per-set sums of the dominant options' (time, params, mem_a, mem_b); ``fcut`` =
    an entering edge's term into and out of the stage at its dominant options; ``limits`` = (Σ of
    ``wlb`` over all nodes, ceiling, deadline, start); ``parent`` = (set, pair) of the last stage, set with
    every finite cell (the others are never read, and the fill leaves them as they were: the arrays may be a
    finished fill's); the tables as :attr:`placement.parallel.tables.Tables.packed` gives them.
    ``stats``: [pairs, stage evaluations, knapsacks, greedy values not monotone in y, stopped]: the fill
    stops (``stopped`` = 1, the table unfinished) when :func:`past` says so: the deadline has passed, or
    the fill is on course to overrun it threefold (plain Python only: compiled, it runs to the end); and
    (``stopped`` = 2) where it was given :func:`no_evaluate` and meets a stage that needs an evaluation, or the
    stub of :func:`written_value` and a stage decided on the sizes as written.
    ``xb`` to ``spans``: scratch arrays (:func:`workspace`); a subset ``J`` is read only within ``spans[J]``,
    found the first time it is read (the table is sparse: a cell holds a value only where some plan of ``J`` on
    that count and sum stays within the ceiling, and the other cells were each read and skipped before, for
    every stage and degree they could extend; the cells read are the same, in the same order). The last six
    arguments are ``evaluate``, which values the stages whose dominant options are missing or do not fit
    (:func:`evaluate`, or its stub), and the helpers the fill passes on to it; compiled, the fill takes them as
    function values, so each compiles apart from the others."""
    N = sizes.shape[1]
    W = bits.shape[1]
    Q = pairs.shape[1]
    T = types.shape[1]
    ncodes = codes.shape[0]
    K = config[0]
    S1 = config[1]
    collapsed = config[2] != 0
    suffix = config[3] != 0
    m = config[4]
    greedy = config[5] != 0
    rising = config[6] != 0
    descending = config[7] != 0
    wtot = limits[0]
    ceiling = limits[1]
    slack = ceiling * (1.0 + 1e-12)
    windows = ceiling > 0.0 and ceiling < INF
    ycap = cache.shape[1]
    n = options.shape[0]
    spread = spans.shape[1] > 1
    has[0] = True
    for a in range(config[8], config[9]):   # this call's stretch of the sets by size
        I = sizes[0, a]
        for kk in range(ncodes):
            for ss in range(S1):
                dp[I, kk, ss] = INF
        if sizes[1, I] == 0:
            dp[I, 0, 0] = 0.0
            continue
        rest = 0
        if windows:
            rest = int(np.ceil((wtot - wlb[I]) / ceiling * (1.0 - 1e-9) - 1e-9))
        kcap = K - rest
        if kcap < 1:
            continue
        for bb in range(a):
            b = a - 1 - bb if descending else bb
            J = sizes[0, b]
            if sizes[1, J] >= sizes[1, I]:
                if descending:
                    continue
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
            if past(limits, a, N):
                stats[4] = 1
                return
            if spans[J, 0, 0] < 0:   # J's cells that the loops below read, found once: J is filled
                klo = ncodes
                khi = 0
                for kk in range(ncodes):
                    slo = S1
                    shi = 0
                    for ss in range(S1):
                        prev = dp[J, kk, ss]
                        if not (prev >= INF or prev > slack):
                            if slo == S1:
                                slo = ss
                            shi = ss + 1
                    if slo < shi:
                        if klo == ncodes:
                            klo = kk
                        khi = kk + 1
                    if spread:
                        spans[J, 1 + kk, 0] = slo
                        spans[J, 1 + kk, 1] = shi
                spans[J, 0, 0] = klo
                spans[J, 0, 1] = khi
            for w in range(W):
                xb[w] = bits[I, w] & ~bits[J, w]
            jlo = 0
            if windows:
                jlo = int(np.ceil(wlb[J] / ceiling * (1.0 - 1e-9) - 1e-9))
            for k in range(degrees.shape[0]):
                bad = False
                fast = True
                for w in range(W):
                    if xb[w] & masks[0, k, w]:
                        bad = True
                    if xb[w] & masks[1, k, w]:
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
                    ct = fsum[0, I, k] - fsum[0, J, k]
                    cp = fsum[1, I, k] - fsum[1, J, k]
                    # the memory coefficients as differences of sums, raised by 1e-9 of the larger sum: beside a
                    # large size the small ones round away (2.5e14 + 1.3 − 2.5e14 is 1.3125, and 1.25 the other
                    # way); a stage inside that slack of the capacity goes to the evaluation, which sums its sizes
                    ca = fsum[2, I, k] - fsum[2, J, k] + 1e-9 * abs(fsum[2, I, k])
                    cb = fsum[3, I, k] - fsum[3, J, k] + 1e-9 * abs(fsum[3, I, k])
                    for q in range(cut_ptr[I], cut_ptr[I + 1]):   # entering I from outside: into X unless into J
                        e = cut_idx[q]
                        v = ends[1, e]
                        if (bits[J, v >> 6] >> np.uint64(v & 63)) & np.uint64(1) == 0:
                            ce += fcut[0, e, k]
                    for q in range(cut_ptr[J], cut_ptr[J + 1]):   # entering J: from X when from inside I
                        e = cut_idx[q]
                        u = ends[0, e]
                        if (bits[I, u >> 6] >> np.uint64(u & 63)) & np.uint64(1) != 0:
                            ce += fcut[1, e, k]
                state[0] = -1   # the stage's items are built on first use
                for tau in range(T):
                    capacity = types[0, tau]
                    wide = types[3, tau]   # the bound that no choice that fits exceeds (fill's docstring)
                    bandwidth = types[1, tau]
                    spd = types[2, tau]
                    mtol = capacity * (1.0 - 1e-12)
                    for z in range(ycap + Q):
                        kept[z, n] = 0
                    for q in range(Q):
                        if pairs[0, q] != k or pairs[2, q] != tau:
                            continue
                        d = pairs[1, q]
                        dt = d * t
                        if dt > kcap - jlo:
                            continue
                        lb = 0.0
                        if fast:
                            lb = (ce / d + 4.0 * (d - 1) * cp / d / m) / bandwidth + ct / spd / d
                        else:
                            lb = evaluate(0, xb, k, opt, options, cost, sync, ends, ptr, ints, floats, state, kept,
                                          cache, stats, config, d, m // d, bandwidth, spd, capacity, 0, 0.0, slack,
                                          types, tau,
                                          stage_items, item_costs, equal_params, knapsack, written_value)
                            if state[3] != 0:   # given the stub: the caller reruns with the evaluation
                                stats[4] = 2
                                return
                        if lb > slack:
                            continue
                        whole = m // d   # y of every stage of degree d (gpipe)
                        for y in range(ycap):
                            cache[0, y] = -1.0
                            cache[1, y] = lb
                        for kp in range(max(jlo, spans[J, 0, 0]), spans[J, 0, 1]):   # a code is at least its total
                            tk = codes[kp, T]
                            if tk < jlo or tk > kcap - dt or codes[kp, tau] + dt > type_counts[0, tau]:
                                continue
                            s_lo = 0
                            s_hi = 0
                            if not collapsed:
                                s_hi = min(tk, S1 - 1 - d)
                            if spread:
                                s_lo = spans[J, 1 + kp, 0]
                                s_hi = min(s_hi, spans[J, 1 + kp, 1] - 1)
                            kn = kp + dt * type_counts[1, tau]
                            for sp in range(s_lo, s_hi + 1):
                                prev = dp[J, kp, sp]
                                if prev >= INF or prev > slack:
                                    continue
                                sn = 0 if collapsed else sp + d
                                target = dp[I, kn, sn]
                                if not greedy and prev >= target:
                                    continue   # no stage value can improve this cell
                                y = whole
                                slot = 0
                                if suffix:
                                    sval = codes[kn, T] if collapsed else sn
                                    y = (sval + d - 1) // d
                                    slot = y
                                val = cache[0, slot]
                                if not greedy and val < 0.0 and cache[1, slot] >= target:
                                    continue   # the stage is known to cost at least the cell's value
                                if val < 0.0:
                                    stats[1] += 1
                                    if past(limits, a, N):
                                        stats[4] = 1
                                        return
                                    low = slot if suffix else q
                                    above = False
                                    if fast and ca * y + cb <= mtol:
                                        val = lb
                                    elif lowm[I, k, low] - lowm[J, k, low] > wide * (1.0 + 1e-9) \
                                            + 1e-9 * lowm[I, k, low]:   # the difference's rounding
                                        val = INF
                                    else:
                                        key = y if suffix else ycap + q
                                        val = evaluate(1, xb, k, opt, options, cost, sync, ends, ptr, ints, floats,
                                                       state, kept, cache, stats, config, d, y, bandwidth, spd,
                                                       capacity, key, target, slack, types, tau, stage_items,
                                                       item_costs, equal_params, knapsack, written_value)
                                        if state[3] != 0:
                                            stats[4] = 2
                                            return
                                        above = state[2] != 0
                                    if rising:   # the value rises with y: a lower bound at every larger y
                                        for z in range(slot, ycap):
                                            if cache[1, z] < val:
                                                cache[1, z] = val
                                    if above:
                                        cache[1, slot] = max(cache[1, slot], val)
                                        continue
                                    cache[0, slot] = val
                                cand = max(prev, val)
                                if cand < dp[I, kn, sn]:
                                    dp[I, kn, sn] = cand
                                    parent[0, I, kn, sn] = J
                                    parent[1, I, kn, sn] = q
                                    has[I] = True


def workspace(sets, nodes, width, words, devices, suffix, pairs, codes, sums):
    """The scratch arrays of :func:`fill` (``xb, ints, floats, cache, kept, has, state, spans``) for ``sets`` sets
    of ``nodes`` nodes with ``width`` options at most, ``words`` words per bitset, a total of ``devices``,
    ``pairs`` (type, degree, d) pairs, and a table of ``codes`` device counts by ``sums`` degree sums; allocated
    here so that the compiled fill allocates nothing (each array type numba allocates costs its own compilation
    on a fresh install). ``kept[key]``: a knapsack choice kept for reuse, its last column 1 when set.
    ``spans[J]``: the cells of set ``J`` that hold a value a later stage can extend (finite, within the
    ceiling): ``spans[J, 0]`` the first and one past the last code that has one (``-1`` before ``J`` is read),
    and, where degree sums are tracked (``sums > 1``), ``spans[J, 1 + k]`` the same of the sums at code ``k``."""
    ycap = devices + 2 if suffix else 1
    spans = np.full((sets, 1 + (codes if sums > 1 else 0), 2), -1, dtype=np.int32)
    return (np.zeros(words, dtype=np.uint64), np.zeros((3, nodes), dtype=np.int64), np.zeros((7, nodes, width)),
            np.empty((2, ycap)), np.zeros((ycap + pairs, nodes + 1), dtype=np.int64), np.zeros(sets, dtype=np.bool_),
            np.zeros(4, dtype=np.int64), spans)


def past(limits, done, total):
    """Whether the plain-Python fill stops: the clock (:func:`time.perf_counter`) is past the deadline
    ``limits[2]``, or, after a tenth of a second, the fill is on course to run more than three times its
    budget (``limits[2] − limits[3]``, ``limits[3]`` its start), the time so far scaled by
    ``(total / done)²``: the sets come by size, and a set has about as many subsets before it as its
    position, so the work up to set ``done`` grows as its square."""
    now = perf_counter()
    if now > limits[2]:
        return True
    spent = now - limits[3]
    return spent > 0.1 and done > 0 and spent * (total / done) ** 2 > 3.0 * (limits[2] - limits[3])


def never_past(limits, done, total):
    """:func:`past` in the compiled kernels, which run to the end."""
    return False


#: what :func:`fill` calls, in the order it takes them: the stage evaluation and its helpers
FUNCTIONS = ("evaluate", "stage_items", "item_costs", "equal_params", "knapsack", "written_value")


def evaluator(knapsacks: bool, greedy: bool, written: bool = False) -> str:
    """Which stage evaluation a fill needs: ``"none"`` (:func:`no_evaluate` and stubs) unless some stage
    needs a knapsack (``knapsacks``); then :func:`evaluate` with Piper's greedy knapsack (``"greedy"``) or
    the exact one, with :func:`written_value` where memory is decided on the sizes as written (``written``:
    ``"written"``) and its stub elsewhere (``"exact"``, whose compilation is the shorter by that function's)."""
    return "none" if not knapsacks else "greedy" if greedy else "written" if written else "exact"


def plain_functions(kind: str = "exact") -> tuple:
    """The functions of :data:`FUNCTIONS` as plain Python for the evaluation ``kind``."""
    if kind == "none":
        return no_evaluate, no_stage_items, no_item_costs, no_equal_params, no_knapsack, no_written_value
    return (evaluate, stage_items, item_costs, equal_params, knapsack_greedy if kind == "greedy" else knapsack_exact,
            written_value if kind == "written" else no_written_value)


def interpreted(greedy: bool = False) -> SimpleNamespace:
    """The kernels as plain Python (small families: no compilation), the fill with the knapsack of the mode
    (Piper's greedy one where ``greedy``; the exact one reads the sizes as written where the fill says so)."""
    functions = plain_functions("greedy" if greedy else "written")
    return SimpleNamespace(fill=lambda *args: fill(*args, *functions), compiles=lambda: False, close=lambda: None)


def signature(name: str) -> Any:
    """The numba signature of the function ``name`` of :data:`FUNCTIONS` (every array C-contiguous, as
    the fill passes them)."""
    from placement.kernels import import_numba

    nt = import_numba().types
    i8, f8 = nt.int64, nt.float64

    def arr(dtype, dims):
        return nt.Array(dtype, dims, "C")

    vec, mat, items = arr(i8, 1), arr(f8, 2), arr(f8, 3)
    helpers = {"stage_items": i8(arr(nt.uint64, 1), i8, arr(f8, 4), arr(i8, 2), arr(f8, 1), arr(f8, 4), arr(i8, 2),
                                 arr(i8, 2), vec, vec, items),
               "item_costs": nt.void(i8, vec, items, i8, i8, i8, f8, f8),
               "equal_params": nt.boolean(i8, vec, items),
               "knapsack": f8(vec, mat, mat, f8, f8, vec),
               "written_value": f8(f8, vec, mat, mat, f8, f8, vec, vec, i8, i8, arr(f8, 4), mat, i8, i8)}
    if name != "evaluate":
        return helpers[name]
    return f8(i8, arr(nt.uint64, 1), i8, arr(f8, 4), arr(i8, 2), arr(f8, 1), arr(f8, 4), arr(i8, 2), arr(i8, 2),
              arr(i8, 2), arr(f8, 3), vec, arr(i8, 2), arr(f8, 2), vec, vec, i8, i8, f8, f8, f8, i8, f8, f8, mat, i8,
              *(nt.FunctionType(helpers[h]) for h in FUNCTIONS[1:]))


@lru_cache(maxsize=None)
def compiled_function(kind: str, position: int) -> Any:
    """Function ``position`` of :func:`plain_functions` for the evaluation ``kind``, compiled for its
    :func:`signature` (loaded from numba's cache where it holds it)."""
    from placement.kernels import compile_kernel

    function = plain_functions(kind)[position]
    order = None
    if function in (knapsack_greedy, knapsack_exact):
        order = {"first_least": compile_kernel(first_least), "stable_order": compile_kernel(merge_order)}
    if function is written_value:
        order = {"knapsack_written": compile_kernel(knapsack_written, {"stable_order": compile_kernel(merge_order)}),
                 "fits_as_written": compile_kernel(fits_as_written)}
    return compile_kernel(function, order, signature=signature(FUNCTIONS[position]))


def compiled_functions(kind: str) -> tuple:
    """All the functions of :func:`plain_functions` for ``kind``, compiled (:func:`compiled_function`)."""
    return tuple(compiled_function(kind, position) for position in range(len(FUNCTIONS)))


def functions_compile(kind: str) -> bool:
    """Whether some function of :func:`plain_functions` for ``kind`` is neither compiled in this process nor
    in numba's on-disk cache."""
    from placement.kernels import compile_kernel, is_cached

    return any(not is_cached(compile_kernel(function)) for function in plain_functions(kind))


@lru_cache(maxsize=None)
def compiled_fill(arg_types: tuple) -> Any:
    """:func:`fill` compiled for ``arg_types`` (numba types of its arrays and scalars) followed by the
    functions of :data:`FUNCTIONS` as function values of their :func:`signature`."""
    from placement.kernels import compile_kernel, import_numba

    nt = import_numba().types
    functions = tuple(nt.FunctionType(signature(name)) for name in FUNCTIONS)
    return compile_kernel(fill, {"past": compile_kernel(never_past)}, signature=arg_types + functions)


def fill_compiles() -> bool:
    """Whether :func:`fill` is neither compiled in this process nor in numba's on-disk cache."""
    from placement.kernels import compile_kernel, is_cached

    return compiled_fill.cache_info().currsize == 0 and not is_cached(compile_kernel(fill))


def compiled(kind: str = "exact", aside: bool = False) -> SimpleNamespace:
    """The fill compiled (:func:`compiled_fill`, for the arguments of each call) with the stage evaluation
    ``kind`` (:func:`evaluator`) and its helpers, compiled apart (:func:`compiled_functions`); with
    ``"none"``, :func:`no_evaluate` stops the fill (``stats[4] = 2``) where a stage needs an evaluation.
    With ``aside``, when the fill must be compiled, a second process (:func:`placement.kernels.compile_aside`)
    compiles those functions but ``stage_items`` while this one compiles the fill and then ``stage_items``:
    they are independent units, so two cores compile them in about half the time of all of them in turn.
    The fill waits for that process before it loads them (``close`` stops it where the fill is not run)."""
    from placement.kernels import compile_aside, stop_aside, wait_aside

    process = None
    if aside and fill_compiles() and functions_compile(kind):   # all but stage_items: about half the work each
        process = compile_aside([("placement.parallel._kernels", "compiled_function", (kind, position))
                                 for position in (0, 2, 3, 4, 5)], fill)

    def run(*args):
        from placement.kernels import import_numba

        typeof = import_numba().typeof
        kernel = compiled_fill(tuple(typeof(a) for a in args))
        if process is not None:
            compiled_function(kind, 1)   # stage_items, while the second process finishes the others
            wait_aside(process)
        kernel(*args, *compiled_functions(kind))

    return SimpleNamespace(fill=run, close=lambda: stop_aside(process),
                           compiles=lambda: fill_compiles() or functions_compile(kind))


def kernels(use_compiled: bool, kind: str = "exact", aside: bool = False) -> SimpleNamespace:
    """The interpreted kernels, or the compiled ones with the stage evaluation ``kind`` (:func:`compiled`)."""
    return compiled(kind, aside) if use_compiled else interpreted(kind == "greedy")


def must_compile(namespace: SimpleNamespace) -> bool:
    """Whether running ``namespace.fill`` compiles something first: compiled kernels neither compiled in this
    process nor found in numba's on-disk cache (where that cache cannot be read, the answer is yes)."""
    return namespace.compiles()
