"""The packing bound for the assignment models (:mod:`.none`, :mod:`.sets`): the exact optimum of the
heaviest groups alone, with the communication their split forces.

Model
-----
Slots with fixed types ``k(s)`` (:func:`.none.slot_kinds`), groups ``v`` with times ``p_k(v)``
(forward plus backward), memory ``m(v)`` and the types ``F(v)`` they fit (:mod:`.data`), and
``Θ`` the sum of the objective variables (``T``, or ``TF + TB``, which is at least every slot's
whole load: compute plus communication). Every cost node ``u`` (group ``r(u)``, successor groups
``W(u)``, cost ``c(u)``) is a hyperedge ``e(u) = {r(u)} ∪ W(u)`` over the groups: a device whose
set of groups meets ``e(u)`` and misses part of it has ``u`` in ``In`` or ``Out`` and pays ``c(u)``
once (DESIGN.md §2).

For a set ``H`` of groups and an assignment ``a`` of ``H`` to slots (``k(a(v)) ∈ F(v)``,
``Σ_{a(v) = s} m(v) ≤ M_k(s)``), with ``A_s = {v ∈ H : a(v) = s}`` and ``C_s = Σ_{v ∈ A_s}
p_k(s)(v)``, two lower bounds on slot ``s``'s load in any plan that extends ``a``:

    base_s  = C_s + pays_k(s) · cut(A_s, H ∖ A_s)
    value_s = C_s + pays_k(s) · cut_s(A_s, H ∖ A_s)

where ``cut(A, B)`` is the least total cost of the hyperedges cut by a set of groups that holds
``A`` and nothing of ``B`` (a minimum s–t cut of the hypergraph; 0 when ``A`` is empty), and
``cut_s`` the least of that cost plus the times ``p_k(s)`` of the groups outside ``H`` the set
holds, over the sets whose groups all fit type ``k(s)`` (an s–t cut with an arc of capacity
``p_k(s)(v)`` from each such group ``v`` to the sink, infinite where ``v`` does not fit). The
value of ``a`` is

    max( max_s value_s ,  the least θ with Σ_s (θ − base_s)⁺ / ρ_s ≥ Σ_{v ∉ H} q(v) )

with ``q(v)`` the group's cheapest time and ``ρ_s`` the least ratio ``p_k(s)(v) / q(v)`` over
the groups that fit type ``k(s)`` (the second term: the other groups' work poured over the
slots); ``P(H)`` is the least value over the assignments.

Every plan of :mod:`.none` or :mod:`.sets` restricted to ``H`` is such an assignment. Slot
``s``'s set ``S`` holds ``A_s``, nothing of ``H ∖ A_s`` and only groups that fit its type, so its
load is ``C_s`` plus the times of ``S ∖ H`` plus the boundary of ``S``: at least ``value_s``, and
at least ``base_s`` plus ``ρ_s`` times the cheapest times of ``S ∖ H``. With ``Θ`` at least
every load, summing ``(Θ − base_s) / ρ_s ≥ Σ_{v ∈ S ∖ H} q(v)`` over the slots gives the second
term (the two bounds are kept apart: ``value_s`` already counts some of that work). So
``Θ ≥ P(H)``, row 9 of :mod:`.none`; with every group in ``H``, ``P(H)`` is the optimum.

Where a few groups carry most of the work (GNMT's LSTM layers, the stems of convolutional
networks), ``P(H)`` for those groups is a bin-packing bound that the linear relaxation and the
counting rows of :mod:`.cuts` (each slot holding the *smallest* groups of ``H``) do not see, and
the cut terms price the tensors that packing must send.

Computing ``P(H)``: a depth-first branch and bound over the groups of ``H`` in decreasing
cheapest time; each group goes to each slot it fits (memory summed in floating point against the
bound plus :func:`memory_slack`, so that rounding never excludes an assignment that fits exactly:
a relaxation, which keeps ``P(H)`` a lower bound), empty slots of one type tried once (they
are interchangeable). A partial assignment's slot loads count compute and, on paying slots, the
larger of the hyperedges already cut among placed groups and the largest ``cut({v}, {w})`` over
``v`` on the slot and ``w`` placed elsewhere (each a lower bound on the final cut); a node is
cut when its largest load, or the water level of the work left (the groups of ``H`` not placed
and the groups outside ``H``) above the loads, reaches the best complete assignment found. At a
complete assignment the cuts are computed by maximum flow, remembered by slot set. The search
is exact when it ends; when the work allowed is done (a count of the arcs its maximum flows scan and
of the steps of its tree, not seconds, so that the bound is the same whatever the machine's load) it
gives up and the set is not used.
``H`` is the ``j`` heaviest groups for growing ``j`` (:func:`packing_floor`); each exact answer
is at least the previous one, since a larger ``H`` only adds compute and constraints to the cuts.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from placement.solvers.milp.backends import Backend
from placement.solvers.milp.data import GroupData

#: the most groups in H
LARGEST = 40
#: the most seconds' work spent on the bound, and its share of the call's time limit
SECONDS = 60.0
SHARE = 0.1
#: the most seconds' work for a set searched after one that did not raise the floor
PROBE = 1.0
#: the work (:func:`packing_value`) taken for a second's: the search is budgeted in work, not time, so
#: that its bound does not depend on the machine's load; measured on the published layer graphs (2.7 to
#: 4 million a second here)
WORK_PER_SECOND = 3_000_000
#: the search stops, whatever its work, after this many times its seconds (a machine that much slower
#: or busier than this one may then find a lower floor), and never past the call's deadline
GUARD = 4.0
#: the most moves :func:`extend` tries, and the seconds that guard it
EXTEND_MOVES, EXTEND_SECONDS = 1_000_000, 1.0
#: relative slack on a memory bound where the sizes are not integers (:func:`memory_slack`)
MEMORY_SLACK = 1e-9
#: relative margin taken off the floor on an integer backend, and on a floating-point one (see
#: :func:`packing_rows`)
ROUNDING = 1e-12
FLOATING = 1e-6
#: H grows by the groups at least this share of the last one's time before it is searched again
LIGHTER = 0.95
#: the widest ratio of the largest positive time or cost to the smallest for which the bound is
#: sought: past it, its cuts and water levels in floating point lose the small values, and it
#: came out far above the optimum (2.96e80 where the optimum was 12, with times from 1 to 1e97)
SPAN = 2.0 ** 40


class _GaveUp(Exception):
    pass


class HyperCut:
    """Minimum cuts of the cost-node hypergraph over the groups (module docstring): each hyperedge
    ``e`` becomes an arc ``e_in → e_out`` of capacity ``c`` with infinite arcs ``v → e_in`` and
    ``e_out → v`` for its groups ``v``, so a finite s–t cut is a set of hyperedges whose removal
    separates the sources from the sinks."""

    def __init__(self, groups: int, edges: Sequence[tuple[Sequence[int], float]]) -> None:
        self.groups = groups
        self.edges = [(tuple(members), c) for members, c in edges if c > 0 and len(set(members)) > 1]
        self.total = sum(c for _, c in self.edges)
        size = groups + 2 * len(self.edges) + 2
        self.source, self.sink = size - 2, size - 1
        self.arcs: list[list[int]] = [[] for _ in range(size)]   # arc indices leaving each vertex
        self.head: list[int] = []
        self.capacity: list[float] = []
        for i, (members, c) in enumerate(self.edges):
            e_in, e_out = groups + 2 * i, groups + 2 * i + 1
            self._arc(e_in, e_out, c)
            for v in members:
                self._arc(v, e_in, math.inf)
                self._arc(e_out, v, math.inf)
        self._fixed = len(self.head)
        self._pairs: dict[tuple[int, int], float] = {}
        #: the work done so far, as the search budgets it: the arcs the maximum flows scanned, and the
        #: steps of the search's tree (:func:`packing_search`)
        self.work = 0
        #: called before each augmenting path of a maximum flow, to give up (raise) past a budget: one flow
        #: over a large graph takes seconds (5.5 s on a 24,002-node transformer's 12,001 groups)
        self.check: Callable[[], None] | None = None

    def pair(self, a: int, b: int) -> float:
        """``cut({a}, {b})`` for two groups, remembered."""
        key = (a, b) if a < b else (b, a)
        if key not in self._pairs:
            self._pairs[key] = self.cut([a], [b])
        return self._pairs[key]

    def _arc(self, a: int, b: int, c: float) -> None:
        self.arcs[a].append(len(self.head))
        self.head.append(b)
        self.capacity.append(c)
        self.arcs[b].append(len(self.head))
        self.head.append(a)
        self.capacity.append(0.0)

    def cut(self, inside: Sequence[int], outside: Sequence[int], weights: Sequence[float] | None = None) -> float:
        """The least cost of the hyperedges cut by a set of groups holding ``inside`` and none of
        ``outside`` (0 when either is empty), plus, with ``weights``, the weights of the other
        groups it holds (``inf``: a group it cannot hold)."""
        if not inside or not (outside or weights):
            return 0.0
        for v in inside:
            self._arc(self.source, v, math.inf)
        for v in outside:
            self._arc(v, self.sink, math.inf)
        if weights is not None:
            fixed = set(inside) | set(outside)
            for v, w in enumerate(weights):
                if w > 0 and v not in fixed:
                    self._arc(v, self.sink, w)
        try:
            return self._max_flow()
        finally:
            self._drop()

    def _max_flow(self) -> float:
        """The maximum flow from the source to the sink over the arcs as they are (``inf``: an infinite path)."""
        residual = list(self.capacity)
        flow = 0.0
        while True:                       # shortest augmenting paths (Edmonds–Karp)
            if self.check is not None:
                self.check()
            parent = {self.source: -1}
            queue = deque([self.source])
            while queue and self.sink not in parent:
                a = queue.popleft()
                self.work += len(self.arcs[a])
                for arc in self.arcs[a]:
                    b = self.head[arc]
                    if residual[arc] > 0 and b not in parent:
                        parent[b] = arc
                        queue.append(b)
            if self.sink not in parent:
                return flow
            push, b = math.inf, self.sink
            while b != self.source:
                arc = parent[b]
                push = min(push, residual[arc])
                b = self.head[arc ^ 1]
            if not math.isfinite(push):   # an infinite path: no set holds inside and avoids outside
                return math.inf
            b = self.sink
            while b != self.source:
                arc = parent[b]
                residual[arc] -= push
                residual[arc ^ 1] += push
                b = self.head[arc ^ 1]
            flow += push

    def _drop(self) -> None:
        """Remove the source and sink arcs of the last :meth:`cut`."""
        for vertex in (self.source, self.sink):
            self.arcs[vertex] = [a for a in self.arcs[vertex] if a < self._fixed]
        for v in range(self.groups):
            self.arcs[v] = [a for a in self.arcs[v] if a < self._fixed]
        del self.head[self._fixed:]
        del self.capacity[self._fixed:]


def hyperedges(d: GroupData) -> list[tuple[tuple[int, ...], float]]:
    """The cost nodes of ``d`` as hyperedges over the groups (module docstring), with their costs;
    those that no set can cut (one group, or no cost) left out."""
    return [((cn.r, *cn.W), cn.c) for cn in d.cost_nodes if cn.W and cn.c > 0]


def hypergraph(d: GroupData) -> HyperCut:
    """The cost-node hypergraph of ``d``'s groups."""
    return HyperCut(len(d.groups), hyperedges(d))


