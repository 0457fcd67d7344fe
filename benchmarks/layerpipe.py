"""What splitting the backward pass buys: LayerPipe's question answered with exact plans.

For every training graph below and 2 to 9 accelerators (no CPU), the script solves

* the joint optimum (``placement.solve``, today's model: the PipeDream objective, node memory only),
* the baseline: the unsplit optimum under the split model's memory (``backward="split"``,
  ``w_placement="home"``: node memory plus the micro-batches bounded async 1F1B holds in flight),
  started from the DP's plan, so both sides of every speed-up use one memory model, and
* the optimum of each split variant (``w_placement`` ``any`` or ``adjacent``, optionally
  ``inter_layer``), each MILP under ``--time-limit`` seconds and warm-started from the baseline's plan,
  with its status and gap as the solver reports them;

and replays every plan found in the simulator (:mod:`placement.simulation.split`, which derives the
calls, transfers and memory from the instance on its own): the steady-state time per sample of
bounded async 1F1B against the planner's objective, the peak memory per device from the simulator's
reservation events against the planner's memory, and GPipe's growth per micro-batch (a flush between
the phases) against the plan's flush objective ``max FW + max BW``. On the first variant's plan it
also compares 1F1B with flush against ZB-H1 and ZB-H2 (iteration of ``4 × stages`` micro-batches,
each device's memory bound enforced).

Graphs: the published layer graphs (BERT-24, GNMT, ResNet-50) and BERT operator graphs (L-3,
L-6) of Tarnawski et al. (read from ``../shared/tarnawski/throughput-inputs``, skipped when
absent), and the bundled imported GPT-2 and BERT-Base training graphs (``instances/models``).
LayerPipe (Unnikrishnan & Parhi, ICCAD 2021, arXiv:2108.06629) reports 25% average speed-up
over PipeDream and over 80% with 7 to 9 processors; the table prints ours next to those.

    python benchmarks/layerpipe.py [--accelerators 2-9] [--time-limit 6] [--variants any,adjacent,any+inter,adjacent+inter]
                                   [--only NAME ...] [--json benchmarks/results/layerpipe.json]
                                   [--plot benchmarks/results/layerpipe.png]

The run's rows replace the JSON file's rows of the same graph, accelerator count and variant; the file's
other rows are kept (a run of one graph leaves the others').
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import placement  # noqa: E402
from placement.report.table import format_table, percent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, machine, merged_rows, milp_unavailable,  # noqa: E402  (beside this script)
                    positive_float, positive_int, refuse)

SHARED = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
GRAPHS = {
    "bert24-layers": SHARED / "LayerGraphs" / "bert24_training.json",
    "gnmt-layers": SHARED / "LayerGraphs" / "gnmt_training.json",
    "resnet50-layers": SHARED / "LayerGraphs" / "resnet50_training.json",
    "bert-l3-ops": SHARED / "OperatorGraphs" / "bert_l-3_training.json",
    "bert-l6-ops": SHARED / "OperatorGraphs" / "bert_l-6_training.json",
    "gpt2-imported": ROOT / "instances" / "models" / "gpt2-training.json",
    "bert-base-imported": ROOT / "instances" / "models" / "bert-base-training.json",
}
PUBLISHED = ("bert24-layers", "gnmt-layers", "resnet50-layers", "bert-l3-ops", "bert-l6-ops")
#: LayerPipe's reported speed-ups over PipeDream (arXiv:2108.06629, abstract and Section VI)
LAYERPIPE_AVERAGE = 1.25
LAYERPIPE_7_TO_9 = 1.80
REL_TOLERANCE = 1e-3     # the tolerance: simulated time per sample within 0.1% of the objective
#: the split variants: ``w_placement`` and, after ``+inter``, inter-layer moves
VARIANTS = ("any", "adjacent", "any+inter", "adjacent+inter")


def balance_bound(problem, accelerators: int) -> float:
    """No plan on ``accelerators`` accelerators (no CPU) beats ``Σ accelerator time of all nodes / accelerators``:
    split or not, every node's work runs somewhere and transfers only add to it."""
    t = problem.type_index("accelerator")
    return sum(n.times[t] or 0.0 for n in problem.nodes) / accelerators


