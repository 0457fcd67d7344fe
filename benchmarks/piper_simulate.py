"""Simulate every plan of the Piper benchmark under each schedule; compare with the planner's figures.

Plans: the feasible records of ``benchmarks/results/piper.json`` (``benchmarks/piper.py``:
``{instance, devices, memory, objective, status, stages: [{nodes, d, t, tmpcs}]}``), or of the file
``--results`` names (which must exist and hold such a list, with at least one plan, each of an instance of
``../shared/piper`` that the simulator takes: else one error line, exit status 2, nothing written), or,
when the default file is absent (or with ``--solve``), the optimal plans of the same settings solved here by
:func:`placement.parallel.solve_piper`: each published instance at its own settings and at 1, 2,
4, 8, 16, 32 and 64 devices; bert32a100 at 1, 2 and 8 GiB and resnet at 1, 2 and 4 GiB per
device, each at 8, 16, 32 and 64 devices.

Part 1 — each plan runs, for each schedule of the plan model (``piper``, ``1f1b``, ``gpipe``), one
batch of the instance's ``mbsInBatch`` micro-batches through
:func:`placement.simulation.parallel.simulate_parallel` (with Piper's all-reduce bytes,
``allreduce="piper"``, and the default forward share 1/3, as the planner counts them):

* memory: per stage the simulated peak per device against the model's memory
  (:func:`placement.verification.parallel.evaluate_parallel`, the plan given that schedule); the
  table shows the largest relative difference over the stages (tolerance: 1%);
* time: ``piper`` — the simulated time per sample without fill and drain against Piper's objective
  (the model's value); ``1f1b`` and ``gpipe`` — the simulated time per batch against the planner's
  exact time per batch (:func:`placement.parallel.timing.time_per_batch`; tolerance: 0.1%).

Part 2 (skipped with ``--no-search``) — every setting solved for ``objective="time-per-batch"``
under ``gpipe`` and ``1f1b`` (``placement.solve``; kernels compiled first): status, the planner's
objective (the plan's exact time per batch), the proven bound ``m·M*`` and gap, the time per
batch of the plan that minimises Piper's objective (what the search starts from), solve seconds,
and the simulated time per batch of the returned plan against the objective (tolerance: 0.1%).

Writes ``benchmarks/results/piper_simulate.json``: the machine; per run of part 1 the figures above, ``[d, t]``
per stage and ``[model, simulated]`` memory per stage; under ``"search"`` the rows of part 2. The run's rows
replace the file's of the same instance, devices, memory bound and schedule and the file's others are kept
(all its rows of part 2 with ``--no-search``), each with the machine and source of its run as ``run``, so a
replay of some plans keeps the others'; the run says how many rows of each part it kept and replaced.

    python benchmarks/piper_simulate.py [--results benchmarks/results/piper.json] [--solve]
                                        [--no-search] [--repeat 1] [--json benchmarks/results/piper_simulate.json]
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
from placement.errors import InvalidInstanceError, InvalidPlanError  # noqa: E402
from placement.io.piper import read_piper  # noqa: E402
from placement.parallel import ParallelPlan, solve_piper  # noqa: E402
from placement.parallel.timing import time_per_batch  # noqa: E402
from placement.report.table import cell, format_table  # noqa: E402
from placement.simulation.parallel import simulate_parallel  # noqa: E402
from placement.verification.parallel import evaluate_parallel  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, kept_table, machine, merged_and_counted, positive_int,  # noqa: E402
                    refuse, write_json)

SHARED = ROOT.parent / "shared" / "piper"
GIB = 2**30
MEMORY_BOUND = 0.01
TIME_BOUND = 0.001
#: the fields that name a row of either table: a later run's row of the same values replaces it in the results file
KEY = ("instance", "devices", "memory_bound", "schedule")
#: the schedules of part 1 (interleaved plans are laid out differently; see benchmarks of that planner)
SCHEDULES = ("piper", "1f1b", "gpipe")


def settings() -> list[tuple[str, int | None, float | None]]:
    """(instance, devices, memory per device) of the benchmark; ``None``: the file's own."""
    out: list[tuple[str, int | None, float | None]] = []
    for name in ("bert32a100", "gnmt", "resnet"):
        out += [(name, None, None)] + [(name, k, None) for k in (1, 2, 4, 8, 16, 32, 64)]
    for name, gibs in (("bert32a100", (1, 2, 8)), ("resnet", (1, 2, 4))):
        out += [(name, k, g * GIB) for g in gibs for k in (8, 16, 32, 64)]
    return out