def memory_slack(sizes: Sequence[float], bound: float) -> float:
    """What the search adds to a memory ``bound``: nothing where the sizes and the bound are integers
    whose sums are exact (an integer backend's scaled data, byte counts), else :data:`MEMORY_SLACK` of
    it, so that a sum rounded up in floating point (0.2 + 0.1 above 0.3) does not exclude an assignment
    that fits. Fitting more only lowers the values found, so the floor stays a lower bound."""
    if math.isinf(bound) or (isinstance(bound, int) and all(isinstance(a, int) for a in sizes)):
        return 0.0   # exact integer memory (:func:`.data._integer_memory`): sums of Python integers are exact
    if float(bound).is_integer() and all(float(a).is_integer() for a in sizes) and math.fsum(sizes) <= 2.0 ** 53:
        return 0.0
    return MEMORY_SLACK * abs(bound)


def packing_value(d: GroupData, kinds: Sequence[int], H: Sequence[int], cuts: HyperCut | None = None,
                  work: float = math.inf, above: float = -math.inf, deadline: float = math.inf) -> float | None:
    """``P(H)`` of the module docstring (model units); ``None`` when the search has done ``work`` (arcs
    its maximum flows scanned, and per node of its tree its slots and what placing a group there
    touches: :attr:`HyperCut.work`) without ending, or is still running at ``deadline`` (a
    :func:`time.perf_counter` time, a guard only: the work decides, so that the answer does not
    depend on the machine's speed or load), when no assignment of ``H`` fits, or as soon as an
    assignment of value at most ``above`` is found (``P(H)`` then bounds nothing above it)."""
    found = packing_search(d, kinds, H, cuts, work, above, deadline)
    return None if found is None else found[0]


