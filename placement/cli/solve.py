"""``placement solve INSTANCE``: an optimal (or bounded) placement, verified, as text or JSON.

Exit status: 0 a verified plan was found; 1 no plan (the status says whether the instance is
proven infeasible or a limit stopped the search); 2 bad input or usage; 130 interrupted (Ctrl-C),
after the plan a MILP search had found, where it had one. A ``--log`` that cannot be written once the
search has begun (a disk that filled) is a warning on standard error (unless ``--quiet``): the result is
shown, and the exit status is the result's.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import replace
from typing import Any

from placement.cli import INTERRUPTED
from placement.cli.command import SUMMARIES
from placement.cli.options import (add_device_options, add_output_options, callers_stdout, check_distinct,
                                   check_separate_streams, check_writable, devices, fraction, input_path,
                                   load_overridden, non_negative_int, path_name, positive_float, positive_int,
                                   print_json, progress_printer, relative_gap, shown_then_written)
from placement.cli.piper import devices_argument, run_piper
from placement.loading import is_piper
from placement.parallel.plan import SCHEDULES
from placement.problem.objectives import OBJECTIVES
from placement.problem.split import W_PLACEMENTS
from placement.solvers.registry import METHODS
from placement.verification.evaluate import CONTIGUITY_CLASSES


def _methods_help() -> str:
    """One line per method, from what each declares in the registry."""
    lines = ["methods (objectives; contiguity classes):",
             "  auto: the DP where it applies and the ideals are few enough, else the MILP (default)"]
    for spec in METHODS.values():
        classes = (", ".join(spec.contiguity) if tuple(spec.objectives) != ("latency",)
                   else "plans of calls, of class none")
        lines.append(f"  {spec.name}: {spec.summary} ({', '.join(spec.objectives)}; {classes})")
    lines.append("  (the classes are those of the throughput objectives; latency plans place calls)")
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("solve", help=SUMMARIES["solve"],
                              description="Find an optimal placement and verify it independently.",
                              epilog=_methods_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("instance", type=input_path,
                   help="instance file (Tarnawski JSON, the native format with deviceTypes, or a Piper "
                        "instance: docs/piper.md)")
    p.add_argument("--method", default="auto", choices=("auto", *METHODS), metavar="NAME",
                   help="solution method (default auto; see below)")
    p.add_argument("--contiguity", choices=CONTIGUITY_CLASSES,
                   help="contiguity class of the plan (default: stages; latency plans are of class none)")
    p.add_argument("--objective", choices=(*OBJECTIVES, "time-per-batch"), default="throughput",
                   help="throughput (default: max load, PipeDream), throughput-gpipe (max FW + max BW, "
                        "training), latency (one sample, inference) or time-per-batch (Piper instances with "
                        "--schedule gpipe or 1f1b: the schedule's exact time per batch)")
    p.add_argument("--stages", type=positive_int, metavar="N", help="exactly N non-empty pipeline stages")
    p.add_argument("--backend", metavar="NAME",
                   help="MILP backend (default cp-sat): one that `placement info --solvers` lists, or "
                        "pulp:SOLVER for another solver PuLP finds installed")
    p.add_argument("--time-limit", dest="time_limit", type=positive_float, metavar="SECONDS",
                   help="time limit of the whole call with the MILP, auto, local-search, latency-chain or "
                        "latency-modules (default 60 for the MILP, whose warm start, model and solver it covers, "
                        "and for latency-chain; 8 for Piper's --schedule interleaved; none for Piper's other "
                        "schedules, whose DP then runs to the end); a stop at the limit is reported as feasible "
                        "with its gap")
    # no defaults here: an option left out is None, so that the library refuses one typed where it does not
    # apply whatever its value, its default too
    p.add_argument("--gap", type=relative_gap, metavar="REL",
                   help="let the MILP stop at this relative gap (default 0: prove optimality)")
    p.add_argument("--threads", type=positive_int, metavar="N", help="MILP solver threads (default 1)")
    p.add_argument("--seed", type=non_negative_int, metavar="N",
                   help="random seed of the MILP solver (cp-sat, scip, highs; cbc and pulp take none) and the "
                        "randomised baselines (default 0)")
    p.add_argument("--log", type=path_name, metavar="FILE", help="append the MILP solver's log to FILE")
    p.add_argument("--calls", type=positive_int, metavar="Q",
                   help="latency objective: contiguous calls per accelerator, run one after another (default 1)")
    p.add_argument("--no-warm-start", dest="warm_start", action="store_false", default=None,
                   help="start the MILP from nothing instead of the DP's plan")
    p.add_argument("--backward", choices=("joint", "split"), default="joint",
                   help="training: joint (default, each backward node one task) or split (B and W tasks "
                        "placed apart; docs/backward-split.md)")
    p.add_argument("--w-placement", dest="w_placement", choices=W_PLACEMENTS,
                   help="--backward split: W on any stage (default), on its layer's stage or the next, "
                        "or only on its layer's stage (home: the unsplit plans, priced as split plans)")
    p.add_argument("--inter-layer", dest="inter_layer", action="store_true", default=None,
                   help="--backward split: B may run on the stage before its layer's")
    p.add_argument("--w-share", dest="w_share", type=fraction, metavar="FRACTION",
                   help="--backward split: W's share of a backward node's time where the instance gives none "
                        "(default 0.5)")
    p.add_argument("--split", type=input_path, metavar="FILE", help="method expert: the split (plan file) to evaluate")
    p.add_argument("--restarts", type=positive_int, metavar="N", help="method local-search: random restarts (default 10)")
    add_device_options(p, memory=" (of each device of a Piper instance without deviceTypes)")
    p.add_argument("--devices", type=devices_argument, metavar="N|TYPE:N,...",
                   help="Piper instance: devices for the data- and tensor-parallel stages (default: maxDevices), "
                        "or counts per device type of its deviceTypes (a100:8,v100:16)")
    p.add_argument("--schedule", choices=SCHEDULES,
                   help="Piper instance: the schedule whose memory model the plan obeys (default piper)")
    p.add_argument("--chunks", type=positive_int, metavar="V",
                   help="Piper instance, --schedule interleaved: model chunks per device group (default 2)")
    p.add_argument("--forward-share", dest="forward_share", type=fraction, metavar="F",
                   help="Piper instance, --objective time-per-batch: the share of each node's time per sample "
                        "that is forward work (default 1/3)")
    p.add_argument("--max-ideals", dest="max_ideals", type=positive_int, metavar="N",
                   help="refuse the DP above this many ideals (default 200,000); never a graph whose "
                        "nodes are totally ordered (a chain: n + 1 ideals)")
    p.add_argument("--out", type=path_name, metavar="PLAN.json",
                   help="write the plan (verified loads included) as JSON")
    add_output_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import placement
    from placement.report.solution import format_result

    check_distinct({"--log": args.log, "--out": args.out}, args.json)
    check_writable(args.log, (args.instance, args.split), parameter="log")
    check_writable(args.out, (args.instance, args.split))
    if args.split is not None:
        check_separate_streams(args.instance, args.split)
    progress = progress_printer(args.quiet, getattr(args, "rename", None))
    instance = load_overridden(args, progress)
    options = dict(
        method=args.method, objective=args.objective, contiguity=args.contiguity, backend=args.backend,
        time_limit=args.time_limit, gap=args.gap, threads=args.threads, seed=args.seed, stages=args.stages,
        calls=args.calls, warm_start=args.warm_start, log=args.log, progress=progress,
        max_ideals=args.max_ideals, split=args.split, restarts=args.restarts, backward=args.backward,
        w_placement=args.w_placement, inter_layer=args.inter_layer, w_share=args.w_share, devices=args.devices,
        schedule=args.schedule, chunks=args.chunks, forward_share=args.forward_share, **devices(args))
    if is_piper(instance):
        return run_piper(args, instance, options)
    interrupted = False
    with warnings.catch_warnings():
        _say_log_warnings(args.quiet)
        try:
            result = placement.solve(instance, **options)
        except placement.Interrupted as exc:   # the plan in hand is shown, and the status still says interrupted
            result, interrupted = exc.result, True
    # its message names the library's parameters ("warm_start was not used") by their options, in every output
    rename = getattr(args, "rename", None)
    shown = result if rename is None or not result.message else replace(result, message=rename(result.message))
    def show() -> None:
        with callers_stdout():   # a solver Ctrl-C could not stop may still have the output sent to its log
            if args.json:
                print_json(shown.to_json())
            else:
                print(format_result(instance, shown), end="")

    shown_then_written(show, args.out, shown, args.quiet)
    if interrupted:
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED
    return 0 if result.ok else 1


def _say_log_warnings(quiet: bool) -> None:
    """Inside ``warnings.catch_warnings()``, around the solve: the warning that the solver's log could not be
    written once the search had begun (:class:`placement.LogWriteWarning`, about the library's ``log``) is the
    command's own line naming ``--log``, once for each text and not with ``quiet``; any other warning is shown
    as Python shows it, when it is raised."""
    from placement.errors import LogWriteWarning

    warnings.simplefilter("always", LogWriteWarning)   # --quiet leaves the others ignored; -W error them raised
    python_shows = warnings.showwarning
    said = set()

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if not issubclass(category, LogWriteWarning):
            python_shows(message, category, filename, lineno, file, line)
        elif not quiet and str(message) not in said:
            said.add(str(message))
            print(f"warning: --log{str(message).removeprefix('log')}", file=sys.stderr)

    warnings.showwarning = show
