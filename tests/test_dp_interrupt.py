"""Ctrl-C while the DP runs: the plan it holds (its upper bound's) goes on, verified, in the interrupt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import placement
from placement.problem.bounds import throughput_lower_bound
from placement.solvers import chain_dp, dp
from tests.interrupted import result_of_interrupted_solve

ROOT = Path(__file__).resolve().parents[1]

# node 0 (7) feeds four nodes (4, 7, 1, 4), its output costing 1, on three accelerators: the DP's optimum is 9
# ({0, 3} | {1, 4} | {2}: 7 + 1 + 1 out, 1 in + 4 + 4, 1 in + 7), the chain DP over a few topological orders
# reaches 12 only, and the instance's lower bound is the work over the devices, 23 / 3
TIMES = (7, 4, 7, 1, 4)
STAR = {"maxSizePerFPGA": 100, "maxFPGAs": 3, "maxCPUs": 0,
        "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": 100, "size": 1}
                  for i, t in enumerate(TIMES)],
        "edges": [{"sourceId": 0, "destId": i, "cost": 1} for i in range(1, len(TIMES))]}
# a chain of three: its ideals are the prefixes of its one order, and the DP runs without an upper bound
CHAIN = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
         "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": 100, "size": 1}
                   for i, t in enumerate((3, 1, 2))],
         "edges": [{"sourceId": i, "destId": i + 1, "cost": 1} for i in range(2)]}
CHAIN_PLAN_NOTE = ("the search was interrupted: the plan in hand is the chain DP's over a few topological orders "
                   "(the DP's upper bound), with the instance's lower bound")


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


def _result_of_interrupted_solve(instance=STAR, **options):
    """:func:`tests.interrupted.result_of_interrupted_solve`, of the star by default."""
    return result_of_interrupted_solve(instance, **options)


def test_the_instance_s_numbers():
    assert placement.solve(STAR).value == 9.0
    assert dp.solve_chain(placement.load(STAR)).objective == 12.0
    assert throughput_lower_bound(placement.load(STAR))["bound"] == 23 / 3


@pytest.mark.parametrize("method", ["dp", "auto"])
def test_ctrl_c_after_the_upper_bound_carries_the_chain_plan(monkeypatch, method):
    """Interrupted where the DP over every ideal starts (its upper bound from the chain DP is set): that plan,
    verified, with the instance's lower bound; it had ended the solve with no plan."""
    monkeypatch.setattr(dp, "best_plan", _interrupted)
    result = _result_of_interrupted_solve(method=method)
    assert (result.method, result.status, result.value, result.bound) == ("dp", "feasible", 12.0, 23 / 3)
    assert result.gap == pytest.approx((12 - 23 / 3) / 12)
    assert result.verified and result.verification.valid and result.verification.value == 12.0
    assert result.message == CHAIN_PLAN_NOTE
    assert sorted(len(stage.nodes) for stage in result.plan) == [1, 2, 2]


def test_ctrl_c_between_two_orders_of_the_chain_dp_carries_the_first_order_s_plan(monkeypatch):
    real, first = chain_dp.best_plan, []

    def once(*args, **kwargs):
        if first:
            raise KeyboardInterrupt
        first.append(real(*args, **kwargs))
        return first[0]

    monkeypatch.setattr(chain_dp, "best_plan", once)
    result = _result_of_interrupted_solve(method="dp")
    _, value, plan = first[0]
    assert (result.status, result.value, result.bound) == ("feasible", value, 23 / 3)
    assert [(stage.device_type, stage.nodes) for stage in result.plan] == [(d.type, d.nodes) for d in plan.devices
                                                                             if d.nodes]
    assert result.message == CHAIN_PLAN_NOTE


