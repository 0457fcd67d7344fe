"""Operator graphs imported from a framework, coarsened to placement nodes, written as instances.

The importers (:mod:`placement.io.torch_export`, :mod:`placement.io.onnx_import`) turn a
model into an :class:`OpGraph`: its operators in program order, each with the FLOPs it
performs, the bytes it moves, its output tensors, the parameters it reads and the module
calls it belongs to. This module is framework-neutral: it holds those graphs and the
placement nodes that :mod:`placement.io.op_grouping` groups operators into, and applies
the roofline cost model (:mod:`placement.costmodel.roofline`).

Node quantities
---------------
For a node ``X`` (a set of operators): FLOPs and bytes moved are sums over its
operators; its time on a device is the sum of its operators' times (operators run one
after another), each its roofline time plus the device's per-kernel overhead times the
kernels it launches (:mod:`placement.costmodel.roofline`): a view (which includes every
no-op: a cast to the same type, dropout in evaluation or of probability 0) launches none, an einsum of three or
more operands one per product of two it runs, every other operator one; its parameter bytes count every
parameter it reads once. An edge ``X → Y`` exists when an operator of ``Y`` reads a tensor made in ``X`` (or
depends on ``X`` through a non-tensor value; such an edge carries 0 bytes); its size is the bytes of
the distinct tensors of ``X`` that ``Y`` reads. ``out_bytes(X)`` is the bytes of the
distinct tensors of ``X`` read by any other node, so the transfer cost is
``c(X) = out_bytes(X) / link bandwidth``.

Training
--------
Every forward node ``v`` gets a backward node ``grad(v)`` (id ``n + v`` for ``n`` forward
nodes, named ``<name>.grad``) with ``v``'s colour class. Per operator of kind ``k`` the
gradient work is ``BACKWARD_FACTOR[k]`` times its forward FLOPs and bytes:

=============================================  ======  ==================================
kind                                           factor  why
=============================================  ======  ==================================
matmul (linear, mm, bmm, matmul), conv          2       gradients for the input and the weight
einsum of three or more operands                below   its products' gradient GEMMs
LSTM, GRU, RNN                                  below   its gradient GEMMs through time
attention (scaled dot-product)                  2.5     five matmuls backward for two forward
norm (layer/batch/group norm), softmax          2       statistics recomputed, two passes
pointwise, reduction, pool, gather, copy,       1       one elementwise pass of the same size
unknown
view, constant                                  0       no data touched, nothing to differentiate
=============================================  ======  ==================================

Only the gradients autograd computes are charged (:func:`gradient_flow`). An operator's
floating-point output needs a gradient when the operator reads a trained parameter or an operand
that needs one: the output of another operator that does, or a model input that does
(``OpGraph.grad_inputs``: the example inputs with ``requires_grad=True``; none by default).
Outputs that are not floating-point (masks, indices), the outputs of constants (``zeros_like``
and the like, whatever they read) and of ``detach`` need none. Nor does an output from which no
result of the model is reached along such values: a trained layer read only through ``detach``,
or whose result nothing reads, computes no gradient (autograd frees its graph at the end of the
forward pass). An operator whose output needs
none (everything before the first trained parameter, such as a frozen backbone or an attention
mask's arithmetic) has no gradient work: factor 0, no kernel. A matmul or convolution computes
one GEMM per operand that needs a gradient, a trained weight (or a value computed from
parameters alone, such as ``W.t()``) counting as one operand, and a value given in both places
(``h @ h``) as two: factor 2
for a trained layer inside the network; 1 for a layer whose weights are frozen
(``requires_grad=False``, or buffers: its input gradient alone) and for the first trained layer,
whose input needs none (its weight gradient alone); at most 2. A trained bias is no operand:
its gradient, a small reduction, is not charged (a layer that trains its bias alone, its input
needing no gradient, has factor 0), but the layer's output needs a gradient. Nor is any other
term added to the product (``Op.added``: a bias sliced from a packed one or cast, ``addmm``'s
input): its gradient is the output's.

An einsum of three or more operands runs products of two, one after another
(:func:`placement.io.layer_gemms.einsum_contractions`), and autograd differentiates each: per
product, one product of its size (a GEMM, or a multiply where the product sums no index both
factors share) for each of its two factors that needs a gradient, a factor that is the product of
several operands needing one where any of them does (:func:`placement.io.layer_gemms.einsum_gradients`).
Its factor is their FLOPs over the forward's: ``ij,jk,kl->il`` on ``x [2, 3]``, whose gradient
is not needed, and trained ``W1 [3, 4]``, ``W2 [4, 5]`` runs ``x·W1`` (48 FLOPs) then ``(x·W1)·W2``
(80); backward one GEMM of the first (``W1``'s gradient) and two of the second, 208 FLOPs for 128
forward, 1.625 (one GEMM per operand, at most 2, charged 256).

A recurrent layer's gradient is its GEMMs (:func:`placement.io.layer_gemms.recurrent_gradients`):
where it trains its weights, one weight gradient per forward GEMM (input, recurrent and
projection), of the forward's size; wherever it runs backward, the hidden state's gradient
through time (the recurrent GEMM over ``T − 1`` steps: the first step's state is no value that
needs one; the projection's over all ``T``) and the input gradients of its second and later
layers; the first layer's input gradient where its input needs one; and where its initial
hidden state needs a gradient (a trained parameter, say), the recurrent GEMM of the first step
too, which counts as state gradient, not weight gradient. Its factor is their
FLOPs over the forward's (``T = 7``, an RNN of 20 on inputs of 12 whose input needs none:
10,080 + 16,800 for the weights and 14,400 for the state against 26,880 forward, 1.54).

A backward operator launches ``⌈factor⌉`` kernels (matmul and convolution one per GEMM: input
and weight gradients; attention 3: the fused backward's preprocessing, main and gradient
conversion kernels; normalisation and softmax 2; pointwise and the others 1; views and
constants none), but an einsum of three or more operands one per product of its gradient, each
paying the device's overhead.

Split backward: a matmul or convolution spends one GEMM of its gradient work (one kernel, the
forward's FLOPs and bytes) on the gradient of each operand that is a weight: a trained parameter,
or a value computed from parameters alone (a parameter read through a transpose or a cast,
``x @ W.t()``; the product of two parameters, ``A @ B``, has two). An operator whose output is
such a value spends all of its gradient work on weight gradient. An einsum of three or more operands
spends on it the products of its gradient for factors computed from parameters alone (one kernel each:
``W1``'s gradient of ``x·W1``, both gradients of ``W1·W2``; not that of ``x·W1`` in ``(x·W1)·W2``,
which is an activation's, as it would be in two matmuls). Every other operator's gradient
is activation gradient (bias and norm-scale gradients are small reductions, left there). A
backward node records that weight-gradient time as ``fpgaWeightLatency`` and
``cpuWeightLatency`` (:func:`weight_time_ms`), the W part of the split-backward model.

Edges that carry gradients are mirrored: ``u → v`` gives ``grad(v) → grad(u)``, whose size is
that of the tensors of ``u`` that need a gradient and that operators of ``v`` whose outputs need
one read (no edge where none does). ``v → grad(v)`` carries the activations ``v`` saves.
``c(grad(v))`` is the transfer time of the gradients of all of ``v``'s inputs from other nodes
(the sum of those sizes).

Operator shapes: on request (``operators=True``) every node also lists what its operators
compute, forward and backward, as GEMMs and vector operators
(:mod:`placement.io.operator_shapes`), in its ``"operators"`` field: the input of the
co-design (:mod:`placement.codesign.workload`).

Memory per node: inference, its parameter (and buffer) bytes; training, a forward node
holds its parameters and the activations it saves for its backward pass (the outputs of
its operators other than views and constants that need a gradient, one micro-batch), a
backward node holds the gradients of the trained parameters its operators compute one for (a
trained layer that runs no backward holds none). Optimiser state is not modelled.

Units: times in milliseconds, sizes in bytes, as in the published Tarnawski files. Every
time and transfer cost is rounded to the nearest multiple of the quantum
``q = 2^(⌈log₂ T⌉ − TIME_BITS)``, where ``T`` is the sum over nodes of the larger of the two
times plus twice the sum of the transfer costs (a bound on any load). The resolution, about
2^-26 of ``T`` (a load's total rounding error stays below ``n·q/2`` for ``n`` nodes), is far
below the accuracy of a roofline estimate, and it makes every time an integer multiple of one
binary unit with loads below 2^26 units, so that integer-scaled solvers solve the instance
exactly (CP-SAT, whose rows :mod:`placement.solvers.milp` keeps below 2^62 for every
coefficient times a variable bound: here at most 2^52).
``about.time_quantum_ms`` records ``q``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

from placement.costmodel.roofline import DeviceSpec, Platform, roofline_ms, transfer_ms
from placement.codesign.workload import Operator
from placement.io import layer_gemms
from placement.io.operator_shapes import backward as backward_shapes, flops as gemm_flops, to_json
from placement.io.tarnawski import parse_instance
from placement.problem.instance import Instance

#: Gradient work per operator kind, as a multiple of forward FLOPs and bytes (module docstring).
BACKWARD_FACTOR: dict[str, float] = {
    "matmul": 2.0, "conv": 2.0, "recurrent": 2.0, "attention": 2.5, "norm": 2.0, "softmax": 2.0,
    "pointwise": 1.0, "reduction": 1.0, "pool": 1.0, "gather": 1.0, "copy": 1.0, "unknown": 1.0,
    "view": 0.0, "constant": 0.0,
}
#: Operator kinds whose gradient splits into an input gradient and a weight gradient of equal work.
WEIGHT_GRADIENT_KINDS = frozenset({"matmul", "conv"})
#: Kinds whose outputs never carry a gradient (made from shapes and constants, not from values).
NO_GRADIENT_KINDS = frozenset({"constant"})
#: Kinds whose outputs are not new activations (they alias their input or are recomputable).
NO_ACTIVATION_KINDS = frozenset({"view", "constant"})
#: Kinds that launch no kernel (module docstring, "Node quantities").
NO_KERNEL_KINDS = frozenset({"view"})
#: Binary digits of resolution of times relative to their total (module docstring, "Units").
TIME_BITS = 26


def bytes_moved(kind: str, read_bytes: float, index_bytes: float, written: float) -> float:
    """Bytes an operator of ``kind`` moves: views none; gathers their indices (``index_bytes``),
    the rows they gather (the size of their output) and their output; constants their output;
    every other operator what it reads (``read_bytes``) plus what it writes."""
    if kind == "view":
        return 0.0
    if kind == "gather":
        return index_bytes + 2 * written
    if kind == "constant":
        return written
    return read_bytes + written


class CostModelWarning(UserWarning):
    """Operators the cost model has no FLOP formula for (they are costed by the bytes they move)."""


@dataclass(frozen=True)
class Param:
    """A parameter or buffer an operator reads: its qualified name, bytes, whether it is trained, and
    whether it is an operand of the operator's product (a matmul's or convolution's weight; not the
    bias added to it)."""

    name: str
    nbytes: float
    trainable: bool
    operand: bool = True


@dataclass(frozen=True)
class Op:
    """One operator of the program.

    ``inputs`` are the tensors it reads from other operators as ``(producer index, output
    index)``; an output index of ``-1`` is a dependency through a non-tensor value (a size,
    say), 0 bytes. ``model_inputs`` are the names of the model's tensor inputs it reads.
    ``floating`` says which outputs are floating-point or complex, the types that carry gradients
    (empty: all); ``differentiable`` is false for an operator whose output carries no gradient
    whatever it reads (``detach``).
    ``recurrent`` are a recurrent layer's gradient GEMMs in five parts (weights, hidden state through
    time, the first layer's input, the later layers' inputs, the initial state; module docstring,
    "Training"), and ``state`` the operands that are its initial hidden state: reads ``(producer,
    output)`` and names of parameters or model inputs. ``repeated`` are the operands it is given more
    than once (``h @ h``), once per repetition, named the same way. ``writes`` are the outputs of
    earlier operators it writes into in place ``(producer, output)``, directly or through views of
    them (``out[:, :k] = h``: the slice and ``out`` itself): a value written with one that needs a
    gradient needs one from then on. ``added`` are the reads and model inputs that a matmul or convolution
    adds to its product rather than multiplies (a bias sliced from a packed one, ``addmm``'s input), named as
    ``state`` is: no operand of a GEMM, whose gradient is the output's.
    ``contractions`` are an einsum's products of two operands where it has three or more operands
    (:func:`placement.io.layer_gemms.einsum_contractions`: each product's GEMM, whether it multiplies, and
    the positions of the operands its two factors are made of), and ``operands`` those operands in the
    equation's order, named as ``state`` is (``None``: a value that is none of these, which needs no gradient).
    ``dtype`` is the data type whose peak times its FLOPs (:func:`typed_integer_operators`: ``None`` as an
    importer writes an operator on integers or booleans alone).
    ``module_path`` are the qualified names of the module calls enclosing
    it, outermost first (the root module excluded); ``module_calls`` identify those calls
    (a module called twice has two call ids). ``operators`` are the GEMMs and vector
    operators it runs forward (:mod:`placement.io.operator_shapes`).
    """

    name: str
    target: str
    kind: str
    dtype: str | None
    flops: float
    bytes_moved: float
    outputs: tuple[float, ...]
    inputs: tuple[tuple[int, int], ...] = ()
    params: tuple[Param, ...] = ()
    module_path: tuple[str, ...] = ()
    module_calls: tuple[str, ...] = ()
    operators: tuple[Operator, ...] = ()
    model_inputs: tuple[str, ...] = ()
    floating: tuple[bool, ...] = ()
    differentiable: bool = True
    recurrent: tuple[tuple[Operator, ...], ...] = ()
    state: tuple[tuple[int, int] | str, ...] = ()
    repeated: tuple[tuple[int, int] | str, ...] = ()
    writes: tuple[tuple[int, int], ...] = ()
    added: tuple[tuple[int, int] | str, ...] = ()
    contractions: tuple[layer_gemms.Contraction, ...] = ()
    operands: tuple[tuple[int, int] | str | None, ...] = ()

    @property
    def out_bytes(self) -> float:
        return float(sum(self.outputs))

    @property
    def activation_bytes(self) -> float:
        return 0.0 if self.kind in NO_ACTIVATION_KINDS else self.out_bytes

    @property
    def kernels(self) -> int:
        """Kernels the operator launches forward: 0 for a view, one per product of an einsum of three or more
        operands (:attr:`contractions`), else 1."""
        if self.contractions:
            return len(self.contractions)
        return 0 if self.kind in NO_KERNEL_KINDS else 1

    def output_floating(self, k: int) -> bool:
        """Whether output ``k`` is a floating-point or complex tensor (only those carry gradients)."""
        return not self.floating or self.floating[k]

    def backward_factor(self, gradient: Gradient) -> float:
        """Its gradient work in forward units (module docstring, "Training"): none where nothing
        needs a gradient; an einsum of three or more operands the products of its gradient
        (:meth:`einsum_gradient`); a matmul or convolution one GEMM per operand that needs one (at most 2);
        every other kind ``BACKWARD_FACTOR[kind]``."""
        if not gradient.needed:
            return 0.0
        if self.contractions:
            return layer_gemms.einsum_flops(self.einsum_gradient(gradient)) / self.flops if self.flops > 0 else 0.0
        if self.kind in WEIGHT_GRADIENT_KINDS:
            return float(min(2, gradient.inputs + gradient.weights))
        if self.kind == "recurrent" and self.recurrent and self.flops > 0:
            return sum(map(gemm_flops, self.recurrent_gradient(gradient))) / self.flops
        return BACKWARD_FACTOR[self.kind]

    def recurrent_gradient(self, gradient: Gradient, weights_only: bool = False) -> tuple[Operator, ...]:
        """A recurrent layer's gradient GEMMs (module docstring, "Training"): the weight gradients where
        it trains its weights, the hidden state's and the later layers' input gradients wherever it
        runs backward, the first layer's input gradient where its input needs one, the initial
        state's where it needs one; the first part alone with ``weights_only``."""
        weights, state, first, later, initial = self.recurrent
        if not gradient.needed:
            return ()
        if weights_only:
            return weights if gradient.weights else ()
        return ((weights if gradient.weights else ()) + state + later + (first if gradient.inputs else ())
                + (initial if gradient.state else ()))

    def einsum_gradient(self, gradient: Gradient, weights_only: bool = False) -> list[tuple[layer_gemms.Gemm, bool]]:
        """The products of an einsum's gradient (module docstring, "Training";
        :func:`placement.io.layer_gemms.einsum_gradients`), each as its GEMM and whether it multiplies: for
        each of its products, one for each factor that needs a gradient; with ``weights_only``, those of the
        factors computed from parameters alone (all of them where its output is, ``weight_only``)."""
        if not gradient.needed or not self.contractions:
            return []
        return [(gemm, multiplies) for gemm, multiplies, weight in
                layer_gemms.einsum_gradients(self.contractions, gradient.operands)
                if weight or gradient.weight_only or not weights_only]

    def backward_kernels(self, gradient: Gradient) -> int:
        """Kernels of its gradient: one per product of an einsum's (:meth:`einsum_gradient`), else
        ``⌈backward_factor⌉``."""
        if self.contractions:
            return len(self.backward_operators(gradient))
        return math.ceil(self.backward_factor(gradient))

    def weight_kernels(self, gradient: Gradient) -> int:
        """Kernels of the weight-gradient part of its gradient: one per product of an einsum's that computes a
        weight gradient, else ``⌈weight_factor⌉``."""
        if self.contractions:
            return len(layer_gemms.einsum_operators(self.einsum_gradient(gradient, weights_only=True)))
        return math.ceil(self.weight_factor(gradient))

    def backward_flops(self, gradient: Gradient) -> float:
        """:meth:`backward_factor` times its forward FLOPs; for an einsum's or a recurrent layer's gradient
        products, their sum itself (the factor, their sum over the forward's, times the forward's need not
        give it back to the last digit: 126 / 90 · 90 is 125.99999999999999)."""
        if gradient.needed and self.flops > 0:
            if self.contractions:
                return float(layer_gemms.einsum_flops(self.einsum_gradient(gradient)))
            if self.kind == "recurrent" and self.recurrent:
                return float(sum(map(gemm_flops, self.recurrent_gradient(gradient))))
        return self.backward_factor(gradient) * self.flops

    def backward_bytes(self, gradient: Gradient) -> float:
        return self.backward_factor(gradient) * self.bytes_moved

    def backward_operators(self, gradient: Gradient) -> tuple[Operator, ...]:
        """The operators of its gradient (:func:`placement.io.operator_shapes.backward`)."""
        if not gradient.needed:
            return ()
        if self.kind == "recurrent" and self.recurrent:
            return self.recurrent_gradient(gradient)
        if self.contractions:
            return layer_gemms.einsum_operators(self.einsum_gradient(gradient))
        if self.kind not in WEIGHT_GRADIENT_KINDS:
            return backward_shapes(self.kind, self.operators)
        # a GEMM per operand that needs a gradient, the weight taken as the product's second operand
        # (an activation's gradient as the first) where only one of the two needs one
        return backward_shapes(self.kind, self.operators, weights=gradient.weights >= 1 or gradient.inputs >= 2,
                               inputs=gradient.inputs >= 1 or gradient.weights >= 2)

    def weight_factor(self, gradient: Gradient) -> float:
        """The part of :meth:`backward_factor` spent on weight gradients (module docstring, "Split
        backward"): all of it for an operator whose output is computed from parameters alone; for an einsum
        of three or more operands the products of its gradient for factors computed from parameters alone; for a
        matmul or convolution one GEMM per weight operand; none otherwise."""
        if gradient.weight_only:
            return self.backward_factor(gradient)
        if self.contractions:
            weights = self.einsum_gradient(gradient, weights_only=True)
            return layer_gemms.einsum_flops(weights) / self.flops if self.flops > 0 else 0.0
        if self.kind in WEIGHT_GRADIENT_KINDS:
            return float(min(2, gradient.weights))
        if self.kind == "recurrent" and self.recurrent and self.flops > 0:
            return sum(map(gemm_flops, self.recurrent_gradient(gradient, weights_only=True))) / self.flops
        return 0.0


@dataclass(frozen=True)
class Gradient:
    """What the backward pass computes for one operator (:func:`gradient_flow`): ``inputs``, how many
    of its activation operands (outputs of other operators, model inputs) need a gradient;
    ``weights``, how many of its operands are weights that need one: trained parameters, or values
    computed from parameters alone (``W.t()``); ``bias``, a trained parameter added to its product
    (a matmul's or convolution's bias); ``weight_only``, whether its output is computed from
    parameters alone, so that all of its gradient is weight gradient; ``state``, whether a recurrent
    layer's initial hidden state needs one (a trained parameter, say); ``operands``, for an einsum of
    three or more operands (``Op.operands``), per operand whether it needs a gradient and whether it is
    computed from parameters alone."""

    inputs: int
    weights: int
    bias: bool = False
    weight_only: bool = False
    state: bool = False
    operands: tuple[tuple[bool, bool], ...] = ()

    @property
    def needed(self) -> bool:
        """Whether its output needs a gradient, so that autograd runs its backward."""
        return self.inputs > 0 or bool(self.weights) or self.bias or self.state


def gradient_flow(graph: OpGraph) -> tuple[Gradient, ...]:
    """Per operator of ``graph`` (program order), the gradients autograd computes for it: an output
    needs a gradient when it is floating-point and the operator reads a trained parameter or an
    operand that needs one (module docstring, "Training")."""
    return _flow(graph)[0]


def gradient_values(graph: OpGraph) -> dict[str, tuple[bool, ...]]:
    """Which values of ``graph`` need a gradient: per operator (by name) one flag per output, per model
    input (by name) one flag (module docstring, "Training")."""
    return _values(graph, _flow(graph)[1])


def _values(graph: OpGraph, needs: list[tuple[bool, ...]]) -> dict[str, tuple[bool, ...]]:
    """:func:`gradient_values` from the flags ``needs`` of :func:`_flow`."""
    values = {name: (name in graph.grad_inputs,) for name in graph.inputs}
    values.update((op.name, needs[i]) for i, op in enumerate(graph.ops))
    return values


def _flow(graph: OpGraph) -> tuple[tuple[Gradient, ...], list[tuple[bool, ...]]]:
    """:func:`gradient_flow`, and per operator which of its outputs need a gradient."""
    needs: list[tuple[bool, ...]] = []
    grad_inputs = set(graph.grad_inputs)
    flow = []
    # data_free[i]: operator i reads no model input, directly or through the tensors it reads (its
    # outputs are computed from parameters and constants alone)
    data_free: list[bool] = []
    for op in graph.ops:
        tensors = [(producer, k) for producer, k in op.inputs if k >= 0]
        data_free.append(not op.model_inputs and all(data_free[producer] for producer, _ in tensors))
        if op.differentiable and op.kind not in NO_GRADIENT_KINDS and any(map(op.output_floating,
                                                                              range(len(op.outputs)))):
            state = set(op.state)    # a recurrent layer's initial state: its own part of the gradient
            added = set(op.added)    # a term added to a product: no operand of its GEMMs
            needing = [read for read in tensors if needs[read[0]][read[1]]]
            operands = [read for read in needing if read not in state and read not in added]
            weights = (sum(1 for p in op.params if p.trainable and p.operand and p.name not in state)
                       + sum(1 for read in operands if data_free[read[0]]))
            activations = (sum(1 for read in operands if not data_free[read[0]])
                           + sum(1 for name in op.model_inputs if name in grad_inputs and name not in state
                                 and name not in added))
            trained = {p.name for p in op.params if p.trainable and p.operand}
            for again in op.repeated:   # an operand in two places has a gradient through each
                if isinstance(again, tuple):
                    if needs[again[0]][again[1]] and again not in state:
                        weights += data_free[again[0]]
                        activations += not data_free[again[0]]
                else:
                    weights += again in trained and again not in state
                    activations += again in grad_inputs and again in op.model_inputs and again not in state
            initial = (any(p.trainable and p.name in state for p in op.params)
                       or any(read in state for read in needing)
                       or any(name in grad_inputs and name in state for name in op.model_inputs))
            bias = (any(p.trainable and not p.operand for p in op.params) or any(read in added for read in needing)
                    or any(name in grad_inputs and name in added for name in op.model_inputs))
            gradient = Gradient(activations, weights, bias, state=initial,
                                operands=_einsum_operands(op, needs, data_free, grad_inputs))
            if gradient.needed and data_free[-1]:
                gradient = replace(gradient, weight_only=True)
        else:
            gradient = Gradient(0, False)
        flow.append(gradient)
        needs.append(tuple(gradient.needed and op.output_floating(k) for k in range(len(op.outputs))))
        for producer, k in op.writes:   # what it writes into in place carries its data and gradient on
            data_free[producer] = data_free[producer] and data_free[-1]
            if gradient.needed and graph.ops[producer].output_floating(k) and not needs[producer][k]:
                needs[producer] = tuple(x or j == k for j, x in enumerate(needs[producer]))
    return tuple(_reaching(graph, flow, needs)), needs


def _einsum_operands(op: Op, needs: list[tuple[bool, ...]], data_free: list[bool], grad_inputs: set[str]
                     ) -> tuple[tuple[bool, bool], ...]:
    """Per operand of an einsum of three or more operands (``Op.operands``), whether it needs a gradient
    and whether it is computed from parameters alone: an operator's output as :func:`_flow` found it, a
    parameter where it is trained (and computed from parameters alone, as a buffer is), a model input where
    it is one of ``grad_inputs`` (and not computed from parameters); ``()`` for any other operator."""
    if not op.operands:
        return ()
    trained = {p.name: p.trainable for p in op.params}
    found: list[tuple[bool, bool]] = []
    for operand in op.operands:
        if isinstance(operand, tuple):
            found.append((needs[operand[0]][operand[1]], data_free[operand[0]]))
        elif operand is not None and operand in op.model_inputs and operand not in trained:
            found.append((operand in grad_inputs, False))
        else:
            found.append((trained.get(operand, False) if operand is not None else False, True))
    return tuple(found)


def backward_values(graph: OpGraph) -> dict[str, tuple[bool, ...]]:
    """Which values of ``graph`` get a gradient in the backward pass, as :func:`gradient_values` gives
    those that need one: of the values that need one, those an operator reads whose gradient reaches the
    model's results, and those of the operators the model returns (a value read only through ``detach``,
    or by ``argmax``, needs a gradient but gets none). Model inputs as :func:`gradient_values` gives them;
    all values that need a gradient where the graph does not record its outputs."""
    flow, needs = _flow(graph)
    values = _values(graph, needs)
    if not graph.outputs:
        return values
    reaches, readers = _reaches(graph, flow, needs)
    returned = set(graph.outputs)
    for i, op in enumerate(graph.ops):
        values[op.name] = tuple(need and (i in returned or any(reaches[j] for j, read in readers[i] if read == k))
                                for k, need in enumerate(needs[i]))
    return values


def _reaching(graph: OpGraph, flow: list[Gradient], needs: list[tuple[bool, ...]]) -> list[Gradient]:
    """``flow`` without the gradients no loss can ask for: an operator whose results do not reach the
    model's results (``graph.outputs``), along tensors that carry a gradient to an operator that
    computes one, is never run backward (module docstring, "Training"); nor is one whose result
    nothing reads and the model does not return. Unchanged where the graph does not record its
    outputs."""
    if not graph.outputs:
        return flow
    reaches = _reaches(graph, flow, needs)[0]
    return [gradient if reaches[i] else Gradient(0, False) for i, gradient in enumerate(flow)]


def _reaches(graph: OpGraph, flow: list[Gradient],
             needs: list[tuple[bool, ...]]) -> tuple[list[bool], list[list[tuple[int, int]]]]:
    """Per operator, whether its gradient reaches the model's results (:func:`_reaching`), and per operator
    its readers, as (reader, output read): those of a value written in place read the writer's output 0."""
    readers: list[list[tuple[int, int]]] = [[] for _ in graph.ops]
    for j, op in enumerate(graph.ops):
        for producer, k in op.inputs:
            if k >= 0:
                readers[producer].append((j, k))
    for i, op in enumerate(graph.ops):   # a write in place reaches where a later reader of its value does
        for producer, k in op.writes:
            readers[i].extend((j, 0) for j, read in readers[producer] if j > i and read == k)
    returned = set(graph.outputs)
    reaches = [False] * len(graph.ops)
    for i in range(len(graph.ops) - 1, -1, -1):
        if flow[i].needed:
            reaches[i] = i in returned or any(reaches[j] and needs[i][k] for j, k in readers[i])
    return reaches, readers


@dataclass(frozen=True)
class OpGraph:
    """A model's operators in program order (a topological order); ``unknown`` lists the
    operators the cost model has no FLOP formula for (costed by bytes moved only); ``aliases``,
    the groups of module names that name one module object (a module registered under several
    names: its calls under any of them are calls of one module; for an ONNX import, the scopes
    the file shows to be calls of one module); ``inputs``, the names of the
    model's tensor inputs, in order; ``grad_inputs``, those that need a gradient; ``outputs``, the
    operators whose results the model returns (empty: not recorded); ``returned_inputs``, the model's
    inputs it returns as they came in; ``scalar_outputs``, those of ``outputs`` whose returned value is
    0-dimensional (a loss); ``merged``, the trained parameters several operators read by one name
    that the source cannot show to be one parameter (an ONNX exporter merges initializers of equal values, a new
    LayerNorm's ones, into one name): they are not counted as shared."""

    ops: tuple[Op, ...]
    name: str
    source: str
    unknown: tuple[str, ...] = ()
    aliases: tuple[tuple[str, ...], ...] = ()
    inputs: tuple[str, ...] = ()
    grad_inputs: tuple[str, ...] = ()
    outputs: tuple[int, ...] = ()
    returned_inputs: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()
    scalar_outputs: tuple[int, ...] = ()

    @property
    def total_flops(self) -> float:
        return float(sum(op.flops for op in self.ops))


def typed_integer_operators(ops: Iterable[Op]) -> tuple[Op, ...]:
    """``ops`` with each operator on integers or booleans alone (``dtype`` ``None``: positions, index
    arithmetic) timed in the data type of the first operator on floating-point numbers, ``fp32`` where there
    is none: no catalogue gives integer peaks, and so such an operator asks a device for no peak that the
    model's floating-point operators do not (a device with bf16 peaks alone runs a bf16 model's positions)."""
    ops = tuple(ops)
    floating = next((op.dtype for op in ops if op.dtype is not None), "fp32")
    return tuple(op if op.dtype is not None else replace(op, dtype=floating) for op in ops)


@dataclass(frozen=True)
class GraphNode:
    """A placement node: a run of operators. ``starts`` are the modules, called once in the
    program, whose call begins at this node's first operator (outermost first); ``repeats``, those
    called more than once whose call begins there, each by the name it is first called by; ``inner``, those
    called once whose call begins at a later operator of the node (a node of a module cut to a few levels
    holds its submodules' calls)."""

    name: str
    module: str
    ops: tuple[int, ...]
    starts: tuple[str, ...] = ()
    repeats: tuple[str, ...] = ()
    inner: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlacementGraph:
    """Operators grouped into nodes, with node edges ``(src, dst, bytes)`` and per-node ``out_bytes``;
    ``edge_tensors[e]`` are the tensors ``(operator, output)`` edge ``e`` carries."""

    graph: OpGraph
    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[int, int, float], ...]
    out_bytes: tuple[float, ...]
    granularity: str
    module_depth: int | None = None
    edge_tensors: tuple[tuple[tuple[int, int], ...], ...] = ()

    @cached_property
    def gradients(self) -> tuple[Gradient, ...]:
        """Per operator, the gradients autograd computes for it (:func:`gradient_flow`)."""
        return gradient_flow(self.graph)

    def node_ops(self, v: int) -> list[Op]:
        return [self.graph.ops[i] for i in self.nodes[v].ops]

    def node_gradients(self, v: int) -> list[tuple[Op, Gradient]]:
        """Node ``v``'s operators, each with its :class:`Gradient`."""
        return [(self.graph.ops[i], self.gradients[i]) for i in self.nodes[v].ops]

    def gradient_bytes(self, e: int) -> float:
        """Bytes of the gradients that flow back along edge ``e``: its tensors that need one and that an
        operator of the edge's head reads whose output needs one (an operator autograd runs backward)."""
        needed = self.gradients
        ops = self.graph.ops
        read = {t for j in self.nodes[self.edges[e][1]].ops if needed[j].needed for t in ops[j].inputs}
        return float(sum(ops[i].outputs[k] for i, k in self.edge_tensors[e]
                         if (i, k) in read and needed[i].needed and ops[i].output_floating(k)))

    def flops(self, v: int) -> float:
        return float(sum(op.flops for op in self.node_ops(v)))

    def bytes_moved(self, v: int) -> float:
        return float(sum(op.bytes_moved for op in self.node_ops(v)))

    def param_sizes(self, v: int) -> dict[str, float]:
        """The distinct parameters (and buffers) the node reads, by name, with their bytes."""
        return {p.name: p.nbytes for op in self.node_ops(v) for p in op.params}

    def param_bytes(self, v: int) -> float:
        """Bytes of the distinct parameters (and buffers) the node reads."""
        return float(sum(self.param_sizes(v).values()))

    def gradient_param_sizes(self, v: int) -> dict[str, float]:
        """The distinct trained parameters the node's operators compute a gradient for (those read by an
        operator that runs backward: :func:`gradient_flow`), by name, with their bytes."""
        return {p.name: p.nbytes for op, gradient in self.node_gradients(v) if gradient.needed
                for p in op.params if p.trainable}

    def gradient_param_bytes(self, v: int) -> float:
        """Bytes of the distinct trained parameters the node's operators compute a gradient for."""
        return float(sum(self.gradient_param_sizes(v).values()))

    def model_inputs(self, v: int) -> list[str]:
        """The model's inputs the node's operators read, in the model's order."""
        read = {name for op in self.node_ops(v) for name in op.model_inputs}
        return [name for name in self.graph.inputs if name in read]

    def activation_bytes(self, v: int) -> float:
        """Bytes the node saves for its backward pass: the activations of its operators whose
        outputs need a gradient."""
        return float(sum(op.activation_bytes for op, gradient in self.node_gradients(v) if gradient.needed))

    def operators(self, v: int, backward: bool = False) -> list[dict]:
        """The operators node ``v`` (or its backward node) runs, in the model-file format of
        :mod:`placement.codesign.workload`."""
        return [to_json(s) for op, gradient in self.node_gradients(v)
                for s in (op.backward_operators(gradient) if backward else op.operators)]


