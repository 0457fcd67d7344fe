"""Import an ONNX model: operators, FLOPs and bytes from shape inference, the same cost model.

Needs the optional extra ``onnx`` (``pip install 'placement[onnx]'``), imported on use.

What is read
------------
The graph is checked first (:mod:`placement.io.onnx_checks`: names are text, a node of the
default domain has as many inputs and outputs as its operator's schema allows, every tensor is
written once and read only where written, every graph output is written; nodes stored out of order
are sorted, a cycle is an error), but for an ``Identity`` that writes the graph input it reads, which
torch's dynamo exporter writes for a model that returns its input as given: it is dropped.
``onnx.shape_inference.infer_shapes`` then gives every tensor its element type and shape,
following shapes the graph computes itself (``Shape`` and the arithmetic on it, as exporters
write broadcasts and reshapes), helped by evaluating that arithmetic where its own
propagation stops (:mod:`placement.io.onnx_shapes`); a declared shape its operators contradict
is an error. All shapes must be static (symbolic input dimensions can be fixed with ``dims``,
e.g. ``{"batch": 8}``). Weights stored outside the file are not read (:func:`read_onnx`).
The calls of the model's own functions are replaced by their bodies' nodes, in the caller's module
(:func:`_inline_local_functions`), and an ``If`` whose condition follows from constants and static shapes
by the nodes of the branch it takes, in its module (:mod:`placement.io.onnx_branches`). Every node of the
main graph is an operator, in graph order, except ``Constant`` nodes: their values, like the initializers
(dense or sparse), are data the consumers read (initializers of floating-point type and more than one
element are the trained parameters, except a BatchNormalization's statistics, the zeros read only as a
recurrent operator's initial state (:func:`_zero_initial_states`: read, but no parameter, held in no memory),
the tensors of one value that only fills read (:func:`_folded_fills`: the values a ``Where`` selects between, the
operands of ``Max``, ``Min`` and of comparisons, a ``zeros_like`` or ``full`` the exporter folded; read, held in no
memory, and so are such ``Constant`` values; one an arithmetic operator, a product or a normalisation reads, a bias
of zeros, stays a parameter),
the identity scale and bias of a ``group_norm`` written out (:func:`_group_norm_identities`: neither held nor
read), the mask of ``is_causal=True`` that the dynamo exporter's optimiser folds into an initializer added to an
attention's scores (:func:`~placement.io.onnx_tied.causal_valued`: neither held nor read, as PyTorch's kernel
makes it) and those read only as sizes or scales,
a ``Resize``'s scales (:func:`_sizes_only`)); a floating-point or boolean initializer or ``Constant`` of one
element is a number of the program, as PyTorch passes it to its kernel (a scale, a fill value, a dropout's ratio
and mode): held in no memory, read without moving bytes; an ``Identity`` of
such data (an alias exporters write for shared or deduplicated parameters) is that data, read
under its own name, and so is the transposed copy exporters write of a tied weight
(:mod:`placement.io.onnx_tied`). An ``Identity`` of a model input, or a chain of them, is that input:
a graph output so reached is the input returned as given (``return f(x), x``), as the torch importer
records it.
So is the result of shape arithmetic (a node reading only constants, integer initializers,
``Shape`` outputs and other such results, as unoptimised exports write for reshapes and the
attention scale, each result at most :data:`~placement.io.onnx_shapes.SMALL` elements, or
:data:`FLOAT_SHAPE_VALUES` of a floating-point type), which
PyTorch computes on the host; ``Range`` and ``ConstantOfShape`` stay operators (kernels in
PyTorch), but for those of integers that end only as sizes or axes (:func:`_shape_arithmetic`). So
are the nodes that only lay a recurrent operator's weights out in ONNX's gate order, and the views of
the whole of one parameter (:func:`_parameter_derivations`): the operators that read them read the
parameters they derive from.
Tensors of 4-bit and 2-bit types take half and a quarter of a byte per element.
A ``SplitToSequence`` whose parts are taken by ``SequenceAt`` is read as a ``Split``
(:mod:`placement.io.onnx_sequences`); other sequences are refused.
The module path of an operator comes from the
``pkg.torch.onnx.name_scopes`` metadata that ``torch.onnx.export`` writes, or else from a
node name of the form ``/a/b.0/c/Op`` (modules ``a``, ``a.b.0``, ``a.b.0.c``); a batch
normalisation folded into the layer before it is that layer's call (:func:`_module_path`).
Those scopes are names, not module objects: the TorchScript exporter names a module's second call
``shared_1``, and the dynamo exporter names a module registered under two names by the name each
call uses. In the TorchScript exporter's files, two scopes, neither inside the other, whose operators
read the same trained parameters (by the names the file's nodes read them by; parameters whose values
are all equal, which exporters merge across modules, do not count) in the same order by the same
operators are calls of one module (:func:`_calls_of_one_module`), and so are the scopes of one name
inside them: neither begins a module called once (:mod:`placement.io.op_grouping`). The dynamo
exporter merges parameters of equal values into one name without an alias, so there the deep copies
of a block that have not been trained read one parameter just as one module called twice does, and
shared names are no evidence. A repeated call that reads no such parameter, consecutive calls the
exporter writes under one scope, or (dynamo) a module registered under two names, look like calls of
modules called once.

FLOPs (one multiply-add = 2 FLOPs, bias not counted), ``A`` the first operand:

==============================================  =========================================
operators                                       FLOPs
==============================================  =========================================
MatMul                                          2 · numel(out) · A.shape[-1]
Gemm                                            2 · numel(out) · K (K = A's inner dimension)
Einsum of two operands                          2 · the GEMM it runs
                                                (:mod:`placement.io.layer_gemms`), or
                                                numel(out) where it only multiplies;
                                                of three or more: its products of two,
                                                left to right; of one: 0
LSTM, GRU, RNN (``G`` = 4, 3, 1 gates, ``D``    2 · D · T · N · G·H · (I + H), as in
directions, ``T`` steps of batch ``N``, input   the torch importer; training: its
``I``, hidden ``H``)                            gradient GEMMs (:mod:`placement.io.opgraph`)
Conv (``W`` ``[C_out, C_in/g, *k]``)            2 · numel(out) · numel(W) / C_out
ConvTranspose (``W`` ``[C_in, C_out/g, *k]``)   2 · numel(X) · numel(W) / C_in
LayerNormalization and other normalisations     5 · numel(input)
(LRN too), Softmax, LogSoftmax,
SoftmaxCrossEntropyLoss
elementwise operators (QuantizeLinear and       c · numel(out): c = 8 Gelu, 4 Tanh and
DequantizeLinear, the trigonometric and bitwise Sigmoid, 5 Swish (as PyTorch's SiLU), 6
operators, Swish, SwiGLU, RotaryEmbedding too)  SwiGLU (a SiLU and a product), 3
                                                RotaryEmbedding (two products and a sum),
                                                else 1
Resize, Upsample, GridSample (resampling)       numel(out), as the torch importer's
                                                interpolate and grid_sample
Reduce*, ArgMax/ArgMin, CumSum, CumProd,        numel(input)
Hardmax, pooling, Col2Im (torch's ``F.fold``:
the patches that overlap summed)
TopK (``n`` elements along ``axis``; the        numel(input) · ⌈log2 n⌉, as the torch
exporters write ``sort`` and ``argsort`` so)    importer's ``sort`` and ``topk``
views (BitCast too), gathers, copies            0
(MaxUnpool, which writes each value at its
index in zeros, as torch's max_unpool; OneHot,
ReverseSequence, CenterCropPad, TensorScatter),
constants (the window functions too)
==============================================  =========================================

Bytes moved follow :mod:`placement.io.torch_export`: tensors read plus tensors written;
views move nothing and launch no kernel: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
and the layout operators PyTorch runs as strided views (Transpose, Split, Slice, Expand,
Shape, Size, a Gather of one scalar index, which is torch's ``select``), and an inference
Dropout (no ``training_mode`` input, or one that is false) or one of ``ratio`` 0, which returns
its input; gathers read their indices and the gathered rows and write their output. The sizes, axes,
positions and scales a file holds for an operator (a Reshape's shape, a Resize's scales: :data:`SHAPE_INPUTS`)
are host values in PyTorch, read without moving bytes. A Slice with a
negative step is ``torch.flip``, which the exporters write so and PyTorch runs as a copy (a stride
cannot be negative): a copy here.

Nodes the exporter wrote for one PyTorch kernel are one operator
(:mod:`placement.io.onnx_fusion`): a bias or scale ``Add``/``Mul`` with the matmul,
convolution or normalisation it follows, the MatMul/Softmax/MatMul of attention. Such an
operator reads the tensors its nodes take from outside, writes its last node's outputs,
and counts the FLOPs of its matmul, convolution or normalisation nodes (the attention
formula of :mod:`placement.io.torch_export`); its name is that of its main node, its
target the node types joined by ``+``. A node without a module scope (one the exporter's
optimiser made) takes the module path of the first node that reads it, or, where no node reads it (the
``Identity`` written for a value returned twice), that of the node that writes what it reads. Any other
operator (another domain, control flow, an operator without a rule) is costed by the bytes it moves and named in a
:class:`~placement.io.opgraph.CostModelWarning`. A control-flow operator (``If``, ``Loop``,
``Scan``) reads, besides its inputs, every value of the main graph its subgraphs read: those are
edges like any other; the initializers its subgraphs hold are its parameters, as the main graph's
weights they read are; the work inside its subgraphs is not costed. ``dtype`` overrides the type of every
floating-point tensor, as in the torch importer.

Every operator also records what it computes, as GEMMs and vector operators with their
shapes (:mod:`placement.io.operator_shapes`), for the co-design; a fused operator lists
those of its nodes in order, less those its PyTorch kernel folds in (:data:`FUSED_SHAPE_KINDS`:
attention keeps its two matmuls and softmax, not its scale and mask; a normalisation keeps
itself, not its affine ``Mul`` and ``Add``), as the torch importer gives them.
"""

from __future__ import annotations

import ast
import functools
import math
import os
import warnings
from collections import Counter
from decimal import Decimal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from placement.costmodel.roofline import ELEMENT_BYTES, Platform, check_dtype
from placement.codesign.workload import Operator
from placement.errors import InvalidInstanceError, InvalidParameterError, SolverUnavailableError
from placement.io import layer_gemms, operator_shapes as shapes
from placement.io.onnx_branches import graph_attribute, names_in, subgraphs, take_known_branches
from placement.io.onnx_checks import (check_default_opset, check_element_types, check_schemas,
                                      check_single_definitions, check_text, default_opset, topological_nodes)
from placement.io.onnx_fusion import FusionNode, fuse
from placement.io.onnx_sequences import split_sequences
from placement.io.onnx_shapes import RECURRENT_GATES, SMALL, shaped_model, static_shapes, written_by
from placement.io.onnx_tied import causal_valued, constant_valued, one_valued, transposed_copies, zero_valued
from placement.io.op_grouping import check_grouping, group_ops
from placement.io.opgraph import (CostModelWarning, ImportedModel, Op, OpGraph, Param, build, bytes_moved,
                                  check_options, typed_integer_operators)
from placement.jsonfile import file_stem
from placement.parameters import shown
from placement.problem.union_find import UnionFind

