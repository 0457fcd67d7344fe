"""Greedy for the latency objective (the greedy of Tarnawski et al.'s appendix).

Model
-----
The units are the inseparable blocks of
:func:`placement.solvers.baselines.common.units_in_topological_order` (colour
classes, merged where a contiguous plan cannot separate them), taken in a
topological order. Accelerator 0 is filled while its memory bound allows (on the sizes as
written, as the model reads them: :func:`placement.problem.memory_fit.fits`); then
accelerator 1, and so on; once a unit does not fit the last accelerator, it and
every later unit go to the CPUs. Each accelerator runs its units as one call.
A unit that is unsupported on accelerators, or larger than an accelerator's
memory, goes to the CPUs on its own, and the next unit on the same accelerator
starts a new call there while it has fewer than ``calls`` calls, else on the next
accelerator (so each call stays a run of consecutive units of one topological
order, hence contiguous, and the calls never wait on each other in a cycle).
All CPU nodes are listed on one CPU device: under the latency model CPU nodes
run in parallel without limit. Without CPU cores, units that fit no accelerator
stay on the last one and the evaluator reports the memory violation.
"""

from __future__ import annotations

import time
from itertools import chain
from typing import Any

from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.problem.memory_fit import fits, fits_summed
from placement.solution import Solution
from placement.solvers.baselines.common import (LATENCY, build_plan, check_objective, latency_solution, two_types,
                                                units_in_topological_order)


def solve_latency_greedy(problem: Instance, calls: int = 1, **options: Any) -> Solution:
    """The greedy of the module docstring, at most ``calls`` calls per accelerator; the Solution's
    objective is the verified latency."""
    check_objective(options, "latency-greedy", LATENCY)
    start = time.perf_counter()
    kinds = two_types(problem, "latency-greedy")
    units = units_in_topological_order(problem, kinds)
    k = kinds.accelerators
    held: dict[tuple[str, int], list[int]] = {}
    runs: dict[tuple[str, int], list[list[int]]] = {}
    d, memory, overflow = 0, 0.0, False
    held_sizes: list[float] = []   # the sizes the current accelerator holds, memory their sum (memory_fit decides)
    break_call = False
    for unit in units:
        sizes = [problem.nodes[v].memory for v in unit.members]
        accelerator = unit.acc is not None and k > 0 and fits(sizes, kinds.memory) and not overflow
        if accelerator and break_call and len(runs[(ACCELERATOR, d)]) >= calls and d < k - 1:
            # a new call, but this accelerator has all its calls
            d, memory, held_sizes, break_call = d + 1, 0.0, [], False
        if accelerator and break_call and len(runs[(ACCELERATOR, d)]) >= calls:
            overflow, accelerator = True, False         # and so have all the others
        if accelerator:
            while d < k - 1 and not fits_summed(memory + unit.memory, chain(held_sizes, sizes), kinds.memory):
                d, memory, held_sizes, break_call = d + 1, 0.0, [], False
            if not fits_summed(memory + unit.memory, chain(held_sizes, sizes), kinds.memory):
                overflow = True
                accelerator = False
        if not accelerator and (kinds.cpus == 0 or unit.cpu is None):
            accelerator = k > 0   # nowhere else to go: the evaluator reports what breaks
        if accelerator:
            key = (ACCELERATOR, d)
            device_calls = runs.setdefault(key, [])
            if break_call or not device_calls:
                device_calls.append([])
                break_call = False
            device_calls[-1].extend(unit.members)
            held.setdefault(key, []).extend(unit.members)
            memory += unit.memory
            held_sizes += sizes
        else:
            held.setdefault((CPU, 0), []).extend(unit.members)
            break_call = (ACCELERATOR, d) in runs
    plan = build_plan(problem, held, runs)
    return latency_solution(problem, plan, "latency-greedy", start, {"units": len(units)})
