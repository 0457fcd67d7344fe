"""Exact DP over ideals for the throughput objective under ``stages`` contiguity (DESIGN.md §3).

Model
-----
A plan in ``stages`` is a pipeline: a chain of ideals ∅ ⊂ I_1 ⊂ … ⊂ I_m = V of
the contracted forward graph (:mod:`placement.solvers.ideals`), each block
``X_j = I_j \\ I_{j-1}`` (with the backward mates of its classes) on its own
device. With device types ``t`` (count ``k_t``), a layer ``L`` is a vector of
device counts ``n ≤ k`` and::

    dp[L][∅] = 0
    dp[L][I] = min( min_t dp[L - e_t][I],
                    min_t min_{I' ⊊ I, X = I \\ I' fits type t} max(dp[L - e_t][I'], load_t(X)) )

``load_t(X)`` is the load of DESIGN.md §2 (compute on type ``t``, plus
communication if ``t`` pays it); ``X`` fits ``t`` when every node is supported
on ``t`` and the memory of ``X`` is within ``t``'s bound. The optimum is
``dp[k][V]``; for training graphs (backward mates in the blocks) this is the
PipeDream objective, forward and backward loads adding up on each device.

Exactly ``N`` stages (``stages=N``): the plans with exactly ``N`` non-empty
devices (any mix of types, at most ``k_t`` of type ``t``). The table drops the
transition that leaves a device unused, so ``e[L][I]`` is the least max-load of
``I`` as a pipeline of exactly ``|L|`` non-empty blocks, one per device of ``L``::

    e[0][∅] = 0,   e[L][∅] = ∞ for L ≠ 0
    e[L][I] = min_t min_{I' ⊊ I, X = I \\ I' fits type t} max(e[L - e_t][I'], load_t(X))

and the optimum is ``min_{L ≤ k, |L| = N} e[L][V]`` (∞: no such plan, status
``infeasible``). Zero-cost classes are not merged in this mode (a zero-time
class may be a stage of its own, and merging it could lose the only plans with
``N`` stages); colour classes and the cycles of the extended graph are, since
every plan keeps them on one device. So ``N`` above the number of supernodes is
infeasible.

Speed (all of it exact):

* an upper bound ``UB`` from the same DP restricted to prefixes of a few
  topological orders (a chain DP); values above ``UB`` are never needed. When the graph
  has only ``S + 1`` ideals (``S`` supernodes), they are the prefixes of its one topological
  order, the chain DP would be the DP itself, and it runs once, without ``UB`` (above
  :data:`COARSE_FROM` of them, with the chain DP over intervals of the order as ``UB``:
  :func:`placement.solvers.chain_dp.solve_coarse_chain`);
* every ideal is stored with its maximal elements and its cut (:mod:`._dp_kernels`), so a
  pair ``I' ⊆ I`` costs the width of ``I'`` and the sizes of the two cuts, not the size
  of the graph; small families run interpreted, without compiling anything, and move to the compiled
  kernels only for a large run (its windows and layers);
* candidates ``I'`` are scanned in decreasing compute order and the scan stops
  when the compute of ``X`` alone reaches the best value found for ``I``;
* a layer is skipped for ``I`` when the work of ``I``, or of ``V \\ I``, cannot
  fit its devices under ``UB``;
* a pair is evaluated only where it may lower ``dp[L][I]`` for some layer; from
  :data:`placement.solvers._dp_kernels.CLASSES_FROM` layers up (without ``stages``) that is asked of one layer per
  class of layers with equal ``dp[·][I]`` (:func:`placement.solvers._dp_kernels._layer_classes`), by a kernel
  compiled apart from the one that asks every layer, so that fewer layers run the code they ran before. On the
  InceptionV3 latency input (12 accelerators, 8 CPUs: 117 layers) asking every layer took 162 s, the classes 19-24 s,
  for the same 17,754,016 blocks evaluated.

With ``stages=N`` the same rules hold for ``e``: ``UB`` comes from the chain DP
in the same mode (∞ when no chain plan has ``N`` stages, and then nothing is
pruned by it); the rest ``V \\ I`` must fit the best ``N - |L|`` of the devices
left after ``L``; and a layer is skipped for ``I`` when ``I`` has fewer
supernodes than ``|L|``, ``V \\ I`` fewer than ``N - |L|``, or (for ``I = V``)
``|L| ≠ N``. Without ``stages`` the DP runs as if this mode did not exist.

The table over a family of ideals is filled by :mod:`placement.solvers.dp_table`; the chain
DP and its upper bound are :mod:`placement.solvers.chain_dp`.
"""

