"""Counting rows for the assignment models (:mod:`.none`, :mod:`.sets`): pigeonhole bounds on the load.

Model
-----
Slots ``s`` with fixed types ``k(s)``, ``x[v,s]`` as in :mod:`.none` (``free(s)``: the groups
whose ``x[v,s]`` is not fixed to 0), ``p_k(v)`` the time of group ``v`` on type ``k``
(forward plus backward) and ``Θ`` the sum of the objective variables (``T``, or
``TF + TB``, which is at least every slot's whole compute load).

For a set ``H`` of groups, ``H_s = H ∩ free(s)`` and ``g_s(j)`` the sum of the ``j``
smallest ``p_k(s)(v)`` over ``H_s`` (``g_s(0) = 0``; ``g_s`` is convex in ``j``):

1. ``N_s = Σ_{v ∈ H_s} x[v,s]``, integer, the number of groups of ``H`` on slot ``s``;
2. ``Σ_s N_s = |H|`` (every group of ``H`` is on some slot, where it is free);
3. ``Θ ≥ g_s(j) + (g_s(j+1) − g_s(j)) · (N_s − j)`` for ``j = 0 .. |H_s| − 1``: slot ``s``
   holds ``N_s`` groups of ``H``, whose times sum to at least ``g_s(N_s)``, and each row is a
   chord of the convex ``g_s`` extended, which lies below ``g_s`` at every integer;
4. ``Θ ≥ L(H)``, the least ``θ`` for which counts ``N_s`` with ``Σ_s N_s = |H|`` and
   ``h_s(N_s) ≤ θ`` exist, where ``h_s(j) ≥ g_s(j)`` is a lower bound on the load of slot
   ``s`` when it holds exactly ``j`` groups of ``H``. Every plan has such counts at ``θ = Θ``.
   ``h_s(j)`` adds communication to ``g_s(j)`` where the slot's type pays it: if ``A`` is the
   set of groups of ``H`` on the slot, the groups of ``H ∖ A`` are not on it, so every cost
   node of a group of ``A`` with a successor in ``H ∖ A`` is in ``Out``, and every cost node
   of a group of ``H ∖ A`` with a successor in ``A`` is in ``In``. ``h_s(j)`` is the least
   compute-plus-that-communication over the ``j``-subsets of ``H_s``, found by visiting the
   subsets in increasing compute (at most :data:`VISITS` of them, fewer where a visit is dear:
   :data:`WORK` over ``j² +`` the cost nodes of ``H``; the compute of the first subset not
   visited bounds the rest), for the two largest ``j`` with ``g_s(j)`` at most the room bound
   ``L`` of plain ``g_s`` (the counts a slot may take at ``θ = L``), where ``g_s(j)`` is within
   the total communication of ``H`` below ``L`` and ``j ≤`` :data:`MOST_REFINED`; elsewhere
   ``h_s = g_s``. (The published graphs need ``j ≤ 19`` and at most 2,012 cost nodes: all
   :data:`VISITS` within the work limit.)

Communication, memory and contiguity only add to the load or remove plans, so every row holds
for every plan of :mod:`.none` and :mod:`.sets`, with ``stages=N`` too. Their use: a
linear relaxation spreads heavy groups fractionally over the slots; the counts are integers,
so under a cutoff ``Θ < L(H)`` the rows 1–3 alone leave no room (the pigeonhole argument
that many near-identical layers need ``⌈|H| / slots⌉`` of them on one device), which the
solver sees by propagation instead of by enumerating assignments.

``H`` is ``{v : q(v) ≥ t}`` with ``q(v)`` the group's cheapest time on a type it fits: the
thresholds ``t`` (at most :data:`CANDIDATES` of the distinct values of ``q``) whose ``L``
is largest, at most :data:`KEPT` of them, and only those with ``L`` above the bound of
``H`` = every group.
"""

from __future__ import annotations

import bisect
import heapq
import math
from typing import Any, Callable, Sequence

from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import GroupData

