"""MILP for the throughput objectives under ``stages`` contiguity (DESIGN.md §2, §3).

Model
-----
Data (:mod:`.data`): the supernodes ``v ∈ V`` of :func:`placement.solvers.ideals.contract`
(colour classes merged, forward and backward mates together) with the edges ``u → w`` of
the contracted extended forward graph H; device types ``k`` with ``count_k > 0``, memory
bound ``M_k`` and ``pays_k``; ``p_k(v)`` the summed time of ``v``'s nodes on ``k`` and
``m(v)`` their memory; ``F(v)`` the types that support every node of ``v`` and have
``m(v) ≤ M_k``; cost nodes ``u`` with ``r(u)``, ``W(u)`` and ``c(u)``. Slots
``s = 1..S``, ``S = Σ_k count_k``.

Variables: ``y[s,k] ∈ {0,1}`` (slot s has type k), ``z[v,s] ∈ {0,1}`` (v is in a
slot ≤ s), ``b[u,s] ∈ {0,1}`` (u is a boundary node of slot s), ``T ≥ 0`` (or
``TF, TB ≥ 0`` for ``throughput-gpipe``); ``x[v,s] = z[v,s] − z[v,s−1]`` (v is in
slot s; ``z[v,0] = 0``).

1. ``Σ_k y[s,k] ≤ 1``                                   (one type per slot)
2. ``Σ_s y[s,k] ≤ count_k``                             (device counts)
3. ``z[v,s] ≤ z[v,s+1]``, ``z[v,S] = 1``                 (cumulative ideals, all placed)
4. ``z[u,s] ≥ z[w,s]`` for every H-edge ``u → w``       (each ``{v : z[v,s] = 1}`` is an ideal)
5. ``x[v,s] ≤ Σ_{k ∈ F(v)} y[s,k]``                     (support, per-node memory, a used slot has a type)
6. ``Σ_v m'(v) x[v,s] ≤ Σ_k min(M_k, Σ_v m'(v)) y[s,k]`` (memory, where some bound can bind; ``m'(v)`` is
   ``min(m(v), M*)``, ``M*`` the largest bound below the total: :func:`.rows.capped_sizes`)
7. boundary rows (B) of :mod:`.rows` for every slot
8. load rows (L) of :mod:`.rows` for every slot, with ``x`` as above
9. ``Σ_k y[s,k] ≤ Σ_v x[v,s]`` and ``Σ_k y[s+1,k] ≤ Σ_k y[s,k]``        (symmetry: used slots
   are the non-empty ones, and they come first)

Rows 1–2 are :func:`.rows.slot_types` and rows 5–9 :func:`.rows.slot_rows`. Objective (O) of
:mod:`.rows`: minimise ``T`` (or ``TF + TB``). The non-empty slots in slot order are a pipeline (a
chain of ideals of H), so the decoded plan is in ``stages``; conversely every ``stages`` plan of the
supernodes is a solution, with the objective its value. For ``throughput`` the supernodes merge
zero-cost classes as the DP of :mod:`placement.solvers.dp` does (same optimum, proofs in
:mod:`placement.solvers.ideals`); for ``throughput-gpipe`` only colour classes and
strongly connected parts of H are merged.

Exactly ``N`` stages (``stages=N``): ``S = N`` and row 1 reads ``Σ_k y[s,k] = 1``, so every
slot is used and, by row 9, non-empty: the solutions are the ``stages`` plans with exactly
``N`` non-empty devices. Row 9 stays valid: such a plan, its devices in pipeline order,
fills slots ``1..N``. Zero-cost classes are then not merged (a zero-time class may be a
stage of its own; see :mod:`placement.solvers.dp`), for either objective.

Solver settings and what was measured (InceptionV3 training, the slowest layer graph; CP-SAT, one
thread). Two changes are kept:

* the full LP relaxation (:attr:`full_relaxation`): enforced load rows in the LP, about half the
  time;
* no cuts of CP-SAT's own (:attr:`solver_cuts`): the plain LP is cheaper at every node. Over seeds
  0–9 the solver took 2.5–5.6 s (median 4.2) without them and 3.2–12.8 s (median 5.0) with them,
  on the model whose cost nodes are merged as :func:`.data.prepare` states (325 instead of 650
  indicators per slot, which alone took the median of seeds 0–2 from 10.2 to 7.2 s).

None of these shortened the search:

* a row ``T ≥`` a constant below the optimum: the average bound 101.5, the packing floor of
  :mod:`.packing` 116.6, 120, even 122;
* a load row per slot that needs no type, ``Σ_v min_k p_k(v) x[v,s] ≤ T``;
* CP-SAT's pseudo-cost branching or objective shaving (same times), LP-guided branching,
  core-based or bound-tree search (no proof in 30 s), rows added eagerly to the LP (about
  twice as slow), zero-half cuts off or fewer cuts (no change beyond the seed's), probing off,
  symmetry detection off, an objective cut, or interleaved subsolvers (three times as slow);
* fixing the ``z`` that prefix and suffix arguments decide (1,520 of 1,956): twice as slow;
* fixing the slot types to the optimum's sequence: 3.3 s for that one sequence alone, and the
  other sequences would each need their own proof;
* asking only for a plan below the optimum (a feasibility model): 16–19 s.

The HiGHS and SCIP backends take about 100 s; CBC does not prove the optimum in 120 s.

Start: the warm start (the DP's optimum, or the chain DP's pipeline where the DP refuses), or the fill of whole
parts of the graph (:func:`.driver.parts_start`) where the graph has several and it is better. On 5,000
independent nodes of random times (4 accelerators, 1 CPU; CP-SAT, 1 thread, 60 s) the answer went from the
chain DP's 6463.39 to 6182.25 (bound 6181.22), on 1,000 components of 5 nodes from 6441.32 to 6360.33.

Numbers and statuses: :mod:`.data` (integer scaling for CP-SAT) and :mod:`.outcome`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solvers.ideals import contract
from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import GroupData
from placement.solvers.milp.driver import Formulation, parts_start, slot_of_groups, type_position
from placement.solvers.milp.rows import (boundary_values, minimise, objective_vars, slot_rows, slot_types,
                                         target_values)
from placement.verification.evaluate import pipeline_order


@dataclass
class _Vars:
    y: dict[tuple[int, int], Any]
    z: dict[tuple[int, int], Any]
    b: dict[tuple[int, int], Any]
    targets: list[Any]
    succ: list[list[int]]


def _x(z: dict[tuple[int, int], Any], v: int, s: int) -> list[tuple[float, Any]]:
    """Terms of ``x[v,s] = z[v,s] − z[v,s−1]``."""
    return [(1, z[v, s])] + ([(-1, z[v, s - 1])] if s > 1 else [])


class Stages(Formulation):
    contiguity = "stages"
    #: CP-SAT proves InceptionV3 training in about half the time with enforced load rows in its LP,
    #: and faster still without its own cuts (the module docstring; ``benchmarks/milp.py``, README)
    full_relaxation = True
    solver_cuts = False

    searched_source = "the fill of whole parts"
    searched_what = "the fill of whole parts"

    def searched_start(self, problem: Instance, seconds: float) -> Plan | None:
        """The fill of whole parts of the graph (:func:`.driver.parts_start`); none on a graph of one part."""
        return parts_start(problem, self.stages, seconds)

    def groups(self, problem: Instance, objective: str) -> list[list[int]]:
        self._contraction = contract(problem, merge_zero_cost=objective == "throughput" and self.stages is None)
        return [list(m) for m in self._contraction.members]

    def build(self, problem: Instance, d: GroupData, be: Backend, objective: str) -> _Vars:
        n, S = len(d.groups), d.slots
        succ = self._contraction.succ
        slots = range(1, S + 1)
        y = slot_types(be, d)                                                                  # (1), (2)
        z = {(v, s): be.bool_var(f"z[{v},{s}]", fixed=1 if s == S else None) for v in range(n) for s in slots}
        b = ({(i, s): be.bool_var(f"b[{cn.u},{s}]") for i, cn in enumerate(d.cost_nodes) for s in slots}
             if any(d.pays) else {})
        targets = objective_vars(be, d, objective)
        for v in range(n):
            for s in slots[:-1]:
                be.add([(1, z[v, s]), (-1, z[v, s + 1])], hi=0)                                # (3)
            for w in succ[v]:
                for s in slots[:-1]:
                    be.add([(1, z[w, s]), (-1, z[v, s])], hi=0)                                # (4)
        for s in slots:                                                                        # (5)-(9)
            slot_rows(be, d, objective, s, lambda v, s=s: _x(z, v, s), y, b, targets)
        minimise(be, targets)
        return _Vars(y, z, b, targets, succ)

    def exclude(self, be: Backend, d: GroupData, V: _Vars, k: int, groups: Sequence[int]) -> bool:
        """``Σ_{v ∈ groups} x[v,s] + y[s,k] ≤ |groups|`` for every slot ``s`` (:meth:`.driver.Formulation.exclude`;
        ``x`` as in the module docstring)."""
        for s in range(1, d.slots + 1):
            be.add([term for v in groups for term in _x(V.z, v, s)] + [(1, V.y[s, k])], hi=len(groups))
        return True

    def hint(self, problem: Instance, d: GroupData, V: _Vars, plan: Plan,
             objective: str) -> tuple[dict[Any, float] | None, str]:
        order = pipeline_order(problem, plan)
        if order is None:
            return None, "warm start ignored: the plan is not a pipeline"
        devices = [plan.devices[i] for i in order if plan.devices[i].nodes]
        if len(devices) > d.slots:
            return None, "warm start ignored: more devices than slots"
        where, why = slot_of_groups(problem, d, devices)
        if where is None:
            return None, why
        kinds = [type_position(problem, d, dev.type) for dev in devices]
        if None in kinds:
            return None, "warm start ignored: unknown device type"
        values: dict[Any, float] = {}
        used: list[tuple[set[int], int]] = []
        for s in range(1, d.slots + 1):
            k = kinds[s - 1] if s <= len(devices) else None
            for kk in range(len(d.types)):
                values[V.y[s, kk]] = 1.0 if kk == k else 0.0
            for v in range(len(d.groups)):
                if s < d.slots:
                    values[V.z[v, s]] = 1.0 if where[v] < s else 0.0
            held = {v for v in range(len(d.groups)) if where[v] == s - 1}
            if V.b:
                for i, bv in enumerate(boundary_values(d, held)):
                    values[V.b[i, s]] = bv
            if k is not None:
                used.append((held, k))
        values.update(zip(V.targets, target_values(d, objective, used)))
        return values, ""

    def decode(self, problem: Instance, d: GroupData, V: _Vars, value: Callable[[Any], float]) -> Plan | None:
        devices = []
        placed = 0
        for s in range(1, d.slots + 1):
            members = [v for v in range(len(d.groups))
                       if value(V.z[v, s]) > 0.5 and (s == 1 or value(V.z[v, s - 1]) < 0.5)]
            if not members:
                continue
            ks = [k for k in range(len(d.types)) if value(V.y[s, k]) > 0.5]
            if len(ks) != 1:
                return None
            placed += len(members)
            ids = tuple(problem.nodes[u].id for v in members for u in d.groups[v])
            devices.append(DeviceAssignment(problem.device_types[d.types[ks[0]]].name, ids))
        if placed != len(d.groups):
            return None
        return Plan(tuple(devices))
