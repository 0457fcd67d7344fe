"""``placement codesign MODEL``: the chip designs and pipeline placement that maximise throughput (or
throughput per watt) under per-chip area and power budgets, proven optimal over a grid; or, with
``--sweep SPEC``, a design study on a Dask cluster.

Exit status: 0 a plan was found (or the sweep ran, and some configuration it ran now has an optimum); 1 no
plan (no design within the budgets holds the model, or a method's plan failed the independent check; for a
sweep, no configuration it ran now has an optimum); 2 bad input or usage.
"""

from __future__ import annotations

import argparse

from placement.cli.command import SUMMARIES
from placement.cli.options import (UsageError, add_output_options, check_not_input, check_separate_streams, input_path,
                                   path_name, positive_float, positive_int, print_json, progress_printer)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("codesign", help=SUMMARIES["codesign"],
                              description="Find the chip designs (one grid design per pipeline stage, or one for "
                                          "all chips) and the placement that maximise throughput, proven optimal "
                                          "over the grid.")
    p.add_argument("model", nargs="?", metavar="MODEL", type=input_path,
                   help="model file: an instance whose nodes list their operators (or FLOPs and bytes)")
    p.add_argument("--chips", type=positive_int, metavar="K", help="chips in the pipeline (at most K are used)")
    p.add_argument("--area", type=positive_float, metavar="MM2",
                   help="area budget per chip (mm²; default 606.68, WHAM's)")
    p.add_argument("--power", type=positive_float, metavar="W", help="power (TDP) budget per chip (W)")
    p.add_argument("--homogeneous", action="store_true", help="one design for every chip (default: one per stage)")
    p.add_argument("--grid", type=input_path, metavar="FILE",
                   help="design grid file (-: standard input; default: the WHAM-scale grid of 10,000 designs)")
    # left out: None, so that --sweep refuses it typed, at throughput too
    p.add_argument("--objective", choices=("throughput", "perf-per-watt"),
                   help="throughput (default) or throughput per watt of the chips' summed TDP")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on the Dask cluster whose scheduler is at ADDRESS")
    p.add_argument("--exhaustive", action="store_true",
                   help="run the DP on every design combination instead (the independent check; small grids)")
    p.add_argument("--max-combinations", dest="max_combinations", type=positive_int, metavar="N",
                   help="--exhaustive: refuse above N DP runs (default 20,000)")
    p.add_argument("--baseline", choices=("wham", "random", "fixed"),
                   help="run a heuristic baseline instead of the exact method")
    p.add_argument("--max-ideals", dest="max_ideals", type=positive_int, metavar="N",
                   help="refuse the DP above this many ideals (default 200,000); never a graph whose "
                        "nodes are totally ordered (a chain: n + 1 ideals)")
    p.add_argument("--sweep", metavar="SPEC", help="run the design study of a sweep file instead (needs --out)")
    p.add_argument("--out", type=path_name, metavar="FILE",
                   help="--sweep: the JSON Lines file of records (resumed if present)")
    p.add_argument("--plots", type=path_name, metavar="DIR", help="--sweep: write the plots into DIR")
    p.add_argument("--workers", type=positive_int, metavar="N", help="--sweep: local Dask workers")
    add_output_options(p)
    p.set_defaults(handler=run)


def _given(args: argparse.Namespace, options: tuple[str, ...]) -> list[str]:
    """Those of ``options`` (``--max-ideals``) the command line sets."""
    return [option for option in options if getattr(args, option[2:].replace("-", "_")) not in (None, False)]


def run(args: argparse.Namespace) -> int:
    sweep_only = ("--out", "--plots", "--workers")
    if args.sweep is not None:
        ignored = _given(args, ("--chips", "--area", "--power", "--homogeneous", "--grid", "--objective",
                                "--exhaustive", "--max-combinations", "--baseline", "--max-ideals"))
        if ignored:   # the one setting SPEC names otherwise than the option: its key max_ideals
            key = " (the limit on ideals: its key max_ideals)" if "--max-ideals" in ignored else ""
            raise UsageError(f"{', '.join(ignored)}: a sweep takes its settings from SPEC{key}")
        return _sweep(args)
    if _given(args, sweep_only):
        raise UsageError(f"{', '.join(_given(args, sweep_only))}: only with --sweep SPEC")
    if args.model is None:
        raise UsageError("codesign needs a model file (or --sweep SPEC)")
    missing = [option for option, value in (("--chips", args.chips), ("--power", args.power)) if value is None]
    if missing:
        raise UsageError(f"codesign needs {' and '.join(missing)}")
    if args.grid is not None:
        check_separate_streams(args.model, args.grid, ("model", "grid"))
    import placement
    from placement.codesign.template import AREA_BUDGET_MM2
    from placement.report.codesign import format_codesign

    options = {"max_ideals": args.max_ideals} if args.max_ideals is not None else {}
    result = placement.codesign(args.model, chips=args.chips, area=args.area or AREA_BUDGET_MM2, power=args.power,
                                homogeneous=args.homogeneous, grid=args.grid,
                                objective="throughput" if args.objective is None else args.objective,
                                exhaustive=args.exhaustive, baseline=args.baseline, scheduler=args.scheduler,
                                max_combinations=args.max_combinations,
                                progress=progress_printer(args.quiet, getattr(args, "rename", None)), **options)
    if args.json:
        print_json(result.to_json())
    else:
        print(format_codesign(result))
    return 0 if result.plan is not None else 1


def _sweep(args: argparse.Namespace) -> int:
    if args.model is not None:
        raise UsageError("give a model file or --sweep SPEC, not both")
    if args.out is None:
        raise UsageError("--sweep needs --out FILE (the records, resumed if present)")
    from placement.codesign.sweep import load_spec, run_sweep
    from placement.wording import counted

    spec = load_spec(args.sweep)
    check_not_input(args.out, (args.sweep, *spec.models, *spec.grids))   # the records are appended to it
    summary = run_sweep(spec, args.out, scheduler=args.scheduler, workers=args.workers,
                        quiet=args.quiet or args.json, plots=args.plots)
    if args.json:
        from dataclasses import asdict
        print_json(asdict(summary))
    else:
        print(f"{counted(summary.ran, 'configuration run', 'configurations run')}, {summary.skipped:,} already in "
              f"{summary.out}, {summary.infeasible:,} infeasible, {counted(summary.errors, 'error')}; "
              f"{counted(len(summary.plots), 'plot written', 'plots written')}")
    return 1 if summary.ran and summary.errors + summary.infeasible == summary.ran else 0
