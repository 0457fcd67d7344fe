"""Exhaustive search over plans with data- and tensor-parallel stages: the oracle for tiny Piper instances.

Every plan is enumerated: every ordered partition of the nodes into stages with no edge from a
later stage to an earlier one (the first stage is a non-empty predecessor-closed subset of the
nodes, the rest recursively), every tensor-parallel degree ``t`` every node of the stage has
TMPCs for, every data-parallel degree ``d`` dividing ``m`` with ``Σ d·t ≤ devices`` and
``Σ d ≤ m``, and every TMPC per node; with device types, every type per stage (``t = 1`` on a
CPU type) and ``Σ d·t`` per type within its count. Each plan is judged by the independent evaluator
(:func:`placement.verification.parallel.evaluate_parallel`) for the schedule's memory
model; the least value among plans without violations is the optimum (``inf`` if none).
No pruning: the search is for instances of a handful of nodes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

from placement.errors import LimitExceededError
from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.simulation.parallel import simulate_parallel
from placement.verification.parallel import evaluate_parallel

MAX_NODES = 6


def brute_force_parallel(instance: PiperInstance, *, devices: int | Mapping[str, int] | None = None,
                         memory: float | None = None, schedule: str = "piper",
                         objective: str = "throughput",
                         stages: int | None = None) -> tuple[float, ParallelPlan | None]:
    """The least largest stage time per sample over every plan, and a plan attaining it (``inf, None``
    when no plan fits). With device types, ``devices`` maps type names to counts (default each
    type's count). ``objective="time-per-batch"``: the least time per batch instead, each plan's
    simulated by :func:`placement.simulation.parallel.simulate_parallel` (Piper's all-reduce).
    ``stages``: over the plans of exactly that many stages only."""
    if len(instance.nodes) > MAX_NODES:
        raise LimitExceededError(f"brute force enumerates plans of at most {MAX_NODES} nodes, "
                                 f"not {len(instance.nodes)}")
    if instance.device_types:
        counts = {t.name: t.count for t in instance.device_types} if devices is None else dict(devices)
    else:
        counts = {"": instance.max_devices if devices is None else devices}
    m = instance.microbatches_in_batch
    preds = {node.id: set() for node in instance.nodes}
    for e in instance.edges:
        preds[e.dst].add(e.src)
    best, best_plan = math.inf, None
    for partition in _partitions(frozenset(preds), preds):
        if stages is not None and len(partition) != stages:
            continue
        for chosen in _stages(instance, partition, counts, m):
            plan = ParallelPlan(tuple(chosen), schedule)
            evaluation = evaluate_parallel(instance, plan, devices=counts if instance.device_types else counts[""],
                                           memory=memory)
            if not evaluation.ok:
                continue
            value = evaluation.value if objective == "throughput" else simulate_parallel(
                instance, plan, schedule, allreduce="piper").time_per_batch
            if value < best:
                best, best_plan = value, plan
    return best, best_plan


def _partitions(rest: frozenset, preds: dict[int, set[int]]):
    """Ordered partitions of ``rest`` into stages, each closed under predecessors within what remains."""
    if not rest:
        yield []
        return
    members = sorted(rest)
    for size in range(1, len(members) + 1):
        for first in itertools.combinations(members, size):
            chosen = set(first)
            if all(preds[v] & rest <= chosen for v in first):
                for tail in _partitions(rest - chosen, preds):
                    yield [tuple(first), *tail]


def _stages(instance: PiperInstance, partition, counts: dict[str, int], m: int):
    """Every assignment of (type, t, d, TMPCs) to the stages of ``partition`` within each type's count
    (one type named ``""`` without ``deviceTypes``)."""
    nodes = {node.id: node for node in instance.nodes}
    cpu = {t.name: t.cpu for t in instance.device_types}
    per_stage = []
    for block in partition:
        options = []
        common = set.intersection(*(set(nodes[v].configurations) for v in block))
        for kind, count in counts.items():
            for t in sorted(common):
                if cpu.get(kind) and t != 1:
                    continue
                for d in range(1, count // t + 1):
                    if m % d:
                        continue
                    names = [[c.id for c in nodes[v].configurations[t]] for v in block]
                    for choice in itertools.product(*names):
                        options.append(ParallelStage(block, d, t, dict(zip(block, choice)), kind))
        per_stage.append(options)
    for combo in itertools.product(*per_stage):
        if (all(sum(s.d * s.t for s in combo if s.device_type == kind) <= count for kind, count in counts.items())
                and sum(s.d for s in combo) <= m):
            yield combo


__all__ = ["MAX_NODES", "brute_force_parallel"]
