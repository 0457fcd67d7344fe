"""Benchmark the pipeline simulator; print three tables, write JSON.

1. Engines: 1,000 micro-batches through a 16-stage plan (the DP plan of the bundled
   BERT-Base graphs on 16 accelerators) under every schedule and communication mode,
   run by the heap-based core and by SimPy on the same task graph. Columns: tasks, the
   engine alone (best of --repeat runs) for each, the whole ``simulate`` call with the
   heap core (building the task graph, running, measuring), and the largest difference
   between the two engines' task end times.
2. Stream check: every throughput instance of Tarnawski et al. (read from
   ``../shared/tarnawski/throughput-inputs``), its DP plan streamed for 1,000
   micro-batches (``stream`` for inference, ``1f1b-async`` for training): the simulated
   time per sample against the verified max load, and with link transfers against the
   overlapped load model.
3. Scale: ``placement simulate`` of the DP plan of the published BERT-L-12 training graph
   (``OperatorGraphs/bert_L-12_training.json`` under ``--instances``; 7 devices) with
   ``--scale-microbatches`` micro-batches (default 10^6; figures only, so the run streams) and, as the
   baseline, the same command with ``--trace`` (the event engine with its task table) at
   ``--baseline-microbatches`` (default 10^5): wall time and peak memory of each process (medians of
   ``--repeat``), and tasks per second.

``--only-scale`` runs part 3 alone. A part not run (by that option, or without the published
instances) keeps the rows of the JSON file, each with the machine it ran on. The stream rows of the
instances streamed replace the file's of the same instances and the file's others are kept (a folder of
some instances keeps the others'); the run says how many it kept and replaced.

Checks, on the rows this run measured: every engine row's whole ``simulate`` call takes under 2 s
per 1,000 micro-batches (the simulator's requirement, docs/simulator.md; its work grows with the
micro-batches), and every streamed plan's time per sample is within 1e-3 (relative) of its verified
max load. A streamed run that has not settled into a periodic steady state within ``--microbatches``
(its period is none: the time per sample is the average slope over the window, docs/simulator.md) is
not checked; a note on standard error names it. The exit status is 1 where a check fails, after the
JSON is written, with one line per failure saying which row and what figure exceeded what.
``--instances`` given and not a folder, or a file there that is no instance, is refused before any work
(without it, absent published instances skip parts 2 and 3 with a note).

    python benchmarks/simulate.py [--microbatches 1000] [--repeat 3] [--only-scale]
                                  [--json benchmarks/results/simulate.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from child import run_child  # noqa: E402
from common import (cannot_write, exit_with, kept_table, machine, merged_and_counted, positive_int,  # noqa: E402
                    read_instances, refuse, said_merge)
from placement.io.tarnawski import read_instance  # noqa: E402
from placement.simulation import simulate_pipeline  # noqa: E402
from placement.simulation.engine import execute  # noqa: E402
from placement.simulation.pipeline import build_pipeline  # noqa: E402
from placement.simulation.program import build_program  # noqa: E402
from placement.simulation.schedules import get_schedule  # noqa: E402
from placement.solvers.dp import solve_dp  # noqa: E402
from placement.verification.evaluate import evaluate  # noqa: E402

DEFAULT_INSTANCES = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
STAGES = 16
#: the simulator's requirement: the whole simulate call of 1,000 micro-batches under 2 s
SIMULATE_S_PER_1000 = 2.0
#: the largest relative difference of a streamed plan's time per sample from its verified max load
STREAM_TOLERANCE = 1e-3
CASES = [("bert-base-inference", "stream"), ("bert-base-training", "1f1b-async"), ("bert-base-training", "gpipe"),
         ("bert-base-training", "1f1b-flush"), ("bert-base-training", "split-backward")]


def best_of(repeat: int, run) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = run()
        best = min(best, time.perf_counter() - start)
    return best, value


def sixteen_stage_pipeline(name: str):
    problem = read_instance(ROOT / "instances" / f"{name}.json").with_devices({"accelerator": STAGES, "cpu": 0})
    solution = solve_dp(problem)
    pipeline = build_pipeline(problem, solution.plan)
    if len(pipeline.stages) != STAGES:
        raise SystemExit(f"expected a {STAGES}-stage plan for {name}, got {len(pipeline.stages)} stages")
    return pipeline


def engine_rows(microbatches: int, repeat: int) -> list[dict]:
    have_simpy = importlib.util.find_spec("simpy") is not None
    if have_simpy:
        from placement.simulation.engine_simpy import execute_simpy
    pipelines = {name: sixteen_stage_pipeline(name) for name in {n for n, _ in CASES}}
    header = (f"{'graph':22} {'schedule':15} {'comm':6} {'tasks':>7} {'heap s':>7} {'simpy s':>8} "
              f"{'simpy/heap':>10} {'simulate s':>10} {'max |diff|':>10}")
    print(f"{microbatches} micro-batches through a {STAGES}-stage plan (best of {repeat})")
    print(header)
    print("-" * len(header))
    rows = []
    for name, schedule in CASES:
        for comm in ("inline", "link"):
            pipeline = pipelines[name]
            sched = get_schedule(schedule)
            program = build_program(pipeline, sched, microbatches, comm, 0.5 if sched.split_backward else 0.0)
            heap_s, (_, heap_end) = best_of(repeat, lambda: execute(program.graph))
            row = {"graph": name, "schedule": schedule, "comm": comm, "stages": STAGES,
                   "microbatches": microbatches, "tasks": len(program.graph), "heap_s": round(heap_s, 4)}
            if have_simpy:
                simpy_s, (_, simpy_end) = best_of(repeat, lambda: execute_simpy(program.graph))
                row["simpy_s"] = round(simpy_s, 4)
                row["max_abs_diff"] = max(abs(a - b) for a, b in zip(heap_end, simpy_end))
            simulate_s, result = best_of(repeat, lambda: simulate_pipeline(pipeline, schedule, microbatches, comm))
            row["simulate_s"] = round(simulate_s, 4)
            row["time_per_sample"] = result.time_per_sample
            rows.append(row)
            simpy_text = (f"{row['simpy_s']:>8.3f} {row['simpy_s'] / heap_s:>10.1f}" if have_simpy
                          else f"{'-':>8} {'-':>10}")
            diff_text = f"{row['max_abs_diff']:>10.1e}" if have_simpy else f"{'-':>10}"
            print(f"{name:22} {schedule:15} {comm:6} {row['tasks']:>7,} {heap_s:>7.3f} {simpy_text} "
                  f"{simulate_s:>10.3f} {diff_text}", flush=True)
    if not have_simpy:
        print("SimPy is not installed (pip install simpy): its columns are empty")
    return rows


def stream_rows(instances: Path, problems: dict, microbatches: int) -> list[dict]:
    """Part 2: the DP's plan of every instance of ``problems`` (by path; read from the folder ``instances``)
    streamed for ``microbatches`` micro-batches, each row printed as it is done; none where the folder is absent."""
    if not instances.is_dir():
        print(f"\nno instances at {instances} (the published instances live in ../shared); stream check skipped")
        return []
    header = (f"{'instance':38} {'stages':>6} {'schedule':10} {'max-load':>12} {'simulated':>12} {'rel diff':>9} "
              f"{'period':>6} {'link model':>11} {'link sim':>11} {'rel diff':>9} {'solve s':>7} {'sim s':>6}")
    print(f"\nDP plans streamed for {microbatches} micro-batches")
    print(header)
    print("-" * len(header))
    rows = []
    for path, problem in problems.items():
        start = time.perf_counter()
        solution = solve_dp(problem)
        solve_s = time.perf_counter() - start
        if solution.plan is None:   # no pipeline fits
            print(f"{path.parent.name}/{path.stem}: no plan ({solution.status}): nothing to stream", flush=True)
            continue
        evaluation = evaluate(problem, solution.plan, "stages")
        pipeline = build_pipeline(problem, solution.plan)
        schedule = "1f1b-async" if problem.is_training else "stream"
        start = time.perf_counter()
        inline = simulate_pipeline(pipeline, schedule, microbatches)
        sim_s = time.perf_counter() - start
        row = {"instance": f"{path.parent.name}/{path.stem}", "stages": len(pipeline.stages), "schedule": schedule,
               "max_load": evaluation.max_load, "time_per_sample": inline.time_per_sample,
               "rel_diff": inline.time_per_sample / evaluation.max_load - 1, "period": inline.period,
               "solve_s": round(solve_s, 3), "simulate_s": round(sim_s, 3), "notes": list(inline.notes)}
        link_text = f"{'-':>11} {'-':>11} {'-':>9}"
        if not problem.is_training:
            linked = simulate_pipeline(pipeline, schedule, microbatches, "link")
            row.update(link_model=linked.model_time_per_sample, link_time_per_sample=linked.time_per_sample,
                       link_rel_diff=linked.time_per_sample / linked.model_time_per_sample - 1)
            link_text = (f"{row['link_model']:>11.6f} {row['link_time_per_sample']:>11.6f} "
                         f"{row['link_rel_diff']:>9.1e}")
        rows.append(row)
        print(f"{row['instance']:38} {row['stages']:>6} {schedule:10} {evaluation.max_load:>12.6f} "
              f"{inline.time_per_sample:>12.6f} {row['rel_diff']:>9.1e} {str(inline.period):>6} {link_text} "
              f"{solve_s:>7.2f} {sim_s:>6.2f}", flush=True)
    return rows


BERT_L12 = Path("OperatorGraphs") / "bert_L-12_training.json"


def _process(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of a child process."""
    child = run_child(cmd, ROOT, capture_stderr=False)
    if child.exit != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return child.wall_s, child.peak_mib


