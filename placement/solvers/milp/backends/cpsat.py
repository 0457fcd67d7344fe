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

Two phases (one thread). With more than one thread CP-SAT runs a portfolio, in which some
workers search the neighbourhoods of the best plan (LNS); with one it runs only its main
search, whose plans improve slowly once the proof stalls. So a one-thread solve gives the main
search the first :data:`PROOF_SHARE` of its time; a model neither proven nor refuted by then
is solved again for the rest of the time with CP-SAT's neighbourhood-search (LNS) subsolvers
interleaved in the one thread, starting from the first phase's plan as the hint. (With its
full-problem subsolvers interleaved too, OR-Tools 9.15 aborted the process, "Check failed:
heuristics.fixed_search != nullptr", a few seconds into the second phase on the InceptionV3
layer graphs and Piper's ResNet under the interleaved schedule; LNS alone does not, and found
plans as good: 33.446 and 117.379 against 33.454 and 117.328 in 120 s.) The answer is the better
plan and the larger bound: both phases solve the same model, so both bounds hold, and a plan
that meets the larger bound is proven optimal. Measured on the ResNet-50 inference layer graph
under ``none`` (6 accelerators, 1 CPU): the main search alone reached 33.4764 in 600 s; the
interleaved search 33.2786 in 300 s. The main search stays first because the interleaved one
proves more slowly (GNMT training ``none``: proven in 32 s by the main search, open after
300 s interleaved).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, ClassVar

from placement.solvers.milp.backends.base import (Backend, RawResult, SolveOptions, Terms, search_log,
                                                  upper_side_only)

#: Beyond this product of a coefficient and a bound in one row, CP-SAT's proofs are not trusted
#: (see the module docstring): half of the ``2^63`` at which they went wrong, and the bound
#: CP-SAT itself keeps a row's activity within.
SAFE_PRODUCT = 2 ** 62

#: With one thread, the share of the time limit that CP-SAT's own search has to prove the optimum
#: before the rest goes to improving the plan (module docstring, "Two phases")
PROOF_SHARE = 0.5

#: No second phase when less than this is left (seconds)
MIN_IMPROVE_S = 0.5


