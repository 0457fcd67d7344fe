"""The independent check of a data- and tensor-parallel plan (a Piper instance's): the verdict ``verify`` gives.

Three computations that share nothing with the planners (:mod:`placement.parallel`):

* the evaluator (:mod:`.parallel`, :mod:`.parallel_interleaved` for an interleaved plan): validity on
  the devices and memory given (a node in exactly one stage, no edge back, the degrees, the TMPCs,
  ``Σ d·t`` within the devices, memory per device with the schedule's micro-batches in flight) and
  each stage's time per sample, Piper's objective the largest of them (a group's, interleaved);
* the event-driven simulator (:mod:`placement.simulation.parallel`): one batch under the plan's
  schedule with Piper's all-reduce, whose end is the plan's time per batch (the ``time-per-batch``
  objective; fill, drain and waits included);
* the communication ledger (:mod:`.parallel_ledger`): bytes per sample by kind and link, which with
  the compute must give each stage's time per sample.

A plan file's claims (its ``value``, of the objective it records, its ``timePerBatch`` and its stages'
figures) are compared with these figures by the caller (:func:`refuted_claims`); they do not change the verdict.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping

from placement.errors import InvalidParameterError, LimitExceededError
from placement.io.piper import PiperInstance
from placement.verification.parallel import ParallelEvaluation, evaluate_parallel
from placement.verification.parallel_interleaved import evaluate_interleaved
from placement.verification.parallel_ledger import ParallelLedger, parallel_ledger

#: relative tolerance between a plan file's claimed figure and the verified one
CLAIM_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ParallelVerification:
    """The verdict on a parallel plan. ``value``: the largest stage (interleaved: device group) time per
    sample as evaluated; ``time_per_batch``: one batch simulated under ``schedule`` with Piper's
    all-reduce and ``forward_share`` the forward's share of each node's time per sample (``None`` for an
    invalid plan, or where it could not run: ``batch_note`` says why);
    ``ledger``: the communication ledger (``None`` unless asked for, and for an invalid plan);
    ``report``: the evaluator's full figures, for renderers (not written to JSON)."""

    valid: bool
    value: float | None
    violations: tuple[str, ...]
    schedule: str
    chunks: int
    devices: Any
    memory: float | None
    time_per_batch: float | None
    batch_note: str = ""
    ledger: ParallelLedger | None = None
    notes: tuple[str, ...] = ()   # claims of the plan's record that the check refutes
    forward_share: float = 1.0 / 3.0   # the simulator's default, unless the plan records another
    report: ParallelEvaluation | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        from placement.jsonfile import strict_json

        stages = [] if self.report is None else [
            {"time_per_sample": s.time_per_sample, "memory": s.memory, "in_flight": s.in_flight}
            for s in self.report.stages]
        ledger = None if self.ledger is None else {
            "agrees": self.ledger.agrees, "disagreements": list(self.ledger.disagreements),
            "stages": [{"stage": r.stage, "activations_in": r.activations_in, "activations_out": r.activations_out,
                        "errors_in": r.errors_in, "errors_out": r.errors_out, "resharding": r.resharding,
                        "gradients_per_batch": r.gradients_per_batch, "bytes_per_device": r.bytes_per_device,
                        "communication": r.communication, "compute": r.compute} for r in self.ledger.stages],
            "links": [{"from": i, "to": j, "bytes_per_sample": b} for (i, j), b in sorted(self.ledger.links.items())]}
        return strict_json({"valid": self.valid, "value": self.value, "violations": list(self.violations),
                            "schedule": self.schedule, "chunks": self.chunks, "devices": self.devices,
                            "memory": self.memory, "time_per_batch": self.time_per_batch,
                            "forward_share": self.forward_share,
                            "batch_note": self.batch_note or None, "stages": stages, "ledger": ledger,
                            "notes": list(self.notes)})


