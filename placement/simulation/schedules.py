"""Pipeline schedules: the order in which each stage runs its tasks.

A schedule fixes, per stage ``i`` of ``S`` (0-based, pipeline order) and ``m``
micro-batches ``0 .. m-1``, the order of the stage's forward (``F``) and
backward (``B``) tasks; a stage runs them in exactly that order, each as soon
as the stage is free and its inputs have arrived.

* ``stream`` — streaming inference: ``F0, F1, …``. Steady state: one sample
  every max-load.
* ``1f1b-async`` — PipeDream's asynchronous one-forward-one-backward: stage ``i``
  first runs ``w_i = min(S − i − 1, m)`` forwards, then alternates one forward and
  one backward (``F(w_i + j), B(j)``), then the remaining backwards; at most
  ``S − i`` micro-batches are in flight on stage ``i``. One long run, no flush;
  the result is the steady-state time per sample.
* ``gpipe`` — fill and drain: all forwards, then all backwards, then a flush.
  The result is the iteration time of ``m`` micro-batches.
* ``1f1b-flush`` — the order of ``1f1b-async`` for one iteration of ``m``
  micro-batches followed by a flush (PipeDream-Flush, Megatron's 1F1B).
* ``split-backward`` — the ``1f1b-flush`` order of ``F`` and activation-gradient
  ``B`` tasks; each weight-gradient task ``W(j)`` (ready when ``B(j)`` ends) fills
  the stage's idle time: it runs only at a moment when the stage's next ``F``/``B``
  task is not ready (LayerPipe, zero-bubble pipelines).
* ``zb-h1`` — Qi et al.'s memory-efficient zero-bubble schedule (ZB-H1): the
  ``split-backward`` order (1F1B's ``F``/``B`` order, ``W`` filling idle time) with at
  most ``S`` micro-batches held per stage, the most 1F1B holds (on its first stage):
  ``F(j)`` waits until the stage has finished every task of micro-batch ``j − S``.
  A stage holds a micro-batch from the start of its ``F`` to the end of its ``W``.
* ``zb-h2`` — Qi et al.'s zero-bubble schedule (ZB-H2): stage ``i`` runs
  ``2(S − i) − 2`` warm-up forwards (``2(S − i) − 1`` before its first ``B``) and holds
  at most ``2S − 1`` micro-batches; otherwise as ``zb-h1``.

Split-backward plans (:mod:`placement.simulation.split`: the plan places every W call, and a
stage may run W parts of other stages' layers) run under every training schedule with a ``W``
call per stage and micro-batch. Under ``1f1b-async`` and ``1f1b-flush`` the ``W`` calls are in
the order: stage ``i`` runs ``W(j − δ_i)`` right after ``B(j)`` (the remaining ones after its
last ``B``), with ``δ_i = 0`` when its ``W`` call receives nothing from another stage's ``B`` (its
inputs are there once its own ``B(j)`` ends) and ``δ_i = 1 + max |k − i|`` over the stages ``k``
whose ``B`` output it receives otherwise; nothing waits for a ``W``
(delayed weight updates), so a steady state runs at the max load. Stage ``i`` then holds at most
``S − i + δ_i`` micro-batches, the order's own limit, enforced as an admission limit too
(:func:`placement.simulation.program.stage_caps`). Under ``gpipe``,
``split-backward`` and the zero-bubble schedules the ``W`` calls fill idle time as above; under
``gpipe`` a split plan also flushes between the phases (no stage starts a backward call before every
stage has run all its forwards), so its iteration grows by exactly ``max FW + max BW`` per micro-batch.

Both zero-bubble schedules also respect each device's memory bound: a stage whose
activations per micro-batch are known holds at most as many micro-batches as fit
``(memory bound − node memory) / activation bytes`` (and at most ``max_in_flight`` when
given), and runs at most that number minus one warm-up forwards, and no more than the stage
before it (:func:`warmup_counts`: more would deadlock). The limit ``L_i``
(:func:`in_flight_cap`) becomes dependencies ``F(j) ← every task of ``j − L_i``
on the stage``; with ``L_i`` at least the forwards the stage runs before its first
``B``, the order never waits for a task ordered after it.

Why ``split-backward`` never ends later than ``1f1b-flush``: take any stage and
any of its ``F``/``B`` tasks ``T``; let ``t0`` be the last moment before ``T``
starts at which the stage was idle (no ready ``F``/``B`` task, no pending
``W``), and ``U`` the task it started then. From ``t0`` on the stage only ran the
tasks ``U .. T−1`` of its order and the ``W`` of the ``B`` among them, so ``T``
starts by ``max(ready(T), t0 + Σ_{U..T−1} (F or B+W))``. Under ``1f1b-flush``
``U`` cannot start before ``t0`` and the same work (each ``B`` with its ``W``)
precedes ``T``, so by induction over the tasks every ``F``/``B`` task starts no
later, its inputs arrive no later, and every stage (its last ``W`` included)
finishes no later. The argument uses the device's own order only, so it holds
when communication is inside the call (the default); with separate link
resources it is not guaranteed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from placement.errors import InvalidParameterError

FORWARD = "F"
BACKWARD = "B"
WEIGHT = "W"


#: the orders a schedule's stages run their main tasks in (:func:`stage_order`): ``stream`` (forwards only),
#: ``fill-drain`` (every forward, then every backward) and ``1f1b`` (warm-up forwards, then one forward and one
#: backward in turn)
ORDERS = ("stream", "fill-drain", "1f1b")


@dataclass(frozen=True)
class Schedule:
    """A named schedule: what graphs it runs, the order its stages run their tasks in (one of
    :data:`ORDERS`: stated, so that a new schedule runs no other's order by default) and how its result is
    read."""

    name: str
    training: bool          # runs backward tasks (training graphs only)
    flush: bool             # one iteration ending in a flush (result: iteration time)
    split_backward: bool    # backward split into B and filler W tasks
    order: str              # one of ORDERS: "stream" exactly where not training
    summary: str
    zero_bubble: str | None = None   # "h1" or "h2": the zero-bubble warm-up and in-flight limit

    def __post_init__(self) -> None:
        if self.order not in ORDERS or (self.order == "stream") == self.training:
            raise InvalidParameterError("order", f"of schedule {self.name!r} must be one of {', '.join(ORDERS)}, "
                                                 f"'stream' exactly where it does not train, not {self.order!r}")

    @property
    def weight_calls_in_order(self) -> bool:
        """Whether a split-backward plan's W calls take places in the stages' order (1F1B without filler W
        tasks: ``W(j − δ)`` right after ``B(j)``); otherwise they fill the stages' idle time."""
        return self.order == "1f1b" and not self.split_backward


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("stream", False, False, False, "stream", "streaming inference (forward only), steady state"),
    Schedule("1f1b-async", True, False, False, "1f1b", "PipeDream asynchronous 1F1B, steady state"),
    Schedule("gpipe", True, True, False, "fill-drain", "all forwards, all backwards, flush"),
    Schedule("1f1b-flush", True, True, False, "1f1b", "1F1B, then flush"),
    Schedule("split-backward", True, True, True, "1f1b",
             "1F1B with weight-gradient tasks filling idle time, then flush"),
    Schedule("zb-h1", True, True, True, "1f1b",
             "zero-bubble ZB-H1: split backward, at most S micro-batches held, then flush", "h1"),
    Schedule("zb-h2", True, True, True, "1f1b", "zero-bubble ZB-H2: split backward, 2(S-i)-1 forwards before the "
                                                "first backward, at most 2S-1 held, then flush", "h2"),
)}


