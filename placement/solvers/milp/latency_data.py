"""The data of the latency MILP (:mod:`placement.solvers.milp.latency`), prepared from an instance.

Model
-----
Every node ``i`` is its own class ``v = g(i)``. The accelerators are the devices of the
types that pay communication, type by type (``acc[a]``: the type of ``a``; ``rank[a]``: its
index among the accelerators of that type); at most one other type may have devices, the
CPU type with its ``cores`` (:class:`InvalidParameterError` otherwise). ``p_acc[v][a]`` is
the time of class ``v`` on ``a`` (``None``: unsupported), ``p_cpu[i]`` and ``cpu_type[i]``
the time of node ``i`` on the CPU type and that type (``None``: the node must go to an
accelerator); ``m`` and ``M`` are the class sizes and the accelerators' memory bounds, ``M_cpu``
the bound of each CPU core (``inf`` where it cannot bind); a class that no device with a binding
bound runs has size 0 (no row counts it, and its size would only coarsen the unit); cost
nodes ``u`` have ``r(u)``, ``W(u)`` and ``c(u)`` as in :mod:`.data`. The horizon ``U``
bounds every finish time of every plan: each node at its slowest, plus each transfer cost
``c(u)`` counted ``1 + min(|succ(u)|, A)`` times (``A`` accelerators, at least 1), rounded
up, plus one unit per node and one more.

Numbers: for CP-SAT, times are scaled to integers as in :mod:`.data` (rounded down where
no power of two or ten makes them exact, so the model never overstates a latency and its
bounds stay valid), and so is memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance
from placement.problem.memory_fit import decimal_sum, written_sum
from placement.solvers.milp.data import (CostNode, Scaling, choose_scale, counted_sizes, fits_alone, float_scaling,
                                         float_time, memory_binds, scale_memory)


@dataclass(frozen=True)
class LatencyData:
    classes: list[list[int]]
    group: list[int]                        # class of each node
    acc: list[int]                          # device-type position of each accelerator
    rank: list[int]                         # its index among accelerators of its type
    p_acc: list[list[float | None]]         # per class and accelerator, model units
    p_cpu: list[float | None]               # per node, model units
    cpu_type: list[int | None]              # fastest CPU type per node
    m: list[float]
    M: list[float]
    cost: list[CostNode]                    # model units
    scaling: Scaling
    horizon: float                          # U, model units
    memory_exact: bool
    cores: int                              # l: devices of the CPU type (0 without one)
    M_cpu: float = math.inf                 # memory bound of each core (inf: it never binds)
    alone: list[list[bool]] = field(default_factory=list)   # per class and accelerator: its colour fits, as written

    def fits(self, v: int, a: int) -> bool:
        """Whether class ``v`` may go on accelerator ``a`` by memory: its node's colour class (which goes whole to
        one accelerator) fits there alone, decided on the sizes as written (rows rounded to admit every plan that
        fits may admit a colour class over a bound by less than their rounding)."""
        return self.alone[v][a] if self.alone else self.m[v] <= self.M[a]


#: how many nodes the loops of :func:`prepare_latency` handle between two looks at the clock
NODES_PER_CHECK = 4096


def cpu_types(problem: Instance) -> list[int]:
    """The positions of the device types with devices that pay no communication: at most one, or
    :class:`InvalidParameterError` (the model gives each node one CPU time and the CPUs one memory bound)."""
    types = problem.device_types
    cpus = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    if len(cpus) > 1:
        raise InvalidParameterError("objective", "'latency' by MILP takes one device type that pays no "
                                                 "communication (the CPUs); this instance has "
                                    + ", ".join(types[t].name for t in cpus))
    return cpus


def prepare_latency(problem: Instance, integer: bool, max_product: float,
                    check_time: Callable[[], None] = lambda: None, calls: int = 1) -> LatencyData:
    """The model's data for ``calls`` calls per accelerator (an accelerator's memory row holds each size once
    per call, which the budget of integer memory counts); ``check_time`` is called every :data:`NODES_PER_CHECK`
    nodes of each loop (a backend's :meth:`~placement.solvers.milp.backends.Backend.check_time`, which stops the
    build past its deadline: on 100,000 nodes this takes seconds)."""
    nodes = problem.nodes
    types = problem.device_types
    classes = [[i] for i in range(len(nodes))]
    group = list(range(len(nodes)))
    acc, rank = [], []
    for t, dt in enumerate(types):
        if dt.pays_comm:
            for r in range(dt.count):
                acc.append(t)
                rank.append(r)
    cpus = cpu_types(problem)
    p_acc_raw = []
    for v, members in enumerate(classes):
        if v % NODES_PER_CHECK == 0:
            check_time()
        row = []
        for t in acc:
            times = [nodes[i].times[t] for i in members]
            row.append(None if any(q is None for q in times) else float(sum(times)))  # type: ignore[arg-type]
        p_acc_raw.append(row)
    p_cpu_raw: list[float | None] = []
    cpu_type: list[int | None] = []
    for i, node in enumerate(nodes):
        if i % NODES_PER_CHECK == 0:
            check_time()
        options = [(node.times[t], t) for t in cpus if node.times[t] is not None]
        best = min(options, default=None)
        p_cpu_raw.append(None if best is None else float(best[0]))  # type: ignore[arg-type]
        cpu_type.append(None if best is None else best[1])
    succ = problem.successors()
    cost_raw = []
    for u, node in enumerate(nodes):
        if u % NODES_PER_CHECK == 0:
            check_time()
        W = tuple(sorted({group[w] for w in succ[u]} - {group[u]}))
        if node.out_cost > 0 and W:
            cost_raw.append((u, group[u], W, float(node.out_cost)))
    check_time()
    calls_possible = max(1, len(acc))
    slowest = sum(max([q for q in [p_cpu_raw[i]] + [nodes[i].times[t] for t in acc] if q is not None],
                      default=0.0) for i in range(len(nodes)))
    transfers = sum(c * (1 + min(len(succ[u]), calls_possible)) for u, _, _, c in cost_raw)
    horizon_raw = slowest + transfers
    values = ([q for row in p_acc_raw for q in row if q is not None] + [q for q in p_cpu_raw if q is not None]
              + [c for *_, c in cost_raw])
    # rows (8)-(10) put the horizon U as a coefficient beside variables bounded by U, so U² ≤ max_product;
    # the half leaves room for the len(nodes) + 1 units U adds to the scaled horizon
    scaling = (choose_scale(values, horizon_raw, math.sqrt(max_product) / 2) if integer
               else float_scaling(values, horizon_raw))

    def t_model(a: float) -> float:  # rounded down where inexact: model latencies never exceed true ones
        if not integer:
            return float_time(a, scaling)
        return float(round(a * scaling.scale) if scaling.exact else math.floor(a * scaling.scale))

    check_time()
    bounded = list(acc) + list(cpus)
    binds = memory_binds(problem, bounded)
    runs = [[all(nodes[i].times[t] is not None for i in members) for t in bounded] for members in classes]
    memory = scale_memory(counted_sizes([decimal_sum(nodes[i].memory for i in members) for members in classes],
                                        runs, binds),
                          [types[t].memory for t in bounded], integer, binds,
                          lambda: counted_sizes([written_sum(nodes[i].memory for i in members) for members in classes],
                                                runs, binds), copies=calls)
    alone: list[list[bool]] = [[] for _ in nodes]   # per node: its colour class fits each accelerator alone
    colours = problem.colour_classes() if memory.admitting else []
    for members, fitting in zip(colours, fits_alone(problem, colours, acc, binds)):
        for i in members:
            alone[i] = fitting
    return LatencyData(classes, group, acc, rank,
                       [[None if q is None else t_model(q) for q in row] for row in p_acc_raw],
                       [None if q is None else t_model(q) for q in p_cpu_raw], cpu_type, list(memory.sizes),
                       list(memory.bounds[:len(acc)]),
                       [CostNode(u, r, W, t_model(c), False) for u, r, W, c in cost_raw],
                       scaling, math.ceil(t_model(horizon_raw)) + len(nodes) + 1.0, memory.exact,
                       sum(types[t].count for t in cpus), memory.bounds[len(acc)] if cpus else math.inf,
                       [alone[members[0]] for members in classes] if memory.admitting else [])
