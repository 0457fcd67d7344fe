"""Operator graphs of real models, built by the package itself, with roofline costs.

* :mod:`placement.zoo.transformer` — a BERT-style encoder (BERT-Base by default),
  inference or training, exported to the Tarnawski instance format.
* :mod:`placement.zoo.resnet` — ResNet-50 as a PyTorch module (no torchvision needed).
* :mod:`placement.zoo.factories` — factories of the bundled PyTorch models (BERT-Base, GPT-2,
  ResNet-50, ViT-Base) for ``placement import``.
"""

from placement.zoo.transformer import (A100_SXM4_40GB, EPYC_7763, PCIE4_X16_BYTES_PER_S, DeviceFigures,
                                          Op, OperatorGraph, TransformerConfig, bert_graph, roofline_ms,
                                          to_tarnawski_json)

__all__ = ["A100_SXM4_40GB", "EPYC_7763", "PCIE4_X16_BYTES_PER_S", "DeviceFigures", "Op", "OperatorGraph",
           "TransformerConfig", "bert_graph", "roofline_ms", "to_tarnawski_json"]
