"""Solving a throughput formulation: data, model, warm start, backend, verified outcome.

Every throughput formulation (:mod:`.stages`, :mod:`.sets`, :mod:`.none`) is a
:class:`Formulation`: it chooses the groups it places, builds its rows through a
:class:`~placement.solvers.milp.backends.Backend`, turns a plan into variable
values (the warm start) and variable values into a plan. :func:`solve_throughput`
runs one and hands the answer to :func:`placement.solvers.milp.outcome.conclude`,
which verifies the plan with the independent evaluator under the formulation's
contiguity class.

A formulation made with ``stages=N`` has ``N`` slots, every one used
(:func:`placement.solvers.milp.rows.slot_types`): its plans have exactly ``N``
non-empty devices. A plan with another number of non-empty devices fails the
check here (a warm start is then not used; a decoded plan would be an error).

Where CP-SAT's memory rows had to be rounded so that they admit every plan that fits
(:func:`placement.solvers.milp.data._admitting_memory`), a plan they pass may exceed a bound as
written by less than their rounding: :func:`refitted` then adds rows that keep that device's groups
off every device of its type (:meth:`Formulation.exclude`) and solves the model again.
"""

from __future__ import annotations

import functools
import gc
import math
import time
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, Callable, Sequence

from placement.problem.bounds import lower_bound, meets
from placement.problem.instance import Instance
from placement.problem.memory_fit import fits
from placement.plan import Plan
from placement.solution import Solution, Status
from placement.solvers.milp.backends import Backend, OutOfTime, RawResult, SolveOptions, make_backend
from placement.solvers.milp.backends.base import append_log
from placement.solvers.milp.data import GroupData, Scaling, prepare, scaling_note
from placement.solvers.milp.heartbeat import heartbeat
from placement.solvers.milp.interrupt import SearchInterrupted, absorb_echoes, solve_interruptibly
from placement.solvers.milp.outcome import ADMITTING, Context, Verdict, conclude
from placement.verification.evaluate import evaluate, pipeline_order
from placement.wording import counted

#: Integer backends: the data are scaled so that no coefficient times a variable's bound in one
#: row exceeds this (:mod:`.data`): the most that CP-SAT's answers are trusted with
#: (:data:`placement.solvers.milp.backends.cpsat.SAFE_PRODUCT`).
DEFAULT_MAX_PRODUCT = 2 ** 62
#: the most times a model whose memory rows admit a plan over a bound is solved again without it (:func:`refitted`)
MAX_REFITS = 16


