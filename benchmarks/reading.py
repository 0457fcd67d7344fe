"""Reading at scale: ``placement info`` on a 200,000-node chain, and the whole ``placement solve`` on shapes
whose reading used to dominate; print tables, write JSON.

Shapes (generated here, seeded, by :func:`dp_throughput.line_document`): a chain of 200,000 nodes, a
chain of 10,000 nodes and a 700-node total order (244,650 edges), random times, 4 accelerators and
1 CPU. Each command runs in its own process, ``--repeat`` times after one unmeasured run (which
fills the compiled-kernel cache); per row the medians of the wall time, the process's CPU time (user
+ system: on a loaded machine the wall time stretches with the wait for a core) and its peak
resident memory.

A second table splits the 200,000-node chain's ``info`` into its steps, timed in a child process:
decoding the JSON, reading and validating the instance, the report (sizes, work, lower bound), the
colour-class contraction of the DP and the ideal count (medians of ``--repeat``).

``--baseline DIR`` runs everything a second time with the package found in ``DIR`` (a source tree
of another commit, e.g. from ``git archive``) and prints the ratios baseline / this tree; both are
measured in the same session, interleaved, so that they see the same load.

A child that fails stops the benchmark with one line naming the tree, the command, its exit status
and its last line on standard error (exit status 1, nothing written): exit status 0 is success, and 1
from ``solve`` (no plan) counts too, unless the child died of an uncaught exception (a traceback),
which also exits 1.

    python benchmarks/reading.py [--repeat 3] [--baseline DIR] [--json benchmarks/results/reading.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from child import run_child  # noqa: E402
from common import cannot_write, exit_with, machine, positive_int, refuse  # noqa: E402
from dp_throughput import ROOT, _write, line_document  # noqa: E402

SHAPES = {
    "chain-200000": lambda: line_document(200_000, False, 3),
    "chain-10000": lambda: line_document(10_000, False, 1),
    "total-order-700": lambda: line_document(700, True, 2),
}
COMMANDS = [("info", "chain-200000"), ("solve", "chain-10000"), ("solve", "total-order-700")]

#: the steps of ``placement info``, timed in a child process; prints one JSON object of seconds
STEPS = """
import json, sys, time
from placement.errors import InvalidInstanceError
from placement.jsonfile import load_json
from placement.io.tarnawski import parse_instance
from placement.report.info import instance_info
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, count_ideals
laps = {}
start = time.perf_counter()
def lap(name):
    global start
    now = time.perf_counter()
    laps[name] = now - start
    start = now
data = load_json(sys.argv[1], InvalidInstanceError); lap("decode JSON")
problem = parse_instance(data, "chain"); lap("read + validate")
instance_info(problem); lap("info report")
contraction = contract(problem); lap("contract")
count_ideals(contraction.succ, DEFAULT_MAX_IDEALS); lap("count ideals")
print(json.dumps(laps))
"""


class ChildFailed(RuntimeError):
    """A child process of the benchmark failed; the message says which, in what tree, and how."""


def failed(what: str, tree: Path, code: int, stderr: str) -> ChildFailed:
    """The failure of the child ``what`` run from ``tree`` with exit status ``code`` and standard error ``stderr``."""
    said = stderr.strip().splitlines()
    return ChildFailed(f"{what} in the tree {tree} exited with status {code}" + (f": {said[-1]}" if said else ""))


def run_process(cmd: list[str], tree: Path) -> dict:
    """Wall time, CPU time and peak memory of one child process run from ``tree``. Exit status 1 is
    ``solve``'s answer that there is no plan, but also Python's on an uncaught exception: it counts
    only from ``solve`` and without a traceback; every other nonzero status raises :class:`ChildFailed`."""
    child = run_child(cmd, tree, dict(os.environ, PYTHONPATH=str(tree)))
    no_plan = child.exit == 1 and "solve" in cmd and "Traceback (most recent call last)" not in child.stderr
    if child.exit != 0 and not no_plan:
        raise failed(" ".join(["placement", *cmd[3:4]]), tree, child.exit, child.stderr)
    return {"wall_s": child.wall_s, "cpu_s": child.cpu_s, "peak_mib": child.peak_mib}


def steps(path: Path, tree: Path) -> dict:
    """Seconds of each step of ``placement info`` on ``path``, timed in a child process run from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", STEPS, str(path)], capture_output=True, text=True, cwd=tree,
                         env=env)
    if out.returncode != 0:
        raise failed("the steps of placement info", tree, out.returncode, out.stderr)
    return json.loads(out.stdout)


