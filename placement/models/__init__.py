"""Operator graphs of real models, built by the package itself, with roofline costs.

* :mod:`placement.models.transformer` — a BERT-style encoder (BERT-Base by default),
  inference or training, exported to the Tarnawski instance format.
"""

from placement.models.transformer import (A100_SXM4_40GB, EPYC_7763, PCIE4_X16_BYTES_PER_S, DeviceFigures,
                                          Op, OperatorGraph, TransformerConfig, bert_graph, roofline_ms,
                                          to_tarnawski_json)

__all__ = ["A100_SXM4_40GB", "EPYC_7763", "PCIE4_X16_BYTES_PER_S", "DeviceFigures", "Op", "OperatorGraph",
           "TransformerConfig", "bert_graph", "roofline_ms", "to_tarnawski_json"]
