"""``placement.split``: a plan of an imported model as the split points a pipeline runtime takes.

The forms (``format``): a ``split_spec`` for ``torch.distributed.pipelining`` (``split-spec``),
DeepSpeed ``PipelineModule`` ``layers`` and ``parts`` (``deepspeed``), a Megatron pipeline
layout string (``megatron``), the operators of each stage for a ``pipe_split`` program
(``pipe-split``), or the list of stages (``stages``). The runtime forms are written by
:mod:`placement.io.exporters` and :mod:`placement.io.megatron`; this module checks the plan
first as :func:`placement.verify` does (device types and counts, supported types, memory),
puts its devices in pipeline order, and refuses a form that cannot express the plan naming
the reason and the first form that can.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from os import PathLike
from typing import Any, Callable, Mapping

from placement.errors import InvalidParameterError
from placement.parameters import keywords_checked
from placement.plan import Plan
from placement.wording import as_given

#: The hand-off forms in the order a refused form's alternative is looked for.
RUNTIME_FORMATS = ("split-spec", "deepspeed", "megatron", "pipe-split")
#: Every form :func:`split` writes.
SPLIT_FORMATS = (*RUNTIME_FORMATS, "stages")


@dataclass(frozen=True)
class Split:
    """A plan as a hand-off form.

    ``split`` is the form itself (the ``split_spec`` mapping of module names to ``"BEGINNING"``,
    ``{"layers", "parts"}`` for DeepSpeed, the Megatron layout string, ``{"ops": [...]}`` for
    ``pipe-split``, or one ``{"stage", "device", "forward_nodes", "first", "last"}`` per stage);
    ``text`` the same as the command line prints it (JSON, the layout string, or a table of
    stages); ``order`` the positions of the plan's devices that are stages (those holding a forward
    node), stage by stage, where it listed them in another order (``None``: it did not); ``notes``
    what the hand-off does that the plan does not say (a CPU stage, the devices the plan records, the
    entries of the model that its forward did not call when exported);
    ``warnings`` what the runtime will do differently from the plan (a trained parameter several stages
    read).
    """

    format: str
    split: Any
    text: str
    order: tuple[int, ...] | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The form, with what the command line prints beside it: ``notes``, ``warnings`` and ``order``
        (``null`` where the plan listed its devices in pipeline order)."""
        return {"format": self.format, "split": self.split, "notes": list(self.notes),
                "warnings": list(self.warnings), "order": None if self.order is None else list(self.order)}


def _exporters() -> dict[str, Callable[[Any, Plan], Any]]:
    from placement.io.exporters import deepspeed_parts, pipe_split_ops, split_points
    from placement.io.megatron import megatron_layout

    return {"split-spec": lambda layout, plan: {fqn: "BEGINNING" for fqn in split_points(layout, plan)},
            "deepspeed": deepspeed_parts,
            "megatron": megatron_layout,
            "pipe-split": lambda layout, plan: {"ops": pipe_split_ops(layout, plan)}}


