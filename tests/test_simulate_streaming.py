"""Steady state: a long stream through a plan runs at the plan's max load (the load model).

Checked by hand on a tiny instance, on random plans (exactly), and on the DP plans of the
bundled BERT-Base graphs and of the smaller published instances (within 0.1%).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from placement.io.tarnawski import read_instance
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import CPU, DeviceType, Edge, Instance, Node
from placement.simulation import simulate
from placement.solvers.dp import solve_dp
from placement.verification.evaluate import evaluate

from tests.strategies import colour_respecting_plans, problems

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny"
SHARED = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
SMALL_SHARED = ["LayerGraphs/bert24_inference", "LayerGraphs/bert24_training", "LayerGraphs/gnmt_inference",
                "LayerGraphs/gnmt_training", "LayerGraphs/resnet50_inference", "LayerGraphs/resnet50_training",
                "OperatorGraphs/bert_l-3_inference", "OperatorGraphs/bert_l-3_training"]
TOLERANCE = 1e-3   # the acceptance bound: 0.1%


def diamond_plan() -> Plan:
    # diamond-cpu: s (1) -> x (6), s -> y (6), x -> t, y -> t; t (2) only on the CPU; every c = 1.
    return Plan((DeviceAssignment("accelerator", (10, 11)), DeviceAssignment("accelerator", (12,)),
                 DeviceAssignment("cpu", (13,))))


def test_stream_through_diamond_by_hand():
    """Device 0 {s, x}: compute 7, sends s and x (2): load 9. Device 1 {y}: receives s (1), 6,
    sends y (1): load 8. The CPU {t}: 2, no communication. Sample j: device 0 [9j, 9j+9],
    device 1 [9j+9, 9j+17], CPU [9j+17, 9j+19]; completion 9j + 19, time per sample 9."""
    problem = read_instance(TINY / "diamond-cpu.json")
    result = simulate(problem, diamond_plan(), "stream", 40)
    ends = sorted({t.end for t in result.tasks if t.stage == 2})
    assert ends == [9 * j + 19 for j in range(40)]
    assert [s.task_times for s in result.stages] == [{"F": 9.0}, {"F": 8.0}, {"F": 2.0}]
    assert result.time_per_sample == 9.0 == result.max_load == result.model_time_per_sample
    assert result.makespan == 9 * 39 + 19
    # The steady window is [c[20], c[34]] = [199, 325], 126 long: device 0 is busy all of it;
    # device 1 runs [9j+9, 9j+17]: 7 of sample 21, 8 each of samples 22..34, 1 of sample 35 = 112;
    # the CPU runs [9j+17, 9j+19]: samples 21..34, 2 each = 28.
    assert result.steady_window == (20, 34)
    assert [s.busy for s in result.stages] == [126.0, 112.0, 28.0]
    assert [s.utilisation for s in result.stages] == [1.0, 112 / 126, 28 / 126]
    assert result.bubble_fraction == pytest.approx(1 - 266 / 378)
    assert [s.peak_in_flight for s in result.stages] == [1, 1, 1]


def test_stream_through_diamond_with_links_by_hand():
    """Links: device 0 computes 7 per sample and its link sends 2, device 1 computes 6 and its
    link moves 2 (receive s, send y): the stream runs at max(7, 2) = 7 per sample (the
    overlapped load model), not 9. Sample 0: d0 [0,7], d0 link [7,9], d1 link [9,10], d1
    [10,16]; sample 1: d0 [7,14], d0 link [14,16]. At 16 d1's link has the send of sample 0
    and the receive of sample 1 ready and fetches first ([16,17]), then sends ([17,18]); the
    CPU runs sample 0 at [18,20]."""
    problem = read_instance(TINY / "diamond-cpu.json")
    result = simulate(problem, diamond_plan(), "stream", 40, comm="link")
    first = sorted((t.start, t.end, t.stage, t.kind, t.microbatch) for t in result.tasks if t.microbatch < 2)
    assert first[:9] == [(0, 7, 0, "F", 0), (7, 9, 0, "send", 0), (7, 14, 0, "F", 1), (9, 10, 1, "recv", 0),
                         (10, 16, 1, "F", 0), (14, 16, 0, "send", 1), (16, 17, 1, "recv", 1),
                         (17, 18, 1, "send", 0), (17, 23, 1, "F", 1)]
    assert (18, 20, 2, "F", 0) in first
    assert result.time_per_sample == 7.0 == result.model_time_per_sample
    assert result.max_load == 9.0
    assert [s.link_time for s in result.stages] == [2.0, 2.0, None]


@given(data=st.data())
@settings(max_examples=100)
def test_stream_runs_at_max_load_on_random_plans(data):
    problem = data.draw(problems(training=False))
    plan = data.draw(colour_respecting_plans(problem))
    assume(evaluate(problem, plan, "stages").valid)
    result = simulate(problem, plan, "stream", 1000)
    assert math.isclose(result.time_per_sample, result.max_load, rel_tol=1e-9, abs_tol=1e-12)
    linked = simulate(problem, plan, "stream", 1000, comm="link")
    assert math.isclose(linked.time_per_sample, linked.model_time_per_sample, rel_tol=1e-9, abs_tol=1e-12)


@given(data=st.data())
@settings(max_examples=100)
def test_1f1b_async_runs_at_max_load_on_random_plans(data):
    problem = data.draw(problems(training=True))
    plan = data.draw(colour_respecting_plans(problem))
    assume(problem.is_training and evaluate(problem, plan, "stages").valid)
    result = simulate(problem, plan, "1f1b-async", 1000)
    assert math.isclose(result.time_per_sample, result.max_load, rel_tol=1e-9, abs_tol=1e-12)
    assert not any(note.startswith("no steady state") for note in result.notes)


def _dp_stream(problem):
    solution = solve_dp(problem)
    schedule = "1f1b-async" if problem.is_training else "stream"
    return simulate(problem, solution.plan, schedule, 1000), evaluate(problem, solution.plan, "stages")


@pytest.mark.parametrize("name", ["bert-base-inference", "bert-base-training"])
def test_dp_plans_of_bundled_bert_stream_at_max_load(name):
    problem = read_instance(ROOT / "instances" / f"{name}.json")
    result, evaluation = _dp_stream(problem)
    assert result.max_load == evaluation.max_load
    assert abs(result.time_per_sample / evaluation.max_load - 1) <= TOLERANCE
    # the bottleneck device is busy the whole steady window, every device its load per sample
    width = result.span[1] - result.span[0]
    for stage in result.stages:
        report = evaluation.devices[stage.position]
        assert stage.busy / width == pytest.approx(report.load / evaluation.max_load, rel=TOLERANCE)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"published instances not found at {SHARED}")
@pytest.mark.parametrize("name", SMALL_SHARED)
def test_dp_plans_of_published_instances_stream_at_max_load(name):
    result, evaluation = _dp_stream(read_instance(SHARED / f"{name}.json"))
    assert abs(result.time_per_sample / evaluation.max_load - 1) <= TOLERANCE
    assert not any("steady state" in note for note in result.notes)


def test_short_runs_say_so():
    problem = read_instance(TINY / "diamond-cpu.json")
    result = simulate(problem, diamond_plan(), "stream", 2)
    assert result.time_per_sample is None and result.steady_window is None
    assert result.notes == ("a steady state needs at least 3 micro-batches",
                            "the run may be too short for a steady state: use at least 4 x 3 stages "
                            "= 12 micro-batches",
                            "some tensor sizes are missing from the instance: activation memory is unknown there")
    # x and y feed t without a tensor size: unknown; t has no out-edges, so only its weight (1)
    assert [s.peak_memory for s in result.stages] == [None, None, 1.0]


def _same_figures(kept, streamed):
    """The streamed run reports what the run with the task table reports (which the event engine ran)."""
    assert len(streamed.tasks) == 0
    for field in ("makespan", "time_per_sample", "iteration_time", "steady_window", "period", "span", "notes"):
        expected, got = getattr(kept, field), getattr(streamed, field)
        if isinstance(expected, float):
            assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9), field
        elif isinstance(expected, tuple) and expected and isinstance(expected[0], float):
            assert all(math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-9) for g, e in zip(got, expected)), field
        else:
            assert got == expected, field
    assert math.isclose(streamed.bubble_fraction, kept.bubble_fraction, rel_tol=1e-9, abs_tol=1e-9)
    for a, b in zip(kept.stages, streamed.stages):
        assert math.isclose(b.busy, a.busy, rel_tol=1e-9, abs_tol=1e-9)
        assert (b.peak_in_flight, b.peak_memory, b.task_times) == (a.peak_in_flight, a.peak_memory, a.task_times)


@given(data=st.data(), microbatches=st.sampled_from([1, 2, 5, 40, 300]))
@settings(max_examples=80)
def test_streamed_figures_equal_the_event_engine(data, microbatches):
    training = data.draw(st.booleans())
    problem = data.draw(problems(training=training))
    plan = data.draw(colour_respecting_plans(problem))
    assume(evaluate(problem, plan, "stages").valid)
    schedule = "1f1b-async" if problem.is_training else "stream"
    _same_figures(simulate(problem, plan, schedule, microbatches),
                  simulate(problem, plan, schedule, microbatches, keep_tasks=False))


@pytest.mark.skipif(not SHARED.is_dir(), reason="published instances not available")
@pytest.mark.parametrize("name", ["LayerGraphs/gnmt_inference", "LayerGraphs/bert24_training"])
def test_streamed_figures_of_published_dp_plans(name):
    # Long enough (3,000 micro-batches) that the streamed run goes through the compiled kernel.
    problem = read_instance(SHARED / f"{name}.json")
    plan = solve_dp(problem).plan
    schedule = "1f1b-async" if problem.is_training else "stream"
    _same_figures(simulate(problem, plan, schedule, 3000), simulate(problem, plan, schedule, 3000, keep_tasks=False))


def test_streamed_figures_of_a_zero_time_stage():
    # One node taking no time on one accelerator: every F starts and ends at 0. Counted in the stage's
    # order, it holds each micro-batch during its F, one at a time (peak 1; counted over time, a
    # micro-batch held for no time was not held, and the peak was 0); the makespan is 0, and the
    # streamed run must not fall back to the event engine.
    problem = Instance((Node(1, "a", (0.0,), 0.0, False, None, 0.0),), (), (DeviceType("accelerator", 1),))
    plan = Plan((DeviceAssignment("accelerator", (1,)),))
    streamed = simulate(problem, plan, "stream", 500, keep_tasks=False)
    _same_figures(simulate(problem, plan, "stream", 500), streamed)
    assert streamed.makespan == 0.0 and streamed.stages[0].peak_in_flight == 1


def test_a_run_the_ring_cannot_hold_still_comes_back_without_tasks():
    # Found by the property test above: one accelerator holds every training node that it supports,
    # all of them but one taking no time, and the CPU holds the rest. Over 300 micro-batches the
    # streamed evaluation's ring cannot hold the run, so it goes through the event engine; asked for
    # the figures only, it still returns no task table, and the figures are the engine's.
    nodes = (Node(1, "f0", (0.25, 0.0), colour=1000), Node(3, "f1", (0.0, 0.0), colour=1000),
             Node(5, "f2", (0.0, 0.0), colour=2), Node(7, "f3", (None, 0.0), colour=3),
             Node(9, "b4", (0.0, 0.0), backward=True, colour=1000), Node(11, "b5", (0.0, 0.0), backward=True, colour=2),
             Node(13, "b6", (None, 0.0), backward=True, colour=3))
    problem = Instance(nodes, (Edge(3, 9), Edge(5, 11), Edge(7, 13)),
                       (DeviceType("accelerator", 1), DeviceType(CPU, 1, math.inf, False)))
    plan = Plan((DeviceAssignment("accelerator", (1, 3, 9, 5, 11)), DeviceAssignment(CPU, (7, 13))))
    assert evaluate(problem, plan, "stages").valid
    kept = simulate(problem, plan, "1f1b-async", 300)
    assert len(kept.tasks) == 1200     # 300 micro-batches x (F, B) x 2 stages
    _same_figures(kept, simulate(problem, plan, "1f1b-async", 300, keep_tasks=False))


@pytest.mark.parametrize("chunk", [1, 7, 119, 120])
def test_a_run_paused_in_chunks_gives_the_same_figures_and_reports_progress(monkeypatch, chunk):
    # The streamed evaluation of a long run returns every `chunk` tasks to report progress and goes
    # on from where it stopped: the figures are those of one uninterrupted run (the event engine's).
    # diamond-cpu streamed: 3 stages x 40 micro-batches = 120 tasks, one pass.
    from placement.simulation import streaming

    monkeypatch.setattr(streaming, "CHUNK", chunk)
    monkeypatch.setattr(streaming, "REPORT_EVERY_S", 0.0)
    problem = read_instance(TINY / "diamond-cpu.json")
    lines: list[str] = []
    streamed = simulate(problem, diamond_plan(), "stream", 40, keep_tasks=False, progress=lines.append)
    _same_figures(simulate(problem, diamond_plan(), "stream", 40), streamed)
    # the pass pauses after chunk, 2·chunk, ... tasks, as long as tasks are left
    assert [int(line.split()[1].replace(",", "")) for line in lines] == list(range(chunk, 120, chunk))
    assert all(line.startswith("simulated ") and " of 120 tasks, " in line and line.endswith(" left")
               for line in lines)


@pytest.mark.parametrize("chunk", [1, 7, 333])
def test_a_paused_training_run_whose_first_stage_runs_ahead_stays_streamed(monkeypatch, chunk):
    """Four layers whose backward edges run forward (b0 -> b1 -> b2 -> b3, as in the published layer
    graphs), one per device: stage 0 waits on nothing downstream and runs ahead as far as the ring
    allows. A pass resumed at stage 0 after a pause let it evict a micro-batch the last stage, stopped
    between a B and its next F, had not counted as released: the ring could not hold the run, which
    fell back to the event engine (memory growing with the micro-batches; every run past 2^22 tasks of
    a published training graph). A limit of 100 kB, which the streamed run's tables meet (8 tasks of 80
    ring slots, twice 8 bytes each, both passes: 20,480 bytes), refuses any run through the engine (8 tasks
    of 200 micro-batches at 400 bytes: 640 kB)."""
    from placement.simulation import streaming

    nodes = tuple(Node(i, f"f{i}", (1.0 + i % 2,), colour=i) for i in range(4)) + \
        tuple(Node(10 + i, f"b{i}", (2.0,), backward=True, colour=i) for i in range(4))
    edges = tuple(Edge(i, i + 1) for i in range(3)) + tuple(Edge(10 + i, 11 + i) for i in range(3)) + \
        tuple(Edge(i, 10 + i) for i in range(4))
    problem = Instance(nodes, edges, (DeviceType("accelerator", 4),))
    plan = Plan(tuple(DeviceAssignment("accelerator", (i, 10 + i)) for i in range(4)))
    whole = simulate(problem, plan, "1f1b-async", 200)
    monkeypatch.setattr(streaming, "CHUNK", chunk)
    streamed = simulate(problem, plan, "1f1b-async", 200, keep_tasks=False, memory_limit=100_000)
    _same_figures(whole, streamed)
    assert streamed.time_per_sample == 4.0   # stages 1 and 3: F 2 + B 2


def test_a_streamed_run_past_its_memory_limit_is_refused_before_it_starts():
    """The streamed figures keep a ring of micro-batches per stage count (4 · (3 + window) + 64 of them here)
    times the tasks of one: their tables grow with the square of the stages (4,000 stages took 2.1 GB
    past a 100 MB limit). The diamond's three stages fit a few kilobytes, not 100 bytes."""
    from placement.errors import LimitExceededError

    problem = read_instance(TINY / "diamond-cpu.json")
    assert simulate(problem, diamond_plan(), "stream", 40, keep_tasks=False).time_per_sample == 9.0
    with pytest.raises(LimitExceededError) as refused:
        simulate(problem, diamond_plan(), "stream", 40, keep_tasks=False, memory_limit=100)
    assert refused.value.parameter == "memory_limit"
    assert str(refused.value).startswith("the run of 3 stages keeps 3 tasks of each of the micro-batches a steady "
                                         "state holds: ")


