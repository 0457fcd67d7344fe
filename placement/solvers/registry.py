"""The solution methods, one registry line each, with what each one solves as data.

A :class:`MethodSpec` names the function that runs the method (imported on first use, so
the registry is cheap to read), the objectives and contiguity classes it solves, the device
catalogues it takes, and the :func:`placement.solve` keywords it uses. :func:`placement.solve`
refuses a request the method does not declare, and ``placement solve --help`` lists the same
data. Every method function takes ``(instance, **options)`` with exactly the declared
keywords and returns a :class:`placement.solution.Solution`, which ``solve`` then verifies.

Baselines (heuristics, no proof) report the finest contiguity class their plan belongs to,
whatever class was asked, so they accept every class.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from placement.problem.objectives import OBJECTIVES
from placement.verification.evaluate import CONTIGUITY_CLASSES

#: device catalogues: any list of types, or Tarnawski's two types ``accelerator`` and ``cpu``
ANY_CATALOGUE, TWO_TYPES = "any", "accelerator+cpu"


@dataclass(frozen=True)
class MethodSpec:
    """What a method solves and how to call it.

    ``target`` is ``"module:function"``; ``options`` the keywords of :func:`placement.solve`
    the method uses, passed to the function under the same names; ``exact`` whether its
    ``optimal`` is a proof.
    """

    name: str
    target: str
    summary: str
    objectives: tuple[str, ...]
    contiguity: tuple[str, ...]
    catalogue: str
    options: frozenset[str]
    exact: bool = False

    def function(self) -> Callable[..., Any]:
        """The function that runs the method, imported now."""
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


_MILP_OPTIONS = frozenset({"contiguity", "objective", "backend", "time_limit", "gap", "threads", "seed", "log",
                           "warm_start", "calls", "stages", "progress", "max_ideals"})
_THROUGHPUT, _LATENCY = ("throughput",), ("latency",)
_B = "placement.solvers.baselines."


def _baseline(name: str, module: str, summary: str, objectives: tuple[str, ...], catalogue: str = TWO_TYPES,
              options: tuple[str, ...] = ()) -> MethodSpec:
    function = "solve_" + module
    return MethodSpec(name, f"{_B}{module}:{function}", summary, objectives, CONTIGUITY_CLASSES, catalogue,
                      frozenset({"objective", *options}))


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("dp", "placement.solvers.dp:solve_dp", "exact DP over ideals",
               _THROUGHPUT, ("stages",), ANY_CATALOGUE, frozenset({"max_ideals", "progress", "stages"}), exact=True),
    MethodSpec("milp", "placement.solvers.milp.entry:run_milp", "mixed-integer program, solved to optimality by the backend",
               OBJECTIVES, CONTIGUITY_CLASSES, ANY_CATALOGUE, _MILP_OPTIONS, exact=True),
    # no max_ideals: the DP places a chain of fused blocks, whose n + 1 ideals no limit refuses
    _baseline("pipedream", "pipedream", "PipeDream's DP over a chain of fused layers", _THROUGHPUT),
    _baseline("greedy", "greedy", "fill each accelerator in topological order", _THROUGHPUT),
    _baseline("local-search", "local_search", "random restarts of colour-class moves", _THROUGHPUT,
              options=("seed", "time_limit", "restarts", "progress")),
    _baseline("partition", "partition", "METIS graph partitioning", _THROUGHPUT, options=("seed",)),
    _baseline("expert", "expert", "a given split (a plan) evaluated as it is", _THROUGHPUT, ANY_CATALOGUE,
              options=("split",)),
    _baseline("single", "single", "everything on one device of each kind", _THROUGHPUT),
    _baseline("latency-greedy", "latency_greedy", "greedy single-sample schedule", _LATENCY, options=("calls",)),
    _baseline("latency-dp-split", "latency_dp_split", "the DP's pipeline run for one sample", _LATENCY,
              options=("max_ideals",)),
    _baseline("latency-chain", "latency_chain", "calls in turn along a few topological orders, by DP", _LATENCY,
              options=("time_limit",)),
    _baseline("latency-modules", "latency_modules", "calls and CPU nodes along the chain of articulation nodes, by DP",
              _LATENCY, options=("time_limit",)),
)}
