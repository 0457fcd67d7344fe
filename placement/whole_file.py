"""Writing a file whole or not at all: a run stopped while it writes (Ctrl-C in a long trace) leaves the
file it replaces as it was, not half a JSON document."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[IO[str]]:
    """A text file to write ``path``'s new content into: a scratch file beside it, renamed onto ``path``
    when the block ends normally (with the permissions of the file it replaces) and removed when it
    raises. Where ``path`` is no regular file (a pipe, ``/dev/stdout``, a symbolic link), it is written
    directly. Raises :class:`OSError` as :func:`open` would."""
    path = os.fspath(path)
    try:
        mode = os.lstat(path).st_mode
        special = not stat.S_ISREG(mode)   # a link, too, is written through, not replaced
        permissions = stat.S_IMODE(mode)
    except FileNotFoundError:
        special, permissions = False, 0o666 & ~_umask()
    if special:
        with open(path, "w", encoding="utf-8") as fh:
            yield fh
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, scratch = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.chmod(scratch, permissions)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


def _umask() -> int:
    """The process's file-creation mask (read by setting it and back: the only way)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def probe_writable(path: str | Path) -> None:
    """Raise :class:`OSError` as writing ``path`` would, leaving it as it was: appending nothing to a file, and
    removing a file the probe creates (where a symbolic link led to it, the file, not the link). A pipe or a
    device is only checked for permission: opening and closing it would end the stream its reader waits on."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        for fails, code in ((os.path.isdir(path), errno.EISDIR), (not os.access(path, os.W_OK), errno.EACCES)):
            if fails:
                raise OSError(code, os.strerror(code), path)
        return
    existed = os.path.exists(path)
    with open(path, "a", encoding="utf-8"):
        pass
    if not existed:
        os.remove(os.path.realpath(path))
