"""What each device of a data- and tensor-parallel pipeline does per micro-batch, from a Piper instance.

A plan is a sequence of stages in pipeline order; stage ``k`` holds a set of nodes of a
:class:`~placement.io.piper.PiperInstance`, runs on ``d_k · t_k`` devices (``d_k`` data-parallel
replicas of ``t_k`` tensor-parallel devices each) and runs every node in one of the node's
TMPCs for ``t_k``. Under an interleaved schedule with ``v`` chunks the ``S = p·v`` stages share
``p`` device groups: stage ``k`` is model chunk ``k // p`` of pipeline rank ``k mod p``
(Megatron's virtual pipeline layout), so the stages of one rank must agree on ``d``, ``t``
and device type; otherwise ``p = S`` and every stage has its own devices.

Per micro-batch, one replica of stage ``k`` (its ``t`` devices in lockstep: a TMPC's
``timePerSample`` is the time of the node on its ``t`` devices, tensor-parallel collectives
inside the node included) runs

* a forward task ``F_k = in_k + φ·C_k + out_k`` and
* a backward task ``B_k = out_k + (1 − φ)·C_k + in_k``,

where ``C_k`` is the sum of the chosen TMPCs' ``timePerSample``, ``φ`` the forward share
(Piper gives only the sum; ``F_k + B_k`` does not depend on ``φ``), ``in_k`` the receive of
the activations of every edge ``u → v`` entering the stage, ``(communicationCost +
syncTimeFw[u] of v's TMPC) / bandwidth``, and ``out_k`` the send of every edge ``v → w``
leaving it, ``(communicationCost + syncTimeBw[w] of v's TMPC) / bandwidth``; the backward
moves the gradients of the same edges the other way at the same cost. Each end of an edge
pays its own side on its own devices, inside its task (a blocking point-to-point transfer on
the link of the instance's bandwidth): ``F_k + B_k = C_k + E_k / bandwidth`` with Piper's
``E_k = Σ 2·(communicationCost + sync)`` over the stage's crossing edges (msr-fiddle/piper
``algo.cpp``, commit d7fc8cf, ``Graph::getTPSForResult``, lines 1604–1635). Times are added as
the instance gives them (``gnmt.json`` and ``resnet.json`` give milliseconds of compute and
bytes whose quotient by the bandwidth is seconds, and Piper adds them as they are);
``unit_scale`` scales every ``timePerSample`` (``1e-3`` turns those milliseconds into seconds).
On an instance with device types, a stage's ``timePerSample`` are divided by its type's
``speed`` and its transfers and all-reduce steps run at its type's ``bandwidth`` (default the
instance's), as the evaluator reads them.

Memory per device: the TMPCs' ``memoryUsageB`` (weights and optimizer state) resident, plus
``A_k = Σ memoryUsageA`` for every micro-batch whose activations the device holds (from the
start of its forward to the end of its backward there). The TMPC values are per device.

Data-parallel gradient synchronisation: at the end of the batch the ``d`` replicas of a rank
all-reduce their parameters (``W = Σ parameterSize`` of the rank's TMPCs, per device: each
of the ``t`` tensor-parallel shards runs its own ring over the ``d`` replicas, in parallel and
alike) with a ring: ``2(d − 1)`` steps, in each of which every replica sends ``W/d`` bytes to
the next on the ring, ``2(d − 1)/d · W / bandwidth`` in all — PALM's all-reduce (Fang et al.
2024; fangjh21/PALM ``hardware.py``, ``Hardware.collective_comm``, commit beb5a3e: ``P − 1``
reduce-scatter and ``P − 1`` all-gather rounds of ``size/P`` to the next device, analytically
``2(P − 1)/P · size / bandwidth``). ``allreduce="piper"`` doubles the bytes of every
step, giving the ``4(d − 1)/d · W`` of Piper's objective (``algo.cpp`` lines 840–846, which
follows PipeDream's planner).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterable

from placement.errors import InvalidParameterError, InvalidPlanError
from placement.io.piper import TMPC, PiperInstance
from placement.wording import counted

RING = "ring"
PIPER = "piper"
ALLREDUCE_MODELS = (RING, PIPER)
#: bytes each replica sends per ring step, as a multiple of ``W / d``
STEP_BYTES = {RING: 1.0, PIPER: 2.0}


@dataclass(frozen=True)
class StageCosts:
    """Per micro-batch and per replica: the lengths of a stage's tasks and its memory (see module)."""

    index: int
    rank: int                 # the device group (pipeline rank) the stage runs on
    chunk: int                # its model chunk on that rank (0 without interleaving)
    d: int
    t: int
    device_type: str
    compute: float            # C: Σ timePerSample · unit_scale
    receive: float            # in: activations in (forward) = gradients out (backward)
    send: float               # out: activations out (forward) = gradients in (backward)
    forward: float            # F = in + φ·C + out
    backward: float           # B = out + (1 − φ)·C + in
    parameter_bytes: float    # W: Σ parameterSize (per device)
    static_memory: float      # Σ memoryUsageB (per device)
    activation_memory: float  # Σ memoryUsageA per micro-batch held (per device)
    upstream: tuple[int, ...] = field(default=())    # stages with an edge into this one
    downstream: tuple[int, ...] = field(default=())  # stages this one has an edge into
    bandwidth: float = 0.0    # bytes per second of its transfers and all-reduce (its device type's)


