"""MIP solvers behind OR-Tools' ``pywraplp`` wrapper: what ``cbc``, ``scip`` and ``highs`` share.

Continuous numeric variables; enforced rows are big-M rows with ``M`` computed from the variable
bounds (:class:`~placement.solvers.milp.backends.base.BigMBackend`). Each solver is a small
subclass (:mod:`.cbc`, :mod:`.scip`, :mod:`.highs`) naming its ``pywraplp`` id, its seed
parameter and its quirks.

Known defects of the wrapper (DESIGN.md §8) are handled: HiGHS gets no hint (it crashes on
one) and runs without presolve (both in :mod:`.highs`); a status of ``FEASIBLE``/``OPTIMAL``
that comes back without values is detected by the formulation (the decoded plan does not place
every node) and reported as ``no_solution``. Status codes outside the wrapper's enum (HiGHS
gives 99), ``NOT_SOLVED`` and ``ABNORMAL`` mean a stop without a solution at the time limit,
and a solver failure before it.
``INFEASIBLE`` reported as the time limit runs out is a stop too, not a proof
(:data:`~placement.solvers.milp.backends.base.LIMIT_REACHED`).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from placement.errors import SolverUnavailableError
from placement.solvers.native_output import stdout_to
from placement.solvers.milp.backends.base import (LIMIT_REACHED, BigMBackend, RawResult, SolveOptions, Terms,
                                                  append_log, limit_infeasible, package_version,
                                                  unavailable_message)


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class LinearSolverBackend(BigMBackend):
    """A MIP solver behind ``pywraplp``; subclasses set ``name``, ``solver_id`` and ``seed_parameter``."""

    package = "ortools"
    package_label = "OR-Tools"
    #: the solver's id for ``pywraplp.Solver.CreateSolver``
    solver_id: ClassVar[str] = ""
    #: the solver's own parameter that takes the random seed, if any
    seed_parameter: ClassVar[str | None] = None
    #: what the objective is multiplied by in the solver (objective and bound are divided back)
    objective_scale: ClassVar[float] = 1.0
    #: the solver's log is always written (to a scratch file when none was asked for) and handed
    #: to :meth:`audit`
    reads_log: ClassVar[bool] = False
    #: ``pywraplp.Solver`` result status names; an unlisted code reads as ``no_solution``, which
    #: :meth:`solve` turns into ``error`` unless the time limit was reached
    STATUS: ClassVar[dict[str, str]] = {
        "OPTIMAL": "optimal", "FEASIBLE": "feasible", "INFEASIBLE": "infeasible", "UNBOUNDED": "error",
        "ABNORMAL": "no_solution", "NOT_SOLVED": "no_solution", "MODEL_INVALID": "error"}

    @classmethod
    def availability(cls, argument: str | None = None) -> str | None:
        problem = cls.import_problem("ortools.linear_solver.pywraplp")
        if problem is not None:
            return problem
        from ortools.linear_solver import pywraplp

        if pywraplp.Solver.CreateSolver(cls.solver_id) is None:
            return f"OR-Tools {package_version(cls.package)} has no {cls.solver_id} solver in this build"
        return None

    @classmethod
    def detail(cls, argument: str | None = None) -> str:
        return f"{super().detail()} pywraplp"

    def __init__(self) -> None:
        from ortools.linear_solver import pywraplp

        super().__init__()
        self._lp = pywraplp
        self.solver = pywraplp.Solver.CreateSolver(self.solver_id)
        if self.solver is None:
            raise SolverUnavailableError(unavailable_message(self.name, self.availability() or "no solver"))
        self._vars: dict[int, Any] = {}

    def key(self, var: Any) -> Any:
        return var.index()

    def declared(self, var: Any, lb: float, ub: float, binary: bool) -> Any:
        self._vars[var.index()] = var
        return super().declared(var, lb, ub, binary)

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        self.tick_variable()
        lb, ub = (0, 1) if fixed is None else (fixed, fixed)
        return self.declared(self.solver.IntVar(lb, ub, name), lb, ub, fixed is None)

    def num_var(self, ub: float, name: str) -> Any:
        self.tick_variable()
        return self.declared(self.solver.NumVar(0.0, float(ub), name), 0.0, float(ub), False)

    def write_row(self, coef: dict[Any, float], lo: float, hi: float) -> None:
        inf = self.solver.infinity()
        ct = self.solver.Constraint(lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf)
        self._rows += 1
        for i, a in coef.items():
            ct.SetCoefficient(self._vars[i], float(a))

    def minimize(self, terms: Terms) -> None:
        objective = self.solver.Objective()
        for a, v in terms:
            objective.SetCoefficient(v, objective.GetCoefficient(v) + float(a) * self.objective_scale)
        objective.SetMinimization()

    def hint(self, values: dict[Any, float]) -> str:
        self.solver.SetHint(list(values), [float(v) for v in values.values()])
        return ""

    #: the solver's own parameters for every run (around its defects; none by default)
    fixed_parameters: ClassVar[dict[str, str]] = {}

    def gap_parameters(self, gap: float) -> dict[str, str]:
        """Solver-specific parameters that make it stop at the relative ``gap`` (and no sooner), for
        a solver that does not take OR-Tools' own gap parameter; none by default."""
        return {}

    def set_parameters(self, seed: int, **extra: str) -> None:
        """Give the solver its seed and ``extra`` solver-specific parameters."""
        lines = [f"{self.seed_parameter} = {int(seed)}"] if self.seed_parameter else []
        lines += [f"{key} = {value}" for key, value in extra.items()]
        if lines:
            self.solver.SetSolverSpecificParametersAsString("\n".join(lines) + "\n")

    def audit(self, raw: RawResult, log_text: str, options: SolveOptions) -> RawResult:
        """The result to report, given the raw one, the solver's log of the run (only read for
        backends with :attr:`reads_log`) and the options it ran with."""
        return raw

    def solve(self, options: SolveOptions) -> RawResult:
        if options.log_path is None and not self.reads_log:
            return self._solve(options, None)
        # the solver logs to a scratch file, read back here and then added to the user's log: a log
        # named by the user may be no regular file (reading /dev/full back never ends). The file has no
        # name, so nothing is left behind when the process ends with the solver still running (after
        # Ctrl-C, HiGHS and CBC search on to their time limit)
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as scratch:
            raw = self._solve(options, scratch.fileno())
            scratch.seek(0)
            log_text = scratch.read()
        append_log(options.log_path, log_text)
        return self.audit(raw, log_text, options)

    def interrupt(self) -> bool:
        return bool(self.solver.InterruptSolve())

    def _solve(self, options: SolveOptions, log_fd: int | None) -> RawResult:
        """Run the solver, its log written on ``log_fd`` (a file descriptor open for writing) where given."""
        lp, solver = self._lp, self.solver
        notes = []
        if options.threads != 1 and not solver.SetNumThreads(int(options.threads)):
            notes.append(f"{self.name} ignored threads={options.threads}")
        self.set_parameters(options.seed, **self.fixed_parameters, **self.gap_parameters(options.gap))
        params = lp.MPSolverParameters()
        params.SetDoubleParam(lp.MPSolverParameters.RELATIVE_MIP_GAP, float(options.gap))
        if log_fd is not None:
            solver.EnableOutput()
        asked = time.perf_counter()
        with stdout_to(log_fd):   # solves in other threads of the process take turns here
            start = time.perf_counter()
            limit = max(0.0, options.time_limit - (start - asked))   # the turn waited for counts
            solver.SetTimeLimit(_milliseconds(limit))
            code = solver.Solve(params)
            wall = time.perf_counter() - start
        if start - asked >= 1.0:
            notes.append(f"{self.name} waited {start - asked:.1f} s for another solve in this process to end, "
                         "which its time limit counts")
        return self._result(code, wall, limit, notes)

    def _result(self, code: int, wall: float, time_limit: float, notes: list[str]) -> RawResult:
        names = {getattr(self._lp.Solver, name): name for name in self.STATUS}
        status = names.get(code, str(code))
        word = self.status_word(status, default="no_solution")
        stats = {"solver_status": status, "nodes": self.solver.nodes()}
        if word in ("optimal", "feasible"):
            objective = self.solver.Objective()
            bound = objective.BestBound()
            scale = self.objective_scale
            return RawResult(word, objective.Value() / scale, bound / scale if math.isfinite(bound) else 0.0,
                             lambda v: v.solution_value(), wall, "; ".join(notes), stats)
        if word == "infeasible" and wall >= time_limit * LIMIT_REACHED:
            notes.append(limit_infeasible(self.name, wall))
            return RawResult("no_solution", wall_s=wall, message="; ".join(notes), stats=stats)
        if word == "infeasible":
            return RawResult(word, wall_s=wall, message="; ".join(notes), stats=stats)
        # A stop is a stop only at the time limit; before it, the same codes are a solver failure
        # (HiGHS sometimes gives NOT_SOLVED at once on tiny models): an error, never a claim about
        # the instance.
        if word == "no_solution" and wall >= time_limit * 0.9:
            notes.append(f"{self.name} stopped after {wall:.2f} s without a solution (status {status})")
            return RawResult(word, wall_s=wall, stats=stats, message="; ".join(notes))
        notes.append(f"{self.name} returned status {status}")
        return RawResult("error", wall_s=wall, stats=stats, message="; ".join(notes))
