"""What the commands write: no plan file without a plan, two outputs never one file, and a closed
output pipe that keeps the command's exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from placement.cli import main

ROOT = Path(__file__).resolve().parents[1]
CHAIN4 = str(ROOT / "instances" / "tiny" / "chain4.json")


def test_a_solve_without_a_plan_writes_no_plan_file(tmp_path, capsys):
    # chain4's nodes take 10 bytes each (tests/test_dp.py): under 1 byte nothing fits anywhere
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--memory", "1", "--cpus", "0", "--out", str(out)]) == 1
    assert not out.exists()
    assert f"no plan: nothing written to {out}" in capsys.readouterr().err
    assert main(["solve", CHAIN4, "--memory", "1", "--cpus", "0", "--out", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err == ""


def test_the_log_and_the_plan_file_are_two_files(tmp_path, capsys):
    log = tmp_path / "run.json"
    assert main(["solve", CHAIN4, "--method", "milp", "--log", str(log), "--out", str(tmp_path / "." / "run.json")]) == 2
    assert capsys.readouterr().err == (f"error: --log and --out name the same file {tmp_path / '.' / 'run.json'}; "
                                       "choose two names\n")
    assert not log.exists()


def test_a_closed_output_pipe_keeps_the_exit_status(tmp_path):
    # a plan that leaves node 4 unplaced is invalid: verify exits 1, also when its reader has gone
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 2]}, {"nodes": [3]}]}))
    proc = subprocess.Popen([sys.executable, "-m", "placement", "verify", CHAIN4, str(plan), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()     # before the command writes: its output meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert b"Traceback" not in err
