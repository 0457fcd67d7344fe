"""The baselines (placement.solvers.baselines): hand-solved plans, options and errors, and on random
small graphs: every plan is the evaluator's, and none beats the exhaustive optimum of its class."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

import placement
from hypothesis import HealthCheck, example, given, settings

from placement.errors import InvalidParameterError
from placement.io.tarnawski import read_instance
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.solution import Status
from placement.testing.bruteforce import brute_force
from placement.testing.bruteforce_latency import brute_force_latency
from placement.solvers.dp import solve_dp
from placement.solvers.registry import METHODS
from tests.methods import run_method as solve
from placement.verification.check import call_limit_violations
from placement.verification.evaluate import evaluate
from placement.verification.latency import evaluate_latency

from tests.strategies import problems

A, C = ACCELERATOR, CPU
TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
THROUGHPUT = ("pipedream", "greedy", "local-search", "partition", "expert", "single")
LATENCY = ("latency-greedy", "latency-dp-split", "latency-chain", "latency-modules")
try:
    import pymetis  # noqa: F401
    HAVE_METIS = True
except ImportError:
    HAVE_METIS = False
needs_metis = pytest.mark.skipif(not HAVE_METIS, reason="pymetis is not installed (pip install 'placement[partition]')")


def costly_middle() -> Instance:
    """1 -> 2 -> 3 -> 4, 3 ms each on an accelerator; c(2) = 10, every other transfer free; 2 accelerators, no CPU.

    * greedy: share 12 / 2 = 6: {1, 2} fills accelerator 0 exactly, {3, 4} goes to accelerator 1; the
      cut after 2 costs 10 on both sides: loads 6 + 10 = 16 and 16 -> 16.
    * stages optimum (DP, pipedream): cut where transfers are free, after 1 or after 3: max(3, 9) = 9.
    * none optimum: {1, 4} and {2, 3}: 6 each; the boundary nodes 1 and 3 cost nothing -> 6 (the
      compute alone is 12 over 2 devices, so nothing is lower). Local search reaches it from the
      greedy start: every improving move leads there (moving 2 or 3 across gives 9 | 3, then moving
      the end node over gives 6 | 6).
    """
    nodes = [Node(i, f"n{i}", (3.0, 30.0), 0.0, False, None, 10.0 if i == 2 else 0.0) for i in (1, 2, 3, 4)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3), Edge(3, 4)], 2, 0, 10, name="costly-middle")


def diamond() -> Instance:
    """s -> x, s -> y, x -> t, y -> t; accelerator times 1, 4, 4, 1; transfers free; 2 accelerators.

    The only cut vertices are s and t, so the PipeDream chain is {s} | {x, y, t}: max(1, 9) = 9 (or 10
    on one device). The DP splits the branches: {s, x} | {y, t} = 5 each.
    """
    nodes = [Node(1, "s", (1.0, 9.0)), Node(2, "x", (4.0, 9.0)), Node(3, "y", (4.0, 9.0)), Node(4, "t", (1.0, 9.0))]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3), Edge(2, 4), Edge(3, 4)], 2, 0, 10, name="diamond")


def test_every_baseline_is_registered():
    assert set(THROUGHPUT + LATENCY) <= set(METHODS)


def test_costly_middle_by_hand():
    problem = costly_middle()
    greedy = solve(problem, "greedy")
    assert (greedy.status, greedy.objective, greedy.contiguity, greedy.bound) == (Status.FEASIBLE, 16.0, "stages", 0.0)
    assert greedy.plan == Plan((DeviceAssignment(A, (1, 2)), DeviceAssignment(A, (3, 4))))
    assert solve(problem, "pipedream").objective == solve_dp(problem).objective == 9.0
    local = solve(problem, "local-search", restarts=3, seed=5)
    assert (local.objective, local.contiguity) == (6.0, "none")
    assert brute_force(problem, "none").objective == 6.0 and brute_force(problem, "stages").objective == 9.0
    assert sorted(sorted(d.nodes) for d in local.plan.devices) == [[1, 4], [2, 3]]
    assert local.stats["restarts"] == 3 and local.stats["stopped_by_time_limit"] is False
    single = solve(problem, "single")
    assert (single.objective, single.plan) == (12.0, Plan((DeviceAssignment(A, (1, 2, 3, 4)),)))


def test_pipedream_fuses_branches():
    problem = diamond()
    pipedream = solve(problem, "pipedream")
    assert (pipedream.objective, pipedream.contiguity, pipedream.stats["chain_blocks"]) == (9.0, "stages", 2)
    assert pipedream.plan == Plan((DeviceAssignment(A, (1,)), DeviceAssignment(A, (2, 3, 4))))
    assert solve_dp(problem).objective == 5.0
    assert solve(problem, "greedy").objective == 5.0   # {s, x} reaches the share 5; {y, t} the rest


def test_single_with_a_cpu_only_node():
    # 1 -> 2 -> 3, node 2 CPU only: accelerator {1, 3}: 2 + 4 + c(1) 1 (out) + c(2) 0.5 (in) = 7.5; CPU: 3
    nodes = [Node(1, "a", (2.0, 20.0), 0.0, False, None, 1.0), Node(2, "m", (None, 3.0), 0.0, False, None, 0.5),
             Node(3, "b", (4.0, 40.0))]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 10)
    single = solve(problem, "single")
    assert (single.status, single.objective, single.contiguity) == (Status.FEASIBLE, 7.5, "none")


def test_single_over_memory_is_flagged():
    nodes = [Node(i, f"n{i}", (1.0, 9.0), 1.0) for i in (1, 2, 3)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 0, 2)
    single = solve(problem, "single")
    assert single.status is Status.ERROR and single.objective == 3.0
    assert single.message == ("the plan is invalid (1 violation, first: device 0 (accelerator): memory 3 exceeds "
                              "the bound 2)")


def test_expert_split(tmp_path):
    problem = costly_middle()
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"maxLoad": -1, "fpgas": [{"load": -1, "nodes": [1, 2]}, {"nodes": [3, 4]}],
                                 "cpus": [{"nodes": []}]}))
    expert = solve(problem, "expert", split=str(split))
    assert (expert.status, expert.objective, expert.contiguity) == (Status.FEASIBLE, 16.0, "stages")
    split.write_text(json.dumps({"fpgas": [{"nodes": [1, 2, 9]}, {"nodes": [3, 4]}]}))
    bad = solve(problem, "expert", split=str(split))
    assert bad.status is Status.ERROR
    assert bad.message == ("the plan is invalid (1 violation, first: device 0 (accelerator): node 9 is not in the "
                           "instance)")


def test_expert_split_listing_forward_nodes_only(tmp_path):
    """training-pair: f1 -> f2 -> b2 -> b1, f1 -> b1; colours {f1, b1}, {f2, b2}.

    Split f1 | f2: the backward nodes follow their colour. Device 0 {f1, b1}: compute 2 + 4, boundary
    f1 (out, 1) and b2 (in, 1.5) -> 8.5; device 1 {f2, b2}: 3 + 6, boundary f1 (in, 1) and b2 (out,
    1.5) -> 11.5.
    """
    problem = read_instance(TINY / "training-pair.json")
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    expert = solve(problem, "expert", split=split)
    assert expert.plan == Plan((DeviceAssignment(A, (1, 4)), DeviceAssignment(A, (2, 3))))
    assert (expert.objective, expert.stats["inferred_from_colours"]) == (11.5, 2)
    assert [r.load for r in evaluate(problem, expert.plan).devices] == [8.5, 11.5]


def test_expert_split_says_it_does_not_read_backward_tasks():
    """The same split with the B and W tasks of a split-backward plan: the loads are the joint ones
    above (each backward node where its colour puts it), and the message says the tasks were not read."""
    problem = read_instance(TINY / "training-pair.json")
    split = Plan((DeviceAssignment(A, (1,), b_tasks=(4,), w_tasks=(4,)), DeviceAssignment(A, (2,), b_tasks=(3,),
                                                                                          w_tasks=(3,))))
    expert = solve(problem, "expert", split=split)
    assert (expert.status, expert.objective) == (Status.FEASIBLE, 11.5)
    assert expert.message == ("the split's b_tasks and w_tasks are not read: method 'expert' evaluates the plan "
                              "with joint backward nodes (verify with backward='split' checks a "
                              "split-backward plan)")


def test_expert_split_made_for_another_instance_says_so(tmp_path):
    """A split whose record names another instance is evaluated as it is, and the message says whose it was, as
    verify and split say it of a plan; a file with no record, or the same name, gives no such note."""
    problem = read_instance(TINY / "training-pair.json")
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"instance": "chain4", "fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    expert = solve(problem, "expert", split=split)
    assert (expert.status, expert.objective) == (Status.FEASIBLE, 11.5)
    assert expert.message == "the split was made for instance 'chain4', not 'training-pair'"
    split.write_text(json.dumps({"instance": "training-pair", "fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    assert solve(problem, "expert", split=split).message == ""


def test_latency_greedy_by_hand():
    """memory-chain as an inference graph: a -> b -> c, 3 bytes each, memory 5 per accelerator (2), CPU.

    latency-greedy: a fills accelerator 0, b accelerator 1, c fits nowhere else: CPU.
    a [0, 2 + 0.5]; b [2.5, 2.5 + 0.5 + 2 + 0.5 = 5.5]; c on the CPU [5.5, 13.5] -> 13.5.
    The optimum puts b on the CPU: a [0, 2.5], b [2.5, 10.5], c [10.5, 10.5 + 0.5 + 2 = 13] -> 13.
    """
    problem = read_instance(TINY / "memory-chain.json")
    greedy = solve(problem, "latency-greedy")
    assert (greedy.status, greedy.objective, greedy.objective_kind) == (Status.FEASIBLE, 13.5, "latency")
    assert greedy.plan == Plan((DeviceAssignment(A, (1,)), DeviceAssignment(A, (2,)), DeviceAssignment(C, (3,))))
    assert brute_force_latency(problem).objective == 13.0
    split = solve(problem, "latency-dp-split")
    assert split.objective == evaluate_latency(problem, split.plan).latency >= 13.0
    assert split.stats["dp_max_load"] == 8.0


def test_pipedream_without_a_plan_reports_the_class_it_searched():
    """Two chained nodes of size 2 and one accelerator of memory 3, no CPU: no pipeline holds them, and the
    answer names the stages class that pipedream searches, where it said `none`."""
    nodes = [Node(0, "a", (1.0, 1.0), 2.0), Node(1, "b", (1.0, 1.0), 2.0)]
    found = solve(make_two_type_problem(nodes, [Edge(0, 1)], 1, 0, 3.0), "pipedream")
    assert (found.status, found.plan, found.contiguity) == (Status.NO_SOLUTION, None, "stages")


@pytest.mark.parametrize("method", ["greedy", "pipedream", "single", "local-search", "partition", "expert"])
def test_throughput_baselines_refuse_the_latency_objective(method):
    with pytest.raises(InvalidParameterError, match=f"^objective must be 'throughput' for method '{method}', not "
                                                    "'latency'; for latency use latency-greedy, latency-dp-split, "
                                                    "latency-chain, latency-modules$"):
        solve(costly_middle(), method, objective="latency")


def test_the_refusal_names_the_baselines_of_the_registry(monkeypatch):
    """A baseline is one registry line: the refusal of another objective names it with the others."""
    from placement.solvers import baselines, registry

    spec = replace(METHODS["single"], name="copy-of-single")
    monkeypatch.setitem(registry.METHODS, "copy-of-single", spec)
    assert baselines.baseline_names("throughput") == (*THROUGHPUT, "copy-of-single")
    with pytest.raises(InvalidParameterError, match="for throughput use pipedream, greedy, local-search, "
                                                    "partition, expert, single, copy-of-single$"):
        solve(costly_middle(), "latency-greedy", objective="throughput")
    assert baselines.THROUGHPUT_BASELINES == THROUGHPUT and baselines.LATENCY_BASELINES == LATENCY
    assert list(baselines.BASELINES) == [*THROUGHPUT, *LATENCY]


def test_latency_baselines_refuse_throughput_and_training():
    with pytest.raises(InvalidParameterError, match="^objective must be 'latency' for method 'latency-greedy', not "
                                                    "'throughput'; for throughput use pipedream, greedy, "
                                                    "local-search, partition, expert, single$"):
        solve(costly_middle(), "latency-greedy", objective="throughput")
    with pytest.raises(InvalidParameterError, match="^objective 'latency' is for inference graphs; "):
        solve(read_instance(TINY / "training-pair.json"), "latency-dp-split")


def test_options_they_do_not_use_are_ignored():
    problem = costly_middle()
    options = {"split": "nowhere.json", "restarts": 2, "seed": 3, "time_limit": 5.0, "contiguity": "stages",
               "backend": "cbc", "max_ideals": 1000, "progress": None, "objective": None}
    for method in ("pipedream", "greedy", "single"):
        assert solve(problem, method, **options).objective == solve(problem, method).objective


def test_bad_options():
    problem = costly_middle()
    with pytest.raises(InvalidParameterError, match="^split is required by method 'expert', which evaluates a "
                                                    "given split: pass a plan or a plan file$"):
        solve(problem, "expert")
    with pytest.raises(InvalidParameterError, match="^restarts must be an integer ≥ 1, not 0$"):
        solve(problem, "local-search", restarts=0)
    with pytest.raises(InvalidParameterError, match="^seed must be an integer ≥ 0, not -1$"):
        solve(problem, "local-search", seed=-1)
    three = Instance(tuple(replace(n, times=n.times + (1.0,)) for n in problem.nodes), problem.edges,
                    problem.device_types + (DeviceType("tpu", 1),))
    with pytest.raises(InvalidParameterError, match="^method 'greedy' takes the device types 'accelerator' and "
                                                    r"'cpu' only; this instance has 'tpu' \(methods 'dp' and 'milp' "
                                                    r"take any device types\)$"):
        solve(three, "greedy")
    # the names are Tarnawski's, and so is what they mean: an 'accelerator' that pays no communication
    # (or a 'cpu' that pays it) is another device, which the baselines would label wrongly
    swapped = replace(problem, device_types=(DeviceType(A, 2, 10, False), DeviceType(C, 0, math.inf, False)))
    with pytest.raises(InvalidParameterError, match="^method 'greedy' takes the device types 'accelerator', which "
                                                    "pays communication, and 'cpu', which does not; this instance's "
                                                    "'accelerator' does not pay it$"):
        placement.solve(swapped, method="greedy")


def test_a_catalogue_refusal_names_every_other_type():
    """A catalogue of h100 and a100 beside a CPU: the refusal names both types, in the method's own check and in
    placement.solve's, and the methods that take them, so that renaming one type does not look like the fix."""
    two = Instance((Node(0, "a", (1.0, 2.0, 5.0)),), (),
                   (DeviceType("h100", 1), DeviceType("a100", 1), DeviceType(C, 1, math.inf, False)))
    said = (r"^method 'greedy' takes the device types 'accelerator' and 'cpu' only; this instance has 'a100' and "
            r"'h100' \(methods 'dp' and 'milp' take any device types\)$")
    with pytest.raises(InvalidParameterError, match=said):
        solve(two, "greedy")
    with pytest.raises(InvalidParameterError, match=said):
        placement.solve(two, method="greedy")
    assert placement.solve(two).value == 1.0   # the DP takes the catalogue


