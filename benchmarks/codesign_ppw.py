"""Throughput per watt with a design per stage on the default grid: the Pareto-front DP's search times.

For the five models of :mod:`placement.zoo.codesign_models` (BERT-Base, GPT-2 small, ViT-Base/16,
ResNet-50, a GNMT-like LSTM; training graphs, and inference with ``--kinds``), ``k`` = 1, 2, 4, 8
chips, each within 606.68 mm² and ``--power`` W (default 280 W, as ``benchmarks/codesign.py``),
over the default grid of 10,000 designs, the exact co-design maximising throughput per watt is run
``--repeat`` times in this session with a design per stage (:mod:`placement.codesign.frontier`)
and, as the baseline, with one design for every chip. Columns: model, kind, k, the optimum per
stage (batches/s/W), its designs (stages, distinct), its ratio to the homogeneous optimum (≥ 1:
the homogeneous plans are among its candidates), the designs entering the DP, the blocks it
costed and the (max load, summed TDP) pairs it kept, the median seconds of each and their ratio.
Every call includes costing the grid's designs within the budgets on the model. Writes
``benchmarks/results/codesign_ppw.json`` (or ``--json``), with the machine: the run's rows replace the file's
of the same model, kind, chip count and power budget and the file's others are kept, each with the machine of
its run as ``run``, so a run of some models, kinds or chip counts keeps the others'; the file's summary is that
of all its rows, the printed one this run's, and the run says how many rows it kept and replaced.

    python benchmarks/codesign_ppw.py [--repeat 3] [--power 280] [--kinds training inference]
                                      [--models gnmt ...] [--chips 1 2 4 8] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from placement.codesign.exact import solve_exact  # noqa: E402
from placement.codesign.grid import load_grid  # noqa: E402
from placement.codesign.result import TIE  # noqa: E402
from placement.codesign.template import AREA_BUDGET_MM2, LINK_BYTES_PER_S  # noqa: E402
from placement.codesign.workload import load_workload  # noqa: E402
from placement.report.table import format_table  # noqa: E402
from placement.zoo.codesign_models import MODELS, model_file  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from codesign import timed  # noqa: E402  (beside this script)
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_float, positive_int,  # noqa: E402
                    refuse, said_merge)

RESULTS = ROOT / "benchmarks" / "results"
#: the fields that name a row: a later run's row of the same values replaces it in the results file
KEY = ("model", "kind", "chips", "power_w")


def main(argv: list[str] | None = None) -> int:
    """Solve every model, kind and chip count per stage and homogeneously; print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=positive_int, default=3, help="runs per median (default 3)")
    parser.add_argument("--power", type=positive_float, default=280.0, help="per-chip power budget, W (default 280)")
    parser.add_argument("--kinds", nargs="+", default=["training"], choices=["training", "inference"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--chips", nargs="+", type=positive_int, default=[1, 2, 4, 8])
    parser.add_argument("--json", type=Path, default=RESULTS / "codesign_ppw.json",
                        help="the JSON written (default benchmarks/results/codesign_ppw.json)")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    grid = load_grid(None)
    rows = [["model", "kind", "k", "per stage batches/s/W", "stages/distinct", "vs homogeneous", "designs in DP",
             "blocks", "front pairs", "per stage s", "homogeneous s", "ratio"]]
    records = []
    ok = True
    for model in args.models:
        for kind in args.kinds:
            workload = load_workload(model_file(f"{model}-{kind}", LINK_BYTES_PER_S))
            for k in args.chips:
                solve = lambda homogeneous: solve_exact(workload, grid, k, AREA_BUDGET_MM2, args.power,  # noqa: E731
                                                        homogeneous=homogeneous, objective="perf-per-watt")
                stage, stage_s = timed(lambda: solve(False), args.repeat)
                homog, homog_s = timed(lambda: solve(True), args.repeat)
                ok &= stage.status == homog.status == "optimal" and stage.value >= homog.value * (1 - TIE)
                w = stage.stats
                rows.append([model, kind, str(k), f"{stage.value:.6g}",
                             f"{len(stage.designs)}/{len(set(stage.designs))}", f"{stage.value / homog.value:.4f}",
                             str(stage.evaluated), str(w.get("blocks", "")), str(w.get("front_pairs", "")),
                             f"{stage_s:.3f}", f"{homog_s:.3f}", f"{stage_s / homog_s:.2f}"])
                records.append({"model": model, "kind": kind, "chips": k, "power_w": args.power,
                                "status": stage.status, "value": stage.value, "homogeneous_value": homog.value,
                                "designs": [d.label for d in stage.designs], "evaluated": stage.evaluated,
                                "pruned_by": stage.pruned_by, "stats": stage.stats, "median_s": stage_s,
                                "homogeneous_median_s": homog_s})
                print(" ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\n".join(format_table(rows, left=(0, 1))))
    times = [r["median_s"] for r in records]
    where = machine()
    print(f"\nper stage: median {statistics.median(times):.3f} s, max {max(times):.3f} s over {len(times)} rows; "
          f"{args.repeat} runs per median; {where['processor']}, {where['cpus']} CPUs, load {where['load_average']}")
    held, kept, replaced = merged_and_counted(args.json, records, KEY, {"machine": where})
    every = [r["median_s"] for r in held]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    document = {"setting": {"area_mm2": AREA_BUDGET_MM2, "power_w": args.power, "grid": "default",
                            "grid_designs": grid.size, "objective": "perf-per-watt", "repeat": args.repeat},
                "machine": where,
                "summary": {"median_s": statistics.median(every), "max_s": max(every), "rows": len(every)},
                "rows": held}
    args.json.write_text(json.dumps(document, indent=1) + "\n")
    print(said_merge(args.json, len(records), kept, replaced))
    return 0 if ok else 1


if __name__ == "__main__":
    exit_with(main)
