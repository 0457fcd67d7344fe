"""The exact DP over ideals: hand-solved instances, brute force, a naive reference DP, ideal counts."""

from __future__ import annotations

import functools
import itertools
import math
import random
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from placement.errors import LimitExceededError
from placement.io.tarnawski import read_instance
from placement.problem.instance import DeviceType, Edge, Instance, Node
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.testing.bruteforce import brute_force
from placement.solvers.dp import solve_dp
from placement.solvers import _dp_kernels
from placement.solvers.ideals import _csr, contract, count_ideals, enumerate_ideals, enumerate_plain
from placement.verification.evaluate import evaluate
from tests.strategies import problems

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"


def solve_and_verify(problem: Instance, **options):
    """Solve with the DP and check the plan independently: valid, `stages`, value as claimed."""
    solution = solve_dp(problem, **options)
    if solution.plan is not None:
        evaluation = evaluate(problem, solution.plan, contiguity="stages")
        assert evaluation.valid, evaluation.violations
        assert evaluation.max_load == pytest.approx(solution.objective, rel=1e-12, abs=1e-12)
    return solution


# ----- hand-solved instances ------------------------------------------------------------

def test_chain4():
    # a(4) -1-> b(3) -0.5-> c(2) -1-> d(5), two accelerators. Pipelines of a chain are its splits:
    #   {a}|{b,c,d}: max(4+1, 10+1) = 11;  {a,b}|{c,d}: max(7+0.5, 7+0.5) = 7.5;
    #   {a,b,c}|{d}: max(9+1, 5+1) = 10;   everything on one: 14.   Optimum 7.5.
    solution = solve_and_verify(read_instance(TINY / "chain4.json"))
    assert solution.status is Status.OPTIMAL
    assert solution.objective == 7.5
    assert [d.nodes for d in solution.plan.devices] == [(1, 2), (3, 4)]


def test_diamond_with_unsupported_sink():
    # s -> x, s -> y, x -> t, y -> t; every cost 1; t runs on the CPU only (cpu 2).
    # x and y cost 60 on the CPU, so both sit on accelerators, on different ones (else >= 12).
    # {s,x} | {y} | cpu {t}: {s,x} = 1+6 + Out(s)+Out(x) = 9; {y} = 6 + In(s) + Out(y) = 8.
    # s on the CPU would put the CPU both first and last (not a pipeline) or cost 10+2 = 12.
    # Optimum 9.
    solution = solve_and_verify(read_instance(TINY / "diamond-cpu.json"))
    assert solution.objective == 9.0
    types = [d.type for d in solution.plan.devices]
    assert types == ["accelerator", "accelerator", "cpu"]
    assert solution.plan.devices[-1].nodes == (13,)


def test_memory_bound_binds():
    # a -> b -> c, each 2 on an accelerator (8 on the CPU), 3 bytes each, memory 5: one node per
    # accelerator, so one node goes to the CPU: max(8, 2 + 0.5 + 0.5) = 8. Optimum 8.
    problem = read_instance(TINY / "memory-chain.json")
    assert solve_and_verify(problem).objective == 8.0
    # With memory 6, {a,b} fits: max(4 + 0.5, 2 + 0.5) = 4.5.
    assert solve_and_verify(problem.with_devices(memory={"accelerator": 6})).objective == 4.5
    # With no accelerators the CPU takes all: 24.
    assert solve_and_verify(problem.with_devices(counts={"accelerator": 0})).objective == 24.0


def test_training_pair():
    # Classes {f1, b1} and {f2, b2}; edges f1->f2 (1), f2->b2 (0.5), b2->b1 (1.5), f1->b1 (1).
    # One device: 2+3+6+4 = 15. Two: {f1,b1} = 6 + Out(f1) 1 + In(b2) 1.5 = 8.5,
    # {f2,b2} = 9 + In(f1) 1 + Out(b2) 1.5 = 11.5. Optimum 11.5.
    solution = solve_and_verify(read_instance(TINY / "training-pair.json"))
    assert solution.objective == 11.5
    assert [sorted(d.nodes) for d in solution.plan.devices] == [[1, 4], [2, 3]]


def _small_remainder(fast3: float | None) -> Instance:
    """Types fast and slow, one device each, every transfer 0: n1 (fast 100000, not on slow), n2 (0 on
    both, or slow only), n3 (fast ``fast3``, slow 0.001); edge n1 → n3."""
    types = (DeviceType("fast", 1), DeviceType("slow", 1))
    nodes = (Node(1, "n1", (100000.0, None)), Node(2, "n2", (0.0 if fast3 is not None else None, 0.0)),
             Node(3, "n3", (fast3, 0.001)))
    return Instance(nodes, (Edge(1, 3),), types, name="small-remainder")


def test_the_work_left_for_the_last_devices_is_not_lost_to_rounding():
    # {n1, n2} on fast (100000) then {n3} on slow (0.001) is a pipeline: max-load 100000, the optimum
    # (n1 runs only on fast, so nothing is below 100000). The work left after {n1, n2}, 100000.001 −
    # 100000, is 0.0010000000038 in floating point, a hair above the slow device's capacity 0.001 (its
    # one node): the DP pruned that state and proved 100000.5 ({n2} on slow, {n1, n3} on fast) optimal.
    solution = solve_and_verify(_small_remainder(0.5))
    assert solution.status is Status.OPTIMAL and solution.objective == 100000.0
    assert solve_and_verify(_small_remainder(0.5), stages=2).objective == 100000.0
    # With n2 and n3 on slow only, the same pruning lost every plan ("lost the upper-bound plan").
    solution = solve_and_verify(_small_remainder(None))
    assert solution.status is Status.OPTIMAL and solution.objective == 100000.0