def test_local_search_is_reproducible_and_respects_its_time_limit():
    problem = read_instance(TINY / "diamond-cpu.json")
    first = solve(problem, "local-search", restarts=4, seed=11)
    again = solve(problem, "local-search", restarts=4, seed=11)
    assert first.plan == again.plan and first.objective == again.objective
    stopped = solve(problem, "local-search", restarts=1000, time_limit=1e-9)
    assert stopped.stats["stopped_by_time_limit"] is True and stopped.message == "stopped by the time limit"
    # a limit that runs out before the first restart still gives its start, the greedy fill, as the plan
    # (on a chain of 200,000 nodes reading the graph into the search took longer than a 2 s limit, and
    # the search returned no plan)
    greedy = solve(problem, "greedy")
    assert (stopped.status, stopped.plan, stopped.stats["restarts"]) == (greedy.status, greedy.plan, 1)


def test_local_search_climbs_alike_at_every_scale_of_the_times():
    """The bundled BERT-base inference graph with every time and cost scaled by 1e-12 is the same
    placement problem: the climb reaches the same max-load, scaled. A move had to lower the larger load
    by 1e-9 in absolute terms at such scales, so no move was ever taken and the plan stayed at its start
    (1.36e-12 where 1.067e-12 is reached)."""
    document = json.loads((Path(__file__).resolve().parents[1] / "instances" / "models"
                           / "bert-base-inference.json").read_text())
    tiny = json.loads(json.dumps(document))
    for node in tiny["nodes"]:
        node.update(cpuLatency=node["cpuLatency"] * 1e-12, fpgaLatency=node["fpgaLatency"] * 1e-12)
    for edge in tiny["edges"]:
        edge["cost"] = edge["cost"] * 1e-12
    found = [placement.solve(d, method="local-search", seed=1, restarts=3).value for d in (document, tiny)]
    assert found[1] == pytest.approx(found[0] * 1e-12, rel=1e-9, abs=0), found


