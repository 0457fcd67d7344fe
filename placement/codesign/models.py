"""Small model files with operator shapes (:mod:`.workload`), generated rather than imported.

:func:`mlp` writes a multi-layer perceptron: forward node ``i`` is the linear layer
``widths[i] → widths[i + 1]`` on a batch (one GEMM ``batch × widths[i]`` · ``widths[i] ×
widths[i + 1]``, then bias add and ReLU, or softmax after the last layer). For training, node
``i``'s backward mate (id ``n + i``, same colour class) computes the input gradient (GEMM
``batch × out`` · ``out × in``), the weight gradient (GEMM ``in × batch`` · ``batch × out``),
the ReLU mask and the optimiser's update of the layer's weights; backward edges mirror the
forward ones and each forward node passes its saved activations to its mate. Memory: the
weights (and, training, the saved activations) in 16-bit elements; transfer costs on the
template's chip-to-chip link.
"""

from __future__ import annotations

from typing import Sequence

from placement.codesign.template import DRAM_BYTES, ELEMENT_BYTES, LINK_BYTES_PER_S


def _cost_ms(nbytes: float) -> float:
    return 1000.0 * nbytes / LINK_BYTES_PER_S


def mlp(widths: Sequence[int], batch: int, training: bool = True, name: str = "mlp") -> dict:
    """The model file of an MLP (module docstring); ``widths`` has one entry per layer boundary."""
    e = ELEMENT_BYTES
    n = len(widths) - 1
    nodes, edges = [], []
    for i in range(n):
        fan_in, fan_out = widths[i], widths[i + 1]
        last = i == n - 1
        ops = [{"kind": "gemm", "m": batch, "n": fan_out, "k": fan_in},
               {"kind": "vector", "op": "add", "elements": batch * fan_out},
               {"kind": "vector", "op": "softmax" if last else "relu", "elements": batch * fan_out}]
        weights = e * fan_in * fan_out
        activations = e * batch * fan_out
        node = {"id": i, "name": f"linear{i}", "supportedOnFpga": True, "cpuLatency": 0.0, "fpgaLatency": 0.0,
                "isBackwardNode": False, "size": weights + (activations if training else 0), "operators": ops}
        if training:
            node["colorClass"] = i
        nodes.append(node)
        if not last:
            edges.append({"sourceId": i, "destId": i + 1, "cost": _cost_ms(activations), "size": activations})
    if training:
        for i in range(n):
            fan_in, fan_out = widths[i], widths[i + 1]
            ops = [{"kind": "vector", "op": "mul", "elements": batch * fan_out},
                   {"kind": "gemm", "m": batch, "n": fan_in, "k": fan_out},
                   {"kind": "gemm", "m": fan_in, "n": fan_out, "k": batch},
                   {"kind": "vector", "op": "optimizer", "elements": fan_in * fan_out}]
            nodes.append({"id": n + i, "name": f"linear{i}.grad", "supportedOnFpga": True, "cpuLatency": 0.0,
                          "fpgaLatency": 0.0, "isBackwardNode": True, "colorClass": i,
                          "size": e * fan_in * fan_out, "operators": ops})
            grad_in = e * batch * fan_in
            if i > 0:
                edges.append({"sourceId": n + i, "destId": n + i - 1, "cost": _cost_ms(grad_in), "size": grad_in})
            saved = e * batch * fan_out
            edges.append({"sourceId": i, "destId": n + i, "cost": _cost_ms(e * batch * fan_out), "size": saved})
    return {
        "about": {"model": name, "generator": "placement.codesign.models.mlp", "training": training,
                  "batch": batch, "widths": list(widths), "link_bytes_per_s": LINK_BYTES_PER_S,
                  "units": {"time": "ms", "size": "bytes"},
                  "note": "cpuLatency and fpgaLatency are placeholders: the co-design times the operators"},
        "maxSizePerFPGA": float(DRAM_BYTES), "maxFPGAs": 8, "maxCPUs": 0,
        "nodes": nodes, "edges": edges,
    }
