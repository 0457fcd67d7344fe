"""The `stages` MILP (placement.solvers.milp): hand-solved instances, agreement with the DP, honest statuses."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from placement.io.tarnawski import read_instance
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.solvers.dp import solve_dp
from placement.solvers.milp import solve_milp
from placement.errors import InvalidParameterError
from placement.solvers.milp.data import Scaling, choose_scale
from placement.verification.evaluate import evaluate
from tests.strategies import problems
from tests.proofs import claimable

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
BACKENDS = ["cp-sat", "cbc", "scip", "highs"]


def check(problem: Instance, solution: Solution) -> None:
    """Invariants of every result: plan verifies under `stages` at the claimed value; honest bound."""
    if solution.plan is not None:
        evaluation = evaluate(problem, solution.plan, contiguity="stages")
        assert evaluation.valid, (evaluation.violations, solution.message)
        assert evaluation.max_load == solution.objective
        assert 0 <= solution.bound <= solution.objective
    if solution.status is Status.OPTIMAL:
        assert solution.plan is not None and solution.bound == solution.objective
    if solution.status in (Status.INFEASIBLE, Status.NO_SOLUTION):
        assert solution.plan is None


# ----- hand-solved instances (derivations in tests/test_dp.py) ---------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, optimum", [("chain4", 7.5), ("diamond-cpu", 9.0), ("memory-chain", 8.0),
                                           ("training-pair", 11.5)])
def test_tiny(name: str, optimum: float, backend: str) -> None:
    problem = read_instance(TINY / f"{name}.json")
    solution = solve_milp(problem, backend=backend, time_limit=10)
    check(problem, solution)
    assert solution.status is Status.OPTIMAL, solution.message
    assert solution.objective == optimum


@pytest.mark.parametrize("backend", [*BACKENDS, "pulp"])
def test_a_node_far_larger_than_the_memory_bound_goes_to_the_cpu(backend: str) -> None:
    """One node of 6e9 bytes (1 on the accelerator, 10 on the CPU) and memory 6: it fits only the CPU, so the
    optimum is 10. The memory row held its 6e9 against the CPU's bound of the total, which the one plan
    meets exactly, and CBC called the model infeasible (from 3e9 bytes on)."""
    problem = Instance((Node(0, "a", (1.0, 10.0), memory=6e9),), (),
                       (DeviceType(ACCELERATOR, 1, 6.0), DeviceType(CPU, 1, math.inf, False)))
    solution = solve_milp(problem, backend=backend, time_limit=10, own_start=False)
    check(problem, solution)
    assert (solution.status, solution.objective) == (Status.OPTIMAL, 10.0), solution.message
    assert [(d.type, d.nodes) for d in solution.plan.devices] == [("cpu", (0,))]


def test_tiny_plans_and_variants() -> None:
    chain = solve_milp(read_instance(TINY / "chain4.json"))
    assert [d.nodes for d in chain.plan.devices] == [(1, 2), (3, 4)]
    diamond = solve_milp(read_instance(TINY / "diamond-cpu.json"))
    assert [d.type for d in diamond.plan.devices] == ["accelerator", "accelerator", "cpu"]
    memory = read_instance(TINY / "memory-chain.json")
    assert solve_milp(memory.with_devices(memory={"accelerator": 6})).objective == 4.5
    assert solve_milp(memory.with_devices(counts={"accelerator": 0})).objective == 24.0
    infeasible = memory.with_devices(counts={"cpu": 0})   # 3 nodes of 3 bytes, 2 accelerators of 5 bytes
    for backend in ("cp-sat", "scip"):
        solution = solve_milp(infeasible, backend=backend, time_limit=10)
        assert solution.status is claimable(Status.INFEASIBLE, backend, infeasible) and solution.plan is None


def test_scale_choice() -> None:
    assert choose_scale([0.25, 3.0], 10.0, 2 ** 40) == Scaling(4.0, True)
    assert choose_scale([0.1, 0.3], 10.0, 2 ** 40) == Scaling(10.0, True)
    scaling = choose_scale([1 / 3], 10.0, 2 ** 20)
    assert not scaling.exact and scaling.scale * 10 <= 2 ** 20


def test_rounded_times_keep_a_proven_bound() -> None:
    # times that no power of two or ten makes integral: thirds.
    nodes = [Node(i, f"n{i}", (1 / 3 * (i + 1), 10.0), out_cost=1 / 7) for i in range(4)]
    problem = Instance(tuple(nodes), tuple(Edge(i, i + 1) for i in range(3)),
                      (DeviceType(ACCELERATOR, 2), DeviceType(CPU, 0, math.inf, False)))
    solution = solve_milp(problem)
    check(problem, solution)
    assert "rounded" in solution.message
    assert solution.objective == pytest.approx(solve_dp(problem).objective, rel=1e-12)


# ----- agreement with the DP -------------------------------------------------------------

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=7))
def test_cpsat_matches_dp(problem: Instance) -> None:
    dp = solve_dp(problem)
    milp = solve_milp(problem, backend="cp-sat", time_limit=20)
    check(problem, milp)
    assert milp.status == dp.status, milp.message
    if dp.status is Status.OPTIMAL:
        assert milp.objective == dp.objective
        warm = solve_milp(problem, backend="cp-sat", time_limit=20, warm_start=dp.plan)
        assert warm.status is Status.OPTIMAL and warm.objective == dp.objective, warm.message


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=7))
def test_scip_matches_dp(problem: Instance) -> None:
    dp = solve_dp(problem)
    milp = solve_milp(problem, backend="scip", time_limit=20, warm_start=dp.plan)
    check(problem, milp)
    assert milp.status == claimable(dp.status, "scip", problem), milp.message
    if dp.status is Status.OPTIMAL:
        assert milp.objective == dp.objective


# ----- limits ----------------------------------------------------------------------------

def random_problem(n: int, seed: int) -> Instance:
    rng = random.Random(seed)
    nodes = [Node(i, f"n{i}", (rng.randint(1, 40) / 4, rng.randint(20, 200) / 4), memory=float(rng.randint(1, 5)),
                  out_cost=rng.randint(0, 8) / 4) for i in range(n)]
    edges = {(i, j) for j in range(1, n) for i in rng.sample(range(j), min(j, rng.randint(1, 3)))}
    return Instance(tuple(nodes), tuple(Edge(i, j) for i, j in sorted(edges)),
                   (DeviceType(ACCELERATOR, 6, 3.0 * n / 4), DeviceType(CPU, 2, math.inf, False)), name="random")


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiny_time_limit_is_honest(backend: str) -> None:
    problem = random_problem(40, seed=1)
    solution = solve_milp(problem, backend=backend, time_limit=0.05)
    check(problem, solution)
    honest = (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION)
    # HiGHS behind pywraplp sometimes fails outright (an error, never a claim about the instance)
    assert solution.status in honest + ((Status.ERROR,) if backend == "highs" else ()), solution.message
    if solution.status is Status.FEASIBLE:
        assert solution.bound < solution.objective or solution.bound == solution.objective


@pytest.mark.parametrize("backend", ["cp-sat", "scip", "highs"])
def test_warm_start_under_a_short_limit(backend: str) -> None:
    problem = random_problem(40, seed=1)
    one_cpu = Plan((DeviceAssignment(CPU, tuple(n.id for n in problem.nodes)),))
    start = evaluate(problem, one_cpu, contiguity="stages").max_load
    solution = solve_milp(problem, backend=backend, time_limit=0.5, warm_start=one_cpu)
    check(problem, solution)
    if backend == "cp-sat":   # CP-SAT takes the hint: a plan at least as good as the start, gap open
        assert solution.status is Status.FEASIBLE and solution.objective <= start
        assert solution.bound < solution.objective
    if backend == "highs":
        assert "HiGHS is not given the starting plan (OR-Tools' wrapper crashes on a hint)" in solution.message


def test_bad_arguments() -> None:
    problem = read_instance(TINY / "chain4.json")
    with pytest.raises(InvalidParameterError, match="^contiguity must be one of 'none', 'sets', 'stages', "
                                                    "not 'convex'$"):
        solve_milp(problem, contiguity="convex")
    with pytest.raises(InvalidParameterError, match="^backend must be one of 'cp-sat', 'cbc', 'scip', 'highs', "
                                                    "'pulp' or 'pulp:NAME', not 'gurobi'$"):
        solve_milp(problem, backend="gurobi")
    with pytest.raises(InvalidParameterError, match="^time_limit must be a finite number of seconds > 0, not inf$"):
        solve_milp(problem, time_limit=math.inf)
    with pytest.raises(InvalidParameterError, match="^gap must be a number ≥ 0 and < 1, not 1.5$"):
        solve_milp(problem, gap=1.5)
    with pytest.raises(InvalidParameterError, match="^threads must be a positive integer, not 0$"):
        solve_milp(problem, threads=0)
    with pytest.raises(InvalidParameterError, match="^objective 'throughput-gpipe' is for training graphs; this "
                                                    "instance has no backward nodes$"):
        solve_milp(problem, objective="throughput-gpipe")


@pytest.mark.parametrize("backend", ["cp-sat", "highs"])
def test_a_warm_start_returned_as_it_is_comes_in_pipeline_order(backend: str) -> None:
    import placement

    # a -> b, each 1 on an accelerator, nothing to transfer, two accelerators: one node per accelerator
    # loads 1 and 1, the instance's lower bound (2 of work over 2 devices), so the start is returned as
    # the optimum without a search; a feeds b, so the pipeline is a's device, then b's
    doc = {"maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 0, "edges": [{"sourceId": 1, "destId": 2, "cost": 0}],
           "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 9},
                     {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 9}]}
    backwards = {"fpgas": [{"nodes": [2]}, {"nodes": [1]}]}
    result = placement.solve(doc, method="milp", backend=backend, warm_start=backwards)
    assert (result.status, result.value) == ("optimal", 1.0)
    assert [stage.nodes for stage in result.plan] == [(1,), (2,)]
    assert [device["nodes"] for device in result.to_json()["fpgas"]] == [[1], [2]]
