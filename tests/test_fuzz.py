"""Hostile input for every command that reads a file: each must end with exit status 2 and one
line ``error: ...`` on stderr — never a traceback, never a success.

Two sources of input, both built here (nothing large is stored):

* a fixed corpus: every field of a valid instance, plan, Piper instance, network and device
  catalogue replaced by values that are wrong for that field (wrong JSON type, negative,
  NaN, infinite, past the float range, past the totals limit), every required field removed,
  structural faults (cycles, unknown nodes, duplicates), and raw texts (empty, truncated,
  not UTF-8, truncated after a byte order mark, deep nesting, huge integers);
* Hypothesis: random bytes, random JSON documents lacking a required field, random values of
  the wrong kind at a random field, and random option values that do not parse.

The commands run in-process through :func:`placement.cli.main` (an exception escaping it is a
traceback on the command line); a few end-to-end runs check the console script itself.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import example, given, settings, strategies as st

from placement.cli import main

NAN, INF = math.nan, math.inf

# ----- valid documents, one per file kind ---------------------------------------------------------


def _node(i: int, **fields: Any) -> dict:
    return {"id": i, "name": f"n{i}", "supportedOnFpga": 1, "cpuLatency": 4.0, "fpgaLatency": 1.0,
            "isBackwardNode": 0, "colorClass": i, "size": 10.0, "module": f"m{i}", "starts": [f"m{i}"],
            "ops": ["linear"], **fields}


#: a chain 1 -> 2 -> 3 on 2 accelerators and a CPU; the node fields split reads are there too
INSTANCE = {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [_node(1), _node(2), _node(3)],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5, "size": 8.0},
                      {"sourceId": 2, "destId": 3, "cost": 0.25, "size": 8.0}]}
NATIVE = {"deviceTypes": [{"name": "gpu", "count": 2, "memory": 100.0, "paysComm": True},
                          {"name": "cpu", "count": 1, "paysComm": False}],
          "nodes": [{"id": 1, "times": {"gpu": 1.0, "cpu": 4.0}}, {"id": 2, "times": {"gpu": None, "cpu": 2.0}}],
          "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}
PLAN = {"fpgas": [{"nodes": [1, 2]}, {"nodes": [3]}], "cpus": []}
OUR_PLAN = {"format": "placement-plan/1", "devices": [{"type": "accelerator", "nodes": [1, 2], "calls": [[1], [2]]},
                                                      {"type": "accelerator", "nodes": [3]}]}


def _tmpc(fw: dict, bw: dict) -> dict:
    return {"id": "vanilla", "timePerSample": 1.0, "parameterSize": 10.0, "memoryUsageA": 1.0, "memoryUsageB": 2.0,
            "syncTimeFw": fw, "syncTimeBw": bw}


PIPER = {"maxDevices": 4, "maxMemoryPerDevice": 1e9, "bandwidth": 1e9, "mbsInBatch": 8,
         "nodes": [{"id": 1, "name": "a", "TMPCs": {"1": [_tmpc({}, {"2": 0.0})]}},
                   {"id": 2, "TMPCs": {"1": [_tmpc({"1": 0.0}, {})]}}],
         "edges": [{"sourceId": 1, "destId": 2, "communicationCost": 10.0}]}
NETWORK = {"format": "placement-network/1", "name": "tiny",
           "layers": [{"name": "fc1", "type": "fc", "in": 8, "out": 4}, {"name": "fc2", "type": "fc", "in": 4, "out": 2}]}
CATALOGUE = {"devices": {"fuzz-gpu": {"model": "a GPU", "kind": "accelerator", "peak_flops": {"fp32": 1e13},
                                      "memory_bandwidth": 1e12, "memory": 1e10, "links": {"pcie": 1e10},
                                      "default_link": "pcie", "op_overhead": 5e-6}}}

# ----- running the command line -------------------------------------------------------------------


def run(argv: list[Any]) -> tuple[int, str, str]:
    """``placement ARGV`` in-process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def refused(argv: list[Any]) -> str:
    """The one error line of a command that must refuse its input (exit 2)."""
    status, _, err = run(argv)
    assert status == 2, (argv, status, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n"), (argv, err)
    return err


def write(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:  # json.dumps writes NaN and Infinity, which the reader takes as numbers
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Valid files beside which each test writes the hostile one."""
    root = tmp_path_factory.mktemp("fuzz")
    for name, doc in (("instance.json", INSTANCE), ("plan.json", PLAN), ("network.json", NETWORK)):
        write(root, name, doc)
    return root


def instance_commands(folder: Path, path: Path) -> list[list[Any]]:
    """Every command that reads ``path`` as an instance."""
    plan = folder / "plan.json"
    return [["solve", path, "--quiet"], ["info", path], ["verify", path, plan], ["simulate", path, plan],
            ["split", path, plan]]


def plan_commands(folder: Path, path: Path) -> list[list[Any]]:
    """Every command that reads ``path`` as a plan."""
    instance = folder / "instance.json"
    return [["verify", instance, path], ["simulate", instance, path], ["split", instance, path],
            ["solve", instance, "--method", "expert", "--split", path, "--quiet"]]


# ----- the fixed corpus: wrong values field by field ----------------------------------------------

def changed(doc: Any, path: tuple, value: Any) -> Any:
    """A copy of ``doc`` with the field at ``path`` set to ``value`` (the whole document for ``()``)."""
    if not path:
        return value
    doc = copy.deepcopy(doc)
    holder = doc
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return doc


def removed(doc: Any, path: tuple) -> Any:
    doc = copy.deepcopy(doc)
    holder = doc
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    return doc


NOT_NUMBERS = ["1", [], {}, True, False]
BAD_NUMBERS = NOT_NUMBERS + [-1, -1e-300, NAN, INF, -INF, 10**400, -(10**400)]
BAD_COUNTS = ["2", 1.5, True, -1, [], {}, NAN, INF, 1e400, None]
BAD_BOOLS = [2, -1, "true", 0.5, 1.0, [], {}]
BAD_IDS = ["1", 1.5, [], {}, True]


def _sites() -> list[tuple[str, Any, tuple, list]]:
    """(kind of file, valid document, path to a field, values that are wrong there)."""
    sites: list[tuple[str, Any, tuple, list]] = []

    def add(kind: str, doc: Any, path: tuple, values: list) -> None:
        sites.append((kind, doc, path, values))

    for key in ("maxFPGAs", "maxCPUs"):
        add("instance", INSTANCE, (key,), BAD_COUNTS)
    add("instance", INSTANCE, ("maxSizePerFPGA",), BAD_NUMBERS + [None])
    add("instance", INSTANCE, ("nodes",), [None, {}, "x", 1, [1], [None], [[]]])
    add("instance", INSTANCE, ("edges",), [None, {}, "x", 1, [1], [[]]])
    for key in ("cpuLatency", "fpgaLatency"):  # 1e308 passes alone, not in the totals
        add("instance", INSTANCE, ("nodes", 1, key), BAD_NUMBERS + [None, 1e308])
    add("instance", INSTANCE, ("nodes", 1, "size"), BAD_NUMBERS + [1e308])
    add("instance", INSTANCE, ("nodes", 0, "id"), BAD_IDS + [None, 2])
    add("instance", INSTANCE, ("nodes", 0, "supportedOnFpga"), BAD_BOOLS + [None])
    add("instance", INSTANCE, ("nodes", 0, "isBackwardNode"), BAD_BOOLS)
    add("instance", INSTANCE, ("nodes", 0, "colorClass"), ["a", 1.5, [], {}, True])
    add("instance", INSTANCE, ("nodes", 0, "name"), [[], {}, True, 1.5])
    add("split", INSTANCE, ("nodes", 0, "module"), [None, 1, [], {}])
    add("split", INSTANCE, ("nodes", 0, "ops"), [None, "linear", 1, [1], {}])
    add("split", INSTANCE, ("nodes", 0, "starts"), ["m1", 1, [None], {}, ["x"]])   # ["x"]: without its module m1
    # beside its own module m1, one the model lacks, and one node 2 begins
    add("split", INSTANCE, ("nodes", 0, "starts"), [["m1", "x"], ["m1", "m2"]])
    add("split", changed(INSTANCE, ("nodes", 2, "isBackwardNode"), 1), ("nodes", 2, "forward"), [None, "2", [2], 1.5])
    for key in ("sourceId", "destId"):
        add("instance", INSTANCE, ("edges", 0, key), BAD_IDS + [None, 99])
    add("instance", INSTANCE, ("edges", 0, "cost"), BAD_NUMBERS + [None, 1e308])
    add("instance", INSTANCE, ("edges", 0, "size"), BAD_NUMBERS + [1e308])
    add("instance", NATIVE, ("deviceTypes",), [None, [], {}, [1], [{}]])
    add("instance", NATIVE, ("deviceTypes", 0, "count"), BAD_COUNTS)
    add("instance", NATIVE, ("deviceTypes", 0, "memory"), BAD_NUMBERS)
    add("instance", NATIVE, ("deviceTypes", 0, "name"), [None, [], {}, True, "cpu"])
    add("instance", NATIVE, ("deviceTypes", 0, "paysComm"), BAD_BOOLS + [None])
    add("instance", NATIVE, ("nodes", 0, "times"), [None, [], "x", {}, {"gpu": 1.0}, {"gpu": 1, "cpu": 1, "tpu": 1}])
    add("instance", NATIVE, ("nodes", 0, "times", "cpu"), BAD_NUMBERS + [1e308])
    add("plan", PLAN, (), [None, [], "x", 1, {}, {"fpga": []}])
    add("plan", PLAN, ("fpgas",), [None, {}, "x", 1, [1], [[]], [None]])
    add("plan", PLAN, ("fpgas", 0), [None, [], "x", {}, {"node": [1]}])
    add("plan", PLAN, ("fpgas", 0, "nodes"), [None, {}, "x", 1, ["1"], [1.5], [True], [[1]], [None]])
    add("plan", OUR_PLAN, ("devices", 0, "type"), [None, 1, [], {}, True])
    add("plan", OUR_PLAN, ("devices", 0, "calls"), [{}, "x", 1, [1], [[1.5]], [["1"]], [{}]])
    for key in ("maxDevices", "mbsInBatch"):
        add("piper", PIPER, (key,), BAD_COUNTS + [0])
    for key in ("maxMemoryPerDevice", "bandwidth"):
        add("piper", PIPER, (key,), BAD_NUMBERS + [None, 0])
    add("piper", PIPER, ("nodes", 0, "TMPCs"), [None, [], {}, "x", {"0": [_tmpc({}, {"2": 0.0})]}, {"1": []}])
    for key in ("timePerSample", "parameterSize", "memoryUsageA", "memoryUsageB"):
        add("piper", PIPER, ("nodes", 0, "TMPCs", "1", 0, key), BAD_NUMBERS + [None])
    add("piper", PIPER, ("nodes", 0, "TMPCs", "1", 0, "syncTimeBw"), [None, [], {}, {"3": 0.0}, {"x": 0.0}])
    add("piper", PIPER, ("edges", 0, "communicationCost"), BAD_NUMBERS + [None])
    add("piper", PIPER, ("edges", 0, "destId"), BAD_IDS + [None, 1, 99])
    add("network", NETWORK, ("layers",), [None, {}, "x", [1], [{}]])
    add("network", NETWORK, ("layers", 0, "type"), [None, 1, "lstm", []])
    add("network", NETWORK, ("layers", 0, "in"), [None, "8", 1.5, True, [1.5], {}])
    add("network", NETWORK, ("name",), [1, [], {}, True])
    add("network", NETWORK, ("format",), [1, "other/1", None])
    add("catalogue", CATALOGUE, ("devices",), [None, [], "x", 1])
    add("catalogue", CATALOGUE, ("devices", "fuzz-gpu"), [None, [], "x", {}])
    for key in ("memory_bandwidth", "memory"):
        add("catalogue", CATALOGUE, ("devices", "fuzz-gpu", key), BAD_NUMBERS + [None, 0])
    add("catalogue", CATALOGUE, ("devices", "fuzz-gpu", "kind"), [None, 1, "tpu"])
    add("catalogue", CATALOGUE, ("devices", "fuzz-gpu", "peak_flops"), [None, [], 1, {"fp32": -1}, {"fp32": "x"}])
    add("catalogue", CATALOGUE, ("devices", "fuzz-gpu", "links"), [None, [], 1, {"pcie": -1}, {}])
    add("catalogue", CATALOGUE, ("devices", "fuzz-gpu", "default_link"), [1, [], "nvlink"])
    return sites


SITES = _sites()


def commands_for(kind: str, folder: Path, path: Path) -> list[list[Any]]:
    """The commands that read a file of ``kind``; a Piper instance is refused by every planner."""
    if kind in ("instance", "piper"):
        return instance_commands(folder, path)
    if kind == "plan":
        return plan_commands(folder, path)
    if kind == "split":
        return [["split", path, folder / "plan.json"]]
    if kind == "network":
        return [["hypar", path, "--accelerators", "4", "--batch", "2"]]
    return [["import", "model.onnx", "--out", folder / "out.json", "--devices", path]]


def test_the_valid_documents_are_accepted(folder):
    """The corpus is meaningful: each base document, unchanged, is accepted where it is read."""
    instance, plan = folder / "instance.json", folder / "plan.json"
    for argv in ([["info", instance], ["verify", instance, plan], ["simulate", instance, plan],
                  ["info", write(folder, "native.json", NATIVE)],
                  ["verify", instance, write(folder, "ours.json", OUR_PLAN)],
                  ["hypar", folder / "network.json", "--accelerators", "4", "--batch", "2"],
                  ["split", instance, plan, "--format", "stages"]]):
        status, out, err = run(argv)
        assert status == 0 and out, (argv, err)
    assert run(["solve", instance, "--quiet", "--method", "expert", "--split", plan])[0] == 0
    from placement.costmodel.roofline import read_catalogue
    from placement.io.piper import read_piper

    assert read_piper(write(folder, "piper.json", PIPER)).max_devices == 4
    assert list(read_catalogue(write(folder, "catalogue.json", CATALOGUE))) == ["fuzz-gpu"]


@pytest.mark.parametrize("kind, doc, path, values", SITES,
                         ids=[f"{s[0]}:{'.'.join(map(str, s[2])) or 'document'}" for s in SITES])
def test_wrong_value_in_every_field(folder, kind, doc, path, values):
    for k, value in enumerate(values):
        hostile = write(folder, f"{kind}-{k}.json", changed(doc, path, value))
        for argv in commands_for(kind, folder, hostile):
            refused(argv)


REQUIRED = ([("instance", INSTANCE, (key,)) for key in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")]
            + [("instance", INSTANCE, ("nodes", 0, key)) for key in ("id", "supportedOnFpga", "cpuLatency",
                                                                      "fpgaLatency")]
            + [("instance", INSTANCE, ("edges", 0, key)) for key in ("sourceId", "destId", "cost")]
            + [("instance", NATIVE, ("deviceTypes", 0, key)) for key in ("name", "count", "paysComm")]
            + [("plan", PLAN, ("fpgas", 0, "nodes")), ("plan", OUR_PLAN, ("devices", 0, "type"))]
            + [("piper", PIPER, (key,)) for key in PIPER]
            + [("piper", PIPER, ("nodes", 0, "TMPCs", "1", 0, key)) for key in _tmpc({}, {})]
            + [("network", NETWORK, ("layers",)), ("network", NETWORK, ("layers", 0, "out"))]
            + [("catalogue", CATALOGUE, ("devices",)),
               ("catalogue", CATALOGUE, ("devices", "fuzz-gpu", "memory_bandwidth"))])


@pytest.mark.parametrize("kind, doc, path", REQUIRED, ids=[f"{r[0]}:{'.'.join(map(str, r[2]))}" for r in REQUIRED])
def test_missing_required_field(folder, kind, doc, path):
    hostile = write(folder, f"{kind}-missing.json", removed(doc, path))
    for argv in commands_for(kind, folder, hostile):
        refused(argv)


def _structural() -> list[tuple[str, Any]]:
    cycle = changed(INSTANCE, ("edges",), INSTANCE["edges"] + [{"sourceId": 3, "destId": 1, "cost": 0.1}])
    return [
        ("cycle", cycle),
        ("self-loop", changed(INSTANCE, ("edges", 0, "destId"), 1)),
        ("duplicate ids", changed(INSTANCE, ("nodes", 2, "id"), 1)),
        ("costs differ", changed(INSTANCE, ("edges",), INSTANCE["edges"] + [{"sourceId": 1, "destId": 3, "cost": 9}])),
        ("backward to forward", changed(INSTANCE, ("nodes", 0, "isBackwardNode"), 1)),
        ("no devices", changed(changed(INSTANCE, ("maxFPGAs",), 0), ("maxCPUs",), 0)),
        ("fits nowhere", changed(changed(INSTANCE, ("maxCPUs",), 0), ("nodes", 0, "size"), 1000.0)),
        ("no nodes", changed(changed(INSTANCE, ("nodes",), []), ("edges",), [])),
        ("unknown field", changed(INSTANCE, ("edge",), [])),
        ("two formats", changed(INSTANCE, ("deviceTypes",), NATIVE["deviceTypes"])),
        ("totals", changed(changed(INSTANCE, ("nodes", 0, "fpgaLatency"), 6e99), ("nodes", 1, "fpgaLatency"), 6e99)),
    ]


@pytest.mark.parametrize("doc", [s[1] for s in _structural()], ids=[s[0] for s in _structural()])
def test_inconsistent_instance(folder, doc):
    for argv in instance_commands(folder, write(folder, "inconsistent.json", doc)):
        refused(argv)


RAW_TEXTS = {
    "empty": b"", "space": b"  \n", "truncated": json.dumps(INSTANCE)[:-7].encode(), "NUL": b"\x00",
    "not UTF-8": b'{"name": "caf\xe9"}', "BOM, truncated": b"\xef\xbb\xbf" + json.dumps(INSTANCE)[:-7].encode(),
    "UTF-16": json.dumps(INSTANCE).encode("utf-16"), "two documents": (json.dumps(PLAN) * 2).encode(),
    "deep arrays": b"[" * 100_000 + b"]" * 100_000, "deep objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "open arrays": b"[" * 100_000, "deep, no runs": b"[[]," * 50_000,
    "deep field": json.dumps(INSTANCE).replace('"n1"', "[" * 5000 + "]" * 5000).encode(),
    "long integer": json.dumps(INSTANCE).replace('"maxCPUs": 1', '"maxCPUs": ' + "9" * 5000).encode(),
    "number": b"7", "string": b'"x"', "null": b"null", "NaN": b"NaN",
}


@pytest.mark.parametrize("kind", ["instance", "plan", "piper", "network", "catalogue"])
@pytest.mark.parametrize("name", list(RAW_TEXTS))
def test_raw_text(folder, kind, name):
    hostile = write(folder, f"raw-{kind}.json", RAW_TEXTS[name])
    for argv in commands_for(kind, folder, hostile):
        refused(argv)


def test_no_such_file_and_a_directory(folder):
    for kind in ("instance", "plan", "network", "catalogue"):
        for path in (folder / "nowhere.json", folder):
            for argv in commands_for(kind, folder, path):
                refused(argv)


def test_garbage_onnx_file(folder):
    pytest.importorskip("onnx")
    hostile = write(folder, "garbage.onnx", b"\x08\x07not a model" * 10)
    refused(["import", hostile, "--out", folder / "out.json"])


# ----- option values ----------------------------------------------------------------------------------

#: (command line before the option, option, values that must be refused)
OPTIONS: list[tuple[list[str], str, list[str]]] = [
    (["solve", "@instance"], "--accelerators", ["-1", "1e12", "x", "", "1.5", "9" * 5000]),
    (["solve", "@instance"], "--cpus", ["-1", "1e12", "x"]),
    (["solve", "@instance"], "--memory", ["-1", "nan", "inf", "1e400", "x"]),
    (["solve", "@instance", "--method", "milp"], "--time-limit", ["0", "-1", "nan", "inf", "x", "1e300"]),
    (["solve", "@instance", "--method", "milp", "--backend", "cbc"], "--time-limit", ["1e300", "1.1e9"]),
    (["solve", "@instance", "--method", "milp"], "--gap", ["1", "-0.1", "nan", "x"]),
    (["solve", "@instance", "--method", "milp"], "--threads", ["0", str(2**40), "1025", "x"]),
    (["solve", "@instance"], "--seed", ["-1", str(2**63), str(2**31), "x"]),
    (["solve", "@instance", "--objective", "latency"], "--calls", ["0", "-1", "1e9", "x"]),
    (["solve", "@instance"], "--stages", ["0", "4", str(10**12), "x"]),
    (["solve", "@instance", "--method", "dp"], "--max-ideals", ["0", "-5", "x"]),
    (["solve", "@instance", "--method", "local-search"], "--restarts", ["0", "x"]),
    (["solve", "@instance"], "--method", ["magic", ""]),
    (["solve", "@instance"], "--objective", ["speed"]),
    (["solve", "@instance"], "--contiguity", ["stage"]),
    (["solve", "@instance", "--method", "milp"], "--backend", ["gurobi", "pulp:", ""]),
    (["verify", "@instance", "@plan"], "--calls", ["0", "x"]),
    (["verify", "@instance", "@plan"], "--accelerators", ["-1", "x"]),
    (["simulate", "@instance", "@plan"], "--microbatches", ["0", "-1", "x"]),
    (["simulate", "@instance", "@plan"], "--w-fraction", ["1.5", "-0.1", "nan", "x"]),
    (["simulate", "@instance", "@plan"], "--schedule", ["gpipe2"]),
    (["info", "@instance"], "--max-ideals", ["0", "x"]),
    (["hypar", "@network", "--batch", "2"], "--accelerators", ["0", "3", "x", str(2**40 + 1)]),
    (["hypar", "@network", "--accelerators", "4"], "--batch", ["0", "x"]),
    (["hypar", "@network", "--accelerators", "4", "--batch", "2"], "--types", ["1", "4", "x"]),
    (["split", "@instance", "@plan"], "--format", ["json"]),
    (["import", "model.onnx", "--out", "@out"], "--accelerators", ["-1", "x"]),
    (["import", "model.onnx", "--out", "@out"], "--memory", ["nan", "x"]),
    (["import", "model.onnx", "--out", "@out"], "--dim", ["x", "x=0", "=1"]),
]


def _argv(folder: Path, words: list[str]) -> list[Any]:
    files = {"@instance": folder / "instance.json", "@plan": folder / "plan.json",
             "@network": folder / "network.json", "@out": folder / "out.json"}
    return [files.get(w, w) for w in words]


@pytest.mark.parametrize("before, option, values", OPTIONS, ids=[f"{o[0][0]} {o[1]}" for o in OPTIONS])
def test_bad_option_values(folder, before, option, values):
    for value in values:
        refused(_argv(folder, before) + [option, value])


def test_unwritable_outputs(folder):
    for option in ("--out", "--log"):
        refused(["solve", folder / "instance.json", option, folder, "--quiet"])
    refused(["simulate", folder / "instance.json", folder / "plan.json", "--trace", folder / "no" / "t.json"])


@pytest.mark.parametrize("argv, message", [
    (["simulate", "@instance", "@plan", "--memory-limit", "0"],
     "error: argument --memory-limit: expected a finite positive number of bytes (or with KiB, MiB, GiB, TiB), "
     "got '0'\n"),
    (["solve", "@instance", "--method", "milp", "--threads", "1025"],
     "error: --threads must be an integer from 1 to 1024, not 1025\n"),
])
def test_option_limits_are_stated_in_the_options_terms(folder, argv, message):
    assert refused(_argv(folder, argv)) == message


@pytest.mark.parametrize("before, option", [
    (["solve", "@instance"], "--out"), (["solve", "@instance"], "--log"),
    (["simulate", "@instance", "@plan"], "--trace"), (["simulate", "@instance", "@plan"], "--gantt"),
    (["hypar", "@network", "--accelerators", "4", "--batch", "2"], "--out"),
    (["split", "@instance", "@plan"], "--out"), (["import", "model.onnx"], "--out"),
    (["codesign", "--sweep", "sweep.json"], "--out"), (["codesign", "--sweep", "sweep.json"], "--plots"),
])
def test_an_empty_output_name_is_refused(folder, before, option):
    """An empty name writes nothing; it is refused before any work, never reported as written."""
    assert refused(_argv(folder, before) + [option, ""]) == f"error: argument {option}: expected a file name, got ''\n"


def test_huge_counts_are_solved_as_the_reachable_counts(folder):
    """Counts of 10^9 and 2^64 are accepted and solved as the number of colour classes: the same
    optimum, and the instance keeps the count the user gave."""
    import placement

    # The chain 1 -> 2 -> 3 (1 each on an accelerator, 4 on the CPU; out-costs 0.5, 0.25, 0) on 3
    # accelerators: node 2 alone pays 1 + 0.5 in + 0.25 out = 1.75, and every other place for it costs
    # more (with node 1: 2.25, with node 3: 2.5, on the CPU: 4); nodes 1 and 3 alone pay 1.5 and 1.25.
    three = placement.solve(changed(INSTANCE, ("maxFPGAs",), 3)).value
    assert three == 1.75
    for count in (10**9, 2**64):
        doc = changed(INSTANCE, ("maxFPGAs",), count)
        assert placement.load(doc).device_types[0].count == count
        assert placement.solve(doc).value == three
        latency = placement.solve(doc, objective="latency", method="milp", calls=10**9, time_limit=30)
        assert latency.value == placement.solve(doc, objective="latency", method="milp", calls=3,
                                                time_limit=30).value
    status, out, _ = run(["info", write(folder, "huge.json", changed(INSTANCE, ("maxFPGAs",), 2**64))])
    assert status == 0 and "devices (accelerator):  18446744073709551616," in out


TINY = sorted((Path(__file__).resolve().parents[1] / "instances" / "tiny").glob("*.json"))


@pytest.mark.parametrize("path", TINY, ids=[p.stem for p in TINY])
def test_huge_counts_agree_with_brute_force_on_spare_devices(path):
    """Cutting counts to the colour classes is exact: 10^9 devices of every type (and 10^9 calls)
    give the optimum that exhaustive search finds with one device more than there are classes,
    for every objective and contiguity class."""
    pytest.importorskip("ortools")
    import placement
    from placement.testing.bruteforce import brute_force
    from placement.testing.bruteforce_latency import brute_force_latency

    problem = placement.load(path)
    spare = len(problem.colour_classes()) + 1
    huge = problem.with_devices({t.name: 10**9 for t in problem.device_types})
    small = problem.with_devices({t.name: spare for t in problem.device_types})
    objectives = ["throughput", "throughput-gpipe"] if problem.is_training else ["throughput", "latency"]
    for objective in objectives:
        if objective == "latency":
            expected = brute_force_latency(small).objective
            found = placement.solve(huge, objective="latency", calls=10**9, time_limit=30)
            assert (found.status.value, found.value) == ("optimal", pytest.approx(expected, rel=1e-9)), path
            continue
        for contiguity in ("stages", "sets", "none"):
            expected = brute_force(small, contiguity, objective=objective).objective
            found = placement.solve(huge, objective=objective, contiguity=contiguity, time_limit=30)
            assert (found.status.value, found.value) == ("optimal", pytest.approx(expected, rel=1e-9)), \
                (path, objective, contiguity)


# ----- Hypothesis -------------------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4),
                     max_leaves=20)
_wrong_numbers = (st.text(max_size=5) | st.booleans() | st.lists(st.integers(), max_size=2)
                  | st.floats(max_value=-1e-300) | st.integers(max_value=-1) | st.just(NAN)
                  | st.sampled_from([INF, -INF, 10**400]) | st.floats(min_value=1.01e100, allow_infinity=True))
_NUMBER_SITES = [("instance", INSTANCE, ("nodes", 2, "fpgaLatency")), ("instance", INSTANCE, ("edges", 1, "cost")),
                 ("instance", INSTANCE, ("nodes", 0, "size")), ("instance", NATIVE, ("nodes", 1, "times", "cpu")),
                 ("piper", PIPER, ("nodes", 1, "TMPCs", "1", 0, "timePerSample"))]


@settings(max_examples=200)
@given(content=st.binary(max_size=64), kind=st.sampled_from(["instance", "plan", "network", "catalogue"]))
@example(content=b"[" * 70, kind="instance")
@example(content=b'{"fpgas": [', kind="plan")
def test_random_bytes(folder, content, kind):
    hostile = write(folder, f"bytes-{kind}.json", content)
    for argv in commands_for(kind, folder, hostile)[:2]:
        refused(argv)


@settings(max_examples=200)
@given(doc=_json, kind=st.sampled_from(["instance", "piper", "network"]))
@example(doc={"nodes": []}, kind="instance")
@example(doc={"layers": {}}, kind="network")
def test_random_json_without_a_required_field(folder, doc, kind):
    required = {"instance": "edges", "piper": "edges", "network": "layers"}[kind]
    if isinstance(doc, dict):
        doc.pop(required, None)
    hostile = write(folder, f"json-{kind}.json", doc)
    for argv in commands_for(kind, folder, hostile)[:2]:
        refused(argv)


@settings(max_examples=300)
@given(site=st.sampled_from(_NUMBER_SITES), value=_wrong_numbers)
@example(site=_NUMBER_SITES[0], value=1.01e100)
@example(site=_NUMBER_SITES[1], value=-0.0 - 1e-300)
def test_random_wrong_number(folder, site, value):
    kind, doc, path = site
    hostile = write(folder, f"number-{kind}.json", changed(doc, path, value))
    for argv in commands_for(kind, folder, hostile)[:2]:
        refused(argv)


_not_ids = (st.text(max_size=4) | st.booleans() | st.none() | st.lists(st.integers(), max_size=2)
            | st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)
            | st.floats().filter(lambda x: not x.is_integer()))


@settings(max_examples=200)
@given(value=_not_ids, where=st.sampled_from([(PLAN, ("fpgas", 1, "nodes", 0)),
                                              (OUR_PLAN, ("devices", 0, "calls", 1, 0))]))
@example(value=2.5, where=(PLAN, ("fpgas", 1, "nodes", 0)))
@example(value=math.inf, where=(OUR_PLAN, ("devices", 0, "calls", 1, 0)))
def test_random_wrong_node_id_in_a_plan(folder, value, where):
    doc, path = where
    for argv in plan_commands(folder, write(folder, "plan-id.json", changed(doc, path, value))):
        refused(argv)


def _not_a_count(text: str) -> bool:
    try:
        return int(text) < 1
    except ValueError:
        return True


@settings(max_examples=200)
@given(value=st.text(max_size=12).filter(_not_a_count),
       option=st.sampled_from(["--calls", "--stages", "--max-ideals", "--accelerators", "--threads"]))
@example(value="0", option="--calls")
@example(value="\u0661e3", option="--stages")
def test_random_option_value(folder, value, option):
    before = ["solve", folder / "instance.json"] + (["--objective", "latency"] if option == "--calls" else [])
    if option == "--accelerators" and value.strip() in ("0", "-0", "+0"):
        value = "-1"   # 0 accelerators is a valid count
    refused(before + [option, value])


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\ a\u00e9', max_size=6)
_nests = st.recursive(st.none() | st.integers() | _tricky_text,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
                      max_leaves=30)


@settings(max_examples=300)
@given(value=_nests, limit=st.integers(0, 6), ascii_only=st.booleans())
@example(value=["\\", ["\"]"]], limit=1, ascii_only=True)
@example(value={"[[": [[{}]]}, limit=2, ascii_only=False)
def test_depth_scan_agrees_with_the_parsed_depth(value, limit, ascii_only):
    """The scan that refuses deep JSON before parsing counts what the parser would build: strings
    (with brackets, quotes and backslashes in them) do not count."""
    from placement.jsonfile import nested_deeper_than

    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nested_deeper_than(text, limit) == (_depth(value) > limit)


# ----- end to end ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"[" * 100_000, b'{"maxFPGAs": 1e400}'])
def test_console_script_prints_one_line(folder, content):
    hostile = write(folder, "e2e.json", content)
    done = subprocess.run([sys.executable, "-m", "placement", "solve", str(hostile)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {hostile}: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
