"""``placement solve`` on a Piper instance: the data- and tensor-parallel plan, as text or JSON."""

from __future__ import annotations

import argparse

from placement.cli.options import json_text, positive_int, print_json, progress_printer, write_text
from placement.io.piper import PiperInstance


def devices_argument(text: str) -> int | str:
    """``--devices``: a device count (``10``), or counts per device type (``a100:8,v100:16``), which the
    library reads (:mod:`placement.parallel.devices`)."""
    return text if ":" in text else positive_int(text)


def run_piper(args: argparse.Namespace, instance: PiperInstance) -> int:
    """Solve through :func:`placement.solve` (which refuses the options that do not apply) and render."""
    import placement
    from placement.report.parallel import format_parallel_result

    result = placement.solve(instance, method=args.method, objective=args.objective, contiguity=args.contiguity,
                             stages=args.stages, accelerators=args.accelerators, cpus=args.cpus, memory=args.memory,
                             devices=args.devices, schedule=args.schedule, max_ideals=args.max_ideals,
                             chunks=args.chunks, time_limit=args.time_limit,
                             backward=getattr(args, "backward", "joint"), progress=progress_printer(args.quiet))
    if args.out:
        write_text(args.out, json_text(result.to_json()) + "\n")
    if args.json:
        print_json(result.to_json())
    else:
        print(format_parallel_result(instance, result), end="")
    return 0 if result.ok else 1


__all__ = ["devices_argument", "run_piper"]