def test_infeasible_when_memory_too_small_everywhere():
    # memory-chain with no CPU and memory 5: three nodes of 3 bytes need three accelerators.
    problem = read_instance(TINY / "memory-chain.json").with_devices(counts={"cpu": 0})
    solution = solve_dp(problem)
    assert solution.status is Status.INFEASIBLE
    assert solution.plan is None


def test_ideal_limit_message():
    problem = read_instance(TINY / "diamond-cpu.json")
    # Ideals of the diamond: {}, {s}, {s,x}, {s,y}, {s,x,y}, {s,x,y,t} = 6.
    assert count_ideals(contract(problem).succ) == 6
    with pytest.raises(LimitExceededError, match=r"^more than 5 ideals in the contracted graph \(4 supernodes\)"):
        solve_dp(problem, max_ideals=5)
    with pytest.raises(LimitExceededError, match=r"^more than 1 ideal in the contracted graph \(4 supernodes\)"):
        solve_dp(problem, max_ideals=1)   # it said "more than 1 ideals"
    # one node: the ideals {} and {a}, the prefixes of its one order, which no limit refuses
    import placement

    single = placement.load({"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 0, "edges": [],
                             "nodes": [{"id": 0, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": 1}]})
    assert solve_dp(single, max_ideals=1).objective == 1.0


def random_chain(n: int, seed: int, branch: bool = False) -> Instance:
    """A chain of ``n`` nodes (times 0.5 to 1.5 on an accelerator, 5 to 15 on the CPU, transfers up to
    0.3), 3 accelerators and a CPU; ``branch`` adds a node fed by the first and feeding the last."""
    import placement

    r = random.Random(seed)
    nodes = [{"id": i, "supportedOnFpga": 1, "fpgaLatency": r.uniform(0.5, 1.5), "cpuLatency": r.uniform(5, 15),
              "size": 1} for i in range(n + branch)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": r.uniform(0, 0.3)} for i in range(n - 1)]
    if branch:
        edges += [{"sourceId": 0, "destId": n, "cost": edges[0]["cost"]},
                  {"sourceId": n, "destId": n - 1, "cost": 0.1}]
    return placement.load({"maxSizePerFPGA": 100, "maxFPGAs": 3, "maxCPUs": 1, "nodes": nodes, "edges": edges})


def test_a_total_order_is_not_refused_for_its_ideals():
    """A chain of 40 nodes has 41 ideals, the prefixes of its one order: the least any graph of 40 nodes has,
    so no limit on their count guards against anything, and max_ideals=5 runs it (a chain of 200,000 nodes
    passed the default 200,000: the DP was refused, and the MILP ended 3% from the optimum the DP proves).
    A graph with one more ideal than its nodes is counted, and refused, as before."""
    from placement.solvers.ideals import is_total_order

    chain = random_chain(40, 7)
    assert is_total_order(contract(chain).succ)
    limited = solve_dp(chain, max_ideals=5)
    assert limited.status is Status.OPTIMAL
    assert (limited.objective, limited.plan) == (solve_dp(chain).objective, solve_dp(chain).plan)
    assert limited.stats["ideals"] == 41
    branched = random_chain(40, 7, branch=True)
    assert not is_total_order(contract(branched).succ)
    with pytest.raises(LimitExceededError, match=r"^more than 41 ideals in the contracted graph \(41 supernodes\)"):
        solve_dp(branched, max_ideals=41)


def test_a_graph_with_more_supernodes_than_ideals_allowed_is_refused_before_counting(monkeypatch):
    """n supernodes have at least n + 1 ideals (a topological order's prefixes): the diamond's 4 supernodes
    exceed max_ideals=4 with no enumeration (on a chain of 200,000 nodes that took 1.5 s); with 5 allowed
    it counts, and finds 6."""
    from placement.solvers import ideals

    problem = read_instance(TINY / "diamond-cpu.json")
    counted = []
    real = ideals._enumerate
    monkeypatch.setattr(ideals, "_enumerate", lambda *args, **kw: counted.append(1) or real(*args, **kw))
    with pytest.raises(LimitExceededError, match=r"^more than 4 ideals in the contracted graph \(4 supernodes\)"):
        solve_dp(problem, max_ideals=4)
    assert counted == []
    with pytest.raises(LimitExceededError, match=r"^more than 5 ideals"):
        solve_dp(problem, max_ideals=5)
    assert counted != []


def test_the_prefix_chain_dp_is_not_tried_where_the_one_over_intervals_ran_out_of_time(monkeypatch):
    """The chain DP over every prefix does more work than the one over intervals: where that one ran out of
    time, the warm start goes to the greedy fill at once. (The diamond: its 6 ideals pass a limit of 1, where
    a chain's prefixes would not be refused.)"""
    from placement.solvers.milp import warmstart

    def late(problem, stages, deadline, progress=None):
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp", message="late",
                        stats={"out_of_time": True})

    def never(*args, **kwargs):
        raise AssertionError("the chain DP ran")

    monkeypatch.setattr(warmstart, "coarse_start", late)
    monkeypatch.setattr(warmstart, "solve_chain", never)
    said = []
    problem = read_instance(TINY / "diamond-cpu.json")
    plan, bound = warmstart.pipeline_start_and_bound(problem, 1, said.append, deadline=time.perf_counter() + 60)
    assert plan is not None and bound == 0.0
    assert said[-1].startswith("warm start from the greedy fill (") and said[-1].endswith(
        "): the chain DP stopped (not run: the chain DP over intervals ran out of time (late))")


def test_the_greedy_fill_replaces_a_worse_chain_dp_start(monkeypatch):
    """Where the DP is refused the start is the chain DPs', whose orders are cut at whole intervals: on a chain
    of 100,000 nodes over 1,001 devices they gave 909.88 and the greedy fill 126.74 (the optimum is near
    125), which was never looked at. The diamond here (its 6 ideals past a limit of 1), its chain DPs made to
    give every node on one accelerator (13): the greedy fill's 9 (10, 11 | 12 | 13 on the CPU) is the start."""
    from placement.plan import DeviceAssignment, Plan
    from placement.solvers.milp import warmstart

    def whole(problem, stages, deadline, progress=None):
        return Solution(Status.FEASIBLE, Plan((DeviceAssignment("accelerator", (10, 11, 12, 13)),)), 13.0, 0.0,
                        "chain-dp")

    def stopped(*args, **kwargs):
        raise LimitExceededError("ran out of time", "time_limit")

    monkeypatch.setattr(warmstart, "coarse_start", whole)
    monkeypatch.setattr(warmstart, "solve_chain", stopped)
    said = []
    problem = read_instance(TINY / "diamond-cpu.json")
    plan, bound = warmstart.pipeline_start_and_bound(problem, 1, said.append, deadline=time.perf_counter() + 60)
    assert [device.nodes for device in plan.devices if device.nodes] == [(10, 11), (12,), (13,)] and bound == 0.0
    assert said[-1] == "warm start from the greedy fill: max-load 9, below the chain DP's 13"


# ----- ideal counting --------------------------------------------------------------------

@st.composite
def dags(draw, max_nodes: int = 10):
    n = draw(st.integers(0, max_nodes))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.sets(st.sampled_from(pairs), max_size=2 * n)) if pairs else set()
    return n, sorted(edges)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_ideal_count_equals_number_of_antichains(dag):
    n, edges = dag
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    succ = [[w for w in graph.successors(v)] for v in range(n)]
    assert count_ideals(succ) == sum(1 for _ in nx.antichains(graph))


@settings(max_examples=200, deadline=None)
@given(dags(max_nodes=14), st.sampled_from([0, 1, 7, 60, 1 << 40]), st.booleans())
@example((3, [(0, 1), (1, 2)]), 2, True)   # a chain of 3 cut at 2: ∅, {0}, {0, 1} stored, count 3
def test_plain_enumeration_equals_the_kernel(dag, limit, store):
    """The plain-integer enumeration lists the kernel's ideals in the kernel's order, and stops alike."""
    n, edges = dag
    succ = [[w for v, w in edges if v == u] for u in range(n)]
    count, parent, added = enumerate_plain(succ, limit, store)
    expected = _dp_kernels.interpreted().enumerate_ideals(*_csr(succ), limit, store)
    assert count == expected[0]
    if store:
        kept = min(count, limit + 1)
        assert (parent, added) == (expected[1][:kept].tolist(), expected[2][:kept].tolist())


def test_plain_enumeration_by_hand():
    # the diamond 0 → {1, 2} → 3: ∅, {0}, {0,1}, {0,1,2}, {0,1,2,3}, {0,2} in depth-first order
    count, parent, added = enumerate_plain([[1, 2], [3], [3], []], 1 << 40, True)
    assert (count, parent, added) == (6, [-1, 0, 1, 2, 3, 1], [-1, 0, 1, 2, 3, 2])


def test_ideal_count_stops_at_limit():
    succ = [[] for _ in range(10)]  # 10 independent vertices: 2^10 ideals
    assert count_ideals(succ) == 1024
    assert count_ideals(succ, limit=100) == 101


# ----- against brute force and a naive reference DP --------------------------------------

@st.composite
def zero_heavy_problems(draw, max_nodes: int = 9):
    """Problems where many nodes take no time, memory or transfer cost (they exercise merging)."""
    problem = draw(problems(max_nodes=max_nodes))
    nodes = []
    for node in problem.nodes:
        if draw(st.integers(0, 2)) == 0:
            zero_cost = draw(st.booleans())
            node = Node(node.id, node.name, tuple(0.0 for _ in node.times), 0.0, node.backward, node.colour,
                        0.0 if zero_cost else node.out_cost)
        nodes.append(node)
    return Instance(tuple(nodes), problem.edges, problem.device_types, problem.name)


def _brute_force_matches(problem: Instance) -> None:
    expected = brute_force(problem, "stages")
    solution = solve_and_verify(problem)
    assert solution.status == expected.status
    if expected.plan is not None:
        assert solution.objective == expected.objective


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=8))
def test_dp_equals_brute_force(problem):
    _brute_force_matches(problem)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zero_heavy_problems(max_nodes=8))
