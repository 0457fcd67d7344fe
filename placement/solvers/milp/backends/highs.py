"""``highs``: HiGHS behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`), with two workarounds.

* No hint: OR-Tools' wrapper crashes when HiGHS is given one, so :meth:`HighsBackend.hint`
  only says so.
* HiGHS sometimes rejects its own optimum after presolve ("claims optimality, but with primal
  infeasibilities"), and OR-Tools then says ``NOT_SOLVED`` at once; without presolve it does
  not. Such a run, well before the time limit, is retried without presolve in the time left.
"""

from __future__ import annotations

from typing import Any

from placement.solvers.milp.backends.base import SolveOptions
from placement.solvers.milp.backends.linear_solver import LinearSolverBackend


class HighsBackend(LinearSolverBackend):
    """HiGHS through ``pywraplp``: no hint, and a retry without presolve (see the module docstring)."""

    name = "highs"
    solver_id = "HIGHS"
    seed_parameter = "random_seed"
    warm_start = False
    threads = True

    def hint(self, values: dict[Any, float]) -> str:
        return "no warm start for HiGHS (OR-Tools' wrapper crashes on a hint)"

    def rerun(self, code: int, wall: float, options: SolveOptions) -> str:
        if code != self._lp.Solver.NOT_SOLVED or wall >= 0.5 * options.time_limit:
            return ""
        self.set_parameters(options.seed, presolve="off")
        return "HiGHS retried without presolve"
