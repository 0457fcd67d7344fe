"""Time the DP: graph shapes at scale, start-up, and every published throughput instance; print tables, write JSON.

1. Shapes (generated here, seeded): a chain of 10,000 nodes (random times, 4 accelerators,
   1 CPU), a 700-node total order (an edge between every two nodes), a chain of 5,000 whose every node
   also feeds the last (each ideal's cut holds every node in it: cost must follow the pairs, not the
   cuts), a 1,000-block
   transformer, forward and backward (``placement.zoo.transformer``), and a random DAG of 20 nodes and
   12 edges (many ideals for its size, mostly incomparable). Per shape: ideals and pairs,
   the DP alone (``solve_dp`` in this process, median of ``--repeat`` runs after one run that
   compiles) and the whole ``placement solve`` process (median of ``--repeat``).
2. Start-up on BERT-24 inference: the first run of a fresh install (no bytecode cache, an empty
   numba cache: ``PYTHONPYCACHEPREFIX`` and ``NUMBA_CACHE_DIR`` point at new directories) and a
   warm run, medians of ``--repeat``; ``python -c "import numpy"`` alongside as the floor.
3. Every published instance (below).

Every child process may write and read bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped from its
environment): warm runs read a cache filled by an untimed run, as an installed package reads the
bytecode its installer compiled, instead of compiling every module again.

The machine is shared: the load average is printed with the tables and stored in the JSON.

Each published instance runs as ``placement solve INSTANCE --quiet --out PLAN`` in its own
process, so the wall time is the whole process (interpreter start, imports,
reading, solving, independent verification, writing) and the peak memory is
that process's maximum resident set size; the table holds the medians of ``--repeat``
runs (the largest peak), with the DP's proven bound and gap. The first run also fills the
compiled-kernel and bytecode caches; run with ``--warmup`` to keep that out of the table.

    python benchmarks/dp_throughput.py [--instances DIR] [--repeat 3] [--skip-published]
                                       [--json benchmarks/results/dp_throughput.json]

``--skip-published`` rewrites the shapes and the start-up in the JSON file and keeps its rows of the
published instances. Otherwise the run's rows replace the file's rows of the same instances (named by folder
and file, ``LayerGraphs/bert24_inference``) and the others stay, so a run over a folder of some of them keeps
the rest of the table; a row whose solve failed replaces none.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
DEFAULT_INSTANCES = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
#: the instance the start-up is timed on, under the instances folder
BERT24 = Path("LayerGraphs") / "bert24_inference.json"

from child import run_child  # noqa: E402
from common import cannot_write, exit_with, machine, merged_rows, positive_int, refuse  # noqa: E402


def line_document(n: int, all_pairs: bool, seed: int, fan_in: bool = False) -> dict:
    """Nodes 0..n-1 with random times (accelerator 1-10, CPU 10-100) and transfer costs; edges i -> i+1
    (a chain) or i -> j for all i < j (a total order); ``fan_in``: the chain and i -> n-1 for every i;
    4 accelerators and 1 CPU."""
    rng = random.Random(seed)
    nodes = [{"id": i, "supportedOnFpga": True, "fpgaLatency": rng.uniform(1, 10), "cpuLatency": rng.uniform(10, 100),
              "isBackwardNode": False, "size": 1} for i in range(n)]
    costs = [rng.uniform(0, 2) for _ in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)] if all_pairs else [(i, i + 1) for i in range(n - 1)]
    if fan_in:
        pairs += [(i, n - 1) for i in range(n - 2)]
    return {"maxSizePerFPGA": 1e9, "maxFPGAs": 4, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": i, "destId": j, "cost": costs[i]} for i, j in pairs]}


def transformer_document(blocks: int) -> dict:
    from dataclasses import replace

    from placement.zoo.transformer import TransformerConfig, bert_graph, to_tarnawski_json
    return to_tarnawski_json(bert_graph(replace(TransformerConfig(), layers=blocks), training=True))


def sparse_document(n: int, m: int, seed: int) -> dict:
    """Nodes 0..n-1 with random times (accelerator 1-9, CPU 5-40) and transfer costs; ``m`` distinct random
    edges i -> j (i < j); 4 accelerators and 1 CPU: few edges, so many ideals for few nodes."""
    rng = random.Random(seed)
    nodes = [{"id": i, "supportedOnFpga": True, "fpgaLatency": rng.randint(1, 9), "cpuLatency": rng.randint(5, 40),
              "isBackwardNode": False, "size": 1} for i in range(n)]
    costs = [rng.choice([0.5, 1, 2]) for _ in range(n)]
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < m:
        i, j = sorted(rng.sample(range(n), 2))
        pairs.add((i, j))
    return {"maxSizePerFPGA": 100, "maxFPGAs": 4, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": i, "destId": j, "cost": costs[i]} for i, j in sorted(pairs)]}


SHAPES = {
    "chain-10000": lambda: line_document(10_000, False, 1),
    "total-order-700": lambda: line_document(700, True, 2),
    "fan-in-5000": lambda: line_document(5_000, False, 3, fan_in=True),
    "transformer-1000-training": lambda: transformer_document(1000),
    "sparse-dag-20": lambda: sparse_document(20, 12, 4),
}


def bytecode_env(cache: Path, **extra: str) -> dict:
    """This process's environment for a child that keeps its bytecode under ``cache``."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache), **extra}


