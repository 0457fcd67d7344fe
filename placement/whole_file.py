"""Writing a file whole or not at all: a run stopped while it writes (Ctrl-C in a long trace) leaves the
file it replaces as it was, not half a JSON document."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import IO, Any, Iterator

from placement.errors import InvalidParameterError, unwritable


#: the most bytes of a file's name that the scratch file written beside it repeats (its name adds 18)
SCRATCH_STEM = 64


#: the names of the process's standard output and error themselves
_STREAM_NAMES = {f"{folder}/{fd}": fd for folder in ("/dev/fd", "/proc/self/fd") for fd in (1, 2)}
_STREAM_NAMES.update({"/dev/stdout": 1, "/dev/stderr": 2})


def standard_stream(path: str | Path) -> int | None:
    """1 or 2 where ``path`` names the process's standard output or error (``/dev/stdout``, ``/dev/stderr``: that
    one, even where both are one terminal), or the file or pipe one of them is open on; else ``None``."""
    try:
        target = os.stat(path)
    except (OSError, ValueError):
        return None
    named = _STREAM_NAMES.get(os.fspath(path))
    for fd in (named,) if named is not None else (1, 2):
        try:
            opened = os.fstat(fd)
        except OSError:
            continue
        if (opened.st_dev, opened.st_ino) == (target.st_dev, target.st_ino):
            return fd
    return None


@contextlib.contextmanager
def on_standard_stream(fd: int, binary: bool = False) -> Iterator[IO[Any]]:
    """A file to write on the process's standard output (``fd`` 1) or error (2) after what Python printed there:
    a copy of the descriptor, which shares its position in a file it is redirected to (opening the file's name
    anew wrote from its start, over the summary). A reader that stopped reading (``| head``) ends the writing
    as it ends standard output's, with no error."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    fh = os.fdopen(os.dup(fd), "wb" if binary else "w", encoding=None if binary else "utf-8")
    try:
        yield fh
        fh.close()
    except BrokenPipeError:
        pass
    finally:
        with contextlib.suppress(OSError):   # what a reader that left did not take
            fh.close()


@contextlib.contextmanager
def appending(path: str | Path) -> Iterator[IO[Any]]:
    """``path`` opened to append text to (a log): :func:`on_standard_stream` where it is the process's standard
    output or error, so that what is appended and what Python prints there stay in order."""
    fd = standard_stream(path)
    if fd is not None:
        with on_standard_stream(fd) as fh:
            yield fh
        return
    with open(path, "a", encoding="utf-8") as fh:
        yield fh


