"""The benchmark scripts refuse nonsense in one line, with exit status 2 and nothing written; medians are
medians; a failed run is a failure; timings say what machine they ran on."""

from __future__ import annotations

import argparse
import ast
import errno
import functools
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TARNAWSKI = ROOT.parent / "shared" / "tarnawski"
_PATH = list(sys.path)
sys.path.insert(0, str(BENCHMARKS))   # the scripts import each other by name: only while they are imported
import backward_split  # noqa: E402
import codesign_exact  # noqa: E402
import common  # noqa: E402
import crosscheck  # noqa: E402
import dp_throughput  # noqa: E402
import hypar as hypar_benchmark  # noqa: E402
import layerpipe  # noqa: E402
import milp as milp_benchmark  # noqa: E402
import piper as piper_benchmark  # noqa: E402
import piper_first_run  # noqa: E402
import piper_interleaved  # noqa: E402
import piper_simulate  # noqa: E402
import reading  # noqa: E402
import reproduce  # noqa: E402
import simulate as simulate_benchmark  # noqa: E402
import time_limits  # noqa: E402

sys.path[:] = _PATH

#: every script with a command line, but torch_costs.py (importing torch alone takes seconds)
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in ("common.py", "torch_costs.py"))


def run(script: str, *args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python benchmarks/SCRIPT ARGS...`` from the repository root (in the environment ``env``, or this one
    with the package on the path)."""
    env = env or dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def refused(done: subprocess.CompletedProcess) -> str:
    """The last line of a refusal's standard error, after checking that it is one: status 2, no traceback,
    and an error line last."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") or f"{done.args[1].rsplit('/', 1)[-1]}: error: " in last, done.stderr
    return last


def needs_published() -> None:
    if not TARNAWSKI.is_dir():
        pytest.skip(f"the published instances are not at {TARNAWSKI}")


# ------------------------------------------------------------------------------------------------
# empty selections: one line, status 2, no file


def test_milp_empty_match_writes_nothing(tmp_path):
    needs_published()
    out = tmp_path / "milp.json"
    done = run("milp.py", "--match", "typo_instance", "--json", str(out))
    assert done.stderr == (f"error: no instance under {TARNAWSKI / 'throughput-inputs'} "
                           "matches --match 'typo_instance'\n")
    refused(done)
    assert not out.exists()


def test_milp_latency_empty_match_writes_nothing(tmp_path):
    needs_published()
    out = tmp_path / "milp.json"
    done = run("milp.py", "--latency", "--match", "typo", "--json", str(out))
    assert refused(done) == f"error: no instance under {TARNAWSKI / 'latency-inputs'} matches --match 'typo'"
    assert not out.exists()


def test_milp_missing_folder_writes_nothing(tmp_path):
    out = tmp_path / "milp.json"
    done = run("milp.py", "--instances", str(tmp_path / "missing"), "--json", str(out))
    assert refused(done) == f"error: no instances: {tmp_path / 'missing'} is not a folder"
    assert not out.exists()


def test_time_limits_empty_match_writes_nothing(tmp_path):
    needs_published()
    out = tmp_path / "time_limits.json"
    done = run("time_limits.py", "--match", "nothing", "--out", str(out))
    assert done.stderr == ("error: no run: no published instance matches --match 'nothing' for methods "
                           "milp, auto, local-search\n")
    refused(done)
    assert not out.exists()


def test_milp_unknown_backend_is_refused_in_one_error_line(tmp_path):
    out = tmp_path / "milp.json"
    done = run("milp.py", "--instances", str(ROOT / "instances" / "tiny"), "--backends", "nosuch", "--json", str(out))
    assert refused(done) == "error: backend(s) not available here: nosuch (see `placement info --solvers`)"
    assert not out.exists()


def test_codesign_sweep_names_the_options_the_library_refuses(tmp_path):
    done = run("codesign.py", "--sweep", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1",
               "--out", str(tmp_path / "records.jsonl"), "--plots", str(tmp_path / "plots"),
               "--json", str(tmp_path / "sweep.json"))
    assert refused(done).startswith("error: --workers applies to the local cluster only")
    assert list(tmp_path.iterdir()) == []


def test_dp_throughput_over_some_instances_keeps_the_other_rows(tmp_path, monkeypatch, capsys):
    # a run over a folder of one instance wrote that one row, and the table of the others was lost
    out = tmp_path / "dp.json"
    out.write_text(json.dumps({"cpus": 2, "startup": {"first_run_s_median": 1.5},
                               "rows": [{"instance": "LayerGraphs/a", "wall_s": 1.0},
                                        {"instance": "LayerGraphs/b", "wall_s": 2.0}]}))
    folder = tmp_path / "inputs"
    (folder / "LayerGraphs").mkdir(parents=True)
    (folder / "LayerGraphs" / "b.json").write_text("{}")
    monkeypatch.setattr(dp_throughput, "shape_rows", lambda folder, repeat: [])

    def run_one(instance, plan, env, error=None):
        row = {"instance": f"{instance.parent.name}/{instance.stem}", "wall_s": 3.0, "solve_s": 0.1, "peak_mib": 1.0,
               "nodes": 1, "ideals": 2, "pairs_examined": 1, "max_load": 1.0, "bound": 1.0, "gap": 0.0,
               "status": "optimal", "verified": True}
        return {**row, "error": error} if error else row

    monkeypatch.setattr(dp_throughput, "run_one", run_one)
    assert dp_throughput.main(["--instances", str(folder), "--repeat", "1", "--json", str(out)]) == 0
    assert [(r["instance"], r["wall_s"]) for r in json.loads(out.read_text())["rows"]] == [
        ("LayerGraphs/a", 1.0), ("LayerGraphs/b", 3.0)]
    # no bert24 in the folder: the start-up is not timed, and the file's row stays (it was written null)
    assert json.loads(out.read_text())["startup"] == {"first_run_s_median": 1.5, "run": {"cpus": 2}}
    # a failed solve measures nothing: it replaces no row
    monkeypatch.setattr(dp_throughput, "run_one", functools.partial(run_one, error="exit 1"))
    assert dp_throughput.main(["--instances", str(folder), "--repeat", "1", "--json", str(out)]) == 1
    assert [(r["instance"], r["wall_s"]) for r in json.loads(out.read_text())["rows"]] == [
        ("LayerGraphs/a", 1.0), ("LayerGraphs/b", 3.0)]
    capsys.readouterr()


def test_dp_throughput_missing_folder_is_refused_before_timing(tmp_path):
    out = tmp_path / "dp.json"
    done = run("dp_throughput.py", "--instances", str(tmp_path / "missing"), "--repeat", "1", "--json", str(out),
               timeout=10)
    assert refused(done).startswith(f"error: {tmp_path / 'missing'} is not a folder")
    assert not out.exists()


def test_backward_split_empty_match(tmp_path):
    needs_published()
    out = tmp_path / "split.json"
    done = run("backward_split.py", "--match", "nothing_matches", "--out", str(out))
    assert refused(done).startswith("error: no training graph matches --match 'nothing_matches' (of ")
    assert not out.exists()


def tiny_tarnawski(base: Path) -> Path:
    """A folder laid out like ../shared/tarnawski holding one bundled tiny instance."""
    (base / "throughput-inputs" / "LayerGraphs").mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", base / "throughput-inputs" / "LayerGraphs")
    return base


def test_reproduce_says_the_filter_matched_nothing(tmp_path):
    instances, out = tiny_tarnawski(tmp_path / "tarnawski"), tmp_path / "out"
    done = run("reproduce.py", "--instances", str(instances), "--out", str(out), "--filter", "nonexistent")
    assert done.stderr == "error: no instance matches --filter nonexistent\n"
    refused(done)
    assert not out.exists()


def test_reproduce_says_which_objective_the_filter_matched_nothing_of(tmp_path):
    # with --only latency, a filter that names only a throughput instance said "no instance matches", of an
    # instance that is there
    instances, out = tiny_tarnawski(tmp_path / "tarnawski"), tmp_path / "out"
    latency = instances / "latency-inputs" / "LayerGraphs"
    latency.mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", latency / "other.json")
    done = run("reproduce.py", "--instances", str(instances), "--out", str(out), "--only", "latency",
               "--filter", "chain4")
    assert refused(done) == "error: no latency instance matches --filter chain4"
    assert not out.exists()


def test_reproduce_report_only_without_results_says_why_once(tmp_path):
    # the reason repeated the path: "...: cannot read the results of a reproduction: [Errno 2] No such file or
    # directory: '.../results.json'"
    done = run("reproduce.py", "--report-only", "--out", str(tmp_path))
    assert refused(done) == (f"error: {tmp_path / 'results.json'}: cannot read the results of a reproduction: "
                             f"{os.strerror(errno.ENOENT)}")


MALFORMED_SUMMARIES = [
    ([1, 2], "a JSON list, not an object"),
    ({"settings": {}}, "no total_wall_s (a number)"),
    ({"settings": [], "total_wall_s": 1.0}, "no settings (an object)"),
    ({"settings": {}, "total_wall_s": 1.0, "throughput": []}, "no latency (a list)"),
    ({"settings": {}, "total_wall_s": 1.0, "throughput": [{"instance": "a", "runs": {"dp": 1}}], "latency": []},
     "throughput[0] is no object with an instance name and runs (an object of objects)"),
    ({"settings": {}, "total_wall_s": 1.0, "throughput": [], "latency": [{"instance": "a", "runs": {}}]},
     "latency[0] has no lower_bound (a number, or null where not finite)"),
]


@pytest.mark.parametrize(("summary", "why"), MALFORMED_SUMMARIES, ids=[why for _, why in MALFORMED_SUMMARIES])
def test_reproduce_report_only_refuses_a_malformed_summary(tmp_path, summary, why):
    # [1, 2] raised TypeError and {"settings": {}} KeyError, each with a traceback
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps(summary))
    done = run("reproduce.py", "--out", str(out), "--report-only", "--no-plot")
    assert refused(done) == f"error: {out / 'results.json'}: not the results of a reproduction: {why}"
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


def test_reproduce_report_only_keeps_the_settings_of_the_runs(tmp_path):
    # --report-only wrote its own command line's --instances, --only and --filter (the defaults) into the
    # rebuilt results.json, which then no longer said which instances the runs it holds were made on
    out = tmp_path / "out"
    out.mkdir()
    settings = {"instances": "/elsewhere/tarnawski", "out": str(out), "time_limit": 5.0, "heuristic_time_limit": 5.0,
                "restarts": 10, "seed": 0, "latency_calls": 1, "only": "latency", "filter": "resnet50",
                "no_plot": True, "date": "2026-12-02", "cores": 2, "python": "3.11.7", "machine": {"cpus": 2}}
    (out / "results.json").write_text(json.dumps({"settings": settings, "total_wall_s": 6.0, "runs": 0,
                                                  "throughput": [], "latency": [], "failed_checks": 0}))
    done = run("reproduce.py", "--out", str(out), "--report-only", "--no-plot")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "results.json").read_text())["settings"] == settings
    # and its last line says that it ran nothing (it said "0 runs in 0.1 min", as a run would)
    assert done.stdout.splitlines()[-1] == f"rebuilt from 0 runs (made in 0.1 min); wrote {out / 'results.json'}"