KINDS: dict[str, str] = {}
for _kind, _names in {
    "matmul": "MatMul Gemm",
    "conv": "Conv ConvTranspose",
    "norm": "LayerNormalization BatchNormalization InstanceNormalization GroupNormalization RMSNormalization "
            "LpNormalization MeanVarianceNormalization LRN",
    "softmax": "Softmax LogSoftmax SoftmaxCrossEntropyLoss",
    "pointwise": "Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Relu LeakyRelu PRelu Elu Selu Celu Sigmoid "
                 "HardSigmoid HardSwish Tanh Erf Gelu Softplus Softsign Clip Min Max Mean Sum Equal Less Greater "
                 "LessOrEqual GreaterOrEqual Not And Or Xor Floor Ceil Round Sign Mod IsNaN IsInf Sin Cos "
                 "Dropout Mish BitShift ThresholdedRelu Shrink Resize Upsample GridSample QuantizeLinear "
                 "DequantizeLinear Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh BitwiseAnd BitwiseOr BitwiseXor "
                 "BitwiseNot Swish SwiGLU RotaryEmbedding",
    "reduction": "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
                 "ReduceLogSumExp ReduceSumSquare ArgMax ArgMin CumSum CumProd Hardmax NegativeLogLikelihoodLoss "
                 "TopK Col2Im",
    "pool": "MaxPool AveragePool GlobalAveragePool GlobalMaxPool LpPool GlobalLpPool",
    "view": "Reshape Flatten Squeeze Unsqueeze Identity Transpose Split Slice Expand Shape Size BitCast",
    "gather": "Gather GatherElements GatherND",
    "copy": "Concat Tile Pad Cast CastLike ScatterND ScatterElements Scatter Trilu Where DepthToSpace SpaceToDepth "
            "MaxUnpool OneHot ReverseSequence CenterCropPad TensorScatter",
    "constant": "ConstantOfShape Range EyeLike RandomNormal RandomUniform RandomNormalLike RandomUniformLike "
                "HannWindow HammingWindow BlackmanWindow MelWeightMatrix",
    "recurrent": "LSTM GRU RNN",
    "attention": "Attention",
}.items():
    KINDS.update(dict.fromkeys(_names.split(), _kind))
#: FLOPs per output element of pointwise operators (1 unless listed): Swish as PyTorch's SiLU, SwiGLU a SiLU and
#: a product, RotaryEmbedding two products and a sum
POINTWISE_FLOPS = {"Gelu": 8, "Tanh": 4, "Sigmoid": 4, "Swish": 5, "SwiGLU": 6, "RotaryEmbedding": 3}
#: a recurrent node's inputs that are its initial hidden (and cell) state
RECURRENT_STATE = slice(5, 7)
#: the inputs of ``LSTM``, ``GRU`` and ``RNN`` that are their weights: ``W``, ``R``, ``B``
RECURRENT_WEIGHTS = (1, 2, 3)
#: the operators that only move elements, with which exporters lay recurrent weights out in ONNX's gate order
RELAYOUT = frozenset({"Slice", "Split", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose",
                      "Identity"})
#: the operators that view the whole of one tensor, element for element (a cast to the type it has returns it)
WHOLE_VIEWS = frozenset({"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose", "Identity", "Cast", "CastLike"})
#: FLOPs per element of the PyTorch kernels an exporter decomposes (placement.io.onnx_fusion; 1 unless listed).
DECOMPOSED_FLOPS = {"gelu": 8, "silu": 5}
#: Kinds whose FLOPs a fused group counts (a bias, a scale, a softmax inside attention are not counted).
FUSED_FLOP_KINDS = frozenset({"matmul", "conv", "norm"})
#: Per fused kind, the member kinds whose operator shapes the fused operator lists (others are folded in).
FUSED_SHAPE_KINDS = {"attention": frozenset({"matmul", "softmax", "attention"}), "norm": frozenset({"norm"})}
NORM_FLOPS = 5
ONNX_DTYPE_KEYS = {"FLOAT": "fp32", "DOUBLE": "fp64", "FLOAT16": "fp16", "BFLOAT16": "bf16", "FLOAT8E4M3FN": "fp8",
                   "FLOAT8E4M3FNUZ": "fp8", "FLOAT8E5M2": "fp8", "FLOAT8E5M2FNUZ": "fp8"}


class ModuleScopeWarning(CostModelWarning):
    """A model imported at module granularity that records no module: one node of every operator."""


def require_onnx() -> Any:
    """The ``onnx`` module, or a :class:`SolverUnavailableError` saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise SolverUnavailableError("importing ONNX models needs onnx: pip install 'placement[onnx]'") from None
    return onnx


def read_onnx(path: str | Path) -> Any:
    """Load an ONNX file; a missing or malformed file is an :class:`InvalidInstanceError` naming it.

    Only shapes are needed, so tensors stored outside the file (external data, which ONNX requires
    of models over 2 GiB) are not read, except integer tensors of at most
    :data:`~.onnx_shapes.SMALL` elements, which may be shapes the graph computes with: a model is
    read without its weight files."""
    path = Path(path)
    if path.is_dir():
        raise InvalidInstanceError(f"{path}: a directory, not an ONNX model")
    if not path.is_file():
        raise InvalidInstanceError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InvalidInstanceError(f"{path}: an empty file, not an ONNX model")
    onnx = require_onnx()   # once there is a model to read
    try:
        model = onnx.load(str(path), load_external_data=False)
    except OSError as exc:
        raise InvalidInstanceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except Exception as exc:  # protobuf raises DecodeError
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InvalidInstanceError(f"{path}: not an ONNX model ({type(exc).__name__}"
                                   + (f": {detail}" if detail else "") + ")") from None
    if not model.HasField("graph"):   # bytes that happen to parse (a few bytes of text) hold no graph
        raise InvalidInstanceError(f"{path}: not an ONNX model (it holds no graph)")
    _load_small_external_data(model, path, onnx)
    return model


def _load_small_external_data(model: Any, path: Path, onnx: Any) -> None:
    """Read the external data of the integer tensors of the main graph of at most ``SMALL`` elements."""
    from onnx.external_data_helper import load_external_data_for_tensor

    # each tensor with what it is: a Constant node's value is a tensor without a name of its own
    tensors = [(f"the data of tensor {init.name!r}", init) for init in model.graph.initializer]
    tensors += [(f"the value of Constant node {node.name!r}" if node.name else
                 f"the value of the Constant node that writes {node.output[0] if node.output else ''!r}", attr.t)
                for node in model.graph.node if node.op_type == "Constant"
                for attr in node.attribute if attr.HasField("t")]
    known_types = set(onnx.TensorProto.DataType.values())
    for what, tensor in tensors:
        if (tensor.data_location != onnx.TensorProto.EXTERNAL or math.prod(tensor.dims) > SMALL
                or tensor.data_type not in known_types   # refused when its table entry is made
                or onnx.TensorProto.DataType.Name(tensor.data_type) in ONNX_DTYPE_KEYS):
            continue
        try:
            load_external_data_for_tensor(tensor, str(path.parent))
        except Exception as exc:  # onnx raises OSError, ValueError or its ValidationError
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidInstanceError(f"{path}: cannot read {what}, stored outside the model ({detail})") from None


#: the most elements of a floating-point result of shape arithmetic (a scale per dimension, as
#: ``Resize`` reads; the attention scale is one)
FLOAT_SHAPE_VALUES = 8
#: operators on ONNX sequences (lists of tensors), which the importer does not read
SEQUENCE_OPERATORS = frozenset({"SplitToSequence", "SequenceAt", "SequenceConstruct", "SequenceEmpty",
                                "SequenceInsert", "SequenceErase", "SequenceLength", "ConcatFromSequence",
                                "SequenceMap"})
#: bits per element of the element types narrower than a byte (numpy holds them in one byte each)
SUB_BYTE_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2, "FLOAT6E2M3": 6, "FLOAT6E3M2": 6}
#: the most bytes one tensor may hold (far beyond any device; it keeps the sums finite)
MAX_TENSOR_BYTES = 2 ** 80


class _Tensor:
    """Element type name, shape and size of one tensor."""

    def __init__(self, name: str, elem_type: int, shape: tuple[int, ...], dtype: str | None, onnx: Any,
                 model: str = "model") -> None:
        self.name = name
        try:
            self.type_name = onnx.TensorProto.DataType.Name(elem_type)
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize
        except (ValueError, KeyError):
            raise InvalidInstanceError(f"{model}: tensor {name!r} has element type {elem_type}, which is no ONNX "
                                       "element type this onnx version knows") from None
        self.shape = shape
        self.numel = int(math.prod(shape))
        self.floating = self.type_name in ONNX_DTYPE_KEYS
        if self.floating and dtype is not None:
            size = self.numel * ELEMENT_BYTES[dtype]
            self.key = dtype
        else:
            bits = SUB_BYTE_BITS.get(self.type_name)
            size = self.numel * itemsize if bits is None else math.ceil(self.numel * bits / 8)
            self.key = ONNX_DTYPE_KEYS.get(self.type_name, "fp32")
        if size > MAX_TENSOR_BYTES:
            raise InvalidInstanceError(f"{model}: tensor {name!r} holds {Decimal(self.numel):.3e} elements "
                                       f"({len(shape)} dimensions), more than any device can hold")
        self.nbytes = float(size)


#: the largest value a symbolic dimension may be fixed to
MAX_DIM = 2 ** 40


def _fix_dims(model: Any, dims: dict[str, int]) -> None:
    """Replace symbolic input dimensions by the values in ``dims``; every name must be one of the
    model's symbolic input dimensions (:func:`_symbolic_dims`: an unnamed one is named ``input[k]``),
    and every value a positive integer up to :data:`MAX_DIM`."""
    symbolic = _symbolic_dims(model)
    for key, size in dims.items():
        if key not in symbolic:
            known = ", ".join(dict.fromkeys(symbolic)) or "none"
            raise InvalidParameterError("dims", f"names {key!r}, which is not a symbolic input dimension of the "
                                                f"model (it has: {known})")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_DIM:
            raise InvalidParameterError("dims", f"must give each dimension a positive integer up to 2^40, "
                                                f"got {key}={size!r}")
    for value in model.graph.input:
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_name(value, k, dim)
            if not dim.HasField("dim_value") and key in dims:
                dim.dim_value = int(dims[key])


def _initialised_input_dims(graph: Any) -> None:
    """Give each symbolic dimension of a graph input that an initializer of its name gives a default (a weight
    a runtime may replace) the size the initializer holds, and such an input of a tensor type declaring no shape
    the initializer's shape: it is known, where ONNX's shape inference takes the input's declared one. An input
    of another rank is left to :func:`check_initialised_inputs`."""
    held = {init.name: list(init.dims) for init in graph.initializer}
    for value in graph.input:
        if value.name not in held or not value.type.HasField("tensor_type"):
            continue
        if not value.type.tensor_type.HasField("shape"):
            value.type.tensor_type.shape.SetInParent()   # a scalar's shape has no dimensions
            for size in held[value.name]:
                value.type.tensor_type.shape.dim.add().dim_value = int(size)
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) == len(held[value.name]):
            for dim, size in zip(dims, held[value.name]):
                if not dim.HasField("dim_value"):
                    dim.dim_value = int(size)


def _symbolic_dims(model: Any) -> list[str]:
    """The names of the model's input dimensions that are still symbolic (or unnamed and unknown)."""
    found: dict[str, None] = {}
    for value in model.graph.input:
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                found.setdefault(_dim_name(value, k, dim))
    return list(found)


def _dim_name(value: Any, k: int, dim: Any) -> str:
    """How ``dims`` names dimension ``k`` of input ``value``: its symbol, or ``input[k]`` where it has none."""
    return dim.dim_param if dim.HasField("dim_param") and dim.dim_param else f"{value.name}[{k}]"


