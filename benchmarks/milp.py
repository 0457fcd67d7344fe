"""MILP benchmark: throughput instances × contiguity × backends, or latency instances × calls × backends.

Throughput (default): for every instance under ``--instances`` (default
``../shared/tarnawski/throughput-inputs``), the DP optimum first (the reference for
``stages`` and the warm start, unless ``--cold``), then the MILP for each contiguity
class and backend with the given time limit. Latency (``--latency``): every instance
under ``../shared/tarnawski/latency-inputs``, for each number of calls per accelerator
and backend, warm-started from the DP plan (a chain-DP plan where the graph has too many
ideals); the reference column is that starting plan's latency (one call per device), and
the instance's simple lower bound goes to standard error.

Every row: status, verified objective, proven bound, gap, seconds, model size. A row
prints as soon as it is done; the whole table is printed at the end and written as JSON.

    python benchmarks/milp.py [--time-limit 60] [--contiguity stages sets none]
                              [--backends cp-sat highs ...] [--match LayerGraphs] [--cold]
    python benchmarks/milp.py --latency [--calls 1 2] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import placement
from placement.io.tarnawski import read_instance
from placement.problem.bounds import latency_lower_bound
from placement.solvers.milp.backends import backend_availability
from placement.solvers.milp.warmstart import default_warm_start
from placement.verification.latency import evaluate_latency

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "tarnawski"
COLUMNS = ["instance", "class", "backend", "status", "objective", "bound", "gap", "seconds", "reference",
           "variables", "rows"]


def _row(instance: str, label: str, backend: str, result: placement.Result, reference: float | None) -> dict:
    return {"instance": instance, "class": label, "backend": backend, "status": str(result.status),
            "objective": result.value, "bound": result.bound, "gap": result.gap,
            "seconds": round(result.runtime_s, 2), "reference": reference,
            "variables": result.stats.get("variables"), "rows": result.stats.get("rows"),
            "message": result.message}


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_row(row: dict) -> str:
    cells = [f"{row[c]:.2%}" if c == "gap" and row[c] is not None else
             f"{row[c]:.2f}" if c == "seconds" else _cell(row[c]) for c in COLUMNS]
    return "| " + " | ".join(cells) + " |"


def header() -> str:
    return "| " + " | ".join(COLUMNS) + " |\n|" + "|".join("---" for _ in COLUMNS) + "|"


def throughput(args: argparse.Namespace, backends: list[str]) -> list[dict]:
    rows = []
    files = sorted(p for p in args.instances.rglob("*.json") if args.match in str(p))
    for path in files:
        problem = read_instance(path)
        name = f"{path.parent.name}/{path.stem}"
        dp = placement.solve(problem, method="dp", max_ideals=args.max_ideals)
        start = False if args.cold else dp
        for contiguity in args.contiguity:
            for backend in backends:
                result = placement.solve(problem, method="milp", contiguity=contiguity, backend=backend,
                                         time_limit=args.time_limit, threads=args.threads, warm_start=start)
                row = _row(name, contiguity, backend, result, dp.value)
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


def latency(args: argparse.Namespace, backends: list[str]) -> list[dict]:
    rows = []
    root = args.instances if args.instances != SHARED / "throughput-inputs" else SHARED / "latency-inputs"
    for path in sorted(p for p in root.rglob("*.json") if args.match in str(p)):
        problem = read_instance(path)
        name = f"{path.parent.name}/{path.stem}"
        start = default_warm_start(problem, args.max_ideals)   # the DP's plan, or a chain-DP plan
        start_latency = evaluate_latency(problem, start).latency if start is not None else None
        print(f"{name}: starting plan latency {start_latency}, lower bound {latency_lower_bound(problem):.6f}",
              file=sys.stderr, flush=True)
        for calls in args.calls:
            for backend in backends:
                result = placement.solve(problem, method="milp", objective="latency", calls=calls, backend=backend,
                                         time_limit=args.time_limit, threads=args.threads,
                                         warm_start=False if args.cold or start is None else start)
                row = _row(name, f"q={calls}", backend, result, start_latency)
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, default=SHARED / "throughput-inputs")
    parser.add_argument("--latency", action="store_true", help="the latency benchmark (latency-inputs)")
    parser.add_argument("--contiguity", nargs="+", default=["stages", "sets", "none"],
                        choices=["stages", "sets", "none"])
    parser.add_argument("--calls", nargs="+", type=int, default=[1, 2], help="latency: calls per accelerator")
    parser.add_argument("--backends", nargs="+", help="default: every available backend")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--match", default="", help="only instances whose path contains this text")
    parser.add_argument("--cold", action="store_true", help="no warm start from the DP")
    parser.add_argument("--max-ideals", type=int, default=200_000)
    parser.add_argument("--json", type=Path, help="default: results/milp_{throughput,latency}.json")
    args = parser.parse_args(argv)
    if not (SHARED.exists() or args.instances.exists()):
        print(f"no instances: {args.instances} does not exist", file=sys.stderr)
        return 2
    available = [name for name, ok, _ in backend_availability() if ok]
    backends = args.backends or [b for b in available if ":" not in b]
    missing = sorted(set(backends) - set(available))
    if missing:
        print(f"backend(s) not available here: {', '.join(missing)} (see `placement info --solvers`)",
              file=sys.stderr)
        return 2
    started = time.time()
    print(header(), flush=True)
    rows = latency(args, backends) if args.latency else throughput(args, backends)
    print()
    print(header())
    for row in rows:
        print(format_row(row))
    out = args.json or ROOT / "results" / f"milp_{'latency' if args.latency else 'throughput'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_limit": args.time_limit, "threads": args.threads, "cold": args.cold,
                               "wall_s": round(time.time() - started, 1), "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
