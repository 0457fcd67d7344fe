"""Run a registered method as it is: its own Solution, before ``placement.solve`` verifies it.

The baselines' tests check what each heuristic itself returns (its status words, its claimed
objective, its plan before verification), so they call the method's function directly.
"""

from __future__ import annotations

from typing import Any

from placement.problem.instance import Instance
from placement.solution import Solution
from placement.solvers.registry import METHODS


def run_method(problem: Instance, name: str, **options: Any) -> Solution:
    """``METHODS[name]``'s function on ``problem`` with ``options`` (a baseline ignores those it does not use)."""
    return METHODS[name].function()(problem, **options)
