"""Solver backends for the MILP formulations: one small interface, several solvers.

A formulation builds its model through :class:`Backend` only (0/1 variables,
one bounded objective variable, linear rows ``lo ≤ Σ a·x ≤ hi`` optionally
enforced by a 0/1 literal, minimise a variable, hints) and reads the answer
from a :class:`RawResult`. Backends:

* ``cp-sat`` — native CP-SAT (``ortools.sat.python.cp_model``). Integer data
  only: the formulation scales its data to integers before building and tells
  the backend so (:attr:`Backend.integer_only`); a non-integer coefficient is a
  ``ValueError``, never rounded here. Enforced rows use CP-SAT's enforcement
  literals (no big-M).
* ``cbc``, ``scip``, ``highs`` — OR-Tools ``pywraplp``, continuous objective
  variable, enforced rows as big-M rows with ``M`` computed from the variable
  bounds. The relative MIP gap is set to 0 so that ``OPTIMAL`` means proven.
  Known wrapper defects (DESIGN.md §8) are handled: HiGHS gets no hint (it
  crashes on one), and a status of ``FEASIBLE``/``OPTIMAL`` that comes back
  without values is detected by the formulation (the decoded plan does not place
  every node) and reported as ``no_solution``.

Status words of :class:`RawResult` are those of :class:`placement.solution.Status`:
``optimal`` only when the solver proved it, ``feasible`` when a limit stopped it
with a solution, ``infeasible`` only when proven, ``no_solution`` when it
stopped without one, ``error`` otherwise.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

Terms = Sequence[tuple[float, Any]]

BACKENDS = ("cp-sat", "cbc", "scip", "highs")


@dataclass
class RawResult:
    """What a backend reports, in model units: status word, objective, bound, values."""

    status: str
    objective: float | None = None
    bound: float | None = None
    value: Callable[[Any], float] = lambda var: math.nan
    wall_s: float = 0.0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """The interface a formulation talks to."""

    name: str = ""
    integer_only: bool = False
    #: relative gap between the proven bound and the verified objective under which ``optimal`` stands
    #: (CP-SAT: float noise of the evaluator; floating-point MIP solvers: their feasibility tolerances)
    optimality_tolerance: float = 1e-6

    @abstractmethod
    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        """A 0/1 variable (fixed to ``fixed`` when given)."""

    @abstractmethod
    def objective_var(self, ub: float, name: str) -> Any:
        """The variable to minimise, in ``[0, ub]`` (integer in integer-only backends)."""

    @abstractmethod
    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        """Row ``lo ≤ Σ a·x ≤ hi``; with ``enforce`` (a 0/1 variable) only when it is 1 (``hi`` side only)."""

    @abstractmethod
    def minimize(self, var: Any) -> None: ...

    @abstractmethod
    def hint(self, values: dict[Any, float]) -> str:
        """Give a starting solution; returns a note ('' when accepted)."""

    @abstractmethod
    def solve(self, time_limit: float, threads: int, seed: int) -> RawResult: ...


# ----------------------------------------------------------------------------------------
# CP-SAT
# ----------------------------------------------------------------------------------------

class CpSatBackend(Backend):
    """Native CP-SAT; every coefficient and bound must be an integer."""

    name = "cp-sat"
    integer_only = True
    optimality_tolerance = 1e-9

    def __init__(self) -> None:
        from ortools.sat.python import cp_model

        self._cp = cp_model
        self.model = cp_model.CpModel()

    @staticmethod
    def _int(a: float) -> int:
        if isinstance(a, int):
            return a
        if not float(a).is_integer():
            raise ValueError(f"CP-SAT needs integer coefficients, got {a!r} (scale the data first)")
        return int(a)

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        if fixed is None:
            return self.model.NewBoolVar(name)
        return self.model.NewIntVar(fixed, fixed, name)

    def objective_var(self, ub: float, name: str) -> Any:
        return self.model.NewIntVar(0, self._int(math.ceil(ub)), name)

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        expr = sum(self._int(a) * v for a, v in terms)
        if enforce is not None and math.isfinite(lo):
            raise ValueError("enforced rows take an upper side only")
        if math.isfinite(lo):
            self.model.Add(expr >= self._int(math.ceil(lo)))
        if math.isfinite(hi):
            ct = self.model.Add(expr <= self._int(math.floor(hi)))
            if enforce is not None:
                ct.OnlyEnforceIf(enforce)

    def minimize(self, var: Any) -> None:
        self.model.Minimize(var)

    def hint(self, values: dict[Any, float]) -> str:
        for var, val in values.items():
            self.model.AddHint(var, int(round(val)))
        return ""

    def solve(self, time_limit: float, threads: int, seed: int) -> RawResult:
        cp = self._cp
        solver = cp.CpSolver()
        solver.parameters.max_time_in_seconds = float(time_limit)
        solver.parameters.num_workers = max(1, int(threads))
        solver.parameters.random_seed = int(seed)
        start = time.perf_counter()
        code = solver.Solve(self.model)
        wall = time.perf_counter() - start
        stats = {"solver_status": solver.StatusName(code), "branches": solver.NumBranches(),
                 "conflicts": solver.NumConflicts()}
        if code in (cp.OPTIMAL, cp.FEASIBLE):
            return RawResult("optimal" if code == cp.OPTIMAL else "feasible", solver.ObjectiveValue(),
                             solver.BestObjectiveBound(), solver.Value, wall, stats=stats)
        if code == cp.INFEASIBLE:
            return RawResult("infeasible", wall_s=wall, stats=stats)
        if code == cp.UNKNOWN:
            return RawResult("no_solution", bound=solver.BestObjectiveBound(), wall_s=wall, stats=stats,
                             message=f"CP-SAT stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"CP-SAT returned {solver.StatusName(code)}: {self.model.Validate()}")


# ----------------------------------------------------------------------------------------
# pywraplp (CBC, SCIP, HiGHS)
# ----------------------------------------------------------------------------------------

_PYWRAPLP_IDS = {"cbc": "CBC", "scip": "SCIP", "highs": "HIGHS"}


class PywraplpBackend(Backend):
    """A MIP solver behind OR-Tools' ``pywraplp``; continuous objective variable, big-M enforcement."""

    integer_only = False

    def __init__(self, name: str) -> None:
        from ortools.linear_solver import pywraplp

        self._lp = pywraplp
        self.name = name
        self.solver = pywraplp.Solver.CreateSolver(_PYWRAPLP_IDS[name])
        if self.solver is None:
            raise RuntimeError(f"OR-Tools has no {name} solver in this build")
        self._bounds: dict[int, tuple[float, float]] = {}
        self._count = 0

    def _register(self, var: Any, lb: float, ub: float) -> Any:
        self._bounds[var.index()] = (lb, ub)
        return var

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        lb, ub = (0, 1) if fixed is None else (fixed, fixed)
        return self._register(self.solver.IntVar(lb, ub, name), lb, ub)

    def objective_var(self, ub: float, name: str) -> Any:
        return self._register(self.solver.NumVar(0.0, float(ub), name), 0.0, float(ub))

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        inf = self.solver.infinity()
        coef: dict[int, tuple[float, Any]] = {}
        for a, v in terms:
            old = coef.get(v.index(), (0.0, v))[0]
            coef[v.index()] = (old + a, v)
        if enforce is not None:
            if math.isfinite(lo):
                raise ValueError("enforced rows take an upper side only")
            top = sum(a * (self._bounds[i][1] if a > 0 else self._bounds[i][0]) for i, (a, _) in coef.items())
            big_m = top - hi
            if big_m <= 0:
                return  # the row can never bind
            # Σ a·x ≤ hi + M (1 - e)   ⇔   Σ a·x + M e ≤ hi + M
            a_e = coef.get(enforce.index(), (0.0, enforce))[0]
            coef[enforce.index()] = (a_e + big_m, enforce)
            hi = hi + big_m
        row = self.solver.Constraint(lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf)
        for a, v in coef.values():
            row.SetCoefficient(v, float(a))

    def minimize(self, var: Any) -> None:
        self.solver.Minimize(var)

    def hint(self, values: dict[Any, float]) -> str:
        if self.name == "highs":
            return "no warm start for HiGHS (OR-Tools' wrapper crashes on a hint)"
        self.solver.SetHint(list(values), [float(v) for v in values.values()])
        return ""

    def solve(self, time_limit: float, threads: int, seed: int) -> RawResult:
        lp = self._lp
        solver = self.solver
        solver.SetTimeLimit(max(1, int(round(time_limit * 1000))))
        notes = []
        if threads != 1 and not solver.SetNumThreads(int(threads)):
            notes.append(f"{self.name} ignored threads={threads}")
        if self.name == "scip":
            solver.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {int(seed)}\n")
        params = lp.MPSolverParameters()
        params.SetDoubleParam(lp.MPSolverParameters.RELATIVE_MIP_GAP, 0.0)
        start = time.perf_counter()
        code = solver.Solve(params)
        wall = time.perf_counter() - start
        names = {lp.Solver.OPTIMAL: "OPTIMAL", lp.Solver.FEASIBLE: "FEASIBLE", lp.Solver.INFEASIBLE: "INFEASIBLE",
                 lp.Solver.UNBOUNDED: "UNBOUNDED", lp.Solver.ABNORMAL: "ABNORMAL", lp.Solver.NOT_SOLVED: "NOT_SOLVED",
                 lp.Solver.MODEL_INVALID: "MODEL_INVALID"}
        stats = {"solver_status": names.get(code, str(code)), "nodes": solver.nodes()}
        if wall > time_limit + 1.0:
            notes.append(f"{self.name} overran its time limit of {time_limit:g} s ({wall:.1f} s)")
        message = "; ".join(notes)
        if code in (lp.Solver.OPTIMAL, lp.Solver.FEASIBLE):
            bound = solver.Objective().BestBound()
            return RawResult("optimal" if code == lp.Solver.OPTIMAL else "feasible", solver.Objective().Value(),
                             bound if math.isfinite(bound) else 0.0, lambda v: v.solution_value(), wall,
                             message, stats)
        if code == lp.Solver.INFEASIBLE:
            return RawResult("infeasible", wall_s=wall, message=message, stats=stats)
        # At the time limit, NOT_SOLVED, ABNORMAL or a bare code outside the enum (HiGHS gives 99) means
        # "stopped without a solution". Before it, the same codes are a solver failure (HiGHS sometimes
        # gives NOT_SOLVED at once on tiny models): an error, never a claim about the instance.
        if wall >= time_limit * 0.9 and (code in (lp.Solver.NOT_SOLVED, lp.Solver.ABNORMAL) or code not in names):
            return RawResult("no_solution", wall_s=wall, stats=stats,
                             message="; ".join(notes + [f"{self.name} stopped after {wall:.2f} s without a "
                                                        f"solution (status {names.get(code, code)})"]))
        return RawResult("error", wall_s=wall, stats=stats,
                         message="; ".join(notes + [f"{self.name} returned status {names.get(code, code)}"]))


def make_backend(name: str) -> Backend:
    """A fresh backend by name (one of :data:`BACKENDS`)."""
    if name == "cp-sat":
        return CpSatBackend()
    if name in _PYWRAPLP_IDS:
        return PywraplpBackend(name)
    raise ValueError(f"unknown MILP backend {name!r}; choose from {', '.join(BACKENDS)}")
