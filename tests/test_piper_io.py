"""Reading Piper's instance format: the published files, the round trip, and exact messages for bad input."""

from __future__ import annotations

import copy
import json
import math
import pickle
from pathlib import Path

import pytest

from placement.errors import InvalidInstanceError
from placement.io.piper import (
    TMPC,
    PiperEdge,
    PiperInstance,
    looks_like_piper,
    parse_piper,
    read_piper,
)

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "piper"
FILES = ("bert32a100", "gnmt", "resnet")


def shared_file(stem: str) -> Path:
    path = SHARED / f"{stem}.json"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    return path


@pytest.mark.parametrize("stem", FILES)
def test_shared_file_matches_plain_json(stem: str) -> None:
    path = shared_file(stem)
    raw = json.loads(path.read_text(encoding="utf-8"))
    inst = read_piper(path)
    assert inst.name == stem
    assert len(inst.nodes) == len(raw["nodes"])
    assert len(inst.edges) == len(raw["edges"])
    assert inst.max_devices == raw["maxDevices"]
    assert inst.max_memory_per_device == raw["maxMemoryPerDevice"]
    assert inst.bandwidth == raw["bandwidth"]
    assert inst.microbatches_in_batch == raw["mbsInBatch"]
    assert [n.id for n in inst.nodes] == [n["id"] for n in raw["nodes"]]
    assert [(e.src, e.dst) for e in inst.edges] == [(e["sourceId"], e["destId"]) for e in raw["edges"]]
    assert looks_like_piper(raw)
    # Every value is kept as written: writing the instance back gives the file's JSON.
    assert inst.to_json() == raw


@pytest.mark.parametrize("stem, nodes, edges, microbatches", [
    ("bert32a100", 37, 67, 1920), ("gnmt", 78, 104, 256), ("resnet", 177, 193, 7680)])
def test_shared_file_literal_values(stem: str, nodes: int, edges: int, microbatches: int) -> None:
    inst = read_piper(shared_file(stem))
    assert (len(inst.nodes), len(inst.edges)) == (nodes, edges)
    assert inst.microbatches_in_batch == microbatches
    assert (inst.max_devices, inst.max_memory_per_device, inst.bandwidth) == (10, 80e9, 25e9)


def test_gnmt_first_node() -> None:
    inst = read_piper(shared_file("gnmt"))
    node = inst.nodes[0]
    assert (node.id, node.name, tuple(node.configurations)) == (0, "node4", (1,))
    assert node.configurations[1][0] == TMPC("vanilla", 25.678, 132382720.0, 13107200.0, 264765440.0, {}, {1: 0.0})
    assert node.configurations[1][1].id == "activation recomp"
    assert inst.edges[0] == PiperEdge(0, 1, 13107200.0)


def test_resnet_sync_times_are_keyed_by_neighbour() -> None:
    first = read_piper(shared_file("resnet")).nodes[0].configurations[1][0]
    assert (dict(first.sync_time_fw), dict(first.sync_time_bw)) == ({1: 0.0}, {9: 0.0})
    assert first.time_per_sample == 2.678


@pytest.mark.parametrize("stem, degrees", [("bert32a100", (1, 2, 4, 8)), ("gnmt", (1,)), ("resnet", (1,))])
def test_degrees(stem: str, degrees: tuple[int, ...]) -> None:
    assert read_piper(shared_file(stem)).degrees() == degrees


@pytest.mark.parametrize("stem", FILES)
def test_round_trip(stem: str) -> None:
    inst = read_piper(shared_file(stem))
    assert parse_piper(inst.to_json(), stem) == inst
    assert parse_piper(json.loads(json.dumps(inst.to_json())), stem) == inst


# A small valid instance: 1 -> 2 -> 3 and 1 -> 3; node 2 also runs with t = 2.

def tmpc(ident: str = "vanilla", fw: dict | None = None, bw: dict | None = None, **fields) -> dict:
    data = {"id": ident, "timePerSample": 1.5, "parameterSize": 100.0, "memoryUsageA": 10.0,
            "memoryUsageB": 20.0, "syncTimeFw": fw or {}, "syncTimeBw": bw or {}}
    data.update(fields)
    return data


def instance() -> dict:
    return {
        "maxDevices": 4, "maxMemoryPerDevice": 1000.0, "bandwidth": 10.0, "mbsInBatch": 8,
        "nodes": [
            {"id": 1, "name": "a", "TMPCs": {"1": [tmpc(bw={"2": 0.0, "3": 1.0})]}},
            {"id": 2, "name": "b", "TMPCs": {"1": [tmpc(fw={"1": 0.0}, bw={"3": 0.0})],
                                             "2": [tmpc(fw={"1": 2.0}, bw={"3": 2.0}),
                                                   tmpc("recompute", fw={"1": 2.0}, bw={"3": 2.0})]}},
            {"id": 3, "TMPCs": {"1": [tmpc(fw={"1": 0.0, "2": 0.0})]}},
        ],
        "edges": [{"sourceId": 1, "destId": 2, "communicationCost": 5.0},
                  {"sourceId": 2, "destId": 3, "communicationCost": 5.0},
                  {"sourceId": 1, "destId": 3, "communicationCost": 0.0}],
    }


