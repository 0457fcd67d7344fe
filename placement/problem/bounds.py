"""Simple valid lower bounds on the optimal objectives, from the instance alone.

Solvers report the larger of their own proven bound and these; ``placement info``
prints the throughput one. Every bound here holds for every contiguity class.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Sequence

from placement.problem.instance import Instance
from placement.problem.memory_fit import as_written, decimal_text, fits, written_sum, written_sum_text

#: relative slack between a plan's verified value and the instance's lower bound that still proves it
#: optimal: both are sums of the instance's own numbers, so only their rounding differs
MEETS = 1e-12


def meets(simple: float, value: float) -> bool:
    """Whether the instance's lower bound ``simple`` (computed from the instance, not by a solver)
    proves a plan of verified value ``value`` optimal."""
    return math.isfinite(value) and value - simple <= MEETS * abs(value)


def _class_time(problem: Instance, members: list[int], part: list[int] | None = None) -> float:
    """Cheapest time of the nodes ``part`` (default: all) of a colour class on one device that
    exists, supports all of the class and has room for it; ``inf`` when there is none."""
    best = math.inf
    sizes = [problem.nodes[i].memory for i in members]
    for t, dtype in enumerate(problem.device_types):
        if dtype.count == 0 or not fits(sizes, dtype.memory):   # exactly, as the evaluator checks memory
            continue
        if any(problem.nodes[i].times[t] is None for i in members):
            continue
        times = [problem.nodes[i].times[t] for i in (members if part is None else part)]
        if any(p is None for p in times):
            continue
        best = min(best, sum(times))  # type: ignore[arg-type]
    return best


def class_without_device(problem: Instance) -> str | None:
    """Why the first colour class of several nodes that no one device can hold (all of its nodes supported,
    their memory summed within the type's) fits none, one reason per device type; ``None`` where every
    class fits some device. Such an instance has no plan in any contiguity class, for any objective."""
    for members in problem.colour_classes():
        if len(members) < 2 or math.isfinite(_class_time(problem, members)):
            continue
        ids = [problem.nodes[i].id for i in members]
        named = ", ".join(map(str, ids[:8])) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        sizes = [problem.nodes[i].memory for i in members]
        reasons = []
        for t, dtype in enumerate(problem.device_types):
            unsupported = [problem.nodes[i].id for i in members if problem.nodes[i].times[t] is None]
            if unsupported:
                reasons.append(f"node {unsupported[0]} is not supported on {dtype.name}")
            elif dtype.count == 0:
                reasons.append(f"no {dtype.name} devices")
            else:
                reasons.append(f"together they need {written_sum_text(sizes)} bytes, {dtype.name} memory is "
                               f"{dtype.memory:.17g}")
        return f"the colour class of nodes {named} fits no device ({'; '.join(reasons)})"
    return None


def memory_without_room(problem: Instance) -> str | None:
    """Why the nodes find no room, where their sizes alone show it: every node that no device type of
    unbounded memory can run (none with a device supports it) sits on a device of bounded memory, and
    ``Σ m(v) ≤ M`` on each device sums over all of them to ``Σ m(v) ≤ Σ_t count_t · M_t`` (over the types of
    bounded memory that have devices). Where these nodes need more, in any contiguity class and for any
    objective no plan exists; the sums are exact on the numbers as written. ``None`` otherwise."""
    bounded = [t for t, dtype in enumerate(problem.device_types) if dtype.count > 0 and math.isfinite(dtype.memory)]
    roomy = [t for t, dtype in enumerate(problem.device_types) if dtype.count > 0 and math.isinf(dtype.memory)]
    confined = [n.memory for n in problem.nodes if all(n.times[t] is None for t in roomy)]
    if not confined or not bounded:
        return None
    needed = written_sum(confined)
    held = sum((problem.device_types[t].count * as_written(problem.device_types[t].memory) for t in bounded),
               Fraction(0))
    if needed <= held:
        return None
    types = " and ".join(f"{problem.device_types[t].count} {problem.device_types[t].name} device"
                         f"{'s' if problem.device_types[t].count != 1 else ''} of "
                         f"{problem.device_types[t].memory:.17g} bytes" for t in bounded)
    return (f"{len(confined)} node{'s' if len(confined) != 1 else ''} that only devices of bounded memory can run "
            f"need {written_sum_text(confined)} bytes in all, more than the {decimal_text(held)} bytes that "
            f"{types} hold")


def _divisor(count: int) -> float:
    """A device count (an integer of any size) as the float a load is divided by: infinity where it is past the
    largest float, which no division by the count itself would reach; a share divided by it is then 0, no larger
    than the true share, and so still a lower bound."""
    return float(count) if count <= sys.float_info.max else math.inf


def throughput_lower_bound(problem: Instance) -> dict[str, float]:
    """A valid lower bound on the optimal throughput objective (max load over all devices).

    Two arguments, each valid under every contiguity class:

    * ``class``: a colour class sits on one device whose load is at least the class's
      compute time there (communication only adds), so the optimum is at least
      ``max over classes C of min over usable device types t of Σ_{v∈C} p_t(v)``, where a
      type is usable if it has a device, supports every node of C and has room for C's memory;
      ``inf`` if some class fits no type (the instance is then infeasible).
    * ``average``: every node runs somewhere and costs at least its cheapest time on a
      device type that exists, supports it and has room for it, so the total load is at least
      ``Σ_v min_t p_t(v)``; the maximum of ``N`` loads is at least their average, with ``N``
      the total number of devices.

    * ``weighted`` (where two device types exist): the average with each type's load weighed by
      its speed (:func:`weighted_average`); with CPUs ten times slower than the accelerators
      it is the work over ``k + l/10`` devices, where ``average`` divides it by ``k + l``.

    Returns ``{"class": ..., "average": ..., "weighted": ..., "bound": the largest}``. The bound
    also holds for ``throughput-gpipe`` (``max FW + max BW ≥ max (FW + BW)``), not for latency.
    """
    classes = problem.colour_classes()
    cheapest = [_node_time(problem, i) for i in range(len(problem.nodes))]
    # a class of one node: its cheapest time (as the sum over its one member, 0 + p)
    by_class = max((0 + cheapest[members[0]] if len(members) == 1 else _class_time(problem, members)
                    for members in classes), default=0.0)
    devices = sum(t.count for t in problem.device_types)
    total = sum(cheapest)
    average = total / _divisor(devices)
    weighted = weighted_average(problem)
    return {"class": by_class, "average": average, "weighted": weighted, "bound": max(by_class, average, weighted)}


def weighted_applies(problem: Instance) -> bool:
    """Whether :func:`weighted_average` bounds anything: exactly two device types have devices."""
    return sum(1 for dtype in problem.device_types if dtype.count > 0) == 2


def weighted_average(problem: Instance, backward: bool | None = None) -> float:
    """A lower bound on the max load from the fractional relaxation of the load rows, for instances
    with two device types ``A``, ``B`` (counts ``a``, ``b``; 0 otherwise).

    Every node ``v`` runs on a usable type (one that exists, supports it and has room for it), so
    for any ``λ ∈ [0, 1]`` the loads satisfy ``λ/a · Σ_{A devices} load + (1 − λ)/b · Σ_{B devices}
    load ≥ Σ_v min(λ p_A(v)/a, (1 − λ) p_B(v)/b)`` (a term over the usable types of ``v`` only),
    and the left side is at most the max load ``T`` (``λ/a · a T + (1 − λ)/b · b T``). This is
    weak duality for the linear relaxation ``min T`` subject to every node split over its usable
    types and each type's work within ``count × T``; the right side is concave and piecewise
    linear in ``λ``, largest at one of the breakpoints ``λ_v = β_v / (α_v + β_v)`` (``α_v =
    p_A(v)/a``, ``β_v = p_B(v)/b``) or an end, and the largest of those is the relaxation's
    optimum. Communication only adds to the loads. With ``backward`` (``False``, ``True``) the sum runs
    over the forward (backward) nodes alone: a bound on every device's forward (backward) load, as the
    ``throughput-gpipe`` objective needs. The chosen ``λ``'s value is summed again term by
    term, exactly rounded (as the ``average`` bound, it may exceed the real-number value by a few
    units in the last place, far less than the slack :data:`MEETS`).
    """
    import numpy as np

    if not weighted_applies(problem):
        return 0.0
    a, b = (t for t, dtype in enumerate(problem.device_types) if dtype.count > 0)
    count_a, count_b = _divisor(problem.device_types[a].count), _divisor(problem.device_types[b].count)
    room_a, room_b = problem.device_types[a].memory, problem.device_types[b].memory
    nan = math.nan     # a type the node cannot use
    nodes = [n for n in problem.nodes if backward is None or n.backward == backward]
    p_a = np.array([n.times[a] if n.times[a] is not None and n.memory <= room_a else nan for n in nodes],
                   dtype=float)
    p_b = np.array([n.times[b] if n.times[b] is not None and n.memory <= room_b else nan for n in nodes],
                   dtype=float)
    on_a, on_b = ~np.isnan(p_a), ~np.isnan(p_b)
    if not (on_a | on_b).all():
        return math.inf
    if not (np.isfinite(p_a[on_a]).all() and np.isfinite(p_b[on_b]).all()):
        return 0.0
    alpha_only = float(p_a[on_a & ~on_b].sum()) / count_a     # nodes usable on one type only
    beta_only = float(p_b[on_b & ~on_a].sum()) / count_b
    both = on_a & on_b
    alpha, beta = p_a[both] / count_a, p_b[both] / count_b
    keep = alpha + beta > 0
    alpha, beta = alpha[keep], beta[keep]
    lam_v = beta / (alpha + beta)
    order = np.argsort(lam_v, kind="stable")
    lam_v, alpha, beta = lam_v[order], alpha[order], beta[order]
    # at a candidate λ (0, 1, or a breakpoint): the nodes with λ_v ≥ λ pay λ α_v, the others (1 − λ) β_v
    candidates = np.concatenate(([0.0], lam_v, [1.0]))
    below = np.searchsorted(lam_v, candidates, side="left")        # nodes with λ_v < λ
    alpha_above = alpha_only + np.concatenate(([0.0], np.cumsum(alpha[::-1])))[::-1][below]
    beta_below = beta_only + np.concatenate(([0.0], np.cumsum(beta)))[below]
    values = candidates * alpha_above + (1 - candidates) * beta_below
    lam = float(candidates[int(np.argmax(values))])
    # the chosen λ's value summed again term by term, exactly rounded
    terms = np.minimum(lam * alpha, (1 - lam) * beta)
    exact = math.fsum(terms.tolist() + [lam * alpha_only, (1 - lam) * beta_only])
    return max(0.0, exact)


def gpipe_lower_bound(problem: Instance) -> float:
    """A valid lower bound on ``max_i FW_i + max_i BW_i`` (the ``throughput-gpipe`` objective).

    Each term is bounded as :func:`throughput_lower_bound` bounds the max load, but over
    the forward (backward) nodes only: a colour class's forward nodes share a device, so
    ``max_i FW_i ≥ max over classes C of min over usable types t of Σ_{v∈C forward} p_t(v)``;
    ``max_i FW_i ≥ Σ_{v forward} min_t p_t(v) / N``; and ``max_i FW_i`` is at least the speed-weighted
    average of the forward nodes (:func:`weighted_average`). Likewise for BW. Communication only adds
    to either side.
    """
    devices = sum(t.count for t in problem.device_types)
    total = 0.0
    for backward in (False, True):
        by_class = 0.0
        for members in problem.colour_classes():
            part = [i for i in members if problem.nodes[i].backward == backward]
            if part:
                by_class = max(by_class, _class_time(problem, members, part))
        work = sum(_node_time(problem, i) for i, n in enumerate(problem.nodes) if n.backward == backward)
        total += max(by_class, work / _divisor(devices), weighted_average(problem, backward))
    return total


def latency_lower_bound(problem: Instance) -> float:
    """A valid lower bound on the single-sample latency: the longest path when every node takes its
    cheapest time on any usable device type.

    Along any path ``v_1 → … → v_k`` the last node finishes no earlier than ``Σ p(v_i)``:
    a CPU node finishes its own time after its inputs are ready; an accelerator call is
    contiguous, so the path meets it in one unbroken segment, the call starts after the
    segment's predecessor on the path has finished, and it lasts at least the time of the
    segment's nodes (transfers only add), all of which finish at its end.
    """
    return longest_path(problem, [_node_time(problem, v) for v in range(len(problem.nodes))])


def longest_path(problem: Instance, times: Sequence[float]) -> float:
    """The largest finish time when each node (by position) starts once all its predecessors have finished
    (at 0 without any) and takes ``times[v]``: a node's finish is the largest of its predecessors' plus its
    own time, as the latency evaluator computes a CPU node's."""
    finish = [0.0] * len(problem.nodes)
    predecessors = problem.adjacency()[1]
    for v in problem.topological_positions():
        finish[v] = max((finish[u] for u in predecessors[v]), default=0.0) + times[v]
    return max(finish, default=0.0)


def lower_bound(problem: Instance, objective: str) -> float:
    """The simple lower bound of ``objective`` (``throughput``, ``throughput-gpipe`` or ``latency``)
    above, as ``placement info`` reports it: a bound on every plan of every method."""
    if objective == "latency":
        return latency_lower_bound(problem)
    if objective == "throughput-gpipe":
        return gpipe_lower_bound(problem)
    return throughput_lower_bound(problem)["bound"]


#: the joins the path bound may make for a heuristic's latency result: every published latency
#: instance needs fewer (at most about 144,000, half a second)
HEURISTIC_PATH_JOINS = 250_000
#: the ideals and subset tests the critical-chain bound may use for a heuristic's latency result (half a
#: second at most)
HEURISTIC_CHAIN_IDEALS = 2_000
HEURISTIC_CHAIN_WORK = 2_000_000


def heuristic_bound(problem: Instance, objective: str, calls: int = 1) -> float:
    """The bound reported beside the plan of a method that proves none: :func:`lower_bound`, and for
    ``latency`` (at most ``calls`` calls per accelerator) the largest of it, the path bound
    (:func:`placement.problem.path_bound.latency_path_bound`) within :data:`HEURISTIC_PATH_JOINS`
    joins and, with one call, the critical-chain bound (:mod:`placement.problem.chain_bound`) over at
    most :data:`HEURISTIC_CHAIN_IDEALS` ideals and :data:`HEURISTIC_CHAIN_WORK` subset tests, so that
    the gap says how far the plan can be from the optimum."""
    simple = lower_bound(problem, objective)
    if objective != "latency":
        return simple
    from placement.problem.chain_bound import chain_bound
    from placement.problem.path_bound import latency_path_bound

    path = latency_path_bound(problem, calls, HEURISTIC_PATH_JOINS)
    best = max(simple, path) if math.isfinite(path) else simple
    chain = (chain_bound(problem, max_ideals=HEURISTIC_CHAIN_IDEALS, max_work=HEURISTIC_CHAIN_WORK).value
             if calls == 1 else None)
    return best if chain is None else max(best, chain)


def _node_time(problem: Instance, i: int) -> float:
    """Cheapest time of node ``i`` on a type that exists, supports it and has room for it."""
    node = problem.nodes[i]
    return min((p for t, p in zip(problem.device_types, node.times)
                if p is not None and t.count > 0 and node.memory <= t.memory), default=math.inf)
