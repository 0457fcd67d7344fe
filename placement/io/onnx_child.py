"""onnx's shape inference in a child process, so that a failed assertion in it cannot end the caller's.

onnx's C++ shape inference checks some of what it assumes with assertions: a ``Slice`` of a tensor it
inferred with a negative dimension (the last part of a ``Split`` into more parts than its axis holds, a ``Pad``
by more than the size, a pooling window or convolution kernel larger than its input, an ``Expand`` to a
negative size) fails one and aborts the whole process (SIGABRT), with nothing to catch. :func:`infer_shapes`
runs inference in a child forked for it (a few milliseconds: the child shares the caller's memory until it
writes), which hands the inferred model back through a pipe; a child that a signal ends is
:class:`InferenceAborted`, which names the signal and the last line onnx wrote to standard error (its failed
assertion). What the child writes there, and the traceback :mod:`faulthandler` would write, are not shown.
On Linux only: elsewhere (Windows has no ``fork``; on macOS a forked child of a process whose other threads
started system frameworks may crash, which would refuse a valid model) inference runs in the calling process,
as it does where no child can be had: ``fork`` refused (a limit on processes reached, a container's or
``RLIMIT_NPROC``; no memory to commit for a copy of a large caller), or no temporary file or pipe to take
what the child says.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import tempfile
import warnings
from typing import Any

#: the first byte of what the child writes: the inferred model follows, or the text of onnx's exception
MODEL, ERROR = b"M", b"E"


class InferenceAborted(Exception):
    """onnx's shape inference ended the process it ran in: ``signal`` the signal's name (``SIGABRT``), ``detail``
    the last line onnx wrote to standard error (``''``: none)."""

    def __init__(self, signal_name: str, detail: str) -> None:
        super().__init__(f"{signal_name}: {detail}" if detail else signal_name)
        self.signal = signal_name
        self.detail = detail


class InferenceFailed(Exception):
    """onnx's shape inference raised an exception in the child; its text is this one's."""


def infer_shapes(model: Any, onnx: Any, strict: bool) -> Any:
    """``onnx.shape_inference.infer_shapes(model, strict_mode=strict, data_prop=True)``, run in a forked child
    (module docstring): the inferred model, :class:`InferenceFailed` where onnx raised (its text), or
    :class:`InferenceAborted` where a signal ended the child. In the calling process but on Linux, and where no
    child can be had (module docstring): a valid model is not refused for the want of a process."""
    if not sys.platform.startswith("linux"):
        return _in_process(model, onnx, strict)
    try:
        errors = tempfile.TemporaryFile()
    except OSError:   # no folder to write a temporary file in
        return _in_process(model, onnx, strict)
    with errors:
        try:
            read_end, write_end = os.pipe()
        except OSError:   # no file descriptor left
            return _in_process(model, onnx, strict)
        try:
            pid: int | None = _fork()
        except OSError:   # EAGAIN (a limit on processes), ENOMEM
            pid = None
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid is None:
            os.close(read_end)
            os.close(write_end)
            return _in_process(model, onnx, strict)
        if pid == 0:   # the child: never returns
            _child(model, onnx, strict, read_end, write_end, errors.fileno())
        os.close(write_end)
        reaped = False
        try:
            with os.fdopen(read_end, "rb") as pipe:
                written = pipe.read()
            status = _exit_status(pid, written)
            reaped = True
        finally:
            if not reaped:   # interrupted (Ctrl-C) while the child ran: it is not left behind
                with contextlib.suppress(ProcessLookupError):   # already reaped (an ignored SIGCHLD)
                    os.kill(pid, signal.SIGKILL)
                _exit_status(pid, b"")
        if status is None:
            raise InferenceAborted("a signal", "")
        if status < 0:
            errors.seek(0)
            lines = [line.strip() for line in errors.read().decode("utf-8", "replace").splitlines() if line.strip()]
            raise InferenceAborted(_signal_name(-status), _assertion(lines[-1]) if lines else "")
    if status == 0 and written[:1] == MODEL:
        return onnx.load_from_string(written[1:])
    if status == 0 and written[:1] == ERROR:
        raise InferenceFailed(written[1:].decode("utf-8", "replace"))
    raise InferenceFailed(f"the process running it ended with status {status}")


def _fork() -> int:
    """``os.fork()``, without the ``DeprecationWarning`` Python 3.12 and later give where the process has other
    threads (numpy's, torch's): a child of such a process may deadlock on a lock another thread held, but this
    one runs onnx's inference on its own copy of the model, writes to a pipe and leaves by ``os._exit``."""
    from placement.process_state import catch_warnings

    with catch_warnings():
        warnings.filterwarnings("ignore", message=r"This process .*multi-threaded", category=DeprecationWarning)
        return os.fork()


def _in_process(model: Any, onnx: Any, strict: bool) -> Any:
    """onnx's shape inference of ``model`` in the calling process, which a failed assertion in its C++ ends."""
    return onnx.shape_inference.infer_shapes(model, strict_mode=strict, data_prop=True)


def _child(model: Any, onnx: Any, strict: bool, read_end: int, write_end: int, errors: int) -> None:
    """In the forked child: infer, write the result to ``write_end`` and leave, with status 0 (1 where writing
    failed), without running the caller's exit handlers or flushing its buffers."""
    status = 1
    try:
        os.close(read_end)
        os.dup2(errors, 2)
        faulthandler.disable()   # it writes a signal's traceback to the caller's standard error, wherever fd 2 is
        try:
            result = MODEL + onnx.shape_inference.infer_shapes(model, strict_mode=strict,
                                                               data_prop=True).SerializeToString()
        except Exception as exc:  # onnx raises InferenceError and others: the caller reads the text
            result = ERROR + str(exc).encode("utf-8", "replace")
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(result)
        status = 0
    finally:
        os._exit(status)


def _exit_status(pid: int, written: bytes) -> int | None:
    """The exit status of the child ``pid`` (``-n`` where signal ``n`` ended it), which wrote ``written``. Where the
    caller ignores ``SIGCHLD`` the system reaps the child itself and its status is lost: 0 where it wrote a whole
    answer (its first byte, and the child writes nothing before it has the answer), ``None`` where it wrote none."""
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return 0 if written[:1] in (MODEL, ERROR) else None


def _signal_name(number: int) -> str:
    """``SIGABRT`` for 6; ``signal 99`` for a number Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _assertion(line: str) -> str:
    """The failed assertion of a line the C++ library writes (``.../stl_algo.h:3626: constexpr ... clamp(...):
    Assertion '!(__hi < __lo)' failed.``): from ``Assertion`` on, or the whole line."""
    at = line.find("Assertion ")
    return line[at:] if at >= 0 else line
