"""``placement verify INSTANCE PLAN``: check a plan independently of any solver.

Exit status: 0 the plan is valid; 1 it is not; 2 bad input or usage. The communication ledger
is reported beside the verdict and is informational: it compares the instance's transfer costs
with its tensor sizes (on training graphs as on inference graphs), so a disagreement is a
finding about the instance's data, not about the plan, and its line says so; it does not
change the exit status (:mod:`placement.verification.ledger`).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from placement.cli.command import SUMMARIES
from placement.cli.options import (LARGE_GRAPH_NODES, UsageError, add_device_options, add_output_options, devices,
                                   fraction, input_path, load_overridden, positive_int, print_json, progress_printer,
                                   recorded_devices_note)
from placement.errors import InvalidParameterError
from placement.problem.objectives import OBJECTIVES
from placement.problem.split import W_PLACEMENTS, solved_otherwise
from placement.verification.check import violations_beyond
from placement.verification.evaluate import CONTIGUITY_CLASSES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verify", help=SUMMARIES["verify"])
    p.add_argument("instance", type=input_path, help="instance file")
    p.add_argument("plan", type=input_path,
                   help="plan file: this package's plan JSON, or a Tarnawski plan / expert split (for a "
                        "Piper instance, a parallel plan as solve --out writes it)")
    p.add_argument("--contiguity", choices=CONTIGUITY_CLASSES,
                   help="contiguity class the plan must belong to (default: the class the plan file records it "
                        "was solved in, else none; a split-backward plan is checked as a pipeline, stages)")
    p.add_argument("--objective", choices=OBJECTIVES,
                   help="throughput, throughput-gpipe, or latency (schedules the plan's calls); default: the "
                        "objective the plan file records it was solved for, else throughput")
    p.add_argument("--calls", type=positive_int, metavar="Q",
                   help="latency objective: the most calls an accelerator may run (default: the limit the plan file "
                        "records for a latency solve, else none)")
    p.add_argument("--backward", choices=("joint", "split"),
                   help="split: check a split-backward plan (its b_tasks and w_tasks; docs/backward-split.md); "
                        "default: split for a plan file that records a split solve, else joint")
    p.add_argument("--w-placement", dest="w_placement", choices=W_PLACEMENTS,
                   help="--backward split: the W rule the plan must follow (default: the plan file's, else any)")
    p.add_argument("--inter-layer", dest="inter_layer", action=argparse.BooleanOptionalAction, default=None,
                   help="--backward split: B may run on the stage before its layer's (default: as the plan file "
                        "records, else not)")
    p.add_argument("--w-share", dest="w_share", type=fraction, metavar="FRACTION",
                   help="--backward split: W's share of a backward time the instance does not split (default: "
                        "the plan file's, else 0.5)")
    add_device_options(p, " (as given to solve)")
    add_output_options(p)
    p.set_defaults(handler=run)


def split_options(args: argparse.Namespace, record: dict) -> tuple[dict, str]:
    """The backward options of the check (:func:`placement.problem.split.checked_backward`: those given,
    else those the plan file records for a split solve, ``record``, else the defaults); and, where the
    record supplied some of them, a phrase naming them as options. A value of the record that is no
    option's value is refused as the record's, not as an option."""
    from placement.problem.split import checked_backward, split_model

    options, taken = checked_backward(record, args.backward, w_placement=args.w_placement,
                                      inter_layer=args.inter_layer, w_share=args.w_share)
    if len(taken) > 1:
        try:
            split_model(options["w_placement"], options["inter_layer"], options["w_share"])
        except InvalidParameterError as exc:
            if exc.parameter in taken:
                raise UsageError(f"{args.plan}: the plan's backward record: {exc}") from None
    phrases = []
    for name in taken:
        flag, value = f"--{name.replace('_', '-')}", options[name]
        phrases.append((flag if value else f"--no-{flag[2:]}") if isinstance(value, bool) else f"{flag} {value}")
    return options, ", ".join(phrases)


def _figures(verification: Any) -> dict[str, Any]:
    """What the text output tables, for ``--json``: every device's verified figures and, for latency,
    every call's schedule."""
    evaluation, latency, _ = verification.report
    figures: dict[str, Any] = {"devices": [asdict(d) for d in evaluation.devices]}
    if latency is not None:
        figures["call_schedule"] = [
            {"device": c.device, "call": c.index, "type": c.type, "nodes": list(c.nodes), "receive": c.receive,
             "compute": c.compute, "send": c.send, "duration": c.duration, "start": c.start, "end": c.end}
            for c in latency.calls]
    return figures


