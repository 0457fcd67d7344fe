"""MILP benchmark: throughput instances × contiguity × backends, or latency instances × calls × backends.

Throughput (default): for every instance under ``--instances`` (default
``../shared/tarnawski/throughput-inputs``), the DP optimum first (the reference for
``stages`` and the warm start, unless ``--cold``), then the MILP for each contiguity
class and backend with the given time limit. Latency (``--latency``): every instance
under ``../shared/tarnawski/latency-inputs``, for each number of calls per accelerator
and backend (the inference graphs of a folder given as ``--instances``: its training graphs are left out,
and a note names them), warm-started from the MILP's latency start (the best of the chain DP's pipeline, the
latency greedy, the latency chain DP, the module-chain plan and every node on one device of a type
that takes them all, each with one call per device); the reference
column is that starting plan's latency, and the instance's critical-path and path bounds
go to standard error.

The frontier table: one row per instance × class × objective × backend with status, verified objective, proven
bound, gap and seconds, as medians over ``--repeat`` runs (the status column says how many runs proved
optimality; objective, bound and gap are none where any run has none, as a run that found no plan, and the
JSON keeps each run's objective), and the model size. An instance whose DP reference ``--max-ideals`` refuses
is not solved: its rows have status ``refused`` and the DP's reason as their message, a note on standard error
says so, and the run goes on. Every file is read before any work: one that is no instance is refused, one
line naming it, as is a run of ``--objectives throughput-gpipe`` alone without a training graph. A row
prints as soon as it is done; the whole table is printed at the end with the machine and its load average,
and written as JSON: the run's rows are merged into the file, replacing rows
of the same instance, class, objective, backend and time limit (a refused row replaces none), so a run of some
instances or settings keeps the others' rows and long runs can go one at a time (``--fresh`` writes this run's
rows only). The file's top-level settings (threads, cold start, machine, wall time) are the last run's; every
row keeps those of the run that measured it as its ``run``.

    python benchmarks/milp.py [--time-limit 60] [--contiguity stages sets none] [--repeat 1]
                              [--objectives throughput ...] [--backends cp-sat highs ...]
                              [--match LayerGraphs] [--cold] [--fresh]
    python benchmarks/milp.py --latency [--calls 1 2] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import placement
from placement.errors import LimitExceededError
from placement.problem.bounds import latency_lower_bound
from placement.problem.path_bound import latency_path_bound
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.warmstart import default_warm_start
from placement.verification.latency import evaluate_latency

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_rows, milp_unavailable,  # noqa: E402  (beside this script)
                    positive_float, positive_int, read_instances, refuse)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "tarnawski"
COLUMNS = ["instance", "class", "goal", "backend", "status", "objective", "bound", "gap", "seconds", "reference",
           "variables", "rows"]
KEY = ("instance", "class", "goal", "backend", "time_limit")


def _median(values: list[float | None]) -> float | None:
    """The median of ``values``, or None where any is None (a run without a plan, bound or gap)."""
    return None if any(v is None for v in values) else statistics.median(values)


def _row(instance: str, label: str, goal: str, backend: str, results: list[placement.Result],
         reference: float | None, time_limit: float) -> dict:
    """One frontier row: medians over the runs ``results`` of one case (see :func:`_median`)."""
    proven = sum(str(r.status) == "optimal" for r in results)
    statuses = sorted({str(r.status) for r in results})
    status = statuses[0] if len(statuses) == 1 else "/".join(statuses)
    if len(results) > 1:
        status += f" ({proven}/{len(results)} proven)"
    last = results[-1]
    return {"instance": instance, "class": label, "goal": goal, "backend": backend, "status": status,
            "objective": _median([r.value for r in results]), "bound": _median([r.bound for r in results]),
            "gap": _median([r.gap for r in results]),
            "seconds": round(statistics.median(r.runtime_s for r in results), 2),
            "objective_each": [r.value for r in results],
            "seconds_each": [round(r.runtime_s, 2) for r in results], "repeats": len(results),
            "time_limit": time_limit, "reference": reference,
            "variables": last.stats.get("variables"), "rows": last.stats.get("rows"), "message": last.message,
            # none/sets: the packing row's floor, the heaviest classes it packs, its seconds (last run)
            "packing_bound": last.stats.get("packing_bound"), "packing_groups": last.stats.get("packing_groups"),
            "packing_s": last.stats.get("packing_s"),
            # this process's peak resident memory so far: every run up to this row stayed within it
            "peak_mib_so_far": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "load_average": os.getloadavg()}


def _refused_row(instance: str, label: str, goal: str, backend: str, message: str, time_limit: float) -> dict:
    """The row of a case not solved, for the reason ``message``."""
    return {"instance": instance, "class": label, "goal": goal, "backend": backend, "status": "refused",
            "objective": None, "bound": None, "gap": None, "seconds": None, "repeats": 0, "time_limit": time_limit,
            "reference": None, "variables": None, "rows": None, "message": message,
            "load_average": os.getloadavg()}


def _cell(value: object) -> str:
    """A table cell: ``-`` for None, floats to six decimals (four significant digits when large), ints with commas."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_row(row: dict) -> str:
    """One frontier row as a Markdown table line of :data:`COLUMNS`."""
    cells = [f"{row[c]:.2%}" if c == "gap" and row[c] is not None else
             f"{row[c]:.2f}" if c == "seconds" and row[c] is not None else _cell(row[c]) for c in COLUMNS]
    return "| " + " | ".join(cells) + " |"


