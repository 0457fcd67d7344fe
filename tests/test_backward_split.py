"""The split-backward model: hand-solved optima, MILP = brute force = evaluator on random tiny
training graphs (every variant, both objectives), the request's errors, and the plan file."""

from __future__ import annotations

import json
from dataclasses import replace
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import placement
from placement.errors import InvalidParameterError
from placement.io.plans import parse_plan
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import ACCELERATOR, DeviceType, Edge, Instance, Node
from placement.problem.split import split_lower_bound, split_model, split_times, task_rows
from placement.result import Result
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.split import solve_split_milp
from placement.testing.bruteforce_split import brute_force_split
from placement.verification.split import evaluate_split
from tests.strategies import problems


def two_layers(accelerators: int = 2, cost: float = 0.0) -> Instance:
    """Layer 1: forward f1 (1), backward b1 (2); layer 2: f2 (1), b2 (6); f1 -> f2, b2 -> b1; W share 0.5,
    so B = W = 1 for b1 and 3 for b2. ``cost``: c(f1) = c(b2)."""
    nodes = (Node(1, "f1", (1.0,), colour=1, out_cost=cost), Node(2, "f2", (1.0,), colour=2),
             Node(3, "b2", (6.0,), backward=True, colour=2, out_cost=cost), Node(4, "b1", (2.0,), backward=True, colour=1))
    return Instance(nodes, (Edge(1, 2, 8.0), Edge(3, 4, 8.0)), (DeviceType(ACCELERATOR, accelerators),), "two-layers")


# Joint: {f1,b1} = 3 and {f2,b2} = 7 on two stages (7), or everything on one (10): optimum 7.
# any: W(b2) = 3 to stage 1 and W(b1) = 1 to stage 2 gives 1+1+3 = 5 and 1+3+1 = 5, the total 10 halved: 5.
# adjacent: only W(b1) may move (to stage 2): stages 2 and 8, worse; optimum 7, as joint.
# adjacent + inter-layer: B(b2) = 3 to stage 1, W(b1) = 1 to stage 2: 1+1+3 = 5 and 1+3+1 = 5: optimum 5.
# any + inter-layer: 5 (the total halved cannot be beaten).
HAND = [("any", False, 5.0), ("adjacent", False, 7.0), ("adjacent", True, 5.0), ("any", True, 5.0)]


@pytest.mark.parametrize("w_placement, inter_layer, optimum", HAND)
def test_hand_solved_optimum(w_placement: str, inter_layer: bool, optimum: float) -> None:
    problem = two_layers()
    r = placement.solve(problem, backward="split", w_placement=w_placement, inter_layer=inter_layer)
    assert r.status == "optimal" and r.value == optimum and r.verified
    assert brute_force_split(problem, split_model(w_placement, inter_layer))[0] == optimum
    assert placement.solve(problem).value == 7.0


@pytest.mark.parametrize("seed", range(6))
def test_a_split_load_does_not_depend_on_the_order_nodes_are_listed_in(seed) -> None:
    """f1, f2, f3 -> f4 (times 0.1, 0.2, 0.3, 1) and b4 -> b1, b2, b3 (0.2, 0.4, 0.6, 2), W share 0.5:
    left to right 0.1 + 0.2 + 0.3 is 0.6000000000000001, the exactly rounded sum 0.6, which every listing
    of the instance and of the plan gives."""
    import random

    times = {1: 0.1, 2: 0.2, 3: 0.3, 4: 1.0, 5: 2.0, 6: 0.2, 7: 0.4, 8: 0.6}
    mate = {1: 1, 2: 2, 3: 3, 4: 4, 5: 4, 6: 1, 7: 2, 8: 3}
    nodes = [Node(v, f"n{v}", (t,), backward=v > 4, colour=mate[v]) for v, t in times.items()]
    edges = [Edge(1, 4), Edge(2, 4), Edge(3, 4), Edge(5, 6), Edge(5, 7), Edge(5, 8)]
    rng = random.Random(seed)
    rng.shuffle(nodes)
    rng.shuffle(edges)
    problem = Instance(tuple(nodes), tuple(edges), (DeviceType(ACCELERATOR, 2),))
    first = rng.sample([1, 2, 3, 6, 7, 8], 6)
    backward = tuple(v for v in first if v > 4)
    plan = Plan((DeviceAssignment(ACCELERATOR, tuple(first), (), backward, backward),
                 DeviceAssignment(ACCELERATOR, (4, 5), (), (5,), (5,))))
    ev = evaluate_split(problem, plan, split_model(w_placement="home"))
    # device 0: forward 0.6; B and W halves 0.1, 0.2, 0.3 each: 1.2; no transfers (costs 0); load their sum
    assert ev.evaluation.valid
    assert [(d.forward_load, d.backward_load, d.load) for d in ev.evaluation.devices] == [(0.6, 1.2, 0.6 + 1.2),
                                                                                          (1.0, 2.0, 3.0)]


def test_a_share_with_no_exact_scale_keeps_cp_sat_s_proof() -> None:
    """Times 6 with a W share of 0.2 have no power-of-two unit: CP-SAT's times are rounded down at the
    largest scale its products allow. At exactly that limit the load variable's bound (its largest load,
    + 1) took one product just past 2^62, so CP-SAT's proof was not used on this 5-node instance
    (feasible 8 with bound 3.96). The optimum, 8, is the brute force's."""
    def n(i, name, acc, cpu, backward, colour, size):
        return {"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": acc, "cpuLatency": cpu,
                "isBackwardNode": backward, "colorClass": colour, "size": size}

    doc = {"maxSizePerFPGA": 10, "maxFPGAs": 3, "maxCPUs": 1,
           "nodes": [n(36, "b2", 6.0, 7.75, 1, 2, 0), n(7, "f2", 0.5, 6.75, 0, 2, 3), n(14, "f1", 0.75, 0.25, 0, 1, 1),
                     n(35, "f0", 2.25, 8.0, 0, 0, 2), n(38, "b1", 6.0, 7.75, 1, 1, 3)],
           "edges": [{"sourceId": 14, "destId": 7, "cost": 0.25, "size": 3},
                     {"sourceId": 35, "destId": 14, "cost": 0.25, "size": 0},
                     {"sourceId": 36, "destId": 38, "cost": 1.0, "size": 3}]}
    problem = placement.load(doc)
    r = placement.solve(problem, backward="split", w_placement="adjacent", inter_layer=True, w_share=0.2)
    assert (r.status, r.value, r.bound) == ("optimal", 8.0, 8.0)
    assert r.stats["overflow_risk_log2"] <= 62
    assert brute_force_split(problem, split_model("adjacent", True, 0.2))[0] == 8.0


