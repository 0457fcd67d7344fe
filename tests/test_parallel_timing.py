"""The planner's exact time per batch (placement.parallel.timing) and the search that minimises it.

Hand-worked batches (forward share φ = 1/3, Piper's all-reduce ``4(d − 1)/d · W``), agreement with
the event simulator (independent code) on random plans, and the search's optimum against brute
force over every plan of tiny instances. Chains as in tests/test_simulate_parallel.py: node ``i``
with time per sample ``C_i``, one node per stage.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import placement
from placement.errors import InvalidParameterError, InvalidPlanError
from placement.io.piper import PiperInstance, parse_piper
from placement.parallel import ParallelPlan, ParallelStage
from placement.parallel.batch_search import search_time_per_batch
from placement.parallel.dp import solve_parallel
from placement.parallel.timing import StageTimes, _with_allreduce, batch_time, stage_times, time_per_batch
from placement.simulation.parallel import simulate_parallel
from placement.testing.bruteforce_parallel import brute_force_parallel

from tests.strategies_parallel import piper_instances, typed_piper_instances
from tests.test_simulate_parallel import chain, one_per_stage

SHARED = Path(__file__).resolve().parents[2] / "shared" / "piper"


# --- hand-worked batches -------------------------------------------------------------------------

def test_1f1b_waits_only_for_the_round_trip():
    # C = (9, 3, 6), m = 4, d = 1: F, B = (3, 6), (1, 2), (2, 4); warm-up y − 1 = (2, 1, 0).
    # Stage 0: F0 0–3, F1 3–6, F2 6–9; micro-batch 0 returns: stage 1 F0 3–4, stage 2 F0 4–6, B0 6–10,
    # stage 1 (F0, F1 6–7, B0 10–12), so stage 0 waits until 12: B0 12–18, F3 18–21, B1 21–27,
    # B2 27–33, B3 33–39. The flow-shop formula 4·9 + 3 + 6 = 45 is only an upper bound.
    instance = chain([9, 3, 6], m=4)
    assert time_per_batch(instance, one_per_stage(instance, [1, 1, 1]), "1f1b") == 39.0


def test_gpipe_runs_forwards_at_the_largest_forward_and_backwards_at_the_largest_backward():
    # C = (6, 17), node 0 sends 6 bytes of syncTimeBw on its edge (bandwidth 1), m = 4:
    # F0 = 6 + 2 = 8, B0 = 6 + 4 = 10, F1 = 17/3, B1 = 34/3. Forwards: stage 0 ends F3 at 32, stage 1
    # F3 at 32 + 17/3; its backwards then run back to back: 32 + 17/3 + 4·34/3 = 83; stage 0's last
    # backward 83 + 10 = 93 (the flow-shop formula gives 4·18 + 17 = 89).
    instance = chain([6, 17], m=4, sync_bw=[6, 0])
    assert time_per_batch(instance, one_per_stage(instance, [1, 1]), "gpipe") == pytest.approx(93.0, rel=1e-12)


def test_gpipe_all_reduce_after_the_last_backward_of_the_rank():
    # C = (3, 15), P = (0, 20), d = (2, 2), m = 8: two identical pipelines of n = 4 micro-batches,
    # F, B = (1, 2), (5, 10). Stage 1's forwards of a replica end 6, 11, 16, 21, its backwards 31, 41,
    # 51, 61; stage 0's backwards follow each, the last 61–63. Stage 1's ring: 2 steps of 2·20/2 = 20
    # from 61: 101 = T (stage 0 has no parameters; the flow-shop formula gave 103).
    instance = chain([3, 15], m=8, parameters=[0, 20])
    assert time_per_batch(instance, one_per_stage(instance, [2, 2]), "gpipe") == 101.0


def test_gpipe_with_replicas_of_different_counts():
    # C = (3, 12), d = (1, 4), m = 8: F, B = (1, 2), (4, 8). Replica r of stage 1 gets micro-batches r
    # and r + 4: F(r) r+1..r+5, F(r+4) r+5..r+9, B(r) r+9..r+17, B(r+4) r+17..r+25. So stage 1's
    # backwards of micro-batches 0…7 end at 17, 18, 19, 20, 25, 26, 27, 28; stage 0 (its forwards over by
    # 8) runs its backwards of 2 each in that order as they come: 17–19, 19–21, 21–23, 23–25, 25–27,
    # 27–29, 29–31, 31–33.
    instance = chain([3, 12], m=8)
    assert time_per_batch(instance, one_per_stage(instance, [1, 4]), "gpipe") == 33.0


def test_single_stage_meets_the_bound_and_ring_vs_piper_all_reduce():
    # One stage, d = 2, m = 4, C = 6, P = 10: each replica runs 2·6 = 12, then 2 ring steps of
    # β·10/2: Piper's β = 2 gives 12 + 20 = 32 = m·TPS (TPS = 6/2 + 4·1·10/(2·4) = 8); PALM's 12 + 10.
    instance = chain([6], m=4, parameters=[10])
    plan = one_per_stage(instance, [2])
    assert time_per_batch(instance, plan, "1f1b") == 32.0
    assert time_per_batch(instance, plan, "gpipe", allreduce="ring") == 22.0


def _ring_step_by_step(done: list[float], step: float) -> float:
    """The ring's end by the recursion of the module docstring, link by link and step by step."""
    d = len(done)
    arrived = [0.0] * d
    for s in range(2 * (d - 1)):
        previous = arrived[:]
        for r in range(d):
            begin = max(arrived[r], done[r], done[(r + 1) % d])
            arrived[r] = (max(begin, previous[(r - 1) % d]) if s else begin) + step
    return max(arrived)


