"""From a backend's raw answer to an honest :class:`Solution`.

Whatever the backend says, the plan is decoded from its values and verified by
the independent evaluator, and the reported objective is the verified one. The
reported bound is the larger of the solver's proven bound (valid because integer
scaling rounds data down, see :mod:`.data`) and a simple valid bound from the
instance, and never above the objective; where memory had to be rounded
conservatively the model may miss feasible plans, so only the simple bound is kept.
Statuses:

* ``optimal`` — a certificate: the backend proved optimality on a model that misses no plan,
  its incumbent is the verified value of the plan it returned (on exact data), within the
  backend's documented tolerance (:attr:`~.backends.base.Backend.optimality_tolerance`, at
  least 1e-6 on data rounded to integers) times ``|value|`` or one model unit, whichever is larger,
  and its bound meets that value within the tolerance times ``|value|``. The bound is then the
  objective (on rounded data, optimal within that tolerance);
  ``stats["solver_bound"]`` keeps the solver's own figure. A claim that fails a check is
  reported ``feasible`` with the reason in the message (:func:`certificate_doubt`);
* ``feasible`` — a verified plan, with the bound and gap (a limit stopped the
  search, a ``gap`` was allowed, or the proof did not reach the verified value); a
  solver bound above the verified value of a plan is refuted and replaced by the simple one;
* ``infeasible`` — proven by an integer backend (CP-SAT) on exact data (a backend reports
  ``infeasible`` only with its solver's proof, never for a stop at its time limit: :mod:`.backends`).
  A floating-point solver's infeasibility rests on its tolerances (PuLP's CBC, its cuts cutting off
  the one plan of a model whose memory row was tight, called it infeasible): ``no_solution``;
* ``no_solution`` — stopped without a usable plan (or infeasible on rounded data);
* ``error`` — the backend failed, or its plan failed verification and there is no fallback.

A *fallback* plan (the verified warm start) is returned instead of the solver's when the
solver has none or a worse one; the status is then ``feasible`` unless the solver's
proof reaches the fallback's value.

A floating-point backend's tolerances are absolute (about 1e-6 of a model unit). Its proof
and its bound are used only when the value it worked at (the larger of its incumbent's and its
bound, else the fallback's) is at least :data:`FLOAT_RESOLUTION` model unit
(:func:`coarse_scale`), where they stay within the 1e-6 relative that its claims are held to;
below it they do not (a plan 48% above the optimum was proven "optimal" where accelerator times
were 1e-9 of the CPUs').
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from placement.plan import Plan
from placement.problem.bounds import meets
from placement.solution import Solution, Status
from placement.solvers.milp.backends import Backend, RawResult
from placement.solvers.milp.interrupt import SearchInterrupted


#: the least value, in model units, at which a floating-point backend's proof and bound are used
FLOAT_RESOLUTION = 1.0
#: the stats key saying that an integer backend's memory rows were rounded to admit every plan that fits
#: (:func:`placement.solvers.milp.data._admitting_memory`): its plan may fail verification, its bound holds
ADMITTING = "memory_rounded_to_admit"


@dataclass(frozen=True)
class Verdict:
    """The evaluator's word on a decoded plan: valid or not (with reasons), and its objective."""

    valid: bool
    objective: float
    violations: tuple[str, ...] = ()


@dataclass
class Context:
    """What a formulation knows when the backend returns."""

    method: str
    objective_kind: str
    contiguity: str
    start: float                    # perf_counter() at the start of the solve
    unit: float                     # original units per model unit of the objective
    exact_data: bool                # False when times were rounded down to integers
    simple_bound: float             # a valid lower bound from the instance, original units
    exact_feasibility: bool         # False when memory was rounded (bounds and infeasibility are then no proof)
    notes: list[str]
    stats: dict[str, Any]
    #: what ``simple_bound`` is, for the message of a plan that meets it
    bound_name: str = "the instance's lower bound"
    #: the notes (among ``notes``) on the data the solver was given: left out where it was not run
    data_notes: tuple[str, ...] = ()


def conclude(ctx: Context, be: Backend, raw: RawResult, decode: Callable[[Callable[[Any], float]], Plan | None],
             verify: Callable[[Plan], Verdict], fallback: tuple[Plan, float] | None = None) -> Solution:
    """The :class:`Solution` for the backend's answer ``raw``; ``fallback`` is a verified plan and its value.
    An answer that Ctrl-C ended (``raw.interrupted``) is concluded as a stop at the time limit, and the
    Solution goes on in a :class:`.interrupt.SearchInterrupted` instead of being returned."""
    solution = _concluded(ctx, be, raw, decode, verify, fallback)
    if raw.interrupted:
        raise SearchInterrupted(raw, solution)
    return solution