def unmirrored_backward() -> dict:
    """``instances/tiny/unmirrored-backward.json``: fa -> fb <- fc with backward edges ba -> bb -> bc (not
    the mirror of the forward ones), layer times 1 + 2, 2 + 4, 1 + 2, no costs, 2 accelerators."""
    path = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "unmirrored-backward.json"
    return json.loads(path.read_text())


def test_a_joint_plan_whose_backward_calls_wait_in_a_cycle_says_so() -> None:
    """:func:`unmirrored_backward`: the stages optimum is {a, c} | {b}, 6 and 6 (one device 12; {a} | {b, c}
    3 and 9). Device 0's backward call (ba, bc) feeds device 1's (bb), which feeds device 0's: the
    solve and the check say so, and the simulator refuses the plan."""
    from placement.simulation import simulate

    problem = placement.load(unmirrored_backward())
    r = placement.solve(problem)
    assert (r.status, r.value, [s.nodes for s in r.plan]) == ("optimal", 6.0, [(1, 3, 4, 6), (2, 5)])
    note = ("the backward calls of devices 0 -> 1 -> 0 wait for each other in a cycle (the instance's backward "
            "edges do not mirror its forward ones): no pipeline runtime runs the plan as one backward call per stage "
            "and micro-batch, and the simulator refuses it (docs/backward-split.md)")
    assert r.message == note and r.verification.notes == (note,)
    with pytest.raises(InvalidParameterError, match="wait for each other in a cycle"):
        simulate(problem, r.to_plan(), "1f1b-async", 4)
    # the check says so of the plan however it comes: a bare plan (checked as contiguity none), a plan file
    assert placement.verify(problem, r.to_plan()).notes == (note,)
    assert placement.Result.from_json(r.to_json()).verification.notes == (note,)
    mirrored = two_layers()   # mirrored backward edges: no cycle
    assert placement.solve(mirrored).verification.notes == () and "cycle" not in placement.solve(mirrored).message


def test_a_joint_plan_whose_backward_call_reads_a_later_forward_gets_no_cycle_note() -> None:
    """docs/simulator.md, "Limits": f0 -> f1 -> b1 -> b0, every time 1, colour classes {f0, b1} and {f1, b0}.
    The optimum {f0, b1} | {f1, b0} (max load 2) has device 0's backward call wait for device 1's forward
    call (b1 reads f1) and device 1's backward call wait for device 0's (b0 reads b1): no two backward calls
    wait for each other, so the simulator runs it, one backward call per stage and micro-batch, at 3 per
    sample, and says why; the check notes no cycle (its note would say the simulator refuses the plan)."""
    from placement.simulation import simulate

    nodes = (Node(0, "f0", (1.0,), colour=0), Node(1, "f1", (1.0,), colour=1),
             Node(2, "b1", (1.0,), backward=True, colour=0), Node(3, "b0", (1.0,), backward=True, colour=1))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2), Edge(2, 3)), (DeviceType(ACCELERATOR, 2),), "limits")
    plan = Plan((DeviceAssignment(ACCELERATOR, (0, 2)), DeviceAssignment(ACCELERATOR, (1, 3))))
    check = placement.verify(problem, plan, contiguity="stages")
    assert (check.valid, check.max_load, check.notes) == (True, 2.0, ())
    ran = simulate(problem, plan, "1f1b-async", 64)
    assert ran.time_per_sample == 3.0
    assert ran.notes[-1].startswith("the run is slower than the load model (3 against 2 per sample)")