def test_all_reduce_of_many_replicas_ends_its_ring_after_the_latest_replica():
    # One stage, d = m = 2048, C = 3, P = 2048: each replica runs one micro-batch (3), then 2·2047 ring steps of
    # 2·2048/2048 = 2: 3 + 8188 = 8191 (= m·TPS: TPS = 3/2048 + 4·2047·2048/(2048·2048)). Taken link by link,
    # the ring's 2(d − 1)·d steps cost seconds here and hours at d = 10^5; it ends 2(d − 1) steps after the
    # latest replica's last task, as the step-by-step recursion finds on small rings.
    instance = chain([3], m=2048, parameters=[2048])
    assert time_per_batch(instance, one_per_stage(instance, [2048]), "1f1b") == 8191.0
    for done, step in (([5.0, 1.0, 2.0, 0.5], 0.1), ([0.3, 0.7, 0.1], 1e-9), ([1.0, 1.0], 0.0), ([2.5] * 5, 0.7)):
        ends = np.array(done)
        ring = [(0, len(done), step)]
        assert _with_allreduce(ends, list(range(len(done))), ring) == _ring_step_by_step(done, step)


def test_interleaved_textbook_bubble():
    # p = 2 ranks, v = 2 chunks, 4 equal stages (F, B = 1, 2), m = 4 = n: Megatron's interleaved 1F1B
    # with n = p runs every forward first; its time is n·v·(F + B) + (p − 1)·(F + B) = 8·3 + 3 = 27.
    instance = chain([3, 3, 3, 3], m=4)
    plan = one_per_stage(instance, [1, 1, 1, 1])
    assert time_per_batch(instance, plan, "interleaved", chunks=2) == 27.0
    assert simulate_parallel(instance, plan, "interleaved", chunks=2).time_per_batch == 27.0


def test_forward_share_moves_gpipe_but_not_a_single_stage():
    instance = chain([6, 17], m=4, sync_bw=[6, 0])
    plan = one_per_stage(instance, [1, 1])
    # φ = 1/2: F, B = (9, 9), (8.5, 8.5). Stage 1's forwards end 17.5, 26.5, 35.5, 44.5, its backwards
    # 53, 61.5, 70, 78.5; stage 0's backwards (9 each, the slower) run back to back from 53: 53 + 4·9 = 89
    # (φ = 1/3 gave 93 above; F + B is the same).
    assert time_per_batch(instance, plan, "gpipe", forward_share=0.5) == 89.0
    single = chain([6], m=4)
    # one stage: its 4 micro-batches back to back, 4·6 = 24 whatever φ
    assert time_per_batch(single, one_per_stage(single, [1]), "gpipe", forward_share=0.9) == pytest.approx(24.0)


def test_stage_times_read_the_plan():
    instance = chain([3, 6], edge_bytes=[10], m=4, bandwidth=10, parameters=[20, 40])
    first, second = stage_times(instance, one_per_stage(instance, [2, 2]))
    # stage 0: out = 10/10 = 1, F = 1 + 1 = 2, B = 1 + 2 = 3; stage 1: in = 1, F = 1 + 2 = 3, B = 1 + 4 = 5
    assert (first.forward, first.backward, first.weights, first.downstream) == (2.0, 3.0, 2.0, (1,))
    assert (second.forward, second.backward, second.weights, second.upstream) == (3.0, 5.0, 4.0, (0,))


def test_bad_input():
    instance = chain([3, 6], m=4)
    plan = one_per_stage(instance, [1, 1])
    with pytest.raises(InvalidParameterError, match=r"^schedule must be one of 'gpipe', '1f1b', 'piper', "
                                                    r"'interleaved', not 'zb'$"):
        time_per_batch(instance, plan, "zb")
    with pytest.raises(InvalidParameterError, match=r"^chunks must be 1 under the gpipe schedule, not 2$"):
        time_per_batch(instance, plan, "gpipe", chunks=2)
    with pytest.raises(InvalidPlanError, match=r"^stage 0: d = 3 does not divide the 4 micro-batches of a batch$"):
        time_per_batch(instance, one_per_stage(instance, [3, 1]), "gpipe")
    with pytest.raises(InvalidPlanError, match=r"^edge 0 -> 1 goes from stage 1 back to stage 0$"):
        time_per_batch(instance, list(reversed(plan)), "gpipe")
    with pytest.raises(InvalidPlanError, match=r"^node 1 is in no stage$"):
        time_per_batch(instance, plan[:1], "gpipe")
    with pytest.raises(InvalidPlanError, match=r"^stage 1: d must be a positive integer, not 0$"):
        time_per_batch(instance, one_per_stage(instance, [1, 0]), "1f1b")
    with pytest.raises(InvalidParameterError, match=r"^forward_share must be a finite number ≥ 0 and ≤ 1, not 1.5$"):
        time_per_batch(instance, plan, "gpipe", forward_share=1.5)
    with pytest.raises(InvalidParameterError, match=r"^allreduce must be one of 'piper', 'ring', not 'tree'$"):
        batch_time([StageTimes(1.0, 2.0, 1, 0.0)], 2, "gpipe", allreduce="tree")


