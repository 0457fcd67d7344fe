"""A plan: which nodes each used device holds, in pipeline order.

The plan is pure data; its loads and validity are computed by
:mod:`placement.verification.evaluate`, never stored by the solver that produced it.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.errors import InvalidPlanError
from placement.parameters import keywords_checked
from placement.problem.instance import is_flag


def _ids(value: object, what: str) -> tuple[int, ...]:
    """``value`` as a tuple of node ids (integers of any integer type); :class:`InvalidPlanError`
    naming ``what`` otherwise (a mapping too, whose iteration gives its keys)."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise InvalidPlanError(f"{what} must be a sequence of node ids, got {type(value).__name__}")
    ids = tuple(value)
    if all(type(v) is int for v in ids):
        return ids
    for v in ids:
        if not isinstance(v, numbers.Integral) or is_flag(v):
            raise InvalidPlanError(f"{what}: a node id must be an integer, got {type(v).__name__} {v!r}")
    return tuple(int(v) for v in ids)


@keywords_checked
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

    def __post_init__(self) -> None:
        if not isinstance(self.type, str):
            raise InvalidPlanError(f"a device's type must be a string, got {type(self.type).__name__}")
        where = f"device of type {self.type!r}"
        object.__setattr__(self, "nodes", _ids(self.nodes, f"{where}: nodes"))
        if isinstance(self.calls, (str, bytes)) or not hasattr(self.calls, "__iter__"):
            raise InvalidPlanError(f"{where}: calls must be a sequence of sequences of node ids, got "
                                   f"{type(self.calls).__name__}")
        object.__setattr__(self, "calls", tuple(_ids(c, f"{where}: calls") for c in self.calls))
        object.__setattr__(self, "b_tasks", _ids(self.b_tasks, f"{where}: b_tasks"))
        object.__setattr__(self, "w_tasks", _ids(self.w_tasks, f"{where}: w_tasks"))


def typed_sequence(items: Any, field: str, kind: type) -> tuple:
    """``items``, a plan's ``field``, as a tuple of ``kind``; :class:`InvalidPlanError` for a text, a mapping or
    no sequence at all, or an item of another type."""
    if isinstance(items, (str, bytes, Mapping)) or not hasattr(items, "__iter__"):
        raise InvalidPlanError(f"a plan's {field} must be a sequence of {kind.__name__}, got {type(items).__name__}")
    items = tuple(items)
    for k, item in enumerate(items):
        if not isinstance(item, kind):
            raise InvalidPlanError(f"{field}[{k}] must be a {kind.__name__}, got {type(item).__name__}")
    return items


@keywords_checked
@dataclass(frozen=True)
class Plan:
    """Device assignments; for pipeline (``stages``) plans, in pipeline order."""

    devices: tuple[DeviceAssignment, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", typed_sequence(self.devices, "devices", DeviceAssignment))

    @property
    def non_empty(self) -> int:
        """Devices that hold at least one node: the plan's stage count (``stages=N``)."""
        return sum(1 for dev in self.devices if dev.nodes)

    def assignment(self) -> dict[int, int]:
        """Map node id -> position of its device in ``devices`` (last one wins on duplicates)."""
        return {v: d for d, dev in enumerate(self.devices) for v in dev.nodes}

