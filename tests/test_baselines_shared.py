"""The baselines on the published instances of Tarnawski et al. (read from ../shared/tarnawski).

Every throughput baseline's plan is written to a plan file and checked by ``placement verify``
(in the contiguity class the baseline reports): it passes, or the baseline flagged it (status
``error``) and verify rejects it too. Plans that form pipeline stages never beat the DP optimum.
The expert baseline reproduces the published splits' loads; the latency baselines give valid
plans, never below the critical-path bound.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.errors import LimitExceededError
from placement.io.plans import plan_document
from placement.io.tarnawski import read_instance
from placement.solution import Status
from placement.problem.bounds import latency_lower_bound
from placement.solvers.dp import solve_dp
from tests.methods import run_method as solve
from placement.verification.evaluate import evaluate
from placement.verification.latency import evaluate_latency

from tests.test_experts import EXPECTED_MAX_LOAD

TARNAWSKI = Path(__file__).resolve().parents[2] / "shared" / "tarnawski"
THROUGHPUT = TARNAWSKI / "throughput-inputs"
LATENCY = TARNAWSKI / "latency-inputs"
EXPERTS = TARNAWSKI / "human-experts"

pytestmark = pytest.mark.skipif(not TARNAWSKI.is_dir(),
                                reason=f"the published instances are not at {TARNAWSKI} (../shared is absent)")


def files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json")) if folder.is_dir() else []


def label(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@functools.lru_cache(maxsize=None)
def dp_optimum(path: Path) -> float:
    solution = solve_dp(read_instance(path))
    assert solution.status is Status.OPTIMAL
    return solution.objective


def methods() -> list[str]:
    names = ["pipedream", "greedy", "local-search", "single"]
    try:
        import pymetis  # noqa: F401
        names.append("partition")
    except ImportError:
        pass
    return names


@pytest.mark.parametrize("method", methods())
@pytest.mark.parametrize("path", files(THROUGHPUT), ids=label)
def test_throughput_baseline_passes_verify_or_is_flagged(tmp_path, path, method):
    problem = read_instance(path)
    solution = solve(problem, method, restarts=3, seed=0)
    assert solution.plan is not None, solution.message
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_document(solution.plan)))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        status = cli(["verify", str(path), str(plan_file), "--contiguity", solution.contiguity])
    ev = evaluate(problem, solution.plan, solution.contiguity)
    assert solution.objective == ev.max_load
    if solution.status is Status.FEASIBLE:
        assert status == 0 and ev.valid, out.getvalue()
    else:
        assert solution.status is Status.ERROR and status == 1 and not ev.valid
        assert solution.message.startswith(f"the plan is invalid ({len(ev.violations)} violation")
        assert ev.violations[0] in solution.message and ev.violations[0] in out.getvalue()
    if ev.valid and solution.contiguity == "stages":
        assert solution.objective >= dp_optimum(path) * (1 - 1e-12)
    if method == "pipedream":
        assert solution.contiguity == "stages"


@pytest.mark.parametrize("expert", sorted(EXPERTS.glob("*_expert.json")) if EXPERTS.is_dir() else [],
                         ids=lambda p: p.stem)
def test_expert_baseline_reproduces_the_published_splits(expert):
    name = expert.name.removesuffix("_expert.json")
    path = THROUGHPUT / "LayerGraphs" / f"{name}.json"
    solution = solve(read_instance(path), "expert", split=str(expert))
    assert (solution.status, solution.contiguity) == (Status.FEASIBLE, "stages")
    assert solution.objective == pytest.approx(EXPECTED_MAX_LOAD[name], rel=1e-12)
    assert solution.objective >= dp_optimum(path)


@pytest.mark.parametrize("path", files(LATENCY), ids=label)
def test_latency_greedy(path):
    problem = read_instance(path)
    solution = solve(problem, "latency-greedy")
    assert solution.status is Status.FEASIBLE, solution.message
    ev = evaluate_latency(problem, solution.plan)
    assert ev.valid and solution.objective == ev.latency >= latency_lower_bound(problem)


# the DP over ideals is quick on these; gnmt has millions of ideals at this memory bound (the
# zero-cost merges need memory that never binds), and inceptionv3 takes about a minute and a half
DP_SPLIT = ("LayerGraphs/bert24_inference", "LayerGraphs/resnet50_inference", "OperatorGraphs/bert_l-3_inference",
            "OperatorGraphs/bert_l-6_inference", "OperatorGraphs/bert_l-12_inference",
            "OperatorGraphs/resnet50_inference")


@pytest.mark.parametrize("name", DP_SPLIT)
def test_latency_dp_split(name):
    problem = read_instance(LATENCY / f"{name}.json")
    solution = solve(problem, "latency-dp-split")
    assert solution.status is Status.FEASIBLE, solution.message
    ev = evaluate_latency(problem, solution.plan)
    assert ev.valid and solution.objective == ev.latency >= latency_lower_bound(problem)
    assert evaluate(problem, solution.plan).max_load == pytest.approx(solution.stats["dp_max_load"], rel=1e-12)


def test_latency_dp_split_refuses_too_many_ideals():
    with pytest.raises(LimitExceededError, match="^more than 200,000 ideals in the contracted graph"):
        solve(read_instance(LATENCY / "LayerGraphs" / "gnmt_inference.json"), "latency-dp-split")
