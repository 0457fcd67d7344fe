"""The Piper planner against brute force at the edges of its model: nodes of zero time and zero size, memory that a
stage fills exactly, one micro-batch per batch, more devices than nodes, TMPCs that fit no device.

Each instance is drawn from a seeded generator written here (not the hypothesis strategies, whose times are at least
1): ``optimal`` answers equal the brute force, ``feasible`` ones never beat it and their bound never exceeds it, for
every schedule's memory model, with and without device types, for both objectives and forward shares 0 and 1.
"""

from __future__ import annotations

import functools
import math
import random

import pytest

import placement
import placement.testing.bruteforce_parallel as brute
from placement.io.piper import TMPC, PiperDeviceType, PiperEdge, PiperInstance, PiperNode
from placement.simulation.parallel import simulate_parallel
from placement.testing.bruteforce_interleaved import brute_force_interleaved

NEVER_FITS = 1e6   # a memory figure above every device's memory here


def edge_instance(seed: int, nodes: tuple[int, int] = (1, 4), typed: bool = False) -> PiperInstance:
    """A random DAG of ``nodes`` nodes (edges from lower to higher position), times and sizes from {0, 1, 3, 7}
    with zeros frequent, one or two TMPCs per degree (t = 1, sometimes 2 and 4), now and then a TMPC of memory
    ``NEVER_FITS``, 1–6 devices, ``mbsInBatch`` in {1, 2, 3, 4, 6}, and a memory per device that is, half the
    time, exactly the memory of one node's first TMPC at one or two micro-batches in flight (a stage that fills
    it)."""
    rng = random.Random(seed)
    n = rng.randint(*nodes)
    ids = [5 * k + 1 for k in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.5]
    preds = {ids[j]: [ids[i] for i, jj in pairs if jj == j] for j in range(n)}
    succs = {ids[i]: [ids[j] for ii, j in pairs if ii == i] for i in range(n)}
    value = lambda: float(rng.choice([0, 0, 1, 3, 7]))  # noqa: E731
    built = []
    for k in range(n):
        degrees = [1] + [t for t, p in ((2, 0.4), (4, 0.2)) if rng.random() < p]
        table = {}
        for t in degrees:
            table[t] = tuple(TMPC(name, value(), value(), value(), NEVER_FITS if rng.random() < 0.05 else value(),
                                  {u: value() for u in preds[ids[k]]}, {w: value() for w in succs[ids[k]]})
                             for name in ("v", "r")[:rng.randint(1, 2)])
        built.append(PiperNode(ids[k], f"n{k}", table))
    first = rng.choice(built).configurations[1][0]
    in_flight = rng.choice([1, 2])
    exact = first.memory_usage_a * in_flight + first.memory_usage_b
    memory = exact if rng.random() < 0.5 and exact < NEVER_FITS else float(rng.choice([0, 10, 15, 20, 40]))
    types = ()
    if typed:
        types = tuple(PiperDeviceType(name, rng.randint(1, 3), memory if rng.random() < 0.5 else 30.0,
                                      rng.choice([0.5, 1.0, 2.0]), rng.choice([None, 4.0]), cpu)
                      for name, cpu in (("gpu", False), ("cpu", rng.random() < 0.5)))
    return PiperInstance("edge", rng.randint(1, 6), memory, float(rng.choice([1, 2])), rng.choice([1, 2, 3, 4, 6]),
                         tuple(built), tuple(PiperEdge(ids[i], ids[j], value()) for i, j in pairs), types)


def agrees(result, best: float) -> bool:
    """Whether ``result`` keeps its word against the brute-force optimum ``best`` (``inf``: no plan fits)."""
    value = math.inf if result.value is None else result.value
    close = lambda a, b: a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b))  # noqa: E731
    if result.status == "optimal":
        return close(value, best)
    if result.status == "infeasible":
        return best == math.inf
    if result.status == "feasible":
        return (value >= best or close(value, best)) and (result.bound is None or result.bound <= best
                                                          or close(result.bound, best))
    return False


@pytest.mark.parametrize("schedule", ["piper", "1f1b", "gpipe"])
def test_throughput_equals_brute_force_at_the_edges(schedule):
    for seed in range(40):
        inst = edge_instance(seed, nodes=(2, 4), typed=seed % 4 == 3)
        best, _ = brute.brute_force_parallel(inst, schedule=schedule)
        result = placement.solve(inst, schedule=schedule)
        assert agrees(result, best), (seed, result.status, result.value, result.bound, best)


@pytest.mark.parametrize("share", [0.0, 1.0])
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_time_per_batch_equals_brute_force_at_the_edges(schedule, share, monkeypatch):
    monkeypatch.setattr(brute, "simulate_parallel", functools.partial(simulate_parallel, forward_share=share))
    for seed in range(100, 125):
        inst = edge_instance(seed, nodes=(2, 3), typed=seed % 3 == 0)
        best, _ = brute.brute_force_parallel(inst, schedule=schedule, objective="time-per-batch")
        result = placement.solve(inst, schedule=schedule, objective="time-per-batch", forward_share=share)
        assert agrees(result, best), (seed, result.status, result.value, result.bound, best)


def test_interleaved_equals_brute_force_at_the_edges():
    for seed in range(200, 208):
        inst = edge_instance(seed, nodes=(4, 4))
        inst = PiperInstance(inst.name, max(2, inst.max_devices), inst.max_memory_per_device, inst.bandwidth,
                             inst.microbatches_in_batch, inst.nodes, inst.edges)
        best, _ = brute_force_interleaved(inst, chunks=2)
        result = placement.solve(inst, schedule="interleaved", chunks=2)
        assert agrees(result, best), (seed, result.status, result.value, result.bound, best)
