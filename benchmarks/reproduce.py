"""Reproduce the optimality comparisons of Tarnawski et al.: exact methods and every baseline, every instance.

    .venv/bin/python benchmarks/reproduce.py [--instances ../shared/tarnawski] [--out results/reproduce]
                                             [--time-limit 60] [--heuristic-time-limit 60] [--restarts 10]

For every instance under ``INSTANCES/throughput-inputs`` (throughput objective)
and ``INSTANCES/latency-inputs`` (latency objective) it runs, each in a fresh
process with a hard timeout:

* throughput: the DP (the optimum of contiguity ``stages``, proven); the MILP
  for contiguity ``sets`` and ``none`` (warm-started from the best plan found so
  far that belongs to the class); the baselines pipedream, greedy, local-search,
  partition, single, and expert where a split is published
  (``INSTANCES/human-experts/<name>_expert.json`` for the layer graphs);
* latency: the baselines latency-greedy, latency-dp-split and latency-chain, and the
  latency MILP (from its own start: the best of the latency baselines and the module-chain plan,
  with colour classes moved to the CPUs where that helps); the lower bound of the instance (the
  largest of the critical path, the path bound of ``placement.problem.path_bound`` and, with one
  call per accelerator, the critical-chain bound of ``placement.problem.chain_bound``).

A method that is not available (the MILP before it supports a class or the
latency objective, a missing optional dependency) is reported as such, never
as a crash. Every plan is written to a file, read back, and judged by the
independent evaluators: ``placement verify`` for throughput (its exit status is
recorded), :func:`placement.verification.latency.evaluate_latency` for latency; the
values in the tables are the evaluators', not the solvers'. The script then
checks that no plan beats a proven optimum or a proven bound of its contiguity
class and exits with status 1 if one does.

Outputs in ``OUT``: ``throughput.md``, ``latency.md`` (tables: values, ratios to
the optimum, plan classes, runtimes, flagged plans, checks), ``results.json``
(every run, and the machine under ``settings``), ``throughput.png`` (each method's
max-load relative to the optimum, per instance; needs matplotlib, the ``plot`` extra)
and ``plans/`` (every plan). A run's instances replace those of ``results.json`` of the same
objective and name, and the file's others are kept, each with the settings of the run that made it
(its ``run``): a run of some instances (``--only``, ``--filter``) updates theirs, and the tables show
every instance the file holds. ``partial.json`` holds the runs done so far while a run goes on (what is
left of a run that was stopped); ``results.json`` is written when the run ends.
Progress goes to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.jsonfile import strict_json
from placement.report.table import percent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_and_counted, positive_float, positive_int,  # noqa: E402
                    refuse, said_merge)
from placement.cli.options import non_negative_int  # noqa: E402
from placement.parameters import MAX_SEED  # noqa: E402


def seed_value(text: str) -> int:
    """An argparse type: a seed the methods take, 0 to ``MAX_SEED``."""
    value = non_negative_int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SEED}, not {value}")
    return value

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INSTANCES = ROOT.parent / "shared" / "tarnawski"
DEFAULT_OUT = ROOT / "results" / "reproduce"
EXPERT_GRAPHS = "LayerGraphs"     # the published expert splits are for the layer graphs
GRACE_S = 60.0                    # hard timeout of a MILP run: its time limit plus this
HARD_LIMIT_S = 600.0              # hard timeout of every other run
TOLERANCE = 1e-9                  # relative, for "does not beat" checks and value agreement

THROUGHPUT_COLUMNS = ("dp", "milp-sets", "milp-none", "pipedream", "greedy", "local-search", "partition",
                      "expert", "single")
THROUGHPUT_BASELINES = ("pipedream", "greedy", "local-search", "partition", "expert", "single")
LATENCY_COLUMNS = ("milp-latency", "latency-greedy", "latency-dp-split", "latency-chain")
LATENCY_BASELINES = ("latency-greedy", "latency-dp-split", "latency-chain")
CLASS_RANK = {"stages": 0, "sets": 1, "none": 2}


# ----------------------------------------------------------------------------------------
# one run, in a child process
# ----------------------------------------------------------------------------------------

def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Solve with the library, write the plan, read it back, verify it again with the CLI; the run's record."""
    import placement
    from placement.errors import LimitExceededError, PlacementError, SolverUnavailableError
    from placement.io.plans import read_plan
    from placement.solvers.registry import METHODS

    problem = placement.load(spec["instance"])
    method, name = spec["method"], spec["registry_method"]
    options = {k: v for k, v in {**spec["options"], "objective": spec["objective"]}.items()
               if k in METHODS[name].options}
    if spec.get("warm_start"):
        options["warm_start"] = spec["warm_start"]
    try:
        result = placement.solve(problem, method=name, **options)
    except SolverUnavailableError as exc:
        return {"status": "unavailable", "message": str(exc)}
    except LimitExceededError as exc:
        return {"status": "limit", "message": str(exc)}
    except PlacementError as exc:
        return {"status": "error", "message": str(exc)}
    record: dict[str, Any] = {
        "status": str(result.status), "claimed": result.stats.get("claimed_value", result.value),
        "bound": result.bound, "runtime_s": result.runtime_s, "message": result.message,
        "stats": dict(result.stats), "objective_kind": result.objective, "contiguity": result.contiguity,
    }
    objective = spec["objective"]
    if objective == "throughput" and method.startswith("milp") and result.contiguity != options["contiguity"]:
        record.update(status="unavailable",
                      message=f"{method} solved contiguity {result.contiguity}, not {options['contiguity']}")
        return record
    if not result.plan:
        return record
    plan_file = Path(spec["plan_out"])
    plan_file.write_text(json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n")
    plan = read_plan(plan_file)
    if objective == "latency":
        from placement.verification.evaluate import evaluate
        from placement.verification.latency import evaluate_latency

        lev = evaluate_latency(problem, plan)
        record.update(value=lev.latency, valid=lev.valid, violations=list(lev.violations[:3]),
                      n_violations=len(lev.violations), plan_class=evaluate(problem, plan, "none").finest_class,
                      calls=len(lev.calls))
    else:
        from placement.cli import main as cli
        from placement.verification.evaluate import evaluate

        ev = evaluate(problem, plan, "none")
        checked = options.get("contiguity", ev.finest_class) if method.startswith("milp") else ev.finest_class
        with contextlib.redirect_stdout(io.StringIO()):
            verify_exit = cli(["verify", spec["instance"], str(plan_file), "--contiguity", checked])
        record.update(value=ev.max_load, valid=ev.valid and verify_exit == 0, violations=list(ev.violations[:3]),
                      n_violations=len(ev.violations), plan_class=ev.finest_class, verify_exit=verify_exit,
                      verified_contiguity=checked)
    value = record["value"]
    record["agrees"] = (math.isfinite(value) and abs(result.value - value) <= TOLERANCE * max(1.0, abs(value)))
    record["plan_file"] = str(plan_file)
    return record


def _worker_main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        record = worker(spec)
    except Exception as exc:  # reported in the tables, never hidden
        record = {"status": "crash", "message": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=4)}
    Path(spec["result"]).write_text(json.dumps(strict_json(record)))
    return 0


