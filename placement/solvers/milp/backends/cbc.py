"""``cbc``: COIN-OR CBC behind OR-Tools' ``pywraplp`` (see :mod:`.linear_solver`)."""

from __future__ import annotations

from placement.solvers.milp.backends.linear_solver import LinearSolverBackend


class CbcBackend(LinearSolverBackend):
    """CBC through ``pywraplp``; it takes a hint and threads, and no seed."""

    name = "cbc"
    solver_id = "CBC"
    warm_start = True
    threads = True
