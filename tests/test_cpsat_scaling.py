"""CP-SAT on data scaled to integers: no answer may rest on an overflowing model.

CP-SAT checks that each row's activity fits in 64 bits, but some of its reasoning multiplies a
coefficient by the bound of *another* variable of the row. A load row puts a group's time
(up to the largest coefficient) beside the load target (bounded by the largest load); when
times were scaled until the largest load reached 2^40 units, that product reached about 2^80
and CP-SAT (OR-Tools 9.15, presolve off) answered INFEASIBLE on feasible models. The scale now
keeps every coefficient-times-bound product in a row within 2^62, and the backend does not
use CP-SAT's proofs when a model exceeds that.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import placement
from placement.problem.bounds import class_without_device
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance
from placement.solution import Status
from placement.solvers.milp import solve_milp
from placement.solvers.milp.backends import SolveOptions, backend_availability
from placement.solvers.milp.driver import solve_throughput
from placement.solvers.milp.stages import Stages
from placement.testing.bruteforce import brute_force
from placement.verification.evaluate import evaluate
from tests.strategies import problems, trust_instances

pytestmark = pytest.mark.skipif(not {n: ok for n, ok, _ in backend_availability()}["cp-sat"],
                                reason="OR-Tools is not installed")

TRUST = Path("/work/shared/trust/gpipe-timelimit.json")


def test_shared_gpipe_instance_is_solved_without_warm_start() -> None:
    """Four nodes in one colour class on two accelerators and a CPU: CP-SAT said infeasible in
    2 ms under the old scale (times rounded to multiples of 2^-34); every other backend, and
    CP-SAT with the DP's plan as a start, find 11.277."""
    if not TRUST.exists():
        pytest.skip(f"{TRUST} not found")
    result = placement.solve(TRUST, method="milp", backend="cp-sat", objective="throughput-gpipe",
                             warm_start=False)
    assert result.status == "optimal", result
    assert result.value == pytest.approx(11.277, rel=1e-9)


def one_class_on_two_devices() -> Instance:
    """A forward node and its backward mate (one colour class, so one group), every time 1/3,
    on one accelerator and one CPU core.

    1/3 is no finite binary or decimal fraction, so no power of two or ten scales the data
    exactly and the scale is the largest power of two within the cap. The former cap, largest
    load (2/3) · scale ≤ 2^40, gave the scale 2^40: coefficients ⌊2^40/3⌋ ≈ 2^38.4 beside
    targets bounded by ≈ 2^39.4, a product near 2^78. With one group and two slots every load
    row has two free variables (``c·z[v,1] − T ≤ 0`` if ``y[1,k]``; ``c·(1 − z[v,1]) − T ≤ 0``
    if ``y[2,k]``, ``z[v,2]`` being fixed at 1), the rows from which CP-SAT detects "T is at
    least one of these", and that detection overflowed: the stages model of either throughput
    objective was declared infeasible. The optimum puts both nodes on one device: 2/3.
    """
    nodes = (Node(1, "f", (1 / 3, 1 / 3), colour=0), Node(3, "b", (1 / 3, 1 / 3), backward=True, colour=0))
    return Instance(nodes, (Edge(1, 3),),
                    (DeviceType(ACCELERATOR, 1, math.inf, True), DeviceType(CPU, 1, math.inf, False)),
                    name="one-class")


@pytest.mark.parametrize("objective", ["throughput", "throughput-gpipe"])
@pytest.mark.parametrize("contiguity", ["stages", "sets", "none"])
def test_hand_built_instance_is_solved(contiguity: str, objective: str) -> None:
    problem = one_class_on_two_devices()
    assert brute_force(problem, contiguity, objective=objective).objective == 2 / 3
    solution = solve_milp(problem, contiguity=contiguity, objective=objective, backend="cp-sat", time_limit=30)
    assert (solution.status, solution.objective) == (Status.OPTIMAL, 2 / 3), solution.message
    assert solution.stats["overflow_risk_log2"] <= 62


@pytest.mark.parametrize("objective", ["throughput", "throughput-gpipe"])
def test_no_proof_is_taken_from_a_model_that_may_overflow(objective: str) -> None:
    """Scaled as before (products up to 2^80), CP-SAT's INFEASIBLE (or any bound) must not come
    back as a proof: the answer is `no_solution`, or a verified plan with only the simple bound."""
    problem = one_class_on_two_devices()
    solution = solve_throughput(problem, Stages(), objective, "cp-sat", SolveOptions(time_limit=30),
                                max_product=2.0 ** 80)
    assert solution.stats["overflow_risk_log2"] > 62
    assert solution.status in (Status.NO_SOLUTION, Status.FEASIBLE), solution.message
    assert "its proofs are not used" in solution.message
    if solution.plan is not None:
        ev = evaluate(problem, solution.plan, contiguity="stages")
        assert ev.valid and ev.objective(objective) == solution.objective
        assert solution.bound <= 2 / 3


@st.composite
def wide_problems(draw) -> Instance:
    """Small training graphs of :func:`tests.strategies.problems` with every time and cost
    multiplied by 10^k / 3 (k per value, from -4 to 4) and by one factor 10^j (j from -6 to 6)
    for the whole instance: nine orders of magnitude within an instance, none exact in binary."""
    problem = draw(problems(max_nodes=6, training=True, max_accelerators=2, max_cpus=1))
    unit = 10.0 ** draw(st.integers(-6, 6))
    factor = st.integers(-4, 4).map(lambda k: unit * 10.0 ** k / 3)

    def spread(q: float | None) -> float | None:
        return None if q is None else q * draw(factor)

    nodes = tuple(dataclasses.replace(node, times=tuple(spread(q) for q in node.times),
                                      out_cost=spread(node.out_cost))
                  for node in problem.nodes)
    return dataclasses.replace(problem, nodes=nodes)


