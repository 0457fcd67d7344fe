"""The starting plan of the `none` model: the best of the warm start (the DP's `stages` optimum), the
packing row's assignment and a local search (NoContiguity.searched_start)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import placement
from placement.solvers.baselines.local_search import solve_local_search
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.none import NoContiguity
from placement.solvers.milp.sets import ContiguousSets
from placement.solvers.milp.stages import Stages
from placement.testing.bruteforce import brute_force
from placement.verification.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[1]
BERT24 = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
HAVE_CPSAT = any(name == "cp-sat" and ok for name, ok, _ in backend_availability())

# a chain of seven nodes on three accelerators, no CPU: its stages optimum, the DP's start, is 17.5
# ({0,1,2,3} | {4,5} | {6}: 2+5+2+8 + 0.5 out, 0.5 in + 8+8 + 1 out, 1 in + 7); class none reaches 16
# ({0,2,3}: 12 + 0.5 in (1) + 0.5 + 0.5 out (0, 3) = 13.5; {1,4}: 13 + 0.5 + 0.5 in (0, 3) + 0.5 + 1 out
# (1, 4) = 15.5; {5,6}: 15 + 1 in (4) = 16), its optimum by brute force, and the local search finds it
TIMES, COSTS = (2, 5, 2, 8, 8, 8, 7), (0.5, 0.5, 1, 0.5, 1, 1)
CHAIN = {"maxSizePerFPGA": 100, "maxFPGAs": 3, "maxCPUs": 0,
         "nodes": [{"id": i, "name": f"n{i}", "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": 50,
                    "isBackwardNode": 0, "size": 1} for i, t in enumerate(TIMES)],
         "edges": [{"sourceId": i, "destId": i + 1, "cost": c} for i, c in enumerate(COSTS)]}


def test_the_searched_start_is_the_local_search_s_plan_in_class_none_only():
    problem = placement.load(CHAIN)
    expected = solve_local_search(problem, seed=0)
    plan = NoContiguity().searched_start(problem, 60.0)
    assert [d.nodes for d in plan.devices] == [d.nodes for d in expected.plan.devices]
    assert ContiguousSets().searched_start(problem, 60.0) is None


def test_no_search_for_a_stage_count_and_the_fill_alone_on_other_device_types():
    """With stages=N no start is searched for (neither the local search nor the LPT fill counts the devices
    it fills); on a catalogue with types other than accelerator and cpu, which the local search does not move
    classes between, the start is the LPT fill's. There (instances/tiny/three-types.json: a, d take 4 on
    fast, 6 on slow, 5 on the cpu; b, c the same but no cpu; b feeds c at cost 1) the fill's types are a on
    slow, b and c on fast, d on the cpu (all four start on fast, average 16; a and d, of ratio 5/4, go to the
    cpu, 5 and 10 < 12; a, of ratio 6/5, to slow, 6 < 10; b and c cannot leave fast for slow, 12 ≥ 8), so
    its loads are 8, 6 and 5: the optimum, which the MILP proves."""
    assert NoContiguity(stages=2).searched_start(placement.load(CHAIN), 60.0) is None
    three = placement.load(ROOT / "instances" / "tiny" / "three-types.json")
    with pytest.raises(placement.PlacementError):
        solve_local_search(three)
    plan = NoContiguity().searched_start(three, 60.0)
    assert {dev.type: dev.nodes for dev in plan.devices} == {"fast": (2, 3), "slow": (1,), "cpu": (4,)}
    if HAVE_CPSAT:
        assert placement.solve(three, method="milp", backend="cp-sat", contiguity="none").value == 8.0


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_milp_starts_from_the_local_search_where_it_beats_the_dp():
    said: list[str] = []
    searched = placement.solve(CHAIN, method="local-search")
    dp = placement.solve(CHAIN)
    assert (dp.value, searched.value, brute_force(placement.load(CHAIN), "none").objective) == (17.5, 16.0, 16.0)
    result = placement.solve(CHAIN, method="milp", backend="cp-sat", contiguity="none", threads=1,
                             progress=said.append)
    assert "starting plan from a local search: 16" in said
    assert (result.status, result.value) == ("optimal", 16.0)
    assert "started from a plan of value 16" in result.message


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_search_for_a_start_is_announced_on_a_large_graph(monkeypatch):
    """On 100,000 nodes under ``none`` the local search and the LPT fill took about 7 s before the model was
    built, without a line of progress; a graph of at least ``START_NOTED_NODES`` nodes (here every graph) has
    the search announced, with its share of the time left (5% of what 20 s leave), and with ``stages=N``, where
    the search runs nothing, it is not."""
    from placement.solvers.milp import driver

    monkeypatch.setattr(driver, "START_NOTED_NODES", 0)
    said: list[str] = []
    placement.solve(CHAIN, method="milp", backend="cp-sat", contiguity="none", time_limit=20, progress=said.append)
    seeking = [line for line in said if line.startswith("seeking a starting plan")]
    assert len(seeking) == 1
    assert re.fullmatch(r"seeking a starting plan: a local search and the LPT fill \(its share of the time left: "
                        r"\d+(\.\d+)? s\)", seeking[0]), seeking
    said.clear()
    placement.solve(CHAIN, method="milp", backend="cp-sat", contiguity="none", stages=2, time_limit=20,
                    progress=said.append)
    assert not [line for line in said if line.startswith("seeking a starting plan")]
    monkeypatch.setattr(driver, "START_NOTED_NODES", len(CHAIN["nodes"]) + 1)
    placement.solve(CHAIN, method="milp", backend="cp-sat", contiguity="none", time_limit=20, progress=said.append)
    assert not [line for line in said if line.startswith("seeking a starting plan")]


@pytest.mark.skipif(not HAVE_CPSAT or not BERT24.exists(), reason="needs OR-Tools and ../shared")
def test_bert24_inference_none_starts_below_the_dp_s_plan():
    """BERT-24 inference: the DP's stages optimum is 17.7899, the local search's plan (10 restarts) lower;
    the MILP starts from it and proves the optimum 17.714718 (DESIGN.md's published value)."""
    said: list[str] = []
    dp = placement.solve(BERT24)
    searched = placement.solve(BERT24, method="local-search")
    assert searched.value < dp.value
    result = placement.solve(BERT24, method="milp", backend="cp-sat", contiguity="none", threads=1,
                             time_limit=120, progress=said.append)
    assert f"starting plan from a local search: {searched.value:.6g}" in said
    assert result.status == "optimal" and result.value == pytest.approx(17.714718, abs=1e-6)


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_a_solve_whose_time_runs_out_before_the_model_returns_the_local_search_s_plan(monkeypatch):
    """The local search runs before the model is built: where the time limit then runs out, its plan (16),
    not the DP's (17.5), is the answer."""
    import time

    from placement.solvers.milp.driver import START_SEARCH_SHARE

    real = NoContiguity.searched_start

    def slow(self, problem, seconds):
        found = real(self, problem, seconds)
        time.sleep(seconds / START_SEARCH_SHARE + 0.05)   # past the deadline: no model is built
        return found

    monkeypatch.setattr(NoContiguity, "searched_start", slow)
    result = placement.solve(CHAIN, method="milp", backend="cp-sat", contiguity="none", time_limit=2)
    assert (result.status, result.value) == ("feasible", 16.0)
    assert result.message.startswith("the time limit ran out before the model was built")


def pairs() -> placement.Instance:
    """Six parts u_i -> v_i (transfer cost 1) on 2 accelerators, no CPU; the sources listed first, so that a
    topological order by position runs u_1..u_6 before v_1..v_6. The parts take 5, 5, 4, 4, 3, 3 (24 in
    all): no plan of any class is below 24 / 2 = 12, and {5, 4, 3} on each accelerator is 12 with no transfer.
    The fill of parts deals them in that order to the less loaded accelerator, the first on ties: 5 | 5,
    9 | 9, 12 | 12, parts 0, 2 and 4 on the first."""
    from placement.problem.instance import Edge, Node, make_two_type_problem

    halves = [(2.0, 3.0), (1.0, 4.0), (2.0, 2.0), (3.0, 1.0), (1.0, 2.0), (2.0, 1.0)]
    nodes = [Node(i, f"u{i}", (a, None), 1.0, out_cost=1.0) for i, (a, _) in enumerate(halves)]
    nodes += [Node(10 + i, f"v{i}", (b, None), 1.0) for i, (_, b) in enumerate(halves)]
    return make_two_type_problem(nodes, [Edge(i, 10 + i) for i in range(6)], 2, 0, math.inf)


@pytest.mark.parametrize("formulation", [Stages, ContiguousSets])
def test_the_stages_and_sets_starts_are_the_fill_of_whole_parts(formulation):
    problem = pairs()
    plan = formulation().searched_start(problem, 60.0)
    assert evaluate(problem, plan, "stages").max_load == 12.0
    assert sorted(sorted(dev.nodes) for dev in plan.devices) == [[0, 2, 4, 10, 12, 14], [1, 3, 5, 11, 13, 15]]
    assert formulation(stages=2).searched_start(problem, 60.0) is None


def test_the_local_search_keeps_its_share_of_the_time_whatever_the_fill_takes(monkeypatch):
    """The local search's plan is what the start was before the LPT fill joined it: it has the whole share of
    ``seconds`` however long the fill runs (here a fill that uses far more than the share on a clock the start
    reads), so the start is never worse than the local search's plan alone."""
    import types

    from placement.solvers.baselines import local_search, lpt
    from placement.solvers.milp import none

    clock = types.SimpleNamespace(now=1000.0)
    clock.perf_counter = lambda: clock.now
    monkeypatch.setattr(none, "time", clock, raising=False)   # the clock the start reads, where it reads one

    def slow_fill(problem, deadline=math.inf, seed=0):
        clock.now += 100.0
        return None

    limits = []

    def recording_search(problem, **options):
        limits.append(options["time_limit"])
        return solve_local_search(problem, **options)

    monkeypatch.setattr(lpt, "lpt_plan", slow_fill)
    monkeypatch.setattr(local_search, "solve_local_search", recording_search)
    problem = placement.load(CHAIN)
    plan = NoContiguity().searched_start(problem, 2.0)
    assert limits == [2.0]
    assert evaluate(problem, plan, "none").max_load == 16.0   # the local search's plan (module comment)
