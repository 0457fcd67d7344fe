"""Exhaustive search over plans with data- and tensor-parallel stages: the oracle for tiny Piper instances.

Every plan is enumerated: every ordered partition of the nodes into stages with no edge from a
later stage to an earlier one (the first stage is a non-empty predecessor-closed subset of the
nodes, the rest recursively), every tensor-parallel degree ``t`` every node of the stage has
TMPCs for, every data-parallel degree ``d`` dividing ``m`` with ``Σ d·t ≤ devices`` and
``Σ d ≤ m``, and every TMPC per node. Each plan is judged by the independent evaluator
(:func:`placement.verification.parallel.evaluate_parallel`) for the schedule's memory
model; the least value among plans without violations is the optimum (``inf`` if none).
No pruning: the search is for instances of a handful of nodes.
"""

from __future__ import annotations

import itertools
import math

from placement.errors import LimitExceededError
from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.verification.parallel import evaluate_parallel

MAX_NODES = 6


def brute_force_parallel(instance: PiperInstance, *, devices: int | None = None, memory: float | None = None,
                         schedule: str = "piper") -> tuple[float, ParallelPlan | None]:
    """The least largest stage time per sample over every plan, and a plan attaining it (``inf, None``
    when no plan fits)."""
    if len(instance.nodes) > MAX_NODES:
        raise LimitExceededError(f"brute force enumerates plans of at most {MAX_NODES} nodes, "
                                 f"not {len(instance.nodes)}")
    devices = instance.max_devices if devices is None else devices
    m = instance.microbatches_in_batch
    preds = {node.id: set() for node in instance.nodes}
    for e in instance.edges:
        preds[e.dst].add(e.src)
    best, best_plan = math.inf, None
    for partition in _partitions(frozenset(preds), preds):
        for stages in _stages(instance, partition, devices, m):
            plan = ParallelPlan(tuple(stages), schedule)
            evaluation = evaluate_parallel(instance, plan, devices=devices, memory=memory)
            if evaluation.ok and evaluation.value < best:
                best, best_plan = evaluation.value, plan
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


def _stages(instance: PiperInstance, partition, devices: int, m: int):
    """Every assignment of (t, d, TMPCs) to the stages of ``partition`` within the device budget."""
    nodes = {node.id: node for node in instance.nodes}
    per_stage = []
    for block in partition:
        options = []
        common = set.intersection(*(set(nodes[v].configurations) for v in block))
        for t in sorted(common):
            for d in range(1, devices // t + 1):
                if m % d:
                    continue
                names = [[c.id for c in nodes[v].configurations[t]] for v in block]
                for choice in itertools.product(*names):
                    options.append(ParallelStage(block, d, t, dict(zip(block, choice))))
        per_stage.append(options)
    for combo in itertools.product(*per_stage):
        if sum(s.d * s.t for s in combo) <= devices and sum(s.d for s in combo) <= m:
            yield combo


__all__ = ["MAX_NODES", "brute_force_parallel"]
