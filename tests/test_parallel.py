"""The exact planner for Piper instances: hand-solved optima, brute force, Piper's greedy, errors, CLI."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings

import placement
from placement.cli import main
from placement.errors import InvalidParameterError, LimitExceededError
from placement.io.piper import TMPC, PiperDeviceType, PiperEdge, PiperInstance, PiperNode, parse_piper
from placement.parallel.baselines import piper_value
from placement.parallel.dp import solve_parallel
from placement.parallel.plan import ParallelPlan
from placement.report.parallel import format_parallel_result
from placement.testing.bruteforce_parallel import brute_force_parallel
from placement.verification.parallel import evaluate_parallel
from tests.strategies_parallel import piper_instances, typed_piper_instances

SHARED = Path(__file__).resolve().parents[2] / "shared" / "piper"


def tmpc(name, time, params=0.0, a=0.0, b=0.0, fw=None, bw=None):
    return TMPC(name, float(time), float(params), float(a), float(b), fw or {}, bw or {})


def chain(nodes, cost=0.0, devices=1, memory=100.0, bandwidth=1.0, microbatches=1):
    """Nodes 0 -> 1 -> … (each a dict t -> TMPCs without sync entries; zero syncs are added)."""
    built = []
    for k, table in enumerate(nodes):
        fw = {k - 1: 0.0} if k else {}
        bw = {k + 1: 0.0} if k + 1 < len(nodes) else {}
        built.append(PiperNode(k, f"n{k}", {t: tuple(TMPC(c.id, c.time_per_sample, c.parameter_size, c.memory_usage_a,
                                                          c.memory_usage_b, fw, bw) for c in cs)
                                            for t, cs in table.items()}))
    edges = tuple(PiperEdge(k, k + 1, cost) for k in range(len(nodes) - 1))
    return PiperInstance("hand", devices, memory, bandwidth, microbatches, tuple(built), edges)


def test_data_parallel_split_by_hand():
    # a -> b, times 4 and 2, parameters 2 each, edge 1 byte, bandwidth 1, m = 4, 3 devices (d divides 4).
    # {a} d=2: edges 2·1/2 = 1, resync 4·1·2/(2·4) = 1, compute 4/2 = 2 -> 4; {b} d=1: 2 + 0 + 2 = 4: max 4.
    # Others: {a,b} d=2: 6/2 + 4·1·4/(2·4) = 5; {a,b} d=1: 6; {a} d=1, {b} d=2: a alone 2 + 4 = 6.
    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    result = placement.solve(inst)
    assert str(result.status) == "optimal" and result.value == 4.0
    assert [(s.nodes, s.d, s.t) for s in result.plan.stages] == [((0,), 2, 1), ((1,), 1, 1)]
    assert result.megatron["expressible"] is False


def test_the_summary_of_a_one_node_instance_counts_it_in_the_singular():
    inst = chain([{1: (tmpc("v", 4),)}])
    assert format_parallel_result(inst, placement.solve(inst)).splitlines()[0] == (
        "instance hand: 1 node, 1 device of 100 bytes, 1 micro-batch per batch, schedule piper")


def test_exact_knapsack_beats_piper_greedy_by_hand():
    # One device, one stage. Fast TMPCs: memory 10 + 6 = 16 > 11, so 5 bytes must go.
    # Greedy takes the best time per byte first: n0 (5/9 < 3/5) saves 9 -> time 6 + 1 = 7.
    # Exact: n1 slow alone saves 5 (memory 10 + 1 = 11 fits) -> time 1 + 4 = 5.
    inst = chain([{1: (tmpc("fast", 1, b=10), tmpc("slow", 6, b=1))},
                  {1: (tmpc("fast", 1, b=6), tmpc("slow", 4, b=1))}], devices=1, memory=11.0)
    exact = placement.solve(inst)
    assert exact.value == 5.0 and dict(exact.plan.stages[0].tmpcs) == {0: "fast", 1: "slow"}
    # the Megatron-style hand-off names the node that runs another TMPC than its first (the degrees do not say it)
    assert exact.megatron["other_tmpcs"] == {"0": {"slow": [1]}}
    assert "  stage 0 runs 'slow' on node 1\n" in format_parallel_result(inst, exact)
    greedy = piper_value(inst)
    assert greedy.value == 7.0
    assert evaluate_parallel(inst, greedy.plan).value == 7.0


def test_piper_greedy_decides_memory_without_a_slack_in_bytes():
    """Nodes 0 -> 1 (transfer 1), m = 2, two devices of 1e-18 bytes. Node 0: v (time 2, 5.7897816145904855e-19
    bytes); node 1: fast (time 2, as much) and slow (time 10, 1e-20). Two stages of one device: 2 + 2 · 1 = 4 each;
    one stage on two replicas: with fast (2 + 2) / 2 = 2 but 1.16e-18 bytes, over the bound; with slow (2 + 10) / 2
    = 6. Piper's greedy let a choice within 1e-9 bytes of the bound pass for one that fits: as the DP's ceiling, 2
    hid every plan and the instance was called infeasible; as Piper's value, its plan failed the check."""
    size = 5.7897816145904855e-19
    inst = chain([{1: (tmpc("v", 2, b=size),)}, {1: (tmpc("fast", 2, b=size), tmpc("slow", 10, b=1e-20))}],
                 cost=1.0, devices=2, memory=1e-18, microbatches=2)
    assert brute_force_parallel(inst)[0] == 4.0
    result = placement.solve(inst)
    assert (str(result.status), result.value, result.bound) == ("optimal", 4.0, 4.0)
    assert [(s.nodes, s.d, dict(s.tmpcs)) for s in result.plan.stages] == [((0,), 1, {0: "v"}), ((1,), 1, {1: "fast"})]
    greedy = piper_value(inst)
    assert greedy.value == 4.0 and evaluate_parallel(inst, greedy.plan).ok


def test_schedule_memory_by_hand():
    # a -> b, time 2 each, activation memory 1 per micro-batch each, m = 4, 2 devices, 3 bytes.
    # 1f1b: one stage d=2 holds ⌈2/2⌉ = 1 micro-batch: memory 2 ≤ 3, time 4/2 = 2 (two stages d=1 also 2).
    # gpipe: every replica holds m/d micro-batches: one stage d=2 -> 2·2 = 4 > 3; d=1 stages -> 4 > 3: nothing fits.
    inst = chain([{1: (tmpc("v", 2, a=1),)}, {1: (tmpc("v", 2, a=1),)}], devices=2, memory=3.0, microbatches=4)
    assert placement.solve(inst, schedule="1f1b").value == 2.0
    gpipe = placement.solve(inst, schedule="gpipe")
    assert str(gpipe.status) == "infeasible" and gpipe.plan is None and gpipe.value is None
    # with 4 bytes gpipe fits one stage d=2 (memory 4) at time 2; Piper's own memory equals 1f1b's
    assert placement.solve(inst, schedule="gpipe", memory=4.0).value == 2.0
    one = placement.solve(inst, schedule="piper")
    assert [s.in_flight for s in one.evaluation.stages] in ([1], [2, 1])


ONE_STAGE_CEILING = PiperInstance(   # the one-stage ceiling must use a degree every node supports
    "tiny", 2, 4.0, 1.0, 1,
    (PiperNode(2, "n0", {1: (tmpc("vanilla", 1, bw={5: 0.0}),), 2: (tmpc("vanilla", 1, bw={5: 0.0}),)}),
     PiperNode(5, "n1", {1: (tmpc("vanilla", 1, fw={2: 0.0}),)})),
    (PiperEdge(2, 5, 0.0),))


def _tmpc(name, time, a, b):
    return {"id": name, "timePerSample": time, "parameterSize": 0.0, "memoryUsageA": a, "memoryUsageB": b,
            "syncTimeFw": {}, "syncTimeBw": {}}


# Two nodes, one device of memory 5, one micro-batch (memory A + B). Piper's greedy starts from the
# fastest options, n0:c0 (time 0, memory 6) and n1:x1 (0, 12), 18 bytes, and ranks the swaps by extra
# time per byte saved against them: n1 to x2 (10 for 12 bytes), n1 to c0 (7 for 7), n0 to c1 (5 for
# 5). The second swap takes n1 from x2 back to c0 and gives 5 bytes back, so after the third the
# choice holds 6 bytes on a device of 5: no plan, yet its 12 was taken as the value of a real plan,
# the DP pruned every plan from 12 up and answered infeasible. The optimum is c1 + x2: 5 + 10 = 15.
GREEDY_OVER_MEMORY = placement.load({
    "maxDevices": 1, "maxMemoryPerDevice": 5.0, "bandwidth": 1.0, "mbsInBatch": 1, "edges": [],
    "nodes": [{"id": 0, "name": "n0", "TMPCs": {"1": [_tmpc("c0", 0.0, 1.0, 5.0), _tmpc("c1", 5.0, 0.0, 1.0)]}},
              {"id": 1, "name": "n1", "TMPCs": {"1": [_tmpc("c0", 7.0, 5.0, 0.0), _tmpc("x1", 0.0, 6.0, 6.0),
                                                      _tmpc("x2", 10.0, 0.0, 0.0)]}}]})


def test_a_greedy_choice_over_memory_is_no_plan():
    assert brute_force_parallel(GREEDY_OVER_MEMORY)[0] == 15.0
    assert (placement.solve(GREEDY_OVER_MEMORY).status, placement.solve(GREEDY_OVER_MEMORY).value) == ("optimal", 15.0)
    assert piper_value(GREEDY_OVER_MEMORY).plan is None   # Piper's heuristic finds no fitting choice


# Two nodes, one device of memory 1.7, one micro-batch. Fastest options: n0 "fast" (time 0, 1e15 bytes) and
# n1 "fast" (0, 1.3 bytes). Piper's greedy swaps n0 to "lean" first (time 1 for 1e15 − 0.5 bytes), which
# leaves 0.5 + 1.3 = 1.8 > 1.7 bytes: n1 must go "lean" too. In floating point the bytes still to shave,
# (1e15 + 1.3 − 1.7) − (1e15 − 0.5), come out 0 (the spacing of floats near 1e15 is 0.125), so the
# choice at time 1 was taken as the value of a real plan and the DP, pruning every plan from 1 up,
# answered infeasible. The only fitting choice is lean + lean: time 1 + 1 = 2 in 0.5 bytes.
GREEDY_ROUNDED_SHAVE = chain([{1: (tmpc("fast", 0, a=1e15), tmpc("lean", 1, a=0.5))},
                              {1: (tmpc("fast", 0, a=1.3), tmpc("lean", 1))}], devices=1, memory=1.7)


