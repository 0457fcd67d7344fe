"""What a co-design returns: the designs per pipeline stage, the placement, the objective, and
how much of the grid was evaluated and pruned."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from placement.codesign.template import Design
from placement.plan import Plan

#: Objectives: ``throughput`` (batches per second) or ``perf-per-watt`` (batches per second per
#: watt of the summed TDP of the chips the pipeline uses).
OBJECTIVES = ("throughput", "perf-per-watt")


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
        """A JSON-ready dict (the CLI's ``--json``); without a plan, ``value``, ``time_per_input_ms`` and
        ``power_w`` are null (there is nothing they measure)."""
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
