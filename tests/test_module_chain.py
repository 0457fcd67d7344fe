"""The module-chain latency bound and plans (placement.problem.module_chain, latency-modules):
hand-solved instances, the exhaustive optimum on random ones, and the published InceptionV3
latency instance."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import placement
from placement.errors import LimitExceededError
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node
from placement.problem.bounds import meets
from placement.problem.module_chain import module_chain
from placement.solution import Status
from placement.solvers.baselines.latency_modules import module_plan, solve_latency_modules
from placement.verification.latency import evaluate_latency
from placement.testing.bruteforce_latency import brute_force_latency
from tests.strategies import problems
from tests.test_milp_latency import fork

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "latency-inputs"


def _devices(accelerators: int, cpus: int, memory: float = math.inf) -> tuple[DeviceType, DeviceType]:
    return DeviceType(ACCELERATOR, accelerators, memory), DeviceType(CPU, cpus, math.inf, False)


def test_the_fork_by_hand():
    # the optimum, 8 (tests/test_milp_latency.py): s on a CPU (1), l alone in a call (1 + 4 + 1) or on a
    # CPU (6), r the same, t on a CPU (1). The bound: s and t are the articulation nodes, {l} and {r}
    # the module's branches; with s on a CPU each branch finishes 6 after it, so 1 + 6 + 1; with s in
    # a call, l and r in it make it 1 + 8, and sending them 2 more, or one of them on a CPU
    # after the call has sent s (1 + 5 + 1 + 6); s, l, r, t in one call: 10. Least: 8.
    assert module_chain(fork()).value == 8.0
    found = solve_latency_modules(fork())
    assert found.status is Status.FEASIBLE and found.objective == 8.0



def test_the_latency_milp_reports_the_bound():
    """The fork's modules: before s (from the virtual source), {l, r} between s and t, and after t."""
    pytest.importorskip("ortools")
    solved = placement.solve(fork(), objective="latency", method="milp")
    assert (solved.status, solved.value, solved.stats["module_bound"], solved.stats["modules"]) == (
        "optimal", 8.0, 8.0, 3)


def test_the_latency_milp_falls_back_to_the_bound_without_counts_when_the_counted_one_runs_out_of_time(
        monkeypatch):
    """The counted bound may run out of its time where the one without counts, less work, would not:
    the fork's bound without counts is 8 (test_the_fork_by_hand), the optimum, so the solve is proven by it."""
    pytest.importorskip("ortools")
    from placement.problem.module_chain import OUT_OF_TIME, ModuleChain
    from placement.solvers.milp import latency

    def counted_out_of_time(problem, *args, calls=None, **kwargs):
        return ModuleChain(None, why=OUT_OF_TIME) if calls is not None else module_chain(problem, *args, **kwargs)

    monkeypatch.setattr(latency, "module_chain", counted_out_of_time)
    solved = placement.solve(fork(), objective="latency", method="milp")
    assert (solved.status, solved.value, solved.stats["module_bound"], solved.stats["module_bound_counts_calls"],
            solved.stats["module_bound_counted_skipped"]) == ("optimal", 8.0, 8.0, False, OUT_OF_TIME)


def two_branches() -> Instance:
    """a → (b → c) and a → d, both into e; accelerator times a 2, b 3, c 3, d 1, e 2; CPU times
    ten times as much; every node sends 1; one accelerator of memory 3 (each node 1), one CPU.

    Plans: a, b, c in one call (2 + 3 + 3, then send a and c: 10) with d on a CPU after a (a
    finishes with the call at 10, d at 20) and e on a CPU: 40. Better, a on a CPU (20) is slow;
    a alone in a call (2 + 1 = 3), b, c in a call of their own? Only one accelerator and one call:
    so the call is one of {a, b, c} (ends 10; d at 20; e at 40), {b, c} (a on the CPU: 20, call
    1 + 6 + 1 = 8: 28; d at 30; e at 50), {a, d} ... the exhaustive search below finds the least."""
    times = [(2.0, 20.0), (3.0, 30.0), (3.0, 30.0), (1.0, 10.0), (2.0, 20.0)]
    nodes = tuple(Node(i, name, times[i], memory=1.0, out_cost=1.0) for i, name in enumerate("abcde"))
    edges = (Edge(0, 1), Edge(1, 2), Edge(0, 3), Edge(2, 4), Edge(3, 4))
    return Instance(nodes, edges, _devices(1, 1, 3.0), name="two-branches")


