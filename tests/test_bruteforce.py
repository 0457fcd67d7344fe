"""The brute-force oracle: class inclusions, self-verification, hand-solved instances."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings

from placement.errors import LimitExceededError
from placement.problem.instance import ACCELERATOR, CPU, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.solution import Status
from placement.testing.bruteforce import brute_force, count_labellings
from placement.verification.evaluate import evaluate

from tests.strategies import problems

A, C = ACCELERATOR, CPU
CLASSES = ("none", "sets", "stages")
RANK = {"stages": 0, "sets": 1, "none": 2}


def node(i, acc, cpu, memory=0.0, cost=0.0, backward=False, colour=None):
    return Node(i, f"n{i}", (acc, cpu), float(memory), backward, colour, float(cost))


def check_solution(problem: Instance, contiguity: str):
    sol = brute_force(problem, contiguity)
    assert sol.method == "bruteforce" and sol.contiguity == contiguity
    if sol.status is Status.INFEASIBLE:
        assert sol.plan is None and sol.objective == math.inf
        return sol
    assert sol.status is Status.OPTIMAL
    assert sol.bound == sol.objective and sol.gap == 0.0
    ev = evaluate(problem, sol.plan, contiguity)
    assert ev.valid, ev.violations
    assert ev.max_load == sol.objective
    assert RANK[ev.finest_class] <= RANK[contiguity]
    if contiguity == "stages":
        # the devices come in pipeline order: forward edges never go back
        dev = {v: d for d, a in enumerate(sol.plan.devices) for v in a.nodes}
        for e in problem.edges:
            if not problem.node(e.src).backward and not problem.node(e.dst).backward:
                assert dev[e.src] <= dev[e.dst]
    assert all(a.nodes for a in sol.plan.devices)  # only used devices are listed
    return sol


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=8))
def test_optima_are_ordered_by_class_and_verify(problem):
    opt = {c: check_solution(problem, c).objective for c in CLASSES}
    assert opt["none"] <= opt["sets"] <= opt["stages"]


def naive_optimum(problem: Instance, contiguity: str) -> float:
    """Every labelling of classes by device slot, no symmetry breaking, no pruning."""
    classes = problem.colour_classes()
    slots = [t.name for t in problem.device_types for _ in range(t.count)]
    best = math.inf
    for labels in itertools.product(range(len(slots)), repeat=len(classes)):
        held: list[list[int]] = [[] for _ in slots]
        for members, k in zip(classes, labels):
            held[k].extend(problem.nodes[i].id for i in members)
        plan = Plan(tuple(DeviceAssignment(slots[k], tuple(held[k])) for k in range(len(slots))))
        ev = evaluate(problem, plan, contiguity)
        if ev.valid:
            best = min(best, ev.max_load)
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1))
def test_symmetry_breaking_and_pruning_lose_nothing(problem):
    for c in CLASSES:
        assert brute_force(problem, c).objective == naive_optimum(problem, c)


def test_count_labellings():
    # one type with 2 devices, 3 classes: set partitions of 3 items into at most 2 blocks = 1 + 3 = 4
    assert count_labellings(3, (2,)) == 4
    # 2 types with 1 device each, 3 classes: each class picks a type: 2**3
    assert count_labellings(3, (1, 1)) == 8
    # unbounded enough: Bell numbers
    assert count_labellings(5, (5,)) == 52


def test_limits():
    nodes = [node(i, 1.0, 1.0) for i in range(11)]
    p = make_two_type_problem(nodes, [], 2, 0, math.inf)
    with pytest.raises(LimitExceededError, match=r"brute force refuses 11 colour classes \(limit 10\)"):
        brute_force(p)
    nodes = [node(i, 1.0, 1.0) for i in range(10)]
    p = make_two_type_problem(nodes, [], 4, 2, math.inf)
    with pytest.raises(LimitExceededError, match=r"brute force refuses \d+ assignments of 10 colour classes to 6 devices"):
        brute_force(p)


def test_hand_solved_design_pair():
    """DESIGN.md §2 pair a -> b, b' -> a'; times 2, c(a) = c(b') = 1, two accelerators, no memory bound.

    {a, b} | {b', a'} has no boundary: loads 4 and 4. The total compute is 8 on two devices, so no plan
    does better than 4: OPT = 4 in every class (the pair separates the classes of plans, not the optima).
    """
    a, b, b2, a2 = 1, 2, 3, 4
    p = make_two_type_problem([node(a, 2.0, 2.0, cost=1.0), node(b, 2.0, 2.0),
                               node(b2, 2.0, 2.0, cost=1.0), node(a2, 2.0, 2.0)],
                              [Edge(a, b), Edge(b2, a2)], 2, 0, math.inf)
    assert {c: check_solution(p, c).objective for c in CLASSES} == {"none": 4.0, "sets": 4.0, "stages": 4.0}


def test_hand_solved_sets_strictly_better_than_stages():
    """The same pair with colours tying a to a' and b to b' (times 2, c(a) = c(b') = 0.5, CPU times 9).

    Two accelerators, no CPU. The classes {a, a'} and {b, b'} go to one device each or share one.
    * {a, a'} | {b, b'}: compute 4, Out {a} 0.5 + In {b'} 0.5 -> 5; the other device symmetric: 5.
      Both forward sets are convex (in sets), but a -> b and b' -> a' go both ways (not stages).
    * one device: 8, no boundary.
    OPT(none) = OPT(sets) = 5 < OPT(stages) = 8.
    """
    a, b, b2, a2 = 1, 2, 3, 4
    nodes = [node(a, 2.0, 9.0, cost=0.5, colour=1), node(b, 2.0, 9.0, colour=2),
             node(b2, 2.0, 9.0, cost=0.5, colour=2), node(a2, 2.0, 9.0, colour=1)]
    p = make_two_type_problem(nodes, [Edge(a, b), Edge(b2, a2)], 2, 0, math.inf)
    assert {c: check_solution(p, c).objective for c in CLASSES} == {"none": 5.0, "sets": 5.0, "stages": 8.0}
    assert check_solution(p, "stages").plan.devices == (DeviceAssignment(A, (1, 2, 3, 4)),)


def test_hand_solved_none_strictly_better_than_sets():
    """Chain 1 -> 2 -> 3 with 1 and 3 of one colour; accelerator times 1, 2, 1; costs 0; two accelerators.

    * none: {1, 3} | {2}: loads 2 and 2 -> 2 (total compute 4 on two devices: optimal).
    * sets / stages: 1 and 3 share a device, and 2 must join them (1 -> 2 -> 3 would leave and
      re-enter): everything on one device -> 4.
    """
    nodes = [node(1, 1.0, 9.0, colour=1), node(2, 2.0, 9.0), node(3, 1.0, 9.0, colour=1)]
    p = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 0, math.inf)
    assert {c: check_solution(p, c).objective for c in CLASSES} == {"none": 2.0, "sets": 4.0, "stages": 4.0}


def test_hand_solved_contiguity_makes_it_infeasible():
    """Chain 1 -> 2 -> 3, memories 1, 2, 1, two accelerators with memory 2, no CPU; times 2, 1, 2; costs 0.

    Node 2 fills a device on its own; 1 and 3 (memory 1 each) fit together. The only valid split is
    {1, 3} | {2}: loads 4 and 1 -> OPT(none) = 4. It is not convex (1 -> 2 -> 3), and one device would
    need memory 4: sets and stages are infeasible.
    """
    nodes = [node(1, 2.0, 1.0, memory=1), node(2, 1.0, 1.0, memory=2), node(3, 2.0, 1.0, memory=1)]
    p = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 0, 2)
    sols = {c: check_solution(p, c) for c in CLASSES}
    assert sols["none"].objective == 4.0 and sols["none"].status is Status.OPTIMAL
    for c in ("sets", "stages"):
        assert sols[c].status is Status.INFEASIBLE and sols[c].plan is None


def test_hand_solved_three_stage_pipeline():
    """Two chains 1 -> 2 -> 3 and 4 -> 5 -> 6 with cross edges 1 -> 5 and 4 -> 2; times 1, costs 0.

    Three accelerators with memory 2 (every node memory 1): each device holds at most two nodes, total
    compute 6 on three devices -> OPT >= 2, and the chain of ideals {1, 4} | {2, 5} | {3, 6} reaches it.
    The returned plan must list its devices in pipeline order.
    """
    nodes = [node(i, 1.0, 1.0, memory=1) for i in range(1, 7)]
    edges = [Edge(1, 2), Edge(2, 3), Edge(4, 5), Edge(5, 6), Edge(1, 5), Edge(4, 2)]
    p = make_two_type_problem(nodes, edges, 3, 0, 2)
    sol = check_solution(p, "stages")
    assert sol.objective == 2.0
    assert [len(a.nodes) for a in sol.plan.devices] == [2, 2, 2]
    assert set(sol.plan.devices[0].nodes) == {1, 4}  # the only ideal of two nodes that all others need


def test_training_instance_with_cpu():
    """f1 -> f2 with mates g1, g2 (g2 -> g1), one accelerator and one CPU.

    Accelerator times f1 1, f2 1, g1 2, g2 2; CPU times 10 each; costs c(f1) = 1, c(g2) = 1.
    * everything on the accelerator: 6, no boundary.
    * {f1, g1} on the accelerator and {f2, g2} on the CPU: 3 + Out {f1} 1 + In {g2} 1 = 5, CPU 20 -> 20.
    Optimum 6 in every class.
    """
    nodes = [node(1, 1.0, 10.0, cost=1.0, colour=1), node(2, 1.0, 10.0, colour=2),
             node(11, 2.0, 10.0, backward=True, colour=1), node(12, 2.0, 10.0, cost=1.0, backward=True, colour=2)]
    p = make_two_type_problem(nodes, [Edge(1, 2), Edge(12, 11)], 1, 1, math.inf)
    for c in CLASSES:
        sol = check_solution(p, c)
        assert sol.objective == 6.0
        assert [a.type for a in sol.plan.devices] == [A]


def test_infeasible_when_nothing_fits():
    # two nodes of one colour with memory 2 each, one accelerator of memory 3, no CPU: each node fits,
    # the class does not
    nodes = [node(1, 1.0, 1.0, memory=2, colour=4), node(2, 1.0, 1.0, memory=2, colour=4)]
    p = make_two_type_problem(nodes, [Edge(1, 2)], 1, 0, 3)
    sol = brute_force(p, "none")
    assert sol.status is Status.INFEASIBLE and sol.plan is None and math.isinf(sol.bound)
