"""HyPar/AccPar planners on every bundled network, and the communication ledger on the published instances.

Part 1 plans every bundled network on N = 2, 4, ..., 64 accelerators (batch 256 by default) with
every planner of ``placement.solvers.hypar`` and prints, per network and N, the communication of
each planner (elements, bytes) and the search time of each (best of ``--repeat`` runs). The
paper row compares VGG-A on 16 accelerators with the totals HyPar (HPCA 2019) reports.

Part 2 solves every throughput instance of Tarnawski et al. (read from
``../shared/tarnawski/throughput-inputs``, or ``--instances``; skipped when the default folder is absent,
or with ``--no-ledger``, keeping the JSON file's rows; ``--instances`` given and not a folder, or a file
there that is no instance, is refused before any work) with the DP and checks the
communication ledger of the optimal plan against the communication the load model charged.
Where they disagree, the column "mate costs" says whether every boundary node at fault is a
backward node charged exactly its forward mate's transfer cost (the published training layer
graphs copy those costs while their edges carry the backward tensors' own sizes).

    python benchmarks/hypar.py [--batch 256] [--types 2] [--max-accelerators 64] [--json benchmarks/results/hypar.json]

The run's rows of part 1 replace the JSON file's rows of the same network, accelerator count, batch and
partition types; the file's other rows are kept (a run to 4 accelerators leaves those of 8 to 64). Its ledger
rows of part 2 replace the file's of the same instances and the others are kept (a folder of some instances
keeps the others'); the run says how many ledger rows it kept and replaced.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from placement.costmodel.hypar import HYPAR_TYPES, partition_letters, partition_types
from placement.costmodel.network import bundled_networks, load_network
from placement.errors import LimitExceededError
from placement.solvers.hypar import PLANNERS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (cannot_write, exit_with, integer_at_least, machine,  # noqa: E402  (beside this script)
                    merged_and_counted, merged_rows, positive_int, read_instances, refuse, said_merge)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INSTANCES = ROOT.parent / "shared" / "tarnawski" / "throughput-inputs"
PAPER = {"all-dp": 15.9e9, "hypar": 1.47e9}   # VGG-A, 16 accelerators, bytes per step (HyPar, HPCA 2019)


def _number(x) -> int | float:
    """A fraction as an int when it is whole, else as a float."""
    return x.numerator if x.denominator == 1 else float(x)


def plan_rows(batch: int, types: tuple[str, ...], max_accelerators: int, repeat: int) -> list[dict]:
    """Part 1: every planner on every bundled network at 2, 4, ... ``max_accelerators``; prints each row."""
    rows = []
    names = list(PLANNERS)
    header = (f"{'network':8} {'N':>3} " + " ".join(f"{n + ' GB':>19}" for n in names)
              + f" {'exact gain':>10} " + " ".join(f"{n[:9] + ' ms':>12}" for n in names))
    print(header)
    print("-" * len(header))
    for name in bundled_networks():
        network = load_network(name)
        accelerators = 2
        while accelerators <= max_accelerators:
            row = {"network": network.name, "accelerators": accelerators, "batch": batch, "types": list(types),
                   "parameters": network.parameters, "planners": {}}
            for planner, plan in PLANNERS.items():
                best = None
                try:
                    for _ in range(repeat):
                        start = time.perf_counter()
                        result = plan(network, accelerators, batch, types)
                        elapsed = time.perf_counter() - start
                        best = elapsed if best is None else min(best, elapsed)
                except LimitExceededError as exc:
                    row["planners"][planner] = {"skipped": str(exc)}
                    continue
                row["planners"][planner] = {
                    "elements": _number(result.communication.elements),
                    "bytes": _number(result.communication.bytes),
                    "seconds": best,
                    "choices": [partition_letters(r) for r in result.partition],
                }
            rows.append(row)
            p = row["planners"]
            gbs = " ".join(f"{p[n]['bytes'] / 1e9:>19.6f}" if "bytes" in p[n] else f"{'skipped':>19}" for n in names)
            gain = (f"{1 - p['exact']['bytes'] / p['hypar']['bytes']:>10.3%}"
                    if "bytes" in p["exact"] and p["hypar"]["bytes"] else f"{'-':>10}")
            times = " ".join(f"{p[n]['seconds'] * 1e3:>12.2f}" if "seconds" in p[n] else f"{'-':>12}" for n in names)
            print(f"{name:8} {accelerators:>3} {gbs} {gain} {times}", flush=True)
            accelerators *= 2
    return rows


def paper_rows(rows: list[dict]) -> list[dict]:
    """VGG-A on 16 accelerators at batch 256 with HyPar's two partition types against the totals the
    HyPar paper reports (a third type, AccPar's, changes the search the paper's figure is for)."""
    out = []
    for row in rows:
        if row["network"] == "VGG-A" and row["accelerators"] == 16 and row["batch"] == 256 \
                and row["types"] == list(HYPAR_TYPES):
            for planner, reported in PAPER.items():
                ours = row["planners"][planner]
                out.append({"planner": planner, "paper_bytes": reported, "elements": ours["elements"],
                            "bytes": ours["bytes"], "difference": ours["bytes"] / reported - 1})
    return out


def ledger_rows(problems: dict) -> list[dict]:
    """Part 2: the communication ledger of the DP's optimal plan on every instance of ``problems`` (by path)."""
    from placement.solvers.dp import solve_dp
    from placement.verification.ledger import AGREES, DISAGREES, NOT_CHARGED, communication_ledger

    rows = []
    header = (f"{'instance':36} {'devices':>7} {'time per byte':>14} {'sized tensors':>14} {'agree':>6} "
              f"{'disagree':>8} {'off nodes':>9} {'mate costs':>10} {'ledger ms':>9}")
    print(header)
    print("-" * len(header))
    for path, problem in problems.items():
        solution = solve_dp(problem)
        if solution.plan is None:   # no pipeline fits: no plan whose ledger to check
            print(f"{path.parent.name}/{path.stem}: no plan ({solution.status}): no ledger", flush=True)
            continue
        plan = solution.plan
        start = time.perf_counter()
        ledger = communication_ledger(problem, plan)
        elapsed = time.perf_counter() - start
        charging = [d for d in ledger.devices if d.status != NOT_CHARGED]
        off = sorted({m.node for d in ledger.devices for m in d.mismatches})
        mates = {n.colour: n for n in problem.nodes if not n.backward and n.colour is not None}
        # a mismatch is "explained" when the node is a backward node charged its forward mate's cost
        explained = all(problem.node(v).backward and problem.node(v).colour in mates
                        and problem.node(v).out_cost == mates[problem.node(v).colour].out_cost for v in off)
        rho = ledger.time_per_byte
        row = {"instance": f"{path.parent.name}/{path.stem}", "devices": len(ledger.devices),
               "time_per_byte": rho.value, "supporting": rho.supporting, "sized": rho.sized,
               "charging_devices": len(charging),
               "agreeing_devices": sum(1 for d in charging if d.status == AGREES),
               "disagreeing_devices": sum(1 for d in charging if d.status == DISAGREES),
               "mismatched_nodes": off, "mismatches_are_backward_mate_costs": explained,
               "agrees": ledger.agrees, "disagreements": list(ledger.disagreements),
               "ledger_s": elapsed}
        rows.append(row)
        per_byte = "-" if rho.value is None else f"{rho.value:.6g}"   # None: no edge carries a tensor size
        print(f"{row['instance']:36} {row['devices']:>7} {per_byte:>14} {f'{rho.supporting}/{rho.sized}':>14} "
              f"{row['agreeing_devices']:>6} {row['disagreeing_devices']:>8} {len(off):>9} "
              f"{('yes' if explained else 'NO') if off else '-':>10} {elapsed * 1e3:>9.2f}",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parts 1 and 2 of the module docstring; print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=positive_int, default=256)
    parser.add_argument("--types", type=int, choices=[2, 3], default=2)
    parser.add_argument("--max-accelerators", type=integer_at_least(2), default=64)
    parser.add_argument("--repeat", type=positive_int, default=3,
                        help="time each planner as the best of this many runs")
    parser.add_argument("--instances", type=Path, default=None,
                        help="the throughput instances of part 2 (default ../shared/tarnawski/throughput-inputs)")
    parser.add_argument("--no-ledger", action="store_true",
                        help="skip part 2 (the ledger on the published instances; the JSON file's rows are kept)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "hypar.json")
    args = parser.parse_args(argv)
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    if args.instances is not None and not args.instances.is_dir():
        return refuse(f"--instances {args.instances}: no such folder")
    instances = DEFAULT_INSTANCES if args.instances is None else args.instances
    run_ledger = not args.no_ledger and instances.is_dir()
    problems, unreadable = read_instances(sorted(instances.rglob("*.json")) if run_ledger else [])
    if unreadable:
        return refuse(unreadable)
    types = partition_types(args.types)

    print(f"Part 1: bytes per training step (4 bytes per element, both sides of a pair), batch {args.batch}, "
          f"partition types {', '.join(types)}\n")
    rows = plan_rows(args.batch, types, args.max_accelerators, args.repeat)
    paper = paper_rows(rows)
    if paper:
        print("\nVGG-A, 16 accelerators, against the HyPar paper:")
        for r in paper:
            print(f"  {r['planner']:7} paper {r['paper_bytes'] / 1e9:.2f} GB, here {r['bytes'] / 1e9:.4f} GB "
                  f"({r['elements']:,} elements), difference {r['difference']:+.2%}")
    ledger: list[dict] = []
    if not args.no_ledger:
        print("\nPart 2: the communication ledger of the DP's optimal plan on the published throughput instances\n")
        if run_ledger:
            ledger = ledger_rows(problems)
        else:
            print(f"no instances at {instances} (the published instances live in ../shared); skipped")
    here = {"machine": machine()}
    # the file's ledger rows of the instances this run did not solve stay (all of them where part 2 was not run)
    solved = len(ledger)
    ledger, kept, replaced = merged_and_counted(args.json, ledger, ("instance",), here, "ledger")
    # part 1 at other accelerator counts, batches or types replaces their rows and keeps the file's others
    planners = merged_rows(args.json, rows, ("network", "accelerators", "batch", "types"), here, table="planners")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**here, "planners": planners, "paper": paper_rows(planners),
                                     "ledger": ledger}, indent=2) + "\n")
    print("\n" + said_merge(args.json, solved, kept, replaced, "ledger"))
    return 0


if __name__ == "__main__":
    exit_with(main)
