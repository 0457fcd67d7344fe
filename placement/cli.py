"""Command-line interface: ``placement solve | verify | info``, and the subcommands of
:data:`COMMAND_MODULES` (``hypar``, ``simulate``, ``import``, ``split``; see their modules).

Exit statuses. ``solve``: 0 a plan was returned, 1 the instance is infeasible or
no plan was found (the status says which), 2 bad input or usage. ``verify``: 0
the plan is valid, 1 it is not, 2 bad input. ``info``: 0, or 2 on bad input.
Errors the user can fix are printed as one line ``error: ...`` on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Sequence

from placement import __version__
from placement.cli_args import byte_count, non_negative_int, positive_float, positive_int, relative_gap
from placement.errors import PlacementError, UsageError
from placement.io.plans import plan_to_json, read_plan
from placement.io.tarnawski import read_instance
from placement.problem.objectives import OBJECTIVES, check_objective
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.plan import DeviceAssignment, Plan
from placement.report.info import format_info, instance_info
from placement.report.latency import format_latency
from placement.report.solvers import format_solvers
from placement.report.text import format_evaluation
from placement.solution import Solution, Status
from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, count_ideals
from placement.solvers.milp.backends import backend_availability
from placement.solvers.registry import METHODS, solve
from placement.verification.evaluate import CONTIGUITY_CLASSES, Evaluation, evaluate
from placement.verification.latency import evaluate_latency
from placement.verification.ledger import communication_ledger, format_ledger

# Subcommands that live in modules of their own. Each module has ``register(subparsers)``,
# which adds its parser and sets ``handler`` (a function of the parsed arguments that
# returns the exit status) with ``set_defaults``.
COMMAND_MODULES: tuple[str, ...] = ("placement.cli_hypar", "placement.cli_import", "placement.cli_simulate")
# Relative tolerance between a solver's own value and the evaluator's recomputation.
AGREEMENT_TOLERANCE = 1e-9


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement",
        description="Provably optimal placement of DNN graphs onto pipelines of heterogeneous devices.")
    parser.add_argument("--version", action="version", version=f"placement {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("solve", help="find an optimal placement of an instance")
    p.add_argument("instance", help="instance file (Tarnawski JSON format)")
    p.add_argument("--method", default="dp", choices=sorted(METHODS),
                   help="solution method: dp (default, exact DP over ideals, stages throughput), milp "
                        "(every class and objective), or a baseline (see the README)")
    p.add_argument("--contiguity", choices=CONTIGUITY_CLASSES, default="stages",
                   help="contiguity class of the plan (default: stages); sets and none need --method milp")
    p.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                   help="throughput (default: max load, PipeDream), throughput-gpipe (max FW + max BW, "
                        "training) or latency (one sample, inference)")
    p.add_argument("--backend", default="cp-sat", metavar="NAME",
                   help="MILP backend: cp-sat (default), cbc, scip, highs, pulp (PuLP's CBC) or pulp:SOLVER "
                        "(any solver PuLP finds, e.g. pulp:GUROBI_CMD); see `placement info --solvers`")
    p.add_argument("--time-limit", type=positive_float, default=60.0, metavar="SECONDS",
                   help="MILP time limit (default 60); a stop at the limit is reported as feasible with its gap")
    p.add_argument("--gap", type=relative_gap, default=0.0, metavar="REL",
                   help="let the MILP stop at this relative gap (default 0: prove optimality)")
    p.add_argument("--threads", type=positive_int, default=1, metavar="N", help="MILP solver threads (default 1)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N",
                   help="random seed of the MILP solver and the randomised baselines (default 0)")
    p.add_argument("--log", metavar="FILE", help="append the MILP solver's log to FILE")
    p.add_argument("--calls", type=positive_int, default=1, metavar="Q",
                   help="latency objective: contiguous calls per accelerator, run one after another (default 1)")
    p.add_argument("--no-warm-start", action="store_true",
                   help="start the MILP from nothing instead of the DP's plan")
    p.add_argument("--split", metavar="FILE", help="method expert: the split (plan file) to evaluate")
    p.add_argument("--restarts", type=positive_int, metavar="N", help="method local-search: random restarts")
    p.add_argument("--accelerators", type=non_negative_int, metavar="N",
                   help="override the number of accelerators")
    p.add_argument("--cpus", type=non_negative_int, metavar="N", help="override the number of CPU cores")
    p.add_argument("--memory", type=byte_count, metavar="BYTES", help="override the memory of each accelerator")
    p.add_argument("--max-ideals", type=positive_int, default=DEFAULT_MAX_IDEALS, metavar="N",
                   help=f"refuse the DP above this many ideals (default {DEFAULT_MAX_IDEALS:,})")
    p.add_argument("--out", metavar="PLAN.json", help="write the plan (verified loads included) as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")

    p = sub.add_parser("verify", help="check a plan against an instance, independently of any solver")
    p.add_argument("instance")
    p.add_argument("plan", help="plan file: this package's plan JSON, or a Tarnawski plan / expert split")
    p.add_argument("--contiguity", choices=CONTIGUITY_CLASSES, default="none",
                   help="contiguity class the plan must belong to (default: none)")
    p.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                   help="throughput (default), throughput-gpipe, or latency (schedules the plan's calls)")

    p = sub.add_parser("info", help="describe an instance, or list the MILP solvers")
    p.add_argument("instance", nargs="?", help="instance file (not needed with --solvers)")
    p.add_argument("--solvers", action="store_true", help="list the MILP backends and whether they can be used")
    p.add_argument("--max-ideals", type=positive_int, default=DEFAULT_MAX_IDEALS, metavar="N",
                   help="stop counting ideals past this many")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def _load(args: argparse.Namespace) -> Instance:
    problem = read_instance(args.instance)
    counts: dict[str, int] = {}
    memory: dict[str, float] = {}
    names = {t.name for t in problem.device_types}
    if getattr(args, "accelerators", None) is not None:
        counts[ACCELERATOR] = args.accelerators
    if getattr(args, "cpus", None) is not None:
        counts[CPU] = args.cpus
    if getattr(args, "memory", None) is not None:
        memory[ACCELERATOR] = args.memory
    if (set(counts) | set(memory)) - names:
        raise UsageError("this instance has no accelerator/cpu device types to override")
    if counts or memory:
        problem = problem.with_devices(counts, memory)
    return problem


OBJECTIVE_LABELS = {"throughput": "max-load", "throughput-gpipe": "FW+BW", "latency": "latency"}


@dataclass
class _Verified:
    """The independent check of a returned plan under the requested objective."""

    valid: bool
    value: float
    violations: tuple[str, ...]
    report: str
    throughput: Evaluation       # loads per device, for the plan file


def _verify_plan(problem: Instance, plan: Plan, objective: str, contiguity: str) -> _Verified:
    if objective == "latency":
        latency = evaluate_latency(problem, plan)
        loads = evaluate(problem, plan, contiguity="none")
        return _Verified(latency.valid, latency.latency, latency.violations, format_latency(problem, latency), loads)
    evaluation = evaluate(problem, plan, contiguity=contiguity)
    return _Verified(evaluation.valid, evaluation.objective(objective), evaluation.violations,
                     format_evaluation(problem, evaluation), evaluation)


def _check_writable(path: str | None) -> None:
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


def _cmd_solve(args: argparse.Namespace) -> int:
    problem = _load(args)
    check_objective(problem, args.objective)  # before any work (the MILP's warm start runs the DP)
    _check_writable(args.log)
    progress = None if args.quiet else _progress
    options: dict[str, object] = {
        "max_ideals": args.max_ideals, "progress": progress, "backend": args.backend,
        "time_limit": args.time_limit, "gap": args.gap, "threads": args.threads, "seed": args.seed,
        "log_path": args.log, "calls": args.calls, "contiguity": args.contiguity, "objective": args.objective,
        "warm_start": None if args.no_warm_start else "auto"}
    if args.split is not None:
        options["split"] = args.split
    if args.restarts is not None:
        options["restarts"] = args.restarts
    solution = solve(problem, args.method, **options)
    verified = None
    if solution.plan is not None:
        verified = _verify_plan(problem, solution.plan, solution.objective_kind, solution.contiguity)
        claimed = solution.objective
        if not verified.valid or abs(claimed - verified.value) > AGREEMENT_TOLERANCE * max(1.0, abs(verified.value)):
            solution.stats["claimed_objective"] = claimed
            solution.status = Status.ERROR
            solution.message = ("the plan failed independent verification: " + verified.violations[0]
                                if not verified.valid else
                                f"the solver's value {claimed!r} disagrees with the verified {verified.value!r}")
        else:
            # The reported objective is always the evaluator's.
            if solution.bound == solution.objective:
                solution.bound = verified.value
            solution.objective = verified.value
    print(_summary(problem, solution))
    if verified is not None:
        print()
        print(verified.report)
    if args.out:
        doc = plan_to_json(problem, solution, verified.throughput if verified is not None else None)
        if verified is not None and solution.objective_kind != "throughput":
            doc["verified"][solution.objective_kind] = verified.value if verified.valid else None
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2, allow_nan=False)
                fh.write("\n")
        except OSError as exc:
            raise UsageError(f"{args.out}: cannot write: {exc.strerror}") from None
    if solution.status in (Status.OPTIMAL, Status.FEASIBLE):
        return 0
    return 1


def _summary(problem: Instance, solution: Solution) -> str:
    lines = [
        f"instance    {problem.name}",
        f"method      {solution.method} (objective {solution.objective_kind}, contiguity {solution.contiguity})",
        f"status      {solution.status}",
    ]
    if solution.plan is not None:
        label = OBJECTIVE_LABELS.get(solution.objective_kind, solution.objective_kind)
        lines.append(f"{label:<11} {solution.objective:.6f}  (verified independently)")
        lines.append(f"bound       {solution.bound:.6f}   gap {solution.gap:.2%}")
    elif solution.status is Status.NO_SOLUTION and solution.bound > 0:
        lines.append(f"bound       {solution.bound:.6f}")
    if solution.message:
        lines.append(f"note        {solution.message}")
    stats = solution.stats
    keys = [("ideals", "ideals"), ("pairs_examined", "ideal pairs examined"),
            ("blocks_evaluated", "blocks evaluated"), ("supernodes", "supernodes"),
            ("variables", "variables"), ("rows", "rows")]
    detail = ", ".join(f"{stats[k]:,} {label}" for k, label in keys if isinstance(stats.get(k), int))
    lines.append(f"runtime     {solution.runtime_s:.3f} s" + (f"  ({detail})" if detail else ""))
    return "\n".join(lines)


def _cmd_verify(args: argparse.Namespace) -> int:
    problem = read_instance(args.instance)
    plan = read_plan(args.plan)
    if args.objective == "latency":
        latency = evaluate_latency(problem, plan)
        print(format_latency(problem, latency))
        return 0 if latency.valid else 1
    evaluation = evaluate(problem, plan, contiguity=args.contiguity, infer_from_colours=True)
    print(format_evaluation(problem, evaluation))
    # The ledger sees the nodes the evaluator placed, colour-inferred ones included. A
    # disagreement with the charged communication is a finding about the data, not an
    # invalid plan, so it does not change the exit status.
    placed = Plan(tuple(DeviceAssignment(r.type, r.nodes) for r in evaluation.devices))
    print()
    print(format_ledger(communication_ledger(problem, placed)))
    if args.objective == "throughput-gpipe":
        print(f"FW+BW       {evaluation.gpipe_time:.6f}  (max forward load + max backward load)")
    return 0 if evaluation.valid else 1


def _cmd_info(args: argparse.Namespace) -> int:
    if args.solvers:
        print(format_solvers(backend_availability()))
        return 0
    if args.instance is None:
        raise UsageError("info needs an instance file (or --solvers)")
    problem = read_instance(args.instance)
    info = instance_info(problem)
    contraction = contract(problem)
    count = count_ideals(contraction.succ, args.max_ideals)
    info["supernodes"] = contraction.size
    info["ideals"] = count if count <= args.max_ideals else f"more than {args.max_ideals:,}"
    print(format_info(info))
    return 0


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of exiting."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return int(exc.code or 0)
    handlers = {"solve": _cmd_solve, "verify": _cmd_verify, "info": _cmd_info}
    handler = getattr(args, "handler", None) or handlers[args.command]
    try:
        return handler(args)
    except PlacementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """Console-script entry point."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into a command that stopped reading (e.g. head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    sys.exit(status)
