"""Commands ``placement import`` (a model to an instance) and ``placement split`` (a plan to runtime splits).

``placement import MODEL --out INSTANCE.json`` reads a PyTorch model (``pkg.module:factory``
or ``file.py:factory``; the factory takes no arguments and returns ``(model, args)`` or
``(model, args, kwargs)``, the example inputs of ``torch.export``) or an ONNX file
(``model.onnx``), and writes a Tarnawski instance costed by the roofline model on the
chosen devices. ``placement split INSTANCE PLAN`` turns a plan of such an instance into a
``split_spec``, DeepSpeed ``parts``, a Megatron layout string, or a table of stages.

Exit status: 0 success, 2 bad input or usage (one line ``error: ...`` on stderr).
Operators without a FLOP formula are reported as one ``warning: ...`` line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from placement.cli_args import byte_count, non_negative_int, positive_int
from placement.costmodel.roofline import (DEFAULT_ACCELERATOR, DEFAULT_CPU, ELEMENT_BYTES, Platform, find_device,
                                          load_catalogue)
from placement.errors import PlacementError, UsageError
from placement.io.exporters import deepspeed_parts, megatron_layout, read_layout, split_points, stages
from placement.io.opgraph import GRANULARITIES, CostModelWarning, ImportedModel
from placement.io.plans import read_plan

SPLIT_FORMATS = ("split-spec", "deepspeed", "megatron", "stages")


def _dim(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, positive_int(value)


def register(subparsers: Any) -> None:
    """Add the ``import`` and ``split`` commands."""
    p = subparsers.add_parser("import", help="turn a PyTorch or ONNX model into an instance")
    p.add_argument("model", help="pkg.module:factory, file.py:factory (returning (model, args[, kwargs])), "
                                 "or an .onnx file")
    p.add_argument("--out", required=True, metavar="INSTANCE.json", help="where to write the instance")
    p.add_argument("--devices", nargs="+", default=[DEFAULT_ACCELERATOR, DEFAULT_CPU], metavar="NAME|FILE.json",
                   help="device catalogue files (.json, extending the bundled one) and the ids of one accelerator "
                        f"and one CPU (default: {DEFAULT_ACCELERATOR} {DEFAULT_CPU})")
    p.add_argument("--accelerators", type=non_negative_int, default=4, metavar="N", help="number of accelerators (default 4)")
    p.add_argument("--cpus", type=non_negative_int, default=1, metavar="M", help="number of CPU sockets (default 1)")
    p.add_argument("--memory", type=byte_count, metavar="BYTES",
                   help="memory per accelerator (default: the catalogue's)")
    p.add_argument("--link", metavar="NAME", help="accelerator link for transfer costs (default: its default_link)")
    p.add_argument("--training", action="store_true", help="add backward nodes (training graph)")
    p.add_argument("--granularity", choices=GRANULARITIES, default="module",
                   help="one node per module run (default) or per operator")
    p.add_argument("--module-depth", type=positive_int, metavar="D",
                   help="group by module paths cut to D levels (default: leaf modules)")
    p.add_argument("--dtype", choices=tuple(ELEMENT_BYTES),
                   help="treat every floating-point tensor as this type (default: the model's own)")
    p.add_argument("--dim", type=_dim, action="append", default=[], metavar="NAME=VALUE",
                   help="ONNX: fix a symbolic input dimension (repeatable)")
    p.add_argument("--name", help="instance name recorded in the file (default: from MODEL)")
    p.set_defaults(handler=cmd_import)

    p = subparsers.add_parser("split", help="turn a plan of an imported model into runtime split points")
    p.add_argument("instance", help="instance written by 'placement import'")
    p.add_argument("plan", help="plan of that instance (placement solve --out)")
    p.add_argument("--format", choices=SPLIT_FORMATS, default="split-spec",
                   help="split-spec (torch.distributed.pipelining, default), deepspeed (PipelineModule parts), "
                        "megatron (pipeline layout string) or stages (a table)")
    p.add_argument("--out", metavar="FILE", help="also write the output to FILE")
    p.set_defaults(handler=cmd_split)


# ----- import -----------------------------------------------------------------------------

def platform_from_args(devices: list[str], accelerators: int, cpus: int, memory: float | None,
                       link: str | None) -> Platform:
    """Catalogue files extend the bundled catalogue; the remaining names pick one accelerator and one CPU."""
    files = [d for d in devices if d.lower().endswith(".json")]
    names = [d for d in devices if not d.lower().endswith(".json")]
    catalogue = load_catalogue(files)
    chosen = [find_device(catalogue, name) for name in names]
    by_kind: dict[str, list] = {"accelerator": [], "cpu": []}
    for spec in chosen:
        by_kind[spec.kind].append(spec)
    for kind, specs in by_kind.items():
        if len(specs) > 1:
            raise UsageError(f"--devices names {len(specs)} {kind}s ({', '.join(s.id for s in specs)}); give one")
    accelerator = by_kind["accelerator"][0] if by_kind["accelerator"] else find_device(catalogue, DEFAULT_ACCELERATOR)
    cpu = by_kind["cpu"][0] if by_kind["cpu"] else find_device(catalogue, DEFAULT_CPU)
    return Platform(accelerator, cpu, accelerators, cpus, memory, link)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def load_factory(spec: str) -> tuple[Any, tuple, dict]:
    """Call the factory named ``pkg.module:factory`` or ``file.py:factory``; check what it returns."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"cannot read model {spec!r}: expected pkg.module:factory, file.py:factory or FILE.onnx")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"{path}: no such file")
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except PlacementError:
        raise
    except Exception as exc:  # whatever the user's module raises on import
        raise UsageError(f"cannot import {module_name}: {_first_line(exc)}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UsageError(f"{module_name} has no function {attr!r}")
    try:
        result = factory()
    except PlacementError:
        raise
    except Exception as exc:  # whatever the user's factory raises
        raise UsageError(f"{spec}() failed: {_first_line(exc)}") from None
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise UsageError(f"{spec}() must return (model, args) or (model, args, kwargs), got {type(result).__name__}")
    model, args = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else {}
    if not isinstance(args, (tuple, list)):
        raise UsageError(f"{spec}(): the example args must be a tuple, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise UsageError(f"{spec}(): the example kwargs must be a dict, got {type(kwargs).__name__}")
    return model, tuple(args), kwargs


def import_model_spec(spec: str, platform: Platform, *, training: bool, granularity: str,
                      module_depth: int | None, dtype: str | None, dims: dict[str, int],
                      name: str | None) -> ImportedModel:
    """Import ``spec`` (a factory or an .onnx file) as an instance."""
    if spec.lower().endswith(".onnx"):
        from placement.io.onnx_import import import_onnx

        imported = import_onnx(spec, platform=platform, training=training, granularity=granularity,
                               module_depth=module_depth, dtype=dtype, dims=dims)
        label = name or Path(spec).stem
    else:
        if dims:
            raise UsageError("--dim applies to ONNX models only")
        from placement.io.torch_export import import_torch, require_torch

        require_torch()
        model, args, kwargs = load_factory(spec)
        label = name or spec.rpartition(":")[2]
        imported = import_torch(model, args, kwargs, platform=platform, training=training, granularity=granularity,
                                module_depth=module_depth, dtype=dtype, name=label)
    imported.instance["about"]["model"] = label
    return imported


def cmd_import(args: argparse.Namespace) -> int:
    platform = platform_from_args(args.devices, args.accelerators, args.cpus, args.memory, args.link)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CostModelWarning)
        imported = import_model_spec(args.model, platform, training=args.training, granularity=args.granularity,
                                     module_depth=args.module_depth, dtype=args.dtype, dims=dict(args.dim),
                                     name=args.name)
    for w in caught:
        if issubclass(w.category, CostModelWarning):
            print(f"warning: {w.message}", file=sys.stderr)
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(imported.instance, fh, indent=1, allow_nan=False)
            fh.write("\n")
    except OSError as exc:
        raise UsageError(f"{args.out}: cannot write: {exc.strerror}") from None
    problem = imported.problem
    forward = sum(1 for n in problem.nodes if not n.backward)
    about = imported.instance["about"]
    print(f"wrote {args.out}: {len(problem.nodes)} nodes ({forward} forward), {len(problem.edges)} edges, "
          f"{about['forward_flops']:.6g} forward FLOPs; {platform.accelerators} x {platform.accelerator.id} "
          f"({platform.accelerator_memory:.6g} bytes each), {platform.cpus} x {platform.cpu.id}")
    return 0


# ----- split ------------------------------------------------------------------------------

def _stage_table(layout: Any, plan: Any) -> str:
    by_id = {node.id: node for node in layout.nodes}
    rows = [("stage", "device", "#nodes", "first", "last")]
    parts = stages(layout, plan)
    types = [d.type for d in plan.devices if any(v in by_id for v in d.nodes)]
    for k, (stage, kind) in enumerate(zip(parts, types)):
        rows.append((str(k), kind, str(len(stage)), by_id[stage[0]].name, by_id[stage[-1]].name))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def cmd_split(args: argparse.Namespace) -> int:
    layout = read_layout(args.instance)
    plan = read_plan(args.plan)
    if args.format == "split-spec":
        text = json.dumps({fqn: "BEGINNING" for fqn in split_points(layout, plan)}, indent=1)
    elif args.format == "deepspeed":
        text = json.dumps(deepspeed_parts(layout, plan), indent=1)
    elif args.format == "megatron":
        text = megatron_layout(layout, plan)
    else:
        text = _stage_table(layout, plan)
    print(text)
    if args.out:
        try:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.out}: cannot write: {exc.strerror}") from None
    return 0
