"""Pipeline schedules against closed forms on uniform stages, hand-worked runs and, on uneven stages, every task.

Uniform stages: S accelerators, stage i holds forward node f_i (time f) and its backward
mate b_i (time b), a chain f_0 -> ... -> f_{S-1} -> b_{S-1} -> ... -> b_0 with activation
edges f_i -> b_i and no transfer cost. Known closed forms (m micro-batches):
GPipe iteration (m + S - 1)(f + b), bubble fraction (S - 1)/(m + S - 1), m micro-batches in
flight on every stage; 1F1B with flush the same iteration with min(S - i, m) in flight on
stage i.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import placement

from placement.io.tarnawski import read_instance
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.simulation import simulate
from placement.simulation.schedules import SCHEDULES, get_schedule, stage_order
from placement.verification.evaluate import evaluate

from tests.strategies import colour_respecting_plans, problems

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"


def uniform_pipeline(stages: int, forward, backward, cost: float = 0.0):
    """The uniform problem described in the module docstring and its one-stage-per-device plan.

    ``forward`` and ``backward`` are a number (every stage) or a list (per stage).
    """
    fs = forward if isinstance(forward, list) else [forward] * stages
    bs = backward if isinstance(backward, list) else [backward] * stages
    nodes, edges = [], []
    for i in range(stages):
        nodes.append(Node(id=i, name=f"f{i}", times=(fs[i], 100.0), memory=1.0, colour=i, out_cost=cost))
        nodes.append(Node(id=100 + i, name=f"b{i}", times=(bs[i], 100.0), memory=0.0, backward=True, colour=i,
                          out_cost=cost))
        edges.append(Edge(i, 100 + i, size=8.0))
        if i + 1 < stages:
            edges.append(Edge(i, i + 1, size=8.0))
            edges.append(Edge(100 + i + 1, 100 + i))
    problem = make_two_type_problem(nodes, edges, stages, 0, math.inf, name=f"uniform-{stages}")
    plan = Plan(tuple(DeviceAssignment("accelerator", (i, 100 + i)) for i in range(stages)))
    return problem, plan


GRID = [(s, m) for s in (1, 2, 3, 4, 6) for m in (1, 2, 3, 5, 8)]


@pytest.mark.parametrize("stages, m", GRID)
@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.5, 1.5), (0.75, 2.25)])
def test_gpipe_closed_form(stages, m, f, b):
    problem, plan = uniform_pipeline(stages, f, b)
    result = simulate(problem, plan, "gpipe", m)
    assert result.iteration_time == pytest.approx((m + stages - 1) * (f + b), rel=1e-12)
    assert result.time_per_sample == pytest.approx(result.iteration_time / m, rel=1e-12)
    assert result.bubble_fraction == pytest.approx((stages - 1) / (m + stages - 1), rel=1e-9, abs=1e-12)
    assert [s.peak_in_flight for s in result.stages] == [m] * stages


@pytest.mark.parametrize("stages, m", GRID)
@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.5, 1.5), (0.75, 2.25)])
def test_1f1b_flush_closed_form(stages, m, f, b):
    problem, plan = uniform_pipeline(stages, f, b)
    result = simulate(problem, plan, "1f1b-flush", m)
    assert result.iteration_time == pytest.approx((m + stages - 1) * (f + b), rel=1e-12)
    assert [s.peak_in_flight for s in result.stages] == [min(stages - i, m) for i in range(stages)]
    # activations: 8 bytes (the output of f_i) per micro-batch in flight, on top of 1 byte of weights
    assert [s.peak_memory for s in result.stages] == [1.0 + 8.0 * min(stages - i, m) for i in range(stages)]


def test_stage_orders():
    one_f_one_b = get_schedule("1f1b-flush")
    # stage 0 of 3 with 4 micro-batches: 2 warm-up forwards, then F2 B0 F3 B1, then B2 B3
    assert stage_order(one_f_one_b, 0, 3, 4) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1),
                                                 ("B", 2), ("B", 3)]
    assert stage_order(one_f_one_b, 2, 3, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]
    assert stage_order(one_f_one_b, 0, 5, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert stage_order(get_schedule("gpipe"), 1, 3, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert stage_order(get_schedule("stream"), 1, 3, 3) == [("F", 0), ("F", 1), ("F", 2)]


def test_a_schedule_runs_the_order_it_states_not_one_its_name_implies():
    """A schedule registered under a new name ran 1F1B's order (only 'gpipe' by name ran fill and drain);
    the order is now a field every schedule states, and one that contradicts its graphs is refused."""
    from dataclasses import replace

    from placement.errors import InvalidParameterError
    from placement.simulation.schedules import Schedule

    drain = replace(get_schedule("gpipe"), name="fill-then-drain")
    assert stage_order(drain, 0, 3, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert not drain.weight_calls_in_order and get_schedule("1f1b-flush").weight_calls_in_order
    assert not get_schedule("split-backward").weight_calls_in_order   # its W calls fill idle time
    with pytest.raises(InvalidParameterError, match="^order of schedule 'odd' must be one of stream, fill-drain, "
                                                    "1f1b, 'stream' exactly where it does not train, not 'stream'$"):
        Schedule("odd", True, True, False, "stream", "a training schedule that streams")


def test_training_pair_by_hand():
    """instances/tiny/training-pair.json: f1 (2) -> f2 (3) -> b2 (6) -> b1 (4), f1 -> b1; costs
    c(f1) = 1, c(f2) = 0.5, c(b2) = 1.5. Plan: device 0 {f1, b1}, device 1 {f2, b2}.

    Device 0: F = 2 + send f1 (1) = 3; B = receive b2 (1.5) + 4 = 5.5; load 8.5.
    Device 1: F = receive f1 (1) + 3 = 4; B = 6 + send b2 (1.5) = 7.5; load 11.5.
    GPipe, m = 2: d0 F0 [0,3] F1 [3,6]; d1 F0 [3,7] F1 [7,11] B0 [11,18.5] B1 [18.5,26];
    d0 B0 [18.5,24] B1 [26,31.5]: iteration 31.5.
    1F1B-flush, m = 2: d0 F0 [0,3] F1 [3,6]; d1 F0 [3,7] B0 [7,14.5] F1 [14.5,18.5] B1 [18.5,26];
    d0 B0 [14.5,20] B1 [26,31.5]: iteration 31.5; in flight d0 2, d1 1.
    Split-backward, W = half the backward compute: d0 B = 1.5 + 2 = 3.5, W = 2; d1 B = 3 + 1.5
    = 4.5, W = 3. d1 F0 [3,7] B0 [7,11.5] F1 [11.5,15.5] B1 [15.5,20] W0 [20,23] W1 [23,26];
    d0 F0 [0,3] F1 [3,6] (idle, nothing to fill) B0 [11.5,15] W0 [15,17] B1 [20,23.5]
    W1 [23.5,25.5]: iteration 26.
    """
    problem = read_instance(TINY / "training-pair.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    gpipe = simulate(problem, plan, "gpipe", 2)
    assert gpipe.iteration_time == 31.5
    assert [s.task_times for s in gpipe.stages] == [{"F": 3.0, "B": 5.5}, {"F": 4.0, "B": 7.5}]
    flush = simulate(problem, plan, "1f1b-flush", 2)
    assert flush.iteration_time == 31.5
    assert [s.peak_in_flight for s in flush.stages] == [2, 1]
    assert [s.busy for s in flush.stages] == [17.0, 23.0]
    assert flush.bubble_fraction == pytest.approx(1 - 40 / 63)
    split = simulate(problem, plan, "split-backward", 2)
    assert split.iteration_time == 26.0 < flush.iteration_time
    assert [s.task_times for s in split.stages] == [{"F": 3.0, "B": 3.5, "W": 2.0}, {"F": 4.0, "B": 4.5, "W": 3.0}]
    runs = {(t.stage, t.kind, t.microbatch): (t.start, t.end) for t in split.tasks}
    assert runs[(0, "W", 0)] == (15.0, 17.0) and runs[(0, "B", 1)] == (20.0, 23.5)
    assert runs[(1, "F", 1)] == (11.5, 15.5) and runs[(1, "W", 1)] == (23.0, 26.0)
    # W of micro-batch 0 keeps its activations on device 1 until 23: 2 in flight there
    assert [s.peak_in_flight for s in split.stages] == [2, 2]


def test_one_microbatch_link_mode_runs_every_transfer_in_sequence():
    """training-pair, one micro-batch, communication on links: d0 compute 2, d0 link sends f1
    [2,3], d1 link receives [3,4], d1 computes F and B [4,13], sends b2 [13,14.5], d0 link
    receives [14.5,16], d0 computes B [16,20]. Inline: 3 + 4 + 7.5 + 5.5 = 20 as well."""
    problem = read_instance(TINY / "training-pair.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    link = simulate(problem, plan, "gpipe", 1, comm="link")
    runs = sorted((t.start, t.end, t.stage, t.kind) for t in link.tasks)
    assert runs == [(0, 2, 0, "F"), (2, 3, 0, "send"), (3, 4, 1, "recv"), (4, 7, 1, "F"), (7, 13, 1, "B"),
                    (13, 14.5, 1, "send"), (14.5, 16, 0, "recv"), (16, 20, 0, "B")]
    assert simulate(problem, plan, "gpipe", 1).iteration_time == 20.0


def test_a_transfer_that_costs_nothing_takes_no_turn_on_the_link():
    """f0 (3) -> f1 (1) -> b1 (1) -> b0 (1), f0 -> b0; c(f0) = 0, c(b1) = 2; device 0 {f0, b0}, device 1
    {f1, b1}; 1F1B-flush, 2 micro-batches, communication on links. f0's tensor costs nothing: no send on
    device 0, no receive on device 1. d0 F0 [0,3] F1 [3,6]; d1 F0 [3,4] B0 [4,5], its link sends b1
    [5,7]; d1 F1 starts when d0's F1 ends, at 6, though its link is busy until 7: F1 [6,7] B1 [7,8],
    send [8,10]; d0 link receives [7,9] and [10,12], B0 [9,10] B1 [12,13]: iteration 13 (14 if F1 took
    a turn on the link after the send)."""
    nodes = [Node(0, "f0", (3.0, None), colour=0), Node(1, "f1", (1.0, None), colour=1),
             Node(2, "b1", (1.0, None), backward=True, colour=1, out_cost=2.0),
             Node(3, "b0", (1.0, None), backward=True, colour=0)]
    edges = [Edge(0, 1), Edge(0, 3), Edge(1, 2), Edge(2, 3)]
    problem = make_two_type_problem(nodes, edges, 2, 0, math.inf, name="free-forward")
    plan = Plan((DeviceAssignment("accelerator", (0, 3)), DeviceAssignment("accelerator", (1, 2))))
    run = simulate(problem, plan, "1f1b-flush", 2, comm="link")
    runs = sorted((t.stage, t.start, t.end, t.kind, t.microbatch) for t in run.tasks)
    assert runs == [(0, 0, 3, "F", 0), (0, 3, 6, "F", 1), (0, 7, 9, "recv", 0), (0, 9, 10, "B", 0),
                    (0, 10, 12, "recv", 1), (0, 12, 13, "B", 1),
                    (1, 3, 4, "F", 0), (1, 4, 5, "B", 0), (1, 5, 7, "send", 0), (1, 6, 7, "F", 1),
                    (1, 7, 8, "B", 1), (1, 8, 10, "send", 1)]
    assert run.iteration_time == 13.0


def test_split_backward_is_strictly_shorter_on_uniform_stages():
    # 4 uniform stages, f = 1, b = 2 (B 1 + W 1), 8 micro-batches: 1F1B-flush takes (8 + 3) x 3 = 33;
    # W tasks fill the cool-down, so split-backward ends earlier.
    problem, plan = uniform_pipeline(4, 1.0, 2.0)
    flush = simulate(problem, plan, "1f1b-flush", 8)
    split = simulate(problem, plan, "split-backward", 8)
    assert flush.iteration_time == 33.0
    assert split.iteration_time < 33.0
    assert split.bubble_fraction < flush.bubble_fraction


def test_w_fraction_zero_is_1f1b_flush_and_one_moves_all_backward_compute():
    problem, plan = uniform_pipeline(3, 1.0, 2.0)
    flush = simulate(problem, plan, "1f1b-flush", 5)
    none_split = simulate(problem, plan, "split-backward", 5, w_fraction=0.0)
    assert none_split.iteration_time == flush.iteration_time
    all_split = simulate(problem, plan, "split-backward", 5, w_fraction=1.0)
    assert all(s.task_times == {"F": 1.0, "B": 0.0, "W": 2.0} for s in all_split.stages)


def test_w_tasks_take_the_weight_gradient_times_the_instance_gives():
    """3 uniform stages, f = 1, b = 2; backward nodes that give a weight-gradient time of 0.5 (W 0.5,
    B 1.5) run as such without a w_fraction; given one, it wins; a stage whose backward node gives
    none falls back to half its backward compute."""
    from dataclasses import replace

    problem, plan = uniform_pipeline(3, 1.0, 2.0)
    weighted = replace(problem, nodes=tuple(replace(n, weight_times=(0.5, 25.0)) if n.backward else n
                                            for n in problem.nodes))
    run = simulate(weighted, plan, "split-backward", 5)
    assert all(s.task_times == {"F": 1.0, "B": 1.5, "W": 0.5} for s in run.stages)
    assert (run.w_fraction, run.w_times) == (0.25, True)
    given = simulate(weighted, plan, "split-backward", 5, w_fraction=0.5)
    assert all(s.task_times == {"F": 1.0, "B": 1.0, "W": 1.0} for s in given.stages) and not given.w_times
    assert simulate(problem, plan, "split-backward", 5).stages[0].task_times == {"F": 1.0, "B": 1.0, "W": 1.0}
    one = replace(problem, nodes=tuple(replace(n, weight_times=(0.5, 25.0)) if n.id == 100 else n
                                       for n in problem.nodes))
    mixed = simulate(one, plan, "split-backward", 5)
    assert [s.task_times["W"] for s in mixed.stages] == [0.5, 1.0, 1.0]
    assert mixed.w_fraction == pytest.approx(2.5 / 6) and mixed.w_times
    assert mixed.notes[-1] == ("stages whose backward nodes do not all give a weight-gradient time split their "
                               "backward compute 0.5 to W")


def test_a_stage_without_backward_nodes_gives_no_weight_gradient_times():
    """f0 (1) -> f1 (2) -> b1 (4) -> b0 (2), f0 -> b0, no colour classes, no transfer costs, no
    weight-gradient times: device 0 holds f0, f1 (F 3, no backward nodes), device 1 b1, b0 (backward
    compute 6: B 3, W 3 at the default share 0.5). Device 0 gives no weight-gradient time either, so
    the run splits at 0.5 and says so (it used to read the empty stage as giving the instance's times).
    Split-backward, m = 2: stage 0 F0 [0, 3], F1 [3, 6]; stage 1 B0 [3, 6], B1 [6, 9], then its W tasks
    fill the rest: W0 [9, 12], W1 [12, 15]."""
    from placement.report.simulation import format_simulation

    def node(i, name, time, backward):
        return {"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": time, "cpuLatency": 9,
                "isBackwardNode": int(backward), "size": 1}
    problem = placement.load({
        "maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
        "nodes": [node(1, "f0", 1, False), node(2, "f1", 2, False), node(3, "b1", 4, True), node(4, "b0", 2, True)],
        "edges": [{"sourceId": a, "destId": b, "cost": 0} for a, b in ((1, 2), (2, 3), (3, 4), (1, 4))]})
    plan = Plan((DeviceAssignment("accelerator", (1, 2)), DeviceAssignment("accelerator", (3, 4))))
    run = simulate(problem, plan, "split-backward", 2)
    assert [s.task_times for s in run.stages] == [{"F": 3.0, "B": 0.0, "W": 0.0}, {"F": 0.0, "B": 3.0, "W": 3.0}]
    assert run.iteration_time == 15.0
    assert (run.w_fraction, run.w_times) == (0.5, False)
    assert not any("weight-gradient time" in note for note in run.notes)
    assert "weight grads    0.5 of each backward's compute runs as W tasks\n" in format_simulation(run)


@given(stages=st.integers(1, 5), m=st.integers(1, 9), data=st.data())
@settings(max_examples=150)
def test_split_backward_never_longer_than_1f1b_flush_on_uneven_stages(stages, m, data):
    quarters = st.integers(0, 16).map(lambda q: q / 4)
    fs = data.draw(st.lists(quarters, min_size=stages, max_size=stages))
    bs = data.draw(st.lists(quarters, min_size=stages, max_size=stages))
    cost = data.draw(quarters)
    fraction = data.draw(st.integers(0, 4)) / 4
    problem, plan = uniform_pipeline(stages, fs, bs, cost)
    flush = simulate(problem, plan, "1f1b-flush", m)
    split = simulate(problem, plan, "split-backward", m, w_fraction=fraction)
    assert split.iteration_time <= flush.iteration_time + 1e-9


@given(data=st.data(), m=st.integers(1, 7))
@settings(max_examples=150)
def test_split_backward_never_longer_than_1f1b_flush_on_random_plans(data, m):
    problem = data.draw(problems(training=True))
    plan = data.draw(colour_respecting_plans(problem))
    assume(problem.is_training and evaluate(problem, plan, "stages").valid)
    flush = simulate(problem, plan, "1f1b-flush", m)
    split = simulate(problem, plan, "split-backward", m, w_fraction=data.draw(st.integers(0, 4)) / 4)
    assert split.iteration_time <= flush.iteration_time + 1e-9


def test_schedule_names_and_flags():
    assert list(SCHEDULES) == ["stream", "1f1b-async", "gpipe", "1f1b-flush", "split-backward", "zb-h1", "zb-h2"]
    assert [s.flush for s in SCHEDULES.values()] == [False, False, True, True, True, True, True]
    assert [s.training for s in SCHEDULES.values()] == [False, True, True, True, True, True, True]


def test_a_memory_bound_on_an_early_stage_lowers_the_later_warm_ups_too():
    """A 3-stage training chain, every node taking 1 (B and W 0.5 each), no transfer cost, stage 0
    sending 100 bytes of activations per micro-batch and bound 102 beside node memory 2: it holds one
    micro-batch (L_0 = 1, no warm-up forward). Stage 1 kept its own warm-up forward, waiting for stage
    0's F(1), which stage 0 runs after B(0), which waits on stage 1: the run was refused as a
    deadlock. With no stage warming up more than the one before it, each micro-batch runs alone:
    three forwards (3), three B (1.5), then stage 0's W (0.5) before it admits the next: 5 per
    micro-batch, 6 micro-batches in 30."""
    def node(i, backward, colour):
        return {"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "isBackwardNode": backward,
                "colorClass": colour, "size": 1}

    chain = [(1, 2, 100), (2, 3, 1), (3, 13, 1), (13, 12, 1), (12, 11, 1)]
    instance = placement.load({"maxSizePerFPGA": 102, "maxFPGAs": 3, "maxCPUs": 0,
                               "nodes": [node(1, 0, 1), node(2, 0, 2), node(3, 0, 3), node(13, 1, 3),
                                         node(12, 1, 2), node(11, 1, 1)],
                               "edges": [{"sourceId": a, "destId": b, "cost": 0, "size": s} for a, b, s in chain]})
    plan = {"fpgas": [{"nodes": [1, 11]}, {"nodes": [2, 12]}, {"nodes": [3, 13]}], "cpus": []}
    result = placement.simulate(instance, plan, schedule="zb-h1", microbatches=6)
    assert result.iteration_time == 30.0
    assert [s.peak_in_flight for s in result.stages] == [1, 1, 1]
    assert placement.simulate(instance, plan, schedule="zb-h2", microbatches=6).stages[0].peak_in_flight == 1


def _decimal_memory_pair(unit: float, bound: float) -> tuple[placement.Instance, Plan]:
    """Two accelerators of memory ``bound``, f0 → f1 → b1 → b0 (times 1, no transfer cost): stage 0 holds
    node memory ``unit`` and ``unit`` bytes of activations per micro-batch (f0's output)."""
    nodes = (Node(0, "f0", (1.0,), memory=unit, colour=0), Node(1, "f1", (1.0,), colour=1),
             Node(2, "b1", (1.0,), backward=True, colour=1), Node(3, "b0", (1.0,), backward=True, colour=0))
    edges = (Edge(0, 1, size=unit), Edge(1, 2, size=0.0), Edge(2, 3, size=0.0), Edge(0, 3, size=unit))
    instance = placement.Instance(nodes, edges, (placement.DeviceType("accelerator", 2, memory=bound),))
    plan = Plan((DeviceAssignment("accelerator", (0, 3)), DeviceAssignment("accelerator", (1, 2))))
    return instance, plan


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2"])
def test_a_memory_bound_holds_what_fits_it_as_written(schedule):
    """Node memory 0.1 and 0.1 bytes of activations per micro-batch under a bound of 0.3 hold two
    micro-batches (0.1 + 2 · 0.1 = 0.3, the memory rule read on the numbers as written), as node memory 1,
    activations 1 and bound 3 do: 4 micro-batches in 9. In floating point (0.3 − 0.1) / 0.1 is
    1.9999999999999998, and the stage was let hold one: 14."""
    runs = [placement.simulate(*_decimal_memory_pair(unit, bound), schedule=schedule, microbatches=4, w_fraction=0.5)
            for unit, bound in ((1.0, 3.0), (0.1, 0.3))]
    assert [(run.iteration_time, run.stages[0].peak_in_flight) for run in runs] == [(9.0, 2), (9.0, 2)]


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2"])
def test_a_bound_that_holds_every_micro_batch_at_extreme_magnitudes_is_no_limit(schedule):
    """Activations of 1e-300 under a bound of 1e300, or of 1e-320 beside node memory 1 under 1e308: the bound
    holds more micro-batches than the schedule's own limit, so the run is the run without a bound. The
    quotient (bound − node memory) / activations overflowed to infinity, and the run raised OverflowError."""
    def pair(memory: float, activations: float, bound: float) -> tuple[placement.Instance, Plan]:
        instance, plan = _decimal_memory_pair(memory, bound)
        edges = tuple(Edge(e.src, e.dst, size=activations if e.size else 0.0) for e in instance.edges)
        return placement.Instance(instance.nodes, edges, instance.device_types), plan

    def figures(run) -> tuple:
        return run.iteration_time, [stage.peak_in_flight for stage in run.stages]

    free = figures(placement.simulate(*_decimal_memory_pair(1.0, math.inf), schedule=schedule, microbatches=6,
                                      w_fraction=0.5))
    for memory, activations, bound in ((1e-300, 1e-300, 1e300), (1.0, 1e-320, 1e308)):
        assert figures(placement.simulate(*pair(memory, activations, bound), schedule=schedule, microbatches=6,
                                          w_fraction=0.5)) == free


def test_a_bound_met_as_written_by_one_micro_batch_is_not_refused():
    """Node memory 0.5 and 0.2 bytes of activations under a bound of 0.7: one micro-batch fits (0.5 + 0.2 = 0.7 as
    written), so zb-h1 runs it one micro-batch at a time; (0.7 − 0.5) // 0.2 in floating point is 0, and the
    run was refused as holding none."""
    nodes = (Node(0, "f0", (1.0,), memory=0.5, colour=0), Node(1, "f1", (1.0,), colour=1),
             Node(2, "b1", (1.0,), backward=True, colour=1), Node(3, "b0", (1.0,), backward=True, colour=0))
    edges = (Edge(0, 1, size=0.2), Edge(1, 2, size=0.0), Edge(2, 3, size=0.0), Edge(0, 3, size=0.2))
    instance = placement.Instance(nodes, edges, (placement.DeviceType("accelerator", 2, memory=0.7),))
    plan = Plan((DeviceAssignment("accelerator", (0, 3)), DeviceAssignment("accelerator", (1, 2))))
    run = placement.simulate(instance, plan, schedule="zb-h1", microbatches=3, w_fraction=0.5)
    assert [s.peak_in_flight for s in run.stages] == [1, 1]


def test_a_peak_that_meets_the_bound_as_written_is_not_noted_as_over_it():
    """1F1B holds two micro-batches on stage 0 of the pair above: 0.1 + 2 · 0.1 meets the bound 0.3, though
    its floating-point sum is 0.30000000000000004; the run noted "peak memory 0.3 exceeds its bound 0.3"."""
    run = placement.simulate(*_decimal_memory_pair(0.1, 0.3), schedule="1f1b-flush", microbatches=4)
    assert run.stages[0].peak_in_flight == 2
    assert not any("exceeds" in note for note in run.notes)


def test_a_w_task_of_no_time_releases_its_micro_batch_before_the_next_forward():
    """training-pair (f1 2 | b1 4 on stage 0, f2 3 | b2 6 on stage 1; activations of 10, parameters of 1)
    under zb-h1 with the W share 0: stage 1's W(0) took no time and ended at 26.0, where F(2) starts,
    having waited for it (zb-h1 holds at most S = 2 micro-batches). Ordered by the schedule's rank, F(2)
    came first and the stage held 3: peak memory 2 + 3·10 = 32 (and "exceeds its bound 31"); counted in
    order it held 2 (22). A W call of no work is now no task at all: the last stage releases each
    micro-batch with its B, as under 1F1B, and holds 1: 2 + 10 = 12."""
    edges = [(1, 2, 1), (2, 3, 0.5), (3, 4, 1.5), (1, 4, 1)]
    instance = placement.load({"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
                               "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": 10 * t,
                                          "isBackwardNode": b, "colorClass": c, "size": 1}
                                         for i, t, b, c in ((1, 2, 0, 1), (2, 3, 0, 2), (3, 6, 1, 2), (4, 4, 1, 1))],
                               "edges": [{"sourceId": a, "destId": d, "cost": c, "size": 10} for a, d, c in edges]})
    plan = {"devices": [{"type": "accelerator", "nodes": [1, 4]}, {"type": "accelerator", "nodes": [2, 3]}]}
    result = placement.simulate(instance, plan, schedule="zb-h1", microbatches=8, w_fraction=0)
    assert [(s.peak_in_flight, s.peak_memory) for s in result.stages] == [(2, 22.0), (1, 12.0)]


