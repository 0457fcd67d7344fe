"""One listing of an instance whatever order its file lists the nodes and edges in
(placement.problem.canonical), and the throughput MILP built on it."""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placement
from placement.plan import DeviceAssignment, Plan
from placement.problem.canonical import canonical, least_key_order, listed_as
from placement.problem.instance import Edge, Instance, Node, make_two_type_problem
from placement.solvers.milp import entry
from tests.strategies import problems, shuffled


def diamond_listed_backwards() -> Instance:
    """5 → 7, 5 → 6, 7 → 9, 6 → 9, listed sinks first."""
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 1.0) for i in (9, 7, 6, 5)]
    edges = [Edge(7, 9), Edge(6, 9), Edge(5, 7), Edge(5, 6)]
    return make_two_type_problem(nodes, edges, 2, 1, 100.0)


def test_the_order_by_hand():
    # Kahn's taking the least id: 5 alone is ready; then 6 and 7, least first; then 9
    problem = canonical(diamond_listed_backwards())
    assert [n.id for n in problem.nodes] == [5, 6, 7, 9]
    assert [(e.src, e.dst) for e in problem.edges] == [(5, 6), (5, 7), (6, 9), (7, 9)]
    assert canonical(problem) is problem


def test_least_key_order_follows_the_keys_not_the_numbering():
    # vertices 0 → 2, 1 → 2 with keys 8, 3, 9: 1 (key 3) before 0 (key 8)
    assert least_key_order([[2], [2], []], [8, 3, 9]) == [1, 0, 2]
    assert least_key_order([[2], [2], []], [3, 8, 9]) == [0, 1, 2]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=9), st.integers(0, 2**32 - 1))
def test_every_listing_of_a_graph_gives_one_instance(problem, seed):
    again = shuffled(problem, seed)
    assert canonical(again) == canonical(problem)
    assert canonical(again).nodes == canonical(problem).nodes and canonical(again).edges == canonical(problem).edges


def test_a_plan_is_listed_back_in_the_caller_s_order():
    problem = diamond_listed_backwards()
    plan = Plan((DeviceAssignment("accelerator", (5, 6, 7), calls=((5, 6), (7,))),
                 DeviceAssignment("accelerator", (9,))))
    assert listed_as(problem, plan) == Plan((DeviceAssignment("accelerator", (7, 6, 5), calls=((6, 5), (7,))),
                                             DeviceAssignment("accelerator", (9,))))


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_the_milp_builds_one_model_for_every_listing(monkeypatch, objective):
    """The throughput MILP gets the canonical listing (so every shuffle of a file gives one model and one
    search), and its plan comes back in the caller's order; the latency MILP keeps the caller's listing."""
    seen: list[Instance] = []
    solve_milp = entry.solve_milp

    def recording(instance, **options):
        seen.append(instance)
        return solve_milp(instance, **options)

    monkeypatch.setattr(entry, "solve_milp", recording)
    problem = diamond_listed_backwards()
    for seed in range(3):
        given = shuffled(problem, seed)
        result = placement.solve(given, method="milp", contiguity="none", objective=objective, time_limit=10)
        assert result.status == "optimal"
        for device in result.plan:
            assert list(device.nodes) == sorted(device.nodes, key=given.index_of)
        assert seen[-1] == (canonical(given) if objective == "throughput" else given)
    assert len(seen) == 3


def test_an_interrupted_search_s_plan_is_listed_in_the_caller_s_order(monkeypatch):
    """Ctrl-C in the search: the best plan so far goes on in the interrupt, listed as the caller's instance."""
    from placement.errors import Interrupted
    from placement.solution import Solution, Status
    from placement.solvers.milp.interrupt import SearchInterrupted

    def interrupted(instance, **options):   # a plan listed as the canonical listing, 5 6 7 9
        plan = Plan((DeviceAssignment("accelerator", (5, 6, 7, 9)),))
        raise SearchInterrupted(None, Solution(Status.FEASIBLE, plan, 4.0))

    monkeypatch.setattr(entry, "solve_milp", interrupted)
    with pytest.raises(Interrupted) as caught:
        placement.solve(diamond_listed_backwards(), method="milp", contiguity="none", time_limit=10,
                        warm_start=False)
    assert [stage.nodes for stage in caught.value.result.plan] == [(9, 7, 6, 5)]


@pytest.mark.parametrize("method, options", [("dp", {}), ("pipedream", {}), ("greedy", {}),
                                             ("latency-dp-split", {"objective": "latency"})])
def test_every_method_lists_a_device_s_nodes_as_the_caller_s_instance(method, options):
    """Nodes listed 2 before 1 (edge 1 -> 2), one accelerator: the DP and the pipeline baselines listed them in
    their own order (1, 2), the MILP in the caller's (2, 1); every method now lists them as the instance does."""
    def node(i: int) -> dict:
        return {"id": i, "name": f"n{i}", "supportedOnFpga": 1, "fpgaLatency": 1.0, "cpuLatency": 9,
                "isBackwardNode": 0, "size": 1}

    document = {"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": 0, "nodes": [node(2), node(1)],
                "edges": [{"sourceId": 1, "destId": 2, "cost": 1.0}]}
    result = placement.solve(document, method=method, **options)
    assert [stage.nodes for stage in result.plan] == [(2, 1)]