def variant_options(name: str) -> dict:
    """The ``placement.solve`` options of a variant of :data:`VARIANTS`."""
    placement_rule, _, extra = name.partition("+")
    return {"w_placement": placement_rule, "inter_layer": extra == "inter"}


def variant_list(text: str) -> list[str]:
    """An argparse type: comma-separated variants of :data:`VARIANTS`, at least one, each once."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown variant(s) {', '.join(map(repr, unknown))} "
                                         f"(choose from {', '.join(VARIANTS)})")
    return list(dict.fromkeys(names))


def accelerator_range(text: str) -> list[int]:
    """An argparse type: ``LOW-HIGH`` (or one count) as the accelerator counts LOW..HIGH, each at least 1."""
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count or a range such as 2-9") from None
    if first < 1 or last < first:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range of counts from 1 up, such as 2-9")
    return list(range(first, last + 1))


def replay(problem, result, microbatches: int, k: int) -> dict:
    """The split plan of ``result`` through bounded async 1F1B and through GPipe (a flush between the phases):
    time per sample against the planner's ``throughput`` value, peak memory per device (from the simulator's
    reservation events) against the planner's memory, and GPipe's growth per micro-batch (from ``8 × stages``
    to ``16 × stages`` micro-batches) against the plan's flush objective ``max FW + max BW``."""
    from placement.problem.split import split_model
    from placement.verification.split import evaluate_split

    run = placement.simulate(problem, result, schedule="1f1b-async", microbatches=microbatches, accelerators=k,
                             cpus=0)
    for _ in range(2):      # a run too short to settle: run 4 times longer. Unsettled: no period found, or a time
        # per sample below the max load, which no steady state has (each device runs its load per sample)
        if run.period is not None and run.time_per_sample >= run.max_load * (1 - 1e-12):
            break
        microbatches *= 4
        run = placement.simulate(problem, result, schedule="1f1b-async", microbatches=microbatches,
                                 accelerators=k, cpus=0)
    model_memory = [s.memory for s in result.plan if s.nodes]
    peak = [s.peak_memory for s in run.stages]
    memory_diff = max((abs(a - b) / max(abs(b), 1.0) for a, b in zip(peak, model_memory)), default=0.0)
    backward = result.backward
    model = split_model(backward["w_placement"], backward["inter_layer"], backward["w_share"])
    evaluation = evaluate_split(problem, result.to_plan(), model)   # FW and BW need no device counts
    flush = evaluation.objective("throughput-gpipe")
    growth, gpipe_m = gpipe_growth(problem, result, len(run.stages), k)
    return {"time_per_sample": run.time_per_sample, "period": run.period, "microbatches": microbatches,
            "rel_diff": (run.time_per_sample - result.value) / result.value,
            "memory_model": model_memory, "peak_memory": peak, "memory_rel_diff": memory_diff,
            "in_flight": [s.peak_in_flight for s in run.stages],
            "peak_w_inputs": [s.peak_w_inputs for s in run.stages],
            "flush_objective": flush, "gpipe_per_sample": growth, "gpipe_microbatches": gpipe_m,
            "flush_rel_diff": (growth - flush) / flush}


