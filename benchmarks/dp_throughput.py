"""Solve every throughput instance with the DP, one fresh process each; print a table, write JSON.

Each instance runs as ``placement solve INSTANCE --quiet --out PLAN`` in its own
process, so the wall time is the whole process (interpreter start, imports,
reading, solving, independent verification, writing) and the peak memory is
that process's maximum resident set size. The first run also fills the
compiled-kernel cache; run with ``--warmup`` to keep that out of the table.

    python benchmarks/dp_throughput.py [--instances DIR] [--json results/dp_throughput.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INSTANCES = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"


def run_one(instance: Path, out: Path) -> dict:
    """Solve one instance in a child process; return its row."""
    cmd = [sys.executable, "-m", "placement", "solve", str(instance), "--quiet", "--out", str(out)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    row = {"instance": f"{instance.parent.name}/{instance.stem}", "exit": code,
           "wall_s": round(wall, 3), "peak_mib": round(usage.ru_maxrss / 1024, 1)}
    if code != 0:
        row["error"] = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {code}"
        return row
    plan = json.loads(out.read_text())
    stats = plan.get("stats", {})
    row.update({
        "nodes": stats.get("nodes"),
        "supernodes": stats.get("supernodes"),
        "ideals": stats.get("ideals"),
        "pairs_examined": stats.get("pairs_examined"),
        "blocks_evaluated": stats.get("blocks_evaluated"),
        "status": plan.get("status"),
        "max_load": plan.get("maxLoad"),
        "verified": plan.get("verified", {}).get("valid"),
        "solve_s": round(plan.get("runtime_s", 0.0), 3),
    })
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, default=DEFAULT_INSTANCES)
    parser.add_argument("--json", type=Path, default=ROOT / "results" / "dp_throughput.json")
    parser.add_argument("--warmup", action="store_true", help="solve the first instance once before timing")
    args = parser.parse_args(argv)
    if not args.instances.is_dir():
        print(f"no instances at {args.instances} (the published instances live in ../shared); nothing to do")
        return 0
    files = sorted(args.instances.rglob("*.json"))
    rows = []
    header = (f"{'instance':42} {'nodes':>6} {'ideals':>7} {'pairs examined':>15} {'max-load':>12} "
              f"{'status':>8} {'solve s':>8} {'wall s':>7} {'peak MiB':>9}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        if args.warmup and files:
            run_one(files[0], Path(tmp) / "warmup.json")
        for k, instance in enumerate(files):
            row = run_one(instance, Path(tmp) / f"plan{k}.json")
            rows.append(row)
            if "error" in row:
                print(f"{row['instance']:42} ERROR {row['error']}")
                continue
            print(f"{row['instance']:42} {row['nodes']:>6} {row['ideals']:>7,} {row['pairs_examined']:>15,} "
                  f"{row['max_load']:>12.6f} {row['status']:>8} {row['solve_s']:>8.2f} {row['wall_s']:>7.2f} "
                  f"{row['peak_mib']:>9.1f}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "rows": rows},
                                    indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0 if all("error" not in r and r.get("verified") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