def solved_records() -> list[dict]:
    """The plan records of :func:`settings` solved here, as ``benchmarks/piper.py`` writes them: the devices and
    memory per device given (the instance's own where the setting has none), so that their rows name the same
    settings as those of that file's plans."""
    records = []
    for name, devices, memory in settings():
        instance = read_piper(SHARED / f"{name}.json")
        result = solve_piper(instance, devices=devices, memory=memory)
        if result.plan is not None:
            records.append({"instance": name, "devices": result.devices,
                            "memory": instance.max_memory_per_device if memory is None else memory,
                            "stages": result.plan.to_json()["stages"]})
        print(f"solved {name} devices={result.devices} memory={memory}: {result.status}", file=sys.stderr, flush=True)
    return records


def plan_records(path: Path) -> list[dict]:
    """The records with a plan (``stages``) of the results file ``path``; :class:`ValueError` says why not."""
    try:
        document = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, list) or not all(isinstance(r, dict) for r in document):
        raise ValueError("not a list of plan records (objects, as benchmarks/piper.py writes)")
    records = [r for r in document if r.get("stages")]
    for k, record in enumerate(records):
        if not isinstance(record.get("instance"), str) or not isinstance(record.get("stages"), list) \
                or "devices" not in record:
            raise ValueError(f"record {k} of those with stages has no instance name, devices or list of stages")
    if not records:
        raise ValueError("no record with a plan (stages): nothing to replay")
    return records


def replays(records: list[dict]) -> tuple[dict, list[list[ParallelPlan]]]:
    """The Piper instances the plan ``records`` name, read from ``../shared/piper``, and each record's plan under
    every schedule of :data:`SCHEDULES`, before any is simulated; :class:`ValueError` names the first record whose
    instance or plan document the library refuses, and why (a plan that does not fit its instance is refused by
    the simulator)."""
    instances, plans = {}, []
    for k, record in enumerate(records):
        try:
            if record["instance"] not in instances:
                instances[record["instance"]] = read_piper(SHARED / f"{record['instance']}.json")
            plans.append([ParallelPlan.from_json({"schedule": schedule, "stages": record["stages"]})
                          for schedule in SCHEDULES])
        except (InvalidInstanceError, InvalidPlanError) as exc:
            raise ValueError(f"record {k} of those with stages: {exc}") from None
    return instances, plans


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
        simulated, expected = result.time_per_batch, time_per_batch(instance, plan, plan.schedule)
    return {"schedule": plan.schedule, "tasks": result.tasks, "seconds": statistics.median(seconds),
            "model_time": expected, "simulated_time": simulated, "time_rel": relative(simulated, expected),
            "memory": [[b, a] for a, b in memory],
            "memory_rel": max(relative(a, b) for a, b in memory)}


