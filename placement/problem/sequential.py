"""Runs of an order executed one after another: the least sum of their durations, by DP.

Model
-----
An *order* is a sequence of units ``o_1 … o_n`` (each a list of node positions, its nodes in
a topological order, every edge between units going forward in the order). A *run* is a
stretch ``o_i..o_{j−1}`` of consecutive units, placed

* on an accelerator of its own as one call (every node supported, memory ``Σ m ≤ capacity``),
  lasting ``Σ_{u∈In(S)} c(u) + Σ_{v∈S} p_acc(v) + Σ_{u∈Out(S)} c(u)`` over the given graph
  (DESIGN.md §2: ``In(S)`` the nodes outside ``S`` with a successor in it, ``Out(S)`` the
  nodes of ``S`` with a successor outside it), or
* on the CPUs, lasting the longest path of CPU times inside it.

With ``D[a][j]`` the least sum of durations of runs covering ``o_1..o_j`` with ``a``
accelerator runs (``a ≤`` ``accelerators``)::

    D[0][0] = 0
    D[a][j] = min( min_{i<j} D[a−1][i] + acc(i, j),  min_{i<j} D[a][i] + cpu(i, j) )

and the answer is ``min_a D[a][n]`` with its runs. ``In`` and ``Out`` of a growing run are
kept incrementally (a node joins before any of its successors), so each start costs the
degrees of the nodes its runs reach: up to ``n²`` unit joins where memory does not bind. A
:class:`Budget` caps the joins (:data:`MAX_JOINS`, a few seconds) and raises
:class:`~placement.errors.LimitExceededError` beyond it; ``max_cpu_run`` caps the units of a
CPU run. :mod:`placement.solvers.baselines.latency_chain` reads
the runs of a topological order as a plan. The DP itself (:func:`least_sum`) takes the runs'
durations from any source: :mod:`placement.problem.path_bound` gives it lower bounds on the
calls that meet one path, for a lower bound on the latency.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.memory_fit import fits_summed

#: units joined to runs that :func:`least_run_sum` may spend (a few seconds)
MAX_JOINS = 2_000_000


class Budget:
    """Unit joins left to the DP, shared by every call it is given to, and the moment (a
    ``time.perf_counter()`` value) past which it may not run: a join's cost grows with the edges its
    runs cut, so a graph of a million edges spent a minute on joins counted as a few seconds' worth."""

    def __init__(self, joins: int = MAX_JOINS, deadline: float | None = None) -> None:
        self.joins = self.left = joins
        self.deadline = deadline

    def spend(self, joins: int) -> None:
        self.left -= joins
        if self.left < 0:
            raise LimitExceededError(f"the run DP would join units to runs more than {self.joins:,} times "
                                     "(long runs: memory does not bound them)")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise LimitExceededError("the time limit ran out while the run DP ran", "time_limit")


@dataclass(frozen=True)
class Runs:
    """The least sum and its runs ``(first unit, end unit, on an accelerator)``, ends exclusive, in order."""

    total: float
    runs: tuple[tuple[int, int, bool], ...]


#: the runs that start at one unit: their ends (exclusive) and durations
RunsFrom = Callable[[int], tuple[list[int], list[float]]]


