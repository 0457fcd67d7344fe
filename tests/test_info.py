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


def test_lower_bound_class_wins():
    # Node 3 (12 bytes) does not fit an accelerator (10): it must take 9 on the CPU.
    # class:   max(colour 7: min(acc 2+3, cpu 6+5) = 5, node 2: 4, node 3: 9, nodes 4, 5: 4) = 9
    # average: each node's cheapest time where it fits: (2 + 3 + 4 + 9 + 4 + 4) / 3 devices = 26/3
    info = instance_info(example(size3=12.0))
    assert info["lower_bound_class"] == 9.0
    assert info["lower_bound_average"] == pytest.approx(26 / 3)
    assert info["lower_bound"] == 9.0


def test_lower_bound_average_wins():
    # Node 3 fits (1 byte): class = max(5, 4, 1, 4, 4) = 5; average = (2+3+4+1+4+4)/3 = 6.
    info = instance_info(example(size3=1.0))
    assert info["lower_bound_class"] == 5.0
    assert info["lower_bound_average"] == 6.0
    assert info["lower_bound"] == 6.0


def test_lower_bound_colour_class_too_big_for_accelerator():
    # Colour 7 needs 6 + 6 = 12 bytes > 10: it must go to the CPU, 6 + 5 = 11.
    bound = throughput_lower_bound(example(size3=1.0, size01=6.0))
    assert bound == {"class": 11.0, "average": 6.0, "bound": 11.0}


def test_lower_bound_infinite_when_a_class_fits_nowhere():
    types = (DeviceType("acc", 1, 10.0, True), DeviceType("cpu", 0, math.inf, False))
    nodes = (Node(0, "a", (1.0, 1.0), 6.0, colour=1), Node(1, "b", (1.0, 1.0), 6.0, colour=1))
    problem = Instance(nodes, (), types)
    info = instance_info(problem)
    assert info["lower_bound"] == math.inf
    assert "a colour class fits no device" in format_info(info)


def test_lower_bound_ignores_absent_device_types():
    # The CPU is faster but there is none: the bound uses the accelerator times only.
    types = (DeviceType("acc", 2, math.inf, True), DeviceType("cpu", 0, math.inf, False))
    nodes = (Node(0, "a", (4.0, 1.0)), Node(1, "b", (2.0, 1.0)))
    bound = throughput_lower_bound(Instance(nodes, (Edge(0, 1),), types))
    assert bound == {"class": 4.0, "average": 3.0, "bound": 4.0}


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
    assert "throughput lower bound: 9  max(class 9, average 8.66667)" in lines


def test_format_info_shows_ideals_when_filled():
    info = instance_info(example()) | {"ideals": 1234, "supernodes": 5}
    lines = format_info(info).splitlines()
    assert "ideals:                 1,234" in lines
    assert "supernodes:             5" in lines
    info["ideals"] = "more than 200,000"
    assert "ideals:                 more than 200,000" in format_info(info).splitlines()


def test_info_on_bundled_instance():
    info = instance_info(read_instance(ROOT / "instances" / "bert-base-training.json"))
    assert (info["nodes"], info["forward"], info["backward"]) == (344, 172, 172)
    assert info["kind"] == "training"
    assert info["colour_classes"] == 172
    assert info["unsupported"] == {"accelerator": 0, "cpu": 0}
    # Every node is cheaper on the accelerator, so the average bound is the accelerator work / 5 devices.
    assert info["lower_bound_average"] == pytest.approx(info["work"]["accelerator"] / 5)
    assert 0 < info["lower_bound"] < info["work"]["accelerator"]
