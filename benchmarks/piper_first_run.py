"""First-run and warm time of ``placement solve`` on Piper instances, each in a fresh process.

A *cold* run starts with an empty numba cache (a fresh ``NUMBA_CACHE_DIR``: what a fresh install
has); the *warm* run that follows uses the cache the cold run left. Each setting is run ``--repeat``
times (default 3); the table gives the medians of wall-clock and CPU seconds (user + system of the
child: the machine may be shared, and CPU time is less sensitive to that), whether the kernels
were compiled, and, with ``--baseline COMMIT``, the same for the package as of that commit (its
``placement`` directory exported with ``git archive`` and put first on ``PYTHONPATH``), run
alternately in the same session, with the ratios new / baseline. A run that exits nonzero, of either
version, stops the benchmark with a line naming it, its exit status and its last line on standard error
(exit status 1, no table, nothing written): its time is no solve's. Exit status 1 from a solve that printed
its ``status`` line and no traceback (no plan fits: bert32a100 at 1 GiB on 8-64 devices is infeasible)
is a timed solve, as its status line in the table says.

Writes ``benchmarks/results/piper_first_run.json`` (the machine, every run and the medians); with ``--all``,
every run of ``benchmarks/piper.py`` (each instance at its own setting, at 1–64 devices, and
memory-bounded) instead of four, into ``benchmarks/results/piper_first_run_all.json``. The run's medians and
runs replace the file's of the same instance, devices and memory (of every version) and the file's others are
kept, each median with the machine of its run as ``run``, so a run of some instances (``--shared`` holding
only them) keeps the others'; the run says how many medians it kept and replaced.

    python benchmarks/piper_first_run.py [--baseline 9984622] [--repeat 3] [--shared ../shared/piper] [--all]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from placement.report.table import format_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_int, refuse,  # noqa: E402
                    said_merge)

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
#: (instance, devices, memory in bytes or None): the shared instances at their own setting, and a
#: memory-bounded one whose DP is too long for the plain-Python kernels
SETTINGS = (("bert32a100", 10, None), ("resnet", 10, None), ("gnmt", 10, None), ("bert32a100", 32, GIB))
COMPILING = "compiling the DP's kernels"
#: the fields that name a setting: a later run's medians and runs of it replace the results file's
KEY = ("instance", "devices", "memory")


def commit_error(commit: str) -> str | None:
    """Why ``commit`` cannot be exported (git's last word), or None when it names a commit of this repository."""
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], cwd=ROOT,
                              capture_output=True, text=True)
    except OSError as exc:
        return f"git cannot run: {exc}"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        return said[-1] if said else f"no commit {commit!r} in {ROOT}"
    return None


