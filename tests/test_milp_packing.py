"""The packing bound of the assignment MILPs (placement.solvers.milp.packing) against brute force,
enumeration and hand-solved values.

With every group in ``H`` the bound is the ``none`` optimum itself (each slot's cut is then its
true boundary), so brute force pins it exactly; for any smaller ``H`` it must lie at or below
that optimum, and grow with ``H``. The hypergraph cut is checked against enumerating the sets
between its two sides.
"""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import placement
from placement.io.tarnawski import parse_instance, read_instance
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Instance, Node
from placement.solution import Status
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.driver import better_start
from placement.solvers.milp.none import AssignmentVars, NoContiguity, slot_kinds
from placement.solvers.milp.outcome import Verdict
from placement.solvers.milp.packing import HyperCut, extend, hypergraph, packing_floor, packing_value
from placement.verification.evaluate import evaluate
from placement.testing.bruteforce import brute_force
from tests.model_units import float_data
from tests.strategies import problems

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski"
GNMT = SHARED / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json"


def data(problem: Instance):
    return float_data(problem)


def chain(times: list[float], cost: float, accelerators: int, cpus: int = 0, memory: float = 1e9,
          size: float = 0.0) -> Instance:
    """A chain of nodes 0 → 1 → … with the given accelerator times (ten times slower on a CPU)."""
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10 * t, "fpgaLatency": t, "isBackwardNode": 0,
              "size": size} for i, t in enumerate(times)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": cost} for i in range(len(times) - 1)]
    return parse_instance({"maxSizePerFPGA": memory, "maxFPGAs": accelerators, "maxCPUs": cpus,
                           "nodes": nodes, "edges": edges})


@pytest.mark.parametrize("seed", range(40))
def test_cut_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 7)
    edges = [(rng.sample(range(n), rng.randint(2, min(3, n))), rng.choice([0.5, 1.0, 2.0, 3.0]))
             for _ in range(rng.randint(1, 8))]
    inside = rng.sample(range(n), rng.randint(1, n - 1))
    outside = rng.sample([v for v in range(n) if v not in inside], rng.randint(1, n - len(inside)))
    free = [v for v in range(n) if v not in inside and v not in outside]
    truth = math.inf
    for r in range(len(free) + 1):
        for extra in itertools.combinations(free, r):
            S = set(inside) | set(extra)
            truth = min(truth, sum(c for members, c in edges if set(members) & S and set(members) - S))
    cuts = HyperCut(n, edges)
    assert cuts.cut(inside, outside) == truth
    assert cuts.cut(inside, outside) == truth          # the source and sink arcs were removed
    assert cuts.cut([], outside) == 0.0


def test_hand_solved_chain() -> None:
    # a chain 0 → 1 → 2 → 3 with times 4, 1, 1, 4 and cost 0.5 per boundary node, on two
    # accelerators. The heaviest (0 and 3, time 4 each) apart: 4 + a cut of at least 0.5 each
    # (together they would be 8), and the other two groups' time 2 poured over both: the level
    # (4.5 + 4.5 + 2) / 2 = 5.5 = P({0, 3}). All four groups: {0, 1} and {2, 3} load 5 + 0.5
    # (node 1 is in Out of the first, In of the second) = 5.5, the none optimum; {0} alone with
    # {1, 2, 3}: 6 + 0.5 = 6.5; any split of the chain in more runs pays more
    problem = chain([4.0, 1.0, 1.0, 4.0], 0.5, accelerators=2)
    d = data(problem)
    kinds = slot_kinds(d)
    assert packing_value(d, kinds, [0]) == 5.0          # level (4 + 0 + 6) / 2
    assert packing_value(d, kinds, [0, 3]) == 5.5
    assert packing_value(d, kinds, [0, 1, 2, 3]) == 5.5
    assert brute_force(problem, "none").objective == 5.5
    found = packing_floor(d, kinds)
    assert (found.floor, found.groups) == (5.5, 2)        # H = {0, 3} already reaches it
    assert found.assignment[0] != found.assignment[3]
    # a floor the model already has: a set whose value cannot exceed it is not searched to the end
    assert packing_value(d, kinds, [0, 3], above=5.5) is None
    assert packing_value(d, kinds, [0, 3], above=5.25) == 5.5
    assert packing_floor(d, kinds, above=5.5).groups == 0


