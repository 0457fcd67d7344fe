"""Independent evaluation of an interleaved plan (``v`` model chunks per device group) in Piper's terms.

Computed from the instance and the plan alone (no solver code). The plan's ``K`` stages are its
chunks in pipeline order; ``S = K / v`` device groups, chunk ``k`` on group ``k mod S``
(Megatron's virtual pipeline layout), every chunk with the same ``d`` and ``t``. Per chunk ``k``,
with its chosen TMPCs:

* ``compute_k = Σ timePerSample`` (times ``time_unit``), ``edges_k`` = Piper's boundary bytes
  (``2·(communicationCost + syncTimeFw[u])`` per edge ``u → v`` entering the chunk,
  ``2·(communicationCost + syncTimeBw[w])`` per edge ``v → w`` leaving it), ``W_k = Σ parameterSize``;
* its time per sample ``TPS_k = (edges_k / d + 4·(d − 1)·W_k / (d·m)) / bandwidth + compute_k / d``
  (Piper's stage formula); a group's time per sample is the sum over its chunks (its devices run
  them all and all-reduce all their weights), and the plan's value is the largest group's;
* memory per device of group ``g``: ``Σ_{k ≡ g} Σ memoryUsageB`` plus the largest, over the steps
  of the group's order (Megatron's interleaved 1F1B, :func:`placement.simulation.parallel_orders.interleaved`,
  with ``n = m/d`` micro-batches per replica), of ``Σ_c held_c · Σ memoryUsageA`` of chunk ``cS + g``,
  ``held_c`` counting the forwards on chunk ``c`` started so far less the backwards there ended.

Violations (each a sentence): not ``interleaved``, an instance with ``deviceTypes`` (the groups are
all alike) or a chunk that names a device type, ``chunks`` below 2 or not dividing the stages,
fewer than 2 groups, a node missing, repeated or unknown, an empty chunk, an edge from a later
chunk to an earlier one, degrees that differ between chunks or are below 1, ``d`` not dividing
``m``, ``m/d`` not a multiple of ``S``, a TMPC the node does not have at ``t``, more than
``devices`` devices (``S·d·t``), a group's memory above ``memory``.
"""

from __future__ import annotations

import math

from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan
from placement.problem.memory_fit import fits_counted
from placement.simulation.parallel_orders import FORWARD, held_walk, interleaved
from placement.verification.parallel import (ParallelEvaluation, StageEvaluation, chosen_tmpc, memory_figures,
                                             pipeline_positions)
from placement.wording import counted


