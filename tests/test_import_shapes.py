"""Operator shapes of imported models: GEMMs and vector operators, forward and backward, for the co-design.

Shapes are derived by hand in the comments from placement.io.operator_shapes: a GEMM
``(m, n, k) × batch`` is ``batch`` products of an ``m×k`` by a ``k×n`` matrix; its gradient is
the input gradient ``(m, k, n)`` then the weight gradient ``(k, n, m)``.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import pytest

from placement.io.operator_shapes import (KIND_VECTOR_OPS, VECTOR_OPS, attention, backward, convolution, flops,
                                          gemm, matmul, to_json, vector)

ROOT = Path(__file__).resolve().parents[1]
TINY_GRID = str(ROOT / "instances" / "grids" / "tiny.json")


def test_vector_operator_names_are_the_co_design_table():
    from placement.codesign.opcost import VECTOR_CYCLES

    assert set(VECTOR_OPS.values()) | set(KIND_VECTOR_OPS.values()) <= set(VECTOR_CYCLES)


def test_matmul_shapes_by_hand():
    # linear: x [2, 3, 8] by a weight [4, 8]: the 2·3 rows share the weight, one GEMM (6, 4, 8), bias over 24
    assert matmul((2, 3, 8), (4, 8), (2, 3, 4), linear=True, bias=True) == gemm(6, 4, 8) + vector("add", 24)
    # a matrix B [4, 7]: A [2, 3, 5, 4] gives 30 rows; a batched B [3, 4, 7]: 3 products of 5 × 4 by 4 × 7
    assert matmul((2, 3, 5, 4), (4, 7), (2, 3, 5, 7)) == gemm(30, 7, 4)
    assert matmul((3, 5, 4), (3, 4, 7), (3, 5, 7)) == gemm(5, 7, 4, 3)
    # broadcast batch: A [5, 4] by B [2, 3, 4, 7] is 6 products of 5 × 4 by 4 × 7
    assert matmul((5, 4), (2, 3, 4, 7), (2, 3, 5, 7)) == gemm(5, 7, 4, 6)
    # matrix by vector: N = 1
    assert matmul((5, 4), (4,), (5,)) == gemm(5, 1, 4)
    assert matmul((0, 4), (4, 7), (0, 7)) == ()   # an empty GEMM is no operator


def test_convolution_shapes_by_hand():
    # 3 → 8 channels, 3×3, on a batch of 2 of 8×8 outputs: M = 2·64, N = 8, K = 3·9 = 27
    assert convolution((2, 3, 8, 8), (8, 3, 3, 3), (2, 8, 8, 8)) == gemm(128, 8, 27)
    # 8 → 6 channels in 2 groups, 3×3, 2 × 2×2 outputs: per group M = 8, N = 3, K = 4·9 = 36
    assert convolution((2, 8, 4, 4), (6, 4, 3, 3), (2, 6, 2, 2), bias=True) == gemm(8, 3, 36, 2) + vector("add", 48)
    # unbatched input [C, H, W]: the channels are dimension 0; M = 16 output pixels
    assert convolution((3, 4, 4), (5, 3, 1, 1), (5, 4, 4)) == gemm(16, 5, 3)
    # transposed, 8 → 4 channels, 2×2 kernel, on 2 × 3×3 inputs: M = 2·9, N = 4·4 = 16, K = 8
    assert convolution((2, 8, 3, 3), (8, 4, 2, 2), (2, 4, 6, 6), transposed=True) == gemm(18, 16, 8)


def test_backward_shapes_by_hand():
    # C = A·B with A 2×8, B 8×4: dA = dC·Bᵀ is (2, 8, 4), dB = Aᵀ·dC is (8, 4, 2); the bias add passes once
    assert backward("matmul", gemm(2, 4, 8) + vector("add", 8)) == gemm(2, 8, 4) + gemm(8, 4, 2) + vector("add", 8)
    # softmax and normalisation: two passes; views and constants: nothing
    assert backward("softmax", vector("softmax", 10)) == vector("softmax", 10) * 2
    assert backward("norm", vector("layernorm", 10)) == vector("layernorm", 10) * 2
    assert backward("pointwise", vector("gelu", 10)) == vector("gelu", 10)
    assert backward("view", ()) == backward("constant", vector("copy", 3)) == ()


def test_attention_shapes_by_hand():
    # q [2, 3, 5, 4], k [2, 3, 6, 4], v [2, 3, 6, 7]: b = 6 heads × batch, L = 5, E = 4, S = 6, E_v = 7
    forward = attention((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7))
    assert forward == gemm(5, 6, 4, 6) + vector("softmax", 180) + gemm(5, 7, 6, 6)
    # backward: the scores again (5, 6, 4); dQ = dS·K (5, 4, 6), dKᵀ = Qᵀ·dS (4, 6, 5); softmax twice;
    # dP = dO·Vᵀ (5, 6, 7), dV = Pᵀ·dO (6, 7, 5): five matmuls
    assert backward("attention", forward) == (gemm(5, 6, 4, 6) + gemm(5, 4, 6, 6) + gemm(4, 6, 5, 6)
                                              + vector("softmax", 180) * 2 + gemm(5, 6, 7, 6) + gemm(6, 7, 5, 6))


# ----- the importers -----------------------------------------------------------------------

torch_needed = pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"),
                                  reason="torch is not installed (pip install 'placement[torch]')")


def _platform():
    from placement.costmodel.roofline import make_platform

    return make_platform("h100", "epyc-7763", 2, 0)


def _ops(instance: dict) -> dict[str, list[dict]]:
    return {n["name"]: n["operators"] for n in instance["nodes"]}


def _j(*shapes) -> list[dict]:
    return [to_json(s) for s in shapes]


def linear_mlp():
    """Factory: Linear(8, 4) → ReLU on a batch of 2."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU()), (torch.randn(2, 8),)


