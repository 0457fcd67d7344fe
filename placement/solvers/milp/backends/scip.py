"""``scip``: SCIP behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`). SCIP's own Ctrl-C handler is
off (``misc/catchctrlc``): it stopped the search and returned an ordinary result; Ctrl-C is the
caller's (:mod:`..interrupt`), which stops SCIP through OR-Tools."""

from __future__ import annotations

from placement.solvers.milp.backends.linear_solver import LinearSolverBackend


class ScipBackend(LinearSolverBackend):
    """SCIP through ``pywraplp``; the seed shifts SCIP's randomisation."""

    name = "scip"
    solver_id = "SCIP"
    seed_parameter = "randomization/randomseedshift"
    warm_start = True
    threads = True

    def set_parameters(self, seed: int, **extra: str) -> None:
        super().set_parameters(seed, **{"misc/catchctrlc": "FALSE", **extra})