#: thresholds tried (distinct cheapest times, evenly spaced in sorted order)
CANDIDATES = 64
#: sets H given count rows
KEPT = 2
#: most subsets visited per slot type and count when adding communication to g
VISITS = 5_000
#: elementary steps a search of :func:`least_with_comm` may take (a visit costs about j² plus the
#: cost nodes of H): keeps the search to seconds on graphs of thousands of nodes
WORK = 20_000_000
#: largest count j whose h_s(j) adds communication
MOST_REFINED = 64


def chord_sums(times: Sequence[float]) -> list[float]:
    """``g(j)`` for ``j = 0 .. len(times)``: the sums of the ``j`` smallest ``times``."""
    sums = [0.0]
    for t in sorted(times):
        sums.append(sums[-1] + t)
    return sums


def room_bound(sums_by_slot: Sequence[Sequence[float]], count: int) -> float:
    """``L(H)`` of row 4: the least ``θ`` with ``Σ_s max {j : g_s(j) ≤ θ} ≥ count``, from each slot's
    ``g_s`` (:func:`chord_sums` of its times); ``inf`` when all slots together hold fewer groups."""
    if count == 0:
        return 0.0
    for theta in sorted({g for sums in sums_by_slot for g in sums[1:]}):
        if sum(bisect.bisect_right(sums, theta) - 1 for sums in sums_by_slot) >= count:
            return theta
    return float("inf")


def reachable(allowed: Sequence[Sequence[int]], total: int) -> bool:
    """Whether one count per slot, each from that slot's ``allowed`` counts, sums to ``total``."""
    sums = 1                                           # bit i: some choice so far sums to i
    mask = (1 << (total + 1)) - 1
    for counts in allowed:
        step = 0
        for j in counts:
            step |= sums << j
        sums = step & mask
    return bool(sums >> total & 1)


def least_with_comm(times: Sequence[float], comm: Callable[[frozenset[int]], float], j: int,
                    visits: int = VISITS, check: Callable[[], None] | None = None) -> float:
    """The least ``Σ_{i∈A} times[i] + comm(A)`` over the ``j``-subsets ``A`` of positions in ``times``
    (sorted ascending), or a lower bound on it: subsets are visited in increasing time sum and the
    search stops when the next sum reaches the best found, or after ``visits`` subsets (the next
    sum then bounds every subset not visited; ``comm`` is never negative). ``check`` is called
    every 64 visits (it raises to stop the search, at the model's deadline)."""
    m = len(times)
    if j > m:
        return float("inf")
    first = tuple(range(j))
    heap = [(sum(times[:j]), first)]
    seen = {first}
    best = float("inf")
    for visit in range(visits):
        if check is not None and visit % 64 == 63:
            check()
        if not heap:
            return best
        total, combo = heapq.heappop(heap)
        if total >= best:
            return best
        best = min(best, total + comm(frozenset(combo)))
        for t in range(j):
            nxt = combo[t] + 1
            if nxt < m and (t == j - 1 or nxt < combo[t + 1]):
                child = combo[:t] + (nxt,) + combo[t + 1:]
                if child not in seen:
                    seen.add(child)
                    heapq.heappush(heap, (total - times[combo[t]] + times[nxt], child))
    return min(best, heap[0][0]) if heap else best


def comm_of_heavy(d: GroupData, H: Sequence[int]) -> tuple[list[tuple[int, frozenset[int], float]], float]:
    """The cost nodes between groups of ``H`` as (group, successor groups in H, cost), and their total."""
    inside = set(H)
    links = [(cn.r, frozenset(w for w in cn.W if w in inside), cn.c) for cn in d.cost_nodes if cn.r in inside]
    links = [link for link in links if link[1]]
    return links, sum(c for *_, c in links)