@pytest.mark.parametrize("restarts", [1, 10, 50])
def test_local_search_repairs_memory_and_returns_its_best_valid_plan(restarts):
    """A chain 0 → 1 → 2 (accelerator times 5, 5, 1; sizes 1, 2, 3), two accelerators of memory 3, no CPU:
    node 2 fills a device alone, so the one valid plan is {0, 1}, {2}, max-load 10. The greedy fill
    breaks the bound; the climb moves classes off a device over its bound, and a restart that ends
    invalid (with a lower max-load) never replaces a valid one, however many restarts run."""
    nodes = [Node(0, "a", (5.0, 1.0), 1.0), Node(1, "b", (5.0, 1.0), 2.0), Node(2, "c", (1.0, 1.0), 3.0)]
    problem = make_two_type_problem(nodes, [Edge(0, 1), Edge(1, 2)], 2, 0, 3.0)
    found = solve(problem, "local-search", restarts=restarts, seed=3)
    assert found.status is Status.FEASIBLE and found.objective == 10.0
    assert sorted(sorted(d.nodes) for d in found.plan.devices) == [[0, 1], [2]]


@pytest.mark.parametrize("cpus", [0, 1])
def test_local_search_decides_memory_as_the_evaluator_does(cpus):
    """Sizes 0.1, 0.2 and 0.3 fill an accelerator of 0.6 exactly as written, though they sum to
    0.6000000000000001 in floating point; a node of 0.5 (time 10) takes the other. The climb judged the
    first device over its bound by the float sum and moved a node off it, then back, forever (or, with a
    CPU, onto the CPU: 50). Decided as the evaluator decides, the fill is valid and stays: 10, the optimum."""
    nodes = (Node(0, "a", (1.0, 50.0), 0.1), Node(1, "b", (1.0, 50.0), 0.2), Node(2, "c", (1.0, 50.0), 0.3),
             Node(3, "big", (10.0, 50.0), 0.5))
    problem = make_two_type_problem(nodes, [], 2, cpus, 0.6)
    found = solve(problem, "local-search", restarts=3, seed=0)
    assert (found.status, found.objective) == (Status.FEASIBLE, 10.0)
    assert sorted(sorted(d.nodes) for d in found.plan.devices) == [[0, 1, 2], [3]]