def test_ctrl_c_before_the_dp_holds_a_plan_goes_on_without_one(monkeypatch):
    monkeypatch.setattr(dp, "best_plan", _interrupted)   # a chain: no upper bound is computed first
    with pytest.raises(KeyboardInterrupt) as caught:
        placement.solve(CHAIN, method="dp")
    assert not isinstance(caught.value, placement.Interrupted)
    assert str(caught.value) == "interrupted before the DP found a plan"
    monkeypatch.setattr(chain_dp, "best_plan", _interrupted)   # the first order's run
    with pytest.raises(KeyboardInterrupt) as caught:
        placement.solve(STAR)
    assert not isinstance(caught.value, placement.Interrupted)


def test_ctrl_c_while_the_dp_checks_its_plan_on_memory_that_rounds_carries_that_plan(monkeypatch):
    """The DP's plan that its rounded memory checks cannot prove (tests/test_memory_fit.py: 100, where the
    optimum is 2) is in hand while the DP runs again on memory rounded to admit every fit."""
    from tests.test_memory_fit import lenient_pair

    real, runs = dp.best_plan, []

    def first_only(*args, **kwargs):
        runs.append(None)
        if len(runs) > 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(dp, "best_plan", first_only)
    result = _result_of_interrupted_solve(lenient_pair(), method="dp")
    # the instance's bound: the run that reaches 1.5 was interrupted
    assert throughput_lower_bound(placement.load(lenient_pair()))["bound"] == 1.2
    assert (result.status, result.value, result.bound) == ("feasible", 100.0, 1.2)
    assert result.verified and result.message == ("the search was interrupted: the plan in hand is the DP's on "
                                                  "memory checks that round, which prove nothing, with the "
                                                  "instance's lower bound")


def _interrupted_search(monkeypatch):
    from placement.solvers.milp import driver
    from placement.solvers.milp.interrupt import SearchInterrupted

    pytest.importorskip("ortools")

    def at_once(be, options):
        raise SearchInterrupted(None)

    monkeypatch.setattr(driver, "solve_interruptibly", at_once)


def test_an_interrupted_auto_milp_keeps_the_note_on_why_it_ran(monkeypatch):
    """``auto`` ran the MILP because the DP refused (max_ideals): the interrupted search's plan in hand said
    nothing of that, where its uninterrupted answer does."""
    _interrupted_search(monkeypatch)
    result = _result_of_interrupted_solve(max_ideals=3)
    assert (result.method, result.status) == ("milp", "feasible")
    assert result.message.startswith("the MILP solved this (method 'auto'): the DP refused it (more than 3 ideals")
    assert "the search was interrupted" in result.message


def test_ctrl_c_before_auto_s_milp_searches_keeps_the_plan_the_dp_held_when_its_time_ran_out(monkeypatch):
    """Under ``auto`` with a time limit, the DP ran out of time holding the chain DP's plan and the MILP took
    over from it; Ctrl-C while the MILP's modules loaded (OR-Tools takes a second or so) ended the solve with
    no plan at all. The plan the DP held goes on, as an interrupt of the DP itself carries it."""
    from placement.errors import LimitExceededError
    from placement.solvers.milp import entry

    pytest.importorskip("ortools")

    def out_of_time(*args, **kwargs):
        raise LimitExceededError("the time limit ran out while the DP ran (dp: 0/9 ideals)", parameter="time_limit")

    monkeypatch.setattr(dp, "best_plan", out_of_time)
    monkeypatch.setattr(entry, "check_backend_available", _interrupted)
    result = _result_of_interrupted_solve(time_limit=30)
    assert (result.method, result.status, result.value, result.bound) == ("dp", "feasible", 12.0, 23 / 3)
    assert result.verified and result.verification.valid and result.verification.value == 12.0
    assert result.message == (f"{CHAIN_PLAN_NOTE}; the DP refused it (the time limit ran out while the DP ran "
                              "(dp: 0/9 ideals)), and the MILP that took over (method 'auto') was interrupted "
                              "before it found a better plan")


