"""The one result type every method returns.

Status words follow MathOpt: ``optimal`` only with a proof (the DP, or a solver
that proved optimality), ``feasible`` with a bound and gap when a limit stopped
the search, ``infeasible`` only when proven, ``no_solution`` when a limit hit
before any plan was found, ``error`` when the method failed.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

from placement.plan import Plan


class Status(str, enum.Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclass
class Solution:
    """What a method returns: status, plan (if any), objective, proven bound, gap, statistics."""

    status: Status
    plan: Plan | None
    objective: float = math.inf
    bound: float = 0.0
    method: str = ""
    objective_kind: str = "throughput"
    contiguity: str = "stages"
    runtime_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def gap(self) -> float:
        """Relative gap (objective - bound) / objective; 0 when proven optimal, inf without a plan."""
        if self.plan is None or not math.isfinite(self.objective):
            return math.inf
        if self.objective <= 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / self.objective)
