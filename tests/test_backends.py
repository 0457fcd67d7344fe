"""The MILP backend registry: names, declared capabilities, availability, errors, status maps, a toy solve."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from placement.errors import InvalidParameterError, PlacementError, SolverUnavailableError
from placement.solution import Status
from placement.solvers.milp.backends import (BACKENDS, CAPABILITIES, SolveOptions, backend_availability,
                                             backend_capabilities, backend_class, check_backend_available,
                                             check_backend_name, make_backend)

AVAILABLE = [name for name, ok, _ in backend_availability() if ok]
DECLARED = {  # integer_only, warm_start, threads, seed
    "cp-sat": (True, True, True, True),
    "cbc": (False, True, True, False),
    "scip": (False, True, True, True),
    "highs": (False, False, True, True),
    "pulp": (False, True, True, False),
}


def test_the_registry_lists_the_five_backends():
    assert BACKENDS == ("cp-sat", "cbc", "scip", "highs", "pulp")
    for name in BACKENDS:
        assert backend_class(name).name == name


@pytest.mark.skipif("cp-sat" not in AVAILABLE, reason="OR-Tools is not installed")
def test_ctrl_c_while_the_solver_is_imported_stays_an_interrupt():
    """A Ctrl-C that stops OR-Tools' extension module while it initialises comes out of the import as
    ImportError("initialization failed") raised from the KeyboardInterrupt, and was reported as an OR-Tools
    that cannot be imported. An import hook raises the interrupt where the extension imports a module."""
    code = """if True:
        import sys, placement
        class InterruptOnce:
            fired = False
            def find_spec(self, name, path=None, target=None):
                if name == "ortools.util.python.sorted_interval_list" and not InterruptOnce.fired:
                    InterruptOnce.fired = True
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, InterruptOnce())
        try:
            placement.solve("instances/tiny/chain4.json", method="milp", contiguity="none", time_limit=5)
        except KeyboardInterrupt:
            print("interrupted")
        if not InterruptOnce.fired:
            print("not imported from the extension")
        print(placement.solve("instances/tiny/chain4.json", method="milp", contiguity="none").status)
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    if "not imported from the extension" in done.stdout:
        pytest.skip("this OR-Tools initialises its extension without importing the hooked module")
    assert (done.returncode, done.stdout, done.stderr) == (0, "interrupted\noptimal\n", "")


def test_auto_says_why_it_needs_the_missing_milp():
    """Without OR-Tools and PuLP, method 'auto' on a request only the MILP solves said only that the backend
    cannot run; it now says why the MILP was taken, in the library's words and in the command's."""
    code = """if True:
        import json, sys
        sys.modules["ortools"] = sys.modules["pulp"] = None
        import placement
        from placement.cli import main
        try:
            placement.solve("instances/tiny/chain4.json", contiguity="none")
        except placement.SolverUnavailableError as exc:
            print(json.dumps(str(exc)))
        main(["solve", "instances/tiny/diamond-cpu.json", "--objective", "latency"])
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    library = json.loads(done.stdout.splitlines()[0])
    assert library.startswith("method 'auto' solves contiguity='none' with the MILP (the DP solves "
                              "objective='throughput' with contiguity='stages'): MILP backend 'cp-sat' cannot run "
                              "here: OR-Tools")
    assert done.stderr.startswith("error: method 'auto' solves --objective latency with the MILP (the DP solves "
                                  "--objective throughput with --contiguity stages): MILP backend 'cp-sat' cannot "
                                  "run here: OR-Tools")
    assert done.stderr.endswith("pip install 'placement[milp]'\n")


def test_auto_without_the_milp_names_the_options_of_the_command():
    """Where the DP refuses and the MILP it would take is not installed, the command's one line quoted the DP's
    reason in the library's words ("Raise the limit max_ideals"), where the same reason, with the MILP
    installed, names the option (--max-ideals)."""
    code = """if True:
        import sys
        sys.modules["ortools"] = sys.modules["pulp"] = None
        from placement.cli import main
        main(["solve", "instances/tiny/diamond-cpu.json", "--max-ideals", "2", "--quiet"])
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stderr.startswith("error: method 'auto' needs the MILP here, since the DP refuses (more than 2 "
                                  "ideals in the contracted graph (4 supernodes)")
    assert "Raise the limit --max-ideals (time and memory" in done.stderr and "max_ideals" not in done.stderr
    assert done.stderr.endswith("pip install 'placement[milp]'\n") and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("name", BACKENDS)
def test_capabilities_are_as_declared(name):
    assert backend_capabilities(name) == dict(zip(CAPABILITIES, DECLARED[name]))


def test_pulp_solvers_share_the_pulp_capabilities():
    assert backend_capabilities("pulp:GUROBI_CMD") == backend_capabilities("pulp")


def test_importing_the_registry_imports_no_solver():
    code = ("import sys; from placement.solvers.milp.backends import BACKENDS, backend_capabilities;"
            "[backend_capabilities(n) for n in BACKENDS];"
            "print(sorted(m for m in ('ortools', 'pulp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", ["xyz", "pulp:", "cp-sat:x", "CBC", ""])
@pytest.mark.parametrize("call", [check_backend_name, check_backend_available, make_backend, backend_capabilities])
def test_an_unknown_name_is_an_invalid_backend_parameter(call, name):
    with pytest.raises(InvalidParameterError) as info:
        call(name)
    assert info.value.parameter == "backend"
    assert str(info.value) == ("backend must be one of 'cp-sat', 'cbc', 'scip', 'highs', 'pulp' or 'pulp:NAME', "
                               f"not {name!r}")
    assert isinstance(info.value, ValueError)


def test_availability_reports_each_backend():
    rows = backend_availability()
    assert [name for name, _, _ in rows[:5]] == list(BACKENDS)
    for name, ok, detail in rows:
        assert isinstance(ok, bool) and detail and "\n" not in detail
        assert name in BACKENDS or name.startswith("pulp:")
        if ok:
            check_backend_available(name)
        else:
            with pytest.raises(SolverUnavailableError):
                check_backend_available(name)