# ----------------------------------------------------------------------------------------
# the parent: runs, progress, checks, tables
# ----------------------------------------------------------------------------------------

@dataclass
class Run:
    objective: str
    instance: Path
    label: str                        # e.g. LayerGraphs/bert24_inference
    method: str                       # column name
    registry_method: str
    options: dict[str, Any]
    hard_limit: float
    warm_class: str | None = None     # warm start from the best plan of this class or finer
    record: dict[str, Any] = field(default_factory=dict)


class Progress:
    """A one-line progress bar on standard error (a new line per run when stderr is not a terminal)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.start = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def show(self, text: str) -> None:
        width = 24
        filled = int(width * self.done / max(1, self.total))
        elapsed = time.perf_counter() - self.start
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{int(elapsed // 60):02d}:{int(elapsed % 60):02d} {text}")
        if self.tty:
            print("\r" + line[:150].ljust(150), end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def execute(run: Run, plans_dir: Path, tmp: Path, warm_start: Path | None) -> dict[str, Any]:
    stem = f"{run.objective}-{run.label.replace('/', '-')}-{run.method}"
    # absolute paths: the worker runs from the repository root, and --out may be relative to another folder
    spec = {"instance": str(run.instance), "method": run.method, "registry_method": run.registry_method,
            "options": run.options, "objective": run.objective,
            "warm_start": str(warm_start.resolve()) if warm_start else None,
            "plan_out": str((plans_dir / f"{stem}.json").resolve()),
            "result": str((tmp / f"{stem}.result.json").resolve())}
    spec_path = tmp / f"{stem}.spec.json"
    spec_path.write_text(json.dumps(spec))
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(spec_path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=run.hard_limit)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"killed after {run.hard_limit:.0f} s",
                "wall_s": time.perf_counter() - start}
    wall = time.perf_counter() - start
    result = Path(spec["result"])
    if not result.exists():
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"status": "crash", "message": tail[0], "wall_s": wall}
    record = json.loads(result.read_text())
    record["wall_s"] = wall
    if warm_start:
        record["warm_start"] = str(warm_start)
    return record


def plan_runs(args: argparse.Namespace) -> list[Run]:
    runs: list[Run] = []
    base = args.instances.resolve()   # every run happens in a worker started from the repository root
    throughput_dir = base / "throughput-inputs"
    latency_dir = base / "latency-inputs"
    experts = base / "human-experts"
    heuristic = {"time_limit": args.heuristic_time_limit, "restarts": args.restarts, "seed": args.seed}
    milp_hard = args.time_limit + GRACE_S
    if throughput_dir.is_dir() and args.only in (None, "throughput"):
        for path in sorted(throughput_dir.rglob("*.json")):
            label = f"{path.parent.name}/{path.stem}"
            if args.filter and args.filter not in label:
                continue
            runs.append(Run("throughput", path, label, "dp", "dp", {}, HARD_LIMIT_S))
            for method in THROUGHPUT_BASELINES:
                options: dict[str, Any] = dict(heuristic)
                if method == "expert":
                    split = experts / f"{path.stem}_expert.json"
                    if path.parent.name != EXPERT_GRAPHS or not split.exists():
                        continue
                    options["split"] = str(split)
                runs.append(Run("throughput", path, label, method, method, options, HARD_LIMIT_S))
            for contiguity in ("sets", "none"):
                options = {"time_limit": args.time_limit, "contiguity": contiguity, "objective": "throughput"}
                runs.append(Run("throughput", path, label, f"milp-{contiguity}", "milp", options, milp_hard,
                                warm_class=contiguity))
    if latency_dir.is_dir() and args.only in (None, "latency"):
        for path in sorted(latency_dir.rglob("*.json")):
            label = f"{path.parent.name}/{path.stem}"
            if args.filter and args.filter not in label:
                continue
            for method in LATENCY_BASELINES:
                runs.append(Run("latency", path, label, method, method, dict(heuristic), HARD_LIMIT_S))
            options = {"time_limit": args.time_limit, "calls": args.latency_calls, "objective": "latency"}
            # its own start: the latency baselines, the module-chain plan (and its bound), the class moves to CPUs
            runs.append(Run("latency", path, label, "milp-latency", "milp", options, milp_hard))
    return runs


def best_plan(records: dict[str, dict[str, Any]], max_class: str) -> Path | None:
    """The plan file of the lowest verified value among valid plans of class ``max_class`` or finer."""
    best, best_value = None, math.inf
    for rec in records.values():
        if rec.get("valid") and rec.get("plan_file") and CLASS_RANK[rec["plan_class"]] <= CLASS_RANK[max_class]:
            if rec["value"] < best_value:
                best, best_value = Path(rec["plan_file"]), rec["value"]
    return best


# ----------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------

def _proven(rec: dict[str, Any] | None) -> float | None:
    """The proven optimum of a run (status optimal, valid plan, values agree), else None."""
    if rec and rec.get("status") == "optimal" and rec.get("valid") and rec.get("agrees"):
        return rec["value"]
    return None


def _bound(rec: dict[str, Any] | None) -> float | None:
    """A proven lower bound from a run: its optimum, or the bound it reported with a plan or a limit stop."""
    if rec is None:
        return None
    opt = _proven(rec)
    if opt is not None:
        return opt
    if rec.get("status") in ("feasible", "no_solution") and rec.get("bound") is not None and rec["bound"] > 0:
        return rec["bound"]
    return None


def throughput_checks(records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every valid plan against the proven optima and bounds of its class and the coarser ones."""
    lower: dict[str, list[tuple[str, float]]] = {"stages": [], "sets": [], "none": []}
    dp = _proven(records.get("dp"))
    if dp is not None:
        lower["stages"].append(("DP optimum (stages)", dp))
    for cls in ("sets", "none"):
        rec = records.get(f"milp-{cls}")
        value = _bound(rec)
        if value is not None:
            what = "optimum" if _proven(rec) is not None else "bound"
            lower[cls].append((f"MILP {cls} {what}", value))
    checks = []
    for method, rec in records.items():
        if not rec.get("valid"):
            continue
        cls = rec["plan_class"]
        applicable = [item for c, items in lower.items() if CLASS_RANK[c] >= CLASS_RANK[cls] for item in items]
        for what, value in applicable:
            if method == "dp" and what.startswith("DP"):
                continue
            ok = rec["value"] >= value * (1 - TOLERANCE) - 1e-12
            checks.append({"method": method, "class": cls, "value": rec["value"], "against": what,
                           "reference": value, "ok": ok})
    return checks


