"""Regenerate the bundled instances from the package's own BERT model.

    .venv/bin/python instances/generate.py

writes ``bert-base-inference.json`` and ``bert-base-training.json`` next to this file:
BERT-Base (12 layers, hidden 768, 12 heads, FFN 3072, sequence 128, batch 8) as an
operator graph with roofline costs (A100 40 GB accelerators, one EPYC 7763 CPU socket,
PCIe 4.0 x16 links; see ``placement/zoo/transformer.py``), 4 accelerators with
16 GiB each and 1 CPU. The output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from placement.zoo.transformer import GiB, TransformerConfig, bert_graph, to_tarnawski_json  # noqa: E402

ACCELERATORS = 4
CPUS = 1
MEMORY = 16 * GiB


def instances() -> dict[str, dict]:
    """File name -> instance dict, for every bundled instance."""
    config = TransformerConfig()
    return {
        f"bert-base-{kind}.json": to_tarnawski_json(bert_graph(config, training=(kind == "training")),
                                                    max_accelerators=ACCELERATORS, max_cpus=CPUS, memory=MEMORY)
        for kind in ("inference", "training")
    }


def main(argv: list[str]) -> None:
    what = "Regenerate instances/bert-base-{inference,training}.json from the package's own BERT model."
    argparse.ArgumentParser(prog=Path(__file__).name, description=f"{what} Takes no arguments.").parse_args(argv)
    for name, data in instances().items():
        path = HERE / name
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(data['nodes'])} nodes, {len(data['edges'])} edges")


if __name__ == "__main__":
    main(sys.argv[1:])
