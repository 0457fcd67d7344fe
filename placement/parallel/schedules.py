"""Pipeline schedules of data-parallel stages: micro-batches in flight (the memory model).

Setting: a batch of ``m`` micro-batches (Piper's ``mbsInBatch``; one micro-batch is one
"sample" of Piper's time per sample) flows through stages ``0 … S−1``. Stage ``i`` has ``d_i``
replicas (``d_i`` divides ``m``); replica ``r`` takes micro-batches ``r, r + d_i, …``, so
``n_i = m / d_i`` of them. A replica spends ``c_i`` per micro-batch (forward and backward,
its boundary transfers included) and, once per batch, ``AR_i`` on the data-parallel weight
synchronisation.

Micro-batches in flight (``y_i``: activations a device of stage ``i`` keeps at its peak; its
memory is ``Σ_v memoryUsageA_v · y_i + memoryUsageB_v``):

* ``gpipe`` — every forward of the batch runs before any backward, so a replica holds all of
  its micro-batches: ``y_i = n_i = m / d_i``.
* ``1f1b`` (PipeDream-Flush) — a stage starts the backward of its oldest micro-batch as soon
  as it returns, and admits a new forward only after each backward. The oldest micro-batch of
  a replica of stage ``i`` comes back after it went through stages ``i … S−1`` and back; until
  then the pipeline downstream keeps admitting one micro-batch per replica, so
  ``S_i = d_i + d_{i+1} + … + d_{S−1}`` micro-batches are in flight in stages ``i …``, spread
  over the ``d_i`` replicas of stage ``i``: ``y_i = ⌈S_i / d_i⌉``. With one replica per stage
  this is ``S − i``. (``y_i ≤ n_i`` always, since ``Σ d ≤ m``.)
* ``piper`` — Piper's own model: the memory of ``1f1b`` (msr-fiddle/piper ``algo.cpp``,
  ``TMPC::memoryUsageA`` comment, line 158, and ``Graph::getTPSForResult``, line 1565:
  ``y = ceildiv(suffixSumOfDataParallelDegrees, d)``), with the objective of largest time per
  sample (no fill or drain).

Time per batch: :mod:`placement.parallel.timing` computes it exactly (the longest path of the
schedule's task graph). No closed form holds in general: with stages of different forward and
backward shares GPipe's critical path runs the forwards at the largest ``F`` and the backwards at
the largest ``B``; 1F1B waits only for round trips, and with data-parallel degrees that do not
divide each other its ``y_i`` micro-batches in flight do not keep the bottleneck busy.
"""

from __future__ import annotations

from typing import Sequence

from placement.errors import InvalidParameterError
from placement.parallel.plan import SCHEDULES


def check_schedule(schedule: str) -> str:
    """``schedule`` when it is one of :data:`SCHEDULES`."""
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        raise InvalidParameterError("schedule", f"must be one of {', '.join(map(repr, SCHEDULES))}, not {schedule!r}")
    return schedule


def uses_suffix(schedule: str) -> bool:
    """Whether micro-batches in flight depend on the degrees of the later stages (``piper``, ``1f1b``)."""
    return schedule != "gpipe"


def in_flight(schedule: str, suffix: int, d: int, microbatches: int) -> int:
    """``y`` of a stage with ``d`` replicas, ``suffix`` = its ``d`` plus those of every later stage."""
    if schedule == "gpipe":
        return microbatches // d
    return -(-suffix // d)


def in_flight_all(schedule: str, degrees: Sequence[int], microbatches: int) -> list[int]:
    """``y_i`` of every stage of a pipeline whose data-parallel degrees are ``degrees`` (in order)."""
    out, suffix = [], sum(degrees)
    for d in degrees:
        out.append(in_flight(schedule, suffix, d, microbatches))
        suffix -= d
    return out


__all__ = ["check_schedule", "in_flight", "in_flight_all", "uses_suffix"]
