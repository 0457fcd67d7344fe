"""The communication ledger of a data- and tensor-parallel plan, checked against Piper's time per sample.

Verification code: it imports nothing from :mod:`placement.parallel`'s planners or from the evaluator
(:mod:`.parallel`), and recomputes every figure from the :class:`PiperInstance` and the plan.

Model implemented
-----------------
DESIGN.md §4's ledger for replicated and split layers, in the terms of Piper's model (docs/piper.md).
A plan's stage ``i`` (a model chunk of an interleaved plan) holds its nodes on ``d_i`` replicas of
``t_i`` devices each, every node with its chosen TMPC. Per sample (one micro-batch through the stage):

* **activations** ``F``: every edge ``u → v`` from stage ``i`` to stage ``j`` carries its
  ``communicationCost`` bytes forward over the link ``i → j``;
* **errors** ``E``: the same bytes come back over ``j → i`` in the backward pass;
* **tensor-parallel resharding** (a stage's devices split a layer, its TMPC says how many bytes
  the split moves at the boundary): ``syncTimeFw[u]`` of ``v``'s TMPC at the consuming stage, and
  ``syncTimeBw[v]`` of ``u``'s TMPC at the producing stage, each in the forward and again in the
  backward pass;
* **weight gradients** ``dW`` of a replicated stage (``d_i > 1``): Piper's all-reduce, ``4·(d_i − 1)/d_i``
  times the stage's ``Σ parameterSize`` per batch, ``1/m`` of it per sample.

A stage's boundary bytes are shared by its ``d_i`` replicas (each runs ``1/d_i`` of the samples), so
one of its devices moves ``B_i = (F + E + resharding of its boundary) / d_i + dW_i / m`` bytes per
sample, in ``B_i / bandwidth`` seconds (its device type's bandwidth, else the instance's).

**Agreement.** With its compute ``Σ timePerSample / (d_i · speed)``, a stage's ledger time per sample
is ``B_i / bandwidth + compute``, which must equal the time per sample the evaluator charged it to
within a relative ``1e-9``; a stage that disagrees is named with both figures. The per-link table
(bytes per sample over each ordered pair of stages, activations and errors) is what the plan
moves between devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from placement.io.piper import PiperInstance

#: relative tolerance between the ledger's time per sample of a stage and the evaluator's
AGREEMENT = 1e-9


@dataclass(frozen=True)
class StageTraffic:
    """One stage's bytes per sample (whole stage, all replicas) and what one of its devices spends."""

    stage: int
    d: int
    t: int
    activations_in: float      # F received from earlier stages
    activations_out: float     # F sent to later stages
    errors_in: float           # E received from later stages
    errors_out: float          # E sent to earlier stages
    resharding: float          # tensor-parallel sync bytes at the stage's boundary, forward and backward
    gradients_per_batch: float  # dW: Piper's all-reduce bytes of one replica per batch
    bytes_per_device: float    # B_i: bytes one device moves per sample
    communication: float       # B_i / bandwidth
    compute: float             # Σ timePerSample / (d · speed)

    @property
    def time_per_sample(self) -> float:
        return self.communication + self.compute


@dataclass(frozen=True)
class ParallelLedger:
    """Per stage its traffic, per link ``(i, j)`` the bytes per sample from stage ``i`` to stage ``j``,
    and the stages whose ledger time per sample disagrees with the evaluator's (empty: all agree)."""

    stages: tuple[StageTraffic, ...]
    links: dict[tuple[int, int], float]
    disagreements: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return not self.disagreements

    @property
    def verdict(self) -> str:
        if self.agrees:
            return (f"agrees: every stage's bytes over its bandwidth plus its compute are the time per sample "
                    f"charged ({len(self.stages)} stage{'s' if len(self.stages) != 1 else ''})")
        return f"disagrees on {len(self.disagreements)} stage(s): {self.disagreements[0]}"


def parallel_ledger(instance: PiperInstance, plan, charged: Sequence[float]) -> ParallelLedger:
    """The ledger of a valid ``plan`` (its stages in pipeline order, each with ``nodes``, ``d``, ``t``,
    ``tmpcs`` and ``device_type``) on ``instance``, checked against ``charged``, the evaluator's time per
    sample of each stage (module docstring)."""
    stage_of = {v: i for i, stage in enumerate(plan.stages) for v in stage.nodes}
    nodes = {node.id: node for node in instance.nodes}
    types = {kind.name: kind for kind in instance.device_types}
    m = instance.microbatches_in_batch

    def chosen(v: int):
        stage = plan.stages[stage_of[v]]
        return next(c for c in nodes[v].configurations[stage.t] if c.id == stage.tmpcs[v])

    count = len(plan.stages)
    f_in, f_out = [0.0] * count, [0.0] * count
    sync = [0.0] * count
    links: dict[tuple[int, int], float] = {}
    for e in instance.edges:
        i, j = stage_of[e.src], stage_of[e.dst]
        if i == j:
            continue
        f_out[i] += e.communication_cost
        f_in[j] += e.communication_cost
        sync[j] += 2 * chosen(e.dst).sync_time_fw[e.src]
        sync[i] += 2 * chosen(e.src).sync_time_bw[e.dst]
        links[(i, j)] = links.get((i, j), 0.0) + e.communication_cost   # F forward
        links[(j, i)] = links.get((j, i), 0.0) + e.communication_cost   # E backward
    rows, disagreements = [], []
    for i, stage in enumerate(plan.stages):
        kind = types.get(stage.device_type)
        speed = 1.0 if kind is None else kind.speed
        bandwidth = instance.bandwidth if kind is None or kind.bandwidth is None else kind.bandwidth
        weights = math.fsum(chosen(v).parameter_size for v in stage.nodes)
        gradients = 4 * (stage.d - 1) * weights / stage.d
        boundary = 2 * (f_in[i] + f_out[i]) + sync[i]
        per_device = boundary / stage.d + gradients / m
        compute = math.fsum(chosen(v).time_per_sample for v in stage.nodes) / speed / stage.d
        row = StageTraffic(i, stage.d, stage.t, f_in[i], f_out[i], f_out[i], f_in[i], sync[i], gradients,
                           per_device, per_device / bandwidth, compute)
        rows.append(row)
        if not math.isclose(row.time_per_sample, charged[i], rel_tol=AGREEMENT, abs_tol=1e-300):
            disagreements.append(f"stage {i}: the ledger's {row.time_per_sample!r} (communication "
                                 f"{row.communication!r} + compute {row.compute!r}) against {charged[i]!r} charged")
    return ParallelLedger(tuple(rows), links, tuple(disagreements))


__all__ = ["AGREEMENT", "ParallelLedger", "StageTraffic", "parallel_ledger"]
