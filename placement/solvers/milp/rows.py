"""Rows shared by the throughput formulations: boundary indicators, loads, objectives.

With ``x[v,s]`` "group v is on slot s" (given as a list of terms, so a formulation
may define it as a difference of cumulative variables), ``y[s,k]`` "slot s has type
k" and ``b[u,s]`` the boundary indicator of cost node ``u`` on slot ``s``:

(B)  ``b[u,s] ≥ x[w,s] − x[r(u),s]`` and ``b[u,s] ≥ x[r(u),s] − x[w,s]`` for ``w ∈ W(u)``:
     ``N[u]`` meets the slot's set and its complement, so ``u ∈ In(S) ∪ Out(S)`` (one
     indicator covers both: a node is never in ``In(S)`` and ``Out(S)`` of one set).
(L)  ``throughput``:        ``y[s,k] = 1 ⇒ Σ_v p_k(v) x[v,s] + pays_k Σ_u c(u) b[u,s] ≤ T``;
     ``throughput-gpipe``:  the same with forward times and the costs of forward ``u``
     ``≤ TF``, and with backward times and the costs of backward ``u`` ``≤ TB``.
(O)  minimise ``T``, or ``TF + TB``.
(C)  a set ``{v : x(v) = 1}`` contiguous (convex) in a graph: closure variables
     ``α[v], δ[v] ∈ [0,1]`` with ``α[v] ≥ x(v)``, ``α[w] ≥ α[v]``, ``δ[v] ≥ x(v)``,
     ``δ[v] ≥ δ[w]`` for edges ``(v,w)``, and ``x(v) ≥ α[v] + δ[v] − 1`` for every ``v``
     with a predecessor and a successor. The rows bound ``α`` and ``δ`` from below only,
     and their least values are the true ancestor and descendant closures of the set,
     which are 0/1 whenever ``x`` is; so the last row admits exactly the sets that no
     path leaves and re-enters.

Minimisation drives ``b`` to its least value, the true indicator, wherever a load
row binds; where it does not, a larger ``b`` changes nothing.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import CostNode, GroupData

Terms = list[tuple[float, Any]]
OBJECTIVES = ("throughput", "throughput-gpipe")


def negate(terms: Terms) -> Terms:
    return [(-a, v) for a, v in terms]


def boundary_rows(be: Backend, cost_nodes: Sequence[CostNode], x: Callable[[int], Terms], b: dict[int, Any]) -> None:
    """(B) for one slot: ``x(v)`` gives the terms of ``x[v,s]``, ``b[i]`` the indicator of ``cost_nodes[i]``."""
    for i, cn in enumerate(cost_nodes):
        for w in cn.W:
            be.add(x(w) + negate(x(cn.r)) + [(-1, b[i])], hi=0)
            be.add(x(cn.r) + negate(x(w)) + [(-1, b[i])], hi=0)


def convexity_rows(be: Backend, nodes: Sequence[int], edges: Sequence[tuple[int, int]], x: Callable[[int], Terms],
                   tag: str) -> tuple[dict[int, Any], dict[int, Any]]:
    """(C) for one set; ``x(v)`` gives the terms of its membership of node ``v``. Returns ``α`` and ``δ``
    by node, both empty when no node has a predecessor and a successor (every set is then convex)."""
    has_pred = {w for _, w in edges}
    has_succ = {v for v, _ in edges}
    middle = [v for v in nodes if v in has_pred and v in has_succ]
    if not middle:
        return {}, {}
    alpha = {v: be.num_var(1, f"alpha[{v},{tag}]") for v in nodes}
    delta = {v: be.num_var(1, f"delta[{v},{tag}]") for v in nodes}
    for v in nodes:
        be.add(x(v) + [(-1, alpha[v])], hi=0)
        be.add(x(v) + [(-1, delta[v])], hi=0)
    for v, w in edges:
        be.add([(1, alpha[v]), (-1, alpha[w])], hi=0)
        be.add([(1, delta[w]), (-1, delta[v])], hi=0)
    for v in middle:
        be.add([(1, alpha[v]), (1, delta[v])] + negate(x(v)), hi=1)
    return alpha, delta


def slot_types(be: Backend, d: GroupData) -> dict[tuple[int, int], Any]:
    """``y[s,k]``, "slot ``s`` has type ``k``", with ``Σ_k y[s,k] ≤ 1`` and ``Σ_s y[s,k] ≤ count_k``;
    with ``d.stages`` set (``N`` slots), ``Σ_k y[s,k] = 1``: every slot is used, so (with the rows of
    :func:`slot_rows`) exactly ``N`` devices are non-empty."""
    slots, K = range(1, d.slots + 1), range(len(d.types))
    y = {(s, k): be.bool_var(f"y[{s},{k}]") for s in slots for k in K}
    for s in slots:
        be.add([(1, y[s, k]) for k in K], lo=-math.inf if d.stages is None else 1, hi=1)
    for k in K:
        be.add([(1, y[s, k]) for s in slots], hi=d.counts[k])
    return y


def slot_rows(be: Backend, d: GroupData, objective: str, s: int, x: Callable[[int], Terms],
              y: dict[tuple[int, int], Any], b: dict[tuple[int, int], Any], targets: list[Any]) -> None:
    """The rows of one slot ``s`` that every throughput formulation shares, with ``x(v)`` the terms of
    ``x[v,s]``: ``x[v,s] ≤ Σ_{k ∈ F(v)} y[s,k]`` (support, per-group memory, a used slot has a type);
    ``Σ_v m'(v) x[v,s] ≤ Σ_k min(M_k, Σ_v m'(v)) y[s,k]`` (where some bound can bind; ``m'``:
    :func:`capped_sizes`); (B) and (L);
    and the symmetry rows ``Σ_k y[s,k] ≤ Σ_v x[v,s]`` (used slots are non-empty) and
    ``Σ_k y[s+1,k] ≤ Σ_k y[s,k]`` (they come first)."""
    n, K = len(d.groups), range(len(d.types))
    for v in range(n):
        be.add(x(v) + [(-1, y[s, k]) for k in d.fits(v)], hi=0)
    if d.memory_binds:
        sizes = capped_sizes(d)
        be.add([(a * sizes[v], var) for v in range(n) if sizes[v] for a, var in x(v)]
               + [(-min(d.M[k], sum(sizes)), y[s, k]) for k in K], hi=0)
    bs = {i: b[i, s] for i in range(len(d.cost_nodes))} if b else {}
    if b:
        boundary_rows(be, d.cost_nodes, x, bs)
    load_rows(be, d, objective, x, bs, {k: y[s, k] for k in K}, targets)
    be.add([(1, y[s, k]) for k in K] + [t for v in range(n) for t in negate(x(v))], hi=0)
    if s < d.slots:
        be.add([(1, y[s + 1, k]) for k in K] + [(-1, y[s, k]) for k in K], hi=0)


def capped_sizes(d: GroupData) -> list[float]:
    """The groups' memory as the slot memory row counts it: ``min(m(v), M*)``, with ``M*`` the largest bound
    below the total. The row is the same on every type: a group larger than ``M*`` fits no type whose bound
    binds (its slot has another type, on which the row holds whatever the sizes), and the row's coefficients
    stay near the bounds (a node of 6e9 against a bound of 6 made CBC call a feasible model infeasible)."""
    total = sum(d.m)
    cap = max((bound for bound in d.M if bound < total), default=total)
    return [min(size, cap) for size in d.m]


def objective_vars(be: Backend, d: GroupData, objective: str) -> list[Any]:
    """``[T]`` or ``[TF, TB]``, each bounded by the largest possible load (on a floating-point backend
    with a relative margin of 1e-9: where that load is the optimum, as when every node can only go to
    one CPU, the bound met the optimum exactly and PuLP's CBC called the model infeasible; a margin of
    one model unit instead made HiGHS prove 7 where the optimum is 6 on another model, which the
    relative margin does not)."""
    ub = d.load_ub if be.integer_only else d.load_ub * (1 + 1e-9)
    if objective == "throughput":
        return [be.num_var(ub, "T")]
    return [be.num_var(ub, "TF"), be.num_var(ub, "TB")]


def load_rows(be: Backend, d: GroupData, objective: str, x: Callable[[int], Terms], b: dict[int, Any],
              y: dict[int, Any], targets: list[Any]) -> None:
    """(L) for one slot; ``y[k]`` is the slot's type indicator, ``targets`` from :func:`objective_vars`."""
    for k in range(len(d.types)):
        typed_load_rows(be, d, objective, k, x, b, targets, enforce=y[k])


