"""Compiling plain-Python kernels with numba, on first use (numba is imported only then).

The DP over ideals (:mod:`placement.solvers._dp_kernels`) and the streamed simulation
(:mod:`placement.simulation.streaming`) write their inner loops as plain Python over numpy
arrays, run them as they are on small inputs, and compile them here for large ones. Kernels that
do not call each other may be compiled by a second process at the same time
(:func:`compile_aside`), which leaves them in numba's on-disk cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from placement.sigint import held_interrupts


def import_numba() -> types.ModuleType:
    """numba, imported. Its first import takes a second or more; an interrupt (Ctrl-C) during it left its
    half-imported modules in ``sys.modules``, and every later import in the process failed ("module 'numba'
    has no attribute 'core'") until the interpreter was restarted. They are dropped with the interrupt, so
    that the next call imports numba anew."""
    try:
        import numba
    except BaseException:
        for name in list(sys.modules):
            if name.split(".")[0] in ("numba", "llvmlite"):
                del sys.modules[name]
        raise
    return numba


def compile_kernel(function: Callable, helpers: Mapping[str, Any] | None = None, signature: Any = None,
                   name: str | None = None) -> Any:
    """``function`` compiled by numba, its calls to the helpers named in ``helpers`` bound to the
    compiled helpers given there. With a ``signature`` (numba's), it is compiled (or loaded from the
    cache) now, for that signature only; without, on its first call, for the types of that call. With a
    ``name``, the kernel is cached under that name in place of the function's: a second kernel of one
    function, compiled for other types of its arguments, is cached apart from the first.

    The compiled code is cached on disk where numba finds a writable cache location; where it
    finds none (a read-only install and a read-only home) numba refuses to cache ("cannot cache
    function ...: no locator available"), and the function is compiled in memory instead. The
    kernels touch only numpy arrays and numbers, so they release the interpreter's lock while they
    run: other threads of the caller go on beside them.
    """
    numba = import_numba()

    if helpers or name:
        scope = dict(function.__globals__)
        scope.update(helpers or {})
        clone = types.FunctionType(function.__code__, scope, name or function.__name__, function.__defaults__)
        clone.__module__, clone.__qualname__ = function.__module__, name or function.__qualname__
        function = clone
    try:
        kernel = numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # no writable cache location
        kernel = numba.njit(cache=False, nogil=True)(function)
    cache = getattr(kernel, "_cache", None)
    if cache is not None:   # None: numba's JIT switched off (NUMBA_DISABLE_JIT), the plain function
        kernel._cache = TolerantCache(cache)
    if signature is not None and hasattr(kernel, "compile"):
        kernel.compile(signature)
        kernel.disable_compile()
    return kernel


class TolerantCache:
    """numba's on-disk cache of one kernel, whose entries that cannot be read (a file cut short by a full disk
    or a killed process, or overwritten) are misses: the kernel is compiled anew, and its code saved where the
    index can be written, in place of the entry. numba raised the unpickling error of such an entry on every
    call, in every later run, until the user found the cache's files and removed them. Where the index
    itself cannot be read, it is written anew (empty) before the save; a save that still fails leaves the code
    compiled in memory only."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return self._cache.load_overload(sig, target_context)
        except Exception:
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            self._cache.save_overload(sig, data)
        except Exception:   # an index that cannot be read: written anew, empty, and the save tried again
            with contextlib.suppress(Exception):
                self._cache.flush()
            with contextlib.suppress(Exception):
                self._cache.save_overload(sig, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


class InterruptSafe:
    """A compiled kernel (:func:`compile_kernel`) whose calls from the main thread hold back Ctrl-C until
    they return: a ``KeyboardInterrupt`` raised while numba's dispatcher turns the kernel's results into
    arrays crashed the process (a segmentation fault, where the user asked to stop). The interrupt is
    raised as soon as the call returns, which is as soon as Python could see it anyway: compiled code
    does not stop for signals (:func:`placement.sigint.held_interrupts`). Attributes are the kernel's."""

    def __init__(self, kernel: Any) -> None:
        self._kernel = kernel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)

    def __call__(self, *args: Any) -> Any:
        with held_interrupts():
            return self._kernel(*args)


def can_cache(function: Callable) -> bool:
    """Whether numba finds a writable location to cache ``function``'s compiled code."""
    numba = import_numba()

    try:
        numba.njit(cache=True)(function)
    except RuntimeError:
        return False
    return True


def compiling_note(what: str, pronoun: str) -> str:
    """The progress line of a run about to compile ``what`` (``"the DP's kernels"``, named again as
    ``pronoun``): once per install where numba can cache the compiled code; in every run where it finds no
    writable folder to cache it in (a read-only install and a read-only home), which a cache folder it is
    given (``NUMBA_CACHE_DIR``) avoids."""
    if can_cache(_cache_probe):
        return f"compiling {what} with numba (once per install; later runs load {pronoun} from its cache)"
    return (f"compiling {what} with numba, as every run here does: numba finds no writable folder to cache "
            f"{pronoun} in (the environment variable NUMBA_CACHE_DIR can name one)")


def _cache_probe() -> int:
    """A function of this package for :func:`can_cache` to ask about (its kernels lie beside it)."""
    return 0


def is_cached(kernel: Any) -> bool:
    """Whether running ``kernel`` (from :func:`compile_kernel`, or a plain function) compiles nothing: a
    plain function, a kernel already compiled in this process, or one whose compiled code numba's on-disk
    cache holds for the current source (where that cache cannot be read, the answer is no)."""
    if not hasattr(kernel, "py_func") or getattr(kernel, "signatures", None):
        return True
    try:
        return bool(kernel._cache._cache_file._load_index())
    except Exception:   # no cache (read-only install) or another numba layout
        return False


def compile_aside(calls: Sequence[tuple[str, str, tuple[str, ...]]], probe: Callable) -> subprocess.Popen | None:
    """A second Python process that makes each call ``(module, function, args)`` — functions that compile
    kernels with :func:`compile_kernel` — so that their compiled code lands in numba's on-disk cache while
    this process does other work (compiling is single-threaded: a second core compiles the independent
    kernels in parallel). ``None`` where no process can be started or numba cannot cache ``probe`` (the
    plain function of one of those kernels) there; the caller then compiles them itself, as it also does
    for whatever the process has not cached by the time it needs them. The process runs this very copy of
    the package, with numba's settings from the environment."""
    if not calls or not sys.executable or not can_cache(probe):
        return None
    root = str(Path(__file__).resolve().parents[1])   # the directory holding this copy of the package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    code = ("import importlib, json, sys\n"
            "for module, function, args in json.loads(sys.argv[1]):\n"
            "    getattr(importlib.import_module(module), function)(*args)\n")
    try:
        return subprocess.Popen([sys.executable, "-c", code, json.dumps([list(call) for call in calls])], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def wait_aside(process: subprocess.Popen | None, timeout: float = 120.0) -> None:
    """Wait for :func:`compile_aside`'s process (stopping it after ``timeout`` seconds)."""
    if process is None:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        stop_aside(process)


def stop_aside(process: subprocess.Popen | None) -> None:
    """Stop :func:`compile_aside`'s process if it still runs (its kernels were not needed after all)."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
