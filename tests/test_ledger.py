"""The communication ledger: bytes across device boundaries against the charged communication."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placement
from placement.io.tarnawski import read_instance
from placement.problem.instance import Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.verification.evaluate import evaluate
from placement.report.ledger import format_ledger
from placement.verification.ledger import (AGREES, DISAGREES, NOT_CHARGED, UNCHECKED, NodeMismatch,
                                           communication_ledger, infer_time_per_byte)
from tests.strategies import plans, problems

ACC, CPU = "accelerator", "cpu"


def node(i: int, name: str, cost: float, backward: bool = False, colour: int | None = None) -> Node:
    return Node(i, name, (1.0, 1.0), 0.0, backward, colour, cost)


def chain(cost_c: float = 0.5) -> Instance:
    """a -> b -> c, b -> d, c -> d; sizes 8, 4, 4, 2 bytes; costs 2, 1, cost_c (ρ = 0.25 when cost_c = 0.5)."""
    nodes = [node(1, "a", 2.0), node(2, "b", 1.0), node(3, "c", cost_c), node(4, "d", 0.0)]
    edges = [Edge(1, 2, 8.0), Edge(2, 3, 4.0), Edge(2, 4, 4.0), Edge(3, 4, 2.0)]
    return make_two_type_problem(nodes, edges, 2, 1, 100.0, "chain")


PLAN = Plan((DeviceAssignment(ACC, (1,)), DeviceAssignment(ACC, (2, 3)), DeviceAssignment(CPU, (4,))))


def test_inference_chain_by_hand():
    ledger = communication_ledger(chain(), PLAN)
    assert ledger.time_per_byte.value == 0.25
    assert (ledger.time_per_byte.supporting, ledger.time_per_byte.sized) == (3, 3)
    d0, d1, d2 = ledger.devices
    # device 0 {a}: Out = {a}: 8 bytes; charged c(a) = 2 = 0.25·8
    assert (d0.activations_in, d0.activations_out, d0.charged, d0.ledger_time, d0.status) == (0, 8, 2, 2, AGREES)
    # device 1 {b, c}: In = {a} (8), Out = {b (b->d, 4), c (c->d, 2)}: charged 2 + 1 + 0.5 = 3.5 = 0.25·14
    assert (d1.activations_in, d1.activations_out, d1.charged, d1.ledger_time, d1.status) == (8, 6, 3.5, 3.5, AGREES)
    # device 2 (cpu) {d}: In = {b, c}: 4 + 2 bytes, pays no communication
    assert (d2.activations_in, d2.charged, d2.ledger_time, d2.status) == (6, 0, None, NOT_CHARGED)
    assert [(k.source, k.target, k.activations, k.errors) for k in ledger.links] == [(0, 1, 8, 0), (1, 2, 6, 0)]
    assert ledger.agrees and ledger.disagreements == ()
    assert format_ledger(ledger).splitlines()[-1] == "ledger agrees with the charged communication on every device"


def test_training_pair_counts_errors_backward():
    # f1 -> f2 (8 bytes), f2 -> b2 (4), b2 -> b1 (4), f1 -> b1 (8); colours {f1, b1}, {f2, b2}; ρ = 0.25
    nodes = [node(1, "f1", 2.0, colour=1), node(2, "f2", 1.0, colour=2),
             node(3, "b2", 1.0, backward=True, colour=2), node(4, "b1", 0.0, backward=True, colour=1)]
    edges = [Edge(1, 2, 8.0), Edge(2, 3, 4.0), Edge(3, 4, 4.0), Edge(1, 4, 8.0)]
    problem = make_two_type_problem(nodes, edges, 2, 0, 100.0)
    plan = Plan((DeviceAssignment(ACC, (1, 4)), DeviceAssignment(ACC, (2, 3))))
    ledger = communication_ledger(problem, plan)
    d0, d1 = ledger.devices
    # device 0: sends f1's activation (8), receives b2's error (4); charged c(f1) + c(b2) = 3 = 0.25·12
    assert (d0.activations_out, d0.errors_in, d0.activations_in, d0.errors_out) == (8, 4, 0, 0)
    # device 1: receives f1 (8), sends b2 (4); f2 -> b2 stays inside
    assert (d1.activations_in, d1.errors_out, d1.activations_out, d1.errors_in) == (8, 4, 0, 0)
    assert (d0.charged, d1.charged) == (3, 3) and ledger.agrees
    assert [(k.source, k.target, k.activations, k.errors) for k in ledger.links] == [(0, 1, 8, 0), (1, 0, 0, 4)]


def test_disagreement_names_device_and_node():
    # c(c) = 5 for a 2-byte tensor: two of three tensors share ρ = 0.25, c is off by a factor of 10
    ledger = communication_ledger(chain(cost_c=5.0), PLAN)
    assert ledger.time_per_byte.value == 0.25 and ledger.time_per_byte.supporting == 2
    d0, d1, _ = ledger.devices
    assert d0.status == AGREES
    assert (d1.status, d1.charged, d1.ledger_time) == (DISAGREES, 8.0, 3.5)
    assert d1.mismatches == (NodeMismatch(3, "c", 5.0, 2.0),)
    assert ledger.disagreements == ("device 1 (accelerator): charged 8, ledger 3.5: node 3 (c) costs 5 for 2 bytes",)
    text = format_ledger(ledger)
    assert ("ledger (informational: about the instance's data, not the plan, which is checked against the charged "
            "costs): the transfer costs of 1 boundary node are not the time per byte times their tensor sizes, on 1 "
            "device\n  device 1 (accelerator): charged 8") in text


def training_pair(cost_b2: float) -> Instance:
    """f1 -> f2 (8 bytes), f2 -> b2 (4), b2 -> b1 (4), f1 -> b1 (8); colours {f1, b1}, {f2, b2}; costs
    c(f1) = 2, c(f2) = 1 (ρ = 0.25 on f1's and f2's tensors), c(b2) = ``cost_b2`` for its 4 bytes."""
    nodes = [node(1, "f1", 2.0, colour=1), node(2, "f2", 1.0, colour=2),
             node(3, "b2", cost_b2, backward=True, colour=2), node(4, "b1", 0.0, backward=True, colour=1)]
    edges = [Edge(1, 2, 8.0), Edge(2, 3, 4.0), Edge(3, 4, 4.0), Edge(1, 4, 8.0)]
    return make_two_type_problem(nodes, edges, 2, 0, 100.0)


def test_training_disagreement_is_about_the_data_not_the_plan():
    """b2 costs 0 (a copy of a forward cost, as in the published training layer graphs) but sends 4 bytes:
    both devices disagree (device 0 receives b2's error, device 1 sends it), the evaluator charges the
    same In/Out as the ledger, and the plan stays valid; the summary says the finding is informational."""
    problem = training_pair(0.0)
    plan = Plan((DeviceAssignment(ACC, (1, 4)), DeviceAssignment(ACC, (2, 3))))
    ledger = communication_ledger(problem, plan)
    evaluation = evaluate(problem, plan)
    assert evaluation.valid
    # device 0 {f1, b1}: Out = {f1} (2), In = {b2} (0): charged 2, ledger 0.25·(8 + 4) = 3
    assert [(d.charged, d.ledger_time, d.status) for d in ledger.devices] == [(2, 3, DISAGREES), (2, 3, DISAGREES)]
    assert [d.charged for d in ledger.devices] == [r.comm for r in evaluation.devices]
    assert ledger.devices[0].mismatches == (NodeMismatch(3, "b2", 0.0, 4.0, backward=True),)
    assert ledger.summary == ("ledger (informational: about the instance's data, not the plan, which is checked "
                              "against the charged costs): the transfer costs of 1 boundary node (a backward node) "
                              "are not the time per byte times their tensor sizes, on 2 devices")
    assert communication_ledger(training_pair(1.0), plan).summary == (
        "ledger agrees with the charged communication on every device")


def test_a_split_backward_plan_is_refused():
    """A plan that places B or W tasks (the split model) pays transfers the ledger does not count: W(b2) on device 0
    reads f2's activation, which the split model charges both devices; the ledger counts the joint model's."""
    problem = training_pair(1.0)
    plan = Plan((DeviceAssignment(ACC, (1, 4), b_tasks=(4,), w_tasks=(3,)),
                 DeviceAssignment(ACC, (2, 3), b_tasks=(3,), w_tasks=(4,))))
    with pytest.raises(placement.InvalidParameterError) as info:
        communication_ledger(problem, plan)
    assert info.value.parameter == "plan"
    assert str(info.value) == ("plan places backward tasks (B or W) itself, as a split-backward plan does: the ledger "
                               "counts the transfers of the joint model, not those the split model charges "
                               "(docs/backward-split.md)")


def test_verify_exits_on_validity_alone_when_the_ledger_disagrees(tmp_path, capsys):
    """A valid plan on a training graph whose data the ledger faults: exit 0, and no line claims more."""
    from placement.cli import main

    instance = tmp_path / "pair.json"
    instance.write_text(json.dumps({
        "maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
        "nodes": [{"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1,
                   "isBackwardNode": int(name[0] == "b"), "colorClass": colour}
                  for i, name, colour in ((1, "f1", 1), (2, "f2", 2), (3, "b2", 2), (4, "b1", 1))],
        "edges": [{"sourceId": a, "destId": b, "cost": cost, "size": size}
                  for a, b, cost, size in ((1, 2, 2, 8), (2, 3, 1, 4), (3, 4, 0, 4), (1, 4, 2, 8))]}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 4]}, {"nodes": [2, 3]}], "cpus": []}))
    assert main(["verify", str(instance), str(plan)]) == 0
    out = capsys.readouterr().out
    assert "ledger (informational: about the instance's data, not the plan" in out
    assert "DISAGREES" not in out
    assert main(["verify", str(instance), str(plan), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["valid"], verdict["ledger_agrees"]) == (True, False)


def test_unsized_boundary_is_unchecked():
    problem = chain()
    problem = Instance(problem.nodes, (Edge(1, 2, None),) + problem.edges[1:], problem.device_types)
    ledger = communication_ledger(problem, PLAN)
    assert [d.status for d in ledger.devices] == [UNCHECKED, UNCHECKED, NOT_CHARGED]
    assert ledger.devices[0].unsized == (1,)
    assert ledger.disagreements[0] == "device 0 (accelerator): unchecked, no size for boundary nodes 1"
    assert not ledger.agrees
    assert ledger.verdict is None   # nothing disagrees: unchecked, not false


def test_no_sizes_at_all():
    problem = chain()
    problem = Instance(problem.nodes, tuple(Edge(e.src, e.dst) for e in problem.edges), problem.device_types)
    ledger = communication_ledger(problem, PLAN)
    assert ledger.time_per_byte.value is None
    assert ledger.disagreements == ("no edge carries a tensor size above 0: the ledger cannot be checked",)
    assert ledger.verdict is None
    assert placement.verify(problem, PLAN, ledger=True).ledger is None   # "ledger_agrees": null in JSON


def test_largest_crossing_edge_counts():
    # b feeds c with 4 bytes and d with 6: a device holding b alone sends 6; one holding c alone receives 4
    nodes = [node(1, "b", 1.5), node(2, "c", 0.0), node(3, "d", 0.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2, 4.0), Edge(1, 3, 6.0)], 3, 0, 100.0)
    plan = Plan(tuple(DeviceAssignment(ACC, (v,)) for v in (1, 2, 3)))
    ledger = communication_ledger(problem, plan)
    assert [(d.activations_out, d.activations_in) for d in ledger.devices] == [(6, 0), (0, 4), (0, 6)]
    assert [(k.target, k.activations) for k in ledger.links] == [(1, 4), (2, 6)]


def test_time_per_byte_ties_go_to_more_bytes():
    # two tensors at ratio 0.5 (2 + 2 bytes), two at ratio 0.25 (8 + 8 bytes): equal counts, more bytes wins
    nodes = [node(1, "p", 1.0), node(2, "q", 1.0), node(3, "r", 2.0), node(4, "s", 2.0), node(5, "t", 0.0)]
    edges = [Edge(1, 5, 2.0), Edge(2, 5, 2.0), Edge(3, 5, 8.0), Edge(4, 5, 8.0)]
    rho = infer_time_per_byte(make_two_type_problem(nodes, edges, 1, 0, 100.0))
    assert (rho.value, rho.supporting, rho.sized) == (0.25, 2, 4)


@st.composite
def consistent_problems(draw):
    """A random problem whose every edge carries 4·c(source) bytes (ρ = 0.25), and a plan for it."""
    problem = draw(problems())
    edges = tuple(Edge(e.src, e.dst, 4 * problem.node(e.src).out_cost) for e in problem.edges)
    problem = Instance(problem.nodes, edges, problem.device_types)
    return problem, draw(plans(problem, unplaced=False))


@settings(max_examples=150)
@given(consistent_problems())
def test_ledger_agrees_with_the_evaluator_when_sizes_are_consistent(case):
    problem, plan = case
    ledger = communication_ledger(problem, plan)
    evaluation = evaluate(problem, plan)
    assert ledger.agrees, ledger.disagreements
    for traffic, report in zip(ledger.devices, evaluation.devices):
        if traffic.status == NOT_CHARGED:
            continue
        assert traffic.charged == report.comm                    # the evaluator's independent sum
        if ledger.time_per_byte.value is not None:
            assert traffic.ledger_time == report.comm
    for link in ledger.links:                                     # a link carries part of both ends' traffic
        sent, received = ledger.devices[link.source], ledger.devices[link.target]
        assert link.activations <= sent.activations_out and link.activations <= received.activations_in
        assert link.errors <= sent.errors_out and link.errors <= received.errors_in
    for traffic in ledger.devices:                                # every tensor sent reaches some device
        out = [k for k in ledger.links if k.source == traffic.position]
        assert sum(k.activations + k.errors for k in out) >= traffic.bytes_out


# ----------------------------------------------------------------------------------------
# the published instances (../shared; skipped when absent)
# ----------------------------------------------------------------------------------------

THROUGHPUT = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "throughput-inputs"
SMALL = sorted(p for p in THROUGHPUT.rglob("*.json") if "inceptionv3" not in p.name) if THROUGHPUT.is_dir() else []
# In these three, every backward node's transfer cost is its forward mate's, while its out-edges
# carry the backward tensors' own sizes; the ledger must report them.
INCONSISTENT = {"LayerGraphs/bert24_training", "LayerGraphs/gnmt_training", "LayerGraphs/resnet50_training"}


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.skipif(not THROUGHPUT.is_dir(), reason=f"published instances not found at {THROUGHPUT}")
@pytest.mark.parametrize("path", SMALL, ids=_key)
def test_ledger_on_dp_plans_of_published_instances(path):
    from placement.solvers.dp import solve_dp

    problem = read_instance(path)
    plan = solve_dp(problem).plan
    ledger = communication_ledger(problem, plan)
    # LayerGraphs: 2^-31 time units per byte; OperatorGraphs: 1000·2^-31
    expected = 2.0 ** -31 if path.parent.name == "LayerGraphs" else 1000 * 2.0 ** -31
    assert ledger.time_per_byte.value == pytest.approx(expected, rel=1e-12)
    evaluation = evaluate(problem, plan)
    for traffic, report in zip(ledger.devices, evaluation.devices):
        if traffic.status != NOT_CHARGED:
            assert traffic.charged == pytest.approx(report.comm, rel=1e-12)
    if _key(path) not in INCONSISTENT:
        assert ledger.agrees, ledger.disagreements
        return
    assert not ledger.agrees
    mismatched = [m for d in ledger.devices for m in d.mismatches]
    assert mismatched
    for m in mismatched:
        backward = problem.node(m.node)
        mate = next(n for n in problem.nodes if n.colour == backward.colour and not n.backward)
        assert backward.backward and m.cost == mate.out_cost
        assert m.cost != pytest.approx(expected * m.bytes, rel=1e-9)


def test_ledger_imports_no_solver_and_not_the_evaluator():
    """The ledger is verification code: it recomputes from the Instance, importing neither solvers nor the evaluator."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys, placement.verification.ledger; "
            "print(sorted(m for m in sys.modules if m.startswith('placement.solvers') "
            "or m == 'placement.verification.evaluate'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_costs_rounded_to_the_recorded_quantum_agree():
    """A chain a → b → c whose tensors of 3, 7 and 1000 bytes cost ρ = 1/3 time unit per byte, rounded to the
    nearest multiple of q = 1/16 as the model importers round them: 1, 2.3125 and 333.3125 (333.333… is
    333 + 5.33/16). The ratios differ by up to q/2 over the size (1/96 for 3 bytes), far beyond 1e-9; with the
    quantum the file records, they are one bandwidth, ρ the 1000-byte tensor's (333.3125/1000), and every
    device agrees. Without it, the ledger finds a device that disagrees; a cost that is off by more (b's
    doubled) still disagrees with it."""
    def document(costs, quantum):
        about = {} if quantum is None else {"about": {"time_quantum_ms": quantum}}
        nodes = [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 1} for i in range(4)]
        edges = [{"sourceId": i, "destId": i + 1, "cost": c, "size": s}
                 for i, (c, s) in enumerate(zip(costs, (3, 7, 1000)))]
        return {"maxSizePerFPGA": 100, "maxFPGAs": 4, "maxCPUs": 0, "nodes": nodes, "edges": edges, **about}

    rounded = [1.0, 2.3125, 333.3125]
    assert [round(s / 3 * 16) / 16 for s in (3, 7, 1000)] == rounded
    plan = Plan(tuple(DeviceAssignment("accelerator", (i,)) for i in range(4)))
    problem = placement.load(document(rounded, 1 / 16))
    assert problem.time_quantum == 1 / 16
    ledger = communication_ledger(problem, plan)
    assert (ledger.time_per_byte.value, ledger.time_per_byte.supporting) == (0.3333125, 3)
    assert [d.status for d in ledger.devices] == [AGREES] * 4 and ledger.agrees
    assert DISAGREES in [d.status for d in communication_ledger(placement.load(document(rounded, None)), plan).devices]
    doubled = placement.load(document([1.0, 4.625, 333.3125], 1 / 16))
    assert [m.node for d in communication_ledger(doubled, plan).devices for m in d.mismatches] == [1, 1]
    with pytest.raises(placement.InvalidInstanceError) as info:   # not a number: refused, not read as none recorded
        placement.load(document(rounded, "fine"))
    assert str(info.value) == ("instance: field 'about.time_quantum_ms' must be a finite number ≥ 0 (0: none "
                               "recorded), got 'fine'")
    import dataclasses
    import math

    for bad in (math.nan, -1.0, math.inf):   # given through the API, it is checked as the instance is
        with pytest.raises(placement.InvalidInstanceError, match=r"^time_quantum must be a finite number ≥ 0 "):
            dataclasses.replace(problem, time_quantum=bad)


