"""The module chain's path DP by sliding minima, for paths whose calls memory does not keep short.

Model
-----
The DP of :func:`placement.problem.module_chain._middle` over a path ``path[h:L]``: ``T[j][s]``, the
least finishing time of ``path[h:j]`` with ``s`` calls (``s`` always 0 where calls are not counted),
each node on a CPU after the one before, or in a call of consecutive nodes ``path[i−1..j−1]`` that
receives ``c`` of the node before it (``entry`` before the first), runs them and sends ``c`` of its
last::

    T[j][s]   = min( T[j−1][s] + p_cpu(path[j−1]),
                     min_i T[i−1][s−1] + c(before i) + R[j] − R[i−1] + c(path[j−1]) )

with ``R`` the running sum of the accelerator times along the path, and, in the counted bound, a
call may be a guest of another (not counted, twice its charge, less ``c(entry)`` where it starts the
path). The calls' charge is a difference of prefix sums, so for each ``s`` the inner minimum is a
sliding minimum of ``T[i−1][s] + c(before i) − R[i−1]`` over the starts ``i`` whose call holds no
unsupported node and fits memory (a window that only moves forward): a queue keeps it in constant
time per node, ``O((L − h) · calls)`` in all, where the direct DP tries every call, up to
``(L − h)² / 2``. Its sums are taken in another order than the direct DP's, so a value may differ
from that DP's in the last bits; :func:`placement.problem.module_chain._middle` takes this one only
for paths the direct DP could not finish within its steps.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

INF = math.inf


def long_middle(d: Any, path: list[int], h: int, entry: int, counted: bool) -> list[dict[int, tuple[float, tuple]]]:
    """The table of :func:`placement.problem.module_chain._middle` (``best[j − h]``: calls by count ->
    least finishing time and the calls, pairs of path indices) on the data ``d`` of
    :mod:`placement.problem.module_chain`."""
    L = len(path)
    R = [0.0] * (L + 1)
    M = [0.0] * (L + 1)
    for k, x in enumerate(path):
        R[k + 1] = R[k] + (d.p_acc[x] or 0.0)
        M[k + 1] = M[k] + d.memory[x]
    best: list[dict[int, tuple[float, tuple]]] = [{0: (0.0, ())}]
    calls: dict[int, deque] = {}       # per count before the call: (key, start i) with keys increasing
    guests: dict[int, deque] = {}
    lo = h + 1                          # the first start whose call path[i-1..j-1] may hold
    for j in range(h + 1, L + 1):
        v = path[j - 1]
        if d.p_acc[v] is None:
            lo = j + 1
        while lo <= j and M[j] - M[lo - 1] > d.room:
            lo += 1
        if lo <= j:      # the start i = j joins: T[j-1] is known
            before = entry if j == h + 1 else path[j - 2]
            shared = d.cost[before] if before == entry and h == 0 else 0.0
            for s, (t0, _c) in best[j - 1 - h].items():
                _push(calls.setdefault(s, deque()), t0 + d.cost[before] - R[j - 1], j)
                if counted and d.guests:
                    _push(guests.setdefault(s, deque()), t0 + 2 * (d.cost[before] - R[j - 1]) - shared, j)
        cand: dict[int, tuple[float, tuple]] = {}
        if d.p_cpu[v] is not None:
            cand = {s: (t0 + d.p_cpu[v], c0) for s, (t0, c0) in best[-1].items()}   # type: ignore[operator]
        for s, queue in calls.items():
            while queue and queue[0][1] < lo:
                queue.popleft()
            if not queue:
                continue
            key, i = queue[0]
            s2 = s + 1 if counted else 0
            if counted and s2 > d.limit:
                continue
            value = key + R[j] + d.cost[v]
            if value < cand.get(s2, (INF,))[0]:
                cand[s2] = (value, best[i - 1 - h][s][1] + ((i - 1, j),))
        for s, queue in guests.items():
            while queue and queue[0][1] < lo:
                queue.popleft()
            if queue:
                value = queue[0][0] + 2 * (R[j] + d.cost[v])
                if value < cand.get(s, (INF,))[0]:
                    cand[s] = (value, best[queue[0][1] - 1 - h][s][1])
        best.append(cand)
        d.spend(1 + len(calls) + len(guests))
    return best


def _push(queue: deque, key: float, i: int) -> None:
    """Append start ``i`` with ``key``, dropping the starts before it with keys no smaller (they leave the
    window first and never give less)."""
    while queue and queue[-1][0] >= key:
        queue.pop()
    queue.append((key, i))


def middle_steps(d: Any, path: list[int], h: int) -> int:
    """The calls the direct DP tries on ``path[h:]``: per end, the starts whose call holds only supported
    nodes within memory."""
    total = 0
    lo = h + 1
    memory = 0.0
    for j in range(h + 1, len(path) + 1):
        x = path[j - 1]
        if d.p_acc[x] is None:
            lo, memory = j + 1, 0.0
            continue
        memory += d.memory[x]
        while lo <= j and memory > d.room:
            memory -= d.memory[path[lo - 1]]
            lo += 1
        total += j - lo + 1
    return total