def packing_search(d: GroupData, kinds: Sequence[int], H: Sequence[int], cuts: HyperCut | None = None,
                   work: float = math.inf, above: float = -math.inf,
                   deadline: float = math.inf) -> tuple[float, dict[int, int]] | None:
    """:func:`packing_value` with an assignment that attains it (group → slot position in ``kinds``)."""
    cuts = cuts or hypergraph(d)
    allowed = cuts.work + work
    slots = range(len(kinds))
    q = d.cheapest()
    items = sorted(H, key=lambda v: -q[v])
    position = {v: i for i, v in enumerate(items)}
    time_on = [[d.p(v, kinds[s]) if kinds[s] in d.fits(v) else None for s in slots] for v in items]
    fits = [[s for s in slots if time_on[i][s] is not None] for i in range(len(items))]
    size = [d.m[v] for v in items]
    room = [d.M[kinds[s]] if d.memory_binds else math.inf for s in slots]
    room = [r + (memory_slack(size, r) or 0) for r in room]   # an integer bound stays one
    pays = [d.pays[kinds[s]] for s in slots]
    fitting = [(v, {k: d.p(v, k) for k in d.fits(v)}) for v in q if q[v] > 0]
    ratio = [min((times[kinds[s]] / q[v] for v, times in fitting if kinds[s] in times), default=math.inf)
             for s in slots]
    left_work = [0.0] * (len(items) + 1)
    left_work[-1] = sum(q[v] for v in q if v not in position)       # the groups outside H
    for i in range(len(items) - 1, -1, -1):
        left_work[i] = left_work[i + 1] + q[items[i]]
    # hyperedges with two or more groups of H, by positions; per position the ones it is in
    inner = []
    for members, c in cuts.edges:
        mine = sorted({position[v] for v in members if v in position})
        if len(mine) > 1:
            inner.append((mine, c))
    touching: list[list[int]] = [[] for _ in items]
    for index, (mine, _) in enumerate(inner):
        for i in mine:
            touching[i].append(index)

    compute = [0.0] * len(kinds)
    paid = [0.0] * len(kinds)          # inner hyperedges cut so far
    pair = [0.0] * len(kinds)          # the largest cut({v}, {w}), v on the slot, w placed elsewhere
    load = [0.0] * len(kinds)          # compute + max(paid, pair) on paying slots: a lower bound on the value
    held: list[float] = [0] * len(kinds)   # an integer sum while the sizes are integers: exact
    members = [0] * len(kinds)
    where = [-1] * len(items)
    order_placed: list[int] = []               # positions placed, in order
    lam: list[list[float | None]] = [[None] * len(items) for _ in items]   # cut({v}, {w}) by positions
    charged: list[set[int]] = [set() for _ in slots]
    best = [math.inf]
    best_where: list[int] = []
    count = [0]
    known: dict[int, float] = {}               # cut(A, H ∖ A) by the bit mask of A's positions
    mask = [0] * len(kinds)

    weights = {k: [(d.p(v, k) if k in d.fits(v) else math.inf) if v not in position else 0.0  # type: ignore[misc]
                   for v in range(len(d.groups))] for k in set(kinds)}
    charged_known: dict[tuple[int, int], float] = {}   # the same with the other groups' times, by (mask, type)

    def sides(s: int) -> tuple[list[int], list[int]]:
        return ([items[i] for i in range(len(items)) if mask[s] >> i & 1],
                [items[i] for i in range(len(items)) if not mask[s] >> i & 1])

    def in_time() -> None:
        """Give up past the work allowed or the deadline (checked before each augmenting path of a maximum
        flow, :attr:`HyperCut.check`, which may be long, and every thousand nodes)."""
        if cuts.work > allowed or time.perf_counter() > deadline:
            raise _GaveUp

    def cut_of(s: int) -> float:
        if mask[s] not in known:
            known[mask[s]] = cuts.cut(*sides(s))
        return known[mask[s]]

    def charged_cut_of(s: int) -> float:
        key = (mask[s], kinds[s])
        if key not in charged_known:
            charged_known[key] = cuts.cut(*sides(s), weights[kinds[s]])
        return charged_known[key]

    def refresh(s: int) -> None:
        load[s] = compute[s] + (max(paid[s], pair[s]) if pays[s] else 0.0)

    finite = [s for s in slots if math.isfinite(ratio[s])]
    speed_of = [0.0 if not math.isfinite(r) else 1.0 / r for r in ratio]

    def water(levels: Sequence[float], need: float) -> float:
        """The least θ with ``Σ_s (θ − levels[s])⁺ / ρ_s ≥ need``."""
        if need <= 0:
            return 0.0
        order = sorted(finite, key=levels.__getitem__)
        speed = base = 0.0
        last = len(order) - 1
        for j, s in enumerate(order):
            speed += speed_of[s]
            base += levels[s] * speed_of[s]
            theta = (need + base) / speed
            if j == last or theta <= levels[order[j + 1]]:
                return theta
        return math.inf

    def place(i: int, s: int) -> list[tuple[str, int, Any]]:
        """Put position ``i`` on slot ``s``; returns what to undo."""
        undo: list[tuple[str, int, Any]] = []
        cuts.work += 1 + len(touching[i]) + len(order_placed)   # the loops below
        where[i] = s
        compute[s] += time_on[i][s]  # type: ignore[operator]
        held[s] += size[i]
        members[s] += 1
        mask[s] |= 1 << i
        for index in touching[i]:                 # inner hyperedges now split
            placed = {where[j] for j in inner[index][0] if where[j] >= 0}
            if len(placed) < 2:
                continue
            for t in placed:
                if pays[t] and index not in charged[t]:
                    charged[t].add(index)
                    paid[t] += inner[index][1]
                    undo.append(("paid", t, index))
        row = lam[i]
        for j in order_placed:                     # pairs split by this placement
            t = where[j]
            if t == s or not (pays[s] or pays[t]):
                continue
            cost = row[j]
            if cost is None:
                in_time()
                cost = row[j] = lam[j][i] = cuts.pair(items[i], items[j])
            for slot in (s, t):
                if pays[slot] and cost > pair[slot]:
                    undo.append(("pair", slot, pair[slot]))
                    pair[slot] = cost
        order_placed.append(i)
        for slot in {s} | {t for _, t, _ in undo}:
            refresh(slot)
        return undo

    def unplace(i: int, s: int, undo: list[tuple[str, int, Any]]) -> None:
        for what, t, value in reversed(undo):
            if what == "paid":
                charged[t].discard(value)
                paid[t] -= inner[value][1]
            else:
                pair[t] = value
        order_placed.pop()
        members[s] -= 1
        mask[s] &= ~(1 << i)
        held[s] -= size[i]
        compute[s] -= time_on[i][s]  # type: ignore[operator]
        where[i] = -1
        for slot in {s} | {t for _, t, _ in undo}:
            refresh(slot)

    def complete() -> float:
        """The value of the complete assignment: its largest slot value (cuts where they could
        matter), or the water level of the groups outside ``H`` above the values."""
        base = list(load)
        value = max(max(base), water(base, left_work[-1]))
        if value >= best[0]:
            return value
        for s in slots:
            if pays[s] and members[s] and compute[s] + cuts.total > load[s]:
                base[s] = max(load[s], compute[s] + cut_of(s))
        value = max(max(base), water(base, left_work[-1]))
        for s in sorted(slots, key=lambda s: -base[s]):
            if value >= best[0]:
                break
            if pays[s] and members[s]:
                value = max(value, compute[s] + charged_cut_of(s))
        return value

    def search(i: int) -> None:
        count[0] += 1
        cuts.work += len(kinds)
        if count[0] % 1000 == 0:
            in_time()
        if i == len(items):
            value = complete()
            if value < best[0]:
                best[0] = value
                best_where[:] = where
            if best[0] <= above:
                raise _GaveUp
            return
        if max(load) >= best[0] or water(load, left_work[i]) >= best[0]:
            return
        empty_tried = set()
        times = time_on[i]
        for s in sorted(fits[i], key=load.__getitem__):
            if held[s] + size[i] > room[s] or load[s] + times[s] >= best[0]:  # type: ignore[operator]
                continue
            if not members[s]:
                if kinds[s] in empty_tried:
                    continue
                empty_tried.add(kinds[s])
            undo = place(i, s)
            if max(load) < best[0]:
                search(i + 1)
            unplace(i, s, undo)

    cuts.check = in_time   # within each maximum flow too
    try:
        search(0)
    except _GaveUp:
        return None
    finally:
        cuts.check = None
    if not math.isfinite(best[0]):
        return None
    return best[0], {items[i]: s for i, s in enumerate(best_where)}


