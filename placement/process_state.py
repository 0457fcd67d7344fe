"""Process-wide state that a call changes for a moment, one thread at a time.

``warnings.catch_warnings`` and ``contextlib.redirect_stderr`` save the process's warnings filters or
``sys.stderr`` on entry and put the saved value back on exit. Two threads inside them at once put back
each other's values in the wrong order: concurrent PuLP solves left an ``ignore`` filter for
``DeprecationWarning`` in front of the caller's filters, and concurrent PyTorch imports left ``sys.stderr``
a ``StringIO`` that swallowed everything written to it afterwards. The package changes that state only
inside :func:`held`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Iterator

#: held while a call of the package has the warnings filters or ``sys.stderr`` changed (reentrant: such
#: a block may run another); take it with :func:`held`
HELD = threading.RLock()
#: the caller's warnings filters and ``sys.stderr`` as the outermost :func:`held` block found them
_CALLERS: list[tuple[list, object]] = []


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold :data:`HELD` for a block that changes the warnings filters or ``sys.stderr`` and puts them back,
    recording what the caller had (for a child forked meanwhile by another thread)."""
    with HELD:
        outermost = not _CALLERS
        if outermost:
            _CALLERS.append((list(warnings.filters), sys.stderr))
        try:
            yield
        finally:
            if outermost:
                _CALLERS.clear()


@contextlib.contextmanager
def catch_warnings() -> Iterator[None]:
    """``warnings.catch_warnings()``, inside :func:`held`."""
    with held(), warnings.catch_warnings():
        yield


def _after_fork_in_child() -> None:
    """In a child forked while another thread was inside :func:`held`: that thread does not exist there, so
    its turn would never end (every later call that takes the lock would wait forever), and what it had
    changed would never be put back. The child starts with the lock free and the caller's warnings filters
    and ``sys.stderr``, unless the forking thread itself holds the lock (a fork from inside such a block,
    which goes on and puts them back as that thread would)."""
    global HELD
    if HELD._is_owned():
        return
    HELD = threading.RLock()
    if _CALLERS:
        filters, stderr = _CALLERS.pop()
        warnings.filters[:] = filters
        getattr(warnings, "_filters_mutated", lambda: None)()   # the filters changed: caches are stale
        sys.stderr = stderr
        _CALLERS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