def _concluded(ctx: Context, be: Backend, raw: RawResult, decode: Callable[[Callable[[Any], float]], Plan | None],
               verify: Callable[[Plan], Verdict], fallback: tuple[Plan, float] | None) -> Solution:
    if raw.message:
        ctx.notes.append(raw.message)
    raw_bound = 0.0 if raw.bound is None or not math.isfinite(raw.bound) else raw.bound
    solver_bound = raw_bound * ctx.unit
    ctx.stats["solver_bound"] = solver_bound
    ctx.stats["solve_s"] = raw.wall_s
    ctx.stats.update(raw.stats)
    simple = ctx.simple_bound if math.isfinite(ctx.simple_bound) else 0.0
    coarse = coarse_scale(be, raw, ctx, fallback)
    if coarse:
        ctx.notes.append(coarse)
        raw = replace(raw, status="feasible" if raw.status == "optimal" else raw.status)
    bound = max(solver_bound, simple) if ctx.exact_feasibility and not coarse else simple

    def done(status: Status, plan: Plan | None = None, objective: float = math.inf, bound: float = bound,
             extra: str = "") -> Solution:
        message = "; ".join(ctx.notes + ([extra] if extra else []))
        if status is Status.OPTIMAL and meets(simple, objective):   # proven by a bound the solver did not find
            ctx.stats["proven_by"] = ctx.bound_name
        return Solution(status, plan, objective, bound, ctx.method, ctx.objective_kind, ctx.contiguity,
                        runtime_s=time.perf_counter() - ctx.start, stats=ctx.stats, message=message)

    if fallback is not None and raw.status in ("infeasible", "no_solution", "error", "skipped"):
        why = {"infeasible": f"{be.name} found no plan within the starting plan's value, which is one",
               "no_solution": "" if raw.stopped or not raw.ran else "the solver found no better plan",
               "error": "the solver failed",
               "skipped": "the solver was not run"}[raw.status]
        if raw.status == "skipped":   # how its data were rounded says nothing of this answer
            ctx.notes[:] = [note for note in ctx.notes if note not in ctx.data_notes]
        plan, value = fallback
        if meets(simple, value):
            return done(Status.OPTIMAL, plan, value, value,
                        extra="; ".join(filter(None, (why, f"the starting plan meets {ctx.bound_name}"))))
        trusted = raw.status == "no_solution" and raw.ran and not raw.stopped
        return done(Status.FEASIBLE, plan, value, unrefuted(bound if trusted else simple, simple, value, be, ctx.unit),
                    extra="; ".join(filter(None, (why, "the starting plan is returned"))))
    if raw.status == "infeasible":
        if not ctx.exact_feasibility:
            return done(Status.NO_SOLUTION, extra="infeasible with rounded memory; not a proof")
        if not be.integer_only:
            return done(Status.NO_SOLUTION, extra=f"{be.name} reported infeasible, which rests on a floating-point "
                                                  "solver's tolerances: not a proof (CP-SAT or the DP gives one)")
        return done(Status.INFEASIBLE, bound=math.inf,
                    extra="no plan of the available devices satisfies the constraints")
    if raw.status in ("no_solution", "error"):
        return done(Status.NO_SOLUTION if raw.status == "no_solution" else Status.ERROR)
    plan = decode(raw.value)
    if plan is None and fallback is not None:
        plan, value = fallback
        return done(Status.FEASIBLE, plan, value, unrefuted(bound, simple, value, be, ctx.unit),
                    extra=f"{be.name} returned no usable values; the starting plan is returned")
    if plan is None:
        if raw.status == "feasible":
            return done(Status.NO_SOLUTION, extra=f"{be.name} reported a solution but returned no usable values")
        return done(Status.ERROR, extra=f"{be.name} reported {raw.status} but its values decode to no plan")
    verdict = verify(plan)
    if not verdict.valid:
        why = "decoded plan fails verification: " + "; ".join(verdict.violations[:3])
        admitting = be.integer_only and ctx.stats.get(ADMITTING, False)
        if admitting:   # expected of rows that admit every plan that fits: their bound holds
            why += (f"; {be.name}'s memory rows, rounded to admit every plan that fits, pass a device over its "
                    "bound by less than their rounding")
        if fallback is not None:   # e.g. over a memory bound by the sizes a floating-point backend left out
            plan, value = fallback
            kept = unrefuted(bound, simple, value, be, ctx.unit) if admitting else min(simple, value)
            return done(Status.FEASIBLE, plan, value, kept, extra=f"{why}; the starting plan is returned")
        return done(Status.NO_SOLUTION if admitting else Status.ERROR, plan=None if admitting else plan,
                    extra=why)
    objective = verdict.objective
    tolerance = be.optimality_tolerance if ctx.exact_data else max(be.optimality_tolerance, 1e-6)
    slack = tolerance * max(ctx.unit, abs(objective))
    doubt = certificate_doubt(raw, ctx, objective, solver_bound, slack)
    if fallback is not None and fallback[1] < objective:  # data rounded for the solver can rank plans apart
        # a stop within an allowed gap claims no optimum, so a better plan refutes nothing there
        if (raw.status == "optimal" and not doubt and fallback[1] < objective - slack
                and not ctx.stats.get("gap_allowed")):
            doubt = (f"{be.name} claimed its plan of {objective:.10g} optimal, but one of {fallback[1]:.10g} exists: "
                     "its proof is not used")
        plan, objective = fallback
    bound = unrefuted(bound, simple, objective, be, ctx.unit)
    # the proof must meet the plan's value relatively: an absolute slack would let a bound of 0
    # "prove" a plan of 1e-9 whose instance has one of 1e-10
    if raw.status == "optimal" and not doubt and objective - bound <= tolerance * abs(objective):
        return done(Status.OPTIMAL, plan, objective, objective)
    if meets(simple, objective):
        return done(Status.OPTIMAL, plan, objective, objective, extra="the plan meets the instance's lower bound")
    extra = doubt
    if raw.status == "optimal" and not doubt:
        extra = ("stopped within the allowed gap" if ctx.stats.get("gap_allowed")
                 else "solver claimed optimal, but the proven bound leaves a gap")
    if doubt:
        ctx.stats["uncertified"] = doubt
    return done(Status.FEASIBLE, plan, objective, bound, extra)


