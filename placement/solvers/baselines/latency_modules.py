"""The module-chain latency plan: the plan DP of :mod:`placement.problem.module_chain` (latency baseline).

Model
-----
The DP of :mod:`placement.problem.module_chain` in plan mode walks the chain of articulation
nodes: each articulation node runs on a CPU or in a call, a call may hold the whole modules after
it, and inside a module each branch that is a chain splits into a head (in the call before), CPU
nodes and calls of its own, and a tail (in the call after); a branch that is not a chain splits
into a head and a tail closed under predecessors and successors within it, its other nodes on the
CPUs. Every call goes to an accelerator of its own, at most as many calls as accelerators, the CPU
nodes to the CPUs; the DP's value is then the plan's latency (DESIGN.md §2), the least over plans
of that shape. The latency evaluator has the last word (memory as the model reads it, colour
classes, which the DP does not know); where it refuses the plan, every node goes to the CPUs if
they take every node. It is a plan, not a proof.

With ``time_limit`` (seconds) the DP runs until it ends or the limit passes; without, until its
:data:`~placement.problem.module_chain.MAX_WORK` steps are spent. Either way it stops at ``deadline``
(a ``time.perf_counter()`` value, as a caller's share of a time limit) where that comes first; where
it stops, the message names ``time_limit``.

Takes the two-type catalogue (device types ``accelerator`` and ``cpu``); options other
than ``objective``, ``time_limit`` and ``deadline`` are ignored.
"""

from __future__ import annotations

import time
from typing import Any

from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.problem.module_chain import MAX_WORK, OUT_OF_TIME, ModuleChain, module_chain
from placement.plan import Plan
from placement.solution import Solution
from placement.solvers.baselines.common import LATENCY, build_plan, check_objective, latency_solution, two_types
from placement.verification.latency import evaluate_latency


def module_plan(problem: Instance, found: ModuleChain) -> Plan:
    """The plan of the DP's calls (an accelerator each) and CPU nodes."""
    held: dict[tuple[str, int], list[int]] = {(ACCELERATOR, i): list(call) for i, call in enumerate(found.calls)}
    held[(CPU, 0)] = list(found.cpu)
    return build_plan(problem, held)


def solve_latency_modules(problem: Instance, **options: Any) -> Solution:
    """The module-chain DP's plan, or every node on the CPUs where the evaluator refuses it (module
    docstring)."""
    check_objective(options, "latency-modules", LATENCY)
    start = time.perf_counter()
    kinds = two_types(problem, "latency-modules")
    time_limit = options.get("time_limit")
    deadline = options.get("deadline")
    if time_limit is not None:
        deadline = start + float(time_limit) if deadline is None else min(deadline, start + float(time_limit))
    found = module_chain(problem, plan=True, max_work=MAX_WORK if time_limit is None else None, deadline=deadline)
    stats = {"modules": found.modules, "dp_value": found.value}
    if found.value is not None:
        plan = module_plan(problem, found)
        evaluation = evaluate_latency(problem, plan)
        if evaluation.valid:
            return latency_solution(problem, plan, "latency-modules", start, stats, evaluation=evaluation)
        note = "the DP's plan does not fit the instance (colour classes or memory)"
    elif found.why == OUT_OF_TIME:
        note = f"the DP found no plan ({OUT_OF_TIME}; a larger time_limit lets it finish)"
    elif time_limit is None and found.why.endswith(" steps"):
        note = f"the DP found no plan ({found.why}; a time_limit lets it run past them)"
    else:
        note = f"the DP found no plan ({found.why})"
    everything = build_plan(problem, {(CPU, 0): list(range(len(problem.nodes)))})
    if kinds.cpus and evaluate_latency(problem, everything).valid:
        return latency_solution(problem, everything, "latency-modules", start, stats, f"{note}; every node on the CPUs")
    return latency_solution(problem, None, "latency-modules", start, stats, f"latency-modules found no plan: {note}")
