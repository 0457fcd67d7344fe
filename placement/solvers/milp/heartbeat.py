"""A line of progress while a MILP backend searches in silence.

CP-SAT reports every improving solution (:attr:`SolveOptions.on_solution`), but can prove for
many seconds without a new one; HiGHS, CBC and SCIP behind OR-Tools, and the solvers behind
PuLP, report nothing until they stop. :func:`heartbeat` runs the backend's search with a
watcher thread that, whenever nothing has been said for :data:`HEARTBEAT_S` seconds, says how
long the search has run and the best value known so far (the starting plan's, or the last
improving solution's). The solvers release the interpreter while they search, so the watcher
runs beside them; it stops when the search returns, however it returns. A ``progress`` that
raises stops the search, as it does when CP-SAT calls it with a new solution: the watcher asks the
backend to stop (``stop``), says no more, and the exception reaches the caller once the search has
returned (before, it was printed as an error of the watcher's thread, and the search ran on).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from typing import Callable, Iterator

from placement.sigint import held_interrupts
from placement.solvers.milp.backends.base import SolveOptions

#: seconds of silence after which the search says it is still running
HEARTBEAT_S = 10.0


@contextlib.contextmanager
def heartbeat(progress: Callable[[str], None] | None, options: SolveOptions, unit: float,
              best: float | None = None, every: float | None = None,
              stop: Callable[[], object] | None = None) -> Iterator[SolveOptions]:
    """``options`` whose ``on_solution`` also keeps the watcher quiet, while the watcher runs.

    ``best`` is the starting plan's value (original units), ``unit`` converts the model's values
    to original units; ``every`` is the silence in seconds before a line (default
    :data:`HEARTBEAT_S`); each line reads ``  <seconds> s  still searching, best <value>``.
    ``stop`` asks the search to stop when ``progress`` raises (module docstring)."""
    every = HEARTBEAT_S if every is None else every
    if progress is None:
        yield options
        return
    began = time.perf_counter()
    state = {"said": began, "best": best}
    lock = threading.Lock()
    reported = options.on_solution

    def on_solution(objective: float, bound: float, seconds: float) -> None:
        with lock:
            state["said"] = time.perf_counter()
            state["best"] = objective * unit
        if reported is not None:
            reported(objective, bound, seconds)

    done = threading.Event()
    failed: list[BaseException] = []

    def watch() -> None:
        while not done.wait(timeout=min(1.0, every)):
            now = time.perf_counter()
            with lock:
                if now - state["said"] < every:
                    continue
                state["said"] = now
                value = state["best"]
            known = "" if value is None else f", best {value:.6g}"
            try:
                progress(f"  {now - began:7.2f} s  still searching{known}")
            except Exception as exc:  # handed to the caller when the search returns
                failed.append(exc)
                if stop is not None:
                    stop()
                return

    watcher = threading.Thread(target=watch, name="milp-heartbeat", daemon=True)
    try:
        with held_interrupts():   # Ctrl-C inside Thread.start broke its lock (placement.sigint)
            watcher.start()
        yield replace(options, on_solution=on_solution)
    finally:
        done.set()
        if watcher.ident is not None:   # started
            watcher.join()
    if failed:
        raise failed[0]