from __future__ import annotations

import math
import time

from placement.errors import LimitExceededError
from placement.plan import Plan
from placement.problem.bounds import meets, throughput_lower_bound
from placement.problem.instance import Instance
from placement.problem.units import sums_exactly
from placement.solution import Solution, Status
from placement.solvers import _dp_kernels as K
from placement.parameters import stage_count
from placement.solvers.chain_dp import solve_chain, solve_coarse_chain, upper_bound
from placement.solvers.dp_table import (Progress, best_plan, build_graph, build_layers, check_memory, compiling,
                                       is_prefix_family, most_ideals, starts_compiled, too_many_for_memory)
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, enumerate_ideals
from placement.verification.evaluate import evaluate
from placement.wording import counted

#: families of the prefixes of one order above this many ideals take the chain DP over intervals of the
#: order (placement.solvers.chain_dp.solve_coarse_chain) as their upper bound: the run's own ceilings near
#: the lower bound all failed where memory binds (a 100,000-node chain: six runs below the optimum, 92 s)
COARSE_FROM = 20_000

#: the DP's optimum is proven when the rounding of its sums (:func:`rounding_error`) is at most this
#: share of its value: the tolerance of the MILP on rounded data
ROUNDING_SHARE = 1e-6


#: the least seconds of the table before its pace is read
PACE_AFTER_S = 1.0


class _DeadlineWatch:
    """A progress callback that passes messages on and stops the DP past a deadline (:func:`deadline_watch`)."""

    def __init__(self, deadline: float, progress: Callable[[str], None] | None, hopeless: bool = False) -> None:
        self.deadline = deadline
        self.progress = progress
        self.hopeless = hopeless

    def __call__(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)
        self._stop_if_late(message)

    def poll(self, message: str, done: float | None = None, spent: float = 0.0, line: bool = False) -> None:
        """Stop the run past the deadline; ``message`` says where it was (passed on as a progress line where
        ``line``), ``done`` the share of the table filled (``None``: not the table) in ``spent`` seconds."""
        if line and self.progress is not None:
            self.progress(message)
        now = self._stop_if_late(message)
        # later ideals pair with more ideals below them: the pace so far is the table's best, and a table that
        # would not end by the deadline at that pace will not end by it
        if (self.hopeless and done is not None and spent >= PACE_AFTER_S and 0 < done < 1
                and spent * (1 - done) / done > self.deadline - now):
            raise LimitExceededError(f"at its pace so far the DP would not finish within the time limit ({message})",
                                     parameter="time_limit")

    def _stop_if_late(self, message: str) -> float:
        """The time now, unless it is past the deadline (then the run stops)."""
        now = time.perf_counter()
        if now > self.deadline:
            raise LimitExceededError(f"the time limit ran out while the DP ran ({message})", parameter="time_limit")
        return now


def deadline_watch(deadline: float | None, progress: Callable[[str], None] | None = None,
                   hopeless: bool = False) -> Callable[[str], None] | None:
    """A progress callback for the DP that passes its messages on to ``progress`` and stops it with
    :class:`LimitExceededError` (on ``time_limit``) once ``deadline`` (a ``time.perf_counter()``
    value) has passed. The DP calls it between steps, about once a second while it fills its table,
    and its ``poll`` method (:func:`placement.solvers.dp_table.fill`) after every chunk of ideals
    (about 2% of the table), so that a short deadline is kept to a fiftieth of the table's time.
    ``hopeless``: stop it too once its table, after :data:`PACE_AFTER_S`, would not end by the deadline
    at its pace so far (the share of it ``poll`` hears filled, in its seconds): a method that can take the
    time left over, as ``auto``'s MILP, is better served by it then."""
    if deadline is None:
        return progress
    return _DeadlineWatch(deadline, progress, hopeless)


