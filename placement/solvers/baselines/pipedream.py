"""PipeDream-style planner: fuse the graph into a chain, solve the chain optimally (DESIGN.md §3).

Model
-----
PipeDream's planner partitions a *chain* of layers. A DAG becomes a chain by
fusing its branches: work on the supernodes of
:func:`placement.solvers.ideals.contract` (colour classes with their backward
mates, cycles of the extended forward graph merged; no zero-cost merges) and
call a supernode ``c`` a *cut vertex* when every other supernode is its
ancestor or its descendant. For cut vertices ``c_1 < … < c_m`` (topological
order) the sets ``down(c_j)`` (``c_j`` and its ancestors) form a chain of ideals

    ∅ ⊂ down(c_1) ⊂ … ⊂ down(c_m) ⊆ V,

and the blocks between consecutive ones (plus ``V \\ down(c_m)`` when not
empty) are the chain's links: each holds a cut vertex and every branch that
starts after the previous one. Every node of a block gets the block as its
colour class and the exact DP (:func:`placement.solvers.dp.solve_dp`) places
the resulting chain. Its plan keeps whole blocks, hence whole original colour
classes, on each device, so it is valid in the original graph and, the blocks
being consecutive links of one chain, a pipeline (class ``stages``); its
max-load is optimal among plans that cut the graph at cut vertices only, and
never below the DP optimum over all ideals.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from placement.problem.instance import Instance
from placement.solution import Solution
from placement.solvers.baselines.common import THROUGHPUT, check_objective, throughput_solution
from placement.solvers.dp import solve_dp
from placement.solvers.ideals import Contraction, contract


def chain_blocks(contraction: Contraction) -> list[int]:
    """Per supernode the index of its chain block (see the module docstring), in linear time.

    The supernodes are numbered in a topological order, so ``c`` is a cut vertex exactly when every
    supernode before it has a successor at or before ``c`` (paths move forward in the order, so each
    then ends at ``c``, the one sink of the supernodes up to it) and every supernode after it has a
    predecessor at or after ``c`` (each is then reached from ``c``). ``down(c)`` is then the supernodes
    ``0 .. c``, so a block is the stretch of the order after the previous cut vertex up to ``c``."""
    size = contraction.size
    first_successor = [size] * size    # the lowest successor of each supernode (size: none)
    last_predecessor = [-1] * size     # the highest predecessor (-1: none)
    for u, targets in enumerate(contraction.succ):
        for w in targets:
            first_successor[u] = min(first_successor[u], w)
            last_predecessor[w] = max(last_predecessor[w], u)
    lowest_after = [size] * (size + 1)   # lowest_after[c]: min last_predecessor over the supernodes after c
    for w in range(size - 1, 0, -1):
        lowest_after[w - 1] = min(lowest_after[w], last_predecessor[w])
    block = [0] * size
    reach, n_blocks = -1, 0              # reach: max first_successor over the supernodes before c
    for c in range(size):
        block[c] = n_blocks
        if reach <= c and lowest_after[c] >= c:
            n_blocks += 1
        reach = max(reach, first_successor[c])
    return block


def fused_problem(problem: Instance) -> tuple[Instance, int]:
    """``problem`` with every node coloured by its chain block; and the number of blocks."""
    contraction = contract(problem, merge_zero_cost=False)
    block = chain_blocks(contraction)
    nodes = list(problem.nodes)
    for s, members in enumerate(contraction.members):
        for v in members:
            nodes[v] = replace(nodes[v], colour=block[s])
    return Instance(tuple(nodes), problem.edges, problem.device_types, problem.name), len(set(block))


def solve_pipedream(problem: Instance, **options: Any) -> Solution:
    """The chain plan of the module docstring; options other than ``objective`` are ignored (a chain's ideals,
    the prefixes of its one order, are never refused for their count, so no ``max_ideals`` applies)."""
    check_objective(options, "pipedream", THROUGHPUT)
    start = time.perf_counter()
    fused, blocks = fused_problem(problem)
    chain = solve_dp(fused)
    stats = {"chain_blocks": blocks, "chain_max_load": chain.objective if chain.plan is not None else None}
    note = ("" if chain.plan is not None
            else "no pipeline of the fused chain satisfies the memory and support constraints")
    return throughput_solution(problem, chain.plan, "pipedream", start, stats, note, searched="stages")