def test_verify_prints_the_backward_cycle_note(tmp_path, capsys) -> None:
    """``placement verify`` of :func:`unmirrored_backward`'s optimum gives the note, in text and in JSON, and
    exits 0: the plan is valid (the README's example)."""
    from placement.cli import main

    instance = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "unmirrored-backward.json"
    plan = tmp_path / "unmirrored.json"
    assert main(["solve", str(instance), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["verify", str(instance), str(plan)]) == 0
    said = capsys.readouterr().out
    assert "note: the backward calls of devices 0 -> 1 -> 0 wait for each other in a cycle" in said
    assert main(["verify", str(instance), str(plan), "--json"]) == 0
    first, note = json.loads(capsys.readouterr().out)["notes"]   # as the text prints them, in its order
    assert first == "checked for contiguity stages, the class the plan file records it was solved in"
    assert note.startswith("the backward calls of devices 0 -> 1 -> 0 wait")


def test_hand_solved_flush_objective() -> None:
    # Flush: max FW + max BW. Joint, two stages: FW 1 and 1, BW 2 and 6: 1 + 6 = 7 (one stage: 2 + 8 = 10).
    # any: BW = B + W balanced over the two stages, 8 / 2 = 4 (W(b2) to stage 1, W(b1) to stage 2): 1 + 4 = 5.
    problem = two_layers()
    r = placement.solve(problem, backward="split", objective="throughput-gpipe")
    assert r.status == "optimal" and r.value == 5.0
    assert placement.solve(problem, objective="throughput-gpipe", method="milp").value == 7.0


def test_moved_w_pays_its_transfers_and_keeps_its_inputs() -> None:
    # c(f1) = c(b2) = 0.5. Joint, two stages: stage 1 = 3 + 0.5 (f1 out) + 0.5 (b2 in) = 4, stage 2 = 7 + 1 = 8.
    # Split (any): W(b2) on stage 1 reads f2's input f1, local there; W(b1) on stage 2 reads b2, local there;
    # both stages still exchange f1 and b2: 1+1+3 + 1 = 6 and 1+3+1 + 1 = 6. Balancing compute further
    # is impossible (total compute 10 over 2 stages is 5 each, plus the exchange of 1 each): optimum 6.
    problem = two_layers(cost=0.5)
    r = placement.solve(problem, backward="split")
    assert r.status == "optimal" and r.value == 6.0
    assert placement.solve(problem).value == 8.0
    assert brute_force_split(problem, split_model())[0] == 6.0
    plan = Plan((DeviceAssignment(ACCELERATOR, (1, 4), (), (4,), (3,)), DeviceAssignment(ACCELERATOR, (2, 3), (), (3,), (4,))))
    ev = evaluate_split(problem, plan, split_model())
    # memory: per micro-batch in flight (2 on the first of two devices, 1 on the second; no W call waits for
    # another device's B output) the activations (f1: 8 bytes on device 0; f2 feeds nothing) and the tensors a
    # moved W reads but the forward ones its device produces: W(b2) reads f1, an activation of device 0
    # already; W(b1) reads b2's output gradient (8 bytes): 2 x 8 = 16 and 1 x 8 = 8
    assert ev.valid and [d.memory for d in ev.evaluation.devices] == [16.0, 8.0]
    assert [d.load for d in ev.evaluation.devices] == [6.0, 6.0]
    # W(b1) on stage 1 as well: stage 1 = 1+1+1+3 + 1 = 7 (it keeps no tensor: W(b1) is at home)
    home = Plan((DeviceAssignment(ACCELERATOR, (1, 4), (), (4,), (3, 4)), DeviceAssignment(ACCELERATOR, (2, 3), (), (3,), ())))
    assert [d.load for d in evaluate_split(problem, home, split_model()).evaluation.devices] == [7.0, 5.0]


def test_evaluator_refuses_what_the_variant_forbids() -> None:
    problem = two_layers()
    # W(b2) on stage 1 is "previous", not "next": adjacent forbids it; B(b1) on stage 2 is never allowed.
    plan = Plan((DeviceAssignment(ACCELERATOR, (1, 4), (), (), (3,)), DeviceAssignment(ACCELERATOR, (2, 3), (), (4,), ())))
    ev = evaluate_split(problem, plan, split_model("adjacent", True))
    assert ev.violations == (
        "node 3: its W task runs on device 0, which the variant 'adjacent+inter-layer' does not allow (layer on device 1)",
        "node 4: its B task runs on device 1, which the variant 'adjacent+inter-layer' does not allow (layer on device 0)")
    backwards = Plan(tuple(reversed(plan.devices)))
    assert "the devices are not in pipeline order: device 1 feeds device 0" in evaluate_split(
        problem, backwards, split_model()).violations


def test_evaluator_names_a_task_of_a_forward_node_and_one_of_no_node_apart() -> None:
    """b_tasks / w_tasks may list backward nodes only: forward node 2 is "not a backward node", and 99, which
    the instance does not have, is "not in the instance" (it was called a forward node's)."""
    problem = two_layers()
    plan = Plan((DeviceAssignment(ACCELERATOR, (1, 4), (), (4, 2), (99,)),
                 DeviceAssignment(ACCELERATOR, (2, 3), (), (3,), ())))
    assert [v for v in evaluate_split(problem, plan, split_model()).violations if "lists node" in v] == [
        "device 0: b_tasks lists node 2, which is not a backward node",
        "device 0: w_tasks lists node 99, which is not in the instance"]


def test_lower_bound_is_the_divided_total() -> None:
    # One type, 2 devices, tasks 1, 1 (forward), B/W 1, 1, 3, 3: total 10, divided over 2 devices: 5.
    assert split_lower_bound(two_layers(), split_model()) == 5.0


def test_plan_file_keeps_b_and_w_tasks() -> None:
    problem = two_layers()
    model = split_model("adjacent", True)
    r = placement.solve(problem, backward="split", w_placement="adjacent", inter_layer=True)
    data = json.loads(json.dumps(r.to_json()))
    assert data["backward"] == {"mode": "split", "w_placement": "adjacent", "inter_layer": True, "w_share": 0.5}
    assert sorted(v for d in data["devices"] for v in d["b_tasks"]) == [3, 4]
    assert sorted(v for d in data["devices"] for v in d["w_tasks"]) == [3, 4]
    back = Result.from_json(data)
    assert back.backward == data["backward"] and back.to_plan() == r.to_plan() == parse_plan(data)
    assert evaluate_split(problem, back.to_plan(), model).objective("throughput") == 5.0


@pytest.mark.parametrize("backend", [name for name, ok, _ in backend_availability() if ok and ":" not in name])
def test_every_backend_finds_the_hand_optimum(backend: str) -> None:
    solution = solve_split_milp(two_layers(), split_model("adjacent", True), backend=backend, time_limit=20)
    assert solution.status.value == "optimal" and solution.objective == 5.0


@pytest.mark.parametrize("kwargs, parameter, detail", [
    (dict(backward="sideways"), "backward", "must be one of 'joint', 'split', not 'sideways'"),
    (dict(backward="split", w_placement="near"), "w_placement", "must be one of 'any', 'adjacent', 'home', not 'near'"),
    (dict(backward="split", inter_layer=1), "inter_layer", "must be True or False, not 1"),
    (dict(backward="split", w_share=1.5), "w_share", "must be a finite number ≥ 0 and ≤ 1, not 1.5"),
    (dict(w_placement="adjacent"), "w_placement", "applies to backward='split' only"),
    (dict(inter_layer=True), "inter_layer", "applies to backward='split' only"),
    # given at their defaults, they still say the caller meant a split backward
    (dict(w_placement="any"), "w_placement", "applies to backward='split' only"),
    (dict(backward="joint", inter_layer=False), "inter_layer", "applies to backward='split' only"),
    (dict(w_share=0.5), "w_share", "applies to backward='split' only"),
    (dict(schedule="piper"), "schedule", "applies to Piper instances only (data- and tensor-parallel stages)"),
    (dict(backward="split", method="dp"), "method",
     "'dp' does not place split backward tasks; backward='split' is solved by method 'milp' (or 'auto')"),
    (dict(backward="split", contiguity="none"), "contiguity",
     "'none' does not apply to backward='split', whose previous and next stages need a pipeline; use 'stages'"),
    (dict(backward="split", stages=2), "stages", "does not apply to backward='split'"),
    # more stages than devices: still refused as an option the split does not take, not as a count to lower
    (dict(backward="split", stages=99), "stages", "does not apply to backward='split'"),
    # the split MILP gives its backend the seed; CBC behind OR-Tools takes none
    (dict(backward="split", backend="cbc", seed=3), "seed",
     "does not apply to backend 'cbc', which takes no seed (backends 'cp-sat', 'scip' and 'highs' take one)"),
])
def test_bad_requests(kwargs: dict, parameter: str, detail: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(two_layers(), **kwargs)
    assert (info.value.parameter, info.value.detail) == (parameter, detail)


def test_inference_instance_is_refused() -> None:
    inference = Instance((Node(1, "f", (1.0,)),), (), (DeviceType(ACCELERATOR, 1),))
    with pytest.raises(InvalidParameterError) as info:
        placement.solve(inference, backward="split")
    assert info.value.detail == ("'split' needs a training instance (one with backward nodes); "
                                 "this instance has none")


def test_a_split_plan_checked_on_an_inference_instance_is_refused_as_the_plan() -> None:
    """A split-backward plan checked against an inference instance, no backward= given: the refusal named
    the parameter backward, which the caller did not pass; the plan's record asked for the split check."""
    inference = Instance((Node(1, "f", (1.0,)),), (), (DeviceType(ACCELERATOR, 1),))
    split = placement.solve(two_layers(), backward="split")
    for plan in (split, split.to_json()):
        with pytest.raises(InvalidParameterError) as info:
            placement.verify(inference, plan)
        assert (info.value.parameter, info.value.detail) == (
            "plan", "records a split-backward solve, which needs a training instance (one with backward nodes); "
                    "this instance has none (backward='joint' checks the plan's layers only)")
    with pytest.raises(InvalidParameterError) as info:   # asked for: the parameter is named
        placement.verify(inference, {"fpgas": [{"nodes": [1]}]}, backward="split")
    assert info.value.parameter == "backward"


def test_cli_split(tmp_path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"deviceTypes": [{"name": "accelerator", "count": 2, "paysComm": True}], "nodes": [
        {"id": 1, "name": "f1", "times": {"accelerator": 1}, "colorClass": 1},
        {"id": 2, "name": "f2", "times": {"accelerator": 1}, "colorClass": 2},
        {"id": 3, "name": "b2", "times": {"accelerator": 6}, "colorClass": 2, "isBackwardNode": True},
        {"id": 4, "name": "b1", "times": {"accelerator": 2}, "colorClass": 1, "isBackwardNode": True}],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0}, {"sourceId": 3, "destId": 4, "cost": 0}]}))
    run = [sys.executable, "-m", "placement", "solve", str(path), "--json", "--backward", "split"]
    out = subprocess.run(run + ["--w-placement", "adjacent", "--inter-layer"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["objective"] == 5.0
    plan = tmp_path / "plan.json"
    plan.write_text(out.stdout)
    check = [sys.executable, "-m", "placement", "verify", str(path), str(plan), "--json", "--backward", "split"]
    ok = subprocess.run(check + ["--w-placement", "adjacent", "--inter-layer"], capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["value"] == 5.0
    # the file records --inter-layer, which verify takes unless told otherwise; without it a moved B breaks
    # the rule: exit 1
    assert subprocess.run(check + ["--w-placement", "adjacent"], capture_output=True, text=True).returncode == 0
    assert subprocess.run(check + ["--w-placement", "adjacent", "--no-inter-layer"], capture_output=True,
                          text=True).returncode == 1
    # home: every W on its layer's stage, the unsplit optimum {f1,b1} | {f2,b2} = max(3, 7) = 7 (HAND's comment)
    home = subprocess.run(run + ["--w-placement", "home"], capture_output=True, text=True)
    assert home.returncode == 0, home.stderr
    doc = json.loads(home.stdout)
    assert doc["objective"] == 7.0
    assert doc["backward"] == {"mode": "split", "w_placement": "home", "inter_layer": False, "w_share": 0.5}
    assert [(d["nodes"], d["b_tasks"], d["w_tasks"]) for d in doc["devices"]] == [([1, 4], [4], [4]), ([2, 3], [3], [3])]
    home_plan = tmp_path / "home.json"
    home_plan.write_text(home.stdout)
    checked = subprocess.run(check[:5] + [str(home_plan), "--json", "--backward", "split", "--w-placement", "home"],
                             capture_output=True, text=True)
    assert checked.returncode == 0 and json.loads(checked.stdout)["value"] == 7.0
    # the adjacent plan moves B and W tasks off their layers' stages: not a home plan, exit 1
    assert subprocess.run(check + ["--w-placement", "home"], capture_output=True, text=True).returncode == 1
    bad = subprocess.run(run + ["--w-share", "2"], capture_output=True, text=True)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "error: argument --w-share: expected a number between 0 and 1, got '2'\n"


ONE_NODE = Instance((Node(1, "f0", (0.25, 0.0), colour=0),), (),
                    (DeviceType(ACCELERATOR, 1), DeviceType("cpu", 0, pays_comm=False)))


@st.composite
def tiny_training(draw) -> Instance:
    """A random training graph of at most 6 nodes (tests/strategies.py) with random tensor sizes."""
    p = draw(problems(max_nodes=6, training=True, max_accelerators=3, max_cpus=1))
    edges = tuple(Edge(e.src, e.dst, float(draw(st.integers(0, 2)))) for e in p.edges)
    return Instance(p.nodes, edges, p.device_types, p.name)


@pytest.mark.parametrize("w_placement, inter_layer", [("any", False), ("adjacent", False), ("adjacent", True),
                                                      ("any", True), ("home", False)])
def test_milp_agrees_with_brute_force(w_placement: str, inter_layer: bool) -> None:
    model = split_model(w_placement, inter_layer)

    @settings(max_examples=200)
    @given(tiny_training(), st.sampled_from(["throughput", "throughput-gpipe"]))
    @example(ONE_NODE, "throughput")   # found while building: the warm start's hint missed a fixed variable
    def check(problem: Instance, objective: str) -> None:
        best, plan = brute_force_split(problem, model, objective)
        solution = solve_split_milp(problem, model, objective, time_limit=20)
        if plan is None:
            assert solution.status.value == "infeasible"
            return
        evaluation = evaluate_split(problem, plan, model)
        assert evaluation.valid and math.isclose(evaluation.objective(objective), best, abs_tol=1e-9)
        assert solution.status.value == "optimal", solution.message
        assert math.isclose(solution.objective, best, abs_tol=1e-9)
        assert split_lower_bound(problem, model) <= best + 1e-9
        # a relaxation: the unsplit plans (every task at home, same memory model) are plans of every variant
        assert best <= brute_force_split(problem, split_model("home"), objective)[0] + 1e-9

    check()


CPU_ONLY_NODE = Instance((Node(1, "f0", (None, 0.0), colour=0),), (),
                            (DeviceType(ACCELERATOR, 1), DeviceType("cpu", 1, pays_comm=False)))


@settings(max_examples=200)
@given(tiny_training())
@example(CPU_ONLY_NODE)   # found while building: the cut to one accelerator left f0 no device
def test_fitting_starts_fit_the_split_memory(problem: Instance) -> None:
    # fitting_starts' rule (a home plan of at most c stages within node memory m(v) + c x bytes(v) fits the
    # in-flight memory): every plan it yields is valid in every variant, and no better than the brute-force
    # optimum of the unsplit plans under that memory
    from placement.solvers.milp.split import fitting_starts

    home = brute_force_split(problem, split_model("home"))[0]
    for plan in fitting_starts(problem):
        for w_placement, inter_layer in (("home", False), ("any", False), ("adjacent", True)):
            evaluation = evaluate_split(problem, plan, split_model(w_placement, inter_layer))
            assert evaluation.valid, evaluation.violations
        assert evaluation.objective("throughput") >= home - 1e-9


def test_torch_import_gives_weight_gradient_times() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import bundled_catalogue, make_platform, roofline_ms
    from placement.io.torch_export import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    imported = import_torch(model, (torch.randn(3, 4),), platform=make_platform("h100", "epyc-7763", 2, 1),
                            training=True, granularity="operator")
    nodes = {n["id"]: n for n in imported.instance["nodes"]}
    q = imported.instance["about"]["time_quantum_ms"]
    # The first linear (3x4 @ 4x8: 192 FLOPs, 304 bytes forward) spends one of its two backward kernels on
    # the weight gradient: the forward's roofline time with one kernel. ReLU's gradient has no weight part.
    h100 = bundled_catalogue()["h100"]
    assert abs(nodes[3]["fpgaWeightLatency"] - roofline_ms(192, 304, h100, "fp32", 1)) <= q / 2
    assert nodes[4]["fpgaWeightLatency"] == nodes[4]["cpuWeightLatency"] == 0.0
    problem = imported.problem
    b_times, w_times = split_times(problem, split_model(w_share=0.9))   # the given parts win over the share
    u = problem.index_of(3)
    assert w_times[u] == problem.nodes[u].weight_times == (nodes[3]["fpgaWeightLatency"], nodes[3]["cpuWeightLatency"])
    assert b_times[u][0] == nodes[3]["fpgaLatency"] - nodes[3]["fpgaWeightLatency"]


def test_a_frozen_weight_has_no_weight_gradient() -> None:
    """A fine-tuned model: a trained first linear, a frozen second (requires_grad=False), a third
    reading a frozen weight and a trained bias. Forward: 3x4 @ 4x8 (192 FLOPs), 3x8 @ 8x8 (384 FLOPs,
    its bytes B), 3x8 @ 8x2 (96 FLOPs). The first computes its weight gradient alone (the model's input
    needs none): 192 FLOPs, one kernel, all of it weight time. The frozen one computes its input
    gradient alone: 384 FLOPs (not 768) in one kernel, no weight time. The third trains its bias alone,
    which is no operand of its product: its input gradient (96 FLOPs), no weight GEMM, no weight time
    (the bias gradient, a small reduction, is not charged)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import bundled_catalogue, make_platform, roofline_ms
    from placement.io.torch_export import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    for p in (*model[1].parameters(), model[2].weight):
        p.requires_grad_(False)
    imported = import_torch(model, (torch.randn(3, 4),), platform=make_platform("h100", "epyc-7763", 2, 1),
                            training=True, granularity="operator")
    nodes = {n["name"]: n for n in imported.instance["nodes"]}
    q = imported.instance["about"]["time_quantum_ms"]
    h100 = bundled_catalogue()["h100"]
    first, frozen, mixed = nodes["linear.grad"], nodes["linear_1.grad"], nodes["linear_2.grad"]
    assert (first["flops"], frozen["flops"], mixed["flops"]) == (192.0, 384.0, 96.0)
    assert abs(frozen["fpgaLatency"] - roofline_ms(384, nodes["linear_1"]["bytes"], h100, "fp32", 1)) <= q / 2
    assert frozen["fpgaWeightLatency"] == frozen["cpuWeightLatency"] == 0.0
    assert first["fpgaWeightLatency"] > 0 and abs(first["fpgaLatency"] - first["fpgaWeightLatency"]) <= q
    assert mixed["fpgaWeightLatency"] == 0.0 and mixed["fpgaLatency"] > 0
    # the gradients of the frozen layer are no memory of its backward node; the bias's are
    assert frozen["size"] == 0.0 and first["size"] == (4 * 8 + 8) * 4.0 and mixed["size"] == 2 * 4.0


def test_nothing_before_the_first_trained_parameter_has_a_gradient() -> None:
    """A frozen backbone (two linears and a relu) under a trained head: autograd runs no backward for
    the backbone, so its backward nodes cost nothing, save no activations, and no gradient flows back
    to them (no mirrored edge); the head computes its weight gradient alone (3x8 @ 8x2: 96 FLOPs).
    With an input that needs a gradient (requires_grad=True), every layer computes its input gradient."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    for p in (*model[0].parameters(), *model[2].parameters()):
        p.requires_grad_(False)
    platform = make_platform("h100", "epyc-7763", 2, 1)
    x = torch.randn(3, 4)
    data = import_torch(model, (x,), platform=platform, training=True, granularity="operator").instance
    nodes = {n["name"]: n for n in data["nodes"]}
    ids = {n["id"]: n["name"] for n in data["nodes"]}
    backbone = ("linear", "relu", "linear_1")
    assert [nodes[f"{b}.grad"]["flops"] for b in backbone] == [0.0, 0.0, 0.0]
    assert [nodes[f"{b}.grad"]["fpgaLatency"] for b in backbone] == [0.0, 0.0, 0.0]
    assert [nodes[b]["size"] for b in backbone] == [(32 + 8) * 4.0, 0.0, (64 + 8) * 4.0]  # parameters alone
    assert nodes["linear_2.grad"]["flops"] == 96.0
    gradient_edges = sorted((ids[e["sourceId"]], ids[e["destId"]]) for e in data["edges"]
                            if ids[e["sourceId"]].endswith(".grad") and ids[e["destId"]].endswith(".grad"))
    assert gradient_edges == []
    x.requires_grad_(True)
    data = import_torch(model, (x,), platform=platform, training=True, granularity="operator").instance
    nodes = {n["name"]: n for n in data["nodes"]}
    assert [nodes[f"{b}.grad"]["flops"] for b in (*backbone, "linear_2")] == [192.0, 24.0, 384.0, 192.0]


def _two_nodes(**weights) -> dict:
    return {"maxFPGAs": 2, "maxCPUs": 0, "maxSizePerFPGA": 10, "nodes": [
        {"id": 1, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1, "isBackwardNode": 0, "colorClass": 1},
        {"id": 3, "supportedOnFpga": 1, "cpuLatency": 6, "fpgaLatency": 6, "isBackwardNode": 1, "colorClass": 1,
         **weights}], "edges": []}


def test_weight_time_fields_are_read_and_checked() -> None:
    assert placement.load(_two_nodes(fpgaWeightLatency=2, cpuWeightLatency=1)).node(3).weight_times == (2, 1)
    native = {"deviceTypes": [{"name": "gpu", "count": 1, "paysComm": True}], "nodes": [
        {"id": 3, "times": {"gpu": 6}, "weightTimes": {"gpu": 4}, "isBackwardNode": True}], "edges": []}
    assert placement.load(native).node(3).weight_times == (4,)
    for data, message in [
            (_two_nodes(fpgaWeightLatency=7, cpuWeightLatency=1), "node 3: weight time on accelerator (7) exceeds its time (6)"),
            (_two_nodes(fpgaWeightLatency=1), "node 3: missing field 'cpuWeightLatency'")]:
        with pytest.raises(placement.errors.InvalidInstanceError) as info:
            placement.load(data)
        assert str(info.value) == message


def test_a_time_limit_too_short_for_the_solver_returns_the_starting_plan() -> None:
    """two_layers: the unsplit optimum {f1,b1} | {f2,b2} (7) is the start; 0.1 ms leaves the solver no
    time (the DP's share runs out as well: the chain DP gives the same plan), so that plan comes back,
    feasible, with the split model's simple bound, as the other MILPs do."""
    problem = two_layers()
    assert placement.solve(problem, backward="split").value == 5.0     # warm: imports done
    r = placement.solve(problem, backward="split", time_limit=1e-4)
    assert (r.status, r.value) == ("feasible", 7.0)
    assert r.bound <= 5.0 and r.message.endswith("the starting plan is returned")


def test_a_b_task_moved_back_is_refused_without_inter_layer_and_says_what_allows_it(tmp_path) -> None:
    """adjacent + inter-layer moves B(b2) to stage 1 (HAND): the plan file, checked as 'adjacent' alone, has
    node 3's B task on device 0, the device before its layer's; the violation names the variant that allows it."""
    problem = two_layers()
    r = placement.solve(problem, backward="split", w_placement="adjacent", inter_layer=True)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(r.to_json()))
    assert placement.verify(problem, str(path), backward="split").value == 5.0
    strict = placement.verify(problem, str(path), backward="split", w_placement="adjacent", inter_layer=False)
    assert strict.violations == ("node 3: its B task runs on device 0, which the variant 'adjacent' does not allow "
                                 "(layer on device 1; a B task on the device before its layer's needs an inter-layer "
                                 "variant)",)


def test_verify_checks_a_split_plan_file(tmp_path) -> None:
    problem = two_layers()
    r = placement.solve(problem, backward="split")   # "any": W(b2) moves back to stage 1, W(b1) forward
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(r.to_json()))
    assert placement.verify(problem, str(path), backward="split").value == 5.0
    strict = placement.verify(problem, str(path), backward="split", w_placement="adjacent")
    assert not strict.valid and strict.violations == (
        "node 3: its W task runs on device 0, which the variant 'adjacent' does not allow (layer on device 1)",)
    # by default the file is checked as the split plan it records; the joint evaluator reads it as the
    # unsplit plan of its layers
    assert placement.verify(problem, str(path)).value == 5.0
    assert placement.verify(problem, str(path), backward="joint").value == 7.0
    with pytest.raises(InvalidParameterError) as info:
        placement.verify(problem, str(path), backward="joint", inter_layer=True)
    assert info.value.detail == "applies to backward='split' only"
    with pytest.raises(InvalidParameterError) as info:   # at its default too
        placement.verify(problem, str(path), backward="joint", w_share=0.5)
    assert (info.value.parameter, info.value.detail) == ("w_share", "applies to backward='split' only")


@pytest.mark.parametrize("kwargs, parameter, detail", [
    (dict(contiguity="none"), "contiguity", "does not apply to backward='split' (a split-backward plan is checked as "
                                            "a pipeline: contiguity stages, one call per device)"),
    (dict(objective="throughput", calls=2), "calls", "does not apply to backward='split' (a split-backward plan is "
                                                     "checked as a pipeline: contiguity stages, one call per device)"),
    # infer_from_colours and ledger passed unused, at any value: given, they are refused, False too
    (dict(infer_from_colours=False), "infer_from_colours",
     "does not apply to backward='split' (the check of a split-backward plan places no node the plan leaves out)"),
    (dict(infer_from_colours=True), "infer_from_colours",
     "does not apply to backward='split' (the check of a split-backward plan places no node the plan leaves out)"),
    (dict(ledger=False), "ledger",
     "does not apply to backward='split' (the check of a split-backward plan runs no communication ledger)"),
    (dict(ledger=True), "ledger",
     "does not apply to backward='split' (the check of a split-backward plan runs no communication ledger)"),
    (dict(objective="latency"), "objective", "'latency' does not apply to backward='split' (a split-backward plan "
                                             "is checked for 'throughput' or 'throughput-gpipe')"),
])
def test_verify_refuses_what_a_split_check_does_not_read(tmp_path, kwargs: dict, parameter: str, detail: str) -> None:
    problem = two_layers()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(placement.solve(problem, backward="split").to_json()))
    # the split asked for is named as the parameter; the split the plan file records as the plan's
    recorded = detail.replace("backward='split'", "the plan, which was solved with its backward pass split")
    for backward, said in (({}, recorded), ({"backward": "split"}, detail)):
        with pytest.raises(InvalidParameterError) as info:
            placement.verify(problem, str(path), **backward, **kwargs)
        assert (info.value.parameter, info.value.detail) == (parameter, said)
    # what the split check does, given, is taken; the joint check takes them all
    assert placement.verify(problem, str(path), contiguity="stages", objective="throughput", calls=None).value == 5.0
    joint = placement.verify(problem, str(path), backward="joint", infer_from_colours=True, ledger=True)
    assert joint.value == 7.0 and joint.ledger is not None