def test_a_greedy_choice_fits_on_its_sizes_summed_afresh():
    result = placement.solve(GREEDY_ROUNDED_SHAVE)
    assert (result.status, result.value) == ("optimal", 2.0)
    assert dict(result.plan.stages[0].tmpcs) == {0: "lean", 1: "lean"}
    greedy = piper_value(GREEDY_ROUNDED_SHAVE)
    assert greedy.value == 2.0 and evaluate_parallel(GREEDY_ROUNDED_SHAVE, greedy.plan).value == 2.0


def test_a_stage_beside_a_large_size_is_not_pruned_on_a_rounded_difference():
    # GPipe, m = 3, 3 devices of 1.3 bytes; n0 runs at t = 2 only, n1 at t = 1 or 2 (its t = 2 TMPC
    # holds 2.5e14 + y/3 bytes; 1/3 as written leaves no unit in which the memory sums are exact).
    # The only plan: {n0} t = 2, d = 1 ("small": 0.2·3 + 0.7 = 1.3 bytes as written, time 2), then
    # {n1} t = 1 (time 1): 3 devices, value 2 ({n0} at d = 3 takes 6 devices; {n0, n1} needs t = 2,
    # where n1 holds over 2.5e14 bytes). The least memory of {n0} was read as the difference of the
    # least over {n0, n1} and over {n1} at t = 2, (1.3 + 2.5e14 + 1) − (2.5e14 + 1) = 1.3125 in
    # floating point, above 1.3: the stage was pruned and the answer was infeasible.
    inst = chain([{2: (tmpc("big", 0, b=2.5e14), tmpc("small", 2, a=0.2, b=0.7))},
                  {1: (tmpc("v", 1),), 2: (tmpc("big", 1, a=1 / 3, b=2.5e14),)}],
                 devices=3, memory=1.3, microbatches=3)
    result = placement.solve(inst, schedule="gpipe")
    assert (result.status, result.value) == ("optimal", 2.0)
    assert [(s.nodes, s.d, s.t, dict(s.tmpcs)) for s in result.plan.stages] == [((0,), 1, 2, {0: "small"}),
                                                                                ((1,), 1, 1, {1: "v"})]


def test_a_stage_of_dominant_options_is_not_taken_as_fitting_on_a_rounded_difference():
    # GPipe, m = 3, 3 devices of 1.29 bytes, one TMPC per node and degree. {n0} at t = 2, d = 1 holds
    # 0.2·3 + 0.7 = 1.3 bytes: it does not fit. Its memory was read as differences of the sums over
    # {n0, n1} and over {n1} at t = 2, where n1 holds 2.5e14 + y/3: 0.6 + (0.7 + 2.5e14) − 2.5e14 =
    # 0.6 + 0.6875 = 1.2875 ≤ 1.29, so the DP took it (value 2) and the plan's rebuilding failed on an
    # internal assertion. The plans: {n0, n1} t = 1, d = 3: (10 + 1) / 3 = 11/3 on 3 devices; {n0} t = 1 and
    # {n1} t = 1: max(10, 1) = 10; {n0, n1} at t = 2 holds over 2.5e14 bytes. The optimum is 11/3.
    inst = chain([{1: (tmpc("slow", 10),), 2: (tmpc("small", 2, a=0.2, b=0.7),)},
                  {1: (tmpc("v", 1),), 2: (tmpc("big", 1, a=1 / 3, b=2.5e14),)}],
                 devices=3, memory=1.29, microbatches=3)
    result = placement.solve(inst, schedule="gpipe")
    assert (result.status, result.value) == ("optimal", 11 / 3)
    assert [(s.nodes, s.d, s.t, dict(s.tmpcs)) for s in result.plan.stages] == [((0, 1), 3, 1,
                                                                                 {0: "slow", 1: "v"})]


@settings(max_examples=60)
@given(piper_instances())
@example(ONE_STAGE_CEILING)
@example(GREEDY_OVER_MEMORY)
def test_dp_matches_brute_force_for_every_schedule(inst):
    agrees_with_brute_force(inst, ("piper", "1f1b", "gpipe"))


def agrees_with_brute_force(inst, schedules):
    """The DP's value equals the brute force's for each schedule, its plan passes the evaluator at that value, and
    Piper's greedy finds a real plan no better; returns the DP's plans (``None`` where nothing fits)."""
    plans = []
    for schedule in schedules:
        best, _ = brute_force_parallel(inst, schedule=schedule)
        found = solve_parallel(inst, schedule=schedule, compiled=False)
        plans.append(found.plan)
        if math.isinf(best):
            assert found.plan is None and math.isinf(found.value)
            continue
        assert found.value == pytest.approx(best, rel=1e-9)
        check = evaluate_parallel(inst, found.plan)
        assert check.ok and check.value == pytest.approx(found.value, rel=1e-9)
        greedy = solve_parallel(inst, schedule=schedule, compiled=False, mode="greedy")
        if greedy.plan is not None:   # Piper's heuristic: a real plan, never below the optimum
            assert evaluate_parallel(inst, greedy.plan).ok
            assert greedy.value >= found.value * (1 - 1e-9)
    return plans


def test_rounding_of_the_device_lower_bound_keeps_the_only_plan():
    # One device: the only plan is one stage holding all nine nodes, time Σ t. The device lower bound
    # of the rest of the graph, Σ t − Σ t summed in two orders, is 8.9e-16 here, not 0; rounded up
    # without slack it asked for one more device than exists and the DP called the instance infeasible.
    times = [0.686, 0.969, 0.726, 0.528, 0.764, 0.939, 0.553, 0.346, 0.677]
    inst = chain([{1: (tmpc("v", t),)} for t in times], devices=1)
    found = solve_parallel(inst, compiled=False)
    assert found.plan is not None and found.value == pytest.approx(math.fsum(times), rel=1e-12)


def test_bad_parameters_and_memory_that_fits_nothing():
    inst = chain([{1: (tmpc("v", 1, b=5),)}], devices=2)
    with pytest.raises(InvalidParameterError, match=r"^devices must be a positive integer or None, not 0$"):
        placement.solve(inst, devices=0)
    with pytest.raises(InvalidParameterError,
                       match=r"^schedule must be one of 'piper', '1f1b', 'gpipe', 'interleaved', not 'zb'$"):
        placement.solve(inst, schedule="zb")
    # memory 0 is an answer (nothing fits), as on every other instance, not a refusal
    with pytest.raises(InvalidParameterError, match=r"^memory must be a finite number ≥ 0 or None, not -1$"):
        placement.solve(inst, memory=-1)
    with pytest.raises(InvalidParameterError, match=r"^stages does not apply to a Piper instance"):
        placement.solve(inst, stages=1)
    with pytest.raises(InvalidParameterError, match=r"^max_ideals must be a positive integer or None, not 0$"):
        placement.solve(inst, max_ideals=0)
    for name, value in (("backend", "cp-sat"), ("gap", 0.1), ("threads", 2), ("seed", 1), ("calls", 2),
                        ("warm_start", False), ("restarts", 3), ("w_share", 0.25),
                        ("gap", 0.0), ("seed", 0), ("calls", 1), ("warm_start", True)):   # given at their defaults
        with pytest.raises(InvalidParameterError, match=rf"^{name} does not apply to a Piper instance, whose one "
                                                        r"exact DP has its own options \(it takes devices,"):
            placement.solve(inst, **{name: value})
    for memory in (4, 0):
        result = placement.solve(inst, memory=memory)
        assert str(result.status) == "infeasible" and result.plan is None
        assert result.message == (f"no plan on 2 devices of {memory} bytes: node 0 alone exceeds the memory at every "
                                  "allowed degree")


@pytest.mark.parametrize("schedule", ["", 0, False, []])
def test_a_schedule_that_names_none_is_refused_not_taken_for_the_default(schedule):
    # it was taken as left out: the plan of schedule 'piper', returned for a value that names no schedule
    inst = chain([{1: (tmpc("v", 1, b=5),)}], devices=2)
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(inst, schedule=schedule)
    assert str(info.value) == f"schedule must be one of 'piper', '1f1b', 'gpipe', 'interleaved', not {schedule!r}"


def test_a_device_count_past_the_float_range_is_refused_as_its_plan_file_could_not_be_read(tmp_path):
    # it was taken, and the plan's to_json() recorded it, which verify and simulate of the written file refused
    inst = chain([{1: (tmpc("v", 1, b=5),)}], devices=2)
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(inst, devices=10**400)
    assert str(info.value) == ("devices is an integer of 401 digits, past the largest number (about 1.8e308): a plan "
                               "file recording it could not be read back")
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(two_types(cpu=True), devices={"gpu": 10**400})
    assert str(info.value) == ("devices['gpu'] is an integer of 401 digits, past the largest number (about 1.8e308): "
                               "a plan file recording it could not be read back")
    result = placement.solve(inst, devices=10**300)   # within the range: recorded and read back
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(result.to_json()))
    assert placement.verify(inst, path).valid


def test_a_node_whose_degrees_no_stage_can_take_is_named_as_such_not_as_memory():
    # Both nodes have TMPCs at t = 4 only and 2 (or 3) devices exist: no stage of t·d ≤ devices takes
    # either, whatever the memory (10^12 bytes); the reason said it was the memory.
    inst = chain([{4: (tmpc("v", 1),)}, {4: (tmpc("v", 1),)}], devices=2, memory=1e12, microbatches=4)
    for devices in (2, 3):
        result = placement.solve(inst, devices=devices)
        assert str(result.status) == "infeasible" and result.plan is None
        assert result.message.endswith("fits no stage: it has TMPCs at t = 4 only, and the devices leave no "
                                       "tensor-parallel degree t that any node has (a stage takes t·d devices)")
        assert brute_force_parallel(inst, devices=devices)[0] == math.inf
    # one node with t ∈ {1, 4}, the other t = 4 only: t = 1 is left, which the second node lacks
    mixed = chain([{1: (tmpc("v", 1),), 4: (tmpc("v", 1),)}, {4: (tmpc("v", 1),)}], devices=2, memory=1e12,
                  microbatches=4)
    assert placement.solve(mixed).message == ("no plan on 2 devices of 1e+12 bytes: node 1 fits no stage: it has "
                                              "TMPCs at t = 4 only, and the devices leave t = 1 only (a stage takes "
                                              "t·d devices)")
    assert placement.solve(mixed, devices=4).value == 2.0   # one stage at t = 4, d = 1: time per sample 1 + 1