@pytest.mark.parametrize("schedule, limit", [("zb-h1", 3), ("zb-h2", 5)])
def test_a_zero_time_first_stage_holds_no_more_than_its_schedule_allows(schedule, limit):
    """A 3-stage chain whose first stage's F and B take no time (stages 1 and 2: 1 each, no transfers), 12
    micro-batches: zb-h1 admits at most S = 3 micro-batches per stage, zb-h2 2S − 1 = 5. On stage 0 the
    W of micro-batch j − L, of no time, ends at the moment F(j) starts, having been waited for; counted
    with W after every main task of that moment, stage 0 held one more than allowed (4 and 6). A single
    stage of tasks of no time held all 12 (limit 1 under both)."""
    def chain(stages: int) -> dict:
        times = [0] + [1] * (stages - 1)
        nodes = [{"id": i + 1, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": t, "isBackwardNode": 0,
                  "colorClass": i, "size": 1} for i, t in enumerate(times)]
        nodes += [{"id": 100 + i, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": t, "isBackwardNode": 1,
                   "colorClass": i, "size": 1} for i, t in enumerate(times)]
        edges = [(i + 1, i + 2) for i in range(stages - 1)] + [(stages, 99 + stages)]
        edges += [(100 + i + 1, 100 + i) for i in range(stages - 1)]
        return {"maxSizePerFPGA": 1000, "maxFPGAs": stages, "maxCPUs": 0, "nodes": nodes,
                "edges": [{"sourceId": a, "destId": b, "cost": 0, "size": 1} for a, b in edges]}

    plan = {"fpgas": [{"nodes": [i + 1, 100 + i]} for i in range(3)], "cpus": []}
    result = placement.simulate(chain(3), plan, schedule=schedule, microbatches=12)
    assert [s.peak_in_flight for s in result.stages] == [limit] * 3
    single = placement.simulate(chain(1), {"fpgas": [{"nodes": [1, 100]}], "cpus": []}, schedule=schedule,
                                microbatches=12)
    assert single.stages[0].peak_in_flight == 1


