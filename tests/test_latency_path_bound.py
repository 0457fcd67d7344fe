"""The path bound on latency (placement.problem.path_bound): hand-solved values, never above the
brute-force optimum, equal to it on chains, and as row 14 of the latency MILP."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placement
from placement.errors import LimitExceededError
from placement.io.tarnawski import read_instance
from placement.plan import DeviceAssignment, Plan
from placement.problem.bounds import latency_lower_bound
from placement.problem.instance import ACCELERATOR, Edge, Instance, Node, make_two_type_problem
from placement.problem.path_bound import latency_path_bound
from placement.problem.sequential import Budget, least_run_sum
from placement.solution import Status
from placement.solvers.milp.backends import backend_availability
from placement.testing.bruteforce_latency import brute_force_latency
from tests.methods import run_method as solve
from tests.strategies import problems
from tests.test_latency_chain import chains

TINY = Path(__file__).resolve().parents[1] / "instances" / "tiny"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "tarnawski" / "latency-inputs"
HAVE_CPSAT = any(name == "cp-sat" and ok for name, ok, _ in backend_availability())
HAVE_HIGHS = any(name == "highs" and ok for name, ok, _ in backend_availability())


def test_memory_chain_by_hand():
    """a -> b -> c (2 ms each on an accelerator, 8 on the CPU, 3 bytes, transfers 0.5), 2 accelerators
    of 5 bytes and a CPU. The path is the whole graph.

    One call per accelerator: at most 2 accelerator segments of one node each, so one node runs on
    the CPU: a | CPU b | c gives 2.5 + 8 + 2.5 = 13, the optimum (the critical path alone says 6).
    Two calls: up to 4 segments, each within 5 bytes (the bound does not add up an accelerator's
    calls): a | b | c on accelerators, 2.5 + 3 + 2.5 = 8, below the optimum of 13 (each
    accelerator still holds one node).
    """
    problem = read_instance(TINY / "memory-chain.json")
    assert latency_lower_bound(problem) == 6.0
    assert latency_path_bound(problem, calls=1) == 13.0
    assert latency_path_bound(problem, calls=2) == 8.0
    assert brute_force_latency(problem, max_calls=2).objective == 13.0


def test_an_input_from_off_the_path_pays_its_transfer_or_its_time():
    """a -> b and u -> b; accelerator times a=2, b=2, u=1 (CPU 8 each), memory 3, 3, 1, transfers
    c(a)=0.5, c(u)=0.25; 2 accelerators of 5 bytes, a CPU. The heaviest path is a -> b.

    Path bound: a and b cannot share a call (6 bytes); a | b costs 2.5 + (0.5 + 2) = 5, and b's call
    either holds u (1 ms more) or receives it (0.25 more): 5.25. The optimum: a alone [0, 2.5], then
    {u, b} receiving a: 0.5 + 1 + 2 = 3.5, ends at 6 ({a, u} then b: 3.75 + 2.75 = 6.5).
    """
    nodes = [Node(1, "a", (2.0, 8.0), 3.0, False, None, 0.5), Node(2, "b", (2.0, 8.0), 3.0),
             Node(3, "u", (1.0, 8.0), 1.0, False, None, 0.25)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(3, 2)], 2, 1, 5)
    assert latency_path_bound(problem) == 5.25
    assert brute_force_latency(problem, max_calls=1).objective == 6.0


@pytest.mark.parametrize("m_u, bound, optimum", [(1.0, 6.0, 6.0), (2.5, 6.5, 10.5)])
def test_an_input_without_room_in_the_call_pays_its_transfer(m_u, bound, optimum):
    """a -> b and u -> b; accelerator times a=2, b=2, u=1 (CPU 8 each), memory a=3, b=3 and u as given,
    transfers c(a)=0.5, c(u)=1.5; 2 accelerators of 5 bytes, a CPU. The heaviest path is a -> b for
    every weighting tried (u is lighter than a in time and memory).

    a and b cannot share a call (6 bytes): a | b, 2.5 + (0.5 + 2) plus u's share of b's call. With
    u of 1 byte, u fits beside b (4 bytes) and adds min(1.5, 1) = 1: 6, the optimum ({u, b} after a).
    With u of 2.5 bytes, b's call has no room for it (5.5 bytes), so u is received: 1.5, and the
    bound is 6.5 (6 if u could still be in the call). The optimum is then 10.5: a and u alone on the
    accelerators, b on the CPU.
    """
    nodes = [Node(1, "a", (2.0, 8.0), 3.0, False, None, 0.5), Node(2, "b", (2.0, 8.0), 3.0),
             Node(3, "u", (1.0, 8.0), m_u, False, None, 1.5)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(3, 2)], 2, 1, 5)
    assert latency_path_bound(problem) == bound
    assert brute_force_latency(problem, max_calls=1).objective == optimum


def test_an_input_that_reaches_the_previous_segment_pays_its_transfer():
    """p -> a -> b, x -> a and x -> b; accelerator times p=2, x=0.25, a=2, b=2 (CPU 8 each), memory
    p=1, x=0.5, a=3, b=3, transfers c(p)=0.5, c(a)=0.5, c(x)=1.5; 2 accelerators of 5 bytes, a CPU.
    The heaviest path is p -> a -> b (x is lighter than p in time and memory).

    a and b cannot share a call (6 bytes), and a third segment would be a CPU node (8): the
    partition is p, a | b. The first segment holds {p, a} (4 bytes): 4, plus x's share min(1.5, 0.25)
    (x fits beside them), plus a's output 0.5: 4.75. In b's call x cannot be: x reaches a, which is
    outside that call, so a call with x and b would be left and re-entered. x is received (1.5) with
    a (0.5): 2 + 2 = 4, and the bound is 8.75 (7.5 with x's share at its time). The optimum: {p, x, a}
    sending a and x (2 + 0.25 + 2 + 0.5 + 1.5 = 6.25), then b receiving both (4): 10.25.
    """
    nodes = [Node(1, "p", (2.0, 8.0), 1.0, False, None, 0.5), Node(2, "x", (0.25, 8.0), 0.5, False, None, 1.5),
             Node(3, "a", (2.0, 8.0), 3.0, False, None, 0.5), Node(4, "b", (2.0, 8.0), 3.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 3), Edge(2, 3), Edge(3, 4), Edge(2, 4)], 2, 1, 5)
    assert latency_path_bound(problem) == 8.75
    assert brute_force_latency(problem, max_calls=1).objective == 10.25


def test_an_input_whose_colour_mate_reaches_the_previous_segment_pays_its_transfer():
    """a -> b -> c and w -> c, w of a's colour (a weight a and c share); accelerator times 1 (w 0),
    CPU times a=2, w=0, b=c=20, memory 2 (w 0), transfers c(a)=c(b)=1, c(w)=3; 2 accelerators of 4
    bytes and a CPU. The heaviest path is a -> b -> c.

    With one call per accelerator w goes wherever a goes, so a call from b or c holds no w: a, and
    with it w, reaches the node before such a call. Every partition with a segment holding c from b
    or c pays c(w) = 3: a on the CPU | b c: 2 + (1 + 3 + 2) = 8; a | b c: 2 + 6 = 8; a b | c:
    3 + 5 = 8 (a b c is 6 bytes). The bound is 8, and so is the optimum (a and w on the CPU, b and c
    in one call). Without colours w would be taken into c's call at its time 0: 5. With two calls
    per accelerator w may sit in another call of a's accelerator, and colours give nothing.
    """
    nodes = [Node(1, "a", (1.0, 2.0), 2.0, False, 7, 1.0), Node(2, "b", (1.0, 20.0), 2.0, False, None, 1.0),
             Node(3, "c", (1.0, 20.0), 2.0), Node(4, "w", (0.0, 0.0), 0.0, False, 7, 3.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3), Edge(4, 3)], 2, 1, 4)
    assert latency_path_bound(problem) == 8.0
    assert brute_force_latency(problem, max_calls=1).objective == 8.0
    assert latency_path_bound(problem, calls=2) == 5.0


def test_no_call_holds_a_node_whose_colour_mate_reaches_the_node_before_it():
    """Chain p -> a -> b with p and a of one colour; accelerator times 1, CPU 10, memory 2, transfers
    c(p)=0.25, c(a)=2; 2 accelerators of 4 bytes and a CPU.

    The cheapest split, p | a b (1.25 + 2.25 = 3.5), would put a in a call without p, which reaches
    the node before that call. So a's call starts at p: p a | b, 4 + 3 = 7 (p a b is 6 bytes; a CPU
    node costs 10), the optimum with one call per accelerator. With two calls (colours unused) the
    bound is 3.5 and the optimum still 7: a must share p's accelerator, and both calls count
    against its memory.
    """
    nodes = [Node(1, "p", (1.0, 10.0), 2.0, False, 3, 0.25), Node(2, "a", (1.0, 10.0), 2.0, False, 3, 2.0),
             Node(3, "b", (1.0, 10.0), 2.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 4)
    assert latency_path_bound(problem) == 7.0
    assert brute_force_latency(problem, max_calls=1).objective == 7.0
    assert latency_path_bound(problem, calls=2) == 3.5
    assert brute_force_latency(problem, max_calls=2).objective == 7.0


def test_no_call_holds_a_node_whose_colour_mate_comes_later_on_the_path():
    """Chain a -> b -> c with a and c of one colour; accelerator times 1, CPU times a=c=2, b=10,
    memory 1, transfers c(a)=c(b)=5; 2 accelerators of 2 bytes and a CPU.

    A call holding a holds c, and so b (a path that leaves a call does not come back): 3 bytes, too
    many. So a and c run on the CPU, and b either there (2 + 10 + 2 = 14) or in a call receiving a
    and sending b (2 + 11 + 2 = 15): the bound is 14, the optimum. Without the mate after the
    segment, a b | c on the CPU would give 7 + 2 = 9.
    """
    nodes = [Node(1, "a", (1.0, 2.0), 1.0, False, 9, 5.0), Node(2, "b", (1.0, 10.0), 1.0, False, None, 5.0),
             Node(3, "c", (1.0, 2.0), 1.0, False, 9)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3)], 2, 1, 2)
    assert latency_path_bound(problem) == 14.0
    assert brute_force_latency(problem, max_calls=1).objective == 14.0


@st.composite
def coloured_graphs(draw, max_nodes: int = 7):
    """Inference DAGs whose nodes fall into random colour classes (up to ``max_nodes`` nodes, 1–3
    accelerators, at most a CPU, memory bounds that often bind)."""
    n = draw(st.integers(2, max_nodes))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    edges = sorted(draw(st.sets(st.sampled_from(pairs), min_size=1, max_size=2 * n)))
    colours = draw(st.integers(1, n))
    times = st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0])
    nodes = [Node(i + 1, f"n{i}", (draw(times), draw(st.sampled_from([1.0, 4.0, 20.0]))),
                  float(draw(st.integers(0, 3))), False, draw(st.integers(0, colours - 1)), draw(times))
             for i in range(n)]
    return make_two_type_problem(nodes, [Edge(a + 1, b + 1) for a, b in edges], draw(st.integers(1, 3)),
                                 draw(st.integers(0, 1)), float(draw(st.sampled_from([3, 5, 8, 100]))))


@st.composite
def branched_chains(draw, max_nodes: int = 8):
    """A chain of 2–5 nodes with one or two branches that leave it at one node and join it at a
    later one through 0–2 nodes of their own (residual blocks and their shortcuts), some nodes
    coloured alike, memory bounds of 3–8 bytes on 1–3 accelerators, at most a CPU."""
    k = draw(st.integers(2, 5))
    edges = {(i, i + 1) for i in range(k - 1)}
    n = k
    for _ in range(draw(st.integers(1, 2))):
        start = draw(st.integers(0, k - 2))
        end = draw(st.integers(start + 1, k - 1))
        length = min(draw(st.integers(0, 2)), max_nodes - n)
        previous = start
        for _ in range(length):
            edges.add((previous, n))
            previous, n = n, n + 1
        edges.add((previous, end))
    colours = draw(st.integers(1, n + 2))
    times = st.sampled_from([0.25, 0.5, 1.0, 2.0])
    nodes = [Node(i + 1, f"n{i}", (draw(times), draw(st.sampled_from([1.0, 4.0, 20.0]))),
                  float(draw(st.integers(0, 3))), False,
                  draw(st.integers(0, colours - 1)) if draw(st.booleans()) else None,
                  draw(st.sampled_from([0.25, 1.0, 3.0, 5.0])))
             for i in range(n)]
    return make_two_type_problem(nodes, [Edge(a + 1, b + 1) for a, b in sorted(edges)], draw(st.integers(1, 3)),
                                 draw(st.integers(0, 1)), float(draw(st.sampled_from([3, 4, 5, 8]))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(branched_chains(), coloured_graphs()))
def test_never_above_the_optimum_with_colours_and_shortcuts(problem):
    truth = brute_force_latency(problem, max_calls=1)
    if truth.status is not Status.INFEASIBLE:
        assert latency_path_bound(problem) <= truth.objective + 1e-9 * max(1.0, truth.objective)


def test_an_input_held_in_the_call_brings_its_own_inputs():
    """Path q -> p -> a -> d with a branch q -> x -> d; accelerator times 1 (x 0.5), CPU 10, memory
    q=p=2, a=d=x=1, transfers c(q)=3, c(p)=c(a)=1, c(x)=4; 2 accelerators of 4 bytes and a CPU.

    q p | a d: the first call lasts 2 + c(p) + q's share min(c(q), p(x) + c(x)) = 6. The second holds
    a and d, receives p (1) and either receives x (4) or holds it: x's time 0.5 plus q's transfer 3,
    since q cannot be in that call: 2 + 1 + 3.5 = 6.5, and the bound is 12.5, the optimum (q p, then
    a x d). Taking x at its time alone would give 2 + 1 + 0.5 and a bound of 9.5. The other splits
    cost more: q | p a d has no room for x (4 + 3 + 3 + 4).
    """
    nodes = [Node(1, "q", (1.0, 10.0), 2.0, False, None, 3.0), Node(2, "p", (1.0, 10.0), 2.0, False, None, 1.0),
             Node(3, "a", (1.0, 10.0), 1.0, False, None, 1.0), Node(4, "d", (1.0, 10.0), 1.0),
             Node(5, "x", (0.5, 10.0), 1.0, False, None, 4.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(2, 3), Edge(3, 4), Edge(1, 5), Edge(5, 4)], 2, 1, 4)
    assert latency_path_bound(problem) == 12.5
    assert brute_force_latency(problem, max_calls=1).objective == 12.5


def test_a_held_branch_brings_the_transfer_from_where_it_leaves_the_path():
    """Path q -> p -> a -> d with a branch q -> y -> x -> d; accelerator times 1 (y, x 0.5), CPU 10,
    memory q=p=2, a=d=1, y=x=0.5, transfers c(q)=3, c(p)=c(a)=1, c(y)=c(x)=4; 2 accelerators of 4
    bytes and a CPU.

    q p | a d: the first call lasts 2 + c(p) + q's share min(3, 0.5 + min(4, 0.5 + 4)) = 6. The
    second receives p (1) and x (4) or holds x (0.5) with y received (4) or held (0.5) with q
    received (3): q's other successor p comes before the call, so only the branch can bring q in.
    That is 4 either way: 2 + 1 + 4 = 7, and the bound is 13, the optimum (q p, then a y x d).
    Stopping at y's time would give x a share of 1 and a bound of 10.
    """
    nodes = [Node(1, "q", (1.0, 10.0), 2.0, False, None, 3.0), Node(2, "p", (1.0, 10.0), 2.0, False, None, 1.0),
             Node(3, "a", (1.0, 10.0), 1.0, False, None, 1.0), Node(4, "d", (1.0, 10.0), 1.0),
             Node(5, "y", (0.5, 10.0), 0.5, False, None, 4.0), Node(6, "x", (0.5, 10.0), 0.5, False, None, 4.0)]
    edges = [Edge(1, 2), Edge(2, 3), Edge(3, 4), Edge(1, 5), Edge(5, 6), Edge(6, 4)]
    problem = make_two_type_problem(nodes, edges, 2, 1, 4)
    assert latency_path_bound(problem) == 13.0
    assert brute_force_latency(problem, max_calls=1).objective == 13.0


def test_a_call_holds_every_node_between_its_ends():
    """Diamond a -> {b, c} -> d; accelerator times a=1, b=3, c=2, d=1 (CPU 10 each), memory 1 each,
    transfers 0.5 (d none); one accelerator of 10 bytes and a CPU. The heaviest path is a -> b -> d.

    A call holding a and d holds c too (a path that leaves a call does not come back), so the
    segment a..d lasts 1 + 3 + 2 + 1 = 7, with no transfers in or out; any CPU node costs 10. The
    bound is 7, the optimum (everything in one call). Counting only the path's nodes and c as an
    input (min(0.5, 2)) would give 5.5.
    """
    nodes = [Node(1, "a", (1.0, 10.0), 1.0, False, None, 0.5), Node(2, "b", (3.0, 10.0), 1.0, False, None, 0.5),
             Node(3, "c", (2.0, 10.0), 1.0, False, None, 0.5), Node(4, "d", (1.0, 10.0), 1.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3), Edge(2, 4), Edge(3, 4)], 1, 1, 10)
    assert latency_path_bound(problem) == 7.0
    assert brute_force_latency(problem, max_calls=1).objective == 7.0


def test_an_output_off_the_path_pays_its_transfer_or_its_successor():
    """a -> b and a -> w (w a sink); accelerator times a=2, b=2, w=1 (CPU 8 each), memory 2 each,
    c(a)=0.5; one accelerator of 4 bytes and a CPU. The heaviest path is a -> b.

    The segment a..b (4 bytes) lasts 4, and a's output either leaves the call for w (0.5) or w is
    in it (1 ms more): 4.5; a CPU node costs 8. The bound is 4.5 (4 without the output's share).
    The optimum: a alone on the accelerator, 2.5, then b and w on the CPU: 10.5.
    """
    nodes = [Node(1, "a", (2.0, 8.0), 2.0, False, None, 0.5), Node(2, "b", (2.0, 8.0), 2.0),
             Node(3, "w", (1.0, 8.0), 2.0)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3)], 1, 1, 4)
    assert latency_path_bound(problem) == 4.5
    assert brute_force_latency(problem, max_calls=1).objective == 10.5


@pytest.mark.parametrize("c_w, p_w2, bound, optimum", [(0.25, 3.0, 7.75, 10.5), (5.0, 3.0, 9.0, 10.5),
                                                      (5.0, 0.5, 8.0, 8.0)])
def test_a_successor_held_in_the_call_sends_its_own_output_or_holds_its_successors(c_w, p_w2, bound, optimum):
    """a -> b, a -> w -> w2 (w2 a sink); accelerator times a=2, b=5, w=0.5 and w2 as given (CPU 20
    each), memory a=b=1, w=w2=0.1, c(a)=2 and c(w) as given; one accelerator of 10 bytes and a CPU.
    The heaviest path is a -> b for every weighting tried.

    The segment a..b lasts 7, plus a's output share: either w is outside the call (c(a) = 2) or it
    is in it, adding its time 0.5 and, in turn, either its output c(w) or w2's time:
    min(2, 0.5 + min(c(w), p(w2))). c(w) = 0.25, p(w2) = 3: 7.75 (7.5 counting w's time alone);
    c(w) = 5, p(w2) = 3: 9; c(w) = 5, p(w2) = 0.5: 8 (9 if w had to send its output). The optimum:
    all four nodes in one call, 7 + 0.5 + p(w2).
    """
    nodes = [Node(1, "a", (2.0, 20.0), 1.0, False, None, 2.0), Node(2, "b", (5.0, 20.0), 1.0),
             Node(3, "w", (0.5, 20.0), 0.1, False, None, c_w), Node(4, "w2", (p_w2, 20.0), 0.1)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 3), Edge(3, 4)], 1, 1, 10)
    assert latency_path_bound(problem) == bound
    assert brute_force_latency(problem, max_calls=1).objective == optimum


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=5, training=False, max_accelerators=2, max_cpus=1))
def test_never_above_the_optimum(problem):
    for calls in (1, 2):
        truth = brute_force_latency(problem, max_calls=calls)
        bound = latency_path_bound(problem, calls)
        if truth.status is Status.INFEASIBLE:
            continue
        assert truth.status is Status.OPTIMAL
        assert bound <= truth.objective + 1e-9 * max(1.0, truth.objective)


def test_the_bound_does_not_depend_on_how_the_instance_is_listed():
    """Six nodes, two accelerators of 4 bytes and a CPU. Which on-path predecessor an off-path node is
    counted through, and so the bound, followed the listing: 21 as listed here, 22 with the nodes
    listed in reverse. It is now computed on one listing of the graph whatever the file's, and
    stays below the optimum, 25 (brute force: n2, n4, n5 on an accelerator, the rest on the CPU)."""
    def n(i, acc, cpu, size):
        return {"id": i, "name": f"n{i}", "supportedOnFpga": 1, "fpgaLatency": acc, "cpuLatency": cpu,
                "isBackwardNode": 0, "size": size}

    edges = [(0, 1, 4), (1, 2, 2), (0, 3, 4), (2, 3, 2), (2, 4, 2), (0, 4, 4), (4, 5, 4), (1, 5, 2)]
    doc = {"maxSizePerFPGA": 4, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [n(0, 2, 2, 1), n(1, 3, 8, 2), n(2, 2, 4, 2), n(3, 1, 2, 1), n(4, 2, 4, 1), n(5, 1, 8, 1)],
           "edges": [{"sourceId": a, "destId": b, "cost": c} for a, b, c in edges]}
    listings = [doc, {**doc, "nodes": doc["nodes"][::-1]}, {**doc, "nodes": doc["nodes"][3:] + doc["nodes"][:3]},
                {**doc, "nodes": doc["nodes"][::-1], "edges": doc["edges"][::-1]}]
    assert [latency_path_bound(placement.load(listed)) for listed in listings] == [21.0] * 4
    assert brute_force_latency(placement.load(doc)).objective == 25.0


@pytest.mark.parametrize("c_c, bound", [(0.25, 9.25), (3.0, 10.0)])
def test_a_member_off_the_path_pays_its_transfer_or_its_successors(c_c, bound):
    """a -> b -> d, a -> c -> e -> d and c -> w (w a sink); accelerator times b=5, the others 1 (CPU 20
    each), memory b=3, the others 1, c(a)=c(b)=c(e)=0.5 and c(c) as given; one accelerator of 10 bytes
    and a CPU. The heaviest path is a -> b -> d for every weighting tried.

    The segment a..d holds the interval {a, b, c, e, d}: 9 ms, 7 bytes. c is off the path and feeds e (in the
    interval) and w (assigned to c, outside it): either w is in the call (1 ms more) or c's output
    leaves it (c(c)): 9 + min(c(c), 1), the bound (any CPU node costs 20). Before e joins, c's share
    is min(c(c), p(e) + p(w)). The optimum: all six nodes in one call, 10 (with w on the CPU:
    9 + c(c) + 20).
    """
    nodes = [Node(i, name, (p, 20.0), m, False, None, c)
             for i, name, p, m, c in [(1, "a", 1.0, 1.0, 0.5), (2, "b", 5.0, 3.0, 0.5), (3, "c", 1.0, 1.0, c_c),
                                      (4, "e", 1.0, 1.0, 0.5), (5, "d", 1.0, 1.0, 0.0), (6, "w", 1.0, 1.0, 0.0)]]
    edges = [Edge(1, 2), Edge(2, 5), Edge(1, 3), Edge(3, 4), Edge(4, 5), Edge(3, 6)]
    problem = make_two_type_problem(nodes, edges, 1, 1, 10)
    assert latency_path_bound(problem) == bound
    assert brute_force_latency(problem, max_calls=1).objective == 10.0


@pytest.mark.skipif(not HAVE_HIGHS, reason="OR-Tools' HiGHS is not installed (pip install 'placement[milp]')")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=10, training=False, max_accelerators=3, max_cpus=1))
def test_never_above_a_proven_optimum_on_larger_graphs(problem):
    """Graphs too large for the brute force, where segments' intervals hold nodes off the path: HiGHS
    proves the latency MILP's optimum without the path bound as a row (it only reports it)."""
    for calls in (1, 2):
        result = placement.solve(problem, objective="latency", method="milp", backend="highs", calls=calls,
                                 time_limit=30, warm_start=False)
        if result.status == "optimal":
            assert latency_path_bound(problem, calls) <= result.value + 1e-7 * max(1.0, result.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_the_optimum_on_chains(problem):
    """On a chain the path is the graph and the bound is the optimum with one call per accelerator."""
    truth = brute_force_latency(problem, max_calls=1)
    bound = latency_path_bound(problem)
    if truth.status is Status.INFEASIBLE:
        assert bound == math.inf
    else:
        assert bound == pytest.approx(truth.objective, rel=1e-12, abs=1e-12)


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_proves_bert24_latency():
    """BERT-24's heaviest path holds every layer; the MILP's row 14 meets the chain DP's plan (100.2185),
    so CP-SAT proves it at once (the critical path alone is 92.406, a gap of 7.8%)."""
    path = SHARED / "LayerGraphs" / "bert24_inference.json"
    if not path.exists():
        pytest.skip("../shared/tarnawski is not available")
    result = placement.solve(path, objective="latency", method="milp", backend="cp-sat", time_limit=60)
    assert result.status == "optimal"
    assert result.value == pytest.approx(100.2185, abs=1e-9)
    assert result.bound == result.value
    assert result.stats["path_bound"] == pytest.approx(100.2185, rel=1e-6)
    assert latency_lower_bound(read_instance(path)) == pytest.approx(92.406, abs=1e-9)


def long_chain(n: int, memory: float) -> Instance:
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in range(n)]
    return make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(n - 1)], 2, 1, memory)


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_proves_the_resnet50_layer_latency():
    """ResNet-50's layer graph (14 accelerators; the transfers sum to 50 times the compute): the path
    bound charges each call on the heaviest path for the shortcut branches that join it, and meets
    the chain DP's plan, 1156.88128125. The bound on the instance's own times proves it, though
    CP-SAT's times are rounded down. The times are decimals, whose floating-point sums are not
    exact, so the bound keeps a rounding allowance below the plan (about 4e-10 here)."""
    path = SHARED / "LayerGraphs" / "resnet50_inference.json"
    if not path.exists():
        pytest.skip("../shared/tarnawski is not available")
    problem = read_instance(path)
    bound = latency_path_bound(problem)
    assert bound <= 1156.88128125
    assert bound == pytest.approx(1156.88128125, rel=1e-12)
    result = placement.solve(problem, objective="latency", method="milp", backend="cp-sat", time_limit=120)
    assert result.status == "optimal"
    assert result.value == 1156.88128125


