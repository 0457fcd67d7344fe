"""Cross-checks of :func:`placement.solve` against the brute-force oracles, on random tiny instances.

A *case* is one call of ``placement.solve`` (method, backend, objective, contiguity class,
``calls``, warm start or not) on one instance; its answer is judged against the optimum the
brute force finds (:func:`placement.testing.bruteforce.brute_force` for the throughput
objectives, :func:`placement.testing.bruteforce_latency.brute_force_latency` for latency).

A **wrong claim** is an answer the truth contradicts:

* ``optimal`` with a value other than the optimum;
* ``infeasible`` where a plan exists, or a plan (``optimal``/``feasible``) where none does;
* a verified value below the optimum, or a bound above it;
* ``optimal`` or ``infeasible`` from a method that cannot prove it (a heuristic).

An **agreement** is ``optimal`` at the optimum, or ``infeasible`` where no plan exists. Every
other honest answer (``feasible`` with a valid bound, ``no_solution``) is neither. Values are
sums of quarters, exact in floating point; they are compared to a relative ``1e-9``.

Instances (:func:`random_instance`) come from a seeded :class:`random.Random`, so a run is
reproducible from its seed alone.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Iterator

from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node
from placement.solution import Status

#: relative tolerance when comparing a value or a bound with the brute-force optimum
TOLERANCE = 1e-9
#: methods that may claim ``optimal`` and ``infeasible`` (the others are heuristics)
EXACT = ("dp", "milp")


def random_instance(rng: random.Random, training: bool, max_forward: int = 4, unit: float = 1.0) -> Instance:
    """A tiny instance: a random DAG of ``2..max_forward`` forward nodes (with backward mates sharing
    their colour when ``training``), times and costs in quarters of ``unit``, 1–2 accelerators with a
    memory bound that sometimes binds, 0–1 CPU cores, some nodes unsupported on accelerators."""
    n = rng.randint(2, max_forward)
    edges = {(i, j) for j in range(1, n) for i in range(j) if rng.random() < 0.45}
    edges |= {(j - 1, j) for j in range(1, n) if rng.random() < 0.5}
    kinds = [(i, False) for i in range(n)]
    if training:
        mates = {i: n + k for k, i in enumerate(i for i in range(n) if rng.random() < 0.8)}
        kinds += [(i, True) for i in mates]
        edges |= {(mates[w], mates[u]) for u, w in edges if u in mates and w in mates}
        edges |= {(i, b) for i, b in mates.items() if rng.random() < 0.4}
    accelerators, cpus = rng.randint(1, 2), rng.randint(0, 1)
    bound = math.inf if rng.random() < 0.6 else float(rng.randint(2, 6))
    nodes = []
    for pos, (forward, backward) in enumerate(kinds):
        supported = cpus == 0 or rng.random() < 0.85
        memory = float(rng.randint(0, 3))
        if cpus == 0:
            memory = min(memory, bound)
        nodes.append(Node(2 * pos + 1, f"{'b' if backward else 'f'}{pos}",
                          (rng.randint(0, 16) / 4 * unit if supported else None, rng.randint(0, 32) / 4 * unit),
                          memory=memory, backward=backward, colour=forward if training else None,
                          out_cost=rng.randint(0, 8) / 4 * unit))
    types = (DeviceType(ACCELERATOR, accelerators, bound, True), DeviceType(CPU, cpus, math.inf, False))
    return Instance(tuple(nodes), tuple(Edge(2 * a + 1, 2 * b + 1) for a, b in sorted(edges)), types,
                    name="crosscheck")


@dataclass(frozen=True)
class Case:
    """One call of ``placement.solve``; ``backend`` is ``None`` for the methods without one."""

    method: str
    objective: str
    contiguity: str
    backend: str | None = None
    calls: int = 1
    warm_start: bool = True

    def options(self) -> dict:
        """The keywords of ``placement.solve`` for this case."""
        options: dict = {"method": self.method, "objective": self.objective, "contiguity": self.contiguity}
        if self.method == "milp":
            options.update(backend=self.backend, warm_start=self.warm_start, time_limit=30.0)
        if self.objective == "latency":
            options["calls"] = self.calls
        return options


@dataclass(frozen=True)
class Verdict:
    """How one case's answer compares with the truth: ``wrong`` is the reason ('' when honest)."""

    case: Case
    status: str
    value: float | None
    optimum: float | None           # None: no plan exists
    agrees: bool
    wrong: str = ""


