"""Kernels compiled by placement.kernels.compile_kernel release the interpreter's lock while they run,
so that other threads of the caller (a notebook, a server, a second solve) run beside the DP: without
it, a DP over 194,483 ideals stalled every other thread of its process for up to 20 s at a time."""

from __future__ import annotations

import pytest

from placement.kernels import compile_kernel


def _add(a, b):
    return a + b


def test_compiled_kernels_release_the_interpreter_lock():
    pytest.importorskip("numba")
    kernel = compile_kernel(_add)
    assert kernel(2, 3) == 5
    assert kernel.targetoptions["nogil"] is True
