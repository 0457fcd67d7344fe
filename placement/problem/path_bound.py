"""A lower bound on single-sample latency from single paths, which meet every call in one segment.

Model
-----
The latency model of DESIGN.md §2 with at most ``q`` calls per accelerator. Take a path
``P = v_1 → … → v_ℓ`` of the graph and any valid plan. The nodes of ``P`` on accelerators
fall into maximal *segments* of consecutive nodes of ``P`` in one call; a call is
contiguous, so ``P`` meets each call in at most one segment, and there are at most
``J = q·A`` segments (``A`` accelerators), each within one accelerator's memory. For a
segment ``v_s..v_t`` in call ``S``:

* ``S`` starts no earlier than ``v_{s−1}`` finishes (``v_{s−1} ∈ In(S)``, when ``s > 1``);
* it lasts at least the duration of a call holding the segment alone in the subgraph
  ``G[P]`` of the edges among the nodes of ``P``: ``Σ_{i=s..t} p_acc(v_i)`` plus ``c(u)``
  for each node ``u`` of ``P`` outside the segment with an edge into it, plus ``c(v_i)`` for
  each ``v_i`` of the segment with an edge to a node of ``P`` outside it (no other node of
  ``P`` is in ``S``, so these are in ``In(S)`` and ``Out(S)``; ``v_{s−1}`` and ``v_t`` when
  ``1 < s`` and ``t < ℓ``);
* a node ``u`` off ``P`` with an edge into the segment is in ``S``, adding at least its
  fastest accelerator time, or outside it, adding ``c(u)`` as an input: the call lasts at
  least ``min(c(u), p_acc(u))`` more for each such ``u`` (``c(u)`` when ``u`` runs on no
  accelerator), and an ``S`` holding ``u`` holds no other segment;
* ``v_t`` finishes at its end.

A node of ``P`` on a CPU finishes ``p_cpu`` after its predecessor on ``P``. So ``v_ℓ``
finishes no earlier than the least, over the partitions of ``P`` into at most ``J``
accelerator segments and CPU nodes, of the sum of these durations, with ``p_acc`` a node's
time on the fastest accelerator that supports it and the memory bound the largest
accelerator's (other nodes in the calls, colour classes and which accelerator takes which
segment only add). With ``B[j][t]`` that least sum for ``v_1..v_t`` using ``j`` segments::

    B[0][0] = 0
    B[j][t] = min( B[j][t−1] + p_cpu(v_t),  min_{s ≤ t} B[j−1][s−1] + seg(s, t) )

over the segments ``s..t`` that every node supports and that fit the memory bound; the bound
is ``min_j B[j][ℓ]``, the DP of :mod:`placement.problem.sequential` on ``P`` as an order of
single nodes in ``G[P]`` (there a CPU run lasts the sum of its CPU times, as ``P`` passes
through all of them). On a chain (every node on ``P``) it is the optimum with one call per
accelerator. The paths tried (:func:`heavy_paths`) are the longest paths for a few node
weights: the cheapest time, the memory, and the two normalised and added; the bound is the
largest of theirs.
"""

from __future__ import annotations

import math
from typing import Sequence

from placement.errors import LimitExceededError
from placement.problem.instance import Instance
from placement.problem.sequential import Budget, least_run_sum


def segment_bound(path: Sequence[int], succ: Sequence[Sequence[int]], p_acc: Sequence[float | None],
                  p_cpu: Sequence[float | None], memory: Sequence[float], cost: Sequence[float], capacity: float,
                  segments: int, budget: Budget | None = None) -> float:
    """``min_j B[j][ℓ]`` of the module docstring for ``path`` (node positions in path order) with the
    edges of ``succ`` among its nodes; per node position its fastest accelerator time and CPU time
    (``None``: unsupported there), memory and transfer cost ``c``; ``capacity`` is the largest
    accelerator memory and ``segments`` the most accelerator segments (``q·A``). ``inf`` when no
    partition exists; :class:`~placement.errors.LimitExceededError` when ``budget`` runs out."""
    on_path = set(path)
    succ_in: list[list[int]] = [[] for _ in succ]
    pred_in: list[list[int]] = [[] for _ in succ]
    fee = list(cost)
    for u, targets in enumerate(succ):
        if u in on_path:
            succ_in[u] = [w for w in targets if w in on_path]
        else:   # an input from off the path: paid as c(u), or u runs in the call
            time = p_acc[u]
            fee[u] = cost[u] if time is None else min(cost[u], time)
        for w in targets:
            if w in on_path:
                pred_in[w].append(u)
    found = least_run_sum([[v] for v in path], succ_in, pred_in, fee, p_acc, p_cpu, memory, capacity, segments,
                          budget, max_cpu_run=1)
    return math.inf if found is None else found.total