class Formulation(ABC):
    """One MILP model of the throughput objectives under one contiguity class; with ``stages=N``,
    of the plans with exactly ``N`` non-empty devices."""

    contiguity: str = ""

    def __init__(self, stages: int | None = None) -> None:
        self.stages = stages

    @abstractmethod
    def groups(self, problem: Instance, objective: str) -> list[list[int]]:
        """The node groups the model places (node positions)."""

    @abstractmethod
    def build(self, problem: Instance, d: GroupData, be: Backend, objective: str) -> Any:
        """Add the variables and rows; returns what :meth:`hint` and :meth:`decode` need."""

    @abstractmethod
    def hint(self, problem: Instance, d: GroupData, variables: Any, plan: Plan,
             objective: str) -> tuple[dict[Any, float] | None, str]:
        """Variable values of ``plan``, or ``None`` and the reason it cannot be used."""

    @abstractmethod
    def decode(self, problem: Instance, d: GroupData, variables: Any, value: Callable[[Any], float]) -> Plan | None:
        """The plan the values describe, or ``None`` when they place no plan."""

    def model_stats(self, variables: Any, unit: float) -> dict[str, Any]:
        """What the model's construction found, for :attr:`Solution.stats` (``unit``: model to
        instance time units)."""
        return {}

    def model_news(self, variables: Any, unit: float) -> list[str]:
        """Progress lines on what the model's construction found."""
        return []

    def floor(self, variables: Any, unit: float) -> float:
        """A lower bound on the objective that the model's construction proved (instance units; 0 for
        none), reported whatever the backend proves beyond it."""
        return 0.0

    def start_plan(self, problem: Instance, d: GroupData, variables: Any) -> Plan | None:
        """A plan the model's construction suggests as a start (the better of it and the given
        warm start is used), or ``None``."""
        return None

    def searched_start(self, problem: Instance, seconds: float) -> Plan | None:
        """A plan a heuristic search finds within about ``seconds``, as a start (the better of it and the
        start in hand is used; sought before the model is built), or ``None`` where the formulation runs none."""
        return None

    #: what :meth:`searched_start` runs, as the progress names it
    searched_source: str = "a local search"
    #: what :meth:`searched_start` runs, as the progress announces it on a large graph; ``None``: it runs nothing
    searched_what: str | None = None

    def exclude(self, be: Backend, d: GroupData, variables: Any, k: int, groups: Sequence[int]) -> bool:
        """Add rows that keep ``groups``, whose nodes as written exceed the memory of type ``k`` (position in
        ``d.types``), off every single device of that type; whether the formulation has such rows. They cut off
        no plan that fits: a device holding all of ``groups`` holds at least their memory."""
        return False

    #: ask the backend for its full LP relaxation (:attr:`Backend.full_relaxation`)
    full_relaxation: bool = False
    #: let the backend add its own cutting planes (:attr:`Backend.solver_cuts`)
    solver_cuts: bool = True


def slot_of_groups(problem: Instance, d: GroupData, devices: list[Any]) -> tuple[list[int] | None, str]:
    """The position in ``devices`` (plan device assignments) of every group, or ``None`` and why."""
    index: dict[int, int] = {}
    for s, dev in enumerate(devices):
        for node_id in dev.nodes:
            index[problem.index_of(node_id)] = s
    where = []
    for members in d.groups:
        found = {index.get(v) for v in members}
        if len(found) != 1 or None in found:
            return None, "warm start ignored: the plan splits or omits a group of nodes the model keeps together"
        where.append(found.pop())
    return where, ""


def type_position(problem: Instance, d: GroupData, name: str) -> int | None:
    """Position in ``d.types`` of the device type called ``name``."""
    for k, t in enumerate(d.types):
        if problem.device_types[t].name == name:
            return k
    return None


def stage_count_verdict(verdict: Verdict, plan: Plan, stages: int | None) -> Verdict:
    """``verdict``, made invalid when ``stages`` is set and ``plan`` has another number of non-empty devices."""
    if stages is None:
        return verdict
    if plan.non_empty == stages:
        return verdict
    why = f"the plan has {counted(plan.non_empty, 'non-empty device', 'non-empty devices')}, not stages={stages}"
    return Verdict(False, verdict.objective, (why, *verdict.violations))


def announce(progress: Callable[[str], None] | None, be: Backend, options: SolveOptions,
             unit: float, left: float | None = None, floor: float = 0.0) -> SolveOptions:
    """Say what is about to be solved (with ``left``, the seconds the solver gets), and have improving
    solutions reported (original units), each with the larger of the solver's bound and ``floor`` (a lower
    bound proven before the search, which the result reports where the solver's is below it)."""
    if progress is None:
        return options
    size = be.size
    rest = "" if left is None or left >= options.time_limit else f" ({left:.3g} s left for the solver)"
    progress(f"MILP: {size['variables']:,} variables ({size['binaries']:,} binary), {size['rows']:,} rows; "
             f"solving with {be.name}, time limit {options.time_limit:g} s{rest}")

    def on_solution(objective: float, bound: float, seconds: float) -> None:
        progress(f"  {seconds:7.2f} s  objective {objective * unit:.6g}  bound {max(bound * unit, floor):.6g}")

    return replace(options, on_solution=on_solution)


