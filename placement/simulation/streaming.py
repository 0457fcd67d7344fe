"""The figures of a long steady-state run in memory independent of the number of micro-batches.

Model
-----
With communication inline and a schedule without filler tasks (``stream``, ``1f1b-async``),
every task is a main task of its stage's ``ordered`` resource, so the event engine
(:mod:`placement.simulation.engine`) starts each task at the max-plus recurrence::

    start = max(end of the task before it in its stage's order, ends of its predecessors)
    end   = start + duration

(up to the engine's 1e-12 relative merging of moments). :func:`stream_figures` evaluates it
task by task: each stage's cursor walks its order (:func:`placement.simulation.schedules.stage_order`,
computed position by position) while the next task's predecessors are done, and only a ring
of the last micro-batches' end times is kept. From the stream of completion times ``c[j]``
it keeps what :func:`placement.simulation.simulator.steady_rate` needs (``c[a]``, ``c[b]`` and,
per period ``p``, the least, largest and summed gap ``c[j + p] − c[j]`` in the window), and
per stage the peak of micro-batches in flight (counted in the stage's order, taken by its ``F`` and
released by its last task there, as :func:`placement.simulation.simulator.in_flight_peak` counts
them), and the completions ``c[b − HISTORY + 1] … c[b]`` (the caller ends the window at a whole number of
periods). In a periodic window the busy time of a stage is its work per micro-batch times the micro-batches
of the window, which the caller counts: one pass suffices. A window without a period (the run did not
settle) is measured as it ran: a second pass, knowing the span ``[c[a], c[b]]``, sums each stage's busy
time within it. Work is linear in the tasks, memory
independent of the micro-batches (a stage that waits on nothing downstream is held back
until the ring has room). A run the ring cannot hold (or a deadlock) is reported by status,
and the caller falls back to the event engine. A long pass runs in chunks of :data:`CHUNK` tasks,
its state kept between them, so that progress can be reported; a chunk ends where the tasks run
out, perhaps within a stage's turn, and the next goes on with that stage, so that the tasks run
in the order of an unpaused pass (resumed at the first stage instead, a stage that depends on
nothing downstream ran ahead of a last stage stopped between a B and its next F, and the ring
could not hold the run: every run past 2^22 tasks of a published training graph fell back to the
event engine, whose memory grows with the micro-batches).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from placement.wording import rounded_duration

OK, DEADLOCK, RING_TOO_SHORT, PAUSED = 0, 1, 2, 3
HISTORY = 128   # completions kept for the period search (more than MAX_PERIOD)
CHUNK = 1 << 22  # tasks a pass evaluates between two looks at the clock
REPORT_EVERY_S = 5.0  # seconds between two progress lines


def _order(training, s, n, m, k):
    """(kind, micro-batch) at position ``k`` of stage ``s``'s order; kind 0 = F, 1 = B."""
    if not training:
        return 0, k
    warm = min(n - s - 1, m)
    if k < warm:
        return 0, k
    r = k - warm
    steady = m - warm
    if r < 2 * steady:
        if r % 2 == 0:
            return 0, warm + r // 2
        return 1, r // 2
    return 1, steady + (r - 2 * steady)


class State(NamedTuple):
    """The arrays one pass of :func:`run` updates in place, in the order of its parameters: per ring
    slot its micro-batch, tasks done and finish; per slot and task its micro-batch and end; per stage
    its cursor, last end, released and taken micro-batches, peak and busy time; the completion history (the
    last :data:`HISTORY` completions up to micro-batch ``b``) and per period the gap figures; ``c_a, c_b,
    makespan``; ``emitted, done`` and the stage a paused pass goes on with."""

    owner: np.ndarray
    count: np.ndarray
    finish: np.ndarray
    tag: np.ndarray
    end: np.ndarray
    cursor: np.ndarray
    last_end: np.ndarray
    rel: np.ndarray
    taken: np.ndarray
    peak: np.ndarray
    busy: np.ndarray
    history: np.ndarray
    gap_min: np.ndarray
    gap_max: np.ndarray
    gap_sum: np.ndarray
    figures: np.ndarray
    counters: np.ndarray


