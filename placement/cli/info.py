"""``placement info INSTANCE`` (the instance's size, devices and ideals) and ``placement info --solvers``
(which MILP backends can run here). Exit status 0, or 2 on bad input."""

from __future__ import annotations

import argparse

from placement.cli.command import SUMMARIES
from placement.cli.options import (UsageError, add_output_options, input_path, load_announced, positive_int, print_json,
                                   progress_printer)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("info", help=SUMMARIES["info"])
    p.add_argument("instance", type=input_path, nargs="?",
                   help="instance file, Tarnawski JSON or the native format (none with --solvers)")
    p.add_argument("--solvers", action="store_true", help="list the MILP backends and whether they can be used")
    p.add_argument("--max-ideals", dest="max_ideals", type=positive_int, metavar="N",
                   help="stop counting ideals past this many (default 200,000)")
    add_output_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from placement.report.info import format_info
    from placement.report.solvers import format_solvers
    from placement.solvers.milp.backends import backend_availability
    from placement.summary import describe

    if args.solvers:
        if args.instance is not None:
            raise UsageError("give an instance or --solvers, not both")
        if args.max_ideals is not None:
            raise UsageError("--max-ideals counts an instance's ideals; --solvers lists the backends and takes none")
        rows = backend_availability()
        if args.json:
            print_json({"solvers": [{"backend": name, "available": ok, "detail": why} for name, ok, why in rows]})
        else:
            print(format_solvers(rows))
        return 0
    if args.instance is None:
        raise UsageError("info needs an instance file (or --solvers)")
    info = describe(load_announced(args.instance, progress_printer(args.quiet)), max_ideals=args.max_ideals)
    if args.json:
        print_json(info)
    else:
        print(format_info(info))
    return 0