def start_from(plan: Plan | None, verify: Callable[[Plan], Verdict], be: Backend, targets: list[Any],
               scale: float, notes: list[str]) -> tuple[Plan, float] | None:
    """Check a warm start and bound the objective by its value.

    The cutoff ``Σ targets ≤ ⌈value · scale⌉`` (integer backends; ``value · scale · (1 + 1e-9)``
    for the floating-point ones) keeps the starting plan itself (model values never exceed
    true values times ``scale``, see :mod:`.data`) and every better one, so the optimum
    and every proven bound are unchanged whenever the start is valid; a backend whose
    ``cutoff_row`` is false gets no such row. Returns the plan and its verified value (the
    fallback), or ``None``.
    """
    if plan is None:
        return None
    verdict = verify(plan)
    if not verdict.valid:
        notes.append("warm start ignored: " + (verdict.violations[0] if verdict.violations else "not a valid plan"))
        return None
    if be.cutoff_row:
        limit = math.ceil(verdict.objective * scale) if be.integer_only else verdict.objective * scale * (1 + 1e-9)
        be.add([(1, t) for t in targets], hi=limit)
    notes.append(f"started from a plan of value {verdict.objective:.6g}")
    return plan, verdict.objective


def checked_claim(be: Backend, raw: RawResult, fallback: tuple[Plan, float] | None,
                  check: Callable[[], Plan | None] | None, verify: Callable[[Plan], Verdict],
                  notes: list[str]) -> tuple[Plan, float] | None:
    """The fallback for :func:`placement.solvers.milp.outcome.conclude`: ``fallback``, or where there is
    none and a floating-point backend claims optimality, the plan ``check`` finds (the default warm
    start, computed after the solve), if valid. A better plan refutes the claim there as a warm
    start would: HiGHS without a start proved plans of 16 and 7 optimal where the DP finds 15 and 3
    (a memory row with coefficients 2·10⁻⁶ and 0.5 of its bound; no option of HiGHS avoided it)."""
    if fallback is not None or check is None or be.integer_only or raw.status != "optimal":
        return fallback
    plan = check()
    if plan is None:
        return None
    verdict = verify(plan)
    if not verdict.valid:
        return None
    notes.append(f"{be.name}'s claim of optimality checked against a plan of value {verdict.objective:.6g} "
                 "found after the solve")
    return plan, verdict.objective


def better_start(given: Plan | None, own: Plan | None, verify: Callable[[Plan], Verdict],
                 progress: Callable[[str], None] | None, source: str = "the model's construction") -> Plan | None:
    """``own`` (a formulation's suggestion, from ``source``) where it is valid and better than ``given``,
    else ``given``."""
    if own is None:
        return given
    mine = verify(own)
    if not mine.valid:
        return given
    if given is not None:
        theirs = verify(given)
        if theirs.valid and theirs.objective <= mine.objective:
            return given
    if progress is not None:
        progress(f"starting plan from {source}: {mine.objective:.6g}")
    return own


def data_notes(scaling: Scaling, memory_exact: bool, backend: str, bound_name: str = "the simple one", *,
               integer_only: bool) -> list[str]:
    """The notes on how the model's data differ from the instance's (rounded times or memory);
    ``bound_name``: what the bound is where the solver's is not used; ``integer_only``: the backend's
    capability (:attr:`.backends.base.Backend.integer_only`), whose memory data are rounded, not compared
    within tolerances."""
    notes = []
    note = scaling_note(scaling, backend)
    if note:
        notes.append(note)
    if not memory_exact and integer_only:
        notes.append(f"memory rounded conservatively (sizes up, bounds down): the bound is {bound_name}")
    elif not memory_exact:
        notes.append(f"the memory data differ by steps finer than {backend}'s tolerances can tell apart (a millionth "
                     f"of a bound): its proof is not used and the bound is {bound_name} (cp-sat decides memory "
                     "exactly)")
    return notes


