"""The co-design (placement.codesign): the cost model on hand-computed cases, the exact method's
optimum derived by hand and equal to the exhaustive check (every design combination × the DP)
on random small grids and graphs, bad input, and the command line's JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import placement
from placement.cli import main
from placement.codesign import baselines
from placement.codesign.exact import solve_exact
from placement.codesign.exhaustive import solve_exhaustive
from placement.codesign.grid import load_grid
from placement.codesign.models import mlp
from placement.codesign.opcost import node_times_ms
from placement.codesign.template import Design
from placement.codesign.workload import parse_workload
from placement.errors import InvalidInstanceError, InvalidParameterError, LimitExceededError

MODEL = "instances/models/mlp-training.json"
TINY = "instances/grids/tiny.json"

# Two nodes: 0 = ReLU over 7,168,000 elements, 1 = 20 GEMMs 1024×128 · 128×256; 0 -> 1 costs 0.001 ms.
CHAIN = {
    "maxSizePerFPGA": 1e12, "maxFPGAs": 1, "maxCPUs": 0,
    "nodes": [
        {"id": 0, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0,
         "operators": [{"kind": "vector", "op": "relu", "elements": 7_168_000}]},
        {"id": 1, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0,
         "operators": [{"kind": "gemm", "m": 1024, "n": 256, "k": 128, "batch": 20}]},
    ],
    "edges": [{"sourceId": 0, "destId": 1, "cost": 0.001}],
}
# Four designs: one 128-deep array 128 or 256 wide, one vector core of 128 or 256 lanes, 16 MB.
CHAIN_GRID = {"tensor_cores": [1], "array_width": [128, 256], "array_depth": [128], "vector_cores": [1],
              "vector_lanes": [128, 256], "buffer_mb": [16]}
WIDE = Design(1, 256, 128, 1, 128, 16.0)    # fast GEMM
LANES = Design(1, 128, 128, 1, 256, 16.0)   # fast vector
SMALL = Design(1, 128, 128, 1, 128, 16.0)
BIG = Design(1, 256, 128, 1, 256, 16.0)


def test_the_callable_package_shows_the_entry_point_s_signature():
    # inspect.signature(placement.codesign) read (*args, **kwargs): the package's __call__
    import inspect

    from placement.codesign.api import codesign

    assert inspect.signature(placement.codesign) == inspect.signature(codesign)
    assert list(inspect.signature(placement.codesign).parameters)[:4] == ["model", "chips", "power", "area"]


def test_area_and_tdp_by_hand():
    # WIDE: 32,768 MACs, 128 lanes, 16 MB: 100 + 32768·0.0065 + 128·0.02 + 16·1.2 = 334.752 mm²;
    # 10 + 33.6 (DRAM) + 0.05·334.752 + 0.7e9·(32768·5e-12 + 128·10e-12) + 16·0.3 = 180.7216 W, rounded to 2^-10 W.
    assert WIDE.area_mm2 == pytest.approx(334.752, rel=1e-12)
    assert WIDE.tdp_w == round(180.7216 * 1024) / 1024
    # BIG: 337.312 mm², 10 + 33.6 + 16.8656 + 116.48 + 4.8 = 181.7456 W; LANES: 230.816 mm², 119.0768 W.
    assert BIG.tdp_w == round(181.7456 * 1024) / 1024
    assert LANES.area_mm2 == pytest.approx(230.816, rel=1e-12)
    assert LANES.tdp_w == round(119.0768 * 1024) / 1024


def test_operator_times_by_hand():
    times = node_times_ms(parse_workload(CHAIN), [SMALL, WIDE, LANES])
    # ReLU: 7,168,000 cycles-elements over 128 lanes = 56,000 cycles at 700 MHz = 0.08 ms (DRAM: 4 B per
    # element, 28.672 MB at 700 GB/s = 0.04096 ms; buffer: 16 MB × 64 B/cycle = 716.8 GB/s, 0.04 ms);
    # over 256 lanes 0.04 ms of compute, so DRAM bounds it: 0.04096 ms.
    assert times[:, 0] == pytest.approx([0.08, 0.08, 0.04096], rel=1e-12)
    # GEMM on a 128-wide array: 20·⌈128/128⌉·⌈256/128⌉ = 40 tiles, one array: 40 rounds of
    # 1024 + 128 + 128 cycles = 51,200 cycles = 0.0731428571 ms; 256 wide: 20 tiles of 1024 + 128 + 256
    # = 28,160 cycles = 0.0402285714 ms (DRAM 17.04 MB = 0.0243 ms and buffer traffic bind less).
    assert times[:, 1] == pytest.approx([51_200 / 700e3, 28_160 / 700e3, 51_200 / 700e3], rel=1e-12)


def test_the_docs_give_every_vector_operator_its_cycles():
    """docs/codesign.md's table of cycles per element is the cost model's, every operator a model file may name
    with its cycles (it said "1 for arithmetic" and "...", leaving copy, reduce, pool and dropout's 2 unsaid)."""
    import re
    from pathlib import Path

    from placement.codesign.opcost import VECTOR_CYCLES

    text = (Path(__file__).resolve().parent.parent / "docs" / "codesign.md").read_text(encoding="utf-8")
    bullet = text[text.index("* **Vector operators**"):]
    bullet = " ".join(bullet[:bullet.index("\n\n")].split())
    documented = {name: float(cycles)
                  for cycles, names in re.findall(r"(\d+) for (?:an )?((?:`\w+`(?:,? and |, )?)+)", bullet)
                  for name in re.findall(r"`(\w+)`", names)}
    assert documented == VECTOR_CYCLES


def test_designs_whose_buffers_differ_past_six_digits_have_their_own_labels():
    # a chip's label names its device type in the plan: "buf16" for both would merge the two designs
    grid = {**CHAIN_GRID, "array_width": [256], "vector_lanes": [256], "buffer_mb": [16, 16.0000001]}
    assert [d.label for d in load_grid(grid).designs()] == ["tc1x256x128-vc1x256-buf16",
                                                            "tc1x256x128-vc1x256-buf16.0000001"]
    exact = placement.codesign(CHAIN, chips=2, power=200, grid=grid)
    check = placement.codesign(CHAIN, chips=2, power=200, grid=grid, exhaustive=True)
    assert check.status == exact.status == "optimal"
    assert check.designs == exact.designs and check.value == pytest.approx(exact.value, rel=1e-12)
    assert placement.codesign(CHAIN, chips=2, power=200, grid=grid, baseline="random").status == "feasible"


def test_importer_output_without_shapes():
    # The importers record FLOPs and bytes per node, no shapes: a node is then costed with every MAC busy,
    # max(FLOPs / (2 · MACs · 700 MHz), bytes / 700 GB/s, bytes / buffer rate).
    model = json.loads(open("instances/models/bert-base-inference.json", encoding="utf-8").read())
    workload = parse_workload(model)
    assert workload.shapeless_nodes == len(model["nodes"])
    node = max(model["nodes"], key=lambda n: n["flops"])
    times = node_times_ms(workload, [WIDE])[0]
    expected = max(node["flops"] / (2 * 32768 * 700e6), node["bytes"] / 700e9, node["bytes"] / (16 * 64 * 700e6))
    assert times[[n["id"] for n in model["nodes"]].index(node["id"])] == pytest.approx(1000 * expected, rel=1e-12)
    result = placement.codesign(model, chips=2, power=181, grid=CHAIN_GRID)
    assert result.status == "optimal" and result.shapeless_nodes == len(model["nodes"])


def test_two_node_chain_optimum_by_hand():
    # Power 181 W leaves WIDE (180.72 W), LANES and SMALL, not BIG (181.75 W). SMALL is as slow as WIDE on node 0
    # and as LANES on node 1, but draws fewer watts on less area than either: no design dominates it.
    # Times (ms):  node 0: WIDE 0.08, LANES 0.04096;  node 1: WIDE 0.0402286, LANES 0.0731429; c(0) = 0.001.
    # One chip: WIDE 0.1202286, LANES 0.1141029. Two stages [0 | 1]: stage 0 pays c(0) out, stage 1 c(0) in:
    # best is LANES then WIDE, max(0.04096 + 0.001, 0.001 + 0.0402286) = 0.04196 ms.
    # Homogeneous: LANES, LANES = max(0.04196, 0.0741429) = 0.0741429 ms; WIDE, WIDE = 0.081 ms.
    result = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID)
    assert result.status == "optimal"
    assert result.time_per_input_ms == pytest.approx(0.04196, rel=1e-12)
    assert result.value == pytest.approx(1000 / 0.04196, rel=1e-12)
    assert result.designs == (LANES, WIDE)
    assert [dev.nodes for dev in result.plan.devices if dev.nodes] == [(0,), (1,)]
    assert result.power_w == LANES.tdp_w + WIDE.tdp_w
    assert result.pruned_by == {"area": 0, "power": 1, "dominated": 0, "bound": 0}
    assert (result.evaluated, result.pruned, result.grid_designs) == (3, 1, 4)
    default = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID, max_ideals=None)   # as solve takes it
    assert (default.status, default.value, default.designs) == (result.status, result.value, result.designs)
    homogeneous = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID, homogeneous=True)
    assert homogeneous.time_per_input_ms == pytest.approx(0.0731428571 + 0.001, rel=1e-9)
    assert homogeneous.designs == (LANES, LANES)
    # Per watt (ms × W, smaller is better): LANES then WIDE 0.04196 · 299.798 = 12.58; LANES alone
    # 0.1141029 · 119.077 = 13.59; LANES, LANES 0.0741429 · 238.15 = 17.66; WIDE alone 0.1202286 · 180.72 = 21.73.
    per_watt = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID, objective="perf-per-watt")
    assert per_watt.designs == (LANES, WIDE)
    assert per_watt.value == pytest.approx(1000 / (0.04196 * (LANES.tdp_w + WIDE.tdp_w)), rel=1e-12)
    for mode in (False, True):
        for objective in ("throughput", "perf-per-watt"):
            exact = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID, homogeneous=mode,
                                       objective=objective)
            check = placement.codesign(CHAIN, chips=2, power=181, grid=CHAIN_GRID, homogeneous=mode,
                                       objective=objective, exhaustive=True)
            assert check.status == exact.status == "optimal"
            assert check.value == pytest.approx(exact.value, rel=1e-12)