def latency_checks(records: dict[str, dict[str, Any]], bound: float) -> list[dict[str, Any]]:
    lower = [("lower bound", bound)]
    milp = _bound(records.get("milp-latency"))
    if milp is not None:
        what = "optimum" if _proven(records.get("milp-latency")) is not None else "bound"
        lower.append((f"MILP latency {what}", milp))
    checks = []
    for method, rec in records.items():
        if not rec.get("valid"):
            continue
        for what, value in lower:
            if method == "milp-latency" and what.startswith("MILP"):
                continue
            ok = rec["value"] >= value * (1 - TOLERANCE) - 1e-12
            checks.append({"method": method, "class": rec.get("plan_class"), "value": rec["value"],
                           "against": what, "reference": value, "ok": ok})
    return checks


# ----------------------------------------------------------------------------------------
# tables and plot
# ----------------------------------------------------------------------------------------

def _num(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.3f}"


def _status_cell(rec: dict[str, Any] | None) -> str:
    if not rec:
        return "not run"
    status = rec.get("status")
    if "value" in rec and not rec.get("valid"):
        return f"✗ {_num(rec['value'])}²"
    if status in ("unavailable", "timeout", "crash", "error", "limit"):
        return {"unavailable": "unavailable", "timeout": "timeout", "crash": "crash", "error": "error",
                "limit": "over limit"}[status] + "¹"
    if "value" not in rec:
        return f"{status}¹"
    text = _num(rec["value"])
    if status == "optimal":
        return f"{text} optimal"
    if status == "feasible" and rec.get("bound"):
        gap = (rec["value"] - rec["bound"]) / rec["value"] if rec["value"] else 0.0
        return f"{text} (gap {percent(gap)})"
    return text