#: the share of the time left that a formulation's own search for a start may take (:meth:`searched_start`)
START_SEARCH_SHARE = 0.05
#: a graph of at least this many nodes has the search for a start announced: on 100,000 nodes under ``none`` the
#: local search and the LPT fill take seconds
START_NOTED_NODES = 10_000
#: seconds the LPT fills of a searched start (:mod:`placement.solvers.baselines.lpt`) may take whatever the
#: search's share, up to a quarter of the time left: one fill of 5,000 classes over 5 devices takes about 0.3 s
FILL_FLOOR_S = 1.0


def fill_deadline(seconds: float) -> float:
    """The deadline (a ``time.perf_counter()`` value) of the LPT fills of a start searched for in ``seconds``
    (:meth:`Formulation.searched_start`, :data:`START_SEARCH_SHARE` of the time left): half of ``seconds``, or
    :data:`FILL_FLOOR_S` where that is more, but not past a quarter of the time left."""
    return time.perf_counter() + max(seconds / 2, min(FILL_FLOOR_S, seconds / START_SEARCH_SHARE / 4))


def parts_start(problem: Instance, stages: int | None, seconds: float) -> Plan | None:
    """The fill of whole parts of the graph (:func:`placement.solvers.baselines.lpt.parts_plan`) as a start
    searched for in ``seconds``: no edge joins two of its devices, so it is a pipeline in any order of them
    (class ``stages``, so ``sets`` too); ``None`` with ``stages=N`` (it does not count the devices it fills),
    on a graph of one part, or where a part fits no device."""
    from placement.solvers.baselines.lpt import parts_plan

    return None if stages is not None else parts_plan(problem, fill_deadline(seconds))


def _seconds_left(options: SolveOptions) -> float:
    """The seconds to the deadline of ``options`` (its time limit where it has none)."""
    if options.deadline is None:
        return options.time_limit
    return max(0.0, options.deadline - time.perf_counter())


def reserve(options: SolveOptions) -> float:
    """Seconds kept back from the solver for decoding and verifying its plan before the deadline."""
    return min(1.0, 0.02 * options.time_limit)


#: seconds past its time limit after which a backend's run is reported as an overrun (the solvers
#: look at their clocks between steps, and some steps are long)
OVERRUN_S = 1.0
#: the note of an answer that Ctrl-C ended
INTERRUPTED = "the search was interrupted"


def skipped(be: Backend, options: SolveOptions, progress: Callable[[str], None] | None, value: float,
            simple: float) -> RawResult:
    """The answer of a search not run because the starting plan's value ``value`` meets the lower bound
    ``simple``: said in the progress, and in the log file, which would otherwise hold nothing."""
    if progress is not None:
        progress(f"the starting plan ({value:.6g}) meets the lower bound: no search needed")
    append_log(options.log_path, f"{be.name} was not run: the starting plan ({value:.10g}) meets the "
                                 f"lower bound ({simple:.10g})\n")
    return RawResult("skipped", stats=be.build_stats())


def run_solver(be: Backend, options: SolveOptions, progress: Callable[[str], None] | None,
               unit: float, fallback: tuple[Plan, float] | None = None, simple: float = 0.0) -> RawResult:
    """The backend's answer within the time left before ``options.deadline`` (see
    :meth:`SolveOptions.left`); ``no_solution`` without running it when none is left, and
    ``skipped`` when the starting plan ``fallback`` already meets the instance's lower bound
    ``simple`` (nothing is left to prove). A search silent for a while says so
    (:func:`.heartbeat.heartbeat`), Ctrl-C stops it (:func:`.interrupt.solve_interruptibly`: the answer
    is then marked ``interrupted``, and :func:`.outcome.conclude` raises its plan on), and a run past its
    limit by more than :data:`OVERRUN_S` says so in its message."""
    if fallback is not None and meets(simple, fallback[1]):
        return skipped(be, options, progress, fallback[1], simple)
    limit = options.left(reserve(options))
    if limit <= 0:
        return RawResult("no_solution", message="the time limit ran out before the solver could start", ran=False)
    best = None if fallback is None else fallback[1]
    searching = False
    try:
        with heartbeat(progress, announce(progress, be, options, unit, limit, simple), unit, best,
                       stop=be.interrupt) as watched:
            searching = True
            raw = solve_interruptibly(be, replace(watched, time_limit=limit))
    except KeyboardInterrupt as exc:   # concluded as a stop at the limit, then raised again (outcome.conclude)
        if searching and not isinstance(exc, SearchInterrupted):   # a second Ctrl-C: nothing is kept
            raise
        found = exc.raw if isinstance(exc, SearchInterrupted) else None   # else before the search started
        raw = found if found is not None else RawResult("no_solution", stopped=True)
        return replace(raw, interrupted=True, message="; ".join(m for m in (raw.message, INTERRUPTED) if m))
    if raw.wall_s > limit + OVERRUN_S:
        note = f"{be.name} overran its time limit of {limit:g} s ({raw.wall_s:.1f} s)"
        raw = replace(raw, message="; ".join(m for m in (raw.message, note) if m))
    return raw


