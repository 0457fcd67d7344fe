"""Regenerate the bundled instances of real models, made by the package's own importer.

    .venv/bin/python instances/generate_models.py [NAME ...]

writes ``models/<model>-<inference|training>.json`` next to this file for BERT-Base,
GPT-2 small, ResNet-50 and ViT-Base/16 (the factories of :mod:`placement.zoo.factories`,
with their batch sizes), each exported with ``torch.export`` and grouped at module
granularity (leaf modules), costed by the roofline model of
:mod:`placement.costmodel.roofline` for 4 NVIDIA H100 SXM5 80GB accelerators (PCIe Gen5
links for transfers) and 1 AMD EPYC 7763 socket. This is what

    placement import placement.zoo.factories:<factory> --name <model> [--training] --out <file>

writes, with ``about.versions`` added: the versions of torch and (BERT, GPT-2 and ViT only)
transformers that wrote the file. NAMEs (file stems such as ``gpt2-training``)
restrict the run. Needs the ``models`` extra (``pip install -e '.[models]'``: torch 2.13.0 and
transformers 5.24.0). The output is deterministic for a given torch and transformers version;
the bundled files are the output of torch 2.13.0 (CPU build) and transformers 5.24.0 (5.23.0
gives GPT-2 other graphs, 5.22.2 all three). BERT-Base and GPT-2 training and ViT-Base
are kept as an earlier importer wrote them with those versions (README, "Bundled instances"),
so that the numbers the docs quote stay reproducible: a run without NAMEs leaves them as they are
(``KEPT``), and naming one rewrites it with today's costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.errors import PlacementError  # noqa: E402
from placement.io.torch_export import import_torch  # noqa: E402
from placement.zoo import factories as zoo  # noqa: E402

OUT = HERE / "models"
MODELS = {"bert-base": zoo.bert_base, "gpt2": zoo.gpt2, "resnet50": zoo.resnet50, "vit-base": zoo.vit_base}
TRANSFORMERS_MODELS = ("bert-base", "gpt2", "vit-base")
#: the bundled files an earlier importer wrote, which a run rewrites only where named
KEPT = ("bert-base-training", "gpt2-training", "vit-base-inference", "vit-base-training")
ACCELERATOR, CPU, ACCELERATORS, CPUS = "h100", "epyc-7763", 4, 1


def instance(stem: str) -> dict:
    """The instance of one file stem, e.g. ``resnet50-training``."""
    model_name, _, kind = stem.rpartition("-")
    if model_name not in MODELS or kind not in ("inference", "training"):
        raise SystemExit(f"unknown instance {stem!r}; known: {', '.join(stems())}")
    model, args = MODELS[model_name]()
    platform = make_platform(ACCELERATOR, CPU, ACCELERATORS, CPUS)
    imported = import_torch(model, args, platform=platform, training=(kind == "training"), granularity="module",
                            name=model_name)
    data = imported.instance
    data["about"]["versions"] = versions(model_name)
    return data


def versions(model_name: str) -> dict:
    """The versions of the packages that write the instance of ``model_name``: torch's release (without
    a local build tag such as ``+cpu``) and transformers' for the models it builds."""
    import torch

    found = {"torch": torch.__version__.split("+")[0]}
    if model_name in TRANSFORMERS_MODELS:
        import transformers

        found["transformers"] = transformers.__version__
    return found


def stems() -> list[str]:
    return [f"{model}-{kind}" for model in MODELS for kind in ("inference", "training")]


def to_write(names: list[str]) -> list[str]:
    """The stems a run writes: ``names``, or every stem but the ``KEPT`` ones."""
    return names or [stem for stem in stems() if stem not in KEPT]


def render(data: dict) -> str:
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog=Path(__file__).name, description="Regenerate the bundled instances of "
                                     "real models (instances/models). Needs the models extra.")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"file stems to write (default: all but the kept {', '.join(KEPT)})")
    names = parser.parse_args(argv).names
    unknown = [name for name in names if name not in stems()]
    if unknown:   # before any file is written
        parser.error(f"unknown instance {unknown[0]!r}; known: {', '.join(stems())}")
    OUT.mkdir(exist_ok=True)
    for stem in to_write(names):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                data = instance(stem)
            except PlacementError as exc:   # a model whose package is missing, in one line
                raise SystemExit(f"error: {exc}") from None
        for w in caught:
            if w.category.__name__ == "CostModelWarning":
                print(f"warning: {w.message}", file=sys.stderr)
        path = OUT / f"{stem}.json"
        path.write_text(render(data), encoding="utf-8")
        forward = sum(1 for n in data["nodes"] if not n["isBackwardNode"])
        print(f"{path.relative_to(HERE)}: {len(data['nodes'])} nodes ({forward} forward), {len(data['edges'])} edges, "
              f"{data['about']['forward_flops']:.4g} forward FLOPs")


if __name__ == "__main__":
    main(sys.argv[1:])