def test_flush_phases_and_kept_tensors_of_a_moved_w() -> None:
    # f0 (1) -> f1 (1, c = 1); b1 -> b0 (backward, 2 each, W = B = 1); f0 -> b0, f1 -> b1 carry activations.
    # Device 0 holds layer 0 and W(b1); device 1 holds layer 1.
    nodes = (Node(0, "f0", (1.0,), colour=0), Node(1, "f1", (1.0,), colour=1, out_cost=1.0),
             Node(2, "b0", (2.0,), backward=True, colour=0), Node(3, "b1", (2.0,), backward=True, colour=1))
    edges = (Edge(0, 1, 4.0), Edge(0, 2, 4.0), Edge(1, 3, 6.0), Edge(3, 2, 2.0))
    problem = Instance(nodes, edges, (DeviceType(ACCELERATOR, 2),))
    plan = Plan((DeviceAssignment(ACCELERATOR, (0, 2), (), (2,), (2, 3)), DeviceAssignment(ACCELERATOR, (1, 3), (), (3,), ())))
    ev = evaluate_split(problem, plan, split_model()).evaluation
    # Device 0 receives f1 only for W(b1): backward phase. FW = (1, 1 + send f1 1), BW = (B0 1 + W0 1 + W1 1 +
    # receive f1 1, B1 1): flush objective 2 + 4 = 6; max load 5 (device 0: 1 + 3 + 1).
    assert [(d.forward_load, d.backward_load) for d in ev.devices] == [(1.0, 4.0), (2.0, 1.0)]
    assert ev.objective("throughput-gpipe") == 6.0 and ev.max_load == 5.0
    # Memory, bounded async 1F1B: device 0 (position 0 of 2, no W call waits for another device's B: B(b0)
    # receives b1 itself) holds 2 micro-batches of its activation f0 (4) and of the inputs W(b1) keeps: b1's
    # input f1 (6 bytes) but not its layer's input f0 (an activation of device 0 already): 2 x (4 + 6) = 20;
    # device 1 holds 1 micro-batch of f1 (6 bytes)
    assert [d.memory for d in ev.devices] == [20.0, 6.0]