def _one_line_about(exc: SolverUnavailableError, name: str, hint: str = "pip install 'placement[milp]'") -> str:
    message = str(exc)
    assert isinstance(exc, PlacementError) and not isinstance(exc, ValueError)
    assert "\n" not in message and f"{name!r}" in message
    assert message.endswith(hint)
    assert "placement info" not in message and "--" not in message
    return message


def test_a_missing_pulp_solver_is_unavailable():
    pytest.importorskip("pulp")
    with pytest.raises(SolverUnavailableError) as info:
        check_backend_available("pulp:NOPE")
    assert "knows no solver 'NOPE'" in _one_line_about(info.value, "pulp:NOPE", "name one of PuLP's solvers")


def test_missing_packages_make_every_backend_unavailable():
    """With OR-Tools and PuLP unimportable, each backend says why, and neither check nor construction passes."""
    code = """if True:
        import json, sys
        sys.modules["ortools"] = sys.modules["pulp"] = None  # every import of them fails
        from placement.errors import SolverUnavailableError
        from placement.solvers.milp.backends import (BACKENDS, backend_availability, check_backend_available,
                                                     make_backend)
        errors = []
        for name in BACKENDS:
            for call in (check_backend_available, make_backend):
                try:
                    call(name)
                except SolverUnavailableError as exc:
                    errors.append(str(exc))
        print(json.dumps({"rows": backend_availability(), "errors": errors}))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    found = json.loads(out)
    assert [tuple(row[:2]) for row in found["rows"]] == [(name, False) for name in BACKENDS]
    assert len(found["errors"]) == 2 * len(BACKENDS)
    for (name, _, why), error in zip(found["rows"], found["errors"][::2]):
        assert why.startswith(("OR-Tools", "PuLP")) and why.endswith("(pip install 'placement[milp]')")
        assert error.startswith(f"MILP backend {name!r} cannot run here: {why.split(' (pip')[0]}")
        _one_line_about(SolverUnavailableError(error), name)


def test_a_backend_that_cannot_run_names_those_that_can():
    """With PuLP installed and OR-Tools not, the default backend's refusal asked only for OR-Tools, where
    ``backend='pulp'`` would have solved."""
    pytest.importorskip("pulp")
    code = """if True:
        import sys
        sys.modules["ortools"] = None  # every import of it fails
        from placement.errors import SolverUnavailableError
        from placement.solvers.milp.backends import check_backend_available
        try:
            check_backend_available("cp-sat")
        except SolverUnavailableError as exc:
            print(exc)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MILP backend 'cp-sat' cannot run here: OR-Tools ")
    assert out.endswith("the MILP backends come with pip install 'placement[milp]' (or backend 'pulp', which can run "
                        "here)\n")


@pytest.mark.parametrize("name", BACKENDS)
def test_status_maps_give_status_words(name):
    words = set(backend_class(name).STATUS.values())
    assert words <= {s.value for s in Status}


def test_cpsat_status_map_covers_every_status():
    cp_model_pb2 = pytest.importorskip("ortools.sat.cp_model_pb2")
    assert set(backend_class("cp-sat").STATUS) == set(cp_model_pb2.CpSolverStatus.keys())


def test_pywraplp_status_map_covers_every_result_status():
    pywraplp = pytest.importorskip("ortools.linear_solver.pywraplp")
    for name in ("cbc", "scip", "highs"):
        status = backend_class(name).STATUS
        codes = {getattr(pywraplp.Solver, key) for key in status}
        assert codes == set(range(len(status))) == set(range(7))  # OPTIMAL 0 … NOT_SOLVED 6


def test_pulp_status_map_covers_every_solution_status():
    pulp = pytest.importorskip("pulp")
    cls = backend_class("pulp")
    assert set(cls.STATUS) == set(pulp.LpSolution.values())
    for solution, status in cls.STATUS_EXCEPTIONS:
        assert solution in pulp.LpSolution.values() and status in pulp.LpStatus.values()


@pytest.mark.parametrize("name", AVAILABLE)
def test_toy_model_optimum(name):
    """min −4x + 2y  s.t.  y ≥ 1,  x + y ≤ 11,  y ≤ 0 when x = 1  (x ∈ {0,1}, y ∈ [0,10]).

    Without the enforced row x = 1, y = 1 (−2) would win; with it x = 1 is infeasible: x = 0, y = 1, 2."""
    be = make_backend(name)
    x, y = be.bool_var("x"), be.num_var(10, "y")
    be.add([(1, y)], lo=1)
    be.add([(1, x), (1, y)], hi=11)
    be.add([(1, y)], hi=0, enforce=x)
    be.minimize([(-4, x), (2, y)])
    note = be.hint({x: 0, y: 1})
    assert (note == "") == backend_capabilities(name)["warm_start"]
    assert be.size == {"variables": 2, "binaries": 1, "rows": 3}
    raw = be.solve(SolveOptions(time_limit=10))
    assert raw.status == "optimal", raw.message
    assert math.isclose(raw.objective, 2, abs_tol=1e-6) and math.isclose(raw.bound, 2, abs_tol=1e-6)
    assert round(raw.value(x)) == 0 and math.isclose(raw.value(y), 1, abs_tol=1e-6)


@pytest.mark.parametrize("name", AVAILABLE)
def test_enforced_rows_take_an_upper_side_only(name):
    be = make_backend(name)
    x, y = be.bool_var("x"), be.num_var(10, "y")
    with pytest.raises(ValueError, match="upper side only"):
        be.add([(1, y)], lo=1, enforce=x)


@pytest.mark.parametrize("name", [n for n in AVAILABLE if backend_capabilities(n)["integer_only"]])
def test_integer_only_backends_refuse_fractions(name):
    be = make_backend(name)
    y = be.num_var(10, "y")
    with pytest.raises(ValueError, match="integer"):
        be.add([(0.5, y)], hi=3)


