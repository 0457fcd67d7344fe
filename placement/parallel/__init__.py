"""Plans whose stages run data- and tensor-parallel (Piper's model), solved exactly.

:func:`solve_piper` (what :func:`placement.solve` calls for a Piper instance), the plan data
(:class:`ParallelPlan`, :class:`ParallelStage`), the schedules' memory models
(:mod:`.schedules`) and the DP (:mod:`.dp`). See ``docs/piper.md``.

The names are loaded on first use, so that importing the plan data (as the independent evaluator
does) loads no solver code.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {"SCHEDULES": "plan", "ParallelPlan": "plan", "ParallelStage": "plan", "ParallelResult": "result",
          "solve_piper": "solve"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"placement.parallel.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'placement.parallel' has no attribute {name!r}")


__all__ = ["SCHEDULES", "ParallelPlan", "ParallelResult", "ParallelStage", "solve_piper"]