def tiny_block():
    """Factory: a one-block transformer (hidden 32, 4 heads, vocabulary 50) on 2 sequences of 8 tokens."""
    import torch

    from tests.test_torch_pipelining import TinyTransformer

    torch.manual_seed(0)
    return TinyTransformer(layers=1), (torch.randint(0, 50, (2, 8)),)


@torch_needed
def test_torch_linear_forward_and_backward_shapes():
    from placement.io.torch_export import import_torch

    model, args = linear_mlp()
    imported = import_torch(model, args, platform=_platform(), training=True, operators=True)
    # Linear(8, 4) on 2 rows: GEMM (2, 4, 8) and the bias add over 2·4; gradients: input (2, 8, 4) where
    # the input needs one, weight (8, 4, 2)
    assert _ops(imported.instance) == {
        "0": _j(*gemm(2, 4, 8), *vector("add", 8)), "1": _j(*vector("relu", 8)),
        "0.grad": _j(*gemm(8, 4, 2), *vector("add", 8)), "1.grad": _j(*vector("relu", 8))}
    nodes = {n["name"]: n for n in imported.instance["nodes"]}
    # the FLOPs the importer records are the GEMMs': forward 2·2·4·8 = 128, backward the weight gradient
    # alone (the model's input needs none), the W part weight_time_ms times: the forward's FLOPs
    assert nodes["0"]["flops"] == 2 * 2 * 4 * 8 == 128.0
    assert nodes["0.grad"]["flops"] == 2 * 8 * 4 * 2 == 128.0
    assert flops(gemm(8, 4, 2)[0]) == nodes["0"]["flops"] and nodes["0.grad"]["fpgaWeightLatency"] > 0
    x = args[0].clone().requires_grad_(True)   # an input that needs a gradient: both GEMMs
    both = import_torch(model, (x,), platform=_platform(), training=True, operators=True).instance
    assert _ops(both)["0.grad"] == _j(*gemm(2, 8, 4), *gemm(8, 4, 2), *vector("add", 8))
    assert {n["name"]: n for n in both["nodes"]}["0.grad"]["flops"] == 2 * 2 * 8 * 4 + 2 * 8 * 4 * 2 == 256.0


