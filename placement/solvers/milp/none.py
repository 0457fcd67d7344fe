"""MILP for the throughput objectives with no contiguity (class ``none``; DESIGN.md §2).

Model
-----
Data (:mod:`.data`): the colour classes ``v ∈ V`` of the instance (an uncoloured node is
a class of its own), device types ``k`` with ``count_k > 0``, ``p_k(v)``, ``m(v)``,
``F(v)`` and the cost nodes as in :mod:`.stages`. Slots ``s = 1..S``, ``S = Σ_k count_k``.

Variables: ``y[s,k] ∈ {0,1}`` (slot s has type k), ``x[v,s] ∈ {0,1}`` (class v is on
slot s), ``b[u,s] ∈ {0,1}`` (u is a boundary node of slot s), ``T ≥ 0`` (or ``TF, TB``).

1. ``Σ_k y[s,k] ≤ 1``                                   (one type per slot)
2. ``Σ_s y[s,k] ≤ count_k``                             (device counts)
3. ``Σ_s x[v,s] = 1``                                   (every class on one slot)
4. ``x[v,s] ≤ Σ_{k ∈ F(v)} y[s,k]``                     (support, per-class memory, a used slot has a type)
5. ``Σ_v m(v) x[v,s] ≤ Σ_k min(M_k, Σ_v m(v)) y[s,k]``  (memory; only when some bound can bind)
6. boundary rows (B) of :mod:`.rows` for every slot
7. load rows (L) of :mod:`.rows` for every slot
8. symmetry: ``Σ_k y[s,k] ≤ Σ_v x[v,s]``, ``Σ_k y[s+1,k] ≤ Σ_k y[s,k]`` and
   ``x[v,s] = 0`` for ``s > v + 1`` (classes numbered from 0). Valid: slots of one type
   are interchangeable and a slot's type is a variable, so any plan can list its
   non-empty devices first, ordered by their lowest class, and the lowest class of the
   ``s``-th device is at least ``s − 1``.

Rows 1–2 are :func:`.rows.slot_types` and rows 4–8 :func:`.rows.slot_rows`, shared with
:mod:`.stages`. Objective (O) of :mod:`.rows`. Every assignment of classes to devices is a solution, with
the objective its value; decoded plans list the devices in slot order.

Exactly ``N`` non-empty devices (``stages=N``): ``S = N`` and row 1 reads ``Σ_k y[s,k] = 1``;
with row 8 every slot is then non-empty. Row 8 stays valid: a plan with exactly ``N``
non-empty devices, listed by their lowest class, fills slots ``1..N``, and its ``s``-th
device's lowest class is still at least ``s − 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import GroupData
from placement.solvers.milp.driver import Formulation, slot_of_groups, type_position
from placement.solvers.milp.rows import (boundary_values, minimise, objective_vars, slot_rows, slot_types,
                                         target_values)


@dataclass
class AssignmentVars:
    y: dict[tuple[int, int], Any]
    x: dict[tuple[int, int], Any]
    b: dict[tuple[int, int], Any]
    targets: list[Any]


class NoContiguity(Formulation):
    contiguity = "none"

    def groups(self, problem: Instance, objective: str) -> list[list[int]]:
        return problem.colour_classes()

    def build(self, problem: Instance, d: GroupData, be: Backend, objective: str) -> AssignmentVars:
        n, S = len(d.groups), d.slots
        slots = range(1, S + 1)
        y = slot_types(be, d)                                                                  # (1), (2)
        x = {(v, s): be.bool_var(f"x[{v},{s}]", fixed=0 if s > v + 1 else None)           # (8), last part
             for v in range(n) for s in slots}
        b = ({(i, s): be.bool_var(f"b[{cn.u},{s}]") for i, cn in enumerate(d.cost_nodes) for s in slots}
             if any(d.pays) else {})
        targets = objective_vars(be, d, objective)
        for v in range(n):
            be.add([(1, x[v, s]) for s in slots], lo=1, hi=1)                                  # (3)
        for s in slots:                                                                        # (4)-(8)
            slot_rows(be, d, objective, s, lambda v, s=s: [(1, x[v, s])], y, b, targets)
        self.extra_rows(problem, d, be, x)
        minimise(be, targets)
        return AssignmentVars(y, x, b, targets)

    def extra_rows(self, problem: Instance, d: GroupData, be: Backend, x: dict[tuple[int, int], Any]) -> None:
        """Rows a stricter contiguity class adds (none here)."""

    def extra_hint(self, problem: Instance, d: GroupData, V: AssignmentVars, where: list[int],
                   values: dict[Any, float]) -> None:
        """Values of the variables :meth:`extra_rows` added (none here)."""

    def hint(self, problem: Instance, d: GroupData, V: AssignmentVars, plan: Plan,
             objective: str) -> tuple[dict[Any, float] | None, str]:
        devices = [dev for dev in plan.devices if dev.nodes]
        if len(devices) > d.slots:
            return None, "warm start ignored: more devices than slots"
        where, why = slot_of_groups(problem, d, devices)
        if where is None:
            return None, why
        # canonical order: devices by their lowest class (see row 8)
        lowest = {s: min(v for v in range(len(d.groups)) if where[v] == s) for s in set(where)}
        rank = {s: r for r, s in enumerate(sorted(lowest, key=lowest.__getitem__))}
        where = [rank[s] for s in where]
        kinds = {rank[s]: type_position(problem, d, devices[s].type) for s in lowest}
        if None in kinds.values():
            return None, "warm start ignored: unknown device type"
        values: dict[Any, float] = {}
        used: list[tuple[set[int], int]] = []
        for s in range(1, d.slots + 1):
            k = kinds.get(s - 1)
            for kk in range(len(d.types)):
                values[V.y[s, kk]] = 1.0 if kk == k else 0.0
            held = {v for v in range(len(d.groups)) if where[v] == s - 1}
            for v in range(len(d.groups)):
                values[V.x[v, s]] = 1.0 if v in held else 0.0
            if V.b:
                for i, bv in enumerate(boundary_values(d, held)):
                    values[V.b[i, s]] = bv
            if k is not None:
                used.append((held, k))
        self.extra_hint(problem, d, V, where, values)
        values.update(zip(V.targets, target_values(d, objective, used)))
        return values, ""

    def decode(self, problem: Instance, d: GroupData, V: AssignmentVars,
               value: Callable[[Any], float]) -> Plan | None:
        devices = []
        placed = 0
        for s in range(1, d.slots + 1):
            members = [v for v in range(len(d.groups)) if value(V.x[v, s]) > 0.5]
            if not members:
                continue
            ks = [k for k in range(len(d.types)) if value(V.y[s, k]) > 0.5]
            if len(ks) != 1:
                return None
            placed += len(members)
            ids = tuple(sorted((problem.nodes[u].id for v in members for u in d.groups[v]), key=problem.index_of))
            devices.append(DeviceAssignment(problem.device_types[d.types[ks[0]]].name, ids))
        if placed != len(d.groups):
            return None
        return Plan(tuple(devices))
