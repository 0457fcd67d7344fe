"""Exact co-design against the WHAM-like heuristic, random search and a TPU-like design.

For five models — BERT-Base, GPT-2 small, ViT-Base/16, ResNet-50 and a GNMT-like LSTM, training
graphs with operator shapes, one node per layer (:mod:`placement.zoo.codesign_models`) — and
``k`` = 1, 2, 4, 8 chips, each chip within WHAM's area budget of 606.68 mm² and 280 W (TPUv2's
TDP, Jouppi et al., CACM 63(7), 2020), over the default grid of 10,000 designs, one design per
stage, maximising throughput:

* ``exact`` — :func:`placement.codesign.exact.solve_exact`, the proven optimum over the grid;
* ``wham`` — :func:`placement.codesign.baselines.wham` (top-5 designs per stage);
* ``random`` — :func:`placement.codesign.baselines.random_search`, 64 evaluations, seed 0;
* ``fixed`` — :func:`placement.codesign.baselines.fixed`, the TPUv2-like design on every chip.

Each method's search time is the median of ``--repeat`` runs in this process; throughputs are
model inputs (batches) per second by the template's cost model; a baseline's ratio is its
throughput over the optimum's. The table ends with WHAM's own reported figures (Adnan et al.,
arXiv:2404.14632, abstract: designs converge 31× faster than Spotlight's search and reach 12×
its throughput, and +12% throughput over a TPU architecture) beside the same comparisons here
(medians over the rows). Those figures are for WHAM's cost model, models and baselines, not
these: the side-by-side shows the direction, not a reproduction.

    python benchmarks/codesign.py [--repeat 3] [--models gnmt ...] [--chips 1 2 4 8] [--json PATH]

writes ``benchmarks/results/codesign.json`` (or ``--json``), with the machine: the run's rows replace the file's
of the same model and chip count and the file's others are kept, each with the machine of its run as ``run``,
so a run of some models or chip counts keeps the others'; the file's summary is that of all its rows, the
printed one this run's, and the run says how many rows it kept and replaced.

    python benchmarks/codesign.py --sweep [--workers 2] [--scheduler ADDRESS] [--out RECORDS] [--plots DIR]
                                          [--json PATH]

runs the design study of ``benchmarks/codesign-sweep.json`` (the five models × k = 1, 2, 4, 8 ×
three budgets × homogeneous or not: 120 configurations, each the exact method and the three
baselines) on a local Dask cluster (or the cluster at ``ADDRESS``), appending records to
``benchmarks/results/codesign-sweep.jsonl`` (``--out``; resumed when present), writing the plots to
``benchmarks/results/codesign-plots/`` (``--plots``) and a summary to ``benchmarks/results/codesign-sweep.json``
(``--json``). It is the same as ``placement codesign --sweep benchmarks/codesign-sweep.json --out ... --plots ...``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from placement.codesign import baselines  # noqa: E402
from placement.codesign.exact import solve_exact  # noqa: E402
from placement.codesign.grid import load_grid  # noqa: E402
from placement.codesign.result import TIE  # noqa: E402
from placement.codesign.template import AREA_BUDGET_MM2, LINK_BYTES_PER_S  # noqa: E402
from placement.codesign.workload import load_workload  # noqa: E402
from placement.errors import InvalidParameterError, PlacementError  # noqa: E402
from placement.report.table import format_table  # noqa: E402
from placement.zoo.codesign_models import MODELS, model_file  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cannot_write, exit_with, machine, merged_and_counted, positive_int, refuse, said_merge  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SPEC = ROOT / "benchmarks" / "codesign-sweep.json"
#: the fields that name a row: a later run's row of the same values replaces it in the results file
KEY = ("model", "chips")
#: TPUv2's TDP (Jouppi et al., CACM 63(7), 2020), the per-chip power budget of the table.
POWER_W = 280.0
#: WHAM's reported figures (arXiv:2404.14632, abstract).
WHAM_REPORTED = {"search_time_vs_spotlight": 31.0, "throughput_vs_spotlight": 12.0, "throughput_vs_tpu": 1.12}
RANDOM_BUDGET, SEED, TOP_K = 64, 0, 5


def timed(run, repeat: int):
    """The last answer of ``run()`` and the median wall time of ``repeat`` calls."""
    times, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - start)
    return answer, statistics.median(times)


def row(model: str, chips: int, repeat: int, grid) -> dict:
    """One model and chip count: the optimum and the three baselines, with their search times."""
    workload = load_workload(model_file(f"{model}-training", LINK_BYTES_PER_S))
    area, power = AREA_BUDGET_MM2, POWER_W
    exact, exact_s = timed(lambda: solve_exact(workload, grid, chips, area, power), repeat)
    assert exact.status == "optimal", exact.message
    out = {"model": model, "chips": chips, "nodes": len(workload.instance.nodes), "exact_throughput": exact.value,
           "exact_s": exact_s, "exact_designs": [d.label for d in exact.designs], "evaluated": exact.evaluated,
           "pruned": exact.pruned, "pruned_by": exact.pruned_by, "baselines": {}}
    runs = {"wham": lambda: baselines.wham(workload, chips, area, power, grid=grid, top_k=TOP_K),
            "random": lambda: baselines.random_search(workload, chips, area, power, grid=grid, budget=RANDOM_BUDGET,
                                                      seed=SEED),
            "fixed": lambda: baselines.fixed(workload, chips, area, power, grid=grid)}
    for name, run in runs.items():
        found, seconds = timed(run, repeat)
        out["baselines"][name] = {"throughput": found.value, "ratio": found.value / exact.value, "s": seconds,
                                  "evaluated": found.evaluated, "designs": [d.label for d in found.designs]}
    # up to the tie (placement.codesign.result.TIE): of plans of equal throughput the exact method keeps the one
    # of fewest watts, whose max load may differ from the least in its last bits
    out["exact_at_least_every_baseline"] = all(b["throughput"] <= exact.value * (1 + TIE)
                                               for b in out["baselines"].values())
    return out


def summary(rows: list[dict]) -> dict:
    """Medians over the rows of the comparisons WHAM reports, measured here."""
    def median(f) -> float:
        return statistics.median(f(r) for r in rows)

    b = lambda r, name: r["baselines"][name]  # noqa: E731
    return {"search_time_random_over_wham": median(lambda r: b(r, "random")["s"] / b(r, "wham")["s"]),
            "throughput_wham_over_random": median(lambda r: b(r, "wham")["throughput"] / b(r, "random")["throughput"]),
            "throughput_wham_over_fixed": median(lambda r: b(r, "wham")["throughput"] / b(r, "fixed")["throughput"]),
            "throughput_exact_over_wham": median(lambda r: 1 / b(r, "wham")["ratio"]),
            "worst_wham_ratio": min(b(r, "wham")["ratio"] for r in rows),
            "search_time_exact_over_wham": median(lambda r: r["exact_s"] / b(r, "wham")["s"]),
            "rows_exact_at_least_every_baseline": sum(r["exact_at_least_every_baseline"] for r in rows),
            "rows": len(rows)}


def table(rows: list[dict]) -> list[str]:
    """The rows as a text table: each method's throughput ratio to the optimum and its search time."""
    head = ["model", "k", "exact batches/s", "exact s", "WHAM ratio", "WHAM s", "random ratio", "random s",
            "TPU-like ratio", "TPU-like s", "exact ≥ all"]
    lines = [head]
    for r in rows:
        b = r["baselines"]
        lines.append([r["model"], str(r["chips"]), f"{r['exact_throughput']:.4g}", f"{r['exact_s']:.3f}",
                      f"{b['wham']['ratio']:.4f}", f"{b['wham']['s']:.3f}", f"{b['random']['ratio']:.4f}",
                      f"{b['random']['s']:.3f}", f"{b['fixed']['ratio']:.4f}", f"{b['fixed']['s']:.3f}",
                      "yes" if r["exact_at_least_every_baseline"] else "NO"])
    return format_table(lines, left=(0,))


