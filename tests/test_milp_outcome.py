"""The MILP's verdict (placement.solvers.milp.outcome.conclude) when the instance's own lower bound
meets the plan: optimal whatever the solver said, since that bound is computed from the instance
and the plan's value by the evaluator."""

from __future__ import annotations

from dataclasses import dataclass

from placement.plan import DeviceAssignment, Plan
from placement.problem.bounds import meets
from placement.solution import Status
from placement.solvers.milp.backends.base import RawResult
from placement.solvers.milp.outcome import FLOAT_RESOLUTION, Context, Verdict, conclude

PLAN = Plan((DeviceAssignment("cpu", (1,)),))


@dataclass
class FakeBackend:
    name: str = "fake"
    optimality_tolerance: float = 1e-9
    integer_only: bool = True


@dataclass
class FloatBackend:
    name: str = "float"
    optimality_tolerance: float = 1e-6
    integer_only: bool = False


def context(simple: float, unit: float = 1.0) -> Context:
    return Context(method="milp-fake", objective_kind="throughput", contiguity="sets", start=0.0, unit=unit,
                   exact_data=True, simple_bound=simple, exact_feasibility=True, notes=[], stats={})


def test_a_start_that_meets_the_lower_bound_is_optimal_when_the_solver_finds_nothing_within_it():
    result = conclude(context(0.25), FakeBackend(), RawResult("infeasible"), lambda value: None,
                      lambda plan: Verdict(True, 0.25, ()), fallback=(PLAN, 0.25))
    assert result.status is Status.OPTIMAL
    assert (result.objective, result.bound) == (0.25, 0.25)
    assert result.message.endswith("the starting plan meets the instance's lower bound")


def test_the_message_names_the_bound_that_proves_the_start_and_says_nothing_of_a_solver_that_never_ran():
    named = context(0.25)
    named.bound_name = "the DP's stages optimum"
    result = conclude(named, FakeBackend(), RawResult("skipped"), lambda value: None,
                      lambda plan: Verdict(True, 0.25, ()), fallback=(PLAN, 0.25))
    assert result.message == "the solver was not run; the starting plan meets the DP's stages optimum"
    late = RawResult("no_solution", message="the time limit ran out before the solver could start", ran=False)
    result = conclude(context(0.2), FakeBackend(), late, lambda value: None, lambda plan: Verdict(True, 0.25, ()),
                      fallback=(PLAN, 0.25))
    assert (result.status, result.bound) == (Status.FEASIBLE, 0.2)
    assert result.message == "the time limit ran out before the solver could start; the starting plan is returned"


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


COARSE_NOTE = ("float worked at {} model units, where its tolerances are not small against the objective (the "
               "times span too many orders of magnitude for one scale): its proof and bound are not used")


def test_a_floating_point_proof_far_below_the_scale_is_not_used():
    # the plan's value 3.3e-9 is 4.2e-7 model units at 2^7 model units per unit: within a
    # floating-point solver's absolute tolerances, so neither its "optimal" nor its bound counts
    unit = 2.0 ** -7
    raw = RawResult("optimal", objective=3.3e-9 / unit, bound=3.3e-9 / unit)
    result = conclude(context(1e-9, unit), FloatBackend(), raw, lambda value: PLAN,
                      lambda plan: Verdict(True, 3.3e-9, ()))
    assert result.status is Status.FEASIBLE
    assert (result.objective, result.bound) == (3.3e-9, 1e-9)
    assert result.message == COARSE_NOTE.format("4.22e-07")


def test_a_floating_point_bound_at_a_start_far_below_the_scale_is_not_used():
    # no plan of the solver's own: the starting plan's value, 0.5 model units, decides
    result = conclude(context(0.1, 0.5), FloatBackend(), RawResult("no_solution", bound=0.4), lambda value: None,
                      lambda plan: Verdict(True, 0.25, ()), fallback=(PLAN, 0.25))
    assert result.status is Status.FEASIBLE
    assert (result.objective, result.bound) == (0.25, 0.1)
    assert result.message.startswith(COARSE_NOTE.format("0.5"))


def test_a_floating_point_proof_at_the_resolution_is_used():
    raw = RawResult("optimal", objective=FLOAT_RESOLUTION, bound=FLOAT_RESOLUTION)
    result = conclude(context(0.1, 0.125), FloatBackend(), raw, lambda value: PLAN,
                      lambda plan: Verdict(True, FLOAT_RESOLUTION * 0.125, ()))
    assert result.status is Status.OPTIMAL
    assert (result.objective, result.bound) == (0.125, 0.125)
    assert result.message == ""


def test_an_integer_backend_is_not_held_to_the_resolution():
    raw = RawResult("optimal", objective=3.0, bound=3.0)
    result = conclude(context(1.0), FakeBackend(), raw, lambda value: PLAN, lambda plan: Verdict(True, 3.0, ()))
    assert result.status is Status.OPTIMAL


