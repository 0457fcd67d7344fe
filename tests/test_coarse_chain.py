"""The chain DP over intervals of a topological order (placement.solvers.chain_dp.solve_coarse_chain):
the intervals it cuts, and its optimum against every pipeline of those intervals, enumerated."""

from __future__ import annotations

import itertools
import math

import pytest

from placement.plan import DeviceAssignment, Plan
from placement.solution import Status
from placement.solvers.chain_dp import coarsened, solve_coarse_chain
from placement.solvers.dp import solve_dp
from placement.solvers.ideals import contract
from placement.verification.evaluate import evaluate
from tests.test_milp_stages import random_problem


def pipelines_of(problem, intervals):
    """Every plan whose devices, in order, hold consecutive runs of ``intervals`` (lists of node positions),
    each run on a device of a type that takes it, no more devices of a type than it has."""
    types = problem.device_types
    for cuts in itertools.product((False, True), repeat=len(intervals) - 1):
        runs, current = [], list(intervals[0])
        for cut, interval in zip(cuts, intervals[1:]):
            if cut:
                runs.append(current)
                current = []
            current = current + list(interval)
        runs.append(current)
        for kinds in itertools.product(range(len(types)), repeat=len(runs)):
            if any(kinds.count(t) > types[t].count for t in range(len(types))):
                continue
            yield Plan(tuple(DeviceAssignment(types[t].name, tuple(problem.nodes[v].id for v in sorted(run)))
                             for t, run in zip(kinds, runs)))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("blocks", [3, 6])
def test_its_optimum_is_the_best_pipeline_of_its_intervals(seed, blocks):
    problem = random_problem(24, seed=seed)
    contraction = coarsened(problem, contract(problem), blocks)
    assert contraction.size <= blocks
    assert sorted(v for members in contraction.members for v in members) == list(range(len(problem.nodes)))
    assert all(s < w for s, targets in enumerate(contraction.succ) for w in targets)   # still in topological order
    best = math.inf
    for plan in pipelines_of(problem, contraction.members):
        check = evaluate(problem, plan, "stages")
        if check.valid:
            best = min(best, check.max_load)
    found = solve_coarse_chain(problem, blocks=blocks)
    if math.isinf(best):
        assert found.status is Status.NO_SOLUTION and found.plan is None
        return
    assert found.status is Status.FEASIBLE and found.bound == 0.0
    check = evaluate(problem, found.plan, "stages")
    assert check.valid and check.max_load == pytest.approx(best, rel=1e-12)
    assert found.objective == pytest.approx(best, rel=1e-12)
    assert best >= solve_dp(problem).objective   # a pipeline of the intervals is one of the graph's


def test_a_graph_within_the_blocks_keeps_its_supernodes():
    problem = random_problem(12, seed=3)
    assert coarsened(problem, contract(problem), 12) == contract(problem)


def test_exactly_n_stages_of_intervals():
    problem = random_problem(24, seed=1)
    for stages in (1, 2, 3):
        found = solve_coarse_chain(problem, stages=stages, blocks=6)
        if found.plan is not None:
            assert found.plan.non_empty == stages and evaluate(problem, found.plan, "stages").valid


def test_supernodes_of_no_work_at_the_end_make_no_interval_of_their_own():
    """The last supernodes' running work equals the total: they took interval ``blocks`` (one too many)."""
    from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node

    nodes = tuple(Node(v, f"n{v}", (0.0 if v >= 25 else 1.0 + v % 3, 10.0)) for v in range(30))
    problem = Instance(nodes, tuple(Edge(v, v + 1) for v in range(29)),
                       (DeviceType(ACCELERATOR, 2), DeviceType(CPU, 1, pays_comm=False)))
    for blocks in (1, 2, 7, 29):
        assert coarsened(problem, contract(problem, merge_zero_cost=False), blocks).size <= blocks


def test_many_device_types_run_on_fewer_devices_whose_plans_are_the_graphs():
    """Eleven types of three devices have 4^11 combinations of counts (4,194,304: with five ideals, 2 GB of
    tables and the time limit spent building them); the chain DP over intervals runs on at most
    COARSE_COMBINATIONS of them instead, one device fewer each time of a type with the most, the slowest
    first, and every type keeps one: here the ten fastest types keep two devices and the slowest one."""
    from placement.problem.instance import DeviceType, Edge, Instance, Node
    from placement.solvers.chain_dp import COARSE_COMBINATIONS, fewer_devices

    types = 11
    nodes = tuple(Node(v, f"n{v}", tuple(t + 1.0 + (v * 7 + t) % 5 for t in range(types)), out_cost=0.25)
                  for v in range(40))
    problem = Instance(nodes, tuple(Edge(v, v + 1) for v in range(39)),
                       tuple(DeviceType(f"t{i}", 3) for i in range(types)))
    fewer = fewer_devices(problem)
    assert [t.count for t in fewer.device_types] == [2] * 10 + [1]
    assert math.prod(t.count + 1 for t in fewer.device_types) <= COARSE_COMBINATIONS < 3 ** 11
    assert fewer_devices(fewer) is fewer and fewer_devices(problem, 4 ** 11) is problem
    assert fewer_devices(problem, 2 ** 11 - 1) is problem   # one device of each type makes more still
    found = solve_coarse_chain(problem)
    assert found.status is Status.FEASIBLE
    check = evaluate(problem, found.plan, "stages")
    assert check.valid and check.max_load == pytest.approx(found.objective, rel=1e-12)
    assert found.plan.non_empty > 1   # the chain is split, not run whole on one device
    exact = solve_coarse_chain(problem, stages=3)
    assert exact.status is Status.FEASIBLE and exact.plan.non_empty == 3
    assert evaluate(problem, exact.plan, "stages").valid


def test_a_type_of_astronomically_many_devices_is_cut_to_the_combinations_at_once():
    """One device fewer at a time took 10**40 steps (10**7 took ten seconds): a count above the combinations
    goes down to them first, where the one-at-a-time cut would pass too, so both cuts end alike."""
    from placement.problem.instance import DeviceType, Edge, Instance, Node
    from placement.solvers.chain_dp import COARSE_COMBINATIONS, fewer_devices

    nodes = tuple(Node(v, f"n{v}", (1.0, 2.0)) for v in range(6))
    edges = tuple(Edge(v, v + 1) for v in range(5))
    counts = []
    for many in (10 ** 40, COARSE_COMBINATIONS + 1):
        problem = Instance(nodes, edges, (DeviceType("fast", many), DeviceType("slow", 3)))
        counts.append([t.count for t in fewer_devices(problem).device_types])
    # (c + 1) * (3 + 1) <= COARSE_COMBINATIONS = 156,250: the fast type keeps 39,061 and the slow its three
    assert counts == [[COARSE_COMBINATIONS // 4 - 1, 3]] * 2