# ----- certified claims: every path by which a backend's claim is downgraded -------------------------

CHAIN4 = "instances/tiny/chain4.json"
# chain4 on two accelerators, stages: {a, b} | {c, d} loads 4 + 3 + 0.5 = 7.5 and 2 + 5 + 0.5 = 7.5; the other
# splits give 11 ({a} | {b, c, d}), 10 ({a, b, c} | {d}) and 14 (one device): the optimum is 7.5.
CHAIN4_OPTIMUM = 7.5


def doctored(monkeypatch, name: str, change) -> None:
    """Make backend ``name`` run its solver, then pass its raw answer through ``change`` (in place)."""
    cls = backend_class(name)
    solve = cls.solve

    def wrapped(self, options):
        raw = solve(self, options)
        change(raw, self)
        return raw

    monkeypatch.setattr(cls, "solve", wrapped)


def solve_chain4(name: str, **options):
    import placement

    return placement.solve(CHAIN4, method="milp", backend=name, warm_start=False, **options)


@pytest.mark.parametrize("name", AVAILABLE)
def test_the_undoctored_answer_is_optimal(name):
    result = solve_chain4(name)
    assert (result.status, result.value, result.bound) == ("optimal", CHAIN4_OPTIMUM, CHAIN4_OPTIMUM), result.message


@pytest.mark.parametrize("name", AVAILABLE)
def test_an_incumbent_that_is_not_the_verified_value_costs_the_claim(name, monkeypatch):
    def lower_incumbent(raw, be):
        raw.objective = raw.objective * 6.5 / 7.5   # model units: 6.5 where the plan's value is 7.5

    doctored(monkeypatch, name, lower_incumbent)
    result = solve_chain4(name)
    assert (result.status, result.value, result.verified) == ("feasible", CHAIN4_OPTIMUM, True)
    assert "incumbent 6.5 is not the verified value 7.5 of its plan" in result.message, result.message


@pytest.mark.parametrize("name", AVAILABLE)
def test_a_bound_above_a_verified_value_is_refuted(name, monkeypatch):
    """The solver's bound 8.5 exceeds the 7.5 of the plan it returned: not a proof, and not reported. The
    instance's simple bound (every node at its fastest, 14, over two accelerators: 7) is."""
    def raise_bound(raw, be):
        raw.bound = raw.objective * 8.5 / 7.5   # model units: 8.5 where the plan's value is 7.5

    doctored(monkeypatch, name, raise_bound)
    result = solve_chain4(name)
    assert (result.status, result.value) == ("feasible", CHAIN4_OPTIMUM), result.message
    assert result.bound == 7.0 and "bound 8.5 is above the verified value 7.5 of its own plan" in result.message


@pytest.mark.parametrize("name", AVAILABLE)
def test_optimal_on_rounded_memory_is_no_proof(name, monkeypatch):
    from placement.solvers.milp import driver
    from placement.solvers.milp.data import prepare

    monkeypatch.setattr(driver, "prepare", lambda *a, **k: dataclasses.replace(prepare(*a, **k), memory_exact=False))
    result = solve_chain4(name)
    assert (result.status, result.value) == ("feasible", CHAIN4_OPTIMUM), result.message
    assert "optimal on memory the model does not decide exactly: not a proof" in result.message


@pytest.mark.parametrize("name", AVAILABLE)
def test_optimal_without_an_objective_is_no_proof(name, monkeypatch):
    def forget(raw, be):
        raw.objective = None

    doctored(monkeypatch, name, forget)
    result = solve_chain4(name)
    assert result.status == "feasible" and "claimed optimal without an objective value" in result.message


@pytest.mark.parametrize("name", [n for n in AVAILABLE if n != "cp-sat"])
def test_infeasible_as_the_time_limit_runs_out_is_no_proof(name):
    """What CBC did at 50 ms on a feasible instance (its preprocessing, cut short by the limit, said
    "Pre-processing says infeasible"): reported at 95% of the limit it is a stop, before 90% a proof."""
    be = make_backend(name)
    if name == "pulp":
        import pulp

        be.minimize([(1, be.num_var(1, "x"))])
        be.problem.status = next(k for k, v in pulp.LpStatus.items() if v == "Infeasible")
        be.problem.sol_status = next(k for k, v in pulp.LpSolution.items() if v == "No Solution Exists")
        late, early = be._result(0.95, None, 1.0), be._result(0.5, None, 1.0)
    else:
        be.minimize([(1, be.num_var(1, "x"))])
        assert be.solve(SolveOptions(time_limit=10)).status == "optimal"  # a solved model to read the status of
        code = be._lp.Solver.INFEASIBLE
        late, early = be._result(code, 0.95, 1.0, []), be._result(code, 0.5, 1.0, [])
    assert late.status == "no_solution" and late.message.endswith(
        f"{name} reported infeasible after 0.95 s, as its time limit ran out: not a proof")
    assert early.status == "infeasible"


def test_pulp_optimal_without_a_bound_is_not_certified():
    pulp = pytest.importorskip("pulp")
    be = make_backend("pulp")
    x = be.num_var(1, "x")
    be.minimize([(1, x)])
    be.problem.status = next(k for k, v in pulp.LpStatus.items() if v == "Optimal")
    be.problem.sol_status = next(k for k, v in pulp.LpSolution.items() if v == "Optimal Solution Found")
    raw = be._result(0.1, None, 10.0)
    assert (raw.status, raw.bound) == ("optimal", None)
    assert raw.message == "pulp gave no bound: its claim of optimality is not certified"


def test_pulp_cbc_is_told_a_thread_count_only_for_several_threads():
    """Told ``threads 1``, CBC runs its threaded search with one worker, whose start it can miss and
    then wait 10 s for; without the option it searches serially."""
    pytest.importorskip("pulp")
    be = make_backend("pulp")
    one = be._solver(SolveOptions(time_limit=5), None)
    assert "threads" not in one.optionsDict and not [o for o in one.getOptions() if o.startswith("threads")]
    assert "threads 2" in be._solver(SolveOptions(time_limit=5, threads=2), None).getOptions()


