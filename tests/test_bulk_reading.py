"""Large instances are read and checked in bulk; one bad field anywhere still gets its exact message.

Every document here is a 2,000-node chain 0 -> 1 -> ... -> 1999 (node ``i``: accelerator time
1 + i mod 7, CPU time 10, size 1; edge ``i -> i+1``: cost 0.5) with one change deep inside it,
so the bulk checks see all the other, plain rows too.
"""

from __future__ import annotations

import pytest

from placement.errors import InvalidInstanceError
from placement.io.tarnawski import parse_instance
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.solvers.ideals import contract

N = 2000


def chain() -> dict:
    return {"maxSizePerFPGA": 1e6, "maxFPGAs": 4, "maxCPUs": 1,
            "nodes": [{"id": i, "supportedOnFpga": True, "fpgaLatency": 1 + i % 7, "cpuLatency": 10,
                       "isBackwardNode": False, "size": 1} for i in range(N)],
            "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(N - 1)]}


def changed(*changes) -> dict:
    data = chain()
    for change in changes:
        change(data)
    return data


def node_field(k: int, **fields):
    return lambda d: d["nodes"][k].update(fields)


def edge_field(k: int, **fields):
    return lambda d: d["edges"][k].update(fields)


def add_edge(src: int, dst: int, cost: float = 0.5):
    return lambda d: d["edges"].append({"sourceId": src, "destId": dst, "cost": cost})


def message(data: dict) -> str:
    with pytest.raises(InvalidInstanceError) as info:
        parse_instance(data)
    return str(info.value)


@pytest.mark.parametrize("change, expected", [
    (node_field(1500, cpuLatency=-1), "node 1500: field 'cpuLatency' is negative (-1)"),
    (node_field(1500, fpgaLatency=True), "node 1500: field 'fpgaLatency' must be a number, got boolean"),
    (node_field(1999, fpgaLatency=float("nan")), "node 1999: field 'fpgaLatency' is NaN"),
    (node_field(3, size=float("inf")), "node 3: field 'size' is infinite"),
    (node_field(700, supportedOnFpga=None), "node 700: field 'supportedOnFpga' must be true/false or 0/1, got null"),
    (node_field(700, supportedOnFpga=2), "node 700: field 'supportedOnFpga' must be true/false or 0/1, got 2"),
    (node_field(701, isBackwardNode=0.0), "node 701: field 'isBackwardNode' must be true/false or 0/1, got 0.0"),
    (node_field(9, colorClass="a"), "node 9: field 'colorClass' must be an integer, got string"),
    (node_field(9, name=[1]), "node 9: field 'name' must be a string (an integer is read as its digits), got an array"),
    (node_field(1234, id=1233), "duplicate node id 1233"),
    (lambda d: d["nodes"][1800].pop("cpuLatency"), "node 1800: missing field 'cpuLatency'"),
    (lambda d: d["nodes"].__setitem__(1000, [1000]), "node #1000: must be an object, got array"),
    # node 1998 runs forward only after the backward node 1997
    (node_field(1997, isBackwardNode=True), "edge 1997 -> 1998 goes from a backward node to a forward node"),
], ids=["negative", "bool for a number", "NaN", "infinite", "null bool", "2 for a bool", "float for a bool",
        "string colour", "array name", "duplicate id", "missing field", "not an object", "backward to forward"])
def test_one_bad_node_among_plain_ones(change, expected):
    assert message(changed(change)) == expected


@pytest.mark.parametrize("changes, expected", [
    ([edge_field(1200, cost=-0.5)], "edge 1200 -> 1201: field 'cost' is negative (-0.5)"),
    ([edge_field(1200, size="big")], "edge 1200 -> 1201: field 'size' must be a number, got string"),
    ([edge_field(1200, destId=5000)], "edge 1200 -> 5000 refers to unknown node 5000"),
    ([edge_field(1200, destId=1200)], "edge 1200 -> 1200 is a self-loop"),
    ([edge_field(1200, sourceId=None)], "edge #1200: field 'sourceId' must be an integer, got null"),
    ([lambda d: d["edges"][5].pop("cost")], "edge 5 -> 6: missing field 'cost'"),
    ([add_edge(1500, 1700, 0.75)], "node 1500: out-edges have different costs (0.5 and 0.75); "
                                   "the transfer cost is a property of the source node"),
    # the chain 1500 -> ... -> 1502 closed by 1502 -> 1500 (node 1502's cost is 0.5 like its other edge)
    ([add_edge(1502, 1500)], "the graph has a cycle: 1500 -> 1501 -> 1502 -> 1500"),
    # the same cycle with the nodes listed backwards, an order that the bulk shortcut (every edge forward in input
    # order) does not cover: the search starts at the first node listed (1999) and meets the cycle at 1502
    ([lambda d: d["nodes"].reverse(), add_edge(1502, 1500)], "the graph has a cycle: 1502 -> 1500 -> 1501 -> 1502"),
], ids=["negative cost", "string size", "unknown end", "self-loop", "null end", "missing cost", "two costs", "cycle",
        "cycle, nodes reversed"])
def test_one_bad_edge_among_plain_ones(changes, expected):
    assert message(changed(*changes)) == expected


def test_totals_past_the_limit_among_plain_rows():
    # 6e99 on nodes 1000 and 1001: the second brings the accelerator total to 1.2e100, past 1e100, the most a
    # total may be; 1e100 on one node alone is accepted (1e100 + 7,997 rounds to 1e100)
    assert message(changed(node_field(1000, fpgaLatency=6e99), node_field(1001, fpgaLatency=6e99))) == (
        "node 1001: time on accelerator 6e+99 takes the graph's total time on accelerator above 1e+100, "
        "the most a total of times, costs or sizes may be")
    assert parse_instance(changed(node_field(1000, fpgaLatency=1e100))).nodes[1000].times[0] == 1e100


def test_spellings_read_field_by_field_give_the_plain_instance():
    """0/1 booleans, integral floats as ids, a null size and a null colour read as the plain chain does."""
    plain = parse_instance(chain())
    variant = parse_instance(changed(node_field(10, supportedOnFpga=1, isBackwardNode=0, id=10.0),
                                     node_field(11, size=None, colorClass=None), edge_field(10, sourceId=10.0),
                                     node_field(12, size=1.0, name=12)))
    # size None reads as 0 bytes; every other field equals the plain reading
    assert variant.nodes[11] == Node(11, "11", (1 + 11 % 7, 10.0), 0.0, False, None, 0.5)
    assert [n for k, n in enumerate(variant.nodes) if k != 11] == [n for k, n in enumerate(plain.nodes) if k != 11]
    assert variant.edges == plain.edges
    assert plain.nodes[10] == Node(10, "10", (4.0, 10.0), 1.0, False, None, 0.5)
    assert plain.nodes[N - 1].out_cost == 0.0 and plain.edges[0] == Edge(0, 1, None)


def test_successors_and_topological_order_keep_input_order_and_drop_repeats():
    # 3 -> 1 twice, 3 -> 2, 1 -> 2: successors of 3 in first-seen order [1, 2] (positions 1 and 2 in
    # ids [3, 1, 2]: position 0 is node 3); Kahn's order from node 3: 3, 1, 2
    nodes = [Node(i, str(i), (1.0, 1.0)) for i in (3, 1, 2)]
    problem = make_two_type_problem(nodes, [Edge(3, 1), Edge(3, 2), Edge(3, 1), Edge(1, 2)], 1, 1, 10.0)
    assert problem.successors() == [[1, 2], [2], []]
    first = problem.topological_ids()
    first.append(99)   # a caller's list is its own
    assert problem.topological_ids() == [3, 1, 2]
    assert problem.successors() == [[1, 2], [2], []]
    # ids 5, 9, 7 at positions 0, 1, 2 with edges 7 -> 9 -> 5: the order is 7, 9, 5, so position 0
    # (node 5) comes last, position 2 (node 7) first
    reversed_chain = make_two_type_problem([Node(i, str(i), (1.0, 1.0)) for i in (5, 9, 7)],
                                           [Edge(7, 9), Edge(9, 5)], 1, 1, 10.0)
    rank = reversed_chain.topological_rank()
    rank.append(99)   # a caller's list is its own
    assert reversed_chain.topological_rank() == [2, 1, 0]
    positions = reversed_chain.topological_positions()
    positions.append(99)
    assert reversed_chain.topological_positions() == [2, 1, 0]
    assert reversed_chain.topological_ids() == [7, 9, 5]


def test_contract_chain_and_colours():
    # chain 0 -> 1 -> 2 -> 3 -> 4 with nodes 1 and 3 of one colour: H has the classes {0}, {1, 3}, {2}, {4},
    # edges {0}->{1,3}, {1,3}->{2}, {2}->{1,3}, {1,3}->{4}; the cycle {1,3} <-> {2} merges into one supernode:
    # supernodes {0}, {1, 2, 3}, {4} in that order
    colours = [None, 7, None, 7, None]
    nodes = [Node(i, str(i), (1.0, 1.0), colour=c) for i, c in enumerate(colours)]
    problem = make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(4)], 2, 1, 10.0)
    result = contract(problem)
    assert result.members == ((0,), (1, 2, 3), (4,))
    assert result.succ == ((1,), (2,), ())
    assert result.of_node == (0, 1, 1, 1, 2)
    assert result.merged_zero_cost == 0
