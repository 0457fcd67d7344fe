"""ONNX nodes grouped into the kernels PyTorch runs for them.

An exporter writes one PyTorch operator as several ONNX nodes where ONNX has no single
operator for it; costing those nodes one by one would charge bytes and kernel launches
that PyTorch never spends. :func:`fuse` groups the nodes of a graph (in order, constants
removed) so that each group is one operator of :mod:`placement.io.onnx_import`:

* **Epilogue**: an ``Add`` or ``Mul`` whose other operand is a parameter (an initializer
  or a constant) of one axis (at most one dimension above 1: a bias, a per-channel scale)
  joins the matmul, convolution or normalisation whose result it reads, through views,
  as PyTorch's kernels take them: one ``Add`` after a matmul or convolution (its bias),
  a ``Mul`` and then an ``Add`` after a normalisation (its affine weight and bias).
  ``MatMul`` + ``Add(bias)`` is torch's ``linear`` on a tensor of rank 3 or more,
  ``InstanceNormalization`` + ``Reshape`` + ``Mul(weight)`` + ``Add(bias)`` is
  ``group_norm``: one kernel each, the bias read and the result written once. A position
  embedding added after a linear layer, or a scale after its bias, is a kernel of its own.
* **Attention**: ``MatMul(q, k)`` → optional ``Add``/``Mul``/``Div``/``Where`` (mask,
  scale) → ``Softmax`` → optional ``Dropout``/``Cast`` → ``MatMul(·, v)``, with a ``Mul``
  or ``Div`` by a parameter on either operand of the first ``MatMul`` (the scale), is
  ``scaled_dot_product_attention``, which runs fused: the score matrix is never written.

A node joins a group only when every tensor it takes from the group is read by it alone
(and is not a graph output), and a group is formed only when no other output of its nodes
but the last is read outside it or returned (a ``Split`` passes one of its outputs on to a
bias ``Add`` and another to the rest of the graph: no epilogue), so no intermediate value
of a group is needed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: Kinds whose result an elementwise parameter operand can be fused into.
EPILOGUE_ANCHORS = frozenset({"matmul", "conv", "norm"})
EPILOGUE_OPS = frozenset({"Add", "Mul"})
SCORE_OPS = frozenset({"Add", "Mul", "Div", "Sub", "Where"})
SCALE_OPS = frozenset({"Mul", "Div"})
PROBABILITY_OPS = frozenset({"Dropout", "Cast"})


@dataclass(frozen=True)
class FusionNode:
    """What fusion reads of a node: its type, kind (``placement.io.onnx_import.KINDS``) and tensors."""

    op_type: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class Group:
    """Nodes (positions, in order) run as one operator of ``kind``; ``exit`` writes its result."""

    members: list[int]
    kind: str

    @property
    def exit(self) -> int:
        """The last member: attention members are sorted, and an epilogue chain ends at its last node."""
        return self.members[-1]


def fuse(nodes: Sequence[FusionNode], parameters: set[str], graph_outputs: set[str],
         axis_parameters: set[str] | None = None) -> list[Group]:
    """The groups of ``nodes`` (module docstring), ordered by their exit; every node in exactly one.
    ``axis_parameters`` are the parameters of one axis, which an epilogue may read (default: all)."""
    vectors = parameters if axis_parameters is None else axis_parameters
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
            if members is not None and not any(m in group_of for m in members) and closed(list(members)):
                group = Group(sorted(members), "attention")
                group_of.update(dict.fromkeys(members, group))

    for i, node in enumerate(nodes):
        if i in group_of:
            continue
        chain = _epilogue_chain(nodes, i, producer, vectors, private)
        if chain is not None and chain[0] in group_of and group_of[chain[0]].kind in EPILOGUE_ANCHORS \
                and group_of[chain[0]].exit == chain[0] and closed(group_of[chain[0]].members + chain[1:]) \
                and _takes(nodes, group_of[chain[0]], node.op_type):
            group = group_of[chain[0]]
            group.members.extend(chain[1:])
            group_of.update(dict.fromkeys(chain[1:], group))
            continue
        group_of[i] = Group([i], node.kind)
    groups = list({id(g): g for g in group_of.values()}.values())
    return sorted(groups, key=lambda g: g.exit)


#: the epilogues a group of each kind takes, in order
EPILOGUES = {"matmul": ("Add",), "conv": ("Add",), "norm": ("Mul", "Add")}


def _takes(nodes: Sequence[FusionNode], group: Group, op_type: str) -> bool:
    """Whether ``group`` takes one more epilogue ``op_type`` (:data:`EPILOGUES`, each at most once, in order)."""
    taken = [nodes[m].op_type for m in group.members[1:] if nodes[m].kind != "view"]
    allowed = EPILOGUES.get(group.kind, ())
    return op_type in allowed[allowed.index(taken[-1]) + 1 if taken else 0:]


def _activation(node: FusionNode, parameters: set[str], producer: dict[str, int]) -> str | None:
    """The one operand of a binary node that is not a parameter, if the other is a parameter."""
    operands = [t for t in node.inputs if t]
    if len(operands) != 2:
        return None
    params = [t in parameters and t not in producer for t in operands]
    if params.count(True) != 1:
        return None
    return operands[params.index(False)]


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


def _attention(nodes: Sequence[FusionNode], softmax: int, producer: dict[str, int], readers: dict[str, list[int]],
               parameters: set[str], private) -> set[int] | None:
    """The nodes of the attention pattern around ``softmax`` (module docstring), or ``None``."""
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