@pytest.mark.parametrize("stopped", [True, False])
def test_a_pulp_run_that_ends_without_a_solution_file_keeps_its_log(stopped, tmp_path, monkeypatch):
    pulp = pytest.importorskip("pulp")
    be = make_backend("pulp")
    x = be.num_var(1, "x")
    be.minimize([(1, x)])

    def ended(solver):   # as a CBC process that logged, then was ended before it wrote its solution
        with open(solver.optionsDict["logPath"], "w", encoding="utf-8") as fh:
            fh.write("Welcome to the CBC MILP Solver\n")
        be._stopped = stopped
        raise pulp.PulpSolverError("Pulp: Error while trying to execute cbc")

    monkeypatch.setattr(be.problem, "solve", ended)
    log = tmp_path / "solver.log"
    raw = be.solve(SolveOptions(time_limit=5, log_path=str(log)))
    assert log.read_text(encoding="utf-8") == "Welcome to the CBC MILP Solver\n"
    if stopped:
        assert (raw.status, raw.stopped) == ("no_solution", True)
        assert raw.message == "PuLP's PULP_CBC_CMD was stopped before it wrote a solution"
    else:
        assert (raw.status, raw.stopped) == ("error", False)
        assert raw.message == "PuLP's PULP_CBC_CMD failed: Pulp: Error while trying to execute cbc"


def test_a_heuristic_never_claims_optimal_or_infeasible():
    """certified() keeps what the method can prove: a heuristic's 'optimal' becomes 'feasible' (its bound
    dropped), its 'infeasible' 'no_solution'; an exact method's 'optimal' needs its bound at its value."""
    from placement.plan import DeviceAssignment, Plan
    from placement.solution import Solution
    from placement.solvers.registry import METHODS
    from placement.solving import certified

    plan = Plan((DeviceAssignment("accelerator", (1, 2, 3, 4)),))
    claim = Solution(Status.OPTIMAL, plan, 14.0, 14.0, "greedy")
    greedy = certified(METHODS["greedy"], claim)
    assert (greedy.status, greedy.bound) == (Status.FEASIBLE, 0.0)
    assert greedy.message == "method 'greedy' is a heuristic; its 'optimal' is no proof: reported as feasible"
    nothing = certified(METHODS["greedy"], Solution(Status.INFEASIBLE, None))
    assert nothing.status is Status.NO_SOLUTION
    assert nothing.message == "method 'greedy' is a heuristic; its 'infeasible' is no proof: reported as no_solution"
    loose = certified(METHODS["dp"], Solution(Status.OPTIMAL, plan, 14.0, 13.0, "dp"))
    assert (loose.status, loose.bound) == (Status.FEASIBLE, 13.0)
    assert loose.message == ("method 'dp' claimed optimal with the bound 13.0 below its value 14.0: "
                             "reported as feasible")
    assert certified(METHODS["dp"], Solution(Status.OPTIMAL, plan, 14.0, 14.0, "dp")) is not None
    assert certified(METHODS["dp"], Solution(Status.OPTIMAL, plan, 14.0, 14.0, "dp")).status is Status.OPTIMAL


def test_a_heuristic_claiming_optimal_is_reported_feasible_by_solve(monkeypatch):
    import placement
    from placement.solvers.baselines import greedy

    original = greedy.solve_greedy

    def boastful(*args, **kwargs):
        solution = original(*args, **kwargs)
        return dataclasses.replace(solution, status=Status.OPTIMAL, bound=solution.objective)

    monkeypatch.setattr(greedy, "solve_greedy", boastful)
    result = placement.solve(CHAIN4, method="greedy")
    assert result.status == "feasible" and result.verified
    assert "method 'greedy' is a heuristic; its 'optimal' is no proof: reported as feasible" in result.message


# ----- one deadline for the whole call ------------------------------------------------------------

def past() -> float:
    import time

    return time.perf_counter() - 1.0


def test_the_solver_gets_what_is_left_of_the_deadline():
    import time

    assert SolveOptions(time_limit=10).left() == 10
    assert SolveOptions(time_limit=10, deadline=past()).left() == 0.0
    left = SolveOptions(time_limit=10, deadline=time.perf_counter() + 100).left(reserve=1.0)
    assert left == 10                                   # the solver's own limit is the smaller
    assert 0 < SolveOptions(time_limit=10, deadline=time.perf_counter() + 5).left(reserve=1.0) <= 4


@pytest.mark.parametrize("name", AVAILABLE)
def test_no_time_left_for_the_solver_returns_the_verified_start(name):
    """With the deadline passed, neither is chain4's model built nor the solver run (it used to build the
    model, which takes the longest on large graphs, and then find no time to solve it): the start,
    verified, comes back as feasible (11: {a} | {b, c, d})."""
    from placement.io.tarnawski import read_instance
    from placement.plan import DeviceAssignment, Plan
    from placement.solvers.milp import solve_milp

    problem = read_instance(CHAIN4)
    start = Plan((DeviceAssignment("accelerator", (1,)), DeviceAssignment("accelerator", (2, 3, 4))))
    solution = solve_milp(problem, backend=name, warm_start=start, deadline=past())
    assert (solution.status, solution.objective, solution.plan) == (Status.FEASIBLE, 11.0, start)
    assert solution.message.startswith("the time limit ran out before the model was built; the starting plan is returned")
    cold = solve_milp(problem, backend=name, deadline=past())
    assert (cold.status, cold.plan) == (Status.NO_SOLUTION, None)


