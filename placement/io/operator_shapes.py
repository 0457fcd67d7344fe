"""What an imported operator computes, as shapes: GEMMs and vector operators, forward and backward.

The importers (:mod:`placement.io.torch_export`, :mod:`placement.io.onnx_import`) give each
operator these shapes, as the co-design's :class:`~placement.codesign.workload.Operator`; :func:`placement.io.opgraph.to_instance` writes them, on request, as a
node's ``"operators"`` (the format of :mod:`placement.codesign.workload`), so that the
co-design times an imported model with its tiled GEMM cost model instead of FLOPs alone.

Forward
-------
* **Matmul** with ``A = [..., K]``: ``linear`` (weight ``[N, K]``) and a matrix ``B = [K, N]``
  give one GEMM of ``M = numel(A) / K`` rows (every leading dimension of ``A`` shares the
  weight); a vector ``B`` gives ``N = 1``; a batched ``B = [..., K, N]`` gives ``batch =
  numel(out) / (M·N)`` products of ``M = A.shape[-2]`` rows. A bias (``linear``'s, ``addmm``'s
  added term, ONNX ``Gemm``'s ``C``) adds a vector ``add`` over the output.
* **Convolution** as its implicit GEMM, per group (``batch`` = groups ``g``): ``M`` = batch ×
  output pixels, ``N = C_out / g``, ``K = C_in / g`` × kernel area; a transposed convolution
  (weight ``[C_in, C_out/g, *k]``) as the GEMM of its input: ``M`` = batch × input pixels,
  ``N = C_out / g`` × kernel area, ``K = C_in / g``. A bias adds a vector ``add``.
* **Scaled dot-product attention**, ``q [..., L, E]``, ``k [..., S, E]``, ``v [..., S, E_v]``,
  ``b = numel(q) / (L·E)``: GEMM ``(L, S, E)`` × ``b`` (scores), vector ``softmax`` over
  ``b·L·S``, GEMM ``(L, E_v, S)`` × ``b``.
* **Vector operators** (:data:`VECTOR_OPS` names the op): pointwise over the output's
  elements; normalisation (``layernorm``), softmax, reduction (``reduce``) and pooling
  (``pool``) over the input's; gathers, copies, constants and operators without a cost rule
  (``copy``) over the output's. Views compute nothing: no operator.

For a matmul, convolution or attention the GEMMs' FLOPs (``2·batch·m·n·k``) are the
operator's FLOPs of the importers' tables.

Backward (:func:`backward`)
---------------------------
A GEMM ``(m, n, k)`` × ``batch`` (``C = A·B``) has two gradient GEMMs: the input gradient
``dA = dC·Bᵀ``, GEMM ``(m, k, n)``, then the weight gradient ``dB = Aᵀ·dC``, GEMM
``(k, n, m)``; attention first recomputes its scores (GEMM ``(L, S, E)``), so its gradient
is the five matmuls of :data:`placement.io.opgraph.BACKWARD_FACTOR` (2.5 × the forward
work). A vector operator's gradient is one pass of the same operator over the same elements,
two for ``softmax`` and ``layernorm`` (statistics recomputed). Views and constants have no
gradient. The backward work of a matmul or convolution is therefore the forward FLOPs twice,
as in :mod:`placement.io.opgraph`, and its weight gradient (the second GEMM) is the part that
:func:`placement.io.opgraph.weight_time_ms` times when the operator reads a trained parameter.
A gradient GEMM is left out where its operand needs no gradient (a frozen weight, an input that
needs none: :func:`placement.io.opgraph.gradient_flow`). An einsum of three or more operands has, for
each of its products of two, these gradient GEMMs (or multiplies) of the factors that need a gradient
(:func:`placement.io.layer_gemms.einsum_gradients`), not :func:`backward`'s.
"""

from __future__ import annotations

import math
from typing import Sequence

from placement.codesign.workload import Operator

#: Vector operator of each pointwise operator (torch and ONNX names, lower case without
#: underscores); any other pointwise operator is an ``add`` (one cycle per element).
VECTOR_OPS: dict[str, str] = {
    **dict.fromkeys(("relu", "relu6", "hardtanh", "threshold", "leakyrelu", "prelu", "clamp", "clampmin",
                     "clampmax", "clip", "hardswish", "hardsigmoid", "thresholdedrelu"), "relu"),
    **dict.fromkeys(("mul", "div", "reciprocal", "neg"), "mul"),
    **dict.fromkeys(("exp", "log", "pow", "sqrt", "rsqrt", "erf", "elu", "selu", "celu", "softplus", "mish",
                     "sin", "cos"), "exp"),
    **dict.fromkeys(("sigmoid", "silu", "logsigmoid"), "sigmoid"),
    "tanh": "tanh", "gelu": "gelu",
    **dict.fromkeys(("dropout", "nativedropout", "featuredropout", "alphadropout"), "dropout"),
}
#: Vector operator of each non-pointwise cost kind (:data:`placement.io.opgraph.BACKWARD_FACTOR`).
KIND_VECTOR_OPS: dict[str, str] = {"norm": "layernorm", "softmax": "softmax", "reduction": "reduce", "pool": "pool",
                                   "gather": "copy", "copy": "copy", "constant": "copy", "unknown": "copy"}
