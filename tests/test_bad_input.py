"""Bad Tarnawski instances: each is rejected with one exact, one-line message.

Every message starts with the file's path; the rest names the offending field, node or edge.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from placement.errors import (InvalidInstanceError, InvalidParameterError, InvalidPlanError, LimitExceededError,
                              PlacementError)
from placement.io.plans import read_plan
from placement.io.tarnawski import read_instance
from placement.jsonfile import MAX_DEPTH, MAX_INPUT_BYTES
from placement.loading import load
from placement.problem.instance import MAX_SUM


def node(i: int, **fields) -> dict:
    data = {"id": i, "name": f"n{i}", "supportedOnFpga": 1, "cpuLatency": 4.0, "fpgaLatency": 1.0,
            "isBackwardNode": 0, "colorClass": i, "size": 10.0}
    data.update(fields)
    return data


def edge(src: int, dst: int, cost: float = 0.5, **fields) -> dict:
    return {"sourceId": src, "destId": dst, "cost": cost, **fields}


def instance(nodes: list[dict] | None = None, edges: list[dict] | None = None, **top) -> dict:
    """A valid chain 1 -> 2 -> 3 unless told otherwise; ``top`` overrides top-level fields."""
    data = {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [node(1), node(2), node(3)] if nodes is None else nodes,
            "edges": [edge(1, 2), edge(2, 3, 0.25)] if edges is None else edges}
    data.update(top)
    return data


def write(tmp_path: Path, data, name: str = "bad.json") -> Path:
    path = tmp_path / name
    # json.dumps writes NaN and Infinity literals, which Python's json reader accepts.
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def message(tmp_path: Path, data) -> str:
    """The one-line message read_instance raises for ``data``, without the leading path."""
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    text = str(info.value)
    assert "\n" not in text
    prefix = f"{path}: "
    assert text.startswith(prefix), text
    return text[len(prefix):]


def with_node(data: dict, position: int, **fields) -> dict:
    data["nodes"][position].update(fields)
    return data


# (case id, instance, exact message after "<path>: ")
CASES = [
    ("null for a number", with_node(instance(), 1, cpuLatency=None),
     "node 2: field 'cpuLatency' must be a number, got null"),
    ("missing top field", {k: v for k, v in instance().items() if k != "maxFPGAs"},
     "instance: missing field 'maxFPGAs'"),
    ("missing nodes", {k: v for k, v in instance().items() if k != "nodes"},
     "instance: missing field 'nodes'"),
    ("missing edge field", instance(edges=[{"sourceId": 1, "cost": 0.5}]),
     "edge #0: missing field 'destId'"),
    ("string for a number", with_node(instance(), 1, cpuLatency="3.5"),
     "node 2: field 'cpuLatency' must be a number, got string"),
    ("string for a count", instance(maxCPUs="1"),
     "instance: field 'maxCPUs' must be an integer, got string"),
    ("fractional count", instance(maxFPGAs=1.5),
     "instance: field 'maxFPGAs' must be an integer, got number"),
    # as the file spells it: it said "got inf"
    ("infinite boolean", with_node(instance(), 0, supportedOnFpga=math.inf),
     "node 1: field 'supportedOnFpga' must be true/false or 0/1, got Infinity"),
    ("bad boolean", with_node(instance(), 0, supportedOnFpga="yes"),
     "node 1: field 'supportedOnFpga' must be true/false or 0/1, got 'yes'"),
    ("null for a boolean", with_node(instance(), 0, supportedOnFpga=None),   # as JSON spells it, not None
     "node 1: field 'supportedOnFpga' must be true/false or 0/1, got null"),
    ("array for a boolean", with_node(instance(), 0, supportedOnFpga=[1]),
     "node 1: field 'supportedOnFpga' must be true/false or 0/1, got an array"),
    ("boolean 2", with_node(instance(), 0, isBackwardNode=2),
     "node 1: field 'isBackwardNode' must be true/false or 0/1, got 2"),
    ("nodes not an array", instance(nodes={"1": node(1)}),
     "instance: field 'nodes' must be an array, got object"),
    ("nodes null", dict(instance(), nodes=None),
     "instance: field 'nodes' must be an array, got null"),
    ("edges null", dict(instance(), edges=None),
     "instance: field 'edges' must be an array, got null"),
    ("node not an object", instance(nodes=[node(1), 7]),
     "node #1: must be an object, got integer"),
    ("duplicate node ids", with_node(instance(), 2, id=1),
     "duplicate node id 1"),
    ("edge to unknown node", instance(edges=[edge(1, 2), edge(2, 9)]),
     "edge 2 -> 9 refers to unknown node 9"),
    ("edge from unknown node", instance(edges=[edge(1, 2), edge(0, 3)]),
     "edge 0 -> 3 refers to unknown node 0"),
    ("self-loop", instance(edges=[edge(1, 2), edge(2, 2)]),
     "edge 2 -> 2 is a self-loop"),
    ("self-loop with another cost", instance(edges=[edge(2, 3), dict(edge(2, 2), cost=9.0)]),
     "edge 2 -> 2 is a self-loop"),
    ("cycle", instance(edges=[edge(1, 2), edge(2, 3), edge(3, 1)]),
     "the graph has a cycle: 1 -> 2 -> 3 -> 1"),
    ("negative time", with_node(instance(), 1, fpgaLatency=-1.5),
     "node 2: field 'fpgaLatency' is negative (-1.5)"),
    ("negative size", with_node(instance(), 0, size=-8),
     "node 1: field 'size' is negative (-8)"),
    ("negative memory", instance(maxSizePerFPGA=-1),
     "instance: field 'maxSizePerFPGA' is negative (-1)"),
    ("negative count", instance(maxCPUs=-1),
     "instance: field 'maxCPUs' is negative (-1)"),
    ("negative cost", instance(edges=[edge(1, 2, -0.5)]),
     "edge 1 -> 2: field 'cost' is negative (-0.5)"),
    ("NaN time", with_node(instance(), 1, cpuLatency=math.nan),
     "node 2: field 'cpuLatency' is NaN"),
    ("NaN size", with_node(instance(), 1, size=math.nan),
     "node 2: field 'size' is NaN"),
    ("NaN edge size", instance(edges=[edge(1, 2, size=math.nan)]),
     "edge 1 -> 2: field 'size' is NaN"),
    ("infinite time", with_node(instance(), 2, fpgaLatency=math.inf),
     "node 3: field 'fpgaLatency' is infinite"),
    ("infinite size", with_node(instance(), 2, size=-math.inf),
     "node 3: field 'size' is infinite"),
    ("infinite memory", instance(maxSizePerFPGA=math.inf),
     "instance: field 'maxSizePerFPGA' is infinite"),
    ("infinite count", instance(maxFPGAs=math.inf),     # was "must be an integer, got number"
     "instance: field 'maxFPGAs' is infinite"),
    ("NaN count", instance(maxCPUs=math.nan),
     "instance: field 'maxCPUs' is NaN"),
    # it was read as an integer rounded past 2^53: "reads inf, a number not written as an integer, 2^53 ..."
    ("infinite node id", with_node(instance(), 0, id=math.inf),
     "node #0: field 'id' is infinite"),
    ("infinite edge end", instance(edges=[edge(1, 2), edge(2, -math.inf)]),
     "edge #1: field 'destId' is infinite"),
    ("different out-edge costs", instance(edges=[edge(1, 2, 0.5), edge(1, 3, 0.75)]),
     "node 1: out-edges have different costs (0.5 and 0.75); the transfer cost is a property of the source node"),
    ("different out-edge costs, exact digits",
     instance(edges=[edge(1, 2, 0.000476837158203125), edge(1, 3, 0.0004768371582)]),
     "node 1: out-edges have different costs (0.000476837158203125 and 0.0004768371582); "
     "the transfer cost is a property of the source node"),
    ("backward to forward edge", with_node(instance(), 0, isBackwardNode=True),
     "edge 1 -> 2 goes from a backward node to a forward node"),
    ("unsupported and no CPUs", with_node(instance(maxCPUs=0), 1, supportedOnFpga=0),
     "node 2 ('n2') fits no device: not supported on accelerator; no cpu devices"),
    ("too big and no CPUs", with_node(instance(maxCPUs=0), 1, size=1000),
     "node 2 ('n2') fits no device: needs 1000 bytes, accelerator memory is 100; no cpu devices"),
    ("too big for 16 GiB and no CPUs", with_node(instance(maxCPUs=0, maxSizePerFPGA=17179869184), 1,
                                                 size=17179869185),
     "node 2 ('n2') fits no device: needs 17179869185 bytes, accelerator memory is 17179869184; no cpu devices"),
    ("zero devices", instance(maxFPGAs=0, maxCPUs=0),
     "instance: no devices (maxFPGAs and maxCPUs are both 0)"),
    ("no nodes", instance(nodes=[], edges=[]),
     "the graph has no nodes"),
    ("top level array", [instance()],
     "the instance must be a JSON object, got array"),
    ("top level string", "\"instance\"",
     "the instance must be a JSON object, got string"),
    ("top level null", "null",
     "the instance must be a JSON object, got null"),
    # an integer name is read as its digits (node 1 named 5 is "5"); no other number is
    ("fractional name", instance([node(1, name=5.5), node(2), node(3)]),
     "node 1: field 'name' must be a string (an integer is read as its digits), got 5.5"),
    ("boolean name", instance([node(1, name=True), node(2), node(3)]),
     "node 1: field 'name' must be a string (an integer is read as its digits), got true"),
]


@pytest.mark.parametrize("data, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_instance_message(tmp_path, data, expected):
    assert message(tmp_path, data) == expected


def test_an_integer_name_is_read_as_its_digits(tmp_path):
    assert read_instance(write(tmp_path, instance([node(1, name=5), node(2), node(3)]))).nodes[0].name == "5"


def test_missing_field(tmp_path):
    data = instance()
    del data["nodes"][1]["cpuLatency"]
    assert message(tmp_path, data) == "node 2: missing field 'cpuLatency'"


def test_missing_node_id(tmp_path):
    data = instance()
    del data["nodes"][0]["id"]
    assert message(tmp_path, data) == "node #0: missing field 'id'"


@pytest.mark.parametrize("text, line, column, why", [
    ('{"maxFPGAs": 2,\n "maxCPUs": }', 2, 13, "Expecting value"),
    ('{"maxFPGAs": 2 "maxCPUs": 1}', 1, 16, "Expecting ',' delimiter"),
    # Python 3.13's json names a trailing comma itself, at the comma; 3.11 and 3.12 the missing name after it
    ('{"nodes": [\n\n  {"id": 1,}\n]}', 3, *((11, "Illegal trailing comma before end of object")
                                             if sys.version_info >= (3, 13)
                                             else (12, "Expecting property name enclosed in double quotes"))),
    ("[1, 2", 1, 6, "Expecting ',' delimiter"),
    # the parser's "Extra data"; a second object on a line of its own is JSON Lines, a sweep's records
    ('{"id": "a", "status": "optimal"}\n{"id": "b", "status": "optimal"}\n', 2, 1,
     "text after the end of the document; a file holds one JSON document, and JSON Lines (a document a line, as a "
     "sweep's records) are not read here"),
    ('{"maxFPGAs": 2}\n,', 2, 1, "text after the end of the document"),
    ('{"maxFPGAs": 2} {"maxCPUs": 1}', 1, 17, "text after the end of the document"),
])
def test_malformed_json_names_line_and_column(tmp_path, text, line, column, why):
    assert message(tmp_path, text) == f"malformed JSON at line {line}, column {column}: {why}"


@pytest.mark.parametrize("text, key", [
    ('{"maxSizePerFPGA": 100, "maxFPGAs": 4, "maxFPGAs": 1, "maxCPUs": 1, "nodes": [], "edges": []}', "maxFPGAs"),
    ('{"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": 1, "edges": [], '
     '"nodes": [{"id": 0, "fpgaLatency": 1, "fpgaLatency": 9, "cpuLatency": 1}]}', "fpgaLatency"),
])
def test_a_key_given_twice_is_refused(tmp_path, text, key):
    """JSON parsers keep the last of two equal keys; which one the writer meant is not known."""
    assert message(tmp_path, text) == f"the key {key!r} appears twice in one object; which one is meant is not clear"


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.json"
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: no such file"


def test_directory(tmp_path):
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, not a JSON file"


def test_empty_file_name(capsys):
    """An empty name is no file: it was read as the current folder ('.: is a directory')."""
    with pytest.raises(InvalidInstanceError) as info:
        read_instance("")
    assert str(info.value) == "'': an empty file name; give the path of a file"
    from placement.cli import main

    assert main(["info", ""]) == 2
    assert capsys.readouterr().err == "error: '': an empty file name; give the path of a file\n"


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: not UTF-8 text (the byte at offset 13, 0xe9, cannot be there)"
    path.write_bytes('{"name": "x"}'.encode("utf-16"))   # before: "not UTF-8 text (byte 0)"
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: UTF-16 text (it begins with a UTF-16 byte order mark); save it as UTF-8"


@pytest.mark.parametrize("content", [b"", b"  \n\t\n", b"\xef\xbb\xbf"])
def test_an_empty_file_is_named_as_empty(tmp_path, content):
    path = tmp_path / "empty.json"
    path.write_bytes(content)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: the file is empty; it should hold a JSON document"


def test_a_gzip_file_is_named_as_compressed(tmp_path):
    import gzip

    path = tmp_path / "chain.json.gz"
    path.write_bytes(gzip.compress(json.dumps(instance()).encode()))
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: a gzip-compressed file, not JSON text; decompress it first (gunzip)"


def test_a_model_file_given_for_an_instance_is_named_with_the_way_to_import_it(tmp_path):
    """A new user's first try: the model itself where an instance is read. An ONNX file, a saved PyTorch model (a
    zip archive) and Python source were 'not UTF-8 text' or 'malformed JSON at line 1'; each is named, with the way
    to make an instance of its model. A JSON instance in a file so named is read as any other."""
    import zipfile

    model = tmp_path / "model.pt"
    with zipfile.ZipFile(model, "w") as archive:   # torch.save writes such an archive
        archive.writestr("model/data.pkl", b"\x80\x02")
    onnx, source, named = tmp_path / "model.onnx", tmp_path / "model.py", tmp_path / "chain.onnx"
    onnx.write_bytes(b"\x08\x07\x12\x07pytorch\x1a\x052.13.0:\xc4\x01")   # the bytes an ONNX export starts with
    source.write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n")
    named.write_text(json.dumps(instance()))
    for path, message in [
            (model, "a zip archive, not JSON text (a saved PyTorch model is one: import the model itself first, with "
                    "placement import, or import_torch in Python)"),
            (onnx, "an ONNX model, not JSON text: import it first (placement import, or import_onnx in Python)"),
            (source, "Python source, not JSON text: import the model it defines first (placement import, or "
                     "import_torch in Python)")]:
        with pytest.raises(InvalidInstanceError) as info:
            read_instance(path)
        assert str(info.value) == f"{path}: {message}"
    assert [n.id for n in read_instance(named).nodes] == [1, 2, 3]


def test_a_byte_order_mark_is_no_part_of_the_text(tmp_path):
    """Some editors start UTF-8 files with the mark EF BB BF; the document after it is read."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(instance()).encode())
    assert [n.id for n in read_instance(path).nodes] == [1, 2, 3]