@needs_metis
def test_partition_reports_class_and_memory():
    # four independent nodes, memory 1 each, bound 1, two accelerators: the balanced partition puts two
    # nodes on each accelerator and breaks memory; the plan is a pipeline (no edges)
    nodes = [Node(i, f"n{i}", (1.0, 9.0), 1.0) for i in (1, 2, 3, 4)]
    problem = make_two_type_problem(nodes, [], 2, 0, 1)
    partition = solve(problem, "partition")
    assert partition.status is Status.ERROR and partition.objective == 2.0
    assert partition.message == ("the plan is invalid (2 violations, first: device 0 (accelerator): memory 2 "
                                 "exceeds the bound 1); the partitioner ignores contiguity and memory; the plan is "
                                 "in class stages")
    ok = solve(costly_middle(), "partition")
    assert ok.status is Status.FEASIBLE and ok.objective >= 6.0
    assert ok.message.endswith(f"the plan is in class {ok.contiguity}")


# ----------------------------------------------------------------------------------------
# random small graphs against the exhaustive optimum of each plan's class
# ----------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=7))
def test_no_baseline_beats_the_optimum_of_its_class(problem):
    optimum: dict[str, float] = {}
    dp = solve_dp(problem)
    for method in ("pipedream", "greedy", "local-search", "single") + (("partition",) if HAVE_METIS else ()):
        solution = solve(problem, method, restarts=3, seed=1)
        if solution.plan is None:
            assert solution.status is Status.NO_SOLUTION and method == "pipedream"
            continue
        ev = evaluate(problem, solution.plan, "none")
        assert (solution.objective, solution.contiguity, solution.bound) == (ev.max_load, ev.finest_class, 0.0)
        if not ev.valid:
            assert solution.status is Status.ERROR and solution.message.startswith("the plan is invalid (")
            continue
        assert solution.status is Status.FEASIBLE
        cls = ev.finest_class
        if cls not in optimum:
            optimum[cls] = brute_force(problem, cls).objective
        assert solution.objective >= optimum[cls]
        if cls == "stages":
            assert solution.objective >= dp.objective
        if method == "pipedream":
            assert cls == "stages"


