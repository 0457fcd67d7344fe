"""``placement split INSTANCE PLAN``: a plan of an imported model as runtime split points.

Formats: a ``split_spec`` for ``torch.distributed.pipelining`` (default), DeepSpeed
``PipelineModule`` ``parts``, a Megatron pipeline layout string, or a table of stages.
Exit status 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from placement.cli.options import add_output_options, print_json, write_text
from placement.io.exporters import deepspeed_parts, megatron_layout, read_layout, split_points, stages
from placement.io.plans import read_plan
from placement.report.table import format_table

SPLIT_FORMATS = ("split-spec", "deepspeed", "megatron", "stages")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("split", help="turn a plan of an imported model into runtime split points")
    p.add_argument("instance", help="instance written by 'placement import'")
    p.add_argument("plan", help="plan of that instance (placement solve --out)")
    p.add_argument("--format", choices=SPLIT_FORMATS, default="split-spec",
                   help="split-spec (torch.distributed.pipelining, default), deepspeed (PipelineModule parts), "
                        "megatron (pipeline layout string) or stages (a table)")
    p.add_argument("--out", metavar="FILE", help="also write the output to FILE")
    add_output_options(p)
    p.set_defaults(handler=run)


def _stage_rows(layout: Any, plan: Any) -> list[tuple[str, ...]]:
    """Header and one row per stage: index, device type, node count, first and last node."""
    by_id = {node.id: node for node in layout.nodes}
    rows = [("stage", "device", "#nodes", "first", "last")]
    types = [d.type for d in plan.devices if any(v in by_id for v in d.nodes)]
    for k, (stage, kind) in enumerate(zip(stages(layout, plan), types)):
        rows.append((str(k), kind, str(len(stage)), by_id[stage[0]].name, by_id[stage[-1]].name))
    return rows


def run(args: argparse.Namespace) -> int:
    layout = read_layout(args.instance)
    plan = read_plan(args.plan)
    if args.format == "split-spec":
        value: Any = {fqn: "BEGINNING" for fqn in split_points(layout, plan)}
    elif args.format == "deepspeed":
        value = deepspeed_parts(layout, plan)
    elif args.format == "megatron":
        value = megatron_layout(layout, plan)
    else:
        rows = _stage_rows(layout, plan)
        value = [dict(zip(rows[0], row)) for row in rows[1:]]
    if args.format == "stages":
        text = "\n".join(format_table(rows, left=range(5), rule=False))
    else:
        text = value if isinstance(value, str) else json.dumps(value, indent=1)
    if args.out:
        write_text(args.out, text + "\n")
    if args.json:
        print_json({"format": args.format, "split": value})
    else:
        print(text)
    return 0
