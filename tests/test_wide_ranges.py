"""Inputs at the edges of floating point: times that span many orders of magnitude, tiny sizes, and
names or outputs that text output cannot take. Each gives a plan that is not claimed beyond what
its arithmetic proves, or a one-line error."""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import placement
from placement.errors import InvalidParameterError
from placement.problem.memory_fit import decimal_unit
from placement.problem.units import sums_exactly
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.data import choose_scale

HAVE_CPSAT = any(name == "cp-sat" and ok for name, ok, _ in backend_availability())
CHAIN4 = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"


def two_nodes(fpga: tuple[float, float], cpu: tuple[float, float], edges: list[dict], size: float = 1.0,
              memory: float = 3.0, fpgas: int = 2) -> dict:
    return {"maxSizePerFPGA": memory, "maxFPGAs": fpgas, "maxCPUs": 1, "edges": edges,
            "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": f, "cpuLatency": c, "size": size}
                      for i, f, c in zip((0, 4), fpga, cpu)]}


def test_the_dp_does_not_claim_an_optimum_its_sums_cannot_separate():
    """Node 0 takes 7e9 on an accelerator and 0 on the CPU, node 4 1e-9 and 1e-10; no edges; two
    accelerators and a CPU. Both nodes on the CPU: 1e-10, the optimum. The DP's running sums add
    1e-9 to 7e9, which rounds it away (an ulp of 7e9 is about 1e-6), so it cannot tell its plans
    apart: its answer is a feasible plan with a bound below the optimum, not a proof."""
    result = placement.solve(two_nodes((7e9, 1e-9), (0.0, 1e-10), []), method="dp")
    assert result.status == "feasible"
    assert result.value >= 1e-10
    assert result.bound <= 1e-10
    assert "floating point: on these numbers its loads may be off by up to" in result.message


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_milp_does_not_prove_what_its_rounded_times_cannot_tell_apart():
    """The same instance on CP-SAT without a start: its integer times, scaled for 7e9, are multiples of 2^2,
    which round 1e-9 and 1e-10 down to 0, so its bound is 0 beside a plan of 1e-9 (or 1e-10). A proof must
    meet the plan's value relatively; the answer is a feasible plan with a bound at most the optimum,
    1e-10. From the DP's plan (1e-9) the times are capped at 2^-28, the power of two at or above twice
    it, and scaled by 2^59: 1e-9 and 1e-10 are told apart, and the optimum 1e-10 is proven. A free edge
    0 -> 4 keeps the graph one part: without it the start would be the fill of the two parts, the optimum
    itself, and no model would be built."""
    instance = two_nodes((7e9, 1e-9), (0.0, 1e-10), [{"sourceId": 0, "destId": 4, "cost": 0.0}])
    cold = placement.solve(instance, method="milp", backend="cp-sat", time_limit=10, warm_start=False)
    assert cold.stats["time_scale"] == 2.0 ** -2
    assert cold.status == "feasible"
    assert cold.bound <= 1e-10 <= cold.value
    started = placement.solve(instance, method="milp", backend="cp-sat", time_limit=10)
    assert started.stats["time_scale"] == 2.0 ** 59
    assert (started.status, started.value, started.bound) == ("optimal", 1e-10, 1e-10)
    assert [(s.device_type, s.nodes) for s in started.plan] == [("cpu", (0, 4))]


def test_a_plan_whose_computed_value_was_rounded_away_is_returned_at_its_true_value():
    """0 -> 4 with cost 1; node 0 takes 1e16 on the accelerator and 1 on the CPU, node 4 the other
    way round; one accelerator. The optimum is 2: node 0 on the CPU (1), node 4 on the accelerator
    (1, plus 1 to receive node 0's output). The DP's sums add 1 to 1e16 and lose it (its value reads
    1): its plan comes back at the evaluator's value 2, feasible, not proven, with the instance's
    bound 1 (its own value less its error bound is below that: 8 sums of 2 nodes at 2^-53 of a
    type's total, 1e16 + 1 plus the cost 1, 17.8 on either type). It was dropped before, leaving
    no plan where the DP had found the optimum."""
    doc = two_nodes((1e16, 1.0), (1.0, 1e16), [{"sourceId": 0, "destId": 4, "cost": 1.0}], fpgas=1)
    result = placement.solve(doc, method="dp")
    assert (result.status, result.value, result.bound) == ("feasible", 2.0, 1.0)
    assert [(s.device_type, s.nodes) for s in result.plan] == [("cpu", (0,)), ("accelerator", (4,))]
    assert result.message == ("the DP sums the times and costs in floating point: on these numbers its loads may be "
                              "off by up to 17.8, against its plan's value of 2 (the evaluator's; its own sums read "
                              "1), so the plan is not proven optimal")


