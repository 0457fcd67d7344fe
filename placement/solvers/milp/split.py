"""MILP of the split-backward model under ``stages`` contiguity (``docs/backward-split.md``).

Model
-----
Data: the supernodes ``v`` of :func:`placement.solvers.ideals.contract` (colour classes merged,
no zero-cost merges) with the edges of the contracted extended forward graph H; the backward
nodes ``u`` with layer supernode ``g(u)``, times ``B_k(u)``, ``W_k(u)``, memory ``m(u)`` and the
bytes ``a(u)`` its W reads; device types ``k``; slots ``s = 1..S``, ``S = Σ_k count_k``.

Variables: ``y[s,k]``, ``z[v,s]`` and ``x[v,s] = z[v,s] − z[v,s−1]`` as in :mod:`.stages` (the
layer assignment, a chain of ideals of H); per backward node ``u``:

* ``inter_layer``: ``bm[u,s] ∈ {0,1}`` (B(u) moved from slot ``s+1`` into ``s``), ``bm[u,s] ≤ x[g(u),s+1]``;
  B(u) is on ``s`` when ``Bx[u,s] = x[g(u),s] − bm[u,s−1] + bm[u,s] = 1`` (else ``Bx = x[g(u),s]``);
* ``adjacent``: ``wm[u,s] ∈ {0,1}`` (W(u) moved from ``s−1`` into ``s``), ``wm[u,s] ≤ x[g(u),s−1]``;
  ``Wx[u,s] = x[g(u),s] − wm[u,s+1] + wm[u,s]``;
* ``any``: ``w[u,s] ∈ {0,1}``, ``Σ_s w[u,s] = 1``, ``Wx[u,s] = w[u,s]``, and ``mv[u,s] ≥ w[u,s] − x[g(u),s]``
  (moved in, for the memory row);
* a moved task only onto a slot whose type supports ``u``: ``bm[u,s], wm[u,s], w[u,s] ≤ Σ_{k ∋ u} y[s,k]``.

Boundary: for every node ``x`` with ``c(x) > 0``, its producer ``P`` (``x[g(x),s]``, or ``Bx[x,s]`` for a
backward ``x``) and its distinct readers ``R`` (``x[g(w),s]`` of forward successors, ``Bx[w,s]`` and
``Wx[w,s]`` of backward successors, ``Wx[w,s]`` of backward ``w`` whose class's forward nodes read
``x``): ``b[x,s] ≥ R − P`` and ``b[x,s] ≥ P − R``; minimisation makes ``b`` the In/Out indicator.

Hold count (bounded async 1F1B, ``docs/backward-split.md`` "Memory"): ``wr[x,s] ≥ Wx[u,s]`` for every
backward tensor ``x`` a W(u) reads; ``lag[s] ≥ (1 + |q − s|)(wr[x,s] + Bx[x,q] − 1 − Σ_{F/B readers r of x} r_s)``
for ``q ≠ s`` (the W call of ``s`` receives ``x`` from ``q``); ``h[s,n] ∈ {0,1}`` with ``Σ_n h[s,n] = used(s)``
and ``Σ_n n·h[s,n] = Σ_{s' ≥ s} used(s') + lag[s]`` (used slots come first, so the first sum is ``S_used − s + 1``):
``h[s,n] = 1`` iff slot ``s`` holds ``n`` micro-batches. A larger ``lag`` than the plan's only tightens the
memory rows, so the minimum the rows allow is the plan's.

Rows per slot: one type per slot and the counts; support and per-group memory
(``x[v,s] ≤ Σ_{k fits v} y[s,k]``); memory ``Σ_v m(v)x[v,s] + Σ_u m(u)bm[u,s] ≤ Σ_k M_k y[s,k]`` and, for
each ``n`` with ``h[s,n] = 1``, that plus ``n · (Σ_v act(v)x[v,s] + Σ_x bytes(x)k[x,s])``, ``act(v)`` the bytes
of the forward outputs of group ``v`` and ``k[x,s] ≥ (W(u) moved into s) − (x forward and produced on s)``; loads ``y[s,k] = 1 ⇒ Σ_v F_k(v)x[v,s] + Σ_u (B_k(u)Bx[u,s] + W_k(u)Wx[u,s]) +
pays_k Σ_x c(x)b[x,s] ≤ T`` (``throughput-gpipe``: forward part ``≤ TF``, rest ``≤ TB``); used slots are
non-empty and come first. (A): the sum over slots of each slot's load with every task at its cheapest
type (communication only when every type pays it) is at most ``S · T`` (``S · (TF + TB)``): each used
slot's load is at least that and at most ``T``, an unused slot holds nothing. (D): ``T`` (``TF + TB``) is
at least :func:`placement.problem.split.split_lower_bound` (a bound on every plan's true value; in
model units rounded down). Minimise ``T`` (or ``TF + TB``).

Slot order is the pipeline order of the layer sets, so "previous" and "next" stage are slots
``s−1`` and ``s+1`` (both used whenever the rows allow a move there), and every solution decodes
to a plan of the model with the same value, and every plan is a solution: the MILP is exact.
Before the model is built, :func:`placement.problem.split.memory_shortfall` (node memory plus one
micro-batch of activations above the memory of all devices) answers ``infeasible`` with its proof.
Warm start: the unsplit optimum of the DP (every task on its layer's stage) where it fits the split
model's memory, which adds the micro-batches in flight to the node memory the DP bounds; else the
best of :func:`fitting_starts` (DP plans of at most ``c`` stages under node memory plus ``c`` copies of
the activations, which fit by construction) found in the time given to starts (pass the
``w_placement="home"`` optimum as ``warm_start`` to keep a result never worse than it). ``w_placement="home"``: no ``wm``/``w`` variables, ``Wx = x``.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any, Callable, Iterator

from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Instance
from placement.problem.memory_fit import as_written, decimal_sum, written_sum
from placement.problem.split import SplitModel, memory_shortfall, split_lower_bound, split_times
from placement.solution import Solution, Status
from placement.solvers.ideals import contract
from placement.solvers.milp.backends import OutOfTime, SolveOptions, check_backend_available, make_backend
from placement.solvers.milp.data import choose_scale, fits_alone, float_scaling, float_time, scale_memory, scaling_note
from placement.solvers.milp.driver import (DEFAULT_MAX_PRODUCT, memory_cut_note, out_of_time, refitted,
                                           run_solver, start_from)
from placement.solvers.milp.outcome import ADMITTING, Context, Verdict, conclude
from placement.verification.contiguity import pipeline_order
from placement.verification.split import evaluate_split, tensor_bytes, w_reads

Terms = list[tuple[float, Any]]


class _Model:
    """The variables and the expressions that decode them."""

    def __init__(self) -> None:
        self.y: dict[tuple[int, int], Any] = {}
        self.z: dict[tuple[int, int], Any] = {}
        self.bm: dict[tuple[int, int], Any] = {}
        self.wm: dict[tuple[int, int], Any] = {}
        self.w: dict[tuple[int, int], Any] = {}
        self.mv: dict[tuple[int, int], Any] = {}
        self.b: dict[tuple[int, int], Any] = {}
        self.bb: dict[tuple[int, int], Any] = {}
        self.k: dict[tuple[int, int], Any] = {}
        self.wr: dict[tuple[int, int], Any] = {}
        self.lag: dict[int, Any] = {}
        self.h: dict[tuple[int, int], Any] = {}
        self.pi: dict[int, Any] = {}
        self.arc: dict[tuple[int, int], Any] = {}
        self.targets: list[Any] = []
        self.loads: list[tuple[int, int, int, Terms]] = []   # (slot, type, target index, terms)


def _value(terms: Terms, value: Callable[[Any], float]) -> float:
    return sum(a * value(v) for a, v in terms)


def solve_split_milp(problem: Instance, model: SplitModel, objective: str = "throughput", backend: str = "cp-sat",
                     time_limit: float = 60.0, gap: float = 0.0, threads: int = 1, seed: int = 0,
                     log_path: str | None = None, warm_start: Plan | bool | None = True,
                     progress: Callable[[str], None] | None = None, deadline: float | None = None) -> Solution:
    """Optimal (or bounded) split plan by MILP; see the module docstring. ``warm_start`` is a split plan
    (every task on its layer's stage when its lists are empty); ``True``: the unsplit DP optimum;
    ``False`` or ``None``: none. A HiGHS proof is confirmed by CP-SAT (:mod:`.confirm`)."""
    from placement.solvers.milp.confirm import CONFIRMING, confirm_deadline, confirmed

    started = time.perf_counter()
    first = _solve_split_milp(problem, model, objective, backend, time_limit, gap, threads, seed, log_path, warm_start,
                              progress, deadline)

    def rerun(plan: Plan) -> Solution:   # the same request on CP-SAT, from the plan to confirm
        if progress is not None:
            progress(f"confirming {backend}'s proof with {CONFIRMING}")
        return _solve_split_milp(problem, model, objective, CONFIRMING, time_limit, gap, threads, seed, None, plan,
                                 progress, confirm_deadline(deadline, time_limit, started))

    return confirmed(backend, first, rerun)


def _solve_split_milp(problem: Instance, model: SplitModel, objective: str, backend: str, time_limit: float,
                      gap: float, threads: int, seed: int, log_path: str | None, warm_start: Plan | bool | None,
                      progress: Callable[[str], None] | None, deadline: float | None) -> Solution:
    """:func:`solve_split_milp` on one backend."""
    start = time.perf_counter()
    options = SolveOptions(float(time_limit), float(gap), int(threads), int(seed), log_path, deadline=deadline)

    def verify(plan: Plan) -> Verdict:
        ev = evaluate_split(problem, plan, model)
        return Verdict(ev.valid, ev.objective(objective), ev.violations)

    shortfall = memory_shortfall(problem)
    if shortfall is None and warm_start is True:   # before the backend's import, which takes its time
        warm_start = unsplit_start(problem, deadline, verify, progress=progress)
        if progress is not None:
            progress("no starting plan" if warm_start is None else
                     f"starting plan, every task on its layer's stage: {verify(warm_start).objective:.6g}")
    elif warm_start is False:
        warm_start = None
    check_backend_available(backend)
    be = make_backend(backend)
    if shortfall is not None:    # a proof of infeasibility (the rule of memory_shortfall)
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, f"milp-{be.name}", objective, "stages",
                        runtime_s=time.perf_counter() - start, message=f"infeasible: {shortfall}")
    con = contract(problem, merge_zero_cost=False)
    groups, succ, of_node = con.members, con.succ, con.of_node
    nodes = problem.nodes
    n, G = len(nodes), len(groups)
    types = [k for k, t in enumerate(problem.device_types) if t.count > 0]
    K = range(len(types))
    S = sum(problem.device_types[t].count for t in types)
    slots = range(1, S + 1)
    pays = [problem.device_types[t].pays_comm for t in types]
    b_raw, w_raw = split_times(problem, model)
    backward = [u for u in range(n) if nodes[u].backward]
    reads = w_reads(problem)
    size = tensor_bytes(problem)
    w_in = {u: [problem.index_of(x) for x in reads[nodes[u].id]] for u in backward}   # tensors W(u) reads
    kept_tensors = sorted({x for u in backward for x in w_in[u] if size[nodes[x].id] > 0})

    # --- numbers (scaled to integers for CP-SAT; floored where no scale is exact) --------------
    f_raw = [[None if any(nodes[v].times[t] is None for v in groups[g])
              else float(sum(nodes[v].times[t] for v in groups[g] if not nodes[v].backward)) for t in types]
             for g in range(G)]
    costs = {x: float(nodes[x].out_cost) for x in range(n) if nodes[x].out_cost > 0}
    values = [q for row in f_raw for q in row if q is not None] + list(costs.values())
    values += [q for u in backward for t in types for q in (b_raw[u][t], w_raw[u][t]) if q is not None]
    largest = max([sum(q or 0.0 for q in col) for col in zip(*f_raw)] + [0.0]) + sum(
        max((b_raw[u][t] or 0.0) + (w_raw[u][t] or 0.0) for t in types) for u in backward) + sum(costs.values())
    widest = max(values + [0.0])
    if be.integer_only:
        # widest·scale · load_ub, with load_ub = largest·scale + 1, stays within the product CP-SAT handles
        # exactly: widest·largest·scale² ≤ max/2 (at max itself, the + 1 took a 5-node model past it)
        scaling = choose_scale(values, math.sqrt(max(widest * largest, 0.0)), math.sqrt(DEFAULT_MAX_PRODUCT / 2))
    else:
        scaling = float_scaling(values, largest)

    def q(a: float | None) -> float:
        if a is None:
            return 0.0
        if not be.integer_only:
            return float_time(a, scaling)
        return float(round(a * scaling.scale) if scaling.exact else math.floor(a * scaling.scale))

    # sums as written (0.1 + 0.2 is 0.3, which fits a bound of 0.3), as the evaluator decides memory: a rounded
    # float sum such as 0.30000000000000004 has no exact unit, and the rows would then round memory
    g_mem = [decimal_sum(nodes[v].memory for v in groups[g]) for g in range(G)]
    g_act = [decimal_sum(size[nodes[v].id] for v in groups[g] if not nodes[v].backward) for g in range(G)]
    footprint = g_act + [float(size[nodes[x].id]) for x in kept_tensors]
    most_held = 2 * S      # (S − p) + δ ≤ S + S
    sizes = g_mem + [float(nodes[u].memory) for u in backward] + footprint

    def written() -> list[Fraction]:   # the same sizes, exactly as written (a class's sum may round as a float)
        kept = [written_sum(size[nodes[v].id] for v in groups[g] if not nodes[v].backward) for g in range(G)]
        kept += [as_written(size[nodes[x].id]) for x in kept_tensors]
        return ([written_sum(nodes[v].memory for v in groups[g]) for g in range(G)]
                + [as_written(nodes[u].memory) for u in backward] + kept + [most_held * sum(kept, Fraction(0))])

    mem = scale_memory(sizes + [decimal_sum(footprint * most_held)], [problem.device_types[t].memory for t in types],
                       be.integer_only, written=written)
    m_g = mem.sizes[:G]
    m_b = dict(zip(backward, mem.sizes[G:G + len(backward)]))
    a_g = mem.sizes[G + len(backward):2 * G + len(backward)]
    m_x = dict(zip(kept_tensors, mem.sizes[2 * G + len(backward):-1]))
    # the same sizes exactly as written, where the rows round them to admit every plan that fits: what the
    # footprint and the cuts of :func:`.driver.refitted` are decided on
    exact = list(written()) if mem.admitting else [Fraction(0)] * len(mem.sizes)
    w_g = exact[:G]
    w_b = dict(zip(backward, exact[G:G + len(backward)]))
    w_a = exact[G + len(backward):2 * G + len(backward)]
    w_x = dict(zip(kept_tensors, exact[2 * G + len(backward):-1]))
    load_ub = q(largest) + 1

    def held_bytes(x_: int) -> bool:
        """Whether tensor ``x_`` takes memory where a moved W task keeps it: a size the rows hold, or, in rows
        rounded to admit every plan that fits, one they round to 0, which :func:`.driver.refitted` still cuts by."""
        return bool(m_x.get(x_)) or (mem.admitting and x_ in m_x)

    # --- model (built within the deadline: the backend's tick raises OutOfTime past it) ----------
    be.start_build(deadline, progress)
    if progress is not None:
        progress(f"building the split model for {be.name} ({len(problem.nodes):,} nodes, {S} devices)")
    try:
        V = _Model()
        for s in slots:
            for k in K:
                V.y[s, k] = be.bool_var(f"y[{s},{k}]")
            be.add([(1, V.y[s, k]) for k in K], hi=1)
        for k in K:
            be.add([(1, V.y[s, k]) for s in slots], hi=problem.device_types[types[k]].count)
        for g in range(G):
            for s in slots:
                V.z[g, s] = be.bool_var(f"z[{g},{s}]", fixed=1 if s == S else None)
            for s in slots[:-1]:
                be.add([(1, V.z[g, s]), (-1, V.z[g, s + 1])], hi=0)
        for g in range(G):
            for h in succ[g]:
                for s in slots[:-1]:
                    be.add([(1, V.z[h, s]), (-1, V.z[g, s])], hi=0)

        def x(g: int, s: int) -> Terms:
            if s < 1 or s > S:
                return []
            return [(1, V.z[g, s])] + ([(-1, V.z[g, s - 1])] if s > 1 else [])

        def used(s: int) -> Terms:
            return [(1, V.y[s, k]) for k in K]

        def supporting(u: int, s: int) -> Terms:
            return [(1, V.y[s, k]) for k in K if nodes[u].times[types[k]] is not None]

        for u in backward:
            g = of_node[u]
            if model.inter_layer:
                for s in slots[:-1]:
                    V.bm[u, s] = be.bool_var(f"bm[{u},{s}]")
                    be.add([(1, V.bm[u, s])] + [(-a, v) for a, v in x(g, s + 1)], hi=0)
                    be.add([(1, V.bm[u, s])] + [(-a, v) for a, v in supporting(u, s)], hi=0)
            if model.w_placement == "home":
                pass      # W(u) on its layer's slot: Wx = x
            elif model.w_placement == "adjacent":
                for s in slots[1:]:
                    V.wm[u, s] = be.bool_var(f"wm[{u},{s}]")
                    be.add([(1, V.wm[u, s])] + [(-a, v) for a, v in x(g, s - 1)], hi=0)
                    be.add([(1, V.wm[u, s])] + [(-a, v) for a, v in supporting(u, s)], hi=0)
            else:
                for s in slots:
                    V.w[u, s] = be.bool_var(f"w[{u},{s}]")
                    be.add([(1, V.w[u, s])] + [(-a, v) for a, v in supporting(u, s)], hi=0)
                    if mem.binds and any(map(held_bytes, w_in[u])):
                        V.mv[u, s] = be.num_var(1, f"mv[{u},{s}]")
                        be.add([(1, V.w[u, s]), (-1, V.mv[u, s])] + [(-a, v) for a, v in x(g, s)], hi=0)
                be.add([(1, V.w[u, s]) for s in slots], lo=1, hi=1)

        def bx(u: int, s: int) -> Terms:
            """B(u) is on slot s."""
            terms = x(of_node[u], s)
            if model.inter_layer:
                terms = terms + ([(-1, V.bm[u, s - 1])] if s > 1 else []) + ([(1, V.bm[u, s])] if s < S else [])
            return terms

        def wx(u: int, s: int) -> Terms:
            """W(u) is on slot s."""
            if model.w_placement == "any":
                return [(1, V.w[u, s])]
            return (x(of_node[u], s) + ([(-1, V.wm[u, s + 1])] if (u, s + 1) in V.wm else [])
                    + ([(1, V.wm[u, s])] if (u, s) in V.wm else []))

        # readers of every costly tensor, as keys of the expressions above
        colour_forward: dict[int, list[int]] = {}
        for v, node in enumerate(nodes):
            if not node.backward and node.colour is not None:
                colour_forward.setdefault(node.colour, []).append(v)
        pred: list[list[int]] = [[] for _ in range(n)]
        node_succ = problem.successors()
        for v in range(n):
            for w in node_succ[v]:
                pred[w].append(v)
        readers: dict[int, set[tuple[str, int]]] = {x_: set() for x_ in costs}
        forward_keys: dict[int, set[tuple[str, int]]] = {x_: set() for x_ in costs}
        for x_ in costs:
            for w in node_succ[x_]:
                if nodes[w].backward:
                    readers[x_].add(("B", w) if model.inter_layer else ("x", of_node[w]))
                    readers[x_].add(("W", w))
                else:
                    readers[x_].add(("x", of_node[w]))
                    forward_keys[x_].add(("x", of_node[w]))
        for u in backward:
            colour = nodes[u].colour
            for f in colour_forward.get(colour, []) if colour is not None else []:
                for x_ in pred[f]:
                    if x_ in readers:
                        readers[x_].add(("W", u))

        def expr(key: tuple[str, int], s: int) -> Terms:
            kind, i = key
            return x(i, s) if kind == "x" else bx(i, s) if kind == "B" else wx(i, s)

        # (B) boundary indicators; for throughput-gpipe a forward tensor has two: b (its send, and its
        # receive where a forward node reads it: forward phase) and bb (its receive where only B/W read it)
        cost_nodes = []
        for x_, c in costs.items():
            own = ("B", x_) if nodes[x_].backward and model.inter_layer else ("x", of_node[x_])
            keys = sorted(readers[x_] - {own})
            fkeys = sorted(forward_keys[x_] - {own})
            if keys and any(pays):
                cost_nodes.append((x_, own, keys, fkeys))
                two = objective != "throughput" and not nodes[x_].backward
                for s in slots:
                    V.b[x_, s] = be.bool_var(f"b[{x_},{s}]")
                    if two:
                        V.bb[x_, s] = be.bool_var(f"bb[{x_},{s}]")
                    p = expr(own, s)
                    for key in keys:
                        r = expr(key, s)
                        be.add(p + [(-a, v) for a, v in r] + [(-1, V.b[x_, s])], hi=0)
                        if not two or key in fkeys:
                            be.add(r + [(-a, v) for a, v in p] + [(-1, V.b[x_, s])], hi=0)
                        else:
                            here = [(-a, v) for f in fkeys for a, v in expr(f, s)]
                            be.add(r + [(-a, v) for a, v in p] + here + [(-1, V.bb[x_, s])], hi=0)

        # (K) tensors kept for moved W tasks: k[x,s] ≥ (W(u) moved into s) − (x is forward and produced on s)
        if mem.binds:
            for u in backward:
                for s in slots:
                    moved = V.wm.get((u, s)) if model.w_placement == "adjacent" else V.mv.get((u, s))
                    if moved is None:
                        continue
                    for x_ in w_in[u]:
                        if not held_bytes(x_):
                            continue
                        if (x_, s) not in V.k:
                            V.k[x_, s] = be.num_var(1, f"k[{x_},{s}]")
                        own = [] if nodes[x_].backward else [(-a, v) for a, v in x(of_node[x_], s)]
                        be.add([(1, moved)] + own + [(-1, V.k[x_, s])], hi=0)

        # (H) micro-batches held by slot s under bounded async 1F1B: H_s = (used slots from s on) + lag_s, with
        # lag_s ≥ (1 + |q − s|) when a W on s reads a backward tensor x whose B runs on q ≠ s and no F or B on s
        # reads x (the W call receives it); h[s,n] = 1 iff H_s = n (one-hot, so the memory rows stay linear)
        # on the sizes as written: rows rounded to admit every plan that fits may round a footprint to 0, which
        # the held count must still be known for (:func:`.driver.refitted`)
        footprint_on = mem.binds and (any(a_g) or any(m_x.values()) or any(w_a) or any(w_x.values()))
        if footprint_on:
            x_readers: dict[int, list[int]] = {}
            for u in backward:
                for x_ in w_in[u]:
                    if nodes[x_].backward:
                        x_readers.setdefault(x_, []).append(u)
            for x_, us in x_readers.items():
                for s in slots:
                    V.wr[x_, s] = be.bool_var(f"wr[{x_},{s}]")
                    for u in us:
                        be.add(wx(u, s) + [(-1, V.wr[x_, s])], hi=0)
            for s in slots:
                V.lag[s] = be.num_var(S, f"lag[{s}]")
            for x_ in x_readers:
                for s in slots:
                    early: Terms = []
                    for w in node_succ[x_]:
                        early += bx(w, s) if nodes[w].backward else x(of_node[w], s)
                    for q_ in slots:
                        if q_ == s:
                            continue
                        c = 1 + abs(q_ - s)
                        # lag_s ≥ c · (wr[x,s] + B(x) on q − 1 − Σ early readers on s)
                        be.add([(1, V.lag[s]), (-c, V.wr[x_, s])] + [(-c * a, v) for a, v in bx(x_, q_)]
                               + [(c * a, v) for a, v in early], lo=-c)
            for s in slots:
                for n_ in range(1, S - s + 2 + S):
                    V.h[s, n_] = be.bool_var(f"h[{s},{n_}]")
                be.add([(1, V.h[s, n_]) for n_ in range(1, S - s + 2 + S)] + [(-a, v) for a, v in used(s)], lo=0, hi=0)
                later = [(-a, v) for s2 in slots if s2 >= s for a, v in used(s2)]
                be.add([(n_, V.h[s, n_]) for n_ in range(1, S - s + 2 + S)] + later + [(-1, V.lag[s])], lo=0, hi=0)

        # (Y) with inter_layer, the B calls wait in no cycle: an arc between the slots of B(x) and B(w) for a
        # backward edge x -> w, or between the slot of forward x and an earlier one of B(w) for an edge
        # x -> w into a backward w, raises the potential, pi[s'] ≥ pi[s] + 1 (potentials exist iff acyclic)
        b_edges = sorted({(u, w) for u in backward for w in node_succ[u] if nodes[w].backward})
        into_b = sorted({(v, w) for v in range(n) if not nodes[v].backward for w in node_succ[v] if nodes[w].backward})
        if model.inter_layer:
            if b_edges and S > 1:
                for s in slots:
                    V.pi[s] = be.num_var(S, f"pi[{s}]")
                for s in slots:
                    for s2 in slots:
                        if s != s2:
                            V.arc[s, s2] = be.bool_var(f"arc[{s},{s2}]")
                            be.add([(1, V.pi[s]), (-1, V.pi[s2])], hi=-1, enforce=V.arc[s, s2])
                            for u, w in b_edges:
                                be.add(bx(u, s) + bx(w, s2) + [(-1, V.arc[s, s2])], hi=1)
                            for v, w in into_b if s > s2 else ():
                                be.add(x(of_node[v], s) + bx(w, s2) + [(-1, V.arc[s, s2])], hi=1)

        if objective == "throughput":
            V.targets = [be.num_var(load_ub, "T")]
        else:
            V.targets = [be.num_var(load_ub, "TF"), be.num_var(load_ub, "TB")]
        total_m = sum(mem.sizes)
        alone = [[m_g[g] <= mem.bounds[k] and fit for k, fit in zip(K, row)]
                 for g, row in enumerate(fits_alone(problem, groups, types, [True] * len(types)))]
        for s in slots:
            for g in range(G):
                holds = [(1, V.y[s, k]) for k in K if f_raw[g][k] is not None and alone[g][k]]
                be.add(x(g, s) + [(-a, v) for a, v in holds], hi=0)
            if mem.binds:
                terms = [(m_g[g] * a, v) for g in range(G) if m_g[g] for a, v in x(g, s)]
                terms += [(m_b[u], V.bm[u, s]) for u in backward if (u, s) in V.bm and m_b[u]]
                room = [(-min(mem.bounds[k], total_m), V.y[s, k]) for k in K]
                be.add(terms + room, hi=0)
                if footprint_on:   # node memory + H_s · (activations + kept W inputs), for the n with h[s,n] = 1
                    foot = [(a_g[g] * a, v) for g in range(G) if a_g[g] for a, v in x(g, s)]
                    foot += [(m_x[x_], V.k[x_, s]) for x_ in kept_tensors if (x_, s) in V.k]
                    for (s2, n_), var in V.h.items():
                        if s2 == s and foot:
                            be.add(terms + [(n_ * a, v) for a, v in foot] + room, hi=0, enforce=var)
            for k in K:
                t = types[k]
                fw: Terms = [(q(f_raw[g][k]) * a, v) for g in range(G) if f_raw[g][k] for a, v in x(g, s)]
                bw: Terms = []
                for u in backward:
                    if b_raw[u][t]:
                        bw += [(q(b_raw[u][t]) * a, v) for a, v in bx(u, s)]
                    if w_raw[u][t]:
                        bw += [(q(w_raw[u][t]) * a, v) for a, v in wx(u, s)]
                if pays[k]:
                    fw += [(q(costs[x_]), V.b[x_, s]) for x_, *_ in cost_nodes if not nodes[x_].backward]
                    bw += [(q(costs[x_]), V.b[x_, s]) for x_, *_ in cost_nodes if nodes[x_].backward]
                    bw += [(q(costs[x_]), V.bb[x_, s]) for x_, *_ in cost_nodes if (x_, s) in V.bb]
                parts = [(0, fw + bw)] if objective == "throughput" else [(0, fw), (1, bw)]
                for i, terms in parts:
                    terms = [(a, v) for a, v in terms if a]
                    V.loads.append((s, k, i, terms))
                    if terms:
                        be.add(terms + [(-1, V.targets[i])], hi=0, enforce=V.y[s, k])
            be.add(used(s) + [(-a, v) for g in range(G) for a, v in x(g, s)], hi=0)
            if s < S:
                be.add(used(s + 1) + [(-1, V.y[s, k]) for k in K], hi=0)
        # (A) the average load: Σ_s (slot s's load at each task's cheapest type) ≤ S · T (or S · (TF + TB))
        def cheapest(times: list[float | None]) -> float:
            return min((q(a) for a in times if a is not None), default=0.0)

        aggregate: Terms = []
        for s in slots:
            aggregate += [(cheapest(f_raw[g]) * a, v) for g in range(G) for a, v in x(g, s)]
            for u in backward:
                aggregate += [(cheapest([b_raw[u][t] for t in types]) * a, v) for a, v in bx(u, s)]
                aggregate += [(cheapest([w_raw[u][t] for t in types]) * a, v) for a, v in wx(u, s)]
            if all(pays):
                aggregate += [(q(costs[x_]), V.b[x_, s]) for x_, *_ in cost_nodes]
                aggregate += [(q(costs[x_]), V.bb[x_, s]) for x_, *_ in cost_nodes if (x_, s) in V.bb]
        aggregate = [(a, v) for a, v in aggregate if a]
        if aggregate:
            be.add(aggregate + [(-S, t) for t in V.targets], hi=0)
        # (D) the divisible-task bound of split_lower_bound
        lower = split_lower_bound(problem, model)
        floor = lower * scaling.scale * (1 - 1e-9)
        if lower > 0:
            be.add([(1, t) for t in V.targets], lo=math.floor(floor) if be.integer_only else floor)
        be.minimize([(1, t) for t in V.targets])
    except OutOfTime as exc:
        return out_of_time(problem, f"milp-{be.name}", objective, "stages", start, str(exc), warm_start,
                           verify, split_lower_bound(problem, model))
    be.end_build()

    # --- warm start, solve, decode ------------------------------------------------------------
    notes = []
    note = scaling_note(scaling, be.name)
    if note:
        notes.append(note)
    if not mem.exact:
        notes.append("memory rounded conservatively (sizes up, bounds down): the bound is the simple one")
    data = tuple(notes)   # on the model's data: said only where the solver ran
    fallback = start_from(warm_start, verify, be, V.targets, scaling.scale, notes)
    if fallback is not None:
        def moved(u: int, s: int) -> Terms:
            var = V.wm.get((u, s)) if model.w_placement == "adjacent" else V.mv.get((u, s))
            return [] if var is None else [(1, var)]

        hint = _hint(problem, warm_start, V, types, of_node, backward, cost_nodes, S, x, bx, wx, expr,
                     moved, w_in, b_edges, into_b)
        why = be.hint(hint) if hint is not None else "warm start not given to the solver: it is not in slot order"
        if why:
            notes.append(why)
    stats: dict[str, Any] = {"backend": be.name, "groups": G, "slots": S, "cost_nodes": len(cost_nodes),
                             "time_scale": scaling.scale, "time_scale_exact": scaling.exact, **be.size,
                             "build_s": time.perf_counter() - start, "gap_allowed": gap,
                             "w_placement": model.w_placement, "inter_layer": model.inter_layer}
    if fallback is not None:
        stats["start_value"] = fallback[1]
    if mem.admitting:   # rows rounded to admit every plan that fits (.data._admitting_memory): their bound holds
        stats[ADMITTING] = True
    raw = run_solver(be, options, progress, 1.0 / scaling.scale, fallback, lower)
    if mem.admitting:
        bounds = [as_written(problem.device_types[t].memory) if math.isfinite(problem.device_types[t].memory)
                  else None for t in types]

        def cut_over(value: Callable[[Any], float]) -> bool:
            """For :func:`.driver.refitted`: for every slot whose memory row, on the sizes as written, exceeds its
            type's bound, the row that no slot of that type holds all of its groups, moved B tasks and kept tensors
            with as many micro-batches or more (module docstring: the memory rows); whether there was one. A plan
            that fits breaks none: with its own held count and kept tensors (the least the rows allow), a slot
            holding all of them holds at least that memory."""
            over = False
            for s in slots:
                ks = [k for k in K if value(V.y[s, k]) > 0.5]
                if len(ks) != 1 or bounds[ks[0]] is None:
                    continue
                held = [g for g in range(G) if _value(x(g, s), value) > 0.5]
                moved = [u for u in backward if (u, s) in V.bm and value(V.bm[u, s]) > 0.5]
                kept = [x_ for x_ in kept_tensors if (x_, s) in V.k and value(V.k[x_, s]) > 0.5] if footprint_on else []
                times = next((n_ for (s2, n_), var in V.h.items() if s2 == s and value(var) > 0.5), 0)
                need = (sum((w_g[g] for g in held), Fraction(0)) + sum((w_b[u] for u in moved), Fraction(0))
                        + times * (sum((w_a[g] for g in held), Fraction(0))
                                   + sum((w_x[x_] for x_ in kept), Fraction(0))))
                if need <= bounds[ks[0]]:
                    continue
                over = True
                for s2 in slots:   # where a slot has no variable for one of them, it never holds them all
                    many = [(1, var) for (s3, n_), var in V.h.items() if s3 == s2 and n_ >= times]
                    if (any((u, s2) not in V.bm for u in moved) or any((x_, s2) not in V.k for x_ in kept)
                            or (times and not many)):
                        continue
                    terms = [term for g in held for term in x(g, s2)] + [(1, V.y[s2, ks[0]])]
                    terms += [(1, V.bm[u, s2]) for u in moved] + [(1, V.k[x_, s2]) for x_ in kept]
                    terms += many if times else []
                    be.add(terms, hi=len(held) + len(moved) + len(kept) + (2 if times else 1) - 1)
            return over

        raw, cut = refitted(be, raw, options, progress, 1.0 / scaling.scale, fallback, lower, cut_over)
        if cut:
            stats["memory_plans_cut"] = cut
            notes.append(memory_cut_note(cut, be.name))
    ctx = Context(method=f"milp-{be.name}", objective_kind=objective, contiguity="stages", start=start,
                  unit=1.0 / scaling.scale, exact_data=scaling.exact, simple_bound=lower,
                  exact_feasibility=mem.exact, notes=notes, stats=stats, data_notes=data)

    def decode(value: Callable[[Any], float]) -> Plan | None:
        devices = []
        for s in slots:
            ks = [k for k in K if value(V.y[s, k]) > 0.5]
            members = [g for g in range(G) if _value(x(g, s), value) > 0.5]
            if not members and not ks:
                continue
            if len(ks) != 1 or not members:
                return None
            ids = tuple(nodes[v].id for g in members for v in groups[g])
            b_ids = tuple(nodes[u].id for u in backward if _value(bx(u, s), value) > 0.5)
            w_ids = tuple(nodes[u].id for u in backward if _value(wx(u, s), value) > 0.5)
            devices.append(DeviceAssignment(problem.device_types[types[ks[0]]].name, ids, (), b_ids, w_ids))
        return Plan(tuple(devices))

    return conclude(ctx, be, raw, decode, verify, fallback)


def unsplit_start(problem: Instance, deadline: float | None = None,
                  verify: Callable[[Plan], Verdict] | None = None, share: float = 0.3,
                  progress: Callable[[str], None] | None = None) -> Plan | None:
    """The unsplit throughput optimum (the DP), its devices in pipeline order: a split plan with every
    task on its layer's stage. With ``verify`` (the split evaluator) and a ``deadline`` (a
    ``time.perf_counter()`` value), the DP gets half of ``share`` of the time left; where its plan breaks
    the split model's memory (the DP bounds node memory only) or it finds none in that time, the best
    valid plan of :func:`fitting_starts` found until ``share`` of the time left has passed (its first plan
    until ``deadline``); the DP's plan is the chain DP's where the DP runs out of its time or is refused
    (too many ideals). ``None`` when no plan is found. ``progress`` gets the DP's lines."""
    if verify is None:
        return _dp_plan(problem, deadline, progress)
    left = None if deadline is None else max(0.0, deadline - time.perf_counter())
    plan = _dp_plan(problem, None if left is None else time.perf_counter() + share / 2 * left, progress)
    if plan is not None and verify(plan).valid:
        return plan
    budget = None if left is None else time.perf_counter() + share / 2 * left
    best: tuple[float, Plan] | None = None
    for candidate in fitting_starts(problem, budget, until_first=deadline):
        verdict = verify(candidate)
        if verdict.valid and (best is None or verdict.objective < best[0]):
            best = (verdict.objective, candidate)
    return None if best is None else best[1]


