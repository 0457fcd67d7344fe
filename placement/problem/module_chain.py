"""Single-sample latency along the graph's chain of articulation nodes: a lower bound, and plans.

Model
-----
The latency model of DESIGN.md §2 (calls of contiguous node sets on accelerators, CPU nodes that
run as soon as their inputs are ready, without limit), with a node's accelerator time its fastest
on the accelerator types that support it and have room for it, and the memory bound the largest
accelerator's (as :mod:`placement.problem.path_bound`). The graph gets a virtual source before
its sources and a virtual sink after its sinks (CPU time 0, no accelerator, nothing to send).

*Articulation nodes.* In a topological order, a node over which no edge jumps lies on every path
from the source to the sink; these nodes ``a_0, …, a_m`` form a chain, and the nodes between
``a_{k−1}`` and ``a_k`` a *module* ``M_k``: each descends from ``a_{k−1}`` and leads to ``a_k``. A
module's *branches* are the weakly connected parts of its nodes; a branch's *paths* run from a
node that ``a_{k−1}`` feeds to one that feeds ``a_k``; an edge ``a_{k−1} → a_k`` is a branch with
one empty path.

*Calls and modules.* A call without an articulation node lies inside one module (a path that
leaves it through an articulation node does not come back). A call ``C`` holding ``a_{k−1}`` but not
``a_k`` meets ``M_k`` in a *head* closed under predecessors within the module (a node of ``C`` whose
predecessor is outside would be reached from ``a_{k−1}`` through that predecessor), so it meets
every path in a prefix; a call holding ``a_k`` but not ``a_{k−1}`` meets it in a *tail*, a suffix
of every path; a call holding both holds the whole module. The other nodes of a path, its
*middle*, run on CPUs or in calls inside the module, and a call meets the path in one segment,
which it receives (``c`` of the node before it), runs and sends (``c`` of its last node).

*The bound.* A DP along the chain. State after ``a_k``: ``a_k`` finished on a CPU at ``τ``, or
``a_k`` is in a call still open: its start plus what it has received and run so far (``α``) and
its memory. From one state to the next, the module either lies whole in the open call, or:

* the open call closes in the module: its end is ``α`` plus, per branch, the head's time and what
  it sends (``c`` of the head's last node, on the main path of the branch), plus ``c(a_{k−1})``
  once when some branch has no head; the head's memory counts against the call's;
* every middle node then finishes no earlier than the end of the closed call (or ``τ``) plus the
  least finishing time of its path's middle: a DP over the path with CPU nodes and calls of
  consecutive nodes within memory, each lasting what it receives, runs and sends;
* ``a_k`` runs on a CPU after the latest of the branches, or starts a call then: that call receives
  per branch what feeds its tail (``c(a_{k−1})`` once for the branches it holds whole) and runs the
  tails and ``a_k``; the tails' memory counts against it.

A branch that is a chain has its prefixes as heads and its suffixes as tails. A branch that is no
chain, where it has at most :data:`MAX_SETS` sets closed under predecessors, has those as heads
and their complements (closed under successors) as tails, each pair charged exactly
(its nodes' times, and ``c`` of every node that sends across the head's or tail's border); its
latest finishing time is the latest over its paths of each path's middle (the path's nodes outside
head and tail). With more sets, only its *main path* (its longest) is charged in the sums, and its
other paths take part in the latest finishing time only, each with its own best head and tail.
Branches are disjoint, so no node is charged twice. The least value of "sums plus latest branch"
is found exactly by trying every branch time as the latest. Not used: colour classes, the number
of accelerators and calls per accelerator, calls shared by several branches (which only add up),
each accelerator type's own times and memory. Every plan is therefore at least the DP's value; it
is computed in floating point and, where the sums of the times may round
(:func:`placement.problem.units.sums_exactly`), lowered by what they may lose.

*The counted bound* (``calls=q``: at most ``q`` calls per accelerator, so at most ``q·A`` calls in
all, ``A`` the accelerators of every type). The same DP counts calls: one for each call that holds
an articulation node (when it opens), and one for each segment of a main path's middle, except a
segment that is a *guest*. A call that holds no articulation node lies in one module and meets each
main path in at most one segment; where it meets several, the one of largest charge (``c`` of the
node before it, its run and ``c`` of its last node) is counted and the others are guests. The call
then lasts at least the sum of those charges, less ``c(a_{k−1})`` where two of them receive it, so
a guest finishes no earlier than its input plus twice its own charge (less ``c(a_{k−1})`` where it
starts the path). The path DP offers every segment as a call of its own (counted, its charge) or as
a guest (not counted, twice its charge as above). Calls meeting no main path, and the memory a
guest adds to its call, are left out. Every plan of at most ``q·A`` calls maps to a choice of the
DP with at most ``q·A`` counted calls and no larger value, so the counted DP's least value over at
most ``q·A`` counted calls is a lower bound too, and never below the bound without counts.

*Plans.* The same DP, in which a branch that is no chain runs its main path's middle by that
path's DP, or on the CPUs, and its other middle nodes on the CPUs (scheduled exactly, where the
calls stay contiguous), and in which the calls are counted, at most one per accelerator, gives a
plan (its calls and CPU nodes) whose latency is the DP's value: the least over plans of that shape.
It knows nothing of colour classes. :mod:`placement.solvers.baselines.latency_modules` turns it into
a plan and leaves the verdict to the evaluator.

Cost: per module, each branch's options (head and tail, each with a path DP) and a merge of their
Pareto sets of (time, head memory, tail memory, and in plans calls) per candidate latest branch
time; :data:`MAX_WORK` steps at most.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field

from placement.problem.chain_bound import ideal_bitsets
from placement.problem.instance import Instance
from placement.problem.memory_fit import LENIENT
from placement.problem.path_middle import long_middle, middle_steps
from placement.problem.units import sums_exactly

#: a branch's paths tried for its latest finishing time (beyond it, the others are left out: the
#: bound only weakens)
MAX_PATHS = 32
#: the steps (a path DP's call tried, a pair of partial choices merged) the DP takes at most: a few
#: seconds; beyond it there is no bound
MAX_WORK = 5_000_000
#: a branch that is not a chain gets heads and tails as sets where it has at most this many sets
#: closed under predecessors (else, in the bound, its main path's prefixes and suffixes; in plans,
#: no head and tail or the whole branch as either)
MAX_SETS = 256
#: per-operation rounding allowance where the sums are not exact: twice one operation's relative error
ROUNDING = 2.0 ** -52
INF = math.inf
#: the reason given where the caller's deadline passed
OUT_OF_TIME = "the time limit ran out"


@dataclass(frozen=True)
class ModuleChain:
    """The DP's value (``None`` with the reason, ``why``, where it gives none), the number of
    modules, and in plan mode the plan: the node positions of each call and of the CPU nodes."""

    value: float | None
    why: str = ""
    modules: int = 0
    calls: tuple[tuple[int, ...], ...] = ()
    cpu: tuple[int, ...] = ()


class _TooMuchWork(Exception):
    """The DP's work limit or deadline passed (its message says which)."""