def run(args: argparse.Namespace) -> int:
    import placement
    from placement.backward_split import SPLIT_OBJECTIVES
    from placement.io.plans import (as_plan, garbled_calls, garbled_stages, read_plan_file, recorded_backward,
                                    recorded_calls, recorded_contiguity, recorded_objective,
                                    recorded_objective_refusal, recorded_stages, refuted_claims)
    from placement.report.ledger import format_ledger
    from placement.report.solution import format_verification

    progress = progress_printer(args.quiet)
    read: list = []   # the plan file, where reading the instance took the devices it records
    instance = load_overridden(args, progress, args.plan, read)   # a large file takes seconds
    if not isinstance(instance, placement.Instance):   # a Piper instance: data- and tensor-parallel stages
        from placement.cli.verify_parallel import run_parallel

        return run_parallel(args, instance)
    announce = progress if progress is not None and len(instance.nodes) >= LARGE_GRAPH_NODES else None
    plan = read[0] if read else read_plan_file(args.plan)   # read once: its record, claims and itself; named
    solved_for = recorded_objective(plan)
    if args.objective is None:
        refusal = recorded_objective_refusal(instance, solved_for) if solved_for is not None else None
        if refusal:   # not an option given: the plan file's record
            raise UsageError(f"{args.plan} {refusal}; give --objective to check it for another objective")
        args.objective = solved_for or "throughput"
    record = recorded_backward(plan)
    split, recorded = split_options(args, record)
    if split["backward"] == "split" and args.backward is None and not instance.is_training:   # the record's mode
        raise UsageError(f"{args.plan} records a split-backward solve, which needs a training instance (one with "
                         "backward nodes); this instance has none (--backward joint checks the plan's layers only)")
    if announce:
        announce(f"checking the plan {args.plan} on {len(instance.nodes):,} nodes")
    claimed_class = None   # the contiguity class the plan file records, where it is the one checked
    claimed_calls = None   # the call limit the plan file records, where it is the one checked
    calls_garbled = None   # the call limit the plan file records where it is no count (not checked)
    if args.calls is None and args.objective == "latency" and solved_for == "latency":
        claimed_calls = args.calls = recorded_calls(plan)
        calls_garbled = garbled_calls(plan)
    if split["backward"] == "split":   # the split evaluator checks contiguity stages and infers nothing
        # split as asked, or as the plan file records: the refusal names which
        subject = ("--backward split" if args.backward
                   else "the plan file, which was solved with its backward pass split")
        # on an inference graph the objective may be the plan file's latency, not an option given: the check
        # refuses the instance itself, as it does for any objective
        if instance.is_training and args.objective not in SPLIT_OBJECTIVES:
            raise UsageError(f"--objective {args.objective} does not apply to {subject} (a split-backward plan is "
                             "checked for throughput or throughput-gpipe)")
        for option, value, fits in (("--contiguity", args.contiguity, "stages"), ("--calls", args.calls, 1)):
            if value is not None and value != fits:
                raise UsageError(f"{option} does not apply to {subject} (a split-backward plan is checked "
                                 "as a pipeline: contiguity stages, one call per device)")
        # the W share only as given (left out, the library takes the plan file's or the default): the library
        # refuses one given where every backward node gives its own W time
        verification = placement.verify(instance, plan, objective=args.objective, **{**split, "w_share": args.w_share},
                                        **devices(args))
    else:   # split options given without --backward split are refused by name
        claimed_class = recorded_contiguity(plan) if args.contiguity is None else None
        verification = placement.verify(instance, plan, objective=args.objective,
                                        contiguity=args.contiguity or claimed_class or "none",
                                        calls=args.calls, infer_from_colours=True,
                                        ledger=args.objective != "latency", backward=split["backward"],
                                        w_placement=args.w_placement, inter_layer=args.inter_layer,
                                        w_share=args.w_share, **devices(args))
    if announce:
        announce("checked: the plan is " + ("valid" if verification.valid else "not valid"))
    # a call limit the plan file records that is no count: the verdict's notes say so (the library's check took it)
    said = _notes(args, plan, instance, verification, solved_for, split, record, recorded, claimed_calls,
                  claimed_class)
    if args.json:   # the record's refuted claims as fields (the text prints them among the verdict's notes)
        # an invalid plan's value is no verdict on the value it claims
        # and one solved under another backward model than the check's is no claim about the check's value
        compared = verification.valid and solved_otherwise(record, split) is None
        claims = refuted_claims(plan, args.objective, verification.value if compared else None, instance.name)
        stages = recorded_stages(plan)   # a solve into exactly N stages: the plan's non-empty devices
        used = None if stages is None else sum(1 for device in as_plan(plan).devices if device.nodes)
        stages_refuted = None if used == stages else {"recorded": stages, "non_empty_devices": used}
        stages_garbled = garbled_stages(plan)
        print_json({**verification.to_json(), **_figures(verification), "claim_refuted": claims.value,
                    "plan_made_for": claims.instance, "claim_unreadable": claims.unreadable,
                    "stages_refuted": stages_refuted, "stages_unreadable": stages_garbled,
                    "calls_unreadable": calls_garbled, "notes": [*said, *verification.notes]})
    else:
        for note in said:
            print(f"note: {note}")
        print(format_verification(instance, verification), end="")
        for note in verification.notes:
            print(f"note: {note}")
        _, _, ledger = verification.report
        if ledger is not None:
            print()
            print(format_ledger(ledger))
    return 0 if verification.valid else 1