def test_the_cut_prices_every_path_out() -> None:
    # a chain 0 → 1 → 2 → 3 → 4, heavy 0, 2 and 4 (time 4), light 1 and 3 (0.5), cost 1 per
    # boundary node, three accelerators. Two heavy groups together load 8, so each is alone among
    # H = {0, 2, 4}; the set holding 2 and neither 0 nor 4 is cut on both sides of 2: 4 + 2 = 6
    # (each pair alone prices one side: 4 + 1), above the level of the light groups' time 1
    # poured over 5, 6 and 5. The none optimum is 6 as well: {0, 1}, {2},
    # {3, 4} load 5.5, 6 and 5.5; {0, 1}, {2, 3}, {4} load 6.5 on {2, 3}
    problem = chain([4.0, 0.5, 4.0, 0.5, 4.0], 1.0, accelerators=3)
    d = data(problem)
    assert packing_value(d, slot_kinds(d), [0, 2, 4]) == 6.0
    assert brute_force(problem, "none").objective == 6.0


def test_a_maximum_flow_gives_up_between_its_augmenting_paths_and_leaves_the_graph_as_it_was() -> None:
    """One flow over a large graph took seconds (5.5 s on a 24,002-node transformer), and the search checked
    its budget only between flows: with a limit of 20 s the packing bound ran 4 s past it. The flow now asks
    ``check`` before each augmenting path; given up, it leaves no source or sink arc behind. Two parallel
    paths 0 → 1 → 3 and 0 → 2 → 3 (hyperedges of costs 1 and 2): the cut of {0} from {3} is 3, found in two
    augmentations."""
    cuts = HyperCut(4, [((0, 1), 1.0), ((1, 3), 5.0), ((0, 2), 2.0), ((2, 3), 5.0)])
    asked = []

    def check() -> None:
        asked.append(cuts.work)
        if len(asked) == 2:
            raise RuntimeError("out of budget")

    cuts.check = check
    with pytest.raises(RuntimeError):
        cuts.cut([0], [3])
    cuts.check = None
    assert cuts.cut([0], [3]) == 3.0 and cuts.cut([3], [0]) == 3.0


def test_absorbing_light_groups_costs_their_time() -> None:
    # heavy 0 and 3 (time 4) joined through light 1 and 2 (0.05 each): 0 → 1, 0 → 2, 1 → 3,
    # 2 → 3, node 0's output costs 1, the light nodes' 0.1; two accelerators. The set holding 0
    # but not 3 cuts 0's output (1) unless it takes both light groups, which then cut 0.1 + 0.1
    # and cost their time: 0.2 + 0.1 = 0.3, so 4 + 0.3 = 4.3 (without their time the cut alone
    # would be 0.2, and the light work poured over 4.2 and 4.2 reaches only 4.25). The none
    # optimum is that plan: {0, 1, 2} loads 4.1 + 0.2, {3} loads 4 + 0.2
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1.0, "fpgaLatency": t, "isBackwardNode": 0, "size": 0}
             for i, t in enumerate([4.0, 0.05, 0.05, 4.0])]
    edges = [{"sourceId": a, "destId": b, "cost": c} for a, b, c in [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 0.1), (2, 3, 0.1)]]
    problem = parse_instance({"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 0, "nodes": nodes, "edges": edges})
    d = data(problem)
    assert packing_value(d, slot_kinds(d), [0, 3]) == pytest.approx(4.3, abs=1e-12)
    assert brute_force(problem, "none").objective == pytest.approx(4.3, abs=1e-12)


def test_memory_and_support_bind() -> None:
    # memory 1 per accelerator and two groups of size 1: they cannot share one, so the bound for
    # both heavy groups (times 3 and 2, one accelerator each, cut 0.5 each) is 3.5, not 5
    d = data(chain([3.0, 2.0], 0.5, accelerators=2, memory=1, size=1))
    assert packing_value(d, slot_kinds(d), [0, 1]) == 3.5
    # one accelerator and no CPU: no assignment fits
    d = data(chain([3.0, 2.0], 0.5, accelerators=1, memory=1, size=1))
    assert packing_value(d, slot_kinds(d), [0, 1]) is None


def class_too_big() -> Instance:
    """One colour class of two nodes of memory 1 each, and one accelerator of memory 1: no plan."""
    nodes = tuple(Node(id=2 * i + 1, name=f"f{i}", times=(0.0, 0.0), memory=1.0, backward=False, colour=1000,
                       out_cost=0.0, weight_times=None) for i in range(2))
    return Instance(nodes, (), (DeviceType(ACCELERATOR, 1, 1.0, True), DeviceType(CPU, 0, math.inf, False)), "too-big")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=7, max_accelerators=3, max_cpus=2), st.randoms(use_true_random=False))