def test_of_plans_of_equal_throughput_the_one_that_draws_fewer_watts():
    """At 500 W all four designs are within the budget. Times (ms, test_operator_times_by_hand): node 0 (ReLU, DRAM
    bound on 256 lanes) SMALL 0.08, WIDE 0.08, LANES 0.04096, BIG 0.04096; node 1 (GEMM) SMALL 0.0731429, LANES
    0.0731429, WIDE 0.0402286, BIG 0.0402286; c(0) = 0.001. Two stages [0 | 1]: stage 0 on LANES or BIG,
    0.04096 + 0.001 = 0.04196; stage 1 on WIDE or BIG, 0.001 + 0.0402286 = 0.0412286: max load 0.04196 ms on
    (LANES, WIDE), (LANES, BIG), (BIG, WIDE) and (BIG, BIG) alike (one chip: BIG, 0.0811886). Watts: LANES + WIDE
    = 119.077 + 180.722 = 299.80 W, the fewest; BIG + BIG = 363.49 W. BIG is at least as fast as every other
    design on both nodes, and the dominance on node times alone kept BIG only: the exact method returned
    (BIG, BIG), 63.7 W more for the same throughput."""
    expected = (LANES, WIDE)
    assert LANES.tdp_w + WIDE.tdp_w < min(LANES.tdp_w + BIG.tdp_w, BIG.tdp_w + WIDE.tdp_w, 2 * BIG.tdp_w)
    for exhaustive in (False, True):
        result = placement.codesign(CHAIN, chips=2, power=500, grid=CHAIN_GRID, exhaustive=exhaustive)
        assert result.status == "optimal"
        assert result.time_per_input_ms == pytest.approx(0.04196, rel=1e-12)
        assert (result.designs, result.power_w) == (expected, LANES.tdp_w + WIDE.tdp_w)
    # the random search meets every pair of the 4 designs in 64 draws: of the four that tie, the same
    found = placement.codesign(CHAIN, chips=2, power=500, grid=CHAIN_GRID, baseline="random")
    assert (found.designs, found.power_w) == (expected, LANES.tdp_w + WIDE.tdp_w)


# Three nodes in a chain: 0 = CHAIN's GEMM, 1 and 2 = ReLU over 1,280,000 elements; each edge costs 0.001 ms.
THREE = {
    "maxSizePerFPGA": 1e12, "maxFPGAs": 1, "maxCPUs": 0,
    "nodes": [{"id": v, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "operators": [op]}
              for v, op in enumerate([{"kind": "gemm", "m": 1024, "n": 256, "k": 128, "batch": 20},
                                      {"kind": "vector", "op": "relu", "elements": 1_280_000},
                                      {"kind": "vector", "op": "relu", "elements": 1_280_000}])],
    "edges": [{"sourceId": 0, "destId": 1, "cost": 0.001}, {"sourceId": 1, "destId": 2, "cost": 0.001}],
}
ONLY_SMALL = {key: [value] for key, value in zip(("tensor_cores", "array_width", "array_depth", "vector_cores",
                                                 "vector_lanes", "buffer_mb"), (1, 128, 128, 1, 128, 16))}


@pytest.mark.parametrize("method", [{}, {"homogeneous": True}, {"exhaustive": True},
                                    {"exhaustive": True, "homogeneous": True}, {"baseline": "fixed"},
                                    {"baseline": "random"}, {"baseline": "wham"}])
def test_of_pipelines_of_equal_throughput_the_one_on_fewer_chips(method):
    """THREE on SMALL chips (118.053 W each): node 0 takes 0.0731429 ms, nodes 1 and 2 each 10,000 cycles over 128
    lanes = 0.0142857 ms (DRAM: 5.12 MB at 700 GB/s, 0.0073 ms). One chip: 0.0731429 + 2 · 0.0142857 = 0.1017 ms.
    Two, [0 | 1 2]: max(0.0731429 + 0.001, 0.001 + 0.0285714) = 0.0741429 ms ([0 1 | 2]: 0.0884 ms). Three,
    [0 | 1 | 2]: max(0.0741429, 0.001 + 0.0142857 + 0.001, 0.001 + 0.0142857) = 0.0741429 ms, the same throughput
    on 354.16 W instead of 236.11 W. Every method, exact, exhaustive and baselines, returned the three chips."""
    assert Design(1, 128, 128, 1, 128, 16.0) == SMALL and SMALL.tdp_w == round(118.0528 * 1024) / 1024
    result = placement.codesign(THREE, chips=3, power=500, grid=ONLY_SMALL, **method)
    assert result.status == ("feasible" if "baseline" in method else "optimal")
    assert result.time_per_input_ms == pytest.approx(0.0731428571 + 0.001, rel=1e-9)
    assert result.designs == (SMALL, SMALL) and result.power_w == 2 * SMALL.tdp_w
    assert [dev.nodes for dev in result.plan.devices if dev.nodes] == [(0,), (1, 2)]


def test_the_mlp_on_three_chips_takes_the_design_of_fewer_watts():
    """The bundled MLP on 3 chips at 300 W on the tiny grid: 873.037 batches/s on three tc2x128x128-vc8x128-buf32
    chips (580.9 W), which the exact method returned, and on two of them around a chip of 122.34 W for the middle
    stage (509.6 W: tc2x64x128-vc8x128-buf8, or tc1x128x128-vc8x128-buf8 of the same watts and area). The
    exhaustive check, on every multiset of 1 to 3 of the 16 designs, agrees."""
    exact = placement.codesign(MODEL, chips=3, power=300, grid=TINY)
    check = placement.codesign(MODEL, chips=3, power=300, grid=TINY, exhaustive=True)
    for result in (exact, check):
        assert result.status == "optimal"
        assert result.value == pytest.approx(873.0365826314181, rel=1e-12)
        assert result.power_w == 509.6396484375
        assert [d.label for d in result.designs][::2] == ["tc2x128x128-vc8x128-buf32"] * 2
        assert result.designs[1].tdp_w == 122.3408203125 and result.designs[1].area_mm2 == pytest.approx(236.576)


def test_the_time_per_input_is_the_evaluators_as_placement_solve_reports_it():
    """The bundled MLP on one chip at 130 W: both methods take the same design and the same plan, and reported
    the max load of the DP that found it: 4.6547785714285705 ms from the exact method, 4.654778571428572 from the
    exhaustive check (their DPs sum the nodes' times in other orders). The result now holds the evaluator's max
    load of its plan on its designs, as placement.solve does, so one plan has one value."""
    from placement.codesign.outcome import objective_value, verified_time
    from placement.codesign.space import candidates
    from placement.codesign.workload import load_workload

    workload = load_workload(MODEL)
    grid = load_grid(TINY)
    exact = solve_exact(workload, grid, 1, 606.68, 130.0)
    check = solve_exhaustive(workload, grid, 1, 606.68, 130.0)
    assert exact.plan == check.plan and exact.designs == check.designs
    checked, violations = verified_time(workload, candidates(workload, grid, 606.68, 130.0), exact.plan, exact.designs)
    assert violations == () and exact.time_per_input_ms == check.time_per_input_ms == checked
    assert exact.value == check.value == objective_value("throughput", checked, exact.power_w)


def test_ties_are_within_a_relative_tolerance_of_the_least_score_whatever_the_order():
    """preferred(): scores within TIE (1e-9) of the least are equal, then the fewest watts, then the least area;
    the tie is measured from the least score, so a chain of near ties does not pull in a worse plan, and the
    order in which the candidates come does not change the choice."""
    import itertools

    from placement.codesign.result import TIE, preferred

    candidates = [(1.0, 300.0, 10.0, "fastest"), (1.0 + TIE / 2, 200.0, 20.0, "tied, fewer watts"),
                  (1.0 + TIE / 2, 200.0, 15.0, "tied, fewer watts, less area"),
                  (1.0 + 1.5 * TIE, 100.0, 1.0, "slower: beyond the tie of the least")]
    for order in itertools.permutations(candidates):
        assert preferred(order) == "tied, fewer watts, less area"
    assert preferred([(2.0, 1.0, 1.0, "a"), (1.0, 5.0, 5.0, "b")]) == "b"
    assert preferred([(float("inf"), 1.0, 1.0, "no plan")]) is None and preferred([]) is None
    # the front DP's bound keeps every pair that ties
    from placement.codesign.frontier import SLACK
    assert SLACK >= TIE