@dataclass(frozen=True)
class Packing:
    """What :func:`packing_floor` found: the floor (model units), the size of its set ``H`` (0: no
    floor above the one asked for), an assignment of ``H`` that attains it (group → slot position),
    the seconds spent and the work done (:func:`packing_value`)."""

    floor: float
    groups: int = 0
    assignment: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    work: int = 0


def packing_floor(d: GroupData, kinds: Sequence[int], work: float = SECONDS * WORK_PER_SECOND, above: float = 0.0,
                  deadline: float = math.inf) -> Packing:
    """The largest ``P(H)`` above ``above`` found for ``H`` = the ``j`` heaviest groups, for growing
    ``j`` (at most :data:`LARGEST`; ``j`` stops only where the next group is lighter than
    :data:`LIGHTER` times the ``j``-th), until ``work`` (:func:`packing_value`) is done in all; with
    that ``j`` (``above`` and 0 when there is none). A search after one that did not raise the floor
    may do at most :data:`PROBE` seconds' work. ``deadline`` guards the whole as in
    :func:`packing_value`."""
    start = time.perf_counter()
    q = d.cheapest()
    order = sorted(q, key=lambda v: -q[v])
    cuts = hypergraph(d)
    result = Packing(above)
    rising = False                                 # the last set searched raised the floor
    for j in range(1, min(len(order), LARGEST) + 1):
        if j < min(len(order), LARGEST) and q[order[j]] >= LIGHTER * q[order[j - 1]]:
            continue                               # the next group is about as heavy: take it too
        before = cuts.work
        allowed = work - before if rising else min(work - before, PROBE * WORK_PER_SECOND)
        found = packing_search(d, kinds, order[:j], cuts, allowed, result.floor, deadline)
        rising = found is not None
        if found is not None:
            result = Packing(found[0], j, found[1])
        elif cuts.work - before > allowed or time.perf_counter() > deadline:   # gave up: larger sets take longer
            break
    return replace(result, seconds=time.perf_counter() - start, work=cuts.work)


