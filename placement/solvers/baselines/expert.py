"""A given split, such as the published human-expert splits (throughput baseline of DESIGN.md §3).

Model
-----
The split file (``split`` option; Tarnawski's plan format or this package's)
is read as it is: its devices, in its order (the B and W tasks of a split-backward plan are not
read, and the message says so). Nodes it does not list are placed
with the listed nodes of their colour class when that class sits on one device
(the expert splits of training graphs may list forward nodes only); the plan
returned lists the split's nodes as given (unknown or repeated ids included, so
that the evaluator still reports them) followed by the inferred ones, and
verifies without inference. A split
that breaks a constraint is returned with status ``error`` and the evaluator's
first violation in the message. A split that records another instance than the one solved is evaluated as it is,
and the message says so.
"""

from __future__ import annotations

import os
import time
from os import PathLike
from typing import Any

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance
from placement.plan import DeviceAssignment, Plan
from placement.io.plans import as_plan, made_for_another, made_for_text
from placement.solution import Solution
from placement.solvers.baselines.common import THROUGHPUT, check_objective, throughput_solution
from placement.verification.evaluate import evaluate, with_inferred


def solve_expert(problem: Instance, **options: Any) -> Solution:
    """Evaluate the split given as option ``split`` (a plan, plan document or plan file); other options
    are ignored."""
    check_objective(options, "expert", THROUGHPUT)
    split = options.get("split")
    if split is None:
        raise InvalidParameterError("split", "is required by method 'expert', which evaluates a given split: "
                                             "pass a plan or a plan file")
    start = time.perf_counter()
    listed = as_plan(split, "split")
    joint = Plan(tuple(DeviceAssignment(dev.type, dev.nodes, dev.calls) for dev in listed.devices))
    completed = evaluate(problem, joint, "none", infer_from_colours=True)
    plan = with_inferred(joint, completed)
    stats = {"split": os.fspath(split) if isinstance(split, (str, PathLike)) else type(split).__name__,
             "inferred_from_colours": len(completed.inferred)}
    notes = []
    other = made_for_another(split, problem.name)   # after reading it: a pipe is read once, by as_plan
    if other is not None:
        notes.append(made_for_text("the split", other, problem.name))
    if any(dev.b_tasks or dev.w_tasks for dev in listed.devices):
        notes.append("the split's b_tasks and w_tasks are not read: method 'expert' evaluates the plan with joint "
                     "backward nodes (verify with backward='split' checks a split-backward plan)")
    return throughput_solution(problem, plan, "expert", start, stats, "; ".join(notes))