def gpipe_growth(problem, result, stages: int, k: int, most: int = 1 << 14) -> tuple[float, int]:
    """GPipe's growth of the iteration per micro-batch, from ``m`` to ``2m`` micro-batches, doubling ``m``
    from ``8 × stages`` until two successive growths agree to 1e-9 and are not below the simulator's own
    bound ``max_d F(d) + max_d (B(d) + W(d))`` (its call times: with the flush between the phases, the
    busiest device of each phase makes every iteration at least ``m`` times that), or ``2m`` reaches
    ``most``. A growth below that bound is a transient: a device that starts its phase late but has less
    work per micro-batch ends the iteration at small ``m``. Returns the last growth and its ``2m``."""
    def run(m: int):
        return placement.simulate(problem, result, schedule="gpipe", microbatches=m, accelerators=k, cpus=0,
                                  keep_tasks=False)

    m = 8 * stages
    first = run(m)
    bound = (max(s.task_times["F"] for s in first.stages)
             + max(s.task_times["B"] + s.task_times.get("W", 0.0) for s in first.stages))
    times = [first.iteration_time, run(2 * m).iteration_time]
    growth = [(times[1] - times[0]) / m]
    while 4 * m <= most:
        m *= 2
        times.append(run(2 * m).iteration_time)
        growth.append((times[-1] - times[-2]) / m)
        if abs(growth[-1] - growth[-2]) <= 1e-9 * abs(growth[-1]) and growth[-1] >= bound * (1 - 1e-12):
            break
    return growth[-1], 2 * m


def schedules(problem, result, stages: int, k: int) -> dict:
    """Iteration time and peak memory of 1F1B-flush, ZB-H1 and ZB-H2 on one split plan (4 × stages micro-batches)."""
    out = {}
    for name in ("1f1b-flush", "zb-h1", "zb-h2"):
        try:
            run = placement.simulate(problem, result, schedule=name, microbatches=4 * stages, accelerators=k, cpus=0)
        except placement.InvalidParameterError as exc:
            out[name] = {"error": str(exc)}
            continue
        out[name] = {"iteration_time": run.iteration_time, "max_peak_memory": max(s.peak_memory for s in run.stages),
                     "max_in_flight": max(s.peak_in_flight for s in run.stages)}
    return out


def _value(x: float | None) -> str:
    """A value for a progress line: seven significant digits, or ``-`` without one."""
    return "-" if x is None else f"{x:.7g}"


def solved(result, runtime: float) -> dict:
    """The figures of one solve for a row: status, value, bound, gap, seconds and stages used."""
    return {"status": str(result.status), "value": result.value, "bound": result.bound, "gap": result.gap,
            "runtime_s": runtime, "stages": sum(1 for s in result.plan if s.nodes) if result.plan else 0}


def simulated(problem, result, microbatches: int, k: int, row: dict) -> None:
    """Replay ``result`` into ``row["simulated"]`` (or the simulator's refusal into ``row["simulator_error"]``)."""
    try:
        row["simulated"] = replay(problem, result, microbatches, k)
    except placement.InvalidParameterError as exc:   # a plan no schedule can run as calls
        row["simulator_error"] = str(exc)