def _random_model(draw_ops: list, edges: list[tuple[int, int]], training: bool) -> dict:
    """A model file of ``len(draw_ops)`` forward nodes with the given operators and edges (and, training,
    a backward mate per node doing the same work with mirrored edges)."""
    n = len(draw_ops)
    nodes = [{"id": v, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1e6,
              "operators": ops, **({"colorClass": v} if training else {})} for v, ops in enumerate(draw_ops)]
    costs = {}
    out = []
    for a, b in edges:
        costs.setdefault(a, 0.0005 * (1 + a % 3))
        out.append({"sourceId": a, "destId": b, "cost": costs[a]})
    if training:
        nodes += [{"id": n + v, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1e6,
                   "isBackwardNode": True, "colorClass": v, "operators": ops} for v, ops in enumerate(draw_ops)]
        for a, b in edges:
            costs.setdefault(n + b, 0.0004)
            out.append({"sourceId": n + b, "destId": n + a, "cost": costs[n + b]})
    return {"maxSizePerFPGA": 1e12, "maxFPGAs": 1, "maxCPUs": 0, "nodes": nodes, "edges": out}


OPERATOR = st.one_of(
    st.builds(lambda m, n, k, b: {"kind": "gemm", "m": m, "n": n, "k": k, "batch": b},
              st.sampled_from([64, 512, 4096]), st.sampled_from([32, 200, 1024]), st.sampled_from([48, 128, 768]),
              st.integers(1, 4)),
    st.builds(lambda op, e: {"kind": "vector", "op": op, "elements": e},
              st.sampled_from(["add", "gelu", "softmax", "layernorm"]), st.integers(10_000, 4_000_000)),
)
GRID_VALUES = {"tensor_cores": [1, 2, 4], "array_width": [32, 128], "array_depth": [64, 128],
               "vector_cores": [1, 4], "vector_lanes": [64, 256], "buffer_mb": [1, 16]}


@st.composite
def cases(draw):
    n = draw(st.integers(2, 5))
    ops = [draw(st.lists(OPERATOR, min_size=1, max_size=2)) for _ in range(n)]
    edges = sorted({(a, b) for b in range(1, n) for a in draw(st.sets(st.integers(0, b - 1), min_size=1, max_size=2))})
    training = draw(st.booleans())
    # 4 or 8 designs: two or three parameters with two values (three chips at most with 4 designs, two with 8)
    varied = draw(st.lists(st.sampled_from(sorted(GRID_VALUES)), min_size=2, max_size=3, unique=True))
    grid = {key: (values[:2] if key in varied else values[-1:]) for key, values in GRID_VALUES.items()}
    chips = draw(st.integers(1, 3 if len(varied) == 2 else 2))
    share = draw(st.sampled_from([0.5, 0.8, 1.0]))
    return _random_model(ops, edges, training), grid, chips, share


def _budget(grid: dict, share: float) -> float:
    """A power budget ``share`` of the way from the grid's lowest TDP to its highest (all designs at 1.0)."""
    powers = [d.tdp_w for d in load_grid(grid).designs()]
    return min(powers) + share * (max(powers) - min(powers))


@settings(max_examples=30)
@given(cases(), st.booleans(), st.sampled_from(["throughput", "perf-per-watt"]))
@example((_random_model([[{"kind": "gemm", "m": 512, "n": 200, "k": 48, "batch": 1}],
                         [{"kind": "vector", "op": "add", "elements": 10_000}]], [(0, 1)], False),
          {**{k: v[:1] for k, v in GRID_VALUES.items()}, "tensor_cores": [2], "array_width": [32, 128],
           "array_depth": [64, 128]}, 2, 0.5), True, "perf-per-watt")
@example((_random_model([[{"kind": "vector", "op": "gelu", "elements": 2_000_000}],
                         [{"kind": "gemm", "m": 4096, "n": 1024, "k": 768, "batch": 1}],
                         [{"kind": "vector", "op": "softmax", "elements": 3_000_000}]], [(0, 1), (1, 2)], False),
          {**{k: v[:1] for k, v in GRID_VALUES.items()}, "array_width": [32, 128], "vector_lanes": [64, 256]},
          3, 0.8), False, "throughput")
@example((_random_model([[{"kind": "gemm", "m": 512, "n": 200, "k": 48, "batch": 2}],
                         [{"kind": "vector", "op": "layernorm", "elements": 1_000_000}],
                         [{"kind": "gemm", "m": 64, "n": 1024, "k": 768, "batch": 4}]], [(0, 1), (0, 2)], True),
          {**{k: v[:1] for k, v in GRID_VALUES.items()}, "tensor_cores": [1, 4], "vector_cores": [1, 4]},
          2, 1.0), False, "perf-per-watt")
def test_exact_equals_exhaustive(case, homogeneous, objective):
    model, grid, chips, share = case
    power = _budget(grid, share)
    exact = placement.codesign(model, chips=chips, power=power, grid=grid, homogeneous=homogeneous,
                               objective=objective)
    check = placement.codesign(model, chips=chips, power=power, grid=grid, homogeneous=homogeneous,
                               objective=objective, exhaustive=True)
    assert exact.status == check.status == "optimal"
    assert exact.value == pytest.approx(check.value, rel=1e-9)
    assert exact.power_w == check.power_w   # ties broken alike: the fewest watts (sums of TDPs are exact)
    assert sum(d.area_mm2 for d in exact.designs) == pytest.approx(sum(d.area_mm2 for d in check.designs), rel=1e-12)
    assert exact.evaluated + exact.pruned == exact.grid_designs == check.grid_designs
    assert 1 <= exact.evaluated <= check.evaluated   # the optimum's designs were evaluated
    assert len(exact.designs) <= chips and all(d.tdp_w <= power for d in exact.designs)
    if homogeneous:
        assert len(set(exact.designs)) == 1


@st.composite
def per_watt_cases(draw):
    """Up to 6 nodes, 4 designs (two parameters with two values), 1 to 4 chips: up to 69 design multisets."""
    n = draw(st.integers(2, 6))
    ops = [draw(st.lists(OPERATOR, min_size=1, max_size=2)) for _ in range(n)]
    edges = sorted({(a, b) for b in range(1, n) for a in draw(st.sets(st.integers(0, b - 1), min_size=1, max_size=2))})
    varied = draw(st.lists(st.sampled_from(sorted(GRID_VALUES)), min_size=2, max_size=2, unique=True))
    grid = {key: (values[:2] if key in varied else values[-1:]) for key, values in GRID_VALUES.items()}
    return _random_model(ops, edges, draw(st.booleans())), grid, draw(st.integers(1, 4))


_GEMM = {"kind": "gemm", "m": 64, "n": 32, "k": 48, "batch": 1}


@settings(max_examples=25, deadline=None)
@given(per_watt_cases())
# found by a search for optima on two designs: two stages, 2 arrays 32 wide then 2 arrays 128 wide (the best
# homogeneous plan is 0.6% below)
@example((_random_model([[_GEMM]] * 4 + [[{"kind": "vector", "op": "add", "elements": 10_000}],
                         [{"kind": "gemm", "m": 512, "n": 200, "k": 48, "batch": 1}]],
                        [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5)], False),
          {**{k: v[-1:] for k, v in GRID_VALUES.items()}, "tensor_cores": [1, 2], "array_width": [32, 128]}, 3))
def test_per_watt_fronts_equal_exhaustive(case):
    """Throughput per watt with a design per stage: the Pareto-front DP (placement.codesign.frontier) against
    the placement DP on every multiset of the grid's designs, up to four chips."""
    model, grid, chips = case
    exact = placement.codesign(model, chips=chips, power=1000, grid=grid, objective="perf-per-watt")
    check = placement.codesign(model, chips=chips, power=1000, grid=grid, objective="perf-per-watt", exhaustive=True)
    assert exact.status == check.status == "optimal"   # "optimal": the evaluator re-checked the plan's max load
    assert exact.value == pytest.approx(check.value, rel=1e-9)
    assert exact.power_w == check.power_w
    assert exact.value == pytest.approx(1000 / (exact.time_per_input_ms * sum(d.tdp_w for d in exact.designs)),
                                        rel=1e-12)
    assert exact.dp_runs == 2 and len(exact.designs) <= chips   # the front DP, then the tie-break's


@pytest.mark.parametrize("objective", ["throughput", "perf-per-watt"])
def test_bundled_model_and_grid_exact_equals_exhaustive(objective):
    workload_grid = dict(grid=TINY, power=130)
    for homogeneous in (False, True):
        exact = placement.codesign(MODEL, chips=2, homogeneous=homogeneous, objective=objective, **workload_grid)
        check = placement.codesign(MODEL, chips=2, homogeneous=homogeneous, objective=objective, exhaustive=True,
                                   **workload_grid)
        assert exact.status == check.status == "optimal"
        assert exact.value == pytest.approx(check.value, rel=1e-9) and exact.power_w == check.power_w
        assert exact.evaluated + exact.pruned == 16 and exact.evaluated >= 1
        # 10 designs within 130 W: each on exactly 1 and 2 chips, or the 10 single chips and C(11, 2) = 55 pairs
        # (the chips a plan uses, whose watts break ties)
        assert check.dp_runs == (20 if homogeneous else 65)


