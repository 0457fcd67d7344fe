"""``placement split INSTANCE PLAN``: a plan of an imported model as runtime split points.

Formats: a ``split_spec`` for ``torch.distributed.pipelining`` (default), DeepSpeed
``PipelineModule`` ``layers`` and ``parts``, a Megatron pipeline layout string, the
operators of each stage for a ``pipe_split`` program, or a table of stages. A format that
cannot express the plan is refused with the reason, naming a format that can.
Exit status 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from placement.cli.options import (UsageError, add_output_options, check_writable, path_name, print_json, read_once,
                                   recorded_devices_note, write_text)
from placement.errors import InvalidInstanceError, InvalidParameterError, InvalidPlanError
from placement.io.exporters import (Layout, deepspeed_parts, in_pipeline_order, pipe_split_ops, read_layout, refusal,
                                    runtime_stages, shared_across_stages, split_points, stage_types, stages)
from placement.io.megatron import megatron_layout
from placement.plan import Plan
from placement.problem.instance import CPU
from placement.report.table import format_table

#: The hand-off forms in the order a refused form's alternative is looked for.
EXPORTERS: dict[str, Callable[[Layout, Plan], Any]] = {
    "split-spec": lambda layout, plan: {fqn: "BEGINNING" for fqn in split_points(layout, plan)},
    "deepspeed": deepspeed_parts,
    "megatron": megatron_layout,
    "pipe-split": lambda layout, plan: {"ops": pipe_split_ops(layout, plan)},
}
SPLIT_FORMATS = (*EXPORTERS, "stages")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("split", help="turn a plan of an imported model into runtime split points")
    p.add_argument("instance", help="instance written by 'placement import'")
    p.add_argument("plan", help="plan of that instance (placement solve --out)")
    p.add_argument("--format", choices=SPLIT_FORMATS, default="split-spec",
                   help="split-spec (torch.distributed.pipelining, default), deepspeed (PipelineModule layers and "
                        "parts), megatron (pipeline layout string), pipe-split (the operators of each stage, for "
                        "pipe_split_module) or stages (a table)")
    p.add_argument("--out", type=path_name, metavar="FILE",
                   help="also write the split to FILE as the text output shows it (the form's own file), with or "
                        "without --json")
    add_output_options(p)
    p.set_defaults(handler=run)


def _check_fit(problem: Any, plan: Plan, source: str, say: Callable[[str], None]) -> tuple[Plan, str]:
    """The plan with the nodes it leaves to their colour class placed with it (as ``verify`` places
    them), and the finest contiguity class it belongs to; refused where the instance cannot run it
    (unknown device types, more devices than it has, nodes off their supported types, memory), as the
    independent evaluator finds it; the message names the plan file ``source``."""
    from placement.verification.evaluate import evaluate, with_inferred

    found = evaluate(problem, plan, "none", infer_from_colours=True)
    if found.violations:
        more = f" (and {len(found.violations) - 1} more)" if len(found.violations) > 1 else ""
        raise UsageError(f"{source}: the plan does not fit the instance: {found.violations[0]}{more}")
    if found.inferred:
        count = len(found.inferred)
        say(f"note: {count:,} node{'s' if count > 1 else ''} the plan does not list go{'es' if count == 1 else ''} "
            "with their colour class, as verify places them")
    return with_inferred(plan, found), found.finest_class


def _stage_rows(layout: Layout, plan: Plan) -> list[tuple[str, ...]]:
    """Header and one row per stage: index, device type, forward node count, first and last node (a stage's
    backward nodes go with their forward mates: the table counts the program the runtime splits)."""
    by_id = {node.id: node for node in layout.nodes}
    rows = [("stage", "device", "#forward nodes", "first", "last")]
    for k, (stage, kind) in enumerate(zip(stages(layout, plan), stage_types(layout, plan))):
        rows.append((str(k), kind, str(len(stage)), by_id[stage[0]].name, by_id[stage[-1]].name))
    return rows


def _expresses(form: str, layout: Layout, plan: Plan) -> bool:
    try:
        EXPORTERS[form](layout, plan)
    except InvalidParameterError as exc:
        if refusal(exc, form) is None:
            raise
        return False
    return True


def _runs_as_pipeline(layout: Layout, plan: Plan) -> bool:
    """Whether the plan is what every hand-off form needs first: a pipeline without a CPU stage between
    accelerator stages (:func:`placement.io.exporters.runtime_stages`)."""
    return _why_no_pipeline(layout, plan) is None


def _why_no_pipeline(layout: Layout, plan: Plan) -> str | None:
    """Why the plan is no pipeline a runtime can run (:func:`_runs_as_pipeline`), or ``None``."""
    try:
        runtime_stages(layout, plan, "split-spec")
    except InvalidParameterError as exc:
        return refusal(exc, "split-spec") or exc.detail
    return None


def export(form: str, layout: Layout, plan: Plan, pipeline: bool = False) -> Any:
    """The plan in ``form``; a refusal becomes one line naming the reason and a form that can express it
    (``pipeline``: the plan is already a ``stages`` pipeline, so only its CPU stages stand in the way)."""
    try:
        return EXPORTERS[form](layout, plan)
    except InvalidParameterError as exc:
        reason = refusal(exc, form)
        if reason is None:
            raise
    other = next((f for f in EXPORTERS if f != form and _expresses(f, layout, plan)), None)
    if other is None:
        advice = (" (placement.torch.plan_pipeline runs a model cut at stages of any shape: docs/pytorch.md)"
                  if _runs_as_pipeline(layout, plan) else
                  " (a runtime needs a pipeline with no CPU stage between accelerator stages; placement solve "
                  "--cpus 0 plans on the accelerators alone)" if pipeline else
                  " (a runtime needs a pipeline, as placement solve --contiguity stages plans, with no CPU stage "
                  "between accelerator stages; --cpus 0 plans on the accelerators alone)")
        raise UsageError(f"{form} cannot express this plan: {reason}; no hand-off format can{advice}")
    raise UsageError(f"{form} cannot express this plan: {reason}; use --format {other}")


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


def run(args: argparse.Namespace) -> int:
    from placement.io.plans import as_plan, made_for_another, recorded_overrides
    from placement.loading import as_instance, override_devices

    def say(line: str) -> None:
        """A note or warning on stderr, unless --quiet."""
        if not args.quiet:
            print(line, file=sys.stderr)

    source = read_once(args.instance, InvalidInstanceError, "instance")   # read for the instance and its layout
    problem = as_instance(source)   # a Piper instance is refused as such, before its layout is read
    layout = read_layout(source)
    check_writable(args.out, (args.instance, args.plan))
    plan_source = read_once(args.plan, InvalidPlanError, "plan")   # read for the plan and its record
    plan = as_plan(plan_source)
    moved = _moved_backward_tasks(plan)
    if moved:
        raise UsageError(f"the plan runs the {moved} (a split-backward plan, docs/backward-split.md); the "
                         "hand-off formats keep a layer's whole backward on its stage, so the plan would not run "
                         "as solved: hand off a plan solved without --backward split")
    other = made_for_another(plan_source, problem.name)
    if other is not None:   # as verify and simulate say it
        say(f"note: the plan file was made for instance {other!r}, not {problem.name!r}")
    overrides = recorded_overrides(plan_source)
    if overrides:   # the devices the plan was solved for, as verify and simulate take them
        problem = override_devices(problem, **overrides)
        say(recorded_devices_note(argparse.Namespace(plan=plan_source), done="split"))
    plan, finest = _check_fit(problem, plan, args.plan, say)
    plan, order = in_pipeline_order(problem, plan)
    if order is not None:
        say(f"note: the plan lists its devices out of pipeline order; its stages are its devices "
            f"{', '.join(map(str, order))}, in that order")
    if args.format == "stages":
        rows = _stage_rows(layout, plan)
        value: Any = [{"stage": int(k), "device": kind, "#nodes": int(count), "first": first, "last": last}
                      for k, kind, count, first, last in rows[1:]]
        text = "\n".join(format_table(rows, left=range(5), rule=False))
        why = _why_no_pipeline(layout, plan)
        if why is not None:   # the table lists the devices as the plan does; no runtime runs them so
            say(f"note: the stages are the plan's devices in its order, but no pipeline runtime can run them: {why}")
    else:
        value = export(args.format, layout, plan, finest == "stages")
        on_cpu = [str(k) for k, kind in enumerate(stage_types(layout, plan)) if kind == CPU]
        if len(on_cpu) == 1:   # at an end of the pipeline (a CPU between accelerators is refused)
            say(f"note: stage {on_cpu[0]} runs on a CPU: the hand-off makes it a pipeline stage like the others, "
                "for a rank on the host")
        elif on_cpu:
            say(f"note: stages {' and '.join(on_cpu)} run on a CPU: the hand-off makes them pipeline stages like the "
                "others, for ranks on the host")
        text = value if isinstance(value, str) else json.dumps(value, indent=1)
        if args.format != "megatron":   # Megatron ties its embeddings itself
            for name, held in shared_across_stages(layout, plan).items():
                listed = ", ".join(map(str, held[:-1])) + f" and {held[-1]}"
                say(f"warning: trained parameter {name!r} is read by stages {listed}; the runtime gives each "
                    "stage its own copy and does not add their gradients, so the copies drift apart in training "
                    "(placement.torch.plan_pipeline adds them)")
    if args.out:
        write_text(args.out, text + "\n")
    if args.json:
        print_json({"format": args.format, "split": value})
    else:
        print(text)
    return 0