def test_dp_equals_brute_force_with_zero_cost_nodes(problem):
    _brute_force_matches(problem)


REFERENCE_MAX_IDEALS = 120


def reference_dp(problem: Instance) -> float | None:
    """The DP recurrence in its plainest form: all ideals, all pairs, loads from the evaluator.

    Shares nothing with the solver: classes, the extended forward graph and its ideals come from
    networkx here, and every block's load and memory from the independent evaluator.
    """
    nodes = problem.nodes
    classes = problem.colour_classes()
    class_of = {v: c for c, members in enumerate(classes) for v in members}
    orphan = [all(nodes[v].backward for v in members) for members in classes]
    h = nx.DiGraph()
    h.add_nodes_from(range(len(classes)))
    for e in problem.edges:
        a, b = problem.index_of(e.src), problem.index_of(e.dst)
        ca, cb = class_of[a], class_of[b]
        if ca == cb:
            continue
        if not nodes[a].backward and not nodes[b].backward:
            h.add_edge(ca, cb)
        elif nodes[a].backward and nodes[b].backward and (orphan[ca] or orphan[cb]):
            h.add_edge(cb, ca)
    dag = nx.condensation(h)
    members = {s: [v for c in dag.nodes[s]["members"] for v in classes[c]] for s in dag.nodes}
    ideals = set()
    for antichain in nx.antichains(dag):
        down = set(antichain)
        for a in antichain:
            down |= nx.ancestors(dag, a)
        ideals.add(frozenset(down))
    if len(ideals) > REFERENCE_MAX_IDEALS:
        return None  # too slow for the plain recurrence
    ideals = sorted(ideals, key=len)
    full = frozenset(dag.nodes)
    types = problem.device_types

    @functools.lru_cache(maxsize=None)
    def block(x: frozenset, t: int) -> float:
        ids = tuple(nodes[v].id for s in x for v in members[s])
        if any(problem.node(i).times[t] is None for i in ids):
            return math.inf
        report = evaluate(problem, Plan((DeviceAssignment(types[t].name, ids),))).devices[0]
        return report.load if report.memory <= types[t].memory else math.inf

    counts = list(itertools.product(*[range(t.count + 1) for t in types]))
    best: dict[tuple, float] = {}
    for layer in counts:
        for ideal in ideals:
            if not ideal:
                best[layer, ideal] = 0.0
                continue
            value = math.inf
            for t in range(len(types)):
                if layer[t] == 0:
                    continue
                fewer = layer[:t] + (layer[t] - 1,) + layer[t + 1:]
                value = min(value, best[fewer, ideal])
                for sub in ideals:
                    if len(sub) < len(ideal) and sub < ideal:
                        value = min(value, max(best[fewer, sub], block(ideal - sub, t)))
            best[layer, ideal] = value
    return best[counts[-1], full]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.one_of(problems(max_nodes=12, max_accelerators=3, max_cpus=1),
                 zero_heavy_problems(max_nodes=12)))