def test_an_incumbent_of_0_beside_a_bound_below_the_resolution_proves_nothing():
    # PuLP's CBC wrote its incumbent as 0 and proved a bound of 1.1e-8 model units: the value it
    # worked at is the bound's, far below the resolution, so the plan (2.2e-11) is not proven optimal
    unit = 2.0 ** -9
    raw = RawResult("optimal", objective=0.0, bound=1.117e-8)
    result = conclude(context(0.0, unit), FloatBackend(), raw, lambda value: PLAN,
                      lambda plan: Verdict(True, 2.18e-11, ()))
    assert result.status is Status.FEASIBLE
    assert (result.objective, result.bound) == (2.18e-11, 0.0)
    assert result.message == COARSE_NOTE.format("1.12e-08")


def test_a_plan_that_fails_verification_gives_way_to_the_starting_plan():
    # a floating-point backend leaves sizes below its tolerances out of its memory rows, so its plan
    # may exceed a bound by them: the verified starting plan is returned, with the instance's bound
    raw = RawResult("optimal", objective=1.0, bound=1.0)
    failing = lambda plan: Verdict(False, 1.0, ("device 0 (accelerator): memory 0.700000001 exceeds the bound 0.7",))
    result = conclude(context(0.5), FloatBackend(), raw, lambda value: PLAN, failing, fallback=(PLAN, 2.0))
    assert result.status is Status.FEASIBLE
    assert (result.objective, result.bound) == (2.0, 0.5)
    assert result.message == ("decoded plan fails verification: device 0 (accelerator): memory 0.700000001 "
                              "exceeds the bound 0.7; the starting plan is returned")
    alone = conclude(context(0.5), FloatBackend(), raw, lambda value: PLAN, failing)
    assert alone.status is Status.ERROR
    assert alone.message == ("decoded plan fails verification: device 0 (accelerator): memory 0.700000001 "
                             "exceeds the bound 0.7")


def test_a_start_that_meets_the_bound_is_optimal_when_time_runs_out_before_the_solver():
    """The deadline passed while the model was built: the starting plan comes back, ``optimal`` where
    the instance's lower bound meets its value (a chain on one accelerator: 3 = its three nodes at 1),
    ``feasible`` with that bound otherwise."""
    import time

    from placement.problem.instance import DeviceType, Edge, Instance, Node
    from placement.solvers.milp.driver import out_of_time

    problem = Instance(tuple(Node(i, f"v{i}", (1.0,)) for i in range(3)), (Edge(0, 1), Edge(1, 2)),
                       (DeviceType("accelerator", 1),), name="chain")
    plan = Plan((DeviceAssignment("accelerator", (0, 1, 2)),))
    found = out_of_time(problem, "milp-cp-sat", "latency", "sets", time.perf_counter(), "out of time", plan,
                        lambda p: Verdict(True, 3.0, ()), 3.0)
    assert (found.status, found.objective, found.bound) == (Status.OPTIMAL, 3.0, 3.0)
    assert found.message == "out of time; the starting plan is returned, and it meets the instance's lower bound"
    found = out_of_time(problem, "milp-cp-sat", "throughput", "stages", time.perf_counter(), "out of time", plan,
                        lambda p: Verdict(True, 3.0, ()), 3.0, "the DP's stages optimum")
    assert found.message == "out of time; the starting plan is returned, and it meets the DP's stages optimum"
    found = out_of_time(problem, "milp-cp-sat", "latency", "sets", time.perf_counter(), "out of time", plan,
                        lambda p: Verdict(True, 3.0, ()), 2.5)
    assert (found.status, found.objective, found.bound) == (Status.FEASIBLE, 3.0, 2.5)


def test_a_stop_within_the_allowed_gap_is_no_claim_that_a_better_plan_refutes():
    # with gap=0.5 a floating-point backend answers "optimal" for a plan of 8.5 beside its bound 6; the plan
    # of 7.5 found after the solve is returned, and the backend's bound stands: it proved no optimum to refute
    better = Plan((DeviceAssignment("cpu", (2,)),))
    ctx = context(5.0)
    ctx.stats["gap_allowed"] = 0.5
    result = conclude(ctx, FloatBackend(), RawResult("optimal", objective=8.5, bound=6.0), lambda value: PLAN,
                      lambda plan: Verdict(True, 8.5, ()), fallback=(better, 7.5))
    assert (result.status, result.objective, result.bound) == (Status.FEASIBLE, 7.5, 6.0)
    assert result.plan == better
    assert result.message == "stopped within the allowed gap"
    assert "uncertified" not in result.stats
    # the better plan meets the bound the backend proved: that proves it optimal
    ctx = context(5.0)
    ctx.stats["gap_allowed"] = 0.5
    result = conclude(ctx, FloatBackend(), RawResult("optimal", objective=8.5, bound=7.5), lambda value: PLAN,
                      lambda plan: Verdict(True, 8.5, ()), fallback=(better, 7.5))
    assert (result.status, result.objective, result.bound) == (Status.OPTIMAL, 7.5, 7.5)
