"""Bounds that let the run DP of :mod:`placement.problem.sequential` leave out runs that cannot win.

Model
-----
Over an order of ``n`` units, with ``P[j]`` the sum of the accelerator times of the units before
``j`` and ``cut(j)`` the transfer cost ``c`` of the nodes before unit ``j`` read at ``j`` or later,
an accelerator run ``o_i..o_{j−1}`` lasts between its compute ``P[j] − P[i]`` (it receives and sends
nothing) and ``P[j] − P[i] + cut(i) + cut(j)`` (it receives what crosses its start and sends what
crosses its end). A CPU run lasts what the DP gives it. Two DPs over these separable durations,
each a sliding minimum over the runs memory allows (its window moves one way, so a queue of
running minima keeps it in constant time per unit):

* *upper*: the least sum of runs covering the order with durations at their upper value and at
  most ``min(k, ROWS)`` accelerator runs, over windows that surely fit memory: a plan the DP
  itself can take, so its sum is at least the DP's least sum ``U``;
* *lower*: ``B[r][i]``, the least sum of runs covering ``o_i..`` with durations at their lower
  value and at most ``r`` accelerator runs (``r ≤ ROWS``; beyond, any number), over windows that
  hold every run the DP may take: at most what any completion from ``i`` with ``r`` accelerators
  left costs.

The lower duration also charges what a run surely receives and sends: ``into(i)``, the cost of
the nodes before unit ``i`` that unit ``i`` reads, and ``out(j)``, that of the nodes of unit
``j − 1`` read at ``j`` or later (a run from ``i`` to ``j`` receives and sends at least these).

A run from ``i`` in a state with ``D`` so far and ``r`` accelerators left after it, ending at
``j``, leads to a plan of at least ``D + P[j] − P[i] + into(i) + out(j) + B[r][j]``. The DP
ends its runs from ``i`` at the last ``j`` within memory where that is at most ``U`` (by more than
:data:`SLACK` of the sums involved, which covers floating-point rounding; a table of minima over
power-of-two stretches finds it), and skips a start whose states all exceed ``U`` with their
least completion ``B``: every plan of sum at most ``U``, among them the best, sees only entries of
the table whose values and back pointers are what the full DP computes (the runs left out lead to
more than ``U`` from every state, so they were never the least at an entry that leads to ``U``).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from placement.problem.memory_fit import CLEAR, LENIENT, fits

#: accelerator counts the bounds tell apart (beyond, the lower bound allows any number)
ROWS = 8
#: relative allowance over the upper bound before a run is left out: far above the rounding of any
#: float sum of fewer than 10^6 terms
SLACK = 1e-9
#: the relative rounding of a difference of two prefix sums of up to 10^6 terms, with room
PREFIX_ROUNDING = 1e-9

#: units between two calls of the caller's check (its deadline) while the bounds are built
CHECK_EVERY = 256

#: the CPU runs from a unit: their ends (exclusive) and durations
RunsFrom = Callable[[int], tuple[list[int], list[float]]]


class _MinQueue:
    """A first-in first-out queue of (key, vector) with the elementwise minimum of its vectors, in
    amortised constant time per operation (two stacks of running minima)."""

    def __init__(self, width: int) -> None:
        self.front: list[tuple[int, np.ndarray, np.ndarray]] = []   # popped from the end
        self.back: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.empty = np.full(width, math.inf)

    def push(self, key: int, value: np.ndarray) -> None:
        low = np.minimum(self.back[-1][2], value) if self.back else value
        self.back.append((key, value, low))

    def oldest(self) -> int | None:
        if not self.front:
            self._turn()
        return self.front[-1][0] if self.front else None

    def pop(self) -> None:
        if not self.front:
            self._turn()
        self.front.pop()

    def minimum(self) -> np.ndarray:
        a = self.front[-1][2] if self.front else self.empty
        b = self.back[-1][2] if self.back else self.empty
        return np.minimum(a, b)

    def _turn(self) -> None:
        low = self.empty
        while self.back:
            key, value, _ = self.back.pop()
            low = np.minimum(low, value)
            self.front.append((key, value, low))


class RunBounds:
    """The bounds of the module docstring for an order of ``n`` units and ``k`` accelerators; rows of
    ``rest`` (``B``) and of the tables ``low`` are indexed by the accelerators left (``ROWS + 1``:
    any number). ``check`` is called every :data:`CHECK_EVERY` units while they are built (it raises
    to stop them: a caller's deadline)."""

    def __init__(self, n: int, k: int, unit_acc: Sequence[float | None], unit_memory: Sequence[float],
                 cut: Sequence[float], into: Sequence[float], out_of: Sequence[float], capacity: float,
                 cpu_runs: RunsFrom, scale: float, check: Callable[[], None] = lambda: None) -> None:
        self.n, self.k = n, k
        self.rows = min(k, ROWS)
        supported = [p is not None for p in unit_acc]
        P = np.zeros(n + 1)
        P[1:] = np.cumsum([p if p is not None else 0.0 for p in unit_acc])
        self.P = P
        cut_array = np.asarray(cut, dtype=float)
        total_memory = math.fsum(unit_memory)
        sure = _ends(unit_memory, supported, capacity * (1 - 4 * CLEAR) - 4 * PREFIX_ROUNDING * total_memory)
        loose = _ends(unit_memory, supported, capacity * (1 + LENIENT) + 4 * PREFIX_ROUNDING * total_memory)
        self.check = check
        cpu = []
        for i in range(n):
            if i % CHECK_EVERY == 0:
                check()
            cpu.append(cpu_runs(i))
        upper = self._upper(sure, cut_array, cpu)
        self.threshold = upper + SLACK * (abs(upper) + scale)
        self.into = np.asarray(into, dtype=float)
        self.rest, self.low = self._lower(loose, cpu, np.asarray(out_of, dtype=float))
        self.ends = loose
        self.cpu = cpu

    def _upper(self, ends: list[int], cut: np.ndarray, cpu: list[tuple[list[int], list[float]]]) -> float:
        """The upper DP's least sum (``inf`` where it finds no plan)."""
        n, R, P = self.n, self.rows, self.P
        U = np.full((R + 1, n + 1), math.inf)
        U[0, 0] = 0.0
        queue = _MinQueue(R)
        for j in range(n + 1):
            if j % CHECK_EVERY == 0:
                self.check()
            if R and j:
                while (i := queue.oldest()) is not None and ends[i] < j:
                    queue.pop()
                U[1:, j] = np.minimum(U[1:, j], P[j] + cut[j] + queue.minimum())
            if j == n:
                break
            if R:
                queue.push(j, U[:R, j] - P[j] + cut[j])
            js, ds = cpu[j]
            if js:
                js_array = np.asarray(js)
                U[:, js_array] = np.minimum(U[:, js_array], U[:, j, None] + np.asarray(ds)[None, :])
        return float(U[:, n].min())

    def _lower(self, ends: list[int], cpu: list[tuple[list[int], list[float]]], out_of: np.ndarray
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``B`` of the module docstring, rows ``0..ROWS`` and a last one for any number, and the minima
        of ``P[j] + B[r][j]`` over ``j..j + 2^l − 1`` for each level ``l``."""
        n, R, P = self.n, self.rows, self.P
        B = np.full((R + 2, n + 1), math.inf)
        B[:, n] = 0.0
        source = list(range(R)) + [R + 1]          # the row a run's end is read in, per row it starts
        queue = _MinQueue(R + 1)
        for i in range(n - 1, -1, -1):
            if i % CHECK_EVERY == 0:
                self.check()
            queue.push(i + 1, P[i + 1] + out_of[i + 1] + B[source, i + 1])
            while (j := queue.oldest()) is not None and j > ends[i]:
                queue.pop()
            B[1:, i] = -P[i] + self.into[i] + queue.minimum()
            js, ds = cpu[i]
            if js:
                B[:, i] = np.minimum(B[:, i], (B[:, np.asarray(js)] + np.asarray(ds)[None, :]).min(axis=1))
        X = (P + out_of)[None, :] + B
        low = [X]
        width = 1
        while 2 * width <= max((e - i for i, e in enumerate(ends)), default=0):
            X = np.minimum(X[:, :-width], X[:, width:])
            low.append(X)
            width *= 2
        return B, low

    def row(self, left: int) -> int:
        """The row of the bounds for ``left`` accelerators left."""
        return left if left <= self.rows else self.rows + 1

    def last_end(self, i: int, start: np.ndarray) -> int:
        """The last end ``j`` of an accelerator run from ``i`` that may still lead to a plan within the
        threshold, where ``start[a]`` is the DP's value at ``i`` with ``a`` accelerator runs made
        (``i``: none): per state, the last ``j`` within memory with ``start[a] + P[j] − P[i] + B[r][j]``
        at most the threshold, found by skipping the longest stretch before the window's end that
        exceeds it, a power of two at a time (the table of minima ``low``)."""
        live = [a for a in range(len(start) - 1) if math.isfinite(start[a])]
        hi = self.ends[i]
        if not live or hi <= i:
            return i
        rows = np.array([self.row(self.k - a - 1) for a in live])
        limit = self.threshold - start[live] + self.P[i] - self.into[i]
        pos = np.full(len(live), hi + 1)
        for level in range(len(self.low) - 1, -1, -1):
            width = 1 << level
            if width > hi - i:
                continue
            block = pos - width
            can = block >= i + 1
            skip = can & (self.low[level][rows, np.where(can, block, 0)] > limit)
            pos = np.where(skip, block, pos)
        return int(pos.max()) - 1

    def hopeless(self, i: int, start: np.ndarray) -> bool:
        """Whether every state at ``i`` (``start`` as for :meth:`last_end`) exceeds the threshold with
        its least completion."""
        rows = [self.row(self.k - a) for a in range(len(start))]
        return bool((start + self.rest[rows, i] > self.threshold).all())


def _ends(memory: Sequence[float], supported: Sequence[bool], room: float) -> list[int]:
    """Per start ``i``, the last end ``j`` (exclusive) with every unit of ``i..j−1`` supported and their
    memory within ``room`` (prefix sums; ``i`` where unit ``i`` is not supported or alone exceeds it)."""
    n = len(memory)
    out = [0] * n
    j = 0
    used = 0.0
    for i in range(n):
        if j < i:
            j, used = i, 0.0
        while j < n and supported[j] and (math.isinf(room) or used + memory[j] <= room):
            used += memory[j]
            j += 1
        out[i] = j
        if j > i:
            used -= memory[i]
    return out


class RunTable:
    """The accelerator runs of an order of units from any start, in whole arrays: the same floating-point
    operations, in the same order, as the DP's walk that joins one node at a time (compute and transfers
    summed as it goes, :func:`placement.problem.sequential._accelerator_runs`), so the same durations.

    The walk from unit ``i`` adds, per node ``x`` in order, ``c(x)`` where ``x`` has successors, then per
    predecessor ``u`` of ``x`` (in ``pred[x]``'s order) ``−c(u)`` where ``u`` is in the run and ``x`` is its
    last successor in the order, or ``c(u)`` where ``u`` is before the run and ``x`` its first successor from
    ``i`` on; every other step adds nothing (a float sum that adds 0 is unchanged). A running sum over these
    steps (``numpy.cumsum`` adds one term after another) is the walk's."""

    def __init__(self, order: Sequence[Sequence[int]], succ: Sequence[Sequence[int]],
                 pred: Sequence[Sequence[int]], cost: Sequence[float], p: Sequence[float | None],
                 memory: Sequence[float], capacity: float) -> None:
        walk = [x for unit in order for x in unit]
        place = {x: k for k, x in enumerate(walk)}
        self.plain = all(len(set(pred[x])) == len(pred[x]) and len(set(succ[x])) == len(succ[x])
                         and all(u in place for u in pred[x]) and all(w in place for w in succ[x]) for x in walk)
        if not self.plain:      # repeated edges, or nodes outside the order: the walk's own count decides
            return
        unit_of = [0] * len(walk)
        self.unit_start = [0] * (len(order) + 1)
        for u, unit in enumerate(order):
            self.unit_start[u + 1] = self.unit_start[u] + len(unit)
            for k in range(self.unit_start[u], self.unit_start[u + 1]):
                unit_of[k] = u
        self.times = np.array([0.0 if p[x] is None else p[x] for x in walk])
        self.missing = np.array([p[x] is None for x in walk])
        self.memory = np.array([memory[x] for x in walk], dtype=float)
        self.sizes = [memory[x] for x in walk]
        self.capacity = capacity
        # the steps, node by node: (value, kind, the predecessor's unit, its previous successor's place)
        value, kind, owner, before, first_step = [], [], [], [], []
        for k, x in enumerate(walk):
            first_step.append(len(value))
            value.append(cost[x] if succ[x] else 0.0)
            kind.append(0)
            owner.append(0)
            before.append(0)
            for u in pred[x]:
                later = sorted(place[w] for w in succ[u])
                at = later.index(k)
                value.append(cost[u])
                kind.append(2 if at == len(later) - 1 else 1)      # 2: x is u's last successor
                owner.append(unit_of[place[u]])
                before.append(later[at - 1] if at else -1)          # u's successor before x (-1: none)
        first_step.append(len(value))
        self.starts = np.array(self.unit_start)
        self.unit_steps = np.array([first_step[k] for k in self.unit_start])
        self.value = np.array(value, dtype=float)
        self.kind = np.array(kind)
        self.owner = np.array(owner)
        self.before = np.array(before)
        self.first_step = first_step

    def runs(self, i: int, last: int) -> tuple[list[int], list[float]]:
        """Ends ``j ≤ last`` and durations of the runs ``o_i..o_{j−1}`` within memory, every node supported."""
        lo, hi = self.unit_start[i], self.unit_start[last]
        if hi <= lo:
            return [], []
        stop = hi
        bad = np.nonzero(self.missing[lo:hi])[0]
        if bad.size:
            stop = lo + int(bad[0])
        used = np.cumsum(self.memory[lo:stop])
        stop = lo + self._fitting(used, lo)
        # the last whole unit before the stopping node
        j_end = int(np.searchsorted(self.starts, stop, side="right")) - 1
        if j_end <= i:
            return [], []
        end_node = self.unit_start[j_end]
        compute = np.cumsum(self.times[lo:end_node])
        s0, s1 = self.first_step[lo], self.first_step[end_node]
        kind, owner = self.kind[s0:s1], self.owner[s0:s1]
        step = np.where(kind == 0, self.value[s0:s1],
                        np.where(owner >= i, np.where(kind == 2, -self.value[s0:s1], 0.0),
                                 np.where(self.before[s0:s1] < lo, self.value[s0:s1], 0.0)))
        comm = np.cumsum(step)
        at_node = self.starts[i + 1:j_end + 1] - 1 - lo
        at_step = self.unit_steps[i + 1:j_end + 1] - 1 - s0
        return list(range(i + 1, j_end + 1)), (compute[at_node] + comm[at_step]).tolist()

    def _fitting(self, used: np.ndarray, lo: int) -> int:
        """How many nodes from ``lo`` on fit memory one after another (:func:`fits_summed` on each prefix)."""
        if math.isinf(self.capacity):
            return len(used) if self.capacity > 0 else 0
        margin = 2 * CLEAR * np.maximum(abs(self.capacity), np.abs(used))
        unclear = np.nonzero(~(used < self.capacity - margin))[0]
        for k in unclear.tolist():
            if used[k] > self.capacity + margin[k] or not fits(self.sizes[lo:lo + k + 1], self.capacity):
                return k
        return len(used)