def test_no_plan_for_want_of_devices_is_not_blamed_on_memory():
    # a -> b: a has TMPCs at t = 2 only, b at t = 1 only, so no stage holds both and every plan takes
    # 2·1 + 1·1 = 3 devices; with 2 devices of 10^12 bytes (nothing uses memory) the reason said memory.
    inst = chain([{2: (tmpc("v", 2),)}, {1: (tmpc("v", 6),)}], devices=2, memory=1e12, microbatches=2)
    result = placement.solve(inst)
    assert (str(result.status), result.plan) == ("infeasible", None)
    assert result.message == ("no plan on 2 devices of 1e+12 bytes: every plan needs more devices, whatever their "
                              "memory (a stage takes t·d devices of its own, t a tensor-parallel degree every node "
                              "of the stage has a TMPC for)")
    assert placement.solve(inst, objective="time-per-batch", schedule="gpipe").message == result.message
    assert brute_force_parallel(inst)[0] == math.inf
    assert placement.solve(inst, devices=3).value == 6.0   # {a} t = 2 (time 2/2), {b} t = 1 (6)
    # each node fits one device alone (memory usage b: 5 bytes of 8), both together do not (10): memory is the reason
    tight = chain([{1: (tmpc("v", 2, b=5),)}, {1: (tmpc("v", 6, b=5),)}], devices=1, memory=8.0)
    assert placement.solve(tight).message == ("no plan on 1 device of 8 bytes: no pipeline of the devices fits "
                                              "every stage's memory")


def test_gpipe_node_alone_at_its_fewest_micro_batches():
    # m = 4, 2 devices: d ∈ {1, 2}, so under gpipe a stage holds y = m/d ≥ 2 micro-batches: the node needs
    # 1·2 = 2 > 1.5 bytes at best, and nothing fits; under 1f1b one stage with d = 2 holds y = ⌈2/2⌉ = 1
    # (1 byte): time 3/2.
    inst = chain([{1: (tmpc("v", 3, a=1),)}], devices=2, memory=1.5, microbatches=4)
    gpipe = placement.solve(inst, schedule="gpipe")
    assert str(gpipe.status) == "infeasible"
    assert gpipe.message.endswith("node 0 alone exceeds the memory at every allowed degree")
    assert brute_force_parallel(inst, schedule="gpipe")[0] == math.inf
    assert placement.solve(inst, schedule="1f1b").value == 1.5


@pytest.mark.parametrize("stage, message", [
    ({"nodes": [1], "t": 1}, "stages[0]: missing field 'd'"),              # said "not None"
    ({"nodes": [1], "d": None, "t": 1}, "stages[0].d must be a positive integer, not null"),
    ({"nodes": [1], "d": 1, "t": 0}, "stages[0].t must be a positive integer, not 0"),
    # as JSON spells it: it said "not None"
    ({"nodes": [1], "d": 1, "t": 1, "deviceType": None}, "stages[0].deviceType must be a device type name (a "
                                                         "string), not null"),
])
def test_a_stage_needs_its_degrees(stage, message):
    from placement.errors import InvalidPlanError

    with pytest.raises(InvalidPlanError) as info:
        ParallelPlan.from_json({"stages": [stage]})
    assert str(info.value) == message


def test_whole_numbers_written_as_floats_read_as_integers_as_in_an_ordinary_plan_file(tmp_path):
    """Refused before ("stages[0].d must be a positive integer, not 2.0", "stages[0].nodes must be a list of node
    ids (integers)", "chunks must be a positive integer, not 1.0"), where an ordinary plan file reads node 3.0 as
    node 3; a recorded device count too ("the plan's 'devices' must be a device count ..., not 4.0")."""
    from placement.simulation.parallel import read_parallel_plan

    stages = [{"nodes": [0, 1], "d": 2, "t": 1, "tmpcs": {"0": "v", "1": "v"}}, {"nodes": [2], "d": 1, "t": 2}]
    written = {"chunks": 1.0, "devices": 4.0, "stages": [{**stages[0], "nodes": [0.0, 1], "d": 2.0, "t": 1.0},
                                                         {**stages[1], "nodes": [2.0], "t": 2.0}]}
    plan = ParallelPlan.from_json(written)
    assert plan == ParallelPlan.from_json({"stages": stages})
    assert json.dumps(plan.to_json()) == json.dumps({"schedule": "piper", "stages": [{**stages[0]},
                                                                                      {**stages[1], "tmpcs": {}}]})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(written))
    read, devices, memory = read_parallel_plan(path)
    assert (read, devices, memory) == (plan, 4, None) and type(devices) is int
    assert read_parallel_plan({**written, "devices": {"a100": 3.0, "v100": 1}})[1] == {"a100": 3, "v100": 1}


@pytest.mark.parametrize("document, message", [
    ({"stages": [{"nodes": [0], "d": 2.5, "t": 1}]}, "stages[0].d must be a positive integer, not 2.5"),
    ({"stages": [{"nodes": [0], "d": 1, "t": 0.0}]}, "stages[0].t must be a positive integer, not 0.0"),
    ({"stages": [{"nodes": [0.5], "d": 1, "t": 1}]}, "stages[0].nodes[0]: node id must be an integer, got 0.5"),
    ({"stages": [{"nodes": [1, "2"], "d": 1, "t": 1}]}, "stages[0].nodes[1]: node id must be an integer, got string"),
    ({"stages": [{"nodes": [2.0 ** 53], "d": 1, "t": 1}]},
     "stages[0].nodes[0]: node id reads 9007199254740992, a number not written as an integer, 2^53 = "
     "9007199254740992 or more, where a double does not hold every integer (what was written may have been rounded "
     "to another); write it as an integer"),
    ({"chunks": 1.5, "stages": []}, "chunks must be a positive integer, not 1.5"),
], ids=["fractional degree", "zero degree", "fractional node id", "string node id", "rounded node id",
        "fractional chunks"])
def test_a_number_with_a_fraction_is_still_no_count_or_node_id(document, message):
    from placement.errors import InvalidPlanError

    with pytest.raises(InvalidPlanError) as info:
        ParallelPlan.from_json(document)
    assert str(info.value) == message


@pytest.mark.parametrize("key", ["1_0", " 10", "010", "+10", "\u0661\u0660", "ten"])
def test_a_tmpc_key_is_a_node_id_in_decimal_digits(key):
    # int() read '1_0', ' 10', '010' and '+10' as node 10 (and the Arabic-Indic digits too), a key the instance
    # reader refuses where an instance names a node
    from placement.errors import InvalidPlanError

    with pytest.raises(InvalidPlanError) as info:
        ParallelPlan.from_json({"stages": [{"nodes": [10], "d": 1, "t": 1, "tmpcs": {key: "v"}}]})
    assert str(info.value) == f"stages[0].tmpcs: key {json.dumps(key)} is not a node id (an integer in decimal digits)"
    plan = ParallelPlan.from_json({"stages": [{"nodes": [10, -1], "d": 1, "t": 1, "tmpcs": {"10": "v", "-1": "w"}}]})
    assert dict(plan.stages[0].tmpcs) == {10: "v", -1: "w"}


def test_evaluator_reports_violations():
    inst = chain([{1: (tmpc("v", 1, b=5),)}, {1: (tmpc("v", 1, b=5),)}], devices=2, memory=6.0, microbatches=2)
    plan = ParallelPlan.from_json({"stages": [{"nodes": [1], "d": 1, "t": 1, "tmpcs": {"1": "v"}},
                                              {"nodes": [0], "d": 3, "t": 1, "tmpcs": {"0": "x"}}]})
    assert evaluate_parallel(inst, plan).violations == (
        "edge 0 -> 1 goes from stage 1 back to stage 0",
        "the plan uses 4 devices (Σ d·t), more than the 2 available",
        "the data-parallel degrees sum to 4, more than the 2 micro-batches of a batch",
        "stage 1: d=3 does not divide the 2 micro-batches of a batch",
        "stage 1: node 0 has no TMPC 'x' for t=1")