def _combine(status1: str, first: Any, status2: str, second: Any) -> tuple[str, Any, float]:
    """The answer of two phases on one model: its status name, the solver whose solution is the
    best (or the second when neither has one) and the larger bound. A second phase that calls the
    model infeasible after the first found a solution contradicts it and is ignored."""
    has = ("OPTIMAL", "FEASIBLE")
    if status2 == "INFEASIBLE":
        return (status1, first, first.BestObjectiveBound()) if status1 in has else (status2, second, math.inf)
    bound = max(first.BestObjectiveBound(), second.BestObjectiveBound())
    found = [s for st, s in ((status2, second), (status1, first)) if st in has]
    if not found:
        return "UNKNOWN", second, bound
    best = min(found, key=lambda s: s.ObjectiveValue())
    proven = status2 == "OPTIMAL" or best.ObjectiveValue() <= bound
    return ("OPTIMAL" if proven else "FEASIBLE"), best, bound


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
        self._running: Any = None             # the CpSolver searching now, for :meth:`interrupt`
        self._stopped = False

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
        self.tick_variable()
        self._size["variables"] += 1
        if fixed is None:
            self._size["binaries"] += 1
            return self._new(self.model.NewBoolVar(name), 1)
        return self._new(self.model.NewIntVar(fixed, fixed, name), fixed)

    def num_var(self, ub: float, name: str) -> Any:
        self.tick_variable()
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

    def _solver(self, options: SolveOptions, seconds: float | None = None, improve: bool = False) -> Any:
        """A solver for ``seconds`` (default: the time limit); ``improve``: the second phase of
        :meth:`solve` (one thread, CP-SAT's neighbourhood-search subsolvers interleaved)."""
        solver = self._cp.CpSolver()
        solver.parameters.max_time_in_seconds = float(options.time_limit if seconds is None else seconds)
        solver.parameters.num_workers = max(1, int(options.threads))
        solver.parameters.random_seed = int(options.seed)
        solver.parameters.relative_gap_limit = float(options.gap)
        solver.parameters.cp_model_presolve = False  # see the module docstring
        solver.parameters.catch_sigint_signal = False  # Ctrl-C is the caller's (:mod:`..interrupt`)
        if self.full_relaxation:
            solver.parameters.linearization_level = 2
        if not self.solver_cuts:
            solver.parameters.cut_level = 0
        if improve:   # LNS alone: with the full-problem subsolvers OR-Tools 9.15 aborted the process
            solver.parameters.interleave_search = True
            solver.parameters.use_lns_only = True
        return solver

    def _progress(self, options: SolveOptions, offset: float = 0.0, floor: float = -math.inf) -> Any:
        """A solution callback reporting each improving solution, or ``None``; ``offset`` seconds are
        added to CP-SAT's clock and the bound is at least ``floor`` (the first phase's, in the second)."""
        if options.on_solution is None:
            return None
        report = options.on_solution

        class _Progress(self._cp.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                report(self.ObjectiveValue(), max(floor, self.BestObjectiveBound()), offset + self.WallTime())

        return _Progress()

    def _run(self, solver: Any, callback: Any, log: Callable[[str], None] | None) -> tuple[str, float]:
        """Run ``solver`` on the model, its log lines given to ``log`` where there is one (:func:`search_log`):
        its status name and wall seconds."""
        if log is not None:
            solver.parameters.log_search_progress = True
            solver.parameters.log_to_stdout = False
            solver.log_callback = lambda line: log(line + "\n")
        start = time.perf_counter()
        self._running = solver
        if self._stopped:
            solver.parameters.max_time_in_seconds = 0.0
        code = solver.Solve(self.model, callback)
        return solver.StatusName(code), time.perf_counter() - start

    def interrupt(self) -> bool:
        self._stopped = True
        if self._running is not None:
            self._running.StopSearch()
        return True

    def _hint_solution(self, solver: Any) -> None:
        """Replace the model's hint by ``solver``'s solution (every variable)."""
        values = list(solver.ResponseProto().solution)
        self.model.ClearHints()
        hint = self.model.Proto().solution_hint
        hint.vars.extend(range(len(values)))
        hint.values.extend(values)

    def build_stats(self) -> dict[str, Any]:
        """The model's largest coefficient-times-bound product, as a power of two (module docstring)."""
        return {"overflow_risk_log2": round(math.log2(self.overflow_risk), 2) if self.overflow_risk else 0.0}

    def solve(self, options: SolveOptions) -> RawResult:
        single = max(1, int(options.threads)) == 1
        first = self._solver(options, options.time_limit * PROOF_SHARE if single else None)
        with search_log(options.log_path) as log:   # /dev/stdout: after what was printed
            status, wall = self._run(first, self._progress(options), log)
            solver, bound = first, first.BestObjectiveBound()
            phases = [{"status": status, "seconds": round(wall, 3)}]
            branches, conflicts = first.NumBranches(), first.NumConflicts()
            left = options.time_limit - wall
            if single and status in ("FEASIBLE", "UNKNOWN") and left >= MIN_IMPROVE_S and not self._stopped:
                if status == "FEASIBLE":
                    self._hint_solution(first)
                second = self._solver(options, left, improve=True)
                status2, wall2 = self._run(second, self._progress(options, wall, bound), log)
                wall += wall2
                phases.append({"status": status2, "seconds": round(wall2, 3)})
                branches, conflicts = branches + second.NumBranches(), conflicts + second.NumConflicts()
                status, solver, bound = _combine(status, first, status2, second)
        word = self.status_word(status)
        stats = {"solver_status": status, "branches": branches, "conflicts": conflicts,
                 "phases": phases, **self.build_stats()}
        trusted = self.overflow_risk <= SAFE_PRODUCT
        doubt = (f"a coefficient times a bound reaches 2^{math.log2(self.overflow_risk):.1f} in the CP-SAT model, "
                 "beyond what it handles exactly: its proofs are not used") if not trusted else ""
        if word in ("optimal", "feasible"):
            if trusted:
                return RawResult(word, solver.ObjectiveValue(), bound, solver.Value, wall, stats=stats)
            return RawResult("feasible", solver.ObjectiveValue(), None, solver.Value, wall, message=doubt, stats=stats)
        if word == "infeasible":
            if not trusted:
                return RawResult("no_solution", wall_s=wall, stats=stats, message=doubt)
            return RawResult(word, wall_s=wall, stats=stats)
        if word == "no_solution":
            return RawResult(word, bound=bound, wall_s=wall, stats=stats,
                             message=f"CP-SAT stopped after {wall:.2f} s without a solution")
        return RawResult("error", wall_s=wall, stats=stats,
                         message=f"CP-SAT returned {status}: {self.model.Validate()}")
