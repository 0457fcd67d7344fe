"""The latency chain DP: calls run one after another along a topological order (latency baseline).

Model
-----
The units of :func:`placement.solvers.baselines.common.contracted_units` (colour classes,
merged where a contiguous plan cannot separate them) are laid out in a topological order
``o``, and a plan cuts ``o`` into *runs* of consecutive units. A run goes to an accelerator
of its own as one call (every unit supported there, memory ``Σ m ≤ M``), or to the CPUs.
In the *sequential schedule* the runs execute one after another: an accelerator run
``S`` lasts its call's duration ``Σ_{u∈In(S)} c(u) + Σ_{v∈S} p_acc(v) + Σ_{u∈Out(S)} c(u)``
(DESIGN.md §2), a CPU run the longest path of CPU times inside it. The latency model
starts every call and CPU node as soon as its inputs are ready, never later than the
sequential schedule does, so the plan's latency is at most the sum ``Σ`` of its runs'
durations; for a graph whose units form a chain the two are equal.

A run of ``o`` is contiguous (a path that leaves it and re-enters it would pass a unit
placed between two of its units in ``o``), and the calls never wait on each other in a
cycle (inputs come from earlier runs only), so every plan is valid under the latency
model with one call per accelerator. With ``D[a][j]`` the least sum for the first ``j``
units using ``a`` accelerators::

    D[0][0] = 0
    D[a][j] = min( min_{i<j} D[a-1][i] + acc(o_i..o_{j-1}),  min_{i<j} D[a][i] + cpu(o_i..o_{j-1}) )

over ``a ≤ k`` (the accelerator count), and the plan of ``min_a D[a][n]``. Three orders
are tried (those of :func:`placement.solvers.chain_dp.topological_orders`); the answer is
the plan of least *latency* (the evaluator's value, at most its ``Σ``). It is a plan, not a
proof: calls that could run in parallel are priced as if they ran in turn. The in- and
out-sets of a growing run are kept incrementally (a unit's nodes join in a topological
order, so a node joins before any of its successors), ``O(Σ_runs Σ deg)`` per order.
Takes the two-type catalogue (device types ``accelerator`` and ``cpu``); options other
than ``objective`` are ignored.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.solution import Solution
from placement.solvers.baselines.common import (LATENCY, TwoTypes, build_plan, check_objective, latency_solution,
                                                two_types)
from placement.solvers.chain_dp import topological_orders
from placement.solvers.ideals import contract
from placement.verification.latency import evaluate_latency


def solve_latency_chain(problem: Instance, **options: Any) -> Solution:
    """The best sequential-call plan over a few topological orders (module docstring); the Solution's
    objective is the verified latency and ``stats["sequential_sum"]`` that plan's ``Σ``."""
    check_objective(options, "latency-chain", LATENCY)
    start = time.perf_counter()
    kinds = two_types(problem, "latency-chain")
    contraction = contract(problem, merge_zero_cost=False)
    rank = {problem.index_of(i): r for r, i in enumerate(problem.topological_ids())}
    units = [sorted(members, key=rank.__getitem__) for members in contraction.members]
    best: tuple[float, float, Any] | None = None
    tried: set[tuple[int, ...]] = set()
    for order in topological_orders(contraction):
        if tuple(order) in tried:
            continue
        tried.add(tuple(order))
        found = _chain(problem, kinds, [units[u] for u in order])
        if found is None:
            continue
        total, held = found
        plan = build_plan(problem, held)
        latency = evaluate_latency(problem, plan).latency
        if best is None or latency < best[0]:
            best = (latency, total, plan)
    if best is None:
        return latency_solution(problem, None, "latency-chain", start, {"orders": len(tried)},
                                "no run of a topological order fits the accelerators and CPUs")
    return latency_solution(problem, best[2], "latency-chain", start,
                            {"orders": len(tried), "sequential_sum": best[1]})


