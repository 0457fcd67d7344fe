"""Baselines for the comparisons of Tarnawski et al. (DESIGN.md §3): one module per planner.

Throughput (max-load): ``pipedream`` (:mod:`.pipedream`), ``greedy``
(:mod:`.greedy`), ``local-search`` (:mod:`.local_search`), ``partition``
(:mod:`.partition`), ``expert`` (:mod:`.expert`), ``single`` (:mod:`.single`).
Latency: ``latency-greedy`` (:mod:`.latency_greedy`), ``latency-dp-split``
(:mod:`.latency_dp_split`), ``latency-chain`` (:mod:`.latency_chain`) and ``latency-modules``
(:mod:`.latency_modules`). :data:`BASELINES`
maps each name to a function ``(problem, **options) -> Solution`` that imports its module
only when called; every one ignores the options it does not use (see each module).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from placement.problem.instance import Instance
from placement.solution import Solution

_MODULES = {
    "pipedream": ("pipedream", "solve_pipedream"),
    "greedy": ("greedy", "solve_greedy"),
    "local-search": ("local_search", "solve_local_search"),
    "partition": ("partition", "solve_partition"),
    "expert": ("expert", "solve_expert"),
    "single": ("single", "solve_single"),
    "latency-greedy": ("latency_greedy", "solve_latency_greedy"),
    "latency-dp-split": ("latency_dp_split", "solve_latency_dp_split"),
    "latency-chain": ("latency_chain", "solve_latency_chain"),
    "latency-modules": ("latency_modules", "solve_latency_modules"),
}

THROUGHPUT_BASELINES = ("pipedream", "greedy", "local-search", "partition", "expert", "single")
LATENCY_BASELINES = ("latency-greedy", "latency-dp-split", "latency-chain", "latency-modules")


def _lazy(module: str, function: str) -> Callable[..., Solution]:
    def run(problem: Instance, **options: Any) -> Solution:
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)(problem, **options)

    run.__name__ = function
    run.__doc__ = f"Run :func:`{__name__}.{module}.{function}` (imported on first use)."
    return run


BASELINES: dict[str, Callable[..., Solution]] = {name: _lazy(*target) for name, target in _MODULES.items()}

__all__ = ["BASELINES", "THROUGHPUT_BASELINES", "LATENCY_BASELINES"]
