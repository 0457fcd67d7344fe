"""Split-backward plans and the zero-bubble schedules in the simulator.

Zero-bubble schedules on the uniform stages of ``test_simulate_schedules`` (forward 1, backward 2
split as B 1 + W 1, no transfer cost): Qi et al. give the idle time of each stage within its own
span (first task start to last task end) as ``(S − 1)(F + B + W)`` for 1F1B on the first stage,
``(S − 1)(F + B − W)`` for ZB-H1 and 0 for ZB-H2; with F = B = W = 1 the stage ``i`` figures
are ``3(S − 1 − i)``, ``S − 1 − i`` and 0.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from placement.errors import InvalidParameterError
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.problem.split import SplitModel
from placement.simulation import simulate
from placement.verification.split import evaluate_split

from tests.test_simulate_schedules import uniform_pipeline

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"


def idle_within_span(result, stage: int) -> float:
    """Time stage ``stage`` is idle between the start of its first task and the end of its last."""
    mine = (result.tasks.stage == stage) & ~result.tasks.on_link
    start, end = result.tasks.start[mine], result.tasks.end[mine]
    return float(end.max() - start.min() - (end - start).sum())


@pytest.mark.parametrize("stages", [2, 3, 4, 5])
@pytest.mark.parametrize("extra", [0, 1, 4])
def test_zero_bubble_schedules_match_the_paper_on_uniform_stages(stages, extra):
    m = 2 * stages - 1 + extra
    problem, plan = uniform_pipeline(stages, 1.0, 2.0)
    flush = simulate(problem, plan, "1f1b-flush", m)
    h1 = simulate(problem, plan, "zb-h1", m, w_fraction=0.5)
    h2 = simulate(problem, plan, "zb-h2", m, w_fraction=0.5)
    assert [idle_within_span(flush, i) for i in range(stages)] == [3.0 * (stages - 1 - i) for i in range(stages)]
    assert [idle_within_span(h1, i) for i in range(stages)] == [1.0 * (stages - 1 - i) for i in range(stages)]
    assert [idle_within_span(h2, i) for i in range(stages)] == [0.0] * stages
    # the last stage starts at S - 1 and works 3m: both zero-bubble schedules end then
    assert flush.iteration_time == 3.0 * (m + stages - 1)
    assert h1.iteration_time == h2.iteration_time == 3.0 * m + stages - 1
    # in flight: 1F1B S - i, ZB-H1 S on every stage (1F1B's most), ZB-H2 2S - 1
    assert [s.peak_in_flight for s in flush.stages] == [stages - i for i in range(stages)]
    assert [s.peak_in_flight for s in h1.stages] == [stages] * stages
    assert [s.peak_in_flight for s in h2.stages] == [2 * stages - 1] * stages
    assert max(s.peak_memory for s in h1.stages) == max(s.peak_memory for s in flush.stages) == 1.0 + 8.0 * stages



@pytest.mark.parametrize("stages", [2, 3, 4, 5])
def test_zb_h2_idles_with_fewer_microbatches_than_its_warm_up(stages):
    # S <= m < 2S - 1: stage i wants 2(S - i) - 1 forwards before its first backward but has only m, so
    # it idles 2(S - i) - 1 - m within its span where that is positive (S = 4, m = 4: 3, 1, 0, 0);
    # both zero-bubble schedules still end at 3m + S - 1 and ZB-H1 still idles S - 1 - i
    problem, plan = uniform_pipeline(stages, 1.0, 2.0)
    for m in range(stages, 2 * stages - 1):
        h1 = simulate(problem, plan, "zb-h1", m, w_fraction=0.5)
        h2 = simulate(problem, plan, "zb-h2", m, w_fraction=0.5)
        assert [idle_within_span(h1, i) for i in range(stages)] == [1.0 * (stages - 1 - i) for i in range(stages)]
        assert [idle_within_span(h2, i) for i in range(stages)] == [
            float(max(0, 2 * (stages - i) - 1 - m)) for i in range(stages)]
        assert h1.iteration_time == h2.iteration_time == 3.0 * m + stages - 1


def test_zb_h1_can_peak_above_1f1b_where_a_later_stage_holds_more_bytes():
    # two stages, F = B = W = 1, activations of 1 and 9 bytes per micro-batch, no node memory, 3 micro-batches:
    # 1F1B holds 2 and 1 (2 and 9 bytes), ZB-H1 at most S = 2 on both stages (2 and 18 bytes)
    nodes, edges = [], []
    for i, size in enumerate((1.0, 9.0)):
        nodes.append(Node(id=i, name=f"f{i}", times=(1.0, 100.0), memory=0.0, colour=i))
        nodes.append(Node(id=100 + i, name=f"b{i}", times=(2.0, 100.0), memory=0.0, backward=True, colour=i))
        edges.append(Edge(i, 100 + i, size=size))
    edges += [Edge(0, 1, size=1.0), Edge(101, 100)]
    problem = make_two_type_problem(nodes, edges, 2, 0, math.inf, name="unequal-activations")
    plan = Plan((DeviceAssignment("accelerator", (0, 100)), DeviceAssignment("accelerator", (1, 101))))
    flush = simulate(problem, plan, "1f1b-flush", 3)
    h1 = simulate(problem, plan, "zb-h1", 3, w_fraction=0.5)
    assert [(s.peak_in_flight, s.peak_memory) for s in flush.stages] == [(2, 2.0), (1, 9.0)]
    assert [(s.peak_in_flight, s.peak_memory) for s in h1.stages] == [(2, 2.0), (2, 18.0)]
    assert (h1.iteration_time, flush.iteration_time) == (10.0, 12.0)


def uneven(seed: int):
    rng = random.Random(seed)
    stages = rng.randint(2, 6)
    forward = [float(rng.randint(1, 4)) for _ in range(stages)]
    backward = [float(rng.randint(1, 8)) for _ in range(stages)]
    problem, plan = uniform_pipeline(stages, forward, backward, cost=rng.choice([0.0, 0.5]))
    return problem, plan, rng.randint(1, 12)


@pytest.mark.parametrize("seed", range(40))
def test_zb_h1_never_longer_and_never_more_memory_than_1f1b(seed):
    problem, plan, m = uneven(seed)
    flush = simulate(problem, plan, "1f1b-flush", m)
    h1 = simulate(problem, plan, "zb-h1", m, w_fraction=0.5)
    assert h1.iteration_time <= flush.iteration_time
    assert max(s.peak_memory for s in h1.stages) <= max(s.peak_memory for s in flush.stages)


def test_zb_h2_can_be_longer_than_zb_h1_on_uneven_stages():
    # ZB-H2's extra warm-up forwards are tuned for F = B = W; here they delay the first backwards.
    problem, plan = uniform_pipeline(4, [2.0, 3.0, 2.0, 1.0], [6.0, 3.0, 5.0, 6.0])
    h1 = simulate(problem, plan, "zb-h1", 4, w_fraction=0.5).iteration_time
    h2 = simulate(problem, plan, "zb-h2", 4, w_fraction=0.5).iteration_time
    assert h1 < h2 < simulate(problem, plan, "1f1b-flush", 4).iteration_time
    assert (h1, h2) == (39.0, 41.0)


def bounded_uniform(stages: int, bound: float):
    problem, plan = uniform_pipeline(stages, 1.0, 2.0)
    return make_two_type_problem(problem.nodes, problem.edges, stages, 0, bound, name="bounded"), plan


def test_zero_bubble_schedules_hold_what_the_memory_bound_allows():
    # node memory 1 + 8 bytes of activations per micro-batch: a bound of 25 holds 3 micro-batches
    problem, plan = bounded_uniform(4, 25.0)
    h2 = simulate(problem, plan, "zb-h2", 10, w_fraction=0.5)
    assert [s.peak_in_flight for s in h2.stages] == [3, 3, 3, 3]
    assert max(s.peak_memory for s in h2.stages) == 25.0
    unbounded = simulate(uniform_pipeline(4, 1.0, 2.0)[0], plan, "zb-h2", 10, w_fraction=0.5)
    assert [s.peak_in_flight for s in unbounded.stages] == [7, 7, 7, 7]
    assert h2.iteration_time > unbounded.iteration_time == 33.0


def test_a_memory_bound_below_one_micro_batch_is_refused():
    problem, plan = bounded_uniform(2, 5.0)
    with pytest.raises(InvalidParameterError, match=r"^schedule 'zb-h1' cannot run this plan: stage 0 \(device 0, "
                                                    r"accelerator\) holds node memory 1 and 8 bytes of activations "
                                                    r"per micro-batch, over its memory bound 5$"):
        simulate(problem, plan, "zb-h1", 4, w_fraction=0.5)


def two_layers(cost: float = 0.0):
    """f0 (1) -> f1 (1) -> b1 (2) -> b0 (2), f0 -> b0; sizes f0: 4, f1: 6, b1: 2; f1 costs ``cost``.
    Layer 0 on device 0, layer 1 on device 1, the W of b1 on device 0."""
    nodes = [Node(0, "f0", (1.0, None), memory=1.0, colour=0), Node(1, "f1", (1.0, None), memory=1.0, colour=1,
                                                                    out_cost=cost),
             Node(10, "b0", (2.0, None), backward=True, colour=0), Node(11, "b1", (2.0, None), backward=True, colour=1)]
    edges = [Edge(0, 1, 4.0), Edge(0, 10, 4.0), Edge(1, 11, 6.0), Edge(11, 10, 2.0)]
    problem = make_two_type_problem(nodes, edges, 2, 0, math.inf, name="two-layers")
    plan = Plan((DeviceAssignment("accelerator", (0, 10), w_tasks=(11,)), DeviceAssignment("accelerator", (1, 11))))
    return problem, plan


def test_split_plan_under_async_1f1b_worked_by_hand():
    # W share 0.5: device 0 runs F = f0 (1), B = B(b0) (1), W = W(b0) + W(b1) (2): load 4;
    # device 1 runs F = f1 (1), B = B(b1) (1), no W: load 2. No transfer costs.
    # 1F1B, S = 2: device 0 runs F0 F1 B0 W0 F2 B1 W1 ..., device 1 F0 B0 W0 F1 B1 W1 ...: every W call
    # reads only what its own stage's B has received (the gradient of b1 reaches device 0's B first), so
    # it runs right after that B.
    # d0: F0 [0,1] F1 [1,2] | d1: F0 [1,2] B0 [2,3] (W0 empty at 3) F1 [3,4] B1 [4,5]
    # d0: B0 waits for d1's B0: [3,4]; W0 [4,6]; F2 [6,7]; B1 [7,8]; W1 [8,10]; F3 [10,11] ...:
    #     device 0 repeats every 4 = the max load.
    problem, plan = two_layers()
    result = simulate(problem, plan, "1f1b-async", 24)
    assert result.time_per_sample == result.max_load == 4.0
    assert [s.task_times for s in result.stages] == [{"F": 1.0, "B": 1.0, "W": 2.0}, {"F": 1.0, "B": 1.0, "W": 0.0}]
    runs = {(t.stage, t.kind, t.microbatch): (t.start, t.end) for t in result.tasks}
    assert [runs[(0, k, j)] for k, j in [("F", 0), ("F", 1), ("B", 0), ("W", 0), ("F", 2), ("B", 1), ("W", 1)]] == \
        [(0, 1), (1, 2), (3, 4), (4, 6), (6, 7), (7, 8), (8, 10)]
    assert [runs[(1, k, j)] for k, j in [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2)]] == \
        [(1, 2), (2, 3), (3, 4), (4, 5), (7, 8)]
    # Memory. Device 0 (position 0 of 2, W lag 0) admits a micro-batch at its F and releases it after its
    # W: [0,6), [1,10), [6,14), ...: 2 at once = S - p. Per micro-batch it reserves its activation f0 (4
    # bytes) and a buffer for f1 (6 bytes, from device 1), which W(b1) reads (f0, W(b1)'s layer input, is
    # its own activation already): 1 + 2 x (4 + 6) = 21, 12 of it W inputs.
    # Device 1: node memory 1, f1 (6 bytes) of one micro-batch at a time: 7.
    assert [s.peak_memory for s in result.stages] == [21.0, 7.0]
    assert [s.peak_w_inputs for s in result.stages] == [12.0, 0.0]
    assert [s.w_inputs_per_microbatch for s in result.stages] == [6.0, 0.0]


def test_a_stage_without_w_work_holds_what_1f1b_holds():
    """A W call that does nothing was still a task, a filler of no length that waited for idle time, and its
    stage held each micro-batch until then. two_layers (8 micro-batches): device 1 runs no W call; under
    split-backward it held all 8 (49 bytes, as GPipe) and under zb-h1 2, where 1F1B with flush holds 1
    (node memory 1 + f1's 6 bytes = 7). Uniform stages (F 1, B 2) with a W share of 0: split-backward is
    1F1B with flush, (8 + 3 − 1) × 3 = 30, holding 3, 2, 1 (1 + 8 bytes each: 25, 17, 9), where it held 8
    on every stage."""
    problem, plan = two_layers()
    for schedule in ("split-backward", "zb-h1"):
        run = simulate(problem, plan, schedule, 8)
        assert (run.iteration_time, run.stages[1].peak_in_flight, run.stages[1].peak_memory) == (33.0, 1, 7.0)
    problem, plan = uniform_pipeline(3, 1.0, 2.0)
    flush = simulate(problem, plan, "1f1b-flush", 8)
    idle = simulate(problem, plan, "split-backward", 8, w_fraction=0.0)
    assert flush.iteration_time == idle.iteration_time == 30.0
    assert [s.peak_in_flight for s in idle.stages] == [s.peak_in_flight for s in flush.stages] == [3, 2, 1]
    assert [s.peak_memory for s in idle.stages] == [25.0, 17.0, 9.0]


def test_split_plan_gpipe_pays_a_w_call_receive_in_the_backward_phase():
    # f1 costs 1. Device 0 receives f1 only for W(b1): in its W call, after the forward phase.
    # Per sample, forward phase: max(d0 F 1, d1 F 1 + send f1 1) = 2; backward phase: max(d0 B 1 + W 2 +
    # receive 1, d1 B 1) = 4. GPipe's iteration grows by 2 + 4 = 6 per micro-batch.
    problem, plan = two_layers(cost=1.0)
    t20 = simulate(problem, plan, "gpipe", 20).iteration_time
    t40 = simulate(problem, plan, "gpipe", 40).iteration_time
    assert (t20, t40) == (122.0, 242.0)
    assert evaluate_split(problem, plan, SplitModel()).objective("throughput-gpipe") == 6.0
    assert simulate(problem, plan, "1f1b-async", 24).time_per_sample == 5.0


def test_gpipe_of_a_split_plan_flushes_between_the_phases():
    # f0 (2, c .5) -> f1 (2, c .5) -> b1 (6) -> b0 (2), f0 -> b0; B(b1) moved to device 0. Device 0:
    # F = f0 2 + send .5 = 2.5, B = B(b1) 3 + B(b0) 1 + receive f1 .5 = 4.5, W = W(b0) 1; device 1: F = f1 2
    # + receive f0 .5 + send f1 .5 = 3, W = W(b1) 3. Max FW + max BW = 3 + 5.5 = 8.5.
    # Forward phase, m = 4: device 1's F(j) waits for device 0's (ends 2.5 (j + 1)): [2.5, 5.5], ..., [11.5, 14.5].
    # No backward call starts before 14.5 (without that flush device 0's B(0) would start at 5.5, overlapping
    # device 1's forwards); then device 0 runs B (4.5) and W (1) of 4 micro-batches: 14.5 + 22 = 36.5.
    # Per micro-batch 3 + 5.5 = 8.5 more: 70.5, 138.5.
    problem, plan, model = random_split_plan(89)
    assert [b.name for b in problem.nodes] == ["f0", "b0", "f1", "b1"]
    assert plan.devices[0].b_tasks == (101,) and not any(d.w_tasks for d in plan.devices)
    assert evaluate_split(problem, plan, model).objective("throughput-gpipe") == 8.5
    assert [simulate(problem, plan, "gpipe", m).iteration_time for m in (4, 8, 16)] == [36.5, 70.5, 138.5]


def random_split_plan(seed: int):
    """A chain of 2-7 layers (f_i -> f_i+1, b_i+1 -> b_i, f_i -> b_i; random times, costs, sizes) cut
    into 1-4 stages; every W on a random stage, and with inter-layer moves half of the stages' first B
    on the stage before."""
    rng = random.Random(seed)
    layers = rng.randint(2, 7)
    stages = rng.randint(1, min(layers, 4))
    nodes, edges = [], []
    for i in range(layers):
        nodes.append(Node(i, f"f{i}", (float(rng.randint(1, 5)), None), memory=1.0, colour=i,
                          out_cost=rng.choice([0.0, 0.5, 1.0])))
        nodes.append(Node(100 + i, f"b{i}", (float(rng.randint(1, 8)), None), backward=True, colour=i,
                          out_cost=rng.choice([0.0, 0.5, 1.0])))
        edges.append(Edge(i, 100 + i, 8.0))
        if i + 1 < layers:
            edges.append(Edge(i, i + 1, float(rng.randint(1, 9))))
            edges.append(Edge(100 + i + 1, 100 + i, float(rng.randint(1, 9))))
    problem = make_two_type_problem(nodes, edges, stages, 0, math.inf, name=f"split-{seed}")
    bounds = [0] + sorted(rng.sample(range(1, layers), stages - 1)) + [layers]
    stage = {i: s for s in range(stages) for i in range(bounds[s], bounds[s + 1])}
    inter = rng.random() < 0.5
    b_tasks: list[list[int]] = [[] for _ in range(stages)]
    w_tasks: list[list[int]] = [[] for _ in range(stages)]
    for i in range(layers):
        s = stage[i]
        if inter and s > 0 and i == bounds[s] and rng.random() < 0.5:
            b_tasks[s - 1].append(100 + i)
        w = rng.randrange(stages)
        if w != s:
            w_tasks[w].append(100 + i)
    plan = Plan(tuple(DeviceAssignment("accelerator", tuple([i for i in range(layers) if stage[i] == s]
                                                             + [100 + i for i in range(layers) if stage[i] == s]),
                                       b_tasks=tuple(b_tasks[s]), w_tasks=tuple(w_tasks[s])) for s in range(stages)))
    return problem, plan, SplitModel("any", inter)


@pytest.mark.parametrize("seed", range(60))
def test_async_1f1b_runs_random_split_plans_at_the_evaluators_max_load(seed):
    problem, plan, model = random_split_plan(seed)
    verdict = evaluate_split(problem, plan, model)
    assert verdict.valid
    result = simulate(problem, plan, "1f1b-async", 96)
    assert [sum(s.task_times.values()) for s in result.stages] == pytest.approx([d.load for d in verdict.evaluation.devices], rel=1e-12)
    assert result.time_per_sample == pytest.approx(verdict.evaluation.max_load, rel=1e-9)
    assert np.all(result.tasks.end >= result.tasks.start)
    # memory: the peak from the reservation events equals the planner's node memory + H x (activations +
    # kept W inputs), H = S - p + lag micro-batches in flight
    assert [s.peak_memory for s in result.stages] == [d.memory for d in verdict.evaluation.devices]
    # GPipe flushes between its phases: it grows by exactly max FW + max BW per micro-batch
    m1, m2 = 8 * len(plan.devices), 16 * len(plan.devices)
    slope = (simulate(problem, plan, "gpipe", m2).iteration_time
             - simulate(problem, plan, "gpipe", m1).iteration_time) / (m2 - m1)
    assert slope == pytest.approx(verdict.objective("throughput-gpipe"), rel=1e-12)


def test_simulate_command_replays_a_solved_split_plan(tmp_path, capsys):
    # training-pair (f1 2 -> f2 3 -> b2 6 -> b1 4, f1 -> b1; costs f1 1, f2 0.5, b2 1.5, b1 1) on two
    # accelerators: the split optimum the planner writes, replayed from its file with its W share.
    from placement.cli import main

    pair = str(TINY / "training-pair.json")
    plan_file = tmp_path / "split.json"
    assert main(["solve", pair, "--backward", "split", "--quiet", "--out", str(plan_file)]) == 0
    capsys.readouterr()
    solved = json.loads(plan_file.read_text())
    assert main(["simulate", pair, str(plan_file), "--microbatches", "16", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["split_plan"] is True
    assert run["time_per_sample"] == run["max_load"] == solved["objective"] == max(d["load"] for d in solved["devices"])
    assert [sum(s["task_times"].values()) for s in run["stages"]] == [d["load"] for d in solved["devices"]]


def test_layerpipe_page_examples_print_what_it_says(monkeypatch):
    import contextlib
    import io
    import re

    from tests.test_docs import python_blocks

    root = TINY.parents[1]
    monkeypatch.chdir(root)
    page = (root / "docs" / "layerpipe.md").read_text(encoding="utf-8")
    blocks = python_blocks(root / "docs" / "layerpipe.md")
    said = re.findall(r"^```python\n.*?^```\n\nprints\n\n```\n(.*?)^```", page, flags=re.S | re.M)
    assert len(blocks) == len(said) == 2
    namespace: dict = {}
    for block, expected in zip(blocks, said):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/layerpipe.md", "exec"), namespace)
        assert out.getvalue() == expected


def three_layers(b_tasks=((), (), ()), w_tasks=((), (), ()), layers=((0, 100), (1, 101), (2, 102))):
    """f0 -> f1 -> f2 -> b2 -> b1 -> b0 with f_i -> b_i; forward 1, backward 2 (B 1 + W 1), no costs."""
    nodes, edges = [], []
    for i in range(3):
        nodes += [Node(i, f"f{i}", (1.0, None), memory=1.0, colour=i),
                  Node(100 + i, f"b{i}", (2.0, None), backward=True, colour=i)]
        edges.append(Edge(i, 100 + i, 4.0))
        if i < 2:
            edges += [Edge(i, i + 1, 4.0), Edge(101 + i, 100 + i, 4.0)]
    problem = make_two_type_problem(nodes, edges, 3, 0, math.inf, name="three-layers")
    plan = Plan(tuple(DeviceAssignment("accelerator", nodes, b_tasks=b, w_tasks=w)
                      for nodes, b, w in zip(layers, b_tasks, w_tasks) if nodes))
    return problem, plan


def test_a_w_call_that_receives_another_stages_b_output_trails_its_b():
    # W(b0) on stage 2 reads f0 (stage 0's F) and b1 (stage 1's B, which stage 2's own B does not read):
    # stage 2 runs W(j - 2) after B(j) (1 + the distance to stage 1). Loads: stage 0 F 1 + B 1 = 2; stage 1 F 1 + B 1 + W 1 = 3;
    # stage 2 F 1 + B 1 + W(b2) 1 + W(b0) 1 = 4: the max load, at which async 1F1B runs.
    from placement.simulation.program import w_lags
    from placement.simulation.schedules import get_schedule
    from placement.simulation.split import build_split_pipeline

    problem, plan = three_layers(w_tasks=((), (), (100,)))
    pipeline = build_split_pipeline(problem, plan, SplitModel())
    assert w_lags(pipeline, get_schedule("1f1b-async")) == [0, 0, 2]
    assert w_lags(pipeline, get_schedule("zb-h1")) == [None, None, None]
    result = simulate(problem, plan, "1f1b-async", 40)
    assert [sum(s.task_times.values()) for s in result.stages] == [2.0, 3.0, 4.0]
    assert result.time_per_sample == 4.0
    runs = {(t.stage, t.kind, t.microbatch): t.start for t in result.tasks}
    order = sorted((start, kind, j) for (s, kind, j), start in runs.items() if s == 2 and j < 4)
    assert [(kind, j) for _, kind, j in order][:7] == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2),
                                                         ("W", 0)]


def test_b_calls_that_wait_for_each_other_are_refused():
    from placement.simulation.split import build_split_pipeline

    # Layers 0 | 1, 2; B(b2) moved to stage 0: stage 0's B (b2) feeds stage 1's B (b1), which feeds
    # stage 0's B (b0) again: one B call per device cannot run it.
    problem, plan = three_layers(b_tasks=((102,), ()), w_tasks=((), ()), layers=((0, 100), (1, 101, 2, 102), ()))
    # the evaluator, which the simulator asks first, names the cycle; the pipeline builder's own check
    # names it by stages
    with pytest.raises(InvalidParameterError) as err:
        simulate(problem, plan, "1f1b-async", 8)
    assert str(err.value) == ("plan is not valid for this instance: the B tasks of devices 0 -> 1 -> 0 wait for "
                              "each other in a cycle")
    with pytest.raises(InvalidParameterError, match=r"^plan has stages that wait for each other in a cycle .*: "
                                                    r"B of stage 0 \(device 0, accelerator\) -> B of stage 1 \(device 1, "
                                                    r"accelerator\) -> B of stage 0 \(device 0, accelerator\)$"):
        build_split_pipeline(problem, plan, SplitModel("any", True))


def transient_instance():
    """Three layers (backward edges b0 -> b1 -> b2 run forward, as in the published layer graphs), no
    transfer costs. Stage 0 = f0 50, B(b0) 30 and the moved W(b2) 50: 130 per micro-batch; stage 1 =
    f1 25, f2 10, B(b1) 25, B(b2) 120.5 - 50 = 70.5: 130.5, the max load."""
    def node(i, name, time, backward, weight=None):
        return Node(i, name, (float(time), float(time)), backward=backward, colour=i % 3,
                    weight_times=None if weight is None else (float(weight), float(weight)))
    nodes = [node(0, "f0", 50, False), node(1, "f1", 25, False), node(2, "f2", 10, False),
             node(3, "b0", 30, True, 0), node(4, "b1", 25, True, 0), node(5, "b2", 120.5, True, 50)]
    edges = [Edge(0, 1, 0.0), Edge(1, 2, 0.0), Edge(3, 4, 0.0), Edge(4, 5, 0.0)]
    problem = make_two_type_problem(nodes, edges, 2, 0, 100.0, name="transient")
    plan = Plan((DeviceAssignment("accelerator", (0, 3), b_tasks=(3,), w_tasks=(3, 5)),
                 DeviceAssignment("accelerator", (1, 2, 4, 5), b_tasks=(4, 5), w_tasks=(4,))))
    return problem, plan


def test_a_regime_faster_than_the_busiest_stage_is_no_steady_state():
    """Stage 0's delayed W call ends each micro-batch last, every 130, while stage 1, which works 130.5
    per micro-batch, falls behind by 0.5 each: over micro-batches 32..55 of 64 the completions are
    periodic at 130, which the run reported as its steady state (simulated / model 0.996). No steady
    state is faster than the busiest stage; by 1,024 micro-batches the run settles at 130.5."""
    problem, plan = transient_instance()
    verdict = evaluate_split(problem, plan, SplitModel("any", False))
    assert verdict.valid and verdict.evaluation.max_load == 130.5
    short = simulate(problem, plan, "1f1b-async", 64)
    assert (short.time_per_sample, short.period) == (130.0, None)
    assert short.notes == ("not settled within micro-batches 32..55: they complete every 130, faster than the "
                           "busiest stage works per micro-batch (130.5); the time per sample is their average "
                           "slope; run more micro-batches",)
    long = simulate(problem, plan, "1f1b-async", 1024, keep_tasks=False)
    assert (long.time_per_sample, long.period, long.notes) == (130.5, 1, ())


def test_a_fast_period_that_does_not_fit_the_window_reports_the_average_slope():
    """Completions +1, +9, +1, ... (period 2, 5 per sample) against a busiest stage of 6 per micro-batch: no
    steady state, and the time per sample is the window's average slope, as the note says, not the period's
    rate: micro-batches 10..17 complete at 50 and 81, so (81 − 50) / 7."""
    import numpy as np

    from placement.simulation.schedules import get_schedule
    from placement.simulation.simulator import _headline, steady_rate

    completions = np.array([10.0 * (j // 2) + j % 2 for j in range(20)])

    window, span, _, per_sample, period, notes, counted = _headline(
        get_schedule("1f1b-async"), 20, 2, 91.0, lambda a, b: steady_rate(completions, a, b),
        lambda j: float(completions[j]), 6.0)
    # no period: the span's busy time is measured as the tasks ran, not counted by micro-batch (None)
    assert (window, span, per_sample, period, counted) == ((10, 17), (50.0, 81.0), 31 / 7, None, None)
    assert notes[0].startswith("not settled within micro-batches 10..17: they complete every 5, faster than")


@pytest.mark.parametrize("b_tasks, recorded, message", [
    # B(b1) on the stage after its layer: no variant runs a B there
    (((), (), (101,)), {}, "node 101: its B task runs on device 2, which the variant 'any+inter-layer' does not "
                           "allow (layer on device 1)"),
    # B(b1) on the stage before its layer, in a plan solved without inter_layer
    (((101,), (), ()), {"inter_layer": False}, "node 101: its B task runs on device 0, which the variant 'any' "
                                               "does not allow (layer on device 1; a B task on the device before "
                                               "its layer's needs an inter-layer variant)"),
])
def test_a_split_plan_its_variant_does_not_allow_is_not_simulated(b_tasks, recorded, message):
    """The simulator ran such plans, which verify rejects, and reported a time per sample for them."""
    import placement
    from placement.io.plans import plan_document

    problem, plan = three_layers(b_tasks=((), (), ()))
    moved = Plan(tuple(DeviceAssignment(d.type, d.nodes, b_tasks=b) for d, b in zip(plan.devices, b_tasks)))
    document = plan_document(moved)
    document["backward"] = {"mode": "split", **recorded}
    with pytest.raises(InvalidParameterError) as err:
        placement.simulate(problem, document, microbatches=8)
    assert str(err.value) == f"plan is not valid for this instance: {message}"


@pytest.mark.parametrize("recorded, message", [
    ({"inter_layer": "no"}, "inter_layer must be True or False, not 'no'"),
    ({"inter_layer": 0}, "inter_layer must be True or False, not 0"),
    ({"w_placement": "bogus"}, "w_placement must be one of 'any', 'adjacent', 'home', not 'bogus'"),
    ({"w_share": 2}, "w_share must be a finite number ≥ 0 and ≤ 1, not 2"),
])
def test_a_split_record_that_names_no_variant_is_refused(recorded, message):
    """The simulator dropped such values and ran the plan under its most permissive variant: with
    "inter_layer": "no", a plan whose B task moved to the previous stage, which verify refuses."""
    import placement
    from placement.errors import InvalidPlanError
    from placement.io.plans import plan_document

    problem, plan = three_layers(b_tasks=((101,), (), ()))
    document = plan_document(plan)
    document["backward"] = {"mode": "split", **recorded}
    with pytest.raises(InvalidPlanError) as err:
        placement.simulate(problem, document, microbatches=8)
    assert str(err.value) == f"the plan's backward record: {message}"   # worded as verify words it


def test_a_device_whose_calls_take_no_time_holds_its_buffer_sets_between_them():
    """f0 (3) | f1 (0) -> b1 (0) | b0 (6) on two devices, every tensor 10 bytes, node memory 1 each. The
    second device's calls take no time: counted over time it held no micro-batch (peak memory 2, below
    the planner's 12); counted in its order it holds H = S - p = 1 set, and both devices' peaks equal
    the planner's memory: 1 + 1 + 2 x 10 = 22 and 1 + 1 + 1 x 10 = 12."""
    import placement

    def node(i, name, time, backward):
        return {"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": time, "cpuLatency": time,
                "isBackwardNode": int(backward), "colorClass": 0 if name.endswith("0") else 1, "size": 1}
    instance = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
                "nodes": [node(1, "f0", 3, False), node(2, "f1", 0, False), node(3, "b1", 0, True),
                          node(4, "b0", 6, True)],
                "edges": [{"sourceId": a, "destId": b, "cost": 0, "size": 10} for a, b in ((1, 2), (2, 3), (3, 4),
                                                                                          (1, 4))]}
    problem = placement.load(instance)
    plan = Plan((DeviceAssignment("accelerator", (1, 4), b_tasks=(4,), w_tasks=(4,)),
                 DeviceAssignment("accelerator", (2, 3), b_tasks=(3,), w_tasks=(3,))))
    verdict = evaluate_split(problem, plan, SplitModel("home"))
    result = simulate(problem, plan, "1f1b-async", 64)
    assert [s.peak_in_flight for s in result.stages] == [2, 1]
    assert [s.peak_memory for s in result.stages] == [d.memory for d in verdict.evaluation.devices] == [22.0, 12.0]