def test_utilisation_and_bubbles_stay_within_their_range():
    """One stage of F = B = 0.1 under GPipe, 7 micro-batches: busy the whole iteration. Summed task by
    task, its busy time exceeded the span by a rounding error: utilisation 1.0000000000000002 and
    bubble fraction -2.2e-16 (printed as -0.00%)."""
    from placement.problem.instance import DeviceType, Edge, Instance, Node

    problem = Instance((Node(0, "f", (0.1,), colour=0), Node(1, "b", (0.1,), backward=True, colour=0)),
                       (Edge(0, 1),), (DeviceType("accelerator", 1),))
    result = simulate(problem, Plan((DeviceAssignment("accelerator", (0, 1)),)), "gpipe", 7)
    assert (result.stages[0].utilisation, result.bubble_fraction) == (1.0, 0.0)


def uneven_chain(training: bool):
    """Four accelerator stages of uneven forward (and backward) times, 0.3 to send each output."""
    forward, backward = [1.0, 1.4, 0.7, 1.2], [2.0, 1.1, 2.6, 1.9]
    nodes = [Node(id=i, name=f"f{i}", times=(forward[i], 100.0), colour=i, out_cost=0.3) for i in range(4)]
    edges = [Edge(i, i + 1) for i in range(3)]
    if training:
        nodes += [Node(id=10 + i, name=f"b{i}", times=(backward[i], 100.0), backward=True, colour=i, out_cost=0.3)
                  for i in range(4)]
        edges += [Edge(i, 10 + i) for i in range(4)] + [Edge(10 + i + 1, 10 + i) for i in range(3)]
    problem = make_two_type_problem(nodes, edges, 4, 0, math.inf, name="uneven")
    plan = Plan(tuple(DeviceAssignment("accelerator", (i, 10 + i) if training else (i,)) for i in range(4)))
    return problem, plan


