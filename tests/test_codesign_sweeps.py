"""Co-design baselines, sweeps and the generated benchmark models.

* the baselines never beat the proven optimum (their designs are grid designs within the
  budgets, placed by the same DP), and agree with it where they cover the whole space;
* a sweep resumes: a partial results file (its last record cut short) makes only the missing
  configurations run, and the records are those of an uninterrupted run; a sweep killed mid-run
  and started again ends with every configuration exactly once;
* the generated models match the FLOPs of the torch-imported instances and the published
  parameter counts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import placement
from placement.codesign import baselines, sweep
from placement.codesign.exact import solve_exact
from placement.codesign.grid import load_grid
from placement.codesign.result import TIE
from placement.codesign.workload import load_workload
from placement.errors import InvalidInstanceError, InvalidParameterError, LimitExceededError
from placement.zoo import codesign_models

ROOT = Path(__file__).resolve().parents[1]
MLP = str(ROOT / "instances" / "models" / "mlp-training.json")
TINY = str(ROOT / "instances" / "grids" / "tiny.json")

needs_dask = pytest.mark.skipif(importlib.util.find_spec("dask") is None,
                                reason="Dask is not installed (pip install 'placement[sweep]')")


@pytest.fixture(scope="module")
def mlp():
    return load_workload(MLP)


@pytest.fixture(scope="module")
def tiny():
    return load_grid(TINY)


@pytest.mark.parametrize("objective", ["throughput", "perf-per-watt"])
@pytest.mark.parametrize("homogeneous", [False, True])
@pytest.mark.parametrize("chips", [1, 2, 3])
@pytest.mark.parametrize("budget", [(606.68, 300.0), (350.0, 150.0)])
def test_baselines_never_beat_the_optimum(mlp, tiny, chips, homogeneous, objective, budget):
    exact = solve_exact(mlp, tiny, chips, *budget, homogeneous=homogeneous, objective=objective)
    assert exact.status == "optimal"
    runs = [baselines.wham(mlp, chips, *budget, grid=tiny, objective=objective, homogeneous=homogeneous),
            baselines.random_search(mlp, chips, *budget, grid=tiny, objective=objective, homogeneous=homogeneous,
                                    budget=8, seed=3)]
    if budget[0] >= 354:  # the TPU-like design of the tiny grid takes 353.952 mm²
        runs.append(baselines.fixed(mlp, chips, *budget, grid=tiny, objective=objective))
    for found in runs:
        # never above the optimum, up to the tie (of plans of equal value the exact method keeps the fewest watts)
        assert 0 < found.value <= exact.value * (1 + TIE), found.method
        if found.value >= exact.value * (1 - TIE):   # a tie: never on fewer watts than the optimum's
            assert sum(d.tdp_w for d in found.designs) >= exact.power_w, found.method
        assert all(d.area_mm2 <= budget[0] and d.tdp_w <= budget[1] for d in found.designs)
        assert len(found.designs) <= chips


def test_a_random_search_that_draws_every_design_finds_the_optimum(mlp, tiny):
    # Homogeneous: one draw is one design; 200 seeded draws from the 16 designs of the tiny grid
    # (all within 606.68 mm² and 300 W) meet all 16, so the best of them is the optimum.
    exact = solve_exact(mlp, tiny, 2, 606.68, 300.0, homogeneous=True)
    found = baselines.random_search(mlp, 2, 606.68, 300.0, grid=tiny, homogeneous=True, budget=200, seed=0)
    assert found.evaluated == 16
    assert found.value == pytest.approx(exact.value, rel=1e-12)
    assert found.designs == exact.designs


def test_the_fixed_design_is_tpu_like_snapped_to_the_grid(mlp, tiny):
    # tiny grid: tensor cores {1, 2} -> 2; width {64, 128} -> 128; depth {128}; vector cores {1, 8}:
    # 2 is a factor 2 from 1 and 4 from 8 -> 1; lanes {128}; buffer {8, 32} -> 32.
    found = baselines.fixed(mlp, 1, 606.68, 300.0, grid=tiny)
    assert [d.label for d in found.designs] == ["tc2x128x128-vc1x128-buf32"]
    # Its value is the optimum over the grid of that one design (the exact method, another path).
    only = {"tensor_cores": [2], "array_width": [128], "array_depth": [128], "vector_cores": [1],
            "vector_lanes": [128], "buffer_mb": [32]}
    assert found.value == pytest.approx(solve_exact(mlp, load_grid(only), 1, 606.68, 300.0).value, rel=1e-12)
    # nearest on a log scale, where the nearest on a line differs: 2 cores of {1, 3} -> 3 (a factor 1.5, not 2),
    # 32 MB of {20, 50} -> 50 (a factor 1.5625, not 1.6); the smaller on a tie: 2 vector cores of {1, 4} -> 1
    apart = {**only, "tensor_cores": [1, 3], "vector_cores": [1, 4], "buffer_mb": [20, 50]}
    assert [d.label for d in baselines.fixed(mlp, 1, 606.68, 300.0, grid=apart).designs] == [
        "tc3x128x128-vc1x128-buf50"]
    with pytest.raises(InvalidParameterError) as caught:
        baselines.fixed(mlp, 1, 350.0, 300.0, grid=tiny)
    assert str(caught.value) == ("area 350 mm² is below the TPU-like design tc2x128x128-vc1x128-buf32 (353.952 mm² "
                                 "and 186.4814453125 W), the fixed baseline's chip")
    for area, power, message in ((606.68, 120.0, "power 120 W is below"),   # the budget that excludes it, named
                                 (350.0, 120.0, "area 350 mm² and power=120 W are below")):
        with pytest.raises(InvalidParameterError) as caught:
            baselines.fixed(mlp, 1, area, power, grid=tiny)
        assert str(caught.value).startswith(f"{message} the TPU-like design ")


def test_the_command_names_both_budgets_the_fixed_design_exceeds_as_options(capsys):
    from placement.cli import main
    assert main(["codesign", MLP, "--chips", "1", "--grid", TINY, "--baseline", "fixed", "--area", "350",
                 "--power", "120"]) == 2
    assert capsys.readouterr().err == ("error: --area 350 mm² and --power 120 W are below the TPU-like design "
                                       "tc2x128x128-vc1x128-buf32 (353.952 mm² and 186.4814453125 W), the fixed "
                                       "baseline's chip\n")


def test_wham_through_the_library_entry_point(tiny):
    direct = baselines.wham(MLP, 3, 606.68, 300.0, grid=tiny)
    wrapped = placement.codesign(MLP, chips=3, power=300.0, grid=TINY, baseline="wham")
    assert wrapped.status == "feasible" and wrapped.method == "wham"
    assert wrapped.value == pytest.approx(direct.value, rel=1e-12)
    assert wrapped.evaluated == direct.evaluated


@pytest.mark.parametrize("name", ["wham", "random", "fixed"])
def test_a_baseline_keeps_the_limit_on_ideals(name):
    """GPT-2's inference graph contracts to 153 supernodes with 156 ideals: a limit of 155 is refused by a
    baseline as by the exact method (the baselines ran their DPs at the default limit, whatever max_ideals
    said), and 156 gives the answer of the default limit. (The MLP's chain of 14 classes has 15 ideals, the
    prefixes of its one order, which no limit refuses.)"""
    gpt2 = str(ROOT / "instances" / "models" / "gpt2-inference.json")
    options = dict(chips=2, power=300.0, grid=TINY)
    with pytest.raises(LimitExceededError) as exact:
        placement.codesign(gpt2, max_ideals=155, **options)
    with pytest.raises(LimitExceededError) as caught:
        placement.codesign(gpt2, baseline=name, max_ideals=155, **options)
    assert caught.value.parameter == "max_ideals"
    assert str(caught.value) == str(exact.value)
    assert str(caught.value).startswith("more than 155 ideals in the contracted graph (153 supernodes)")
    limited = placement.codesign(gpt2, baseline=name, max_ideals=156, **options)
    assert limited.value == placement.codesign(gpt2, baseline=name, **options).value
    assert placement.codesign(MLP, baseline=name, max_ideals=1, **options).value == placement.codesign(
        MLP, baseline=name, **options).value
    with pytest.raises(InvalidParameterError, match=r"^max_ideals must be a positive integer, not 0$"):
        getattr(baselines, placement.codesign.api.BASELINES[name])(MLP, 2, 606.68, 300.0, grid=TINY, max_ideals=0)


@pytest.mark.parametrize("search", [baselines.wham, baselines.random_search])
@pytest.mark.parametrize("flag", ["no", 1, None])
def test_a_searching_baseline_refuses_a_design_mode_that_is_no_flag(mlp, tiny, search, flag):
    """homogeneous="no" was taken as true: one design on every chip, the opposite of what was asked."""
    with pytest.raises(InvalidParameterError) as caught:
        search(mlp, 3, 606.68, 300.0, grid=tiny, homogeneous=flag)
    assert caught.value.parameter == "homogeneous"
    assert str(caught.value) == f"homogeneous must be True or False, not {flag!r}"


@pytest.mark.parametrize("name", ["random", "wham"])
@pytest.mark.parametrize("homogeneous", [False, True])
def test_the_searching_baselines_say_how_far_they_are(monkeypatch, name, homogeneous):
    """With a report due at every combination asked for, each line counts the distinct combinations placed so
    far (after random's draws of the budget, 64, which repeat combinations: on one design of the 16 of the tiny
    grid for every chip, nearly all do) and names the best time per batch so far: the last line's is the
    baseline's own."""
    monkeypatch.setattr(baselines, "PROGRESS_S", 0.0)
    heard: list[str] = []
    result = placement.codesign(MLP, chips=3, power=300.0, grid=TINY, baseline=name, homogeneous=homogeneous,
                                progress=heard.append)
    placed = [int(re.search(r"(\d+) design combinations placed", line).group(1)) for line in heard]
    assert placed[-1] == result.evaluated > 1 and placed == sorted(placed)
    if name == "random":
        assert [line.split(": ")[1].split(" draws")[0] for line in heard] == [f"{k}/64" for k in range(1, 65)]
        assert result.evaluated <= 16 if homogeneous else result.evaluated > 16
    for line in heard:
        assert re.fullmatch(rf"{name} baseline: ([0-9]+/64 draws, )?[0-9]+ design combinations placed, best "
                            r"[0-9.e-]+ ms per batch, [0-9.]+ s", line), line
    assert heard[-1].split(", best ")[1].split(" ms")[0] == f"{result.time_per_input_ms:.6g}"
    silent = placement.codesign(MLP, chips=3, power=300.0, grid=TINY, baseline=name, homogeneous=homogeneous)
    assert silent.value == result.value


