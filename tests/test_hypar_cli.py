"""``placement hypar``: the printed comparison, the JSON file, exit statuses."""

from __future__ import annotations

import itertools
import json
import re
import types

import pytest

import placement
from placement.cli import main
from placement.costmodel.hypar import communication
from placement.costmodel.network import load_network, network_file
from placement.errors import InvalidParameterError
from placement.solvers import hypar as planners


def test_hypar_prints_choices_and_totals_side_by_side(capsys):
    assert main(["hypar", "vgg-a", "--accelerators", "16", "--batch", "256"]) == 0
    out = capsys.readouterr().out
    assert "network   VGG-A: 11 weighted layers (8 conv, 3 fc), 132,851,392 weights" in out
    assert "setting   16 accelerators (4 levels), batch 256, partition types dp, mp" in out
    header = next(line for line in out.splitlines() if line.startswith("layer"))
    assert header.split() == ["layer", "kind", "hypar", "exact", "all-dp", "all-mp", "one-weird-trick"]
    assert next(line for line in out.splitlines() if line.startswith("fc6")).split() == \
        ["fc6", "fc", "mmmm", "mmmm", "dddd", "mmmm", "mmmm"]
    # all-dp: 15·132,851,392 elements, ·8 bytes
    assert next(line for line in out.splitlines() if line.startswith("all-dp")).split()[:4] == \
        ["all-dp", "1,992,770,880", "15,942,167,040", "15.9422"]
    assert next(line for line in out.splitlines() if line.startswith("hypar")).split()[:4] == \
        ["hypar", "183,778,624", "1,470,228,992", "1.4702"]