@keywords_checked
def split(instance: str | PathLike[str] | Mapping[str, Any], plan: Any, *, format: str = "split-spec") -> Split:
    """``plan`` (a Result, Plan, plan document or plan file) of ``instance`` (an instance file or document
    written by the model importers, which records the modules and operators of every node) in the form
    ``format`` (:data:`SPLIT_FORMATS`).

    The plan is checked on the devices it records it was solved with (as :func:`placement.verify`
    checks it); nodes it leaves out go with their colour class. A plan that does not fit the instance,
    and a split-backward plan that moves B or W tasks off their layer's device are refused
    (:class:`placement.InvalidPlanError`, naming the plan's file), and so is a form that cannot express
    the plan (:class:`placement.InvalidParameterError` about ``format``, naming the reason and the first
    form that can).
    """
    from placement.api import solved_devices
    from placement.io.exporters import deepspeed_notes, in_pipeline_order, read_layout
    from placement.io.megatron import megatron_notes
    from placement.io.plans import (PlanFile, as_plan, made_for_another, made_for_text, plan_error, read_overrides,
                                    read_plan_file, refuse_json_text)
    from placement.loading import as_instance, loaded_with_document
    from placement.parameters import one_of

    form = one_of("format", format, SPLIT_FORMATS)
    refuse_json_text(plan)
    if not isinstance(instance, (str, PathLike, Mapping)):
        raise InvalidParameterError("instance", "must be an instance file or document written by the model "
                                                f"importers (it records every node's modules), not "
                                                f"{type(instance).__name__}")
    source = dict(instance) if isinstance(instance, Mapping) else instance
    loaded, document = loaded_with_document(source)   # a file read once: for the instance and its layout
    problem = as_instance(loaded)   # a Piper instance is refused as such, before its layout is read
    layout = read_layout(document, None if isinstance(source, dict) else str(source))
    plan = read_plan_file(plan)   # once: for the plan and its record
    checked = as_plan(plan)
    notes = []
    named = "plan file" if isinstance(plan, PlanFile) else "plan"
    other = made_for_another(plan, problem.name)
    if other is not None:
        notes.append(made_for_text(f"the {named}", other, problem.name))
    taken, unread = read_overrides(plan)
    if taken or unread:   # a record it cannot read is refused there, as verify and simulate refuse it
        problem = solved_devices(problem, plan, None, None, None)
        listed = ", ".join(f"{name}={as_given(value)}" for name, value in taken.items())
        notes.append(f"split on the devices the {named} records it was solved with: {listed}")
    checked, finest, inferred = _fitted(problem, checked, plan, notes[0] if other is not None else "")
    moved = _moved_backward_tasks(checked)   # a node the plan left out is now on its colour class's device
    if moved:
        raise plan_error(plan, f"the plan runs the {moved} (a split-backward plan, docs/backward-split.md); the "
                               "hand-off forms keep a layer's whole backward on its stage, so the plan would not run "
                               "as solved: hand off a plan solved with backward='joint'")
    if inferred:
        notes.append(f"{inferred:,} node{'s' if inferred > 1 else ''} the plan does not list "
                     + ("goes with its colour class, as verify places it" if inferred == 1 else
                        "go with their colour class, as verify places them"))
    listed = checked
    checked, order = in_pipeline_order(problem, checked)
    if order is not None:   # the devices that are stages, those holding a forward node: an empty one is none
        order = tuple(d for d in order if any(v not in layout.mates for v in listed.devices[d].nodes))
        order = None if list(order) == sorted(order) else order
    if order is not None:
        notes.append(f"the plan lists its devices out of pipeline order; its stages are its devices "
                     f"{', '.join(map(str, order))}, in that order")
    if form == "stages":
        value, text, more = _stages(layout, checked, order is not None)
        return Split(form, value, text, order, tuple(notes + more))
    try:
        value = _export(form, layout, checked, finest == "stages")
    except InvalidParameterError as exc:   # the reason may be that the plan is another model's
        if other is None or exc.parameter != "format":
            raise
        raise InvalidParameterError("format", f"{exc.detail} ({notes[0]})") from None
    notes += _cpu_stage_notes(layout, checked)
    if form == "deepspeed":
        notes += deepspeed_notes(layout, value["layers"])
    if form == "megatron":
        notes += megatron_notes(layout)
    text = value if isinstance(value, str) else json.dumps(value, indent=1)
    return Split(form, value, text, order, tuple(notes), _shared_warnings(form, layout, checked))


def _fitted(problem: Any, plan: Plan, given: Any, made_for: str) -> tuple[Plan, str, int]:
    """The plan with the nodes it leaves to their colour class placed with it (as ``verify`` places
    them), the finest contiguity class it belongs to, and how many nodes were so placed; refused where
    the instance cannot run it (unknown device types, more devices than it has, nodes off their supported
    types, memory), as the independent evaluator finds it; the message names the plan's file, and ends
    with ``made_for``, the note that the plan was made for another instance, where there is one."""
    from placement.io.plans import plan_error
    from placement.verification.evaluate import evaluate, with_inferred

    found = evaluate(problem, plan, "none", infer_from_colours=True)
    if found.violations:
        more = f" (and {len(found.violations) - 1} more)" if len(found.violations) > 1 else ""
        made_for = f" ({made_for})" if made_for else ""
        raise plan_error(given, f"the plan does not fit the instance: {found.violations[0]}{more}{made_for}")
    return with_inferred(plan, found), found.finest_class, len(found.inferred)


def _moved_backward_tasks(plan: Any) -> str:
    """The first B or W task a split-backward plan runs on another device than its node's, in words
    (``""``: none; a joint plan lists no tasks)."""
    home = {v: d for d, dev in enumerate(plan.devices) for v in dev.nodes}
    for d, dev in enumerate(plan.devices):
        for kind, tasks in (("B", dev.b_tasks), ("W", dev.w_tasks)):
            for u in tasks:
                if home.get(u, d) != d:
                    return f"{kind} task of node {u} on device {d}, not on its node's device {home[u]}"
    return ""


