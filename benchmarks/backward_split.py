"""Split backward vs joint backward: the optimum of each on the published training graphs.

For every training graph of Tarnawski et al. (``../shared/tarnawski/throughput-inputs``: the layer
graphs by default, ``--operator`` adds the BERT operator graphs) and every accelerator count
(default 2..9, the instance's one CPU core kept), the unsplit optimum under the split model's memory
(``w_placement="home"``: every task on its layer's stage, node memory plus the micro-batches bounded
async 1F1B holds; started from the DP's plan, PipeDream's objective, which is then optimal there too
when it fits, else from the best DP plan of at most ``c`` stages under node memory plus ``c`` copies of
the activations, which fits by construction; where the unsplit plan found on fewer accelerators is
better, solved again from that plan, a plan here too) and, per split variant,
``placement.solve(backward="split", ...)`` within ``--time-limit`` seconds: value, proven bound, gap, status, runtime, and the speed-up
unsplit / split. A split plan is never worse than the unsplit optimum (the MILP starts from it), so
a run counts as *better* when the split value is strictly below the unsplit one. The split MILP
is started from the unsplit optimal plan (every task on its layer's stage), and an inter-layer
variant from the plan of the same variant without inter-layer moves when that one is better (it is a
plan of the larger model too; its B calls are those of the unsplit plan), and ``any`` from the
``adjacent`` plan when that one is better.

    python benchmarks/backward_split.py [--time-limit 20] [--accelerators 2 3 ... 9]
                                        [--variants any adjacent adjacent+inter-layer] [--operator]

Writes ``benchmarks/results/backward_split.json`` (``--out``; the machine, and one row per run, with the unsplit
solve's bound and gap; a run's rows replace those of the same graph, accelerator count, variant and limit, the
file's others are kept unless ``--fresh``) and prints a table and, per variant, how many runs are strictly
better. Times are wall seconds on this machine, one solver thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import placement
from placement.report.table import format_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_rows, milp_unavailable,  # noqa: E402  (beside this script)
                    positive_float, positive_int, refuse)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
RESULTS = ROOT / "benchmarks" / "results" / "backward_split.json"
#: The fields that name a row: a later run's row of the same values replaces it in the results file.
KEY = ("file", "accelerators", "variant", "time_limit")
#: a variant whose plans are all plans of the key: the key's run starts from the variant's plan when better
SUBSET = {"adjacent+inter-layer": "adjacent", "any+inter-layer": "any", "any": "adjacent"}
VARIANTS = {"any": ("any", False), "adjacent": ("adjacent", False), "adjacent+inter-layer": ("adjacent", True),
            "any+inter-layer": ("any", True)}


def fmt(value: float | None, spec: str = ".6g") -> str:
    """``value`` in ``spec``, or ``-`` where a solve found no plan."""
    return "-" if value is None else format(value, spec)


def graphs(operator: bool) -> list[Path]:
    """The published training graphs: layer graphs, and the BERT operator graphs with ``operator``."""
    found = sorted((SHARED / "LayerGraphs").glob("*training*.json"))
    if operator:
        found += sorted(p for p in (SHARED / "OperatorGraphs").glob("bert*training*.json"))
    return found


def compare(instance: Any, accelerators: int, variants: list[str], time_limit: float,
            fewer: Any = None) -> tuple[list[dict[str, Any]], Any]:
    """One row per variant: the unsplit optimum and the split result on ``accelerators`` accelerators, and the
    unsplit result. ``fewer``: the unsplit result on fewer accelerators, whose plan is a plan here too: where
    it is better than this solve's, the unsplit solve runs again from it and the better result is kept."""
    start = time.perf_counter()
    dp = placement.solve(instance, accelerators=accelerators)
    # the baseline under the split model's memory (node memory + micro-batches in flight): every task at home,
    # started from the DP's plan (optimal there too when it fits, since that memory only adds to node memory)
    joint = placement.solve(instance, accelerators=accelerators, backward="split", w_placement="home",
                            time_limit=time_limit)
    if fewer is not None and fewer.ok and (not joint.ok or fewer.value < joint.value):
        again = placement.solve(instance, accelerators=accelerators, backward="split", w_placement="home",
                                time_limit=time_limit, warm_start=fewer.to_plan())
        joint = again if again.ok and (not joint.ok or again.value <= joint.value) else joint
    joint_s = time.perf_counter() - start
    rows = []
    results: dict[str, Any] = {}
    for name in sorted(variants, key=lambda v: v in SUBSET):   # adjacent first: the others may start from it
        w_placement, inter_layer = VARIANTS[name]
        base = results.get(SUBSET.get(name, ""))
        start = base if base is not None and base.ok and (not joint.ok or base.value < joint.value) else joint
        r = placement.solve(instance, accelerators=accelerators, backward="split", w_placement=w_placement,
                            inter_layer=inter_layer, time_limit=time_limit,
                            warm_start=start.to_plan() if start.plan is not None else True)
        results[name] = r
        rows.append({"instance": instance.name, "accelerators": accelerators, "variant": name,
                     "started_from": "unsplit" if start is joint else SUBSET[name],
                     "joint_dp": dp.value, "unsplit": joint.value, "unsplit_status": str(joint.status),
                     "unsplit_proven": joint.status == "optimal" or (joint.value is not None and dp.value is not None
                                                                    and abs(joint.value - dp.value) <= 1e-9 * dp.value),
                     "unsplit_bound": joint.bound, "unsplit_gap": joint.gap, "unsplit_s": joint_s,
                     "split": r.value, "bound": r.bound, "gap": r.gap, "status": str(r.status),
                     "split_s": r.runtime_s, "verified": r.verified,
                     "speedup": joint.value / r.value if r.value and joint.value else None,
                     "better": r.value is not None and joint.value is not None and r.value < joint.value * (1 - 1e-9)})
    return rows, joint


