"""The torch schedules a pipeline plan runs with, and the one wrapper they may need.

``gpipe`` is ``torch.distributed.pipelining.ScheduleGPipe`` and ``1f1b`` is ``Schedule1F1B``.
A stage that holds shared parameters gets an instance of a subclass of that schedule whose
``step`` sums those parameters' gradients across their holders after the schedule's own
``step`` (:class:`placement.torch.sharing.GradientExchange`) whenever the step runs a
backward pass; otherwise the schedule is torch's own class, unwrapped. With ``scale_grads``,
torch divides every gradient a stage holds by the number of micro-batches at the end of each
step, those accumulated in earlier steps included; the shared parameters' earlier gradients are
divided alike, so that every parameter of the model accumulates the same way.
"""

from __future__ import annotations

from typing import Any, Callable

from placement.errors import InvalidParameterError
from placement.parameters import integer, one_of

SCHEDULES = ("gpipe", "1f1b")


class SumsSharedGradients:
    """Mixin for a torch schedule: ``step`` then the exchange of :attr:`gradient_exchange`."""

    gradient_exchange: Any = None

    def step(self, *args: Any, **kwargs: Any) -> Any:
        backward = bool(getattr(self, "_has_backward", False))
        kept = self.gradient_exchange.set_aside() if backward else None
        result = super().step(*args, **kwargs)  # type: ignore[misc]
        if backward:   # torch's scale_grads divides every gradient a stage holds, earlier steps' too: so here
            scale = getattr(self, "_n_microbatches", 1) if getattr(self, "scale_grads", False) else 1
            self.gradient_exchange.exchange(kept, scale)
        return result


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
    base = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    if exchange is None or not exchange.entries:
        return base(stage, microbatches, loss_fn=loss_fn, scale_grads=scale_grads)
    wrapped = type(base.__name__, (SumsSharedGradients, base), {"__module__": __name__})
    result = wrapped(stage, microbatches, loss_fn=loss_fn, scale_grads=scale_grads)
    result.gradient_exchange = exchange
    return result