def timed_process(cmd: list[str], env: dict) -> float:
    """Wall seconds of one run of ``cmd`` in a child process (it must exit with status 0)."""
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def shape_rows(tmp: Path, repeat: int) -> list[dict]:
    """The DP alone and the whole solve process on each generated shape."""
    import placement
    from placement.solvers.dp import solve_dp

    rows = []
    print(f"{'shape':28} {'nodes':>6} {'edges':>7} {'ideals':>7} {'pairs examined':>15} {'DP s':>7} {'process s':>10}")
    for name, make in SHAPES.items():
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(make()))
        problem = placement.load(path)
        solve_dp(problem)   # compiles the kernels (cached on disk afterwards)
        times, solution = [], None
        for _ in range(repeat):
            solution = solve_dp(problem)
            times.append(solution.runtime_s)
        cmd = [sys.executable, "-m", "placement", "solve", str(path), "--quiet"]
        warm = bytecode_env(tmp / "pyc-warm")
        timed_process(cmd, warm)
        process = [timed_process(cmd, warm) for _ in range(repeat)]
        row = {"shape": name, "nodes": len(problem.nodes), "edges": len(problem.edges),
               "ideals": solution.stats["ideals"], "pairs_examined": solution.stats["pairs_examined"],
               "status": solution.status.value, "max_load": solution.objective,
               "dp_s_median": statistics.median(times), "dp_s": times,
               "process_s_median": statistics.median(process), "process_s": process}
        rows.append(row)
        print(f"{name:28} {row['nodes']:>6} {row['edges']:>7} {row['ideals']:>7,} {row['pairs_examined']:>15,} "
              f"{row['dp_s_median']:>7.3f} {row['process_s_median']:>10.3f}", flush=True)
    return rows


def startup_row(tmp: Path, repeat: int, bert24: Path) -> dict:
    """First run of a fresh install and a warm run of ``placement solve`` on BERT-24 inference (``bert24``)."""
    cmd = [sys.executable, "-m", "placement", "solve", str(bert24), "--quiet"]
    first = []
    for k in range(repeat):
        first.append(timed_process(cmd, bytecode_env(tmp / f"pyc{k}", NUMBA_CACHE_DIR=str(tmp / f"numba{k}"))))
    warm_env = bytecode_env(tmp / "pyc-warm")
    timed_process(cmd, warm_env)
    warm = [timed_process(cmd, warm_env) for _ in range(repeat)]
    floor = [timed_process([sys.executable, "-c", "import numpy"], warm_env) for _ in range(repeat)]
    row = {"instance": "LayerGraphs/bert24_inference", "first_run_s_median": statistics.median(first),
           "first_run_s": first, "warm_s_median": statistics.median(warm), "warm_s": warm,
           "python_import_numpy_s_median": statistics.median(floor)}
    print(f"\nstart-up, BERT-24 inference: first run {row['first_run_s_median']:.3f} s, warm "
          f"{row['warm_s_median']:.3f} s (python -c 'import numpy': {row['python_import_numpy_s_median']:.3f} s)")
    return row


def warm_compiled(instance: Path, env: dict) -> None:
    """Fill the compiled kernels' cache in ``env``, untimed: the DP of ``instance`` on its compiled kernels (the
    solve of :func:`run_one` stays on the interpreted ones where the instance is small, and the first
    instance that needs them then compiled them inside its timed run: 1.9 s where a warm one takes 0.5)."""
    code = ("import sys, placement; from placement.solvers.dp import solve_dp; "
            "solve_dp(placement.load(sys.argv[1]), compiled=True)")
    subprocess.run([sys.executable, "-c", code, str(instance)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=ROOT, env=env, check=True)


def run_one(instance: Path, out: Path, env: dict) -> dict:
    """Solve one instance in a child process with environment ``env``; return its row."""
    cmd = [sys.executable, "-m", "placement", "solve", str(instance), "--quiet", "--out", str(out)]
    child = run_child(cmd, ROOT, env)
    code = child.exit
    row = {"instance": f"{instance.parent.name}/{instance.stem}", "exit": code,
           "wall_s": round(child.wall_s, 3), "peak_mib": round(child.peak_mib, 1)}
    if code != 0:
        row["error"] = child.stderr.strip().splitlines()[-1] if child.stderr.strip() else f"exit {code}"
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
        "bound": plan.get("bound"),
        "gap": plan.get("gap"),
        "verified": plan.get("verified", {}).get("valid"),
        "solve_s": round(plan.get("runtime_s", 0.0), 3),
    })
    return row


