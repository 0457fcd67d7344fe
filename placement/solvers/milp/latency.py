"""MILP for single-sample latency (objective ``latency``; DESIGN.md §2).

The latency model
-----------------
Inference graphs only. Device types that pay communication are *accelerators*; at
most one other type may have devices, the *CPU* type: a node placed on CPUs runs as
soon as its inputs are ready, with unlimited CPU parallelism. Each accelerator runs up to ``q`` *calls*, one after another;
a call holds a set ``S`` of nodes, contiguous (no path leaves ``S`` and re-enters it);
it starts when every node of ``In(S)`` has finished and the accelerator's previous
call has ended, lasts ``Σ_{u∈In(S)} c(u) + Σ_{v∈S} p(v) + Σ_{u∈Out(S)} c(u)``, and all
of its nodes finish at its end. Memory is summed over an accelerator's calls. The
latency is the finish time of the last node. Nodes of one colour class share a device
(an accelerator, possibly in different calls, or the CPUs).

Model
-----
Data: the nodes ``v`` (``g(i) = i``; the notation keeps room for placing groups);
accelerators ``a = 1..A`` (every device of every accelerator type; ``k(a)`` its type,
``M_a`` its memory), calls ``(a,j)``, ``j = 1..q``; ``p_a(v)`` the time of class ``v``
on ``a`` (unsupported: the class may not go there), ``p_cpu(i)`` the CPU time of node
``i`` (``None``: the node must go to an accelerator); cost nodes ``u`` with
``r(u)``, ``W(u)``, ``c(u)`` as in :mod:`.data`; ``U`` an upper bound on every finish
time of every plan (all node times at their slowest plus every transfer as often as it
can be paid), used as big-M.

Variables: ``x[v,a,j] ∈ {0,1}`` (node v in call (a,j)), ``e[a,j] ∈ {0,1}`` (the call is
non-empty), ``b[u,a,j] ∈ {0,1}`` (u is a boundary node of the call), closure variables
``α[i,a,j], δ[i,a,j] ∈ [0,1]``, times ``st[a,j], en[a,j], F[i], L ∈ [0,U]``; when some
class takes zero time on some accelerator, also ranks ``π[a,j], ρ[i] ∈ [0,C]``
(``C = A·q``). ``on_cpu(v) = 1 − Σ_{a,j} x[v,a,j]``.

1.  ``Σ_{a,j} x[v,a,j] ≤ 1``, ``= 1`` when ``v`` cannot run on CPUs; and
    ``Σ_j x[v,a,j] = Σ_j x[v',a,j]`` for consecutive members ``v, v'`` of a colour class
    (placement; colours share a device)
2.  ``x[v,a,j] ≤ e[a,j]``, ``e[a,j] ≤ Σ_v x[v,a,j]``, ``e[a,j+1] ≤ e[a,j]``; ``x[v,a,j] = 0`` when
    ``a`` is the ``r``-th accelerator of its type and ``r > v`` (symmetry: the non-empty calls
    of an accelerator come first, and accelerators of one type are ordered by their lowest
    node)
3.  ``Σ_{j,v} m(v) x[v,a,j] ≤ M_a``                                    (memory)
4.  ``b[u,a,j] ≥ |x[w,a,j] − x[r(u),a,j]|`` for ``w ∈ W(u)``            (boundary, rows (B) of :mod:`.rows`)
5.  ``α[i,a,j] ≥ x[g(i),a,j]``, ``α[w,a,j] ≥ α[i,a,j]``; ``δ[i,a,j] ≥ x[g(i),a,j]``,
    ``δ[i,a,j] ≥ δ[w,a,j]`` for edges ``(i,w)``; ``x[g(i),a,j] ≥ α[i,a,j] + δ[i,a,j] − 1``
    (each call contiguous: rows (C) of :mod:`.rows`, as in :mod:`.sets`)
6.  ``en[a,j] ≥ st[a,j] + Σ_v p_a(v) x[v,a,j] + Σ_u c(u) b[u,a,j]``     (call duration)
7.  ``st[a,j+1] ≥ en[a,j]``                                            (calls run in order)
8.  ``st[a,j] ≥ F[u] − U (1 − x[g(w),a,j] + x[g(u),a,j])`` for edges ``(u,w)``, ``g(u) ≠ g(w)``
    (a call waits for its inputs)
9.  ``F[i] ≥ en[a,j] − U (1 − x[g(i),a,j])``                            (call nodes finish at its end)
10. ``F[i] ≥ F[u] + p_cpu(i) − U Σ_{a,j} x[g(i),a,j]`` for edges ``(u,i)``, and
    ``F[i] ≥ p_cpu(i) − U Σ_{a,j} x[g(i),a,j]``                          (CPU nodes)
11. ``L ≥ F[i]`` for every sink ``i``
12. (ranks, only when some node takes zero time on some accelerator) ``π[a,j+1] ≥ π[a,j] + 1``;
    ``ρ[i] ≥ π[a,j] − C (1 − x[g(i),a,j])``; ``ρ[i] ≥ ρ[u] − C Σ_{a,j} x[g(i),a,j]`` for edges
    ``(u,i)``; ``π[a,j] ≥ ρ[u] + 1 − (C+1)(1 − x[g(w),a,j] + x[g(u),a,j])`` for edges ``(u,w)``

13. (only with ``stages=N``) ``w[r] ∈ {0,1}``, ``r = 1..l`` (``l`` the CPU type's count): CPU core
    ``r`` holds a node. ``w[r+1] ≤ w[r]``; ``w[1] ≥ on_cpu(i)`` for every node ``i``;
    ``Σ_r w[r] ≤ Σ_C on_cpu(C)`` over the colour classes ``C`` (each core used holds a whole class);
    and ``Σ_a e[a,1] + Σ_r w[r] = N``.

14. ``L ≥ B``, with ``B`` the path bound of :mod:`placement.problem.path_bound` computed on the
    model's own data (:func:`path_floor`): along a path, every call meets it in one segment, holds
    every node between the segment's ends (and, with ``q = 1``, whole colour classes), and the
    segments and CPU nodes run in turn, so every plan's latency is at least ``B``. Integer
    backends only: on the floating-point ones a row at the optimum itself lets their
    tolerances pull ``L`` below a plan's value (HiGHS returned 0.999999 for a plan of 1), so
    there the bound is only reported. On every backend the solution's bound is at least the
    critical path and the path bound on the instance's own times (``B`` uses the model's times,
    which may be rounded down), so a plan that meets it is proven optimal whatever the rounding.
    With ``q = 1`` the critical-chain bound of :mod:`placement.problem.chain_bound` (exact
    arithmetic on the instance's own times) is reported beside it, and for every ``q`` the
    module-chain bound of :mod:`placement.problem.module_chain` (the instance's own times, lowered
    where its sums may round), with at most ``q·A`` calls counted, or without counts where counting
    passes the DP's work limit: where the starting plan meets either, that plan is optimal and the
    solver is not run.

15. (only where the CPU type has a memory bound ``M_cpu`` below the memory of the colour classes that
    can run on CPUs) ``z[C,r] ∈ {0,1}``, colour class ``C`` on CPU core ``r``:
    ``Σ_r z[C,r] = on_cpu(C)``, ``Σ_C m(C) z[C,r] ≤ M_cpu``; with ``stages=N`` also
    ``z[C,r] ≤ w[r] ≤ Σ_C z[C,r]``, so that ``w[r]`` says exactly whether core ``r`` holds a node.
    Times do not depend on the core (CPU nodes run in parallel without limit), so only memory
    decides where a class goes.

Objective: minimise ``L``.

Exactly ``N`` devices (row 13): accelerator ``a`` holds a node exactly when ``e[a,1] = 1``
(rows 2: its non-empty calls come first), and CPU nodes may be spread over any number of
cores from 1 to ``min(l, number of classes on the CPUs)`` without changing any time, since
CPU nodes run in parallel without limit. So the plans with exactly ``N`` devices holding a
node are the solutions; the decoded plan deals the CPU classes round the ``Σ_r w[r]`` cores.
Rows 2 stay valid: they order calls within an accelerator and restrict which accelerator of
a type a node may use, neither of which changes the number of non-empty accelerators.

Rows 6–11 only bound times from below, and the least values are the schedule of the
model above, so ``L`` is at least the plan's latency and equals it at the optimum.
A cycle of calls (two sets feeding each other, a deadlock) forces every call on it to
last 0 through rows 6–9; row 12 then forbids it, since ranks strictly increase around
such a cycle. Without zero-time nodes no call lasts 0 and row 12 is left out.
The data, scaled for CP-SAT, come from :mod:`.latency_data`. Decoded plans give every
accelerator its non-empty calls in order (:attr:`placement.plan.DeviceAssignment.calls`)
and put the CPU nodes on one CPU device (with ``stages``: on ``Σ_r w[r]`` of them; with row 15:
each class on its core ``r``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from placement.errors import InvalidParameterError
from placement.problem.bounds import latency_lower_bound, meets
from placement.problem.chain_bound import chain_bound
from placement.problem.memory_fit import fits
from placement.problem.module_chain import module_chain
from placement.problem.path_bound import latency_path_bound, path_bound
from placement.problem.objectives import check_objective
from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution
from placement.solvers.milp.backends import OutOfTime, SolveOptions, make_backend
from placement.solvers.milp.data import fits_alone
from placement.solvers.milp.rows import boundary_rows, convexity_rows
from placement.parameters import stage_count
from placement.solvers.milp.driver import (DEFAULT_MAX_PRODUCT, checked_claim, data_notes, memory_cut_note,
                                           out_of_time, refitted, run_solver, skipped, stage_count_verdict, start_from)
from placement.solvers.milp.interrupt import SearchInterrupted, absorb_echoes
from placement.solvers.milp.latency_data import LatencyData, cpu_types, prepare_latency
from placement.solvers.milp.outcome import ADMITTING, Context, Verdict, conclude
from placement.wording import counted

DEFAULT_CALLS = 1


@dataclass
class _Vars:
    x: dict[tuple[int, int, int], Any]
    L: Any
    w: list[Any]                            # CPU cores holding a node (row 13; empty without stages)
    floor: float                            # the path bound, model units (row 14 on integer backends)
    #: row 15: z[k, r], colour class k (of problem.colour_classes()) on CPU core r; empty unless
    #: the cores' memory binds
    z: dict[tuple[int, int], Any] = field(default_factory=dict)


def _build(problem: Instance, d: LatencyData, be: Any, q: int, stages: int | None = None) -> _Vars:
    n_classes, A = len(d.classes), len(d.acc)
    nodes = problem.nodes
    succ = problem.successors()
    pred = problem.predecessors()
    edges = [(u, w) for u, ws in enumerate(succ) for w in ws]
    U = d.horizon
    calls = [(a, j) for a in range(A) for j in range(q)]
    allowed = {(v, a): d.p_acc[v][a] is not None and d.fits(v, a) and d.rank[a] <= v
               for v in range(n_classes) for a in range(A)}
    x = {(v, a, j): be.bool_var(f"x[{v},{a},{j}]", fixed=None if allowed[v, a] else 0)
         for v in range(n_classes) for a, j in calls}
    e = {(a, j): be.bool_var(f"e[{a},{j}]") for a, j in calls}
    st = {(a, j): be.num_var(U, f"st[{a},{j}]") for a, j in calls}
    en = {(a, j): be.num_var(U, f"en[{a},{j}]") for a, j in calls}
    F = [be.num_var(U, f"F[{i}]") for i in range(len(nodes))]
    L = be.num_var(U, "L")

    def on_acc(v: int) -> list[tuple[float, Any]]:
        return [(1, x[v, a, j]) for a, j in calls]

    for v, members in enumerate(d.classes):                                           # (1)
        must_acc = any(d.p_cpu[i] is None for i in members)
        be.add(on_acc(v), lo=1 if must_acc else -math.inf, hi=1)
    for colour_class in problem.colour_classes():
        for v, w in zip(colour_class, colour_class[1:]):
            for a in range(A):
                be.add([(1, x[v, a, j]) for j in range(q)] + [(-1, x[w, a, j]) for j in range(q)], lo=0, hi=0)
    for a, j in calls:                                                                 # (2)
        for v in range(n_classes):
            be.add([(1, x[v, a, j]), (-1, e[a, j])], hi=0)
        be.add([(1, e[a, j])] + [(-1, x[v, a, j]) for v in range(n_classes)], hi=0)
        if j + 1 < q:
            be.add([(1, e[a, j + 1]), (-1, e[a, j])], hi=0)
    for a in range(A):                                                                 # (3)
        # a class kept off the accelerator (x fixed at 0) is left out: its size, up to 2^53 times the bound in
        # model units, is a coefficient HiGHS refuses as invalid (so in row 15)
        if math.isfinite(d.M[a]) and sum(d.m) > d.M[a]:
            be.add([(d.m[v], x[v, a, j]) for v in range(n_classes) for j in range(q) if d.m[v] and allowed[v, a]],
                   hi=d.M[a])
    for a, j in calls:
        b = {i: be.bool_var(f"b[{cn.u},{a},{j}]") for i, cn in enumerate(d.cost)}   # (4)

        def member(v: int, a: int = a, j: int = j) -> list[tuple[float, Any]]:
            return [(1, x[v, a, j])]

        boundary_rows(be, d.cost, member, b)
        convexity_rows(be, range(len(nodes)), edges, lambda i: member(d.group[i]), f"{a},{j}")  # (5)
        be.add([(1, st[a, j]), (-1, en[a, j])]                                         # (6)
               + [(p, x[v, a, j]) for v in range(n_classes) if (p := d.p_acc[v][a])]
               + [(cn.c, b[i]) for i, cn in enumerate(d.cost)], hi=0)
        if j + 1 < q:                                                                  # (7)
            be.add([(1, en[a, j]), (-1, st[a, j + 1])], hi=0)
        for u in range(len(nodes)):                                                    # (8)
            for w in succ[u]:
                gu, gw = d.group[u], d.group[w]
                if gu != gw and allowed[gw, a]:
                    # F[u] − st ≤ U (1 − x_w + x_u)
                    be.add([(1, F[u]), (-1, st[a, j]), (U, x[gw, a, j]), (-U, x[gu, a, j])], hi=U)
        for i in range(len(nodes)):                                                    # (9)
            if allowed[d.group[i], a]:
                be.add([(1, en[a, j]), (-1, F[i]), (U, x[d.group[i], a, j])], hi=U)
    for i in range(len(nodes)):                                                        # (10)
        p = d.p_cpu[i]
        if p is None:
            continue
        relax = [(-U, var) for _, var in on_acc(d.group[i])]
        be.add([(-1, F[i])] + relax, hi=-p)
        for u in pred[i]:
            be.add([(1, F[u]), (-1, F[i])] + relax, hi=-p)
    for i in range(len(nodes)):                                                        # (11)
        if not succ[i]:
            be.add([(1, F[i]), (-1, L)], hi=0)
    zero_time = any(p == 0 for row in d.p_acc for p in row)
    if zero_time:                                                                      # (12)
        C = float(len(calls))
        pi = {(a, j): be.num_var(C, f"pi[{a},{j}]") for a, j in calls}
        rho = [be.num_var(C, f"rho[{i}]") for i in range(len(nodes))]
        for a, j in calls:
            if j + 1 < q:
                be.add([(1, pi[a, j]), (-1, pi[a, j + 1])], hi=-1)
            for i in range(len(nodes)):
                if allowed[d.group[i], a]:
                    be.add([(1, pi[a, j]), (-1, rho[i]), (C, x[d.group[i], a, j])], hi=C)
            for u in range(len(nodes)):
                for w in succ[u]:
                    gu, gw = d.group[u], d.group[w]
                    if gu != gw and allowed[gw, a]:
                        # ρ[u] + 1 − π ≤ (C+1)(1 − x_w + x_u)
                        be.add([(1, rho[u]), (-1, pi[a, j]), (C + 1, x[gw, a, j]), (-(C + 1), x[gu, a, j])],
                               hi=C)
        for i in range(len(nodes)):
            relax = [(-C, var) for _, var in on_acc(d.group[i])]
            for u in pred[i]:
                be.add([(1, rho[u]), (-1, rho[i])] + relax, hi=0)
    w: list[Any] = []
    if stages is not None:                                                             # (13)
        w = [be.bool_var(f"w[{r}]") for r in range(d.cores)]
        for r in range(len(w) - 1):
            be.add([(1, w[r + 1]), (-1, w[r])], hi=0)
        for v in range(n_classes):
            if any(d.p_cpu[i] is not None for i in d.classes[v]):
                # on_cpu(v) ≤ w[1]: 1 − Σ x ≤ w[1]
                be.add(([(1, w[0])] if w else []) + on_acc(v), lo=1)
        colours = problem.colour_classes()
        if w:
            # Σ_r w[r] ≤ Σ_C (1 − Σ x[first node of C]), the first node standing for its class (rows 1)
            be.add([(1, var) for var in w] + [t for members in colours for t in on_acc(d.group[members[0]])],
                   hi=len(colours))
        be.add([(1, e[a, 0]) for a in range(A)] + [(1, var) for var in w], lo=stages, hi=stages)
    z = _core_rows(problem, d, be, on_acc, w)                                          # (15)
    floor = path_floor(problem, d, q)                                                   # (14)
    if floor > 0 and be.integer_only:
        be.add([(1, L)], lo=floor)
    be.minimize([(1, L)])
    return _Vars(x, L, w, floor, z)


def _half_left(deadline: float | None) -> float | None:
    """Half-way from now to ``deadline`` (a ``time.perf_counter()`` value; ``None``: no deadline)."""
    if deadline is None:
        return None
    now = time.perf_counter()
    return now + max(0.0, deadline - now) / 2


def _core_rows(problem: Instance, d: LatencyData, be: Any, on_acc: Callable[[int], list[tuple[float, Any]]],
               w: list[Any]) -> dict[tuple[int, int], Any]:
    """Row 15: where the CPU cores' memory binds, the core of every colour class on the CPUs. A class's fit on a
    core alone is decided on its sizes as written (rows rounded to admit every plan that fits may admit a class
    over the bound by less than their rounding)."""
    colours = problem.colour_classes()
    size = [sum(d.m[d.group[i]] for i in members) for members in colours]
    movable = [k for k, members in enumerate(colours) if all(d.p_cpu[i] is not None for i in members)]
    if not d.cores or not math.isfinite(d.M_cpu):
        return {}
    cpu = cpu_types(problem)[:1]
    if fits([problem.nodes[i].memory for k in movable for i in colours[k]], problem.device_types[cpu[0]].memory):
        return {}
    alone = {k: size[k] <= d.M_cpu and row[0]
             for k, row in zip(movable, fits_alone(problem, [colours[k] for k in movable], cpu, [True]))}
    z = {(k, r): be.bool_var(f"z[{k},{r}]", fixed=None if alone[k] else 0)
         for k in movable for r in range(d.cores)}
    for k in movable:   # Σ_r z[k, r] = on_cpu(first node of k) = 1 − Σ x
        be.add([(1, z[k, r]) for r in range(d.cores)] + on_acc(d.group[colours[k][0]]), lo=1, hi=1)
    for r in range(d.cores):
        be.add([(size[k], z[k, r]) for k in movable if size[k] and alone[k]], hi=d.M_cpu)
        if w:           # stages: core r holds a node exactly when w[r] (row 13)
            for k in movable:
                be.add([(1, z[k, r]), (-1, w[r])], hi=0)
            be.add([(1, w[r])] + [(-1, z[k, r]) for k in movable], hi=0)
    return z


def path_floor(problem: Instance, d: LatencyData, q: int) -> float:
    """Row 14's right-hand side: :func:`placement.problem.path_bound.path_bound` on the model's own
    integer data (model units; each node at its fastest accelerator that takes it, the largest memory
    bound, ``q·A`` segments), where the DP's sums are exact; 0 when no path has a partition."""
    fastest = [min((p for a, p in enumerate(d.p_acc[d.group[i]]) if p is not None and d.fits(d.group[i], a)),
                   default=None) for i in range(len(problem.nodes))]
    cost = [0.0] * len(problem.nodes)
    for cn in d.cost:
        cost[cn.u] = cn.c
    bound = path_bound(problem, fastest, d.p_cpu, [d.m[d.group[i]] for i in range(len(problem.nodes))], cost,
                       max(d.M, default=0.0), q * len(d.acc), q)
    return bound if math.isfinite(bound) else 0.0


