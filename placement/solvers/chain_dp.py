"""The chain DP: the DP over ideals restricted to the prefixes of a few topological orders.

Model
-----
The prefixes ``∅ ⊂ {o_1} ⊂ {o_1, o_2} ⊂ … ⊂ V`` of a topological order ``o`` of the
contracted forward graph (:mod:`placement.solvers.ideals`) are a down-closed family of
ideals, so the recurrence of :mod:`placement.solvers.dp` runs on them unchanged
(:mod:`placement.solvers.dp_table`; with ``stages=N``, its exact-``N`` table). Its optimum
is the best plan whose stages are intervals of ``o``. Three orders are tried: the
instance order of the supernodes, a depth-first one (reverse postorder, finishing a
branch before starting the next) and Kahn's algorithm preferring the most recently
enabled vertex. The best of them is a plan of the full DP's family, so its value is an
upper bound ``UB`` of the full DP's optimum (∞ when no chain plan exists, or, with
``stages=N``, none has ``N`` stages); :func:`solve_chain` returns that plan alone, with
no ideals enumerated.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.canonical import least_key_order
from placement.problem.instance import Instance
from placement.plan import Plan
from placement.solution import Solution, Status
from placement.parameters import stage_count
from placement.solvers.dp_table import (Graph, Layers, best_plan, build_graph, build_layers, extract, fill,
                                       prefix_family, prepare)
from placement.solvers.ideals import Contraction, contract


def topological_orders(contraction: Contraction) -> list[list[int]]:
    """A few linear extensions of the contracted graph, to seed the upper bound."""
    return orders_of(contraction.succ)


def keyed_orders(succ: Sequence[Sequence[int]], key: Sequence[int],
                 family: Callable[[Sequence[Sequence[int]]], list[list[int]]] | None = None) -> list[list[int]]:
    """The orders ``family`` (default :func:`orders_of`) finds on the graph of successor lists ``succ``
    renumbered in the order of Kahn's algorithm taking the ready vertex of least ``key`` (keys
    distinct), given in the graph's own numbering. With the keys of the vertices (a node's id), the
    orders do not depend on how the vertices are numbered, so a file's node order does not change them."""
    renumbered = least_key_order(succ, key)
    place = {v: i for i, v in enumerate(renumbered)}
    relabelled = [sorted(place[w] for w in succ[v]) for v in renumbered]
    return [[renumbered[i] for i in order] for order in (family or orders_of)(relabelled)]


def orders_of(succ: Sequence[Sequence[int]]) -> list[list[int]]:
    """The vertices' own numbering (a topological order: every edge goes to a larger number), a
    depth-first order and :func:`lifo_order` of the graph of successor lists ``succ``."""
    size = len(succ)
    orders = [list(range(size))]
    # Depth-first: finish a branch before starting the next one (reverse postorder).
    seen = [False] * size
    post: list[int] = []
    indeg = [0] * size
    for s in range(size):
        for w in succ[s]:
            indeg[w] += 1
    for root in range(size - 1, -1, -1):
        if indeg[root] or seen[root]:
            continue
        stack = [(root, iter(sorted(succ[root], reverse=True)))]
        seen[root] = True
        while stack:
            v, it = stack[-1]
            for w in it:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, iter(sorted(succ[w], reverse=True))))
                    break
            else:
                post.append(v)
                stack.pop()
    orders.append(post[::-1])
    orders.append(lifo_order(succ))
    return orders