def test_reproduce_report_only_refuses_the_options_of_a_run(tmp_path):
    # --report-only takes the settings the runs were made with from results.json: a limit, a seed or a filter given
    # beside it was ignored without a word
    out = tmp_path / "out"
    for given, named in ((["--time-limit", "5"], "--time-limit"), (["--filter", "bert", "--seed", "3"],
                                                                   "--seed, --filter")):
        done = run("reproduce.py", "--out", str(out), "--report-only", "--no-plot", *given)
        assert refused(done) == (f"reproduce.py: error: {named}: --report-only runs nothing; it rebuilds the "
                                 "tables with the settings recorded in OUT/results.json")
    assert not out.exists()


def test_reproduce_report_only_refuses_an_option_of_a_run_given_at_its_default(tmp_path):
    # an option given at its default value (--time-limit 60, --seed 0) was taken for one not given, and ignored
    # without a word where the recorded runs had other settings
    out = tmp_path / "out"
    done = run("reproduce.py", "--out", str(out), "--report-only", "--time-limit", "60", "--seed=0")
    assert refused(done) == ("reproduce.py: error: --time-limit, --seed: --report-only runs nothing; it rebuilds the "
                             "tables with the settings recorded in OUT/results.json")
    assert not out.exists()


def test_reproduce_refuses_a_missing_folder(tmp_path):
    done = run("reproduce.py", "--instances", str(tmp_path / "missing"), "--out", str(tmp_path / "out"))
    assert refused(done).startswith(f"error: no instances: {tmp_path / 'missing'} is not a folder")
    assert not (tmp_path / "out").exists()


#: the record of a run whose plan is the optimum of contiguity stages, as a worker returns it
OPTIMAL_RECORD = {"status": "optimal", "value": 7.5, "claimed": 7.5, "bound": 7.5, "valid": True, "agrees": True,
                  "plan_class": "stages", "runtime_s": 0.1, "wall_s": 1.0}


def reproduction(out: Path, throughput: list[dict], latency: list[dict]) -> dict:
    """A results.json of a finished reproduction, written into ``out``, with the settings of an earlier run."""
    settings = {"instances": "/elsewhere/tarnawski", "out": str(out), "time_limit": 60.0, "heuristic_time_limit": 60.0,
                "restarts": 10, "seed": 0, "latency_calls": 1, "only": None, "filter": None, "no_plot": True,
                "date": "2026-12-01", "cores": 2, "python": "3.11.7", "machine": {"cpus": 2}}
    summary = {"settings": settings, "total_wall_s": 60.0, "runs": 10, "throughput": throughput, "latency": latency,
               "failed_checks": 0}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(summary))
    return summary


def test_reproduce_of_some_instances_keeps_the_entries_of_the_others(tmp_path, monkeypatch, capsys):
    # a run with --filter or --only wrote results.json with its own runs only: the instances and the objective it
    # did not run were lost, and --report-only then rebuilt the tables from that run alone
    instances, out = tiny_tarnawski(tmp_path / "tarnawski"), tmp_path / "out"
    other = {"instance": "LayerGraphs/other", "runs": {"dp": {**OPTIMAL_RECORD, "value": 3.0}}}
    again = {"instance": "LayerGraphs/chain4", "runs": {"dp": {**OPTIMAL_RECORD, "value": 9.0}}}
    slow = {"instance": "LayerGraphs/slow", "runs": {}, "lower_bound": 1.0}
    earlier = reproduction(out, [other, again], [slow])
    monkeypatch.setattr(reproduce, "execute", lambda run, plans, tmp, warm: dict(OPTIMAL_RECORD))
    assert reproduce.main(["--instances", str(instances), "--out", str(out), "--only", "throughput",
                           "--no-plot", "--time-limit", "5"]) == 0
    written = json.loads((out / "results.json").read_text())
    assert [(e["instance"], e["runs"]["dp"]["value"]) for e in written["throughput"]] == [
        ("LayerGraphs/other", 3.0), ("LayerGraphs/chain4", 7.5)]
    assert [e["instance"] for e in written["latency"]] == ["LayerGraphs/slow"]
    # each entry says the settings of the run that made it
    assert written["throughput"][0]["run"] == written["latency"][0]["run"] == {"settings": earlier["settings"]}
    assert written["throughput"][1]["run"] == {"settings": written["settings"]}
    assert written["settings"]["time_limit"] == 5.0
    said = capsys.readouterr().out.splitlines()
    assert said[-2:] == [f"wrote {out / 'results.json'}: throughput: 1 of this run's rows, 1 of the file's kept, "
                         "1 replaced",
                         f"wrote {out / 'results.json'}: latency: 0 of this run's rows, 1 of the file's kept, "
                         "0 replaced"]
    # the tables hold every instance, and name the ones made with other settings than the header's
    table = (out / "throughput.md").read_text()
    assert "| LayerGraphs/other | 3.000 optimal |" in table and "| LayerGraphs/chain4 | 7.500 optimal |" in table
    assert ("Rows kept from earlier runs with other settings:\n\n* LayerGraphs/other: 2026-12-01, MILP 60 s, "
            "local search 60 s (10 restarts, seed 0), latency MILP with up to 1 call per accelerator\n") in table
    assert "* LayerGraphs/chain4" not in table


