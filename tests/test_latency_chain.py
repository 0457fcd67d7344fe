"""The latency chain DP (method ``latency-chain``): hand-solved instances, exactness on chains against
the brute force with one call per accelerator, and its place among the MILP's starting plans."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import placement
from placement.errors import InvalidParameterError
from placement.io.tarnawski import read_instance
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node, make_two_type_problem
from placement.problem.sequential import Budget, least_run_sum
from placement.solution import Status
from placement.solvers.chain_dp import keyed_orders
from placement.solvers.milp.warmstart import default_warm_start
from placement.testing.bruteforce_latency import brute_force_latency
from placement.verification.latency import evaluate_latency
from tests.methods import run_method as solve
from tests.strategies import shuffled

A, C = ACCELERATOR, CPU
TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "latency-inputs"


def test_memory_chain_by_hand():
    """a -> b -> c, 2 ms each on an accelerator, 8 on the CPU, 3 bytes each, 5 bytes per accelerator
    (2 of them), every transfer 0.5: an accelerator holds one node.

    Runs of a b c (sums of durations; on a chain that is the latency):
    * a | b on accelerators, c on the CPU: 2.5 + (0.5 + 2 + 0.5) + 8 = 13.5
    * a on an accelerator, b on the CPU, c on an accelerator: 2.5 + 8 + (0.5 + 2) = 13
    * a on the CPU first: 8 + ... > 13; b and c on the CPU: 2.5 + 16 > 13.
    So 13, the brute-force optimum (latency-greedy gives 13.5).
    """
    problem = read_instance(TINY / "memory-chain.json")
    found = solve(problem, "latency-chain")
    assert (found.status, found.objective, found.objective_kind) == (Status.FEASIBLE, 13.0, "latency")
    assert found.stats["sequential_sum"] == 13.0
    assert found.plan == Plan((DeviceAssignment(A, (1,)), DeviceAssignment(C, (2,)), DeviceAssignment(A, (3,))))
    assert brute_force_latency(problem).objective == 13.0


@pytest.mark.parametrize("method", ["latency-chain", "latency-dp-split", "latency-greedy"])
def test_counts_far_above_the_nodes_are_solved_as_the_node_count(method):
    """memory-chain.json (3 nodes) with 10^9 accelerators and, for the greedy, 10^9 calls each: a
    count above the node count is solved as that number (three accelerators, or calls, are all a
    plan can use), plan and bound alike; the bounds' tables were once sized by the count itself
    (37 GiB for 10^9 accelerators)."""
    problem = read_instance(TINY / "memory-chain.json")
    calls = {"calls": 10 ** 9} if method == "latency-greedy" else {}   # the other two take no calls
    huge = placement.solve(problem, method=method, objective="latency", accelerators=10 ** 9, **calls)
    few = placement.solve(problem, method=method, objective="latency", accelerators=3,
                          **{name: min(value, 3) for name, value in calls.items()})
    assert (huge.status, huge.value, huge.bound, huge.plan) == (few.status, few.value, few.bound, few.plan)
    assert huge.bound > 0


def diamond(accelerators: int) -> Instance:
    """s -> x, s -> y, x -> t, y -> t; accelerator times 1, 4, 4, 1 (CPU 10 times that); 1 byte each,
    2 bytes per accelerator; every transfer 0.5."""
    nodes = [Node(i, name, (p, 10 * p), 1.0, False, None, 0.5) for i, name, p in
             ((1, "s", 1.0), (2, "x", 4.0), (3, "y", 4.0), (4, "t", 1.0))]
    return make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3), Edge(2, 4), Edge(3, 4)], accelerators, 1, 2)


def test_parallel_calls_are_priced_in_turn():
    """The diamond on 4 accelerators. Runs of the order s x y t, with their sums:
    * {s, x} | {y, t}: (1 + 4 + out s, x 1) + (in s, x 1 + 4 + 1) = 6 + 6 = 12, also its latency
      ({y, t} waits for s and x, which end at 6);
    * {s} | {x} | {y} | {t}: 1.5 + 5 + 5 + 2 = 13.5, but x and y both start at 1.5 and run side by
      side: they end at 6.5, t at 6.5 + 1 + 1 = 8.5, the optimum with one call per accelerator.
    The DP minimises the sum, so it returns the first (12): a plan, not a proof.
    """
    problem = diamond(4)
    found = solve(problem, "latency-chain")
    assert (found.objective, found.stats["sequential_sum"]) == (12.0, 12.0)
    assert brute_force_latency(problem, max_calls=1).objective == 8.5
    spread = Plan(tuple(DeviceAssignment(A, (i,)) for i in (1, 2, 3, 4)))
    assert evaluate_latency(problem, spread).latency == 8.5


@st.composite
def chains(draw) -> Instance:
    """A path 1 -> 2 -> ... -> n with random times, sizes and transfer costs; no colour classes."""
    n = draw(st.integers(1, 5))
    nodes = []
    for i in range(1, n + 1):
        acc = draw(st.one_of(st.none(), st.integers(0, 6).map(float)))
        cpu = draw(st.integers(0, 30).map(float)) if acc is not None else draw(st.integers(1, 30).map(float))
        nodes.append(Node(i, f"n{i}", (acc, cpu), float(draw(st.integers(0, 3))), False, None,
                          draw(st.integers(0, 3)) / 2))
    accelerators = draw(st.integers(1, 3))
    memory = draw(st.one_of(st.just(math.inf), st.integers(1, 6).map(float)))
    return make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(1, n)], accelerators, 1, memory)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
@example(make_two_type_problem([Node(1, "a", (None, 1.0)), Node(2, "b", (0.0, 0.0), 0.0, False, None, 1.5)],
                               [Edge(1, 2)], 1, 1, math.inf))
def test_exact_on_chains(problem):
    """On a chain every call is an interval and each waits for the one before, so the latency of a plan
    with one call per accelerator is the sum of its runs' durations: the DP's optimum is the optimum."""
    truth = brute_force_latency(problem, max_calls=1)
    found = solve(problem, "latency-chain")
    if truth.status is Status.INFEASIBLE:
        assert found.status is Status.NO_SOLUTION
        return
    assert found.status is Status.FEASIBLE
    assert found.objective == pytest.approx(truth.objective, rel=1e-12, abs=1e-12)
    assert found.stats["sequential_sum"] == pytest.approx(found.objective, rel=1e-12, abs=1e-12)


def test_refuses_other_catalogues_and_objectives():
    problem = Instance((Node(0, "a", (1.0,)),), (), (DeviceType("tpu", 1),))
    with pytest.raises(InvalidParameterError, match="^method 'latency-chain' takes the device types 'accelerator' "
                                                    r"and 'cpu' only; this instance has 'tpu' \(method 'milp' "
                                                    r"takes any device types\)$"):   # the DP solves no latency
        solve(problem, "latency-chain")
    with pytest.raises(InvalidParameterError, match="^objective must be 'latency' for method 'latency-chain', not "
                                                    "'throughput'; "):
        solve(read_instance(TINY / "memory-chain.json"), "latency-chain", objective="throughput")


def test_no_plan_when_nothing_fits():
    """a -> b, both accelerator-only, 2 bytes each; one accelerator of 3 bytes: they fit one at a time,
    and there is no second accelerator."""
    problem = make_two_type_problem([Node(1, "a", (1.0, None), 2.0), Node(2, "b", (1.0, None), 2.0)],
                                    [Edge(1, 2)], 1, 1, 3)
    found = solve(problem, "latency-chain")
    assert (found.status, found.plan) == (Status.NO_SOLUTION, None)
    assert found.message == "no run of a topological order fits the accelerators and CPUs"


def test_the_id_orders_do_not_depend_on_the_numbering():
    """keyed_orders on one DAG numbered two ways: the same orders of keys (the vertices' ids)."""
    ids = [10, 11, 12, 13, 14, 15]
    edges = [(10, 12), (11, 12), (12, 13), (12, 14), (13, 15), (14, 15), (11, 14)]
    key_orders = []
    for numbering in ([10, 11, 12, 13, 14, 15], [11, 10, 12, 14, 13, 15]):
        place = {i: n for n, i in enumerate(numbering)}
        succ = [[] for _ in ids]
        for u, w in edges:
            succ[place[u]].append(place[w])
        orders = keyed_orders(succ, numbering)
        assert all(sorted(order) == list(range(len(ids))) for order in orders)
        assert all(place[u] in order[:order.index(place[w])] for order in orders for u, w in edges)
        key_orders.append([[numbering[v] for v in order] for order in orders])
    assert key_orders[0] == key_orders[1]
    # renumbered by Kahn's taking the least id: 10 11 12 13 14 15; depth first from the last source, 11,
    # finishes 15, 14, 13, 12, 11, then 10: reversed, the same; Kahn's taking the latest ready vertex: 11
    # and 10, then 12 enables 13 and 14, and 14 is taken first
    assert key_orders[0] == [[10, 11, 12, 13, 14, 15], [10, 11, 12, 13, 14, 15], [11, 10, 12, 14, 13, 15]]


def test_the_file_s_node_order_does_not_decide_the_plan():
    """GNMT's latency instance with its nodes and edges shuffled: the orders of the units renumbered by
    node id find the plan of the file's own order (225.647891, which the MILP proves optimal), where the
    shuffled file's orders alone found 232.24, 251.80 and 246.15 for these three shuffles."""
    path = SHARED / "LayerGraphs/gnmt_inference.json"
    if not path.exists():
        pytest.skip("../shared/tarnawski is not available")
    problem = read_instance(path)
    assert solve(problem, "latency-chain").objective == pytest.approx(225.647891, abs=1e-6)
    for seed in (1, 2, 3):
        assert solve(shuffled(problem, seed), "latency-chain").objective == pytest.approx(225.647891, abs=1e-6)


@pytest.mark.parametrize("name", ["OperatorGraphs/bert_l-3_inference", "LayerGraphs/resnet50_inference"])
def test_starts_the_latency_milp_no_worse(name):
    """The MILP's latency start is the best of the baselines, so never worse than the chain DP's plan."""
    path = SHARED / f"{name}.json"
    if not path.exists():
        pytest.skip("../shared/tarnawski is not available")
    problem = read_instance(path)
    chain = solve(problem, "latency-chain")
    greedy = solve(problem, "latency-greedy")
    start = default_warm_start(problem, objective="latency")
    latency = evaluate_latency(problem, start).latency
    assert latency <= min(chain.objective, greedy.objective)


def test_the_latency_start_leaves_the_dp_out(monkeypatch):
    """The DP optimises throughput; for latency the start comes from the latency baselines and the
    chain DP, and the DP (which takes minutes on branchy graphs) runs only when none finds a plan.
    On the memory chain of :func:`test_memory_chain_by_hand` the latency chain DP's 13 is the start."""
    import placement.solvers.milp.warmstart as warmstart

    def no_dp(*args, **kwargs):
        raise AssertionError("the DP ran for a latency start")

    monkeypatch.setattr(warmstart, "solve_dp", no_dp)
    problem = read_instance(TINY / "memory-chain.json")
    start = default_warm_start(problem, objective="latency")
    assert evaluate_latency(problem, start).latency == 13.0


def test_the_latency_warm_start_keeps_to_its_share_of_the_time_limit():
    """The run DP counted joins only, and a graph of a million edges spent a minute on what it counted as a
    few seconds; the warm start then ran the other baselines too, past its deadline (86.8 s for a limit of
    10 s). The run DP now stops at its deadline, and once the deadline has passed with a plan in hand the
    remaining baselines are skipped, each saying so."""
    import time

    from placement.errors import LimitExceededError
    from placement.problem.sequential import Budget
    from placement.solvers.milp.warmstart import warm_start_and_bound

    with pytest.raises(LimitExceededError, match="^the time limit ran out while the run DP ran; a larger time_limit "
                                                 "lets it finish$") as raised:
        Budget(deadline=time.perf_counter() - 1).spend(1)
    assert raised.value.parameter == "time_limit"
    said: list[str] = []
    problem = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json")
    plan, _ = warm_start_and_bound(problem, progress=said.append, objective="latency",
                                   deadline=time.perf_counter() - 1)
    assert plan is not None
    assert [line for line in said if "skipped" in line] == [
        f"{name} skipped: the warm start's share of the time limit has run out"
        for name in ("latency-greedy", "latency-chain", "latency-modules")]


def long_chain(n: int, memory: float, accelerators: int = 2) -> Instance:
    """A path of ``n`` nodes: 1 ms on an accelerator, 10 on the CPU, 1 byte, 0.5 ms to send each."""
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in range(n)]
    return make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(n - 1)], accelerators, 1, memory)