def solve_dp(problem: Instance, *, max_ideals: int = DEFAULT_MAX_IDEALS,
             progress: Progress | None = None, merge_zero_cost: bool = True,
             stages: int | None = None, compiled: bool | None = None) -> Solution:
    """Optimal ``stages`` plan for the throughput objective; status ``optimal`` or ``infeasible``.

    ``stages=N`` asks for exactly ``N`` non-empty devices (the recurrence ``e`` of the module
    docstring): the plan is optimal among those plans, and the status is ``infeasible`` when
    there is none. ``N`` must be from 1 to the number of devices (:class:`InvalidParameterError`
    otherwise). Raises :class:`LimitExceededError` when the contracted graph has more than
    ``max_ideals`` ideals, or when the tables of its ideals would not fit in the memory the DP may use
    (:func:`placement.solvers.dp_table.memory_budget`): besides fixed data per ideal, each ideal
    keeps its cut, the nodes whose outputs cross it, which grows with the graph's width.
    ``merge_zero_cost=False`` keeps every colour class as its own supernode (slower; for
    cross-checks; with ``stages`` this is always so).
    ``compiled``: run the numba-compiled kernels (``True``) or the interpreted ones (``False``);
    by default, compiled where the graph's family of ideals is large enough to pay for loading them
    (:func:`placement.solvers.dp_table.starts_compiled`), else interpreted until a run is large (its
    windows and layers: :func:`placement.solvers.dp_table.run_units`).
    The plan's loads are not stored: verify it with
    :func:`placement.verification.evaluate.evaluate`.

    Ctrl-C (a ``KeyboardInterrupt``) while it runs raises :class:`DPInterrupted`, which carries the best
    plan the DP holds at that moment (its upper bound's, from the chain DP) with the instance's lower bound,
    or none where it holds none yet.
    """
    held = InHand()
    try:
        return _solve_dp(problem, held, max_ideals, progress, merge_zero_cost, stages, compiled)
    except KeyboardInterrupt:
        raise held.interrupted(problem) from None
    except LimitExceededError as exc:   # its deadline (deadline_watch): the plan in hand goes with it
        if exc.parameter == "time_limit":
            exc.held = held.best
        raise


def plan_in_hand(exc: LimitExceededError, problem: Instance) -> tuple[float, Plan, str] | None:
    """The plan :func:`solve_dp` held when its deadline (:func:`deadline_watch`) stopped it with ``exc``, as
    ``(value, plan, source)`` at the evaluator's value, where it held a valid one (its upper bound's, from the
    chain DP, which the run would otherwise have to find again); else ``None``."""
    best = getattr(exc, "held", None)
    if best is None:
        return None
    verdict = evaluate(problem, best[1], "stages")
    return (verdict.max_load, best[1], best[2]) if verdict.valid else None


class DPInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`solve_dp`: ``solution`` is the best plan it held then (:meth:`InHand.interrupted`),
    or ``None`` where it held none. A :class:`KeyboardInterrupt`, so code that does not look for it stops as
    before."""

    def __init__(self, solution: Solution | None) -> None:
        super().__init__("interrupted" if solution is not None else "interrupted before the DP found a plan")
        self.solution = solution


class InHand:
    """The best plan :func:`solve_dp` holds while it runs, for Ctrl-C: ``best`` is ``(value, plan, source)``
    (``source`` says where the plan comes from) or ``None``."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.best: tuple[float, Plan, str] | None = None

    def keep(self, value: float, plan: Plan | None, source: str) -> None:
        """Hold ``plan`` (of the DP's value ``value``) where it is the first or better than the one held."""
        if plan is not None and (self.best is None or value < self.best[0]):
            self.best = (value, plan, source)   # one assignment: an interrupt finds the old or the new

    def interrupted(self, problem: Instance) -> DPInterrupted:
        """The interrupt to raise on, once the echoes of the Ctrl-C have passed
        (:func:`placement.sigint.absorb_echoes`): the plan held, at the evaluator's value (the DP's sums may
        round), ``feasible`` with the instance's lower bound
        (:func:`placement.problem.bounds.throughput_lower_bound`, valid for every plan; ``optimal`` where the
        plan meets it), and a message saying the search was interrupted."""
        from placement.sigint import absorb_echoes

        absorb_echoes(time.perf_counter())
        if self.best is None:
            return DPInterrupted(None)
        value, plan, source = self.best
        verdict = evaluate(problem, plan, "stages")
        exact = verdict.max_load if verdict.valid else value
        simple = throughput_lower_bound(problem)["bound"]
        proven = meets(simple, exact)
        said = "it meets" if proven else "with"
        return DPInterrupted(Solution(Status.OPTIMAL if proven else Status.FEASIBLE, plan, exact,
                                      exact if proven else min(exact, simple), "dp",
                                      runtime_s=time.perf_counter() - self.started,
                                      stats={"nodes": len(problem.nodes), "dp_value": value},
                                      message=f"the search was interrupted: the plan in hand is {source}, "
                                              f"{said} the instance's lower bound"))


