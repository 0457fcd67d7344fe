"""The command line: ``placement solve | verify | info | simulate | hypar | import | split``.

Every command takes ``--json`` (one JSON document on stdout) and ``--quiet`` (no
progress or warnings on stderr); :mod:`placement.cli.command` builds the parsers and runs them.

Exit statuses: 0 success; 1 a well-formed request whose answer is negative (``solve``: no
plan, the status says why; ``verify``: the plan is invalid); 2 bad input or usage, reported as
one line ``error: ...`` on stderr; 130 interrupted (143 by SIGTERM, 129 by SIGHUP).

This module imports nothing of the command line itself: the entry point handles Ctrl-C, SIGTERM and SIGHUP
before it imports argparse and the commands (a tenth of a second or more), so that a signal that comes
while they import ends the command as one during its work does, with one line, not a traceback.
"""

from __future__ import annotations

import signal
import sys

TYPE_CHECKING = False   # typing is imported once the signals are handled
if TYPE_CHECKING:
    from typing import NoReturn, Sequence

#: the exit status of a command that Ctrl-C stopped (128 + SIGINT)
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (:func:`placement.cli.command.main`); returns the exit status instead of exiting."""
    try:
        from placement.cli.command import main as command
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED
    return command(argv)


def run() -> None:
    """Console-script entry point: the signals handled first (:func:`_terminate_as_interrupt`), then the
    command line of ``sys.argv`` run to its exit (:func:`placement.cli.command.run`)."""
    terminated = _terminate_as_interrupt()
    try:
        from placement.cli.command import run as command
    except KeyboardInterrupt:
        _stopped_while_importing(terminated)
    except ImportError:   # an interrupt that compiled code turned into another error
        if not terminated:
            raise
        _stopped_while_importing(terminated)
    command(terminated)


def _terminate_as_interrupt() -> list[int]:
    """Handle SIGTERM (a job scheduler's or a CI runner's stop) and SIGHUP (its terminal closed) as Ctrl-C: a
    MILP search stops, its solver's child process with it, and its best plan is shown and written, where the
    default handler ended the process with nothing (and left a PuLP solver's child running). A SIGHUP that is
    ignored (``nohup``) stays ignored, as does a SIGINT (a job a shell started in the background); Ctrl-C
    itself is handled as Python's handler does, and recorded too. Returns the list the handler appends each
    signal to, which says whether one came and which: an interrupt that compiled code turned into another
    error (numpy's import raises an ``ImportError``) is still known for one."""
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, handler)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        signal.signal(signal.SIGHUP, handler)
    return received


def _stopped_while_importing(terminated: list[int]) -> NoReturn:
    """End the process that a signal stopped while the command line imported: one line, and the status the
    signal gives (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). The same signal sent again (``timeout -s
    INT`` sends it to the process and then to its group) no longer interrupts the line."""
    for number in (signal.SIGINT, signal.SIGTERM, *((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())):
        if signal.getsignal(number) not in (signal.SIG_IGN, None):
            signal.signal(number, signal.SIG_IGN)
    if sys.stderr is not None:   # `2>&-`: nowhere to say it
        try:
            print("error: interrupted", file=sys.stderr, flush=True)
        except OSError:
            pass
    sys.exit(128 + terminated[0] if terminated else INTERRUPTED)
