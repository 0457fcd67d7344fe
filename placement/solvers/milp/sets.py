"""MILP for the throughput objectives under ``sets`` contiguity (DESIGN.md §2).

Model
-----
The model of :mod:`.none` (rows 1–9, same data and variables) plus, for every forward
node ``v`` (instance node, not class) and slot ``s``, two closure variables
``a[v,s], d[v,s] ∈ [0,1]`` and, with ``g(v)`` the class of ``v`` and ``E_F`` the edges
between forward nodes:

10. ``a[v,s] ≥ x[g(v),s]``, and ``a[w,s] ≥ a[v,s]`` for ``(v,w) ∈ E_F``
    (``a[v,s] = 1`` when ``v`` or a forward ancestor of ``v`` is on slot ``s``)
11. ``d[v,s] ≥ x[g(v),s]``, and ``d[v,s] ≥ d[w,s]`` for ``(v,w) ∈ E_F``
    (``d[v,s] = 1`` when ``v`` or a forward descendant of ``v`` is on slot ``s``)
12. ``x[g(v),s] ≥ a[v,s] + d[v,s] − 1`` for ``v`` with forward predecessors and successors
    (a node between two nodes of slot ``s`` is on slot ``s``)

These are rows (C) of :mod:`.rows` for each slot over the forward graph: rows 10–11
only bound ``a`` and ``d`` from below, and the least values are the true closures, which
are 0/1 whenever ``x`` is; so row 12 admits exactly the assignments in which no forward
path leaves a device's forward nodes and re-enters them: the class ``sets`` (Tarnawski et al.'s contiguous sets). Backward nodes follow their forward mates
through their colour classes and are not constrained further. The slots, their symmetry
rows, ``stages=N`` and the counting rows are those of :mod:`.none` (all valid here: the rows
10–12 constrain each device's set alone, whatever its slot).

Row 9 of :mod:`.none`, the packing bound, is valid here too but not sought: it bounds the
heaviest groups packed with no regard to contiguity, far below the ``sets`` optima of the
published layer graphs (ResNet-50 inference 33.036 against 33.775), and its search took most
of the time of proofs it did not help (CP-SAT, one thread, 600 s limit, a shared 2-core machine:
ResNet-50 inference 102 s, of it 99 s the search; training 81 s, 79 s; InceptionV3 inference
98 s, 90 s). Without it every layer graph's ``sets`` optimum is proven in 0.3–51 s (ResNet-50
4.0 and 3.8 s, InceptionV3 7.3 and 23 s, GNMT 51 and 34 s; ``benchmarks/milp.py``). On GNMT,
whose packing bound is nearest its optimum (31.687 against 32.911), side by side: 46 s with it
and 50 s without (inference), 69 s and 30 s (training).

Start: the warm start, or the fill of whole parts of the graph (:func:`.driver.parts_start`) where the graph
has several and it is better; not the local search of :mod:`.none`, whose plans ignore contiguity. On 5,000
independent nodes of random times (4 accelerators, 1 CPU; CP-SAT, 1 thread, 60 s) the answer went from
6476.26 to 6183.05 (bound 6181.22), on 1,000 components of 5 nodes from 6467.51 to 6359.51.
"""

from __future__ import annotations

from typing import Any

from placement.problem.instance import Instance
from placement.plan import Plan
from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import GroupData
from placement.solvers.milp.driver import parts_start
from placement.solvers.milp.none import AssignmentVars, NoContiguity
from placement.solvers.milp.rows import convexity_rows


def _forward_edges(problem: Instance) -> tuple[list[int], list[tuple[int, int]]]:
    """Forward node positions and the edges between them."""
    forward = [i for i, n in enumerate(problem.nodes) if not n.backward]
    succ = problem.successors()
    edges = [(v, w) for v in forward for w in succ[v] if not problem.nodes[w].backward]
    return forward, edges


def _terms(V: AssignmentVars, v: int, s: int) -> list[tuple[float, Any]]:
    """Terms of ``x[v,s]``: none where it is fixed to 0."""
    return [(1, V.x[v, s])] if (v, s) in V.free else []


class ContiguousSets(NoContiguity):
    contiguity = "sets"
    packing_row = False   # module docstring

    searched_source = "the fill of whole parts"
    searched_what = "the fill of whole parts"

    def searched_start(self, problem: Instance, seconds: float) -> Plan | None:
        """The fill of whole parts of the graph (:func:`.driver.parts_start`): the local search ignores
        contiguity (on the eight published layer graphs its plan was never a valid ``sets`` plan, so it only
        took time), and a graph of one part, as those are, gets no start here."""
        return parts_start(problem, self.stages, seconds)

    def extra_rows(self, problem: Instance, d: GroupData, be: Backend, V: AssignmentVars) -> None:
        forward, edges = _forward_edges(problem)
        group = {u: g for g, members in enumerate(d.groups) for u in members}
        a: dict[tuple[int, int], Any] = {}
        dn: dict[tuple[int, int], Any] = {}
        for s in V.slots:                                                                 # (10)-(12)
            alpha, delta = convexity_rows(be, forward, edges, lambda v, s=s: _terms(V, group[v], s), f"s{s}")
            a.update({(v, s): var for v, var in alpha.items()})
            dn.update({(v, s): var for v, var in delta.items()})
        self._closures = (a, dn)

    def extra_hint(self, problem: Instance, d: GroupData, V: AssignmentVars, where: list[int],
                   values: dict[Any, float]) -> None:
        a, dn = self._closures
        if not a:
            return
        forward, edges = _forward_edges(problem)
        group = {u: g for g, members in enumerate(d.groups) for u in members}
        succ: dict[int, list[int]] = {v: [] for v in forward}
        pred: dict[int, list[int]] = {v: [] for v in forward}
        for v, w in edges:
            succ[v].append(w)
            pred[w].append(v)
        order = problem.topological_positions()
        order = [v for v in order if not problem.nodes[v].backward]
        for s in V.slots:
            on = {v: where[group[v]] == s - 1 for v in forward}
            up = {}
            for v in order:
                up[v] = on[v] or any(up[u] for u in pred[v])
            down = {}
            for v in reversed(order):
                down[v] = on[v] or any(down[w] for w in succ[v])
            for v in forward:
                values[a[v, s]] = float(up[v])
                values[dn[v, s]] = float(down[v])