def typed_counts_refusal(instance: PiperInstance, devices: Any, memory: float | None = None) -> str:
    """Why a plan's recorded ``devices`` and ``memory`` cannot be read on ``instance``, or ``""``: counts per
    device type where it has no deviceTypes; where it has, a single count, a type it does not list, no device
    at all, or a memory per device (each type gives its own), as ``solve`` refuses them."""
    types = [t.name for t in instance.device_types]
    if not types:
        if isinstance(devices, Mapping):
            return (f"the plan records device counts per type ({', '.join(map(str, devices))}), but the instance "
                    "has no deviceTypes")
        return ""
    if memory is not None:
        return (f"the plan records a memory per device ({memory!r} bytes), but the instance's deviceTypes give "
                "each type's memory")
    if devices is None:
        return ""
    if not isinstance(devices, Mapping):
        return (f"the plan records a device count ({devices!r}), but the instance's deviceTypes take counts per "
                "type")
    unknown = next((name for name in devices if name not in types), None)
    if unknown is not None:
        return (f"the plan records devices of type {unknown!r}, which is not a device type of the instance (its "
                f"types: {', '.join(types)})")
    if not any(devices.values()):
        return "the plan records no device of any type"
    return ""


def evaluate_plan(instance: PiperInstance, plan: Any, *, devices: Any = None, memory: float | None = None,
                  schedule: str | None = None, microbatches: int | None = None) -> ParallelEvaluation:
    """The evaluator's figures for ``plan``: :func:`.parallel_interleaved.evaluate_interleaved` for an
    interleaved plan (``chunks > 1``; a device count only), else :func:`.parallel.evaluate_parallel`
    (``schedule`` and ``microbatches`` as it takes them)."""
    if plan.chunks > 1:
        return evaluate_interleaved(instance, plan, devices=devices if isinstance(devices, int) else None,
                                    memory=memory, microbatches=microbatches)
    return evaluate_parallel(instance, plan, devices=devices, memory=memory, schedule=schedule,
                             microbatches=microbatches)


def check_parallel_plan(instance: PiperInstance, plan: Any, *, devices: Any = None, memory: float | None = None,
                        ledger: bool = False, forward_share: float | None = None) -> ParallelVerification:
    """The verdict on ``plan`` (a :class:`placement.parallel.plan.ParallelPlan`) on ``devices`` devices (a
    count, or counts per device type) of ``memory`` bytes, by default the instance's (module docstring); its
    batch timed with ``forward_share`` (the one the plan was solved with; default the simulator's, 1/3)."""
    share = ParallelVerification.forward_share if forward_share is None else forward_share
    refusal = typed_counts_refusal(instance, devices, memory)
    if refusal:
        return ParallelVerification(False, None, (refusal,), plan.schedule, plan.chunks, devices, memory, None,
                                    forward_share=share)
    evaluation = evaluate_plan(instance, plan, devices=devices, memory=memory)
    if not evaluation.ok:
        return ParallelVerification(False, evaluation.value, evaluation.violations, plan.schedule, plan.chunks,
                                    devices, memory, None, forward_share=share, report=evaluation)
    batch, note = _simulated_batch(instance, plan, share)
    traffic = parallel_ledger(instance, plan, [s.time_per_sample for s in evaluation.stages]) if ledger else None
    return ParallelVerification(True, evaluation.value, (), plan.schedule, plan.chunks, devices, memory, batch,
                                batch_note=note, ledger=traffic, forward_share=share, report=evaluation)


def _simulated_batch(instance: PiperInstance, plan: Any, forward_share: float) -> tuple[float | None, str]:
    """One batch of ``plan`` simulated under its schedule with Piper's all-reduce and ``forward_share``: its
    end, or why it did not run (too many tasks to lay out, an order that deadlocks)."""
    from placement.simulation.parallel import simulate_parallel

    try:
        return simulate_parallel(instance, plan, allreduce="piper", forward_share=forward_share).time_per_batch, ""
    except (LimitExceededError, InvalidParameterError) as exc:
        return None, f"not simulated: {exc}"