def header() -> str:
    """The Markdown table header of :data:`COLUMNS`."""
    return "| " + " | ".join(COLUMNS) + " |\n|" + "|".join("---" for _ in COLUMNS) + "|"


def instance_root(args: argparse.Namespace) -> Path:
    """The folder of the instances: ``--instances``, or with ``--latency`` and the default, the latency inputs."""
    if args.latency and args.instances == SHARED / "throughput-inputs":
        return SHARED / "latency-inputs"
    return args.instances


def instance_files(root: Path, match: str) -> list[Path]:
    """The instance files under ``root`` whose path contains ``match``, sorted."""
    return sorted(p for p in root.rglob("*.json") if match in str(p))


def throughput(args: argparse.Namespace, problems: dict, backends: list[str]) -> list[dict]:
    """The frontier rows of the throughput objectives on ``problems`` (instances by path), each printed as it is
    done."""
    rows = []
    for path, problem in problems.items():
        name = f"{path.parent.name}/{path.stem}"
        try:
            dp = placement.solve(problem, method="dp", max_ideals=args.max_ideals)
        except LimitExceededError as exc:
            dp, refusal = None, str(exc).replace("max_ideals", "--max-ideals")
            print(f"note: {name}: no DP reference, its rows are refused: {refusal}", file=sys.stderr, flush=True)
        # the DP's plan starts the MILP; where it has none (no pipeline fits), the library's own start
        start = False if args.cold else dp if dp is not None and dp.plan else True   # a Result's plan: its stages
        goals = [g for g in args.objectives if g == "throughput" or problem.is_training]
        for goal in goals:
            for contiguity in args.contiguity:
                for backend in backends:
                    if dp is None:
                        row = _refused_row(name, contiguity, goal, backend, refusal, args.time_limit)
                        rows.append(row)
                        print(format_row(row), flush=True)
                        continue
                    results = [placement.solve(problem, method="milp", contiguity=contiguity, objective=goal,
                                               backend=backend, time_limit=args.time_limit, threads=args.threads,
                                               warm_start=start if goal == "throughput" else not args.cold)
                               for _ in range(args.repeat)]
                    row = _row(name, contiguity, goal, backend, results,
                               dp.value if goal == "throughput" else None, args.time_limit)
                    rows.append(row)
                    print(format_row(row), flush=True)
    return rows


def inference_graphs(problems: dict) -> tuple[dict, list[str]]:
    """The instances of ``problems`` (by path) that the latency objective takes, the inference graphs, and the
    names of the training graphs left out."""
    kept = {path: problem for path, problem in problems.items() if not problem.is_training}
    return kept, [f"{path.parent.name}/{path.stem}" for path in problems if path not in kept]