def test_a_split_plan_run_reports_the_w_share_it_used():
    """instances/tiny/training-pair.json, split as the planner splits it: device 0 holds layer 1 (f1 2, B(b1))
    and runs W(b2); device 1 holds layer 2 (f2 3, B(b2)) and runs W(b1). At the share 0.5 device 0 runs F 3
    (f1 2 + send f1 1), B 3.5 (B(b1) 2 + receive b2 1.5), W 3.5 (W(b2) 3 + receive f2 0.5); device 1 F 4.5
    (f2 3 + receive f1 1 + send f2 0.5), B 4.5 (B(b2) 3 + send b2 1.5), W 2 (W(b1)). 1F1B-flush, m = 2:
    device 0 F0 [0, 3], F1 [3, 6]; device 1 F0 [3, 7.5], B0 [7.5, 12], W0 [12, 14], F1 [14, 18.5], B1 [18.5, 23],
    W1 [23, 25]; device 0 B0 [12, 15.5], W0 [15.5, 19], B1 [23, 26.5], W1 [26.5, 30]. The run says which share
    it used (it reported none): 0.5; given 0.25, W(b2) = 1.5 and W(b1) = 1, device 0 B 4.5, W 2 and device 1
    B 6, W 1. Weight-gradient times of 1.5 for b2 and 1 for b1 take the same times: the instance's times, a
    share 2.5 / 10 of the backward compute; with b1's alone, b2 splits at 0.5, and a note says so."""
    from dataclasses import replace

    import placement
    from placement.report.simulation import format_simulation

    problem = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "training-pair.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 4), b_tasks=(4,), w_tasks=(3,)),
                 DeviceAssignment("accelerator", (2, 3), b_tasks=(3,), w_tasks=(4,))))
    half = placement.simulate(problem, plan, schedule="1f1b-flush", microbatches=2)
    assert [s.task_times for s in half.stages] == [{"F": 3.0, "B": 3.5, "W": 3.5}, {"F": 4.5, "B": 4.5, "W": 2.0}]
    assert half.iteration_time == 30.0
    assert (half.w_fraction, half.w_times) == (0.5, False)
    assert half.to_json()["w_fraction"] == 0.5
    assert "weight grads    0.5 of each backward's compute runs as W tasks\n" in format_simulation(half)
    quarter = placement.simulate(problem, plan, schedule="1f1b-flush", microbatches=2, w_fraction=0.25)
    assert [s.task_times for s in quarter.stages] == [{"F": 3.0, "B": 4.5, "W": 2.0}, {"F": 4.5, "B": 6.0, "W": 1.0}]
    assert (quarter.w_fraction, quarter.w_times) == (0.25, False)
    weights = {3: (1.5, 15.0), 4: (1.0, 10.0)}
    timed = replace(problem, nodes=tuple(replace(n, weight_times=weights.get(n.id)) for n in problem.nodes))
    given = placement.simulate(timed, plan, schedule="1f1b-flush", microbatches=2)
    assert [s.task_times for s in given.stages] == [s.task_times for s in quarter.stages]
    assert (given.w_fraction, given.w_times, given.notes) == (0.25, True, (UNSIZED,))
    assert "weight grads    the instance's weight-gradient times (0.25 of the backward compute)" in \
        format_simulation(given)
    one = replace(problem, nodes=tuple(replace(n, weight_times=(1.0, 10.0)) if n.id == 4 else n
                                       for n in problem.nodes))
    mixed = placement.simulate(one, plan, schedule="1f1b-flush", microbatches=2)
    assert [s.task_times["W"] for s in mixed.stages] == [3.5, 1.0]   # W(b2) 3 + receive f2 0.5; W(b1) 1
    assert (mixed.w_fraction, mixed.w_times) == (4.0 / 10.0, True)
    assert mixed.notes == (UNSIZED, "backward nodes that give no weight-gradient time split their time 0.5 to W")


