"""ONNX nodes grouped into the kernels PyTorch runs for them.

An exporter writes one PyTorch operator as several ONNX nodes where ONNX has no single
operator for it; costing those nodes one by one would charge bytes and kernel launches
that PyTorch never spends. :func:`fuse` groups the nodes of a graph (in order, constants
removed) so that each group is one operator of :mod:`placement.io.onnx_import`:

* **Epilogue**: an ``Add`` or ``Mul`` whose other operand is a parameter (an initializer
  or a constant) of one axis (at most one dimension above 1: a bias, a per-channel scale),
  or a view of parameters of one axis (a part of a packed bias that a ``Split`` makes), that axis
  the one the kernel's bias runs along (:func:`_along_bias_axis`: a matmul's last, a convolution's channels),
  joins the matmul, convolution or normalisation whose result it reads, through views,
  as PyTorch's kernels take them: one ``Add`` after a matmul or convolution (its bias),
  a ``Mul`` and then an ``Add`` after a normalisation (its affine weight and bias).
  ``MatMul`` + ``Add(bias)`` is torch's ``linear`` on a tensor of rank 3 or more,
  ``InstanceNormalization`` + ``Reshape`` + ``Mul(weight)`` + ``Add(bias)`` is
  ``group_norm``: one kernel each, the bias read and the result written once. A position
  embedding added after a linear layer, or a scale after its bias, is a kernel of its own, and
  so is an ``Add`` after a ``Gemm`` or convolution that adds its own bias, or a ``Mul`` or ``Add``
  after a normalisation with its own scale or bias (:data:`OWN_EPILOGUES`), or one whose
  operand broadcasts the result to more elements than the kernel writes.
* **Attention**: ``MatMul(q, k)`` → optional ``Add``/``Mul``/``Div``/``Where`` (mask,
  scale) → ``Softmax`` (along the last axis, the keys') → optional ``Dropout``/``Cast`` →
  ``MatMul(·, v)``, with a ``Mul`` or ``Div`` by a parameter on either operand of the first ``MatMul`` (the scale), is
  ``scaled_dot_product_attention``, which runs fused: the score matrix is never written.
  A mask the exporter computes from constants alone (of one element, or integers: no trained
  tensor, no model input) for such a pattern, added or selected (``is_causal=True``
  written as ``Expand``, ``Trilu``, ``Equal`` and ``Where`` on constants, where ONNX has no
  causal attention) joins it too: PyTorch's kernel makes that mask itself, and reads none. (A
  mask the model computes from constants itself, ``ones(n, n).tril()``, is read the same way:
  ONNX cannot tell the two apart, and PyTorch would run its two kernels.) A boolean mask is
  written as ``Where(mask, 0, -inf)`` added to the scores, and the softmax's rows it hides
  entirely are set to 0 by ``IsNaN`` and ``Where`` after it: with that guard, both join the
  group (the kernel reads the boolean mask itself).

* **Decomposed kernels**: where ONNX (at the file's opset) has no operator for a PyTorch
  kernel, the exporters write it as pointwise nodes of its one input (:data:`DECOMPOSITIONS`):
  GELU as ``Div``, ``Erf``, ``Add``, ``Mul``, ``Mul`` below opset 20 (its tanh form with ``Pow``
  or ``Mul`` nodes and ``Tanh``), SiLU as ``Sigmoid`` and ``Mul``, Mish as ``Softplus``, ``Tanh``
  and ``Mul`` and Hardswish as ``HardSigmoid`` and ``Mul`` at the opsets without them, softplus
  as ``Softplus``, ``Greater`` and ``Where`` (unoptimised, with its ``beta`` as a ``Mul`` and a ``Div``),
  ELU unoptimised as ``Elu`` between two ``Mul`` (its scales), log-sigmoid as ``Sigmoid`` and ``Log``, layer
  normalisation below opset 17 as ``ReduceMean``, ``Sub``, ``Pow``, ``ReduceMean``, ``Add``,
  ``Sqrt``, ``Div``, and RMS normalisation as ``Pow``, ``ReduceMean``, ``Add``, ``Sqrt``,
  ``Reciprocal``, ``Mul`` (the TorchScript exporter writes the reciprocal as ``Div`` of 1).
  Such nodes are one group of the kernel's name (``operator``) when
  they are exactly one decomposition's node types, read one tensor besides constants of one
  element (and integer axes), by at least as many of them as the decomposition reads it
  with, and write one tensor of its size that nothing else of theirs is read by. A
  normalisation takes its affine ``Mul`` and ``Add`` as any other. A hand-written
  ``x * torch.sigmoid(x)`` is the same nodes, and is read as PyTorch's SiLU kernel.


A node joins a group only when every tensor it takes from the group is read by it alone
(and is not a graph output), and a group is formed only when no other output of its nodes
but the last is read outside it or returned (a ``Split`` passes one of its outputs on to a
bias ``Add`` and another to the rest of the graph: no epilogue), so no intermediate value
of a group is needed elsewhere.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

#: Kinds whose result an elementwise parameter operand can be fused into.
EPILOGUE_ANCHORS = frozenset({"matmul", "conv", "norm"})
EPILOGUE_OPS = frozenset({"Add", "Mul"})
SCORE_OPS = frozenset({"Add", "Mul", "Div", "Sub", "Where"})
SCALE_OPS = frozenset({"Mul", "Div"})
#: the score operators that apply a mask (the others scale)
MASK_OPS = frozenset({"Add", "Sub", "Where"})
PROBABILITY_OPS = frozenset({"Dropout", "Cast"})


@dataclass(frozen=True)
class FusionNode:
    """What fusion reads of a node: its type, kind (``placement.io.onnx_import.KINDS``) and tensors."""

    op_type: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: a ``Softmax``'s: whether it normalises along its input's last axis alone, the key axis of attention
    along_last: bool = True


@dataclass
class Group:
    """Nodes (positions, in order) run as one operator of ``kind``; ``exit`` writes its result. The
    first ``core`` members are the operator, the rest its epilogue; ``operator`` names the PyTorch
    kernel a decomposition stands for (``None``: the kernel of its first member that is no view)."""

    members: list[int]
    kind: str
    operator: str | None = None
    core: int = 1

    @property
    def exit(self) -> int:
        """The last member: attention members are sorted, and an epilogue chain ends at its last node."""
        return self.members[-1]


@dataclass(frozen=True)
class Decomposition:
    """A PyTorch kernel of one input as an exporter writes it: ``operator``, its cost ``kind``, the
    node types it is written with and how many of them read its input (at least)."""

    operator: str
    kind: str
    nodes: tuple[tuple[str, int], ...]
    input_readers: int


def _decomposition(operator: str, kind: str, input_readers: int, **nodes: int) -> Decomposition:
    return Decomposition(operator, kind, tuple(sorted(nodes.items())), input_readers)


#: The decompositions the exporters write (module docstring).
DECOMPOSITIONS = (
    _decomposition("gelu", "pointwise", 2, Div=1, Erf=1, Add=1, Mul=2),
    _decomposition("gelu", "pointwise", 2, Erf=1, Add=1, Mul=3),
    _decomposition("gelu", "pointwise", 2, Pow=1, Mul=4, Add=2, Tanh=1),
    _decomposition("gelu", "pointwise", 2, Mul=6, Add=2, Tanh=1),
    _decomposition("silu", "pointwise", 2, Sigmoid=1, Mul=1),
    _decomposition("mish", "pointwise", 2, Softplus=1, Tanh=1, Mul=1),
    _decomposition("hardswish", "pointwise", 2, HardSigmoid=1, Mul=1),
    _decomposition("softplus", "pointwise", 2, Softplus=1, Greater=1, Where=1),
    _decomposition("softplus", "pointwise", 2, Mul=1, Softplus=1, Div=1, Greater=1, Where=1),
    _decomposition("elu", "pointwise", 1, Mul=2, Elu=1),
    _decomposition("log_sigmoid", "pointwise", 1, Sigmoid=1, Log=1),
    _decomposition("layer_norm", "norm", 2, ReduceMean=2, Sub=1, Pow=1, Add=1, Sqrt=1, Div=1),
    _decomposition("rms_norm", "norm", 2, Pow=1, ReduceMean=1, Add=1, Sqrt=1, Reciprocal=1, Mul=1),
    _decomposition("rms_norm", "norm", 2, Pow=1, ReduceMean=1, Add=1, Sqrt=1, Div=1, Mul=1),
)
DECOMPOSED_OPS = frozenset(op for d in DECOMPOSITIONS for op, _ in d.nodes)
LARGEST_DECOMPOSITION = max(sum(n for _, n in d.nodes) for d in DECOMPOSITIONS)


def fuse(nodes: Sequence[FusionNode], parameters: set[str], graph_outputs: set[str],
         axis_parameters: set[str] | None = None, scalars: set[str] | None = None,
         elements: Mapping[str, int] | None = None,
         shapes: Mapping[str, tuple[int, ...]] | None = None) -> list[Group]:
    """The groups of ``nodes`` (module docstring), ordered by their exit; every node in exactly one.
    ``axis_parameters`` are the parameters of one axis, and the views of parameters of one axis that nodes
    make, which an epilogue may read (default: all parameters);
    ``scalars`` the parameters a decomposition may read (default: all); ``elements`` the tensors'
    element counts, by which a decomposition writes a tensor of its input's size (default: not checked);
    ``shapes`` the tensors' shapes, by which an epilogue's parameter runs along its kernel's bias axis
    (:func:`_along_bias_axis`; default: not checked)."""
    vectors = parameters if axis_parameters is None else axis_parameters
    singles = parameters if scalars is None else scalars
    producer = {t: i for i, node in enumerate(nodes) for t in node.outputs if t}
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for t in dict.fromkeys(x for x in node.inputs if x):
            readers.setdefault(t, []).append(i)

    def private(t: str, reader: int) -> bool:
        """``t`` is read by ``reader`` alone and is not a graph output."""
        return readers.get(t) == [reader] and t not in graph_outputs

    def closed(members: Sequence[int]) -> bool:
        """No output of a member but the last (in graph order) is returned or read outside ``members``."""
        inside = set(members)
        return all(t not in graph_outputs and inside.issuperset(readers.get(t, ()))
                   for m in sorted(members)[:-1] for t in nodes[m].outputs if t)

    group_of: dict[int, Group] = {}
    for softmax, node in enumerate(nodes):
        if node.op_type == "Softmax" and softmax not in group_of:
            members = _attention(nodes, softmax, producer, readers, parameters, private)
            if members is not None:
                members |= _constant_masks(nodes, members, producer, readers, singles, graph_outputs)
                if any(nodes[m].op_type == "IsNaN" for m in members):   # the guard of a boolean mask
                    members |= _boolean_masks(nodes, members, producer, readers, singles, graph_outputs)
            if members is not None and not any(m in group_of for m in members) and closed(list(members)):
                group = Group(sorted(members), "attention")
                group_of.update(dict.fromkeys(members, group))

    for last in reversed(range(len(nodes))):
        if last not in group_of:
            found = _decomposed(nodes, last, producer, readers, parameters, singles, graph_outputs, group_of,
                                elements)
            if found is not None:
                members, decomposition = found
                group = Group(members, decomposition.kind, decomposition.operator, len(members))
                group_of.update(dict.fromkeys(members, group))

    for i, node in enumerate(nodes):
        if i in group_of:
            continue
        chain = _epilogue_chain(nodes, i, producer, vectors, private)
        if chain is not None and chain[0] in group_of and group_of[chain[0]].kind in EPILOGUE_ANCHORS \
                and group_of[chain[0]].exit == chain[0] and closed(group_of[chain[0]].members + chain[1:]) \
                and _takes(nodes, group_of[chain[0]], node.op_type) \
                and _along_bias_axis(node, group_of[chain[0]].kind, vectors, shapes) \
                and (elements is None or elements.get(node.outputs[0]) == elements.get(nodes[chain[0]].outputs[0])):
            group = group_of[chain[0]]
            group.members.extend(chain[1:])
            group_of.update(dict.fromkeys(chain[1:], group))
            continue
        group_of[i] = Group([i], node.kind)
    groups = list({id(g): g for g in group_of.values()}.values())
    return sorted(groups, key=lambda g: g.exit)


#: the epilogues a group of each kind takes, in order
EPILOGUES = {"matmul": ("Add",), "conv": ("Add",), "norm": ("Mul", "Add")}


#: per operator type, the epilogues its own inputs already apply (input position, epilogue): Gemm's C and
#: a convolution's B are its bias, a normalisation's scale and bias its affine ``Mul`` and ``Add``
OWN_EPILOGUES = {"Gemm": ((2, "Add"),), "Conv": ((2, "Add"),), "ConvTranspose": ((2, "Add"),),
                 "LayerNormalization": ((1, "Mul"), (2, "Add")), "BatchNormalization": ((1, "Mul"), (2, "Add"))}


def _takes(nodes: Sequence[FusionNode], group: Group, op_type: str) -> bool:
    """Whether ``group`` takes one more epilogue ``op_type`` (:data:`EPILOGUES`, each at most once, in order,
    those its first node applies with its own inputs included: a linear layer with its bias takes no
    second one)."""
    anchor = nodes[group.members[0]]
    own = [epilogue for k, epilogue in OWN_EPILOGUES.get(anchor.op_type, ())
           if len(anchor.inputs) > k and anchor.inputs[k]]
    taken = own + [nodes[m].op_type for m in group.members[group.core:] if nodes[m].kind != "view"]
    allowed = EPILOGUES.get(group.kind, ())
    return op_type in allowed[allowed.index(taken[-1]) + 1 if taken else 0:]


def _decomposed(nodes: Sequence[FusionNode], last: int, producer: dict[str, int], readers: dict[str, list[int]],
                parameters: set[str], scalars: set[str], graph_outputs: set[str], grouped: dict[int, Group],
                elements: Mapping[str, int] | None) -> tuple[list[int], Decomposition] | None:
    """The nodes ending at ``last`` that are one of :data:`DECOMPOSITIONS` (module docstring), and which.

    From ``last`` back, the producer of a value the nodes read (the latest first) joins them once
    every reader of its result is among them, until they read one tensor besides parameters and
    their node types are a decomposition's, or no producer can join."""
    if nodes[last].op_type not in DECOMPOSED_OPS or len(nodes[last].outputs) != 1:
        return None
    members = {last}
    while len(members) <= LARGEST_DECOMPOSITION:
        read = {t for m in members for t in nodes[m].inputs if t and producer.get(t) not in members}
        # constants of one element; a reduction's axes (its second input) may hold several
        axes = {nodes[m].inputs[1] for m in members if nodes[m].kind == "reduction" and len(nodes[m].inputs) > 1}
        if any(t in parameters and t not in producer
               and (t not in scalars or (elements is not None and elements.get(t, 1) > 1 and t not in axes))
               for t in read):
            return None
        values = [t for t in read if t not in parameters or t in producer]
        if len(values) == 1:
            decomposition = _which_decomposition(nodes, members, values[0], elements, nodes[last].outputs[0])
            if decomposition is not None:
                return sorted(members), decomposition
        joining = [p for p in (producer.get(t) for t in values)
                   if p is not None and p not in grouped and nodes[p].op_type in DECOMPOSED_OPS
                   and all(t not in graph_outputs and members.issuperset(readers.get(t, ()))
                           for t in nodes[p].outputs if t)]
        if not joining:
            return None
        members.add(max(joining))
    return None