def test_an_interrupted_auto_milp_after_the_dp_s_unproven_plan_keeps_that_plan(monkeypatch):
    """The MILP ran because the DP's plan (100) is unproven; its search, interrupted before it answered,
    has only the DP's plan as its start: the DP's plan goes on, saying the MILP ran."""
    from tests.test_memory_fit import lenient_pair

    _interrupted_search(monkeypatch)
    result = _result_of_interrupted_solve(lenient_pair())
    assert (result.method, result.status, result.value, result.bound) == ("dp", "feasible", 100.0, 1.5)
    assert result.message.endswith("; the MILP ran too (method 'auto'), and the search was interrupted before it "
                                   "found a better plan")


def test_ctrl_c_in_the_dp_that_starts_auto_s_milp_keeps_the_dp_s_unproven_plan(monkeypatch):
    """Interrupted before its search, in its own start, the MILP has no plan: the DP's goes on."""
    from placement.solvers.milp import warmstart
    from tests.test_memory_fit import lenient_pair

    pytest.importorskip("ortools")

    def interrupted(*args, **kwargs):
        raise dp.DPInterrupted(None)

    monkeypatch.setattr(warmstart, "solve_dp", interrupted)
    result = _result_of_interrupted_solve(lenient_pair())
    assert (result.method, result.status, result.value, result.bound) == ("dp", "feasible", 100.0, 1.5)
    assert result.message.endswith("; the MILP ran too (method 'auto'), and the search was interrupted before it "
                                   "found a better plan")


@pytest.mark.parametrize("method, options", [("auto", {"max_ideals": 3}), ("milp", {}),
                                             ("milp", {"contiguity": "none"})])
def test_ctrl_c_in_the_dp_that_starts_the_milp_carries_its_plan_as_the_milp_s_start(monkeypatch, method, options):
    """Interrupted in the DP that finds the MILP's start (under ``auto`` after the DP refused: no answer of
    method 'dp'), the MILP's search never began: the plan the DP held goes on as the MILP's starting plan
    would, verified for the request (a ``stages`` plan is one of every class), with the instance's lower
    bound."""
    from placement.solution import Solution, Status
    from placement.solvers.milp import warmstart

    pytest.importorskip("ortools")
    chain = dp.solve_chain(placement.load(STAR))

    def interrupted(*args, **kwargs):
        raise dp.DPInterrupted(Solution(Status.FEASIBLE, chain.plan, chain.objective, 0.0, "dp"))

    monkeypatch.setattr(warmstart, "solve_dp", interrupted)
    result = _result_of_interrupted_solve(method=method, **options)
    assert (result.method, result.status, result.value, result.bound) == ("milp", "feasible", 12.0, 23 / 3)
    assert result.verified and result.verification.valid and result.verification.value == 12.0
    assert result.message.endswith("the search was interrupted before it started; the starting plan is returned")
    assert result.contiguity == options.get("contiguity", "stages")


def test_ctrl_c_in_the_start_s_chain_dp_keeps_the_intervals_plan(monkeypatch):
    """The DP refused (on a graph of 10,000 parallel nodes, its ideals): the start falls back on the chain DP
    over intervals of one topological order (12 here: {0, 1} | {2, 3} | {4}), then runs the chain DP over
    every prefix. Ctrl-C in that one lost the intervals' plan: the solve ended with no plan at all."""
    from placement.errors import LimitExceededError
    from placement.solvers.milp import warmstart

    pytest.importorskip("ortools")

    def refused(*args, **kwargs):
        raise LimitExceededError("too many ideals", "max_ideals")

    monkeypatch.setattr(warmstart, "solve_dp", refused)
    monkeypatch.setattr(warmstart, "solve_chain", _interrupted)
    result = _result_of_interrupted_solve(method="milp")
    assert (result.method, result.status, result.value, result.bound) == ("milp", "feasible", 12.0, 23 / 3)
    assert [stage.nodes for stage in result.plan] == [(0, 1), (2, 3), (4,)]
    assert result.message.endswith("the search was interrupted before it started; the starting plan is returned")