def test_model_building_stops_at_the_deadline(monkeypatch):
    """A 40-node model has thousands of variables and rows: with the deadline passing once the build has
    begun, building stops at the first look at the clock (variable 512, after the model's first 10 rows),
    and the start is returned as it is. (A deadline already past skips the build.)"""
    from placement.plan import DeviceAssignment, Plan
    from placement.solvers.milp import solve_milp
    from placement.solvers.milp.backends import base
    from tests.test_milp_stages import random_problem

    begin = base.Backend.start_build
    monkeypatch.setattr(base.Backend, "start_build",
                        lambda self, deadline, progress, time_limit=None: begin(self, past(), progress, time_limit))
    problem = random_problem(40, seed=1)
    on_cpu = Plan((DeviceAssignment("cpu", tuple(n.id for n in problem.nodes)),))
    solution = solve_milp(problem, backend="cp-sat", warm_start=on_cpu, time_limit=60)
    assert solution.status is Status.FEASIBLE and solution.plan == on_cpu
    assert solution.message.startswith("the time limit ran out while the cp-sat model was built (512 variables, "
                                       "10 rows)")
    assert solve_milp(problem, backend="cp-sat", time_limit=60).status is Status.NO_SOLUTION


def _dp_out_of_time(monkeypatch):
    """The DP stops at its deadline once its upper bound (the chain DP's plan) is in hand, and the chain DP
    the warm start would run again gets no time, as where the deadline has passed."""
    from placement.errors import LimitExceededError
    from placement.solvers import dp
    from placement.solvers.milp import warmstart

    def out_of_time(*args, **kwargs):
        raise LimitExceededError("the time limit ran out while the DP ran (dp: 0/9 ideals)", parameter="time_limit")

    monkeypatch.setattr(dp, "best_plan", out_of_time)
    monkeypatch.setattr(warmstart, "solve_chain", out_of_time)


def test_the_warm_start_keeps_the_plan_the_dp_held_when_its_time_ran_out(monkeypatch):
    """The DP finds the chain DP's plan as its upper bound before it fills its table; when its share of the
    time limit ran out there, the warm start fell back on the chain DP over intervals and dropped that
    better plan (three parallel chains of 150 nodes: 311.905 started the MILP where the DP held 311.505)."""
    from placement.solvers.dp import solve_chain
    from placement.solvers.milp import warmstart
    from placement.verification.evaluate import evaluate
    from tests.test_milp_stages import random_problem

    problem = random_problem(12, seed=3)   # the DP's optimum 12.75, the chain DP's plan 14.25, the intervals' 15.75
    assert evaluate(problem, solve_chain(problem).plan).max_load == 14.25
    _dp_out_of_time(monkeypatch)
    said: list[str] = []
    start = warmstart.warm_start_and_bound(problem, progress=said.append)[0]
    assert evaluate(problem, start).max_load == 14.25
    assert said[-1] == ("warm start from the plan the DP held (14.25): the chain DP stopped (the time limit ran "
                        "out while the DP ran (dp: 0/9 ideals))")


def test_auto_starts_the_milp_from_the_plan_the_dp_held_when_its_time_ran_out(monkeypatch):
    """Under ``auto`` with a time limit, the DP that ran out of time handed the MILP nothing: the MILP's own
    warm start ran the DP again, with no time left, and started from the intervals' plan."""
    import placement
    from placement.solvers.milp import entry
    from placement.verification.evaluate import evaluate
    from tests.test_milp_stages import random_problem

    problem = random_problem(12, seed=3)
    _dp_out_of_time(monkeypatch)
    started: list = []

    def solve_milp(instance, **kwargs):
        started.append(kwargs["warm_start"])
        raise RuntimeError("the MILP is not run here")

    monkeypatch.setattr(entry, "solve_milp", solve_milp)
    with pytest.raises(RuntimeError, match="the MILP is not run here"):
        placement.solve(problem, time_limit=30)
    assert len(started) == 1 and evaluate(problem, started[0]).max_load == 14.25


def test_past_its_deadline_the_warm_start_is_the_plan_of_the_intervals(monkeypatch):
    """The chain DP over intervals has its grace past the deadline, to give a plan at all; the chain DP over
    every prefix, which only improves on it, is not run once the deadline has passed (it overran a 5 s limit
    by a second on a graph of 56,000 nodes)."""
    from placement.solvers.chain_dp import solve_coarse_chain
    from placement.solvers.dp import deadline_watch, solve_chain
    from placement.solvers.milp import warmstart
    from placement.solvers.milp.warmstart import default_warm_start
    from placement.verification.evaluate import evaluate
    from tests.test_milp_stages import random_problem

    problem = random_problem(12, seed=3)   # the DP's optimum 12.75, the chain DP's plan 14.25, the intervals' 15.75
    assert evaluate(problem, default_warm_start(problem)).max_load == 12.75
    assert evaluate(problem, solve_chain(problem).plan).max_load == 14.25
    monkeypatch.setattr(warmstart, "GRACE_S", 3600.0)   # its grace past the deadline (milliseconds needed here)
    said: list[str] = []
    late = warmstart.warm_start_and_bound(problem, progress=said.append, deadline=past())[0]
    assert late == solve_coarse_chain(problem).plan and evaluate(problem, late).max_load == 15.75
    assert said[-1] == ("warm start from the chain DP over intervals (15.75): the chain DP stopped (not run: the "
                        "time limit ran out, and the intervals gave a plan)")
    with pytest.raises(PlacementError) as raised:
        deadline_watch(past())("1,234 ideals")
    assert raised.value.parameter == "time_limit"
    assert str(raised.value) == "the time limit ran out while the DP ran (1,234 ideals)"