def test_a_bad_instance_is_both_a_placement_error_and_a_value_error(tmp_path):
    """What the command line turns into exit 2 (PlacementError) and what callers catch as bad input (ValueError)."""
    path = write(tmp_path, instance(maxCPUs="1"))
    for kind in (PlacementError, ValueError):
        with pytest.raises(kind, match="field 'maxCPUs' must be an integer, got string"):
            read_instance(path)


# ----- limits: nesting, size, magnitude -----------------------------------------------------

def nested(depth: int, inner: str = "1") -> str:
    """``depth`` arrays and objects, alternately, around ``inner``."""
    text = inner
    for k in range(depth):
        text = f"[{text}]" if k % 2 else f'{{"k": {text}}}'
    return text


def test_nesting_up_to_the_limit_is_read_and_past_it_refused(tmp_path):
    assert MAX_DEPTH == 64
    # 64 levels parse (then fail as an instance), 65 are refused before parsing; strings with
    # brackets in them do not count.
    assert message(tmp_path, nested(64, '"[[[{{{"')) == "the instance must be a JSON object, got array"
    assert message(tmp_path, nested(65)) == "JSON nested more than 64 levels deep"


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 100_000, "[[]," * 100_000, "[[]," * 1000 + "]" * 1000])
def test_deep_nesting_is_one_error_never_a_recursion_error(tmp_path, text):
    assert message(tmp_path, text) == "JSON nested more than 64 levels deep"