def test_no_design_within_the_budgets(mlp, tiny):
    with pytest.raises(InvalidParameterError) as caught:
        baselines.wham(mlp, 1, 100.0, 50.0, grid=tiny)
    assert str(caught.value) == "area and power leave no design of the grid: none fits 100 mm² and 50 W"


SPEC = sweep.SweepSpec(models=(MLP,), chips=(1, 2), budgets=((606.68, 300.0), (100.0, 50.0)), grids=(TINY,),
                       homogeneous=(False, True), random_budget=4)
RECORD_KEYS = {"id", "config", "status", "value", "throughput", "time_per_input_ms", "power_w", "designs", "area_mm2",
               "tdp_w", "evaluated", "pruned", "runtime_s", "baselines", "settings", "inputs"}


def _steady(record: dict) -> dict:
    """A record without its timings (the only fields two runs may differ in)."""
    out = {k: v for k, v in record.items() if k != "runtime_s"}
    out["baselines"] = {name: {k: v for k, v in b.items() if k != "runtime_s"}
                        for name, b in record["baselines"].items()}
    return out


@needs_dask
def test_sweep_records_and_resuming_from_a_partial_file(tmp_path):
    full = tmp_path / "full.jsonl"
    summary = sweep.run_sweep(SPEC, full, workers=1, processes=False, quiet=True)
    # 100 mm²: no design fits, proven (infeasible), which is no error
    assert (summary.total, summary.skipped, summary.ran, summary.infeasible, summary.errors) == (8, 0, 8, 4, 0)
    records = sweep.read_records(full)
    assert [r["id"] for r in records] != [] and sorted(r["id"] for r in records) == \
        sorted(sweep.configuration_id(c) for c in sweep.configurations(SPEC))
    for r in records:
        if r["config"]["area_mm2"] == 100.0:
            assert r["status"] == "infeasible" and r["throughput"] is None and r["baselines"] == {}
            assert r["error"] == ("no design of the grid fits 100 mm² and 50 W (16 over the area, 0 more over the "
                                  "power); the smallest design, tc1x64x128-vc1x128-buf8, takes 165.408 mm² and "
                                  "83.8388671875 W")
            continue
        assert set(r) == RECORD_KEYS and r["status"] == "optimal"
        assert r["throughput"] == pytest.approx(1000.0 / r["time_per_input_ms"])
        assert set(r["baselines"]) == {"wham", "random", "fixed"}
        for b in r["baselines"].values():
            assert set(b) == {"value", "throughput", "ratio", "runtime_s", "evaluated", "designs"}
            assert 0 < b["ratio"] <= 1 + 1e-12 and b["ratio"] == pytest.approx(b["value"] / r["value"])
        assert len(r["designs"]) <= r["config"]["chips"]
        assert r["area_mm2"] == max(d["area_mm2"] for d in r["designs"])

    # Interrupted after three records, the fourth written halfway.
    lines = full.read_text(encoding="utf-8").splitlines(keepends=True)
    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2], encoding="utf-8")
    log = tmp_path / "ran.txt"  # tasks are serialised to the workers: they report through a file

    def task(item):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(item["id"] + "\n")
        return sweep.run_configuration(item)

    summary = sweep.run_sweep(SPEC, partial, workers=1, processes=False, quiet=True, task=task)
    assert (summary.skipped, summary.ran) == (3, 5)
    assert sorted(log.read_text().split()) == sorted(json.loads(line)["id"] for line in lines[3:])
    resumed = sweep.read_records(partial)
    assert len(resumed) == 8
    assert sorted(map(json.dumps, map(_steady, resumed))) == sorted(map(json.dumps, map(_steady, records)))
    # A third run has nothing left to do.
    assert sweep.run_sweep(SPEC, partial, workers=1, processes=False, quiet=True, task=task).ran == 0
    assert len(log.read_text().split()) == 5


def test_without_dask_and_matplotlib_a_sweep_with_plots_names_both_extras(tmp_path, monkeypatch):
    """It asked for the plot extra, and only on the next run for the sweep extra."""
    from placement.errors import SolverUnavailableError

    for module in ("dask", "dask.distributed", "matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(SolverUnavailableError) as info:
        sweep.run_sweep(SPEC, tmp_path / "sweep.jsonl", quiet=True, plots=tmp_path / "plots")
    assert str(info.value) == "sweeps need Dask, and the sweep plots matplotlib: pip install 'placement[sweep,plot]'"
    assert not (tmp_path / "sweep.jsonl").exists() and not (tmp_path / "plots").exists()


def test_without_dask_a_sweep_with_work_left_writes_nothing_and_a_finished_one_still_runs(tmp_path, monkeypatch):
    """Without Dask, the sweep made the records' folders and an empty file before it failed; a sweep whose
    records are all there needs no cluster, and still answers."""
    from placement.codesign.api import codesign
    from placement.errors import SolverUnavailableError

    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    out = tmp_path / "new" / "sub" / "sweep.jsonl"
    with pytest.raises(SolverUnavailableError, match=r"^sweeps need Dask: pip install 'placement\[sweep\]'$"):
        sweep.run_sweep(SPEC, out, quiet=True)
    assert not (tmp_path / "new").exists()
    with pytest.raises(SolverUnavailableError, match=r"^a run on a Dask scheduler needs Dask: pip install "
                                                     r"'placement\[sweep\]'$"):
        codesign(MLP, chips=1, power=300.0, scheduler="tcp://127.0.0.1:8786")
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,), random_budget=8)
    config = sweep.configurations(spec)[0]
    done = tmp_path / "done.jsonl"
    sweep.append_record(done, {"id": sweep.configuration_id(config), "config": config, "status": "error",
                               "error": "recorded before"})
    assert sweep.run_sweep(spec, done, quiet=True).skipped == 1


def test_a_sweep_refuses_to_resume_records_made_with_other_baselines_settings(tmp_path):
    # with seed 1 in place of 0, the file's record would have been skipped and its random search (seed 0)
    # reported as the one asked for; with the same settings it is resumed, and a record without settings
    # (written before records kept them) is taken as it is
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,), random_budget=8)
    config = sweep.configurations(spec)[0]
    record = {"id": sweep.configuration_id(config), "config": config, "status": "error", "error": "recorded before"}
    settings = sweep.baseline_settings(spec.baselines, spec.random_budget, spec.seed)
    assert settings == {"baselines": ["fixed", "random", "wham"], "random_budget": 8, "seed": 0}
    out = tmp_path / "r.jsonl"
    sweep.append_record(out, {**record, "settings": settings})
    assert sweep.run_sweep(spec, out, quiet=True).skipped == 1
    other = dataclasses.replace(spec, seed=1, baselines=("random", "wham", "fixed"))
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(other, out, quiet=True)
    assert str(caught.value) == (
        f"out holds a record of {MLP} on 1 chip made with baselines fixed, random, wham, random_budget 8, seed 0, "
        "and this sweep asks for baselines fixed, random, wham, random_budget 8, seed 1: resuming would keep that "
        "record; write to another file")
    unseeded = dataclasses.replace(spec, seed=5, baselines=("wham", "fixed"))   # the seed is no setting then
    assert sweep.baseline_settings(unseeded.baselines, 8, unseeded.seed) == {"baselines": ["fixed", "wham"]}
    older = tmp_path / "older.jsonl"
    sweep.append_record(older, record)
    assert sweep.run_sweep(other, older, quiet=True).skipped == 1


@needs_dask
def test_a_sweep_refuses_to_resume_records_made_from_a_model_or_grid_file_since_edited(tmp_path):
    """The records of a sweep stand for the model and grid files as they were read: resumed after one of them
    was edited (a design added to the grid, under the same path), its configurations would keep the records of
    the old file, whose optima may no longer be the optima; the records carry a digest of each file's bytes, and
    such a resume is refused. Unchanged files resume; a record without digests (made before records kept them)
    is taken as it is."""
    grid, model = tmp_path / "grid.json", tmp_path / "model.json"
    grid.write_text(Path(TINY).read_text())
    model.write_text(Path(MLP).read_text())
    spec = sweep.SweepSpec(models=(str(model),), chips=(1,), budgets=((606.68, 300.0),), grids=(str(grid),),
                           baselines=())
    out = tmp_path / "r.jsonl"
    assert sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True).ran == 1
    (record,) = sweep.read_records(out)
    digests = {name: sweep.file_digest(path) for name, path in (("model", model), ("grid", grid))}
    assert record["inputs"] == digests
    assert sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True).skipped == 1
    grid.write_text(json.dumps({**json.loads(Path(TINY).read_text()), "buffer_mb": [8, 32, 64]}))
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True)
    assert str(caught.value) == (f"out holds a record of {model} on 1 chip made from another version of the grid file "
                                 f"{grid} (it has changed since): resuming would keep that record; write to another "
                                 "file")
    grid.write_text(Path(TINY).read_text())
    model.write_text(Path(MLP).read_text() + "\n")
    with pytest.raises(InvalidParameterError, match="made from another version of the model file"):
        sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True)
    older = tmp_path / "older.jsonl"
    sweep.append_record(older, {key: value for key, value in record.items() if key != "inputs"})
    assert sweep.run_sweep(spec, older, workers=1, processes=False, quiet=True).skipped == 1