def cpu_in_the_middle() -> Instance:
    """a -> b -> c, b unsupported on accelerators; 1 ms on an accelerator, 10 on a CPU; transfers 0.5.

    latency-greedy with one call per accelerator: a on accelerator 0 [0, 1.5], b on the CPU [1.5, 11.5],
    c cannot be a second call of accelerator 0: accelerator 1 [11.5, 11.5 + 0.5 + 1 = 13] -> 13.
    With two calls per accelerator c is accelerator 0's second call, at the same times -> 13."""
    nodes = [Node(i, n, (1.0 if i != 2 else None, 10.0), 0.0, False, None, 0.5)
             for i, n in ((1, "a"), (2, "b"), (3, "c"))]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 10, name="cpu-in-the-middle")


def test_latency_greedy_keeps_to_the_calls_per_accelerator():
    problem = cpu_in_the_middle()
    one = solve(problem, "latency-greedy")
    assert (one.status, one.objective) == (Status.FEASIBLE, 13.0)
    assert one.plan == Plan((DeviceAssignment(A, (1,)), DeviceAssignment(C, (2,)), DeviceAssignment(A, (3,))))
    two = solve(problem, "latency-greedy", calls=2)
    assert (two.status, two.objective) == (Status.FEASIBLE, 13.0)
    assert two.plan.devices[0].nodes == (1, 3) and evaluate_latency(problem, two.plan).valid
    assert call_limit_violations(problem, one.plan, 1) == call_limit_violations(problem, two.plan, 2) == []
    assert brute_force_latency(problem, 1).objective == 13.0


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=7, training=False))
@example(cpu_in_the_middle())
def test_latency_baselines_give_valid_plans_no_better_than_the_optimum(problem):
    """With a CPU core every node has somewhere to go, so each latency baseline returns a plan the
    evaluator accepts, with one call per accelerator (and two for the greedy asked for two), and none
    below the exhaustive optimum."""
    if not problem.device_types[1].count:
        problem = replace(problem, device_types=(problem.device_types[0], replace(problem.device_types[1], count=1)))
    optimum = brute_force_latency(problem, 1).objective
    for method, calls in [(m, 1) for m in LATENCY] + [("latency-greedy", 2)]:
        solution = solve(problem, method, objective="latency", calls=calls)
        check = evaluate_latency(problem, solution.plan)
        assert check.valid and solution.status is Status.FEASIBLE, (method, check.violations)
        assert call_limit_violations(problem, solution.plan, calls) == [], method
        assert solution.objective == check.latency
        if calls == 1:
            assert solution.objective >= optimum * (1 - 1e-12)


