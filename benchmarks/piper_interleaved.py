"""Interleaved 1F1B plans (v chunks per device group) on the published Piper instances, against 1F1B.

Settings: each instance of ``../shared/piper`` (or ``--shared``; one absent is skipped, and with none of
them, or one that is no Piper instance, the run is refused before any work, one error line and exit status 2)
at 8 and 16 devices (its own memory); bert32a100 at 32 devices with 8 GiB and resnet at 16 devices with
4 GiB (memory binding), each with ``v = 2`` and ``v = 4`` chunks per group
(``placement.solve(..., schedule="interleaved", chunks=v)``, with the library's
default search limit of 8 s unless ``--time-limit``),
and beside each the non-interleaved optimum of the same setting (``schedule="1f1b"``, the exact DP).

Every interleaved plan is simulated (:func:`placement.simulation.parallel.simulate_parallel`,
Piper's all-reduce, forward share 1/3): per stage the simulated peak memory per device against the
model's (the independent evaluator's group memory; tolerance 1%), the simulated time per sample
against the value (Piper's objective generalised: the largest group's), and the simulated time per
batch against the planner's (the exact max-plus evaluation of the interleaved order; tolerance
0.1%). The 1F1B plans' time per batch is the same exact evaluation of their order.

Columns: ``value`` the largest group time per sample, ``bound``/``gap`` what is proven, ``batch``
the time per batch (laid out after the solve where its time limit left it not computed), ``1f1b`` the
1F1B optimum's time per sample and batch, ``batch ratio`` = interleaved / 1F1B time per batch, ``mem rel``/``tps
rel``/``batch rel`` the simulator's differences. Writes ``benchmarks/results/piper_interleaved.json`` (or
``--json``), with the machine and the time limit; per run a record of the setting (``memory``: its bound,
null for the file's), the figures above, the plan and ``stage_memory``, per stage ``[model, simulated]``.
The run's records replace the file's of the same instance, devices, memory and chunks and the file's others
are kept (each with the machine and time limit of its run as ``run``), so a run of some instances
(``--shared`` holding only them) keeps the others'; the file's summary is that of all its records, the
printed one this run's, and the run says how many records it kept and replaced.

    python benchmarks/piper_interleaved.py [--time-limit 8] [--shared ../shared/piper]
                                           [--json benchmarks/results/piper_interleaved.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import placement  # noqa: E402
from placement.errors import InvalidInstanceError  # noqa: E402
from placement.parallel.interleaved import DEFAULT_TIME_LIMIT, interleaved_time_per_batch  # noqa: E402
from placement.report.table import cell, format_table  # noqa: E402
from placement.simulation.parallel import simulate_parallel  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_float, refuse,  # noqa: E402
                    said_merge)

SHARED = ROOT.parent / "shared" / "piper"
GIB = 2 ** 30
MEMORY_BOUND = 0.01
TIME_BOUND = 0.001
SETTINGS = [(name, devices, None) for name in ("bert32a100", "gnmt", "resnet") for devices in (8, 16)] + \
    [("bert32a100", 32, 8 * GIB), ("resnet", 16, 4 * GIB)]
CHUNKS = (2, 4)
#: the fields that name a run: a later run's record of the same values replaces it in the results file
KEY = ("instance", "devices", "memory", "chunks")


def settings(shared: Path) -> list[tuple[str, int, int | None]]:
    """The settings (instance, devices, memory bound in bytes or None for the file's) of the instances that
    are in the folder ``shared``."""
    return [setting for setting in SETTINGS if (shared / f"{setting[0]}.json").exists()]


def relative(a: float, b: float) -> float:
    """``|a - b| / |b|``."""
    return abs(a - b) / max(abs(b), 1e-300)


def simulate(instance, result, batch: float) -> dict:
    """The simulator's figures of an interleaved result, and their largest differences from the model's
    (``batch``: the plan's time per batch)."""
    sim = simulate_parallel(instance, result.plan, allreduce="piper")
    memory = [[ev.memory, sim.peak_memory(k)] for k, ev in enumerate(result.evaluation.stages)]
    return {"memory_rel": max(relative(s, m) for m, s in memory), "stage_memory": memory,
            "simulated_time_per_sample": sim.time_per_sample,
            "time_per_sample_rel": relative(sim.time_per_sample, result.value),
            "simulated_time_per_batch": sim.time_per_batch,
            "time_per_batch_rel": relative(sim.time_per_batch, batch)}


def summarized(records: list[dict]) -> dict:
    """The summary of ``records``: how many runs are optimal, feasible and without a plan, how many plans the
    simulator agrees with and the worst differences, the largest gap, solve seconds and time-per-batch ratios."""
    planned = [r for r in records if r["plan"] is not None]
    seconds = sorted(r["solve_s"] for r in records)
    ratios = [r["batch_ratio"] for r in planned if r["batch_ratio"] is not None]
    return {
        "runs": len(records), "optimal": sum(r["status"] == "optimal" for r in records),
        "feasible": sum(r["status"] == "feasible" for r in records),
        "without_plan": len(records) - len(planned),
        "memory_within_1pct": sum(r["memory_rel"] <= MEMORY_BOUND for r in planned),
        "time_per_sample_within_0.1pct": sum(r["time_per_sample_rel"] <= TIME_BOUND for r in planned),
        "time_per_batch_within_0.1pct": sum(r["time_per_batch_rel"] <= TIME_BOUND for r in planned),
        "worst_memory_rel": max((r["memory_rel"] for r in planned), default=None),
        "worst_time_per_sample_rel": max((r["time_per_sample_rel"] for r in planned), default=None),
        "worst_time_per_batch_rel": max((r["time_per_batch_rel"] for r in planned), default=None),
        "largest_gap": max((r["gap"] for r in planned if r["gap"] is not None), default=None),
        "solve_s_median": statistics.median(seconds), "solve_s_max": seconds[-1],
        "batch_ratio_median": statistics.median(ratios) if ratios else None,
        "batch_ratio_min": min(ratios, default=None), "batch_ratio_max": max(ratios, default=None)}


def said(summary: dict) -> str:
    """The line that states ``summary``, its figures as the table prints them ("-" where there is none)."""
    def shown(key: str, spec: str) -> str:
        return "-" if summary[key] is None else format(summary[key], spec)

    planned = summary["runs"] - summary["without_plan"]
    return (f"{summary['runs']} runs: {summary['optimal']} optimal, {summary['feasible']} feasible (largest gap "
            f"{shown('largest_gap', '.1e')}), {summary['without_plan']} without a plan; on {planned} plans the "
            f"simulator's memory is within 1% in {summary['memory_within_1pct']} (worst "
            f"{shown('worst_memory_rel', '.1e')}), time per sample within 0.1% in "
            f"{summary['time_per_sample_within_0.1pct']} (worst {shown('worst_time_per_sample_rel', '.1e')}), time "
            f"per batch within 0.1% in {summary['time_per_batch_within_0.1pct']} (worst "
            f"{shown('worst_time_per_batch_rel', '.1e')}); solve s median {summary['solve_s_median']:.2f}, max "
            f"{summary['solve_s_max']:.2f}; time per batch interleaved/1F1B median "
            f"{shown('batch_ratio_median', '.3f')}, range {shown('batch_ratio_min', '.3f')}–"
            f"{shown('batch_ratio_max', '.3f')}")


def main(argv: list[str] | None = None) -> int:
    """Solve and simulate every setting; print the table and the summary, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive_float, default=None,
                        help=f"seconds per interleaved solve (default: the library's, {DEFAULT_TIME_LIMIT:g})")
    parser.add_argument("--shared", type=Path, default=SHARED,
                        help="the folder of the Piper instances (default ../shared/piper)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "piper_interleaved.json")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    if not (runs := settings(args.shared)):
        return refuse(f"no Piper instances (bert32a100.json, gnmt.json, resnet.json) under {args.shared}")
    try:   # every instance before any work: one that is none is refused, where it stopped the run with a traceback
        instances = {name: placement.load(args.shared / f"{name}.json") for name, _, _ in runs}
    except InvalidInstanceError as exc:
        return refuse(str(exc))
    rows = [["instance", "devices", "GiB", "v", "status", "S,d,t", "value", "gap", "batch", "solve s", "1f1b value",
             "1f1b batch", "batch ratio", "mem rel", "tps rel", "batch rel"]]
    records = []
    for name, devices, memory in runs:
        instance = instances[name]
        base = placement.solve(instance, devices=devices, memory=memory, schedule="1f1b")
        for v in CHUNKS:
            started = time.perf_counter()
            result = placement.solve(instance, devices=devices, memory=memory, schedule="interleaved", chunks=v,
                                     time_limit=args.time_limit)
            seconds = time.perf_counter() - started
            batch = result.time_per_batch
            if result.plan is not None and batch is None:   # past the time limit: laid out here, not timed
                batch = interleaved_time_per_batch(instance, result.plan)
            record = {"instance": name, "devices": devices, "memory": memory, "chunks": v,
                      "status": str(result.status), "value": result.value, "bound": result.bound,
                      "gap": result.gap, "time_per_batch": batch, "solve_s": seconds,
                      "stats": {k: x for k, x in result.stats.items() if isinstance(x, (int, float, str))},
                      "baseline_1f1b": {"status": str(base.status), "value": base.value,
                                        "time_per_batch": base.time_per_batch},
                      "plan": None if result.plan is None else result.plan.to_json()}
            if result.plan is not None:
                record |= simulate(instance, result, batch)
            records.append(record)
            ratio = (batch / base.time_per_batch
                     if result.plan is not None and base.plan is not None else None)
            record["batch_ratio"] = ratio
            shape = "-" if result.plan is None else \
                f"{len(result.plan.stages) // v},{result.plan.stages[0].d},{result.plan.stages[0].t}"
            rows.append([name, str(devices), "-" if memory is None else f"{memory / GIB:g}", str(v),
                         str(result.status), shape, cell(result.value),
                         "-" if result.gap is None else f"{result.gap:.1e}", cell(batch),
                         f"{seconds:.2f}", cell(base.value), cell(base.time_per_batch),
                         "-" if ratio is None else f"{ratio:.3f}",
                         *([f"{record['memory_rel']:.1e}", f"{record['time_per_sample_rel']:.1e}",
                            f"{record['time_per_batch_rel']:.1e}"] if result.plan is not None else ["-"] * 3)])
            print(f"{name} {devices} {v}: {result.status} ({seconds:.1f} s)", file=sys.stderr, flush=True)
    print("\n".join(format_table(rows, left=(0, 4, 5))))
    print(said(summarized(records)))
    run = {"machine": machine(), "time_limit": DEFAULT_TIME_LIMIT if args.time_limit is None else args.time_limit}
    merged, kept, replaced = merged_and_counted(args.json, records, KEY, run, "records")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**run, "summary": summarized(merged), "records": merged}, indent=1) + "\n")
    print(said_merge(args.json, len(records), kept, replaced))
    return 0


if __name__ == "__main__":
    exit_with(main)
