"""What splitting the backward pass buys: LayerPipe's question answered with exact plans.

For every training graph below and 2 to 9 accelerators (no CPU), the script solves

* the unsplit optimum (``placement.solve``, today's model: the PipeDream objective, the max load
  of a pipeline whose backward nodes run with their layers), and
* the optimum of each split variant (``backward="split"``: ``w_placement`` ``any`` or
  ``adjacent``, optionally ``inter_layer``), each MILP under ``--time-limit`` seconds and
  warm-started from the unsplit optimum, with its status and gap as the solver reports them;

and replays every split plan in the simulator (:mod:`placement.simulation.split`, which derives
the calls, transfers and memory from the instance on its own): the steady-state time per sample
of asynchronous 1F1B against the planner's objective, and per device the node memory plus the
W inputs of one micro-batch against the planner's memory (and the peak from events, which holds
several micro-batches' W inputs). On the ``any`` plan it also compares 1F1B with flush against
ZB-H1 and ZB-H2 (iteration of ``4 × stages`` micro-batches, each device's memory bound enforced).

Graphs: the published layer graphs (BERT-24, GNMT, ResNet-50) and BERT operator graphs (L-3,
L-6) of Tarnawski et al. (read from ``../shared/tarnawski/throughput-inputs``, skipped when
absent), and the bundled imported GPT-2 and BERT-Base training graphs (``instances/models``).
LayerPipe (Unnikrishnan & Parhi, ICCAD 2021, arXiv:2108.06629) reports 25% average speed-up
over PipeDream and over 80% with 7 to 9 processors; the table prints ours next to those.

    python benchmarks/layerpipe.py [--accelerators 2-9] [--time-limit 6] [--variants any,adjacent,any+inter,adjacent+inter]
                                   [--only NAME ...] [--json benchmarks/results/layerpipe.json]
                                   [--plot benchmarks/results/layerpipe.png]
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
from placement.report.table import format_table  # noqa: E402

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
REL_TOLERANCE = 1e-3     # the acceptance bound: simulated time per sample within 0.1% of the objective


def balance_bound(problem, accelerators: int) -> float:
    """No plan on ``accelerators`` accelerators (no CPU) beats ``Σ accelerator time of all nodes / accelerators``:
    split or not, every node's work runs somewhere and transfers only add to it."""
    t = problem.type_index("accelerator")
    return sum(n.times[t] or 0.0 for n in problem.nodes) / accelerators


def variant_options(name: str) -> dict:
    placement_rule, _, extra = name.partition("+")
    return {"w_placement": placement_rule, "inter_layer": extra == "inter"}