def _cut_over_memory(problem: Instance, d: LatencyData, V: _Vars, q: int, be: Any,
                     value: Callable[[Any], float]) -> bool:
    """For :func:`.driver.refitted`: for every accelerator whose classes (over its calls) ``value`` puts over its
    memory as written, ``Σ_{v held} Σ_j x[v,a',j] ≤ |held| − 1`` on every accelerator ``a'`` of its type, and for
    every CPU core over its memory (row 15), ``Σ_{C held} z[C,r'] ≤ |held| − 1`` on every core ``r'``; whether
    there was one. No plan that fits breaks these rows: a device holding all of them holds their memory."""
    types = problem.device_types
    over = False
    for a in range(len(d.acc)):
        held = [v for v in range(len(d.classes)) if any(value(V.x[v, a, j]) > 0.5 for j in range(q))]
        if held and not fits([problem.nodes[i].memory for v in held for i in d.classes[v]], types[d.acc[a]].memory):
            over = True
            for other in (b for b in range(len(d.acc)) if d.acc[b] == d.acc[a]):
                be.add([(1, V.x[v, other, j]) for v in held for j in range(q)], hi=len(held) - 1)
    if V.z:
        colours = problem.colour_classes()
        bound = types[cpu_types(problem)[0]].memory
        for r in range(d.cores):
            held = [k for k in range(len(colours)) if (k, r) in V.z and value(V.z[k, r]) > 0.5]
            if held and not fits([problem.nodes[i].memory for k in held for i in colours[k]], bound):
                over = True
                for core in range(d.cores):
                    be.add([(1, V.z[k, core]) for k in held], hi=len(held) - 1)
    return over


