"""Plan files: Tarnawski's format and ours, error messages, the JSON written for a solution."""

from __future__ import annotations

import json
import math

import pytest

from placement.errors import InvalidPlanError
from placement.io.plans import FORMAT, parse_plan, plan_to_json, read_plan, write_plan
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.verification.evaluate import evaluate

A, C = ACCELERATOR, CPU


def write(tmp_path, data, name="plan.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def chain() -> Instance:
    """1 -> 2 -> 3; accelerator times 1, 2, 3; CPU times 4, 5, 6; c(1) = 0.5, c(2) = 0.25; memory 1 each."""
    nodes = [Node(1, "a", (1.0, 4.0), 1.0, False, None, 0.5), Node(2, "b", (2.0, 5.0), 1.0, False, None, 0.25),
             Node(3, "c", (3.0, 6.0), 1.0, False, None, 0.0)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 10, name="chain")


def test_read_tarnawski_plan(tmp_path):
    path = write(tmp_path, {"maxLoad": -1, "cpus": [{"load": 0.0, "nodes": [3]}],
                            "fpgas": [{"load": -1, "nodes": [2, 1.0]}, {"nodes": []}]})
    # fpgas first (file order), then cpus, whatever the key order in the file
    assert read_plan(path) == Plan((DeviceAssignment(A, (2, 1)), DeviceAssignment(A, ()),
                                    DeviceAssignment(C, (3,))))
    assert read_plan(write(tmp_path, {"fpgas": [{"nodes": [1]}]})) == Plan((DeviceAssignment(A, (1,)),))


def test_read_our_plan_prefers_devices(tmp_path):
    data = {"format": FORMAT, "fpgas": [{"load": 1, "nodes": [1]}], "cpus": [],
            "devices": [{"type": "cpu", "nodes": [2]}, {"type": "accelerator", "load": 1, "nodes": [1]}]}
    assert read_plan(write(tmp_path, data)) == Plan((DeviceAssignment(C, (2,)), DeviceAssignment(A, (1,))))


@pytest.mark.parametrize("data, reason", [
    ([], "the plan must be a JSON object, got array"),
    ({"maxLoad": 3}, "the plan has none of the fields 'devices', 'fpgas', 'cpus'"),
    ({"fpgas": {}}, "field 'fpgas' must be an array, got object"),
    ({"fpgas": [], "cpus": 3}, "field 'cpus' must be an array, got integer"),
    ({"fpgas": [[1, 2]]}, "fpgas[0]: must be an object, got array"),
    ({"fpgas": [{"load": 1}]}, "fpgas[0]: missing field 'nodes'"),
    ({"fpgas": [{"nodes": 1}]}, "fpgas[0].nodes: must be an array of node ids, got integer"),
    ({"fpgas": [{"nodes": [1]}, {"nodes": [2, 1.5]}]}, "fpgas[1].nodes[1]: node id must be an integer, got 1.5"),
    ({"cpus": [{"nodes": ["3"]}]}, "cpus[0].nodes[0]: node id must be an integer, got string"),
    ({"cpus": [{"nodes": [True]}]}, "cpus[0].nodes[0]: node id must be an integer, got boolean"),
    ({"devices": {}}, "field 'devices' must be an array, got object"),
    ({"devices": [{"nodes": [1]}]}, "devices[0]: missing field 'type'"),
    ({"devices": [{"type": 1, "nodes": [1]}]}, "devices[0]: field 'type' must be a string, got integer"),
    ({"devices": [{"type": "cpu"}]}, "devices[0]: missing field 'nodes'"),
    ({"devices": [{"type": "cpu", "nodes": [None]}]}, "devices[0].nodes[0]: node id must be an integer, got null"),
])
def test_malformed_plans(tmp_path, data, reason):
    path = write(tmp_path, data)
    with pytest.raises(InvalidPlanError) as info:
        read_plan(path)
    assert str(info.value) == f"{path}: {reason}"


def test_unreadable_plan_files(tmp_path):
    path = write(tmp_path, '{"fpgas": [}')
    with pytest.raises(InvalidPlanError) as info:
        read_plan(path)
    assert str(info.value) == f"{path}: malformed JSON at line 1, column 12: Expecting value"
    with pytest.raises(InvalidPlanError, match="no such file"):
        read_plan(tmp_path / "missing.json")


def solution_for(problem: Instance, plan: Plan | None, **kw) -> Solution:
    return Solution(kw.pop("status", Status.OPTIMAL), plan, method="test", contiguity="stages", **kw)


def test_plan_to_json(chain):
    plan = Plan((DeviceAssignment(A, (1, 2)), DeviceAssignment(C, (3,))))
    ev = evaluate(chain, plan, "stages")
    sol = solution_for(chain, plan, objective=6.0, bound=5.0, runtime_s=0.5, stats={"pairs": 3, "x": math.inf})
    data = plan_to_json(chain, sol, ev)
    # accelerator {1, 2}: 1 + 2 compute + Out {2} 0.25 = 3.25; CPU {3}: 6
    assert data["maxLoad"] == 6.0
    assert data["fpgas"] == [{"load": 3.25, "nodes": [1, 2]}]
    assert data["cpus"] == [{"load": 6.0, "nodes": [3]}]
    assert data["devices"] == [{"type": A, "load": 3.25, "memory": 2.0, "nodes": [1, 2]},
                               {"type": C, "load": 6.0, "memory": 1.0, "nodes": [3]}]
    assert data["format"] == FORMAT and data["instance"] == "chain"
    assert (data["method"], data["objective_kind"], data["contiguity"], data["status"]) == \
        ("test", "throughput", "stages", "optimal")
    assert (data["objective"], data["bound"], data["runtime_s"]) == (6.0, 5.0, 0.5)
    assert data["gap"] == pytest.approx(1 / 6)
    assert data["stats"] == {"pairs": 3, "x": None}          # inf is not JSON
    assert data["verified"] == {"valid": True, "max_load": 6.0, "violations": [], "contiguity": "stages",
                                "finest_class": "stages", "inferred": []}
    json.dumps(data, allow_nan=False)


def test_plan_to_json_without_plan(chain):
    data = plan_to_json(chain, solution_for(chain, None, status=Status.INFEASIBLE, bound=math.inf), None)
    assert data["maxLoad"] is None and data["fpgas"] == [] and data["devices"] == []
    assert data["objective"] is None and data["bound"] is None and data["gap"] is None
    assert data["status"] == "infeasible" and data["verified"] is None
    json.dumps(data, allow_nan=False)


def test_plan_to_json_reports_violations(chain):
    plan = Plan((DeviceAssignment(A, (1, 3)),))
    data = plan_to_json(chain, solution_for(chain, plan, objective=1.0), None)  # evaluated on the spot
    assert data["verified"]["valid"] is False
    assert data["verified"]["violations"] == [
        "node 2 is not placed",
        "stages: no pipeline order of the devices exists: cycle 0 -> unplaced node 2 -> 0"]


def test_round_trip(tmp_path, chain):
    plan = Plan((DeviceAssignment(A, (2,)), DeviceAssignment(C, (3,)), DeviceAssignment(A, (1,))))
    ev = evaluate(chain, plan)
    path = tmp_path / "out.json"
    write_plan(path, chain, solution_for(chain, plan, objective=ev.max_load, bound=-math.inf), ev)
    text = path.read_text()
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert read_plan(path) == plan                        # "devices" keeps the pipeline order
    # a reader that knows only Tarnawski's fields sees the accelerators, then the CPUs
    tarnawski_only = {k: data[k] for k in ("maxLoad", "fpgas", "cpus")}
    assert parse_plan(tarnawski_only) == Plan((DeviceAssignment(A, (2,)), DeviceAssignment(A, (1,)),
                                               DeviceAssignment(C, (3,))))
    assert evaluate(chain, read_plan(path)).max_load == data["maxLoad"] == ev.max_load


def test_other_device_types_appear_in_devices_only():
    nodes = [Node(1, "a", (1.0, 2.0, 3.0), 0.0, False, None, 1.0), Node(2, "b", (1.0, 2.0, 3.0))]
    types = (DeviceType("gpu", 1), DeviceType(ACCELERATOR, 1), DeviceType("tpu", 1, pays_comm=False))
    problem = Instance(tuple(nodes), (Edge(1, 2),), types, "three")
    plan = Plan((DeviceAssignment("gpu", (1,)), DeviceAssignment(ACCELERATOR, (2,))))
    data = plan_to_json(problem, solution_for(problem, plan), evaluate(problem, plan))
    # gpu {1}: 1 + Out {1} 1 = 2; accelerator {2}: 2 + In {1} 1 = 3
    assert data["fpgas"] == [{"load": 3.0, "nodes": [2]}] and data["cpus"] == []
    assert [d["type"] for d in data["devices"]] == ["gpu", ACCELERATOR]
    assert data["maxLoad"] == 3.0