def node_time_ms(pg: PlacementGraph, v: int, device: DeviceSpec, backward: bool = False) -> float:
    """Time of node ``v`` (or of its backward node) on ``device``: the sum of its operators' times,
    roofline plus per-kernel overhead."""
    total = 0.0
    for op, gradient in pg.node_gradients(v):
        if backward:
            total += roofline_ms(op.backward_flops(gradient), op.backward_bytes(gradient), device, op.dtype,
                                 op.backward_kernels(gradient))
        else:
            total += roofline_ms(op.flops, op.bytes_moved, device, op.dtype, op.kernels)
    return total


def weight_time_ms(pg: PlacementGraph, v: int, device: DeviceSpec) -> float:
    """The weight-gradient part of node ``v``'s backward time on ``device`` (module docstring, "Split
    backward"): one kernel of its forward FLOPs and bytes for each weight operand of a matmul or
    convolution, the products of an einsum's gradient for factors computed from parameters alone (one kernel
    each), and the whole gradient of an operator whose output is computed from parameters alone."""
    return sum(roofline_ms(share * op.flops, share * op.bytes_moved, device, op.dtype, op.weight_kernels(gradient))
               for op, gradient in pg.node_gradients(v) if (share := op.weight_factor(gradient)))


def unused_costed(device: DeviceSpec, count: int, dtypes: set[str]) -> DeviceSpec:
    """``device`` as the instance costs it: itself, or, where the platform has none of it (``count``
    0) and it has no peak for some of ``dtypes``, with those data types at its largest peak (its
    times are then never used, unless a solve adds such devices, and the data type is no reason
    to refuse the platform)."""
    missing = sorted(d for d in dtypes if d not in dict(device.peak_flops))
    if count or not missing or not device.peak_flops:
        return device
    top = max(value for _, value in device.peak_flops)
    return replace(device, peak_flops=device.peak_flops + tuple((d, top) for d in missing))


