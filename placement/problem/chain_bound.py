"""A lower bound on single-sample latency with one call per accelerator, from critical chains of ideals.

Model
-----
The latency model of DESIGN.md §2 with one call per accelerator (``q = 1``), one accelerator
type (``k`` devices, memory ``M``) and one CPU type. The *elements* of a plan are its calls and
its CPU nodes (each CPU node on its own). An element ``E`` starts at ``s(E)``, when the last node
it reads from outside finishes (0 if none), lasts ``d(E)`` (a call: ``Σ c(In) + Σ p_acc + Σ
c(Out)``; a CPU node: its CPU time) and ends at ``e(E) = s(E) + d(E)``; every node of ``E``
finishes then: ``f(v) = e(E)``. ``f`` never decreases along an edge.

*The critical chain.* Start from an element that ends last, at the latency ``T``; while the
element ``E`` has ``s(E) > 0``, step to the element of a node it reads that finishes at
``s(E)``. The elements found, ``E_1, …, E_r`` in time order, have ``e(E_{i−1}) = s(E_i)`` and
``s(E_1) = 0``, so ``T = Σ d(E_i)``. Keep those with ``d > 0`` and let ``A_i = {v : f(v) ≤
e(E_i)}`` (``A_0 = {v : f(v) = 0}``). Each ``A_i`` is an ideal (``f`` is monotone), ``A_r = V``,
and:

1. ``E_i ⊆ A_i ∖ A_{i−1}``, and ``B_i = A_{i−1} ∪ E_i`` is an ideal: a node outside ``E_i`` with
   a path into it reaches it through a node ``E_i`` reads, which finishes by ``s(E_i) =
   e(E_{i−1})``.
2. A node ``w ∈ A_i ∖ B_i`` that descends from ``E_i`` has ``e(E_i) ≤ f(w) ≤ e(E_i)``, so every
   element on its path from ``E_i`` lasts 0: ``w`` is in ``Z``, the nodes that take no time on
   some device (CPU time 0, or accelerator time 0). Every other node of ``A_i ∖ B_i`` is
   *incomparable* with ``E_i``: it runs beside the chain and costs it nothing.
3. ``A_0`` holds only nodes of ``Z``; the chain's calls are distinct calls, at most ``k``.

So ``T`` is at least the least sum, over chains of ideals ``∅ ⊆ A_0 ⊂ … ⊂ A_r = V`` with ``A_0 ⊆
Z`` and a step ``A_{i−1} → A_i`` through an ideal ``B_i = A_{i−1} ∪ E_i ⊆ A_i`` such that no node
of ``A_i ∖ B_i`` descends from ``E_i`` outside ``Z``, of ``d(E_i)``, with at most ``k`` of the
``E_i`` calls (memory within ``M``, supported on the accelerator) and the others CPU nodes.
That is the DP over ideals::

    L[0][A] = 0                                    for ideals A ⊆ Z
    L[a'][A] = min over I ⊂ B ⊆ A of  L[a][I] + d(B ∖ I)     (a' = a + 1 for a call, a for a CPU node)

over ideals ``I ⊂ B ⊆ A`` with ``B ∖ I`` a call or a CPU node and no node of ``A ∖ B`` descending
from ``B ∖ I`` outside ``Z``; the bound is ``min_a L[a][V]``. It is computed in exact arithmetic
on the instance's own times (integers of their finest binary unit), with a call's memory allowed
wherever the model's rule (:mod:`placement.problem.memory_fit`) may let it fit, and given as a
float: the exact sum where every floating-point sum of the times is exact
(:func:`placement.problem.units.sums_exactly`), else below it by what a floating-point sum of a
plan's terms may lose, so that no evaluated latency is below it. Where ``E_i`` is a call, ``d``
is its duration exactly; so where the critical chain of the best plan holds everything (a
sequential plan), the bound is its latency. A side branch that runs beside the chain is free in
the bound: the bound is weak where concurrency pays.

Nodes that go together. The ideals are enumerated over *groups*: the colour classes (a class
goes whole to one device, so whole into one call), each with the *free sinks* hanging from its
nodes (a node with no successor, one predecessor, no colour mate, time 0 on both device kinds,
memory 0: moving it to its predecessor's element, or beside it on a CPU, delays nothing, so
some optimal plan has it finish with its predecessor). Groups on a cycle of the group graph
share a call (a call holds every path between its nodes) and are merged. A CPU step is one
group. A class on the CPUs runs node by node, so ``A_i`` may cut it; the bound is therefore
computed only where every group that may run on the CPUs has a *core* with which it finishes
there: every other node takes no CPU time, reads from outside the group only if it leads to the
core inside it, and feeds outside the group only if it follows from the core inside it (a
layer's operator with its weights, statistics and output). Then the groups inside ``A_i`` form
an ideal, which serves as ``A_i`` above, and a CPU group on the chain lasts its core's time.
A cycle of groups one of which may run on the CPUs, or a group without a core, gives no bound
(:attr:`ChainBound.why` says so), and so do several accelerator or CPU types.

Cost. The groups' ideals are enumerated (at most ``max_ideals``); each pair ``I ⊂ B`` costs the
nodes on the two ideals' boundaries, and each step to ``A ⊇ B`` one subset test. Steps whose
value reaches ``cutoff`` (a plan's latency) are not taken: the bound is then at most ``cutoff``,
which is all a proof of that plan needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from placement.problem.components import strongly_connected
from placement.problem.instance import Instance
from placement.problem.memory_fit import LENIENT, as_written
from placement.problem.union_find import UnionFind
from placement.problem.units import sums_exactly

#: the ideals of the groups the bound enumerates at most
MAX_IDEALS = 5_000
#: the subset tests the DP makes at most (a few seconds)
MAX_WORK = 20_000_000


@dataclass(frozen=True)
class ChainBound:
    """The bound (``value``), or ``None`` with the reason it was not computed (``why``); the
    number of ideals enumerated."""

    value: float | None
    ideals: int = 0
    why: str = ""


def chain_bound(problem: Instance, cutoff: float = math.inf, max_ideals: int = MAX_IDEALS,
                max_work: int = MAX_WORK) -> ChainBound:
    """The critical-chain lower bound of the module docstring on the latency of ``problem`` with one
    call per accelerator, at most ``cutoff``."""
    types = problem.device_types
    accs = [t for t, dt in enumerate(types) if dt.pays_comm and dt.count > 0]
    cpus = [t for t, dt in enumerate(types) if not dt.pays_comm and dt.count > 0]
    if len(accs) > 1 or len(cpus) > 1:
        return ChainBound(None, why="more than one accelerator or CPU type")
    nodes = problem.nodes
    n = len(nodes)
    if n == 0:
        return ChainBound(0.0)
    k = types[accs[0]].count if accs else 0
    capacity = types[accs[0]].memory if accs else 0.0
    p_acc = [v.times[accs[0]] if accs and v.memory <= capacity else None for v in nodes]
    p_cpu = [v.times[cpus[0]] if cpus else None for v in nodes]
    succ, pred = problem.successors(), problem.predecessors()
    group_of, groups, why = _groups(problem, p_acc, p_cpu)
    if groups is None:
        return ChainBound(None, why=why)
    g = len(groups)
    k = min(k, g)   # a chain of blocks holds at most one call per group
    gsucc = _group_graph(group_of, g, succ)
    ideals = ideal_bitsets(g, gsucc, max_ideals)
    if ideals is None:
        return ChainBound(None, why=f"more than {max_ideals:,} ideals")
    # exact arithmetic: every time and cost as an integer number of the finest binary unit among them
    unit = Fraction(1, max((x.as_integer_ratio()[1] for x in (*_known(p_acc), *_known(p_cpu),
                                                              *(v.out_cost for v in nodes))), default=1))
    acc_units = [None if t is None else int(Fraction(t) / unit) for t in p_acc]
    cpu_units = [None if t is None else int(Fraction(t) / unit) for t in p_cpu]
    cost = [int(Fraction(v.out_cost) / unit) for v in nodes]
    # memory: the model's rule (placement.problem.memory_fit) decides a sum on its rounded value, or,
    # near the bound, on the sizes as written (their shortest decimal forms). A call here may hold a
    # block whose exact sum of the sizes, read either way, is within LENIENT of the bound: every
    # block the rule lets fit fits (a relaxation). Sums in integers of each reading's finest unit.
    readings = []
    for read in (Fraction, as_written):
        values = [read(v.memory) for v in nodes]
        bound = read(capacity) if math.isfinite(capacity) else None
        grain = Fraction(1, math.lcm(*(x.denominator for x in (*values, *([bound] if bound is not None else [])))))
        room = None if bound is None else bound / grain * (1 + as_written(LENIENT))
        readings.append(([int(x / grain) for x in values], room))
    member = [sum(1 << v for v in groups[x]) for x in range(g)]
    node_sets = [_union(I, member) for I in ideals]
    count = len(ideals)
    if node_sets[-1] != (1 << n) - 1:
        return ChainBound(None, count, "the groups do not form a DAG")
    succ_bits = [sum(1 << w for w in succ[u]) for u in range(n)]
    below = [0] * n                              # strict descendants of each node
    for u in reversed(problem.topological_positions()):
        for w in succ[u]:
            below[u] |= (1 << w) | below[w]
    free = sum(1 << v for v in range(n) if p_cpu[v] == 0 or p_acc[v] == 0)   # Z
    boundary = [[u for u in _members(S) if succ_bits[u] & ~S] for S in node_sets]   # nodes sending out
    acc_time = [sum(acc_units[v] or 0 for v in _members(S)) for S in node_sets]
    off_acc = [sum(1 for v in _members(S) if acc_units[v] is None) for S in node_sets]
    memory = [[sum(size[v] for v in _members(S)) for S in node_sets] for size, _ in readings]

    def fits(i: int, j: int) -> bool:
        """Whether the block ``node_sets[j] ∖ node_sets[i]`` fits an accelerator under either reading."""
        return any(room is None or sums[j] - sums[i] <= room for sums, (_, room) in zip(memory, readings))
    found: dict[int, list[int]] = {}

    def supersets(i: int) -> list[int]:
        """The ideals that contain ideal ``i`` (itself included), computed once, when first asked for."""
        if i not in found:
            inner = node_sets[i]
            found[i] = [j for j in range(i, count) if node_sets[j] & inner == inner]
        return found[i]

    rank = problem.topological_rank()
    cpu_step = {member[x]: _longest(groups[x], pred, cpu_units, rank)
                for x in range(g) if all(cpu_units[v] is not None for v in groups[x])}
    limit = math.inf if not math.isfinite(cutoff) else math.ceil(Fraction(cutoff) / unit)
    best: list[list[float | int]] = [[math.inf] * count for _ in range(k + 1)]
    for i, S in enumerate(node_sets):
        if S & ~free == 0:
            best[0][i] = 0
    work = 0
    for i in range(count):                      # by size: every subset of an ideal comes before it
        values = [(a, best[a][i]) for a in range(k + 1) if best[a][i] < limit]
        if not values:
            continue
        inner = node_sets[i]
        for j in supersets(i):
            if j == i:
                continue
            block = node_sets[j] & ~inner
            sent = [u for u in boundary[j] if block >> u & 1]
            steps = []
            if k > 0 and off_acc[j] == off_acc[i] and fits(i, j):
                received = [u for u in boundary[i] if succ_bits[u] & block]
                steps.append((1, acc_time[j] - acc_time[i] + sum(cost[u] for u in sent)
                              + sum(cost[u] for u in received)))
            if block in cpu_step:
                steps.append((0, cpu_step[block]))
            if not steps:
                continue
            outside = 0                          # descendants of the block beyond B, outside Z
            for u in sent:
                outside |= below[u]
            outside &= ~node_sets[j] & ~free
            above = supersets(j)
            work += len(above)
            if work > max_work:
                return ChainBound(None, count, f"more than {max_work:,} subset tests")
            reach = [jj for jj in above if node_sets[jj] & outside == 0]
            for extra, duration in steps:
                for a, value in values:
                    total = value + duration
                    if a + extra > k or total >= limit:
                        continue
                    row = best[a + extra]
                    for jj in reach:
                        if total < row[jj]:
                            row[jj] = total
    least = min(row[count - 1] for row in best)
    if least == math.inf:                       # (an integer sum may be too large for math.isfinite)
        if limit == math.inf:
            return ChainBound(None, count, "no chain of ideals holds a plan")
        least = limit                           # every chain was stopped at the cutoff or above
    # where floating-point sums of the times may round, below the exact sum by what a plan's sum may
    # lose (each of at most 2n + m + 1 additions by at most 2^-53 of the total), so that no plan's
    # evaluated latency falls below the bound
    exact = least * unit
    if not sums_exactly([*_known(p_acc), *_known(p_cpu), *(v.out_cost for v in nodes)]):
        exact *= 1 - Fraction(2 * n + sum(map(len, succ)) + 1, 2 ** 53)
    value = float(exact)
    if Fraction(value) > exact:                 # rounded up to the nearest float: the one below
        value = math.nextafter(value, -math.inf)
    return ChainBound(min(value, cutoff), count)


def _known(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _groups(problem: Instance, p_acc: list[float | None], p_cpu: list[float | None]
            ) -> tuple[list[int], list[list[int]] | None, str]:
    """Each node's group and the groups (module docstring), or ``None`` for the groups and the reason
    where the bound does not apply."""
    n = len(problem.nodes)
    succ, pred = problem.successors(), problem.predecessors()
    classes = problem.colour_classes()
    joint = UnionFind(n)
    for members in classes:
        for v in members[1:]:
            joint.union(v, members[0])
    alone = {members[0] for members in classes if len(members) == 1}
    for v in range(n):
        if (not succ[v] and len(pred[v]) == 1 and v in alone and problem.nodes[v].memory == 0
                and p_acc[v] == 0 and p_cpu[v] == 0):
            joint.union(v, pred[v][0])
    group_of, groups = _numbered(joint, n)

    def on_cpus(members: list[int]) -> bool:
        return all(p_cpu[v] is not None for v in members)

    # a cycle of groups goes whole into one call (a call holds every path between its nodes); where
    # one of them may run on the CPUs instead, the cycle is no element and the bound does not apply
    component = strongly_connected(len(groups), _group_graph(group_of, len(groups), succ))
    cycles: dict[int, list[int]] = {}
    for x, c in enumerate(component):
        cycles.setdefault(c, []).append(x)
    for together in cycles.values():
        if len(together) > 1:
            if any(on_cpus(groups[x]) for x in together):
                return group_of, None, "a cycle of colour classes that may run on the CPUs"
            for x in together[1:]:
                joint.union(groups[x][0], groups[together[0]][0])
    group_of, groups = _numbered(joint, n)
    for members in groups:
        if len(members) > 1 and on_cpus(members) and _core(members, succ, pred, p_cpu) is None:
            return group_of, None, "a colour class that may run on the CPUs has more than one core node"
    return group_of, groups, ""


def _numbered(joint: UnionFind, n: int) -> tuple[list[int], list[list[int]]]:
    roots: dict[int, int] = {}
    group_of = [roots.setdefault(joint.find(v), len(roots)) for v in range(n)]
    groups: list[list[int]] = [[] for _ in roots]
    for v in range(n):
        groups[group_of[v]].append(v)
    return group_of, groups


def _group_graph(group_of: list[int], g: int, succ: list[list[int]]) -> list[set[int]]:
    gsucc: list[set[int]] = [set() for _ in range(g)]
    for u, out in enumerate(succ):
        for w in out:
            if group_of[u] != group_of[w]:
                gsucc[group_of[u]].add(group_of[w])
    return gsucc


def _core(members: list[int], succ: list[list[int]], pred: list[list[int]], p_cpu: list[float | None]) -> int | None:
    """A node of the group ``members`` with which, on the CPUs, the whole group finishes (module
    docstring): every other node takes no CPU time, reads from outside the group only if it leads to
    the core inside it, and feeds outside the group only if it follows from the core inside it;
    ``None`` where there is none."""
    inside = set(members)

    def reach(start: int, links: list[list[int]]) -> set[int]:
        seen, stack = {start}, [start]
        while stack:
            for w in links[stack.pop()]:
                if w in inside and w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    for core in members:
        if any(p_cpu[v] != 0 for v in members if v != core):
            continue
        before, after = reach(core, pred), reach(core, succ)
        if all((inside.issuperset(pred[v]) or v in before) and (inside.issuperset(succ[v]) or v in after)
               for v in members if v != core):
            return core
    return None


def ideal_bitsets(g: int, gsucc: list[set[int]], limit: int) -> list[int] | None:
    """The ideals (sets closed under predecessors) of the graph on ``0..g−1`` with successor sets
    ``gsucc``, as bitsets, by size; ``None`` above ``limit`` (at once where ``g + 1`` is: the prefixes of a
    topological order are that many ideals)."""
    if g + 1 > limit:
        return None
    needs = [0] * g
    for x in range(g):
        for y in gsucc[x]:
            needs[y] |= 1 << x
    found, frontier = {0}, [0]
    while frontier:
        grown = []
        for I in frontier:
            for x in range(g):
                if not I >> x & 1 and needs[x] & ~I == 0:
                    J = I | 1 << x
                    if J not in found:
                        found.add(J)
                        grown.append(J)
                        if len(found) > limit:
                            return None
        frontier = grown
    return sorted(found, key=lambda I: (I.bit_count(), I))


def _union(I: int, member: list[int]) -> int:
    out = 0
    while I:
        low = I & -I
        out |= member[low.bit_length() - 1]
        I ^= low
    return out


def _members(S: int) -> list[int]:
    out = []
    while S:
        low = S & -S
        out.append(low.bit_length() - 1)
        S ^= low
    return out


def _longest(members: list[int], pred: list[list[int]], p_cpu: list[int | None], rank: list[int]) -> int:
    """The longest path of CPU times inside the group ``members`` (its core's time, where it has one)."""
    inside = set(members)
    finish: dict[int, int] = {}
    for v in sorted(members, key=rank.__getitem__):
        finish[v] = p_cpu[v] + max((finish[u] for u in pred[v] if u in inside), default=0)  # type: ignore[operator]
    return max(finish.values(), default=0)
