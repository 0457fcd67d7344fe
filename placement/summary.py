"""Facts about an instance before solving it, the ideal count of the DP included (``placement info``)."""

from __future__ import annotations

from typing import Any

from placement.problem.instance import Instance


def describe(instance: Instance | Any, *, max_ideals: int | None = None) -> dict[str, Any]:
    """:func:`placement.report.info.instance_info` of ``instance`` (sizes, devices, work, a lower bound)
    (``instance`` may also be a path or document) plus ``supernodes`` (colour classes and zero-cost merges contracted) and ``ideals``: their count, or
    ``"more than N"`` past ``max_ideals`` (default 200,000), where counting stops."""
    from placement.loading import as_instance
    from placement.parameters import integer
    from placement.report.info import instance_info
    from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, count_ideals

    limit = integer("max_ideals", max_ideals, smallest=1, optional=True) or DEFAULT_MAX_IDEALS
    instance = as_instance(instance)
    info = instance_info(instance)
    contraction = contract(instance)
    count = count_ideals(contraction.succ, limit)
    info["supernodes"] = contraction.size
    info["ideals"] = count if count <= limit else f"more than {limit:,}"
    return info
