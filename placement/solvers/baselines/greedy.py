"""Greedy topological fill (throughput baseline of DESIGN.md §3).

Model
-----
The units are the inseparable blocks of
:func:`placement.solvers.baselines.common.units_in_topological_order` (colour
classes with their backward mates, merged where a pipeline cannot separate
them), taken in a topological order. Accelerators are filled one after the
other. When accelerator ``d`` of ``k`` is opened its share is

    share_d = (accelerator work not yet placed) / (k - d)

(the work of a unit is its accelerator time, compute only). A unit joins the
open accelerator when the accelerator is empty, or when its compute plus the
unit's stays within the share, or overshoots the share by less than it would
fall short without the unit; and, always, when the memory bound still holds.
Otherwise the next accelerator is opened; the last one takes every remaining
unit that fits its memory. Units that are unsupported on accelerators, that
fit no accelerator's remaining memory or that arrive after the last
accelerator is full go to one CPU core (to the last accelerator when there is
no CPU, where the evaluator then reports the memory violation).

The accelerators hold consecutive runs of one topological order, so without
unsupported or CPU units in between the plan is a pipeline (class ``stages``).
"""

from __future__ import annotations

import time
from itertools import chain
from typing import Any, Sequence

from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.problem.memory_fit import fits_summed
from placement.plan import Plan
from placement.solution import Solution
from placement.solvers.baselines.common import (THROUGHPUT, TwoTypes, Unit, build_plan, check_objective,
                                                throughput_solution, two_types, units_in_topological_order)


def greedy_fill(problem: Instance, kinds: TwoTypes, units: Sequence[Unit]) -> Plan:
    """The plan of the module docstring for the units in the given (topological) order."""
    k = kinds.accelerators
    held: dict[tuple[str, int], list[int]] = {}
    remaining = sum(u.acc for u in units if u.acc is not None)
    d, compute, memory = 0, 0.0, 0.0
    held_sizes: list[float] = []          # the sizes accelerator d holds, memory their sum (memory_fit decides)
    share = remaining / k if k else 0.0
    for unit in units:
        sizes = [problem.nodes[v].memory for v in unit.members]
        fits_somewhere = unit.acc is not None and k > 0 and fits_summed(unit.memory, sizes, kinds.memory)
        placed = False
        while fits_somewhere and d < k:
            last = d == k - 1
            target = compute + unit.acc
            wanted = not held.get((ACCELERATOR, d)) or last or target <= share or target - share < share - compute
            if wanted and fits_summed(memory + unit.memory, chain(held_sizes, sizes), kinds.memory):
                held.setdefault((ACCELERATOR, d), []).extend(unit.members)
                compute, memory = target, memory + unit.memory
                held_sizes += sizes
                placed = True
                break
            if last:
                break
            d += 1
            compute, memory, held_sizes = 0.0, 0.0, []
            share = remaining / (k - d)
        if unit.acc is not None:
            remaining -= unit.acc
        if placed:
            continue
        if kinds.cpus > 0 and unit.cpu is not None:
            held.setdefault((CPU, 0), []).extend(unit.members)
        else:
            held.setdefault((ACCELERATOR, max(0, min(d, k - 1))), []).extend(unit.members)
    return build_plan(problem, held)


def solve_greedy(problem: Instance, **options: Any) -> Solution:
    """Greedy topological fill; options other than ``objective`` are ignored."""
    check_objective(options, "greedy", THROUGHPUT)
    start = time.perf_counter()
    kinds = two_types(problem, "greedy")
    units = units_in_topological_order(problem, kinds)
    plan = greedy_fill(problem, kinds, units)
    return throughput_solution(problem, plan, "greedy", start, {"units": len(units)})