def gradient_free_reads(pg: PlacementGraph) -> list[tuple[int, ...]]:
    """Per floating-point value that two or more nodes other than the one making it read, where one of
    them reads it with no gradient flowing back (a value that needs none, as rotary tables or a mask
    computed from buffers and positions; or one read through ``detach`` or ``argmax`` beside a read that
    trains): that node, then the readers. torch's ``pipeline()`` marks every floating-point value a training
    stage sends as needing a gradient, and refuses one sent to two later stages
    (:func:`placement.io.exporters.require_neighbour_reads`); a value whose reads all carry its gradient is
    refused there as a skip connection, along the gradient edge to the farther stage."""
    needs = gradient_values(pg.graph)
    ops = pg.graph.ops
    readers: dict[tuple[int, int], tuple[int, set[int], list[bool]]] = {}
    for e, (a, b, _) in enumerate(pg.edges):
        # the tensors that an operator of b reads to compute an output that needs a gradient
        trained = {t for j in pg.nodes[b].ops if pg.gradients[j].needed for t in ops[j].inputs}
        for i, k in pg.edge_tensors[e]:
            if ops[i].output_floating(k):
                _, read, free = readers.setdefault((i, k), (a, set(), [False]))
                read.add(b)
                free[0] = free[0] or not needs[ops[i].name][k] or (i, k) not in trained
    return sorted({(a, *sorted(read)) for a, read, free in readers.values() if len(read) > 1 and free[0]})