def lifo_order(succ: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's algorithm on the graph of successor lists ``succ``, preferring the most recently
    enabled vertex (a topological order of that graph)."""
    return kahn_order(succ, list.pop)


def kahn_order(succ: Sequence[Sequence[int]], take: Callable[[list[int]], int]) -> list[int]:
    """Kahn's algorithm on the graph of successor lists ``succ``: ``take`` removes and returns the
    next vertex from the list of ready ones (in the order they became ready)."""
    remaining = [0] * len(succ)
    for targets in succ:
        for w in targets:
            remaining[w] += 1
    ready = [s for s in range(len(succ)) if remaining[s] == 0]
    order = []
    while ready:
        v = take(ready)
        order.append(v)
        for w in succ[v]:
            remaining[w] -= 1
            if remaining[w] == 0:
                ready.append(w)
    return order


def upper_bound(problem: Instance, graph: Graph, layers: Layers, contraction: Contraction,
                stages: int | None, compiled: bool | None = None,
                progress: Callable[[str], None] | None = None, ceiling: float = math.inf,
                found: Callable[[float, Plan], None] | None = None) -> tuple[float, Plan | None]:
    """The best plan of the chain DP over a few topological orders (in the same mode as the DP), of those
    below ``ceiling`` (a plan known already: only a better one matters); ``(ceiling, None)`` if none is.
    ``found`` is called with each better plan and its value as soon as an order's run gives it (the plan
    in hand if the run is interrupted before the last order)."""
    best, best_found = ceiling, None
    distinct = list(dict.fromkeys(map(tuple, topological_orders(contraction))))   # on a chain, all are one
    for i, order in enumerate(distinct, 1):
        # each order's run counts its ideals from 0 again: its lines say which order they are about
        label = "chain" if len(distinct) == 1 else f"chain, order {i} of {len(distinct)}"
        # Only a plan better than the best so far matters: it is the ceiling of the next run.
        try:
            _, value, plan = best_plan(problem, graph, layers, prefix_family(list(order)), best, progress, label,
                                       stages, compiled)
        except LimitExceededError:   # stopped (the time limit): the orders run so far keep their plan
            if best_found is None:   # (no progress line: past its deadline, the watch stops every call)
                raise
            break
        if plan is not None and value < best:
            best, best_found = value, plan
            if found is not None:
                found(value, plan)
    return best, best_found


#: the most blocks :func:`solve_coarse_chain` cuts the order into
COARSE_BLOCKS = 1000
#: the most pairs of intervals times combinations of device counts it examines: with many device types
#: (each combination a layer of the DP's table) it cuts the order into fewer intervals
COARSE_WORK = 2 * 10 ** 7
#: the most combinations of device counts it runs on: past them it uses fewer devices of the types that have
#: most (at least 16 intervals within :data:`COARSE_WORK`)
COARSE_COMBINATIONS = 2 * COARSE_WORK // 16 ** 2


def fewer_devices(problem: Instance, most: int = COARSE_COMBINATIONS) -> Instance:
    """``problem`` with at most ``most`` combinations of device counts, where every type keeps one device at
    least: one device fewer, each time, of a type that has the most (of those, the slowest over the nodes it
    runs, a type that leaves nodes to others counting as slowest). A plan on some of the devices is one on
    all of them. Itself where it has no more, or where one device of each type makes more still."""
    counts = {t.name: t.count for t in problem.device_types}
    if math.prod(c + 1 for c in counts.values()) <= most or 2 ** sum(1 for c in counts.values() if c) > most:
        return problem
    slow = {t.name: math.fsum(n.times[k] if n.times[k] is not None else math.inf for n in problem.nodes)
            for k, t in enumerate(problem.device_types)}
    # the loop below takes the counts above ``most`` down to ``most`` before any other: at once here
    counts = {name: min(count, most) for name, count in counts.items()}
    while math.prod(c + 1 for c in counts.values()) > most:
        name = max(counts, key=lambda k: (counts[k], slow[k]))
        counts[name] -= 1
    return problem.with_devices(counts)


def coarsened(problem: Instance, contraction: Contraction, blocks: int) -> Contraction:
    """``contraction`` with its supernodes (numbered in a topological order) merged into at most ``blocks``
    intervals of that order, of about equal work (each supernode's nodes at their fastest time): the
    intervals are again in a topological order (every edge goes to a later supernode, so to the same or
    a later interval), and a pipeline of them is one of the contraction's."""
    size = contraction.size
    if size <= blocks:
        return contraction
    fastest = [min((t for t in node.times if t is not None), default=0.0) for node in problem.nodes]
    work = np.bincount(np.asarray(contraction.of_node, dtype=np.int64), weights=fastest, minlength=size)
    # the interval of a supernode: its share of the work so far, and never fewer than one supernode each
    reach = np.cumsum(work) - work / 2
    total = float(reach[-1] + work[-1] / 2) if size else 0.0
    by_work = np.floor(reach / total * blocks).astype(np.int64) if total > 0 else np.zeros(size, np.int64)
    by_work = np.minimum(by_work, blocks - 1)   # supernodes of no work at the end reach the total
    by_count = np.arange(size, dtype=np.int64) * blocks // size
    interval = np.maximum(by_work, by_count)
    _, interval = np.unique(np.maximum.accumulate(interval), return_inverse=True)   # numbered 0, 1, ... in order
    n_blocks = int(interval[-1]) + 1
    members: list[list[int]] = [[] for _ in range(n_blocks)]
    for s, block in enumerate(interval.tolist()):
        members[block].extend(contraction.members[s])
    succ: list[set[int]] = [set() for _ in range(n_blocks)]
    for s, targets in enumerate(contraction.succ):
        for w in targets:
            if interval[w] != interval[s]:
                succ[int(interval[s])].add(int(interval[w]))
    of_node = tuple(int(interval[s]) for s in contraction.of_node)
    return Contraction(tuple(tuple(sorted(m)) for m in members), tuple(tuple(sorted(t)) for t in succ), of_node,
                       contraction.merged_zero_cost)


def solve_coarse_chain(problem: Instance, *, stages: int | None = None, blocks: int = COARSE_BLOCKS,
                       progress: Callable[[str], None] | None = None,
                       contraction: Contraction | None = None, compiled: bool | None = None) -> Solution:
    """A ``stages`` plan in about linear time on any graph size: the chain DP over the prefixes of the
    contracted graph's topological order cut into at most ``blocks`` intervals of about equal work
    (:func:`coarsened`; fewer where the device types have many combinations of counts, to keep the
    pairs of intervals times the combinations within :data:`COARSE_WORK`; past
    :data:`COARSE_COMBINATIONS` of them, on some of the devices, as many as ``stages`` at least:
    :func:`fewer_devices`, whose plans are the graph's too). Every plan it considers
    is a pipeline of those intervals, so its plan is a valid ``stages`` plan (``feasible``, bound 0;
    exactly ``stages`` non-empty ones where given), ``no_solution`` where none of them fits the
    devices (a finer split may: this proves nothing). ``progress``: as :func:`solve_chain`'s.
    ``contraction``: the graph's, where the caller has it already (else contracted here). ``compiled``: as
    :func:`placement.solvers.dp_table.prepare`'s."""
    start = time.perf_counter()
    stages = stage_count(problem, stages)
    fewer = fewer_devices(problem)
    if stages is None or stages <= sum(t.count for t in fewer.device_types):
        problem = fewer
    combinations = math.prod(t.count + 1 for t in problem.device_types)
    blocks = min(blocks, max(4, math.isqrt(2 * COARSE_WORK // combinations)))
    if contraction is None:
        contraction = contract(problem, stages is None)
    contraction = coarsened(problem, contraction, blocks)
    graph = build_graph(problem, contraction)
    layers = build_layers(problem, contraction.size + 1)
    # one run without a ceiling: the few intervals leave little to prune, and a run under a ceiling
    # below the optimum (best_plan's first tries) would be work lost
    data = prepare(graph, layers, prefix_family(list(range(contraction.size))), compiled, keep_bits=False)
    table = fill(problem, graph, layers, data, math.inf, progress, "chain over intervals", stages)
    value, plan = extract(problem, graph, layers, table, stages)
    runtime = time.perf_counter() - start
    if plan is None:
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp", runtime_s=runtime,
                        message=f"no pipeline of {contraction.size} intervals of a topological order fits the devices")
    return Solution(Status.FEASIBLE, plan, value, 0.0, "chain-dp", runtime_s=runtime)


def solve_chain(problem: Instance, *, stages: int | None = None,
                progress: Callable[[str], None] | None = None, ceiling: float = math.inf) -> Solution:
    """A good ``stages`` plan fast: the exact DP restricted to the prefixes of a few topological orders.

    No ideals are enumerated, so it runs where the full DP would refuse; the plan is optimal among
    plans whose stages are intervals of one of those orders, so the status is ``feasible`` (with the
    trivial bound 0), or ``infeasible`` only in the sense that no such plan exists (``no_solution``).
    ``stages=N`` restricts it to plans of exactly ``N`` non-empty stages (as in
    :func:`placement.solvers.dp.solve_dp`). ``progress`` is called as the DP's is, between steps (it
    may stop the run by raising, as :func:`placement.solvers.dp.deadline_watch` does). ``ceiling``: the
    value of a plan known already; only better plans are searched for (``no_solution`` if there are none).
    """
    start = time.perf_counter()
    stages = stage_count(problem, stages)
    contraction = contract(problem, stages is None)
    graph = build_graph(problem, contraction)
    layers = build_layers(problem, contraction.size + 1)
    best, best_plan = upper_bound(problem, graph, layers, contraction, stages, progress=progress, ceiling=ceiling)
    runtime = time.perf_counter() - start
    if best_plan is None:
        what = "" if stages is None else f" into exactly {stages} stages"
        below = "" if math.isinf(ceiling) else f" below {ceiling:.6g}"
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp", runtime_s=runtime,
                        message=f"no interval split{what} of the tried topological orders{below} fits the devices")
    return Solution(Status.FEASIBLE, best_plan, best, 0.0, "chain-dp", runtime_s=runtime)