def data_span(d: GroupData) -> float:
    """The ratio of the largest positive time or cost of the model to the smallest (1 when none)."""
    values = [q for rows in (d.pf, d.pb) for row in rows for q in row if q] + [cn.c for cn in d.cost_nodes if cn.c > 0]
    return max(values) / min(values) if values else 1.0


def packing_rows(be: Backend, d: GroupData, kinds: Sequence[int], targets: list[Any],
                 above: float = 0.0) -> Packing:
    """Row 9 of :mod:`.none`: ``Θ ≥`` :func:`packing_floor` where it is above ``above`` (the
    largest floor the model already has), less a relative :data:`FLOATING` on a floating-point
    backend (whose sums may round differently, and which within its tolerances may call a model
    infeasible whose floor meets the warm start's cutoff: HiGHS did on a 4-node instance at
    ``1e-9``), and :data:`ROUNDING` on an integer one (the water level is a
    quotient, and its last bit must not lift the row past an integer optimum); not sought where the
    model's times and costs span more than :data:`SPAN`; searched with the work of at most
    :data:`SECONDS`, or of :data:`SHARE` of the call's time limit (``be.time_limit``), and never for
    more than :data:`GUARD` times those seconds or past the backend's deadline. Returns what
    :func:`packing_floor` found."""
    if data_span(d) > SPAN:
        return Packing(0.0)
    seconds = SECONDS if be.time_limit is None else min(SECONDS, SHARE * be.time_limit)
    guard = time.perf_counter() + GUARD * seconds
    found = packing_floor(d, kinds, seconds * WORK_PER_SECOND, above, guard if be.deadline is None else
                          min(guard, be.deadline))
    if found.groups:
        be.add([(1, t) for t in targets], lo=found.floor * (1 - (ROUNDING if be.integer_only else FLOATING)))
    return found


