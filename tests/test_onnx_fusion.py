"""Attention under a boolean mask, as the exporters write it, on synthetic node lists
(placement.io.onnx_fusion.fuse): the mask's Where and the NaN guard join the attention group only
when nothing else needs their values."""

from __future__ import annotations

import pytest

from placement.io.onnx_fusion import FusionNode, fuse


def masked_attention(mask_is_output: bool = False, mask_read_elsewhere: bool = False,
                     guard_value: str = "zero") -> tuple[list[FusionNode], set[str]]:
    """``MatMul(q, kᵀ)`` + ``Where(mask, 0, -inf)`` → ``Softmax`` → ``Where(IsNaN(p), 0, p)`` → ``MatMul(·, v)``."""
    def node(op: str, kind: str, inputs: list[str], outputs: list[str]) -> FusionNode:
        return FusionNode(op, kind, tuple(inputs), tuple(outputs))

    nodes = [node("MatMul", "matmul", ["q", "kT"], ["s"]),
             node("Where", "pointwise", ["mask", "zero", "neginf"], ["m"]),
             node("Add", "pointwise", ["s", "m"], ["sm"]),
             node("Softmax", "softmax", ["sm"], ["p"]),
             node("IsNaN", "pointwise", ["p"], ["nan"]),
             node("Where", "pointwise", ["nan", guard_value, "p"], ["pg"]),
             node("MatMul", "matmul", ["pg", "v"], ["o"])]
    if mask_read_elsewhere:
        nodes.append(node("Relu", "pointwise", ["m"], ["r"]))
    return nodes, {"o"} | ({"m"} if mask_is_output else set())


@pytest.mark.parametrize("variant, groups", [
    ({}, [("attention", [0, 1, 2, 3, 4, 5, 6])]),
    # the additive mask is needed elsewhere: computed apart, read by the attention kernel
    ({"mask_is_output": True}, [("pointwise", [1]), ("attention", [0, 2, 3, 4, 5, 6])]),
    ({"mask_read_elsewhere": True}, [("pointwise", [1]), ("attention", [0, 2, 3, 4, 5, 6]), ("pointwise", [7])]),
    # a guard that puts a computed value in the NaN rows is the model's own: no attention kernel does that
    ({"guard_value": "q"}, [("matmul", [0]), ("pointwise", [1]), ("pointwise", [2]), ("softmax", [3]),
                            ("pointwise", [4]), ("pointwise", [5]), ("matmul", [6])]),
])
def test_a_boolean_mask_and_its_nan_guard_join_the_attention(variant, groups):
    nodes, outputs = masked_attention(**variant)
    assert [(g.kind, list(g.members)) for g in fuse(nodes, {"zero", "neginf"}, outputs)] == groups
