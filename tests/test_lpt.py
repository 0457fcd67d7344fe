"""The LPT fills of wide graphs (placement.solvers.baselines.lpt): the optimum of a hand-derived wide instance,
exact loads while the fills run, and valid plans on random wide graphs."""

from __future__ import annotations

import math
import random
import time

import pytest
from hypothesis import given, settings

import placement
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.solvers.baselines import lpt
from placement.solvers.baselines.local_search import _Climber
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.none import NoContiguity
from placement.verification.evaluate import evaluate
from tests.strategies import problems, three_type_problems

HAVE_CPSAT = any(name == "cp-sat" and ok for name, ok, _ in backend_availability())


def ninety_and_ten(seed: int) -> placement.Instance:
    """100 independent nodes in a shuffled order on 4 accelerators and 1 CPU: each takes 2 on an accelerator;
    90 take 6 on the CPU, 10 take 3.

    The optimum is 44. A plan of 44: the CPU runs the 10 nodes of time 3 and 2 of the others (30 + 12 = 42),
    each accelerator 22 of the remaining 88 (44). None is lower: with j of the fast nodes and k of the others on
    the CPU, every accelerator below 44 holds at most 21 nodes, so j + k ≥ 100 − 84 = 16, and with j ≤ 10 the
    CPU's load 3j + 6k is at least 3·10 + 6·6 = 66.

    The fill reaches it: step 1 moves the 10 nodes of ratio 3/2 to the CPU (averages 45 and 30), then two of
    ratio 6/2 (44.5 and 36, then 44 and 42; a third would make the CPU 48 ≥ 44); step 2 deals the 88 nodes
    on the accelerators 22 each."""
    fast = list(range(100))
    random.Random(seed).shuffle(fast)
    nodes = [Node(i, f"n{i}", (2.0, 3.0 if fast[i] < 10 else 6.0), 1.0) for i in range(100)]
    return make_two_type_problem(nodes, [], 4, 1, math.inf)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fill_reaches_the_optimum_of_a_wide_instance(seed):
    problem = ninety_and_ten(seed)
    plan = lpt.lpt_plan(problem)
    assert evaluate(problem, plan, "none").max_load == 44.0
    # the local search's restarts alone stop at 46: a node leaving an accelerator of 46 for the CPU (42) makes
    # it 48, for another accelerator (44) 46 again; the MILP's start is now the fill's
    assert placement.solve(problem, method="local-search").value == 46.0
    assert evaluate(problem, NoContiguity().searched_start(problem, 60.0), "none").max_load == 44.0


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_milp_agrees_on_the_wide_instance_s_optimum():
    result = placement.solve(ninety_and_ten(0), method="milp", backend="cp-sat", contiguity="none", threads=1,
                             time_limit=60)
    assert (result.status, result.value) == ("optimal", 44.0)


def _item_sets(problem: placement.Instance, climber: _Climber) -> list[list[list[int]]]:
    return [[[c] for c in range(len(climber.classes))], lpt.parts(problem)]


def _fills_keep_exact_loads(problem: placement.Instance) -> None:
    """After every fill, the loads the fill kept as items joined equal the loads computed from scratch."""
    climber = _Climber(problem)
    for items in _item_sets(problem, climber):
        wrapped = lpt._Items(climber, items)
        n = len(items)
        support = [[b for b, t in enumerate(climber.slot_type) if wrapped.time[i][t] is not None] for i in range(n)]
        if not all(support):
            continue
        for order in (list(range(n)), list(reversed(range(n)))):
            where = lpt.fill(wrapped, order, support)
            kept = [(climber.comp[d], climber.comm[d]) for d in range(len(climber.slots))]
            climber.start(where)
            assert kept == [pytest.approx((climber.comp[d], climber.comm[d]), abs=1e-9)
                            for d in range(len(climber.slots))]


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=9))
def test_fills_count_communication_exactly(problem):
    _fills_keep_exact_loads(problem)


@settings(max_examples=30, deadline=None)
@given(three_type_problems())
def test_fills_count_communication_exactly_on_three_types(problem):
    _fills_keep_exact_loads(problem)


