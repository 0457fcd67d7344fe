"""Exhaustive search over interleaved plans (``v`` chunks per device group): the oracle for tiny Piper instances.

Every plan of :mod:`placement.parallel.interleaved`'s model is enumerated: every number of groups
``S ≥ 2``, every ``t`` all nodes have TMPCs for, every ``d`` dividing ``m`` with ``m/d`` a multiple
of ``S`` and ``S·d·t ≤ devices``, every map of the nodes to the ``S·v`` chunks that leaves no chunk
empty and sends no edge backwards, and every TMPC per node. Each plan is judged by the independent
evaluator (:func:`placement.verification.parallel_interleaved.evaluate_interleaved`); the least value
among plans without violations is the optimum (``inf`` if none). No pruning, no solver code.
"""

from __future__ import annotations

import itertools
import math

from placement.errors import LimitExceededError
from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.verification.parallel_interleaved import evaluate_interleaved

MAX_NODES = 6


def brute_force_interleaved(instance: PiperInstance, *, devices: int | None = None, memory: float | None = None,
                            chunks: int = 2) -> tuple[float, ParallelPlan | None]:
    """The least largest group time per sample over every interleaved plan with ``chunks`` chunks per
    group, and a plan attaining it (``inf, None`` when no plan fits)."""
    if len(instance.nodes) > MAX_NODES:
        raise LimitExceededError(f"brute force enumerates plans of at most {MAX_NODES} nodes, "
                                 f"not {len(instance.nodes)}")
    devices = instance.max_devices if devices is None else devices
    m = instance.microbatches_in_batch
    ids = [node.id for node in instance.nodes]
    common = set.intersection(*(set(node.configurations) for node in instance.nodes)) if ids else set()
    best: tuple[float, ParallelPlan | None] = (math.inf, None)
    for groups in range(2, len(ids) // chunks + 1):
        count = groups * chunks
        layouts = [dict(zip(ids, where)) for where in itertools.product(range(count), repeat=len(ids))
                   if set(where) == set(range(count))]
        layouts = [c for c in layouts if all(c[e.src] <= c[e.dst] for e in instance.edges)]
        for t in sorted(common):
            for d in range(1, m + 1):
                if m % d or (m // d) % groups or groups * d * t > devices:
                    continue
                options = [[c.id for c in node.configurations[t]] for node in instance.nodes]
                for chunk_of in layouts:
                    for picks in itertools.product(*options):
                        tmpcs = dict(zip(ids, picks))
                        stages = tuple(ParallelStage(tuple(u for u in ids if chunk_of[u] == k), d, t,
                                                     {u: tmpcs[u] for u in ids if chunk_of[u] == k})
                                       for k in range(count))
                        plan = ParallelPlan(stages, "interleaved", chunks)
                        ev = evaluate_interleaved(instance, plan, devices=devices, memory=memory)
                        if ev.ok and ev.value < best[0]:
                            best = (ev.value, plan)
    return best


__all__ = ["MAX_NODES", "brute_force_interleaved"]
