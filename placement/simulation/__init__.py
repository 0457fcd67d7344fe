"""Event-driven simulation of a plan under a pipeline schedule (DESIGN.md §5).

:func:`simulate` runs a valid ``stages`` plan micro-batch by micro-batch and
returns a :class:`SimulationResult`: time per sample or iteration time,
utilisation and bubbles, micro-batches in flight and peak memory per stage, and
every task's start and end (for :mod:`placement.report.trace` and
:mod:`placement.report.gantt`). Verification code: nothing here imports
:mod:`placement.solvers`.
"""

from placement.simulation.pipeline import Pipeline, Stage, build_pipeline
from placement.simulation.program import COMM_MODES, INLINE, LINK
from placement.simulation.schedules import SCHEDULES, Schedule
from placement.simulation.simulator import (ENGINES, SimulationResult, StageResult, TaskRecord, TaskTable, simulate,
                                          simulate_pipeline)

__all__ = ["COMM_MODES", "ENGINES", "INLINE", "LINK", "SCHEDULES", "Pipeline", "Schedule", "SimulationResult",
           "Stage", "StageResult", "TaskRecord", "TaskTable", "build_pipeline", "simulate", "simulate_pipeline"]