def cases(problem: Instance, backends: tuple[str, ...], calls: tuple[int, ...] = (1, 2),
          baselines: bool = True) -> Iterator[Case]:
    """Every case that applies to ``problem``: the DP (throughput, stages), the MILP on every backend,
    objective, contiguity class and ``calls``, with and without warm start, and the heuristics."""
    training = problem.is_training
    objectives = ("throughput", "throughput-gpipe") if training else ("throughput", "latency")
    yield Case("dp", "throughput", "stages")
    for objective in objectives:
        classes = ("none",) if objective == "latency" else ("stages", "sets", "none")
        for contiguity in classes:
            for q in (calls if objective == "latency" else (1,)):
                for backend in backends:
                    for warm in (True, False):
                        yield Case("milp", objective, contiguity, backend, q, warm)
    if baselines:
        yield Case("greedy", "throughput", "stages")
        yield Case("single", "throughput", "stages")
        if not training:
            yield Case("latency-greedy", "latency", "none")


def truth(problem: Instance, case: Case) -> float | None:
    """The optimum of ``case``'s objective and class by brute force; ``None`` when no plan exists."""
    from placement.testing.bruteforce import brute_force
    from placement.testing.bruteforce_latency import brute_force_latency

    if case.objective == "latency":
        found = brute_force_latency(problem, max_calls=case.calls)
    else:
        found = brute_force(problem, case.contiguity, objective=case.objective)
    return found.objective if found.status is Status.OPTIMAL else None


def judge(case: Case, result: object, optimum: float | None, unit: float = 1.0) -> Verdict:
    """The verdict on ``result`` (a :class:`placement.Result`) given the brute-force ``optimum``; values are
    compared to within :data:`TOLERANCE` relatively, or absolutely in the instance's time ``unit``."""
    status, value, bound = str(result.status), result.value, result.bound  # type: ignore[attr-defined]

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE * unit)

    wrong = ""
    if status in ("optimal", "infeasible") and case.method not in EXACT:
        wrong = f"a heuristic claimed {status}"
    elif optimum is None and status in ("optimal", "feasible"):
        wrong = f"a plan of value {value} where none exists"
    elif optimum is not None and status == "infeasible":
        wrong = f"infeasible where the optimum is {optimum}"
    elif status == "optimal" and not close(value, optimum):  # type: ignore[arg-type]
        wrong = f"optimal at {value}, the optimum is {optimum}"
    elif optimum is not None and value is not None and value < optimum and not close(value, optimum):
        wrong = f"a verified value {value} below the optimum {optimum}"
    elif optimum is not None and bound is not None and bound > optimum and not close(bound, optimum):
        wrong = f"a bound {bound} above the optimum {optimum}"
    agrees = not wrong and ((status == "optimal" and close(value, optimum))  # type: ignore[arg-type]
                            or (status == "infeasible" and optimum is None))
    return Verdict(case, status, value, optimum, agrees, wrong)


def check(problem: Instance, case: Case, optima: dict | None = None, unit: float = 1.0) -> Verdict:
    """Run ``case`` on ``problem`` through :func:`placement.solve` and judge it against the optimum of
    the contiguity class the result reports (a heuristic reports the finest class its plan is in,
    whatever was asked); ``optima`` caches the brute force's answers between cases; ``unit`` is the
    instance's time unit (:func:`random_instance`)."""
    import placement

    optima = {} if optima is None else optima
    result = placement.solve(problem, **case.options())
    judged = case if case.objective == "latency" else replace(case, contiguity=result.contiguity)
    key = (judged.objective, judged.contiguity, judged.calls)
    if key not in optima:
        optima[key] = truth(problem, judged)
    return judge(case, result, optima[key], unit)
