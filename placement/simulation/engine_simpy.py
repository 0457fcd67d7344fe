"""The task-graph model of :mod:`placement.simulation.engine`, executed by SimPy instead.

Same model, same answers (the tests compare the two): every task has a *done*
event; every resource is a SimPy process. An ``ordered`` resource walks its
main-task order, waiting for each task's predecessors; while the next main task
is not ready it runs the queued filler that comes first by ``(priority, time it
became ready, id)``, choosing only after every other event of the moment (a
wake-up event of lower priority than SimPy's own, re-armed while events within
a relative ``SAME_TIME`` are pending, as the heap core merges them), and starts
its next main task at once should that become ready while it waits. A ``fifo``
resource serves its queue of ready tasks in the same order, also choosing only
after every event of the moment. (The two engines may break a tie differently
only when a queue task of length zero, or a filler of length zero, makes
another task ready at the same moment; in the simulator transfers are never of
length zero and weight-gradient tasks feed no task.)

It exists to measure the heap-based core against a maintained library (see
``benchmarks/simulate.py``) and as an independent implementation of the model;
SimPy is needed (``pip install 'placement[simulate]'``).
"""

from __future__ import annotations

import heapq
import importlib
from typing import Any

from placement.errors import SolverUnavailableError
from placement.simulation.engine import ORDERED, SAME_TIME, Deadlock, TaskGraph, _check_orders, moment_scale

# Wake-up ranks after SimPy's own events of a moment (URGENT 0, NORMAL 1): queues choose
# after those, fillers after the queues' choices (as the heap core dispatches them last).
_QUEUE = 2
_FILLER = 3


def _simpy() -> Any:
    try:
        return importlib.import_module("simpy")
    except ImportError:
        raise SolverUnavailableError("engine 'simpy' needs SimPy: pip install 'placement[simulate]'") from None


def execute_simpy(graph: TaskGraph, dispatched: list[int] | None = None) -> tuple[list[float], list[float]]:
    """Run every task of ``graph`` with SimPy; return ``(start, end)`` lists indexed by task id (``dispatched``:
    as :func:`placement.simulation.engine.execute`'s)."""
    simpy = _simpy()
    _check_orders(graph)
    env = simpy.Environment()
    n = len(graph)
    start = [-1.0] * n
    end = [-1.0] * n
    done = [env.event() for _ in range(n)]
    waiting = list(graph.predecessor_count)
    ready = [False] * n
    scale = moment_scale(graph)
    queues: list[list[tuple[float, float, int]]] = [[] for _ in graph.policy]
    wake: list[Any] = [None] * len(graph.policy)   # event a resource process sleeps on

    def signal(r: int) -> None:
        if wake[r] is not None and not wake[r].triggered:
            wake[r].succeed()

    def finish(task: int) -> None:
        end[task] = env.now
        done[task].succeed()
        for s in graph.successors[task]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready[s] = True
                r = graph.resource[s]
                if graph.filler[s] or graph.policy[r] != ORDERED:
                    heapq.heappush(queues[r], (graph.priority[s], env.now, s))
                signal(r)

    def run(task: int):
        start[task] = env.now
        if dispatched is not None:
            dispatched.append(task)
        yield env.timeout(graph.duration[task])
        finish(task)

    def after_this_moment(delay: float, priority: int):
        event = env.event()
        event._ok = True
        event._value = None
        env.schedule(event, priority=priority, delay=delay)
        return event

    def settle(priority: int):
        """Wait until every event of this moment ranked before ``priority`` has happened."""
        yield after_this_moment(0.0, priority)
        while True:
            horizon = env.now + SAME_TIME * max(scale, abs(env.now))
            pending = [when for when, rank, _, _ in env._queue if when <= horizon and rank < priority]
            if not pending:
                return
            yield after_this_moment(max(pending) - env.now, priority)

    def ordered_resource(r: int):
        order = graph.order[r]
        k = 0
        while k < len(order) or queues[r]:
            if k < len(order) and ready[order[k]]:
                yield from run(order[k])
                k += 1
                continue
            if queues[r]:
                # the moment settles before a filler runs, unless the next main task becomes ready
                # meanwhile: that one starts at once (its end may make other tasks ready at this moment)
                settled = env.process(settle(_FILLER))
                while not settled.triggered and not (k < len(order) and ready[order[k]]):
                    wake[r] = env.event()
                    yield settled | wake[r]
                    wake[r] = None
                if k < len(order) and ready[order[k]]:
                    continue
                yield from run(heapq.heappop(queues[r])[2])
                continue
            wake[r] = env.event()
            yield wake[r]
            wake[r] = None
        # fillers that become ready later still need this resource
        while True:
            wake[r] = env.event()
            yield wake[r]
            wake[r] = None
            while queues[r]:
                yield from settle(_FILLER)
                yield from run(heapq.heappop(queues[r])[2])

    def fifo_resource(r: int):
        while True:
            while queues[r]:
                yield from settle(_QUEUE)     # every task that becomes ready at this moment competes
                yield from run(heapq.heappop(queues[r])[2])
            wake[r] = env.event()
            yield wake[r]
            wake[r] = None

    for task in range(n):
        if waiting[task] == 0:
            ready[task] = True
            r = graph.resource[task]
            if graph.filler[task] or graph.policy[r] != ORDERED:
                heapq.heappush(queues[r], (graph.priority[task], 0.0, task))
    for r, policy in enumerate(graph.policy):
        env.process(ordered_resource(r) if policy == ORDERED else fifo_resource(r))
    env.run()
    missing = [t for t in range(n) if end[t] < 0]
    if missing:
        raise Deadlock(missing)
    return start, end