TWO_TYPE_TINY = [p for p in sorted(TINY.glob("*.json"))
                 if {t.name for t in read_instance(p).device_types} <= {A, C}]  # the baselines' model


@pytest.mark.parametrize("path", TWO_TYPE_TINY, ids=lambda p: p.stem)
def test_unconstrained_baselines_never_beat_the_milp_none_optimum(path):
    """The acceptance check of the comparisons, on the bundled tiny instances: local search and the
    partitioner (class ``none``) against the proven MILP optimum of class ``none``, itself checked
    against the exhaustive search."""
    pytest.importorskip("ortools")
    problem = read_instance(path)
    milp = placement.solve(problem, method="milp", contiguity="none", time_limit=30)
    assert milp.status == "optimal", milp.message
    assert milp.value == pytest.approx(brute_force(problem, "none").objective, rel=1e-12)
    for method in ("local-search",) + (("partition",) if HAVE_METIS else ()):
        solution = solve(problem, method, restarts=5)
        if solution.status is Status.FEASIBLE:
            assert solution.objective >= milp.value * (1 - 1e-12)


def test_a_baseline_reports_the_instances_simple_bound():
    """A heuristic proves no bound of its own; the result carries the instance's simple bound.

    training-pair: classes {f1, b1} (2 + 4 = 6) and {f2, b2} (3 + 6 = 9) on two accelerators, so
    every plan has a device of load at least 9, what `placement info` prints. PipeDream's plan is
    11.5: gap 2.5 / 11.5. memory-chain as an inference graph (a -> b -> c, 2 each on an
    accelerator): the critical path says 6, and the path bound 13, the optimum with one call per
    accelerator (tests/test_latency_path_bound.py derives both); the latency baselines' results
    carry the larger, and the greedy plan takes 13.5."""
    pipedream = placement.solve(TINY / "training-pair.json", method="pipedream")
    assert (pipedream.status, pipedream.value, pipedream.bound) == ("feasible", 11.5, 9.0)
    assert pipedream.gap == pytest.approx(2.5 / 11.5)
    greedy = placement.solve(TINY / "memory-chain.json", method="latency-greedy", objective="latency")
    assert (greedy.status, greedy.value, greedy.bound) == ("feasible", 13.5, 13.0)
    chain = placement.solve(TINY / "memory-chain.json", method="latency-chain", objective="latency")
    assert (chain.status, chain.bound) == ("feasible", 13.0)


