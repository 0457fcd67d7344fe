"""Contiguous tensors across stage boundaries: gloo sends and receives contiguous tensors only.

``torch.distributed.pipelining`` makes its receive buffers with the strides of the tensors it
saw when it inferred the stages' metadata; an activation that is a transposed view, or a
gradient that is a slice of a concatenation's gradient, would give a strided buffer. A stage
therefore sends contiguous activations (``contiguous()`` on each output) and reads each
received floating-point tensor through :func:`contiguous_gradient`, the identity whose
backward makes the gradient contiguous, or, where the stage writes into the received tensor (an
in-place operator such as ``relu_`` on it or on a view of it), through :func:`contiguous_copy`,
the same on a copy: autograd forbids writing into a custom function's view of its input (and
into the leaf a pipeline stage receives). A received tensor that the program was traced with in
another dense layout (a transposed view: ``q`` of attention after ``transpose(1, 2)``) is first
copied into that order of its dimensions (:func:`traced_layout`, :func:`dense_order`): operators such as ``scaled_dot_product_attention``
give their result the layout of their input, and ``torch.export`` keeps a later ``view`` that only
the traced layout allows (it drops a ``contiguous()`` that was a no-op when traced). Imports torch.
"""

from __future__ import annotations

from typing import Any, Container, Mapping

import torch


class _ContiguousGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad.contiguous()


def contiguous_gradient(x: Any) -> Any:
    """``x`` itself, as a value whose gradient comes back contiguous."""
    return _ContiguousGradient.apply(x)


class _ContiguousCopy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad.contiguous()


def contiguous_copy(x: Any) -> Any:
    """A copy of ``x`` that the stage may write into, whose gradient comes back contiguous."""
    return _ContiguousCopy.apply(x)


class _TracedLayout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any, stride: tuple[int, ...]) -> Any:
        out = torch.empty_strided(tuple(x.shape), stride, dtype=x.dtype, device=x.device)
        out.copy_(x)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad.contiguous(), None


def traced_layout(x: Any, stride: tuple[int, ...]) -> Any:
    """A copy of ``x`` with the strides ``stride`` (a dense layout, :func:`dense_order`), whose gradient
    comes back contiguous; the stage may write into it."""
    return _TracedLayout.apply(x, stride)


def laid_out_apart(example: Any) -> bool:
    """Whether ``example`` (a traced value, ``node.meta["val"]``) is a dense tensor laid out non-contiguous in
    memory: a transpose, an RNN's batch-first output. A sparse tensor is not one (it is refused as such)."""
    return isinstance(example, torch.Tensor) and example.layout == torch.strided and not example.is_contiguous()


def memory_order(stride: tuple[int, ...]) -> list[int]:
    """The dimensions of a tensor of strides ``stride`` in the order they lie in memory, outermost first
    (largest stride first; ties in dimension order)."""
    return sorted(range(len(stride)), key=lambda d: (-stride[d], d))


