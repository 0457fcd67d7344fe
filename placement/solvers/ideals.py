"""Ideals of the forward graph, after contracting colour classes (DESIGN.md §3).

The DP places *stages*: blocks ``X = I \\ I'`` for ideals ``I' ⊆ I`` of a DAG
whose vertices are colour classes. This module builds that DAG and enumerates
its ideals.

Contraction (:func:`contract`)
------------------------------
1. Colour classes. Nodes of one colour share a device, so a class is one
   vertex. The vertex set is the classes with forward nodes plus the *orphan*
   classes (backward nodes only; an uncoloured backward node is a class of its
   own).
2. Edges of the *extended forward graph* ``H``: class(u) -> class(w) for every
   forward edge u -> w, and, for every backward edge a -> b where class(a) or
   class(b) is an orphan, the mirrored edge class(b) -> class(a) (backward
   data flows against the pipeline).
3. Strongly connected components of ``H`` are merged: a pipeline cannot
   separate the classes on a cycle.
4. Zero-cost merges, each of which provably keeps an optimal plan (moving the
   merged class ``K`` onto the device of ``T`` never raises a load and never
   breaks a constraint). ``K`` must have forward nodes, zero time on every
   device type, every type supported, and memory that cannot matter (zero, or
   the whole graph fits in every device type's memory):

   * (a) every predecessor of K (in the graph and in ``H``) lies in one class
     T, T is a predecessor of K in ``H`` (so T's stage comes no later than
     K's), and every node of K has transfer cost 0. Moving K to T's stage
     only shrinks the set of boundaries the predecessors pay; K's own
     boundaries are free.
   * (b) every neighbour of K (predecessors and successors, in the graph and
     in ``H``) lies in one class T. After the move all of K's edges are
     internal.

   The move may leave K's old device empty, so these merges keep an optimal
   plan only where the number of devices used is free: a solver asked for
   exactly ``N`` non-empty devices (``stages=N``, see :func:`placement.parameters.stage_count`)
   contracts with ``merge_zero_cost=False``.

The result is a :class:`Contraction`: supernodes in a topological order of
the contracted ``H``, each with the positions of its original nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from placement.errors import LimitExceededError
from placement.problem.components import strongly_connected
from placement.problem.instance import Instance
from placement.problem.memory_fit import which_bind
from placement.problem.union_find import UnionFind
from placement.wording import counted

DEFAULT_MAX_IDEALS = 200_000


@dataclass(frozen=True)
class Contraction:
    """Supernodes of the DP in topological order.

    ``members[s]``: positions (in ``problem.nodes``) of the original nodes of
    supernode ``s``, forward and backward. ``succ[s]``: successors of ``s`` in
    the contracted extended forward graph. ``of_node[v]``: supernode of node
    position ``v``.
    """

    members: tuple[tuple[int, ...], ...]
    succ: tuple[tuple[int, ...], ...]
    of_node: tuple[int, ...]
    merged_zero_cost: int

    @property
    def size(self) -> int:
        return len(self.members)


def edge_positions(problem: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Positions (in ``problem.nodes``) of every edge's source and destination (read-only arrays,
    :meth:`Instance.edge_positions`)."""
    return problem.edge_positions()


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct entries of the 1-d integer array ``values``, ascending (``np.unique`` without its
    masked-array check, whose first use imports ``numpy.ma``: a fifth of a small solve's start-up)."""
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _unique_edges(heads: np.ndarray, tails: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct edges ``heads[k] -> tails[k]`` between ``n`` vertices as CSR arrays ``(ptr, ends)``,
    each vertex's successors ascending."""
    keys = sorted_distinct(heads * max(n, 1) + tails)
    return np.searchsorted(keys // max(n, 1), np.arange(n + 1)), keys % max(n, 1)


def _adjacency(heads: np.ndarray, tails: np.ndarray, n: int) -> list[list[int]]:
    """Successor lists (distinct, ascending) of ``n`` vertices from the edges ``heads[k] -> tails[k]``."""
    ptr, ends = _unique_edges(heads, tails, n)
    bounds, targets = ptr.tolist(), ends.tolist()
    return [targets[bounds[c]:bounds[c + 1]] for c in range(n)]


def _class_graph(problem: Instance, class_of: np.ndarray, n_classes: int,
                 orphan: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``heads[k] -> tails[k]`` of H between classes: forward edges, and mirrored backward edges that
    touch an orphan class (repeats kept)."""
    src, dst = edge_positions(problem)
    back = np.array([v.backward for v in problem.nodes], dtype=np.bool_)
    ca, cb = class_of[src], class_of[dst]
    apart = ca != cb
    forward = apart & ~back[src] & ~back[dst]
    mirrored = apart & back[src] & back[dst] & (orphan[ca] | orphan[cb])
    return np.concatenate([ca[forward], cb[mirrored]]), np.concatenate([cb[forward], ca[mirrored]])


def _class_numbers(problem: Instance) -> np.ndarray:
    """Colour class of every node position, classes numbered as :meth:`Instance.colour_classes` lists them."""
    colours = [v.colour for v in problem.nodes]
    if colours.count(None) == len(colours):
        return np.arange(len(colours), dtype=np.int64)
    first: dict[object, int] = {}
    return np.array([first.setdefault(v if c is None else (c,), len(first)) for v, c in enumerate(colours)],
                    dtype=np.int64)


def contract(problem: Instance, merge_zero_cost: bool = True) -> Contraction:
    """Contract colour classes, merge cycles of H and (optionally) provably safe zero-cost classes."""
    n = len(problem.nodes)
    class_of = _class_numbers(problem)
    n_classes = int(class_of.max()) + 1 if n else 0
    forward_members = np.bincount(class_of, weights=[not v.backward for v in problem.nodes], minlength=n_classes)
    orphan = forward_members == 0

    heads, tails = _class_graph(problem, class_of, n_classes, orphan)
    uf = UnionFind(n_classes)
    h_succ: list[list[int]] | None = None
    if not np.all(heads < tails):   # H may have a cycle: merge its strongly connected components
        h_succ = _adjacency(heads, tails, n_classes)
        comp = strongly_connected(n_classes, h_succ)
        first_of_comp: dict[int, int] = {}
        for c in range(n_classes):
            if comp[c] in first_of_comp:
                uf.union(c, first_of_comp[comp[c]])
            else:
                first_of_comp[comp[c]] = c

    merged = 0
    others = np.bincount(class_of, weights=[not zero for zero in _zero_time_nodes(problem)], minlength=n_classes)
    if merge_zero_cost and np.any(~orphan & (others == 0)):   # a class that rule (a) or (b) might move
        classes = [list(members) for members in _members(class_of, n_classes)]
        merged = _merge_zero_cost(problem, classes, class_of.tolist(), orphan.tolist(),
                                  h_succ if h_succ is not None else _adjacency(heads, tails, n_classes), uf)

    # Final supernodes: H's edges are those between the original classes, mapped to their groups.
    if h_succ is None and not merged:   # every class a group of its own
        group_of_class = np.arange(n_classes, dtype=np.int64)
    else:
        _, group_of_class = np.unique(np.array([uf.find(c) for c in range(n_classes)], dtype=np.int64),
                                      return_inverse=True)
        group_of_class = group_of_class.reshape(-1)
    groups = int(group_of_class.max()) + 1 if n_classes else 0
    a, b = group_of_class[heads], group_of_class[tails]
    ptr, ends = _unique_edges(a[a != b], b[a != b], groups)
    order = _topological_order(groups, ptr, ends)
    rank = np.empty(groups, dtype=np.int64)
    rank[order] = np.arange(groups, dtype=np.int64)
    of_node = rank[group_of_class[class_of]]
    owner = np.repeat(np.arange(groups, dtype=np.int64), np.diff(ptr))
    heads_ranked, tails_ranked = rank[owner], rank[ends]
    by_head = np.lexsort((tails_ranked, heads_ranked))
    succ = _split(tails_ranked[by_head], np.bincount(heads_ranked, minlength=groups))
    return Contraction(_members(of_node, groups), succ, tuple(of_node.tolist()), merged)


def _split(values: np.ndarray, counts: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """``values`` cut into consecutive tuples of ``counts[k]`` entries."""
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    flat = values.tolist()
    return tuple(tuple(flat[bounds[k]:bounds[k + 1]]) for k in range(len(counts)))


def _members(group_of: np.ndarray, groups: int) -> tuple[tuple[int, ...], ...]:
    """Positions of each group's members, ascending, from the group of every position."""
    return _split(np.argsort(group_of, kind="stable"), np.bincount(group_of, minlength=groups))


def _topological_order(n: int, ptr: np.ndarray, ends: np.ndarray) -> list[int]:
    """Kahn's order of the DAG with successors ``ends[ptr[s]:ptr[s + 1]]`` (ascending): among the ready
    vertices, the one made ready last goes first, and the smallest first among those made ready together."""
    indeg = np.bincount(ends, minlength=n).tolist()
    bounds, targets = ptr.tolist(), ends.tolist()
    ready = [s for s in range(n) if indeg[s] == 0][::-1]
    order = []
    while ready:
        s = ready.pop()
        order.append(s)
        for k in range(bounds[s + 1] - 1, bounds[s] - 1, -1):
            w = targets[k]
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if len(order) != n:  # pragma: no cover - validated problems are acyclic after SCC merging
        raise AssertionError("contracted graph has a cycle")
    return order


def _zero_time_nodes(problem: Instance) -> list[bool]:
    """Per node position, whether the node may be part of a class that a zero-cost merge moves: zero time
    on every device type (all supported) and memory that cannot matter (zero, or the whole graph fits
    in every device type's memory)."""
    nodes = problem.nodes
    memory_never_binds = not any(which_bind([v.memory for v in nodes],
                                            [t.memory for t in problem.device_types if t.count > 0]))
    no_time = tuple(0.0 for _ in problem.device_types)   # every type supported, zero time on each
    return [v.times == no_time and (v.memory == 0 or memory_never_binds) for v in nodes]


def _merge_zero_cost(problem: Instance, classes: list[list[int]], class_of: list[int],
                     orphan: list[bool], h_succ: list[list[int]], uf: UnionFind) -> int:
    """Apply merge rules (a) and (b) of the module docstring until none applies; return merge count."""
    nodes = problem.nodes
    candidate = _zero_time_nodes(problem)
    eligible = [not orphan[c] and all(candidate[v] for v in members) for c, members in enumerate(classes)]
    zero_cost = [all(nodes[v].out_cost == 0 for v in members) for members in classes]
    if not any(eligible):
        return 0
    # Neighbourhoods by class: in the graph (any edge) and in H.
    preds: list[set[int]] = [set() for _ in classes]
    succs: list[set[int]] = [set() for _ in classes]
    h_preds: list[set[int]] = [set() for _ in classes]
    for e in problem.edges:
        ca, cb = class_of[problem.index_of(e.src)], class_of[problem.index_of(e.dst)]
        if ca != cb:
            preds[cb].add(ca)
            succs[ca].add(cb)
    for c in range(len(classes)):
        for d in h_succ[c]:
            h_preds[d].add(c)
            preds[d].add(c)
            succs[c].add(d)
    # per group (keyed by its root): its neighbours as class ids, mapped to their roots when read (a
    # group's sets are merged, never rebuilt from its members: a long zero chain merges in linear time)
    p_of: dict[int, set[int]] = {}
    s_of: dict[int, set[int]] = {}
    hp_of: dict[int, set[int]] = {}
    all_eligible: dict[int, bool] = {}
    all_zero_cost: dict[int, bool] = {}
    for c in range(len(classes)):
        r = uf.find(c)
        p_of.setdefault(r, set()).update(preds[c])
        s_of.setdefault(r, set()).update(succs[c])
        hp_of.setdefault(r, set()).update(h_preds[c])
        all_eligible[r] = all_eligible.get(r, True) and eligible[c]
        all_zero_cost[r] = all_zero_cost.get(r, True) and zero_cost[c]

    def roots(neighbours: dict[int, set[int]], c: int) -> set[int]:
        """The groups next to group ``c`` in ``neighbours``, stored back as roots."""
        found = {uf.find(x) for x in neighbours[c]}
        found.discard(c)
        neighbours[c] = found
        return found

    merges = 0
    changed = True
    while changed:
        changed = False
        for c in list(p_of):
            if c not in p_of or not all_eligible[c]:
                continue
            p, s, hp = roots(p_of, c), roots(s_of, c), roots(hp_of, c)
            target = None
            if len(p) == 1 and hp == p and all_zero_cost[c]:
                target = next(iter(p))
            elif len(p | s) == 1:
                target = next(iter(p | s))
            if target is not None:
                root = uf.union(c, target)
                other = target if root == c else c
                for neighbours in (p_of, s_of, hp_of):
                    kept, gone = neighbours[root], neighbours.pop(other)
                    if len(kept) < len(gone):
                        kept, gone = gone, kept
                    kept |= gone
                    neighbours[root] = kept
                all_eligible[root] = all_eligible.pop(other) and all_eligible[root]
                all_zero_cost[root] = all_zero_cost.pop(other) and all_zero_cost[root]
                merges += 1
                changed = True
    return merges


# Families at most this large are enumerated by :func:`enumerate_plain`, without compiling anything: it
# lists about a million ideals per second, the compiled kernel five to eight times as many after a
# compilation that costs seconds on a fresh install.
PLAIN_IDEALS = 200_000
#: above this many ideals allowed, :func:`enumerate_ideals` counts them before it stores them
COUNT_FIRST = 1 << 22


def csr(lists) -> tuple[np.ndarray, np.ndarray]:
    """Lists of integers as CSR arrays: ``idx[ptr[k]:ptr[k + 1]]`` is ``lists[k]``."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    return ptr, np.fromiter((x for xs in lists for x in xs), dtype=np.int64, count=int(ptr[-1]))


def _csr(succ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Successor lists as CSR arrays, with in-degrees; every edge must go from a lower to a higher index."""
    n = len(succ)
    ptr, idx = csr(succ)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    if np.any(idx <= owner):
        raise ValueError("succ must list vertices in topological order")
    indeg = np.bincount(idx, minlength=n).astype(np.int64)
    return ptr, idx, indeg


def _enumerate(succ, limit: int, store: bool) -> tuple[int, np.ndarray, np.ndarray]:
    """Run the enumeration: in plain Python while the family stays small, compiled beyond."""
    from placement.solvers import _dp_kernels as K

    limit = min(limit, 1 << 62)   # the compiled kernel counts in 64-bit integers; no family comes near
    count, parent, added = enumerate_plain(succ, min(limit, PLAIN_IDEALS), store)
    if count <= PLAIN_IDEALS or limit <= PLAIN_IDEALS:   # all of them, or past the caller's limit
        return count, np.array(parent, dtype=np.int64), np.array(added, dtype=np.int64)
    count, parent, added = K.compiled().enumerate_ideals(*_csr(succ), limit, store)
    return count, parent[:count], added[:count]


def enumerate_plain(succ, limit: int, store: bool) -> tuple[int, list[int], list[int]]:
    """:func:`placement.solvers._dp_kernels.enumerate_ideals` over Python integers as bitsets: the same
    ideals in the same order (a depth-first search adding, from an ideal whose last added vertex is
    ``v``, each available vertex above ``v`` in increasing order), at most ``limit + 1`` counted and
    ``limit + 1`` stored (∅ first, ``parent = added = -1``) when ``store``. Every edge must go from a lower
    to a higher index (:class:`ValueError` otherwise, as :func:`_csr`)."""
    n = len(succ)
    remaining = [0] * n
    for v, heads in enumerate(succ):
        for u in heads:
            if u <= v:
                raise ValueError("succ must list vertices in topological order")
            remaining[u] += 1
    avail = 0   # bit v: every predecessor of v is in the current ideal, v is not
    for v in range(n):
        if remaining[v] == 0:
            avail |= 1 << v
    parent = [-1] if store else []
    added = [-1] if store else []
    vertex, cursor, ideal = [-1], [0], [0]   # the search's frames: vertex added, next candidate, ideal
    count = 1
    while vertex:
        above = avail >> cursor[-1]
        if above == 0:   # no candidate left: undo this frame's vertex
            e = vertex.pop()
            cursor.pop()
            ideal.pop()
            if e >= 0:
                for u in succ[e]:
                    if remaining[u] == 0:
                        avail ^= 1 << u
                    remaining[u] += 1
                avail |= 1 << e
            continue
        b = cursor[-1] + (above & -above).bit_length() - 1
        cursor[-1] = b + 1
        if count > limit:
            break
        if store:
            parent.append(ideal[-1])
            added.append(b)
        avail ^= 1 << b
        for u in succ[b]:
            remaining[u] -= 1
            if remaining[u] == 0:
                avail |= 1 << u
        vertex.append(b)
        cursor.append(b + 1)
        ideal.append(count)
        count += 1
    return count, parent, added


def count_ideals(succ: list[list[int]] | tuple[tuple[int, ...], ...], limit: int | None = None) -> int:
    """Number of ideals (down-closed sets, the empty set included) of a DAG in topological order.

    ``succ[v]`` lists successors of ``v``; every edge must go from a lower to a
    higher index. With ``limit``, stops and returns ``limit + 1`` as soon as the
    count exceeds it. Time is linear in the count (times the degrees), memory linear in
    the graph (:func:`placement.solvers._dp_kernels.enumerate_ideals`).
    """
    count, _, _ = _enumerate(succ, (1 << 62) if limit is None else limit, store=False)
    return count


def enumerate_ideals(contraction: Contraction, max_ideals: int = DEFAULT_MAX_IDEALS,
                     progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All ideals of the contracted graph as a family ``(parent, added)`` (see
    :mod:`placement.solvers._dp_kernels`): ideal 0 is ∅, ideal ``i`` is ideal ``parent[i]`` plus
    supernode ``added[i]``. :class:`LimitExceededError` past ``max_ideals``.

    The family's arrays are allocated for the most ideals it may hold: above
    :data:`COUNT_FIRST` ideals allowed, the ideals are counted first (in memory linear in the
    graph), so that a family past the limit takes no memory and one within it takes its own
    size; ``progress`` then hears the count (and may stop the work there, at a deadline). A graph of
    ``n`` supernodes has at least ``n + 1`` ideals (the prefixes of a topological order): past the
    limit it is refused before any counting, unless it has no more, its supernodes a total order
    (:func:`is_total_order`): the limit guards against families that grow past the nodes, and the
    prefixes of one order are no such family (a 200,000-node chain was refused, and its MILP ended
    3% from the optimum that its DP proves in 22 s)."""
    counted_already = False   # a total order's count is known: n + 1
    if contraction.size + 1 > max_ideals:
        if not is_total_order(contraction.succ):
            raise _too_many_ideals(contraction, max_ideals)
        max_ideals, counted_already = contraction.size + 1, True
    if max_ideals > COUNT_FIRST and not counted_already:
        if progress is not None:
            progress(f"counting the ideals (at most {max_ideals:,})")
        counted = _enumerate(contraction.succ, max_ideals, store=False)[0]
        if counted > max_ideals:
            raise _too_many_ideals(contraction, max_ideals)
        if progress is not None:
            progress(f"{counted:,} ideals")
        max_ideals = counted
    count, parent, added = _enumerate(contraction.succ, max_ideals, store=True)
    if count > max_ideals:
        raise _too_many_ideals(contraction, max_ideals)
    return parent, added


def is_total_order(succ: tuple[tuple[int, ...], ...] | list[list[int]]) -> bool:
    """Whether the supernodes (numbered in a topological order, with successors ``succ``) are totally
    ordered: each has an edge to the next, so that the order is the graph's only one and its ideals are
    its ``n + 1`` prefixes."""
    return all(s + 1 in succ[s] for s in range(len(succ) - 1))


def _too_many_ideals(contraction: Contraction, max_ideals: int) -> LimitExceededError:
    return LimitExceededError(
        f"more than {counted(max_ideals, 'ideal')} in the contracted graph ({counted(contraction.size, 'supernode')}); "
        "the DP over ideals would need too much time and memory. Raise the limit max_ideals "
        "(time and memory grow with it, and memory with the nodes whose outputs cross each ideal), "
        "or coarsen the graph by giving nodes that belong together one colour class", "max_ideals")