@dataclass
class _Data:
    p_acc: list[float | None]       # by extended position; None: no accelerator
    p_cpu: list[float | None]       # None: no CPU
    memory: list[float]
    cost: list[float]
    room: float                     # what a call may hold
    succ: list[list[int]]
    pred: list[list[int]]
    accelerators: int = 0           # every accelerator type's devices
    counted: bool = False           # calls counted, at most ``limit`` (plans, and the counted bound)
    limit: float = INF
    guests: bool = False            # the counted bound: a middle segment may share a call (see _middle)
    work_left: int = MAX_WORK
    deadline: float = math.inf      # a time.perf_counter() value

    def spend(self, steps: int) -> None:
        """Count ``steps`` of work; :class:`_TooMuchWork` past the work limit or the deadline."""
        self.work_left -= steps
        if self.work_left < 0:
            raise _TooMuchWork("steps")
        if time.perf_counter() > self.deadline:
            raise _TooMuchWork("time")


@dataclass
class _Branch:
    paths: list[list[int]]          # main path first
    nodes: list[int]
    chain: bool


@dataclass
class _Option:
    r: float                        # latest finish of the branch's middle after the open call's end
    add: float                      # charged to the closing and opening calls
    head_memory: float
    tail_memory: float
    choice: tuple = field(default=())   # (h, t, middle calls) on the main path, for plans
    calls: int = 0                      # middle calls (plan mode)


def _data(problem: Instance) -> tuple[_Data, list[int]] | str:
    types = problem.device_types
    acc = [t for t, dt in enumerate(types) if dt.pays_comm and dt.count > 0]
    cpu = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    nodes = problem.nodes
    n = len(nodes)
    if not acc and not cpu:
        return "no devices"

    def fastest(i: int, kinds: list[int]) -> float | None:
        times = [nodes[i].times[t] for t in kinds
                 if nodes[i].times[t] is not None and nodes[i].memory <= types[t].memory]
        return min(times) if times else None  # type: ignore[type-var]

    succ = [list(s) for s in problem.successors()] + [[], []]
    pred = [list(p) for p in problem.predecessors()] + [[], []]
    source, sink = n, n + 1
    for v in range(n):
        if not pred[v]:
            succ[source].append(v)
            pred[v].append(source)
        if not succ[v]:
            succ[v].append(sink)
            pred[sink].append(v)
    order = [source] + problem.topological_positions() + [sink]
    capacity = max((types[t].memory for t in acc), default=0.0)
    memory = [v.memory for v in nodes]
    if sum(memory) <= capacity:     # no call can run out of memory: the DP leaves it out (fewer options)
        memory = [0.0] * n
    # a node that feeds only the virtual sink sends nothing
    sends = [v.out_cost if succ[i] != [sink] else 0.0 for i, v in enumerate(nodes)]
    d = _Data([fastest(i, acc) for i in range(n)] + [None, None], [fastest(i, cpu) for i in range(n)] + [0.0, 0.0],
              memory + [0.0, 0.0], sends + [0.0, 0.0], capacity * (1 + LENIENT), succ, pred,
              sum(types[t].count for t in acc))
    return d, order


