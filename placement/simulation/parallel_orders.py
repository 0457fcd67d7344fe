"""The order in which one data-parallel replica of a pipeline rank runs its tasks in one batch.

Micro-batch ``j`` (``0 ≤ j < m``) of a batch goes to replica ``j mod d`` of every rank with
``d`` replicas, so each replica runs ``n = m / d`` micro-batches, its *local* micro-batches
``l = 0 … n−1`` (global ``l·d + r`` on replica ``r``). A task is ``(kind, chunk, l)``: the
forward (``F``) or backward (``B``) of local micro-batch ``l`` through the rank's model
chunk ``chunk``. A replica runs its tasks in exactly this order, each as soon as the
replica is free and the task's inputs have arrived.

* ``gpipe`` — all forwards, then all backwards (in micro-batch order), then the flush.
* ``1f1b`` — PipeDream-Flush / Megatron's 1F1B: ``w = min(y − 1, n)`` warm-up forwards,
  then one forward and one backward in turn, then the remaining backwards; a replica holds
  at most ``y`` micro-batches. ``y = ⌈(d_i + d_{i+1} + … + d_{S−1}) / d_i⌉`` for stage ``i``
  (Piper's micro-batches in flight, msr-fiddle/piper ``algo.cpp``, commit d7fc8cf, line 1565), which is
  ``S − i`` when every stage has the same ``d``: over one round trip from stage ``i`` to the
  last stage and back, the replicas of the later stages pass ``Σ d_k`` micro-batches, which
  stage ``i``'s ``d_i`` replicas must have started.
* ``piper`` — Piper's model, whose memory is 1F1B's: the ``1f1b`` order.
* ``interleaved`` — Megatron's interleaved 1F1B with ``v`` model chunks per rank
  (``megatron/core/pipeline_parallel/schedules.py``,
  ``forward_backward_pipelining_with_interleaving``): the ``n·v`` forwards run in groups of
  ``p`` micro-batches, chunk by chunk (virtual step ``k`` is chunk ``(k mod p·v) div p`` of
  micro-batch ``(k div p·v)·p + k mod p``), backwards likewise with the chunks reversed; rank
  ``ρ`` runs ``min((p − ρ − 1)·2 + (v − 1)·p, n·v)`` warm-up forwards (all ``n·v`` when
  ``n = p``), then one forward and one backward in turn, then the remaining backwards.
  Megatron requires ``n`` to be a multiple of ``p``, and so does this order.
"""

from __future__ import annotations

from placement.errors import InvalidParameterError

FORWARD = "F"
BACKWARD = "B"
GPIPE = "gpipe"
ONE_F_ONE_B = "1f1b"
INTERLEAVED = "interleaved"
PIPER_SCHEDULE = "piper"
PARALLEL_SCHEDULES = (GPIPE, ONE_F_ONE_B, PIPER_SCHEDULE, INTERLEAVED)

Task = tuple[str, int, int]   # (kind, chunk, local micro-batch)


def in_flight_limit(degrees: list[int], stage: int) -> int:
    """Piper's ``y`` of ``stage``: ``⌈(d_stage + … + d_last) / d_stage⌉``, ``degrees`` in pipeline order."""
    return -(-sum(degrees[stage:]) // degrees[stage])


def one_f_one_b(local: int, warmup: int) -> list[Task]:
    """``warmup`` forwards, then forward and backward in turn, then the remaining backwards (one chunk)."""
    warm = min(warmup, local)
    order: list[Task] = [(FORWARD, 0, l) for l in range(warm)]
    for l in range(local):
        if warm + l < local:
            order.append((FORWARD, 0, warm + l))
        order.append((BACKWARD, 0, l))
    return order


def gpipe(local: int) -> list[Task]:
    """All forwards, then all backwards."""
    return [(FORWARD, 0, l) for l in range(local)] + [(BACKWARD, 0, l) for l in range(local)]


def interleaved(local: int, ranks: int, chunks: int, rank: int) -> list[Task]:
    """Megatron's interleaved 1F1B order of ``rank`` (see the module docstring)."""
    if local % ranks:
        raise InvalidParameterError("microbatches", f"per replica ({local}) must be a multiple of the {ranks} "
                                                    "pipeline ranks under the interleaved schedule")
    total = local * chunks
    group = ranks * chunks
    if local == ranks:
        warm = total
    else:
        warm = min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, total)

    def step(k: int, forward: bool) -> Task:
        chunk = (k % group) // ranks
        l = (k // group) * ranks + k % ranks
        if forward:
            return (FORWARD, chunk, l)
        return (BACKWARD, chunks - 1 - chunk, l)

    order = [step(k, True) for k in range(warm)]
    for k in range(total - warm):
        order.append(step(warm + k, True))
        order.append(step(k, False))
    order.extend(step(k, False) for k in range(total - warm, total))
    return order


def held_walk(local: int, ranks: int) -> int:
    """The micro-batches per replica whose :func:`interleaved` order shows, after its forwards, every vector of
    micro-batches held per chunk that the order of ``local`` shows, first seen in the same order: ``local``, or
    ``3·ranks`` where that is fewer and ``local`` a multiple of ``ranks`` (any other ``local`` stays, for the order
    to refuse it). For ``n ≥ 2p`` the warm-up ``W = min(2(p − ρ − 1) + (v − 1)p, n·v)`` is
    ``2(p − ρ − 1) + (v − 1)p < 2pv`` whatever ``n``, and no step depends on ``n``: the order of ``3p`` is a
    prefix of that of ``n`` but for its cool-down, which only ends backwards. In the steady part the vector after
    the forward of step ``W + k`` (forwards ``0 … W + k`` begun, backwards ``0 … k − 1`` ended) repeats with
    period ``p·v`` in ``k`` (every ``p·v`` steps each chunk begins and ends ``p`` more), and ``3p·v − W ≥ p·v``
    steps of ``3p`` show every phase. Memory peaks and in-flight counts of any ``n`` thus take ``O(p·v)``
    steps."""
    return local if local % ranks else min(local, 3 * ranks)


__all__ = ["BACKWARD", "FORWARD", "GPIPE", "INTERLEAVED", "ONE_F_ONE_B", "PARALLEL_SCHEDULES", "PIPER_SCHEDULE",
           "gpipe", "held_walk", "in_flight_limit", "interleaved", "one_f_one_b"]
