"""A plan: which nodes each used device holds, in pipeline order.

The plan is pure data; its loads and validity are computed by
:mod:`placement.verify.evaluate`, never stored by the solver that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceAssignment:
    """One device of type ``type`` holding the nodes ``nodes`` (instance ids)."""

    type: str
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """Device assignments; for pipeline (``stages``) plans, in pipeline order."""

    devices: tuple[DeviceAssignment, ...]

    def assignment(self) -> dict[int, int]:
        """Map node id -> position of its device in ``devices`` (last one wins on duplicates)."""
        return {v: d for d, dev in enumerate(self.devices) for v in dev.nodes}
