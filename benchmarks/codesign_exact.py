"""The exact co-design against its independent check, the DP on every design combination.

For the bundled ``instances/models/mlp-training.json`` (28 nodes) on ``instances/grids/tiny.json``
(16 designs), per-chip area 606.68 mm² and power ``--power`` W, for k = 1..``--chips`` chips, a
design per stage or one for all chips, throughput or throughput per watt: the exact method
(:func:`placement.codesign.exact.solve_exact`) and the exhaustive check
(:func:`placement.codesign.exhaustive.solve_exhaustive`) are each run ``--repeat`` times in this
session. Columns: chips, mode, objective, the two values (they must agree to a relative 1e-12: the two
searches reach the optimum by other floating-point operations, so their last digits may differ; the row
says ``equal``, or ``DIFFERENT``, and the run, after its last row and the JSON, exits with status 1),
designs evaluated and DP runs of each, median
seconds of each, and the check's time over the exact method's. Writes
``benchmarks/results/codesign_exact.json`` (or ``--json``), with the machine: the run's rows replace the file's
of the same chip count, mode, objective and power budget and the file's others are kept, each with the
repeats and machine of its run as ``run``, so a run to fewer chips keeps the rows of more; the run says how
many rows it kept and replaced.

    python benchmarks/codesign_exact.py [--chips 3] [--power 130] [--repeat 3]
                                        [--json benchmarks/results/codesign_exact.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placement.codesign.exact import solve_exact  # noqa: E402
from placement.codesign.exhaustive import solve_exhaustive  # noqa: E402
from placement.codesign.grid import load_grid  # noqa: E402
from placement.codesign.workload import load_workload  # noqa: E402
from placement.report.table import cell, format_table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_float, positive_int,  # noqa: E402
                    refuse, said_merge)

MODEL = ROOT / "instances" / "models" / "mlp-training.json"
GRID = ROOT / "instances" / "grids" / "tiny.json"
AREA = 606.68
#: the fields that name a row: a later run's row of the same values replaces it in the results file
KEY = ("chips", "homogeneous", "objective", "power_w")
#: the relative difference the two values may show: each is reached by other floating-point operations
TOLERANCE = 1e-12


def agree(exact: float | None, check: float | None) -> bool:
    """Whether the exact method's value and the check's are the same optimum: both none (no plan), or equal
    to a relative ``TOLERANCE``."""
    if exact is None or check is None:
        return exact is check
    return math.isclose(exact, check, rel_tol=TOLERANCE)


def timed(solve, repeat: int, *args, **kwargs):
    """The last result of ``repeat`` runs of ``solve`` and the median of their wall-clock seconds."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = solve(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
    return result, statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    """Run both methods on every chip count, mode and objective; print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", type=positive_int, default=3, help="chip counts 1..CHIPS (default 3)")
    parser.add_argument("--power", type=positive_float, default=130.0, help="per-chip power budget, W (default 130)")
    parser.add_argument("--repeat", type=positive_int, default=3, help="runs per median (default 3)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "codesign_exact.json"))
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    workload, grid = load_workload(MODEL), load_grid(GRID)
    rows = [["chips", "mode", "objective", "exact", "exhaustive", "agree", "evaluated", "DP runs", "exact s",
             "check s", "ratio"]]
    records = []
    all_agree = True
    for chips in range(1, args.chips + 1):
        for homogeneous in (False, True):
            for objective in ("throughput", "perf-per-watt"):
                options = dict(homogeneous=homogeneous, objective=objective)
                exact, exact_s = timed(solve_exact, args.repeat, workload, grid, chips, AREA, args.power, **options)
                check, check_s = timed(solve_exhaustive, args.repeat, workload, grid, chips, AREA, args.power,
                                       **options)
                equal = agree(exact.value, check.value)
                all_agree &= equal
                mode = "homogeneous" if homogeneous else "per stage"
                rows.append([str(chips), mode, objective, cell(exact.value), cell(check.value),
                             "equal" if equal else "DIFFERENT", f"{exact.evaluated}/{check.evaluated}",
                             f"{exact.dp_runs}/{check.dp_runs}", f"{exact_s:.3f}", f"{check_s:.3f}",
                             f"{check_s / exact_s:.1f}"])
                records.append({"chips": chips, "homogeneous": homogeneous, "objective": objective,
                                "power_w": args.power, "exact_value": exact.value, "exhaustive_value": check.value,
                                "equal": equal,
                                "exact_evaluated": exact.evaluated, "exhaustive_evaluated": check.evaluated,
                                "exact_dp_runs": exact.dp_runs, "exhaustive_dp_runs": check.dp_runs,
                                "exact_median_s": exact_s, "exhaustive_median_s": check_s,
                                "ratio": check_s / exact_s})
    print("\n".join(format_table(rows, left=(1, 2, 5))))
    out, settings = Path(args.json), {"repeat": args.repeat, "machine": machine()}
    held, kept, replaced = merged_and_counted(out, records, KEY, settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": str(MODEL.relative_to(ROOT)), "grid": str(GRID.relative_to(ROOT)),
                               "area_mm2": AREA, "power_w": args.power, **settings, "rows": held}, indent=1) + "\n",
                   encoding="utf-8")
    print(said_merge(out, len(records), kept, replaced))
    return 0 if all_agree else 1


if __name__ == "__main__":
    exit_with(main)