def test_inter_layer_b_calls_must_not_wait_in_a_cycle() -> None:
    # Three layers, backward b3 -> b2 -> b1; layer 1 on device 0, layers 2 and 3 on device 1. Moving B(b3) to
    # device 0 but not B(b2) makes device 0's B call feed device 1's, which feeds device 0's: a cycle.
    nodes = tuple(Node(i, f"f{i}", (1.0,), colour=i) for i in (1, 2, 3)) + tuple(
        Node(10 + i, f"b{i}", (2.0,), backward=True, colour=i) for i in (1, 2, 3))
    edges = (Edge(1, 2), Edge(2, 3), Edge(13, 12), Edge(12, 11))
    problem = Instance(nodes, edges, (DeviceType(ACCELERATOR, 2),))
    layers = ((1, 11), (2, 12, 3, 13))
    cyclic = Plan((DeviceAssignment(ACCELERATOR, layers[0], (), (11, 13), ()),
                   DeviceAssignment(ACCELERATOR, layers[1], (), (12,), ())))
    assert evaluate_split(problem, cyclic, split_model(inter_layer=True)).violations == (
        "the B tasks of devices 0 -> 1 -> 0 wait for each other in a cycle",)
    both = Plan((DeviceAssignment(ACCELERATOR, layers[0], (), (11, 12, 13), ()), DeviceAssignment(ACCELERATOR, layers[1])))
    assert evaluate_split(problem, both, split_model(inter_layer=True)).valid