def comparison(s: dict) -> list[str]:
    """WHAM's reported figures beside the same comparisons measured here, as a text table."""
    lines = [["comparison", "WHAM reports", "measured here (median)"],
             ["search time, Spotlight / WHAM  (here: random / WHAM-like)", f"{WHAM_REPORTED['search_time_vs_spotlight']:g}×",
              f"{s['search_time_random_over_wham']:.2f}×"],
             ["throughput, WHAM / Spotlight  (here: WHAM-like / random)", f"{WHAM_REPORTED['throughput_vs_spotlight']:g}×",
              f"{s['throughput_wham_over_random']:.3f}×"],
             ["throughput, WHAM / TPU  (here: WHAM-like / TPU-like)", f"{WHAM_REPORTED['throughput_vs_tpu']:g}×",
              f"{s['throughput_wham_over_fixed']:.3f}×"],
             ["throughput, optimum / WHAM-like  (not reported by WHAM)", "-", f"{s['throughput_exact_over_wham']:.4f}×"],
             ["search time, exact / WHAM-like", "-", f"{s['search_time_exact_over_wham']:.2f}×"]]
    return format_table(lines, left=(0,))


def run_benchmark(args: argparse.Namespace) -> int:
    """The table of the module docstring: print it and write it to ``args.json``."""
    grid = load_grid(None)
    rows = []
    for model in args.models:
        for k in args.chips:
            rows.append(row(model, k, args.repeat, grid))
            r = rows[-1]
            print(f"{model} k={k}: exact {r['exact_throughput']:.4g} batches/s in {r['exact_s']:.3f} s; "
                  + ", ".join(f"{n} {b['ratio']:.4f}" for n, b in r["baselines"].items()), file=sys.stderr, flush=True)
    s = summary(rows)
    print("\n".join(table(rows)))
    print()
    print("\n".join(comparison(s)))
    print(f"\nexact ≥ every baseline on {s['rows_exact_at_least_every_baseline']} of {s['rows']} rows; "
          f"worst WHAM-like ratio {s['worst_wham_ratio']:.4f}")
    document = {"setting": {"area_mm2": AREA_BUDGET_MM2, "power_w": POWER_W, "grid": "default", "grid_designs": 10_000,
                            "objective": "throughput", "homogeneous": False, "repeat": args.repeat,
                            "random_budget": RANDOM_BUDGET, "seed": SEED, "top_k": TOP_K},
                "wham_reported": WHAM_REPORTED, "machine": machine()}
    out = Path(args.json or RESULTS / "codesign.json")
    held, kept, replaced = merged_and_counted(out, rows, KEY, {"machine": document["machine"]})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**document, "summary": summary(held), "rows": held}, indent=1) + "\n")
    print(said_merge(out, len(rows), kept, replaced))
    return 0 if s["rows_exact_at_least_every_baseline"] == s["rows"] else 1


