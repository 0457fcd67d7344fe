"""Plan files: Tarnawski's format and ours, error messages, the JSON written for a solution."""

from __future__ import annotations

import json
import math

import pytest

from placement.errors import InvalidPlanError
import placement
from placement.io.plans import FORMAT, parse_plan, plan_document, read_plan
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
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
    """``devices`` gives the pipeline order (the CPU first here), which ``fpgas`` and ``cpus`` cannot;
    where they place the nodes otherwise (the CPU node missing, or every node on one accelerator), which
    of the two was meant is not clear, and the plan is refused."""
    devices = [{"type": "cpu", "nodes": [2]}, {"type": "accelerator", "load": 1, "nodes": [1]}]
    data = {"format": FORMAT, "fpgas": [{"load": 1, "nodes": [1]}], "cpus": [{"nodes": [2]}], "devices": devices}
    assert read_plan(write(tmp_path, data)) == Plan((DeviceAssignment(C, (2,)), DeviceAssignment(A, (1,))))
    for key, other in (("cpus", []), ("fpgas", [{"nodes": [1, 2]}])):
        with pytest.raises(InvalidPlanError, match=f"field '{key}' places the nodes or calls otherwise than field "
                                                   "'devices' does"):
            read_plan(write(tmp_path, {**data, key: other}))
    # an accelerator renamed in 'devices' alone: the type is named, not the disagreement it causes
    renamed = [devices[0], {**devices[1], "type": "gpu"}]
    with pytest.raises(InvalidPlanError, match=r"plan.json: devices\[1\] has type 'gpu', but the plan's fields "
                                               r"'fpgas' and 'cpus' place every node on an 'accelerator' or a 'cpu'"):
        read_plan(write(tmp_path, {**data, "devices": renamed}))


def test_calls_of_devices_and_fpgas_must_agree(tmp_path):
    """A latency plan's calls listed in both fields: the same calls in the same order (each call's nodes in
    any order) are one plan; calls in another order are two, and the plan is refused, as nodes placed
    otherwise are (``devices`` was taken silently)."""
    def device(calls):
        return {"type": "accelerator", "nodes": [10, 11, 12], "calls": calls}

    data = {"format": FORMAT, "devices": [device([[10], [12, 11]])],
            "fpgas": [{"nodes": [12, 11, 10], "calls": [[10], [11, 12]]}]}
    assert read_plan(write(tmp_path, data)).devices[0].calls == ((10,), (12, 11))
    data["fpgas"][0]["calls"] = [[12, 11], [10]]
    with pytest.raises(InvalidPlanError, match="field 'fpgas' places the nodes or calls otherwise than field "
                                               "'devices' does"):
        read_plan(write(tmp_path, data))