@needs_dask
def test_a_sweep_on_a_running_cluster(tmp_path):
    from dask.distributed import Client, LocalCluster

    spec = sweep.SweepSpec(models=(MLP,), chips=(1, 2), budgets=((606.68, 300.0),), grids=(TINY,), baselines=("fixed",))
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        summary = sweep.run_sweep(spec, tmp_path / "r.jsonl", scheduler=cluster.scheduler_address, quiet=True)
        assert (summary.ran, summary.errors) == (2, 0)
        with Client(cluster.scheduler_address) as client:  # the sweep left the cluster running
            assert client.submit(sum, [1, 2]).result() == 3
    by_chips = {r["config"]["chips"]: r for r in sweep.read_records(tmp_path / "r.jsonl")}
    assert by_chips[1]["value"] == pytest.approx(solve_exact(load_workload(MLP), load_grid(TINY), 1, 606.68, 300.0).value)


@needs_dask
def test_a_sweep_on_workers_in_another_folder_runs_what_was_read_where_it_started(tmp_path, monkeypatch):
    """A remote worker cannot read the client's files: the tasks named the model and the grid by path, and the
    worker read them in its own folder (or machine), where a relative path named nothing, and each configuration
    ended in an error. Here the worker process runs in another folder than the sweep, whose model and grid are
    relative paths: the model and grid read where the sweep started are what the tasks run on."""
    import importlib

    from dask.distributed import Client, LocalCluster

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "model.json").write_bytes(Path(MLP).read_bytes())
    (here / "grid.json").write_bytes(Path(TINY).read_bytes())
    monkeypatch.chdir(here)
    spec = sweep.SweepSpec(models=("model.json", "gnmt-training"), chips=(2,), budgets=((606.68, 300.0),),
                           grids=("grid.json",), baselines=("fixed",))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        for module in ("placement.codesign.sweep", "placement.codesign.exact", "placement.codesign.baselines"):
            client.run(importlib.import_module, module)   # imported before the move, whatever sys.path holds
        client.run(os.chdir, str(elsewhere))
        assert set(client.run(os.getcwd).values()) == {str(elsewhere)}
        summary = sweep.run_sweep(spec, "records.jsonl", scheduler=cluster.scheduler_address, quiet=True)
    assert (summary.ran, summary.errors) == (2, 0)
    by_model = {r["config"]["model"]: r for r in sweep.read_records("records.jsonl")}
    assert by_model["model.json"]["status"] == "optimal" and by_model["model.json"]["config"]["grid"] == "grid.json"
    here_value = solve_exact(load_workload("model.json"), load_grid("grid.json"), 2, 606.68, 300.0).value
    assert by_model["model.json"]["value"] == here_value
    assert by_model["model.json"]["baselines"]["fixed"]["value"] > 0


@needs_dask
def test_a_sweep_sends_its_tasks_the_model_and_grid_read_where_it_started(tmp_path, monkeypatch):
    """What a task gets is self-contained: the parsed model and grid (read once each), never a path a worker would
    read; a model file that is no model is one error record per configuration, as before."""
    from placement.codesign.grid import Grid
    from placement.codesign.workload import Workload

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"maxSizePerFPGA": 1, "nodes": [{"id": 0}], "edges": []}), encoding="utf-8")
    submitted = []

    class Future:
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

    class FakeClient:
        def scatter(self, values, hash=True):
            return [Future(v) for v in values]

        def map(self, function, *columns, pure=True):
            calls = list(zip(*columns))
            submitted.extend(calls)
            return [Future(function(*(a.value if isinstance(a, Future) else a for a in args))) for args in calls]

        def close(self):
            pass

    monkeypatch.setattr(sweep, "_client", lambda scheduler, workers, processes: (FakeClient(), None))
    monkeypatch.setattr("dask.distributed.as_completed", lambda futures: iter(futures), raising=False)
    spec = sweep.SweepSpec(models=(MLP, str(bad)), chips=(1, 2), budgets=((606.68, 300.0),), grids=(TINY, None),
                           baselines=())
    summary = sweep.run_sweep(spec, tmp_path / "records.jsonl", quiet=True)
    assert (summary.ran, summary.errors) == (8, 4)
    for item, task, workload, grid in submitted:
        model = item["config"]["model"]
        assert isinstance(workload.value, Workload) if model == MLP else isinstance(workload.value, sweep._Unreadable)
        assert isinstance(grid.value, Grid)
        assert set(item) == {"id", "config", "baselines", "random_budget", "seed", "max_ideals", "inputs"}   # no path
        assert item["inputs"] == sweep.input_digests(item["config"])   # digests of the files, read here
    assert len({id(w) for _, _, w, _ in submitted}) == 2 and len({id(g) for _, _, _, g in submitted}) == 2
    errors = [r for r in sweep.read_records(tmp_path / "records.jsonl") if r["status"] == "error"]
    assert len(errors) == 4 and all(r["error"].startswith(f"{bad}: ") for r in errors)


@needs_dask
def test_a_sweep_killed_mid_run_resumes(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": [MLP], "chips": [1, 2, 3], "budgets": [[606.68, 300.0], [400.0, 200.0]],
                                "grids": [TINY], "homogeneous": [False, True], "baselines": ["wham"]}))
    out = tmp_path / "records.jsonl"
    command = [sys.executable, "-m", "placement", "codesign", "--sweep", str(spec), "--out", str(out),
               "--workers", "1", "--quiet"]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if out.exists() and out.read_text(encoding="utf-8").count("\n") >= 2:
            break
        time.sleep(0.05)
    finished_first = process.poll() is not None
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = len(sweep.read_records(out))
    assert before >= 2
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]   # each line, once
    assert sorted(ids) == sorted(sweep.configuration_id(c) for c in sweep.configurations(sweep.load_spec(spec)))
    assert finished_first or before < 12


