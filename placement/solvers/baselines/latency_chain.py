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
model with one call per accelerator. The least ``Σ`` with at most ``k`` accelerators (the
accelerator count) is the DP of :mod:`placement.problem.sequential`. Four orders are tried:
the three of :func:`placement.solvers.chain_dp.orders_of`, and one that puts each
unit as late as it can go (:func:`_late_order`), so that inputs read far ahead (weights,
constants, masks) sit with their readers; then the same four on the units renumbered by their
least node id (:func:`placement.solvers.chain_dp.keyed_orders`), which the order the file lists
its nodes in does not change (GNMT's latency instance with its nodes and edges shuffled ten ways:
the file's orders alone gave 225.65–252.45, the id orders 225.648 on each). The answer is the
plan of least *latency* (the evaluator's value, at most its ``Σ``). It is a plan, not a proof: calls that could run in
parallel are priced as if they ran in turn. CPU runs hold at most :data:`CPU_RUN` units (on a
chain CPU runs add up, so shorter ones lose nothing there). The orders share one
:class:`~placement.problem.sequential.Budget` of time: ``time_limit`` seconds (default
:data:`DEFAULT_TIME_LIMIT`), or less where the caller gives a ``deadline`` (a ``time.perf_counter()``
value, as a caller's share of a time limit); where it runs out, the orders tried before give the plan
and the message says so (none: no plan, and the message names ``time_limit``).

Takes the two-type catalogue (device types ``accelerator`` and ``cpu``); options other
than ``objective``, ``time_limit`` and ``deadline`` are ignored.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from placement.errors import LimitExceededError
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.problem.sequential import Budget, least_run_sum
from placement.solution import Solution
from placement.solvers.baselines.common import (LATENCY, TwoTypes, build_plan, check_objective, latency_solution,
                                                two_types)
from placement.solvers.chain_dp import keyed_orders, lifo_order, orders_of
from placement.solvers.ideals import contract
from placement.verification.latency import evaluate_latency


#: the most units in one CPU run (on a chain, CPU runs add up, so shorter ones lose nothing there)
CPU_RUN = 32
#: seconds the DP may run where no time_limit is given
DEFAULT_TIME_LIMIT = 60.0


def solve_latency_chain(problem: Instance, **options: Any) -> Solution:
    """The best sequential-call plan over a few topological orders (module docstring); the Solution's
    objective is the verified latency and ``stats["sequential_sum"]`` that plan's ``Σ``."""
    check_objective(options, "latency-chain", LATENCY)
    start = time.perf_counter()
    kinds = two_types(problem, "latency-chain")
    contraction = contract(problem, merge_zero_cost=False)
    rank = problem.topological_rank()
    units = [sorted(members, key=rank.__getitem__) for members in contraction.members]
    best: tuple[float, float, Any] | None = None
    tried: set[tuple[int, ...]] = set()
    time_limit = options.get("time_limit")
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    deadline = start + limit
    given = options.get("deadline")
    default = limit if time_limit is None and (given is None or given >= deadline) else None
    budget = Budget(joins=None, deadline=deadline if given is None else min(deadline, given), default=default)
    too_long = ""
    first_ids = [min(problem.nodes[v].id for v in members) for members in contraction.members]
    for order in _orders(contraction.succ) + keyed_orders(contraction.succ, first_ids, _orders):
        if tuple(order) in tried:
            continue
        tried.add(tuple(order))
        try:
            found = _chain(problem, kinds, [units[u] for u in order], budget)
        except LimitExceededError as exc:
            too_long = str(exc)
            break
        if found is None:
            continue
        total, held = found
        plan = build_plan(problem, held)
        latency = evaluate_latency(problem, plan).latency
        if best is None or latency < best[0]:
            best = (latency, total, plan)
    if best is None:
        return latency_solution(problem, None, "latency-chain", start, {"orders": len(tried)},
                                too_long or "no run of a topological order fits the accelerators and CPUs")
    note = f"{too_long} (the plan is the best of the orders tried before)" if too_long else ""
    return latency_solution(problem, best[2], "latency-chain", start,
                            {"orders": len(tried), "sequential_sum": best[1]}, note)


def _orders(succ: Sequence[Sequence[int]]) -> list[list[int]]:
    """The orders tried on the graph of successor lists ``succ`` (module docstring)."""
    return orders_of(succ) + [_late_order(succ)]


def _late_order(succ: Sequence[Sequence[int]]) -> list[int]:
    """A topological order that puts every unit as late as it can go, next to its first reader
    (:func:`placement.solvers.chain_dp.lifo_order` on the reversed graph, reversed): inputs that
    only later units read (weights, constants) then join their readers' runs."""
    pred: list[list[int]] = [[] for _ in succ]
    for v, targets in enumerate(succ):
        for w in targets:
            pred[w].append(v)
    return lifo_order(pred)[::-1]


def _chain(problem: Instance, kinds: TwoTypes, order: list[list[int]], budget: Budget
           ) -> tuple[float, dict[tuple[str, int], list[int]]] | None:
    """The DP on one order of units (node positions, each unit's nodes in a topological order): the
    least ``Σ`` and its plan as ``(type name, device) -> node positions``."""
    nodes = problem.nodes
    succ = problem.successors()
    pred = problem.predecessors()

    def times(t: int | None) -> list[float | None]:
        return [None if t is None else v.times[t] for v in nodes]

    found = least_run_sum(order, succ, pred, [v.out_cost for v in nodes], times(kinds.acc),
                          times(kinds.cpu if kinds.cpus > 0 else None), [v.memory for v in nodes], kinds.memory,
                          kinds.accelerators, budget, max_cpu_run=CPU_RUN)
    if found is None:
        return None
    held: dict[tuple[str, int], list[int]] = {}
    device = 0
    for i, j, accelerator in found.runs:
        run = [x for unit in order[i:j] for x in unit]
        if accelerator:
            held[(ACCELERATOR, device)] = run
            device += 1
        else:
            held.setdefault((CPU, 0), []).extend(run)
    return found.total, held