@dataclass(frozen=True)
class Layout:
    """A validated plan: per-stage costs, ranks ``p``, chunks ``v`` and the bandwidth."""

    stages: tuple[StageCosts, ...]
    ranks: int
    chunks: int
    bandwidth: float
    microbatches: int

    def rank_stages(self, rank: int) -> list[StageCosts]:
        """The stages of ``rank``, by chunk."""
        return [s for s in self.stages if s.rank == rank]


def stage_specs(plan: Any) -> tuple[SimpleNamespace, ...]:
    """The stages of ``plan``, each read into a namespace ``nodes`` (tuple), ``d``, ``t``, ``tmpcs`` (dict)
    and ``device_type``: ``plan`` is a :class:`placement.parallel.plan.ParallelPlan` (or any object
    whose ``stages`` is a sequence) or a sequence of stages, each a
    :class:`placement.parallel.plan.ParallelStage` or any object with those attributes (``device_type``
    optional). Read by attribute, so the simulator loads no planner code."""
    items = getattr(plan, "stages", plan)
    try:
        items = list(items)
    except TypeError:
        raise InvalidPlanError(f"a plan is a sequence of stages, not {type(plan).__name__}") from None
    specs = []
    for k, item in enumerate(items):
        try:
            specs.append(SimpleNamespace(nodes=tuple(item.nodes), d=item.d, t=item.t, tmpcs=dict(item.tmpcs),
                                         device_type=str(getattr(item, "device_type", "") or "")))
        except (AttributeError, TypeError, ValueError):
            raise InvalidPlanError(f"stage {k}: needs nodes, d, t and tmpcs") from None
    return tuple(specs)


