"""Exact time per batch of a data- and tensor-parallel pipeline plan under a schedule.

The schedule's time per batch (fill, drain, every wait and the data-parallel all-reduce
included) is the longest path of its task graph; this module evaluates that path by the
max-plus recursion ``start = max(end of the replica's previous task, ends of the task's
inputs)``, ``end = start + length`` over the tasks in a topological order.

Model (shared in meaning with the event simulator, ``placement.simulation.parallel``, which is
the independent check and is not imported here)
-----
* Stages ``0 … S−1`` in pipeline order; with ``chunks = v`` they are virtual stages of ``p = S/v``
  pipeline ranks, stage ``k`` being chunk ``k div p`` of rank ``k mod p`` (Megatron's layout; the
  stages of a rank share ``d``). Without interleaving ``p = S``.
* Micro-batch ``j`` of a batch of ``m`` goes to replica ``j mod d`` of a rank with ``d``
  replicas, which runs ``n = m/d`` of them (its local micro-batches ``l``, global ``l·d + r``).
* Per micro-batch a replica of stage ``k`` runs a forward ``F_k = in_k + φ·C_k + out_k`` and a
  backward ``B_k = out_k + (1 − φ)·C_k + in_k``: ``C_k`` the chosen TMPCs' ``timePerSample``,
  ``in_k`` the activations received over every edge entering the stage
  (``(communicationCost + syncTimeFw[u]) / bandwidth``), ``out_k`` those sent over every edge
  leaving it (``(communicationCost + syncTimeBw[w]) / bandwidth``), each end paying its own side
  inside its own task; ``φ`` = :data:`FORWARD_SHARE` unless given. On an instance with device
  types a stage's ``timePerSample`` are divided by its type's ``speed`` and its transfers and
  all-reduce run at its type's ``bandwidth`` (default the instance's). ``F_k + B_k`` is Piper's
  per-micro-batch time of a replica whatever ``φ``; the time per batch depends on ``φ`` when
  stages differ in their ratio of transfer to compute.
* Inputs: the forward of ``j`` on stage ``k`` waits for the forwards of ``j`` on every stage with
  an edge into ``k``; the backward of ``j`` on ``k`` for its own forward and the backwards of
  ``j`` on every stage ``k`` has an edge into.
* Order of a replica's tasks: ``gpipe`` all forwards then all backwards; ``1f1b`` (and
  ``piper``, whose memory is 1F1B's) ``w = min(y − 1, n)`` warm-up forwards, then one forward and
  one backward in turn, then the remaining backwards, ``y = ⌈(d_k + … + d_{S−1}) / d_k⌉`` the
  micro-batches in flight of :mod:`placement.parallel.schedules`; ``interleaved`` Megatron's
  interleaved 1F1B (``forward_backward_pipelining_with_interleaving``): virtual step ``q`` is
  chunk ``(q mod p·v) div p`` of local micro-batch ``(q div p·v)·p + q mod p`` (backwards with
  the chunks reversed), rank ``ρ`` warms up with ``min(2(p − ρ − 1) + (v − 1)·p, n·v)`` forwards
  (all of them when ``n = p``); ``n`` must be a multiple of ``p``.
* All-reduce, after a replica's last task (its last backward): a ring over the rank's ``d``
  replicas, ``2(d − 1)`` steps of ``β·W / (d·bandwidth)`` each, ``W`` the rank's parameter bytes
  per device (its chunks' ``Σ parameterSize``). Step ``s`` on the link ``r → r + 1`` starts when
  the link is free, both ends have run their last task, and (``s ≥ 1``) step ``s − 1`` into ``r``
  has arrived. ``allreduce="piper"`` (the default: Piper's objective charges
  ``4(d − 1)/d · W / bandwidth`` per batch, msr-fiddle/piper ``algo.cpp`` lines 840–846) takes
  ``β = 2``; ``"ring"`` (PALM's ring, ``2(d − 1)/d · W``) ``β = 1``.
* Time per batch: the latest end of any task or all-reduce step.

Lower bound (used by the search, :mod:`placement.parallel.batch_search`): a replica of stage
``k`` runs its ``n_k`` forwards and backwards one at a time and sends its ``2(d_k − 1)`` ring
steps (each on its own link, one after another, none before its last task), so the batch lasts
at least ``n_k·(F_k + B_k) + 2(d_k − 1)·β·W_k/(d_k·bandwidth) = m·TPS_k`` with ``TPS_k`` Piper's
time per sample (with ``β = 2``). Hence ``T(plan) ≥ m · max_k TPS_k``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from placement.errors import InvalidParameterError, InvalidPlanError, LimitExceededError
from placement.parallel.schedules import in_flight
from placement.parameters import number
from placement.wording import counted

#: forward share of a node's time per sample (the backward is about twice the forward)
FORWARD_SHARE = 1.0 / 3.0
PIPER = "piper"
RING = "ring"
#: all-reduce models: bytes a replica sends per ring step, as a multiple of ``W / d``
ALLREDUCE_MODELS = {PIPER: 2.0, RING: 1.0}
SCHEDULES = ("gpipe", "1f1b", "piper", "interleaved")
#: task graphs up to this many tasks are evaluated in plain Python (no numba compilation)
INTERPRETED_TASKS = 20_000
#: under a deadline, the tasks the longest path times between two readings of the clock: plain Python, compiled
#: (some hundredths of a second each)
SLICE_TASKS = (5_000, 1_000_000)


@dataclass(frozen=True)
class StageTimes:
    """One (virtual) stage per micro-batch on one replica: ``forward`` ``F``, ``backward`` ``B``,
    ``d`` replicas, ``weights`` = its parameter bytes per device over the bandwidth (``W/bandwidth``),
    and the stages it receives from (``upstream``) and sends to (``downstream``)."""

    forward: float
    backward: float
    d: int
    weights: float
    upstream: tuple[int, ...] = ()
    downstream: tuple[int, ...] = ()


def stage_times(instance: Any, plan: Any, *, forward_share: float = FORWARD_SHARE) -> tuple[StageTimes, ...]:
    """The :class:`StageTimes` of every stage of ``plan`` (a :class:`~placement.parallel.plan.ParallelPlan`
    or a sequence of stages with ``nodes``, ``d``, ``t``, ``tmpcs``) on the Piper ``instance``.

    Raises :class:`InvalidPlanError` for a node in no stage or in two, a TMPC the node does not
    have at the stage's ``t``, or an edge from a later stage to an earlier one.
    """
    forward_share = number("forward_share", forward_share, largest=1.0)
    stages = list(getattr(plan, "stages", plan))
    if not stages:
        raise InvalidPlanError("the plan has no stage")
    nodes = {node.id: node for node in instance.nodes}
    stage_of: dict[int, int] = {}
    chosen = {}
    for k, stage in enumerate(stages):
        for v in stage.nodes:
            if v not in nodes or v in stage_of:
                raise InvalidPlanError(f"stage {k}: node {v} is " + ("already in a stage" if v in stage_of
                                                                      else "not a node of the instance"))
            stage_of[v] = k
            wanted = stage.tmpcs.get(v)
            match = [c for c in nodes[v].configurations.get(stage.t, ()) if c.id == wanted]
            if not match:
                raise InvalidPlanError(f"stage {k}: node {v} has no TMPC {wanted!r} for t = {stage.t}")
            chosen[v] = match[0]
    if len(stage_of) != len(nodes):
        raise InvalidPlanError(f"node {next(v for v in nodes if v not in stage_of)} is in no stage")
    count = len(stages)
    receive, send = [0.0] * count, [0.0] * count
    upstream: list[set[int]] = [set() for _ in range(count)]
    downstream: list[set[int]] = [set() for _ in range(count)]
    links = [_device(instance, stage, k)[1] for k, stage in enumerate(stages)]
    for e in instance.edges:
        a, b = stage_of[e.src], stage_of[e.dst]
        if a > b:
            raise InvalidPlanError(f"edge {e.src} -> {e.dst} goes from stage {a} back to stage {b}")
        if a < b:
            send[a] += (e.communication_cost + chosen[e.src].sync_time_bw[e.dst]) / links[a]
            receive[b] += (e.communication_cost + chosen[e.dst].sync_time_fw[e.src]) / links[b]
            downstream[a].add(b)
            upstream[b].add(a)
    out = []
    for k, stage in enumerate(stages):
        speed, bandwidth = _device(instance, stage, k)
        compute = math.fsum(chosen[v].time_per_sample for v in stage.nodes) / speed
        weights = math.fsum(chosen[v].parameter_size for v in stage.nodes) / bandwidth
        out.append(StageTimes(receive[k] + forward_share * compute + send[k],
                              send[k] + (1.0 - forward_share) * compute + receive[k], stage.d, weights,
                              tuple(sorted(upstream[k])), tuple(sorted(downstream[k]))))
    return tuple(out)


def _device(instance: Any, stage: Any, k: int) -> tuple[float, float]:
    """``(speed, bandwidth)`` of the stage's device type (the instance's bandwidth and speed 1 without types)."""
    name = getattr(stage, "device_type", "") or ""
    types = {t.name: t for t in getattr(instance, "device_types", ())}
    if not name and not types:
        return 1.0, instance.bandwidth
    if name not in types:
        raise InvalidPlanError(f"stage {k}: device type {name!r} is not one of the instance's "
                               f"({', '.join(types) or 'none'})")
    kind = types[name]
    return kind.speed, instance.bandwidth if kind.bandwidth is None else kind.bandwidth


def time_per_batch(instance: Any, plan: Any, schedule: str | None = None, *, chunks: int | None = None,
                   microbatches: int | None = None, forward_share: float = FORWARD_SHARE,
                   allreduce: str = PIPER, deadline: float = math.inf) -> float:
    """The exact time per batch of ``plan`` on ``instance`` under ``schedule`` and ``chunks`` (default the
    plan's, else ``1f1b`` and 1); ``microbatches`` default the instance's ``mbsInBatch`` (module docstring);
    ``deadline``: :func:`batch_time`'s."""
    m = instance.microbatches_in_batch if microbatches is None else microbatches
    return batch_time(stage_times(instance, plan, forward_share=forward_share), m,
                      schedule if schedule is not None else getattr(plan, "schedule", "1f1b"),
                      chunks=chunks if chunks is not None else getattr(plan, "chunks", 1), allreduce=allreduce,
                      deadline=deadline)


def batch_time(stages: Sequence[StageTimes], microbatches: int, schedule: str, *, chunks: int = 1,
               allreduce: str = PIPER, deadline: float = math.inf) -> float:
    """The longest path of the task graph of one batch of ``microbatches`` through ``stages`` under
    ``schedule`` (``gpipe``, ``1f1b``, ``piper`` = the 1F1B order, ``interleaved`` with ``chunks ≥ 2``);
    module docstring. Past ``deadline`` (a :func:`time.perf_counter` value, read before each rank's orders and
    each slice of the longest path) it stops with :class:`~placement.errors.LimitExceededError`, saying how
    many of the tasks it had timed; where the compiled kernel would have to be compiled first (seconds that
    cannot be cut short), a deadline runs the path in plain Python instead. A batch of at most one plain slice
    (:data:`SLICE_TASKS`: some hundredths of a second) is laid out whatever the deadline."""
    if isinstance(microbatches, int) and 2 * len(stages) * microbatches <= SLICE_TASKS[0]:   # checked in _graph
        deadline = math.inf
    graph = _graph(stages, microbatches, schedule, chunks, allreduce, deadline)
    ends = _longest_path(*graph[:5], deadline=deadline)
    return _with_allreduce(ends, *graph[5:])


def _on_time(deadline: float, done: int, tasks: int) -> None:
    """Refuse to go on past ``deadline`` (:func:`time.perf_counter`), with ``done`` of the ``tasks`` timed."""
    if time.perf_counter() > deadline:
        raise LimitExceededError(f"the time limit ran out while the batch was laid out ({done:,} of "
                                 f"{tasks:,} tasks timed)", "time_limit")


def _graph(stages: Sequence[StageTimes], m: int, schedule: str, chunks: int, allreduce: str,
           deadline: float = math.inf):
    """Task lengths, per-task inputs (CSR), per-replica orders (CSR) and each rank's ring; past ``deadline``
    (read before each rank's orders), :class:`~placement.errors.LimitExceededError`."""
    if schedule not in SCHEDULES:
        raise InvalidParameterError("schedule", f"must be one of {', '.join(map(repr, SCHEDULES))}, not {schedule!r}")
    if allreduce not in ALLREDUCE_MODELS:
        raise InvalidParameterError("allreduce", f"must be one of {', '.join(map(repr, ALLREDUCE_MODELS))}, "
                                                 f"not {allreduce!r}")
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise InvalidParameterError("microbatches", f"must be a positive integer, not {m!r}")
    count = len(stages)
    if count == 0:
        raise InvalidPlanError("the plan has no stage")
    from placement.simulation.program import check_task_count   # the simulator's memory limit, on demand
    check_task_count(2 * count * m, m)
    interleaving = schedule == "interleaved"
    if interleaving and (not isinstance(chunks, int) or chunks < 2):
        raise InvalidParameterError("chunks", f"must be at least 2 under the interleaved schedule, not {chunks!r}")
    if not interleaving and chunks != 1:
        raise InvalidParameterError("chunks", f"must be 1 under the {schedule} schedule, not {chunks!r}")
    if count % chunks:
        raise InvalidParameterError("chunks", f"must divide the number of stages ({count}), not {chunks}")
    p = count // chunks
    for k, s in enumerate(stages):
        if isinstance(s.d, bool) or not isinstance(s.d, int) or s.d < 1:
            raise InvalidPlanError(f"stage {k}: d must be a positive integer, not {s.d!r}")
        if m % s.d:
            raise InvalidPlanError(f"stage {k}: d = {s.d} does not divide the {counted(m, 'micro-batch')} of a batch")
        if s.d != stages[k % p].d:
            raise InvalidPlanError(f"stage {k} shares rank {k % p} with stage {k % p} but has d = {s.d}, "
                                   f"not {stages[k % p].d}")
    # task ids: forward of global micro-batch j on stage k = k·m + j, backward = (S + k)·m + j
    length = np.concatenate([np.repeat([s.forward for s in stages], m), np.repeat([s.backward for s in stages], m)])
    j = np.arange(m)
    inputs: list[list[np.ndarray]] = [[] for _ in range(2 * count)]   # per (kind, stage): arrays of source ids
    for k, s in enumerate(stages):
        for u in s.upstream:
            inputs[k].append(u * m + j)
        inputs[count + k].append(k * m + j)
        for w in s.downstream:
            inputs[count + k].append((count + w) * m + j)
    in_ptr, in_idx = _csr_by_block(inputs, m)
    orders, last = [], []
    ring = []
    degrees = [s.d for s in stages[:p]]
    for rank in range(p):
        _on_time(deadline, 0, 2 * count * m)
        d = degrees[rank]
        n = m // d
        if interleaving:
            kinds, chunk_of, local = _interleaved(n, p, chunks, rank)
        elif schedule == "gpipe":
            kinds, chunk_of, local = _gpipe(n)
        else:
            kinds, chunk_of, local = _one_f_one_b(n, in_flight("1f1b", sum(degrees[rank:]), d, m) - 1)
        stage = chunk_of * p + rank
        base = np.where(kinds == 0, stage, count + stage) * m
        for r in range(d):
            order = base + local * d + r
            orders.append(order)
            last.append(int(order[-1]))
        if d > 1:
            weights = math.fsum(stages[c * p + rank].weights for c in range(chunks))
            ring.append((len(orders) - d, d, ALLREDUCE_MODELS[allreduce] * weights / d))
    order_ptr = np.zeros(len(orders) + 1, dtype=np.int64)
    order_ptr[1:] = np.cumsum([len(o) for o in orders])
    return length, in_ptr, in_idx, order_ptr, np.concatenate(orders).astype(np.int64), last, ring


def _csr_by_block(inputs: list[list[np.ndarray]], m: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of each task's inputs, ``inputs[b]`` listing arrays (one per source stage) for the ``m`` tasks
    of block ``b``."""
    counts = np.repeat([len(sources) for sources in inputs], m)
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    for b, sources in enumerate(inputs):
        if sources:
            starts = ptr[b * m:(b + 1) * m]
            for q, src in enumerate(sources):
                idx[starts + q] = src
    return ptr, idx


def _gpipe(n: int):
    kinds = np.repeat(np.array([0, 1], dtype=np.int64), n)
    return kinds, np.zeros(2 * n, dtype=np.int64), np.tile(np.arange(n, dtype=np.int64), 2)


def _one_f_one_b(n: int, warmup: int):
    w = min(max(warmup, 0), n)
    steady = n - w
    kinds = np.concatenate([np.zeros(w, dtype=np.int64), np.tile(np.array([0, 1], dtype=np.int64), steady),
                            np.ones(w, dtype=np.int64)])
    local = np.empty(steady * 2, dtype=np.int64)
    local[0::2] = np.arange(w, n)
    local[1::2] = np.arange(steady)
    local = np.concatenate([np.arange(w), local, np.arange(steady, n)]).astype(np.int64)
    return kinds, np.zeros(2 * n, dtype=np.int64), local


def _interleaved(n: int, p: int, v: int, rank: int):
    """Megatron's interleaved 1F1B order of ``rank`` (module docstring) as (kind, chunk, local) arrays."""
    if n % p:
        raise InvalidParameterError("microbatches", f"per replica ({n}) must be a multiple of the {p} pipeline "
                                                    "ranks under the interleaved schedule")
    total, group = n * v, p * v
    warm = total if n == p else min((p - rank - 1) * 2 + (v - 1) * p, total)
    q = np.arange(total)
    chunk = (q % group) // p
    local = (q // group) * p + q % p
    steady = total - warm
    kinds = np.concatenate([np.zeros(warm, dtype=np.int64), np.tile(np.array([0, 1], dtype=np.int64), steady),
                            np.ones(warm, dtype=np.int64)])
    step = np.empty(2 * total, dtype=np.int64)
    step[:warm] = q[:warm]
    step[warm:warm + 2 * steady:2] = q[warm:]
    step[warm + 1:warm + 2 * steady:2] = q[:steady]
    step[warm + 2 * steady:] = q[steady:]
    chunks_out = np.where(kinds == 0, chunk[step], v - 1 - chunk[step])
    return kinds, chunks_out, local[step]


def longest_path(length, succ_ptr, succ_idx, waiting, start, end, stack, state, budget):
    """Time up to ``budget`` more tasks of a DAG: each starts at the latest end of its predecessors (0 without
    any, ``start``) and ends ``length`` later (``end``); ``succ_idx[succ_ptr[t]:succ_ptr[t + 1]]`` are the
    successors of ``t`` and ``waiting[t]`` the number of its predecessors not timed yet (consumed).
    ``stack[:state[0]]`` holds the tasks whose predecessors are all timed and ``state[1]`` counts the tasks
    timed: a call goes on where the last one stopped. The stack empties when every task is timed, or earlier
    where the graph has a cycle (the orders deadlock)."""
    top = state[0]
    done = state[1]
    stop = done + budget
    while top > 0 and done < stop:
        top -= 1
        t = stack[top]
        end[t] = start[t] + length[t]
        done += 1
        for q in range(succ_ptr[t], succ_ptr[t + 1]):
            s = succ_idx[q]
            if end[t] > start[s]:
                start[s] = end[t]
            waiting[s] -= 1
            if waiting[s] == 0:
                stack[top] = s
                top += 1
    state[0] = top
    state[1] = done


def _longest_path(length, in_ptr, in_idx, order_ptr, order_idx, deadline: float = math.inf) -> np.ndarray:
    """The end of every task of the graph whose edges are each task's inputs and each replica's order
    (:func:`longest_path`); past ``deadline``, read between slices of :data:`SLICE_TASKS` tasks,
    :class:`~placement.errors.LimitExceededError`."""
    tasks = length.shape[0]
    firsts = np.zeros(order_idx.shape[0], dtype=bool)
    firsts[order_ptr[:-1]] = True                       # the first task of each replica has no order predecessor
    src = np.concatenate([in_idx, order_idx[:-1][~firsts[1:]]])
    dst = np.concatenate([np.repeat(np.arange(tasks), np.diff(in_ptr)), order_idx[1:][~firsts[1:]]])
    by_source = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(tasks + 1, dtype=np.int64)
    succ_ptr[1:] = np.cumsum(np.bincount(src, minlength=tasks))
    waiting = np.bincount(dst, minlength=tasks).astype(np.int64)
    succ_idx = dst[by_source].astype(np.int64)
    limited = deadline < math.inf
    plain = tasks <= INTERPRETED_TASKS
    if not plain and limited:   # a compilation of some seconds would run past the deadline, whatever it is
        from placement.kernels import is_cached

        plain = not is_cached(_compiled())
    kernel = longest_path if plain else _compiled()
    budget = SLICE_TASKS[0 if plain else 1] if limited else tasks
    ready = np.flatnonzero(waiting == 0)
    stack = np.empty(tasks, dtype=np.int64)
    stack[:ready.shape[0]] = ready
    state = np.array([ready.shape[0], 0], dtype=np.int64)
    start, ends = np.zeros(tasks), np.full(tasks, -1.0)
    while state[0] > 0:
        _on_time(deadline, int(state[1]), tasks)
        kernel(length, succ_ptr, succ_idx, waiting, start, ends, stack, state, budget)
    if state[1] < tasks:
        raise InvalidParameterError("schedule", "the schedule's order deadlocks on this plan")
    return ends


@lru_cache(maxsize=1)
def _compiled():
    from placement.kernels import compile_kernel

    return compile_kernel(longest_path)


def _with_allreduce(ends: np.ndarray, last: list[int], ring: list[tuple[int, int, float]]) -> float:
    """The latest end over the tasks and the all-reduce rings (``ring``: first replica, ``d``, step length).

    Step ``s`` on link ``r`` ends at ``a[s][r] = max(a[s−1][r], a[s−1][r−1], D_r) + step`` with ``D_r`` the
    later of the last tasks of replicas ``r`` and ``r + 1`` and ``a[−1] = −∞``. As ``step ≥ 0``, ``a[s−1][r] ≥
    D_r`` for ``s ≥ 1``, so ``a[s][r]`` is ``step`` added ``s + 1`` times to the largest ``D`` of the links
    ``r − s … r``; after ``2(d − 1) ≥ d − 1`` steps the latest link holds ``step`` added ``2(d − 1)`` times to
    the latest last task. Adding in that order rounds as the step-by-step recursion does (rounding is
    monotone), in ``O(d)`` instead of its ``O(d²)``."""
    latest = float(ends.max())
    for first, d, step in ring:
        arrived = max(float(ends[last[first + r]]) for r in range(d))
        for _ in range(2 * (d - 1)):
            arrived += step
        latest = max(latest, arrived)
    return latest


__all__ = ["ALLREDUCE_MODELS", "FORWARD_SHARE", "PIPER", "RING", "SCHEDULES", "StageTimes", "batch_time",
           "longest_path", "stage_times", "time_per_batch"]