def test_a_chain_plan_whose_computed_value_was_rounded_down_still_bounds_the_dp():
    """Node 1 takes 3e17 on the accelerator and 0 on a CPU, node 2 takes 1 on either; no edges; one
    accelerator, two CPUs. The optimum is 1 (both on CPUs, or node 2 on the accelerator), and no plan
    is below 1: node 2 takes 1 wherever it runs. The chain DP's running sums on the accelerator read
    3e17 then 3e17 + 1 = 3e17, so it scored node 2 alone there at 0 and handed the DP a ceiling of 0,
    under which the DP, summing in another order, found nothing: "the DP lost the upper-bound plan".
    The ceiling is now the chain plan's true value plus the sums' error bound."""
    doc = {"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": 2, "edges": [],
           "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 3e17, "cpuLatency": 0, "size": 0},
                     {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": 0}]}
    for method in ("dp", "auto"):
        result = placement.solve(doc, method=method)
        assert (result.status, result.value, result.bound) == ("optimal", 1.0, 1.0)


# a -> b -> c with CPU times 8.3e9 beside 30.83: the DP's running sums on the CPUs are off by about 1e-7
SPREAD_CPU = {"maxSizePerFPGA": 6, "maxFPGAs": 1, "maxCPUs": 2,
              "edges": [{"sourceId": 1, "destId": 2, "cost": 0}, {"sourceId": 2, "destId": 3, "cost": 0}],
              "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": f, "cpuLatency": c, "size": m}
                        for i, f, c, m in ((1, 1, 8326000000.000001, 0), (2, 8, 18, 5), (3, 9, 30.830000000000002, 5))]}


def test_a_value_within_the_sums_tolerance_is_reported_as_the_evaluator_computes_it():
    """a → b → c, no transfer costs; one accelerator of memory 6 (times 1, 8, 9) and two CPUs (times
    8326000000.000001, 18, 30.830000000000002); sizes 0, 5, 5. With c on the accelerator, b and c do not fit
    it together and a on the accelerator around b on a CPU is no pipeline, so a runs on a CPU (8.3e9); with
    c on a CPU (30.830000000000002), a and b fit the accelerator (9): the optimum is 30.830000000000002. The
    DP's running sums on the CPUs pass 8.3e9, whose ulp is about 1e-6, and read c's stage as
    30.829999923706055, within the 1e-6 of its value that it proves optima to, but not within the 1e-9 at
    which a method's value must agree with the evaluator's: the plan was dropped, and the answer was no plan."""
    for method in ("dp", "auto"):
        result = placement.solve(SPREAD_CPU, method=method)
        assert (result.status, result.value, result.bound) == ("optimal", 30.830000000000002, 30.830000000000002)
        assert ("cpu", (3,)) in [(s.device_type, s.nodes) for s in result.plan]


def test_the_dp_takes_the_evaluators_value_only_within_its_sums_rounding(monkeypatch):
    """The instance above, with the evaluator the DP reads made to err by 1: a value that far from the DP's own
    sums (30.829999923706055) is no rounding of them, so the DP keeps its own value, which the check of the
    answer, by a right evaluator, then compares (and refuses), rather than reporting the wrong evaluator's."""
    import placement.solvers.dp as dp
    from placement.solvers.dp import solve_dp

    right = dp.evaluate
    monkeypatch.setattr(dp, "evaluate", lambda *args: dataclasses.replace(right(*args),
                                                                          max_load=right(*args).max_load + 1))
    solution = solve_dp(placement.load(SPREAD_CPU))
    assert solution.objective == 30.829999923706055


def test_rounded_sums_and_rounded_memory_bound_nothing_beyond_the_instance_bound():
    """Node 1 takes 1 on the accelerator and 1e6 on the CPU, with size 1e9 (the memory bound); node 2
    takes 1e17 and 1, with size 1e-9; no edges; one accelerator, one CPU. The optimum is 1: node 1
    alone on the accelerator (its memory exactly fills it), node 2 on the CPU. The sizes have no
    common unit, so the DP's memory checks round, and they dropped that block; its sums are inexact
    too. Its value less its error bound (about 1e6) was reported as the bound, above the optimum; a
    DP that may miss blocks bounds only as the instance's own bound does, 1."""
    doc = {"maxSizePerFPGA": 1e9, "maxFPGAs": 1, "maxCPUs": 1, "edges": [],
           "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1e6, "size": 1e9},
                     {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1e17, "cpuLatency": 1, "size": 1e-9}]}
    result = placement.solve(doc, method="dp")
    assert result.bound <= 1.0 <= result.value
    if result.status != "optimal":
        assert "memory sizes and bounds have no unit" in result.message
    assert placement.verify(doc, {"fpgas": [{"nodes": [1]}], "cpus": [{"nodes": [2]}]}).value == 1.0


