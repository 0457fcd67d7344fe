"""``cbc``: COIN-OR CBC behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`).

OR-Tools passes CBC no parameters, so CBC's own objective analysis, which can take a continuous
objective for one that moves in whole steps and then prune the optimum, is defeated by the
objective's factor (:data:`~placement.solvers.milp.backends.base.CBC_OBJECTIVE_SCALE`); the
log of every run is read, and a run whose analysis still raised the step keeps its plan but
loses its claim of optimality and its bound. An infeasibility reported once CBC's own clock (CPU
seconds, faster than the wall clock with several threads) has reached the time limit is no proof
(:func:`~placement.solvers.milp.backends.base.cbc_limit_infeasible`).
"""

from __future__ import annotations

from placement.solvers.milp.backends.base import (CBC_OBJECTIVE_SCALE, NO_DIRECTORY_HINT, RawResult, SolveOptions,
                                                  cbc_limit_infeasible, distrust_cbc, working_directory_problem)
from placement.solvers.milp.backends.linear_solver import LinearSolverBackend


class CbcBackend(LinearSolverBackend):
    """CBC through ``pywraplp``; it takes a hint and threads, and no seed (OR-Tools passes CBC none)."""

    name = "cbc"
    solver_id = "CBC"
    warm_start = True
    threads = True
    seed = False
    objective_scale = CBC_OBJECTIVE_SCALE
    reads_log = True

    @classmethod
    def availability(cls, argument: str | None = None) -> str | None:
        return working_directory_problem() or super().availability(argument)

    @classmethod
    def install_hint(cls, argument: str | None = None) -> str:
        return NO_DIRECTORY_HINT if working_directory_problem() else super().install_hint(argument)

    def audit(self, raw: RawResult, log_text: str, options: SolveOptions) -> RawResult:
        return cbc_limit_infeasible(distrust_cbc(raw, log_text), log_text, options.time_limit, self.name)