def test_a_module_with_two_branches_against_the_exhaustive_optimum():
    problem = two_branches()
    truth = brute_force_latency(problem, max_calls=1)
    bound = module_chain(problem).value
    assert bound is not None and bound <= truth.objective
    found = solve_latency_modules(problem)
    assert found.status is Status.FEASIBLE and found.objective >= truth.objective


def test_a_chain_is_bounded_by_its_optimum_exactly():
    """a → b → c, accelerator times 2, 3, 2, CPU times 3, 9, 3, every transfer 1, one accelerator of
    memory 2 (each node 1): the optimum is 9 (a on a CPU, then b, c in the call: 3 + 1 + 5; or a,
    b in the call, 5 + 1, then c on a CPU: 9). Every node is an articulation node, so the bound is
    the least over the chain's plans: 9, and the plan is one of them."""
    nodes = tuple(Node(i, name, (acc, cpu), memory=1.0, out_cost=1.0)
                  for i, (name, acc, cpu) in enumerate([("a", 2.0, 3.0), ("b", 3.0, 9.0), ("c", 2.0, 3.0)]))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(1, 1, 2.0), name="chain")
    assert brute_force_latency(problem, max_calls=1).objective == 9.0
    assert module_chain(problem).value == 9.0
    assert solve_latency_modules(problem).objective == 9.0


def shared_call() -> Instance:
    """a → x → b and a → y → b; a and b only on the CPUs (time 0), x and y 2 on an accelerator and 10
    on the CPUs; a, x and y send 1, b nothing; one accelerator.

    The optimum, 7: x and y in one call, which receives a once (1), runs both (4) and sends both (2),
    b at 7. One of them alone in the call ends at 1 + 2 + 1 = 4, but the other takes 10 on the CPUs;
    both on the CPUs: 10. With two accelerators, a call each: 4."""
    nodes = (Node(0, "a", (None, 0.0), out_cost=1.0), Node(1, "x", (2.0, 10.0), out_cost=1.0),
             Node(2, "y", (2.0, 10.0), out_cost=1.0), Node(3, "b", (None, 0.0)))
    edges = (Edge(0, 1), Edge(0, 2), Edge(1, 3), Edge(2, 3))
    return Instance(nodes, edges, _devices(1, 1), name="shared-call")


def test_the_counted_bound_prices_a_call_two_branches_share():
    """Without counts the bound is 4 (x and y each in a call of its own). Counted, with one
    accelerator: x in a call counted (4) and y a guest, which finishes no earlier than its input
    plus twice its charge less the a it shares, 2·4 − 1 = 7; both guests: 7; either on the CPUs: 10.
    So 7, the optimum, which the module-chain plan (no shared calls) misses (10)."""
    problem = shared_call()
    assert brute_force_latency(problem, max_calls=1).objective == 7.0
    assert module_chain(problem).value == 4.0
    assert module_chain(problem, calls=1).value == 7.0
    assert solve_latency_modules(problem).objective == 10.0
    # two accelerators: the counted bound is the optimum, 4
    two = Instance(problem.nodes, problem.edges, _devices(2, 1), name="shared-call-2")
    assert brute_force_latency(two, max_calls=1).objective == 4.0
    assert module_chain(two, calls=1).value == 4.0