def _decode(problem: Instance, d: LatencyData, V: _Vars, q: int, value: Callable[[Any], float]) -> Plan | None:
    types = problem.device_types
    devices = []
    on_acc = set()
    for a in range(len(d.acc)):
        calls = []
        for j in range(q):
            members = [v for v in range(len(d.classes)) if value(V.x[v, a, j]) > 0.5]
            on_acc.update(members)
            ids = tuple(sorted((problem.nodes[i].id for v in members for i in d.classes[v]), key=problem.index_of))
            if ids:
                calls.append(ids)
        if calls:
            union = tuple(sorted((i for call in calls for i in call), key=problem.index_of))
            devices.append(DeviceAssignment(types[d.acc[a]].name, union, tuple(calls)))
    by_cpu: dict[int, list[int]] = {}
    for v, members in enumerate(d.classes):
        if v in on_acc:
            continue
        for i in members:
            t = d.cpu_type[i]
            if t is None:
                return None
            by_cpu.setdefault(t, []).append(problem.nodes[i].id)
    if V.z:  # the cores' memory binds: each class on its core (row 15)
        t = next(iter(by_cpu), None)
        colours = problem.colour_classes()
        for r in range(d.cores):
            ids = [problem.nodes[i].id for k, members in enumerate(colours) for i in members
                   if (k, r) in V.z and value(V.z[k, r]) > 0.5]
            if ids and t is not None:
                devices.append(DeviceAssignment(types[t].name, tuple(sorted(ids, key=problem.index_of))))
        return Plan(tuple(devices))
    if V.w:  # stages: deal the CPU colour classes round the cores in use (row 13)
        cores = sum(1 for var in V.w if value(var) > 0.5)
        on_cpu = [c for c in problem.colour_classes() if d.group[c[0]] not in on_acc]
        if on_cpu and not 0 < cores <= len(on_cpu):
            return None
        dealt: list[list[int]] = [[] for _ in range(cores)]
        for k, members in enumerate(on_cpu):
            dealt[k % cores].extend(problem.nodes[i].id for i in members)
        t = next(iter(by_cpu), None)
        for ids in dealt:
            if ids and t is not None:
                devices.append(DeviceAssignment(types[t].name, tuple(sorted(ids, key=problem.index_of))))
        return Plan(tuple(devices))
    for t, ids in sorted(by_cpu.items()):
        devices.append(DeviceAssignment(types[t].name, tuple(ids)))
    return Plan(tuple(devices))


