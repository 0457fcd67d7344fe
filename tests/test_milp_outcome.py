"""The MILP's verdict (placement.solvers.milp.outcome.conclude) when the instance's own lower bound
meets the plan: optimal whatever the solver said, since that bound is computed from the instance
and the plan's value by the evaluator."""

from __future__ import annotations

from dataclasses import dataclass

from placement.plan import DeviceAssignment, Plan
from placement.problem.bounds import meets
from placement.solution import Status
from placement.solvers.milp.backends.base import RawResult
from placement.solvers.milp.outcome import Context, Verdict, conclude

PLAN = Plan((DeviceAssignment("cpu", (1,)),))


@dataclass
class FakeBackend:
    name: str = "fake"
    optimality_tolerance: float = 1e-9


def context(simple: float) -> Context:
    return Context(method="milp-fake", objective_kind="throughput", contiguity="sets", start=0.0, unit=1.0,
                   exact_data=True, simple_bound=simple, exact_feasibility=True, notes=[], stats={})


def test_a_start_that_meets_the_lower_bound_is_optimal_when_the_solver_finds_nothing_within_it():
    result = conclude(context(0.25), FakeBackend(), RawResult("infeasible"), lambda value: None,
                      lambda plan: Verdict(True, 0.25, ()), fallback=(PLAN, 0.25))
    assert result.status is Status.OPTIMAL
    assert (result.objective, result.bound) == (0.25, 0.25)
    assert result.message.endswith("the starting plan meets the instance's lower bound")


def test_below_the_start_the_lower_bound_proves_nothing():
    result = conclude(context(0.2), FakeBackend(), RawResult("infeasible"), lambda value: None,
                      lambda plan: Verdict(True, 0.25, ()), fallback=(PLAN, 0.25))
    assert result.status is Status.FEASIBLE
    assert (result.objective, result.bound) == (0.25, 0.2)


def test_a_solver_plan_that_meets_the_lower_bound_is_optimal_at_its_time_limit():
    result = conclude(context(3.0), FakeBackend(), RawResult("feasible", objective=3.0, bound=2.0),
                      lambda value: PLAN, lambda plan: Verdict(True, 3.0, ()))
    assert result.status is Status.OPTIMAL
    assert result.bound == 3.0


def test_meets_allows_rounding_only():
    assert meets(0.25, 0.25)
    assert meets(1156.88128125 * (1 - 1e-13), 1156.88128125)
    assert not meets(1156.88128125 * (1 - 1e-11), 1156.88128125)
    assert not meets(0.0, float("inf"))
