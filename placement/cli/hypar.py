"""``placement hypar NETWORK --accelerators N --batch B [--types 2|3]``: hybrid data/model parallelism.

Plans a layer chain on ``N = 2^H`` accelerators with every planner of
:mod:`placement.solvers.hypar` and prints their per-level choices and their communication side
by side (HyPar/AccPar model, :mod:`placement.costmodel.hypar`). ``--json`` prints the document
``placement-hypar/1``; ``--out FILE`` also writes it. The exact planner's progress goes to standard
error (``--quiet``: none). Exit status 0, or 2 on bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse

from placement.cli.command import SUMMARIES
from placement.cli.options import (add_output_options, check_distinct, check_writable, input_path, json_text, path_name,
                                  positive_int, print_json, progress_printer, write_text)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("hypar", help=SUMMARIES["hypar"])
    p.add_argument("network", type=input_path,
                   help="a bundled network name (e.g. vgg-a, lenet-c) or a network file (-: standard input)")
    p.add_argument("--accelerators", type=positive_int, required=True, metavar="N",
                   help="number of accelerators, a power of two from 2 to 2^53 (the array is bisected level "
                        "by level)")
    p.add_argument("--batch", type=positive_int, required=True, metavar="B",
                   help="batch size, an integer from 1 to 2^53")
    p.add_argument("--types", type=int, choices=[2, 3], default=2,
                   help="partition types: 2 = HyPar's dp and mp (default), 3 = AccPar's dp, mp and mp-out")
    p.add_argument("--out", type=path_name, metavar="FILE", help="also write the choices and totals as JSON")
    add_output_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import placement
    from placement.report.hypar import format_hypar

    from placement.costmodel.network import network_file

    source = network_file(args.network)
    check_distinct({"--out": args.out}, args.json)
    check_writable(args.out, (str(source) if source is not None else None,))
    result = placement.hypar(args.network, accelerators=args.accelerators, batch=args.batch, types=args.types,
                             progress=progress_printer(args.quiet, getattr(args, "rename", None)))
    if args.out:
        write_text(args.out, json_text(result.to_json()) + "\n")
    if args.json:
        print_json(result.to_json())
    else:
        print(format_hypar(result), end="")
    return 0
