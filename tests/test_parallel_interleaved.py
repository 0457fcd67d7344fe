"""Interleaved 1F1B with v chunks per device group as part of the plan (placement.parallel.interleaved).

The exact solver against hand-solved instances and the brute force, its plans against the
independent evaluator and the event simulator (peak memory per device and time per sample equal to
the model's; time per batch equal to the exact evaluator's), and the refusals.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from placement.errors import InvalidParameterError, InvalidPlanError
from placement.io.piper import TMPC, PiperEdge, PiperInstance, PiperNode
from placement.parallel.interleaved import held_profiles, solve_interleaved
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.result import Status
from placement.simulation.parallel import simulate_parallel
from placement.testing.bruteforce_interleaved import brute_force_interleaved
from placement.verification.parallel_interleaved import evaluate_interleaved
from tests.strategies_parallel import piper_instances

SHARED = Path(__file__).resolve().parents[2] / "shared" / "piper"


def chain(times, m=2, devices=2, memory=1e9, activations=None, recompute=None, edge_bytes=0.0):
    """A chain ``0 → 1 → …`` with one TMPC ``x`` per node (``timePerSample`` from ``times``,
    ``memoryUsageA`` from ``activations``), plus a TMPC ``r`` where ``recompute`` gives ``(time, A)``."""
    n = len(times)
    activations = activations or [0.0] * n
    nodes = []
    for i, time in enumerate(times):
        fw = {i - 1: 0.0} if i else {}
        bw = {i + 1: 0.0} if i + 1 < n else {}
        options = [TMPC("x", float(time), 0.0, float(activations[i]), 0.0, fw, bw)]
        if recompute and i in recompute:
            options.append(TMPC("r", float(recompute[i][0]), 0.0, float(recompute[i][1]), 0.0, fw, bw))
        nodes.append(PiperNode(i, f"n{i}", {1: tuple(options)}))
    edges = tuple(PiperEdge(i, i + 1, edge_bytes) for i in range(n - 1))
    return PiperInstance("chain", devices, float(memory), 1.0, m, tuple(nodes), edges)


# --- the order's held micro-batches, by hand ---------------------------------------------------------

# n = 4 local micro-batches, p = 2 groups, v = 2 chunks. Rank 0 warms up with
# min(2·(2−0−1) + (2−1)·2, 8) = 4 forwards: (c0,l0) (c0,l1) (c1,l0) (c1,l1) → held (2,2); then
# F(c0,l2) (3,2), B(c1,l0) (3,1), F(c0,l3) (4,1), B(c1,l1) (4,0), F(c1,l2) (4,1), B(c0,l0) (3,1),
# F(c1,l3) (3,2), …: after a forward the maximal vectors are (3,2) and (4,1). Rank 1 warms up with
# 2: (c0,l0) (c0,l1) → (2,0); F(c1,l0) (2,1), B(c1,l0), F(c1,l1) (2,1), B, F(c0,l2) (3,0), …:
# (2,1) and (3,0). With n = p every forward comes first: (n, n).
@pytest.mark.parametrize("local, groups, chunks, rank, expected", [
    (4, 2, 2, 0, ((3, 2), (4, 1))),
    (4, 2, 2, 1, ((2, 1), (3, 0))),
    (2, 2, 2, 0, ((2, 2),)),
    (2, 2, 2, 1, ((2, 2),)),
])
def test_held_profiles_by_hand(local, groups, chunks, rank, expected):
    assert held_profiles(local, groups, chunks, rank) == expected


def test_a_vast_batch_holds_what_three_rounds_of_the_groups_hold(monkeypatch):
    """Past the warm-up the micro-batches held per chunk after a forward repeat every p·v steps, so a replica
    of n ≥ 3p micro-batches holds what one of 3p holds (placement.simulation.parallel_orders.held_walk). The
    evaluator and the solver's held vectors walked the whole order of n·v forwards: at mbsInBatch = 2^52, the
    order of 2^53 tasks, which no memory holds. Chain A = 1, 2, 4, 8 in chunks 0-3, S = v = 2, d = 1: group 0
    (chunks 0, 2) holds (3, 2) or (4, 1), 3 + 8 = 11; group 1 (chunks 1, 3) (2, 1) or (3, 0), 4 + 8 = 12."""
    from placement.parallel import interleaved as solver
    from placement.verification import parallel_interleaved as check

    order, walked = check.interleaved, []

    def counted(local, *rest):
        walked.append(local)
        return order(local, *rest)

    monkeypatch.setattr(check, "interleaved", counted)
    monkeypatch.setattr(solver, "interleaved", counted)
    plan = ParallelPlan(tuple(ParallelStage((k,), 1, 1, {k: "x"}) for k in range(4)), "interleaved", 2)
    for m in (48, 2 ** 52):
        walked.clear()
        evaluation = evaluate_interleaved(chain([1, 2, 3, 4], m=m, activations=[1, 2, 4, 8]), plan)
        assert walked == [6, 6]
        assert [(s.memory, s.in_flight) for s in evaluation.stages] == [(11.0, 4), (12.0, 3), (11.0, 2), (12.0, 1)]
        walked.clear()
        assert [held_profiles(m, 2, 2, g) for g in (0, 1)] == [((3, 2), (4, 1)), ((2, 1), (3, 0))]
        assert walked == [6, 6]
    # a count the order refuses is still refused (it is no multiple of the groups), not walked as 6
    with pytest.raises(InvalidParameterError, match=r"^microbatches per replica \(7\) must be a multiple of the 2 "):
        held_profiles(7, 2, 2, 0)


# --- hand-solved plans -------------------------------------------------------------------------------

# Chain of 5 nodes, times 1..5, m = 2, 2 devices, v = 2: S = 2 groups of d = t = 1, K = 4 chunks, so
# exactly one chunk holds two adjacent nodes; group 0 runs chunks 0 and 2, group 1 chunks 1 and 3:
#   [01][2][3][4]: max(3+4, 3+5) = 8;  [0][12][3][4]: max(1+4, 5+5) = 10;
#   [0][1][23][4]: max(1+7, 2+5) = 8;  [0][1][2][34]: max(1+3, 2+9) = 11.   Optimum 8.
def test_five_node_chain_by_hand():
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2)
    assert result.status is Status.OPTIMAL
    assert result.value == 8.0 and result.bound == pytest.approx(8.0, rel=1e-6)
    assert result.plan.chunks == 2 and result.plan.schedule == "interleaved"
    assert [s.nodes for s in result.plan.stages] in ([(0, 1), (2,), (3,), (4,)], [(0,), (1,), (2, 3), (4,)])
    assert result.megatron["pipeline"] == 2 and result.megatron["virtual_pipeline"] == 2


def _standing(clock: list[float]) -> SimpleNamespace:
    """A stand-in for the time module whose perf_counter reads ``clock[0]``: it stands still where a test
    does not move it."""
    return SimpleNamespace(perf_counter=lambda: clock[0])


def test_the_runtime_counts_the_time_per_batch_of_the_plan(monkeypatch):
    """The plan's time per batch (a longest path over every task of the batch: 0.5 s on the published ResNet)
    was computed after the runtime was read, so a call reported 5.00 s and took 5.5."""
    from placement.parallel import interleaved

    clock = [0.0]
    counted = interleaved.interleaved_time_per_batch

    def slow(instance, plan, deadline):   # the layout's own clock is the real one: no deadline for it here
        clock[0] += 100.0
        return counted(instance, plan)

    Clock = _standing(clock)

    monkeypatch.setattr(interleaved, "time", Clock)
    monkeypatch.setattr(interleaved, "interleaved_time_per_batch", slow)
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2)
    assert result.batch_time is not None and result.runtime_s >= 100.0


def test_the_time_per_batch_is_laid_out_within_the_time_limit(monkeypatch):
    """The plan's time per batch (a longest path over every task of the batch) was laid out after the search
    whatever time was left: with time_limit=0.5 the published ResNet (7,680 micro-batches, 61,440 tasks) returned
    after 2.7 s, 1 s of it the layout (4.4 s where its kernel was compiled first). Here the layout's clock reads
    past the deadline: the plan stands with its time per batch not computed, as a batch too long to lay out.
    2,048 micro-batches of 4 virtual stages make 16,384 tasks, more than a batch laid out whatever the deadline;
    the plan and its value are those of any m: [01][2][3][4], 8."""
    import time as real

    from placement.parallel import timing

    class Late:
        @staticmethod
        def perf_counter():
            return real.perf_counter() + 1e6

    monkeypatch.setattr(timing, "time", Late, raising=False)
    result = solve_interleaved(chain([1, 2, 3, 4, 5], m=2 ** 11), chunks=2, time_limit=5)
    assert (result.status, result.value, result.batch_time) == (Status.OPTIMAL, 8.0, None)
    assert result.stats["time_per_batch"] == ("not computed: the time limit ran out while the batch was laid out "
                                              "(0 of 16,384 tasks timed)")
    assert result.to_json()["timePerBatch"] is None
    small = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2, time_limit=5)   # 16 tasks: laid out all the same
    assert (small.status, small.value, small.batch_time) == (Status.OPTIMAL, 8.0, 20.0)


@pytest.mark.parametrize("overrun, layout_by", [(0.0, 5.0), (50.0, 52.0)], ids=["on time", "past the limit"])
def test_the_search_leaves_the_layout_its_share_of_the_time_limit(monkeypatch, overrun, layout_by):
    """The search used the whole time_limit, and the layout of the plan's time per batch, held to the same
    deadline, then had no time left: most time-limited solves lost their time per batch. The search now stops at
    90% of the limit (5 s: at 4.5 s) and the layout may run to the limit, or, where the search ran past it (here
    by a chain DP that takes ``overrun`` seconds of a clock that stands still otherwise), for max(10% of the
    limit, 2 s) = 2 s from its start."""
    from placement.parallel import interleaved, interleaved_chain

    clock = [0.0]
    searched, deadlines = [], []
    chain_dp, layout = interleaved_chain.solve_chain, interleaved.interleaved_time_per_batch

    def slow_chain(*args, **kwargs):
        searched.append(kwargs["time_limit"])
        clock[0] += overrun
        return chain_dp(*args, **kwargs)

    def timed(instance, plan, deadline):
        deadlines.append(deadline)
        return layout(instance, plan)

    Clock = _standing(clock)

    monkeypatch.setattr(interleaved, "time", Clock)
    monkeypatch.setattr(interleaved_chain, "solve_chain", slow_chain)
    monkeypatch.setattr(interleaved, "interleaved_time_per_batch", timed)
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2, time_limit=5)
    assert searched[0] == pytest.approx(4.5)   # the one shape of two groups gets all of the search's 4.5 s
    assert deadlines == [pytest.approx(layout_by)] and result.batch_time is not None


def test_the_chain_dp_stops_at_its_time_limit_while_it_prices_the_chunks(monkeypatch):
    """The prices of every pair of nested sets (about 1.3 s on the published ResNet) read no clock: a shape's
    chain DP ran them to the end, whatever its time. Here every reading of the clock takes a second, and the
    DP has two: it stops while pricing its four edges, open at the bound it was given, and the DP over chains
    never begins."""
    from placement.parallel import interleaved_chain
    from placement.parallel.interleaved import Shape

    clock = [0.0]

    class Clock:
        @staticmethod
        def perf_counter():
            clock[0] += 1.0
            return clock[0]

    def never(*args):
        raise AssertionError("the DP over chains began past the time limit")

    instance = chain([1, 2, 3, 4, 5], edge_bytes=1.0)
    member = interleaved_chain.chain_sets(instance)
    monkeypatch.setattr(interleaved_chain, "time", Clock)
    monkeypatch.setattr(interleaved_chain, "_best_chain", never)
    outcome = interleaved_chain.solve_chain(instance, Shape(2, 1, 1, 2), member, cutoff=None, time_limit=2.0,
                                            floor=7.5)
    assert (outcome.status, outcome.plan, outcome.bound) == ("no_solution", None, 7.5)
    assert clock[0] == 5.0   # the start (1), two readings within the limit, the one past it (4), the wall time


def test_a_shape_the_chain_dp_leaves_open_past_the_deadline_does_not_go_to_cpsat(monkeypatch):
    """CP-SAT (its import alone about half a second, then its model) was started for a shape whose chain DP had
    used the search's time and more: ResNet at time_limit=0.5 returned after 2.3 s. Here the chain DP leaves the
    one shape open after 10 s of a clock that stands still otherwise (its own wall time tiny): the shape stays
    open at the DP's bound, CP-SAT is not called, and the best starting plan is the answer."""
    from placement.parallel import interleaved, interleaved_chain, interleaved_cpsat
    from placement.parallel.interleaved_cpsat import ShapeOutcome

    clock = [0.0]

    Clock = _standing(clock)

    def slow_chain(*args, **kwargs):
        clock[0] += 10.0
        return ShapeOutcome("no_solution", None, None, 7.75, 0.001, {"model": "chain-dp"})

    def never(*args, **kwargs):
        raise AssertionError("CP-SAT was started past the deadline")

    lines = []
    monkeypatch.setattr(interleaved, "time", Clock)
    monkeypatch.setattr(interleaved_chain, "solve_chain", slow_chain)
    monkeypatch.setattr(interleaved_cpsat, "solve_shape", never)
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2, time_limit=5, progress=lines.append)
    assert (result.status, result.value, result.bound) == (Status.FEASIBLE, 8.0, 7.75)
    assert result.message == "the time limit ran out before every shape was closed"
    assert result.stats["open"] == 1
    assert lines[-1] == ("S=2 d=1 t=1: left open (7.75 at least): too little of the search's time is left to "
                         "start CP-SAT")


