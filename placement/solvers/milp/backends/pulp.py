"""``pulp``: PuLP with its bundled CBC; ``pulp:NAME``: any solver PuLP knows by that name
(``pulp:GUROBI_CMD``, ``pulp:CPLEX_CMD``, ``pulp:HiGHS`` …) that is installed.

Continuous numeric variables, enforced rows as big-M rows
(:class:`~placement.solvers.milp.backends.base.BigMBackend`).

PuLP's own status says "Optimal" when CBC stops on its time limit, so the status is read from
``sol_status`` (:attr:`PulpBackend.STATUS`), with one exception: CBC's proof of infeasibility
comes back as status "Infeasible" with "No Solution Found" (a stop at the time limit is status
"Not Solved"), so there the status decides; an infeasibility reached as the time limit runs out
is no proof (:data:`~placement.solvers.milp.backends.base.LIMIT_REACHED`). CBC's best bound is
read from its log ("Lower bound", "Best possible", or the objective its summary proves optimal),
written to a scratch file and then added to the log asked for, if any; a claim of optimality without a bound
(another solver, or a log without one) is passed on without one, and so is not certified.

CBC's objective is multiplied by :data:`~placement.solvers.milp.backends.base.CBC_OBJECTIVE_SCALE`
(values and bounds are divided back), which keeps CBC's objective analysis from pruning the
optimum; a run whose log shows that the analysis raised the cutoff increment all the same keeps
its plan but loses its claim of optimality and its bound
(:func:`~placement.solvers.milp.backends.base.distrust_cbc`).

CBC is given a thread count only for more than one thread: told ``threads 1`` it runs its threaded
search with one worker thread, whose start its main thread can miss, then waiting 10 s for it (its log
says "Thread 0 used 0 times, waiting to start 10.000…"): beside two busy processes on two cores, 5 of
600 solves of a 4-node instance that takes 0.02 s hung so, and under a time limit of 1 s were stopped
as overruns, without a plan. Without the option it searches in its main thread, as it does by default.

PuLP runs its solver as a child process on files it writes (``*-pulp.mps`` and so on). Each solve
gets a scratch directory of its own for them and for CBC's log, removed when the solve ends;
:meth:`PulpBackend.interrupt` stops the child processes whose command line names that directory
(an interrupted solve had left CBC running to its time limit, orphaned once the script ended, and
its files behind).

A solver PuLP runs in this process instead (``pulp:HiGHS``, through highspy) prints on file
descriptor 1, HiGHS its banner even with its output off: while it runs, the descriptor is pointed at
the log asked for, else nowhere (:func:`~placement.solvers.native_output.stdout_to`), so that
``--json`` stays one document.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import tempfile
import time
import warnings
from typing import Any, ClassVar

from placement.process_state import catch_warnings
from placement.solvers.milp.backends.base import (CBC_OBJECTIVE_SCALE, LIMIT_REACHED, NO_DIRECTORY_HINT, BigMBackend,
                                                  RawResult, SolveOptions, Terms, append_log, cbc_limit_infeasible,
                                                  distrust_cbc, limit_infeasible, package_version,
                                                  working_directory_problem)
from placement.solvers.native_output import stdout_to

#: PuLP's name of its bundled CBC, the solver of plain ``pulp``
BUNDLED = "PULP_CBC_CMD"
#: PuLP's names of CBC
CBC_SOLVERS = (BUNDLED, "COIN_CMD")

# CBC's closing summary: "Objective value: 17.5", "Lower bound: 16.9" (time limit) or "Best possible: …"
_CBC_BOUND = re.compile(r"^(?:Lower bound|Best possible)\s*:?\s*(-?[0-9.eE+-]+)", re.MULTILINE)
# CBC's proof of optimality: its closing summary, followed by the objective it proved
_CBC_PROVEN = re.compile(r"^Result - Optimal solution found\s*^Objective value:\s*(-?[0-9.eE+-]+)",
                         re.MULTILINE)


class PulpBackend(BigMBackend):
    """PuLP and the solver it names (:data:`BUNDLED`, its bundled CBC, unless told otherwise)."""

    name = "pulp"
    warm_start = True
    threads = True
    seed = False   # no solver PuLP runs is given one
    package = "pulp"
    package_label = "PuLP"
    #: ``pulp.LpSolution`` texts (the solution status)
    STATUS: ClassVar[dict[str, str]] = {
        "Optimal Solution Found": "optimal", "Solution Found": "feasible", "No Solution Exists": "infeasible",
        "No Solution Found": "no_solution", "Solution is Unbounded": "error"}
    #: (solution status, ``pulp.LpStatus`` text) pairs read otherwise (see the module docstring)
    STATUS_EXCEPTIONS: ClassVar[dict[tuple[str, str], str]] = {("No Solution Found", "Infeasible"): "infeasible"}

    @classmethod
    def availability(cls, argument: str | None = None) -> str | None:
        solver = argument or BUNDLED
        problem = cls.import_problem("pulp") or working_directory_problem()
        if problem is not None:
            return problem
        import pulp

        known = list(dict.fromkeys(pulp.listSolvers()))
        if solver not in known:
            return f"PuLP {pulp.__version__} knows no solver {solver!r} (its solvers are {', '.join(known)})"
        if solver not in pulp.listSolvers(onlyAvailable=True):
            if solver == BUNDLED:
                return f"PuLP {pulp.__version__} has no working bundled CBC"
            return f"PuLP {pulp.__version__} finds {solver} not installed or not usable here"
        return None

    @classmethod
    def install_hint(cls, argument: str | None = None) -> str:
        if cls.import_problem("pulp") is None and working_directory_problem():
            return NO_DIRECTORY_HINT
        if argument in (None, BUNDLED) or cls.import_problem("pulp") is not None:
            return super().install_hint(argument)
        import pulp

        if argument not in pulp.listSolvers():
            return "name one of PuLP's solvers"
        return f"PuLP calls {argument} where it is installed, but does not install it"

    @classmethod
    def detail(cls, argument: str | None = None) -> str:
        return f"PuLP {package_version(cls.package)}" + ("" if argument not in (None, BUNDLED) else ", bundled CBC")

    @classmethod
    def variants(cls) -> list[str]:
        if cls.import_problem("pulp") is not None or working_directory_problem():   # PuLP cannot list them
            return []
        import pulp

        return sorted(set(pulp.listSolvers(onlyAvailable=True)) - {BUNDLED})

    def __init__(self, solver_name: str = BUNDLED) -> None:
        import pulp

        super().__init__()
        self._pulp = pulp
        self.solver_name = solver_name
        self.name = "pulp" if solver_name == BUNDLED else f"pulp:{solver_name}"
        self.problem = pulp.LpProblem("placement", pulp.LpMinimize)
        self._hint: dict[Any, float] | None = None
        self.is_cbc = solver_name in CBC_SOLVERS
        #: what the objective is multiplied by in the solver (objective and bound are divided back)
        self.objective_scale = CBC_OBJECTIVE_SCALE if self.is_cbc else 1.0
        #: the scratch directory of the solve under way (module docstring), or None
        self._workdir: str | None = None
        #: whether the solve under way was asked to stop (:meth:`interrupt`)
        self._stopped = False

    def _fresh(self, name: str) -> str:
        # PuLP names must be unique and free of brackets and commas in LP files
        return re.sub(r"[^A-Za-z0-9_]", "_", name) + f"_{len(self._bounds)}"

    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        self.tick_variable()
        lb, ub = (0, 1) if fixed is None else (fixed, fixed)
        var = self.problem.add_variable(self._fresh(name), lb, ub, cat="Integer" if fixed is None else "Continuous")
        return self.declared(var, lb, ub, fixed is None)

    def num_var(self, ub: float, name: str) -> Any:
        self.tick_variable()
        return self.declared(self.problem.add_variable(self._fresh(name), 0.0, float(ub)), 0.0, float(ub), False)

    def write_row(self, coef: dict[Any, float], lo: float, hi: float) -> None:
        expr = self._pulp.lpSum(a * v for v, a in coef.items())
        if math.isfinite(lo):
            self.problem += expr >= lo
            self._rows += 1
        if math.isfinite(hi):
            self.problem += expr <= hi
            self._rows += 1

    def minimize(self, terms: Terms) -> None:
        self.problem += self._pulp.lpSum(a * self.objective_scale * v for a, v in terms)

    def hint(self, values: dict[Any, float]) -> str:
        for var, val in values.items():   # PuLP raises on a start value outside a variable's bounds
            if (var.lowBound is not None and val < var.lowBound) or (var.upBound is not None and val > var.upBound):
                return (f"warm start ignored: it sets {var.name} to {val:g}, outside its bounds "
                        f"[{var.lowBound}, {var.upBound}]")
        for var, val in values.items():
            var.setInitialValue(val)
        self._hint = values
        return ""

    def _solver(self, options: SolveOptions, log_path: str | None) -> Any:
        """PuLP's solver object, or the reason it cannot be had."""
        pulp = self._pulp
        settings: dict[str, Any] = {"msg": False, "timeLimit": float(options.time_limit), "gapRel": float(options.gap)}
        if options.threads > 1 or not self.is_cbc:   # CBC runs serially unless told a thread count (module docstring)
            settings["threads"] = int(options.threads)
        if self._hint is not None:
            settings["warmStart"] = True
        if log_path is not None:
            settings["logPath"] = log_path
        try:
            with catch_warnings():  # PuLP 3.3 announces PULP_CBC_CMD's removal in PuLP 4
                warnings.simplefilter("ignore", DeprecationWarning)
                solver = pulp.getSolver(self.solver_name, **settings)
        except (pulp.PulpSolverError, TypeError) as exc:
            return f"PuLP cannot use {self.solver_name}: {exc}"
        if not solver.available():
            return f"PuLP's {self.solver_name} is not installed here"
        if not isinstance(solver, pulp.LpSolver_CMD):   # run in this process: its log is what it prints
            getattr(solver, "optionsDict", {}).pop("logPath", None)
            solver.msg = log_path is not None
        return solver

    def solve(self, options: SolveOptions) -> RawResult:
        is_cbc = self.is_cbc
        # CBC's bound is only in its log: it logs to a scratch file, read back here and then added to
        # the user's log (which may be no regular file: reading /dev/full back never ends)
        log_path = options.log_path
        self._stopped = False
        workdir = self._workdir = tempfile.mkdtemp(prefix="placement-pulp-")
        scratch = os.path.join(workdir, "solver.log") if is_cbc else None
        if scratch is not None:
            log_path = scratch
        log_text = ""
        failed: RawResult | None = None
        try:
            solver = self._solver(options, log_path)
            if isinstance(solver, str):
                return RawResult("error", message=solver)
            solver.tmpDir = workdir
            in_process = not isinstance(solver, self._pulp.LpSolver_CMD)
            output = stdout_to(options.log_path) if in_process else contextlib.nullcontext()
            start = time.perf_counter()
            try:
                with output:
                    self.problem.solve(solver)
            except self._pulp.PulpSolverError as exc:   # the solver's process failed (crashed, killed)
                if self._stopped:   # stopped here: its plans went with its process
                    failed = RawResult("no_solution", wall_s=time.perf_counter() - start, stopped=True,
                                       message=f"PuLP's {self.solver_name} was stopped before it wrote a solution")
                else:
                    failed = RawResult("error", wall_s=time.perf_counter() - start,
                                       message=f"PuLP's {self.solver_name} failed: "
                                               f"{str(exc).strip().splitlines()[0]}")
            wall = time.perf_counter() - start
            if scratch is not None and os.path.exists(scratch):   # a stopped or failed run's log too
                with open(scratch, encoding="utf-8", errors="replace") as fh:
                    log_text = fh.read()
        finally:
            self._workdir = None
            shutil.rmtree(workdir, ignore_errors=True)
        if scratch is not None:
            append_log(options.log_path, log_text)
        if failed is not None:
            return failed
        found = [float(m) / self.objective_scale for m in _CBC_BOUND.findall(log_text) or
                 _CBC_PROVEN.findall(log_text)]
        raw = self._result(wall, found[-1] if found else None, options.time_limit)
        if not is_cbc:
            return raw
        return cbc_limit_infeasible(distrust_cbc(raw, log_text), log_text, options.time_limit, self.name)

    def interrupt(self) -> bool:
        workdir = self._workdir
        self._stopped = workdir is not None
        return workdir is not None and stop_children_naming(workdir)

    def _result(self, wall: float, bound: float | None, time_limit: float) -> RawResult:
        pulp = self._pulp
        status, sol = self.problem.status, self.problem.sol_status
        stats = {"solver_status": pulp.LpStatus.get(status, str(status)),
                 "solution_status": pulp.LpSolution.get(sol, str(sol))}
        word = self.STATUS_EXCEPTIONS.get((stats["solution_status"], stats["solver_status"]))
        word = word or self.status_word(stats["solution_status"])

        def value(v: Any) -> float:
            return v.varValue if v.varValue is not None else math.nan

        objective = pulp.value(self.problem.objective)
        if objective is not None:
            objective /= self.objective_scale
        if word == "optimal" and bound is None:
            return RawResult(word, objective, None, value, wall, stats=stats,
                             message=f"{self.name} gave no bound: its claim of optimality is not certified")
        if word in ("optimal", "feasible"):
            return RawResult(word, objective, bound, value, wall, stats=stats)
        if word == "infeasible" and wall >= time_limit * LIMIT_REACHED:
            return RawResult("no_solution", wall_s=wall, stats=stats, message=limit_infeasible(self.name, wall))
        if word == "infeasible":
            return RawResult(word, wall_s=wall, stats=stats)
        if word == "no_solution":
            return RawResult(word, bound=bound, wall_s=wall, stats=stats,
                             message=f"{self.name} stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"{self.name} returned {stats['solution_status']}")


def stop_children_naming(path: str) -> bool:
    """Send SIGTERM to this process's children whose command line holds ``path``; whether there were
    any. Where ``/proc`` cannot be read (not Linux), none are found."""
    me = os.getpid()
    stopped = False
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return False
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                parent = int(fh.read().rsplit(b")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                named = path.encode() in fh.read()
            if named:
                os.kill(int(entry), signal.SIGTERM)
                stopped = True
        except (OSError, ValueError, IndexError):
            continue
    return stopped