def test_a_moved_b_that_reads_a_later_forward_and_feeds_its_stage_closes_a_cycle() -> None:
    """f0 → f1 → f2 → b2 → b1 (b2 reads f2's output, as at a loss), every time 1 but B 1, W 1 (w_share
    0.5 of 2); f0 on device 0, the rest on device 1, B(b2) moved to device 0. The B arcs alone (0 → 1:
    b2 feeds b1) close no cycle, and the loads are 2 and 5; but B(b2) waits for device 1's F(f2) of
    the same micro-batch, and device 1 (the last stage: no forward to run meanwhile) runs F, waits
    for B(b2), then B(b1) and the W tasks: 6 per sample, not 5. The forward edge f2 → b2 into a B on
    an earlier stage is an arc too (1 → 0): a cycle, refused. The optimum without it is the
    unmoved plan's, and the simulator runs it at its max load."""
    from placement.simulation.simulator import simulate

    nodes = tuple(Node(i, f"f{i}", (1.0,), colour=i) for i in (0, 1, 2)) + tuple(
        Node(10 + i, f"b{i}", (2.0,), backward=True, colour=i) for i in (1, 2))
    edges = (Edge(0, 1), Edge(1, 2), Edge(2, 12), Edge(12, 11))
    problem = Instance(nodes, edges, (DeviceType(ACCELERATOR, 2),))
    model = split_model("adjacent", inter_layer=True)
    round_trip = Plan((DeviceAssignment(ACCELERATOR, (0,), (), (12,), ()),
                       DeviceAssignment(ACCELERATOR, (1, 2, 11, 12), (), (11,), (11, 12))))
    assert evaluate_split(problem, round_trip, model).violations == (
        "the B tasks of devices 0 -> 1 -> 0 wait for each other in a cycle",)
    best, plan = brute_force_split(problem, model)
    solution = solve_split_milp(problem, model, "throughput", time_limit=20)
    assert (solution.status.value, solution.objective) == ("optimal", best)
    ran = simulate(problem, solution.plan, "1f1b-async", microbatches=64, w_placement="adjacent", inter_layer=True)
    assert ran.time_per_sample == pytest.approx(best, abs=1e-9)
    with pytest.raises(InvalidParameterError, match="wait for each other in a cycle"):
        simulate(problem, round_trip, "1f1b-async", 64, w_placement="adjacent")