def test_long_runs_past_the_old_join_budget():
    """3,000 nodes, runs of up to 1,000 bytes: a DP that tries every run from every start joins about
    3,000 × 1,000 units, past the 2 million it was once allowed, and gave no plan. The best plan runs
    the first and the last 1,000 nodes on the two accelerators (1,000.5 ms each: one sends, one
    receives) and the 1,000 between on the CPU: 12,001; the bounds leave out the runs that cannot
    reach it, and the DP finds it."""
    found = solve(long_chain(3000, 1000.0), "latency-chain")
    assert (found.status, found.objective, found.message) == (Status.FEASIBLE, 12001.0, "")
    assert found.plan == Plan((DeviceAssignment(A, tuple(range(1000))), DeviceAssignment(C, tuple(range(1000, 2000))),
                               DeviceAssignment(A, tuple(range(2000, 3000)))))


def test_the_time_limit_stops_the_dp_and_says_which_parameter():
    """``time_limit`` is the DP's limit: past it no plan, and the message names the parameter (it once
    took no time limit, and stopped at a fixed count of joins that no parameter could raise)."""
    problem = long_chain(3000, 1000.0)
    found = placement.solve(problem, method="latency-chain", objective="latency", time_limit=1e-3)
    assert (found.status, found.value) == (Status.NO_SOLUTION, None)
    assert found.message == "the time limit ran out while the run DP ran; a larger time_limit lets it finish"


