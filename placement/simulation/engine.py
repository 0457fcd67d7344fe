"""A small heap-based discrete-event core: tasks with dependencies on one-at-a-time resources.

Model implemented
-----------------
Task ``i`` has a duration ``d_i ≥ 0``, a resource and a set of predecessor tasks;
it is *ready* at the moment its last predecessor finishes (at time 0 if it has
none). A resource runs one task at a time, never preempted, and starts a task as
soon as it is free and the task is ready, choosing by its policy:

* ``ordered`` — its *main* tasks strictly in the given order (the next one waits,
  even if later ones are ready); its *filler* tasks, which have no place in the
  order, only at a moment when the next main task is not ready (or none is
  left).
* ``fifo`` — any ready task.

Among ready tasks waiting in a queue (fillers, and the tasks of a ``fifo``
resource) the one with the lowest ``(priority, time it became ready, id)`` runs
first; with equal priorities that is first come, first served.

At one moment, ordered resources start their next main task as soon as it is
ready; queues choose only once every event of the moment has happened (the ends
of zero-length tasks started at it included), and fillers after that, so neither
passes over a task that becomes ready at that same moment. Times within 1e-12 of
each other, relative to the larger of the current time and the shortest task that
takes any time (the run's own scale: an instance in picoseconds merges no more
than one in seconds), count as one moment.
:func:`execute` returns every task's start and end; a task that can never start
(its predecessors wait for it, or for a main task ordered after it) raises
:class:`Deadlock`. Resources that start fillers at one moment do so in the order of their ids.

:func:`run` is the engine, plain Python over flat sequences: small graphs run it interpreted,
graphs of more than :data:`INTERPRETED_TASKS` tasks compiled by numba (the same times and
order of starts). On the published BERT-L-12 training plan (20,000 micro-batches of 1f1b-async,
communication inline, and of gpipe and zb-h1 with link transfers: 0.28 to 0.82 million tasks)
:func:`execute` runs 1.3 to 2.4 million tasks a second compiled, its kernel alone 2 to 6 million,
against 0.3 to 0.5 million interpreted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from heapq import heappop, heappush
from typing import Sequence

import numpy as np

ORDERED = "ordered"
FIFO = "fifo"
SAME_TIME = 1e-12


class Deadlock(Exception):
    """Some tasks can never start; ``waiting`` holds their ids."""

    def __init__(self, waiting: list[int]):
        super().__init__(f"{len(waiting)} tasks can never start")
        self.waiting = waiting


@dataclass
class TaskGraph:
    """Tasks (durations, resources, predecessors) and resources (policies, main-task orders)."""

    duration: list[float] = field(default_factory=list)
    resource: list[int] = field(default_factory=list)
    successors: list[list[int]] = field(default_factory=list)
    predecessor_count: list[int] = field(default_factory=list)
    filler: list[bool] = field(default_factory=list)
    priority: list[float] = field(default_factory=list)
    policy: list[str] = field(default_factory=list)
    order: list[list[int]] = field(default_factory=list)

    def add_resource(self, policy: str) -> int:
        if policy not in (ORDERED, FIFO):
            raise ValueError(f"unknown resource policy {policy!r}")
        self.policy.append(policy)
        self.order.append([])
        return len(self.policy) - 1

    def add_task(self, resource: int, duration: float, filler: bool = False, priority: float = 0.0) -> int:
        """A new task on ``resource``; a ``filler`` may only be used on an ``ordered`` resource."""
        if filler and self.policy[resource] != ORDERED:
            raise ValueError("filler tasks need an ordered resource")
        self.priority.append(priority)
        self.duration.append(duration)
        self.resource.append(resource)
        self.successors.append([])
        self.predecessor_count.append(0)
        self.filler.append(filler)
        return len(self.duration) - 1

    def add_dependency(self, before: int, after: int) -> None:
        """``after`` cannot start before ``before`` has finished (repeats are ignored)."""
        if after not in self.successors[before]:
            self.successors[before].append(after)
            self.predecessor_count[after] += 1

    def set_order(self, resource: int, tasks: list[int]) -> None:
        """The main tasks of an ``ordered`` resource, in the order it runs them."""
        if self.policy[resource] != ORDERED:
            raise ValueError("only an ordered resource has an order")
        self.order[resource] = list(tasks)

    def __len__(self) -> int:
        return len(self.duration)

    def replicate(self, copies: int, priority_step: float = 0.0) -> "TaskGraph":
        """``copies`` independent copies of these tasks on the same resources (orders left empty).

        Task ``t`` of copy ``j`` gets the id ``j·K + t`` with ``K = len(self)`` and the
        priority of ``t`` plus ``j · priority_step``; dependencies stay inside each copy.
        """
        size = len(self)
        return TaskGraph(
            duration=self.duration * copies,
            resource=self.resource * copies,
            successors=[[w + j * size for w in succ] for j in range(copies) for succ in self.successors],
            predecessor_count=self.predecessor_count * copies,
            filler=self.filler * copies,
            priority=[p + j * priority_step for j in range(copies) for p in self.priority],
            policy=list(self.policy),
            order=[[] for _ in self.policy])


def moment_scale(graph: TaskGraph) -> float:
    """The least time scale moments are merged at (module docstring): the shortest task that takes any
    time, 0 when none does. (Near time 0 every moment is a sum of such durations; further on the
    merging is relative to the time itself.)"""
    return min((d for d in graph.duration if d > 0), default=0.0)


#: Graphs of at most this many tasks run interpreted (under a second); larger ones through the compiled
#: kernel (numba: compiled on first use, in a few seconds, then loaded from its on-disk cache,
#: :func:`placement.kernels.compile_kernel`)
INTERPRETED_TASKS = 200_000


def execute(graph: TaskGraph, dispatched: list[int] | None = None) -> tuple[Sequence[float], Sequence[float]]:
    """Run every task of ``graph``; return ``(start, end)`` indexed by task id (lists, or numpy arrays from the
    compiled kernel). ``dispatched``, where given, receives the task ids in the order they started (at one
    moment, the order the engine chose: what a resource ran first among tasks of no time that share a start),
    before a :class:`Deadlock` too. A duration that is NaN is refused (:class:`ValueError`)."""
    n = len(graph)
    _check_orders(graph)
    if any(d != d for d in graph.duration):   # no moment follows a NaN: the run would never end
        raise ValueError(f"task {next(t for t, d in enumerate(graph.duration) if d != d)} has no duration (NaN)")
    if n > INTERPRETED_TASKS:
        start, end, order, done = _run_compiled(graph)
    else:
        start, end, order = [-1.0] * n, [-1.0] * n, [0] * n
        done = run(graph.duration, graph.resource, *_flat_lists(graph.successors), graph.predecessor_count,
                   graph.filler, graph.priority, [p == ORDERED for p in graph.policy], *_flat_lists(graph.order),
                   moment_scale(graph), start, end, order)
    if dispatched is not None:
        dispatched.extend(order[:done])
    if done < n:
        raise Deadlock([t for t in range(n) if start[t] < 0])
    return start, end


def _flat_lists(lists: list[list[int]]) -> tuple[list[int], list[int]]:
    """:func:`_flat_arrays` as lists, which the interpreted engine indexes faster."""
    ptr, items = _flat_arrays(lists)
    return ptr.tolist(), items.tolist()


def _run_compiled(graph: TaskGraph) -> tuple[np.ndarray, np.ndarray, list[int], int]:
    """:func:`run` compiled, on the graph as numpy arrays (let go before the order of starts becomes a list)."""
    n = len(graph)
    start, end, order = np.full(n, -1.0), np.full(n, -1.0), np.zeros(n, dtype=np.int64)
    done = _compiled()(*_arrays(graph), moment_scale(graph), start, end, order)
    return start, end, order.tolist(), done


def _flat_arrays(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ids as one array and the offsets where each begins (``ptr[i] : ptr[i + 1]``)."""
    sizes = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return ptr, np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(ptr[-1]))


