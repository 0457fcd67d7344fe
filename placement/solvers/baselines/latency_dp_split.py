"""The max-load DP split evaluated under the latency model (latency baseline).

Model
-----
The throughput-optimal pipeline of :func:`placement.solvers.dp.solve_dp`
(contiguity ``stages``, minimum max-load) is taken as it is, one call per
device, and its latency is computed by
:func:`placement.verification.latency.evaluate_latency`. This is what a planner
tuned for throughput gives a user who then serves single samples. Uses option
``max_ideals``; others are ignored.
"""

from __future__ import annotations

import time
from typing import Any

from placement.problem.instance import Instance
from placement.solution import Solution, Status
from placement.solvers.baselines.common import LATENCY, check_objective, latency_solution
from placement.solvers.dp import solve_dp
from placement.solvers.ideals import DEFAULT_MAX_IDEALS


def solve_latency_dp_split(problem: Instance, **options: Any) -> Solution:
    """The DP's max-load optimal split, valued by its latency."""
    check_objective(options, "latency-dp-split", LATENCY)
    start = time.perf_counter()
    split = solve_dp(problem, max_ideals=options.get("max_ideals", DEFAULT_MAX_IDEALS))
    stats = {"dp_status": str(split.status), "dp_max_load": split.objective if split.plan is not None else None,
             "ideals": split.stats.get("ideals")}
    note = "" if split.status is Status.OPTIMAL else f"the DP found no split: {split.message}"
    return latency_solution(problem, split.plan, "latency-dp-split", start, stats, note)
