"""Every command prints one JSON document with --json; usage errors are one line and exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from placement.cli import main

ROOT = Path(__file__).resolve().parents[1]
CHAIN4 = str(ROOT / "instances" / "tiny" / "chain4.json")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_solve_json_is_the_result(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    status, out, err = run(capsys, "solve", CHAIN4, "--json", "--quiet", "--out", str(plan))
    document = json.loads(out)
    assert status == 0 and err == ""
    assert (document["status"], document["objective"], document["method"]) == ("optimal", 7.5, "dp")
    assert json.loads(plan.read_text()) == document


def _backends() -> list[str]:
    try:
        from placement.solvers.milp.backends import backend_availability
    except ImportError:
        return []
    return [name for name, ok, _ in backend_availability() if ok and ":" not in name]


@pytest.mark.parametrize("backend", _backends())
def test_solve_json_with_every_backend_is_one_document(capfd, backend):
    # Native solvers print banners on file descriptor 1 (HiGHS does, even with its output off): the
    # library keeps them off it, so that --json stays one parseable document (capfd sees the descriptor).
    status, out, _ = run(capfd, "solve", CHAIN4, "--method", "milp", "--backend", backend, "--json", "--quiet")
    document = json.loads(out)
    assert status == 0 and (document["status"], document["objective"], document["backend"]) == \
        ("optimal", 7.5, backend)


@pytest.mark.parametrize("logged", [False, True])
def test_an_in_process_pulp_solver_prints_nothing_on_standard_output(capfd, monkeypatch, tmp_path, logged):
    # PuLP runs some solvers in this process (pulp:HiGHS through highspy, whose banner goes to file
    # descriptor 1 whatever msg says); a stand-in writes its banner there and hands the model to CBC.
    # With --log the banner is part of the solver's log.
    pulp = pytest.importorskip("pulp")
    from placement.solvers.milp.backends.pulp import PulpBackend

    ran = []

    class InProcess(pulp.LpSolver):
        def __init__(self, inner):
            super().__init__(msg=False)
            self.inner = inner

        def available(self):
            return True

        def actualSolve(self, lp, **kwargs):
            ran.append(True)
            os.write(1, b"Running an in-process solver\n")
            self.inner.tmpDir = self.tmpDir
            return self.inner.actualSolve(lp, **kwargs)

    real = PulpBackend._solver
    monkeypatch.setattr(PulpBackend, "_solver", lambda self, options, log: InProcess(real(self, options, log)))
    log = tmp_path / "solver.log"
    status, out, _ = run(capfd, "solve", CHAIN4, "--method", "milp", "--contiguity", "none", "--backend", "pulp",
                         "--no-warm-start", "--json", "--quiet", *(["--log", str(log)] if logged else []))
    assert ran and "in-process" not in out
    assert ("Running an in-process solver" in log.read_text()) if logged else not log.exists()
    document = json.loads(out)
    assert status == 0 and (document["objective"], document["backend"]) == (7.5, "pulp")


def test_verify_json(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    run(capsys, "solve", CHAIN4, "--quiet", "--out", str(plan))
    status, out, _ = run(capsys, "verify", CHAIN4, str(plan), "--contiguity", "stages", "--json")
    document = json.loads(out)
    assert status == 0 and (document["valid"], document["value"], document["finest_class"]) == (True, 7.5, "stages")


def test_the_readme_names_every_field_of_verify_json(capsys, tmp_path):
    """A latency plan of two calls per accelerator: every key of the document, of its devices and of its call
    schedule is named in the README's account of verify --json or in the plan file's verified row, which it
    refers to (position, calls_unreadable and a call's type were named in neither)."""
    import re

    diamond, plan = str(ROOT / "instances" / "tiny" / "diamond-cpu.json"), tmp_path / "plan.json"
    run(capsys, "solve", diamond, "--objective", "latency", "--calls", "2", "--quiet", "--out", str(plan))
    status, out, _ = run(capsys, "verify", diamond, str(plan), "--json")
    document = json.loads(out)
    assert status == 0 and (document["value"], document["calls"]) == (12.0, 2)
    keys = set(document) | set(document["devices"][0]) | set(document["call_schedule"][0])
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, plans = readme.index("### `placement verify"), readme.index("### Plans")
    sections = readme[start:readme.index("### ", start + 4)] + readme[plans:readme.index("### ", plans + 4)]
    named = set(re.findall(r"`([a-z_]+)`", sections)) | set(re.findall(r'"([a-z_]+)"', sections))
    assert keys - named == set()
    assert {"position", "calls_unreadable", "memory_bound", "forward_load", "duration"} <= keys


def test_info_json(capsys):
    status, out, _ = run(capsys, "info", CHAIN4, "--json")
    document = json.loads(out)
    # The chain's ideals are its 5 prefixes.
    assert status == 0 and (document["nodes"], document["ideals"], document["kind"]) == (4, 5, "inference")
    status, out, _ = run(capsys, "info", "--solvers", "--json")
    assert status == 0 and {row["backend"] for row in json.loads(out)["solvers"]} >= {"cp-sat", "cbc", "pulp"}


def test_simulate_json(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    run(capsys, "solve", CHAIN4, "--quiet", "--out", str(plan))
    status, out, _ = run(capsys, "simulate", CHAIN4, str(plan), "--json", "--microbatches", "16")
    document = json.loads(out)
    assert status == 0 and document["schedule"] == "stream" and document["time_per_sample"] == pytest.approx(7.5)


def test_hypar_json(capsys):
    status, out, _ = run(capsys, "hypar", "lenet-c", "--accelerators", "4", "--batch", "32", "--json")
    assert status == 0 and json.loads(out)["format"] == "placement-hypar/1"


@pytest.mark.parametrize("argv, message", [
    (["solve", CHAIN4, "--bogus"], "error: unrecognized arguments: --bogus"),
    (["solve", "--bogus"], "error: the following arguments are required: instance"),
    (["solve", CHAIN4, "--method", "dp", "--backend", "cbc"],
     "error: --backend does not apply to method 'dp' (it takes --max-ideals, --stages)"),
    (["solve", CHAIN4, "--method", "local-search", "--stages", "2"],
     "error: --stages does not apply to method 'local-search' (it takes --restarts, --seed, --time-limit)"),
    (["solve", CHAIN4, "--calls", "2"], "error: --calls applies to --objective latency only"),
    (["solve", CHAIN4, "--accelerators", "0"],     # chain4 has no CPU
     "error: --accelerators leaves no device (--accelerators 0: every device count is 0)"),
    (["solve", CHAIN4, "--objective", "time-per-batch"],
     "error: --objective 'time-per-batch' applies to Piper instances only (data- and tensor-parallel stages); "
     "this instance takes one of 'throughput', 'throughput-gpipe', 'latency'"),
    (["solve", CHAIN4, "--stages", "3"], "error: --stages must be at most the number of devices (2), got 3"),
    (["solve", CHAIN4, "--backend", "gurobi"],
     "error: --backend must be one of 'cp-sat', 'cbc', 'scip', 'highs', 'pulp' or 'pulp:NAME', not 'gurobi'"),
    (["frobnicate"], "error: argument COMMAND: invalid choice: 'frobnicate' (choose from 'solve', 'verify', "
                     "'info', 'simulate', 'hypar', 'import', 'split', 'codesign')"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    status, out, err = run(capsys, *argv)
    assert (status, out, err) == (2, "", message + "\n")


@pytest.mark.parametrize("argv, option, default, other, message", [
    (["--method", "dp"], "--seed", "0", "1", "--seed does not apply to method 'dp' (it takes --max-ideals, --stages)"),
    (["--method", "dp"], "--gap", "0", "0.1", "--gap does not apply to method 'dp' (it takes --max-ideals, --stages)"),
    (["--method", "greedy"], "--seed", "0", "7",
     "--seed does not apply to method 'greedy' (it takes none of the solver options)"),
    ([], "--calls", "1", "2", "--calls applies to --objective latency only"),
    (["--objective", "latency", "--method", "latency-dp-split"], "--calls", "1", "2",
     "--calls does not apply to method 'latency-dp-split' (it takes --max-ideals)"),
])
def test_an_option_typed_at_its_default_is_refused_as_at_another_value(capsys, argv, option, default, other,
                                                                        message):
    """The command line tells an option typed from one left out: typed where it does not apply, it is refused
    whatever its value, its default too, with the same message."""
    for value in (default, other):
        assert run(capsys, "solve", CHAIN4, *argv, option, value) == (2, "", f"error: {message}\n")


def test_an_option_left_out_is_not_refused_and_typed_where_it_applies_is_taken(capsys):
    status, out, _ = run(capsys, "solve", CHAIN4, "--method", "dp", "--json")
    assert status == 0 and "message" not in json.loads(out)   # no note of options unused
    status, out, _ = run(capsys, "solve", CHAIN4, "--seed", "0", "--gap", "0", "--json")   # auto: the DP ran
    assert status == 0 and json.loads(out)["message"] == ("the DP solved this (method 'auto'), so --gap 0.0, --seed 0 "
                                                          "(the MILP's) were not used")
    status, out, _ = run(capsys, "solve", CHAIN4, "--objective", "latency", "--method", "latency-greedy",
                         "--calls", "1", "--json")
    assert status == 0


def test_a_plan_document_without_a_plan_has_no_max_load(capsys):
    """memory-chain on one accelerator (method single): the one-device plan breaks the memory bound, so
    no plan is returned (no_solution, exit 1). Its document said maxLoad 6.0, the rejected plan's load,
    beside an empty device list."""
    assert main(["solve", str(ROOT / "instances" / "tiny" / "memory-chain.json"), "--method", "single", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["status"], document["maxLoad"], document["objective"], document["devices"]) == \
        ("no_solution", None, None, [])


def test_verify_json_carries_the_notes_the_text_prints(tmp_path, capsys):
    """chain4's plan solved with --accelerators 4 (one node per device: 4 + 1 = 5 for a) and checked on the
    instance's 2 accelerators: the text notes that the check took the recorded devices, and that on the
    instance's own devices the plan is not valid; --json held only the verdict's own notes."""
    plan = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--accelerators", "4", "--out", str(plan), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["verify", CHAIN4, str(plan)]) == 0
    text = [line.removeprefix("note: ") for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
    assert main(["verify", CHAIN4, str(plan), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes == text
    assert notes[:2] == ["checked on the devices the plan file records it was solved with: --accelerators 4",
                         "on the instance's own devices the plan is not valid: device type accelerator: 4 devices "
                         "used, but only 2 exist"]