# --- against the event simulator ------------------------------------------------------------------

@st.composite
def plans(draw, instance: PiperInstance):
    """A random plan of ``instance``: its nodes in a topological order cut into contiguous stages, each with
    a degree ``t`` its nodes share, a ``d`` dividing ``m``, a random TMPC per node and a device type."""
    ids = [node.id for node in instance.nodes]            # the strategy's nodes are in topological order
    cuts = sorted(draw(st.sets(st.integers(1, len(ids) - 1), max_size=len(ids) - 1))) if len(ids) > 1 else []
    bounds = [0, *cuts, len(ids)]
    nodes = {node.id: node for node in instance.nodes}
    m = instance.microbatches_in_batch
    types = [t for t in instance.device_types]
    stages = []
    for a, b in zip(bounds, bounds[1:]):
        block = ids[a:b]
        kind = draw(st.sampled_from(types)) if types else None
        common = sorted(set.intersection(*(set(nodes[v].configurations) for v in block)))
        t = 1 if kind is not None and kind.cpu else draw(st.sampled_from(common))
        d = draw(st.sampled_from([d for d in range(1, m + 1) if m % d == 0]))
        tmpcs = {v: draw(st.sampled_from([c.id for c in nodes[v].configurations[t]])) for v in block}
        stages.append(ParallelStage(tuple(block), d, t, tmpcs, "" if kind is None else kind.name))
    return stages


@given(st.data(), st.sampled_from(["gpipe", "1f1b", "piper"]), st.sampled_from(["piper", "ring"]),
       st.sampled_from([0.0, 1 / 3, 0.5, 1.0]), st.booleans())
@settings(max_examples=150)
def test_time_per_batch_equals_the_simulated_one(data, schedule, allreduce, share, typed):
    instance = data.draw(typed_piper_instances(4) if typed else piper_instances(5))
    plan = data.draw(plans(instance))
    planned = time_per_batch(instance, plan, schedule, forward_share=share, allreduce=allreduce)
    simulated = simulate_parallel(instance, plan, schedule, forward_share=share, allreduce=allreduce)
    assert planned == pytest.approx(simulated.time_per_batch, rel=1e-12, abs=1e-12)


@given(st.lists(st.integers(1, 9), min_size=2, max_size=6), st.sampled_from([1, 2]),
       st.lists(st.integers(0, 5), min_size=6, max_size=6), st.sampled_from([2, 4, 8]))