def test_dp_equals_reference_dp(problem):
    expected = reference_dp(problem)
    assume(expected is not None)
    solution = solve_and_verify(problem)
    if math.isinf(expected):
        assert solution.status is Status.INFEASIBLE
    else:
        assert solution.objective == pytest.approx(expected, rel=1e-12, abs=1e-12)
        # Merging zero-cost classes never changes the optimum.
        assert solve_dp(problem, merge_zero_cost=False).objective == pytest.approx(expected, rel=1e-12, abs=1e-12)


# ----- compiled and interpreted kernels; graph shapes with few ideals ----------------------

_ZERO_TIME_CLASS = Instance(
    (Node(1, "f0", (None, 0.0), 0.0, False, 1000, 0.0), Node(3, "f1", (None, 0.0), 0.0, False, 1000, 0.0),
     Node(5, "f2", (None, 0.0), 0.0, False, None, 0.0)),
    (), (DeviceType("accelerator", 1), DeviceType("cpu", 1, pays_comm=False)), "hypothesis")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(problems(max_nodes=12, max_accelerators=3, max_cpus=1), zero_heavy_problems(max_nodes=12)),
       st.sampled_from([None, 1, 2]))
@example(_ZERO_TIME_CLASS, None)
def test_compiled_kernels_equal_interpreted_kernels(problem, stages):
    # The same kernels run compiled and as plain Python: same status, value and plan.
    if stages is not None and stages > sum(t.count for t in problem.device_types):
        stages = None
    compiled = solve_dp(problem, compiled=True, stages=stages)
    interpreted = solve_dp(problem, compiled=False, stages=stages)
    assert compiled.status == interpreted.status
    assert compiled.objective == interpreted.objective
    assert compiled.plan == interpreted.plan
    if compiled.plan is not None:
        assert evaluate(problem, compiled.plan, contiguity="stages").max_load == pytest.approx(
            compiled.objective, rel=1e-12, abs=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=10, max_accelerators=3, max_cpus=1))
def test_the_one_word_subset_test_equals_the_maxima_walk(problem):
    # With at most 64 supernodes J ⊆ I is one word's test; padded with a zero word, the same bitsets take the
    # walk over J's maxima: the same table, entry for entry (the interpreted kernels, a run with no ceiling).
    import numpy as np

    from placement.solvers import dp_table

    contraction = contract(problem)
    graph, layers = dp_table.build_graph(problem, contraction), dp_table.build_layers(problem)
    family = enumerate_ideals(contraction, 10 ** 6)
    data = dp_table.prepare(graph, layers, family, compiled=False)
    one_word = dp_table.fill(problem, graph, layers, data, math.inf, None, "dp")
    data.bits = np.hstack([data.bits, np.zeros_like(data.bits)])
    two_words = dp_table.fill(problem, graph, layers, data, math.inf, None, "dp")
    for name in ("dp", "parent", "choice", "counters"):
        assert np.array_equal(getattr(one_word, name), getattr(two_words, name))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=10, max_accelerators=4, max_cpus=3), st.booleans())
