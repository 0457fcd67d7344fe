"""The independent check of a plan under an objective: the verdict every answer carries.

:func:`check_plan` runs the evaluators of this subpackage, which share nothing with the
solvers: :func:`.evaluate.evaluate` (loads, constraints, contiguity class) for the throughput
objectives, :func:`.latency.evaluate_latency` (the single-sample schedule of the plan's calls)
for ``latency``, and optionally the communication ledger (:mod:`.ledger`). The value it
reports is the objective as the evaluator computes it:

* ``throughput`` — the max device load (DESIGN.md §2);
* ``throughput-gpipe`` — max forward load + max backward load (training graphs);
* ``latency`` — the finish time of one sample (inference graphs); with ``calls=Q`` every
  accelerator may run at most ``Q`` calls, and a device with more is a violation.
"""

from __future__ import annotations

from placement.collector import collector_paused
from placement.errors import InvalidParameterError
from placement.parameters import integer
from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Instance
from placement.problem.objectives import check_objective
from placement.result import Verification
from placement.verification.evaluate import check_contiguity, evaluate
from placement.verification.ledger import communication_ledger
from placement.wording import counted


@collector_paused()
def check_plan(instance: Instance, plan: Plan, *, objective: str = "throughput", contiguity: str = "none",
               calls: int | None = None, infer_from_colours: bool = False, ledger: bool = False) -> Verification:
    """The evaluator's verdict on ``plan``; ``report`` holds ``(evaluation, latency evaluation or None,
    ledger or None)`` for renderers. A valid training plan in stages (throughput objectives) whose devices'
    backward calls wait for each other in a cycle gets a note saying so
    (:func:`placement.verification.split.joint_b_call_cycle_note`)."""
    check_objective(instance, objective)
    check_contiguity(contiguity)
    calls = integer("calls", calls, smallest=1, optional=True)
    if calls is not None and objective != "latency":
        raise InvalidParameterError("calls", "applies to objective='latency' only")
    latency = None
    if objective == "latency":
        from placement.verification.latency import evaluate_latency

        latency = evaluate_latency(instance, plan)
        evaluation = latency.structural   # the same check, made once, where it is the one asked for
        if evaluation is None or contiguity != "none" or infer_from_colours:
            evaluation = evaluate(instance, plan, contiguity, infer_from_colours)
        violations = list(latency.violations) + list(violations_beyond(evaluation.violations, latency.violations))
        violations += call_limit_violations(instance, plan, calls)
        value = latency.latency
    else:       # the loads take no account of calls, but a plan that lists them must list them well
        evaluation = evaluate(instance, plan, contiguity, infer_from_colours)
        violations = list(evaluation.violations)
        if any(device.calls for device in plan.devices):   # no listed call, nothing to list wrong
            from placement.verification.latency import call_violations

            violations += call_violations(instance, plan)
        value = evaluation.objective(objective)
    placed = Plan(tuple(DeviceAssignment(r.type, r.nodes) for r in evaluation.devices))
    traffic = None
    if ledger and objective == "latency":   # the latency schedule pays each call's boundary
        called = Plan(tuple(DeviceAssignment(r.type, r.nodes, device.calls)
                            for r, device in zip(evaluation.devices, plan.devices)))
        traffic = communication_ledger(instance, called, by_call=True)
    elif ledger:
        traffic = communication_ledger(instance, placed)
    notes = ()
    if not violations and objective != "latency" and evaluation.finest_class == "stages" and instance.is_training:
        from placement.verification.split import joint_b_call_cycle_note

        notes = tuple(n for n in (joint_b_call_cycle_note(instance, placed),) if n)
    return Verification(valid=not violations, objective=objective, contiguity=contiguity, value=value,
                        max_load=evaluation.max_load, violations=tuple(violations),
                        finest_class=evaluation.finest_class, inferred=evaluation.inferred, calls=calls,
                        ledger=None if traffic is None else traffic.verdict, notes=notes,
                        report=(evaluation, latency, traffic))


def violations_beyond(violations: tuple[str, ...] | list[str], shown: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Those of ``violations`` that ``shown`` does not list, in their order. ``shown`` is looked up as a set: a plan
    naming a hundred thousand nodes an instance lacks has as many violations, which a scan of ``shown`` for each
    would compare pairwise, for minutes."""
    listed = frozenset(shown)
    return tuple(v for v in violations if v not in listed)


def call_order_violations(instance: Instance, plan: Plan, limit: int | None = None) -> list[str]:
    """What keeps the calls of an inference plan from running one sample, whatever objective the plan is checked
    for: calls that wait on each other in a cycle (:func:`.latency.evaluate_latency`) and, with ``limit``, a device
    of more calls than that (:func:`call_limit_violations`); the placement's own violations, and those of its
    ``calls`` fields, are the evaluator's to report. Empty for a training graph (no latency there)."""
    if instance.is_training:
        return []
    from placement.verification.latency import call_violations, evaluate_latency

    latency = evaluate_latency(instance, plan)
    other = set(call_violations(instance, plan)) | set(() if latency.structural is None
                                                        else latency.structural.violations)
    return [v for v in latency.violations if v not in other] + call_limit_violations(instance, plan, limit)


def call_limit_violations(instance: Instance, plan: Plan, limit: int | None) -> list[str]:
    """One line per device of a communication-paying type that runs more than ``limit`` calls (worded without
    the parameter's name, which the command line spells otherwise)."""
    if limit is None:
        return []
    pays = {t.name: t.pays_comm for t in instance.device_types}
    return [f"device {d} ({dev.type}) runs {len(dev.calls)} calls, more than the limit of {counted(limit, 'call')} "
            "per accelerator"
            for d, dev in enumerate(plan.devices) if pays.get(dev.type) and len(dev.calls) > limit]

