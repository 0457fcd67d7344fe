"""Solver backends for the MILP formulations: one small interface, several solvers.

A formulation builds its model through :class:`Backend` only (0/1 variables,
bounded numeric variables, linear rows ``lo ≤ Σ a·x ≤ hi`` optionally enforced
by a 0/1 literal, a linear objective to minimise, hints) and reads the answer
from a :class:`RawResult`. Backends (:func:`make_backend` by name):

* ``cp-sat`` — native CP-SAT (``ortools.sat.python.cp_model``). Integer data
  only: the formulation scales its data to integers before building and tells
  the backend so (:attr:`Backend.integer_only`); a non-integer coefficient is a
  ``ValueError``, never rounded here. Enforced rows use CP-SAT's enforcement
  literals (no big-M). CP-SAT's presolve is switched off: in OR-Tools 9.15 it
  returned wrong answers on these models (on the published InceptionV3 and
  ResNet-50 layer graphs: "optimal" 125.93 where the DP's verified 122.76 was the
  hint; "infeasible" under a cutoff the hinted plan meets), while every run without
  it was right.
* ``cbc``, ``scip``, ``highs`` — OR-Tools ``pywraplp``, continuous numeric
  variables, enforced rows as big-M rows with ``M`` computed from the variable
  bounds. Known wrapper defects (DESIGN.md §8) are handled: HiGHS gets no hint
  (it crashes on one), a HiGHS run that rejects its own optimum after presolve
  (OR-Tools then says NOT_SOLVED at once) is retried without presolve, and a status of ``FEASIBLE``/``OPTIMAL`` that comes back
  without values is detected by the formulation (the decoded plan does not place
  every node) and reported as ``no_solution``.
* ``pulp`` — PuLP with its bundled CBC; ``pulp:NAME`` — any solver PuLP knows
  by that name (``pulp:GUROBI_CMD``, ``pulp:CPLEX_CMD``, ``pulp:HiGHS`` …) that is
  installed. PuLP's own status says "Optimal" when CBC stops on its time limit,
  so the status is read from ``sol_status``; CBC's best bound is read from its
  log.

The relative MIP gap is 0 unless a ``gap`` is given, so that a solver's
``OPTIMAL`` means proven; the formulation still checks the bound against the
verified objective before it says ``optimal``. Status words of
:class:`RawResult` are those of :class:`placement.solution.Status`:
``optimal`` only when the solver proved it, ``feasible`` when a limit stopped it
with a solution, ``infeasible`` only when proven, ``no_solution`` when it
stopped without one, ``error`` otherwise.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

Terms = Sequence[tuple[float, Any]]

#: backends always offered; ``pulp:NAME`` names any other solver PuLP knows
BACKENDS = ("cp-sat", "cbc", "scip", "highs", "pulp")


@dataclass(frozen=True)
class SolveOptions:
    """Solver settings, separate from the data: time limit (s, always set), relative gap at which
    the solver may stop (0: prove optimality), threads, random seed, and a file for the solver log."""

    time_limit: float
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    log_path: str | None = None
    #: called with (objective, bound, seconds) in model units for each improving solution, where the
    #: backend can report them (CP-SAT)
    on_solution: Callable[[float, float, float], None] | None = None


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
    def num_var(self, ub: float, name: str) -> Any:
        """A numeric variable in ``[0, ub]`` (integer in integer-only backends)."""

    @abstractmethod
    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        """Row ``lo ≤ Σ a·x ≤ hi``; with ``enforce`` (a 0/1 variable) only when it is 1 (``hi`` side only)."""

    @abstractmethod
    def minimize(self, terms: Terms) -> None:
        """Minimise ``Σ a·x``."""

    @abstractmethod
    def hint(self, values: dict[Any, float]) -> str:
        """Give a starting solution; returns a note ('' when accepted)."""

    @abstractmethod
    def solve(self, options: SolveOptions) -> RawResult: ...

    @property
    @abstractmethod
    def size(self) -> dict[str, int]:
        """Model size: ``variables``, ``binaries``, ``rows``."""


@contextlib.contextmanager
def _stdout_to(path: str | None) -> Iterator[None]:
    """Send what native code writes on file descriptor 1 to ``path`` (append) while the block runs."""
    if path is None:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(fd)


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
        if enforce is not None and math.isfinite(lo):
            raise ValueError("enforced rows take an upper side only")
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
            self.model.AddHint(var, int(round(val)))
        return ""

    def solve(self, options: SolveOptions) -> RawResult:
        cp = self._cp
        solver = cp.CpSolver()
        solver.parameters.max_time_in_seconds = float(options.time_limit)
        solver.parameters.num_workers = max(1, int(options.threads))
        solver.parameters.random_seed = int(options.seed)
        solver.parameters.relative_gap_limit = float(options.gap)
        solver.parameters.cp_model_presolve = False  # see the module docstring
        log = None
        if options.log_path is not None:
            log = open(options.log_path, "a", encoding="utf-8")
            solver.parameters.log_search_progress = True
            solver.parameters.log_to_stdout = False
            solver.log_callback = lambda line: log.write(line + "\n")
        callback = None
        if options.on_solution is not None:
            report = options.on_solution

            class _Progress(cp.CpSolverSolutionCallback):
                def on_solution_callback(self) -> None:
                    report(self.ObjectiveValue(), self.BestObjectiveBound(), self.WallTime())

            callback = _Progress()
        try:
            start = time.perf_counter()
            code = solver.Solve(self.model, callback)
            wall = time.perf_counter() - start
        finally:
            if log is not None:
                log.close()
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
# rows with big-M enforcement, shared by the floating-point backends
# ----------------------------------------------------------------------------------------

def _big_m_row(coef: dict[Any, float], bounds: Callable[[Any], tuple[float, float]], hi: float,
               enforce: Any) -> tuple[dict[Any, float], float] | None:
    """``Σ a·x ≤ hi`` only when ``enforce`` = 1, as ``Σ a·x + M·enforce ≤ hi + M`` with ``M`` the largest
    excess the variable bounds allow; ``None`` when the row can never bind."""
    top = sum(a * (bounds(v)[1] if a > 0 else bounds(v)[0]) for v, a in coef.items())
    big_m = top - hi
    if big_m <= 0:
        return None
    coef = dict(coef)
    coef[enforce] = coef.get(enforce, 0.0) + big_m
    return coef, hi + big_m


# ----------------------------------------------------------------------------------------
# pywraplp (CBC, SCIP, HiGHS)
# ----------------------------------------------------------------------------------------

_PYWRAPLP_IDS = {"cbc": "CBC", "scip": "SCIP", "highs": "HIGHS"}


class PywraplpBackend(Backend):
    """A MIP solver behind OR-Tools' ``pywraplp``; continuous numeric variables, big-M enforcement."""

    integer_only = False

    def __init__(self, name: str) -> None:
        from ortools.linear_solver import pywraplp

        self._lp = pywraplp
        self.name = name
        self.solver = pywraplp.Solver.CreateSolver(_PYWRAPLP_IDS[name])
        if self.solver is None:
            raise RuntimeError(f"OR-Tools has no {name} solver in this build")
        self._bounds: dict[int, tuple[float, float]] = {}
        self._vars: dict[int, Any] = {}
        self._binaries = 0
        self._rows = 0

    @property
    def size(self) -> dict[str, int]:
        return {"variables": len(self._bounds), "binaries": self._binaries, "rows": self._rows}

    def _register(self, var: Any, lb: float, ub: float) -> Any:
        self._bounds[var.index()] = (lb, ub)
        self._vars[var.index()] = var
        return var

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        lb, ub = (0, 1) if fixed is None else (fixed, fixed)
        self._binaries += fixed is None
        return self._register(self.solver.IntVar(lb, ub, name), lb, ub)

    def num_var(self, ub: float, name: str) -> Any:
        return self._register(self.solver.NumVar(0.0, float(ub), name), 0.0, float(ub))

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        inf = self.solver.infinity()
        coef: dict[int, float] = {}
        for a, v in terms:
            coef[v.index()] = coef.get(v.index(), 0.0) + a
        if enforce is not None:
            if math.isfinite(lo):
                raise ValueError("enforced rows take an upper side only")
            row = _big_m_row(coef, self._bounds.__getitem__, hi, enforce.index())
            if row is None:
                return
            coef, hi = row
        ct = self.solver.Constraint(lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf)
        self._rows += 1
        for i, a in coef.items():
            ct.SetCoefficient(self._vars[i], float(a))

    def minimize(self, terms: Terms) -> None:
        objective = self.solver.Objective()
        for a, v in terms:
            objective.SetCoefficient(v, objective.GetCoefficient(v) + float(a))
        objective.SetMinimization()

    def hint(self, values: dict[Any, float]) -> str:
        if self.name == "highs":
            return "no warm start for HiGHS (OR-Tools' wrapper crashes on a hint)"
        self.solver.SetHint(list(values), [float(v) for v in values.values()])
        return ""

    def solve(self, options: SolveOptions) -> RawResult:
        lp = self._lp
        solver = self.solver
        time_limit = options.time_limit
        solver.SetTimeLimit(max(1, int(round(time_limit * 1000))))
        notes = []
        if options.threads != 1 and not solver.SetNumThreads(int(options.threads)):
            notes.append(f"{self.name} ignored threads={options.threads}")
        if self.name == "scip":
            solver.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {int(options.seed)}\n")
        if self.name == "highs":
            solver.SetSolverSpecificParametersAsString(f"random_seed = {int(options.seed)}\n")
        params = lp.MPSolverParameters()
        params.SetDoubleParam(lp.MPSolverParameters.RELATIVE_MIP_GAP, float(options.gap))
        if options.log_path is not None:
            solver.EnableOutput()
        with _stdout_to(options.log_path):
            start = time.perf_counter()
            code = solver.Solve(params)
            wall = time.perf_counter() - start
            if self.name == "highs" and code == lp.Solver.NOT_SOLVED and wall < 0.5 * time_limit:
                # HiGHS sometimes rejects its own optimum after presolve ("claims optimality, but with
                # primal infeasibilities") and OR-Tools reports NOT_SOLVED; without presolve it does not.
                notes.append("HiGHS retried without presolve")
                solver.SetSolverSpecificParametersAsString(f"presolve = off\nrandom_seed = {int(options.seed)}\n")
                solver.SetTimeLimit(max(1, int(round((time_limit - wall) * 1000))))
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


