"""The data- and tensor-parallel pipeline simulator against hand-worked batches, closed forms and Piper's model.

Chain instances: node ``i`` (one TMPC ``"x"`` for ``t = 1``, and ``"y"`` for ``t = 2`` where a
test asks) with time per sample ``C_i``, parameters ``P_i``, activation memory ``A_i`` and
resident memory ``R_i``; edge ``i -> i+1`` with ``b_i`` bytes; the bandwidth is given per test.
One node per stage unless a test groups them. With forward share ``φ`` a stage's tasks are
``F = in + φ·C + out`` and ``B = out + (1 − φ)·C + in`` (``in``/``out``: bytes of the edge
entering/leaving the stage over the bandwidth).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from graphlib import TopologicalSorter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement.cli import main
from placement.errors import InvalidParameterError, InvalidPlanError, LimitExceededError
from placement.io.piper import parse_piper, read_piper
from placement.parallel import ParallelPlan, ParallelStage, solve_piper
from placement.parallel.timing import time_per_batch
from placement.simulation.parallel import simulate_parallel
from placement.verification.parallel import evaluate_parallel

from tests.strategies_parallel import piper_instances

SHARED = Path(__file__).resolve().parents[2] / "shared" / "piper"
ROOT = Path(__file__).resolve().parents[1]


def tmpc(name, time, parameters=0.0, activations=0.0, resident=0.0, fw=None, bw=None):
    return {"id": name, "timePerSample": float(time), "parameterSize": float(parameters),
            "memoryUsageA": float(activations), "memoryUsageB": float(resident),
            "syncTimeFw": fw or {}, "syncTimeBw": bw or {}}


def chain(times, edge_bytes=None, m=4, bandwidth=1.0, parameters=None, activations=None, resident=None,
          sync_bw=None, tensor_parallel=False):
    """The chain instance of the module docstring (``sync_bw[i]``: node i's syncTimeBw on its out-edge)."""
    n = len(times)
    edge_bytes = edge_bytes or [0.0] * (n - 1)
    parameters = parameters or [0.0] * n
    activations = activations or [0.0] * n
    resident = resident or [0.0] * n
    sync_bw = sync_bw or [0.0] * n
    nodes = []
    for i in range(n):
        fw = {str(i - 1): 0.0} if i else {}
        bw = {str(i + 1): float(sync_bw[i])} if i + 1 < n else {}
        configurations = {"1": [tmpc("x", times[i], parameters[i], activations[i], resident[i], fw, bw)]}
        if tensor_parallel:   # half the time, parameters and memory on two devices, 4 extra bytes on each edge
            fw2 = {k: 4.0 for k in fw}
            bw2 = {k: 4.0 for k in bw}
            configurations["2"] = [tmpc("y", times[i] / 2, parameters[i] / 2, activations[i] / 2,
                                        resident[i] / 2, fw2, bw2)]
        nodes.append({"id": i, "TMPCs": configurations})
    edges = [{"sourceId": i, "destId": i + 1, "communicationCost": float(edge_bytes[i])} for i in range(n - 1)]
    return parse_piper({"maxDevices": 64, "maxMemoryPerDevice": 1e15, "bandwidth": float(bandwidth),
                        "mbsInBatch": m, "nodes": nodes, "edges": edges})


def one_per_stage(instance, degrees, t=1):
    name = "x" if t == 1 else "y"
    return [ParallelStage((i,), d, t, {i: name}) for i, d in enumerate(degrees)]


# --- hand-worked batches -------------------------------------------------------------------------

# Two stages, d = 2, m = 4, bandwidth 10: C = (3, 6), edge 10 bytes (1 time unit each way),
# P = (20, 40), A = (5, 7), R = (100, 200), φ = 1/3. F0 = 1 + 1 = 2, B0 = 1 + 2 = 3,
# F1 = 1 + 2 = 3, B1 = 1 + 4 = 5. Micro-batches 0, 2 go to replica 0 of both stages, 1, 3 to
# replica 1: two identical pipelines of n = 2 micro-batches (a, b).
# GPipe: stage 0 F(a) 0–2, F(b) 2–4; stage 1 F(a) 2–5, F(b) 5–8, B(a) 8–13, B(b) 13–18;
# stage 0 B(a) 13–16, B(b) 18–21. 1F1B (y0 = ⌈(2+2)/2⌉ = 2, y1 = 1): stage 1 F(a) 2–5, B(a)
# 5–10, F(b) 10–13, B(b) 13–18; stage 0 F(a), F(b), B(a) 10–13, B(b) 18–21: same ends.
# Ring all-reduce, 2(d−1) = 2 steps of W/d bytes: stage 0 2 × 20/2/10 = 2 → 21–23; stage 1
# 2 × 40/2/10 = 4 → 18–22. Batch 23. With Piper's 4(d−1)/d·W the steps double: 25 and 26.
# Memory: GPipe holds n = 2 per replica: 100 + 2·5 = 110, 200 + 2·7 = 214; 1F1B y = (2, 1):
# 110 and 207. Busy per replica: stage 1 2·(3+5) + 4 = 20, so time per sample 20/4 = 5 =
# Piper's c1/d + 2(d−1)/d·W/(m·bw) = 8/2 + 40/40 (ring); 6 with 4(d−1)/d.

def two_stage():
    return chain([3, 6], [10], m=4, bandwidth=10.0, parameters=[20, 40], activations=[5, 7], resident=[100, 200])


@pytest.mark.parametrize("schedule, memory", [("gpipe", (110.0, 214.0)), ("1f1b", (110.0, 207.0)),
                                              ("piper", (110.0, 207.0))])
@pytest.mark.parametrize("allreduce, batch, per_sample", [("ring", 23.0, 5.0), ("piper", 26.0, 6.0)])
def test_two_stages_two_replicas_by_hand(schedule, memory, allreduce, batch, per_sample):
    instance = two_stage()
    result = simulate_parallel(instance, one_per_stage(instance, [2, 2]), schedule, allreduce=allreduce)
    assert result.time_per_batch == pytest.approx(batch, rel=1e-12)
    assert result.time_per_sample == pytest.approx(per_sample, rel=1e-12)
    assert [result.peak_memory(k) for k in (0, 1)] == pytest.approx(list(memory))
    assert [x for s in result.stages for x in (s.forward, s.backward)] == pytest.approx([2, 3, 3, 5])
    assert len(result.replicas) == 4 and result.tasks == 2 * 2 * 4 + 2 * 2 * 2
    ring = {"ring": (2.0, 4.0), "piper": (4.0, 8.0)}[allreduce]
    assert [r.allreduce for r in result.replicas] == pytest.approx([ring[0]] * 2 + [ring[1]] * 2)


# 1F1B, d = 1, m = 4, C = (9, 3, 6), no transfers: F, B = (3, 6), (1, 2), (2, 4). Warm-ups 2, 1, 0.
# Stage 2: F0 4–6, B0 6–10, F1 10–12, B1 12–16, F2 16–18, B2 18–22, F3 22–24, B3 24–28.
# Stage 1: F0 3–4, F1 6–7, B0 10–12, F2 12–13, B1 16–18, F3 21–22, B2 22–24, B3 28–30.
# Stage 0: F0 0–3, F1 3–6, F2 6–9, B0 12–18, F3 18–21, B1 21–27, B2 27–33, B3 33–39.
# Batch 39 (the flow-shop bound m·max c + the others' c = 36 + 3 + 6 = 45 is not reached: 1F1B
# waits only for a round trip); in flight 3, 2, 1.
def test_1f1b_three_uneven_stages_by_hand():
    instance = chain([9, 3, 6], m=4, activations=[1, 1, 1])
    result = simulate_parallel(instance, one_per_stage(instance, [1, 1, 1]), "1f1b")
    assert result.time_per_batch == pytest.approx(39.0, rel=1e-12)
    assert [s.peak_in_flight for s in result.stages] == [3, 2, 1]
    assert result.time_per_sample == pytest.approx(9.0)


# GPipe, d = 1, m = 4, C = (6, 17), node 0 sends 6 sync bytes on its edge (bandwidth 1).
# φ = 1/3: F, B = (2+6, 4+6) = (8, 10), (17/3, 34/3). The critical path runs the forwards at the
# largest F (stage 0) and the backwards at the largest B (stage 1): forwards end on stage 1 at
# 8 + 3·8 + 17/3, its backwards at + 4·34/3, stage 0's last backward 10 later:
# 8 + 24 + 17/3 + 136/3 + 10 = 93. φ = 1/2: F = B = (9, 9), (8.5, 8.5): one bottleneck stage,
# 4·18 + 17 = 89. The batch depends on the split when transfers weigh differently per stage.
@pytest.mark.parametrize("share, batch", [(1 / 3, 93.0), (0.5, 89.0)])
def test_gpipe_depends_on_the_forward_share_by_hand(share, batch):
    instance = chain([6, 17], m=4, sync_bw=[6, 0])
    result = simulate_parallel(instance, one_per_stage(instance, [1, 1]), "gpipe", forward_share=share)
    assert result.time_per_batch == pytest.approx(batch, rel=1e-12)
    assert result.time_per_sample == pytest.approx(18.0)


# GPipe, d = (1, 4), m = 8, C = (3, 12): F, B = (1, 2), (4, 8). Stage 1 replica r (micro-batches
# r, r+4): F(r) r+1..r+5, F(r+4) r+5..r+9, B(r) r+9..r+17, B(r+4) r+17..r+25. Stage 0 runs its
# backwards in micro-batch order as they arrive: 17–19, 19–21, 21–23, 23–25, 25–27, 27–29, 29–31,
# 31–33. Batch 33; stage 0 holds all 8, stage 1 two per replica. Stage 1's replicas end at 25..28,
# but their ring (zero bytes here) needs every replica in the collective: all four finish at 28.
def test_gpipe_uneven_replicas_by_hand():
    instance = chain([3, 12], m=8, activations=[1, 1])
    result = simulate_parallel(instance, one_per_stage(instance, [1, 4]), "gpipe")
    assert result.time_per_batch == pytest.approx(33.0, rel=1e-12)
    assert [s.peak_in_flight for s in result.stages] == [8, 2]
    assert [r.finish for r in result.replicas] == pytest.approx([33.0, 28.0, 28.0, 28.0, 28.0])


def test_tensor_parallel_stage_pays_sync_bytes_on_both_ends():
    # t = 2: C = (1.5, 3), and each end of the edge adds its TMPC's 4 sync bytes: 10 + 4 = 14 bytes at
    # bandwidth 2, 7 per transfer on each end. F0 = 7 + 0.5, B0 = 7 + 1, F1 = 7 + 1, B1 = 7 + 2.
    instance = chain([3, 6], [10], m=2, bandwidth=2.0, tensor_parallel=True)
    result = simulate_parallel(instance, one_per_stage(instance, [1, 1], t=2), "gpipe")
    assert [x for s in result.stages for x in (s.forward, s.backward)] == pytest.approx([7.5, 8, 8, 9])
    assert [r.devices for r in result.replicas] == [2, 2]
    # two micro-batches: F0 0–7.5, 7.5–15; F1 7.5–15.5, 15.5–23.5; B1 23.5–32.5, 32.5–41.5;
    # B0 32.5–40.5, 41.5–49.5.
    assert result.time_per_batch == pytest.approx(49.5)


# --- closed forms ----------------------------------------------------------------------------------

# Equal stages (compute c each, no transfers, no parameters), uniform d: the d replica pipelines are
# identical, n = m/d micro-batches each. GPipe and 1F1B: (n + S − 1)·c. Interleaved (v chunks per
# rank, p ranks, the S = p·v virtual stages c each): (n·v + p − 1)·c (Megatron: the bubble shrinks
# by v). In flight per replica: GPipe n, 1F1B S − i, interleaved on rank ρ
# min(2(p − ρ − 1) + (v − 1)p, n·v) + 1 (all n·v when n = p).
@pytest.mark.parametrize("stages", [1, 2, 3, 5])
@pytest.mark.parametrize("local", [1, 2, 4, 7])
@pytest.mark.parametrize("d", [1, 3])
def test_uniform_gpipe_and_1f1b(stages, local, d):
    m = local * d
    instance = chain([6] * stages, m=m, activations=[1] * stages)
    plan = one_per_stage(instance, [d] * stages)
    gp = simulate_parallel(instance, plan, "gpipe")
    ofob = simulate_parallel(instance, plan, "1f1b")
    assert gp.time_per_batch == pytest.approx((local + stages - 1) * 6, rel=1e-12)
    assert ofob.time_per_batch == pytest.approx((local + stages - 1) * 6, rel=1e-12)
    assert [s.peak_in_flight for s in gp.stages] == [local] * stages
    assert [s.peak_in_flight for s in ofob.stages] == [min(stages - i, local) for i in range(stages)]


@pytest.mark.parametrize("ranks, chunks", [(1, 2), (2, 2), (2, 3), (4, 2), (3, 4)])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_uniform_interleaved(ranks, chunks, groups):
    local = groups * ranks
    n = ranks * chunks
    instance = chain([3] * n, m=local, activations=[1] * n)
    result = simulate_parallel(instance, one_per_stage(instance, [1] * n), "interleaved", chunks=chunks)
    assert result.time_per_batch == pytest.approx((local * chunks + ranks - 1) * 3, rel=1e-12)
    for replica in result.replicas:
        rho = replica.rank
        warm = local * chunks if local == ranks else min(2 * (ranks - rho - 1) + (chunks - 1) * ranks,
                                                         local * chunks)
        assert replica.peak_in_flight == min(warm + 1, local * chunks)
        assert replica.peak_memory == replica.peak_in_flight


# --- independent methods ---------------------------------------------------------------------------

def gpipe_longest_path(forward, backward, allreduce, local):
    """GPipe with uniform d: the longest path of the task grid. Forwards form a flow shop of identical
    jobs (Σ F + (n−1)·max F up to stage s), the last forward of stage s precedes its first backward,
    backwards form a flow shop back to stage s'; a rank's ring starts when its identical replicas end."""
    stages = len(forward)

    def finish(last):
        return max(sum(forward[:s + 1]) + (local - 1) * max(forward[:s + 1]) + sum(backward[last:s + 1])
                   + (local - 1) * max(backward[last:s + 1]) for s in range(last, stages))

    return max(finish(s) + allreduce[s] for s in range(stages))


chains = st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 12), min_size=n, max_size=n),           # C
    st.lists(st.sampled_from([0, 2, 5]), min_size=n - 1, max_size=n - 1),   # edge bytes
    st.lists(st.sampled_from([0, 3, 8]), min_size=n, max_size=n),   # parameters
    st.lists(st.sampled_from([0, 4]), min_size=n, max_size=n),      # sync bytes out
))


