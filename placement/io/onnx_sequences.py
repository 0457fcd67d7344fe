"""ONNX sequences that are a split in disguise, rewritten as the ``Split`` they are.

``torch.onnx.export(..., optimize=False)`` writes ``torch.split`` and ``chunk`` (the q, k, v of a
fused projection, ``nn.MultiheadAttention``'s weights) as ``SplitToSequence`` followed by one
``SequenceAt`` per part taken. The importer reads tensors, not sequences, so
:func:`split_sequences` rewrites, in the importer's copy of the graph, every ``SplitToSequence``

* whose sequence only ``SequenceAt`` nodes read (it is no graph output), each at a position
  known by value, and
* whose parts are known: its ``split`` input a known value (one size: parts of that size, the
  last one smaller; a list: those sizes), or absent (parts of size 1, squeezed when
  ``keepdims`` is 0), along ``axis`` of an input of static shape,

into a ``Split`` with one output per part, and each ``SequenceAt`` into an ``Identity`` (a
``Squeeze`` for ``keepdims`` 0) of its part, under the ``SequenceAt``'s own name. Both are views
in the cost model, as ``split`` and the indexing of its result are in PyTorch. Any other
sequence stays, and the importer refuses it by name.
"""

from __future__ import annotations

from typing import Any


def _sizes(node: Any, shape: tuple[int, ...] | None, values: dict[str, Any]) -> tuple[list[int], int, bool] | None:
    """The part sizes, the axis and whether parts keep the axis, of ``SplitToSequence`` ``node``; ``None``
    where they are not known."""
    attrs = {attr.name: attr.i for attr in node.attribute}
    if shape is None:
        return None
    axis = attrs.get("axis", 0)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        return None
    length = shape[axis]
    if len(node.input) < 2 or not node.input[1]:
        return [1] * length, axis, bool(attrs.get("keepdims", 1))
    split = values.get(node.input[1])
    if split is None:
        return None
    sizes = [int(v) for v in split.reshape(-1)]
    if split.ndim == 0:
        if sizes[0] <= 0:
            return None
        sizes = [sizes[0]] * (length // sizes[0]) + ([length % sizes[0]] if length % sizes[0] else [])
    if sum(sizes) != length or any(size < 0 for size in sizes):
        return None
    return sizes, axis, True


def split_sequences(graph: Any, shapes: dict[str, tuple[int, ...]], values: dict[str, Any], opset: int) -> bool:
    """Rewrite the splits of ``graph`` written as sequences (module docstring), in place; ``shapes`` and
    ``values`` are what shape inference and the evaluation of shape arithmetic found. Whether any was."""
    from onnx import helper, numpy_helper

    import numpy as np

    readers: dict[str, list[Any]] = {}
    index = {node.output[0]: k for k, node in enumerate(graph.node) if node.output}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    returned = {value.name for value in graph.output}
    replaced: dict[int, list[Any]] = {}
    for k, node in enumerate(graph.node):
        if node.op_type != "SplitToSequence" or node.domain not in ("", "ai.onnx") or not node.output:
            continue
        sequence = node.output[0]
        takers = readers.get(sequence, [])
        if sequence in returned or not takers or any(t.op_type != "SequenceAt" or t.input[0] != sequence
                                                     or t.input[1] not in values for t in takers):
            continue
        found = _sizes(node, shapes.get(node.input[0]), values)
        if found is None:
            continue
        sizes, axis, keep = found
        parts = [f"{sequence}__part{i}" for i in range(len(sizes))]
        positions = [int(values[t.input[1]].reshape(-1)[0]) for t in takers]
        if not all(-len(sizes) <= p < len(sizes) for p in positions):
            continue
        split = [helper.make_node("Constant", [], [f"{sequence}__sizes"],
                                  value=numpy_helper.from_array(np.array(sizes, dtype=np.int64)))]
        if opset >= 13:
            split.append(helper.make_node("Split", [node.input[0], f"{sequence}__sizes"], parts, name=node.name,
                                          axis=axis))
        else:
            split = [helper.make_node("Split", [node.input[0]], parts, name=node.name, axis=axis, split=sizes)]
        replaced[k] = split
        for taker, position in zip(takers, positions):
            part = parts[position]
            if keep:
                view = helper.make_node("Identity", [part], list(taker.output), name=taker.name)
            elif opset >= 13:
                axes = f"{taker.output[0]}__axes"
                view = helper.make_node("Squeeze", [part, axes], list(taker.output), name=taker.name)
                split.insert(0, helper.make_node("Constant", [], [axes],
                                                 value=numpy_helper.from_array(np.array([axis], dtype=np.int64))))
            else:
                view = helper.make_node("Squeeze", [part], list(taker.output), name=taker.name, axes=[axis])
            replaced[index[taker.output[0]]] = [view]
    if not replaced:
        return False
    nodes = [new for k, node in enumerate(graph.node) for new in replaced.get(k, [node])]
    del graph.node[:]
    graph.node.extend(nodes)
    return True