def shared_parameters(pg: PlacementGraph, names: Mapping[str, str] | None = None) -> dict[str, tuple[int, ...]]:
    """Trained parameters read by two or more forward nodes of ``pg``, with those nodes (ascending), but those
    the graph cannot show to be one (:attr:`OpGraph.merged`); ``names`` renames the graph's parameter names
    (aliases of one tensor to one name)."""
    merged = set(pg.graph.merged)
    return parameter_readers(pg, lambda p: p.trainable and p.name not in merged, names)


def parameter_readers(pg: PlacementGraph, chosen: Callable[[Param], bool],
                      names: Mapping[str, str] | None = None) -> dict[str, tuple[int, ...]]:
    """The parameters and buffers ``chosen`` picks that two or more forward nodes of ``pg`` read, by
    name (in order), with those nodes (ascending); ``names`` renames the graph's names."""
    names = names or {}
    readers: dict[str, list[int]] = {}
    for v in range(len(pg.nodes)):
        for name in dict.fromkeys(names.get(p.name, p.name) for op in pg.node_ops(v) for p in op.params
                                  if chosen(p)):
            readers.setdefault(name, []).append(v)
    return {name: tuple(nodes) for name, nodes in sorted(readers.items()) if len(nodes) >= 2}


def other_modules(pg: PlacementGraph) -> list[str]:
    """The modules the program calls (in the order of its operators) that no node belongs to, nor a node's module
    lies in by name (``h.4`` for ``h.4.ln_1``): a module whose forward only calls a module it was passed, or one
    below the level a module path is cut to. An instance records them, so that a module name a node lists where
    its call begins (``starts``) is one of the model's (:func:`placement.io.exporters.layout_from_instance`)."""
    from placement.io.exporters import named_modules

    named = named_modules(node.module for node in pg.nodes)
    return list(dict.fromkeys(fqn for op in pg.graph.ops for fqn in op.module_path if fqn not in named))


