"""Small PyTorch models for the hand-off tests, as factories ``() -> (model, args)`` (need torch).

* :func:`gpt` — a GPT-like language model: token and position embeddings added in
  ``transformer``'s own forward, a stack ``transformer.h`` of two blocks (pre-norm
  attention stand-in and an MLP that is an ``nn.Sequential`` of Linear, GELU, Linear, each
  with a residual add in the block's own forward), a final norm and a head.
* :func:`residual_stack` — an input Linear, a stack ``blocks`` of two residual blocks and a
  head; with ``root_op=True`` a ReLU applied in the model's own forward, between the input
  Linear and the blocks, an operator outside every module.
* :func:`scaled_residual_stack` — :func:`residual_stack` whose blocks begin with an operator of their own
  (``x * 0.5`` before the norm), not with a submodule's.
* :func:`skipping_stack` — :func:`residual_stack` with a stack ``blocks`` of four residual blocks of which
  forward calls ``blocks.0`` and ``blocks.2`` only: ``blocks.1`` is skipped (as LayerDrop skips a layer) and
  ``blocks.3`` is a spare.
* :func:`tied_lm` — an embedding, two Linears and an output projection that is the embedding's
  weight (tied), on token ids [2, 4].
* :func:`conditioned` — three Linears on ``x`` and a Linear ``cond_proj`` on a second input
  ``cond`` that only the end reads (added to the last Linear's output); with ``unused=True`` a
  third input ``extra`` that nothing reads.
* :func:`residual_input` — two Linears on ``x`` and ``x`` added to their output: an input read by the first
  node and by the last.
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Body(nn.Module):
    def __init__(self, d: int, n: int, vocab: int, length: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(length, d)
        self.h = nn.ModuleList(Block(d) for _ in range(n))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT(nn.Module):
    def __init__(self, d: int = 8, n: int = 2, vocab: int = 16, length: int = 8) -> None:
        super().__init__()
        self.transformer = Body(d, n, vocab, length)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        return self.lm_head(self.transformer(idx))


def gpt():
    torch.manual_seed(0)
    return GPT(), (torch.randint(0, 16, (2, 8)),)


class Residual(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Linear(d, d)

    def forward(self, x):
        return x + self.ff(self.norm(x))


class ScaledResidual(Residual):
    def forward(self, x):
        return x + self.ff(self.norm(x * 0.5))


class ResidualStack(nn.Module):
    def __init__(self, root_op: bool, d: int = 8, block: type = Residual) -> None:
        super().__init__()
        self.root_op = root_op
        self.embed = nn.Linear(4, d)
        self.blocks = nn.ModuleList(block(d) for _ in range(2))
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        x = self.embed(x)
        if self.root_op:
            x = torch.relu(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def residual_stack(root_op: bool = False):
    torch.manual_seed(0)
    return ResidualStack(root_op), (torch.randn(3, 4),)


def residual_stack_with_root_op():
    return residual_stack(root_op=True)


def scaled_residual_stack():
    torch.manual_seed(0)
    return ResidualStack(False, block=ScaledResidual), (torch.randn(3, 4),)


class SkippingStack(ResidualStack):
    def __init__(self) -> None:
        super().__init__(False)
        self.blocks = nn.ModuleList(Residual(8) for _ in range(4))

    def forward(self, x):
        x = self.embed(x)
        for k in (0, 2):
            x = self.blocks[k](x)
        return self.head(x)


def skipping_stack():
    torch.manual_seed(0)
    return SkippingStack(), (torch.randn(3, 4),)


class ReadingStack(SkippingStack):
    """SkippingStack whose forward also reads blocks.3's weights without calling blocks.3."""

    def forward(self, x):
        return super().forward(x) + self.blocks[3].ff.weight.sum()


def reading_stack():
    torch.manual_seed(0)
    return ReadingStack(), (torch.randn(3, 4),)


class Conditioned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.cond_proj = nn.Linear(2, 4)

    def forward(self, x, cond, extra=None):
        return self.c(self.b(self.a(x))) + self.cond_proj(cond)


def conditioned(unused: bool = False):
    torch.manual_seed(0)
    args = (torch.randn(3, 4), torch.randn(3, 2))
    return Conditioned(), args + ((torch.randn(3, 1),) if unused else ())


def conditioned_unused():
    return conditioned(unused=True)


class ResidualInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x)) + x


def residual_input():
    torch.manual_seed(0)
    return ResidualInput(), (torch.randn(3, 4),)


class Join(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, h, cond):
        return self.lin(torch.cat([h, cond], dim=-1))


class SecondInput(nn.Module):
    """x -> a -> join(., cond) -> head, every operator inside a module: join reads a model input."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.join, self.head = nn.Linear(4, 4), Join(), nn.Linear(4, 3)

    def forward(self, x, cond):
        return self.head(self.join(self.a(x), cond))


def second_input():
    torch.manual_seed(0)
    return SecondInput(), (torch.randn(3, 4), torch.randn(3, 2))


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(16, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        return self.head(self.body(self.wte(idx)))


def tied_lm():
    torch.manual_seed(0)
    return TiedLM(), (torch.randint(0, 16, (2, 4)),)


class EarlyOutput(nn.Module):
    """a -> b -> c, returning a's value beside c's: an output the first node makes."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x)
        return h, self.c(self.b(h))


def early_output():
    torch.manual_seed(0)
    return EarlyOutput(), (torch.randn(3, 4),)


class ReturnsInput(nn.Module):
    """a -> b, returning b's value beside the model's input as given."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.b(self.a(x)), x


def returns_input():
    torch.manual_seed(0)
    return ReturnsInput(), (torch.randn(3, 4),)


class ReturnsLoss(nn.Module):
    """a -> b, returning the mean square of b's value: a 0-dimensional output."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.b(self.a(x)).pow(2).mean()


def returns_loss():
    torch.manual_seed(0)
    return ReturnsLoss(), (torch.randn(3, 4),)