def _articulations(order: list[int], succ: list[list[int]]) -> list[int]:
    place = {v: i for i, v in enumerate(order)}
    found, reach = [], 0
    for i, v in enumerate(order):
        if reach <= i:
            found.append(v)
        reach = max([reach] + [place[w] for w in succ[v]])
    return found


def _branches(d: _Data, members: list[int], a: int, b: int, rank: dict[int, int]) -> list[_Branch]:
    inside = set(members)
    parent = {v: v for v in members}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for v in members:
        for u in d.pred[v]:
            if u in inside:
                parent[find(u)] = find(v)
    groups: dict[int, list[int]] = {}
    for v in members:
        groups.setdefault(find(v), []).append(v)
    out = []
    for nodes in groups.values():
        nodes.sort(key=rank.__getitem__)
        own = set(nodes)
        # a chain: one successor and one predecessor within, entered from a at its first node only and
        # left to b at its last only (an earlier node feeding b sends across any call boundary after it)
        chain = all(sum(w in own for w in d.succ[v]) <= 1 and sum(u in own for u in d.pred[v]) <= 1
                    for v in nodes) and sum(1 for v in nodes if a in d.pred[v]) == 1 \
            and sum(1 for v in nodes if b in d.succ[v]) == 1
        out.append(_Branch(_paths(d, nodes, own, a, b), nodes, chain))
    if b in d.succ[a]:
        out.append(_Branch([[]], [], True))
    return out


def _paths(d: _Data, nodes: list[int], own: set[int], a: int, b: int) -> list[list[int]]:
    """The branch's paths from a node ``a`` feeds to one that feeds ``b``: the longest (most nodes)
    first, then others up to :data:`MAX_PATHS`."""
    longest: dict[int, tuple[int, int | None]] = {}
    for v in reversed(nodes):
        nxt = [(longest[w][0], w) for w in d.succ[v] if w in own]
        best = max(nxt) if nxt else None
        longest[v] = (1 + best[0], best[1]) if best else (1, None)
    starts = [v for v in nodes if a in d.pred[v]]
    first = max(starts, key=lambda v: longest[v][0])
    main, v = [], first
    while v is not None:
        main.append(v)
        v = longest[v][1]
    paths = [main]
    stack: list[tuple[int, list[int]]] = [(s, [s]) for s in starts]
    while stack and len(paths) < MAX_PATHS:
        v, path = stack.pop()
        nxt = [w for w in d.succ[v] if w in own]
        if b in d.succ[v] and path != main:
            paths.append(path)
        stack.extend((w, path + [w]) for w in nxt)
    return paths


def _middle(d: _Data, path: list[int], h: int, entry: int, cache: dict | None = None,
            counted: bool = False) -> list[dict[int, tuple[float, tuple]]]:
    """For each end ``j`` (``h ≤ j ≤ len(path)``): the least finishing time of ``path[h:j]`` run from
    time 0 (CPU nodes one after another, or calls of consecutive nodes that receive ``c`` of the node
    before and send ``c`` of their last), with the calls chosen (pairs of path indices), by the number
    of calls where ``counted`` (at most the accelerators), else under 0. A path whose calls would take
    this loop more than :data:`MAX_WORK` steps goes to :func:`~placement.problem.path_middle.long_middle`
    (the same DP by sliding minima)."""
    key = (id(path), h, counted)
    if cache is not None and key in cache:
        return cache[key]
    L = len(path)
    if middle_steps(d, path, h) * (min(d.limit, L) + 1 if counted else 1) > MAX_WORK:
        best = long_middle(d, path, h, entry, counted)    # past the steps the loop below may take
        if cache is not None:
            cache[key] = best
        return best
    best: list[dict[int, tuple[float, tuple]]] = [{0: (0.0, ())}]
    for j in range(h + 1, L + 1):
        v = path[j - 1]
        cand: dict[int, tuple[float, tuple]] = {}
        if d.p_cpu[v] is not None:
            cand = {s: (t0 + d.p_cpu[v], c0) for s, (t0, c0) in best[-1].items()}   # type: ignore[operator]
        memory = run = 0.0
        for i in range(j, h, -1):           # a call holding path[i-1 .. j-1]
            x = path[i - 1]
            if d.p_acc[x] is None:
                break
            memory += d.memory[x]
            run += d.p_acc[x]   # type: ignore[operator]
            if memory > d.room:
                break
            before = entry if i == h + 1 else path[i - 2]
            fee = d.cost[before] + run + d.cost[path[j - 1]]
            for s, (t0, c0) in best[i - 1 - h].items():
                s2 = s + 1 if counted else 0
                if s2 <= d.limit or not counted:
                    if t0 + fee < cand.get(s2, (INF,))[0]:
                        cand[s2] = (t0 + fee, c0 + ((i - 1, j),))
                if counted and d.guests:    # in a call with a longer segment of another branch
                    shared = d.cost[before] if before == entry and h == 0 else 0.0
                    if t0 + 2 * fee - shared < cand.get(s, (INF,))[0]:
                        cand[s] = (t0 + 2 * fee - shared, c0)
            d.work_left -= len(best[i - 1 - h])
        best.append(cand)
        d.spend(1)
    if cache is not None:
        cache[key] = best
    return best


