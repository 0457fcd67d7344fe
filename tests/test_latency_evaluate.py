"""The latency evaluator (placement.verification.latency): hand-solved schedules, every violation, and
agreement with a plain fixed-point reference on random plans."""

from __future__ import annotations

import ast
import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.errors import InvalidParameterError
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance, make_two_type_problem
from placement.plan import DeviceAssignment, Plan
from placement.report.latency import format_latency
from placement.problem.bounds import latency_lower_bound
from placement.verification.latency import evaluate_latency

from tests.strategies import plans, problems

A, C = ACCELERATOR, CPU
CYCLE = "calls cannot be scheduled, they wait on each other in a cycle (each must end before the next can start): "


def node(i, acc, cpu, cost=0.0, memory=1.0, colour=None):
    return Node(i, f"n{i}", (acc, cpu), float(memory), False, colour, float(cost))


@pytest.mark.parametrize("listing", list(itertools.permutations(range(4)))[::5])
@pytest.mark.parametrize("order", list(itertools.permutations([1, 2, 3])))
def test_a_call_s_time_does_not_depend_on_the_order_nodes_are_listed_in(listing, order):
    """1, 2, 3 -> 4 with times and costs 0.1, 0.2, 0.3: left to right they sum to 0.6000000000000001,
    right to left to 0.6, the exactly rounded sum, which every listing gives."""
    nodes = [node(1, 0.1, 1.0, 0.1), node(2, 0.2, 1.0, 0.2), node(3, 0.3, 1.0, 0.3), node(4, 1.0, 1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 4), Edge(2, 4), Edge(3, 4)], 2, 1, 10)
    problem = Instance(tuple(problem.nodes[i] for i in listing), problem.edges[::-1], problem.device_types)
    ev = evaluate_latency(problem, plan(DeviceAssignment(A, order), DeviceAssignment(A, (4,))))
    # call 0: receive nothing, compute 0.6, send 0.6; call 1: receive 0.6, compute 1, send nothing
    assert [(c.receive, c.compute, c.send) for c in ev.calls] == [(0.0, 0.6, 0.6), (0.6, 1.0, 0.0)]
    assert ev.latency == (0.6 + 0.6) + (0.6 + 1.0)


@pytest.fixture
def chain() -> Instance:
    """1 -> 2 -> 3; accelerator times 1, 2, 3; CPU times 10, 20, 1; c(1) = 0.5, c(2) = 0.25, c(3) = 0."""
    nodes = [node(1, 1.0, 10.0, 0.5), node(2, 2.0, 20.0, 0.25), node(3, 3.0, 1.0)]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 10, name="chain")


def plan(*devices: DeviceAssignment) -> Plan:
    return Plan(tuple(devices))


def test_one_call_holds_everything(chain):
    # no boundary at all: 1 + 2 + 3
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 2, 3))))
    assert ev.valid and ev.latency == 6.0
    (call,) = ev.calls
    assert (call.inputs, call.outputs, call.receive, call.compute, call.send) == ((), (), 0.0, 6.0, 0.0)
    assert (call.start, call.end) == (0.0, 6.0)
    assert dict(ev.node_finish) == {1: 6.0, 2: 6.0, 3: 6.0}
    assert ev.memory == (3.0,)


def test_two_accelerators_and_a_cpu(chain):
    # call {1}: compute 1, send c(1) = 0.5            -> [0, 1.5]
    # call {2}: receive 0.5, compute 2, send 0.25     -> [1.5, 4.25]
    # node 3 on the CPU: starts at 4.25, runs 1        -> 5.25
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1,)), DeviceAssignment(A, (2,)), DeviceAssignment(C, (3,))))
    assert ev.valid and ev.latency == 5.25
    assert [(c.start, c.end) for c in ev.calls] == [(0.0, 1.5), (1.5, 4.25)]
    assert [(c.inputs, c.outputs) for c in ev.calls] == [((), (1,)), ((1,), (2,))]
    (cpu,) = ev.cpu_nodes
    assert (cpu.node, cpu.device, cpu.start, cpu.end) == (3, 2, 4.25, 5.25)
    assert ev.critical == ("device 0 call 0", "device 1 call 0", "cpu node 3")


def test_two_calls_on_one_accelerator(chain):
    # call 0 of device 0, {1}: [0, 1.5]; device 1, {2}: [1.5, 4.25];
    # call 1 of device 0, {3}: waits for 2 (4.25), receives c(2) = 0.25, computes 3 -> 7.5
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 3), ((1,), (3,))), DeviceAssignment(A, (2,))))
    assert ev.valid and ev.latency == 7.5
    assert [(c.device, c.index, c.start, c.end) for c in ev.calls] == [(0, 0, 0.0, 1.5), (0, 1, 4.25, 7.5),
                                                                       (1, 0, 1.5, 4.25)]
    assert ev.memory == (2.0, 1.0)   # memory of device 0 summed over its two calls