def _hint(problem: Instance, d: LatencyData, V: _Vars, q: int, plan: Plan) -> tuple[dict[Any, float] | None, str]:
    """Values of the placement variables of ``plan`` (times are left to the solver), with the plan's
    accelerators of each type put in the canonical order of rows (2)."""
    spot: dict[int, tuple[int, int]] = {}
    by_type: dict[int, list[list[tuple[int, ...]]]] = {}
    for dev in plan.devices:
        t = next((k for k, dt in enumerate(problem.device_types) if dt.name == dev.type), None)
        if t is None:
            return None, "warm start ignored: unknown device type"
        if problem.device_types[t].pays_comm and dev.nodes:
            calls = [c for c in (dev.calls or (dev.nodes,)) if c]
            if len(calls) > q:
                return None, f"warm start ignored: a device runs more than {q} calls"
            by_type.setdefault(t, []).append(calls)
    try:
        for t, devices in by_type.items():
            def lowest(calls: list[tuple[int, ...]]) -> int:
                return min(d.group[problem.index_of(i)] for c in calls for i in c)

            for r, calls in enumerate(sorted(devices, key=lowest)):
                a = next((a for a in range(len(d.acc)) if d.acc[a] == t and d.rank[a] == r), None)
                if a is None:
                    return None, "warm start ignored: more accelerators than exist"
                for j, call in enumerate(calls):
                    for node_id in call:
                        spot[problem.index_of(node_id)] = (a, j)
    except KeyError:
        return None, "warm start ignored: unknown node id"
    values: dict[Any, float] = {}
    for v, members in enumerate(d.classes):
        spots = {spot.get(i) for i in members}
        if len(spots) != 1:
            return None, "warm start ignored: the plan splits a colour class"
        where = spots.pop()
        for a in range(len(d.acc)):
            for j in range(q):
                values[V.x[v, a, j]] = 1.0 if where == (a, j) else 0.0
    if V.w:
        pays = {dt.name: dt.pays_comm for dt in problem.device_types}
        cores = sum(1 for dev in plan.devices if dev.nodes and not pays[dev.type])
        values.update({var: 1.0 if r < cores else 0.0 for r, var in enumerate(V.w)})
    return values, ""


