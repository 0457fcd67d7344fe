"""From a backend's raw answer to an honest :class:`Solution`.

Whatever the backend says, the plan is decoded from its values and verified by
the independent evaluator, and the reported objective is the verified one. The
reported bound is the larger of the solver's proven bound (valid because integer
scaling rounds data down, see :mod:`.data`) and a simple valid bound from the
instance, and never above the objective; where memory had to be rounded
conservatively the model may miss feasible plans, so only the simple bound is kept.
Statuses:

* ``optimal`` — the backend proved optimality on a model that misses no plan and
  the bound is within tolerance of the verified objective: relative 1e-9 on exact
  integer data, else 1e-6 (the floating-point solvers' tolerances, and the
  precision of data rounded to integers). The bound is then the objective;
  ``stats["solver_bound"]`` keeps the solver's own figure;
* ``feasible`` — a verified plan, with the bound and gap (a limit stopped the
  search, a ``gap`` was allowed, or the proof did not reach the verified value);
* ``infeasible`` — proven by the backend on exact data;
* ``no_solution`` — stopped without a usable plan (or infeasible on rounded data);
* ``error`` — the backend failed, or its plan failed verification.

A *fallback* plan (the verified warm start) is returned instead of the solver's when the
solver has none or a worse one; the status is then ``feasible`` unless the solver's
proof reaches the fallback's value.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from placement.plan import Plan
from placement.solution import Solution, Status
from placement.solvers.milp.backends import Backend, RawResult


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


def conclude(ctx: Context, be: Backend, raw: RawResult, decode: Callable[[Callable[[Any], float]], Plan | None],
             verify: Callable[[Plan], Verdict], fallback: tuple[Plan, float] | None = None) -> Solution:
    """The :class:`Solution` for the backend's answer ``raw``; ``fallback`` is a verified plan and its value."""
    if raw.message:
        ctx.notes.append(raw.message)
    raw_bound = 0.0 if raw.bound is None or not math.isfinite(raw.bound) else raw.bound
    solver_bound = raw_bound * ctx.unit
    ctx.stats["solver_bound"] = solver_bound
    ctx.stats["solve_s"] = raw.wall_s
    ctx.stats.update(raw.stats)
    simple = ctx.simple_bound if math.isfinite(ctx.simple_bound) else 0.0
    bound = max(solver_bound, simple) if ctx.exact_feasibility else simple

    def done(status: Status, plan: Plan | None = None, objective: float = math.inf, bound: float = bound,
             extra: str = "") -> Solution:
        message = "; ".join(ctx.notes + ([extra] if extra else []))
        return Solution(status, plan, objective, bound, ctx.method, ctx.objective_kind, ctx.contiguity,
                        runtime_s=time.perf_counter() - ctx.start, stats=ctx.stats, message=message)

    if fallback is not None and raw.status in ("infeasible", "no_solution", "error"):
        why = {"infeasible": f"{be.name} found no plan within the starting plan's value, which is one",
               "no_solution": "the solver found no better plan", "error": "the solver failed"}[raw.status]
        plan, value = fallback
        trusted = raw.status == "no_solution"
        return done(Status.FEASIBLE, plan, value, min(bound if trusted else simple, value),
                    extra=f"{why}; the starting plan is returned")
    if raw.status == "infeasible":
        if not ctx.exact_feasibility:
            return done(Status.NO_SOLUTION, extra="infeasible with rounded memory; not a proof")
        return done(Status.INFEASIBLE, bound=math.inf,
                    extra="no plan of the available devices satisfies the constraints")
    if raw.status in ("no_solution", "error"):
        return done(Status.NO_SOLUTION if raw.status == "no_solution" else Status.ERROR)
    plan = decode(raw.value)
    if plan is None and fallback is not None:
        plan, value = fallback
        return done(Status.FEASIBLE, plan, value, min(bound, value),
                    extra=f"{be.name} returned no usable values; the starting plan is returned")
    if plan is None:
        if raw.status == "feasible":
            return done(Status.NO_SOLUTION, extra=f"{be.name} reported a solution but returned no usable values")
        return done(Status.ERROR, extra=f"{be.name} reported {raw.status} but its values decode to no plan")
    verdict = verify(plan)
    if not verdict.valid:
        return done(Status.ERROR, plan, extra="decoded plan fails verification: " + "; ".join(verdict.violations[:3]))
    objective = verdict.objective
    if fallback is not None and fallback[1] < objective:  # data rounded for the solver can rank plans apart
        plan, objective = fallback
    bound = min(bound, objective)
    tolerance = be.optimality_tolerance if ctx.exact_data else max(be.optimality_tolerance, 1e-6)
    if raw.status == "optimal" and ctx.exact_feasibility and objective - bound <= tolerance * max(1.0, abs(objective)):
        return done(Status.OPTIMAL, plan, objective, objective)
    extra = ""
    if raw.status == "optimal" and not ctx.exact_feasibility:
        extra = "optimal on conservatively rounded memory only: not a proof"
    elif raw.status == "optimal":
        extra = ("stopped within the allowed gap" if ctx.stats.get("gap_allowed")
                 else "solver claimed optimal, but the proven bound leaves a gap")
    return done(Status.FEASIBLE, plan, objective, bound, extra)
