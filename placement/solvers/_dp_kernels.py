"""Kernels of the DP over ideals (see :mod:`placement.solvers.dp` for the model).

Every function here is plain Python over numpy arrays, written so that numba can compile it
unchanged. :func:`kernels` returns either the functions themselves (small instances: no
compilation, no numba import) or their compiled versions (:func:`compiled`).

Families of ideals
------------------
A family is a list of ideals, ideal 0 being ∅, in which every other ideal ``I`` is
``parent(I) ∪ {added(I)}`` for an earlier ideal ``parent(I)`` of the family. The
enumeration of all ideals (:func:`enumerate_ideals`) produces one where ``added(I)`` is
the highest-numbered supernode of ``I`` (supernodes are numbered in a topological order,
so every ideal, listed in increasing order, is built one supernode at a time); the
prefixes of a topological order are another (``added`` = the order). From ``parent`` and
``added`` alone, :func:`family_data` derives in time linear in the family's size:

* per-ideal sums of additive quantities (compute per type, unsupported counts, memory,
  work), added in increasing order of the supernodes of each ideal, as a fixed-order sum;
* the ideal as a row of a packed bitset (``uint64`` words), except for a prefix family, whose
  ideals are told apart by their sizes;
* its maximal elements (``maxima``): ``J ⊆ I`` iff every maximal element of ``J`` is in
  ``I``, so a subset test costs the width of ``J``, not the size of the graph;
* its cut: the cost nodes ``u`` (transfer cost ``c(u)``, neighbourhood
  ``N[u] = {u} ∪ succ(u)`` as supernodes) whose ``N[u]`` meets both the ideal and the
  rest, each with ``|N[u] ∩ I|``, sorted by ``u``; and ``Σ c`` over the cut.

The communication of a block ``X = I \\ I'`` follows from the two cuts. With ``R1 = I'``,
``R2 = X``, ``R3 = V \\ I``::

    comm(X) = Σ_{cut(I)} c + Σ_{cut(I')} c − Σ_{u ∈ cut(I) ∩ cut(I')} c(u) · (1 if N[u] meets X else 2)

since a node in both cuts meets R1 and R3 and is counted twice, but must be counted once
if it also meets X and not at all otherwise; ``N[u]`` meets ``X`` iff
``|N[u] ∩ I| > |N[u] ∩ I'|``. A pair thus costs the sizes of the two cuts; in a prefix family, where the
blocks of one ``I`` grow a supernode at a time, a pair costs what the supernodes it adds to the block touch
where that is less (:func:`dp_range`).
"""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import numpy as np

# Indices into the counters array filled by dp_range.
WINDOW, SUBSET, EVALUATED = 0, 1, 2
#: the fewest layers for which the DP tests a pair per class of layers (:func:`dp_range` given ``above``): with
#: fewer, testing each layer costs less than keeping the classes (a 10,000-node chain on 10 layers: 0.48 s in
#: place of 0.32 s; the published throughput inputs have 14)
CLASSES_FROM = 32