@given(chains, st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 3]), st.sampled_from(["ring", "piper"]),
       st.sampled_from([1 / 3, 0.5, 0.2]))
@example(([6, 17], [0], [0, 0], [6, 0]), 1, 4, "ring", 1 / 3)
@settings(max_examples=60)
def test_gpipe_equals_its_longest_path(data, d, local, allreduce, share):
    times, edge_bytes, parameters, sync = data
    instance = chain(times, edge_bytes, m=d * local, parameters=parameters, sync_bw=sync)
    result = simulate_parallel(instance, one_per_stage(instance, [d] * len(times)), "gpipe",
                               allreduce=allreduce, forward_share=share)
    step = {"ring": 1, "piper": 2}[allreduce]
    ring = [2 * (d - 1) * step * p / d for p in parameters]
    expected = gpipe_longest_path([s.forward for s in result.stages], [s.backward for s in result.stages], ring,
                                  local)
    assert result.time_per_batch == pytest.approx(expected, rel=1e-12)


def piper_time_per_sample(instance, degrees, allreduce):
    """Piper's objective for one node per stage (msr-fiddle/piper algo.cpp getTPSForResult), the
    all-reduce bytes 4(d−1)/d·P there, 2(d−1)/d·P for a ring."""
    m, bw = instance.microbatches_in_batch, instance.bandwidth
    factor = {"ring": 2, "piper": 4}[allreduce]
    worst = 0.0
    for i, d in enumerate(degrees):
        config = instance.nodes[i].configurations[1][0]
        crossing = 0.0
        for e in instance.edges:
            if e.dst == i:
                crossing += 2 * (e.communication_cost + config.sync_time_fw[e.src])
            if e.src == i:
                crossing += 2 * (e.communication_cost + config.sync_time_bw[e.dst])
        worst = max(worst, (crossing / d + factor * (d - 1) * config.parameter_size / (d * m)) / bw
                    + config.time_per_sample / d)
    return worst