def _arrays(graph: TaskGraph) -> tuple:
    """The arguments of :func:`run` as numpy arrays, for the compiled kernel."""
    return (np.asarray(graph.duration, dtype=np.float64), np.asarray(graph.resource, dtype=np.int64),
            *_flat_arrays(graph.successors), np.asarray(graph.predecessor_count, dtype=np.int64),
            np.asarray(graph.filler, dtype=np.bool_), np.asarray(graph.priority, dtype=np.float64),
            np.asarray([p == ORDERED for p in graph.policy], dtype=np.bool_), *_flat_arrays(graph.order))


def compiles_first(graph: TaskGraph) -> bool:
    """Whether :func:`execute` compiles the engine before running ``graph``: a graph past
    :data:`INTERPRETED_TASKS` where neither this process nor numba's on-disk cache holds the compiled engine."""
    if len(graph) <= INTERPRETED_TASKS:
        return False
    from placement.kernels import is_cached

    return not is_cached(_compiled()._kernel)


def compiling() -> str:
    """What a run says before it compiles the engine (:func:`placement.kernels.compiling_note`)."""
    from placement.kernels import compiling_note

    return compiling_note("the event engine", "it")


@lru_cache(maxsize=1)
def _compiled():
    """:func:`run` compiled by numba, holding back Ctrl-C while it runs (:class:`placement.kernels.InterruptSafe`)."""
    from placement.kernels import InterruptSafe, compile_kernel

    return InterruptSafe(compile_kernel(run))