def test_a_dp_plan_that_meets_the_instance_bound_is_proven():
    """A chain a → b → c → d taking 0 on an accelerator and 40, 30, 20, 50 on the CPU, with
    transfer costs 0.1 (no power of two makes 0.1 an exact sum, so the DP's loads may be off by
    a few ulps); two accelerators and a CPU. All four on one accelerator: load 0, and no load is
    below 0, the instance's bound. The plan meets it, so it is optimal whatever the rounding; with
    stages=1 too."""
    doc = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 0, "cpuLatency": c, "size": 1}
                     for i, c in zip((1, 2, 3, 4), (40, 30, 20, 50))],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.1} for i in (1, 2, 3)]}
    for stages in (None, 1):
        result = placement.solve(doc, method="dp", stages=stages)
        assert (result.status, result.value, result.bound, result.gap) == ("optimal", 0.0, 0.0, 0.0)
        assert result.message is None or "not proven" not in result.message


def test_ordinary_ranges_stay_proven():
    result = placement.solve(two_nodes((3.0, 1.0), (4.0, 2.0), [{"sourceId": 0, "destId": 4, "cost": 0.5}]),
                             method="dp")
    assert result.status == "optimal"


@pytest.mark.parametrize("tiny", [1e-300, 5e-324])
def test_a_time_near_the_smallest_float_is_solved(tiny):
    """Node 0 takes ``tiny`` on an accelerator (a subnormal at 5e-324), node 4 takes 1; no edges, two
    accelerators. Each node on its own accelerator: the optimum is 1. The exactness test of the
    DP's sums compares with 2^(53-1074) at most, and must not overflow doing so."""
    result = placement.solve(two_nodes((tiny, 1.0), (5.0, 5.0), []), method="dp")
    assert result.status == "optimal" and result.value == 1.0