def test_small_instance() -> None:
    inst = parse_piper(instance(), "small")
    assert inst.degrees() == (1,)
    assert inst.nodes[2].name == ""
    assert [t.id for t in inst.nodes[1].configurations[2]] == ["vanilla", "recompute"]
    assert parse_piper(inst.to_json(), "small") == inst
    assert pickle.loads(pickle.dumps(inst)) == inst
    assert copy.deepcopy(inst) == inst
    again = parse_piper(instance(), "small")
    assert again is not inst and hash(again) == hash(inst) and len({inst, again}) == 1


def test_objects_are_immutable() -> None:
    inst = parse_piper(instance())
    with pytest.raises(AttributeError):
        inst.max_devices = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        inst.nodes[0].configurations[3] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        inst.nodes[1].configurations[1][0].sync_time_fw[1] = 9.0  # type: ignore[index]
    assert isinstance(inst.nodes, tuple) and isinstance(inst.edges, tuple)
    assert isinstance(PiperInstance("x", 1, 1.0, 1.0, 1, [], []).nodes, tuple)


def test_looks_like_piper() -> None:
    assert looks_like_piper(instance())
    assert not looks_like_piper({"maxFPGAs": 1, "maxCPUs": 1, "maxSizePerFPGA": 1.0, "nodes": [], "edges": []})
    assert not looks_like_piper([instance()])
    # Piper's own top-level fields decide, so a broken Piper document is reported in Piper's terms
    data = instance()
    del data["nodes"][0]["TMPCs"]
    assert looks_like_piper(data)
    assert looks_like_piper({"maxDevices": 4, "nodes": [], "edges": []})
    assert not looks_like_piper({"maxFPGAs": 1, "bandwidth": 1.0, "nodes": [], "edges": []})
    assert not looks_like_piper({"deviceTypes": [], "bandwidth": 1.0, "nodes": [], "edges": []})   # native


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(nodes=[]), "instance: field 'nodes' is empty"),
    (lambda d: d.pop("bandwidth"),
     "instance: missing field 'bandwidth' (required: maxDevices, maxMemoryPerDevice, bandwidth, mbsInBatch, nodes, edges)"),
    (lambda d: d["nodes"][0].pop("TMPCs"), "nodes[0]: missing field 'TMPCs' (required: id, TMPCs)"),
])
def test_broken_piper_documents_load_as_piper(change, message) -> None:
    from placement import load

    data = instance()
    change(data)
    with pytest.raises(InvalidInstanceError) as info:
        load(data)
    assert str(info.value) == message


def drop(*path):
    def change(data):
        *parents, last = path
        for key in parents:
            data = data[key]
        del data[last]
    return change


def put(value, *path):
    def change(data):
        *parents, last = path
        for key in parents:
            data = data[key]
        data[last] = value
    return change


def add_edge(src, dst, cost=0.0):
    return lambda data: data["edges"].append({"sourceId": src, "destId": dst, "communicationCost": cost})


T = 'nodes[1].TMPCs["1"][0]'
REQUIRED = "(required: maxDevices, maxMemoryPerDevice, bandwidth, mbsInBatch, nodes, edges)"
ALLOWED = "(allowed: maxDevices, maxMemoryPerDevice, bandwidth, mbsInBatch, nodes, edges, deviceTypes)"
TYPE_ALLOWED = "(allowed: count, memory, speed, bandwidth, cpu)"