def test_the_pareto_set_keeps_each_design_that_no_design_before_it_dominates():
    """placement.codesign.space.undominated against its definition: in the order by total time, TDP, area and grid
    position, a design is kept when no design before it is as fast on every node (and, with costs, draws no more
    watts on no more area); designs of equal area and TDP (64x128 and 128x64 arrays) and equal times included."""
    import numpy as np

    from placement.codesign.space import Candidates, undominated

    designs = tuple(load_grid({"tensor_cores": [1, 2], "array_width": [64, 128], "array_depth": [64, 128],
                               "vector_cores": [1], "vector_lanes": [128], "buffer_mb": [8, 16]}).designs())
    tdp = np.array([d.tdp_w for d in designs])
    area = np.array([d.area_mm2 for d in designs])
    rng = np.random.default_rng(0)
    for _ in range(40):
        times = rng.integers(1, 4, size=(len(designs), 3)).astype(float)
        space = Candidates(designs, times, tdp, len(designs), 0, 0)
        order = sorted(range(len(designs)), key=lambda i: (times[i].sum(), tdp[i], area[i], i))
        for by_cost in (True, False):
            def dominates(j: int, i: int) -> bool:
                return bool((times[j] <= times[i]).all()) and (not by_cost or (tdp[j] <= tdp[i] and area[j] <= area[i]))

            expected = [i for k, i in enumerate(order) if not any(dominates(j, i) for j in order[:k])]
            assert undominated(space, by_cost) == expected


def test_five_hundred_designs_homogeneous_exact_equals_exhaustive():
    grid = {"tensor_cores": [1, 2, 4, 8, 16], "array_width": [16, 32, 64, 128, 256], "array_depth": [32, 128],
            "vector_cores": [1, 2, 4, 8, 16], "vector_lanes": [64, 256], "buffer_mb": [4, 32]}
    assert load_grid(grid).size == 1000
    grid["buffer_mb"] = [32]   # 500 designs
    exact = solve_exact(parse_workload(mlp([512, 2048, 1024, 4096, 256, 10], 128)), load_grid(grid), 4, 606.68, 250,
                        homogeneous=True)
    check = solve_exhaustive(parse_workload(mlp([512, 2048, 1024, 4096, 256, 10], 128)), load_grid(grid), 4,
                             606.68, 250, homogeneous=True)
    assert exact.status == check.status == "optimal"
    assert exact.value == pytest.approx(check.value, rel=1e-12) and exact.power_w == check.power_w
    assert check.dp_runs == 4 * check.evaluated and check.evaluated == 500 - check.pruned   # on 1, 2, 3, 4 chips
    assert exact.dp_runs < check.dp_runs and exact.pruned_by["bound"] > 0


def test_five_hundred_designs_a_design_per_stage_exact_equals_exhaustive():
    grid = {"tensor_cores": [1, 2, 4, 8, 16], "array_width": [16, 32, 64, 128, 256], "array_depth": [32, 128],
            "vector_cores": [1, 2, 4, 8, 16], "vector_lanes": [64, 256], "buffer_mb": [32]}
    workload = parse_workload(mlp([512, 2048, 1024, 4096, 256, 10], 128, training=False))
    # 606.68 mm² and 70 W leave 26 of the 500 designs (76 over the area, 398 more over the power): 26 single chips
    # and 351 multisets of two
    exact = solve_exact(workload, load_grid(grid), 2, 606.68, 70)
    check = solve_exhaustive(workload, load_grid(grid), 2, 606.68, 70)
    assert (check.dp_runs, check.evaluated, check.pruned_by["area"], check.pruned_by["power"]) == (377, 26, 76, 398)
    assert exact.status == check.status == "optimal"
    assert exact.value == pytest.approx(check.value, rel=1e-12) and exact.power_w == check.power_w
    assert exact.pruned_by["dominated"] > 0


def test_per_watt_a_design_per_stage_on_the_default_grid():
    """Four chips of the 10,000-design grid, ResNet-50 training at 280 W: every design of the Pareto set
    enters the front DP (the one-chip bound prunes none here), the optimum uses two designs, and it is at
    least the homogeneous optimum and the two-chip optimum (both are among its candidates)."""
    from placement.codesign.template import LINK_BYTES_PER_S
    from placement.zoo.codesign_models import model_file

    model = model_file("resnet50-training", LINK_BYTES_PER_S)
    exact = placement.codesign(model, chips=4, power=280, objective="perf-per-watt")
    homogeneous = placement.codesign(model, chips=4, power=280, objective="perf-per-watt", homogeneous=True)
    two = placement.codesign(model, chips=2, power=280, objective="perf-per-watt")
    assert exact.status == homogeneous.status == two.status == "optimal"
    assert (exact.grid_designs, exact.stats["undominated"], exact.evaluated) == (10_000, 161, 161)
    assert len(set(exact.designs)) == 2 and exact.dp_runs == 2   # the front DP, then the tie-break's
    # at least both, up to the tie (placement.codesign.result.TIE: of equal values, the fewer watts)
    assert exact.value >= homogeneous.value * (1 - 1e-9) and exact.value >= two.value * (1 - 1e-9)
    assert exact.value == pytest.approx(1000 / (exact.time_per_input_ms * exact.power_w), rel=1e-12)


def test_infeasible_budget():
    result = placement.codesign(MODEL, chips=2, power=50, grid=TINY)
    assert result.status == "infeasible" and result.plan is None and result.value == 0
    # with the design that needs the least raise of the power budget (it named only the budgets)
    assert result.message == ("no design of the grid fits 606.68 mm² and 50 W (0 over the area, 16 more over the "
                              "power); of the designs within 606.68 mm², tc1x64x128-vc1x128-buf8 draws the least: "
                              "83.8388671875 W")
    result = placement.codesign(MODEL, chips=2, area=150, power=50, grid=TINY, baseline="random")
    assert result.message == ("no design of the grid fits 150 mm² and 50 W (16 over the area, 0 more over the power); "
                              "the smallest design, tc1x64x128-vc1x128-buf8, takes 165.408 mm² and 83.8388671875 W")
    # a budget a hair below the least TDP of the grid (83.8388671875 W) is shown as given, not as 83.8389
    result = placement.codesign(MODEL, chips=2, area=606.68, power=83.83886, grid=TINY)
    assert result.message.startswith("no design of the grid fits 606.68 mm² and 83.83886 W (")


def test_a_model_with_no_work_is_refused():
    """The bundled MLP with every node's operators replaced by 0 FLOPs and 0 bytes (as an import of a model of
    empty tensors writes them) and no transfer: every design runs it in 0 ms, and it was reported optimal at
    an infinite throughput ('inf batches/s'; null in JSON)."""
    with open(MODEL) as f:
        document = json.load(f)
    for node in document["nodes"]:
        del node["operators"]
        node.update(flops=0, bytes=0)
    for edge in document["edges"]:
        edge["cost"] = 0
    from placement.codesign import baselines

    said = "the model has no work to place: its operators compute nothing and move no bytes, so every design runs it " \
           "in no time on one chip"
    for run in (lambda: placement.codesign(document, chips=2, power=300, grid=TINY),
                lambda: baselines.wham(document, 2, 600, 300, grid=TINY)):   # the baselines read it alike
        with pytest.raises(placement.InvalidInstanceError) as info:
            run()
        assert str(info.value) == said
    # transfers alone are no work either: one chip runs the model in no time (it was 'optimal', inf batches/s)
    for edge in document["edges"]:
        edge["cost"] = 5
    with pytest.raises(placement.InvalidInstanceError) as info:
        placement.codesign(document, chips=2, power=300, grid=TINY)
    assert str(info.value) == said
    document["nodes"][0]["flops"] = 1e9
    assert placement.codesign(document, chips=2, power=300, grid=TINY).status == "optimal"


def test_a_model_of_transfers_alone_that_no_one_chip_holds_is_placed():
    """Two nodes of no work, 12 GiB each, the first's output costing 0.5 ms: no chip holds both, so every plan
    has two stages and pays the transfer on each, 0.5 ms per batch (2000 batches/s) on any design, of which the
    tie-break keeps the one of fewest watts. It was refused as a model that one chip runs in no time. Without the
    transfer cost every plan takes no time, and the model is still refused, without the claim of one chip."""
    size = 12 * 2**30
    document = {"maxSizePerFPGA": 1e12, "maxFPGAs": 2, "maxCPUs": 0,
                "nodes": [{"id": v, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": size,
                           "flops": 0, "bytes": 0} for v in (0, 1)],
                "edges": [{"sourceId": 0, "destId": 1, "cost": 0.5}]}
    smallest = "tc1x64x128-vc1x128-buf8"
    for exhaustive in (False, True):
        for objective in ("throughput", "perf-per-watt"):
            result = placement.codesign(document, chips=2, power=300, grid=TINY, exhaustive=exhaustive,
                                        objective=objective)
            assert result.status == "optimal"
            assert result.time_per_input_ms == 0.5
            assert [d.label for d in result.designs] == [smallest, smallest]
            assert result.power_w == 2 * 83.8388671875
    one_chip = placement.codesign(document, chips=1, power=300, grid=TINY)
    assert one_chip.status == "infeasible" and "a pipeline of at least 2 chips is needed" in one_chip.message
    document["edges"][0]["cost"] = 0
    with pytest.raises(placement.InvalidInstanceError) as info:
        placement.codesign(document, chips=2, power=300, grid=TINY)
    assert str(info.value) == ("the model has no work to place: its operators compute nothing and move no bytes, "
                               "and no transfer between chips costs time, so every design runs it in no time")