def test_the_evaluator_loads_no_solver_code():
    # a fresh interpreter importing the evaluator on its own: no import cycle, no DP, no solver module
    import subprocess
    import sys

    code = ("import sys, placement.verification.parallel; print(sorted(m for m in sys.modules if "
            "m.startswith(('placement.solvers', 'placement.parallel.dp', 'placement.parallel._kernels', "
            "'placement.parallel.solve', 'placement.parallel.tables'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_prints_the_plan_and_refuses_bad_options(tmp_path, capsys):
    path = tmp_path / "tiny.json"
    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    path.write_text(json.dumps(inst.to_json()))
    assert main(["solve", str(path), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "optimal" and doc["value"] == 4.0
    assert [(s["nodes"], s["d"], s["t"], s["tmpcs"]) for s in doc["stages"]] == [([0], 2, 1, {"0": "v"}),
                                                                                ([1], 1, 1, {"1": "v"})]
    assert main(["solve", str(path), "--devices", "2", "--memory", "1KiB", "--quiet"]) == 0
    assert "d  t" in capsys.readouterr().out
    assert main(["solve", str(path), "--devices", "0"]) == 2
    assert ("error: argument --devices: expected a positive integer or counts per device type ('a100:8,v100:16'), "
            "got '0'") in capsys.readouterr().err
    assert main(["solve", str(path), "--method", "milp"]) == 2
    assert capsys.readouterr().err.startswith("error: --method must be 'auto' for a Piper instance")
    assert main(["solve", str(path), "--contiguity", "stages"]) == 2
    assert capsys.readouterr().err.startswith("error: --contiguity does not apply to a Piper instance")
    assert main(["solve", str(path), "--backend", "highs"]) == 2
    assert capsys.readouterr().err == ("error: --backend does not apply to a Piper instance, whose one exact DP has "
                                       "its own options (it takes --devices, --memory, --schedule, --chunks, "
                                       "--objective, --forward-share, --max-ideals, --time-limit)\n")
    for command in (["info", str(path)], ["split", str(path), str(path)]):
        assert main(command) == 2
        # the positional argument is named by the file given, not by its placeholder
        assert capsys.readouterr().err == (f"error: {path} is a Piper instance (tiny: per-stage data- and "
                                           "tensor-parallel configurations): only solve, simulate and verify take "
                                           "it\n")
    assert main(["verify", str(path), str(path)]) == 2   # verify takes it, and a parallel plan after it
    assert capsys.readouterr().err == f"error: {path}: a parallel plan must be a JSON object with a list 'stages'\n"
    assert main(["solve", str(path), "--stages", "2"]) == 2
    assert capsys.readouterr().err == ("error: --stages does not apply to a Piper instance: its DP chooses the "
                                       "number of stages with their data- and tensor-parallel degrees\n")
    assert main(["solve", str(path), "--accelerators", "2"]) == 2
    assert capsys.readouterr().err == ("error: --accelerators does not apply to a Piper instance; give its device "
                                       "count as --devices N\n")


@pytest.mark.skipif(not (SHARED / "bert32a100.json").exists(), reason="shared Piper instances absent")
def test_bert_matches_piper_and_is_infeasible_where_piper_is():
    inst = placement.load(SHARED / "bert32a100.json")
    for devices, memory in ((10, None), (8, 8 * 2**30)):
        exact = solve_parallel(inst, devices=devices, memory=memory, compiled=False)
        greedy = piper_value(inst, devices=devices, memory=memory, compiled=False)
        assert exact.value == pytest.approx(greedy.value, rel=1e-6)
        check = evaluate_parallel(inst, exact.plan, devices=devices, memory=memory)
        assert check.ok and check.value == pytest.approx(exact.value, rel=1e-9)
    assert solve_parallel(inst, devices=10, compiled=False).value == pytest.approx(0.09772736112, rel=1e-9)
    for memory in (2**30, 2 * 2**30):   # 1 GiB fits nothing; 2 GiB needs more than 8 devices
        assert solve_parallel(inst, devices=8, memory=memory, compiled=False).plan is None
        assert piper_value(inst, devices=8, memory=memory, compiled=False).plan is None


def two_types(cpu: bool) -> PiperInstance:
    # a -> b, m = 4, no transfers: a has t = 1 (time 2); b has t = 1 (time 2) and t = 2 (time 0.4).
    # Types: "gpu" 2 devices, speed 1; "cpu" 2 devices, speed 0.5 (times doubled), a CPU when ``cpu``.
    inst = chain([{1: (tmpc("v", 2),)}, {1: (tmpc("v", 2),), 2: (tmpc("v", 0.4),)}], microbatches=4)
    return PiperInstance("two", 1, 100.0, 1.0, 4, inst.nodes, inst.edges,
                         (PiperDeviceType("gpu", 2, 100.0), PiperDeviceType("cpu", 2, 100.0, 0.5, None, cpu)))


def test_two_device_types_by_hand():
    # Stage times (Σ time / speed / d; Σ d ≤ 4; each type's Σ d·t ≤ 2):
    #   {a,b} on gpu d=2: 4/2 = 2; on cpu d=2: 8/2 = 4.
    #   a on gpu d=2 (1), b on cpu d=2 (4/2 = 2): 2.   a on cpu d=2 (4/2 = 2), b on gpu t=2 d=1 (0.4) or d=2 (1): 2.
    #   b on cpu at t=2 (0.8/d) is what a CPU may not run; were it allowed: a on gpu d=2 (1), b on cpu t=2 d=1 (0.8): 1.
    # So the optimum is 2 with a CPU type and 1 when the second type is an accelerator.
    result = placement.solve(two_types(cpu=True))
    assert str(result.status) == "optimal" and result.value == pytest.approx(2.0, rel=1e-12)
    assert all(s.t == 1 for s in result.plan.stages if s.device_type == "cpu")
    free = placement.solve(two_types(cpu=False))
    assert free.value == pytest.approx(1.0, rel=1e-12)
    assert [(s.nodes, s.device_type, s.d, s.t) for s in free.plan.stages] == [((0,), "gpu", 2, 1), ((1,), "cpu", 1, 2)]
    assert free.megatron["expressible"] is False and "one kind of device" in free.megatron["reason"]
    # fewer gpus: a on gpu d=1 (2), b on cpu t=2 d=1 (0.8) -> 2; {a,b} on gpu d=1 -> 4; a on cpu d=2 (2), b on gpu -> 2
    assert placement.solve(two_types(cpu=False), devices={"gpu": 1, "cpu": 2}).value == pytest.approx(2.0)
    # the cpu alone, d=2 (it divides m = 4): 8 / 2 = 4
    only_cpu = placement.solve(two_types(cpu=True), devices="cpu:2")
    assert only_cpu.value == pytest.approx(4.0) and {s.device_type for s in only_cpu.plan.stages} == {"cpu"}
    for inst in (two_types(True), two_types(False)):
        assert brute_force_parallel(inst)[0] == pytest.approx(placement.solve(inst).value, rel=1e-12)


TWO_TYPES_EXAMPLE = two_types(cpu=True)


@settings(max_examples=80)
@given(typed_piper_instances())
@example(TWO_TYPES_EXAMPLE)
def test_dp_matches_brute_force_with_device_types(inst):
    kinds = {t.name: t for t in inst.device_types}
    for plan in agrees_with_brute_force(inst, ("piper", "gpipe")):
        assert plan is None or all(kinds[s.device_type].degrees_allowed(s.t) for s in plan.stages)


def test_device_type_parameters_and_violations(tmp_path, capsys):
    inst = two_types(cpu=True)
    with pytest.raises(InvalidParameterError, match=r"^devices must give counts per device type for an instance with "
                                                     r"deviceTypes, as a mapping or '<type>:<count>"):
        placement.solve(inst, devices=3)
    with pytest.raises(InvalidParameterError, match=r"^devices names 'tpu', which is not a device type of the instance "
                                                     r"\(its types: gpu, cpu\)$"):
        placement.solve(inst, devices="tpu:2")
    for text in ("gpu:x", "gpu:\u00b2"):      # a superscript digit: isdigit() takes it, int() does not
        with pytest.raises(InvalidParameterError, match=r"^devices must be a device count or '<type>:<count>"):
            placement.solve(inst, devices=text)
    with pytest.raises(InvalidParameterError, match=r"^devices gives no device of any type$"):
        placement.solve(inst, devices={"gpu": 0})
    with pytest.raises(InvalidParameterError, match=r"^memory does not apply to an instance with deviceTypes"):
        placement.solve(inst, memory=5.0)
    with pytest.raises(InvalidParameterError, match=r"^devices names device types, but the instance has no deviceTypes"):
        placement.solve(chain([{1: (tmpc("v", 1),)}]), devices="gpu:1")
    with pytest.raises(InvalidParameterError, match=r"^devices must be an integer count, not the text ' 4' "
                                                     r"\(devices=4\)$"):
        placement.solve(chain([{1: (tmpc("v", 1),)}]), devices=" 4")
    plan = ParallelPlan.from_json({"stages": [
        {"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "v"}, "deviceType": "gpu"},
        {"nodes": [1], "d": 1, "t": 2, "tmpcs": {"1": "v"}, "deviceType": "cpu"}]})
    assert evaluate_parallel(inst, plan).violations == ("stage 1 has t=2 on CPU type 'cpu'; a CPU runs t=1 only",)
    assert evaluate_parallel(inst, plan, devices={"gpu": 1, "cpu": 2}).violations[0] == (
        "the plan uses 2 devices of type 'gpu' (Σ d·t), more than the 1 available")
    fine = ParallelPlan.from_json({"stages": [
        {"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "v"}, "deviceType": "gpu"},
        {"nodes": [1], "d": 2, "t": 1, "tmpcs": {"1": "v"}, "deviceType": "cpu"}]})
    assert evaluate_parallel(inst, fine).ok and evaluate_parallel(inst, fine).value == 2.0   # max(2/2, 2/0.5/2)
    assert evaluate_parallel(inst, fine, devices=3).violations == (   # an integer bounds the total besides
        "the plan uses 4 devices (Σ d·t), more than the 3 available",)
    unnamed = ParallelPlan.from_json({"stages": [{"nodes": [0, 1], "d": 1, "t": 1, "tmpcs": {"0": "v", "1": "v"}}]})
    assert evaluate_parallel(inst, unnamed).violations == (
        "stage 0 names no device type (the instance has deviceTypes: gpu, cpu)",)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(inst.to_json()))
    assert main(["solve", str(path), "--devices", "gpu:2,cpu:2", "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["value"] == pytest.approx(2.0) and doc["devices"] == {"gpu": 2, "cpu": 2}
    assert {s["deviceType"] for s in doc["stages"]} <= {"gpu", "cpu"}
    assert main(["solve", str(path), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "instance two: 2 nodes, gpu:2, cpu:2 devices, 4 micro-batches per batch, schedule piper"
    assert lines[3].split()[:5] == ["stage", "nodes", "type", "d", "t"]
    assert main(["solve", str(path), "--devices", "gpu:2,gpu:1"]) == 2
    assert capsys.readouterr().err.strip() == "error: --devices names 'gpu' twice in 'gpu:2,gpu:1'"
    assert main(["solve", str(path), "--devices", "4"]) == 2
    assert capsys.readouterr().err.startswith("error: --devices must give counts per device type")


def test_a_batch_too_long_to_lay_out_still_gets_its_plan():
    # 3,000,000 micro-batches per batch: the time per batch (the longest path of the batch's task graph,
    # 6,000,000 tasks here) is over the task-graph limit, which refused the whole solve; the plan is
    # the same as at any m (one stage of both nodes on the one device), only its time per batch is left out
    doc = {"maxDevices": 1, "maxMemoryPerDevice": 100.0, "bandwidth": 1.0, "mbsInBatch": 3_000_000, "edges": [],
           "nodes": [{"id": k, "name": f"n{k}", "TMPCs": {"1": [_tmpc("a", 1.0, 1.0, 0.0)]}} for k in (0, 1)]}
    result = placement.solve(placement.load(doc))
    assert (result.status, result.value, result.time_per_batch) == ("optimal", 2.0, None)
    assert result.stats["time_per_batch"].startswith("not computed: 3,000,000 micro-batches make 6,000,000 tasks")


def test_micro_batches_near_the_largest_count_read_leave_no_memory_split_and_still_solve():
    # mbsInBatch = 2^53, the largest count the reader takes: a stage's memory has up to 2 · (2^53 + 1) terms, so no
    # split of the sizes into two parts keeps their sums below 2^52 (the shift of the split came out -1, and the
    # split raised ValueError: negative shift count); the DP runs on bounds widened by 1e-8 instead, and the one
    # stage of both nodes (memory 2 of 100, time 2) is the optimum
    doc = {"maxDevices": 1, "maxMemoryPerDevice": 100.0, "bandwidth": 1.0, "mbsInBatch": 2 ** 53, "edges": [],
           "nodes": [{"id": k, "name": f"n{k}", "TMPCs": {"1": [_tmpc("a", 1.0, 1.0, 1.0)]}} for k in (0, 1)]}
    result = placement.solve(placement.load(doc))
    assert (result.status, result.value, result.time_per_batch) == ("optimal", 2.0, None)
    assert [(s.nodes, s.d, s.t) for s in result.plan.stages] == [((0, 1), 1, 1)]


def test_the_set_limit_of_a_piper_instance_speaks_of_its_graph(tmp_path, capsys):
    # two unconnected nodes have four successor-closed sets; a limit of 1 refuses them, in terms of
    # Piper's graph (the ideals' message suggested colour classes, which Piper instances do not have)
    doc = {"maxDevices": 1, "maxMemoryPerDevice": 100.0, "bandwidth": 1.0, "mbsInBatch": 1, "edges": [],
           "nodes": [{"id": k, "name": f"n{k}", "TMPCs": {"1": [_tmpc("a", 1.0, 1.0, 0.0)]}} for k in (0, 1)]}
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    assert main(["solve", str(path), "--max-ideals", "1"]) == 2
    assert capsys.readouterr().err == ("error: more than 1 successor-closed node sets in a graph of 2 nodes; the DP "
                                       "over them would need too much time and memory. Raise the limit --max-ideals "
                                       "(time and memory grow with it, memory also with the nodes), or merge nodes "
                                       "into layers\n")


def two_sized_nodes(sizes: tuple[float, float], memory: float, unsplit: bool = False) -> PiperInstance:
    """Two unconnected nodes of 1 each, memoryUsageB the two sizes, one device of ``memory``, m = 1 (``unsplit``:
    beside_a_tiny_size)."""
    data = {"maxDevices": 1, "maxMemoryPerDevice": memory, "bandwidth": 1, "mbsInBatch": 1,
            "nodes": [{"id": k, "TMPCs": {"1": [{"id": "v", "timePerSample": 1, "parameterSize": 0,
                                                 "memoryUsageA": 0, "memoryUsageB": size,
                                                 "syncTimeFw": {}, "syncTimeBw": {}}]}}
                      for k, size in enumerate(sizes)],
            "edges": []}
    return parse_piper(beside_a_tiny_size(data) if unsplit else data)


def beside_a_tiny_size(data: dict) -> dict:
    """``data`` with node 0 given a second TMPC at each degree, slower by 1 and 1.2345678901234567e-25 bytes
    larger (in its memoryUsageA or memoryUsageB, whichever is 0): its plans and values are those of ``data``, but
    no unit holds 1.2345678901234567e-25 and sizes of 16 or 17 digits in whole numbers whose sums split into two
    parts below 2^52 (placement.parallel.dp.written_fit), so the DP runs on bounds widened (and, where its plan
    needs that slack, narrowed) by 1e-8."""
    node = data["nodes"][0]
    for tmpcs in node["TMPCs"].values():
        field = "memoryUsageA" if tmpcs[0]["memoryUsageA"] == 0 else "memoryUsageB"
        assert tmpcs[0][field] == 0
        tmpcs.append({**tmpcs[0], "id": "tiny", "timePerSample": tmpcs[0]["timePerSample"] + 1,
                      field: 1.2345678901234567e-25})
    return data


def test_memory_is_decided_on_the_sizes_as_written():
    """0.2 + 0.1 fits a device of 0.3 as written (its floating-point sum, 0.30000000000000004, does not):
    one stage of both nodes, 2; it was called infeasible. 0.7 + 0.1 = 0.8 does not fit 0.7999999999999999
    (which is that floating-point sum): with one device there is no plan; the DP's one stage was
    proven 'optimal', then refused by the evaluator (no_solution). The DP now sums the sizes in a unit
    of 10^-16, in which they are integers: infeasible, proven. The oracle reads memory through the
    evaluator, and agrees."""
    fits = two_sized_nodes((0.2, 0.1), 0.3)
    assert brute_force_parallel(fits)[0] == 2.0
    result = placement.solve(fits)
    assert (result.status, result.value) == ("optimal", 2.0)
    over = two_sized_nodes((0.7, 0.1), 0.7999999999999999)
    assert brute_force_parallel(over)[0] == math.inf
    result = placement.solve(over)
    assert (result.status, result.plan) == ("infeasible", None)


def test_sizes_left_by_floating_point_arithmetic_are_summed_as_written():
    """0.1 + 0.2 = 0.30000000000000004 and 0.2 + 0.4 = 0.6000000000000001 are whole numbers of 2^-52, in which they
    sum exactly to 0.9000000000000001; as written they sum to 0.90000000000000014, over a device of
    0.9000000000000001. On one device no plan fits, and the check says by how much. On two (node 0 -> 1, transfer
    0.5, m = 2): one stage of both on two replicas, 2 / 2 = 1, does not fit; two stages, 1 + 2 · 0.5 = 2, do.
    The DP took floating-point sums for exact, its one stage failed the check, and it answered no_solution; beside
    a tiny size (no split of the sizes into exact parts) it runs on widened and narrowed bounds, finds the two
    stages, and bounds the optimum by the widened run's 1."""
    over = two_sized_nodes((0.1 + 0.2, 0.2 + 0.4), 0.9000000000000001, unsplit=True)
    assert brute_force_parallel(over)[0] == math.inf
    result = placement.solve(over)
    assert (result.status, result.plan) == ("no_solution", None)
    assert ("stage 0 needs 0.90000000000000014 bytes per device (y=1 micro-batches in flight), more than the "
            "0.9000000000000001 available") in result.message

    def tmpc(k: int, size: float) -> dict:
        return {"id": "v", "timePerSample": 1, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": size,
                "syncTimeFw": {"0": 0} if k == 1 else {}, "syncTimeBw": {"1": 0} if k == 0 else {}}

    pair = parse_piper(beside_a_tiny_size({
        "maxDevices": 2, "maxMemoryPerDevice": 0.9000000000000001, "bandwidth": 1, "mbsInBatch": 2,
        "nodes": [{"id": k, "TMPCs": {"1": [tmpc(k, size)]}} for k, size in enumerate((0.1 + 0.2, 0.2 + 0.4))],
        "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0.5}]}))
    assert brute_force_parallel(pair)[0] == 2.0
    result = placement.solve(pair)
    assert (result.status, result.value, result.bound) == ("feasible", 2.0, 1.0)
    assert [stage.nodes for stage in result.plan.stages] == [(0,), (1,)]


def test_activations_whose_products_hide_their_rounding_are_summed_as_written():
    """A chain of four nodes of time 1 on three devices of 0.75 (m = 5, so up to 5 micro-batches in flight), memory
    per micro-batch 0.05, 0.2, 0.35 and 0.5: times 5 all are as written (0.25, 1.0, 1.75, 2.5), but with 3 in
    flight 0.05 · 3 + 0.2 · 3 is 0.7500000000000001 in floating point. The only plan that fits is nodes 0 and 1
    (0.75 as written, 3 in flight), 2 (0.7) and 3 (0.5): 2. The DP took the products for exact and called the
    instance infeasible."""
    def tmpc(k: int) -> dict:
        return {"id": "v", "timePerSample": 1, "parameterSize": 0, "memoryUsageA": (0.05, 0.2, 0.35, 0.5)[k],
                "memoryUsageB": 0, "syncTimeFw": {str(k - 1): 0} if k else {},
                "syncTimeBw": {str(k + 1): 0} if k < 3 else {}}

    chain = parse_piper({"maxDevices": 3, "maxMemoryPerDevice": 0.75, "bandwidth": 1, "mbsInBatch": 5,
                         "nodes": [{"id": k, "TMPCs": {"1": [tmpc(k)]}} for k in range(4)],
                         "edges": [{"sourceId": k, "destId": k + 1, "communicationCost": 0} for k in range(3)]})
    assert brute_force_parallel(chain)[0] == 2.0
    result = placement.solve(chain)
    assert (result.status, result.value, result.bound) == ("optimal", 2.0, 2.0)
    assert [stage.nodes for stage in result.plan.stages] == [(0, 1), (2,), (3,)]


def test_a_table_too_large_is_refused_before_the_degrees_are_listed():
    """Two nodes, 2^40 devices and micro-batches: listing every d ≤ 2^40 that divides m took hours before the
    table's size refused it. Three types of 2^22 devices (m = 2^22): (2^22 + 1)^3 device counts overflowed
    NumPy's product, and the refusal named 52,776,570,716,161 of them."""
    data = {"maxDevices": 2 ** 40, "maxMemoryPerDevice": 1e9, "bandwidth": 1, "mbsInBatch": 2 ** 40, "edges": [],
            "nodes": [{"id": k, "TMPCs": {"1": [{"id": "v", "timePerSample": 1, "parameterSize": 0,
                                                 "memoryUsageA": 0, "memoryUsageB": 0, "syncTimeFw": {},
                                                 "syncTimeBw": {}}]}} for k in range(2)]}
    typed = parse_piper({**data, "mbsInBatch": 2 ** 22,
                         "deviceTypes": {name: {"count": 2 ** 22, "memory": 1e9} for name in "abc"}})
    with pytest.raises(LimitExceededError) as raised:
        placement.solve(typed)
    assert str(raised.value) == ("the DP table would have at least 221,361,087,214,226,767,875 cells (more than "
                                 "50,000,000): at least 3 sets × 73,787,029,071,408,922,625 device counts; lower "
                                 "devices")
    with pytest.raises(LimitExceededError) as raised:
        placement.solve(parse_piper(data))
    assert (str(raised.value), raised.value.parameter) == (
        "the DP table would have at least 3,298,534,883,331 cells (more than 50,000,000): at least 3 sets × "
        "1,099,511,627,777 device counts; lower devices", "devices")


def test_no_plan_message_gives_the_memory_exactly():
    """0.2 + 0.1 fits 0.3 but not 0.29999999999999: the refusal named the memory with six digits, '0.3', the
    bound that fits."""
    result = placement.solve(two_sized_nodes((0.2, 0.1), 0.3), memory=0.29999999999999)
    assert (result.status, result.plan) == ("infeasible", None)
    assert result.message == ("no plan on 1 device of 0.29999999999999 bytes: no pipeline of the devices fits every "
                              "stage's memory")


def test_a_plan_the_floating_point_sum_hides_is_found():
    """Nodes 0 → 1, m = 2, two devices of 0.7999999999999999; node 0 has one TMPC (time 1, 0.1 bytes),
    node 1 two: a (time 1, 0.7) and slow (time 1.5, 0.6). One stage of both at d = 2 with a and a
    would take (1 + 1) / 2 = 1, but 0.1 + 0.7 = 0.8 does not fit (its floating-point sum is the
    bound); with slow, 0.7 fits: (1 + 1.5) / 2 = 1.25. Two stages of one device each (d = 1) pay
    the transfer of 1 and take at least 1 + 1 = 2. So 1.25; the DP took a and a and the evaluator
    refused its plan (no_solution)."""
    def tmpc(name, time, size, fw, bw):
        return {"id": name, "timePerSample": time, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": size,
                "syncTimeFw": fw, "syncTimeBw": bw}

    first, second = ({}, {"1": 0}), ({"0": 0}, {})
    instance = parse_piper({"maxDevices": 2, "maxMemoryPerDevice": 0.7999999999999999, "bandwidth": 1,
                            "mbsInBatch": 2, "nodes": [{"id": 0, "TMPCs": {"1": [tmpc("a", 1.0, 0.1, *first)]}},
                                                       {"id": 1, "TMPCs": {"1": [tmpc("a", 1.0, 0.7, *second),
                                                                                 tmpc("slow", 1.5, 0.6, *second)]}}],
                            "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 1}]})
    assert brute_force_parallel(instance)[0] == 1.25
    result = placement.solve(instance)
    assert (result.status, result.value) == ("optimal", 1.25)


def fast_at_two(fast: float, devices: int = 2, unsplit: bool = False) -> PiperInstance:
    """Nodes 0 → 1, m = 2, ``devices`` devices of 0.7999999999999999 bytes; memoryUsageA 0.1 and 0.7 (per
    micro-batch in flight), time per sample 1 at t = 1 and ``fast`` at t = 2, no communication. The unit in
    which the sizes are whole, 10^-16, holds the most in flight (3 · 0.8 = 2.4) in 2.4e16 > 2^53 units: no
    exact unit (``unsplit``: beside_a_tiny_size, and the DP's memory bounds are widened by 1e-8)."""
    def tmpc(time, size, fw, bw):
        return {"id": "a", "timePerSample": time, "parameterSize": 0, "memoryUsageA": size, "memoryUsageB": 0,
                "syncTimeFw": fw, "syncTimeBw": bw}

    data = {"maxDevices": devices, "maxMemoryPerDevice": 0.7999999999999999, "bandwidth": 1, "mbsInBatch": 2,
            "nodes": [{"id": k, "TMPCs": {"1": [tmpc(1, size, *sync)], "2": [tmpc(fast, size, *sync)]}}
                      for k, (size, sync) in enumerate(((0.1, ({}, {"1": 0})), (0.7, ({"0": 0}, {}))))],
            "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0}]}
    return parse_piper(beside_a_tiny_size(data) if unsplit else data)


def test_a_plan_that_needs_the_widened_memory_is_replaced_by_one_that_fits():
    """fast_at_two(0.4, unsplit=True): one stage at t = 2 takes 0.4 + 0.4 = 0.8 but needs 0.1 + 0.7 = 0.8 bytes
    (y = 1), which does not fit 0.7999999999999999 as written; one stage at d = 2 takes (1 + 1) / 2 = 1 and needs
    as much; two stages of one device take max(1, 1) = 1 and need 2 · 0.1 = 0.2 (y = 2) and 0.7: the optimum is 1.
    The DP on widened bounds took the first (0.8), the evaluator refused it, and the answer was no_solution. The
    DP runs again on bounds narrowed by 1e-8: the two stages, feasible (0.8, the widened optimum, bounds every
    plan). At t = 2 times of 0.5 the one stage ties the two (1): optimal. With one device nothing fits:
    no_solution, its message saying that the narrowed bounds found nothing either."""
    assert brute_force_parallel(fast_at_two(0.4, unsplit=True))[0] == 1.0
    assert brute_force_parallel(fast_at_two(0.5, unsplit=True))[0] == 1.0
    result = placement.solve(fast_at_two(0.4, unsplit=True))
    assert (str(result.status), result.value, result.bound) == ("feasible", 1.0, 0.8)
    assert [(stage.nodes, stage.d, stage.t) for stage in result.plan.stages] == [((0,), 1, 1), ((1,), 1, 1)]
    assert result.message == ("the memory figures have no unit in which the DP's sums are exact "
                              "(placement.problem.memory_fit): its optimum on bounds widened by 1e-08, 0.8, needs "
                              "that slack, and its plan on bounds narrowed by 1e-08 is not proven optimal")
    result = placement.solve(fast_at_two(0.5, unsplit=True))
    assert (str(result.status), result.value, result.bound) == ("optimal", 1.0, 1.0)
    alone = fast_at_two(0.4, devices=1, unsplit=True)
    assert brute_force_parallel(alone)[0] == math.inf
    result = placement.solve(alone)
    assert (str(result.status), result.plan) == ("no_solution", None)
    assert result.message.endswith("; on memory bounds narrowed by 1e-08 (the memory figures have no unit in which "
                                   "the DP's sums are exact) it finds no plan that passes it either")


def chain_after_two(fast: float, unsplit: bool = False) -> PiperInstance:
    """fast_at_two(fast) followed by a chain of 7 nodes of no time and no memory: 9 nodes, past the branch and
    bound of the time-per-batch search, with the plans and times of fast_at_two (``unsplit``: beside_a_tiny_size)."""
    def tmpc(time, size, k):
        return {"id": "a", "timePerSample": time, "parameterSize": 0, "memoryUsageA": size, "memoryUsageB": 0,
                "syncTimeFw": {str(k - 1): 0} if k else {}, "syncTimeBw": {str(k + 1): 0} if k < 8 else {}}

    times = [(1, fast, 0.1), (1, fast, 0.7)] + [(0, 0, 0)] * 7
    data = {"maxDevices": 2, "maxMemoryPerDevice": 0.7999999999999999, "bandwidth": 1, "mbsInBatch": 2,
            "nodes": [{"id": k, "TMPCs": {"1": [tmpc(one, size, k)], "2": [tmpc(two, size, k)]}}
                      for k, (one, two, size) in enumerate(times)],
            "edges": [{"sourceId": k, "destId": k + 1, "communicationCost": 0} for k in range(8)]}
    return parse_piper(beside_a_tiny_size(data) if unsplit else data)


def test_a_time_per_batch_plan_that_needs_the_widened_memory_is_replaced_by_one_that_fits():
    """The time-per-batch search on fast_at_two(0.4, unsplit=True) (1F1B, m = 2): the DP on widened bounds took one
    stage at t = 2 (0.8 bytes, over 0.7999999999999999 as written) and the answer was no_solution. Under 1F1B the only
    plan that fits is the two stages of one device (y = 2 and 1: 0.2 and 0.7 bytes; one stage needs 0.8 at
    any degree), each 1 per micro-batch: (m + S − 1) · 1 = 3, which the branch and bound over every plan (memory
    decided exactly) proves. Past the branch and bound (chain_after_two: 9 nodes) the same plan is feasible
    with the widened bound m·M* = 2 · 0.8. Under GPipe (y = m / d: 2 · 0.7 on one device, 0.8 on two) no plan
    fits: the narrowed DP finds none, and the branch and bound proves it (infeasible); past the branch and
    bound, no_solution, saying that the narrowed bounds found nothing either."""
    result = placement.solve(fast_at_two(0.4, unsplit=True), objective="time-per-batch", schedule="1f1b")
    assert (str(result.status), result.value, result.bound) == ("optimal", 3.0, 3.0)
    assert [(stage.nodes, stage.d, stage.t) for stage in result.plan.stages] == [((0,), 1, 1), ((1,), 1, 1)]
    result = placement.solve(chain_after_two(0.4, unsplit=True), objective="time-per-batch", schedule="1f1b")
    assert (str(result.status), result.value, result.bound) == ("feasible", 3.0, 1.6)
    assert [(stage.nodes, stage.d) for stage in result.plan.stages] == [((0,), 1), ((1, 2, 3, 4, 5, 6, 7, 8), 1)]
    assert result.message == ("the memory figures have no unit in which the DP's sums are exact "
                              "(placement.problem.memory_fit): the plan is the search's on memory bounds narrowed by "
                              "1e-08, and the bound the search's on bounds widened by 1e-08 (m·M* of its DP, or its "
                              "branch and bound's)")
    result = placement.solve(fast_at_two(0.4, unsplit=True), objective="time-per-batch", schedule="gpipe")
    assert (str(result.status), result.plan, result.bound) == ("infeasible", None, math.inf)
    assert result.message == ("no plan on 2 devices of 0.7999999999999999 bytes: no pipeline of the devices fits "
                              "every stage's memory (the branch and bound over every plan, memory decided exactly)")
    result = placement.solve(chain_after_two(0.4, unsplit=True), objective="time-per-batch", schedule="gpipe")
    assert (str(result.status), result.plan) == ("no_solution", None)
    assert result.message.endswith("; on memory bounds narrowed by 1e-08 (the memory figures have no unit in which "
                                   "the DP's sums are exact) it finds no plan that passes it either")


def fills_at_one_ulp() -> PiperInstance:
    """Nodes 0 -> 1, one device of 0.5, m = 1. Node 0: a (time 1, 0.22345678901234567 bytes); node 1: fast (time 1,
    0.2765432109876544, one ulp above what fills the device) and slow (time 2, 0.27654321098765433): a and slow fill
    0.5 exactly as written, a and fast exceed it by 7e-17."""
    def tmpc(name, time, size, fw, bw):
        return {"id": name, "timePerSample": time, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": size,
                "syncTimeFw": fw, "syncTimeBw": bw}

    return parse_piper({"maxDevices": 1, "maxMemoryPerDevice": 0.5, "bandwidth": 1, "mbsInBatch": 1,
                        "nodes": [{"id": 0, "TMPCs": {"1": [tmpc("a", 1, 0.22345678901234567, {}, {"1": 0})]}},
                                  {"id": 1, "TMPCs": {"1": [tmpc("fast", 1, 0.2765432109876544, {"0": 0}, {}),
                                                            tmpc("slow", 2, 0.27654321098765433, {"0": 0}, {})]}}],
                        "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0}]})


def test_memory_without_an_exact_unit_is_decided_as_written():
    """Sizes of 17 digits have no unit in which the DP's sums are exact below 2^53. The DP ran on bounds widened by
    1e-8, then narrowed: on fills_at_one_ulp the widened run took a and fast (2), which the evaluator refused, and
    the narrowed one missed a and slow, which fill the device exactly: no_solution with the bound 2, where the
    optimum is 3. Their sizes as written, whole numbers of 10^-17 split into two parts whose sums stay below 2^52,
    now decide each stage near a bound exactly: optimal 3 (plain Python and compiled alike). The instances of
    beside_a_tiny_size without that size: fast_at_two(0.4) is optimal (1, the two stages), infeasible on one
    device, and infeasible under GPipe for the time per batch (past the branch and bound, chain_after_two); 1F1B's
    time per batch past it is bounded by m·M* = 2 · 1, M* now the exact optimum."""
    instance = fills_at_one_ulp()
    assert brute_force_parallel(instance)[0] == 3.0
    result = placement.solve(instance)
    assert (str(result.status), result.value, result.bound) == ("optimal", 3.0, 3.0)
    assert dict(result.plan.stages[0].tmpcs) == {0: "a", 1: "slow"}
    for compiled in (False, True):
        found = solve_parallel(instance, compiled=compiled)
        assert (found.value, found.stats["memory_rounded"], found.stats["memory_as_written"]) == (3.0, False, True)
    result = placement.solve(fast_at_two(0.4))
    assert (str(result.status), result.value, result.bound) == ("optimal", 1.0, 1.0)
    assert [(stage.nodes, stage.d, stage.t) for stage in result.plan.stages] == [((0,), 1, 1), ((1,), 1, 1)]
    result = placement.solve(fast_at_two(0.4, devices=1))
    assert (str(result.status), result.message) == (
        "infeasible", "no plan on 1 device of 0.7999999999999999 bytes: no pipeline of the devices fits every stage's "
                      "memory")
    result = placement.solve(chain_after_two(0.4), objective="time-per-batch", schedule="1f1b")
    assert (str(result.status), result.value, result.bound) == ("feasible", 3.0, 2.0)
    result = placement.solve(chain_after_two(0.4), objective="time-per-batch", schedule="gpipe")
    assert (str(result.status), result.plan, result.bound) == ("infeasible", None, math.inf)
    over = two_sized_nodes((0.1 + 0.2, 0.2 + 0.4), 0.9000000000000001)
    assert str(placement.solve(over).status) == "infeasible"


def test_a_size_that_fits_no_device_leaves_the_others_decided_as_written():
    """fills_at_one_ulp with node 0 given a TMPC of 1e30 bytes (time 2), which no device holds: counted in the unit
    of the 17-digit sizes (10^-17) it overflowed the two parts, so the DP ran on widened bounds (a and fast, 2, which
    the evaluator refused), then on narrowed ones, which miss a and slow: no_solution, bound 2. A size above every
    bound now stands as one unit above the largest: the sizes are decided as written, and a and slow are
    optimal (3); on a device one ulp smaller nothing fits."""
    data = fills_at_one_ulp().to_json()
    tmpcs = data["nodes"][0]["TMPCs"]["1"]
    tmpcs.append({**tmpcs[0], "id": "huge", "timePerSample": 2, "memoryUsageB": 1e30})
    instance = parse_piper(data)
    assert brute_force_parallel(instance)[0] == 3.0
    result = placement.solve(instance)
    assert (str(result.status), result.value, result.bound) == ("optimal", 3.0, 3.0)
    assert dict(result.plan.stages[0].tmpcs) == {0: "a", 1: "slow"}
    found = solve_parallel(instance, compiled=True)
    assert (found.value, found.stats["memory_rounded"], found.stats["memory_as_written"]) == (3.0, False, True)
    smaller = parse_piper({**data, "maxMemoryPerDevice": math.nextafter(0.5, 0)})
    assert brute_force_parallel(smaller)[0] == math.inf
    assert str(placement.solve(smaller).status) == "infeasible"


def test_choices_alike_in_floating_point_are_compared_as_written():
    """Nodes 0 -> 1 on one device of 1.0418779159706237 (m = 1, 16 digits: no exact unit). Node 0: c0 (time 2,
    0.4857285786516104) and c1 (2.5, 0.4857285786516103); node 1: c0 (2, 0.5561493373190135) and c1 (3,
    0.5561493373190134). Only c1 and c1 fit, exactly (5.5); every choice sums to the bound in floating point, so
    a front that dropped c1 and c1 for the cheaper c0 and c1 (equal memory there, over the bound as written) found
    nothing, and called the instance infeasible; the widened and narrowed runs answered no_solution."""
    def tmpc(name, time, size, fw, bw):
        return {"id": name, "timePerSample": time, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": size,
                "syncTimeFw": fw, "syncTimeBw": bw}

    instance = parse_piper({
        "maxDevices": 1, "maxMemoryPerDevice": 1.0418779159706237, "bandwidth": 1, "mbsInBatch": 1,
        "nodes": [{"id": 0, "TMPCs": {"1": [tmpc("c0", 2, 0.4857285786516104, {}, {"1": 0}),
                                            tmpc("c1", 2.5, 0.4857285786516103, {}, {"1": 0})]}},
                  {"id": 1, "TMPCs": {"1": [tmpc("c0", 2, 0.5561493373190135, {"0": 0}, {}),
                                            tmpc("c1", 3, 0.5561493373190134, {"0": 0}, {})]}}],
        "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0}]})
    assert brute_force_parallel(instance)[0] == 5.5
    result = placement.solve(instance)
    assert (str(result.status), result.value, dict(result.plan.stages[0].tmpcs)) == ("optimal", 5.5, {0: "c1", 1: "c1"})
    assert solve_parallel(instance, compiled=True).value == 5.5


def test_a_bound_whose_unit_exceeds_every_float():
    """A device of 5e-324 bytes (the least float): as written a whole number of 10^-324, a unit whose count
    exceeds every float, which raised OverflowError. Node 0's fat (time 1, 0.1 · y + 0.2 bytes) does not fit, its
    thin (time 3, no memory) does, beside node 1 (time 1, no memory): one stage, 4."""
    instance = chain([{1: (tmpc("fat", 1, a=0.1, b=0.2), tmpc("thin", 3))}, {1: (tmpc("v", 1),)}], memory=5e-324)
    assert brute_force_parallel(instance)[0] == 4.0
    result = placement.solve(instance)
    assert (str(result.status), result.value, result.bound) == ("optimal", 4.0, 4.0)
    assert dict(result.plan.stages[0].tmpcs) == {0: "thin", 1: "v"}


def seventeen_digit_instance(rng) -> PiperInstance:
    """A chain of 3 or 4 nodes with 1 or 2 TMPCs (the second slower and 1 to 3 ulps smaller) of sizes with 17
    digits, m of 1, 2 or 4 and 1 to 3 devices, whose memory is the peak memory as written of one of its plans,
    rounded to the nearest float, or one ulp either side."""
    n, m, devices = rng.randint(3, 4), rng.choice([1, 2, 4]), rng.randint(1, 3)
    nodes = []
    for k in range(n):
        size = rng.randint(10 ** 16, 10 ** 17 - 1) * 1e-17
        options = [(rng.choice([1, 2, 3]), size)]
        if rng.random() < 0.6:
            smaller = size
            for _ in range(rng.randint(1, 3)):
                smaller = math.nextafter(smaller, 0)
            options.append((options[0][0] + 0.5, smaller))
        nodes.append({"id": k, "TMPCs": {"1": [
            {"id": f"c{j}", "timePerSample": time, "parameterSize": 0, "memoryUsageA": size / 10 if m > 1 else 0,
             "memoryUsageB": size, "syncTimeFw": {str(k - 1): 0} if k else {},
             "syncTimeBw": {str(k + 1): 0} if k < n - 1 else {}} for j, (time, size) in enumerate(options)]}})
    data = {"maxDevices": devices, "maxMemoryPerDevice": math.inf, "bandwidth": 1, "mbsInBatch": m, "nodes": nodes,
            "edges": [{"sourceId": k, "destId": k + 1, "communicationCost": 1} for k in range(n - 1)]}
    plan = brute_force_parallel(parse_piper({**data, "maxMemoryPerDevice": 1e9}))[1]
    peak = max(stage.memory for stage in evaluate_parallel(parse_piper({**data, "maxMemoryPerDevice": 1e9}),
                                                           plan).stages)
    data["maxMemoryPerDevice"] = math.nextafter(peak, rng.choice([-math.inf, peak, math.inf]))
    return parse_piper(data)


def test_sizes_of_seventeen_digits_are_solved_as_the_brute_force_finds():
    """30 instances of seventeen_digit_instance (seeded): the status and value agree with the brute force (which
    reads memory as written through the evaluator). On bounds widened and narrowed by 1e-8, 15 of them were not
    solved: no_solution, or feasible, unproven or above the optimum."""
    rng = random.Random(7)
    for _ in range(30):
        instance = seventeen_digit_instance(rng)
        best = brute_force_parallel(instance)[0]
        result = placement.solve(instance)
        assert (str(result.status), result.value) == (("optimal", best) if math.isfinite(best) else
                                                      ("infeasible", None))


def test_a_time_per_batch_not_computed_says_why():
    """10^12 micro-batches per batch: the plan (one stage, d = 1) is found, its batch is too long to lay
    out as a task graph; the text said "time per batch -" with no reason."""
    from placement.report.parallel import format_parallel_result

    inst = chain([{1: (tmpc("v", 3),)}], devices=1, microbatches=10**12)
    result = placement.solve(inst)
    assert str(result.status) == "optimal" and result.time_per_batch is None
    assert ("time per batch - (not computed: 1,000,000,000,000 micro-batches make 2,000,000,000,000 tasks, "
            in format_parallel_result(inst, result))


def test_fill_stretches_cover_the_sets_in_growing_steps():
    from placement.parallel.dp import FILL_CALLS, fill_stretches

    assert fill_stretches(0) == [0] and fill_stretches(1) == [0, 1] and fill_stretches(3) == [0, 1, 2, 3]
    bounds = fill_stretches(100_000)
    assert bounds[0] == 0 and bounds[-1] == 100_000 and len(bounds) == FILL_CALLS + 1
    steps = [b - a for a, b in zip(bounds, bounds[1:])]
    assert all(s > 0 for s in steps) and steps[0] > steps[-1]   # equal work: the later sets take longer each
    # the j-th bound is ⌈100,000 · √(j / 64)⌉: a quarter of the calls fill half of the sets
    assert bounds[16] == 50_000


def test_a_time_limit_returns_the_pipeline_along_the_order_with_its_bound():
    """Past the time limit the DP over the sets stops after its first stretch (set ∅); the chain's pass
    has run: on a chain it is the optimum of test_data_parallel_split_by_hand (4), but unproven, so
    feasible, with the bound Σ least t·time over the devices: (4 + 2) / 3 = 2."""
    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    stopped = placement.solve(inst, time_limit=1e-9)
    assert (str(stopped.status), stopped.value, stopped.bound) == ("feasible", 4.0, 2.0)
    assert stopped.message == ("the time limit ran out while the DP filled its table (1 of 3 sets); the plan is "
                               "the best pipeline along one topological order")
    assert evaluate_parallel(inst, stopped.plan).value == 4.0
    assert str(placement.solve(inst, time_limit=60).status) == "optimal"
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(inst, time_limit=5, objective="time-per-batch", schedule="gpipe")
    assert info.value.detail == "does not apply to objective='time-per-batch' (its search runs to the end)"


def test_a_time_limit_plan_that_meets_its_bound_is_optimal():
    """Past the time limit the chain's plan is proven where it meets the bound Σ least t·time over the devices:
    a -> b, times 4 and 2 at t = 1 (6 and 6 at t = 2), one device: the bound (4 + 2) / 1 = 6, and the one
    plan, {a, b} on d = t = 1 (no edge crosses), takes 6. On two devices the bound falls to 3 and the same
    plan (the optimum: t = 2 takes 12, d = 2 does not divide m = 1, and two stages take 6 at a, 4 + 2·1 for its
    edge both ways) is not proven."""
    inst = chain([{1: (tmpc("v", 4),), 2: (tmpc("v", 6),)}, {1: (tmpc("v", 2),), 2: (tmpc("v", 6),)}], cost=1.0)
    stopped = placement.solve(inst, time_limit=1e-9)
    assert (str(stopped.status), stopped.value, stopped.bound) == ("optimal", 6.0, 6.0)
    assert stopped.message == ("the time limit ran out while the DP filled its table (1 of 3 sets); the plan is "
                               "the best pipeline along one topological order, which meets the bound of every plan")
    two = placement.solve(inst, devices=2, time_limit=1e-9)
    assert (str(two.status), two.value, two.bound) == ("feasible", 6.0, 3.0)


def test_both_passes_of_the_dp_tell_their_progress(monkeypatch):
    """The pass along one topological order, which on a chain does all the work of the DP over the sets again
    and ran minutes on long chains, tells its progress as the DP over the sets does: a clock that moves two
    seconds at each reading makes every call of either pass but its first worth a line (the first call's wait
    may be the kernels compiling, which has its own line)."""
    import types

    from placement.parallel import dp as dp_module

    clock = iter(range(0, 10**6, 2))
    monkeypatch.setattr(dp_module, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    lines: list[str] = []
    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    assert placement.solve(inst, progress=lines.append).value == 4.0
    told = [line.split(":")[0] for line in lines if " filled, " in line]
    assert told[0] == "DP along one topological order (its plan bounds the DP over the sets)"
    assert told[-1] == "DP over the sets"
    assert lines[1].startswith("DP along one topological order (its plan bounds the DP over the sets): 2 of 3 filled")


def test_the_dp_tells_how_many_sets_it_lists_where_that_takes_a_second(monkeypatch):
    """Before its passes the DP lists the successor-closed sets and builds their tables, which on a chain of
    10,000 nodes took 20 s without a line; where the sets are listed a second or more after the call began (a
    clock that moves two seconds at each reading), it says how many there are, and otherwise nothing."""
    import types

    from placement.parallel import dp as dp_module

    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    lines: list[str] = []
    assert placement.solve(inst, progress=lines.append).value == 4.0
    assert not any("successor-closed sets over" in line for line in lines)
    clock = iter(range(0, 10**6, 2))
    monkeypatch.setattr(dp_module, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    lines.clear()
    assert placement.solve(inst, progress=lines.append).value == 4.0
    assert lines[0] == "3 successor-closed sets over 2 nodes"
    from placement.parallel import batch_search   # the time-per-batch search lists them for its DP runs
    monkeypatch.setattr(batch_search, "time", dp_module.time)
    lines.clear()
    placement.solve(inst, objective="time-per-batch", schedule="gpipe", progress=lines.append)
    assert lines[0] == "3 successor-closed sets over 2 nodes"


def test_docs_name_every_field_of_the_plan_json():
    """docs/piper.md's account of the plan JSON names every key it has, at the top and per stage: an interleaved
    plan (group, chunk, chunks) and one on device types (deviceType); the top-level keys were not listed."""
    import re

    interleaved = placement.solve(chain([{1: (tmpc("v", 1),)}] * 4, devices=2, microbatches=4),
                                  schedule="interleaved", chunks=2)
    typed = placement.solve(two_types(cpu=True), devices="gpu:2,cpu:2")
    docs = [interleaved.to_json(), typed.to_json()]
    assert [(d["value"], d["chunks"] if "chunks" in d else None, d["memory"]) for d in docs] == [
        (2.0, 2, 100.0), (2.0, None, None)]
    keys = {key for d in docs for key in d} | {key for d in docs for stage in d["stages"] for key in stage}
    assert {"group", "chunk", "deviceType", "devicesUsed", "timePerBatch", "runtime_s"} <= keys
    page = (Path(__file__).resolve().parents[1] / "docs" / "piper.md").read_text(encoding="utf-8")
    start = page.index("## Hand-off")
    assert keys - set(re.findall(r"`([A-Za-z_]+)`", page[start:page.index("\n## ", start)])) == set()


@pytest.mark.parametrize("recorded, refusal", [
    ({"devices": {"gpu": 2, "tpu": 1}}, "the plan records devices of type 'tpu', which is not a device type of the "
                                        "instance (its types: gpu, cpu)"),
    ({"devices": {"gpu": 0, "cpu": 0}}, "the plan records no device of any type"),
    ({"devices": 4}, "the plan records a device count (4), but the instance's deviceTypes take counts per type"),
    ({"memory": 5.0}, "the plan records a memory per device (5.0 bytes), but the instance's deviceTypes give each "
                      "type's memory"),
])
def test_a_plan_recording_devices_its_typed_instance_cannot_have_is_refused_as_solve_refuses_them(recorded, refusal):
    """verify took an unknown type (z:1), no device at all, a single count, and a memory per device on an instance
    with deviceTypes, where solve refuses each as an option; simulate ran them. The plan solve writes is checked."""
    instance = two_types(cpu=True)
    document = placement.solve(instance).to_json()
    assert placement.verify(instance, document).valid
    edited = {**document, **recorded}
    verdict = placement.verify(instance, edited)
    assert (verdict.valid, verdict.violations) == (False, (refusal,))
    with pytest.raises(placement.errors.InvalidPlanError, match="^" + re.escape(refusal) + "$"):
        placement.simulate(instance, edited)


@pytest.mark.parametrize("slow", [1e3, 1e17, 1e25])
def test_a_tmpc_far_slower_than_the_rest_leaves_the_optimum_as_it_is(slow):
    """Node 1's t = 1 TMPC takes ``slow``, node 0's 6: beside 1e17, the difference of two per-set sums of the times
    that valued a stage of node 0 alone lost its 6, and the DP's optimum was no plan's ("AssertionError: stage
    value 12.0 above the DP's optimum 7.0"). Stages are then valued by their own sums; the optimum is the brute
    force's, as it is with a TMPC of 1e3."""
    inst = chain([{1: (tmpc("x", 6, params=20),)}, {1: (tmpc("x", slow),), 2: (tmpc("x", 1),)}], cost=12.0,
                 devices=4, memory=1000.0, bandwidth=4.0, microbatches=4)
    result = placement.solve(inst)
    assert (result.value, [(s.nodes, s.d, s.t) for s in result.plan.stages]) == (8.5, [((0,), 2, 1), ((1,), 1, 2)])
    assert brute_force_parallel(inst)[0] == 8.5


def test_sets_whose_tables_would_not_fit_in_memory_are_refused_before_they_are_built(monkeypatch, tmp_path, capsys):
    """The DP's tables take a row per successor-closed set and a column per node (a chain of n nodes has n + 1
    sets: n² cells), kept as booleans and as floating-point numbers, and a column per edge: a chain of 50,000
    nodes would have asked for some 30 GB, more than many machines hold. They are refused before they are
    built, as the DP over ideals refuses tables past 80% of the memory available."""
    from placement.parallel.tables import check_memory_of_sets
    from placement.solvers import dp_table

    monkeypatch.setattr(dp_table, "memory_budget", lambda: 2.0 ** 30)
    check_memory_of_sets(1_000, 1_000, 999)   # 9 + 3 bytes a cell: 12 MB
    with pytest.raises(LimitExceededError) as info:
        check_memory_of_sets(10_001, 10_000, 9_999)
    assert str(info.value) == ("the DP's tables of 10,001 successor-closed node sets in a graph of 10,000 nodes "
                               "would take 1.1 GiB of memory, more than the 1.0 GiB it may use (80% of the memory "
                               "available); merge nodes into layers")
    inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
    assert placement.solve(inst).value == 4.0
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 60.0)   # the 3 sets of 2 nodes and an edge: 63 bytes
    with pytest.raises(LimitExceededError, match="^the DP's tables of 3 successor-closed node sets in a graph of 2"):
        placement.solve(inst)