# ----------------------------------------------------------------------------------------
# PuLP
# ----------------------------------------------------------------------------------------

# CBC's closing summary: "Objective value: 17.5", "Lower bound: 16.9" (time limit) or "Best possible: …"
_CBC_BOUND = re.compile(r"^(?:Lower bound|Best possible)\s*:?\s*(-?[0-9.eE+-]+)", re.MULTILINE)


class PulpBackend(Backend):
    """PuLP and the solver it names (``PULP_CBC_CMD``, its bundled CBC, unless told otherwise)."""

    integer_only = False

    def __init__(self, solver_name: str = "PULP_CBC_CMD") -> None:
        import pulp

        self._pulp = pulp
        self.solver_name = solver_name
        self.name = "pulp" if solver_name == "PULP_CBC_CMD" else f"pulp:{solver_name}"
        self.problem = pulp.LpProblem("placement", pulp.LpMinimize)
        self._bounds: dict[Any, tuple[float, float]] = {}
        self._binaries = 0
        self._rows = 0
        self._hint: dict[Any, float] | None = None

    @property
    def size(self) -> dict[str, int]:
        return {"variables": len(self._bounds), "binaries": self._binaries, "rows": self._rows}

    def _fresh(self, name: str) -> str:
        # PuLP names must be unique and free of brackets and commas in LP files
        return re.sub(r"[^A-Za-z0-9_]", "_", name) + f"_{len(self._bounds)}"

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        lb, ub = (0, 1) if fixed is None else (fixed, fixed)
        var = self.problem.add_variable(self._fresh(name), lb, ub, cat="Integer" if fixed is None else "Continuous")
        self._binaries += fixed is None
        self._bounds[var] = (lb, ub)
        return var

    def num_var(self, ub: float, name: str) -> Any:
        var = self.problem.add_variable(self._fresh(name), 0.0, float(ub))
        self._bounds[var] = (0.0, float(ub))
        return var

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        coef: dict[Any, float] = {}
        for a, v in terms:
            coef[v] = coef.get(v, 0.0) + a
        if enforce is not None:
            if math.isfinite(lo):
                raise ValueError("enforced rows take an upper side only")
            row = _big_m_row(coef, self._bounds.__getitem__, hi, enforce)
            if row is None:
                return
            coef, hi = row
        expr = self._pulp.lpSum(a * v for v, a in coef.items())
        if math.isfinite(lo):
            self.problem += expr >= lo
            self._rows += 1
        if math.isfinite(hi):
            self.problem += expr <= hi
            self._rows += 1

    def minimize(self, terms: Terms) -> None:
        self.problem += self._pulp.lpSum(a * v for a, v in terms)

    def hint(self, values: dict[Any, float]) -> str:
        for var, val in values.items():
            var.setInitialValue(val)
        self._hint = values
        return ""

    def solve(self, options: SolveOptions) -> RawResult:
        pulp = self._pulp
        is_cbc = self.solver_name in ("PULP_CBC_CMD", "COIN_CMD")
        log_path = options.log_path
        scratch = None
        if is_cbc and log_path is None:  # CBC's bound is only in its log
            scratch = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
            scratch.close()
            log_path = scratch.name
        settings: dict[str, Any] = {"msg": False, "timeLimit": float(options.time_limit),
                                    "gapRel": float(options.gap), "threads": int(options.threads)}
        if self._hint is not None:
            settings["warmStart"] = True
        if log_path is not None:
            settings["logPath"] = log_path
        try:
            try:
                with warnings.catch_warnings():  # PuLP 3.3 announces PULP_CBC_CMD's removal in PuLP 4
                    warnings.simplefilter("ignore", DeprecationWarning)
                    solver = pulp.getSolver(self.solver_name, **settings)
            except (pulp.PulpSolverError, TypeError) as exc:
                return RawResult("error", message=f"PuLP cannot use {self.solver_name}: {exc}")
            if not solver.available():
                return RawResult("error", message=f"PuLP's {self.solver_name} is not installed here")
            start = time.perf_counter()
            self.problem.solve(solver)
            wall = time.perf_counter() - start
            log_text = ""
            if is_cbc and log_path is not None and os.path.exists(log_path):
                with open(log_path, encoding="utf-8", errors="replace") as fh:
                    log_text = fh.read()
        finally:
            if scratch is not None:
                os.unlink(scratch.name)
        status, sol = self.problem.status, self.problem.sol_status
        stats = {"solver_status": pulp.LpStatus.get(status, str(status)),
                 "solution_status": pulp.LpSolution.get(sol, str(sol))}
        found = [float(m) for m in _CBC_BOUND.findall(log_text)]
        bound = found[-1] if found else None
        value = lambda v: v.varValue if v.varValue is not None else math.nan  # noqa: E731
        objective = pulp.value(self.problem.objective)
        if sol == pulp.LpSolutionOptimal:
            return RawResult("optimal", objective, objective if bound is None else bound, value, wall, stats=stats)
        if sol == pulp.LpSolutionIntegerFeasible:
            return RawResult("feasible", objective, bound, value, wall, stats=stats)
        # CBC's proof of infeasibility comes back as status Infeasible with "no solution found" (a
        # stop at the time limit is status Not Solved), so the status decides that case.
        if sol == pulp.LpSolutionInfeasible or (sol == pulp.LpSolutionNoSolutionFound
                                                and status == pulp.LpStatusInfeasible):
            return RawResult("infeasible", wall_s=wall, stats=stats)
        if sol == pulp.LpSolutionNoSolutionFound:
            return RawResult("no_solution", bound=bound, wall_s=wall, stats=stats,
                             message=f"{self.name} stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"{self.name} returned {stats['solution_status']}")


# ----------------------------------------------------------------------------------------
# by name
# ----------------------------------------------------------------------------------------

def check_backend_name(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is one of :data:`BACKENDS` or ``pulp:NAME``."""
    if name in BACKENDS or (name.startswith("pulp:") and len(name) > 5):
        return
    raise ValueError(f"unknown MILP backend {name!r}; choose from {', '.join(BACKENDS)} or pulp:SOLVER")


def check_backend_available(name: str) -> None:
    """Raise ``ValueError`` (one line) unless the backend ``name`` can run here."""
    check_backend_name(name)
    if not name.startswith("pulp:"):
        for row_name, ok, why in backend_availability():
            if row_name == name and not ok:
                raise ValueError(f"the MILP backend {name} cannot run here: {why}")
        return
    try:
        import pulp
    except ImportError:
        raise ValueError(f"the MILP backend {name} needs PuLP: pip install 'placement[milp]'") from None
    solver = name[5:]
    known = list(dict.fromkeys(pulp.listSolvers()))
    if solver not in known:
        raise ValueError(f"PuLP knows no solver {solver!r}; its solvers are {', '.join(known)}")
    if solver not in pulp.listSolvers(onlyAvailable=True):
        raise ValueError(f"PuLP's {solver} is not installed or not usable here (see `placement info --solvers`)")


def make_backend(name: str) -> Backend:
    """A fresh backend by name (one of :data:`BACKENDS`, or ``pulp:NAME``)."""
    check_backend_name(name)
    if name == "cp-sat":
        return CpSatBackend()
    if name in _PYWRAPLP_IDS:
        return PywraplpBackend(name)
    return PulpBackend("PULP_CBC_CMD" if name == "pulp" else name[5:])


def backend_availability() -> list[tuple[str, bool, str]]:
    """``(name, available, why)`` for every backend, and every PuLP solver found installed."""
    rows: list[tuple[str, bool, str]] = []
    try:
        from ortools import __version__ as ortools_version
        from ortools.linear_solver import pywraplp
    except ImportError:
        rows += [(n, False, "OR-Tools is not installed (pip install 'placement[milp]')")
                 for n in ("cp-sat", "cbc", "scip", "highs")]
    else:
        rows.append(("cp-sat", True, f"OR-Tools {ortools_version}"))
        for n, ident in _PYWRAPLP_IDS.items():
            ok = pywraplp.Solver.CreateSolver(ident) is not None
            rows.append((n, ok, f"OR-Tools {ortools_version} pywraplp" if ok else "not in this OR-Tools build"))
    try:
        import pulp
    except ImportError:
        rows.append(("pulp", False, "PuLP is not installed (pip install 'placement[milp]')"))
    else:
        available = set(pulp.listSolvers(onlyAvailable=True))
        rows.append(("pulp", "PULP_CBC_CMD" in available,
                     f"PuLP {pulp.__version__}, bundled CBC" if "PULP_CBC_CMD" in available
                     else f"PuLP {pulp.__version__} has no working bundled CBC"))
        for other in sorted(available - {"PULP_CBC_CMD"}):
            rows.append((f"pulp:{other}", True, f"PuLP {pulp.__version__}"))
    return rows
