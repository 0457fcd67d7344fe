"""The floating-point MILP backends on times of 1e-9 and of 1e9 units: every answer against brute force.

Their tolerances are absolute (1e-6 and so on), so a model in the instance's own units let them call
plans of 1e-8 equal and prove a plan 58% above the optimum "optimal" (CBC through PuLP, SCIP), or
lose plans in big-M rows of 1e10 (HiGHS, SCIP on latency). The model is now scaled by a power of
two to a largest load near 2^10 (:func:`placement.solvers.milp.data.float_scaling`). Instances found
by a random search against brute force; the optima come from :mod:`placement.testing`'s brute force.
"""

from __future__ import annotations

import pytest

import placement
from placement.solvers.milp.backends import backend_availability
from placement.testing.bruteforce import brute_force
from placement.testing.bruteforce_latency import brute_force_latency

FLOAT_BACKENDS = ("cbc", "scip", "highs", "pulp")
AVAILABLE = {name for name, ok, _ in backend_availability() if ok}


def node(i, acc, cpu, size, colour=None, backward=0, on_acc=1):
    data = {"id": i, "name": f"v{i}", "supportedOnFpga": on_acc, "fpgaLatency": acc, "cpuLatency": cpu,
            "isBackwardNode": backward, "size": size}
    if colour is not None:
        data["colorClass"] = colour
    return data


def edges(*triples):
    return [{"sourceId": a, "destId": b, "cost": c} for a, b, c in triples]


# none, stages=2, times of a few 1e-9: PuLP and SCIP claimed optimal at 4.1e-8 and 5.8e-8
TINY = {"maxSizePerFPGA": 4, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [node(25, 5e-9, 6e-9, 0, on_acc=0), node(22, 1e-9, 9e-9, 3), node(13, 1e-8, 2e-9, 1),
                  node(28, 9e-9, 3e-9, 4), node(10, 9e-9, 2.4e-8, 0), node(19, 1e-9, 5e-9, 4),
                  node(16, 9e-9, 3e-9, 2)],
        "edges": edges((22, 19, 7e-9), (13, 28, 8e-9), (13, 19, 8e-9), (13, 16, 8e-9), (28, 10, 2e-9),
                       (28, 19, 2e-9), (10, 19, 7e-9), (19, 16, 2e-9))}

# latency, times of 1e9: SCIP claimed optimal at 6.4e10, HiGHS at 3.2e10
HUGE = {"maxSizePerFPGA": 5, "maxFPGAs": 3, "maxCPUs": 2,
        "nodes": [node(13, 7e9, 7e9, 4, colour=7), node(19, 2e9, 2.1e10, 1), node(22, 5e9, 2.1e10, 1),
                  node(16, 2e9, 3e9, 4), node(25, 3e9, 1.8e10, 4), node(10, 1e9, 7e9, 0, colour=7)],
        "edges": edges((13, 19, 0), (13, 22, 0), (13, 16, 0), (13, 10, 0), (19, 22, 7e9), (19, 16, 7e9),
                       (19, 25, 7e9), (19, 10, 7e9), (22, 16, 0), (22, 10, 0), (16, 25, 5e9), (16, 10, 5e9),
                       (25, 10, 7e9))}


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
def test_tiny_times_are_solved_to_the_brute_force_optimum(backend):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    problem = placement.load(TINY)
    optimum = brute_force(problem, "none", stages=2).objective
    result = placement.solve(problem, method="milp", backend=backend, contiguity="none", stages=2, time_limit=30)
    assert optimum == pytest.approx(2.6e-8, rel=1e-12)
    assert result.status == "optimal" and result.value == pytest.approx(optimum, rel=1e-9)
    assert result.bound <= optimum * (1 + 1e-9)


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
def test_huge_times_are_solved_to_the_brute_force_optimum(backend):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    problem = placement.load(HUGE)
    optimum = brute_force_latency(problem, 1).objective
    result = placement.solve(problem, method="milp", backend=backend, objective="latency", time_limit=30)
    assert optimum == pytest.approx(4.9e10, rel=1e-12)
    assert result.status == "optimal" and result.value == pytest.approx(optimum, rel=1e-9)
    assert result.bound <= optimum * (1 + 1e-9)