@pytest.mark.parametrize("change, message", [
    (drop("mbsInBatch"), f"instance: missing field 'mbsInBatch' {REQUIRED}"),
    (put(1, "maxCPUs"), f"instance: unknown field 'maxCPUs' {ALLOWED}"),
    (put(1, "nodes", 0, "size"), "nodes[0]: unknown field 'size' (allowed: id, TMPCs, name)"),
    (drop("nodes", 1, "TMPCs", "1", 0, "syncTimeBw"),
     (f"{T}: missing field 'syncTimeBw' (required: id, timePerSample, parameterSize, memoryUsageA, "
      "memoryUsageB, syncTimeFw, syncTimeBw)")),
    (put(-1, "nodes", 1, "TMPCs", "1", 0, "timePerSample"), f"{T}: field 'timePerSample' is negative (-1)"),
    (put(float("nan"), "nodes", 1, "TMPCs", "1", 0, "memoryUsageA"), f"{T}: field 'memoryUsageA' is NaN"),
    (put(float("inf"), "bandwidth"), "instance: field 'bandwidth' is infinite"),
    (put(True, "nodes", 1, "TMPCs", "1", 0, "parameterSize"), f"{T}: field 'parameterSize' must be a number, got boolean"),
    (put(True, "maxDevices"), "instance: field 'maxDevices' must be an integer, got boolean"),
    (put(2.5, "maxDevices"), "instance: field 'maxDevices' must be an integer, got number"),
    (put(0, "mbsInBatch"), "instance: field 'mbsInBatch' must be positive, got 0"),
    # past the DP's integer arrays: an OverflowError traceback
    (put(2 ** 63, "mbsInBatch"), "instance: field 'mbsInBatch' is 9223372036854775808, above 2^53, the largest count read"),
    (put(1e308, "mbsInBatch"), "instance: field 'mbsInBatch' is a number of 309 digits, above 2^53, the largest count read"),
    (put([tmpc()], "nodes", 0, "TMPCs", str(2 ** 63)),
     "nodes[0].TMPCs: degree 9223372036854775808 is above 2^53, the largest degree read"),
    (put(0, "bandwidth"), "instance: field 'bandwidth' must be positive, got 0"),
    (put(-3, "maxDevices"), "instance: field 'maxDevices' is negative (-3)"),
    (put({}, "nodes"), "instance: field 'nodes' must be an array, got object"),
    (put([], "nodes"), "instance: field 'nodes' is empty"),
    (put(1, "nodes", 1, "id"), "nodes[1]: id 1 already used by nodes[0]"),
    (put(7, "nodes", 2, "name"), "nodes[2]: field 'name' must be a string, got integer"),
    (put({}, "nodes", 0, "TMPCs"), "nodes[0]: field 'TMPCs' is empty (the node needs at least one TMPC)"),
    (put([tmpc()], "nodes", 0, "TMPCs", "x"),
     'nodes[0].TMPCs: key "x" is not a tensor-parallel degree (a positive integer in decimal digits, no leading zeros)'),
    (put([tmpc()], "nodes", 0, "TMPCs", "0"),
     'nodes[0].TMPCs: key "0" is not a tensor-parallel degree (a positive integer in decimal digits, no leading zeros)'),
    (put([], "nodes", 1, "TMPCs", "2"), 'nodes[1].TMPCs["2"]: no TMPC (each listed degree needs at least one)'),
    (put("vanilla", "nodes", 1, "TMPCs", "2", 1, "id"), 'nodes[1].TMPCs["2"][1]: id \'vanilla\' already used by nodes[1].TMPCs["2"][0]'),
    (put("", "nodes", 1, "TMPCs", "1", 0, "id"), f"{T}: field 'id' is empty"),
    (put({"one": 0.0}, "nodes", 1, "TMPCs", "1", 0, "syncTimeFw"),
     f'{T}.syncTimeFw: key "one" is not a node id (an integer in decimal digits)'),
    (put(-2, "nodes", 1, "TMPCs", "1", 0, "syncTimeFw", "1"), f"{T}.syncTimeFw: field '1' is negative (-2)"),
    (put(0.0, "nodes", 1, "TMPCs", "1", 0, "syncTimeFw", "3"), f'{T}.syncTimeFw: key "3" names no edge 3 -> 2'),
    (drop("nodes", 1, "TMPCs", "1", 0, "syncTimeBw", "3"), f"{T}.syncTimeBw: no entry for the edge 2 -> 3"),
    (add_edge(3, 9), "edges[3]: destId 9 is not the id of a node"),
    (add_edge(2, 2), "edges[3]: self-loop on node 2"),
    (add_edge(1, 2), "edges[3]: edge 1 -> 2 repeats edges[0]"),
    (add_edge(3, 1), "instance: the graph has a cycle: 1 -> 2 -> 3 -> 1"),
    (put(-0.5, "edges", 0, "communicationCost"), "edges[0]: field 'communicationCost' is negative (-0.5)"),
    (put("2", "edges", 0, "destId"), "edges[0]: field 'destId' must be an integer, got string"),
    # it read "field 'destId' reads inf, a number not written as an integer, 2^53 ... or more ..."
    (put(math.inf, "edges", 0, "destId"), "edges[0]: field 'destId' is infinite"),
    (put(None, "edges", 1), "edges[1] must be a JSON object, got null"),
    (put([], "deviceTypes"), "instance: field 'deviceTypes' must be an object, got array"),
    (put({}, "deviceTypes"), "instance: field 'deviceTypes' is empty (name at least one type, or leave it out)"),
    (put({"a:b": {"count": 1, "memory": 1}}, "deviceTypes"),
     'deviceTypes["a:b"]: a device type\'s name must be non-empty, without \',\' or \':\' and without surrounding spaces'),
    (put({"": {"count": 1, "memory": 1}}, "deviceTypes"),
     'deviceTypes[""]: a device type\'s name must be non-empty, without \',\' or \':\' and without surrounding spaces'),
    (put({"a": 3}, "deviceTypes"), 'deviceTypes["a"] must be a JSON object, got integer'),
    (put({"a": {"count": 1}}, "deviceTypes"), 'deviceTypes["a"]: missing field \'memory\' (required: count, memory)'),
    (put({"a": {"count": 1, "memory": 1, "fast": 1}}, "deviceTypes"),
     f'deviceTypes["a"]: unknown field \'fast\' {TYPE_ALLOWED}'),
    (put({"a": {"count": 0, "memory": 1}}, "deviceTypes"), 'deviceTypes["a"]: field \'count\' must be positive, got 0'),
    (put({"a": {"count": 1.5, "memory": 1}}, "deviceTypes"),
     'deviceTypes["a"]: field \'count\' must be an integer, got number'),
    (put({"a": {"count": 1, "memory": 1, "speed": 0}}, "deviceTypes"),
     'deviceTypes["a"]: field \'speed\' must be positive, got 0'),
    (put({"a": {"count": 1, "memory": 1, "speed": 1e-120}}, "deviceTypes"),
     'deviceTypes["a"]: speed 1e-120 takes the graph\'s total timePerSample on the type above 1e+100, the most a '
     'total of times may be'),
    # the transfers' bytes over the bandwidth are times too (a bandwidth of 1e-320 overflowed them to infinity
    # and the planner answered "infeasible", blaming the memory); the bytes: 2·(Σ communicationCost 10 + Σ
    # syncTimeFw 4 + Σ syncTimeBw 5) + 4·Σ parameterSize (5 TMPCs of 100) = 38 + 2000 = 2038
    (put(1e-320, "bandwidth"), "bandwidth: 9.99989e-321 bytes per second takes the graph's transfers (2038 bytes) "
                               "above 1e+100 seconds, the most a total of times may be"),
    (put({"a": {"count": 1, "memory": 1, "bandwidth": 1e-120}}, "deviceTypes"),
     'deviceTypes["a"].bandwidth: 1e-120 bytes per second takes the graph\'s transfers (2038 bytes) above 1e+100 '
     'seconds, the most a total of times may be'),
    (put({"a": {"count": 1, "memory": 1, "bandwidth": -1}}, "deviceTypes"),
     'deviceTypes["a"]: field \'bandwidth\' is negative (-1)'),
    (put({"a": {"count": 1, "memory": 1, "cpu": "yes"}}, "deviceTypes"),
     "deviceTypes[\"a\"]: field 'cpu' must be true/false or 0/1, got 'yes'"),
])
def test_bad_instance(change, message: str) -> None:
    data = instance()
    change(data)
    with pytest.raises(InvalidInstanceError) as info:
        parse_piper(data)
    assert str(info.value) == message