def test_a_baseline_plan_coarser_than_the_class_asked_for_says_so():
    """1 -> 2 -> 3 with 2 unsupported on accelerators: `single` puts 1 and 3 on one accelerator and 2
    on the CPU. The path 1 -> 2 -> 3 leaves the accelerator's set and comes back, so the plan is
    of class none, whatever class was asked for."""
    chain = {"maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 1,
             "nodes": [{"id": k, "supportedOnFpga": int(k != 2), "fpgaLatency": 1, "cpuLatency": 10,
                        "isBackwardNode": 0, "size": 1} for k in (1, 2, 3)],
             "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 3, "cost": 1}]}
    asked = placement.solve(chain, method="single", contiguity="stages")
    assert asked.contiguity == "none"
    assert asked.message == "method 'single' does not keep to contiguity 'stages': its plan is of class 'none'"
    assert placement.solve(chain, method="single", contiguity="none").message == ""


@pytest.mark.parametrize("method, objective", [("greedy", "throughput"), ("latency-greedy", "latency"),
                                               ("latency-chain", "latency")])
def test_heuristics_read_memory_as_the_model_does(method, objective):
    """a -> b, sizes 0.1 and 0.2, one accelerator of 0.3 (1 ms each there, 10 on the CPU, transfer 1):
    both fit the accelerator as written (0.1 + 0.2 = 0.3), so all three put them there: max load and
    latency 1 + 1 = 2. Summed in floating point (0.30000000000000004 > 0.3), b went to the CPU: 10,
    and a latency of 1 + 1 (a's output) + 10 = 12."""
    nodes = [Node(1, "a", (1.0, 10.0), 0.1, False, None, 1.0), Node(2, "b", (1.0, 10.0), 0.2, False, None, 1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2)], 1, 1, 0.3)
    solution = solve(problem, method, objective=objective)
    assert solution.objective == 2.0
    assert solution.plan == Plan((DeviceAssignment("accelerator", (1, 2)),))


