"""What :func:`placement.solve` returns for a Piper instance: a verified :class:`ParallelResult`.

Data only: the status (the words of :class:`placement.result.Status`), the plan, its value (the
largest stage time per sample, as the independent evaluator computed it), the proven bound and
gap, the evaluator's per-stage figures, and the Megatron-style hand-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from placement.parallel.plan import ParallelPlan
from placement.parallel.timing import FORWARD_SHARE
from placement.result import Status

if TYPE_CHECKING:
    from placement.verification.parallel import ParallelEvaluation

PLAN_FORMAT = "placement-parallel-plan/1"


@dataclass(frozen=True)
class ParallelResult:
    """``value``: the ``objective`` of ``plan`` — ``throughput``: its largest stage time per sample
    (Piper's objective) as evaluated; ``time-per-batch``: the schedule's exact time per batch, fill,
    drain, waits and all-reduce included (:mod:`placement.parallel.timing`) — and ``bound`` a proven
    lower bound on it; ``time_per_batch``: the plan's exact time per batch under the schedule
    (``piper``: the 1F1B order), whatever the objective; ``megatron``: the hand-off (:mod:`.handoff`);
    ``chunks``: the model chunks per device group the schedule was solved for (1 but under ``interleaved``),
    known with or without a plan; ``instance``: the name of the instance solved (its file's stem);
    ``forward_share``: the forward's share of each node's time per sample that ``time_per_batch`` (and the
    ``time-per-batch`` objective) was timed with, which the plan document records as ``forwardShare``."""

    status: Status
    plan: ParallelPlan | None
    value: float | None
    bound: float | None
    devices: int
    memory: float
    schedule: str
    evaluation: "ParallelEvaluation | None"
    megatron: dict[str, Any] | None
    runtime_s: float
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    objective: str = "throughput"
    batch_time: float | None = None
    chunks: int = 1
    instance: str = ""
    forward_share: float = FORWARD_SHARE

    def __hash__(self) -> int:   # over the fields that hash (equal results have equal ones); the dicts do not
        devices = tuple(sorted(self.devices.items())) if isinstance(self.devices, dict) else self.devices
        return hash((self.status, self.value, self.bound, devices, self.memory, self.schedule, self.objective))

    @property
    def ok(self) -> bool:
        return self.plan is not None

    @property
    def gap(self) -> float | None:
        if self.value is None or self.bound is None:
            return None
        return 0.0 if self.value == self.bound else (self.value - self.bound) / self.value

    @property
    def time_per_batch(self) -> float | None:
        return self.batch_time

    def to_json(self) -> dict[str, Any]:
        stages = []
        chunks = self.chunks if self.plan is None else self.plan.chunks
        if self.plan is not None and self.evaluation is not None:
            groups = len(self.plan.stages) // chunks
            for k, (stage, ev) in enumerate(zip(self.plan.stages, self.evaluation.stages)):
                doc = stage.to_json()
                doc.update(timePerSample=ev.time_per_sample, memory=ev.memory, inFlight=ev.in_flight)
                if chunks != 1:   # interleaved: stage k is chunk k div S of device group k mod S
                    doc.update(group=k % groups, chunk=k // groups)
                stages.append(doc)
        finite = lambda x: x if x is not None and math.isfinite(x) else None  # noqa: E731
        return {"format": PLAN_FORMAT, "instance": self.instance, "status": str(self.status),
                "schedule": self.schedule, "objective": self.objective, "devices": self.devices, "memory": self.memory,
                "value": finite(self.value), "bound": finite(self.bound), "gap": self.gap,
                "timePerBatch": finite(self.time_per_batch), "forwardShare": self.forward_share,
                "devicesUsed": None if self.plan is None else self.plan.devices, "stages": stages,
                "megatron": self.megatron, "message": self.message, "runtime_s": self.runtime_s,
                **({"chunks": chunks} if chunks != 1 else {})}   # the same keys with a plan and without


__all__ = ["PLAN_FORMAT", "ParallelResult"]