def to_instance(pg: PlacementGraph, platform: Platform, training: bool = False, operators: bool = False,
                parameter_names: Mapping[str, str] | None = None) -> dict:
    """The placement graph as a Tarnawski instance (times in ms, sizes in bytes), with metadata.

    Besides the fields of the format, each node records ``module``, ``starts``,
    ``flops``, ``bytes`` (moved) and ``ops`` (the program's operator names), which the
    exporters of :mod:`placement.io.exporters` read; backward nodes record their
    ``forward`` mate; with ``operators``, every node also records its ``operators``
    (:meth:`PlacementGraph.operators`). ``about`` records the source, the granularity,
    the devices, the data types whose peaks the times use (``dtypes``: after a ``dtype`` override, that type;
    :func:`typed_integer_operators` types the operators on integers), the model's inputs (``inputs``; each node
    lists those it reads), the nodes whose values the model returns (``outputs``, where the graph records them)
    and, for training,
    the trained parameters several nodes read (``shared_parameters``, :func:`shared_parameters`) and the
    floating-point values that several nodes read, one of them with no gradient (``gradient_free_reads``,
    :func:`gradient_free_reads`), and the modules called that no node's name attests (``other_modules``,
    :func:`other_modules`, where there are any).
    A node also records ``repeats`` (:attr:`GraphNode.repeats`) where it has any: the modules called more
    than once whose call it begins (a second call of a module is no place a ``split_spec`` can name; an ONNX
    file's module scopes are names, and a scope such as ``shared_1`` may be a module's second call), and
    ``inner`` (:attr:`GraphNode.inner`) where it has any: the modules called once whose call begins inside it.
    Readers of the format ignore these fields.
    """
    dtypes = {op.dtype for op in pg.graph.ops if op.flops}
    accelerator = unused_costed(platform.accelerator, platform.accelerators, dtypes)
    cpu = unused_costed(platform.cpu, platform.cpus, dtypes)
    bandwidth = platform.link_bandwidth
    n = len(pg.nodes)
    grad_edges = [(a, b, pg.gradient_bytes(e)) for e, (a, b, _) in enumerate(pg.edges)] if training else []
    grad_edges = [(a, b, size) for a, b, size in grad_edges if size > 0]
    in_grad_bytes = [0.0] * n
    for a, b, size in grad_edges:
        in_grad_bytes[b] += size
    nodes = []
    for v, node in enumerate(pg.nodes):
        entry = {
            "id": v,
            "name": node.name,
            "supportedOnFpga": True,
            "cpuLatency": node_time_ms(pg, v, cpu),
            "fpgaLatency": node_time_ms(pg, v, accelerator),
            "isBackwardNode": False,
            "size": pg.param_bytes(v) + (pg.activation_bytes(v) if training else 0.0),
            "module": node.module,
            "starts": list(node.starts),
            "flops": pg.flops(v),
            "bytes": pg.bytes_moved(v),
            "ops": [pg.graph.ops[i].name for i in node.ops],
        }
        read = pg.model_inputs(v)
        if read:
            entry["inputs"] = read
        if node.repeats:
            entry["repeats"] = list(node.repeats)
        if node.inner:
            entry["inner"] = list(node.inner)
        if operators:
            entry["operators"] = pg.operators(v)
        if training:
            entry["colorClass"] = v
        nodes.append(entry)
    cost = [transfer_ms(pg.out_bytes[v], bandwidth) for v in range(n)]
    edges = [{"sourceId": a, "destId": b, "cost": cost[a], "size": size} for a, b, size in pg.edges]
    if training:
        for v, node in enumerate(pg.nodes):
            ops = pg.node_gradients(v)
            nodes.append({
                "id": n + v,
                "name": node.name + ".grad",
                "supportedOnFpga": True,
                "cpuLatency": node_time_ms(pg, v, cpu, backward=True),
                "fpgaLatency": node_time_ms(pg, v, accelerator, backward=True),
                "cpuWeightLatency": weight_time_ms(pg, v, cpu),
                "fpgaWeightLatency": weight_time_ms(pg, v, accelerator),
                "isBackwardNode": True,
                "colorClass": v,
                "size": pg.gradient_param_bytes(v),
                "forward": v,
                "flops": float(sum(op.backward_flops(gradient) for op, gradient in ops)),
                "bytes": float(sum(op.backward_bytes(gradient) for op, gradient in ops)),
                **({"operators": pg.operators(v, backward=True)} if operators else {}),
            })
        grad_cost = [transfer_ms(in_grad_bytes[v], bandwidth) for v in range(n)]
        edges += [{"sourceId": n + b, "destId": n + a, "cost": grad_cost[b], "size": size} for a, b, size in grad_edges]
        edges += [{"sourceId": v, "destId": n + v, "cost": cost[v], "size": pg.activation_bytes(v)} for v in range(n)]
    quantum = _quantise(nodes, edges)
    shared = ({name: list(readers) for name, readers in shared_parameters(pg, parameter_names).items()}
              if training else None)
    free = gradient_free_reads(pg) if training else []
    returned = set(pg.graph.outputs)
    scalar = set(pg.graph.scalar_outputs)
    other = other_modules(pg)
    return {
        "about": {
            "model": pg.graph.name,
            "generator": "placement.io." + ("torch_export" if pg.graph.source == "torch.export" else "onnx_import"),
            "source": pg.graph.source,
            "granularity": pg.granularity,
            "module_depth": pg.module_depth,
            "training": training,
            "accelerator": {"id": accelerator.id, "model": accelerator.model,
                            "op_overhead_s": accelerator.op_overhead},
            "cpu": {"id": cpu.id, "model": cpu.model, "op_overhead_s": cpu.op_overhead},
            "dtypes": sorted(dtypes),
            "link": platform.link if platform.link is not None else accelerator.default_link,
            "link_bytes_per_s": bandwidth,
            "forward_flops": pg.graph.total_flops,
            "unknown_operators": list(pg.graph.unknown),
            "inputs": list(pg.graph.inputs),
            **({"outputs": [v for v, node in enumerate(pg.nodes) if returned.intersection(node.ops)]}
               if returned else {}),
            **({"returned_inputs": list(pg.graph.returned_inputs)} if pg.graph.returned_inputs else {}),
            **({"scalar_outputs": [v for v, node in enumerate(pg.nodes) if scalar.intersection(node.ops)]}
               if scalar else {}),
            **({"shared_parameters": shared} if shared else {}),
            **({"gradient_free_reads": [list(r) for r in free]} if free else {}),
            **({"other_modules": other} if other else {}),
            "units": {"time": "ms", "size": "bytes"},
            "time_quantum_ms": quantum,
        },
        "maxSizePerFPGA": float(platform.accelerator_memory),
        "maxFPGAs": platform.accelerators,
        "maxCPUs": platform.cpus,
        "nodes": nodes,
        "edges": edges,
    }