def test_times_too_small_beside_the_largest_are_noted_as_zero():
    # node a takes 1e90 on an accelerator, b 1e-300: scaled so that the largest load is near 2^10,
    # b's time falls below a float's range and is taken as 0; the note says so, not "rounded down
    # to multiples of 2^308" (an integer backend's wording)
    from placement.solvers.milp.data import float_scaling, float_time, scaling_note

    scaling = float_scaling([1e90, 1e-300], 1e90)
    assert scaling.scale == 2.0 ** (10 - 299) and not scaling.exact and not scaling.integer
    assert float_time(1e-300, scaling) == 0.0 and float_time(1e90, scaling) == 1e90 * 2.0 ** -289
    assert scaling_note(scaling, "scip") == ("times below 2.21e-221 taken as 0 for scip (beside the largest load "
                                             "they are below a float's range)")
    assert scaling_note(float_scaling([1.0, 3.5], 4.5), "scip") is None


# sets/none, sizes 1, 1, 1e-9, 3.3 under accelerators of 3.3, a CPU that takes every node in no time:
# the optimum is 0 (everything on the CPU). Scaled by 2^8, the 1e-9 was a coefficient of 2.6e-7 beside
# 845, and CBC's preprocessing cut the optimum off: it "proved" 1 optimal.
TINY_SIZE = {"maxSizePerFPGA": 3.3, "maxFPGAs": 2, "maxCPUs": 1,
             "nodes": [node(6, 1, 0, 1), node(1, 1, 0, 1), node(2, 1, 0, 1e-9), node(3, 1, 0, 3.3)],
             "edges": []}


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
@pytest.mark.parametrize("contiguity", ["sets", "none"])
def test_sizes_too_small_for_the_tolerances_are_left_out_of_the_memory_rows(backend, contiguity):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    problem = placement.load(TINY_SIZE)
    assert brute_force(problem, contiguity).objective == 0.0
    result = placement.solve(problem, method="milp", backend=backend, contiguity=contiguity, warm_start=False,
                             time_limit=30)
    assert result.status == "optimal" and result.value == 0.0


def test_a_size_below_the_resolution_is_0_in_the_rows():
    from placement.solvers.milp.data import FLOAT_MEMORY_RESOLUTION, scale_memory

    memory = scale_memory([1.0, 1e-9, 3.3], [3.3, float("inf")], integer=False)
    # the bound 3.3 times 2^8 is in [2^9, 2^10); 1e-9 · 2^8 = 2.6e-7 is below 2^-10
    assert memory.bounds == (3.3 * 256, float("inf")) and 1e-9 * 256 < FLOAT_MEMORY_RESOLUTION
    assert memory.sizes == (256.0, 0.0, 3.3 * 256)
    # ... and the data then step by 1e-9 beside a bound of 3.3, finer than the rows decide: not exact
    assert not memory.exact


# latency, a -> b with a transfer of 2.2e-11 and no times on the accelerator: the optimum is 0 (both on
# the accelerator in one call). PuLP's CBC wrote its incumbent as 0 beside a bound of 1.1e-8 model
# units and the plan that sends a's output to the CPU (2.2e-11) was called optimal.
TINY_TRANSFER = {"maxSizePerFPGA": 1e300, "maxFPGAs": 1, "maxCPUs": 1,
                 "nodes": [node(6, 0, 1, 0), node(1, 0, 0, 0)], "edges": edges((6, 1, 2.1771966025941464e-11))}


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
def test_a_bound_below_one_model_unit_proves_nothing(backend):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    problem = placement.load(TINY_TRANSFER)
    assert brute_force_latency(problem, 1).objective == 0.0
    result = placement.solve(problem, method="milp", backend=backend, objective="latency", warm_start=False,
                             time_limit=30)
    assert result.bound == 0.0
    assert result.status == "optimal" and result.value == 0.0 or result.status == "feasible"