def test_a_source_feeding_five_thousand_nodes():
    """s (accelerator 1, CPU 1000) feeds 5,000 nodes (accelerator 1, CPU 20), each sending 1; four
    accelerators, one CPU. The optimum, 22: s alone in a call (1, then sending it, 1) and every other
    node on the CPUs (20). A call holding k of them as well ends at 2 + k, and a call of its own for
    one of them only frees that one. One module of 5,000 branches: its memory never binds, so the
    DP leaves it out, and each merge links its choices instead of copying them (the DP gave up at
    its work limit, and took 72 s to)."""
    nodes = (Node(0, "s", (1.0, 1000.0), memory=1.0, out_cost=1.0),) + tuple(
        Node(i, f"n{i}", (1.0, 20.0), memory=1.0, out_cost=1.0) for i in range(1, 5001))
    problem = Instance(nodes, tuple(Edge(0, i) for i in range(1, 5001)), _devices(4, 1, 1e9), name="wide")
    found = solve_latency_modules(problem)
    assert (found.status, found.objective) == (Status.FEASIBLE, 22.0)
    # the bounds are far below: without counts every node is in a call of its own (s ends at 2, each
    # other call receives s, runs 1 and sends nothing: 4); counted, three of them have calls and
    # the others are guests, each finishing no earlier than 2 + (2·2 − 1) = 5
    assert (module_chain(problem).value, module_chain(problem, calls=1).value) == (4.0, 5.0)


def test_a_branch_that_also_feeds_the_join_from_inside_is_no_chain():
    """a → x → y → b with x → b as well, and a → b; a and b only on the CPUs (time 0), x and y 1 on the
    accelerator and 100 on the CPUs; x sends 10, a and y 1; one accelerator.

    The optimum, 14: x and y in one call, which receives a (1), runs both (2) and sends x (10), which b
    reads too, and y (1). Read as a chain, the branch would send only y from that call, and the DP's
    plan claimed 12 for it; as a branch that is no chain its heads, tails and sends are exact sets."""
    nodes = (Node(0, "a", (None, 0.0), out_cost=1.0), Node(1, "x", (1.0, 100.0), out_cost=10.0),
             Node(2, "y", (1.0, 100.0), out_cost=1.0), Node(3, "b", (None, 0.0)))
    edges = (Edge(0, 1), Edge(1, 2), Edge(1, 3), Edge(2, 3), Edge(0, 3))
    problem = Instance(nodes, edges, _devices(1, 1), name="skip")
    assert brute_force_latency(problem, max_calls=1).objective == 14.0
    found = module_chain(problem, plan=True)
    assert found.value == 14.0 and evaluate_latency(problem, module_plan(problem, found)).latency == 14.0
    # the bound takes each path's middle on its own: on the path x → b, x in a call receives a (1), runs
    # 1 and sends 10: 12, with or without counts
    assert (module_chain(problem).value, module_chain(problem, calls=1).value) == (12.0, 12.0)


def test_sums_that_round_lower_the_bound():
    """Times 0.1, 0.2 and 0.3 on one accelerator, no CPU: the bound is below the evaluator's sum
    0.6000000000000001 by at most what the sums may lose."""
    nodes = tuple(Node(i, f"n{i}", (t, None)) for i, t in enumerate((0.1, 0.2, 0.3)))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(1, 0), name="tenths")
    value = module_chain(problem).value
    assert 0.6 - 1e-13 < value < 0.6 <= 0.1 + 0.2 + 0.3


def test_the_work_limit_gives_no_bound():
    found = module_chain(two_branches(), max_work=3)
    assert found.value is None and found.why == "more than 3 steps"
    found = module_chain(two_branches(), deadline=0.0)      # a deadline long past
    assert found.value is None and found.why == "the time limit ran out"
    late = solve_latency_modules(two_branches(), deadline=0.0)   # the baseline then falls back to the CPUs
    assert late.status is Status.FEASIBLE and late.message == (
        "the DP found no plan (the time limit ran out; a larger time_limit lets it finish); every node on the CPUs")


