"""``placement verify`` on a Piper instance: the check of a data- and tensor-parallel plan.

``placement verify`` hands a Piper instance here. Exit status: 0 the plan is valid, 1 it is not, 2 bad
input or usage; the ledger and the plan file's refuted claims are notes that do not change it
(:mod:`placement.verification.parallel_check`).
"""

from __future__ import annotations

import argparse

from placement.cli.options import UsageError, print_json


def run_parallel(args: argparse.Namespace, instance) -> int:
    """Check the plan file on the Piper ``instance`` and print the verdict, the figures and the ledger."""
    import placement
    from placement.cli.options import naming_the_file
    from placement.cli.simulate_parallel import plan_document
    from placement.errors import InvalidPlanError
    from placement.report.parallel_verification import format_parallel_verification

    inter_layer = "--inter-layer" if args.inter_layer else "--no-inter-layer"   # as given
    unused = [option for option, given in (("--contiguity", args.contiguity), ("--objective", args.objective),
                                           ("--calls", args.calls), ("--backward", args.backward),
                                           ("--w-placement", args.w_placement), (inter_layer, args.inter_layer),
                                           ("--w-share", args.w_share), ("--accelerators", args.accelerators),
                                           ("--cpus", args.cpus), ("--memory", args.memory)) if given is not None]
    if unused:
        raise UsageError(f"{', '.join(unused)} {'do' if len(unused) > 1 else 'does'} not apply to a Piper instance "
                         "(its plan is checked on the "
                         "devices and memory it records, with its own schedule)")
    document = plan_document(args.plan)
    try:
        verified = placement.verify(instance, document, ledger=True)
    except InvalidPlanError as exc:   # name the plan file
        raise naming_the_file(args.plan, exc) from None
    if args.json:
        print_json(verified.to_json())
    else:
        print(format_parallel_verification(instance, verified, document), end="")
    return 0 if verified.valid else 1
