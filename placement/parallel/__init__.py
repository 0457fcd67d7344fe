"""Plans whose stages run data- and tensor-parallel (Piper's model), solved exactly.

:func:`solve_piper` (what :func:`placement.solve` calls for a Piper instance), the plan data
(:class:`ParallelPlan`, :class:`ParallelStage`), the schedules' memory models
(:mod:`.schedules`) and the DP (:mod:`.dp`). See ``docs/piper.md``.
"""

from placement.parallel.plan import SCHEDULES, ParallelPlan, ParallelStage
from placement.parallel.result import ParallelResult
from placement.parallel.solve import solve_piper

__all__ = ["SCHEDULES", "ParallelPlan", "ParallelResult", "ParallelStage", "solve_piper"]