@pytest.mark.parametrize("imported", [False, True], ids=["OR-Tools to import", "OR-Tools imported"])
def test_cpsat_is_not_started_where_its_import_would_end_past_the_search(monkeypatch, imported):
    """The first CP-SAT model of a process imports OR-Tools (0.4-0.5 s) before its search, whatever its share:
    ResNet at time_limit=1 started CP-SAT with 0.09 s of the search left and ended 0.46 s later. Here the chain
    DP leaves the one shape open with 0.3 s of the search's 4.5 s left (a clock that stands still otherwise):
    CP-SAT is started only where OR-Tools is already imported, for those 0.3 s."""
    import sys

    from placement.parallel import interleaved, interleaved_chain, interleaved_cpsat
    from placement.parallel.interleaved_cpsat import ShapeOutcome

    clock, started = [0.0], []

    Clock = _standing(clock)

    def slow_chain(*args, **kwargs):
        clock[0] += 4.2
        return ShapeOutcome("no_solution", None, None, 7.75, 0.001, {"model": "chain-dp"})

    def shape_search(*args, **kwargs):
        started.append(kwargs["time_limit"])
        return ShapeOutcome("no_solution", None, None, 7.8, kwargs["time_limit"], {})

    if imported:
        monkeypatch.setitem(sys.modules, "ortools.sat.python.cp_model", sys)
    else:
        monkeypatch.delitem(sys.modules, "ortools.sat.python.cp_model", raising=False)
    monkeypatch.setattr(interleaved, "time", Clock)
    monkeypatch.setattr(interleaved_chain, "solve_chain", slow_chain)
    monkeypatch.setattr(interleaved_cpsat, "solve_shape", shape_search)
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2, time_limit=5)
    assert started == ([pytest.approx(0.3)] if imported else [])
    assert (result.status, result.value, result.bound) == (Status.FEASIBLE, 8.0, 7.8 if imported else 7.75)