def test_device_types_round_trip() -> None:
    data = instance()
    data["deviceTypes"] = {"a100": {"count": 8, "memory": 8e10},
                           "v100": {"count": 16, "memory": 3.2e10, "speed": 0.5, "bandwidth": 1.25e10},
                           "cpu": {"count": 4, "memory": 2e11, "speed": 0.05, "cpu": True}}
    inst = parse_piper(data)
    assert [(t.name, t.count, t.memory, t.speed, t.bandwidth, t.cpu) for t in inst.device_types] == [
        ("a100", 8, 8e10, 1.0, None, False), ("v100", 16, 3.2e10, 0.5, 1.25e10, False),
        ("cpu", 4, 2e11, 0.05, None, True)]
    assert [t.degrees_allowed(2) for t in inst.device_types] == [True, True, False]
    assert inst.to_json()["deviceTypes"] == data["deviceTypes"]
    assert parse_piper(inst.to_json()) == inst and pickle.loads(pickle.dumps(inst)) == inst
    assert "deviceTypes" not in parse_piper(instance()).to_json()


def test_not_an_object() -> None:
    with pytest.raises(InvalidInstanceError, match=r"^the instance must be a JSON object, got array$"):
        parse_piper([])


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    data = instance()
    data["nodes"][1]["TMPCs"]["1"][0]["timePerSample"] = -1
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidInstanceError) as info:
        read_piper(path)
    assert str(info.value) == f"{path}: {T}: field 'timePerSample' is negative (-1)"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(InvalidInstanceError, match=r"malformed JSON at line 1"):
        read_piper(path)
