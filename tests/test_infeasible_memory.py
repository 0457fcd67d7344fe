"""An instance whose nodes need more memory than all devices of bounded memory hold: the reason is told."""

from __future__ import annotations

import pytest

import placement
from placement.problem import bounds
from placement.problem.instance import ACCELERATOR, CPU, DeviceType, Edge, Instance, Node


def chain(sizes: list[float], types: tuple[DeviceType, ...], cpu_times: bool = True) -> Instance:
    nodes = tuple(Node(i, f"n{i}", (1.0, 10.0 if cpu_times else None), memory=size, out_cost=0.5)
                  for i, size in enumerate(sizes, 1))
    return Instance(nodes, tuple(Edge(i, i + 1) for i in range(1, len(sizes))), types, name="tight")


TIGHT = (DeviceType(ACCELERATOR, 2, memory=20), DeviceType(CPU, 0, pays_comm=False))
REASON = ("5 nodes that only devices of bounded memory can run need 50 bytes in all, more than the 40 bytes "
          "that 2 accelerator devices of 20 bytes hold")


def test_reason_names_the_bytes_needed_and_held():
    assert bounds.memory_without_room(chain([10] * 5, TIGHT)) == REASON


def test_exact_on_sizes_as_written():
    # 0.1 + 0.2 as written is 0.3: it fits a bound of 0.3, though its floating-point sum is above it
    fitting = (DeviceType(ACCELERATOR, 1, memory=0.3), DeviceType(CPU, 0, pays_comm=False))
    assert bounds.memory_without_room(chain([0.1, 0.2], fitting)) is None


def test_no_reason_where_the_memory_fits_or_a_cpu_takes_the_rest():
    assert bounds.memory_without_room(chain([10] * 4, TIGHT)) is None
    with_cpu = (DeviceType(ACCELERATOR, 2, memory=20), DeviceType(CPU, 1, pays_comm=False))
    assert bounds.memory_without_room(chain([10] * 5, with_cpu)) is None
    # a node no CPU runs counts, one that a CPU runs does not
    nodes = (Node(1, "a", (1.0, None), memory=30), Node(2, "b", (1.0, 10.0), memory=30))
    one = Instance(nodes, (Edge(1, 2),), (DeviceType(ACCELERATOR, 1, memory=40), DeviceType(CPU, 1, pays_comm=False)))
    assert bounds.memory_without_room(one) is None


@pytest.mark.parametrize("method", ["dp", "auto"])
def test_infeasible_solve_says_why(method):
    result = placement.solve(chain([10] * 5, TIGHT), method=method)
    assert result.status == "infeasible"
    assert result.plan == ()
    assert result.message.endswith(REASON)
