"""Contiguous tensors across stage boundaries: gloo sends and receives contiguous tensors only.

``torch.distributed.pipelining`` makes its receive buffers with the strides of the tensors it
saw when it inferred the stages' metadata; an activation that is a transposed view, or a
gradient that is a slice of a concatenation's gradient, would give a strided buffer. A stage
therefore sends contiguous activations (``contiguous()`` on each output) and reads each
received floating-point tensor through :func:`contiguous_gradient`, the identity whose
backward makes the gradient contiguous, or, where the stage writes into the received tensor (an
in-place operator such as ``relu_`` on it or on a view of it), through :func:`contiguous_copy`,
the same on a copy: autograd forbids writing into a custom function's view of its input (and
into the leaf a pipeline stage receives). Imports torch.
"""

from __future__ import annotations

from typing import Any

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


def writes_in_place(node: Any) -> bool:
    """Whether the operator of the FX ``node`` has a mutable schema (it writes into an argument)."""
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def returns_alias(node: Any) -> bool:
    """Whether the operator of the FX ``node`` returns a result that aliases an argument (a view, or an
    in-place operator's result)."""
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def written_in_place(value: Any, nodes: Any) -> bool:
    """Whether one of the FX ``nodes`` writes into ``value`` in place: an operator with a mutable
    schema applied to it, or to a view of it (an operator whose result aliases its input)."""
    inside = set(nodes)
    stack, seen = [value], set()
    while stack:
        for user in stack.pop().users:
            if user not in inside or user in seen:
                continue
            seen.add(user)
            if writes_in_place(user):
                return True
            if returns_alias(user):
                stack.append(user)
    return False


def aliases_state(value: Any) -> bool:
    """Whether the FX value ``value`` may share memory with a parameter or buffer: an attribute
    read, or the result of an operator whose result aliases its first argument (a view, or an
    in-place operator such as the ``add_`` of a running average kept in a buffer), or an item of
    such a result, applied to such a value. A stage sends such a value as a copy: the send may
    still be in flight when the next micro-batch's forward writes into the buffer."""
    return state_root(value) is not None


def state_root(value: Any) -> Any:
    """The attribute read (a ``get_attr`` node) whose memory the FX value ``value`` may share
    (:func:`aliases_state`), or ``None``."""
    import operator

    import torch

    while True:
        if value.op == "get_attr":
            return value
        if value.op != "call_function" or not value.args or not isinstance(value.args[0], torch.fx.Node):
            return None
        if value.target is not operator.getitem and not returns_alias(value):
            return None
        value = value.args[0]