def test_a_budget_equal_to_a_designs_area_holds_it():
    """tc1x16x16-vc1x256-buf16: 100 + 256·0.0065 + 256·0.02 + 16·1.2 = 125.984 mm², whose floating-point
    sum was 125.98400000000001, so a budget of 125.984 refused it (183 of the 10,000 default designs
    were one unit in the last place above their area)."""
    design = Design(1, 16, 16, 1, 256, 16)
    assert design.area_mm2 == 125.984
    grid = {"tensor_cores": [1], "array_width": [16], "array_depth": [16], "vector_cores": [1],
            "vector_lanes": [256], "buffer_mb": [16]}
    assert placement.codesign(MODEL, chips=1, power=300, area=125.984, grid=grid).status == "optimal"


def test_the_front_dps_decide_memory_as_written_where_the_dp_holds_it_in_two_parts():
    """Sizes of 17 significant digits whose sums pass 2^53 in their exact unit (the DP holds them in two
    whole parts): 0.12345678901234568 + 0.23456789012345677 exceeds 0.35802467913580244 by 10^-17, below
    the unit of the high part, so the two nodes take two chips in both DPs over the Pareto fronts."""
    from placement.codesign.frontier import least_power_dp, per_watt_dp
    from placement.codesign.pipeline import pool_layers
    from placement.problem.instance import DeviceType, Edge, Instance, Node

    nodes = (Node(0, "a", (1.0,), 0.12345678901234568, out_cost=1.0), Node(1, "b", (1.0,), 0.23456789012345677))
    problem = Instance(nodes, (Edge(0, 1),), (DeviceType("chip", 2, 0.35802467913580244, True),))
    run = per_watt_dp(problem, [100.0], 2)
    assert (run.score, run.time_ms, run.power_w) == (400.0, 2.0, 200.0)
    assert [d.nodes for d in run.plan.devices] == [(0,), (1,)]
    cheapest = least_power_dp(problem, pool_layers(1, 2), [100.0], [1.0], 2.0)
    assert (cheapest.time_ms, cheapest.power_w) == (2.0, 200.0)
    assert [d.nodes for d in cheapest.plan.devices] == [(0,), (1,)]


def test_the_model_files_own_memory_bound_is_not_the_chips():
    # a node of 6 GiB fits a chip (16 GiB) whatever maxSizePerFPGA the imported file carries
    model = json.loads(json.dumps(CHAIN))
    model["nodes"][0]["size"] = 6 * 2**30
    for bound in (2**30, 7 * 2**30):
        assert placement.codesign({**model, "maxSizePerFPGA": bound}, chips=1, power=500,
                                  grid=CHAIN_GRID).status == "optimal"


def test_a_plan_the_evaluator_refutes_is_not_returned(monkeypatch, capsys):
    """A method whose max load the evaluator does not confirm (simulated by an evaluator that finds
    twice the time) yields no plan, as placement.solve does: status no_solution, exit 1."""
    from placement.codesign import outcome

    real = outcome.verified_time
    monkeypatch.setattr(outcome, "verified_time", lambda *a: (2 * real(*a)[0], ()))
    result = placement.codesign(MODEL, chips=2, power=300, grid=TINY)
    assert result.status == "no_solution" and result.plan is None and result.designs == ()
    assert result.value == 0 and result.time_per_input_ms == float("inf")
    assert result.message.startswith("the exact method's plan failed independent verification: max load ")
    assert [len(nodes) for _, nodes in result.stats["rejected_plan"]] and all(
        isinstance(label, str) for label, _ in result.stats["rejected_plan"])
    assert main(["codesign", MODEL, "--chips", "2", "--power", "300", "--grid", TINY]) == 1
    assert "status: no_solution" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, parameter, detail", [
    ({"chips": 0}, "chips", "must be a positive integer, not 0"),
    ({"power": -1}, "power", "must be a finite number > 0, not -1"),
    ({"objective": "speed"}, "objective", "must be one of 'throughput', 'perf-per-watt', not 'speed'"),
    ({"baseline": "annealing"}, "baseline", "must be one of 'wham', 'random', 'fixed', not 'annealing'"),
    ({"baseline": "wham", "exhaustive": True}, "baseline", "and exhaustive=True are two methods: ask for one"),
    ({"max_combinations": 5}, "max_combinations", "limits the runs of exhaustive=True, which was not asked for"),
])
def test_bad_parameters(kwargs, parameter, detail):
    options = {"chips": 2, "power": 130, "grid": TINY, **kwargs}
    with pytest.raises(InvalidParameterError) as info:
        placement.codesign(MODEL, **options)
    assert (info.value.parameter, info.value.detail) == (parameter, detail)


@pytest.mark.parametrize("grid, message", [
    ({"tensor_cores": [1]}, "grid: unknown field 'name2' (the fields are name, tensor_cores, array_width, array_depth, "
                            "vector_cores, vector_lanes, buffer_mb)"),
    ({**CHAIN_GRID, "array_width": []}, "grid: field 'array_width' must be a non-empty array"),
    ({**CHAIN_GRID, "vector_lanes": [0]}, "grid: field 'vector_lanes' must hold positive integers up to 2^20, got 0"),
    ({**CHAIN_GRID, "buffer_mb": [16, 16]}, "grid: field 'buffer_mb' repeats a value"),
    ({k: v for k, v in CHAIN_GRID.items() if k != "vector_cores"}, "grid: missing field 'vector_cores'"),
    # a name of another type was kept as its text (null as 'None'), where a network file refuses it
    ({**CHAIN_GRID, "name": None}, "grid: field 'name' must be a non-blank string, got null"),
    ({**CHAIN_GRID, "name": " "}, "grid: field 'name' must be a non-blank string, got ' '"),
])
def test_bad_grids(grid, message):
    if "'name2'" in message:
        grid = {**CHAIN_GRID, "name2": 1}
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(CHAIN, chips=1, power=500, grid=grid)
    assert str(info.value) == message


@pytest.mark.parametrize("values, message", [
    (((1,), (128,), (128,), (1,), (128,), (-16.0,)), "grid: field 'buffer_mb' must hold numbers from 2^-20 (a byte) "
                                                     "up to 2^20, got -16.0"),
    # a design of 1e-300 MB had times past the float range, which refused the whole search
    (((1,), (128,), (128,), (1,), (128,), (8.0, 1e-300)), "grid: field 'buffer_mb' must hold numbers from 2^-20 (a "
                                                          "byte) up to 2^20, got 1e-300"),
    (((0,), (128,), (128,), (1,), (128,), (16.0,)), "grid: field 'tensor_cores' must hold positive integers up to "
                                                    "2^20, got 0"),
    (((1, 1), (128,), (128,), (1,), (128,), (16.0,)), "grid: field 'tensor_cores' repeats a value"),
    (((1,), (128,), (128,), (1,), (128,)), "grid: its values must be 6 sequences, one for each of tensor_cores, "
                                           "array_width, array_depth, vector_cores, vector_lanes, buffer_mb"),
])
def test_a_grid_made_in_code_is_checked_as_a_grid_file_is(values, message):
    # before: a negative buffer gave an "optimal" chip of -16 MB; zero arrays, infinite node times; a repeated
    # value, a duplicate device type; five sequences, a TypeError
    from placement.codesign.grid import Grid

    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(CHAIN, chips=1, power=500, grid=Grid(values))
    assert str(info.value) == message
    assert Grid(((1,), (128, 256), (128,), (1,), (128, 256), (16,))).designs() == load_grid(CHAIN_GRID).designs()


def test_a_grid_file_s_whole_numbers_written_as_floats_read_as_integers(tmp_path):
    # they were refused ("must hold positive integers up to 2^20, got 128.0"), where instance, plan and network
    # files read 1.0 as 1; a fraction is still refused
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({key: [float(v) for v in values] for key, values in CHAIN_GRID.items()}))
    assert load_grid(str(path)).designs() == load_grid(CHAIN_GRID).designs()
    assert all(type(v) is int for values in load_grid(str(path)).values[:-1] for v in values)
    with pytest.raises(InvalidInstanceError) as info:
        load_grid({**CHAIN_GRID, "array_width": [128, 256.5]})
    assert str(info.value) == "grid: field 'array_width' must hold positive integers up to 2^20, got 256.5"
    with pytest.raises(InvalidInstanceError) as info:   # 128 and 128.0 are one value
        load_grid({**CHAIN_GRID, "array_width": [128, 128.0]})
    assert str(info.value) == "grid: field 'array_width' repeats a value"


def test_a_grid_dict_made_in_code_may_hold_tuples():
    # DEFAULT_GRID itself holds tuples: passed as grid=, it was refused as "must be a non-empty array"
    from placement.codesign.grid import DEFAULT_GRID

    assert load_grid(dict(DEFAULT_GRID)).designs() == load_grid(None).designs()
    grid = {key: tuple(values) for key, values in CHAIN_GRID.items()}
    assert load_grid(grid).designs() == load_grid(CHAIN_GRID).designs()
    assert placement.codesign(CHAIN, chips=2, power=200, grid=grid).value == \
        placement.codesign(CHAIN, chips=2, power=200, grid=CHAIN_GRID).value
    with pytest.raises(InvalidInstanceError) as info:
        load_grid({**grid, "array_width": ()})
    assert str(info.value) == "grid: field 'array_width' must be a non-empty array"