degree_lists = st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=5)


@given(degree_lists, st.data(), st.sampled_from(["gpipe", "1f1b"]), st.sampled_from(["ring", "piper"]))
@example([2, 1], None, "1f1b", "piper")
@example([1, 4, 4], None, "1f1b", "ring")   # Σ d > m: stage 0's y = 9 is capped at its 8 micro-batches
@settings(max_examples=60)
def test_time_per_sample_and_memory_are_pipers(degrees, data, schedule, allreduce):
    """Any d per stage: the time per sample without fill and drain is Piper's objective; the peak memory
    is R + A·y with y = n (GPipe) or ⌈(d_i + … + d_last)/d_i⌉ capped at n (1F1B)."""
    n = len(degrees)
    m = 8
    if data is None:
        times, edge_bytes, parameters, sync = [5, 7, 1, 1, 1][:n], [2, 0, 0, 0][:n - 1], [3, 8, 0, 0, 0][:n], [4] * n
    else:
        times, edge_bytes, parameters, sync = data.draw(chains.filter(lambda c: len(c[0]) == n))
    activations = [i + 1 for i in range(n)]
    resident = [10 * (i + 1) for i in range(n)]
    instance = chain(times, edge_bytes, m=m, parameters=parameters, sync_bw=sync, activations=activations,
                     resident=resident)
    result = simulate_parallel(instance, one_per_stage(instance, degrees), schedule, allreduce=allreduce)
    assert result.time_per_sample == pytest.approx(piper_time_per_sample(instance, degrees, allreduce), rel=1e-12)
    for i, d in enumerate(degrees):
        held = m // d if schedule == "gpipe" else min(math.ceil(sum(degrees[i:]) / d), m // d)
        assert result.peak_memory(i) == resident[i] + activations[i] * held


def test_time_per_sample_does_not_depend_on_the_forward_share():
    instance = chain([4, 9, 2], [3, 1], m=8, parameters=[5, 0, 7], sync_bw=[0, 4, 0])
    plan = one_per_stage(instance, [2, 1, 4])
    values = {simulate_parallel(instance, plan, "1f1b", forward_share=s).time_per_sample for s in (0.0, 0.25, 1.0)}
    assert max(values) == pytest.approx(min(values), rel=1e-12)


def test_unit_scale_multiplies_compute_only():
    instance = chain([3, 6], [10], m=4, bandwidth=10.0)
    result = simulate_parallel(instance, one_per_stage(instance, [1, 1]), "gpipe", unit_scale=0.5)
    assert [x for s in result.stages for x in (s.forward, s.backward)] == pytest.approx([1.5, 2, 2, 3])


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_a_unit_scale_that_overflows_the_times_is_refused_before_the_run(share):
    """At unit_scale 1e308 the stages' compute overflows to infinity; with a forward share of 0 or 1 the
    other pass's time is 0 · inf, NaN, and the run never ended. Both are refused, naming unit_scale."""
    instance = chain([3, 6], [10], m=4, bandwidth=10.0, parameters=[20, 40])
    with pytest.raises(InvalidParameterError) as error:
        simulate_parallel(instance, one_per_stage(instance, [1, 1]), "gpipe", forward_share=share, unit_scale=1e308)
    assert (error.value.parameter, error.value.detail) == (
        "unit_scale", "1e+308 makes the batch's times overflow past the float range")


