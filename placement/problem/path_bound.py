"""A lower bound on single-sample latency from single paths, which meet every call in one segment.

Model
-----
The latency model of DESIGN.md §2 with at most ``q`` calls per accelerator. Take a path
``P = v_1 → … → v_ℓ`` of the graph and any valid plan. The nodes of ``P`` on accelerators
fall into maximal *segments* of consecutive nodes of ``P`` in one call; a call is
contiguous, so ``P`` meets each call in at most one segment, and there are at most
``J = q·A`` segments (``A`` accelerators). For a segment ``v_s..v_t`` in call ``S``:

* ``S`` starts no earlier than ``v_{s−1}`` finishes (``v_{s−1} ∈ In(S)``, when ``s > 1``),
  and ``v_t`` finishes at its end;
* ``S`` holds the whole *interval* ``I = I(s, t)``, the nodes on the paths from ``v_s`` to
  ``v_t`` (descendants of ``v_s`` that are ancestors of ``v_t``, both included): a path that
  leaves ``S`` does not come back. So every node of ``I`` runs on an accelerator, ``I`` fits
  in one accelerator's memory, and ``S`` lasts at least ``Σ_{x∈I} p_acc(x)`` plus:
* the segment is maximal, so ``v_{s−1}`` and ``v_{t+1}`` are outside ``S``, and with them every
  node of ``P`` before ``v_s`` or after ``v_t`` (a path leaving ``S`` does not come back);
* *inputs*: each node ``x ∉ I`` with an edge into ``I`` (never a descendant of ``v_s``, else it
  would be in ``I``) is outside ``S``, adding ``c(x)``, or in it, adding its accelerator time and
  what it brings in: ``min(c(x), p_acc(x) + r(x))``. It is certainly outside when it is on ``P``,
  runs on no accelerator, has no room beside ``I`` (``m(I) + m(x)`` above the memory bound), or
  reaches ``v_{s−1}`` (the path ``x → … → v_{s−1} → v_s`` would leave ``S`` and come back); then
  it adds ``c(x)``;
* *what an input held brings*: a held ``x`` has each predecessor ``y`` in ``S`` or in ``In(S)``.
  A ``y`` certainly outside ``S`` (as for inputs) adds ``c(y)``; another adds at least
  ``min(c(y), p_acc(y) + r'(y))``, with ``r'(y)`` the same sum over the *private* predecessors of
  ``y``: those whose every other successor reaches ``v_{s−1}``, so that, besides the node it is
  counted through, such a predecessor feeds nothing in ``S``: it is no input of ``I`` and is
  counted through no other node. ``r(x)`` sums this over the predecessors ``y`` of ``x`` that
  are not inputs of ``I`` and feed no other input of ``I``. So
  each ``y``, and each ancestor counted through it, stands for ``x`` alone, and nothing is
  counted twice; none of them descends from ``v_s``. A branch that leaves ``P`` before
  ``v_{s−1}`` and joins it in ``I`` (a residual block's shortcut) thus makes the call receive
  the branch's tensor, or hold the branch and receive what feeds it;
* *colours* (``q = 1`` only): a colour class goes whole to one device, so with one call per
  accelerator it goes whole to one call. A node with a colour mate that reaches ``v_{s−1}`` is
  certainly outside ``S`` (the mate is, by the argument above): as an input it adds ``c(x)``, and
  an interval holding it is no call of any plan. Nor is one holding a node with a mate on ``P``
  after ``v_t``: the mate would be in ``S`` beyond ``v_{t+1}``, which is not. With ``q > 1`` the
  mate may sit in another call of the same accelerator, and colours are not used;
* *outputs*: a node ``u ∈ I`` with a successor on ``P`` after ``v_t`` is in ``Out(S)``: ``c(u)``.
  Otherwise ``u`` adds ``min(c(u), Σ_{w ∈ A(u) ∖ I} a(w))``, where ``A(u)`` are the successors
  off ``P`` assigned to ``u`` (each node off ``P`` to one predecessor, one on ``P`` where it has
  one): either one of them is outside ``S``, so ``u ∈ Out(S)``, or all are in ``S``, each adding
  at least ``a(w) = p_acc(w) + (c(w)`` if ``w`` has a successor on ``P``, else
  ``min(c(w), Σ_{w' ∈ A(w)} a(w')))`` (``∞`` when ``w`` runs on no accelerator): its time, and
  either its own output or, by the same argument, its assigned successors. A node ``w ∉ I``
  with a descendant in ``I`` would be in ``I``, so no descendant of ``w`` is in ``I``, and its
  successors on ``P`` come after ``v_t``, outside ``S``. The assigned nodes form a forest
  hanging from ``I``, of descendants of ``v_s`` outside ``I``, so no input, no node of ``I`` and
  no assigned node is counted twice.

A node of ``P`` on a CPU finishes ``p_cpu`` after its predecessor on ``P``. So ``v_ℓ``
finishes no earlier than the least, over the partitions of ``P`` into at most ``J``
accelerator segments and CPU nodes, of the sum of these durations, with ``p_acc`` a node's
time on the fastest accelerator that supports it and the memory bound the largest
accelerator's (other nodes in the calls and which accelerator takes which segment only
add). With ``B[j][t]`` that least sum for ``v_1..v_t`` using ``j`` segments::

    B[0][0] = 0
    B[j][t] = min( B[j][t−1] + p_cpu(v_t),  min_{s ≤ t} B[j−1][s−1] + seg(s, t) )

the DP :func:`placement.problem.sequential.least_sum` over the nodes of ``P``; the bound is
``min_j B[j][ℓ]``. The intervals ``I(s, t)`` grow with ``t``: the nodes that reach ``v_t`` but
not ``v_{t−1}`` form the layer ``t``, and ``I(s, t)`` adds the descendants of ``v_s`` in it, so
each start ``s`` scans the layers once (the budget counts the in-edges of the nodes scanned).
On a chain (every node on ``P``) the bound is the optimum with one call per accelerator. The
paths tried (:func:`heavy_paths`) are the longest paths for a few node weights: the cheapest
time, the memory, and the two normalised and added; the bound is the largest of theirs.
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

from placement.errors import LimitExceededError
from placement.problem.instance import Instance
from placement.problem.memory_fit import LENIENT
from placement.problem.sequential import MAX_JOINS, Budget, least_sum
from placement.problem.units import sums_exactly

#: the rounding allowance per operation of :func:`interval_runs` where its sums are not exact: twice
#: the relative error of one floating-point operation
ROUNDING = 2.0 ** -52


def path_layers(path: Sequence[int], pred: Sequence[Sequence[int]], rank: Sequence[int]) -> list[list[int]]:
    """Per position ``t`` of ``path``, the nodes that reach ``path[t]`` (itself included) but not
    ``path[t − 1]``, in increasing topological ``rank``: ``path[t]`` comes last."""
    layer: list[list[int]] = []
    seen: set[int] = set()
    for v in path:
        found = [v]
        seen.add(v)
        stack = [v]
        while stack:
            for u in pred[stack.pop()]:
                if u not in seen:
                    seen.add(u)
                    found.append(u)
                    stack.append(u)
        layer.append(sorted(found, key=rank.__getitem__))
    return layer


class PathData:
    """What :func:`interval_runs` reads for one path, per node position: whether it is on the
    path, its successors on the path, what it adds as an input (``c``, or ``min(c, p_acc)`` off
    the path) and the layer it is in, the node it is assigned to (``owner``, off the path), what a
    call adds by holding it (``a``) and the sum of ``a`` over the nodes assigned to it (``inf``
    when one runs on no accelerator), the first layer holding a colour mate of it (``mate_layer``)
    and the last position of the path holding one (``last_mate``), from ``classes``, the classes
    that go whole to one call; and the scratch lists it writes."""

    def __init__(self, path: Sequence[int], succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                 rank: Sequence[int], order: Sequence[int], p_acc: Sequence[float | None],
                 cost: Sequence[float], classes: Sequence[Sequence[int]] = ()) -> None:
        n = len(succ)
        self.path = list(path)
        self.on_path = [False] * n
        for v in path:
            self.on_path[v] = True
        on_path = self.on_path
        self.layers = path_layers(path, pred, rank)
        self.path_succ = [sum(on_path[w] for w in succ[u]) for u in range(n)]
        self.succ = succ
        self.owner = [-1 if on_path[w] or not pred[w] else next((u for u in pred[w] if on_path[u]), pred[w][0])
                      for w in range(n)]
        # absorb[w]: the least a call adds by holding w off the path (its time, plus its output or
        # what its own assigned successors add); assigned[u]: the sum of absorb over those of u
        self.assigned = [0.0] * n
        self.absorb = [0.0] * n
        for w in reversed(order):          # an assigned node's successors are settled before it
            u = self.owner[w]
            if u < 0:
                continue
            time = p_acc[w]
            out = cost[w] if self.path_succ[w] else min(cost[w], self.assigned[w])
            self.absorb[w] = math.inf if time is None else time + out
            self.assigned[u] += self.absorb[w]
        self.input_fee = [cost[u] if on_path[u] or p_acc[u] is None else min(cost[u], p_acc[u])  # type: ignore[type-var]
                          for u in range(n)]
        # the layer holding each node (len(path): none): a node of a layer before s reaches path[s − 1]
        self.layer_of = [len(path)] * n
        for t, layer in enumerate(self.layers):
            for x in layer:
                self.layer_of[x] = t
        # a node whose mate_layer is before s has a mate that reaches path[s − 1]: outside a call from s
        # and a node whose last_mate is after t has a mate on the path after path[t]: it is in no call
        # that ends at path[t]
        self.mate_layer = [len(path)] * n
        self.last_mate = [-1] * n
        position = {v: i for i, v in enumerate(path)}
        for members in classes:
            if len(members) > 1:
                first = sorted(self.layer_of[x] for x in members)
                last = max((position[x] for x in members if on_path[x]), default=-1)
                for x in members:
                    self.mate_layer[x] = first[1] if self.layer_of[x] == first[0] else first[0]
                    self.last_mate[x] = last
        # scratch for interval_runs, marked with the start: membership of I, inputs paid, and per
        # member its successors on the path not in I yet and the time of its assigned ones not in I yet
        self.member = [-1] * n
        self.paid = [-1] * n
        self.waiting = [0] * n
        self.left = [0.0] * n


def interval_runs(data: PathData, s: int, pred: Sequence[Sequence[int]], p_acc: Sequence[float | None],
                  memory: Sequence[float], cost: Sequence[float], capacity: float,
                  budget: Budget, rounding: float = 0.0) -> tuple[list[int], list[float]]:
    """Ends ``t + 1`` and the durations of the module docstring of the segments ``path[s..t]``; the
    budget pays for the in-edges of the nodes scanned (at least one per node), less one per end (which
    :func:`least_sum` pays). Membership and the inputs paid are marked with ``s`` in ``data``'s
    scratch lists, so the starts must be distinct.

    The durations are running sums from which amounts are taken out again (an output that stays in
    the call, an input's fee revised), so in floating point they may keep a residue of the amounts
    taken out: with transfers of 10^96 beside times of 10^-308 one of 2·10^80 made a bound of an
    instance whose optimum is 10^-308. Each duration is therefore lowered by ``rounding`` times the
    operations so far times the magnitude of everything added or taken out (each operation errs by
    at most ``2^-53`` of a partial sum, which that magnitude bounds); ``rounding`` is 0 where the
    sums are exact (:func:`placement.problem.units.sums_exactly`)."""
    path, on_path, owner = data.path, data.on_path, data.owner
    member, paid, waiting, left = data.member, data.paid, data.waiting, data.left
    mate_layer = data.mate_layer
    first = path[s]
    compute = used = inputs = outputs = 0.0
    # the model decides memory on the sizes as written (0.1 + 0.2 fits 0.3), which a floating-point sum
    # may put above the bound by a few units in the last place: lenient, every block the rule lets fit fits
    room = capacity * (1 + LENIENT)
    moved = 0.0                               # the magnitude of every amount added or taken out
    scanned = 0
    ends: list[int] = []
    durations: list[float] = []
    guests: list[tuple[float, int]] = []     # inputs that may be in the call: (−memory, node)
    fees = _InputFees(data, s, pred, p_acc, cost)
    reach = s                                 # the last position of the path holding a member's mate
    for t in range(s, len(path)):
        for x in data.layers[t]:
            preds = pred[x]
            scanned += len(preds) or 1
            if x != first:
                for u in preds:
                    if member[u] == s:
                        break
                else:
                    continue          # not a descendant of path[s]
            time = p_acc[x]
            used += memory[x]
            if time is None or used > room or mate_layer[x] < s:
                budget.spend(scanned + fees.scanned - len(ends))
                return ends, durations
            compute += time
            moved += time
            reach = max(reach, data.last_mate[x])
            for u in preds:
                if member[u] != s:
                    if paid[u] != s:
                        paid[u] = s
                        if data.input_fee[u] < cost[u] and not fees.outside(u):
                            fees.add(u)
                            heapq.heappush(guests, (-memory[u], u))
                        else:
                            inputs += cost[u]
                            moved += cost[u]
                            fees.settle(u)
                    continue
                c = cost[u]
                if on_path[x]:        # u's output may now stay in the call
                    waiting[u] -= 1
                    if not waiting[u] and left[u] < c:
                        outputs -= c - left[u]
                        moved += c
                elif owner[x] == u:   # x, assigned to u, joins: it no longer stands for u's output
                    before = left[u]
                    left[u] = before - data.absorb[x]
                    if not waiting[u] and left[u] < c:
                        outputs -= min(c, before) - left[u]
                        moved += min(c, before) + abs(left[u])
            member[x] = s
            waiting[x] = data.path_succ[x]
            left[x] = data.assigned[x]
            c = cost[x]
            added = c if waiting[x] or left[x] >= c else left[x]
            outputs += added
            moved += added
        while guests and used - guests[0][0] > room:   # no room left in the call for this input
            fees.force_out(heapq.heappop(guests)[1])
        if reach <= t:
            ends.append(t + 1)
            duration = compute + inputs + fees.total + outputs
            if rounding:
                operations = 4 * (scanned + fees.scanned + fees.revisions + len(ends))
                duration = max(0.0, duration - rounding * operations * (moved + fees.moved))
            durations.append(duration)
    budget.spend(scanned + fees.scanned - len(ends))
    return ends, durations


class _InputFees:
    """The inputs of a call from ``path[s]`` that it may hold (off the path, on an accelerator, not
    reaching ``path[s − 1]``, themselves or by a colour mate), each adding ``min(c(x), p_acc(x) + r(x))``,
    or ``c(x)`` once the call has no room for it. A held ``x`` needs each predecessor ``y`` in the call
    or received: ``r(x)`` sums over them ``c(y)`` where ``y`` is certainly outside the call (as the
    input itself), else ``min(c(y), p_acc(y) + r'(y))``, with ``r'(y)`` the same sum over the
    predecessors of ``y`` whose every other successor reaches ``path[s − 1]``. A predecessor of ``x``
    that is an input of the interval, or feeds another such ``x``, adds nothing, so that no transfer
    or time is counted twice (module docstring)."""

    def __init__(self, data: PathData, s: int, pred: Sequence[Sequence[int]], p_acc: Sequence[float | None],
                 cost: Sequence[float]) -> None:
        self.data, self.s, self.pred, self.p_acc, self.cost = data, s, pred, p_acc, cost
        self.total = 0.0
        self.fee: dict[int, float] = {}            # the inputs x that the call may hold, and what each adds
        self.held_by: dict[int, list[int]] = {}    # a predecessor of such inputs -> those inputs
        self.inputs: set[int] = set()              # every input of the interval so far
        self.out: set[int] = set()                 # inputs with no room left in the call
        self.deep: dict[int, float] = {}           # r'(y)
        self.scanned = 0                           # successors read for r'
        self.revisions = 0                         # fees set or revised
        self.moved = 0.0                           # the magnitude of every fee set or taken out

    def outside(self, y: int) -> bool:
        data = self.data
        return (data.on_path[y] or self.p_acc[y] is None or data.layer_of[y] < self.s
                or data.mate_layer[y] < self.s)

    def add(self, x: int) -> None:
        """``x`` is an input of the interval that the call may hold."""
        self.fee[x] = 0.0
        self._input(x)
        for y in self.pred[x]:
            feeds = self.held_by.setdefault(y, [])
            feeds.append(x)
            if len(feeds) == 2:
                self._refresh(feeds[0])
        self._refresh(x)

    def settle(self, y: int) -> None:
        """``y`` is an input of the interval certainly outside the call."""
        self._input(y)

    def force_out(self, x: int) -> None:
        self.out.add(x)
        self._refresh(x)

    def _input(self, y: int) -> None:
        self.inputs.add(y)
        for x in self.held_by.get(y, ()):
            self._refresh(x)

    def _refresh(self, x: int) -> None:
        c = self.cost[x]
        if x in self.out:
            fee = c
        else:
            brought = sum(self._brought(y) for y in self.pred[x]
                          if y not in self.inputs and len(self.held_by[y]) == 1)
            fee = min(c, self.p_acc[x] + brought)  # type: ignore[operator]
        self.total += fee - self.fee[x]
        self.moved += fee + self.fee[x]
        self.revisions += 1 + len(self.pred[x])
        self.fee[x] = fee

    def _brought(self, y: int) -> float:
        """``c(y)`` where ``y`` is certainly outside the call, else ``min(c(y), p_acc(y) + r'(y))``."""
        if self.outside(y):
            return self.cost[y]
        stack = [y]                                # r' of y's private ancestors first, without recursion
        while stack:
            z = stack[-1]
            private = self._private(z)
            todo = [w for w in private if not self.outside(w) and w not in self.deep]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            self.deep[z] = sum(self.cost[w] if self.outside(w) else
                               min(self.cost[w], self.p_acc[w] + self.deep[w])  # type: ignore[operator]
                               for w in private)
        return min(self.cost[y], self.p_acc[y] + self.deep[y])  # type: ignore[operator]

    def _private(self, z: int) -> list[int]:
        """The predecessors of ``z`` whose every other successor reaches ``path[s − 1]``."""
        layer_of, s = self.data.layer_of, self.s
        private = []
        for w in self.pred[z]:
            successors = self.data.succ[w]
            self.scanned += len(successors)
            if all(layer_of[v] < s for v in successors if v != z):
                private.append(w)
        return private


def segment_bound(path: Sequence[int], succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                  rank: Sequence[int], order: Sequence[int], p_acc: Sequence[float | None],
                  p_cpu: Sequence[float | None], memory: Sequence[float], cost: Sequence[float], capacity: float,
                  segments: int, budget: Budget | None = None, classes: Sequence[Sequence[int]] = (),
                  rounding: float = 0.0) -> float:
    """``min_j B[j][ℓ]`` of the module docstring for ``path`` (node positions in path order) in the
    graph ``succ``/``pred`` (``order``: the node positions in a topological order, ``rank``: each
    node's place in it); per node position its fastest accelerator time and CPU time (``None``:
    unsupported there), memory and transfer cost ``c``; ``capacity`` is the largest accelerator memory and ``segments`` the most
    accelerator segments (``q·A``); ``classes`` the colour classes (node positions) that go whole to
    one call (give them only with one call per accelerator); ``rounding`` as :func:`interval_runs`
    takes it. ``inf`` when no partition exists;
    :class:`~placement.errors.LimitExceededError` when ``budget`` runs out."""
    budget = budget or Budget()
    data = PathData(path, succ, pred, rank, order, p_acc, cost, classes)

    def cpu_runs(i: int) -> tuple[list[int], list[float]]:
        time = p_cpu[path[i]]
        return ([], []) if time is None else ([i + 1], [time])

    found = least_sum(len(path), segments,
                      lambda s: interval_runs(data, s, pred, p_acc, memory, cost, capacity, budget, rounding),
                      cpu_runs, budget)
    return math.inf if found is None else found.total


def heavy_paths(problem: Instance, weights: Sequence[Sequence[float]]) -> list[list[int]]:
    """For each node weighting in ``weights`` (a value per node position), a longest source-to-sink
    path (node positions, in path order); repeated paths are given once."""
    succ = problem.successors()
    order = problem.topological_positions()
    paths: list[list[int]] = []
    for weight in weights:
        best = [0.0] * len(order)
        nxt = [-1] * len(order)
        for v in reversed(order):       # longest path starting at v
            tail = max(succ[v], key=best.__getitem__, default=-1)
            best[v] = weight[v] + (best[tail] if tail >= 0 else 0.0)
            nxt[v] = tail
        if not order:
            continue
        v = max(order, key=best.__getitem__)
        path = []
        while v >= 0:
            path.append(v)
            v = nxt[v]
        if path not in paths:
            paths.append(path)
    return paths


def path_weights(fastest: Sequence[float], memory: Sequence[float]) -> list[list[float]]:
    """The weightings of the module docstring: cheapest time, memory, and both normalised and added."""
    total_time = math.fsum(fastest) or 1.0
    total_memory = math.fsum(memory) or 1.0
    return [list(fastest), list(memory), [p / total_time + m / total_memory for p, m in zip(fastest, memory)]]


def path_bound(problem: Instance, p_acc: Sequence[float | None], p_cpu: Sequence[float | None],
               memory: Sequence[float], cost: Sequence[float], capacity: float, segments: int,
               calls: int, joins: int = MAX_JOINS) -> float:
    """The largest :func:`segment_bound` over the :func:`heavy_paths` of ``problem``'s graph, with the
    data given per node position (in any consistent units), ``segments`` accelerator segments and
    ``problem``'s colour classes where ``calls`` (per accelerator) is 1; the paths whose DP would outrun one
    shared :class:`~placement.problem.sequential.Budget` (long segments where memory does not bind)
    give no bound (0); ``joins`` is that budget's size. The bound is computed on
    :func:`~placement.problem.canonical.canonical`'s listing of the graph, so it does not depend on how
    the instance lists its nodes and edges (the paths, the ties among them and the nodes each off-path
    node is counted through follow the listing)."""
    from placement.problem.canonical import canonical

    view = canonical(problem)
    if view is not problem:
        at = [problem.index_of(node.id) for node in view.nodes]
        p_acc, p_cpu, memory, cost = ([values[v] for v in at] for values in (p_acc, p_cpu, memory, cost))
        problem = view
    cheapest = [min((p for p in (a, c) if p is not None), default=0.0) for a, c in zip(p_acc, p_cpu)]
    succ, pred = problem.successors(), problem.predecessors()
    rank, order = problem.topological_rank(), problem.topological_positions()
    classes = problem.colour_classes() if calls == 1 else []
    budget = Budget(joins)
    rounding = 0.0 if sums_exactly([p for p in p_acc if p is not None] + list(cost)) else ROUNDING
    best = 0.0
    for path in heavy_paths(problem, path_weights(cheapest, memory)):
        try:
            best = max(best, segment_bound(path, succ, pred, rank, order, p_acc, p_cpu, memory, cost, capacity,
                                           segments, budget, classes, rounding))
        except LimitExceededError:
            break
    return best


def latency_path_bound(problem: Instance, calls: int = 1, joins: int = MAX_JOINS) -> float:
    """:func:`path_bound` in the instance's units, for plans with at most ``calls`` calls per
    accelerator (the types that pay communication; the others are the CPUs); a node's time is its
    fastest on the accelerator types (CPU types) that support it and have room for it. ``joins``
    caps the DP's work (paths past it give no bound)."""
    types = problem.device_types
    acc = [t for t, dt in enumerate(types) if dt.pays_comm and dt.count > 0]
    cpu = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    nodes = problem.nodes

    def fastest(i: int, kinds: list[int]) -> float | None:
        times = [nodes[i].times[t] for t in kinds
                 if nodes[i].times[t] is not None and nodes[i].memory <= types[t].memory]
        return min(times) if times else None  # type: ignore[type-var]

    return path_bound(problem, [fastest(i, acc) for i in range(len(nodes))],
                      [fastest(i, cpu) for i in range(len(nodes))], [v.memory for v in nodes],
                      [v.out_cost for v in nodes], max((types[t].memory for t in acc), default=0.0),
                      calls * sum(types[t].count for t in acc), calls, joins)