def test_deeply_nested_plan_is_refused(tmp_path):
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000, "plan.json")
    with pytest.raises(InvalidPlanError) as info:
        read_plan(path)
    assert str(info.value) == f"{path}: JSON nested more than 64 levels deep"


def test_input_size_limit(tmp_path):
    text = json.dumps(instance())
    path = write(tmp_path, text)
    assert len(load(path, max_bytes=len(text)).nodes) == 3
    with pytest.raises(LimitExceededError) as info:
        load(path, max_bytes=len(text) - 1)
    assert str(info.value) == f"{path}: more than {len(text) - 1} bytes, the input size limit (max_bytes)"
    assert info.value.parameter == "max_bytes"
    with pytest.raises(InvalidParameterError, match="max_bytes must be a positive integer, not 0"):
        load(path, max_bytes=0)


@pytest.mark.parametrize("limit", [2**40, 2**63 - 2, 2**63, 10**40])
def test_a_size_limit_far_above_the_file_reads_it(tmp_path, limit):
    # the file was read with one read of limit + 1 bytes: MemoryError from 2**40, OverflowError from 2**63 - 2
    path = write(tmp_path, json.dumps(instance()))
    assert len(load(path, max_bytes=limit).nodes) == 3


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_an_endless_stream_stops_at_the_default_limit(capsys):
    # 256 MiB are read, not more; the command line says so in one line.
    from placement.cli import main

    assert MAX_INPUT_BYTES == 256 * 2**20
    assert main(["info", "/dev/zero"]) == 2
    assert capsys.readouterr().err == "error: /dev/zero: more than 268435456 bytes, the input size limit\n"


@pytest.mark.parametrize("literal, expected", [
    ("1" + "0" * 400, "an integer of 401 digits, past the largest number (about 1.8e308)"),
    ("-" + "9" * 308, "node 2: field 'cpuLatency' is negative (-1e+308)"),   # 308 digits: a float still holds it
    ("1e400", "node 2: field 'cpuLatency' is infinite"),
    ("9" * 5000, "malformed JSON: an integer with more than 4300 digits"),
])
def test_numbers_past_the_float_range(tmp_path, literal, expected):
    text = json.dumps(with_node(instance(), 1, cpuLatency=12345.0)).replace("12345.0", literal)
    assert message(tmp_path, text) == expected


@pytest.mark.parametrize("literal, value", [("NaN", "NaN"), ("-Infinity", "-Infinity"), ("1e400", "Infinity"),
                                            ("2.5E+0400", "Infinity"), ("-7E309", "-Infinity"),
                                            ("9" * 400 + ".0", "Infinity"), ("1" + "0" * 300 + "e10", "Infinity")])
def test_a_number_that_is_not_finite_in_a_field_the_reader_ignores(tmp_path, literal, value):
    # unknown node fields are ignored, but no file may hold such a number (README, Limits)
    text = json.dumps(with_node(instance(), 1, note=12345.0)).replace("12345.0", literal)
    assert message(tmp_path, text) == f"nodes[1].note is {value}; every number must be finite"


@pytest.mark.parametrize("value, name", [(math.nan, "NaN"), (-math.inf, "-Infinity"), (np.float32("nan"), "NaN"),
                                         (np.array([1.0, np.inf]), "Infinity"), (Decimal("-Infinity"), "-Infinity")])