def _shapeless_inputs(model: Any) -> list[str]:
    """The model's inputs (other than initializers) that are tensors declaring no shape at all, or that declare
    no type (``make_empty_tensor_value_info``)."""
    data = {init.name for init in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in data
            and (value.type.WhichOneof("value") is None
                 or value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape"))]


#: how a message names the value of each non-tensor type an ONNX graph input may declare
_VALUE_TYPES = {"optional_type": "an optional", "sequence_type": "a sequence", "map_type": "a map",
                "sparse_tensor_type": "a sparse tensor", "opaque_type": "an opaque value"}


def _non_tensor_inputs(model: Any) -> dict[str, str]:
    """The model's inputs that declare a type other than a tensor (an optional, a sequence), each with the words
    that name its type."""
    found = {}
    for value in model.graph.input:
        kind = value.type.WhichOneof("value")
        if kind in _VALUE_TYPES:
            found[value.name] = _VALUE_TYPES[kind]
    return found


def _loop_carried(node: Any) -> int:
    """The number of values a ``Loop`` carries from one iteration to the next (its outputs after them are scan
    outputs): its body's inputs but the iteration number and the condition."""
    body = graph_attribute(node, "body")
    return max(len(body.input) - 2, 0) if body is not None else len(node.output)


def _branch_shapes(node: Any, k: int) -> tuple[list[int], list[int]] | None:
    """The static shapes the two branches of ``If`` ``node`` declare for its output ``k``, where they differ;
    ``None`` otherwise."""
    shapes = []
    for wanted in ("then_branch", "else_branch"):
        branch = graph_attribute(node, wanted)
        if branch is None or k >= len(branch.output) or not branch.output[k].type.tensor_type.HasField("shape"):
            return None
        dims = branch.output[k].type.tensor_type.shape.dim
        if not all(dim.HasField("dim_value") for dim in dims):
            return None
        shapes.append([int(dim.dim_value) for dim in dims])
    return (shapes[0], shapes[1]) if shapes[0] != shapes[1] else None


def _uninferred_in_domain(onnx: Any, model: Any, node: Any) -> str | None:
    """Why onnx infers no shape for ``node`` of a domain other than the default one, where it defines the node's
    operator at the model's opset of that domain without a shape inference (``ai.onnx.ml``'s ``Normalizer``);
    ``None`` where it defines none or one with an inference."""
    version = max((entry.version for entry in model.opset_import if entry.domain == node.domain), default=None)
    if version is None:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, version, node.domain)
    except onnx.defs.SchemaError:
        return None
    if schema.has_type_and_shape_inference_function:
        return None
    return (f"onnx defines {node.domain}::{node.op_type}-{schema.since_version}, the version of the model's opset "
            f"{version} of {node.domain}, without a shape inference, so it infers no shape for its outputs; declare "
            "them in the model's value_info")


def _initializers_as_inputs(model: Any, onnx: Any) -> None:
    """Before IR version 4, every initializer is a graph input too, and onnx's shape inference reads only those
    listed as inputs: one that is not (as later versions write them) left every node reading it without a
    shape. Each is listed, with its element type and shape, as an IR 3 model lists it."""
    if model.ir_version >= 4:   # 0: not given, read as the oldest
        return
    listed = {value.name for value in model.graph.input}
    model.graph.input.extend(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
                             for init in model.graph.initializer if init.name not in listed)


def _tensor_table(model: Any, dtype: str | None, onnx: Any, name: str = "model") -> dict[str, _Tensor]:
    """Every tensor with a fully static shape, by name (after shape inference)."""
    table: dict[str, _Tensor] = {}
    graph = model.graph
    for init in graph.initializer:
        table[init.name] = _Tensor(init.name, init.data_type, tuple(int(d) for d in init.dims), dtype, onnx, name)
    for sparse in graph.sparse_initializer:
        table[sparse.values.name] = _Tensor(sparse.values.name, sparse.values.data_type,
                                            tuple(int(d) for d in sparse.dims), dtype, onnx, name)
    for value in (*graph.input, *graph.value_info, *graph.output):
        tt = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = tt.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shape = tuple(int(d.dim_value) for d in dims)
            if min(shape, default=0) < 0:   # costed as it stands, it gave negative FLOPs and sizes
                writer = written_by(graph, value.name)
                source = f"the model cannot run: {writer}" if writer else f"tensor {value.name!r} has"
                raise InvalidInstanceError(f"{name}: {source} the shape {list(shape)}, with a negative dimension")
            table.setdefault(value.name, _Tensor(value.name, tt.elem_type, shape, dtype, onnx, name))
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    table[node.output[0]] = _Tensor(node.output[0], attr.t.data_type,
                                                    tuple(int(d) for d in attr.t.dims), dtype, onnx, name)
    return table


#: the metadata in which the dynamo exporter records each node's module scopes
NAME_SCOPES = "pkg.torch.onnx.name_scopes"
#: the metadata naming the rewrite that made a node, and the rewrites that fold a batch normalisation into the
#: convolution or linear layer before it
REWRITE_RULE = "pkg.onnxscript.rewriter.rule_name"
BATCH_NORM_FOLDS = frozenset({"FuseBatchNormIntoConv", "FuseBatchNormIntoConvTranspose", "FuseBatchNormIntoGemm"})


def _module_path(node: Any) -> tuple[str, ...] | None:
    """The module scopes of an ONNX node, outermost first (``None``: the file records none).

    A batch normalisation the dynamo exporter folded into the convolution or linear layer before it is one
    node scoped to the normalisation's module; it is the call of the layer whose weight it reads (``P.conv``
    for ``P.conv.weight``, a sibling of the normalisation ``P.bn``), so that a stage beginning at it begins
    at that layer, as the PyTorch model runs it. The rewrites that made a node are listed in one string
    (``FuseBatchNormIntoConv, RemoveOptionalBiasFromConv`` for a convolution without bias)."""
    props = {prop.key: prop.value for prop in node.metadata_props}
    if NAME_SCOPES in props:
        try:
            scopes = ast.literal_eval(props[NAME_SCOPES])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            scopes = None
        # anything but the list of module names torch writes: the node name is read instead
        if isinstance(scopes, (list, tuple)) and all(isinstance(s, str) for s in scopes):
            path = tuple(s for s in scopes[:-1] if s)
            rules = {rule.strip() for rule in props.get(REWRITE_RULE, "").split(",")}   # one, or a list
            if rules & BATCH_NORM_FOLDS and path and len(node.input) > 1:
                layer, _, field = node.input[1].rpartition(".")
                if field == "weight" and layer.rpartition(".")[0] == path[-1].rpartition(".")[0]:
                    return (*path[:-1], layer)
            return path
    if not node.name.startswith("/"):
        return None
    # the TorchScript exporter names a container's children by the container's name and their key
    # ("/blocks/blocks.0/ln1/...", "/seq/seq.0/seq.0.0/..."): such a segment adds only its key
    paths: list[str] = []
    parent = ""
    for part in [p for p in node.name.split("/") if p][:-1]:
        key = part[len(parent) + 1:] if parent and part.startswith(parent + ".") else part
        paths.append(f"{paths[-1]}.{key}" if paths else key)
        parent = part
    return tuple(paths)


def _calls_of_one_module(ops: list[Op], weights: list[tuple[str, ...]], constant: Callable[[str], bool]
                         ) -> tuple[tuple[str, ...], ...]:
    """The groups of module scopes of ``ops`` that the ONNX file shows to be calls of one module (module
    docstring), each in order of first appearance: scopes, neither inside the other, whose operators read
    the same trained parameters in the same order by the same operators, and the scopes of one name inside
    two such scopes (``b.act`` and ``e.act`` where ``b`` and ``e`` are one module). ``weights`` are the
    trained parameters each operator reads, by the names the file's nodes read them by (an exporter that
    merges parameters of equal values reads each through an alias of its own name); a parameter whose
    values are all equal (``constant``: a new LayerNorm's ones, a bias of zeros) is no evidence, since
    exporters also merge such parameters of distinct modules into one."""
    inside: dict[str, set[str]] = {}   # scope -> the scopes on a path with it (enclosing or enclosed)
    reading: dict[str, list[int]] = {}   # scope -> the operators inside it that read trained parameters
    for i, op in enumerate(ops):
        for scope in op.module_path:
            inside.setdefault(scope, set()).update(op.module_path)
            if weights[i]:
                reading.setdefault(scope, []).append(i)
    scopes_in_order = list(inside)
    order = {scope: k for k, scope in enumerate(scopes_in_order)}
    sets = UnionFind(len(scopes_in_order))

    def root(scope: str) -> str:
        return scopes_in_order[sets.find(order[scope])]

    def join(a: str, b: str) -> None:
        """One set of ``a``'s and ``b``'s, named by its scope that appears first."""
        later, first = sorted((sets.find(order[a]), sets.find(order[b])), reverse=True)
        sets.union(later, first)

    def alike(scopes: Iterable[str], kept: Callable[[str], bool]) -> list[list[str]]:
        """The scopes grouped by what they read (parameters ``kept`` only); groups of two or more."""
        found: dict[tuple, list[str]] = {}
        for scope in scopes:
            read = tuple((ops[i].target, names) for i in reading[scope]
                         for names in [tuple(name for name in weights[i] if kept(name))] if names)
            if read:
                found.setdefault(read, []).append(scope)
        return [group for group in found.values() if len(group) > 1]

    known: dict[str, bool] = {}

    def varied(name: str) -> bool:
        if name not in known:
            known[name] = not constant(name)
        return known[name]

    for candidates in alike(reading, lambda name: True):   # values are read only for the candidates
        for scopes in alike(candidates, varied):
            for k, a in enumerate(scopes):
                for b in scopes[k + 1:]:
                    if b not in inside[a]:
                        join(a, b)

    def groups() -> list[list[str]]:
        found: dict[str, list[str]] = {}
        for scope in inside:
            found.setdefault(root(scope), []).append(scope)
        return [group for group in found.values() if len(group) > 1]

    for group in groups():   # the scopes of one name inside two calls of one module
        for a in group:
            for b in group:
                if a == b or b in inside[a]:
                    continue
                for scope in inside[a]:
                    other = b + scope[len(a):]
                    if scope.startswith(a + ".") and other in inside and other not in inside[scope]:
                        join(scope, other)
    return tuple(tuple(group) for group in groups())


#: the operators that multiply their inputs: inputs 0 and 1, and every input of an Einsum
PRODUCTS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"})
#: the products whose inputs from 2 on are added to the product (a bias, Gemm's C), not multiplied
ADDING_PRODUCTS = frozenset({"Gemm", "Conv", "ConvTranspose"})
#: operators that run subgraphs, whose work is not costed (module docstring)
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def _attribute(node: Any, name: str, default: Any = None) -> Any:
    """The value of a node's integer or string attribute ``name``, or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return attr.s.decode("utf-8", "replace") if attr.type == attr.STRING else attr.i
    return default


def _softmax_along_last(node: Any, ins: list[_Tensor | None], opset: int) -> bool:
    """Whether ``node``, where it is a ``Softmax``, normalises along its input's last axis alone: its ``axis``
    (by default -1 from opset 13 on, 1 before, where the axes from it on are normalised as one) is the last.
    True for other nodes."""
    if node.op_type != "Softmax" or node.domain not in ("", "ai.onnx") or not ins or ins[0] is None:
        return True
    rank = len(ins[0].shape)
    axis = _attribute(node, "axis", -1 if opset >= 13 else 1)
    return rank == 0 or axis % rank == rank - 1


def _einsum_products(node: Any, ins: list[_Tensor | None]) -> list[tuple[tuple[int, ...], bool]] | None:
    """The products of two operands an ``Einsum`` runs, left to right
    (:func:`placement.io.layer_gemms.einsum_products`), or ``None``."""
    if None in ins:
        return None
    return layer_gemms.einsum_products(_attribute(node, "equation"), [t.shape for t in ins])


def _einsum_contractions(node: Any, ins: list[_Tensor | None]) -> list[layer_gemms.Contraction] | None:
    """:func:`_einsum_products` with the operands of each product's factors
    (:func:`placement.io.layer_gemms.einsum_contractions`)."""
    if None in ins:
        return None
    return layer_gemms.einsum_contractions(_attribute(node, "equation"), [t.shape for t in ins])


def _einsum_operands(anchor: _Node, kind: str, producers: Mapping[str, tuple[int, int]],
                     derived: Mapping[str, tuple[str, ...]], statistics: set[str], tied: Mapping[str, str]
                     ) -> tuple[tuple[layer_gemms.Contraction, ...], tuple[tuple[int, int] | str | None, ...]]:
    """An ``Einsum`` of three or more inputs costed as its products (``kind`` matmul): those products with the
    operands of their factors, left to right (:func:`placement.io.layer_gemms.einsum_contractions`), and its
    inputs in order (:attr:`placement.io.opgraph.Op.operands`): the outputs of the operators that make them
    (``producers``), else their names, a parameter by its tied name, and a value laid out anew from
    parameters (``derived``) by the name of the first of them that is trained; ``()`` twice otherwise."""
    node = anchor.node
    if kind != "matmul" or node.op_type != "Einsum" or len(node.input) < 3:
        return (), ()
    found = _einsum_contractions(node, list(anchor.ins))
    if not found:
        return (), ()
    operands: list[tuple[int, int] | str | None] = []
    for t in node.input:
        if t in producers:
            operands.append(producers[t])
        elif t in derived:
            first = next((p for p in derived[t] if p not in statistics), derived[t][0])
            operands.append(tied.get(first, first))
        else:
            operands.append(tied.get(t, t) if t else None)
    return tuple(found), tuple(operands)


def _recurrent_gemms(node: Any, ins: list[_Tensor | None]) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The GEMMs of one ``LSTM``, ``GRU`` or ``RNN`` node, a layer of one or two directions
    (:func:`placement.io.layer_gemms.recurrent_gemms`): ``X`` ``[T, N, I]`` (``[N, T, I]`` with
    ``layout = 1``), ``W`` ``[D, G·H, I]``."""
    x, w = ins[0], ins[1]
    gates = RECURRENT_GATES[node.op_type]
    hidden = int(_attribute(node, "hidden_size", int(w.shape[1]) // gates))
    steps, batch = (x.shape[1], x.shape[0]) if _attribute(node, "layout", 0) else (x.shape[0], x.shape[1])
    return layer_gemms.recurrent_gemms(gates, int(steps), int(batch), int(x.shape[-1]), hidden, hidden, 1,
                                       int(w.shape[0]))


def _attention_shapes(node: Any, ins: list[_Tensor | None]) -> tuple[tuple[int, ...], ...]:
    """The 4-D shapes ``[batch, heads, length, width]`` of the query, keys and values of an ``Attention`` node
    (opset 23): its 3-D inputs split into ``q_num_heads`` and ``kv_num_heads`` heads, and the keys and values
    of ``past_key`` and ``past_value`` before the new ones."""
    q, k, v = (tuple(int(d) for d in t.shape) for t in ins[:3])
    if len(q) == 3:
        q_heads, kv_heads = max(_attribute(node, "q_num_heads", 1), 1), max(_attribute(node, "kv_num_heads", 1), 1)
        q = (q[0], q_heads, q[1], q[2] // q_heads)
        k = (k[0], kv_heads, k[1], k[2] // kv_heads)
        v = (v[0], kv_heads, v[1], v[2] // kv_heads)
    past = ins[4] if len(ins) > 4 and ins[4] is not None else None
    if past is not None and len(past.shape) == 4:
        k = (*k[:2], k[2] + int(past.shape[2]), k[3])
        v = (*v[:2], v[2] + int(past.shape[2]), v[3])
    return q, k, v


def _flops(kind: str, op_type: str, node: Any, ins: list[_Tensor | None], outs: list[_Tensor | None]) -> int:
    if kind in ("view", "gather", "copy", "constant", "unknown"):
        return 0
    if kind == "attention":   # torch's rule for scaled_dot_product_attention
        q, k, v = _attention_shapes(node, ins)
        return 2 * math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])
    out = outs[0]
    a = ins[0]
    if kind == "matmul":
        if op_type == "Einsum":
            return layer_gemms.einsum_flops(_einsum_products(node, ins) or [])
        if op_type == "Gemm":
            trans_a = _attribute(node, "transA", 0)
            k = a.shape[0] if trans_a else a.shape[-1]
            return 2 * out.numel * int(k)
        return 2 * out.numel * int(a.shape[-1])
    if kind == "recurrent":
        return layer_gemms.recurrent_flops(_recurrent_gemms(node, ins))
    if kind == "conv":
        w = ins[1]
        per_channel = math.prod(int(d) for d in w.shape[1:])   # numel(W) / C_in (transposed) or / C_out
        return 2 * (a.numel if op_type == "ConvTranspose" else out.numel) * per_channel
    if kind in ("norm", "softmax"):
        return NORM_FLOPS * a.numel
    if kind == "pointwise":
        return POINTWISE_FLOPS.get(op_type, 1) * out.numel
    if op_type == "TopK":   # the comparisons of sorting each row, as the torch importer's sort and topk
        n = int(a.shape[_attribute(node, "axis", -1)]) if a.shape else 1
        return a.numel * math.ceil(math.log2(n)) if n > 1 else 0
    if kind in ("reduction", "pool"):
        return a.numel
    raise AssertionError(kind)


def _operators(kind: str, op_type: str, node: Any, ins: list[_Tensor | None], outs: list[_Tensor | None]
               ) -> tuple[Operator, ...]:
    """The GEMMs and vector operators of one node (:mod:`placement.io.operator_shapes`)."""
    out = outs[0].shape if outs and outs[0] is not None else ()
    bias = len(ins) > 2 and ins[2] is not None
    if kind == "matmul" and op_type == "Einsum":
        return layer_gemms.einsum_operators(_einsum_products(node, ins) or [])
    if kind == "recurrent":
        return layer_gemms.recurrent_operators(_recurrent_gemms(node, ins))
    if kind == "attention":
        return shapes.attention(*_attention_shapes(node, ins))
    if kind == "matmul" and op_type == "Gemm":
        trans_a = _attribute(node, "transA", 0)
        k = ins[0].shape[0] if trans_a else ins[0].shape[-1]
        return shapes.gemm(out[0], out[1], k) + (shapes.vector("add", outs[0].numel) if bias else ())
    if kind == "matmul":
        return shapes.matmul(ins[0].shape, ins[1].shape, out)
    if kind == "conv":
        return shapes.convolution(ins[0].shape, ins[1].shape, out, op_type == "ConvTranspose", bias)
    first_in = ins[0].numel if ins and ins[0] is not None else 0
    return shapes.elementwise(kind, op_type, first_in, outs[0].numel if outs and outs[0] is not None else 0)


@dataclass(frozen=True)
class _Node:
    """One ONNX node as costed alone: name, label, kind, tensors, FLOPs, data type, module path,
    operator shapes."""

    name: str
    label: str
    kind: str
    node: Any
    ins: tuple[_Tensor | None, ...]
    outs: tuple[_Tensor | None, ...]
    flops: float
    dtype: str | None
    path: tuple[str, ...] | None
    operators: tuple[Operator, ...] = ()


def _cast_type(node: Any) -> str | None:
    """The name of the element type a ``Cast`` converts to, or ``None`` where it names none this onnx knows."""
    to = _attribute(node, "to")
    try:
        return require_onnx().TensorProto.DataType.Name(to) if to is not None else None
    except ValueError:
        return None


def _returns_its_input(node: Any, known: dict[str, Any]) -> bool:
    """Whether a ``Dropout`` returns its input: in evaluation (no ``training_mode`` input, or one whose
    ``known`` value is false) or of probability 0 (its ``ratio`` input, known to be 0)."""
    def value(k: int) -> Any:
        return known.get(node.input[k]) if len(node.input) > k and node.input[k] else None

    if len(node.input) < 3 or not node.input[2]:
        return True
    training, ratio = value(2), value(1)
    return (training is not None and not training.any()) or (ratio is not None and not ratio.any())


def _kind(node: Any, ins: list[_Tensor | None], known: dict[str, Any] | None = None) -> str:
    """The cost kind of a node: :data:`KINDS`, with a ``Gather`` of one scalar index (torch's ``select``),
    a ``Dropout`` that returns its input (:func:`_returns_its_input`) and a ``Cast`` to the type its input already has
    being views, and a ``Slice`` with a negative step (exporters write ``torch.flip`` so; strides cannot
    be negative in PyTorch, whose ``flip`` copies) a copy, where its steps are among the ``known`` values."""
    if (node.domain or "ai.onnx") not in ("ai.onnx", ""):
        return "unknown"
    if node.op_type == "Slice" and len(node.input) > 4 and node.input[4] in (known or {}):
        if (known[node.input[4]] < 0).any():
            return "copy"
    if node.op_type == "Gather" and len(ins) > 1 and ins[1] is not None and not ins[1].shape:
        return "view"
    if node.op_type == "Dropout" and _returns_its_input(node, known or {}):
        return "view"
    if node.op_type in ("Cast", "CastLike") and ins and ins[0] is not None and ins[0].type_name == (
            ins[1].type_name if node.op_type == "CastLike" and len(ins) > 1 and ins[1] is not None
            else _cast_type(node)):
        return "view"   # torch's ``x.to(x.dtype)`` returns x: no copy, no kernel
    if node.op_type == "Einsum":    # as the torch importer: GEMMs, a broadcast multiply, or no formula
        products = _einsum_products(node, ins)
        if products is None:
            return "unknown"
        return "pointwise" if layer_gemms.einsum_multiplies(products) else "matmul"
    return KINDS.get(node.op_type, "unknown")


def _inherit_paths(nodes: list[_Node]) -> list[tuple[str, ...]]:
    """Module paths, a node without one taking that of the first node that reads its output; one whose
    outputs no node reads (the ``Identity`` the dynamo exporter writes for a value returned twice,
    ``return y, y``), that of the node that writes the first of its inputs that a node writes."""
    readers: dict[str, int] = {}
    paths: list[tuple[str, ...] | None] = [n.path for n in nodes]
    for i in range(len(nodes) - 1, -1, -1):
        if paths[i] is None:
            later = [readers[t] for t in nodes[i].node.output if t in readers]
            paths[i] = paths[min(later)] if later else None
        for t in nodes[i].node.input:
            if t:
                readers[t] = i
    writers: dict[str, int] = {}
    resolved: list[tuple[str, ...]] = []
    for i, n in enumerate(nodes):
        path = paths[i]
        if path is None:
            first = next((writers[t] for t in n.node.input if t in writers), None)
            path = resolved[first] if first is not None else ()
        resolved.append(path)
        writers.update((t, i) for t in n.node.output if t)
    return resolved


def _outer_reads(graph: Any) -> list[str]:
    """The names a subgraph reads from the scopes around it: what its nodes (and their own subgraphs)
    read that it neither takes as input, holds as an initializer, nor computes, in order of first use."""
    defined = {v.name for v in graph.input} | {init.name for init in graph.initializer}
    reads: dict[str, None] = {}
    for node in graph.node:
        for name in (*node.input, *_subgraph_reads(node)):
            if name and name not in defined:
                reads.setdefault(name)
        defined.update(node.output)
    return list(reads)


def _subgraph_reads(node: Any) -> list[str]:
    """The outer-scope names the subgraphs of a control-flow node (``If``, ``Loop``, ``Scan``) read."""
    graphs = [attr.g for attr in node.attribute if attr.HasField("g")]
    graphs += [g for attr in node.attribute for g in attr.graphs]
    return list(dict.fromkeys(name for g in graphs for name in _outer_reads(g)))


def _expose_subgraph_reads(graph: Any) -> None:
    """Give every control-flow node of ``graph`` the outer-scope values its subgraphs read as further
    inputs: they are its dependencies, edges like any other (the copy is no valid ONNX any more, and
    is only read from here on)."""
    for node in graph.node:
        node.input.extend(name for name in _subgraph_reads(node) if name not in node.input)


def _held_weights(graph: Any) -> list[tuple[Any, list[tuple[str, int, tuple[int, ...]]]]]:
    """The control-flow nodes of ``graph`` whose subgraphs (nested ones too) hold initializers of their own that
    they read as data (not only as sizes, :func:`_reads_as_size`), each with those initializers' names, element
    types and shapes, in order: the node's parameters, as the main graph's initializers its subgraphs read are
    (a subgraph's own name may be any outer one's, or another subgraph's)."""
    def held(sub: Any) -> list[tuple[str, int, tuple[int, ...]]]:
        readers = _readers(sub)
        nested = {name for inner in sub.node for name in _subgraph_reads(inner)}

        def data(name: str) -> bool:
            return name in nested or any(not _reads_as_size(sub.node[k], i) for k, i in readers.get(name, ()))

        found = [(init.name, init.data_type, tuple(int(d) for d in init.dims)) for init in sub.initializer
                 if data(init.name)]
        found += [(sparse.values.name, sparse.values.data_type, tuple(int(d) for d in sparse.dims))
                  for sparse in sub.sparse_initializer if data(sparse.values.name)]
        return found + [weight for inner in sub.node for nested in subgraphs(inner) for weight in held(nested)]

    return [(node, weights) for node in graph.node
            for weights in [[weight for sub in subgraphs(node) for weight in held(sub)]] if weights]


#: Per operator type, the inputs it reads for their type or shape only, never their values.
META_INPUTS = {"Shape": (0,), "Size": (0,), "CastLike": (1,)}


#: Per operator type, the inputs that are sizes, axes or positions (host values in PyTorch: an ``expand``'s sizes, the
#: trip count and condition of a ``Loop``, which Python runs)
SHAPE_INPUTS = {"Expand": (1,), "Reshape": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Slice": (1, 2, 3, 4),
                "Pad": (1, 3), "Unsqueeze": (1,), "Squeeze": (1,), "Split": (1,), "Resize": (1, 2, 3),
                "Upsample": (1,), "Range": (0, 1, 2), "TopK": (1,), "OneHot": (1,), "CumSum": (1,), "CumProd": (1,),
                "CenterCropPad": (1,), "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,),
                "MelWeightMatrix": (0, 1, 2, 3, 4), "Loop": (0, 1),
                **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                       "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")}}


def _reads_as_size(node: Any, position: int) -> bool:
    """Whether ``node`` reads its input at ``position`` as a size, axis, position or scale (:data:`SHAPE_INPUTS`,
    operators of the default domain)."""
    return node.domain in ("", "ai.onnx") and position in SHAPE_INPUTS.get(node.op_type, ())


def _reads_as_select(node: Any, position: int, table: dict[str, _Tensor]) -> bool:
    """Whether ``node`` reads its input at ``position`` as the one integer position of a ``Gather`` of a
    0-dimensional index: torch's ``select``, which takes a Python int (``x[:, -1]``)."""
    index = node.input[position] if position < len(node.input) else ""
    return (node.op_type == "Gather" and node.domain in ("", "ai.onnx") and position == 1 and index in table
            and table[index].shape == () and not table[index].floating)


def _readers(graph: Any) -> dict[str, list[tuple[int, int]]]:
    """Per value name, the ``(node index, input position)`` of every node of ``graph`` that reads it."""
    readers: dict[str, list[tuple[int, int]]] = {}
    for k, node in enumerate(graph.node):
        for i, name in enumerate(node.input):
            if name:
                readers.setdefault(name, []).append((k, i))
    return readers


def _shape_arithmetic(graph: Any, table: dict[str, _Tensor]) -> set[int]:
    """The nodes of ``graph`` that compute on shapes and constants only: every input they read for
    its values is a ``Constant``, an integer initializer or the output of another such node (a
    ``Shape``'s output is one: shapes are static here). Exporters write them for reshapes and
    scales (``Concat`` of constant dimensions, ``Sqrt`` of a head size); PyTorch computes them on
    the host, so they are data, not operators. Kept as operators: nodes that make tensors
    (``Range``, ``ConstantOfShape``: ``arange`` and ``full`` are kernels), nodes whose output the
    graph returns, has no static shape or holds more than :data:`~.onnx_shapes.SMALL` elements, or
    more than :data:`FLOAT_SHAPE_VALUES` of a floating-point type (an ``Expand`` of a constant to the
    size of an activation is a tensor, not a shape; a ``DequantizeLinear`` of an int8 weight is a
    kernel, and its weight is 1 byte an element). A ``ConstantOfShape`` or ``Range`` of integers whose
    values, and all that is computed from them, end only as sizes, axes or positions of other operators
    (:func:`_reads_as_size`: another domain's ``Reshape`` may read them as data) is shape arithmetic too: the
    TorchScript exporter writes an ``expand`` of constant sizes (a class token's ``expand(batch, -1, -1)``)
    as ``ConstantOfShape``, ``Mul``, ``Equal`` and ``Where`` on them, and an unoptimised dynamo export
    unsqueezes a GroupNorm's weight and bias along the axes of a ``Range``, which PyTorch does not run."""
    candidates = {k for k, node in enumerate(graph.node)
                  if node.op_type in ("ConstantOfShape", "Range") and node.domain in ("", "ai.onnx") and node.output
                  and node.output[0] in table and not table[node.output[0]].floating}
    folded = _shape_nodes(graph, table, candidates)
    readers = _readers(graph)
    for v in graph.output:
        readers.setdefault(v.name, []).append((-1, -1))
    sizes_only: set[str] = set()   # folded values read only as sizes, or by folded nodes whose results are
    for k in sorted(folded, reverse=True):   # readers come later in the graph's (topological) order
        for name in graph.node[k].output:
            if name and all((j in folded and all(o in sizes_only for o in graph.node[j].output if o))
                            or (j >= 0 and j not in folded and _reads_as_size(graph.node[j], i))
                            for j, i in readers.get(name, ())):
                sizes_only.add(name)
    kept = {k for k in candidates & folded if graph.node[k].output[0] in sizes_only}
    return folded if kept == candidates & folded else _shape_nodes(graph, table, kept)


def _shape_nodes(graph: Any, table: dict[str, _Tensor], sizes: set[int]) -> set[int]:
    """The nodes of ``graph`` that compute on shapes and constants only (:func:`_shape_arithmetic`), the
    ``ConstantOfShape`` nodes of ``sizes`` among them."""
    static = {init.name for init in graph.initializer if not table[init.name].floating}
    static |= {n.output[0] for n in graph.node if n.op_type == "Constant" and n.output}
    returned = {v.name for v in graph.output}
    folded: set[int] = set()
    for k, node in enumerate(graph.node):
        if node.op_type == "Constant" or not node.output or (KINDS.get(node.op_type) == "constant"
                                                            and k not in sizes):
            continue   # Range, ConstantOfShape and the like make tensors: kernels in PyTorch
        if node.domain not in ("", "ai.onnx"):
            continue   # another domain's operator may be a kernel whatever it reads
        meta = META_INPUTS.get(node.op_type, ())
        values = [name for i, name in enumerate(node.input) if name and i not in meta]
        outputs = [name for name in node.output if name]
        if ((values or node.op_type in META_INPUTS) and all(name in static for name in values)
                and not returned.intersection(outputs)
                and all(name in table and table[name].numel <= (FLOAT_SHAPE_VALUES if table[name].floating else SMALL)
                        for name in outputs)
                and not _subgraph_reads(node)):
            static.update(outputs)
            folded.add(k)
    return folded


def _parameter_derivations(graph: Any, table: dict[str, _Tensor], params: dict[str, _Tensor],
                           constants: set[str], folded: set[int]) -> tuple[dict[str, tuple[str, ...]], set[int]]:
    """The nodes of ``graph`` that lay a recurrent operator's weights out anew: they move elements and
    compute nothing (:data:`RELAYOUT`), they read parameters only (every input they read for its values is
    an initializer, a constant or the output of another
    such node, at least one of them a trained parameter, a floating-point initializer of more than one
    element, or such an output, and none an integer initializer of more than
    :data:`~.onnx_shapes.SMALL` elements), and what they compute is read only by such nodes and as the
    weights ``W``, ``R``, ``B`` of an ``LSTM``, ``GRU`` or ``RNN``. ONNX orders an LSTM's gates
    ``i, o, f, c`` and PyTorch ``i, f, g, o``, so exporters write ``Slice`` and ``Concat`` nodes (and,
    unoptimised, more) that reorder PyTorch's parameters; PyTorch runs no such kernel, and such a result
    is the parameters it derives from, read by the recurrent operator. So is a view of the whole of one
    parameter, element for element (:data:`WHOLE_VIEWS`, a cast only to the type it has), whatever reads it:
    an unoptimised export transposes a linear layer's weight for its ``MatMul`` and unsqueezes a GroupNorm's
    weight and bias, and casts them to their own type, where PyTorch reads the parameters themselves. (A
    model's own computation on its parameters, such as a bias gathered from a trained table or a weight
    normalised by its norm, runs in every forward: it stays an operator.) Kept as operators too: nodes of
    ``folded`` (shape arithmetic), of another domain, with a subgraph, or whose output the graph returns.
    Returns, per output, the parameters it derives from, and the nodes."""
    returned = {v.name for v in graph.output}
    sources: dict[str, tuple[str, ...]] = {}
    nodes: set[int] = set()

    def trained(name: str) -> bool:
        return name in params and table[name].floating and table[name].numel > 1

    whole: set[int] = set()   # the views of the whole of one parameter
    viewed: set[str] = set()  # what they write
    for k, node in enumerate(graph.node):
        if (k in folded or node.op_type not in RELAYOUT | WHOLE_VIEWS or not node.output
                or node.domain not in ("", "ai.onnx") or _subgraph_reads(node)):
            continue
        meta = META_INPUTS.get(node.op_type, ())
        values = [name for i, name in enumerate(node.input) if name and i not in meta]
        outputs = [name for name in node.output if name]
        if (node.op_type in WHOLE_VIEWS and len(outputs) == 1 and len(values) >= 1 and outputs[0] in table
                and (trained(values[0]) or values[0] in viewed)):   # of a parameter, or of a whole view of one
            first, result = table[values[0]], table[outputs[0]]
            if first.numel == result.numel and first.type_name == result.type_name:
                whole.add(k)
                viewed.add(outputs[0])
        if node.op_type not in RELAYOUT and k not in whole:
            continue
        if (not values or not all(v in params or v in constants or v in sources for v in values)
                or not any(v in sources or trained(v) for v in values)
                or any(v in params and not table[v].floating and table[v].numel > SMALL for v in values)
                or returned.intersection(outputs) or not all(name in table for name in outputs)):
            continue
        derived = tuple(dict.fromkeys(p for v in values
                                      for p in (sources[v] if v in sources else (v,) if trained(v) else ())))
        for name in outputs:
            sources[name] = derived
        nodes.add(k)
    readers = _readers(graph)
    kept: set[int] = set()
    for k in sorted(nodes, reverse=True):   # readers come later in the graph's (topological) order
        read = [(j, i) for name in graph.node[k].output if name for j, i in readers.get(name, ())]
        if read and (k in whole or all(j in kept or (KINDS.get(graph.node[j].op_type) == "recurrent"
                                                     and i in RECURRENT_WEIGHTS) for j, i in read)):
            kept.add(k)
    written = {name for k in kept for name in graph.node[k].output if name}
    return {name: found for name, found in sources.items() if name in written}, kept


def _parameter_views(nodes: list[_Node], data: set[str]) -> set[str]:
    """The outputs of view operators that read parameters and constants only (``data``), directly or through
    other such views: the parts of a packed parameter, as ``nn.MultiheadAttention``'s ``in_proj_bias``, which the
    dynamo exporter splits into the biases of the query and the key-value projections of cross-attention, and
    PyTorch into views of it. An epilogue may read one as it reads a parameter (:mod:`.onnx_fusion`)."""
    views: set[str] = set()
    for n in nodes:
        read = [t for t in n.node.input if t]
        if n.kind == "view" and read and all(t in data or t in views for t in read):
            views.update(t for t in n.node.output if t)
    return views


def _zero_initial_states(graph: Any, folder: str | Path | None) -> set[str]:
    """The initializers of zeros that only recurrent operators read, as their initial hidden or cell state:
    the zeros torch's ``LSTM``, ``GRU`` and ``RNN`` start from when given no state, which the dynamo
    exporter's optimiser folds into an initializer. They are constants of the program, no parameters (held in
    no memory, as torch.export's ``zeros`` are not; an initial state the model trains is no such folded tensor
    of zeros, unless its training has not begun)."""
    readers = _readers(graph)
    returned = {v.name for v in graph.output}

    def op(k: int) -> str:
        node = graph.node[k]
        return node.op_type if node.domain in ("", "ai.onnx") else ""

    return {init.name for init in graph.initializer
            if init.name in readers and init.name not in returned
            and all(op(k) in RECURRENT_GATES and RECURRENT_STATE.start <= i < RECURRENT_STATE.stop
                    for k, i in readers[init.name])
            and zero_valued(init, folder)}


# the operators, and the positions of their inputs, that read a tensor as a fill rather than a learned term: the
# values Where selects between, the operands of Max and Min and of the comparisons (whose results carry no gradient)
FILL_READERS = {"Where": (1, 2), "Max": None, "Min": None, "Equal": None, "Greater": None, "GreaterOrEqual": None,
                "Less": None, "LessOrEqual": None}


def _stored_tensors(graph: Any) -> dict[str, Any]:
    """The tensors ``graph`` holds by name: its initializers and the values of its ``Constant`` nodes."""
    values = {init.name: init for init in graph.initializer}
    values.update((node.output[0], attr.t) for node in graph.node if node.op_type == "Constant" and node.output
                  for attr in node.attribute if attr.name == "value" and attr.HasField("t"))
    return values


def _folded_fills(graph: Any, folder: str | Path | None) -> set[str]:
    """The floating-point tensors of more than one element, all of one value, that only :data:`FILL_READERS` read
    (initializers, or ``Constant`` values): a ``zeros_like``, ``ones_like`` or ``full`` that the exporter folded
    (``torch.where(y > 0, y, torch.zeros_like(y))``; the dynamo exporter's optimiser writes an initializer, the
    TorchScript exporter a ``Constant``). They are constants of the program, no parameters (read, but held in no
    memory, as torch.export's ``zeros_like`` is an operator). A tensor of one value that an arithmetic operator, a
    product or a normalisation reads stays a parameter: a bias of zeros, a scale of ones or a LayerScale of
    ``1e-5`` is a learned term as exported before its training."""
    from onnx import TensorProto, helper

    readers = _readers(graph)
    returned = {v.name for v in graph.output}
    values = _stored_tensors(graph)

    def as_fill(k: int, i: int) -> bool:
        node = graph.node[k]
        positions = FILL_READERS.get(node.op_type, ())
        return node.domain in ("", "ai.onnx") and (positions is None or i in positions)

    def floating(tensor: Any) -> bool:
        known = tensor.data_type in TensorProto.DataType.values() and tensor.data_type != TensorProto.UNDEFINED
        return known and helper.tensor_dtype_to_np_dtype(tensor.data_type).kind in "fc"

    return {name for name, tensor in values.items()
            if name in readers and name not in returned and floating(tensor) and math.prod(tensor.dims) > 1
            and all(as_fill(k, i) for k, i in readers[name]) and constant_valued(tensor, folder)}


def _group_norm_identities(graph: Any, table: dict[str, _Tensor], folder: str | Path | None) -> set[str]:
    """The scale of ones and bias of zeros of the ``InstanceNormalization`` nodes that exporters write for
    ``group_norm``: its input reshaped to ``[N, G, -1]``, normalised per group with a scale and a bias, which ONNX
    requires, and reshaped back (then multiplied by the weight and added the bias of the ``C`` channels, the
    parameters PyTorch's kernel reads). An identity so written, initializers or ``Constant`` values that only
    such nodes read, as their scale and bias, is a constant of the program: no parameter, never read from memory.
    A scale or bias of other values is the model's own."""
    readers = _readers(graph)
    writers = {name: node for node in graph.node for name in node.output if name}
    values = _stored_tensors(graph)

    def reshape(node: Any) -> bool:
        return node is not None and node.op_type == "Reshape" and node.domain in ("", "ai.onnx")

    def regrouped(node: Any) -> bool:
        """Whether ``node`` normalises a reshape of a tensor that its output is reshaped back to."""
        if node.op_type != "InstanceNormalization" or node.domain not in ("", "ai.onnx") or len(node.input) < 3:
            return False
        before = writers.get(node.input[0])
        after = readers.get(node.output[0], []) if node.output and node.output[0] else []
        if not reshape(before) or len(after) != 1 or not reshape(graph.node[after[0][0]]) or after[0][1] != 0:
            return False
        source, grouped, result = before.input[0], node.input[0], graph.node[after[0][0]].output[0]
        return (all(t in table for t in (source, grouped, result)) and table[source].shape != table[grouped].shape
                and table[result].shape == table[source].shape)

    found: set[str] = set()
    for node in graph.node:
        if not regrouped(node):
            continue
        scale, bias = node.input[1], node.input[2]
        if (scale in values and bias in values and one_valued(values[scale], folder)
                and zero_valued(values[bias], folder)
                and all(regrouped(graph.node[k]) and position == i
                        for name, i in ((scale, 1), (bias, 2)) for k, position in readers[name])):
            found.update((scale, bias))
    return found


def _sizes_only(graph: Any, params: dict[str, _Tensor]) -> set[str]:
    """The initializers that every node reading them reads as a size, axis, position or scale
    (:data:`SHAPE_INPUTS`): a ``Resize``'s floating-point ``scales`` and ``roi``, which the dynamo exporter's
    optimiser folds into initializers. They are constants of the program, not trained parameters:
    ``F.interpolate`` reads no parameter."""
    readers = _readers(graph)
    returned = {v.name for v in graph.output}
    return {name for name in params if name in readers and name not in returned
            and all(_reads_as_size(graph.node[k], i) for k, i in readers[name])}


def _fold_data_aliases(graph: Any) -> tuple[list[tuple[str, ...]], dict[str, str]]:
    """Remove ``Identity`` nodes of an initializer or a ``Constant`` (exporters write them for tied or
    deduplicated parameters), their readers reading that data itself: data, not operators, so that a bias
    ``Add`` still fuses with its matmul and a parameter read through two names is counted once; and those of
    an operator's result (an unoptimised export writes a dropout in evaluation so, which PyTorch does not
    run: it was a node of no time of its own). An alias that is a graph output stays, but for one of a model
    input: so are removed the ``Identity`` nodes of a model input (the TorchScript exporter returns an input
    through one, ``return f(x), x``), graph outputs too: PyTorch runs no operator there, and the model
    returns that input as given. Returns, for each node left, the names it read before, and each alias with
    the value it names."""
    data = {init.name for init in graph.initializer}
    data |= {n.output[0] for n in graph.node if n.op_type == "Constant" and n.output}
    model_inputs = {v.name for v in graph.input} - data
    outputs = {v.name for v in graph.output}
    source: dict[str, str] = {}
    kept = []
    named: list[tuple[str, ...]] = []
    for node in graph.node:
        original = tuple(node.input)
        for k, name in enumerate(node.input):
            if name in source:
                node.input[k] = source[name]
        if (node.op_type == "Identity" and node.domain in ("", "ai.onnx") and len(node.input) == 1
                and len(node.output) == 1 and node.output[0] and node.input[0]
                and (node.input[0] in model_inputs or node.output[0] not in outputs)):
            source[node.output[0]] = node.input[0]
            continue
        kept.append(node)
        named.append(original)
    if source:
        del graph.node[:]
        graph.node.extend(kept)
    return named, source


def _drop_input_self_identities(graph: Any) -> None:
    """Remove each ``Identity`` that writes the graph input it reads (``Identity(x) -> x``): torch's dynamo
    exporter returns an input as given so (``return f(x), x``), though ONNX has every tensor written once.
    It computes nothing, and the graph still returns the input."""
    inputs = {v.name for v in graph.input}

    def writes_its_input(node: Any) -> bool:
        return (node.op_type == "Identity" and node.domain in ("", "ai.onnx") and len(node.input) == 1
                and list(node.output) == [node.input[0]] and node.input[0] in inputs)

    kept = [node for node in graph.node if not writes_its_input(node)]
    if len(kept) < len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)


def _declare_returned_inputs(graph: Any, onnx: Any) -> None:
    """Declare each graph output that is a graph input or an initializer (returned as given) with that
    tensor's type: it is the same tensor. An output declared without a shape (or with its symbolic dimensions,
    where ``dims`` fixed the input's) otherwise overrides the tensor's shape in ONNX's shape inference, and
    nothing the tensor feeds gets a shape."""
    inputs = {v.name: v for v in graph.input}
    stored = {init.name: (init.data_type, list(init.dims)) for init in graph.initializer}
    stored.update((sparse.values.name, (sparse.values.data_type, list(sparse.dims)))
                  for sparse in graph.sparse_initializer)
    for value in graph.output:
        if value.name in inputs:
            value.type.CopyFrom(inputs[value.name].type)
        elif value.name in stored:
            value.type.CopyFrom(onnx.helper.make_tensor_type_proto(*stored[value.name]))


def _inline_local_functions(model: Any, name: str) -> Any:
    """``model`` with the calls of its own functions (``FunctionProto``, as the TorchScript exporter writes a
    module given in ``export_modules_as_functions``, and older dynamo exporters each ATen operator) replaced
    by the nodes of their bodies, which are costed as any other node (a call was one operator of no FLOPs).
    Each node of a body called from a node of the main graph takes that node's module scope: the node
    name's ``/a/b/`` prefix and its scope metadata."""
    if not model.functions:
        return model
    bodies = {(f.domain, f.name): f for f in model.functions}
    local = set(bodies)   # the names taken, the copies' too
    calls = []

    def scope_calls(nodes: Any, label: str, called: tuple[tuple[str, str], ...]) -> None:
        """Give the bodies of the calls among ``nodes`` their callers' scopes: each call made from a copy of its
        function, under a name of its own, whose nodes (calls of further functions too) take the scope of the call.
        A function on the way (``called``) is left to the inliner, which refuses a call of itself."""
        for k, node in enumerate(nodes):
            function = bodies.get((node.domain, node.op_type))
            if function is None or (node.domain, node.op_type) in called:
                continue
            prefix = node.name.rpartition("/")[0] + "/" if node.name.startswith("/") else ""
            scopes = [prop for prop in node.metadata_props if prop.key == NAME_SCOPES]
            if not prefix and not scopes:
                continue
            copy = model.functions.add()
            copy.CopyFrom(function)
            copy.name = f"{function.name}__call{label}{k}"
            while (copy.domain, copy.name) in local:
                copy.name += "_"
            local.add((copy.domain, copy.name))
            for j, inner in enumerate(copy.node):
                inner.name = prefix + (inner.name.rpartition("/")[2] or f"{inner.op_type}_{j}")
                if scopes and not any(prop.key == NAME_SCOPES for prop in inner.metadata_props):
                    inner.metadata_props.add().CopyFrom(scopes[0])
            scope_calls(copy.node, f"{label}{k}_", (*called, (node.domain, node.op_type)))
            calls.append((node, copy.name))

    scope_calls(model.graph.node, "", ())
    for node, function in calls:
        node.op_type = function
    from onnx import inliner

    try:
        return inliner.inline_local_functions(model)
    except Exception as exc:  # onnx raises its own errors for a body it cannot inline
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInstanceError(f"{name}: the model's functions cannot be inlined ({detail})") from None


def _default_domain(nodes: Any) -> None:
    """``nodes`` and those of their subgraphs of domain ``ai.onnx`` given the default domain's other name,
    ``""``: ONNX names it both ways, and onnx's shape inference finds operators under the second only (it
    refused a ``Relu`` of domain ``ai.onnx``: "No opset import for domain ai.onnx")."""
    for node in nodes:
        if node.domain == "ai.onnx":
            node.domain = ""
        for graph in subgraphs(node):
            _default_domain(graph.node)


def _uninferred_version(onnx: Any, op_type: str, opset: int) -> tuple[int, int | None] | None:
    """Where onnx defines operator ``op_type`` of the default domain at ``opset`` without a shape inference (before
    opset 6, ``Relu``, ``Add``, ``Concat``, ``BatchNormalization`` and others): the version it reads there, and the
    first opset whose version has one (``None``: none has); ``None`` where that version has one."""
    schema = onnx.defs.get_schema(op_type, opset, "")
    if schema.has_type_and_shape_inference_function:
        return None
    later = (s.since_version for s in onnx.defs.get_all_schemas_with_history()
             if s.name == op_type and s.domain == "" and s.since_version > schema.since_version
             and s.has_type_and_shape_inference_function)
    return schema.since_version, min(later, default=None)


def _refuse_empty_inputs(graph: Any, table: Mapping[str, _Tensor], name: str) -> None:
    """Refuse a model whose inputs (the graph's, less its initializers) all hold no elements, a static batch of
    0: every operator would be costed as a run of no samples, its overhead alone."""
    weights = {init.name for init in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
    inputs = [table.get(value.name) for value in graph.input if value.name not in weights]
    if inputs and all(tensor is not None and tensor.numel == 0 for tensor in inputs):
        shapes = ", ".join(str(tensor.shape) for tensor in inputs if tensor is not None)
        raise InvalidInstanceError(f"{name}: the model's inputs hold no elements (shapes {shapes}): give it one batch "
                                   "of samples")


def graph_from_onnx(model: Any, name: str = "model", dtype: str | None = None,
                    dims: dict[str, int] | None = None, folder: str | Path | None = None) -> OpGraph:
    """The :class:`OpGraph` of an ONNX model (module docstring); warns about unknown operators. ``folder``:
    where the model's external data lies, read only to find tied weights (``None``: not read)."""
    onnx = require_onnx()
    check_dtype(dtype)
    if dims is not None and not isinstance(dims, Mapping):
        raise InvalidParameterError("dims", "must be a mapping of symbolic input dimension names to sizes, or None, "
                                            f"not {shown(dims)}")
    model = onnx.ModelProto.FromString(model.SerializeToString())  # a copy: dims are fixed in place
    check_text(model.graph, name)
    check_default_opset(model, name, onnx)
    check_single_definitions(model.graph, name)
    _initializers_as_inputs(model, onnx)
    for nodes in (model.graph.node, *(function.node for function in model.functions)):
        _default_domain(nodes)
    model = _inline_local_functions(model, name)
    check_schemas(model, name)
    _fix_dims(model, dims or {})
    _initialised_input_dims(model.graph)
    _drop_input_self_identities(model.graph)
    _declare_returned_inputs(model.graph, onnx)
    ordered = topological_nodes(model.graph, name, _subgraph_reads)
    if ordered is not None:
        del model.graph.node[:]
        model.graph.node.extend(ordered)
    shaped, known = shaped_model(model, name, onnx)
    while take_known_branches(model.graph, known):   # each time fewer If nodes, nested ones counted
        shaped, known = shaped_model(model, name, onnx)
    check_element_types(shaped, name)
    opset = max((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), default=1)
    if split_sequences(model.graph, static_shapes(shaped.graph), known, opset):
        shaped, known = shaped_model(model, name, onnx)
    _expose_subgraph_reads(model.graph)
    named, aliases = _fold_data_aliases(model.graph)
    table = _tensor_table(shaped, dtype, onnx, name)
    _refuse_empty_inputs(model.graph, table, name)
    params = {init.name: table[init.name] for init in model.graph.initializer}
    params.update((sparse.values.name, table[sparse.values.name]) for sparse in model.graph.sparse_initializer)
    taken_names = names_in(model.graph) | set(table)
    for node, weights in _held_weights(model.graph):   # each under a name of its own, read by its node
        for held, elem_type, shape in weights:
            unique, k = f"{node.name or node.op_type}/{held}", 1
            while unique in taken_names:
                unique, k = f"{node.name or node.op_type}/{held}_{k}", k + 1
            taken_names.add(unique)
            table[unique] = params[unique] = _Tensor(unique, elem_type, shape, dtype, onnx, name)
            node.input.append(unique)
    tied = transposed_copies(model.graph, folder)
    folded = _shape_arithmetic(model.graph, table)
    constants = {n.output[0] for n in model.graph.node if n.op_type == "Constant" and n.output}
    constants |= {name for k in folded for name in model.graph.node[k].output if name}
    derived, relaid = _parameter_derivations(model.graph, table, params, constants, folded)
    initial_states = _zero_initial_states(model.graph, folder)
    fills = _folded_fills(model.graph, folder)
    identities = _group_norm_identities(model.graph, table, folder)
    sizes = _sizes_only(model.graph, params)
    folded = folded | relaid
    symbolic, shapeless = _symbolic_dims(model), _shapeless_inputs(model)
    not_tensors = _non_tensor_inputs(model)

    producers = {out: node for node in model.graph.node for out in node.output if out}

    def unknown_why(tensor_name: str) -> str:
        """Why a tensor has no static shape: an operator onnx has no schema for (at the model's opset), an input
        declaring none (this one first), a symbolic dimension to fix, or values the graph computes."""
        producer = producers.get(tensor_name)
        if producer is not None and not onnx.defs.has(producer.op_type, producer.domain or ""):
            op = producer.op_type if producer.domain in ("", "ai.onnx") else f"{producer.domain}::{producer.op_type}"
            return (f"onnx knows no operator {op}, so it infers no shape for its outputs; declare them in the "
                    "model's value_info")
        if producer is not None and producer.domain in ("", "ai.onnx"):
            opset = default_opset(model)
            since = min((schema.since_version for schema in onnx.defs.get_all_schemas_with_history()
                         if schema.name == producer.op_type and schema.domain == ""), default=None)
            if opset is not None and since is not None and opset < since:
                return (f"onnx defines operator {producer.op_type} from opset {since} on, and the model imports "
                        f"opset {opset}, so it infers no shape for its outputs; export the model at opset {since} "
                        "or later, or declare them in the model's value_info")
            if opset is not None and since is not None:
                uninferred = _uninferred_version(onnx, producer.op_type, opset)
                if uninferred is not None:
                    version, later = uninferred
                    export = f"export the model at opset {later} or later, or " if later is not None else ""
                    return (f"onnx defines {producer.op_type}-{version}, the version of opset {opset}, which the "
                            f"model imports, without a shape inference, so it infers no shape for its outputs; "
                            f"{export}declare them in the model's value_info")
        if producer is not None and producer.domain not in ("", "ai.onnx"):
            uninferred = _uninferred_in_domain(onnx, model, producer)
            if uninferred is not None:
                return uninferred
        if (producer is not None and producer.op_type == "Loop" and producer.domain in ("", "ai.onnx")
                and list(producer.output).index(tensor_name) >= _loop_carried(producer)):
            return (f"it is a scan output of Loop {producer.name or 'Loop'!r}, whose number of iterations onnx's shape "
                    "inference does not follow; declare its shape in the model's value_info")
        if producer is not None and producer.op_type == "If" and producer.domain in ("", "ai.onnx"):
            shapes = _branch_shapes(producer, list(producer.output).index(tensor_name))
            if shapes is not None:
                return (f"its branches give it the shapes {shapes[0]} and {shapes[1]}, and which one runs follows "
                        "from values the graph computes")
        if tensor_name in not_tensors:
            return (f"the model's input {tensor_name!r} is {not_tensors[tensor_name]}, not a tensor, and the importer "
                    "reads tensors only")
        named = [tensor_name] if tensor_name in shapeless else [] if symbolic else shapeless
        if named:
            return (f"the model's input{'s' if len(named) > 1 else ''} {', '.join(map(repr, named))} "
                    f"declare{'' if len(named) > 1 else 's'} no shape; export the model with its input shapes")
        if symbolic:
            return (f"fix the symbolic input dimension{'s' if len(symbolic) > 1 else ''} "
                    f"{', '.join(map(repr, symbolic))} with dims")
        return "it follows from values the graph computes that the importer could not evaluate"
    nodes: list[_Node] = []
    named_inputs: list[tuple[str, ...]] = []   # per node of nodes, its inputs as the file names them
    used_names: set[str] = set()
    # the names the file gives its nodes: each keeps its own, and a second node of one name is renamed to one
    # that no node of the file has (it took "n_1" from the file's next node "n_1")
    given = {node.name for k, node in enumerate(model.graph.node)
             if node.name and node.op_type != "Constant" and k not in folded}
    for k, node in enumerate(model.graph.node):
        if node.op_type == "Constant" or k in folded:
            continue
        named_inputs.append(named[k])
        domain = node.domain or "ai.onnx"
        op_type = node.op_type
        label = op_type if domain in ("ai.onnx", "") else f"{domain}::{op_type}"
        op_name = base = node.name or f"{op_type}_{k}"
        suffix = k
        while op_name in used_names or (op_name != node.name and op_name in given):
            op_name, suffix = f"{base}_{suffix}", suffix + 1
        used_names.add(op_name)
        if domain in ("ai.onnx", "") and op_type in SEQUENCE_OPERATORS:
            # the first sequence operator in topological order is where a sequence is made: a split (which an
            # optimised or TorchScript export writes as a Split), or a sequence built element by element
            taken = [t for t in node.input if not_tensors.get(t) == "a sequence"]
            remedy = (f"it reads the model's input {taken[0]!r}, a sequence: the importer reads models whose inputs "
                      "are tensors" if taken else
                      "export with optimize=True or dynamo=False" if op_type == "SplitToSequence" else
                      "such a sequence is built element by element (as the exporters write nn.EmbeddingBag, in "
                      "a Loop): import the PyTorch model through torch.export instead "
                      "(placement.io.torch_export.import_torch)")
            raise InvalidInstanceError(f"{name}: node {op_name!r} ({op_type}) makes or reads an ONNX sequence that "
                                       "is no split of a known tensor into parts taken at known positions, which "
                                       "is all the importer reads of sequences (placement.io.onnx_sequences); "
                                       + remedy)

        def tensor(tensor_name: str, role: str) -> _Tensor:
            if tensor_name not in table:
                raise InvalidInstanceError(f"{name}: cannot cost node {op_name!r} ({op_type}): the shape of its {role} "
                                           f"{tensor_name!r} is not static after shape inference "
                                           f"({unknown_why(tensor_name)})")
            return table[tensor_name]

        ins = [tensor(t, "input") if t else None for t in node.input]
        outs = [tensor(t, "output") if t else None for t in node.output]
        kind = _kind(node, ins, known)
        floating = [t for t in (*outs, *ins) if t is not None and t.floating]
        nodes.append(_Node(op_name, label, kind, node, tuple(ins), tuple(outs),
                           float(_flops(kind, op_type, node, ins, outs)),
                           floating[0].key if floating else None, _module_path(node),
                           _operators(kind, op_type, node, ins, outs)))

    paths = _inherit_paths(nodes)
    data = set(params) | constants | set(derived)
    # a floating-point or boolean constant of one element (a scale, a fill value, a dropout's ratio and mode) is a
    # number PyTorch passes to its kernel: neither held nor read from memory
    numbers = {t for t in data - set(derived) if t in table and table[t].numel <= 1
               and (table[t].floating or table[t].type_name == "BOOL")}
    numbers |= identities   # and so is the identity scale and bias of a group_norm written out
    parts = _parameter_views(nodes, data)
    groups = fuse([FusionNode(n.node.op_type, n.kind, tuple(n.node.input), tuple(n.node.output),
                              _softmax_along_last(n.node, n.ins, opset)) for n in nodes],
                  data, {v.name for v in model.graph.output},
                  {t for t in data | parts if t in table and sum(d > 1 for d in table[t].shape) <= 1},
                  {t for t in data if t in table and (table[t].numel <= 1 or not table[t].floating)},
                  {t: info.numel for t, info in table.items()}, {t: tuple(info.shape) for t, info in table.items()})
    producers: dict[str, tuple[int, int]] = {}
    graph_inputs = {value.name for value in model.graph.input}
    stored = {init.name: init for init in model.graph.initializer}

    @functools.cache
    def causal_mask(tensor_name: str) -> bool:
        """Whether ``tensor_name`` is an initializer holding the mask of ``is_causal=True`` (read only here)."""
        return tensor_name in stored and tensor_name not in derived and causal_valued(stored[tensor_name], folder)

    model_inputs = tuple(value.name for value in model.graph.input if value.name not in params and value.name in table)
    ops: list[Op] = []
    weights: list[tuple[str, ...]] = []   # per operator, the trained parameters it reads as the file names them
    unknown: set[str] = set()
    for group in groups:
        members = [nodes[i] for i in group.members]
        internal = {t for m in members for t in m.node.output if t} - set(nodes[group.exit].node.output)
        reads: list[tuple[int, int]] = []
        used_params: list[Param] = []
        inputs_read: list[str] = []
        added_reads: list[tuple[int, int] | str] = []   # computed values and model inputs added to a product
        read_bytes = 0.0
        int_read_bytes = 0.0
        # what a matmul or convolution adds to its product (Gemm's C, Conv's B, a fused Add's bias) and does not
        # also multiply (Gemm(h, W, h)): no operand
        multiplied = {x for m in members if m.node.op_type in PRODUCTS
                      for k, x in enumerate(m.node.input) if k < 2 or m.node.op_type not in ADDING_PRODUCTS}
        added = {x for m in members for k, x in enumerate(m.node.input)
                 if (m.node.op_type in ADDING_PRODUCTS and k >= 2) or (m.node.op_type not in PRODUCTS and group.kind in
                                                                       ("matmul", "conv"))} - multiplied
        # BatchNormalization's running mean and variance (inputs 3 and 4), a recurrent layer's initial zeros:
        # never trained
        statistics = {x for m in members if m.node.op_type == "BatchNormalization" for x in m.node.input[3:5]}
        statistics |= (initial_states | fills | sizes | identities) & {x for m in members for x in m.node.input}
        # sizes, axes, positions and scales the file holds (a Reshape's shape, a ReduceMean's axes, a Resize's
        # scales, a select's index): host values in PyTorch (F.interpolate's scale_factor too), never read from the
        # device's memory
        sized = {(x, _reads_as_size(m.node, i) or _reads_as_select(m.node, i, table))
                 for m in members for i, x in enumerate(m.node.input)}
        host = {t for t, as_size in sized if as_size and (t, False) not in sized and (t in constants or t in params)}
        host |= numbers
        if group.kind == "attention":   # a causal mask folded into a tensor: the kernel makes it, reading none
            host |= {x for m in members if m.node.op_type == "Add" for x in m.node.input if causal_mask(x)}
        for t in dict.fromkeys(x for m in members for x in m.node.input if x and x not in internal and x not in host):
            info = table[t]
            read_bytes += info.nbytes
            if not info.floating:
                int_read_bytes += info.nbytes
            if t in producers:
                reads.append(producers[t])
                if t in added:
                    added_reads.append(producers[t])
            elif t in derived:   # parameters laid out anew: those parameters, each once
                held = {p.name for p in used_params}
                used_params.extend(Param(tied.get(p, p), table[p].nbytes, p not in statistics, t not in added)
                                   for p in derived[t] if tied.get(p, p) not in held)
            elif t in initial_states or t in fills:   # zeros a recurrent layer starts from, a folded fill: read,
                pass                                      # but no parameter
            elif t in params:
                used_params.append(Param(tied.get(t, t), info.nbytes,
                                         info.floating and info.numel > 1 and t not in statistics, t not in added))
            elif t in constants:
                used_params.append(Param(t, info.nbytes, False))
            elif t in graph_inputs:
                inputs_read.append(t)
                if t in added:
                    added_reads.append(t)
            else:   # fusion keeps every value read outside a group its exit's
                raise AssertionError(f"{name}: {t!r} is read, but no operator writes it")
        named_weights: list[str] = []
        for i in group.members:
            for t, as_named in zip(nodes[i].node.input, named_inputs[i]):
                if t in params and table[t].floating and table[t].numel > 1 and t not in statistics:
                    named_weights.append(as_named)
                elif t in derived:
                    named_weights.extend(p for p in derived[t] if p not in statistics)
        weights.append(tuple(dict.fromkeys(named_weights)))
        # a product given one value in both operand places (MatMul(h, h)) has a gradient through each
        repeated = [producers[t] if t in producers else tied.get(t, t)
                    for m in members if m.node.op_type in PRODUCTS
                    for t in m.node.input[1:2] if t and t == m.node.input[0] and t not in internal]
        last = nodes[group.exit]
        outputs = tuple(o.nbytes if o is not None else 0.0 for o in last.outs)
        moved = bytes_moved(group.kind, read_bytes, int_read_bytes, float(sum(outputs)))
        unknown.update(m.label for m in members if m.kind == "unknown")
        anchor = last if group.kind == "attention" else next((m for m in members if m.kind != "view"), last)
        if group.operator is not None:   # a decomposed kernel: costed as PyTorch's, on its result's elements
            core = members[group.core - 1].outs[0].numel
            flops = (NORM_FLOPS if group.kind == "norm" else DECOMPOSED_FLOPS.get(group.operator, 1)) * core
            operators = shapes.elementwise(group.kind, group.operator, core, core)
        else:
            flops = anchor.flops if len(members) == 1 else sum(m.flops for m in members if m.kind in FUSED_FLOP_KINDS)
            operators = tuple(s for m in members for s in m.operators
                              if m.kind in FUSED_SHAPE_KINDS.get(group.kind, (m.kind,)))
        path = paths[group.members[members.index(anchor)]]
        label = "+".join(m.label for m in members)
        index = len(ops)
        recurrent, state = (), ()
        contractions, operands = _einsum_operands(anchor, group.kind, producers, derived, statistics, tied)
        if group.kind == "recurrent":   # its gradient GEMMs, and the reads that are its initial state
            recurrent = layer_gemms.recurrent_gradients(_recurrent_gemms(anchor.node, list(anchor.ins)))
            state = tuple(producers[t] if t in producers else tied.get(t, t)
                          for t in anchor.node.input[RECURRENT_STATE] if t)
        ops.append(Op(anchor.name, label, group.kind, anchor.dtype, float(flops), moved, outputs, tuple(reads),
                      tuple(used_params), path, path, operators,
                      tuple(inputs_read), tuple(o is not None and o.floating for o in last.outs),
                      recurrent=recurrent, state=state, repeated=tuple(repeated), added=tuple(added_reads),
                      contractions=contractions, operands=operands))
        for j, t in enumerate(last.node.output):
            if t:
                producers[t] = (index, j)
    names = tuple(sorted(unknown))
    if names:
        flow = sorted(CONTROL_FLOW & set(names))
        inside = (f"; the work inside the subgraphs of {', '.join(flow)} (a branch, a loop's body) is not costed "
                  "at all: export without control flow to cost it") if flow else ""
        warnings.warn(f"{name}: no FLOP formula for {len(names)} operator type(s), costed by bytes moved only: "
                      f"{', '.join(names)}{inside}", CostModelWarning, stacklevel=2)
    outputs = tuple(sorted({producers[v.name][0] for v in model.graph.output if v.name in producers}))
    initializers = {init.name: init for init in model.graph.initializer}

    @functools.cache   # read once, whichever of the two uses below asks first
    def constant(parameter: str) -> bool:
        found = initializers.get(aliases.get(parameter, parameter))
        return found is not None and constant_valued(found, folder)

    # the dynamo exporter merges parameters of equal values into one name, with no alias: the deep copies of a
    # block (nn.TransformerEncoder's layers, before training) then read one parameter as a module called
    # several times would, so shared names are evidence only in the TorchScript exporter's files
    scoped = any(prop.key == NAME_SCOPES for node in model.graph.node for prop in node.metadata_props)
    # and a parameter of equal values that several operators read may be several modules' parameters, merged
    readers = Counter(param for op in ops for param in {p.name for p in op.params if p.trainable})
    merged = tuple(sorted(param for param, count in readers.items() if count > 1 and constant(param)))
    return OpGraph(typed_integer_operators(ops), name, "onnx", names, merged=merged,
                   aliases=() if scoped else _calls_of_one_module(ops, weights, constant),
                   inputs=model_inputs, outputs=outputs,
                   returned_inputs=tuple(dict.fromkeys(aliases.get(v.name, v.name) for v in model.graph.output
                                                       if aliases.get(v.name, v.name) in model_inputs)))


def import_onnx(path: str | Path, *, platform: Platform, training: bool = False, granularity: str = "operator",
                module_depth: int | None = None, dtype: str | None = None,
                dims: dict[str, int] | None = None, operators: bool = False) -> ImportedModel:
    """An ONNX file as a placement instance: read, infer shapes, group, cost on ``platform``, validate
    (``operators``: record every node's operator shapes, :mod:`placement.io.operator_shapes`)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError("path", "must be the path of an ONNX file (a str or os.PathLike), not "
                                            f"{type(path).__name__}")
    training, operators = check_options(platform, training, operators)
    check_grouping(granularity, module_depth)
    model = read_onnx(path)
    graph = graph_from_onnx(model, file_stem(path), dtype, dims, Path(path).parent)
    if granularity == "module" and len(graph.ops) > 1 and not any(op.module_path for op in graph.ops):
        torch_file = ("; PyTorch wrote this file: torch.onnx.export records the modules at opset 18 or later, or "
                      "with dynamo=False, and its conversion to an earlier opset drops them"
                      if model.producer_name == "pytorch" else "")
        # scopes recorded, each the model's own (a forward of functional calls, or its layers inside an If)
        scoped = any(node.name.startswith("/") or any(prop.key == NAME_SCOPES for prop in node.metadata_props)
                     for node in model.graph.node)
        reason = ("every operator of the model runs in the model itself, outside its submodules (the module scopes "
                  "the file records say so)" if scoped else
                  "no operator of the model records a module (the file has neither the scope metadata of "
                  f"torch.onnx.export nor node names of the form /a/b/Op{torch_file})")
        warnings.warn(f"{graph.name}: {reason}, so granularity='module' makes one node of all {len(graph.ops)} "
                      "operators, which no plan can split: use granularity='operator'", ModuleScopeWarning,
                      stacklevel=2)
    return build(group_ops(graph, granularity, module_depth), platform, training, source=model, operators=operators)