def refuted_claims(record: Mapping[str, Any], verified: ParallelVerification) -> list[str]:
    """The figures a plan file's ``record`` claims (``value`` of its ``objective`` and its lower ``bound``,
    ``timePerBatch``, and each stage's ``timePerSample``, ``memory`` and ``inFlight``) that the verified ones
    refute, one sentence each; a figure the record leaves out (or gives as null), or one not verified, is not
    compared. A claim that cannot be compared — a figure that is not a number, or a ``value`` of an
    ``objective`` that names none of the objectives — is a sentence saying so."""
    if not verified.valid:
        return []
    objective = record.get("objective")
    checked = {"timePerBatch": ("time per batch", verified.time_per_batch)}
    out = []
    if objective in (None, "throughput"):   # left out: Piper's, as solve writes it by default
        checked["value"] = ("largest time per sample", verified.value)
    elif objective == "time-per-batch":
        checked["value"] = ("time per batch", verified.time_per_batch)
    elif record.get("value") is not None:
        out.append(f"the plan file's 'objective' names no objective ('throughput', 'time-per-batch'): "
                   f"{json.dumps(objective, default=repr)[:40]}; its claimed value was not checked")
    for key, (what, value) in checked.items():
        out += _refuted(record.get(key), key, "", what, value)
    if "value" in checked:
        out += _bound_refuted(record.get("bound"), *checked["value"])
    stages = record.get("stages")
    report = verified.report
    if isinstance(stages, list) and report is not None and len(stages) == len(report.stages):
        for k, (raw, figures) in enumerate(zip(stages, report.stages)):
            if isinstance(raw, Mapping):
                for key, what, value in (("timePerSample", "time per sample", figures.time_per_sample),
                                         ("memory", "memory per device", figures.memory),
                                         ("inFlight", "micro-batches in flight", figures.in_flight)):
                    out += _refuted(raw.get(key), key, f"stage {k} ", what, value)
    return out


def _bound_refuted(bound: Any, what: str, value: float | None) -> list[str]:
    """The sentence refuting the lower ``bound`` a plan file claims on its objective (``what``) where it lies
    above the verified ``value``, which the plan itself attains (an infinite one too); none where it holds, or
    where either is missing or no number, NaN included (a bound is no figure of the plan, and is not otherwise
    checked)."""
    if (value is None or isinstance(bound, bool) or not isinstance(bound, numbers.Real) or math.isnan(bound)
            or bound <= value * (1 + CLAIM_TOLERANCE) + 1e-300):
        return []
    return [f"the plan file claims a lower bound of {_as_written(bound)!r} ({what}), above the verified value "
            f"{value!r}"]


def _refuted(claim: Any, key: str, where: str, what: str, value: float | None) -> list[str]:
    """The sentence refuting the plan file's ``claim`` of field ``key`` (of ``where``, a stage or the plan) where
    the verified ``value`` differs, or saying that a claim that is no number was not checked; none where it
    holds, or where either is missing."""
    if claim is None:
        return []
    if isinstance(claim, bool) or not isinstance(claim, numbers.Real) or not math.isfinite(claim):
        return [f"the plan file's {where}{key!r} is not a number: {json.dumps(claim, default=repr)[:40]}; its "
                f"claimed {what} was not checked"]
    if value is not None and not math.isclose(claim, value, rel_tol=CLAIM_TOLERANCE, abs_tol=1e-300):
        return [f"the plan file claims {where}{key} {_as_written(claim)!r} ({what}); the verified one is {value!r}"]
    return []


def _as_written(figure: numbers.Real) -> numbers.Real:
    """A claimed figure as a plan file writes it: one of numpy's numbers as the Python number it holds."""
    return figure.item() if hasattr(figure, "item") else figure


__all__ = ["CLAIM_TOLERANCE", "ParallelVerification", "check_parallel_plan", "evaluate_plan", "refuted_claims",
           "typed_counts_refusal"]