UNSIZED = ("some tensor sizes are missing from the instance: a split plan's memory counts them as 0 bytes, as its "
           "planner does")


def test_a_split_plan_run_says_where_tensor_sizes_are_missing():
    """instances/tiny/training-pair.json gives no tensor sizes. Split as the planner splits it (device 0: layer 1
    and W(b2), device 1: layer 2 and W(b1)), the memory of each device is its node memory alone, 1 + 1 = 2, with
    its activations (f1, f2) and device 0's buffer for f2 (W(b2) reads it) counted as 0 bytes, as the split
    planner counts them; the run used to print 2/100 with no word that the sizes were missing, where a joint
    plan prints '-' and a note. A split plan whose instance sizes every edge gets no such note."""
    import placement

    problem = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "training-pair.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 4), b_tasks=(4,), w_tasks=(3,)),
                 DeviceAssignment("accelerator", (2, 3), b_tasks=(3,), w_tasks=(4,))))
    run = simulate(problem, plan, "1f1b-async", 16)
    assert [s.peak_memory for s in run.stages] == [2.0, 2.0]
    assert [s.peak_w_inputs for s in run.stages] == [0.0, 0.0]
    assert run.notes[-1] == UNSIZED
    sized, sized_plan, _ = random_split_plan(0)
    assert all(e.size is not None for e in sized.edges)
    assert UNSIZED not in simulate(sized, sized_plan, "1f1b-async", 16).notes


