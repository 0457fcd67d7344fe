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
:class:`Deadlock`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

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


def execute(graph: TaskGraph, dispatched: list[int] | None = None) -> tuple[list[float], list[float]]:
    """Run every task of ``graph``; return ``(start, end)`` lists indexed by task id. ``dispatched``, where
    given, receives the task ids in the order they started (at one moment, the order the engine chose:
    what a resource ran first among tasks of no time that share a start)."""
    n = len(graph)
    _check_orders(graph)
    duration, resource, successors = graph.duration, graph.resource, graph.successors
    is_filler, order, priority = graph.filler, graph.order, graph.priority
    n_resources = len(graph.policy)
    ordered = [p == ORDERED for p in graph.policy]
    queued = [is_filler[t] or not ordered[resource[t]] for t in range(n)]   # waits in a queue when ready
    waiting = list(graph.predecessor_count)
    ready = [False] * n
    start = [-1.0] * n
    end = [-1.0] * n
    busy = [False] * n_resources
    cursor = [0] * n_resources
    queue: list[list[tuple[float, float, int]]] = [[] for _ in range(n_resources)]   # fifo and filler queues
    with_fillers: set[int] = set()     # free-or-busy ordered resources with a ready filler queued
    events: list[tuple[float, int]] = []
    dirty: list[int] = []              # resources whose state changed at this moment
    heappush, heappop = heapq.heappush, heapq.heappop
    done = 0
    now = 0.0
    scale = moment_scale(graph)

    for task in range(n):
        if waiting[task] == 0:
            ready[task] = True
            r = resource[task]
            if queued[task]:
                heappush(queue[r], (priority[task], now, task))
                if is_filler[task]:
                    with_fillers.add(r)
            dirty.append(r)
    while True:
        while events and events[0][0] <= now + SAME_TIME * max(scale, abs(now)):
            moment, task = heappop(events)
            if moment > now:
                now = moment
            r = resource[task]
            busy[r] = False
            dirty.append(r)
            done += 1
            for s in successors[task]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready[s] = True
                    rs = resource[s]
                    if queued[s]:
                        heappush(queue[rs], (priority[s], now, s))
                        if is_filler[s]:
                            with_fillers.add(rs)
                    dirty.append(rs)
        choosing: list[int] = []
        for r in dirty:      # ordered resources start their next main task first
            if busy[r]:
                continue
            if ordered[r]:
                k = cursor[r]
                line = order[r]
                if k < len(line) and ready[line[k]]:
                    task = line[k]
                    cursor[r] = k + 1
                    busy[r] = True
                    start[task] = now
                    if dispatched is not None:
                        dispatched.append(task)
                    end[task] = finish = now + duration[task]
                    heappush(events, (finish, task))
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
            if dispatched is not None:
                dispatched.append(task)
            end[task] = finish = now + duration[task]
            heappush(events, (finish, task))
        if events and events[0][0] <= horizon:
            continue
        for r in list(with_fillers):     # then fillers, where the next main task is not ready
            if busy[r]:
                continue
            k = cursor[r]
            line = order[r]
            if k < len(line) and ready[line[k]]:
                continue
            task = heappop(queue[r])[2]
            if not queue[r]:
                with_fillers.discard(r)
            busy[r] = True
            start[task] = now
            if dispatched is not None:
                dispatched.append(task)
            end[task] = finish = now + duration[task]
            heappush(events, (finish, task))
        if not events:
            break
        if events[0][0] > horizon:
            now = events[0][0]
    if done < n:
        raise Deadlock([t for t in range(n) if start[t] < 0])
    return start, end


def _check_orders(graph: TaskGraph) -> None:
    """Every main task of an ordered resource is in that resource's order exactly once."""
    placed = [0] * len(graph)
    for r, tasks in enumerate(graph.order):
        for task in tasks:
            if graph.resource[task] != r or graph.filler[task]:
                raise ValueError(f"task {task} is ordered on a resource that does not run it as a main task")
            placed[task] += 1
    for task in range(len(graph)):
        expected = 1 if graph.policy[graph.resource[task]] == ORDERED and not graph.filler[task] else 0
        if placed[task] != expected:
            raise ValueError(f"task {task} appears {placed[task]} times in its resource's order")
