"""``cp-sat``: native CP-SAT (``ortools.sat.python.cp_model``).

Integer data only: the formulation scales its data to integers before building and tells the
backend so (:attr:`Backend.integer_only`); a non-integer coefficient is a ``ValueError``,
never rounded here. Enforced rows use CP-SAT's enforcement literals (no big-M).

CP-SAT's presolve is switched off: in OR-Tools 9.15 it returned wrong answers on these models
(on the published InceptionV3 and ResNet-50 layer graphs: "optimal" 125.93 where the DP's
verified 122.76 was the hint; "infeasible" under a cutoff the hinted plan meets), while every
run without it was right.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, ClassVar

from placement.solvers.milp.backends.base import Backend, RawResult, SolveOptions, Terms, upper_side_only


class CpSatBackend(Backend):
    """Native CP-SAT; every coefficient and bound must be an integer."""

    name = "cp-sat"
    integer_only = True
    warm_start = True
    threads = True
    package = "ortools"
    package_label = "OR-Tools"
    optimality_tolerance = 1e-9
    #: CpSolverStatus names; UNKNOWN is a stop (time limit) before any solution
    STATUS: ClassVar[dict[str, str]] = {"OPTIMAL": "optimal", "FEASIBLE": "feasible", "INFEASIBLE": "infeasible",
                                        "UNKNOWN": "no_solution", "MODEL_INVALID": "error"}

    @classmethod
    def availability(cls, argument: str | None = None) -> str | None:
        return cls.import_problem("ortools.sat.python.cp_model")

    def __init__(self) -> None:
        from ortools.sat.python import cp_model

        self._cp = cp_model
        self.model = cp_model.CpModel()
        self._size = {"variables": 0, "binaries": 0, "rows": 0}

    @staticmethod
    def _int(a: float) -> int:
        if isinstance(a, int):
            return a
        if not float(a).is_integer():
            raise ValueError(f"CP-SAT needs integer coefficients, got {a!r} (scale the data first)")
        return int(a)

    @property
    def size(self) -> dict[str, int]:
        return dict(self._size)

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        self._size["variables"] += 1
        if fixed is None:
            self._size["binaries"] += 1
            return self.model.NewBoolVar(name)
        return self.model.NewIntVar(fixed, fixed, name)

    def num_var(self, ub: float, name: str) -> Any:
        self._size["variables"] += 1
        return self.model.NewIntVar(0, self._int(math.ceil(ub)), name)

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        expr = sum(self._int(a) * v for a, v in terms)
        if enforce is not None:
            upper_side_only(lo)
        if math.isfinite(lo):
            self._size["rows"] += 1
            self.model.Add(expr >= self._int(math.ceil(lo)))
        if math.isfinite(hi):
            self._size["rows"] += 1
            ct = self.model.Add(expr <= self._int(math.floor(hi)))
            if enforce is not None:
                ct.OnlyEnforceIf(enforce)

    def minimize(self, terms: Terms) -> None:
        self.model.Minimize(sum(self._int(a) * v for a, v in terms))

    def hint(self, values: dict[Any, float]) -> str:
        for var, val in values.items():
            self.model.AddHint(var, round(val))
        return ""

    def _solver(self, options: SolveOptions) -> Any:
        solver = self._cp.CpSolver()
        solver.parameters.max_time_in_seconds = float(options.time_limit)
        solver.parameters.num_workers = max(1, int(options.threads))
        solver.parameters.random_seed = int(options.seed)
        solver.parameters.relative_gap_limit = float(options.gap)
        solver.parameters.cp_model_presolve = False  # see the module docstring
        return solver

    def _progress(self, options: SolveOptions) -> Any:
        """A solution callback reporting each improving solution, or ``None``."""
        if options.on_solution is None:
            return None
        report = options.on_solution

        class _Progress(self._cp.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                report(self.ObjectiveValue(), self.BestObjectiveBound(), self.WallTime())

        return _Progress()

    def solve(self, options: SolveOptions) -> RawResult:
        solver = self._solver(options)
        with contextlib.ExitStack() as stack:
            if options.log_path is not None:
                log = stack.enter_context(open(options.log_path, "a", encoding="utf-8"))
                solver.parameters.log_search_progress = True
                solver.parameters.log_to_stdout = False
                solver.log_callback = lambda line: log.write(line + "\n")
            start = time.perf_counter()
            code = solver.Solve(self.model, self._progress(options))
            wall = time.perf_counter() - start
        status = solver.StatusName(code)
        word = self.status_word(status)
        stats = {"solver_status": status, "branches": solver.NumBranches(), "conflicts": solver.NumConflicts()}
        if word in ("optimal", "feasible"):
            return RawResult(word, solver.ObjectiveValue(), solver.BestObjectiveBound(), solver.Value, wall,
                             stats=stats)
        if word == "infeasible":
            return RawResult(word, wall_s=wall, stats=stats)
        if word == "no_solution":
            return RawResult(word, bound=solver.BestObjectiveBound(), wall_s=wall, stats=stats,
                             message=f"CP-SAT stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"CP-SAT returned {status}: {self.model.Validate()}")