def over_memory(problem: Instance, d: GroupData, plan: Plan) -> list[tuple[int, tuple[int, ...]]]:
    """The devices of ``plan`` whose nodes' sizes, as written, exceed their type's memory bound (the evaluator's
    rule, :func:`placement.problem.memory_fit.fits`): each as its type's position in ``d.types`` and the groups
    it holds."""
    group_of = {u: g for g, members in enumerate(d.groups) for u in members}
    found = []
    for device in plan.devices:
        k = type_position(problem, d, device.type)
        positions = [problem.index_of(node_id) for node_id in device.nodes]
        if k is not None and not fits([problem.nodes[u].memory for u in positions],
                                      problem.device_types[d.types[k]].memory):
            found.append((k, tuple(sorted({group_of[u] for u in positions}))))
    return found


def cut_over_memory(formulation: Formulation, problem: Instance, d: GroupData, variables: Any,
                    be: Backend) -> Callable[[Callable[[Any], float]], bool]:
    """For :func:`refitted`: the rows of :meth:`Formulation.exclude` for every device that the plan of the
    values given puts over its memory bound as written (:func:`over_memory`); whether there was one."""
    def cut(value: Callable[[Any], float]) -> bool:
        plan = formulation.decode(problem, d, variables, value)
        over = [] if plan is None else over_memory(problem, d, plan)
        return bool(over) and all([formulation.exclude(be, d, variables, k, groups) for k, groups in over])
    return cut


def refitted(be: Backend, raw: RawResult, options: SolveOptions, progress: Callable[[str], None] | None,
             unit: float, fallback: tuple[Plan, float] | None, simple: float,
             cut_over: Callable[[Callable[[Any], float]], bool]) -> tuple[RawResult, int]:
    """``raw``, or where memory rows rounded to admit every plan that fits (:func:`.data._admitting_memory`)
    gave a plan with a device over its bound as written (by less than their rounding), the answer of the model
    solved again with that device's groups kept off every device like it (``cut_over`` adds those rows for the
    plan of the values it is given, and says whether there was such a device), up to :data:`MAX_REFITS` times
    while time is left. No plan that fits breaks such a row (a device holding all of the groups holds at least
    their memory), so every bound found (the largest is kept) and an infeasibility stay proofs, and an optimum
    that fits is the optimum. A solve that ends without a plan leaves the previous answer, with the larger
    bound. Second: how many plans were cut off."""
    cut = 0
    while (cut < MAX_REFITS and raw.status in ("optimal", "feasible") and raw.value is not None
           and not raw.interrupted and options.left(reserve(options)) > 0 and cut_over(raw.value)):
        cut += 1
        if progress is not None:
            progress(f"{be.name}'s plan exceeds a memory bound by less than the rows' rounding: "
                     "solving again without it")
        again = run_solver(be, options, progress, unit, fallback, simple)
        bound = max((b for b in (raw.bound, again.bound) if b is not None), default=None)
        if again.status not in ("optimal", "feasible", "infeasible"):
            return replace(raw, bound=bound), cut
        raw = again if again.status == "infeasible" else replace(again, bound=bound)
    return raw, cut