def _baseline_cell(rec: dict[str, Any] | None, reference: float | None) -> str:
    cell = _status_cell(rec)
    if not rec or "value" not in rec or not rec.get("valid"):
        return cell
    ratio = f" ×{rec['value'] / reference:.3f}" if reference else ""
    return f"{_num(rec['value'])}{ratio} {rec['plan_class']}"


def _notes(results: list[dict[str, Any]], columns: tuple[str, ...]) -> list[str]:
    lines = []
    for inst in results:
        for method in columns:
            rec = inst["runs"].get(method)
            if not rec:
                continue
            if "value" in rec and not rec.get("valid"):
                lines.append(f"* ² {inst['instance']} / {method}: {rec.get('n_violations')} violation(s), first: "
                             f"{(rec.get('violations') or ['?'])[0]}")
            elif "value" not in rec:
                lines.append(f"* ¹ {inst['instance']} / {method}: {rec.get('status')}: {rec.get('message', '')}")
    return lines


def _runtime_table(results: list[dict[str, Any]], columns: tuple[str, ...]) -> list[str]:
    lines = ["| instance | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for inst in results:
        cells = []
        for method in columns:
            rec = inst["runs"].get(method)
            cells.append("—" if not rec or rec.get("runtime_s") is None else f"{rec['runtime_s']:.2f}")
        lines.append(f"| {inst['instance']} | " + " | ".join(cells) + " |")
    return lines


def _check_lines(results: list[dict[str, Any]]) -> tuple[list[str], int]:
    total = sum(len(inst["checks"]) for inst in results)
    failed = [(inst["instance"], c) for inst in results for c in inst["checks"] if not c["ok"]]
    if not failed:
        return [f"No plan beats a proven optimum or bound of its class: {total} comparisons, all hold."], 0
    lines = [f"**{len(failed)} of {total} comparisons FAIL** (a plan below a proven optimum or bound of its class):"]
    lines += [f"* {name} / {c['method']} ({c['class']}): {c['value']!r} < {c['against']} {c['reference']!r}"
              for name, c in failed]
    return lines, len(failed)


def _header(args: argparse.Namespace, title: str, results: list[dict[str, Any]]) -> list[str]:
    """The title, the settings of the run (``args``), and the instances of ``results`` that an earlier run made
    with other settings, with theirs."""
    lines = [f"# {title}", "",
             f"Produced by `benchmarks/reproduce.py` on {args.date} "
             f"({args.cores} cores, Python {args.python}); per-run time limits: "
             f"MILP {args.time_limit:g} s (CP-SAT, one thread; latency MILP with up to {args.latency_calls} "
             f"call{'s' if args.latency_calls != 1 else ''} per accelerator), local search "
             f"{args.heuristic_time_limit:g} s ({args.restarts} restarts, seed {args.seed}).", ""]
    other = [f"* {inst['instance']}: {_settings_text(made)}" for inst in results
             if (made := (inst.get("run") or {}).get("settings") or {})
             and any(made.get(k) != getattr(args, k, None) for k in HEADER_SETTINGS)]
    return lines + (["Rows kept from earlier runs with other settings:", "", *other, ""] if other else [])


def _settings_text(made: dict[str, Any]) -> str:
    """The :data:`HEADER_SETTINGS` of an earlier run's recorded settings ``made``, as a table's note says them."""
    def shown(key: str) -> str:
        value = made.get(key)
        return f"{value:g}" if isinstance(value, (int, float)) else str(value)

    return (f"{shown('date')}, MILP {shown('time_limit')} s, local search {shown('heuristic_time_limit')} s "
            f"({shown('restarts')} restarts, seed {shown('seed')}), latency MILP with up to {shown('latency_calls')} "
            f"call{'s' if made.get('latency_calls') != 1 else ''} per accelerator")


def throughput_markdown(args: argparse.Namespace, results: list[dict[str, Any]]) -> tuple[str, int]:
    lines = _header(args, "Throughput: max-load per sample on the published instances", results)
    lines += ["Values are max-loads (ms per sample) as the independent evaluator computes them. "
              "`dp` is the optimum of contiguity `stages` (proven). Baseline cells: value, ratio to that optimum, "
              "and the finest contiguity class of the plan (`stages` ⊆ `sets` ⊆ `none`); plans of class `sets` or "
              "`none` can beat the `stages` optimum, since those classes allow more plans, but never the proven "
              "optimum of their own class. ✗: the evaluator rejects the plan.", ""]
    columns = THROUGHPUT_COLUMNS
    lines.append("| instance | " + " | ".join(columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    for inst in results:
        runs = inst["runs"]
        reference = _proven(runs.get("dp"))
        cells = [_status_cell(runs.get(m)) if m.startswith(("dp", "milp")) else _baseline_cell(runs.get(m), reference)
                 if m in runs else "—" for m in columns]
        lines.append(f"| {inst['instance']} | " + " | ".join(cells) + " |")
    lines += ["", "Runtimes (s, as each method reports its own solve time):", ""]
    lines += _runtime_table(results, columns)
    below = [(inst["instance"], m, rec["value"], _proven(inst["runs"].get("dp")), rec["plan_class"])
             for inst in results for m, rec in inst["runs"].items()
             if m in THROUGHPUT_BASELINES and rec.get("valid") and _proven(inst["runs"].get("dp"))
             and rec["value"] < _proven(inst["runs"].get("dp")) * (1 - TOLERANCE)]
    if below:
        lines += ["", "Baseline plans below the `stages` optimum (a plan that is not a pipeline can balance the "
                  "load better where transfers are cheap; the checks below compare them with the optima and "
                  "bounds of their own class):", ""]
        lines += [f"* {name} / {method} ({cls}): {value:.6f} < {opt:.6f} (×{value / opt:.4f})"
                  for name, method, value, opt, cls in below]
    notes = _notes(results, columns)
    if notes:
        lines += ["", "Runs without a value or with a rejected plan:", ""] + notes
    check_lines, failed = _check_lines(results)
    lines += ["", "Checks:", ""] + check_lines
    return "\n".join(lines) + "\n", failed


def latency_markdown(args: argparse.Namespace, results: list[dict[str, Any]]) -> tuple[str, int]:
    lines = _header(args, "Latency: one sample through the published inference graphs", results)
    lines += ["Values are latencies (ms) as the independent latency evaluator computes them. `milp-latency` is the "
              "latency MILP (`optimal` when proven, else its best plan and gap at the time limit); `lower bound` is "
              "the largest of the longest path with every node at its cheapest time, the path bound (along a "
              "path every call is one segment holding every node between its ends, and segments run in turn) and, "
              "with one call per accelerator, the critical-chain bound (the least sum of the calls and CPU nodes "
              "that run one after another, what runs beside them free). Baseline "
              "cells: value, ratio to the MILP's plan (to the optimum where that is proven), and the contiguity "
              "class of the plan's device sets.", ""]
    columns = ("milp-latency", "lower bound") + LATENCY_BASELINES
    lines.append("| instance | " + " | ".join(columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    for inst in results:
        runs = inst["runs"]
        milp = runs.get("milp-latency") or {}
        reference = milp["value"] if milp.get("valid") and milp.get("agrees") else None
        cells = [_status_cell(runs.get("milp-latency")), _num(inst.get("lower_bound"))]
        cells += [_baseline_cell(runs.get(m), reference) for m in LATENCY_BASELINES]
        lines.append(f"| {inst['instance']} | " + " | ".join(cells) + " |")
    lines += ["", "Runtimes (s):", ""]
    lines += _runtime_table(results, LATENCY_COLUMNS)
    notes = _notes(results, LATENCY_COLUMNS)
    if notes:
        lines += ["", "Runs without a value or with a rejected plan:", ""] + notes
    check_lines, failed = _check_lines(results)
    lines += ["", "Checks:", ""] + check_lines
    return "\n".join(lines) + "\n", failed


def plot_throughput(results: list[dict[str, Any]], path: Path) -> str:
    """Each method's max-load relative to the DP optimum, per instance (log scale); returns a note."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'placement[plot]')"
    names = [inst["instance"] for inst in results]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.6 * len(names) + 3), 5.5))
    markers = "os^vD<>Xp*"
    methods = [m for m in THROUGHPUT_COLUMNS if m != "dp"]
    ratios: list[float] = []
    rejected_shown = False
    for k, method in enumerate(methods):
        valid_x, valid_y, bad_x, bad_y = [], [], [], []
        for i, inst in enumerate(results):
            rec, opt = inst["runs"].get(method), _proven(inst["runs"].get("dp"))
            if not rec or "value" not in rec or not opt or not math.isfinite(rec["value"]):
                continue
            x = i + (k - (len(methods) - 1) / 2) * 0.08
            (valid_x if rec.get("valid") else bad_x).append(x)
            (valid_y if rec.get("valid") else bad_y).append(rec["value"] / opt)
        ratios += valid_y + bad_y
        marker = markers[k % len(markers)]
        ax.scatter(valid_x, valid_y, marker=marker, label=method, zorder=3)
        if bad_x:
            ax.scatter(bad_x, bad_y, marker=marker, facecolors="none", edgecolors="red", zorder=3,
                       label=None if rejected_shown else "plan rejected by the evaluator")
            rejected_shown = True
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_yscale("log")
    ticks = [t for t in (0.5, 0.6, 0.7, 0.8, 1, 1.25, 1.5, 2, 3, 4, 6, 8, 10, 15, 20)
             if min(ratios, default=1) / 1.1 <= t <= max(ratios, default=1) * 1.1]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_yticklabels([f"{t:g}" for t in ticks])
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("max-load / optimum of contiguity stages (DP)")
    ax.set_title("Max-load of each method relative to the proven stages optimum (below 1: not a pipeline)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot: {path}"


# ----------------------------------------------------------------------------------------

#: the options of a run, which --report-only takes from the recorded settings
RUN_SETTINGS = ("instances", "time_limit", "heuristic_time_limit", "restarts", "seed", "latency_calls", "only",
                "filter")
#: the settings a table's header states, which an instance made with others is named for
HEADER_SETTINGS = ("date", "time_limit", "heuristic_time_limit", "restarts", "seed", "latency_calls")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, default=DEFAULT_INSTANCES,
                        help="folder with throughput-inputs/, latency-inputs/, human-experts/ "
                             "(default ../shared/tarnawski)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder (default results/reproduce)")
    parser.add_argument("--time-limit", type=positive_float, default=60.0,
                        help="MILP time limit per run, s (default 60)")
    parser.add_argument("--heuristic-time-limit", type=positive_float, default=60.0,
                        help="time limit per run of local search and latency-chain, s (default 60)")
    parser.add_argument("--restarts", type=positive_int, default=10, help="local search restarts (default 10)")
    parser.add_argument("--seed", type=seed_value, default=0,
                        help=f"seed of local search and partition, 0 to {MAX_SEED} (default 0)")
    parser.add_argument("--latency-calls", type=positive_int, default=1,
                        help="calls per accelerator the latency MILP may use (default 1)")
    parser.add_argument("--only", choices=["throughput", "latency"], help="run one objective only")
    parser.add_argument("--filter", help="only instances whose name contains this text")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: rebuild the tables and plot from OUT/results.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker_main(args.worker)
    if args.report_only:   # the runs' own settings are in results.json; an option of a run would be ignored
        given = given_options(parser, argv, RUN_SETTINGS)
        if given:
            parser.error(f"{', '.join(given)}: --report-only runs nothing; it rebuilds the tables with the settings "
                         "recorded in OUT/results.json")
    if message := cannot_write({}, {"--out": args.out}):
        return refuse(message)
    args.date, args.cores, args.python = datetime.date.today().isoformat(), os.cpu_count(), platform.python_version()
    if args.report_only:
        return report_only(args)
    args.machine = machine()
    if not args.instances.is_dir():
        return refuse(f"no instances: {args.instances} is not a folder (the published instances live in ../shared)")
    runs = plan_runs(args)
    if not runs:
        if args.filter and plan_runs(argparse.Namespace(**{**vars(args), "filter": None})):
            return refuse(f"no {args.only + ' ' if args.only else ''}instance matches --filter {args.filter}")
        return refuse(f"no throughput-inputs/ or latency-inputs/ instances under {args.instances}"
                      + (f" for --only {args.only}" if args.only else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    plans_dir = args.out / "plans"
    plans_dir.mkdir(exist_ok=True)
    progress = Progress(len(runs))
    by_instance: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    started = time.perf_counter()
    try:
        run_all(args, runs, plans_dir, progress, by_instance)
    except KeyboardInterrupt:   # Ctrl-C: one line that says where the results are, the status of an interrupt
        progress.close()
        print(f"error: interrupted after {progress.done} of {len(runs)} runs: {args.out / 'results.json'} is as it "
              f"was; the runs done so far are in {args.out / 'partial.json'}", file=sys.stderr)
        return 130
    total = time.perf_counter() - started

    from placement.io.tarnawski import read_instance
    from placement.problem.bounds import heuristic_bound

    throughput, latency = [], []
    for (objective, label), records in by_instance.items():
        entry: dict[str, Any] = {"instance": label, "runs": records}
        if objective == "throughput":
            throughput.append(entry)
        else:
            path = next(r.instance for r in runs if r.objective == "latency" and r.label == label)
            problem = read_instance(path)
            entry["lower_bound"] = heuristic_bound(problem, "latency", args.latency_calls)
            latency.append(entry)
    throughput, latency, said = merged_entries(args, throughput, latency)
    failed = write_reports(args, throughput, latency, total, len(runs))
    (args.out / "partial.json").unlink(missing_ok=True)
    print("\n".join(said))
    return failed


def given_options(parser: argparse.ArgumentParser, argv: list[str] | None, dests: tuple[str, ...]) -> list[str]:
    """The options of ``dests`` that ``argv`` gives, at their default value or not, each named by its first option
    string: argparse leaves an attribute the namespace already holds as it is unless the command line sets it."""
    unset = object()
    probe = parser.parse_args(argv, argparse.Namespace(**{dest: unset for dest in dests}))
    return [action.option_strings[0] for action in parser._actions
            if action.dest in dests and getattr(probe, action.dest) is not unset]


def run_all(args: argparse.Namespace, runs: list[Run], plans_dir: Path, progress: Progress,
            by_instance: dict[tuple[str, str], dict[str, dict[str, Any]]]) -> None:
    """Execute ``runs`` in turn, each warm-started from the best plan of its class so far, filling ``by_instance``
    (objective and instance to method to record) and writing the runs done so far to ``OUT/partial.json`` after
    each."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for run in runs:
            progress.show(f"{run.objective} {run.label} {run.method}")
            records = by_instance.setdefault((run.objective, run.label), {})
            warm = best_plan(records, run.warm_class) if run.warm_class else None
            run.record = execute(run, plans_dir, tmp, warm)
            records[run.method] = run.record
            progress.done += 1
            partial = {"partial": f"{progress.done} of {len(runs)} runs",
                       "runs": {f"{o} {name}": recs for (o, name), recs in by_instance.items()}}
            (args.out / "partial.json").write_text(json.dumps(strict_json(partial), indent=1))
        progress.show("done")
        progress.close()


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of a run as ``results.json`` records them: its options (paths as text), date and machine."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
            if k not in ("worker", "report_only")}


def merged_entries(args: argparse.Namespace, throughput: list[dict[str, Any]],
                   latency: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The entries of each objective after this run: those of ``OUT/results.json`` that the run's do not replace
    (the same instance), then the run's (:func:`common.merged_and_counted`), each with the settings of its run as
    its ``run``; and the lines that say, per objective, how many were kept and replaced."""
    path, here = args.out / "results.json", {"settings": run_settings(args)}
    merged, said = [], []
    for objective, entries in (("throughput", throughput), ("latency", latency)):
        held, kept, replaced = merged_and_counted(path, entries, ("instance",), here, objective)
        merged.append(held)
        said.append(said_merge(path, len(entries), kept, replaced, objective))
    return merged[0], merged[1], said


def write_reports(args: argparse.Namespace, throughput: list[dict[str, Any]], latency: list[dict[str, Any]],
                  total: float, n_runs: int) -> int:
    """Checks, tables, plot and results.json from the runs' records; exit status 1 if a check fails."""
    for entry in throughput:
        entry["checks"] = throughput_checks(entry["runs"])
    for entry in latency:
        entry["checks"] = latency_checks(entry["runs"], entry["lower_bound"])
    failed = 0
    outputs, texts = [], []
    if throughput:
        text, bad = throughput_markdown(args, throughput)
        failed += bad
        texts.append(text)
        (args.out / "throughput.md").write_text(text)
        outputs.append(str(args.out / "throughput.md"))
        if not args.no_plot:
            outputs.append(plot_throughput(throughput, args.out / "throughput.png"))
    if latency:
        text, bad = latency_markdown(args, latency)
        failed += bad
        texts.append(text)
        (args.out / "latency.md").write_text(text)
        outputs.append(str(args.out / "latency.md"))
    summary = {"settings": run_settings(args), "total_wall_s": total, "runs": n_runs, "throughput": throughput,
               "latency": latency, "failed_checks": failed}
    (args.out / "results.json").write_text(json.dumps(strict_json(summary), indent=1))
    outputs.append(str(args.out / "results.json"))
    print("\n".join(texts))
    made = (f"rebuilt from {n_runs} runs (made in {total / 60:.1f} min)" if getattr(args, "report_only", False)
            else f"{n_runs} runs in {total / 60:.1f} min")
    print(f"{made}; wrote " + ", ".join(outputs))
    return 1 if failed else 0


def summary_error(summary: Any) -> str | None:
    """What makes ``summary`` (a results.json document) no summary of a finished reproduction, or None."""
    if not isinstance(summary, dict):
        return f"a JSON {type(summary).__name__}, not an object"
    if "partial" in summary:
        return None   # said apart
    if not isinstance(summary.get("settings"), dict):
        return "no settings (an object)"
    if not isinstance(summary.get("total_wall_s"), (int, float)):
        return "no total_wall_s (a number)"
    for objective in ("throughput", "latency"):
        entries = summary.get(objective)
        if not isinstance(entries, list):
            return f"no {objective} (a list)"
        for k, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("instance"), str) \
                    or not isinstance(entry.get("runs"), dict) \
                    or not all(isinstance(record, dict) for record in entry["runs"].values()):
                return f"{objective}[{k}] is no object with an instance name and runs (an object of objects)"
            if objective == "latency" and not isinstance(entry.get("lower_bound", ""), (int, float, type(None))):
                return f"{objective}[{k}] has no lower_bound (a number, or null where not finite)"
    return None


def report_only(args: argparse.Namespace) -> int:
    """Rebuild the checks, tables and plot from OUT/results.json of a finished reproduction; the results.json it
    writes again keeps the settings the runs were made with (instances, parts, limits, machine)."""
    path = args.out / "results.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as exc:   # the OS's reason alone: the message names the path once
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"error: {path}: cannot read the results of a reproduction: {why}", file=sys.stderr)
        return 2
    if why := summary_error(summary):
        print(f"error: {path}: not the results of a reproduction: {why}", file=sys.stderr)
        return 2
    if "partial" in summary:
        print(f"error: {path} holds a reproduction that did not finish ({summary['partial']})", file=sys.stderr)
        return 2
    for key in (*RUN_SETTINGS, "date", "cores", "python", "machine"):
        if key in summary["settings"]:
            setattr(args, key, summary["settings"][key])
    return write_reports(args, summary["throughput"], summary["latency"], summary["total_wall_s"],
                         summary.get("runs", 0))


if __name__ == "__main__":
    exit_with(main)
