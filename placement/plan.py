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
    """

    type: str
    nodes: tuple[int, ...]
    calls: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Plan:
    """Device assignments; for pipeline (``stages``) plans, in pipeline order."""

    devices: tuple[DeviceAssignment, ...]

    def assignment(self) -> dict[int, int]:
        """Map node id -> position of its device in ``devices`` (last one wins on duplicates)."""
        return {v: d for d, dev in enumerate(self.devices) for v in dev.nodes}


def as_plan(plan: object) -> Plan:
    """A :class:`Plan` from what callers hold: a Plan, a :class:`placement.Result` (its stages), a
    decoded plan document (dict), or the path of a plan file (either format of
    :mod:`placement.io.plans`). Raises :class:`InvalidPlanError` for anything else."""
    from pathlib import Path

    from placement.errors import InvalidPlanError

    if isinstance(plan, Plan):
        return plan
    to_plan = getattr(plan, "to_plan", None)
    if callable(to_plan):
        return to_plan()
    from placement.io.plans import parse_plan, read_plan

    if isinstance(plan, (str, Path)):
        return read_plan(plan)
    if isinstance(plan, dict):
        return parse_plan(plan)
    raise InvalidPlanError(f"plan must be a Plan, a Result, a plan document (dict) or a plan file path, "
                           f"not {type(plan).__name__}")
