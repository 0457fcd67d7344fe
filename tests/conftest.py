"""Shared test configuration: Hypothesis profiles, a disk that fills while a chart is saved, and a DP run
stopped by Ctrl-C.

* ``ci`` (chosen when the environment variable ``CI`` is set): derandomised, so a CI run is
  reproducible, with the default number of examples and no per-example deadline.
* ``dev`` (default otherwise): random, no deadline.

``HYPOTHESIS_PROFILE=<name>`` picks a profile explicitly.
"""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def savefig_fills_the_disk(monkeypatch):
    """matplotlib's ``Figure.savefig`` writing half a PNG to its target, then failing as a full disk does."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def half_then_full(self, target, **kwargs):
        if isinstance(target, (str, os.PathLike)):
            with open(target, "wb") as fh:
                fh.write(b"\x89PNG half")
        else:
            target.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", half_then_full)


@pytest.fixture
def dp_stopped_on(monkeypatch):
    """A function ``(module, run)`` that makes ``module.solve_dp`` raise :class:`DPInterrupted` (Ctrl-C, no plan
    held) on its ``run``-th call, running the DP on the others; it returns the list of calls made so far (clear it
    to count again)."""
    from placement.solvers.dp import DPInterrupted

    def patch(module, run):
        solve, calls = module.solve_dp, []

        def stopped(*args, **kwargs):
            calls.append(1)
            if len(calls) == run:
                raise DPInterrupted(None)
            return solve(*args, **kwargs)

        monkeypatch.setattr(module, "solve_dp", stopped)
        return calls

    return patch
