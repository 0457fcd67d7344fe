"""The published human-expert splits (Tarnawski et al. 2020) evaluated on their layer graphs.

The data lives in ../shared/tarnawski (third-party, never copied into the repository); the tests
skip when it is absent. Every expert file lists every node of its instance (the training splits
list the backward nodes too), so colour inference places nothing; all six splits are valid
pipelines under the memory bound, and their devices are already listed in pipeline order.

Expected max loads (ms) were computed independently of the package, straight from the raw JSON
(Σ fpgaLatency + Σ cost of each boundary source once, edge by edge; see ``raw_loads`` below,
which the tests also run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.io.plans import read_plan
from placement.io.tarnawski import read_instance
from placement.problem.instance import ACCELERATOR
from placement.plan import DeviceAssignment, Plan
from placement.verification.evaluate import evaluate, pipeline_order

SHARED = Path(__file__).resolve().parents[2] / "shared"
TARNAWSKI = SHARED / "tarnawski"
EXPERTS = TARNAWSKI / "human-experts"
GRAPHS = TARNAWSKI / "throughput-inputs" / "LayerGraphs"

pytestmark = pytest.mark.skipif(not EXPERTS.is_dir(),
                                reason=f"the published expert splits are not at {EXPERTS} (../shared is absent)")

EXPECTED_MAX_LOAD = {
    "bert24_inference": 20.083953125,
    "bert24_training": 49.40490625,
    "gnmt_inference": 46.208451171875,
    "gnmt_training": 137.15390234375,
    "inceptionv3_inference": 102.48207604980469,
    "resnet50_inference": 43.91825781250001,
}


def expert_files() -> list[Path]:
    return sorted(EXPERTS.glob("*_expert.json")) if EXPERTS.is_dir() else []


def instance_path(expert: Path) -> Path:
    return GRAPHS / expert.name.replace("_expert.json", ".json")


def raw_loads(expert: Path) -> list[float]:
    """Accelerator loads straight from the raw JSON files, without the package."""
    instance = json.loads(instance_path(expert).read_text())
    split = json.loads(expert.read_text())
    latency = {n["id"]: n["fpgaLatency"] for n in instance["nodes"]}
    loads = []
    for device in split["fpgas"]:
        held = set(device["nodes"])
        paid = {}  # boundary source -> its cost, once per device whatever the direction or edge count
        for e in instance["edges"]:
            if (e["sourceId"] in held) != (e["destId"] in held):
                paid[e["sourceId"]] = e["cost"]
        loads.append(sum(latency[v] for v in held) + sum(paid.values()))
    return loads


def test_every_expert_file_is_covered():
    assert {p.name.removesuffix("_expert.json") for p in expert_files()} == set(EXPECTED_MAX_LOAD)


@pytest.mark.parametrize("expert", expert_files(), ids=lambda p: p.stem)
def test_expert_split_evaluates(expert):
    problem = read_instance(instance_path(expert))
    plan = read_plan(expert)
    ev = evaluate(problem, plan, "stages", infer_from_colours=True)
    name = expert.name.removesuffix("_expert.json")
    print(f"{name}: max load {ev.max_load!r}, finest class {ev.finest_class}, violations {list(ev.violations)}")
    assert ev.valid, ev.violations
    assert ev.inferred == ()                    # the files list every node
    assert ev.finest_class == "stages"
    assert pipeline_order(problem, plan) == tuple(range(len(plan.devices)))
    assert [r.type for r in ev.devices] == [ACCELERATOR] * 6 + ["cpu"]
    assert ev.devices[-1].nodes == () and ev.devices[-1].load == 0.0
    assert all(r.memory <= r.memory_bound for r in ev.devices)
    assert ev.max_load == pytest.approx(EXPECTED_MAX_LOAD[name], rel=1e-12)
    assert [r.load for r in ev.devices[:6]] == pytest.approx(raw_loads(expert), rel=1e-12)
    for r in ev.devices:
        assert r.forward_load + r.backward_load == pytest.approx(r.load, rel=1e-12)
        if not problem.is_training:
            assert r.backward_load == 0.0


@pytest.mark.parametrize("expert", [p for p in expert_files() if "training" in p.name], ids=lambda p: p.stem)
def test_training_expert_listing_forward_nodes_only(expert):
    """Drop the backward nodes from the split: colour inference puts them back with their mates."""
    problem = read_instance(instance_path(expert))
    full = read_plan(expert)
    backward = {n.id for n in problem.nodes if n.backward}
    forward_only = Plan(tuple(DeviceAssignment(d.type, tuple(v for v in d.nodes if v not in backward))
                              for d in full.devices))
    ev = evaluate(problem, forward_only, "stages", infer_from_colours=True)
    assert ev.valid
    assert sorted(ev.inferred) == sorted(backward)
    reference = evaluate(problem, full, "stages")
    assert [sorted(r.nodes) for r in ev.devices] == [sorted(r.nodes) for r in reference.devices]
    assert ev.max_load == pytest.approx(reference.max_load, rel=1e-12)
    # without inference the backward nodes are reported missing, one line each
    plain = evaluate(problem, forward_only)
    assert len(plain.violations) == len(backward)
    assert all(v.endswith(" is not placed") for v in plain.violations)