def _notes(args: argparse.Namespace, plan: Any, instance: Any, verification: Any, solved_for: str | None,
           split: dict, record: dict, recorded: str, claimed_calls: int | None,
           claimed_class: str | None) -> list[str]:
    """What the check took from the plan file rather than from the command line, and what it makes of the
    plan's record, one sentence each (printed before the verdict; ``notes`` in JSON, before the verdict's)."""
    import placement
    from placement.io.plans import as_plan, garbled_contiguity, unread_contiguity_note

    said = []
    if solved_for is not None and solved_for != "throughput" and args.objective == solved_for:
        said.append(f"checked for {solved_for}, the objective the plan file records it was solved for")
    elif solved_for is not None and solved_for != args.objective:
        said.append(f"the plan file records a solve for {solved_for}; checked for {args.objective} as asked")
    devices_note = recorded_devices_note(args, plan)
    if devices_note:
        said.append(devices_note)
        if split["backward"] == "joint":   # the file vouches for its own devices: say what the instance says
            own = placement.verify(instance, as_plan(plan), objective=args.objective,
                                   contiguity=verification.contiguity, calls=args.calls, infer_from_colours=True)
            # a reason the recorded devices share (a broken contiguity class) is no reason of the devices
            own_only = violations_beyond(own.violations, verification.violations)
            if not own.valid and own_only:
                said.append(f"on the instance's own devices the plan is not valid: {own_only[0]}")
    if recorded:
        said.append(f"checked as a split-backward plan with {recorded}, as the plan file records")
    elif split["backward"] == "joint" and record.get("mode") == "split":
        said.append("the plan file records a split-backward solve; --backward joint checks its layers only (its "
                    "b_tasks and w_tasks are not read)")
    if claimed_calls is not None:
        said.append(f"checked with at most {claimed_calls} call{'s' if claimed_calls > 1 else ''} per accelerator, "
                    "as the plan file records")
    if claimed_class not in (None, "none"):
        said.append(f"checked for contiguity {claimed_class}, the class the plan file records it was solved in")
    garbled = garbled_contiguity(plan) if args.contiguity is None and split["backward"] == "joint" else None
    if garbled is not None:
        said.append(unread_contiguity_note("the plan file", garbled))
    return said
