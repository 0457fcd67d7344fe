"""What a co-design returns: the designs per pipeline stage, the placement, the objective, and
how much of the grid was evaluated and pruned; and which of two plans an objective prefers.

Preference
----------
Every method scores a plan by what it minimises: the max load ``T`` (ms per batch) for
``throughput``, ``T · P`` for ``perf-per-watt`` (``P``: the summed TDP of the chips the plan uses).
A plan is preferred to another when its score is smaller; where the two scores are *equal* —
within a relative :data:`TIE` of the least score the method found — the plan whose chips draw
fewer watts (smaller ``P``) is preferred, then the one with less silicon (smaller summed area of
the chips used). Plans equal in all three are told apart by whichever the method meets first.
The rule is the same for both objectives (for ``perf-per-watt``, of two plans of equal throughput
per watt the smaller system is kept) and for every method: the exact one, the exhaustive check
and the baselines (:func:`preferred`).

Why these comparisons. Watts are compared exactly: a TDP is a multiple of 2^-10 W
(:data:`.template.POWER_QUANTUM_W`), so sums over a pipeline's chips are exact in floating point.
Scores are not: the same plan's max load, computed by the placement DP's kernels, by the front DP
(compute of a block as a difference of two ideals' sums) and by the evaluator, differs in the
last bits — by about ``n · 2^-53`` of the model's total compute for ``n`` nodes, which is at most
``chips`` times the max load, so below 10^-12 of it for the graphs here; an exact comparison
would let that rounding, not the watts, choose between two plans of the same throughput.
:data:`TIE` (10^-9) is a thousand times that error, the tolerance within which the evaluator
confirms a method's max load (:data:`.outcome.TOLERANCE`), and far below any difference the cost
model can claim (10^-9 of 873 batches per second is 9·10^-7 of one). The tie is taken relative to
the least score, not between pairs of plans (where it would not be transitive), so the choice
does not depend on the order in which plans are met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, TypeVar

from placement.codesign.template import Design
from placement.plan import Plan

#: Objectives: ``throughput`` (batches per second) or ``perf-per-watt`` (batches per second per
#: watt of the summed TDP of the chips the pipeline uses).
OBJECTIVES = ("throughput", "perf-per-watt")

#: Relative difference within which two scores are equal (module docstring).
TIE = 1e-9

Item = TypeVar("Item")


def tie_bound(least: float) -> float:
    """The largest score equal to the least score ``least`` (module docstring): ``least · (1 + TIE)``."""
    return least + TIE * abs(least) if math.isfinite(least) else least


def preferred(candidates: Iterable[tuple[float, float, float, Item]], least: float | None = None) -> Item | None:
    """The item of the candidate plan the objective prefers (module docstring), from ``(score, watts, area,
    item)`` (smaller is better in each): of those whose score is within :func:`tie_bound` of ``least`` (by
    default the least score of the candidates), the fewest watts, then the least area, then the smallest
    score, then the first. ``None`` when there is no candidate with a finite score."""
    finite = [c for c in candidates if math.isfinite(c[0])]
    if not finite:
        return None
    bound = tie_bound(min(c[0] for c in finite) if least is None else least)
    tied = [c for c in finite if c[0] <= bound]
    if not tied:
        return None
    return min(tied, key=lambda c: (c[1], c[2], c[0]))[3]


@dataclass(frozen=True)
class CodesignResult:
    """A co-design's answer.

    ``status``: ``optimal`` (proven over the grid), ``infeasible`` (no design within the budgets
    can run the model: ``message`` says why), ``no_solution`` (the method's plan failed the
    independent evaluator: no plan is returned, ``stats["rejected_plan"]`` names it), or, for a
    baseline, ``feasible``. ``value``: the
    objective (``objective``; 0 when infeasible). ``time_per_input_ms``: the pipeline's max load,
    the time per batch in steady state. ``power_w``: the summed TDP of the chips used.
    ``designs``: the design of every non-empty stage, in pipeline order; ``plan``: the stages'
    nodes (device types named by design labels). ``evaluated``: designs whose cost on the model
    entered a DP; ``pruned``: the grid's other designs, by reason in ``pruned_by`` (``area``,
    ``power``: over a budget; ``dominated``: another design is at least as fast on every node
    (and, for perf-per-watt, draws no more power); ``bound``: a lower bound showed it cannot beat
    the best found). ``dp_runs``: DP runs made. ``method``: ``exact``, ``exhaustive`` or a
    baseline's name.
    """

    status: str
    objective: str
    value: float
    time_per_input_ms: float
    power_w: float
    designs: tuple[Design, ...]
    plan: Plan | None
    evaluated: int
    pruned: int
    pruned_by: dict[str, int]
    grid_designs: int
    chips: int
    homogeneous: bool
    method: str
    runtime_s: float
    dp_runs: int = 0
    shapeless_nodes: int = 0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`to_json`, under its earlier name."""
        return self.to_json()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the CLI's ``--json``), as every result's ``to_json``; without a plan, ``value``,
        ``time_per_input_ms`` and ``power_w`` are null (there is nothing they measure), and so is an infinite
        ``value`` in the strict JSON the CLI writes (a model of no work, whose throughput nothing bounds: the text
        says ``inf``)."""
        planned = self.plan is not None
        return {
            "status": self.status, "objective": self.objective, "value": self.value if planned else None,
            "time_per_input_ms": self.time_per_input_ms if planned else None,
            "power_w": self.power_w if planned else None,
            "designs": [d.as_dict() for d in self.designs],
            "plan": None if self.plan is None else
            [{"design": dev.type, "nodes": list(dev.nodes)} for dev in self.plan.devices if dev.nodes],
            "evaluated": self.evaluated, "pruned": self.pruned, "pruned_by": dict(self.pruned_by),
            "grid_designs": self.grid_designs, "chips": self.chips, "homogeneous": self.homogeneous,
            "method": self.method, "runtime_s": self.runtime_s, "dp_runs": self.dp_runs,
            "shapeless_nodes": self.shapeless_nodes, "message": self.message, "stats": dict(self.stats),
        }
