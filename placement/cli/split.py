"""``placement split INSTANCE PLAN``: a plan of an imported model as runtime split points.

Formats: a ``split_spec`` for ``torch.distributed.pipelining`` (default), DeepSpeed
``PipelineModule`` ``layers`` and ``parts``, a Megatron pipeline layout string, the
operators of each stage for a ``pipe_split`` program, or a table of stages. A format that
cannot express the plan is refused with the reason, naming a format that can.
Exit status 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys

from placement.cli.command import SUMMARIES
from placement.cli.options import (add_output_options, check_distinct, check_separate_streams, check_writable,
                                   input_path, naming_the_file, path_name, print_json, read_once,
                                   write_text)
from placement.errors import InvalidInstanceError
from placement.handoff import SPLIT_FORMATS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("split", help=SUMMARIES["split"])
    p.add_argument("instance", type=input_path, help="instance written by 'placement import'")
    p.add_argument("plan", type=input_path, help="plan of that instance (placement solve --out)")
    p.add_argument("--format", choices=SPLIT_FORMATS, default="split-spec",
                   help="split-spec (torch.distributed.pipelining, default), deepspeed (PipelineModule layers and "
                        "parts), megatron (pipeline layout string), pipe-split (the operators of each stage, for "
                        "pipe_split_module) or stages (a table)")
    p.add_argument("--out", type=path_name, metavar="FILE",
                   help="also write the split to FILE as the text output shows it (the form's own file), with or "
                        "without --json")
    add_output_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from placement.handoff import split

    check_separate_streams(args.instance, args.plan)
    source = read_once(args.instance, InvalidInstanceError, "instance")   # read for the instance and its layout
    check_distinct({"--out": args.out}, args.json)
    check_writable(args.out, (args.instance, args.plan))
    try:
        done = split(source, args.plan, format=args.format)   # it reads the plan file once, after the instance
    except InvalidInstanceError as exc:   # an instance read through a pipe is named as a file's is
        if source is args.instance:
            raise
        raise naming_the_file(args.instance, exc) from None
    if not args.quiet:
        for note in done.notes:
            print(f"note: {args.rename(note)}", file=sys.stderr)
        for warning in done.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if args.out:
        write_text(args.out, done.text + "\n")
    if args.json:   # the notes as printed, naming the command's options
        print_json({**done.to_json(), "notes": [args.rename(note) for note in done.notes]})
    else:
        print(done.text)
    return 0