def enumerate_ideals(succ_ptr, succ_idx, indeg, limit, store):
    """Every ideal of a DAG whose edges go from lower to higher vertex numbers, at most ``limit + 1``.

    A depth-first search over the ideals listed in increasing order: from an ideal whose highest
    vertex is ``v``, the children add one vertex above ``v`` whose predecessors are all in the
    ideal (found in a two-level bitset of such vertices). Returns ``(count, parent, added)``,
    ``parent[0] = added[0] = -1`` for ∅; the arrays (their first ``count`` entries) are filled
    only when ``store``. Memory is
    linear in the graph (and in ``limit`` when storing); the count stops at ``limit + 1``.
    """
    n = indeg.shape[0]
    words = (n + 63) // 64 + 1
    avail = np.zeros(words, dtype=np.uint64)
    summary = np.zeros((words + 63) // 64 + 1, dtype=np.uint64)
    one = np.uint64(1)
    remaining = indeg.copy()
    for v in range(n):
        if remaining[v] == 0:
            avail[v >> 6] |= one << np.uint64(v & 63)
            summary[v >> 12] |= one << np.uint64((v >> 6) & 63)
    cap = min(limit + 2, 1 << 16) if store else 1   # grows as ideals come (the limit may be huge)
    parent = np.full(cap, -1, dtype=np.int64)
    added = np.full(cap, -1, dtype=np.int64)
    frame_vertex = np.empty(n + 1, dtype=np.int64)
    frame_cursor = np.empty(n + 1, dtype=np.int64)
    frame_ideal = np.empty(n + 1, dtype=np.int64)
    frame_vertex[0] = -1
    frame_cursor[0] = 0
    frame_ideal[0] = 0
    count = 1
    depth = 0
    while depth >= 0:
        # next available vertex at or above the cursor
        b = -1
        x = frame_cursor[depth]
        if x < n:
            w = x >> 6
            word = avail[w] & ~((one << np.uint64(x & 63)) - one)
            if word == 0:
                # find the next non-empty word after w through the summary
                w += 1
                s = w >> 6
                sword = summary[s] & ~((one << np.uint64(w & 63)) - one)
                while sword == 0 and s + 1 < summary.shape[0]:
                    s += 1
                    sword = summary[s]
                if sword != 0:
                    low = sword & (~sword + one)
                    w = s * 64 + _bit_index(low)
                    word = avail[w]
            if word != 0:
                low = word & (~word + one)
                b = w * 64 + _bit_index(low)
        if b < 0 or b >= n:
            e = frame_vertex[depth]
            if e >= 0:  # undo the vertex of this frame
                for k in range(succ_ptr[e], succ_ptr[e + 1]):
                    u = succ_idx[k]
                    if remaining[u] == 0:
                        avail[u >> 6] &= ~(one << np.uint64(u & 63))
                        if avail[u >> 6] == 0:
                            summary[u >> 12] &= ~(one << np.uint64((u >> 6) & 63))
                    remaining[u] += 1
                avail[e >> 6] |= one << np.uint64(e & 63)
                summary[e >> 12] |= one << np.uint64((e >> 6) & 63)
            depth -= 1
            continue
        frame_cursor[depth] = b + 1
        if count > limit:
            return count, parent, added
        if store:
            parent = _grow(parent, count + 1)
            added = _grow(added, count + 1)
            parent[count] = frame_ideal[depth]
            added[count] = b
        avail[b >> 6] &= ~(one << np.uint64(b & 63))
        if avail[b >> 6] == 0:
            summary[b >> 12] &= ~(one << np.uint64((b >> 6) & 63))
        for k in range(succ_ptr[b], succ_ptr[b + 1]):
            u = succ_idx[k]
            remaining[u] -= 1
            if remaining[u] == 0:
                avail[u >> 6] |= one << np.uint64(u & 63)
                summary[u >> 12] |= one << np.uint64((u >> 6) & 63)
        depth += 1
        frame_vertex[depth] = b
        frame_cursor[depth] = b + 1
        frame_ideal[depth] = count
        count += 1
    return count, parent, added


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


def _grow(buf, need):
    """``buf``, or a copy with room for ``need`` entries."""
    if need <= buf.shape[0]:
        return buf
    out = np.empty(max(need, 2 * buf.shape[0]), dtype=buf.dtype)
    for i in range(buf.shape[0]):   # element by element: numba's slice assignment is slow to compile
        out[i] = buf[i]
    return out


def family_data(lo, hi, parent, added, values, pred_ptr, pred_idx, touch_ptr, touch_idx, degree, cost, max_entries,
                store_bits, sums, bits, popcount, max_ptr, max_buf, cut_ptr, cut_buf, cut_count, cut_cost, is_pred):
    """Per-ideal data of ideals ``lo:hi`` of a family (module docstring), filled in after those before ``lo``:
    sums, bitset rows (only when ``store_bits``: else ``bits`` has no columns), maxima and cuts, into the arrays
    :func:`placement.solvers.dp_table.family_arrays` makes (ideal 0, ∅, is all zeros there).

    ``values[s]``: the additive quantities of supernode ``s``; ``pred``: predecessors in the
    contracted graph; ``touch[s]``: the cost nodes ``u`` (ascending) with ``s ∈ N[u]``;
    ``degree[u] = |N[u]|``; ``is_pred``: one ``False`` per supernode (scratch, left as it was). The maxima of
    ideal ``i`` are ``max_buf[max_ptr[i]:max_ptr[i + 1]]``, its cut ``cut_buf[cut_ptr[i]:cut_ptr[i + 1]]`` with
    the counts ``|N[u] ∩ I|`` alongside in ``cut_count``, and ``Σ c`` over it ``cut_cost[i]``. Returns
    ``max_buf, cut_buf, cut_count`` (each grown by doubling where it ran out of room: a new array) and ``done``,
    the first ideal not filled in: ``hi``, or where the maxima and the cuts together would hold more than
    ``max_entries`` entries (one per maximal element and cut node of every ideal filled in), the work stops.
    """
    n_values = values.shape[1]
    words = bits.shape[1]
    one = np.uint64(1)
    for i in range(max(lo, 1), hi):
        p = parent[i]
        b = added[i]
        for k in range(n_values):
            sums[i, k] = sums[p, k] + values[b, k]
        if store_bits:
            for w in range(words):
                bits[i, w] = bits[p, w]
            bits[i, b >> 6] |= one << np.uint64(b & 63)
        popcount[i] = popcount[p] + 1
        # maxima: those of the parent that are not predecessors of b, then b
        for k in range(pred_ptr[b], pred_ptr[b + 1]):
            is_pred[pred_idx[k]] = True
        start = max_ptr[i]
        if start + cut_ptr[i] + max_ptr[p + 1] - max_ptr[p] + 1 + cut_ptr[p + 1] - cut_ptr[p] \
                + touch_ptr[b + 1] - touch_ptr[b] > max_entries:
            for k in range(pred_ptr[b], pred_ptr[b + 1]):
                is_pred[pred_idx[k]] = False
            return max_buf, cut_buf, cut_count, i
        max_buf = _grow(max_buf, start + max_ptr[p + 1] - max_ptr[p] + 1)
        end = start
        for k in range(max_ptr[p], max_ptr[p + 1]):
            m = max_buf[k]
            if not is_pred[m]:
                max_buf[end] = m
                end += 1
        max_buf[end] = b
        max_ptr[i + 1] = end + 1
        for k in range(pred_ptr[b], pred_ptr[b + 1]):
            is_pred[pred_idx[k]] = False
        # cut: merge the parent's cut with the cost nodes whose N[u] holds b
        start = cut_ptr[i]
        need = start + cut_ptr[p + 1] - cut_ptr[p] + touch_ptr[b + 1] - touch_ptr[b]
        cut_buf = _grow(cut_buf, need)
        cut_count = _grow(cut_count, need)
        a, a_end = cut_ptr[p], cut_ptr[p + 1]
        t, t_end = touch_ptr[b], touch_ptr[b + 1]
        end = start
        total = 0.0
        while a < a_end or t < t_end:
            if t >= t_end or (a < a_end and cut_buf[a] < touch_idx[t]):
                u = cut_buf[a]
                c = cut_count[a]
                a += 1
            elif a >= a_end or touch_idx[t] < cut_buf[a]:
                u = touch_idx[t]
                c = 1          # not in the parent's cut and b ∉ parent: N[u] missed the parent
                t += 1
            else:
                u = cut_buf[a]
                c = cut_count[a] + 1
                a += 1
                t += 1
            if c < degree[u]:
                cut_buf[end] = u
                cut_count[end] = c
                total += cost[u]
                end += 1
        cut_ptr[i + 1] = end
        cut_cost[i] = total
    return max_buf, cut_buf, cut_count, hi


def dp_range(lo, hi, bits, comp, unsup, mem, mem_lo, memcap, memcap_lo, mem_scale, pays, cutc, cut_lo, cut_hi,
             cut_buf, cut_count, cost, max_lo, max_hi, max_buf, order, pos, prev, layer_cap, rest_cap, rest_devices,
             pmin, pmin_total, full, ceiling, exact, layer_size, popcount, nested, added, reach, touch_ptr, touch_idx,
             degree, inside, dp, parent, choice, counters, budget, above):
    """Fill ``dp[:, lo:hi]``, or stop early at an ideal once the ideals filled so far have examined at least
    ``budget`` pairs of the window (``counters[WINDOW]``); returns the first ideal not filled (``hi`` where it
    filled them all, always more than ``lo``). Ideals are indexed in processing order (a linear extension of ⊆).

    ``dp[L, i]``: least max-load of placing ideal i as a pipeline of blocks on at most the
    device counts of layer L (``exact``: on exactly those devices, each block non-empty);
    values ``>= ceiling`` mean "no plan at or below the ceiling".
    ``prev[L, t]``: the layer with one device of type t fewer (-1 if none).
    Memory: ideal i holds ``mem[i] · mem_scale + mem_lo[i]`` and a device of type t
    ``memcap[t] · mem_scale + memcap_lo[t]``, whole numbers of one unit split in two parts whose sums are
    exact (:func:`placement.solvers.dp_table.build_graph`).
    ``order[t]``: ideals sorted by (compute on type t, size); ``pos[t]`` its inverse.
    ``cut_lo[i]:cut_hi[i]`` and ``max_lo[i]:max_hi[i]``: ideal i's cut and maxima (module docstring).
    A layer is skipped for ideal i when the work of i cannot fit its devices, or the work
    left cannot fit the devices left, under the ceiling (``layer_cap``/``rest_cap`` are
    capacities in units of Σ_v min_t p_t(v); ``rest_devices[L]`` is the number of devices
    still free after L, or, when ``exact``, still to be filled). When ``exact``, a layer is
    also skipped when i has fewer supernodes (``popcount``) than L has devices
    (``layer_size``), or the rest of the graph fewer than the devices still to be filled;
    for the whole graph (``full``) only the layers with no device left to fill count.
    ``nested``: the family is a chain under ⊆ (the prefixes of one order), so ``J ⊆ I`` iff ``J``
    has fewer supernodes, and ``bits`` may have no columns. Otherwise ``J ⊆ I`` iff every maximal
    supernode of ``J`` is in ``I``; with one column (at most 64 supernodes) it is one word's test
    instead, which costs the same however many maxima ``J`` has (sparse graphs: many ideals, many
    maxima, and windows of mostly incomparable ideals).

    A nested family's blocks ``I \\ J`` are stretches of its order (``added[k]``: the supernode ideal ``k``
    adds, ideals indexed by size), and its pairs of one ``I`` come in decreasing ``J``: the block grows one
    supernode at a time, and its communication is kept as it grows, ``Σ c(u)`` over the cost nodes ``u``
    with ``0 < |N[u] ∩ X| < |N[u]|`` (``inside[u]``: that count, by ``touch``; the cuts' formula gives the
    same), at the cost of the cost nodes each new supernode touches rather than the sizes of the two cuts
    (a chain whose every node feeds its last: cuts as long as the chain, each pair's merge as long). A pair
    grows the block only where that costs no more than merging its two cuts (``reach[k]``: the cost nodes
    touched by the supernodes of ideal ``k``, with repeats): a chain's cuts hold a node or two, and growing
    through every supernode between the sparse pairs that get this far would cost more than merging them.
    Each cost node's cost is added to the running sum at most once and taken off at most once per ideal, so
    its rounding is that of two sums over the nodes, within what
    :func:`placement.solvers.dp.rounding_error` allows a load.

    Whether a pair may lower ``dp[L, i]`` for some layer is asked of every layer where ``above`` is ``None``, or
    of one layer per class of layers with equal ``dp[·, i]`` (:func:`_layer_classes`, :func:`_class_admits`),
    where ``above[L, t]`` is the layer with one device of type t more (-1 if none): the same pairs pass. Not
    with ``exact`` (:func:`_layer_classes`). numba compiles the two cases apart (a branch on whether an
    argument is ``None`` is decided when the kernel is compiled for its types), so that the code for ``None``
    holds nothing of the classes.
    """
    n_layers, n_types = prev.shape
    one = np.uint64(1)
    one_word = not nested and bits.shape[1] == 1   # at most 64 supernodes: J ⊆ I is one word's test
    active = np.zeros(n_layers, dtype=np.bool_)
    rel = np.empty(n_layers, dtype=np.int64)
    rel_prev = np.empty(n_layers, dtype=np.int64)
    if above is not None:
        in_rel = np.zeros(n_layers, dtype=np.bool_)
        rep = np.empty(n_layers, dtype=np.int64)
        heads = np.empty(n_layers, dtype=np.int64)
    examined = counters[WINDOW]
    for i in range(lo, hi):
        if i > lo and counters[WINDOW] - examined >= budget:
            return i
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
            if above is not None:
                n_heads = _layer_classes(dp, i, rel, n_rel, above, in_rel, rep, heads)
            ci = comp[t, i]
            outside_i = ~bits[i, 0] if one_word else np.uint64(0)
            grows = nested and pays[t]   # the block's communication kept as it grows (docstring)
            grown = i                    # the block is ideal i less ideal grown
            running = 0.0
            for p in range(pos[t, i] - 1, -1, -1):
                j = order[t, p]
                lb = ci - comp[t, j]
                if lb >= threshold:
                    break
                counters[WINDOW] += 1
                subset = True
                if nested:
                    subset = popcount[j] < popcount[i]
                elif one_word:
                    subset = (bits[j, 0] & outside_i) == 0
                else:
                    for k in range(max_lo[j], max_hi[j]):
                        s = max_buf[k]
                        if not (bits[i, s >> 6] >> np.uint64(s & 63)) & one:
                            subset = False
                            break
                if not subset:
                    continue
                counters[SUBSET] += 1
                if unsup[t, i] != unsup[t, j]:
                    continue
                # the block's memory against the bound, each a whole number written ``hi · mem_scale + lo``
                # (``lo`` 0 where one part holds it): both differences are exact, and so is the sign of the sum
                if (mem[i] - mem[j] - memcap[t]) * mem_scale + (mem_lo[i] - mem_lo[j] - memcap_lo[t]) > 0:
                    continue
                # whether the block may lower dp[L, i] for some L = rel[r]: max(dp[rel_prev[r], j], lb) < dp[L, i]
                useful = False
                if above is None:
                    for r in range(n_rel):
                        if max(dp[rel_prev[r], j], lb) < dp[rel[r], i]:
                            useful = True
                            break
                else:
                    useful = _class_admits(dp, i, j, lb, ceiling, rel, rel_prev, n_rel, rep, heads, n_heads, pmin,
                                           layer_cap, rest_devices, rest_cap, pmin_total)
                if not useful:
                    continue
                counters[EVALUATED] += 1
                load = lb
                if grows and j <= grown and reach[grown] - reach[j] <= cut_hi[i] - cut_lo[i] + cut_hi[j] - cut_lo[j]:
                    while grown > j:   # the block takes the supernode ideal grown adds
                        b = added[grown]
                        for k in range(touch_ptr[b], touch_ptr[b + 1]):
                            u = touch_idx[k]
                            before = 0 < inside[u] < degree[u]
                            inside[u] += 1
                            after = inside[u] < degree[u]
                            if after and not before:
                                running += cost[u]
                            elif before and not after:
                                running -= cost[u]
                        grown -= 1
                    load += running
                elif pays[t]:
                    # communication of the block i minus j from the two cuts (module docstring)
                    comm = cutc[i] + cutc[j]
                    a, a_end = cut_lo[i], cut_hi[i]
                    c, c_end = cut_lo[j], cut_hi[j]
                    while a < a_end and c < c_end:
                        ua = cut_buf[a]
                        uc = cut_buf[c]
                        if ua == uc:
                            comm -= cost[ua] if cut_count[a] > cut_count[c] else 2.0 * cost[ua]
                            a += 1
                            c += 1
                        elif ua < uc:
                            a += 1
                        else:
                            c += 1
                    load += comm
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
                if above is not None:
                    n_heads = _layer_classes(dp, i, rel, n_rel, above, in_rel, rep, heads)
            for k in range(grown + 1, i + 1):   # the counts back to 0 for the next block
                b = added[k]
                for m in range(touch_ptr[b], touch_ptr[b + 1]):
                    inside[touch_idx[m]] = 0
        # the skip transitions again, after the blocks (_layer_classes); written out as above, not as a helper
        # both call: with a helper, the code compiled for ``above`` None was no longer the code that asks every
        # layer, instruction for instruction
        if above is not None:
            for L in range(n_layers):
                if active[L]:
                    for t in range(n_types):
                        Lp = prev[L, t]
                        if Lp >= 0 and dp[Lp, i] < dp[L, i]:
                            dp[L, i] = dp[Lp, i]
                            parent[L, i] = i
                            choice[L, i] = n_types + t
    return hi


def _layer_classes(dp, i, rel, n_rel, above, in_rel, rep, heads):
    """Classes of the layers ``rel[:n_rel]`` (ascending) that may end ideal ``i`` with a block, for the pairs'
    test in :func:`dp_range`; returns their number, ``heads[:count]`` their heads (as places in ``rel``), and
    ``rep[L]`` the head of layer L's class.

    A layer joins the class of a layer of ``rel`` with one device more and the same ``dp[·, i]``; the head of
    a class is its one layer with no such layer above it. A block from ideal ``j`` may lower ``dp[L, i]``
    where ``max(dp[prev(L), j], lb) < dp[L, i]`` (``prev(L)``: ``L`` less the block's device), and for a
    class that holds for some layer where it holds for the head ``H``, as long as ``j`` is not skipped at
    ``prev(H)``. For then ``j`` is skipped at no layer between ``prev(L)`` and ``prev(H)`` either (a layer
    is skipped for ``j`` where ``j``'s work passes what its devices hold, or the work left what the other
    devices hold, so the layers kept are a box), and on the layers kept ``dp[·, j]`` falls as devices are
    added: the skip transitions are taken again after the blocks. With exact ``N`` there are no skip transitions
    (no device may stay empty), and :func:`dp_range` tests every layer."""
    for r in range(n_rel):
        in_rel[rel[r]] = True
    count = 0
    for r in range(n_rel - 1, -1, -1):   # the layers above a layer come first: they are numbered higher
        L = rel[r]
        rep[L] = L
        for t in range(above.shape[1]):
            M = above[L, t]
            if M >= 0 and in_rel[M] and dp[M, i] == dp[L, i]:
                rep[L] = rep[M]
                break
        if rep[L] == L:
            heads[count] = r
            count += 1
    for r in range(n_rel):
        in_rel[rel[r]] = False
    return count


def _class_admits(dp, i, j, lb, ceiling, rel, rel_prev, n_rel, rep, heads, n_heads, pmin, layer_cap, rest_devices,
                  rest_cap, pmin_total):
    """Whether a block ``i \\ j`` of load at least ``lb`` may lower ``dp[L, i]`` for a layer ``L = rel[r]``,
    ``max(dp[rel_prev[r], j], lb) < dp[L, i]``, asked of the heads of :func:`_layer_classes`, and of every
    layer of a class only where ``j`` is skipped at its head's previous layer (the checks of
    :func:`dp_range`)."""
    for q in range(n_heads):
        head = heads[q]
        target = dp[rel[head], i]
        if lb >= target:
            continue
        value = dp[rel_prev[head], j]
        if value < target:
            return True
        if value < ceiling:
            continue
        below = rel_prev[head]
        if j == 0 or (pmin[j] <= layer_cap[below] and rest_devices[below] > 0
                      and pmin_total - pmin[j] <= rest_cap[below]):
            continue
        for r in range(n_rel):
            if rep[rel[r]] == rel[head] and dp[rel_prev[r], j] < target:
                return True
    return False


def interpreted() -> SimpleNamespace:
    """The kernels as plain Python: no compilation, for families small enough that it costs less.
    ``dp_range_classes`` is :func:`dp_range`, called with ``above`` (the compiled kernels keep it apart)."""
    return SimpleNamespace(enumerate_ideals=enumerate_ideals, family_data=family_data, dp_range=dp_range,
                           dp_range_classes=dp_range)


@lru_cache(maxsize=1)
def compiled() -> SimpleNamespace:
    """The kernels compiled by numba (:func:`placement.kernels.compile_kernel`: cached on disk where a
    writable cache location exists, compiled in memory where none does), holding back Ctrl-C while they
    run (:class:`placement.kernels.InterruptSafe`). ``dp_range_classes`` is :func:`dp_range` compiled as a
    kernel of its own, for calls with ``above`` (classes of layers): each of the two has one compiled
    specialization, cached under its own name, so that :func:`must_compile` asks of the one a run takes."""
    from placement.kernels import InterruptSafe, compile_kernel

    helpers = {"_bit_index": compile_kernel(_bit_index), "_grow": compile_kernel(_grow),
               "_layer_classes": compile_kernel(_layer_classes), "_class_admits": compile_kernel(_class_admits)}
    namespace = {f.__name__: InterruptSafe(compile_kernel(f, helpers))
                 for f in (enumerate_ideals, family_data, dp_range)}
    namespace["dp_range_classes"] = InterruptSafe(compile_kernel(dp_range, helpers, name="dp_range_classes"))
    return SimpleNamespace(**namespace)


def kernels(use_compiled: bool) -> SimpleNamespace:
    """The compiled kernels, or the interpreted ones."""
    return compiled() if use_compiled else interpreted()


def ready() -> bool:
    """Whether the compiled kernels are set up in this process already (numba imported) and need no
    compiling: taking them costs nothing worth counting."""
    return compiled.cache_info().currsize > 0 and not must_compile()


def range_kernel(n_layers: int, exact: bool) -> str:
    """The name of the kernel that fills the table of ``n_layers`` layers (``exact``: exactly ``N`` devices):
    ``dp_range_classes`` from :data:`CLASSES_FROM` layers up, without ``exact``; ``dp_range`` otherwise."""
    return "dp_range_classes" if not exact and n_layers >= CLASSES_FROM else "dp_range"


def must_compile(names: tuple[str, ...] = ("family_data", "dp_range")) -> bool:
    """Whether running the DP's compiled kernels ``names`` (by default a family's: its data and its runs)
    compiles one of them first: neither compiled in this process nor in numba's on-disk cache for the
    current source (:func:`placement.kernels.is_cached`)."""
    from placement.kernels import is_cached

    kernels = compiled()
    return not all(is_cached(getattr(kernels, name)) for name in names)
