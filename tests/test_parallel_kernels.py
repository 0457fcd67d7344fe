"""The compiled kernels of the Piper DP: the merge sort they use agrees with numpy's stable argsort,
and a solve says so when it must compile them first (a fresh numba cache) and not when it loads them."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from placement.parallel import _kernels as K

ROOT = Path(__file__).resolve().parents[1]


@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, -1.0, math.inf, math.nan]), max_size=40))
@example([1.0, 0.0, 1.0, 0.0])      # ties keep position order: [1, 3, 0, 2]
@example([math.nan, 1.0, math.nan, 0.0])   # NaN sorts last, NaNs in position order: [3, 1, 0, 2]
@example([])
def test_merge_order_is_the_stable_argsort(values):
    keys = np.array(values, dtype=np.float64)
    assert K.merge_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def test_merge_order_by_hand():
    assert K.merge_order(np.array([1.0, 0.0, 1.0, 0.0])).tolist() == [1, 3, 0, 2]
    assert K.merge_order(np.array([math.nan, 1.0, math.nan, 0.0])).tolist() == [3, 1, 0, 2]


def test_plain_kernels_never_compile():
    assert K.must_compile(K.interpreted()) is False


SCRIPT = """
import sys
from placement.parallel.dp import solve_parallel
from tests.test_parallel import chain, tmpc
# a -> b on 3 devices, m = 4 (hand-solved in tests/test_parallel.py: optimum 4)
inst = chain([{1: (tmpc("v", 4, 2),)}, {1: (tmpc("v", 2, 2),)}], cost=1.0, devices=3, microbatches=4)
found = solve_parallel(inst, compiled=True, progress=lambda message: print(message))
print("value", found.value)
"""


def test_progress_says_when_the_kernels_are_compiled(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                           check=True).stdout.splitlines() for _ in range(2)]
    compiling = "compiling the DP's kernels with numba (once per install; later runs load them from its cache)"
    assert runs[0] == [compiling, "value 4.0"]
    assert runs[1] == ["value 4.0"]     # the second process loads them from the cache


def test_a_plain_attempt_past_its_deadline_hands_over_and_changes_nothing(monkeypatch):
    # On a fresh install (nothing compiled yet) a table of more than 2,000 cells is tried in plain Python until
    # dp.INTERPRETED_SECONDS have passed, then solved by the compiled kernels. Here the deadline has passed before
    # the attempt starts, and the "compiled" kernels are the plain ones (no compilation in this test).
    from placement.parallel import dp
    from tests.test_parallel import chain, tmpc

    inst = chain([{1: (tmpc("v", 3 + k % 4, 1, a=1),), 2: (tmpc("v", 2, 1, a=1),)} for k in range(5)], cost=1.0,
                 devices=40, memory=30.0, microbatches=8)
    reference = dp.solve_parallel(inst, compiled=False)
    plain = K.interpreted()
    monkeypatch.setattr(K, "kernels", lambda use_compiled: plain)
    monkeypatch.setattr(K, "must_compile", lambda namespace: True)
    found = dp.solve_parallel(inst)
    assert found.stats["interpreted"] is True and found.value == reference.value   # within the deadline
    monkeypatch.setattr(dp, "INTERPRETED_SECONDS", -1.0)
    found = dp.solve_parallel(inst)
    assert found.stats["interpreted"] is False     # the attempt stopped at once ...
    assert found.value == reference.value and found.plan == reference.plan   # ... and the fill that followed agrees


def test_compiled_fill_with_caller_scratch_equals_plain_fill():
    # Six nodes, each with a fast option that holds 3 units per micro-batch and a lean one that holds 1 at twice
    # the time, and a t = 2 option: at 12 units per device the knapsack chooses per stage. The compiled fill (its
    # scratch arrays allocated by the caller) and the plain one give the same value and plan for each schedule and
    # mode; the plan's value is the largest stage time as the plain stage evaluation computes it.
    from placement.parallel.dp import solve_parallel
    from tests.test_parallel import chain, tmpc

    nodes = [{1: (tmpc("fast", 2 + k % 3, 1, a=3), tmpc("lean", 4 + 2 * (k % 3), 1, a=1)),
              2: (tmpc("tp", 1.5 + k % 3, 2, a=2),)} for k in range(6)]
    inst = chain(nodes, cost=0.5, devices=8, memory=12.0, microbatches=4)
    for schedule in ("piper", "1f1b", "gpipe"):
        for mode in ("exact", "greedy"):
            plain = solve_parallel(inst, schedule=schedule, mode=mode, compiled=False)
            compiled = solve_parallel(inst, schedule=schedule, mode=mode, compiled=True)
            assert compiled.value == plain.value and compiled.plan == plain.plan
            assert plain.plan is not None and plain.stats["knapsacks"] > 0    # a plan, and the knapsack ran