def coarse_scale(be: Backend, raw: RawResult, ctx: Context, fallback: tuple[Plan, float] | None) -> str:
    """Why a floating-point backend's proof and bound are not used, or '': the value it worked at
    (the larger of its incumbent's and its bound, else the fallback's), in model units, is positive
    and below :data:`FLOAT_RESOLUTION` (module docstring). The bound counts too: PuLP's CBC reported
    an incumbent of 0 (its solution file rounds tiny values to 0) beside a bound of 1e-8, and
    "proved" optimal a plan of an instance whose optimum is 0."""
    if be.integer_only:
        return ""
    value = raw.objective if raw.status in ("optimal", "feasible") else None
    if (value is None or not math.isfinite(value)) and fallback is not None:
        value = fallback[1] / ctx.unit
    if value is not None and raw.bound is not None and math.isfinite(raw.bound):
        value = max(value, raw.bound)
    if value is None or not math.isfinite(value) or not 0 < value < FLOAT_RESOLUTION:
        return ""
    return (f"{be.name} worked at {value:.3g} model units, where its tolerances are not small against the "
            "objective (the times span too many orders of magnitude for one scale): its proof and bound are "
            "not used")


def unrefuted(bound: float, simple: float, value: float, be: Backend, unit: float = 1.0) -> float:
    """``bound`` capped at ``value``, the verified value of a plan; the instance's ``simple`` bound when
    ``bound`` is above ``value`` by more than the backend's tolerance, relative or of one model ``unit``
    (original units per model unit), whichever is larger (a plan refutes it)."""
    if bound > value + be.optimality_tolerance * max(unit, abs(value)):
        return min(simple, value)
    return min(bound, value)


def certificate_doubt(raw: RawResult, ctx: Context, verified: float, solver_bound: float, slack: float) -> str:
    """Why the backend's answer for its own plan (verified value ``verified``) is no certificate of
    optimality, or '' when it is one as far as these checks go.

    A claim of optimality stands only when the model decides memory exactly (not rounded
    conservatively, and for a floating-point backend in steps its tolerances tell apart), the
    backend's incumbent is the verified value of the plan it returned (on exact data: the model
    values plans exactly; within ``slack``, the backend's documented tolerance), and its bound is
    not above a value a verified plan reaches. A bound above a verified value is wrong whatever the
    status, and is then not used.
    """
    if solver_bound > verified + slack:
        return (f"{ctx.method}'s bound {solver_bound:.10g} is above the verified value {verified:.10g} of its own "
                "plan: its proof is not used")
    if raw.status != "optimal":
        return ""
    if not ctx.exact_feasibility:
        return "optimal on memory the model does not decide exactly: not a proof"
    if raw.objective is None or not math.isfinite(raw.objective):
        return f"{ctx.method} claimed optimal without an objective value: not a proof"
    incumbent = raw.objective * ctx.unit
    if ctx.exact_data and abs(incumbent - verified) > slack:
        return (f"{ctx.method}'s incumbent {incumbent:.10g} is not the verified value {verified:.10g} of its plan: "
                "its claim of optimality is not used")
    return ""