def test_calls_in_the_wrong_order_deadlock(chain):
    # call 0 {3} needs 2 (device 1), which needs 1, which is in call 1 and so waits for call 0:
    # call 0 must end before call 1, call 1 (node 1) before device 1's call, and that before call 0
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 3), ((3,), (1,))), DeviceAssignment(A, (2,))))
    assert ev.violations == (CYCLE +
                             "device 0 call 0 -> device 0 call 1 -> device 1 call 0 -> device 0 call 0",)
    assert ev.latency == math.inf and all(math.isinf(c.start) for c in ev.calls)


def test_a_call_that_is_not_contiguous(chain):
    # {1, 3} in one call: the path 1 -> 2 -> 3 leaves it and re-enters; the call waits for its own output
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 3)), DeviceAssignment(A, (2,))))
    assert ev.violations == (
        "device 0 (accelerator) call 0: path 1 -> 2 -> 3 leaves and re-enters the call",
        CYCLE + "device 0 call 0 -> device 1 call 0 -> device 0 call 0")
    assert ev.latency == math.inf


def test_contiguous_sets_feeding_each_other_deadlock():
    # a -> b and b2 -> a2 with {a, a2} on device 0 and {b, b2} on device 1: each set is contiguous,
    # but each call needs the other's output before it can start
    nodes = [node(1, 1.0, 1.0), node(2, 1.0, 1.0), node(3, 1.0, 1.0), node(4, 1.0, 1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(3, 4)], 2, 0, 10)
    ev = evaluate_latency(problem, plan(DeviceAssignment(A, (1, 4)), DeviceAssignment(A, (2, 3))))
    assert ev.violations == (CYCLE +
                             "device 0 call 0 -> device 1 call 0 -> device 0 call 0",)
    # the same sets as two calls each, in a good order, are fine: [1] then [2], [3] then [4]
    ok = evaluate_latency(problem, plan(DeviceAssignment(A, (1, 4), ((1,), (4,))),
                                        DeviceAssignment(A, (2, 3), ((3,), (2,)))))
    # device 0: {1} [0, 1]; device 1: {3} [0, 1], then {2} waits for 1 -> [1, 2]; device 0: {4} [1, 2]
    assert ok.valid and ok.latency == 2.0


def test_an_accelerator_runs_its_calls_one_after_another():
    """s (CPU only, 5 ms, c(s) = 1) -> y; x independent; y and x on one accelerator as two calls.

    Order (x), (y): x [0, 3]; y waits for s (5) and the device (3): [5, 5 + 1 + 2] -> 8.
    Order (y), (x): y [5, 8]; x only after y: [8, 11] -> 11, although x's inputs were ready at 0.
    """
    nodes = [Node(1, "s", (None, 5.0), 0.0, False, None, 1.0), node(2, 2.0, 50.0), node(3, 3.0, 50.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2)], 1, 1, 10)
    good = evaluate_latency(problem, plan(DeviceAssignment(A, (3, 2), ((3,), (2,))), DeviceAssignment(C, (1,))))
    bad = evaluate_latency(problem, plan(DeviceAssignment(A, (3, 2), ((2,), (3,))), DeviceAssignment(C, (1,))))
    assert (good.valid, good.latency, bad.valid, bad.latency) == (True, 8.0, True, 11.0)


def test_cpu_nodes_run_in_parallel_without_limit():
    # s -> l, s -> r, l -> t, r -> t, all on one CPU core: l and r overlap, t = 1 + max(6, 4) + 2 = 9
    nodes = [node(1, 1.0, 1.0, 1.0), node(2, 1.0, 6.0, 1.0), node(3, 1.0, 4.0, 1.0), node(4, 1.0, 2.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3), Edge(2, 4), Edge(3, 4)], 1, 1, 10)
    ev = evaluate_latency(problem, plan(DeviceAssignment(C, (1, 2, 3, 4))))
    assert ev.valid and ev.latency == 9.0 and ev.calls == ()
    assert {r.node: (r.start, r.end) for r in ev.cpu_nodes} == {1: (0.0, 1.0), 2: (1.0, 7.0), 3: (1.0, 5.0),
                                                                4: (7.0, 9.0)}


def test_memory_is_summed_over_calls():
    nodes = [node(1, 1.0, 1.0, memory=1.0), node(2, 1.0, 1.0, memory=1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2)], 1, 0, 1.5)
    ev = evaluate_latency(problem, plan(DeviceAssignment(A, (1, 2), ((1,), (2,)))))
    assert ev.violations == ("device 0 (accelerator): memory 2 exceeds the bound 1.5",)
    assert ev.latency == 2.0   # times are still computed: 1, then 1 more (c = 0)