def test_hypar_json(tmp_path, capsys):
    out = tmp_path / "lenet.json"
    assert main(["hypar", "lenet-c", "--accelerators", "2", "--batch", "4", "--types", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    assert main(["hypar", "lenet-c", "--accelerators", "2", "--batch", "4", "--types", "3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    for document in (printed, doc):   # the same document but for the planners' run times
        for planner in document["planners"]:
            planner.pop("runtime_s")
    assert printed == doc
    assert (doc["format"], doc["network"], doc["accelerators"], doc["levels"], doc["batch"]) == \
        ("placement-hypar/1", "Lenet-c", 2, 1, 4)
    assert doc["types"] == ["dp", "mp", "mp-out"]
    planners = {p["planner"]: p for p in doc["planners"]}
    assert list(planners) == ["hypar", "exact", "all-dp", "all-mp", "one-weird-trick"]
    assert planners["all-dp"]["bytes"] == 8 * 430_500 and planners["all-dp"]["elements"] == 430_500
    assert planners["all-dp"]["levels"] == [{"level": 0, "pairs": 1, "elements": 430_500}]
    exact = planners["exact"]
    assert [c["layer"] for c in exact["choices"]] == ["conv1", "conv2", "ip1", "ip2"]
    partition = tuple(tuple(c["levels"]) for c in exact["choices"])
    assert communication(load_network("lenet-c"), partition, 4).bytes == exact["bytes"]
    assert planners["exact"]["bytes"] <= planners["hypar"]["bytes"]
    assert doc["skipped"] == {}
    assert doc["notes"] == []   # batch 4 on 2 accelerators: every dp split is whole


def test_hypar_bad_input_is_one_line(capsys):
    assert main(["hypar", "lenet-c", "--accelerators", "6", "--batch", "4"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --accelerators must be a power of two from 2 to 2^53 (the array is bisected level by level), not 6\n"
    # one accelerator is refused for the same reason, in the same words (it said "an integer ≥ 2")
    assert main(["hypar", "lenet-c", "--accelerators", "1", "--batch", "4"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --accelerators must be a power of two from 2 to 2^53 (the array is bisected level by "
                   "level), not 1\n")
    assert main(["hypar", "nosuch", "--accelerators", "4", "--batch", "4"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown network 'nosuch': no such file")
    assert main(["hypar", "", "--accelerators", "4", "--batch", "4"]) == 2   # not the current directory
    assert capsys.readouterr().err.startswith("error: unknown network '': no such file")
    assert main(["hypar", "lenet-c", "--accelerators", "4", "--batch", "0"]) == 2
    assert "expected a positive integer, got '0'" in capsys.readouterr().err
    assert main(["hypar", "/dev/null", "--accelerators", "4", "--batch", "4"]) == 2   # exists: not "no such file"
    assert capsys.readouterr().err == "error: /dev/null: the file is empty; it should hold a JSON document\n"


def test_hypar_out_refuses_the_bundled_network_it_reads_by_name(capsys):
    bundled = network_file("Lenet-C")
    assert bundled is not None and bundled.samefile(network_file("lenet-c"))
    before = bundled.read_bytes()
    try:
        assert main(["hypar", "Lenet-C", "--accelerators", "2", "--batch", "4", "--out", str(bundled)]) == 2
        assert capsys.readouterr().err == (f"error: {bundled}: is also an input of the command, which writing would "
                                           "overwrite; choose another name\n")
    finally:
        if bundled.read_bytes() != before:
            bundled.write_bytes(before)
    assert network_file("nosuch") is None


def test_hypar_reports_a_skipped_exact_planner(capsys):
    assert main(["hypar", "lenet-c", "--accelerators", "256", "--batch", "4", "--types", "3"]) == 0
    out = capsys.readouterr().out
    assert "exact: skipped: the exact planner needs 6,561² = 43,046,721 state pairs" in out
    assert next(line for line in out.splitlines() if line.startswith("layer")).split()[2:] == \
        ["hypar", "all-dp", "all-mp", "one-weird-trick"]


def test_hypar_notes_a_batch_split_into_fractions_of_a_sample(capsys):
    # batch 2 on 4 accelerators: all-dp splits it into 2^2 = 4 shares; all-mp never splits the batch
    assert main(["hypar", "lenet-c", "--accelerators", "4", "--batch", "2", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert "all-dp splits the batch of layer conv1 into 4 shares, which batch 2 does not divide: its amounts " \
           "count fractions of a sample" in notes
    assert not any(note.startswith("all-mp ") for note in notes)
    assert main(["hypar", "lenet-c", "--accelerators", "4", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "note: all-dp splits the batch of layer conv1 into 4 shares, which batch 2 does not divide" in out


def test_amounts_print_exactly_past_two_to_the_53():
    """Totals are exact fractions; the table rounds them to 3 decimals from the fraction itself (a
    float has 53 bits: 2^70 + 1 would print as 2^70)."""
    from fractions import Fraction

    from placement.report.hypar import _amount

    assert _amount(Fraction(2**70 + 1)) == "1,180,591,620,717,411,303,425"
    assert _amount(Fraction(2**70) + Fraction(9999, 10000)) == "1,180,591,620,717,411,303,425.000"
    assert _amount(Fraction(2**70) + Fraction(1, 3)) == "1,180,591,620,717,411,303,424.333"
    assert [_amount(Fraction(7, 2)), _amount(Fraction(-5, 4))] == ["3.500", "-1.250"]


def test_gigabytes_print_past_the_range_of_a_float_and_layers_stay_within_2_to_the_53(tmp_path, capsys):
    """The GB column is printed from the exact amount, past the largest float too (a float of the amount
    died with an OverflowError); a network file's layers hold at most 2^53 elements per sample and 2^53
    weights (10^310 weights were planned, and the result document held integers no reader takes): one fc
    layer of 2^26 inputs and 2^27 outputs, 2^53 weights, all-dp moves (2 − 1) · 8 · 2^53 bytes."""
    from placement.report.hypar import _gigabytes

    assert [_gigabytes(0), _gigabytes(15_942_167_040)] == ["0.0000", "15.9422"]
    assert [_gigabytes(10**21), _gigabytes(9_999_960 * 10**15), _gigabytes(8 * 10**310)] == \
        ["1.0000e+12", "1.0000e+13", "8.0000e+301"]
    network = tmp_path / "largest.json"
    network.write_text('{"layers": [{"name": "a", "type": "fc", "in": 67108864, "out": 134217728}]}')
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("all-dp "))
    assert row.split()[1:5] == ["9,007,199,254,740,992", "72,057,594,037,927,936", "72057594.0379", "1.0000"]
    network.write_text('{"layers": [{"name": "a", "type": "fc", "in": 1' + "0" * 155 + ', "out": 1' + "0" * 155 + "}]}")
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "1"]) == 2
    assert capsys.readouterr().err == (f"error: {network}: layer 0 (a): its input holds 1.000e+155 elements, more than "
                                       "the 2^53 a layer may hold\n")
    network.write_text('{"layers": [{"name": "a", "type": "conv", "in": [1' + "0" * 200 + ', 1' + "0" * 200
                       + ', 1], "out": [1, 1, 1], "kernel": 1}]}')   # past a float: an OverflowError's traceback
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "1"]) == 2
    assert capsys.readouterr().err == (f"error: {network}: layer 0 (a): its input holds 1.000e+400 elements, more than "
                                       "the 2^53 a layer may hold\n")


def test_wide_and_combining_characters_keep_the_columns_aligned():
    """Columns are as wide as a terminal draws their text: '日本' takes four columns, 'e\u0301' (e and a
    combining accent) one; with len() the cells after them shifted."""
    from placement.report.table import display_width, format_table

    assert [display_width("日本"), display_width("e\u0301"), display_width("ab")] == [4, 1, 2]
    assert format_table([("name", "v"), ("日本", "1"), ("e\u0301", "22")], left={0}) == [
        "name   v", "----  --", "日本   1", "e\u0301     22"]


def test_names_that_do_not_print_are_escaped_in_the_tables(tmp_path, capsys):
    """A layer named "a\\nb" split the choices table over two lines, and a right-to-left override
    (U+202E) reordered it: table cells write such characters as escapes, other names as they are."""
    from placement.report.table import format_table, printable

    assert [printable("a\nb"), printable("x\u202ey"), printable("日本語"), printable("e\u0301")] == \
        ["a\\nb", "x\\u202ey", "日本語", "e\u0301"]
    assert format_table([("name", "v"), ("a\nb", "1")], left={0}) == ["name  v", "----  -", "a\\nb  1"]
    network = tmp_path / "named.json"
    network.write_text('{"layers": [{"name": "a\\nb", "type": "fc", "in": 4, "out": 4}, '
                       '{"name": "c", "type": "fc", "in": 4, "out": 2}]}')
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("a\\nb "))
    assert lines[row + 1].split()[:2] == ["c", "fc"]           # the next row is the next layer's


def test_names_that_do_not_print_are_escaped_in_the_header_and_the_notes(tmp_path, capsys):
    """The network's name "x\\ny" split the header line, and a note naming layer "a\\nb" split over two lines.
    fc 4 -> 4 on 2 accelerators, batch 1: dp costs A(dW) = 16, mp A(F_1) = 4, so only all-dp splits the batch."""
    network = tmp_path / "named.json"
    network.write_text('{"name": "x\\ny", "layers": [{"name": "a\\nb", "type": "fc", "in": 4, "out": 4}]}')
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "network   x\\ny: 1 weighted layer (0 conv, 1 fc), 16 weights"
    assert [line for line in lines if "splits" in line] == [
        "note: all-dp splits the batch of layer a\\nb into 2 shares, which batch 1 does not divide: its amounts "
        "count fractions of a sample"]


def test_hypar_counts_one_layer_in_the_singular(tmp_path, capsys):
    # it printed "1 weighted layers"; fc 3 -> 2 on 2 accelerators, batch 1: dp 6 (A(dW)), mp 2 (A(F_1)),
    # mp-out 0 (the first layer's input error is never computed)
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"name": "one", "layers": [{"name": "a", "type": "fc", "in": 3, "out": 2}]}))
    assert main(["hypar", str(path), "--accelerators", "2", "--batch", "1", "--types", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "network   one: 1 weighted layer (0 conv, 1 fc), 6 weights"
    assert [line.split()[:3] for line in lines if line.split()[:1] in (["exact"], ["all-dp"], ["all-mp"])] == \
        [["exact", "0", "0"], ["all-dp", "6", "48"], ["all-mp", "2", "16"]]
    # fc 1 -> 1: one weight ("1 weights")
    path.write_text(json.dumps({"name": "unit", "layers": [{"name": "a", "type": "fc", "in": 1, "out": 1}]}))
    assert main(["hypar", str(path), "--accelerators", "2", "--batch", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "network   unit: 1 weighted layer (0 conv, 1 fc), 1 weight"


def _ticking(monkeypatch) -> None:
    """The planners' clock a second later at every reading."""
    clock = itertools.count()
    monkeypatch.setattr(planners, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))


def test_hypar_prints_the_exact_planners_progress_on_stderr(monkeypatch, capsys):
    # HyPar's search reads the planners' clock twice (0, 1), the exact planner
    # at its start (2), before its second layer (3) and after each layer but the last (4, 5)
    _ticking(monkeypatch)
    assert main(["hypar", "lenet-c", "--accelerators", "8", "--batch", "256"]) == 0
    err = capsys.readouterr().err
    assert re.sub(r"(?m)^\[ *[0-9.]+ s\] ", "", err) == ("exact planner: 2 of 4 layers planned, 2 s; about 2 s left\n"
                                                         "exact planner: 3 of 4 layers planned, 3 s; about 1 s left\n")
    _ticking(monkeypatch)
    assert main(["hypar", "lenet-c", "--accelerators", "8", "--batch", "256", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_hypar_library_passes_progress_to_the_exact_planner_and_refuses_other_values(monkeypatch):
    _ticking(monkeypatch)
    lines: list[str] = []
    placement.hypar("lenet-c", accelerators=8, batch=256, progress=lines.append)
    assert lines == ["exact planner: 2 of 4 layers planned, 2 s; about 2 s left",
                     "exact planner: 3 of 4 layers planned, 3 s; about 1 s left"]
    with pytest.raises(InvalidParameterError) as info:
        placement.hypar("lenet-c", accelerators=8, batch=256, progress=3)
    assert str(info.value) == "progress must be a function of one string or None, not int"


def test_hypar_interrupted_while_the_exact_planner_runs_says_so_in_one_line(monkeypatch, capsys):
    # Ctrl-C between two layers of the exact planner (its clock's fifth reading: after its second layer)
    clock = itertools.count()

    def perf_counter() -> float:
        if next(clock) == 4:
            raise KeyboardInterrupt
        return 0.0

    monkeypatch.setattr(planners, "time", types.SimpleNamespace(perf_counter=perf_counter))
    assert main(["hypar", "lenet-c", "--accelerators", "8", "--batch", "256"]) == 130
    assert capsys.readouterr() == ("", "error: interrupted\n")
