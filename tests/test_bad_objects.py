"""Instances and plans built in Python: numpy numbers are taken as the numbers they are, and
anything else of the wrong kind is refused at once with one exact message, never a bare
TypeError from deep inside a solver or a silently different model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import placement
from placement import DeviceAssignment, DeviceType, Edge, Instance, Node, Plan
from placement.errors import InvalidInstanceError, InvalidPlanError

TYPES = (DeviceType("accelerator", 2, 10.0), DeviceType("cpu", 1, math.inf, False))


def pair(first: Node, types=TYPES) -> Instance:
    return Instance((first, Node(2, "y", (1.0, 5.0))), (Edge(first.id, 2),), types)


def test_numpy_numbers_are_the_numbers_they_hold():
    # x (1 on an accelerator) -> y (1), no transfer cost: one accelerator each, max-load 1
    numpy_typed = Instance((Node(np.int64(1), "x", np.array([1.0, 5.0]), memory=np.float32(1.0),
                                 backward=np.bool_(False), colour=np.int32(7)),
                            Node(2, "y", (np.float32(1.0), np.int64(5)))),
                           (Edge(np.int64(1), 2, size=np.float64(4.0)),),
                           (DeviceType("accelerator", np.int64(2), np.float32(10.0)),
                            DeviceType("cpu", 1, math.inf, np.bool_(False))))
    plain = Instance((Node(1, "x", (1.0, 5.0), memory=1.0, colour=7), Node(2, "y", (1.0, 5.0))),
                     (Edge(1, 2, size=4.0),), TYPES)
    assert numpy_typed == plain
    assert type(numpy_typed.nodes[0].id) is int and type(numpy_typed.nodes[0].backward) is bool
    assert placement.solve(numpy_typed).value == 1.0


@pytest.mark.parametrize("build,message", [
    (lambda: Instance(None, (), TYPES), "nodes must be a sequence of Node, got NoneType"),
    (lambda: Instance((Node(1, "x", (1.0, 5.0)), "n2"), (), TYPES), "nodes[1] must be a Node, got str"),
    (lambda: Instance((Node(1, "x", (1.0, 5.0)), Node(2, "y", (1.0, 5.0))), ((1, 2),), TYPES),
     "edges[0] must be an Edge, got tuple"),
    (lambda: Instance((Node(1, "x", (1.0, 5.0)),), (), ({"name": "cpu"},)),
     "device_types[0] must be a DeviceType, got dict"),
    (lambda: pair(Node("a", "x", (1.0, 5.0))), "a node id must be an integer, got str 'a'"),
    (lambda: pair(Node(1.5, "x", (1.0, 5.0))), "a node id must be an integer, got float 1.5"),
    (lambda: pair(Node(True, "x", (1.0, 5.0))), "a node id must be an integer, got bool True"),
    (lambda: pair(Node(1, "x", (1.0, 5.0), colour=[1])), "node 1: colour must be an integer or None, got list [1]"),
    (lambda: pair(Node(1, "x", 5.0)),
     "node 1: times must be a sequence of numbers (None where unsupported), got float"),
    # a mapping's or a set's iteration is no time per device type in order: {0: 1.0, 1: 5.0} read as times 0 and 1
    (lambda: pair(Node(1, "x", {0: 1.0, 1: 5.0})),
     "node 1: times must be a sequence of numbers (None where unsupported), got dict"),
    (lambda: pair(Node(1, "x", {1.0, 5.0})),
     "node 1: times must be a sequence of numbers (None where unsupported), got set"),
    (lambda: pair(Node(1, "x", (1.0, 5.0), backward=True, weight_times=0.5)),
     "node 1: weight_times must be a sequence of numbers (None where unsupported), got float"),
    (lambda: pair(Node(1, "x", (1.0, 5.0), backward=True, weight_times={0: 0.5, 1: 2.5})),
     "node 1: weight_times must be a sequence of numbers (None where unsupported), got dict"),
    (lambda: pair(Node(1, "x", (1.0, 5.0), backward="False")),
     "node 1: backward must be true or false, got str 'False'"),
    (lambda: pair(Node(1, "x", (1.0, 5.0)), (TYPES[0], DeviceType("cpu", 1, math.inf, "False"))),
     "device type 'cpu': pays_comm must be true or false, got str 'False'"),
    (lambda: pair(Node(1, "x", (1.0, 5.0)), (TYPES[0], DeviceType(None, 1, math.inf, False))),
     "a device type's name must be a string, got NoneType"),
])
def test_a_malformed_instance_object_is_refused_by_name(build, message):
    with pytest.raises(InvalidInstanceError) as caught:
        build()
    assert str(caught.value) == message


@pytest.mark.parametrize("build,message", [
    (lambda: DeviceAssignment("accelerator", "12"),
     "device of type 'accelerator': nodes must be a sequence of node ids, got str"),
    (lambda: DeviceAssignment("accelerator", None),
     "device of type 'accelerator': nodes must be a sequence of node ids, got NoneType"),
    (lambda: DeviceAssignment("accelerator", (1, 2.0)),
     "device of type 'accelerator': nodes: a node id must be an integer, got float 2.0"),
    (lambda: DeviceAssignment("accelerator", (1,), calls=((1,), "2")),
     "device of type 'accelerator': calls must be a sequence of node ids, got str"),
    (lambda: DeviceAssignment("accelerator", {1: 0, 2: 0}),
     "device of type 'accelerator': nodes must be a sequence of node ids, got dict"),
    (lambda: DeviceAssignment(3, (1,)), "a device's type must be a string, got int"),
    (lambda: Plan([{"type": "accelerator", "nodes": [1]}]), "devices[0] must be a DeviceAssignment, got dict"),
    (lambda: Plan(None), "a plan's devices must be a sequence of DeviceAssignment, got NoneType"),
])
def test_a_malformed_plan_object_is_refused_by_name(build, message):
    with pytest.raises(InvalidPlanError) as caught:
        build()
    assert str(caught.value) == message


def test_a_plan_of_numpy_ids_is_verified_as_its_integers():
    # chain4 split {1, 2} | {3, 4}: 7.5 (tests/test_cli_milp.py derives it)
    plan = Plan([DeviceAssignment("accelerator", np.array([1, 2])), DeviceAssignment("accelerator", [np.int64(3), 4])])
    assert plan.devices[0].nodes == (1, 2)
    assert placement.verify("instances/tiny/chain4.json", plan).value == 7.5


def test_a_plan_document_that_holds_itself_is_refused():
    """No JSON text decodes to a container that is its own element; the search of a plan document for integers
    past the float range followed one forever (verify, simulate and Result.from_json hung, taking memory without
    bound), where an instance document is refused by name. A dict shared by two fields is no cycle."""
    plan = {"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "stats": {}}
    plan["stats"]["runs"] = [plan]
    message = "stats.runs[0] holds itself (a container that is its own element is no JSON document)"
    for call in (lambda: placement.verify("instances/tiny/chain4.json", plan),
                 lambda: placement.simulate("instances/tiny/chain4.json", plan, microbatches=4),
                 lambda: placement.Result.from_json(plan)):
        with pytest.raises(InvalidPlanError) as caught:
            call()
        assert str(caught.value) == message
    parallel = {"schedule": "piper", "stages": [{"nodes": [0, 1], "d": 1, "t": 1, "tmpcs": {"0": "x", "1": "x"}}]}
    parallel["stages"][0]["about"] = parallel["stages"]
    with pytest.raises(InvalidPlanError) as caught:
        placement.verify(_piper_pair(), parallel)
    assert str(caught.value) == "stages[0].about holds itself (a container that is its own element is no JSON document)"
    shared = {"seed": 1}
    assert placement.verify("instances/tiny/chain4.json", {**plan, "stats": {"a": shared, "b": shared}}).value == 7.5


def _piper_document(change):
    from tests.test_piper_io import instance

    document = instance()
    change(document)
    return document


@pytest.mark.parametrize("change, message", [
    (lambda d: d["nodes"][0].update(TMPCs={1: d["nodes"][0]["TMPCs"]["1"]}),
     "nodes[0].TMPCs: a key must be a string, as a JSON object's are, got integer 1"),
    (lambda d: d["nodes"][1]["TMPCs"]["1"][0].update(syncTimeFw={1: 0.0}),
     "nodes[1].TMPCs.1[0].syncTimeFw: a key must be a string, as a JSON object's are, got integer 1"),
    (lambda d: d.update(deviceTypes={7: {"count": 1, "memory": 1.0}}),
     "deviceTypes: a key must be a string, as a JSON object's are, got integer 7"),
])
def test_a_piper_document_key_that_is_not_a_string_is_refused_by_name(change, message):
    # the reader matched the keys against regular expressions: a TypeError from deep inside it
    with pytest.raises(InvalidInstanceError) as caught:
        placement.load(_piper_document(change))
    assert str(caught.value) == message


def test_a_document_key_that_is_not_a_string_is_refused_by_name():
    document = {"maxSizePerFPGA": 10.0, "maxFPGAs": 1, "maxCPUs": 0, "edges": [],
                "nodes": [{"id": 1, "name": "a", "supportedOnFpga": 1, "fpgaLatency": 1.0, "cpuLatency": 2.0}]}
    with pytest.raises(InvalidInstanceError) as caught:   # sorting the unknown fields None and (1,): a TypeError
        placement.load({**document, None: 1, (1,): 2})
    assert str(caught.value) == "the document: a key must be a string, as a JSON object's are, got None"
    parallel = {"schedule": "piper", "stages": [{"nodes": [0, 1], "d": 1, "t": 1, "tmpcs": {0: "x", 1: "x"}}]}
    with pytest.raises(InvalidPlanError) as caught:
        placement.verify(_piper_pair(), parallel)
    assert str(caught.value) == "stages[0].tmpcs: a key must be a string, as a JSON object's are, got integer 0"


def _with_support(value):
    """The document of chain4 (two accelerators, no CPU) whose node 2 says ``supportedOnFpga: value``."""
    import json

    with open("instances/tiny/chain4.json") as file:
        document = json.load(file)
    document["nodes"][1]["supportedOnFpga"] = value
    return document


@pytest.mark.parametrize("value, shown", [(np.array([1.0]), "ndarray"), (np.array([[1]]), "ndarray"),
                                          (np.array([0.0, 1.0]), "ndarray"), (np.array(1.0), "1.0")])
def test_a_flag_of_a_document_that_is_an_array_is_refused(value, shown):
    # a flag was read as "value in (0, 1)": an array of one 1 was true, and one of two values a bare ValueError
    with pytest.raises(InvalidInstanceError) as caught:
        placement.load(_with_support(value))
    assert str(caught.value) == f"node 2: field 'supportedOnFpga' must be true/false or 0/1, got {shown}"


@pytest.mark.parametrize("value", [np.bool_(True), np.int64(1), np.array(1), 1, True])
def test_a_flag_of_a_document_that_is_a_numpy_scalar_is_its_value(value):
    assert placement.load(_with_support(value)).nodes[1].times == (3.0, 30.0)


def test_hypar_takes_numpy_integers():
    result = placement.hypar("lenet-c", accelerators=np.int64(4), batch=np.int64(32))
    assert (type(result.accelerators), result.accelerators) == (int, 4)


def _piper_pair():
    from placement.io.piper import TMPC, PiperEdge, PiperInstance, PiperNode

    tmpc = lambda fw, bw: (TMPC("x", 1.0, 0.0, 1.0, 0.0, fw, bw),)  # noqa: E731
    nodes = (PiperNode(0, "a", {1: tmpc({}, {1: 0.0})}), PiperNode(1, "b", {1: tmpc({0: 0.0}, {})}))
    return PiperInstance("pair", 4, 100.0, 1.0, 4, nodes, (PiperEdge(0, 1, 1.0),))


@pytest.mark.parametrize("build,message", [
    (lambda s: s.ParallelStage((0,), "1", 1, {0: "x"}), "a stage's d must be an integer, got str '1'"),
    (lambda s: s.ParallelStage((0,), 1, None, {0: "x"}), "a stage's t must be an integer, got NoneType None"),
    (lambda s: s.ParallelStage((0,), True, 1, {0: "x"}), "a stage's d must be an integer, got bool True"),
    (lambda s: s.ParallelStage(("0",), 1, 1, {0: "x"}), "a stage's nodes: a node id must be an integer, got str '0'"),
    (lambda s: s.ParallelStage((0,), 1, 1, {0: 3}),
     "a stage's tmpcs must map node ids to TMPC ids (strings), got int 3"),
    (lambda s: s.ParallelStage((0,), 1, 1, [0]), "a stage's tmpcs must map node ids to TMPC ids (strings), got list"),
    (lambda s: s.ParallelStage((0,), 1, 1, {0: "x"}, None), "a stage's device_type must be a string, got NoneType"),
    (lambda s: s.ParallelPlan(({"nodes": [0]},)), "stages[0] must be a ParallelStage, got dict"),
    (lambda s: s.ParallelPlan((), "bogus"), "unknown schedule 'bogus' (known: piper, 1f1b, gpipe, interleaved)"),
    (lambda s: s.ParallelPlan((), "piper", 0), "chunks must be a positive integer, not 0"),
    (lambda s: s.ParallelPlan((), "interleaved", "2"), "chunks must be a positive integer, not '2'"),
])
def test_a_malformed_parallel_plan_object_is_refused_by_name(build, message):
    # verify took ParallelPlan(..., "bogus") as valid (an unknown schedule held 1F1B's micro-batches), and other
    # fields of the wrong kind ended in a TypeError or AttributeError inside the evaluator
    from placement.parallel import plan as parallel_plan

    with pytest.raises(InvalidPlanError) as caught:
        build(parallel_plan)
    assert str(caught.value) == message


def test_a_parallel_plan_of_numpy_integers_is_checked_as_its_integers():
    from placement.parallel import ParallelPlan, ParallelStage

    stages = (ParallelStage(np.array([0]), np.int64(1), np.int32(1), {np.int64(0): "x"}),
              ParallelStage([np.int64(1)], np.int64(2), 1, {1: "x"}))
    plan = ParallelPlan(stages, "1f1b", np.int64(1))
    assert (type(plan.stages[0].d), plan.stages[0].nodes, dict(plan.stages[0].tmpcs)) == (int, (0,), {0: "x"})
    assert type(plan.chunks) is int
    inst = _piper_pair()
    verified = placement.verify(inst, plan)
    assert verified.valid and verified.value == 3.0   # stage 0: 1 of compute, 2·1 bytes at bandwidth 1
    assert placement.simulate(inst, plan).time_per_batch > 0


@pytest.mark.parametrize("instance,kind", [({"maxDevices": 1}, "dict"), ("instances/tiny/chain4.json", "str"),
                                           (pair(Node(1, "x", (1.0, 5.0))), "Instance")])
def test_the_piper_planner_refuses_what_is_not_a_piper_instance(instance, kind):
    # it ended in an AttributeError on the first field a Piper instance has and these lack
    from placement.errors import InvalidParameterError
    from placement.parallel import solve_piper

    with pytest.raises(InvalidParameterError) as caught:
        solve_piper(instance)
    assert str(caught.value) == (f"instance must be a PiperInstance (placement.load reads a Piper file into one), "
                                 f"not {kind}")