@torch_needed
def test_operators_are_only_added_on_request():
    from placement.io.torch_export import import_torch

    model, args = linear_mlp()
    plain = import_torch(model, args, platform=_platform(), training=True).instance
    shaped = import_torch(model, args, platform=_platform(), training=True, operators=True).instance
    assert not any("operators" in n for n in plain["nodes"])
    assert [{k: v for k, v in n.items() if k != "operators"} for n in shaped["nodes"]] == plain["nodes"]
    assert {k: v for k, v in shaped.items() if k != "nodes"} == {k: v for k, v in plain.items() if k != "nodes"}


@torch_needed
def test_torch_convolutions_and_attention_by_hand():
    import torch
    from torch import nn
    from torch.nn import functional as F

    from placement.io.torch_export import import_torch

    class Convs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.grouped = nn.Conv2d(8, 6, 3, groups=2, bias=False)
            self.up = nn.ConvTranspose2d(6, 4, 2, stride=2, bias=False)

        def forward(self, x):
            return self.up(self.grouped(self.conv(x)))

    class Attention(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

    torch.manual_seed(0)
    convs = import_torch(Convs(), (torch.randn(2, 3, 4, 4),), platform=_platform(), training=True,
                         operators=True).instance
    # conv: 3 → 8, 3×3, padding 1: 2 × 4×4 outputs, M = 32, N = 8, K = 27, bias over 2·8·16 = 256.
    # grouped: 8 → 6 in 2 groups, 3×3, no padding: 2 × 2×2 outputs, per group M = 8, N = 3, K = 4·9 = 36.
    # up: transposed 6 → 4, 2×2, stride 2, on 2 × 2×2 inputs: M = 8, N = 4·4 = 16, K = 6.
    assert _ops(convs) == {
        "conv": _j(*gemm(32, 8, 27), *vector("add", 256)),
        "grouped": _j(*gemm(8, 3, 36, 2)),
        "up": _j(*gemm(8, 16, 6)),
        "conv.grad": _j(*gemm(27, 8, 32), *vector("add", 256)),   # the weight gradient: x needs none
        "grouped.grad": _j(*gemm(8, 36, 3, 2), *gemm(36, 3, 8, 2)),
        "up.grad": _j(*gemm(8, 6, 16), *gemm(6, 16, 8))}
    counted = {n["name"]: n["flops"] for n in convs["nodes"]}  # the importer's 2·numel(out)·numel(w)/C_out
    assert (counted["conv"], counted["grouped"], counted["up"]) == (2 * 32 * 8 * 27, 2 * 2 * 8 * 3 * 36, 2 * 8 * 16 * 6)

    q, k, v = (torch.randn(*shape, requires_grad=True) for shape in ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7)))
    sdpa = import_torch(Attention(), (q, k, v), platform=_platform(), training=True, operators=True).instance
    forward, grad = (n["operators"] for n in sdpa["nodes"])
    assert forward == _j(*attention(q.shape, k.shape, v.shape))   # by hand in test_attention_shapes_by_hand
    assert grad == _j(*backward("attention", attention(q.shape, k.shape, v.shape)))
    # the importer's FLOPs 2·(numel(q)/E)·S·(E + E_v) = 2·30·6·11 are the two GEMMs': 2·6·5·6·4 + 2·6·5·7·6
    assert sdpa["nodes"][0]["flops"] == 2 * 30 * 6 * 11 == sum(map(flops, attention(q.shape, k.shape, v.shape)))


def _export_onnx(model, args, path: Path) -> Path:
    """``torch.onnx.export`` of ``model`` to ``path`` (skips the test without onnx and onnxscript)."""
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")
    pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript")
    import torch

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path))
    return path