def test_a_class_of_layers_admits_the_blocks_its_layers_admit(problem, tight):
    # A pair (i, j) is tried where some layer L may take the block i \ j, asked of one layer of each class of
    # layers with equal dp[·, i] (and of every layer of a class where j is skipped at its head's previous
    # layer); with every layer a class of its own (as with exact N) each layer is asked: the same pairs, and
    # the same table, entry for entry (the interpreted kernels, without a ceiling and under the optimum).
    from unittest import mock

    import numpy as np

    from placement.solvers import dp_table

    solved = solve_dp(problem)
    assume(solved.plan is not None or not tight)
    contraction = contract(problem)
    graph, layers = dp_table.build_graph(problem, contraction), dp_table.build_layers(problem)
    family = enumerate_ideals(contraction, 10 ** 6)
    data = dp_table.prepare(graph, layers, family, compiled=False)
    ceiling = solved.objective if tight else math.inf
    with mock.patch.object(_dp_kernels, "CLASSES_FROM", 0):   # classes on every number of layers
        classes = dp_table.fill(problem, graph, layers, data, ceiling, None, "dp")
    layer_by_layer = dp_table.fill(problem, graph, layers, data, ceiling, None, "dp")
    assert len(layers.counts) < _dp_kernels.CLASSES_FROM
    for name in ("dp", "parent", "choice", "counters"):
        assert np.array_equal(getattr(classes, name), getattr(layer_by_layer, name))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_kernel_with_classes_fills_the_table_of_the_one_without(seed):
    # 6 accelerators (memory binding) and 5 CPUs: 42 layers, past CLASSES_FROM, so the table is filled by the
    # compiled dp_range_classes, which numba compiles apart from dp_range (the branches on whether ``above`` is
    # None decided at compile time); with CLASSES_FROM above 42, by dp_range: the same table, entry for entry,
    # under the optimum and without a ceiling, on a random DAG of 16 nodes
    from unittest import mock

    import numpy as np

    from placement.solvers import dp_table

    rng = random.Random(seed)
    nodes = tuple(Node(i, f"n{i}", (rng.uniform(1, 9), rng.uniform(10, 60)), float(rng.randint(1, 4)), False, None,
                       rng.uniform(0, 2)) for i in range(16))
    edges = tuple(Edge(i, j) for j in range(1, 16) for i in rng.sample(range(j), min(j, rng.randint(1, 2))))
    problem = Instance(nodes, edges, (DeviceType("accelerator", 6, 14.0), DeviceType("cpu", 5, pays_comm=False)))
    contraction = contract(problem)
    graph, layers = dp_table.build_graph(problem, contraction), dp_table.build_layers(problem)
    assert _dp_kernels.range_kernel(len(layers.counts), False) == "dp_range_classes"
    data = dp_table.prepare(graph, layers, enumerate_ideals(contraction, 10 ** 6), compiled=True)
    optimum = solve_dp(problem).objective
    for ceiling in (optimum, math.inf):
        classes = dp_table.fill(problem, graph, layers, data, ceiling, None, "dp")
        with mock.patch.object(_dp_kernels, "CLASSES_FROM", len(layers.counts) + 1):
            layer_by_layer = dp_table.fill(problem, graph, layers, data, ceiling, None, "dp")
        assert classes.dp[layers.full, classes.full] == pytest.approx(optimum, rel=1e-12)
        for name in ("dp", "parent", "choice", "counters"):
            assert np.array_equal(getattr(classes, name), getattr(layer_by_layer, name))


def _line(times: list[float], costs: list[float], accelerators: int, all_pairs: bool | str) -> Instance:
    """Nodes 0..n-1 on accelerators only; edges i -> i+1 (a chain) or i -> j for every i < j (a total order);
    ``all_pairs="fan-in"``: the chain, and every node feeding the last."""
    n = len(times)
    nodes = tuple(Node(i, f"n{i}", (p,), 0.0, False, None, c) for i, (p, c) in enumerate(zip(times, costs)))
    pairs = [(i, i + 1) for i in range(n - 1)]
    if all_pairs is True:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    if all_pairs == "fan-in":
        pairs += [(i, n - 1) for i in range(n - 2)]
    return Instance(nodes, tuple(Edge(i, j) for i, j in pairs), (DeviceType("accelerator", accelerators),))


def _interval_optimum(times: list[float], costs: list[float], accelerators: int, all_pairs: bool | str) -> float:
    """The textbook linear-partition DP over intervals [a, b] of the line, with the load of DESIGN.md §2:
    a chain's interval receives c(a-1) and sends c(b); a total order's receives c(u) from every u < a
    and, unless it ends the graph, sends c(u) for every u in it; a fan-in's receives c(a-1), or, holding the
    last node, c(u) from every u < a, and, unless it holds the last node, sends c(u) for every u in it."""
    n = len(times)
    prefix_p = list(itertools.accumulate(times, initial=0.0))
    prefix_c = list(itertools.accumulate(costs, initial=0.0))

    def load(a: int, b: int) -> float:  # nodes a..b-1
        work = prefix_p[b] - prefix_p[a]
        if all_pairs == "fan-in":
            received = prefix_c[a] if b == n else costs[a - 1] if a > 0 else 0.0
            return work + received + (prefix_c[b] - prefix_c[a] if b < n else 0.0)
        if all_pairs:
            return work + prefix_c[a] + (prefix_c[b] - prefix_c[a] if b < n else 0.0)
        return work + (costs[a - 1] if a > 0 else 0.0) + (costs[b - 1] if b < n else 0.0)

    best = [0.0] + [math.inf] * n          # best[b]: nodes 0..b-1 on the devices so far
    for _ in range(accelerators):
        best = [0.0] + [min(best[b], min(max(best[a], load(a, b)) for a in range(b))) for b in range(1, n + 1)]
    return best[n]


