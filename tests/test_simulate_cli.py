"""``placement simulate``: the summary, the trace, the Gantt chart, exit statuses and errors."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import struct
import sys
from pathlib import Path

import pytest

from placement.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny"
PAIR = str(TINY / "training-pair.json")
SHARED = ROOT.parent / "shared" / "tarnawski"


@pytest.fixture
def pair_plan(tmp_path) -> str:
    """The two-device split of training-pair, in Tarnawski's plan format."""
    path = tmp_path / "pair-plan.json"
    path.write_text(json.dumps({"fpgas": [{"nodes": [1, 4]}, {"nodes": [2, 3]}], "cpus": []}))
    return str(path)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_summary_of_1f1b_flush(pair_plan, capsys):
    # The hand-worked run of tests/test_simulate_schedules.py::test_training_pair_by_hand:
    # iteration 31.5, device 0 busy 3 + 3 + 5.5 + 5.5 = 17, device 1 busy 4 + 4 + 7.5 + 7.5 = 23,
    # bubble 1 - 40 / 63; the instance gives no tensor sizes, so activation memory is unknown.
    assert main(["simulate", PAIR, pair_plan, "--schedule", "1f1b-flush", "--microbatches", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:6] == [
        "instance        training-pair",
        "schedule        1f1b-flush (1F1B, then flush), 2 micro-batches, communication inline",
        "iteration       31.5  (time per sample 15.75)",
        "max load        11.5  (verified plan)",
        "makespan        31.5",
        "bubble fraction 36.51%",
    ]
    assert "    0       0  accelerator  3  5.5    17  54.0%          2              -/100" in out
    assert "    1       1  accelerator  4  7.5    23  73.0%          1              -/100" in out
    assert out.endswith("note: some tensor sizes are missing from the instance: activation memory is unknown there\n")


def test_a_plan_of_nothing_but_zeros_has_no_ratio(tmp_path, capsys):
    """Every time and cost 0: the run takes 0 per sample, as the load model says; there is no ratio
    to print (it used to read nan)."""
    zeros = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0, "edges": [{"sourceId": 1, "destId": 2, "cost": 0}],
             "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 0, "cpuLatency": 0, "size": 1} for i in (1, 2)]}
    instance, plan = tmp_path / "zeros.json", tmp_path / "plan.json"
    instance.write_text(json.dumps(zeros))
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    assert main(["simulate", str(instance), str(plan)]) == 0
    out = capsys.readouterr().out
    assert "load model      0  (max load)\n" in out and "nan" not in out


def test_whole_times_are_written_in_full(tmp_path, capsys):
    """Two nodes of 1000000002 and 5 on two accelerators, free transfers: the max load and the time per
    sample are 1000000002, which nine significant digits wrote as 1e+09."""
    big = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0, "edges": [{"sourceId": 1, "destId": 2, "cost": 0}],
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": t, "cpuLatency": t, "size": 1}
                     for i, t in ((1, 1000000002), (2, 5))]}
    instance, plan = tmp_path / "big.json", tmp_path / "plan.json"
    instance.write_text(json.dumps(big))
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2]}]}))
    assert main(["simulate", str(instance), str(plan), "--microbatches", "40"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2:6] == ["time per sample 1000000002  (steady state, micro-batches 20..34)",
                                     "load model      1000000002  (max load); simulated / model = 1.000000000",
                                     "max load        1000000002  (verified plan)",
                                     "makespan        40000000085"]


@pytest.mark.parametrize("option", [["--unit-scale", "0.5"], ["--chunks", "2"], ["--allreduce", "piper"],
                                    ["--forward-share", "0.5"], ["--allreduce", "ring"], ["--unit-scale", "1"]])
def test_piper_options_are_refused_on_other_instances(pair_plan, option, capsys):
    """A Piper instance refuses the options of plain pipelines; a plain instance, in turn, the Piper ones
    (they used to be ignored in silence), even at their defaults (ring, 1), as --chunks and
    --forward-share are."""
    assert main(["simulate", PAIR, pair_plan, *option]) == 2
    assert capsys.readouterr().err == (f"error: {option[0]} applies to Piper instances only (data- and tensor-"
                                       "parallel stages; see placement simulate --help)\n")


def test_default_schedule_follows_the_graph(pair_plan, tmp_path, capsys):
    assert main(["simulate", PAIR, pair_plan, "--microbatches", "40"]) == 0
    out = capsys.readouterr().out
    assert "schedule        1f1b-async (PipeDream asynchronous 1F1B, steady state), 40 micro-batches" in out
    assert "time per sample 11.5  (steady state, micro-batches 20..34)" in out
    assert "load model      11.5  (max load); simulated / model = 1.000000000" in out
    chain = tmp_path / "chain-plan.json"
    chain.write_text(json.dumps({"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}]}))
    assert main(["simulate", str(TINY / "chain4.json"), str(chain), "--microbatches", "40"]) == 0
    out = capsys.readouterr().out
    # chain4: {a, b} 4 + 3 + send b (0.5) = 7.5, {c, d} receive b (0.5) + 2 + 5 = 7.5
    assert "schedule        stream (streaming inference (forward only), steady state), 40 micro-batches" in out
    assert "time per sample 7.5  (steady state, micro-batches 20..34)" in out


def test_device_overrides_match_solve(tmp_path, capsys):
    # chain4 on three accelerators where the instance has two: {a} 4 + send a (1) = 5,
    # {b} receive a (1) + 3 + send b (0.5) = 4.5, {c, d} receive b (0.5) + 2 + 5 = 7.5.
    plan = tmp_path / "three.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1]}, {"nodes": [2]}, {"nodes": [3, 4]}]}))
    chain = str(TINY / "chain4.json")
    assert main(["simulate", chain, str(plan), "--microbatches", "40"]) == 2
    assert capsys.readouterr().err == (f"error: {plan} is not valid for this instance: device type accelerator: "
                                       "3 devices used, but only 2 exist\n")
    assert main(["simulate", chain, str(plan), "--microbatches", "40", "--accelerators", "3"]) == 0
    out = capsys.readouterr().out
    assert "time per sample 7.5  (steady state, micro-batches 20..34)" in out
    assert [line.split()[3] for line in out.splitlines() if line.startswith("    ")] == ["5", "4.5", "7.5"]


def test_split_backward_on_links(pair_plan, capsys):
    assert main(["simulate", PAIR, pair_plan, "--schedule", "split-backward", "--microbatches", "2",
                 "--comm", "link", "--w-fraction", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "weight grads    0.25 of each backward's compute runs as W tasks" in out
    assert "communication link" in out
    # device 0: F 2, B 4 x 0.75, W 4 x 0.25, link 1 + 1.5; device 1: F 3, B 4.5, W 1.5, link 2.5
    assert "  0       0  accelerator  2    3    1   2.5" in out
    assert "  1       1  accelerator  3  4.5  1.5   2.5" in out


def test_trace_opens_as_chrome_trace_events(pair_plan, tmp_path, capsys):
    trace = tmp_path / "run.json"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "2",
                 "--trace", str(trace)]) == 0
    assert f"trace written to {trace} (open it in Perfetto or chrome://tracing)" in capsys.readouterr().out
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"stage 0: device 0 (accelerator)", "stage 1: device 1 (accelerator)"}
    slices = sorted((e["tid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X")
    # GPipe, m = 2 (see test_training_pair_by_hand), times in microseconds (1 unit = 1 ms):
    # stage 0 F0 [0,3] F1 [3,6] B0 [18.5,24] B1 [26,31.5]; stage 1 F0 [3,7] F1 [7,11] B0 [11,18.5] B1 [18.5,26]
    assert slices == [
        (1, "B 0", 18500.0, 5500.0), (1, "B 1", 26000.0, 5500.0), (1, "F 0", 0.0, 3000.0), (1, "F 1", 3000.0, 3000.0),
        (3, "B 0", 11000.0, 7500.0), (3, "B 1", 18500.0, 7500.0), (3, "F 0", 3000.0, 4000.0), (3, "F 1", 7000.0, 4000.0),
    ]
    assert all(e["pid"] == 1 and e["cat"] in ("forward", "backward") for e in events if e["ph"] == "X")
    counters = [(e["name"], e["ts"], e["args"]["micro-batches"]) for e in events if e["ph"] == "C"]
    # stage 1 holds micro-batch 0 from 3 to 18.5 and micro-batch 1 from 7 to 26
    assert [c for c in counters if c[0] == "stage 1 in flight"] == [
        ("stage 1 in flight", 3000.0, 1), ("stage 1 in flight", 7000.0, 2), ("stage 1 in flight", 18500.0, 1),
        ("stage 1 in flight", 26000.0, 0)]
    assert doc["displayTimeUnit"] == "ms"
    assert doc["otherData"]["iteration time"] == 31.5



def test_the_trace_file_is_the_trace_document_written_event_by_event(pair_plan, tmp_path):
    """write_trace streams the events; the file is the very text json.dump gives trace_events."""
    import placement
    from placement.report.trace import trace_events, write_trace

    result = placement.simulate(placement.load(PAIR), pair_plan, schedule="gpipe", microbatches=3)
    write_trace(result, tmp_path / "run.json", "pair")
    assert (tmp_path / "run.json").read_text() == json.dumps(trace_events(result, "pair"), allow_nan=False) + "\n"


def test_a_run_that_kept_no_tasks_is_refused_by_the_trace_and_the_chart(pair_plan, tmp_path):
    """A figures-only run (keep_tasks=False) has no task table: the trace raised a JSON error about an
    infinite float, and the chart was drawn empty."""
    import placement
    from placement.errors import InvalidParameterError
    from placement.report.gantt import draw_gantt
    from placement.report.trace import trace_events, write_trace

    result = placement.simulate(placement.load(PAIR), pair_plan, microbatches=3, keep_tasks=False)
    message = "holds no task table (it was simulated with keep_tasks=False); simulate with keep_tasks=True to "
    for call, use in [(lambda: write_trace(result, tmp_path / "run.json"), "trace it"),
                      (lambda: trace_events(result), "trace it")] + (
            [(lambda: draw_gantt(result), "draw it")] if importlib.util.find_spec("matplotlib") else []):
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert (error.value.parameter, error.value.detail) == ("result", message + use)
    assert not (tmp_path / "run.json").exists()


def test_the_trace_and_the_chart_refuse_what_is_no_run_of_one_device_per_stage(tmp_path):
    """A Piper instance's run (a ParallelSimulation, which keeps no task table) and a value that is no run at all
    ended the trace and the chart in an AttributeError ('has no attribute kept_tasks', or 'schedule')."""
    import placement
    from placement.errors import InvalidParameterError
    from placement.report.gantt import draw_gantt, write_gantt
    from placement.report.trace import trace_events, write_trace
    from tests.test_simulate_parallel import chain

    piper = chain([1.0, 2.0])
    run = placement.simulate(piper, placement.solve(piper, devices=2))
    piper_run = ("must be a SimulationResult (placement.simulate's run of a plan of one device per stage), not "
                 "ParallelSimulation: a Piper instance's run (data- and tensor-parallel stages) keeps no task table")
    calls = [lambda result: write_trace(result, tmp_path / "run.json"), trace_events]
    if importlib.util.find_spec("matplotlib"):
        calls += [lambda result: write_gantt(result, tmp_path / "run.png"), draw_gantt]
    for call in calls:
        for result, detail in [(run, piper_run), (None, "must be a SimulationResult (placement.simulate's run of a "
                                                        "plan of one device per stage), not NoneType")]:
            with pytest.raises(InvalidParameterError) as error:
                call(result)
            assert (error.value.parameter, error.value.detail) == ("result", detail)
    assert not (tmp_path / "run.json").exists() and not (tmp_path / "run.png").exists()


@pytest.mark.parametrize("unit_us, shown", [(0, "0"), (-1, "-1"), (math.nan, "nan"), (math.inf, "inf"),
                                             ("1000", "'1000'"), (True, "True")])
def test_a_time_unit_that_is_no_positive_number_is_refused_by_the_trace(pair_plan, tmp_path, unit_us, shown):
    """unit_us 0 or -1 wrote a trace of tasks that take no time or end before they start, NaN and infinity ended in
    a ValueError of JSON and a string in a TypeError of numpy's."""
    import placement
    from placement.errors import InvalidParameterError
    from placement.report.trace import trace_events, write_trace

    result = placement.simulate(placement.load(PAIR), pair_plan, microbatches=2)
    for call in (lambda: write_trace(result, tmp_path / "run.json", unit_us=unit_us),
                 lambda: trace_events(result, unit_us=unit_us)):
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert str(error.value) == f"unit_us must be a finite number > 0, not {shown}"
    assert not (tmp_path / "run.json").exists()


def test_a_misspelt_keyword_of_the_trace_and_the_chart_names_the_one_meant(pair_plan, tmp_path):
    """docs/simulator.md calls write_trace and write_gantt from Python: they, trace_events and draw_gantt said only
    'got an unexpected keyword argument', where placement.simulate names the keyword meant."""
    import placement
    from placement.report.gantt import draw_gantt, write_gantt
    from placement.report.trace import trace_events, write_trace

    result = placement.simulate(placement.load(PAIR), pair_plan, microbatches=2)
    for call, message in [
            (lambda: write_trace(result, tmp_path / "run.json", unit=1.0),
             "write_trace() got an unexpected keyword argument 'unit'; did you mean 'unit_us'?"),
            (lambda: trace_events(result, titel="pair"),
             "trace_events() got an unexpected keyword argument 'titel'; did you mean 'title'?"),
            (lambda: write_gantt(result, tmp_path / "run.png", nmae="pair"),
             "write_gantt() got an unexpected keyword argument 'nmae'; did you mean 'name'?"),
            (lambda: draw_gantt(result, nam="pair"), "draw_gantt() got an unexpected keyword argument 'nam'; did you "
                                                     "mean 'name'?")]:
        with pytest.raises(TypeError) as error:
            call()
        assert str(error.value) == message
    assert not (tmp_path / "run.json").exists() and not (tmp_path / "run.png").exists()


@pytest.mark.parametrize("path, kind", [(None, "NoneType"), (3, "int"), (b"run.json", "bytes")])
def test_a_file_name_that_is_no_text_path_is_refused_by_the_trace_and_the_chart(pair_plan, path, kind):
    """None or a number as the file ended the trace and the chart in a TypeError of os.fspath or pathlib, and bytes
    in one of tempfile's ('Can't mix bytes and non-bytes in path components')."""
    import placement
    from placement.errors import InvalidParameterError
    from placement.report.gantt import write_gantt
    from placement.report.trace import write_trace

    result = placement.simulate(placement.load(PAIR), pair_plan, microbatches=2)
    calls = [lambda: write_trace(result, path)]
    if importlib.util.find_spec("matplotlib"):
        calls.append(lambda: write_gantt(result, path))
    for call in calls:
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert str(error.value) == f"path must be a file path (a str or os.PathLike), not {kind}"


def test_gantt_png(pair_plan, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    chart = tmp_path / "run.png"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "split-backward", "--microbatches", "4",
                 "--comm", "link", "--gantt", str(chart)]) == 0
    assert f"Gantt chart written to {chart}" in capsys.readouterr().out
    width, height = png_size(chart)
    # 14 x (1.6 + 0.42 x 4 rows) inches at 120 dpi: two stages, each with its link row
    assert width == 1680 and abs(height - (1.6 + 0.42 * 4) * 120) < 1


def test_a_name_with_dollar_signs_is_drawn_as_written(pair_plan, tmp_path):
    """matplotlib reads `$...$` as mathematical notation: an instance named `a$\\frac$b` made the chart fail
    (`\\frac` without its arguments); the names are drawn as written."""
    pytest.importorskip("matplotlib")
    import placement
    from placement.report.gantt import write_gantt

    result = placement.simulate(placement.load(PAIR), pair_plan, schedule="gpipe", microbatches=2)
    write_gantt(result, tmp_path / "run.svg", "a$\\frac$b")
    assert "<svg" in (tmp_path / "run.svg").read_text()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_trace_that_cannot_be_written_names_the_option(pair_plan, capsys, monkeypatch):
    """`--trace /dev/full` (a device that opens and then takes no byte) was refused once the simulation had run
    (12 s for 200,000 micro-batches of BERT-Base); it is refused before it."""
    import placement

    def simulate(*args, **kwargs):
        raise AssertionError("simulated before the trace was checked")

    monkeypatch.setattr(placement, "simulate", simulate)
    assert main(["simulate", PAIR, pair_plan, "--trace", "/dev/full"]) == 2
    assert capsys.readouterr().err == ("error: --trace names a file that cannot be written: /dev/full: "
                                       "No space left on device\n")


def test_a_chart_that_cannot_be_written_whole_leaves_the_file_as_it_was(pair_plan, tmp_path, capsys,
                                                                       savefig_fills_the_disk):
    """A disk that fills while the chart is saved left half a PNG over the old chart, with exit status 2."""
    import errno

    chart = tmp_path / "run.png"
    chart.write_bytes(b"old chart")
    assert main(["simulate", PAIR, pair_plan, "--gantt", str(chart), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: --gantt names a file that cannot be written: {chart}: "
                                       f"{os.strerror(errno.ENOSPC)}\n")
    assert chart.read_bytes() == b"old chart"
    assert sorted(os.listdir(tmp_path)) == sorted(["run.png", os.path.basename(pair_plan)])


def test_a_chart_that_cannot_be_written_leaves_the_trace_as_it_was_too(pair_plan, tmp_path, capsys,
                                                                      savefig_fills_the_disk):
    """Asked for a trace and a chart, a chart that could not be written left the new trace written: both
    files are now replaced together or not at all."""
    import errno

    trace, chart = tmp_path / "run.json", tmp_path / "run.png"
    trace.write_text("old trace")
    chart.write_bytes(b"old chart")
    assert main(["simulate", PAIR, pair_plan, "--trace", str(trace), "--gantt", str(chart), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: --gantt names a file that cannot be written: {chart}: "
                                       f"{os.strerror(errno.ENOSPC)}\n")
    assert (trace.read_text(), chart.read_bytes()) == ("old trace", b"old chart")
    assert sorted(os.listdir(tmp_path)) == sorted(["run.json", "run.png", os.path.basename(pair_plan)])


def test_a_trace_and_a_chart_are_both_written(pair_plan, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    trace, chart = tmp_path / "run.json", tmp_path / "run.svg"
    assert main(["simulate", PAIR, pair_plan, "--trace", str(trace), "--gantt", str(chart)]) == 0
    out = capsys.readouterr().out
    assert f"trace written to {trace}" in out and f"Gantt chart written to {chart}" in out
    assert json.loads(trace.read_text())["displayTimeUnit"] == "ms"
    assert "<svg" in chart.read_text()


def test_gantt_without_matplotlib_fails_before_simulating(pair_plan, tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    chart = tmp_path / "run.png"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--gantt", str(chart)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: the Gantt chart needs matplotlib: pip install 'placement[plot]'\n"
    assert not chart.exists()


def test_a_plan_whose_calls_verify_refuses_is_not_simulated(tmp_path, capsys):
    """diamond-cpu (s, x, y on accelerators, t on the CPU): a node in two calls of one device, and calls
    on a CPU device, are violations verify reports; simulate refuses them with the first."""
    diamond = str(TINY / "diamond-cpu.json")
    plan = tmp_path / "calls.json"
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": [10, 12], "calls": [[10, 12], [12]]},
                                            {"type": "accelerator", "nodes": [11]}, {"type": "cpu", "nodes": [13]}]}))
    assert main(["simulate", diamond, str(plan)]) == 2
    assert capsys.readouterr().err == (f"error: {plan} is not valid for this instance: device 0 (accelerator): "
                                       "node 12 is in calls 0 and 1\n")
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": [10, 11, 12]},
                                            {"type": "cpu", "nodes": [13], "calls": [[13]]}]}))
    assert main(["simulate", diamond, str(plan)]) == 2
    assert capsys.readouterr().err == (f"error: {plan} is not valid for this instance: device 1 (cpu): has calls, "
                                       "but a device that pays no communication runs each node on its own\n")