def test_a_short_balanced_run_is_not_charged_its_drain():
    """chain4 split into two stages of load 7.5, 5 micro-batches streamed: every stage is busy in the
    steady state. Measured as the time busy within [c[2], c[4]], stage 0 read 50% and the bubble 25%:
    stage 0 had nothing left to run after micro-batch 4 started on stage 1."""
    problem = read_instance(TINY / "chain4.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 2)), DeviceAssignment("accelerator", (3, 4))))
    result = simulate(problem, plan, "stream", 5)
    assert result.time_per_sample == 7.5
    assert [s.utilisation for s in result.stages] == [1.0, 1.0]
    assert result.bubble_fraction == 0.0


@pytest.mark.parametrize("keep_tasks", [True, False])
def test_a_window_without_a_period_is_measured_as_it_ran(keep_tasks):
    """Uniform 2-stage pipeline, F = (9.5, 1.5), B = (4.5, 2), 1F1B over 5 micro-batches. Stage 0 runs F0 [0, 9.5],
    F1 [9.5, 19], B0 [19, 23.5] (after stage 1's B0 at 13), F2 [23.5, 33], B1 [33, 37.5], F3 [37.5, 47],
    B2 [47, 51.5], F4 [51.5, 61], B3 [61, 65.5], B4 [65.5, 70]; stage 1 runs F4 [61, 62.5] and B4 [62.5, 64.5]
    within the window. Completions 51.5, 65.5, 70: no period, an average slope of 9.25, below the load
    model's 14 (the run has not settled). Over [51.5, 70] stage 0 is busy 18.5 (100%) and stage 1 3.5.
    Counted as 2 micro-batches of work, stage 0 was charged 28, more than the span, and shown at 100% as if
    that were its share."""
    problem, plan = uniform_pipeline(2, [9.5, 1.5], [4.5, 2.0])
    run = simulate(problem, plan, "1f1b-async", 5, keep_tasks=keep_tasks)
    assert (run.steady_window, run.span, run.period, run.time_per_sample) == ((2, 4), (51.5, 70.0), None, 9.25)
    assert [stage.busy for stage in run.stages] == [18.5, 3.5]
    assert [stage.utilisation for stage in run.stages] == [1.0, 3.5 / 18.5]
    assert run.bubble_fraction == pytest.approx(1 - 22 / 37, rel=1e-12)
    assert run.notes[0].startswith("not settled within micro-batches 2..4: they complete every 9.25, faster")


@pytest.mark.parametrize("comm", ["inline", "link"])
@pytest.mark.parametrize("training", [False, True])
def test_steady_utilisation_is_the_work_per_microbatch_over_the_time_per_sample(training, comm):
    """Whatever the run's length, once it settles into a period its utilisations are the stages' work per
    micro-batch over the time per sample, as a long run's are. Measured as the time busy within
    [c[a], c[b]], a window ending fewer than S micro-batches before the drain undercounted the first
    stages, and one that was no whole number of periods misread every stage."""
    problem, plan = uneven_chain(training)
    schedule = "1f1b-async" if training else "stream"
    long = simulate(problem, plan, schedule, 400, comm=comm)
    settled = [run for run in (simulate(problem, plan, schedule, m, comm=comm) for m in range(16, 48))
               if run.period is not None]
    assert len(settled) >= 25   # periods 1 (every run but training with links) and 4 (25 of its runs)
    for run in settled:
        m = run.microbatches
        assert run.time_per_sample == pytest.approx(long.time_per_sample, rel=1e-12)
        for stage, steady in zip(run.stages, long.stages):
            work = sum(stage.task_times.values())
            assert stage.utilisation == pytest.approx(work / run.time_per_sample, rel=1e-9), (m, stage.index)
            assert stage.utilisation == pytest.approx(steady.utilisation, rel=1e-9)
            if comm == "link":
                assert stage.link_utilisation == pytest.approx(steady.link_utilisation, rel=1e-9)
        busiest = sum(sum(stage.task_times.values()) for stage in run.stages)
        assert run.bubble_fraction == pytest.approx(1 - busiest / (4 * run.time_per_sample), rel=1e-9)


@pytest.mark.parametrize("time", [0.0, 1.0])
def test_a_stage_whose_tasks_take_no_time_holds_what_its_order_keeps(time):
    """One stage, f -> b (f's output 10 bytes, node memory 1 + 1), GPipe over 4 micro-batches: the four
    forwards run before the first backward, so the stage holds 4 micro-batches, 2 + 4 x 10 = 42 bytes,
    whatever the tasks last. Counted over time, tasks of no length held nothing (0 in flight, 2 bytes)."""
    from placement.problem.instance import DeviceType, Instance

    problem = Instance((Node(1, "f", (time,), memory=1.0, colour=1), Node(2, "b", (time,), memory=1.0, backward=True,
                                                                           colour=1)),
                       (Edge(1, 2, 10.0),), (DeviceType("accelerator", 1, 100.0),))
    result = simulate(problem, Plan((DeviceAssignment("accelerator", (1, 2)),)), "gpipe", 4)
    assert (result.stages[0].peak_in_flight, result.stages[0].peak_memory) == (4, 42.0)


def test_busy_time_is_the_tasks_lengths_at_any_scale():
    """f1, b1 of 1e9 on stage 0 and f2, b2 of 1e-6 and 2e-6 on stage 1, no transfer cost, 1F1B with a flush
    over 3 micro-batches: stage 1 runs 3 · (1e-6 + 2e-6) = 9e-6. Its tasks start near 1e9, where a difference
    end - start keeps a tenth of 1e-6 in rounding: the busy time read 8.70228e-06."""
    node = lambda i, name, t, back, colour: {"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": t,  # noqa: E731
                                             "cpuLatency": 10 * t, "isBackwardNode": back, "colorClass": colour,
                                             "size": 1}
    instance = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
                "nodes": [node(1, "f1", 1e9, 0, 1), node(2, "f2", 1e-6, 0, 2), node(3, "b2", 2e-6, 1, 2),
                          node(4, "b1", 1e9, 1, 1)],
                "edges": [{"sourceId": u, "destId": v, "cost": 0} for u, v in ((1, 2), (2, 3), (3, 4), (1, 4))]}
    plan = {"devices": [{"type": "accelerator", "nodes": [1, 4]}, {"type": "accelerator", "nodes": [2, 3]}]}
    run = placement.simulate(instance, plan, schedule="1f1b-flush", microbatches=3)
    assert [stage.busy for stage in run.stages] == [6e9, pytest.approx(9e-6, rel=1e-12)]


