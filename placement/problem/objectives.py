"""The objectives (DESIGN.md §2) and which graphs each applies to.

* ``throughput`` — max load over the devices; any graph.
* ``throughput-gpipe`` — max forward load + max backward load; training graphs only.
* ``latency`` — finish time of one sample; inference graphs only.
"""

from __future__ import annotations

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance

OBJECTIVES = ("throughput", "throughput-gpipe", "latency")


def check_objective(problem: Instance, objective: str) -> None:
    """Raise :class:`InvalidParameterError` (one line) unless ``objective`` exists and applies to ``problem``."""
    if objective not in OBJECTIVES:
        raise InvalidParameterError("objective", f"must be one of {', '.join(map(repr, OBJECTIVES))}, "
                                                 f"not {objective!r}")
    if objective == "latency" and problem.is_training:
        raise InvalidParameterError("objective", "'latency' is for inference graphs; this instance has backward "
                                                 "nodes")
    if objective == "throughput-gpipe" and not problem.is_training:
        raise InvalidParameterError("objective", "'throughput-gpipe' is for training graphs; this instance has no "
                                                 "backward nodes")