def export(commit: str, into: Path) -> Path:
    """The ``placement`` package as of ``commit``, unpacked under ``into``."""
    archive = subprocess.run(["git", "archive", commit, "placement"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def one_run(path: Path, devices: int, memory: int | None, cache: str, pythonpath: Path | None) -> dict:
    """One ``placement solve`` in a fresh process: wall and CPU seconds, compiled or not, the value line."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    if pythonpath is not None:   # ``python -m`` puts its working directory first on the path: run from there
        env["PYTHONPATH"] = str(pythonpath)
    # the path absolute: the child runs from the repository root or the baseline's tree
    command = [sys.executable, "-m", "placement", "solve", str(path.absolute()), "--devices", str(devices)]
    if memory is not None:
        command += ["--memory", str(memory)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=pythonpath or ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    lines = done.stdout.splitlines()
    value = next((line for line in lines if line.startswith("largest")), next((line for line in lines
                                                                                if line.startswith("status")), ""))
    check = "import placement, sys; print(placement.__file__)"
    where = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True,
                           cwd=pythonpath or ROOT).stdout.strip()
    said = done.stderr.strip().splitlines()
    return {"wall_s": wall, "cpu_s": cpu, "compiled": COMPILING in done.stderr, "exit": done.returncode,
            "value_line": value, "package": where, "last_error_line": said[-1] if said else "",
            "traceback": "Traceback (most recent call last)" in done.stderr}


def failure(run: dict) -> str | None:
    """Why the run ``run`` (a row of :func:`one_run`, with its version and setting) times no solve, or None."""
    if run["exit"] == 0 or run["exit"] == 1 and run["value_line"].startswith("status") and not run["traceback"]:
        return None
    memory = "" if run["memory"] is None else f", --memory {run['memory']}"
    said = f": {run['last_error_line']}" if run["last_error_line"] else ""
    version = "the working tree" if run["version"] == "new" else f"the {run['version']}"
    return (f"the {run['run']} run of {version} on {run['instance']} ({run['devices']} devices{memory}) "
            f"exited with status {run['exit']}{said}")


def main(argv: list[str] | None = None) -> int:
    """Time the cold and warm runs of every setting (and of the baseline); print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared" / "piper"))
    parser.add_argument("--baseline", metavar="COMMIT", help="also run the package as of COMMIT, alternately")
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), metavar="FOLDER",
                        help="the folder the JSON files are written to (default benchmarks/results)")
    parser.add_argument("--all", action="store_true", help="every run of benchmarks/piper.py")
    args = parser.parse_args(argv)
    if message := cannot_write({}, {"--out": args.out}):
        return refuse(message)
    if args.baseline:
        why = commit_error(args.baseline)
        if why:
            return refuse(f"--baseline {args.baseline}: {why}")
    shared = Path(args.shared)
    if args.all:
        from piper import runs as piper_runs   # benchmarks/piper.py, beside this script

        candidates = piper_runs(["bert32a100", "gnmt", "resnet"])
    else:
        candidates = SETTINGS
    settings = [s for s in candidates if (shared / f"{s[0]}.json").exists()]
    if not settings:
        return refuse(f"no Piper instances under {shared}")
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        versions = [("new", None)]
        if args.baseline:
            try:
                versions.append((f"baseline {args.baseline}", export(args.baseline, Path(scratch) / "baseline")))
            except subprocess.CalledProcessError as exc:
                said = exc.stderr.decode(errors="replace").strip().splitlines() if exc.stderr else []
                return refuse(f"--baseline {args.baseline}: cannot export placement/: "
                              + (said[-1] if said else f"git exit {exc.returncode}"))
        for name, devices, memory in settings:
            for repeat in range(args.repeat):
                for label, pythonpath in versions:
                    with tempfile.TemporaryDirectory(dir=scratch) as cache:
                        for kind in ("cold", "warm"):
                            run = one_run(shared / f"{name}.json", devices, memory, cache, pythonpath)
                            run.update(version=label, instance=name, devices=devices, memory=memory, run=kind,
                                       repeat=repeat)
                            runs.append(run)
                            print(json.dumps(run), file=sys.stderr, flush=True)
                            if why := failure(run):
                                print(f"error: {why}", file=sys.stderr)
                                return 1
    rows = [["instance", "devices", "memory", "version", "cold wall s", "cold cpu s", "compiled", "warm wall s",
             "warm cpu s", "cold cpu / baseline"]]
    medians = []
    for name, devices, memory in settings:
        per_version = {}
        for label, _ in versions:
            mine = [r for r in runs if (r["instance"], r["devices"], r["memory"], r["version"]) ==
                    (name, devices, memory, label)]
            pick = lambda kind, key: statistics.median(r[key] for r in mine if r["run"] == kind)  # noqa: E731
            entry = {"instance": name, "devices": devices, "memory": memory, "version": label,
                     "cold_wall_s": pick("cold", "wall_s"), "cold_cpu_s": pick("cold", "cpu_s"),
                     "warm_wall_s": pick("warm", "wall_s"), "warm_cpu_s": pick("warm", "cpu_s"),
                     "cold_compiled": sum(r["compiled"] for r in mine if r["run"] == "cold"),
                     "runs": len(mine) // 2, "exits": sorted({r["exit"] for r in mine})}
            per_version[label] = entry
            medians.append(entry)
        base = per_version.get(versions[-1][0]) if len(versions) > 1 else None
        for label, _ in versions:
            e = per_version[label]
            ratio = "" if base is None or label == versions[-1][0] else f"{e['cold_cpu_s'] / base['cold_cpu_s']:.2f}"
            rows.append([name, str(devices), "file" if memory is None else f"{int(memory) / GIB:g} GiB", label,
                         f"{e['cold_wall_s']:.2f}", f"{e['cold_cpu_s']:.2f}", f"{e['cold_compiled']}/{e['runs']}",
                         f"{e['warm_wall_s']:.2f}", f"{e['warm_cpu_s']:.2f}", ratio])
    print("\n".join(format_table(rows, left=(0, 2, 3))))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("piper_first_run_all.json" if args.all else "piper_first_run.json")
    here = {"machine": machine()}
    medians, kept, replaced = merged_and_counted(path, medians, KEY, here, "medians")
    runs = merged_and_counted(path, runs, KEY, {}, "runs")[0]   # a run's ``run`` says cold or warm
    path.write_text(json.dumps({**here, "medians": medians, "runs": runs}, indent=1) + "\n")
    print(said_merge(path, len(settings) * len(versions), kept, replaced, "medians"))
    return 0


if __name__ == "__main__":
    exit_with(main)