def rows_for(label: str, path: Path, accelerators: list[int], variants: list[str], time_limit: float,
             microbatches: int) -> list[dict]:
    """Per accelerator count: the unsplit optimum of the joint model (the DP: node memory only), the
    baseline (every task on its layer's stage, ``w_placement="home"``, priced with the split model's memory:
    the DP's plan where it fits, then it is optimal there too, since that memory only adds to node memory),
    and each variant warm-started from the baseline's plan, each split plan replayed."""
    problem = placement.load(path)
    rows = []
    for k in accelerators:
        started = time.perf_counter()
        joint = placement.solve(problem, accelerators=k, cpus=0, time_limit=time_limit)
        joint_s = time.perf_counter() - started
        started = time.perf_counter()
        home = placement.solve(problem, accelerators=k, cpus=0, backward="split", w_placement="home",
                               time_limit=time_limit)
        base = solved(home, time.perf_counter() - started)
        # the DP's plan fits the split model's memory: the joint optimum is the baseline's, proven
        base["proven"] = home.status == "optimal" or (
            home.value is not None and joint.value is not None and str(joint.status) == "optimal"
            and abs(home.value - joint.value) <= 1e-9 * joint.value)
        base["joint"] = {"status": str(joint.status), "value": joint.value, "gap": joint.gap, "runtime_s": joint_s}
        base_row = {"instance": label, "accelerators": k, "variant": "home", "balance_bound": balance_bound(problem, k),
                    "unsplit": base, "split": base}
        if home.value is not None:
            simulated(problem, home, microbatches, k, base_row)
        rows.append(base_row)
        for variant in variants:
            started = time.perf_counter()
            split = placement.solve(problem, accelerators=k, cpus=0, backward="split", time_limit=time_limit,
                                    warm_start=home.to_plan() if home.plan is not None else True,
                                    **variant_options(variant))
            row = {"instance": label, "accelerators": k, "variant": variant,
                   "balance_bound": balance_bound(problem, k), "unsplit": base,
                   "split": solved(split, time.perf_counter() - started)}
            if split.value is not None and home.value is not None:
                row["speedup"] = home.value / split.value
            if split.value is not None:
                simulated(problem, split, microbatches, k, row)
                if variant == variants[0] and "simulated" in row:
                    row["schedules"] = schedules(problem, split, row["split"]["stages"], k)
            rows.append(row)
            print(f"  {label} k={k} {variant}: unsplit {_value(joint.value)} baseline {_value(home.value)} split "
                  f"{_value(split.value)} ({split.status}, gap {percent(split.gap) if split.gap is not None else '-'})",
                  file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    """Every row as a text table: values, speed-ups and the replay's differences."""
    header = ["instance", "acc", "variant", "joint", "baseline", "split", "status", "gap", "speed-up", "simulated",
              "rel. diff", "memory diff", "flush", "GPipe", "flush diff"]
    out = [header]
    for r in rows:
        sim = r.get("simulated", {})
        value = r["split"]["value"]
        out.append([r["instance"], str(r["accelerators"]), r["variant"],
                    "-" if r["unsplit"]["joint"]["value"] is None else f"{r['unsplit']['joint']['value']:.6g}",
                    "-" if r["unsplit"]["value"] is None else f"{r['unsplit']['value']:.6g}",
                    "-" if value is None else f"{value:.6g}", r["split"]["status"],
                    "-" if r["split"]["gap"] is None else f"{r['split']['gap']:.2%}",
                    f"{r['speedup']:.3f}" if "speedup" in r else "-",
                    f"{sim['time_per_sample']:.6g}" if sim else ("refused" if "simulator_error" in r else "-"),
                    f"{sim['rel_diff']:.1e}" if sim else "-",
                    f"{sim['memory_rel_diff']:.1e}" if sim else "-",
                    f"{sim['flush_objective']:.6g}" if sim else "-",
                    f"{sim['gpipe_per_sample']:.6g}" if sim else "-",
                    f"{sim['flush_rel_diff']:.1e}" if sim else "-"])
    return format_table(out, left={0, 2, 6})


def markdown(rows: list[dict]) -> list[str]:
    """One line per graph and accelerator count: the joint optimum (node memory only), the baseline (every task
    at home under the split model's memory; ``*``: proven optimal), its headroom (baseline over the balance
    bound: no split can speed it up more), each variant's speed-up over the baseline (``*``: proven optimal,
    else its gap; ``†``: the simulator refuses the plan), and over every plan of the line the largest
    relative differences: simulated time per sample vs ``throughput``, simulated peak memory vs the planner's,
    GPipe's growth per micro-batch vs the flush objective."""
    variants = [v for v in dict.fromkeys(r["variant"] for r in rows) if v != "home"]
    lines = ["| graph | acc | joint | baseline | headroom | " + " | ".join(variants)
             + " | time diff | memory diff | flush diff |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(variants) + "---:|---:|---:|"]
    keys = list(dict.fromkeys((r["instance"], r["accelerators"]) for r in rows))
    for name, k in keys:
        mine = {r["variant"]: r for r in rows if (r["instance"], r["accelerators"]) == (name, k)}
        base = next(iter(mine.values()))["unsplit"]
        joint = base["joint"]
        joint_cell = joint["status"] if joint["value"] is None else f"{joint['value']:.6g}"
        if base["value"] is None:
            lines.append(f"| {name} | {k} | {joint_cell} | {base['status']} | - |" + " - |" * len(variants)
                         + " - | - | - |")
            continue
        mark = "*" if base["proven"] else f" (gap {percent(base['gap'] or 0.0)})"
        first = next(iter(mine.values()))
        head = (f"| {name} | {k} | {joint_cell} | {base['value']:.6g}{mark} | "
                f"{base['value'] / first['balance_bound']:.3f} | ")
        cells = []
        for v in variants:
            r = mine.get(v)
            if r is None or "speedup" not in r:
                cells.append("-" if r is None else r["split"]["status"])
                continue
            gap = r["split"]["gap"] or 0.0
            mark = "*" if r["split"]["status"] == "optimal" else f" (gap {percent(gap)})"
            cells.append(f"{r['speedup']:.3f}{mark}" + (" †" if "simulator_error" in r else ""))
        sims = [r["simulated"] for r in mine.values() if "simulated" in r]
        diffs = [f"{max(abs(x[key]) for x in sims):.0e}" if sims else "-"
                 for key in ("rel_diff", "memory_rel_diff", "flush_rel_diff")]
        lines.append(head + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
    return lines


def summary(rows: list[dict]) -> list[str]:
    """Average and 7-9 speed-ups per variant over the baseline, next to LayerPipe's figures, and the replay's
    agreement with the planner over every plan."""
    lines = []
    variants = sorted({r["variant"] for r in rows} - {"home"})
    for scope, keep in (("published graphs", lambda r: r["instance"] in PUBLISHED), ("all graphs", lambda r: True)):
        for variant in variants:
            ups = [r["speedup"] for r in rows if keep(r) and r["variant"] == variant and "speedup" in r]
            high = [r["speedup"] for r in rows if keep(r) and r["variant"] == variant and "speedup" in r
                    and 7 <= r["accelerators"] <= 9]
            better = sum(1 for u in ups if u > 1 + 1e-9)
            if ups:
                at_7_to_9 = f"{statistics.mean(high):.3f}" if high else "no run"
                lines.append(f"{scope:17} {variant:15} mean speed-up {statistics.mean(ups):.3f} over {len(ups)} runs "
                             f"(7-9 accelerators: {at_7_to_9}); strictly better on {better}/{len(ups)}")
    lines.append(f"LayerPipe (reported)              mean speed-up {LAYERPIPE_AVERAGE:.2f}, 7-9 processors "
                 f"> {LAYERPIPE_7_TO_9:.2f}")
    sims = [r["simulated"] for r in rows if "simulated" in r]
    refused = sum(1 for r in rows if "simulator_error" in r)
    if sims:
        within = sum(1 for x in sims if abs(x["rel_diff"]) <= REL_TOLERANCE)
        flush = sum(1 for x in sims if abs(x["flush_rel_diff"]) <= REL_TOLERANCE)
        memory = sum(1 for x in sims if x["memory_rel_diff"] <= 1e-9)
        lines.append(f"replayed plans: {len(sims)} ({refused} refused by the simulator)")
        lines.append(f"  async 1F1B time per sample within 0.1% of the objective: {within}/{len(sims)}, largest "
                     f"difference {max(abs(x['rel_diff']) for x in sims):.2e}")
        lines.append(f"  GPipe growth per micro-batch within 0.1% of max FW + max BW: {flush}/{len(sims)}, largest "
                     f"difference {max(abs(x['flush_rel_diff']) for x in sims):.2e}")
        lines.append(f"  peak memory equal to the planner's (1e-9 relative) on every device: {memory}/{len(sims)}, "
                     f"largest difference {max(x['memory_rel_diff'] for x in sims):.2e}")
    return lines


def plot(rows: list[dict], path: Path) -> str | None:
    """Speed-up over the baseline against accelerators, per graph and variant, with LayerPipe's figures; to ``path``.
    Where matplotlib (the ``plot`` extra) is not installed, nothing is drawn and the reason is returned."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (pip install 'placement[plot]')"

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    instances = sorted({r["instance"] for r in rows}, key=list(GRAPHS).index)
    variants = sorted({r["variant"] for r in rows})
    cols = min(4, len(instances))
    fig, axes = plt.subplots((len(instances) + cols - 1) // cols, cols, figsize=(4 * cols, 3.2 * ((len(instances) + cols - 1) // cols)),
                             squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, instances):
        for variant in variants:
            pts = sorted((r["accelerators"], r["speedup"]) for r in rows
                         if r["instance"] == name and r["variant"] == variant and "speedup" in r)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=variant)
        ax.axhline(LAYERPIPE_AVERAGE, color="grey", linestyle="--", linewidth=1)
        ax.plot([7, 9], [LAYERPIPE_7_TO_9] * 2, color="grey", linewidth=3)
        ax.set_title(name)
        ax.set_xlabel("accelerators")
    for ax in axes.flat[len(instances):]:
        ax.axis("off")
    axes.flat[0].set_ylabel("speed-up over unsplit optimum")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Exact split-backward optimum vs unsplit optimum (grey: LayerPipe's reported 1.25 average, "
                 "1.8 at 7-9 processors)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    """Solve, replay and tabulate every graph found; write the JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerators", type=accelerator_range, default="2-9", help="a range, e.g. 2-9 (default)")
    parser.add_argument("--time-limit", type=positive_float, default=6.0, help="seconds per solve (default 6)")
    parser.add_argument("--variants", type=variant_list, default=",".join(VARIANTS),
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: all)")
    parser.add_argument("--microbatches", type=positive_int, default=256, help="async 1F1B run length (default 256)")
    parser.add_argument("--only", nargs="+", choices=list(GRAPHS), help="graphs to run (default: all found)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "layerpipe.json"))
    parser.add_argument("--plot", help="where the plot goes (default: beside the JSON, with the suffix .png)")
    args = parser.parse_args(argv)
    plot_path = Path(args.plot or Path(args.json).with_suffix(".png"))
    # the JSON's folders are made first
    made = Path(args.json).resolve().parent.is_relative_to(plot_path.resolve().parent)
    if message := cannot_write({"--json": args.json}) or cannot_write({"--plot": plot_path}, parents=made):
        return refuse(message)
    graphs = {label: path for label, path in GRAPHS.items() if not args.only or label in args.only}
    for label, path in graphs.items():
        if not path.exists():
            print(f"skipped {label}: {path} not found", file=sys.stderr)
    graphs = {label: path for label, path in graphs.items() if path.exists()}
    if not graphs:
        return refuse("no graph to run: " + ("none of --only is found" if args.only else "no graph file is found"))
    if message := milp_unavailable():   # the baseline and every variant are MILPs
        return refuse(message)
    rows = []
    for label, path in graphs.items():
        rows += rows_for(label, path, args.accelerators, args.variants, args.time_limit, args.microbatches)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    # a run of some graphs, accelerator counts or variants replaces their rows and keeps the file's others
    settings = {"time_limit_s": args.time_limit, "microbatches": args.microbatches, "machine": machine()}
    kept = merged_rows(Path(args.json), rows, ("instance", "accelerators", "variant"), settings)
    Path(args.json).write_text(json.dumps({**settings, "rows": kept}, indent=1) + "\n", encoding="utf-8")
    for line in table(rows):
        print(line)
    print()
    for line in markdown(rows):
        print(line)
    print()
    for line in summary(rows):
        print(line)
    if rows and (why := plot(rows, plot_path)) is not None:
        print(f"no plot: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    exit_with(main)
