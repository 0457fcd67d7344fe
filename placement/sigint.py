"""Ctrl-C that arrives twice, or at a moment Python cannot take it.

``timeout -s INT`` sends its signal to the process and then to its process group, so the process
receives SIGINT twice within a moment. Code that handles the first interrupt (a stopped MILP search
winding down, the DP handing on the plan it holds) waits the second out with :func:`absorb_echoes`:
caught while that handling runs, it would end it as a second Ctrl-C does, and the plan in hand would
be lost.

An interrupt raised inside Python's own threading code can leave it broken: a SIGINT that reached the
main thread while it started a thread, or waited on an event, made the wait release its lock twice, and
the command ended with a traceback ("release unlocked lock") where it should have stopped as Ctrl-C
stops it. Such steps run under :func:`held_interrupts`, which delivers the interrupt once they are done.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from typing import Any, Iterator

#: seconds after a Ctrl-C within which another SIGINT is that signal again, not a second Ctrl-C
ECHO_S = 0.25


def absorb_echoes(first: float) -> None:
    """Wait until :data:`ECHO_S` seconds after ``first`` (the ``time.perf_counter()`` of a Ctrl-C), letting
    the SIGINTs that arrive meanwhile pass unheeded: the same signal delivered again, which would
    otherwise end the handling of the first as if it were a second Ctrl-C."""
    while (left := first + ECHO_S - time.perf_counter()) > 0:
        try:
            time.sleep(left)
        except KeyboardInterrupt:
            continue


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Hold back SIGINT, and SIGTERM and SIGHUP where a Python handler takes them (the command line's, which
    stops as Ctrl-C does), while the block runs in the main thread, then hand the first signal caught to the
    handler it was meant for (``KeyboardInterrupt`` for Ctrl-C; the default action ends the process). Nothing is
    held off the main thread, which no signal reaches, nor from a handler installed outside Python, which
    cannot be put back. The block should be short: compiled code, or a step of Python's own threading code
    that an interrupt breaks (module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held: dict[int, Any] = {}
    for number in (signal.SIGINT, signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())):
        previous = signal.getsignal(number)
        if previous is None or (number != signal.SIGINT and not callable(previous)):
            continue   # one from outside Python, or a SIGTERM or SIGHUP that ends the process anyway: left alone
        try:
            signal.signal(number, lambda signum, frame: caught.append(signum))
        except (ValueError, TypeError):   # not a handler Python can put back: left alone
            continue
        held[number] = previous
    try:
        yield
    finally:
        for number, previous in held.items():
            signal.signal(number, previous)
        if caught:
            previous = held[caught[0]]
            if callable(previous):   # the handler the signal was meant for (KeyboardInterrupt)
                previous(caught[0], sys._getframe())
            elif previous == signal.SIG_DFL:   # the default action: the process ends
                signal.raise_signal(caught[0])


class PlanInHand(KeyboardInterrupt):
    """Ctrl-C stopped a search method that keeps the best plan it has found: ``solution`` is that plan's
    solution (a feasible one, with the bound the method proves). A :class:`KeyboardInterrupt`, so code
    that does not look for it stops as before."""

    def __init__(self, solution: Any) -> None:
        super().__init__("interrupted")
        self.solution = solution