def documented_order(schedule: str, stages: int, i: int, m: int) -> list[tuple[str, int]]:
    """Stage ``i``'s tasks as the schedule table of docs/simulator.md states them (written out here, not taken
    from :mod:`placement.simulation.schedules`): all forwards then all backwards (GPipe), or
    ``min(S − i − 1, m)`` warm-up forwards, then a forward and a backward in turn, then the rest (1F1B)."""
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(stages - i - 1, m)
    order = [("F", j) for j in range(warm)]
    for j in range(warm, m):
        order += [("F", j), ("B", j - warm)]
    return order + [("B", j) for j in range(m - warm, m)]


def skip_chain(seed: int):
    """A training chain of 2–5 stages (f_i, b_i on stage i) with uneven times, transfer costs, forward skip
    edges f_i -> f_k (k > i + 1) mirrored by b_k -> b_i, and sometimes one stage on a CPU core; with the
    tasks' lengths by the load model (compute plus, on an accelerator, c(u) once per tensor u it sends or
    receives: a receive in the first task that reads it) and the stages each task reads from."""
    rng = random.Random(seed)
    stages = rng.randint(2, 5)
    forward = [float(rng.randint(1, 6)) for _ in range(stages)]
    backward = [float(rng.randint(1, 9)) for _ in range(stages)]
    cost = [rng.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(stages)]
    back_cost = [rng.choice([0.0, 0.5, 1.0]) for _ in range(stages)]
    links = [(i, i + 1) for i in range(stages - 1)]
    links += [(i, k) for i in range(stages) for k in range(i + 2, stages) if rng.random() < 0.4]
    cpu = rng.randrange(stages) if rng.random() < 0.4 else None
    nodes, edges = [], []
    for i in range(stages):
        times = (lambda t: (None, t) if i == cpu else (t, 100.0))   # noqa: E731
        nodes.append(Node(id=i, name=f"f{i}", times=times(forward[i]), colour=i, out_cost=cost[i]))
        nodes.append(Node(id=100 + i, name=f"b{i}", times=times(backward[i]), backward=True, colour=i,
                          out_cost=back_cost[i]))
        edges.append(Edge(i, 100 + i))
    for i, k in links:
        edges += [Edge(i, k), Edge(100 + k, 100 + i)]
    problem = make_two_type_problem(nodes, edges, stages - (cpu is not None), int(cpu is not None), math.inf,
                                    name=f"skip-chain-{seed}")
    plan = Plan(tuple(DeviceAssignment("cpu" if i == cpu else "accelerator", (i, 100 + i)) for i in range(stages)))
    feeds = [[i for i, k in links if k == s] for s in range(stages)]      # forward inputs of stage s
    fed_by = [[k for i, k in links if i == s] for s in range(stages)]     # backward inputs of stage s
    pays = [0.0 if s == cpu else 1.0 for s in range(stages)]
    f_len = [forward[s] + pays[s] * (sum(cost[i] for i in feeds[s]) + (cost[s] if fed_by[s] else 0.0))
             for s in range(stages)]
    b_len = [backward[s] + pays[s] * (sum(back_cost[k] for k in fed_by[s]) + (back_cost[s] if feeds[s] else 0.0))
             for s in range(stages)]
    return problem, plan, stages, f_len, b_len, feeds, fed_by


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b-flush", "1f1b-async"])
def test_every_task_starts_when_its_stage_and_inputs_allow_on_uneven_stages_with_skips(seed, schedule):
    """Every task's start and end against a recurrence written from the docs' model: a task starts at the
    end of its stage's previous task in the documented order or of its last input (a forward: the forwards
    of the stages feeding it; a backward: its own forward and the backwards of the stages it feeds)."""
    problem, plan, stages, f_len, b_len, feeds, fed_by = skip_chain(seed)
    m = random.Random(seed).randint(1, 9)
    end: dict[tuple[str, int, int], float] = {}
    expected = {}
    pending = {s: documented_order(schedule, stages, s, m) for s in range(stages)}
    free = [0.0] * stages
    while any(pending.values()):
        for s in range(stages):
            while pending[s]:
                kind, j = pending[s][0]
                inputs = ([("F", i, j) for i in feeds[s]] if kind == "F"
                          else [("F", s, j)] + [("B", k, j) for k in fed_by[s]])
                if any(key not in end for key in inputs):
                    break
                start = max([free[s]] + [end[key] for key in inputs])
                free[s] = end[(kind, s, j)] = start + (f_len[s] if kind == "F" else b_len[s])
                expected[(s, kind, j)] = (start, free[s])
                pending[s].pop(0)
    run = simulate(problem, plan, schedule, m)
    # every time is a sum of halves: exact in floating point
    assert {(t.stage, t.kind, t.microbatch): (t.start, t.end) for t in run.tasks} == expected
    assert run.makespan == max(free)
    assert run.max_load == max(f + b for f, b in zip(f_len, b_len))
