"""The latency MILP (placement.solvers.milp.latency) against the latency brute force.

Both judge plans with the independent latency evaluator (placement.verification.latency); the
brute force enumerates every assignment and every ordered split of each accelerator's
nodes into at most q calls, so agreement checks the MILP's rows, for q = 1 and q = 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

import placement
from placement.errors import InvalidParameterError
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Node, Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Status
from placement.testing.bruteforce_latency import brute_force_latency
from placement.solvers.milp import solve_milp
from placement.solvers.milp.backends import backend_availability
from placement.verification.latency import evaluate_latency
from tests.proofs import claimable
from tests.strategies import problems, trust_instances
from tests.test_milp_classes import Failures

ROOT = Path(__file__).resolve().parents[1]
AVAILABLE = [name for name, ok, _ in backend_availability() if ok and ":" not in name]
EXAMPLES = {"cp-sat": 120, "cbc": 25, "scip": 25, "highs": 25, "pulp": 12}


@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize("backend", AVAILABLE)
def test_latency_matches_brute_force(backend: str, calls: int) -> None:
    @settings(max_examples=EXAMPLES[backend] // calls, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(problems(max_nodes=5 if calls == 1 else 4, training=False, max_accelerators=2, max_cpus=1))
    def run(problem: Instance) -> None:
        truth = brute_force_latency(problem, max_calls=calls)
        milp = solve_milp(problem, objective="latency", calls=calls, backend=backend, time_limit=30)
        if failures.tolerated(milp):
            return
        assert milp.status is claimable(truth.status, backend, problem), milp.message
        if truth.status is Status.OPTIMAL:
            ev = evaluate_latency(problem, milp.plan)
            assert ev.valid, ev.violations
            assert milp.objective == ev.latency == truth.objective, milp.message
            assert milp.bound == milp.objective

    for found in trust_instances("latency-calls1.json"):  # the MILP returned a start with too many calls
        run = example(found)(run)
    failures = Failures(backend)
    run()
    failures.check()


def fork() -> Instance:
    """s → l, s → r, l → t, r → t; one accelerator (memory unbounded), CPUs.

    Accelerator times s=1, l=4, r=4, t=1; CPU times s=1, l=6, r=6, t=1; every transfer
    costs 1 (s, l, r; t has no successor).
    * All on the accelerator, one call: 1 + 4 + 4 + 1 = 10, no transfer: latency 10.
    * s and t on the CPU, l and r in one call: s finishes at 1; the call receives s (1),
      computes 8, sends l and r (2): ends at 12; t at 13. Worse.
    * l on the accelerator, everything else on the CPU: s at 1; the call lasts 1 + 4 + 1 = 6
      (receive s, compute l, send l) and ends at 7; r on the CPU ends at 1 + 6 = 7; t at 8.
    * Nothing beats 8: the exhaustive search over every plan (asserted below) agrees.
    """
    nodes = (Node(0, "s", (1.0, 1.0), out_cost=1.0), Node(1, "l", (4.0, 6.0), out_cost=1.0),
             Node(2, "r", (4.0, 6.0), out_cost=1.0), Node(3, "t", (1.0, 1.0)))
    return Instance(nodes, (Edge(0, 1), Edge(0, 2), Edge(1, 3), Edge(2, 3)),
                   (DeviceType(ACCELERATOR, 1), DeviceType(CPU, 1, math.inf, False)), name="fork")


def test_fork_by_hand() -> None:
    problem = fork()
    whole = Plan((DeviceAssignment(ACCELERATOR, (0, 1, 2, 3)),))
    assert evaluate_latency(problem, whole).latency == 10.0
    split = Plan((DeviceAssignment(ACCELERATOR, (1,)), DeviceAssignment(CPU, (0, 2, 3))))
    assert evaluate_latency(problem, split).latency == 8.0
    solution = solve_milp(problem, objective="latency")
    assert (solution.status, solution.objective) == (Status.OPTIMAL, 8.0), solution.message
    assert brute_force_latency(problem).objective == 8.0


def test_latency_rejects_training_graphs() -> None:
    nodes = (Node(0, "f", (1.0, 1.0), colour=0), Node(1, "b", (1.0, 1.0), backward=True, colour=0))
    problem = Instance(nodes, (Edge(0, 1),), (DeviceType(ACCELERATOR, 1), DeviceType(CPU, 1, math.inf, False)))
    with pytest.raises(InvalidParameterError, match="^objective 'latency' is for inference graphs; "
                                                    "this instance has backward nodes$"):
        solve_milp(problem, objective="latency")


def test_a_start_with_more_calls_than_allowed_is_ignored():
    # chain4 on one accelerator as two calls {a, b}, {c, d}: valid with calls=2, not with calls=1. The
    # start must neither bound the model nor come back as the answer; the one-call optimum is the whole
    # chain in one call, 4 + 3 + 2 + 5 = 14 (no transfer).
    pytest.importorskip("ortools")
    start = Plan((DeviceAssignment("accelerator", (1, 2, 3, 4), ((1, 2), (3, 4))),))
    result = placement.solve(ROOT / "instances" / "tiny" / "chain4.json", method="milp", objective="latency",
                             calls=1, warm_start=start)
    assert (result.status, result.value, result.verified) == ("optimal", 14.0, True)
    assert ("warm start ignored: device 0 (accelerator) runs 2 calls, more than the limit of 1 call per accelerator"
            in result.message)


def test_published_calls_limit_case():
    """../shared/trust/latency-calls1.json: the default start (the latency greedy) runs two calls on an
    accelerator; with calls=1 the optimum is 21.445 on every backend."""
    path = ROOT.parent / "shared" / "trust" / "latency-calls1.json"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    for backend in AVAILABLE:
        result = placement.solve(path, method="milp", objective="latency", calls=1, backend=backend)
        assert (result.status, result.verified) == ("optimal", True), (backend, result.message)
        assert result.value == pytest.approx(21.445, rel=1e-9), backend
        assert all(len(stage.calls) <= 1 for stage in result.plan)


def memory_bound_cores(cores: int) -> Instance:
    """Two independent nodes, 10 each on the one accelerator and 1 each on a core of a type that pays
    no communication and holds 1 byte; each node takes 1 byte.

    One core holds one node: the other runs on the accelerator, 10, the latency. With two cores,
    one node each: 1; three non-empty devices would need a third node."""
    types = (DeviceType("acc", 1, math.inf, True), DeviceType("dsp", cores, 1.0, False))
    nodes = [Node(i, f"n{i}", (10.0, 1.0), memory=1.0) for i in (1, 2)]
    return Instance(tuple(nodes), (), types, "memory-bound-cores")


@pytest.mark.parametrize("backend", AVAILABLE)
@pytest.mark.parametrize("cores, calls, stages, optimum", [(1, 1, None, 10.0), (1, 2, None, 10.0), (1, 1, 2, 10.0),
                                                           (2, 1, None, 1.0), (2, 1, 2, 1.0), (2, 2, 2, 1.0)])
def test_the_cores_memory_bound_holds(backend, cores, calls, stages, optimum):
    """The cores of the type that pays no communication have memory too: the plan keeps within it
    (it used to put both nodes on one core, which verification refused: no plan)."""
    result = placement.solve(memory_bound_cores(cores), objective="latency", method="milp", backend=backend,
                             calls=calls, stages=stages, time_limit=30)
    assert (result.status, result.value) == ("optimal", optimum), result.message
    assert all(stage.memory <= 1.0 for stage in result.plan if stage.device_type == "dsp")


def test_more_stages_than_nodes_is_infeasible_with_bound_cores():
    assert placement.solve(memory_bound_cores(2), objective="latency", method="milp", stages=3).status == "infeasible"


@pytest.mark.parametrize("backend", AVAILABLE)
def test_a_starting_plan_that_meets_the_path_bound_skips_the_search(backend):
    """chain4 a -> b -> c -> d on one accelerator as one call: 4 + 3 + 2 + 5 = 14, no transfer (the
    chain's ends send and receive nothing). The longest path at the fastest times is the same path, 14:
    the starting plan is proven optimal before the model is built, and the backend is not run at all."""
    result = placement.solve(ROOT / "instances" / "tiny" / "chain4.json", method="milp", objective="latency",
                             backend=backend)
    assert (result.status, result.value, result.bound) == ("optimal", 14.0, 14.0)
    assert result.message.endswith("the solver was not run; the starting plan meets the longest-path bound")
    assert (result.stats["solve_s"], result.stats["model_built"]) == (0.0, False)


def test_a_search_not_run_is_not_said_to_have_rounded_its_data():
    """chain4 with a's time 13/3, which CP-SAT's integer model holds rounded down: one call of 13/3 + 3 + 2 + 5
    meets the longest path's bound, so CP-SAT never sees the rounded model, and the answer does not speak of
    it (it said "times rounded down to multiples of 2^-25 for cp-sat")."""
    document = json.loads((ROOT / "instances" / "tiny" / "chain4.json").read_text())
    document["nodes"][0]["fpgaLatency"] = 13 / 3
    result = placement.solve(document, method="milp", objective="latency", backend="cp-sat")
    assert (result.status, result.value) == ("optimal", 13 / 3 + 10)
    assert result.message == ("started from a plan of value 14.3333; the solver was not run; the starting plan "
                              "meets the longest-path bound")


@pytest.mark.skipif("highs" not in AVAILABLE, reason="HiGHS is not available")
def test_highs_proves_no_latency_plan_above_the_optimum():
    """A chain 1 → 3 → 5 → 7 → 9 → 11, {7, 11} one colour class, 3 accelerators of memory 2.2, no CPUs,
    two calls per accelerator. The optimum, 7.46 (exhaustive search; CBC, SCIP, CP-SAT): 1 and 3 in one
    call, 5 and 7 then 11 as two calls of a second accelerator, 9 on the third. With its default
    feasibility tolerances HiGHS proved 9.46 optimal (its bound 9.46)."""
    spec = [(7, (0.1, None), 0.7, 100, 0.0), (9, (3.3, 0.7), 2.2, None, 0.0), (5, (0.76, 0.0), 0.3, None, 1.0),
            (11, (2.2, 0.1), 1.1, 100, 0.0), (3, (1.1, 3.3), 1.3, None, 0.0), (1, (0.0, 0.2), 0.25, None, 0.0)]
    nodes = tuple(Node(i, f"v{i}", t, memory=m, colour=c, out_cost=o) for i, t, m, c, o in spec)
    problem = Instance(nodes, tuple(Edge(a, b) for a, b in [(1, 3), (3, 5), (5, 7), (7, 9), (9, 11)]),
                       (DeviceType(ACCELERATOR, 3, 2.2), DeviceType(CPU, 0, math.inf, False)), name="highs-calls2")
    assert brute_force_latency(problem, max_calls=2).objective == 7.46
    result = solve_milp(problem, objective="latency", calls=2, backend="highs", time_limit=30)
    assert (result.status, result.objective) == (Status.OPTIMAL, 7.46)


@pytest.mark.skipif("highs" not in AVAILABLE, reason="HiGHS is not available")
def test_highs_is_not_cut_off_at_its_starting_plan():
    """a → b → c, {a, b} one colour class; two accelerator types of two devices each and a CPU. Times
    (accelerator, acc2, cpu): a 0.3, 7, 0.1; b 7, 0, 0; c 7, 0, 7; transfers a 1, b 7. All three in
    one call on an acc2: 7 + 0 + 0, nothing sent, the optimum 7 (exhaustive search). The starting
    plan, a and b on the CPU (0.1) and c on an acc2 after receiving b (7): 7.1. Given the row
    L ≤ 7.1·(1 + 1e-9), HiGHS found that plan itself and proved it optimal."""
    nodes = (Node(1, "a", (0.3, 7.0, 0.1), colour=100, out_cost=1.0), Node(5, "c", (7.0, 0.0, 7.0)),
             Node(3, "b", (7.0, 0.0, 0.0), colour=100, out_cost=7.0))
    types = (DeviceType(ACCELERATOR, 2, math.inf), DeviceType("acc2", 2, math.inf, True),
             DeviceType(CPU, 1, math.inf, False))
    problem = Instance(nodes, (Edge(1, 3), Edge(3, 5)), types, name="highs-cutoff")
    assert brute_force_latency(problem, max_calls=1).objective == 7.0
    start = Plan((DeviceAssignment(CPU, (1, 3)), DeviceAssignment("acc2", (5,))))
    assert evaluate_latency(problem, start).latency == 7.1
    result = solve_milp(problem, objective="latency", backend="highs", warm_start=start, time_limit=30)
    assert (result.status, result.objective) == (Status.OPTIMAL, 7.0)


@pytest.mark.skipif("highs" not in AVAILABLE, reason="HiGHS is not available")
@pytest.mark.parametrize(("calls", "optimum"), [(1, 12.0), (2, 9.0)])
def test_a_size_no_accelerator_holds_leaves_no_coefficient_in_the_memory_row(calls, optimum):
    """a → b → c, times 1 on the accelerator (one, memory 0.3) and 5 on the CPUs; a and b send 1; sizes a 0.2,
    b 2^53 − 1, c 0.1. b fits no accelerator, so it runs on a CPU from a's output. One call: a on the
    accelerator (1 + send 1 = 2), b on a CPU (2 + 5 = 7), c on a CPU (7 + 5 = 12), where a and c in one call
    would wait for b; the whole chain on the CPUs takes 15: the optimum 12. Two calls: a (ends at 2), then c
    after b (7 + receive 1 + 1 + nothing sent = 9): 9. b's size times the scale that brings the bound 0.3 to
    about 2^10 is some 3e19; in the accelerator's memory row, beside its variable fixed at 0, HiGHS took it
    for an invalid model (status MODEL_INVALID, no plan)."""
    nodes = (Node(1, "a", (1.0, 5.0), memory=0.2, out_cost=1.0), Node(2, "b", (1.0, 5.0), memory=2.0 ** 53 - 1,
                                                                        out_cost=1.0),
             Node(3, "c", (1.0, 5.0), memory=0.1))
    problem = Instance(nodes, (Edge(1, 2), Edge(2, 3)), (DeviceType(ACCELERATOR, 1, 0.3),
                                                         DeviceType(CPU, 2, math.inf, False)), name="huge-size")
    assert brute_force_latency(problem, max_calls=calls).objective == optimum
    result = solve_milp(problem, objective="latency", calls=calls, backend="highs", time_limit=30)
    assert (result.status, result.objective) == (Status.OPTIMAL, optimum), result.message


@pytest.mark.skipif("highs" not in AVAILABLE, reason="HiGHS is not available")
@pytest.mark.parametrize("calls", [1, 2])
def test_a_size_no_core_holds_leaves_no_coefficient_in_the_cores_rows(calls):
    """a → b → c on one accelerator (memory unbounded; times a 5, b 1, c 5) and two CPU cores of memory 0.3
    (times a 1, b 5, c 1); a and b send 1; sizes a 0.2, b 2^53 − 1, c 0.2. a and c on two cores (0.2 each: one
    core cannot hold both), b on the accelerator: a ends at 1, b's call receives a, computes and sends
    (1 + 1 + 1) to end at 4, c at 5, the optimum (exhaustive search), for one call or two. b fits no core; its
    size in the cores' memory rows, beside variables fixed at 0, made HiGHS take the model for invalid
    (status MODEL_INVALID, no plan)."""
    nodes = (Node(1, "a", (5.0, 1.0), memory=0.2, out_cost=1.0), Node(2, "b", (1.0, 5.0), memory=2.0 ** 53 - 1,
                                                                        out_cost=1.0),
             Node(3, "c", (5.0, 1.0), memory=0.2))
    problem = Instance(nodes, (Edge(1, 2), Edge(2, 3)), (DeviceType(ACCELERATOR, 1, math.inf),
                                                         DeviceType(CPU, 2, 0.3, False)), name="huge-size-cores")
    assert brute_force_latency(problem, max_calls=calls).objective == 5.0
    result = solve_milp(problem, objective="latency", calls=calls, backend="highs", time_limit=30)
    assert (result.status, result.objective) == (Status.OPTIMAL, 5.0), result.message


def test_the_latency_warm_start_tries_every_node_on_one_device():
    """A chain of six nodes over three types: fast (3 devices; times 1), slow (2 devices; times 2),
    cpu (times 10); every node sends 0.1. For throughput the pipeline splits the chain in three
    (max-load 2 + 0.2), and its latency is 2.1 + 2.2 + 2.1 = 6.4; one fast call holding the whole
    chain takes 6 and sends nothing, the least any plan takes (six nodes at 1 at least, run in turn).
    The baselines take two-type instances only; the start is that call."""
    from placement.solvers.milp.warmstart import default_warm_start

    types = (DeviceType("fast", 3), DeviceType("slow", 2), DeviceType(CPU, 1, math.inf, False))
    nodes = tuple(Node(i, f"v{i}", (1.0, 2.0, 10.0), out_cost=0.1) for i in range(6))
    problem = Instance(nodes, tuple(Edge(i, i + 1) for i in range(5)), types, name="three-types")
    assert placement.solve(problem).value == pytest.approx(2.2)
    start = default_warm_start(problem, objective="latency")
    assert start == Plan((DeviceAssignment("fast", tuple(range(6))),))
    assert evaluate_latency(problem, start).latency == 6.0


@pytest.mark.skipif("cp-sat" not in AVAILABLE, reason="OR-Tools is not installed")
def test_no_latency_model_is_built_past_the_deadline():
    """The fork with its deadline passed: the model is not built (on a 100,000-node chain that took 2 s more,
    for no solve), and the start, verified, is returned: all on the accelerator, latency 10, above the
    optimum 8 (fork's docstring), so feasible."""
    import time

    on_accelerator = Plan((DeviceAssignment(ACCELERATOR, (0, 1, 2, 3)),))
    solution = solve_milp(fork(), backend="cp-sat", objective="latency", warm_start=on_accelerator,
                          deadline=time.perf_counter() - 1.0)
    assert (solution.status, solution.objective, solution.plan) == (Status.FEASIBLE, 10.0, on_accelerator)
    assert solution.message.startswith("the time limit ran out before the model was built; the starting plan is "
                                       "returned")


@pytest.mark.skipif("cp-sat" not in AVAILABLE, reason="OR-Tools is not installed")
def test_the_latency_data_stop_at_the_build_deadline():
    """Preparing the model's data looks at the clock (on 100,000 nodes it took 2 s past the deadline
    before the first row was built): with the build's deadline passed, it stops at its first look."""
    import time

    from placement.solvers.milp.backends import OutOfTime, make_backend
    from placement.solvers.milp.latency_data import prepare_latency

    backend = make_backend("cp-sat")
    assert prepare_latency(fork(), True, 2.0 ** 62, backend.check_time).horizon > 0   # no deadline: data
    backend.start_build(time.perf_counter() - 1.0)
    with pytest.raises(OutOfTime, match=r"^the time limit ran out while the cp-sat model was built \(0 variables, "
                                        r"0 rows\)$"):
        prepare_latency(fork(), True, 2.0 ** 62, backend.check_time)


def test_the_latency_starts_are_evaluated_once_and_not_past_the_deadline():
    """The fork (its docstring): all on the accelerator has latency 10, l alone on it 8. Equal plans are
    evaluated once; past the deadline the evaluation stops at the first valid plan, or before the first
    where a valid plan is in hand."""
    import time

    from placement.solvers.milp.warmstart import evaluated

    whole = Plan((DeviceAssignment(ACCELERATOR, (0, 1, 2, 3)),))
    split = Plan((DeviceAssignment(ACCELERATOR, (1,)), DeviceAssignment(CPU, (0, 2, 3))))
    broken = Plan((DeviceAssignment(ACCELERATOR, (0, 1)),))          # nodes 2 and 3 placed nowhere
    problem, past = fork(), time.perf_counter() - 1.0
    assert evaluated(problem, [whole, Plan(whole.devices), broken, split], None, have_one=False) == [
        (10.0, whole), (8.0, split)]
    assert evaluated(problem, [broken, split, whole], past, have_one=False) == [(8.0, split)]
    assert evaluated(problem, [split, whole], past, have_one=True) == []


def test_past_the_deadline_no_baseline_runs_once_one_gave_a_plan(monkeypatch):
    """With no pipeline start (both chain DPs out of time) and the deadline passed, the latency greedy runs
    for a plan; once it gave one, the latency chain DP and the module-chain plan are skipped (they ran,
    the greedy's plan not counting as one in hand)."""
    import time

    from placement.errors import LimitExceededError
    from placement.solution import Solution
    from placement.solvers.milp import warmstart

    import functools

    ran = []
    for name in ("solve_latency_greedy", "solve_latency_chain", "solve_latency_modules"):
        real = getattr(warmstart, name)
        counted = functools.wraps(real)(lambda *a, _real=real, _name=name, **k: ran.append(_name) or _real(*a, **k))
        monkeypatch.setattr(warmstart, name, counted)

    def out_of_time(*args, **kwargs):
        raise LimitExceededError("out of time", parameter="time_limit")

    monkeypatch.setattr(warmstart, "solve_chain", out_of_time)
    monkeypatch.setattr(warmstart, "coarse_start", lambda *args, **kwargs: Solution(Status.NO_SOLUTION, None, math.inf,
                                                                                      0.0, "chain-dp"))
    monkeypatch.setattr(warmstart, "whole_graph_plans", lambda problem: [])   # as where no device takes every node
    said = []
    plan, _ = warmstart.warm_start_and_bound(fork(), objective="latency", deadline=time.perf_counter() - 1.0,
                                             progress=said.append)
    assert ran == ["solve_latency_greedy"] and plan is not None
    assert said[-3:-1] == ["latency-chain skipped: the warm start's share of the time limit has run out",
                         "latency-modules skipped: the warm start's share of the time limit has run out"]


def test_past_the_deadline_the_whole_graph_plans_are_the_plan_in_hand(monkeypatch):
    """The whole-graph plans come with their latencies before anything else runs: past the deadline the
    chain DP and every baseline are skipped, and the start is the better of them. fork(): all on the
    accelerator, one call of 1 + 4 + 4 + 1 = 10; all on the CPUs, s, then l and r side by side, then t:
    1 + 6 + 1 = 8."""
    import time

    from placement.solvers.milp import warmstart

    def must_not_run(*args, **kwargs):
        raise AssertionError("ran past the deadline with a plan in hand")

    for name in ("solve_chain", "solve_latency_greedy", "solve_latency_chain", "solve_latency_modules"):
        monkeypatch.setattr(warmstart, name, must_not_run)
    said = []
    plan, latency = warmstart.latency_warm_start(fork(), progress=said.append, deadline=time.perf_counter() - 1.0)
    assert latency == 8.0 and [device.type for device in plan.devices] == [CPU]
    assert said[0] == "the chain DP gives no starting plan: the time limit ran out before it could start"
    assert said[-1] == "warm start for latency: 8"


def test_the_latency_start_passes_on_the_chain_dps_progress(monkeypatch):
    """The chain DPs of the latency start say how far they are, prefixed as the throughput start's are:
    on a chain of 100,000 nodes they take seconds."""
    from placement.solution import Solution
    from placement.solvers.milp import warmstart

    def chatty(name):
        def run(*args, progress=None, **kwargs):
            progress(f"{name}: half way")
            return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp")
        return run

    monkeypatch.setattr(warmstart, "solve_coarse_chain", chatty("intervals"))
    monkeypatch.setattr(warmstart, "solve_chain", chatty("chain"))
    said = []
    warmstart.latency_warm_start(fork(), progress=said.append)
    assert said[:2] == ["warm start: intervals: half way", "warm start: chain: half way"]


def test_the_latency_start_uses_the_calls_asked_for():
    """a (1 on the accelerator) -> b (CPU only, 4) -> c (1 on the accelerator), transfers of 1, one
    accelerator and one CPU. With 2 calls the latency greedy runs a, sends it, b on the CPU, sends back and
    runs c as a second call: 1 + 1 + 4 + 1 + 1 = 8, the path bound, so the solver is not run. Run with one
    call, as the start ran it, the greedy put a and c on the CPU (56), and the start was 36."""
    from placement.solvers.milp import warmstart

    document = {"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 1,
                "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 30, "size": 1},
                          {"id": 2, "supportedOnFpga": 0, "fpgaLatency": 1, "cpuLatency": 4, "size": 1},
                          {"id": 3, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 50, "size": 1}],
                "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 3, "cost": 1}]}
    problem = placement.load(document)
    assert warmstart.latency_warm_start(problem)[1] == 36.0
    assert warmstart.latency_warm_start(problem, calls=2)[1] == 8.0
    result = placement.solve(problem, objective="latency", calls=2)
    assert (str(result.status), result.value, result.stats["proven_by"]) == ("optimal", 8.0, "the path bound")


def test_the_milp_evaluates_no_plan_twice(monkeypatch):
    """The warm start's plans are evaluated once each: the MILP takes the start with the latency the warm
    start found for it and evaluates only the plans it decodes (on 100,000 nodes an evaluation takes
    seconds, and the start was evaluated again twice: in the move to the CPUs and by the model)."""
    from placement.solvers.baselines import latency_moves
    from placement.solvers.milp import warmstart
    from placement.solvers.milp.entry import run_milp
    from placement.verification import latency

    evaluated: list[Plan] = []
    real = latency.evaluate_latency

    def counted(problem, plan):
        evaluated.append(plan)
        return real(problem, plan)

    for module in (latency, latency_moves, warmstart):
        monkeypatch.setattr(module, "evaluate_latency", counted)
    monkeypatch.setattr(warmstart, "whole_graph_plans", lambda problem: [])   # the baselines' plans are scored
    problem = fork()
    found = run_milp(problem, contiguity="stages", objective="latency", backend="cp-sat", time_limit=20, gap=0.0,
                     threads=1, seed=0, log=None, warm_start=True, calls=1, progress=None, max_ideals=None)
    assert found.status is Status.OPTIMAL and found.objective == brute_force_latency(problem).objective == 8.0
    assert evaluated and len(evaluated) == len(set(evaluated))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(problems(max_nodes=9, training=False))
def test_whole_graph_latency_is_the_evaluators(problem):
    """The latencies the warm start computes for its whole-graph plans (a sum on an accelerator, a longest
    path on the CPUs, in linear time) are those the latency evaluator finds for the same plans."""
    from placement.solvers.milp.warmstart import whole_graph_plans

    for latency, plan in whole_graph_plans(problem):
        evaluation = evaluate_latency(problem, plan)
        assert evaluation.valid and evaluation.latency == latency


def test_two_cpu_types_are_refused_whatever_the_start():
    """Two types that pay no communication: a -> b, 4 on the accelerator, 5 or 6 on the CPU types. The start
    (both on the accelerator, 8) meets the longest-path bound 8, so the search was skipped and the answer
    given, while the same instance without a start was refused: the model gives a node one CPU time. The
    latency baselines take two types only, and named the MILP as taking any."""
    document = {"deviceTypes": [{"name": "accelerator", "count": 1, "memory": 100, "paysComm": True},
                                {"name": "cpu", "count": 1, "paysComm": False},
                                {"name": "cpu2", "count": 1, "paysComm": False}],
                "nodes": [{"id": i, "times": {"accelerator": 4, "cpu": 5, "cpu2": 6}} for i in (1, 2)],
                "edges": [{"sourceId": 1, "destId": 2, "cost": 1}]}
    for warm_start in (True, False):
        with pytest.raises(InvalidParameterError) as caught:
            placement.solve(document, objective="latency", method="milp", warm_start=warm_start)
        assert str(caught.value) == ("objective 'latency' by MILP takes one device type that pays no communication "
                                     "(the CPUs); this instance has cpu, cpu2")
    with pytest.raises(InvalidParameterError) as caught:     # and the baselines do not name the MILP instead
        placement.solve(document, objective="latency", method="latency-greedy")
    assert str(caught.value) == ("method 'latency-greedy' takes the device types 'accelerator' and 'cpu' only; "
                                 "this instance has 'cpu2'")