@st.composite
def orders(draw) -> tuple:
    """A random graph over positions 0..n-1 (edges forward), its units (consecutive positions), times
    (``None``: unsupported), costs, sizes, capacity, accelerators and the longest CPU run."""
    n = draw(st.integers(1, 40))
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for w in range(1, n):
        for u in sorted(set(draw(st.lists(st.integers(max(0, w - 6), w - 1), min_size=1, max_size=3)))):
            succ[u].append(w)
            pred[w].append(u)
    times = st.integers(0, 9).map(float)
    p_acc = [draw(st.one_of(st.none(), times, times, times)) for _ in range(n)]
    p_cpu = [draw(st.one_of(st.none(), st.integers(0, 40).map(float))) for _ in range(n)]
    cost = [draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 10.0])) for _ in range(n)]
    memory = [float(draw(st.integers(0, 5))) for _ in range(n)]
    capacity = draw(st.one_of(st.just(math.inf), st.integers(0, 40).map(float)))
    units, i = [], 0
    while i < n:
        size = draw(st.integers(1, 3))
        units.append(list(range(i, min(n, i + size))))
        i += size
    return (units, succ, pred, cost, p_acc, p_cpu, memory, capacity, draw(st.integers(0, 5)),
            draw(st.sampled_from([None, 1, 3])))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(orders())
