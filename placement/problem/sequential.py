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
degrees of the nodes its runs reach: up to ``n²`` unit joins where memory does not bind. On
orders of more than :data:`SMALL` units, bounds (:mod:`placement.problem.run_bounds`: a plan the
DP can take, and the least any completion of a state can cost) skip the starts and stop the runs
that cannot lead to the least sum, and the runs from a start are summed in whole arrays in the
walk's own order of operations: the same answer, runs and ties included, at a cost that follows
the runs that can still win. A :class:`Budget` caps the joins (by default :data:`MAX_JOINS`) and
the time, and raises :class:`~placement.errors.LimitExceededError` beyond either; ``max_cpu_run``
caps the units of a CPU run. :mod:`placement.solvers.baselines.latency_chain` reads
the runs of a topological order as a plan. The DP itself (:func:`least_sum`) takes the runs'
durations from any source: :mod:`placement.problem.path_bound` gives it lower bounds on the
calls that meet one path, for a lower bound on the latency.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.memory_fit import fits_summed
from placement.problem.run_bounds import RunBounds, RunTable

#: units joined to runs that a :class:`Budget` allows by default (a few seconds)
MAX_JOINS = 2_000_000
#: orders of at most this many units are solved without bounds (building them costs more than it saves)
SMALL = 64


class Budget:
    """Unit joins left to the DP (``None``: no cap), shared by every call it is given to, and the moment
    (a ``time.perf_counter()`` value) past which it may not run: a join's cost grows with the edges its
    runs cut, so a graph of a million edges spent a minute on joins counted as a few seconds' worth.
    ``default`` (seconds) is the time limit the deadline was set from where the caller gave none, for the
    message that it passed."""

    def __init__(self, joins: int | None = MAX_JOINS, deadline: float | None = None,
                 default: float | None = None) -> None:
        self.joins = joins
        self.left = math.inf if joins is None else joins
        self.deadline = deadline
        self.default = default

    def spend(self, joins: int) -> None:
        self.left -= joins
        if self.left < 0:
            raise LimitExceededError(f"the run DP would join units to runs more than {self.joins:,} times "
                                     "(long runs: memory does not bound them)")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            limit = "" if self.default is None else f" (by default {self.default:g} s)"
            raise LimitExceededError(f"the time limit{limit} ran out while the run DP ran; a larger time_limit "
                                     "lets it finish", "time_limit")


@dataclass(frozen=True)
class Runs:
    """The least sum and its runs ``(first unit, end unit, on an accelerator)``, ends exclusive, in order."""

    total: float
    runs: tuple[tuple[int, int, bool], ...]


#: the runs that start at one unit: their ends (exclusive) and durations
RunsFrom = Callable[[int], tuple[list[int], list[float]]]


def least_sum(n: int, accelerators: int, accelerator_runs: RunsFrom, cpu_runs: RunsFrom,
              budget: Budget, bounds: RunBounds | None = None) -> Runs | None:
    """The DP ``D[a][j]`` of the module docstring over ``n`` units for any run durations:
    ``accelerator_runs(i)`` and ``cpu_runs(i)`` give the ends and durations of the runs from unit
    ``i``; ``budget`` pays one join per run. With ``bounds``, the DP skips the starts and stops the
    accelerator runs that cannot lead to its least sum (:mod:`placement.problem.run_bounds`; it then
    calls ``accelerator_runs(i, last)`` for the runs from ``i`` that end at ``last`` at the latest),
    and gives the same least sum and runs. ``None`` when no runs cover the units."""
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
        if bounds is None:
            if k:
                relax(i, *accelerator_runs(i), accelerator=True)
            relax(i, *cpu_runs(i), accelerator=False)
            continue
        if bounds.hopeless(i, D[:, i]):
            continue
        if k:
            last = bounds.last_end(i, D[:, i])
            if last > i:
                relax(i, *accelerator_runs(i, last), accelerator=True)   # type: ignore[call-arg]
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
                  max_cpu_run: int | None = None, bounded: bool | None = None) -> Runs | None:
    """The DP of the module docstring; ``succ``, ``pred``, ``cost`` (``c``), ``p_acc``, ``p_cpu``
    (``None``: unsupported) and ``memory`` are indexed by node position. ``None`` when no runs cover
    the order; :class:`~placement.errors.LimitExceededError` when ``budget`` (default: a fresh
    :class:`Budget`) runs out. With ``bounded`` (default: on orders of more than :data:`SMALL` units)
    the DP leaves out the runs that cannot win (:mod:`placement.problem.run_bounds`) and takes the
    accelerator runs from a :class:`~placement.problem.run_bounds.RunTable`: the same answer, runs and
    all."""
    n = len(order)

    def cpu_runs(i: int) -> tuple[list[int], list[float]]:
        return _cpu_runs(order, i, n if max_cpu_run is None else min(n, i + max_cpu_run), pred, p_cpu)

    def walk(i: int, last: int = n) -> tuple[list[int], list[float]]:
        return _accelerator_runs(order, i, succ, pred, cost, p_acc, memory, capacity, last)

    if not (n > SMALL if bounded is None else bounded) or not _bounds_hold(order, succ, pred, cost, p_acc, p_cpu,
                                                                          memory):
        return least_sum(n, accelerators, walk, cpu_runs, budget or Budget())
    spent = budget or Budget()
    bounds = run_bounds(order, succ, pred, cost, p_acc, p_cpu, memory, capacity, max(0, min(accelerators, n)),
                        cpu_runs, lambda: spent.spend(0))     # the deadline holds while they are built
    table = RunTable(order, succ, pred, cost, p_acc, memory, capacity)
    return least_sum(n, accelerators, table.runs if table.plain else walk, lambda i: bounds.cpu[i], spent, bounds)


