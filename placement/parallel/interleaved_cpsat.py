"""The CP-SAT model of one interleaved shape ``(S, d, t, v)`` (see :mod:`placement.parallel.interleaved`).

Data: nodes ``u`` with TMPCs ``o`` of degree ``t``; ``a(u,o) = timePerSample/d + 4·(d − 1)·
parameterSize/(d·m·bw)``; per edge ``u → w`` the sides ``out(u,o) = 2·(communicationCost +
syncTimeBw[w])/(d·bw)`` (paid by ``u``'s group) and ``in(w,o) = 2·(communicationCost +
syncTimeFw[u])/(d·bw)`` (paid by ``w``'s group) when the edge crosses two chunks; ``A(u,o)``,
``B(u,o)`` the TMPC's ``memoryUsageA``, ``memoryUsageB``; ``K = S·v`` chunks, chunk ``k`` on group
``k mod S``; the held profiles ``h`` of each group (:func:`~placement.parallel.interleaved.held_profiles`).

Variables (0/1 unless said): ``x[u,k]`` (``u`` is in a chunk ``≤ k``), ``sel[u,o]`` (``u`` runs TMPC
``o``; absent for a node's base option, the first, whose choice is ``1 − Σ sel``), ``T ≥ 0``
(integer). ``b[u,k] = x[u,k] − x[u,k−1]`` and ``in[u,g] = Σ_{k ≡ g} b[u,k]`` are expressions.

1. ``x[u,k] ≤ x[u,k+1]``, ``x[u,K−1] = 1``; ``x[w,k] ≤ x[u,k]`` for every edge ``u → w``
   (each ``{u : x[u,k] = 1}`` is predecessor-closed: the chunks are a pipeline, no edge backwards);
2. ``Σ_u b[u,k] ≥ 1`` (no empty chunk); ``Σ_o sel[u,o] ≤ 1``;
3. crossing sides ``co[e,g] ≥ b[u,k] − b[w,k]`` and ``ci[e,g] ≥ b[w,k] − b[u,k]`` for ``k ≡ g``;
4. load of group ``g``: ``Σ_u in[u,g]·a₀(u) + Σ_e co[e,g]·out₀(e) + ci[e,g]·in₀(e) + Σ extras ≤ T``, where
   the ``₀`` terms are the least over the options and every extra is a product ``p ≥ f + sel[u,o] − 1``
   (``f`` the 0/1 term it multiplies) with the option's non-negative excess as coefficient;
5. memory of group ``g``, for each profile ``h``: ``Σ_c h_c·Σ_u (b[u,cS+g]·A(u,o)) + Σ_u in[u,g]·B(u,o)
   ≤ memory``, the option's excess over the base again a product (``p ≥ f + sel − 1`` for a
   positive coefficient, ``p ≤ f``, ``p ≤ sel`` for a negative one);
6. for each plan to cut off (plans known not to fit, :func:`solve_shape`'s ``exclude``):
   ``Σ_{y = 1 in it} (1 − y) + Σ_{y = 0 in it} y ≥ 1`` over the ``x`` and ``sel`` variables;
7. minimise ``T``.

Every plan of the shape but those cut off is a solution with ``T`` its largest group load (the products
may only exceed the true products where that cannot lower a left-hand side), and every solution decodes to
a plan: exact. Rows 5 are left out when no choice can exceed the memory, and so are options
dominated by another (no larger in ``a`` and every sync) when memory cannot bind.

Numbers: times are multiplied by a power of two ``scale`` that puts the ceiling ``U`` (the cutoff, else
the whole work) near ``2^31``, and rounded down; a node's or crossing's cost above ``U`` is written as one unit
past ``T``'s bound (its plans are excluded as by the cost itself, and no coefficient times that bound passes
``2^62``), so that a TMPC far slower than the optimum does not coarsen the units.
Memory is written in the decimal unit in which every size and the bound are whole numbers as written
(:func:`placement.problem.memory_fit.decimal_unit`): the rows then decide the model's rule exactly
(sizes 0.1 and 0.2 fit a bound of 0.3; in binary, scaled and rounded, they did not, and a plan that fits
was lost). CP-SAT adds integers exactly up to its overflow limit, so the unit serves while the magnitudes of
a row's coefficients and its bound summed stay under ``2^61`` (what CP-SAT's overflow check counts), the
sizes then given as exact integers where a row passes ``2^53`` (sizes of 17 significant digits and a bound
of 11: a rounded model let a plan 1.6e-15 over the bound through, and called it the shape's optimum). Where
no such unit fits, sizes are multiplied by the power of two that keeps that sum under ``2^61``, and rounded
down, and the bound rounded up past the sizes' rounding. Either way the model is exact or a relaxation: its
infeasibility and bounds hold for the true data (the plans cut off are plans that do not fit), and the
decoded plan is re-evaluated exactly by the caller. Asked for ``narrowed`` rows, the rounded sizes are
rounded up instead and the bound, less :data:`~placement.problem.memory_fit.LENIENT` of it, down: every plan
the model admits fits as written, and its bounds hold only for the plans it admits (one that fits within
``LENIENT`` of the bound may be missed). The backend is the package's CP-SAT backend
(:mod:`placement.solvers.milp.backends.cpsat`: presolve off, overflow watched).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from placement.io.piper import PiperInstance
from placement.parallel.interleaved import Shape, held_profiles, memory_can_bind, node_costs, plan_of
from placement.parallel.plan import ParallelPlan
from placement.problem.memory_fit import LENIENT, as_written, decimal_unit
from placement.solvers.milp.backends.base import OutOfTime, SolveOptions
from placement.solvers.milp.backends.cpsat import SAFE_PRODUCT
from placement.solvers.milp.heartbeat import heartbeat

#: the load ceiling in model units: ``2^31``, so that a coefficient times ``T``'s bound stays under ``2^62``
LOAD_UNITS = 2.0 ** 31
#: the most the coefficients of a memory row and its bound add up to in model units, when they are scaled by a
#: power of two: under CP-SAT's overflow limit of ``2^62`` (:mod:`placement.solvers.milp.backends.cpsat`)
MEMORY_UNITS = 2.0 ** 61


@dataclass(frozen=True)
class ShapeOutcome:
    """``status``: ``optimal``, ``feasible``, ``infeasible`` (no plan of the shape at or under the
    cutoff), ``no_solution`` (stopped without one); ``plan`` and its model ``value`` (true units,
    rounded down); ``bound``: proven bound on the value of every plan of the shape (of every plan the
    model admits: on narrowed memory rows only those, and never a plan cut off)."""

    status: str
    plan: ParallelPlan | None
    value: float | None
    bound: float
    wall_s: float
    stats: dict[str, Any] = field(default_factory=dict)


def _power_of_two(ceiling: float, largest: float) -> float:
    """The largest power of two ``s`` with ``ceiling · s ≤ largest``."""
    return 2.0 ** math.floor(math.log2(largest / ceiling)) if ceiling > 0 else 1.0


def _memory_activity(tmpcs: dict[int, list[Any]], memory: float, profiles: list[Any], v: int) -> float:
    """At least the sum of the magnitudes of a memory row's coefficients and its bound (all its variables are
    0/1), as CP-SAT's overflow check counts them: node ``u`` adds, per chunk ``c`` held ``h_c`` times, its
    base option's size on the two terms of its boundary and each other option's difference on a product
    (``(options + 1)·h_c·`` its largest ``memoryUsageA``), and its ``memoryUsageB`` on the ``2v`` terms of its
    membership and the products (``(2v + options − 1)·`` its largest)."""
    held = max(sum(h) for p in profiles for h in p)
    return memory * (1 + LENIENT) + 1 + math.fsum(
        (len(tmpcs[u]) + 1) * held * max(o.memory_usage_a for o in tmpcs[u])
        + (2 * v + len(tmpcs[u]) - 1) * max(o.memory_usage_b for o in tmpcs[u]) for u in tmpcs)


def _memory_units(nodes: list[int], tmpcs: dict[int, list[Any]], memory: float, largest: float,
                  activity: float, narrowed: bool = False) -> tuple[Callable[[float], float], float, bool]:
    """How the memory rows write a size, and their bound (module docstring, Numbers): in the decimal unit
    in which every size and the bound are whole numbers as written (0.1 + 0.2 fits 0.3, as the evaluator
    reads them), as floats where ``largest`` (the most any row sums) stays within ``2^53`` in it, else as
    exact integers where ``activity`` (:func:`_memory_activity`) stays within :data:`MEMORY_UNITS` in it;
    else times a power of two that keeps ``activity`` within :data:`MEMORY_UNITS`, sizes rounded down and
    the bound rounded up past the rounding of the sizes as written, so that the rows still admit every plan
    that fits (and may admit one that does not: the last item, ``True`` then). ``narrowed``: in that last
    case sizes rounded up and the bound, less :data:`LENIENT` of it, rounded down, so that every plan the rows
    admit fits (and one that fits within :data:`LENIENT` of the bound may be missed)."""
    sizes = [x for u in nodes for o in tmpcs[u] for x in (o.memory_usage_a, o.memory_usage_b)]
    unit = decimal_unit([*sizes, memory], largest)
    if unit is not None:
        return (lambda x: float(round(x * unit))), float(round(memory * unit)), False
    if all(map(math.isfinite, [*sizes, memory])):   # the least unit in which the sizes as written are whole
        q = math.lcm(*(as_written(x).denominator for x in [*sizes, memory]))
        if activity * q <= MEMORY_UNITS:
            return (lambda x: int(as_written(x) * q)), int(as_written(memory) * q), False
    scale = _power_of_two(activity, MEMORY_UNITS)
    if narrowed:   # the sizes are non-negative and ``x · scale`` is exact: a row's sum is at least the sizes'
        return (lambda x: float(math.ceil(x * scale))), float(math.floor(memory * (1 - LENIENT) * scale)), True
    return (lambda x: float(math.floor(x * scale))), float(math.ceil(memory * (1 + LENIENT) * scale)), True


def _exclusion(plan: ParallelPlan, nodes: list[int], K: int, x: dict, sel: dict, ids: dict[int, list[str]],
               options: dict[int, list[int]]) -> tuple[list[tuple[float, Any]], float] | None:
    """The row ``Σ_{y = 1 in plan} (1 − y) + Σ_{y = 0 in plan} y ≥ 1`` over the chunk variables ``x[u,k]``
    (``k < K − 1``) and the choices ``sel[u,o]``, as terms and a lower bound: every solution but the plan's
    own meets it; ``None`` where the plan is not one of the model's (a node's TMPC among the options left out)."""
    where = {u: (k, stage.tmpcs.get(u)) for k, stage in enumerate(plan.stages) for u in stage.nodes}
    terms: list[tuple[float, Any]] = []
    ones = 0
    for u in nodes:
        if u not in where or where[u][1] not in ids[u] or ids[u].index(where[u][1]) not in options[u]:
            return None
        chosen = ids[u].index(where[u][1])
        values = [(x[u, k], k >= where[u][0]) for k in range(K - 1)] + \
            [(sel[u, o], o == chosen) for o in options[u][1:]]
        for var, one in values:
            terms.append((-1, var) if one else (1, var))
            ones += one
    return terms, 1 - ones


def solve_shape(instance: PiperInstance, shape: Shape, memory: float, *, cutoff: float | None,
                time_limit: float, threads: int = 1, hint: ParallelPlan | None = None,
                progress: Callable[[str], None] | None = None, narrowed: bool = False,
                exclude: tuple[ParallelPlan, ...] = ()) -> ShapeOutcome:
    """Minimise the largest group load of ``shape`` (module docstring), only plans of value ``≤ cutoff``;
    ``progress`` hears a line whenever the search has been silent for a while
    (:func:`placement.solvers.milp.heartbeat.heartbeat`). ``narrowed``: memory rows that have to be rounded
    are rounded so that every plan they admit fits (:func:`_memory_units`); the outcome's bound then bounds
    only the plans that fit with :data:`LENIENT` of the memory to spare, not the shape. ``exclude``: plans of the
    shape cut off (one row each: the chunk and TMPC variables may not all take the plan's values), plans known
    not to fit, so that the bounds still hold for every plan that fits."""
    import time

    from placement.solvers.milp.backends import make_backend

    started = time.perf_counter()
    nodes = [node.id for node in instance.nodes]
    K, S, d, t, v = shape.groups * shape.chunks, shape.groups, shape.d, shape.t, shape.chunks
    bw = instance.bandwidth
    tmpcs = {node.id: node.configurations[t] for node in instance.nodes}
    cost = node_costs(instance, shape)
    local = instance.microbatches_in_batch // d
    profiles = [held_profiles(local, S, v, g) for g in range(S)]
    with_memory = memory_can_bind(instance, shape, memory)   # memory rows only when some choice could exceed it
    held = max(max(max(h) for h in p) for p in profiles)
    worst = held * sum(max(c.memory_usage_a for c in tmpcs[u]) for u in nodes) + \
        sum(max(c.memory_usage_b for c in tmpcs[u]) for u in nodes)
    edges = [e for e in instance.edges]
    out_side = {(e.src, e.dst): [2 * (e.communication_cost + c.sync_time_bw[e.dst]) / (d * bw) for c in tmpcs[e.src]]
                for e in edges}
    in_side = {(e.src, e.dst): [2 * (e.communication_cost + c.sync_time_fw[e.src]) / (d * bw) for c in tmpcs[e.dst]]
               for e in edges}
    options = {u: list(range(len(tmpcs[u]))) for u in nodes}
    if not with_memory:
        for u in nodes:
            def key(o: int, u: int = u) -> tuple[float, ...]:
                return (cost[u][o], *(out_side[(e.src, e.dst)][o] for e in edges if e.src == u),
                        *(in_side[(e.src, e.dst)][o] for e in edges if e.dst == u))
            keys = {o: key(o) for o in options[u]}
            options[u] = [o for o in options[u]
                          if not any(p != o and all(a <= b for a, b in zip(keys[p], keys[o])) and
                                     (keys[p] != keys[o] or p < o) for p in options[u])]
    ceiling = cutoff if cutoff is not None else (
        math.fsum(max(cost[u]) for u in nodes) + math.fsum(max(out_side[k]) + max(in_side[k]) for k in out_side))
    # the ceiling alone sets the scale, so that the units are fine beside the optimum whatever a TMPC or crossing
    # no good plan takes costs; a term above T's bound is written as that bound plus one, which excludes its
    # plans as the term itself does, and keeps every coefficient times T's bound within 2^62
    largest_term = max([max(c) for c in cost.values()] + [max(side[k]) for side in (out_side, in_side) for k in side])
    scale = _power_of_two(ceiling if ceiling > 0 else largest_term, LOAD_UNITS - 1)
    most = math.floor(ceiling * scale) + 1
    units = lambda x: float(min(math.floor(x * scale), most))  # noqa: E731

    be = make_backend("cp-sat")   # SolverUnavailableError where OR-Tools is not installed
    be.deadline = started + time_limit
    try:
        x = {(u, k): be.bool_var(f"x{u}_{k}", fixed=1 if k == K - 1 else None) for u in nodes for k in range(K)}
        for u in nodes:
            for k in range(K - 1):
                be.add([(1, x[u, k]), (-1, x[u, k + 1])], hi=0)
        for e in edges:
            for k in range(K - 1):
                be.add([(1, x[e.dst, k]), (-1, x[e.src, k])], hi=0)

        def b(u: int, k: int) -> list[tuple[float, Any]]:
            return [(1, x[u, k])] + ([(-1, x[u, k - 1])] if k else [])

        def member(u: int, g: int) -> list[tuple[float, Any]]:
            return [term for c in range(v) for term in b(u, c * S + g)]

        for k in range(K):
            be.add([term for u in nodes for term in b(u, k)], lo=1)
        base = {u: options[u][0] for u in nodes}
        sel = {}
        for u in nodes:
            for o in options[u][1:]:
                sel[u, o] = be.bool_var(f"s{u}_{o}")
            if len(options[u]) > 2:
                be.add([(1, sel[u, o]) for o in options[u][1:]], hi=1)

        def product(f: list[tuple[float, Any]], u: int, o: int, positive: bool, name: str) -> Any:
            """A 0/1 ``p`` standing for ``f · sel[u,o]``: ``p ≥ f + sel − 1`` (positive coefficient) or
            ``p ≤ f``, ``p ≤ sel`` (negative)."""
            p = be.bool_var(name)
            if positive:
                be.add([(1, p), *[(-a, var) for a, var in f], (-1, sel[u, o])], lo=-1)
            else:
                be.add([(1, p), *[(-a, var) for a, var in f]], hi=0)
                be.add([(1, p), (-1, sel[u, o])], hi=0)
            return p

        def base_excess(f: list[tuple[float, Any]], u: int, name: str) -> Any:
            """A 0/1 ``p ≥ f − Σ_o sel[u,o]``: ``f`` times "``u`` runs its base option"."""
            p = be.bool_var(name)
            be.add([(1, p), *[(-a, var) for a, var in f], *[(1, sel[u, o]) for o in options[u][1:]]], lo=0)
            return p

        def choice_terms(f: list[tuple[float, Any]], u: int, values: list[float], name: str,
                         exact: bool) -> list[tuple[float, Any]]:
            """``f · value(u's option)``. ``exact``: the base option's value on ``f`` and each other option's
            difference on a product of either sign; otherwise the least value on ``f`` and every option's
            non-negative excess over it on a product bounded from below only."""
            low = values[base[u]] if exact else min(values[o] for o in options[u])
            terms = [(a * low, var) for a, var in f] if low else []
            for o in options[u][1:]:
                excess = values[o] - low
                if excess:
                    terms.append((excess, product(f, u, o, excess > 0, f"{name}_{o}")))
            if values[base[u]] - low:
                terms.append((values[base[u]] - low, base_excess(f, u, f"{name}_b")))
            return terms

        T = be.num_var(most - 1, "T")
        crossing = [(e.src, e.dst) for e in edges
                    if max(out_side[(e.src, e.dst)]) > 0 or max(in_side[(e.src, e.dst)]) > 0]
        for g in range(S):
            if time.perf_counter() > be.deadline:
                raise OutOfTime("the time limit ran out while the model was built")
            load: list[tuple[float, Any]] = []
            for u in nodes:
                load += choice_terms(member(u, g), u, [units(c) for c in cost[u]], f"q{u}_{g}", exact=False)
            for (src, dst) in crossing:
                for side, owner, other, values in (("o", src, dst, out_side), ("i", dst, src, in_side)):
                    scaled = [units(c) for c in values[(src, dst)]]
                    if not any(scaled):
                        continue
                    flag = be.num_var(1, f"c{side}{src}_{dst}_{g}")
                    for c in range(v):
                        k = c * S + g
                        be.add([(1, flag), *[(-a, var) for a, var in b(owner, k)], *b(other, k)], lo=0)
                    load += choice_terms([(1, flag)], owner, scaled, f"e{side}{src}_{dst}_{g}", exact=False)
            be.add(load + [(-1, T)], hi=0)
        rounded = False
        if with_memory:
            mu, room, rounded = _memory_units(nodes, tmpcs, memory, max(memory, worst) * max(1, len(nodes)),
                                              _memory_activity(tmpcs, memory, profiles, v), narrowed)
            for g in range(S):
                per_chunk = [[term for u in nodes for term in
                              choice_terms(b(u, c * S + g), u, [mu(o.memory_usage_a) for o in tmpcs[u]],
                                           f"a{u}_{c * S + g}", exact=True)] for c in range(v)]
                static = [term for u in nodes for term in
                          choice_terms(member(u, g), u, [mu(o.memory_usage_b) for o in tmpcs[u]], f"m{u}_{g}",
                                       exact=True)]
                for h in profiles[g]:
                    if time.perf_counter() > be.deadline:
                        raise OutOfTime("the time limit ran out while the model was built")
                    be.add(static + [(h[c] * a, var) for c in range(v) for a, var in per_chunk[c]], hi=room)
        for plan in exclude:
            cut = _exclusion(plan, nodes, K, x, sel, {u: [o.id for o in tmpcs[u]] for u in nodes}, options)
            if cut is not None:
                be.add(cut[0], lo=cut[1])
        be.minimize([(1, T)])
        if hint is not None:   # a plan of this shape: its chunks and TMPCs
            where = {u: (k, stage.tmpcs[u]) for k, stage in enumerate(hint.stages) for u in stage.nodes}
            values = {x[u, k]: float(k >= where[u][0]) for u in nodes for k in range(K - 1)}
            for (u, o), var in sel.items():
                values[var] = float(tmpcs[u][o].id == where[u][1])
            be.hint(values)
    except OutOfTime:
        return ShapeOutcome("no_solution", None, None, 0.0, time.perf_counter() - started, {"reason": "model"})
    left = max(0.01, time_limit - (time.perf_counter() - started))
    with heartbeat(progress, SolveOptions(time_limit=left, threads=threads), 1.0 / scale, cutoff,
                   stop=be.interrupt) as watched:
        raw = be.solve(watched)
    stats = dict(raw.stats, scale=scale, memory_rows=with_memory, size=be.size)
    if rounded:   # widened, a plan the rows admit may not fit; narrowed, a plan that fits may be missed
        stats["memory_rounded"] = True
    if be.overflow_risk > SAFE_PRODUCT:   # CP-SAT's proofs on this model are not used (the backend's message)
        stats["doubt"] = raw.message
    wall = time.perf_counter() - started
    if raw.status == "infeasible":
        return ShapeOutcome("infeasible", None, None, math.inf if cutoff is None else cutoff, wall, stats)
    if raw.status not in ("optimal", "feasible"):
        bound = raw.bound / scale if raw.bound is not None else 0.0
        return ShapeOutcome(raw.status, None, None, bound, wall, stats)
    chunk_of = {u: min(k for k in range(K) if raw.value(x[u, k]) > 0.5) for u in nodes}
    choice = {u: next((o for o in options[u][1:] if raw.value(sel[u, o]) > 0.5), base[u]) for u in nodes}
    bound = raw.bound / scale if raw.bound is not None else 0.0
    return ShapeOutcome(raw.status, plan_of(instance, shape, chunk_of, choice), raw.objective / scale, bound, wall,
                        stats)


__all__ = ["ShapeOutcome", "solve_shape"]