def latency_verdict(problem: Instance, plan: Plan, calls: int, stages: int | None,
                    latency: float | None = None) -> Verdict:
    """The latency evaluator's verdict on ``plan``, with the call limit ``calls`` and the stage count ``stages``
    of the model; ``latency``: the plan's latency where the caller has it (only the limit and the count are
    then checked: on 100,000 nodes an evaluation takes seconds)."""
    from placement.verification.check import call_limit_violations
    from placement.verification.latency import evaluate_latency

    ev = None if latency is not None else evaluate_latency(problem, plan)
    violations = (() if ev is None else tuple(ev.violations)) + tuple(call_limit_violations(problem, plan, calls))
    value = latency if ev is None else ev.latency
    return stage_count_verdict(Verdict(not violations, value, violations), plan, stages)


def interrupted_before_search(problem: Instance, backend: str, began: float, plan: Plan | None,
                              verify: Callable[[Plan], Verdict], echoes: bool = True) -> SearchInterrupted:
    """The interrupt of a latency MILP stopped by Ctrl-C before its search (since ``began``, on ``backend``),
    carrying ``plan``, the start in hand (or none), checked by ``verify``, with the longest-path bound; once the
    same SIGINT delivered again has passed (:func:`placement.sigint.absorb_echoes`) unless ``echoes`` is false
    (the caller waited them out)."""
    if echoes:
        absorb_echoes(time.perf_counter())
    return SearchInterrupted(None, out_of_time(problem, f"milp-{backend}", "latency", "sets", began,
                                               "the search was interrupted before it started", plan, verify,
                                               latency_lower_bound(problem)))


