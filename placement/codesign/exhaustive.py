"""The independent check of the exact co-design: the DP of :mod:`placement.solvers.dp` on every
combination of designs, with none of the exact method's structure (no dominance, no bounds, no
design choice inside the DP).

* Heterogeneous: every multiset of ``1..k`` designs within the budgets (the chips of one
  pipeline, in any order: the DP places them), each solved as an instance with one device type
  per design of the multiset and its multiplicity as the count, with exactly as many non-empty
  stages as chips (``stages=``): so the chips a plan uses are the multiset, and its summed TDP
  and area are the multiset's.
* Homogeneous: every design on exactly ``c = 1..k`` chips.

Each run is scored by its max load (throughput) or max load × the multiset's summed TDP (per
watt), and the best is chosen by :func:`.result.preferred`: the least score, and of the runs that
tie with it, the fewest watts, then the least area — the exact method's tie-break, checked here
over every set of chips a plan can use.

``k`` is the number of chips, or of the model's colour classes where that is fewer: more chips than
classes are never all used (every multiset of more chips holds the ones a plan uses in one of ``k``).
The number of DP runs is counted first; past ``max_combinations`` the check is refused with
that count (:class:`LimitExceededError`). Interrupted (Ctrl-C), it raises :class:`KeyboardInterrupt` saying after
how many runs: an unfinished check proves nothing.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

from placement.codesign.grid import Grid
from placement.codesign.outcome import Best, finish, infeasible
from placement.codesign.pipeline import design_instance
from placement.codesign.result import preferred
from placement.codesign.space import Candidates, candidates
from placement.codesign.workload import Workload
from placement.errors import LimitExceededError
from placement.solvers.dp import solve_dp
from placement.solvers.ideals import DEFAULT_MAX_IDEALS
from placement.wording import counted

#: The most DP runs ``--exhaustive`` makes unless told otherwise.
DEFAULT_MAX_COMBINATIONS = 20_000
#: seconds between two progress lines of a long check
PROGRESS_S = 5.0


def combination_count(designs: int, chips: int, homogeneous: bool) -> int:
    """DP runs of the exhaustive check (module docstring) for ``designs`` designs within the budgets."""
    if homogeneous:
        return designs * chips
    return sum(math.comb(designs + c - 1, c) for c in range(1, chips + 1))


def _combinations(designs: int, chips: int, homogeneous: bool):
    """``(design positions, counts, stages)`` of every DP run."""
    if homogeneous:
        for t in range(designs):
            for c in range(1, chips + 1):
                yield [t], [c], c
        return
    for c in range(1, chips + 1):
        for combo in itertools.combinations_with_replacement(range(designs), c):
            counts = Counter(combo)
            used = sorted(counts)
            yield used, [counts[t] for t in used], c


def solve_exhaustive(workload: Workload, grid: Grid, chips: int, area_mm2: float, power_w: float, *,
                     homogeneous: bool = False, objective: str = "throughput",
                     max_combinations: int = DEFAULT_MAX_COMBINATIONS,
                     max_ideals: int = DEFAULT_MAX_IDEALS, progress: Callable[[str], None] | None = None):
    """The co-design optimum by enumeration (module docstring); a :class:`.result.CodesignResult`.
    ``progress`` hears how many DP runs the check makes, and how far it is every :data:`PROGRESS_S`
    seconds."""
    start = time.perf_counter()
    per_watt = objective == "perf-per-watt"
    space: Candidates = candidates(workload, grid, area_mm2, power_w)
    if not space.designs:
        return infeasible(workload, space, chips, homogeneous, objective, "exhaustive", start, area_mm2, power_w)
    usable = workload.usable_chips(chips)
    runs = combination_count(len(space.designs), usable, homogeneous)
    if runs > max_combinations:
        count = f"{runs:,}" if runs < 10**15 else f"about {Decimal(runs):.2e}"
        used_chips = (counted(chips, "chip") if usable == chips
                      else f"{usable:,} of the {chips:,} chips (one per colour class)")
        raise LimitExceededError(f"the exhaustive check would run the DP on {count} design combinations "
                                 f"({counted(len(space.designs), 'design')} within the budgets, {used_chips}), "
                                 f"more than the limit max_combinations ({max_combinations:,})", "max_combinations")
    options: list[tuple[float, float, float, Best]] = []
    if progress is not None:
        within = counted(len(space.designs), "design")
        progress(f"exhaustive check: {counted(runs, 'DP run', 'DP runs')} ({within} within the budgets, "
                 f"{counted(usable, 'chip')})")
    said = time.perf_counter()
    done = 0
    try:
        for done, (used, counts, stages) in enumerate(_combinations(len(space.designs), usable, homogeneous)):
            if progress is not None and done and time.perf_counter() - said >= PROGRESS_S:
                said = time.perf_counter()
                progress(f"exhaustive check: {done:,}/{runs:,} DP runs ({done / runs:.0%}), {said - start:.1f} s")
            designs = [space.designs[t] for t in used]
            problem = design_instance(workload, designs, space.times[used], counts)
            solution = solve_dp(problem, stages=stages, max_ideals=max_ideals)
            if solution.plan is None:
                continue
            power = sum(float(space.tdp[t]) * c for t, c in zip(used, counts))
            area = sum(space.designs[t].area_mm2 * c for t, c in zip(used, counts))
            score = solution.objective * power if per_watt else solution.objective
            options.append((score, power, area, Best(score, solution.objective, solution.plan, tuple(designs))))
    except KeyboardInterrupt:   # the words of the check, not of the one DP run it stopped
        raise KeyboardInterrupt(f"interrupted after {done:,} of the exhaustive check's {runs:,} DP runs: "
                                "no optimum is proven") from None
    best = preferred(options)
    pruned_by = {"area": space.over_area, "power": space.over_power, "dominated": 0, "bound": 0}
    return finish(workload, space, best, chips, homogeneous, objective, "exhaustive", start, pruned_by, runs)