def extend(d: GroupData, kinds: Sequence[int], assignment: dict[int, int], moves: int = EXTEND_MOVES,
           seconds: float = EXTEND_SECONDS) -> list[int] | None:
    """A slot position for every group: ``assignment`` for the groups it places, the others added
    one at a time (heaviest first) where the largest load grows least, then single groups moved
    while a move lowers the largest load, at most ``moves`` of them tried (and, as a guard only, for
    at most ``seconds``: the count decides, so that the plan does not depend on the machine's load);
    ``None`` when a group fits no slot. Loads as in DESIGN.md §2 (compute, and a cost node once per
    paying slot whose set meets its hyperedge and misses part of it); a heuristic: the plan it
    describes is verified by the caller."""
    stop = time.perf_counter() + seconds
    n, slots = len(d.groups), range(len(kinds))
    edges = hyperedges(d)
    of_group: list[list[int]] = [[] for _ in range(n)]
    for e, (members, _) in enumerate(edges):
        for v in members:
            of_group[v].append(e)
    inside = [[0] * len(edges) for _ in slots]       # members of each hyperedge on each slot
    load = [0.0] * len(kinds)
    held: list[float] = [0] * len(kinds)   # an integer sum while the sizes are integers: exact
    room = [d.M[kinds[s]] if d.memory_binds else math.inf for s in slots]
    where = [-1] * n

    def delta(v: int, s: int, step: int) -> float:
        """Change of slot ``s``'s load when group ``v`` joins it (``step`` 1) or leaves it (−1)."""
        change = d.p(v, kinds[s]) * step  # type: ignore[operator]
        if d.pays[kinds[s]]:
            for e in of_group[v]:
                members, c = edges[e]
                before = 0 < inside[s][e] < len(members)
                after = 0 < inside[s][e] + step < len(members)
                change += c * (after - before)
        return change

    def move(v: int, s: int, step: int) -> None:
        load[s] += delta(v, s, step)
        held[s] += d.m[v] * step
        for e in of_group[v]:
            inside[s][e] += step
        where[v] = s if step > 0 else -1

    def fitting(v: int) -> list[int]:
        return [s for s in slots if kinds[s] in d.fits(v) and held[s] + d.m[v] <= room[s]]

    for v, s in assignment.items():
        move(v, s, 1)
    q = d.cheapest()
    for v in sorted((v for v in range(n) if v not in assignment), key=lambda v: -q.get(v, 0.0)):
        options = fitting(v)
        if not options:
            return None
        top = max(load)
        after = {s: load[s] + delta(v, s, 1) for s in options}
        move(v, min(options, key=lambda s: (max(top, after[s]), after[s])), 1)
    improved, tried = True, 0
    while improved and tried < moves and time.perf_counter() < stop:
        improved = False
        for v in range(n):
            top = max(load)
            s = where[v]
            if load[s] < top:
                continue                              # only moves off a slot at the largest load
            off = load[s] + delta(v, s, -1)
            for t in slots:
                if t == s or kinds[t] not in d.fits(v) or held[t] + d.m[v] > room[t]:
                    continue
                tried += 1
                if max(off, load[t] + delta(v, t, 1)) < top:
                    move(v, s, -1)
                    move(v, t, 1)
                    improved = True
                    break
    return where
