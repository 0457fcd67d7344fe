"""Longest-processing-time fills of wide graphs, then the local search's moves (throughput, any catalogue).

Model
-----
The classes, devices, loads and moves of :mod:`.local_search` (DESIGN.md §2: a device's load is the time
of the classes it holds, plus, on a type that pays communication, the cost of each of its boundary nodes),
on any catalogue of device types. The fills of topological orders that the local search climbs from cut a
wide graph (thousands of nodes side by side) into runs of one order, and its moves, one class at a time,
seldom undo the choice of which classes run on the slower types. Here the *items* placed are either the
colour classes or the *parts* of the graph: the classes joined by an edge or a colour class, transitively
(a part's nodes have no edge to another part's, so a device holding whole parts pays no communication).

1. Types. Every item starts on the type that runs it fastest, among the types that support it and have
   room for it alone. Where the items on a type outgrow its room (its devices' memory bounds summed),
   items leave it for types with room for them, those of least time there per byte first. Then, while a
   move helps, one item leaves the type ``t`` of the largest average load per device (its items' times
   over its count) for another type ``t'``: among the items on ``t`` that ``t'`` takes, the one of least
   time ratio ``p_t'(i) / p_t(i)`` (the one ``t'`` runs the most efficiently), and only where ``t'``'s
   average stays below ``t``'s old one and its room holds the item. Without memory bounds, on two types
   this is the linear relaxation's rule (the items on the slower type are those of least ratio), up to
   the last item.
2. Devices. The items, in decreasing order of their time on their type, each join the device of their
   type on which the load after it joins is least (communication counted exactly: nodes not placed yet
   count as on no device), among those with room for it (where none has, among every device with room);
   the first such device on ties. An item that no device has room for goes to the least loaded device of
   its type (the plan is then over a memory bound, which the local search's moves repair where they can).

On independent nodes the load is pure compute and the devices of one type are identical: step 2 is then
Graham's LPT rule within each type.

:func:`lpt_plan` makes up to four fills, of classes and of parts (where there are several, not all of one
class), with step 1 and without it (every device open to every item, items by decreasing least time), and
climbs the best by max-load (within the memory bounds first) by the local search's moves
(:func:`.local_search.climb`) until none improves or a deadline passes. :func:`parts_plan` is the better
fill of parts, not climbed: no edge joins two of its devices, so it is a pipeline in any order of its
devices (class ``stages``, and so ``sets``), where the parts fit.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from itertools import chain
from typing import Iterator

from placement.problem.instance import Instance, class_index
from placement.problem.memory_fit import fits, fits_summed
from placement.problem.union_find import UnionFind
from placement.plan import Plan
from placement.solvers.baselines.local_search import UNPLACED, _Climber, climb


def parts(problem: Instance) -> list[list[int]]:
    """The colour classes (numbered as :meth:`Instance.colour_classes` lists them) of each part of the graph
    (module docstring), parts in order of their least class."""
    classes = problem.colour_classes()
    class_of = class_index(classes, len(problem.nodes))
    joined = UnionFind(len(classes))
    for u, targets in enumerate(problem.successors()):
        for w in targets:
            joined.union(class_of[u], class_of[w])
    found: dict[int, list[int]] = {}
    for c in range(len(classes)):
        found.setdefault(joined.find(c), []).append(c)
    return list(found.values())


class _Items:
    """Items (lists of classes) with their time on each type (``None``: a type that does not support one of
    their classes), their memory and the nodes whose boundaries they change (:meth:`_Climber.comm_change`)."""

    def __init__(self, climber: _Climber, items: list[list[int]]) -> None:
        self.climber = climber
        self.items = items
        n_types = len(climber.problem.device_types)
        self.time: list[list[float | None]] = []
        for classes in items:
            row: list[float | None] = []
            for t in range(n_types):
                times = [climber.ctime[c][t] for c in classes]
                row.append(None if None in times else math.fsum(times))   # type: ignore[arg-type]
            self.time.append(row)
        self.memory = [math.fsum(climber.cmem[c] for c in classes) for classes in items]
        self.affected: list[list[tuple[int, int, bool]]] = []
        for classes in items:
            if len(classes) == 1:
                self.affected.append(climber.affected_cost[classes[0]])
                continue
            merged: dict[int, tuple[int, bool]] = {}
            for c in classes:
                for u, kx, inside in climber.affected_cost[c]:
                    k, was = merged.get(u, (0, False))
                    merged[u] = (k + kx, was or inside)
            self.affected.append([(u, k, inside) for u, (k, inside) in merged.items()])

    def sizes(self, i: int) -> Iterator[float]:
        nodes = self.climber.problem.nodes
        return (nodes[v].memory for c in self.items[i] for v in self.climber.classes[c])

    def fits_alone(self, i: int, t: int) -> bool:
        """Whether type ``t`` has devices, supports item ``i`` and has room for it alone."""
        kind = self.climber.problem.device_types[t]
        return kind.count > 0 and self.time[i][t] is not None and fits(self.sizes(i), kind.memory)


def item_types(items: _Items) -> list[int] | None:
    """Step 1 of the module docstring: a type for every item, or ``None`` where an item fits no type alone."""
    types = items.climber.problem.device_types
    n_types = len(types)
    count = [t.count for t in types]
    time_of = items.time
    takes = [[t for t in range(n_types) if items.fits_alone(i, t)] for i in range(len(items.items))]
    if not all(takes):
        return None
    kind = [min(ts, key=lambda t, i=i: (time_of[i][t], t)) for i, ts in enumerate(takes)]
    average = [0.0] * n_types
    held = [0.0] * n_types   # the memory of the items on each type, against room: its devices' bounds summed
    room = [t.count * t.memory for t in types]
    for i, t in enumerate(kind):
        average[t] += time_of[i][t] / count[t]
        held[t] += items.memory[i]

    def move(i: int, other: int) -> None:
        here = kind[i]
        average[here] -= time_of[i][here] / count[here]
        average[other] += time_of[i][other] / count[other]
        held[here] -= items.memory[i]
        held[other] += items.memory[i]
        kind[i] = other

    # memory first: off a type whose items outgrow its room, the items of least time per memory on a type
    # with room for them
    for t in range(n_types):
        if held[t] <= room[t]:
            continue
        leaving = sorted((time_of[i][other] / items.memory[i], i, other) for i in range(len(kind)) if kind[i] == t
                         and items.memory[i] > 0 for other in takes[i] if other != t)
        for _, i, other in leaving:
            if held[t] <= room[t]:
                break
            if kind[i] == t and held[other] + items.memory[i] <= room[other]:
                move(i, other)
    # per (t, t'): the items on t that t' takes, by the ratio p_t'(i) / p_t(i), least first
    queue: dict[tuple[int, int], list[tuple[float, int]]] = {}

    def offer(i: int) -> None:
        here = kind[i]
        if time_of[i][here]:
            for other in takes[i]:
                if other != here:
                    heapq.heappush(queue.setdefault((here, other), []), (time_of[i][other] / time_of[i][here], i))

    for i in range(len(kind)):
        offer(i)
    for _ in range(len(kind) * n_types):   # each move lowers the averages sorted in decreasing order
        t = max(range(n_types), key=lambda k: (average[k], -k))
        best: tuple[float, int, int] | None = None
        for other in range(n_types):
            entries = queue.get((t, other))
            while entries and kind[entries[0][1]] != t:   # moved away since
                heapq.heappop(entries)
            if entries:
                ratio, i = entries[0]
                if average[other] + time_of[i][other] / count[other] < average[t] and (
                        best is None or ratio < best[0]) and held[other] + items.memory[i] <= room[other]:
                    best = (ratio, i, other)
        if best is None:
            break
        _, i, other = best
        heapq.heappop(queue[(t, other)])
        move(i, other)
        offer(i)
    return kind


def _put(climber: _Climber, c: int, b: int) -> None:
    """Class ``c`` (on no slot yet) onto slot ``b``, its loads kept exact (from scratch where ``b`` has no room)."""
    db = climber.join_change(c, b)
    climber.join(c, b, 0.0 if db is None else db)
    if db is None:
        climber.start(climber.where)


def _after(items: _Items, i: int, b: int) -> float | None:
    """Slot ``b``'s load once item ``i`` joins it (communication counted exactly), where ``b``'s type supports
    the item and has room for it; else ``None``."""
    climber = items.climber
    p = items.time[i][climber.slot_type[b]]
    if p is None:
        return None
    classes = items.items[i]
    if len(classes) == 1:
        db = climber.join_change(classes[0], b)
        return None if db is None else climber.load(b) + p + db
    if not fits_summed(climber.mem[b] + items.memory[i], chain(climber._sizes(b), items.sizes(i)),
                       climber.bound[b]):
        return None
    return climber.load(b) + p + climber.comm_change(items.affected[i], b)


def fill(items: _Items, order: list[int], allowed: list[list[int]], deadline: float = math.inf) -> list[int] | None:
    """Step 2 of the module docstring: the items in ``order`` each join the device of ``allowed[i]`` (slot
    numbers) whose load after it joins is least among those with room for it, else among every device with
    room, else the least loaded of ``allowed[i]``. Returns each class's slot; ``None`` where ``deadline`` (a
    ``time.perf_counter()`` value) passed first (it costs an item times the devices)."""
    climber = items.climber
    climber.start([UNPLACED] * len(climber.classes))
    everywhere = range(len(climber.slots))
    for i in order:
        if time.perf_counter() > deadline:
            return None
        chosen: tuple[float, int] | None = None
        for slots in (allowed[i], everywhere):
            for b in slots:
                after = _after(items, i, b)
                if after is not None and (chosen is None or after < chosen[0]):
                    chosen = (after, b)
            if chosen is not None:
                break
        b = chosen[1] if chosen is not None else min(allowed[i], key=climber.load)
        for c in items.items[i]:
            _put(climber, c, b)
    return list(climber.where)


def fills(items: _Items, deadline: float = math.inf) -> list[list[int]]:
    """The fills of ``items`` with step 1 and without it (module docstring), in that order, each class's slot
    in each; none begun past ``deadline``, and one that it stops left out."""
    climber = items.climber
    n = len(items.items)
    support = [[b for b, t in enumerate(climber.slot_type) if items.time[i][t] is not None] for i in range(n)]
    if not all(support):
        return []
    found = []
    kind = item_types(items) if time.perf_counter() <= deadline else None
    if kind is not None and time.perf_counter() <= deadline:   # a fill's setup costs the classes times the devices
        of_type: dict[int, list[int]] = {}
        for b, t in enumerate(climber.slot_type):
            of_type.setdefault(t, []).append(b)
        found.append(fill(items, sorted(range(n), key=lambda i: (-items.time[i][kind[i]], i)),
                          [of_type[kind[i]] for i in range(n)], deadline))
    if time.perf_counter() <= deadline:
        least = [min(p for p in items.time[i] if p is not None) for i in range(n)]
        found.append(fill(items, sorted(range(n), key=lambda i: (-least[i], i)), support, deadline))
    return [where for where in found if where is not None]


def _best(climber: _Climber, candidates: list[list[int]]) -> list[int] | None:
    """The assignment of least ``(over a memory bound, max-load)`` among ``candidates``; the climber is left
    at it."""
    scored = []
    for where in candidates:
        climber.start(where)
        scored.append(((any(climber.over), max(map(climber.load, range(len(climber.slots))))), where))
    if not scored:
        return None
    where = min(scored, key=lambda item: item[0])[1]
    climber.start(where)
    return where


def lpt_plan(problem: Instance, deadline: float = math.inf, seed: int = 0) -> Plan | None:
    """The climbed plan of the module docstring, made by ``deadline`` (a ``time.perf_counter()`` value: no fill
    is begun after it, one under way stops, and so does the climb; its moves in the order of ``seed``);
    ``None`` where no fill is made (a class no type supports, or the deadline passed first)."""
    if time.perf_counter() > deadline:   # reading the graph into the moves' state alone costs its size
        return None
    climber = _Climber(problem)
    candidates = fills(_Items(climber, [[c] for c in range(len(climber.classes))]), deadline)
    joined = parts(problem)
    if 1 < len(joined) < len(climber.classes):   # parts of one class are the classes' fills again
        candidates += fills(_Items(climber, joined), deadline)
    if _best(climber, candidates) is None:
        return None
    climb(climber, random.Random(seed), deadline)
    return climber.plan()


def parts_plan(problem: Instance, deadline: float = math.inf) -> Plan | None:
    """The better fill of parts (module docstring), where the graph has more than one and every part fits a
    device alone; else ``None``, and where ``deadline`` (a ``time.perf_counter()`` value) stopped both fills."""
    joined = parts(problem)
    if len(joined) < 2 or time.perf_counter() > deadline:
        return None
    climber = _Climber(problem)
    items = _Items(climber, joined)
    if not all(any(items.fits_alone(i, t) for t in range(len(problem.device_types))) for i in range(len(joined))):
        return None
    where = _best(climber, fills(items, deadline))
    return None if where is None else climber.plan()