def test_a_batch_too_long_to_lay_out_still_gets_its_interleaved_plan():
    """2^21 micro-batches of 4 virtual stages make 2^24 tasks, over the simulator's 2 GiB: the plan's time per
    batch cannot be computed, and the solve raised LimitExceededError for it, where the other schedules return
    their plan without it. The plan and its value are those of any m (no parameters): [01][2][3][4], 8."""
    result = solve_interleaved(chain([1, 2, 3, 4, 5], m=2 ** 21), chunks=2)
    assert (result.status, result.value, result.batch_time) == (Status.OPTIMAL, 8.0, None)
    assert result.stats["time_per_batch"].startswith("not computed: 2,097,152 micro-batches make 16,777,216 tasks")
    assert result.to_json()["timePerBatch"] is None


def test_too_many_microbatches_are_refused_before_the_plan_is_checked(monkeypatch):
    """4 virtual stages, 10^11 micro-batches: 8·10^11 tasks, far over the simulator's 2 GiB. The
    refusal comes before the plan's check, whose interleaved orders also grow with the micro-batches."""
    import placement
    from placement.errors import LimitExceededError
    from placement.simulation import parallel

    instance = chain([1, 2, 3, 4, 5])
    plan = solve_interleaved(instance, chunks=2).plan

    def never(*args, **kwargs):
        raise AssertionError("the plan was checked before the micro-batches were")

    monkeypatch.setattr(parallel, "refuse_invalid", never)
    with pytest.raises(LimitExceededError, match=r"^100,000,000,000 micro-batches make 800,000,000,000 tasks"):
        placement.simulate(instance, plan, microbatches=10**11)

def test_without_cpsat_the_shapes_stay_open(monkeypatch):
    """Where OR-Tools is not installed, a shape the chain DP cannot settle stays open at its bound: the
    answer is the best starting plan, feasible, saying which backend is missing (no traceback)."""
    from placement.errors import SolverUnavailableError
    from placement.parallel import interleaved_chain, interleaved_cpsat

    def unavailable(*args, **kwargs):
        raise SolverUnavailableError("MILP backend 'cp-sat' cannot run here: OR-Tools is not installed")

    monkeypatch.setattr(interleaved_chain, "chain_sets", lambda instance: None)   # as with too many sets
    monkeypatch.setattr(interleaved_cpsat, "solve_shape", unavailable)
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2)
    # the starting plans' best is the optimum 8 of the hand-solved test above; the shape's bound is below it
    assert result.status is Status.FEASIBLE and result.value >= 8.0 and result.bound < result.value
    assert result.message == ("shapes left open before every shape was closed: MILP backend 'cp-sat' cannot run "
                              "here: OR-Tools is not installed")


# Memory: A = 1 per node, m = 2, d = 1, so n = 2 = p: every forward runs first and a group holds
# both micro-batches of both its chunks: 2·(A of its chunks). The group with the two-node chunk holds
# 2·2 + 2·1 = 6. At memory 5 no plan fits; at 6 the optimum 8 fits.
@pytest.mark.parametrize("memory, status, value", [(5.0, Status.INFEASIBLE, None), (6.0, Status.OPTIMAL, 8.0)])
def test_memory_of_the_order_by_hand(memory, status, value):
    instance = chain([1, 2, 3, 4, 5], memory=memory, activations=[1] * 5)
    result = solve_interleaved(instance, chunks=2)
    assert (result.status, result.value) == (status, value)
    if value is not None:
        assert max(s.memory for s in result.evaluation.stages) == 6.0
    else:
        assert result.message == ("no interleaved plan with 2 chunks per group on 2 devices of 5 bytes: no plan fits "
                                  "the memory of its devices")


@pytest.mark.parametrize("memory", [0.0, 0.5])
def test_a_node_that_fits_no_device_alone_closes_every_shape_without_a_search(monkeypatch, memory):
    """Node 2 holds one micro-batch's activations (A = 1) once its chunk has run a forward, more than the
    memory: no plan of any shape fits. Every shape was searched (here, with no solver to search it, each
    stayed open: "no_solution"); it is now refused before, for any memory below 1, 0 included."""
    from placement.errors import SolverUnavailableError
    from placement.parallel import interleaved_chain, interleaved_cpsat

    def unavailable(*args, **kwargs):
        raise SolverUnavailableError("MILP backend 'cp-sat' cannot run here: OR-Tools is not installed")

    monkeypatch.setattr(interleaved_chain, "chain_sets", lambda instance: None)
    monkeypatch.setattr(interleaved_cpsat, "solve_shape", unavailable)
    said: list[str] = []
    result = solve_interleaved(chain([1, 2, 3, 4, 5], memory=memory, activations=[0, 0, 1, 0, 0]), chunks=2,
                               progress=said.append)
    assert (result.status, result.plan) == (Status.INFEASIBLE, None)
    assert result.stats["infeasible"] == result.stats["shapes"] == 1
    assert said == ["S=2 d=1 t=1: infeasible (node 2 alone exceeds the memory at this degree)"]
    assert result.message == (f"no interleaved plan with 2 chunks per group on 2 devices of {memory:g} bytes: no "
                              "plan fits the memory of its devices")


def test_a_vast_device_count_lists_only_the_degrees_that_divide_the_batch():
    """2^40 devices, m = 4: the shapes were sought over every d ≤ 2^40 (hours, past any time limit), while d
    divides m. Four nodes of 1: S = 2 groups of d = 2 (n = 2 micro-batches per replica, S | n), two chunks of
    1 each per group: (1 + 1)/2 = 1; d = 4 leaves n = 1, which S = 2 does not divide."""
    result = solve_interleaved(chain([1, 1, 1, 1], m=4, devices=2 ** 40), chunks=2)
    assert (result.status, result.value) == (Status.OPTIMAL, 1.0)
    assert {(s.d, s.t) for s in result.plan.stages} == {(2, 1)}


def test_no_shape_of_device_groups_is_told_apart_from_memory():
    """m = 3 on 2 devices: two groups of one device run 3 micro-batches each, not a multiple of the 2 groups
    (Megatron's condition), and d = 2 does not divide 3; no shape exists, whatever the memory. The refusal
    said that no plan fit, as where memory rules every plan out."""
    result = solve_interleaved(chain([1] * 6, m=3), chunks=2)
    assert (result.status, result.plan) == (Status.INFEASIBLE, None)
    assert result.message == ("no interleaved plan with 2 chunks per group on 2 devices of 1e+09 bytes: no shape of "
                              "S ≥ 2 device groups of d·t devices takes them (S·d·t ≤ 2, S·2 chunks ≤ 6 nodes, d "
                              "dividing the 3 micro-batches, S dividing the m/d of a replica, t a degree every node "
                              "has)")


# A recompute TMPC trades time for memory: node 4 may run as r (time 6, A = 0); memory 5. Group
# memory is 2·(A of chunk c0 + A of chunk c1):
#   [01][2][3][4]: group 0 holds [01],[3]: 2·3 = 6 — no;   [0][1][23][4]: group 0 [0],[23]: 6 — no;
#   [0][12][3][4r]: group 0 [0],[3]: 4, group 1 [12],[4r]: 2·2 = 4; value max(1+4, 5+6) = 11;
#   [0][1][2][34r]: group 0 4, group 1 [1],[34r]: 4; value max(1+3, 2+4+6) = 12  (with 4 as x: 6 — no).
# Optimum 11.
def test_recompute_tmpc_by_hand():
    instance = chain([1, 2, 3, 4, 5], memory=5.0, activations=[1] * 5, recompute={4: (6, 0)})
    result = solve_interleaved(instance, chunks=2)
    assert (result.status, result.value) == (Status.OPTIMAL, 11.0)
    assert [s.nodes for s in result.plan.stages] == [(0,), (1, 2), (3,), (4,)]
    assert result.plan.stages[3].tmpcs[4] == "r"


