"""A MILP search that says nothing for a while says that it is still searching, and one that runs past
its time limit says so."""

from __future__ import annotations

import threading
from typing import Callable

import pytest

from placement.solvers.milp import heartbeat as heartbeat_module
from placement.solvers.milp.backends import RawResult, SolveOptions
from placement.solvers.milp.driver import run_solver
from placement.solvers.milp.heartbeat import heartbeat

#: the longest a test waits for a line that should come within a fraction of a second
PATIENCE_S = 60.0


def _heard(lines: list[str], wanted: int) -> tuple[threading.Event, Callable[[str], None]]:
    """A progress callback collecting ``lines``, and an event set once ``wanted`` of them came."""
    enough = threading.Event()

    def progress(line: str) -> None:
        lines.append(line)
        if len(lines) >= wanted:
            enough.set()

    return enough, progress


def test_a_silent_search_says_it_runs_with_the_best_value_known():
    lines: list[str] = []
    enough, progress = _heard(lines, 2)
    with heartbeat(progress, SolveOptions(time_limit=10), unit=0.5, best=7.25, every=0.01) as options:
        assert enough.wait(PATIENCE_S)       # the search "runs" until two lines came
    assert len(lines) >= 2
    for line in lines:
        seconds, rest = line.split(" s  ", 1)
        assert float(seconds) > 0
        assert rest == "still searching, best 7.25"
    assert options.on_solution is not None


def test_an_improving_solution_is_reported_and_becomes_the_best():
    # the model's objective 20 at unit 0.5 is 10 in the instance's units
    solutions: list[tuple[float, float, float]] = []
    lines: list[str] = []
    enough, progress = _heard(lines, 1)
    given = SolveOptions(time_limit=10, on_solution=lambda *args: solutions.append(args))
    with heartbeat(progress, given, unit=0.5, every=0.01) as options:
        options.on_solution(20.0, 12.0, 0.5)
        assert enough.wait(PATIENCE_S)
    assert solutions == [(20.0, 12.0, 0.5)]
    assert lines[0].endswith("  still searching, best 10")


def test_without_a_known_value_the_line_names_no_value():
    lines: list[str] = []
    enough, progress = _heard(lines, 1)
    with heartbeat(progress, SolveOptions(time_limit=10), unit=1.0, every=0.01):
        assert enough.wait(PATIENCE_S)
    assert lines[0].endswith(" s  still searching")


def test_the_watcher_stops_when_the_search_fails():
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="solver crashed"):
        with heartbeat(lines.append, SolveOptions(time_limit=10), unit=1.0, every=0.01):
            raise RuntimeError("solver crashed")
    assert not [t for t in threading.enumerate() if t.name == "milp-heartbeat"]


def test_a_progress_that_raises_stops_the_search_and_reaches_the_caller():
    # before, the error was printed as one of the watcher's thread and the search ran to its limit
    stopped = threading.Event()

    def progress(line: str) -> None:
        raise ValueError("enough")

    with pytest.raises(ValueError, match="^enough$"):
        with heartbeat(progress, SolveOptions(time_limit=10), unit=1.0, every=0.01, stop=stopped.set):
            assert stopped.wait(PATIENCE_S)        # the search is asked to stop
    assert not [t for t in threading.enumerate() if t.name == "milp-heartbeat"]


def test_ctrl_c_while_the_watcher_starts_is_taken_once_it_started(monkeypatch):
    """A SIGINT taken inside ``Thread.start`` broke threading's lock: the command ended with a traceback
    ("release unlocked lock") in place of exit status 130. The start now finishes, the interrupt follows
    before the search begins, and the watcher ends."""
    import signal

    start, started = threading.Thread.start, []

    def interrupted_start(thread):
        if thread.name == "milp-heartbeat":
            signal.raise_signal(signal.SIGINT)
        start(thread)
        started.append(thread.name)

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    searched = []
    with pytest.raises(KeyboardInterrupt):
        with heartbeat(lambda line: None, SolveOptions(time_limit=10), unit=1.0, every=0.01):
            searched.append(True)
    assert started == ["milp-heartbeat"] and searched == []
    assert not [t for t in threading.enumerate() if t.name == "milp-heartbeat"]


