"""``cp-sat``: native CP-SAT (``ortools.sat.python.cp_model``).

Integer data only: the formulation scales its data to integers before building and tells the
backend so (:attr:`Backend.integer_only`); a non-integer coefficient is a ``ValueError``,
never rounded here. Enforced rows use CP-SAT's enforcement literals (no big-M); CP-SAT leaves
them out of its LP relaxation unless the formulation asks for the full relaxation
(:attr:`Backend.full_relaxation`: linearization level 2); a formulation may also turn off
CP-SAT's own cutting planes (:attr:`Backend.solver_cuts`: cut level 0).

CP-SAT's presolve is switched off: in OR-Tools 9.15 it returned wrong answers on these models
(on the published InceptionV3 and ResNet-50 layer graphs: "optimal" 125.93 where the DP's
verified 122.76 was the hint; "infeasible" under a cutoff the hinted plan meets), while every
run without it was right.

Overflow. CP-SAT checks only that each row's activity ``Σ |a_i|·max|x_i|`` fits in 64 bits,
but some of its reasoning multiplies one term's coefficient by *another* variable's bound.
In OR-Tools 9.15, with presolve off, the detection of "``T`` is at least one of these
expressions" from enforced two-variable rows (``c·x − T ≤ 0`` if ``y``: the load rows of a
slot that can hold only one group) answers INFEASIBLE on feasible models once ``|c|·max T``
reaches ``2^63`` (``auto_detect_greater_than_at_least_one_of`` off, the same models are
solved right). The backend therefore records, row by row, the largest of
``max_i |a_i| · max_j max|x_j|`` and the row's activity (:attr:`CpSatBackend.overflow_risk`);
the formulations scale their data to keep it within :data:`SAFE_PRODUCT`
(:data:`placement.solvers.milp.driver.DEFAULT_MAX_PRODUCT`), and beyond it CP-SAT's proofs
are not used: INFEASIBLE becomes ``no_solution``, and an OPTIMAL or
FEASIBLE answer keeps its values but loses its bound (``feasible``).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, ClassVar

from placement.errors import unwritable
from placement.solvers.milp.backends.base import Backend, RawResult, SolveOptions, Terms, upper_side_only

#: Beyond this product of a coefficient and a bound in one row, CP-SAT's proofs are not trusted
#: (see the module docstring): half of the ``2^63`` at which they went wrong, and the bound
#: CP-SAT itself keeps a row's activity within.
SAFE_PRODUCT = 2 ** 62


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
        self._largest: dict[int, int] = {}   # variable index -> max |value| in its domain
        self.overflow_risk = 0                # see the module docstring

    def _new(self, var: Any, largest: int) -> Any:
        self._largest[var.Index()] = abs(largest)
        return var

    def _note_row(self, coefficients: list[int], variables: list[Any], rhs: int = 0) -> None:
        """Raise :attr:`overflow_risk` to this row's largest coefficient-times-bound product."""
        if not coefficients:
            return
        largest = self._largest
        bounds = [largest.get(var.Index(), 1) for var in variables]
        magnitudes = [abs(a) for a in coefficients]
        cross = max(magnitudes) * max(bounds)
        activity = sum(a * b for a, b in zip(magnitudes, bounds)) + abs(rhs)
        self.overflow_risk = max(self.overflow_risk, cross, activity)

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
            return self._new(self.model.NewBoolVar(name), 1)
        return self._new(self.model.NewIntVar(fixed, fixed, name), fixed)

    def num_var(self, ub: float, name: str) -> Any:
        self._size["variables"] += 1
        top = self._int(math.ceil(ub))
        return self._new(self.model.NewIntVar(0, top, name), top)

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        self.tick()
        coefficients = [self._int(a) for a, _ in terms]
        variables = [v for _, v in terms]
        if enforce is not None:
            upper_side_only(lo)
        low = self._int(math.ceil(lo)) if math.isfinite(lo) else None
        high = self._int(math.floor(hi)) if math.isfinite(hi) else None
        if low is None and high is None:
            return
        self._size["rows"] += (low is not None) + (high is not None)
        self._note_row(coefficients, variables, max(abs(low or 0), abs(high or 0)))
        expr = self._cp.LinearExpr.WeightedSum(variables, coefficients)
        if low is not None:
            self.model.Add(expr >= low)
        if high is not None:
            ct = self.model.Add(expr <= high)
            if enforce is not None:
                ct.OnlyEnforceIf(enforce)

    def minimize(self, terms: Terms) -> None:
        coefficients = [self._int(a) for a, _ in terms]
        variables = [v for _, v in terms]
        self._note_row(coefficients, variables)
        self.model.Minimize(self._cp.LinearExpr.WeightedSum(variables, coefficients))

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
        if self.full_relaxation:
            solver.parameters.linearization_level = 2
        if not self.solver_cuts:
            solver.parameters.cut_level = 0
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
        try:
            with contextlib.ExitStack() as stack:
                if options.log_path is not None:
                    log = stack.enter_context(open(options.log_path, "a", encoding="utf-8"))
                    solver.parameters.log_search_progress = True
                    solver.parameters.log_to_stdout = False
                    solver.log_callback = lambda line: log.write(line + "\n")
                start = time.perf_counter()
                code = solver.Solve(self.model, self._progress(options))
                wall = time.perf_counter() - start
        except OSError as exc:
            if options.log_path is None:
                raise
            raise unwritable(options.log_path, exc, "log") from None   # the log could not be written (a full device)
        status = solver.StatusName(code)
        word = self.status_word(status)
        stats = {"solver_status": status, "branches": solver.NumBranches(), "conflicts": solver.NumConflicts(),
                 "overflow_risk_log2": round(math.log2(self.overflow_risk), 2) if self.overflow_risk else 0.0}
        trusted = self.overflow_risk <= SAFE_PRODUCT
        doubt = (f"a coefficient times a bound reaches 2^{math.log2(self.overflow_risk):.1f} in the CP-SAT model, "
                 "beyond what it handles exactly: its proofs are not used") if not trusted else ""
        if word in ("optimal", "feasible"):
            if trusted:
                return RawResult(word, solver.ObjectiveValue(), solver.BestObjectiveBound(), solver.Value, wall,
                                 stats=stats)
            return RawResult("feasible", solver.ObjectiveValue(), None, solver.Value, wall, message=doubt, stats=stats)
        if word == "infeasible":
            if not trusted:
                return RawResult("no_solution", wall_s=wall, stats=stats, message=doubt)
            return RawResult(word, wall_s=wall, stats=stats)
        if word == "no_solution":
            return RawResult(word, bound=solver.BestObjectiveBound(), wall_s=wall, stats=stats,
                             message=f"CP-SAT stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"CP-SAT returned {status}: {self.model.Validate()}")
