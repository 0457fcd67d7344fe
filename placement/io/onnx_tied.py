"""Tied parameters an ONNX export writes twice: a weight and its transposed copy.

A language model whose output projection is its token embedding (``head.weight = emb.weight``)
reads one ``[V, d]`` parameter twice: the embedding gathers rows of it, the projection
multiplies by its transpose. ``torch.onnx.export`` (TorchScript and dynamo, with its optimiser)
folds that transpose into a second initializer, ``[d, V]``, under another name, so the importer
would count the parameter twice where one node holds both readers, unlike
:mod:`placement.io.torch_export`, which sees one parameter.

:func:`transposed_copies` finds such pairs by value: two floating-point initializers of shapes
``[a, b]`` and ``[b, a]`` with ``a ≠ b``, where one is exactly the other's transpose, element for
element, and the values are not all equal. The later one in the graph's initializer list is then
read as the earlier one, the same parameter. Square matrices
and constant tensors are left apart: two distinct parameters initialised alike (zeros, ones, an
identity) may equal each other's transpose, and merging them would count a parameter that
exists too few times. Only the candidates (shapes that mirror another initializer's) are read
where their data lies outside the model file, as exporters write it (the dynamo exporter does
for every weight); where that data cannot be read, the copies stay apart. Each candidate is
first compared by its corners, and read again in full only where those match, so that at most
two tensors are held at a time. :func:`constant_valued` tells such constant tensors, which exporters
also merge into one initializer where distinct modules hold equal ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _values(init: Any, folder: Path | None) -> Any:
    """The values of initializer ``init`` as a numpy array, its external data read from ``folder``;
    ``None`` where they cannot be read."""
    from onnx import TensorProto, numpy_helper
    from onnx.external_data_helper import load_external_data_for_tensor

    if init.data_location == TensorProto.EXTERNAL:
        if folder is None:
            return None
        loaded = TensorProto()
        loaded.CopyFrom(init)
        try:
            load_external_data_for_tensor(loaded, str(folder))
            return numpy_helper.to_array(loaded)
        except Exception:  # onnx raises OSError, ValueError or its ValidationError: the data is not there
            return None
    try:
        return numpy_helper.to_array(init)
    except Exception:      # malformed data: no tie is claimed
        return None


def constant_valued(init: Any, folder: str | Path | None = None) -> bool:
    """Whether every value of initializer ``init`` is the same (external data read from ``folder``); false
    where they cannot be read."""
    values = _values(init, None if folder is None else Path(folder))
    return values is not None and values.size > 0 and bool((values == values.flat[0]).all())


def zero_valued(init: Any, folder: str | Path | None = None) -> bool:
    """Whether every value of initializer ``init`` is zero (external data read from ``folder``); false where
    they cannot be read."""
    values = _values(init, None if folder is None else Path(folder))
    return values is not None and values.size > 0 and not values.any()


def one_valued(init: Any, folder: str | Path | None = None) -> bool:
    """Whether every value of tensor ``init`` is one (external data read from ``folder``); false where they cannot
    be read."""
    values = _values(init, None if folder is None else Path(folder))
    return values is not None and values.size > 0 and bool((values == 1).all())


def causal_valued(init: Any, folder: str | Path | None = None) -> bool:
    """Whether tensor ``init`` is the additive mask of ``scaled_dot_product_attention(is_causal=True)``: ``[L, S]``
    (after dimensions of 1) of zeros on and below the diagonal and, above it, ``-inf`` or at most half the lowest
    value of its type (the exporters write the type's lowest); false where the values cannot be read."""
    import numpy as np

    values = _values(init, None if folder is None else Path(folder))
    if (values is None or values.ndim < 2 or values.size == 0 or any(d != 1 for d in values.shape[:-2])
            or not np.issubdtype(values.dtype, np.floating)):
        return False
    rows, columns = values.shape[-2:]
    matrix = values.reshape(rows, columns)
    below = np.tril(np.ones((rows, columns), dtype=bool))
    return bool((matrix[below] == 0).all() and (matrix[~below] <= np.finfo(values.dtype).min / 2).all())


def _corners(values: Any) -> tuple[Any, Any, Any, Any] | None:
    """The four corners of a matrix, ``None`` for an empty or constant one (never merged)."""
    if values is None or values.size == 0 or (values == values.flat[0]).all():
        return None
    return values[0, 0], values[0, -1], values[-1, 0], values[-1, -1]


def transposed_copies(graph: Any, folder: str | Path | None = None) -> dict[str, str]:
    """``{copy: original}`` for the initializers of ``graph`` that are the transpose of an earlier one
    (module docstring); external data is read from ``folder`` (``None``: not read)."""
    from onnx import TensorProto, helper

    folder = None if folder is None else Path(folder)
    by_shape: dict[tuple[int, int, int], list[Any]] = {}
    for init in graph.initializer:
        if (len(init.dims) == 2 and init.dims[0] != init.dims[1] and init.data_type in TensorProto.DataType.values()
                and init.data_type != TensorProto.UNDEFINED
                and helper.tensor_dtype_to_np_dtype(init.data_type).kind in "fc"):
            by_shape.setdefault((init.data_type, int(init.dims[0]), int(init.dims[1])), []).append(init)
    order = {init.name: k for k, init in enumerate(graph.initializer)}
    copies: dict[str, str] = {}
    for (kind, a, b), originals in by_shape.items():
        mirrored = by_shape.get((kind, b, a), [])
        if a > b or not mirrored:
            continue                                   # each pair of shapes once, from its [a, b] side
        corners = {init.name: _corners(_values(init, folder)) for init in (*originals, *mirrored)}
        for first in originals:
            mine = corners[first.name]
            for second in mirrored:
                theirs = corners[second.name]
                if mine is None or theirs is None or first.name in copies or second.name in copies:
                    continue
                if (mine[0], mine[1], mine[2], mine[3]) != (theirs[0], theirs[2], theirs[1], theirs[3]):
                    continue
                values, other = _values(first, folder), _values(second, folder)
                if values is not None and other is not None and (other == values.T).all():
                    early, late = sorted((first.name, second.name), key=order.__getitem__)
                    copies[late] = early
    return copies