@example(class_too_big(), random.Random(0))
def test_equals_the_none_optimum_with_every_group_and_stays_below_it(problem: Instance, rng: random.Random) -> None:
    d = data(problem)
    kinds = slot_kinds(d)
    everything = list(d.cheapest())
    truth = brute_force(problem, "none", objective="throughput")
    if len(everything) < len(d.groups):          # a colour class fits no device
        assert truth.status is not Status.OPTIMAL
        return
    value = packing_value(d, kinds, everything)
    if truth.status is Status.OPTIMAL:
        assert value == pytest.approx(truth.objective, rel=1e-12, abs=1e-12)
    else:
        assert value is None
        return
    cuts = hypergraph(d)
    smaller = rng.sample(everything, rng.randint(1, len(everything)))
    grown = smaller + [v for v in everything if v not in smaller][:1]
    part, more = packing_value(d, kinds, smaller, cuts), packing_value(d, kinds, grown, cuts)
    assert part <= more * (1 + 1e-12) and more <= truth.objective * (1 + 1e-12)
    if problem.is_training:
        gpipe = brute_force(problem, "none", objective="throughput-gpipe")
        assert value <= gpipe.objective * (1 + 1e-12)


@pytest.mark.skipif(not GNMT.exists(), reason="published instances not present")
def test_gnmt_inference_packing_is_the_none_optimum() -> None:
    # 17 groups carry 180.5 of the 182.6 accelerator time (24.782, 15.210, 14.126, eight LSTM
    # layers of 10.298..10.725, six of 6.887..7.055); the rest is 0.19 or less. Packed on six
    # accelerators (the CPU is ten times slower) the best largest load is 24.782 + 6.887 = 31.669
    # of compute, and that device's set pays 0.018310546875 of communication: 31.687310546875,
    # the value of the best plan the MILP finds
    problem = read_instance(GNMT)
    d = data(problem)
    kinds = slot_kinds(d)
    q = d.cheapest()
    heavy = sorted(q, key=lambda v: -q[v])[:17]
    assert packing_value(d, kinds, heavy) == pytest.approx(31.687310546875, abs=1e-9)


@pytest.mark.skipif(not GNMT.exists(), reason="published instances not present")
def test_the_packing_bound_does_not_depend_on_the_clock(monkeypatch) -> None:
    # The search is budgeted in work (arcs scanned, tree nodes), not seconds: on a machine a thousand
    # times slower, or that loaded, it finds the same floor from the same 17 groups with the same work.
    # Budgeted in seconds, two solves at once stopped it at 11 groups, and CP-SAT no longer proved GNMT.
    from types import SimpleNamespace

    from placement.solvers.milp import packing

    d = data(read_instance(GNMT))
    kinds = slot_kinds(d)
    found = packing_floor(d, kinds, work=6_000_000)
    real = packing.time.perf_counter
    start = real()
    monkeypatch.setattr(packing, "time", SimpleNamespace(perf_counter=lambda: start + 1000 * (real() - start)))
    slow = packing_floor(d, kinds, work=6_000_000)
    assert (found.groups, found.floor) == (17, pytest.approx(31.687310546875, abs=1e-9))
    assert (slow.groups, slow.floor, slow.work) == (found.groups, found.floor, found.work)


@pytest.mark.skipif(not GNMT.exists(), reason="published instances not present")
def test_gnmt_inference_none_is_proven() -> None:
    # the packing row meets the best plan's value, so CP-SAT proves it (one thread); without the
    # row its bound stayed at 30.12 after 600 s
    pytest.importorskip("ortools")
    import placement

    result = placement.solve(str(GNMT), method="milp", contiguity="none", backend="cp-sat", time_limit=120)
    assert result.status is placement.Status.OPTIMAL
    assert result.value == pytest.approx(31.687310546875, abs=1e-9)
    assert result.bound == pytest.approx(31.687310546875, abs=1e-6)
    assert result.stats["packing_groups"] == 17