def test_ctrl_c_in_the_dp_that_starts_the_milp_before_it_holds_a_plan_goes_on_without_one(monkeypatch):
    from placement.solvers.milp import warmstart

    pytest.importorskip("ortools")

    def interrupted(*args, **kwargs):
        raise dp.DPInterrupted(None)

    monkeypatch.setattr(warmstart, "solve_dp", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        placement.solve(STAR, method="milp")
    assert not isinstance(caught.value, placement.Interrupted)
    assert str(caught.value) == "interrupted before the DP found a plan"


_SIGINT_AT = """
import signal, sys
from placement.cli import run
from placement.solvers import chain_dp, dp

def sigint(*args, **kwargs):   # the process's own SIGINT, as Ctrl-C delivers it, at a known point
    signal.raise_signal(signal.SIGINT)

setattr({module}, "best_plan", sigint)
sys.argv = ["placement", "solve", sys.argv[1], "--method", "dp", "--quiet"] + sys.argv[2:]
run()
"""


def _command(tmp_path, instance, module, *more):
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(instance))
    return subprocess.run([sys.executable, "-c", _SIGINT_AT.format(module=module), str(path), *more],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_command_shows_the_plan_in_hand_and_exits_130(tmp_path):
    proc = _command(tmp_path, STAR, "dp", "--json")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: interrupted"]
    shown = json.loads(proc.stdout)
    assert (shown["method"], shown["status"], shown["objective"], shown["bound"]) == ("dp", "feasible", 12.0, 23 / 3)
    assert shown["verified"]["valid"] and shown["verified"]["value"] == 12.0
    assert shown["message"] == CHAIN_PLAN_NOTE


def test_the_command_without_a_plan_in_hand_says_so_and_exits_130(tmp_path):
    proc = _command(tmp_path, CHAIN, "dp")
    assert (proc.returncode, proc.stdout) == (130, "")
    assert proc.stderr.strip().splitlines() == ["error: interrupted before the DP found a plan"]


def test_a_model_that_runs_out_of_memory_while_built_returns_the_start(monkeypatch):
    """100,000 nodes on 1,001 devices make 10^8 variables: the build raised MemoryError, which came out of
    placement solve as a traceback with the start (found by then) lost. The model is dropped and the start
    returned, verified, with the instance's lower bound, as where the time limit ends the build."""
    from placement.solvers.milp.stages import Stages

    pytest.importorskip("ortools")

    def out_of_memory(self, problem, d, be, objective):
        be.bool_var("z[0,1]")
        raise MemoryError

    monkeypatch.setattr(Stages, "build", out_of_memory)
    result = placement.solve(STAR, method="milp", max_ideals=3)   # the DP refused: the start is the chain DP's, 12
    assert (result.status, result.value, result.bound) == ("feasible", 12.0, 23 / 3)
    assert result.message.endswith("the model ran out of memory while it was built (1 variable so far); the DP or a "
                                   "coarser graph (colour classes) takes less; the starting plan is returned")


#: a 300-node chain of two accelerators (301 ideals), for the DP on a fake clock
CHAIN_300 = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
             "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1 + i % 3, "cpuLatency": 100, "size": 1}
                       for i in range(300)],
             "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(299)]}