@torch_needed
def test_onnx_import_lists_the_torch_operators(tmp_path):
    from placement.io.onnx_import import import_onnx
    from placement.io.torch_export import import_torch

    model, args = tiny_block()
    path = _export_onnx(model, args, tmp_path / "block.onnx")
    torch_import = import_torch(model, args, platform=_platform(), training=True, operators=True)
    onnx_import = import_onnx(path, platform=_platform(), training=True, granularity="module", operators=True)
    via_torch, via_onnx = torch_import.instance, onnx_import.instance
    # two independent counts agree: the importers' FLOP formulas and the GEMMs of the shapes
    for imported in (torch_import, onnx_import):
        products = [op for op in imported.graph.graph.ops if op.kind in ("matmul", "attention")]
        assert len(products) == 6   # qkv, attention, proj, up, down, head
        assert all(sum(map(flops, op.operators)) == op.flops > 0 for op in products)
    # ONNX writes attention as Mul(q·scale), Mul(k·scale), MatMul, Add(mask), Softmax, MatMul: one fused operator
    # whose scale and mask the kernel folds in, so both importers list the same GEMMs and vector operators
    assert _ops(via_onnx) == _ops(via_torch)
    ops = _ops(via_torch)
    # 2 sequences of 8 tokens, hidden 32, 4 heads of 8: qkv GEMM (16, 96, 32); attention 8 products (8, 8, 8)
    assert ops["blocks.0.qkv"] == _j(*gemm(16, 96, 32), *vector("add", 16 * 96))
    assert ops["blocks.0"] == _j(*attention((2, 4, 8, 8), (2, 4, 8, 8), (2, 4, 8, 8)))
    assert ops["blocks.0"] == _j(*gemm(8, 8, 8, 8), *vector("softmax", 512), *gemm(8, 8, 8, 8))
    assert ops["head"] == _j(*gemm(16, 50, 32), *vector("add", 16 * 50))


def _codesign_json(capsys, *argv) -> dict:
    from placement.cli import main

    assert main(["codesign", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@torch_needed
def test_codesign_on_an_imported_model_has_no_shapeless_node_and_equals_exhaustive(tmp_path, capsys):
    from placement.cli import main

    out = tmp_path / "block.json"
    assert main(["import", "tests.test_import_shapes:tiny_block", "--training", "--operators", "--out", str(out),
                 "--quiet"]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    assert len(data["nodes"]) == 26 and all(n["operators"] for n in data["nodes"])
    for homogeneous in ([], ["--homogeneous"]):
        args = (str(out), "--chips", "2", "--power", "300", "--grid", TINY_GRID, *homogeneous)
        exact = _codesign_json(capsys, *args)
        check = _codesign_json(capsys, *args, "--exhaustive")
        assert exact["status"] == check["status"] == "optimal"
        assert exact["shapeless_nodes"] == check["shapeless_nodes"] == 0
        assert exact["value"] == pytest.approx(check["value"], rel=1e-9)


@torch_needed
def test_codesign_on_an_onnx_import_equals_exhaustive(tmp_path):
    import placement
    from placement.io.onnx_import import import_onnx

    model, args = linear_mlp()
    path = _export_onnx(model, args, tmp_path / "mlp.onnx")
    imported = import_onnx(path, platform=_platform(), training=True, operators=True)
    # ONNX Gemm(x, W, b) with transB: GEMM (2, 4, 8) and its bias, as torch's linear
    assert _ops(imported.instance)[imported.instance["nodes"][0]["name"]] == _j(*gemm(2, 4, 8), *vector("add", 8))
    for objective in ("throughput", "perf-per-watt"):
        exact = placement.codesign(imported.instance, chips=2, power=300, grid=TINY_GRID, objective=objective)
        check = placement.codesign(imported.instance, chips=2, power=300, grid=TINY_GRID, objective=objective,
                                   exhaustive=True)
        assert exact.status == check.status == "optimal" and exact.shapeless_nodes == check.shapeless_nodes == 0
        assert exact.value == pytest.approx(check.value, rel=1e-9)