def _which_decomposition(nodes: Sequence[FusionNode], members: set[int], value: str,
                         elements: Mapping[str, int] | None, result: str) -> Decomposition | None:
    """The decomposition whose node types ``members`` are, reading ``value`` often enough and
    writing ``result`` of its size, if any."""
    types = tuple(sorted(Counter(nodes[m].op_type for m in members).items()))
    if elements is not None and elements.get(value) != elements.get(result):
        return None
    input_readers = sum(value in nodes[m].inputs for m in members)
    return next((d for d in DECOMPOSITIONS if d.nodes == types and input_readers >= d.input_readers), None)


def _activation(node: FusionNode, parameters: set[str], producer: dict[str, int]) -> str | None:
    """The one operand of a binary node that is not a parameter, if the other is a parameter (or a view of
    parameters that ``parameters`` lists, which a node of the graph makes)."""
    operands = [t for t in node.inputs if t]
    if len(operands) != 2:
        return None
    params = [t in parameters for t in operands]
    if params.count(True) != 1:
        return None
    return operands[params.index(False)]


def _along_bias_axis(node: FusionNode, kind: str, parameters: set[str],
                     shapes: Mapping[str, tuple[int, ...]] | None) -> bool:
    """Whether the parameter that epilogue ``node`` adds or multiplies by has more than one element along no
    other axis (its shape aligned to the activation's from the right) than the one a ``kind`` kernel's bias or
    affine parameters run along: a matmul's last (its output features), a convolution's channels (axis 1), a
    normalisation's either. A bias along a convolution's width, or one per row of a product, is an operator
    of its own. True where ``shapes`` does not give both shapes."""
    operands = [t for t in node.inputs if t]
    found = [t for t in operands if t in parameters]
    if shapes is None or len(found) != 1 or found[0] not in shapes:
        return True
    activation = next(t for t in operands if t != found[0])
    if activation not in shapes:
        return True
    rank = len(shapes[activation])
    parameter = shapes[found[0]]
    if len(parameter) > rank:
        return False
    axes = {rank - len(parameter) + k for k, d in enumerate(parameter) if d != 1}
    allowed = {"matmul": {rank - 1}, "conv": {1}, "norm": {1, rank - 1}}.get(kind, set())
    return axes <= allowed