def test_scale_for_a_tiny_largest_value():
    """1e-300 / 3 is a multiple of no power of two or ten that a float holds (its shortest decimal form has
    316 digits after the point, its binary form more than 1,023), so the scale is the largest power of two
    under the cap, capped in turn at 2^1000 (2^53 / 3.3e-301 overflows a float). 1e-300 itself is one
    unit of 10^-300, past the listed units (10^-12 and 2^-40) but found from its decimal form: exact."""
    tiny = 1e-300 / 3
    scaling = choose_scale([tiny], tiny, 2.0 ** 53)
    assert scaling == type(scaling)(2.0 ** 1000, False)
    assert choose_scale([1e-300], 1e-300, 2.0 ** 53) == type(scaling)(1e300, True)


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_the_milp_places_a_tiny_node_where_no_accelerator_has_memory():
    doc = {"maxSizePerFPGA": 0, "maxFPGAs": 1, "maxCPUs": 1, "edges": [],
           "nodes": [{"id": 0, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": 1e-300 / 3}]}
    """No power of two or ten under 2^53 makes 1e-300 / 3 whole (see above), but its shortest decimal form,
    3333333333333333e-316, is an integer of 10^-316: the memory rows hold 3333333333333333 against a bound of
    0, exactly, and CP-SAT's proof of the value 1 (the node on the CPU, the only device with room for it)
    stands with no note. With the default start (the DP's plan, already of that value) no model is built."""
    result = placement.solve(doc, method="milp", warm_start=False, time_limit=10)
    assert (result.status, result.value, result.bound, result.message) == ("optimal", 1.0, 1.0, "")
    started = placement.solve(doc, method="milp", time_limit=10)
    assert (started.status, started.value) == ("optimal", 1.0)
    assert started.message == ("started from a plan of value 1; the solver was not run; the starting plan meets "
                               "the instance's lower bound")
    assert [stage.device_type for stage in result.plan] == ["cpu"]


@pytest.mark.parametrize("log, why", [("/nonexistent-folder/solver.log", "No such file or directory"),
                                      (".", "Is a directory")])
def test_a_log_that_cannot_be_written(log, why):
    with pytest.raises(InvalidParameterError) as caught:
        placement.solve(str(CHAIN4), method="milp", log=log)
    assert caught.value.parameter == "log"
    assert str(caught.value).endswith(f"names a file that cannot be written: {log}: {why}")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("backend", [name for name, ok, _ in backend_availability() if ok])
def test_a_log_on_a_full_device_is_one_error_and_no_endless_read(backend):
    """/dev/full opens for writing, then every write fails, and reading it back never ends: the CBC
    backends read their log back for its bound, and once ran out of memory doing so. Every backend
    logs to a scratch file and adds it to the user's log afterwards; a device that takes no write is
    refused before any work, where the failure is named."""
    for warm_start in (False, True):    # the solver would run; the DP's start would prove the optimum
        said: list[str] = []
        with pytest.raises(InvalidParameterError) as caught:
            placement.solve(str(CHAIN4), method="milp", backend=backend, log="/dev/full", time_limit=30,
                            warm_start=warm_start, progress=said.append)
        assert str(caught.value) == "log names a file that cannot be written: /dev/full: No space left on device"
        assert said == []   # no model built


def test_an_empty_log_name_is_named_as_empty():
    # it was probed as a file and read "log names a file that cannot be written: : Is a directory"
    with pytest.raises(InvalidParameterError) as caught:
        placement.solve(str(CHAIN4), method="milp", log="")
    assert str(caught.value) == "log must be a file path or None, not an empty name"
    assert caught.value.parameter == "log"


class _FillsUp:
    """A log file on a disk that fills after ``room`` bytes: each write past it fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room, self.text = room, ""

    def write(self, text: str) -> int:
        if len(self.text) + len(text) > self.room:
            self.text += text[:self.room - len(self.text)]
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.text += text
        return len(text)


@pytest.mark.parametrize("backend", [name for name, ok, _ in backend_availability() if ok])
def test_a_log_that_fills_the_disk_during_the_search_keeps_the_result(backend, tmp_path, monkeypatch):
    """The disk filled while the solver's log was written: the error about log dropped the result of the
    search. The result is returned, with a LogWriteWarning naming the file and the error."""
    import contextlib

    import placement.whole_file

    logs: list[_FillsUp] = []

    @contextlib.contextmanager
    def appending(path):
        logs.append(_FillsUp(200))
        yield logs[-1]

    monkeypatch.setattr(placement.whole_file, "appending", appending)
    log = tmp_path / "solver.log"
    with pytest.warns(placement.LogWriteWarning) as caught:
        result = placement.solve(str(CHAIN4), method="milp", backend=backend, log=str(log), time_limit=30,
                                 warm_start=False)
    assert (result.status, result.value, result.bound) == ("optimal", 7.5, 7.5)
    assert {str(w.message) for w in caught} == {f"log names a file that cannot be written: {log}: No space left "
                                                "on device; the solver's log there is incomplete, and the result "
                                                "is kept"}
    assert logs and len(logs[0].text) == 200


@pytest.mark.parametrize("backend", [name for name, ok, _ in backend_availability() if ok])
def test_the_log_write_warning_names_the_backend_that_wrote_the_log(backend, tmp_path, monkeypatch):
    """The warning named a line of contextlib (``next(self.gen)``) for CP-SAT, whose log is written in a with
    block, and the backend's module for the others: a filter on this package's modules silenced it for every
    backend but the default one. It names the backend's line that wrote the log, in this package, for each."""
    import contextlib
    import warnings

    import placement.whole_file

    @contextlib.contextmanager
    def appending(path):
        yield _FillsUp(200)

    monkeypatch.setattr(placement.whole_file, "appending", appending)
    log = tmp_path / "solver.log"
    backends = Path(placement.__file__).parent / "solvers" / "milp" / "backends"
    for silenced in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if silenced:
                warnings.filterwarnings("ignore", category=placement.LogWriteWarning, module=r"placement\.")
            result = placement.solve(str(CHAIN4), method="milp", backend=backend, log=str(log), time_limit=30,
                                     warm_start=False)
        assert (result.status, result.value) == ("optimal", 7.5)
        said = [w for w in caught if issubclass(w.category, placement.LogWriteWarning)]
        if silenced:
            assert said == []
            continue
        assert {(str(w.message), Path(w.filename).parent) for w in said} == {
            (f"log names a file that cannot be written: {log}: No space left on device; the solver's log there is "
             "incomplete, and the result is kept", backends)}


def run_cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placement", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, errors="replace", timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})


def test_a_name_no_encoding_takes_is_escaped_in_text_output(tmp_path):
    path = tmp_path / "surrogate.json"
    path.write_text('{"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": 1, "edges": [], "nodes": '
                    '[{"id": 0, "name": "\\ud800", "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1, '
                    '"size": 1}]}')
    done = run_cli("solve", str(path), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "\\ud800" in done.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_output_to_a_full_device_is_one_error_line():
    with open("/dev/full", "w") as full:
        done = run_cli("solve", str(CHAIN4), "--quiet", stdout=full)
    assert done.returncode == 2
    assert done.stderr == "error: No space left on device\n"


def test_an_integer_past_the_largest_float_is_refused():
    with pytest.raises(InvalidParameterError) as caught:
        placement.solve(str(CHAIN4), memory=10 ** 400)
    assert str(caught.value) == "memory must be a finite number ≥ 0 or None, not an integer of about 401 digits"


def test_times_whose_total_overflows_are_refused_without_a_warning(tmp_path):
    """Two nodes of 1e308 each: their total is past the largest float. The instance is refused with
    the checker's message, and numpy's overflow warning stays inside the check."""
    import warnings

    from placement.errors import InvalidInstanceError

    doc = two_nodes((1e308, 1e308), (4.0, 3.0), [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidInstanceError, match="takes the graph's total time on accelerator above 1e\\+100"):
            placement.load(doc)


def test_device_counts_past_the_largest_float_leave_the_lower_bounds_valid(tmp_path, capsys):
    """maxFPGAs and maxCPUs written 1e308 each fit a float, but their total does not: dividing the work by it
    raised OverflowError out of placement info and the local search, as did such counts given to solve (it takes
    counts of up to 309 digits). The bounds divide by infinity there: the average is 0, still a bound, and the
    class bound stands."""
    from placement.cli import main
    from placement.problem.bounds import gpipe_lower_bound, throughput_lower_bound

    doc = json.loads(CHAIN4.read_text(encoding="utf-8"))
    doc.update(maxFPGAs=1e308, maxCPUs=1e308)
    bound = throughput_lower_bound(placement.load(doc))
    assert (bound["class"], bound["average"], bound["bound"]) == (5.0, 0.0, 5.0)
    assert 0.0 <= bound["weighted"] < 1e-300
    result = placement.solve(str(CHAIN4), method="local-search", accelerators=10 ** 308, cpus=10 ** 308, restarts=1)
    assert (result.value, result.bound) == (6.0, 5.0)
    pair = placement.load(str(CHAIN4.parent / "training-pair.json"))
    huge = dataclasses.replace(pair, device_types=tuple(dataclasses.replace(t, count=10 ** 308)
                                                         for t in pair.device_types))
    assert gpipe_lower_bound(huge) == 3.0 + 6.0   # the classes: forward f2 (3), backward b2 (6)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["info", str(path)]) == 0
    assert "throughput lower bound: 5  max(class 5, average 0, speed-weighted " in capsys.readouterr().out


def test_a_batch_too_large_to_plan_is_refused_before_any_work():
    """A 2-stage Piper batch of 10^8 micro-batches would need 2·10^8 simulated tasks (about 75 GiB);
    the planner refuses it with the simulator's limit instead of running out of memory."""
    from placement.errors import LimitExceededError
    from placement.parallel.timing import StageTimes, batch_time

    with pytest.raises(LimitExceededError) as caught:
        batch_time([StageTimes(1.0, 2.0, 1, 0.0, (), (1,)), StageTimes(1.0, 2.0, 1, 0.0, (0,), ())], 10 ** 8, "1f1b")
    assert str(caught.value).startswith("100,000,000 micro-batches make 400,000,000 tasks")


def test_minus_zero_reads_as_zero():
    """-0 passes "≥ 0" but would be shown as "-0" in messages and reports."""
    import math

    from placement.parameters import number

    assert math.copysign(1.0, number("memory", -0.0)) == 1.0


def test_summary_figures_stay_readable_at_any_magnitude():
    """Six decimals where they show the value; exponent form where they would print 91 digits or
    hide a value as 0.000000."""
    from placement.report.solution import figure

    assert [figure(x) for x in (3.3627094, 0.0, 1e90, 2.5e-9, -1e-12)] == \
        ["3.362709", "0.000000", "1.000000e+90", "2.500000e-09", "-1.000000e-12"]


def test_the_rounding_unit_reads_as_a_power_of_two():
    """CP-SAT's note names the multiple the times were rounded down to: 2^-20 at scale 2^20, and
    2^286 where times near 1e90 need a scale below 1 (it read 2^--286)."""
    from placement.solvers.milp.data import rounding_unit

    assert [rounding_unit(s) for s in (2.0 ** 20, 2.0 ** -286, 1.0)] == ["2^-20", "2^286", "2^0"]


def test_a_gap_reads_zero_only_when_it_is_zero():
    # A feasible plan 0.04% above its bound is not shown as a 0.0% gap (which reads as proven).
    from placement.report.table import percent

    assert [percent(x) for x in (0.0, 0.123, 0.0006, 0.0004, 4e-5, 1e-8, 2.2e-15)] == [
        "0.0%", "12.3%", "0.1%", "0.040%", "0.0040%", "0.0000010%", "0.0%"]
    assert [percent(x, 2) for x in (0.0, 0.0006, 4e-5)] == ["0.00%", "0.06%", "0.0040%"]


def test_a_feasible_answer_shows_a_gap_below_1e_9_as_it_is():
    # a latency answer 7.9e-11 above its bound is not proven (the bound must meet the value within 1e-12):
    # "gap 0.00%" beside "status feasible" read as a contradiction
    import placement
    from placement.report.solution import format_result

    chain = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    result = placement.solve(chain)
    assert result.status == "optimal"
    assert "   gap 0.00%\n" in format_result(placement.load(chain), result)
    feasible = dataclasses.replace(result, status="feasible", bound=result.value * (1 - 7.9e-11), gap=7.9e-11)
    assert "   gap 7.9e-09%\n" in format_result(placement.load(chain), feasible)
    tiny = dataclasses.replace(feasible, gap=2.2e-15, bound=result.value)   # a float's rounding, shown as it is
    assert "   gap 2.2e-13%\n" in format_result(placement.load(chain), tiny)


def test_a_feasible_answer_that_meets_its_bound_says_it_is_optimal():
    # chain4's latency-chain plan (everything in one call, 4 + 3 + 2 + 5 = 14) meets the path bound 14, but
    # a heuristic claims no optimum: "feasible" beside "gap 0.00%" left the reader to draw the conclusion
    import placement
    from placement.report.solution import format_result

    chain = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    result = placement.solve(chain, objective="latency", method="latency-chain")
    assert (result.status, result.value, result.bound, result.gap) == ("feasible", 14.0, 14.0, 0.0)
    assert ("   gap 0.00%  (the bound meets the value: this plan is optimal, though its status does not claim it)\n"
            in format_result(placement.load(chain), result))


def test_a_type_no_better_plan_can_use_adds_no_rounding_error():
    """A chain of four nodes taking 1e-9 to 4e-9 on an accelerator and 40 to 43 on the CPU, costs
    1e-10: the DP's plan takes 6.1e-9. The CPU's sums (about 166) could be off by 1e-13, far more than
    1e-6 of that value, so the plan read as not proven; but no plan as good puts a node on the CPU
    (each takes 40 there), so only the accelerator's sums count, and the plan is proven."""
    doc = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1e-9 * (i + 1), "cpuLatency": 40.0 + i,
                      "size": 1} for i in range(4)],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 1e-10} for i in range(3)]}
    result = placement.solve(doc, method="dp")
    assert result.status == "optimal" and result.value == pytest.approx(6.1e-9, rel=1e-12)
    # the brute force agrees
    from placement.testing.bruteforce import brute_force
    assert brute_force(placement.load(doc), "stages").objective == pytest.approx(result.value, rel=1e-12)


