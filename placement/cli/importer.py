"""Commands ``placement import`` (a model to an instance) and ``placement split`` (a plan to runtime splits).

``placement import MODEL --out INSTANCE.json`` reads a PyTorch model (``pkg.module:factory``
or ``file.py:factory``; the factory takes no arguments and returns ``(model, args)`` or
``(model, args, kwargs)``, the example inputs of ``torch.export``) or an ONNX file
(``model.onnx``), and writes a Tarnawski instance costed by the roofline model on the
chosen devices: accelerators, and CPUs only when asked for (``--cpus``, or a CPU named in
``--devices``). ``placement split INSTANCE PLAN`` turns a plan of such an instance into a
``split_spec``, DeepSpeed ``layers`` and ``parts``, a Megatron layout string, the operators
of each ``pipe_split`` stage, or a table of stages.

Exit status: 0 success, 2 bad input or usage (one line ``error: ...`` on stderr).
Operators without a FLOP formula are reported as one ``warning: ...`` line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import re
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

from placement.cli.command import SUMMARIES
from placement.cli.options import (UsageError, add_output_options, check_distinct, check_not_input, check_writable,
                                   non_negative_int, path_name, positive_byte_count, positive_int, print_json,
                                   write_text)
from placement.costmodel.roofline import (DEFAULT_ACCELERATOR, DEFAULT_CPU, ELEMENT_BYTES, Platform, find_device,
                                          load_catalogue)
from placement.errors import InvalidInstanceError, InvalidParameterError, PlacementError
from placement.io.op_grouping import GRANULARITIES
from placement.io.opgraph import CostModelWarning, ImportedModel
from placement.jsonfile import file_stem
from placement.whole_file import standard_stream
from placement.wording import counted


def _dim(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, positive_int(value)


def _model_name(text: str) -> str:
    """The model name of ``--name``: some text besides spaces (an empty one would record no name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a model name, got {text!r}")
    return text


def register(subparsers: Any) -> None:
    """Add the ``import`` command."""
    p = subparsers.add_parser("import", help=SUMMARIES["import"])
    p.add_argument("model", help="pkg.module:factory, file.py:factory (returning (model, args[, kwargs])), "
                                 "or an .onnx file")
    p.add_argument("--out", required=True, type=path_name, metavar="INSTANCE.json",
                   help="where to write the instance")
    p.add_argument("--devices", nargs="+", default=[DEFAULT_ACCELERATOR], metavar="NAME|FILE.json",
                   help="device catalogue files (.json, extending the bundled one) and the ids of one accelerator "
                        f"and at most one CPU (default: {DEFAULT_ACCELERATOR}; a CPU is {DEFAULT_CPU} unless named)")
    p.add_argument("--accelerators", type=non_negative_int, default=4, metavar="N", help="number of accelerators (default 4)")
    p.add_argument("--cpus", type=non_negative_int, metavar="M",
                   help="number of CPU sockets (default: 1 when --devices names a CPU, else 0)")
    p.add_argument("--memory", type=positive_byte_count, metavar="BYTES",
                   help="memory per accelerator (default: the catalogue's)")
    p.add_argument("--link", metavar="NAME", help="accelerator link for transfer costs (default: its default_link)")
    p.add_argument("--training", action="store_true", help="add backward nodes (training graph)")
    p.add_argument("--granularity", choices=GRANULARITIES, default="module",
                   help="one node per module run (default) or per operator")
    p.add_argument("--module-depth", type=positive_int, metavar="D",
                   help="group by module paths cut to D levels (default: leaf modules)")
    p.add_argument("--dtype", choices=tuple(ELEMENT_BYTES),
                   help="treat every floating-point tensor as this type (default: the model's own)")
    p.add_argument("--dim", dest="dims", type=_dim, action="append", default=[], metavar="NAME=VALUE",
                   help="ONNX: fix a symbolic input dimension (repeatable)")
    p.add_argument("--name", type=_model_name,
                   help="model name recorded in the file's about.model (default: from MODEL); the instance is named "
                        "after its file when read")
    p.add_argument("--operators", action="store_true",
                   help="record each node's operators with their shapes (GEMMs, vector operators), "
                        "which placement codesign times on its accelerator template")
    add_output_options(p)
    p.set_defaults(handler=run)


# ----- import -----------------------------------------------------------------------------

def platform_from_args(devices: list[str], accelerators: int, cpus: int | None, memory: float | None,
                       link: str | None) -> Platform:
    """Catalogue files extend the bundled catalogue; the remaining names pick one accelerator and one CPU.

    CPUs come in only when asked for: ``cpus=None`` means one socket when ``devices`` names a
    CPU, none otherwise.
    """
    files = [d for d in devices if d.lower().endswith(".json")]
    names = [d for d in devices if not d.lower().endswith(".json")]
    catalogue = load_catalogue(files)
    chosen = [find_device(catalogue, name, "devices") for name in names]
    by_kind: dict[str, list] = {"accelerator": [], "cpu": []}
    for spec in chosen:
        by_kind[spec.kind].append(spec)
    for kind, specs in by_kind.items():
        if len(specs) > 1:
            raise UsageError(f"--devices names {len(specs)} {kind}s ({', '.join(s.id for s in specs)}); give one")
    accelerator = by_kind["accelerator"][0] if by_kind["accelerator"] else find_device(catalogue, DEFAULT_ACCELERATOR)
    cpu = by_kind["cpu"][0] if by_kind["cpu"] else find_device(catalogue, DEFAULT_CPU)
    if cpus is None:
        cpus = 1 if by_kind["cpu"] else 0
    return Platform(accelerator, cpu, accelerators, cpus, memory, link)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def factory_name(spec: str) -> tuple[str, str]:
    """The module (or ``.py`` file, which must exist) and the function of ``pkg.module:factory`` or
    ``file.py:factory``: checked before torch is asked for, which a name of no model cannot use."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"cannot read model {spec!r}: expected pkg.module:factory, file.py:factory or FILE.onnx")
    if module_name.endswith(".py") and not Path(module_name).is_file():
        raise UsageError(f"{module_name}: no such file")
    return module_name, attr


def load_factory(spec: str) -> tuple[Any, tuple, dict]:
    """Call the factory named ``pkg.module:factory`` (found from the current directory) or
    ``file.py:factory`` (whose own imports are found from its folder); check what it returns."""
    module_name, attr = factory_name(spec)
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            folder = str(path.resolve().parent)   # as `python file.py` does: the file's own imports resolve
            if folder not in sys.path:
                sys.path.insert(0, folder)
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
    except SystemExit as exc:   # sys.exit() in the module: the import ended, silently, with its status
        raise UsageError(f"cannot import {module_name}: it called sys.exit({exc.code!r})") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UsageError(f"{module_name} has no function {attr!r}")
    if not callable(factory):
        raise UsageError(f"{module_name}: {attr!r} is not a function (it is of type {type(factory).__name__!r})")
    try:
        result = factory()
    except PlacementError:
        raise
    except Exception as exc:  # whatever the user's factory raises
        raise UsageError(f"{spec}() failed: {_first_line(exc)}") from None
    except SystemExit as exc:   # sys.exit() in the factory: the import ended, silently, with its status
        raise UsageError(f"{spec}() called sys.exit({exc.code!r}) instead of returning (model, args)") from None
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise UsageError(f"{spec}() must return (model, args) or (model, args, kwargs), got {type(result).__name__}")
    model, args = result[0], result[1]
    kwargs = result[2] if len(result) == 3 and result[2] is not None else {}   # None: none, as plan_pipeline takes it
    if not isinstance(args, (tuple, list)):
        raise UsageError(f"{spec}(): the example args must be a tuple, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise UsageError(f"{spec}(): the example kwargs must be a dict or None, got {type(kwargs).__name__}")
    return model, tuple(args), kwargs


def _dim_options(found: re.Match) -> str:
    """The library's advice "'batch', 'x[0]' with dims)" as the options that give them: "'batch', 'x[0]' with
    --dim batch=VALUE --dim 'x[0]=VALUE')" (quoted where a shell would read the name otherwise)."""
    names = re.findall(r"'([^']*)'", found.group(1))
    options = " ".join("--dim " + shlex.quote(f"{name}=VALUE") for name in names)
    return f"{found.group(1)} with {options})"