@needs_dask
def test_two_sweeps_on_one_file_write_each_record_once(tmp_path):
    """Two sweeps started together on one results file both read it empty, ran every configuration and
    appended every record: each was written twice. The second now waits for the first and skips its records."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": [MLP], "chips": [1, 2], "budgets": [[606.68, 300.0], [400.0, 200.0]],
                                "grids": [TINY], "baselines": ["wham"]}))
    out = tmp_path / "records.jsonl"
    command = [sys.executable, "-m", "placement", "codesign", "--sweep", str(spec), "--out", str(out),
               "--workers", "1", "--json"]
    runs = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    ended = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], ended
    assert not any("Traceback" in err for _, err in ended)
    lines = out.read_text(encoding="utf-8").splitlines()
    ids = sorted(json.loads(line)["id"] for line in lines)
    assert len(lines) == 4 and ids == sorted(sweep.configuration_id(c) for c in
                                             sweep.configurations(sweep.load_spec(spec)))
    summaries = sorted((json.loads(text)["ran"], json.loads(text)["skipped"]) for text, _ in ended)
    assert summaries == [(0, 4), (4, 0)]


@needs_dask
def test_a_sweep_waits_for_the_one_writing_its_file_and_skips_what_it_wrote(tmp_path):
    import fcntl

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300.0]], "grids": [TINY]}))
    config = sweep.configurations(sweep.load_spec(spec))[0]
    out = tmp_path / "records.jsonl"
    with open(out, "a", encoding="utf-8") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)   # a sweep running on the file
        second = subprocess.Popen([sys.executable, "-m", "placement", "codesign", "--sweep", str(spec), "--out",
                                   str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        said = second.stderr.readline()
        assert said == f"{out}: another sweep is writing these records; waiting for it to end\n"
        time.sleep(0.5)
        assert second.poll() is None and out.read_text(encoding="utf-8") == ""
        sweep.append_record(out, {"id": sweep.configuration_id(config), "config": config, "status": "error",
                                  "error": "written by the first sweep",
                                  "settings": sweep.baseline_settings(("wham", "random", "fixed"), 64, 0)})
    printed, rest = second.communicate(timeout=120)
    assert second.returncode == 0, rest   # nothing left to run: the first sweep ran it
    assert printed == f"0 configurations run, 1 already in {out}, 0 infeasible, 0 errors; 0 plots written\n"
    assert len(sweep.read_records(out)) == 1


@pytest.mark.parametrize("settings, text", [
    ("fixed", '"fixed"'), (7, "7"), (["fixed"], '["fixed"]'), ({"baselines": None}, '{"baselines": null}'),
    ({"baselines": [None]}, '{"baselines": [null]}'), ({"baselines": "fixed"}, '{"baselines": "fixed"}'),
    ({"baselines": ["fixed"], "note": 1}, '{"baselines": ["fixed"], "note": 1}'), ({}, "{}"),
    ({"baselines": ["fixed"], "max_ideals": 0}, '{"baselines": ["fixed"], "max_ideals": 0}'),
    ({"baselines": ["fixed"], "max_ideals": True}, '{"baselines": ["fixed"], "max_ideals": true}'),
], ids=["string", "number", "array", "null baselines", "null baseline", "baselines string", "another field", "empty",
        "max_ideals 0", "max_ideals true"])
def test_a_record_whose_settings_are_not_what_a_sweep_writes_is_refused_by_name(tmp_path, capsys, settings, text):
    """A record's settings edited into something a sweep never writes (no object, or baselines that are no array
    of names) ended the sweep in a traceback (AttributeError: 'str' object has no attribute 'get', TypeError)
    where it was to be refused as a record made with other settings; it is refused so, the settings shown as
    written, and the command prints one error line. Settings with another field were refused as made with
    "baselines fixed" where the sweep asks for "baselines fixed", which showed no difference."""
    from placement.cli import main

    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,),
                           baselines=("fixed",))
    config = sweep.configurations(spec)[0]
    out = tmp_path / "r.jsonl"
    sweep.append_record(out, {"id": sweep.configuration_id(config), "config": config, "status": "error",
                              "settings": settings})
    detail = (f"holds a record of {MLP} on 1 chip made with settings {text}, and this sweep asks for baselines "
              "fixed: resuming would keep that record; write to another file")
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, quiet=True, task=list)
    assert str(caught.value) == f"out {detail}"
    spec_file = tmp_path / "sweep.json"
    spec_file.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY],
                                     "baselines": ["fixed"]}))
    assert main(["codesign", "--sweep", str(spec_file), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == f"error: --out {detail}\n"


def test_a_record_of_other_settings_is_refused_without_waiting_for_the_sweep_writing_the_file(tmp_path):
    """A record made with other baselines settings refuses the sweep whatever runs on the file: it is refused
    while another sweep holds the file, not after that sweep (hours, maybe) has ended."""
    import fcntl

    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,), random_budget=8)
    config = sweep.configurations(spec)[0]
    out = tmp_path / "r.jsonl"
    sweep.append_record(out, {"id": sweep.configuration_id(config), "config": config, "status": "error",
                              "error": "recorded before", "settings": sweep.baseline_settings(spec.baselines, 8, 0)})
    with open(out, "a", encoding="utf-8") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)   # a sweep running on the file
        outcome: list[BaseException] = []
        thread = threading.Thread(target=lambda: outcome.append(
            pytest.raises(InvalidParameterError, sweep.run_sweep, dataclasses.replace(spec, seed=1), out,
                          quiet=True).value))
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the sweep waited for the lock"
    assert str(outcome[0]).endswith("and this sweep asks for baselines fixed, random, wham, random_budget 8, seed 1: "
                                    "resuming would keep that record; write to another file")


def test_sweep_spec_files(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1, 8], "budgets": [[606.68, 300]],
                                "homogeneous": [True, False], "objectives": ["throughput", "perf-per-watt"]}))
    loaded = sweep.load_spec(spec)
    assert loaded.size == 8 and len(sweep.configurations(loaded)) == 8
    assert len({sweep.configuration_id(c) for c in sweep.configurations(loaded)}) == 8
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300]], "k": [2]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == (f"{spec}: unknown key 'k' (known: models, chips, budgets, grids, objectives, "
                                 "homogeneous, baselines, random_budget, seed, max_ideals)")
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [0], "budgets": [[606.68, 300]]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: chips must be a positive integer, not 0"
    spec.write_text(json.dumps({"models": ["gnmt-training"], "budgets": [[606.68, 300]]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: missing key 'chips'"
    # the file's values as the file writes them (a budget read as a tuple showed as "(606.68,)", a flag as "True")
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68]]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: budgets must be [area_mm2, power_w] pairs, not [606.68]"
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": True, "budgets": [[606.68, 300]]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: chips must be a list, not true"
    for flag, shown in (("yes", "'yes'"), (1, "1"), (None, "null")):   # was "must be True or False, not None"
        spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300]],
                                    "homogeneous": [flag]}))
        with pytest.raises(InvalidInstanceError) as caught:
            sweep.load_spec(spec)
        assert str(caught.value) == f"{spec}: homogeneous must hold true or false, not {shown}"
    # errors name the file's keys, and which budget is wrong among several
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300], [450, 0]]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: budgets must be [area_mm2, power_w] pairs of finite numbers > 0, not [450, 0]"
    spec.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300]],
                                "objectives": ["throughput", "energy"]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: objectives must be one of 'throughput', 'perf-per-watt', not 'energy'"


def test_a_sweep_file_s_values_are_named_as_the_file_writes_them(tmp_path):
    # chips [true], random_budget true, objectives [null] and models [["a"]] were named in Python's spelling
    # ("chips must be a positive integer, not True", "objectives must be one of ..., not None", "not ['a']")
    spec = tmp_path / "spec.json"
    base = {"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300]]}
    cases = (({"chips": [True]}, "chips must be a positive integer, not true"),
             ({"chips": [None]}, "chips must be a positive integer, not null"),
             ({"chips": [10 ** 40]}, None),
             ({"random_budget": True}, "random_budget must be a positive integer, not true"),
             ({"seed": None}, "seed must be an integer from 0 to 2147483647, not null"),
             ({"seed": -10 ** 40}, "seed must be an integer from 0 to 2147483647, not an integer of about 41 digits"),
             ({"objectives": [None]}, "objectives must be one of 'throughput', 'perf-per-watt', not null"),
             ({"baselines": [False]}, "baselines must be one of 'wham', 'random', 'fixed', not false"),
             ({"models": [["a"]]}, "models must list file paths, not an array"),
             ({"grids": [{"name": "g"}]}, "grids must list file paths (or null), not an object"))
    for fields, message in cases:
        spec.write_text(json.dumps({**base, **fields}))
        if message is None:   # a huge chip count is a count
            assert sweep.load_spec(spec).chips == (10 ** 40,)
            continue
        with pytest.raises(InvalidInstanceError) as caught:
            sweep.load_spec(spec)
        assert str(caught.value) == f"{spec}: {message}"


def test_a_sweep_file_s_counts_written_as_whole_floats_read_as_integers(tmp_path):
    # chips 2.0, random_budget 8.0 and seed 1.0 were refused ("chips must be a positive integer, not 2.0"), where
    # instance, plan and grid files read 2.0 as 2; read so, a configuration has the id it has with chips 2
    spec = tmp_path / "spec.json"
    whole = {"models": ["gnmt-training"], "chips": [1, 2], "budgets": [[606.68, 300]], "random_budget": 8, "seed": 1}
    spec.write_text(json.dumps({**whole, "chips": [1.0, 2.0], "random_budget": 8.0, "seed": 1.0, "max_ideals": 23.0}))
    loaded = sweep.load_spec(spec)
    assert (loaded.chips, loaded.random_budget, loaded.seed, loaded.max_ideals) == ((1, 2), 8, 1, 23)
    assert all(type(k) is int for k in (*loaded.chips, loaded.random_budget, loaded.seed, loaded.max_ideals))
    spec.write_text(json.dumps(whole))
    assert sweep.configurations(loaded) == sweep.configurations(sweep.load_spec(spec))
    spec.write_text(json.dumps({**whole, "chips": [1.5]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.load_spec(spec)
    assert str(caught.value) == f"{spec}: chips must be a positive integer, not 1.5"


@needs_dask
def test_plots_of_a_sweep(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "records.jsonl"
    spec = sweep.SweepSpec(models=(MLP,), chips=(1, 2), budgets=((606.68, 300.0), (350.0, 150.0)), grids=(TINY,),
                           baselines=())
    summary = sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True, plots=tmp_path / "plots")
    assert [Path(p).name for p in summary.plots] == ["throughput-area-power.png", "pareto.png",
                                                      "designs-per-stage.png"]
    for p in summary.plots:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_front():
    from placement.codesign.plots import pareto_front
    # (power, throughput): (2, 5) is dominated by (1, 5); (3, 4) by (1, 5); (4, 9) and (1, 5) stay.
    assert pareto_front([(2, 5), (1, 5), (3, 4), (4, 9), (1, 3)]) == [(1, 5), (4, 9)]


# Forward FLOPs of the torch-imported instances (about.forward_flops of instances/models/*-inference.json)
# and the parameter counts of the published models (HuggingFace BertModel 109,482,240 + a 2-label
# classifier 1,538; GPT-2 small 124,439,808; timm vit_base_patch16_224 86,567,656; torchvision
# resnet50 25,557,032).
@pytest.mark.parametrize("name, params", [("bert-base", 109_483_778), ("gpt2", 124_439_808),
                                          ("vit-base", 86_567_656), ("resnet50", 25_557_032)])
def test_generated_models_match_the_imported_ones(name, params):
    graph = codesign_models.MODELS[name](training=False)
    assert sum(layer.param_bytes for layer in graph.layers) == 2 * params
    imported = json.loads((ROOT / "instances" / "models" / f"{name}-inference.json").read_text())
    assert graph.flops == pytest.approx(imported["about"]["forward_flops"], rel=0.01)


def test_generated_models_are_model_files():
    for name in codesign_models.model_names():
        workload = load_workload(sweep.sweep_model(name))
        training = name.endswith("-training")
        forward = sum(not node.backward for node in workload.instance.nodes)
        assert len(workload.instance.nodes) == forward * (2 if training else 1)
        assert workload.shapeless_nodes == 0
    # GNMT: 2 embeddings, 4 encoder and 4 decoder LSTM layers, attention, classifier.
    assert len(codesign_models.gnmt(training=False).layers) == 12
    with pytest.raises(InvalidParameterError) as caught:
        sweep.sweep_model("gnmt")
    assert str(caught.value).startswith("model is 'gnmt', neither a model file nor one of bert-base-training, ")
    with pytest.raises(InvalidParameterError) as caught:  # before any cluster starts
        sweep.run_sweep(sweep.SweepSpec(models=("gnmt",), chips=(1,), budgets=((606.68, 280.0),)), "unused.jsonl")
    assert str(caught.value).startswith("models lists 'gnmt', neither a model file nor one of bert-base-training, ")


def test_an_empty_model_name_is_refused_before_any_configuration_runs(tmp_path):
    """An empty name is no file, but it was taken for the working directory, which exists: the sweep ran every
    configuration of it into an error record ("an empty file name") and ended with status 1, the records kept
    for resuming; it is refused as a name that is neither a model file nor a generated model, before any
    record is written."""
    names = ", ".join(codesign_models.model_names())
    out = tmp_path / "records.jsonl"
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(sweep.SweepSpec(models=("",), chips=(1,), budgets=((606.68, 280.0),), grids=(TINY,)), out,
                        quiet=True, task=list)
    assert (caught.value.parameter, caught.value.detail) == ("models", f"lists '', neither a model file nor one of "
                                                                       f"{names}")
    assert not out.exists()
    with pytest.raises(InvalidParameterError) as caught:
        sweep.sweep_model("")
    assert str(caught.value) == f"model is '', neither a model file nor one of {names}"


def test_a_relative_model_path_that_is_no_file_names_the_working_directory(tmp_path, monkeypatch):
    # a sweep file listing "mlp.json" beside it, run from another folder, was told of no folder at all
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(sweep.SweepSpec(models=("mlp.json",), chips=(1,), budgets=((606.68, 280.0),)), "unused.jsonl")
    assert str(caught.value).startswith(f"models lists 'mlp.json', neither a model file (a relative path is read "
                                        f"from the working directory, {Path.cwd()}) nor one of bert-base-training, ")


@needs_dask
def test_docs_examples_run(monkeypatch):
    import contextlib
    import io

    from tests.test_docs import python_blocks

    monkeypatch.chdir(ROOT)
    blocks = python_blocks(ROOT / "docs" / "codesign.md")
    assert len(blocks) == 3
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/codesign.md", "exec"), namespace)
    # What the page says they print.
    assert out.getvalue().splitlines() == [
        "optimal 727.691 ['tc2x128x128-vc8x128-buf32', 'tc2x128x128-vc8x128-buf32']",
        "12 4 {'area': 0, 'power': 0, 'dominated': 4, 'bound': 0}",
        "wham 1.0 6", "random 0.7746 8", "fixed 0.4297 1",
        "8 8 0", "0", "['designs', 'evaluated', 'ratio', 'runtime_s', 'throughput', 'value']"]


def test_wham_grows_the_resource_of_the_critical_operator():
    # One node: an add over E = 2^20 elements of 2 bytes. On vc vector cores of 32 lanes it takes
    # max(E / (32·vc·700 MHz), 4E / 700 GB/s, 4E / (64 B·64 MB·700 MHz)) s: compute-bound up to vc = 4
    # (E / 8.96e10 s), DRAM-bound at vc = 8 (4E / 7e11 s = 5.9918e-3 ms). Tensor cores do not shorten it,
    # so from the smallest design (1 tensor core, 1 vector core) the search steps the vector cores
    # 1 → 2 → 4 → 8 and stops: three moves (steps follow the sorted values; the grid lists them descending).
    model = {"maxSizePerFPGA": 2**30, "maxFPGAs": 1, "maxCPUs": 0, "edges": [],
             "nodes": [{"id": 0, "name": "add", "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0,
                        "isBackwardNode": False, "size": 0,
                        "operators": [{"kind": "vector", "op": "add", "elements": 2**20}]}]}
    grid = {"tensor_cores": [1, 2], "array_width": [16], "array_depth": [16], "vector_cores": [8, 4, 2, 1],
            "vector_lanes": [32], "buffer_mb": [64]}
    found = baselines.wham(model, 1, 606.68, 300.0, grid=grid)
    assert [d.label for d in found.designs] == ["tc1x16x16-vc8x32-buf64"]
    assert found.details["local_steps"] == 3
    assert 1000.0 / found.throughput == pytest.approx(4 * 2**20 / 700e9 * 1000, rel=1e-12)
    assert found.value == pytest.approx(solve_exact(load_workload(model), load_grid(grid), 1, 606.68, 300.0).value,
                                        rel=1e-12)


def test_a_model_that_takes_no_time_is_refused(tmp_path):
    # two nodes without operators: every design runs them in 0 ms, so the throughput (1000 / 0 inputs
    # per second) is unbounded and no design is better than another; the configuration is refused (a
    # sweep records the refusal as the configuration's error and goes on) instead of reporting an optimum
    model = tmp_path / "zero.json"
    model.write_text(json.dumps({"maxSizePerFPGA": 2.0 ** 34, "maxFPGAs": 2, "maxCPUs": 0, "edges": [], "nodes": [
        {"id": k, "name": f"n{k}", "supportedOnFpga": True, "cpuLatency": 0.0, "fpgaLatency": 0.0,
         "isBackwardNode": False, "size": 1000, "operators": []} for k in (0, 1)]}))
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.run_configuration({"config": {"model": str(model), "chips": 1, "area_mm2": 606.68, "power_w": 300.0,
                                            "grid": TINY, "objective": "throughput", "homogeneous": False},
                                 "baselines": []})
    assert str(caught.value) == (f"{model}: the model has no work to place: its operators compute nothing and move "
                                 "no bytes, so every design runs it in no time on one chip")


@needs_dask
def test_unwritable_outputs_are_refused_before_the_sweep_runs(tmp_path):
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    blocker = tmp_path / "file.json"
    blocker.write_text("{}")
    ran = []
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, blocker / "records.jsonl", quiet=True, task=ran.append)
    assert str(caught.value) == f"out names a file in a folder that is a file: {blocker / 'records.jsonl'}"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)   # reading its records back to resume blocked until the process was killed
    for out in (fifo, Path("/dev/null"), tmp_path):
        with pytest.raises(InvalidParameterError) as caught:
            sweep.run_sweep(spec, out, quiet=True, task=ran.append)
        assert str(caught.value) == (f"out {out}: is not a regular file; a sweep appends its records to a file and "
                                     "reads them back to resume")
    assert ran == []


@needs_dask
def test_an_unwritable_plots_folder_is_refused_before_the_sweep_runs(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'placement[plot]')")
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    blocker = tmp_path / "file.json"
    blocker.write_text("{}")
    ran = []
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, tmp_path / "records.jsonl", quiet=True, plots=blocker, task=ran.append)
    assert str(caught.value) == f"plots names a folder that cannot be written: {blocker}: File exists"
    assert ran == []


def test_a_records_file_name_too_long_is_named_as_the_out_parameter(tmp_path, capsys):
    # the check that the file existed raised OSError ("[Errno 36] File name too long: ..."), and the command
    # printed "error: File name too long" without the file or the option
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    out = tmp_path / ("a" * 300 + ".jsonl")
    ran = []
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, quiet=True, task=ran.append)
    assert (caught.value.parameter, str(caught.value)) == ("out", f"out {out}: cannot be read: File name too long")
    with pytest.raises(InvalidParameterError) as caught:
        sweep.read_records(out)
    assert str(caught.value) == f"out {out}: cannot be read: File name too long"
    assert ran == []
    spec_file = tmp_path / "sweep.json"
    spec_file.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY]}))
    from placement.cli import main

    assert main(["codesign", "--sweep", str(spec_file), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"error: --out {out}: cannot be read: File name too long"


def test_a_model_name_too_long_for_a_file_is_named_as_no_model(tmp_path, capsys):
    # the check that the model file existed raised OSError, and the command printed "error: File name too long"
    # without the model or the field of the sweep file
    model = str(tmp_path / ("m" * 300 + ".json"))
    spec = sweep.SweepSpec(models=(model,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    names = ", ".join(codesign_models.model_names())
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, tmp_path / "records.jsonl", quiet=True, task=print)
    assert (caught.value.parameter, caught.value.detail) == ("models", f"lists {model!r}, neither a model file nor "
                                                                       f"one of {names}")
    with pytest.raises(InvalidParameterError) as caught:
        sweep.sweep_model(model)
    assert (caught.value.parameter, caught.value.detail) == ("model", f"is {model!r}, neither a model file nor one "
                                                                      f"of {names}")
    assert not (tmp_path / "records.jsonl").exists()


def test_a_file_that_is_no_record_file_is_never_cut(tmp_path, capsys):
    """The run cuts a record cut short off the end of its out file; a file whose last line, without a
    newline, is anything else is refused untouched (a spec file written by json.dump, or notes, given as
    the out file were emptied and the run reported success). The command also refuses the spec, a model
    or a grid file as its out file."""
    from placement.cli import main

    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    ran = []
    for text in ('{"models": ["x"]}', "notes", '[{"id": "0"}]', '{"id":"0"}\n{"config": 1'):
        notes = tmp_path / "notes.txt"
        notes.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidParameterError) as caught:
            sweep.run_sweep(spec, notes, quiet=True, task=ran.append)
        line = text.count("\n") + 1
        assert str(caught.value) == (f"out {notes}: line {line} does not end in a newline and is no sweep record "
                                     "cut short: not a file of sweep records")
        assert notes.read_text(encoding="utf-8") == text
    assert ran == []
    for start in ('{"id":"1a2b', '{"i', ""):   # a record's first bytes, or nothing: read as no record
        cut = tmp_path / "cut.jsonl"
        cut.write_text('{"id":"0"}\n' + start, encoding="utf-8")
        assert sweep.read_records(cut) == [{"id": "0"}]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY]}))
    for out in (path, MLP, TINY):
        assert main(["codesign", "--sweep", str(path), "--out", str(out), "--quiet"]) == 2
        assert capsys.readouterr().err == (f"error: {out}: is also an input of the command, which writing would "
                                           "overwrite; choose another name\n")
    assert json.loads(path.read_text())["chips"] == [1]


def test_a_record_whose_configuration_is_not_the_one_its_id_digests_is_refused(tmp_path):
    """A record is matched to its configuration by its id, a digest of the configuration: one whose 'config' was
    edited (chips 1 to 7) was taken for the configuration of its id, skipped on resuming and plotted as the
    edited one. Such a record of the sweep's configurations is refused, the file untouched; a record of another
    sweep, or one without a configuration, is read as before."""
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    config = sweep.configurations(spec)[0]
    ident = sweep.configuration_id(config)
    out = tmp_path / "records.jsonl"
    for edited, got in ((dict(config, chips=7), f"digests to {sweep.configuration_id(dict(config, chips=7))}"),
                        ("chips 1", "is no JSON object but string")):
        text = json.dumps({"id": ident, "config": edited, "status": "error"}) + "\n"
        out.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidParameterError) as caught:
            sweep.run_sweep(spec, out, quiet=True, task=list)
        assert str(caught.value) == (f"out {out}: the record of id {ident!r} ({MLP} on 1 chip) holds another "
                                     f"configuration, whose 'config' {got}: a record edited by hand, which resuming "
                                     "would keep as the record of the configuration its id names")
        assert out.read_text(encoding="utf-8") == text
    kept = [{"id": ident, "status": "error"}, {"id": "0", "config": dict(config, chips=7), "status": "error"}]
    out.write_text("".join(json.dumps(record) + "\n" for record in kept), encoding="utf-8")
    assert sweep.run_sweep(spec, out, quiet=True, task=list).ran == 0
    assert sweep.read_records(out) == kept


def test_a_record_with_a_key_twice_or_a_number_not_finite_is_refused(tmp_path, capsys):
    """A record's line was read by a plain JSON decoder: a key given twice (``"id"``, first another id, then the
    configuration's) was read as its last value, so the record was kept as the configuration's, and ``NaN`` or
    ``Infinity`` were read as numbers, where every other file the package reads refuses both (README, Limits).
    Such a line is refused, naming the file, the line and the key or the field; the file is left as it is."""
    from placement.cli import main

    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    ident = sweep.configuration_id(sweep.configurations(spec)[0])
    spec_file = tmp_path / "sweep.json"
    spec_file.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY]}))
    out = tmp_path / "records.jsonl"
    for line, detail in (
            (f'{{"id":"0","id":"{ident}","status":"error"}}',
             "line 2: the key 'id' appears twice in one object; which one is meant is not clear"),
            (f'{{"id":"{ident}","status":"optimal","baselines":{{"fixed":{{"value":NaN}}}}}}',
             "line 2: baselines.fixed.value is NaN; every number must be finite"),
            (f'{{"id":"{ident}","status":"optimal","value":-Infinity}}',
             "line 2: value is -Infinity; every number must be finite")):
        text = '{"id":"other","status":"error"}\n' + line + "\n"
        out.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidParameterError) as caught:
            sweep.run_sweep(spec, out, quiet=True, task=list)
        assert (caught.value.parameter, str(caught.value)) == ("out", f"out {out}: {detail}")
        assert main(["codesign", "--sweep", str(spec_file), "--out", str(out), "--quiet"]) == 2
        assert capsys.readouterr().err == f"error: --out {out}: {detail}\n"
        assert out.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("document, indent, what", [
    ({"format": "placement-plan/1", "devices": [{"type": "accelerator", "nodes": [1]}]}, 1, "a plan"),
    ({"format": "placement-plan/1", "devices": [{"type": "accelerator", "nodes": [1]}]}, None, "a plan"),
    ({"models": ["x"], "chips": [1], "budgets": [[606.68, 300]]}, 2, "a sweep specification"),
    ([1, 2], 1, "one JSON document"),
], ids=["plan", "plan on one line", "specification", "array"])
def test_another_document_given_as_the_records_is_named(tmp_path, document, indent, what):
    """Before: "line 1 is not JSON (Expecting property name enclosed in double quotes)" of a file whose one document
    spans its lines, and "line 1 is not a sweep record (no id)" of one written on one line."""
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    out = tmp_path / "plan.json"
    out.write_text(json.dumps(document, indent=indent) + "\n", encoding="utf-8")
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, quiet=True, task=list)
    assert str(caught.value) == f"out {out}: the file is {what}, not sweep records (JSON Lines: a record a line)"
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"note": 1}\n', encoding="utf-8")   # no document of the package: no record either
    with pytest.raises(InvalidParameterError) as caught:
        sweep.read_records(notes)
    assert str(caught.value) == f"out {notes}: line 1 is not a sweep record (no id)"


@pytest.mark.parametrize("name, value", [("workers", 1), ("workers", 4), ("processes", True), ("processes", False)])
def test_the_local_cluster_options_are_refused_with_a_scheduler_whatever_their_value(tmp_path, name, value):
    """workers and processes size the local cluster, which a sweep given a scheduler does not start: they
    passed unused (processes=True, the default, as any other value); given, they are now refused before any
    file is written or cluster reached."""
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    out = tmp_path / "records.jsonl"
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, scheduler="tcp://127.0.0.1:1", quiet=True, task=list, **{name: value})
    assert caught.value.parameter == name
    assert str(caught.value) == (f"{name} applies to the local cluster only; with a scheduler the sweep runs on the "
                                 "cluster at that address, whose workers are its own")
    assert not out.exists()


def test_the_command_refuses_workers_with_a_scheduler(tmp_path, capsys):
    from placement.cli import main

    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY]}))
    out = tmp_path / "records.jsonl"
    assert main(["codesign", "--sweep", str(path), "--out", str(out), "--scheduler", "tcp://127.0.0.1:1",
                 "--workers", "2", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: --workers applies to the local cluster only; with a scheduler the "
                                       "sweep runs on the cluster at that address, whose workers are its own\n")
    assert not out.exists()


@needs_dask
def test_a_scheduler_address_dask_cannot_parse_is_one_error(tmp_path):
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    with pytest.raises(InvalidParameterError) as caught:   # was an uncaught ValueError from Dask
        sweep.run_sweep(spec, tmp_path / "records.jsonl", scheduler="notanaddress", quiet=True)
    assert str(caught.value).startswith("scheduler cannot reach a Dask scheduler at 'notanaddress': ")


def test_a_configuration_listed_twice_runs_once(tmp_path):
    # budgets (606.68, 300) and (606.68, 300.0) and chips [1, 1] are one configuration: its record in
    # the file is the whole sweep (no cluster starts), not one of four to run
    spec = sweep.SweepSpec(models=(MLP,), chips=(1, 1), budgets=((606.68, 300), (606.68, 300.0)), grids=(TINY,))
    configs = list(sweep.configurations(spec))
    assert len(configs) == 4 and len({sweep.configuration_id(c) for c in configs}) == 1
    out = tmp_path / "r.jsonl"
    sweep.append_record(out, {"id": sweep.configuration_id(configs[0]), "config": configs[0], "status": "error",
                              "error": "recorded before"})
    summary = sweep.run_sweep(spec, out, quiet=True)
    assert (summary.total, summary.skipped, summary.ran) == (1, 1, 0)


@needs_dask
@pytest.mark.parametrize("answer, why", [(b"HTTP/1.0 400 Bad Request\r\n\r\n" * 4, "what answers is no Dask scheduler"),
                                         (None, "no Dask scheduler answered within 2 s")])
def test_a_service_that_is_no_dask_scheduler_is_one_error(tmp_path, monkeypatch, answer, why):
    """A TCP service that answers other bytes made Dask read a length of exabytes (a MemoryError
    traceback); one that accepts and never answers held the sweep past Dask's connect timeout for good."""
    import socket
    import threading

    # a service that never answers is waited for 2 s; one that answers is read at once, however loaded the
    # machine (with 2 s, a busy run read nothing in time and said no scheduler answered)
    monkeypatch.setattr(sweep, "HANDSHAKE_S", 2 if answer is None else 60)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,))
    try:
        with pytest.raises(InvalidParameterError) as caught:
            sweep.run_sweep(spec, tmp_path / "records.jsonl", scheduler=address, quiet=True)
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert str(caught.value).startswith(f"scheduler cannot reach a Dask scheduler at {address!r}: {why}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_estimates_the_rest_in_the_words_of_every_progress_line(monkeypatch):
    """A sweep of hours said 'about 8000 s left'; the estimate is rounded as the other progress lines round
    theirs: one configuration of three in 4,000 s leaves two, about 8,000 s, 2.2 h."""
    from placement.codesign import sweep

    clock = iter([0.0, 4000.0, 4000.0])
    monkeypatch.setattr(sweep.time, "perf_counter", lambda: next(clock))
    log = io.StringIO()
    bar = sweep.ProgressBar(3, stream=log)
    bar.update()
    assert log.getvalue().split("\n")[1] == "[" + "#" * 10 + "." * 20 + "] 1/3 configurations, 4000 s, about 2.2 h left"


def test_the_progress_bar_redraws_only_on_a_terminal():
    """A log file got every state of the bar joined by carriage returns on one line; there, each is a line."""
    from placement.codesign.sweep import ProgressBar

    log = io.StringIO()
    bar = ProgressBar(2, stream=log)
    bar.update()
    bar.close()
    lines = log.getvalue().split("\n")
    assert "\r" not in log.getvalue() and len(lines) == 3 and lines[2] == ""
    assert lines[0].startswith("[" + "." * 30 + "] 0/2 configurations, ")
    assert lines[1].startswith("[" + "#" * 15 + "." * 15 + "] 1/2 configurations, ")
    terminal = _Terminal()
    bar = ProgressBar(2, stream=terminal)
    bar.close()
    assert terminal.getvalue().startswith("\r[") and terminal.getvalue().endswith("   \n")


def test_plot_text_is_drawn_as_written_and_log_ticks_keep_their_notation(tmp_path):
    """A model named with a pair of '$' was read as mathematical notation (and '\\frac' without arguments made
    the plot fail); the log axis's ticks are matplotlib's own mathematical text (10^0, 10^1), which must
    still be read as such. The SVG keeps its text as text here, so both show in the file."""
    matplotlib = pytest.importorskip("matplotlib")
    from placement.codesign.plots import plot_pareto

    records = [{"id": str(i), "config": {"model": "m$\\frac$x.json", "chips": 2, "area_mm2": 1.0, "power_w": 1.0},
                "status": "optimal", "throughput": t, "area_mm2": 1.0, "tdp_w": w, "designs": []}
               for i, (w, t) in enumerate([(50, 0.5), (100, 5.0), (200, 50.0), (300, 300.0)])]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plot_pareto(records, tmp_path / "pareto.svg")
    svg = (tmp_path / "pareto.svg").read_text()
    # the name as text, the ticks drawn as mathematics (glyphs, their source in a comment), not as their source
    assert ">m$\\frac$x<" in svg and "<!-- $\\mathdefault{10^{0}}$ -->" in svg and ">$\\mathdefault" not in svg


def test_a_plot_that_cannot_be_written_whole_leaves_the_file_as_it_was(tmp_path, savefig_fills_the_disk):
    """A disk that fills while a plot is saved left half a PNG over the old plot."""
    import os

    from placement.codesign.plots import plot_pareto

    records = [{"id": "0", "config": {"model": "m.json", "chips": 2, "area_mm2": 1.0, "power_w": 1.0},
                "status": "optimal", "throughput": 5.0, "area_mm2": 1.0, "tdp_w": 100.0, "designs": []}]
    plot = tmp_path / "pareto.png"
    plot.write_bytes(b"old plot")
    with pytest.raises(OSError):
        plot_pareto(records, plot)
    assert plot.read_bytes() == b"old plot" and os.listdir(tmp_path) == ["pareto.png"]


def test_wham_places_its_per_stage_designs_when_the_split_leaves_chips_empty():
    """Designs S (8 MB of buffer, 83.84 W) and L (16 MB, 86.72 W), else alike. Node times (ms): n0 (add) 0.034037
    and n2 (exp) 0.060243 on both; n1 (1 MB moved, no shape) 0.0027902 on S, 0.0014286 on L (buffer- against
    DRAM-bound); n1 -> n2 costs 0.01 ms. On 3 chips of S the split is [n0 | n1 n2] (0.063033 ms; a third stage
    would add 0.01 ms to n2's), two stages. The local search keeps S for the first stage and L for the second, and
    the global pick's combination (S, L) was placed as S on all three chips (a combination shorter than the chips
    was taken for one design on every chip): WHAM reached the optimum's 0.061671 ms only on (L, L), 173.44 W,
    where (S, L) runs it on 170.56 W, the exact method's answer."""
    model = {"maxSizePerFPGA": 1e12, "maxFPGAs": 1, "maxCPUs": 0, "nodes": [
        {"id": 0, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1e6,
         "operators": [{"kind": "vector", "op": "add", "elements": 3_049_648}]},
        {"id": 1, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1e6, "flops": 1e6, "bytes": 1e6},
        {"id": 2, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1e6,
         "operators": [{"kind": "vector", "op": "exp", "elements": 1_349_429}]}],
        "edges": [{"sourceId": 0, "destId": 1, "cost": 0.0}, {"sourceId": 0, "destId": 2, "cost": 0.0},
                  {"sourceId": 1, "destId": 2, "cost": 0.01}]}
    grid = {"tensor_cores": [1], "array_width": [64], "array_depth": [128], "vector_cores": [1],
            "vector_lanes": [128], "buffer_mb": [8, 16]}
    small, large = load_grid(grid).designs()
    exact = placement.codesign(model, chips=3, power=1000.0, grid=grid)
    assert exact.designs == (small, large) and exact.power_w == small.tdp_w + large.tdp_w == 170.5576171875
    found = baselines.wham(model, 3, 606.68, 1000.0, grid=grid)
    assert found.details["stages"] == 2
    assert found.throughput == pytest.approx(exact.value, rel=TIE)
    assert found.designs == (small, large)


@needs_dask
def test_a_sweep_runs_from_the_path_of_its_file(tmp_path):
    # before: AttributeError ("'str' object has no attribute 'models'"), as for a dict
    spec, out = tmp_path / "spec.json", tmp_path / "records.jsonl"
    spec.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY],
                                "baselines": []}))
    summary = sweep.run_sweep(str(spec), out, workers=1, processes=False, quiet=True)
    assert (summary.total, summary.ran, summary.errors) == (1, 1, 0)
    assert [r["status"] for r in sweep.read_records(out)] == ["optimal"]
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(json.loads(spec.read_text()), out, quiet=True)
    assert (caught.value.parameter, caught.value.detail) == ("spec", "must be a SweepSpec or the path of a sweep "
                                                                     "file, not dict")


