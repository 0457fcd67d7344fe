"""Graph partitioner: METIS k-way over colour classes (throughput baseline of DESIGN.md §3).

Model
-----
The undirected graph of colour classes that are supported on accelerators
(each class one vertex) is split into ``k`` parts, one per accelerator, by
METIS (through the ``pymetis`` binding: ``pip install 'placement[partition]'``),
which balances the vertex weights and minimises the weight of the cut edges:

* vertex weight of class ``X``: its accelerator time ``Σ_{v∈X} p_acc(v)``;
* edge weight of classes ``{X, Y}``: ``Σ c(u)`` over the nodes ``u`` of ``X``
  with a successor in ``Y`` plus over the nodes of ``Y`` with a successor in
  ``X`` — what the two accelerators pay if the edge is cut.

METIS takes positive integers: times and costs are scaled by ``10**6 / max``
and rounded, edge weights to at least 1 (vertex weights may be 0). Classes
unsupported on accelerators go to CPU core 0. Memory and contiguity are
ignored, as by a general-purpose partitioner: the Solution says which class
the plan belongs to, and a memory violation makes its status ``error`` with the
evaluator's first violation in the message. Option ``seed`` (default 0) seeds
METIS; other options are ignored.
"""

from __future__ import annotations

import time
from typing import Any

from placement.errors import SolverUnavailableError
from placement.problem.instance import ACCELERATOR, CPU, Instance, class_index
from placement.solution import Solution
from placement.solvers.baselines.common import THROUGHPUT, build_plan, check_objective, throughput_solution, two_types
from placement.solvers.native_output import stdout_to

SCALE = 10 ** 6


def _pymetis() -> Any:
    try:
        import pymetis
    except ImportError:
        raise SolverUnavailableError("method 'partition' needs METIS through pymetis: "
                                     "pip install 'placement[partition]'") from None
    return pymetis


def _scaled(values: list[float], minimum: int) -> list[int]:
    top = max(values, default=0.0)
    if top <= 0:
        return [minimum] * len(values)
    return [max(minimum, round(v * SCALE / top)) for v in values]


def solve_partition(problem: Instance, **options: Any) -> Solution:
    """METIS k-way partition of the colour classes onto the accelerators; option ``seed``."""
    check_objective(options, "partition", THROUGHPUT)
    seed = options.get("seed") or 0
    start = time.perf_counter()
    kinds = two_types(problem, "partition")
    nodes = problem.nodes
    classes = problem.colour_classes()
    class_of = class_index(classes, len(nodes))
    on_acc = [kinds.acc is not None and kinds.accelerators > 0
              and all(nodes[v].times[kinds.acc] is not None for v in members) for members in classes]
    vertex = {c: i for i, c in enumerate(c for c in range(len(classes)) if on_acc[c])}
    held: dict[tuple[str, int], list[int]] = {}
    for c, members in enumerate(classes):
        if not on_acc[c]:
            held.setdefault((CPU, 0), []).extend(members)
    stats: dict[str, Any] = {"vertices": len(vertex), "parts": kinds.accelerators}
    if vertex:
        parts = _partition(problem, classes, class_of, vertex, kinds.acc, kinds.accelerators, seed, stats)
        for c, i in vertex.items():
            held.setdefault((ACCELERATOR, parts[i]), []).extend(classes[c])
    solution = throughput_solution(problem, build_plan(problem, held), "partition", start, stats)
    remark = f"the partitioner ignores contiguity and memory; the plan is in class {solution.contiguity}"
    solution.message = f"{solution.message}; {remark}" if solution.message else remark
    return solution


def _partition(problem: Instance, classes: list[list[int]], class_of: list[int], vertex: dict[int, int],
               acc: int, k: int, seed: int, stats: dict[str, Any]) -> list[int]:
    """Part index per vertex (0 .. k-1)."""
    n = len(vertex)
    if k == 1 or n == 1:
        return [0] * n
    nodes = problem.nodes
    weight: dict[tuple[int, int], float] = {}
    for u, targets in enumerate(problem.successors()):
        cu = class_of[u]
        if cu not in vertex:
            continue
        reached = {class_of[w] for w in targets} - {cu}
        for cw in reached:
            if cw in vertex:
                key = (min(vertex[cu], vertex[cw]), max(vertex[cu], vertex[cw]))
                weight[key] = weight.get(key, 0.0) + nodes[u].out_cost
    adjacency: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for (i, j), w in sorted(weight.items()):
        adjacency[i].append((j, w))
        adjacency[j].append((i, w))
    starts, adjacent, costs = [0], [], []
    for row in adjacency:
        for j, w in row:
            adjacent.append(j)
            costs.append(w)
        starts.append(len(adjacent))
    vweights = [0.0] * n
    for c, i in vertex.items():
        vweights[i] = sum(nodes[v].times[acc] for v in classes[c])  # type: ignore[misc]
    pymetis = _pymetis()
    with stdout_to(None):   # METIS prints its complaints ("Cannot bisect a graph with 0 vertices!") there
        result = pymetis.part_graph(k, pymetis.CSRAdjacency(starts, adjacent), vweights=_scaled(vweights, 0),
                                    eweights=_scaled(costs, 1) if costs else None,
                                    options=pymetis.Options(seed=seed))
    stats["edge_cut"] = int(result.edge_cuts)
    return [int(p) for p in result.vertex_part]