def test_bad_model(tmp_path, capsys):
    model = json.loads(json.dumps(CHAIN))
    del model["nodes"][1]["operators"]
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
    assert str(info.value) == ("node 1: has neither 'operators' nor 'flops' and 'bytes': the co-design cost model "
                               "needs what each node computes")
    for given, missing in (("flops", "bytes"), ("bytes", "flops")):   # one of the two said "neither"
        with pytest.raises(InvalidInstanceError) as info:
            placement.codesign({**model, "nodes": [{**n, given: 10.0} if n is model["nodes"][1] else n
                                                   for n in model["nodes"]]}, chips=1, power=500, grid=CHAIN_GRID)
        assert str(info.value) == (f"node 1: has {given!r} but no {missing!r}: the co-design cost model needs both "
                                   "(or 'operators')")
    model["nodes"][1]["operators"] = [{"kind": "gemm", "m": 4, "n": 0, "k": 4}]
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
    assert str(info.value) == "node 1: operator #0: field 'n' must be a positive integer up to 2^40, got 0"
    for operator, said in (({"kind": "gemm", "m": 4, "n": 4}, "missing field 'k'"),   # said "got None"
                           ({"kind": "vector", "elements": 4}, "missing field 'op'"),
                           ({"kind": "vector", "op": ["add"], "elements": 4},           # a TypeError's traceback
                            "field 'op' must be one of add, mul, copy, relu, reduce, pool, exp, sigmoid, tanh, gelu, "
                            "softmax, layernorm, dropout, optimizer, got an array"),
                           ({"kind": None}, "field 'kind' must be 'gemm' or 'vector', got null"),
                           # a misspelt or misplaced optional field was ignored: batch 1, not 8
                           ({"kind": "gemm", "m": 4, "n": 4, "k": 4, "bacth": 8},
                            "unknown field 'bacth' (the fields of a gemm operator are kind, m, n, k, batch, bytes)"),
                           ({"kind": "vector", "op": "add", "elements": 4, "batch": 8},
                            "unknown field 'batch' (the fields of a vector operator are kind, op, elements, bytes)")):
        model["nodes"][1]["operators"] = [operator]
        with pytest.raises(InvalidInstanceError) as info:
            placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
        assert str(info.value) == f"node 1: operator #0: {said}"
    model["nodes"][1]["operators"] = [{"kind": "gemm", "m": 4, "n": 4, "k": 4}]
    model["nodes"][1]["size"] = 2**35
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
    assert str(info.value) == "node 1 needs 34359738368 bytes, more than a chip's 17,179,869,184 bytes of DRAM"
    path = tmp_path / "model.json"   # a file's error names it, as its other errors do
    path.write_text(json.dumps(model), encoding="utf-8")
    assert main(["codesign", str(path), "--chips", "1", "--power", "500", "--grid", TINY]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {path}: node 1 needs 34359738368 bytes, more than a chip's "
                                               "17,179,869,184 bytes of DRAM")


def test_operator_sizes_written_as_whole_floats():
    """A generator that divides sizes writes m = 1024.0: it reads as 1024, as 64.0 does in a grid file (it was
    refused, "must be a positive integer up to 2^40, got 1024.0"); a fractional size is still refused."""
    from placement.codesign.workload import Operator, load_workload

    model = json.loads(json.dumps(CHAIN))
    model["nodes"][1]["operators"] = [{"kind": "gemm", "m": 1024.0, "n": 256, "k": 128.0, "batch": 20.0}]
    model["nodes"][0]["operators"] = [{"kind": "vector", "op": "relu", "elements": 7.168e6}]
    workload = load_workload(model)
    assert workload.operators == ((Operator("vector", op="relu", elements=7_168_000),),
                                  (Operator("gemm", m=1024, n=256, k=128, batch=20),))
    assert placement.codesign(model, chips=2, power=200, grid=CHAIN_GRID).value == \
        placement.codesign(CHAIN, chips=2, power=200, grid=CHAIN_GRID).value
    model["nodes"][1]["operators"][0]["m"] = 1024.5
    with pytest.raises(InvalidInstanceError) as info:
        load_workload(model)
    assert str(info.value) == "node 1: operator #0: field 'm' must be a positive integer up to 2^40, got 1024.5"


def test_more_chips_than_colour_classes():
    # 14 classes (forward node and its backward mate share one): 1000 chips give the plans of 14
    many = placement.codesign(MODEL, chips=1000, power=130, grid=TINY)
    assert many.status == "optimal" and many.chips == 1000
    assert many.value == placement.codesign(MODEL, chips=14, power=130, grid=TINY).value
    assert len(many.designs) <= 14


@pytest.mark.parametrize("baseline", ["random", "wham", "fixed"])
def test_baselines_use_no_more_chips_than_colour_classes(baseline):
    """The baselines drew and evaluated every chip: 10^20 chips ended in a traceback (numpy's draw, a
    tuple of 10^20 designs), and 64 chips in a DP refused for its tables. More chips than the model's
    14 colour classes are never all used, so they run as 14, with the same answer."""
    many = placement.codesign(MODEL, chips=10**20, power=300, grid=TINY, baseline=baseline)
    some = placement.codesign(MODEL, chips=14, power=300, grid=TINY, baseline=baseline)
    assert (many.value, many.designs) == (some.value, some.designs) and many.chips == 10**20


def test_exhaustive_on_more_chips_than_colour_classes():
    """Multisets of 14 chips hold every set of chips a plan of 14 classes uses: the check counts those
    (perf-per-watt summed the counts of every size up to 10^8 and never returned)."""
    for objective in ("throughput", "perf-per-watt"):
        with pytest.raises(LimitExceededError, match=r"^the exhaustive check would run the DP on [0-9,]+ design "
                                                     r"combinations \(10 designs within the budgets, 14 of the "
                                                     r"100,000,000 chips \(one per colour class\)\)"):
            placement.codesign(MODEL, chips=10**8, power=130, grid=TINY, exhaustive=True, objective=objective)
    exact = placement.codesign(CHAIN, chips=5, power=500, grid=CHAIN_GRID)   # 2 classes: 2 chips are all it uses
    checked = placement.codesign(CHAIN, chips=5, power=500, grid=CHAIN_GRID, exhaustive=True)
    assert checked.value == exact.value and checked.dp_runs == 14   # multisets of 1 and 2 of 4 designs


def test_the_exhaustive_check_reports_its_progress(monkeypatch):
    """A check of 15,504 DP runs took 135 s without a word: it says how many runs it makes, then how far
    it is (every line here: the interval set to 0); CHAIN's 2 classes on 4 designs make 4 + 10 runs."""
    from placement.codesign import exhaustive

    monkeypatch.setattr(exhaustive, "PROGRESS_S", 0.0)
    heard: list[str] = []
    placement.codesign(CHAIN, chips=5, power=500, grid=CHAIN_GRID, exhaustive=True, progress=heard.append)
    assert heard[0] == "exhaustive check: 14 DP runs (4 designs within the budgets, 2 chips)"
    assert [line.split(" DP runs")[0] for line in heard[1:]] == [f"exhaustive check: {k}/14" for k in range(1, 14)]
    with pytest.raises(InvalidParameterError, match="^progress must be a function of one string or None, not int$"):
        placement.codesign(CHAIN, chips=5, power=500, grid=CHAIN_GRID, exhaustive=True, progress=3)


def test_exhaustive_refused_with_the_count():
    with pytest.raises(LimitExceededError) as info:
        placement.codesign(MODEL, chips=3, power=130, grid=TINY, exhaustive=True, max_combinations=100)
    # multisets of 1, 2 and 3 of the 10 designs: 10 + 55 + 220
    assert str(info.value) == ("the exhaustive check would run the DP on 285 design combinations (10 designs within "
                               "the budgets, 3 chips), more than the limit max_combinations (100)")