@pytest.mark.parametrize("data, reason", [
    ([], "the plan must be a JSON object, got array"),
    ({"maxLoad": 3}, "the plan has none of the fields 'devices', 'fpgas', 'cpus'"),
    ({"format": "placement-plan/99", "devices": []}, "field 'format' must be 'placement-plan/1', got 'placement-plan/99'"),
    ({"format": "placement-parallel-plan/1", "stages": []},
     "field 'format' must be 'placement-plan/1', got 'placement-parallel-plan/1'"),
    # a parallel plan as the simulator's docs write it by hand (no format) met where a plan of devices is read (an
    # instance that is no Piper instance): it was told only that it has none of the fields
    ({"schedule": "piper", "stages": [{"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "a"}}]},
     "the plan has none of the fields 'devices', 'fpgas', 'cpus'; its 'stages' give degrees 'd' and 't': it is a "
     "data- and tensor-parallel plan, which a Piper instance takes"),
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


@pytest.mark.parametrize("text, where", [
    ('{"maxLoad": NaN, "fpgas": [{"nodes": [1, 2]}]}', "maxLoad is NaN"),
    ('{"fpgas": [{"load": 1e400, "nodes": [1, 2]}]}', "fpgas[0].load is Infinity"),
    ('{"fpgas": [{"nodes": [1, 2]}], "about": {"x": [1, -Infinity]}}', "about.x[1] is -Infinity"),
])
def test_a_plan_file_with_a_number_that_is_not_finite_is_refused(tmp_path, text, where):
    # README, Limits: no file holds NaN or an infinity, not even in a field that only records a claim
    path = write(tmp_path, text)
    with pytest.raises(InvalidPlanError) as info:
        read_plan(path)
    assert str(info.value) == f"{path}: {where}; every number must be finite"


def written(problem: Instance, plan: Plan) -> dict:
    """The plan file of ``plan`` as ``placement.solve`` writes it (method expert: the plan as it is)."""
    return json.loads(json.dumps(placement.solve(problem, method="expert", split=plan).to_json(), allow_nan=False))


def test_plan_file_of_a_result(chain):
    plan = Plan((DeviceAssignment(A, (1, 2)), DeviceAssignment(C, (3,))))
    data = written(chain, plan)
    # accelerator {1, 2}: 1 + 2 compute + Out {2} 0.25 = 3.25; CPU {3}: 6
    assert data["maxLoad"] == 6.0
    assert data["fpgas"] == [{"load": 3.25, "nodes": [1, 2]}]
    assert data["cpus"] == [{"load": 6.0, "nodes": [3]}]
    assert data["devices"] == [{"type": A, "load": 3.25, "memory": 2.0, "nodes": [1, 2]},
                               {"type": C, "load": 6.0, "memory": 1.0, "nodes": [3]}]
    assert data["format"] == FORMAT and data["instance"] == "chain"
    assert (data["method"], data["objective_kind"], data["contiguity"], data["status"]) == \
        ("expert", "throughput", "stages", "feasible")
    # a heuristic proves nothing; the instance's simple bound holds: c alone takes 3 on its fastest device
    assert (data["objective"], data["bound"], data["gap"]) == (6.0, 3.0, 0.5)
    assert data["verified"] == {"valid": True, "objective": "throughput", "contiguity": "stages", "value": 6.0,
                                "max_load": 6.0, "violations": [], "finest_class": "stages", "inferred": [],
                                "calls": None, "ledger_agrees": None, "notes": []}


def test_an_expert_split_naming_a_node_the_instance_lacks_is_no_plan(chain):
    # it ended in a KeyError while the result's plan was put in the instance's order, before any check
    plan = Plan((DeviceAssignment(A, (1, 2, 9)), DeviceAssignment(C, (3,))))
    result = placement.solve(chain, method="expert", split=plan)
    assert (result.status, result.plan) == ("no_solution", ())
    assert result.message == ("the plan failed independent verification: device 0 (accelerator): node 9 is not in "
                              "the instance")

def test_plan_file_without_plan():
    result = placement.Result(status="infeasible", value=None, bound=None, gap=None, plan=(), method="dp",
                              backend=None, objective="throughput", contiguity="stages", runtime_s=0.0,
                              stats={"x": math.inf})
    data = result.to_json()
    assert data["maxLoad"] is None and data["fpgas"] == [] and data["devices"] == []
    assert data["objective"] is None and data["bound"] is None and data["gap"] is None
    assert data["status"] == "infeasible" and data["verified"] is None
    assert data["stats"] == {"x": None}          # inf is not JSON
    json.dumps(data, allow_nan=False)


def test_plan_file_reports_violations(chain):
    data = written(chain, Plan((DeviceAssignment(A, (1, 3)),)))
    assert (data["status"], data["devices"]) == ("no_solution", [])
    assert data["verified"]["valid"] is False
    assert data["verified"]["violations"] == ["node 2 is not placed"]
    # the method's own note follows, where it adds to the violation
    assert data["message"] == ("the plan failed independent verification: node 2 is not placed; method 'expert' "
                               "does not keep to contiguity 'stages': its plan is of class 'none'")


def test_round_trip(tmp_path, chain):
    plan = Plan((DeviceAssignment(A, (2,)), DeviceAssignment(C, (3,)), DeviceAssignment(A, (1,))))
    path = tmp_path / "out.json"
    path.write_text(json.dumps(written(chain, plan), indent=2))
    text = path.read_text()
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert read_plan(path) == plan                        # "devices" keeps the pipeline order
    # a reader that knows only Tarnawski's fields sees the accelerators, then the CPUs
    tarnawski_only = {k: data[k] for k in ("maxLoad", "fpgas", "cpus")}
    assert parse_plan(tarnawski_only) == Plan((DeviceAssignment(A, (2,)), DeviceAssignment(A, (1,)),
                                               DeviceAssignment(C, (3,))))
    assert evaluate(chain, read_plan(path)).max_load == data["maxLoad"]


def test_bare_plan_document_round_trip():
    plan = Plan((DeviceAssignment(A, (1, 3), ((1,), (3,))), DeviceAssignment(C, (2,))))
    assert plan_document(plan) == {"format": FORMAT, "devices": [
        {"type": A, "nodes": [1, 3], "calls": [[1], [3]]}, {"type": C, "nodes": [2]}]}
    assert parse_plan(plan_document(plan)) == plan


def test_other_device_types_appear_in_devices_only():
    """Tarnawski's 'fpgas' and 'cpus' would list only the accelerator's node, which a reader of those fields took
    for the whole plan: they are left out where a device has another type, and 'devices' reads back."""
    nodes = [Node(1, "a", (1.0, 2.0, 3.0), 0.0, False, None, 1.0), Node(2, "b", (1.0, 2.0, 3.0))]
    types = (DeviceType("gpu", 1), DeviceType(ACCELERATOR, 1), DeviceType("tpu", 1, pays_comm=False))
    problem = Instance(tuple(nodes), (Edge(1, 2),), types, "three")
    plan = Plan((DeviceAssignment("gpu", (1,)), DeviceAssignment(ACCELERATOR, (2,))))
    data = written(problem, plan)
    # gpu {1}: 1 + Out {1} 1 = 2; accelerator {2}: 2 + In {1} 1 = 3
    assert "fpgas" not in data and "cpus" not in data
    assert [d["type"] for d in data["devices"]] == ["gpu", ACCELERATOR]
    assert parse_plan(data) == plan
    assert data["maxLoad"] == 3.0


@pytest.mark.parametrize("key, field, meant", [("devices", "call", "calls"), ("devices", "W_tasks", "w_tasks"),
                                               ("fpgas", "Nodes", "nodes")])
def test_a_misspelt_device_field_is_refused_by_both_readers(tmp_path, chain, key, field, meant):
    """A device entry's ``call`` was ignored, the device then running its nodes as one call; a field beside
    the one it resembles (``load`` and ``loads``) is another field and ignored."""
    plan = Plan((DeviceAssignment(A, (1, 2)), DeviceAssignment(C, (3,))))
    data = written(chain, plan)
    if key == "fpgas":
        data.pop("devices")
    data[key][0]["loads"] = [1]
    assert read_plan(write(tmp_path, data)) == plan
    data[key][0][field] = data[key][0].pop(meant, [[1], [2]])
    path = write(tmp_path, data)
    message = f"{key}[0]: unknown field {field!r}; did you mean {meant!r}? (a field this like one the format " \
              "reads is refused, not ignored)"
    with pytest.raises(InvalidPlanError) as caught:
        read_plan(path)
    assert str(caught.value) == f"{path}: {message}"
    if key == "devices":
        with pytest.raises(InvalidPlanError) as caught:
            placement.Result.from_json(data)
        assert str(caught.value) == message


@pytest.mark.parametrize("field, meant", [("contiguty", "contiguity"), ("Contiguity", "contiguity"),
                                          ("objectve", "objective"), ("objectiveKind", "objective_kind"),
                                          ("maxload", "maxLoad"), ("overides", "overrides"), ("bakward", "backward"),
                                          ("verfied", "verified")])
def test_a_misspelt_field_the_check_reads_is_refused(chain, field, meant):
    """``contiguty: "stages"`` was ignored, and a plan of class none found valid where ``contiguity`` makes it
    invalid; so with every field a check of the plan reads (the class, the objective and claims, the overrides,
    the backward model, the calls): alike one, a field is taken for its misspelling."""
    data = {"devices": [{"type": A, "nodes": [1, 3]}, {"type": A, "nodes": [2]}], field: "stages"}
    data["backends"] = data["note"] = "x"   # alike fields no check reads, before it in sorted order: no cover
    with pytest.raises(InvalidPlanError) as caught:
        parse_plan(data)
    assert str(caught.value) == f"unknown field {field!r}; did you mean {meant!r}? (a field this like one the " \
                                "format reads is refused, not ignored)"


@pytest.mark.parametrize("field, meant", [("fpga", "fpgas"), ("CPUs", "cpus"), ("device", "devices")])
def test_a_misspelt_placing_field_is_refused(tmp_path, chain, field, meant):
    """A plan's ``fpga`` was ignored, the plan then placing the CPU's nodes alone (and verify listing every
    other node as not placed); a field written beside the placing fields (``maxLoad``, ``stats``) or unlike
    them is no misspelling."""
    data = written(chain, Plan((DeviceAssignment(A, (1, 2)), DeviceAssignment(C, (3,)))))
    if meant != "devices":
        data.pop("devices")
    data["stagse"] = 1
    data[field] = data.pop(meant)
    with pytest.raises(InvalidPlanError) as caught:
        parse_plan(data)
    assert str(caught.value) == f"unknown field {field!r}; did you mean {meant!r}? (a field this like one the " \
                                "format reads is refused, not ignored)"