def build_layout(instance: PiperInstance, stages: Iterable[SimpleNamespace], chunks: int, microbatches: int,
                 forward_share: float, unit_scale: float) -> Layout:
    """Check the plan against ``instance`` and compute every stage's :class:`StageCosts`.

    Raises :class:`InvalidPlanError` for a plan that is not a pipeline of the instance (a node
    missing, repeated or unknown, a degree or TMPC the node does not have, an edge from a later
    stage to an earlier one, ``d`` not dividing the micro-batches) and
    :class:`InvalidParameterError` for a ``chunks`` the plan cannot be laid out with.
    """
    stages = tuple(stages)
    if not stages:
        raise InvalidPlanError("the plan has no stage")
    n = len(stages)
    if n % chunks:
        raise InvalidParameterError("chunks", f"must divide the number of stages ({n}), not {chunks}")
    ranks = n // chunks
    nodes = {node.id: node for node in instance.nodes}
    stage_of: dict[int, int] = {}
    for k, spec in enumerate(stages):
        for name, value in (("d", spec.d), ("t", spec.t)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidPlanError(f"stage {k}: {name} must be a positive integer, not {value!r}")
        if microbatches % spec.d:
            raise InvalidPlanError(f"stage {k}: d = {spec.d} does not divide the "
                                   f"{counted(microbatches, 'micro-batch')} of a batch")
        if not spec.nodes:
            raise InvalidPlanError(f"stage {k}: no node")
        for v in spec.nodes:
            if v not in nodes:
                raise InvalidPlanError(f"stage {k}: node {v} is not a node of the instance")
            if v in stage_of:
                raise InvalidPlanError(f"stage {k}: node {v} is already in stage {stage_of[v]}")
            stage_of[v] = k
        if set(spec.tmpcs) != set(spec.nodes):
            raise InvalidPlanError(f"stage {k}: tmpcs must name one TMPC for each of its nodes and no other")
    missing = [v for v in nodes if v not in stage_of]
    if missing:
        raise InvalidPlanError(f"node {missing[0]} is in no stage ({counted(len(missing), 'node')} missing)")
    for e in instance.edges:
        if stage_of[e.src] > stage_of[e.dst]:
            raise InvalidPlanError(f"edge {e.src} -> {e.dst} goes from stage {stage_of[e.src]} back to stage "
                                   f"{stage_of[e.dst]}")
    for k, spec in enumerate(stages):
        first = stages[k % ranks]
        if (spec.d, spec.t, spec.device_type) != (first.d, first.t, first.device_type):
            raise InvalidPlanError(f"stage {k} shares the devices of stage {k % ranks} (chunks = {chunks}) but "
                                   f"has d = {spec.d}, t = {spec.t}, type {spec.device_type!r} against d = "
                                   f"{first.d}, t = {first.t}, type {first.device_type!r}")

    chosen = {v: _tmpc(nodes[v], stages[k], k) for v, k in stage_of.items()}
    speed, link = zip(*(_device(instance, spec, k) for k, spec in enumerate(stages)))
    receive = [0.0] * n
    send = [0.0] * n
    upstream: list[set[int]] = [set() for _ in range(n)]
    downstream: list[set[int]] = [set() for _ in range(n)]
    for e in instance.edges:
        a, b = stage_of[e.src], stage_of[e.dst]
        if a == b:
            continue
        send[a] += (e.communication_cost + chosen[e.src].sync_time_bw[e.dst]) / link[a]
        receive[b] += (e.communication_cost + chosen[e.dst].sync_time_fw[e.src]) / link[b]
        downstream[a].add(b)
        upstream[b].add(a)
    costs = []
    for k, spec in enumerate(stages):
        tmpcs = [chosen[v] for v in spec.nodes]
        compute = math.fsum(c.time_per_sample for c in tmpcs) * unit_scale / speed[k]
        costs.append(StageCosts(
            index=k, rank=k % ranks, chunk=k // ranks, d=spec.d, t=spec.t, device_type=spec.device_type,
            compute=compute, receive=receive[k], send=send[k],
            forward=receive[k] + forward_share * compute + send[k],
            backward=send[k] + (1.0 - forward_share) * compute + receive[k],
            parameter_bytes=math.fsum(c.parameter_size for c in tmpcs),
            static_memory=math.fsum(c.memory_usage_b for c in tmpcs),
            activation_memory=math.fsum(c.memory_usage_a for c in tmpcs),
            upstream=tuple(sorted(upstream[k])), downstream=tuple(sorted(downstream[k])), bandwidth=link[k]))
    return Layout(tuple(costs), ranks, chunks, instance.bandwidth, microbatches)


def ring_step_time(layout: Layout, rank: int, allreduce: str) -> float:
    """Length of one of the ``2(d − 1)`` steps of the rank's ring all-reduce: ``W/d`` bytes (twice
    that for ``allreduce="piper"``) over the bandwidth, ``W`` summed over the rank's chunks."""
    stages = layout.rank_stages(rank)
    d = stages[0].d
    weights = math.fsum(s.parameter_bytes for s in stages)
    return STEP_BYTES[allreduce] * weights / d / stages[0].bandwidth


def _device(instance: PiperInstance, spec: SimpleNamespace, k: int) -> tuple[float, float]:
    """``(speed, bandwidth)`` of the stage's device type: ``timePerSample`` is divided by the speed, every
    transfer and all-reduce step of the stage runs at the bandwidth (the instance's, speed 1, without types)."""
    types = {t.name: t for t in getattr(instance, "device_types", ())}
    if not types and not spec.device_type:
        return 1.0, instance.bandwidth
    if spec.device_type not in types:
        raise InvalidPlanError(f"stage {k}: device type {spec.device_type!r} is not one of the instance's "
                               f"({', '.join(types) or 'none'})")
    kind = types[spec.device_type]
    return kind.speed, instance.bandwidth if kind.bandwidth is None else kind.bandwidth


def _tmpc(node, spec: SimpleNamespace, k: int) -> TMPC:
    options = node.configurations.get(spec.t)
    if options is None:
        raise InvalidPlanError(f"stage {k}: node {node.id} has no TMPC for t = {spec.t}")
    wanted = spec.tmpcs[node.id]
    for tmpc in options:
        if tmpc.id == wanted:
            return tmpc
    raise InvalidPlanError(f"stage {k}: node {node.id} has no TMPC {wanted!r} for t = {spec.t}")


__all__ = ["ALLREDUCE_MODELS", "PIPER", "RING", "Layout", "StageCosts", "build_layout",
           "ring_step_time", "stage_specs"]
