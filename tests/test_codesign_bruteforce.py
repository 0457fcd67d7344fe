"""The co-design against a brute force that shares none of its code past the cost model: every assignment
of the model's colour classes to ``1..k`` ordered stages that DESIGN.md §2 allows (every edge between
forward nodes goes to the same or a later stage, every chip's memory within its DRAM), times every choice
of a design of the grid within the budgets per stage (or one for every stage), scored by DESIGN.md's load
(compute plus each boundary node's transfer once per direction); the exact method and the exhaustive check
must both reach its least score and, of the plans that tie with it, its fewest watts."""

from __future__ import annotations

import itertools
import math

import pytest

import placement
from placement.codesign.grid import load_grid
from placement.codesign.opcost import node_times_ms
from placement.codesign.result import tie_bound
from placement.codesign.template import DRAM_BYTES, Design
from placement.codesign.workload import load_workload

GIB = 2 ** 30


def _node(v: int, ops: list, size: float = 1e6, colour: int | None = None, backward: bool = False) -> dict:
    return {"id": v, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0, "size": size, "operators": ops,
            **({"colorClass": colour} if colour is not None else {}), **({"isBackwardNode": True} if backward else {})}


def _gemm(m: int, n: int, k: int, batch: int = 1) -> list:
    return [{"kind": "gemm", "m": m, "n": n, "k": k, "batch": batch}]


def _vector(op: str, elements: int) -> list:
    return [{"kind": "vector", "op": op, "elements": elements}]


def _model(nodes: list, edges: list) -> dict:
    return {"maxSizePerFPGA": 1e12, "maxFPGAs": 1, "maxCPUs": 0, "nodes": nodes,
            "edges": [{"sourceId": a, "destId": b, "cost": cost} for a, b, cost in edges]}


# A diamond 0 -> {1, 2} -> 3 of GEMMs and vector operators, inference.
DIAMOND = _model([_node(0, _vector("layernorm", 2_000_000)), _node(1, _gemm(4096, 1024, 768)),
                  _node(2, _gemm(512, 200, 48, 4)), _node(3, _vector("softmax", 3_000_000))],
                 [(0, 1, 0.002), (0, 2, 0.002), (1, 3, 0.0015), (2, 3, 0.001)])
# A chain of four whose nodes take 9 GiB each: no chip holds two of them.
HEAVY = _model([_node(v, ops, size=9 * GIB) for v, ops in enumerate(
    [_gemm(4096, 1024, 768), _vector("gelu", 4_000_000), _gemm(64, 1024, 768, 2), _vector("add", 1_000_000)])],
    [(0, 1, 0.003), (1, 2, 0.001), (2, 3, 0.002)])
# Training: a forward chain 0 -> 1 -> 2 and its backward mates 3, 4, 5 (colour classes 0, 1, 2), gradients
# flowing back 5 -> 4 -> 3.
TRAINING = _model([_node(0, _gemm(4096, 1024, 768), colour=0), _node(1, _vector("gelu", 3_000_000), colour=1),
                   _node(2, _gemm(512, 1024, 128, 2), colour=2),
                   _node(3, _gemm(4096, 768, 1024, 2), colour=0, backward=True),
                   _node(4, _vector("gelu", 6_000_000), colour=1, backward=True),
                   _node(5, _gemm(512, 128, 1024, 4), colour=2, backward=True)],
                  [(0, 1, 0.002), (1, 2, 0.001), (5, 4, 0.0012), (4, 3, 0.0008)])

# Four designs each: two parameters with two values.
GRID_ARRAYS = {"tensor_cores": [1, 4], "array_width": [32, 128], "array_depth": [128], "vector_cores": [2],
               "vector_lanes": [128], "buffer_mb": [16]}
GRID_VECTORS = {"tensor_cores": [2], "array_width": [128], "array_depth": [64], "vector_cores": [1, 4],
                "vector_lanes": [64, 256], "buffer_mb": [16]}


def brute_force(model: dict, grid: dict, chips: int, area: float, power: float, homogeneous: bool,
                objective: str) -> tuple[float, float]:
    """The least score (max load in ms, or max load × summed TDP) over every pipeline and design choice, and
    the fewest watts of the plans within its tie; ``(inf, inf)`` without a plan."""
    workload = load_workload(model)
    instance = workload.instance
    designs = [d for d in load_grid(grid).designs() if d.area_mm2 <= area and d.tdp_w <= power]
    times = node_times_ms(workload, designs)
    classes = instance.colour_classes()
    position = {node.id: v for v, node in enumerate(instance.nodes)}
    edges = [(position[e.src], position[e.dst]) for e in instance.edges]
    successors = {v: {w for u, w in edges if u == v} for v in range(len(instance.nodes))}
    options = []   # (score, watts)
    for stages in range(1, chips + 1):
        for of_class in itertools.product(range(stages), repeat=len(classes)):
            if set(of_class) != set(range(stages)):
                continue   # every one of the stages holds something
            stage = {v: s for members, s in zip(classes, of_class) for v in members}
            if any(stage[u] > stage[w] for u, w in edges
                   if not instance.nodes[u].backward and not instance.nodes[w].backward):
                continue   # a forward edge back to an earlier stage: no pipeline
            sets = [{v for v in stage if stage[v] == s} for s in range(stages)]
            if any(sum(instance.nodes[v].memory for v in members) > DRAM_BYTES for members in sets):
                continue
            # DESIGN.md's load: compute, plus c(u) once per direction for every boundary node
            comm = [sum(workload.transfer_ms[u] for u in members if successors[u] - members)   # Out(S)
                    + sum(workload.transfer_ms[u] for u in range(len(instance.nodes))
                          if u not in members and successors[u] & members)                  # In(S)
                    for members in sets]
            picks = ([(d,) * stages for d in range(len(designs))] if homogeneous
                     else itertools.product(range(len(designs)), repeat=stages))
            for pick in picks:
                load = max(sum(times[d, v] for v in members) + comm[s]
                           for s, (members, d) in enumerate(zip(sets, pick)))
                watts = sum(designs[d].tdp_w for d in pick)
                options.append((load * watts if objective == "perf-per-watt" else load, watts))
    if not options:
        return math.inf, math.inf
    least = min(score for score, _ in options)
    return least, min(watts for score, watts in options if score <= tie_bound(least))