def kept_startup(path: Path) -> dict | None:
    """The start-up row of the JSON file at ``path`` with the machine the file records as its ``run`` (where it has
    none yet), or None: what a run that cannot time the start-up keeps instead of writing it empty."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    row = document.get("startup") if isinstance(document, dict) else None
    if not isinstance(row, dict):
        return None
    return {**row, "run": row.get("run", {k: document[k] for k in machine() if k in document})}


def median_row(runs: list[dict]) -> dict:
    """One published instance's row from its runs: the last run's fields, with the median wall and
    solve times and the largest peak memory (every run's times under ``wall_s_each``)."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    row = dict(runs[-1])
    row.update({"wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
                "solve_s": round(statistics.median(r["solve_s"] for r in runs), 3),
                "peak_mib": max(r["peak_mib"] for r in runs),
                "wall_s_each": [r["wall_s"] for r in runs], "repeats": len(runs)})
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, default=DEFAULT_INSTANCES)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "dp_throughput.json")
    parser.add_argument("--warmup", action="store_true",
                        help="solve the first instance once, and load the compiled kernels, before timing")
    parser.add_argument("--repeat", type=positive_int, default=3, help="runs per median (default 3)")
    parser.add_argument("--skip-published", action="store_true", help="only the shapes and the start-up")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    files = [] if args.skip_published else sorted(args.instances.rglob("*.json"))
    if not args.skip_published and not files:
        where = "holds no instance files (*.json)" if args.instances.is_dir() else "is not a folder"
        return refuse(f"{args.instances} {where} (the published instances live in ../shared; "
                      "--skip-published times only the shapes and the start-up)")
    print(f"machine: {machine()}\n")
    # the solves run in children started from the repository root: they get the paths absolute
    files = [path.absolute() for path in files]
    with tempfile.TemporaryDirectory() as tmp:
        shapes = shape_rows(Path(tmp), args.repeat)
        bert24 = args.instances.absolute() / BERT24
        startup = startup_row(Path(tmp), args.repeat, bert24) if bert24.is_file() else None
        if startup is None:
            startup = kept_startup(args.json)
            print(f"\nstart-up not timed: no {bert24}, the instance it is timed on"
                  + ("; the file's start-up row stays" if startup else ""))
    document = {**machine(), "shapes": shapes, "startup": startup, "rows": []}
    if args.skip_published:   # the published instances' rows of an earlier run stay
        document["rows"] = merged_rows(args.json, [], (), machine())   # each with the machine it ran on
        _write(args.json, document)
        return 0
    print()
    rows = document["rows"]
    header = (f"{'instance':42} {'nodes':>6} {'ideals':>7} {'pairs examined':>15} {'max-load':>12} "
              f"{'bound':>12} {'gap':>6} {'status':>8} {'solve s':>8} {'wall s':>7} {'peak MiB':>9}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        env = bytecode_env(Path(tmp) / "pyc")
        if args.warmup and files:
            run_one(files[0], Path(tmp) / "warmup.json", env)
            warm_compiled(files[0], env)
        for k, instance in enumerate(files):
            row = median_row([run_one(instance, Path(tmp) / f"plan{k}.json", env) for _ in range(args.repeat)])
            rows.append(row)
            if "error" in row:
                print(f"{row['instance']:42} ERROR {row['error']}")
                continue
            print(f"{row['instance']:42} {row['nodes']:>6} {row['ideals']:>7,} {row['pairs_examined']:>15,} "
                  f"{row['max_load']:>12.6f} {row['bound']:>12.6f} {row['gap']:>6.2%} {row['status']:>8} "
                  f"{row['solve_s']:>8.2f} {row['wall_s']:>7.2f} {row['peak_mib']:>9.1f}", flush=True)
    print(f"\nmedians of {args.repeat} runs per published instance; machine: {machine()}")
    document["rows"] = merged_rows(args.json, rows, ("instance",), machine(), weak=lambda row: "error" in row)
    _write(args.json, document)
    return 0 if all("error" not in r and r.get("verified") for r in rows) else 1


def _write(path: Path, document: dict) -> None:
    """Write ``document`` as indented JSON to ``path`` (creating its folder) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    exit_with(main)
