"""The DP on the published instances of Tarnawski et al. (read from ../shared; skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.io.plans import read_plan
from placement.io.tarnawski import read_instance
from placement.solution import Status
from placement.solvers.dp import solve_dp
from placement.verification.evaluate import evaluate

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski"
THROUGHPUT = SHARED / "throughput-inputs"
# The InceptionV3 graphs (36,596 ideals, a few seconds each) are left to benchmarks/dp_throughput.py.
SMALL = sorted(p for p in THROUGHPUT.rglob("*.json") if "inceptionv3" not in p.name) if THROUGHPUT.is_dir() else []

pytestmark = pytest.mark.skipif(not THROUGHPUT.is_dir(), reason=f"published instances not found at {SHARED}")


@pytest.mark.parametrize("path", SMALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_dp_solves_and_verifies(path):
    problem = read_instance(path)
    solution = solve_dp(problem)
    assert solution.status is Status.OPTIMAL
    evaluation = evaluate(problem, solution.plan, contiguity="stages")
    assert evaluation.valid, evaluation.violations
    assert evaluation.finest_class == "stages"
    assert evaluation.max_load == pytest.approx(solution.objective, rel=1e-9)
    # The chain-DP upper bound is a valid plan too, so the optimum never exceeds it.
    assert solution.objective <= solution.stats["upper_bound"] * (1 + 1e-12)
    # The optimum is at least the simplest lower bound: the average accelerator-or-CPU work.
    work = sum(min(p for p in n.times if p is not None) for n in problem.nodes)
    devices = sum(t.count for t in problem.device_types)
    assert solution.objective >= work / devices * (1 - 1e-12)


@pytest.mark.parametrize("name", ["bert24_inference", "bert24_training"])
def test_zero_cost_merging_keeps_the_optimum(name):
    # BERT-24 has zero-time nodes that the DP merges (39 -> 30 ideals); without merging it must agree.
    problem = read_instance(THROUGHPUT / "LayerGraphs" / f"{name}.json")
    merged = solve_dp(problem)
    plain = solve_dp(problem, merge_zero_cost=False)
    assert (merged.stats["ideals"], plain.stats["ideals"]) == (30, 39)
    assert merged.objective == pytest.approx(plain.objective, rel=1e-12)


EXPERTS = sorted((SHARED / "human-experts").glob("*_expert.json")) if SHARED.is_dir() else []


@pytest.mark.parametrize("expert", EXPERTS, ids=lambda p: p.stem)
def test_dp_never_worse_than_expert_pipeline(expert):
    # The expert splits are pipelines (class `stages`), so the DP optimum can be no larger.
    problem = read_instance(THROUGHPUT / "LayerGraphs" / expert.name.replace("_expert", ""))
    evaluation = evaluate(problem, read_plan(expert), contiguity="stages", infer_from_colours=True)
    assert evaluation.valid
    optimum = solve_dp(problem).objective
    assert optimum <= evaluation.max_load