def least_sum(n: int, accelerators: int, accelerator_runs: RunsFrom, cpu_runs: RunsFrom,
              budget: Budget) -> Runs | None:
    """The DP ``D[a][j]`` of the module docstring over ``n`` units for any run durations:
    ``accelerator_runs(i)`` and ``cpu_runs(i)`` give the ends and durations of the runs from unit
    ``i``; ``budget`` pays one join per run. ``None`` when no runs cover the units."""
    k = max(0, min(accelerators, n))   # each run covers a unit: more accelerators than units go unused
    D = np.full((k + 1, n + 1), math.inf)
    D[0, 0] = 0.0
    came = np.full((k + 1, n + 1), -1, dtype=np.int64)   # start of the last run
    on_acc = np.zeros((k + 1, n + 1), dtype=bool)         # whether it ran on an accelerator

    def relax(i: int, ends: list[int], durations: list[float], accelerator: bool) -> None:
        """``D[a + used][j] = min(D[a + used][j], D[a][i] + duration)`` for the runs from ``i``, where an
        accelerator run uses one accelerator."""
        budget.spend(len(ends))
        if not ends:
            return
        used = int(accelerator)
        js, cs = np.array(ends), np.array(durations)
        new = D[:k + 1 - used, i, None] + cs[None, :]
        rows, cols = np.nonzero(new < D[used:, js])
        D[rows + used, js[cols]] = new[rows, cols]
        came[rows + used, js[cols]] = i
        on_acc[rows + used, js[cols]] = accelerator

    for i in range(n):
        if not np.isfinite(D[:, i]).any():
            continue
        if k:
            relax(i, *accelerator_runs(i), accelerator=True)
        relax(i, *cpu_runs(i), accelerator=False)
    a = int(np.argmin(D[:, n]))
    if not math.isfinite(D[a, n]):
        return None
    runs = []
    j = n
    while j > 0:
        i = int(came[a, j])
        runs.append((i, j, bool(on_acc[a, j])))
        a -= int(on_acc[a, j])
        j = i
    return Runs(float(D[:, n].min()), tuple(reversed(runs)))


def least_run_sum(order: Sequence[Sequence[int]], succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                  cost: Sequence[float], p_acc: Sequence[float | None], p_cpu: Sequence[float | None],
                  memory: Sequence[float], capacity: float, accelerators: int, budget: Budget | None = None,
                  max_cpu_run: int | None = None) -> Runs | None:
    """The DP of the module docstring; ``succ``, ``pred``, ``cost`` (``c``), ``p_acc``, ``p_cpu``
    (``None``: unsupported) and ``memory`` are indexed by node position. ``None`` when no runs cover
    the order; :class:`~placement.errors.LimitExceededError` when ``budget`` (default: a fresh
    :class:`Budget`) runs out."""
    n = len(order)
    return least_sum(
        n, accelerators,
        lambda i: _accelerator_runs(order, i, succ, pred, cost, p_acc, memory, capacity),
        lambda i: _cpu_runs(order, i, n if max_cpu_run is None else min(n, i + max_cpu_run), pred, p_cpu),
        budget or Budget())


def _accelerator_runs(order: Sequence[Sequence[int]], i: int, succ: Sequence[Sequence[int]],
                      pred: Sequence[Sequence[int]], cost: Sequence[float], p: Sequence[float | None],
                      memory: Sequence[float], capacity: float) -> tuple[list[int], list[float]]:
    """Ends ``j`` and call durations of the accelerator runs ``o_i..o_{j−1}`` within ``capacity``."""
    inside: set[int] = set()
    held_succ: dict[int, int] = {}            # successors of a node that are in the run
    compute = comm = used = 0.0
    sizes: list[float] = []
    ends: list[int] = []
    durations: list[float] = []
    for j in range(i, len(order)):
        for x in order[j]:
            time = p[x]
            if time is None:
                return ends, durations
            used += memory[x]
            sizes.append(memory[x])
            if not fits_summed(used, sizes, capacity):   # the model's rule decides
                return ends, durations
            compute += time
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


def _cpu_runs(order: Sequence[Sequence[int]], i: int, last: int, pred: Sequence[Sequence[int]],
              p: Sequence[float | None]) -> tuple[list[int], list[float]]:
    """Ends ``j ≤ last`` and durations (longest path of CPU times inside) of the CPU runs ``o_i..o_{j−1}``."""
    finish: dict[int, float] = {}
    longest = 0.0
    ends: list[int] = []
    durations: list[float] = []
    for j in range(i, last):
        for x in order[j]:
            time = p[x]
            if time is None:
                return ends, durations
            f = time + max((finish[u] for u in pred[x] if u in finish), default=0.0)
            finish[x] = f
            longest = max(longest, f)
        ends.append(j + 1)
        durations.append(longest)
    return ends, durations