def test_the_dp_polls_its_deadline_between_progress_lines():
    """A short deadline is checked after every chunk of ideals, not only with the progress lines (about
    one a second): a watch whose deadline passes once the table is under way stops the DP within it.
    The chain of 1,280 nodes has 1,281 ideals, filled in chunks of at most 256; each chunk ends in a progress
    line or, within a second of the last one, a poll (which of the two depends on the machine's speed
    and on whether the kernels compile first, so the watch counts both)."""
    import re
    import time

    from placement.solvers.dp import _DeadlineWatch, deadline_watch, solve_dp
    from tests.test_dp_memory import line

    chunks: list[str] = []

    class Watch(_DeadlineWatch):
        def _stop_if_late(self, message: str) -> None:
            if re.match(r"dp, try 1 of \d: [\d,]+/", message):
                chunks.append(message)
                if len(chunks) == 2:
                    self.deadline = time.perf_counter() - 1.0   # the deadline has passed as the second chunk ends
            super()._stop_if_late(message)

    with pytest.raises(PlacementError) as raised:
        solve_dp(line(1280), progress=Watch(math.inf, None))
    assert raised.value.parameter == "time_limit"
    # the first of its tries under ceilings near the lower bound (each try's lines are numbered); chunks hold
    # 256 ideals at most, fewer after a slow one (the first call may compile the kernel)
    ends = [int(m.split(": ")[1].split("/")[0].replace(",", "")) for m in chunks]
    assert len(ends) == 2 and 0 < ends[0] <= 256 and ends[0] < ends[1] <= ends[0] + 256
    assert str(raised.value).startswith(f"the time limit ran out while the DP ran (dp, try 1 of 7: {ends[1]:,}/1,281 "
                                        "ideals (")
    assert isinstance(deadline_watch(math.inf), _DeadlineWatch) and deadline_watch(None) is None


def test_the_dp_keeps_its_deadline_while_it_finds_its_upper_bound():
    """A chain of 1,280 nodes with one more node beside it is no prefix family: the DP first runs the chain
    DP for its upper bound, which heeded no deadline (a 40,001-node such graph overran a 2 s limit by 7.7 s).
    A deadline that passes in the chain DP's first chunk stops it there."""
    import time

    from placement.problem.instance import Edge, Node, make_two_type_problem
    from placement.solvers.dp import _DeadlineWatch, solve_dp
    from tests.test_dp_memory import line

    chain = line(1280)
    beside = Node(9999, "beside", (1.0, 10.0), out_cost=0.1)
    problem = make_two_type_problem((*chain.nodes, beside), (*chain.edges, Edge(0, 9999)), 3, 1, math.inf)

    class Watch(_DeadlineWatch):   # the first chunk ends in a poll or a progress line: either stops it
        def _stop_if_late(self, message: str) -> None:
            if message.startswith("chain"):
                self.deadline = time.perf_counter() - 1.0
            super()._stop_if_late(message)

    with pytest.raises(PlacementError) as raised:
        solve_dp(problem, progress=Watch(math.inf, None))
    # the three orders tried are two distinct ones here, so the line says which it is about
    assert str(raised.value).startswith("the time limit ran out while the DP ran (chain, order 1 of 2, try 1 of 7: "
                                        "256/1,282 ideals (20%), ")


def test_the_chain_dp_stopped_in_a_later_order_keeps_the_plan_of_the_earlier_ones():
    """The chain + one node beside it has two distinct orders; a deadline that passes as the second
    starts leaves the first order's plan, which was thrown away (a 10,000-node layered graph under
    auto --time-limit 5 ended with no plan)."""
    import time

    from placement.problem.instance import Edge, Node, make_two_type_problem
    from placement.solvers.chain_dp import solve_chain, topological_orders
    from placement.solvers.dp import _DeadlineWatch
    from placement.solvers.dp_table import best_plan, build_graph, build_layers, prefix_family
    from placement.solvers.ideals import contract
    from placement.verification.evaluate import evaluate
    from tests.test_dp_memory import line

    chain = line(1280)
    beside = Node(9999, "beside", (1.0, 10.0), out_cost=0.1)
    problem = make_two_type_problem((*chain.nodes, beside), (*chain.edges, Edge(0, 9999)), 3, 1, math.inf)

    class Watch(_DeadlineWatch):
        def _stop_if_late(self, message: str) -> None:
            if message.startswith("chain, order 2 of 2"):
                self.deadline = time.perf_counter() - 1.0
            super()._stop_if_late(message)

    found = solve_chain(problem, progress=Watch(math.inf, None))
    contraction = contract(problem)
    first = topological_orders(contraction)[0]
    _, value, plan = best_plan(problem, build_graph(problem, contraction), build_layers(problem),
                               prefix_family(first), math.inf, None, "chain")
    assert found.status is Status.FEASIBLE and found.plan == plan and found.objective == value
    assert evaluate(problem, found.plan, "stages").valid


def test_a_warm_start_the_chain_dp_cannot_make_is_the_intervals_or_the_greedy_fill_or_none_not_an_error(
        monkeypatch):
    """Where the DP and the chain DP both refuse (tables past the memory a count of 10^9 devices of two
    types would need, or the time limit: a 20,000-node random graph ended with no plan at all), the MILP
    starts from the chain DP over intervals of a topological order (a pipeline); where that finds none,
    from the greedy fill, found in linear time; where the greedy fill takes no such instance (three
    device types), from every node on the one device that runs them fastest, and where no device holds them
    all, from nothing, saying why. The refusal used to end the run."""
    from placement.errors import LimitExceededError
    from placement.io.tarnawski import read_instance
    from placement.solution import Solution
    from placement.solvers.baselines.greedy import solve_greedy
    from placement.solvers.chain_dp import solve_coarse_chain
    from placement.solvers.milp import warmstart
    from placement.verification.evaluate import evaluate
    from tests.test_milp_stages import random_problem

    def refuse(*args, **kwargs):
        raise LimitExceededError("the DP's tables would take up to about 179.1 GiB", parameter="max_ideals")

    monkeypatch.setattr(warmstart, "solve_dp", refuse)
    monkeypatch.setattr(warmstart, "solve_chain", refuse)
    problem = random_problem(12, seed=3)
    intervals = solve_coarse_chain(problem)
    said: list[str] = []
    assert warmstart.default_warm_start(problem, progress=said.append) == intervals.plan
    assert evaluate(problem, intervals.plan, "stages").valid
    assert said[-1] == (f"warm start from the chain DP over intervals ({intervals.objective:.6g}): the chain DP "
                        "stopped (the DP's tables would take up to about 179.1 GiB)")
    monkeypatch.setattr(warmstart, "solve_coarse_chain",
                        lambda *args, **kwargs: Solution(Status.NO_SOLUTION, None, math.inf, 0.0, "chain-dp"))
    greedy = solve_greedy(problem, objective="throughput")
    said.clear()
    assert warmstart.default_warm_start(problem, progress=said.append) == greedy.plan
    assert said == [f"warm start from the greedy fill ({greedy.objective:.6g}): the chain DP stopped (the DP's "
                    "tables would take up to about 179.1 GiB)"]
    said.clear()   # three types: every node on the one that runs them fastest (fast: 4 + 4 + 4 + 4)
    three = read_instance("instances/tiny/three-types.json")
    whole = warmstart.default_warm_start(three, progress=said.append)
    assert [(d.type, d.nodes) for d in whole.devices] == [("fast", (1, 2, 3, 4))]
    assert said == ["warm start from every node on one device (16): the chain DP stopped (the DP's tables would "
                    "take up to about 179.1 GiB)"]
    said.clear()   # no device holds them all (memory 3 for sizes 1 + 1 + 1 + 1; the CPU runs neither b nor c)
    assert warmstart.default_warm_start(three.with_devices(memory={"fast": 3, "slow": 3}),
                                        progress=said.append) is None
    assert said == ["no warm start: the DP's tables would take up to about 179.1 GiB"]


