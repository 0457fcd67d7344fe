"""From the best plan a co-design method found to its :class:`.result.CodesignResult`: the stages'
designs, the objective, and the re-check of the plan by the independent evaluator."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from placement.codesign.pipeline import design_instance, stage_designs
from placement.codesign.result import CodesignResult
from placement.codesign.space import Candidates
from placement.codesign.template import DRAM_BYTES, Design
from placement.codesign.workload import Workload
from placement.plan import Plan
from placement.problem.instance import format_number
from placement.problem.memory_fit import fits
from placement.verification.evaluate import evaluate
from placement.wording import counted

#: Relative difference allowed between the max load a method computed and the evaluator's.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Best:
    """A method's best plan: ``score`` (what it minimised: max load in ms, or max load × summed TDP),
    its max load ``time_ms``, the plan (device types named by design labels) and the designs it may
    name."""

    score: float
    time_ms: float
    plan: Plan
    designs: tuple[Design, ...]


def objective_value(objective: str, time_ms: float, power_w: float) -> float:
    """Model batches per second (``throughput``), or that per watt of ``power_w`` (``perf-per-watt``)."""
    throughput = 1000.0 / time_ms if time_ms > 0 else float("inf")
    return throughput / power_w if objective == "perf-per-watt" else throughput


def verified_time(workload: Workload, space: Candidates, plan: Plan,
                  designs: tuple[Design, ...]) -> tuple[float, tuple[str, ...]]:
    """The max load of ``plan`` on chips of the stages' ``designs`` and the violations, by the evaluator."""
    counts = Counter(designs)
    used = sorted(counts)
    rows = [space.designs.index(d) for d in used]
    problem = design_instance(workload, used, space.times[rows], [counts[d] for d in used])
    evaluation = evaluate(problem, plan, "stages")
    return evaluation.max_load, evaluation.violations


def finish(workload: Workload, space: Candidates, best: Best | None, chips: int, homogeneous: bool, objective: str,
           method: str, start: float, pruned_by: dict[str, int], dp_runs: int,
           status: str = "optimal", evaluated: int | None = None, stats: dict | None = None) -> CodesignResult:
    """The result of ``best`` (``None``: no plan), its plan re-checked by the evaluator (status
    ``no_solution``, without the plan, when the check disagrees), with the evaluator's max load as its time.
    ``evaluated``: designs evaluated, by default the grid's less ``pruned_by``."""
    if evaluated is None:
        evaluated = space.grid_designs - sum(pruned_by.values())
    common = dict(objective=objective, evaluated=evaluated, pruned=sum(pruned_by.values()), pruned_by=pruned_by,
                  grid_designs=space.grid_designs, chips=chips, homogeneous=homogeneous, method=method,
                  dp_runs=dp_runs, shapeless_nodes=workload.shapeless_nodes, stats=dict(stats or {}))
    if best is None:
        return CodesignResult("infeasible", value=0.0, time_per_input_ms=float("inf"), power_w=0.0, designs=(),
                              plan=None, runtime_s=time.perf_counter() - start,
                              message=no_plan_message(workload, chips), **common)
    designs = stage_designs(best.plan, best.designs)
    power = float(sum(d.tdp_w for d in designs))
    checked, violations = verified_time(workload, space, best.plan, designs)
    if violations or abs(checked - best.time_ms) > TOLERANCE * max(1.0, abs(best.time_ms)):
        # a plan the evaluator does not confirm is never returned (as in placement.solve)
        common["stats"]["rejected_plan"] = [[d.label, list(dev.nodes)] for d, dev in
                                            zip(designs, (dev for dev in best.plan.devices if dev.nodes))]
        return CodesignResult("no_solution", value=0.0, time_per_input_ms=float("inf"), power_w=0.0, designs=(),
                              plan=None, runtime_s=time.perf_counter() - start,
                              message=f"the {method} method's plan failed independent verification: max load "
                                      f"{checked!r} ms against its {best.time_ms!r} ms"
                                      f"{'; ' + violations[0] if violations else ''}", **common)
    # the evaluator's max load, as placement.solve reports it: one plan has one value, whichever search found it
    return CodesignResult(status, value=objective_value(objective, checked, power),
                          time_per_input_ms=checked, power_w=power, designs=designs, plan=best.plan,
                          runtime_s=time.perf_counter() - start, **common)


def no_plan_message(workload: Workload, chips: int) -> str:
    """Why no pipeline of at most ``chips`` chips holds the model, where a design within the budgets exists: a
    colour class (one chip) whose nodes need more than a chip's DRAM, so that no number of chips holds it; all
    the nodes needing more than ``chips`` chips' DRAM; or, where neither bound shows it, the search's answer."""
    nodes = workload.instance.nodes
    for members in workload.instance.colour_classes():
        sizes = [nodes[v].memory for v in members]
        if len(members) > 1 and not fits(sizes, DRAM_BYTES):
            ids = [str(nodes[v].id) for v in members]
            named = " and ".join(ids) if len(ids) <= 3 else f"{', '.join(ids[:3])} and {len(ids) - 3:,} more"
            return (f"the colour class of nodes {named} needs {format_number(math.fsum(sizes))} bytes on one chip, "
                    f"more than its {DRAM_BYTES:,} bytes of DRAM: no number of chips holds the model")
    sizes = [node.memory for node in nodes]
    if not fits(sizes, chips * DRAM_BYTES):
        least = max(chips + 1, math.ceil(math.fsum(sizes) / DRAM_BYTES))
        while not fits(sizes, least * DRAM_BYTES):
            least += 1
        return (f"the nodes need {format_number(math.fsum(sizes))} bytes, more than the {chips * DRAM_BYTES:,} bytes "
                f"of DRAM of {counted(chips, 'chip')}: a pipeline of at least {least:,} chips is needed to hold the "
                "model")
    return (f"no pipeline of at most {counted(chips, 'chip')} of the designs within the budgets holds the model "
            "(each chip holds its stages' memory in its DRAM)")


def infeasible(workload: Workload, space: Candidates, chips: int, homogeneous: bool, objective: str, method: str,
               start: float, area_mm2: float, power_w: float) -> CodesignResult:
    """The result when no design of the grid is within the budgets."""
    return CodesignResult(
        "infeasible", objective=objective, value=0.0, time_per_input_ms=float("inf"), power_w=0.0, designs=(),
        plan=None, evaluated=0, pruned=space.grid_designs,
        pruned_by={"area": space.over_area, "power": space.over_power, "dominated": 0, "bound": 0},
        grid_designs=space.grid_designs, chips=chips, homogeneous=homogeneous, method=method,
        runtime_s=time.perf_counter() - start, shapeless_nodes=workload.shapeless_nodes,
        message=f"no design of the grid fits {format_number(area_mm2)} mm² and {format_number(power_w)} W "
                f"({space.over_area} over the area, {space.over_power} more over the power)"
                f"{_nearest_text(space, area_mm2)}")


def _nearest_text(space: Candidates, area_mm2: float) -> str:
    """The design that needs the least raise of a budget (:attr:`.space.Candidates.nearest`), as the end of the
    message of :func:`infeasible`."""
    d = space.nearest
    if d is None:
        return ""
    if d.area_mm2 <= area_mm2:
        return (f"; of the designs within {format_number(area_mm2)} mm², {d.label} draws the least: "
                f"{format_number(d.tdp_w)} W")
    return (f"; the smallest design, {d.label}, takes {format_number(d.area_mm2)} mm² and "
            f"{format_number(d.tdp_w)} W")
