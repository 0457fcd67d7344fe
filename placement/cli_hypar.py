"""``placement hypar NETWORK --accelerators N --batch B [--types 2|3] [--json FILE]``.

Plans hybrid data/model parallelism of a layer chain on ``N = 2^H`` accelerators with every
planner of :mod:`placement.solvers.hypar` and prints their per-level choices and their
communication side by side (HyPar/AccPar model, :mod:`placement.costmodel.hypar`). Exit status
0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from placement.cli_args import positive_int
from placement.costmodel.hypar import (BYTES_PER_ELEMENT, LETTERS, SIDES, hierarchy_levels, partition_letters,
                                       partition_types)
from placement.costmodel.network import Network, load_network
from placement.errors import LimitExceededError, UsageError
from placement.solvers.hypar import PLANNERS, HyparPlan

FORMAT = "placement-hypar/1"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "hypar", help="plan hybrid data/model parallelism of a layer chain (HyPar/AccPar communication model)")
    p.add_argument("network", help="a bundled network name (e.g. vgg-a, lenet-c) or a network file")
    p.add_argument("--accelerators", type=positive_int, required=True, metavar="N",
                   help="number of accelerators, a power of two >= 2")
    p.add_argument("--batch", type=positive_int, required=True, metavar="B", help="batch size")
    p.add_argument("--types", type=int, choices=[2, 3], default=2,
                   help="partition types: 2 = HyPar's dp and mp (default), 3 = AccPar's dp, mp and mp-out")
    p.add_argument("--json", metavar="FILE", help="also write the choices and totals as JSON")
    p.set_defaults(handler=run_hypar)


def _amount(x: Fraction) -> str:
    return f"{x.numerator:,}" if x.denominator == 1 else f"{float(x):,.3f}"


def _json_number(x: Fraction) -> int | float:
    return x.numerator if x.denominator == 1 else float(x)


def _table(rows: list[tuple[str, ...]], left: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_plans(network: Network, accelerators: int, batch: int, types: tuple[str, ...],
                 plans: list[HyparPlan], skipped: dict[str, str]) -> str:
    """The report of ``placement hypar``: setting, choices per layer, totals, elements per level."""
    levels = hierarchy_levels(accelerators)
    kinds = [layer.kind for layer in network.layers]
    lines = [
        f"network   {network.name}: {len(network.layers)} weighted layers ({kinds.count('conv')} conv, "
        f"{kinds.count('fc')} fc), {network.parameters:,} weights",
        f"setting   {accelerators} accelerators ({levels} levels), batch {batch}, partition types "
        f"{', '.join(types)}",
        f"model     {BYTES_PER_ELEMENT} bytes per element, both sides of a pair: bytes = "
        f"{BYTES_PER_ELEMENT * SIDES} x elements",
        "",
        "choices per layer, top level first (" + ", ".join(f"{LETTERS[t]} = {t}" for t in types) + ")",
    ]
    rows = [("layer", "kind") + tuple(p.planner for p in plans)]
    for l, layer in enumerate(network.layers):
        rows.append((layer.name, layer.kind) + tuple(partition_letters(p.partition[l]) for p in plans))
    lines += _table(rows, set(range(len(rows[0]))))
    lines.append("")
    baseline = next((p.communication.bytes for p in plans if p.planner == "all-dp"), None)
    rows = [("planner", "elements", "bytes", "GB", "of all-dp", "search s")]
    for p in plans:
        share = f"{float(p.communication.bytes / baseline):.4f}" if baseline else "-"
        rows.append((p.planner, _amount(p.communication.elements), _amount(p.communication.bytes),
                     f"{float(p.communication.bytes) / 1e9:.4f}", share, f"{p.runtime_s:.4f}"))
    lines += _table(rows, {0})
    lines.append("")
    lines.append("elements per level (2^h pairs x the amount of one pair)")
    rows = [("level", "pairs") + tuple(p.planner for p in plans)]
    for h in range(levels):
        rows.append((str(h), str(2 ** h)) + tuple(_amount(p.communication.levels[h].elements) for p in plans))
    lines += _table(rows, set())
    for name, why in skipped.items():
        lines.append(f"{name}: skipped: {why}")
    return "\n".join(lines) + "\n"


def plans_to_json(network: Network, accelerators: int, batch: int, types: tuple[str, ...],
                  plans: list[HyparPlan], skipped: dict[str, str]) -> dict:
    """The JSON document ``--json`` writes (format ``placement-hypar/1``)."""
    return {
        "format": FORMAT,
        "network": network.name,
        "source": network.source,
        "accelerators": accelerators,
        "levels": hierarchy_levels(accelerators),
        "batch": batch,
        "types": list(types),
        "bytes_per_element": BYTES_PER_ELEMENT,
        "sides": SIDES,
        "parameters": network.parameters,
        "planners": [{
            "planner": p.planner,
            "choices": [{"layer": layer.name, "levels": list(p.partition[l])}
                        for l, layer in enumerate(network.layers)],
            "elements": _json_number(p.communication.elements),
            "bytes": _json_number(p.communication.bytes),
            "levels": [{"level": lv.level, "pairs": lv.pairs, "elements": _json_number(lv.elements)}
                       for lv in p.communication.levels],
            "runtime_s": p.runtime_s,
        } for p in plans],
        "skipped": skipped,
    }


def run_hypar(args: argparse.Namespace) -> int:
    network = load_network(args.network)
    types = partition_types(args.types)
    hierarchy_levels(args.accelerators)
    plans: list[HyparPlan] = []
    skipped: dict[str, str] = {}
    for name, plan in PLANNERS.items():
        try:
            plans.append(plan(network, args.accelerators, args.batch, types))
        except LimitExceededError as exc:
            skipped[name] = str(exc)
    print(format_plans(network, args.accelerators, args.batch, types, plans, skipped), end="")
    if args.json:
        doc = plans_to_json(network, args.accelerators, args.batch, types, plans, skipped)
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2)
                fh.write("\n")
        except OSError as exc:
            raise UsageError(f"{args.json}: cannot write: {exc.strerror}") from None
    return 0