def search_rows(instances: dict) -> list[dict]:
    """Part 2 of the module docstring: solve every setting for the time per batch, simulate the plan."""
    from placement.parallel.dp import solve_parallel

    solve_parallel(read_piper(SHARED / "bert32a100.json"), devices=2, compiled=True)   # compile before timing
    rows = [["instance", "devices", "GiB", "schedule", "status", "objective", "bound", "gap", "DP plan", "stages",
             "solve s", "simulated", "rel"]]
    out = []
    for name, devices, memory in settings():
        if name not in instances:
            instances[name] = read_piper(SHARED / f"{name}.json")
        instance = instances[name]
        for schedule in ("gpipe", "1f1b"):
            started = time.perf_counter()
            result = placement.solve(instance, devices=devices, memory=memory, schedule=schedule,
                                     objective="time-per-batch")
            seconds = time.perf_counter() - started
            simulated = rel = None
            if result.plan is not None:
                simulated = simulate_parallel(instance, result.plan, schedule, allreduce="piper").time_per_batch
                rel = relative(simulated, result.value)
            row = {"instance": name, "devices": result.devices, "memory_bound": memory, "schedule": schedule,
                   "status": str(result.status), "objective": result.value, "bound": result.bound, "gap": result.gap,
                   "dp_plan_time_per_batch": result.stats.get("dp_plan_time_per_batch"),
                   "candidates": result.stats.get("candidates"), "simulator_check_in_solve":
                   result.stats.get("simulator_check"), "seconds": seconds, "simulated": simulated,
                   "time_rel": rel,
                   "degrees": None if result.plan is None else [[s.d, s.t] for s in result.plan.stages]}
            out.append(row)
            gib = "-" if memory is None else f"{memory / GIB:g}"
            rows.append([name, str(result.devices), gib, schedule, str(result.status), cell(result.value),
                         cell(result.bound), "-" if result.gap is None else f"{result.gap:.2%}",
                         cell(row["dp_plan_time_per_batch"]),
                         "-" if result.plan is None else str(len(result.plan.stages)), f"{seconds:.2f}",
                         cell(simulated), "-" if rel is None else f"{rel:.1e}"])
            print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\nobjective='time-per-batch' (placement.solve), each plan simulated:")
    print("\n".join(format_table(rows, left=(0, 2, 3, 4))))
    for schedule in ("gpipe", "1f1b"):
        mine = [r for r in out if r["schedule"] == schedule and r["simulated"] is not None]
        seconds = sorted(r["seconds"] for r in out if r["schedule"] == schedule)
        gaps = [r["gap"] for r in mine]
        print(f"{schedule}: {len(mine)} plans, simulated within {TIME_BOUND:.1%} of the objective in "
              f"{sum(r['time_rel'] <= TIME_BOUND for r in mine)} (largest difference "
              f"{max((r['time_rel'] for r in mine), default=0):.2e}); optimal "
              f"{sum(r['status'] == 'optimal' for r in mine)}, "
              f"feasible {sum(r['status'] == 'feasible' for r in mine)}, largest gap {max(gaps, default=0):.2%}, "
              f"median gap {statistics.median(gaps) if gaps else 0:.2%}; solve s median "
              f"{statistics.median(seconds):.2f}, max {seconds[-1]:.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path,
                        help="the plans, as benchmarks/piper.py writes them (default benchmarks/results/piper.json, "
                             "solved here where absent)")
    parser.add_argument("--solve", action="store_true", help="solve the settings here even if --results exists")
    parser.add_argument("--repeat", type=positive_int, default=1)
    parser.add_argument("--no-search", action="store_true", help="skip part 2 (solving for the time per batch)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "piper_simulate.json")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    results = args.results or ROOT / "benchmarks" / "results" / "piper.json"
    records = None
    if not args.solve and (args.results is not None or results.exists()):
        try:
            records = plan_records(results)
        except ValueError as exc:
            return refuse(f"--results {results}: {exc}")
    if not SHARED.is_dir():
        print(f"error: {SHARED} is not here: the Piper instances whose plans this benchmark replays",
              file=sys.stderr)
        return 2

    if records is not None:
        source = str(results.relative_to(ROOT) if results.is_relative_to(ROOT) else results)
    else:
        records, source = solved_records(), "solve_piper on the benchmark's settings"
    try:
        instances, plans = replays(records)
    except ValueError as exc:
        return refuse(f"--results {results}: {exc}")
    rows = [["instance", "devices", "GiB", "schedule", "stages", "Σd·t", "d", "tasks", "sim s", "model time",
             "simulated", "rel", "memory rel"]]
    out = []
    for k, (record, scheduled) in enumerate(zip(records, plans)):
        name = record["instance"]
        for schedule, plan in zip(SCHEDULES, scheduled):
            try:
                row = check(instances[name], plan, args.repeat)
            except InvalidPlanError as exc:   # a plan of other nodes or TMPCs than its instance's: nothing written
                return refuse(f"--results {results}: record {k} of those with stages: {exc}")
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
    search = None if args.no_search else search_rows(instances)
    write_merged(args.json, {"machine": machine(), "source": source}, out, search)
    return 0


def write_merged(path: Path, settings: dict, runs: list[dict], search: list[dict] | None) -> None:
    """Merge the run's ``runs`` and ``search`` rows (None: part 2 not run) into the results file ``path`` by
    :data:`KEY`, keeping the file's other rows (all its search rows where part 2 was not run), each with the
    ``settings`` of its run; write it and say how many rows of each table it kept and replaced."""
    tables, said = {}, []
    for table, rows in (("runs", runs), ("search", search)):
        if rows is None:
            tables[table] = kept_table(path, table)
            said.append(f"{table}: the file's {len(tables[table])} kept (not run)")
            continue
        tables[table], kept, replaced = merged_and_counted(path, rows, KEY, settings, table)
        said.append(f"{table}: {len(rows)} of this run's rows, {kept} of the file's kept, {replaced} replaced")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {**settings, **tables})
    print(f"wrote {path}: " + "; ".join(said))


if __name__ == "__main__":
    exit_with(main)