def _epilogue_chain(nodes: Sequence[FusionNode], i: int, producer: dict[str, int], parameters: set[str],
                    private) -> list[int] | None:
    """``[anchor, views..., i]`` when node ``i`` is an epilogue of the node ``anchor`` (through views)."""
    node = nodes[i]
    if node.op_type not in EPILOGUE_OPS:
        return None
    t = _activation(node, parameters, producer)
    chain = [i]
    reader = i
    while t is not None and t in producer and private(t, reader):
        p = producer[t]
        chain.append(p)
        source = nodes[p]
        if source.kind != "view":
            return chain[::-1]
        t, reader = (source.inputs[0] if source.inputs else None), p
    return None


#: the most nodes a mask computed from constants alone may take (module docstring)
LARGEST_CONSTANT_MASK = 16


def _constant_masks(nodes: Sequence[FusionNode], members: set[int], producer: dict[str, int],
                    readers: dict[str, list[int]], constants: set[str], graph_outputs: set[str]) -> set[int]:
    """The nodes that compute a mask of the attention ``members`` from constants alone (module
    docstring): for each operand of a mask operator (:data:`MASK_OPS`, not a scale) that a node
    makes, the nodes it is made by, where every value they read is one of ``constants`` (of one
    element, or integers: no trained tensor, no model input) or made by one of them, and nothing but
    they and the mask operator reads what they make; none where that is not so."""
    found: set[int] = set()
    for member in sorted(members):
        if nodes[member].op_type not in MASK_OPS:
            continue
        for operand in nodes[member].inputs:
            if not operand or operand not in producer or producer[operand] in members:
                continue
            mask: set[int] = set()
            stack = [producer[operand]]
            while stack and len(mask) <= LARGEST_CONSTANT_MASK:
                k = stack.pop()
                if k in mask:
                    continue
                mask.add(k)
                for t in nodes[k].inputs:
                    if t and t in producer:
                        stack.append(producer[t])
                    elif t and t not in constants:
                        mask.add(-1)   # a model input or a trained tensor: no constant mask
            inside = mask | {member}
            if (-1 not in mask and len(mask) <= LARGEST_CONSTANT_MASK
                    and all(t not in graph_outputs and inside.issuperset(readers.get(t, ()))
                            for k in mask for t in nodes[k].outputs if t)):
                found |= mask
    return found


