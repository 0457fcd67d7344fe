"""Process-wide state that a call changes for a moment, one thread at a time.

``warnings.catch_warnings`` and ``contextlib.redirect_stderr`` save the process's warnings filters or
``sys.stderr`` on entry and put the saved value back on exit. Two threads inside them at once put back
each other's values in the wrong order: concurrent PuLP solves left an ``ignore`` filter for
``DeprecationWarning`` in front of the caller's filters, and concurrent PyTorch imports left ``sys.stderr``
a ``StringIO`` that swallowed everything written to it afterwards. The package changes that state only
while holding :data:`HELD`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator

#: held while a call of the package has the warnings filters or ``sys.stderr`` changed (reentrant: such
#: a block may run another)
HELD = threading.RLock()


@contextlib.contextmanager
def catch_warnings() -> Iterator[None]:
    """``warnings.catch_warnings()``, holding :data:`HELD`."""
    with HELD, warnings.catch_warnings():
        yield


def _after_fork_in_child() -> None:
    """In a child forked while another thread held :data:`HELD`: that thread does not exist there, so its
    turn would never end and every later call that takes it would wait forever. The child starts with the
    lock free, unless the forking thread itself holds it (a fork from inside such a block, which goes on
    and leaves it as that thread would)."""
    global HELD
    if not HELD._is_owned():
        HELD = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