def accelerator_range(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def replay(problem, result, microbatches: int, k: int) -> dict:
    """The split plan of ``result`` through async 1F1B: time per sample and memory against the planner's."""
    run = placement.simulate(problem, result, schedule="1f1b-async", microbatches=microbatches, accelerators=k,
                             cpus=0)
    for _ in range(2):      # a run too short to settle (no period found): run 4 times longer
        if run.period is not None:
            break
        microbatches *= 4
        run = placement.simulate(problem, result, schedule="1f1b-async", microbatches=microbatches,
                                 accelerators=k, cpus=0)
    model_memory = [s.memory for s in result.plan if s.nodes]
    one = [s.static_memory + (s.w_inputs_per_microbatch or 0.0) for s in run.stages]
    memory_diff = max((abs(a - b) / max(abs(b), 1.0) for a, b in zip(one, model_memory)), default=0.0)
    return {"time_per_sample": run.time_per_sample, "period": run.period, "microbatches": microbatches,
            "rel_diff": (run.time_per_sample - result.value) / result.value,
            "memory_one_microbatch": one, "memory_model": model_memory, "memory_rel_diff": memory_diff,
            "peak_memory": [s.peak_memory for s in run.stages],
            "peak_w_inputs": [s.peak_w_inputs for s in run.stages]}


def schedules(problem, result, stages: int, k: int) -> dict:
    """Iteration time and peak memory of 1F1B-flush, ZB-H1 and ZB-H2 on one split plan (4 × stages micro-batches),
    and the planner's flush objective of the plan against the growth of GPipe's iteration per micro-batch
    (from ``8 × stages`` to ``16 × stages`` micro-batches)."""
    out = {}
    for name in ("1f1b-flush", "zb-h1", "zb-h2"):
        try:
            run = placement.simulate(problem, result, schedule=name, microbatches=4 * stages, accelerators=k, cpus=0)
        except placement.InvalidParameterError as exc:
            out[name] = {"error": str(exc)}
            continue
        out[name] = {"iteration_time": run.iteration_time, "max_peak_memory": max(s.peak_memory for s in run.stages),
                     "max_in_flight": max(s.peak_in_flight for s in run.stages)}
    # the flush objective (max FW + max BW) against GPipe's growth per micro-batch, on the same plan
    from placement.problem.split import split_model
    from placement.verification.split import evaluate_split

    backward = result.backward
    model = split_model(backward["w_placement"], backward["inter_layer"], backward["w_share"])
    objective = evaluate_split(problem, result.to_plan(), model).objective("throughput-gpipe")
    m1, m2 = 8 * stages, 16 * stages
    t1, t2 = (placement.simulate(problem, result, schedule="gpipe", microbatches=m, accelerators=k, cpus=0).iteration_time
              for m in (m1, m2))
    out["gpipe"] = {"objective": objective, "simulated_per_sample": (t2 - t1) / (m2 - m1),
                    "rel_diff": ((t2 - t1) / (m2 - m1) - objective) / objective}
    return out


def rows_for(label: str, path: Path, accelerators: list[int], variants: list[str], time_limit: float,
             microbatches: int) -> list[dict]:
    problem = placement.load(path)
    rows = []
    for k in accelerators:
        started = time.perf_counter()
        joint = placement.solve(problem, accelerators=k, cpus=0, time_limit=time_limit)
        joint_s = time.perf_counter() - started
        for variant in variants:
            started = time.perf_counter()
            split = placement.solve(problem, accelerators=k, cpus=0, backward="split", time_limit=time_limit,
                                    **variant_options(variant))
            row = {"instance": label, "accelerators": k, "variant": variant,
                   "balance_bound": balance_bound(problem, k),
                   "unsplit": {"status": str(joint.status), "value": joint.value, "gap": joint.gap,
                               "runtime_s": joint_s},
                   "split": {"status": str(split.status), "value": split.value, "bound": split.bound,
                             "gap": split.gap, "runtime_s": time.perf_counter() - started,
                             "stages": sum(1 for s in split.plan if s.nodes)}}
            if split.value is not None and joint.value is not None:
                row["speedup"] = joint.value / split.value
                try:
                    row["simulated"] = replay(problem, split, microbatches, k)
                except placement.InvalidParameterError as exc:   # a plan no schedule can run as calls
                    row["simulator_error"] = str(exc)
                if variant == variants[0] and "simulated" in row:
                    row["schedules"] = schedules(problem, split, row["split"]["stages"], k)
            rows.append(row)
            print(f"  {label} k={k} {variant}: unsplit {joint.value} split {split.value} ({split.status}, "
                  f"gap {split.gap})", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    header = ["instance", "acc", "variant", "unsplit", "split", "status", "gap", "speed-up", "simulated",
              "rel. diff", "memory diff", "peak / model memory"]
    out = [header]
    for r in rows:
        sim = r.get("simulated", {})
        if "simulator_error" in r:
            sim = {}
        peak = max(sim.get("peak_memory") or [0.0]) if sim else None
        model = max(sim.get("memory_model") or [0.0]) if sim else None
        out.append([r["instance"], str(r["accelerators"]), r["variant"],
                    "-" if r["unsplit"]["value"] is None else f"{r['unsplit']['value']:.6g}",
                    "-" if r["split"]["value"] is None else f"{r['split']['value']:.6g}", r["split"]["status"],
                    "-" if r["split"]["gap"] is None else f"{r['split']['gap']:.2%}",
                    f"{r['speedup']:.3f}" if "speedup" in r else "-",
                    f"{sim['time_per_sample']:.6g}" if sim else ("refused" if "simulator_error" in r else "-"),
                    f"{sim['rel_diff']:.1e}" if sim else "-",
                    f"{sim['memory_rel_diff']:.1e}" if sim else "-",
                    f"{peak / model:.2f}" if sim and model else "-"])
    return format_table(out, left={0, 2, 5})


def markdown(rows: list[dict]) -> list[str]:
    """One line per graph and accelerator count: the unsplit optimum, its headroom (unsplit optimum over the
    balance bound: no split can speed it up more), each variant's speed-up over it (``*``: proven optimal,
    else its gap; ``†``: the simulator refuses the plan), and the largest simulated-vs-objective difference."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    lines = ["| graph | acc | unsplit | headroom | " + " | ".join(variants) + " | sim. diff |",
             "|---|---:|---:|---:|" + "---:|" * len(variants) + "---:|"]
    keys = list(dict.fromkeys((r["instance"], r["accelerators"]) for r in rows))
    for name, k in keys:
        mine = {r["variant"]: r for r in rows if (r["instance"], r["accelerators"]) == (name, k)}
        first = next(iter(mine.values()))
        if first["unsplit"]["value"] is None:
            lines.append(f"| {name} | {k} | {first['unsplit']['status']} | - |" + " - |" * len(variants) + " - |")
            continue
        head = f"| {name} | {k} | {first['unsplit']['value']:.6g} | {first['unsplit']['value'] / first['balance_bound']:.3f} | "
        cells = []
        for v in variants:
            r = mine.get(v)
            if r is None or "speedup" not in r:
                cells.append("-" if r is None else r["split"]["status"])
                continue
            gap = r["split"]["gap"] or 0.0
            mark = "*" if r["split"]["status"] == "optimal" else f" (gap {gap:.1%})"
            cells.append(f"{r['speedup']:.3f}{mark}" + (" †" if "simulator_error" in r else ""))
        diffs = [abs(r["simulated"]["rel_diff"]) for r in mine.values() if "simulated" in r]
        lines.append(head + " | ".join(cells) + (f" | {max(diffs):.0e} |" if diffs else " | - |"))
    return lines


def summary(rows: list[dict]) -> list[str]:
    """Average and 7-9 speed-ups per variant (best variant per run too), next to LayerPipe's figures."""
    lines = []
    variants = sorted({r["variant"] for r in rows})
    for scope, keep in (("published graphs", lambda r: r["instance"] in PUBLISHED), ("all graphs", lambda r: True)):
        for variant in variants:
            ups = [r["speedup"] for r in rows if keep(r) and r["variant"] == variant and "speedup" in r]
            high = [r["speedup"] for r in rows if keep(r) and r["variant"] == variant and "speedup" in r
                    and 7 <= r["accelerators"] <= 9]
            better = sum(1 for u in ups if u > 1 + 1e-9)
            if ups:
                lines.append(f"{scope:17} {variant:15} mean speed-up {statistics.mean(ups):.3f} over {len(ups)} runs "
                             f"(7-9 accelerators: {statistics.mean(high) if high else float('nan'):.3f}); "
                             f"strictly better on {better}/{len(ups)}")
    lines.append(f"LayerPipe (reported)              mean speed-up {LAYERPIPE_AVERAGE:.2f}, 7-9 processors "
                 f"> {LAYERPIPE_7_TO_9:.2f}")
    return lines


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerators", default="2-9", help="a range, e.g. 2-9 (default)")
    parser.add_argument("--time-limit", type=float, default=6.0, help="seconds per solve (default 6)")
    parser.add_argument("--variants", default="any,adjacent,any+inter,adjacent+inter")
    parser.add_argument("--microbatches", type=int, default=256, help="async 1F1B run length (default 256)")
    parser.add_argument("--only", nargs="*", choices=list(GRAPHS), help="graphs to run (default: all found)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "layerpipe.json"))
    parser.add_argument("--plot", default=str(ROOT / "benchmarks" / "results" / "layerpipe.png"))
    args = parser.parse_args(argv)
    accelerators = accelerator_range(args.accelerators)
    variants = args.variants.split(",")
    rows = []
    for label, path in GRAPHS.items():
        if args.only and label not in args.only:
            continue
        if not path.exists():
            print(f"skipped {label}: {path} not found", file=sys.stderr)
            continue
        rows += rows_for(label, path, accelerators, variants, args.time_limit, args.microbatches)
    Path(args.json).write_text(json.dumps({"time_limit_s": args.time_limit, "microbatches": args.microbatches,
                                           "rows": rows}, indent=1) + "\n", encoding="utf-8")
    for line in table(rows):
        print(line)
    print()
    for line in markdown(rows):
        print(line)
    print()
    for line in summary(rows):
        print(line)
    worst = max((abs(r["simulated"]["rel_diff"]) for r in rows if "simulated" in r), default=0.0)
    print(f"simulated time per sample vs objective: largest relative difference {worst:.2e} "
          f"({'within' if worst <= REL_TOLERANCE else 'OUTSIDE'} 0.1%)")
    if args.plot and rows:
        plot(rows, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