def test_cbc_infeasible_by_its_own_clock_at_the_limit_is_no_proof():
    """CBC counts CPU seconds against its limit; with several threads they run ahead of the wall clock, so
    its log decides. The tail of a run that called a feasible 40-node model infeasible at a 0.05 s limit."""
    from placement.solvers.milp.backends.base import RawResult, cbc_limit_infeasible

    log = ("Cut generators found to be infeasible! (or unbounded)\nPre-processing says infeasible or unbounded\n"
           "Total time (CPU seconds):       0.05   (Wallclock seconds):       0.12\n")
    late = cbc_limit_infeasible(RawResult("infeasible"), log, 0.05, "cbc")
    assert late.status == "no_solution"
    assert late.message == "cbc reported infeasible after 0.05 s, as its time limit ran out: not a proof (CBC's clock)"
    assert cbc_limit_infeasible(RawResult("infeasible"), log, 10.0, "cbc").status == "infeasible"
    assert cbc_limit_infeasible(RawResult("optimal", 1.0, 1.0), log, 0.05, "cbc").status == "optimal"


def test_cbc_infeasible_that_its_log_doubts_is_no_proof():
    """CBC through OR-Tools called a model with a plan infeasible (sizes 1e-9 and 0.7 under a bound of
    0.7), and said so itself in its log."""
    from placement.solvers.milp.backends.base import RawResult, cbc_limit_infeasible

    log = ("Presolve determined that the problem was infeasible with tolerance of 1e-08\n"
           "Postprocessed model is infeasible - possible tolerance issue - try without preprocessing\n")
    doubted = cbc_limit_infeasible(RawResult("infeasible"), log, 10.0, "cbc")
    assert doubted.status == "no_solution"
    assert doubted.message == "cbc reported infeasible, but its log says 'possible tolerance issue': not a proof"


@pytest.mark.skipif("cp-sat" not in AVAILABLE, reason="OR-Tools is not installed")
def test_full_relaxation_sets_cpsat_linearization():
    """CP-SAT keeps enforced rows out of its LP at its default level 1; a formulation that asks for
    the full relaxation gets level 2, and the stages formulation asks for it."""
    from placement.solvers.milp.backends.cpsat import CpSatBackend
    from placement.solvers.milp.stages import Stages
    from placement.solvers.milp.none import NoContiguity
    from placement.solvers.milp.sets import ContiguousSets

    be = CpSatBackend()
    assert be._solver(SolveOptions(time_limit=1.0)).parameters.linearization_level == 1
    be.full_relaxation = True
    assert be._solver(SolveOptions(time_limit=1.0)).parameters.linearization_level == 2
    assert (Stages.full_relaxation, NoContiguity.full_relaxation,
            ContiguousSets.full_relaxation) == (True, False, False)


@pytest.mark.skipif("cp-sat" not in AVAILABLE, reason="OR-Tools is not installed")
def test_solver_cuts_off_sets_cpsat_cut_level_zero():
    """CP-SAT adds its own cuts at cut level 1; the stages formulation, whose proofs go faster on the
    plain LP, asks for none, and the assignment formulations keep them."""
    from placement.solvers.milp.backends.cpsat import CpSatBackend
    from placement.solvers.milp.stages import Stages
    from placement.solvers.milp.none import NoContiguity
    from placement.solvers.milp.sets import ContiguousSets

    be = CpSatBackend()
    assert be._solver(SolveOptions(time_limit=1.0)).parameters.cut_level == 1
    be.solver_cuts = False
    assert be._solver(SolveOptions(time_limit=1.0)).parameters.cut_level == 0
    assert (Stages.solver_cuts, NoContiguity.solver_cuts, ContiguousSets.solver_cuts) == (False, True, True)


def test_a_pulp_solver_process_that_fails_is_an_error_not_a_traceback(monkeypatch):
    # PuLP raises PulpSolverError when its solver's process dies ("Error while trying to execute ...")
    if not any(name == "pulp" and ok for name, ok, _ in backend_availability()):
        pytest.skip("PuLP is not installed")
    import pulp

    be = make_backend("pulp")
    x = be.bool_var("x")
    be.minimize([(1, x)])

    def crash(*args, **kwargs):
        raise pulp.PulpSolverError("Error while trying to execute cbc\n(more)")

    monkeypatch.setattr(be.problem, "solve", crash)
    raw = be.solve(SolveOptions(time_limit=5))
    assert (raw.status, raw.message) == ("error", "PuLP's PULP_CBC_CMD failed: Error while trying to execute cbc")