@pytest.mark.parametrize("device, message, sound", [
    (DeviceAssignment(A, (1, 2, 3), ((1,), (1, 2, 3))), "device 0 (accelerator): node 1 is in calls 0 and 1", False),
    (DeviceAssignment(A, (1, 2, 3), ((1, 2),)), "device 0 (accelerator): node 3 is in none of its calls", False),
    (DeviceAssignment(A, (1, 2, 3), ((1, 2, 3), ())), "device 0 (accelerator): call 1 is empty", True),
    (DeviceAssignment(A, (1, 2, 3), ((1, 1, 2, 3),)), "device 0 (accelerator): node 1 is listed twice in call 0", True),
])
def test_calls_must_partition_the_device(chain, device, message, sound):
    ev = evaluate_latency(chain, plan(device))
    assert ev.violations == (message,)
    assert (ev.latency == 6.0) is sound and (ev.latency == math.inf) is not sound


def test_a_call_with_a_node_the_device_does_not_list(chain):
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 2), ((1, 2), (3,)))))
    assert ev.violations == ("node 3 is not placed",
                             "device 0 (accelerator): call 1 holds node 3, which the device does not list")
    assert ev.latency == math.inf and set(ev.node_finish.values()) == {math.inf}


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_malformed_calls_are_violations_whatever_the_objective(chain, objective):
    # the loads of throughput take no account of calls, but a plan listing them wrongly is still wrong
    from placement.verification.check import check_plan
    bad = plan(DeviceAssignment(A, (1, 2), ((1,), (3,))), DeviceAssignment(A, (3,)))
    verdict = check_plan(chain, bad, objective=objective)
    assert not verdict.valid
    assert set(verdict.violations) >= {"device 0 (accelerator): call 1 holds node 3, which the device does not list",
                                       "device 0 (accelerator): node 2 is in none of its calls"}
    good = plan(DeviceAssignment(A, (1, 2), ((1,), (2,))), DeviceAssignment(A, (3,)))
    assert check_plan(chain, good, objective=objective).valid


def test_a_cpu_has_no_calls(chain):
    ev = evaluate_latency(chain, plan(DeviceAssignment(C, (1, 2, 3), ((1, 2, 3),))))
    assert ev.violations == ("device 0 (cpu): has calls, but a device that pays no communication runs each "
                             "node on its own",)


def test_placement_violations_come_from_the_structural_evaluator(chain):
    ev = evaluate_latency(chain, plan(DeviceAssignment(A, (1, 2)), DeviceAssignment(A, (2, 3, 9))))
    assert ev.violations == ("device 1 (accelerator): node 9 is not in the instance",
                             "node 2 is placed 2 times (devices 0, 1)")
    assert ev.latency == math.inf


def test_training_graphs_are_refused():
    nodes = (Node(0, "f", (1.0, 1.0), colour=0), Node(1, "b", (1.0, 1.0), backward=True, colour=0))
    problem = Instance(nodes, (Edge(0, 1),), (DeviceType(A, 1), DeviceType(C, 1, math.inf, False)))
    with pytest.raises(InvalidParameterError, match="^objective 'latency' is for inference graphs; "
                                                    "this instance has backward nodes$"):
        evaluate_latency(problem, plan(DeviceAssignment(A, (0, 1))))


def test_text_report(chain):
    text = format_latency(chain, evaluate_latency(chain, plan(DeviceAssignment(A, (1, 3), ((1,), (3,))),
                                                              DeviceAssignment(A, (2,)))))
    lines = text.splitlines()
    assert lines[0].split() == ["device", "call", "type", "#nodes", "start", "receive", "compute", "send", "end",
                                "nodes"]
    assert lines[3].split() == ["0", "1", "accelerator", "1", "4.25", "0.25", "3", "0", "7.5", "n3"]
    assert "instance chain: latency 7.5" in lines
    assert lines[-1] == "valid: no violations"
    bad = format_latency(chain, evaluate_latency(chain, plan(DeviceAssignment(A, (1, 3)), DeviceAssignment(A, (2,)))))
    assert "INVALID: 2 violations" in bad and "latency not computed (see the violations)" in bad


def test_text_report_counts_the_cpu_nodes_in_words(chain):
    """One CPU node is 'node', not '1 nodes', and is not 'the last' of one; two are counted as before."""
    one = format_latency(chain, evaluate_latency(chain, plan(DeviceAssignment(A, (1, 2)), DeviceAssignment(C, (3,)))))
    assert ("1 node on CPU (it runs alone, as soon as its inputs are ready), finishing at 4.25 (node 3)"
            in one.splitlines())
    two = format_latency(chain, evaluate_latency(chain, plan(DeviceAssignment(A, (1,)), DeviceAssignment(C, (2, 3)))))
    assert ("2 nodes on CPU (each runs alone, as soon as its inputs are ready); the last finishes at 22.5 (node 3)"
            in two.splitlines())