@pytest.mark.parametrize("all_pairs, n", [(False, 300), (True, 60), ("fan-in", 300)])
def test_line_graphs_equal_interval_dp(all_pairs, n):
    # A chain, a total order and a fan-in chain have n + 1 ideals, the prefixes: the DP must agree with the
    # interval DP (the fan-in's cuts hold every node before them: its blocks' communication is kept as they grow).
    rng = random.Random(n)
    times = [float(rng.randint(1, 20)) for _ in range(n)]
    costs = [float(rng.randint(0, 5)) for _ in range(n)]
    problem = _line(times, costs, 4, all_pairs)
    expected = _interval_optimum(times, costs, 4, all_pairs)
    for compiled in (True, False):
        solution = solve_and_verify(problem, compiled=compiled)
        assert solution.stats["ideals"] == n + 1
        assert solution.objective == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.randoms(use_true_random=False))
def test_prefix_blocks_cost_the_same_grown_as_from_their_cuts(problem, rng):
    """A prefix family's blocks are stretches of its order, and the kernel keeps their communication as they
    grow; the cuts' formula (the path of every other family, taken here by calling the family not nested)
    gives the same table on any graph and topological order (times and costs of binary fractions: exact)."""
    from placement.solvers.dp_table import build_graph, build_layers, fill, prefix_family, prepare

    contraction = contract(problem, False)
    graph, layers = build_graph(problem, contraction), build_layers(problem, contraction.size + 1)
    indegree = [0] * contraction.size
    for successors in contraction.succ:
        for s in successors:
            indegree[s] += 1
    ready, order = [s for s in range(contraction.size) if not indegree[s]], []
    while ready:   # a random topological order
        s = ready.pop(rng.randrange(len(ready)))
        order.append(s)
        for t in contraction.succ[s]:
            indegree[t] -= 1
            if not indegree[t]:
                ready.append(t)
    family = prefix_family(order)
    grown = prepare(graph, layers, family, compiled=False, keep_bits=True)
    merged = prepare(graph, layers, family, compiled=False, keep_bits=True)
    merged.nested = False
    tables = [fill(problem, graph, layers, data, math.inf, None, "prefixes") for data in (grown, merged)]
    assert tables[0].dp.tolist() == tables[1].dp.tolist()


def test_a_chains_blocks_cost_no_more_grown_than_merged():
    """A chain's cuts hold a node each, so merging two costs a step or two, while the pairs that get as far as
    their communication are sparse in the window: growing the block through every supernode between them read
    the touch lists dozens of times a pair. It grows only where that costs no more than the merge, so the reads
    (growth and the counts put back) stay within twice the two cuts' sizes a pair."""
    import dataclasses

    import numpy as np

    from placement.solvers.dp_table import build_graph, build_layers, fill, prefix_family, prepare

    class Reads(np.ndarray):
        count = 0

        def __getitem__(self, key):
            Reads.count += 1
            return super().__getitem__(key)

    n = 400
    rng = random.Random(n)
    times = [float(rng.randint(1, 20)) for _ in range(n)]
    costs = [float(rng.randint(1, 5)) for _ in range(n)]
    problem = _line(times, costs, 4, False)
    contraction = contract(problem, False)
    graph, layers = build_graph(problem, contraction), build_layers(problem, contraction.size + 1)
    data = prepare(graph, layers, prefix_family(list(range(contraction.size))), compiled=False)
    counted = dataclasses.replace(graph, touch_idx=graph.touch_idx.view(Reads))
    table = fill(problem, counted, layers, data, _interval_optimum(times, costs, 4, False), None, "prefixes")
    assert table.dp[:, table.full].min() == _interval_optimum(times, costs, 4, False)
    evaluated = int(table.counters[_dp_kernels.EVALUATED])
    assert evaluated > 0
    assert Reads.count <= 4 * evaluated


def test_ideal_counts_of_long_chains():
    # A chain of n vertices has n + 1 ideals; counting stops one past the limit.
    chain = [[v + 1] for v in range(4999)] + [[]]
    assert count_ideals(chain) == 5000 + 1
    assert count_ideals(chain, limit=1000) == 1001
    # Two chains of 100 side by side: any prefix of each, 101 * 101.
    two = [[v + 1] if v not in (99, 199) else [] for v in range(200)]
    assert count_ideals(two) == 101 * 101


