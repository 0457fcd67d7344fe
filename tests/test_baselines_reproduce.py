"""benchmarks/reproduce.py end to end, on a folder laid out like ../shared/tarnawski holding the
project's own tiny instances: every run happens, every plan is verified, the checks hold, and the
tables show the hand-solved optima."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny"


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory):
    pytest.importorskip("ortools")
    base = tmp_path_factory.mktemp("tarnawski")
    (base / "throughput-inputs" / "LayerGraphs").mkdir(parents=True)
    (base / "latency-inputs" / "LayerGraphs").mkdir(parents=True)
    (base / "human-experts").mkdir()
    shutil.copy(TINY / "chain4.json", base / "throughput-inputs" / "LayerGraphs")
    shutil.copy(TINY / "memory-chain.json", base / "latency-inputs" / "LayerGraphs")
    # an expert who cuts chain4 after a: {a} 4 + c(a) 1 = 5; {b, c, d} 3 + 2 + 5 + c(a) 1 = 11
    (base / "human-experts" / "chain4_expert.json").write_text(
        json.dumps({"maxLoad": -1, "fpgas": [{"load": -1, "nodes": [1]}, {"load": -1, "nodes": [2, 3, 4]}],
                    "cpus": []}))
    out = base / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce.py"), "--instances", str(base),
                           "--out", str(out), "--time-limit", "20", "--heuristic-time-limit", "5",
                           "--restarts", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc, out


def test_runs_and_writes_every_output(reproduction):
    proc, out = reproduction
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("throughput.md", "latency.md", "results.json"):
        assert (out / name).is_file()
    assert "13/13" in proc.stderr                     # the progress line reached the end
    assert len(list((out / "plans").glob("*.json"))) == 13


def test_results_hold_the_hand_solved_values(reproduction):
    _, out = reproduction
    results = json.loads((out / "results.json").read_text())
    (chain,) = results["throughput"]
    runs = chain["runs"]
    # chain4 a(4) -c1-> b(3) -c0.5-> c(2) -c1-> d(5), 2 accelerators: cut after b: 7 + 0.5 on each side
    assert (runs["dp"]["status"], runs["dp"]["value"]) == ("optimal", 7.5)
    assert runs["expert"]["value"] == 11.0 and runs["expert"]["plan_class"] == "stages"
    assert runs["single"]["value"] == 14.0
    for method, rec in runs.items():
        assert rec.get("valid") is True and rec["verify_exit"] == 0, (method, rec)
    assert runs["milp-none"]["status"] == "optimal" and runs["milp-none"]["value"] <= 7.5
    assert chain["checks"] and all(c["ok"] for c in chain["checks"])
    (memory_chain,) = results["latency"]
    lat = memory_chain["runs"]
    # see tests/test_baselines.py::test_latency_greedy_by_hand: greedy 13.5, optimum 13
    assert lat["latency-greedy"]["value"] == 13.5
    assert (lat["milp-latency"]["status"], lat["milp-latency"]["value"]) == ("optimal", 13.0)
    assert lat["latency-chain"]["value"] == 13.0   # exact on a chain (tests/test_latency_chain.py)
    # the critical path with cheapest times is 2 + 2 + 2, the path bound 13 (the graph is one path:
    # tests/test_latency_path_bound.py::test_memory_chain_by_hand)
    assert memory_chain["lower_bound"] == 13.0
    assert results["failed_checks"] == 0


def test_tables(reproduction):
    _, out = reproduction
    throughput = (out / "throughput.md").read_text()
    assert "| LayerGraphs/chain4 | 7.500 optimal | " in throughput
    assert "11.000 ×1.467 stages" in throughput          # the expert: 11 / 7.5
    assert "No plan beats a proven optimum or bound of its class" in throughput
    latency = (out / "latency.md").read_text()
    assert "| LayerGraphs/memory-chain | 13.000 optimal | 13.000 | 13.500 ×1.038 stages |" in latency


def test_report_only_rebuilds_the_same_tables(reproduction):
    _, out = reproduction
    before = (out / "throughput.md").read_text(), (out / "latency.md").read_text()
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce.py"), "--out", str(out),
                           "--report-only", "--no-plot"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ((out / "throughput.md").read_text(), (out / "latency.md").read_text()) == before


def test_relative_folders_are_the_callers(tmp_path):
    """``--instances`` and ``--out`` given relative name folders of the directory the script is run from, though
    each run happens in a process of its own started from the repository root: the instances, the expert split,
    the plans and the plans the MILPs start from are all found."""
    pytest.importorskip("ortools")
    given = tmp_path / "given"
    for folder in ("throughput-inputs/LayerGraphs", "latency-inputs/LayerGraphs", "human-experts"):
        (given / folder).mkdir(parents=True)
    shutil.copy(TINY / "chain4.json", given / "throughput-inputs" / "LayerGraphs")
    shutil.copy(TINY / "memory-chain.json", given / "latency-inputs" / "LayerGraphs")
    (given / "human-experts" / "chain4_expert.json").write_text(
        json.dumps({"maxLoad": -1, "fpgas": [{"load": -1, "nodes": [1]}, {"load": -1, "nodes": [2, 3, 4]}]}))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce.py"), "--instances", "given",
                           "--out", "out", "--time-limit", "20", "--heuristic-time-limit", "5", "--restarts", "2",
                           "--no-plot"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    (chain,), (memory_chain,) = results["throughput"], results["latency"]
    assert {method: rec["status"] for method, rec in memory_chain["runs"].items()} == {
        "latency-greedy": "feasible", "latency-dp-split": "feasible", "latency-chain": "feasible",
        "milp-latency": "optimal"}
    assert memory_chain["runs"]["milp-latency"]["value"] == 13.0
    runs = chain["runs"]
    assert all(rec.get("valid") is True for rec in runs.values()), {m: rec["status"] for m, rec in runs.items()}
    assert (runs["dp"]["value"], runs["expert"]["value"], runs["milp-sets"]["status"]) == (7.5, 11.0, "optimal")
    assert Path(runs["milp-sets"]["warm_start"]).is_file()
    assert len(list((tmp_path / "out" / "plans").glob("*.json"))) == 13