def _stages(layout: Any, plan: Plan, reordered: bool) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The ``stages`` form, its table, and the note that no runtime can run them where none can (``reordered``:
    the plan's devices were put in pipeline order, which the stages follow)."""
    from placement.io.exporters import stage_types, stages
    from placement.report.table import format_table

    by_id = {node.id: node for node in layout.nodes}
    rows = [("stage", "device", "#forward nodes", "first", "last")]
    value = []
    for k, (stage, kind) in enumerate(zip(stages(layout, plan), stage_types(layout, plan))):
        first, last = by_id[stage[0]].name, by_id[stage[-1]].name
        rows.append((str(k), kind, str(len(stage)), first, last))
        value.append({"stage": k, "device": kind, "forward_nodes": len(stage), "first": first, "last": last})
    why = _why_no_pipeline(layout, plan)
    listed = "in pipeline order" if reordered else "the plan's devices in its order"
    notes = [] if why is None else [f"the stages are {listed}, but no pipeline runtime can run them: {why}"]
    return value, "\n".join(format_table(rows, left=range(5), rule=False)), notes


def _why_no_pipeline(layout: Any, plan: Plan) -> str | None:
    """Why the plan is no pipeline a runtime can run (a CPU stage between accelerator stages, a stage
    reading a later one), or ``None``: what every runtime form needs first."""
    from placement.io.exporters import refusal, runtime_stages

    try:
        runtime_stages(layout, plan, "split-spec")
    except InvalidParameterError as exc:
        return refusal(exc, "split-spec") or exc.detail
    return None


def _expresses(exporter: Callable[[Any, Plan], Any], form: str, layout: Any, plan: Plan) -> bool:
    from placement.io.exporters import refusal

    try:
        exporter(layout, plan)
    except InvalidParameterError as exc:
        if refusal(exc, form) is None:
            raise
        return False
    return True


def _export(form: str, layout: Any, plan: Plan, pipeline: bool) -> Any:
    """The plan in the runtime ``form``; a refusal names the reason and a form that can express it
    (``pipeline``: the plan is already a ``stages`` pipeline, so only its CPU stages stand in the way)."""
    from placement.io.exporters import refusal

    exporters = _exporters()
    try:
        return exporters[form](layout, plan)
    except InvalidParameterError as exc:
        reason = refusal(exc, form)
        if reason is None:
            raise
    other = next((f for f in RUNTIME_FORMATS if f != form and _expresses(exporters[f], f, layout, plan)), None)
    if other is not None:
        raise InvalidParameterError("format", f"{form} cannot express this plan: {reason}; use format='{other}'")
    from_onnx = layout.generator.endswith("onnx_import")   # no nn.Module to hand to plan_pipeline
    advice = (("no runtime form holds it: format='stages' lists the plan's nodes per stage; an import of the "
               "PyTorch model, where there is one, plans with placement.torch.plan_pipeline, which runs a model "
               "cut at stages of any shape: docs/pytorch.md" if from_onnx else
               "placement.torch.plan_pipeline runs a model cut at stages of any shape: docs/pytorch.md")
              if _why_no_pipeline(layout, plan) is None else
              "a runtime needs a pipeline with no CPU stage between accelerator stages; a solve with cpus=0 "
              "plans on the accelerators alone" if pipeline else
              "a runtime needs a pipeline, as a solve with contiguity='stages' plans, with no CPU stage between "
              "accelerator stages; a solve with cpus=0 plans on the accelerators alone")
    raise InvalidParameterError("format", f"{form} cannot express this plan: {reason}; no hand-off format can "
                                          f"({advice})")


def _cpu_stage_notes(layout: Any, plan: Plan) -> list[str]:
    """The note that the hand-off makes a CPU stage (at an end of the pipeline: one between accelerators
    is refused) a stage like the others."""
    from placement.io.exporters import stage_types
    from placement.problem.instance import CPU

    on_cpu = [str(k) for k, kind in enumerate(stage_types(layout, plan)) if kind == CPU]
    if len(on_cpu) == 1:
        return [f"stage {on_cpu[0]} runs on a CPU: the hand-off makes it a pipeline stage like the others, for a "
                "rank on the host"]
    if on_cpu:
        return [f"stages {' and '.join(on_cpu)} run on a CPU: the hand-off makes them pipeline stages like the "
                "others, for ranks on the host"]
    return []


def _shared_warnings(form: str, layout: Any, plan: Plan) -> tuple[str, ...]:
    """A warning for every trained parameter several stages read: the runtime gives each stage its own copy
    (Megatron ties its embeddings itself)."""
    from placement.io.exporters import shared_across_stages

    if form == "megatron":
        return ()
    return tuple(f"trained parameter {name!r} is read by stages {', '.join(map(str, held[:-1]))} and {held[-1]}; "
                 "the runtime gives each stage its own copy and does not add their gradients, so the copies drift "
                 "apart in training (placement.torch.plan_pipeline adds them)"
                 for name, held in shared_across_stages(layout, plan).items())
