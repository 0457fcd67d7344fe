"""``placement simulate`` on a Piper instance: one batch of a data- and tensor-parallel plan.

``placement simulate`` hands a Piper instance here; the plan file is a parallel plan
(``{"schedule", "stages": [{"nodes", "d", "t", "tmpcs"}]}``, as ``placement solve --out``
writes it for a Piper instance, or a record of ``benchmarks/results/piper.json``).
"""

from __future__ import annotations

import argparse
from typing import Callable

from placement.cli.options import UsageError, fraction, naming_the_file, positive_float, positive_int, print_json
from placement.wording import as_given


def add_parallel_options(parser: argparse.ArgumentParser) -> None:
    """The options that apply to Piper instances only."""
    group = parser.add_argument_group("Piper instances (data- and tensor-parallel stages)")
    group.add_argument("--chunks", type=positive_int, metavar="V",
                       help="model chunks per pipeline rank under --schedule interleaved (default: the plan's)")
    group.add_argument("--forward-share", dest="forward_share", type=fraction, default=None, metavar="F",
                       help="share of each node's time per sample that is forward work (default: the one the "
                            "plan file records it was solved with, else 1/3)")
    group.add_argument("--allreduce", choices=("ring", "piper"),
                       help="data-parallel gradient sync: ring, 2(d-1)/d of the parameters per replica "
                            "(default), or piper, Piper's 4(d-1)/d")
    group.add_argument("--unit-scale", dest="unit_scale", type=positive_float, metavar="X",
                       help="factor applied to every timePerSample (default 1; 1e-3: milliseconds to seconds)")


def check_no_parallel_options(args: argparse.Namespace) -> None:
    """Refuse the Piper-only options on an instance that is not a Piper instance, even at their defaults."""
    given = [option for option, value in (("--chunks", args.chunks), ("--forward-share", args.forward_share),
                                          ("--allreduce", args.allreduce), ("--unit-scale", args.unit_scale))
             if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to Piper instances only "
                         "(data- and tensor-parallel "
                         "stages; see placement simulate --help)")


def plan_document(path: str) -> dict:
    """The decoded parallel plan file at ``path``: a JSON object (a string would be read as the path of
    another file), else :class:`InvalidPlanError` naming the file."""
    from placement.errors import InvalidPlanError
    from placement.jsonfile import load_json

    document = load_json(path, InvalidPlanError)
    if not isinstance(document, dict):
        raise InvalidPlanError(f"{path}: a parallel plan must be a JSON object with a list 'stages'")
    return document


def run_parallel(args: argparse.Namespace, instance, progress: Callable[[str], None] | None = None) -> int:
    """Simulate the plan file on the Piper ``instance`` and print the figures."""
    import placement
    from placement.api import parallel_plan_made_for
    from placement.errors import InvalidPlanError
    from placement.report.parallel_simulation import format_parallel_simulation
    from placement.simulation.parallel import read_parallel_plan

    unused = [option for option, given in (("--trace", args.trace), ("--gantt", args.gantt),
                                           ("--comm", args.comm), ("--w-fraction", args.w_fraction),
                                           ("--accelerators", args.accelerators), ("--cpus", args.cpus),
                                           ("--memory", args.memory), ("--memory-limit", args.memory_limit),
                                           ("--engine", args.engine)) if given not in (None, False)]
    if unused:
        raise UsageError(f"{', '.join(unused)} {'do' if len(unused) > 1 else 'does'} not apply to a Piper instance "
                         "(its plans run data- and "
                         "tensor-parallel stages; see placement simulate --help)")
    document = plan_document(args.plan)   # read once: simulated, and its record noted
    try:
        result = placement.simulate(instance, document, schedule=args.schedule, chunks=args.chunks,
                                    microbatches=args.microbatches, forward_share=args.forward_share,
                                    allreduce=args.allreduce, unit_scale=args.unit_scale, progress=progress)
    except InvalidPlanError as exc:   # name the plan file
        raise naming_the_file(args.plan, exc) from None
    _, devices, memory = read_parallel_plan(document)
    own = ({t.name: t.count for t in instance.device_types} if instance.device_types else instance.max_devices)
    recorded = []
    if devices is not None and devices != own:
        recorded.append(", ".join(f"{k}:{v}" for k, v in devices.items()) if isinstance(devices, dict)
                        else f"{devices} devices")
    if memory is not None and memory != instance.max_memory_per_device and not instance.device_types:
        recorded.append(f"{as_given(memory)} bytes each")
    before = [f"checked on the devices the plan file records it was solved for: {', '.join(recorded)}"] * bool(recorded)
    after = [args.rename(note) for note in result.notes]
    if args.json:   # the notes the text prints, in its order
        print_json({**result.to_json(), "notes": before + after,
                    "plan_made_for": parallel_plan_made_for(document, instance.name)})
        return 0
    for note in before:
        print(f"note: {note}")
    print(format_parallel_simulation(result, instance.name or str(args.instance)), end="")
    for note in after:
        print(f"note: {note}")
    return 0
