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
per stage the peak of micro-batches in flight; a second pass, knowing the span
``[c[a], c[b]]``, sums each stage's busy time within it. Work is linear in the tasks, memory
independent of the micro-batches (a stage that waits on nothing downstream is held back
until the ring has room). A run the ring cannot hold (or a deadlock) is reported by status,
and the caller falls back to the event engine.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

OK, DEADLOCK, RING_TOO_SHORT = 0, 1, 2
HISTORY = 128   # completions kept for the period search (more than MAX_PERIOD)


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


def _release(s, t, rel, m, ring, owner, tag, end, last_task):
    """Count on stage ``s`` the micro-batches released by moment ``t`` (their last task there ended)."""
    while rel[s] < m:
        j = rel[s]
        slot = j % ring
        task = last_task[s]
        if owner[slot] != j or tag[slot, task] != j or end[slot, task] > t:
            break
        rel[s] += 1


def _settle(s, t, n_from, rel, m, ring, owner, tag, end, last_task, peak):
    """In-flight count on stage ``s`` just after moment ``t``, ``n_from`` micro-batches having been taken."""
    _release(s, t, rel, m, ring, owner, tag, end, last_task)
    if n_from - rel[s] > peak[s]:
        peak[s] = n_from - rel[s]


def run(m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks,
        ring, a, b, p_max, span_lo, span_hi):
    """One pass over ``m`` micro-batches of ``n`` stages; see the module docstring.

    Task ``t`` of a micro-batch lasts ``duration[t]`` after its predecessors
    ``pred_idx[pred_ptr[t]:pred_ptr[t + 1]]`` of the same micro-batch; ``first_task[s]``/``last_task[s]``
    are stage ``s``'s F and last compute task (B when training); with ``window > 0`` the sources
    of micro-batch ``j`` also wait for the ``sinks`` of micro-batch ``j − window``. Returns
    ``status, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy`` (busy within
    ``[span_lo, span_hi]``).
    """
    k = duration.shape[0]
    total = m * (2 * n if training else n)
    length = 2 * m if training else m
    owner = np.full(ring, -1, dtype=np.int64)
    count = np.zeros(ring, dtype=np.int64)
    finish = np.zeros(ring)
    tag = np.full((ring, k), -1, dtype=np.int64)
    end = np.zeros((ring, k))
    cursor = np.zeros(n, dtype=np.int64)
    last_end = np.zeros(n)
    rel = np.zeros(n, dtype=np.int64)
    taken_at = np.full(n, -1.0)
    taken = np.zeros(n, dtype=np.int64)
    peak = np.zeros(n, dtype=np.int64)
    busy = np.zeros(n)
    history = np.zeros(HISTORY)
    gap_min = np.full(p_max + 1, np.inf)
    gap_max = np.full(p_max + 1, -np.inf)
    gap_sum = np.zeros(p_max + 1)
    c_a = 0.0
    c_b = 0.0
    makespan = 0.0
    emitted = 0
    done = 0
    while done < total:
        progressed = False
        for s in range(n):
            while cursor[s] < length:
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
                    if old >= 0:   # the slot's micro-batch must be complete and needed by nobody
                        if old >= emitted or old + window >= emitted:
                            return RING_TOO_SHORT, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy
                        for r in range(n):
                            if rel[r] <= old:   # released by the stage's latest hold: count it now
                                _release(r, taken_at[r], rel, m, ring, owner, tag, end, last_task)
                            if rel[r] <= old:
                                return RING_TOO_SHORT, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy
                    owner[slot] = j
                    count[slot] = 0
                    finish[slot] = -np.inf
                start = ready
                stop = start + duration[t]
                if kind == 0:   # a stage takes micro-batch j when its F starts
                    if taken[s] > 0 and start > taken_at[s]:
                        _settle(s, taken_at[s], taken[s], rel, m, ring, owner, tag, end, last_task, peak)
                    taken_at[s] = start
                    taken[s] += 1
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
                    history[emitted % HISTORY] = c
                    emitted += 1
        if not progressed:
            return DEADLOCK, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy
    for s in range(n):
        if taken[s] > 0:
            _settle(s, taken_at[s], taken[s], rel, m, ring, owner, tag, end, last_task, peak)
    return OK, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy


@lru_cache(maxsize=1)
def _compiled():
    """:func:`run` compiled by numba (:func:`placement.kernels.compile_kernel`)."""
    from placement.kernels import compile_kernel

    release = compile_kernel(_release)
    settle = compile_kernel(_settle, {"_release": release})
    return compile_kernel(run, {"_order": compile_kernel(_order), "_release": release, "_settle": settle})


#: Runs with at most this many tasks are evaluated interpreted (compiling would cost more).
INTERPRETED_TASKS = 20_000


def stream_figures(m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks,
                   a, b, p_max):
    """Both passes of :func:`run`: ``status, makespan, c_a, c_b, gap_min, gap_max, gap_sum, peak, busy``."""
    kernel = _compiled() if m * len(duration) > INTERPRETED_TASKS else run
    ring = 4 * (n + window) + 64
    args = (m, n, training, duration, pred_ptr, pred_idx, first_task, last_task, window, is_source, sinks, ring,
            a, b, p_max)
    first = kernel(*args, 0.0, 0.0)
    if first[0] != OK:
        return first
    c_a, c_b = (first[2], first[3]) if b > a else (0.0, first[1])
    second = kernel(*args, c_a, c_b)
    return first[:8] + (second[8],)
