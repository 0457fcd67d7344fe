"""``highs``: HiGHS behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`), with five workarounds.

* No hint: OR-Tools' wrapper crashes when HiGHS is given one, so :meth:`HighsBackend.hint`
  only says so.
* HiGHS sometimes rejects its own optimum after presolve ("claims optimality, but with primal
  infeasibilities"), and OR-Tools then says ``NOT_SOLVED`` at once; without presolve it does
  not. Such a run, well before the time limit, is retried without presolve in the time left.
* OR-Tools does not hand HiGHS its relative gap: HiGHS stopped at its own default (0.01%)
  and OR-Tools called that optimal. The gap goes to HiGHS as its own ``mip_rel_gap``, with
  ``mip_abs_gap`` 0.
* OR-Tools reports the incumbent's value as HiGHS's best bound. The bound is read from HiGHS's
  log instead (its last ``Dual bound`` line); a run whose log has none has no bound, so it
  proves nothing.
* HiGHS 1.12's probing in presolve cut the optimum off a 22-column split model (one CPU-only
  layer, one layer of 949 on an accelerator or 1 on a CPU, a class too large for an
  accelerator's memory: HiGHS proved 950.4 optimal where CBC, SCIP and CP-SAT find 3), so it
  runs without probing (presolve rule 15, :data:`HighsBackend.fixed_parameters`). On the layer
  graphs this made its proofs up to 2-3 times slower (0.3 s to 0.9 s on BERT-24 ``stages``,
  12 s to 17 s on BERT-24 training ``sets``).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from placement.solvers.milp.backends.base import RawResult, SolveOptions
from placement.solvers.milp.backends.linear_solver import LinearSolverBackend

#: the summary line of a HiGHS MIP run that gives its proven bound
DUAL_BOUND = re.compile(r"^\s*Dual bound\s+(\S+)\s*$", re.MULTILINE)


def logged_dual_bound(log_text: str) -> float | None:
    """The last ``Dual bound`` that HiGHS wrote in ``log_text`` (model units), or ``None``."""
    found = DUAL_BOUND.findall(log_text)
    if not found:
        return None
    try:
        return float(found[-1])
    except ValueError:
        return None


class HighsBackend(LinearSolverBackend):
    """HiGHS through ``pywraplp``: no hint, a retry without presolve, its own gap parameters and its
    bound from its log (see the module docstring)."""

    name = "highs"
    solver_id = "HIGHS"
    seed_parameter = "random_seed"
    warm_start = False
    threads = True
    reads_log = True

    #: no probing in presolve (rule 15; module docstring)
    fixed_parameters = {"presolve_rule_off": str(1 << 15)}

    def hint(self, values: dict[Any, float]) -> str:
        return "no warm start for HiGHS (OR-Tools' wrapper crashes on a hint)"

    def gap_parameters(self, gap: float) -> dict[str, str]:
        return {"mip_rel_gap": repr(float(gap)), "mip_abs_gap": "0"}

    def rerun(self, code: int, wall: float, options: SolveOptions) -> str:
        if code != self._lp.Solver.NOT_SOLVED or wall >= 0.5 * options.time_limit:
            return ""
        self.set_parameters(options.seed, presolve="off", **self.gap_parameters(options.gap))
        return "HiGHS retried without presolve"

    def audit(self, raw: RawResult, log_text: str, options: SolveOptions) -> RawResult:
        bound = logged_dual_bound(log_text)
        usable = bound is not None and math.isfinite(bound)
        if raw.status in ("optimal", "feasible"):
            return replace(raw, bound=bound / self.objective_scale if usable else 0.0)
        if raw.status == "no_solution" and usable:
            return replace(raw, bound=bound / self.objective_scale)
        return raw