def test_pulp_ignores_a_start_outside_a_variables_bounds():
    """PuLP raised a ValueError on a start value above a variable's upper bound (a variable the model
    fixed to 0); the start is ignored instead, and says why."""
    if "pulp" not in AVAILABLE:
        pytest.skip("PuLP is not installed")
    be = make_backend("pulp")
    x, y = be.bool_var("x", fixed=0), be.bool_var("y")
    be.add([(1, x), (1, y)], lo=1)
    be.minimize([(1, y)])
    assert be.hint({x: 1.0, y: 0.0}) == f"warm start ignored: it sets {x.name} to 1, outside its bounds [0, 0]"
    raw = be.solve(SolveOptions(time_limit=10))
    assert raw.status == "optimal" and round(raw.value(y)) == 1


def test_a_long_model_build_says_how_far_it_is(monkeypatch):
    """While a model is built the progress hears, every BUILD_NEWS_S seconds, how many variables and rows it
    has (here every 512 rows, with the interval at 0); the counts only grow, and end at the model's size."""
    import placement
    from placement.solvers.milp.backends import base
    from tests.test_milp_stages import random_problem

    monkeypatch.setattr(base, "BUILD_NEWS_S", 0.0)
    said: list[str] = []
    result = placement.solve(random_problem(40, seed=1), method="milp", contiguity="none", warm_start=False,
                             time_limit=5, progress=said.append)
    news = [line for line in said if line.startswith("  building the model: ")]
    assert news, said
    counts = [tuple(int(n.replace(",", "")) for n in line.split(": ")[1].split(" rows")[0].split(" variables, "))
              for line in news]
    assert counts == sorted(counts)
    assert counts[-1][0] <= result.stats["variables"] and counts[-1][1] <= result.stats["rows"]
    # one line per look at the clock: every 512 rows, every 512 variables, and between long steps
    assert len(news) >= result.stats["rows"] // 512 + result.stats["variables"] // 512 > 0


def test_a_latency_start_comes_from_the_chain_dp_over_intervals_where_the_others_give_none(monkeypatch):
    """Its pipeline, one call per device in pipeline order, is a latency plan: with the chain DP refused and
    the latency baselines taking nothing, the start for two stages is its plan."""
    from placement.errors import LimitExceededError
    from placement.solvers.chain_dp import solve_coarse_chain
    from placement.solvers.milp import warmstart
    from placement.verification.latency import evaluate_latency
    from tests.test_milp_stages import random_problem

    def refuse(*args, **kwargs):
        raise LimitExceededError("the time limit ran out while the DP ran (chain)", parameter="time_limit")

    def takes_nothing(*args, **kwargs):
        raise PlacementError("not this catalogue")

    monkeypatch.setattr(warmstart, "solve_chain", refuse)
    for name in ("solve_latency_greedy", "solve_latency_chain", "solve_latency_modules"):
        monkeypatch.setattr(warmstart, name, takes_nothing)
    problem = random_problem(12, seed=3)
    start = warmstart.default_warm_start(problem, objective="latency", stages=2)
    assert start == solve_coarse_chain(problem, stages=2).plan and start.non_empty == 2
    assert evaluate_latency(problem, start).valid


@pytest.mark.parametrize("backend", [name for name in ("highs", "cbc", "scip") if name in AVAILABLE])
def test_the_wait_for_another_solve_counts_against_the_time_limit(monkeypatch, backend):
    # HiGHS, CBC and SCIP take turns on the process's standard output; the turn waited for is time the
    # call's limit counts (the solver gets what is left), and the answer says so. Here a clock that
    # jumps 5 s while the turn is asked for stands for another thread's solve.
    import time
    from types import SimpleNamespace

    import placement
    from placement.solvers.milp.backends import linear_solver

    asked: list[float] = []

    def clock() -> float:
        asked.append(1.0)
        return time.perf_counter() + (0.0 if len(asked) == 1 else 5.0)

    monkeypatch.setattr(linear_solver, "time", SimpleNamespace(perf_counter=clock))
    chain4 = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    result = placement.solve(chain4, method="milp", backend=backend, contiguity="none",
                             warm_start=False)
    assert (result.status.value, result.value) == ("optimal", 7.5)
    assert result.message.endswith(f"{backend} waited 5.0 s for another solve in this process to end, which its "
                                   "time limit counts")


@pytest.mark.parametrize("name", ["cbc", "pulp"])
def test_a_solver_that_needs_a_working_directory_is_refused_where_it_was_removed(tmp_path, monkeypatch, name):
    # CBC behind OR-Tools ended the whole process there (std::bad_alloc); PuLP raised FileNotFoundError
    pytest.importorskip("ortools" if name == "cbc" else "pulp")
    import placement

    chain = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    why = ("the working directory cannot be read (No such file or directory), and this solver needs one")
    with pytest.raises(SolverUnavailableError) as caught:
        placement.solve(chain, method="milp", backend=name, warm_start=False)
    assert str(caught.value) == f"MILP backend {name!r} cannot run here: {why}; run it from a folder that exists"
    rows = {row[0]: row for row in backend_availability()}
    assert rows[name] == (name, False, f"{why} (run it from a folder that exists)")
    assert rows["cp-sat"][1] is True


@pytest.mark.parametrize("name", ["cp-sat", "another-integer-backend"])
def test_the_memory_note_follows_the_integer_capability_not_the_name(name):
    """An integer-only backend rounds memory conservatively, whatever it is called; a floating-point one
    compares it within its tolerances, so its proof is not used."""
    from placement.solvers.milp.data import Scaling
    from placement.solvers.milp.driver import data_notes

    exact = Scaling(1.0, True)
    assert data_notes(exact, False, name, integer_only=True) == [
        "memory rounded conservatively (sizes up, bounds down): the bound is the simple one"]
    assert data_notes(exact, False, name, integer_only=False)[0].startswith(
        f"the memory data differ by steps finer than {name}'s tolerances")
    assert data_notes(exact, True, name, integer_only=True) == []