def new_state(n, k, ring, p_max):
    """The :class:`State` of one pass of :func:`run` before its first task."""
    return State(np.full(ring, -1, dtype=np.int64), np.zeros(ring, dtype=np.int64), np.zeros(ring),
                 np.full((ring, k), -1, dtype=np.int64), np.zeros((ring, k)),
                 np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=np.int64),
                 np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n),
                 np.zeros(HISTORY), np.full(p_max + 1, np.inf), np.full(p_max + 1, -np.inf), np.zeros(p_max + 1),
                 np.zeros(3), np.zeros(3, dtype=np.int64))


def run(m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks,
        ring, a, b, p_max, span_lo, span_hi, owner, count, finish, tag, end, cursor, last_end, rel, taken, peak,
        busy, history, gap_min, gap_max, gap_sum, figures, counters, limit):
    """One pass over ``m`` micro-batches of ``n`` stages; see the module docstring.

    Task ``t`` of a micro-batch lasts ``duration[t]`` after its predecessors
    ``pred_idx[pred_ptr[t]:pred_ptr[t + 1]]`` of the same micro-batch; ``first_task[s]``/``last_task[s]``
    are stage ``s``'s F and last compute task (B when training); with ``window > 0`` the sources
    of micro-batch ``j`` also wait for the ``sinks`` of micro-batch ``j − window``. The state
    (:func:`new_state`) is updated in place: ``figures`` holds ``c_a, c_b, makespan``, ``counters``
    ``emitted, done``, ``busy`` the time within ``[span_lo, span_hi]``. Returns the status:
    ``PAUSED`` once ``limit`` tasks are done (call again with a larger one to go on), else ``OK``,
    ``DEADLOCK`` or ``RING_TOO_SHORT``.
    """
    total = m * (2 * n if training else n)
    length = 2 * m if training else m
    k = duration.shape[0]
    c_a = figures[0]
    c_b = figures[1]
    makespan = figures[2]
    emitted = counters[0]
    done = counters[1]
    resume = counters[2]   # a paused pass goes on with the stage it stopped in, as an unpaused one would
    status = OK
    while done < total:
        if done >= limit:
            status = PAUSED
            break
        progressed = False
        first = resume
        resume = 0
        for s in range(first, n):
            if done >= limit:
                break
            while cursor[s] < length and done < limit:
                kind, j = _order(training, s, n, m, cursor[s])
                if j - ring + window >= emitted:
                    break   # a stage that depends on nothing downstream waits until the ring has room
                t = first_task[s] if kind == 0 else last_task[s]
                slot = j % ring
                ready = last_end[s]
                ok = owner[slot] == j or owner[slot] < 0 or owner[slot] == j - ring
                if ok and owner[slot] == j:
                    for q in range(pred_ptr[t], pred_ptr[t + 1]):
                        p = pred_idx[q]
                        if tag[slot, p] != j:
                            ok = False
                            break
                        if end[slot, p] > ready:
                            ready = end[slot, p]
                elif ok and pred_ptr[t + 1] > pred_ptr[t]:
                    ok = False   # a predecessor of the same micro-batch has not run yet
                if ok and window > 0 and is_source[t] and j >= window:
                    jj = j - window
                    slot2 = jj % ring
                    if owner[slot2] != jj:
                        ok = False
                    else:
                        for q in range(sinks.shape[0]):
                            u = sinks[q]
                            if tag[slot2, u] != jj:
                                ok = False
                                break
                            if end[slot2, u] > ready:
                                ready = end[slot2, u]
                if not ok:
                    break
                if owner[slot] != j:
                    old = owner[slot]
                    # the slot's micro-batch must be complete (so every stage has run, and released, it)
                    # and needed by nobody
                    if old >= 0 and (old >= emitted or old + window >= emitted):
                        return RING_TOO_SHORT
                    owner[slot] = j
                    count[slot] = 0
                    finish[slot] = -np.inf
                start = ready
                stop = start + duration[t]
                if kind == 0:   # a stage takes micro-batch j with its F: count what it holds then
                    taken[s] += 1
                    if taken[s] - rel[s] > peak[s]:
                        peak[s] = taken[s] - rel[s]
                if t == last_task[s]:   # and releases it with its last task there
                    rel[s] += 1
                end[slot, t] = stop
                tag[slot, t] = j
                count[slot] += 1
                if stop > finish[slot]:
                    finish[slot] = stop
                last_end[s] = stop
                cursor[s] += 1
                done += 1
                progressed = True
                if stop > makespan:
                    makespan = stop
                overlap = min(stop, span_hi) - max(start, span_lo)
                if overlap > 0.0:
                    busy[s] += overlap
                while emitted < m and owner[emitted % ring] == emitted and count[emitted % ring] == k:
                    c = finish[emitted % ring]
                    if emitted == a:
                        c_a = c
                    if emitted == b:
                        c_b = c
                    if a <= emitted <= b:
                        for p in range(1, p_max + 1):
                            if emitted - p >= a:
                                gap = c - history[(emitted - p) % HISTORY]
                                if gap < gap_min[p]:
                                    gap_min[p] = gap
                                if gap > gap_max[p]:
                                    gap_max[p] = gap
                                gap_sum[p] += gap
                    if emitted <= b:
                        history[emitted % HISTORY] = c
                    emitted += 1
            if done >= limit:
                resume = s
        if not progressed and first == 0:
            return DEADLOCK
    figures[0] = c_a
    figures[1] = c_b
    figures[2] = makespan
    counters[0] = emitted
    counters[1] = done
    counters[2] = resume
    if status == PAUSED:
        return PAUSED
    return OK


