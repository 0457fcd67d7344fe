"""CBC's claims of optimality are sound, through OR-Tools (``cbc``) and through PuLP (``pulp``).

CBC analyses the objective of its preprocessed model and may conclude that objective values move
in whole steps; it then prunes everything that cannot beat the incumbent by a step. On the latency
model with times in quarters (``min L``, ``L ≥ F``) it concluded a step of 1 and claimed 0.75
optimal where 0.5 is. The backends scale CBC's objective so that the analysis finds no step, and
distrust a run whose log shows that it found one all the same.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import placement
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.backends.base import RawResult, distrust_cbc
from placement.testing.bruteforce_latency import brute_force_latency
from tests.strategies import problems

AVAILABLE = {name for name, ok, _ in backend_availability() if ok}
CBC_BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(name not in AVAILABLE, reason=f"{name} not available"))
                for name in ("cbc", "pulp")]

#: f0 runs on the CPU only (0.5); f1 takes 0.25 on an accelerator and nothing on the CPU; f0 → f1
#: costs nothing. Both on the CPU: 0.5, the optimum. f1 on an accelerator: 0.5 + 0.25 = 0.75.
DOCUMENT = {
    "maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 1,
    "nodes": [{"id": 0, "name": "f0", "supportedOnFpga": 0, "fpgaLatency": 0, "cpuLatency": 0.5, "isBackwardNode": 0},
              {"id": 1, "name": "f1", "supportedOnFpga": 1, "fpgaLatency": 0.25, "cpuLatency": 0.0,
               "isBackwardNode": 0}],
    "edges": [{"sourceId": 0, "destId": 1, "cost": 0.0}],
}


def solve(instance: Instance | dict, backend: str) -> placement.Result:
    return placement.solve(instance, method="milp", objective="latency", backend=backend, warm_start=False,
                           calls=1, time_limit=30)


def assert_sound(result: placement.Result, optimum: float) -> None:
    """A value never below the optimum, ``optimal`` only at the optimum, a bound never above it."""
    assert result.value is not None and result.value >= optimum - 1e-9, result
    if result.status == "optimal":
        assert result.value == optimum, result
    if result.bound is not None:
        assert result.bound <= optimum + 1e-9, result


@pytest.mark.parametrize("backend", CBC_BACKENDS)
def test_quarter_times_instance_is_solved_to_its_optimum(backend: str) -> None:
    problem = placement.load(DOCUMENT)
    truth = brute_force_latency(problem, max_calls=1)
    assert truth.objective == 0.5
    result = solve(DOCUMENT, backend)
    assert_sound(result, truth.objective)
    assert result.status == "optimal" and result.value == 0.5 and result.bound == 0.5, result


@pytest.mark.parametrize("backend", CBC_BACKENDS)
def test_a_raised_increment_costs_the_claim(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the scaled objective CBC prunes the optimum; the log gives it away and the answer
    is a verified plan without a claim of optimality, its bound the instance's own."""
    from placement.solvers.milp.backends import pulp as pulp_backend
    from placement.solvers.milp.backends.cbc import CbcBackend

    monkeypatch.setattr(CbcBackend, "objective_scale", 1.0)
    monkeypatch.setattr(pulp_backend, "CBC_OBJECTIVE_SCALE", 1.0)
    result = solve(DOCUMENT, backend)
    assert_sound(result, 0.5)
    if result.value != 0.5:
        assert result.status == "feasible" and "cutoff increment" in result.message, result


def test_distrust_cbc_reads_the_log() -> None:
    log = "Optimal - objective value 0.25\nCutoff increment increased from 1e-05 to 0.9999\n"
    raw = distrust_cbc(RawResult("optimal", 0.75, 0.75), log)
    assert (raw.status, raw.bound) == ("feasible", None) and "0.9999" in raw.message
    assert distrust_cbc(RawResult("optimal", 0.5, 0.5), "Optimal - objective value 0.5\n").status == "optimal"
    assert distrust_cbc(RawResult("infeasible"), log).status == "infeasible"


def chain(times: list[tuple[float | None, float]], edges: list[tuple[int, int]], accelerators: int,
          out_cost: tuple[float, ...] = ()) -> Instance:
    """Nodes ``f0 …`` with (accelerator, CPU) ``times`` (``None``: CPU only), one CPU, memory unbounded."""
    nodes = tuple(Node(i, f"f{i}", t, out_cost=out_cost[i] if i < len(out_cost) else 0.0) for i, t in enumerate(times))
    types = (DeviceType(ACCELERATOR, accelerators, math.inf, True), DeviceType(CPU, 1, math.inf, False))
    return Instance(nodes, tuple(Edge(a, b) for a, b in edges), types, name="quarters")


QUARTERS = st.integers(0, 4).map(lambda k: k / 4)


@st.composite
def quarter_chains(draw: st.DrawFn, max_nodes: int = 3) -> Instance:
    """A chain ``f0 → … → f(n-1)`` with some skipping edges (one sink, so the objective variable
    sits in a single row, the shape CBC's analysis took for integral), times in quarters, and a
    sink that is often free on the CPU."""
    n = draw(st.integers(2, max_nodes))
    edges = [(j - 1, j) for j in range(1, n)]
    edges += sorted({(draw(st.integers(0, j - 2)), j) for j in range(2, n) if draw(st.booleans())})
    times = [(draw(st.one_of(st.none(), QUARTERS)),
              draw(st.sampled_from([0.0, 0.0, 0.25, 0.5, 0.75] if i < n - 1 else [0.0, 0.0, 0.25])))
             for i in range(n)]
    costs = tuple(draw(st.sampled_from([0.0, 0.0, 0.0, 0.25])) for _ in range(n))
    return chain(times, sorted(edges), draw(st.integers(1, 2)), costs)


@pytest.mark.parametrize("backend", CBC_BACKENDS)
def test_optimal_only_at_the_brute_force_optimum(backend: str) -> None:
    # instances on which CBC without the scaled objective claimed a value above the optimum
    @example(chain([(0.5, 0.75), (0.0, 0.0), (0.75, 0.0)], [(0, 1), (1, 2)], 2, (0.25,)))
    @example(chain([(None, 0.5), (0.0, 0.25), (0.75, 0.0), (0.0, 0.75)], [(0, 1), (1, 2), (1, 3), (2, 3)], 2))
    @example(chain([(0.25, 0.5), (0.25, 0.0)], [(0, 1)], 2))
    @example(chain([(1.0, 0.25), (1.0, 0.0)], [(0, 1)], 1))
    @settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(quarter_chains(), problems(max_nodes=4, training=False, max_accelerators=2, max_cpus=1)))
    def run(problem: Instance) -> None:
        truth = brute_force_latency(problem, max_calls=1)
        result = solve(problem, backend)
        if truth.status != "optimal":
            assert result.status != "optimal", result
            return
        assert_sound(result, truth.objective)

    run()
