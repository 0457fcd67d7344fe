"""The critical-chain latency bound (placement.problem.chain_bound): hand-solved instances, the
exhaustive optimum on random ones, and the published operator graph it proves."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

import placement
from placement.problem.chain_bound import chain_bound
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node
from placement.solution import Status
from placement.testing.bruteforce_latency import brute_force_latency
from tests.strategies import problems
from tests.test_milp_latency import fork

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "latency-inputs"


def _devices(accelerators: int, cpus: int, memory: float = math.inf) -> tuple[DeviceType, DeviceType]:
    return DeviceType(ACCELERATOR, accelerators, memory), DeviceType(CPU, cpus, math.inf, False)


def cyclic_classes() -> Instance:
    """v1 and v4 are one class and v1 → v3 → v4, so a call holding the class holds v3: the three
    groups form a cycle and go whole into one call. No CPUs, 3 accelerators; accelerator times v0
    1.25, v1 0.75, the rest 0. Everything in one call: 2 (nothing sent or received), the optimum
    (exhaustive search). The bound: the group's call alone (0.75, and v3's output sent, 0.25) with
    v0 and v2 beside it (incomparable) and v5 (no time) after it: 1. Before cycles of groups were
    merged, the enumeration never reached the whole graph and the bound said 2.5, above the
    optimum."""
    times = [(1.25, 3.25), (0.75, 3.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]
    colour = [None, 101, None, None, 101, None]
    costs = [1.25, 2.0, 0.25, 0.25, 0.25, 0.25]
    nodes = tuple(Node(2 * i + 1, f"v{i}", times[i], colour=colour[i], out_cost=costs[i]) for i in range(6))
    edges = [(0, 2), (0, 5), (1, 3), (2, 5), (3, 4), (3, 5)]
    return Instance(nodes, tuple(Edge(2 * a + 1, 2 * b + 1) for a, b in edges), _devices(3, 0, 6.0), name="cycle")


def test_the_fork_by_hand():
    # the optimum, 8 (tests/test_milp_latency.py: s on a CPU, l alone in a call, r on a CPU beside
    # it, t on a CPU): the chain s (1) → l's call (1 + 4 + 1) → t (1); r runs beside l, incomparable
    bound = chain_bound(fork())
    assert bound.value == 8.0 and bound.ideals == 6


def test_a_chain_is_bounded_by_its_optimum_exactly():
    """a → b → c, accelerator times 2, 3, 2, CPU times 3, 9, 3, every transfer 1, one accelerator of
    memory 2 (each node 1): at most two nodes per call. Plans: a on a CPU (3), b, c in the call
    (1 + 5 = 6): 9; a, b in the call (5 + 1 = 6), c on a CPU (3): 9; all on the CPUs: 15; b alone in
    the call (1 + 3 + 1) between CPU nodes: 11. The optimum is 9, and on a chain the bound is exact."""
    nodes = tuple(Node(i, name, (acc, cpu), memory=1.0, out_cost=1.0)
                  for i, (name, acc, cpu) in enumerate([("a", 2.0, 3.0), ("b", 3.0, 9.0), ("c", 2.0, 3.0)]))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(1, 1, 2.0), name="chain")
    assert brute_force_latency(problem, max_calls=1).objective == 9.0
    assert chain_bound(problem).value == 9.0


def test_cycles_of_classes_go_into_one_call():
    problem = cyclic_classes()
    assert brute_force_latency(problem, max_calls=1).objective == 2.0
    assert chain_bound(problem).value == 1.0


def test_sums_are_exact():
    """Times 0.1, 0.2 and 0.3 in one call: floating-point sums of these round, so the bound is their
    exact sum less what a sum of the plan's terms may lose (2·3 + 2 + 1 additions of 2^-53 each):
    below the evaluator's 0.6000000000000001 and within 1e-15 of it."""
    nodes = tuple(Node(i, f"n{i}", (t, None)) for i, t in enumerate((0.1, 0.2, 0.3)))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(1, 0), name="tenths")
    value = chain_bound(problem).value
    assert 0.6 - 1e-15 < value < 0.6 <= 0.1 + 0.2 + 0.3


def decimal_memory() -> Instance:
    """a → b, 2 accelerators of memory 0.3, no CPUs; a: time 5, memory 0.1, transfer 1; b: time 5,
    memory 0.2. The model reads sizes as written: 0.1 + 0.2 fits 0.3, so both in one call, 10, is the
    optimum (split: 5 + 1, then 1 + 5 = 12). Summed in binary the two sizes exceed 0.3: the bound said
    12, the starting plans (which sum memory in floating point) all split, and the solver called 12
    optimal without searching; on HiGHS the path bound said 12 as well."""
    nodes = (Node(1, "a", (5.0, None), memory=0.1, out_cost=1.0), Node(3, "b", (5.0, None), memory=0.2))
    return Instance(nodes, (Edge(1, 3),), _devices(2, 0, 0.3), name="decimal memory")


def test_memory_is_read_as_the_model_reads_it():
    problem = decimal_memory()
    assert brute_force_latency(problem, max_calls=1).objective == 10.0
    assert chain_bound(problem).value <= 10.0
    for backend in ("cp-sat", "highs"):
        result = placement.solve(problem, objective="latency", method="milp", backend=backend)
        assert (result.status, result.value) == ("optimal", 10.0), backend
    # subnormal sizes: the rule's 1e-9 margin underflows and the rounded sum decides. Four sizes of
    # 8.3609e-319 (169,226 units of 2^-1074) sum to one unit below 3.344355e-318 in binary, above it as
    # written; the rule lets all four share a call: one call of 1 + 1 + 1 + 1, the optimum 4 (the bound
    # read the sizes as written only, split the chain and said 6)
    tiny = tuple(Node(i, f"n{i}", (1.0, 10.0), memory=8.3609e-319, out_cost=1.0) for i in range(4))
    chain = Instance(tiny, tuple(Edge(i, i + 1) for i in range(3)), _devices(2, 0, 3.344355e-318), name="subnormal")
    assert brute_force_latency(chain, max_calls=1).objective == 4.0
    assert chain_bound(chain).value <= 4.0