@lru_cache(maxsize=1)
def _compiled():
    """:func:`run` compiled by numba (:func:`placement.kernels.compile_kernel`), holding back Ctrl-C while
    it runs (:class:`placement.kernels.InterruptSafe`)."""
    from placement.kernels import InterruptSafe, compile_kernel

    return InterruptSafe(compile_kernel(run, {"_order": compile_kernel(_order)}))


#: Runs with at most this many tasks are evaluated interpreted (compiling would cost more).
INTERPRETED_TASKS = 20_000


def ring_size(n, window):
    """Micro-batches the ring of a run over ``n`` stages keeps (a steady state needs about ``4 n``)."""
    return 4 * (n + window) + 64


def stream_bytes(n, window, k, m):
    """Bytes the tables of :func:`stream_figures` take for ``n`` stages, ``k`` tasks per micro-batch and
    ``m`` micro-batches: per ring slot and task a micro-batch (8 bytes, every slot written when made) and
    an end (8 bytes, in the slots used: at most ``m``), for one pass (a second, where one runs, starts once the
    first's tables are let go). They grow with the square of the stages (``k`` grows with them too), not past
    the ring's size."""
    ring = ring_size(n, window)
    return 8 * k * (ring + min(ring, m))


def stream_figures(m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks,
                   a, b, p_max, progress=None, span=(0.0, 0.0)):
    """A pass of :func:`run`: ``status, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, history, busy``
    (``history[j % HISTORY]`` is ``c[j]`` for ``b − HISTORY < j ≤ b``; ``busy`` the time each stage runs
    within ``span``, a second pass's once the first has found the window's).
    ``progress``, if given, receives a line every :data:`REPORT_EVERY_S` seconds of a longer run."""
    kernel = _compiled() if m * len(duration) > INTERPRETED_TASKS else run
    ring = ring_size(n, window)
    args = (m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks, ring,
            a, b, p_max)
    total = m * (2 * n if training else n)
    started = time.perf_counter()
    reported = [started]

    def report(done):
        now = time.perf_counter()
        if progress is None or now - reported[0] < REPORT_EVERY_S:
            return
        reported[0] = now
        left = (now - started) * (total - done) / done
        progress(f"simulated {done:,} of {total:,} tasks, {done / total:.1%}; about {rounded_duration(left)} left")

    def one_pass():
        state = new_state(n, len(duration), ring, p_max)
        limit = CHUNK
        while True:
            status = kernel(*args, *span, *state, limit)
            if status != PAUSED:
                return status, state
            report(int(state.counters[1]))
            limit += CHUNK

    status, state = one_pass()
    c_a, c_b, makespan = (float(x) for x in state.figures)
    return (status, makespan, c_a, c_b, state.gap_min, state.gap_max, state.gap_sum, state.peak, state.history,
            state.busy)
