"""Whether a model's outputs for a sample depend on the other samples of its batch.

torch's pipeline runtime runs each micro-batch alone, so a model whose forward mixes the samples of
its batch (a mean over the batch subtracted from each sample, in-batch negatives of a contrastive
loss, a flip along the batch) computes, for each sample, something else in a pipeline than for the
whole batch, and trains on it: no output shape tells (each output keeps the batch first). It shows
in the outputs themselves: the model is run on the example micro-batch, on as many other samples
(each tensor input's samples in reverse order, floating-point values halved, integers one less
where above their least, booleans as they are) and on both at once, two micro-batches; where an
output for both is not the outputs for each concatenated along the first dimension, as the runtime
concatenates them (up to rounding: relative ``1e-4``), ``step()`` returns it otherwise than the model
does. An output that differs between two runs on the same samples from other random states (noise
drawn in forward, a dropout that ignores the mode) tells nothing and is not checked. Outputs
:func:`placement.torch.partition.batch_outputs` tells of (their first dimension does not follow
the batch) are left to it; with one sample a micro-batch the runs tell it which dimensions of each
output grow with the batch (:func:`runs_following_batch`), in place of an export with a symbolic batch.

The runs are in evaluation mode (dropout off, batch normalisation on its running statistics: that
batch normalisation in training mode normalises each micro-batch by its own statistics is a
property of pipelining the docs state), without gradients, on one thread of the CPU, each on its own
copies of the inputs and from the model as found: every module's mode, parameter and buffer, and
torch's random state, are put back after each, and what torch warns of in them is not passed on (a
mode the caller did not ask for: ``nn.TransformerEncoder``'s nested tensors). A model or inputs on
another device (the meta device; a GPU, whose context a process forked after planning could not use), a
model whose forward costs more than :data:`MOST_FLOPS` per micro-batch or whose tensors take more than
:data:`MOST_BYTES` (the runs would take long), and one that fails on the other samples are not run.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

#: no check of a model whose forward costs more FLOPs than this per micro-batch (the runs: seconds on a CPU)
MOST_FLOPS = 2e10
#: nor of one whose parameters and buffers take more bytes than this (each run works on a copy of them)
MOST_BYTES = 2 ** 30


@dataclass(frozen=True)
class SampleRuns:
    """The model's outputs (flattened, in the export's order) for the example micro-batch (``mine``, and
    ``again`` from another random state), for as many other samples (``theirs``) and for both at once
    (``together``)."""

    mine: list[Any]
    again: list[Any]
    theirs: list[Any]
    together: list[Any]


def sample_runs(model: Any, args: Sequence[Any], kwargs: dict | None, batch: int, flops: float,
                outputs: int) -> SampleRuns | None:
    """The runs of the module docstring of ``model`` on its micro-batch of ``batch`` samples (the first
    dimension of the tensor inputs ``args`` and ``kwargs``); ``flops``: its forward's per micro-batch;
    ``outputs``: how many outputs its export returns. ``None`` where the model is not run (module
    docstring) or returns another number of outputs."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    if flops > MOST_FLOPS or batch < 1:
        return None
    tensors = [t for t in tree_flatten((tuple(args), kwargs or {}))[0] if isinstance(t, torch.Tensor)]
    state = [*model.parameters(), *model.buffers()]
    if not tensors or any(t.device.type != "cpu" for t in tensors + state):
        return None
    if sum(t.numel() * t.element_size() for t in state) > MOST_BYTES:
        return None

    def batched(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch

    def run(change: Callable[[Any], Any], seed: int = 0) -> list[Any]:
        # each run on its own copies of the inputs (a model may write into them), from the state as found; what
        # torch warns of in these runs is of a mode the caller did not ask for (nn.TransformerEncoder's nested
        # tensors, a path it takes in evaluation without gradients alone)
        with _left_as_found(model, torch), _one_thread(torch), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.default_generator.manual_seed(seed)
            given = tree_map(lambda v: change(v) if batched(v) else v, (tuple(args), kwargs or {}))
            # copies: an output may be a view of a parameter or buffer, which putting the state back writes into
            return [v.clone() if isinstance(v, torch.Tensor) else v
                    for v in tree_flatten(model(*given[0], **given[1]))[0]]

    try:
        runs = SampleRuns(run(lambda v: v.clone()), run(lambda v: v.clone(), seed=1),
                          run(lambda v: _others(v, torch)), run(lambda v: torch.cat([v, _others(v, torch)])))
    except Exception:   # the other samples are no inputs the model takes: nothing is known
        return None
    if not len(runs.mine) == len(runs.again) == len(runs.theirs) == len(runs.together) == outputs:
        return None
    return runs


def runs_following_batch(runs: SampleRuns) -> list[tuple[bool, ...]]:
    """For each output, whether each of its dimensions grows with the batch, as the runs show it: those
    whose sizes differ between one micro-batch and two (as
    :func:`placement.torch.partition.outputs_following_batch` reads them off an export, without telling an
    output that interleaves its samples' rows: :func:`mixing_note` does)."""
    import torch

    return [tuple(a != b for a, b in zip(mine.shape, together.shape))
            if isinstance(mine, torch.Tensor) and isinstance(together, torch.Tensor) and mine.dim() == together.dim()
            else () for mine, together in zip(runs.mine, runs.together)]


def mixing_note(runs: SampleRuns, told: set[int]) -> str | None:
    """What the pipeline does to the outputs that mix the samples of the micro-batch (module docstring), or
    ``None``; ``told``: the positions of those another warning tells of
    (:func:`placement.torch.partition.batch_outputs`), not judged."""
    import torch

    outputs = len(runs.mine)
    drawn = {k for k in range(outputs) if _unequal(runs.mine[k], runs.again[k], torch)}   # random in evaluation
    mixed = [k for k in range(outputs)
             if k not in told | drawn and _differs(runs.mine[k], runs.theirs[k], runs.together[k], torch)]
    if not mixed:
        return None
    which = (f"outputs {', '.join(map(str, mixed))} for a sample depend" if len(mixed) > 1 else
             f"output {mixed[0]} for a sample depends" if outputs > 1 else "output for a sample depends")
    return (f"the model's {which} on the other samples of its batch (what it returns for two micro-batches "
            "at once differs from what it returns for each: a statistic over the batch, in-batch negatives, a "
            "flip along the batch, state forward updates from the batch): the pipeline runtime runs each "
            "micro-batch alone, so step() returns, and loss_fn and the gradients see, what each micro-batch's "
            "samples give among themselves, otherwise than the model does for the whole batch; compute what "
            "mixes the samples of different micro-batches outside the pipeline, or plan one micro-batch a step")


def _others(value: Any, torch: Any) -> Any:
    """Samples other than ``value``'s, of its shape and type (module docstring)."""
    flipped = value.flip(0)
    if flipped.is_floating_point() or flipped.is_complex():
        return flipped * 0.5
    if flipped.dtype == torch.bool:
        return flipped
    return torch.where(flipped > flipped.min(), flipped - 1, flipped)


def _differs(mine: Any, theirs: Any, together: Any, torch: Any) -> bool:
    """Whether ``together`` (an output for the micro-batch followed by other samples) is not ``mine``
    followed by ``theirs`` (the outputs for each alone), as the pipeline runtime concatenates them; outputs
    of no such shapes are left out."""
    if not all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in (mine, theirs, together)):
        return False
    if mine.shape[1:] != theirs.shape[1:] or tuple(together.shape) != (mine.shape[0] + theirs.shape[0],
                                                                     *mine.shape[1:]):
        return False
    return _unequal(torch.cat([mine, theirs]), together, torch)


