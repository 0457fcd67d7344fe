"""The counting rows that make the assignment MILPs strong (placement.solvers.milp.cuts, on the
fixed-type slots of placement.solvers.milp.none), against brute force and hand-solved values.

The counting bounds must never exceed an optimum: brute force (placement.testing.bruteforce)
gives the true ``none`` optimum of small random instances, and every bound the rows state
must lie at or below it. The subset search is checked against plain enumeration.
"""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from placement.io.tarnawski import read_instance
from placement.problem.instance import Instance
from placement.solution import Status
from placement.solvers.milp.cuts import chord_sums, heavy_sets, least_with_comm, reachable, room_bound
from placement.solvers.milp.backends import SolveOptions, make_backend
from placement.solvers.milp.data import prepare
from placement.solvers.milp.driver import DEFAULT_MAX_PRODUCT
from placement.solvers.milp.sets import ContiguousSets
from placement.solvers.milp.none import NoContiguity, ranks, slot_kinds
from placement.testing.bruteforce import brute_force
from placement.verification.evaluate import evaluate
from tests.model_units import float_data
from tests.strategies import colour_respecting_plans, problems

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski"
BERT24 = SHARED / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"


def free_pairs(d) -> set[tuple[int, int]]:
    """The (group, slot) pairs the none model leaves free (support, memory, the rank rule)."""
    kinds, rank = slot_kinds(d), ranks(slot_kinds(d))
    return {(v, s) for v in range(len(d.groups)) for s in range(1, len(kinds) + 1)
            if kinds[s - 1] in d.fits(v) and rank[s - 1] <= v}


def test_room_bound_hand_solved() -> None:
    # two slots, each taking unit-time groups: g = 0, 1, 2, 3. Five groups need counts summing
    # to 5; at θ = 2 each slot takes 2 (4 in all), at θ = 3 each takes 3: the bound is 3
    sums = chord_sums([1.0, 1.0, 1.0])
    assert sums == [0.0, 1.0, 2.0, 3.0]
    assert room_bound([sums, sums], 5) == 3.0
    assert room_bound([sums, sums], 4) == 2.0
    assert room_bound([sums, sums], 7) == math.inf       # six places for seven groups
    assert room_bound([sums], 0) == 0.0


@pytest.mark.parametrize("seed", range(30))
def test_reachable_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    allowed = [sorted(rng.sample(range(6), rng.randint(1, 4))) for _ in range(rng.randint(1, 4))]
    total = rng.randint(0, 12)
    expected = any(sum(choice) == total for choice in itertools.product(*allowed))
    assert reachable(allowed, total) is expected


@pytest.mark.parametrize("seed", range(40))
def test_least_with_comm_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    m = rng.randint(1, 8)
    times = sorted(rng.choice([1.0, 1.5, 2.0, 2.0, 3.0]) for _ in range(m))
    weight = [rng.choice([0.0, 0.25, 0.5]) for _ in range(m)]
    j = rng.randint(1, m)

    def comm(A: frozenset[int]) -> float:      # any non-negative function of the subset
        return sum(weight[i] for i in A) * (1 + len(A) % 2)

    truth = min(sum(times[i] for i in A) + comm(frozenset(A)) for A in itertools.combinations(range(m), j))
    assert least_with_comm(times, comm, j) == truth
    # cut short, it returns a lower bound, never more
    assert least_with_comm(times, comm, j, visits=2) <= truth


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(problems(max_nodes=7, max_accelerators=3, max_cpus=2))
def test_counting_bounds_never_exceed_the_none_optimum(problem: Instance) -> None:
    for objective in ("throughput", "throughput-gpipe") if problem.is_training else ("throughput",):
        truth = brute_force(problem, "none", objective=objective)
        if truth.status is not Status.OPTIMAL:
            continue
        d = float_data(problem)
        for bound, H in heavy_sets(d, slot_kinds(d), free_pairs(d)):
            assert H
            assert bound <= truth.objective * (1 + 1e-12), (objective, bound, truth.objective, H)


@pytest.mark.skipif(not BERT24.exists(), reason="published instances not present")
def test_bert24_inference_pigeonhole_bound() -> None:
    # 24 layers of 3.539..3.698 on the accelerators and node 30 (5.655): 25 heavy groups on
    # 6 accelerators (the CPU takes none: ten times slower), so one accelerator holds 5 of them.
    # Without communication the least such load is the five smallest layers,
    # 3.539 + 3.540 + 3.541 + 3.541 + 3.542 = 17.703. No run of five consecutive layers is that
    # small, so the least five-layer load pays 0.001953125 for each of six boundary nodes
    # (three runs, each with an input and an output): 17.703 + 6 · 0.001953125 = 17.71471875,
    # the optimum the MILP proves for class none.
    problem = read_instance(BERT24)
    d = float_data(problem)
    found = heavy_sets(d, slot_kinds(d), free_pairs(d))
    best, H = found[0]
    assert len(H) == 25
    assert best == pytest.approx(17.703 + 6 * 0.001953125, abs=1e-9)


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_every_plan_meets_every_row(data: st.DataObject) -> None:
    # any plan, reordered into the model's canonical slots by its warm-start values, satisfies
    # every row (symmetry, counting rows included): fixing all its values leaves a feasible model
    # whose objective is the plan's verified value (the data are exact multiples of 1/4)
    problem = data.draw(problems(max_nodes=7, max_accelerators=3, max_cpus=2))
    plan = data.draw(colour_respecting_plans(problem))
    goals = ("throughput", "throughput-gpipe") if problem.is_training else ("throughput",)
    for formulation, goal in itertools.product((NoContiguity(), ContiguousSets()), goals):
        ev = evaluate(problem, plan, contiguity=formulation.contiguity)
        assume(formulation.contiguity == "sets" or ev.valid)
        if not ev.valid:
            continue
        be = make_backend("cp-sat")
        d = prepare(problem, formulation.groups(problem, goal), True, DEFAULT_MAX_PRODUCT)
        assert d.scaling.exact
        variables = formulation.build(problem, d, be, goal)
        values, why = formulation.hint(problem, d, variables, plan, goal)
        assert values is not None, why
        for var, value in values.items():
            be.add([(1, var)], lo=round(value), hi=round(value))
        raw = be.solve(SolveOptions(30.0))
        assert raw.status == "optimal", (formulation.contiguity, goal, raw.status, raw.message)
        assert raw.objective / d.scaling.scale == ev.objective(goal)