def test_costs_no_device_pays_add_no_rounding_error():
    """Three nodes only CPUs run (5.7, 4 and 7; two CPUs, no accelerator), one edge of cost 1e12: the
    optimum is 9.7 (5.7 + 4 beside 7). A CPU's load sums no cost, but the cost counted in the DP's error
    (1e12 · 24 · 2^-53 = 2.7e-3, more than 1e-6 of 9.7), and the plan read as not proven."""
    doc = {"maxSizePerFPGA": 5, "maxFPGAs": 0, "maxCPUs": 2,
           "nodes": [{"id": i + 1, "supportedOnFpga": 0, "fpgaLatency": 0, "cpuLatency": t}
                     for i, t in enumerate((5.7, 4.0, 7.0))],
           "edges": [{"sourceId": 1, "destId": 2, "cost": 1e12}]}
    result = placement.solve(doc, method="dp")
    assert (result.status, result.value, result.bound) == ("optimal", 9.7, 9.7)


def test_the_size_of_a_node_no_bounded_device_runs_leaves_the_dp_its_exact_unit():
    """A CPU-only node of 1e16 bytes, then three accelerator nodes of 0.1, 0.2000001 and 0.2 bytes on two
    accelerators of 0.3 bytes: no two of the three fit one accelerator, so the optimum puts the first of them
    on the CPU beside the CPU-only node, 0.5 + 3 = 3.5. The CPU-only node counts against no bound, but its
    size in the DP's sums left no exact unit (1e16 · 10^7 is past 2^53): the DP returned 23.5, unproven."""
    doc = {"maxSizePerFPGA": 0.3, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": 1, "supportedOnFpga": 0, "fpgaLatency": 0, "cpuLatency": 0.5, "size": 1e16}]
           + [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": c, "size": size}
              for i, size, c in zip((2, 3, 4), (0.1, 0.2000001, 0.2), (3, 10, 10))],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 0} for i in range(1, 4)]}
    result = placement.solve(doc, method="dp")
    assert (result.status, result.value, result.bound, result.message) == ("optimal", 3.5, 3.5, "")
    assert [stage.nodes for stage in result.plan] == [(1, 2), (3,), (4,)]


