"""Interleaved 1F1B with ``v`` model chunks per device group, planned exactly.

Model
-----
A plan has ``S ≥ 2`` device groups (Megatron's pipeline ranks), each of ``d·t`` devices: ``d``
data-parallel replicas of ``t`` tensor-parallel devices. All groups have the same ``d`` and ``t``
(Megatron-LM gives every rank the same tensor- and data-parallel sizes, and the interleaved order
below needs every replica to run the same number ``n = m/d`` of micro-batches, ``m =
mbsInBatch``): ``S·d·t ≤ devices``, ``d`` divides ``m`` and ``n`` is a multiple of ``S`` (Megatron's
requirement for the interleaved order). The node graph is cut into ``K = S·v`` non-empty chunks
``X_0 … X_{K−1}`` in pipeline order, each a difference of two nested successor-closed sets (no
edge from a later chunk to an earlier one: the ``stages`` contiguity class), and chunk ``k`` runs
on group ``k mod S`` as its model chunk ``k div S`` (Megatron's virtual pipeline layout). Every node
takes one TMPC of degree ``t``. The plan is a :class:`~placement.parallel.plan.ParallelPlan` with
``chunks = v`` whose stages are the chunks in pipeline order.

Time per sample of group ``g`` (Piper's stage time per sample, summed over the group's chunks,
whose devices run all of them): ``TPS_g = Σ_{k ≡ g} ((E_k / d) / bw + C_k / d) + 4·(d − 1)·W_g /
(d·m·bw)``, with ``C_k`` the chunk's ``Σ timePerSample``, ``E_k`` Piper's boundary bytes of the chunk
(``2·(communicationCost + syncTimeFw)`` per edge entering it, ``2·(communicationCost +
syncTimeBw)`` per edge leaving it) and ``W_g`` the ``Σ parameterSize`` of the group's nodes (the
group all-reduces all its chunks' weights once per batch). Objective: ``max_g TPS_g`` (with ``v = 1``
this is Piper's objective). The plan's time per batch under the interleaved order is evaluated,
not minimised.

Memory per device of group ``g``: ``Σ_{k ≡ g} B_k + max over the prefixes of the group's order of
Σ_c A_{cS+g}·held_c`` (``A_k``, ``B_k`` the chunk's ``Σ memoryUsageA``, ``Σ memoryUsageB``; ``held_c``
the micro-batches whose forward on chunk ``c`` has started and whose backward there has not ended).
The order is Megatron's interleaved 1F1B
(:func:`placement.simulation.parallel_orders.interleaved`), so the ``held`` vectors depend only on
``n``, ``S``, ``v`` and the group: the peak is the largest of finitely many linear forms in the
``A_k`` (:func:`held_profiles`), exactly what the event simulator counts.

Solving
-------
The DP over successor-closed sets does not apply (a group's load is a sum of non-contiguous
chunks). Shapes ``(S, d, t)`` run two-group ones first, then in order of a lower bound (the least
node work plus the least total boundary of ``S·v`` chunks, :func:`boundary_floors`, over ``S``),
after starting plans (:func:`even_splits`) gave an incumbent; a shape whose bound reaches the
incumbent is closed. A shape goes first to the exact DP over chains of successor-closed sets
(:mod:`.interleaved_chain`; it ignores memory, so its optimum is the shape's when that plan fits
and a bound otherwise), then to the CP-SAT model of :mod:`.interleaved_cpsat` (memory exact; times
scaled to integers and rounded down, so its bounds are bounds of the true optimum). Every plan is
re-evaluated exactly by :mod:`placement.verification.parallel_interleaved`. Where the memory rows had
to be rounded (widened: they pass every plan that fits) and their optimum does not fit as written, the
shape goes to CP-SAT again (:func:`_narrowed_shape`): on rows narrowed so that every plan they pass fits,
whose plan is the shape's when its value meets the widened optimum (a bound of every plan that fits);
else on the widened rows with the plans found not to fit cut off, whose optimum is again such a bound,
and the shape's when it fits. Where CP-SAT's bound falls short of its plan's value by more than
:data:`OPTIMALITY_TOLERANCE` (its units, set by the cutoff, coarse beside the optimum), the shape goes to
CP-SAT again under its plan's value (:func:`_refined_shape`). ``optimal`` only when the least bound over
all shapes is within :data:`OPTIMALITY_TOLERANCE` of the evaluated value; ``feasible`` with the bound and
gap when the time limit cut a shape short, or CP-SAT's numbers left one open (a proof not used, with each
distinct reason, or rounded memory rows that closed no shape this way): the message says which.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from placement.errors import InvalidParameterError, LimitExceededError, SolverUnavailableError
from placement.io.piper import PiperInstance
from placement.parallel.handoff import megatron_config
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.parallel.result import ParallelResult
from placement.parameters import MAX_THREADS, MAX_TIME_LIMIT, callback, integer, number
from placement.problem.instance import format_number
from placement.problem.memory_fit import fits_counted
from placement.result import Status
from placement.simulation.parallel_orders import FORWARD, held_walk, interleaved

if TYPE_CHECKING:
    from placement.parallel.interleaved_cpsat import ShapeOutcome

INTERLEAVED = "interleaved"
#: the default time limit of an interleaved solve, seconds (its search takes all but LAYOUT_SHARE of it; with
#: model building past the deadline, a solve ends within about 10 s)
DEFAULT_TIME_LIMIT = 8.0
#: the share of the time limit that the search leaves to the plan's time per batch (a longest path over every
#: task of the batch, laid out after the search: a few hundredths of a second on the published instances, where
#: a search that used the whole limit left it no time at all); the layout may run to the end of the limit, or, where
#: the search ran past its part (a shape's model building reads no clock), for this share of the limit and at least
#: LAYOUT_LEAST_S seconds (the first layout of a process loads its compiled kernel: about a second)
LAYOUT_SHARE = 0.1
LAYOUT_LEAST_S = 2.0
#: the seconds the first CP-SAT model of a process takes to import OR-Tools (0.4-0.5 s here) before its search
#: begins: where less of the search's time is left and OR-Tools is not imported yet, a shape is left open
#: (:func:`_cpsat_start_s`: the import alone would end past the search's part of the limit)
CPSAT_IMPORT_S = 0.5
#: relative gap between the proven bound and the evaluated value under which a plan is called optimal
#: (the model's times are integers of about 2^31 units of its cutoff, which :func:`_refined_shape` brings to a
#: plan's value: rounding then costs under 1e-7)
OPTIMALITY_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Shape:
    """``groups`` device groups of ``d`` replicas of ``t`` devices, each running ``chunks`` chunks."""

    groups: int
    d: int
    t: int
    chunks: int

    @property
    def devices(self) -> int:
        return self.groups * self.d * self.t


def check_chunks(schedule: str, chunks: Any) -> int:
    """``v`` for ``schedule``: ``chunks`` (default 2) under ``interleaved``, where it must be at least 2;
    1 otherwise, where ``chunks`` must not be given (``None``), whatever its value."""
    if schedule != INTERLEAVED:
        if chunks is not None:
            integer("chunks", chunks, smallest=1)   # a value no schedule takes is named as such
            raise InvalidParameterError("chunks", f"applies to the 'interleaved' schedule only, not to {schedule!r}")
        return 1
    v = integer("chunks", 2 if chunks is None else chunks, smallest=1)
    if v < 2:
        raise InvalidParameterError("chunks", f"must be at least 2 under the interleaved schedule, not {v}")
    return v


def held_profiles(local: int, groups: int, chunks: int, group: int) -> tuple[tuple[int, ...], ...]:
    """The micro-batches held per chunk (``held_c``, ``c < chunks``) after each forward of ``group``'s
    interleaved order with ``local`` micro-batches per replica, keeping only the vectors no other one
    is at least as large as everywhere (the memory peak is the largest ``Σ_c A_c·held_c`` over them)."""
    held = [0] * chunks
    seen: set[tuple[int, ...]] = set()
    for kind, chunk, _ in interleaved(held_walk(local, groups), groups, chunks, group):   # every vector held
        held[chunk] += 1 if kind == FORWARD else -1
        if kind == FORWARD:
            seen.add(tuple(held))
    top = [h for h in seen if not any(o != h and all(a >= b for a, b in zip(o, h)) for o in seen)]
    return tuple(sorted(top))


def shapes(instance: PiperInstance, devices: int, chunks: int) -> list[Shape]:
    """Every shape a plan may take (module docstring): ``S ≥ 2``, ``S·v ≤`` nodes, ``S·d·t ≤ devices``,
    ``d | m``, ``S | m/d``, and every node has TMPCs of degree ``t``."""
    m = instance.microbatches_in_batch
    common = set.intersection(*(set(node.configurations) for node in instance.nodes))
    out = []
    for t in sorted(common):
        for d in range(1, min(devices // t, m) + 1):   # d divides m: not one d per device of a vast cluster
            if m % d:
                continue
            for s in range(2, min(len(instance.nodes) // chunks, devices // (d * t)) + 1):
                if (m // d) % s == 0:
                    out.append(Shape(s, d, t, chunks))
    return out


def node_costs(instance: PiperInstance, shape: Shape) -> dict[int, list[float]]:
    """Per node, per TMPC of degree ``t`` (in the instance's order): its share of its group's time per
    sample, ``timePerSample/d + 4·(d − 1)·parameterSize/(d·m·bw)``."""
    d, m, bw = shape.d, instance.microbatches_in_batch, instance.bandwidth
    return {node.id: [c.time_per_sample / d + 4 * (d - 1) * c.parameter_size / (d * m * bw)
                      for c in node.configurations[shape.t]] for node in instance.nodes}


#: the most successor-closed sets for which :func:`boundary_floors` runs its DP (it is quadratic in them)
BOUNDARY_SETS = 3000


def boundary_floors(instance: PiperInstance, t: int, most: int) -> list[float]:
    """``f[K]`` for ``K ≤ most``: the least total boundary time (at ``d = 1``; a plan of degree ``d`` pays
    ``1/d`` of it) of a pipeline of exactly ``K`` non-empty chunks, every crossing edge paying both its
    sides at the least sync of the two nodes' TMPCs of degree ``t``; zeros when the graph has more than
    :data:`BOUNDARY_SETS` successor-closed sets.

    DP over the successor-closed sets ``J ⊊ I`` (unions of the last chunks): adding the chunk ``I ∖ J``
    in front makes exactly the edges from it into ``J`` cross, ``f_K[I] = min_J f_{K−1}[J] + Σ_{u ∈ I∖J,
    w ∈ J} c_(u→w)``; with ``c`` the sum of both sides, each crossing edge is counted once."""
    import numpy as np

    from placement.errors import LimitExceededError
    from placement.parallel.tables import all_sets, build_tables

    tables = build_tables(instance)
    try:
        sets = all_sets(tables, BOUNDARY_SETS)
    except LimitExceededError:
        return [0.0] * (most + 1)
    nodes = {node.id: node for node in instance.nodes}
    bw = instance.bandwidth
    cost = np.array([(4 * e.communication_cost
                      + 2 * min(c.sync_time_bw[e.dst] for c in nodes[e.src].configurations[t])
                      + 2 * min(c.sync_time_fw[e.src] for c in nodes[e.dst].configurations[t])) / bw
                     for e in instance.edges])
    number = {u: r for r, u in enumerate(tables.ids)}
    member = sets.member.astype(np.float64)
    src = member[:, [number[e.src] for e in instance.edges]]
    dst = member[:, [number[e.dst] for e in instance.edges]]
    # new[J, I] = Σ_e c_e·(I[u] − J[u])·J[w], for J ⊊ I
    new = dst @ (src * cost).T - ((src * dst) @ cost)[:, None]
    below = (member @ (1 - member).T) == 0                       # J ⊆ I
    np.fill_diagonal(below, False)
    step = np.where(below, new, np.inf)
    floors = [0.0]
    f = np.full(len(member), np.inf)
    f[0] = 0.0                                                   # the empty set
    for _ in range(most):
        f = (f[:, None] + step).min(axis=0)
        floors.append(max(0.0, float(f[sets.full])))
    return floors


def lower_bound(instance: PiperInstance, shape: Shape, floors: list[float] | None = None) -> float:
    """A bound on the value of every plan of ``shape``: the least total node work plus the least total
    boundary of ``S·v`` chunks (``floors``, :func:`boundary_floors`), over ``S`` groups; and the least work
    of any one node (memory left out)."""
    least = [min(costs) for costs in node_costs(instance, shape).values()]
    boundary = 0.0 if floors is None else floors[shape.groups * shape.chunks] / shape.d
    return max((math.fsum(least) + boundary) / shape.groups, max(least))


def memory_can_bind(instance: PiperInstance, shape: Shape, memory: float) -> bool:
    """Whether some plan of ``shape`` could need more than ``memory`` per device: its most micro-batches
    held of any chunk, times every node's largest ``memoryUsageA``, plus every node's largest
    ``memoryUsageB``, exceeds it (each group's peak is at most that), on the sizes as written, as the
    evaluator decides (:func:`~placement.problem.memory_fit.fits_counted`: a floating-point sum may round
    below a bound the sizes exceed)."""
    local = instance.microbatches_in_batch // shape.d
    held = max(max(h) for g in range(shape.groups) for h in held_profiles(local, shape.groups, shape.chunks, g))
    tmpcs = [node.configurations[shape.t] for node in instance.nodes]
    return not fits_counted([(max(c.memory_usage_a for c in cs), held) for cs in tmpcs] +
                            [(max(c.memory_usage_b for c in cs), 1) for cs in tmpcs], memory)


def node_alone(instance: PiperInstance, shape: Shape, memory: float) -> int | None:
    """The id of a node that no device group of ``shape`` holds in ``memory``, whatever the plan: its least
    ``memoryUsageB + memoryUsageA`` over its TMPCs of degree ``t`` exceeds it (a group holds the static
    memory of each of its nodes and, once its chunk has run a forward, one micro-batch's activations of
    it); ``None`` where every node fits alone."""
    for node in instance.nodes:
        if not any(fits_counted([(c.memory_usage_b, 1), (c.memory_usage_a, 1)], memory)
                   for c in node.configurations[shape.t]):
            return node.id
    return None


def solve_interleaved(instance: PiperInstance, *, devices: int | None = None, memory: float | None = None,
                      chunks: int | None = None, time_limit: float | None = None, threads: int = 1,
                      progress: Callable[[str], None] | None = None) -> ParallelResult:
    """The plan of least largest group time per sample (module docstring) of ``instance`` on at most
    ``devices`` devices (default ``maxDevices``) of ``memory`` bytes (default ``maxMemoryPerDevice``),
    ``chunks = v`` chunks per group (default 2), within ``time_limit`` seconds (default 8)."""
    from placement.parallel.interleaved_chain import chain_sets, solve_chain
    from placement.parallel.interleaved_cpsat import solve_shape
    from placement.verification.parallel_interleaved import evaluate_interleaved

    started = time.perf_counter()
    if instance.device_types:
        names = ", ".join(repr(t.name) for t in instance.device_types)
        raise InvalidParameterError("schedule", "'interleaved' plans instances without deviceTypes (every group "
                                                f"alike: maxDevices devices of maxMemoryPerDevice bytes); this "
                                                f"instance has deviceTypes ({names})")
    given_devices = devices is not None
    devices = integer("devices", instance.max_devices if devices is None else devices, smallest=1)
    memory = number("memory", instance.max_memory_per_device if memory is None else memory)
    v = check_chunks(INTERLEAVED, chunks)
    limit = number("time_limit", DEFAULT_TIME_LIMIT if time_limit is None else time_limit, positive=True,
                   largest=MAX_TIME_LIMIT)
    threads = integer("threads", threads, smallest=1, largest=MAX_THREADS)
    callback("progress", progress)
    if len(instance.nodes) < 2 * v:
        given = f"{v}" if chunks is not None else f"{v} (the default)"
        raise InvalidParameterError("chunks", f"{given} needs at least {2 * v} nodes (2 device groups of {v} "
                                              f"non-empty chunks each); the instance has {len(instance.nodes)}")
    if devices < 2:
        whence = "" if given_devices else " (the instance's maxDevices)"
        raise InvalidParameterError("devices", f"must be at least 2 under the interleaved schedule (2 device "
                                               f"groups), not {devices}{whence}")
    deadline = started + limit
    searched_by = started + limit * (1 - LAYOUT_SHARE)
    every = shapes(instance, devices, v)
    floors = {t: boundary_floors(instance, t, max(s.groups * v for s in every if s.t == t))
              for t in {s.t for s in every}}
    candidates = sorted(((lower_bound(instance, s, floors[s.t]), s) for s in every),
                        key=lambda pair: (pair[0], pair[1].devices, pair[1].groups))
    best: tuple[float, ParallelPlan, Shape] | None = None
    for floor, shape in candidates:   # a first incumbent: even splits along one topological order
        if best is not None and floor >= best[0]:
            continue
        if time.perf_counter() > started + 0.3 * limit:   # the rest of the time is the search's
            break
        for plan in even_splits(instance, shape, memory):
            ev = evaluate_interleaved(instance, plan, devices=devices, memory=memory)
            if ev.ok and (best is None or ev.value < best[0]):
                best = (ev.value, plan, shape)
    bounds: list[float] = []      # per shape: a proven bound on the value of its plans
    member: Any = None            # the successor-closed sets of the chain model, once needed (False: too many)
    stats: dict[str, Any] = {"shapes": len(candidates), "solved": 0, "infeasible": 0, "pruned": 0, "open": 0}
    # two device groups first (fewest boundaries, and the chain DP settles them fast), then by bound
    candidates.sort(key=lambda pair: pair[1].groups != 2)
    for k, (bound, shape) in enumerate(candidates):
        left = searched_by - time.perf_counter()
        if best is not None and bound >= best[0] * (1 - OPTIMALITY_TOLERANCE):
            stats["pruned"] += 1
            bounds.append(bound)
            continue
        alone = node_alone(instance, shape, memory)
        if alone is not None:   # no plan of the shape fits, whatever the time left
            if progress is not None:
                progress(f"S={shape.groups} d={shape.d} t={shape.t}: infeasible (node {alone} alone exceeds the "
                         "memory at this degree)")
            stats["infeasible"] += 1
            continue
        if left <= 0:
            stats["open"] += 1
            bounds.append(bound)
            continue
        hopeful = sum(1 for lb, _ in candidates[k:] if best is None or lb < best[0] * (1 - OPTIMALITY_TOLERANCE))
        hint = best[1] if best is not None and best[2] == shape else None
        budget = dict(cutoff=None if best is None else best[0], time_limit=max(min(left, 0.5), left / hopeful),
                      threads=threads, hint=hint)
        outcome = None
        if progress is not None:   # a shape may take its whole share of the time: say which one runs
            progress(f"S={shape.groups} d={shape.d} t={shape.t}: searching, for at most "
                     f"{budget['time_limit']:.3g} s")
        if member is None:
            member = chain_sets(instance)
            member = False if member is None else member
        if member is not False:
            # the chain DP ignores memory: its optimum bounds the shape, and is the shape's optimum when it fits
            share = 1.0 if shape.groups == 2 else 0.5   # two groups: the DP usually settles it alone
            outcome = solve_chain(instance, shape, member, cutoff=budget["cutoff"], floor=bound,
                                  time_limit=budget["time_limit"] * share)
            if outcome.plan is not None and memory_can_bind(instance, shape, memory) and \
                    not evaluate_interleaved(instance, outcome.plan, devices=devices, memory=memory).ok:
                bound = max(bound, outcome.bound)   # the least value without memory: a bound, not a plan
                outcome = replace(outcome, status="no_solution", plan=None, value=None)
            if outcome.status == "no_solution":   # labels, time or memory: the MILP gets the rest of the time
                budget["time_limit"] = min(budget["time_limit"] - outcome.wall_s, searched_by - time.perf_counter())
                bound = max(bound, outcome.bound)
                outcome = None
                if progress is not None and budget["time_limit"] > 0:
                    progress(f"S={shape.groups} d={shape.d} t={shape.t}: the chain DP left it open "
                             f"({bound:.6g} at least); CP-SAT for the rest")
        if outcome is None and (budget["time_limit"] <= 0 or
                                searched_by - time.perf_counter() < _cpsat_start_s()):   # it would start too late
            if progress is not None:
                progress(f"S={shape.groups} d={shape.d} t={shape.t}: left open ({bound:.6g} at least): too little "
                         "of the search's time is left to start CP-SAT")
            stats["open"] += 1
            bounds.append(bound)
            continue
        if outcome is None:
            try:
                outcome = solve_shape(instance, shape, memory, **budget, progress=progress)
            except SolverUnavailableError as exc:   # no CP-SAT here: the shape stays open at its bound
                stats["unavailable"] = str(exc)
                stats["open"] += 1
                bounds.append(bound)
                continue
        if progress is not None:
            shown = "" if outcome.plan is None else f" {outcome.value:.6g}"
            progress(f"S={shape.groups} d={shape.d} t={shape.t}: {outcome.status}{shown} ({outcome.wall_s:.2f} s)")
        ev = None if outcome.plan is None else evaluate_interleaved(instance, outcome.plan, devices=devices,
                                                                     memory=memory)
        if ev is not None and not ev.ok and outcome.status == "optimal" and outcome.stats.get("memory_rounded"):
            stats["narrowed"] = stats.get("narrowed", 0) + 1
            outcome = _narrowed_shape(instance, shape, memory, devices, outcome, budget, searched_by, progress)
            if progress is not None:
                shown, cut = "" if outcome.plan is None else f" {outcome.value:.6g}", outcome.stats.get("excluded", 0)
                progress(f"S={shape.groups} d={shape.d} t={shape.t}: {outcome.status}{shown} on the memory rows "
                         f"narrowed, or widened with the {cut} plan{'' if cut == 1 else 's'} found "
                         f"not to fit cut off ({outcome.bound:.6g} at least; {outcome.wall_s:.2f} s)")
            ev = None if outcome.plan is None else evaluate_interleaved(instance, outcome.plan, devices=devices,
                                                                         memory=memory)
        if ev is not None and ev.ok and outcome.status == "optimal" and \
                ev.value - outcome.bound > OPTIMALITY_TOLERANCE * ev.value:
            stats["refined"] = stats.get("refined", 0) + 1
            outcome = _refined_shape(instance, shape, memory, outcome, ev.value, budget, searched_by, progress)
        fits = ev is None or ev.ok
        if ev is not None and ev.ok and (best is None or ev.value < best[0]):
            best = (ev.value, outcome.plan, shape)
        if outcome.status in ("optimal", "infeasible") and fits:
            stats["solved" if outcome.status == "optimal" else "infeasible"] += 1
        else:
            stats["open"] += 1
            if outcome.status == "optimal" or outcome.stats.get("unfit"):   # rounded memory rows: see UNFIT
                stats["unfit"] = stats.get("unfit", 0) + 1
            elif outcome.stats.get("doubt"):
                stats["doubted"] = stats.get("doubted", 0) + 1
                doubts = stats.setdefault("doubts", {})
                doubts[outcome.stats["doubt"]] = doubts.get(outcome.stats["doubt"], 0) + 1
        bounds.append(max(bound, outcome.bound))
    return _answer(instance, best, bounds, devices, memory, v, started, stats,
                   (deadline, max(LAYOUT_SHARE * limit, LAYOUT_LEAST_S)))


def _cpsat_start_s() -> float:
    """The seconds CP-SAT takes to start in this process: :data:`CPSAT_IMPORT_S` until OR-Tools is imported (its
    import, about half a second, is the model's first step), then none."""
    import sys

    return 0.0 if "ortools.sat.python.cp_model" in sys.modules else CPSAT_IMPORT_S


def _refined_shape(instance: PiperInstance, shape: Shape, memory: float, outcome: ShapeOutcome, value: float,
                   budget: dict[str, Any], deadline: float,
                   progress: Callable[[str], None] | None) -> ShapeOutcome:
    """``outcome`` (CP-SAT's optimum of ``shape``, whose plan fits and takes ``value``) with a bound proven again
    under the cutoff ``value``, for what is left of the shape's time. CP-SAT's units are set by its ceiling, the
    cutoff: one far above the optimum (an incumbent that fits only by a slow TMPC) leaves units so coarse that the
    times, each rounded down, prove a bound more than :data:`OPTIMALITY_TOLERANCE` short of the plan's value.
    Under the cutoff ``value`` every plan of the shape at least as good is still admitted, in units of about
    ``value / 2^31``; the bound is the larger of the two (each holds), at most ``value``."""
    from placement.parallel.interleaved_cpsat import solve_shape

    left = deadline - time.perf_counter()
    if left <= 0:
        return outcome
    if progress is not None:
        progress(f"S={shape.groups} d={shape.d} t={shape.t}: its bound {outcome.bound:.10g} is short of its plan's "
                 f"{value:.10g} by the rounding of CP-SAT's units; CP-SAT again under the cutoff {value:.10g}")
    share = min(left, max(0.5, budget["time_limit"] - outcome.wall_s))
    again = solve_shape(instance, shape, memory, **{**budget, "cutoff": value, "hint": outcome.plan,
                                                    "time_limit": share}, progress=progress)
    return replace(outcome, bound=min(value, max(outcome.bound, again.bound)), wall_s=outcome.wall_s + again.wall_s)


#: the most plans that do not fit :func:`_narrowed_shape` cuts off the widened memory rows of one shape
MAX_EXCLUDED = 16


def _narrowed_shape(instance: PiperInstance, shape: Shape, memory: float, devices: int, widened: ShapeOutcome,
                    budget: dict[str, Any], deadline: float,
                    progress: Callable[[str], None] | None) -> ShapeOutcome:
    """``shape`` again, where CP-SAT's memory rows had to be rounded and the optimum of the rows widened (which
    pass every plan that fits) does not fit as written, for what is left of the shape's time. First on rows
    narrowed so that every plan they pass fits (:func:`placement.parallel.interleaved_cpsat.solve_shape`): its
    plan fits; then, while the bound falls short of that plan's value, on the widened rows with the plans found
    not to fit cut off (at most :data:`MAX_EXCLUDED`), whose optimum still bounds every plan that fits. The
    outcome: ``optimal`` with the widened optimum where it fits, or with the narrowed plan where its value meets
    the widened bound; ``infeasible`` where the cuts leave no plan under the cutoff; else open with the narrowed
    plan, if any, and the last widened bound (``stats["unfit"]``, :data:`UNFIT`)."""
    from placement.parallel.interleaved_cpsat import solve_shape
    from placement.verification.parallel_interleaved import evaluate_interleaved

    left = deadline - time.perf_counter()
    if left <= 0:
        return replace(widened, status="no_solution", plan=None, value=None, stats={**widened.stats, "unfit": True})
    until = min(deadline, time.perf_counter() + max(budget["time_limit"] - widened.wall_s, min(left, 0.5)))
    if progress is not None:
        progress(f"S={shape.groups} d={shape.d} t={shape.t}: the optimum of the widened memory rows does not fit; "
                 "CP-SAT again on narrowed rows")
    narrowed = solve_shape(instance, shape, memory, **{**budget, "time_limit": until - time.perf_counter()},
                           progress=progress, narrowed=True)
    wall, bound, unfit = widened.wall_s + narrowed.wall_s, widened.bound, [widened.plan]
    stats = {**narrowed.stats, "widened_bound": bound}

    def still_open() -> ShapeOutcome:
        return replace(narrowed, status="feasible" if narrowed.plan is not None else "no_solution", bound=bound,
                       wall_s=wall, stats={**stats, "unfit": True})

    while narrowed.plan is None or narrowed.value > bound:
        if len(unfit) > MAX_EXCLUDED or until - time.perf_counter() <= 0.01:
            return still_open()
        again = solve_shape(instance, shape, memory, **{**budget, "time_limit": until - time.perf_counter()},
                            progress=progress, exclude=tuple(unfit))
        wall += again.wall_s
        if again.status not in ("optimal", "infeasible"):   # the time ran out, or CP-SAT's proof is not used
            return still_open()
        bound = max(bound, again.bound)
        stats.update(widened_bound=bound, excluded=len(unfit))
        closed = replace(again, wall_s=wall, stats={**again.stats, "widened_bound": bound, "excluded": len(unfit)})
        if again.status == "infeasible" and (narrowed.plan is None or narrowed.value > bound):
            return closed
        if again.status == "optimal" and evaluate_interleaved(instance, again.plan, devices=devices,
                                                              memory=memory).ok:
            return closed
        if again.status == "optimal":
            unfit.append(again.plan)
    return replace(narrowed, status="optimal", bound=bound, wall_s=wall, stats=stats)


def _answer(instance: PiperInstance, best, bounds: list[float], devices: int, memory: float, v: int,
            started: float, stats: dict[str, Any], layout: tuple[float, float] = (math.inf, 0.0)) -> ParallelResult:
    """The verified result: the best plan, the least bound of what is left open, the status; the plan's time
    per batch, laid out by ``layout = (deadline, seconds)``: the later of the deadline (:func:`time.perf_counter`)
    and that many seconds from now, else marked not computed."""
    from placement.verification.parallel_interleaved import evaluate_interleaved

    proven = min(bounds, default=math.inf)
    if best is None:
        if math.isfinite(proven):
            return ParallelResult(Status.NO_SOLUTION, None, None, proven, devices, memory, INTERLEAVED, None, None,
                                  time.perf_counter() - started,
                                  _open_reason(stats, "before a plan was found"), stats, chunks=v)
        m = instance.microbatches_in_batch
        why = ("no plan fits the memory of its devices" if stats["shapes"] else
               f"no shape of S ≥ 2 device groups of d·t devices takes them (S·d·t ≤ {devices}, S·{v} chunks ≤ "
               f"{len(instance.nodes)} nodes, d dividing the {m} micro-batches, S dividing the m/d of a replica, "
               f"t a degree every node has)")
        return ParallelResult(Status.INFEASIBLE, None, None, math.inf, devices, memory, INTERLEAVED, None, None,
                              time.perf_counter() - started,
                              f"no interleaved plan with {v} chunks per group on {devices} devices of "
                              f"{format_number(memory)} bytes: {why}", stats, chunks=v)
    value, plan, shape = best
    evaluation = evaluate_interleaved(instance, plan, devices=devices, memory=memory)
    bound = min(proven, value)
    optimal = value - bound <= OPTIMALITY_TOLERANCE * value
    stats.update(groups=shape.groups, d=shape.d, t=shape.t)
    try:   # before the runtime is read: the call's work counts it
        batch = interleaved_time_per_batch(instance, plan, max(layout[0], time.perf_counter() + layout[1]))
    except LimitExceededError as exc:   # a batch too long to lay out, or the time limit: the plan stands without it
        batch = None
        stats["time_per_batch"] = f"not computed: {exc}"
    return ParallelResult(Status.OPTIMAL if optimal else Status.FEASIBLE, plan, evaluation.value, bound, devices,
                          memory, INTERLEAVED, evaluation, handoff(instance, plan),
                          time.perf_counter() - started, "" if optimal else
                          _open_reason(stats, "before every shape was closed"), stats, batch_time=batch, chunks=v)


#: why a shape stays open whose CP-SAT optimum does not fit (:func:`_open_reason`, :func:`_narrowed_shape`)
UNFIT = ("no exact unit of the memory sizes keeps CP-SAT's memory rows within its limits, and rounded rows did not "
         "close it: the optima of rows widened (every plan that fits passes) did not fit as written, and no plan of "
         "rows narrowed (every plan that passes fits) met their bound")


def _open_reason(stats: dict[str, Any], when: str) -> str:
    """Why shapes stayed open: the time limit, no CP-SAT to solve them (the ``milp`` extra), a model whose
    numbers CP-SAT cannot handle exactly (its proofs not used; each distinct reason with its count of shapes),
    or one whose memory rows were rounded and whose optimum does not fit (:data:`UNFIT`)."""
    if "unavailable" in stats:
        return f"shapes left open {when}: {stats['unavailable']}"
    causes = [(count, why) for why, count in stats.get("doubts", {}).items()] + \
        [(count, UNFIT) for count in [stats.get("unfit", 0)] if count]
    if not causes:
        return f"the time limit ran out {when}"
    parts = [f"{count} {'shape' if k == 0 else 'other'}{'s' if count > 1 else ''}"
             f"{f' left open {when}' if k == 0 else ''}: {why}" for k, (count, why) in enumerate(causes)]
    others = stats["open"] - sum(count for count, _ in causes)
    if others:
        parts.append(f"the time limit ran out for {others} other{'s' if others > 1 else ''}")
    return "; ".join(parts)


def handoff(instance: PiperInstance, plan: ParallelPlan) -> dict[str, Any]:
    """Megatron's configuration of an interleaved plan: ``pipeline`` = groups, ``virtual_pipeline`` = v,
    ``layout`` = each chunk's nodes in pipeline order (chunk ``k`` on rank ``k mod pipeline``)."""
    config = megatron_config(instance, plan)
    if config.get("expressible"):
        groups = len(plan.stages) // plan.chunks
        config.update(pipeline=groups, virtual_pipeline=plan.chunks, devices=groups * config["tensor"] * config["data"])
    return config


def interleaved_time_per_batch(instance: PiperInstance, plan: ParallelPlan, deadline: float = math.inf) -> float:
    """The plan's time per batch under the interleaved order: the longest path of its task graph
    (:func:`placement.parallel.timing.time_per_batch`, Piper's all-reduce, forward share 1/3), laid out by
    ``deadline`` (:func:`time.perf_counter`) or refused (:class:`~placement.errors.LimitExceededError`)."""
    from placement.parallel.timing import time_per_batch

    return time_per_batch(instance, plan, INTERLEAVED, chunks=plan.chunks, deadline=deadline)


def topological_order(instance: PiperInstance) -> list[int]:
    """Node ids in a topological order (ties in the instance's order)."""
    import graphlib

    sorter = graphlib.TopologicalSorter({node.id: set() for node in instance.nodes})
    for e in instance.edges:
        sorter.add(e.dst, e.src)
    return list(sorter.static_order())


def even_splits(instance: PiperInstance, shape: Shape, memory: float | None = None) -> list[ParallelPlan]:
    """Plans of ``shape`` that cut one topological order into ``S·v`` chunks of about equal work, every
    node in its fastest TMPC, or every node in its TMPC of least activation memory; and the latter cut into
    chunks of about equal memory (``memoryUsageB`` plus the most micro-batches a chunk holds times
    ``memoryUsageA``); with ``memory``, also chunks filled in order up to ``memory / v`` (or 1.25 or 1.5 times
    that) each (a group's
    most held micro-batches times the activations, plus the static memory). Starting points for the search."""
    order = topological_order(instance)
    nodes = {node.id: node for node in instance.nodes}
    costs = node_costs(instance, shape)
    K = shape.groups * shape.chunks
    held = max(max(h) for h in held_profiles(instance.microbatches_in_batch // shape.d, shape.groups, shape.chunks, 0))
    fastest = {u: min(range(len(costs[u])), key=costs[u].__getitem__) for u in order}
    smallest = {u: min(range(len(costs[u])), key=lambda o, u=u: nodes[u].configurations[shape.t][o].memory_usage_a)
                for u in order}

    def footprint(u: int, o: int) -> float:
        tmpc = nodes[u].configurations[shape.t][o]
        return tmpc.memory_usage_b + held * tmpc.memory_usage_a

    plans = []
    for choice, work in ((fastest, [costs[u][fastest[u]] for u in order]),
                         (smallest, [costs[u][smallest[u]] for u in order]),
                         (smallest, [footprint(u, smallest[u]) for u in order])):
        total, done, chunk_of, k = math.fsum(work), 0.0, {}, 0
        for i, u in enumerate(order):
            # the next chunk starts once this one has its share, while enough nodes remain for the rest
            if k < K - 1 and i > 0 and (done >= total * (k + 1) / K or len(order) - i == K - 1 - k) and \
                    any(c == k for c in chunk_of.values()):
                k += 1
            chunk_of[u] = k
            done += work[i]
        if k == K - 1:
            plans.append(plan_of(instance, shape, chunk_of, choice))
    if memory is not None:   # fill each chunk up to its share of its group's memory, least activations first
        most = [max(max(h) for h in held_profiles(instance.microbatches_in_batch // shape.d, shape.groups,
                                                  shape.chunks, g)) for g in range(shape.groups)]
        for share in (1.0, 1.25, 1.5):   # the peaks of a group's chunks need not coincide: bolder shares too
            chunk_of, k, used = {}, 0, 0.0
            for i, u in enumerate(order):
                tmpc = nodes[u].configurations[shape.t][smallest[u]]
                size = tmpc.memory_usage_b + most[k % shape.groups] * tmpc.memory_usage_a
                if k < K - 1 and i > 0 and (used + size > share * memory / shape.chunks or len(order) - i == K - 1 - k):
                    k, used = k + 1, 0.0
                    size = tmpc.memory_usage_b + most[k % shape.groups] * tmpc.memory_usage_a
                chunk_of[u] = k
                used += size
            if k == K - 1:
                plans.append(plan_of(instance, shape, chunk_of, smallest))
    return plans


def plan_of(instance: PiperInstance, shape: Shape, chunk_of: dict[int, int], choice: dict[int, int]) -> ParallelPlan:
    """The plan whose chunk ``k`` holds the nodes ``v`` with ``chunk_of[v] = k``, node ``v`` in its TMPC
    number ``choice[v]`` of degree ``t``."""
    stages = []
    for k in range(shape.groups * shape.chunks):
        nodes = tuple(sorted(node.id for node in instance.nodes if chunk_of[node.id] == k))
        tmpcs = {node.id: node.configurations[shape.t][choice[node.id]].id for node in instance.nodes
                 if chunk_of[node.id] == k}
        stages.append(ParallelStage(nodes, shape.d, shape.t, tmpcs))
    return ParallelPlan(tuple(stages), INTERLEAVED, shape.chunks)


__all__ = ["DEFAULT_TIME_LIMIT", "INTERLEAVED", "OPTIMALITY_TOLERANCE", "Shape", "check_chunks", "handoff",
           "held_profiles", "lower_bound", "node_costs", "plan_of", "shapes", "solve_interleaved"]