def test_solves_without_a_writable_kernel_cache():
    # Where numba finds no writable cache location (a read-only install and home), the kernels are
    # compiled in memory: the solve succeeds and agrees with the interpreted kernels.
    script = (
        "import numba.core.caching as c; c.CacheImpl._locator_classes = []\n"
        "from placement.io.tarnawski import read_instance\n"
        "from placement.solvers.dp import solve_dp\n"
        f"p = read_instance({str(TINY / 'diamond-cpu.json')!r})\n"
        "a, b = solve_dp(p, compiled=True), solve_dp(p, compiled=False)\n"
        "print(a.status.value, a.objective, a.objective == b.objective and a.plan == b.plan)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["optimal", "9.0", "True"]


def test_a_huge_ideal_limit_allocates_nothing_up_front():
    # The diamond's optimum is 9 (test_diamond_with_unsupported_sink); a limit of 10^15 ideals must
    # not allocate 10^15 entries before enumerating the 6 ideals.
    problem = read_instance(TINY / "diamond-cpu.json")
    for compiled in (False, True):
        assert solve_dp(problem, max_ideals=10**15, compiled=compiled).objective == 9.0


def test_an_ideal_limit_past_64_bits_or_past_memory_stops_the_count_where_memory_does(monkeypatch):
    """A limit of 2^70 reached the counting kernel, which counts in 64-bit integers: a numba typing error
    instead of a plan. The count now stops at the most ideals whose tables fit the memory budget: the
    diamond (6 ideals) solves (optimum 9, as above); on a budget of no more than 5 ideals' tables the
    refusal names memory, not the limit."""
    from placement.solvers import dp_table

    fork = [[k for k in range(1, 19)]] + [[19] for _ in range(18)] + [[]]   # 0 -> 18 branches -> 19
    assert count_ideals(fork, 2 ** 70) == 1 + 2 ** 18 + 1   # ∅, {0} ∪ any set of branches, all
    problem = read_instance(TINY / "diamond-cpu.json")
    for compiled in (False, True):
        assert solve_dp(problem, max_ideals=2 ** 70, compiled=compiled).objective == 9.0
    from placement.solvers.dp import deadline_watch

    with pytest.raises(LimitExceededError) as raised:   # a deadline met while counting stays a deadline
        solve_dp(problem, max_ideals=2 ** 70, progress=deadline_watch(time.perf_counter() - 1.0))
    assert raised.value.parameter == "time_limit"
    graph, layers = dp_table.build_graph(problem, contract(problem)), dp_table.build_layers(problem)
    types = graph.comp.shape[1]
    per_ideal = dp_table.bytes_per_ideal(dp_table.value_columns(types), graph.contraction.size, types,
                                         len(layers.counts), False)
    assert dp_table.most_ideals(graph, layers, budget=5.5 * per_ideal) == 5
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 5.5 * per_ideal)
    with pytest.raises(LimitExceededError, match=r"^more than 5 ideals in the contracted graph \(4 supernodes\): "
                                                 r"the DP's tables would take more than the 0\.0 GiB of memory"):
        solve_dp(problem, max_ideals=2 ** 70)


def test_the_bundled_bert_base_training_graph_solves_without_compiled_kernels(monkeypatch):
    # Its largest family, 388 ideals, is 3,010,880 units of work (ideals² × types × layers), below
    # COMPILED_FROM_WORK, and no run is larger than INTERPRETED_UNITS (500,000; the DP's own run: 10 layers ×
    # (40,902 window pairs + 2 types × 388 ideals) = 416,780): on a fresh install and with the compiled kernels
    # cached alike, nothing asks for them, and the optimum is the README's.
    from placement.io.tarnawski import read_instance
    from placement.solvers import dp_table

    problem = read_instance(Path(__file__).resolve().parents[1] / "instances" / "models" / "bert-base-training.json")

    def refused():
        raise AssertionError("the compiled kernels were asked for")

    monkeypatch.setattr(_dp_kernels, "compiled", refused)
    monkeypatch.setattr(_dp_kernels, "ready", lambda: False)   # not set up in this process
    for cached in (False, True):
        monkeypatch.setattr(_dp_kernels, "must_compile", lambda *names: not cached)
        assert solve_dp(problem).objective == pytest.approx(3.362709, abs=1e-6)
    assert 388 * 388 * 2 * 10 == 3_010_880 < dp_table.COMPILED_FROM_WORK


def test_a_family_with_large_tables_starts_on_the_compiled_kernels(monkeypatch):
    """A total order of 500 nodes has 501 ideals and 124,750 edges: 501 × (1 + 249.5) = 125,500 table units,
    above COMPILED_FROM_ENTRIES (100,000), though its work (501² × 1 type × 3 layers = 753,003) is far below
    COMPILED_FROM_WORK; a chain of 500 nodes: 501 × (1 + 499/500) < 1,003 units, interpreted (where the
    compiled kernels are not set up in the process yet). Given ``compiled`` decides alone."""
    from placement.solvers import dp_table

    monkeypatch.setattr(_dp_kernels, "ready", lambda: False)

    def decided(all_pairs: bool, compiled: bool | None = None) -> bool:
        problem = _line([1.0] * 500, [0.5] * 500, 2, all_pairs)
        graph, layers = dp_table.build_graph(problem, contract(problem)), dp_table.build_layers(problem)
        assert (graph.contraction.size, len(layers.counts)) == (500, 3)
        return dp_table.starts_compiled(501, graph, layers, compiled)

    assert (decided(True), decided(False)) == (True, False)
    assert (decided(True, False), decided(False, True)) == (False, True)


def test_a_run_moves_to_the_compiled_kernels_where_it_is_large(monkeypatch):
    """Window pairs by hand: computes 0, 1, 2, 4 in order, under the ceiling 2, pair each ideal with the
    earlier ones of compute above its own minus 2: 1 with 0, 2 with 1, none for 0 and 4: 2; with no
    ceiling every earlier one, on each of two types: 2 · (0 + 1 + 2 + 3) = 12. A run's units: 3 layers ×
    (2 pairs + 4 ideals) = 18. A run of up to INTERPRETED_UNITS (500,000) stays interpreted; above, it
    moves where the compiled kernels are cached, and while they are not, only above
    INTERPRETED_UNITS_UNCOMPILED (5,000,000), saying that it compiles them."""
    import numpy as np
    from types import SimpleNamespace

    from placement.solvers import dp_table

    computes = np.array([[0.0, 1.0, 2.0, 4.0]])
    assert dp_table.window_pairs(computes, 2.0) == 2
    assert dp_table.window_pairs(np.vstack([computes, computes[:, ::-1]]), math.inf) == 12
    assert dp_table.run_units(computes, 3, 2.0) == 18
    compiled = SimpleNamespace()
    monkeypatch.setattr(_dp_kernels, "compiled", lambda: compiled)
    for cached, units, moves in [(True, 500_000, False), (True, 500_001, True), (False, 500_001, False),
                                 (False, 5_000_000, False), (False, 5_000_001, True)]:
        monkeypatch.setattr(_dp_kernels, "must_compile", lambda *names: not cached)
        said: list[str] = []
        data = SimpleNamespace(kernels=None, may_compile=True)
        dp_table._move_to_compiled(data, units, said.append, "dp_range")
        assert (data.kernels is compiled, data.may_compile) == (moves, not moves)
        assert said == ([dp_table.compiling()] if moves and not cached else [])