def _least(found: dict[int, tuple[float, tuple]]) -> float:
    """The least time over the numbers of calls."""
    return min((t for t, _c in found.values()), default=INF)


def _pareto(points: list[tuple]) -> list[tuple]:
    """Points ``(value, head memory, tail memory, …)`` not dominated in the first three: taken by
    value, each against the staircase of the memory pairs kept so far (head memory up, tail memory
    down), where the kept pair of largest head memory not above the point's has the least tail memory."""
    points.sort(key=lambda p: (p[0], p[1], p[2]))
    kept: list[tuple] = []
    heads: list[float] = []
    tails: list[float] = []
    for p in points:
        i = bisect.bisect_right(heads, p[1])
        if i and tails[i - 1] <= p[2]:
            continue
        kept.append(p)
        j = i
        while j < len(heads) and tails[j] >= p[2]:
            j += 1
        heads[i:j] = [p[1]]
        tails[i:j] = [p[2]]
    return kept


def _options(d: _Data, br: _Branch, a: int, b: int, entry: str, exit_: str, head_any: bool, tail_full: bool,
             exact: bool, cache: dict) -> list[_Option]:
    """A branch's choices of head and tail on its main path, with its latest middle finish."""
    main = br.paths[0]
    L = len(main)
    opts: list[_Option] = []
    if not br.chain:                           # heads and tails as sets, where they are few
        found = _set_options(d, br, a, b, entry, exit_, head_any, tail_full, exact, cache)
        if found is not None or exact:
            return found or []
    heads: list[float] = [0.0]    # the sums of the heads and of the tails by length, summed as the nodes come
    tails: dict[int, float] = {}
    for h, t, head_memory, tail_memory in _heads_and_tails(d, main, entry, exit_):
        if h == 0 and not head_any or t == L - h and h == 0 and exit_ == "call" and not tail_full:
            continue
        d.spend(1)   # a pair of a head and a tail: up to L²/2 on a path of L nodes that memory does not cut short
        ends = _middle(d, main, h, main[h - 1] if h else a, cache, counted=d.counted)[L - t - h]
        if not ends:
            continue
        add = 0.0
        while len(heads) <= h:
            heads.append(heads[-1] + d.p_acc[main[len(heads) - 1]])   # type: ignore[operator]
        if h:
            add += heads[h] + d.cost[main[h - 1]]
        if exit_ == "call":
            if t:
                if t not in tails:
                    tails[t] = sum(d.p_acc[v] for v in main[L - t:])   # type: ignore[misc]
                add += tails[t]
                if L - t - 1 >= 0:
                    add += d.cost[main[L - t - 1]]
            elif L:
                add += d.cost[main[-1]]
        opts += [_Option(r, add, head_memory, tail_memory, (h, t, calls), n) for n, (r, calls) in ends.items()]
    if not opts:
        return []
    other = 0.0
    for path in br.paths[1:]:
        key = (id(path), entry, exit_)
        if key not in cache:
            cache[key] = _least_middle(d, path, a, entry, exit_, cache)
        other = max(other, cache[key])
    if other:
        opts = [_Option(max(o.r, other), o.add, o.head_memory, o.tail_memory, o.choice, o.calls) for o in opts]
    return opts


def _least_middle(d: _Data, path: list[int], a: int, entry: str, exit_: str, cache: dict) -> float:
    """A path's least middle finish over every head and tail it may have."""
    L = len(path)
    return min((_least(_middle(d, path, h, path[h - 1] if h else a, cache)[L - t - h])
                for h, t, _hm, _tm in _heads_and_tails(d, path, entry, exit_)), default=INF)


