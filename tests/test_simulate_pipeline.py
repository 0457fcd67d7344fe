"""From a plan to pipeline stages: task costs add up to the verified loads; bad plans and
options fail with one clear message; the simulator stays independent of the solvers."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from placement.errors import InvalidParameterError
from placement.io.plans import read_plan
from placement.io.tarnawski import read_instance
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.simulation import simulate
from placement.simulation.pipeline import build_pipeline
from placement.verification.evaluate import evaluate

from tests.strategies import colour_respecting_plans, problems

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny"
SHARED = ROOT.parent / "shared" / "tarnawski"


def training_pair():
    problem = read_instance(TINY / "training-pair.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    return problem, plan


def test_training_pair_stages_by_hand():
    """f1 (2) -> f2 (3) -> b2 (6) -> b1 (4) and f1 -> b1; c(f1) = 1, c(b2) = 1.5.
    Device 0 {f1, b1} sends f1 in F and receives b2 for B (b1 reads it): F 2 + 1, B 1.5 + 4.
    Device 1 {f2, b2} receives f1 for F, sends b2 from B: F 1 + 3, B 6 + 1.5."""
    problem, plan = training_pair()
    pipeline = build_pipeline(problem, plan)
    first, second = pipeline.stages
    assert (first.compute, first.receive, first.send) == ({"F": 2, "B": 4}, {"F": 0, "B": 1.5}, {"F": 1, "B": 0})
    assert (second.compute, second.receive, second.send) == ({"F": 3, "B": 6}, {"F": 1, "B": 0}, {"F": 0, "B": 1.5})
    assert (first.load, second.load, pipeline.max_load) == (8.5, 11.5, 11.5)
    assert pipeline.inputs == {(0, "F"): (), (0, "B"): ((1, "B"),), (1, "F"): ((0, "F"),), (1, "B"): ()}


def test_plan_order_follows_the_pipeline_not_the_file():
    problem, plan = training_pair()
    reversed_plan = Plan(plan.devices[::-1])
    pipeline = build_pipeline(problem, reversed_plan)
    assert [s.position for s in pipeline.stages] == [1, 0]
    assert [s.nodes for s in pipeline.stages] == [(1, 4), (2, 3)]


@given(data=st.data())
@settings(max_examples=150)
def test_stage_tasks_add_up_to_the_verified_load(data):
    problem = data.draw(problems())
    plan = data.draw(colour_respecting_plans(problem))
    evaluation = evaluate(problem, plan, "stages")
    assume(evaluation.valid)
    pipeline = build_pipeline(problem, plan)
    for stage in pipeline.stages:
        report = evaluation.devices[stage.position]
        total = sum(stage.task_time(kind) for kind in ("F", "B"))
        assert math.isclose(total, report.load, rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(stage.comm, report.comm, rel_tol=1e-12, abs_tol=1e-12)
        if not stage.pays_comm:
            assert stage.comm == 0
        # sends go with the producing task, so the forward sends are the evaluator's forward comm
        # minus the forward-node receives that go with the backward task
        assert stage.compute["F"] + stage.send["F"] <= report.forward_load + 1e-12


def test_expert_split_simulates_at_its_verified_load():
    path = SHARED / "human-experts" / "bert24_training_expert.json"
    if not path.exists():
        pytest.skip(f"published expert splits not found at {path.parent}")
    problem = read_instance(SHARED / "throughput-inputs" / "LayerGraphs" / "bert24_training.json")
    plan = read_plan(path)
    pipeline = build_pipeline(problem, plan)
    assert sum(len(s.nodes) for s in pipeline.stages) == len(problem.nodes)
    result = simulate(problem, plan, "1f1b-async", 400)
    evaluation = evaluate(problem, plan, infer_from_colours=True)
    assert abs(result.time_per_sample / evaluation.max_load - 1) <= 1e-3


def test_invalid_plan_is_refused_with_the_first_violation():
    problem, _ = training_pair()
    plan = Plan((DeviceAssignment("accelerator", (1, 4, 2)), DeviceAssignment("accelerator", (2, 3))))
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, "gpipe", 2)
    assert str(info.value) == ("plan is not valid for this instance: node 2 is placed 2 times (devices 0, 1) "
                               "(and 1 more; verifying the plan lists them all)")
    assert info.value.parameter == "plan"


def test_plan_missing_a_node_names_it():
    problem = read_instance(TINY / "chain4.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 2)), DeviceAssignment("accelerator", (3,))))
    with pytest.raises(InvalidParameterError, match=r"^plan is not valid for this instance: node 4 is not placed$"):
        simulate(problem, plan, "stream", 4)


def test_a_plan_that_is_not_a_pipeline_is_refused():
    # chain4 a -> b -> c -> d with {a, c} on one device and {b, d} on the other: data goes back
    # and forth, so no order of the two devices lets it flow forward.
    problem = read_instance(TINY / "chain4.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 3)), DeviceAssignment("accelerator", (2, 4))))
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, "stream", 4)
    assert str(info.value) == ("plan is not a pipeline: its devices cannot be ordered so that data flows "
                               "forward (it is not in the 'stages' contiguity class); the simulator runs "
                               "'stages' plans")


def test_stages_whose_backward_calls_feed_each_other_are_refused():
    # f0 -> f1 forward; backward b1 -> b0 and c0 -> b1, with b0, c0 (colour 0) on device 0 and b1 on
    # device 1: device 0's backward call needs device 1's, which needs device 0's. The plan is in
    # the 'stages' class (its forward nodes flow forward) but cannot run one call per direction.
    nodes = [Node(1, "f0", (1.0, 1.0), colour=0), Node(2, "f1", (1.0, 1.0), colour=1),
             Node(3, "b0", (1.0, 1.0), backward=True, colour=0), Node(4, "c0", (1.0, 1.0), backward=True, colour=0),
             Node(5, "b1", (1.0, 1.0), backward=True, colour=1)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(5, 3), Edge(4, 5)], 2, 0, math.inf)
    plan = Plan((DeviceAssignment("accelerator", (1, 3, 4)), DeviceAssignment("accelerator", (2, 5))))
    assert evaluate(problem, plan, "stages").valid
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, "gpipe", 2)
    assert str(info.value) == (
        "plan has stages that wait for each other in a cycle (a stage runs its forward nodes as one call and its "
        "backward nodes as another), so no schedule can run it: B of stage 1 (device 1, accelerator) -> "
        "B of stage 0 (device 0, accelerator) -> B of stage 1 (device 1, accelerator)")


def test_a_timeless_backward_source_orders_no_call():
    """The training pair with x, a backward node of f1's colour that reads nothing and takes no time (a
    shared parameter's gradient exchange) and sends 0.25 to b2. Device 0 {f1, b1, x}: F 2 + 1 = 3, B 4 +
    1.5 + 0.25 = 5.75; device 1 {f2, b2}: F 1 + 3 = 4, B 6 + 1.5 + 0.25 = 7.75 (max load 11.75). x's edge
    costs both devices a transfer; where its wait closes a cycle (stage 1's B waiting for stage 0's, which
    waits for stage 1's: no plan of a model with tied weights could run) it is dropped. A source with time
    (the test above) still orders its readers."""
    problem, _ = training_pair()
    x = Node(5, "x", (0.0, 0.0), out_cost=0.25, backward=True, colour=problem.node(1).colour)
    problem = make_two_type_problem((*problem.nodes, x), (*problem.edges, Edge(5, 3)), 2, 0, 100.0)
    assert problem.timeless_backward_sources() == {5}
    plan = Plan((DeviceAssignment("accelerator", (1, 4, 5)), DeviceAssignment("accelerator", (2, 3))))
    pipeline = build_pipeline(problem, plan)
    assert [(s.load, s.task_time("F"), s.task_time("B")) for s in pipeline.stages] == [(8.75, 3, 5.75),
                                                                                      (11.75, 4, 7.75)]
    assert pipeline.inputs == {(0, "F"): (), (0, "B"): ((1, "B"),), (1, "F"): ((0, "F"),), (1, "B"): ()}
    result = simulate(problem, plan, "1f1b-async", 64)
    assert result.time_per_sample == pytest.approx(11.75, rel=1e-12)
    # without b2 -> b1 the waits close no cycle, and the plan keeps every wait: stage 1's B waits for
    # stage 0's (a plan that ran before runs as it did)
    runnable = make_two_type_problem(problem.nodes, [e for e in problem.edges if (e.src, e.dst) != (3, 4)], 2, 0,
                                     100.0)
    assert build_pipeline(runnable, plan).inputs[(1, "B")] == ((0, "B"),)


@pytest.mark.parametrize("schedule, message", [
    ("gpipe", "schedule 'gpipe' trains, but the instance has no backward nodes: use schedule='stream'"),
    ("split-backward", "schedule 'split-backward' trains, but the instance has no backward nodes: "
                       "use schedule='stream'"),
    ("warp", "schedule must be one of 'stream', '1f1b-async', 'gpipe', '1f1b-flush', 'split-backward', "
             "'zb-h1', 'zb-h2', not 'warp'"),
    # Piper's schedule names were refused as if unknown, and '1f1b' left the user to find the 1F1B here
    ("1f1b", "schedule must be one of 'stream', '1f1b-async', 'gpipe', '1f1b-flush', 'split-backward', "
             "'zb-h1', 'zb-h2', not '1f1b' ('1f1b' schedules Piper instances, whose stages have data- and "
             "tensor-parallel degrees: 1F1B here is '1f1b-flush', or '1f1b-async' without a flush)"),
    ("piper", "schedule must be one of 'stream', '1f1b-async', 'gpipe', '1f1b-flush', 'split-backward', "
              "'zb-h1', 'zb-h2', not 'piper' ('piper' schedules Piper instances, whose stages have data- and "
              "tensor-parallel degrees)"),
])
def test_schedule_must_fit_the_graph(schedule, message):
    problem = read_instance(TINY / "chain4.json")
    plan = Plan((DeviceAssignment("accelerator", (1, 2)), DeviceAssignment("accelerator", (3, 4))))
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, schedule, 4)
    assert str(info.value) == message and info.value.parameter == "schedule"


def test_stream_refuses_a_training_graph():
    problem, plan = training_pair()
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, "stream", 4)
    assert str(info.value) == ("schedule 'stream' runs inference graphs only, but the instance has backward "
                               "nodes: use schedule='1f1b-async' for a steady-state training pipeline")


@pytest.mark.parametrize("kwargs, message", [
    ({"microbatches": 0}, "microbatches must be an integer from 1 to 9007199254740992, not 0"),
    ({"microbatches": 2 ** 62}, "microbatches must be an integer from 1 to 9007199254740992, not 4611686018427387904"),
    ({"comm": "pigeon"}, "comm must be one of 'inline', 'link', not 'pigeon'"),
    ({"w_fraction": 0.5, "schedule": "gpipe"},
     "w_fraction applies to the schedules that split the backward ('split-backward', 'zb-h1', 'zb-h2') only, "
     "not 'gpipe'"),
    ({"w_fraction": 1.5}, "w_fraction must be a finite number ≥ 0 and ≤ 1 or None, not 1.5"),
    ({"w_fraction": math.nan}, "w_fraction must be a finite number ≥ 0 and ≤ 1 or None, not nan"),
    ({"engine": "steam"}, "engine must be one of 'heap', 'simpy', not 'steam'"),
])
def test_bad_options(kwargs, message):
    problem, plan = training_pair()
    options = {"schedule": "split-backward", "microbatches": 4, **kwargs}
    with pytest.raises(InvalidParameterError) as info:
        simulate(problem, plan, **options)
    assert str(info.value) == message


def test_simulator_imports_no_solver():
    """The simulator checks throughput claims: like the evaluator it must not import a solver."""
    package = ROOT / "placement" / "simulation"
    modules = sorted(package.glob("*.py")) + [ROOT / "placement" / "report" / name
                                              for name in ("gantt.py", "trace.py", "simulation.py")]
    for path in modules:
        imported = []
        for stmt in ast.walk(ast.parse(path.read_text())):
            if isinstance(stmt, ast.ImportFrom):
                imported.append(stmt.module or "")
            elif isinstance(stmt, ast.Import):
                imported.extend(alias.name for alias in stmt.names)
        assert not any("solvers" in m for m in imported), path.name
    code = ("import sys, placement.simulation, placement.report.gantt, placement.report.trace, "
            "placement.report.simulation, placement.cli.simulate; "
            "print(sorted(m for m in sys.modules if m.startswith('placement.solvers')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_window_of_micro_batches_that_complete_together_measures_no_rate():
    """Two training chains, each on a CPU: f2 (7.25) -> b2 (0) on one, f1 (0) -> b1 (3) on the other. Under
    1f1b-async with 3 micro-batches the window is micro-batches 1..2, and both complete at 21.75 (the first
    CPU's third f2 ends then, and b2 takes 0): a span of no length read time per sample 0, bubble 0 and
    utilisation 0 at once. The run measures no rate; its figures are those of the whole run: busy 21.75 and
    9 over 21.75, bubble 1 - 30.75 / 43.5."""
    import placement

    node = dict(supportedOnFpga=1, size=1)
    instance = {"maxSizePerFPGA": 1000, "maxFPGAs": 0, "maxCPUs": 3, "nodes": [
        {**node, "id": 1, "fpgaLatency": 0.5, "cpuLatency": 0.0, "isBackwardNode": 0, "colorClass": 1},
        {**node, "id": 2, "fpgaLatency": 5.0, "cpuLatency": 7.25, "isBackwardNode": 0, "colorClass": 2},
        {**node, "id": 3, "fpgaLatency": 6.0, "cpuLatency": 3.0, "isBackwardNode": 1, "colorClass": 1},
        {**node, "id": 4, "fpgaLatency": 8.0, "cpuLatency": 0.0, "isBackwardNode": 1, "colorClass": 2}],
        "edges": [{"sourceId": 1, "destId": 3, "cost": 0.0}, {"sourceId": 2, "destId": 4, "cost": 0.0}]}
    plan = {"fpgas": [], "cpus": [{"nodes": [2, 4]}, {"nodes": [1, 3]}]}
    run = placement.simulate(instance, plan, schedule="1f1b-async", microbatches=3)
    assert (run.time_per_sample, run.steady_window, run.span, run.makespan) == (None, None, (0.0, 21.75), 21.75)
    assert run.notes[0] == ("micro-batches 1..2 complete at one time (21.75): no time per sample can be measured "
                            "from them; run more micro-batches")
    assert [s.utilisation for s in run.stages] == [1.0, 9 / 21.75]
    assert run.bubble_fraction == 1 - 30.75 / 43.5
