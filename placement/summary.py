"""Facts about an instance before solving it, the ideal count of the DP included (``placement info``)."""

from __future__ import annotations

from typing import Any

from placement.problem.instance import Instance


def describe(instance: Instance | Any, *, max_ideals: int | None = None) -> dict[str, Any]:
    """:func:`placement.report.info.instance_info` of ``instance`` (sizes, devices, work, a lower bound)
    (``instance`` may also be a path or document) plus ``supernodes`` (colour classes and zero-cost merges
    contracted) and ``ideals``: their count; or, where counting stops, ``None`` with ``ideals_more_than``
    the number it stopped past, ``max_ideals`` (default 200,000) or the most ideals whose tables the DP
    could hold in the memory available, whichever is fewer, and ``ideals_stopped_by`` saying which
    (``"max_ideals"`` or ``"memory"``: the count runs in one compiled call that Ctrl-C cannot stop,
    35 million ideals a second, so a limit of 10^12 ran for hours)."""
    from placement.loading import as_instance
    from placement.parameters import integer
    from placement.report.info import instance_info
    from placement.solvers.ideals import DEFAULT_MAX_IDEALS, contract, count_ideals, is_total_order

    limit = integer("max_ideals", max_ideals, smallest=1, optional=True) or DEFAULT_MAX_IDEALS
    instance = as_instance(instance)
    info = instance_info(instance)
    contraction = contract(instance)
    ordered = is_total_order(contraction.succ)
    if ordered:   # n + 1 ideals, which the DP enumerates whatever the limit
        limit = max(limit, contraction.size + 1)
    most = _most_the_dp_holds(instance, contraction)   # the count goes no further: it cannot be stopped
    count = contraction.size + 1 if ordered else count_ideals(contraction.succ, min(limit, most))
    info["supernodes"] = contraction.size
    if count <= min(limit, most):
        info["ideals"] = count
    else:
        info["ideals"] = None
        info["ideals_more_than"] = min(limit, most)
        info["ideals_stopped_by"] = "max_ideals" if limit <= most else "memory"
    return info


def _most_the_dp_holds(instance: Instance, contraction: Any) -> int:
    """The most ideals whose tables the DP could keep in the memory available, at one combination of
    device counts and without bitset rows (:func:`placement.solvers.dp_table.most_ideals` at its least)."""
    from placement.solvers.dp_table import bytes_per_ideal, memory_budget, value_columns

    n_types = len(instance.device_types)
    per_ideal = bytes_per_ideal(value_columns(n_types), contraction.size, n_types, 1, False)
    return max(1, int(min(memory_budget() / per_ideal, 2.0 ** 62)))