def test_without_progress_nothing_runs_and_the_options_are_unchanged():
    given = SolveOptions(time_limit=10)
    with heartbeat(None, given, unit=1.0, every=0.01) as options:
        assert options is given
        assert not [t for t in threading.enumerate() if t.name == "milp-heartbeat"]


class _SilentBackend:
    """A backend that searches, silently, until the heartbeat has spoken twice."""

    name = "silent"
    size = {"variables": 3, "binaries": 2, "rows": 1}

    def __init__(self, enough: threading.Event) -> None:
        self.enough = enough

    def interrupt(self) -> bool:
        return False

    def solve(self, options: SolveOptions) -> RawResult:
        assert self.enough.wait(PATIENCE_S)
        return RawResult("feasible", objective=8.0, bound=6.0, wall_s=0.1)


def test_the_solver_run_speaks_while_the_backend_is_silent(monkeypatch):
    # the starting plan's value 9 is the best known; the backend reports no solution of its own
    monkeypatch.setattr(heartbeat_module, "HEARTBEAT_S", 0.01)
    lines: list[str] = []
    enough, progress = _heard(lines, 3)
    raw = run_solver(_SilentBackend(enough), SolveOptions(time_limit=10), progress, unit=1.0,
                     fallback=(None, 9.0), simple=1.0)
    assert raw.status == "feasible"
    assert lines[0] == "MILP: 3 variables (2 binary), 1 rows; solving with silent, time limit 10 s"
    assert all(line.endswith("  still searching, best 9") for line in lines[1:])


class _SlowBackend:
    """A backend that reports a run of ``wall_s`` seconds, whatever its limit."""

    name = "slow"
    size = {"variables": 1, "binaries": 1, "rows": 1}

    def __init__(self, wall_s: float, message: str = "") -> None:
        self.wall_s, self.message = wall_s, message

    def interrupt(self) -> bool:
        return False

    def solve(self, options: SolveOptions) -> RawResult:
        return RawResult("feasible", objective=8.0, bound=6.0, wall_s=self.wall_s, message=self.message)


def test_a_run_past_its_time_limit_says_so():
    # limit 4 s: 5.5 s is past it by more than the 1 s the solvers' clocks are allowed
    raw = run_solver(_SlowBackend(5.5, "cut short"), SolveOptions(time_limit=4), None, unit=1.0)
    assert raw.message == "cut short; slow overran its time limit of 4 s (5.5 s)"
    assert run_solver(_SlowBackend(4.9), SolveOptions(time_limit=4), None, unit=1.0).message == ""


def test_an_improving_solution_is_reported_with_the_bound_known_before_the_search():
    """The solver's own bound starts at 0 (or its relaxation), while the result reports the larger bound proven
    before the search (the instance's, the DP's): the progress line said "bound 0" for a run whose answer
    said 285.59. It now says the larger of the two, in the instance's units."""
    from types import SimpleNamespace

    from placement.solvers.milp.driver import announce

    said: list[str] = []
    backend = SimpleNamespace(name="cp-sat", size={"variables": 3, "binaries": 2, "rows": 4})
    options = announce(said.append, backend, SolveOptions(time_limit=10), unit=0.5, floor=5.0)
    options.on_solution(14.0, 0.0, 1.25)    # model units: objective 7, bound 0 below the floor
    options.on_solution(12.0, 11.0, 2.5)    # bound 5.5 above it
    assert said == ["MILP: 3 variables (2 binary), 4 rows; solving with cp-sat, time limit 10 s",
                    "     1.25 s  objective 7  bound 5", "     2.50 s  objective 6  bound 5.5"]