def test_a_piper_run_that_compiles_the_event_engine_first_says_so(tmp_path, monkeypatch):
    """Past the engine's interpreted size (lowered here to 0 tasks) and with no compiled copy cached (made so
    here), a Piper run tells progress that it compiles the engine, as a pipeline run does; the library takes
    progress on Piper instances too."""
    import placement
    import placement.kernels
    from placement.simulation import engine

    instance, plan = write_two_stage(tmp_path)
    monkeypatch.setattr(engine, "INTERPRETED_TASKS", 0)
    monkeypatch.setattr(placement.kernels, "is_cached", lambda kernel: False)
    said: list[str] = []
    run = placement.simulate(instance, plan, progress=said.append)
    assert said == ["compiling the event engine with numba (once per install; later runs load it from its cache)"]
    monkeypatch.setattr(engine, "INTERPRETED_TASKS", 10**9)
    said.clear()
    assert placement.simulate(instance, plan, progress=said.append).to_json() == run.to_json() and said == []


# --- plans of the published instances -------------------------------------------------------------

def contiguous_plan(instance, stages, degrees, name="vanilla", t=1):
    """The nodes in a topological order cut into ``stages`` runs of nearly equal length."""
    order = TopologicalSorter({node.id: () for node in instance.nodes})
    for e in instance.edges:
        order.add(e.dst, e.src)
    ids = list(order.static_order())
    cuts = [round(k * len(ids) / stages) for k in range(stages + 1)]
    return [ParallelStage(tuple(ids[cuts[k]:cuts[k + 1]]), degrees[k], t,
                      {v: name for v in ids[cuts[k]:cuts[k + 1]]}) for k in range(stages)]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared Piper instances not present")
@pytest.mark.parametrize("name, degrees", [("bert32a100", [2, 1, 1, 2]), ("gnmt", [2, 2]), ("resnet", [4, 2, 1])])
def test_shared_instances_piper_objective(name, degrees):
    instance = read_piper(SHARED / f"{name}.json")
    plan = contiguous_plan(instance, len(degrees), degrees)
    result = simulate_parallel(instance, plan, "1f1b", allreduce="piper", microbatches=64)
    m, bw = 64, instance.bandwidth
    nodes = {n.id: n for n in instance.nodes}
    stage_of = {v: k for k, s in enumerate(plan) for v in s.nodes}
    expected = 0.0
    for k, stage in enumerate(plan):
        configs = {v: next(c for c in nodes[v].configurations[1] if c.id == "vanilla") for v in stage.nodes}
        crossing = sum(2 * (e.communication_cost + configs[e.dst].sync_time_fw[e.src]) for e in instance.edges
                       if stage_of[e.dst] == k and stage_of[e.src] != k)
        crossing += sum(2 * (e.communication_cost + configs[e.src].sync_time_bw[e.dst]) for e in instance.edges
                        if stage_of[e.src] == k and stage_of[e.dst] != k)
        d = stage.d
        weights = sum(c.parameter_size for c in configs.values())
        expected = max(expected, (crossing / d + 4 * (d - 1) * weights / (d * m)) / bw
                       + sum(c.time_per_sample for c in configs.values()) / d)
        y = math.ceil(sum(degrees[k:]) / d)
        memory = sum(c.memory_usage_a * y + c.memory_usage_b for c in configs.values())
        assert result.peak_memory(k) == pytest.approx(memory, rel=1e-12)
    assert result.time_per_sample == pytest.approx(expected, rel=1e-12)


# --- errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("plan, message", [
    ([ParallelStage((0,), 1, 1, {0: "x"})], "node 1 is in no stage (1 node missing)"),
    ([ParallelStage((0, 1), 1, 1, {0: "x", 1: "x"}), ParallelStage((1,), 1, 1, {1: "x"})],
     "stage 1: node 1 is already in stage 0"),
    ([ParallelStage((1,), 1, 1, {1: "x"}), ParallelStage((0,), 1, 1, {0: "x"})],
     "edge 0 -> 1 goes from stage 1 back to stage 0"),
    ([ParallelStage((0,), 1, 2, {0: "x"}), ParallelStage((1,), 1, 1, {1: "x"})], "stage 0: node 0 has no TMPC for t = 2"),
    ([ParallelStage((0,), 1, 1, {0: "z"}), ParallelStage((1,), 1, 1, {1: "x"})], "stage 0: node 0 has no TMPC 'z' for t = 1"),
    ([ParallelStage((0,), 3, 1, {0: "x"}), ParallelStage((1,), 1, 1, {1: "x"})],
     "stage 0: d = 3 does not divide the 4 micro-batches of a batch"),
    ([ParallelStage((0,), 0, 1, {0: "x"}), ParallelStage((1,), 1, 1, {1: "x"})],
     "stage 0: d must be a positive integer, not 0"),
    ([ParallelStage((0,), 1, 1, {}), ParallelStage((1,), 1, 1, {1: "x"})],
     "stage 0: tmpcs must name one TMPC for each of its nodes and no other"),
    ([ParallelStage((0,), 1, 1, {0: "x"}), ParallelStage((7,), 1, 1, {7: "x"})],
     "stage 1: node 7 is not a node of the instance"),
    ([], "the plan has no stage"),
])
def test_bad_plans(plan, message):
    with pytest.raises(InvalidPlanError) as info:
        simulate_parallel(chain([1, 1]), plan, "1f1b")
    assert str(info.value) == message