def latency(args: argparse.Namespace, problems: dict, backends: list[str]) -> list[dict]:
    """The frontier rows of the latency objective on ``problems`` (inference graphs by path), each printed as it
    is done."""
    rows = []
    for path, problem in problems.items():
        name = f"{path.parent.name}/{path.stem}"
        start = default_warm_start(problem, args.max_ideals, objective="latency")
        start_latency = evaluate_latency(problem, start).latency if start is not None else None
        print(f"{name}: starting plan latency {start_latency}, critical path {latency_lower_bound(problem):.6f}, "
              f"path bound (1 call) {latency_path_bound(problem):.6f}",
              file=sys.stderr, flush=True)
        for calls in args.calls:
            for backend in backends:
                results = [placement.solve(problem, method="milp", objective="latency", calls=calls,
                                           backend=backend, time_limit=args.time_limit, threads=args.threads,
                                           warm_start=False if args.cold or start is None else start)
                           for _ in range(args.repeat)]
                row = _row(name, f"q={calls}", "latency", backend, results, start_latency, args.time_limit)
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, default=SHARED / "throughput-inputs")
    parser.add_argument("--latency", action="store_true", help="the latency benchmark (latency-inputs)")
    parser.add_argument("--contiguity", nargs="+", default=["stages", "sets", "none"],
                        choices=["stages", "sets", "none"])
    parser.add_argument("--objectives", nargs="+", default=["throughput"], choices=["throughput", "throughput-gpipe"],
                        help="throughput objectives (default: throughput; throughput-gpipe on training graphs only)")
    parser.add_argument("--calls", nargs="+", type=positive_int, default=[1, 2], help="latency: calls per accelerator")
    parser.add_argument("--repeat", type=positive_int, default=1,
                        help="runs per row; the row holds their medians (default 1)")
    parser.add_argument("--fresh", action="store_true",
                        help="write this run's rows only (default: merge them into the JSON file's rows)")
    parser.add_argument("--append", action="store_true", help=argparse.SUPPRESS)   # what a run does anyway
    parser.add_argument("--backends", nargs="+", help="default: every available backend")
    parser.add_argument("--time-limit", type=positive_float, default=60.0)
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--match", default="", help="only instances whose path contains this text")
    parser.add_argument("--cold", action="store_true", help="no warm start from the DP")
    parser.add_argument("--max-ideals", type=positive_int, default=200_000)
    parser.add_argument("--json", type=Path, help="default: benchmarks/results/milp_{throughput,latency}.json")
    args = parser.parse_args(argv)
    out = args.json or ROOT / "benchmarks" / "results" / f"milp_{'latency' if args.latency else 'throughput'}.json"
    if message := cannot_write({"--json": out}):
        return refuse(message)
    root = instance_root(args)
    if not root.is_dir():
        return refuse(f"no instances: {root} is not a folder")
    files = instance_files(root, args.match)
    if not files:
        return refuse(f"no instance under {root} matches --match {args.match!r}" if args.match
                      else f"no instance files (*.json) under {root}")
    problems, unreadable = read_instances(files)
    if unreadable:
        return refuse(unreadable)
    if not args.latency and "throughput" not in args.objectives and not any(p.is_training for p in problems.values()):
        matching = f" that matches --match {args.match!r}" if args.match else ""
        return refuse(f"no run: throughput-gpipe is for training graphs, and no instance under {root}{matching} is one")
    if args.latency:
        problems, training = inference_graphs(problems)
        if not problems:
            return refuse(f"no inference graph under {root}{f' matches --match {args.match!r}' if args.match else ''}"
                          ": the latency objective is for inference graphs")
        if training:
            print(f"note: {len(training)} training graph(s) left out, the latency objective is for inference graphs: "
                  f"{', '.join(training)}", file=sys.stderr, flush=True)
    available = [name for name, ok, _ in backend_availability() if ok]
    backends = args.backends or [b for b in available if ":" not in b]
    if not backends:   # none can run here: what the default backend lacks, and what to install
        return refuse(milp_unavailable() or "no MILP backend can run here (see `placement info --solvers`)")
    missing = sorted(set(backends) - set(available))
    if missing:
        return refuse(f"backend(s) not available here: {', '.join(missing)} (see `placement info --solvers`)")
    started = time.time()
    print(f"machine: {machine()}", flush=True)
    print(header(), flush=True)
    rows = latency(args, problems, backends) if args.latency else throughput(args, problems, backends)
    print()
    print(header())
    for row in rows:
        print(format_row(row))
    here = machine()
    print(f"\nmachine: {here}")
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {"threads": args.threads, "cold": args.cold, "machine": here, "wall_s": round(time.time() - started, 1)}
    if not args.fresh:   # a refused row replaces no row the file holds of the same case
        rows = merged_rows(out, rows, KEY, settings, weak=lambda row: row["status"] == "refused")
    out.write_text(json.dumps({**settings, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    exit_with(main)