def test_a_split_plan_run_reports_the_evaluators_max_load_to_the_last_digit():
    # times 0.1 + 0.7 + 0.1 + 0.1 on the first device: summed in the stages' running order they come to
    # 0.9999999999999999, exactly rounded to the verified 1.0 that the plan file records as its maxLoad
    import placement

    times = {1: (0.1, False), 2: (0.2, False), 3: (0.3, True), 4: (0.7, True)}
    problem = placement.load({
        "maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
        "nodes": [{"id": v, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": 100, "isBackwardNode": int(b),
                   "colorClass": 2 if v in (2, 3) else 1} for v, (t, b) in times.items()],
        "edges": [{"sourceId": a, "destId": b, "cost": 0.1} for a, b in ((1, 2), (2, 3), (3, 4), (1, 4))]})
    solved = placement.solve(problem, backward="split")
    assert (solved.value, solved.verification.max_load) == (1.0, 1.0)
    assert [(s.nodes, s.b_tasks, s.w_tasks) for s in solved.plan] == [((1, 4), (4,), (4,)), ((2, 3), (3,), (3,))]
    run = placement.simulate(problem, solved, microbatches=16)
    assert (run.max_load, run.model_time_per_sample) == (1.0, 1.0)
    assert run.to_json()["max_load"] == solved.to_json()["maxLoad"] == 1.0


