"""A HiGHS proof of optimality, confirmed by CP-SAT before it is reported.

HiGHS 1.12 (through OR-Tools' ``pywraplp``) proves non-optimal plans optimal on small models, its
bound equal to its plan's value, whatever its settings: on random split-backward instances of 7
nodes it proved 2.3 where 2.25 exists (CBC, SCIP and CP-SAT find 2.25 on the same model), about
3 runs in 1,000; its own feasibility tolerances of 1e-9 avoid a false proof of a latency plan
(:mod:`.backends.highs`) and cause this one, and no setting avoids both. So where HiGHS claims
optimality, the same model is solved by CP-SAT (exact integer arithmetic) from HiGHS's plan, within
what is left of the time limit (at least :data:`CONFIRM_SECONDS`); a plan proven optimal by a bound found
without HiGHS (its value meets the DP's ``stages`` optimum or the instance's lower bound) needs none:

* CP-SAT proves the same value: ``optimal``, confirmed (a note says so);
* CP-SAT finds a better plan: that plan, with CP-SAT's status and bound (HiGHS's claim refuted);
* CP-SAT proves neither (it stops at the time limit, or its model, on memory it had to round, finds
  nothing better): HiGHS's plan, ``feasible``, with CP-SAT's bound where it proved one, and a note with
  CP-SAT's status and message.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

from placement.plan import Plan
from placement.solution import Solution, Status

#: the backends whose claims of optimality are confirmed
UNCONFIRMED = frozenset({"highs"})
#: the backend that confirms them
CONFIRMING = "cp-sat"
#: the least seconds the confirmation gets, past the deadline if need be
CONFIRM_SECONDS = 2.0
#: relative difference under which the two solvers' values agree
AGREEMENT = 1e-9


def confirm_deadline(deadline: float | None, time_limit: float, started: float) -> float:
    """When the confirmation must end: the solve's deadline (``time_limit`` from ``started`` without one),
    or :data:`CONFIRM_SECONDS` from now if that is later."""
    end = started + time_limit if deadline is None else deadline
    return max(end, time.perf_counter() + CONFIRM_SECONDS)


def confirmed(backend: str, first: Solution, rerun: Callable[[Plan], Solution]) -> Solution:
    """``first`` (a solve on ``backend``), or where ``backend`` is one of :data:`UNCONFIRMED` and claims
    optimality, the outcome of ``rerun`` (the same request on CP-SAT, from the given plan) as the module
    docstring says."""
    if (backend not in UNCONFIRMED or first.status is not Status.OPTIMAL or first.plan is None
            or "proven_by" in first.stats):   # proven by a bound of its own (the DP's optimum, ...), not the solver
        return first
    second = rerun(first.plan)

    def noted(solution: Solution, note: str, **changes) -> Solution:
        message = "; ".join(m for m in (solution.message, note) if m)
        stats = {**solution.stats, "confirmed_by": CONFIRMING, "confirmation": second.status.value}
        return replace(solution, message=message, stats=stats, **changes)

    claimed = first.objective
    better = (second.plan is not None and math.isfinite(second.objective)
              and second.objective < claimed - AGREEMENT * max(abs(claimed), 1e-300))
    if better:
        return noted(second, f"{backend}'s proof of {claimed:.10g} refuted: {CONFIRMING} found {second.objective:.10g}"
                             f" from its plan", method=first.method)
    if second.status is Status.OPTIMAL:
        return noted(first, f"{backend}'s proof confirmed by {CONFIRMING}")
    bound = max(0.0, min(claimed, second.bound)) if second.plan is not None else 0.0
    why = f"(it ended {second.status.value}" + (f": {second.message})" if second.message else ")")
    return noted(first, f"{backend}'s claim of optimality not confirmed: {CONFIRMING} did not prove it {why}, so it "
                        "is not relied on", status=Status.FEASIBLE, bound=bound)


__all__ = ["CONFIRMING", "CONFIRM_SECONDS", "UNCONFIRMED", "confirm_deadline", "confirmed"]