def medians(runs: list[dict]) -> dict:
    """The median of every field of ``runs``, as ``<field>_median``."""
    return {f"{key}_median": statistics.median(r[key] for r in runs) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=positive_int, default=3, help="runs per median (default 3)")
    parser.add_argument("--baseline", type=Path, help="a source tree to compare with (same session)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "reading.json")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    if args.baseline and not (args.baseline / "placement" / "__init__.py").is_file():
        what = "holds no placement package" if args.baseline.is_dir() else "is not a folder"
        return refuse(f"--baseline {args.baseline} {what} (give a source tree, e.g. from git archive)")
    trees = {"current": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    print(f"machine: {machine()}\n")
    rows, step_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, make in SHAPES.items():
            paths[name] = Path(tmp) / f"{name}.json"
            paths[name].write_text(json.dumps(make()))
        header = f"{'command':30} {'tree':9} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9} {'load':>5}"
        print(header)
        print("-" * len(header))
        for command, shape in COMMANDS:
            cmd = [sys.executable, "-m", "placement", command, str(paths[shape])] + (["--quiet"] if command == "solve" else [])
            for tree in trees.values():
                run_process(cmd, tree)   # compiles and caches the kernels of this tree
            runs: dict[str, list[dict]] = {label: [] for label in trees}
            for _ in range(args.repeat):   # interleaved: both trees see the same load
                for label, tree in trees.items():
                    runs[label].append(run_process(cmd, tree))
            for label in trees:
                row = {"command": f"{command} {shape}", "tree": label, **medians(runs[label]), "runs": runs[label],
                       "load_average": os.getloadavg()[0]}
                rows.append(row)
                print(f"{row['command']:30} {label:9} {row['wall_s_median']:>7.2f} {row['cpu_s_median']:>7.2f} "
                      f"{row['peak_mib_median']:>9.0f} {row['load_average']:>5.2f}", flush=True)
        print("\nsteps of `placement info` on chain-200000 (medians, seconds)")
        per_tree: dict[str, list[dict]] = {label: [] for label in trees}
        for _ in range(args.repeat):
            for label, tree in trees.items():
                per_tree[label].append(steps(paths["chain-200000"], tree))
        names = list(per_tree["current"][0])
        print(f"{'step':18} " + " ".join(f"{label:>9}" for label in trees))
        for name in names:
            row = {"step": name, **{label: statistics.median(r[name] for r in per_tree[label]) for label in trees}}
            step_rows.append(row)
            print(f"{name:18} " + " ".join(f"{row[label]:>9.3f}" for label in trees))
    ratios = []
    if args.baseline:
        print("\nbaseline / current (medians)")
        for current, base in zip([r for r in rows if r["tree"] == "current"],
                                 [r for r in rows if r["tree"] == "baseline"]):
            ratio = {"command": current["command"],
                     "wall": base["wall_s_median"] / current["wall_s_median"],
                     "cpu": base["cpu_s_median"] / current["cpu_s_median"],
                     "peak": base["peak_mib_median"] / current["peak_mib_median"]}
            ratios.append(ratio)
            print(f"{ratio['command']:30} wall {ratio['wall']:.2f}x  cpu {ratio['cpu']:.2f}x  peak memory {ratio['peak']:.2f}x")
    _write(args.json, {**machine(), "baseline": str(args.baseline) if args.baseline else None, "repeat": args.repeat,
                       "rows": rows, "info_steps": step_rows, "ratios": ratios})
    return 0


def cli(argv: list[str] | None = None) -> int:
    """:func:`main`, with a child's failure said in one line: exit status 1, nothing written."""
    try:
        return main(argv)
    except ChildFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    exit_with(cli)
