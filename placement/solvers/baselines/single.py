"""Everything on one accelerator (throughput baseline of DESIGN.md §3).

Model
-----
Every colour class that is supported on accelerators goes to accelerator 0;
the other classes go to CPU core 0 (with no accelerator, everything goes to
CPU core 0). The accelerator pays no communication except on the edges to and
from the CPU. The memory bound is not considered: when the graph does not fit
one accelerator the evaluator reports the violation and the Solution's status
is ``error``.
"""

from __future__ import annotations

import time
from typing import Any

from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.solution import Solution
from placement.solvers.baselines.common import THROUGHPUT, build_plan, check_objective, throughput_solution, two_types


def solve_single(problem: Instance, **options: Any) -> Solution:
    """Everything on one accelerator; options other than ``objective`` are ignored."""
    check_objective(options, "single", THROUGHPUT)
    start = time.perf_counter()
    kinds = two_types(problem, "single")
    held: dict[tuple[str, int], list[int]] = {}
    for members in problem.colour_classes():
        supported = kinds.acc is not None and all(problem.nodes[v].times[kinds.acc] is not None for v in members)
        key = (ACCELERATOR, 0) if supported and kinds.accelerators > 0 else (CPU, 0)
        held.setdefault(key, []).extend(members)
    return throughput_solution(problem, build_plan(problem, held), "single", start)