def test_a_large_run_of_a_solve_runs_on_the_kernels_it_moved_to(monkeypatch):
    """With the limit lowered to 0 units and the compiled kernels cached, the first run of a family that
    starts interpreted moves to them, and every later run of that family uses them: standing in for them,
    the interpreted kernels counted as they are called give the same optimum as a solve that stays
    interpreted."""
    from types import SimpleNamespace

    from placement.solvers import dp_table

    problem = _line([1.0, 2.0, 3.0, 1.5, 2.5], [0.5] * 5, 2, False)
    expected = solve_dp(problem, compiled=False).objective
    calls: list[int] = []
    plain = _dp_kernels.interpreted()

    def counted(*args):
        calls.append(args[1] - args[0])
        return plain.dp_range(*args)

    stand_in = SimpleNamespace(enumerate_ideals=plain.enumerate_ideals, family_data=plain.family_data,
                               dp_range=counted)
    monkeypatch.setattr(_dp_kernels, "ready", lambda: False)
    monkeypatch.setattr(_dp_kernels, "must_compile", lambda *names: False)
    monkeypatch.setattr(_dp_kernels, "compiled", lambda: stand_in)
    monkeypatch.setattr(dp_table, "INTERPRETED_UNITS", 0)
    assert solve_dp(problem).objective == expected
    assert calls and sum(calls) >= 6   # at least one whole run over the family's 6 ideals
    calls.clear()
    monkeypatch.setattr(dp_table, "INTERPRETED_UNITS", 10 ** 12)   # no run is that large: none moves
    assert solve_dp(problem).objective == expected and calls == []


def test_a_run_needs_only_its_own_kernel_compiled(monkeypatch):
    """A family built interpreted and moved to the compiled kernels for a run compiles dp_range alone: a later
    run past INTERPRETED_UNITS, in this process or (from numba's cache) another, takes it without saying that
    it compiles anything, though family_data was never compiled (it said so on every large run, and stayed
    interpreted below INTERPRETED_UNITS_UNCOMPILED). A run of many layers, whose kernel is dp_range_classes
    (compiled apart), asks of that kernel: never compiled, it stays interpreted below
    INTERPRETED_UNITS_UNCOMPILED and says it compiles above."""
    from types import SimpleNamespace

    from placement.solvers import dp_table

    def never_compiled():   # what placement.kernels.is_cached sees of a kernel neither run nor cached
        raise AssertionError("not called")

    never_compiled.py_func, never_compiled.signatures = never_compiled, []
    compiled = SimpleNamespace(family_data=never_compiled, dp_range=lambda *args: None,   # dp_range: set up
                               dp_range_classes=never_compiled)
    monkeypatch.setattr(_dp_kernels, "compiled", lambda: compiled)
    assert _dp_kernels.must_compile() and not _dp_kernels.must_compile(("dp_range",))
    for units in (500_001, 5_000_001):
        said: list[str] = []
        data = SimpleNamespace(kernels=None, may_compile=True)
        dp_table._move_to_compiled(data, units, said.append, "dp_range")
        assert (data.kernels, said) == (compiled, [])
    for units, moves in ((500_001, False), (5_000_001, True)):
        said = []
        data = SimpleNamespace(kernels=None, may_compile=True)
        dp_table._move_to_compiled(data, units, said.append, "dp_range_classes")
        assert (data.kernels is compiled, said) == (moves, [dp_table.compiling()] if moves else [])


def test_a_process_whose_compiled_kernels_are_set_up_starts_on_them(monkeypatch):
    """Once the compiled kernels are set up in the process (a loop of solves: the co-design baselines
    solve hundreds of small instances), a small family starts on them; before, interpreted."""
    from placement.solvers import dp_table

    problem = _line([1.0] * 20, [0.5] * 20, 2, False)
    graph, layers = dp_table.build_graph(problem, contract(problem)), dp_table.build_layers(problem)
    for ready in (False, True):
        monkeypatch.setattr(_dp_kernels, "ready", lambda: ready)
        assert dp_table.starts_compiled(21, graph, layers) is ready


def test_a_long_chain_announces_compiling_the_kernels_once(monkeypatch):
    """A chain of 20,100 nodes: its 20,101 prefixes are past COARSE_FROM, so the chain DP over intervals of
    the order gives the bound, and past COMPILED_FROM_WORK, so the solve starts on the compiled kernels and
    says, on a fresh install, that it compiles them. The chain DP over intervals runs on the kernels the
    solve chose: it does not move to them again, nor say so a second time."""
    from placement.solvers import dp_table

    n = 20_100
    problem = Instance(tuple(Node(i, f"n{i}", (1.0 + (i % 7) / 8,), 0.0, False, None, 0.125) for i in range(n)),
                       tuple(Edge(i, i + 1) for i in range(n - 1)), (DeviceType("acc", 4),))
    monkeypatch.setattr(_dp_kernels, "must_compile", lambda *names: True)   # as on a fresh install
    said: list[str] = []
    solution = solve_dp(problem, progress=said.append)
    assert solution.status == Status.OPTIMAL
    assert said.count(dp_table.compiling()) == 1