def _on_a_fake_clock(monkeypatch, kernel_call):
    """Run the DP's kernel through ``kernel_call(kernel, lo, hi, *rest)``, which advances the clock it returns
    (a one-element list of seconds), read by the DP's table in place of :func:`time.perf_counter`."""
    import types

    from placement.solvers import dp_table

    now = [0.0]
    prepare = dp_table.prepare

    def timed_prepare(*args, **kwargs):
        data = prepare(*args, **kwargs)
        kernel = data.kernels.dp_range
        data.kernels = types.SimpleNamespace(dp_range=lambda *call: kernel_call(kernel, *call))
        return data

    monkeypatch.setattr(dp_table, "prepare", timed_prepare)
    monkeypatch.setattr(dp_table, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return now


def test_the_dp_looks_at_the_clock_about_every_quarter_second_however_slow_its_ideals(monkeypatch):
    """The DP fills its table a chunk of ideals per kernel call, and hears Ctrl-C, its deadline and says its
    progress only between calls. Its chunks were sized by count alone: on 923,523 ideals (4 parallel chains
    of 30), whose later ideals each pair with hundreds of thousands below them, one call ran 50 s. Here a
    clock on which each ideal takes a second: after the first chunk of a run (256 of the 301 ideals of a
    300-node chain) no call holds more than one ideal, and the optimum is the same."""
    expected = placement.solve(CHAIN_300, method="dp").value
    calls: list[int] = []

    def a_second_an_ideal(kernel, lo, hi, *rest):
        calls.append(hi - lo)
        now[0] += hi - lo
        return kernel(lo, hi, *rest)

    now = _on_a_fake_clock(monkeypatch, a_second_an_ideal)
    assert placement.solve(CHAIN_300, method="dp").value == expected
    tries = calls.count(256)   # a run under a ceiling near the lower bound, then higher ones: each from ideal 0
    assert tries >= 1 and calls[0] == 256 and set(calls) == {1, 256} and sum(calls) == 301 * tries


def test_the_dp_stops_a_kernel_call_within_its_pairs_however_the_pairs_per_ideal_jump(monkeypatch):
    """Sizing the chunks by the last chunk's pace in ideals fails where the pairs of the window per ideal jump:
    on three parallel chains of 150 nodes (3,442,953 ideals) a chunk after one of 0.01 s took 58 s, so a time
    limit of 10 s ended after 61 s and Ctrl-C was heard 33 s after it was sent. The kernel now also stops
    once it has examined the pairs the last call examined in a quarter second. Here a clock on which each pair
    takes a second: every call examines at most the first budget of pairs (16 here) plus those of the one
    ideal at which it stops (at most 2 · 300 in a 300-node chain with two device types), and the optimum is the
    same."""
    from placement.solvers import dp_table

    expected = placement.solve(CHAIN_300, method="dp").value
    examined: list[int] = []

    def a_second_a_pair(kernel, lo, hi, *rest):
        counters = rest[-3]   # the counters, the budget of pairs, and the layers above (or None)
        before = int(counters[0])
        reached = kernel(lo, hi, *rest)
        examined.append(int(counters[0]) - before)
        now[0] += examined[-1]
        return reached

    now = _on_a_fake_clock(monkeypatch, a_second_a_pair)
    monkeypatch.setattr(dp_table, "FIRST_PAIRS", 16)
    assert placement.solve(CHAIN_300, method="dp").value == expected
    assert sum(examined) > 16 + 600 and max(examined) <= 16 + 600


def test_a_long_dp_says_its_progress_less_often_as_it_runs_longer(monkeypatch):
    """A line a second flooded a long run's log (1,231 lines in 23 minutes on 1.77 million ideals): past its
    first ten seconds the DP says its progress once per tenth of the time it has run. Here a clock on which
    each ideal takes a second, one ideal a call, on a 300-node chain (301 ideals, about 301 s a run): lines at
    most a second apart over the first ten seconds, then each at least a tenth of the time so far after the
    one before, so no more than 10 + log(301 / 10) / log(1.1), about 46, a run (old: one a second, 300)."""
    import math

    def one_ideal_a_second(kernel, lo, hi, *rest):
        now[0] += 1.0
        return kernel(lo, lo + 1, *rest)

    now = _on_a_fake_clock(monkeypatch, one_ideal_a_second)
    lines: list[str] = []
    placement.solve(CHAIN_300, method="dp", progress=lines.append)
    filled = [line for line in lines if "/301 ideals" in line]
    runs = sum(1 for line in filled if line.split(": ", 1)[1].startswith("2/301 ideals"))
    assert runs >= 1 and len(filled) <= runs * (10 + math.log(301 / 10) / math.log(1.1) + 1)


def test_ctrl_c_in_a_local_search_carries_its_best_plan(monkeypatch):
    """Ctrl-C as restart 1 of 3 starts: restart 0's plan goes on, verified, as a run of one restart (same
    seed) returns it; Ctrl-C within restart 0's climb: the climb's plan so far (no worse than its greedy
    start, moves never raise the max-load); Ctrl-C before any plan: a plain interrupt. Ctrl-C used to drop
    the restarts' plans."""
    from placement.solvers.baselines import local_search

    one = placement.solve(STAR, method="local-search", restarts=1)
    real_fill, fills = local_search.greedy_fill, []

    def fill_once(*args, **kwargs):
        fills.append(1)
        if len(fills) > 1:
            raise KeyboardInterrupt
        return real_fill(*args, **kwargs)

    monkeypatch.setattr(local_search, "greedy_fill", fill_once)
    result = _result_of_interrupted_solve(method="local-search", restarts=3)
    assert (result.method, result.status, result.value) == ("local-search", "feasible", one.value)
    assert [(s.device_type, s.nodes) for s in result.plan] == [(s.device_type, s.nodes) for s in one.plan]
    assert result.verified and result.verification.valid and result.verification.value == one.value
    assert result.message == "interrupted after 1 of 3 restarts"

    climbed = []   # the plan before the climb's first move
    real_apply = local_search._Climber.apply

    def apply_once(self, *args):
        if climbed:
            raise KeyboardInterrupt
        climbed.append(self.plan())
        real_apply(self, *args)

    monkeypatch.setattr(local_search, "greedy_fill", real_fill)
    monkeypatch.setattr(local_search._Climber, "apply", apply_once)
    result = _result_of_interrupted_solve(method="local-search", restarts=3)
    from placement.verification.evaluate import evaluate

    start = evaluate(placement.load(STAR), climbed[0], "none").max_load
    assert result.status == "feasible" and result.verification.valid and result.value <= start
    assert sorted(s.nodes for s in result.plan) != sorted(d.nodes for d in climbed[0].devices if d.nodes)
    assert result.message == "interrupted after 0 of 3 restarts"

    monkeypatch.setattr(local_search, "greedy_fill", _interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        placement.solve(STAR, method="local-search")
    assert not isinstance(caught.value, placement.Interrupted)


def test_under_a_time_limit_a_table_that_cannot_end_in_time_stops_at_once(monkeypatch):
    """auto's DP, with 20 s left, had filled 5% of a 184,756-ideal table after 1.1 s and ran to the deadline,
    leaving the MILP no time: its answer was 37.02 where the MILP alone reaches 33.88. At its pace so far
    (later ideals pair with more below them, so the pace only slows) the table would take 22 s: it stops then.
    A table that would end in time at its pace, or one read before it ran a second, goes on."""
    import time

    from placement.errors import LimitExceededError
    from placement.solvers.dp import deadline_watch

    now = 1000.0
    monkeypatch.setattr(time, "perf_counter", lambda: now)
    watch = deadline_watch(now + 20.0, None, hopeless=True)
    watch.poll("dp: 92,378/184,756 ideals (50%), 12 blocks evaluated, 1.1 s", 0.5, 1.1)   # 1.1 s more: in time
    watch.poll("dp: 100/184,756 ideals (0%), 12 blocks evaluated, 0.9 s", 100 / 184756, 0.9)   # too soon to read
    watch("dp: 9,421/184,756 ideals (5%), 49,084 blocks evaluated, 1.1 s")   # a progress line: no pace with it
    watch.poll("chain, order 1 of 2: 5 ideals")                              # not the table: no pace
    with pytest.raises(LimitExceededError) as stopped:
        watch.poll("dp: 9,421/184,756 ideals (5%), 49,084 blocks evaluated, 1.1 s", 9421 / 184756, 1.1)
    assert stopped.value.parameter == "time_limit"
    assert str(stopped.value) == ("at its pace so far the DP would not finish within the time limit (dp: 9,421/184,756 "
                                  "ideals (5%), 49,084 blocks evaluated, 1.1 s)")
    # without hopeless (a caller that wants the table whatever its pace), only the deadline stops it
    deadline_watch(now + 20.0, None).poll("dp: 9,421/184,756 ideals (5%), 49,084 blocks evaluated, 1.1 s",
                                          9421 / 184756, 1.1)


def test_auto_gives_its_dp_the_watch_that_stops_a_table_that_cannot_end(monkeypatch):
    import placement
    import placement.solvers.dp as dp_module

    asked = []
    real = dp_module.deadline_watch

    def watch(deadline, progress=None, hopeless=False):
        asked.append(hopeless)
        return real(deadline, progress, hopeless)

    monkeypatch.setattr(dp_module, "deadline_watch", watch)
    chain4 = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    assert placement.solve(chain4, time_limit=30).value == 7.5
    assert asked == [True]


def test_the_milp_warm_start_stops_a_dp_table_that_cannot_end_in_its_share(monkeypatch):
    """The MILP's warm-start DP ran to its deadline, half the time limit, where its table could not end by then:
    on the published InceptionV3 latency instance under the throughput objective (a table of about 100 s) that
    was 30 s of 60 in which the DP gave nothing but the chain DP's plan, which the MILP then proved optimal in
    0.3 s. A table 5% filled after 1.1 s, with 10 s left, now stops at once, and the chain DP's plan is the
    start (chain4: 7.5, its optimum)."""
    import time

    from placement.errors import LimitExceededError
    from placement.solvers.milp import warmstart
    from placement.verification.evaluate import evaluate

    real, stopped = warmstart.solve_dp, []

    def table_at_five_percent(problem, *, progress=None, **options):
        try:
            progress.poll("dp: 9,421/184,756 ideals (5%), 49,084 blocks evaluated, 1.1 s", 9421 / 184756, 1.1)
        except LimitExceededError:
            stopped.append(True)
            raise
        stopped.append(False)
        return real(problem, progress=progress, **options)

    monkeypatch.setattr(warmstart, "solve_dp", table_at_five_percent)
    chain4 = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json")
    plan, bound = warmstart.pipeline_start_and_bound(chain4, 1000, None, deadline=time.perf_counter() + 10.0)
    assert stopped == [True]
    assert (evaluate(chain4, plan, "stages").max_load, bound) == (7.5, 0.0)   # the chain DP's plan proves no bound


def test_the_pace_a_dp_table_reports_leaves_out_compiling_its_kernels(monkeypatch):
    """The seconds a table reports with its share filled (its pace, by which a table that cannot end in time is
    stopped) counted the compiling of its kernels, seconds on a fresh install, as seconds of the table: a table
    that would end in time could be stopped. Compiling that takes 5 s (a clock moved on) is no part of them."""
    import time

    from placement.solvers import dp_table

    real_clock, moved = time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + moved[0])

    def compiling(data, units, progress, kernel):
        moved[0] += 5.0

    class Watch:
        def __init__(self):
            self.spent = []

        def __call__(self, message):
            pass

        def poll(self, message, done=None, spent=0.0, line=False):
            self.spent.append(spent)

    monkeypatch.setattr(dp_table, "_move_to_compiled", compiling)
    monkeypatch.setattr(dp_table.K, "ready", lambda: False)   # as in a fresh process: the table may compile
    chain4 = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json")
    watch = Watch()
    assert dp.solve_dp(chain4, progress=watch).objective == 7.5
    assert moved[0] >= 5.0 and watch.spent and max(watch.spent) < 5.0