def typed_load_rows(be: Backend, d: GroupData, objective: str, k: int, x: Callable[[int], Terms],
                    b: dict[int, Any], targets: list[Any], enforce: Any = None) -> None:
    """(L) for one slot of type ``k``: plain rows (a slot whose type is fixed), or, with ``enforce``,
    rows that hold only when that 0/1 variable is 1."""
    n = len(d.groups)
    parts: list[tuple[Callable[[int], float | None], bool | None]]
    if objective == "throughput":
        parts = [(lambda v: d.p(v, k), None)]
    else:
        parts = [(lambda v: d.pf[v][k], False), (lambda v: d.pb[v][k], True)]
    for (time_of, backward), target in zip(parts, targets):
        terms: Terms = []
        for v in range(n):
            p = time_of(v)
            if p:
                terms += [(a * p, var) for a, var in x(v)]
        if d.pays[k] and b:
            terms += [(cn.c, b[i]) for i, cn in enumerate(d.cost_nodes)
                      if backward is None or cn.backward == backward]
        if terms:
            be.add(terms + [(-1, target)], hi=0, enforce=enforce)


def minimise(be: Backend, targets: list[Any]) -> None:
    """(O)."""
    be.minimize([(1, t) for t in targets])


def boundary_values(d: GroupData, held: set[int]) -> list[float]:
    """True value of ``b[u,s]`` per cost node for a slot holding the groups ``held``."""
    return [1.0 if any((w in held) != (cn.r in held) for w in cn.W) else 0.0 for cn in d.cost_nodes]


def target_values(d: GroupData, objective: str, slots: list[tuple[set[int], int]]) -> list[float]:
    """Values of the objective variables for slots given as (groups held, type): the max loads."""
    if objective == "throughput":
        parts: list[tuple[Callable[[int, int], float | None], bool | None]] = [(d.p, None)]
    else:
        parts = [(lambda v, k: d.pf[v][k], False), (lambda v, k: d.pb[v][k], True)]
    values = []
    for time_of, backward in parts:
        best = 0.0
        for held, k in slots:
            load = sum(time_of(v, k) or 0.0 for v in held)
            if d.pays[k]:
                load += sum(cn.c * bv for cn, bv in zip(d.cost_nodes, boundary_values(d, held))
                            if backward is None or cn.backward == backward)
            best = max(best, load)
        values.append(best)
    return values
