"""MILP for the throughput objectives with no contiguity (class ``none``; DESIGN.md §2).

Model
-----
Data (:mod:`.data`): the colour classes ``v = 0..n−1`` of the instance (an uncoloured node
is a class of its own), device types ``k`` with ``count_k > 0``, ``p_k(v)``, ``m(v)``,
``F(v)`` (the types that support all of ``v`` and have room for it) and the cost nodes as
in :mod:`.stages`. Slots have fixed types: ``min(count_k, n)`` slots of each type ``k``
(more devices of one type than classes are never all used), ``k(s)`` the type of slot
``s`` and ``r(s)`` its position among the slots of its type (from 0).

Variables: ``x[v,s] ∈ {0,1}`` (class v is on slot s), ``b[u,s] ∈ {0,1}`` (u is a boundary
node of slot s; slots whose type pays communication), ``f[v,s] ∈ {0,1}`` (slot s holds a
class ``≤ v``), ``T ≥ 0`` (or ``TF, TB``).

1. ``x[v,s] = 0`` unless ``k(s) ∈ F(v)``                 (support, per-class memory)
2. ``Σ_s x[v,s] = 1``                                    (every class on one slot)
3. ``Σ_v m(v) x[v,s] ≤ M_k(s)``                          (memory; only where the bound can bind)
4. boundary rows (B) and load rows (L) of :mod:`.rows` for every slot, with its fixed type:
   plain rows ``Σ_v p_k(s)(v) x[v,s] + Σ_u c(u) b[u,s] ≤ T``, no indicator
5. symmetry: ``x[v,s] = 0`` for ``v < r(s)``, and ``f[v,s+1] ≤ f[v−1,s]`` (``f[0,s+1] = 0``)
   for consecutive slots of one type
6. ``f[v,s] ≥ x[v,s]``, ``f[v,s] ≥ f[v−1,s]``, ``f[v,s] ≤ f[v−1,s] + x[v,s]``: with ``x``
   integral, ``f[v,s]`` is 1 exactly when slot s holds a class ``≤ v``
7. exactly ``N`` non-empty devices (``stages=N``): ``Σ_s f[n−1,s] = N``
8. the counting rows of :mod:`.cuts` (pigeonhole bounds on ``T``)
9. the packing row of :mod:`.packing`: ``T`` (or ``TF + TB``) at least the exact optimum of the
   heaviest groups alone, with the communication their split forces

Row 5 is valid: devices of one type are interchangeable, so any plan can list the
non-empty devices of each type first, ordered by their lowest class; the ``r``-th of them
(from 0) then has its lowest class ``≥ r``, and the next one's lowest class is larger, so a
slot holding a class ``≤ v`` is preceded by one holding a class ``≤ v − 1``. Rows 6 only
define ``f``; with row 7 they count the non-empty slots. Objective (O) of :mod:`.rows`.
Every assignment of classes to devices is a solution in that order, with the objective its
value; decoded plans list the devices in slot order.

Why fixed slot types: with a type variable per slot the load rows hold only when the slot
has that type (an indicator row), and the linear relaxation, which may set every type
indicator to a fraction, bounds ``T`` by little more than the average load; with fixed
types every load row binds in the relaxation. On BERT-24 inference (6 accelerators, 1 CPU,
1 thread) the bound after 60 s went from 13.20 (the simple bound) to 15.27 with rows 1–7,
and to the optimum 17.714718 at the root with row 8, proven in about 23 s. On GNMT inference
the bound stayed at 30.12 for 600 s (gap 4.9%) with rows 1–8; row 9 over its 17 heaviest
layers is the optimum 31.687311 itself.

Start: the best valid plan of the warm start (the DP's ``stages`` optimum), row 9's assignment
extended to every class, and the better of the local search's plan and the climbed LPT fill of
:mod:`placement.solvers.baselines.lpt` (:meth:`NoContiguity.searched_start`, run before the model
is built, so that a limit that runs out while it is built returns that plan: the local search's
10 restarts take 0.1–0.4 s on the published layer graphs). The DP's pipeline is a poor start for a
class that need not be one: on InceptionV3 training the DP's 122.76 left CP-SAT at 118.06 after
120 s, where the local search's 117.99 led it to 117.43; BERT-24 inference, from 17.7358 in place of
17.7899, was proven in 5.7 s in place of 10.9 s (1 thread, two such runs at once on 2 cores).

On wide graphs (thousands of nodes side by side, where the DP refuses its ideals) the chain DP's
pipeline along one topological order and the local search's plans are far from the optimum, and the
model does not improve them in time: they leave the choice of the nodes the CPU runs to chance, where
the LPT fill gives the CPU those it runs the most efficiently, as the linear relaxation does. On 5,000
independent nodes of random times (4 accelerators, 1 CPU; CP-SAT, 1 thread, default 60 s, a loaded
2-core machine) the answer went from 6283.72 (gap 1.6%) to 6181.99 (gap 0.012%), and within a 10 s limit
from 6476.26 (4.6%) to 6181.99; on a fan-out of 5,000 from 6476.45 to 6182.71; on 1,000 components of 5
nodes from 6449.01 to 6361.11–6362.58 (10 s: from 6475.21 to 6361.11–6361.43); with accelerator memory
that binds (2,600 each, 12,500 in all) from 8333.79 to 6303.61. The bound, 6181.22, is the linear
relaxation's without memory: on independent nodes, whose loads are compute alone, the optimum up to the
last node's split where memory does not bind; with it binding the relaxation is 6218.18, and the solver's
bound stays below it. On a star (a fan-out of 4,998 into one sink; the bound leaves out the leaves'
transfers) the plan went from 7635.75 to 7367.75–7368.56 in two runs of four (10 s and 60 s) and stayed
in the others, where the machine's load left the fill no time (within 10 s the warm start takes most of
the limit on these graphs); 8 chains side by side ended as before, at 6472.37 (a fill of 8 long parts, or
of classes cut from them, is worse). The 10 s figures are of two rounds, each running the code before and
after one after the other.

Measured and not kept, on ResNet-50 inference (1 thread, a loaded 2-core machine; the bound stays at row 9's
33.036, the best plan found in 600 s is 33.3028):

* CP-SAT's lower-bound tree search (``optimize_with_lb_tree_search``): at 300 s a bound of 33.074 and a plan of
  33.418, where the default search had 33.036 and 33.346. Its core-based search (``optimize_with_core``),
  for the first half of the limit: at 600 s a better plan on one of the four open graphs (this one: 33.266
  against 33.335), the same plans on the others, and BERT-24 inference's proof slowed from 10 s to 16 s.
* The decision model (load at most 33.25, or 33.29, no objective): no answer in 240 s.
* The full LP relaxation (enforced load rows in the LP, as :mod:`.stages` keeps): at 600 s a bound of 33.054
  and a plan of 33.349, where the default search had 33.036 and 33.303.
* Set partitioning over accelerator sets at a fixed ``T`` (a column: a set whose load is at most ``T``; the
  linear relaxation needing more than 6 accelerators proves the optimum above ``T``), by column generation
  with exact pricing: a DP along a topological order whose state is, for each node with a successor not
  yet decided, its side and whether its cost is paid, with a Pareto list of load against dual value (the
  order's frontier holds 2 nodes on ResNet-50, 5 on InceptionV3: 0.36 s a pricing on ResNet-50 inference,
  5.8 s on InceptionV3 inference, 29 s on its training graph, in numpy, before colour classes, which
  training graphs need in the state), with dual smoothing and the Lagrangian bound of each pricing. It
  proved the optimum above 33.1 in 379 s (396 pricings) and above 33.2 in 647 s (592): a bound the
  model's relaxation does not reach, but the relaxation of set partitioning stays below the best plan, so a
  proof needs branching on pairs of groups on top of it, and a compiled pricing to fit the time limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solvers.milp.backends import Backend
from placement.solvers.milp.cuts import count_rows
from placement.solvers.milp.data import GroupData
from placement.solvers.milp.packing import Packing, extend, packing_rows
from placement.solvers.milp.driver import Formulation, fill_deadline, slot_of_groups, type_position
from placement.solvers.milp.rows import (Terms, boundary_rows, boundary_values, minimise, objective_vars,
                                         target_values, typed_load_rows)


@dataclass
class AssignmentVars:
    kinds: list[int]                      # type position of slot s at kinds[s - 1]
    x: dict[tuple[int, int], Any]
    b: dict[tuple[int, int], Any]
    f: dict[tuple[int, int], Any]
    targets: list[Any]
    free: set[tuple[int, int]]            # the (v, s) whose x is not fixed to 0
    packing: Packing = Packing(0.0)        # row 9 (no row when its set is empty)

    @property
    def slots(self) -> range:
        return range(1, len(self.kinds) + 1)


def slot_kinds(d: GroupData) -> list[int]:
    """The type of every slot: ``min(count_k, n)`` slots of each type ``k``, types in order."""
    n = len(d.groups)
    return [k for k in range(len(d.types)) for _ in range(min(d.counts[k], n))]


def ranks(kinds: list[int]) -> list[int]:
    """Position of each slot among the slots of its type (from 0)."""
    return [kinds[:s].count(k) for s, k in enumerate(kinds)]


def _plan(problem: Instance, d: GroupData, kinds: list[int], held: list[list[int]]) -> Plan:
    """The plan whose device ``s`` (of type ``kinds[s]``) holds the groups ``held[s]``; empty
    devices left out."""
    devices = []
    for k, members in zip(kinds, held):
        if members:
            ids = tuple(sorted((problem.nodes[u].id for v in members for u in d.groups[v]), key=problem.index_of))
            devices.append(DeviceAssignment(problem.device_types[d.types[k]].name, ids))
    return Plan(tuple(devices))


class NoContiguity(Formulation):
    contiguity = "none"
    #: whether row 9 (the packing bound) is sought
    packing_row = True

    def groups(self, problem: Instance, objective: str) -> list[list[int]]:
        return problem.colour_classes()

    def build(self, problem: Instance, d: GroupData, be: Backend, objective: str) -> AssignmentVars:
        n = len(d.groups)
        kinds = slot_kinds(d)
        rank = ranks(kinds)
        slots = range(1, len(kinds) + 1)
        fits = [set(d.fits(v)) for v in range(n)]
        free = {(v, s) for v in range(n) for s in slots if kinds[s - 1] in fits[v] and rank[s - 1] <= v}
        x = {(v, s): be.bool_var(f"x[{v},{s}]", fixed=None if (v, s) in free else 0)     # (1), (5) last part
             for v in range(n) for s in slots}
        paying = [s for s in slots if d.pays[kinds[s - 1]]]
        b = {(i, s): be.bool_var(f"b[{cn.u},{s}]") for i, cn in enumerate(d.cost_nodes) for s in paying}
        # f[v,s]: slot s holds a group ≤ v; needed where the next slot has the same type, or every
        # slot's f[n-1,s] (non-empty) with stages=N
        ordered = [s for s in slots if s < len(kinds) and kinds[s] == kinds[s - 1]]
        needs_f = set(slots) if self.stages is not None else set(ordered) | {s + 1 for s in ordered}
        f = {(v, s): be.bool_var(f"f[{v},{s}]") for s in sorted(needs_f) for v in range(n)}
        targets = objective_vars(be, d, objective)

        def terms(v: int, s: int) -> Terms:
            return [(1, x[v, s])] if (v, s) in free else []

        for v in range(n):
            be.add([(1, x[v, s]) for s in slots], lo=1, hi=1)                                  # (2)
        for s in slots:
            k = kinds[s - 1]
            if d.memory_binds and d.M[k] < sum(d.m):                                          # (3)
                be.add([(d.m[v], x[v, s]) for v in range(n) if d.m[v] and (v, s) in free], hi=d.M[k])
            bs = {i: b[i, s] for i in range(len(d.cost_nodes))} if s in paying else {}
            if bs:                                                                             # (4)
                boundary_rows(be, d.cost_nodes, lambda v, s=s: terms(v, s), bs)
            typed_load_rows(be, d, objective, k, lambda v, s=s: terms(v, s), bs, targets)      # (4)
        for s in sorted(needs_f):                                                              # (6)
            for v in range(n):
                be.add(terms(v, s) + [(-1, f[v, s])], hi=0)
                if v:
                    be.add([(1, f[v - 1, s]), (-1, f[v, s])], hi=0)
                be.add([(1, f[v, s])] + [(-a, var) for a, var in terms(v, s)]
                       + ([(-1, f[v - 1, s])] if v else []), hi=0)
        for s in ordered:                                                                      # (5)
            be.add([(1, f[0, s + 1])], hi=0)
            for v in range(1, n):
                be.add([(1, f[v, s + 1]), (-1, f[v - 1, s])], hi=0)
        if self.stages is not None:                                                            # (7)
            be.add([(1, f[n - 1, s]) for s in slots], lo=self.stages, hi=self.stages)
        counted = count_rows(be, d, kinds, free, x, targets)                                   # (8)
        packing = packing_rows(be, d, kinds, targets, counted) if self.packing_row else Packing(0.0)  # (9)
        V = AssignmentVars(kinds, x, b, f, targets, free, packing)
        self.extra_rows(problem, d, be, V)
        minimise(be, targets)
        return V

    def model_stats(self, V: AssignmentVars, unit: float) -> dict[str, Any]:
        found = V.packing
        return {"packing_bound": found.floor * unit if found.groups else None, "packing_groups": found.groups,
                "packing_s": found.seconds, "packing_work": found.work}

    def floor(self, V: AssignmentVars, unit: float) -> float:
        return V.packing.floor * unit if V.packing.groups else 0.0

    def model_news(self, V: AssignmentVars, unit: float) -> list[str]:
        found = V.packing
        if not self.packing_row:
            return []
        if not found.groups:
            return [f"packing bound: none above the counting bound ({found.seconds:.2f} s)"]
        return [f"packing bound {found.floor * unit:.6g} from the {found.groups} heaviest groups ({found.seconds:.2f} s)"]

    def start_plan(self, problem: Instance, d: GroupData, V: AssignmentVars) -> Plan | None:
        """The packing row's assignment of the heaviest groups, extended to every group
        (:func:`.packing.extend`), or ``None``."""
        if not V.packing.groups:
            return None
        where = extend(d, V.kinds, V.packing.assignment)
        if where is None:
            return None
        return _plan(problem, d, V.kinds, [[v for v in range(len(d.groups)) if where[v] == s] for s in range(len(V.kinds))])

    @property
    def searched_what(self) -> str | None:   # what :meth:`searched_start` runs, as a large graph's progress says
        return None if self.stages is not None else "a local search and the LPT fill"

    def searched_start(self, problem: Instance, seconds: float) -> Plan | None:
        """The better by max-load (valid first) of the climbed LPT fill of
        :mod:`placement.solvers.baselines.lpt` (made by :func:`.driver.fill_deadline`) and the plan of
        :mod:`placement.solvers.baselines.local_search` (its default restarts, seed 0, no new restart after
        ``seconds``; on the accelerators and CPUs alone, which it moves classes between; run first, so that the
        fill takes none of its time); ``None`` with ``stages=N`` (neither counts the devices it uses).
        :attr:`searched_source` is set to the one returned, which the progress names."""
        from placement.errors import PlacementError
        from placement.solvers.baselines.local_search import solve_local_search
        from placement.solvers.baselines.lpt import lpt_plan
        from placement.verification.evaluate import evaluate

        if self.stages is not None:
            return None
        found = []
        try:   # first, with the whole of ``seconds``: the start is never worse than the search's plan alone
            searched = solve_local_search(problem, seed=0, time_limit=seconds)
            if searched.status == "feasible":
                found.append(searched.plan)
        except PlacementError:   # not the two-type model
            pass
        filled = lpt_plan(problem, deadline=fill_deadline(seconds))
        ranked = []
        candidates = [("a local search", plan) for plan in found] + [("the LPT fill", filled)]
        for source, plan in candidates:   # the local search's first on ties
            if plan is not None:
                ev = evaluate(problem, plan, "none")
                ranked.append((not ev.valid, ev.max_load, len(ranked), source, plan))
        if not ranked:
            return None
        best = min(ranked)
        self.searched_source = best[3]   # what the progress names
        return best[4]

    def exclude(self, be: Backend, d: GroupData, V: AssignmentVars, k: int, groups: Sequence[int]) -> bool:
        """``Σ_{v ∈ groups} x[v,s] ≤ |groups| − 1`` for every slot ``s`` of type ``k`` that could hold them all
        (:meth:`.driver.Formulation.exclude`)."""
        for s in V.slots:
            if V.kinds[s - 1] == k and all((v, s) in V.free for v in groups):
                be.add([(1, V.x[v, s]) for v in groups], hi=len(groups) - 1)
        return True

    def extra_rows(self, problem: Instance, d: GroupData, be: Backend, V: AssignmentVars) -> None:
        """Rows a stricter contiguity class adds (none here)."""

    def extra_hint(self, problem: Instance, d: GroupData, V: AssignmentVars, where: list[int],
                   values: dict[Any, float]) -> None:
        """Values of the variables :meth:`extra_rows` added (none here); ``where[v]`` is group ``v``'s
        slot, from 0."""

    def hint(self, problem: Instance, d: GroupData, V: AssignmentVars, plan: Plan,
             objective: str) -> tuple[dict[Any, float] | None, str]:
        devices = [dev for dev in plan.devices if dev.nodes]
        placed, why = slot_of_groups(problem, d, devices)
        if placed is None:
            return None, why
        kinds = [type_position(problem, d, dev.type) for dev in devices]
        if None in kinds:
            return None, "warm start ignored: unknown device type"
        # canonical order (rows 5-6): the devices of each type by their lowest group, in its slots
        lowest = [min(v for v in range(len(d.groups)) if placed[v] == i) for i in range(len(devices))]
        slot_of: dict[int, int] = {}
        for k in set(kinds):
            mine = sorted((i for i in range(len(devices)) if kinds[i] == k), key=lowest.__getitem__)
            theirs = [s for s in V.slots if V.kinds[s - 1] == k]
            if len(mine) > len(theirs):
                return None, "warm start ignored: more devices of one type than slots"
            slot_of.update((i, s) for i, s in zip(mine, theirs))
        where = [slot_of[placed[v]] - 1 for v in range(len(d.groups))]
        values: dict[Any, float] = {}
        used: list[tuple[set[int], int]] = []
        n = len(d.groups)
        for s in V.slots:
            held = {v for v in range(n) if where[v] == s - 1}
            first = min(held, default=n)   # f[v, s]: the slot holds a group u ≤ v
            for v in range(n):
                values[V.x[v, s]] = 1.0 if v in held else 0.0
                if (v, s) in V.f:
                    values[V.f[v, s]] = 1.0 if first <= v else 0.0
            if (0, s) in V.b:
                for i, bv in enumerate(boundary_values(d, held)):
                    values[V.b[i, s]] = bv
            if held:
                used.append((held, V.kinds[s - 1]))
        self.extra_hint(problem, d, V, where, values)
        values.update(zip(V.targets, target_values(d, objective, used)))
        return values, ""

    def decode(self, problem: Instance, d: GroupData, V: AssignmentVars,
               value: Callable[[Any], float]) -> Plan | None:
        held = [[v for v in range(len(d.groups)) if value(V.x[v, s]) > 0.5] for s in V.slots]
        if sum(map(len, held)) != len(d.groups):
            return None
        return _plan(problem, d, V.kinds, held)