def _nan_guard(nodes: Sequence[FusionNode], t: str, consumers: list[int], readers: dict[str, list[int]],
               constants: set[str]) -> tuple[int, int] | None:
    """``IsNaN(t)`` and ``Where(IsNaN(t), c, t)`` (``c`` one of ``constants``: 0) where they are the only
    readers of ``t`` and the ``IsNaN`` is read by that ``Where`` alone: what the exporters write after
    the softmax of ``scaled_dot_product_attention`` with a boolean mask (a row the mask hides entirely
    is 0, not NaN); ``None`` otherwise."""
    if len(consumers) != 2:
        return None
    by_type = {nodes[c].op_type: c for c in consumers}
    isnan, where = by_type.get("IsNaN"), by_type.get("Where")
    if isnan is None or where is None or not nodes[isnan].outputs:
        return None
    flag = nodes[isnan].outputs[0]
    inputs = list(nodes[where].inputs)
    if len(inputs) != 3 or inputs[0] != flag or inputs[2] != t or readers.get(flag) != [where]:
        return None
    return (isnan, where) if inputs[1] in constants else None


def _boolean_masks(nodes: Sequence[FusionNode], members: set[int], producer: dict[str, int],
                   readers: dict[str, list[int]], constants: set[str], graph_outputs: set[str]) -> set[int]:
    """For attention ``members`` that hold the NaN guard of a boolean mask (:func:`_nan_guard`), the
    ``Where(mask, 0, -inf)`` that turns the mask into the scores' additive one, where a mask operator of
    the group alone reads it: PyTorch's kernel reads the boolean mask itself."""
    found: set[int] = set()
    for member in members:
        if nodes[member].op_type not in MASK_OPS:
            continue
        for operand in nodes[member].inputs:
            k = producer.get(operand) if operand else None
            if (k is None or k in members or nodes[k].op_type != "Where" or readers.get(operand) != [member]
                    or operand in graph_outputs):
                continue
            inputs = list(nodes[k].inputs)
            if len(inputs) == 3 and all(x in constants for x in inputs[1:]):
                found.add(k)
    return found


