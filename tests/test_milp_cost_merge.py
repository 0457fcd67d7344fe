"""Cost nodes that one device set always cuts together are one cost node in the MILP data
(placement.solvers.milp.data.prepare): a forward output and the gradient sent back over the same
edge, in a training graph whose forward and backward mates share a colour."""

from __future__ import annotations

import math

import pytest

import placement
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.solvers.milp.data import prepare


def training_pair():
    """Forward a → b, backward b' → a'; a with a' and b with b' share a colour. Accelerator times 3
    each; a's activation and b''s gradient cost 1 each.

    Optimum, 2 accelerators: one device holds everything (12), or {a, a'} and {b, b'}: each device
    computes 6 and takes part in both transfers, sending one and receiving the other, so pays
    1 + 1 and its load is 8. The optimum is 8 in every contiguity class."""
    nodes = (Node(0, "a", (3.0, None), colour=0, out_cost=1.0), Node(1, "b", (3.0, None), colour=1),
             Node(2, "b'", (3.0, None), backward=True, colour=1, out_cost=1.0),
             Node(3, "a'", (3.0, None), backward=True, colour=0))
    edges = (Edge(0, 1), Edge(1, 2), Edge(2, 3))
    return make_two_type_problem(nodes, edges, accelerators=2, cpus=0, memory=math.inf)


def test_the_activation_and_its_gradient_are_one_cost_node_for_throughput():
    problem = training_pair()
    groups = problem.colour_classes()
    # costs in model units: times the power of two a floating-point backend's model is scaled by
    d = prepare(problem, groups, integer=False, max_product=2.0 ** 62, by_direction=False)
    assert [(cn.u, cn.r, cn.W, cn.c / d.scaling.scale) for cn in d.cost_nodes] == [(0, 0, (1,), 2.0)]
    # throughput-gpipe charges forward and backward costs to separate loads: kept apart
    d = prepare(problem, groups, integer=False, max_product=2.0 ** 62, by_direction=True)
    assert [(cn.u, cn.r, cn.W, cn.c / d.scaling.scale, cn.backward) for cn in d.cost_nodes] == [
        (0, 0, (1,), 1.0, False), (2, 1, (0,), 1.0, True)]


@pytest.mark.parametrize("contiguity", ["stages", "sets", "none"])
def test_merged_costs_keep_the_optimum(contiguity):
    pytest.importorskip("ortools")
    result = placement.solve(training_pair(), method="milp", contiguity=contiguity, backend="cp-sat")
    assert result.status == "optimal" and result.value == 8.0
    assert placement.solve(training_pair(), method="dp").value == 8.0