@pytest.mark.parametrize("kwargs, message", [
    ({"schedule": "zb"}, "schedule must be one of 'gpipe', '1f1b', 'piper', 'interleaved', not 'zb'"),
    # the schedules of plans without degrees are named as such
    ({"schedule": "1f1b-flush"}, "schedule must be one of 'gpipe', '1f1b', 'piper', 'interleaved', not '1f1b-flush' "
                                 "('1f1b-flush' schedules a plan whose stages have no data- or tensor-parallel "
                                 "degrees; 1F1B here is '1f1b')"),
    ({"schedule": "stream"}, "schedule must be one of 'gpipe', '1f1b', 'piper', 'interleaved', not 'stream' "
                             "('stream' schedules a plan whose stages have no data- or tensor-parallel degrees)"),
    ({"schedule": "interleaved", "chunks": 1}, "chunks must be at least 2 under the interleaved schedule, not 1"),
    ({"schedule": "interleaved"}, "chunks must be given under the interleaved schedule (model chunks per device "
                                  "group, at least 2): the plan records none"),
    ({"schedule": "gpipe", "chunks": 2}, "chunks applies to the 'interleaved' schedule only, not to 'gpipe'"),
    # the one chunk the schedule runs, given, is refused as solve refuses it
    ({"schedule": "gpipe", "chunks": 1}, "chunks applies to the 'interleaved' schedule only, not to 'gpipe'"),
    ({"chunks": 1}, "chunks applies to the 'interleaved' schedule only, not to '1f1b'"),
    ({"schedule": "interleaved", "chunks": 3}, "chunks must divide the number of stages (4), not 3"),
    ({"schedule": "interleaved", "chunks": 2, "microbatches": 3},
     "microbatches per replica (3) must be a multiple of the 2 pipeline ranks under the interleaved schedule"),
    ({"microbatches": 0}, "microbatches must be a positive integer, not 0"),
    ({"forward_share": 1.5}, "forward_share must be a finite number ≥ 0 and ≤ 1, not 1.5"),
    ({"allreduce": "tree"}, "allreduce must be one of 'ring', 'piper', not 'tree'"),
    ({"unit_scale": 0}, "unit_scale must be a finite number > 0, not 0"),
])
def test_bad_parameters(kwargs, message):
    instance = chain([1, 1, 1, 1], m=4)
    with pytest.raises(InvalidParameterError) as info:
        simulate_parallel(instance, one_per_stage(instance, [1, 1, 1, 1]), **kwargs)
    assert str(info.value) == message


def test_an_interleaved_plan_keeps_its_chunks():
    """A plan solved as 2 device groups × 2 chunks records chunks = 2: another chunk count would run
    it on other device groups, and a plain schedule cannot run it at all; both are refused, naming
    what the plan holds. Without either, the plan's own layout runs."""
    instance = chain([1, 1, 1, 1], m=4)
    plan = ParallelPlan(one_per_stage(instance, [1, 1, 1, 1]), schedule="interleaved", chunks=2)
    assert simulate_parallel(instance, plan).chunks == 2
    with pytest.raises(InvalidParameterError) as info:
        simulate_parallel(instance, plan, chunks=4)
    assert str(info.value) == ("chunks must be the plan's 2 model chunks per device group (its stages record them), "
                               "not 4")
    with pytest.raises(InvalidParameterError) as info:
        simulate_parallel(instance, plan, "1f1b")
    assert str(info.value) == ("schedule '1f1b' cannot run the plan, which is interleaved (2 model chunks per "
                               "device group); use 'interleaved'")


def test_interleaved_stages_of_one_rank_share_degrees():
    instance = chain([1, 1, 1, 1], m=4)
    with pytest.raises(InvalidPlanError) as info:
        simulate_parallel(instance, one_per_stage(instance, [1, 1, 2, 1]), "interleaved", chunks=2)
    assert str(info.value) == ("stage 2 shares the devices of stage 0 (chunks = 2) but has d = 2, t = 1, type '' "
                               "against d = 1, t = 1, type ''")


def test_a_ring_of_too_many_replicas_is_refused_before_it_is_built():
    """One stage of d = m = 2048 replicas: a batch of 4,096 tasks, but its ring all-reduce sends 2·2047 steps on
    each of 2048 links, 8,384,512 tasks, over the simulator's 2 GiB; only the batch's were counted, and the
    simulation (as placement verify's) built them for minutes."""
    instance = chain([3], m=2048, parameters=[2048])
    with pytest.raises(LimitExceededError) as info:
        simulate_parallel(instance, one_per_stage(instance, [2048]), allreduce="piper")
    assert str(info.value) == ("the all-reduce rings make 8,384,512 tasks (2(d − 1)·d for a stage of d replicas; "
                               "stage 0 has d = 2048), 8,388,608 with the batch's, about 3.12 GiB to simulate, over "
                               "the simulator's fixed limit of 2 GiB")


