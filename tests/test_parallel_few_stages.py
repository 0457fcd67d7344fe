"""The plans of two or three stages searched for the least time per batch (placement.parallel.few_stages).

A chain derived by hand where a two-stage plan of mixed data-parallel degrees beats every other candidate of the
time-per-batch search, and agreement with brute force (every plan of as many stages, simulated) on tiny random
instances whose nodes have one TMPC per degree (where the search's TMPCs, those of least time per sample, are
the only ones). Chains as in tests/test_simulate_parallel.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from placement.io.piper import parse_piper
from placement.parallel.batch_search import search_time_per_batch
from placement.parallel.dp import listed_sets
from placement.parallel.few_stages import few_stage_plan
from placement.parallel.tables import build_tables
from placement.testing.bruteforce_parallel import brute_force_parallel

from tests.strategies_parallel import piper_instances, typed_piper_instances
from tests.test_simulate_parallel import chain


def test_two_stages_of_mixed_degrees_beat_every_other_candidate():
    # C = (1, 1) (F = 1/3, B = 2/3), node 0 with 1 parameter byte, m = 4, 3 devices, GPipe, no transfers.
    # The DP's plan, stages {0}, {1} of d = 1 (TPS 1 each; the bound is m·M* = 4): stage 1's forwards end at
    # 2/3 + j/3, its backwards then run from 5/3 to 5/3 + 4·2/3 = 13/3, and stage 0's last backward ends at 5.
    # One stage of d = 2 (the uniform candidate d = 2: a plan of two stages of d = 2 needs 4 devices; the single
    # stage of (t, d) = (1, 2)): TPS 2/2 + 4·(2 − 1)·1/(2·4) = 1.5, at least 4·1.5 = 6; one stage of d = 1
    # takes at least 4·2 = 8. So the candidates before the few-stage search leave 5. Stages {0} at d = 1, {1}
    # at d = 2 (3 devices, Σ d = 3 ≤ 4): stage 0's forwards end at j/3 + 1/3; micro-batches 0, 2 go to replica
    # A of stage 1, 1 and 3 to replica B, whose forwards end at 2/3, 4/3 (A) and 1, 5/3 (B), and backwards at 2,
    # 8/3 (A) and 7/3, 3 (B); stage 0's backwards then end at 8/3, 10/3, 4 and 14/3, and no stage has
    # parameters to all-reduce but stage 0, of d = 1: 14/3, which the branch and bound proves optimal.
    instance = chain([1.0, 1.0], m=4, parameters=[1.0, 0.0])
    found = search_time_per_batch(instance, devices=3, memory=1e15, schedule="gpipe", max_sets=100, max_nodes=0)
    assert found.stats["dp_plan_time_per_batch"] == pytest.approx(5.0)
    assert found.value == pytest.approx(14 / 3) and found.bound == 4.0 and not found.proven
    assert [(s.nodes, s.d, s.t) for s in found.plan.stages] == [((0,), 1, 1), ((1,), 2, 1)]
    assert found.stats["2_stage_search"]["plans"] >= 1
    proven = search_time_per_batch(instance, devices=3, memory=1e15, schedule="gpipe", max_sets=100)
    assert proven.proven and proven.value == pytest.approx(14 / 3)


def test_the_search_keeps_the_incumbent_where_no_plan_is_below_it_and_stops_at_its_limit():
    # The same chain: no plan of two stages takes less than 14/3, so with that incumbent nothing is returned.
    instance = chain([1.0, 1.0], m=4, parameters=[1.0, 0.0])
    tables = build_tables(instance)
    value, plan, stats = few_stage_plan(instance, devices=3, memory=1e15, schedule="gpipe", stages=2,
                                        incumbent=14 / 3, tables=tables, sets=listed_sets(tables, 100, None, 0.0),
                                        forward_share=1 / 3)
    assert (value, plan) == (14 / 3, None)
    assert not stats["stopped"]
    # with no plan to time, it stops and says so
    value, plan, stats = few_stage_plan(instance, devices=3, memory=1e15, schedule="gpipe", stages=2,
                                        incumbent=math.inf, tables=tables, sets=listed_sets(tables, 100, None, 0.0),
                                        forward_share=1 / 3, max_plans=0)
    assert (value, plan, stats["stopped"]) == (math.inf, None, True)


def _typed_chain(times):
    """A chain of one TMPC per node at t = 1, no transfers, parameters or memory; 2 devices of type "g", 1 of
    "o" (both of speed 1), m = 3."""
    nodes = []
    for i, time in enumerate(times):
        tmpc = {"id": "v", "timePerSample": time, "parameterSize": 0.0, "memoryUsageA": 0.0, "memoryUsageB": 0.0,
                "syncTimeFw": {str(i - 1): 0.0} if i else {},
                "syncTimeBw": {str(i + 1): 0.0} if i + 1 < len(times) else {}}
        nodes.append({"id": i, "TMPCs": {"1": [tmpc]}})
    return parse_piper({"maxDevices": 3, "maxMemoryPerDevice": 1.0, "bandwidth": 1.0, "mbsInBatch": 3,
                        "nodes": nodes, "edges": [{"sourceId": i, "destId": i + 1, "communicationCost": 0.0}
                                                  for i in range(len(times) - 1)],
                        "deviceTypes": {"g": {"count": 2, "memory": 1.0}, "o": {"count": 1, "memory": 1.0}}})


def test_a_last_stage_is_not_pruned_by_the_rest_of_the_graph_as_one_stage():
    # Chain x -> y -> z of times 3, 1, 1 (F = C/3, B = 2C/3), m = 3, 1F1B; d = 1 everywhere (d = 3 needs 3
    # devices of one type). Stages {x}, {y} on "g", {z} on "o" (or any other two on "g"): x (y = 3 in flight)
    # runs F0 F1 F2 from 0 to 3, then B0 from 3 (y's B0 ends at 7/3: y F0 1-4/3, z F0 4/3-5/3, z B0 -7/3,
    # y F1 2-7/3, y B0 7/3-3), B1 from 5 (y's B1 ends at 4), B2 from 7 (y's B2 ends at 5): 9 = m·C_x, the least
    # any plan with x on one device takes. The rest before {z}, {x, y} as one stage, takes at least 3·4 = 12 > 9,
    # which is no bound on a plan where {x, y} are two stages: the three-stage plan must still be found below an
    # incumbent of 9.5.
    instance = _typed_chain([3.0, 1.0, 1.0])
    devices = {"g": 2, "o": 1}
    best, _ = brute_force_parallel(instance, devices=devices, schedule="1f1b", objective="time-per-batch", stages=3)
    assert best == pytest.approx(9.0)
    tables = build_tables(instance)
    value, plan, stats = few_stage_plan(instance, devices=devices, memory=None, schedule="1f1b", stages=3,
                                        incumbent=9.5, tables=tables, sets=listed_sets(tables, 100, None, 0.0),
                                        forward_share=1 / 3)
    assert value == pytest.approx(9.0)
    assert [s.nodes for s in plan.stages] == [(0,), (1,), (2,)]


def _one_tmpc_per_degree(instance):
    """``instance`` with only the first TMPC of every node at every degree."""
    return replace(instance, nodes=tuple(replace(node, configurations={t: cs[:1] for t, cs in
                                                                        node.configurations.items()})
                                         for node in instance.nodes))


@given(st.one_of(piper_instances(max_nodes=4), typed_piper_instances(max_nodes=3)).map(_one_tmpc_per_degree),
       st.sampled_from(["gpipe", "1f1b"]), st.sampled_from([2, 3]))
@example(chain([1.0, 1.0], m=4, parameters=[1.0, 0.0]), "gpipe", 2)
@example(chain([1.0, 2.0, 3.0], m=2, parameters=[1.0, 0.0, 2.0], edge_bytes=[1.0, 2.0]), "1f1b", 3)
@settings(max_examples=80, derandomize=True, deadline=None)
def test_the_search_equals_brute_force_over_the_plans_of_as_many_stages(instance, schedule, stages):
    """With one TMPC per node and degree, the least time per batch of the plans of exactly ``stages`` stages (4
    devices, memory from the instance's to twice it, without device types; at least 4 micro-batches where fewer
    than ``stages`` would leave no plan, ``Σ d ≤ m``)."""
    assume(len(instance.nodes) >= stages)
    if instance.microbatches_in_batch < stages:
        instance = replace(instance, microbatches_in_batch=4)
    devices = {t.name: t.count for t in instance.device_types} if instance.device_types else 4
    memory = None if instance.device_types else instance.max_memory_per_device * (1 + instance.max_devices % 2)
    best, _ = brute_force_parallel(instance, devices=devices, memory=memory, schedule=schedule,
                                   objective="time-per-batch", stages=stages)
    tables = build_tables(instance)
    value, plan, stats = few_stage_plan(instance, devices=devices, memory=memory, schedule=schedule, stages=stages,
                                        incumbent=math.inf, tables=tables,
                                        sets=listed_sets(tables, 1000, None, 0.0), forward_share=1 / 3)
    assert not stats["stopped"]
    if math.isinf(best):
        assert plan is None
        return
    assert value == pytest.approx(best, rel=1e-9)
    assert len(plan.stages) == stages


def test_the_searches_of_two_and_three_stages_share_one_budget(monkeypatch):
    # The chain of the first test: the two-stage search times plans there; the three-stage search runs within what
    # it left, and not at all once it has spent the plans allowed.
    import placement.parallel.batch_search as batch

    calls = []

    def recorded(*args, **kwargs):
        found = few_stage_plan(*args, **kwargs)
        calls.append((kwargs["stages"], {k: v for k, v in kwargs.items() if k.startswith("max_")}, found[2]))
        return found

    monkeypatch.setattr(batch, "few_stage_plan", recorded)
    instance = chain([1.0, 1.0], m=4, parameters=[1.0, 0.0])
    search_time_per_batch(instance, devices=3, memory=1e15, schedule="gpipe", max_sets=100, max_nodes=0)
    (two, budget, spent), (three, left, _) = calls
    assert (two, three) == (2, 3) and spent["plans"] >= 1
    assert budget == batch.few_stage_budget()
    assert left == {"max_work": budget["max_work"] - spent["work"], "max_plans": budget["max_plans"] - spent["plans"],
                    "max_combinations": budget["max_combinations"] - spent["combinations"]}
    calls.clear()
    monkeypatch.setattr(batch, "few_stage_budget", lambda: {"max_work": 5_000, "max_plans": 1,
                                                            "max_combinations": 2_000_000})
    found = search_time_per_batch(instance, devices=3, memory=1e15, schedule="gpipe", max_sets=100, max_nodes=0)
    assert [stages for stages, _, _ in calls] == [2] and "3_stage_search" not in found.stats
    assert found.value == pytest.approx(14 / 3)
