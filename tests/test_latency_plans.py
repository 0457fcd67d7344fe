"""Plan files carry the ordered calls of the latency objective: read, written, round-tripped, bad input."""

from __future__ import annotations

import json

import pytest

from placement.errors import InvalidPlanError
import placement
from placement.io.plans import parse_plan, read_plan
from placement.result import Stage
from placement.problem.instance import ACCELERATOR, CPU, Edge, Node, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.verification.latency import evaluate_latency

A, C = ACCELERATOR, CPU


@pytest.fixture
def chain():
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in (1, 2, 3)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 10, name="chain")


def test_calls_are_read_from_devices_fpgas_and_cpus():
    ours = {"devices": [{"type": A, "nodes": [1, 3], "calls": [[1], [3.0]]},
                        {"type": A, "nodes": [2], "calls": None}, {"type": C, "nodes": [4], "calls": []}]}
    assert parse_plan(ours) == Plan((DeviceAssignment(A, (1, 3), ((1,), (3,))), DeviceAssignment(A, (2,)),
                                     DeviceAssignment(C, (4,))))
    theirs = {"fpgas": [{"nodes": [1, 3], "calls": [[3], [1]]}], "cpus": [{"nodes": [2]}]}
    assert parse_plan(theirs) == Plan((DeviceAssignment(A, (1, 3), ((3,), (1,))), DeviceAssignment(C, (2,))))


@pytest.mark.parametrize("data, reason", [
    ({"devices": [{"type": A, "nodes": [1], "calls": {}}]},
     "devices[0].calls: must be an array of calls (arrays of node ids), got object"),
    ({"fpgas": [{"nodes": [1]}, {"nodes": [2], "calls": [[2], 3]}]},
     "fpgas[1].calls[1]: must be an array of node ids, got integer"),
    ({"fpgas": [{"nodes": [1, 2], "calls": [[1, "2"]]}]},
     "fpgas[0].calls[0][1]: node id must be an integer, got string"),
    ({"cpus": [{"nodes": [1], "calls": [[1.5]]}]},
     "cpus[0].calls[0][0]: node id must be an integer, got 1.5"),
])
def test_malformed_calls(tmp_path, data, reason):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidPlanError) as info:
        read_plan(path)
    assert str(info.value) == f"{path}: {reason}"


def test_calls_are_written_only_where_a_device_has_them_and_round_trip(tmp_path, chain):
    plan = Plan((DeviceAssignment(A, (1, 3), ((1,), (3,))), DeviceAssignment(A, (2,))))
    result = placement.Result(
        status="feasible", value=4.0, bound=0.0, gap=1.0, method="test", backend=None, objective="latency",
        contiguity="none", runtime_s=0.0,
        plan=(Stage(A, (1, 3), 0.0, 0.0, ((1,), (3,))), Stage(A, (2,), 0.0, 0.0)))
    data = result.to_json()
    assert data["devices"][0]["calls"] == [[1], [3]] and "calls" not in data["devices"][1]
    assert data["fpgas"][0]["calls"] == [[1], [3]] and "calls" not in data["fpgas"][1]
    assert list(data["devices"][0]) == ["type", "load", "memory", "nodes", "calls"]
    path = tmp_path / "out.json"
    path.write_text(json.dumps(data))
    again = read_plan(path)
    assert again == plan == result.to_plan()
    assert evaluate_latency(chain, again).latency == evaluate_latency(chain, plan).latency