def import_model_spec(spec: str, platform: Platform, *, training: bool, granularity: str,
                      module_depth: int | None, dtype: str | None, dims: dict[str, int],
                      name: str | None, operators: bool = False) -> ImportedModel:
    """Import ``spec`` (a factory or an .onnx file) as an instance (``operators``: with operator shapes)."""
    from placement.io.op_grouping import check_grouping

    check_grouping(granularity, module_depth)   # before the model is loaded and traced (seconds)
    if spec.lower().endswith(".onnx"):
        from placement.io.onnx_import import import_onnx

        try:
            imported = import_onnx(spec, platform=platform, training=training, granularity=granularity,
                                   module_depth=module_depth, dtype=dtype, dims=dims, operators=operators)
        except InvalidInstanceError as exc:   # the library's parameter dims is the option --dim here
            text = re.sub(r"((?:'[^']*'(?:, )?)+) with dims\)", _dim_options, str(exc))
            raise InvalidInstanceError(text.replace("fixed with dims)", "fixed with --dim NAME=VALUE)")) from None
        label = name or file_stem(spec)
    else:
        if dims:
            raise UsageError("--dim applies to ONNX models only")
        from placement.io.torch_export import import_torch, require_torch

        factory_name(spec)
        torch = require_torch()
        model, args, kwargs = load_factory(spec)
        if not isinstance(model, torch.nn.Module):   # the factory's result, not the factory, is at fault
            raise UsageError(f"{spec}() must return a torch.nn.Module as the model, got {type(model).__name__}")
        if args and all(isinstance(value, torch.Tensor) and value.numel() == 0 for value in args):
            # every cost would be that of no samples (its operators' overhead alone), as plan_pipeline refuses it
            raise UsageError(f"{spec}(): the example args must be one micro-batch of samples, but they hold no "
                             f"elements (shapes {', '.join(str(tuple(value.shape)) for value in args)})")
        label = name or spec.rpartition(":")[2]
        try:
            imported = import_torch(model, args, kwargs, platform=platform, training=training,
                                    granularity=granularity, module_depth=module_depth, dtype=dtype, name=label,
                                    operators=operators)
        except InvalidParameterError as exc:   # the factory's example inputs, which no option gives
            if exc.parameter not in ("args", "kwargs"):
                raise
            raise UsageError(f"{spec}(): the example {exc}") from None
    imported.instance["about"]["model"] = label
    return imported