def _heads_and_tails(d: _Data, path: list[int], entry: str, exit_: str):
    """Every head length ``h`` (a call before: ``entry`` ``call``) and tail length ``t`` (a call after)
    of ``path`` whose nodes run on an accelerator and fit its memory, with the two memories."""
    L = len(path)
    head_memory = 0.0
    for h in range(L + 1) if entry == "call" else range(1):
        if h:
            head_memory += d.memory[path[h - 1]]
            if d.p_acc[path[h - 1]] is None or head_memory > d.room:
                return
        tail_memory = 0.0
        for t in range(L - h + 1) if exit_ == "call" else range(1):
            if t:
                tail_memory += d.memory[path[L - t]]
                if d.p_acc[path[L - t]] is None or tail_memory > d.room:
                    break
            yield h, t, head_memory, tail_memory


def _down_sets(d: _Data, br: _Branch) -> list[frozenset[int]] | None:
    """The branch's sets closed under predecessors within it (``None`` past :data:`MAX_SETS`)."""
    place = {v: i for i, v in enumerate(br.nodes)}
    found = ideal_bitsets(len(br.nodes), [{place[w] for w in d.succ[v] if w in place} for v in br.nodes], MAX_SETS)
    if found is None:
        return None
    return [frozenset(v for i, v in enumerate(br.nodes) if bits >> i & 1) for bits in found]


def _set_options(d: _Data, br: _Branch, a: int, b: int, entry: str, exit_: str, head_any: bool, tail_full: bool,
                 exact: bool, cache: dict) -> list[_Option] | None:
    """A branch's choices of a head ``H`` and a tail ``T``, sets closed under predecessors and
    successors within it: what they add to the closing and opening calls exactly, and the latest
    finish of the rest: in plan mode on the CPUs, else each path's middle DP (``None`` past
    :data:`MAX_SETS` sets)."""
    key = ("sets", id(br))
    if key not in cache:
        cache[key] = _down_sets(d, br)
    downs = cache[key]
    own = frozenset(br.nodes)
    if downs is None:
        if not exact:
            return None
        downs = [frozenset(), own]              # plans: the branch whole on the CPUs, in the head or in the tail
    entries = {v for v in br.nodes if a in d.pred[v]}
    opts: list[_Option] = []
    for done in downs:                    # done = H ∪ middle; T = the rest
        tail = own - done
        if tail and (exit_ == "cpu" or any(d.p_acc[v] is None for v in tail)):
            continue
        if (entries & tail) and not tail_full:
            continue
        tail_memory = sum(d.memory[v] for v in tail)
        if tail_memory > d.room:
            continue
        for head in downs:
            if not head <= done or (head and entry == "cpu"):
                continue
            if not entries <= head and not head_any:
                continue
            if any(d.p_acc[v] is None for v in head):
                continue
            head_memory = sum(d.memory[v] for v in head)
            if head_memory > d.room:
                continue
            add = sum(d.p_acc[v] for v in head)   # type: ignore[misc]
            add += sum(d.cost[v] for v in head if any(w not in head for w in d.succ[v]))
            if exit_ == "call":
                add += sum(d.p_acc[v] for v in tail)   # type: ignore[misc]
                add += sum(d.cost[v] for v in own - tail if any(w in tail or w == b for w in d.succ[v]))
            middle = done - head
            if not exact:
                opts += [_Option(r, add, head_memory, tail_memory, ("sets", head, tail, ()), n)
                         for n, r in _paths_finish(d, br, a, head, tail, cache).items()]
                continue
            for r, calls in _middle_plans(d, br, a, head, tail, middle, cache):
                opts.append(_Option(r, add, head_memory, tail_memory, ("sets", head, tail, calls), len(calls)))
    return opts


def _middle_plans(d: _Data, br: _Branch, a: int, head: frozenset[int], tail: frozenset[int], middle: frozenset[int],
                  cache: dict) -> list[tuple[float, tuple[frozenset[int], ...]]]:
    """Plans of a branch's middle for plan mode, with their latest finish (its inputs ready at 0): on
    the CPUs, and each of the main path's middle DP (by number of calls) with the other nodes on the
    CPUs, where its calls are contiguous."""
    found = [(_schedule(d, br, middle, ()), ())]
    main = br.paths[0]
    h = sum(v in head for v in main)
    t = sum(v in tail for v in main)
    for _time, segments in _middle(d, main, h, main[h - 1] if h else a, cache, counted=True)[len(main) - t - h].values():
        if segments:
            calls = tuple(frozenset(main[i:j]) for i, j in segments)
            found.append((_schedule(d, br, middle, calls), calls))
    return [(r, calls) for r, calls in found if r < INF]


