"""The compiled kernels of the Piper DP: the merge sort they use agrees with numpy's stable argsort,
and a solve says so when it must compile them first (a fresh numba cache) and not when it loads them."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from types import SimpleNamespace
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
    monkeypatch.setattr(K, "kernels", lambda use_compiled, kind="exact", aside=False: plain)
    monkeypatch.setattr(K, "must_compile", lambda namespace: True)
    found = dp.solve_parallel(inst)
    assert found.stats["interpreted"] is True and found.value == reference.value   # within the deadline
    monkeypatch.setattr(dp, "INTERPRETED_SECONDS", -1.0)
    found = dp.solve_parallel(inst)
    assert found.stats["interpreted"] is False     # the attempt stopped at once ...
    assert found.value == reference.value and found.plan == reference.plan   # ... and the fill that followed agrees


def test_kernels_not_cached_are_not_compiled_under_a_deadline_they_would_overrun(monkeypatch):
    # Compiling the DP's kernels reads no clock (6 s on two cores): a solve of gnmt on a fresh install with
    # time_limit=0.000001 returned after 7 s. Under a deadline closer than dp.COMPILE_SECONDS the kernels, here
    # taken to be missing from numba's cache, are not compiled: the fill runs in plain Python to the deadline.
    import time

    from placement.parallel import dp
    from tests.test_parallel import chain, tmpc

    inst = chain([{1: (tmpc("v", 3 + k % 4, 1, a=1),), 2: (tmpc("v", 2, 1, a=1),)} for k in range(5)], cost=1.0,
                 devices=40, memory=30.0, microbatches=8)
    reference = dp.solve_parallel(inst, compiled=False)

    def never(*args, **kwargs):
        raise AssertionError("the kernels were compiled under a deadline they would overrun")

    monkeypatch.setattr(K, "kernels", never)
    monkeypatch.setattr(K, "fill_compiles", lambda: True)
    lines = []
    found = dp.solve_parallel(inst, deadline=time.perf_counter() + 5.0, progress=lines.append)
    assert found.stats["interpreted"] is True and found.stats["not_compiled"] is True
    assert (found.value, found.plan) == (reference.value, reference.plan)   # within the deadline: the optimum
    assert lines[0] == ("the DP's kernels are not in numba's cache, and compiling them (some seconds) would run "
                        "past the deadline: plain Python until then (a solve with no time limit, or one of at "
                        "least 10 s, compiles them once per install)")
    late = dp.solve_parallel(inst, deadline=time.perf_counter() - 1.0)
    assert late.stats["out_of_time"] == (
        "the time limit ran out while the DP filled its table (1 of 6 sets); the plan is the best pipeline along "
        "one topological order; the DP ran in plain Python, its compiled kernels not cached (a solve with no time "
        "limit, or one of at least 10 s, compiles them once per install)")
    plain = K.interpreted()
    monkeypatch.setattr(K, "kernels", lambda use_compiled, kind="exact", aside=False: plain)
    far = dp.solve_parallel(inst, deadline=time.perf_counter() + 1e6)   # time enough to compile
    assert "not_compiled" not in far.stats and (far.value, far.plan) == (reference.value, reference.plan)


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


def _nodes_with_a_lean_option():
    from tests.test_parallel import tmpc

    # six nodes: a fast option holding 3 units per micro-batch, a lean one holding 1 at twice the time; t = 2
    return [{1: (tmpc("fast", 2 + k % 3, 1, a=3), tmpc("lean", 4 + 2 * (k % 3), 1, a=1)),
             2: (tmpc("tp", 1.5 + k % 3, 2, a=2),)} for k in range(6)]


def test_knapsacks_are_needed_only_where_a_stage_may_miss_its_dominant_options():
    from placement.parallel.dp import _knapsacks_needed, device_types
    from placement.parallel.tables import build_tables
    from tests.test_parallel import chain, tmpc

    def needed(inst, in_flight):
        return _knapsacks_needed(build_tables(inst), device_types(inst, inst.max_devices, inst.max_memory_per_device),
                                 in_flight)

    # the fast option is dominant (less time, as many parameters): whether it fits decides
    assert needed(chain(_nodes_with_a_lean_option(), memory=1e9, devices=8, microbatches=4), 5) is False
    assert needed(chain(_nodes_with_a_lean_option(), memory=12.0, devices=8, microbatches=4), 5) is True
    # less time but more parameters: no option dominates, a stage may need the knapsack whatever the memory
    traded = [{1: (tmpc("fast", 2, 3), tmpc("small", 3, 1))} for _ in range(3)]
    assert needed(chain(traded, memory=1e9, devices=8), 5) is True
    # one option per node: dominant; all six at t = 1 hold 6 · (3 · y); at t = 2, 6 · (2 · y)
    fast = [{1: (tmpc("fast", 2, 1, a=3),), 2: (tmpc("tp", 1.5, 2, a=2),)} for _ in range(6)]
    assert needed(chain(fast, memory=91.0, devices=8), 5) is False     # 6 · 3 · 5 = 90 fits 91
    assert needed(chain(fast, memory=90.0, devices=8), 5) is True      # ... not 90 less a 1e-9 margin
    assert needed(chain(fast, memory=89.0, devices=8), 4) is False     # 6 · 3 · 4 = 72


def test_the_fill_without_knapsacks_stops_where_one_is_needed_and_the_solve_falls_back(monkeypatch):
    # Given the stub instead of the stage evaluation, the fill stops (stats[4] = 2) at the first stage that needs
    # one; the solve then reruns with the evaluation. Here the fill is the plain one given the plain stub.
    from placement.parallel import dp
    from tests.test_parallel import chain

    inst = chain(_nodes_with_a_lean_option(), cost=0.5, devices=8, memory=12.0, microbatches=4)
    reference = dp.solve_parallel(inst, compiled=False)
    calls = []

    def kernels(use_compiled, kind="exact", aside=False):
        calls.append(kind)
        if kind != "none":
            return K.interpreted()
        return SimpleNamespace(fill=lambda *args: K.fill(*args, *K.plain_functions("none")), close=lambda: None,
                               compiles=lambda: False)

    monkeypatch.setattr(K, "kernels", kernels)
    monkeypatch.setattr(dp, "_knapsacks_needed", lambda *args: False)
    found = dp.solve_parallel(inst, compiled=True)
    assert calls == ["none", "exact"]
    assert found.value == reference.value and found.plan == reference.plan and reference.stats["knapsacks"] > 0


def test_compiled_fill_without_knapsacks_equals_plain_fill(monkeypatch):
    # Memory never binds (every node's only option fits with all of them together): the compiled fill is given
    # the stub instead of the stage evaluation, and gives the plain fill's value and plan for each schedule.
    from placement.parallel.dp import solve_parallel
    from tests.test_parallel import chain, tmpc

    nodes = [{1: (tmpc("v", 3 + k % 4, 1, a=1),), 2: (tmpc("v", 2 + k % 3, 1, a=1),)} for k in range(7)]
    inst = chain(nodes, cost=1.0, devices=12, memory=1e6, microbatches=8)
    chosen, kernels = [], K.kernels
    monkeypatch.setattr(K, "kernels", lambda use_compiled, kind="exact", aside=False:
                        chosen.append((use_compiled, kind)) or kernels(use_compiled, kind, aside))
    for schedule in ("piper", "1f1b", "gpipe"):
        plain = solve_parallel(inst, schedule=schedule, compiled=False)
        compiled = solve_parallel(inst, schedule=schedule, compiled=True)
        assert compiled.value == plain.value and compiled.plan == plain.plan and plain.plan is not None
    assert [kind for use_compiled, kind in chosen if use_compiled] == ["none"] * 3


def test_the_stage_evaluation_a_fill_needs():
    assert K.evaluator(False, False) == K.evaluator(False, True) == K.evaluator(False, False, True) == "none"
    assert K.evaluator(True, False) == "exact" and K.evaluator(True, True) == "greedy"
    assert K.evaluator(True, False, True) == "written"


def test_sizes_as_written_are_read_only_by_the_fill_that_needs_them(monkeypatch):
    # fills_at_one_ulp has no exact unit: its fill decides memory on the sizes as written ("written"); the lean
    # option's instance has one, and its fill is given the stub of written_value ("exact"). Given the stub where the
    # sizes as written are read, the fill stops at the first stage near the bound, and the solve reruns with the
    # function itself: the same optimum, 3 (the plain fill here, given the plain functions)
    from placement.parallel import dp
    from tests.test_parallel import chain, fills_at_one_ulp

    calls = []

    def kernels(use_compiled, kind="exact", aside=False):
        calls.append(kind)
        given = "exact" if len(calls) == 1 else kind
        return SimpleNamespace(fill=lambda *args: K.fill(*args, *K.plain_functions(given)), close=lambda: None,
                               compiles=lambda: False)

    monkeypatch.setattr(K, "kernels", kernels)
    found = dp.solve_parallel(fills_at_one_ulp(), compiled=True)
    assert calls == ["written", "written"]
    assert (found.value, found.stats["memory_as_written"], found.stats["knapsacks"]) == (3.0, True, 1)
    calls.clear()
    found = dp.solve_parallel(chain(_nodes_with_a_lean_option(), cost=0.5, devices=8, memory=12.0, microbatches=4),
                              compiled=True)
    assert calls == ["exact"] and found.stats["memory_as_written"] is False and found.stats["knapsacks"] > 0


WRITTEN = """
from placement.kernels import compile_kernel, is_cached
from placement.parallel import _kernels as K
K.compiled_functions("exact")
print([is_cached(compile_kernel(f)) for f in (K.evaluate, K.knapsack_written, K.fits_as_written)])
K.compiled_function("written", 5)
print([is_cached(compile_kernel(f)) for f in (K.written_value, K.knapsack_written, K.fits_as_written)])
"""


def test_the_exact_evaluation_compiles_no_knapsack_on_the_sizes_as_written(tmp_path):
    # A fresh install whose instances have an exact memory unit (the usual case) compiles the exact evaluation
    # without knapsack_written (the largest kernel after the fill); a fill that reads the sizes as written compiles
    # it, with written_value
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", WRITTEN], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines() == ["[True, False, False]", "[True, True, True]"]


ASIDE = """
from placement.kernels import compile_aside, wait_aside
from placement.parallel._kernels import fill, functions_compile
before = functions_compile("none"), functions_compile("exact")
process = compile_aside([("placement.parallel._kernels", "compiled_functions", ("none",))], fill)
wait_aside(process)
print(before, process.returncode, functions_compile("none"), functions_compile("exact"))
"""


def test_a_second_process_compiles_kernels_into_the_cache(tmp_path):
    # Nothing cached at first; the second process compiles the stub evaluation and its stub helpers (and not the
    # exact evaluation) into the cache it shares with this one.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", ASIDE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "(True, True) 0 False True"


def test_a_second_process_that_is_not_needed_is_stopped():
    from placement.kernels import stop_aside

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stop_aside(process)
    assert process.returncode is not None and process.returncode != 0
    stop_aside(None)   # nothing started: nothing to stop


def test_a_plain_fill_stops_at_its_deadline_or_when_on_course_to_overrun_it():
    from time import perf_counter

    now = perf_counter()
    started = [0.0, 0.0, now + 1.0, now - 0.2]     # a budget of 1.2 s, 0.2 s spent
    assert K.past(started, 1, 10) is True           # 0.2 s · (10 / 1)² = 20 s > 3 · 1.2 s
    assert K.past(started, 9, 10) is False          # 0.2 s · (10 / 9)² ≈ 0.25 s
    assert K.past([0.0, 0.0, now + 1.0, now], 1, 10) is False   # under a tenth of a second: no projection
    assert K.past([0.0, 0.0, now - 0.01, now - 0.5], 9, 10) is True   # past the deadline
    assert K.past([0.0, 0.0, math.inf, now - 0.2], 1, 10) is False    # no deadline
    assert K.never_past(started, 1, 10) is False


def test_the_fill_reads_a_subset_only_within_the_span_of_its_cells(monkeypatch):
    """GPipe on 16 devices, m = 8 and t = 1, 2 (the table keeps both the device count and the degree sum): of a
    subset's cells the fill reads only those between the first and the last that hold a value within the ceiling,
    per device count (``spans[J, 1 + k]``) and over the counts (``spans[J, 0]``); every other cell is infinite or
    above it, which the fill read and skipped for every stage and degree that could extend it."""
    from placement.parallel import dp as D
    from tests.test_parallel import chain, tmpc

    kept, runs = [], []
    workspace, run = K.workspace, D._run
    monkeypatch.setattr(K, "workspace", lambda *args: kept.append(workspace(*args)) or kept[-1])
    monkeypatch.setattr(D, "_run", lambda *args, **kwargs: runs.append(run(*args, **kwargs)) or runs[-1])
    nodes = [{1: (tmpc("v", time, 1),), 2: (tmpc("v", 0.6 * time, 1),)} for time in (4, 1, 3, 2, 5)]
    found = D.solve_parallel(chain(nodes, cost=1.0, devices=16, microbatches=8), schedule="gpipe", compiled=False)
    assert found.value == 2.825 and found.stats["collapsed"] is False
    dp, spans = runs[-1][0], kept[-1][-1]
    slack = found.stats["chain_value"] * (1 + 1e-12)
    assert spans.shape == (6, 1 + 17, 2)
    narrower = 0
    for J in range(dp.shape[0]):
        if spans[J, 0, 0] < 0:   # never read: the whole graph
            continue
        held = np.isfinite(dp[J]) & (dp[J] <= slack)
        codes = np.flatnonzero(held.any(axis=1))
        assert spans[J, 0].tolist() == ([codes[0], codes[-1] + 1] if len(codes) else [17, 0])
        for k in range(17):
            sums = np.flatnonzero(held[k])
            assert spans[J, 1 + k].tolist() == ([sums[0], sums[-1] + 1] if len(sums) else [9, 0])
            narrower += int(len(sums) < 9)
    assert narrower > 0


def test_the_pass_over_the_sets_fills_the_chains_table_where_its_plan_is_not_needed(monkeypatch):
    """A chain has as many successor-closed sets as the pass along one topological order: without a deadline that
    pass's plan is never read, and the pass over the sets fills its table and parents in place (a second table of
    the size, new, cost more than its sparse fill); with one, the chain's plan stands past it and keeps its own.
    Parents are 32-bit, as sets and pairs are below 2^31. The optimum and plan are the same either way."""
    from placement.parallel import dp as D
    from tests.test_parallel import chain, tmpc

    runs = []
    run = D._run
    monkeypatch.setattr(D, "_run", lambda *args, **kwargs: runs.append(run(*args, **kwargs)) or runs[-1])
    inst = chain([{1: (tmpc("v", time, 1),), 2: (tmpc("v", 0.6 * time, 1),)} for time in (4, 1, 3, 2, 5)],
                 cost=1.0, devices=16, microbatches=8)
    found = D.solve_parallel(inst, schedule="gpipe", compiled=False)
    (chain_dp, chain_parent, _), (dp, parent, _) = runs
    assert dp is chain_dp and parent is chain_parent and parent.dtype == np.int32
    runs.clear()
    limited = D.solve_parallel(inst, schedule="gpipe", compiled=False, deadline=1e300)
    (chain_dp, chain_parent, _), (dp, parent, _) = runs
    assert dp is not chain_dp and parent is not chain_parent
    assert found.value == limited.value == 2.825 and found.plan == limited.plan