@pytest.mark.parametrize("field, value, shown", [("models", MLP, repr(MLP)), ("chips", 2, "2"),
                                                 ("baselines", {"wham"}, "set")])
def test_a_spec_made_in_code_takes_lists(field, value, shown):
    # before: a model path was read as a list of one-character models, a chip count raised TypeError
    options = {"models": (MLP,), "chips": (1,), "budgets": ((606.68, 300.0),), field: value}
    with pytest.raises(InvalidParameterError) as caught:
        sweep.SweepSpec(**options)
    assert (caught.value.parameter, caught.value.detail) == (field, f"must be a list (or tuple) of values, not {shown}")


_INTERRUPTED_WHILE_THE_CLUSTER_STARTS = """
import os, signal, sys
import distributed
import placement.cli

start = distributed.Nanny.start_unsafe

async def start_unsafe(self):   # Ctrl-C while the local cluster starts its worker
    os.kill(os.getpid(), signal.SIGINT)
    return await start(self)

distributed.Nanny.start_unsafe = start_unsafe
sys.argv = ["placement", *sys.argv[1:]]
placement.cli.run()
"""


@needs_dask
def test_a_sweep_interrupted_while_its_cluster_starts_stops_with_one_line(tmp_path):
    """Ctrl-C while the local cluster started left it half made; Dask's exit hook then failed to close it, with
    a traceback ("AssertionError: Status.init") after `error: interrupted`. The cluster is now made whole, then
    closed, and the sweep stops with its one line."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": [MLP], "chips": [1], "budgets": [[606.68, 300.0]], "grids": [TINY],
                                "baselines": ["wham"]}))
    out = tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_WHILE_THE_CLUSTER_STARTS, "codesign", "--sweep",
                           str(spec), "--out", str(out), "--workers", "1", "--quiet"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")
    assert out.read_text(encoding="utf-8") == ""


def test_an_interrupted_baseline_says_how_far_it_was(dp_stopped_on, mlp, tiny):
    # Ctrl-C in the DP of the random search's 3rd design combination said "interrupted before the DP found a plan",
    # the words of that one DP run, where the search had placed the model on two combinations
    dp_stopped_on(baselines, 3)
    with pytest.raises(KeyboardInterrupt) as info:
        placement.codesign(mlp, chips=2, power=300, grid=tiny, baseline="random")
    assert str(info.value) == "interrupted after 2 design combinations placed by the random baseline"


def test_a_spec_of_path_objects_is_the_spec_of_their_names():
    """pathlib.Path models and grids were refused as 'models must list file paths, not PosixPath'."""
    named = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY, None))
    spec = sweep.SweepSpec(models=(Path(MLP),), chips=(1,), budgets=((606.68, 300.0),), grids=(Path(TINY), None))
    assert spec == named and (spec.models, spec.grids) == ((MLP,), (TINY, None))
    assert [sweep.configuration_id(c) for c in sweep.configurations(spec)] == \
        [sweep.configuration_id(c) for c in sweep.configurations(named)]


@pytest.mark.parametrize("out, kind", [(None, "NoneType"), (3, "int")])
def test_a_records_file_that_is_no_text_path_is_refused_by_name(out, kind):
    """None as the records file ended run_sweep and read_records in a TypeError of pathlib."""
    for call in (lambda: sweep.run_sweep(SPEC, out, quiet=True), lambda: sweep.read_records(out)):
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert str(error.value) == f"out must be a file path (a str or os.PathLike), not {kind}"


@pytest.mark.parametrize("option, value, message", [
    ("plots", 3, "plots must be a folder path (a str or os.PathLike), not int"),
    ("task", 3, "task must be a function of one configuration or None, not int"),
    ("scheduler", 3, "scheduler must be a Dask scheduler address, not 3"),
    ("quiet", 1, "quiet must be True or False, not 1")])
def test_a_sweep_option_of_the_wrong_kind_is_refused_by_name_before_any_work(tmp_path, option, value, message):
    """plots=3 ended run_sweep in a TypeError of pathlib, task=3 in a TypeError on a worker, scheduler=3 in 'cannot
    reach a Dask scheduler at 3: what answers is no Dask scheduler', and quiet=1 was taken for True."""
    with pytest.raises(InvalidParameterError) as error:
        sweep.run_sweep(SPEC, tmp_path / "records.jsonl", **{option: value})
    assert str(error.value) == message
    assert not (tmp_path / "records.jsonl").exists()