def _attention(nodes: Sequence[FusionNode], softmax: int, producer: dict[str, int], readers: dict[str, list[int]],
               parameters: set[str], private) -> set[int] | None:
    """The nodes of the attention pattern around ``softmax`` (module docstring), or ``None``: a softmax along
    another axis than the last (the queries', the heads') is none, and runs as a kernel of its own."""
    if not nodes[softmax].along_last:
        return None
    members = {softmax}
    t, reader = nodes[softmax].inputs[0], softmax
    while True:  # back from the softmax to the score MatMul
        if t not in producer or not private(t, reader):
            return None
        p = producer[t]
        node = nodes[p]
        members.add(p)
        if node.op_type == "MatMul":
            first = p
            break
        if node.op_type not in SCORE_OPS:
            return None
        produced = [x for x in node.inputs if x in producer]
        matmuls = [x for x in produced if nodes[producer[x]].op_type == "MatMul"]
        t, reader = (matmuls or produced or [None])[0], p
        if t is None:
            return None
    for operand in nodes[first].inputs:  # a scale on q or k
        if operand in producer and private(operand, first):
            scale = producer[operand]
            if nodes[scale].op_type in SCALE_OPS and _activation(nodes[scale], parameters, producer) is not None:
                members.add(scale)
    t = nodes[softmax].outputs[0]
    while True:  # forward from the softmax to the MatMul with v
        consumers = readers.get(t, [])
        guard = _nan_guard(nodes, t, consumers, readers, parameters)
        if guard is not None:   # rows a boolean mask hides entirely: NaN becomes 0
            members |= set(guard)
            t = nodes[guard[1]].outputs[0]
            continue
        if len(consumers) != 1 or not private(t, consumers[0]):
            return None
        c = consumers[0]
        node = nodes[c]
        members.add(c)
        if node.op_type == "MatMul":
            return members if node.inputs[0] == t else None
        if node.op_type not in PROBABILITY_OPS or not node.outputs:
            return None
        t = node.outputs[0]
