"""MILP for the throughput objective under ``stages`` contiguity (DESIGN.md §2, §3).

Model
-----
Data: the supernodes ``v ∈ V`` of :func:`placement.solvers.ideals.contract` (colour
classes merged, forward and backward mates together) with the edges ``u → w`` of
the contracted extended forward graph H; device types ``t`` with ``count_t > 0``,
memory bound ``M_t`` and ``pays_t``; ``p_t(v)`` the summed time of ``v``'s nodes on
``t`` and ``m(v)`` their memory; ``F(v)`` the types that support every node of ``v``
and have ``m(v) ≤ M_t``. Cost nodes: original nodes ``u`` with ``c(u) > 0`` whose
closed neighbourhood ``N[u] = {u} ∪ succ(u)`` meets at least two supernodes;
``r(u)`` is the supernode of ``u`` and ``W(u)`` the other supernodes of ``N[u]``.
Slots ``s = 1..S``, ``S = Σ_t count_t``.

Variables: ``y[s,t] ∈ {0,1}`` (slot s has type t), ``z[v,s] ∈ {0,1}`` (v is in a
slot ≤ s), ``b[u,s] ∈ {0,1}`` (u is a boundary node of slot s), ``T ≥ 0``;
``x[v,s] = z[v,s] − z[v,s−1]`` (v is in slot s; ``z[v,0] = 0``).

1. ``Σ_t y[s,t] ≤ 1``                                   (one type per slot)
2. ``Σ_s y[s,t] ≤ count_t``                             (device counts)
3. ``z[v,s] ≤ z[v,s+1]``, ``z[v,S] = 1``                 (cumulative ideals, all placed)
4. ``z[u,s] ≥ z[w,s]`` for every H-edge ``u → w``       (each ``{v : z[v,s] = 1}`` is an ideal)
5. ``x[v,s] ≤ Σ_{t ∈ F(v)} y[s,t]``                     (support, per-node memory, a used slot has a type)
6. ``Σ_v m(v) x[v,s] ≤ Σ_t min(M_t, Σ_v m(v)) y[s,t]``  (memory; only when some bound can bind)
7. ``b[u,s] ≥ x[w,s] − x[r(u),s]`` and ``b[u,s] ≥ x[r(u),s] − x[w,s]`` for ``w ∈ W(u)``
   (N[u] meets both the slot's set and its complement: ``u ∈ In ∪ Out``; one indicator
   covers both, as a node cannot be in In(S) and Out(S) of one set S)
8. ``y[s,t] = 1  ⇒  Σ_v p_t(v) x[v,s] + pays_t · Σ_u c(u) b[u,s] ≤ T``   (load)
9. ``Σ_t y[s,t] ≤ Σ_v x[v,s]`` and ``Σ_t y[s+1,t] ≤ Σ_t y[s,t]``        (symmetry: used slots
   are the non-empty ones, and they come first)

Objective: minimise ``T``. The non-empty slots in slot order are a pipeline
(a chain of ideals of H), so the decoded plan is in ``stages``; conversely every
``stages`` plan of the supernodes is a solution, with ``T`` its max load. The DP
of :mod:`placement.solvers.dp` solves the same problem exactly.

Numbers: CP-SAT needs integers. Times and costs are multiplied by a unit
``scale`` (a power of two or ten) chosen so that every ``p_t(v)`` and ``c(u)`` is
an integer and the largest possible load stays under ``max_scaled``; then the
model is exact. Otherwise they are rounded at the finest power-of-two scale under
``max_scaled``, the message says so, and the proven bound is lowered by the
largest total rounding error ``E`` of one load (so it stays a proven bound).
Memory is scaled the same way but rounded conservatively (item sizes up, bounds
down), so every plan found fits; an ``infeasible`` verdict on rounded memory is
reported as ``no_solution``. Whatever the backend, the objective reported is the
evaluator's max load of the decoded plan; ``optimal`` means the backend proved
optimality and the proven bound is within the backend's tolerance (1e-9 relative for
CP-SAT, 1e-6 for the floating-point MIP solvers) of that objective; the reported bound
is then the objective, and ``stats["solver_bound"]`` keeps the solver's own figure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from placement.model.problem import Problem
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.solvers.ideals import Contraction, contract
from placement.solvers.milp.backends import Backend, make_backend
from placement.verify.evaluate import evaluate, pipeline_order

DEFAULT_TIME_LIMIT = 60.0
DEFAULT_MAX_SCALED = 2 ** 40


# ----------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scaling:
    """``value_in_model = round(value · scale)``; ``exact`` when no rounding happened; ``error`` bounds
    the total rounding error of one load (in original units)."""

    scale: float
    exact: bool
    error: float


def _exact_at(values: list[float], scale: float) -> bool:
    for a in values:
        q = a * scale
        if q != round(q) or round(q) / scale != a:
            return False
    return True


def _choose_scale(values: list[float], largest: float, max_scaled: float) -> tuple[float, bool]:
    """Smallest power of two or ten making every value an integer with ``largest · scale ≤ max_scaled``;
    else the largest power of two within the cap (``exact`` False)."""
    candidates = sorted({2.0 ** k for k in range(0, 41)} | {10.0 ** k for k in range(0, 13)})
    for scale in candidates:
        if largest * scale > max_scaled:
            break
        if _exact_at(values, scale):
            return scale, True
    if largest <= 0:
        return 1.0, True
    return 2.0 ** math.floor(math.log2(max_scaled / largest)), False


@dataclass(frozen=True)
class _Data:
    contraction: Contraction
    types: tuple[int, ...]                 # device-type positions with count > 0
    S: int                                 # slots
    p: tuple[tuple[float | None, ...], ...]  # p[v][k] (k indexes `types`), model units; None: unsupported
    m: tuple[float, ...]                   # memory per supernode, model units
    M: tuple[float, ...]                   # memory bound per type, model units (inf: none)
    memory_binds: bool
    memory_exact: bool
    cost_nodes: tuple[tuple[int, int, tuple[int, ...], float], ...]  # (u, r(u), W(u), c(u)) model units
    time_scaling: Scaling
    memory_scale: float
    load_ub: float                         # model units


def _prepare(problem: Problem, integer: bool, max_scaled: float) -> _Data:
    con = contract(problem)
    types = tuple(t for t, dt in enumerate(problem.device_types) if dt.count > 0)
    nodes = problem.nodes
    p_raw: list[list[float | None]] = []
    m_raw: list[float] = []
    for members in con.members:
        row: list[float | None] = []
        for t in types:
            times = [nodes[v].times[t] for v in members]
            row.append(None if any(q is None for q in times) else float(sum(times)))  # type: ignore[arg-type]
        p_raw.append(row)
        m_raw.append(float(sum(nodes[v].memory for v in members)))
    succ = problem.successors()
    cost_raw = []
    for u, node in enumerate(nodes):
        if node.out_cost <= 0:
            continue
        r = con.of_node[u]
        W = tuple(sorted({con.of_node[w] for w in succ[u]} - {r}))
        if W:
            cost_raw.append((u, r, W, float(node.out_cost)))
    total_cost = sum(c for *_, c in cost_raw)
    per_type_max = [sum(row[k] or 0.0 for row in p_raw) + (total_cost if problem.device_types[t].pays_comm else 0.0)
                    for k, t in enumerate(types)]
    largest = max(per_type_max + [0.0])

    total_m = sum(m_raw)
    bounds = [problem.device_types[t].memory for t in types]
    memory_binds = any(M < total_m for M in bounds)

    if not integer:
        time_sc = Scaling(1.0, True, 0.0)
        mem_scale, mem_exact = 1.0, True
    else:
        values = [q for row in p_raw for q in row if q is not None] + [c for *_, c in cost_raw]
        scale, exact = _choose_scale(values, largest, max_scaled)
        error = 0.0
        if not exact:
            for k, t in enumerate(types):
                e = sum(abs(round(q * scale) - q * scale) for row in p_raw if (q := row[k]) is not None)
                if problem.device_types[t].pays_comm:
                    e += sum(abs(round(c * scale) - c * scale) for *_, c in cost_raw)
                error = max(error, e / scale)
        time_sc = Scaling(scale, exact, error)
        finite = [M for M in bounds if math.isfinite(M) and M < total_m]
        mem_scale, mem_exact = _choose_scale(m_raw + finite, total_m, 2.0 ** 53) if memory_binds else (1.0, True)

    def t_model(a: float) -> float:
        return float(round(a * time_sc.scale)) if integer else a

    def m_model(a: float, up: bool) -> float:
        if not integer:
            return a
        q = a * mem_scale
        return float(math.ceil(q) if up else math.floor(q)) if not mem_exact else float(round(q))

    p = tuple(tuple(None if q is None else t_model(q) for q in row) for row in p_raw)
    cost_nodes = tuple((u, r, W, t_model(c)) for u, r, W, c in cost_raw)
    model_ub = max([sum(row[k] or 0.0 for row in p)
                    + (sum(c for *_, c in cost_nodes) if problem.device_types[t].pays_comm else 0.0)
                    for k, t in enumerate(types)] + [0.0])
    return _Data(con, types, sum(problem.device_types[t].count for t in types), p,
                 tuple(m_model(a, True) for a in m_raw),
                 tuple(math.inf if not math.isfinite(M) or M >= total_m else m_model(M, False) for M in bounds),
                 memory_binds, mem_exact, cost_nodes, time_sc, mem_scale, model_ub)


# ----------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------

@dataclass
class _Vars:
    y: dict[tuple[int, int], Any]
    z: dict[tuple[int, int], Any]
    b: dict[tuple[int, int], Any]
    T: Any


def _x(z: dict[tuple[int, int], Any], v: int, s: int) -> list[tuple[float, Any]]:
    """Terms of ``x[v,s] = z[v,s] − z[v,s−1]``."""
    return [(1, z[v, s])] + ([(-1, z[v, s - 1])] if s > 1 else [])


def _build(problem: Problem, d: _Data, be: Backend) -> _Vars:
    n, S, K = d.contraction.size, d.S, range(len(d.types))
    slots = range(1, S + 1)
    y = {(s, k): be.bool_var(f"y[{s},{k}]") for s in slots for k in K}
    z = {(v, s): be.bool_var(f"z[{v},{s}]", fixed=1 if s == S else None) for v in range(n) for s in slots}
    pays = any(problem.device_types[d.types[k]].pays_comm for k in K)
    b = ({(i, s): be.bool_var(f"b[{u},{s}]") for i, (u, *_) in enumerate(d.cost_nodes) for s in slots}
         if pays else {})
    T = be.objective_var(d.load_ub, "T")
    total_m = sum(d.m)
    fits = [[k for k in K if d.p[v][k] is not None and d.m[v] <= d.M[k]] for v in range(n)]
    for s in slots:
        be.add([(1, y[s, k]) for k in K], hi=1)                                            # (1)
    for k in K:
        be.add([(1, y[s, k]) for s in slots], hi=problem.device_types[d.types[k]].count)  # (2)
    for v in range(n):
        for s in slots[:-1]:
            be.add([(1, z[v, s]), (-1, z[v, s + 1])], hi=0)                                # (3)
        for w in d.contraction.succ[v]:
            for s in slots[:-1]:
                be.add([(1, z[w, s]), (-1, z[v, s])], hi=0)                                # (4)
    for s in slots:
        for v in range(n):
            be.add(_x(z, v, s) + [(-1, y[s, k]) for k in fits[v]], hi=0)                   # (5)
        if d.memory_binds:                                                                 # (6)
            be.add([(a * d.m[v], var) for v in range(n) if d.m[v] for a, var in _x(z, v, s)]
                   + [(-min(d.M[k], total_m), y[s, k]) for k in K], hi=0)
        for i, (_, r, W, _) in enumerate(d.cost_nodes if pays else ()):                    # (7)
            for w in W:
                be.add(_x(z, w, s) + _neg(_x(z, r, s)) + [(-1, b[i, s])], hi=0)
                be.add(_x(z, r, s) + _neg(_x(z, w, s)) + [(-1, b[i, s])], hi=0)
        for k in K:                                                                        # (8)
            terms = [(a * c, var) for v in range(n) if (c := d.p[v][k]) for a, var in _x(z, v, s)]
            if problem.device_types[d.types[k]].pays_comm:
                terms += [(c, b[i, s]) for i, (*_, c) in enumerate(d.cost_nodes)]
            be.add(terms + [(-1, T)], hi=0, enforce=y[s, k])
        be.add([(1, y[s, k]) for k in K] + [t for v in range(n) for t in _neg(_x(z, v, s))], hi=0)  # (9)
        if s < S:
            be.add([(1, y[s + 1, k]) for k in K] + [(-1, y[s, k]) for k in K], hi=0)
    be.minimize(T)
    return _Vars(y, z, b, T)


def _neg(terms: list[tuple[float, Any]]) -> list[tuple[float, Any]]:
    return [(-a, v) for a, v in terms]


# ----------------------------------------------------------------------------------------
# warm start and decoding
# ----------------------------------------------------------------------------------------

def _hint(problem: Problem, d: _Data, V: _Vars, plan: Plan) -> tuple[dict[Any, float] | None, str]:
    """Variable values of ``plan`` (ordered as a pipeline), or ``None`` with the reason."""
    order = pipeline_order(problem, plan)
    if order is None:
        return None, "warm start ignored: the plan is not a pipeline"
    devices = [plan.devices[i] for i in order if plan.devices[i].nodes]
    if len(devices) > d.S:
        return None, "warm start ignored: more devices than slots"
    slot_of: dict[int, int] = {}
    for s, dev in enumerate(devices, start=1):
        for node_id in dev.nodes:
            slot_of[problem.index_of(node_id)] = s
    n = d.contraction.size
    where = []
    for members in d.contraction.members:
        slots = {slot_of.get(v) for v in members}
        if len(slots) != 1 or None in slots:
            return None, "warm start ignored: the plan splits or omits a supernode"
        where.append(slots.pop())
    names = [problem.device_types[t].name for t in d.types]
    values: dict[Any, float] = {}
    loads = []
    for s in range(1, d.S + 1):
        k = names.index(devices[s - 1].type) if s <= len(devices) and devices[s - 1].type in names else None
        if s <= len(devices) and k is None:
            return None, "warm start ignored: unknown device type"
        for kk in range(len(d.types)):
            values[V.y[s, kk]] = 1.0 if kk == k else 0.0
        for v in range(n):
            if s < d.S:
                values[V.z[v, s]] = 1.0 if where[v] <= s else 0.0
        in_s = [where[v] == s for v in range(n)]
        bs = []
        for i, (_, r, W, _) in enumerate(d.cost_nodes):
            bval = 1.0 if any(in_s[w] != in_s[r] for w in W) else 0.0
            bs.append(bval)
            if V.b:
                values[V.b[i, s]] = bval
        if k is not None:
            load = sum(d.p[v][k] or 0.0 for v in range(n) if in_s[v])
            if problem.device_types[d.types[k]].pays_comm:
                load += sum(c * bv for (*_, c), bv in zip(d.cost_nodes, bs))
            loads.append(load)
    T = max(loads, default=0.0)
    values[V.T] = T
    return values, ""


def _decode(problem: Problem, d: _Data, V: _Vars, value) -> Plan | None:
    """Devices in slot order, empty slots skipped; ``None`` when the values place no plan."""
    devices = []
    placed = 0
    for s in range(1, d.S + 1):
        members = [v for v in range(d.contraction.size)
                   if value(V.z[v, s]) > 0.5 and (s == 1 or value(V.z[v, s - 1]) < 0.5)]
        if not members:
            continue
        ks = [k for k in range(len(d.types)) if value(V.y[s, k]) > 0.5]
        if len(ks) != 1:
            return None
        placed += len(members)
        ids = tuple(problem.nodes[u].id for v in members for u in d.contraction.members[v])
        devices.append(DeviceAssignment(problem.device_types[d.types[ks[0]]].name, ids))
    if placed != d.contraction.size:
        return None
    return Plan(tuple(devices))


# ----------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------

def solve_milp_stages(problem: Problem, *, backend: str = "cp-sat", time_limit: float = DEFAULT_TIME_LIMIT,
                      threads: int = 1, seed: int = 0, warm_start: Plan | None = None,
                      max_scaled: float = DEFAULT_MAX_SCALED) -> Solution:
    """Optimal (or bounded) ``stages`` plan for the throughput objective by the MILP above.

    ``time_limit`` (seconds) is always set. The plan is verified by the evaluator and
    the objective is its max load; see the module docstring for statuses and scaling.
    """
    if not time_limit or not math.isfinite(time_limit) or time_limit <= 0:
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    start = time.perf_counter()
    be = make_backend(backend)
    method = f"milp-{backend}"
    d = _prepare(problem, be.integer_only, max_scaled)
    V = _build(problem, d, be)
    notes: list[str] = []
    if not d.time_scaling.exact:
        notes.append(f"times rounded to multiples of 2^-{math.log2(d.time_scaling.scale):g} "
                     f"(each load off by at most {d.time_scaling.error:.3g}); the bound accounts for it")
    if not d.memory_exact:
        notes.append("memory rounded conservatively (sizes up, bounds down)")
    if warm_start is not None:
        values, why = _hint(problem, d, V, warm_start)
        if values is not None:
            why = be.hint(values)
        if why:
            notes.append(why)
    build_s = time.perf_counter() - start
    raw = be.solve(time_limit, threads, seed)
    if raw.message:
        notes.append(raw.message)
    stats = {"backend": backend, "supernodes": d.contraction.size, "slots": d.S,
             "cost_nodes": len(d.cost_nodes), "time_scale": d.time_scaling.scale,
             "time_scale_exact": d.time_scaling.exact, "build_s": build_s, "solve_s": raw.wall_s, **raw.stats}

    def done(status: Status, plan: Plan | None = None, objective: float = math.inf, bound: float = 0.0,
             extra: str = "") -> Solution:
        message = "; ".join(notes + ([extra] if extra else []))
        return Solution(status, plan, objective, bound, method, runtime_s=time.perf_counter() - start,
                        stats=stats, message=message)

    unit = 1.0 / d.time_scaling.scale
    raw_bound = 0.0 if raw.bound is None or not math.isfinite(raw.bound) else raw.bound
    bound = max(0.0, raw_bound * unit - d.time_scaling.error)
    stats["solver_bound"] = raw_bound * unit
    if raw.status == "infeasible":
        if not d.memory_exact:
            return done(Status.NO_SOLUTION, extra="infeasible with rounded memory; not a proof")
        return done(Status.INFEASIBLE, bound=math.inf,
                    extra="no pipeline of the available devices satisfies the memory and support constraints")
    if raw.status in ("no_solution", "error"):
        return done(Status.NO_SOLUTION if raw.status == "no_solution" else Status.ERROR, bound=bound)
    plan = _decode(problem, d, V, raw.value)
    if plan is None:
        if raw.status == "feasible":
            return done(Status.NO_SOLUTION, bound=bound,
                        extra=f"{backend} reported a solution but returned no usable values")
        return done(Status.ERROR, extra=f"{backend} reported {raw.status} but its values decode to no plan")
    ev = evaluate(problem, plan, contiguity="stages")
    if not ev.valid:
        return done(Status.ERROR, plan, extra="decoded plan fails verification: " + "; ".join(ev.violations[:3]))
    objective = ev.max_load
    bound = min(bound, objective)
    if raw.status == "optimal" and objective - bound <= be.optimality_tolerance * max(1.0, abs(objective)):
        return done(Status.OPTIMAL, plan, objective, objective)
    extra = "" if raw.status == "feasible" else "solver claimed optimal, but the proven bound leaves a gap"
    return done(Status.FEASIBLE, plan, objective, bound, extra)