def test_an_interrupted_reproduction_leaves_the_results_of_the_last_one(tmp_path, monkeypatch, capsys):
    # after each run results.json was written over with the progress of this one: stopped, it left that progress,
    # and the finished reproduction it held was lost (--report-only then refused the file as unfinished);
    # Ctrl-C then ended the run with a traceback that said neither of where the results were
    instances, out = tiny_tarnawski(tmp_path / "tarnawski"), tmp_path / "out"
    earlier = reproduction(out, [{"instance": "LayerGraphs/other", "runs": {"dp": OPTIMAL_RECORD}}], [])
    calls = []

    def execute(run, plans, tmp, warm):
        calls.append(run.method)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return dict(OPTIMAL_RECORD)

    monkeypatch.setattr(reproduce, "execute", execute)
    assert reproduce.main(["--instances", str(instances), "--out", str(out), "--only", "throughput",
                           "--no-plot"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: interrupted after 1 of 8 runs: {out / 'results.json'} is as it was; "
        f"the runs done so far are in {out / 'partial.json'}")
    assert json.loads((out / "results.json").read_text()) == earlier
    # the progress of the run stopped is beside it
    assert json.loads((out / "partial.json").read_text()) == {
        "partial": "1 of 8 runs", "runs": {"throughput LayerGraphs/chain4": {"dp": OPTIMAL_RECORD}}}


def test_reproduce_heuristic_time_limit_says_every_run_it_limits(tmp_path):
    # --heuristic-time-limit also limits latency-chain, the one latency baseline that takes a limit, where its help
    # and docs/reproducing.md spoke of the local search only
    instances = tiny_tarnawski(tmp_path / "tarnawski")
    latency = instances / "latency-inputs" / "LayerGraphs"
    latency.mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", latency)
    args = argparse.Namespace(instances=instances, heuristic_time_limit=7.0, restarts=1, seed=0, time_limit=5.0,
                              latency_calls=1, only=None, filter=None)
    from placement.solvers.registry import METHODS

    limited = {run.method for run in reproduce.plan_runs(args) if run.options.get("time_limit") == 7.0
               and "time_limit" in METHODS[run.registry_method].options}
    assert limited == {"local-search", "latency-chain"}
    help_text = " ".join(run("reproduce.py", "--help").stdout.split())
    assert "--heuristic-time-limit HEURISTIC_TIME_LIMIT time limit per run of local search and latency-chain, s " \
           "(default 60)" in help_text
    assert "| `--heuristic-time-limit S` | time limit of each local search and of `latency-chain` (default 60) |" \
           in (ROOT / "docs" / "reproducing.md").read_text()


def test_ctrl_c_ends_a_script_with_one_line_and_status_130(capsys):
    # Ctrl-C ended every script with the traceback of wherever the interrupt fell (a solve's, a subprocess's), and
    # with status 1 where the library's own interrupt carried a plan
    def stopped() -> int:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as ended:
        common.exit_with(stopped)
    assert ended.value.code == 130 and capsys.readouterr().err == "error: interrupted\n"
    with pytest.raises(SystemExit) as ended:
        common.exit_with(lambda: 2)
    assert ended.value.code == 2
    launchers = {"child.py"}   # runs one command and reports its status: it has no run of its own to stop
    for script in sorted(set(SCRIPTS) - launchers) + ["torch_costs.py"]:
        tree = ast.parse((BENCHMARKS / script).read_text())
        last = tree.body[-1]
        assert isinstance(last, ast.If) and ast.unparse(last.body[-1]) in ("exit_with(main)", "exit_with(cli)"), script


def test_piper_refuses_a_folder_without_instances(tmp_path):
    done = run("piper.py", "--shared", str(tmp_path), "--out", str(tmp_path / "out"))
    assert refused(done).startswith("error: no Piper instances")
    assert not (tmp_path / "out").exists()


def test_hypar_refuses_an_instances_folder_that_is_not_there(tmp_path):
    # it planned every network, said "skipped" of the ledger and exited 0 on a mistyped --instances
    missing, out = tmp_path / "missing", tmp_path / "x.json"
    done = run("hypar.py", "--instances", str(missing), "--max-accelerators", "2", "--repeat", "1", "--json", str(out))
    assert refused(done) == f"error: --instances {missing}: no such folder"
    assert not out.exists() and done.stdout == ""


def test_piper_interleaved_refuses_a_folder_without_instances(tmp_path):
    # without the instances it said "skipped" on standard output and exited 0, as if it had measured something
    done = run("piper_interleaved.py", "--shared", str(tmp_path), "--json", str(tmp_path / "x.json"))
    assert refused(done) == f"error: no Piper instances (bert32a100.json, gnmt.json, resnet.json) under {tmp_path}"
    assert not (tmp_path / "x.json").exists() and done.stdout == ""


def test_piper_interleaved_runs_the_settings_of_the_instances_there(tmp_path):
    (tmp_path / "gnmt.json").write_text("{}")
    assert piper_interleaved.settings(tmp_path) == [("gnmt", 8, None), ("gnmt", 16, None)]


def test_piper_interleaved_run_of_one_instance_keeps_the_records_of_the_others(tmp_path, monkeypatch, capsys):
    """A run of some instances (``--shared`` holding one) wrote the results file whole, with its records only;
    the file's summary is that of all its records. A record's ``memory`` is its setting's memory bound (the
    simulator's memory per stage overwrote it, so no record matched its setting)."""
    if not (ROOT.parent / "shared" / "piper" / "gnmt.json").is_file():
        pytest.skip("the Piper instances are not in ../shared/piper")
    stored = json.loads((BENCHMARKS / "results" / "piper_interleaved.json").read_text())["records"]
    kept = next(r for r in stored if r["instance"] == "resnet")
    stale = {**next(r for r in stored if (r["instance"], r["devices"], r["chunks"]) == ("gnmt", 8, 2)), "stale": 1}
    out = tmp_path / "interleaved.json"
    out.write_text(json.dumps({"summary": {}, "records": [stale, kept]}))   # as stored: no machine
    monkeypatch.setattr(piper_interleaved, "SETTINGS", [("gnmt", 8, None)])
    monkeypatch.setattr(piper_interleaved, "CHUNKS", (2,))
    assert piper_interleaved.main(["--time-limit", "0.5", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert [(r["instance"], r["memory"], r["chunks"], "stale" in r, r["run"].get("time_limit"))
            for r in written["records"]] == [("resnet", None, 2, False, None), ("gnmt", None, 2, False, 0.5)]
    # the simulator's memory per stage, [model, simulated], beside the bound (it overwrote the bound)
    stages = written["records"][1]["stage_memory"]
    assert stages and all(model == pytest.approx(simulated, rel=0.01) for model, simulated in stages)
    assert written["time_limit"] == 0.5 and written["summary"] == piper_interleaved.summarized(written["records"])
    assert written["summary"]["runs"] == 2
    said = capsys.readouterr().out.splitlines()
    assert said[-2].startswith("1 runs: ")   # this run's summary
    assert said[-1] == f"wrote {out}: 1 of this run's rows, 1 of the file's kept, 1 replaced"


# ------------------------------------------------------------------------------------------------
# bad options: argparse's error or one line, status 2, no traceback, no file

BAD_OPTIONS = [
    ("milp.py", ["--time-limit", "-5"]),
    ("milp.py", ["--repeat", "0"]),
    ("milp.py", ["--calls", "0"]),
    ("time_limits.py", ["--methods", "foo", "--match", "bert24_inference"]),
    ("time_limits.py", ["--contiguity", "bogus"]),
    ("time_limits.py", ["--time-limit", "0"]),
    ("crosscheck.py", ["--instances", "2", "--backends", "foo"]),
    ("crosscheck.py", ["--instances", "1", "--unit", "-1", "--backends", "cp-sat"]),
    ("crosscheck.py", ["--instances", "-3"]),
    ("crosscheck.py", ["--unit", "0"]),
    ("dp_throughput.py", ["--repeat", "0", "--skip-published"]),
    ("hypar.py", ["--repeat", "0", "--max-accelerators", "2", "--no-ledger"]),
    ("hypar.py", ["--batch", "-5"]),
    ("hypar.py", ["--max-accelerators", "1"]),
    ("layerpipe.py", ["--accelerators", "abc"]),
    ("layerpipe.py", ["--accelerators", "9-2"]),
    ("layerpipe.py", ["--time-limit", "-1"]),
    ("layerpipe.py", ["--variants", "foo"]),
    ("backward_split.py", ["--time-limit", "-5"]),
    ("backward_split.py", ["--accelerators", "0"]),
    ("codesign_exact.py", ["--repeat", "0", "--chips", "1"]),
    ("codesign_exact.py", ["--chips", "0"]),
    ("codesign_exact.py", ["--chips", "-1"]),
    ("codesign.py", ["--repeat", "0"]),
    ("codesign.py", ["--out", "records.jsonl"]),
    ("codesign_ppw.py", ["--chips", "0"]),
    ("reproduce.py", ["--time-limit", "-5"]),
    ("reproduce.py", ["--restarts", "0"]),
    ("reproduce.py", ["--heuristic-time-limit", "nan"]),
    ("piper_first_run.py", ["--baseline", "nonexistentcommit"]),
    ("piper_interleaved.py", ["--time-limit", "0"]),
    ("reading.py", ["--baseline", "/nonexistent-tree"]),
    ("reading.py", ["--baseline", "benchmarks"]),   # a folder without the package
    ("piper.py", ["--no-grid", "gnmt,foo", "--quick"]),
    ("layerpipe.py", ["--only"]),   # no graph named: it ran every graph, the whole benchmark
]


@pytest.mark.parametrize(("script", "args"), BAD_OPTIONS, ids=[f"{s} {' '.join(a)}" for s, a in BAD_OPTIONS])
def test_bad_options_are_refused(tmp_path, script, args):
    before = {p: p.stat().st_mtime_ns for p in (BENCHMARKS / "results").iterdir()}
    refused(run(script, *args, timeout=20))
    assert {p: p.stat().st_mtime_ns for p in (BENCHMARKS / "results").iterdir()} == before


# ------------------------------------------------------------------------------------------------
# an output that cannot be written: one line naming the option, before any work

FILE, FOLDER = "/proc/placement-test/x.json", "/proc/placement-test/out"   # /proc takes no new folder, even root's
UNWRITABLE_OUTPUTS = [
    ("backward_split.py", ["--out"], FILE), ("codesign.py", ["--json"], FILE),
    ("codesign.py", ["--sweep", "--out"], FILE), ("codesign.py", ["--sweep", "--plots"], FOLDER),
    ("codesign_exact.py", ["--json"], FILE), ("codesign_ppw.py", ["--json"], FILE), ("crosscheck.py", ["--out"], FILE),
    ("dp_throughput.py", ["--json"], FILE), ("hypar.py", ["--json"], FILE), ("layerpipe.py", ["--json"], FILE),
    ("layerpipe.py", ["--plot"], FILE), ("milp.py", ["--json"], FILE), ("piper.py", ["--out"], FOLDER),
    ("piper_first_run.py", ["--out"], FOLDER), ("piper_interleaved.py", ["--json"], FILE),
    ("piper_simulate.py", ["--json"], FILE), ("reading.py", ["--json"], FILE), ("reproduce.py", ["--out"], FOLDER),
    ("simulate.py", ["--json"], FILE), ("time_limits.py", ["--out"], FILE), ("torch_costs.py", ["--json"], FILE),
]


@pytest.mark.parametrize(("script", "options", "path"), UNWRITABLE_OUTPUTS,
                         ids=[f"{s} {' '.join(o)}" for s, o, _ in UNWRITABLE_OUTPUTS])
def test_unwritable_output_is_refused_before_any_work(script, options, path):
    if script == "torch_costs.py" and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    done = run(script, *options, path, timeout=120)
    assert (done.returncode, done.stderr) == (2, f"error: {options[-1]} {path}: cannot write: "
                                                 f"{os.strerror(errno.ENOENT)}\n")
    assert done.stdout == ""   # nothing measured, nothing said about the machine


def test_cannot_write_leaves_every_output_as_it_was(tmp_path):
    (tmp_path / "kept.json").write_text("as it was")
    files = {"--json": tmp_path / "kept.json", "--out": tmp_path / "new" / "deeper" / "x.json", "--log": None}
    assert common.cannot_write(files, {"--plots": tmp_path / "plots" / "more"}) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"] and files["--json"].read_text() == "as it was"
    assert common.cannot_write({"--json": tmp_path / "new" / "x.json"}, parents=False) == \
        f"--json {tmp_path / 'new' / 'x.json'}: cannot write: {os.strerror(errno.ENOENT)}"
    assert common.cannot_write({}, {"--out": tmp_path / "kept.json"}) == \
        f"--out {tmp_path / 'kept.json'}: cannot write: {os.strerror(errno.EEXIST)}"


def docstring(script: str) -> str:
    return ast.get_docstring(ast.parse((BENCHMARKS / script).read_text())) or ""


@pytest.mark.parametrize("script", [*SCRIPTS, "torch_costs.py"])
def test_docstrings_name_the_default_outputs_where_they_are(script):
    # piper.py and torch_costs.py named results/... where the default is benchmarks/results/...
    # (reproduce.py's default folder is results/reproduce, at the top of the repository)
    named = re.findall(r"(?<![\w/.])results/[\w./{},]+", docstring(script))
    assert all(name.startswith("results/reproduce") for name in named), named


def test_a_scaled_crosscheck_keeps_the_unit_runs_file():
    # --unit 1e-9 wrote over crosscheck.json, the unit run's results, unless --out was given
    results = BENCHMARKS / "results"
    assert crosscheck.default_out(1.0) == results / "crosscheck.json"
    assert crosscheck.default_out(1e-9) == results / "crosscheck-unit-1e-9.json"   # the names of the kept files
    assert crosscheck.default_out(1e9) == results / "crosscheck-unit-1e9.json"
    assert crosscheck.default_out(0.5) == results / "crosscheck-unit-0.5.json"
    assert crosscheck.default_out(2.5e-12) == results / "crosscheck-unit-2.5e-12.json"


def test_crosscheck_units_that_differ_write_files_that_differ():
    # the name was the unit to six digits: 1.0000001 wrote crosscheck-unit-1.json, and 1234567 and 1234568 both
    # wrote crosscheck-unit-1.23457e6.json, the second run's results over the first's
    names = [crosscheck.default_out(unit).name for unit in (1.0000001, 1234567.0, 1234568.0, 1.0000001e-9)]
    assert names == ["crosscheck-unit-1.0000001.json", "crosscheck-unit-1234567.json",
                     "crosscheck-unit-1234568.json", "crosscheck-unit-1.0000001e-9.json"]


def test_crosscheck_docstring_names_every_method_it_runs():
    from placement.testing.crosscheck import cases, random_instance

    run_methods = {case.method for k in (0, 1)
                   for case in cases(random_instance(random.Random(k), k % 2 == 1), ("cp-sat",))}
    text = docstring("crosscheck.py").replace("\n", " ")
    assert run_methods == {"dp", "milp", "greedy", "single", "latency-greedy"}
    assert "the DP; the MILP" in text and all(f"``{m}``" in text for m in run_methods - {"dp", "milp"})
    assert "every method" not in text


def crosscheck_row(method: str, backend: str, objective: str, runs: int, wrong: int = 0) -> dict:
    """A row of crosscheck.py's table, as the script writes it."""
    return {"method": method, "backend": backend, "objective": objective, "runs": runs, "agreements": runs - wrong,
            "other_honest": 0, "wrong_claims": wrong, "seconds_per_run": 0.01}


def crosscheck_claim(method: str, backend: str | None, seed: int) -> dict:
    """A wrong claim of crosscheck.py's file, as the script writes it."""
    return {"seed": seed, "method": method, "objective": "throughput", "contiguity": "stages", "backend": backend,
            "calls": 1, "warm_start": True, "status": "optimal", "value": 2.0, "optimum": 3.0, "wrong": "below"}


def test_crosscheck_run_of_one_backend_keeps_the_rows_and_wrong_claims_of_the_others(tmp_path, capsys):
    # a run with --backends cp-sat wrote its own rows only: the rows of every other backend were lost, and so
    # were the wrong claims they counted
    pytest.importorskip("ortools")
    out = tmp_path / "crosscheck.json"
    summary = {"runs": 70, "agreements": 69, "wrong_claims": 2, "instances": 60, "first_seed": 1000, "unit": 1.0,
               "backends": ["cp-sat", "cbc"], "wall_s": 9.0}
    earlier = {"machine": {"cpus": 2}, "summary": summary,
               "table": [crosscheck_row("dp", "-", "throughput", 60, wrong=1),
                         crosscheck_row("milp", "cbc", "throughput", 10, wrong=1)],
               "wrong": [crosscheck_claim("dp", None, 1003), crosscheck_claim("milp", "cbc", 1004)]}
    out.write_text(json.dumps(earlier))
    assert crosscheck.main(["--instances", "2", "--backends", "cp-sat", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert [(r["method"], r["backend"], r["objective"], r["runs"]) for r in written["table"]] == [
        ("milp", "cbc", "throughput", 10), ("dp", "-", "throughput", 2), ("greedy", "-", "throughput", 2),
        ("latency-greedy", "-", "latency", 1), ("milp", "cp-sat", "latency", 4), ("milp", "cp-sat", "throughput", 12),
        ("milp", "cp-sat", "throughput-gpipe", 6), ("single", "-", "throughput", 2)]
    # each row says the run it was measured in: the kept one the file's, the others this run's
    assert written["table"][0]["run"] == {"machine": {"cpus": 2}, "summary": summary}
    assert all(row["run"] == {"machine": written["machine"], "summary": written["summary"]}
               for row in written["table"][1:])
    assert (written["summary"]["runs"], written["summary"]["backends"]) == (29, ["cp-sat"])
    # the DP's row was measured again, without its wrong claim; the kept row's claim is kept
    assert written["wrong"] == [crosscheck_claim("milp", "cbc", 1004)]
    assert capsys.readouterr().out.splitlines()[-1] == (f"wrote {out}: table: 7 of this run's rows, 1 of the file's "
                                                         "kept, 1 replaced")


def test_crosscheck_keeps_the_rows_of_the_committed_files():
    # the stored runs are rows of the table crosscheck.py merges into: none would be dropped as another table's
    for name in ("crosscheck.json", "crosscheck-unit-1e-9.json", "crosscheck-unit-1e9.json"):
        path = BENCHMARKS / "results" / name
        held = json.loads(path.read_text())
        kept = common.merged_rows(path, [], crosscheck.KEY, {"machine": None, "summary": None}, "table")
        assert [{k: v for k, v in row.items() if k != "run"} for row in kept] == held["table"]
        assert all(row["run"] == {"machine": held["machine"], "summary": held["summary"]} for row in kept)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    done = run(script, "--help", timeout=20)
    assert done.returncode == 0 and done.stdout.startswith("usage: "), done.stderr[-2000:]


def test_child_runs_a_command_and_refuses_none():
    assert "exit=0" in run("child.py", sys.executable, "-c", "pass").stdout
    refused(run("child.py"))
    assert refused(run("child.py", "no-such-command-here")).startswith("error: could not start no-such-command-here")


# ------------------------------------------------------------------------------------------------
# argument types, medians, failed runs, the machine


def test_argument_types():
    assert common.positive_float("0.5") == 0.5 and common.positive_int("3") == 3
    for text in ("0", "-5", "nan", "inf", "abc"):
        with pytest.raises(argparse.ArgumentTypeError):
            common.positive_float(text)
    for text in ("0", "-1", "1.5", "abc"):
        with pytest.raises(argparse.ArgumentTypeError):
            common.positive_int(text)
    with pytest.raises(argparse.ArgumentTypeError):
        common.integer_at_least(2)("1")
    assert layerpipe.accelerator_range("2-4") == [2, 3, 4] and layerpipe.accelerator_range("3") == [3]
    assert layerpipe.variant_list("any,adjacent+inter,any") == ["any", "adjacent+inter"]
    for text in ("9-2", "0-2", "abc", "2-x"):
        with pytest.raises(argparse.ArgumentTypeError):
            layerpipe.accelerator_range(text)


def limit_row(wall: float, exit_code: int | None = 0) -> dict:
    """A time_limits row of one run at a limit of 10 s."""
    within = wall <= time_limits.allowed(10.0)
    return {"wall_s": wall, "time_limit": 10.0, "within_limit": within, "ok": exit_code == 0 and within,
            "exit": exit_code}


def test_time_limits_labels_latency_runs_class_none(tmp_path, monkeypatch):
    # latency rows were labelled 'stages', a class the latency model does not take (its plans are of class none)
    for folder, name in (("throughput-inputs", "a_training.json"), ("latency-inputs", "b_inference.json")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("{}")
    monkeypatch.setattr(time_limits, "SHARED", tmp_path)
    runs = [(path.name, method, objective, c) for path, method, objective, c in
            time_limits.runs(["stages", "none"], ["milp", "local-search"], "")]
    assert runs == [("a_training.json", "milp", "throughput", "stages"),
                    ("a_training.json", "milp", "throughput", "none"),
                    ("a_training.json", "milp", "throughput-gpipe", "stages"),
                    ("a_training.json", "milp", "throughput-gpipe", "none"),
                    ("a_training.json", "local-search", "throughput", "stages"),
                    ("b_inference.json", "milp", "latency", "none")]


def test_time_limits_median_of_an_even_count():
    rows = [limit_row(w) for w in (10.0, 12.0, 11.0, 30.0)]
    total = time_limits.summary(rows, 10.0)
    assert total["median_wall_over_limit"] == 1.15     # (1.1 + 1.2) / 2, not the upper middle 1.2
    assert (total["runs"], total["over"], total["failed"]) == (4, 1, 0)


def test_time_limits_summary_of_a_file_counts_each_limit_apart():
    # rows at limits of 10 s and 2 s (two runs into one file) were counted together as rows at the last limit
    rows = [limit_row(w) for w in (10.0, 12.0, 30.0)] + [{**limit_row(1.0), "time_limit": 2.0}]
    written = time_limits.file_summaries(rows, 2.0)
    assert written["summary"] == {"time_limit": 2.0, "runs": 1, "over": 0, "failed": 0,
                                  "median_wall_over_limit": 0.5, "max_wall_s": 1.0}
    assert [(s["time_limit"], s["runs"], s["over"]) for s in written["summaries"]] == [(2.0, 1, 0), (10.0, 3, 1)]
    assert written["summaries"][1]["median_wall_over_limit"] == 1.2


def test_time_limits_counts_a_failed_run_apart_from_a_slow_one():
    rows = [limit_row(1.0, 2), limit_row(1.0, None), limit_row(30.0)]
    assert [time_limits.verdict(r) for r in rows] == ["FAILED (exit 2)", "FAILED (killed)", "OVER"]
    assert time_limits.summary(rows, 10.0)["failed"] == 2 and time_limits.summary(rows, 10.0)["over"] == 1


def test_time_limits_row_of_a_failed_child_is_not_ok():
    row = time_limits.measure(ROOT / "instances" / "tiny" / "chain4.json", "foo", "throughput", "stages", 5.0)
    assert row["exit"] == 2 and row["within_limit"] and not row["ok"]
    assert time_limits.verdict(row) == "FAILED (exit 2)"
    assert "invalid choice: 'foo'" in row["message"]


def test_milp_row_of_runs_without_a_plan_has_no_value():
    # statistics.median of None values raised TypeError, and the run stopped with no file written
    def result(status: str, value: float | None, bound: float | None, gap: float | None) -> SimpleNamespace:
        return SimpleNamespace(status=status, value=value, bound=bound, gap=gap, runtime_s=1.0, stats={}, message="")

    solved = [result("optimal", 7.5, 7.5, 0.0), result("feasible", 8.5, 7.0, 0.5)]
    row = milp_benchmark._row("i", "none", "throughput", "cp-sat", solved, 7.5, 1.0)
    assert (row["objective"], row["bound"], row["gap"], row["status"]) == (8.0, 7.25, 0.25,
                                                                           "feasible/optimal (1/2 proven)")
    unsolved = [result("no_solution", None, 7.0, None), result("feasible", 8.5, 7.0, 0.5)]
    row = milp_benchmark._row("i", "none", "throughput", "cp-sat", unsolved, 7.5, 1.0)
    assert (row["objective"], row["bound"], row["gap"], row["objective_each"]) == (None, 7.0, None, [None, 8.5])
    assert "| - | 7.000000 | - |" in milp_benchmark.format_row(row)


def test_backward_split_median_of_an_even_count():
    rows = [{"variant": "any", "split": 1.0, "unsplit": u, "speedup": u, "better": u > 1}
            for u in (1.0, 1.2, 1.1, 2.0)]
    rows.append({"variant": "any", "split": None, "unsplit": 1.0, "speedup": None, "better": False})
    s = backward_split.variant_summary(rows, "any")
    assert s["median_speedup"] == pytest.approx(1.15)
    assert (s["runs"], s["both"], s["better"], s["worse"]) == (5, 4, 3, 0)
    assert backward_split.variant_summary(rows, "adjacent")["median_speedup"] is None


def test_committed_medians_are_medians():
    for name in ("time_limits.json", "time_limits_5s.json"):
        document = json.loads((BENCHMARKS / "results" / name).read_text())
        rows, stored = document["rows"], document["summary"]
        assert stored == time_limits.file_summaries(rows, stored["time_limit"])["summary"]


def test_machine_names_the_cpu(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Some CPU @ 2.00GHz\n")
    assert common.cpu_model(cpuinfo) == "Some CPU @ 2.00GHz"
    assert common.cpu_model(tmp_path / "missing") is None
    here = common.machine()
    assert {"python", "cpus", "machine", "processor", "cpu_model", "load_average"} <= set(here)


def test_codesign_writes_its_table_where_told(tmp_path):
    out = tmp_path / "codesign.json"
    done = run("codesign.py", "--repeat", "1", "--models", "gnmt", "--chips", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(out.read_text())
    assert document["summary"]["rows"] == 1 and document["machine"]["cpus"] == os.cpu_count()


def test_codesign_ppw_writes_where_told(tmp_path):
    out = tmp_path / "ppw.json"
    done = run("codesign_ppw.py", "--repeat", "1", "--models", "gnmt", "--chips", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(out.read_text())
    assert document["summary"]["rows"] == 1 and "cpu_model" in document["machine"]


@pytest.mark.parametrize(("script", "value"), [("codesign.py", "exact_throughput"), ("codesign_ppw.py", "value")])
def test_codesign_run_of_one_model_keeps_the_rows_of_the_others(tmp_path, script, value):
    """A run of some models or chip counts wrote the results file whole, with its rows only; the file's
    summary is that of all its rows."""
    stored = BENCHMARKS / "results" / script.replace(".py", ".json")
    out = tmp_path / "results.json"
    shutil.copy(stored, out)
    before = json.loads(stored.read_text())["rows"]
    done = run(script, "--repeat", "1", "--models", "gnmt", "--chips", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == (f"wrote {out}: 1 of this run's rows, {len(before) - 1} of the file's "
                                            "kept, 1 replaced")
    written = json.loads(out.read_text())
    (mine,) = [r for r in before if (r["model"], r["chips"], r.get("kind", "training")) == ("gnmt", 1, "training")]
    # the others in their order, then the same optimum measured again (to the last digits: sums in another order)
    assert [(r["model"], r["chips"], r[value]) for r in written["rows"]] == [
        (r["model"], r["chips"], pytest.approx(r[value], rel=1e-12)) for r in [*(r for r in before if r is not mine),
                                                                                 mine]]
    assert written["summary"]["rows"] == len(before)


def test_codesign_exact_agrees_with_its_check_to_the_last_digits(tmp_path):
    # the two methods reach the same optimum by sums taken in another order: 214.83299036780946 against
    # 214.83299036780937 on one chip was DIFFERENT, and the run exited with status 1
    assert codesign_exact.agree(214.83299036780946, 214.83299036780937) and codesign_exact.agree(None, None)
    assert not codesign_exact.agree(214.833, 214.834) and not codesign_exact.agree(214.833, None)
    out = tmp_path / "exact.json"
    done = run("codesign_exact.py", "--chips", "1", "--repeat", "1", "--json", str(out))
    assert done.returncode == 0 and "DIFFERENT" not in done.stdout, done.stdout + done.stderr[-2000:]
    assert [row["equal"] for row in json.loads(out.read_text())["rows"]] == [True] * 4


def test_codesign_exact_to_fewer_chips_keeps_the_rows_of_more(tmp_path):
    """A run to fewer chips wrote the results file whole, with its rows only."""
    stored = BENCHMARKS / "results" / "codesign_exact.json"
    out = tmp_path / "exact.json"
    shutil.copy(stored, out)
    before = json.loads(stored.read_text())["rows"]
    done = run("codesign_exact.py", "--chips", "1", "--repeat", "1", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"wrote {out}: 4 of this run's rows, 8 of the file's kept, 4 replaced"
    name = lambda row: (row["chips"], row["homogeneous"], row["objective"], row["power_w"])  # noqa: E731
    written = json.loads(out.read_text())["rows"]
    assert [name(r) for r in written] == [name(r) for r in before if r["chips"] > 1] + [
        name(r) for r in before if r["chips"] == 1]
    assert [r["run"]["repeat"] for r in written] == [3] * 8 + [1] * 4


# ------------------------------------------------------------------------------------------------
# a run of some instances or settings updates their rows and keeps the file's others


def test_merged_rows_replace_rows_of_the_same_key_and_keep_the_others(tmp_path, capsys):
    path = tmp_path / "results.json"
    key = ("instance", "class")
    now = {"threads": 2, "machine": "here"}
    run_rows = [{"instance": "a", "class": "none", "value": 2}, {"instance": "c", "class": "none", "value": 3}]
    stamped = [{**row, "run": now} for row in run_rows]
    assert common.merged_rows(path, run_rows, key, now) == stamped   # no file yet
    path.write_text(json.dumps({"threads": 1, "machine": "there", "cold": True,
                                "rows": [{"instance": "a", "class": "none", "value": 1},
                                         {"instance": "a", "class": "sets", "value": 5},
                                         {"instance": "b", "class": ["odd"], "value": 6, "run": {"threads": 8}}]}))
    # the kept rows take the settings the file records (those the run records too), or keep their own
    assert common.merged_rows(path, run_rows, key, now) == [
        {"instance": "a", "class": "sets", "value": 5, "run": {"threads": 1, "machine": "there"}},
        {"instance": "b", "class": ["odd"], "value": 6, "run": {"threads": 8}}, *stamped]
    assert [row["value"] for row in common.merged_rows(path, [], (), now)] == [1, 5, 6]
    capsys.readouterr()
    for text in ("not json", json.dumps([1, 2]), json.dumps({"rows": {"a": 1}}), json.dumps({"rows": [1]})):
        path.write_text(text)
        assert common.merged_rows(path, run_rows, key, now) == stamped
        assert capsys.readouterr().err == (f"note: {path} holds no rows to keep; it is written with this run's rows "
                                           "only\n")


def test_merged_rows_leave_out_rows_of_another_table(tmp_path, capsys):
    """time_limits.py merged another benchmark's rows (no 'exit') into its own and then failed on them with a
    KeyError, losing its run; rows without a field of the key or of ``fields`` are left out, with a note."""
    path = tmp_path / "results.json"
    now = {"machine": "here"}
    run_rows = [{"instance": "a", "limit": 1, "exit": 0}]
    path.write_text(json.dumps({"rows": [{"instance": "b", "limit": 1, "status": "optimal"},   # milp.py's shape
                                         {"a": 1},
                                         {"instance": "c", "limit": 1, "exit": 0}]}))
    assert common.merged_rows(path, run_rows, ("instance", "limit"), now, fields=("exit",)) == [
        {"instance": "c", "limit": 1, "exit": 0, "run": {}}, {**run_rows[0], "run": now}]
    assert capsys.readouterr().err == (f"note: {path}: 2 of its rows lack a field of this table's rows (the first: "
                                       "'exit') and are not kept\n")


def test_merged_and_counted_count_the_rows_kept_and_replaced(tmp_path, capsys):
    """A file that is the list of rows itself, as piper.py's records: with no settings no row takes a ``run``;
    a weak row replaces none."""
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"instance": "a", "value": 1}, {"instance": "b", "value": 2},
                                {"instance": "c", "value": 3}]))
    run_rows = [{"instance": "a", "value": 4}, {"instance": "b", "weak": True}, {"instance": "d", "value": 5}]
    assert common.merged_and_counted(path, run_rows, ("instance",), {}, None, weak=lambda row: "weak" in row) == (
        [{"instance": "b", "value": 2}, {"instance": "c", "value": 3}, {"instance": "a", "value": 4},
         {"instance": "d", "value": 5}], 2, 1)
    assert common.said_merge(path, 3, 2, 1) == f"wrote {path}: 3 of this run's rows, 2 of the file's kept, 1 replaced"
    path.write_text(json.dumps({"rows": []}))   # a list is wanted
    assert common.merged_and_counted(path, run_rows[:1], ("instance",), {}, None) == ([run_rows[0]], 0, 0)
    assert capsys.readouterr().err == f"note: {path} holds no rows to keep; it is written with this run's rows only\n"


def test_piper_run_of_one_instance_keeps_the_records_and_rows_of_the_others(tmp_path, monkeypatch, capsys):
    """A run of some instances (``--shared`` holding one, ``--quick``) wrote the results files whole, with
    its rows only, and piper_simulate.py then replayed those alone."""
    bert = ROOT.parent / "shared" / "piper" / "bert32a100.json"
    if not bert.is_file():
        pytest.skip(f"the Piper instances are not at {bert.parent}")
    shared, out = tmp_path / "piper", tmp_path / "out"
    shared.mkdir()
    shutil.copy(bert, shared / "bert32a100.json")
    stored = {name: json.loads((BENCHMARKS / "results" / name).read_text())
              for name in ("piper.json", "piper_comparison.json")}
    record = next(r for r in stored["piper.json"] if r["instance"] == "bert32a100" and r["devices"] == 1)
    other = {"instance": "gnmt", "devices": 10, "memory": 1.0, "objective": 7.0, "status": "optimal", "stages": []}
    out.mkdir()
    (out / "piper.json").write_text(json.dumps([{**record, "objective": 99.0}, other]))
    (out / "piper_comparison.json").write_text(json.dumps({"machine": "there", "rows": [
        other, {"instance": "bert32a100", "devices": 1, "memory": record["memory"], "objective": 99.0}]}))
    monkeypatch.setattr(piper_benchmark, "runs", lambda names: [("bert32a100", 1, None)])
    assert piper_benchmark.main(["--quick", "--shared", str(shared), "--out", str(out)]) == 0
    assert json.loads((out / "piper.json").read_text()) == [other, record]
    rows = json.loads((out / "piper_comparison.json").read_text())["rows"]
    assert [(row["instance"], row["objective"], row["run"] == {"machine": "there"}) for row in rows] == [
        ("gnmt", 7.0, True), ("bert32a100", record["objective"], False)]
    said = capsys.readouterr().out.splitlines()[-2:]
    assert said == [f"wrote {out / name}: 1 of this run's rows, 1 of the file's kept, 1 replaced"
                    for name in ("piper.json", "piper_comparison.json")]


def test_milp_run_of_one_class_keeps_the_rows_of_the_others_unless_fresh(tmp_path):
    instances = tmp_path / "instances"
    instances.mkdir()
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", instances / "chain4.json")
    out = tmp_path / "milp.json"
    common_args = ["--instances", str(instances), "--backends", "cp-sat", "--time-limit", "10", "--json", str(out)]

    def classes() -> list[str]:
        return [row["class"] for row in json.loads(out.read_text())["rows"]]

    for contiguity, cold in (("stages", []), ("none", ["--cold"]), ("stages", [])):
        done = run("milp.py", *common_args, "--contiguity", contiguity, *cold)
        assert done.returncode == 0, done.stderr[-2000:]
    assert classes() == ["none", "stages"]   # the second stages run replaced the first
    written = json.loads(out.read_text())
    assert [row["run"]["cold"] for row in written["rows"]] == [True, False] and written["cold"] is False
    assert [row["objective"] for row in json.loads(out.read_text())["rows"]] == [7.5, 7.5]   # CHAIN4's optimum
    done = run("milp.py", *common_args, "--contiguity", "sets", "--fresh")
    assert done.returncode == 0, done.stderr[-2000:]
    assert classes() == ["sets"]


def test_milp_instance_whose_dp_reference_is_refused_has_refused_rows(tmp_path):
    # --max-ideals below the DP's need raised LimitExceededError out of the script: a traceback, nothing written
    instances, out = tmp_path / "instances", tmp_path / "milp.json"
    instances.mkdir()
    for name in ("chain4.json", "diamond-cpu.json"):
        shutil.copy(ROOT / "instances" / "tiny" / name, instances / name)
    done = run("milp.py", "--instances", str(instances), "--max-ideals", "2", "--backends", "cp-sat",
               "--contiguity", "stages", "--time-limit", "10", "--json", str(out))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[0] == (
        "note: instances/diamond-cpu: no DP reference, its rows are refused: more than 2 ideals in the contracted "
        "graph (4 supernodes); the DP over ideals would need too much time and memory. Raise the limit --max-ideals "
        "(time and memory grow with it, and memory with the nodes whose outputs cross each ideal), or coarsen the "
        "graph by giving nodes that belong together one colour class; method='milp' (or 'auto', which takes it "
        "where the DP refuses) has no such limit")
    rows = json.loads(out.read_text())["rows"]
    assert [(r["instance"], r["status"], r["objective"]) for r in rows] == [
        ("instances/chain4", "optimal", 7.5), ("instances/diamond-cpu", "refused", None)]
    assert rows[1]["message"].startswith("more than 2 ideals")
    # measured, then refused again: the refused row replaces no measured row of the same case
    for max_ideals in ("100", "2"):
        done = run("milp.py", "--instances", str(instances), "--max-ideals", max_ideals, "--backends", "cp-sat",
                   "--contiguity", "stages", "--time-limit", "10", "--json", str(out), "--match", "diamond")
        assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["instance"], r["status"]) for r in rows] == [("instances/chain4", "optimal"),
                                                             ("instances/diamond-cpu", "optimal")]


def test_piper_first_run_stops_at_a_failed_run(tmp_path):
    # a run that exited nonzero was timed as a solve, its table ratio printed, and the script exited 0
    (tmp_path / "gnmt.json").write_text('{"bad": 1}')
    done = run("piper_first_run.py", "--shared", str(tmp_path), "--out", str(tmp_path / "out"), "--repeat", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == (
        f"error: the cold run of the working tree on gnmt (10 devices) exited with status 2: error: "
        f"{tmp_path / 'gnmt.json'}: instance: unknown field 'bad' (the fields are nodes, edges, maxSizePerFPGA, "
        "maxFPGAs, maxCPUs, deviceTypes, about)")
    assert done.stdout == "" and not (tmp_path / "out").exists()


def test_piper_first_run_refuses_a_failed_baseline_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "gnmt.json").write_text("{}")
    monkeypatch.setattr(piper_first_run, "export", lambda commit, into: into)

    def one_run(path, devices, memory, cache, pythonpath):
        failed = pythonpath is not None
        return {"wall_s": 0.1, "cpu_s": 0.1, "compiled": False, "exit": 1 if failed else 0, "value_line": "",
                "package": "", "last_error_line": "ImportError: no kernels" if failed else "", "traceback": False}

    monkeypatch.setattr(piper_first_run, "one_run", one_run)
    assert piper_first_run.main(["--shared", str(tmp_path), "--out", str(tmp_path / "out"), "--repeat", "1",
                                 "--baseline", "HEAD"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == ("error: the cold run of the baseline HEAD on gnmt (10 devices) exited "
                                             "with status 1: ImportError: no kernels")
    assert captured.out == "" and not (tmp_path / "out").exists()


def test_piper_first_run_times_a_solve_that_finds_no_plan(tmp_path, monkeypatch, capsys):
    # solve's exit status 1 with its status line (bert32a100 at 1 GiB is infeasible on 8-64 devices) stopped the
    # benchmark as a failed run; one that died of a traceback still does
    (tmp_path / "gnmt.json").write_text("{}")

    def one_run(path, devices, memory, cache, pythonpath, traceback=False):
        return {"wall_s": 0.1, "cpu_s": 0.1, "compiled": False, "exit": 1, "package": "", "traceback": traceback,
                "value_line": "status infeasible: no plan on 10 devices", "last_error_line": ""}

    monkeypatch.setattr(piper_first_run, "one_run", one_run)
    out = tmp_path / "out"
    assert piper_first_run.main(["--shared", str(tmp_path), "--out", str(out), "--repeat", "1"]) == 0
    written = json.loads((out / "piper_first_run.json").read_text())
    assert [(m["instance"], m["exits"]) for m in written["medians"]] == [("gnmt", [1])] and "machine" in written
    assert "gnmt" in capsys.readouterr().out
    monkeypatch.setattr(piper_first_run, "one_run", functools.partial(one_run, traceback=True))
    assert piper_first_run.main(["--shared", str(tmp_path), "--out", str(out), "--repeat", "1"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "error: the cold run of the working tree on gnmt (10 devices) " \
                                                        "exited with status 1"


def test_piper_first_run_of_one_instance_keeps_the_medians_and_runs_of_the_others(tmp_path, monkeypatch, capsys):
    """A run of some instances (``--shared`` holding one) wrote the results file whole, with its rows only."""
    (tmp_path / "gnmt.json").write_text("{}")
    monkeypatch.setattr(piper_first_run, "one_run", lambda path, devices, memory, cache, pythonpath: {
        "wall_s": 0.5, "cpu_s": 0.25, "compiled": False, "exit": 0, "package": "", "traceback": False,
        "value_line": "largest 1", "last_error_line": ""})
    out = tmp_path / "out"
    out.mkdir()
    setting = {"devices": 10, "memory": None, "version": "new"}
    (out / "piper_first_run.json").write_text(json.dumps({"machine": "there", "medians": [
        {"instance": "resnet", **setting}, {"instance": "gnmt", **setting, "stale": 1}], "runs": [
        {"instance": "resnet", **setting, "run": "cold"}, {"instance": "gnmt", **setting, "run": "cold", "stale": 1},
        {"instance": "gnmt", **setting, "version": "baseline abc", "run": "cold", "stale": 1}]}))
    assert piper_first_run.main(["--shared", str(tmp_path), "--out", str(out), "--repeat", "1"]) == 0
    written = json.loads((out / "piper_first_run.json").read_text())
    assert [(m["instance"], "stale" in m, m["run"] == {"machine": "there"}) for m in written["medians"]] == [
        ("resnet", False, True), ("gnmt", False, False)]
    assert [(r["instance"], r["run"], "stale" in r) for r in written["runs"]] == [
        ("resnet", "cold", False), ("gnmt", "cold", False), ("gnmt", "warm", False)]
    assert capsys.readouterr().out.splitlines()[-1] == (f"wrote {out / 'piper_first_run.json'}: medians: 1 of this "
                                                        "run's rows, 1 of the file's kept, 1 replaced")


def test_reading_refuses_a_tree_whose_children_fail(tmp_path, capsys):
    # exit 1 counted as success (solve's "no plan"), so a tree failing on import was timed; the steps then
    # raised CalledProcessError
    broken = tmp_path / "broken"
    (broken / "placement").mkdir(parents=True)
    (broken / "placement" / "__init__.py").write_text('raise ImportError("broken on purpose")\n')
    chain = str(ROOT / "instances" / "tiny" / "chain4.json")
    with pytest.raises(reading.ChildFailed) as info:
        reading.run_process([sys.executable, "-m", "placement", "info", chain], broken)
    assert str(info.value) == (f"placement info in the tree {broken} exited with status 1: "
                               "ImportError: broken on purpose")
    with pytest.raises(reading.ChildFailed) as info:
        reading.steps(ROOT / "instances" / "tiny" / "chain4.json", broken)
    assert str(info.value) == (f"the steps of placement info in the tree {broken} exited with status 1: "
                               "ImportError: broken on purpose")
    # solve's own exit status 1, no plan (here: infeasible), is a run like any other
    assert reading.run_process([sys.executable, "-m", "placement", "solve", chain, "--memory", "1", "--quiet"], ROOT)
    with pytest.raises(reading.ChildFailed):
        reading.run_process([sys.executable, "-m", "placement", "solve", chain, "--quiet"], broken)


def test_reading_says_a_failed_child_in_one_line(tmp_path, monkeypatch, capsys):
    def fail(cmd: list[str], tree: Path) -> dict:
        raise reading.failed("placement info", tree, 1, "Traceback ...\nImportError: broken on purpose\n")

    monkeypatch.setattr(reading, "run_process", fail)
    (tmp_path / "placement").mkdir()
    (tmp_path / "placement" / "__init__.py").write_text("")
    out = tmp_path / "reading.json"
    assert reading.cli(["--repeat", "1", "--baseline", str(tmp_path), "--json", str(out)]) == 1
    assert capsys.readouterr().err == (f"error: placement info in the tree {ROOT} exited with status 1: "
                                       "ImportError: broken on purpose\n")
    assert not out.exists()


def test_hypar_benchmark_compares_only_two_types_with_the_paper():
    # With --types 3 it set AccPar's search (VGG-A, 16 accelerators: 170,319,168 elements, 1.3626 GB)
    # against HyPar's published 1.47 GB and printed a difference of -7.31%.
    def row(types: list[str], hypar_elements: int) -> dict:
        return {"network": "VGG-A", "accelerators": 16, "batch": 256, "types": types,
                "planners": {"all-dp": {"elements": 1_992_770_880, "bytes": 15_942_167_040},
                             "hypar": {"elements": hypar_elements, "bytes": 8 * hypar_elements}}}

    assert hypar_benchmark.paper_rows([row(["dp", "mp", "mp-out"], 170_319_168)]) == []
    compared = hypar_benchmark.paper_rows([row(["dp", "mp"], 183_778_624)])
    assert [(r["planner"], r["bytes"]) for r in compared] == [("all-dp", 15_942_167_040), ("hypar", 1_470_228_992)]


def test_layerpipe_writes_its_json_and_plot(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    pytest.importorskip("ortools")
    monkeypatch.setattr(layerpipe, "GRAPHS", {"pair": ROOT / "instances" / "tiny" / "training-pair.json"})
    out = tmp_path / "lp.json"
    assert layerpipe.main(["--accelerators", "2", "--variants", "any", "--time-limit", "5", "--microbatches", "8",
                           "--json", str(out)]) == 0
    assert [row["variant"] for row in json.loads(out.read_text())["rows"]] == ["home", "any"]
    assert out.with_suffix(".png").stat().st_size > 0
    capsys.readouterr()


def test_simulate_scale_alone_keeps_the_engine_and_stream_rows(tmp_path, monkeypatch, capsys):
    out = tmp_path / "simulate.json"
    out.write_text(json.dumps({"machine": {"cpus": 2}, "engines": [{"graph": "g", "simulate_s": 0.1}],
                               "streams": [{"instance": "i", "rel_diff": 0.0}], "scale": []}))
    # part 3 reads its instance under --instances (it read ../shared's whatever folder was given)
    assert simulate_benchmark.main(["--only-scale", "--json", str(out), "--instances", str(tmp_path)]) == 0
    assert f"no instance at {tmp_path / 'OperatorGraphs' / 'bert_L-12_training.json'}" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["engines"] == [{"graph": "g", "simulate_s": 0.1, "run": {"machine": {"cpus": 2}}}]
    assert document["streams"] == [{"instance": "i", "rel_diff": 0.0, "run": {"machine": {"cpus": 2}}}]
    # a folder that is not there is refused, where it measured ../shared's instance and exited 0
    assert simulate_benchmark.main(["--only-scale", "--json", str(out), "--instances", str(tmp_path / "no")]) == 2
    assert capsys.readouterr().err == f"error: --instances {tmp_path / 'no'}: no such folder\n"


def test_simulate_notes_only_the_streams_it_measured(tmp_path, monkeypatch, capsys):
    # rows kept from the file (no instances here) were noted as not settled within this run's micro-batches,
    # and one without a period raised KeyError after the file was written
    out = tmp_path / "simulate.json"
    out.write_text(json.dumps({"machine": {"cpus": 2}, "engines": [], "scale": [],
                               "streams": [{"instance": "i", "rel_diff": 0.0}, {"instance": "j", "period": None}]}))
    monkeypatch.setattr(simulate_benchmark, "engine_rows", lambda microbatches, repeat: [])
    (tmp_path / "none").mkdir()
    assert simulate_benchmark.main(["--json", str(out), "--instances", str(tmp_path / "none"),
                                    "--microbatches", "5"]) == 0
    assert "not settled" not in capsys.readouterr().err
    assert [r["instance"] for r in json.loads(out.read_text())["streams"]] == ["i", "j"]


def test_simulate_streams_of_some_instances_keep_the_rows_of_the_others(tmp_path, monkeypatch, capsys):
    """A folder of some instances replaced the file's stream rows whole with its own."""
    out = tmp_path / "simulate.json"
    stale = {"instance": "tiny/chain4", "stale": 1}
    out.write_text(json.dumps({"machine": {"cpus": 2}, "engines": [], "scale": [],
                               "streams": [{"instance": "i", "rel_diff": 0.0}, stale]}))
    monkeypatch.setattr(simulate_benchmark, "engine_rows", lambda microbatches, repeat: [])
    (tmp_path / "given" / "tiny").mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", tmp_path / "given" / "tiny" / "chain4.json")
    given = str(tmp_path / "given")
    assert simulate_benchmark.main(["--json", str(out), "--instances", given, "--microbatches", "50"]) == 0
    streams = json.loads(out.read_text())["streams"]
    assert [(r["instance"], "stale" in r, r["run"]["machine"] == {"cpus": 2}) for r in streams] == [
        ("i", False, True), ("tiny/chain4", False, False)]
    assert streams[1]["max_load"] == 7.5   # CHAIN4's optimum
    assert f"wrote {out}: streams: 1 of this run's rows, 1 of the file's kept, 1 replaced" in capsys.readouterr().out


def test_simulate_checks_say_which_row_failed_what():
    # a simulate call of 2 s or more made the script exit 1 without a word, at 2 s whatever --microbatches
    def engine(microbatches: int, seconds: float) -> dict:
        return {"graph": "bert-base-training", "schedule": "gpipe", "comm": "link", "microbatches": microbatches,
                "simulate_s": seconds}

    stream = {"instance": "LayerGraphs/x", "time_per_sample": 1.01, "max_load": 1.0, "rel_diff": 0.01, "period": 1}
    # a run that has not settled (no period: a few micro-batches) measures no steady state: not checked
    assert simulate_benchmark.failures([], [{**stream, "period": None}]) == []
    assert simulate_benchmark.failures([engine(1000, 1.9), engine(10_000, 19.0)], [{**stream, "rel_diff": 1e-4}]) == []
    assert simulate_benchmark.failures([engine(1000, 2.5), engine(10_000, 25.0)], [stream]) == [
        "engines: bert-base-training gpipe link: simulate took 2.500 s for 1,000 micro-batches, not under 2 s "
        "(2 s per 1,000)",
        "engines: bert-base-training gpipe link: simulate took 25.000 s for 10,000 micro-batches, not under 20 s "
        "(2 s per 1,000)",
        "streams: LayerGraphs/x: time per sample 1.010000 differs from the max load 1.000000 by 1.0e-02 (relative), "
        "more than 0.001"]


BAD_RESULTS = [
    ('{"a": 1}', "not a list of plan records (objects, as benchmarks/piper.py writes)"),
    ("[1, 2]", "not a list of plan records (objects, as benchmarks/piper.py writes)"),
    ("nope", "not JSON: Expecting value: line 1 column 1 (char 0)"),
    ('[{"stages": [{}]}]', "record 0 of those with stages has no instance name, devices or list of stages"),
    (None, f"cannot read it: {os.strerror(errno.ENOENT)}"),
]


@pytest.mark.parametrize(("text", "why"), BAD_RESULTS, ids=[why.split(":")[0] for _, why in BAD_RESULTS])
def test_piper_simulate_refuses_results_that_hold_no_plans(tmp_path, text, why):
    # a file of something else raised AttributeError; a path that does not exist solved every setting instead
    results, out = tmp_path / "piper.json", tmp_path / "simulate.json"
    if text is not None:
        results.write_text(text)
    done = run("piper_simulate.py", "--results", str(results), "--json", str(out), timeout=20)
    assert refused(done) == f"error: --results {results}: {why}"
    assert done.stderr.count("\n") == 1 and not out.exists()


def test_hypar_without_the_ledger_keeps_the_ledger_rows(tmp_path, capsys):
    out = tmp_path / "hypar.json"
    out.write_text(json.dumps({"machine": {"cpus": 2}, "planners": [], "paper": [], "ledger": [{"instance": "i"}]}))
    assert hypar_benchmark.main(["--max-accelerators", "2", "--repeat", "1", "--no-ledger", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["ledger"] == [{"instance": "i", "run": {"machine": {"cpus": 2}}}] and document["planners"]
    capsys.readouterr()


def test_hypar_to_fewer_accelerators_keeps_the_rows_of_more(tmp_path, capsys):
    """A run to 2 accelerators replaces the file's rows of 2 and keeps those of 16 (the paper row's)."""
    out = tmp_path / "hypar.json"
    assert hypar_benchmark.main(["--max-accelerators", "16", "--repeat", "1", "--no-ledger", "--json", str(out)]) == 0
    before = json.loads(out.read_text())
    assert hypar_benchmark.main(["--max-accelerators", "2", "--repeat", "1", "--no-ledger", "--json", str(out)]) == 0
    after = json.loads(out.read_text())
    counts = sorted({row["accelerators"] for row in after["planners"]})
    assert counts == [2, 4, 8, 16] and len(after["planners"]) == len(before["planners"])
    assert [r["planner"] for r in after["paper"]] == [r["planner"] for r in before["paper"]] and after["paper"]
    capsys.readouterr()


def test_layerpipe_of_one_graph_keeps_the_rows_of_another(tmp_path, capsys):
    """Two runs of one graph each (the bundled imported ones, 2 accelerators, one variant and its baseline):
    the file holds both graphs' rows, the second run's replacing nothing of the first."""
    out, picture = tmp_path / "layerpipe.json", tmp_path / "layerpipe.png"
    for graph in ("gpt2-imported", "bert-base-imported"):
        assert layerpipe.main(["--only", graph, "--accelerators", "2", "--variants", "any", "--time-limit", "1",
                               "--microbatches", "8", "--json", str(out), "--plot", str(picture)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["instance"], r["accelerators"], r["variant"]) for r in rows] == [
        (graph, 2, variant) for graph in ("gpt2-imported", "bert-base-imported") for variant in ("home", "any")]
    capsys.readouterr()


# ------------------------------------------------------------------------------------------------
# folders given relative to the caller's directory, though the timed children run from the repository root


def test_dp_throughput_reads_a_relative_folder_from_the_callers_directory(tmp_path, monkeypatch, capsys):
    # the children were handed the relative path and, started from the repository root, found no instance
    (tmp_path / "inputs" / "LayerGraphs").mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "chain4.json", tmp_path / "inputs" / "LayerGraphs")
    monkeypatch.setattr(dp_throughput, "shape_rows", lambda folder, repeat: [])
    monkeypatch.chdir(tmp_path)
    assert dp_throughput.main(["--instances", "inputs", "--repeat", "1", "--json", "dp.json"]) == 0
    (row,) = json.loads((tmp_path / "dp.json").read_text())["rows"]
    assert (row["instance"], row["status"], row["max_load"]) == ("LayerGraphs/chain4", "optimal", 7.5)
    capsys.readouterr()


def test_simulate_scale_reads_a_relative_folder_from_the_callers_directory(tmp_path, monkeypatch, capsys):
    # a training graph of two stages stands in for BERT-L-12: 2 stages x (F + B) tasks per micro-batch
    (tmp_path / "inputs" / "OperatorGraphs").mkdir(parents=True)
    shutil.copy(ROOT / "instances" / "tiny" / "training-pair.json",
                tmp_path / "inputs" / "OperatorGraphs" / "bert_L-12_training.json")
    monkeypatch.chdir(tmp_path)
    assert simulate_benchmark.main(["--only-scale", "--json", "simulate.json", "--instances", "inputs",
                                    "--scale-microbatches", "100", "--baseline-microbatches", "10",
                                    "--repeat", "1"]) == 0
    scale = json.loads((tmp_path / "simulate.json").read_text())["scale"]
    assert [(r["run"], r["microbatches"], r["tasks"]) for r in scale] == [
        ("streamed figures", 100, 400), ("event engine + task table", 10, 40)]
    capsys.readouterr()


def test_piper_first_run_reads_a_relative_folder_from_the_callers_directory(tmp_path):
    resnet = ROOT.parent / "shared" / "piper" / "resnet.json"
    if not resnet.is_file():
        pytest.skip(f"the Piper instances are not at {resnet.parent}")
    (tmp_path / "given").mkdir()
    shutil.copy(resnet, tmp_path / "given")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(BENCHMARKS / "piper_first_run.py"), "--shared", "given",
                           "--out", "out", "--repeat", "1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (median,) = json.loads((tmp_path / "out" / "piper_first_run.json").read_text())["medians"]
    assert (median["instance"], median["devices"], median["exits"]) == ("resnet", 10, [0])


# ------------------------------------------------------------------------------------------------
# an optional extra that is not installed: one line saying what to install, or the part it serves skipped


def without(tmp_path: Path, *packages: str) -> dict:
    """The environment of a run whose Python cannot import ``packages``, as where their extras are not installed."""
    stubs = tmp_path / "not-installed"
    for name in packages:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {name!r}'!r}, name={name!r})\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(stubs), str(ROOT)]))


NEEDS_MILP = [
    ("layerpipe.py", ["--only", "gpt2-imported", "--accelerators", "2", "--time-limit", "1"], "--json", False),
    ("backward_split.py", ["--match", "bert24", "--accelerators", "2", "--time-limit", "1"], "--out", True),
    ("milp.py", ["--match", "bert24_inference", "--time-limit", "1"], "--json", True),
    # auto solves the latency inputs with the MILP
    ("time_limits.py", ["--match", "bert24_inference", "--methods", "auto", "--time-limit", "1"], "--out", True),
]


@pytest.mark.parametrize(("script", "args", "option", "published"), NEEDS_MILP, ids=[s for s, *_ in NEEDS_MILP])
def test_a_run_that_needs_the_milp_says_what_to_install(tmp_path, script, args, option, published):
    # layerpipe.py and backward_split.py stopped with the library's traceback; milp.py ran no backend, printed an
    # empty table, wrote it and exited 0; time_limits.py ran every run, took the MILP's as failed runs and wrote them
    # over the file's rows
    if published:
        needs_published()
    out = tmp_path / "x.json"
    done = run(script, *args, option, str(out), env=without(tmp_path, "ortools", "pulp"))
    assert refused(done).startswith("error: MILP backend 'cp-sat' cannot run here: OR-Tools ")
    assert refused(done).endswith("the MILP backends come with pip install 'placement[milp]'")
    assert not out.exists() and done.stdout == ""


def test_layerpipe_without_matplotlib_writes_its_json_and_says_the_plot_is_skipped(tmp_path, monkeypatch, capsys):
    # it wrote the JSON, then stopped with a traceback where the plot imported matplotlib
    pytest.importorskip("ortools")
    monkeypatch.setattr(layerpipe, "GRAPHS", {"pair": ROOT / "instances" / "tiny" / "training-pair.json"})
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib raises ImportError
    out = tmp_path / "lp.json"
    assert layerpipe.main(["--accelerators", "2", "--variants", "any", "--time-limit", "5", "--microbatches", "8",
                           "--json", str(out)]) == 0
    assert [row["variant"] for row in json.loads(out.read_text())["rows"]] == ["home", "any"]
    assert not out.with_suffix(".png").exists()
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "no plot: matplotlib is not installed (pip install 'placement[plot]')"


@pytest.mark.parametrize("module", ["torch", "onnxscript"])
def test_torch_costs_without_its_extras_says_what_to_install(tmp_path, module):
    # it stopped with a traceback: ModuleNotFoundError for torch, pytest's Skipped for onnxscript (the models
    # come from test modules that skip without it)
    out = tmp_path / "x.json"
    done = run("torch_costs.py", "--json", str(out), env=without(tmp_path, module))
    assert refused(done) == (f"error: {module} cannot be imported here; this benchmark needs torch, onnx, "
                             "onnxscript and pytest: pip install 'placement[torch,onnx,test]'")
    assert not out.exists() and done.stdout == ""


# ------------------------------------------------------------------------------------------------
# instance folders given by --instances: every file is read before any work


def tiny_folder(base: Path, *names: str) -> Path:
    """A folder of instances, ``base/tiny``, holding copies of the bundled tiny instances ``names``."""
    (base / "tiny").mkdir(parents=True)
    for name in names:
        shutil.copy(ROOT / "instances" / "tiny" / f"{name}.json", base / "tiny")
    return base


def test_hypar_ledger_of_an_instance_without_tensor_sizes(tmp_path, capsys):
    # no edge of unmirrored-backward carries a tensor size, so the time per byte is unknown: its row stopped
    # the benchmark with a TypeError (None formatted as a number)
    folder = tiny_folder(tmp_path, "unmirrored-backward")
    out = tmp_path / "hypar.json"
    assert hypar_benchmark.main(["--max-accelerators", "2", "--repeat", "1", "--instances", str(folder),
                                 "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())["ledger"]
    assert (row["instance"], row["time_per_byte"], row["sized"], row["agrees"]) == (
        "tiny/unmirrored-backward", None, 0, True)
    assert capsys.readouterr().out.splitlines()[-3].split()[:8] == [
        "tiny/unmirrored-backward", "2", "-", "0/0", "0", "0", "0", "-"]


def test_hypar_ledger_of_some_instances_keeps_the_rows_of_the_others(tmp_path, capsys):
    """A folder of some instances replaced the file's ledger rows whole with its own."""
    folder = tiny_folder(tmp_path / "inputs", "unmirrored-backward")
    out = tmp_path / "hypar.json"
    out.write_text(json.dumps({"machine": {"cpus": 2}, "planners": [], "paper": [], "ledger": [
        {"instance": "i"}, {"instance": "tiny/unmirrored-backward", "stale": 1}]}))
    assert hypar_benchmark.main(["--max-accelerators", "2", "--repeat", "1", "--instances", str(folder),
                                 "--json", str(out)]) == 0
    ledger = json.loads(out.read_text())["ledger"]
    assert [(r["instance"], "stale" in r, r["run"] == {"machine": {"cpus": 2}}, r.get("sized")) for r in ledger] == [
        ("i", False, True, None), ("tiny/unmirrored-backward", False, False, 0)]
    assert capsys.readouterr().out.splitlines()[-1] == (f"wrote {out}: ledger: 1 of this run's rows, 1 of the file's "
                                                        "kept, 1 replaced")


NOT_AN_INSTANCE = [
    ("hypar.py", ["--max-accelerators", "2", "--repeat", "1"], "--json"),
    ("simulate.py", ["--microbatches", "10", "--repeat", "1"], "--json"),
    ("milp.py", ["--time-limit", "5", "--backends", "cp-sat", "--contiguity", "stages"], "--json"),
    ("milp.py", ["--latency", "--time-limit", "5", "--backends", "cp-sat", "--calls", "1"], "--json"),
]


@pytest.mark.parametrize(("script", "args", "option"), NOT_AN_INSTANCE,
                         ids=[f"{c[0]} {c[1][0]}" for c in NOT_AN_INSTANCE])
def test_a_file_under_instances_that_is_no_instance_is_refused_before_any_work(tmp_path, script, args, option):
    # it stopped with the library's InvalidInstanceError and a traceback when the run reached the file, after
    # the work before it
    folder = tiny_folder(tmp_path, "chain4")
    (folder / "tiny" / "notes.json").write_text('{"nodes": 3}')
    out = tmp_path / "x.json"
    done = run(script, *args, "--instances", str(folder), option, str(out))
    assert refused(done) == f"error: {folder / 'tiny' / 'notes.json'}: instance: missing field 'edges'"
    assert not out.exists() and done.stdout == ""


def test_milp_latency_leaves_out_the_training_graphs_of_a_folder(tmp_path):
    # the first training graph stopped the run with InvalidParameterError and a traceback ("'latency' is for
    # inference graphs"), as under --instances ../shared/tarnawski/throughput-inputs
    pytest.importorskip("ortools")
    folder, out = tiny_folder(tmp_path, "chain4", "training-pair"), tmp_path / "milp.json"
    done = run("milp.py", "--latency", "--calls", "1", "--backends", "cp-sat", "--time-limit", "5",
               "--instances", str(folder), "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == ("note: 1 training graph(s) left out, the latency objective is for "
                                           "inference graphs: tiny/training-pair")
    assert [(r["instance"], r["class"]) for r in json.loads(out.read_text())["rows"]] == [("tiny/chain4", "q=1")]
    # a folder of training graphs alone measures nothing
    training = tiny_folder(tmp_path / "training", "training-pair")
    done = run("milp.py", "--latency", "--instances", str(training), "--json", str(out))
    assert refused(done) == f"error: no inference graph under {training}: the latency objective is for inference graphs"



PIPER_FIELDS = ("missing field 'maxDevices' (required: maxDevices, maxMemoryPerDevice, bandwidth, mbsInBatch, "
                "nodes, edges)")
NOT_A_PIPER_INSTANCE = [("piper.py", ["--quick"], "--out", "out", PIPER_FIELDS),
                        ("piper.py", ["--types-only"], "--out", "out", PIPER_FIELDS),
                        ("piper_interleaved.py", [], "--json", "x.json", "missing field 'edges'")]   # placement.load's


@pytest.mark.parametrize(("script", "args", "option", "output", "why"), NOT_A_PIPER_INSTANCE,
                         ids=[" ".join([c[0], *c[1]]) for c in NOT_A_PIPER_INSTANCE])
def test_a_piper_file_that_is_no_instance_is_refused_before_any_work(tmp_path, script, args, option, output, why):
    # it stopped with the library's InvalidInstanceError and a traceback
    shared = tmp_path / "piper"
    shared.mkdir()
    (shared / "bert32a100.json").write_text('{"nodes": []}')
    done = run(script, *args, "--shared", str(shared), option, str(tmp_path / output))
    assert refused(done) == f"error: {shared / 'bert32a100.json'}: instance: {why}"
    assert not (tmp_path / output).exists() and done.stdout == ""


def infeasible_folder(base: Path) -> Path:
    """A folder, ``base/tiny``, holding chain4 on two accelerators of 1.5 bytes and no CPU: each node fits one,
    but no plan places the four."""
    data = json.loads((ROOT / "instances" / "tiny" / "chain4.json").read_text())
    (base / "tiny").mkdir(parents=True)
    (base / "tiny" / "crowded.json").write_text(json.dumps({**data, "maxSizePerFPGA": 1.5, "maxCPUs": 0}))
    return base


def test_milp_benchmark_runs_an_instance_the_dp_finds_no_plan_for(tmp_path):
    # the DP's result without a plan was given as the warm start: InvalidParameterError and a traceback
    pytest.importorskip("ortools")
    folder, out = infeasible_folder(tmp_path), tmp_path / "milp.json"
    done = run("milp.py", "--instances", str(folder), "--backends", "cp-sat", "--contiguity", "stages", "none",
               "--time-limit", "5", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [(r["class"], r["status"], r["objective"], r["reference"]) for r in rows] == [
        ("stages", "infeasible", None, None), ("none", "infeasible", None, None)]


def test_hypar_ledger_and_simulate_streams_name_an_instance_without_a_plan(tmp_path, capsys, monkeypatch):
    # the DP's missing plan went to the ledger and to the simulator: a traceback each
    folder = infeasible_folder(tmp_path / "inputs")
    assert hypar_benchmark.main(["--max-accelerators", "2", "--repeat", "1", "--instances", str(folder),
                                 "--json", str(tmp_path / "hypar.json")]) == 0
    assert json.loads((tmp_path / "hypar.json").read_text())["ledger"] == []
    assert "tiny/crowded: no plan (infeasible): no ledger" in capsys.readouterr().out.splitlines()
    # no engine rows: their timing checks, which a loaded machine may fail, would set the exit status
    monkeypatch.setattr(simulate_benchmark, "engine_rows", lambda microbatches, repeat: [])
    assert simulate_benchmark.main(["--microbatches", "5", "--repeat", "1", "--instances", str(folder),
                                    "--scale-microbatches", "10", "--baseline-microbatches", "10",
                                    "--json", str(tmp_path / "simulate.json")]) == 0
    assert json.loads((tmp_path / "simulate.json").read_text())["streams"] == []
    assert "tiny/crowded: no plan (infeasible): nothing to stream" in capsys.readouterr().out.splitlines()


PIPER_STAGE = {"nodes": [0], "d": 8, "t": 1, "tmpcs": {}}
BAD_PLAN_RECORDS = [
    ([], "no record with a plan (stages): nothing to replay"),
    ([{"instance": "bert32a100", "devices": 8, "status": "infeasible"}],
     "no record with a plan (stages): nothing to replay"),
    ([{"instance": "bert32a100", "devices": 8, "stages": [PIPER_STAGE]}],
     "record 0 of those with stages: stage 0: tmpcs must name one TMPC for each of its nodes and no other"),
    ([{"instance": "bert", "devices": 8, "stages": [{**PIPER_STAGE, "tmpcs": {"0": "vanilla"}}]}],
     f"record 0 of those with stages: {ROOT.parent / 'shared' / 'piper' / 'bert.json'}: no such file"),
]


@pytest.mark.parametrize(("records", "why"), BAD_PLAN_RECORDS,
                         ids=["empty", "no plan", "plan refused", "unknown instance"])
def test_piper_simulate_refuses_results_it_cannot_replay(tmp_path, records, why):
    # no plan at all ran nothing and exited 0; a plan the library refuses, or an instance name without a file,
    # stopped it with a traceback
    if not (ROOT.parent / "shared" / "piper").is_dir():
        pytest.skip("the Piper instances are not in ../shared/piper")
    results, out = tmp_path / "piper.json", tmp_path / "x.json"
    results.write_text(json.dumps(records))
    done = run("piper_simulate.py", "--results", str(results), "--no-search", "--repeat", "1", "--json", str(out))
    assert refused(done) == f"error: --results {results}: {why}"
    assert not out.exists() and done.stdout == ""


def test_piper_simulate_replay_of_some_plans_keeps_the_rows_of_the_others(tmp_path):
    """A replay of some plans (``--results`` holding one, ``--no-search``) wrote the file whole: the runs of
    the other plans and every search row were lost."""
    if not (ROOT.parent / "shared" / "piper").is_dir():
        pytest.skip("the Piper instances are not in ../shared/piper")
    record = next(r for r in json.loads((BENCHMARKS / "results" / "piper.json").read_text())
                  if (r["instance"], r["devices"]) == ("bert32a100", 1))
    results, out = tmp_path / "piper.json", tmp_path / "simulate.json"
    results.write_text(json.dumps([record]))
    stale = {"instance": "bert32a100", "devices": 1, "memory_bound": record["memory"], "schedule": "gpipe"}
    other = {**stale, "devices": 2}
    search = {**stale, "status": "optimal"}
    out.write_text(json.dumps({"machine": "there", "source": "earlier", "runs": [stale, other], "search": [search]}))
    done = run("piper_simulate.py", "--results", str(results), "--no-search", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(out.read_text())
    assert [(r["devices"], r["schedule"], r["run"].get("source")) for r in written["runs"]] == [
        (2, "gpipe", "earlier"), (1, "piper", str(results)), (1, "1f1b", str(results)), (1, "gpipe", str(results))]
    assert written["search"] == [{**search, "run": {"machine": "there"}}]
    assert done.stdout.splitlines()[-1] == (f"wrote {out}: runs: 3 of this run's rows, 1 of the file's kept, "
                                            "1 replaced; search: the file's 1 kept (not run)")


def test_piper_simulate_solves_records_of_the_settings_piper_json_names(monkeypatch, capsys):
    """Plans solved here name their setting's devices and memory as piper.py's records do (the file's memory,
    where they named none), so that their rows replace that file's plans' rows of the same setting."""
    if not (ROOT.parent / "shared" / "piper").is_dir():
        pytest.skip("the Piper instances are not in ../shared/piper")
    monkeypatch.setattr(piper_simulate, "settings", lambda: [("bert32a100", None, None), ("bert32a100", 8, 8 * 2**30)])
    stored = {(r["instance"], r["devices"], r["memory"]): r["stages"]
              for r in json.loads((BENCHMARKS / "results" / "piper.json").read_text())}
    records = piper_simulate.solved_records()
    assert [(r["instance"], r["devices"], r["memory"]) for r in records] == [
        ("bert32a100", 10, 80e9), ("bert32a100", 8, 8 * 2**30)]
    assert all((r["instance"], r["devices"], r["memory"]) in stored for r in records)
    capsys.readouterr()


def test_milp_gpipe_objective_without_a_training_graph_is_refused(tmp_path):
    # it ran nothing, wrote the file and exited 0, as if it had measured something
    folder, out = tiny_folder(tmp_path, "chain4", "diamond-cpu"), tmp_path / "milp.json"
    done = run("milp.py", "--objectives", "throughput-gpipe", "--instances", str(folder), "--json", str(out))
    assert refused(done) == (f"error: no run: throughput-gpipe is for training graphs, and no instance under {folder} "
                             "is one")
    done = run("milp.py", "--objectives", "throughput-gpipe", "--instances", str(folder), "--match", "chain",
               "--json", str(out))
    assert refused(done) == (f"error: no run: throughput-gpipe is for training graphs, and no instance under {folder} "
                             "that matches --match 'chain' is one")
    assert not out.exists() and done.stdout == ""