def room_bound_with_comm(d: GroupData, kinds: Sequence[int], H: Sequence[int], free: set[tuple[int, int]],
                         plain: float, check: Callable[[], None] | None = None) -> float:
    """``L(H)`` of row 4 with ``h_s`` (communication added where it pays; see the module docstring)."""
    links, spread = comm_of_heavy(d, H)
    if not links or not math.isfinite(plain):
        return plain
    slots = range(1, len(kinds) + 1)
    h_by_key: dict[tuple[int, tuple[int, ...]], list[float]] = {}
    h: list[list[float]] = []
    for s in slots:
        k = kinds[s - 1]
        mine = tuple(sorted((v for v in H if (v, s) in free), key=lambda v: d.p(v, k)))  # type: ignore[arg-type, return-value]
        key = (k, mine)
        if key not in h_by_key:
            times = [d.p(v, k) for v in mine]
            sums = chord_sums(times)  # type: ignore[arg-type]
            if d.pays[k]:
                position = {v: i for i, v in enumerate(mine)}
                local = [(position.get(r, -1), frozenset(position.get(w, -1) for w in W), c)  # -1: not on s
                         for r, W, c in links]

                def comm(A: frozenset[int], local: list = local) -> float:
                    return sum(c for r, W, c in local
                               if (r in A and not W <= A) or (r not in A and W & A))
                top = bisect.bisect_right(sums, plain) - 1      # the most groups of H the slot takes at plain
                for j in range(max(1, top - 1), min(top, MOST_REFINED) + 1):
                    if sums[j] >= plain - spread:
                        visits = min(VISITS, max(1, WORK // (j * j + len(local))))
                        sums[j] = max(sums[j], least_with_comm(times, comm, j, visits,  # type: ignore[arg-type]
                                                               check))
            h_by_key[key] = sums
        h.append(h_by_key[key])
    candidates = sorted({g for sums in h for g in sums if g >= plain})
    for theta in candidates:
        if reachable([[j for j, g in enumerate(sums) if g <= theta] for sums in h], len(H)):
            return theta
    return plain


def heavy_sets(d: GroupData, kinds: Sequence[int], free: set[tuple[int, int]],
               check: Callable[[], None] | None = None) -> list[tuple[float, list[int]]]:
    """The sets ``H`` given count rows, with their ``L(H)`` (see the module docstring), best first;
    ``check`` as in :func:`least_with_comm`."""
    n = len(d.groups)
    q = d.cheapest()
    levels = sorted(set(q.values()))
    if not levels:
        return []
    step = max(1, len(levels) // CANDIDATES)
    slots = range(1, len(kinds) + 1)
    found: list[tuple[float, list[int]]] = []
    for t in levels[::step]:
        H = [v for v in range(n) if v in q and q[v] >= t]
        sums = [chord_sums([d.p(v, kinds[s - 1]) for v in H if (v, s) in free]) for s in slots]  # type: ignore[misc]
        found.append((room_bound(sums, len(H)), H))
    floor = found[0][0]   # H = every group that fits somewhere
    best = sorted((f for f in found[1:] if f[0] > floor), key=lambda f: -f[0])[:KEPT]
    refined = [(room_bound_with_comm(d, kinds, H, free, plain, check), H) for plain, H in best]
    return sorted(refined, key=lambda f: -f[0])


def count_rows(be: Backend, d: GroupData, kinds: Sequence[int], free: set[tuple[int, int]],
               x: dict[tuple[int, int], Any], targets: list[Any]) -> float:
    """Rows 1–4 of the module docstring for each set of :func:`heavy_sets`; returns the largest
    ``L(H)`` (0 when there is none)."""
    slots = range(1, len(kinds) + 1)
    theta = [(1, t) for t in targets]
    sets = heavy_sets(d, kinds, free, be.check_time)
    for number, (bound, H) in enumerate(sets):
        be.add(theta, lo=bound)                                                            # (4)
        counts = []
        for s in slots:
            mine = [v for v in H if (v, s) in free]
            if not mine:
                continue
            N = be.num_var(len(mine), f"N{number}[{s}]")
            counts.append(N)
            be.add([(1, x[v, s]) for v in mine] + [(-1, N)], lo=0, hi=0)                 # (1)
            g = chord_sums([d.p(v, kinds[s - 1]) for v in mine])  # type: ignore[misc]
            for j in range(len(mine)):                                                     # (3)
                slope = g[j + 1] - g[j]
                be.add(theta + [(-slope, N)], lo=g[j] - slope * j)
                if g[j + 1] > len(targets) * d.load_ub:   # more groups of H than j + 1 cannot fit
                    break
        be.add([(1, N) for N in counts], lo=len(H), hi=len(H))                             # (2)
    return max((bound for bound, _ in sets), default=0.0)