#: where the plan the DP holds comes from (:meth:`InHand.keep`)
CHAIN_PLAN = "the chain DP's over a few topological orders (the DP's upper bound)"
COARSE_PLAN = "the chain DP's over intervals of the topological order (the DP's upper bound)"
UNPROVEN_PLAN = "the DP's on memory checks that round, which prove nothing"


def _solve_dp(problem: Instance, held: InHand, max_ideals: int, progress: Progress | None, merge_zero_cost: bool,
              stages: int | None, compiled: bool | None) -> Solution:
    """:func:`solve_dp`, keeping each plan it finds in ``held`` as soon as it has it."""
    start = time.perf_counter()
    stages = stage_count(problem, stages)
    contraction = contract(problem, merge_zero_cost and stages is None)
    if stages is not None and stages > contraction.size:
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, "dp", runtime_s=time.perf_counter() - start,
                        stats={"nodes": len(problem.nodes), "supernodes": contraction.size, "stages": stages},
                        message=f"no plan has {stages} non-empty stages: the graph has {contraction.size} "
                                f"part{'' if contraction.size == 1 else 's'} "
                                "that a pipeline can separate (colour classes and cycles stay on one device)")
    graph = build_graph(problem, contraction)
    layers = build_layers(problem, contraction.size + 1)

    most = most_ideals(graph, layers)   # past it the tables cannot fit: the count stops there
    try:
        family = enumerate_ideals(contraction, min(max_ideals, most), progress)  # fail fast, before any solving
    except LimitExceededError as exc:
        if most < max_ideals and exc.parameter == "max_ideals":   # the count passed what memory holds
            raise too_many_for_memory(most, graph, layers) from None
        if stages is None:
            raise
        raise LimitExceededError(f"{exc} (with stages, zero-cost classes are not merged, so there are more "
                                 "ideals than without)", exc.parameter) from None
    n_ideals = len(family[0])
    prefixes = is_prefix_family(family)    # the graph's ideals are nested: those of one topological order
    check_memory(n_ideals, graph, layers, bitsets=not prefixes)
    if compiled is None and starts_compiled(n_ideals, graph, layers):
        compiled = True   # the chain DP's small families too: the kernels are loaded anyway
    if progress is not None:
        progress(f"{n_ideals:,} ideals over {counted(contraction.size, 'supernode')}")
        if compiled and K.must_compile(("family_data", K.range_kernel(len(layers.counts), stages is not None))):
            progress(compiling())
    if prefixes and n_ideals <= COARSE_FROM:   # the chain DP would be this very run
        ub, ub_plan = math.inf, None
        if progress is not None:
            progress("the ideals are the prefixes of the one topological order: no upper bound needed")
    else:
        if prefixes:   # the run's own first tries, ceilings near the lower bound, may all fail where it is loose
            coarse = solve_coarse_chain(problem, stages=stages, progress=progress, contraction=contraction,
                                        compiled=compiled)
            ub, ub_plan = coarse.objective, coarse.plan
            held.keep(ub, ub_plan, COARSE_PLAN)
            what = "the chain DP over intervals of the order"
        else:
            ub, ub_plan = upper_bound(problem, graph, layers, contraction, stages, compiled, progress,
                                      found=lambda value, plan: held.keep(value, plan, CHAIN_PLAN))
            what = "chain DP"
        slack = rounding_error(problem, ub) if ub_plan is not None else 0.0
        if slack > 0:   # the sums may be off either way: the ceiling is the plan's true value plus that
            ub = evaluate(problem, ub_plan, "stages").max_load + slack
        chain_time = time.perf_counter() - start
        if progress is not None:
            progress(f"upper bound from {what}: {ub:.6g} ({chain_time:.2f} s)")

    table, value, plan = best_plan(problem, graph, layers, family, ub, progress, "dp", stages, compiled)
    if plan is None and ub_plan is not None:  # cannot happen: the DP admits every block of the chain plan
        return Solution(Status.ERROR, None, math.inf, 0.0, "dp", runtime_s=time.perf_counter() - start,
                        message="internal error: the DP lost the upper-bound plan; please report this instance")
    stats = {
        "nodes": len(problem.nodes),
        "supernodes": contraction.size,
        "zero_cost_merges": contraction.merged_zero_cost,
        "ideals": n_ideals,
        "layers": len(layers.counts),
        "upper_bound": ub if math.isfinite(ub) else None,
        "pairs_in_window": int(table.counters[K.WINDOW]),
        "pairs_examined": int(table.counters[K.SUBSET]),
        "blocks_evaluated": int(table.counters[K.EVALUATED]),
        "dp_value": value if math.isfinite(value) else None,
    }
    if stages is not None:
        stats["stages"] = stages
    # the DP's value bounds the optimum where its memory checks admit every block that fits; a plan that
    # meets the instance's own bound is optimal whatever they left out
    memory_proven, floor = graph.memory_exact, 0.0
    simple = None if memory_proven or plan is None else throughput_lower_bound(problem)["bound"]
    meets_simple = simple is not None and meets(simple, value)
    if not memory_proven and not meets_simple:
        held.keep(value, plan, UNPROVEN_PLAN)
        # the run on memory rounded the other way is a relaxation: its optimum bounds, its valid plan is optimal
        relaxed = build_graph(problem, contraction, relaxed_memory=True)
        if progress is not None:
            progress("the memory sizes have no exact unit: the DP again, on memory rounded to admit every fit")
        relaxed_table, low, low_plan = best_plan(problem, relaxed, layers, family, value if plan is not None
                                                 else math.inf, progress, "dp", stages, compiled)
        stats["relaxed_memory_value"] = low if math.isfinite(low) else None
        stats["pairs_examined"] += int(relaxed_table.counters[K.SUBSET])
        if low_plan is not None and evaluate(problem, low_plan, "stages").valid:
            memory_proven, plan, value = True, low_plan, low
        elif low_plan is None:   # not even the relaxation has a plan (it keeps the one found, if any)
            memory_proven = plan is None
        else:
            floor = low
    runtime = time.perf_counter() - start
    if plan is None:
        what = "no pipeline of the available devices" if stages is None else \
            f"no pipeline of exactly {stages} non-empty {'stage' if stages == 1 else 'stages'}"
        if not memory_proven:
            return Solution(Status.NO_SOLUTION, None, math.inf, floor, "dp", runtime_s=runtime, stats=stats,
                            message=f"{what} was found; {MEMORY_ROUNDED}, and the DP on memory rounded to "
                                    "admit every fit finds a plan that does not fit, so this is no proof")
        return Solution(Status.INFEASIBLE, None, math.inf, math.inf, "dp", runtime_s=runtime, stats=stats,
                        message=f"{what} satisfies the memory and support constraints")
    error = rounding_error(problem, value)
    if error > ROUNDING_SHARE * value:
        return _inexact(problem, plan, value, error, runtime, stats, memory_proven, floor)
    if error > 0:   # proven to within its sums' rounding: the value is the evaluator's where it is that close
        exact = evaluate(problem, plan, "stages").max_load
        if abs(exact - value) <= error:   # farther, the sums are wrong, not rounded: the check is to say so
            value = exact
    if not memory_proven and not meets_simple:   # the first run's plan stands: ``simple`` is its instance's bound
        return Solution(Status.FEASIBLE, plan, value, min(value, max(simple, floor)), "dp", runtime_s=runtime,
                        stats=stats, message=f"{MEMORY_ROUNDED}: its optimum is no proof; on memory rounded to "
                                             f"admit every fit it reaches {floor:.6g}, with a plan that does not fit")
    return Solution(Status.OPTIMAL, plan, value, value, "dp", runtime_s=runtime, stats=stats)