@pytest.mark.parametrize("call, message", [
    (lambda: baselines.fixed(MLP, 2, 606.68, 300, gird=TINY), "fixed() got an unexpected keyword argument 'gird'; "
                                                              "did you mean 'grid'?"),
    (lambda: baselines.wham(MLP, 2, 606.68, 300, top_kk=2), "wham() got an unexpected keyword argument 'top_kk'; "
                                                            "did you mean 'top_k'?"),
    (lambda: baselines.random_search(MLP, 2, 606.68, 300, budgte=2),
     "random_search() got an unexpected keyword argument 'budgte'; did you mean 'budget'?"),
    (lambda: sweep.run_sweep(SPEC, "records.jsonl", worker=1),
     "run_sweep() got an unexpected keyword argument 'worker'; did you mean 'workers'?"),
    (lambda: sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grid=(TINY,)),
     "SweepSpec.__init__() got an unexpected keyword argument 'grid'; did you mean 'grids'?"),
    (lambda: sweep.SweepSpec((MLP,), (1,), ((606.68, 300.0),), random_budgets=2),
     "SweepSpec.__init__() got an unexpected keyword argument 'random_budgets'; did you mean 'random_budget'?")])
def test_a_misspelt_keyword_of_the_co_design_functions_names_the_one_meant(call, message):
    """The baselines, run_sweep and SweepSpec, which docs/codesign.md calls from Python, said only 'got an
    unexpected keyword argument', where placement.codesign names the keyword meant."""
    with pytest.raises(TypeError) as error:
        call()
    assert str(error.value) == message


