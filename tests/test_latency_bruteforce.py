"""The latency brute force (placement.testing.bruteforce_latency): its search space counted by hand,
hand-solved optima, a naive enumeration without symmetry breaking, and the latency baselines and
lower bound against it."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings

from placement.errors import InvalidParameterError, LimitExceededError
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.solution import Status
from placement.problem.bounds import latency_lower_bound
from placement.testing.bruteforce_latency import brute_force_latency, count_latency_plans
from tests.methods import run_method as solve
from placement.verification.latency import evaluate_latency

from tests.strategies import problems

A, C = ACCELERATOR, CPU


def chain3(accelerators: int, cpus: int) -> Instance:
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 0.0, False, None, 0.5) for i in (1, 2, 3)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], accelerators, cpus, 10)


def test_search_space_sizes():
    # one accelerator: every ordered set partition of 3 nodes (Fubini number 13: 1 with one call,
    # 6 with two calls (3 splits x 2 orders), 6 with three calls (3!))
    assert count_latency_plans(chain3(1, 0)) == 13
    assert count_latency_plans(chain3(1, 0), max_calls=1) == 1
    assert count_latency_plans(chain3(1, 0), max_calls=2) == 7
    # two interchangeable accelerators: 13 with one used; with both used, 3 ways to split off one
    # node, times 3 ordered partitions of the other two: 9; total 22
    assert count_latency_plans(chain3(2, 0)) == 22
    # plus a CPU pool: nodes on the pool, the rest as above: 22 + 3 * (3 + 1) + 3 * 1 + 1 = 38
    assert count_latency_plans(chain3(2, 1)) == 38
    assert count_latency_plans(chain3(2, 1), limit=10) == 11


def test_two_calls_on_one_accelerator_beat_one():
    """a -> m -> b; m runs on the CPU only (1 ms); a and b take 1 ms on the accelerator, 10 on the CPU;
    every transfer costs 1. One accelerator.

    * One call per accelerator: {a, b} in one call is not contiguous (a -> m -> b), so one of a, b
      runs on the CPU: a on the accelerator: [0, 1 + 1], m [2, 3], b on the CPU [3, 13] -> 13;
      b on the accelerator: a [0, 10], m [10, 11], b [11, 11 + 1 + 1] -> 13; all on the CPU: 21.
    * Two calls, (a) then (b): a [0, 2], m [2, 3], b receives m: [3, 3 + 1 + 1] -> 5.
    """
    nodes = [Node(1, "a", (1.0, 10.0), 0.0, False, None, 1.0), Node(2, "m", (None, 1.0), 0.0, False, None, 1.0),
             Node(3, "b", (1.0, 10.0), 0.0, False, None, 1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 1, 1, 10)
    one = brute_force_latency(problem, max_calls=1)
    two = brute_force_latency(problem)
    assert (one.status, one.objective, one.bound) == (Status.OPTIMAL, 13.0, 13.0)
    assert (two.status, two.objective) == (Status.OPTIMAL, 5.0)
    assert two.plan == Plan((DeviceAssignment(A, (1, 3), ((1,), (3,))), DeviceAssignment(C, (2,))))
    # m is always on the CPU; a and b: both on the accelerator in one call (not contiguous), as (a), (b)
    # (valid) or (b), (a) (a deadlock); one of them there (2 plans, valid); neither (valid): 6 plans, 4 valid
    assert two.stats == {"plans": 6, "valid": 4, "max_calls": None}
    # the greedy, one call allowed: a on the accelerator, m and then b on the CPU (13); two allowed, it
    # splits the call around m too (5)
    assert solve(problem, "latency-greedy").objective == 13.0
    assert solve(problem, "latency-greedy", calls=2).objective == 5.0


def test_infeasible_when_a_class_fits_nowhere():
    # one colour class of two nodes (memory 1 each), accelerator memory 1.5, node 2 cannot run on the CPU
    nodes = [Node(1, "x", (1.0, 1.0), 1.0, False, 7, 0.0), Node(2, "y", (1.0, None), 1.0, False, 7, 0.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2)], 1, 1, 1.5)
    solution = brute_force_latency(problem)
    assert (solution.status, solution.plan, solution.objective) == (Status.INFEASIBLE, None, math.inf)


def test_limits_and_bad_use():
    nodes = [Node(i, f"n{i}", (1.0, 1.0)) for i in range(9)]
    with pytest.raises(LimitExceededError, match="^latency brute force refuses 9 nodes \\(limit 8\\); "):
        brute_force_latency(make_two_type_problem(nodes, [], 1, 1, 10))
    with pytest.raises(LimitExceededError, match="^latency brute force refuses more than 10 plans of 3 nodes"):
        brute_force_latency(chain3(2, 1), max_plans=10)
    with pytest.raises(InvalidParameterError, match="^max_calls must be a positive integer or None, not 0$"):
        brute_force_latency(chain3(1, 0), max_calls=0)
    training = Instance((Node(0, "f", (1.0, 1.0), colour=0), Node(1, "b", (1.0, 1.0), backward=True, colour=0)),
                       (Edge(0, 1),), (DeviceType(A, 1), DeviceType(C, 1, math.inf, False)))
    with pytest.raises(InvalidParameterError, match="^objective 'latency' is for inference graphs; "):
        brute_force_latency(training)


def naive_optimum(problem: Instance) -> float:
    """Every node to (accelerator, call position) or the CPU, no symmetry breaking, no pruning."""
    accelerators = problem.device_types[problem.type_index(A)].count
    cpus = problem.device_types[problem.type_index(C)].count
    n = len(problem.nodes)
    choices = [(a, q) for a in range(accelerators) for q in range(n)] + ([("cpu", 0)] if cpus else [])
    best = math.inf
    for labels in itertools.product(choices, repeat=n):
        devices = []
        for a in range(accelerators):
            calls = tuple(tuple(problem.nodes[i].id for i, lab in enumerate(labels) if lab == (a, q)) for q in range(n))
            calls = tuple(c for c in calls if c)
            if calls:
                devices.append(DeviceAssignment(A, tuple(v for c in calls for v in c), calls))
        pool = tuple(problem.nodes[i].id for i, lab in enumerate(labels) if lab == ("cpu", 0))
        if pool:
            devices.append(DeviceAssignment(C, pool))
        ev = evaluate_latency(problem, Plan(tuple(devices)))
        if ev.valid:
            best = min(best, ev.latency)
    return best


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=4, training=False, max_accelerators=2, max_cpus=1))
def test_symmetry_breaking_loses_nothing(problem):
    assert brute_force_latency(problem).objective == naive_optimum(problem)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=5, training=False, max_accelerators=2, max_cpus=1))
def test_baselines_and_bound_against_the_optimum(problem):
    truth = brute_force_latency(problem)
    one_call = brute_force_latency(problem, max_calls=1)
    assert truth.objective <= one_call.objective
    if truth.status is Status.OPTIMAL:
        ev = evaluate_latency(problem, truth.plan)
        assert ev.valid and ev.latency == truth.objective
        assert latency_lower_bound(problem) <= truth.objective
    for method in ("latency-greedy", "latency-dp-split", "latency-chain"):
        solution = solve(problem, method)
        if solution.status is Status.FEASIBLE:
            assert evaluate_latency(problem, solution.plan).latency == solution.objective
            assert solution.objective >= truth.objective
            if method in ("latency-dp-split", "latency-chain"):   # one call per device
                assert solution.objective >= one_call.objective
        else:
            assert solution.status in (Status.ERROR, Status.NO_SOLUTION, Status.INFEASIBLE)


def test_cpu_cores_with_a_memory_bound_are_packed():
    """a and b run only on the CPUs (5 each), c (1 on the accelerator, 8 on a CPU) reads a; every
    node holds 1 byte; two CPU cores of 1 byte each, one accelerator of 10 bytes; no transfer costs.

    One core holds one node, so a and b go to different cores (in parallel, [0, 5]) and c to the
    accelerator, [5, 6]: latency 6, on three devices; with exactly two devices no plan fits. A
    search that lists every CPU node of a type on one device found no plan at all."""
    nodes = [Node(1, "a", (None, 5.0), 1.0), Node(2, "b", (None, 5.0), 1.0), Node(3, "c", (1.0, 8.0), 1.0)]
    problem = Instance(tuple(nodes), (Edge(1, 3),), (DeviceType(A, 1, 10.0), DeviceType(C, 2, 1.0, False)))
    best = brute_force_latency(problem)
    assert (best.status, best.objective) == (Status.OPTIMAL, 6.0)
    assert best.plan == Plan((DeviceAssignment(A, (3,)), DeviceAssignment(C, (1,)), DeviceAssignment(C, (2,))))
    assert brute_force_latency(problem, stages=3).objective == 6.0
    assert brute_force_latency(problem, stages=2).status is Status.INFEASIBLE


def test_exact_device_counts_never_exceed_a_type():
    """Three CPU-only nodes of 1 byte on three cores of 2 bytes: one core holds at most two of them.
    Exactly three devices: one node per core (latency 1); a split of a packing must not ask for a
    fourth core. Exactly one device: no core holds all three."""
    nodes = [Node(i, f"n{i}", (None, 1.0), 1.0) for i in (1, 2, 3)]
    problem = Instance(tuple(nodes), (), (DeviceType(A, 1, 10.0), DeviceType(C, 3, 2.0, False)))
    assert brute_force_latency(problem, stages=3).objective == 1.0
    assert brute_force_latency(problem, stages=1).status is Status.INFEASIBLE
    exact = brute_force_latency(problem, stages=3).plan
    assert sorted(len(dev.nodes) for dev in exact.devices) == [1, 1, 1]
