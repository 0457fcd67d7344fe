"""The discrete-event core: ordered and FIFO resources, fillers, simultaneous events, deadlocks.

Every expected time below is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import importlib.util
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement.simulation import engine
from placement.simulation.engine import FIFO, ORDERED, Deadlock, TaskGraph, execute

HAVE_SIMPY = importlib.util.find_spec("simpy") is not None


def two_device_chain() -> tuple[TaskGraph, list[int]]:
    """Device 0 runs a (2) then b (3); device 1 runs c (4), which needs a."""
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    a, b, c = g.add_task(d0, 2.0), g.add_task(d0, 3.0), g.add_task(d1, 4.0)
    g.add_dependency(a, c)
    g.set_order(d0, [a, b])
    g.set_order(d1, [c])
    return g, [a, b, c]


def test_ordered_resource_runs_its_order_and_waits_for_inputs():
    g, (a, b, c) = two_device_chain()
    start, end = execute(g)
    # a [0,2], b [2,5] on device 0; c waits for a: [2,6] on device 1.
    assert (start[a], end[a], start[b], end[b], start[c], end[c]) == (0, 2, 2, 5, 2, 6)


def test_ordered_resource_keeps_its_order_even_when_a_later_task_is_ready():
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    slow = g.add_task(d0, 5.0)
    waits = g.add_task(d1, 1.0)       # needs slow
    ready_now = g.add_task(d1, 1.0)   # ready at 0, but ordered after `waits`
    g.add_dependency(slow, waits)
    g.set_order(d0, [slow])
    g.set_order(d1, [waits, ready_now])
    start, _ = execute(g)
    # waits [5,6], then ready_now [6,7]: device 1 idles from 0 to 5 rather than reorder.
    assert (start[waits], start[ready_now]) == (5, 6)


def test_fifo_resource_serves_in_order_of_readiness_then_id():
    g = TaskGraph()
    d = g.add_resource(ORDERED)
    link = g.add_resource(FIFO)
    p1, p2 = g.add_task(d, 3.0), g.add_task(d, 1.0)       # device order p2 then p1: p2 [0,1], p1 [1,4]
    late, early = g.add_task(link, 2.0), g.add_task(link, 2.0)
    g.add_dependency(p1, late)
    g.add_dependency(p2, early)
    first, second = g.add_task(link, 1.0), g.add_task(link, 1.0)   # both ready at 0: lower id first
    g.set_order(d, [p2, p1])
    start, _ = execute(g)
    # link: first [0,1] (ready 0, lower id), second [1,2], early (ready 1) [2,4], late (ready 4) [4,6].
    assert (start[first], start[second], start[early], start[late]) == (0, 1, 2, 4)


def test_filler_runs_only_while_the_next_main_task_is_not_ready():
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    producer = g.add_task(d1, 4.0)
    first = g.add_task(d0, 1.0)
    needs = g.add_task(d0, 1.0)                 # needs producer, ready at 4
    fill_a = g.add_task(d0, 2.0, filler=True)   # ready when first ends (1)
    fill_b = g.add_task(d0, 2.0, filler=True)
    g.add_dependency(producer, needs)
    g.add_dependency(first, fill_a)
    g.add_dependency(first, fill_b)
    g.set_order(d0, [first, needs])
    g.set_order(d1, [producer])
    start, end = execute(g)
    # first [0,1]; needs is not ready until 4, so fill_a [1,3] and fill_b [3,5] (the device is
    # idle at 3 and needs is still not ready); needs then waits for fill_b: [5,6].
    assert (start[first], start[fill_a], start[fill_b], start[needs], end[needs]) == (0, 1, 3, 5, 6)


def test_filler_yields_to_a_main_task_ready_at_the_same_moment():
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    first = g.add_task(d0, 2.0)
    producer = g.add_task(d1, 2.0)              # ends at 2, the moment device 0 becomes free
    needs = g.add_task(d0, 1.0)
    filler = g.add_task(d0, 5.0, filler=True)
    g.add_dependency(producer, needs)
    g.add_dependency(first, filler)
    g.set_order(d0, [first, needs])
    g.set_order(d1, [producer])
    start, _ = execute(g)
    # At 2 both `first` and `producer` end: `needs` is ready then, so it runs [2,3], the filler [3,8].
    assert (start[needs], start[filler]) == (2, 3)


def test_zero_length_tasks_chain_within_one_moment():
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    z1 = g.add_task(d0, 0.0)
    z2 = g.add_task(d1, 0.0)
    after = g.add_task(d0, 1.0)
    filler = g.add_task(d0, 3.0, filler=True)
    g.add_dependency(z1, z2)
    g.add_dependency(z2, after)
    g.set_order(d0, [z1, after])
    g.set_order(d1, [z2])
    start, _ = execute(g)
    # z1 and z2 end at 0, so `after` is ready at 0 and goes before the filler.
    assert (start[after], start[filler]) == (0, 1)


def test_queues_serve_by_priority_then_readiness_then_id():
    g = TaskGraph()
    device = g.add_resource(ORDERED)
    link = g.add_resource(FIFO)
    producer = g.add_task(device, 1.0)
    late = g.add_task(link, 1.0, priority=5.0)          # ready at 0, least urgent
    low = g.add_task(link, 1.0, priority=1.0)           # ready at 0
    urgent = g.add_task(link, 1.0, priority=0.0)        # ready at 1, when producer ends
    tie_b, tie_a = g.add_task(link, 1.0, priority=2.0), g.add_task(link, 1.0, priority=2.0)
    g.add_dependency(producer, urgent)
    g.set_order(device, [producer])
    start, _ = execute(g)
    # at 0 the ready link tasks rank low (1), tie_b, tie_a (2), late (5): low [0,1]; at 1 urgent
    # (0) is ready and goes first [1,2]; then tie_b [2,3] (lower id), tie_a [3,4], late [4,5].
    assert (start[low], start[urgent], start[tie_b], start[tie_a], start[late]) == (0, 1, 2, 3, 4)


def test_a_queue_chooses_after_every_event_of_the_moment():
    g = TaskGraph()
    device = g.add_resource(ORDERED)
    link = g.add_resource(FIFO)
    running = g.add_task(link, 1.0, priority=0.0)     # [0,1] on the link
    waiting = g.add_task(link, 1.0, priority=9.0)     # ready at 0, least urgent
    producer = g.add_task(device, 1.0)                # ends at 1, like `running`
    urgent = g.add_task(link, 1.0, priority=1.0)      # ready at 1
    g.add_dependency(producer, urgent)
    g.set_order(device, [producer])
    # when the link frees at 1, `urgent` has become ready at that same moment and goes first
    runs = [execute]
    if HAVE_SIMPY:
        from placement.simulation.engine_simpy import execute_simpy

        runs.append(execute_simpy)
    for run in runs:
        start, _ = run(g)
        assert (start[running], start[producer], start[urgent], start[waiting]) == (0, 0, 1, 2)


def test_deadlock_names_the_tasks_that_never_start():
    g = TaskGraph()
    d0, d1 = g.add_resource(ORDERED), g.add_resource(ORDERED)
    a0, b0 = g.add_task(d0, 1.0), g.add_task(d0, 1.0)
    a1, b1 = g.add_task(d1, 1.0), g.add_task(d1, 1.0)
    g.add_dependency(b1, a0)    # device 0 starts with a0, which waits for device 1's second task
    g.add_dependency(b0, a1)    # and device 1 starts with a1, which waits for device 0's second task
    g.set_order(d0, [a0, b0])
    g.set_order(d1, [a1, b1])
    with pytest.raises(Deadlock) as info:
        execute(g)
    assert info.value.waiting == [a0, b0, a1, b1]


def test_orders_must_hold_every_main_task_once():
    g, (a, b, c) = two_device_chain()
    g.set_order(0, [a])
    with pytest.raises(ValueError, match=f"task {b} appears 0 times"):
        execute(g)


def test_replicate_offsets_ids_and_keeps_dependencies_inside_each_copy():
    g, (a, b, c) = two_device_chain()
    copies = g.replicate(3)
    assert len(copies) == 9
    assert copies.successors[a + 3] == [c + 3] and copies.successors[a + 6] == [c + 6]
    assert copies.predecessor_count == [0, 0, 1] * 3
    assert copies.order == [[], []]


@st.composite
def random_graphs(draw) -> TaskGraph:
    """Random task graphs: 1-3 ordered and 0-2 FIFO resources, some fillers, acyclic dependencies
    that respect each ordered resource's order (so nothing deadlocks), durations in quarters
    (never zero on a FIFO resource, as transfers), fillers that feed no task (as weight-gradient
    tasks), queue priorities in halves."""
    g = TaskGraph()
    ordered = [g.add_resource(ORDERED) for _ in range(draw(st.integers(1, 3)))]
    fifo = [g.add_resource(FIFO) for _ in range(draw(st.integers(0, 2)))]
    n = draw(st.integers(1, 14))
    orders: dict[int, list[int]] = {r: [] for r in ordered}
    for t in range(n):
        resource = draw(st.sampled_from(ordered + fifo))
        filler = resource in orders and draw(st.integers(0, 3)) == 0
        shortest = 1 if resource in fifo else 0       # queue tasks (transfers) take time
        g.add_task(resource, draw(st.integers(shortest, 12)) / 4, filler, priority=draw(st.integers(-2, 2)) / 2)
        if resource in orders and not filler:
            orders[resource].append(t)
        for p in draw(st.sets(st.integers(0, t - 1), max_size=3)) if t else ():
            if not g.filler[p]:          # like weight-gradient tasks, fillers feed nothing
                g.add_dependency(p, t)
    for r, tasks in orders.items():
        g.set_order(r, tasks)
    return g


@given(random_graphs())
@settings(max_examples=200)
def test_every_run_respects_dependencies_resources_and_orders(g):
    start, end = execute(g)
    for t in range(len(g)):
        assert end[t] == start[t] + g.duration[t]
        for s in g.successors[t]:
            assert start[s] >= end[t]
    for r in range(len(g.policy)):
        spans = sorted((start[t], end[t]) for t in range(len(g)) if g.resource[t] == r)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))      # one task at a time
        order = g.order[r]
        assert all(start[x] <= start[y] for x, y in zip(order, order[1:]))


def main_task_ready_while_fillers_wait() -> TaskGraph:
    """Found by the comparison below: zero-length main tasks 0 (resource 0) and 2 (resource 1, after 0)
    make task 3 of the fifo resource 2 ready at time 0, where task 6 is ready too; resource 1 also
    holds a ready filler (5). Task 3 comes first (same priority and time, lower id) only if resource 1
    starts task 2 at once instead of waiting, for its filler, until the moment settles."""
    g = TaskGraph()
    for policy in (ORDERED, ORDERED, FIFO):
        g.add_resource(policy)
    for r, d, filler in [(0, 0.0, False), (0, 0.0, True), (1, 0.0, False), (2, 0.25, False), (0, 0.0, True),
                         (1, 0.0, True), (2, 0.25, False)]:
        g.add_task(r, d, filler=filler)
    for before, after in [(0, 2), (0, 3), (2, 3)]:
        g.add_dependency(before, after)
    g.set_order(0, [0])
    g.set_order(1, [2])
    return g


def test_a_main_task_that_becomes_ready_starts_before_the_queues_choose():
    start, end = execute(main_task_ready_while_fillers_wait())
    assert (start[3], start[6]) == (0.0, 0.25)


@pytest.mark.skipif(not HAVE_SIMPY, reason="SimPy is not installed (pip install 'placement[simulate]')")
@given(random_graphs())
@example(main_task_ready_while_fillers_wait())
@settings(max_examples=200)
def test_simpy_engine_gives_the_same_times(g):
    from placement.simulation.engine_simpy import execute_simpy

    assert execute_simpy(g) == execute(g)


@given(random_graphs())
@example(main_task_ready_while_fillers_wait())
@settings(max_examples=200)
def test_the_compiled_engine_gives_the_same_times_and_order_of_starts(g):
    interpreted: list[int] = []
    compiled: list[int] = []
    expected = execute(g, interpreted)
    with patch.object(engine, "INTERPRETED_TASKS", 0):
        start, end = execute(g, compiled)
    assert (start.tolist(), end.tolist()) == expected
    assert compiled == interpreted and sorted(compiled) == list(range(len(g)))


@pytest.mark.parametrize("interpreted", [10**9, 0])
def test_a_deadlock_names_the_tasks_that_never_start_and_the_order_of_those_that_did(interpreted):
    """a (resource 0) needs c, which resource 1 runs after b; b needs a: none of the three starts; d, alone
    on resource 2, does (interpreted and compiled)."""
    g = TaskGraph()
    r0, r1, r2 = g.add_resource(ORDERED), g.add_resource(ORDERED), g.add_resource(ORDERED)
    a, b, c, d = g.add_task(r0, 1.0), g.add_task(r1, 1.0), g.add_task(r1, 1.0), g.add_task(r2, 1.0)
    g.add_dependency(c, a)
    g.add_dependency(a, b)
    g.set_order(r0, [a])
    g.set_order(r1, [b, c])
    g.set_order(r2, [d])
    dispatched: list[int] = []
    with patch.object(engine, "INTERPRETED_TASKS", interpreted), pytest.raises(Deadlock) as raised:
        execute(g, dispatched)
    assert (raised.value.waiting, dispatched) == ([a, b, c], [d])


def test_a_duration_that_is_nan_is_refused_rather_than_run_forever():
    g, (a, b, c) = two_device_chain()
    g.duration[b] = float("nan")
    with pytest.raises(ValueError, match=rf"^task {b} has no duration \(NaN\)$"):
        execute(g)


@pytest.mark.parametrize("scale", [1e-13, 1e-200, 1e100])
def test_moments_are_merged_relative_to_the_runs_own_scale(scale):
    """The two-device chain scaled by ``scale``: c ends at 6·scale and b at 5·scale, distinct moments at
    any scale. Merged within an absolute 1e-12, a run in units of 1e-13 (or smaller) took moments
    apart by less than that for one, and started tasks late (a 1F1B-with-flush iteration of the
    tiny training pair came out at 163 where it is 146.5, in those units)."""
    g, (a, b, c) = two_device_chain()
    g.duration = [d * scale for d in g.duration]
    d2 = g.add_resource(ORDERED)
    late = g.add_task(d2, 1.0 * scale)
    g.add_dependency(b, late)       # b ends at 5: the task runs 5 .. 6
    g.set_order(d2, [late])
    start, end = execute(g)
    assert [s / scale for s in start] == pytest.approx([0.0, 2.0, 2.0, 5.0], rel=1e-12)
    assert [e / scale for e in end] == pytest.approx([2.0, 5.0, 6.0, 6.0], rel=1e-12)
    if HAVE_SIMPY:
        from placement.simulation.engine_simpy import execute_simpy

        assert execute_simpy(g) == (start, end)


def test_a_long_task_does_not_merge_the_moments_of_short_ones():
    """Tasks of 1e-6 and 0.5 beside one of 1e12. Device 0 runs a (1e-6) then x (0.5); device 1 runs c
    (1e-6, after a) then f (1e-6); device 2 the long task. c ends at 2e-6 and x at 0.500001: merged
    within 1e-12 of the longest task (a window of 1.0) they were one moment, and f started at 0.500001
    instead of 2e-6."""
    g = TaskGraph()
    r0, r1, r2 = g.add_resource(ORDERED), g.add_resource(ORDERED), g.add_resource(ORDERED)
    a, x = g.add_task(r0, 1e-6), g.add_task(r0, 0.5)
    c, f = g.add_task(r1, 1e-6), g.add_task(r1, 1e-6)
    long = g.add_task(r2, 1e12)
    g.add_dependency(a, c)
    g.set_order(r0, [a, x])
    g.set_order(r1, [c, f])
    g.set_order(r2, [long])
    start, end = execute(g)
    assert (start[f], end[f]) == (2e-6, 3e-6)
    assert (start[x], end[x]) == (1e-6, 0.5 + 1e-6)