def _quantise(nodes: list[dict], edges: list[dict]) -> float:
    """Round times and costs in place to multiples of the quantum of the module docstring; return it."""
    costs = {e["sourceId"]: e["cost"] for e in edges}
    total = sum(max(n["cpuLatency"], n["fpgaLatency"]) for n in nodes) + 2 * sum(costs.values())
    if total <= 0 or not math.isfinite(total):   # an infinite time (a device too slow for the float range) is
        return 1.0                               # refused, named, where the instance is read
    quantum = 2.0 ** (math.ceil(math.log2(total)) - TIME_BITS)
    for n in nodes:
        for key in ("cpuLatency", "fpgaLatency", "cpuWeightLatency", "fpgaWeightLatency"):
            if key in n:   # rounding is monotone: a weight part stays within its node's time
                n[key] = quantum * round(n[key] / quantum)
    for e in edges:
        e["cost"] = quantum * round(e["cost"] / quantum)
    return quantum


@dataclass(frozen=True)
class ImportedModel:
    """An imported model: its placement graph, the instance (JSON-ready dict), the validated
    problem, and what it was read from (a ``torch.export.ExportedProgram``, an ONNX model)."""

    graph: PlacementGraph
    instance: dict
    problem: Instance
    source: Any = None


def check_options(platform: Any, training: Any, operators: Any) -> tuple[bool, bool]:
    """``training`` and ``operators`` as bools where ``platform`` is a :class:`Platform` and both are flags; an
    :class:`~placement.errors.InvalidParameterError` naming the parameter otherwise (read by its truth, a
    ``training`` of ``"no"`` would make a training graph)."""
    from placement.errors import InvalidParameterError
    from placement.parameters import flag

    if not isinstance(platform, Platform):
        raise InvalidParameterError("platform", "must be a Platform (placement.costmodel.roofline.make_platform), "
                                                f"not {type(platform).__name__}")
    return flag("training", training), flag("operators", operators)