def heavy_paths(problem: Instance, weights: Sequence[Sequence[float]]) -> list[list[int]]:
    """For each node weighting in ``weights`` (a value per node position), a longest source-to-sink
    path (node positions, in path order); repeated paths are given once."""
    succ = problem.successors()
    order = [problem.index_of(i) for i in problem.topological_ids()]
    paths: list[list[int]] = []
    for weight in weights:
        best = [0.0] * len(order)
        nxt = [-1] * len(order)
        for v in reversed(order):       # longest path starting at v
            tail = max(succ[v], key=best.__getitem__, default=-1)
            best[v] = weight[v] + (best[tail] if tail >= 0 else 0.0)
            nxt[v] = tail
        if not order:
            continue
        v = max(order, key=best.__getitem__)
        path = []
        while v >= 0:
            path.append(v)
            v = nxt[v]
        if path not in paths:
            paths.append(path)
    return paths


def path_weights(fastest: Sequence[float], memory: Sequence[float]) -> list[list[float]]:
    """The weightings of the module docstring: cheapest time, memory, and both normalised and added."""
    total_time = sum(fastest) or 1.0
    total_memory = sum(memory) or 1.0
    return [list(fastest), list(memory), [p / total_time + m / total_memory for p, m in zip(fastest, memory)]]


def path_bound(problem: Instance, p_acc: Sequence[float | None], p_cpu: Sequence[float | None],
               memory: Sequence[float], cost: Sequence[float], capacity: float, segments: int) -> float:
    """The largest :func:`segment_bound` over the :func:`heavy_paths` of ``problem``'s graph, with the
    data given per node position (in any consistent units); the paths whose DP would outrun one
    shared :class:`~placement.problem.sequential.Budget` (long segments where memory does not bind)
    give no bound (0)."""
    cheapest = [min((p for p in (a, c) if p is not None), default=0.0) for a, c in zip(p_acc, p_cpu)]
    succ = problem.successors()
    budget = Budget()
    best = 0.0
    for path in heavy_paths(problem, path_weights(cheapest, memory)):
        try:
            best = max(best, segment_bound(path, succ, p_acc, p_cpu, memory, cost, capacity, segments, budget))
        except LimitExceededError:
            break
    return best


def latency_path_bound(problem: Instance, calls: int = 1) -> float:
    """:func:`path_bound` in the instance's units, for plans with at most ``calls`` calls per
    accelerator (the types that pay communication; the others are the CPUs); a node's time is its
    fastest on the accelerator types (CPU types) that support it and have room for it."""
    types = problem.device_types
    acc = [t for t, dt in enumerate(types) if dt.pays_comm and dt.count > 0]
    cpu = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    nodes = problem.nodes

    def fastest(i: int, kinds: list[int]) -> float | None:
        times = [nodes[i].times[t] for t in kinds
                 if nodes[i].times[t] is not None and nodes[i].memory <= types[t].memory]
        return min(times) if times else None  # type: ignore[type-var]

    return path_bound(problem, [fastest(i, acc) for i in range(len(nodes))],
                      [fastest(i, cpu) for i in range(len(nodes))], [v.memory for v in nodes],
                      [v.out_cost for v in nodes], max((types[t].memory for t in acc), default=0.0),
                      calls * sum(types[t].count for t in acc))
