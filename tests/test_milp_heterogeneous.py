"""More than two device types: the MILP picks a type per device within each type's count.

The instance format's ``deviceTypes`` extension (placement.io.tarnawski) carries any
catalogue; the DP and brute force handle any catalogue too, so the three methods are
compared on random three-type problems, and on one solved by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from placement.io.tarnawski import read_instance
from placement.problem.instance import Instance
from placement.solution import Status
from placement.testing.bruteforce import brute_force
from placement.solvers.dp import solve_dp
from placement.solvers.milp import solve_milp
from placement.verification.evaluate import evaluate
from tests.strategies import three_type_problems

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"


@pytest.mark.parametrize("contiguity", ["stages", "sets", "none"])
def test_three_types_by_hand(contiguity: str) -> None:
    """instances/tiny/three-types.json: the chain a → b → c → d on one `fast` device (4 per
    node), one `slow` device (6 per node) and one CPU (5 for a and d; b and c unsupported);
    only b → c costs 1; memory does not bind.

    Optimum 8 in every class. Upper bound: cpu {a} (5), fast {b, c} (8, b → c stays inside,
    and a, c transfer for free), slow {d} (6) is a pipeline. Lower bound, for any assignment:
    the slow device holds at most one node (two cost 12) and the CPU at most one (two cost
    10), so the fast device holds at least two nodes: 8. With two types only it is worse:
    without `slow`, either fast holds three nodes (12) or the CPU holds a and d (10), which
    only `none` allows (the path a → b → c → d leaves {a, d} and re-enters it), with fast
    {b, c} (8): 10 under `none`, 12 otherwise; without the CPU, fast and slow hold two each
    (slow 12) or fast three (12).
    """
    problem = read_instance(TINY / "three-types.json")
    assert [t.name for t in problem.device_types] == ["fast", "slow", "cpu"]
    solution = solve_milp(problem, contiguity=contiguity)
    assert (solution.status, solution.objective) == (Status.OPTIMAL, 8.0), solution.message
    ev = evaluate(problem, solution.plan, contiguity)
    assert ev.valid and ev.max_load == 8.0
    assert sorted(d.type for d in solution.plan.devices) == ["cpu", "fast", "slow"]
    assert solve_dp(problem).objective == 8.0
    without_slow = problem.with_devices(counts={"slow": 0})
    without_cpu = problem.with_devices(counts={"cpu": 0})
    assert solve_milp(without_slow, contiguity=contiguity).objective == (10.0 if contiguity == "none" else 12.0)
    assert solve_milp(without_cpu, contiguity=contiguity).objective == 12.0


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(three_type_problems())
def test_three_types_stages_match_dp(problem: Instance) -> None:
    dp = solve_dp(problem)
    milp = solve_milp(problem, time_limit=30)
    assert milp.status is dp.status, milp.message
    if dp.status is Status.OPTIMAL:
        assert milp.objective == dp.objective
        assert evaluate(problem, milp.plan, "stages").max_load == milp.objective


@pytest.mark.parametrize("contiguity", ["sets", "none"])
def test_three_types_match_brute_force(contiguity: str) -> None:
    @settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(three_type_problems(max_nodes=5))
    def run(problem: Instance) -> None:
        truth = brute_force(problem, contiguity)
        milp = solve_milp(problem, contiguity=contiguity, time_limit=30)
        assert milp.status is truth.status, milp.message
        if truth.status is Status.OPTIMAL:
            assert milp.objective == truth.objective

    run()