#: why the DP proves nothing where memory binds and the sizes have no exact common unit
MEMORY_ROUNDED = ("the memory sizes and bounds have no unit in which the DP's sums are exact "
                  "(placement.problem.memory_fit), and its memory checks round")


def _inexact(problem: Instance, plan: Plan, value: float, error: float, runtime: float, stats: dict,
             memory_exact: bool = True, memory_floor: float = 0.0) -> Solution:
    """The DP's ``plan`` where its floating-point loads may be off by up to ``error``: optimal when the
    plan's value, recomputed by the evaluator, meets the instance's own lower bound (the optimum is at
    least that bound, whatever the rounding); otherwise feasible at the plan's recomputed value, with
    the larger of that bound and ``value − error`` (every plan's computed load is within ``error`` of
    its true load). Where the memory checks round (``memory_exact`` False) the DP may have left out
    blocks that fit, so ``value − error`` bounds nothing and the bound is the instance's own, or
    ``memory_floor − error`` (the value of the DP that admits every fit) where that is larger."""
    simple = throughput_lower_bound(problem)["bound"]
    exact = evaluate(problem, plan, "stages").max_load
    if meets(simple, exact):
        return Solution(Status.OPTIMAL, plan, exact, exact, "dp", runtime_s=runtime, stats=stats)
    stats["rounding_error"] = error
    floor = max(0.0, value - error, simple) if memory_exact else max(simple, memory_floor - error)
    memory = "" if memory_exact else f"; {MEMORY_ROUNDED}"
    return Solution(Status.FEASIBLE, plan, exact, min(exact, floor), "dp",
                    runtime_s=runtime, stats=stats,
                    message=f"the DP sums the times and costs in floating point: on these numbers its loads "
                            f"may be off by up to {error:.3g}, against its plan's value of {exact:.6g} (the "
                            f"evaluator's; its own sums read {value:.6g}), so the plan is not proven optimal{memory}")