def _bounds_hold(order: Sequence[Sequence[int]], succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                 *values: Sequence[float | None]) -> bool:
    """Whether the bounds apply: every edge of the order's nodes stays within it, and every given number
    is finite and not negative (as a valid instance's are)."""
    inside = {x for unit in order for x in unit}
    return all(w in inside for x in inside for w in list(succ[x]) + list(pred[x])) and \
        all(v is None or 0.0 <= v < math.inf for seq in values for v in seq)


def run_bounds(order: Sequence[Sequence[int]], succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
               cost: Sequence[float],
               p_acc: Sequence[float | None], p_cpu: Sequence[float | None], memory: Sequence[float],
               capacity: float, accelerators: int, cpu_runs: RunsFrom,
               check: Callable[[], None] = lambda: None) -> RunBounds:
    """The :class:`~placement.problem.run_bounds.RunBounds` of :func:`least_run_sum`'s order: per unit its
    accelerator time (``None`` where a node has none) and memory, and the transfer cost crossing each
    unit boundary."""
    n = len(order)
    unit_of: dict[int, int] = {x: u for u, unit in enumerate(order) for x in unit}
    delta = [0.0] * (n + 1)
    for x, u in unit_of.items():
        last = max((unit_of[w] for w in succ[x]), default=u)
        if last > u:
            delta[u + 1] += cost[x]
            delta[last + 1] -= cost[x]
    cut = list(itertools.accumulate(delta))
    into = [math.fsum(cost[u] for u in {u for x in unit for u in pred[x] if unit_of[u] < i})
            for i, unit in enumerate(order)] + [0.0]
    out_of = [0.0] + [math.fsum(cost[x] for x in unit if any(unit_of[w] > j for w in succ[x]))
                      for j, unit in enumerate(order)]
    unit_acc: list[float | None] = []
    for unit in order:
        times = [p_acc[x] for x in unit]
        unit_acc.append(None if any(t is None for t in times) else math.fsum(times))  # type: ignore[arg-type]
    unit_memory = [math.fsum(memory[x] for x in unit) for unit in order]
    scale = math.fsum(abs(c) for c in cost) + math.fsum(p for p in list(p_acc) + list(p_cpu) if p is not None)
    return RunBounds(n, accelerators, unit_acc, unit_memory, cut, into, out_of, capacity, cpu_runs, scale, check)


def _accelerator_runs(order: Sequence[Sequence[int]], i: int, succ: Sequence[Sequence[int]],
                      pred: Sequence[Sequence[int]], cost: Sequence[float], p: Sequence[float | None],
                      memory: Sequence[float], capacity: float, last: int | None = None
                      ) -> tuple[list[int], list[float]]:
    """Ends ``j ≤ last`` (default: every unit) and call durations of the accelerator runs ``o_i..o_{j−1}``
    within ``capacity``."""
    inside: set[int] = set()
    held_succ: dict[int, int] = {}            # successors of a node that are in the run
    compute = comm = used = 0.0
    sizes: list[float] = []
    ends: list[int] = []
    durations: list[float] = []
    for j in range(i, len(order) if last is None else last):
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