def test_local_search_says_how_far_it_has_got(monkeypatch):
    """A long local search printed nothing until it stopped; it now says, every PROGRESS_S seconds at
    most, how many restarts it has done and its best value (here every restart: the limit set to 0)."""
    from placement.solvers.baselines import local_search

    monkeypatch.setattr(local_search, "PROGRESS_S", 0.0)
    lines: list[str] = []
    result = placement.solve(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json",
                             method="local-search", restarts=3, progress=lines.append)
    assert [line for line in lines if line.startswith("local search: ") and "restarts" in line] == [
        f"local search: {k} of 3 restarts, best {result.value:.6g}" for k in (1, 2, 3)]
    during = [line for line in lines if line.startswith("local search: restart ")]   # within a restart too
    assert during[0] == "local search: restart 1 of 3, 0 moves so far, no valid plan yet"
    assert {line.split(",")[0] for line in during} == {f"local search: restart {k} of 3" for k in (1, 2, 3)}


def test_chain_blocks_end_at_the_supernodes_every_other_one_is_an_ancestor_or_descendant_of():
    """The blocks against the definition, on random DAGs numbered in topological order: a cut vertex is
    one whose ancestors and descendants (found by search here) are every other supernode, and block j
    is the supernodes after the (j−1)-th cut vertex up to the j-th (the rest: one more block)."""
    import random

    from placement.solvers.baselines.pipedream import chain_blocks
    from placement.solvers.ideals import Contraction

    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(1, 10)
        density = rng.random()
        succ = [tuple(w for w in range(u + 1, n) if rng.random() < (density if w > u + 1 else 0.8))
                for u in range(n)]

        def reach(start: int, step) -> set[int]:
            seen, todo = {start}, [start]
            while todo:
                for w in step(todo.pop()):
                    if w not in seen:
                        seen.add(w)
                        todo.append(w)
            return seen

        pred = [[u for u in range(n) if w in succ[u]] for w in range(n)]
        cuts = [c for c in range(n) if reach(c, lambda v: succ[v]) | reach(c, lambda v: pred[v]) == set(range(n))]
        expected = [next((j for j, c in enumerate(cuts) if s <= c), len(cuts)) for s in range(n)]
        assert chain_blocks(Contraction(tuple((s,) for s in range(n)), tuple(succ), tuple(range(n)), 0)) == expected


def test_an_interrupted_local_search_counts_the_moves_of_the_climb_under_way(monkeypatch):
    """Ctrl-C within a climb: the plan in hand reports every move made, those of the climb under way too (the
    count the progress line gave just before, as no move was made after it), and the pass it was in."""
    import re

    from placement.sigint import PlanInHand
    from placement.solvers.baselines import local_search

    monkeypatch.setattr(local_search, "PROGRESS_S", 0.0)
    nodes = [Node(i, f"n{i}", (2.0, 3.0 + i % 7), 1.0) for i in range(100)]
    problem = make_two_type_problem(nodes, [], 4, 1, math.inf)
    said = []

    def progress(line: str) -> None:
        found = re.fullmatch(r"local search: restart 1 of 10, (\d+) moves so far, .*", line)
        if found and int(found.group(1)) >= 5:
            said.append(int(found.group(1)))
            raise KeyboardInterrupt

    with pytest.raises(PlanInHand) as caught:
        local_search.solve_local_search(problem, seed=0, progress=progress)
    assert said and caught.value.solution.stats["moves"] == said[0]
    assert caught.value.solution.stats["passes"] >= 1