def variant_summary(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Of the rows of variant ``name``: runs, runs with a plan on both sides, runs strictly better and worse than
    the unsplit plan, and the median speed-up over the runs with both plans (None without one)."""
    mine = [r for r in rows if r["variant"] == name]
    both = [r for r in mine if r["split"] is not None and r["unsplit"] is not None]
    return {"runs": len(mine), "both": len(both), "better": sum(r["better"] for r in mine),
            "worse": sum(r["split"] > r["unsplit"] * (1 + 1e-9) for r in both),
            "median_speedup": statistics.median(r["speedup"] for r in both) if both else None}


def main(argv: list[str] | None = None) -> int:
    """Compare every selected graph and accelerator count; print the table and the summary, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=positive_float, default=20.0)
    ap.add_argument("--accelerators", type=positive_int, nargs="+", default=list(range(2, 10)))
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["any", "adjacent", "adjacent+inter-layer"])
    ap.add_argument("--operator", action="store_true", help="also the BERT operator graphs")
    ap.add_argument("--match", default="", help="only graphs whose file name contains this")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--fresh", action="store_true",
                    help="write this run's rows only (default: merge them into the file's rows)")
    args = ap.parse_args(argv)
    if message := cannot_write({"--out": args.out}):
        return refuse(message)
    found = graphs(args.operator)
    if not found:
        return refuse(f"no published training graphs under {SHARED}: nothing to measure")
    paths = [p for p in found if args.match in p.name]
    if not paths:
        return refuse(f"no training graph matches --match {args.match!r} (of {', '.join(p.name for p in found)})")
    if message := milp_unavailable():   # the unsplit optimum under the split model's memory and every variant
        return refuse(message)
    rows: list[dict[str, Any]] = []
    settings = {"time_limit": args.time_limit, "machine": machine()}
    for path in paths:
        instance = placement.load(path)
        fewer = None
        for k in sorted(args.accelerators):
            found, fewer = compare(instance, k, args.variants, args.time_limit, fewer)
            for row in found:
                row["file"] = f"{path.parent.name}/{path.name}"
                row["time_limit"] = args.time_limit
                rows.append(row)
                print(f"{row['file']} k={k} {row['variant']}: unsplit {fmt(row['unsplit'])} split {fmt(row['split'])} "
                      f"gap {fmt(row['gap'], '.2%')} {row['status']} {row['split_s']:.1f} s", flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                kept = rows if args.fresh else merged_rows(args.out, rows, KEY, settings)
                args.out.write_text(json.dumps({**settings, "rows": kept}, indent=1) + "\n")
    table = [["graph", "acc", "variant", "unsplit", "split", "speed-up", "bound", "gap", "status", "s"]]
    for r in rows:
        table.append([r["file"], str(r["accelerators"]), r["variant"], fmt(r["unsplit"]), fmt(r["split"]),
                      fmt(r["speedup"], ".4f"), fmt(r["bound"]), fmt(r["gap"], ".2%"), r["status"], f"{r['split_s']:.1f}"])
    print("\n".join(format_table(table, left=(0, 2, 8))))
    for name in args.variants:
        s = variant_summary(rows, name)
        print(f"{name}: strictly better on {s['better']} of {s['runs']} runs ({s['runs'] - s['both']} without a plan "
              f"on one side); worse on {s['worse']}; median speed-up {fmt(s['median_speedup'], '.4f')}")
    return 0


if __name__ == "__main__":
    exit_with(main)