def test_a_run_over_the_memory_limit_for_its_task_table_names_keep_tasks_where_it_would_stream():
    """A steady-state run with communication inline on the heap engine keeps its tasks only where asked to:
    the refusal of a task table past ``memory_limit`` names ``keep_tasks=False``, which runs the same figures
    in memory independent of the micro-batches. Where the figures need the task table anyway (a flush
    schedule, links) the refusal does not name it."""
    import placement
    from placement.errors import LimitExceededError

    problem = read_instance(TINY / "diamond-cpu.json")
    refusal = ("1,000 micro-batches of 3 tasks each would take about 0.00112 GiB, over the limit memory_limit = "
               "9.31e-05 GiB; at most 83 micro-batches fit (a steady state needs about 12), or raise memory_limit")
    with pytest.raises(LimitExceededError) as refused:
        placement.simulate(problem, diamond_plan(), microbatches=1000, memory_limit=100_000)
    assert refused.value.parameter == "memory_limit"
    assert str(refused.value) == (refusal + ", or keep the figures only with keep_tasks=False (no task table), "
                                  "in memory independent of the micro-batches")
    assert placement.simulate(problem, diamond_plan(), microbatches=1000, memory_limit=100_000,
                              keep_tasks=False).time_per_sample == 9.0
    with pytest.raises(LimitExceededError) as refused:   # links: every run keeps its tasks
        placement.simulate(problem, diamond_plan(), microbatches=1000, memory_limit=100_000, comm="link",
                           keep_tasks=False)
    assert "keep_tasks" not in str(refused.value)
    assert str(refused.value).endswith("or raise memory_limit")