def memory_cut_note(cut: int, backend: str) -> str:
    """What :func:`refitted` did, for a solution's message."""
    return f"{counted(cut, 'plan')} over a memory bound by less than the rounding of {backend}'s memory rows cut off"


def out_of_time(problem: Instance, method: str, objective: str, contiguity: str, start: float, why: str,
                warm_start: Plan | None, verify: Callable[[Plan], Verdict], simple_bound: float,
                bound_name: str = "the instance's lower bound") -> Solution:
    """The answer when the deadline passed before the solver ran: the warm start, verified, as a
    ``feasible`` plan with the instance's simple bound (``optimal`` where it meets that bound, named
    ``bound_name`` in the message), or ``no_solution``."""
    runtime = time.perf_counter() - start
    bound = simple_bound if math.isfinite(simple_bound) else 0.0
    if warm_start is not None:
        verdict = verify(warm_start)
        if verdict.valid and meets(bound, verdict.objective):
            return Solution(Status.OPTIMAL, warm_start, verdict.objective, verdict.objective, method, objective,
                            contiguity, runtime_s=runtime,
                            message=f"{why}; the starting plan is returned, and it meets {bound_name}")
        if verdict.valid:
            return Solution(Status.FEASIBLE, warm_start, verdict.objective, min(bound, verdict.objective), method,
                            objective, contiguity, runtime_s=runtime, message=f"{why}; the starting plan is returned")
    return Solution(Status.NO_SOLUTION, None, math.inf, bound, method, objective, contiguity, runtime_s=runtime,
                    message=why)


def request_verdict(problem: Instance, formulation: Formulation, objective: str, plan: Plan) -> Verdict:
    """The evaluator's verdict on ``plan`` for the request: ``formulation``'s contiguity class and stage
    count, valued for ``objective``."""
    ev = evaluate(problem, plan, contiguity=formulation.contiguity)
    return stage_count_verdict(Verdict(ev.valid, ev.objective(objective), ev.violations), plan, formulation.stages)


def interrupted_start(problem: Instance, formulation: Formulation, objective: str, backend: str, plan: Plan,
                      began: float) -> SearchInterrupted:
    """The interrupt of a MILP stopped by Ctrl-C while its warm start ran (since ``began``), carrying the plan
    the warm start held (``plan``: the DP's upper bound's), verified for the request as a start the search
    never took up is (:func:`out_of_time`), with the instance's lower bound."""
    verify = functools.partial(request_verdict, problem, formulation, objective)
    method = f"milp-{make_backend(backend).name}"
    return SearchInterrupted(None, out_of_time(problem, method, objective, formulation.contiguity, began,
                                               "the search was interrupted before it started", plan, verify,
                                               lower_bound(problem, objective)))


