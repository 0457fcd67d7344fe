"""Independent evaluation of a plan with data- and tensor-parallel stages in Piper's model.

Computed from the instance and the plan alone (no solver code): for every stage ``i`` in
pipeline order, with its chosen TMPCs (msr-fiddle/piper ``algo.cpp``, ``Graph::getTPSForResult``,
lines 1497–1640, whose checks and formulas this mirrors):

* ``compute_i = Σ_v timePerSample_v``; ``edges_i`` = bytes over every edge with exactly one end in
  the stage, ``2·(communicationCost + syncTimeFw[u])`` for an edge ``u -> v`` entering node ``v``
  of the stage, ``2·(communicationCost + syncTimeBw[w])`` for an edge ``v -> w`` leaving it;
  ``resync_i = Σ_v 4·(d − 1)·parameterSize_v / (d·m)``;
* time per sample ``TPS_i = (edges_i / d + resync_i) / bandwidth + compute_i / d`` (with
  ``time_unit``, ``compute`` is first multiplied by it: 1e-3 puts millisecond profiles in
  seconds; Piper adds them unconverted, ``time_unit = 1``);
* micro-batches in flight ``y_i``: ``⌈(d_i + … + d_{S−1}) / d_i⌉`` for ``piper`` and ``1f1b``,
  ``m / d_i`` for ``gpipe``; memory per device ``Σ_v memoryUsageA_v·y_i + memoryUsageB_v``;
* per-replica time of a micro-batch ``c_i = compute_i + edges_i / bandwidth`` and weight
  synchronisation per batch ``AR_i = 4·(d − 1)·Σ_v parameterSize_v / (d·bandwidth)``. The time per
  batch is no closed form of these (docs/piper.md): the schedule's task graph decides it, which the
  planner (:mod:`placement.parallel.timing`) and the simulator (:mod:`placement.simulation.parallel`)
  compute each on their own; the evaluator does not.

Device types (an instance with ``deviceTypes``): each stage names its type; on it ``compute_i`` is
divided by the type's ``speed``, ``bandwidth`` is the type's (default the instance's), the memory
bound is the type's ``memory``, and a CPU type runs ``t = 1`` only; ``Σ d·t`` over the stages of a
type is at most its count (``devices`` then maps type names to counts; default each type's
``count``; an integer bounds the total besides; ``memory`` is not used).

The plan's value is ``max_i TPS_i``. Violations (each a sentence): a node missing, repeated or
unknown; an edge from a later stage to an earlier one; a degree below 1, a ``d`` not dividing
``m``, a node without TMPCs of the stage's ``t`` or a TMPC id it does not have; more devices than
``devices`` (``Σ d·t``; per type with types), ``Σ d`` above ``m``; a stage's memory above ``memory``
(its type's); a device type the instance does not have, none named where it has types, one named
where it has none; ``t > 1`` on a CPU type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from dataclasses import dataclass

from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan
from placement.problem.memory_fit import as_written, decimal_text, fits_counted
from placement.wording import counted


@dataclass(frozen=True)
class StageEvaluation:
    """One stage as the evaluator sees it (module docstring)."""

    time_per_sample: float
    memory: float
    in_flight: int
    per_microbatch: float
    sync: float


@dataclass(frozen=True)
class ParallelEvaluation:
    """``value``: largest stage time per sample; ``ok``: no violation."""

    value: float
    stages: tuple[StageEvaluation, ...]
    devices: int
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def evaluate_parallel(instance: PiperInstance, plan: ParallelPlan, *, devices: int | Mapping[str, int] | None = None,
                      memory: float | None = None, time_unit: float = 1.0, schedule: str | None = None,
                      microbatches: int | None = None) -> ParallelEvaluation:
    """Evaluate ``plan`` on ``instance`` with ``devices`` devices of ``memory`` bytes (default: the
    instance's; with device types, ``devices`` maps type names to counts); see the module docstring.
    ``schedule`` (default the plan's) decides the micro-batches in flight, ``microbatches`` (default
    the instance's ``mbsInBatch``) is ``m``: a plan run under another schedule or batch than it was
    planned for holds other micro-batches. ``Σ d ≤ m`` is a rule of the plan for its own batch
    (Piper's): it is not checked for another ``microbatches``, where replicas may run no micro-batch."""
    types = {t.name: t for t in instance.device_types}
    if types:   # an integer ``devices`` bounds the total on top of each type's count
        counts = dict(devices) if isinstance(devices, Mapping) else {name: t.count for name, t in types.items()}
        devices = sum(counts.values()) if devices is None or isinstance(devices, Mapping) else devices
    else:
        devices = instance.max_devices if devices is None else devices
    memory = instance.max_memory_per_device if memory is None else memory
    m = instance.microbatches_in_batch if microbatches is None else microbatches
    schedule = plan.schedule if schedule is None else schedule
    nodes = {node.id: node for node in instance.nodes}
    violations: list[str] = []
    stage_of = pipeline_positions(instance, plan.stages, "stage", violations)
    used = sum(s.d * s.t for s in plan.stages)
    if types:
        for name in types:
            on_type = sum(s.d * s.t for s in plan.stages if s.device_type == name)
            if on_type > counts.get(name, 0):
                violations.append(f"the plan uses {on_type} devices of type {name!r} (Σ d·t), more than the "
                                  f"{counts.get(name, 0)} available")
    if used > devices:
        violations.append(f"the plan uses {used} devices (Σ d·t), more than the {devices} available")
    if plan.schedule == "interleaved":   # chunks of device groups: evaluate_interleaved's plans
        violations.append(f"the plan is for schedule 'interleaved' with chunks = {plan.chunks}; an interleaved "
                          "plan runs at least 2 model chunks per device group")
    if microbatches is None and sum(s.d for s in plan.stages) > m:   # Piper's rule for the batch planned for
        violations.append(f"the data-parallel degrees sum to {sum(s.d for s in plan.stages)}, more than the "
                          f"{m} micro-batches of a batch")

    into: dict[int, list] = {}
    out_of: dict[int, list] = {}
    for e in instance.edges:
        into.setdefault(e.dst, []).append(e)
        out_of.setdefault(e.src, []).append(e)
    suffix = sum(s.d for s in plan.stages)
    evaluated = []
    for i, stage in enumerate(plan.stages):
        d, t = stage.d, stage.t
        if d < 1 or t < 1:
            violations.append(f"stage {i} has degrees d={d}, t={t}; both must be at least 1")
            return ParallelEvaluation(math.inf, (), used, tuple(violations))
        if m % d:
            violations.append(f"stage {i}: d={d} does not divide the {counted(m, 'micro-batch')} of a batch")
        y = m // d if schedule == "gpipe" else -(-suffix // d)
        suffix -= d
        speed, bandwidth, bound = 1.0, instance.bandwidth, memory
        kind = types.get(stage.device_type)
        if types and kind is None:
            violations.append(f"stage {i} runs on device type {stage.device_type!r}, which the instance does not "
                              f"have (its types: {', '.join(types)})" if stage.device_type else
                              f"stage {i} names no device type (the instance has deviceTypes: {', '.join(types)})")
        elif not types and stage.device_type:
            violations.append(f"stage {i} names device type {stage.device_type!r}, but the instance has no "
                              "deviceTypes")
        elif kind is not None:
            speed, bound = kind.speed, kind.memory
            bandwidth = instance.bandwidth if kind.bandwidth is None else kind.bandwidth
            if kind.cpu and t != 1:
                violations.append(f"stage {i} has t={t} on CPU type {kind.name!r}; a CPU runs t=1 only")
        members = set(stage.nodes)
        compute, edges, params, mem_terms = [], [], [], []
        for v in stage.nodes:
            if v not in nodes or stage_of.get(v) != i:
                continue
            chosen = chosen_tmpc(nodes[v], t, stage.tmpcs.get(v), f"stage {i}", violations)
            if chosen is None:
                continue
            compute.append(chosen.time_per_sample)
            params.append(chosen.parameter_size)
            mem_terms.extend(((chosen.memory_usage_a, y), (chosen.memory_usage_b, 1)))
            for e in into.get(v, ()):
                if e.src not in members:
                    edges.append(2 * (e.communication_cost + chosen.sync_time_fw[e.src]))
            for e in out_of.get(v, ()):
                if e.dst not in members:
                    edges.append(2 * (e.communication_cost + chosen.sync_time_bw[e.dst]))
        for v in stage.tmpcs:
            if v not in members:
                violations.append(f"stage {i} names a TMPC for node {v}, which it does not hold")
        total_compute = math.fsum(compute) * time_unit / speed
        total_edges = math.fsum(edges)
        total_params = math.fsum(params)
        resync = 4 * (d - 1) * total_params / d / m
        tps = (total_edges / d + resync) / bandwidth + total_compute / d
        used_memory = math.fsum(a * k for a, k in mem_terms)
        if not fits_counted(mem_terms, bound):   # on the sizes as written (placement.problem.memory_fit)
            need, have = memory_figures(mem_terms, bound)
            violations.append(f"stage {i} needs {need} bytes per device (y={y} micro-batches in "
                              f"flight), more than the {have} available")
        evaluated.append(StageEvaluation(tps, used_memory, y, total_compute + total_edges / bandwidth,
                                         4 * (d - 1) * total_params / d / bandwidth))
    value = max((s.time_per_sample for s in evaluated), default=math.inf)
    return ParallelEvaluation(value, tuple(evaluated), used, tuple(violations))


def pipeline_positions(instance: PiperInstance, stages, word: str, violations: list[str]) -> dict[int, int]:
    """Node id -> the index of its ``word`` (``stage`` or ``chunk``) in ``stages``, in pipeline order; every
    node in exactly one, none empty, and no edge going back to an earlier one, else a violation each."""
    nodes = dict.fromkeys(node.id for node in instance.nodes)   # in the instance's order
    places: dict[int, list[int]] = {}
    for i, stage in enumerate(stages):
        if not stage.nodes:
            violations.append(f"{word} {i} holds no node")
        for v in stage.nodes:
            if v not in nodes:
                violations.append(f"{word} {i} holds node {v}, which the instance does not have")
            else:
                places.setdefault(v, []).append(i)
    position = {v: where[0] for v, where in places.items()}
    for v in nodes:   # listed twice in one stage too, as an ordinary plan's check says it
        where = places.get(v, ())
        if len(where) > 1:
            shown = ", ".join(map(str, where[:10])) + (f", and {len(where) - 10:,} more" if len(where) > 10 else "")
            violations.append(f"node {v} is placed {len(where)} times ({word}s {shown})")
        elif not where:
            violations.append(f"node {v} is in no {word}")
    for e in instance.edges:
        if e.src in position and e.dst in position and position[e.src] > position[e.dst]:
            violations.append(f"edge {e.src} -> {e.dst} goes from {word} {position[e.src]} back to {word} "
                              f"{position[e.dst]}")
    return position


def memory_figures(terms: list[tuple[float, int]], bound: float) -> tuple[str, str]:
    """A memory need (``Σ size · count`` over ``terms``) above ``bound``, and the bound, in six digits
    where they tell the two apart, else the need as written and the bound as given (0.8 for 0.7 + 0.1
    beside a bound of 0.7999999999999999)."""
    need = math.fsum(a * k for a, k in terms)
    short = f"{need:.6g}", f"{bound:.6g}"
    if short[0] != short[1]:
        return short
    return decimal_text(sum((as_written(a) * k for a, k in terms), Fraction(0))), repr(bound)


def chosen_tmpc(node, t: int, name: str | None, where: str, violations: list[str]):
    """The TMPC ``name`` of ``node`` at tensor-parallel degree ``t``, or ``None`` with a violation that
    names ``where`` (e.g. ``stage 2``)."""
    options = node.configurations.get(t)
    if not options:
        violations.append(f"{where}: node {node.id} has no TMPC for tensor-parallel degree t={t}")
        return None
    if name is None:
        violations.append(f"{where}: no TMPC chosen for node {node.id}")
        return None
    for c in options:
        if c.id == name:
            return c
    violations.append(f"{where}: node {node.id} has no TMPC {name!r} for t={t}")
    return None


__all__ = ["ParallelEvaluation", "StageEvaluation", "chosen_tmpc", "evaluate_parallel", "pipeline_positions"]