def get_schedule(name: object) -> Schedule:
    """The schedule called ``name``; anything else is refused, and a name of Piper instances' schedules
    (:data:`placement.parallel.timing.SCHEDULES`) with a word on what they schedule."""
    if isinstance(name, str) and name in SCHEDULES:
        return SCHEDULES[name]
    from placement.parallel.timing import SCHEDULES as PIPER_SCHEDULES

    piper = ""
    if isinstance(name, str) and name in PIPER_SCHEDULES:
        here = ": 1F1B here is '1f1b-flush', or '1f1b-async' without a flush" if name == "1f1b" else ""
        piper = f" ({name!r} schedules Piper instances, whose stages have data- and tensor-parallel degrees{here})"
    raise InvalidParameterError("schedule", f"must be one of {', '.join(map(repr, SCHEDULES))}, not {name!r}{piper}")


def warmup_forwards(stage: int, n_stages: int, microbatches: int) -> int:
    """Forwards stage ``stage`` runs before its first backward under 1F1B: ``min(S − i − 1, m)``."""
    return min(n_stages - stage - 1, microbatches)


def in_flight_cap(schedule: Schedule, stage: int, n_stages: int, fits: int | None = None) -> int | None:
    """The most micro-batches stage ``stage`` may hold under ``schedule``: ``S`` (ZB-H1), ``2S − 1``
    (ZB-H2), at most ``fits`` (what its memory holds) when given; ``None``: no limit of its own."""
    if schedule.zero_bubble is None:
        return None
    cap = n_stages if schedule.zero_bubble == "h1" else 2 * n_stages - 1
    return cap if fits is None else min(cap, fits)


def warmup_counts(schedule: Schedule, n_stages: int, microbatches: int,
                  caps: Sequence[int | None] | None = None) -> list[int]:
    """Per stage, the forwards it runs before its first backward under a 1F1B-type order: the
    schedule's (``min(S − i − 1, m)``, ZB-H2 ``min(2(S − i) − 2, m)``), at most ``cap − 1`` for its
    in-flight limit ``caps[i]`` (:func:`in_flight_cap`), and at most the warm-up of the stage before
    it. A stage that ran more warm-up forwards than the stage before it would wait for a forward that
    stage orders after a backward waiting on this one: a deadlock (a memory bound lowering one
    stage's limit and not the next one's made it)."""
    m = microbatches
    counts: list[int] = []
    for stage in range(n_stages):
        if schedule.zero_bubble == "h2":
            warm = min(2 * (n_stages - stage) - 2, m)
        else:
            warm = warmup_forwards(stage, n_stages, m)
        cap = caps[stage] if caps is not None else None
        if cap is not None:
            warm = min(warm, cap - 1)
        if counts:
            warm = min(warm, counts[-1])
        counts.append(warm)
    return counts


def stage_order(schedule: Schedule, stage: int, n_stages: int, microbatches: int,
                warm: int | None = None, w_lag: int | None = None) -> list[tuple[str, int]]:
    """The ``(kind, micro-batch)`` main tasks of one stage in the order it runs them; ``warm`` is its
    warm-up forwards under a 1F1B-type order (default: :func:`warmup_counts` without in-flight limits)."""
    m = microbatches
    if schedule.order == "stream":
        return [(FORWARD, j) for j in range(m)]
    if schedule.order == "fill-drain":
        return [(FORWARD, j) for j in range(m)] + [(BACKWARD, j) for j in range(m)]
    if warm is None:
        warm = warmup_counts(schedule, n_stages, m)[stage]
    order = [(FORWARD, j) for j in range(warm)]
    for j in range(m):
        if warm + j < m:
            order.append((FORWARD, warm + j))
        order.append((BACKWARD, j))
        if w_lag is not None and j >= w_lag:
            order.append((WEIGHT, j - w_lag))
    if w_lag is not None:
        order += [(WEIGHT, j) for j in range(max(0, m - w_lag), m)]
    return order