def test_the_run_dp_stops_at_its_budget():
    """50 units whose runs memory does not bound: runs from every start reach the end, 50 + 49 + ...
    joins for the accelerator runs alone, far more than 100. With its bounds, on one accelerator, the
    DP tries the run from the first unit to the end (50 joins) and the CPU runs from it (50 more),
    past a budget of 60, and leaves out every other start (each pays a transfer more than the single
    call)."""
    problem = long_chain(50, math.inf)
    succ = problem.successors()
    pred = [[i - 1] if i else [] for i in range(50)]
    args = ([[i] for i in range(50)], succ, pred, [0.5] * 50, [1.0] * 50, [10.0] * 50, [1.0] * 50, math.inf, 2)
    with pytest.raises(LimitExceededError, match="^the run DP would join units to runs more than 100 times "
                                                 r"\(long runs: memory does not bound them\)$"):
        least_run_sum(*args, budget=Budget(100), bounded=False)
    with pytest.raises(LimitExceededError, match="^the run DP would join units to runs more than 60 times "):
        least_run_sum(*args, budget=Budget(60), bounded=True)
    # within the default budget: 50 ms on one accelerator, one call (its output goes nowhere)
    assert least_run_sum(*args).total == 50.0
    budget = Budget()
    assert least_run_sum(*args, budget=budget, bounded=True).total == 50.0
    assert budget.joins - budget.left == 100


