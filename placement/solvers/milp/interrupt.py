"""Ctrl-C while a MILP backend searches.

Python delivers SIGINT to the main thread as a :class:`KeyboardInterrupt`, but only when that
thread runs Python code, and a solver's search is one long call into compiled code: the
interrupt waited for the search to end (CP-SAT, CBC and HiGHS searched on to their time
limits, and SCIP, stopped by its own handler, was reported as an ordinary result). So
:func:`solve_interruptibly` runs the search in a worker thread while the main thread waits, where
the interrupt reaches it at once (the process's SIGINT handler is restored every
:data:`REASSERT_S` seconds, as CBC and SCIP replace it with their own); the backend is then asked to stop
(:meth:`~placement.solvers.milp.backends.base.Backend.interrupt`), given
:data:`INTERRUPT_GRACE_S` seconds to return (a SIGINT within :data:`ECHO_S` of the first is that
signal delivered again, :func:`absorb_echoes`), and a :class:`SearchInterrupted` (a
:class:`KeyboardInterrupt`) carrying its answer goes on to the caller, which makes its best plan of
that answer and of its starting plan; a second Ctrl-C in that wait goes on as a plain
:class:`KeyboardInterrupt`. A solver that takes no such request (HiGHS and CBC behind OR-Tools) is left to finish in
its daemon thread, which ends with the process. A solver still searching well past its time limit
(:data:`OVERRUN_GRACE_S`, :data:`OVERRUN_SHARE`) is asked to stop the same way, and its result says so;
one that cannot be stopped is left to finish in its thread as after Ctrl-C, and the answer is a stop
without a plan (the caller then has its starting plan): CBC behind OR-Tools does not look at its clock
while it solves the root LP, which took 40 s under a limit of 5 s. At the interpreter's exit such a
search is waited for (:func:`_wait_for_left_searches`): OR-Tools aborts a process torn down under a
running solver. A search that has not started, waiting for such a one to give back the process's output
(:func:`placement.solvers.native_output.held_by_another`), is not given up on: its backend counts the wait
in its own limit.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any

from placement.sigint import ECHO_S, absorb_echoes, held_interrupts
from placement.solvers.milp.backends.base import Backend, RawResult, SolveOptions

#: seconds a stopped solver is given to return before the interrupt goes on without it
INTERRUPT_GRACE_S = 5.0
#: a solver still running this many seconds, or this share of its time limit if more, past the limit is
#: asked to stop as Ctrl-C would (PuLP's CBC, CP-SAT and SCIP stop; HiGHS and CBC behind OR-Tools cannot be)
OVERRUN_GRACE_S, OVERRUN_SHARE = 2.0, 0.25
#: seconds between two restorings of the process's SIGINT handler while a solver runs
REASSERT_S = 0.2
#: the name of the thread a search runs in
SOLVER_THREAD = "milp-solve"


def _wait_for_left_searches() -> None:
    """Wait for the searches still running in their threads to end, so that the interpreter is not torn down
    under a running solver; a process that must end at once (the command line) calls ``os._exit``."""
    for thread in threading.enumerate():
        if thread.name == SOLVER_THREAD and thread is not threading.current_thread():
            thread.join()


def _leave_running() -> None:
    """Have the interpreter's exit wait for the searches left running (:func:`_wait_for_left_searches`),
    registered once however many are left."""
    atexit.unregister(_wait_for_left_searches)
    atexit.register(_wait_for_left_searches)


def _waiting_for_turn(worker: threading.Thread) -> bool:
    """Whether the search of ``worker`` waits for another's redirection of the output to end
    (:func:`placement.solvers.native_output.held_by_another`; that module not loaded: none runs)."""
    redirections = sys.modules.get("placement.solvers.native_output")
    return (redirections is not None and worker.ident is not None
            and redirections.held_by_another(worker.ident))


def still_searching() -> bool:
    """Whether a search that Ctrl-C left behind still runs in its thread (one that cannot be stopped, or a
    second Ctrl-C that did not wait for it): a process should then end without tearing it down."""
    return any(t.name == SOLVER_THREAD and t.is_alive() for t in threading.enumerate())


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a backend's search: ``raw`` is its answer where it returned in time (else ``None``),
    and ``solution`` the :class:`placement.solution.Solution` the driver concluded from it and its
    starting plan (set by :func:`placement.solvers.milp.outcome.conclude`)."""

    def __init__(self, raw: RawResult | None = None, solution: Any = None) -> None:
        super().__init__("interrupted")
        self.raw = raw
        self.solution = solution


def _reassert_sigint() -> None:
    """Install again the SIGINT handler Python knows of: CBC and SCIP put their own in its place
    when they start, which swallowed Ctrl-C."""
    current = signal.getsignal(signal.SIGINT)
    if current is not None:
        signal.signal(signal.SIGINT, current)


def _wait_held(event: threading.Event, seconds: float) -> bool:
    """``event.wait(seconds)`` with Ctrl-C held back until it returns (:func:`held_interrupts`): an interrupt
    is then taken at most ``seconds`` late."""
    with held_interrupts():
        return event.wait(seconds)


def solve_interruptibly(be: Backend, options: SolveOptions) -> RawResult:
    """``be.solve(options)``, with Ctrl-C stopping it (module docstring), and a search far past its time
    limit asked to stop. Off the main thread no interrupt arrives, and only the time limit is watched."""
    main = threading.current_thread() is threading.main_thread()
    outcome: dict[str, Any] = {}
    finished = threading.Event()   # not Thread.join: interrupted, it may take a running thread for ended

    def work() -> None:
        try:
            outcome["raw"] = be.solve(options)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            finished.set()

    grace = max(OVERRUN_GRACE_S, OVERRUN_SHARE * options.time_limit)
    began = time.perf_counter()
    late = began + options.time_limit + grace
    asked, stopped = False, False
    try:
        worker = threading.Thread(target=work, name=SOLVER_THREAD, daemon=True)
        with held_interrupts():   # Ctrl-C inside Thread.start or Event.wait broke their lock (placement.sigint)
            worker.start()
        while not _wait_held(finished, REASSERT_S):
            if main:   # only the main thread may set signal handlers
                _reassert_sigint()
            if not asked and time.perf_counter() > late:   # past its limit and grace: asked to stop, once
                if _waiting_for_turn(worker):
                    # not started: another search (one left running) has the output, and the backend counts
                    # the wait in its own limit; left behind now, it would be reported as running past it
                    late = time.perf_counter() + grace
                    continue
                asked = True
                stopped = bool(be.interrupt())
                if not stopped and not finished.is_set():   # it cannot be stopped: left to finish (docstring)
                    _leave_running()
                    return RawResult("no_solution", wall_s=time.perf_counter() - began, stopped=True,
                                     message=f"{be.name} was still running {grace:g} s past its time limit and "
                                             "cannot be stopped: it was left to finish on its own, and its "
                                             "answer is not used")
    except KeyboardInterrupt:
        first = time.perf_counter()
        stoppable = be.interrupt()
        absorb_echoes(first)
        while stoppable and (left := first + INTERRUPT_GRACE_S - time.perf_counter()) > 0:
            if _wait_held(finished, min(REASSERT_S, left)):   # a second Ctrl-C here goes on as it is
                break
        raise SearchInterrupted(outcome.get("raw")) from None
    if "error" in outcome:
        raise outcome["error"]
    raw = outcome["raw"]
    if stopped:
        note = f"{be.name} was stopped {grace:g} s past its time limit (it looks at its clock only between steps)"
        raw = replace(raw, message="; ".join(m for m in (raw.message, note) if m))
    return raw