def _schedule(d: _Data, br: _Branch, middle: frozenset[int], calls: tuple[frozenset[int], ...]) -> float:
    """The latest finish of ``middle`` with ``calls`` on accelerators and its other nodes on the CPUs,
    every input from outside it ready at 0 (latency model); ``inf`` where a call is not contiguous or
    a node cannot run where it is put."""
    element = {v: ("call", k) for k, call in enumerate(calls) for v in call}
    for v in middle:
        if v not in element:
            if d.p_cpu[v] is None:
                return INF
            element[v] = ("cpu", v)
    # each call: what it receives and sends
    duration: dict[tuple, float] = {}
    for k, call in enumerate(calls):
        ins = {u for v in call for u in d.pred[v] if u not in call}
        outs = [v for v in call if any(w not in call for w in d.succ[v])]
        duration[("call", k)] = (sum(d.cost[u] for u in ins) + sum(d.p_acc[v] for v in call)   # type: ignore[misc]
                                 + sum(d.cost[v] for v in outs))
    for v in middle:
        if element[v][0] == "cpu":
            duration[element[v]] = d.p_cpu[v]   # type: ignore[assignment]
    # the elements in dependency order (a cycle: some call is not contiguous)
    after: dict[tuple, set[tuple]] = {e: set() for e in duration}
    waits: dict[tuple, int] = {e: 0 for e in duration}
    for v in middle:
        for w in d.succ[v]:
            if w in middle and element[w] != element[v] and element[w] not in after[element[v]]:
                after[element[v]].add(element[w])
                waits[element[w]] += 1
    ready = [e for e, n in waits.items() if n == 0]
    finish: dict[tuple, float] = {}
    start = {e: 0.0 for e in duration}
    while ready:
        e = ready.pop()
        finish[e] = start[e] + duration[e]
        for f in after[e]:
            start[f] = max(start[f], finish[e])
            waits[f] -= 1
            if not waits[f]:
                ready.append(f)
    if len(finish) < len(duration):
        return INF
    return max(finish.values(), default=0.0)


def _paths_finish(d: _Data, br: _Branch, a: int, head: frozenset[int], tail: frozenset[int],
                  cache: dict) -> dict[int, float]:
    """The latest, over the branch's paths, of the least finish of the path's middle (its nodes
    outside ``head`` and ``tail``: a prefix and a suffix of it), by the number of calls on the main
    path where calls are counted (a call meets a path in one segment; the other paths' calls are not
    counted), else under 0."""
    def ends(path: list[int], counted: bool) -> dict:
        """The path's middle: its least finishes by the calls counted (under 0 where not counted)."""
        h = sum(v in head for v in path)
        t = sum(v in tail for v in path)
        return _middle(d, path, h, path[h - 1] if h else a, cache, counted=counted)[len(path) - t - h]

    latest = max((_least(ends(path, False)) for path in br.paths[1:]), default=0.0)
    return {n: max(r, latest) for n, (r, _calls) in ends(br.paths[0], d.counted).items() if max(r, latest) < INF}


def _prune(opts: list[_Option]) -> list[_Option]:
    """The options no other beats on every count: finish, sums, head memory, tail memory and calls."""
    opts.sort(key=lambda o: (o.r, o.add, o.head_memory, o.tail_memory, o.calls))
    kept: list[_Option] = []
    for o in opts:
        if not any(q.add <= o.add and q.head_memory <= o.head_memory and q.tail_memory <= o.tail_memory
                   and q.calls <= o.calls for q in kept):
            kept.append(o)
    return kept


