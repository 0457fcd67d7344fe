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