def test_the_size_of_a_node_no_bounded_device_runs_leaves_the_milp_its_exact_unit():
    """The instance above for the MILP (cp-sat): its memory rows, too, took the CPU-only node's 1e16 bytes into
    the sizes whose unit must be exact, and rounded them instead: 'feasible' with the simple bound 1.357 where
    sets (3.5) and none (2, the second accelerator node on the CPU alone) are optimal."""
    doc = {"maxSizePerFPGA": 0.3, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": 1, "supportedOnFpga": 0, "fpgaLatency": 0, "cpuLatency": 0.5, "size": 1e16}]
           + [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": c, "size": size}
              for i, size, c in zip((2, 3, 4), (0.1, 0.2000001, 0.2), (3, 10, 10))],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 0} for i in range(1, 4)]}
    for contiguity, value in (("sets", 3.5), ("none", 2.0)):
        result = placement.solve(doc, method="milp", backend="cp-sat", contiguity=contiguity)
        assert (result.status, result.value, result.bound) == ("optimal", value, value)
        assert "memory rounded" not in result.message


def test_the_size_of_a_node_no_bounded_device_runs_leaves_the_latency_milp_its_exact_unit():
    """The latency MILP, too, took a CPU-only node's 1e16 bytes into the sizes whose unit must be exact. Here
    nodes 2 and 3 (0.1 and 0.2 bytes) fill one accelerator's 0.3 exactly; rounded sizes kept them apart, and
    cp-sat, started from nothing, returned 'feasible' 30.5 (every node on the CPU) and HiGHS refused the model
    as invalid. The optimum: node 1 on the CPU (0.5), then 2 and 3 on one
    accelerator (1 + 1 + 0.01 received), then 4 on the other (0.01 received + 1): 3.53."""
    doc = {"maxSizePerFPGA": 0.3, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": 1, "supportedOnFpga": 0, "fpgaLatency": 0, "cpuLatency": 0.5, "size": 1e16}]
           + [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": size}
              for i, size in zip((2, 3, 4), (0.1, 0.2, 0.3))],
           "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.01} for i in range(1, 4)]}
    for backend in ("cp-sat", "highs"):
        result = placement.solve(doc, method="milp", backend=backend, objective="latency", warm_start=False)
        assert (result.status, result.value, result.bound) == ("optimal", pytest.approx(3.53), pytest.approx(3.53))
        # the two accelerators are interchangeable: which one holds nodes 2 and 3 is the backend's choice
        assert sorted((stage.device_type, stage.nodes) for stage in result.plan) == [
            ("accelerator", (2, 3)), ("accelerator", (4,)), ("cpu", (1,))]


def test_a_total_that_rounds_to_two_to_the_53_is_no_exact_sum():
    # 2^53 + 1 rounds to 2^53: a total "at most 2^53" no longer shows the sums exact
    assert not sums_exactly([2.0 ** 53, 1.0])
    assert sums_exactly([2.0 ** 52, 1.0])
    assert decimal_unit([2.0 ** 53, 1.0, 2.0 ** 53], math.fsum([2.0 ** 53, 1.0])) is None


def huge_pair(size: float, memory: float) -> dict:
    """1 -> 2, 1 ms each on an accelerator (10 on a CPU, none here), transfer cost 10; node 1 has
    ``size`` bytes, node 2 one byte, two accelerators of ``memory`` bytes each."""
    return {"maxSizePerFPGA": memory, "maxFPGAs": 2, "maxCPUs": 0,
            "nodes": [{"id": 1, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": size},
                      {"id": 2, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 1}],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 10}]}


