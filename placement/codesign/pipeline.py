"""A model on chips of given designs: the placement instance, the DP over ideals with a design
choice per stage, and the check of a plan.

Model
-----
With designs ``D = (d_1, …, d_T)``, the instance of a workload (:mod:`.workload`) has one
device type per design (named by its label, memory :data:`.template.DRAM_BYTES`, paying
communication), node ``v`` taking ``time_d(v)`` (:mod:`.opcost`) on type ``d`` and transfer cost
``c(v)`` on the template's link. The load of a chip is DESIGN.md §2's: compute plus transfers.

:func:`design_dp` runs the DP of :mod:`placement.solvers.dp` over that instance, with the
layers replaced by *pools* of chips: a layer is a number ``c`` of chips whose designs are
still free, and the transition that places a block ``X`` on a chip of design ``t`` goes from
layer ``c − 1`` to ``c`` for every ``t`` (``prev[c][t] = c − 1``)::

    dp[0][∅] = 0
    dp[c][I] = min( dp[c−1][I],  min_t min_{I' ⊊ I} max(dp[c−1][I'], load_t(I \\ I')) )

so ``dp[k][V]`` is the least max-load of a pipeline of at most ``k`` chips, each of any design of
``D`` (the heterogeneous co-design for throughput). Throughput per watt with a design per stage
has its own DP over the same ideals (:mod:`.frontier`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from placement.codesign.template import DRAM_BYTES, Design
from placement.codesign.workload import Workload
from placement.plan import Plan
from placement.problem.instance import DeviceType, Instance, Node
from placement.solvers import _dp_kernels as K
from placement.solvers.chain_dp import upper_bound
from placement.solvers.dp_table import Layers, best_plan, build_graph, extract, fill, prepare
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, enumerate_ideals

def design_instance(workload: Workload, designs: Sequence[Design], times: np.ndarray,
                    counts: Sequence[int]) -> Instance:
    """The instance of ``workload`` on ``counts[t]`` chips of design ``designs[t]`` whose node times are
    the rows ``times[t]`` (ms, by node position)."""
    types = tuple(DeviceType(d.label, int(c), float(DRAM_BYTES), True) for d, c in zip(designs, counts))
    columns = np.asarray(times, dtype=np.float64).T.tolist()
    nodes = tuple(Node(n.id, n.name, tuple(row), n.memory, n.backward, n.colour, cost)
                  for n, row, cost in zip(workload.instance.nodes, columns, workload.transfer_ms))
    return Instance(nodes, workload.instance.edges, types, workload.name)


def pool_layers(n_types: int, chips: int) -> Layers:
    """Layers ``c = 0..chips`` of chips of any design (module docstring)."""
    counts = np.repeat(np.arange(chips + 1, dtype=np.int64)[:, None], n_types, axis=1)
    prev = np.repeat((np.arange(chips + 1, dtype=np.int64) - 1)[:, None], n_types, axis=1)
    return Layers(counts, prev, chips)


@dataclass(frozen=True)
class DPRun:
    """The best plan of one DP over a design instance: its max load (ms per batch) and plan, and the DP's
    work (``ideals``, ``blocks``: blocks whose load it computed)."""

    time_ms: float
    plan: Plan | None
    ideals: int
    blocks: int


def design_dp(problem: Instance, chips: int, *, max_ideals: int = DEFAULT_MAX_IDEALS) -> DPRun:
    """The heterogeneous throughput DP (pool layers) over ``problem``'s design types, at most ``chips``
    chips; the upper bound that prunes it comes from the chain DP on the same layers."""
    contraction = contract(problem)
    graph = build_graph(problem, contraction)
    layers = pool_layers(len(problem.device_types), chips)
    family = enumerate_ideals(contraction, max_ideals)
    ub, _ = upper_bound(problem, graph, layers, contraction, None)
    table, value, plan = best_plan(problem, graph, layers, family, ub, None, "codesign")
    return DPRun(value if plan is not None else math.inf, plan, len(family[0]), int(table.counters[K.EVALUATED]))


def layer_plans(problem: Instance, layers: Layers, *, max_ideals: int = DEFAULT_MAX_IDEALS,
                ) -> tuple[list[tuple[int, float, Plan]], int, int]:
    """One DP over ``layers`` (no upper bound), then the best plan of every layer that has one, as
    ``(layer, max load, plan)``; with the number of ideals and of blocks evaluated."""
    contraction = contract(problem)
    graph = build_graph(problem, contraction)
    family = enumerate_ideals(contraction, max_ideals)
    data = prepare(graph, layers, family)
    table = fill(problem, graph, layers, data, math.inf, None, "codesign")
    out = []
    for L in range(len(layers.counts)):
        if L == 0:
            continue
        value, plan = extract(problem, graph, Layers(layers.counts, layers.prev, L), table)
        if plan is not None:
            out.append((L, value, plan))
    return out, len(family[0]), int(table.counters[K.EVALUATED])


def stage_designs(plan: Plan, designs: Sequence[Design]) -> tuple[Design, ...]:
    """The design of every non-empty stage of ``plan``, in pipeline order."""
    by_label = {d.label: d for d in designs}
    return tuple(by_label[dev.type] for dev in plan.devices if dev.nodes)
