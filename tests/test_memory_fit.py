"""Memory bounds are decided exactly on the sizes as written: by the evaluator, and by the DP, whose
block memory is a difference of prefix sums."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import placement
from placement.problem.memory_fit import as_written, decimal_unit, fits
from placement.solvers.milp.backends import backend_availability

HAVE_CPSAT = any(name == "cp-sat" and ok for name, ok, _ in backend_availability())


@pytest.mark.parametrize("sizes,bound,expected", [
    ([0.1, 0.2], 0.3, True),                   # 0.30000000000000004 in floating point
    ([0.1, 0.2], 0.2, False),
    ([0.2], 0.2, True),
    ([0.7, 1e-9, 0.1], 0.8000000009999999, False),   # the rounded sum equals the bound; 0.800000001 does not fit
    ([0.7, 1e-9, 0.1], 0.800000001, True),
    ([1e15, 2.5e14], 1.25e15, True),
    ([3, 4], float("inf"), True),
    ([], 0.0, True),
])
def test_fits_decides_on_the_sizes_as_written(sizes, bound, expected):
    assert fits(sizes, bound) is expected


def test_the_decimal_unit_makes_every_size_an_integer():
    assert decimal_unit([0.1, 0.2, 3.3], 3.6) == 10.0
    assert decimal_unit([0.5, 0.25], 0.75) == 4.0
    assert decimal_unit([60432384.0, 2147483648.0], 2.2e9) == 2.0 ** -13   # the smallest: both are multiples of 2^13
    assert decimal_unit([1 / 3], 1.0) is None              # no power of ten or two up to 10^12 or 2^40
    assert decimal_unit([0.1], 2.0 ** 53) is None           # its total would pass 2^53
    assert decimal_unit([0.375, 0.5], 0.875) == 8.0         # 3/8 is 0.375 as written, too


def test_a_power_of_two_unit_is_taken_only_where_the_values_are_as_written():
    """0.1 + 0.2 and 0.2 + 0.4 computed in floating point are whole numbers of 2^-52 (1351079888211149 and
    2702159776422298, which sum to 0.9000000000000001's 4053239664633447), but as written 0.30000000000000004
    and 0.6000000000000001 sum to 0.90000000000000014, over that bound: in that unit sums are not the sums as
    written, and there is no unit (10^17 would take the total past 2^53)."""
    values = [0.1 + 0.2, 0.2 + 0.4, 0.9000000000000001]
    assert [v * 2.0 ** 52 for v in values] == [1351079888211149.0, 2702159776422298.0, 4053239664633447.0]
    assert not fits(values[:2], values[2])
    assert decimal_unit(values, sum(values)) is None


def test_a_power_of_ten_unit_is_taken_only_where_the_values_times_it_are_as_written():
    """a = 8.457479737107438e-08, b = 2e-23 and c = 1e-23 (16 to 23 decimals) on an accelerator of
    8.45747973710744e-08 = a + b as written, a CPU beside it; a and b take 1 on the accelerator and 10 on the
    CPU, c 1 on either. a times 10.0 ** 23 is 8457479737107439, one more than as written: in that unit a and b
    filled more than the bound, and the DP and CP-SAT both proved the plan with a or b on the CPU, 10, optimal.
    The optimum is a and b on the accelerator and c on the CPU: 2."""
    a, b, c, bound = 8.457479737107438e-08, 2e-23, 1e-23, 8.45747973710744e-08
    assert a * 10.0 ** 23 == 8457479737107439.0 and as_written(a) * 10 ** 23 == 8457479737107438
    assert fits([a, b], bound) and decimal_unit([a, b, c, bound], a + b + c) is None
    doc = {"maxSizePerFPGA": bound, "maxFPGAs": 1, "maxCPUs": 1, "edges": [],
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": cpu, "size": size}
                     for i, (size, cpu) in enumerate([(a, 10), (b, 10), (c, 1)])]}
    for method in ("dp", "milp", "auto"):
        result = placement.solve(doc, method=method)
        assert (result.status, result.value, result.bound) == ("optimal", 2.0, 2.0), method
        assert sorted(stage.nodes for stage in result.plan) == [(0, 1), (2,)]


def two_nodes(size_1: float, size_2: float, memory: float, cpus: int = 1) -> dict:
    return {"maxSizePerFPGA": memory, "maxFPGAs": 2, "maxCPUs": cpus,
            "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "isBackwardNode": 0,
                       "size": m} for i, m in ((1, size_1), (2, size_2))],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0}]}


@pytest.mark.parametrize("instance", [two_nodes(0.1, 0.2, 0.2), two_nodes(0.1, 0.2, 0.2, cpus=0),
                                      two_nodes(1.1, 3.3, 3.3)])
@pytest.mark.parametrize("method", ["auto", "dp", "milp"])
def test_a_block_that_fills_its_bound_exactly_is_used(instance, method):
    # 1 -> 2, 1 ms each on an accelerator, no transfer cost; node 2 alone fills an accelerator's memory:
    # one node per accelerator, max-load 1. The DP found (0.1 + 0.2) - 0.1 above 0.2 and put node 2 on
    # the CPU (10), or, without a CPU, called the instance infeasible
    result = placement.solve(instance, method=method)
    assert (result.status, result.value) == ("optimal", 1.0)


def thirds(tiny: bool = False) -> dict:
    """Three nodes of a third each (1 -> 2 -> 3), 2 accelerators of memory 0.5 and a CPU ten times slower; with
    ``tiny``, a fourth node of size 1.2345678901234567e-40 and no time, with no edge."""
    instance = two_nodes(1 / 3, 1 / 3, 0.5)
    instance["nodes"].append(dict(instance["nodes"][1], id=3))
    instance["edges"].append({"sourceId": 2, "destId": 3, "cost": 0})
    if tiny:
        instance["nodes"].append(dict(instance["nodes"][1], id=4, fpgaLatency=0, cpuLatency=0,
                                      size=1.2345678901234567e-40))
    return instance


def test_without_an_exact_unit_below_2_53_the_dp_decides_memory_as_written():
    # three nodes of a third each: as written, 0.3333333333333333 is a whole number of 10^-16, but the three
    # make 10^16 of it, past 2^53, and no power of two makes them whole either. Two do not fit together under
    # 0.5, so each of the 2 accelerators holds one and the third runs on the CPU: 10. The DP holds each size
    # and bound as two whole parts, hi · 2^shift + lo, whose sums are exact, and proves 10 in one run
    result = placement.solve(thirds(), method="dp")
    assert (result.status, result.value, result.bound) == ("optimal", 10.0, 10.0)
    assert "relaxed_memory_value" not in result.stats


def test_where_even_two_parts_overflow_the_dp_proves_by_a_run_that_admits_every_fit():
    # the instance above with a node of size 1.2345678901234567e-40 and no time beside it (it fits anywhere;
    # the optimum stays 10): the sizes need a unit of 10^-56, 10^55 of which pass what two parts hold. The
    # DP's rounded checks (sizes up, bounds down) find 10 but prove nothing (the simple bound, blind to memory,
    # is 3 nodes of time 1 over 2 accelerators and a CPU ten times slower, 3/2.1 = 10/7); its run on memory
    # rounded the other way admits every block that fits, so its optimum, 10, bounds, and its plan fits
    result = placement.solve(thirds(tiny=True), method="dp")
    assert (result.status, result.value, result.bound) == ("optimal", 10.0, 10.0)
    assert result.stats["relaxed_memory_value"] == 10.0


def test_memory_that_fills_its_bound_exactly_without_an_exact_unit():
    # 1 -> 2 on one accelerator of memory 0.3 and a CPU; node 1 (size 0.3) fills the accelerator; node
    # 2's size, 0.09999999999999999, leaves no exact unit. Both on the accelerator do not fit; node 1
    # there and node 2 on the CPU (100) is the optimum 1 with 2 accelerators. The rounded checks (bound
    # a little below 0.3) put node 1 on the CPU: 100, feasible with a gap of 99%.
    doc = {"maxSizePerFPGA": 0.3, "maxFPGAs": 2, "maxCPUs": 1, "edges": [{"sourceId": 1, "destId": 2, "cost": 0}],
           "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 100, "size": 0.3},
                     {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 100,
                      "size": 0.09999999999999999}]}
    for method in ("dp", "auto"):
        result = placement.solve(doc, method=method)
        assert (result.method, result.status, result.value, result.bound) == ("dp", "optimal", 1.0, 1.0)


def lenient_pair() -> dict:
    return {"maxSizePerFPGA": 1.0, "maxFPGAs": 1, "maxCPUs": 1, "edges": [{"sourceId": 1, "destId": 2, "cost": 0}],
            "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 100, "size": 1.0},
                      {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 0.5, "cpuLatency": 2, "size": 1.23456789e-40}]}


def _run_readme_block(marker: str) -> None:
    """Run the README's Python block that holds ``marker``, as written."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if marker in b]
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


def test_the_readme_example_of_a_bound_filled_without_an_exact_unit_runs_as_written(capsys):
    _run_readme_block("0.09999999999999999")
    assert capsys.readouterr().out == "optimal 1.0 [(1,), (2,)]\n"


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_readme_example_of_sizes_made_in_floating_point_runs_as_written(capsys):
    """0.30000000000000004 and 0.7 exceed 1.0 as written, and 0.7 and 0.6 do: {0, 2} and {1}, max(4, 1) = 4."""
    _run_readme_block('"size": 0.1 + 0.2')
    assert capsys.readouterr().out == "optimal 4.0 [(0, 2), (1,)]\n"


def test_a_run_that_admits_every_fit_bounds_where_its_plan_does_not_fit():
    # 1 -> 2 on one accelerator of memory 1 and a CPU; sizes 1 and 1.23456789e-40 (a unit of 10^-48, 10^48
    # of which not even the DP's two parts hold), so both together exceed the bound by 1.2e-40 of it.
    # Accelerator times 1 and 0.5, CPU times 100 and 2: both on the accelerator (1.5) do not fit; node 1
    # there and node 2 on the CPU is the optimum, 2. The rounded checks refuse node 1 alone (bound a little
    # below 1): node 1 on the CPU, 100. The run that admits every fit reaches 1.5 with the plan that does not
    # fit: a bound, not a plan. ``auto`` then asks the MILP, which proves 2 (CP-SAT's rows, rounded down from
    # the exact values times 2^58, admit the pair too; that plan is cut off and the model solved again).
    doc = lenient_pair()
    result = placement.solve(doc, method="dp")
    assert (result.status, result.value, result.bound) == ("feasible", 100.0, 1.5)
    assert result.message.endswith("on memory rounded to admit every fit it reaches 1.5, with a plan that does not "
                                   "fit")
    if HAVE_CPSAT:
        result = placement.solve(doc)
        assert (result.method, result.status, result.value, result.bound) == ("milp", "optimal", 2.0, 2.0)
        assert result.message.startswith("the MILP ran instead (method 'auto'): the DP proves no optimum (")


def test_auto_keeps_the_dp_s_plan_where_the_milp_finds_none_better(monkeypatch):
    """The instance above with the MILP stubbed to stop at a worse plan (150) with a bound of 1.8: the
    DP's plan (100) stays, with the larger of the two bounds, and the note says the MILP ran."""
    from placement import solving
    from placement.plan import Plan
    from placement.solution import Solution, Status

    worse = Solution(Status.FEASIBLE, Plan(()), 150.0, 1.8, "milp", message="stubbed")
    monkeypatch.setattr(solving, "_milp_instead", lambda *args: worse)
    result = placement.solve(lenient_pair())
    assert (result.method, result.status, result.value, result.bound) == ("dp", "feasible", 100.0, 1.8)
    assert result.message.endswith("; the MILP ran too (method 'auto') and found no better plan (feasible, bound "
                                   "1.8)")

def coloured_pair(chain: bool = False) -> dict:
    """A colour class of sizes 0.1 and 0.2 on one accelerator of memory 0.3 and one CPU: the class fits
    (0.1 + 0.2 = 0.3 on the numbers as written), so both go on the accelerator, load 1 + 1 = 2 (the
    edge stays inside), where the CPU would take 10 + 10. With ``chain``, a node of size 0.1 sits between
    the two (0 → 1 → 2, no transfer costs, CPU time 1): under ``none`` the accelerator takes the class
    (2, memory 0.3), the CPU the middle node (1): optimum 2."""
    nodes = [{"id": 0, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 0.1, "colorClass": 5},
             {"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 0.2, "colorClass": 5}]
    edges = [{"sourceId": 0, "destId": 1, "cost": 1}]
    if chain:
        nodes = [nodes[0], {"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": 0.1},
                 {**nodes[1], "id": 2}]
        edges = [{"sourceId": 0, "destId": 1, "cost": 0}, {"sourceId": 1, "destId": 2, "cost": 0}]
    return {"maxSizePerFPGA": 0.3, "maxFPGAs": 1, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def test_a_colour_class_fits_on_its_sizes_as_written():
    """The instance's lower bound summed the class in floating point (0.30000000000000004 > 0.3), put it
    on the CPU only, and gave 20: every MILP backend then proved 20 'optimal' (a plan meeting that
    bound), and PuLP crashed on the DP's warm start, which its model forbade."""
    from placement.problem.bounds import throughput_lower_bound
    from placement.solvers.milp.backends import backend_availability

    problem = placement.load(coloured_pair())
    # (weighted: both nodes switch at λ = 10/11, 2 · 10/11 = 20/11)
    assert throughput_lower_bound(problem) == {"class": 2.0, "average": 1.0, "weighted": pytest.approx(20 / 11),
                                               "bound": 2.0}
    backends = [name for name, ok, _ in backend_availability() if ok]
    for backend in backends:
        for contiguity in ("stages", "none"):
            for warm_start in (False, True):
                result = placement.solve(problem, method="milp", backend=backend, contiguity=contiguity,
                                         warm_start=warm_start, time_limit=30)
                assert (result.status, result.value) == ("optimal", 2.0), (backend, contiguity, result.message)
    chain = placement.load(coloured_pair(chain=True))
    for backend in backends:
        result = placement.solve(chain, method="milp", backend=backend, contiguity="none", time_limit=30)
        assert (result.status, result.value) == ("optimal", 2.0), (backend, result.message)


def test_decimal_sum():
    from placement.problem.memory_fit import decimal_sum

    assert decimal_sum([0.1, 0.2]) == 0.3 and 0.1 + 0.2 != 0.3
    assert decimal_sum([2.0 ** 52, 1.0, 1.0]) == 2.0 ** 52 + 2   # integers: exact
    assert decimal_sum([]) == 0.0


def test_a_bound_the_rounded_total_meets_still_binds():
    """Sizes 0.1 and 0.7 against accelerators of 0.7999999999999999 (the floating-point sum 0.7 + 0.1):
    as written they need 0.8, so 1 -> 2 (transfer 5) takes both accelerators, 1 + 5 each: optimum 6.
    The bound was judged never to bind from the rounded total, so every method put both nodes on one
    accelerator (2), which the evaluator refused: no plan at all. The DP sums them in 10^-16 (the bound's
    shortest decimal form has 16 digits after the point; the total, 8·10^15 of them, stays below 2^53):
    exact, it proves 6; the MILP and the brute force find 6 too, and the latency MILP a plan."""
    from placement.testing.bruteforce import brute_force

    instance = two_nodes(0.1, 0.7, 0.7999999999999999, cpus=2)
    instance["edges"][0]["cost"] = 5
    problem = placement.load(instance)
    assert brute_force(problem).objective == 6.0
    dp = placement.solve(problem, method="dp")
    assert (dp.status, dp.value, [s.nodes for s in dp.plan]) == ("optimal", 6.0, [(1,), (2,)])
    milp = placement.solve(problem, method="milp", time_limit=10)
    assert milp.value == 6.0 and milp.status in ("feasible", "optimal")
    assert placement.solve(problem, method="milp", contiguity="none", time_limit=10).value == 6.0
    # latency: 1 on one accelerator (1, then 5 out), 2 on the other (5 in, then 1): 12; with a CPU, 16
    latency = placement.solve(problem, method="milp", objective="latency", time_limit=10)
    assert latency.ok and latency.value == 12.0


@pytest.mark.parametrize("scale", [1e-15, 1e-20, 1e-50, 1e-300])
def test_sizes_finer_than_the_listed_units_are_summed_exactly(scale):
    """Sizes e/2, e/2, e on accelerators of e (chain 1 -> 2 -> 3, transfers 1, no CPU): 1 and 2 fill one
    accelerator exactly, 3 the other: 1 + 1 + 1 (out of 2) = 3 and 1 (in) + 1 = 2, so the optimum is 3
    (all three together need 2e; 1 | 2, 3 needs 1.5e). No power of ten up to 10^12 or of two up to 2^40
    makes them integers; the power of ten of their shortest decimal forms does, and the DP proves 3."""
    from placement.problem.units import exact_unit

    sizes = [scale / 2, scale / 2, scale]
    digits = -int(f"{scale / 2:e}".split("e")[1])
    assert exact_unit(sizes, 2 * scale, 2.0 ** 53) == 10.0 ** digits
    instance = {"maxSizePerFPGA": scale, "maxFPGAs": 2, "maxCPUs": 0,
                "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": size}
                          for i, size in enumerate(sizes, 1)],
                "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 3, "cost": 1}]}
    for method in ("dp", "auto"):
        result = placement.solve(instance, method=method)
        assert (result.status, result.value, [s.nodes for s in result.plan]) == ("optimal", 3.0, [(1, 2), (3,)])


#: sizes without a common exact unit among them (16–17 significant digits, thirds, a 1e-12 excess)
AWKWARD_SIZES = (0.3, 0.1, 0.2, 0.30000000000000004, 0.09999999999999999, 1 / 3, 2 / 3, 1.0, 1.23456789e-12,
                 0.7999999999999999)


@st.composite
def awkward_chains(draw) -> dict:
    """A chain of 2–5 nodes on 1–2 accelerators and 0–1 CPU, sizes and bound from :data:`AWKWARD_SIZES`."""
    n = draw(st.integers(2, 5))
    nodes = [{"id": i, "supportedOnFpga": 1, "fpgaLatency": draw(st.sampled_from((0.5, 1, 2, 3))),
              "cpuLatency": draw(st.sampled_from((2, 5, 10, 100))), "size": draw(st.sampled_from(AWKWARD_SIZES))}
             for i in range(n)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": draw(st.sampled_from((0, 0.25, 1)))} for i in range(n - 1)]
    return {"maxSizePerFPGA": draw(st.sampled_from(AWKWARD_SIZES)), "maxFPGAs": draw(st.integers(1, 2)),
            "maxCPUs": draw(st.integers(0, 1)), "nodes": nodes, "edges": edges}


@given(awkward_chains())
@settings(max_examples=150, deadline=None)
@example({"maxSizePerFPGA": 0.3, "maxFPGAs": 2, "maxCPUs": 1, "edges": [{"sourceId": 0, "destId": 1, "cost": 0}],
          "nodes": [{"id": 0, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 100, "size": 0.3},
                    {"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 100,
                     "size": 0.09999999999999999}]})
def test_the_dp_on_sizes_without_an_exact_unit_agrees_with_brute_force(doc):
    """Optimal only at the brute force's optimum, which the evaluator decides on the sizes as written;
    otherwise a valid plan no better and a bound no higher."""
    from placement.testing.bruteforce import brute_force

    try:
        problem = placement.load(doc)
    except placement.InvalidInstanceError:   # a node that fits no device
        assume(False)
    truth = brute_force(problem)
    result = placement.solve(problem, method="dp")
    if truth.plan is None:
        assert result.status in ("infeasible", "no_solution")
        return
    if result.status == "optimal":
        assert result.value == pytest.approx(truth.objective, rel=1e-12)
    else:
        assert result.status in ("feasible", "no_solution")
        assert result.bound <= truth.objective * (1 + 1e-12)
        assert result.plan == () or result.value >= truth.objective * (1 - 1e-12)


#: sizes as floating-point arithmetic leaves them (0.1 + 0.2, 0.2 + 0.4, 0.3 · 3): whole numbers of 2^-52 or so,
#: whose binary values are not their shortest decimal forms, beside sizes as written
FLOAT_COMPUTED_SIZES = (0.1 + 0.2, 0.2 + 0.4, 0.3 * 3, 0.7, 0.6, 0.3, 0.0)


@st.composite
def float_computed(draw) -> dict:
    """2–5 nodes, a chain or no edges, colour classes sometimes, 1–2 accelerators and 0–1 CPU; sizes and the
    bound from :data:`FLOAT_COMPUTED_SIZES` (the bound also their sum, as written or in floating point)."""
    n = draw(st.integers(2, 5))
    sizes = [draw(st.sampled_from(FLOAT_COMPUTED_SIZES)) for _ in range(n)]
    nodes = [{"id": i, "supportedOnFpga": 1, "fpgaLatency": draw(st.sampled_from((1, 2, 3))),
              "cpuLatency": draw(st.sampled_from((2, 5, 10))), "size": size} for i, size in enumerate(sizes)]
    for node in nodes:
        if draw(st.booleans()) and draw(st.booleans()):
            node["colorClass"] = draw(st.integers(0, 1))
    edges = ([{"sourceId": i, "destId": i + 1, "cost": draw(st.sampled_from((0, 1)))} for i in range(n - 1)]
             if draw(st.booleans()) else [])
    pair = sizes[:2]
    bound = draw(st.sampled_from(FLOAT_COMPUTED_SIZES[:5] + (pair[0] + pair[1], float(sum(map(as_written, pair))))))
    return {"maxSizePerFPGA": bound, "maxFPGAs": draw(st.integers(1, 2)), "maxCPUs": draw(st.integers(0, 1)),
            "nodes": nodes, "edges": edges}


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
@given(float_computed())
@settings(max_examples=60, deadline=None)
@example({"maxSizePerFPGA": 0.9000000000000001, "maxFPGAs": 1, "maxCPUs": 0, "edges": [],
          "nodes": [{"id": 0, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 2, "size": 0.1 + 0.2},
                    {"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 2, "size": 0.2 + 0.4}]})
def test_cp_sat_decides_float_computed_sizes_as_written(doc):
    """CP-SAT's rows hold these sizes in exact integers (of 2 · 10^-17), so it proves the brute force's optimum,
    or that no plan exists (the example: 0.30000000000000004 and 0.6000000000000001 exceed 0.9000000000000001
    as written; the DP and CP-SAT had summed them in 2^-52 and put both on the one accelerator); the DP, whose
    unit is then rounded, claims only the optimum."""
    from placement.testing.bruteforce import brute_force

    try:
        problem = placement.load(doc)
    except placement.InvalidInstanceError:   # a node that fits no device
        assume(False)
    truth = brute_force(problem, "none")
    milp = placement.solve(problem, method="milp", backend="cp-sat", contiguity="none", warm_start=False,
                           time_limit=20)
    if truth.plan is None:
        assert milp.status == "infeasible", milp.message
    else:
        assert (milp.status, milp.value) == ("optimal", pytest.approx(truth.objective, rel=1e-12)), milp.message
    dp = placement.solve(problem, method="dp")
    pipeline = brute_force(problem)
    if dp.status == "optimal":
        assert pipeline.plan is not None and dp.value == pytest.approx(pipeline.objective, rel=1e-12)
    elif dp.status == "infeasible":
        assert pipeline.plan is None


def _over_by_digits_a_float_hides(colour: bool) -> dict:
    """Two accelerators of memory 0.9000000000000001 and a CPU, no edges; a and c of 0.1 + 0.2 =
    0.30000000000000004, b of 0.2 + 0.4 = 0.6000000000000001. As written a and b make 0.90000000000000014, over
    the bound (in floating point, 0.9000000000000001: on it), b and c too; a and c make 0.60000000000000008.

    Without colours, times on an accelerator a 1, b 1, c 2 (10 on the CPU): {a, c} and {b} give max(3, 1) = 3,
    the optimum (a node on the CPU costs 10); {a, b} and {c}, 2, does not fit. With a and b one colour class,
    every time 1 but c's 10 on the CPU: the class fits no accelerator, so it goes to the CPU (2) and c to an
    accelerator (1): the optimum is 2; the class on an accelerator looked as good, and does not fit."""
    a, b = 0.1 + 0.2, 0.2 + 0.4
    nodes = [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1 if colour else 10, "size": a},
             {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1 if colour else 10, "size": b},
             {"id": 3, "supportedOnFpga": 1, "fpgaLatency": 1 if colour else 2, "cpuLatency": 10, "size": a}]
    if colour:
        nodes[0]["colorClass"] = nodes[1]["colorClass"] = 7
    return {"maxSizePerFPGA": 0.9000000000000001, "maxFPGAs": 2, "maxCPUs": 1, "edges": [], "nodes": nodes}


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
@pytest.mark.parametrize("colour, optimum, devices", [(False, 3.0, [[1, 3], [2]]), (True, 2.0, [[1, 2], [3]])])
@pytest.mark.parametrize("contiguity", ["none", "sets", "stages"])
def test_sizes_that_exceed_a_bound_only_as_written_are_refused(colour, optimum, devices, contiguity):
    """Memory summed in units of 2^-52 (or a class's sum rounded to a float) let the model put a and b on one
    accelerator, whose plan then failed verification (``no_solution``); CP-SAT now counts the sizes as
    written, in integers of 2 · 10^-17 (see :func:`_over_by_digits_a_float_hides`)."""
    result = placement.solve(_over_by_digits_a_float_hides(colour), method="milp", backend="cp-sat",
                             contiguity=contiguity, warm_start=False, time_limit=20)
    assert (result.status, result.value, result.bound) == ("optimal", optimum, optimum), result.message
    assert sorted(sorted(stage.nodes) for stage in result.plan) == devices
    assert placement.solve(_over_by_digits_a_float_hides(colour)).status == "optimal"   # auto


def _over_by_less_than_the_rounding() -> dict:
    """One accelerator of memory 12.1 and a CPU, no edges: node 1 of size 12.1 (10 on the accelerator, 100 on
    the CPU), nodes 2 and 3 of 3e-19 each (1 on the accelerator, 13 on the CPU). Only node 1 fits the
    accelerator beside nothing (with node 2 it makes 12.1000000000000000003, over the bound), so the plans are
    node 1 there and 2, 3 on the CPU (max(10, 26) = 26), or 2 and 3 there and 1 on the CPU (100): the optimum
    is 26. The sizes and bound share no unit within CP-SAT's limit (10^-19 makes 12.1 a 21-digit integer), so its
    rows round the exact values down (every plan that fits passes them), and by their rounding every node fits
    the accelerator beside 12.1: their optimum, all three there (12), {1, 2} (13) and {1, 3} (13) do not fit."""
    nodes = [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 10, "cpuLatency": 100, "size": 12.1},
             {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 13, "size": 3e-19},
             {"id": 3, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 13, "size": 3e-19}]
    return {"maxSizePerFPGA": 12.1, "maxFPGAs": 1, "maxCPUs": 1, "edges": [], "nodes": nodes}


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("contiguity", ["none", "sets", "stages"])
def test_a_plan_over_its_bound_by_less_than_the_rounding_is_cut_off(contiguity, warm_start):
    """CP-SAT's optimum on the rounded rows, all three nodes on the accelerator, failed verification: the answer
    was the start (``feasible``, bound 12) or, without one, ``no_solution``. Each plan over a bound is now cut
    off (its nodes kept off any one accelerator) and the model solved again: {1, 2, 3}, then {1, 2} and {1, 3}
    (in some order), then the optimum 26 is proven."""
    result = placement.solve(_over_by_less_than_the_rounding(), method="milp", backend="cp-sat",
                             contiguity=contiguity, warm_start=warm_start, time_limit=20)
    assert (result.status, result.value, result.bound) == ("optimal", 26.0, 26.0), result.message
    assert sorted(sorted(stage.nodes) for stage in result.plan) == [[1], [2, 3]]
    if not warm_start:   # with it, stages are the DP's, proven before any model is built
        assert result.stats["memory_rounded_to_admit"] is True
        assert 1 <= result.stats["memory_plans_cut"] <= 3
        assert f"{result.stats['memory_plans_cut']} plan" in result.message


def test_the_dp_decides_a_bound_a_size_of_3e_19_passes_as_written():
    """The instance of :func:`_over_by_less_than_the_rounding` by the DP: 12.1 and 3e-19 share no unit in which
    the sizes sum below 2^53 (10^-19), so its checks rounded, and it found 100 (12.1 alone refused under a bound
    rounded down) with the bound 12 from a run whose plan did not fit; in two whole parts, 26 is proven."""
    result = placement.solve(_over_by_less_than_the_rounding(), method="dp")
    assert (result.status, result.value, result.bound) == ("optimal", 26.0, 26.0), result.message
    assert sorted(sorted(stage.nodes) for stage in result.plan) == [[1], [2, 3]]


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("calls", [1, 2])
def test_a_latency_plan_over_its_bound_by_less_than_the_rounding_is_cut_off(calls, warm_start):
    """The instance of :func:`_over_by_less_than_the_rounding` for one sample: CPU nodes run in parallel, so node 1
    on the accelerator and 2, 3 on the CPU finish at max(10, 13) = 13, the optimum (2 and 3 there, 1 on the CPU:
    100). The rounded rows' optimum, all three on the accelerator (12, in one call or two), does not fit, nor do
    {1, 2} or {1, 3} (13): the answer was the start or ``no_solution`` with the bound 12; each is now cut off."""
    result = placement.solve(_over_by_less_than_the_rounding(), method="milp", backend="cp-sat", objective="latency",
                             calls=calls, warm_start=warm_start, time_limit=20)
    assert (result.status, result.value, result.bound) == ("optimal", 13.0, 13.0), result.message
    assert [stage.nodes for stage in result.plan] == [(1,), (2, 3)]
    assert 1 <= result.stats["memory_plans_cut"] <= 3
