"""Compiled kernels of the DP over ideals (see :mod:`placement.solvers.dp` for the model).

Ideals are rows of packed bitsets (``uint64`` words) over supernodes. All
additive quantities of a block ``X = I \\ I'`` are differences of per-ideal
prefix sums; the communication of ``X`` follows from per-ideal cut data:

* ``N[u] = {u} ∪ succ(u)`` for a node ``u`` with transfer cost ``c(u)``;
  ``u`` is paid by the device holding ``X`` iff ``N[u]`` meets both ``X`` and
  its complement.
* ``cut(J)`` = nodes whose ``N[u]`` meets both the nodes of ideal ``J`` and
  the rest. With ``R1 = I'``, ``R2 = X``, ``R3 = V \\ I``::

      comm(X) = Σ_{cut(I)} c + Σ_{cut(I')} c − Σ_{u ∈ cut(I) ∩ cut(I')} c(u) · (1 if N[u] meets X else 2)

  since a node in both cuts meets R1 and R3 and is counted twice, but must be
  counted once if it also meets X and not at all otherwise.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Indices into the counters array filled by dp_range.
WINDOW, SUBSET, EVALUATED = 0, 1, 2


@njit(cache=True)
def ideal_sums(bits, values):
    """``out[i, k] = Σ_{s ∈ ideal i} values[s, k]``."""
    n, words = bits.shape
    out = np.zeros((n, values.shape[1]), dtype=values.dtype)
    for i in range(n):
        for w in range(words):
            x = bits[i, w]
            while x:
                low = x & (~x + np.uint64(1))
                s = w * 64 + _bit_index(low)
                for k in range(values.shape[1]):
                    out[i, k] += values[s, k]
                x ^= low
    return out


@njit(cache=True)
def _bit_index(low):
    """Index of the single set bit of ``low``."""
    idx = 0
    if low >= np.uint64(1) << np.uint64(32):
        low >>= np.uint64(32)
        idx += 32
    if low >= np.uint64(1) << np.uint64(16):
        low >>= np.uint64(16)
        idx += 16
    if low >= np.uint64(1) << np.uint64(8):
        low >>= np.uint64(8)
        idx += 8
    if low >= np.uint64(1) << np.uint64(4):
        low >>= np.uint64(4)
        idx += 4
    if low >= np.uint64(1) << np.uint64(2):
        low >>= np.uint64(2)
        idx += 2
    if low >= np.uint64(2):
        idx += 1
    return idx


@njit(cache=True)
def _has(bits, i, s):
    return (bits[i, s >> 6] >> np.uint64(s & 63)) & np.uint64(1)


@njit(cache=True)
def cut_data(bits, nbr_ptr, nbr_idx, cost):
    """Per ideal: Σ c over its cut nodes, and the cut as a bitset over cost nodes."""
    n = bits.shape[0]
    m = cost.shape[0]
    words = (m + 63) // 64
    total = np.zeros(n, dtype=np.float64)
    cutbits = np.zeros((n, max(words, 1)), dtype=np.uint64)
    for i in range(n):
        for u in range(m):
            inside = False
            outside = False
            for k in range(nbr_ptr[u], nbr_ptr[u + 1]):
                if _has(bits, i, nbr_idx[k]):
                    inside = True
                else:
                    outside = True
            if inside and outside:
                total[i] += cost[u]
                cutbits[i, u >> 6] |= np.uint64(1) << np.uint64(u & 63)
    return total, cutbits


@njit(cache=True)
def _comm(i, j, bits, cutc, cutbits, nbr_ptr, nbr_idx, cost):
    """Communication of the block ideal i minus ideal j (j ⊆ i)."""
    value = cutc[i] + cutc[j]
    for w in range(cutbits.shape[1]):
        x = cutbits[i, w] & cutbits[j, w]
        while x:
            low = x & (~x + np.uint64(1))
            u = w * 64 + _bit_index(low)
            x ^= low
            meets = False
            for k in range(nbr_ptr[u], nbr_ptr[u + 1]):
                s = nbr_idx[k]
                if _has(bits, i, s) and not _has(bits, j, s):
                    meets = True
                    break
            value -= cost[u] if meets else 2.0 * cost[u]
    return value


@njit(cache=True)
def dp_range(lo, hi, bits, comp, unsup, mem, memcap, pays, cutc, cutbits, nbr_ptr, nbr_idx, cost,
             order, pos, prev, layer_cap, rest_cap, rest_devices, pmin, pmin_total, full,
             ceiling, exact, layer_size, popcount, dp, parent, choice, counters):
    """Fill ``dp[:, lo:hi]``; ideals are indexed in processing order (a linear extension of ⊆).

    ``dp[L, i]``: least max-load of placing ideal i as a pipeline of blocks on at most the
    device counts of layer L (``exact``: on exactly those devices, each block non-empty);
    values ``>= ceiling`` mean "no plan at or below the ceiling".
    ``prev[L, t]``: the layer with one device of type t fewer (-1 if none).
    ``order[t]``: ideals sorted by (compute on type t, size); ``pos[t]`` its inverse.
    A layer is skipped for ideal i when the work of i cannot fit its devices, or the work
    left cannot fit the devices left, under the ceiling (``layer_cap``/``rest_cap`` are
    capacities in units of Σ_v min_t p_t(v); ``rest_devices[L]`` is the number of devices
    still free after L, or, when ``exact``, still to be filled). When ``exact``, a layer is
    also skipped when i has fewer supernodes (``popcount``) than L has devices
    (``layer_size``), or the rest of the graph fewer than the devices still to be filled;
    for the whole graph (``full``) only the layers with no device left to fill count.
    """
    n_layers, n_types = prev.shape
    words = bits.shape[1]
    active = np.zeros(n_layers, dtype=np.bool_)
    rel = np.empty(n_layers, dtype=np.int64)
    rel_prev = np.empty(n_layers, dtype=np.int64)
    for i in range(lo, hi):
        for L in range(n_layers):
            dp[L, i] = ceiling
            parent[L, i] = -1
            choice[L, i] = -1
        if i == 0:
            for L in range(n_layers):
                if not exact or layer_size[L] == 0:
                    dp[L, 0] = 0.0
            continue
        for L in range(n_layers):
            ok = pmin[i] <= layer_cap[L]
            if i != full:
                ok = ok and rest_devices[L] > 0 and pmin_total - pmin[i] <= rest_cap[L]
            if exact:
                if i == full:
                    ok = ok and rest_devices[L] == 0
                else:
                    ok = ok and rest_devices[L] <= popcount[full] - popcount[i]
                ok = ok and layer_size[L] <= popcount[i]
            active[L] = ok
            if not ok or exact:  # exact: no device may stay empty, so no skip transition
                continue
            for t in range(n_types):
                Lp = prev[L, t]
                if Lp >= 0 and dp[Lp, i] < dp[L, i]:
                    dp[L, i] = dp[Lp, i]
                    parent[L, i] = i
                    choice[L, i] = n_types + t
        for t in range(n_types):
            # Layers that may place a block of type t as the last stage of ideal i.
            n_rel = 0
            threshold = -1.0
            for L in range(n_layers):
                if active[L] and prev[L, t] >= 0:
                    rel[n_rel] = L
                    rel_prev[n_rel] = prev[L, t]
                    n_rel += 1
                    if dp[L, i] > threshold:
                        threshold = dp[L, i]
            if threshold <= 0.0:
                continue
            ci = comp[t, i]
            for p in range(pos[t, i] - 1, -1, -1):
                j = order[t, p]
                lb = ci - comp[t, j]
                if lb >= threshold:
                    break
                counters[WINDOW] += 1
                subset = True
                for w in range(words):
                    if bits[j, w] & ~bits[i, w]:
                        subset = False
                        break
                if not subset:
                    continue
                counters[SUBSET] += 1
                if unsup[t, i] != unsup[t, j]:
                    continue
                if mem[i] - mem[j] > memcap[t]:
                    continue
                useful = False
                for r in range(n_rel):
                    if max(dp[rel_prev[r], j], lb) < dp[rel[r], i]:
                        useful = True
                        break
                if not useful:
                    continue
                counters[EVALUATED] += 1
                load = lb
                if pays[t]:
                    load += _comm(i, j, bits, cutc, cutbits, nbr_ptr, nbr_idx, cost)
                if load >= threshold:
                    continue
                threshold = -1.0
                for r in range(n_rel):
                    L = rel[r]
                    value = max(dp[rel_prev[r], j], load)
                    if value < dp[L, i]:
                        dp[L, i] = value
                        parent[L, i] = j
                        choice[L, i] = t
                    if dp[L, i] > threshold:
                        threshold = dp[L, i]