# ----------------------------------------------------------------------------------------
# agreement with a plain reference: relax every start time until nothing changes
# ----------------------------------------------------------------------------------------

def reference_latency(problem: Instance, plan: Plan) -> float:
    """Bellman-Ford style: from all-zero times, repeatedly apply the model's rules; inf if they never settle."""
    preds: dict[int, set[int]] = {n.id: set() for n in problem.nodes}
    for e in problem.edges:
        preds[e.dst].add(e.src)
    cost = {n.id: n.out_cost for n in problem.nodes}
    tasks = []   # (device index, call set, duration) for accelerator calls; (None, {v}, p) for CPU nodes
    for dev in plan.devices:
        t = problem.type_index(dev.type)
        if problem.device_types[t].pays_comm:
            for call in dev.calls or (dev.nodes,):
                s = set(call)
                ins = {u for v in s for u in preds[v] if u not in s}
                outs = {u for u in s if any(u in preds[w] and w not in s for w in preds)}
                tasks.append((dev, s, sum(cost[u] for u in ins) + sum(problem.node(v).times[t] or 0.0 for v in s)
                              + sum(cost[u] for u in outs)))
        else:
            tasks.extend((None, {v}, problem.node(v).times[t] or 0.0) for v in dev.nodes)
    finish = {n.id: 0.0 for n in problem.nodes}
    end = [0.0] * len(tasks)
    for _ in range(len(tasks) + 2):
        changed = False
        for i, (dev, s, duration) in enumerate(tasks):
            ready = [finish[u] for v in s for u in preds[v] if u not in s]
            if dev is not None and i > 0 and tasks[i - 1][0] is dev:
                ready.append(end[i - 1])
            new = max(ready, default=0.0) + duration
            if new != end[i]:
                end[i], changed = new, True
            for v in s:
                finish[v] = end[i]
        if not changed:
            return max(finish.values())
    return math.inf


@st.composite
def latency_cases(draw):
    problem = draw(problems(max_nodes=7, training=False))
    base = draw(plans(problem, unplaced=False))
    devices = []
    for dev in base.devices:
        if dev.type == A and len(dev.nodes) > 1 and draw(st.booleans()):
            labels = [draw(st.integers(0, 2)) for _ in dev.nodes]
            order = draw(st.permutations(sorted(set(labels))))
            calls = tuple(tuple(v for v, lab in zip(dev.nodes, labels) if lab == k) for k in order)
            devices.append(DeviceAssignment(dev.type, dev.nodes, calls))
        else:
            devices.append(dev)
    return problem, Plan(tuple(devices))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(latency_cases())
def test_agrees_with_the_reference_and_the_bound(case):
    problem, p = case
    ev = evaluate_latency(problem, p)
    cycle = any(v.startswith("calls cannot be scheduled") for v in ev.violations)
    assert ev.latency == (math.inf if cycle else reference_latency(problem, p))
    assert all(math.isfinite(x) for x in ev.node_finish.values()) is not cycle
    if ev.valid:
        assert ev.latency >= latency_lower_bound(problem)
        for c in ev.calls:
            assert c.end == c.start + c.duration and c.duration == c.receive + c.compute + c.send


def test_evaluator_imports_no_solver():
    source = (Path(__file__).resolve().parents[1] / "placement" / "verification" / "latency.py").read_text()
    imported = []
    for stmt in ast.walk(ast.parse(source)):
        if isinstance(stmt, ast.ImportFrom):
            imported.append(stmt.module or "")
        elif isinstance(stmt, ast.Import):
            imported.extend(alias.name for alias in stmt.names)
    assert imported and not any("solvers" in m for m in imported)
    root = Path(__file__).resolve().parents[1]
    code = ("import sys, placement.verification.latency; "
            "print(sorted(m for m in sys.modules if m.startswith('placement.solvers')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_long_run_of_cpu_nodes_in_the_critical_chain_is_shown_by_its_ends():
    from placement.report.latency import CPU_RUN_SHOWN, chain_text

    short = ("device 0 call 0",) + tuple(f"cpu node {i}" for i in range(CPU_RUN_SHOWN))
    assert chain_text(short) == " -> ".join(short)   # a run of CPU_RUN_SHOWN nodes is shown whole
    long = ("epyc node 7", "device 0 call 0") + tuple(f"epyc node {i}" for i in range(10, 30_010)) + ("device 1 call 0",)
    assert chain_text(long) == ("epyc node 7 -> device 0 call 0 -> epyc node 10 -> ... 29,998 more CPU nodes ... "
                                "-> epyc node 30009 -> device 1 call 0")