def test_extend_places_every_group_where_it_fits() -> None:
    # the heavy ends of the chain 0 → 1 → 2 → 3 (times 4, 1, 1, 4, cost 0.5) on their own
    # accelerators; the light groups join them: {0, 1} and {2, 3}, loads 5.5 each (the optimum)
    d = data(chain([4.0, 1.0, 1.0, 4.0], 0.5, accelerators=2))
    where = extend(d, slot_kinds(d), {0: 0, 3: 1})
    assert where[0] == where[1] != where[2] == where[3]
    # with memory for one group per accelerator and no CPU there is no room for the light groups
    d = data(chain([4.0, 1.0, 1.0, 4.0], 0.5, accelerators=2, memory=1, size=1))
    assert extend(d, slot_kinds(d), {0: 0, 3: 1}) is None


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=7, max_accelerators=3, max_cpus=2))
def test_the_packing_plan_is_a_plan(problem: Instance) -> None:
    # the extended assignment respects support and memory, so the evaluator accepts its plan
    # (class none)
    d = data(problem)
    kinds = slot_kinds(d)
    found = packing_floor(d, kinds)
    if not found.groups:
        return
    where = extend(d, kinds, found.assignment)
    if where is None:
        return
    for s in range(len(kinds)):
        mine = [v for v in range(len(d.groups)) if where[v] == s]
        assert all(kinds[s] in d.fits(v) for v in mine)
        assert sum(d.m[v] for v in mine) <= d.M[kinds[s]]
    formulation = NoContiguity()
    plan = formulation.start_plan(problem, d, AssignmentVars(kinds, {}, {}, {}, [], set(), found))
    assert evaluate(problem, plan, contiguity="none").valid


def test_the_better_start_is_taken() -> None:
    values = {"a": 3.0, "b": 2.0}

    def verify(plan):
        return Verdict(plan != "bad", values.get(plan, 0.0), ())

    assert better_start("a", "b", verify, None) == "b"
    assert better_start("b", "a", verify, None) == "b"
    assert better_start("a", "bad", verify, None) == "a"
    assert better_start(None, "b", verify, None) == "b"
    assert better_start("a", None, verify, None) == "a"


@pytest.mark.parametrize("backend", [b for b in ("cp-sat", "highs", "cbc", "scip", "pulp")
                                     if any(name == b and ok for name, ok, _ in backend_availability())])
def test_the_packing_bound_is_the_reported_bound_whatever_the_backend_proves(backend):
    """Three groups of 10 on two accelerators, no CPU: the simple bound is the average, 15; two groups
    share an accelerator in every plan, so the packing bound is 20, the optimum, which the starting
    plan reaches: every backend reports 20 proven, without a search (CBC and PuLP, stopped without a
    bound of their own, reported 15)."""
    three = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0, "edges": [],
             "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 10, "cpuLatency": 100, "isBackwardNode": 0,
                        "size": 1} for i in range(3)]}
    result = placement.solve(three, method="milp", contiguity="none", backend=backend)
    assert (result.status, result.value, result.bound, result.stats["packing_bound"]) == ("optimal", 20.0, 20.0, 20.0)
    assert "the solver was not run" in result.message


def test_the_sets_model_seeks_no_packing_bound():
    """a → b → c → d with accelerator times 3, 1, 1, 3, every transfer 0.5, two accelerators and a CPU
    100 times slower: {a, b} | {c, d} gives 3 + 1 + 0.5 = 4.5 on both, and no plan is better (one device
    holds 8; {a, d} | {b, c} costs 7), so 4.5 is the optimum of every class. The packing bound of the
    two heaviest nodes apart is that optimum under ``none``; ``sets`` does not seek it (its search took
    most of the time of the published layer graphs' proofs, and CP-SAT proves this one itself)."""
    from placement.problem.instance import Edge, make_two_type_problem

    nodes = [Node(i, f"n{i}", (p, 100 * p), out_cost=0.5) for i, p in {1: 3.0, 2: 1.0, 3: 1.0, 4: 3.0}.items()]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3), Edge(3, 4)], 2, 1, math.inf)
    lines: list[str] = []
    sets = placement.solve(problem, method="milp", contiguity="sets", time_limit=30, progress=lines.append)
    assert (sets.status, sets.value) == ("optimal", 4.5)
    assert (sets.stats["packing_bound"], sets.stats["packing_groups"], sets.stats["packing_work"]) == (None, 0, 0)
    assert not [line for line in lines if "packing" in line]
    none = placement.solve(problem, method="milp", contiguity="none", time_limit=30)
    assert (none.status, none.value, none.stats["packing_bound"]) == ("optimal", 4.5, 4.5)