def test_the_bounds_change_no_answer(case):
    """The DP with its bounds gives the least sum and the runs, ties and all, of the DP that tries
    every run from every start (one node joined at a time)."""
    _bounded_is_every_run(*case)


def _bounded_is_every_run(units, succ, pred, cost, p_acc, p_cpu, memory, capacity, accelerators, cpu_run) -> None:
    """The run DP with its bounds gives what the DP that tries every run from every start gives."""
    from placement.problem.sequential import _accelerator_runs, _cpu_runs, least_sum

    n = len(units)
    full = least_sum(n, accelerators,
                     lambda i: _accelerator_runs(units, i, succ, pred, cost, p_acc, memory, capacity),
                     lambda i: _cpu_runs(units, i, n if cpu_run is None else min(n, i + cpu_run), pred, p_cpu),
                     Budget(None))
    assert least_run_sum(units, succ, pred, cost, p_acc, p_cpu, memory, capacity, accelerators,
                         max_cpu_run=cpu_run, bounded=True) == full


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(orders(), st.lists(st.sampled_from([-5.0, -0.5, 0.0, 1.0]), min_size=40, max_size=40))
def test_numbers_the_bounds_do_not_hold_for_leave_them_out(case, costs):
    """Negative transfer costs (which no valid instance has) make the bounds no bounds: the DP then
    runs without them and gives the answer of the DP that tries every run."""
    units, succ, pred, _cost, p_acc, *rest = case
    _bounded_is_every_run(units, succ, pred, costs[:len(p_acc)], p_acc, *rest)


def test_the_deadline_holds_while_the_bounds_are_built(monkeypatch):
    """Building the bounds of a long order takes time of its own (the CPU runs from every start, two
    sweeps): past the deadline it stops there, before the DP's first run, and says so."""
    import time

    import placement.problem.sequential as sequential
    from placement.errors import LimitExceededError

    def not_reached(*args, **kwargs):
        raise AssertionError("the bounds were built past the deadline")

    monkeypatch.setattr(sequential, "RunTable", not_reached)
    problem = long_chain(3000, 1000.0)
    n = len(problem.nodes)
    args = ([[i] for i in range(n)], problem.successors(), problem.predecessors(), [0.5] * n, [1.0] * n,
            [10.0] * n, [1.0] * n, 1000.0, 2)
    with pytest.raises(LimitExceededError, match="^the time limit ran out while the run DP ran; "):
        least_run_sum(*args, budget=Budget(None, deadline=time.perf_counter() - 1), max_cpu_run=32)