@pytest.mark.parametrize("size", [2.0 ** 53, 1e16])
def test_the_dp_decides_sizes_whose_sums_pass_2_53_as_written(size):
    """Node 1 fills an accelerator (size = memory), so node 2 (one byte more) needs the other: each
    pays the transfer, 1 + 10 = 11, the optimum (both together would take 2 but break memory). In
    floating point 2^53 + 1 = 2^53, so a DP summing single floats let them share a device (a plan the
    evaluator refused: no plan at all); at 1e16 it had no exact unit and its rounded checks found nothing.
    In two whole parts, hi · 2^shift + lo, the DP tells 2^53 + 1 from 2^53 and proves 11 itself."""
    doc = huge_pair(size, size)
    together = {"fpgas": [{"nodes": [1, 2]}], "cpus": []}
    assert not placement.verify(doc, together).valid
    for method in ("dp", "auto"):
        result = placement.solve(doc, method=method)
        assert (result.method, result.status, result.value, result.bound) == ("dp", "optimal", 11.0, 11.0)
        assert sorted(s.nodes for s in result.plan) == [(1,), (2,)]


def test_an_id_written_as_a_float_of_2_53_or_more_is_refused_where_it_is_read():
    """The JSON text 100000000000000001.0 decodes to the double 1e17, another integer: read as an id it named
    node 100000000000000000, which the file never wrote. The integer form is read exactly; a float id
    below 2^53 (2.0) stays an id."""
    rounded = ("reads 1e+17, a number not written as an integer, 2^53 = 9007199254740992 or more, "
               "where a double does not hold every integer (what was written may have been rounded to another); "
               "write it as an integer")
    doc = huge_pair(1, 10)
    doc["nodes"][0]["id"] = doc["edges"][0]["sourceId"] = float(10 ** 17 + 1)
    with pytest.raises(placement.InvalidInstanceError, match=re.escape(f"edge #0: field 'sourceId' {rounded}")):
        placement.load(doc)
    doc["edges"] = []
    with pytest.raises(placement.InvalidInstanceError, match=re.escape(f"node #0: field 'id' {rounded}")):
        placement.load(doc)
    exact = huge_pair(1, 10)
    exact["nodes"][0]["id"] = exact["edges"][0]["sourceId"] = 10 ** 17 + 1
    exact["nodes"][1]["id"] = exact["edges"][0]["destId"] = 2.0
    assert [node.id for node in placement.load(exact).nodes] == [10 ** 17 + 1, 2]
    with pytest.raises(placement.InvalidPlanError, match=re.escape(f"fpgas[0].nodes[0]: node id {rounded}")):
        placement.verify(exact, {"fpgas": [{"nodes": [float(10 ** 17 + 1), 2]}], "cpus": []})
    assert placement.verify(exact, {"fpgas": [{"nodes": [10 ** 17 + 1, 2.0]}], "cpus": []}).valid
    # 2^53 itself is refused (9007199254740993.0 decodes to it), with a message that says so, and 2^53 - 1 is read
    doc["nodes"][0]["id"] = float(2 ** 53)
    with pytest.raises(placement.InvalidInstanceError,
                       match=re.escape(f"node #0: field 'id' reads 9007199254740992, a number not written as an "
                                       "integer, 2^53 = 9007199254740992 or more,")):
        placement.load(doc)
    doc["nodes"][0]["id"] = float(2 ** 53 - 1)
    assert placement.load(doc).nodes[0].id == 2 ** 53 - 1