#: GNMT's training graph contracts to 12 supernodes with 23 ideals, not totally ordered: a limit of 22 refuses it
GNMT_TOO_MANY_IDEALS = (
    "more than 22 ideals in the contracted graph (12 supernodes); the DP over ideals would need too much time and "
    "memory. Raise the limit max_ideals (time and memory grow with it, and memory with the nodes whose outputs cross "
    "each ideal), or coarsen the graph by giving nodes that belong together one colour class")


@needs_dask
def test_a_sweep_runs_at_the_max_ideals_of_its_spec_and_reruns_the_errors_made_at_another(tmp_path):
    """A sweep ran every DP at the default limit on ideals, and the error records of a model past it said to raise
    max_ideals, which a sweep file could not set. At max_ideals 22 each configuration of GNMT is an error record
    that names the key max_ideals; resumed at 23, those records made at 22 are run again, and the new record of
    each configuration replaces its error; resumed at 23 again, or at any other limit, the optima are kept (a
    proven optimum is one at every limit the DP runs under)."""
    spec = sweep.SweepSpec(models=("gnmt-training",), chips=(1, 2), budgets=((606.68, 300.0),), grids=(TINY,),
                           baselines=("wham", "fixed"), max_ideals=22)
    out = tmp_path / "records.jsonl"
    summary = sweep.run_sweep(spec, out, workers=1, processes=False, quiet=True)
    assert (summary.total, summary.ran, summary.errors, summary.infeasible) == (2, 2, 2, 0)
    errors = sweep.read_records(out)
    assert [r["status"] for r in errors] == ["error", "error"]
    assert [r["error"] for r in errors] == [GNMT_TOO_MANY_IDEALS] * 2
    assert [r["settings"] for r in errors] == [{"baselines": ["fixed", "wham"], "max_ideals": 22}] * 2
    raised = dataclasses.replace(spec, max_ideals=23)
    summary = sweep.run_sweep(raised, out, workers=1, processes=False, quiet=True)
    assert (summary.total, summary.skipped, summary.ran, summary.errors) == (2, 0, 2, 0)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 4   # appended: the file keeps what it had
    records = sweep.read_records(out)   # one record per configuration, its last
    assert [r["id"] for r in records] == [r["id"] for r in errors]
    gnmt = load_workload(sweep.sweep_model("gnmt-training"))
    for record in records:
        chips = record["config"]["chips"]
        assert record["status"] == "optimal" and "error" not in record
        assert record["settings"] == {"baselines": ["fixed", "wham"], "max_ideals": 23}
        assert record["value"] == solve_exact(gnmt, load_grid(TINY), chips, 606.68, 300.0).value
        assert record["baselines"]["wham"]["value"] == baselines.wham(gnmt, chips, 606.68, 300.0, grid=TINY).value
        assert record["baselines"]["fixed"]["value"] == baselines.fixed(gnmt, chips, 606.68, 300.0, grid=TINY).value
    for limit in (23, 22, 200_000):
        summary = sweep.run_sweep(dataclasses.replace(spec, max_ideals=limit), out, workers=1, processes=False,
                                  quiet=True)
        assert (summary.skipped, summary.ran) == (2, 0)
    assert sweep.read_records(out) == records