def test_no_evaluated_latency_is_below_the_bound_and_wide_ranges_of_times_are_integers():
    # 0.39 + 0.76 + 0.65 is 1.7999999999999998 summed left to right in floating point, 1.8000000000000000444
    # exactly: the evaluator's call time, an exactly rounded sum, is 1.8, and the bound is no higher
    nodes = tuple(Node(i, f"n{i}", (t, None)) for i, t in enumerate((0.39, 0.76, 0.65)))
    chain = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(1, 0), name="decimal times")
    assert chain_bound(chain).value <= brute_force_latency(chain, max_calls=1).objective == 1.8
    # CPU times 1e-300 and 1e12: the exact sum is an integer of 2^1000-odd units (math.isfinite overflowed)
    wide = Instance((Node(1, "a", (None, 1e-300)), Node(3, "b", (None, 1e12))), (Edge(1, 3),), _devices(1, 1),
                    name="wide")
    assert 0.999999 * 1e12 < chain_bound(wide).value <= 1e12


def test_where_the_bound_does_not_apply_it_says_why():
    # a class of two nodes with CPU time on the CPUs runs node by node: no group finishes with one core
    nodes = (Node(0, "a", (1.0, 2.0), colour=7), Node(1, "b", (1.0, 2.0)), Node(2, "c", (1.0, 2.0), colour=7))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2)), _devices(2, 1), name="two cores")
    assert chain_bound(problem).why == "a cycle of colour classes that may run on the CPUs"
    apart = Instance(nodes, (Edge(0, 1),), _devices(2, 1), name="apart")
    assert chain_bound(apart).why == "a colour class that may run on the CPUs has more than one core node"
    three = tuple(Node(i, f"n{i}", (1.0, 2.0, 1.0)) for i in range(2))
    two_types = Instance(three, (Edge(0, 1),), (*_devices(1, 1), DeviceType("gpu", 1, math.inf)), name="3")
    assert chain_bound(two_types).why == "more than one accelerator or CPU type"
    assert chain_bound(fork(), max_ideals=3).why == "more than 3 ideals"


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=6, training=False, max_accelerators=2, max_cpus=1))
@example(cyclic_classes())
@example(fork())
@example(decimal_memory())
def test_the_bound_never_exceeds_the_exhaustive_optimum(problem: Instance):
    bound = chain_bound(problem)
    truth = brute_force_latency(problem, max_calls=1)
    if bound.value is None or truth.status is not Status.OPTIMAL:
        return
    assert bound.value <= truth.objective
    # pruned at the optimum's value, the bound is the optimum exactly where it proves it
    assert chain_bound(problem, cutoff=truth.objective).value <= truth.objective


@pytest.mark.skipif(not (SHARED / "OperatorGraphs" / "resnet50_inference.json").is_file(),
                    reason="../shared/tarnawski is absent")
def test_the_resnet50_operator_graph_latency_is_proven_optimal():
    """The warm start (the least sum of calls run one after another, 7 calls) has latency 651.120759,
    and every critical chain of the 241 ideals of the graph's groups sums to at least that: no plan
    gains from running calls side by side here, and the starting plan is optimal without a search."""
    problem = placement.load(SHARED / "OperatorGraphs" / "resnet50_inference.json")
    result = placement.solve(problem, objective="latency", time_limit=120)
    assert result.status == "optimal" and result.bound == result.value
    assert round(result.value, 6) == 651.120759
    assert result.stats["chain_ideals"] == 241 and "the starting plan meets" in result.message
    # a heuristic's plan carries it too: the chain DP's plan is that optimum, and its gap is 0
    chain = placement.solve(problem, objective="latency", method="latency-chain")
    assert chain.status == "feasible" and chain.value == result.value and chain.gap < 1e-12


class _CountedList(list):
    """A list that counts its item reads."""

    reads = 0

    def __getitem__(self, index):
        _CountedList.reads += 1
        return super().__getitem__(index)


def test_a_long_chain_is_given_up_on_from_its_group_count(monkeypatch):
    # 3,000 groups have 3,001 ideals at least (the prefixes of a topological order): more than a limit of 2,000,
    # known without enumerating any; and the groups on cycles are found by component, not by pairs of groups
    import placement.problem.chain_bound as module

    def counted(*args):
        return _CountedList(strongly_connected(*args))

    strongly_connected = module.strongly_connected
    monkeypatch.setattr(module, "strongly_connected", counted)
    n = 3_000
    nodes = tuple(Node(i, f"v{i}", (1.0, 2.0), out_cost=0.5) for i in range(n))
    chain = Instance(nodes, tuple(Edge(i, i + 1) for i in range(n - 1)), _devices(2, 1), name="chain")
    gsucc = _CountedList({x + 1} for x in range(n - 1))
    gsucc.append(set())
    _CountedList.reads = 0
    assert module.ideal_bitsets(n, gsucc, 2_000) is None
    assert _CountedList.reads == 0
    result = chain_bound(chain, max_ideals=2_000)
    assert result.value is None and result.why == "more than 2,000 ideals"
    assert _CountedList.reads <= 2 * n