def _chain(problem: Instance, kinds: TwoTypes, order: list[list[int]]
           ) -> tuple[float, dict[tuple[str, int], list[int]]] | None:
    """The DP of the module docstring on one order of units (node positions, each unit's nodes in a
    topological order): the least ``Σ`` and its plan as ``(type name, device) -> node positions``."""
    nodes = problem.nodes
    succ = problem.successors()
    pred: list[list[int]] = [[] for _ in nodes]
    for u, targets in enumerate(succ):
        for w in targets:
            pred[w].append(u)
    cost = [v.out_cost for v in nodes]

    def times(t: int | None) -> list[float | None]:
        return [None if t is None else v.times[t] for v in nodes]

    p_acc, p_cpu = times(kinds.acc), times(kinds.cpu if kinds.cpus > 0 else None)
    n, k = len(order), kinds.accelerators
    D = np.full((k + 1, n + 1), math.inf)
    D[0, 0] = 0.0
    came = np.full((k + 1, n + 1), -1, dtype=np.int64)   # start of the last run
    on_acc = np.zeros((k + 1, n + 1), dtype=bool)         # whether it ran on an accelerator
    for i in range(n):
        if not np.isfinite(D[:, i]).any():
            continue
        acc_ends, acc_costs = _accelerator_runs(order, i, succ, pred, cost, p_acc, kinds.memory,
                                                [v.memory for v in nodes]) if k else ([], [])
        cpu_ends, cpu_costs = _cpu_runs(order, i, pred, p_cpu)
        if acc_ends:
            js, cs = np.array(acc_ends), np.array(acc_costs)
            new = D[:-1, i, None] + cs[None, :]
            better = new < D[1:, js]
            rows, cols = np.nonzero(better)
            D[rows + 1, js[cols]] = new[rows, cols]
            came[rows + 1, js[cols]] = i
            on_acc[rows + 1, js[cols]] = True
        if cpu_ends:
            js, cs = np.array(cpu_ends), np.array(cpu_costs)
            new = D[:, i, None] + cs[None, :]
            better = new < D[:, js]
            rows, cols = np.nonzero(better)
            D[rows, js[cols]] = new[rows, cols]
            came[rows, js[cols]] = i
            on_acc[rows, js[cols]] = False
    a = int(np.argmin(D[:, n]))
    if not math.isfinite(D[a, n]):
        return None
    total = float(D[a, n])
    held: dict[tuple[str, int], list[int]] = {}
    j, device = n, a
    while j > 0:
        i = int(came[a, j])
        run = [x for unit in order[i:j] for x in unit]
        if on_acc[a, j]:
            device -= 1
            held[(ACCELERATOR, device)] = run
            a -= 1
        else:
            held.setdefault((CPU, 0), []).extend(run)
        j = i
    return total, held


def _accelerator_runs(order: list[list[int]], i: int, succ: list[list[int]], pred: list[list[int]],
                      cost: list[float], p: list[float | None], memory_bound: float, memory: list[float]
                      ) -> tuple[list[int], list[float]]:
    """Ends ``j`` and call durations of the accelerator runs ``o_i..o_{j-1}`` that fit the memory bound."""
    inside: set[int] = set()
    held_succ: dict[int, int] = {}            # successors of a node that are in the run
    compute = comm = used = 0.0
    ends: list[int] = []
    durations: list[float] = []
    for j in range(i, len(order)):
        for x in order[j]:
            if p[x] is None:
                return ends, durations
            used += memory[x]
            if used > memory_bound:
                return ends, durations
            compute += p[x]  # type: ignore[operator]
            inside.add(x)
            if succ[x]:          # no successor of x has joined yet: x is an output
                comm += cost[x]
            for u in pred[x]:
                count = held_succ.get(u, 0) + 1
                held_succ[u] = count
                if u in inside:
                    if count == len(succ[u]):    # u's successors are all inside now
                        comm -= cost[u]
                elif count == 1:                 # u starts to feed the run
                    comm += cost[u]
        ends.append(j + 1)
        durations.append(compute + comm)
    return ends, durations


def _cpu_runs(order: list[list[int]], i: int, pred: list[list[int]], p: list[float | None]
              ) -> tuple[list[int], list[float]]:
    """Ends ``j`` and durations (longest path of CPU times inside) of the CPU runs ``o_i..o_{j-1}``."""
    finish: dict[int, float] = {}
    longest = 0.0
    ends: list[int] = []
    durations: list[float] = []
    for j in range(i, len(order)):
        for x in order[j]:
            if p[x] is None:
                return ends, durations
            f = p[x] + max((finish[u] for u in pred[x] if u in finish), default=0.0)  # type: ignore[operator]
            finish[x] = f
            longest = max(longest, f)
        ends.append(j + 1)
        durations.append(longest)
    return ends, durations