def wide(shape: str, seed: int, n: int = 400, memory: float = math.inf) -> placement.Instance:
    """A random wide graph: independent nodes, 6 chains side by side, a fan-out into a sink, or components
    of 4 nodes; some pairs of nodes share a colour, a tenth are not supported on the accelerators, and
    edges carry costs."""
    rng = random.Random(seed)
    if shape == "independent":
        edges = []
    elif shape == "chains":
        edges = [(i, i + 6) for i in range(n - 6)]
    elif shape == "star":
        edges = [(0, i) for i in range(1, n - 1)] + [(i, n - 1) for i in range(1, n - 1)]
    else:
        edges = [(s + rng.randrange(j), s + j) for s in range(0, n, 4) for j in range(1, min(4, n - s))]
    cost = {u: round(rng.uniform(0.1, 2.0), 2) for u, _ in edges}
    colour = {v: v // 2 for v in rng.sample(range(0, n, 2), n // 10)}   # nodes 2i and 2i+1 together
    colour.update({v + 1: c for v, c in colour.items()})
    nodes = []
    for v in range(n):
        acc = round(rng.uniform(1.0, 10.0), 2)
        nodes.append(Node(v, f"n{v}", (None if rng.random() < 0.1 else acc, round(acc * rng.uniform(2, 6), 2)),
                          round(rng.uniform(1.0, 4.0), 2), colour=colour.get(v), out_cost=cost.get(v, 0.0)))
    return make_two_type_problem(nodes, [Edge(u, w) for u, w in edges], 4, 1, memory)


@pytest.mark.parametrize("shape", ["independent", "chains", "star", "components"])
@pytest.mark.parametrize("memory", [math.inf, 250.0])
def test_plans_are_valid_on_random_wide_graphs(shape, memory):
    problem = wide(shape, seed=len(shape), memory=memory)
    climbed = lpt.lpt_plan(problem)
    assert evaluate(problem, climbed, "none").valid
    whole = lpt.parts_plan(problem)
    if shape in ("independent", "components"):
        assert evaluate(problem, whole, "stages").valid
    else:   # one part (the star) or six too long to fit a device's memory alone
        assert whole is None or evaluate(problem, whole, "stages").valid


@pytest.mark.parametrize("make", [lpt.lpt_plan, lpt.parts_plan])
def test_no_fill_begins_once_the_deadline_has_passed(monkeypatch, make):
    """A deadline already past when the fills are due begins none of them (each costs the graph's size times the
    devices before its first item): on 100 components of 2 nodes none is made, and the answer is no plan."""
    nodes = [Node(i, f"n{i}", (2.0, 6.0), 1.0, out_cost=1.0 if i % 2 == 0 else 0.0) for i in range(200)]
    problem = make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(0, 200, 2)], 4, 1, math.inf)
    begun = []
    monkeypatch.setattr(lpt, "fill", lambda *args, **kwargs: begun.append(args) or None)
    assert make(problem, deadline=time.perf_counter() - 1.0) is None
    assert begun == []


def test_fills_begin_none_once_the_deadline_has_passed(monkeypatch):
    """:func:`lpt.fills` itself, whose items are ready: no type is chosen and no fill is begun past the deadline."""
    problem = ninety_and_ten(0)
    items = lpt._Items(_Climber(problem), [[c] for c in range(100)])
    begun = []
    monkeypatch.setattr(lpt, "fill", lambda *args, **kwargs: begun.append(args) or None)
    monkeypatch.setattr(lpt, "item_types", lambda *args: begun.append(args) or None)
    assert lpt.fills(items, deadline=time.perf_counter() - 1.0) == []
    assert begun == []


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_progress_names_the_fill_where_its_plan_is_the_start():
    """On the wide instance the local search stops at 46 and the fill reaches 44 (above): the start is the fill's,
    and the progress line says so."""
    said: list[str] = []
    placement.solve(ninety_and_ten(0), method="milp", backend="cp-sat", contiguity="none", threads=1,
                    time_limit=60, progress=said.append)
    assert "starting plan from the LPT fill: 44" in said