#: Vector operators whose gradient takes two passes.
TWO_PASS_GRADIENTS = frozenset({"softmax", "layernorm"})


def flops(op: Operator) -> int:
    """FLOPs of a GEMM (one multiply-add = 2), 0 for a vector operator."""
    return 2 * op.batch * op.m * op.n * op.k if op.kind == "gemm" else 0


def to_json(op: Operator) -> dict:
    """A GEMM or vector operator in the model-file format of :mod:`placement.codesign.workload`."""
    if op.kind == "gemm":
        return {"kind": "gemm", "m": op.m, "n": op.n, "k": op.k, "batch": op.batch}
    return {"kind": "vector", "op": op.op, "elements": op.elements}


def gemm(m: int, n: int, k: int, batch: int = 1) -> tuple[Operator, ...]:
    """One GEMM, none when a dimension is empty."""
    dims = (int(m), int(n), int(k), int(batch))
    return (Operator("gemm", *dims),) if min(dims) > 0 else ()


def vector(op: str, elements: int) -> tuple[Operator, ...]:
    """One vector operator, none over no elements."""
    return (Operator("vector", op=op, elements=int(elements)),) if elements > 0 else ()


def _numel(shape: Sequence[int]) -> int:
    return int(math.prod(int(d) for d in shape))


def matmul(a: Sequence[int], b: Sequence[int], out: Sequence[int], linear: bool = False,
           bias: bool = False) -> tuple[Operator, ...]:
    """A matmul of ``a`` by ``b`` (``linear``: ``b`` is a weight ``[N, K]``) giving ``out``, with
    an optional bias (module docstring)."""
    k = int(a[-1]) if len(a) else 1
    if k <= 0:
        return ()
    if linear or len(b) <= 2:
        n = int(b[0]) if linear else (int(b[-1]) if len(b) == 2 else 1)
        shapes = gemm(_numel(a) // k, n, k)
    else:
        m, n = (int(a[-2]) if len(a) >= 2 else 1), int(b[-1])
        shapes = gemm(m, n, k, _numel(out) // max(m * n, 1))
    return shapes + (vector("add", _numel(out)) if bias else ())


def convolution(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool = False,
                bias: bool = False) -> tuple[Operator, ...]:
    """A convolution's implicit GEMM per group (module docstring), plus its bias add."""
    channel = 1 if len(x) == len(w) else 0          # batched input [N, C, ...] or unbatched [C, ...]
    kernel = _numel(w[2:])
    if 0 in (_numel(x), _numel(w), _numel(out)):   # no channels, no batch: no GEMM (nor groups to count)
        return vector("add", _numel(out)) if bias else ()
    if transposed:   # weight [C_in, C_out/g, *k]
        groups = int(out[channel]) // int(w[1])
        shapes = gemm(_numel(x) // int(x[channel]), int(w[1]) * kernel, int(w[0]) // groups, groups)
    else:            # weight [C_out, C_in/g, *k]
        groups = int(x[channel]) // int(w[1])
        shapes = gemm(_numel(out) // int(out[channel]), int(w[0]) // groups, int(w[1]) * kernel, groups)
    return shapes + (vector("add", _numel(out)) if bias else ())


def attention(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> tuple[Operator, ...]:
    """Scaled dot-product attention: scores, softmax, weighted values (module docstring)."""
    length, width, keys, value_width = int(q[-2]), int(q[-1]), int(k[-2]), int(v[-1])
    batch = _numel(q[:-2])
    return (gemm(length, keys, width, batch) + vector("softmax", batch * length * keys)
            + gemm(length, value_width, keys, batch))


def elementwise(kind: str, name: str, in_elements: int, out_elements: int) -> tuple[Operator, ...]:
    """The vector operator of a non-GEMM operator of cost ``kind`` called ``name`` (module docstring)."""
    if kind in ("view", "matmul", "conv", "attention"):
        return ()
    if kind == "pointwise":
        return vector(VECTOR_OPS.get(name.lower().replace("_", ""), "add"), out_elements)
    elements = in_elements if kind in ("norm", "softmax", "reduction", "pool") else out_elements
    return vector(KIND_VECTOR_OPS[kind], elements)


def backward(kind: str, forward: Sequence[Operator], weights: bool = True,
             inputs: bool = True) -> tuple[Operator, ...]:
    """The gradient operators of an operator of cost ``kind`` whose forward shapes are ``forward``
    (module docstring, "Backward"); without ``weights`` no weight-gradient GEMM (``dB``: frozen
    weights), without ``inputs`` no input-gradient GEMM (``dA``: an input that needs none)."""
    if kind in ("view", "constant"):
        return ()
    out: list[Operator] = []
    if kind == "attention":
        out.extend(next(([s] for s in forward if s.kind == "gemm"), []))   # the scores, recomputed
    for s in forward:
        if s.kind == "gemm":
            out.extend((gemm(s.m, s.k, s.n, s.batch) if inputs else ())
                       + (gemm(s.k, s.n, s.m, s.batch) if weights else ()))
        else:
            out.extend([s] * (2 if s.op in TWO_PASS_GRADIENTS else 1))
    return tuple(out)
