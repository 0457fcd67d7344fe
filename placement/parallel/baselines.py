"""Baselines for the parallel planner, each a restriction or a heuristic variant of the same DP.

* :func:`piper_value` — Piper's own algorithm as its public code runs it (msr-fiddle/piper
  ``algo.cpp``): the DP over successor-closed sets with each stage's TMPCs chosen by Piper's greedy
  knapsack (``Graph::solveKnapsack``, ``KNAPSACK_FAST_HEURISTIC``) instead of the exact one. Its
  value is an upper bound on the exact optimum; where it is higher, Piper's heuristic missed the
  optimum. (Piper's C++ is not run here; this re-implementation is the reference for its values.)
* :func:`one_device_per_stage` — every stage on one device (``d = t = 1``): the plans of the
  package's pipeline model.
* :func:`megatron_grid` — Megatron-style uniform plans: every stage with the same ``(t, d)``; the
  best over every ``(t, d)`` (each with its best number of stages ``p``, ``p·t·d ≤ devices``).
"""

from __future__ import annotations

import math
from typing import Any

from placement.io.piper import PiperInstance
from placement.parallel.dp import ParallelSolution, degree_pairs, solve_parallel


def piper_value(instance: PiperInstance, **options: Any) -> ParallelSolution:
    """Piper's algorithm (module docstring); ``options`` as :func:`solve_parallel` takes them."""
    return solve_parallel(instance, mode="greedy", **options)


def one_device_per_stage(instance: PiperInstance, **options: Any) -> ParallelSolution:
    """The exact optimum among plans whose stages all have ``d = t = 1``."""
    return solve_parallel(instance, allowed=[(1, 1)], **options)


def megatron_grid(instance: PiperInstance, *, devices: int, **options: Any) -> tuple[ParallelSolution | None, int]:
    """The best uniform plan over the ``(t, d)`` grid, and the number of grid points solved."""
    best: ParallelSolution | None = None
    tables = options["tables"]
    points = [(tables.degrees[k], d) for k, d in degree_pairs(tables, devices, instance.microbatches_in_batch)]
    for t, d in points:
        found = solve_parallel(instance, devices=devices, allowed=[(t, d)], **options)
        if found.plan is not None and (best is None or found.value < best.value):
            best = found
    return best, len(points)


__all__ = ["megatron_grid", "one_device_per_stage", "piper_value"]
