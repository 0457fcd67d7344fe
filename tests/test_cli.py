"""The command line: outputs, plan files, exit statuses (see README, "Commands")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import placement
from placement.cli import main

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
CHAIN4 = str(TINY / "chain4.json")
MEMORY_CHAIN = str(TINY / "memory-chain.json")
DIAMOND = str(TINY / "diamond-cpu.json")


def test_solve_prints_verified_optimum_and_writes_plan(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "status      optimal" in captured.out
    assert "max-load    7.500000  (verified independently)" in captured.out
    assert captured.err == ""
    plan = json.loads(out.read_text())
    # chain4's optimum (see test_dp.test_chain4): {a,b} | {c,d}, both loads 7.5.
    assert plan["format"] == "placement-plan/1"
    assert plan["maxLoad"] == 7.5
    assert plan["fpgas"] == [{"load": 7.5, "nodes": [1, 2]}, {"load": 7.5, "nodes": [3, 4]}]
    assert plan["cpus"] == []
    assert (plan["method"], plan["objective_kind"], plan["contiguity"]) == ("dp", "throughput", "stages")
    assert (plan["status"], plan["objective"], plan["bound"], plan["gap"]) == ("optimal", 7.5, 7.5, 0.0)
    assert plan["stats"]["ideals"] == 5
    assert plan["runtime_s"] >= 0
    assert plan["verified"]["valid"] is True


def test_solve_progress_goes_to_stderr_unless_quiet(capsys):
    assert main(["solve", CHAIN4]) == 0
    err = capsys.readouterr().err
    assert "the ideals are the prefixes of the one topological order: no upper bound needed" in err
    assert "5 ideals over 4 supernodes" in err
    assert main(["solve", str(Path(CHAIN4).with_name("diamond-cpu.json"))]) == 0
    assert "upper bound from chain DP: 9" in capsys.readouterr().err


def test_device_overrides(capsys):
    # One accelerator holds the whole chain: 4 + 3 + 2 + 5 = 14.
    assert main(["solve", CHAIN4, "--accelerators", "1", "--quiet"]) == 0
    assert "max-load    14.000000" in capsys.readouterr().out
    # memory-chain with 6 bytes per accelerator: {a,b} fits, optimum 4.5 (see test_dp).
    assert main(["solve", MEMORY_CHAIN, "--memory", "6", "--quiet"]) == 0
    assert "max-load    4.500000" in capsys.readouterr().out
    # No accelerators: the CPU takes all three nodes, 3 x 8 = 24.
    assert main(["solve", MEMORY_CHAIN, "--accelerators", "0", "--quiet"]) == 0
    assert "max-load    24.000000" in capsys.readouterr().out


def test_own_devices_note_names_no_reason_the_recorded_devices_share(tmp_path, capsys):
    # memory 50 recorded, the instance's own is 100: the devices do not matter, only the broken pipeline order
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 3]}, {"nodes": [2, 4]}], "cpus": [],
                                "overrides": {"memory": 50}}))
    assert main(["verify", CHAIN4, str(plan), "--contiguity", "stages", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["violations"] == ["stages: no pipeline order of the devices exists: cycle 0 -> 1 -> 0"]
    assert document["notes"] == ["checked on the devices the plan file records it was solved with: --memory 50"]
    # a reason of the devices alone is still named: three accelerators recorded, the instance has two
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 3]}, {"nodes": [2]}, {"nodes": [4]}], "cpus": [],
                                "overrides": {"accelerators": 3}}))
    assert main(["verify", CHAIN4, str(plan), "--contiguity", "stages"]) == 1
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    assert notes == ["note: checked on the devices the plan file records it was solved with: --accelerators 3",
                     "note: on the instance's own devices the plan is not valid: device type accelerator: 3 devices "
                     "used, but only 2 exist"]


def test_device_overrides_hold_a_file_its_own_devices_cannot(tmp_path, capsys):
    """chain4 at 0.5 bytes an accelerator (1 byte a node) and no CPU is refused as written; --memory 2 holds it
    (7.5, its optimum at memory 2), and verify and simulate read it with the memory the plan records."""
    document = json.loads(Path(CHAIN4).read_text())
    document.update(maxSizePerFPGA=0.5, maxCPUs=0)
    path, plan = tmp_path / "small.json", tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    assert main(["solve", str(path), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: {path}: node 1 ('a') fits no device: needs 1 bytes, accelerator memory "
                                       "is 0.5; no cpu devices\n")
    assert main(["solve", str(path), "--memory", "2", "--out", str(plan), "--quiet"]) == 0
    assert "max-load    7.500000  (verified independently)" in capsys.readouterr().out
    assert main(["verify", str(path), str(plan), "--quiet"]) == 0
    assert "valid: no violations" in capsys.readouterr().out
    assert main(["simulate", str(path), str(plan), "--quiet"]) == 0
    assert "time per sample 7.5" in capsys.readouterr().out


def test_a_memory_of_negative_zero_prints_as_zero(tmp_path, capsys):
    """``maxSizePerFPGA: -0.0`` is a memory of 0 bytes: messages and tables print it as 0, not as "-0"."""
    from placement.problem.instance import format_number
    from placement.report.table import cell

    assert [format_number(-0.0), cell(-0.0), format_number(0.0), cell(0.0)] == ["0", "0", "0", "0"]
    document = json.loads(Path(CHAIN4).read_text())
    document.update(maxSizePerFPGA=-0.0, maxCPUs=0)
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(document))
    assert main(["solve", str(path), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: {path}: node 1 ('a') fits no device: needs 1 bytes, accelerator memory "
                                       "is 0; no cpu devices\n")
    for node in document["nodes"]:
        node["size"] = 0
    path.write_text(json.dumps(document))
    assert main(["solve", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "0/0" in out and "-0" not in out
    assert main(["info", str(path)]) == 0
    assert "memory 0 bytes each" in capsys.readouterr().out


def test_infeasible_exits_1_and_says_so(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["solve", MEMORY_CHAIN, "--cpus", "0", "--quiet", "--out", str(out), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)      # the status, machine-readable, without a plan file
    assert document["status"] == "infeasible"
    assert document["maxLoad"] is None and document["fpgas"] == []
    assert not out.exists()


def test_ideal_limit_exits_2_with_count(capsys):
    assert main(["solve", DIAMOND, "--max-ideals", "5", "--method", "dp"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: more than 5 ideals in the contracted graph (4 supernodes)")
    assert "Raise the limit --max-ideals" in err and len(err.splitlines()) == 1


def test_auto_takes_the_milp_above_the_ideal_limit(capsys):
    pytest.importorskip("ortools")
    assert main(["solve", DIAMOND, "--max-ideals", "5", "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert (document["method"], document["status"]) == ("milp", "optimal")
    assert "the DP refuses (more than 5 ideals" in captured.err
    # the progress line, like the error, names the option, not the library's parameter
    assert "Raise the limit --max-ideals" in captured.err and "max_ideals" not in captured.err
    assert document["objective"] == main_dp_value(DIAMOND)
    # the result says so too, not only the progress (which --quiet silences)
    assert document["message"].startswith("the MILP solved this (method 'auto'): the DP refused it (more than 5 "
                                          "ideals")
    assert "Raise the limit --max-ideals" in document["message"]   # the JSON names the option too
    assert main(["solve", DIAMOND, "--max-ideals", "5", "--quiet"]) == 0
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("note"))
    assert "the DP refused it (more than 5 ideals" in note and "Raise the limit --max-ideals" in note


def main_dp_value(path: str) -> float:
    import placement

    return placement.solve(path, method="dp").value


def test_zero_devices_is_bad_input(capsys):
    assert main(["solve", CHAIN4, "--accelerators", "0", "--cpus", "0"]) == 2
    assert capsys.readouterr().err == ("error: --accelerators leaves no device (--accelerators 0 and --cpus 0: "
                                       "every device count is 0)\n")


@pytest.mark.parametrize("command", [["solve"], ["solve", "--method", "greedy"], ["verify"]])
def test_zero_devices_of_an_instance_refused_as_written_blames_the_override(tmp_path, capsys, command):
    # the file has two accelerators, no CPU and a node only a CPU runs: refused as written, so it is read once
    # more with the overrides, and the refusal is theirs, not the file's (whose maxFPGAs is 2, not 0)
    path = tmp_path / "cpu-node.json"
    path.write_text(json.dumps({
        "maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 0,
        "nodes": [{"id": 1, "supportedOnFpga": True, "fpgaLatency": 1, "cpuLatency": 5, "size": 1},
                  {"id": 2, "supportedOnFpga": False, "fpgaLatency": 1, "cpuLatency": 5, "size": 1}],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 1}]}))
    if command == ["verify"]:
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 2]}], "cpus": []}))
        assert main([*command, str(path), str(plan), "--accelerators", "0"]) == 2
    else:
        assert main([*command, str(path), "--accelerators", "0", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: --accelerators leaves no device (--accelerators 0: "
                                       "every device count is 0)\n")


@pytest.mark.parametrize("argv, message", [
    (["solve"], "the following arguments are required: instance"),
    (["solve", CHAIN4, "--accelerators", "-1"], "argument --accelerators: expected a non-negative integer, got '-1'"),
    (["solve", CHAIN4, "--bogus"], "unrecognized arguments: --bogus"),
    (["solve", CHAIN4, "--accelerators", "1e12"], "argument --accelerators: expected a non-negative integer, "
                                                  "got '1e12'"),
    # int() alone reads both as 10 and 2
    (["solve", CHAIN4, "--accelerators", "1_0"], "argument --accelerators: expected a non-negative integer, "
                                                 "got '1_0'"),
    (["hypar", "lenet-c", "--accelerators", "\u0662", "--batch", "8"],
     "argument --accelerators: expected a positive integer, got '\u0662'"),
    # float() alone read these as 10 and 2 too, where the integer options refuse them
    (["solve", CHAIN4, "--memory", "1_0"], "argument --memory: expected a finite non-negative number of bytes (or with "
                                           "KiB, MiB, GiB, TiB), got '1_0'"),
    (["solve", CHAIN4, "--memory", "1_0GiB"], "argument --memory: expected a finite non-negative number of bytes (or "
                                              "with KiB, MiB, GiB, TiB), got '1_0GiB'"),
    (["solve", CHAIN4, "--time-limit", "\u0662"], "argument --time-limit: expected a finite positive number, "
                                                  "got '\u0662'"),
    (["solve", CHAIN4, "--threads", str(2**40)], "--threads must be an integer from 1 to 1024, "
                                                 "not 1099511627776"),  # the library's "or None": left out
    (["solve", CHAIN4, "--seed", str(2**63)], "--seed must be an integer from 0 to 2147483647, "
                                              "not 9223372036854775808"),
    # CBC and HiGHS take the limit in 64-bit milliseconds: 1e300 s was an OverflowError
    (["solve", CHAIN4, "--method", "milp", "--backend", "cbc", "--time-limit", "1e300"],
     "--time-limit must be a finite number > 0 and ≤ 1e+09, not 1e+300"),
    (["solve", CHAIN4, "--method", "magic"], "argument --method: invalid choice: 'magic' (choose from 'auto', 'dp', "
                                             "'milp', 'pipedream', 'greedy', 'local-search', 'partition', 'expert', "
                                             "'single', 'latency-greedy', 'latency-dp-split', "
                                             "'latency-chain', 'latency-modules')"),
])
def test_usage_errors_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {message}\n")


@pytest.mark.parametrize("text, value", [("2", 2.0), (" 2 ", 2.0), ("+2", 2.0), ("0.5", 0.5), (".5", 0.5), ("5.", 5.0),
                                         ("1e3", 1000.0), ("1E-3", 0.001), ("2.5e+2", 250.0)])
def test_a_number_option_reads_decimal_notation(text, value):
    from placement.cli.options import positive_float

    assert positive_float(text) == value


@pytest.mark.parametrize("option", ["--accelerators", "--cpus"])
def test_device_counts_past_the_node_count_solve_as_the_node_count(option, capsys):
    # chain4 (a 4, b 3, c 2, d 5; costs 1, 0.5, 1) on 4 or more accelerators: every node alone, the
    # largest load d's 5 + 1 = 6, and no set holding d does better ({c,d}: 7 + 0.5). A count of 10^12
    # adds empty devices only; CPUs are 10x slower, so more of them change nothing either.
    expected = "6.000000" if option == "--accelerators" else "7.500000"
    for count in ("4", str(10**12)):
        assert main(["solve", CHAIN4, option, count, "--quiet"]) == 0
        assert f"max-load    {expected}" in capsys.readouterr().out


def test_stages_past_the_node_count_with_huge_counts_are_infeasible_not_refused(capsys):
    # 10^6 accelerators allow --stages 5, but chain4's 4 nodes fill at most 4 stages: infeasible
    # (exit 1), whichever method; 4 stages put each node alone, max load 6 as above.
    for method in ("dp", "milp"):
        assert main(["solve", CHAIN4, "--accelerators", "1000000", "--stages", "5", "--method", method,
                     "--quiet"]) == 1
        assert "status      infeasible" in capsys.readouterr().out
    assert main(["solve", CHAIN4, "--accelerators", "1000000", "--stages", "4", "--quiet"]) == 0
    assert "max-load    6.000000" in capsys.readouterr().out


def test_missing_file_exits_2(capsys):
    assert main(["solve", "no/such/file.json"]) == 2
    assert capsys.readouterr().err == "error: no/such/file.json: no such file\n"


def test_verify_accepts_own_plan_and_flags_broken_one(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out), "--contiguity", "stages"]) == 0
    assert "valid: no violations" in capsys.readouterr().out

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"fpgas": [{"nodes": [1, 3]}, {"nodes": [2]}], "cpus": []}))
    assert main(["verify", CHAIN4, str(broken), "--contiguity", "stages"]) == 1
    text = capsys.readouterr().out
    assert "node 4 is not placed" in text
    assert "stages: no pipeline order of the devices exists" in text


def test_verify_places_the_nodes_a_split_leaves_out_with_their_colour_class(tmp_path, capsys):
    # README, verify: a split of the training pair listing f1 and f2 only; b1 and b2 (nodes 4, 3) share
    # their classes and go to their devices, which then carry the loads 8.5 and 11.5 of the pair's optimum
    split = tmp_path / "forward.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    assert main(["verify", str(TINY / "training-pair.json"), str(split)]) == 0
    out = capsys.readouterr().out
    assert "placed by colour inference: 2 nodes\nvalid: no violations\n" in out
    assert "instance training-pair: max load 11.5\n" in out
    assert main(["verify", str(TINY / "training-pair.json"), str(split), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["valid"], verdict["inferred"], [d["nodes"] for d in verdict["devices"]]) == (
        True, [3, 4], [[1, 4], [2, 3]])
    split.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2, 3]}]}))   # b1 alone inferred
    assert main(["verify", str(TINY / "training-pair.json"), str(split)]) == 0
    assert "placed by colour inference: 1 node\n" in capsys.readouterr().out   # was "1 nodes"


def test_verify_announces_the_check_of_a_large_graph(tmp_path, capsys, monkeypatch):
    """A graph of at least LARGE_GRAPH_NODES nodes (100,000; here lowered to chain4's 4) takes seconds to
    check: verify says when it starts reading and checking the plan and when it is done, on stderr; not
    with --quiet, nor below the size."""
    import re

    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr("placement.cli.verify.LARGE_GRAPH_NODES", 4)
    assert main(["verify", CHAIN4, str(out)]) == 0
    said = [re.sub(r"^\[ *[0-9.]+ s\] ", "", line) for line in capsys.readouterr().err.splitlines()]
    assert said == [f"checking the plan {out} on 4 nodes", "checked: the plan is valid"]
    assert main(["verify", CHAIN4, str(out), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_verify_json_holds_the_figures_of_the_text_tables(tmp_path, capsys):
    """chain4's optimal plan: {a,b} | {c,d}, each 7 of compute and 0.5 of communication (b's output
    out, or in), memory 2 of 100. Under latency (one call each): the first call runs 0 .. 7.5, the
    second receives b's output and ends at 15."""
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert [(d["type"], d["nodes"], d["compute"], d["comm"], d["load"], d["memory"], d["memory_bound"])
            for d in reply["devices"]] == [("accelerator", [1, 2], 7.0, 0.5, 7.5, 2.0, 100.0),
                                           ("accelerator", [3, 4], 7.0, 0.5, 7.5, 2.0, 100.0)]
    assert "call_schedule" not in reply
    assert main(["verify", CHAIN4, str(out), "--json", "--objective", "latency"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert [(c["device"], c["call"], c["start"], c["end"]) for c in reply["call_schedule"]] == [
        (0, 0, 0.0, 7.5), (1, 0, 7.5, 15.0)]
    assert reply["value"] == 15.0


def test_verify_notes_a_recorded_stage_count_the_plan_does_not_have(tmp_path, capsys):
    """chain4 solved into exactly 2 stages ({a,b} | {c,d}): the file records stages 2, which holds (no note,
    null in JSON); edited to record 3, the note says so, and the JSON names both counts."""
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--stages", "2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert "non-empty stage" not in capsys.readouterr().out
    document = json.loads(out.read_text())
    out.write_text(json.dumps({**document, "stages": 3}))
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert ("note: the plan file records a solve into exactly 3 non-empty stages; the plan has 2 non-empty "
            "devices\n") in capsys.readouterr().out
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages_refuted"] == {"recorded": 3, "non_empty_devices": 2}
    out.write_text(json.dumps({**document, "stages": 2}))
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert (reply["stages_refuted"], reply["stages_unreadable"]) == (None, None)
    for garbled in ("2", 2.5, -1, True, 0, [2]):   # no count: said, not silently passed over
        out.write_text(json.dumps({**document, "stages": garbled}))
        assert main(["verify", CHAIN4, str(out)]) == 0
        assert (f"note: the plan file's 'stages' is no positive integer: {json.dumps(garbled)}; the number of "
                "non-empty devices was not checked against it\n") in capsys.readouterr().out
        assert main(["verify", CHAIN4, str(out), "--json"]) == 0
        reply = json.loads(capsys.readouterr().out)
        assert (reply["stages_refuted"], reply["stages_unreadable"]) == (None, garbled)


def test_verify_notes_a_claimed_value_the_plan_does_not_have(tmp_path, capsys):
    """chain4's optimal plan ({a,b} | {c,d}, both loads 7.5) written by solve, then edited to claim a
    max load of 1: still valid (exit 0), and the note says what the file claims and what holds.
    The file as written claims 7.5, which holds: no note, and null in JSON."""
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert "claims" not in capsys.readouterr().out
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["claim_refuted"] is None
    document = json.loads(out.read_text())
    out.write_text(json.dumps({**document, "objective": 1.0, "maxLoad": 1.0}))
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert "note: the plan file claims throughput 1; the verified value is 7.5\n" in capsys.readouterr().out
    out.write_text(json.dumps({**document, "maxLoad": 2.0}))      # its Tarnawski field alone
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert "note: the plan file claims throughput 2; the verified value is 7.5\n" in capsys.readouterr().out
    out.write_text(json.dumps({**document, "objective": 1.0, "maxLoad": 1.0}))
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["claim_refuted"] == 1.0
    tarnawski = tmp_path / "tarnawski.json"   # Tarnawski's format claims maxLoad
    tarnawski.write_text(json.dumps({"maxLoad": 3, "fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}))
    assert main(["verify", CHAIN4, str(tarnawski)]) == 0
    assert "note: the plan file claims throughput 3; the verified value is 7.5\n" in capsys.readouterr().out
    tarnawski.write_text(json.dumps({"maxLoad": -1, "fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}))
    assert main(["verify", CHAIN4, str(tarnawski)]) == 0
    assert "claims" not in capsys.readouterr().out          # -1: not computed
    tarnawski.write_text(json.dumps({"maxLoad": "abc", "fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}))
    assert main(["verify", CHAIN4, str(tarnawski)]) == 0
    assert ("note: the plan file's 'maxLoad' is not a number; its claimed value was not checked\n"
            in capsys.readouterr().out)
    assert main(["verify", CHAIN4, str(tarnawski), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["claim_unreadable"] == "maxLoad"
    # a device's recorded load that the check refutes: noted as maxLoad is, where it went unsaid
    edited = json.loads(json.dumps(document))
    edited["devices"][1]["load"] = 5
    out.write_text(json.dumps(edited))
    assert main(["verify", CHAIN4, str(out)]) == 0
    assert "note: the plan file records load 5 for device 1; the verified load is 7.5\n" in capsys.readouterr().out
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [
        "checked for contiguity stages, the class the plan file records it was solved in",
        "the plan file records load 5 for device 1; the verified load is 7.5"]
    out.write_text(json.dumps({**document, "objective": True}))   # a bool is no number either
    assert main(["verify", CHAIN4, str(out), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert (reply["claim_unreadable"], reply["claim_refuted"]) == ("objective", None)


def test_info_reports_ideals_and_bound(capsys):
    assert main(["info", DIAMOND]) == 0
    lines = capsys.readouterr().out.splitlines()
    # diamond-cpu: s -> x, y -> t. Ideals: {}, {s}, {s,x}, {s,y}, {s,x,y}, all = 6.
    assert "ideals:                 6" in lines
    assert "nodes:                  4 (4 forward, 0 backward)" in lines
    # Lower bound: the largest node at its fastest (x or y, 6 on an accelerator), the cheapest work
    # spread over the 3 devices ((1 + 6 + 6 + 2) / 3 = 5), and the work weighed by speed: for λ ∈ [0, 1],
    # T ≥ Σ_v min(λ p_acc(v)/2, (1 − λ) p_cpu(v)), t on the CPU only; s, x and y (CPU ten times slower)
    # all switch at λ = 10/10.5 = 20/21, where λ (1 + 6 + 6)/2 + (1 − λ) 2 = 2 + 4.5 · 20/21 = 44/7.
    assert "throughput lower bound: 6.28571  max(class 6, average 5, speed-weighted 6.28571)" in lines
    # ... and it is a bound: the optimum is 9 ({s,x} pays 7 + out-costs of s and x = 9; {y} 6 + 1 + 1;
    # t alone on the CPU, which pays no communication; s on the CPU alone costs 10), as the DP finds.
    assert main_dp_value(DIAMOND) == 9.0 >= 6


def test_verify_names_the_instance_a_plan_was_made_for(tmp_path, capsys):
    """A plan solved for diamond-cpu (nodes 10-13) checked against chain4 (nodes 1-4): every node is
    unknown and none of chain4's is placed, 8 violations; the note says whose plan it is, and the
    value it claims is not weighed against the value of an invalid plan."""
    out = tmp_path / "plan.json"
    assert main(["solve", str(TINY / "diamond-cpu.json"), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(out)]) == 1
    text = capsys.readouterr().out
    assert "INVALID: 8 violations" in text
    # it places none of chain4's nodes: its max load 0 is said to be no value of the plan
    assert "instance chain4: max load 0  (of the nodes placed as the plan places them; the plan is invalid)\n" in text
    assert "note: the plan file was made for instance 'diamond-cpu', not 'chain4'\n" in text
    assert "claims" not in text
    assert main(["verify", CHAIN4, str(out), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["plan_made_for"], document["claim_refuted"]) == ("diamond-cpu", None)


def test_a_plan_named_for_its_instance_in_another_unicode_form_is_no_plan_of_another_instance(tmp_path, capsys):
    """A plan solved from "café.json" as macOS names it (a combining accent) and checked against "café.json" as
    typed elsewhere (one precomposed letter) was noted as made for another instance, 'café', not 'café': the
    two names are the same text (canonically equivalent), and no note is due. A different name still is one."""
    composed, decomposed = tmp_path / "caf\u00e9.json", tmp_path / "cafe\u0301.json"
    for path in (composed, decomposed):
        path.write_text(Path(CHAIN4).read_text())
    out = tmp_path / "plan.json"
    assert main(["solve", str(decomposed), "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["instance"] == "cafe\u0301"
    capsys.readouterr()
    assert main(["verify", str(composed), str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_made_for"] is None
    assert placement.verify(placement.load(str(composed)), str(out)).notes == ()
    other = tmp_path / "cafes.json"
    other.write_text(Path(CHAIN4).read_text())
    assert main(["verify", str(other), str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_made_for"] == "cafe\u0301"


def test_a_text_report_lists_twenty_violations_and_counts_the_rest():
    from placement.report.text import verdict_lines

    lines = verdict_lines(tuple(f"node {k} is not placed" for k in range(23)))
    assert lines[0] == "INVALID: 23 violations" and lines[1] == "  node 0 is not placed"
    assert lines[20:] == ["  node 19 is not placed", "  ... and 3 more (the JSON report lists them all)"]


def three_types_with_a_newline() -> dict:
    """instances/tiny/three-types.json with its type ``fast`` named ``fa\\nst``."""
    document = json.loads((TINY / "three-types.json").read_text())
    document["deviceTypes"][0]["name"] = "fa\nst"
    for node in document["nodes"]:
        node["times"]["fa\nst"] = node["times"].pop("fast")
    return document


def test_a_violation_naming_a_type_that_does_not_print_stays_one_line(tmp_path, capsys):
    """A device type named ``fa\\nst`` used twice where one exists: its violation was written in two lines
    (``device type fa`` and ``st: 2 devices used, ...``); it is one, the name escaped as the tables write it."""
    document = three_types_with_a_newline()
    instance, plan = tmp_path / "types.json", tmp_path / "plan.json"
    instance.write_text(json.dumps(document))
    plan.write_text(json.dumps({"devices": [{"type": "fa\nst", "nodes": [1, 2]}, {"type": "fa\nst", "nodes": [3, 4]}]}))
    assert main(["verify", str(instance), str(plan)]) == 1
    assert "  device type fa\\nst: 2 devices used, but only 1 exists\n" in capsys.readouterr().out


def test_a_note_naming_a_type_that_does_not_print_stays_one_line(tmp_path, capsys):
    """Four nodes of 40 bytes in one colour class, over types of 100 bytes, ``fa\\nst`` among them: the solve's
    note naming the type's memory was split over two lines of the summary; it is one, the name escaped."""
    document = three_types_with_a_newline()
    for node in document["nodes"]:
        node["colorClass"], node["size"] = 1, 40
    document["nodes"][1]["times"]["cpu"] = None
    instance = tmp_path / "types.json"
    instance.write_text(json.dumps(document))
    assert main(["solve", str(instance), "--method", "dp", "--quiet"]) == 1
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    assert len(notes) == 1 and "together they need 160 bytes, fa\\nst memory is 100;" in notes[0]


def test_a_log_the_dp_leaves_empty_is_explained(tmp_path, capsys):
    """--log is the MILP solver's; when the automatic method's DP solves the instance, it says so."""
    log = tmp_path / "solver.log"
    assert main(["solve", DIAMOND, "--log", str(log)]) == 0
    assert f"the DP solved this, so nothing went to the MILP solver's log {log}\n" in capsys.readouterr().err


def test_verify_takes_the_split_options_a_plan_file_records(tmp_path, capsys):
    """training-pair solved with --backward split --w-share 0.2 records those options in its file.
    verify reads the file as that split plan (its claimed value holds: no note about it), says so,
    and prices it at 0.2; options given on the command line win; split options with --backward
    joint are refused, as solve refuses them."""
    pair = str(TINY / "training-pair.json")
    out = tmp_path / "plan.json"
    assert main(["solve", pair, "--backward", "split", "--w-share", "0.2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    claimed = json.loads(out.read_text())["objective"]
    assert main(["verify", pair, str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("note: checked as a split-backward plan with --backward split, --w-placement any, "
                           "--no-inter-layer, --w-share 0.2, as the plan file records\n")
    assert "claims" not in text
    assert main(["verify", pair, str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(claimed, rel=1e-12)
    assert main(["verify", pair, str(out), "--w-share", "0.5", "--json"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["value"] != pytest.approx(claimed, rel=1e-9)
    assert other["claim_refuted"] is None   # the claim was made at 0.2: it was said to be refuted
    assert main(["verify", pair, str(out), "--backward", "joint", "--w-placement", "adjacent"]) == 2
    assert capsys.readouterr().err == "error: --w-placement applies to --backward split only\n"
    # a --x/--no-x option is named as typed in its positive form (it was named --no-inter-layer)
    assert main(["verify", pair, str(out), "--backward", "joint", "--inter-layer"]) == 2
    assert capsys.readouterr().err == "error: --inter-layer applies to --backward split only\n"
    # ... and the negative form as typed (it was named --inter-layer)
    assert main(["verify", pair, str(out), "--backward", "joint", "--no-inter-layer"]) == 2
    assert capsys.readouterr().err == "error: --no-inter-layer applies to --backward split only\n"
    # an option given at its default value is still given: refused, on verify and on solve
    assert main(["verify", pair, str(out), "--backward", "joint", "--w-share", "0.5"]) == 2
    assert capsys.readouterr().err == "error: --w-share applies to --backward split only\n"
    for option in (["--w-share", "0.5"], ["--w-placement", "any"]):
        assert main(["solve", pair, *option]) == 2
        assert capsys.readouterr().err == f"error: {option[0]} applies to --backward split only\n"
    assert main(["solve", pair, "--schedule", "piper"]) == 2
    assert capsys.readouterr().err == ("error: --schedule applies to Piper instances only (data- and tensor-parallel "
                                       "stages)\n")
    # a split plan is checked as a pipeline with one call per device: other classes and call counts are refused
    # (the split asked for is named by its option; the one the plan file records, as the file's)
    for option in (["--contiguity", "none"], ["--calls", "2"]):
        assert main(["verify", pair, str(out), *option, "--backward", "split"]) == 2
        assert capsys.readouterr().err == (f"error: {option[0]} does not apply to --backward split (a split-backward "
                                           "plan is checked as a pipeline: contiguity stages, one call per device)\n")
        assert main(["verify", pair, str(out), *option]) == 2
        assert capsys.readouterr().err == (f"error: {option[0]} does not apply to the plan file, which was solved with "
                                           "its backward pass split (a split-backward plan is checked as a pipeline: "
                                           "contiguity stages, one call per device)\n")
    assert main(["verify", pair, str(out), "--objective", "latency"]) == 2
    assert capsys.readouterr().err == ("error: --objective latency does not apply to the plan file, which was solved "
                                       "with its backward pass split (a split-backward plan is checked for throughput "
                                       "or throughput-gpipe)\n")
    assert main(["verify", pair, str(out), "--contiguity", "stages", "--calls", "1"]) == 0
    capsys.readouterr()
    # checked as joint on purpose: the file's B and W placement is not read, and the note says so
    assert main(["verify", pair, str(out), "--backward", "joint"]) == 0
    assert capsys.readouterr().out.startswith("note: the plan file records a split-backward solve; --backward joint "
                                              "checks its layers only (its b_tasks and w_tasks are not read)\n")


def test_verify_split_of_a_latency_plan_of_an_inference_graph_names_the_instance(tmp_path, capsys):
    # the objective checked is the latency the plan file records, not an option given: the refusal named
    # --objective latency, which the command did not hold, for an instance that cannot be checked split at all
    out = tmp_path / "plan.json"
    assert main(["solve", MEMORY_CHAIN, "--objective", "latency", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    for given in ([], ["--objective", "latency"]):
        assert main(["verify", MEMORY_CHAIN, str(out), "--backward", "split", *given]) == 2
        assert capsys.readouterr().err == ("error: --backward 'split' needs a training instance (one with backward "
                                           "nodes); this instance has none\n")


def test_verify_checks_the_class_a_plan_file_records(tmp_path, capsys):
    """A plan file recording an optimal `stages` solve of chain4 whose devices, {a, c} and {b, d}, feed
    each other (no pipeline order): verify checked it as `none`, found it valid and said nothing of the
    claim. It now checks the recorded class (loads 8.5 and 10.5: compute 6 and 8, each paying 2.5 of
    transfers) and rejects it; --contiguity none checks it as any assignment, as asked."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "placement-plan/1", "instance": "chain4", "method": "dp",
                                "status": "optimal", "objective_kind": "throughput", "contiguity": "stages",
                                "objective": 10.5, "devices": [{"type": "accelerator", "nodes": [1, 3]},
                                                               {"type": "accelerator", "nodes": [2, 4]}]}))
    assert main(["verify", CHAIN4, str(plan)]) == 1
    text = capsys.readouterr().out
    assert text.startswith("note: checked for contiguity stages, the class the plan file records it was solved in\n")
    assert "  stages: no pipeline order of the devices exists: cycle 0 -> 1 -> 0\n" in text
    assert main(["verify", CHAIN4, str(plan), "--contiguity", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == 10.5
    assert not placement.verify(placement.load(CHAIN4), str(plan)).valid
    assert placement.verify(placement.load(CHAIN4), str(plan), contiguity="none").valid


def test_verify_and_simulate_read_a_plan_with_b_and_w_tasks_as_a_split_plan(tmp_path, capsys):
    """The split plan of training-pair with its backward record removed: verify checked it as a joint
    plan (11.5) while simulate ran it as a split plan; both now read it as split, at the default W
    share (max load 12). A record of mode 'joint' beside B and W tasks, or of a mode that is neither,
    is refused by both."""
    pair = str(TINY / "training-pair.json")
    out = tmp_path / "plan.json"
    assert main(["solve", pair, "--backward", "split", "--w-share", "0.2", "--out", str(out), "--quiet"]) == 0
    document = json.loads(out.read_text())
    variants = {"none": {k: v for k, v in document.items() if k != "backward"},
                "joint": {**document, "backward": {**document["backward"], "mode": "joint"}},
                "xx": {**document, "backward": {**document["backward"], "mode": "xx"}},
                "text": {**document, "backward": "weird"}}
    for name, variant in variants.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(variant))
    capsys.readouterr()
    assert main(["verify", pair, str(tmp_path / "none.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == 12
    assert main(["simulate", pair, str(tmp_path / "none.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_load"] == 12
    for command in ("verify", "simulate"):
        assert main([command, pair, str(tmp_path / "joint.json")]) == 2
        assert capsys.readouterr().err == (f"error: {tmp_path / 'joint.json'}: the plan places b_tasks or w_tasks, as a "
                                           "split-backward plan does, but its backward record says mode 'joint'\n")
        assert main([command, pair, str(tmp_path / "xx.json")]) == 2
        assert capsys.readouterr().err == (f"error: {tmp_path / 'xx.json'}: the plan's backward record has mode 'xx'; "
                                           "it is 'joint' or 'split'\n")
        assert main([command, pair, str(tmp_path / "text.json")]) == 2   # named in the message, as every reader's
        assert capsys.readouterr().err == (f"error: {tmp_path / 'text.json'}: the plan's backward record must be an "
                                           "object, not string\n")
    chain_plan = tmp_path / "chain-plan.json"   # simulate took it on an inference graph, which never reads it
    assert main(["solve", CHAIN4, "--out", str(chain_plan), "--quiet"]) == 0
    chain_plan.write_text(json.dumps({**json.loads(chain_plan.read_text()), "backward": "split"}))
    capsys.readouterr()
    assert main(["simulate", CHAIN4, str(chain_plan)]) == 2
    assert capsys.readouterr().err == (f"error: {chain_plan}: the plan's backward record must be an object, "
                                       "not string\n")


def test_a_gpipe_solve_shows_each_devices_forward_and_backward_loads(capsys):
    """training-pair under throughput-gpipe: f1, b1 on device 0 and f2, b2 on device 1. Forward loads: f1's 2
    plus sending its output 1 = 3; f2's 3 plus receiving f1's output 1 = 4. Backward loads: b1's 4 plus
    receiving b2's output 1.5 = 5.5; b2's 6 plus sending it 1.5 = 7.5. FW+BW = 4 + 7.5 = 11.5, which the
    table showed only as the devices' combined loads (8.5 and 11.5)."""
    assert main(["solve", str(TINY / "training-pair.json"), "--objective", "throughput-gpipe", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert ("device  type         #nodes  compute  comm  load  forward  backward  memory/bound  forward nodes\n"
            "------  -----------  ------  -------  ----  ----  -------  --------  ------------  -------------\n"
            "     0  accelerator       2        6   2.5   8.5        3       5.5         2/100  f1\n"
            "     1  accelerator       2        9   2.5  11.5        4       7.5         2/100  f2\n") in text
    assert "instance training-pair: FW+BW 11.5 (max forward 4 + max backward 7.5), max load 11.5\n" in text


def test_verify_states_a_gpipe_value_once(tmp_path, capsys):
    """training-pair's gpipe plan above (FW+BW 4 + 7.5 = 11.5): verify printed the verdict line and, after the
    ledger, the same figure again as a line of its own."""
    instance, out = str(TINY / "training-pair.json"), str(tmp_path / "plan.json")
    assert main(["solve", instance, "--objective", "throughput-gpipe", "--quiet", "--out", out]) == 0
    capsys.readouterr()
    assert main(["verify", instance, out]) == 0
    text = capsys.readouterr().out
    assert "instance training-pair: FW+BW 11.5 (max forward 4 + max backward 7.5), max load 11.5\n" in text
    assert text.count("FW+BW") == 1


@pytest.mark.parametrize("objective, figure", [("latency", "latency 17"), ("throughput-gpipe", "max load 11.5")])
def test_verify_checks_the_objective_the_plan_was_solved_for(tmp_path, capsys, objective, figure):
    """diamond-cpu solved for latency (17; its max load is 15), training-pair for throughput-gpipe: verify
    without --objective checked every plan as throughput and printed the max load with no word of it."""
    name = "diamond-cpu.json" if objective == "latency" else "training-pair.json"
    instance, out = str(TINY / name), str(tmp_path / "plan.json")
    assert main(["solve", instance, "--objective", objective, "--method", "milp", "--quiet", "--out", out]) == 0
    capsys.readouterr()
    assert main(["verify", instance, out]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"note: checked for {objective}, the objective the plan file records it was solved "
                           "for\n")
    assert f"{figure}\n" in text
    assert main(["verify", instance, out, "--objective", "throughput"]) == 0
    assert capsys.readouterr().out.startswith(f"note: the plan file records a solve for {objective}; checked for "
                                              "throughput as asked\n")


def test_a_recorded_objective_the_instance_cannot_take_or_that_names_none_is_reported(tmp_path, capsys):
    """A plan file of chain4 (inference) edited to record throughput-gpipe blamed an --objective nobody
    gave; one recording "bogus" was checked as throughput without a word."""
    instance, out = str(TINY / "chain4.json"), tmp_path / "plan.json"
    assert main(["solve", instance, "--quiet", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    out.write_text(json.dumps({**written, "objective_kind": "throughput-gpipe"}))
    capsys.readouterr()
    assert main(["verify", instance, str(out)]) == 2
    assert capsys.readouterr().err == (f"error: {out} records a solve for throughput-gpipe, which is for "
                                       "training graphs; this instance has no backward nodes; give --objective to "
                                       "check it for another objective\n")   # the file named, not "the plan file"
    with pytest.raises(placement.InvalidParameterError, match="^plan records a solve for throughput-gpipe, which is "
                                                              "for training graphs; this instance has no backward "
                                                              "nodes; pass objective= to check it for another "
                                                              "objective$"):
        placement.verify(instance, str(out))
    assert main(["verify", instance, str(out), "--objective", "throughput"]) == 0
    out.write_text(json.dumps({**written, "objective_kind": "bogus"}))
    capsys.readouterr()
    assert main(["verify", instance, str(out)]) == 0
    assert ("note: the plan file's 'objective_kind' names no objective (throughput, throughput-gpipe, latency); "
            "checked for throughput, and its claimed value was not checked\n") in capsys.readouterr().out


def test_a_recorded_contiguity_that_names_no_class_is_noted(tmp_path, capsys):
    """A plan file recording "sometimes" as its class was checked as none without a word."""
    instance, out = str(TINY / "chain4.json"), tmp_path / "plan.json"
    assert main(["solve", instance, "--quiet", "--out", str(out)]) == 0
    out.write_text(json.dumps({**json.loads(out.read_text()), "contiguity": "sometimes"}))
    capsys.readouterr()
    assert main(["verify", instance, str(out)]) == 0
    assert capsys.readouterr().out.startswith("note: the plan file's 'contiguity' names no class (none, sets, "
                                              "stages): \"sometimes\"; checked for contiguity none\n")
    assert main(["verify", instance, str(out), "--contiguity", "stages"]) == 0   # asked for: nothing to note
    assert "names no class" not in capsys.readouterr().out


def test_a_command_comes_first(capsys):
    """Only the first argument names the command: after "--" the parser was built for the command found
    later alone, and the error listed that one command as the only choice."""
    assert main(["--", "solve", "x"]) == 2
    assert capsys.readouterr().err.endswith("invalid choice: '--' (choose from 'solve', 'verify', 'info', "
                                            "'simulate', 'hypar', 'import', 'split', 'codesign')\n")


def test_the_solvers_table_is_aligned():
    from placement.report.solvers import format_solvers

    table = format_solvers([("cp-sat", True, "OR-Tools 9"), ("cbc", False, "not installed")]).splitlines()
    assert table == ["backend  available  detail", "cp-sat   yes        OR-Tools 9",
                     "cbc      no         not installed"]


def test_an_output_file_that_is_an_input_is_refused_before_any_work(tmp_path, capsys):
    """solve --out INSTANCE (or --log) and split/hypar --out onto their inputs would destroy them."""
    instance = tmp_path / "chain4.json"
    instance.write_text((TINY / "chain4.json").read_text())
    before = instance.read_text()
    for option in ("--out", "--log"):
        assert main(["solve", str(instance), option, str(instance)]) == 2
        assert capsys.readouterr().err == (f"error: {instance}: is also an input of the command, which writing "
                                           f"would overwrite; choose another name\n")
    assert instance.read_text() == before
    network = tmp_path / "net.json"
    network.write_text(json.dumps({"format": "placement-network/1", "name": "n", "layers": [
        {"name": "fc", "type": "fc", "in": 4, "out": 2}]}))
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "2", "--out", str(network)]) == 2
    assert "is also an input of the command" in capsys.readouterr().err
    assert main(["hypar", str(network), "--accelerators", "2", "--batch", "2", "--out",
                 str(tmp_path / "out.json")]) == 0


def test_a_failed_solve_leaves_no_plan_file(tmp_path, capsys):
    """The output is checked for writability before the solve; a solve that then fails (no device
    left) creates no empty file, and an existing file is left as it was."""
    out = tmp_path / "plan.json"
    argv = ["solve", str(TINY / "chain4.json"), "--accelerators", "0", "--cpus", "0", "--out", str(out)]
    assert main(argv) == 2
    assert "no device" in capsys.readouterr().err
    assert not out.exists()
    out.write_text("kept")
    assert main(argv) == 2
    assert out.read_text() == "kept"


def test_a_refused_solve_leaves_no_empty_log_behind(tmp_path, capsys):
    """The writability probe of --log created the file; a run refused after it (the DP keeps no solver
    log) left an empty log behind, while a refused --out left nothing."""
    log = tmp_path / "run.log"
    assert main(["solve", str(TINY / "chain4.json"), "--method", "dp", "--log", str(log)]) == 2
    assert capsys.readouterr().err == "error: --log does not apply to method 'dp' (it takes --max-ideals, --stages)\n"
    assert not log.exists()


def test_verify_checks_a_latency_plan_against_the_call_limit_it_records(tmp_path, capsys):
    """A latency plan solved with one call per accelerator, edited to run two calls on one device: valid
    only under --calls 2; by default verify applies the recorded limit, 1, and says so."""
    out = tmp_path / "latency.json"
    assert main(["solve", DIAMOND, "--objective", "latency", "--out", str(out), "--quiet"]) == 0
    document = json.loads(out.read_text())
    assert document["verified"]["calls"] == 1
    document = {key: value for key, value in document.items() if key not in ("fpgas", "cpus")}
    document["devices"] = [{"type": "accelerator", "nodes": [10, 12], "calls": [[10], [12]]},
                           {"type": "accelerator", "nodes": [11]}, {"type": "cpu", "nodes": [13]}]
    out.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["verify", DIAMOND, str(out)]) == 1
    text = capsys.readouterr().out
    assert "note: checked with at most 1 call per accelerator, as the plan file records\n" in text
    assert "device 0 (accelerator) runs 2 calls, more than the limit of 1 call per accelerator" in text
    assert main(["verify", DIAMOND, str(out), "--calls", "2"]) == 0
    assert "as the plan file records\n" not in capsys.readouterr().out.replace("objective the plan file records", "")
    # the limit written 1.0 is the same limit (it was ignored, and the plan passed); written "1", it is no
    # count, and verify says so rather than checking silently without it
    document["verified"]["calls"] = 1.0
    out.write_text(json.dumps(document))
    assert main(["verify", DIAMOND, str(out)]) == 1
    assert "note: checked with at most 1 call per accelerator" in capsys.readouterr().out
    assert placement.verify(placement.load(DIAMOND), document).valid is False
    document["verified"]["calls"] = "1"
    out.write_text(json.dumps(document))
    assert main(["verify", DIAMOND, str(out)]) == 0
    assert capsys.readouterr().out.count("note: the plan file's 'verified.calls' is no positive integer: \"1\"; "
                                         "checked with no limit on the calls per accelerator\n") == 1


def test_a_bad_value_in_the_plan_files_backward_record_is_named_as_the_records(tmp_path, capsys):
    """The backward record of a split solve, edited to w_share 7: refused as the record's value, not
    as an option the command line never gave."""
    out = tmp_path / "split.json"
    pair = str(TINY / "training-pair.json")
    assert main(["solve", pair, "--backward", "split", "--out", str(out), "--quiet"]) == 0
    document = json.loads(out.read_text())
    document["backward"]["w_share"] = 7
    out.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["verify", pair, str(out)]) == 2
    assert capsys.readouterr().err == (f"error: {out}: the plan's backward record: w_share must be a finite number "
                                       "≥ 0 and ≤ 1, not 7\n")   # the file named, as simulate and the others name it
    # a joint plan whose record was edited to a malformed split one: simulate refuses the record as verify
    # does (it ran, the record unread)
    assert main(["solve", DIAMOND, "--out", str(tmp_path / "joint.json"), "--quiet"]) == 0
    joint = json.loads((tmp_path / "joint.json").read_text())
    joint["backward"] = {"mode": "split", "w_share": "0.3"}
    (tmp_path / "joint.json").write_text(json.dumps(joint))
    capsys.readouterr()
    assert main(["simulate", DIAMOND, str(tmp_path / "joint.json"), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'joint.json'}: the plan's backward record: w_share must be "
                                       "a finite number ≥ 0 and ≤ 1, not '0.3'\n")
    # the record's split mode on an inference instance: named as the plan file's, not as a --backward never given,
    # and by the file's name
    document["backward"]["w_share"] = 0.5
    out.write_text(json.dumps(document))
    assert main(["verify", DIAMOND, str(out)]) == 2
    assert capsys.readouterr().err == (f"error: {out} records a split-backward solve, which needs a training "
                                       "instance (one with backward nodes); this instance has none (--backward joint "
                                       "checks the plan's layers only)\n")


def test_plans_and_instances_from_a_pipe_are_read_once(tmp_path):
    """A plan given as /dev/stdin (a pipe, readable once) is verified and simulated, and an instance
    from a pipe is split: each used to be read several times, and the second reading found it empty."""
    import subprocess
    import sys

    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    plan = out.read_text()
    for command in (["verify", CHAIN4, "/dev/stdin"], ["simulate", CHAIN4, "/dev/stdin"]):
        done = subprocess.run([sys.executable, "-m", "placement", *command], input=plan, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert "valid: no violations" in subprocess.run([sys.executable, "-m", "placement", "verify", CHAIN4, "/dev/stdin"],
                                                    input=plan, capture_output=True, text=True, timeout=120).stdout
    gpt2 = Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json"
    split_plan = tmp_path / "gpt2.json"
    assert main(["solve", str(gpt2), "--cpus", "0", "--out", str(split_plan), "--quiet"]) == 0
    done = subprocess.run([sys.executable, "-m", "placement", "split", "/dev/stdin", str(split_plan)],
                          input=gpt2.read_text(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(subprocess.run(
        [sys.executable, "-m", "placement", "split", str(gpt2), str(split_plan)], capture_output=True, text=True,
        timeout=120).stdout)
    for command in (["verify", CHAIN4, "/dev/stdin"], ["simulate", CHAIN4, "/dev/stdin"],
                    ["split", str(gpt2), "/dev/stdin"]):   # a piped document that is no object: as a file's
        done = subprocess.run([sys.executable, "-m", "placement", *command], input="[1, 2]", capture_output=True,
                              text=True, timeout=120)
        assert (done.returncode, done.stderr) == (2, "error: /dev/stdin: the plan must be a JSON object, got array\n")


def test_an_instance_and_a_plan_from_one_pipe_are_refused_as_such():
    """Both from /dev/stdin: the instance took the pipe's contents, and the plan was refused as an empty file."""
    import subprocess
    import sys

    for command in ("verify", "simulate", "split"):
        done = subprocess.run([sys.executable, "-m", "placement", command, "/dev/stdin", "/dev/stdin"],
                              input=Path(CHAIN4).read_text(), capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stderr) == (2, "error: /dev/stdin: the instance and the plan are read from the "
                                                     "same stream, which gives its contents once; give one of them "
                                                     "as a file\n")


def test_an_instance_from_a_stream_is_unnamed(tmp_path):
    """``/dev/stdin`` names no instance: a plan solved from chain4 given on standard input recorded the instance
    'stdin', and checking it against chain4.json noted that it was made for another instance (and the other way
    round). The plan records no name, the checks compare none, and the summary shows '-'."""
    import subprocess
    import sys

    def run(*command, given=None):
        done = subprocess.run([sys.executable, "-m", "placement", *command, "--quiet"], stdin=given,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    streamed, named = tmp_path / "streamed.json", tmp_path / "named.json"
    with open(CHAIN4) as given:   # a redirect: /dev/stdin opens the file itself
        assert run("solve", "-", "--out", str(streamed), given=given).splitlines()[0].split() == ["instance", "-"]
    assert json.loads(streamed.read_text())["instance"] == ""
    run("solve", CHAIN4, "--out", str(named))
    assert json.loads(named.read_text())["instance"] == "chain4"
    checks = [run("verify", CHAIN4, str(streamed))]
    for command in (["verify", "-", str(named)], ["simulate", "/dev/stdin", str(named)]):
        with open(CHAIN4) as given:
            checks.append(run(*command, given=given))
    assert [check.count("was made for instance") for check in checks] == [0, 0, 0]
    assert "valid: no violations" in checks[0] and "valid: no violations" in checks[1]
    copy = tmp_path / "chain4-copy.json"   # a file given by name still tells a plan made for another instance
    copy.write_text(Path(CHAIN4).read_text())
    assert "the plan file was made for instance 'chain4', not 'chain4-copy'" in run("verify", str(copy), str(named))


def test_an_instance_from_a_pipe_is_read_once_by_solve_verify_and_simulate(tmp_path):
    """An instance given as /dev/stdin that the file's devices refuse (no accelerator, none recorded) is solved
    with --accelerators, and one refused whatever the devices is refused with the file's own message, naming
    the pipe: the refusal of the first reading used to send the command to read the emptied pipe again ("the
    file is empty"). A piped instance is unnamed (test_an_instance_from_a_stream_is_unnamed)."""
    import subprocess
    import sys

    document = json.loads(Path(CHAIN4).read_text())
    no_devices = json.dumps({**document, "maxFPGAs": 0, "maxCPUs": 0})
    negative = json.dumps({**document, "nodes": [{**document["nodes"][0], "fpgaLatency": -1}, *document["nodes"][1:]]})

    def run(*command, given):
        return subprocess.run([sys.executable, "-m", "placement", *command], input=given, capture_output=True,
                              text=True, timeout=120)

    plan = tmp_path / "plan.json"
    done = run("solve", "/dev/stdin", "--accelerators", "2", "--out", str(plan), given=no_devices)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["instance", "-"]
    assert "max-load    7.500000" in done.stdout   # chain4's optimum on its two accelerators (docs/api.md)
    assert run("verify", "/dev/stdin", str(plan), "--quiet", given=no_devices).returncode == 0   # the plan's record
    refused = "error: /dev/stdin: node 1: field 'fpgaLatency' is negative (-1)\n"
    for command in (["solve", "/dev/stdin"], ["verify", "/dev/stdin", str(plan)],
                    ["simulate", "/dev/stdin", str(plan)]):
        done = run(*command, given=negative)
        assert (done.returncode, done.stderr) == (2, refused)
    # the plan through the pipe, for an instance file that takes the devices the plan records: the record and
    # the plan come from one reading (the second found the pipe empty: "the file is empty")
    bare = tmp_path / "no-devices.json"
    bare.write_text(no_devices)
    for command in (["verify", str(bare), "/dev/stdin"], ["simulate", str(bare), "/dev/stdin"]):
        done = run(*command, given=plan.read_text())
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert "the plan file records it was solved with: --accelerators 2\n" in done.stdout


def test_each_command_reads_its_plan_file_and_its_instance_once(tmp_path, capsys, monkeypatch):
    """verify, simulate and split read the plan file once (its record, its claims and the plan itself come from
    that one reading; verify read it 13 times, 16 with --json) and the instance once (split read it twice);
    what is wrong with the plan is still said naming the file."""
    from collections import Counter

    import placement.jsonfile as jsonfile

    gpt2 = str(Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json")
    plan = tmp_path / "six.json"
    assert main(["solve", gpt2, "--accelerators", "6", "--cpus", "0", "--out", str(plan), "--quiet"]) == 0
    reads: Counter = Counter()
    read_bytes = jsonfile.read_bytes

    def counted(path, *args, **kwargs):
        reads[str(path)] += 1
        return read_bytes(path, *args, **kwargs)

    monkeypatch.setattr(jsonfile, "read_bytes", counted)
    for command in ("verify", "simulate", "split"):
        for extra in ([], ["--json"]):
            reads.clear()
            assert main([command, gpt2, str(plan), *extra]) == 0
            assert reads == {gpt2: 1, str(plan): 1}, (command, extra)
    for call in (placement.verify, placement.simulate, placement.split):   # the library given the paths alike
        reads.clear()
        call(gpt2, str(plan))
        assert reads == {gpt2: 1, str(plan): 1}, call
    capsys.readouterr()
    document = json.loads(plan.read_text())
    document["devices"][0]["nodes"] = "all"
    plan.write_text(json.dumps(document))
    for command in ("verify", "simulate", "split"):
        assert main([command, gpt2, str(plan)]) == 2
        assert capsys.readouterr().err == f"error: {plan}: devices[0].nodes: must be an array of node ids, got string\n"


def test_a_recorded_number_is_written_as_an_option_takes_it():
    from placement.wording import as_given

    # whole numbers in full up to 10^16, beyond it (a memory override of 1e300) in exponent form
    assert [as_given(v) for v in (123456789.0, 2.5, 1e15, 1e16, 1e300)] == [
        "123456789", "2.5", "1000000000000000", "1e+16", "1e+300"]


def test_split_takes_the_devices_the_plan_was_solved_for(tmp_path, capsys):
    """A GPT-2 plan solved with --accelerators 6 --cpus 0 (the instance has 4 accelerators): split used
    to refuse it ("6 devices used, but only 4 exist") where verify and simulate take the record."""
    gpt2 = str(Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json")
    plan = tmp_path / "six.json"
    assert main(["solve", gpt2, "--accelerators", "6", "--cpus", "0", "--out", str(plan), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["split", gpt2, str(plan), "--format", "stages"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "note: split on the devices the plan file records it was solved with: accelerators=6, cpus=0\n"
    rows = captured.out.splitlines()
    assert rows[0].split() == ["stage", "device", "#forward", "nodes", "first", "last"]
    assert [row.split()[:2] for row in rows[1:]] == [[str(k), "accelerator"] for k in range(6)]


def test_solve_help_says_local_search_moves_colour_classes(capsys):
    # README and docs/reproducing.md: it moves one colour class at a time (a node with its backward mates)
    assert main(["solve", "--help"]) == 0
    assert ("  local-search: random restarts of colour-class moves (throughput; none, sets, stages)\n"
            in capsys.readouterr().out)


def test_the_readme_s_limit_on_ideals_spares_a_chain(capsys):
    # README, after the options of solve: chain4's 5 ideals pass a limit of 2 (its nodes are a total order),
    # the diamond's 6 do not
    assert main(["solve", CHAIN4, "--max-ideals", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "method      dp (objective throughput, contiguity stages)\nstatus      optimal\nmax-load    7.500000" in out
    assert main(["solve", DIAMOND, "--max-ideals", "2", "--method", "dp"]) == 2
    assert capsys.readouterr().err.startswith("error: more than 2 ideals in the contracted graph (4 supernodes);")


def test_running_out_of_memory_is_one_line(monkeypatch, capsys):
    """A MemoryError the library could not foresee came out as a traceback."""
    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(placement, "solve", out_of_memory)
    assert main(["solve", CHAIN4, "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: out of memory: this machine cannot hold what the command needs (a "
                                       "coarser graph, fewer devices or micro-batches, or a lower limit takes less)\n")


def test_a_file_name_with_a_newline_is_one_line_of_error(tmp_path, capsys):
    """The error names the file as it is given; a newline in its name had split the error over two lines."""
    missing = tmp_path / "no\nsuch.json"
    assert main(["solve", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}/no\\nsuch.json: no such file\n"
    path = tmp_path / "new\nline.json"
    path.write_text(json.dumps({"nodes": []}))
    assert main(["info", str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path}/new\\nline.json: instance: missing field 'edges'\n")


def test_a_file_name_or_node_name_that_reads_like_an_option_is_named_as_it_is(tmp_path, capsys):
    """The error names the file and the node as they are written: ``memory=16GiB`` in a folder's name, and
    ``stages=3 cpus='x'`` as a node's name, had been rewritten as the options ``--memory 16GiB`` and
    ``--stages 3 --cpus x``, as the library's own ``memory=16`` is."""
    folder = tmp_path / "memory=16GiB"
    folder.mkdir()
    assert main(["solve", str(folder / "nope.json")]) == 2
    assert capsys.readouterr().err == f"error: {folder}/nope.json: no such file\n"
    doc = json.loads(Path(CHAIN4).read_text())
    doc["nodes"][0].update(name="stages=3 cpus='x'", size=1000)
    path = folder / "big_node.json"
    path.write_text(json.dumps(doc))
    assert main(["solve", str(path), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: {path}: node 1 (\"stages=3 cpus='x'\") fits no device: needs 1000 "
                                       "bytes, accelerator memory is 100; no cpu devices\n")


def test_the_library_s_parameters_are_still_named_as_options(capsys):
    """Beside the names of the input, which stay as written, the parameters the library names are options."""
    assert main(["solve", CHAIN4, "--memory", "0", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: --memory leaves a node no device: node 1 ('a') fits no device: needs "
                                       "1 bytes, accelerator memory is 0; no cpu devices\n")
    assert main(["solve", CHAIN4, "--method", "dp", "--objective", "latency", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: --objective 'latency' is not solved by method 'dp' (it solves "
                                       "'throughput')\n")


def test_a_note_names_an_option_s_file_as_it_is_written(tmp_path, capsys):
    """The note on an option the DP did not use names its file as given: a folder named ``time_limit=5`` had
    been written ``--time-limit=5``, as the library's parameter ``time_limit`` is written as the option."""
    log = tmp_path / "time_limit=5" / "solver.log"
    log.parent.mkdir()
    assert main(["solve", CHAIN4, "--log", str(log), "--quiet"]) == 0
    assert (f"note        the DP solved this (method 'auto'), so --log {log} (the MILP's) was not used\n"
            in capsys.readouterr().out)


def test_a_network_and_a_grid_read_from_standard_input_as_dash():
    """``-`` is standard input for every file a command reads, as for an instance, a plan or a co-design model:
    ``hypar -`` read a network named '-' and ``codesign --grid -`` a file named '-'. A model and a grid both
    from it are refused, as an instance and a plan are."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    lenet = root / "placement" / "costmodel" / "networks" / "lenet-c.json"
    mlp, grid = root / "instances" / "models" / "mlp-training.json", root / "instances" / "grids" / "tiny.json"

    def run(*command: str, given: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "placement", *command, "--json", "--quiet"],
                              input=given.read_text(), capture_output=True, text=True, timeout=300)

    for piped, named, given in ((("hypar", "-", "--accelerators", "2", "--batch", "4"),
                                 ("hypar", str(lenet), "--accelerators", "2", "--batch", "4"), lenet),
                                (("codesign", str(mlp), "--chips", "2", "--power", "300", "--grid", "-"),
                                 ("codesign", str(mlp), "--chips", "2", "--power", "300", "--grid", str(grid)), grid)):
        done = run(*piped, given=given)
        assert done.returncode == 0, done.stderr
        answer, expected = json.loads(done.stdout), json.loads(run(*named, given=given).stdout)
        for document in (answer, expected):   # all but the times
            for record in (document, *document.get("planners", ())):
                record.pop("runtime_s", None)
        assert answer == expected
    done = run("codesign", "-", "--chips", "2", "--power", "300", "--grid", "-", given=grid)
    assert (done.returncode, done.stderr) == (2, "error: /dev/stdin: the model and the grid are read from the same "
                                                 "stream, which gives its contents once; give one of them as a file\n")