def test_simulator_imports_no_planner():
    """The simulator checks the planner: a fresh interpreter that imports it has loaded no solver or planner."""
    code = ("import sys, placement.simulation.parallel; print(sorted(m for m in sys.modules "
            "if m.startswith(('placement.solvers', 'placement.parallel'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- command line ------------------------------------------------------------------------------------

def write_two_stage(tmp_path):
    instance = two_stage()
    path = tmp_path / "two.json"
    path.write_text(json.dumps(instance.to_json()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schedule": "gpipe", "stages": [
        {"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "x"}}, {"nodes": [1], "d": 2, "t": 1, "tmpcs": {"1": "x"}}]}))
    return str(path), str(plan)


def test_cli_simulates_a_piper_plan(tmp_path, capsys):
    instance, plan = write_two_stage(tmp_path)
    assert main(["simulate", instance, plan]) == 0        # the plan's schedule: GPipe, as worked by hand above
    out = capsys.readouterr().out
    assert "time per batch  23  (fill, drain and all-reduce included)" in out
    assert "time per sample 5  (largest busy time" in out
    assert out.endswith("note: all-reduce ring, 2(d-1)/d of the parameters per replica; the planner's figures "
                        "use Piper's 4(d-1)/d (--allreduce piper)\n")
    assert main(["simulate", instance, plan, "--allreduce", "piper"]) == 0
    assert "note: all-reduce" not in capsys.readouterr().out
    assert main(["simulate", instance, plan, "--schedule", "1f1b", "--allreduce", "piper", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["time_per_batch"], doc["time_per_sample"], doc["notes"]) == (26.0, 6.0, [])
    assert [s["peak_memory"] for s in doc["stages"]] == [110.0, 207.0]


@pytest.mark.parametrize("extra, message", [
    (["--trace", "t.json"], "error: --trace does not apply to a Piper instance (its plans run data- and "
                            "tensor-parallel stages; see placement simulate --help)"),
    (["--trace", "t.json", "--memory", "1"], "error: --trace, --memory do not apply to a Piper instance (its plans "
                                             "run data- and tensor-parallel stages; see placement simulate --help)"),
    # typed at the value the other instances take by default, still refused
    (["--comm", "inline"], "error: --comm does not apply to a Piper instance (its plans run data- and "
                           "tensor-parallel stages; see placement simulate --help)"),
    (["--engine", "heap", "--comm", "link"], "error: --comm, --engine do not apply to a Piper instance (its plans run "
                                             "data- and tensor-parallel stages; see placement simulate --help)"),
    # a plan of one chunk per stage, and no --chunks: the count is asked for, not said to be 1
    (["--schedule", "interleaved"], "error: --chunks must be given under the interleaved schedule (model chunks "
                                    "per device group, at least 2): the plan records none"),
    (["--schedule", "interleaved", "--chunks", "1"], "error: --chunks must be at least 2 under the interleaved "
                                                     "schedule, not 1"),
    # the plan's one chunk, typed under a schedule that is not interleaved: refused as solve refuses it
    (["--chunks", "1"], "error: --chunks applies to the 'interleaved' schedule only, not to 'gpipe'"),
    (["--schedule", "1f1b", "--chunks", "1"], "error: --chunks applies to the 'interleaved' schedule only, not to "
                                              "'1f1b'"),
    # checked on the batch simulated: d = 2 divides no 3 (Σ d ≤ m is the rule of the batch planned for only)
    (["--microbatches", "3"], "error: PLAN is not valid for this instance run under 'gpipe' with 3 "
                              "micro-batches per batch: stage 0: d=2 does not divide the 3 micro-batches of a batch "
                              "(and 1 more)"),
    (["--microbatches", "1"], "error: PLAN is not valid for this instance run under 'gpipe' with 1 micro-batch per "
                              "batch: stage 0: d=2 does not divide the 1 micro-batch of a batch (and 1 more)"),
])
def test_cli_errors_on_a_piper_instance(tmp_path, capsys, extra, message):
    instance, plan = write_two_stage(tmp_path)
    assert main(["simulate", instance, plan, *extra]) == 2
    assert capsys.readouterr().err.strip() == message.replace("PLAN", plan)


def test_the_memory_check_holds_the_micro_batches_of_the_schedule_simulated(tmp_path, capsys):
    """Stage 1 of the two-stage plan holds 200 resident bytes and 7 per micro-batch in flight: GPipe holds all
    m/d = 2 of its micro-batches (214 bytes, as simulated above), 1F1B ⌈2/2⌉ = 1 (207). On devices of 210 bytes
    the plan runs under 1F1B and not under GPipe, whichever schedule the plan file records (the check used the
    recorded one: a GPipe plan run under 1F1B was refused, and a 1F1B plan run under GPipe ran over its memory
    without a word)."""
    instance, plan = write_two_stage(tmp_path)
    doc = json.loads(Path(plan).read_text())
    refused = (f"error: {plan} is not valid for this instance run under 'gpipe' with 4 micro-batches per "
               "batch: stage 1 needs 214 bytes per device (y=2 micro-batches in flight), more than the 210 available\n")
    for recorded in ("gpipe", "1f1b"):
        Path(plan).write_text(json.dumps({**doc, "schedule": recorded, "memory": 210}))
        assert main(["simulate", instance, plan, "--schedule", "1f1b", "--json"]) == 0
        assert [s["peak_memory"] for s in json.loads(capsys.readouterr().out)["stages"]] == [110.0, 207.0]
        assert main(["simulate", instance, plan, "--schedule", "gpipe"]) == 2
        err = capsys.readouterr().err
        assert err == (refused if recorded == "1f1b" else refused.replace(" run under 'gpipe' with 4 micro-batches "
                                                                           "per batch", ""))


def test_a_plan_run_another_way_is_checked_as_it_runs():
    """Four one-node stages of 1 byte per micro-batch held, on devices of 4.5 bytes, m = 4 (each a
    replica of its own, d = 1). Under 1F1B stage k holds 4 − k micro-batches (4, 3, 2, 1 bytes): it fits.
    Run interleaved with 2 chunks per rank, stages k and k + 2 share rank k: rank 0 holds 5 bytes at its
    peak (its memory is checked as that of the interleaved plan; it ran over its memory in silence). A
    batch of fewer micro-batches than Σ d is no violation when simulated (Σ d ≤ m is the rule of the batch
    the plan is made for): with d = 2 and m = 2 every replica runs one."""
    instance = chain([1, 1, 1, 1], m=4, activations=[1, 1, 1, 1])
    plan = ParallelPlan(tuple(one_per_stage(instance, [1, 1, 1, 1])), "1f1b")
    checked = (4, 4.5)
    assert [s.peak_in_flight for s in simulate_parallel(instance, plan, "1f1b", checked_on=checked).stages] == \
        [4, 3, 2, 1]
    with pytest.raises(InvalidParameterError) as raised:   # a plan not valid for the instance, as without Piper
        simulate_parallel(instance, plan, "interleaved", chunks=2, checked_on=checked)
    assert raised.value.parameter == "plan"
    assert str(raised.value) == ("plan is not valid for this instance run under 'interleaved' with 4 "
                                 "micro-batches per batch: group 0 needs 5 bytes per device, more than the 4.5 "
                                 "available")
    pair = chain([1, 1], m=4, activations=[1, 1])
    wide = ParallelPlan(tuple(one_per_stage(pair, [2, 2])), "1f1b")   # Σ d = 4 = m
    # m = 2: each replica runs one micro-batch, F 1/3 and B 2/3 on each stage: 1/3 + 1/3 + 2/3 + 2/3 = 2
    assert simulate_parallel(pair, wide, "gpipe", microbatches=2, checked_on=checked).time_per_batch == \
        pytest.approx(2.0, rel=1e-12)


def test_cli_names_the_piper_plan_file_it_refuses(tmp_path, capsys):
    instance, plan = write_two_stage(tmp_path)
    for doc, message in (({"stages": []}, " is not valid for this instance: node 0 is in no stage "
                                          "(and 1 more)"),
                         ({"fpgas": []}, ": a parallel plan must be a JSON object with a list 'stages'"),
                         ({"stages": [{"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "x"}}]},
                          " is not valid for this instance: node 1 is in no stage"),
                         # the plan records 2 devices; 2 replicas of each stage take 4: checked before the run
                         ({"stages": [{"nodes": [0], "d": 2, "t": 1, "tmpcs": {"0": "x"}},
                                      {"nodes": [1], "d": 2, "t": 1, "tmpcs": {"1": "x"}}], "devices": 2},
                          " is not valid for this instance: the plan uses 4 devices (Σ d·t), more than the "
                          "2 available"),
                         # records the run would have read as none, checking against the instance's own limits
                         ({"stages": [], "devices": -1},
                          ": the plan's 'devices' must be a device count or counts per device type, not -1"),
                         # no device at all, which no solve records (it refuses such a count)
                         ({"stages": [], "devices": 0},
                          ": the plan's 'devices' must be a device count or counts per device type, not 0"),
                         ({"stages": [], "memory": "x"}, ": the plan's 'memory' must be a number of bytes, not 'x'"),
                         # shown as JSON spells them (they read "True", "None", "{'a100': 1.5}"); no types at all
                         # was counts of none ("the plan records device counts per type (), ...")
                         ({"stages": [], "memory": True}, ": the plan's 'memory' must be a number of bytes, not true"),
                         ({"stages": [], "devices": {"a100": 1.5}}, ": the plan's 'devices' must be a device count or "
                                                                   'counts per device type, not {"a100": 1.5}'),
                         ({"stages": [], "devices": {}}, ": the plan's 'devices' must be a device count or counts "
                                                         "per device type, not {}"),
                         ({"stages": [], "schedule": None}, ": unknown schedule null (known: piper, 1f1b, gpipe, "
                                                            "interleaved)"),
                         ({"stages": [], "format": None}, ": unknown plan format null (a parallel plan is "
                                                          "'placement-parallel-plan/1')"),
                         # misspelt fields read as missing checked another plan: gpipe's memory as piper's, no TMPC
                         ({"stages": [], "schedul": "gpipe"}, ": unknown field 'schedul'; did you mean 'schedule'? (a "
                                                               "field this like one the format reads is refused, not "
                                                               "ignored)"),
                         ({"stages": [{"nodes": [0], "d": 1, "t": 1, "tmpc": {"0": "x"}}]},
                          ": stages[0]: unknown field 'tmpc'; did you mean 'tmpcs'? (a field this like one the format "
                          "reads is refused, not ignored)")):
        Path(plan).write_text(json.dumps(doc))
        assert main(["simulate", instance, plan]) == 2
        assert capsys.readouterr().err == f"error: {plan}{message}\n"   # a plan that is no valid one: as verify


def test_a_solved_plan_document_has_no_field_its_reader_takes_for_a_misspelling():
    """Every field the solve writes, the plan and its stages, is one the reader knows: a misspelling is refused
    only where the known field is missing, and the reader reads the written document back."""
    from placement.parallel.plan import DOCUMENT_FIELDS, STAGE_FIELDS

    instance = chain([1, 1, 1, 1], m=4)
    for schedule, chunks in (("piper", None), ("interleaved", 2)):
        result = solve_piper(instance, devices=2, schedule=schedule, chunks=chunks)
        document = json.loads(json.dumps(result.to_json()))
        assert set(document) <= set(DOCUMENT_FIELDS)
        assert {key for stage in document["stages"] for key in stage} <= set(STAGE_FIELDS)
        assert ParallelPlan.from_json(document) == result.plan


def test_the_library_simulates_a_piper_plan_file_as_the_command_does(tmp_path, capsys):
    import placement

    instance, plan = write_two_stage(tmp_path)
    run = placement.simulate(instance, plan)
    assert main(["simulate", instance, plan, "--json"]) == 0
    # the notes the text prints, the library's parameter as the command's option; the plan records no instance
    assert json.loads(capsys.readouterr().out) == {**json.loads(json.dumps(run.to_json())), "notes": [
        "all-reduce ring, 2(d-1)/d of the parameters per replica; the planner's figures use Piper's 4(d-1)/d "
        "(--allreduce piper)"], "plan_made_for": None}
    assert run.notes == ("all-reduce ring, 2(d-1)/d of the parameters per replica; the planner's figures use "
                         "Piper's 4(d-1)/d (allreduce='piper')",)
    assert placement.simulate(instance, plan, allreduce="piper").notes == ()
    # 2 replicas of 2 stages: the gpipe batch of test_two_stages_two_replicas_by_hand, ring all-reduce
    assert run.time_per_batch == pytest.approx(23.0, rel=1e-12)
    with pytest.raises(placement.errors.InvalidParameterError,
                       match="^comm does not apply to a Piper instance"):
        placement.simulate(instance, plan, comm="link")
    with pytest.raises(placement.errors.InvalidParameterError,
                       match="^allreduce applies to Piper instances only"):
        placement.simulate(ROOT / "instances" / "tiny" / "chain4.json", plan, allreduce="piper")
    # counts per device type on an instance without types; a count the plan records, noted by the command
    document = json.loads(Path(plan).read_text())
    with pytest.raises(placement.errors.InvalidPlanError,
                       match=r"^the plan records device counts per type \(x\), but the instance has no deviceTypes$"):
        placement.simulate(instance, {**document, "devices": {"x": 3}})
    Path(plan).write_text(json.dumps({**document, "devices": 4}))
    assert main(["simulate", instance, plan]) == 0
    assert capsys.readouterr().out.startswith("note: checked on the devices the plan file records it was solved "
                                              "for: 4 devices\n")
    result = placement.solve(instance)
    assert hash(result) == hash(placement.solve(instance))


@pytest.mark.parametrize("name, value", [("allreduce", "ring"), ("allreduce", "piper"), ("unit_scale", 1.0),
                                         ("unit_scale", 1e-3), ("chunks", 1), ("forward_share", 1 / 3)])
def test_the_library_refuses_a_piper_option_on_another_instance_at_its_default_too(name, value):
    """allreduce and unit_scale were given where they differed from "ring" and 1.0, so allreduce="ring" on an
    instance that is not a Piper instance passed in silence while "piper" was refused; every value is now."""
    import placement

    chain4 = ROOT / "instances" / "tiny" / "chain4.json"
    with pytest.raises(InvalidParameterError) as raised:
        placement.simulate(chain4, placement.solve(chain4), **{name: value})
    assert raised.value.parameter == name
    assert str(raised.value) == f"{name} applies to Piper instances only (data- and tensor-parallel stages)"


@pytest.mark.parametrize("name, value", [("comm", "inline"), ("comm", "link"), ("engine", "heap"),
                                         ("keep_tasks", True), ("keep_tasks", False)])
def test_the_library_refuses_an_option_of_other_instances_on_a_piper_instance_at_its_default_too(tmp_path, name,
                                                                                                 value):
    """comm, engine and keep_tasks were given where they differed from "inline", "heap" and True; on a Piper
    instance they are refused whatever their value."""
    import placement

    instance, plan = write_two_stage(tmp_path)
    with pytest.raises(InvalidParameterError) as raised:
        placement.simulate(instance, plan, **{name: value})
    assert raised.value.parameter == name
    assert str(raised.value) == f"{name} does not apply to a Piper instance (its plans run data- and tensor-parallel " \
                                "stages)"


def test_the_library_options_left_out_take_their_defaults_and_given_where_they_apply_are_taken(tmp_path):
    import placement

    instance, plan = write_two_stage(tmp_path)
    run = placement.simulate(instance, plan)
    assert run.to_json() == placement.simulate(instance, plan, allreduce="ring", unit_scale=1.0).to_json()
    assert run.time_per_batch == pytest.approx(23.0, rel=1e-12)   # ring all-reduce, as the command's default
    assert placement.simulate(instance, plan, allreduce="piper").time_per_batch > run.time_per_batch
    chain4 = ROOT / "instances" / "tiny" / "chain4.json"
    result = placement.solve(chain4)
    left_out = placement.simulate(chain4, result, microbatches=4)
    assert len(left_out.tasks) > 0   # keep_tasks not given: True
    typed = placement.simulate(chain4, result, microbatches=4, comm="inline", engine="heap", keep_tasks=True)
    assert left_out.to_json() == typed.to_json()
    assert len(placement.simulate(chain4, result, microbatches=4, keep_tasks=False).tasks) == 0


# --- plans of the planner ----------------------------------------------------------------------------

@given(piper_instances(max_nodes=4), st.sampled_from(["piper", "1f1b", "gpipe"]))
@settings(max_examples=40)
def test_planner_plans_memory_and_objective(instance, schedule):
    """The planner's optimal plan of a tiny instance, run under every schedule: the simulated peak memory
    per device is the model's (the evaluator's), and the time per sample without fill and drain is Piper's
    objective, and the time per batch is the planner's exact one (gpipe and 1f1b orders)."""
    result = solve_piper(instance, schedule=schedule)
    if result.plan is None:
        return
    for run_as in ("piper", "1f1b", "gpipe"):
        plan = ParallelPlan(result.plan.stages, run_as)
        simulated = simulate_parallel(instance, plan, allreduce="piper")
        model = evaluate_parallel(instance, plan, devices=10**6, memory=math.inf)
        assert [simulated.peak_memory(k) for k in range(len(plan.stages))] == \
            pytest.approx([s.memory for s in model.stages], rel=1e-9, abs=1e-9)
        assert simulated.time_per_sample == pytest.approx(model.value, rel=1e-9)
        assert simulated.time_per_batch == pytest.approx(time_per_batch(instance, plan), rel=1e-9)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared Piper instances not present")
def test_planner_plan_of_gnmt():
    """gnmt at its own settings: the planner's optimal plan (``placement.solve``, 16:45 UTC build: nodes
    0–73 on 8 replicas, 74–77 on 2, every TMPC "vanilla"; given here so the test needs no DP); under each
    schedule the simulated memory and time per sample are the model's, and the time per batch is the
    planner's exact one (placement.parallel.timing; the flow-shop estimate it replaced was 8.2e-6 off)."""
    instance = read_piper(SHARED / "gnmt.json")
    plan = ParallelPlan((ParallelStage(tuple(range(74)), 8, 1, {v: "vanilla" for v in range(74)}),
                         ParallelStage(tuple(range(74, 78)), 2, 1, {v: "vanilla" for v in range(74, 78)})))
    for schedule in ("piper", "1f1b", "gpipe"):
        run = ParallelPlan(plan.stages, schedule)
        simulated = simulate_parallel(instance, run, allreduce="piper")
        model = evaluate_parallel(instance, run)
        assert [simulated.peak_memory(k) for k in (0, 1)] == pytest.approx([s.memory for s in model.stages],
                                                                          rel=1e-12)
        assert simulated.time_per_sample == pytest.approx(model.value, rel=1e-12)
        assert simulated.time_per_batch == pytest.approx(time_per_batch(instance, run), rel=1e-12)


def test_one_micro_batch_per_batch_is_said_so():
    from placement.report.parallel_simulation import format_parallel_simulation

    instance = chain([1, 1], m=1)
    text = format_parallel_simulation(simulate_parallel(instance, one_per_stage(instance, [1, 1]), "gpipe"))
    assert ", 1 micro-batch per batch, " in text   # it said "1 micro-batches"


def test_a_plan_over_the_micro_batches_of_its_batch_is_refused_as_verify_refuses_it(tmp_path, capsys):
    """Degrees 4 and 1 sum to 5, more than the m = 4 micro-batches of a batch (Piper's Σ d ≤ m): verify finds
    the plan invalid, and simulate ran it (the rule was left to batches of the instance's size, and simulate
    always named the size it ran). Another batch size is run as asked."""
    instance, plan = write_two_stage(tmp_path)
    doc = json.loads(Path(plan).read_text())
    doc["stages"][0]["d"], doc["stages"][1]["d"] = 4, 1
    Path(plan).write_text(json.dumps(doc))
    rule = "the data-parallel degrees sum to 5, more than the 4 micro-batches of a batch"
    assert main(["verify", instance, plan]) == 1
    assert f"INVALID: 1 violation\n  {rule}\n" in capsys.readouterr().out
    for given in ([], ["--microbatches", "4"]):
        assert main(["simulate", instance, plan, *given]) == 2
        assert capsys.readouterr().err == f"error: {plan} is not valid for this instance: {rule}\n"
    assert main(["simulate", instance, plan, "--microbatches", "8"]) == 0


def test_a_piper_plan_made_for_another_instance_is_noted(tmp_path, capsys):
    """The two-stage plan, recorded as made for instance 'other', run on 'two': it runs (the nodes are the same),
    and the note names both instances, as verify's does and as simulate's does for other plan files; in JSON,
    plan_made_for (null when the names match)."""
    import placement

    instance, plan = write_two_stage(tmp_path)
    document = json.loads(Path(plan).read_text())
    Path(plan).write_text(json.dumps({**document, "instance": "other"}))
    note = "the plan was made for instance 'other', not 'two'"
    assert placement.simulate(instance, plan).notes[0] == note
    assert main(["simulate", instance, plan, "--allreduce", "piper"]) == 0
    assert capsys.readouterr().out.endswith(f"note: {note}\n")
    assert main(["simulate", instance, plan, "--allreduce", "piper", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["notes"], doc["plan_made_for"]) == ([note], "other")
    Path(plan).write_text(json.dumps({**document, "instance": "two"}))
    assert main(["simulate", instance, plan, "--allreduce", "piper", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["notes"], doc["plan_made_for"]) == ([], None)


def test_a_refused_piper_plan_made_for_another_instance_says_so(tmp_path, capsys):
    """The two-stage plan without its second node, recorded as made for instance 'other', run on 'two': the
    refusal ends with the instance the plan was made for, the likely reason it does not fit."""
    instance, plan = write_two_stage(tmp_path)
    document = json.loads(Path(plan).read_text())
    Path(plan).write_text(json.dumps({**document, "instance": "other", "stages": document["stages"][:1]}))
    assert main(["simulate", instance, plan]) == 2
    assert capsys.readouterr().err == (f"error: {plan} is not valid for this instance: node 1 is in no stage (the "
                                       "plan was made for instance 'other', not 'two')\n")
