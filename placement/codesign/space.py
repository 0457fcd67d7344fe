"""The candidate designs of a co-design: the grid cut to the budgets, each design's node times on
the model, dominance between designs, and lower bounds per design.

Area and TDP grow with every parameter of the template (:mod:`.template`), so the designs within a
budget are a down-closed region of the grid; those outside it are pruned without costing them.
Design ``a`` *dominates* ``b`` when ``time_a(v) ≤ time_b(v)`` for every node ``v``, ``TDP(a) ≤
TDP(b)`` and ``area(a) ≤ area(b)``: memory and transfers do not depend on the design, so every
block's load on ``a`` is at most its load on ``b``, and replacing ``b`` by ``a`` on any stage never
makes a plan's max load, its summed TDP or its summed area larger — so never makes it worse, ties
included (:mod:`.result`: of plans of equal objective, the fewer watts, then the less area, are
preferred). Only the undominated designs (the Pareto set; of equal ones, the first in the order by
total time, TDP, area, grid position) enter the DP. On times alone (``by_cost=False``) dominance
keeps the least max load but not the tie-break: a design as fast that draws fewer watts may be dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.codesign.grid import Grid
from placement.codesign.opcost import node_times_ms
from placement.codesign.template import Design
from placement.codesign.workload import Workload


@dataclass(frozen=True)
class Candidates:
    """The grid's designs within the budgets, with their node times (rows, ms) and TDPs (W)."""

    designs: tuple[Design, ...]
    times: np.ndarray
    tdp: np.ndarray
    grid_designs: int
    over_area: int
    over_power: int
    #: where no design is within the budgets: the one that needs the least raise of them (:func:`candidates`)
    nearest: Design | None = None

    @property
    def area(self) -> np.ndarray:
        """The designs' areas (mm²)."""
        return np.array([d.area_mm2 for d in self.designs], dtype=np.float64)

    def subset(self, keep: list[int] | np.ndarray) -> "Candidates":
        keep = [int(i) for i in keep]
        return Candidates(tuple(self.designs[i] for i in keep), self.times[keep], self.tdp[keep],
                          self.grid_designs, self.over_area, self.over_power)


def candidates(workload: Workload, grid: Grid, area_mm2: float, power_w: float) -> Candidates:
    """The designs of ``grid`` with area ≤ ``area_mm2`` and TDP ≤ ``power_w``, costed on ``workload`` (whose
    nodes each fit a chip's DRAM: :class:`.workload.Workload` checks it)."""
    designs = grid.designs()
    area = np.array([d.area_mm2 for d in designs])
    tdp = np.array([d.tdp_w for d in designs])
    fits_area = area <= area_mm2
    within = fits_area & (tdp <= power_w)
    chosen = tuple(d for d, ok in zip(designs, within) if ok)
    times = node_times_ms(workload, chosen) if chosen else np.zeros((0, len(workload.operators)))
    return Candidates(chosen, times, tdp[within], len(designs), int((~fits_area).sum()),
                      int((fits_area & ~within).sum()), None if chosen else _nearest(designs, fits_area))


def _nearest(designs: list[Design], fits_area: np.ndarray) -> Design:
    """Of designs none of which is within both budgets, the one that needs the least raise of one budget: of
    least TDP among those within the area, or, where none is, of least area (then TDP)."""
    within_area = [d for d, ok in zip(designs, fits_area) if ok]
    if within_area:
        return min(within_area, key=lambda d: (d.tdp_w, d.area_mm2))
    return min(designs, key=lambda d: (d.area_mm2, d.tdp_w))


def undominated(c: Candidates, by_cost: bool = True) -> list[int]:
    """Positions of the undominated designs of ``c`` (module docstring: on node times, TDP and area, or with
    ``by_cost=False`` on node times alone), in the order by total time."""
    total = c.times.sum(axis=1)
    area = c.area
    order = np.lexsort((np.arange(len(total)), area, c.tdp, total))
    kept: list[int] = []
    kept_times, kept_tdp, kept_area = np.empty_like(c.times), np.empty_like(c.tdp), np.empty_like(area)
    last = -1   # the row of ``kept`` that dominated the design dropped last: it often dominates the next one too
    for i in order:
        m = len(kept)
        if m:
            times, tdp, chip_area = c.times[i], c.tdp[i], area[i]
            if last >= 0 and (not by_cost or (kept_tdp[last] <= tdp and kept_area[last] <= chip_area)) \
                    and (kept_times[last] <= times).all():
                continue
            # with costs, only the kept designs of no more watts and area can dominate: their node times alone
            # are compared (over a grid of a million designs, a whole row per kept design took minutes)
            rows = np.flatnonzero((kept_tdp[:m] <= tdp) & (kept_area[:m] <= chip_area)) if by_cost else None
            hit = ((kept_times[rows] if by_cost else kept_times[:m]) <= times).all(axis=1)
            if hit.any():
                first = int(np.argmax(hit))
                last = int(rows[first]) if by_cost else first
                continue
        kept_times[m], kept_tdp[m], kept_area[m] = c.times[i], c.tdp[i], area[i]   # the rows of ``kept``
        kept.append(int(i))
    return kept


def class_times(workload: Workload, times: np.ndarray) -> np.ndarray:
    """Per design (rows), the largest compute time of a colour class (a class shares one chip)."""
    classes = workload.instance.colour_classes()
    return np.column_stack([times[:, members].sum(axis=1) for members in classes]).max(axis=1)


def time_lower_bounds(workload: Workload, times: np.ndarray, chips: int) -> np.ndarray:
    """Per design, a lower bound on the max load of any pipeline of at most ``chips`` chips of that
    design: the largest colour class, and the total compute over the chips."""
    return np.maximum(class_times(workload, times), times.sum(axis=1) / chips)