def solve_throughput(problem: Instance, formulation: Formulation, objective: str, backend: str,
                     options: SolveOptions, warm_start: Plan | None = None,
                     max_product: float = DEFAULT_MAX_PRODUCT,
                     progress: Callable[[str], None] | None = None, own_start: bool = True,
                     check: Callable[[], Plan | None] | None = None, start_bound: float = 0.0) -> Solution:
    """Optimal (or bounded) plan of ``formulation`` for ``objective`` on the named backend; the model is
    built, and the solver run, within ``options.deadline`` (:func:`out_of_time` when it passes first).
    ``own_start``: the formulation's own starting plan (:meth:`Formulation.start_plan`) may replace
    ``warm_start`` where it is better; ``check`` finds a plan that a floating-point backend's claim
    of optimality is checked against where there is no start (:func:`checked_claim`); ``start_bound``
    (a lower bound proven where the start was found: the DP's ``stages`` optimum) joins the
    instance's lower bound. A valid start that meets that bound is returned optimal before any model
    is built (stats ``model_built: False``)."""
    start = time.perf_counter()
    be = make_backend(backend)
    if warm_start is not None and formulation.contiguity == "stages":
        # a start may come back as the answer (it needs no search, or none finds better): in pipeline order
        order = pipeline_order(problem, warm_start)
        if order is not None and len(order) == len(warm_start.devices):
            warm_start = Plan(tuple(warm_start.devices[i] for i in order))
    # the warm start is checked when chosen and again when it bounds the model
    verify = functools.lru_cache(maxsize=4)(functools.partial(request_verdict, problem, formulation, objective))
    simple = lower_bound(problem, objective)
    verdict = None if warm_start is None else verify(warm_start)
    if start_bound > 0 and verdict is not None and verdict.valid:
        # the DP's optimum is its plan's value, which the evaluator sums exactly rounded: the DP's own
        # sums, differences of running sums, may end an ulp above it
        start_bound = min(start_bound, verdict.objective)
    from_dp = start_bound > simple
    bound_name = "the DP's stages optimum" if from_dp else "the instance's lower bound"
    if from_dp:
        simple = start_bound
        if progress is not None:
            progress(f"lower bound {start_bound:.6g}: the DP's, which found the start")

    def before_the_search(plan: Plan | None) -> SearchInterrupted:
        """The interrupt of Ctrl-C before the search started, carrying ``plan`` (the start in hand), verified."""
        absorb_echoes(time.perf_counter())
        return SearchInterrupted(None, out_of_time(problem, f"milp-{be.name}", objective, formulation.contiguity,
                                                   start, "the search was interrupted before it started", plan, verify,
                                                   simple, bound_name))

    given = warm_start
    left = _seconds_left(options)
    if own_start and left > 0:   # before the model: a start that meets the bound needs none
        try:
            if progress is not None and formulation.searched_what and len(problem.nodes) >= START_NOTED_NODES:
                progress(f"seeking a starting plan: {formulation.searched_what} (its share of the time left: "
                         f"{START_SEARCH_SHARE * left:.3g} s)")
            searched = formulation.searched_start(problem, START_SEARCH_SHARE * left)
            warm_start = better_start(warm_start, searched, verify, progress, formulation.searched_source)
        except KeyboardInterrupt:   # Ctrl-C while a start is sought: the one in hand goes on, verified
            raise before_the_search(warm_start) from None
        verdict = None if warm_start is None else verify(warm_start)
    if verdict is not None and verdict.valid and meets(simple, verdict.objective):
        # nothing is left to prove: no model is built (on large instances that takes the longest)
        raw = skipped(be, options, progress, verdict.objective, simple)
        ctx = Context(method=f"milp-{be.name}", objective_kind=objective, contiguity=formulation.contiguity,
                      start=start, unit=1.0, exact_data=True, simple_bound=simple, exact_feasibility=True,
                      notes=[f"started from a plan of value {verdict.objective:.6g}"],
                      stats={"backend": be.name, "model_built": False,
                             **({"start_bound": start_bound} if start_bound > 0 else {})},
                      bound_name=bound_name)
        return conclude(ctx, be, raw, lambda value: None, verify, (warm_start, verdict.objective))
    if options.deadline is not None and time.perf_counter() >= options.deadline:   # no time to build, let alone solve
        return out_of_time(problem, f"milp-{be.name}", objective, formulation.contiguity, start,
                           "the time limit ran out before the model was built", warm_start, verify, simple, bound_name)
    be.start_build(options.deadline, progress, options.time_limit)
    be.full_relaxation = formulation.full_relaxation
    be.solver_cuts = formulation.solver_cuts
    if progress is not None:
        progress(f"building the {formulation.contiguity} model for {be.name} ({len(problem.nodes):,} nodes)")
    built: int | None = None   # the variables built when memory ran out
    try:
        d = prepare(problem, formulation.groups(problem, objective), be.integer_only, max_product,
                    formulation.stages, by_direction=objective != "throughput",
                    upper=verdict.objective if verdict is not None and verdict.valid else None)
        variables = formulation.build(problem, d, be, objective)
    except OutOfTime as exc:
        return out_of_time(problem, f"milp-{be.name}", objective, formulation.contiguity, start, str(exc),
                           warm_start, verify, simple, bound_name)
    except MemoryError:   # the model outgrew the machine (10^8 variables for 100,000 nodes on 1,001 devices)
        built = be.size.get("variables", 0)   # handled below, once the build's frames are gone
    except KeyboardInterrupt:   # Ctrl-C before the search: the starting plan goes on, verified, in the interrupt
        raise before_the_search(warm_start) from None
    if built is not None:
        name = be.name
        del be   # what was built is freed before the start is checked
        gc.collect()
        return out_of_time(problem, f"milp-{name}", objective, formulation.contiguity, start,
                           f"the model ran out of memory while it was built ({counted(built, 'variable')} so far); the "
                           "DP or a coarser graph (colour classes) takes less", warm_start, verify, simple, bound_name)
    be.end_build()
    notes = data_notes(d.scaling, d.memory_exact, be.name, "the DP's stages optimum" if from_dp else "the simple one",
                       integer_only=be.integer_only)
    data = tuple(notes)
    if progress is not None:
        for line in formulation.model_news(variables, 1.0 / d.scaling.scale):
            progress(line)
    if d.memory_exact:   # proven on the model's data, which round times down only
        floor = formulation.floor(variables, 1.0 / d.scaling.scale)
        if floor > simple:
            simple, bound_name = floor, "the bound the model's construction proved"
    if own_start:
        try:
            warm_start = better_start(warm_start, formulation.start_plan(problem, d, variables), verify, progress)
        except KeyboardInterrupt:   # Ctrl-C while the packing plan is extended: the start in hand goes on
            raise before_the_search(warm_start) from None
        if given is not None and warm_start is not given and not verify(given).valid:   # said as start_from says it
            violations = verify(given).violations
            notes.append("warm start ignored: " + (violations[0] if violations else "not a valid plan"))
    fallback = start_from(warm_start, verify, be, variables.targets, d.scaling.scale, notes)
    if fallback is not None:
        values, why = formulation.hint(problem, d, variables, warm_start, objective)
        if values is not None:
            why = be.hint(values)
        if why:
            notes.append(why)
    stats: dict[str, Any] = {"backend": be.name, "groups": len(d.groups), "slots": d.slots,
                             "cost_nodes": len(d.cost_nodes), "time_scale": d.scaling.scale,
                             "time_scale_exact": d.scaling.exact, **be.size,
                             "build_s": time.perf_counter() - start, "gap_allowed": options.gap,
                             **formulation.model_stats(variables, 1.0 / d.scaling.scale)}
    if formulation.stages is not None:
        stats["stages"] = formulation.stages
    if d.alone:   # rows rounded to admit every plan that fits (.data._admitting_memory)
        stats[ADMITTING] = True
    if start_bound > 0:
        stats["start_bound"] = start_bound
    raw = run_solver(be, options, progress, 1.0 / d.scaling.scale, fallback, simple)
    if d.alone:
        raw, cut = refitted(be, raw, options, progress, 1.0 / d.scaling.scale, fallback, simple,
                            cut_over_memory(formulation, problem, d, variables, be))
        if cut:
            stats["memory_plans_cut"] = cut
            notes.append(memory_cut_note(cut, be.name))
    fallback = checked_claim(be, raw, fallback, check, verify, notes)
    ctx = Context(method=f"milp-{be.name}", objective_kind=objective, contiguity=formulation.contiguity,
                  start=start, unit=1.0 / d.scaling.scale, exact_data=d.scaling.exact,
                  simple_bound=simple, exact_feasibility=d.memory_exact, notes=notes, stats=stats,
                  bound_name=bound_name, data_notes=data)

    return conclude(ctx, be, raw, lambda value: formulation.decode(problem, d, variables, value), verify, fallback)