def crossed_pair(size: float):
    """f0 -> f1 -> b1 -> b0, every time 1 and every node of ``size`` bytes, two accelerators of 100 bytes,
    colour classes {f0, b1} and {f1, b0}; and the split plan with every task on its layer's device, which
    records no variant."""
    import placement

    problem = placement.load({
        "maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
        "nodes": [{"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": size,
                   "isBackwardNode": int(name[0] == "b"), "colorClass": colour}
                  for i, (name, colour) in enumerate((("f0", 0), ("f1", 1), ("b1", 0), ("b0", 1)))],
        "edges": [{"sourceId": 0, "destId": 1, "cost": 0}, {"sourceId": 1, "destId": 2, "cost": 0},
                  {"sourceId": 2, "destId": 3, "cost": 0}]})
    plan = {"devices": [{"type": "accelerator", "nodes": [0, 2], "b_tasks": [2], "w_tasks": [2]},
                        {"type": "accelerator", "nodes": [1, 3], "b_tasks": [3], "w_tasks": [3]}]}
    return problem, plan


def test_a_split_plan_without_a_record_runs_where_it_is_valid_without_moved_b_tasks():
    """f0 -> f1 -> b1 -> b0, every time 1, colour classes {f0, b1} and {f1, b0}, every task on its layer's
    device: a split plan whose file records no variant. ``verify`` finds it valid (B at home, no
    inter-layer rule); the simulator took the inter-layer variant for it, whose no-cycle rule counts the
    forward edge f1 -> b1 into device 0's B call, and refused it as invalid. It runs: device 1 runs F, waits
    for device 0's B, then its own B and W, 2.5 per sample where the loads say 2."""
    import placement

    problem, plan = crossed_pair(size=0)
    assert placement.verify(problem, plan).valid
    ran = placement.simulate(problem, plan, microbatches=64)
    assert (ran.time_per_sample, ran.max_load) == (2.5, 2.0)
    # B(b0) moved to device 0 needs the inter-layer variant, which the simulator then takes
    moved = {"devices": [{"type": "accelerator", "nodes": [0, 2], "b_tasks": [2, 3], "w_tasks": [2]},
                         {"type": "accelerator", "nodes": [1, 3], "w_tasks": [3]}]}
    assert not placement.verify(problem, moved).valid and placement.verify(problem, moved, inter_layer=True).valid
    ran = placement.simulate(problem, moved, microbatches=64)
    assert (ran.time_per_sample, ran.max_load) == (2.5, 2.5)


