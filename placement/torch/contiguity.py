"""Contiguous tensors across stage boundaries: gloo sends and receives contiguous tensors only.

``torch.distributed.pipelining`` makes its receive buffers with the strides of the tensors it
saw when it inferred the stages' metadata; an activation that is a transposed view, or a
gradient that is a slice of a concatenation's gradient, would give a strided buffer. A stage
therefore sends contiguous activations (``contiguous()`` on each output) and reads each
received floating-point tensor through :func:`contiguous_gradient`, the identity whose
backward makes the gradient contiguous. Imports torch.
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
