"""placement: provably optimal placement of DNN graphs onto pipelines of heterogeneous devices.

The public API (see ``docs/api.md``)::

    import placement
    instance = placement.load("bert24_inference.json")
    result = placement.solve(instance)              # the DP here: optimal, verified
    result.status, result.value, result.plan        # 'optimal', 17.78990625, (Stage(...), ...)
    placement.verify(instance, result).valid        # the independent evaluator's verdict
    placement.split(model_file, result)             # an imported model's plan as runtime split points

Importing the package is cheap: each name below is imported on first use.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False   # typing is not imported: the command line handles Ctrl-C before it imports more
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load": "placement.loading",
    "solve": "placement.solving",
    "verify": "placement.api",
    "simulate": "placement.api",
    "hypar": "placement.api",
    "split": "placement.handoff",
    "codesign": "placement.codesign",
    "Result": "placement.result",
    "Stage": "placement.result",
    "Status": "placement.result",
    "Verification": "placement.result",
    "Instance": "placement.problem.instance",
    "Node": "placement.problem.instance",
    "Edge": "placement.problem.instance",
    "DeviceType": "placement.problem.instance",
    "Plan": "placement.plan",
    "DeviceAssignment": "placement.plan",
    "PlacementError": "placement.errors",
    "InvalidInstanceError": "placement.errors",
    "InvalidPlanError": "placement.errors",
    "InvalidParameterError": "placement.errors",
    "SolverUnavailableError": "placement.errors",
    "LimitExceededError": "placement.errors",
    "Interrupted": "placement.errors",
    "LogWriteWarning": "placement.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'placement' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({name for name in globals() if name.startswith("__")} | set(_EXPORTS))