def run(duration, resource, succ_ptr, succ_idx, predecessor_count, is_filler, priority, ordered, order_ptr,
        order_idx, scale, start, end, dispatched):
    """The engine of the module docstring over flat sequences (lists, or numpy arrays for the compiled kernel):
    task ``t``'s successors are ``succ_idx[succ_ptr[t]:succ_ptr[t + 1]]``, resource ``r``'s order
    ``order_idx[order_ptr[r]:order_ptr[r + 1]]``; ``scale`` is :func:`moment_scale`'s. Writes each task's
    ``start`` and ``end`` (left at -1 where it never starts) and the ids in the order they started into
    ``dispatched``, and returns how many started. Plain Python that numba compiles: lists seeded with one
    item of their type and emptied, ``heapq``."""
    n = len(duration)
    n_resources = len(ordered)
    queued = [is_filler[t] or not ordered[resource[t]] for t in range(n)]   # waits in a queue when ready
    waiting = [predecessor_count[t] for t in range(n)]
    ready = [False] * n
    busy = [False] * n_resources
    cursor = [order_ptr[r] for r in range(n_resources)]
    queue = [[(0.0, 0.0, 0)] for _ in range(n_resources)]   # fifo and filler queues
    for r in range(n_resources):
        queue[r].pop()
    has_filler = [False] * n_resources   # ordered resources with a ready filler queued
    events = [(0.0, 0)]
    events.pop()
    dirty = [0]                          # resources whose state changed at this moment
    dirty.pop()
    choosing = [0]
    choosing.pop()
    done = 0
    now = 0.0

    for task in range(n):
        if waiting[task] == 0:
            ready[task] = True
            r = resource[task]
            if queued[task]:
                heappush(queue[r], (priority[task], now, task))
                if is_filler[task]:
                    has_filler[r] = True
            dirty.append(r)
    while True:
        while events and events[0][0] <= now + SAME_TIME * max(scale, abs(now)):
            moment, task = heappop(events)
            if moment > now:
                now = moment
            r = resource[task]
            busy[r] = False
            dirty.append(r)
            for k in range(succ_ptr[task], succ_ptr[task + 1]):
                s = succ_idx[k]
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready[s] = True
                    rs = resource[s]
                    if queued[s]:
                        heappush(queue[rs], (priority[s], now, s))
                        if is_filler[s]:
                            has_filler[rs] = True
                    dirty.append(rs)
        choosing.clear()
        for r in dirty:      # ordered resources start their next main task first
            if busy[r]:
                continue
            if ordered[r]:
                k = cursor[r]
                if k < order_ptr[r + 1] and ready[order_idx[k]]:
                    task = order_idx[k]
                    cursor[r] = k + 1
                    busy[r] = True
                    start[task] = now
                    dispatched[done] = task
                    done += 1
                    end[task] = now + duration[task]
                    heappush(events, (end[task], task))
            elif queue[r]:
                choosing.append(r)
        dirty.clear()
        horizon = now + SAME_TIME * max(scale, abs(now))
        if events and events[0][0] <= horizon:
            dirty.extend(choosing)   # a zero-length task ended at once: queues choose once the moment is over
            continue
        for r in choosing:   # then queues
            if busy[r] or not queue[r]:
                continue
            task = heappop(queue[r])[2]
            busy[r] = True
            start[task] = now
            dispatched[done] = task
            done += 1
            end[task] = now + duration[task]
            heappush(events, (end[task], task))
        if events and events[0][0] <= horizon:
            continue
        for r in range(n_resources):     # then fillers, where the next main task is not ready
            if not has_filler[r] or busy[r]:
                continue
            k = cursor[r]
            if k < order_ptr[r + 1] and ready[order_idx[k]]:
                continue
            task = heappop(queue[r])[2]
            if not queue[r]:
                has_filler[r] = False
            busy[r] = True
            start[task] = now
            dispatched[done] = task
            done += 1
            end[task] = now + duration[task]
            heappush(events, (end[task], task))
        if not events:
            break
        if events[0][0] > horizon:
            now = events[0][0]
    return done


def _check_orders(graph: TaskGraph) -> None:
    """Every main task of an ordered resource is in that resource's order exactly once."""
    resource = np.asarray(graph.resource, dtype=np.int64)
    filler = np.asarray(graph.filler, dtype=np.bool_)
    ptr, tasks = _flat_arrays(graph.order)
    owner = np.repeat(np.arange(len(graph.order)), np.diff(ptr))
    misplaced = (resource[tasks] != owner) | filler[tasks]
    if misplaced.any():
        raise ValueError(f"task {tasks[misplaced][0]} is ordered on a resource that does not run it as a main task")
    placed = np.bincount(tasks, minlength=len(graph))
    expected = np.asarray([p == ORDERED for p in graph.policy], dtype=np.bool_)[resource] & ~filler
    wrong = np.flatnonzero(placed != expected)
    if len(wrong):
        raise ValueError(f"task {wrong[0]} appears {placed[wrong[0]]} times in its resource's order")