def _unequal(a: Any, b: Any, torch: Any) -> bool:
    """Whether the tensors ``a`` and ``b`` differ beyond rounding (relative ``1e-4`` of ``a``'s largest
    magnitude, NaN equal to NaN; exactly for integers and booleans); other values are not compared."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return not torch.equal(a, b)
    wide = torch.complex128 if a.is_complex() else torch.float64
    a, b = a.to(wide), b.to(wide)
    scale = float(a.abs().nan_to_num(0, 0, 0).max()) if a.numel() else 0.0
    return not torch.allclose(b, a, rtol=1e-4, atol=1e-6 * max(scale, 1e-30), equal_nan=True)


@contextlib.contextmanager
def _one_thread(torch: Any) -> Iterator[None]:
    """Run on one CPU thread, then give torch back its number of threads: the runs start no pool of threads
    (OpenMP's), which a process forked after them would inherit unusable (its first multi-threaded operator
    then hangs: the stages of ranks forked after planning never sent their first micro-batch)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def _left_as_found(model: Any, torch: Any) -> Iterator[None]:
    """Run ``model`` in evaluation mode; then put back every module's mode, every parameter's and
    buffer's values (and the tensors themselves, where forward replaced one) and torch's random state."""
    modes = [(module, module.training) for module in model.modules()]
    kept = [(module, store, name, tensor, tensor.detach().clone())
            for module in model.modules() for store in (module._parameters, module._buffers)
            for name, tensor in store.items() if tensor is not None]
    try:
        with torch.random.fork_rng(devices=[]):
            model.eval()
            yield
    finally:
        for module, training in modes:
            module.training = training
        with torch.no_grad():
            for module, store, name, tensor, value in kept:
                store[name] = tensor
                tensor.copy_(value)
