"""Piper's instances solved exactly, beside Piper's own algorithm and two simpler planners.

For each shared instance (``bert32a100``, ``gnmt`` and ``resnet`` under ``../shared/piper`` or
``--shared``: one absent is skipped; with none of them, or one that is no Piper instance, the run is
refused before any work, one error line and exit status 2) at its own settings (10 devices) and at 1, 2,
4, 8, 16, 32, 64 devices, and memory-bounded as in Piper's experiments (bert32a100 at 1, 2, 8 GiB and
resnet at 1, 2, 4 GiB, each at 8, 16, 32, 64 devices; GiB = 2^30 bytes), with schedule ``piper``:

* ``objective`` — the exact optimum (``placement.solve``, verified by the independent evaluator):
  the largest stage time per sample as Piper's code computes it (gnmt and resnet profile times in
  milliseconds and Piper adds bytes / bandwidth in seconds unconverted; so does this value);
* ``consistent`` — the same plan with times converted to seconds, and ``consistent optimum`` — the
  exact optimum of the converted instance;
* ``piper`` — Piper's algorithm re-implemented (the same DP, TMPCs by Piper's greedy knapsack;
  Piper's C++ is not run here), the reference for Piper's values; ``below`` marks where the exact
  optimum is lower (Piper's heuristic missed it);
* ``1/stage`` — the best plan with one device per stage (d = t = 1); ``megatron`` — the best
  uniform plan over the (t, d) grid (every stage the same t and d, best number of stages p);
  both skipped for the instances of ``--no-grid`` (default gnmt, whose restricted DPs are slow).

Writes ``benchmarks/results/piper.json`` (records ``{instance, devices, memory, objective, status,
stages: [{nodes, d, t, tmpcs}]}``) and ``benchmarks/results/piper_comparison.json`` (``{machine, rows}``:
the machine, and per setting every column, the solve time and the machine it ran on as ``run``), or into the
folder ``--out``. The run's records and rows replace the files' of the same instance, devices and memory and
the files' others are kept, so a run of some instances (``--shared`` holding only them) keeps the others'
(a ``--quick`` run's rows, without the baselines' columns, replace those of its settings); the run says how
many it kept and replaced.

Device types (``--types``, or ``--types-only`` for just these rows): bert32a100 with the file's
device as ``a100`` (its memory, speed 1) beside a slower ``v100`` (32 GiB, speed 0.5) and a ``cpu``
(256 GiB, speed 0.02, t = 1 only), at several counts per type; each row beside the optimum on its
``a100`` devices alone (the instance without types at that count). Writes
``benchmarks/results/piper_types.json`` (``{machine, rows}``; or into ``--out``).

    python benchmarks/piper.py [--shared ../shared/piper] [--quick] [--types | --types-only] [--out FOLDER]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import placement
from placement.errors import InvalidInstanceError
from placement.io.piper import PiperDeviceType, PiperInstance, read_piper
from placement.parallel.baselines import megatron_grid, one_device_per_stage, piper_value
from placement.parallel.dp import solve_parallel
from placement.parallel.tables import all_sets, build_tables
from placement.report.table import cell, format_table
from placement.verification.parallel import evaluate_parallel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, refuse, said_merge,  # noqa: E402
                    write_json)

GIB = 2**30
MILLISECONDS = {"gnmt", "resnet"}
#: the fields that name a setting: a later run's record or row of the same values replaces it in the results files
KEY = ("instance", "devices", "memory")


def runs(names: list[str]) -> list[tuple[str, int, float | None]]:
    """(instance, devices, memory bound or None for the file's) of every setting of the instances ``names``."""
    out = []
    for name in names:
        out += [(name, k, None) for k in (10, 1, 2, 4, 8, 16, 32, 64)]
    bounded = {"bert32a100": (1, 2, 8), "resnet": (1, 2, 4)}
    for name in names:
        for gib in bounded.get(name, ()):
            out += [(name, k, gib * GIB) for k in (8, 16, 32, 64)]
    return out


#: the device types of the rows with types, and the counts per type of each row
TYPES = (("a100", None, 1.0, False), ("v100", 32 * GIB, 0.5, False), ("cpu", 256 * GIB, 0.02, True))
TYPE_RUNS = ({"a100": 8}, {"a100": 8, "v100": 8}, {"a100": 8, "v100": 16}, {"a100": 4, "v100": 16},
             {"a100": 8, "cpu": 8}, {"a100": 2, "cpu": 8}, {"a100": 4, "v100": 8, "cpu": 8})


def with_types(instance: PiperInstance) -> PiperInstance:
    """The instance with :data:`TYPES` (``a100``: the file's device and memory)."""
    return replace(instance, device_types=tuple(
        PiperDeviceType(name, 64, instance.max_memory_per_device if memory is None else memory, speed, None, cpu)
        for name, memory, speed, cpu in TYPES))


def type_rows(instance: PiperInstance, out: Path) -> None:
    """Solve :data:`TYPE_RUNS` on ``instance`` with types; print the table, write ``piper_types.json``."""
    typed = with_types(instance)
    records = []
    rows = [["instance", "devices", "status", "objective", "a100 alone", "ratio", "stages (type×d·t)", "solve s"]]
    for counts in TYPE_RUNS:
        started = time.perf_counter()
        result = placement.solve(typed, devices=counts)
        solve_s = time.perf_counter() - started
        alone = placement.solve(instance, devices=counts["a100"])
        layout = "-" if result.plan is None else " | ".join(f"{s.device_type}×{s.d * s.t}" for s in result.plan.stages)
        spec = ",".join(f"{name}:{count}" for name, count in counts.items())
        ratio = None if result.value is None or alone.value is None else result.value / alone.value
        records.append({"instance": instance.name, "devices": counts, "types": typed.to_json()["deviceTypes"],
                        "objective": result.value, "status": str(result.status), "a100_alone": alone.value,
                        "solve_s": solve_s, "stages": [] if result.plan is None else [
                            {"nodes": list(s.nodes), "deviceType": s.device_type, "d": s.d, "t": s.t,
                             "tmpcs": {str(v): c for v, c in sorted(s.tmpcs.items())}} for s in result.plan.stages]})
        rows.append([instance.name, spec, str(result.status), cell(result.value), cell(alone.value),
                     "-" if ratio is None else f"{ratio:.3f}", layout, f"{solve_s:.2f}"])
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\n".join(format_table(rows, left=(0, 1, 2, 6))))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "piper_types.json", {"machine": machine(), "rows": records})


def in_seconds(instance: PiperInstance) -> PiperInstance:
    """The instance with every timePerSample divided by 1000 (milliseconds to seconds)."""
    nodes = tuple(replace(n, configurations={t: tuple(replace(c, time_per_sample=c.time_per_sample / 1000)
                                                      for c in cs) for t, cs in n.configurations.items()})
                  for n in instance.nodes)
    return replace(instance, nodes=nodes)


def write_merged(path: Path, rows: list[dict], settings: dict, table: str | None) -> None:
    """Merge the run's ``rows`` into the results file ``path`` by :data:`KEY` (its list ``table`` beside the
    ``settings``; ``table`` None: the file is the list), write it and say how many rows it kept and replaced."""
    merged, kept, replaced = merged_and_counted(path, rows, KEY, settings, table)
    write_json(path, merged if table is None else {**settings, table: merged})
    print(said_merge(path, len(rows), kept, replaced))


def main(argv: list[str] | None = None) -> int:
    """Solve every setting exactly and by the baselines; print the table, write the JSON files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "piper"))
    parser.add_argument("--quick", action="store_true", help="skip the Megatron grid and the one-device baseline")
    parser.add_argument("--no-grid", default="gnmt", metavar="NAMES",
                        help="comma-separated instances without the Megatron grid and one-device baseline "
                             "(default gnmt: its restricted DPs take about 15 s each, 8 per setting)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"), metavar="FOLDER",
                        help="the folder the JSON files are written to (default benchmarks/results)")
    parser.add_argument("--types", action="store_true", help="also the rows with device types (bert32a100)")
    parser.add_argument("--types-only", dest="types_only", action="store_true", help="only the rows with device types")
    args = parser.parse_args(argv)
    if message := cannot_write({}, {"--out": args.out}):
        return refuse(message)
    unknown = [n for n in args.no_grid.split(",") if n and n not in ("bert32a100", "gnmt", "resnet")]
    if unknown:   # a misspelt name left its instance's grid on, taking minutes
        return refuse(f"--no-grid names no instance: {', '.join(map(repr, unknown))} (the instances are bert32a100, "
                      "gnmt, resnet)")
    shared = Path(args.shared)
    names = [n for n in ("bert32a100", "gnmt", "resnet") if (shared / f"{n}.json").exists()]
    if not names:
        return refuse(f"no Piper instances (bert32a100.json, gnmt.json, resnet.json) under {shared}")
    if args.types_only and "bert32a100" not in names:
        return refuse(f"--types-only needs bert32a100.json, which is not under {shared}")
    try:   # every instance before any work: one that is none is refused, where it stopped the run with a traceback
        instances = {n: read_piper(shared / f"{n}.json") for n in (["bert32a100"] if args.types_only else names)}
    except InvalidInstanceError as exc:
        return refuse(str(exc))
    if args.types_only:
        type_rows(instances["bert32a100"], Path(args.out))
        return 0
    prepared = {}
    for n, inst in instances.items():
        tables = build_tables(inst)
        prepared[n] = {"tables": tables, "sets": all_sets(tables, 200_000)}
    solve_parallel(instances[names[0]], devices=2, compiled=True)   # compile the kernels before timing anything
    records, comparison = [], []
    rows = [["instance", "devices", "memory", "status", "objective", "consistent", "cons. optimum", "piper",
             "exact<piper", "1/stage", "megatron", "(t,p,d)", "solve s"]]
    for name, devices, memory in runs(names):
        inst = instances[name]
        mem = inst.max_memory_per_device if memory is None else memory
        started = time.perf_counter()
        result = placement.solve(inst, devices=devices, memory=mem)
        solve_s = time.perf_counter() - started
        plan = result.plan
        stages = [] if plan is None else [{"nodes": list(s.nodes), "d": s.d, "t": s.t,
                                           "tmpcs": {str(v): c for v, c in sorted(s.tmpcs.items())}}
                                          for s in plan.stages]
        records.append({"instance": name, "devices": devices, "memory": mem, "objective": result.value,
                        "status": str(result.status), "stages": stages})
        opts = dict(devices=devices, memory=mem, **prepared[name])
        greedy = piper_value(inst, **opts)
        checked = None if greedy.plan is None else evaluate_parallel(inst, greedy.plan, devices=devices, memory=mem)
        consistent = cons_opt = None
        if plan is not None:
            unit = 1e-3 if name in MILLISECONDS else 1.0
            consistent = evaluate_parallel(inst, plan, devices=devices, memory=mem, time_unit=unit).value
            cons_opt = (placement.solve(in_seconds(inst), devices=devices, memory=mem).value
                        if name in MILLISECONDS else result.value)
        single = grid = None
        grid_points = 0
        if not args.quick and name not in args.no_grid.split(","):
            single = one_device_per_stage(inst, **opts)
            grid, grid_points = megatron_grid(inst, **opts)
        below = (result.value is not None and greedy.plan is not None
                 and result.value < greedy.value * (1 - 1e-9))
        shape = "-"
        if grid is not None and grid.plan is not None:
            s0 = grid.plan.stages[0]
            shape = f"({s0.t},{len(grid.plan.stages)},{s0.d})"
        comparison.append({
            "instance": name, "devices": devices, "memory": mem, "status": str(result.status),
            "objective": result.value, "bound": result.bound, "consistent_unit_value": consistent,
            "consistent_unit_optimum": cons_opt, "piper_greedy": greedy.value if greedy.plan else None,
            "piper_greedy_plan_verified": None if checked is None else checked.ok and
            abs(checked.value - greedy.value) <= 1e-9 * greedy.value,
            "greedy_not_monotone_in_y": greedy.stats.get("greedy_not_monotone"),
            "exact_below_piper": below,
            "one_device_per_stage": None if single is None or single.plan is None else single.value,
            "megatron_grid": None if grid is None or grid.plan is None else grid.value,
            "megatron_shape_t_p_d": None if shape == "-" else shape, "megatron_grid_points": grid_points,
            "solve_s": solve_s, "time_per_batch": result.time_per_batch,
            "megatron_handoff": result.megatron})
        gib = f"{mem / GIB:g} GiB"
        rows.append([name, str(devices), gib, str(result.status), cell(result.value), cell(consistent),
                     cell(cons_opt), cell(greedy.value if greedy.plan else None), "yes" if below else "",
                     cell(None if single is None or single.plan is None else single.value),
                     cell(None if grid is None or grid.plan is None else grid.value), shape, f"{solve_s:.2f}"])
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\n".join(format_table(rows, left=(0, 2, 3, 8, 11))))
    times = [c["solve_s"] for c in comparison]
    print(f"\nsolve time per setting: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
          f"({len(times)} settings)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_merged(out / "piper.json", records, {}, None)
    write_merged(out / "piper_comparison.json", comparison, {"machine": machine()}, "rows")
    if args.types and "bert32a100" in names:
        print()
        type_rows(instances["bert32a100"], out)
    return 0


if __name__ == "__main__":
    exit_with(main)