def test_a_number_that_is_not_finite_in_a_field_the_reader_ignores_of_a_document(value, name):
    """A decoded document (a dict, no file) is held to the rule its file would be: it was solved with a NaN
    in an ignored field, and with a container that holds itself, which no JSON text decodes to (where a dict
    shared by two fields, which JSON cannot write either, is no cycle and is read)."""
    with pytest.raises(InvalidInstanceError) as info:
        load({**with_node(instance(), 1, note=1.0), "about": {"runs": [1, {"spread": value}]}})
    where = "about.runs[1].spread" + ("[1]" if isinstance(value, np.ndarray) else "")   # numpy's numbers are numbers
    assert str(info.value) == f"{where} is {name}; every number must be finite"
    looped = instance()
    looped["about"] = {"runs": []}
    looped["about"]["runs"].append(looped["about"])
    with pytest.raises(InvalidInstanceError) as info:
        load(looped)
    assert str(info.value) == "about.runs[0] holds itself (a container that is its own element is no JSON document)"
    shared = {"seed": 1}
    assert len(load({**instance(), "about": {"first": shared, "second": shared}}).nodes) == 3


def test_integers_past_the_float_range_in_a_document():
    """A decoded document (no file) reaches the field reader, which says which field it is."""
    with pytest.raises(InvalidInstanceError) as info:
        load(with_node(instance(), 1, cpuLatency=10**400))
    assert str(info.value) == "node 2: field 'cpuLatency' is not a finite number (an integer of 401 digits)"


@pytest.mark.parametrize("change, expected", [
    # 6e99 + 6e99 = 1.2e100 > 1e100: the second node's time crosses the limit.
    (lambda d: [with_node(d, k, fpgaLatency=6e99) for k in (0, 1)],
     "node 2: time on accelerator 6e+99 takes the graph's total time on accelerator above 1e+100, the most a "
     "total of times, costs or sizes may be"),
    (lambda d: with_node(d, 2, cpuLatency=1e308),
     "node 3: time on cpu 1e+308 takes the graph's total time on cpu above 1e+100, the most a total of times, "
     "costs or sizes may be"),
    (lambda d: with_node(d, 0, size=1e308),
     "node 1: memory size 1e+308 takes the graph's total memory size above 1e+100, the most a total of times, "
     "costs or sizes may be"),
    (lambda d: d.update(edges=[edge(1, 2, 1e308), edge(2, 3)]),
     "node 1: transfer cost 1e+308 takes the graph's total transfer cost above 1e+100, the most a total of "
     "times, costs or sizes may be"),
    (lambda d: d.update(edges=[edge(1, 2, size=1e300), edge(2, 3)]),
     "edge 1 -> 2: tensor size 1e+300 takes the graph's total tensor size above 1e+100, the most a total of "
     "times, costs or sizes may be"),
])
def test_totals_past_the_limit(tmp_path, change, expected):
    data = instance()
    change(data)
    assert message(tmp_path, data) == expected


def test_totals_at_the_limit_are_read(tmp_path):
    # 5e99 + 5e99 is exactly 1e100, the largest total accepted.
    data = with_node(with_node(instance(), 0, fpgaLatency=5e99), 1, fpgaLatency=5e99)
    assert MAX_SUM == 1e100 and 5e99 + 5e99 == MAX_SUM
    assert read_instance(write(tmp_path, data)).nodes[1].times[0] == 5e99


# ----- accepted variants -----------------------------------------------------------------

@pytest.mark.parametrize("true, false", [(1, 0), (True, False)])
def test_booleans_as_numbers_or_literals(tmp_path, true, false):
    nodes = [node(1, supportedOnFpga=true, isBackwardNode=false),
             node(2, supportedOnFpga=false, isBackwardNode=false),
             node(3, supportedOnFpga=true, isBackwardNode=true)]
    problem = read_instance(write(tmp_path, instance(nodes=nodes)))
    assert [n.backward for n in problem.nodes] == [False, False, True]
    assert [n.times for n in problem.nodes] == [(1.0, 4.0), (None, 4.0), (1.0, 4.0)]


def test_mixed_boolean_spellings(tmp_path):
    nodes = [node(1, supportedOnFpga=True, isBackwardNode=0), node(2, supportedOnFpga=1, isBackwardNode=False),
             node(3, supportedOnFpga=0, isBackwardNode=1)]
    problem = read_instance(write(tmp_path, instance(nodes=nodes)))
    assert [n.times[0] for n in problem.nodes] == [1.0, 1.0, None]
    assert problem.is_training


def test_missing_or_null_colour_class(tmp_path):
    nodes = [node(1), node(2), node(3, colorClass=None)]
    del nodes[0]["colorClass"]
    nodes[1]["colorClass"] = 5
    problem = read_instance(write(tmp_path, instance(nodes=nodes)))
    assert [n.colour for n in problem.nodes] == [None, 5, None]
    assert len(problem.colour_classes()) == 3


def test_cost_per_source_node(tmp_path):
    data = instance(edges=[edge(1, 2, 0.5), edge(1, 3, 0.5), edge(2, 3, 0.25)])
    problem = read_instance(write(tmp_path, data))
    assert [n.out_cost for n in problem.nodes] == [0.5, 0.25, 0.0]


def test_optional_fields(tmp_path):
    """``name``, ``size`` and ``isBackwardNode`` may be left out; a graph without edges says so."""
    nodes = [{"id": 7, "supportedOnFpga": 1, "cpuLatency": 2, "fpgaLatency": 1}]
    problem = read_instance(write(tmp_path, {"maxSizePerFPGA": 0, "maxFPGAs": 1, "maxCPUs": 0, "nodes": nodes,
                                             "edges": []}))
    (only,) = problem.nodes
    assert (only.id, only.name, only.memory, only.backward, only.colour) == (7, "7", 0.0, False, None)
    assert problem.edges == ()