def shown(path: str | Path) -> str:
    """``path`` relative to the repository when it lies inside it, else as it is."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT) else str(path)


def run_sweep_command(args: argparse.Namespace) -> int:
    """The design study of :data:`SPEC`: records to ``args.out``, plots to ``args.plots``, summary to ``args.json``."""
    from placement.codesign.sweep import load_spec, read_records, run_sweep

    out = Path(args.out or RESULTS / "codesign-sweep.jsonl")
    plots = args.plots or str(RESULTS / "codesign-plots")
    start = time.perf_counter()
    try:
        result = run_sweep(load_spec(SPEC), out, scheduler=args.scheduler, workers=args.workers, plots=plots)
    except PlacementError as exc:   # named by the options that give the library's parameters
        options = ("scheduler", "workers", "out", "plots")
        named = isinstance(exc, InvalidParameterError) and exc.parameter in options
        return refuse(f"--{exc.parameter} {exc.detail}" if named else str(exc))
    records = read_records(out)
    ratios = {name: [r["baselines"][name]["ratio"] for r in records
                     if "ratio" in r.get("baselines", {}).get(name, {})] for name in ("wham", "random", "fixed")}
    document = {"spec": str(SPEC.relative_to(ROOT)), "configurations": result.total, "records": len(records),
                "optimal": sum(r["status"] == "optimal" for r in records), "ran_now": result.ran,
                "skipped": result.skipped, "wall_s_this_run": time.perf_counter() - start, "machine": machine(),
                "baseline_ratio": {name: {"min": min(v), "median": statistics.median(v), "count": len(v)}
                                   for name, v in ratios.items() if v},
                "plots": [shown(p) for p in result.plots]}
    summary_path = Path(args.json or RESULTS / "codesign-sweep.json")
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=positive_int, default=3, help="runs per median search time (default 3)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--chips", nargs="+", type=positive_int, default=[1, 2, 4, 8])
    parser.add_argument("--json", help="the JSON written (default benchmarks/results/codesign.json, "
                                       "with --sweep benchmarks/results/codesign-sweep.json)")
    parser.add_argument("--sweep", action="store_true", help="run the design study of benchmarks/codesign-sweep.json")
    parser.add_argument("--out", help="--sweep: the records file (default benchmarks/results/codesign-sweep.jsonl)")
    parser.add_argument("--plots", help="--sweep: the plots folder (default benchmarks/results/codesign-plots)")
    parser.add_argument("--workers", type=positive_int, help="--sweep: local Dask worker processes")
    parser.add_argument("--scheduler", help="--sweep: a Dask scheduler's address instead of a local cluster")
    args = parser.parse_args(argv)
    if not args.sweep:
        given = [f"--{name}" for name in ("out", "plots", "workers", "scheduler") if getattr(args, name) is not None]
        if given:
            return refuse(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --sweep only "
                          "(the table's JSON goes to --json)")
    files = {"--json": args.json or RESULTS / ("codesign-sweep.json" if args.sweep else "codesign.json")}
    if args.sweep:
        files["--out"] = args.out or RESULTS / "codesign-sweep.jsonl"
    if message := cannot_write(files, {"--plots": (args.plots or RESULTS / "codesign-plots") if args.sweep else None}):
        return refuse(message)
    return run_sweep_command(args) if args.sweep else run_benchmark(args)


if __name__ == "__main__":
    exit_with(main)