def test_the_budget_counts_in_edges():
    """A total order of 400 nodes (every i -> j, i < j) with no memory bound: the heaviest path visits
    every node, and a segment from node s scans each later node x with its x in-edges, about 80,000
    for the first start and 400³/3 ≈ 21 million in all, past the budget of 2 million: no bound (0;
    the critical path, 400, remains). Counting nodes alone (80,000 in all) would let the scans run
    over every edge of every start."""
    nodes = [Node(i, f"n{i}", (1.0, 10.0), 1.0, False, None, 0.5) for i in range(400)]
    edges = [Edge(i, j) for i in range(400) for j in range(i + 1, 400)]
    problem = make_two_type_problem(nodes, edges, 2, 1, math.inf)
    assert latency_path_bound(problem) == 0.0
    assert latency_lower_bound(problem) == 400.0


def test_no_path_bound_past_the_budget_but_a_chain_plan():
    """2,100 units and no memory bound: about 2.2 million joins for the path bound's accelerator runs,
    past its default budget of 2 million, so it gives nothing (0, still a bound). The chain DP once
    stopped at the same budget with no plan; its bounds now leave out every run but the one call that
    holds the whole chain (2,100 ms, its output goes nowhere), the optimum."""
    problem = long_chain(2100, math.inf)
    assert latency_path_bound(problem) == 0.0
    found = solve(problem, "latency-chain")
    assert (found.status, found.objective, found.message) == (Status.FEASIBLE, 2100.0, "")
    assert found.plan == Plan((DeviceAssignment(ACCELERATOR, tuple(range(2100))),))
    # with a memory bound of 100 nodes the runs stay short: one run per accelerator of 100 units, the
    # rest on the CPU: the bound is the DP's optimum on this chain
    bounded = long_chain(2100, 100)
    assert latency_path_bound(bounded) == solve(bounded, "latency-chain").objective