def dense_order(shape: tuple[int, ...], stride: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a tensor of ``shape`` without gaps or overlaps whose dimensions lie in memory in
    the order of ``stride`` (largest first; ties in dimension order): a transposed view keeps its
    transpose, a slice of a wider tensor loses its gaps."""
    order = memory_order(stride)
    dense = [0] * len(shape)
    step = 1
    for d in reversed(order):
        dense[d] = step
        step *= max(shape[d], 1)
    return tuple(dense)


#: operators that update running statistics in place though their schema does not mark them written:
#: the flag that turns the update on, and the arguments updated
RUNNING_STATISTICS = {"aten::batch_norm": ("training", ("running_mean", "running_var")),
                      "aten::instance_norm": ("use_input_stats", ("running_mean", "running_var"))}


def _arguments(node: Any) -> list[tuple[Any, Any]]:
    """The ``(schema argument, value passed)`` pairs of the FX ``node``'s operator (none without a schema)."""
    return _passed(node.target, node.args, node.kwargs)


def _passed(target: Any, args: tuple, kwargs: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """The ``(schema argument, value passed)`` pairs of a call of the operator ``target`` with ``args`` and
    ``kwargs`` (none without a schema)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return []
    pairs = []
    for i, argument in enumerate(schema.arguments):
        if i < len(args):
            pairs.append((argument, args[i]))
        elif argument.name in kwargs:
            pairs.append((argument, kwargs[argument.name]))
    return pairs


def call_values(target: Any, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments by their schema names: the value passed (:func:`_passed`), or the schema's default
    where none is (none without a schema)."""
    schema = getattr(target, "_schema", None)
    values = {a.name: a.default_value for a in (schema.arguments if schema else ()) if a.has_default_value()}
    values.update((argument.name, passed) for argument, passed in _passed(target, args, kwargs))
    return values


def argument_values(node: Any) -> dict[str, Any]:
    """The FX ``node``'s operator arguments by their schema names (:func:`call_values`)."""
    return call_values(node.target, node.args, node.kwargs)


#: operators that read an argument's memory at the storage offset and strides they are given (or its own storage
#: offset), not its elements in their logical order, by the schema name of that argument: what they read depends on
#: where the argument's elements lie in the storage of the tensor it is a view of, which a copy of its values loses
READS_STORAGE = {"as_strided": "self", "as_strided_": "self", "as_strided_copy": "self", "as_strided_scatter": "self",
                 "set_": "source"}


def storage_read(node: Any) -> Any:
    """The FX value whose memory the operator of the FX ``node`` reads by storage offset and strides
    (:data:`READS_STORAGE`: ``as_strided`` of a view reads the memory of the tensor the view was made from), or
    ``None``."""
    schema = getattr(node.target, "_schema", None)
    argument = READS_STORAGE.get(schema.name.split("::")[-1]) if node.op == "call_function" and schema else None
    value = argument_values(node).get(argument) if argument is not None else None
    return value if isinstance(value, torch.fx.Node) else None


def _passes(passed: Any, value: Any) -> bool:
    return passed is value or (isinstance(passed, (list, tuple)) and any(p is value for p in passed))


def writes_into(node: Any, value: Any) -> bool:
    """Whether the operator of the FX ``node`` writes into the FX value ``value``: an argument its schema
    marks written (``Tensor(a!)``), or the running statistics a batch or instance normalisation in
    training mode updates."""
    pairs = _arguments(node)
    if any(a.alias_info is not None and a.alias_info.is_write and _passes(p, value) for a, p in pairs):
        return True
    flag, updated = RUNNING_STATISTICS.get(getattr(getattr(node.target, "_schema", None), "name", ""), ("", ()))
    return (any(a.name == flag and p is True for a, p in pairs)
            and any(a.name in updated and _passes(p, value) for a, p in pairs))


#: operators whose schema marks no alias but which may return an argument itself, or views of it: a
#: dropout in evaluation or of probability 0, ``type_as`` to the same type, ``atleast_Nd`` of a tensor
#: that has the dimensions, an einsum of one operand (a permutation), the splitting and broadcasting ones, and
#: ``_unsafe_view`` (a reshape that a functional program writes after a copy)
RETURNS_ARGUMENT = {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "type_as", "atleast_1d",
                    "atleast_2d", "atleast_3d", "einsum", "broadcast_tensors", "unsafe_chunk", "unsafe_split",
                    "unsafe_split_with_sizes", "meshgrid", "_unsafe_view"}


def _returns_argument(node: Any, name: str, value: Any) -> bool:
    """Whether ``node`` (its operator ``name`` one of :data:`RETURNS_ARGUMENT`) may return ``value``, one
    of its arguments, itself or as views: eager PyTorch then lets an in-place write into the result
    write into ``value``."""
    args = node.args
    if "dropout" in name:   # the input itself in evaluation (``train=False``) or of probability 0
        from placement.io.torch_export import is_identity_dropout

        return bool(args) and args[0] is value and is_identity_dropout(node)
    if name == "type_as":   # the input itself where it has the other's type already
        vals = [a.meta.get("val") if hasattr(a, "meta") else None for a in args[:2]]
        return (len(args) > 1 and args[0] is value and None not in vals
                and vals[0].dtype == vals[1].dtype)
    if name.startswith("atleast_"):
        val = value.meta.get("val") if hasattr(value, "meta") else None
        return bool(args) and args[0] is value and (val is None or val.dim() >= int(name[-2]))
    if name == "einsum":    # one operand: a permutation or a diagonal, a view
        return len(args) > 1 and isinstance(args[1], (list, tuple)) and len(args[1]) == 1 and args[1][0] is value
    return _passes(args[0] if args else None, value)


def aliases_argument(node: Any, value: Any) -> bool:
    """Whether the result of the FX ``node`` may share memory with its argument ``value``: a view of it,
    the result of an in-place operator on it, an item of a tuple ``value``, or ``value`` itself where an
    operator of :data:`RETURNS_ARGUMENT` may return it."""
    import operator

    if node.target is operator.getitem:
        return bool(node.args) and node.args[0] is value
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    name = schema.name.split("::")[-1]
    if name in RETURNS_ARGUMENT:
        return _returns_argument(node, name, value)
    returned = {name for r in schema.returns if r.alias_info is not None for name in r.alias_info.before_set}
    # ``Tensor(a -> *) self`` with ``-> Tensor(a)[]`` (chunk, split, unbind): the list's items alias the
    # argument, which the schema records as the argument's memory going into the wildcard set
    listed = any(r.alias_info is not None for r in schema.returns)
    return any(a.alias_info is not None and _passes(p, value)
               and (returned & set(a.alias_info.before_set) or (listed and "*" in a.alias_info.after_set))
               for a, p in _arguments(node))


def alias_tree(value: Any, within: Mapping[Any, int] | None = None) -> dict[Any, Any]:
    """The FX values that may share the memory of ``value``: ``value`` itself, mapped to ``None``, and
    every value made from one of them by an operator whose result aliases it (:func:`aliases_argument`),
    mapped to the value it was made from; ``within``: only these nodes."""
    made_from: dict[Any, Any] = {value: None}
    stack = [value]
    while stack:
        source = stack.pop()
        for user in source.users:
            if user not in made_from and (within is None or user in within) and aliases_argument(user, source):
                made_from[user] = source
                stack.append(user)
    return made_from


def accesses(aliases: Container[Any], position: Mapping[Any, int]) -> tuple[list[Any], list[Any]]:
    """The operators (those of ``position``, in its order) that write in place into one of the FX values
    ``aliases`` (:func:`alias_tree`), and those that read one of them; a writer reads what it writes into."""
    readers = sorted({user for a in aliases for user in a.users if user in position}, key=position.__getitem__)
    writers = [n for n in readers if any(writes_into(n, a) for a in n.all_input_nodes if a in aliases)]
    return writers, readers


def state_accesses(value: Any, nodes: Any, position: Mapping[Any, int] | None = None) -> tuple[list[Any], list[Any]]:
    """The operators among the FX ``nodes`` that write into ``value`` in place, and those that read its
    memory: ``value`` itself or a value aliasing it (:func:`aliases_argument`), in the order of
    ``nodes``. A writer reads what it writes into. ``position``: each of ``nodes``' place in that order,
    where the caller has it (asking of every parameter, rebuilding it made the asking quadratic)."""
    if position is None:
        position = {n: i for i, n in enumerate(nodes)}
    return accesses(alias_tree(value, position), position)


def written_in_place(value: Any, nodes: Any, position: Mapping[Any, int] | None = None) -> bool:
    """Whether one of the FX ``nodes`` writes into ``value`` in place, or into a value aliasing it
    (:func:`state_accesses`)."""
    return bool(state_accesses(value, nodes, position)[0])


def aliases_state(value: Any) -> bool:
    """Whether the FX value ``value`` may share memory with a parameter or buffer: an attribute
    read, or the result of an operator whose result aliases its first argument (a view, or an
    in-place operator such as the ``add_`` of a running average kept in a buffer), or an item of
    such a result, applied to such a value. A stage sends such a value as a copy: the send may
    still be in flight when the next micro-batch's forward writes into the buffer."""
    return state_root(value) is not None


def alias_sources(value: Any) -> list[Any]:
    """``value`` and the FX values it was made from by operators whose result aliases their first
    argument (a view, an in-place result), in turn, back to the first that was not: the values
    whose memory a write into ``value`` writes into."""
    chain = [value]
    while (value.op == "call_function" and value.args and isinstance(value.args[0], torch.fx.Node)
           and aliases_argument(value, value.args[0])):
        value = value.args[0]
        chain.append(value)
    return chain


def state_root(value: Any) -> Any:
    """The attribute read (a ``get_attr`` node) whose memory the FX value ``value`` may share
    (:func:`aliases_state`), or ``None``."""
    source = alias_sources(value)[-1]
    return source if source.op == "get_attr" else None
