"""Moving colour classes to the CPUs (placement.solvers.baselines.latency_moves): a hand-solved
descent, never a slower or invalid plan, the stage count kept, and the MILP's warm start."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placement
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.solution import Status
from placement.solvers.baselines.latency_greedy import solve_latency_greedy
from placement.solvers.baselines.latency_moves import move_classes_to_cpus
from placement.verification.latency import evaluate_latency
from tests.strategies import problems

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "latency-inputs"


def embedding_problem(cpus: int = 1):
    """a -> b -> c and e -> c, e of a's colour (a table read at the start and the end); accelerator
    times a=b=c=1, e=0.5, CPU times a=2, e=1, b=c=20; transfers c(a)=c(b)=1, c(e)=10; two
    accelerators of 10 bytes (memory 1 each)."""
    nodes = [Node(1, "a", (1.0, 2.0), 1.0, False, 5, 1.0), Node(2, "b", (1.0, 20.0), 1.0, False, None, 1.0),
             Node(3, "c", (1.0, 20.0), 1.0), Node(4, "e", (0.5, 1.0), 1.0, False, 5, 10.0)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3), Edge(4, 3)], 2, cpus, 10)


def test_moves_a_class_whose_transfer_costs_more_than_its_cpu_time():
    """{a, e} | {b, c}: the first call lasts 1.5 + c(a) + c(e) = 12.5, the second receives a and e
    (11) and computes 2: 25.5. With a and e on the CPU (both done by 2, side by side) the call
    {b, c} starts at 2 and lasts 13: 15. Moving b or c as well would cost their CPU time of 20."""
    problem = embedding_problem()
    start = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    assert evaluate_latency(problem, start).latency == 25.5
    better = move_classes_to_cpus(problem, start)
    assert better == Plan((DeviceAssignment("accelerator", (2, 3)), DeviceAssignment("cpu", (1, 4))))
    assert evaluate_latency(problem, better).latency == 15.0


def test_without_cpus_or_past_the_deadline_the_plan_is_kept():
    problem = embedding_problem(cpus=0)
    start = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    assert move_classes_to_cpus(problem, start) is start
    assert move_classes_to_cpus(embedding_problem(), start, deadline=0.0) is start


def test_keeps_the_stage_count():
    """With stages=2 the move to the CPU would leave 2 non-empty devices (one accelerator, the CPU)
    and is taken; with stages=3 none is."""
    problem = embedding_problem()
    start = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    assert move_classes_to_cpus(problem, start, stages=2).non_empty == 2
    assert move_classes_to_cpus(problem, start, stages=3) is start


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=8, training=False, max_accelerators=3, max_cpus=2), st.booleans())
def test_never_slower_and_always_valid(problem, with_stages):
    found = solve_latency_greedy(problem, objective="latency")
    if found.status is not Status.FEASIBLE or found.plan is None:
        return
    before = evaluate_latency(problem, found.plan)
    stages = found.plan.non_empty if with_stages else None
    moved = move_classes_to_cpus(problem, found.plan, stages=stages)
    after = evaluate_latency(problem, moved)
    assert after.valid
    assert after.latency <= before.latency
    if stages is not None:
        assert moved.non_empty == stages


def test_the_latency_start_of_bert_l_3():
    """The MILP's start on BERT-L-3: the chain DP's 414.429511, then the embedding table's class (word
    embeddings, their lookup and the transposed copy the output layer reads) on the CPU: 408.474435,
    0.0001% above the path bound 408.474093."""
    path = SHARED / "OperatorGraphs" / "bert_l-3_inference.json"
    if not path.exists():
        pytest.skip("../shared/tarnawski is not available")
    notes: list[str] = []
    result = placement.solve(path, objective="latency", method="milp", time_limit=20, progress=notes.append)
    assert any(note.startswith("latency 408.474: class of node 57 moved") for note in notes)
    assert result.value <= 408.474435
    assert result.bound == pytest.approx(408.474093, abs=1e-6)


def test_a_long_descent_says_how_far_it_has_come(monkeypatch):
    """With no time between notes, every class tried is announced, with the latency so far."""
    from placement.solvers.baselines import latency_moves

    monkeypatch.setattr(latency_moves, "HEARTBEAT_S", 0.0)
    start = Plan((DeviceAssignment("accelerator", (1, 4)), DeviceAssignment("accelerator", (2, 3))))
    lines: list[str] = []
    move_classes_to_cpus(embedding_problem(), start, progress=lines.append)
    tried = "moving colour classes to the CPUs: {} of 3 classes tried in this sweep, latency {}"
    assert lines == [tried.format(0, 25.5), "latency 15: class of node 1 moved to the CPUs",
                     tried.format(1, 15), tried.format(2, 15),
                     tried.format(0, 15), tried.format(1, 15), tried.format(2, 15)]



def test_a_start_at_the_longest_path_bound_tries_no_move(monkeypatch):
    """a -> b -> c, 1 each on the accelerator (10 on the CPU), transfers of 0.5: every node on the accelerator
    in one call takes 1 + 1 + 1 = 3, the longest path of cheapest times, so no move can help and none is
    evaluated (on a chain of 3,000 nodes the moves took 28 s of a solve whose start was optimal). The MILP
    then returns that start, proven by the bound, without building its model."""
    from placement.solvers.baselines import latency_moves

    document = {"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 1,
                "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 1}
                          for i in range(3)],
                "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(2)]}
    problem = placement.load(document)
    start = Plan((DeviceAssignment("accelerator", (0, 1, 2)),))
    evaluated = []
    monkeypatch.setattr(latency_moves, "evaluate_latency", lambda *args: evaluated.append(args))
    assert latency_moves.moved_to_cpus(problem, start, 3.0) == (start, 3.0) and evaluated == []
    monkeypatch.undo()
    result = placement.solve(problem, objective="latency")
    assert (str(result.status), result.value, result.stats["model_built"]) == ("optimal", 3.0, False)