def interrupted_start(problem: Instance, backend: str, began: float, plan: Plan, latency: float | None,
                      calls: int, stages: int | None) -> SearchInterrupted:
    """The interrupt of a latency MILP stopped by Ctrl-C while its start was sought or improved, carrying
    ``plan``, the best start found by then (of latency ``latency`` where known), verified for the request."""
    def verify(other: Plan) -> Verdict:
        return latency_verdict(problem, other, calls, stages, latency if other is plan else None)

    absorb_echoes(time.perf_counter())
    return interrupted_before_search(problem, make_backend(backend).name, began, plan, verify, echoes=False)


def solve_milp_latency(problem: Instance, *, backend: str, options: SolveOptions, calls: int = DEFAULT_CALLS,
                       warm_start: Plan | None = None, max_product: float = DEFAULT_MAX_PRODUCT,
                       progress: Callable[[str], None] | None = None, stages: int | None = None,
                       check: Callable[[], Plan | None] | None = None,
                       start_latency: float | None = None) -> Solution:
    """Latency-optimal plan with up to ``calls`` contiguous calls per accelerator, by the MILP above;
    with ``stages=N``, among the plans in which exactly ``N`` devices hold a node (row 13).
    ``check``: as for :func:`~placement.solvers.milp.driver.solve_throughput`. ``start_latency``: the
    latency :func:`~placement.verification.latency.evaluate_latency` found for ``warm_start``, a valid
    plan, where the caller has it (the start's verdict then adds the call limit and stage count alone:
    on 100,000 nodes an evaluation takes seconds). A valid start that meets the longest-path bound is
    returned optimal before any model is built (stats ``model_built: False``)."""
    check_objective(problem, "latency")
    cpu_types(problem)   # refused before any start is looked at, whatever the start
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise InvalidParameterError("calls", f"must be a positive integer, not {calls!r}")
    stages = stage_count(problem, stages)
    start = time.perf_counter()
    be = make_backend(backend)

    def verify(plan: Plan) -> Verdict:
        """The latency evaluator's verdict, with the call limit and the stage count of this model."""
        return latency_verdict(problem, plan, calls, stages, start_latency if plan is warm_start else None)

    verdict = None if warm_start is None else verify(warm_start)
    simple = latency_lower_bound(problem)
    if verdict is not None and verdict.valid and meets(simple, verdict.objective):
        # nothing is left to prove: no model is built (on a chain of 100,000 nodes that took the time limit)
        raw = skipped(be, options, progress, verdict.objective, simple)
        ctx = Context(method=f"milp-{be.name}", objective_kind="latency", contiguity="sets", start=start, unit=1.0,
                      exact_data=True, simple_bound=simple, exact_feasibility=True,
                      notes=[f"started from a plan of value {verdict.objective:.6g}"],
                      stats={"backend": be.name, "model_built": False}, bound_name="the longest-path bound")
        return conclude(ctx, be, raw, lambda value: None, verify, (warm_start, verdict.objective))
    if options.deadline is not None and time.perf_counter() >= options.deadline:   # no time to build, let alone solve
        return out_of_time(problem, f"milp-{be.name}", "latency", "sets", start,
                           "the time limit ran out before the model was built", warm_start, verify,
                           latency_lower_bound(problem))
    be.start_build(options.deadline, progress, options.time_limit)
    if progress is not None:
        progress(f"building the latency model for {be.name} ({len(problem.nodes):,} nodes, {calls} "
                 f"call{'s' if calls > 1 else ''} per accelerator)")
    try:   # Ctrl-C before the search (the build, the bounds): the starting plan goes on, verified, in the interrupt
        try:
            d = prepare_latency(problem, be.integer_only, max_product, be.check_time, calls)
            V = _build(problem, d, be, calls, stages)
        except OutOfTime as exc:
            return out_of_time(problem, f"milp-{be.name}", "latency", "sets", start, str(exc), warm_start, verify,
                               latency_lower_bound(problem))
        be.end_build()
        # the path bound on the instance's own times: row 14's where the model holds them exactly scaled
        # (its integer sums are then the exact ones), else computed again, since the model's times are
        # rounded down or its memory rounded up
        path = (V.floor / d.scaling.scale if d.scaling.exact and d.memory_exact and V.floor > 0
                else latency_path_bound(problem, calls))
        simple_bound, bound_name = latency_lower_bound(problem), "the longest-path bound"
        if math.isfinite(path) and path >= simple_bound > 0:
            simple_bound, bound_name = path, "the path bound"
        notes = data_notes(d.scaling, d.memory_exact, be.name, integer_only=be.integer_only)
        data = tuple(notes)
        fallback = start_from(warm_start, verify, be, [V.L], d.scaling.scale, notes)
        stats_chain: dict[str, Any] = {}
        extra = []
        if calls == 1:   # the critical-chain bound, pruned at the starting plan's value (all a proof of it needs)
            chain = chain_bound(problem, cutoff=fallback[1] if fallback is not None else math.inf)
            extra.append(("chain_bound", "chain_ideals", "chain bound", "ideal", chain.value, chain.ideals, chain.why))
        # the module-chain bound without counts, then, where it was found, the stronger one with the calls
        # counted, which takes more work (InceptionV3: 1.7 s, then 4.6-8 s): each within half the time left, so
        # that the solver keeps the rest, and the first is there where the second runs out of work or time
        modules = module_chain(problem, deadline=_half_left(options.deadline))
        stats_chain["module_bound_counts_calls"] = False
        if modules.value is not None:
            counting = module_chain(problem, deadline=_half_left(options.deadline), calls=calls)
            if counting.value is not None:
                modules = counting
                stats_chain["module_bound_counts_calls"] = True
            else:
                stats_chain["module_bound_counted_skipped"] = counting.why
                if progress is not None:
                    progress(f"no module-chain bound with the calls counted: {counting.why}")
        counted_calls = f" ({counted(calls * len(d.acc), 'call counted')})"
        label = "module-chain bound" + (counted_calls if stats_chain["module_bound_counts_calls"] else "")
        extra.append(("module_bound", "modules", label, "module", modules.value, modules.modules, modules.why))
        for key, size_key, label, unit, value, size, why in extra:
            stats_chain.update({key: value, size_key: size})
            if value is None:
                stats_chain[f"{key}_skipped"] = why
                if progress is not None:
                    progress(f"no {label}: {why}")
                continue
            if value > simple_bound:
                simple_bound, bound_name = value, f"the {label}"
            if progress is not None:
                progress(f"{label} {value:.6g} ({counted(size, unit)})")
        if fallback is not None:
            values, why = _hint(problem, d, V, calls, fallback[0])
            if values is not None:
                why = be.hint(values)
            if why:
                notes.append(why)
        stats: dict[str, Any] = {"backend": be.name, "classes": len(d.classes), "accelerators": len(d.acc),
                                 "calls_per_accelerator": calls, "time_scale": d.scaling.scale,
                                 "time_scale_exact": d.scaling.exact, **be.size,
                                 "build_s": time.perf_counter() - start, "gap_allowed": options.gap}
        if stages is not None:
            stats["stages"] = stages
        stats["path_bound"] = path
        if d.alone:   # rows rounded to admit every plan that fits (.data._admitting_memory)
            stats[ADMITTING] = True
        stats.update(stats_chain)
        if progress is not None and path > 0:
            progress(f"path bound {path:.6g}")
    except KeyboardInterrupt:
        raise interrupted_before_search(problem, be.name, start, warm_start, verify) from None
    raw = run_solver(be, options, progress, 1.0 / d.scaling.scale, fallback, simple_bound)
    if d.alone:
        raw, cut = refitted(be, raw, options, progress, 1.0 / d.scaling.scale, fallback, simple_bound,
                            lambda value: _cut_over_memory(problem, d, V, calls, be, value))
        if cut:
            stats["memory_plans_cut"] = cut
            notes.append(memory_cut_note(cut, be.name))
    fallback = checked_claim(be, raw, fallback, check, verify, notes)
    ctx = Context(method=f"milp-{be.name}", objective_kind="latency", contiguity="sets", start=start,
                  unit=1.0 / d.scaling.scale, exact_data=d.scaling.exact, simple_bound=simple_bound,
                  exact_feasibility=d.memory_exact, notes=notes, stats=stats, bound_name=bound_name,
                  data_notes=data)

    return conclude(ctx, be, raw, lambda value: _decode(problem, d, V, calls, value), verify, fallback)