def test_an_integer_a_double_cannot_hold_is_refused_and_memory_summed_as_written_is_shown():
    """99999999999999999 bytes would be read as 1e17, and 1e17 + 1 would not fit a bound of 1e17 that the
    numbers as written meet: such an integer is refused where it is read. A sum the evaluator refuses
    although its floating-point value equals the bound is shown exactly."""
    doc = huge_pair(99999999999999999, 100000000000000000)
    with pytest.raises(placement.InvalidInstanceError,
                       match=r"^node 1: field 'size' is 99999999999999999, which a double cannot hold exactly \(above "
                             r"2\^53 = 9007199254740992 not every integer is one\); give it in a larger unit$"):
        placement.load(doc)
    unlimited = {**huge_pair(1, 2 ** 64 - 1)}                   # a bound meant as no limit is rounded, not refused
    unlimited["nodes"][0]["fpgaLatency"] = 10 ** 17 + 1           # and so is a time
    assert placement.load(unlimited).device_types[0].memory == 2.0 ** 64
    together = {"fpgas": [{"nodes": [1, 2]}], "cpus": []}
    assert placement.verify(huge_pair(2 ** 53, 2 ** 53), together).violations == (
        "device 0 (accelerator): memory 9007199254740993 (summed as written; 9007199254740992 in floating point) "
        "exceeds the bound 9007199254740992",)


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_auto_hands_the_milp_what_the_dp_cannot_sum_exactly():
    """The pair above with node 1 at 1e16 bytes, filling an accelerator, and node 2 at 1.2345678901234567e-40:
    a unit of 10^-56, of which the sizes' sum passes even two parts, so the DP's checks round (node 1 alone
    refused under a bound rounded down: no plan, and the run that admits every fit puts both on one device,
    which does not fit) and `auto` asks the MILP; CP-SAT's rows, rounded down, admit that plan too, which
    is cut off: the plan of 11 is proven."""
    doc = huge_pair(1e16, 1e16)
    doc["nodes"][1]["size"] = 1.2345678901234567e-40
    alone = placement.solve(doc, method="dp")
    assert (alone.status, alone.plan) == ("no_solution", ())
    assert "no unit in which the DP's sums are exact" in alone.message
    result = placement.solve(doc)
    assert (result.method, result.status, result.value, result.bound) == ("milp", "optimal", 11.0, 11.0)
    assert result.message.startswith("the MILP ran instead (method 'auto'): the DP found no plan (")
    assert sorted(s.nodes for s in result.plan) == [(1,), (2,)]


@pytest.mark.skipif(not HAVE_CPSAT, reason="OR-Tools is not installed")
def test_auto_solves_the_milp_where_the_dp_s_sums_cannot_tell_its_plans_apart():
    """Two independent nodes; two accelerators of one type, one of another, and a CPU. Node 0 takes 5e8 on
    acc1, 2.5e-9 on acc0 and 1e-9 on the CPU; node 1 takes 1e9 on acc1, 3e9 on acc0 and 1e-9 on the CPU. On the
    CPU together they take 2e-9. Apart, node 1 off the CPU takes at least 1e9, and node 0 off it at least
    2.5e-9 (on acc0): the optimum is 2e-9, both on the CPU. The DP's sums, rounded against 3e9, read both plans
    alike and it returned 2.5e-9 as feasible with a bound of 1e-9, which ``auto`` answered with; it now asks the
    MILP, whose times are scaled for the plan in hand, and which proves 2e-9."""
    doc = {"deviceTypes": [{"name": "acc1", "count": 2, "memory": None, "paysComm": True},
                           {"name": "acc0", "count": 1, "memory": 6, "paysComm": True},
                           {"name": "cpu", "count": 1, "paysComm": False}],
           "nodes": [{"id": 1, "times": {"acc1": 5e8, "acc0": 2.5e-9, "cpu": 1e-9}, "size": 0},
                     {"id": 34, "times": {"acc1": 1e9, "acc0": 3e9, "cpu": 1e-9}, "size": 1}],
           "edges": []}
    dp = placement.solve(doc, method="dp")
    assert (dp.status, dp.value, dp.bound) == ("feasible", 2.5e-9, 1e-9)
    result = placement.solve(doc)
    assert (result.method, result.status, result.value, result.bound) == ("milp", "optimal", 2e-9, 2e-9)
    assert result.message.startswith("the MILP ran instead (method 'auto'): the DP proves no optimum (the DP sums "
                                     "the times and costs in floating point")
    assert placement.verify(doc, result.plan).value == 2e-9