def test_out_of_time_returns_the_unsplit_start() -> None:
    problem = two_layers()
    joint = placement.solve(problem)
    r = placement.solve(problem, backward="split", warm_start=joint, time_limit=1e-6)
    assert (r.status, r.value, r.verified) == ("feasible", 7.0, True)
    assert "the time limit ran out before the solver could start" in r.message


def test_weight_latencies_given_as_null_read_as_missing():
    """An optional field given as null reads as missing: weight latencies both null are the default
    share of the backward time, and the split optimum is the one without the fields."""
    data = json.loads((Path(__file__).resolve().parents[1] / "instances" / "tiny" / "training-pair.json").read_text())
    nulled = json.loads(json.dumps(data))
    backward = next(n for n in nulled["nodes"] if n["isBackwardNode"])
    backward["fpgaWeightLatency"] = backward["cpuWeightLatency"] = None
    plain, given = placement.load(data), placement.load(nulled)
    assert [n.weight_times for n in given.nodes] == [n.weight_times for n in plain.nodes] == [None] * len(plain.nodes)
    assert placement.solve(given, backward="split").value == placement.solve(plain, backward="split").value
    backward["cpuWeightLatency"] = 1.0   # one of the two given is still an error
    with pytest.raises(placement.InvalidInstanceError, match="field 'fpgaWeightLatency' must be a number, got null"):
        placement.load(nulled)


def _bound_at_every_breakpoint(problem: Instance, model) -> float:
    """split_lower_bound's LP bound for two device types, by its definition over its tasks (task_rows):
    Σ_i min_k λ_k p_k(i) at the single types, the uniform λ and every breakpoint t of
    λ = (t/count_1, (1−t)/count_2), each summed directly."""
    types = [k for k, t in enumerate(problem.device_types) if t.count > 0]
    counts = [problem.device_types[k].count for k in types]
    rows = task_rows(problem, model)

    def g(lam):
        total = 0.0
        for row in rows:
            best = min((p * l for p, l in zip(row, lam) if p != math.inf), default=math.inf)
            total += best if best != math.inf else 0.0
        return total

    lams = [[1 / counts[k] if j == k else 0.0 for j in range(len(types))] for k in range(len(types))]
    lams.append([1 / (len(types) * c) for c in counts])
    if len(types) == 2:
        for row in rows:
            a, b = row[0] / counts[0], row[1] / counts[1]
            if math.isfinite(a) and math.isfinite(b) and a + b > 0:
                t = b / (a + b)
                lams.append([t / counts[0], (1 - t) / counts[1]])
    return max(g(lam) for lam in lams)