@contextlib.contextmanager
def replacing(path: str | Path, binary: bool = False) -> Iterator[IO[Any]]:
    """A text file (a binary one where ``binary``: a chart) to write ``path``'s new content into: a scratch
    file beside it, renamed onto ``path`` when the block ends normally (with the permissions of the file it
    replaces) and removed when it raises. A symbolic link is kept: the file it leads to (existing or not) is
    replaced so, or written directly where its folder takes no scratch file. Where ``path`` is the process's
    standard output or error (``/dev/stdout``), it is written there, after what was printed
    (:func:`on_standard_stream`); where it is another file that is no regular file (a pipe, a device), it is
    written directly. Raises :class:`OSError` as :func:`open` would."""
    path = os.fspath(path)
    fd = standard_stream(path)
    if fd is not None:
        with on_standard_stream(fd, binary) as fh:
            yield fh
        return
    linked = os.path.islink(path)
    target = os.path.realpath(path) if linked else path
    try:
        mode = os.stat(target).st_mode
        special = not stat.S_ISREG(mode)
        permissions = stat.S_IMODE(mode)
    except FileNotFoundError:
        special, permissions = False, 0o666 & ~_umask()
    mode, encoding = ("wb", None) if binary else ("w", "utf-8")
    import tempfile   # here: a command that writes no file does not load it

    folder = os.path.dirname(os.path.abspath(target))
    # named after the file, cut so that any name the folder takes (up to 255 bytes) leaves room for the rest
    stem = os.fsdecode(os.fsencode(os.path.basename(target))[:SCRATCH_STEM])
    scratch = None
    if not special:
        try:
            fd, scratch = tempfile.mkstemp(prefix=f".{stem}.", suffix=".partial", dir=folder)
        except PermissionError:   # a link into a folder that takes no new file: its file is written as it is
            if not linked:
                raise
    if scratch is None:
        with open(path, mode, encoding=encoding) as fh:
            yield fh
        return
    try:
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
        os.chmod(scratch, permissions)
        os.replace(scratch, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


def text_path(path: Any, parameter: str, what: str = "a file path") -> str:
    """``path`` as :func:`os.fspath` gives it, where that is text (a ``str``, or an :class:`os.PathLike` of one);
    :class:`~placement.errors.InvalidParameterError` about ``parameter`` otherwise (``None``, a number, bytes),
    which says that it must be ``what``."""
    name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(name, str):
        raise InvalidParameterError(parameter, f"must be {what} (a str or os.PathLike), not {type(path).__name__}")
    return name


@contextlib.contextmanager
def replacing_about(path: str | Path, parameter: str, binary: bool = False) -> Iterator[IO[Any]]:
    """:func:`replacing` ``path``, an :class:`OSError` of writing it or putting it in place raised as the
    :class:`~placement.errors.InvalidParameterError` about ``parameter`` (:func:`placement.errors.unwritable`), as is
    a ``path`` that is no file path (:func:`text_path`).
    Nested, an error already turned so by an inner block passes through and still leaves this file as it was."""
    text_path(path, parameter)
    try:
        with replacing(path, binary=binary) as fh:
            yield fh
    except OSError as exc:
        raise unwritable(path, exc, parameter) from None


def _umask() -> int:
    """The process's file-creation mask (read by setting it and back: the only way)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def probe_writable(path: str | Path, replaced: bool = True) -> None:
    """Raise :class:`OSError` as writing ``path`` would, leaving it as it was: a file the probe creates (where
    symbolic links lead: there) is removed, and only such a file (created exclusively, so another process's
    new file is never taken for it); an existing file has nothing appended. ``replaced``: the write replaces an
    existing regular file through a scratch file beside it (:func:`replacing`), so its folder must take one;
    else (a log, appended to) the file alone must. A pipe or a device is only checked for permission: opening
    and closing it would end the stream its reader waits on; a socket is no file to write."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        mode = os.stat(path).st_mode
        for fails, code in ((stat.S_ISDIR(mode), errno.EISDIR), (stat.S_ISSOCK(mode), errno.ENXIO),
                            (not os.access(path, os.W_OK), errno.EACCES)):
            if fails:
                raise OSError(code, os.strerror(code), path)
        return
    try:   # the folder as written: realpath would read "missing/../f" as "f", where the write fails
        folder_mode = os.stat(os.path.dirname(path) or os.curdir).st_mode
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    if not stat.S_ISDIR(folder_mode):   # "plan.json/", plan.json a file: no file can be made in it
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    target = os.path.realpath(path)   # where the write lands, through any links
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        with open(target, "a", encoding="utf-8"):
            pass
        folder = os.path.dirname(target)
        if replaced and not os.path.islink(path) and not os.access(folder, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), folder) from None
        return
    os.close(fd)
    os.remove(target)


def empty_write(path: str | Path) -> None:
    """Raise :class:`OSError` where ``path`` is a character device (``/dev/full``), or the process's standard
    output or error, whose writes all fail: it opens, so :func:`probe_writable` passes it, and the first write
    of a log appended to it would fail once the work had run. An empty write is tried, which fails there as any
    other would and writes nothing anywhere else. A pipe is not opened (its reader would see its stream end)."""
    fd = standard_stream(path)
    if fd is not None:
        os.write(fd, b"")
        return
    try:
        if not stat.S_ISCHR(os.stat(path).st_mode):
            return
    except (OSError, ValueError):   # no such file yet: probe_writable's to judge
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
    try:
        os.write(fd, b"")
    finally:
        os.close(fd)
