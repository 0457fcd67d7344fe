"""The command line for the MILP: classes, objectives, backends, options, `info --solvers`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli import main
from placement.solvers.milp.backends import backend_availability, backend_capabilities

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
CHAIN4 = str(TINY / "chain4.json")
TRAINING = str(TINY / "training-pair.json")
THREE = str(TINY / "three-types.json")


@pytest.mark.parametrize("contiguity", ["stages", "sets", "none"])
def test_milp_classes_on_chain4(contiguity, tmp_path, capsys):
    # chain4 (see tests/test_dp.py): {a,b} | {c,d} at 7.5 is optimal in every class: the
    # total work 14 plus at least one boundary (c(b) = 0.5 paid on each side) gives a
    # device at least 7.5.
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--method", "milp", "--contiguity", contiguity, "--quiet",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"method      milp (cp-sat) (objective throughput, contiguity {contiguity})" in text
    assert "max-load    7.500000  (verified independently)" in text
    plan = json.loads(out.read_text())
    assert (plan["status"], plan["objective"], plan["contiguity"]) == ("optimal", 7.5, contiguity)


def test_gpipe_objective(capsys):
    assert main(["solve", TRAINING, "--method", "milp", "--objective", "throughput-gpipe", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "method      milp (cp-sat) (objective throughput-gpipe, contiguity stages)" in text
    assert "FW+BW" in text and "status      optimal" in text


def test_latency_objective_writes_calls(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--method", "milp", "--objective", "latency", "--calls", "2", "--quiet",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # one sample through a chain on idle devices: everything on one accelerator in one call,
    # 4 + 3 + 2 + 5 = 14 with no transfer (any split adds transfers and CPUs take 10x longer)
    assert "latency     14.000000  (verified independently)" in text
    # the calls are contiguous by the latency model: the summary names the calls, not a class
    assert "method      milp (cp-sat) (objective latency, 2 calls per accelerator)" in text
    plan = json.loads(out.read_text())
    assert (plan["objective_kind"], plan["objective"], plan["verified"]["value"]) == ("latency", 14.0, 14.0)
    assert main(["verify", CHAIN4, str(out), "--objective", "latency"]) == 0
    # more calls than chain4 has nodes (4) are solved as 4 and reported as given
    assert main(["solve", CHAIN4, "--objective", "latency", "--calls", "5", "--quiet"]) == 0
    assert "method      milp (cp-sat) (objective latency, 5 calls per accelerator)" in capsys.readouterr().out


def test_gpipe_and_latency_refuse_the_wrong_graphs(capsys):
    assert main(["solve", CHAIN4, "--method", "milp", "--objective", "throughput-gpipe"]) == 2
    assert capsys.readouterr().err == ("error: --objective 'throughput-gpipe' is for training graphs; "
                                       "this instance has no backward nodes\n")
    assert main(["solve", TRAINING, "--method", "milp", "--objective", "latency"]) == 2
    assert capsys.readouterr().err == ("error: --objective 'latency' is for inference graphs; "
                                       "this instance has backward nodes\n")


def test_dp_refuses_other_classes_and_objectives(capsys):
    assert main(["solve", CHAIN4, "--method", "dp", "--contiguity", "sets"]) == 2
    assert capsys.readouterr().err == ("error: --contiguity 'sets' is not solved by method 'dp' (it solves 'stages'; "
                                       "method 'milp' solves every class)\n")
    assert main(["solve", TRAINING, "--method", "dp", "--objective", "throughput-gpipe"]) == 2
    assert capsys.readouterr().err == ("error: --objective 'throughput-gpipe' is not solved by method 'dp' "
                                       "(it solves 'throughput')\n")


def test_auto_solves_other_classes_with_the_milp(capsys):
    assert main(["solve", CHAIN4, "--contiguity", "sets", "--json", "--quiet"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["method"], document["backend"], document["contiguity"], document["objective"]) == \
        ("milp", "cp-sat", "sets", 7.5)


@pytest.mark.parametrize("backend", [n for n, ok, _ in backend_availability() if ok and ":" not in n])
def test_every_backend_from_the_cli_with_a_log(backend, tmp_path, capsys):
    # from nothing: the DP's start would prove the optimum, and the solver would not run
    log = tmp_path / "solver.log"
    seed = ["--seed", "3"] if backend_capabilities(backend)["seed"] else []   # CBC and PuLP's solvers take none
    assert main(["solve", THREE, "--method", "milp", "--backend", backend, "--log", str(log),
                 "--threads", "1", *seed, "--gap", "0", "--quiet", "--no-warm-start"]) == 0
    assert "max-load    8.000000" in capsys.readouterr().out
    assert log.exists()
    if backend in ("cp-sat", "pulp"):   # the pywraplp solvers write their logs from native code
        assert log.stat().st_size > 0


def test_a_log_of_a_run_that_needs_no_search_says_why(tmp_path, capsys):
    log = tmp_path / "solver.log"
    assert main(["solve", THREE, "--method", "milp", "--log", str(log), "--quiet"]) == 0
    assert "the solver was not run" in capsys.readouterr().out
    assert log.read_text() == "cp-sat was not run: the starting plan (8) meets the lower bound (8)\n"


def test_unknown_backend_and_bad_gap(capsys):
    assert main(["solve", CHAIN4, "--method", "milp", "--backend", "gurobi"]) == 2
    assert capsys.readouterr().err == ("error: --backend must be one of 'cp-sat', 'cbc', 'scip', 'highs', 'pulp' "
                                       "or 'pulp:NAME', not 'gurobi'\n")
    assert main(["solve", CHAIN4, "--method", "milp", "--gap", "1.5"]) == 2
    assert "expected a relative gap of at least 0 and below 1, got '1.5'" in capsys.readouterr().err
    assert main(["solve", CHAIN4, "--method", "milp", "--log", "/nonexistent/dir/x.log"]) == 2
    assert capsys.readouterr().err.startswith("error: /nonexistent/dir/x.log: cannot write:")


def test_progress_reports_model_and_incumbents(capsys):
    assert main(["solve", CHAIN4, "--method", "milp"]) == 0
    err = capsys.readouterr().err
    assert "warm start from the DP optimum (stages, throughput): max-load 7.5" in err
    assert "lower bound 7.5: the DP's, which found the start" in err
    assert "the starting plan (7.5) meets the lower bound: no search needed" in err
    assert main(["solve", CHAIN4, "--method", "milp", "--no-warm-start"]) == 0
    err = capsys.readouterr().err
    assert "MILP: " in err and "solving with cp-sat, time limit 60 s" in err


def test_info_solvers(capsys):
    assert main(["info", "--solvers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["backend", "available", "detail"]
    names = [line.split()[0] for line in lines[1:]]
    assert names[:5] == ["cp-sat", "cbc", "scip", "highs", "pulp"]
    assert main(["info"]) == 2
    assert capsys.readouterr().err == "error: info needs an instance file (or --solvers)\n"
    assert main(["info", "--solvers", "--max-ideals", "3"]) == 2
    assert capsys.readouterr().err == ("error: --max-ideals counts an instance's ideals; --solvers lists the backends "
                                       "and takes none\n")


def test_pulp_solvers_that_cannot_run_are_named_before_any_work(capsys):
    assert main(["solve", CHAIN4, "--method", "milp", "--backend", "pulp:NOPE"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: MILP backend 'pulp:NOPE' cannot run here: PuLP ")
    assert "knows no solver 'NOPE' (its solvers are " in err
    assert "PULP_CBC_CMD" in err and "warm start" not in err
    assert err.endswith("; name one of PuLP's solvers\n")
    import pulp

    missing = [n for n in ("GUROBI_CMD", "CPLEX_CMD", "MOSEK") if n not in pulp.listSolvers(onlyAvailable=True)]
    if missing:
        assert main(["solve", CHAIN4, "--method", "milp", "--backend", f"pulp:{missing[0]}"]) == 2
        assert capsys.readouterr().err == (f"error: MILP backend 'pulp:{missing[0]}' cannot run here: PuLP "
                                           f"{pulp.__version__} finds {missing[0]} not installed or not usable "
                                           f"here; PuLP calls {missing[0]} where it is installed, but does not "
                                           "install it\n")


# ----- the wrong answers of the trust review, each pinned -------------------------------------

SHARED_TRUST = Path(__file__).resolve().parents[2] / "shared" / "trust"
AVAILABLE = [name for name, ok, _ in backend_availability() if ok and ":" not in name]


def shared(name: str) -> str:
    path = SHARED_TRUST / name
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    return str(path)


@pytest.mark.parametrize("backend", AVAILABLE)
def test_calls_limit_is_kept_by_solve_and_checked_by_verify(backend, tmp_path, capsys):
    """latency-calls1.json (5 nodes): the latency greedy's start runs two calls on accelerator 0. With
    --calls 1 that plan was returned (20.891); the optimum with one call per accelerator is 21.445, and
    verify --calls 1 must refuse a plan with two calls on a device."""
    path = shared("latency-calls1.json")
    out = tmp_path / "plan.json"
    assert main(["solve", path, "--method", "milp", "--backend", backend, "--objective", "latency", "--calls", "1",
                 "--quiet", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["status"] == "optimal" and plan["objective"] == pytest.approx(21.445, rel=1e-9)
    assert all(len(d.get("calls") or [d["nodes"]]) <= 1 for d in plan["devices"])
    assert main(["verify", path, str(out), "--objective", "latency", "--calls", "1"]) == 0
    capsys.readouterr()
    two_calls = tmp_path / "two-calls.json"
    assert main(["solve", path, "--method", "milp", "--backend", backend, "--objective", "latency", "--calls", "2",
                 "--quiet", "--out", str(two_calls)]) == 0
    doubled = json.loads(two_calls.read_text())
    capsys.readouterr()
    if any(len(d.get("calls") or []) > 1 for d in doubled["devices"]):
        assert main(["verify", path, str(two_calls), "--objective", "latency", "--calls", "1"]) == 1
        text = capsys.readouterr().out
        assert "valid: no violations" not in text and "INVALID: 1 violation" in text


def test_verify_states_one_verdict_with_the_call_limit(tmp_path, capsys):
    """chain4 as two calls {a, b}, {c, d} on one accelerator: valid for the latency report, not under
    --calls 1; the text gives one verdict, not 'valid' followed by 'INVALID'."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "placement-plan/1", "status": "feasible", "devices": [
        {"type": "accelerator", "nodes": [1, 2, 3, 4], "calls": [[1, 2], [3, 4]]}]}))
    assert main(["verify", CHAIN4, str(plan), "--objective", "latency", "--calls", "1"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["INVALID: 1 violation",
                          "  device 0 (accelerator) runs 2 calls, more than the limit of 1 call per accelerator"]
    assert "valid: no violations" not in lines
    assert main(["verify", CHAIN4, str(plan), "--objective", "latency", "--calls", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "valid: no violations"


def test_verify_refuses_the_gpipe_objective_on_an_inference_graph(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 2, 3, 4]}], "cpus": []}))
    assert main(["verify", CHAIN4, str(plan), "--objective", "throughput-gpipe"]) == 2
    assert capsys.readouterr().err == ("error: --objective 'throughput-gpipe' is for training graphs; this instance "
                                       "has no backward nodes\n")


