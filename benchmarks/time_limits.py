"""Does ``--time-limit T`` bound the whole call? Wall time of ``placement solve`` on every published instance.

For every published instance of Tarnawski et al. (``../shared/tarnawski``: the throughput
inputs, layer and operator graphs, and the latency inputs) and every method that takes a time
limit — ``milp`` (each objective that applies: ``throughput`` and, on training graphs,
``throughput-gpipe``, in each contiguity class asked for; ``latency`` on the latency inputs),
``auto`` and ``local-search`` — the command

    python -m placement solve INSTANCE --method M --objective O [--contiguity C] --time-limit T --json

runs in a fresh process, and its wall time is measured from outside: Python's start, the
imports, reading the instance, the warm start, the model, the solver, the verification and the
output. Beside it, the process's CPU time (user + system: on a loaded machine the wall time
of the fixed work — start, imports, reading, verification — grows with the wait for a core),
the time inside ``placement.solve`` (``runtime_s``) and the solver's own (``stats.solve_s``). The test is ``wall ≤ 1.05 T + 2 s`` for every row.

    python benchmarks/time_limits.py [--time-limit 10] [--contiguity stages sets none]
                                     [--methods milp auto local-search] [--match LayerGraphs]

A run whose process exits with a status other than 0 (or does not end within ten times the limit,
at least 600 s) fails; the script then exits with status 1, as it does when a run is over. Where the
runs include MILPs (method ``milp``, and ``auto`` on the latency inputs) and no MILP backend can run
here, the run is refused before any work, one line saying what to install.

Writes ``benchmarks/results/time_limits.json`` (``--out``), with the machine: the run's rows replace those of
the same instance, method, objective, class and limit, and the file's other rows are kept (``--fresh``: this
run's rows only). Its ``summary`` is over the rows at this run's limit, and ``summaries`` holds one
per limit the file's rows have (rows at different limits are not counted together). Timings depend on
the machine's load: the solver, the warm start and the model building watch the wall clock, while
the work that cannot be cut (start, imports, reading, the DP's steps between two looks at the
clock, verification) stretches with the load; compare ``cpu`` with ``wall``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from placement.report.table import format_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_rows, milp_unavailable,  # noqa: E402  (beside this script)
                    positive_float, refuse)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "tarnawski"
RESULTS = ROOT / "benchmarks" / "results" / "time_limits.json"
#: The fields that name a row: a later run's row of the same values replaces it in the results file.
KEY = ("instance", "method", "objective", "contiguity", "time_limit")
METHODS = ("milp", "auto", "local-search")
CONTIGUITY = ("stages", "sets", "none")


def allowed(limit: float) -> float:
    """The most wall time a call with time limit ``limit`` may take."""
    return 1.05 * limit + 2.0


def runs(contiguity: list[str], methods: list[str], match: str) -> list[tuple[Path, str, str, str]]:
    """(instance, method, objective, contiguity) for every published instance and method."""
    out = []
    for path in sorted((SHARED / "throughput-inputs").rglob("*.json")):
        if match not in str(path):
            continue
        objectives = ["throughput"] + (["throughput-gpipe"] if "training" in path.name.lower() else [])
        for method in methods:
            for objective in objectives if method == "milp" else ["throughput"]:
                for c in contiguity if method == "milp" else ["stages"]:
                    out.append((path, method, objective, c))
    for path in sorted((SHARED / "latency-inputs").rglob("*.json")):
        if match in str(path):
            # latency plans place calls, not stages: class none, the only one the latency model takes
            out.extend((path, method, "latency", "none") for method in methods if method in ("milp", "auto"))
    return out


def measure(path: Path, method: str, objective: str, contiguity: str, limit: float) -> dict:
    """Run one ``placement solve`` in a fresh process and time it from outside. The row is ``ok`` when the
    process exits with status 0 within :func:`allowed`; ``exit`` is None when it was killed at its timeout."""
    command = [sys.executable, "-m", "placement", "solve", str(path), "--method", method, "--objective", objective,
               "--time-limit", f"{limit:g}", "--json"]
    if contiguity != "stages" and objective != "latency":
        command += ["--contiguity", contiguity]
    timeout = max(600.0, 10 * limit)
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        code, stdout, stderr = None, "", f"killed after {timeout:g} s"
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status, message = "-", stderr.strip().splitlines()[-1] if stderr.strip() else ""
    inside = solver = None
    try:
        answer = json.loads(stdout) if code == 0 and stdout.strip() else None
    except ValueError:
        answer, message = None, "the output is not JSON"
    if isinstance(answer, dict):
        status, message = answer.get("status", "-"), answer.get("message", "")
        inside, solver = answer.get("runtime_s"), (answer.get("stats") or {}).get("solve_s")
    within = wall <= allowed(limit)
    return {"instance": str(path.relative_to(SHARED)) if path.is_relative_to(SHARED) else str(path),
            "method": method, "objective": objective,
            "contiguity": contiguity, "time_limit": limit, "wall_s": round(wall, 2),
            "allowed_s": round(allowed(limit), 2), "within_limit": within, "ok": code == 0 and within,
            "exit": code, "solve_call_s": inside, "solver_s": solver, "cpu_s": round(cpu, 2),
            "status": status, "message": message}


def verdict(row: dict) -> str:
    """``ok``, ``OVER`` (exit status 0, too slow) or ``FAILED`` with the exit status (or the kill)."""
    if row["exit"] != 0:
        return "FAILED (killed)" if row["exit"] is None else f"FAILED (exit {row['exit']})"
    return "ok" if row["ok"] else "OVER"


def summary(rows: list[dict], limit: float) -> dict:
    """Runs, runs over the allowed wall time, failed runs, the median of wall / limit and the largest wall."""
    return {"time_limit": limit, "runs": len(rows),
            "over": sum(r["exit"] == 0 and r["wall_s"] > allowed(r["time_limit"]) for r in rows),
            "failed": sum(r["exit"] != 0 for r in rows),
            "median_wall_over_limit": round(statistics.median(r["wall_s"] / r["time_limit"] for r in rows), 4)
            if rows else None,
            "max_wall_s": max((r["wall_s"] for r in rows), default=None)}


def file_summaries(rows: list[dict], limit: float) -> dict:
    """The summaries a results file holds of its ``rows``: ``summary``, of those at the run's ``limit``, and
    ``summaries``, one per limit of the rows, in increasing order."""
    limits = sorted({r["time_limit"] for r in rows} | {limit})
    return {"summary": summary([r for r in rows if r["time_limit"] == limit], limit),
            "summaries": [summary([r for r in rows if r["time_limit"] == t], t) for t in limits]}


def main(argv: list[str] | None = None) -> int:
    """Measure every selected run; print the table and the summary, write the JSON; 1 if a run failed or was over."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive_float, default=10.0, help="T in seconds (default 10)")
    parser.add_argument("--contiguity", nargs="+", default=list(CONTIGUITY), choices=CONTIGUITY,
                        help="contiguity classes of the MILP runs (default: all three)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--match", default="", help="only instances whose path contains this")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fresh", action="store_true",
                        help="write this run's rows only (default: merge them into the file's rows)")
    args = parser.parse_args(argv)
    if message := cannot_write({"--out": args.out}):
        return refuse(message)
    if not SHARED.is_dir():
        return refuse(f"no published instances: {SHARED} is not a folder")
    selected = runs(args.contiguity, args.methods, args.match)
    if not selected:
        return refuse(f"no run: no published instance matches --match {args.match!r} for methods "
                      f"{', '.join(args.methods)}")
    # method milp, and auto on the latency inputs, solve MILPs: without a backend every such run would fail
    if any(method == "milp" or objective == "latency" for _, method, objective, _ in selected):
        if message := milp_unavailable():
            return refuse(message)
    rows = []
    for path, method, objective, contiguity in selected:
        row = measure(path, method, objective, contiguity, args.time_limit)
        rows.append(row)
        print(f"{row['instance']:52} {method:12} {objective:16} {contiguity:7} {row['wall_s']:7.2f} s "
              f"{verdict(row)}  {row['status']}", file=sys.stderr, flush=True)
    table = [("instance", "method", "objective", "class", "limit", "wall", "cpu", "solve()", "solver", "wall/limit",
              "allowed", "status")]
    for r in rows:
        table.append((r["instance"], r["method"], r["objective"], r["contiguity"], f"{r['time_limit']:g}",
                      f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", "-" if r["solve_call_s"] is None else f"{r['solve_call_s']:.2f}",
                      "-" if r["solver_s"] is None else f"{r['solver_s']:.2f}", f"{r['wall_s'] / r['time_limit']:.3f}",
                      f"{r['allowed_s']:.2f}" + ("" if r["ok"] else f" {verdict(r)}"), r["status"]))
    print("\n".join(format_table(table, left={0, 1, 2, 3, 11})))
    total = summary(rows, args.time_limit)
    print(f"\n{total['runs']} runs at a limit of {args.time_limit:g} s, {total['over']} over 1.05·T + 2 s, "
          f"{total['failed']} failed; wall/limit median "
          f"{total['median_wall_over_limit']:.3f}, largest wall {total['max_wall_s']} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {"machine": machine()}
    kept = rows if args.fresh else merged_rows(args.out, rows, KEY, settings, fields=("exit", "wall_s"))
    args.out.write_text(json.dumps({**settings, **file_summaries(kept, args.time_limit), "rows": kept},
                                   indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    exit_with(main)
