"""Compiling plain-Python kernels with numba, on first use (numba is imported only then).

The DP over ideals (:mod:`placement.solvers._dp_kernels`) and the streamed simulation
(:mod:`placement.simulation.streaming`) write their inner loops as plain Python over numpy
arrays, run them as they are on small inputs, and compile them here for large ones.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Mapping


def compile_kernel(function: Callable, helpers: Mapping[str, Any] | None = None, name: str | None = None) -> Any:
    """``function`` compiled by numba, its calls to the helpers named in ``helpers`` bound to the
    compiled helpers given there; ``name`` (default: the function's) names the compiled code in the
    on-disk cache, so that one function compiled with two sets of helpers keeps two entries.

    The compiled code is cached on disk where numba finds a writable cache location; where it
    finds none (a read-only install and a read-only home) numba refuses to cache ("cannot cache
    function ...: no locator available"), and the function is compiled in memory instead.
    """
    import numba

    if helpers or name:
        scope = dict(function.__globals__)
        scope.update(helpers or {})
        clone = types.FunctionType(function.__code__, scope, name or function.__name__, function.__defaults__)
        clone.__module__, clone.__qualname__ = function.__module__, name or function.__qualname__
        function = clone
    try:
        return numba.njit(cache=True)(function)
    except RuntimeError:  # no writable cache location
        return numba.njit(cache=False)(function)


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