@pytest.mark.parametrize("contiguity", ["stages", "sets", "none"])
def test_gpipe_without_warm_start_matches_brute_force_at_any_magnitude(contiguity: str) -> None:
    @settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
    @given(wide_problems())
    def run(problem: Instance) -> None:
        assume(problem.is_training)
        truth = brute_force(problem, contiguity, objective="throughput-gpipe")
        milp = solve_milp(problem, contiguity=contiguity, objective="throughput-gpipe", backend="cp-sat",
                          time_limit=30)
        if class_without_device(problem) is not None:   # answered from the instance, no model built
            assert truth.status is Status.INFEASIBLE and milp.status is Status.INFEASIBLE
            assert "overflow_risk_log2" not in milp.stats
            return
        assert milp.stats["overflow_risk_log2"] <= 62
        if truth.status is Status.INFEASIBLE:
            assert milp.status is Status.INFEASIBLE, milp.message
            return
        assert milp.status in (Status.OPTIMAL, Status.FEASIBLE), milp.message
        ev = evaluate(problem, milp.plan, contiguity=contiguity)
        assert ev.valid and ev.objective("throughput-gpipe") == milp.objective
        # both values come from the evaluator; the bound is converted back from model units
        assert milp.objective >= truth.objective * (1 - 1e-12)
        assert milp.bound <= truth.objective * (1 + 1e-12)
        if milp.status is Status.OPTIMAL:   # rounded data: proven to 1e-6 (module docstring of outcome)
            assert milp.objective <= truth.objective * (1 + 1e-6), (milp.objective, truth.objective)

    # the instances on which CP-SAT said infeasible under the former scale
    for found in [one_class_on_two_devices(), *trust_instances("gpipe-timelimit.json")]:
        run = example(found)(run)
    run()


def thirds_beside_a_slow_cpu() -> Instance:
    """A chain a → b → c → d → e, every transfer free, each node 1/3 on either of two accelerators and
    10^6 on the CPU core.

    The optimum of every class is 1: five nodes of 1/3 on two accelerators leave one with three (1),
    and the CPU is never worth a node (10^6). The instance's lower bound is the average, 5/6. Scaled
    for the whole data (the largest time 10^6 beside the largest load 5·10^6 within 2^62: 2^9 ≤
    2^31/√(5·10^12) < 2^10) the times were rounded down to multiples of 2^-9: the plan of value 1 counted
    3·⌊2^9/3⌋/2^9 = 510/512 in the model, and CP-SAT's proof of that left a gap of 0.4% (``feasible``).
    With the start's value 1 the times and loads are capped at 2 (the power of two at or above twice
    it): the scale is 2^31/2 = 2^30, and the gap 3·(1/3 − ⌊2^30/3⌋/2^30) = 2^-30, within the 1e-6 a
    rounded model's proof is held to."""
    nodes = tuple(Node(i, name, (1 / 3, 1e6)) for i, name in enumerate("abcde", start=1))
    edges = tuple(Edge(i, i + 1) for i in range(1, 5))
    return Instance(nodes, edges, (DeviceType(ACCELERATOR, 2, math.inf, True), DeviceType(CPU, 1, math.inf, False)),
                    name="thirds")


@pytest.mark.parametrize("contiguity", ["sets", "none"])
def test_a_start_lets_the_scale_ignore_times_no_good_plan_uses(contiguity: str) -> None:
    problem = thirds_beside_a_slow_cpu()
    assert brute_force(problem, contiguity).objective == 1
    result = placement.solve(problem, method="milp", contiguity=contiguity, backend="cp-sat", time_limit=30)
    assert (result.status, result.value, result.bound) == ("optimal", 1, 1), result.message
    assert result.stats["time_scale"] == 2.0 ** 30
    assert "times rounded down to multiples of 2^-30 for cp-sat" in result.message
    # without a start, the scale serves the whole data: the proof falls short
    cold = placement.solve(problem, method="milp", contiguity=contiguity, backend="cp-sat", time_limit=30,
                           warm_start=False)
    assert cold.stats["time_scale"] == 2.0 ** 9
    assert (cold.status, cold.value) == ("feasible", 1), cold.message
    assert cold.bound == 510 / 512


@pytest.mark.parametrize("objective", ["throughput", "throughput-gpipe"])
@pytest.mark.parametrize("contiguity", ["sets", "none"])
def test_a_start_proves_the_optimum_at_any_magnitude(contiguity: str, objective: str) -> None:
    """With the DP's plan as the start, the times of a rounded model are multiples of at most the start's
    value over 2^29: CP-SAT proves the brute-force optimum on the nine-magnitude instances."""
    @settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
    @given(wide_problems())
    def run(problem: Instance) -> None:
        assume((objective == "throughput" or problem.is_training) and class_without_device(problem) is None)
        truth = brute_force(problem, contiguity, objective=objective)
        assume(truth.status is not Status.INFEASIBLE)
        result = placement.solve(problem, method="milp", contiguity=contiguity, objective=objective,
                                 backend="cp-sat", time_limit=30)
        assert result.status == "optimal", result.message
        assert result.value == pytest.approx(truth.objective, rel=1e-6)
        assert result.bound <= truth.objective * (1 + 1e-12)
        assert result.stats.get("overflow_risk_log2", 0) <= 62

    run = example(thirds_beside_a_slow_cpu())(run)
    run()
