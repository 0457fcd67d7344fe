"""Simulate every plan of the Piper benchmark under each schedule; compare with the plan model.

Plans: the feasible records of ``benchmarks/results/piper.json`` (``benchmarks/piper.py``:
``{instance, devices, memory, objective, status, stages: [{nodes, d, t, tmpcs}]}``), or, when that
file is absent (or with ``--solve``), the optimal plans of the same settings solved here by
:func:`placement.parallel.solve_piper`: each published instance at its own settings and at 1, 2,
4, 8, 16, 32 and 64 devices; bert32a100 at 1, 2 and 8 GiB and resnet at 1, 2 and 4 GiB per
device, each at 8, 16, 32 and 64 devices.

Each plan runs, for each schedule of the plan model (``piper``, ``1f1b``, ``gpipe``), one batch of
the instance's ``mbsInBatch`` micro-batches through
:func:`placement.simulation.parallel.simulate_parallel` (with Piper's all-reduce bytes,
``allreduce="piper"``, which the model counts), and is compared with the model's evaluation
(:func:`placement.verification.parallel.evaluate_parallel`, the plan given that schedule):

* memory: per stage the simulated peak per device against the model's memory; the table shows
  the largest relative difference over the stages (acceptance: 1%);
* time: ``piper`` — the simulated time per sample without fill and drain against Piper's objective
  (the model's value); ``1f1b`` and ``gpipe`` — the simulated time per batch against the model's
  time per batch (acceptance: 0.1%).

Columns: instance, devices, memory per device (GiB; ``-``: the file's own), schedule, stages,
``Σ d·t``, ``d`` per stage, tasks simulated, seconds per simulation (median of ``--repeat``),
model and simulated time, relative difference, largest memory relative difference. Writes
``benchmarks/results/piper_simulate.json``: per run the figures above, ``[d, t]`` per stage and
``[model, simulated]`` memory per stage.

    python benchmarks/piper_simulate.py [--results benchmarks/results/piper.json] [--solve]
                                        [--repeat 1] [--json benchmarks/results/piper_simulate.json]
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

from placement.io.piper import read_piper  # noqa: E402
from placement.parallel import SCHEDULES, ParallelPlan, solve_piper  # noqa: E402
from placement.report.table import cell, format_table  # noqa: E402
from placement.simulation.parallel import simulate_parallel  # noqa: E402
from placement.verification.parallel import evaluate_parallel  # noqa: E402

SHARED = ROOT.parent / "shared" / "piper"
GIB = 2**30
MEMORY_BOUND = 0.01
TIME_BOUND = 0.001


def settings() -> list[tuple[str, int | None, float | None]]:
    """(instance, devices, memory per device) of the benchmark; ``None``: the file's own."""
    out: list[tuple[str, int | None, float | None]] = []
    for name in ("bert32a100", "gnmt", "resnet"):
        out += [(name, None, None)] + [(name, k, None) for k in (1, 2, 4, 8, 16, 32, 64)]
    for name, gibs in (("bert32a100", (1, 2, 8)), ("resnet", (1, 2, 4))):
        out += [(name, k, g * GIB) for g in gibs for k in (8, 16, 32, 64)]
    return out


def solved_records() -> list[dict]:
    records = []
    for name, devices, memory in settings():
        result = solve_piper(read_piper(SHARED / f"{name}.json"), devices=devices, memory=memory)
        if result.plan is not None:
            records.append({"instance": name, "devices": result.devices, "memory": memory,
                            "stages": result.plan.to_json()["stages"]})
        print(f"solved {name} devices={result.devices} memory={memory}: {result.status}", file=sys.stderr, flush=True)
    return records


def relative(simulated: float, model: float) -> float:
    return abs(simulated - model) / abs(model) if model else abs(simulated)


def check(instance, plan: ParallelPlan, repeat: int) -> dict:
    """Simulate ``plan`` (``repeat`` times) and compare with the model's evaluation of it."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = simulate_parallel(instance, plan, allreduce="piper")
        seconds.append(time.perf_counter() - start)
    evaluation = evaluate_parallel(instance, plan, devices=10**9, memory=float("inf"))
    memory = [(result.peak_memory(k), stage.memory) for k, stage in enumerate(evaluation.stages)]
    if plan.schedule == "piper":
        simulated, expected = result.time_per_sample, evaluation.value
    else:
        simulated, expected = result.time_per_batch, evaluation.time_per_batch
    return {"schedule": plan.schedule, "tasks": result.tasks, "seconds": statistics.median(seconds),
            "model_time": expected, "simulated_time": simulated, "time_rel": relative(simulated, expected),
            "memory": [[b, a] for a, b in memory],
            "memory_rel": max(relative(a, b) for a, b in memory)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "piper.json")
    parser.add_argument("--solve", action="store_true", help="solve the settings here even if --results exists")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "piper_simulate.json")
    args = parser.parse_args(argv)

    if args.results.exists() and not args.solve:
        records = [r for r in json.loads(args.results.read_text()) if r.get("stages")]
        source = str(args.results.relative_to(ROOT) if args.results.is_relative_to(ROOT) else args.results)
    else:
        records, source = solved_records(), "solve_piper on the benchmark's settings"
    instances = {}
    rows = [["instance", "devices", "GiB", "schedule", "stages", "Σd·t", "d", "tasks", "sim s", "model time",
             "simulated", "rel", "memory rel"]]
    out = []
    for record in records:
        name = record["instance"]
        if name not in instances:
            instances[name] = read_piper(SHARED / f"{name}.json")
        for schedule in SCHEDULES:
            plan = ParallelPlan.from_json({"schedule": schedule, "stages": record["stages"]})
            row = check(instances[name], plan, args.repeat)
            row |= {"instance": name, "devices": record["devices"], "memory_bound": record.get("memory"),
                    "degrees": [[s.d, s.t] for s in plan.stages]}
            out.append(row)
            gib = "-" if record.get("memory") is None else f"{record['memory'] / GIB:g}"
            degrees = ",".join(str(s.d) for s in plan.stages)
            rows.append([name, str(record["devices"]), gib, schedule, str(len(plan.stages)), str(plan.devices),
                         degrees if len(degrees) <= 24 else degrees[:21] + "...", str(row["tasks"]),
                         f"{row['seconds']:.2f}", cell(row["model_time"]), cell(row["simulated_time"]),
                         f"{row['time_rel']:.1e}", f"{row['memory_rel']:.1e}"])
    print(f"plans: {source}")
    print("\n".join(format_table(rows, left=(0, 3, 6))))
    for schedule in SCHEDULES:
        mine = [r for r in out if r["schedule"] == schedule]
        print(f"{schedule}: {len(mine)} plans; memory within {MEMORY_BOUND:.0%} in "
              f"{sum(r['memory_rel'] <= MEMORY_BOUND for r in mine)}, time within {TIME_BOUND:.1%} in "
              f"{sum(r['time_rel'] <= TIME_BOUND for r in mine)}; largest time difference "
              f"{max((r['time_rel'] for r in mine), default=0):.2e}, memory "
              f"{max((r['memory_rel'] for r in mine), default=0):.2e}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"source": source, "runs": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
