"""A plan: which nodes each used device holds, in pipeline order.

The plan is pure data; its loads and validity are computed by
:mod:`placement.verification.evaluate`, never stored by the solver that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceAssignment:
    """One device of type ``type`` holding the nodes ``nodes`` (instance ids).

    ``calls`` matters for the latency objective only: the nodes split into sets
    that the device runs one after another, as separate calls, in this order
    (every node of ``nodes`` in exactly one call). Empty means a single call
    holding all of ``nodes``.

    ``b_tasks`` and ``w_tasks`` matter for a split-backward plan only (``docs/backward-split.md``):
    the backward nodes whose activation-gradient task B, and whose weight-gradient task W, run
    on this device; ``nodes`` then says where each node's layer is.
    """

    type: str
    nodes: tuple[int, ...]
    calls: tuple[tuple[int, ...], ...] = ()
    b_tasks: tuple[int, ...] = ()
    w_tasks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    """Device assignments; for pipeline (``stages``) plans, in pipeline order."""

    devices: tuple[DeviceAssignment, ...]

    @property
    def non_empty(self) -> int:
        """Devices that hold at least one node: the plan's stage count (``stages=N``)."""
        return sum(1 for dev in self.devices if dev.nodes)

    def assignment(self) -> dict[int, int]:
        """Map node id -> position of its device in ``devices`` (last one wins on duplicates)."""
        return {v: d for d, dev in enumerate(self.devices) for v in dev.nodes}

