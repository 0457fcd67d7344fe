"""``placement simulate INSTANCE PLAN``: run a plan through a pipeline schedule, micro-batch by micro-batch.

Exit status: 0 the run was simulated (and the trace / chart written); 2 bad
input or usage (one line ``error: ...`` on stderr), including a plan that is
invalid for the instance or is not a pipeline.
"""

from __future__ import annotations

import argparse

from placement.cli_args import byte_count, fraction, non_negative_int, positive_int
from placement.errors import UsageError
from placement.io.plans import read_plan
from placement.io.tarnawski import read_instance
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.report.gantt import matplotlib_modules, write_gantt
from placement.report.simulation import format_simulation
from placement.report.trace import write_trace
from placement.simulation.program import COMM_MODES, INLINE
from placement.simulation.schedules import SCHEDULES
from placement.simulation.simulator import ENGINES, simulate

DEFAULT_MICROBATCHES = 64


def _problem(args: argparse.Namespace) -> Instance:
    """The instance with the device counts and memory the plan was solved for."""
    problem = read_instance(args.instance)
    counts = {name: value for name, value in ((ACCELERATOR, args.accelerators), (CPU, args.cpus))
              if value is not None}
    memory = {ACCELERATOR: args.memory} if args.memory is not None else {}
    names = {t.name for t in problem.device_types}
    if (set(counts) | set(memory)) - names:
        raise UsageError("this instance has no accelerator/cpu device types to override")
    return problem.with_devices(counts, memory) if counts or memory else problem


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate", help="run a plan through a pipeline schedule, micro-batch by micro-batch",
        description="Event-driven simulation of a plan: time per sample or iteration time, utilisation, "
                    "bubbles, micro-batches in flight and peak memory per stage; optionally a Chrome/Perfetto "
                    "trace and a Gantt chart.")
    p.add_argument("instance", help="instance file (Tarnawski JSON format)")
    p.add_argument("plan", help="plan file: the output of 'placement solve --out', a Tarnawski plan or an expert split")
    p.add_argument("--schedule", choices=list(SCHEDULES), metavar="NAME",
                   help="one of " + ", ".join(SCHEDULES) + " (default: stream for inference graphs, "
                        "1f1b-async for training graphs)")
    p.add_argument("--microbatches", type=positive_int, default=DEFAULT_MICROBATCHES, metavar="M",
                   help=f"micro-batches to run (default {DEFAULT_MICROBATCHES}); one iteration of M for the "
                        "flush schedules")
    p.add_argument("--comm", choices=COMM_MODES, default=INLINE,
                   help="inline: communication inside each device's call, as in the load model (default); "
                        "link: transfers on a separate link per device, overlapping compute")
    p.add_argument("--w-fraction", type=fraction, metavar="F",
                   help="split-backward: share of each backward's compute that is weight-gradient work "
                        "(default 0.5)")
    p.add_argument("--accelerators", type=non_negative_int, metavar="N",
                   help="the instance's number of accelerators, as given to 'placement solve'")
    p.add_argument("--cpus", type=non_negative_int, metavar="N", help="the instance's number of CPU cores, as for solve")
    p.add_argument("--memory", type=byte_count, metavar="BYTES", help="memory of each accelerator, as for solve")
    p.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace of the run")
    p.add_argument("--gantt", metavar="GANTT.png", help="draw a Gantt chart of the run (needs matplotlib)")
    p.add_argument("--engine", choices=ENGINES, default="heap",
                   help="event engine: heap (built in, default) or simpy (same model, needs SimPy)")
    p.set_defaults(handler=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    if args.gantt:
        matplotlib_modules()     # fail before simulating when the chart cannot be drawn
    problem = _problem(args)
    plan = read_plan(args.plan)
    schedule = args.schedule or ("1f1b-async" if problem.is_training else "stream")
    result = simulate(problem, plan, schedule, args.microbatches, args.comm, args.w_fraction, args.engine)
    title = problem.name or str(args.instance)
    print(format_simulation(result, title), end="")
    if args.trace:
        write_trace(result, args.trace, f"{title}: {result.schedule}")
        print(f"trace written to {args.trace} (open it in Perfetto or chrome://tracing)")
    if args.gantt:
        write_gantt(result, args.gantt, title)
        print(f"Gantt chart written to {args.gantt}")
    return 0