def test_transfers_taken_out_of_a_call_leave_no_residue():
    """a -> d, a -> b, d -> b, and c alone; accelerator times a = d = 0, b = c = 1e-308, transfers
    c(a) = 4.18e95, c(d) = 1.31e96; 2 accelerators, no CPU. One call {a, d, b} sends nothing and takes
    1e-308, c runs alone on the other accelerator: the optimum is 1e-308. The path a -> b holds d in
    its interval, so its call first pays a's and d's outputs and then takes them out again; in
    floating point that left a residue of 2.4e80, which was the bound, and CP-SAT, HiGHS and SCIP
    "proved" the plan that runs b and c one after another (2e-308) optimal."""
    nodes = [Node(1, "a", (0.0, 0.0), 0.0, False, None, 4.182788516489576e+95),
             Node(2, "b", (1e-308, 0.0), 0.0), Node(3, "c", (1e-308, 0.0), 0.0),
             Node(4, "d", (0.0, 0.0), 0.0, False, None, 1.306465530953013e+96)]
    problem = make_two_type_problem(nodes, [Edge(1, 2), Edge(1, 4), Edge(4, 2)], 2, 0, 1e300)
    assert brute_force_latency(problem, max_calls=1).objective == 1e-308
    assert latency_path_bound(problem) <= 1e-308
    result = placement.solve(problem, objective="latency", method="milp", warm_start=False, time_limit=30)
    assert result.status == "optimal" and result.value == 1e-308 or result.bound <= 1e-308