@pytest.mark.parametrize("baseline", ["wham", "random", "fixed"])
def test_a_baseline_under_budgets_no_design_meets_is_infeasible_as_the_exact_method_says(baseline, capsys):
    """1 W leaves no design of the tiny grid: the baselines raised an error about the area parameter, where the
    exact method answers `infeasible` (exit status 1, a JSON document)."""
    result = placement.codesign(MODEL, chips=2, power=1, grid=TINY, baseline=baseline)
    exact = placement.codesign(MODEL, chips=2, power=1, grid=TINY)
    assert (result.status, result.method, result.message) == ("infeasible", baseline, exact.message)
    assert main(["codesign", MODEL, "--chips", "2", "--power", "1", "--grid", TINY, "--baseline", baseline,
                 "--json", "--quiet"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "infeasible"


def test_the_exhaustive_check_counts_one_in_the_singular():
    grid = {**CHAIN_GRID, "array_width": [128], "vector_lanes": [128]}   # one design
    heard: list[str] = []
    placement.codesign(CHAIN, chips=1, power=500, grid=grid, exhaustive=True, progress=heard.append)
    assert heard[0] == "exhaustive check: 1 DP run (1 design within the budgets, 1 chip)"   # was "1 designs", "1 chips"
    with pytest.raises(LimitExceededError) as info:
        placement.codesign(CHAIN, chips=2, power=500, grid=grid, exhaustive=True, max_combinations=1)
    assert str(info.value) == ("the exhaustive check would run the DP on 2 design combinations (1 design within the "
                               "budgets, 2 chips), more than the limit max_combinations (1)")


@pytest.mark.parametrize("baseline", ["wham", "random", "fixed"])
def test_a_baseline_on_chips_whose_memory_holds_no_plan_is_infeasible_as_the_exact_method_says(baseline, capsys):
    """Two nodes of 9 GiB in one colour class need 18 GiB on one chip of 16 GiB, whatever its design: the
    baselines raised an error about the model (exit status 2) where the exact method answers `infeasible`."""
    model = json.loads(json.dumps(CHAIN))
    for node in model["nodes"]:
        node.update(size=9 * 2**30, colorClass=0)
    result = placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID, baseline=baseline)
    exact = placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
    assert exact.status == "infeasible" and exact.message == (
        "the colour class of nodes 0 and 1 needs 19327352832 bytes on one chip, more than its 17,179,869,184 "
        "bytes of DRAM: no number of chips holds the model")
    assert (result.status, result.method, result.message, result.plan) == ("infeasible", baseline, exact.message,
                                                                           None)
    with pytest.raises(InvalidParameterError, match="^model has no placement on 1 chip of "):
        baselines.wham(model, 1, 606.68, 500, grid=CHAIN_GRID)


@pytest.mark.parametrize("method", [{}, {"exhaustive": True}, {"homogeneous": True}, {"baseline": "wham"},
                                    {"objective": "perf-per-watt"}])
def test_a_colour_class_larger_than_a_chip_is_named_as_what_no_chip_count_holds(method):
    """Forward and backward of 9 GiB each share a class, so one chip of 16 GiB: on 4 chips the answer said
    "no pipeline of at most 4 chips", as if more chips would hold the model, which no number of them does."""
    model = json.loads(json.dumps(CHAIN))
    for node in model["nodes"]:
        node.update(size=9 * 2**30, colorClass=0)
    model["nodes"].append({"id": 2, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": 1,
                           "operators": [{"kind": "vector", "op": "add", "elements": 1000}]})
    model["edges"].append({"sourceId": 1, "destId": 2, "cost": 0.001})
    result = placement.codesign(model, chips=4, power=500, grid=CHAIN_GRID, **method)
    assert (result.status, result.plan) == ("infeasible", None)
    assert result.message == ("the colour class of nodes 0 and 1 needs 19327352832 bytes on one chip, more than "
                              "its 17,179,869,184 bytes of DRAM: no number of chips holds the model")


def test_nodes_larger_than_every_chip_s_memory_together_are_named_with_the_chips_they_need():
    """Three nodes of 9 GiB need 27 GiB: more than the DRAM of 1 chip (16 GiB); on 2 chips (32 GiB) they still
    need a chip each, which only the search finds."""
    model = json.loads(json.dumps(CHAIN))
    model["nodes"].append({"id": 2, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0,
                           "operators": [{"kind": "vector", "op": "add", "elements": 1000}]})
    model["edges"].append({"sourceId": 1, "destId": 2, "cost": 0.001})
    for node in model["nodes"]:
        node.update(size=9 * 2**30)
    one = placement.codesign(model, chips=1, power=500, grid=CHAIN_GRID)
    assert one.message == ("the nodes need 28991029248 bytes, more than the 17,179,869,184 bytes of DRAM of 1 "
                           "chip: a pipeline of at least 2 chips is needed to hold the model")
    two = placement.codesign(model, chips=2, power=500, grid=CHAIN_GRID, baseline="random")
    assert two.message == ("no pipeline of at most 2 chips of the designs within the budgets holds the model (each "
                           "chip holds its stages' memory in its DRAM)")
    assert placement.codesign(model, chips=3, power=500, grid=CHAIN_GRID).status == "optimal"


def test_an_infeasible_result_measures_nothing():
    """No design of the tiny grid draws at most 1 W: no plan, so no value, time or power (they were 0, infinity
    and 0, and json.dumps wrote Infinity, which strict JSON readers refuse)."""
    result = placement.codesign(MODEL, chips=2, power=1, grid=TINY)
    assert result.status == "infeasible"
    document = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert (document["value"], document["time_per_input_ms"], document["power_w"]) == (None, None, None)


def test_cli_json(capsys):
    assert main(["codesign", MODEL, "--chips", "2", "--power", "130", "--grid", TINY, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = placement.codesign(MODEL, chips=2, power=130, grid=TINY)
    assert {"status", "value", "designs", "plan", "evaluated", "pruned", "runtime_s"} <= set(document)
    assert document["status"] == "optimal"
    assert document["value"] == expected.value
    assert [d["label"] for d in document["designs"]] == [d.label for d in expected.designs]
    assert [stage["nodes"] for stage in document["plan"]] == [list(dev.nodes) for dev in expected.plan.devices
                                                              if dev.nodes]
    assert (document["evaluated"], document["pruned"]) == (expected.evaluated, expected.pruned)
    assert sorted(v for stage in document["plan"] for v in stage["nodes"]) == list(range(28))
    # the library's to_json, named as every other result's, is the document the CLI prints (runtime apart)
    assert {k: v for k, v in expected.to_json().items() if k != "runtime_s"} == \
        {k: v for k, v in document.items() if k != "runtime_s"}


@pytest.mark.parametrize("baseline, placed", [("random", "64 design combinations placed"),
                                              ("fixed", "1 design combination placed")])
def test_cli_text_of_a_baseline_counts_combinations_not_designs(capsys, baseline, placed):
    """The random search places 64 combinations of the tiny grid's 16 designs on 3 chips: the text said "16 in the
    grid, 64 evaluated, 0 pruned", more designs evaluated than the grid holds."""
    assert main(["codesign", MODEL, "--chips", "3", "--power", "300", "--grid", TINY, "--baseline", baseline]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"designs: 16 in the grid; {placed}; ") and last.endswith(" s")
    assert main(["codesign", MODEL, "--chips", "3", "--power", "300", "--grid", TINY]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("designs: 16 in the grid, 12 evaluated, 4 pruned (4 dominated); 2 DP runs; ")


@pytest.mark.parametrize("baseline", ["wham", "random", "fixed"])
def test_cli_text_of_a_baseline_whose_chips_hold_no_plan(tmp_path, capsys, baseline):
    """A baseline's designs within the budgets, none of whose pipelines holds the model: its text counted
    "16 in the grid, 0 evaluated, 0 pruned" (counts of the exact method's that do not add up), and the header
    wrote a large chip count without its thousands separated."""
    model = json.loads(json.dumps(CHAIN))
    for node in model["nodes"]:
        node.update(size=9 * 2**30, colorClass=0)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    assert main(["codesign", str(path), "--chips", "1000", "--power", "300", "--grid", TINY,
                 "--baseline", baseline]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    homogeneous = "homogeneous" if baseline == "fixed" else "a design per stage"
    assert lines[0] == f"status: infeasible ({baseline}, throughput, {homogeneous}, at most 1,000 chips)"
    assert lines[-1].startswith("designs: 16 in the grid; 0 design combinations placed; ")


@pytest.mark.parametrize("argv, message", [
    (["--chips", "2", "--power", "130", "--grid", TINY, "--exhaustive", "--max-combinations", "10", "--chips", "3"],
     "error: the exhaustive check would run the DP on 285 design combinations (10 designs within the budgets, "
     "3 chips), more than the limit --max-combinations (10)"),
    (["--power", "130"], "error: codesign needs --chips"),
    # the library's flag parameter exhaustive=True is named by its option
    (["--chips", "2", "--power", "130", "--grid", TINY, "--baseline", "random", "--exhaustive"],
     "error: --baseline and --exhaustive are two methods: ask for one"),
    (["--chips", "2", "--power", "130", "--grid", TINY, "--max-combinations", "5"],
     "error: --max-combinations limits the runs of --exhaustive, which was not asked for"),
    (["--chips", "2", "--power", "130", "--grid", "missing.json"], "error: missing.json: no such file"),
])
def test_cli_errors(capsys, argv, message):
    assert main(["codesign", MODEL, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == message


def test_on_a_dask_cluster():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        remote = placement.codesign(MODEL, chips=2, power=130, grid=TINY, scheduler=cluster.scheduler_address)
    here = placement.codesign(MODEL, chips=2, power=130, grid=TINY)
    assert remote.status == "optimal"
    assert (remote.value, remote.designs, remote.plan) == (here.value, here.designs, here.plan)



def test_a_cluster_gets_the_model_and_grid_read_here(monkeypatch, tmp_path):
    """The paths were sent to the cluster, whose workers read them in their own folder (or machine): a relative
    path named no file there. The files are read here, a missing one refused before any cluster is reached."""
    pytest.importorskip("dask.distributed")
    from placement.codesign import sweep
    from placement.codesign.grid import Grid
    from placement.codesign.workload import Workload

    sent = []

    class Client:
        def submit(self, function, *args, pure=True, **kwargs):
            sent.append((args, kwargs))
            return type("Future", (), {"result": lambda future: function(*args, **kwargs)})()

        def close(self):
            pass

    monkeypatch.setattr(sweep, "connect", lambda address: Client())
    remote = placement.codesign(MODEL, chips=2, power=130, grid=TINY, scheduler="tcp://cluster:8786")
    (model,), options = sent[0]
    assert isinstance(model, Workload) and isinstance(options["grid"], Grid)
    assert remote.value == placement.codesign(MODEL, chips=2, power=130, grid=TINY).value
    with pytest.raises(InvalidInstanceError, match=r"^missing\.json: no such file$"):
        placement.codesign("missing.json", chips=2, power=130, grid=TINY, scheduler="tcp://cluster:8786")
    assert len(sent) == 1


def test_cli_sweep_runs_and_resumes(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps({"models": [MODEL], "chips": [1, 2], "budgets": [[606.68, 130]], "grids": [TINY],
                                "baselines": ["random"], "random_budget": 2}), encoding="utf-8")
    out = tmp_path / "records.jsonl"
    argv = ["codesign", "--sweep", str(spec), "--out", str(out), "--workers", "1", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["ran"] == 2
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = {k: placement.codesign(MODEL, chips=k, power=130, grid=TINY).value for k in (1, 2)}
    assert sorted((r["config"]["chips"], r["throughput"]) for r in records) == sorted(expected.items())
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["ran"], summary["skipped"]) == (0, 2)


def test_cli_sweep_whose_every_configuration_fails_exits_1(tmp_path, capsys):
    """chain4's nodes say nothing of what they compute: both configurations end in an error, and the
    sweep's exit status says so."""
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps({"models": ["instances/tiny/chain4.json"], "chips": [1, 2], "budgets": [[606.68, 130]],
                                "grids": [TINY]}), encoding="utf-8")
    argv = ["codesign", "--sweep", str(spec), "--out", str(tmp_path / "records.jsonl"), "--workers", "1", "--json"]
    assert main(argv) == 1
    summary = json.loads(capsys.readouterr().out)
    assert (summary["ran"], summary["infeasible"], summary["errors"]) == (2, 0, 2)


def test_cli_sweep_counts_budgets_no_design_meets_as_infeasible_not_as_errors(tmp_path, capsys):
    """10 W per chip is below every design of the tiny grid: each configuration is proven infeasible (an
    answer, not an error); with no optimum among them the exit status is still 1."""
    pytest.importorskip("dask.distributed")
    assert placement.codesign(MODEL, chips=1, area=606.68, power=10, grid=TINY).status == "infeasible"
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps({"models": [MODEL], "chips": [1, 2], "budgets": [[606.68, 10]], "grids": [TINY],
                                "baselines": []}), encoding="utf-8")
    argv = ["codesign", "--sweep", str(spec), "--out", str(tmp_path / "records.jsonl"), "--workers", "1"]
    assert main(argv) == 1
    assert capsys.readouterr().out.strip() == (f"2 configurations run, 0 already in {tmp_path / 'records.jsonl'}, "
                                               "2 infeasible, 0 errors; 0 plots written")


def test_cli_counts_one_of_a_kind_in_the_singular(tmp_path, capsys):
    """One shapeless node, one configuration: the texts said "1 nodes have" and "1 configurations run"."""
    model = json.loads(json.dumps(CHAIN))
    model["nodes"][0] = {**model["nodes"][0], "flops": 1e6, "bytes": 1e3}
    del model["nodes"][0]["operators"]
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    assert main(["codesign", str(path), "--chips", "1", "--power", "300", "--grid", TINY]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "note: 1 node has no operator shapes and was costed at full array utilisation")
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps({"models": [MODEL], "chips": [1], "budgets": [[606.68, 300]], "grids": [TINY],
                                "baselines": []}), encoding="utf-8")
    out = tmp_path / "records.jsonl"
    assert main(["codesign", "--sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"1 configuration run, 0 already in {out}, 0 infeasible, 0 errors; " \
                                              "0 plots written"


def test_a_node_supported_on_no_accelerator_is_refused():
    """The co-design places every node on a chip; a node the file keeps off accelerators (with a CPU
    to run it) would be planned on a chip anyway, so the model is refused."""
    model = json.loads(json.dumps(CHAIN))
    model["maxCPUs"] = 1
    model["nodes"][1]["supportedOnFpga"] = False
    model["nodes"][1]["cpuLatency"] = 5.0
    with pytest.raises(InvalidInstanceError, match="^node 1: not supported on any accelerator, but the co-design "
                                                   "places every node on a chip$"):
        parse_workload(model)


@pytest.mark.parametrize("field, value, message", [
    ("maxSizePerFPGA", "16 GiB", "instance: field 'maxSizePerFPGA' must be a number, got string"),
    ("maxSizePerFPGA", -1, "instance: field 'maxSizePerFPGA' is negative (-1)"),
    ("maxSizePerFPGA", None, "instance: field 'maxSizePerFPGA' must be a number, got null"),
    ("deviceTypes", [{"name": "chip", "count": 2, "memory": "a lot", "paysComm": True}],
     "device type 'chip': field 'memory' must be a number, got string")])
def test_a_malformed_memory_bound_of_the_model_is_refused_though_the_chips_replace_it(field, value, message):
    """The chips' memory replaces the accelerators' bound of the model file, which was replaced unread: a bound the
    instance refuses passed without a word. It is refused as the instance refuses it."""
    model = {key: item for key, item in json.loads(json.dumps(CHAIN)).items()
             if key not in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")}
    model.update({field: value} if field == "deviceTypes" else {field: value, "maxFPGAs": 2, "maxCPUs": 0})
    if field == "deviceTypes":
        for node in model["nodes"]:
            node["times"] = {"chip": node.pop("fpgaLatency")}
            del node["supportedOnFpga"], node["cpuLatency"]
    with pytest.raises(InvalidInstanceError) as info:
        parse_workload(model)
    assert str(info.value) == message


def test_a_piper_instance_is_named_as_one(tmp_path):
    """A Piper instance given as the model was refused as "unknown field 'bandwidth'"."""
    from tests.test_piper_io import instance as piper_instance

    path = tmp_path / "piper.json"
    path.write_text(json.dumps(piper_instance()))
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign(str(path), chips=1, power=500, grid=CHAIN_GRID)
    assert str(info.value) == (f"{path} is a Piper instance (per-stage data- and tensor-parallel configurations): "
                               "the co-design takes a model file, whose nodes give their operators")


def test_a_workload_made_in_code_is_checked_as_a_file_is():
    """The chain with node 1 of 2^35 bytes on devices of 2^36, built as a Workload from its parts rather than
    read: it is refused when made, as the file is when read, since no chip of any design holds that node."""
    from dataclasses import replace

    from placement.codesign.workload import Workload, load_workload

    workload = load_workload(json.loads(json.dumps(CHAIN)))
    nodes = tuple(replace(node, memory=2**35) if node.id == 1 else node for node in workload.instance.nodes)
    types = tuple(replace(kind, memory=2**36) for kind in workload.instance.device_types)
    with pytest.raises(InvalidInstanceError) as info:
        Workload(replace(workload.instance, nodes=nodes, device_types=types), workload.operators,
                 workload.transfer_ms)
    assert str(info.value) == "node 1 needs 34359738368 bytes, more than a chip's 17,179,869,184 bytes of DRAM"


@pytest.mark.parametrize("link, shown", [(0, "0"), (-1, "-1"), (float("nan"), "NaN"), (1e30, "1e+30"),
                                         ("fast", "'fast'"), (True, "true")])
def test_a_link_that_is_no_positive_rate_is_refused_in_one_wording(link, shown):
    # 0 was refused as "must be positive" and -1 as "must be a non-negative number below 1e30": a file changed from
    # the one to the other met the second refusal
    with pytest.raises(InvalidInstanceError) as info:
        placement.codesign({**CHAIN, "about": {"link_bytes_per_s": link}}, chips=1, power=500, grid=CHAIN_GRID)
    assert str(info.value) == f"about: field 'link_bytes_per_s' must be a positive number below 1e30, got {shown}"


def test_an_interrupted_exhaustive_check_says_how_far_it_was(dp_stopped_on, capsys, tmp_path):
    # Ctrl-C on the 3rd of 14 DP runs said "interrupted before the DP found a plan", the words of the one DP run
    # it stopped, where the check had placed the model twice and proved nothing
    from placement.codesign import exhaustive

    calls = dp_stopped_on(exhaustive, 3)
    with pytest.raises(KeyboardInterrupt) as info:
        placement.codesign(CHAIN, chips=5, power=500, grid=CHAIN_GRID, exhaustive=True)
    assert str(info.value) == "interrupted after 2 of the exhaustive check's 14 DP runs: no optimum is proven"
    calls.clear()
    (tmp_path / "grid.json").write_text(json.dumps(CHAIN_GRID))
    (tmp_path / "model.json").write_text(json.dumps(CHAIN))
    assert main(["codesign", str(tmp_path / "model.json"), "--chips", "5", "--power", "500", "--grid",
                 str(tmp_path / "grid.json"), "--exhaustive", "--quiet"]) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "error: interrupted after 2 of the exhaustive check's 14 DP runs: "
                                                "no optimum is proven\n")