def test_bad_inputs_exit_2_with_one_line(pair_plan, tmp_path, capsys):
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 4, 2]}, {"nodes": [2, 3]}]}))
    assert main(["simulate", PAIR, str(bad_plan), "--schedule", "gpipe"]) == 2
    assert capsys.readouterr().err == (f"error: {bad_plan} is not valid for this instance: node 2 is placed 2 times "
                                       "(devices 0, 1) (and 1 more; verifying the plan lists them all)\n")
    assert main(["simulate", PAIR, pair_plan, "--schedule", "stream"]) == 2
    assert capsys.readouterr().err == ("error: --schedule 'stream' runs inference graphs only, but the instance has "
                                       "backward nodes: use --schedule 1f1b-async for a steady-state training "
                                       "pipeline\n")
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--w-fraction", "0.3"]) == 2
    assert capsys.readouterr().err == ("error: --w-fraction applies to the schedules that split the backward "
                                       "('split-backward', 'zb-h1', 'zb-h2') only, not 'gpipe'\n")
    assert main(["simulate", PAIR, pair_plan, "--trace", str(tmp_path / "missing" / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'missing' / 't.json'}: cannot write: No such file or directory\n"
    for option in (["--microbatches", "0"], ["--w-fraction", "2"], ["--schedule", "zero-bubble"]):
        assert main(["simulate", PAIR, pair_plan, *option]) == 2
        assert "error: argument" in capsys.readouterr().err


def test_documented_command_on_a_published_instance(tmp_path, capsys):
    """The commands of docs/simulator.md: solve bert_l-3_training, simulate the plan, trace and chart."""
    instance = SHARED / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_training.json"
    if not instance.exists():
        pytest.skip(f"published instances not found at {instance.parent}")
    pytest.importorskip("matplotlib")
    plan = tmp_path / "plan.json"
    assert main(["solve", str(instance), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    trace, chart = tmp_path / "trace.json", tmp_path / "gantt.png"
    assert main(["simulate", str(instance), str(plan), "--schedule", "split-backward", "--microbatches", "8",
                 "--trace", str(trace), "--gantt", str(chart)]) == 0
    split = float(capsys.readouterr().out.split("iteration")[1].split()[0])
    assert main(["simulate", str(instance), str(plan), "--schedule", "1f1b-flush", "--microbatches", "8"]) == 0
    flush = float(capsys.readouterr().out.split("iteration")[1].split()[0])
    assert split < flush      # the weight-gradient tasks fill bubbles on this real plan too
    doc = json.loads(trace.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in slices} == {f"{kind} {j}" for kind in "FBW" for j in range(8)}
    assert png_size(chart)[0] == 1680


def test_a_run_over_the_memory_limit_is_refused_before_it_starts(pair_plan, tmp_path, capsys):
    # training-pair on two devices: F and B per stage, 4 tasks per micro-batch, 400 bytes each
    # (BYTES_PER_TASK): 10^8 micro-batches would take 1.6e11 bytes = 149 GiB, over the default 2 GiB;
    # 2 GiB holds 2^31 / 1600 = 1,342,177 micro-batches.
    # (A steady-state schedule without --trace keeps no tasks and streams: the flush schedules hold them all.)
    assert main(["simulate", PAIR, pair_plan, "--schedule", "1f1b-flush", "--microbatches", str(10**8)]) == 2
    err = capsys.readouterr().err
    assert err == ("error: 100,000,000 micro-batches of 4 tasks each would take about 149 GiB, over the limit "
                   "--memory-limit = 2 GiB; at most 1,342,177 micro-batches fit, or raise --memory-limit\n")
    # A lower limit refuses a shorter run: 1,000 micro-batches take 1.6e6 bytes. The default schedule
    # (1f1b-async) runs to a steady state, which about 4 micro-batches per stage reach: a flush schedule
    # runs its iteration's micro-batches, however many, so the hint is the steady schedules' only.
    assert main(["simulate", PAIR, pair_plan, "--microbatches", "1000", "--memory-limit", "1e6", "--trace",
                 str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err.endswith("at most 625 micro-batches fit (a steady state needs about 8), or raise "
                                            "--memory-limit, or keep the figures only: leave out --trace and "
                                            "--gantt, in memory independent of the micro-batches\n")
    # without --trace and --gantt the same run keeps the figures only, and runs
    assert main(["simulate", PAIR, pair_plan, "--microbatches", "1000", "--memory-limit", "1e6", "--quiet"]) == 0
    capsys.readouterr()
    # a flush schedule keeps its tasks whatever the options: the refusal names no way round the limit but the limit
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "1000", "--memory-limit",
                 "1e6", "--trace", str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err.endswith("at most 625 micro-batches fit, or raise --memory-limit\n")
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "625", "--memory-limit",
                 "1e6", "--quiet"]) == 0
    assert main(["simulate", PAIR, pair_plan, "--memory-limit", "0"]) == 2
    assert capsys.readouterr().err == ("error: argument --memory-limit: expected a finite positive number of bytes "
                                       "(or with KiB, MiB, GiB, TiB), got '0'\n")
    # 10 bytes hold no micro-batch of 4 tasks (1,600 bytes): the count is 0, not 1
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--memory-limit", "10"]) == 2
    assert "GiB; not one micro-batch fits, or raise" in capsys.readouterr().err


def test_gantt_format_follows_the_suffix(pair_plan, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    chart = tmp_path / "run.svg"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--gantt", str(chart)]) == 0
    assert chart.read_text().lstrip().startswith("<?xml") and "<svg" in chart.read_text()
    pdf = tmp_path / "run.PDF"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--gantt", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")


def test_gantt_with_a_suffix_of_no_chart_format_is_refused_before_simulating(pair_plan, tmp_path, capsys):
    chart = tmp_path / "run.txt"
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--gantt", str(chart)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: --gantt must name a .png, .svg or .pdf file, not .txt: {chart}\n"
    assert not chart.exists()


@pytest.mark.parametrize("option, name", [("--trace", "run.json"), ("--gantt", "run.png")])
def test_an_unwritable_output_is_refused_before_simulating(pair_plan, tmp_path, capsys, option, name):
    # a million micro-batches took 18 s (trace) and 99 s (chart) before the write failed
    target = tmp_path / "missing" / name
    if option == "--gantt":
        pytest.importorskip("matplotlib")
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "1000000", option,
                 str(target)]) == 2
    assert capsys.readouterr().err == f"error: {target}: cannot write: No such file or directory\n"


@pytest.mark.parametrize("given", ["-1", "0", "0KiB", "-3GiB", "abc"])
def test_a_memory_limit_that_is_not_positive_gets_one_message(pair_plan, capsys, given):
    # -1 was "expected a finite non-negative number", 0 "a finite positive number"; 0KiB was quoted as '0'
    assert main(["simulate", PAIR, pair_plan, f"--memory-limit={given}"]) == 2
    assert capsys.readouterr().err.endswith("error: argument --memory-limit: expected a finite positive number of "
                                            f"bytes (or with KiB, MiB, GiB, TiB), got '{given}'\n")


def test_a_latency_plan_whose_device_runs_two_calls_is_simulated_with_a_note(tmp_path):
    """diamond-cpu solved for latency with two calls per accelerator puts s and y on one device in two
    calls. A pipeline schedule runs a stage's nodes as one call per micro-batch, so the run is the
    throughput of that device as one stage, and the note says the calls are not followed."""
    import placement

    plan = tmp_path / "latency.json"
    assert main(["solve", str(TINY / "diamond-cpu.json"), "--objective", "latency", "--calls", "2", "--quiet",
                 "--out", str(plan)]) == 0
    calls = [len(d.get("calls") or []) for d in json.loads(plan.read_text())["devices"]]
    assert 2 in calls
    device = calls.index(2)
    result = placement.simulate(str(TINY / "diamond-cpu.json"), str(plan))
    assert result.notes[-1] == (f"device {device} runs the nodes of its calls as one stage, one call per "
                                "micro-batch: the plan's calls order a single sample (objective latency), which a "
                                "pipeline schedule does not follow")
    alone = json.loads(plan.read_text())
    for d in alone["devices"] + alone["fpgas"]:   # both fields list them: one without would be another plan
        d.pop("calls", None)
    assert not any("calls" in note for note in placement.simulate(str(TINY / "diamond-cpu.json"), alone).notes)


def test_a_plan_whose_stages_wait_on_each_other_runs_slower_than_its_loads_and_says_so():
    """docs/simulator.md, Limits: f0 -> f1 -> b1 -> b0, times 1, classes {f0, b1} and {f1, b0}, two
    accelerators. The optimum {f0, b1} | {f1, b0} has max load 2; under 1F1B stage 1 runs F1, then
    waits for b1 on stage 0 (which reads F1's output) before its b0: 3 per sample, with a note, from
    the event engine and from the streamed figures alike. A chain whose mates pair up runs at its load."""
    import placement

    def node(i, name, backward, colour):
        return {"id": i, "name": name, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 1,
                "isBackwardNode": backward, "colorClass": colour, "size": 1}

    crossed = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
               "nodes": [node(0, "f0", 0, 0), node(1, "f1", 0, 1), node(2, "b1", 1, 0), node(3, "b0", 1, 1)],
               "edges": [{"sourceId": u, "destId": w, "cost": 0} for u, w in ((0, 1), (1, 2), (2, 3))]}
    result = placement.solve(crossed)
    assert (result.status, result.value) == ("optimal", 2.0)
    for keep in (True, False):
        run = placement.simulate(crossed, result, schedule="1f1b-async", keep_tasks=keep)
        assert run.time_per_sample == 3.0
        assert run.notes[-1] == ("the run is slower than the load model (3 against 2 per sample): stages wait on "
                                 "each other within a micro-batch, as where a backward task reads the forward "
                                 "output of a later stage (docs/simulator.md, Limits)")
    mates = {**crossed, "nodes": [node(0, "f0", 0, 0), node(1, "f1", 0, 1), node(2, "b1", 1, 1), node(3, "b0", 1, 0)]}
    paired = placement.solve(mates)
    run = placement.simulate(mates, paired, schedule="1f1b-async")
    assert run.time_per_sample == paired.value == 2.0
    assert not any("slower than the load model" in note for note in run.notes)


def test_the_trace_and_the_chart_may_not_be_one_file(pair_plan, tmp_path, capsys):
    """The chart would overwrite the trace, and both would be reported written."""
    pytest.importorskip("matplotlib")
    both = tmp_path / "run.svg"
    assert main(["simulate", PAIR, pair_plan, "--trace", str(both), "--gantt", str(both)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: --trace and --gantt name the same file {both}; choose two "
                                                "names\n")
    assert not both.exists()


def test_a_plan_made_for_another_instance_is_noted(tmp_path, capsys):
    """chain4's plan (nodes 1-4 on two accelerators) run on chain4 renamed: it runs (the nodes are the same),
    and the note names both instances, as verify's does; in JSON, plan_made_for (null when it matches)."""
    plan = tmp_path / "plan.json"
    assert main(["solve", str(TINY / "chain4.json"), "--out", str(plan), "--quiet"]) == 0
    renamed = tmp_path / "other.json"      # an instance is named by its file
    renamed.write_text((TINY / "chain4.json").read_text())
    capsys.readouterr()
    assert main(["simulate", str(renamed), str(plan), "--microbatches", "4"]) == 0
    assert capsys.readouterr().out.endswith("note: the plan file was made for instance 'chain4', not 'other'\n")
    assert main(["simulate", str(renamed), str(plan), "--microbatches", "4", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["plan_made_for"] == "chain4"
    assert document["notes"][-1] == "the plan file was made for instance 'chain4', not 'other'"


def test_a_refused_plan_made_for_another_instance_says_so(tmp_path, capsys):
    """chain4's plan (nodes 1-4 on two accelerators) run on training-pair, whose nodes share the ids: the plan
    splits a colour class there, and the refusal names the instance the plan was made for, as split's does;
    the library's error too, where the plan is a document ("the plan")."""
    import placement

    plan = tmp_path / "plan.json"
    assert main(["solve", str(TINY / "chain4.json"), "--out", str(plan), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["simulate", PAIR, str(plan)]) == 2
    assert capsys.readouterr().err == (
        f"error: {plan} is not valid for this instance: colour 1 is split over devices 0, 1 (and 1 more; verifying "
        "the plan lists them all) (the plan file was made for instance 'chain4', not 'training-pair')\n")
    with pytest.raises(placement.InvalidParameterError) as refused:
        placement.simulate(PAIR, json.loads(plan.read_text()))
    assert (refused.value.parameter, refused.value.detail) == (
        "plan", "is not valid for this instance: colour 1 is split over devices 0, 1 (and 1 more; verifying the "
                "plan lists them all) (the plan was made for instance 'chain4', not 'training-pair')")


def test_a_claimed_value_the_run_refutes_is_noted_as_verify_notes_it(tmp_path, capsys):
    """chain4's optimal plan (max load 7.5) edited to claim 1: verify notes the claim; simulate, which checks the
    plan before running it, printed the verified 7.5 and said nothing of the claim."""
    plan = tmp_path / "plan.json"
    assert main(["solve", str(TINY / "chain4.json"), "--out", str(plan), "--quiet"]) == 0
    plan.write_text(json.dumps({**json.loads(plan.read_text()), "maxLoad": 1}))
    capsys.readouterr()
    assert main(["simulate", str(TINY / "chain4.json"), str(plan), "--microbatches", "4"]) == 0
    out = capsys.readouterr().out
    assert "max load        7.5" in out
    assert out.endswith("note: the plan file claims throughput 1; the verified value is 7.5\n")
    assert main(["simulate", str(TINY / "chain4.json"), str(plan), "--microbatches", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_made_for"] is None


def test_files_are_written_whole_or_left_as_they_were(tmp_path):
    """A write stopped midway (Ctrl-C in a long trace left 178 MB of broken JSON over the old trace)
    leaves the file as it was and no scratch file; a finished one replaces it with its permissions."""
    import os

    from placement.whole_file import replacing

    target = tmp_path / "trace.json"
    target.write_text('{"old": true}\n')
    os.chmod(target, 0o640)
    with pytest.raises(KeyboardInterrupt):
        with replacing(target) as fh:
            fh.write('{"traceEvents": [')
            raise KeyboardInterrupt
    assert target.read_text() == '{"old": true}\n' and os.listdir(tmp_path) == ["trace.json"]
    with replacing(target) as fh:
        fh.write('{"new": true}\n')
    assert target.read_text() == '{"new": true}\n' and os.listdir(tmp_path) == ["trace.json"]
    assert os.stat(target).st_mode & 0o777 == 0o640
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with replacing(link) as fh:   # written through the link, which stays a link
        fh.write("[]\n")
    assert link.is_symlink() and target.read_text() == "[]\n"


def test_json_notes_the_devices_taken_from_the_plan_file(tmp_path, capsys):
    """chain4 solved on three accelerators (the instance has two) and simulated without the override: the run
    takes the plan file's devices, which the text notes first; the JSON's notes said nothing of it."""
    plan = tmp_path / "three.json"
    chain = str(TINY / "chain4.json")
    assert main(["solve", chain, "--accelerators", "3", "--out", str(plan), "--quiet"]) == 0
    capsys.readouterr()
    note = "run on the devices the plan file records it was solved with: --accelerators 3"
    assert main(["simulate", chain, str(plan), "--microbatches", "8"]) == 0
    assert capsys.readouterr().out.startswith(f"note: {note}\n")
    assert main(["simulate", chain, str(plan), "--microbatches", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"][0] == note
    assert main(["simulate", chain, str(plan), "--microbatches", "8", "--json", "--accelerators", "3"]) == 0
    assert note not in json.loads(capsys.readouterr().out)["notes"]


def test_memory_limit_counts_one_micro_batch_in_the_singular(pair_plan, capsys):
    """A micro-batch of training-pair's plan is 4 tasks of 400 bytes: 1,600 bytes. One micro-batch over 1,000
    bytes, and two over 2,000 (which hold one), were '1 micro-batches of 4 tasks each' and 'at most 1
    micro-batches fit'."""
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "1", "--memory-limit",
                 "1000"]) == 2
    assert capsys.readouterr().err.startswith("error: 1 micro-batch of 4 tasks would take about 1.49e-06 GiB, "
                                              "over the limit --memory-limit = 9.31e-07 GiB; not one micro-batch "
                                              "fits, or raise --memory-limit\n")
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "2", "--memory-limit",
                 "2000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 2 micro-batches of 4 tasks each would take about")
    assert err.endswith("; only 1 micro-batch fits, or raise --memory-limit\n")


def test_a_long_run_through_the_event_engine_says_what_it_is_doing(pair_plan, monkeypatch, capsys):
    """GPipe on 1,001 stages and 2,000 micro-batches (4·10^6 tasks) ran for 40 s without a line, and building
    the tasks of 400,000 micro-batches took 7 s before the first. Here the threshold lowered to this run's
    tasks (8 forward and 8 backward tasks on each of 2 stages: 32): the building and the run are said; at 7
    micro-batches, 28 tasks, nothing."""
    from placement.simulation import simulator

    monkeypatch.setattr(simulator, "TOLD_TASKS", 32)
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "8"]) == 0
    said = [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert said == ["building 32 tasks (8 micro-batches over 2 stages, gpipe)",
                    "running 32 tasks (8 micro-batches over 2 stages, gpipe) through the heap engine"]
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "7"]) == 0
    assert capsys.readouterr().err == ""


def test_a_run_that_compiles_the_event_engine_first_says_so(pair_plan, monkeypatch, capsys):
    """A run past the engine's interpreted size (lowered here to 31 tasks: GPipe's 8 micro-batches make 32)
    compiles the engine where no compiled copy is cached (made so here), and says so first; at 7 micro-batches,
    28 tasks, it runs interpreted and says nothing."""
    import placement.kernels
    from placement.simulation import engine

    monkeypatch.setattr(engine, "INTERPRETED_TASKS", 31)
    monkeypatch.setattr(placement.kernels, "is_cached", lambda kernel: False)
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "8"]) == 0
    said = [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert said == ["compiling the event engine with numba (once per install; later runs load it from its cache)"]
    assert main(["simulate", PAIR, pair_plan, "--schedule", "gpipe", "--microbatches", "7"]) == 0
    assert capsys.readouterr().err == ""


def _reversed_calls_plan(tmp_path, verified_calls=None):
    """chain4 (a -> b -> c -> d, ids 1-4) on its one accelerator in two calls listed last-first: call 0 holds
    c, d and waits for b, which call 1 computes after call 0 ends."""
    plan = {"format": "placement-plan/1", "objective_kind": "latency", "contiguity": "none",
            "overrides": {"accelerators": 1},
            "devices": [{"type": "accelerator", "nodes": [1, 2, 3, 4], "calls": [[3, 4], [1, 2]]}]}
    if verified_calls is not None:
        plan["devices"][0]["calls"] = [[1], [2], [3], [4]]
        plan["verified"] = {"calls": verified_calls}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def test_a_latency_plan_whose_calls_wait_on_each_other_is_refused_as_verify_refuses_it(tmp_path, capsys):
    # simulate ran it (time per sample 14, exit 0) where verify finds it invalid (exit 1)
    path = _reversed_calls_plan(tmp_path)
    cycle = ("calls cannot be scheduled, they wait on each other in a cycle (each must end before the next can "
             "start): device 0 call 0 -> device 0 call 1 -> device 0 call 0")
    assert main(["verify", str(TINY / "chain4.json"), str(path)]) == 1
    assert cycle in capsys.readouterr().out
    assert main(["simulate", str(TINY / "chain4.json"), str(path)]) == 2
    assert capsys.readouterr().err.endswith(f"error: {path} is not valid for this instance: {cycle}\n")


def test_a_latency_plan_of_more_calls_than_its_recorded_limit_is_refused(tmp_path, capsys):
    import placement
    from placement.errors import InvalidParameterError

    path = _reversed_calls_plan(tmp_path, verified_calls=2)
    limit = "device 0 (accelerator) runs 4 calls, more than the limit of 2 calls per accelerator"
    assert main(["verify", str(TINY / "chain4.json"), str(path)]) == 1
    assert limit in capsys.readouterr().out
    with pytest.raises(InvalidParameterError, match="^plan is not valid for this instance: " + re.escape(limit)):
        placement.simulate(str(TINY / "chain4.json"), str(path))
    # the same calls under a limit of 4 run one sample in order: simulated, with the note on its calls
    four = json.loads(path.read_text())
    four["verified"]["calls"] = 4
    assert placement.simulate(str(TINY / "chain4.json"), four).notes[-1].startswith("device 0 runs the nodes of")