def test_a_plan_that_splits_a_colour_class_is_left_for_the_cpus():
    """a → b → c with a and c one colour class; accelerator times 1, CPU times 2, every transfer
    0.5, one accelerator of memory 1 (each node 1): the DP's plan holds one node per call, so it
    puts a and c apart and the evaluator refuses it; every node on the CPUs (6) is the answer. The
    bound leaves colour classes out: b on the CPU between two calls, 1.5 + 2 + 1.5."""
    nodes = (Node(0, "a", (1.0, 2.0), memory=1.0, colour=7, out_cost=0.5),
             Node(1, "b", (1.0, 2.0), memory=1.0, out_cost=0.5), Node(2, "c", (1.0, 2.0), memory=1.0, colour=7))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(2, 1, 1.0), name="classes")
    found = solve_latency_modules(problem)
    assert found.status is Status.FEASIBLE and found.objective == 6.0
    assert found.message.endswith("; every node on the CPUs")
    assert module_chain(problem).value == 5.0
    assert brute_force_latency(problem, max_calls=1).objective == 6.0


@st.composite
def module_chains(draw) -> Instance:
    """Articulation nodes joined by modules of one to three branches (chains of one or two nodes, an
    edge straight across, or a diamond of three nodes: a branch that is no chain), random times,
    transfers and memory; 1–3 accelerators, 0–1 CPU."""
    sizes = draw(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1, max_size=2))
    nodes: list[tuple[float, float | None]] = []
    edges: list[tuple[int, int]] = []
    nodes.append((0.0, 0.0))
    last = 0
    for module in sizes:
        if sum(module) + len(nodes) + 1 > 8:
            break
        ends = []
        for length in module:
            prev = last
            if length == 3:              # last → x, x → y, x → z, y and z into the join
                x = len(nodes)
                nodes += [(0.0, 0.0)] * 3
                edges += [(last, x), (x, x + 1), (x, x + 2)]
                ends += [x + 1, x + 2]
                continue
            for _ in range(length):
                nodes.append((0.0, 0.0))
                edges.append((prev, len(nodes) - 1))
                prev = len(nodes) - 1
            ends.append(prev)
        nodes.append((0.0, 0.0))
        join = len(nodes) - 1
        edges += sorted({(e, join) for e in ends})
        last = join
    n = len(nodes)
    acc = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0]), min_size=n, max_size=n))
    cpu = draw(st.lists(st.sampled_from([None, 0.0, 2.0, 4.0, 9.0]), min_size=n, max_size=n))
    cost = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n, max_size=n))
    memory = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=n, max_size=n))
    bound = draw(st.sampled_from([math.inf, 2.0, 3.0]))
    cpus = draw(st.integers(0, 1))
    built = tuple(Node(i, f"v{i}", (acc[i], cpu[i] if cpus else None), memory=memory[i], out_cost=cost[i])
                  for i in range(n))
    return Instance(built, tuple(Edge(a, b) for a, b in edges), _devices(draw(st.integers(1, 3)), cpus, bound),
                    name="modules")


def _check(problem: Instance, calls: int) -> None:
    try:
        truth = brute_force_latency(problem, max_calls=calls)
    except LimitExceededError:      # too many plans to list
        return
    bound = module_chain(problem)
    counted = module_chain(problem, calls=calls)
    if truth.status is Status.OPTIMAL and bound.value is not None:
        assert bound.value <= truth.objective * (1 + 1e-12)
    if truth.status is Status.OPTIMAL and counted.value is not None:
        assert counted.value <= truth.objective * (1 + 1e-12)
    if bound.value is not None and counted.value is not None:
        assert counted.value >= bound.value * (1 - 1e-12)      # it leaves out fewer plans' limits
    if calls == 1 and truth.status is Status.OPTIMAL:
        plan = solve_latency_modules(problem)
        if plan.status is Status.FEASIBLE:
            assert plan.objective >= truth.objective * (1 - 1e-12)
        found = module_chain(problem, plan=True)
        if found.value is not None:
            # where the DP's own plan fits the instance, the DP's value is that plan's latency
            own = evaluate_latency(problem, module_plan(problem, found))
            if own.valid:
                assert own.latency == pytest.approx(found.value, rel=1e-12, abs=1e-12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=6, training=False, max_accelerators=2, max_cpus=1), st.integers(1, 2))