def _module(d: _Data, branches: list[_Branch], a: int, b: int, entry: str, exit_: str, exact: bool,
            cache: dict) -> list[tuple]:
    """Pareto set, per number of middle calls (plan mode; else 0), of ``(value, head memory, tail
    memory, calls, choices)``: the time from the open call's end (or ``a``'s finish) to the start of
    what holds the next articulation node, plus what the closing and opening calls add."""
    found: list[tuple] = []
    for head_any in (False, True):
        if entry == "cpu" and not head_any:
            continue
        for tail_full in (False, True):
            if exit_ == "cpu" and tail_full:
                continue
            extra = (d.cost[a] if entry == "call" and head_any else 0.0) + (
                d.cost[a] if exit_ == "call" and tail_full else 0.0)
            options = [_prune(_options(d, br, a, b, entry, exit_, head_any, tail_full, exact, cache))
                       for br in branches]
            if any(not o for o in options):
                continue
            for latest in sorted({o.r for opts in options for o in opts}):
                # each point's choices, one per branch, as a linked list (prev, choice) built in
                # constant time (a tuple copied per merge made modules of many branches quadratic)
                merged: list[tuple] = [(0.0, 0.0, 0.0, 0, None)]
                for opts in options:
                    # a step per four options filtered (a step of the merge below costs about as much): one
                    # filter per latest finish, as many as the options where the heads and tails are many
                    d.spend(len(opts) // 4)
                    fitting = _by_calls([(o.add, o.head_memory, o.tail_memory, o.calls, o.choice)
                                         for o in opts if o.r <= latest])
                    if not fitting:
                        merged = []
                        break
                    d.spend(len(merged) * len(fitting))
                    merged = _by_calls([(v1 + v2, h1 + h2, t1 + t2, n1 + n2,
                                         (c1, c2))
                                        for v1, h1, t1, n1, c1 in merged for v2, h2, t2, n2, c2 in fitting
                                        if h1 + h2 <= d.room and t1 + t2 <= d.room and n1 + n2 <= d.limit])
                found += [(latest + extra + v, hm, tm, n, (head_any, tail_full, choices))
                          for v, hm, tm, n, choices in merged]
    return _by_calls(found)


def _by_calls(points: list[tuple]) -> list[tuple]:
    """:func:`_pareto` among the points ``(value, head memory, tail memory, calls, …)`` of each number
    of calls."""
    groups: dict[int, list[tuple]] = {}
    for p in points:
        groups.setdefault(p[3], []).append(p)
    return [q for n in sorted(groups) for q in _pareto(groups[n])]


def module_chain(problem: Instance, plan: bool = False, max_work: int | None = MAX_WORK,
                 deadline: float | None = None, calls: int | None = None) -> ModuleChain:
    """The lower bound of the module docstring on ``problem``'s single-sample latency (any number of
    calls per accelerator; with ``calls``, the counted bound for at most that many calls per
    accelerator), or with ``plan`` the DP's plan, of at most one call per accelerator, and its value;
    none past ``max_work`` steps (``None``: no cap) or ``deadline`` (a ``time.perf_counter()`` value)."""
    if not problem.nodes:
        return ModuleChain(0.0)
    got = _data(problem)
    if isinstance(got, str):
        return ModuleChain(None, why=got)
    d, order = got
    if plan:
        d.counted, d.limit = True, d.accelerators
    elif calls is not None:
        d.counted, d.limit, d.guests = True, calls * d.accelerators, True
    d.work_left = math.inf if max_work is None else max_work   # type: ignore[assignment]
    if deadline is not None:
        d.deadline = deadline
    try:
        return _run(problem, d, order, plan)
    except _TooMuchWork as exc:
        return ModuleChain(None, why=f"more than {max_work:,} steps" if str(exc) == "steps" else OUT_OF_TIME)


def _run(problem: Instance, d: _Data, order: list[int], plan: bool) -> ModuleChain:
    """:func:`module_chain` on prepared data."""
    rank = {v: i for i, v in enumerate(order)}
    arts = _articulations(order, d.succ)
    between: dict[int, list[int]] = {}
    k = 0
    for v in order:
        if v == arts[k]:
            k += 1
        else:
            between.setdefault(k, []).append(v)
    # states by the calls made so far (plan mode; else 0): cpu[k][n] = (τ, back); call[k] = Pareto of
    # (α, memory, 0, n, back) per n
    opening = 1 if d.counted else 0
    limit = d.limit
    cpu_state: list[dict[int, tuple[float, tuple]]] = [{0: (0.0, ())}]
    call_state: list[list[tuple]] = [[]]
    branches_of: list[list[_Branch]] = [[]]     # each module's branches, for the plan's rebuild
    for k in range(1, len(arts)):
        a, b = arts[k - 1], arts[k]
        members = between.get(k, [])
        branches = _branches(d, members, a, b, rank)
        branches_of.append(branches)
        cache: dict = {}
        tables: dict[tuple[str, str], list[tuple]] = {}

        def table(entry: str, exit_: str, a: int = a, b: int = b, branches: list[_Branch] = branches,
                  cache: dict = cache) -> list[tuple]:
            """The module's table for ``a`` on a CPU or in a call, and ``b`` the same; only those the
            states reach and ``b`` can take are built."""
            if (entry, exit_) not in tables:
                tables[(entry, exit_)] = _module(d, branches, a, b, entry, exit_, plan, cache)
            return tables[(entry, exit_)]

        new_cpu: dict[int, tuple[float, tuple]] = {}
        new_call: list[tuple] = []
        entries = [("cpu", tau, 0.0, n, ("cpu", k - 1, n)) for n, (tau, _back) in cpu_state[-1].items()]
        entries += [("call", st[0], st[1], st[3], ("call", k - 1, i)) for i, st in enumerate(call_state[-1])]
        for kind, base, used, n, back in entries:
            cap = d.room - used if kind == "call" else 0.0
            if d.p_cpu[b] is not None:
                for v, hm, _tm, m, choice in table(kind, "cpu"):
                    total = n + m
                    if hm <= cap and total <= limit and (
                            total not in new_cpu or base + v + d.p_cpu[b] < new_cpu[total][0]):
                        new_cpu[total] = (base + v + d.p_cpu[b], (back, "cpu", choice))
            if d.p_acc[b] is not None and d.memory[b] <= d.room:
                for v, hm, tm, m, choice in table(kind, "call"):
                    total = n + m + opening
                    if hm <= cap and tm + d.memory[b] <= d.room and total <= limit:
                        new_call.append((base + v + d.p_acc[b], tm + d.memory[b], 0.0, total,
                                         (back, "open", choice)))
        whole = all(d.p_acc[v] is not None for v in members + [b])
        if whole:
            run = sum(d.p_acc[v] for v in members + [b])   # type: ignore[misc]
            held = sum(d.memory[v] for v in members + [b])
            for i, (alpha, used, _z, n, _back) in enumerate(call_state[-1]):
                if used + held <= d.room:
                    new_call.append((alpha + run, used + held, 0.0, n, (("call", k - 1, i), "span", ())))
        cpu_state.append(new_cpu)
        call_state.append(_by_calls(new_call))
    ends = [(tau, ("cpu", len(arts) - 1, n)) for n, (tau, _back) in cpu_state[-1].items()] + [
        (st[0], ("call", len(arts) - 1, i)) for i, st in enumerate(call_state[-1])]
    if not ends:
        return ModuleChain(None, why="no plan of this shape", modules=len(arts) - 1)
    value, last = min(ends, key=lambda e: e[0])
    if not plan:
        terms = [x for x in d.p_acc + d.p_cpu + d.cost if x is not None]
        if not sums_exactly(terms):
            ops = 4 * len(order)
            value = max(0.0, value - value * ops * ROUNDING - ops * 2.0 ** -1074)
        return ModuleChain(value, modules=len(arts) - 1)
    calls, cpu = _rebuild(arts, between, branches_of, cpu_state, call_state, last, rank)
    n = len(problem.nodes)
    return ModuleChain(value, modules=len(arts) - 1,
                       calls=tuple(tuple(sorted((v for v in c if v < n), key=rank.__getitem__)) for c in calls if
                                   any(v < n for v in c)),
                       cpu=tuple(v for v in cpu if v < n))


def _rebuild(arts: list[int], between: dict[int, list[int]], branches_of: list[list[_Branch]], cpu_state: list,
             call_state: list, last: tuple, rank: dict[int, int]) -> tuple[list[list[int]], list[int]]:
    """The calls and CPU nodes of the plan the DP's back pointers describe, walking from the end;
    ``holder`` is the call holding the articulation node of the current state."""
    calls: list[list[int]] = []
    cpu: list[int] = []
    ref = last
    holder: list[int] | None = None
    if ref[0] == "call":
        holder = []
        calls.append(holder)
    k = len(arts) - 1
    while k > 0:
        state = cpu_state[k][ref[2]] if ref[0] == "cpu" else call_state[k][ref[2]]
        back, how, choice = state[-1]
        b = arts[k]
        members = between.get(k, [])
        if holder is None:
            cpu.append(b)
        else:
            holder.append(b)
        if how == "span":
            holder.extend(members)   # type: ignore[union-attr]
            ref, k = back, k - 1
            continue
        following: list[int] | None = None
        if back[0] == "call":
            following = []
            calls.append(following)
        _head_any, _tail_full, linked = choice
        choices: list = []
        while linked is not None:
            linked, last_choice = linked
            choices.append(last_choice)
        choices.reverse()
        for br, ch in zip(branches_of[k], choices):
            if ch[0] == "sets":
                _sets, head, tail, middle_calls = ch
                for call in middle_calls:
                    calls.append(sorted(call, key=rank.__getitem__))
                if head:
                    following.extend(v for v in br.nodes if v in head)   # type: ignore[union-attr]
                if tail:
                    holder.extend(v for v in br.nodes if v in tail)   # type: ignore[union-attr]
                placed_in_calls = set().union(*middle_calls)
                cpu.extend(v for v in br.nodes if v not in head and v not in tail and v not in placed_in_calls)
            else:
                h, t, middle = ch
                main = br.paths[0]
                L = len(main)
                if h:
                    following.extend(main[:h])   # type: ignore[union-attr]
                if t:
                    holder.extend(main[L - t:])   # type: ignore[union-attr]
                placed = set(main[:h]) | set(main[L - t:])
                for i, j in middle:
                    calls.append(main[i:j])
                    placed.update(main[i:j])
                cpu.extend(v for v in br.nodes if v not in placed)
        ref, k, holder = back, k - 1, following
    return calls, cpu
