"""instance_info / format_info on a hand-computed instance."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from placement.io.tarnawski import read_instance
from placement.problem.instance import DeviceType, Edge, Node, Instance
from placement.problem.bounds import throughput_lower_bound
from placement.report.info import format_info, instance_info

ROOT = Path(__file__).resolve().parent.parent


def example(size3: float = 12.0, size01: float = 4.0) -> Instance:
    """Two accelerators (memory 10, pay communication) and one CPU core.

    node  acc   cpu  memory  colour  backward
      0   2     6    size01    7
      1   3     5    size01    7
      2   --    4    0
      3   1     9    size3
      4   4     8    0
      5   4     8    0                  yes
    edges 0->1, 1->2, 2->3, 3->4, 3->5
    """
    types = (DeviceType("acc", 2, 10.0, True), DeviceType("cpu", 1, math.inf, False))
    nodes = (
        Node(0, "a", (2.0, 6.0), size01, colour=7),
        Node(1, "b", (3.0, 5.0), size01, colour=7),
        Node(2, "c", (None, 4.0), 0.0),
        Node(3, "d", (1.0, 9.0), size3),
        Node(4, "e", (4.0, 8.0), 0.0),
        Node(5, "f", (4.0, 8.0), 0.0, backward=True),
    )
    edges = tuple(Edge(u, v) for u, v in [(0, 1), (1, 2), (2, 3), (3, 4), (3, 5)])
    return Instance(nodes, edges, types, "example")


def test_counts_work_memory():
    info = instance_info(example())
    assert info["name"] == "example"
    assert (info["nodes"], info["edges"]) == (6, 5)
    assert (info["forward"], info["backward"], info["kind"]) == (5, 1, "training")
    # Colour 7 holds nodes 0 and 1; the other four are classes of their own.
    assert info["colour_classes"] == 5
    assert info["device_types"] == [
        {"name": "acc", "count": 2, "memory": 10.0, "pays_comm": True},
        {"name": "cpu", "count": 1, "memory": math.inf, "pays_comm": False},
    ]
    # acc: 2 + 3 + 1 + 4 + 4 = 14 (node 2 unsupported); cpu: 6 + 5 + 4 + 9 + 8 + 8 = 40.
    assert info["work"] == {"acc": 14.0, "cpu": 40.0}
    assert info["unsupported"] == {"acc": 1, "cpu": 0}
    # 4 + 4 + 0 + 12 + 0 + 0.
    assert info["total_memory"] == 20.0
    assert info["ideals"] is None


def test_lower_bound_weighted_wins_where_the_cpu_must_run_two_nodes():
    # Node 3 (12 bytes) does not fit an accelerator (10): it must take 9 on the CPU.
    # class:    max(colour 7: min(acc 2+3, cpu 6+5) = 5, node 2: 4, node 3: 9, nodes 4, 5: 4) = 9
    # average:  each node's cheapest time where it fits: (2 + 3 + 4 + 9 + 4 + 4) / 3 devices = 26/3
    # weighted: T ≥ Σ_v min(λ p_acc(v)/2, (1 − λ) p_cpu(v)) for every λ ∈ [0, 1], nodes 2 and 3 paying
    #           (1 − λ) p_cpu (the CPU only): at λ = 0 the CPU's nodes 2 and 3, 4 + 9 = 13, which the
    #           one CPU runs; the slope (2+3+4+4)/2 − 13 < 0 makes λ = 0 the best
    info = instance_info(example(size3=12.0))
    assert info["lower_bound_class"] == 9.0
    assert info["lower_bound_average"] == pytest.approx(26 / 3)
    assert info["lower_bound_weighted"] == 13.0
    assert info["lower_bound"] == 13.0


def test_lower_bound_weighted_beats_the_average():
    # Node 3 fits (1 byte): class = max(5, 4, 1, 4, 4) = 5; average = (2+3+4+1+4+4)/3 = 6.
    # weighted: node 2 is the CPU's alone; the others' breakpoints λ_v = p_cpu/(p_acc/2 + p_cpu) are
    # 6/7, 5/6.5, 9/9.5, 8/10, 8/10; below the smallest, 10/13 (node 1), every such node pays λ p_acc/2:
    # λ (2+3+1+4+4)/2 + (1 − λ) 4 = 4 + 3λ, rising, and beyond it node 1 pays (1 − λ) 5, so the bound
    # falls (slope 3 − 1.5 − 5 < 0): the best is λ = 10/13, 4 + 30/13 = 82/13
    info = instance_info(example(size3=1.0))
    assert info["lower_bound_class"] == 5.0
    assert info["lower_bound_average"] == 6.0
    assert info["lower_bound_weighted"] == pytest.approx(82 / 13, rel=1e-15)
    assert info["lower_bound"] == info["lower_bound_weighted"]


def test_lower_bound_weighted_is_null_where_it_does_not_apply():
    """Two types but no CPU (chain4), or three types with devices: no speed-weighted bound, which had been
    written 0.0 beside real bounds; the text leaves it out."""
    for name in ("chain4", "three-types"):
        info = instance_info(read_instance(ROOT / "instances" / "tiny" / f"{name}.json"))
        assert info["lower_bound_weighted"] is None
        assert "speed-weighted" not in format_info(info)
    info = instance_info(read_instance(ROOT / "instances" / "tiny" / "diamond-cpu.json"))
    assert info["lower_bound_weighted"] == pytest.approx(44 / 7, rel=1e-15)   # README: 6.28571
    assert "speed-weighted 6.28571)" in format_info(info)

def test_lower_bound_colour_class_too_big_for_accelerator():
    # Colour 7 needs 6 + 6 = 12 bytes > 10: it must go to the CPU, 6 + 5 = 11.
    bound = throughput_lower_bound(example(size3=1.0, size01=6.0))
    # (node by node both fit: the weighted bound is the 82/13 of the test above)
    assert bound == {"class": 11.0, "average": 6.0, "weighted": pytest.approx(82 / 13, rel=1e-15), "bound": 11.0}


def test_lower_bound_infinite_when_a_class_fits_nowhere():
    types = (DeviceType("acc", 1, 10.0, True), DeviceType("cpu", 0, math.inf, False))
    nodes = (Node(0, "a", (1.0, 1.0), 6.0, colour=1), Node(1, "b", (1.0, 1.0), 6.0, colour=1))
    problem = Instance(nodes, (), types)
    info = instance_info(problem)
    assert info["lower_bound"] == math.inf
    # 6 + 6 bytes on the one accelerator of 10, and no CPU: the class and the numbers are named
    assert info["no_plan"] == ("the colour class of nodes 0, 1 fits no device (together they need 12 bytes, acc "
                               "memory is 10; no cpu devices)")
    assert f"({info['no_plan']})" in format_info(info)
    roomier = (DeviceType("acc", 1, 12.0, True), types[1])
    assert instance_info(Instance(nodes, (), roomier))["no_plan"] is None


def test_lower_bound_ignores_absent_device_types():
    # The CPU is faster but there is none: the bound uses the accelerator times only.
    types = (DeviceType("acc", 2, math.inf, True), DeviceType("cpu", 0, math.inf, False))
    nodes = (Node(0, "a", (4.0, 1.0)), Node(1, "b", (2.0, 1.0)))
    bound = throughput_lower_bound(Instance(nodes, (Edge(0, 1),), types))
    assert bound == {"class": 4.0, "average": 3.0, "weighted": 0.0, "bound": 4.0}   # one type: no weighing


def test_format_info_aligned():
    text = format_info(instance_info(example()))
    lines = text.splitlines()
    assert lines[0] == "instance:               example"
    # Every value starts in the same column.
    columns = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in lines}
    assert len(columns) == 1
    assert "nodes:                  6 (5 forward, 1 backward)" in lines
    assert "devices (acc):          2, memory 10 bytes each, pays communication" in lines
    assert "devices (cpu):          1, memory unbounded, no communication" in lines
    assert "work (acc):             14 (unsupported nodes: 1)" in lines
    assert "ideals:                 not counted" in lines
    assert "throughput lower bound: 13  max(class 9, average 8.66667, speed-weighted 13)" in lines


def test_format_info_shows_ideals_when_filled():
    info = instance_info(example()) | {"ideals": 1234, "supernodes": 5}
    lines = format_info(info).splitlines()
    assert "ideals:                 1,234" in lines
    assert "supernodes:             5" in lines
    info |= {"ideals": None, "ideals_more_than": 200_000, "ideals_stopped_by": "max_ideals"}
    assert "ideals:                 more than 200,000" in format_info(info).splitlines()


def test_format_info_writes_a_count_past_10_to_the_21_as_its_float():
    # A count read as 1e300 is the float's integer, 301 digits of which only the first 17 were written;
    # 2^64 (20 digits) is written in full.
    info = instance_info(example().with_devices({"acc": int(1e300), "cpu": 2**64}))
    lines = format_info(info).splitlines()
    assert "devices (acc):          1e+300, memory 10 bytes each, pays communication" in lines
    assert "devices (cpu):          18446744073709551616, memory unbounded, no communication" in lines


def test_info_on_bundled_instance():
    info = instance_info(read_instance(ROOT / "instances" / "bert-base-training.json"))
    assert (info["nodes"], info["forward"], info["backward"]) == (344, 172, 172)
    assert info["kind"] == "training"
    assert info["colour_classes"] == 172
    assert info["unsupported"] == {"accelerator": 0, "cpu": 0}
    # Every node is cheaper on the accelerator, so the average bound is the accelerator work / 5 devices.
    assert info["lower_bound_average"] == pytest.approx(info["work"]["accelerator"] / 5)
    assert 0 < info["lower_bound"] < info["work"]["accelerator"]


def test_the_weighted_bound_is_at_least_the_average_where_two_types_exist():
    """At λ = a/(a + b) every term is min(p_A, p_B)/(a + b): the average bound is one of the values the
    weighted bound maximises over, so it is never below (here 2 accelerators, 1 CPU: λ = 2/3)."""
    for size3 in (1.0, 12.0):
        bound = throughput_lower_bound(example(size3=size3))
        assert bound["weighted"] >= bound["average"]


from hypothesis import HealthCheck, given, settings  # noqa: E402

from placement.testing.bruteforce import brute_force  # noqa: E402
from tests.strategies import problems, three_type_problems  # noqa: E402


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=7))
def test_the_lower_bound_is_a_bound_on_the_exhaustive_optimum(problem):
    """Every part of the bound is at most the exhaustive optimum of the loosest class (``none``), and the
    weighted one at least the average where two device types exist."""
    bound = throughput_lower_bound(problem)
    optimum = brute_force(problem, "none").objective
    for name in ("class", "average", "weighted", "bound"):
        assert bound[name] <= optimum * (1 + 1e-12), (name, bound, optimum)
    if sum(1 for t in problem.device_types if t.count) == 2:
        assert bound["weighted"] >= bound["average"] * (1 - 1e-12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(three_type_problems())
def test_the_lower_bound_holds_with_three_device_types(problem):
    bound = throughput_lower_bound(problem)
    assert bound["bound"] <= brute_force(problem, "none").objective * (1 + 1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=7, training=True))
def test_the_gpipe_bound_is_a_bound_on_the_exhaustive_optimum(problem):
    """max FW + max BW: each term at least the class, average and speed-weighted bounds of its nodes."""
    from placement.problem.bounds import gpipe_lower_bound, weighted_average

    optimum = brute_force(problem, "none", objective="throughput-gpipe").objective
    assert gpipe_lower_bound(problem) <= optimum * (1 + 1e-12)
    assert weighted_average(problem, False) + weighted_average(problem, True) <= optimum * (1 + 1e-12)


def test_ideals_are_counted_no_further_than_the_dp_could_hold_them(monkeypatch):
    """Two independent chains of 3 nodes have (3 + 1)^2 = 16 ideals. Counting runs in one compiled call that
    Ctrl-C cannot stop, so past the most ideals whose tables fit in memory it stops and says why (a limit of
    10^12 counted for hours)."""
    from placement.solvers import dp_table
    from placement.summary import describe

    nodes = tuple(Node(i, f"n{i}", (1.0, 2.0)) for i in range(6))
    problem = Instance(nodes, (Edge(0, 1), Edge(1, 2), Edge(3, 4), Edge(4, 5)),
                       (DeviceType("accelerator", 2), DeviceType("cpu", 1, pays_comm=False)))
    def counted(info: dict) -> tuple:
        return info["ideals"], info.get("ideals_more_than"), info.get("ideals_stopped_by")

    assert counted(describe(problem, max_ideals=10 ** 12)) == (16, None, None)   # 4 · 4: two chains of three
    assert counted(describe(problem, max_ideals=10)) == (None, 10, "max_ideals")
    per_ideal = dp_table.bytes_per_ideal(dp_table.value_columns(2), 6, 2, 1, False)
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 12 * per_ideal)
    stopped = describe(problem, max_ideals=10 ** 12)
    assert counted(stopped) == (None, 12, "memory")
    assert "ideals:                 more than 12 (the most the DP's tables could hold in the memory available here)" \
        in format_info(stopped).splitlines()
    assert counted(describe(problem, max_ideals=10)) == (None, 10, "max_ideals")
    # one chain of the six: its 7 ideals, the prefixes of its one order, whatever the limit (the DP runs it)
    chain = Instance(nodes, tuple(Edge(i, i + 1) for i in range(5)), problem.device_types)
    assert counted(describe(chain, max_ideals=3)) == (7, None, None)


def test_a_device_type_name_that_does_not_print_is_escaped():
    """A type named ``fa\\nst`` split its ``devices`` and ``work`` lines in two; each is one line, the name escaped
    as the tables write it."""
    types = (DeviceType("fa\nst", 1, 10.0, True), DeviceType("cpu", 1, math.inf, False))
    problem = Instance((Node(1, "a", (1.0, 2.0)),), (), types, name="x")
    lines = format_info(instance_info(problem)).splitlines()
    assert [line.split(":")[0] for line in lines if "fa" in line] == ["devices (fa\\nst)", "work (fa\\nst)"]


def test_info_says_no_plan_exists_where_the_nodes_need_more_memory_than_the_devices_hold():
    types = (DeviceType("acc", 2, 10.0, True), DeviceType("cpu", 0, math.inf, False))
    nodes = tuple(Node(i, f"n{i}", (1.0, 1.0), 6.0) for i in range(4))
    info = instance_info(Instance(nodes, (), types))
    assert info["lower_bound"] == 2.0   # every class fits, so the bound itself is finite
    assert info["no_plan"] == ("4 nodes that only devices of bounded memory can run need 24 bytes in all, more than "
                               "the 20 bytes that 2 acc devices of 10 bytes hold")
    assert format_info(info).splitlines()[-1] == f"no plan:                {info['no_plan']}"
    assert instance_info(Instance(nodes[:3], (), types))["no_plan"] is None