# throughput-gpipe, backward split with W at home: n4 runs only on a CPU (1), n1 takes 949.422 on an
# accelerator or 1 on a CPU, and the class {n2, n7} (forward 1, backward 1) holds 3.3 + 1e-9 bytes,
# more than an accelerator's 3.3, so it runs on a CPU too. Two CPUs: {n4, n1} (forward 2) and
# {n2, n7} (forward 1, backward 1) give 2 + 1 = 3; one CPU alone takes forward 3 and backward 1, and
# n1 on the accelerator alone takes 949.422, so 3 is the optimum. HiGHS's presolve (its probing) cut
# it off and HiGHS proved 950.422 optimal.
PRESOLVED = {"maxSizePerFPGA": 3.3, "maxFPGAs": 2, "maxCPUs": 2,
             "nodes": [node(4, 1.0, 1.0, 0.3, colour=4, on_acc=0), node(2, 1.0, 1.0, 1e-9, colour=2),
                       node(1, 949.422, 1.0, 0.1, colour=1), node(7, 1.0, 1.0, 3.3, colour=2, backward=1)],
             "edges": edges((4, 1, 0.0))}
# The same, with every layer 1 and a CPU-only layer n3 of 454.258 besides: n3 alone on one CPU
# (forward 454.258), {n4, n2, n7} on the other (forward 2, backward 1), n1 on an accelerator: 454.258 + 1
# = 455.258, the optimum (n3 takes a CPU, and the class a CPU too: backward 1 is unavoidable). With
# probing off, HiGHS's presolve still cut it off and HiGHS proved 456.258.
PRESOLVED_TOO = {**PRESOLVED, "nodes": [node(4, 1.0, 1.0, 0.3, colour=4, on_acc=0), node(2, 1.0, 1.0, 1e-9, colour=2),
                                        node(1, 1.0, 1.0, 0.1, colour=1), node(3, 1.0, 454.258, 0.0, on_acc=0),
                                        node(7, 1.0, 1.0, 3.3, colour=2, backward=1)],
                 "edges": edges((4, 1, 0.0), (4, 2, 0.0))}


@pytest.mark.parametrize("backend", ("cp-sat",) + FLOAT_BACKENDS)
@pytest.mark.parametrize("instance, optimum", [(PRESOLVED, 3.0), (PRESOLVED_TOO, 455.258)])
def test_split_models_that_highs_presolve_got_wrong(backend, instance, optimum):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    result = placement.solve(placement.load(instance), objective="throughput-gpipe", method="milp", backend=backend,
                             backward="split", w_placement="home", warm_start=False, time_limit=30)
    assert result.value == pytest.approx(optimum, rel=1e-12)
    # the class's 3.3 + 1e-9 against the bound 3.3 is a step a floating-point backend's rows cannot tell
    # apart: it finds the optimum but proves nothing; CP-SAT proves it
    assert result.status == ("optimal" if backend == "cp-sat" else "feasible")
    assert result.bound <= optimum


# a → b → c; accelerator times 1, 1, 2 (two accelerators of memory 1; every node takes 0.6, so one node
# each), CPU times 10^12, 2, 10^12 (one CPU); a sends 1, b sends 0.5. a and c need the accelerators, one
# each, so b runs on the CPU: a 1 + send 1 = 2, b 2, c 2 + receive 0.5 = 2.5, the optimum in every class
# (brute force below). Scaled so that the largest load (10^12) is near 2^10, the plan of 2.5 was 1.2e-9 model
# units, below the floating-point solvers' tolerances: every one stopped at the simple bound, 2.0.
HUGE_CPU = {"maxSizePerFPGA": 1, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [node(1, 1.0, 1e12, 0.6), node(2, 1.0, 2.0, 0.6), node(3, 2.0, 1e12, 0.6)],
            "edges": edges((1, 2, 1.0), (2, 3, 0.5))}


@pytest.mark.parametrize("backend", FLOAT_BACKENDS)
@pytest.mark.parametrize("contiguity", ["none", "sets"])
def test_times_capped_at_the_start_let_huge_times_beside_small_ones_prove(backend, contiguity):
    if backend not in AVAILABLE:
        pytest.skip(f"{backend} is not available here")
    problem = placement.load(HUGE_CPU)
    assert brute_force(problem, contiguity).objective == 2.5
    result = placement.solve(problem, method="milp", backend=backend, contiguity=contiguity, time_limit=30)
    assert (result.status, result.value, result.bound) == ("optimal", 2.5, 2.5), result.message
