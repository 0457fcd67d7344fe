"""Where native code writes its output: file descriptor 1 redirected while a solver runs, so that a
library call never writes on its caller's standard output (a solver's banner or log would break
``--json``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator

from placement.whole_file import standard_stream

#: File descriptor 1 is one per process: two solves in threads that each pointed it at their own log
#: mixed their logs (HiGHS's bound, read from its log, came out as another run's) and restored it in
#: the wrong order, leaving the caller's standard output in a deleted scratch file. The solves that
#: redirect it take turns.
_STDOUT = threading.Lock()
#: the caller's file descriptor 1 (a duplicate) while a redirection is under way, for :func:`callers_stdout`
_CALLERS: list[int] = []
#: the thread inside a redirection (its ``threading.get_ident()``), for :func:`_after_fork_in_child`
_HOLDER: list[int] = []


@contextlib.contextmanager
def stdout_to(target: str | int | None) -> Iterator[None]:
    """Send what native code writes on file descriptor 1 to ``target`` while the block runs: a path
    (append), a file descriptor open for writing (the caller's, which stays open), or, with ``None``,
    nowhere: a library never writes on its caller's standard output (HiGHS prints a banner there even
    with its output switched off, which would break ``--json``). One block at a time in the process
    (:data:`_STDOUT`); what other threads write on file descriptor 1 meanwhile goes there too
    (:func:`callers_stdout` gives the caller's)."""
    with _STDOUT:
        _flush_python_stdout()
        _flush_c_streams()
        try:
            saved: int | None = os.dup(1)
        except OSError:   # no file descriptor 1 (a daemon closed it): the solver's output still goes to target
            saved = None
        stream = None if target is None or isinstance(target, int) else standard_stream(target)
        if isinstance(target, int) or stream is not None:   # the caller's standard output: its position, shared
            fd = os.dup(target if isinstance(target, int) else stream)   # descriptor 1 is still the caller's here
        else:
            fd = os.open(os.devnull if target is None else target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if saved is not None:
            _CALLERS.append(saved)
        _HOLDER.append(threading.get_ident())
        try:
            os.dup2(fd, 1)
            yield
        finally:
            _HOLDER.clear()
            _flush_python_stdout()
            _flush_c_streams()   # what the solver left in the C library's buffer goes where it was sent
            if saved is not None:
                _CALLERS.remove(saved)
                os.dup2(saved, 1)
                os.close(saved)
            elif fd != 1:   # file descriptor 1 closed again, as the caller had it
                os.close(1)
            os.close(fd)


def _flush_python_stdout() -> None:
    """Flush ``sys.stdout``, where there is one open: it is ``None`` under ``pythonw`` and in some services,
    and a caller may have closed it (an error of the output itself, a full disk, goes on to the caller)."""
    stream = sys.stdout
    if stream is None or getattr(stream, "closed", False):
        return
    stream.flush()


def _after_fork_in_child() -> None:
    """In a child forked while another thread held :data:`_STDOUT`: that thread does not exist there, so
    its turn would never end (every solve of the child that redirects waited forever) and file
    descriptor 1 stayed on its target (the child's output lost). The child starts with the lock free and
    the caller's standard output back on file descriptor 1. A child forked by the thread inside the
    redirection (from a progress callback) goes on inside it, and ends it as that thread would."""
    global _STDOUT
    if _HOLDER and _HOLDER[0] == threading.get_ident():
        return
    _STDOUT = threading.Lock()
    if _CALLERS:
        os.dup2(_CALLERS[-1], 1)
        _CALLERS.clear()
    _HOLDER.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def held_by_another(ident: int) -> bool:
    """Whether a redirection (:func:`stdout_to`) is under way that thread ``ident`` (a
    ``threading.get_ident()``) is not inside: a solve of that thread that redirects waits meanwhile for its
    turn, its search not started (after a search left running past its time limit, or Ctrl-C, for as long as
    that search runs). A redirection starting or ending, its thread not yet or no longer named, counts."""
    holder = list(_HOLDER)   # the redirection may end meanwhile
    return _STDOUT.locked() and holder[:1] != [ident]


def callers_stdout() -> int | None:
    """A new duplicate of the caller's file descriptor 1 while a redirection is under way (its owner
    closes it), else ``None``: Ctrl-C leaves a solver that cannot be stopped (HiGHS, CBC behind
    OR-Tools) searching, with file descriptor 1 sent to its log, and what the caller prints then (the
    plan in hand) must go to the caller's standard output, not there."""
    callers = list(_CALLERS)   # the solve may end meanwhile, and close its duplicate
    try:
        return os.dup(callers[-1])
    except (IndexError, OSError):
        return None


def _flush_c_streams() -> None:
    """``fflush(NULL)``: the C library buffers a native solver's output on a pipe or file (CBC's log), and
    would write it on the caller's standard output at exit, after the redirection ended (past the end of
    a JSON document)."""
    try:
        libc = ctypes.CDLL(None)
        libc.fflush(None)
    except (OSError, AttributeError, TypeError):   # no C library to reach (the redirection still holds)
        pass