def _dims(pairs: list[tuple[str, int]]) -> dict[str, int]:
    """The ``--dim`` options as a dict; a dimension given twice is an error."""
    dims: dict[str, int] = {}
    for name, value in pairs:
        if name in dims and dims[name] != value:
            raise UsageError(f"--dim gives {name!r} twice ({dims[name]} and {value})")
        dims[name] = value
    return dims


def run(args: argparse.Namespace) -> int:
    source = args.model.rpartition(":")[0]
    catalogues = tuple(d for d in args.devices if d.lower().endswith(".json"))
    check_distinct({"--out": args.out}, args.json)
    check_writable(args.out, (args.model, source, *catalogues))   # before the model is traced (seconds, minutes)
    dims = _dims(args.dims)
    platform = platform_from_args(args.devices, args.accelerators, args.cpus, args.memory, args.link)
    # the user's model may print (on import, in its factory, in forward): with --json, or with the instance
    # written on standard output, standard output is one JSON document, so what it prints goes to standard error
    on_stdout = standard_stream(args.out) == 1
    printed = contextlib.redirect_stdout(sys.stderr) if args.json or on_stdout else contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught, printed:
        warnings.simplefilter("always", CostModelWarning)
        try:
            imported = import_model_spec(args.model, platform, training=args.training, granularity=args.granularity,
                                         module_depth=args.module_depth, dtype=args.dtype, dims=dims,
                                         name=args.name, operators=args.operators)
        except InvalidParameterError as exc:
            if exc.parameter != "dtype" or args.dtype is not None:
                raise
            # the model's own data type, not an option given: say so before naming the option that helps
            raise UsageError(f"the model computes in a data type a device has no peak FLOP/s for: --dtype "
                             f"{exc.detail}") from None
    for w in caught:
        if issubclass(w.category, CostModelWarning) and not args.quiet:   # the library's parameters as options
            print(f"warning: {args.rename(str(w.message))}", file=sys.stderr)
    # a factory named pkg.module:factory: its file is known once imported
    check_not_input(args.out, (getattr(sys.modules.get(source), "__file__", None),))
    write_text(args.out, json.dumps(imported.instance, indent=1, allow_nan=False) + "\n")
    problem = imported.problem
    forward = sum(1 for n in problem.nodes if not n.backward)
    about = imported.instance["about"]
    if args.json:
        print_json({"out": args.out, "nodes": len(problem.nodes), "forward": forward, "edges": len(problem.edges),
                    "forward_flops": about["forward_flops"], "accelerators": platform.accelerators,
                    "accelerator": platform.accelerator.id, "accelerator_memory": platform.accelerator_memory,
                    "cpus": platform.cpus, "cpu": platform.cpu.id})
        return 0
    print(f"wrote {args.out}: {counted(len(problem.nodes), 'node')} ({forward} forward), "
          f"{counted(len(problem.edges), 'edge')}, "
          f"{about['forward_flops']:.6g} forward FLOPs; {platform.accelerators} x {platform.accelerator.id} "
          f"({platform.accelerator_memory:.6g} bytes each), {platform.cpus} x {platform.cpu.id}",
          file=sys.stderr if on_stdout else sys.stdout)
    return 0