@example([3, 5], 2, [0, 4, 0, 0, 0, 0], 4)
@settings(max_examples=60)
def test_interleaved_equals_the_simulated_one(times, d, parameters, m):
    chunks = 2
    if len(times) % chunks or (m // d) % (len(times) // chunks) or m % d:
        return
    instance = chain(times, m=m, parameters=parameters[:len(times)])
    plan = one_per_stage(instance, [d] * len(times))
    planned = time_per_batch(instance, plan, "interleaved", chunks=chunks)
    simulated = simulate_parallel(instance, plan, "interleaved", chunks=chunks, allreduce="piper")
    assert planned == pytest.approx(simulated.time_per_batch, rel=1e-12)


# --- the search -------------------------------------------------------------------------------------

@st.composite
def tight_instances(draw):
    """:func:`piper_instances` of up to 4 nodes with the memory per device just above what the hungriest node
    needs alone (one micro-batch in flight), so that most plans need several stages and the bound ``m·M*``
    rarely meets them: the branch and bound has to decide."""
    instance = draw(piper_instances(max_nodes=4))
    alone = max(min(c.memory_usage_a + c.memory_usage_b for cs in node.configurations.values() for c in cs)
                for node in instance.nodes)
    return replace(instance, max_memory_per_device=alone + draw(st.integers(0, 8)),
                   max_devices=draw(st.integers(2, 5)))


#: found by the test: the DP's plan (node 2 alone on one device at t = 1, TPS-optimal) takes 89 under 1F1B;
#: the optimum, 87 (node 2 at t = 2 "recomp", then nodes 5, 8), which brute force confirms, has three stages: the
#: three-stage candidates find it, and the branch and bound proves it
BRANCH_AND_BOUND_WINS = {
    "maxDevices": 5, "maxMemoryPerDevice": 15.0, "bandwidth": 1.0, "mbsInBatch": 2,
    "nodes": [{"id": 2, "TMPCs": {
        "1": [{"id": "vanilla", "timePerSample": 7.0, "parameterSize": 4.0, "memoryUsageA": 2.0, "memoryUsageB": 4.0,
               "syncTimeFw": {}, "syncTimeBw": {"5": 2.0, "8": 3.0}},
              {"id": "recomp", "timePerSample": 3.0, "parameterSize": 2.0, "memoryUsageA": 3.0, "memoryUsageB": 3.0,
               "syncTimeFw": {}, "syncTimeBw": {"5": 6.0, "8": 0.0}}],
        "2": [{"id": "vanilla", "timePerSample": 8.0, "parameterSize": 0.0, "memoryUsageA": 5.0, "memoryUsageB": 6.0,
               "syncTimeFw": {}, "syncTimeBw": {"5": 2.0, "8": 1.0}},
              {"id": "recomp", "timePerSample": 1.0, "parameterSize": 3.0, "memoryUsageA": 1.0, "memoryUsageB": 4.0,
               "syncTimeFw": {}, "syncTimeBw": {"5": 2.0, "8": 4.0}}]}},
        {"id": 5, "TMPCs": {
            "1": [{"id": "vanilla", "timePerSample": 2.0, "parameterSize": 6.0, "memoryUsageA": 2.0,
                   "memoryUsageB": 6.0, "syncTimeFw": {"2": 5.0}, "syncTimeBw": {"8": 1.0}}],
            "2": [{"id": "vanilla", "timePerSample": 3.0, "parameterSize": 0.0, "memoryUsageA": 2.0,
                   "memoryUsageB": 6.0, "syncTimeFw": {"2": 2.0}, "syncTimeBw": {"8": 6.0}},
                  {"id": "recomp", "timePerSample": 1.0, "parameterSize": 1.0, "memoryUsageA": 4.0,
                   "memoryUsageB": 3.0, "syncTimeFw": {"2": 2.0}, "syncTimeBw": {"8": 1.0}}]}},
        {"id": 8, "TMPCs": {
            "1": [{"id": "vanilla", "timePerSample": 7.0, "parameterSize": 5.0, "memoryUsageA": 3.0,
                   "memoryUsageB": 3.0, "syncTimeFw": {"2": 3.0, "5": 6.0}, "syncTimeBw": {}},
                  {"id": "recomp", "timePerSample": 4.0, "parameterSize": 2.0, "memoryUsageA": 3.0,
                   "memoryUsageB": 2.0, "syncTimeFw": {"2": 6.0, "5": 0.0}, "syncTimeBw": {}}]}}],
    "edges": [{"sourceId": 2, "destId": 5, "communicationCost": 2.0},
              {"sourceId": 2, "destId": 8, "communicationCost": 2.0},
              {"sourceId": 5, "destId": 8, "communicationCost": 4.0}]}


@given(tight_instances(), st.sampled_from(["gpipe", "1f1b"]))
@example(parse_piper(BRANCH_AND_BOUND_WINS), "1f1b")
@settings(max_examples=60)
def test_search_optimum_equals_brute_force(instance, schedule):
    """Every plan enumerated and simulated (brute force) against the search: same least time per batch,
    and the search says it proved it."""
    best, _ = brute_force_parallel(instance, schedule=schedule, objective="time-per-batch")
    result = placement.solve(instance, schedule=schedule, objective="time-per-batch")
    if math.isinf(best):
        assert str(result.status) == "infeasible"
        return
    assert str(result.status) == "optimal"
    assert result.value == pytest.approx(best, rel=1e-9)
    assert simulate_parallel(instance, result.plan, schedule, allreduce="piper").time_per_batch == \
        pytest.approx(result.value, rel=1e-9)


def test_search_leaves_the_dp_plan_when_the_bound_meets_it_and_improves_a_stalling_one():
    # One node C = 6 on up to 2 devices, m = 4: a single stage of d = 2 meets m·TPS = 4·3 = 12: optimal.
    single = chain([6], m=4)
    found = search_time_per_batch(single, devices=2, memory=1e15, schedule="1f1b", max_sets=100)
    assert (found.value, found.bound, found.proven) == (12.0, 12.0, True)


def test_search_tries_larger_degrees_where_fill_and_drain_keep_the_dp_plan_from_the_bound():
    # Nine nodes of C = 3 (F = 1, B = 2) and P = 0.25 each, m = 9, 9 devices, 1F1B (nine nodes: no branch and
    # bound). The DP's plan, nine stages of d = 1, is the only one of largest TPS 3 (a stage of k nodes at d
    # has TPS ≥ 3k/d, plus a ring where d > 1, and Σ d ≤ 9 = Σ k), so the bound is m·M* = 27; micro-batch 0
    # reaches the last stage at 8, which then runs 9·3 = 27, and the last backward returns over 8·2: 51, and
    # 1F1B does not stall there (GPipe takes as long). One stage of d = 9: each replica runs one micro-batch of
    # 27, then 2·8 ring steps of 2·2.25/9 = 0.5: 35 = m·TPS. Three stages of d = 3: 6 + 3·9 + 2·6 = 45, then
    # stage 0's 4 ring steps of 2·0.75/3: 47.
    instance = chain([3.0] * 9, m=9, parameters=[0.25] * 9)
    found = search_time_per_batch(instance, devices=9, memory=1e15, schedule="1f1b", max_sets=100)
    assert (found.value, found.bound, found.proven) == (35.0, 27.0, False)
    assert (found.stats["dp_plan_time_per_batch"], found.stats["dp_plan_stalls"]) == (51.0, False)
    assert [(s.nodes, s.d, s.t) for s in found.plan.stages] == [(tuple(range(9)), 9, 1)]
    assert found.stats["candidates"] == 2    # d = 3 and d = 9; d = 1 is the DP's own degree


@pytest.mark.parametrize("schedule, dp_plan_time", [("1f1b", 36.0), ("gpipe", 39.0)])
def test_search_tries_a_single_stage_of_a_degree_whose_uniform_plans_have_more_stages(schedule, dp_plan_time):
    # C = (8, 9), the edge's cost 1 and node 0's syncTimeBw 2 (a boundary of 2·(1 + 2) = 6 on stage {0}'s side,
    # 2·1 = 2 on stage {1}'s), P = (0, 10), m = 2, 4 devices. The DP's plan, stages {0}, {1} of d = 1, has TPS
    # max(8 + 6, 9 + 2) = 14, so the bound is 2·14 = 28; its F and B (a third and two thirds of C, half the
    # boundary each) are 17/3 and 25/3 on stage 0, 4 and 7 on stage 1: 1F1B ends stage 0's second B at
    # 83/3 + 25/3 = 36, GPipe at 92/3 + 25/3 = 39. The uniform candidate d = 2 has one stage (Σ d ≤ 2), TPS
    # 17/2 + 4·10/(2·2) = 18.5: 37, no better. One stage of d = 1 on one device runs both micro-batches of 17
    # back to back: 34, the optimum. No branch and bound (max_nodes=0): the single-stage candidate finds it.
    instance = chain([8.0, 9.0], edge_bytes=[1.0], m=2, parameters=[0.0, 10.0], sync_bw=[2.0, 0.0])
    found = search_time_per_batch(instance, devices=4, memory=1e15, schedule=schedule, max_sets=100, max_nodes=0)
    assert (found.value, found.bound, found.proven) == (34.0, 28.0, False)
    assert found.stats["dp_plan_time_per_batch"] == dp_plan_time
    assert (found.stats["candidates"], found.stats["single_stage_candidates"]) == (1, 1)
    assert [(s.nodes, s.d, s.t) for s in found.plan.stages] == [((0, 1), 1, 1)]
    proven = search_time_per_batch(instance, devices=4, memory=1e15, schedule=schedule, max_sets=100)
    assert (proven.value, proven.proven) == (34.0, True)


def test_uniform_degrees_that_cannot_help_are_not_solved():
    # C = (6, 3), m = 4, 3 devices, 1F1B: the DP's plan d = (2, 1) (TPS 3 each, bound 12) takes 18 (stage 1
    # runs F, B of 1 and 2 as micro-batches come: its B(3) ends at 14, stage 0's B(3) of 4 at 18). A plan of
    # d = 2 everywhere has one stage (2·t ≤ 3 devices), of TPS ≥ L/2 = 9/2: 4·9/2 = 18 does not beat 18, so
    # only d = 1 is solved.
    found = search_time_per_batch(chain([6.0, 3.0], m=4), devices=3, memory=1e15, schedule="1f1b", max_sets=100)
    assert (found.stats["dp_plan_time_per_batch"], found.stats["candidates"], found.value) == (18.0, 1, 18.0)
    # Four nodes of C = 3, each keeping 10 bytes on devices of 10, m = 4, 4 devices: every node needs a stage
    # of its own. Under 1F1B no plan of d = 2 (two stages at most) fits, so d = 4 is not solved (its plans would
    # fit at d = 2: the same stages and micro-batches in flight); GPipe solves both. No plan is known to fit at
    # d = 2 (one stage holds 40 bytes; the pass along the chain finds none), so its DP skips no stage for the
    # cap, and its answer shows that none fits.
    instance = chain([3.0] * 4, m=4, resident=[10.0] * 4)
    assert search_time_per_batch(instance, devices=4, memory=10.0, schedule="1f1b",
                                 max_sets=100).stats["candidates"] == 1
    assert search_time_per_batch(instance, devices=4, memory=10.0, schedule="gpipe",
                                 max_sets=100).stats["candidates"] == 2


def test_restricted_dps_are_capped_at_the_incumbent():
    # C = (6, 3), m = 4, 3 devices, 1F1B, as above: the incumbent takes 18, so only a plan of m·TPS < 18, TPS
    # below 4.5, can beat it. The DP restricted to d = 1 has the optimum 6 (node 0 alone on a device of speed
    # 1): above the cap, it returns no plan and says so (one stage of both nodes fits: no proof that none
    # does); uncapped it returns that plan.
    instance = chain([6.0, 3.0], m=4)
    capped = solve_parallel(instance, devices=3, memory=1e15, schedule="1f1b", allowed=[(1, 1)], below=4.5)
    assert (capped.value, capped.plan, capped.stats["none_below"]) == (math.inf, None, 4.5)
    whole = solve_parallel(instance, devices=3, memory=1e15, schedule="1f1b", allowed=[(1, 1)])
    assert whole.value == 6.0 and "none_below" not in whole.stats
    # a cap above the optimum changes nothing
    above = solve_parallel(instance, devices=3, memory=1e15, schedule="1f1b", allowed=[(1, 1)], below=6.5)
    assert (above.value, above.plan) == (whole.value, whole.plan) and "none_below" not in above.stats
    # no plan known to fit (four nodes of 10 bytes on devices of 10 at d = 2, where none fits): nothing skipped
    tight = chain([3.0] * 4, m=4, resident=[10.0] * 4)
    none = solve_parallel(tight, devices=4, memory=10.0, schedule="1f1b", allowed=[(1, 2)], below=1.0)
    assert none.plan is None and "none_below" not in none.stats


def test_objective_is_refused_with_piper_schedule():
    instance = chain([3, 6], m=4)
    with pytest.raises(InvalidParameterError, match=r"^schedule must be one of 'gpipe', '1f1b' with "
                                                    r"objective='time-per-batch', not 'piper'$"):
        placement.solve(instance, objective="time-per-batch")
    with pytest.raises(InvalidParameterError, match=r"^objective must be one of 'throughput', 'time-per-batch' "
                                                    r"for a Piper instance, not 'latency'$"):
        placement.solve(instance, objective="latency")


def test_cli_solves_for_the_time_per_batch(tmp_path, capsys):
    # Nodes C = (9, 3) on 2 devices, m = 4: one stage with d = 2 runs 2·12 = 24 on each replica and nothing
    # waits, meeting the bound m·TPS = 4·12/2 = 24; two stages of d = 1 (TPS 9) would take 4·9 + 3 = 39 or more.
    from placement.cli import main

    instance = chain([9, 3], m=4)
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(instance.to_json()))
    assert main(["solve", str(path), "--devices", "2", "--schedule", "1f1b", "--objective", "time-per-batch"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["status optimal",
                        "time per batch 24 (bound 24, gap 0.00%), largest stage time per sample 6, 2 devices used"]
    # on one device: one stage of 12 a sample, 4 · 12 = 48 a batch, and one device (it said "1 devices")
    assert main(["solve", str(path), "--devices", "1", "--schedule", "1f1b", "--objective", "time-per-batch"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == ("time per batch 48 (bound 48, gap 0.00%), largest stage time "
                                                       "per sample 12, 1 device used")
    assert main(["solve", str(path), "--objective", "time-per-batch"]) == 2
    # the command names the option that set the objective, as it names --schedule
    assert capsys.readouterr().err.strip() == ("error: --schedule must be one of 'gpipe', '1f1b' with --objective "
                                               "time-per-batch, not 'piper'")


def test_the_search_says_no_plan_exists_rather_than_proven():
    # Nodes keeping 10 and 20 bytes on devices of 15 bytes: the second node fits no device, so no
    # plan exists; the progress line says so instead of calling a plan proven.
    instance = chain([1, 1], m=2, resident=[10.0, 20.0])
    lines = []
    result = placement.solve(instance, schedule="gpipe", objective="time-per-batch", memory=15.0,
                             progress=lines.append)
    assert str(result.status) == "infeasible"
    story = [line for line in lines if line.startswith("time-per-batch search:")]
    assert story == ["time-per-batch search: no plan exists"]


@given(typed_piper_instances(max_nodes=3), st.sampled_from(["gpipe", "1f1b"]))
@settings(max_examples=30)
def test_search_with_device_types_brackets_brute_force(instance, schedule):
    """With device types (no branch and bound there) the search's bound and value bracket the brute-force
    optimum, and an 'optimal' claim is the optimum."""
    best, _ = brute_force_parallel(instance, schedule=schedule, objective="time-per-batch")
    result = placement.solve(instance, schedule=schedule, objective="time-per-batch")
    if math.isinf(best):
        assert str(result.status) == "infeasible"
        return
    assert result.bound <= best * (1 + 1e-9) and best <= result.value * (1 + 1e-9)
    if str(result.status) == "optimal":
        assert result.value == pytest.approx(best, rel=1e-9)
    else:   # the message says why the plan is left unproven
        assert result.message == ("the plan does not meet the bound, and the branch and bound over every plan runs "
                                  "only on instances of at most 8 nodes without deviceTypes (this one has "
                                  "deviceTypes); the bound is m·M* (the batch's micro-batches times the least time "
                                  "per sample)")


def test_a_time_per_batch_the_simulator_refutes_gives_no_solution(monkeypatch):
    """The simulator re-measures the search's plan: a value off by one is refused, not returned."""
    import dataclasses

    import placement.parallel.solve as solve_module

    real = solve_module.search_time_per_batch

    def wrong(*args, **kwargs):
        found = real(*args, **kwargs)
        return dataclasses.replace(found, value=found.value + 1)

    monkeypatch.setattr(solve_module, "search_time_per_batch", wrong)
    result = placement.solve(chain([9, 3], m=4), devices=2, schedule="gpipe", objective="time-per-batch")
    assert (str(result.status), result.plan) == ("no_solution", None)
    assert result.message == "the search claims a time per batch of 25.0, the simulator measures 24.0"


def test_branch_and_bound_out_of_steps_leaves_a_bounded_feasible_answer():
    # The pinned instance: M* = 33 (the DP's optimum of Piper's objective), m = 2, so the bound is 66;
    # the DP's plan takes 89, the three-stage candidate 87. With one step the branch and bound stops: not
    # proven, 87 with bound 66; unbounded, it finishes and proves the optimum 87.
    instance = parse_piper(BRANCH_AND_BOUND_WINS)
    stopped = search_time_per_batch(instance, devices=5, memory=15.0, schedule="1f1b", max_sets=1000, max_nodes=1)
    assert (stopped.bound, stopped.proven, stopped.piper_value) == (66.0, False, 33.0)
    assert stopped.value == pytest.approx(87.0, rel=1e-12)
    assert stopped.stats["branch_and_bound_completed"] is False
    assert brute_force_parallel(instance, schedule="1f1b")[0] == pytest.approx(33.0)   # M*, independently
    finished = search_time_per_batch(instance, devices=5, memory=15.0, schedule="1f1b", max_sets=1000)
    assert finished.proven and finished.value == pytest.approx(87.0) and finished.bound == finished.value


def test_a_search_out_of_steps_says_so(monkeypatch):
    """The answer of the stopped search above, through placement.solve: feasible, and its message says why
    (it was empty, and nothing told the 100,000-step limit from a proof the instance does not admit)."""
    import functools

    import placement.parallel.solve as solve_module

    monkeypatch.setattr(solve_module, "search_time_per_batch",
                        functools.partial(solve_module.search_time_per_batch, max_nodes=1))
    result = placement.solve(parse_piper(BRANCH_AND_BOUND_WINS), devices=5, memory=15.0, schedule="1f1b",
                             objective="time-per-batch")
    assert (str(result.status), result.bound) == ("feasible", 66.0)
    assert result.value == pytest.approx(87.0, rel=1e-12)
    assert result.message == ("the branch and bound over every plan stopped at its step limit (2 partial plans); the "
                              "bound is m·M* (the batch's micro-batches times the least time per sample)")


def test_the_branch_and_bound_decides_memory_on_the_sizes_as_written():
    """Nodes 0 -> 1, m = 2, two devices of 0.3, each node time 1; node 0 has parameters 0.2 and resident
    memory 0.1, node 1 resident 0.2. One stage of both at d = 2 holds 0.1 + 0.2 = 0.3 (as written; the
    floating-point sum 0.30000000000000004 is above 0.3): each replica runs one micro-batch (2, forward
    2/3 and backward 4/3), then the ring all-reduce of the 0.2 of parameters takes 2 steps of
    0.2 / 2 = 0.1 each, twice over (reduce-scatter and all-gather at 2(d - 1)/d · W): 2.4 in all. Two
    stages of one device take 3 under 1F1B (stage 0's last backward ends at 3), one stage of d = 1
    takes 4. So 2.4; the search refused the one stage and proved 3 optimal."""
    def tmpc(b, parameters, fw=(), bw=()):
        return {"id": "c0", "timePerSample": 1, "parameterSize": parameters, "memoryUsageA": 0,
                "memoryUsageB": b, "syncTimeFw": {str(u): 0 for u in fw}, "syncTimeBw": {str(w): 0 for w in bw}}

    instance = parse_piper({"maxDevices": 2, "maxMemoryPerDevice": 0.3, "bandwidth": 1, "mbsInBatch": 2,
                            "nodes": [{"id": 0, "TMPCs": {"1": [tmpc(0.1, 0.2, bw=[1])]}},
                                      {"id": 1, "TMPCs": {"1": [tmpc(0.2, 0.0, fw=[0])]}}],
                            "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0}]})
    result = placement.solve(instance, schedule="1f1b", objective="time-per-batch")
    assert str(result.status) == "optimal"
    assert result.value == pytest.approx(2.4)
    assert [(s.nodes, s.d, s.t) for s in result.plan.stages] == [((0, 1), 2, 1)]


def test_solve_takes_the_forward_share_of_a_piper_solve():
    # placement.solve passes forward_share to solve_piper (the time per batch of each plan at that share), and
    # refuses it for an instance of devices, where no schedule is timed
    from placement.parallel import solve_piper

    instance = chain([2.0, 6.0, 1.0], edge_bytes=[3.0, 0.5], m=4, resident=[10.0, 10.0, 10.0])
    found = placement.solve(instance, objective="time-per-batch", schedule="1f1b", devices=3, memory=10.0,
                            forward_share=0.1)
    direct = solve_piper(instance, objective="time-per-batch", schedule="1f1b", devices=3, memory=10.0,
                         forward_share=0.1)
    assert (found.value, found.plan) == (direct.value, direct.plan)
    assert found.value == time_per_batch(instance, found.plan, "1f1b", forward_share=0.1)
    with pytest.raises(InvalidParameterError, match=r"^forward_share applies to Piper instances only \(data- and "
                                                    r"tensor-parallel stages\)$"):
        placement.solve(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json", forward_share=0.5)


def test_a_plan_keeps_the_forward_share_it_was_solved_at(tmp_path, capsys):
    """The chain of test_forward_share_moves_gpipe_but_not_a_single_stage, each node alone on a device (the
    memory holds one node's 10 bytes): GPipe at φ = 1/2 takes 89, at φ = 1/3 93. By hand, φ = 1/3: stage 0
    sends 6 sync bytes back (bandwidth 1), F0 = 2 + 6 = 8, B0 = 6 + 4 = 10; stage 1 F1 = 17/3, B1 = 34/3.
    Stage 0's forwards end 8, 16, 24, 32, stage 1's 13.67, 21.67, 29.67, 37.67 and its backwards 49, 60.33,
    71.67, 83; stage 0's backwards 49–59, 60.33–70.33, 71.67–81.67, 83–93. A plan solved at φ = 1/2 claims 89; its
    file and result record that share, so that simulate and verify time the batch it was solved for (they
    took 1/3, simulate reported 93 and verify refuted the plan's claim of 89), unless given another."""
    instance = chain([6, 17], m=4, sync_bw=[6, 0], resident=[10.0, 10.0])
    result = placement.solve(instance, schedule="gpipe", devices=2, memory=10.0, forward_share=0.5)
    assert [(s.nodes, s.d, s.t) for s in result.plan.stages] == [((0,), 1, 1), ((1,), 1, 1)]
    assert (result.time_per_batch, result.forward_share) == (89.0, 0.5)
    document = json.loads(json.dumps(result.to_json()))
    assert document["forwardShare"] == 0.5
    for plan in (result, document):
        run = placement.simulate(instance, plan)
        assert (run.time_per_batch, run.forward_share) == (89.0, 0.5)
        assert placement.simulate(instance, plan, forward_share=1 / 3).time_per_batch == 93.0
        verified = placement.verify(instance, plan)
        assert (verified.time_per_batch, verified.forward_share, verified.notes) == (89.0, 0.5, ())
    assert placement.verify(instance, {**document, "timePerBatch": 93.0}).notes == (
        "the plan file claims timePerBatch 93.0 (time per batch); the verified one is 89.0",)
    with pytest.raises(InvalidPlanError, match=r"^the plan's 'forwardShare' must be a number from 0 to 1 \(the "
                                               r"forward's share of each node's time per sample\), not 1.5$"):
        placement.simulate(instance, {**document, "forwardShare": 1.5})
    # a plan that records none (written before the share was recorded) is timed at 1/3
    assert placement.simulate(instance, {k: v for k, v in document.items() if k != "forwardShare"}
                              ).time_per_batch == 93.0
    # the command line: solve --forward-share --out, then simulate and verify the file
    from placement.cli import main

    path, plan = tmp_path / "chain.json", tmp_path / "plan.json"
    path.write_text(json.dumps(instance.to_json()))
    assert main(["solve", str(path), "--schedule", "gpipe", "--devices", "2", "--memory", "10", "--forward-share",
                 "0.5", "--quiet", "--out", str(plan)]) == 0
    assert json.loads(plan.read_text())["forwardShare"] == 0.5
    capsys.readouterr()
    assert main(["simulate", str(path), str(plan), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert (simulated["time_per_batch"], simulated["forward_share"]) == (89.0, 0.5)
    assert main(["verify", str(path), str(plan)]) == 0
    out = capsys.readouterr().out
    assert "time per batch 89  (one batch simulated under gpipe, forward share 0.5, Piper's all-reduce)\n" in out
    assert "note:" not in out


def test_the_layout_stops_at_its_deadline(monkeypatch):
    """Two stages of one replica, GPipe, m = 4: 16 tasks, laid out 4 at a time under a deadline. The clock, read
    before each rank's orders (0, 1) and before each slice (2, 3, 4), passes the deadline 3.5 with 8 of the
    16 tasks timed: the layout stops there, where it ran to the end whatever the deadline. A deadline that
    does not pass changes nothing: the same 31 as without one."""
    from placement.errors import LimitExceededError
    from placement.parallel import timing

    stages = [StageTimes(1.0, 2.0, 1, 0.0, (), (1,)), StageTimes(3.0, 4.0, 1, 0.0, (0,), ())]
    value = batch_time(stages, 4, "gpipe")
    ticks = iter(range(100))

    class Clock:
        @staticmethod
        def perf_counter():
            return float(next(ticks))

    monkeypatch.setattr(timing, "time", Clock, raising=False)
    monkeypatch.setattr(timing, "SLICE_TASKS", (4, 4), raising=False)
    with pytest.raises(LimitExceededError) as info:
        batch_time(stages, 4, "gpipe", deadline=3.5)
    assert str(info.value) == "the time limit ran out while the batch was laid out (8 of 16 tasks timed)"
    assert info.value.parameter == "time_limit"
    assert batch_time(stages, 4, "gpipe", deadline=1e9) == value == 31.0


def test_the_time_per_batch_of_a_dp_plan_is_laid_out_within_the_time_limit(monkeypatch):
    """With time_limit the DP stops at the deadline, but its plan's time per batch was then laid out whatever the
    time left (gnmt with 131,072 micro-batches, 1F1B, time_limit=1: 524,288 tasks). Here the layout's clock reads
    past the deadline: the plan stands, its time per batch not computed; without a time limit it is computed.
    The plan, one stage, makes 8,192 tasks of its 4,096 micro-batches: more than a batch laid out whatever the
    deadline."""
    import time as real

    from placement.parallel import timing
    from tests.test_parallel import chain as hand_chain, tmpc

    class Late:
        @staticmethod
        def perf_counter():
            return real.perf_counter() + 1e6

    monkeypatch.setattr(timing, "time", Late, raising=False)
    inst = hand_chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4096)
    limited = placement.solve(inst, schedule="1f1b", time_limit=5)
    assert (str(limited.status), limited.time_per_batch) == ("optimal", None)
    assert len(limited.plan.stages) == 1 and limited.stats["time_per_batch"] == (
        "not computed: the time limit ran out while the batch was laid out (0 of 8,192 tasks timed)")
    unlimited = placement.solve(inst, schedule="1f1b")
    assert unlimited.plan == limited.plan and unlimited.time_per_batch is not None


def test_a_batch_of_one_slice_is_laid_out_whatever_the_deadline():
    """A batch of at most one plain slice of the longest path (5,000 tasks: some hundredths of a second) is laid
    out past the deadline too; one task more and it is refused there."""
    from placement.errors import LimitExceededError

    stages = [StageTimes(1.0, 2.0, 1, 0.0, (), (1,)), StageTimes(3.0, 4.0, 1, 0.0, (0,), ())]
    assert batch_time(stages, 1250, "gpipe", deadline=-math.inf) == batch_time(stages, 1250, "gpipe")
    with pytest.raises(LimitExceededError) as info:
        batch_time(stages, 1251, "gpipe", deadline=-math.inf)
    assert str(info.value) == "the time limit ran out while the batch was laid out (0 of 5,004 tasks timed)"
