"""Kernels compiled by placement.kernels.compile_kernel release the interpreter's lock while they run,
so that other threads of the caller (a notebook, a server, a second solve) run beside the DP: without
it, a DP over 194,483 ideals stalled every other thread of its process for up to 20 s at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from placement.kernels import compile_kernel


def _add(a, b):
    return a + b


def test_compiled_kernels_release_the_interpreter_lock():
    pytest.importorskip("numba")
    kernel = compile_kernel(_add)
    assert kernel(2, 3) == 5
    assert kernel.targetoptions["nogil"] is True


def test_an_interrupt_during_a_kernel_call_is_raised_when_the_call_returns():
    """Ctrl-C inside a compiled kernel's call crashed the process (a KeyboardInterrupt raised while numba
    boxed the results). The call now finishes, the interrupt follows it, and the handler is put back."""
    import os
    import signal

    from placement.kernels import InterruptSafe

    finished = []

    def kernel(x):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):   # the interpreter looks at pending signals here
            pass
        finished.append(x)
        return x + 1

    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        InterruptSafe(kernel)(6)
    assert finished == [6] and signal.getsignal(signal.SIGINT) is handler
    assert InterruptSafe(kernel).__name__ == "kernel"   # the kernel's attributes
    signal.signal(signal.SIGINT, lambda number, frame: None)   # an interrupt the caller ignores: none raised
    try:
        assert InterruptSafe(kernel)(1) == 2
    finally:
        signal.signal(signal.SIGINT, handler)


def test_an_interrupt_under_the_default_action_still_ends_the_process():
    """Where SIGINT has its default action (no Python handler), an interrupt held back during a kernel's
    call is delivered when it returns: the process ends by the signal, as it would have without the hold."""
    import signal
    import subprocess
    import sys

    script = ("import os, signal\n"
              "from placement.kernels import InterruptSafe\n"
              "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
              "def kernel():\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n"
              "    return 7\n"
              "print(InterruptSafe(kernel)(), flush=True)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout) == (-signal.SIGINT, "")


INTERRUPTED_IMPORT = r"""
import importlib.abc
import sys


class Interrupt(importlib.abc.MetaPathFinder):   # Ctrl-C as numba imports one of its modules, once
    fired = False

    def find_spec(self, name, path, target=None):
        if name == sys.argv[1] and not Interrupt.fired:
            Interrupt.fired = True
            raise KeyboardInterrupt
        return None


sys.meta_path.insert(0, Interrupt())
from placement.kernels import compile_kernel


def plus_one(x):
    return x + 1


try:
    compile_kernel(plus_one)
except KeyboardInterrupt:
    print("interrupted")
print(compile_kernel(plus_one)(41), type(compile_kernel(plus_one)).__module__.split(".")[0])
"""


@pytest.mark.parametrize("module", ["numba.core.registry", "llvmlite.binding", "numba.core.typing.templates"])
def test_an_interrupt_during_numba_s_first_import_leaves_it_importable(tmp_path, module):
    # the half-imported modules stayed behind: "module 'numba' has no attribute 'core'" on every later call
    pytest.importorskip("numba")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT, module], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "interrupted\n42 numba\n"