def test_a_split_plan_without_a_record_that_fits_no_variant_is_refused_for_what_verify_finds():
    """The plan of the test above with nodes of 60 bytes on devices of 100: every B task on its layer's device,
    it is invalid for its memory alone, as ``verify`` says. The simulator tried the inter-layer variant last and
    refused the plan for that variant's B-call cycle, which this plan, moving no B task, is not held to."""
    import placement

    problem, plan = crossed_pair(size=60)
    assert placement.verify(problem, plan).violations == ("device 0 (accelerator): memory 120 exceeds the bound 100",
                                                          "device 1 (accelerator): memory 120 exceeds the bound 100")
    with pytest.raises(InvalidParameterError) as raised:
        placement.simulate(problem, plan, microbatches=4)
    assert str(raised.value) == ("plan is not valid for this instance: device 0 (accelerator): memory 120 exceeds the "
                                 "bound 100 (and 1 more; verifying the plan lists them all)")


@pytest.mark.parametrize("schedule, held, noted", [("1f1b-async", 2, None), ("gpipe", 8, "0.9")])
def test_a_split_plans_peak_is_noted_over_its_bound_by_the_memory_rule_as_written(schedule, held, noted):
    """f0 -> f1 -> b1 -> b0 (times 3), f0 holding 0.1 bytes and sending 0.1 bytes of activations, every task at
    home, devices of 0.3 bytes: device 0 holds two micro-batches under 1F1B, 0.1 + 2 · 0.1, which meets the
    bound as written (``verify`` finds the plan valid; the floating-point sum, 0.30000000000000004, was noted
    as "peak memory 0.3 exceeds its bound 0.3"); GPipe holds all 8, 0.9, which exceeds it."""
    import placement

    nodes = (Node(0, "f0", (3.0,), memory=0.1, colour=0), Node(1, "f1", (3.0,), colour=1),
             Node(2, "b1", (3.0,), backward=True, colour=1), Node(3, "b0", (3.0,), backward=True, colour=0))
    edges = (Edge(0, 1, size=0.1), Edge(1, 2, size=0.0), Edge(2, 3, size=0.0), Edge(0, 3, size=0.1))
    problem = placement.Instance(nodes, edges, (placement.DeviceType("accelerator", 2, memory=0.3),))
    plan = Plan((DeviceAssignment("accelerator", (0, 3), b_tasks=(3,), w_tasks=(3,)),
                 DeviceAssignment("accelerator", (1, 2), b_tasks=(2,), w_tasks=(2,))))
    assert placement.verify(problem, plan).valid
    ran = placement.simulate(problem, plan, schedule=schedule, microbatches=8)
    assert ran.split_plan and ran.stages[0].peak_in_flight == held
    assert [note for note in ran.notes if "exceeds" in note] == (
        [f"stage 0 (device 0, accelerator): peak memory {noted} exceeds its bound 0.3"] if noted else [])