def rounding_error(problem: Instance, value: float = math.inf) -> float:
    """At least the error of any load the DP computes in floating point, on the devices a plan better
    than one of computed max-load ``value`` can use. 0 when every time and cost is a multiple of one
    power of two ``2^-k`` and their total is below ``2^(53−k)``: every sum is then exact. Otherwise a
    block's compute on type ``t`` and its communication are differences of running sums over at most
    ``n`` nodes of type-``t`` times and of costs, each within ``n · 2^-53`` times the total of those
    (``E_t``), and a load is a few such differences (8 sums' errors allowed). With ``E`` the bound
    over every node's largest time and cost, the DP's plan is truly at most ``value + E``, so a plan no
    worse uses no type whose every node takes longer than that: the error is the largest ``E_t`` of
    the other types (of at least one device; the costs count on types that pay communication only: a
    CPU's load sums no cost). Every such plan's computed load is within it of its true load, so the true
    optimum is at least the DP's value less it."""
    numbers = [t for v in problem.nodes for t in v.times if t is not None] + [v.out_cost for v in problem.nodes]
    if not all(map(math.isfinite, numbers)):
        return math.inf
    if sums_exactly(numbers):
        return 0.0
    per_sum = 8 * len(problem.nodes) * 2.0 ** -53
    largest = sum(max((t for t in v.times if t is not None), default=0.0) + v.out_cost for v in problem.nodes)
    reach = value + per_sum * largest
    costs = math.fsum(v.out_cost for v in problem.nodes)
    types = problem.device_types
    usable = [t for t in range(len(types))
              if types[t].count > 0 and any(v.times[t] is not None and v.times[t] <= reach for v in problem.nodes)]
    if not math.isfinite(reach) or not usable:
        return per_sum * largest
    return per_sum * max(math.fsum(v.times[t] for v in problem.nodes if v.times[t] is not None)
                         + (costs if types[t].pays_comm else 0.0) for t in usable)



__all__ = ["solve_dp", "solve_chain", "DPInterrupted"]
