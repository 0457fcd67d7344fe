"""``placement simulate INSTANCE PLAN``: run a plan through a pipeline schedule, micro-batch by micro-batch.

Exit status: 0 the run was simulated (and the trace / chart written); 2 bad
input or usage (one line ``error: ...`` on stderr), including a plan that is
invalid for the instance or is not a pipeline.
"""

from __future__ import annotations

import argparse

from placement.api import DEFAULT_MICROBATCHES
from placement.cli.command import SUMMARIES
from placement.cli.options import (add_device_options, add_output_options, check_distinct, check_writable, devices,
                                   fraction, input_path, load_overridden, path_name, positive_byte_count, positive_int,
                                   print_json, progress_printer, recorded_devices_note)
from placement.cli.simulate_parallel import add_parallel_options, check_no_parallel_options, run_parallel
from placement.simulation.parallel_orders import PARALLEL_SCHEDULES
from placement.simulation.program import COMM_MODES
from placement.simulation.schedules import SCHEDULES
from placement.errors import LimitExceededError
from placement.simulation.simulator import ENGINES, FIGURES_ONLY


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help=SUMMARIES["simulate"],
        description="Event-driven simulation of a plan: time per sample or iteration time, utilisation, "
                    "bubbles, micro-batches in flight and peak memory per stage; optionally a Chrome/Perfetto "
                    "trace and a Gantt chart.")
    p.add_argument("instance", type=input_path,
                   help="instance file (Tarnawski JSON, the native format, or a Piper instance)")
    p.add_argument("plan", type=input_path,
                   help="plan file: the output of 'placement solve --out', a Tarnawski plan or an expert split")
    p.add_argument("--schedule", choices=list(dict.fromkeys(list(SCHEDULES) + list(PARALLEL_SCHEDULES))),
                   metavar="NAME",
                   help="one of " + ", ".join(SCHEDULES) + " (default: stream for inference graphs, "
                        "1f1b-async for training graphs); for a Piper instance one of "
                        + ", ".join(PARALLEL_SCHEDULES) + " (default: the plan's)")
    p.add_argument("--microbatches", type=positive_int, metavar="M",
                   help=f"micro-batches to run (default {DEFAULT_MICROBATCHES}); one iteration of M for the "
                        "flush schedules; for a Piper instance the micro-batches of the batch (default mbsInBatch)")
    p.add_argument("--comm", choices=COMM_MODES,   # left out: None, so that a Piper instance refuses it typed
                   help="inline: communication inside each device's call, as in the load model (default); "
                        "link: transfers on a separate link per device, overlapping compute")
    p.add_argument("--w-fraction", dest="w_fraction", type=fraction, metavar="F",
                   help="split-backward, zb-h1, zb-h2: share of each backward's compute that is weight-gradient work "
                        "(default: the weight-gradient times the instance gives, else 0.5); a split-backward plan: "
                        "the W share of its backward nodes (default: the share its file records, else 0.5)")
    add_device_options(p, " (as given to solve)")
    p.add_argument("--trace", type=path_name, metavar="TRACE.json",
                   help="write a Chrome/Perfetto trace of the run")
    p.add_argument("--gantt", type=path_name, metavar="GANTT.png",
                   help="draw a Gantt chart of the run (needs matplotlib); .png, .svg or .pdf")
    p.add_argument("--memory-limit", dest="memory_limit", type=positive_byte_count, metavar="BYTES",
                   help="refuse a run that would take more memory than this (default 2 GiB)")
    p.add_argument("--engine", choices=ENGINES,
                   help="event engine: heap (built in, default) or simpy (same model, needs SimPy)")
    add_parallel_options(p)
    add_output_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import placement
    from placement.io.plans import made_for_another, read_plan_file
    from placement.report.gantt import chart_format, matplotlib_modules
    from placement.report.run_files import write_run_files
    from placement.report.simulation import format_simulation

    if args.gantt:               # fail before simulating when the chart cannot be drawn
        chart_format(args.gantt, parameter="gantt")
        matplotlib_modules()
    progress = progress_printer(args.quiet, getattr(args, "rename", None))
    read: list = []   # the plan file, where reading the instance took the devices it records
    instance = load_overridden(args, progress, args.plan, read)
    if not isinstance(instance, placement.Instance):   # a Piper instance: data- and tensor-parallel stages
        return run_parallel(args, instance, progress)
    check_no_parallel_options(args)
    check_writable(args.trace, (args.instance, args.plan), parameter="trace")   # or its outputs cannot be written
    check_writable(args.gantt, (args.instance, args.plan), parameter="gantt")
    check_distinct({"--trace": args.trace, "--gantt": args.gantt}, args.json)
    plan = read[0] if read else read_plan_file(args.plan)   # read once: for its record and itself; named
    other = made_for_another(plan, instance.name)
    try:
        result = placement.simulate(instance, plan, schedule=args.schedule,
                                    microbatches=args.microbatches or DEFAULT_MICROBATCHES,
                                    comm=args.comm, w_fraction=args.w_fraction, engine=args.engine,
                                    memory_limit=args.memory_limit, keep_tasks=bool(args.trace or args.gantt),
                                    progress=progress, **devices(args))
    except LimitExceededError as exc:   # the command keeps the task table for --trace and --gantt only
        text = str(exc)
        if not text.endswith(FIGURES_ONLY):
            raise
        raise LimitExceededError(text[:-len(FIGURES_ONLY)] + "keep the figures only: leave out --trace and --gantt, "
                                 "in memory independent of the micro-batches", exc.parameter) from None
    title = instance.name or str(args.instance)
    write_run_files(result, args.trace, args.gantt, title, f"{title}: {result.schedule}")   # both or neither
    devices_note = recorded_devices_note(args, plan, "run")
    if args.json:   # the notes as the text prints them, the devices the run took from the plan file first
        document = result.to_json()
        print_json({**document, "notes": [devices_note] * bool(devices_note) + document["notes"],
                    "plan_made_for": other})
        return 0
    if devices_note:
        print(f"note: {devices_note}")
    print(format_simulation(result, title), end="")
    if args.trace:
        print(f"trace written to {args.trace} (open it in Perfetto or chrome://tracing)")
    if args.gantt:
        print(f"Gantt chart written to {args.gantt}")
    return 0
