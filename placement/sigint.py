"""One Ctrl-C that arrives twice.

``timeout -s INT`` sends its signal to the process and then to its process group, so the process
receives SIGINT twice within a moment. Code that handles the first interrupt (a stopped MILP search
winding down, the DP handing on the plan it holds) waits the second out with :func:`absorb_echoes`:
caught while that handling runs, it would end it as a second Ctrl-C does, and the plan in hand would
be lost.
"""

from __future__ import annotations

import time

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