def _dp_plan(problem: Instance, deadline: float | None, progress: Callable[[str], None] | None = None) -> Plan | None:
    """The DP's throughput optimum of ``problem`` in pipeline order (the chain DP's plan where the DP
    runs past ``deadline`` or is refused), or ``None`` (no plan)."""
    from placement.solvers.dp import DEFAULT_MAX_IDEALS
    from placement.solvers.milp.warmstart import pipeline_start

    plan = pipeline_start(problem, DEFAULT_MAX_IDEALS, progress, deadline=deadline)
    if plan is None:
        return None
    order = pipeline_order(problem, plan) or range(len(plan.devices))
    return Plan(tuple(plan.devices[i] for i in order if plan.devices[i].nodes))


def fitting_starts(problem: Instance, deadline: float | None = None,
                   until_first: float | None = None) -> Iterator[Plan]:
    """Unsplit plans within the split model's memory, for ``c = 1, 2, ...`` stages.

    Rule: under bounded async 1F1B a plan with every task on its layer's stage holds, on its stage at
    position ``p`` of ``S``, ``H_p = S − p`` micro-batches (``δ_p = 0``: each W call reads the output
    gradient its own B call reads, and no W moved, so ``K(d)`` is empty), so its memory is
    ``Σ_{L(v)=d} m(v) + (S − p) · A(d) ≤ Σ_{L(v)=d} (m(v) + S · act(v))`` with ``act(v)`` the bytes of
    forward node ``v``'s output. Hence a plan of at most ``c`` stages that fits the node memories
    ``m(v) + c · act(v)`` (forward ``v``; backward nodes unchanged) fits the split model's memory.
    For each ``c`` this runs the DP on that instance with the device counts cut to ``c`` devices in all,
    filled with the largest-memory types first (a device of unbounded memory, a CPU, takes the
    activations most cheaply). The DP's plan is unsplit-optimal among those plans, not among all
    that fit (the bound ``c`` is loose after the first stage), so these are warm starts, not optima.
    A cut in which some node fits no device gives nothing. Stops at ``deadline`` (a ``time.perf_counter()``
    value), or before its first plan at ``until_first`` where that is later."""
    from dataclasses import replace as with_fields

    from placement.errors import InvalidInstanceError

    size = tensor_bytes(problem)
    order = sorted(problem.device_types, key=lambda t: -t.memory)
    total = sum(t.count for t in problem.device_types)
    seen: set[tuple[int, ...]] = set()
    found = False
    for c in range(1, total + 1):
        stop = deadline if found or until_first is None or deadline is None else max(deadline, until_first)
        if stop is not None and time.perf_counter() > stop:
            return
        counts, left = {}, c
        for t in order:
            counts[t.name] = min(t.count, left)
            left -= counts[t.name]
        key = tuple(counts[t.name] for t in problem.device_types)
        if key in seen:
            continue
        seen.add(key)
        nodes = tuple(v if v.backward else with_fields(v, memory=v.memory + c * size[v.id]) for v in problem.nodes)
        try:
            cut = Instance(nodes, problem.edges, problem.device_types, problem.name).with_devices(counts)
        except InvalidInstanceError:    # a node fits none of these devices: no plan of this kind
            continue
        plan = _dp_plan(cut, stop)
        if plan is None:
            if stop is not None and time.perf_counter() > stop:
                return
            continue
        found = True
        yield plan


