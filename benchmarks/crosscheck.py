"""Thousands of random cross-checks against brute force: the DP, the MILP and three baselines.

Instance ``k`` (``--first`` ≤ k < ``--first`` + ``--instances``) is
:func:`placement.testing.crosscheck.random_instance` of ``random.Random(k)``, inference for
even ``k`` and training for odd ``k``; on each, every case of
:func:`placement.testing.crosscheck.cases` runs through ``placement.solve`` (the DP; the MILP on
every available backend, with and without warm start, ``throughput`` in each contiguity class,
``throughput-gpipe`` on training graphs, ``latency`` with 1 and 2 calls on inference graphs; the
baselines ``greedy`` and ``single`` for the throughput, and ``latency-greedy`` on inference graphs)
and is judged against the brute-force optimum. The other methods (``pipedream``, ``local-search``,
``partition``, ``expert`` and the latency ones but ``latency-greedy``) are not run.

Prints the table method × backend × objective → runs, agreements (``optimal`` at the optimum,
or ``infeasible`` where no plan exists), other honest answers (no proof claimed, none refuted:
a ``feasible`` plan at or above the optimum with a bound at or below it, as a heuristic or a MILP
stopped at its limit gives, or no plan and no claim), wrong claims; and every wrong claim with
its seed and case. Writes ``benchmarks/results/crosscheck.json`` (with ``--unit U`` other than 1,
``crosscheck-unit-U.json`` beside it, so that a scaled run keeps the unit run's file; or ``--out``), with
the machine. The run's rows replace those of the file of the same method, backend and objective, with the
wrong claims they counted, and the file's other rows and their wrong claims are kept: a run of some backends
(``--backends cbc``) updates their rows. Each row's ``run`` holds the machine and the summary of the run
that measured it.
Exit status 1 when any claim of this run is wrong.

    python benchmarks/crosscheck.py [--instances 40] [--first 1000] [--unit 1e-9] [--backends cp-sat cbc ...]

``--unit`` multiplies every time and cost: the floating-point backends' tolerances are absolute, so
times of 1e-9 or 1e9 units are a test of their scaling of their own.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from placement.problem.instance import format_number
from placement.report.table import format_table
from placement.solvers.milp.backends import backend_availability
from placement.testing.crosscheck import cases, check, random_instance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_float, positive_int,  # noqa: E402
                    refuse, said_merge, write_json)

RESULTS = Path(__file__).resolve().parent / "results" / "crosscheck.json"
#: the fields that name a row of the table: a run's row replaces the file's row of the same values
KEY = ("method", "backend", "objective")
#: the fields that name a wrong claim: its instance and its case
CLAIM_KEY = ("seed", "method", "objective", "contiguity", "backend", "calls", "warm_start")


def default_out(unit: float) -> Path:
    """Where a run at ``unit`` writes without ``--out``: :data:`RESULTS`, or for a unit other than 1 a file
    named by it exactly (``crosscheck-unit-1e-9.json``), so that two units never share a file."""
    if unit == 1:
        return RESULTS
    text = format_number(unit).replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")
    return RESULTS.with_name(f"crosscheck-unit-{text}.json")


def main(argv: list[str] | None = None) -> int:
    """Run every case on every random instance; print the table and the wrong claims, write the JSON."""
    usable = [name for name, ok, _ in backend_availability() if ok]
    available = [name for name in usable if ":" not in name]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=positive_int, default=40, help="random instances (default 40)")
    parser.add_argument("--first", type=int, default=1000, help="seed of the first instance (default 1000)")
    parser.add_argument("--backends", nargs="+", default=available, help="MILP backends (default: all available)")
    parser.add_argument("--unit", type=positive_float, default=1.0,
                        help="multiply every time and cost by this (e.g. 1e-9 or 1e9; default 1)")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/crosscheck.json, or with --unit U "
                                                  "other than 1 crosscheck-unit-U.json beside it")
    args = parser.parse_args(argv)
    args.out = args.out or default_out(args.unit)
    if message := cannot_write({"--out": args.out}):
        return refuse(message)
    missing = [name for name in args.backends if name not in usable]
    if missing:
        return refuse(f"backend(s) not available here: {', '.join(missing)} (see `placement info --solvers`)")

    runs: Counter = Counter()
    agreements: Counter = Counter()
    wrong: Counter = Counter()
    wrong_claims = []
    seconds: Counter = Counter()
    started = time.perf_counter()
    for seed in range(args.first, args.first + args.instances):
        problem = random_instance(random.Random(seed), training=seed % 2 == 1, unit=args.unit)
        optima: dict = {}
        for case in cases(problem, tuple(args.backends)):
            began = time.perf_counter()
            verdict = check(problem, case, optima, args.unit)
            row = (case.method, case.backend or "-", case.objective)
            seconds[row] += time.perf_counter() - began
            runs[row] += 1
            agreements[row] += verdict.agrees
            if verdict.wrong:
                wrong[row] += 1
                wrong_claims.append({"seed": seed, **asdict(case), "status": verdict.status, "value": verdict.value,
                                     "optimum": verdict.optimum, "wrong": verdict.wrong})
                print(f"WRONG seed {seed}: {case}: {verdict.wrong}", file=sys.stderr, flush=True)
        print(f"instance {seed}: {sum(runs.values()):,} runs so far, {len(wrong_claims)} wrong",
              file=sys.stderr, flush=True)

    table = [("method", "backend", "objective", "runs", "agreements", "other honest", "wrong claims", "s/run")]
    rows = []
    for key in sorted(runs):
        method, backend, objective = key
        honest = runs[key] - agreements[key] - wrong[key]
        rows.append({"method": method, "backend": backend, "objective": objective, "runs": runs[key],
                     "agreements": agreements[key], "other_honest": honest, "wrong_claims": wrong[key],
                     "seconds_per_run": round(seconds[key] / runs[key], 4)})
        table.append((method, backend, objective, str(runs[key]), str(agreements[key]), str(honest), str(wrong[key]),
                      f"{seconds[key] / runs[key]:.3f}"))
    total = {"runs": sum(runs.values()), "agreements": sum(agreements.values()), "wrong_claims": len(wrong_claims),
             "instances": args.instances, "first_seed": args.first, "unit": args.unit,
             "backends": list(args.backends),
             "wall_s": round(time.perf_counter() - started, 1)}
    table.append(("all", "", "", str(total["runs"]), str(total["agreements"]),
                  str(total["runs"] - total["agreements"] - total["wrong_claims"]), str(total["wrong_claims"]), ""))
    print("\n".join(format_table(table, left={0, 1, 2})))
    print("agreements: optimal at the optimum, or infeasible where no plan exists; other honest: no proof "
          "claimed and none refuted (a feasible plan and a bound enclosing the optimum, or no plan and no claim)")
    print(f"\n{total['runs']:,} runs on {args.instances} instances in {total['wall_s']} s: "
          f"{total['agreements']:,} agreements, {total['wrong_claims']} wrong claims")
    write_merged(args.out, {"machine": machine(), "summary": total}, rows, wrong_claims)
    return 1 if wrong_claims else 0


def row_key(row: dict) -> tuple:
    """The :data:`KEY` of a table row, or of the row that counts the wrong claim ``row`` (a method without a
    backend is ``-`` in the table, null in a claim)."""
    return row["method"], row["backend"] or "-", row["objective"]


def write_merged(path: Path, settings: dict, rows: list[dict], wrong_claims: list[dict]) -> None:
    """Merge the run's table ``rows`` into the file at ``path`` (:func:`common.merged_and_counted` by :data:`KEY`,
    each row with ``settings``, the machine and the summary, as its ``run``) and write it with ``settings``
    at its top level; the wrong claims are the file's of the rows kept, then the run's. Say what it holds."""
    table, kept, replaced = merged_and_counted(path, rows, KEY, settings, "table")
    earlier = {row_key(row) for row in table[:kept]}
    # no row kept, no claim kept (and the file's reading said once)
    claims, held, _ = merged_and_counted(path, wrong_claims, CLAIM_KEY, {}, "wrong") if kept else (wrong_claims, 0, 0)
    claims = [claim for claim in claims[:held] if row_key(claim) in earlier] + claims[held:]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {**settings, "table": table, "wrong": claims})
    print(said_merge(path, len(rows), kept, replaced, "table"))


if __name__ == "__main__":
    exit_with(main)