@example(fork(), 1)
@example(two_branches(), 1)
def test_the_bound_never_exceeds_the_exhaustive_optimum(problem: Instance, calls: int):
    _check(problem, calls)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(module_chains(), st.integers(1, 2))
def test_on_chains_of_modules_the_bound_and_plans_meet_the_exhaustive_optimum(problem: Instance, calls: int):
    _check(problem, calls)


@pytest.mark.skipif(not (SHARED / "LayerGraphs" / "inceptionv3_inference.json").exists(),
                    reason="the published latency instances are not beside the project")
def test_the_published_inceptionv3_instance():
    """InceptionV3 (326 nodes, 12 accelerators, 8 CPUs): 34 modules; the bound is well above the path
    bound (1073.35), and the plan, 12 calls checked by the evaluator, within 1.2% of it; counting the
    calls proves the plan optimal."""
    problem = placement.load(SHARED / "LayerGraphs" / "inceptionv3_inference.json")
    bound = module_chain(problem)
    assert bound.modules == 34
    assert bound.value == pytest.approx(1186.5480579, abs=1e-6)
    plan = solve_latency_modules(problem)
    assert plan.status is Status.FEASIBLE and plan.objective == pytest.approx(1199.7034905, abs=1e-6)
    assert len(plan.plan.devices) == 13      # 12 calls and the CPUs
    # with the 12 calls counted, the bound meets the plan (within the sums' rounding allowance)
    counted = module_chain(problem, calls=1)
    assert counted.value <= plan.objective
    assert meets(counted.value, plan.objective)


def long_branch(n: int, memory: float) -> Instance:
    """x0 → x1 → … → x(n−1), with x2 → c → x10 and x5 → e → x(n−3) as well: one module between x2 and
    x(n−3) whose nodes form one branch that is no chain (x5 feeds x6 and e), its main path about n
    long. Every node 1 on an accelerator and 10 on the CPUs, 1 byte, 0.5 to send; four accelerators."""
    nodes = tuple(Node(i, f"x{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in range(n)) + (
        Node(n, "c", (1.0, 10.0), 1.0, False, None, 0.5), Node(n + 1, "e", (1.0, 10.0), 1.0, False, None, 0.5))
    edges = tuple(Edge(i, i + 1) for i in range(n - 1)) + (Edge(2, n), Edge(n, 10), Edge(5, n + 1),
                                                          Edge(n + 1, n - 3))
    return Instance(nodes, edges, _devices(4, 1, memory), name="long-branch")


def test_a_long_main_path_past_the_direct_loop():
    """4,002 nodes, their main path about 4,000 long and memory that does not bind: the path DP that
    tries every call from every end would take about 4,000² / 2 steps per count of calls, and the DP
    gave up at its work limit, leaving every node on the CPUs (40,000). By sliding minima it takes a
    step per node and count: the plan holds every node in one call (4,002, nothing to send)."""
    problem = long_branch(4000, 1e9)
    found = solve_latency_modules(problem)
    assert (found.status, found.objective, found.message) == (Status.FEASIBLE, 4002.0, "")
    assert found.stats["dp_value"] == 4002.0 and found.plan.non_empty == 1


def test_the_time_limit_of_latency_modules():
    """``time_limit`` caps the DP; past it the message names the parameter (the method once took none),
    and every node runs on the CPUs: 4,000 along the path at 10 each (c and e run beside it)."""
    problem = long_branch(4000, 1e9)
    found = placement.solve(problem, objective="latency", method="latency-modules", time_limit=1e-3)
    assert found.message == ("the DP found no plan (the time limit ran out; a larger time_limit lets it finish); "
                             "every node on the CPUs")
    assert found.value == 40000.0


@st.composite
def paths(draw) -> tuple:
    """A path of whole-number times (``None``: unsupported), sizes, costs and a memory bound, the head
    length, and the mode: plan (calls counted, at most the accelerators), bound, or counted bound."""
    from placement.problem.module_chain import _Data

    n = draw(st.integers(1, 30))
    p_acc = [draw(st.one_of(st.none(), st.integers(0, 9).map(float), st.integers(0, 9).map(float)))
             for _ in range(n)] + [None]
    p_cpu = [draw(st.one_of(st.none(), st.integers(0, 40).map(float))) for _ in range(n)] + [0.0]
    cost = [float(draw(st.integers(0, 6))) for _ in range(n + 1)]
    memory = [float(draw(st.integers(0, 4))) for _ in range(n)] + [0.0]
    room = float(draw(st.integers(0, 30)))
    d = _Data(p_acc, p_cpu, memory, cost, room, [[] for _ in range(n + 1)], [[] for _ in range(n + 1)])
    mode = draw(st.sampled_from(["plan", "bound", "counted"]))
    if mode != "bound":
        d.counted, d.limit, d.guests = True, float(draw(st.integers(0, 4))), mode == "counted"
    return d, list(range(n)), draw(st.integers(0, n)), n


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paths())
def test_sliding_minima_give_the_direct_path_dp(case):
    """On whole numbers (exact sums) the path DP by sliding minima gives the direct DP's least finishing
    time for every end and count of calls, and calls that take that time."""
    from placement.problem.module_chain import _middle
    from placement.problem.path_middle import long_middle

    d, path, h, entry = case
    direct = _middle(d, path, h, path[h - 1] if h else entry, counted=d.counted)
    sliding = long_middle(d, path, h, path[h - 1] if h else entry, counted=d.counted)
    assert [{s: t for s, (t, _c) in row.items()} for row in sliding] == [
        {s: t for s, (t, _c) in row.items()} for row in direct]
    for j, row in enumerate(sliding):       # the calls: within the path part, consecutive, and priced as said
        for s, (t, calls) in row.items():
            assert all(h <= i < k <= h + j for i, k in calls) and (not d.counted or d.guests or len(calls) == s)