def test_a_configuration_runs_the_exact_method_and_every_baseline_at_its_max_ideals(monkeypatch):
    seen = []
    for name in ("wham", "random_search", "fixed"):
        def spy(*args, _run=getattr(baselines, name), _name=name, **options):
            seen.append((_name, options.get("max_ideals")))
            return _run(*args, **options)
        monkeypatch.setattr(baselines, name, spy)
    spec = sweep.SweepSpec(models=("gnmt-training",), chips=(2,), budgets=((606.68, 300.0),), grids=(TINY,),
                           random_budget=4, max_ideals=23)
    config = sweep.configurations(spec)[0]
    item = {"id": sweep.configuration_id(config), "config": config, "baselines": list(spec.baselines),
            "random_budget": spec.random_budget, "seed": spec.seed, "max_ideals": spec.max_ideals}
    record = sweep.run_configuration(item)
    assert record["status"] == "optimal" and set(record["baselines"]) == {"wham", "random", "fixed"}
    assert seen == [("wham", 23), ("random_search", 23), ("fixed", 23)]
    with pytest.raises(LimitExceededError) as caught:
        sweep.run_configuration({**item, "max_ideals": 22})
    assert str(caught.value) == GNMT_TOO_MANY_IDEALS and caught.value.parameter == "max_ideals"
    assert sweep.SweepSpec(models=("gnmt-training",), chips=(2,), budgets=((606.68, 300.0),)).max_ideals == 200_000


@pytest.mark.parametrize("value, shown", [(0, "0"), (-1, "-1"), (1.5, "1.5"), ("x", "'x'"), (True, "true"),
                                          (None, "null")])
def test_a_max_ideals_that_is_no_positive_integer_is_refused_before_any_configuration_runs(tmp_path, capsys, value,
                                                                                           shown):
    from placement.cli import main

    spec_file = tmp_path / "sweep.json"
    spec_file.write_text(json.dumps({"models": ["gnmt-training"], "chips": [1], "budgets": [[606.68, 300]],
                                     "grids": [TINY], "max_ideals": value}))
    out = tmp_path / "records.jsonl"
    ran: list = []
    with pytest.raises(InvalidInstanceError) as caught:
        sweep.run_sweep(spec_file, out, quiet=True, task=ran.append)
    assert str(caught.value) == f"{spec_file}: max_ideals must be a positive integer, not {shown}"
    with pytest.raises(InvalidParameterError) as refused:
        sweep.SweepSpec(models=("gnmt-training",), chips=(1,), budgets=((606.68, 300.0),), max_ideals=value)
    assert (refused.value.parameter, refused.value.detail) == ("max_ideals", f"must be a positive integer, not {shown}")
    assert main(["codesign", "--sweep", str(spec_file), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == f"error: {spec_file}: max_ideals must be a positive integer, not {shown}\n"
    assert ran == [] and not out.exists()


@needs_dask
def test_a_record_made_before_records_kept_max_ideals_was_made_at_the_default(tmp_path):
    """A record without max_ideals among its settings was made at the default limit: an error is kept by a sweep at
    that limit and run again at another; a record of other baselines settings is refused whatever its limit, unless
    it is an error run again (which replaces it)."""
    spec = sweep.SweepSpec(models=(MLP,), chips=(1,), budgets=((606.68, 300.0),), grids=(TINY,), baselines=("fixed",))
    config = sweep.configurations(spec)[0]
    ident = sweep.configuration_id(config)

    def task(item):   # run on a worker: it says what it was given in its record
        return {"config": item["config"], "status": "error", "error": f"run again at {item['max_ideals']}"}

    for settings in (None, {"baselines": ["fixed"]}):
        out = tmp_path / f"{settings is None}.jsonl"
        sweep.append_record(out, {"id": ident, "config": config, "status": "error", "error": "recorded before",
                                  **({} if settings is None else {"settings": settings})})
        assert sweep.run_sweep(dataclasses.replace(spec, max_ideals=200_000), out, quiet=True).ran == 0
        summary = sweep.run_sweep(dataclasses.replace(spec, max_ideals=500), out, workers=1, processes=False,
                                  quiet=True, task=task)
        assert (summary.ran, summary.errors) == (1, 1)
        assert sweep.read_records(out) == [{"id": ident, "config": config, "status": "error",
                                            "error": "run again at 500",
                                            "settings": {"baselines": ["fixed"], "max_ideals": 500},
                                            "inputs": sweep.input_digests(config)}]
    out = tmp_path / "other.jsonl"
    sweep.append_record(out, {"id": ident, "config": config, "status": "optimal",
                              "settings": {"baselines": ["wham"], "max_ideals": 500}})
    with pytest.raises(InvalidParameterError) as caught:
        sweep.run_sweep(spec, out, quiet=True)
    assert str(caught.value) == (f"out holds a record of {MLP} on 1 chip made with baselines wham, and this sweep asks "
                                 "for baselines fixed: resuming would keep that record; write to another file")
