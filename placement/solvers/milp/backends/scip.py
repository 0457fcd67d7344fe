"""``scip``: SCIP behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`)."""

from __future__ import annotations

from placement.solvers.milp.backends.linear_solver import LinearSolverBackend


class ScipBackend(LinearSolverBackend):
    """SCIP through ``pywraplp``; the seed shifts SCIP's randomisation."""

    name = "scip"
    solver_id = "SCIP"
    seed_parameter = "randomization/randomseedshift"
    warm_start = True
    threads = True