# --- brute force -----------------------------------------------------------------------------------

@st.composite
def tiny(draw):
    """Piper's tiny instances with 4–5 nodes (two groups of two chunks need four), 2–8 micro-batches
    and memory from tight to ample (an interleaved group holds up to n·v micro-batches)."""
    base = draw(piper_instances(max_nodes=5))
    assume(len(base.nodes) >= 4)
    return replace(base, microbatches_in_batch=draw(st.sampled_from([2, 4, 8])),
                   max_memory_per_device=float(draw(st.integers(4, 300))))


@given(tiny(), st.integers(2, 4))
@example(chain([1, 2, 3, 4, 5], memory=5.0, activations=[1] * 5, recompute={4: (6, 0)}), 2)
@settings(max_examples=40, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
def test_agrees_with_brute_force(instance, devices):
    """Same optimum (or both infeasible) as the enumeration of every interleaved plan."""
    expected, _ = brute_force_interleaved(instance, devices=devices, chunks=2)
    result = solve_interleaved(instance, devices=devices, chunks=2)
    if math.isinf(expected):
        assert result.status is Status.INFEASIBLE
        return
    assert result.status is Status.OPTIMAL
    assert result.value == pytest.approx(expected, rel=1e-9)
    assert evaluate_interleaved(instance, result.plan, devices=devices).ok


# --- the simulator replays the plans ---------------------------------------------------------------

def check_against_simulator(instance, result):
    """Simulated peak memory per device = the evaluator's (1e-9), time per sample = the value, and time
    per batch = the planner's exact evaluation (allreduce "piper", forward share 1/3)."""
    sim = simulate_parallel(instance, result.plan, allreduce="piper")
    assert (sim.schedule, sim.chunks) == ("interleaved", result.plan.chunks)
    for k, stage in enumerate(result.evaluation.stages):
        assert sim.peak_memory(k) == pytest.approx(stage.memory, rel=1e-9)
    assert sim.time_per_sample == pytest.approx(result.value, rel=1e-9)
    assert sim.time_per_batch == pytest.approx(result.time_per_batch, rel=1e-9)


@given(tiny(), st.integers(2, 4))
@settings(max_examples=25, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
def test_tiny_plans_replay_in_the_simulator(instance, devices):
    result = solve_interleaved(instance, devices=devices, chunks=2)
    assume(result.plan is not None)
    check_against_simulator(instance, result)


@pytest.mark.skipif(not (SHARED / "bert32a100.json").exists(), reason="shared Piper instances absent")
def test_bert_plan_replays_in_the_simulator():
    import placement

    instance = placement.load(SHARED / "bert32a100.json")
    result = solve_interleaved(instance, devices=8, chunks=2, time_limit=10)
    assert result.plan is not None and evaluate_interleaved(instance, result.plan, devices=8).ok
    assert result.bound <= result.value
    check_against_simulator(instance, result)


# --- plan files and refusals -------------------------------------------------------------------------

def test_plan_json_keeps_the_chunks():
    result = solve_interleaved(chain([1, 2, 3, 4, 5]), chunks=2)
    doc = json.loads(json.dumps(result.plan.to_json()))
    assert doc["chunks"] == 2 and doc["schedule"] == "interleaved"
    assert ParallelPlan.from_json(doc) == result.plan
    with pytest.raises(InvalidPlanError, match="^chunks must be a positive integer, not 0$"):
        ParallelPlan.from_json(dict(doc, chunks=0))
    with pytest.raises(InvalidPlanError, match="^an interleaved plan must give 'chunks', its model chunks per device "
                                               "group$"):
        ParallelPlan.from_json({k: v for k, v in doc.items() if k != "chunks"})
    # one chunk per group is plain 1F1B, which the interleaved schedule does not run (solve and simulate refuse it)
    with pytest.raises(InvalidPlanError, match=r"^an interleaved plan's chunks must be at least 2 \(model chunks "
                                               r"per device group\), not 1$"):
        ParallelPlan.from_json(dict(doc, chunks=1))
    # chunks without the interleaved schedule: no schedule runs that file as written
    with pytest.raises(InvalidPlanError, match=r"^chunks 2 belongs to interleaved plans \(model chunks per device "
                                               r"group\), and it gives no schedule \(read as 'piper'\)$"):
        ParallelPlan.from_json({k: v for k, v in doc.items() if k != "schedule"})
    with pytest.raises(InvalidPlanError, match=r"^chunks 2 belongs to interleaved plans \(model chunks per device "
                                               r"group\), and its schedule is '1f1b'$"):
        ParallelPlan.from_json(dict(doc, schedule="1f1b"))
    # the result's file records each stage's device group and chunk: stage k of 2S stages in 2 chunks is
    # chunk k div S of group k mod S; a file that says otherwise is refused, not read as the order says
    written = json.loads(json.dumps(result.to_json()))
    stages = written["stages"]
    assert [(s["group"], s["chunk"]) for s in stages] == [(k % (len(stages) // 2), k // (len(stages) // 2))
                                                          for k in range(len(stages))]
    assert ParallelPlan.from_json(written) == result.plan
    stages[1] = dict(stages[1], group=0)
    with pytest.raises(InvalidPlanError, match=rf"^stages\[1\]\.group is 0, but stage 1 of an interleaved plan of "
                                               rf"{len(stages)} stages in 2 chunks is chunk 0 of device group 1$"):
        ParallelPlan.from_json(written)
    # a group or chunk that is no whole number is named as such: "group is '1', but stage 1 ... is chunk 0 of
    # device group 1" said the right group back as the reason
    for key, value, shown in (("group", "1", "'1'"), ("chunk", 0.5, "0.5"), ("group", None, "null")):
        stages[1] = {**stages[1], "group": 1, "chunk": 0, key: value}
        with pytest.raises(InvalidPlanError, match=rf"^stages\[1\]\.{key} must be a whole number, not {shown}$"):
            ParallelPlan.from_json(written)


def test_result_json_has_the_same_keys_without_a_plan(tmp_path, capsys):
    """Memory 5 fits no plan (test_memory_of_the_order_by_hand): the file still records the chunks asked for,
    with every key of a solved one."""
    from placement.cli import main

    solved = solve_interleaved(chain([1, 2, 3, 4, 5], memory=6.0, activations=[1] * 5), chunks=2).to_json()
    unsolved = solve_interleaved(chain([1, 2, 3, 4, 5], memory=5.0, activations=[1] * 5), chunks=2)
    assert unsolved.status is Status.INFEASIBLE and unsolved.plan is None
    doc = unsolved.to_json()
    assert list(doc) == list(solved)
    assert (doc["chunks"], doc["stages"], doc["value"], doc["devicesUsed"]) == (2, [], None, None)
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(chain([1, 2, 3, 4, 5], memory=5.0, activations=[1] * 5).to_json()))
    assert main(["solve", str(path), "--schedule", "interleaved", "--json", "--quiet"]) == 1
    written = json.loads(capsys.readouterr().out)
    assert list(written) == list(solved) and (written["status"], written["chunks"]) == ("infeasible", 2)


def test_evaluator_names_what_is_wrong():
    instance = chain([1, 2, 3, 4, 5], memory=5.0, activations=[1] * 5)
    stage = lambda nodes, d=1: ParallelStage(nodes, d, 1, {u: "x" for u in nodes})  # noqa: E731
    plan = ParallelPlan((stage((0, 1)), stage((2,)), stage((4,)), stage((3,))), "interleaved", 2)
    assert evaluate_interleaved(instance, plan).violations == (
        "edge 3 -> 4 goes from chunk 3 back to chunk 2",
        "group 0 needs 6 bytes per device, more than the 5 available")
    uneven = ParallelPlan((stage((0, 1)), stage((2,), 2), stage((3,)), stage((4,))), "interleaved", 2)
    assert evaluate_interleaved(instance, uneven, devices=8).violations[0] == \
        "every chunk must have the same d and t; the plan has [(1, 1), (2, 1)]"
    # the condition the chunk count fails, not both: 2 is at least 2, and 1 divides nothing into 2 chunks
    whole = (stage((0, 1, 2, 3, 4)),)
    assert evaluate_interleaved(instance, ParallelPlan(whole, "interleaved", 2)).violations == (
        "chunks = 2 must divide the plan's 1 stage",)
    assert evaluate_interleaved(instance, ParallelPlan(whole, "interleaved", 1)).violations == (
        "chunks = 1 must be at least 2",)
    # one micro-batch per batch is counted in the singular ("the 1 micro-batches" before)
    split = ParallelPlan((stage((0, 1)), stage((2,)), stage((3,)), stage((4,))), "interleaved", 2)
    assert evaluate_interleaved(chain([1, 2, 3, 4, 5], m=1), split).violations == (
        "d=1 must divide the 1 micro-batch and leave a multiple of the 2 groups per replica",)


@pytest.mark.parametrize("kwargs, message", [
    ({"chunks": 1}, "chunks must be at least 2 under the interleaved schedule, not 1"),
    ({"chunks": 0}, "chunks must be a positive integer, not 0"),
    ({"chunks": 3}, "chunks 3 needs at least 6 nodes (2 device groups of 3 non-empty chunks each); the instance "
                    "has 5"),
    ({"devices": 1}, "devices must be at least 2 under the interleaved schedule (2 device groups), not 1"),
    ({"time_limit": 1e10}, "time_limit must be a finite number > 0 and ≤ 1e+09, not 10000000000.0"),  # as elsewhere
    ({"threads": 2 ** 40}, "threads must be an integer from 1 to 1024, not 1099511627776"),
])
def test_refusals(kwargs, message):
    with pytest.raises(InvalidParameterError) as caught:
        solve_interleaved(chain([1, 2, 3, 4, 5]), **kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize("instance, message", [
    (chain([1, 2, 3]), "chunks 2 (the default) needs at least 4 nodes (2 device groups of 2 non-empty chunks each); "
                       "the instance has 3"),
    (chain([1, 2, 3, 4], devices=1), "devices must be at least 2 under the interleaved schedule (2 device groups), "
                                     "not 1 (the instance's maxDevices)"),
])
def test_refusals_of_values_not_given_say_where_they_came_from(instance, message):
    import placement

    with pytest.raises(InvalidParameterError) as caught:
        solve_interleaved(instance)
    assert str(caught.value) == message
    # placement.solve said "chunks 2 needs ..." of the chunks it was not given: it passed on their default as given
    with pytest.raises(InvalidParameterError) as caught:
        placement.solve(instance, schedule="interleaved")
    assert str(caught.value) == message


# --- command line ----------------------------------------------------------------------------------

def test_cli_solves_and_the_simulator_replays_the_plan_file(tmp_path, capsys):
    from placement.cli import main

    path, plan = tmp_path / "chain.json", tmp_path / "plan.json"
    path.write_text(json.dumps(chain([1, 2, 3, 4, 5]).to_json()))
    assert main(["solve", str(path), "--schedule", "interleaved", "--chunks", "2", "--out", str(plan), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "largest group time per sample 8 (bound 8)" in out
    assert "Megatron-style: tensor 1, pipeline 2, data 1, virtual pipeline 2" in out
    doc = json.loads(plan.read_text())
    assert (doc["schedule"], doc["chunks"]) == ("interleaved", 2)
    assert [(s["group"], s["chunk"]) for s in doc["stages"]] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert main(["simulate", str(path), str(plan), "--allreduce", "piper", "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert (simulated["schedule"], simulated["chunks"]) == ("interleaved", 2)
    assert simulated["time_per_sample"] == 8.0 and simulated["time_per_batch"] == doc["timePerBatch"]


@pytest.mark.parametrize("extra, message", [
    (["--schedule", "1f1b", "--chunks", "2"],
     "error: --chunks applies to the 'interleaved' schedule only, not to '1f1b'"),
    (["--schedule", "1f1b", "--chunks", "1"],   # the one chunk the schedule runs: still an option that does not apply
     "error: --chunks applies to the 'interleaved' schedule only, not to '1f1b'"),
    (["--chunks", "1"], "error: --chunks applies to the 'interleaved' schedule only, not to 'piper'"),
    (["--seed", "0"], "error: --seed does not apply to a Piper instance, whose one exact DP has its own options (it "
                      "takes --devices, --memory, --schedule, --chunks, --objective, --forward-share, --max-ideals, "
                     "--time-limit)"),
    (["--gap", "0"], "error: --gap does not apply to a Piper instance, whose one exact DP has its own options (it "
                     "takes --devices, --memory, --schedule, --chunks, --objective, --forward-share, --max-ideals, "
                     "--time-limit)"),
    (["--calls", "1"], "error: --calls does not apply to a Piper instance, whose one exact DP has its own options (it "
                       "takes --devices, --memory, --schedule, --chunks, --objective, --forward-share, --max-ideals, "
                     "--time-limit)"),
    (["--schedule", "interleaved", "--chunks", "1"], "error: --chunks must be at least 2 under the interleaved "
                                                     "schedule, not 1"),
    (["--schedule", "interleaved", "--chunks", "0"], "error: argument --chunks: expected a positive integer, got '0'"),
    (["--schedule", "interleaved", "--chunks", "3"], "error: --chunks 3 needs at least 6 nodes (2 device groups of 3 "
                                                     "non-empty chunks each); the instance has 5"),
    (["--schedule", "gpipe", "--objective", "time-per-batch", "--time-limit", "3"],
     "error: --time-limit does not apply to --objective time-per-batch (its search runs to the end)"),
    # the interleaved search enumerates no ideals: the limit of the DP's, typed, is refused
    (["--schedule", "interleaved", "--max-ideals", "200000"],
     "error: --max-ideals does not apply to --schedule interleaved, whose search is bounded by its time limit (it "
     "takes --devices, --memory, --chunks, --time-limit)"),
])
def test_cli_refuses_in_one_line(tmp_path, capsys, extra, message):
    from placement.cli import main

    path = tmp_path / "chain.json"
    path.write_text(json.dumps(chain([1, 2, 3, 4, 5]).to_json()))
    assert main(["solve", str(path), *extra]) == 2
    assert capsys.readouterr().err.strip() == message


@pytest.mark.parametrize("name, value", [("max_sets", 200_000), ("max_sets", 5), ("forward_share", 1 / 3),
                                         ("forward_share", 0.5)])
def test_solve_piper_refuses_the_options_of_the_dp_under_interleaved_whatever_their_value(name, value):
    """The interleaved search takes neither the DP's set limit nor a forward share (its time per batch is
    Piper's, 1/3): given under it, at their defaults too, they are refused instead of passing unused."""
    from placement.parallel import solve_piper

    instance = chain([1, 2, 3, 4, 5])
    with pytest.raises(InvalidParameterError) as raised:
        solve_piper(instance, schedule="interleaved", **{name: value})
    why = ("whose time per batch is Piper's, forward share 1/3" if name == "forward_share" else
           "whose search is bounded by its time limit")
    assert raised.value.parameter == name
    assert str(raised.value) == (f"{name} does not apply to schedule='interleaved', {why} (it takes devices, "
                                 "memory, chunks, time_limit)")


def test_solve_refuses_max_ideals_under_interleaved_and_leaving_the_options_out_solves():
    import placement
    from placement.parallel import solve_piper

    instance = chain([1, 2, 3, 4, 5])
    with pytest.raises(InvalidParameterError) as raised:
        placement.solve(instance, schedule="interleaved", max_ideals=200_000)
    assert str(raised.value) == ("max_ideals does not apply to schedule='interleaved', whose search is bounded by its "
                                 "time limit (it takes devices, memory, chunks, time_limit)")
    assert placement.solve(instance, schedule="interleaved").value == 8.0
    assert solve_piper(instance, schedule="interleaved").value == 8.0
    # where they apply, given at their defaults they are taken as left out
    left_out = solve_piper(instance, schedule="gpipe")
    typed = solve_piper(instance, schedule="gpipe", max_sets=200_000, forward_share=1 / 3)
    assert (typed.value, typed.time_per_batch, typed.plan) == (left_out.value, left_out.time_per_batch, left_out.plan)
    assert placement.solve(instance, schedule="gpipe", max_ideals=200_000).value == left_out.value


@given(tiny(), st.sampled_from([(2, 1), (2, 2)]))
@settings(max_examples=30, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
def test_chain_dp_and_cpsat_model_agree_per_shape(instance, shape):
    """The two exact solvers of one shape (the DP over chains of successor-closed sets, used when memory
    cannot bind, and the CP-SAT model) reach the same optimum with memory out of the way."""
    from placement.parallel.interleaved import Shape
    from placement.parallel.interleaved_chain import chain_sets, solve_chain
    from placement.parallel.interleaved_cpsat import solve_shape

    groups, d = shape
    assume(instance.microbatches_in_batch % d == 0 and (instance.microbatches_in_batch // d) % groups == 0)
    shape = Shape(groups, d, 1, 2)
    dp = solve_chain(instance, shape, chain_sets(instance), cutoff=None, time_limit=30)
    milp = solve_shape(instance, shape, math.inf, cutoff=None, time_limit=30)
    assert dp.status == milp.status == "optimal"
    values = [evaluate_interleaved(instance, o.plan, devices=64, memory=math.inf).value for o in (dp, milp)]
    assert values[0] == pytest.approx(values[1], rel=1e-9)
    assert dp.value == pytest.approx(values[0], rel=1e-9)


def test_evaluator_loads_no_solver_code():
    import subprocess
    import sys

    code = ("import sys, placement.verification.parallel_interleaved; "
            "print(sorted(m for m in sys.modules if m.startswith(('placement.solvers', 'placement.parallel.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['placement.parallel.plan']"


@pytest.mark.parametrize("third", [("slow", 5.0, 0.0), ("big", 2.0, 0.5)])
def test_memory_is_decided_on_the_sizes_as_written(third):
    """Chain 0 -> 1 -> 2 -> 3, m = 2, two devices of 0.3, no activations; two chunks per group put each
    node in its own chunk, groups {0, 2} and {1, 3}. Node 0 holds 0.1; node 2 runs 'fast' (time 1,
    holds 0.2: 0.1 + 0.2 = 0.3 fits as written), 'huge' (0.5 s, holds 1.0: no) or the third option,
    'slow' (time 5, holds nothing) or 'big' (holds 0.5: no). With 'fast' the groups take 1 + 1 and
    0.5 + 0.5: 2. The CP-SAT rows scaled 0.1, 0.2 and 0.3 by a power of two and rounded, and the
    binary sum lost the exact fit: 6 ('slow') was proven optimal, and with 'big' no plan at all."""
    from placement.io.piper import parse_piper

    def tmpc(name, time, b, fw=(), bw=()):
        return {"id": name, "timePerSample": time, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": b,
                "syncTimeFw": {str(u): 0 for u in fw}, "syncTimeBw": {str(w): 0 for w in bw}}

    instance = parse_piper({
        "maxDevices": 2, "maxMemoryPerDevice": 0.3, "bandwidth": 1, "mbsInBatch": 2,
        "nodes": [{"id": 0, "TMPCs": {"1": [tmpc("c0", 1, 0.1, bw=[1])]}},
                  {"id": 1, "TMPCs": {"1": [tmpc("c0", 0.5, 0, fw=[0], bw=[2])]}},
                  {"id": 2, "TMPCs": {"1": [tmpc(third[0], third[1], third[2], fw=[1], bw=[3]),
                                            tmpc("fast", 1, 0.2, fw=[1], bw=[3]),
                                            tmpc("huge", 0.5, 1.0, fw=[1], bw=[3])]}},
                  {"id": 3, "TMPCs": {"1": [tmpc("c0", 0.5, 0, fw=[2])]}}],
        "edges": [{"sourceId": i, "destId": i + 1, "communicationCost": 0} for i in range(3)]})
    result = solve_interleaved(instance, chunks=2)
    assert (result.status, result.value) == (Status.OPTIMAL, 2.0)
    assert result.plan.stages[2].tmpcs[2] == "fast"


def test_an_instance_with_device_types_is_refused_naming_them():
    """Interleaved groups are all alike: instances with deviceTypes are refused, one type too (the message
    read "names 1 device types" as the reason, as if one type were what it wanted)."""
    from placement.io.piper import PiperDeviceType

    typed = replace(chain([1.0, 1.0, 1.0, 1.0], devices=4), device_types=(PiperDeviceType("x", 4, 100.0),))
    with pytest.raises(InvalidParameterError) as raised:
        solve_interleaved(typed)
    assert str(raised.value) == ("schedule 'interleaved' plans instances without deviceTypes (every group alike: "
                                 "maxDevices devices of maxMemoryPerDevice bytes); this instance has deviceTypes "
                                 "('x')")


def options_chain(options: int, comm: float = 0.0, sync: float = 0.0) -> PiperInstance:
    """Chain 0 → 1 → 2 → 3 at t = 2 only, m = 12, 4 devices of 1/7 bytes; each node has ``options`` TMPCs, 'o0'
    taking time 4 and holding 1/3 (memoryUsageB: more than the memory), 'o<j>' time 4 + j holding nothing;
    edges of ``comm`` bytes, syncs of ``sync``."""
    def tmpcs(k):
        fw, bw = ({k - 1: sync} if k else {}), ({k + 1: sync} if k < 3 else {})
        return tuple(TMPC(f"o{j}", 4.0 + j, 0.0, 0.0, 1 / 3 if j == 0 else 0.0, fw, bw) for j in range(options))

    nodes = tuple(PiperNode(k, f"n{k}", {2: tmpcs(k)}) for k in range(4))
    return PiperInstance("options", 4, 1 / 7, 1.0, 12, nodes, tuple(PiperEdge(k, k + 1, comm) for k in range(3)))


def test_cpsat_numbers_stay_within_its_overflow_limit():
    """The one shape (S = 2 groups, d = 1, t = 2, two chunks: a node per chunk), solved whole. With 24 TMPCs a
    node, a memory row's coefficients summed to 2^62.18 in CP-SAT's units (the scale was set by the sizes a
    row sums, not by the magnitudes of its coefficients) and CP-SAT refused the model: no_solution, 'the time
    limit ran out before a plan was found', in 0.3 s of 20. Each node runs 'o1' (time 5; 'o0' does not fit):
    groups of two nodes take 10. A crossing that costs more than the cutoff (2·(4 + 6) = 20 against 13.03)
    put its coefficient times T's bound at 2^62.03, and CP-SAT's proof that nothing is under the cutoff was
    not used: no_solution where the shape is infeasible."""
    from placement.parallel.interleaved import Shape
    from placement.parallel.interleaved_cpsat import solve_shape

    result = solve_interleaved(options_chain(24), chunks=2, time_limit=20)
    assert (result.status, result.value, result.bound) == (Status.OPTIMAL, 10.0, 10.0)
    assert [stage.tmpcs for stage in result.plan.stages] == [{0: "o1"}, {1: "o1"}, {2: "o1"}, {3: "o1"}]
    crossing = replace(options_chain(1, comm=4.0, sync=6.0), max_memory_per_device=100.0)
    outcome = solve_shape(crossing, Shape(2, 1, 2, 2), 100.0, cutoff=13.03, time_limit=20)
    assert (outcome.status, outcome.bound) == ("infeasible", 13.03)
    assert outcome.stats["overflow_risk_log2"] <= 62


def test_a_proof_cpsat_cannot_trust_is_told_apart_from_the_time_limit():
    from placement.parallel.interleaved import _open_reason

    doubt = ("a coefficient times a bound reaches 2^62.2 in the CP-SAT model, beyond what it handles exactly: its "
             "proofs are not used")
    stats = {"open": 3, "doubted": 1, "doubts": {doubt: 1}}
    assert _open_reason(stats, "before every shape was closed") == (
        f"1 shape left open before every shape was closed: {doubt}; the time limit ran out for 2 others")
    assert _open_reason({"open": 2, "doubted": 2, "doubts": {doubt: 2}}, "before a plan was found") == (
        f"2 shapes left open before a plan was found: {doubt}")
    assert _open_reason({"open": 2}, "before a plan was found") == "the time limit ran out before a plan was found"
    unfit = ("no exact unit of the memory sizes keeps CP-SAT's memory rows within its limits, and rounded rows did "
             "not close it: the optima of rows widened (every plan that fits passes) did not fit as written, and no "
             "plan of rows narrowed (every plan that passes fits) met their bound")
    assert _open_reason({"open": 4, "doubted": 1, "doubts": {doubt: 1}, "unfit": 2}, "before a plan was found") == (
        f"1 shape left open before a plan was found: {doubt}; 2 others: {unfit}; the time limit ran out for 1 other")


def test_shapes_doubted_for_different_reasons_are_told_each_reason():
    """Two shapes whose CP-SAT proofs were not used, at different magnitudes, and a third at the first one's: the
    message names both reasons with their counts (it named only the last shape's, for all three)."""
    from placement.parallel.interleaved import _open_reason

    def doubt(power):
        return (f"a coefficient times a bound reaches 2^{power} in the CP-SAT model, beyond what it handles "
                "exactly: its proofs are not used")

    stats = {"open": 4, "doubted": 3, "doubts": {doubt(62.2): 2, doubt(63.5): 1}}
    assert _open_reason(stats, "before every shape was closed") == (
        f"2 shapes left open before every shape was closed: {doubt(62.2)}; 1 other: {doubt(63.5)}; the time limit "
        "ran out for 1 other")


def crossing_and_memory(activations):
    """Chain 0 → … → 4, m = 12, 4 devices of 11 bytes, bandwidth 1. At t = 1 times 12, 6, 12, 8, 12 (node 3 with
    parameters 0.2), no memory: the best plan, S = 2 groups of d = 2 replicas, takes 26/2 + 0.2/6 = 13.0333. At
    t = 2 every node takes time 3 with ``activations`` as memoryUsageA, and node 0 syncs 11 with node 1: chunks
    that part them pay a crossing of 22, beyond 13.0333, so every plan of S = 2, d = 1, t = 2 under it has
    [0 1] as its first chunk, which group 0 holds for up to 4 micro-batches: 4·(A₀ + A₁) against 11."""
    from placement.io.piper import parse_piper

    def tmpc(name, time, p, a, fw, bw):
        return {"id": name, "timePerSample": time, "parameterSize": p, "memoryUsageA": a, "memoryUsageB": 0,
                "syncTimeFw": fw, "syncTimeBw": bw}

    nodes = []
    for k, (time, p) in enumerate(zip([12, 6, 12, 8, 12], [0, 0, 0, 0.2, 0])):
        fw = {str(k - 1): 0} if k else {}
        bw = {str(k + 1): 0} if k < 4 else {}
        synced = {"1": 11} if k == 0 else bw
        nodes.append({"id": k, "TMPCs": {"1": [tmpc("a", time, p, 0, fw, bw)],
                                          "2": [tmpc("b", 3, 0, activations[k], fw, synced)]}})
    return parse_piper({"maxDevices": 4, "maxMemoryPerDevice": 11, "bandwidth": 1, "mbsInBatch": 12, "nodes": nodes,
                        "edges": [{"sourceId": k, "destId": k + 1, "communicationCost": 0} for k in range(4)]})


@pytest.mark.parametrize("activations", [
    [1.5, 1.5, 0, 0, 0],
    [1.3750000000000002, 1.3750000000000002, 0, 0, 0],
    [1.3750000000000002, 1.375, 0, 0, 0],
])
def test_a_shape_whose_plans_under_the_cutoff_exceed_the_memory_as_written_is_closed(activations):
    """S = 2, d = 1, t = 2 has no plan under 13.0333 that fits (4·3 = 12 bytes; 4·2.7500000000000004 and
    4·2.7500000000000002 pass 11 as written), but the chain DP's [0 1][2][3][4] takes 9, so the shape went to
    CP-SAT. With A = 1.5 the crossing's coefficient times T's bound reached 2^62.16 and CP-SAT's proof was not
    used; with 17 significant digits no decimal unit kept a row within 2^53 and the rounded rows let the plan
    through; with 1.375 besides, the floating-point sum 2.75 said memory could not bind, and the chain DP's plan
    was taken unchecked. Each answered feasible 13.0333 with bound 9, 'the time limit ran out before every shape
    was closed', in under a second."""
    instance = crossing_and_memory(activations)
    result = solve_interleaved(instance, chunks=2, time_limit=60)
    assert (result.status, result.value, result.bound, result.message) == (
        Status.OPTIMAL, 13.033333333333333, 13.033333333333333, "")
    assert brute_force_interleaved(instance, chunks=2)[0] == 13.033333333333333


def test_a_shape_whose_rounded_memory_rows_pass_a_plan_that_does_not_fit_is_closed_without_it():
    """Sizes 1.3750000000000002 and 1.2345678901234567e-10 need a unit of 10^26: past CP-SAT's limit, the rows
    are rounded, and the optimum of the rows widened (9: [0 1] first) does not fit as written. The rows narrowed
    pass no plan under the cutoff 13.0333, and the widened rows with that plan cut off neither: S = 2, d = 1,
    t = 2 has no plan under it that fits, and the answer is proven. (The shape stayed open at 9: feasible.)"""
    instance = crossing_and_memory([1.3750000000000002, 1.3750000000000002, 0, 0, 1.2345678901234567e-10])
    result = solve_interleaved(instance, chunks=2, time_limit=60)
    assert (result.status, result.value, result.bound, result.message) == (
        Status.OPTIMAL, 13.033333333333333, 13.033333333333333, "")
    assert {key: result.stats[key] for key in ("solved", "infeasible", "pruned", "open", "narrowed")} == {
        "solved": 1, "infeasible": 1, "pruned": 1, "open": 0, "narrowed": 1}
    assert brute_force_interleaved(instance, chunks=2)[0] == 13.033333333333333


def test_a_shape_neither_the_narrowed_rows_nor_the_cuts_close_stays_open_at_the_widened_bound(monkeypatch):
    """As above with no plan that does not fit cut off: the narrowed rows pass nothing under the cutoff, and the
    shape stays open at the widened optimum 9, with the reason."""
    import placement.parallel.interleaved as interleaved

    monkeypatch.setattr(interleaved, "MAX_EXCLUDED", 0)
    instance = crossing_and_memory([1.3750000000000002, 1.3750000000000002, 0, 0, 1.2345678901234567e-10])
    result = solve_interleaved(instance, chunks=2, time_limit=60)
    assert (result.status, result.value, result.bound) == (Status.FEASIBLE, 13.033333333333333, 9.0)
    assert result.message == (
        "1 shape left open before every shape was closed: no exact unit of the memory sizes keeps CP-SAT's memory "
        "rows within its limits, and rounded rows did not close it: the optima of rows widened (every plan that "
        "fits passes) did not fit as written, and no plan of rows narrowed (every plan that passes fits) met their "
        "bound")
    assert (result.stats["open"], result.stats["unfit"], result.stats["narrowed"]) == (1, 1, 1)


def crossing_with_a_lean_option(memory):
    """:func:`crossing_and_memory` with activations 1.3750000000000002 on nodes 0 and 1 and 1.2345678901234567e-10
    on node 4 (no decimal unit within CP-SAT's limit), ``memory`` bytes, and node 0 given a second TMPC at t = 2,
    'c': time 3, no memory. At S = 2, d = 1, t = 2 the plans under 13.0333 take 9, [0 1] first, which group 0
    holds for 4 micro-batches: 4·2.7500000000000004 = 11.0000000000000016 with 'b', 4·1.3750000000000002 with
    'c'."""
    instance = crossing_and_memory([1.3750000000000002, 1.3750000000000002, 0, 0, 1.2345678901234567e-10])
    first = instance.nodes[0]
    lean = replace(first.configurations[2][0], id="c", memory_usage_a=0.0)
    nodes = (replace(first, configurations={**first.configurations, 2: (*first.configurations[2], lean)}),
             *instance.nodes[1:])
    return replace(instance, nodes=nodes, max_memory_per_device=memory)


def layout_01(instance, tmpc):
    """The plan [0 1] [2] [3] [4] of S = 2, d = 1, t = 2, node 0 in TMPC ``tmpc``, the others in 'b'."""
    chunks = [(0, 1), (2,), (3,), (4,)]
    return ParallelPlan(tuple(ParallelStage(nodes, 1, 2, {u: tmpc if u == 0 else "b" for u in nodes})
                              for nodes in chunks), "interleaved", 2)


def test_memory_rows_narrowed_pass_only_plans_that_fit_and_widened_every_plan_that_fits():
    """With 11.000000000000002 bytes, node 0 in 'b' fits (11.0000000000000016 as written) by less than 1e-8 of
    the memory: the widened rows pass it (optimal 9), the narrowed ones do not (the plan in 'c' instead), and
    with 'c' cut off the narrowed rows pass nothing under the cutoff. With 11 bytes 'b' does not fit."""
    from placement.parallel.interleaved import Shape
    from placement.parallel.interleaved_cpsat import solve_shape

    shape = Shape(2, 1, 2, 2)
    instance = crossing_with_a_lean_option(11.000000000000002)
    wide = solve_shape(instance, shape, 11.000000000000002, cutoff=13.04, time_limit=20, exclude=(
        layout_01(instance, "c"),))
    assert (wide.status, wide.value, wide.plan) == ("optimal", 9.0, layout_01(instance, "b"))
    assert wide.stats["memory_rounded"] is True
    assert evaluate_interleaved(instance, wide.plan).ok
    narrow = solve_shape(instance, shape, 11.000000000000002, cutoff=13.04, time_limit=20, narrowed=True)
    assert (narrow.status, narrow.value, narrow.plan) == ("optimal", 9.0, layout_01(instance, "c"))
    narrow = solve_shape(instance, shape, 11.000000000000002, cutoff=13.04, time_limit=20, narrowed=True,
                         exclude=(layout_01(instance, "c"),))
    assert narrow.status == "infeasible"
    assert not evaluate_interleaved(crossing_with_a_lean_option(11.0), layout_01(instance, "b")).ok


def test_a_narrowed_plan_that_meets_the_widened_bound_closes_the_shape():
    """The widened rows' optimum, node 0 in 'b', does not fit 11 bytes; the narrowed rows' plan, in 'c', takes the
    same 9, which the widened optimum bounds: the shape is closed with it, no plan cut off."""
    from placement.parallel.interleaved import Shape, _narrowed_shape
    from placement.parallel.interleaved_cpsat import ShapeOutcome

    instance = crossing_with_a_lean_option(11.0)
    widened = ShapeOutcome("optimal", layout_01(instance, "b"), 9.0, 9.0, 0.0, {"memory_rounded": True})
    budget = dict(cutoff=13.04, time_limit=20, threads=1, hint=None)
    outcome = _narrowed_shape(instance, Shape(2, 1, 2, 2), 11.0, 4, widened, budget, math.inf, None)
    assert (outcome.status, outcome.value, outcome.bound, outcome.plan) == (
        "optimal", 9.0, 9.0, layout_01(instance, "c"))
    assert "excluded" not in outcome.stats and "unfit" not in outcome.stats
    result = solve_interleaved(instance, chunks=2, time_limit=60)
    assert (result.status, result.value, result.bound) == (Status.OPTIMAL, 9.0, 9.0)
    assert brute_force_interleaved(instance, chunks=2)[0] == 9.0


def slow_option_chain():
    """Chain 0 → … → 4 with times 1.3, 0.7, 2.9, 0.1, 0.7 and memoryUsageA 0, 1, 3, 0, 2, m = 2 on 2 devices of 8
    bytes: S = 2 groups, d = 1, both holding 2 micro-batches of each of their chunks, so a group fits while its
    nodes' A sum to at most 4. Node 0 may also run TMPC 'r' (time 90000, A = 0), which no good plan takes. The best
    split ignoring memory, [0 1][2][3][4], puts 2 and 4 (A = 5) on group 1; of the splits that fit, [0][1][2][3 4]
    (groups {0, 2}: 4.2 and {1, 3, 4}: 1.5) is the best."""
    return chain([1.3, 0.7, 2.9, 0.1, 0.7], m=2, devices=2, memory=8, activations=[0, 1, 3, 0, 2],
                 recompute={0: (90000, 0)})


def test_a_tmpc_slower_than_the_cutoff_leaves_the_cpsat_units_fine():
    """CP-SAT's units were set by the largest time a node or crossing may take (here 'r', 90000) when it passes
    the cutoff: 2^-14, so the times, each rounded down, gave the shape a bound of 4.199951171875 (1.2e-5 short
    of 4.2). The cutoff alone sets them now, a time above it written as just past T's bound."""
    from placement.parallel.interleaved import Shape
    from placement.parallel.interleaved_cpsat import solve_shape

    outcome = solve_shape(slow_option_chain(), Shape(2, 1, 1, 2), 8.0, cutoff=5.0, time_limit=20)
    assert outcome.status == "optimal"
    assert [stage.nodes for stage in outcome.plan.stages] == [(0,), (1,), (2,), (3, 4)]
    assert 4.2 * (1 - 1e-8) <= outcome.bound <= 4.2
    assert outcome.stats["overflow_risk_log2"] <= 62
    assert solve_shape(slow_option_chain(), Shape(2, 1, 1, 2), 8.0, cutoff=4.1, time_limit=20).status == "infeasible"


def test_a_shape_proven_in_coarse_units_is_solved_again_under_its_plans_value():
    """The incumbent of the even splits runs 'r' (the only TMPC that lets node 0 share a group with others at 90000:
    cutoff 90004.7), so CP-SAT's units were coarse beside the optimum 4.2 and its proof of the shape fell 1.2e-5
    short: 'feasible', 'the time limit ran out before every shape was closed', in 0.01 s of 20. The shape is solved
    again with its plan's value as the cutoff."""
    instance = slow_option_chain()
    result = solve_interleaved(instance, chunks=2, time_limit=20)
    assert (result.status, result.value, result.message) == (Status.OPTIMAL, 4.2, "")
    assert 4.2 * (1 - 1e-8) <= result.bound <= 4.2
    assert [stage.nodes for stage in result.plan.stages] == [(0,), (1,), (2,), (3, 4)]
    assert brute_force_interleaved(instance, chunks=2)[0] == 4.2