def test_two_vector_nodes_by_hand():
    # Node 0 -> node 1, each an add over 8,960,000 elements, c(0) = 0.01 ms; one 16×16 array, one vector core of
    # 128 or 256 lanes, 16 MB. An add reads and writes each element: 35,840,000 bytes.
    # 128 lanes: 70,000 cycles at 700 MHz = 0.1 ms (DRAM 0.0512 ms, buffer 35.84e6 / (64 · 16 · 7e8) = 0.05 ms).
    # 256 lanes: 35,000 cycles = 0.05 ms, DRAM 35.84e6 / 7e11 = 0.0512 ms: 0.0512 ms.
    # Area (mm²) = 100 + 256 · 0.0065 + lanes · 0.02 + 16 · 1.2; TDP (W) = 10 + 33.6 + area · 0.05
    # + 7e8 · (256 · 5e-12 + lanes · 10e-12) + 16 · 0.3, rounded to 2^-10 W: 128 lanes 123.424 mm², 56.3632 W
    # -> 56.36328125 W; 256 lanes 125.984 mm², 57.3872 W -> 57.38671875 W.
    # Throughput, 2 chips: both nodes on one 256-lane chip 0.1024 ms; a stage each on 256-lane chips
    # max(0.0512 + 0.01, 0.01 + 0.0512) = 0.0612 ms, any 128-lane stage >= 0.11 ms: 1000 / 0.0612 batches/s.
    # Per watt: one 256-lane chip 0.1024 · 57.38671875 = 5.8764 ms·W, two 0.0612 · 114.7734375 = 7.0241, one
    # 128-lane chip 0.2 · 56.36328125 = 11.27: 1000 / 5.8764 batches/s/W on one chip.
    model = _model([_node(0, _vector("add", 8_960_000)), _node(1, _vector("add", 8_960_000))], [(0, 1, 0.01)])
    grid = {"tensor_cores": [1], "array_width": [16], "array_depth": [16], "vector_cores": [1],
            "vector_lanes": [128, 256], "buffer_mb": [16]}
    fast = Design(1, 16, 16, 1, 256, 16.0)
    assert (fast.area_mm2, fast.tdp_w) == (pytest.approx(125.984), 57.38671875)
    assert Design(1, 16, 16, 1, 128, 16.0).tdp_w == 56.36328125
    for homogeneous in (False, True):
        for exhaustive in (False, True):
            run = dict(chips=2, power=300, grid=grid, homogeneous=homogeneous, exhaustive=exhaustive)
            throughput = placement.codesign(model, **run)
            assert throughput.status == "optimal" and throughput.designs == (fast, fast)
            assert throughput.time_per_input_ms == pytest.approx(0.0612, rel=1e-12)
            assert throughput.value == pytest.approx(1000 / 0.0612, rel=1e-12)
            per_watt = placement.codesign(model, objective="perf-per-watt", **run)
            assert per_watt.status == "optimal" and per_watt.designs == (fast,)
            assert per_watt.value == pytest.approx(1000 / (0.1024 * 57.38671875), rel=1e-12)
    assert brute_force(model, grid, 2, 606.68, 300, False, "throughput") == (pytest.approx(0.0612, rel=1e-12),
                                                                             2 * 57.38671875)
    assert brute_force(model, grid, 2, 606.68, 300, False, "perf-per-watt") == (
        pytest.approx(0.1024 * 57.38671875, rel=1e-12), 57.38671875)


def _tdp_range(grid: dict) -> tuple[float, float]:
    powers = [d.tdp_w for d in load_grid(grid).designs()]
    return min(powers), max(powers)


@pytest.mark.parametrize("model", [DIAMOND, HEAVY, TRAINING], ids=["diamond", "heavy", "training"])
@pytest.mark.parametrize("grid", [GRID_ARRAYS, GRID_VECTORS], ids=["arrays", "vectors"])
@pytest.mark.parametrize("share", [1.0, 0.5])
def test_exact_and_exhaustive_equal_the_brute_force(model, grid, share):
    low, high = _tdp_range(grid)
    power = low + share * (high - low)
    for chips in (1, 2, 3, 4):
        for homogeneous in (False, True):
            for objective in ("throughput", "perf-per-watt"):
                least, watts = brute_force(model, grid, chips, 606.68, power, homogeneous, objective)
                for exhaustive in (False, True):
                    found = placement.codesign(model, chips=chips, power=power, grid=grid, homogeneous=homogeneous,
                                               objective=objective, exhaustive=exhaustive)
                    case = (chips, homogeneous, objective, exhaustive)
                    if math.isinf(least):
                        assert found.status == "infeasible", case
                        continue
                    assert found.status == "optimal", case
                    score = found.time_per_input_ms * (found.power_w if objective == "perf-per-watt" else 1)
                    assert score == pytest.approx(least, rel=1e-9), case
                    assert found.value == pytest.approx(1000 / least, rel=1e-9), case
                    assert found.power_w == watts, case
                    assert len(found.designs) <= chips and all(d.tdp_w <= power for d in found.designs), case
