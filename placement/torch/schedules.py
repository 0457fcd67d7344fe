"""The torch schedules a pipeline plan runs with, and the one wrapper they may need.

``gpipe`` is ``torch.distributed.pipelining.ScheduleGPipe`` and ``1f1b`` is ``Schedule1F1B``.
Three kinds of stage get an instance of a subclass of that schedule instead; every other stage's
schedule is torch's own class, unwrapped:

* a stage that holds shared parameters: its ``step`` sums those parameters' gradients across
  their holders after the schedule's own ``step`` (:class:`placement.torch.sharing.GradientExchange`)
  whenever the step runs a backward pass;
* stage 0, which checks that each micro-batch is like the one the program was exported for: its
  ``step`` checks every micro-batch (or the lack of any input) before the first runs, so that a refused step
  sends nothing to the other stages, and raises that check's typed error itself, where torch's runtime wraps it
  in a ``RuntimeError`` of its own (``[Stage 0] failed to run forward``);
* the last stage, where ``loss_fn`` reads ``target``: its ``step`` (and ``eval``, which calls it) refuses
  a call without ``target`` where the schedule has a ``loss_fn`` (torch failed at the first
  micro-batch's loss with a ``TypeError`` of its own, after its forward), a ``target`` where it has
  none (nothing reads it: no loss and no gradient), and a ``target`` tensor whose first dimension does not
  split into the step's micro-batches evenly (torch cut it into parts of other sizes, unlike the
  micro-batches stage 0 takes, or failed with an ``AssertionError`` where it has fewer rows than
  micro-batches), before it receives or computes anything. Other stages ignore ``target``, as torch
  does, so that every rank may make the same call.

With ``scale_grads``,
torch divides every gradient a stage holds by the number of micro-batches at the end of each
step, those accumulated in earlier steps included; the shared parameters' earlier gradients are
divided alike, so that every parameter of the model accumulates the same way. Gradients accumulated
over several steps so are not the model's: every stage's schedule with ``scale_grads`` and a
``loss_fn`` warns (:class:`AccumulatedGradientWarning`) at a step that begins with a non-zero gradient
in one of its stage's parameters, rather than raise, which would leave the other stages waiting.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from placement.errors import InvalidParameterError, PlacementError
from placement.parameters import integer, one_of
from placement.wording import first_few

SCHEDULES = ("gpipe", "1f1b")
#: the keywords of torch's ``step`` that are no inputs of the model
STEP_KEYWORDS = ("target", "losses", "return_outputs", "loss_kwargs")


class AccumulatedGradientWarning(UserWarning):
    """A step of a schedule with ``scale_grads=True`` begins with gradients its stage's parameters hold from earlier
    steps: torch divides those by the number of micro-batches again at the end of the step."""


class WarnsScaledAccumulation:
    """Mixin for a torch schedule with ``scale_grads`` and a ``loss_fn``: ``step`` warns
    (:class:`AccumulatedGradientWarning`) where a parameter of its stage holds a non-zero gradient before it."""

    def step(self, *args: Any, **kwargs: Any) -> Any:
        stage = getattr(self, "_stage", None)
        if getattr(self, "scale_grads", False) and getattr(self, "_has_backward", False) and stage is not None:
            held = accumulated_gradients(stage.submod)
            if held:
                count = getattr(self, "_n_microbatches", 1)
                warnings.warn(f"stage {stage.stage_index}: step() with scale_grads=True begins with gradients its "
                              f"parameters hold from earlier steps ({first_few([repr(name) for name in held])}): torch "
                              f"divides every gradient a stage holds by the number of micro-batches ({count}) at the "
                              "end of each step, those of earlier steps again, so gradients accumulated over several "
                              "steps are not the model's; zero the gradients before each step "
                              "(optimizer.zero_grad()), or use scale_grads=False and divide the loss in loss_fn",
                              AccumulatedGradientWarning, stacklevel=2)
        return super().step(*args, **kwargs)  # type: ignore[misc]


def accumulated_gradients(module: Any) -> list[str]:
    """The names of ``module``'s parameters that hold a gradient with a non-zero element (a sparse gradient: a
    non-zero stored value)."""
    import torch

    named = [(name, p.grad) for name, p in module.named_parameters() if p.grad is not None]
    if not named:
        return []
    flags = [(grad._values() if grad.is_sparse else grad).ne(0).any() for _, grad in named]
    try:   # one transfer from the device for the whole stage, not one per parameter
        held = torch.stack(flags).tolist()
    except RuntimeError:   # flags on several devices
        held = [bool(flag) for flag in flags]
    return [name for (name, _), nonzero in zip(named, held) if nonzero]


class SumsSharedGradients:
    """Mixin for a torch schedule: ``step`` then the exchange of :attr:`gradient_exchange`."""

    gradient_exchange: Any = None

    def step(self, *args: Any, **kwargs: Any) -> Any:
        backward = bool(getattr(self, "_has_backward", False))
        kept = self.gradient_exchange.set_aside() if backward else None
        try:
            result = super().step(*args, **kwargs)  # type: ignore[misc]
        except BaseException:
            if kept is not None:   # a caught error must not cost the gradients accumulated before
                self.gradient_exchange.put_back(kept)
            raise
        if backward:   # torch's scale_grads divides every gradient a stage holds, earlier steps' too: so here
            scale = getattr(self, "_n_microbatches", 1) if getattr(self, "scale_grads", False) else 1
            self.gradient_exchange.exchange(kept, scale)
        return result


class RaisesInputErrors:
    """Mixin for stage 0's torch schedule: ``step`` raises the package's error that its stage's input
    check raised (:func:`placement.torch.partition.check_microbatch`), not torch's ``RuntimeError``
    around it."""

    def step(self, *args: Any, **kwargs: Any) -> Any:
        check = getattr(getattr(self, "_stage", None), "submod", None)
        check = getattr(check, "check_inputs", None)
        inputs = {k: v for k, v in kwargs.items() if k not in STEP_KEYWORDS}
        if check is not None and (args or inputs):   # every micro-batch before the first runs: nothing is sent
            check_splittable(args, inputs, getattr(self, "_n_microbatches", 1))
            arg_mbs, kwarg_mbs = self._split_inputs(args, inputs)  # type: ignore[attr-defined]
            for mb_args, mb_kwargs in zip(arg_mbs, kwarg_mbs):
                check(tuple(mb_args), dict(mb_kwargs))
        elif check is not None:   # no input at all: torch's first step sent to the next stage before its forward
            check((), {})
        if isinstance(self, ChecksTarget):   # stage 0 is the last too: its target after its inputs
            check_target_rows(kwargs.get("target"), getattr(self, "_n_microbatches", 1))
        try:
            return super().step(*args, **kwargs)  # type: ignore[misc]
        except RuntimeError as exc:
            cause = exc.__cause__
            while cause is not None and not isinstance(cause, PlacementError):
                cause = cause.__cause__
            if cause is None:
                raise
            raise cause from None


def check_splittable(args: tuple, kwargs: dict, microbatches: int) -> None:
    """Refuse tensor inputs of ``step()`` that torch's runtime cannot split into ``microbatches`` micro-batches
    along their first dimension: a 0-dimensional one (torch's ``IndexError``), or, with more than one
    micro-batch, one whose first dimension is not the first input's (torch cut the batch into fewer
    micro-batches than the step has, and the batch was refused as if it were the input of the wrong size)."""
    import torch

    from placement.torch.planning import first_dimension_outlier, tensor_inputs

    tensors = tensor_inputs(args, kwargs, torch)
    for where, parameter, value in tensors:
        if value.dim() == 0:
            raise InvalidParameterError(parameter, f"of the pipeline's step() holds the 0-dimensional tensor {where}, "
                                                   "which torch's runtime cannot split into micro-batches (it splits "
                                                   "every tensor input along its first dimension): give the inputs "
                                                   "the plan was made with, a batch of micro-batches like them")
    outlier = first_dimension_outlier(tensors) if microbatches > 1 else None
    if outlier is not None:
        (where, parameter, value), (first_where, _, first) = outlier
        raise InvalidParameterError(parameter, f"of the pipeline's step() holds {where} of first dimension "
                                               f"{value.shape[0]}, but {first_where}'s is {first.shape[0]}: "
                                               "torch's runtime splits every tensor input into micro-batches "
                                               "along its first dimension, so each must hold the step's batch "
                                               f"({microbatches} micro-batches like the example inputs the plan "
                                               "was made with)")


class ChecksTarget:
    """Mixin for the last stage's torch schedule: ``step`` refuses a missing or an unread ``target`` with the
    package's error before torch's runs (module docstring)."""

    def step(self, *args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("target") is not None
        last = getattr(getattr(self, "_stage", None), "stage_index", None)
        if getattr(self, "_loss_fn", None) is not None and not given:
            raise InvalidParameterError("target", f"of the pipeline's step() must be given on the last stage (stage "
                                                  f"{last}) in training: loss_fn computes each micro-batch's loss from "
                                                  "its output and that micro-batch's rows of target")
        if getattr(self, "_loss_fn", None) is None and given:
            raise InvalidParameterError("target", f"of the pipeline's step() is read on the last stage (stage {last}) "
                                                  "by loss_fn only, and this schedule has none: it runs the forward "
                                                  "alone, with no loss and no gradient; give loss_fn to train, or no "
                                                  "target")
        if last != 0:   # a stage 0 checks its inputs first (RaisesInputErrors), then this
            check_target_rows(kwargs.get("target"), getattr(self, "_n_microbatches", 1))
        return super().step(*args, **kwargs)  # type: ignore[misc]


def check_target_rows(target: Any, microbatches: int) -> None:
    """Refuse a ``target`` tensor that torch's ``step()`` would cut into micro-batches of different sizes
    (``tensor_split`` along its first dimension), unlike the inputs, which stage 0 takes in micro-batches of the
    planned size; or could not cut (0-dimensional, or fewer rows than micro-batches: torch's ``IndexError`` and
    ``AssertionError``)."""
    rows = getattr(target, "shape", (None,))[:1]
    if target is None or not (rows == () or (rows[0] is not None and rows[0] % microbatches)):
        return
    got = "a 0-dimensional target, which does" if rows == () else f"{rows[0]} rows, which do"
    raise InvalidParameterError("target", f"of the pipeline's step() is cut into {microbatches} micro-batches along "
                                          f"its first dimension, like the inputs, which stage 0 takes in micro-batches "
                                          f"of one size; got {got} not split into {microbatches} equal "
                                          "parts: give it the batch's rows, as many per micro-batch as the outputs")


def check_microbatches(schedule: str, microbatches: int, stages: int) -> None:
    """1F1B fills the pipeline with one micro-batch per stage before its steady state: it needs at
    least as many micro-batches as stages (torch's ``Schedule1F1B`` refuses fewer)."""
    if schedule == "1f1b" and microbatches < stages:
        raise InvalidParameterError("microbatches", f"must be at least the number of stages ({stages}) under the "
                                                    f"1f1b schedule, got {microbatches}; use more micro-batches, "
                                                    f"fewer stages or schedule 'gpipe'")


def make_schedule(stage: Any, loss_fn: Callable | None, schedule: str, microbatches: int, scale_grads: bool,
                  exchange: Any = None) -> Any:
    """The torch schedule ``schedule`` for ``stage`` (module docstring)."""
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

    one_of("schedule", schedule, SCHEDULES)
    integer("microbatches", microbatches, smallest=1)
    check_microbatches(schedule, microbatches, stage.num_stages)
    if loss_fn is not None and not callable(loss_fn):   # torch called it at the last stage's first backward
        raise InvalidParameterError("loss_fn", f"must be a callable (output, target) -> loss, or None for a "
                                               f"forward-only schedule, not {type(loss_fn).__name__}")
    base = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    sharing = exchange is not None and bool(exchange.entries)
    scaled = scale_grads is True and loss_fn is not None
    mixins = (((WarnsScaledAccumulation,) if scaled else ())
              + ((ChecksTarget,) if stage.stage_index == stage.num_stages - 1 else ())
              + ((RaisesInputErrors,) if stage.stage_index == 0 else ()) + ((SumsSharedGradients,) if sharing else ()))
    if not mixins:
        return base(stage, microbatches, loss_fn=loss_fn, scale_grads=scale_grads)
    wrapped = type(base.__name__, (*mixins, base), {"__module__": __name__})
    result = wrapped(stage, microbatches, loss_fn=loss_fn, scale_grads=scale_grads)
    if sharing:
        result.gradient_exchange = exchange
    return result
