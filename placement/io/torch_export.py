"""Import a PyTorch model through ``torch.export``: operators, FLOPs, bytes, parameters, modules.

Needs the optional extra ``torch`` (``pip install 'placement[torch]'``); torch is imported
when a function here is called, never at package import.

What is read
------------
``torch.export.export(model, args, kwargs)`` gives an ATen-level graph in program order.
Every ``call_function`` node whose value (``node.meta["val"]``) holds a tensor is an
operator; its output sizes come from that value, the module calls enclosing it from
``node.meta["nn_module_stack"]``, and the parameters and buffers it reads from the graph
signature. ``getitem`` nodes select an output of the operator they read and are not
operators themselves. Nodes without a tensor value (shape queries, assertions) are not
operators either; a dependency through one is kept as a 0-byte dependency. A ``torch.vmap``
region (functorch's calls that open and close it, and ``flat_apply`` inside it, as in the
causal masks of recent ``transformers``) is traced through to the batched ATen operators it
runs (``run_decompositions`` without decompositions; in-place operators then take their
functional forms), so that its operators are costed and a stage boundary may fall anywhere in
it. So is a ``torch.no_grad`` region none of whose inputs may need a gradient (the rotary
embeddings of recent decoder models, computed from a buffer and the positions: nothing in it could
get one; or one that only detaches those inputs that may, as a running average of detached
features), with an ``autocast`` that turns autocast off inside it. A model is refused when its graph
holds another higher-order operator (``torch.no_grad`` over values that may need a gradient, an
``autocast`` elsewhere, ``torch.cond``: the operators inside are not in this graph, and tracing
through them would lose what they do to gradients and types) or a shape that depends on the data
(``nonzero``, a boolean mask): neither can be costed.

FLOPs (one multiply-add = 2 FLOPs; bias additions not counted), with ``out`` the output
and ``a`` the first matrix operand:

=====================================================  ==========================================
operators                                              FLOPs
=====================================================  ==========================================
linear, mm, bmm, matmul, mv, dot                        2 · numel(out) · a.shape[-1]
addmm, baddbmm, addmv (operand after the added term)    2 · numel(out) · a.shape[-1]
grouped GEMMs of mixtures of experts (``_grouped_mm``,  2 · numel(out) · a.shape[-1], over the
transformers' ``grouped_mm_fallback``), ``offs`` the    ``G`` groups where ``a`` and ``b`` are
groups' ends                                            both matrices (``offs`` splits ``K``)
convolution (weight ``[C_out, C_in/g, *k]``)            2 · numel(out) · numel(weight) / C_out
transposed convolution (weight ``[C_in, C_out/g, *k]``) 2 · numel(input) · numel(weight) / C_in
scaled dot-product attention, q ``[…, L, E]``,          2 · (numel(q)/E) · S · (E + E_v)
k ``[…, S, E]``, v ``[…, S, E_v]``                      (the two matmuls)
einsum of two operands (an ellipsis stands for the      2 · Π of the sizes of every index
dimensions it covers; a dimension of 1 broadcasts: no   (batch, kept and contracted: one GEMM);
index of its operand)                                   numel(out) where it sums no index both
                                                        operands share (``bi,bj->bij``: torch
                                                        multiplies, a pointwise operator)
einsum of three or more operands                        the sum of its products of two operands,
                                                        each as above, in ATen's order (the path
                                                        torch.einsum passes, else left to right)
einsum of one operand                                   0 (a sum or a permutation)
addbmm (``b`` products of ``n × m`` by ``m × p``)        2 · b · n · m · p
tensordot                                               2 · numel(out) · Π of the contracted sizes
linalg.multi_dot                                        2 · the least multiplications of the chain
                                                        (torch's order)
cdist (``x1 [..., P, M]``, ``x2 [..., R, M]``)          2 · numel(out) · M (the product of ``x1`` by
                                                        ``x2``'s transpose that torch runs for p = 2)
bilinear (``x1 [..., I]``, ``x2 [..., J]``, weight      2 · numel(out) · J · (I + 1) (the GEMMs
``[O, I, J]``)                                          torch runs: ``x1`` by each ``I × J`` slice
                                                        of the weight, then a row by ``x2``'s)
LSTM, GRU, RNN (``G`` = 4, 3, 1 gates), per layer and   2 · T · N · G·H · (I + P)
direction: input ``I`` wide, hidden ``H``, ``T`` steps  + 2 · T · N · H · P where P ≠ H
of batch ``N``, projected to ``P`` (``proj_size``;      (input, recurrent and projection
``P = H`` without)                                      GEMMs)
layer/batch/group/RMS norm, softmax, cross-entropy      5 · numel(input)
pointwise (``torch.Tag.pointwise``, dropout, outer and  c · numel(out): c = 8 GELU, 4 tanh,
kron products, cross products, …)                       sigmoid and polar (a cosine, a sine, two
                                                        products), 5 SiLU, else 1
resampling (``F.interpolate``'s kernels, every mode;    numel(out) (pointwise)
``F.grid_sample``'s ``grid_sampler``)
reductions, losses, pooling, col2im (``F.fold``,        numel(input)
which sums the patches that overlap), cumulative
log-sum-exp, pairwise_distance, histc
cosine_similarity (``x`` its operands broadcast         6 · numel(x) (the passes torch's kernel
together)                                               makes over ``x``: two norms along ``dim``,
                                                        two quotients, a product, its sum)
sort, argsort, msort, topk, kthvalue, median, mode,     numel(input) · ⌈log2 n⌉ (the comparisons
quantile (``n`` elements along the dimension they sort  of a merge sort of each row)
or select along; all of them without one)
searchsorted, bucketize (``n`` boundaries)              numel(values) · ⌈log2(n + 1)⌉ (a binary
                                                        search per value)
torch.fft's transforms, stft, istft (``B`` transforms  5 · B · P · log2 N (5 N log2 N for a
of ``N`` points, ``P`` complex points each: ``N``, or   complex transform, about half for a real
the ``n // 2 + 1`` per row a real one keeps)            one)
EmbeddingBag (``n`` indices into a table ``D`` wide)    n · D (the rows summed, averaged or maxed);
                                                        2 · n · D with ``per_sample_weights``
views, gathers (embedding, index), copies (im2col:      0
``F.unfold``; max_unpool, which writes each value at
its index in zeros; one_hot, diag; …), constants
(the window functions too)
=====================================================  ==========================================

These are the counts of ``torch.utils.flop_counter.FlopCounterMode`` for the matmul,
convolution and attention operators, for einsum (which it counts as the GEMM it runs) and for
the recurrent layers' GEMMs (which it counts where the layer runs as separate operators); it counts
no FLOPs for cdist, costed here as the GEMM it runs for p = 2 (others do as many operations), nor for the
Fourier transforms. The
per-element constants of the other operators are conventions; such operators are memory-bound on
every catalogued device.

Bytes moved: the bytes of the distinct tensors an operator reads (activations,
parameters, buffers, inputs) plus the bytes it writes; views move nothing (and launch no
kernel, :mod:`placement.io.opgraph`); dropout in evaluation (``train=False``) or of
probability 0 returns its input: it is no operator (its readers read its input, as after an ONNX export), or a
view when its input is a model input; gathers read
their indices and the rows they gather (the size of their output) and write their output;
an EmbeddingBag reads its indices, offsets and per-sample weights and the ``n`` rows its
indices select (``n · D`` elements of the table, not all of it) and writes its outputs;
constants only write. Any other operator (a custom op, a higher-order op, an ATen op
without a rule above) is costed by the bytes it moves alone and named in a
:class:`~placement.io.opgraph.CostModelWarning`; it is never dropped.

``dtype`` (``fp32``, ``bf16``, ...) overrides the data type of every floating-point
tensor, for sizes and for the peak FLOP/s used, so that a model exported in fp32 can be
planned for bf16 training. Integer and boolean tensors keep their sizes and are computed
at the ``fp32`` peak.

Every operator also records what it computes, as GEMMs and vector operators with their
shapes (:mod:`placement.io.operator_shapes`), for the co-design.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import operator
import re
import sys
import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

from placement.costmodel.roofline import ELEMENT_BYTES, Platform, check_dtype
from placement.codesign.workload import Operator
from placement.errors import InvalidParameterError, SolverUnavailableError
from placement.io import layer_gemms, operator_shapes as shapes
from placement.io.op_grouping import check_grouping, group_ops
from placement.io.opgraph import (CostModelWarning, ImportedModel, Op, OpGraph, Param, build, bytes_moved,
                                  typed_integer_operators)
from placement.parameters import keywords_checked
from placement import process_state

MATMUL = {"linear": 0, "mm": 0, "bmm": 0, "matmul": 0, "mv": 0, "dot": 0, "addmm": 1, "baddbmm": 1, "addmv": 1,
          "_grouped_mm": 0, "grouped_mm_fallback": 0}
#: the grouped GEMMs of mixtures of experts: ``(a, b, offs)``, the groups' ends ``offs`` splitting the rows of
#: ``a`` (``b`` a stack of matrices), the columns of ``b`` (``a`` a stack) or, both matrices, the contracted ``K``
GROUPED_MATMUL = frozenset({"_grouped_mm", "grouped_mm_fallback"})
#: operators of other namespaces than ``aten`` and ``prims`` that are costed, by namespace and name: the
#: grouped GEMM transformers runs where ``_grouped_mm`` cannot (weights of other types than bfloat16)
KNOWN_CUSTOM = frozenset({("transformers", "grouped_mm_fallback")})
#: products whose GEMMs :func:`_product_gemms` works out from their arguments (``cdist``: the distances of
#: every pair of rows, the product of one operand by the other's transpose that torch runs for ``p = 2``)
GEMM_FORMS = {"addbmm", "tensordot", "linalg_multi_dot", "bilinear", "cdist", "_cdist_forward"}
#: recurrent layers, by their gates per step
RECURRENT = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
CONV = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d"}
ATTENTION = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math"}
NORM = {"layer_norm", "native_layer_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional", "_batch_norm_with_update",
        "_batch_norm_no_update", "group_norm", "native_group_norm", "instance_norm", "rms_norm", "_fused_rms_norm",
        "_weight_norm", "_weight_norm_interface"}
SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax", "cross_entropy_loss"}
REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean", "cumsum",
             "cumprod", "logsumexp", "argmax", "argmin", "all", "any", "norm", "linalg_vector_norm", "nll_loss",
             "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward", "mse_loss", "l1_loss", "smooth_l1_loss",
             "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "count_nonzero", "col2im",
             "logcumsumexp", "pairwise_distance", "histc"}
POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d",
        "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
        "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
        "adaptive_max_pool3d"}
GATHER = {"embedding", "index_select", "gather", "index", "take"}
#: operators that sort the rows of their input along a dimension (``topk``: to select the ``k`` first of each)
SORT = {"sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile"}
#: discrete Fourier transforms (torch.fft, stft, istft; the complex-to-complex, real-to-complex and
#: complex-to-real kernels they run): :func:`_fft_flops`
FFT = {"fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2",
       "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft", "fft_hfft2", "fft_ihfft2", "fft_hfftn",
       "fft_ihfftn", "_fft_c2c", "_fft_r2c", "_fft_c2r", "stft", "istft"}
#: operators that look each element up in a sorted sequence (``searchsorted(sequence, x)``, ``bucketize(x,
#: boundaries)``): ``⌈log2(n + 1)⌉`` comparisons per element of ``x`` for ``n`` boundaries
SEARCH = {"searchsorted", "bucketize"}
#: ``F.cosine_similarity``: its operands broadcast, each divided by its norm along a dimension, multiplied, summed
COSINE = {"cosine_similarity"}
#: ``nn.EmbeddingBag``'s kernels, ``(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
#: per_sample_weights, ...)``: a gather of the rows the indices select and a reduction of each bag's rows
EMBEDDING_BAG = {"embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"}
COPY = {"cat", "stack", "clone", "copy", "_to_copy", "to", "type_as", "contiguous", "constant_pad_nd", "pad",
        "repeat", "roll", "flip", "index_put", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
        "index_fill", "masked_fill", "where", "tril", "triu",
        "repeat_interleave", "lift_fresh_copy", "fill", "zero", "expand_copy", "narrow_copy", "pixel_shuffle",
        "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "im2col", "max_unpool2d", "max_unpool3d",
        "one_hot", "diag", "diag_embed"}
#: operators that return views of their inputs without saying so in their schemas (``_unsafe_view``; the
#: expanded operands of ``broadcast_tensors`` and ``meshgrid``, which the built-in losses emit; ``atleast_nd``
#: and the unsafe splits): no kernel, no bytes
ALIASES = {"alias", "detach", "_unsafe_view", "broadcast_tensors", "meshgrid", "atleast_1d", "atleast_2d",
           "atleast_3d", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk"}
#: Operators whose output carries no gradient, whatever they read.
STOP_GRADIENT = {"detach"}
CONSTANT = {"arange", "zeros", "ones", "full", "empty", "new_ones", "new_zeros", "new_full", "new_empty",
            "zeros_like", "ones_like", "full_like", "empty_like", "empty_strided", "scalar_tensor", "linspace",
            "eye", "rand", "randn", "randint", "rand_like", "randn_like", "hann_window", "hamming_window",
            "blackman_window", "bartlett_window", "kaiser_window", "tril_indices", "triu_indices"}
#: ``F.interpolate``'s kernels, every mode and rank (ONNX writes each as one ``Resize``)
UPSAMPLE = {"upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
            "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
            "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"}
#: ``F.grid_sample``'s kernels: a resampling of its input at the grid's points, as ``F.interpolate``'s at a
#: regular grid (ONNX writes each as one ``GridSample``)
GRID_SAMPLE = {"grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "_grid_sampler_2d_cpu_fallback",
               "cudnn_grid_sampler"}
POINTWISE_UNTAGGED = {"dropout", "native_dropout", "feature_dropout", "alpha_dropout", "hardtanh", "silu", "mish",
                      "softplus", "diff", "elu", "prelu", "glu", "threshold", "__and__", "__or__", "__xor__",
                      "bitwise_and", "bitwise_or", "logical_and", "logical_or", "logical_not", "relu6", "hardswish",
                      "hardsigmoid", "leaky_relu", "log_sigmoid", "log_sigmoid_forward", "special_erfinv", "outer",
                      "kron", "polar", "cross", "linalg_cross", "floor_divide", "true_divide", "rsub", *UPSAMPLE,
                      *GRID_SAMPLE}
DROPOUT = {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}
#: FLOPs per output element of pointwise operators (1 unless listed).
POINTWISE_FLOPS = {"gelu": 8, "tanh": 4, "sigmoid": 4, "silu": 5, "polar": 4}
NORM_FLOPS = 5

TORCH_DTYPE_KEYS = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
                    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8"}


def require_torch() -> Any:
    """The ``torch`` module, or a :class:`SolverUnavailableError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise SolverUnavailableError("importing PyTorch models needs torch: pip install 'placement[torch]' "
                                     "(torch==2.13.0)") from None
    return torch


#: the device types whose autocast state is looked at
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def active_autocast() -> str:
    """The autocast a caller's ``torch.autocast`` context turns on (``"bfloat16 on cpu"``), or ``""``."""
    import torch

    for kind in AUTOCAST_DEVICES:
        try:
            if torch.is_autocast_enabled(kind):
                return f"{str(torch.get_autocast_dtype(kind)).removeprefix('torch.')} on {kind}"
        except (RuntimeError, ValueError):   # a device type this build of torch has no autocast for
            continue
    return ""


def check_module(model: Any) -> None:
    """Refuse a ``model`` that is no ``torch.nn.Module`` (a function, an ``ExportedProgram``, None)."""
    torch = require_torch()
    if not isinstance(model, torch.nn.Module):
        hint = "; give the nn.Module it was exported from" if isinstance(model, torch.export.ExportedProgram) else ""
        raise InvalidParameterError("model", f"must be a torch.nn.Module, not {type(model).__name__}{hint}")


def model_name(name: Any, model: Any) -> str:
    """The instance name of an import: ``name``, or the class name of ``model`` where ``name`` is None. A blank or
    non-text ``name`` is refused (falling back to the class name would hide that it was given)."""
    if name is None:
        return type(model).__name__
    if not isinstance(name, str) or not name.strip():
        said = repr(name) if isinstance(name, str) else f"{name!r} ({type(name).__name__})"
        raise InvalidParameterError("name", "must be some text besides spaces (or None for the model's class name), "
                                            f"not {said}")
    return name


def check_tensor_args(args: Sequence[Any]) -> None:
    """Refuse positional example inputs that are no tuple (or list), or that are not tensors (a number, None), about
    ``args``: the stages of :func:`placement.torch.plan_pipeline` and of ``torch.distributed.pipelining.pipeline()``
    (the split-spec and pipe-split forms of an import's plans) take tensors as positional inputs, and torch's refuse
    others at the first step; other values go in ``kwargs``."""
    torch = require_torch()
    if not isinstance(args, (tuple, list)):
        raise InvalidParameterError("args", f"must be a tuple of the model's positional inputs (one micro-batch), "
                                            f"not {type(args).__name__}; for one input write (x,)")
    for k, value in enumerate(args):
        if not isinstance(value, torch.Tensor):
            raise InvalidParameterError("args", f"must hold tensors only, but args[{k}] is a {type(value).__name__}: "
                                                "pipeline stages take tensors as positional inputs; pass it by "
                                                "keyword, in kwargs")


def check_forward_takes(model: Any, args: Sequence[Any], kwargs: dict | None) -> None:
    """Refuse example inputs that ``model``'s forward cannot be called with, about ``kwargs`` (a key that is no
    string, a keyword forward has no parameter for, one that ``args`` gives already) or ``args`` (more positional
    inputs than forward takes, none for a parameter forward requires; ``kwargs`` where that parameter is
    keyword-only), before the export blames the model for them. A model with forward pre-hooks (which may change
    its inputs) or a forward whose signature cannot be read is left to the export."""
    import inspect

    for key in kwargs or {}:
        if not isinstance(key, str):
            raise InvalidParameterError("kwargs", f"must map the names of forward's keyword parameters to inputs, "
                                                  f"but holds the key {key!r} ({type(key).__name__})")
    if getattr(model, "_forward_pre_hooks", None):
        return
    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return
    owner = f"{type(model).__name__}.forward"
    kinds = {p.kind for p in parameters}
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [key for key in kwargs or {} if key not in named]
    if unknown and inspect.Parameter.VAR_KEYWORD not in kinds:
        listed = ", ".join(map(repr, named)) or "none"
        raise InvalidParameterError("kwargs", f"holds the keyword{'s' * (len(unknown) > 1)} "
                                              f"{', '.join(map(repr, unknown))}, which {owner} does not take "
                                              f"(its keyword parameters: {listed})")
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(args) > len(positional) and inspect.Parameter.VAR_POSITIONAL not in kinds:
        raise InvalidParameterError("args", f"holds {len(args)} positional inputs, but {owner} takes at most "
                                            f"{len(positional)}")
    given = [p.name for p in positional[:len(args)]]
    twice = [key for key in kwargs or {} if key in given]
    if twice:
        places = ", ".join(str(given.index(key)) for key in twice)
        raise InvalidParameterError("kwargs", f"holds {', '.join(map(repr, twice))}, which args gives {owner} "
                                              f"already (positional input {places})")
    missing = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.default is p.empty
               and p.name not in given and (p.kind is p.POSITIONAL_ONLY or p.name not in (kwargs or {}))]
    if missing:
        names = f"parameter{'s' * (len(missing) > 1)} {', '.join(repr(p.name) for p in missing)}"
        if all(p.kind is p.KEYWORD_ONLY for p in missing):
            raise InvalidParameterError("kwargs", f"gives {owner} no value for its required keyword {names}")
        raise InvalidParameterError("args", f"gives {owner} no value for its required {names}, nor does kwargs")


def export_program(model: Any, args: Sequence[Any], kwargs: dict | None = None, dynamic_shapes: Any = None) -> Any:
    """``torch.export.export`` of ``model``; a failure becomes a one-line :class:`InvalidParameterError`.
    Inside a ``torch.autocast`` context it is refused: the program would mix autocast's types with the
    parameters', and the plan hold the stages to them. ``dynamic_shapes`` is ``torch.export``'s (the
    dimensions left symbolic). The model is traced with gradients enabled whatever the caller's mode: under
    ``torch.no_grad`` or ``torch.inference_mode`` the export wrote forward's own ``torch.no_grad`` regions as
    plain operators, which a training plan's stages then differentiated (gradients other than the model's)."""
    torch = require_torch()
    check_module(model)
    check_forward_takes(model, args, kwargs)
    autocast = active_autocast()
    if autocast:
        raise InvalidParameterError("model", f"{type(model).__name__} cannot be exported inside torch.autocast "
                                             f"({autocast}): plan it outside, with the model and its inputs in the "
                                             "precision it is to run in (model.to(torch.bfloat16))")
    normed = _spectral_norm_hook_in_training(model)
    if normed is not None:
        raise InvalidParameterError("model", f"{type(model).__name__} cannot be costed: its module {normed!r} holds "
                                             "torch.nn.utils.spectral_norm in training mode, whose power iteration "
                                             "updates its vectors under torch.no_grad from the weight, which needs a "
                                             "gradient, a region torch.export writes as one operator, whose operators "
                                             f"are not read; {_spectral_norm_advice(normed, 'spectral norm')}")
    # torch.export is not thread-safe (two at once failed with "Trying to pop empty mode stack"), and
    # _held_diagnostics changes sys.stderr: one export at a time in the process
    with process_state.held(), _held_diagnostics() as held, warnings.catch_warnings(), torch.enable_grad():
        # a recurrent layer's weights list (nn.LSTM._flat_weights), which torch rebuilds while exporting
        # and then warns about: its parameters are read as any others
        warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights", category=UserWarning)
        # the weights torch.nn.utils.weight_norm, spectral_norm and pruning compute before each call of their
        # module, which torch warns should be registered as buffers: the export reads them as the operators they are
        hooked = "|".join(re.escape(name) for name in _hook_computed_weights(model))
        if hooked:
            warnings.filterwarnings("ignore", category=UserWarning, message=(
                rf"The tensor attributes? self\.(?:{hooked})(?:, self\.(?:{hooked}))* (?:was|were) assigned during "
                "export"))
        try:
            program = torch.export.export(model, tuple(args), kwargs or {}, dynamic_shapes=dynamic_shapes)
        except Exception as exc:  # torch raises many types; the user gets the first line of the reason
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            unknown = re.match(r"Found <class '([^']+)'> in output, which is not a known type", first)
            if unknown:   # torch's advice (register a pytree) is not what a model's user needs
                advice = (" (a transformers model returns its key-value cache unless called with use_cache=False "
                          "in kwargs, or built from a config that sets it)"
                          if "cache" in unknown[1].lower() else ": return its tensors in a tuple")
                raise InvalidParameterError("model", f"{type(model).__name__} cannot be exported: its output holds a "
                                                     f"{unknown[1]}, which is no tensor, tuple, list or dict"
                                                     f"{advice}") from None
            known = _untraceable(model, first) or _packed_sequence(model, exc) or _one_value_norm(model, exc, first)
            if known:
                raise InvalidParameterError("model", f"{type(model).__name__} cannot be exported: {known}") from None
            remedy = DATA_DEPENDENT if "data-dependent" in first.lower() else ""   # dynamo: "Data-dependent"
            raise InvalidParameterError("model", f"{type(model).__name__} cannot be exported: torch.export "
                                                 f"raised {type(exc).__name__}: {first}"
                                                 f"{_where(str(exc)) or _raised_at(exc)}{remedy}") from None
        held.keep = True
    return _without_regions(program, torch)


#: what to change where ``torch.export`` stopped at a Python value taken from values computed from the inputs: a
#: branch on them, and as well a number taken from them (``float(x.max())``, ``int(x.argmax())`` as a slice's end),
#: which torch reports in the same words and where no branch is
DATA_DEPENDENT = ("; forward takes a Python value from a tensor's values computed from its inputs (an if, a loop or an "
                  "assert on them, .item(), int() or float() of them, or the size of a tensor they decide), which one "
                  "exported program cannot hold: keep such values in tensors, compute every branch with shapes the "
                  "values do not decide (masks, torch.where), not with torch.cond, which is not costed")

#: what ``torch.export`` writes for a ``torch.vmap`` region: functorch's calls that open and close
#: it, and the higher-order operator that applies a function inside it
VMAP_CALLS = frozenset({"lazy_load_decompositions", "_vmap_increment_nesting", "_vmap_decrement_nesting",
                        "_add_batch_dim", "_remove_batch_dim"})
VMAP_OPERATORS = frozenset({"flat_apply"})


def _without_regions(program: Any, torch: Any) -> Any:
    """``program``, or where every region it holds is one that can be read through
    (:func:`_readable_region`), the same program traced through them to ATen operators
    (``run_decompositions`` with no decomposition: operators are kept, a region's inside becomes
    operators of the graph, and in-place operators their functional forms). Another region
    (``torch.no_grad`` over values that need a gradient, ``torch.autocast`` outside such a region,
    ``torch.cond``) is never traced through, which would change the gradients or the types: it is
    refused where it is read."""
    calls = [node for node in program.graph.nodes
             if node.op == "call_function" and not isinstance(node.target, torch._ops.OpOverload)
             and node.target is not operator.getitem]
    if not calls:
        return program
    needs = _may_need_gradients(program, torch)
    if not all(_readable_region(node, program.graph_module, torch, needs) for node in calls):
        return program
    with process_state.held(), _held_diagnostics(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return program.run_decompositions(decomp_table={})
        except Exception:   # the region stays, and is refused with its name by graph_from_program
            return program


def _may_need_gradients(program: Any, torch: Any) -> set[Any]:
    """The FX values of ``program`` that may need a gradient: trained parameters (those whose
    ``requires_grad`` is set: a frozen backbone's are not), inputs that require one, and whatever an
    operator or region computes from them, except a ``no_grad`` region's results and a ``detach``'s (an
    over-estimate: it is used only to refuse; the traced values' own flags are not kept here)."""
    parameters = program.state_dict
    trained = {spec.arg.name for spec in program.graph_signature.input_specs
               if spec.kind.name == "PARAMETER" and getattr(spec.arg, "name", None) is not None
               and getattr(parameters.get(spec.target), "requires_grad", True)}
    needs: set[Any] = set()
    for node in program.graph.nodes:
        if node.op == "placeholder":
            value = node.meta.get("val")
            if node.name in trained or (isinstance(value, torch.Tensor) and value.requires_grad):
                needs.add(node)
        elif node.op == "call_function":
            grad_off = (isinstance(node.target, torch._ops.HigherOrderOperator)
                        and node.target.name() == "wrap_with_set_grad_enabled" and node.args and node.args[0] is False)
            detached = node.target in (torch.ops.aten.detach.default, torch.ops.aten.detach_.default)
            if not grad_off and not detached and any(a in needs for a in node.all_input_nodes):
                needs.add(node)
    return needs


def _readable_region(node: Any, module: Any, torch: Any, needs: set[Any], gradient_free: bool = False) -> bool:
    """Whether the FX ``node`` (a call that is no ATen operator) can be traced through without changing
    what the program computes or which values get gradients: ``torch.vmap``'s calls
    (:data:`VMAP_CALLS`, :data:`VMAP_OPERATORS`); a ``torch.no_grad`` region none of whose inputs may
    need a gradient (``needs``, :func:`_may_need_gradients`; nothing in it could get one: the rotary
    embeddings of Llama, Mistral, Qwen2, GPT-NeoX, Phi and Falcon, computed from a buffer and the
    positions), or whose inputs that may need one it only detaches (a running average of detached
    features), with, inside it (``gradient_free``), such regions or an ``autocast`` that turns autocast
    off. An ``autocast`` elsewhere is not read through: the export writes no ``no_grad`` inside one."""
    target = node.target
    if not isinstance(target, torch._ops.HigherOrderOperator):
        return getattr(target, "__name__", None) in VMAP_CALLS
    kind = target.name()
    if kind in VMAP_OPERATORS:
        return True
    if kind == "wrap_with_set_grad_enabled" and node.args and node.args[0] is False:
        body, inputs = node.args[1], node.args[2:]
    elif kind == "wrap_with_autocast" and gradient_free and len(node.args) > 4 and node.args[2] is False:
        body, inputs = node.args[4], ()
    else:
        return False
    inner = getattr(module, body.target, None) if getattr(body, "op", None) == "get_attr" else None
    if inner is None:
        return False
    slots = [n for n in inner.graph.nodes if n.op == "placeholder"]
    if not gradient_free and any(isinstance(a, torch.fx.Node) and a in needs and (k >= len(slots) or not all(
            u.op == "call_function" and u.target == torch.ops.aten.detach.default for u in slots[k].users))
            for k, a in enumerate(inputs)):
        return False
    return all(_readable_region(n, inner, torch, needs, True) for n in inner.graph.nodes
               if n.op == "call_function" and not isinstance(n.target, torch._ops.OpOverload)
               and n.target is not operator.getitem)


def _hook_computed_weights(model: Any) -> list[str]:
    """The attributes of ``model`` (qualified names) that ``torch.nn.utils.weight_norm``,
    ``torch.nn.utils.spectral_norm`` (the forms before parametrizations) and the pruning methods of
    ``torch.nn.utils.prune``, forward pre-hooks, compute from the module's tensors before each call of it."""
    from torch.nn.utils.prune import BasePruningMethod
    from torch.nn.utils.spectral_norm import SpectralNorm
    from torch.nn.utils.weight_norm import WeightNorm

    def computed(hook: Any) -> str | None:
        if isinstance(hook, (SpectralNorm, WeightNorm)):
            return hook.name
        return getattr(hook, "_tensor_name", None) if isinstance(hook, BasePruningMethod) else None

    return [f"{name}.{field}" if name else field for name, module in model.named_modules()
            for field in map(computed, module._forward_pre_hooks.values()) if field]


def _spectral_norm_hook_in_training(model: Any) -> str | None:
    """The name of the first module of ``model`` given ``torch.nn.utils.spectral_norm`` (a forward pre-hook, the
    form before parametrizations) that is in training mode with a weight that needs a gradient, where the hook's
    power iteration is a ``torch.no_grad`` region over that weight; None where there is none."""
    from torch.nn.utils.spectral_norm import SpectralNorm

    for name, module in model.named_modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and module.training and getattr(
                    getattr(module, f"{hook.name}_orig", None), "requires_grad", False):
                return name
    return None


def _spectral_norm_advice(module: str, what: str) -> str:
    """What to change for a spectral norm whose power iteration runs in ``module`` in training mode."""
    return (f"plan with that module in eval() (model.get_submodule({module!r}).eval()), where its vectors stay as they "
            f"are and the weight is divided by the norm they estimate, or remove the {what}")


def _untraceable(model: Any, first: str) -> str:
    """What in ``model`` made ``torch.export`` fail with the message whose first line is ``first``, where
    it is a known case, with what to change; ``""`` otherwise. A batch normalisation in training mode with
    ``momentum=None`` keeps a cumulative average, ``1 / num_batches_tracked``, a value read from a tensor
    (data-dependent); a tensor lifted as a constant of the program is one forward made outside autograd's
    record of the parameters (``.data``) or with autograd itself (``torch.autograd.grad``); a TorchScript
    module, the model or a scripted module inside it, is no Python code to trace (torch's advice, a converter to
    an ``ExportedProgram``, gives no module to plan); a quantized module of ``torch.ao`` holds its weights packed
    in a TorchScript object, which it does not trace."""
    import torch

    if isinstance(model, torch.jit.ScriptModule):
        return (f"it is a TorchScript module ({type(model).__name__}), which torch.export does not trace: give the "
                "nn.Module it was scripted or traced from")
    scripted = next((name for name, module in model.named_modules()
                     if isinstance(module, torch.jit.RecursiveScriptModule)), None)
    if scripted is not None:
        return (f"its module {scripted!r} is a TorchScript module (torch.jit.script), which torch.export does not "
                "trace: put the nn.Module it was scripted from in its place")
    packed = next(((name, module) for name, module in model.named_modules() if hasattr(module, "_packed_params")
                   and type(module).__module__.startswith("torch.ao.nn.quantized")), None)
    if packed is not None and "quantized" in first:
        name, module = packed
        called = f"its module {name!r} is" if name else "it is"
        return (f"{called} a quantized {type(module).__name__} ({type(module).__module__.split('.modules')[0]}), whose "
                "packed weights torch.export does not trace: plan the floating-point model it was quantized from")
    if "data-dependent" in first.lower():
        for name, module in model.named_modules():
            if (isinstance(module, torch.nn.modules.batchnorm._NormBase) and module.training
                    and module.momentum is None and module.track_running_stats):
                return (f"its {type(module).__name__} {name!r} has momentum=None, a cumulative average whose "
                        "factor 1 / num_batches_tracked is read from a tensor, which torch.export cannot trace in "
                        "training mode: give it a momentum (torch's default is 0.1), or plan the model in eval()")
    lifted = re.search(r"fake tensor in the exported program constant's list.*?model attribute: (\w+)", first)
    if lifted:
        return (f"forward uses a tensor torch.export cannot trace to the model's parameters, buffers or inputs "
                f"(it calls it {lifted[1]}), such as a parameter's .data or a gradient forward takes itself "
                "(torch.autograd.grad: a gradient penalty, the derivatives of a physics-informed residual): read the "
                "parameter itself (.detach() where no gradient is to flow), and write into parameters outside "
                "forward, between steps; a gradient taken in forward has no such form (no stage runs autograd on "
                "another's operators): plan the model without it")
    return ""


def _where(message: str) -> str:
    """Where in the model's code torch's export error ``message`` says it was raised (its "The following call
    raised this error" frame: a branch on a tensor's values, say), as `` (at FILE:LINE, in FUNCTION: CODE)``;
    ``""`` where it says nothing of it."""
    found = re.search(r"The following call raised this error:\s*\n\s*File \"([^\"]+)\", line (\d+), in (\S+)"
                      r"(?:\n[ \t]+(\S[^\n]*))?", message)
    if found is None:
        return ""
    code = f": {found[4].strip()}" if found[4] else ""
    return f" (at {found[1]}:{found[2]}, in {found[3]}{code})"


def _frames(exc: BaseException) -> Iterator[Any]:
    """The traceback entries of ``exc``, outermost first."""
    entry = exc.__traceback__
    while entry is not None:
        yield entry
        entry = entry.tb_next


def _raised_at(exc: BaseException) -> str:
    """Where in the model's code ``exc`` was raised while ``torch.export`` traced it, for an error whose message
    names no frame (:func:`_where`): the innermost frame of its traceback (which begins at :func:`export_program`)
    outside torch's files, this package's, Python's own library (a function of it that the model called, a context
    manager's exit that passed the error on) and code generated at run time, as `` (at FILE:LINE, in FUNCTION:
    CODE)``; ``""`` where there is none."""
    import linecache
    import os
    import sysconfig

    import torch

    paths = sysconfig.get_paths()
    installed = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib"))
    skipped = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.dirname(__file__)) + os.sep, "<")

    def in_the_model(file: str) -> bool:
        return not file.startswith(skipped) and (file.startswith(installed)
                                                 or not file.startswith(os.path.join(paths["stdlib"], "")))

    frames = [entry for entry in _frames(exc) if in_the_model(entry.tb_frame.f_code.co_filename)]
    if not frames:
        return ""
    code, line = frames[-1].tb_frame.f_code, frames[-1].tb_lineno
    text = linecache.getline(code.co_filename, line).strip()
    return f" (at {code.co_filename}:{line}, in {code.co_name}{': ' + text if text else ''})"


def _packed_sequence(model: Any, exc: BaseException) -> str:
    """What to change where ``torch.export`` stopped in a recurrent layer given a ``PackedSequence``
    (``pack_padded_sequence``), whose batch sizes are values of a tensor that the layer reads as sizes; ``""``
    where ``exc`` was raised elsewhere."""
    import torch

    for entry in _frames(exc):
        values = entry.tb_frame.f_locals
        layer = values.get("self")
        if isinstance(layer, torch.nn.RNNBase) and isinstance(values.get("orig_input"),
                                                              torch.nn.utils.rnn.PackedSequence):
            name = next((n for n, m in model.named_modules() if m is layer), None)
            called = f"its {type(layer).__name__} {name!r}" if name else f"the {type(layer).__name__}"   # the model
            return (f"{called} is given a PackedSequence (pack_padded_sequence), whose batch sizes are values of a "
                    "tensor, which torch.export cannot read as sizes: give it the padded tensor, and mask or gather "
                    "by the lengths what the steps past each sequence's end change")
    return ""


def _one_value_norm(model: Any, exc: BaseException, first: str) -> str:
    """What to change where ``torch.export`` stopped at a batch normalisation in training mode given one value
    per channel (a micro-batch of one sample of a ``[batch, features]`` input), whose batch statistics torch
    refuses; ``""`` where ``exc`` is another error."""
    import torch

    if not first.startswith("Expected more than 1 value per channel when training"):
        return ""
    norms = [entry.tb_frame.f_locals.get("self") for entry in _frames(exc)]
    norm = next((m for m in reversed(norms) if isinstance(m, torch.nn.modules.batchnorm._NormBase)), None)
    name = next((n for n, m in model.named_modules() if m is norm), None) if norm is not None else None
    if name is None:
        return ""
    shape = re.search(r"input size torch\.Size\((\[[^]]*\])\)", first)
    called = f"its {type(norm).__name__} {name!r}" if name else f"the {type(norm).__name__}"   # the model itself
    return (f"{called} normalises each channel by the statistics of its input in training mode, and is given one "
            f"value per channel{f' (an input of shape {shape[1]})' if shape else ''}, which torch refuses: give "
            "micro-batches of more samples (the example inputs are one micro-batch), or plan the model in eval()")


class _Held:
    def __init__(self) -> None:
        self.text = io.StringIO()
        self.keep = False


class _ThisThreadHeld:
    """Standard error while one thread exports: that thread's writes go to ``held``, every other thread's to
    ``real`` as they would have (a program's other threads keep their output when the export fails)."""

    def __init__(self, held: io.StringIO, real: Any) -> None:
        self._thread, self._held, self._real = threading.get_ident(), held, real

    def _target(self) -> Any:
        return self._held if threading.get_ident() == self._thread else self._real

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        target = self._target()
        if target is not None:
            target.flush()

    def __getattr__(self, name: str) -> Any:   # encoding, isatty, fileno, ...: those of the stream it stands for
        return getattr(self._target(), name)


@contextlib.contextmanager
def _held_diagnostics() -> Iterator[_Held]:
    """Hold what torch writes to standard error in this thread while it exports (its log lines, and the
    partial graph it prints when an export fails), and write it out afterwards only if ``keep`` was set:
    a failed export is then reported by its one-line error alone."""
    held = _Held()
    real = sys.stderr
    # torch's log handlers, each with the stream it writes: other threads' records keep going there, and
    # each handler gets its own stream back (one on sys.__stderr__ was given sys.stderr)
    handlers = {h: h.stream for name, lg in list(logging.root.manager.loggerDict.items())
                if name == "torch" or name.startswith("torch.")
                if isinstance(lg, logging.Logger)
                for h in lg.handlers if isinstance(h, logging.StreamHandler) and h.stream in (real, sys.__stderr__)}
    for h, stream in handlers.items():
        h.setStream(_ThisThreadHeld(held.text, stream))
    try:
        with contextlib.redirect_stderr(_ThisThreadHeld(held.text, real)):
            yield held
    finally:
        for h, stream in handlers.items():
            h.setStream(stream)
        if held.keep and held.text.getvalue():
            real.write(held.text.getvalue())


# ----- classification and formulas --------------------------------------------------------

def _op_name(target: Any) -> str:
    """The overload packet name of an ATen operator (``relu_`` -> ``relu_``), or ``""``."""
    packet = getattr(target, "overloadpacket", None)
    return getattr(packet, "__name__", "") if packet is not None else ""


def _base(name: str) -> str:
    """The name of the out-of-place form of an in-place operator (``relu_`` -> ``relu``)."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _target_label(target: Any) -> str:
    name = getattr(target, "name", None)
    if callable(name):
        try:
            return str(name())
        except Exception:  # some operator objects have a name() that needs arguments
            pass
    return str(getattr(target, "__name__", target))


def classify(target: Any, in_dtype: Any = None, out_dtype: Any = None) -> str:
    """The cost kind of an operator (see :data:`placement.io.opgraph.BACKWARD_FACTOR`)."""
    torch = require_torch()
    if not isinstance(target, torch._ops.OpOverload):
        return "unknown"
    base = _base(_op_name(target))
    if target.namespace not in ("aten", "prims") and (target.namespace, base) not in KNOWN_CUSTOM:
        return "unknown"
    if base in ("to", "_to_copy", "type_as"):
        return "copy" if in_dtype is not None and in_dtype != out_dtype else "view"
    if base in RECURRENT:
        return "recurrent"
    if base in MATMUL or base == "einsum" or base in GEMM_FORMS:
        return "matmul"
    if base in CONV:
        return "conv"
    if base in ATTENTION:
        return "attention"
    if base in NORM:
        return "norm"
    if base in SOFTMAX:
        return "softmax"
    if target.is_view or base in ALIASES:
        return "view"
    if base in COPY:   # before the pointwise tag, which clone, where.self and masked_fill.Scalar carry
        return "copy"
    if torch.Tag.pointwise in target.tags or base in POINTWISE_UNTAGGED:
        return "pointwise"
    if base in REDUCTION or base in EMBEDDING_BAG or base in SORT or base in SEARCH or base in COSINE or base in FFT:
        return "reduction"
    if base in POOL:
        return "pool"
    if base in GATHER:
        return "gather"
    if base in CONSTANT:
        return "constant"
    return "unknown"


def _added_term(node: Any) -> Any:
    """The argument a matmul or convolution adds to its product (its bias; ``addmm``'s input), or ``None``."""
    base = _base(_op_name(node.target))
    if base == "linear" or base in CONV:
        return node.kwargs.get("bias", node.args[2] if len(node.args) > 2 else None)
    if base == "bilinear":
        return node.kwargs.get("bias", node.args[3] if len(node.args) > 3 else None)
    if MATMUL.get(base) == 1 or base == "addbmm":
        return node.args[0] if node.args else None
    return None


def _added_alone(node: Any) -> Any:
    """What the FX ``node`` adds to its product (:func:`_added_term`) where it does not also multiply by it
    (``addmm(P, x, P)``, ``addmm(h, h, W)``: an operand of the product, once), or ``None``."""
    term = _added_term(node)
    places = sum(item is term for a in (*node.args, *node.kwargs.values())
                 for item in (a if isinstance(a, (list, tuple)) else (a,)))
    return term if places == 1 else None


def _added_reads(node: Any, reads_of: Callable[[Any], list[tuple[int, int]]],
                 inputs: Any) -> tuple[tuple[int, int] | str, ...]:
    """What the FX ``node`` adds to its product alone where that is no parameter (:func:`_added_alone`): the reads
    of operator outputs (a bias sliced from a packed one, cast, or an activation ``addmm`` adds) or the name of a
    model input. A parameter added so is a :class:`Param` that is no operand."""
    term = _added_alone(node)
    if not hasattr(term, "op"):
        return ()
    if term.op == "placeholder":
        return (term.name,) if term.name in inputs else ()
    return tuple(reads_of(term))


def _product_gemms(name: str, tensor_args: list[Any], node_args: tuple) -> list[tuple[int, int, int, int]]:
    """The GEMMs ``(m, n, k, batch)`` of ``addbmm`` (the batched product, summed over the batch:
    ``b`` GEMMs of ``n × m`` by ``m × p``), ``tensordot`` (the free dimensions of each operand by the
    contracted ones), ``linalg_multi_dot`` (the products in the order of least multiplications,
    which torch finds too) and ``bilinear`` (``x1 [..., I]``, ``N = numel(x1) / I`` rows, by each of the ``O``
    slices ``I × J`` of the weight ``[O, I, J]``, then each row of that by its row of ``x2``: ``N·O`` dot
    products over ``J``, the batched products ATen's ``_trilinear`` runs)."""
    if name in ("cdist", "_cdist_forward"):   # x1 [..., P, M] and x2 [..., R, M] give [..., P, R], batches broadcast
        x1, x2 = tensor_args[0].shape, tensor_args[1].shape
        rows, others, width = (int(x1[-2]), int(x2[-2]), int(x1[-1])) if len(x1) >= 2 else (0, 0, 0)
        batch = math.prod(int(d) for d in require_torch().broadcast_shapes(x1[:-2], x2[:-2]))
        return [(rows, others, width, batch)] if rows and others and width and batch else []
    if name == "bilinear":
        x1, w = tensor_args[0], tensor_args[2]
        out, left, right = int(w.shape[0]), int(w.shape[1]), int(w.shape[2])
        rows = _numel(x1) // left if left else 0
        return [(rows, right, left, out), (1, 1, right, rows * out)]
    if name == "addbmm":
        b1, b2 = tensor_args[1].shape, tensor_args[2].shape
        return [(int(b1[1]), int(b2[2]), int(b1[2]), int(b1[0]))]
    if name == "tensordot":
        a, b = tensor_args[0], tensor_args[1]
        dims = node_args[2] if len(node_args) > 2 else ()
        k = math.prod(int(a.shape[d]) for d in dims) if isinstance(dims, (list, tuple)) else 1
        return [(_numel(a) // k, _numel(b) // k, k, 1)] if k else []
    # linalg_multi_dot: a chain of matrices (the first may be a row, the last a column vector)
    matrices = [tuple(int(d) for d in t.shape) for t in _listed(node_args[0] if node_args else ())]
    if len(matrices) < 2:
        return []
    sizes = list(matrices[0]) if len(matrices[0]) == 2 else [1, matrices[0][0]]
    sizes += [m[1] if len(m) == 2 else 1 for m in matrices[1:]]
    n = len(matrices)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][s] + cost[s + 1][j] + sizes[i] * sizes[s + 1] * sizes[j + 1], s)
                                          for s in range(i, j))

    def gemms(i: int, j: int) -> list[tuple[int, int, int, int]]:
        if i == j:
            return []
        s = split[i][j]
        return gemms(i, s) + gemms(s + 1, j) + [(sizes[i], sizes[j + 1], sizes[s + 1], 1)]

    return gemms(0, n - 1)


def is_identity_dropout(node: Any) -> bool:
    """Whether ``node`` is a dropout that returns its input itself, with no kernel: in evaluation
    (``train=False``) or of probability ``p = 0``, for either of which ATen's dropouts return their input."""
    if _base(_op_name(node.target)) not in DROPOUT:
        return False
    train = node.kwargs.get("train", node.args[2] if len(node.args) > 2 else True)
    p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else None)
    return train is False or (isinstance(p, (int, float)) and not isinstance(p, bool) and p == 0)


def _written_values(node: Any, reads_of: Callable[[Any], list[tuple[int, int]]]) -> tuple[tuple[int, int], ...]:
    """The operators' outputs the FX ``node`` writes into in place (``Op.writes``): each argument it
    writes into, and the values that argument is a view (or an in-place result) of, back to the
    first that is none."""
    from placement.torch.contiguity import alias_sources, writes_into

    return tuple(dict.fromkeys(read for arg in node.all_input_nodes if writes_into(node, arg)
                               for value in alias_sources(arg) for read in reads_of(value)))


#: the regions torch.export writes as one higher-order operator: what the model holds, and what to change
REGIONS = {
    "wrap_with_set_grad_enabled": ("a torch.no_grad region over values that may need a gradient",
                                   "detach what it reads (x.detach()) where no gradient is to reach it, or compute it "
                                   "outside torch.no_grad (torch.utils.checkpoint runs its function so with "
                                   "use_reentrant=True: use use_reentrant=False)"),
    "wrap_with_autocast": ("a torch.autocast region", "plan the model in the precision it is to run in, without "
                                                      "autocast"),
    "cond": ("a torch.cond", "plan each branch's model, or branch in Python on what the example inputs fix"),
}


#: the module of torch.nn.utils.parametrizations.spectral_norm, whose power iteration in training mode is a
#: torch.no_grad region over the weight (as the module stack names its class)
SPECTRAL_NORMS = frozenset({"torch.nn.utils.parametrizations._SpectralNorm", "_SpectralNorm"})


def _region_site(node: Any) -> str:
    """Where in the model's code the region ``node`` (a higher-order operator) is, as `` (in module 'PATH', a
    CLASS, at FILE:LINE, in FUNCTION: CODE)``: the module whose forward opens it, where that is not the model itself
    (a parametrization's, such as spectral_norm's power iteration), and the innermost frame outside torch's own
    code (its files, and those it generates) of the first of its operators that records one (the innermost where
    all are torch's); ``""`` where neither is known."""
    import os

    import torch

    stack = list((node.meta.get("nn_module_stack") or {}).values())
    path, kind = stack[-1] if stack else ("", None)
    module = f"in module {path!r}, a {getattr(kind, '__qualname__', kind)}" if path else ""
    library = os.path.dirname(torch.__file__) + os.sep
    for arg in node.args:
        if getattr(arg, "op", None) != "get_attr":   # the region's body is a submodule of the program's
            continue
        body = getattr(node.graph.owning_module, arg.target, None)
        for inner in getattr(getattr(body, "graph", None), "nodes", ()):
            frames = re.findall(r"File \"([^\"]+)\", line (\d+), in (\S+)(?:\n[ \t]+(\S[^\n]*))?",
                                inner.meta.get("stack_trace") or "")
            if frames:
                frames = [f for f in frames if not f[0].startswith("<")] or frames   # not code torch generated
                file, line, function, code = ([f for f in frames if not f[0].startswith(library)] or frames)[-1]
                code = f": {code.strip()}" if code else ""
                return f" ({module}{', ' if module else ''}at {file}:{line}, in {function}{code})"
    return f" ({module})" if module else ""


def _refuse_what_cannot_be_costed(node: Any, name: str, torch: Any) -> None:
    """Raise :class:`InvalidParameterError` for an operator whose cost this module cannot know: a
    higher-order operator (a region ``torch.export`` wraps: ``torch.no_grad``, ``torch.autocast``,
    ``torch.cond``; the operators inside it are not in the graph this module reads), or an output
    whose shape depends on the input's values (``nonzero``, a boolean mask)."""
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        kind = node.target.name()
        what, advice = REGIONS.get(kind, ("a region", "plan the model without it"))
        if kind == "wrap_with_set_grad_enabled" and not (node.args and node.args[0] is False):
            what, advice = "a torch.enable_grad region", "plan the model without it"
        elif kind == "wrap_with_set_grad_enabled":
            stack = list((node.meta.get("nn_module_stack") or {}).values())
            path, opened_by = stack[-1] if stack else ("", None)
            if path and getattr(opened_by, "__qualname__", opened_by) in SPECTRAL_NORMS:
                advice = f"it is spectral_norm's power iteration: {_spectral_norm_advice(path, 'parametrization')}"
        raise InvalidParameterError("model", f"{name} cannot be costed: its forward holds {what}{_region_site(node)}, "
                                             f"which torch.export writes as the higher-order operator {kind}, "
                                             f"whose operators are not read; {advice}")
    for t in _tensors(node.meta.get("val")):
        if t is not None and not all(isinstance(d, int) for d in t.shape):
            raise InvalidParameterError("model", f"{name} cannot be costed: the shape of operator {node.name!r} "
                                                 f"({_target_label(node.target)}) depends on the values of the "
                                                 "inputs (as after nonzero or a boolean mask); only shapes that the "
                                                 "example inputs' shapes fix are known")


def _numel(t: Any) -> int:
    return int(math.prod(int(d) for d in t.shape))


def _flops(kind: str, target: Any, tensor_args: list[Any], out: list[Any], node_args: tuple,
           node_kwargs: dict | None = None) -> int:
    """FLOPs of one operator by the table of the module docstring."""
    if kind in ("view", "gather", "copy", "constant", "unknown"):
        return 0
    name = _base(_op_name(target))
    first_out = out[0] if out else None
    if kind == "matmul" and name == "einsum":
        return layer_gemms.einsum_flops(_einsum_products(node_args, node_kwargs) or [])
    if kind == "matmul" and name in GEMM_FORMS:
        return 2 * sum(map(math.prod, _product_gemms(name, tensor_args, node_args)))
    if kind == "recurrent":
        return layer_gemms.recurrent_flops(_recurrent_gemms(name, node_args))
    if kind == "matmul" and name in GROUPED_MATMUL:
        return 2 * sum(map(math.prod, _grouped_gemms(tensor_args, first_out)))
    if kind == "matmul":
        a = tensor_args[MATMUL[name]]
        return 2 * _numel(first_out) * int(a.shape[-1])
    if kind == "conv":
        x, w = tensor_args[0], tensor_args[1]
        transposed = name.startswith("conv_transpose") or (
            name in ("convolution", "_convolution") and len(node_args) > 6 and bool(node_args[6]))
        if transposed:
            return 2 * _numel(x) * _numel(w) // int(w.shape[0])
        return 2 * _numel(first_out) * _numel(w) // int(w.shape[0])
    if kind == "attention":
        q, k, v = tensor_args[0], tensor_args[1], tensor_args[2]
        e, s, ev = int(q.shape[-1]), int(k.shape[-2]), int(v.shape[-1])
        return 2 * (_numel(q) // e) * s * (e + ev)
    if kind in ("norm", "softmax"):
        return NORM_FLOPS * _numel(tensor_args[0])
    if kind == "pointwise":
        return POINTWISE_FLOPS.get(name, 1) * (_numel(first_out) if first_out is not None else 0)
    if kind == "reduction" and name in EMBEDDING_BAG:
        elements, weighted = _bag_elements(tensor_args, node_args)
        return 2 * elements if weighted else elements
    if kind == "reduction" and name in COSINE:
        broadcast = require_torch().broadcast_shapes(*(t.shape for t in tensor_args[:2]))
        return 6 * math.prod(int(d) for d in broadcast)
    if kind == "reduction" and name in SORT:
        x = tensor_args[0]
        dim = _sorted_dim(target, node_args, node_kwargs or {})
        n = (_numel(x) if dim is None else int(x.shape[dim])) if x.dim() else 1
        return _numel(x) * math.ceil(math.log2(n)) if n > 1 else 0
    if kind == "reduction" and name in FFT:
        return _fft_flops(name, target, tensor_args, first_out, node_args, node_kwargs or {})
    if kind == "reduction" and name in SEARCH:
        values, boundaries = (node_args[1], node_args[0]) if name == "searchsorted" else node_args[:2]
        looked_up = getattr(values, "meta", {}).get("val")
        table = boundaries.meta["val"]
        n = int(table.shape[-1]) if table.dim() else 1
        return (_numel(looked_up) if looked_up is not None else 1) * math.ceil(math.log2(n + 1))
    if kind in ("reduction", "pool"):
        return _numel(tensor_args[0]) if tensor_args else 0
    raise AssertionError(kind)


def _sorted_dim(target: Any, node_args: tuple, node_kwargs: dict) -> int | None:
    """The dimension a sorting operator (:data:`SORT`) sorts along: its argument ``dim``; ``None`` where it sorts
    the whole tensor flattened (``dim`` None, as ``quantile``'s default, or no ``dim`` at all, as ``median(x)``),
    and 0 for ``msort``."""
    from placement.torch.contiguity import call_values

    if _base(_op_name(target)) == "msort":
        return 0
    value = call_values(target, node_args, node_kwargs).get("dim")
    return None if value is None else int(value)


def _fft_flops(name: str, target: Any, tensor_args: list[Any], out: Any, node_args: tuple,
               node_kwargs: dict) -> float:
    """FLOPs of a discrete Fourier transform (:data:`FFT`): ``5 · B · P · log2 N`` for ``B`` transforms of ``N``
    points each (the product of the signal's sizes along the transformed dimensions: its real side's, or
    those ``n`` / ``s`` give; ``n_fft`` for stft and istft) with ``P`` complex points each: ``N`` for a complex
    transform (its radix-2 count, ``5 N log2 N``), the ``N / n · (n // 2 + 1)`` a real one keeps (``n`` the
    last transformed size: about half)."""
    from placement.torch.contiguity import call_values

    x = tensor_args[0]
    values = call_values(target, node_args, node_kwargs)
    if name in ("stft", "istft"):   # the complex side holds the kept points of every frame
        points = int(values["n_fft"])
        return 5 * _numel(out if name == "stft" else x) * math.log2(points) if points > 1 else 0.0
    real = not (x.is_complex() and out.is_complex())
    signal = x if real and not x.is_complex() else out   # the real input, else the (real or complex) output
    dims, sizes, length = values.get("dim"), values.get("s"), values.get("n")
    if dims is None:   # the n-dimensional forms: the last len(s) dimensions, or all
        dims = list(range(signal.dim() - len(sizes), signal.dim())) if sizes else list(range(signal.dim()))
    dims = [dims] if isinstance(dims, int) else list(dims)
    given = [int(signal.shape[d]) for d in dims]
    transforms = _numel(signal) // math.prod(given) if math.prod(given) else 0
    points = given
    if signal is x and length is not None:   # a real input cut or padded to n (or s) points
        points = given[:-1] + [int(length)]
    elif signal is x and sizes is not None:
        points = [int(p) for p in sizes]
    count = math.prod(points)
    if count <= 1:
        return 0.0
    kept = count // points[-1] * (points[-1] // 2 + 1) if real else count
    return 5 * transforms * kept * math.log2(count)


def _bag_elements(tensor_args: list[Any], node_args: tuple) -> tuple[int, bool]:
    """The elements of the rows an EmbeddingBag (:data:`EMBEDDING_BAG`) reads from its table, ``n · D`` for
    ``n`` indices into a table ``D`` wide, and whether it weights them (``per_sample_weights``)."""
    weight, indices = tensor_args[0], tensor_args[1]
    width = int(weight.shape[-1]) if weight.dim() else 1
    return _numel(indices) * width, len(node_args) > 6 and node_args[6] is not None


def _bag_bytes(read_bytes: float, written: float, tensor_args: list[Any], node_args: tuple,
               nbytes: Callable[[Any], float]) -> float:
    """Bytes an EmbeddingBag moves (module docstring): what it reads but its table, the rows of the table its
    indices select, and what it writes."""
    weight = tensor_args[0]
    table = nbytes(weight)
    elements = _numel(weight)
    rows = table / elements * _bag_elements(tensor_args, node_args)[0] if elements else 0.0
    return read_bytes - table + rows + written


def _einsum_products(node_args: tuple, node_kwargs: dict | None) -> list[tuple[tuple[int, ...], bool]] | None:
    """The products of two operands an ``einsum`` node runs (:func:`placement.io.layer_gemms.einsum_products`,
    by the ``path`` torch.einsum passes where opt_einsum is installed), or ``None``."""
    found = _einsum_contractions(node_args, node_kwargs)
    return None if found is None else [(gemm, multiplies) for gemm, multiplies, _, _ in found]


def _einsum_contractions(node_args: tuple, node_kwargs: dict | None) -> list[layer_gemms.Contraction] | None:
    """:func:`_einsum_products` with the operands of each product's factors
    (:func:`placement.io.layer_gemms.einsum_contractions`)."""
    path = (node_kwargs or {}).get("path", node_args[2] if len(node_args) > 2 else None)
    return layer_gemms.einsum_contractions(node_args[0], _shapes(_listed(node_args[1])), path)


def _einsum_operands(node: Any, reads_of: Callable[[Any], list[tuple[int, int]]],
                     placeholders: dict[str, Param | None]
                     ) -> tuple[tuple[layer_gemms.Contraction, ...], tuple[tuple[int, int] | str | None, ...]]:
    """An ``einsum`` node's products of two operands with the operands of their factors, and its operands in
    the equation's order (reads of operator outputs, names of parameters or model inputs; ``None`` for any
    other value), where it has three or more operands (:attr:`placement.io.opgraph.Op.contractions`); ``()``
    twice otherwise."""
    given = node.args[1] if len(node.args) > 1 and isinstance(node.args[1], (list, tuple)) else ()
    found = _einsum_contractions(node.args, node.kwargs) if len(given) >= 3 else None
    if not found:
        return (), ()
    operands: list[tuple[int, int] | str | None] = []
    for arg in given:
        if not hasattr(arg, "op"):
            operands.append(None)
        elif arg.op == "placeholder":
            operands.append(_operand_name(arg, placeholders))
        else:
            operands.append(next(iter(reads_of(arg)), None))
    return tuple(found), tuple(operands)


def _operators(kind: str, target: Any, tensor_args: list[Any], out: list[Any], node_args: tuple,
               node_kwargs: dict | None = None) -> tuple[Operator, ...]:
    """The GEMMs and vector operators of one operator (:mod:`placement.io.operator_shapes`)."""
    name = _base(_op_name(target))
    first_out = out[0] if out else None
    out_shape = tuple(first_out.shape) if first_out is not None else ()
    if kind == "matmul" and name == "einsum":
        return layer_gemms.einsum_operators(_einsum_products(node_args, node_kwargs) or [])
    if kind == "matmul" and name in GEMM_FORMS:
        bias = shapes.vector("add", _numel(first_out)) if name == "bilinear" and len(tensor_args) > 3 else ()
        return tuple(op for m, n, k, batch in _product_gemms(name, tensor_args, node_args)
                     for op in shapes.gemm(m, n, k, batch)) + bias
    if kind == "recurrent":
        return layer_gemms.recurrent_operators(_recurrent_gemms(name, node_args))
    if kind == "matmul" and name in GROUPED_MATMUL:
        return tuple(op for gemm in _grouped_gemms(tensor_args, first_out) for op in shapes.gemm(*gemm))
    if kind == "matmul":
        at = MATMUL[name]
        return shapes.matmul(tuple(tensor_args[at].shape), tuple(tensor_args[at + 1].shape), out_shape,
                             linear=name == "linear", bias=len(tensor_args) > 2)
    if kind == "conv":
        transposed = name.startswith("conv_transpose") or (
            name in ("convolution", "_convolution") and len(node_args) > 6 and bool(node_args[6]))
        return shapes.convolution(tuple(tensor_args[0].shape), tuple(tensor_args[1].shape), out_shape, transposed,
                                  bias=len(tensor_args) > 2)
    if kind == "attention":
        return shapes.attention(*(tuple(t.shape) for t in tensor_args[:3]))
    if kind == "reduction" and name in EMBEDDING_BAG:
        elements, weighted = _bag_elements(tensor_args, node_args)
        return (shapes.vector("mul", elements) if weighted else ()) + shapes.vector("reduce", elements)
    return shapes.elementwise(kind, name or _target_label(target), _numel(tensor_args[0]) if tensor_args else 0,
                              _numel(first_out) if first_out is not None else 0)


def _grouped_gemms(tensor_args: list[Any], out: Any) -> list[tuple[int, int, int, int]]:
    """``(m, n, k, batch)`` GEMMs of a grouped GEMM (:data:`GROUPED_MATMUL`) giving ``out``: its groups together
    make one GEMM of ``out``'s rows by its columns over ``a``'s last dimension, or, where ``a`` and ``b`` are
    both matrices and ``offs`` splits ``K`` among ``G`` groups, ``G`` GEMMs over ``K / G`` on average, split
    as evenly as whole numbers go (``K mod G`` of them one longer): together they contract all of ``K``, where
    ``K // G`` each left ``K mod G`` out, and all of it with more groups than ``K``."""
    a, b = tensor_args[0], tensor_args[1]
    n = int(out.shape[-1]) if out is not None and out.dim() else 0
    rows = _numel(out) // n if n else 0
    k = int(a.shape[-1])
    if a.dim() == 2 and b.dim() == 2 and out is not None and out.dim() == 3:
        groups, m = int(out.shape[0]), int(out.shape[1])
        if not groups:
            return []
        share, longer = divmod(k, groups)
        return [(m, n, share + 1, longer), (m, n, share, groups - longer)]
    return [(rows, n, k, 1)]


def _shapes(tensors: list[Any]) -> list[tuple[int, ...]]:
    """The shapes of example tensors (``None`` for a missing one: an equation that cannot fit it)."""
    return [tuple(int(d) for d in t.shape) if t is not None else () for t in tensors]


def _listed(values: Any) -> list[Any]:
    """The example tensors of a list argument of FX nodes (``einsum``'s operands, an LSTM's weights)."""
    if not isinstance(values, (list, tuple)):
        return []
    return [v.meta.get("val") for v in values if hasattr(v, "meta")]


def _recurrent_gemms(name: str, node_args: tuple) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The GEMMs of a recurrent layer's forward (``aten.lstm.input`` and the like), each with its role
    (:func:`placement.io.layer_gemms.recurrent_gemms`), from its arguments."""
    x = node_args[0].meta["val"]
    layers, bidirectional, batch_first = int(node_args[4]), bool(node_args[7]), bool(node_args[8])
    weights = [t for t in _listed(node_args[2]) if len(t.shape) == 2]   # w_ih, w_hh of each layer, direction
    gates = RECURRENT[name]
    hidden = int(weights[0].shape[0]) // gates if weights else 0
    projected = int(weights[1].shape[1]) if len(weights) > 1 else hidden   # the projected size (proj_size)
    if len(x.shape) == 2:
        steps, batch = int(x.shape[0]), 1
    else:
        steps, batch = (int(x.shape[1]), int(x.shape[0])) if batch_first else (int(x.shape[0]), int(x.shape[1]))
    return layer_gemms.recurrent_gemms(gates, steps, batch, int(x.shape[-1]), hidden, projected, layers,
                                       2 if bidirectional else 1)


def _operand_name(arg: Any, placeholders: dict[str, Param | None]) -> str:
    """The name an operator's :class:`Op` gives the placeholder ``arg``: a parameter's qualified name,
    or the model input's."""
    p = placeholders.get(arg.name)
    return p.name if p is not None else arg.name


def _repeated_operands(node: Any, reads_of: Callable[[Any], list[tuple[int, int]]],
                       placeholders: dict[str, Param | None]) -> tuple[tuple[int, int] | str, ...]:
    """The operands the FX ``node`` is given more than once (``h @ h``, ``einsum("bid,bjd->bij", h, h)``),
    once per repetition: reads of operator outputs, and names of parameters or model inputs.
    Autograd computes a gradient through every place an operand fills; a place where the value is added to a
    product (:func:`_added_term`: ``addmm(P, x, P)``'s first) is no operand's."""
    counts: dict[Any, int] = {}
    for a in (*node.args, *node.kwargs.values()):
        for item in a if isinstance(a, (list, tuple)) else (a,):
            if hasattr(item, "op"):
                counts[item] = counts.get(item, 0) + 1
    term = _added_term(node)
    if term in counts:
        counts[term] -= 1
    found: list[tuple[int, int] | str] = []
    for arg, count in counts.items():
        for _ in range(count - 1):
            found.extend([_operand_name(arg, placeholders)] if arg.op == "placeholder" else reads_of(arg))
    return tuple(found)


def _state_operands(node: Any, reads_of: Callable[[Any], list[tuple[int, int]]],
                    placeholders: dict[str, Param | None]) -> tuple[tuple[int, int] | str, ...]:
    """The operands of a recurrent layer's node that are its initial hidden state (its second argument,
    a tensor or, for an LSTM, a list of two): the reads of operator outputs, and the names of
    parameters or model inputs."""
    found: list[tuple[int, int] | str] = []
    given = node.args[1] if len(node.args) > 1 else ()
    for arg in given if isinstance(given, (list, tuple)) else (given,):
        if not hasattr(arg, "op"):
            continue
        if arg.op == "placeholder":
            found.append(_operand_name(arg, placeholders))
        else:
            found.extend(reads_of(arg))
    return tuple(found)


# ----- walking the exported graph ---------------------------------------------------------

@dataclass(frozen=True)
class _Sizes:
    """Element sizes under an optional data-type override for floating-point tensors."""

    dtype: str | None

    def key(self, torch_dtype: Any) -> str:
        name = str(torch_dtype).replace("torch.", "")
        if name in TORCH_DTYPE_KEYS:
            return self.dtype or TORCH_DTYPE_KEYS[name]
        return "fp32"

    def nbytes(self, t: Any) -> float:
        name = str(t.dtype).replace("torch.", "")
        if self.dtype is not None and name in TORCH_DTYPE_KEYS:
            return float(_numel(t) * ELEMENT_BYTES[self.dtype])
        return float(_numel(t) * t.element_size())


def _tensors(value: Any) -> list[Any]:
    """The tensors of a node value, in order; non-tensor items are ``None``."""
    torch = require_torch()
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, torch.Tensor) else None for v in value]
    return []


def graph_from_program(program: Any, name: str = "model", dtype: str | None = None) -> OpGraph:
    """The :class:`OpGraph` of an ``ExportedProgram`` (module docstring); warns about unknown operators."""
    torch = require_torch()
    sizes = _Sizes(check_dtype(dtype))
    signature = program.graph_signature
    state = dict(program.state_dict)
    state.update(getattr(program, "constants", {}) or {})
    placeholders: dict[str, Param | None] = {}
    for spec in signature.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if arg_name is None:
            continue
        kind = spec.kind.name
        if kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and spec.target is not None:
            value = state.get(spec.target)
            trainable = kind == "PARAMETER" and bool(getattr(value, "requires_grad", True))
            placeholders[arg_name] = Param(spec.target, 0.0, trainable)  # size filled in below
        else:
            placeholders[arg_name] = None
    inputs = tuple(n.name for n in program.graph.nodes if n.op == "placeholder" and n.name in placeholders
                   and placeholders[n.name] is None and isinstance(n.meta.get("val"), torch.Tensor))

    ops: list[Op] = []
    index_of: dict[Any, int] = {}             # fx node -> operator index
    selects: dict[Any, tuple[int, int]] = {}  # getitem node -> (operator, output)
    hidden: dict[Any, set[int]] = {}          # non-tensor node -> operators it depends on
    unknown: set[str] = set()

    def reads_of(arg: Any) -> list[tuple[int, int]]:
        """The outputs of operators that ``arg`` (an FX node) stands for."""
        if arg in selects:
            return [selects[arg]]
        if arg not in index_of:
            return []
        outs = ops[index_of[arg]].outputs
        return [(index_of[arg], k) for k in range(len(outs)) if outs[k] > 0 or len(outs) == 1]

    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        _refuse_what_cannot_be_costed(node, name, torch)
        reads: list[tuple[int, int]] = []
        depends: set[int] = set()
        tensor_args: list[Any] = []
        params: list[Param] = []
        model_inputs: list[str] = []
        read_bytes = 0.0
        int_read_bytes = 0.0
        seen_inputs: set[Any] = set()
        for arg in node.all_input_nodes:
            if arg in seen_inputs:
                continue
            seen_inputs.add(arg)
            value = arg.meta.get("val")
            if arg in index_of or arg in selects:
                reads.extend(reads_of(arg))
            elif arg in hidden:
                depends |= hidden[arg]
            elif arg.op == "placeholder" and placeholders.get(arg.name) is not None and isinstance(
                    value, torch.Tensor):
                p = placeholders[arg.name]
                params.append(Param(p.name, sizes.nbytes(value), p.trainable, arg is not _added_alone(node)))
            elif arg.op == "placeholder" and arg.name in inputs:
                model_inputs.append(arg.name)
            if isinstance(value, torch.Tensor):
                read_bytes += sizes.nbytes(value)
                if not value.is_floating_point():
                    int_read_bytes += sizes.nbytes(value)
        # tensor operands in argument order, for the formulas
        for a in (*node.args, *node.kwargs.values()):
            v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if isinstance(v, torch.Tensor):
                tensor_args.append(v)
        repeated = _repeated_operands(node, reads_of, placeholders)

        if node.target is operator.getitem:
            source = node.args[0]
            if source in index_of and isinstance(node.meta.get("val"), torch.Tensor):
                selects[node] = (index_of[source], int(node.args[1]))
            else:
                hidden[node] = depends | {i for i, _ in reads}
            continue
        identity_dropout = is_identity_dropout(node)
        if identity_dropout:
            source = node.args[0]
            if source in selects:
                selects[node] = selects[source]
                continue
            if source in index_of and len(ops[index_of[source]].outputs) == 1:
                selects[node] = (index_of[source], 0)
                continue
        out = _tensors(node.meta.get("val"))
        if not any(t is not None for t in out):
            hidden[node] = depends | {i for i, _ in reads}
            continue

        present = [t for t in out if t is not None]
        in_dtype = tensor_args[0].dtype if tensor_args else None
        kind = "view" if identity_dropout else classify(node.target, in_dtype, present[0].dtype)
        base = _base(_op_name(node.target))
        einsum = base == "einsum"
        products = _einsum_products(node.args, node.kwargs) if einsum else None
        if kind == "matmul" and products is not None and layer_gemms.einsum_multiplies(products):
            kind = "pointwise"
        multiplied = tensor_args[:2] if base in GROUPED_MATMUL else tensor_args   # not offs
        mixed = sorted({str(t.dtype).replace("torch.", "") for t in multiplied})
        if kind in ("matmul", "conv") and len(mixed) > 1:   # eager PyTorch refuses it; export does not check
            raise InvalidParameterError("args", f"cannot run {name}: operator {node.name!r} "
                                                f"({_target_label(node.target)}) would multiply tensors of types "
                                                f"{', '.join(mixed)}; give inputs of the type of the parameters")
        outputs = tuple(sizes.nbytes(t) if t is not None else 0.0 for t in out)
        written = float(sum(outputs))
        moved = bytes_moved(kind, read_bytes, int_read_bytes, written)
        if kind == "reduction" and base in EMBEDDING_BAG:
            moved = _bag_bytes(read_bytes, written, tensor_args, node.args, sizes.nbytes)
        if kind == "unknown" or (einsum and products is None):
            unknown.add(_target_label(node.target))
        floating = [t for t in present if t.is_floating_point()] or [t for t in tensor_args if t.is_floating_point()]
        op_dtype = sizes.key(floating[0].dtype) if floating else None   # integers alone: typed_integer_operators
        stack = node.meta.get("nn_module_stack") or {}
        calls = [(key, fqn) for key, (fqn, _type) in stack.items() if fqn]
        reads_all = tuple(dict.fromkeys(reads)) + tuple((i, -1) for i in sorted(depends))
        ops.append(Op(node.name, _target_label(node.target), kind, op_dtype,
                      float(_flops(kind, node.target, tensor_args, present, node.args, node.kwargs)), moved, outputs,
                      reads_all, tuple(params), tuple(fqn for _, fqn in calls), tuple(key for key, _ in calls),
                      _operators(kind, node.target, tensor_args, present, node.args, node.kwargs),
                      tuple(model_inputs),
                      tuple(t is not None and (t.is_floating_point() or t.is_complex()) for t in out),
                      _base(_op_name(node.target)) not in STOP_GRADIENT,
                      layer_gemms.recurrent_gradients(_recurrent_gemms(_base(_op_name(node.target)), node.args))
                      if kind == "recurrent" else (),
                      _state_operands(node, reads_of, placeholders) if kind == "recurrent" else (), repeated,
                      _written_values(node, reads_of), _added_reads(node, reads_of, inputs),
                      *(_einsum_operands(node, reads_of, placeholders) if einsum and kind == "matmul" else ((), ()))))
        index_of[node] = len(ops) - 1

    names = tuple(sorted(unknown))
    if names:
        warnings.warn(f"{name}: no FLOP formula for {len(names)} operator type(s), costed by bytes moved only: "
                      f"{', '.join(names)}", CostModelWarning, stacklevel=2)
    grad_inputs = tuple(n.name for n in program.graph.nodes if n.op == "placeholder" and n.name in inputs
                        and n.meta["val"].requires_grad)
    returned = [v for n in program.graph.nodes if n.op == "output" for v in n.all_input_nodes]
    made_by = {v: index_of[v] if v in index_of else selects[v][0] for v in returned if v in index_of or v in selects}
    outputs = tuple(sorted(set(made_by.values())))
    as_given = tuple(dict.fromkeys(v.name for v in returned if v.op == "placeholder" and v.name in inputs))
    scalar = tuple(sorted({op for v, op in made_by.items()
                           if isinstance(v.meta.get("val"), torch.Tensor) and v.meta["val"].dim() == 0}))
    return OpGraph(typed_integer_operators(ops), name, "torch.export", names, inputs=inputs, grad_inputs=grad_inputs,
                   outputs=outputs, returned_inputs=as_given, scalar_outputs=scalar)


def import_module(model: Any, args: Sequence[Any], kwargs: dict | None = None, *, name: str | None = None,
                  dtype: str | None = None) -> OpGraph:
    """Export ``model`` with the example inputs and read its :class:`OpGraph`."""
    label = model_name(name, model)
    program = export_program(model, args, kwargs)
    graph = graph_from_program(program, label, dtype)
    return replace(graph, aliases=module_aliases(model))


def module_aliases(model: Any) -> tuple[tuple[str, ...], ...]:
    """The groups of names under which one submodule of ``model`` is registered more than once
    (``nn.Sequential(a, b, a)``: ``("0", "2")``)."""
    names: dict[int, list[str]] = {}
    for fqn, module in model.named_modules(remove_duplicate=False):
        names.setdefault(id(module), []).append(fqn)
    return tuple(tuple(group) for group in names.values() if len(group) > 1)


@contextlib.contextmanager
def module_calls(model: Any) -> Iterator[set[int]]:
    """While in the context, the ids of the modules of ``model`` whose forward is called (an export runs the
    model's forward); none at all where a module takes no hook (a TorchScript module), so that no entry is
    taken for one never called. Every hook is removed on leaving, whatever happens."""
    called: set[int] = set()
    handles = []
    try:
        try:
            for module in model.modules():
                handles.append(module.register_forward_pre_hook(lambda module, args: called.add(id(module))))
        except RuntimeError:   # "register_forward_pre_hook is not supported on ScriptModules": no record
            for handle in handles:
                handle.remove()
            handles = []
        yield called
    finally:
        for handle in handles:
            handle.remove()


def read_state(model: Any, program: Any) -> set[int]:
    """The ids of the parameters and buffers of ``model`` that the exported ``program`` reads (a placeholder of
    its signature's that some operator uses), whichever module they are reached through."""
    signature = program.graph_signature
    lifted = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    state = {**dict(model.named_parameters(remove_duplicate=False)),
             **dict(model.named_buffers(remove_duplicate=False))}
    return {id(state[lifted[node.name]]) for node in program.graph.nodes
            if node.op == "placeholder" and node.users and lifted.get(node.name) in state}


def uncalled_entries(model: Any, called: set[int], graph: OpGraph, read: set[int]) -> list[str] | None:
    """The entries of numbered containers of ``model`` (``layers.1`` of an ``nn.ModuleList`` or an
    ``nn.Sequential``) that the model's forward did not call in the run the export traced: neither the entry
    nor any of its submodules is in ``called`` (:func:`module_calls` of the export), encloses an operator of
    ``graph`` or holds a tensor of ``read`` (:func:`read_state`: a parameter the forward reads through the
    entry without calling it). Outermost only, in the order the model registers them; ``None`` where
    ``called`` does not hold the model itself (no record of its calls)."""
    if id(model) not in called:
        return None
    ran = {path for op in graph.ops for path in op.module_path}
    found: list[str] = []
    for fqn, module in model.named_modules(remove_duplicate=False):
        if not fqn.rpartition(".")[2].isdigit() or any(fqn.startswith(entry + ".") for entry in found):
            continue
        if any(id(inner) in called for inner in module.modules()):
            continue
        if any(id(tensor) in read for tensor in (*module.parameters(), *module.buffers())):
            continue
        if not any(path == fqn or path.startswith(fqn + ".") for path in ran):
            found.append(fqn)
    return found


@keywords_checked
def import_torch(model: Any, args: Sequence[Any], kwargs: dict | None = None, *, platform: Platform,
                 training: bool = False, granularity: str = "module", module_depth: int | None = None,
                 dtype: str | None = None, name: str | None = None, operators: bool = False) -> ImportedModel:
    """A PyTorch model as a placement instance: export, group, cost on ``platform``, validate.

    ``training`` adds backward nodes (see :mod:`placement.io.opgraph`); ``operators`` records
    every node's operator shapes for the co-design (:mod:`placement.io.operator_shapes`). The result's
    ``problem`` goes to any solver; its ``graph`` and ``instance`` to the exporters of
    :mod:`placement.io.exporters`; its ``source`` is the ``ExportedProgram``, which
    :func:`placement.io.exporters.pipe_split_module` splits. The instance's ``about.uncalled_entries`` lists
    the entries of numbered containers that the forward did not call in the exported run (:func:`uncalled_entries`).
    """
    from placement.io.module_names import warn_of_state_names
    from placement.torch.forward_hooks import ImportedForwardHookWarning, forward_hooks, imported_hook_note
    from placement.torch.partition import canonical_names

    check_grouping(granularity, module_depth)   # before the export (seconds)
    check_module(model)
    label = model_name(name, model)
    check_tensor_args(args)
    check_forward_takes(model, args, kwargs)   # before module_calls hooks every module
    hooks = forward_hooks(model)   # the model's own: before module_calls hooks every module
    with module_calls(model) as called:
        program = export_program(model, args, kwargs)
    warn_of_state_names(program)
    hooked = imported_hook_note(hooks)
    if hooked is not None:
        warnings.warn(hooked, ImportedForwardHookWarning, stacklevel=2)
    graph = replace(graph_from_program(program, label, dtype), aliases=module_aliases(model))
    if not graph.ops:   # the model is at fault, not an instance
        raise InvalidParameterError("model", f"{type(model).__name__} has no operators to place: its exported forward "
                                             "runs none (it returns its inputs as given, or constants)")
    first = canonical_names(model)   # a tied tensor by its first name, as the stages and the ONNX import name it
    names = {target: first.get(id(tensor), target) for target, tensor in program.state_dict.items()}
    imported = build(group_ops(graph, granularity, module_depth), platform, training, source=program,
                     operators=operators, parameter_names=names)
    uncalled = uncalled_entries(model, called, graph, read_state(model, program))
    if uncalled is not None:   # what the hand-off forms name as holding no stage's work
        about = {**imported.instance.get("about", {}), "uncalled_entries": uncalled}
        imported = replace(imported, instance={**imported.instance, "about": about})
    return _with_writes_in_place(imported, program, names)


def _with_writes_in_place(imported: ImportedModel, program: Any, names: Mapping[str, str]) -> ImportedModel:
    """``imported`` with each group of nodes that must share a stage because the program writes a
    tensor in place (:func:`placement.torch.state.in_place_groups`: a buffer and its readers, a write
    into an activation and what it is ordered against) or reads one's memory by storage offset and
    strides (``as_strided`` and the views and operator that memory comes from), and each sparse result with
    its readers (stages exchange strided tensors only), in one colour class, so
    that every solver keeps the program's order and ``pipe_split_module`` can split its plans; records the values a
    stage would send non-contiguous (``about.non_contiguous_reads``). A written parameter or
    buffer goes by its name in ``names`` (a tied tensor by its first name in the model)."""
    from placement.io.tarnawski import parse_instance
    from placement.torch.state import (activations as activations_of, in_place_groups, keep_written_buffers_together,
                                       non_contiguous_reads, received_writes)

    found = activations_of(program)
    readers, activations, views, sparse = in_place_groups(program, imported.graph, found)
    readers = {names.get(target, target): nodes for target, nodes in readers.items()}
    for field, pairs in (("in_place_writes", received_writes(program, imported.graph, found)),
                         ("non_contiguous_reads", non_contiguous_reads(program, imported.graph))):
        if pairs:
            about = {**imported.instance.get("about", {}), field: [list(pair) for pair in pairs]}
            imported = replace(imported, instance={**imported.instance, "about": about})
    if not readers and not activations and not views and not sparse:
        return imported
    instance = keep_written_buffers_together(imported.instance, imported.graph, readers, activations, views, sparse)
    return replace(imported, instance=instance, problem=parse_instance(instance, imported.problem.name))