@settings(max_examples=150, deadline=None)
@given(tiny_training(), st.sampled_from([0.0, 0.3, 1.0]))
def test_the_split_bound_takes_the_best_breakpoint(problem: Instance, share: float) -> None:
    """The bound searches the breakpoints in sorted order with running sums (a 20,000-node training chain
    spent 30 s on evaluating every one); its value is the best breakpoint's, summed as the definition does."""
    model = split_model("any", False, share)
    assert split_lower_bound(problem, model) == pytest.approx(_bound_at_every_breakpoint(problem, model),
                                                              rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("record, message", [
    ({"w_share": "x"}, "w_share must be a finite number ≥ 0 and ≤ 1, not 'x'"),
    ({"w_placement": "next"}, "w_placement must be one of 'any', 'adjacent', 'home', not 'next'"),
    ({"inter_layer": "yes"}, "inter_layer must be True or False, not 'yes'"),
])
def test_verify_refuses_a_bad_backward_record_as_the_plans_as_simulate_does(tmp_path, record, message):
    """A value the plan's backward record holds is the plan's fault, not a keyword's the caller never passed:
    verify raises InvalidPlanError, worded as simulate words it (and naming the file where the plan is one)."""
    from placement.errors import InvalidPlanError

    problem = placement.load(str(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "training-pair.json"))
    document = {"format": "placement-plan/1",
                "devices": [{"type": "accelerator", "nodes": [1, 4], "b_tasks": [4], "w_tasks": [3]},
                            {"type": "accelerator", "nodes": [2, 3], "b_tasks": [3], "w_tasks": [4]}],
                "backward": {"mode": "split", **record}}
    for check in (placement.verify, placement.simulate):
        with pytest.raises(InvalidPlanError) as caught:
            check(problem, document)
        assert str(caught.value) == f"the plan's backward record: {message}"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidPlanError) as caught:
        placement.verify(problem, str(path))
    assert str(caught.value) == f"{path}: the plan's backward record: {message}"
    name = next(iter(record))
    ok = {"w_share": 0.5, "w_placement": "any", "inter_layer": False}[name]
    assert placement.verify(problem, document, **{name: ok}).max_load == 11.0   # the keyword given replaces it


def test_verify_still_names_a_bad_keyword_the_caller_passes():
    problem = placement.load(str(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "training-pair.json"))
    document = {"devices": [{"type": "accelerator", "nodes": [1, 4]}, {"type": "accelerator", "nodes": [2, 3]}],
                "backward": {"mode": "split", "w_share": 0.5}}
    with pytest.raises(InvalidParameterError) as caught:
        placement.verify(problem, document, w_share=2)
    assert caught.value.parameter == "w_share"
    assert str(caught.value) == "w_share must be a finite number ≥ 0 and ≤ 1, not 2"


def _weights_given(everywhere: bool) -> Instance:
    """:func:`two_layers` with the W time given for b1 (1 of its 2) and, ``everywhere``, for b2 too (1 of its 6)."""
    nodes = [replace(n, weight_times=(1.0,)) if n.backward and (everywhere or n.id == 4) else n
             for n in two_layers().nodes]
    return replace(two_layers(), nodes=tuple(nodes))


def test_w_share_where_every_backward_node_gives_its_w_time_is_refused() -> None:
    # the share stands in for a W time only where a node gives none: here it would change nothing
    problem = _weights_given(everywhere=True)
    for call in (lambda: placement.solve(problem, backward="split", w_share=0.9),
                 lambda: placement.verify(problem, placement.solve(problem, backward="split"), backward="split",
                                          w_share=0.9)):
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert (info.value.parameter, info.value.detail) == (
            "w_share", "does not apply to this instance: every backward node gives its weight-gradient (W) time, "
                       "which w_share stands in for only where a node gives none")


@pytest.mark.parametrize("share, optimum", [(0.0, 7.0), (0.5, 5.0), (1.0, 7.0)])
def test_w_share_prices_the_backward_nodes_that_give_no_w_time(share: float, optimum: float) -> None:
    # b1 gives W = 1 (B = 1); b2 gives none: W(b2) = 6·share, B(b2) = 6 − W(b2). Stages {f1, B(b1)} = 2 and
    # {f2, B(b2)} = 7 − 6·share, the W tasks on either (the total is 10, one stage alone 10). Share 0: 7. Share 0.5:
    # W(b2) = 3 to the first and W(b1) = 1 to the second, 5 and 5. Share 1: W(b2) = 6 goes to the second (7) or the
    # first (8): 7.
    problem = _weights_given(everywhere=False)
    assert placement.solve(problem, backward="split", w_share=share).value == optimum
    assert brute_force_split(problem, split_model("any", False, share))[0] == optimum


def test_the_command_line_takes_no_w_share_where_every_backward_node_gives_its_w_time(tmp_path, capsys) -> None:
    """A split plan of such an instance checks as its file records it; a --w-share given is refused, on one line."""
    from placement.cli import main

    instance, plan = tmp_path / "weights.json", tmp_path / "plan.json"
    nodes = [{"id": n.id, "name": n.name, "times": {"accelerator": n.times[0]}, "isBackwardNode": int(n.backward),
              "colorClass": n.colour, **({"weightTimes": {"accelerator": 1.0}} if n.backward else {})}
             for n in two_layers().nodes]   # _weights_given(everywhere=True) as a file
    instance.write_text(json.dumps({"deviceTypes": [{"name": "accelerator", "count": 2, "paysComm": True}],
                                    "nodes": nodes, "edges": [{"sourceId": 1, "destId": 2, "cost": 0},
                                                              {"sourceId": 3, "destId": 4, "cost": 0}]}))
    assert placement.load(str(instance)).nodes == _weights_given(everywhere=True).nodes
    assert main(["solve", str(instance), "--backward", "split", "--quiet", "--out", str(plan)]) == 0
    assert main(["verify", str(instance), str(plan)]) == 0
    for command in (["solve", str(instance), "--backward", "split"], ["verify", str(instance), str(plan)]):
        capsys.readouterr()
        assert main([*command, "--w-share", "0.3"]) == 2
        assert capsys.readouterr().err == (
            "error: --w-share does not apply to this instance: every backward node gives its weight-gradient (W) "
            "time, which w_share stands in for only where a node gives none\n")