def build(pg: PlacementGraph, platform: Platform, training: bool = False, name: str | None = None,
          source: Any = None, operators: bool = False, parameter_names: Mapping[str, str] | None = None
          ) -> ImportedModel:
    """Cost ``pg`` on ``platform`` and validate the result as a :class:`Instance` (``operators``:
    record every node's operator shapes; ``parameter_names``: the name a shared parameter is recorded
    by, for each of the graph's names; :func:`to_instance`)."""
    from placement.errors import InvalidInstanceError
    from placement.io.time_faults import figures_at_fault
    from placement.problem.instance import NodeFitsNoDeviceError

    training, operators = check_options(platform, training, operators)
    instance = to_instance(pg, platform, training, operators, parameter_names)
    label = name if name is not None else pg.graph.name + ("-training" if training else "-inference")
    try:
        problem = parse_instance(instance, label)
    except InvalidInstanceError as exc:   # the times and costs are the catalogue's devices' (a peak too low, ...)
        # a node too large for every device's memory (its name may hold these words) is no fault of the peaks
        peaks = not isinstance(exc, NodeFitsNoDeviceError)
        if not peaks or not any(word in str(exc) for word in ("Latency", "cost", "time")):
            raise
        raise InvalidInstanceError(f"{exc} ({figures_at_fault(str(exc), pg.graph, platform)})") from None
    return ImportedModel(pg, instance, problem, source)
