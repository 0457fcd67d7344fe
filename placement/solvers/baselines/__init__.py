"""Baselines for the comparisons of Tarnawski et al. (DESIGN.md §3): one module per planner.

Throughput (max-load): ``pipedream`` (:mod:`.pipedream`), ``greedy``
(:mod:`.greedy`), ``local-search`` (:mod:`.local_search`), ``partition``
(:mod:`.partition`), ``expert`` (:mod:`.expert`), ``single`` (:mod:`.single`).
Latency: ``latency-greedy`` (:mod:`.latency_greedy`), ``latency-dp-split``
(:mod:`.latency_dp_split`), ``latency-chain`` (:mod:`.latency_chain`) and ``latency-modules``
(:mod:`.latency_modules`).

A baseline is registered as every method is, by one line of :data:`placement.solvers.registry.METHODS`
(a method without a proof: not ``exact``); the names below are read from it. :data:`BASELINES`
maps each name to a function ``(problem, **options) -> Solution`` that imports its module
only when called; every one ignores the options it does not use (see each module).
"""

from __future__ import annotations

from typing import Any, Callable

from placement.problem.instance import Instance
from placement.solution import Solution
from placement.solvers.registry import METHODS, MethodSpec


def baseline_names(objective: str) -> tuple[str, ...]:
    """The registered baselines that optimise ``objective`` alone, in the registry's order."""
    return tuple(name for name, spec in METHODS.items() if not spec.exact and spec.objectives == (objective,))


THROUGHPUT_BASELINES = baseline_names("throughput")
LATENCY_BASELINES = baseline_names("latency")


def _lazy(spec: MethodSpec) -> Callable[..., Solution]:
    def run(problem: Instance, **options: Any) -> Solution:
        return spec.function()(problem, **options)

    run.__name__ = spec.target.rpartition(":")[2]
    run.__doc__ = f"Run :func:`{spec.target.replace(':', '.')}` (imported on first use)."
    return run


BASELINES: dict[str, Callable[..., Solution]] = {name: _lazy(METHODS[name])
                                                 for name in (*THROUGHPUT_BASELINES, *LATENCY_BASELINES)}

__all__ = ["BASELINES", "THROUGHPUT_BASELINES", "LATENCY_BASELINES", "baseline_names"]