def _hint(problem: Instance, plan: Plan, V: _Model, types: list[int], of_node: tuple[int, ...],
          backward: list[int], cost_nodes: list, S: int, x: Callable, bx: Callable, wx: Callable,
          expr: Callable, moved: Callable, w_in: dict[int, list[int]],
          b_edges: list[tuple[int, int]], into_b: list[tuple[int, int]]) -> dict[Any, float] | None:
    """Values of every variable for the split plan ``plan`` (its non-empty devices in order are slots)."""
    devices = [dev for dev in plan.devices if dev.nodes]
    if len(devices) > S:
        return None
    slot_of = {problem.index_of(v): s for s, dev in enumerate(devices, 1) for v in dev.nodes}
    g_slot: dict[int, int] = {}
    for v, s in slot_of.items():
        g_slot.setdefault(of_node[v], s)
    if len(g_slot) != len({g for g in of_node}):
        return None
    b_slot = {problem.index_of(u): s for s, dev in enumerate(devices, 1) for u in dev.b_tasks}
    w_slot = {problem.index_of(u): s for s, dev in enumerate(devices, 1) for u in dev.w_tasks}
    values: dict[Any, float] = {}
    names = [problem.device_types[t].name for t in types]
    for s in range(1, S + 1):
        for k, name in enumerate(names):
            values[V.y[s, k]] = 1.0 if s <= len(devices) and devices[s - 1].type == name else 0.0
    for (g, s), var in V.z.items():
        values[var] = 1.0 if g_slot[g] <= s else 0.0
    for u in backward:
        home = g_slot[of_node[u]]
        bs, ws = b_slot.get(u, home), w_slot.get(u, home)
        for s in range(1, S + 1):
            if (u, s) in V.bm:
                values[V.bm[u, s]] = 1.0 if bs == s and home == s + 1 else 0.0
            if (u, s) in V.wm:
                values[V.wm[u, s]] = 1.0 if ws == s and home == s - 1 else 0.0
            if (u, s) in V.w:
                values[V.w[u, s]] = 1.0 if ws == s else 0.0
            if (u, s) in V.mv:
                values[V.mv[u, s]] = 1.0 if ws == s and home != s else 0.0
    get = values.__getitem__
    for x_, own, keys, fkeys in cost_nodes:
        for s in range(1, S + 1):
            p = _value(expr(own, s), get) > 0.5
            at = {key: _value(expr(key, s), get) > 0.5 for key in keys}
            sends = p and not all(at.values())
            receives_f = not p and any(at[key] for key in fkeys)
            receives = not p and any(at.values())
            if (x_, s) in V.bb:
                values[V.b[x_, s]] = 1.0 if sends or receives_f else 0.0
                values[V.bb[x_, s]] = 1.0 if receives and not receives_f else 0.0
            else:
                values[V.b[x_, s]] = 1.0 if sends or receives else 0.0
    for (x_, s), var in V.k.items():
        needed = any(_value(moved(u, s), get) > 0.5 for u in backward if x_ in w_in[u])
        values[var] = 1.0 if needed and (problem.nodes[x_].backward or g_slot[of_node[x_]] != s) else 0.0
    b_at = {u: next(s for s in range(1, S + 1) if _value(bx(u, s), get) > 0.5) for u in backward}
    for (x_, s), var in V.wr.items():
        values[var] = 1.0 if any(_value(wx(u, s), get) > 0.5 for u in backward if x_ in w_in[u]) else 0.0
    if V.lag:
        succ = problem.successors()
        lag = {s: 0 for s in range(1, S + 1)}
        for (x_, s), var in V.wr.items():
            early = {b_at[w] if problem.nodes[w].backward else g_slot[of_node[w]] for w in succ[x_]}
            if values[var] > 0.5 and b_at[x_] != s and s not in early:
                lag[s] = max(lag[s], 1 + abs(b_at[x_] - s))
        for s, var in V.lag.items():
            values[var] = float(lag[s])
        for (s, n_), var in V.h.items():
            values[var] = 1.0 if s <= len(devices) and n_ == len(devices) - s + 1 + lag[s] else 0.0
    if V.arc:
        arcs = ({(b_at[u], b_at[w]) for u, w in b_edges if b_at[u] != b_at[w]}
                | {(g_slot[of_node[v]], b_at[w]) for v, w in into_b if g_slot[of_node[v]] > b_at[w]})
        for (s, s2), var in V.arc.items():
            values[var] = 1.0 if (s, s2) in arcs else 0.0
        level = {s: 0 for s in range(1, S + 1)}
        for _ in range(S):   # longest-path levels of the acyclic slot graph
            for s, s2 in arcs:
                level[s2] = max(level[s2], level[s] + 1)
        for s, var in V.pi.items():
            values[var] = float(level[s])
    tops = [0.0] * len(V.targets)
    for s, k, i, terms in V.loads:
        if values[V.y[s, k]] > 0.5:
            tops[i] = max(tops[i], _value(terms, get))
    values.update(zip(V.targets, tops))
    return values
