"""``highs``: HiGHS behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`), with four workarounds.

* No hint: OR-Tools' wrapper crashes when HiGHS is given one, so :meth:`HighsBackend.hint`
  only says so.
* OR-Tools does not hand HiGHS its relative gap: HiGHS stopped at its own default (0.01%)
  and OR-Tools called that optimal. The gap goes to HiGHS as its own ``mip_rel_gap``, with
  ``mip_abs_gap`` 0.
* OR-Tools reports the incumbent's value as HiGHS's best bound. The bound is read from HiGHS's
  log instead (its last ``Dual bound`` line); a run whose log has none has no bound, so it
  proves nothing.
* No presolve (:data:`HighsBackend.fixed_parameters`). HiGHS 1.12's presolve cut the optimum
  off small split models and proved worse plans optimal, where CBC, SCIP and CP-SAT find the
  optimum on the same model: 950.4 for 3 on 4 layers (a CPU-only layer, one of 949 on an
  accelerator or 1 on a CPU, a class too large for an accelerator's memory; its probing), 456.3
  for 455.3 on 5 (with probing off; every rule HiGHS lets one switch off, off, still did). It also
  rejected its own optimum after presolve now and then ("claims optimality, but with primal
  infeasibilities", ``NOT_SOLVED`` at once). On the layer graphs its proofs take longer without
  presolve: 0.3 s to 1.1 s on BERT-24 ``stages``, 1.2 s to 7.4 s on ResNet-50 ``stages``,
  2.5 s to 4.1 s on BERT-24 ``none``.
* No cutoff row (:attr:`HighsBackend.cutoff_row`): with the row ``L ≤ 7.1·(1 + 1e-9)`` of a
  starting plan it found that plan itself and closed its bound at it, where a plan of 7.0
  exists (two accelerator types; CBC, SCIP, CP-SAT and HiGHS without the row find 7.0). The
  starting plan is still the fallback; the hint is not given (above).
* Feasibility tolerances of 1e-9 (its defaults: 1e-6 for integrality, 1e-7 primal and dual).
  With the defaults it proved a latency plan of 9.46 optimal where 7.46 exists (two calls per
  accelerator, a 6-node chain with a colour class and memory 2.2; CBC, SCIP and CP-SAT find 7.46
  on the same model). They cause other false proofs (:mod:`..confirm`, which has CP-SAT confirm
  every HiGHS proof before it is reported).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from placement.solvers.milp.backends.base import RawResult, SolveOptions
from placement.solvers.milp.backends.linear_solver import LinearSolverBackend

#: what HiGHS logs where it refuses its own optimum (then "Setting model status to Solve error")
REJECTED_OPTIMUM = "MIP solver claims optimality, but with"

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
    """HiGHS through ``pywraplp``: no hint, no presolve, its own gap parameters and its bound from its
    log (see the module docstring)."""

    name = "highs"
    solver_id = "HIGHS"
    seed_parameter = "random_seed"
    warm_start = False
    threads = True
    reads_log = True
    #: no row bounding the objective by a starting plan's value (module docstring)
    cutoff_row = False

    #: no presolve, and feasibility tolerances of 1e-9 (module docstring)
    fixed_parameters = {"presolve": "off", "mip_feasibility_tolerance": "1e-9", "primal_feasibility_tolerance": "1e-9",
                        "dual_feasibility_tolerance": "1e-9"}

    def hint(self, values: dict[Any, float]) -> str:
        return ("HiGHS is not given the starting plan (OR-Tools' wrapper crashes on a hint): it is only "
                "returned where HiGHS finds no better one")

    def gap_parameters(self, gap: float) -> dict[str, str]:
        return {"mip_rel_gap": repr(float(gap)), "mip_abs_gap": "0"}

    def audit(self, raw: RawResult, log_text: str, options: SolveOptions) -> RawResult:
        bound = logged_dual_bound(log_text)
        usable = bound is not None and math.isfinite(bound)
        if raw.status == "error" and REJECTED_OPTIMUM in log_text:   # say what the bare status code hides
            raw = replace(raw, message=raw.message.replace(
                f"{self.name} returned status NOT_SOLVED",
                f"{self.name} rejected the optimum it found (a row broken by more than its feasibility tolerance, "
                f"1e-9) and returned status NOT_SOLVED; another backend may solve this model"))
        if raw.status in ("optimal", "feasible"):
            return replace(raw, bound=bound / self.objective_scale if usable else 0.0)
        if raw.status == "no_solution" and usable:
            return replace(raw, bound=bound / self.objective_scale)
        return raw