@pytest.mark.parametrize("change, message", [
    # A misspelt or missing "edges" once read as a graph without edges, and was solved as such.
    (lambda d: d.pop("edges"), "instance: missing field 'edges'"),
    (lambda d: d.update(edge=d.pop("edges")),
     "instance: unknown field 'edge' (the fields are nodes, edges, maxSizePerFPGA, maxFPGAs, maxCPUs, "
     "deviceTypes, about)"),
    (lambda d: d.update(maxGPUs=2),
     "instance: unknown field 'maxGPUs' (the fields are nodes, edges, maxSizePerFPGA, maxFPGAs, maxCPUs, "
     "deviceTypes, about)"),
    (lambda d: d.update(deviceTypes=[{"name": "gpu", "count": 1, "paysComm": True}]),
     "instance: field 'maxSizePerFPGA' goes with the two-type format; with 'deviceTypes' the catalogue "
     "gives every count and memory"),
    # a non-object 'about', or a time quantum that is not a number, was read as no record at all
    (lambda d: d.update(about=["time_quantum_ms", 0.5]), "instance: field 'about' must be an object, got array"),
    (lambda d: d.update(about={"time_quantum_ms": "0.5"}),
     "instance: field 'about.time_quantum_ms' must be a finite number ≥ 0 (0: none recorded), got '0.5'"),
    (lambda d: d.update(about={"time_quantum_ms": -1}),
     "instance: field 'about.time_quantum_ms' must be a finite number ≥ 0 (0: none recorded), got -1"),
])
def test_top_level_fields_are_checked(tmp_path, change, message):
    data = instance()
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("field", ["supportedOnFpga", "fpgaLatency", "cpuLatency"])
def test_a_two_type_node_field_beside_device_types_is_refused(tmp_path, field):
    """With ``deviceTypes`` a node's ``times`` give every time: ``supportedOnFpga: 0`` was ignored, and the
    node placed on the accelerator type it said it could not run on."""
    data = {"deviceTypes": [{"name": "gpu", "count": 2, "memory": 100, "paysComm": True}],
            "nodes": [{"id": 1, "times": {"gpu": 1}, field: 0}, {"id": 2, "times": {"gpu": 1}}],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == (f"{path}: node 1: field {field!r} goes with the two-type format; with 'deviceTypes' "
                               "a node's 'times' give its time on each type (null: unsupported there)")


@pytest.mark.parametrize("where, field, meant", [
    # each was ignored: the classes dropped, every node a forward one, sizes 0 against the memory bound
    ("node", "colourClass", "colorClass"), ("node", "isBackward", "isBackwardNode"), ("node", "sizes", "size"),
    ("node", "backward", "isBackwardNode"), ("node", "ColorClass", "colorClass"),
    ("edge", "SIZE", "size"), ("edge", "source", "sourceId"),
])
def test_a_misspelt_node_or_edge_field_is_refused_not_ignored(tmp_path, where, field, meant):
    data = instance()
    obj = data["nodes"][1] if where == "node" else data["edges"][1]
    value = obj.pop(meant, 1)
    obj[field] = value
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    place = "node 2" if where == "node" else "edge #1" if meant == "sourceId" else "edge 2 -> 3"
    assert str(info.value) == (f"{path}: {place}: unknown field {field!r}; did you mean {meant!r}? (a field this "
                               "like one the format reads is refused, not ignored)")


def test_a_misspelling_that_prints_like_the_field_it_means_shows_its_characters(tmp_path):
    # 'colorClass' typed with a Cyrillic 'о' was told "unknown field 'cоlorClass'; did you mean 'colorClass'?":
    # two names that print alike, and nothing said how they differ
    data = instance()
    data["nodes"][1]["c\u043elorClass"] = data["nodes"][1].pop("colorClass")
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == (f"{path}: node 2: unknown field 'c\u043elorClass' (written 'c\\u043elorClass'); did "
                               "you mean 'colorClass'? (a field this like one the format reads is refused, not "
                               "ignored)")


def test_other_node_and_edge_fields_are_ignored(tmp_path):
    """The model importers' records, and a field beside the known one it resembles, change nothing."""
    plain = read_instance(write(tmp_path, instance()))
    extra = {"layerId": 3, "flops": 1e9, "bytes": 2048, "module": "encoder.0", "TMPCs": [], "uid": "n",
             "sizes": [1, 2]}
    data = instance(nodes=[node(i, **extra) for i in (1, 2, 3)],
                    edges=[edge(1, 2, communicationCost=7, costs=9), edge(2, 3, 0.25, weight=1)])
    assert read_instance(write(tmp_path, data)) == plain


@pytest.mark.parametrize("field, fields", [("times", "'supportedOnFpga', 'fpgaLatency' and 'cpuLatency'"),
                                           ("weightTimes", "'fpgaWeightLatency' and 'cpuWeightLatency'")])
def test_a_device_type_node_field_in_the_two_type_format_is_refused(tmp_path, field, fields):
    """Without ``deviceTypes`` a node's ``times`` were ignored, the node's latencies deciding."""
    data = instance()
    data["nodes"][2][field] = {"accelerator": 0.5, "cpu": 1}
    path = write(tmp_path, data)
    with pytest.raises(InvalidInstanceError) as info:
        read_instance(path)
    assert str(info.value) == (f"{path}: node 3: field {field!r} goes with 'deviceTypes'; in the two-type format "
                               f"a node gives {fields}")


def test_fits_on_cpu_only(tmp_path):
    """A node too big for the accelerator or unsupported there is fine when a CPU exists."""
    data = with_node(with_node(instance(), 1, size=1000), 2, supportedOnFpga=0)
    problem = read_instance(write(tmp_path, data))
    assert problem.nodes[2].times == (None, 4.0)


# ----- through the command line (placement.cli.main) ---------------------------------------

def _cli():
    cli = pytest.importorskip("placement.cli", reason="placement.cli is not there yet")
    if not hasattr(cli, "main"):
        pytest.skip("placement.cli has no main() yet")
    return cli


@pytest.mark.parametrize("data, expected", [
    (instance(edges=[edge(1, 2), edge(2, 3), edge(3, 1)]), "the graph has a cycle: 1 -> 2 -> 3 -> 1"),
    (instance(maxFPGAs=0, maxCPUs=0), "instance: no devices (maxFPGAs and maxCPUs are both 0)"),
    ('{"maxFPGAs": 2 "maxCPUs": 1}', "malformed JSON at line 1, column 16: Expecting ',' delimiter"),
    (with_node(instance(), 1, cpuLatency="3.5"), "node 2: field 'cpuLatency' must be a number, got string"),
], ids=["cycle", "zero devices", "malformed JSON", "mistyped field"])
def test_cli_info_bad_instance(tmp_path, capsys, data, expected):
    cli = _cli()
    path = write(tmp_path, data)
    assert cli.main(["info", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {path}: {expected}\n"


def test_cli_info_missing_file(tmp_path, capsys):
    cli = _cli()
    path = tmp_path / "nowhere.json"
    assert cli.main(["info", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: no such file\n"


def test_an_empty_device_catalogue_is_named_as_empty():
    with pytest.raises(InvalidInstanceError) as err:
        load({"deviceTypes": [], "nodes": [{"id": 1, "times": {}}], "edges": []})
    assert str(err.value) == "instance: field 'deviceTypes' must be a non-empty array, got an empty array"


def test_a_time_for_a_type_the_catalogue_lacks_lists_the_types():
    # a type named "5" left the node's "fast" unexplained
    catalogue = [{"name": "5", "count": 1, "paysComm": True}, {"name": "cpu", "count": 1, "paysComm": False}]
    with pytest.raises(InvalidInstanceError) as err:
        load({"deviceTypes": catalogue, "nodes": [{"id": 1, "times": {"fast": 1, "cpu": 2}}], "edges": []})
    assert str(err.value) == "node 1: 'times' names unknown device type 'fast' (the device types are '5', 'cpu')"


def test_a_time_for_a_type_written_in_another_unicode_form_names_the_difference():
    # "café" typed with a combining accent (as macOS and some editors write it) was refused as an unknown type
    # beside a catalogue listing "café": two names that print alike, and nothing said how they differ
    catalogue = [{"name": "caf\u00e9", "count": 1, "paysComm": True}]
    with pytest.raises(InvalidInstanceError) as err:
        load({"deviceTypes": catalogue, "nodes": [{"id": 1, "times": {"cafe\u0301": 1}}], "edges": []})
    assert str(err.value) == ("node 1: 'times' names unknown device type 'cafe\u0301' (the device types are "
                              "'caf\u00e9'); it is the device type 'caf\u00e9' written with other Unicode characters "
                              "('cafe\\u0301', not 'caf\\xe9'): write it as the catalogue does")


def test_a_misspelt_device_type_field_is_refused():
    # 'memroy' was ignored: the type had no memory bound, and a 100-byte node fitted a 10-byte device
    catalogue = [{"name": "gpu", "count": 1, "memroy": 10, "paysComm": True}]
    with pytest.raises(InvalidInstanceError) as err:
        load({"deviceTypes": catalogue, "nodes": [{"id": 0, "times": {"gpu": 1}, "size": 100}], "edges": []})
    assert str(err.value) == "device type 'gpu': unknown field 'memroy' (the fields are name, count, memory, paysComm)"


@pytest.mark.parametrize("name, got", [(5, "integer"), ("", "''"), (" gpu", "' gpu'"), (None, "null")])
def test_a_device_type_is_named_by_a_non_empty_string(name, got):
    # an integer name was read as its digits and an empty one accepted, so a plan's "type" had to match them
    catalogue = [{"name": name, "count": 1, "paysComm": True}, {"name": "cpu", "count": 1, "paysComm": False}]
    with pytest.raises(InvalidInstanceError) as err:
        load({"deviceTypes": catalogue, "nodes": [{"id": 1, "times": {"5": 1, "cpu": 2}}], "edges": []})
    assert str(err.value) == ("device type #0: field 'name' must be a non-empty string without surrounding spaces "
                              f"(plans name the type by it), got {got}")


PLAN_NOT_INSTANCE = ("the document is a plan, not an instance, which has 'nodes' and 'edges'; a plan goes after its "
                     "instance (the instance first, then the plan)")


@pytest.mark.parametrize("document, what", [
    ({"fpgas": [{"nodes": [1, 2]}], "cpus": []}, PLAN_NOT_INSTANCE),                     # an expert split
    ({"format": "placement-plan/1", "maxLoad": 7.5, "fpgas": [], "cpus": [], "backend": None}, PLAN_NOT_INSTANCE),
    ({"format": "placement-parallel-plan/1", "stages": []}, PLAN_NOT_INSTANCE),
    ({"format": "placement-hypar/1", "network": "Lenet-c"},
     "the document is a placement-hypar/1 document, not an instance, which has 'nodes' and 'edges'"),
], ids=["expert split", "plan file", "parallel plan", "hypar output"])
def test_another_document_of_the_package_is_named_not_read_field_by_field(tmp_path, capsys, document, what):
    # before: "instance: unknown field 'backend' (the fields are nodes, edges, ...)"
    path = write(tmp_path, document)
    with pytest.raises(InvalidInstanceError) as info:
        load(path)
    assert str(info.value) == f"{path}: {what}"
    cli = _cli()
    assert cli.main(["verify", str(path), str(path)]) == 2   # a plan given first, as the instance
    assert capsys.readouterr().err == f"error: {path}: {what}\n"


def test_a_description_of_an_instance_is_named_wherever_it_is_given(tmp_path, capsys):
    """The JSON description of chain4 (its counts, as ``info`` writes it) given as an instance, a model, a
    plan and a grid. Before, each reader took it field by field: "instance: unknown field 'backward'",
    "the plan's backward record must be an object, not integer"."""
    from placement.codesign.grid import load_grid
    from placement.codesign.workload import load_workload

    instance = Path(__file__).parent.parent / "instances" / "tiny" / "chain4.json"
    cli = _cli()
    assert cli.main(["info", str(instance), "--json"]) == 0
    path = write(tmp_path, json.loads(capsys.readouterr().out), "chain4-info.json")
    for read, what in ((load, "an instance, which has 'nodes' and 'edges'"),
                       (load_workload, "a model file, which has 'nodes' (each with its operators, or FLOPs and "
                                       "bytes) and 'edges'")):
        with pytest.raises(InvalidInstanceError) as caught:
            read(path)
        assert str(caught.value) == f"{path}: the document is a description of an instance, not {what}"
    with pytest.raises(InvalidInstanceError) as caught:
        load_grid(path)
    assert str(caught.value) == (f"{path}: the document is an instance or a model file, not a grid, which has an "
                                 "array of values for each of tensor_cores, array_width, array_depth, vector_cores, "
                                 "vector_lanes, buffer_mb")
    for command in ("simulate", "verify"):
        assert cli.main([command, str(instance), str(path)]) == 2
        assert capsys.readouterr().err == (f"error: {path}: the plan has none of the fields 'devices', 'fpgas', "
                                           "'cpus'; the document has 'nodes': it is an instance, or a description "
                                           "of one, not a plan\n")


def test_a_plan_or_a_grid_is_named_where_a_model_or_a_grid_is_expected(tmp_path):
    # before: "instance: unknown field 'backend' (the fields are nodes, ...)", "grid: unknown field 'backend'"
    from placement.codesign.grid import load_grid
    from placement.codesign.workload import load_workload

    path = write(tmp_path, {"format": "placement-plan/1", "maxLoad": 7.5, "fpgas": [], "cpus": [], "backend": None})
    with pytest.raises(InvalidInstanceError) as caught:
        load_workload(path)
    assert str(caught.value) == (f"{path}: the document is a plan, not a model file, which has 'nodes' (each with "
                                 "its operators, or FLOPs and bytes) and 'edges'")
    grid = Path(__file__).parent.parent / "instances" / "grids" / "tiny.json"
    with pytest.raises(InvalidInstanceError) as caught:   # before: "instance: unknown field 'array_depth'"
        load_workload(grid)
    assert str(caught.value) == (f"{grid}: the document is a design grid, not a model file, which has 'nodes' (each "
                                 "with its operators, or FLOPs and bytes) and 'edges'")
    with pytest.raises(InvalidInstanceError) as caught:
        load_grid(path)
    assert str(caught.value) == (f"{path}: the document is a plan, not a grid, which has an array of values for "
                                 "each of tensor_cores, array_width, array_depth, vector_cores, vector_lanes, "
                                 "buffer_mb")


def test_a_sweep_specification_a_model_and_a_grid_are_told_apart(tmp_path):
    # before: "instance: unknown field 'budgets'", "grid: unknown field 'budgets'", "unknown key 'about'",
    # "unknown key 'array_depth'"
    from placement.codesign.grid import load_grid
    from placement.codesign.sweep import load_spec
    from placement.codesign.workload import load_workload

    spec = write(tmp_path, {"models": ["gnmt-training"], "chips": [1, 2], "budgets": [[606.68, 300]]}, "spec.json")
    with pytest.raises(InvalidInstanceError) as caught:
        load_workload(spec)
    assert str(caught.value) == (f"{spec}: the document is a sweep specification, not a model file, which has "
                                 "'nodes' (each with its operators, or FLOPs and bytes) and 'edges'")
    with pytest.raises(InvalidInstanceError) as caught:
        load_grid(spec)
    assert str(caught.value) == (f"{spec}: the document is a sweep specification, not a grid, which has an array "
                                 "of values for each of tensor_cores, array_width, array_depth, vector_cores, "
                                 "vector_lanes, buffer_mb")
    root = Path(__file__).parent.parent / "instances"
    for path, what in ((root / "models" / "mlp-training.json", "a model file (or an instance)"),
                       (root / "grids" / "tiny.json", "a design grid")):
        with pytest.raises(InvalidInstanceError) as caught:
            load_spec(path)
        assert str(caught.value) == (f"{path}: the document is {what}, not a sweep specification, which has the "
                                     "lists models, chips and budgets")


@pytest.mark.parametrize("document, what", [
    ({"name": "tiny", "tensor_cores": [1, 2], "array_width": [64], "array_depth": [128], "vector_cores": [1],
      "vector_lanes": [128], "buffer_mb": [8]}, "a design grid"),
    ({"models": ["gnmt-training"], "chips": [1, 2], "budgets": [[606.68, 300]], "objectives": ["throughput"]},
     "a sweep specification"),
    ({"status": "optimal", "objective": "throughput", "value": 727.7, "designs": [], "plan": [], "chips": 2},
     "a co-design result"),
], ids=["grid", "sweep", "co-design result"])
def test_a_document_of_the_co_design_is_named_where_an_instance_or_a_plan_is_expected(tmp_path, capsys, document,
                                                                                         what):
    """Before, each was read field by field: "instance: unknown field 'array_depth'" (or 'baselines', 'chips'), and
    a sweep given as a plan was refused for "unknown field 'objectives'; did you mean 'objective'?"."""
    from placement.codesign.workload import load_workload

    path = write(tmp_path, document)
    with pytest.raises(InvalidInstanceError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: the document is {what}, not an instance, which has 'nodes' and 'edges'"
    with pytest.raises(InvalidPlanError) as caught:
        read_plan(path)
    assert str(caught.value) == (f"{path}: the document is {what}, not a plan, which has 'devices' (or 'fpgas' and "
                                 "'cpus')")
    with pytest.raises(InvalidInstanceError) as caught:
        load_workload(path)
    assert str(caught.value) == (f"{path}: the document is {what}, not a model file, which has 'nodes' (each with its "
                                 "operators, or FLOPs and bytes) and 'edges'")
    instance = Path(__file__).parent.parent / "instances" / "tiny" / "chain4.json"
    assert _cli().main(["verify", str(instance), str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {path}: the document is {what}, not a plan, which has 'devices' (or "
                                       "'fpgas' and 'cpus')\n")


def test_a_device_type_built_in_code_takes_none_for_unbounded_memory_as_a_file_takes_null():
    from placement import DeviceType, Instance, Node

    for acc in (DeviceType("accelerator", 1, None), DeviceType("accelerator", 1)):
        assert acc.memory == math.inf
        problem = Instance((Node(1, "a", (1.0, 2.0), memory=5.0),), (), (acc, DeviceType("cpu", 1, pays_comm=False)))
        assert load({"deviceTypes": [{"name": "accelerator", "count": 1, "memory": None, "paysComm": True},
                                     {"name": "cpu", "count": 1, "paysComm": False}],
                     "nodes": [{"id": 1, "times": {"accelerator": 1, "cpu": 2}, "size": 5}], "edges": []}
                    ).device_types == problem.device_types

def test_instances_built_in_code_are_held_to_the_rules_of_files():
    """Names a file could not give: an instance's name that is no string (a result read back from JSON
    then named it otherwise), a node's, and a device type named by an empty or padded string."""
    from placement import DeviceType, Edge, Instance, Node

    acc, cpu = DeviceType("accelerator", 1), DeviceType("cpu", 1, pays_comm=False)
    nodes, edges = (Node(1, "a", (1.0, 2.0)), Node(2, "b", (1.0, 2.0))), (Edge(1, 2),)
    for build, message in (
            (lambda: Instance(nodes, edges, (acc, cpu), name=5), "the instance's name must be a string, got int 5"),
            (lambda: Instance((nodes[0], Node(2, None, (1.0, 2.0))), edges, (acc, cpu)),
             "node 2: name must be a string, got NoneType None"),
            (lambda: Instance(nodes, edges, (DeviceType("", 1), cpu)),
             "a device type's name must be a non-empty string without surrounding spaces (plans name the type by "
             "it), got ''"),
            (lambda: Instance(nodes, edges, (DeviceType("gpu ", 1), cpu)),
             "a device type's name must be a non-empty string without surrounding spaces (plans name the type by "
             "it), got 'gpu '"),
            # an edge's end True was node 1, where a node's id True is refused
            (lambda: Instance(nodes, (Edge(True, 2),), (acc, cpu)),
             "edge True -> 2: an end must be a node id (an integer), got bool True"),
            (lambda: Instance(nodes, (Edge(1, 2.0),), (acc, cpu)),
             "edge 1 -> 2.0: an end must be a node id (an integer), got float 2.0")):
        with pytest.raises(InvalidInstanceError) as caught:
            build()
        assert str(caught.value) == message


def test_the_readme_s_misspelling_example_prints_what_it_says(capsys):
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M) if "colourClass" in b]
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == ("node 1: unknown field 'colourClass'; did you mean 'colorClass'? (a field "
                                       "this like one the format reads is refused, not ignored)\n")


# what split --json, verify --json (of a plan and of a parallel plan) and simulate --json write, in short
SPLIT = {"format": "megatron", "split": "Etttt|tttt|tttt|L", "notes": [], "warnings": [], "order": None}
VERDICT = {"valid": True, "objective": "throughput", "contiguity": "stages", "value": 7.5, "max_load": 7.5,
           "violations": [], "finest_class": "stages", "inferred": [], "calls": None, "notes": []}
PARALLEL_VERDICT = {"valid": True, "value": 53.5, "violations": [], "schedule": "piper", "chunks": 1, "devices": 10,
                    "memory": 8e10, "time_per_batch": 14107.3, "stages": [{"nodes": [0], "d": 8, "t": 1}]}
SIMULATION = {"format": "placement-simulation/1", "schedule": "stream", "makespan": 487.5, "stages": [{"device": 0}]}
CATALOGUE = {"devices": {"g": {"kind": "cpu", "peak_flops": {"fp32": 1e12}, "memory_bandwidth": 1e11,
                               "memory": 2**30}}}
# the files split --out writes in the JSON forms, and simulate --trace
SPLIT_SPEC = {"transformer.h.4": "BEGINNING", "transformer.h.8": "BEGINNING"}
DEEPSPEED = {"layers": ["embed", "h.0", "h.1", "head"], "parts": [0, 2, 4]}
PIPE_SPLIT = {"ops": [["view", "embedding"], ["add"]]}
TRACE = {"traceEvents": [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "chain4: stream"}}],
         "displayTimeUnit": "ms", "otherData": {}}
NAMED = [(SPLIT, "a split (the hand-off form of a plan)"), (VERDICT, "a verification verdict"),
         (PARALLEL_VERDICT, "a verification verdict"), (CATALOGUE, "a device catalogue"),
         ({**CATALOGUE, "format": "placement-devices/1"}, "a device catalogue"),
         (SPLIT_SPEC, "a split_spec (a split's hand-off file)"),
         (DEEPSPEED, "DeepSpeed parts (a split's hand-off file)"),
         (PIPE_SPLIT, "a pipe_split program (a split's hand-off file)"), (TRACE, "a trace of a simulation")]
NAMED_IDS = ["split", "verdict", "parallel verdict", "catalogue", "catalogue with its format", "split_spec",
             "deepspeed parts", "pipe_split program", "trace"]


@pytest.mark.parametrize("document, what", [*NAMED, (SIMULATION, "a placement-simulation/1 document")],
                         ids=[*NAMED_IDS, "simulation"])
def test_a_split_a_verdict_and_a_catalogue_are_named_where_an_instance_is_expected(tmp_path, capsys, document, what):
    """Before, each was read field by field ("instance: unknown field 'format'", "... 'calls'", "... 'devices'",
    "... 'transformer.h.4'", "... 'displayTimeUnit'"), and a simulation, for its 'stages', was called a plan to
    give after its instance."""
    from placement.codesign.workload import load_workload

    path = write(tmp_path, document)
    expected = f"{path}: the document is {what}, not an instance, which has 'nodes' and 'edges'"
    with pytest.raises(InvalidInstanceError) as caught:
        load(path)
    assert str(caught.value) == expected
    with pytest.raises(InvalidInstanceError) as caught:
        load_workload(path)
    assert str(caught.value) == (f"{path}: the document is {what}, not a model file, which has 'nodes' (each with its "
                                 "operators, or FLOPs and bytes) and 'edges'")
    plan = Path(__file__).parent.parent / "instances" / "tiny" / "chain4.json"   # a plan is not read first
    for argv in (["solve", str(path)], ["info", str(path)], ["verify", str(path), str(plan)]):
        assert _cli().main(argv) == 2
        assert capsys.readouterr().err == f"error: {expected}\n"


@pytest.mark.parametrize("document, what", NAMED, ids=NAMED_IDS)
def test_a_split_a_verdict_and_a_catalogue_are_named_where_a_plan_is_expected(tmp_path, capsys, document, what):
    """Before: "field 'format' must be 'placement-plan/1', got 'megatron'", "unknown field 'max_load'; did you mean
    'maxLoad'?", "field 'devices' must be an array, got object", "the plan has none of the fields 'devices', 'fpgas',
    'cpus'"; as a parallel plan, "unknown plan format 'megatron'", "unknown field 'time_per_batch'; did you mean
    'timePerBatch'?", "a parallel plan must be a JSON object with a list 'stages'"."""
    from placement.simulation.parallel import read_parallel_plan

    path = write(tmp_path, document)
    with pytest.raises(InvalidPlanError) as caught:
        read_plan(path)
    assert str(caught.value) == (f"{path}: the document is {what}, not a plan, which has 'devices' (or 'fpgas' and "
                                 "'cpus')")
    instance = Path(__file__).parent.parent / "instances" / "tiny" / "chain4.json"
    assert _cli().main(["verify", str(instance), str(path)]) == 2
    assert capsys.readouterr().err == f"error: {caught.value}\n"
    with pytest.raises(InvalidPlanError) as caught:
        read_parallel_plan(path)
    assert str(caught.value) == f"the document is {what}, not a parallel plan, which has a list 'stages'"


def test_a_co_design_result_is_named_where_a_grid_or_a_sweep_specification_is_expected(tmp_path, capsys):
    # before: "grid: unknown field 'chips' (the fields are name, tensor_cores, ...)", "unknown key 'designs'"
    from placement.codesign.grid import load_grid
    from placement.codesign.sweep import load_spec

    path = write(tmp_path, {"status": "optimal", "objective": "throughput", "value": 727.7, "designs": [], "plan": [],
                            "chips": 2})
    grid = (f"{path}: the document is a co-design result, not a grid, which has an array of values for each of "
            "tensor_cores, array_width, array_depth, vector_cores, vector_lanes, buffer_mb")
    with pytest.raises(InvalidInstanceError) as caught:
        load_grid(path)
    assert str(caught.value) == grid
    model = Path(__file__).parent.parent / "instances" / "models" / "mlp-training.json"
    assert _cli().main(["codesign", str(model), "--chips", "1", "--power", "300", "--grid", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {grid}\n"
    with pytest.raises(InvalidInstanceError) as caught:
        load_spec(path)
    assert str(caught.value) == (f"{path}: the document is a co-design result, not a sweep specification, which has "
                                 "the lists models, chips and budgets")


def test_a_record_holding_a_parallel_plan_is_read_by_its_plan():
    """A record whose 'plan' is a parallel plan is read by that plan, whatever fields of its own it has (a verdict's
    here); a co-design result, whose 'plan' is a list, is named by its own."""
    from placement.simulation.parallel import read_parallel_plan

    plan = {"format": "placement-parallel-plan/1", "devices": 4, "stages": [{"nodes": [0, 1], "d": 1, "t": 1}]}
    assert read_parallel_plan({**VERDICT, "plan": plan})[1:] == (4, None)
    with pytest.raises(InvalidPlanError) as caught:
        read_parallel_plan({"status": "optimal", "value": 727.7, "designs": [], "plan": [], "chips": 2})
    assert str(caught.value) == "the document is a co-design result, not a parallel plan, which has a list 'stages'"


def test_a_long_cycle_is_named_by_its_ends_and_counted():
    # a cycle through 5,000 nodes would otherwise be one line of some 40,000 characters
    n = 5000
    data = instance(nodes=[node(i) for i in range(1, n + 1)],
                    edges=[edge(i, i % n + 1) for i in range(1, n + 1)])
    with pytest.raises(InvalidInstanceError) as info:
        load(data)
    head = " -> ".join(map(str, range(1, 11)))
    tail = " -> ".join(map(str, range(n - 9, n + 1)))
    assert str(info.value) == f"the graph has a cycle of 5,000 nodes: {head} -> ... (4,980 more) -> {tail} -> 1"


def test_a_cycle_of_forty_nodes_is_listed_whole():
    data = instance(nodes=[node(i) for i in range(1, 41)], edges=[edge(i, i % 40 + 1) for i in range(1, 41)])
    with pytest.raises(InvalidInstanceError) as info:
        load(data)
    assert str(info.value) == "the graph has a cycle: " + " -> ".join(map(str, list(range(1, 41)) + [1]))