def test_the_step_limit_names_the_time_limit(monkeypatch):
    """Without a time limit the DP stops after a fixed number of steps (3 here), and the message says
    which parameter lets it run on; with one, the steps do not stop it."""
    import placement.solvers.baselines.latency_modules as latency_modules

    monkeypatch.setattr(latency_modules, "MAX_WORK", 3)
    found = solve_latency_modules(two_branches())
    assert found.message == ("the DP found no plan (more than 3 steps; a time_limit lets it run past them); "
                             "every node on the CPUs")
    assert solve_latency_modules(two_branches(), time_limit=60.0).message == ""


def test_the_steps_count_the_options_filtered_per_latest_finish(monkeypatch):
    """A module around a chain of 2,000 nodes (a skip from its first node to its last; memory never binds): its
    heads and tails are some 2·10^6 pairs, whose options the DP filters once per latest finish, as many. Once the
    path DP took one step per node, that filtering, uncounted, was the DP's work: 15.6 million options filtered
    under a limit of 10^6 steps (8 s; a 4,000-node chain ran 123 s before it fell back to the CPUs, where the
    direct path DP had stopped in 1.4 s). A step is now counted per four options filtered, so the DP stops within
    its steps, with no plan, as before."""
    import placement.problem.module_chain as chain

    n = 2000
    nodes = [Node(i, f"x{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in range(n + 3)]
    edges = [Edge(i, i + 1) for i in range(n)] + [Edge(0, n + 1), Edge(n + 1, n), Edge(n, n + 2)]
    problem = Instance(tuple(nodes), tuple(edges), (DeviceType(ACCELERATOR, 4, 1e9), DeviceType(CPU, 1, math.inf,
                                                                                               False)), name="skip")
    filtered = [0]
    by_calls = chain._by_calls

    def counted(points):
        filtered[0] += len(points)
        return by_calls(points)

    monkeypatch.setattr(chain, "_by_calls", counted)
    found = module_chain(problem, plan=True, max_work=10 ** 6)
    assert (found.value, found.why) == (None, "more than 1,000,000 steps")
    assert filtered[0] <= 4 * 10 ** 6