def evaluate_interleaved(instance: PiperInstance, plan: ParallelPlan, *, devices: int | None = None,
                         memory: float | None = None, time_unit: float = 1.0,
                         microbatches: int | None = None) -> ParallelEvaluation:
    """Evaluate the interleaved ``plan`` on ``instance`` with ``devices`` devices of ``memory`` bytes
    (default: the instance's) and ``microbatches`` per batch (``m``, default the instance's
    ``mbsInBatch``); see the module docstring. The order's makespan is the planner's and the
    simulator's to compute."""
    devices = instance.max_devices if devices is None else devices
    memory = instance.max_memory_per_device if memory is None else memory
    m = instance.microbatches_in_batch if microbatches is None else microbatches
    stages, v = plan.stages, plan.chunks
    violations: list[str] = []
    if plan.schedule != "interleaved":
        violations.append(f"the plan is for schedule {plan.schedule!r}, not 'interleaved'")
    if instance.device_types:   # every group alike: the interleaved model has one kind of device
        violations.append("an interleaved plan runs on an instance without deviceTypes; this one has "
                          f"{', '.join(repr(t.name) for t in instance.device_types)}")
    named = sorted({s.device_type for s in stages if s.device_type})
    if named and not instance.device_types:
        violations.append(f"the plan's chunks name device type {named[0]!r}, but the instance has no deviceTypes")
    if v < 2 or not stages or len(stages) % v:
        why = ("be at least 2" if v < 2 else "divide the plan's stages, which are none" if not stages else
               f"divide the plan's {len(stages)} stage{'' if len(stages) == 1 else 's'}")
        violations.append(f"chunks = {v} must {why}")
        return ParallelEvaluation(math.inf, (), 0, tuple(violations))
    groups = len(stages) // v
    degrees = {(s.d, s.t) for s in stages}
    if len(degrees) != 1:
        violations.append(f"every chunk must have the same d and t; the plan has {sorted(degrees)}")
    d, t = stages[0].d, stages[0].t
    if d < 1 or t < 1:
        violations.append(f"degrees d={d}, t={t}; both must be at least 1")
        return ParallelEvaluation(math.inf, (), 0, tuple(violations))
    if groups < 2:
        violations.append(f"{groups} device group; the interleaved schedule needs at least 2")
    if m % d or (m // d) % groups:
        violations.append(f"d={d} must divide the {counted(m, 'micro-batch')} and leave a multiple of the {groups} "
                          "groups per replica")
    used = groups * d * t
    if used > devices:
        violations.append(f"the plan uses {used} devices (S·d·t), more than the {devices} available")

    nodes = {node.id: node for node in instance.nodes}
    chunk_of = pipeline_positions(instance, stages, "chunk", violations)

    into: dict[int, list] = {}
    out_of: dict[int, list] = {}
    for e in instance.edges:
        into.setdefault(e.dst, []).append(e)
        out_of.setdefault(e.src, []).append(e)
    per_chunk = []   # (tps, compute + edges/bw, params, Σ A, Σ B)
    chunk_sizes: list[tuple[list[float], list[float]]] = []   # (A, B) of each node of a chunk
    for k, stage in enumerate(stages):
        members = set(stage.nodes)
        compute, edges, params, mem_a, mem_b = [], [], [], [], []
        for u in stage.nodes:
            if chunk_of.get(u) != k:
                continue
            chosen = chosen_tmpc(nodes[u], stage.t, stage.tmpcs.get(u), f"chunk {k}", violations)
            if chosen is None:
                continue
            compute.append(chosen.time_per_sample)
            params.append(chosen.parameter_size)
            mem_a.append(chosen.memory_usage_a)
            mem_b.append(chosen.memory_usage_b)
            edges.extend(2 * (e.communication_cost + chosen.sync_time_fw[e.src]) for e in into.get(u, ())
                         if e.src not in members)
            edges.extend(2 * (e.communication_cost + chosen.sync_time_bw[e.dst]) for e in out_of.get(u, ())
                         if e.dst not in members)
        extra = [u for u in stage.tmpcs if u not in members]
        if extra:
            violations.append(f"chunk {k} names a TMPC for node {extra[0]}, which it does not hold")
        total_compute, total_edges, total_params = math.fsum(compute) * time_unit, math.fsum(edges), math.fsum(params)
        tps = (total_edges / d + 4 * (d - 1) * total_params / d / m) / instance.bandwidth + total_compute / d
        per_chunk.append((tps, total_compute + total_edges / instance.bandwidth, total_params,
                          math.fsum(mem_a), math.fsum(mem_b)))
        chunk_sizes.append((mem_a, mem_b))

    group_memory, peak_held = [], [0] * len(stages)
    runnable = not (m % d or (m // d) % groups)
    for g in range(groups):
        mine = [per_chunk[c * groups + g] for c in range(v)]
        sizes = [chunk_sizes[c * groups + g] for c in range(v)]
        static = math.fsum(x[4] for x in mine)
        # the activation memory per vector of held counts (a function of them: each vector once)
        activation = {tuple(0 for _ in range(v)): 0.0}
        if runnable:
            held = [0] * v
            for kind, c, _ in interleaved(held_walk(m // d, groups), groups, v, g):   # every vector held
                if kind != FORWARD:
                    held[c] -= 1
                    continue
                held[c] += 1
                peak_held[c * groups + g] = max(peak_held[c * groups + g], held[c])
                key = tuple(held)
                if key not in activation:
                    activation[key] = math.fsum(h * x[3] for h, x in zip(held, mine))
        peak = max(activation.values())
        group_memory.append(static + peak)
        # decided on the sizes as written (placement.problem.memory_fit), for every count vector near the peak
        near = [key for key, here in activation.items() if here >= peak * (1 - 1e-9)]

        def terms(key: tuple[int, ...]) -> list[tuple[float, int]]:
            return [(b, 1) for _, bs in sizes for b in bs] + [(a, h) for h, (as_, _) in zip(key, sizes) for a in as_]

        over = next((key for key in near if not fits_counted(terms(key), memory)), None)
        if over is not None:
            need, have = memory_figures(terms(over), memory)
            violations.append(f"group {g} needs {need} bytes per device, more than the {have} "
                              "available")
    group_tps = [math.fsum(per_chunk[c * groups + g][0] for c in range(v)) for g in range(groups)]
    evaluated = tuple(StageEvaluation(per_chunk[k][0], group_memory[k % groups], peak_held[k], per_chunk[k][1],
                                      4 * (d - 1) * per_chunk[k][2] / d / instance.bandwidth)
                      for k in range(len(stages)))
    return ParallelEvaluation(max(group_tps), evaluated, used, tuple(violations))


__all__ = ["evaluate_interleaved"]