def scale_rows(instances: Path, microbatches: int, baseline_microbatches: int, repeat: int) -> list[dict]:
    instance = instances / BERT_L12
    if not instance.is_file():
        print(f"\nno instance at {instance}; scale check skipped")
        return []
    instance = instance.absolute()   # the children run from the repository root
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        subprocess.run([sys.executable, "-m", "placement", "solve", str(instance), "--quiet", "--out", str(plan)],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        stages = len(json.loads(plan.read_text())["devices"])
        base = [sys.executable, "-m", "placement", "simulate", str(instance), str(plan), "--quiet"]
        cases = [("streamed figures", microbatches, base),
                 ("event engine + task table", baseline_microbatches, base + ["--trace", str(Path(tmp) / "t.json")])]
        print(f"\nBERT-L-12 training, DP plan on {stages} devices, 1f1b-async (medians of {repeat}; "
              f"load average {os.getloadavg()[0]:.2f})")
        header = f"{'run':28} {'micro-batches':>13} {'tasks':>12} {'wall s':>8} {'peak MiB':>9} {'M tasks/s':>9}"
        print(header)
        print("-" * len(header))
        rows = []
        _process(base + ["--microbatches", "1000"])   # compiles the kernel once (cached on disk)
        for name, m, cmd in cases:
            runs = [_process(cmd + ["--microbatches", str(m)]) for _ in range(repeat)]
            wall = statistics.median(r[0] for r in runs)
            peak = statistics.median(r[1] for r in runs)
            tasks = 2 * stages * m
            rows.append({"run": name, "microbatches": m, "tasks": tasks, "wall_s": wall, "peak_mib": peak,
                         "tasks_per_s": tasks / wall, "runs": runs})
            print(f"{name:28} {m:>13,} {tasks:>12,} {wall:>8.2f} {peak:>9.1f} {tasks / wall / 1e6:>9.3g}",
                  flush=True)
    return rows


def failures(engines: list[dict], streams: list[dict]) -> list[str]:
    """What the rows ``engines`` and ``streams`` fail of the checks (see the module docstring), one line each."""
    lines = []
    for r in engines:
        allowed = SIMULATE_S_PER_1000 * r["microbatches"] / 1000
        if r["simulate_s"] >= allowed:
            lines.append(f"engines: {r['graph']} {r['schedule']} {r['comm']}: simulate took {r['simulate_s']:.3f} s "
                         f"for {r['microbatches']:,} micro-batches, not under {allowed:g} s "
                         f"({SIMULATE_S_PER_1000:g} s per 1,000)")
    for r in streams:
        if r["period"] is not None and not abs(r["rel_diff"]) <= STREAM_TOLERANCE:
            lines.append(f"streams: {r['instance']}: time per sample {r['time_per_sample']:.6f} differs from the max "
                         f"load {r['max_load']:.6f} by {r['rel_diff']:.1e} (relative), more than {STREAM_TOLERANCE:g}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--microbatches", type=positive_int, default=1000,
                        help="micro-batches of parts 1 and 2 (default 1000; part 1's check allows 2 s per 1,000)")
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--instances", type=Path, default=None,
                        help="the throughput instances of parts 2 and 3 "
                             "(default ../shared/tarnawski/throughput-inputs)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "simulate.json")
    parser.add_argument("--scale-microbatches", type=positive_int, default=10**6)
    parser.add_argument("--baseline-microbatches", type=positive_int, default=10**5)
    parser.add_argument("--only-scale", action="store_true",
                        help="only the scale table (the JSON file's engine and stream rows are kept)")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    if args.instances is not None and not args.instances.is_dir():
        return refuse(f"--instances {args.instances}: no such folder")
    instances = DEFAULT_INSTANCES if args.instances is None else args.instances
    streamed = not args.only_scale and instances.is_dir()
    problems, unreadable = read_instances(sorted(instances.rglob("*.json")) if streamed else [])
    if unreadable:
        return refuse(unreadable)
    engines = kept_table(args.json, "engines") if args.only_scale else engine_rows(args.microbatches, args.repeat)
    measured = [] if args.only_scale else stream_rows(instances, problems, args.microbatches)
    failed = failures([] if args.only_scale else engines, measured)   # this run's rows: kept ones were checked
    here = {"machine": machine()}
    # the file's rows of the instances this run did not stream stay (all of them where it streamed none)
    streams, kept, replaced = merged_and_counted(args.json, measured, ("instance",), here, "streams")
    scale = scale_rows(instances, args.scale_microbatches, args.baseline_microbatches, args.repeat)
    scale = scale or kept_table(args.json, "scale")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**here, "engines": engines, "streams": streams, "scale": scale},
                                    indent=2) + "\n")
    print("\n" + said_merge(args.json, len(measured), kept, replaced, "streams"))
    for r in measured:
        if r["period"] is None:
            print(f"note: streams: {r['instance']} has not settled within {args.microbatches:,} micro-batches "
                  f"(no period): its time per sample is not checked; give more with --microbatches", file=sys.stderr)
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    exit_with(main)