@pytest.mark.parametrize("backend", AVAILABLE)
def test_a_stop_at_a_tiny_limit_is_never_infeasible(backend, capsys):
    """gpipe-timelimit.json (4 nodes, training; optimum 11.277): CP-SAT said 'infeasible' at 0.05 s, every
    time. A stop proves nothing: whatever the timing, the answer is the optimum, a verified plan with a
    bound at most the optimum, or no_solution (exit 1), never 'infeasible'."""
    path = shared("gpipe-timelimit.json")
    code = main(["solve", path, "--method", "milp", "--backend", backend, "--objective", "throughput-gpipe",
                 "--contiguity", "stages", "--time-limit", "0.05", "--no-warm-start", "--json"])
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] in ("optimal", "feasible", "no_solution"), answer
    assert code == (1 if answer["status"] == "no_solution" else 0)
    if answer["status"] != "no_solution":
        assert answer["objective"] >= 11.277 - 1e-9 and answer["verified"]["valid"]
    if answer["status"] == "optimal":
        assert answer["objective"] == pytest.approx(11.277, rel=1e-9)
    if answer["bound"] is not None:
        assert answer["bound"] <= 11.277 + 1e-9


def test_a_large_instance_file_is_announced_before_it_is_read(monkeypatch, capsys, tmp_path):
    """Reading a 96 MB instance takes seconds: solve, simulate, verify and info say so first. The threshold is
    lowered here so that the four-node chain counts as large."""
    import placement.cli.options as options

    monkeypatch.setattr(options, "LARGE_INPUT_BYTES", 1)
    assert main(["solve", CHAIN4]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(f"] reading {CHAIN4} (0 MiB)") and lines[1].endswith("] read 4 nodes and 3 edges")
    assert main(["solve", CHAIN4, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    out = str(tmp_path / "plan.json")      # verify reads the instance the same way
    assert main(["solve", CHAIN4, "--out", out, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, out]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(f"] reading {CHAIN4} (0 MiB)") and lines[1].endswith("] read 4 nodes and 3 edges")
    assert main(["verify", CHAIN4, out, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["info", CHAIN4]) == 0   # and so does info
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(f"] reading {CHAIN4} (0 MiB)") and lines[1].endswith("] read 4 nodes and 3 edges")
    assert main(["info", CHAIN4, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_seed_for_a_backend_that_takes_none_is_refused_on_one_line(capsys):
    # OR-Tools passes CBC no seed: the run would not be the seeded one asked for
    assert main(["solve", THREE, "--method", "milp", "--backend", "cbc", "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --seed does not apply to backend 'cbc', which takes no seed (backends 'cp-sat', 'scip' "
                   "and 'highs' take one)\n")


def test_max_ideals_for_a_milp_that_runs_no_dp_is_refused_on_one_line(capsys):
    # CP-SAT from nothing runs no DP: neither the warm start's nor the check of a floating-point solver's claim
    assert main(["solve", THREE, "--method", "milp", "--no-warm-start", "--max-ideals", "5"]) == 2
    assert capsys.readouterr().err == ("error: --max-ideals does not apply to method 'milp' on backend 'cp-sat' with "
                                       "--no-warm-start (it bounds the DP of the MILP's own warm start)\n")