def test_latency_calls_of_one_accelerator_each_pay_their_boundary():
    """a -> b on one accelerator as two calls: a's 8 bytes go out after the first call and come back
    for the second, and the latency schedule charges both transfers (send 1, receive 1)."""
    problem = make_two_type_problem([node(1, "a", 1.0), node(2, "b", 0.0)], [Edge(1, 2, 8.0)], 1, 1, 100.0, "pair")
    plan = Plan((DeviceAssignment(ACC, (1, 2), calls=((1,), (2,))),))
    check = placement.verify(problem, plan, objective="latency", ledger=True)
    _, latency, ledger = check.report
    assert [(c.receive, c.send) for c in latency.calls] == [(0.0, 1.0), (1.0, 0.0)]
    (device,) = ledger.devices
    assert (device.activations_in, device.activations_out, device.charged, device.ledger_time,
            device.status) == (8, 8, 2, 2, AGREES)
    assert check.ledger is True
    # the throughput loads take no account of calls: the device is one set, with no boundary
    (device,) = placement.verify(problem, plan, ledger=True).report[2].devices
    assert (device.activations_in, device.activations_out, device.charged) == (0, 0, 0)


@pytest.mark.parametrize("problem, kind", [("instances/tiny/chain4.json", "str"), (None, "NoneType")])
def test_a_problem_that_is_no_instance_is_refused_by_name(problem, kind):
    """An instance file's name, as the plan may be one, ended the ledger in an AttributeError ('str' object has no
    attribute 'time_quantum')."""
    plan = Plan((DeviceAssignment("accelerator", (1, 2, 3, 4)),))
    with pytest.raises(placement.InvalidParameterError) as error:
        communication_ledger(problem, plan)
    assert str(error.value) == f"problem must be an Instance (placement.load reads one from a file), not {kind}"


def test_a_misspelt_keyword_of_the_ledger_names_the_one_meant():
    """docs/hypar.md calls communication_ledger from Python: it said only 'got an unexpected keyword argument',
    where placement.verify names the keyword meant."""
    with pytest.raises(TypeError) as error:
        communication_ledger(chain(), PLAN, by_cal=True)
    assert str(error.value) == "communication_ledger() got an unexpected keyword argument 'by_cal'; did you mean " \
                               "'by_call'?"
