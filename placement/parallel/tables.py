"""Arrays of a Piper instance for the DP over ideals (:mod:`placement.parallel.dp`).

Numbering: nodes are renumbered in the reverse of a topological order, so that the ideals
(down-closed sets) that :func:`placement.solvers.ideals.enumerate_ideals` lists for the
reversed graph are exactly the *successor-closed* node sets of the instance: the unions of the
last stages of a pipeline, the sets Piper's DP runs over (msr-fiddle/piper ``algo.cpp``,
``Graph::growIdeal``, lines 758–791, "we are actually dealing with DOWNSETS"). A stage is
``X = I \\ J`` for such sets ``J ⊊ I``: ``J`` holds the later stages, ``V \\ I`` the earlier ones.

Per node ``r``, degree index ``k`` (``degrees[k]`` is the tensor-parallel degree) and option
``l`` (the TMPC's position in the node's list): ``time``, ``params``, ``mem_a``, ``mem_b``;
``options[r, k]`` is the number of TMPCs (0: the node cannot run at that degree). Per edge
``e`` (``src -> dst``, original direction) and option: ``sync_in[e, k, l]``, the
``syncTimeFw[src]`` of option ``l`` of ``dst``, and ``sync_out[e, k, l]``, the
``syncTimeBw[dst]`` of option ``l`` of ``src``.

A node's option is *dominant* at degree ``k`` when it is smallest in time, parameter size and
every sync volume at once: it is then the fastest option in every stage and for every ``d``
(its time-per-sample contribution, a sum of those terms with non-negative weights, is
smallest). ``dominant[r, k]`` is its position, or −1.
"""

from __future__ import annotations

import graphlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from placement.errors import LimitExceededError
from placement.io.piper import PiperInstance
from placement.solvers.ideals import Contraction, enumerate_ideals


@dataclass(frozen=True)
class Tables:
    """The instance as arrays (module docstring) and its family of successor-closed sets."""

    ids: tuple[int, ...]              # ids[r]: Piper id of node r
    degrees: tuple[int, ...]
    options: np.ndarray               # (n, K) int64
    time: np.ndarray                  # (n, K, L)
    params: np.ndarray
    mem_a: np.ndarray
    mem_b: np.ndarray
    tmpc_ids: tuple[tuple[tuple[str, ...], ...], ...]   # [r][k] -> TMPC ids in option order
    src: np.ndarray                   # (E,) int64
    dst: np.ndarray
    cost: np.ndarray                  # (E,) communicationCost
    sync_in: np.ndarray               # (E, K, L)
    sync_out: np.ndarray
    in_ptr: np.ndarray                # CSR of each node's in-edges (edge indices)
    in_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray
    dominant: np.ndarray              # (n, K) int64

    @cached_property
    def packed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The tables as the DP's kernels take them, stacked once (few arguments keep numba's compilation
        short): ``(opt, sync, ends, ptr)`` = ((time, params, mem_a, mem_b), (sync_in, sync_out),
        (src, dst, in_idx, out_idx), (in_ptr, out_ptr)) (:func:`placement.parallel._kernels.stage_items`)."""
        return (np.stack([self.time, self.params, self.mem_a, self.mem_b]), np.stack([self.sync_in, self.sync_out]),
                np.stack([self.src, self.dst, self.in_idx, self.out_idx]).astype(np.int64),
                np.stack([self.in_ptr, self.out_ptr]).astype(np.int64))


@dataclass(frozen=True)
class Family:
    """A family of successor-closed sets, the empty set first, as the DP reads it."""

    member: np.ndarray                # (N, n) bool
    bits: np.ndarray                  # (N, W) uint64: the sets as bitsets
    size: np.ndarray                  # (N,) int64: their sizes
    cut_ptr: np.ndarray               # CSR per set I of the edges entering it (src ∉ I, dst ∈ I)
    cut_idx: np.ndarray
    full: int                         # index of the set of all nodes


def _reverse_topological(instance: PiperInstance) -> list[int]:
    """Node positions (file order) in the reverse of a topological order."""
    position = {node.id: k for k, node in enumerate(instance.nodes)}
    sorter = graphlib.TopologicalSorter({k: set() for k in range(len(instance.nodes))})
    for e in instance.edges:
        sorter.add(position[e.dst], position[e.src])
    return list(sorter.static_order())[::-1]


def build_tables(instance: PiperInstance) -> Tables:
    """The arrays of ``instance`` (module docstring)."""
    order = _reverse_topological(instance)
    nodes = [instance.nodes[p] for p in order]
    n = len(nodes)
    number = {node.id: r for r, node in enumerate(nodes)}
    degrees = tuple(sorted({t for node in nodes for t in node.configurations}))
    width = max(len(c) for node in nodes for c in node.configurations.values())
    shape = (n, len(degrees), width)
    time, params, mem_a, mem_b = (np.zeros(shape) for _ in range(4))
    options = np.zeros(shape[:2], dtype=np.int64)
    tmpc_ids = []
    for r, node in enumerate(nodes):
        row = []
        for k, t in enumerate(degrees):
            tmpcs = node.configurations.get(t, ())
            options[r, k] = len(tmpcs)
            for l, c in enumerate(tmpcs):
                time[r, k, l], params[r, k, l] = c.time_per_sample, c.parameter_size
                mem_a[r, k, l], mem_b[r, k, l] = c.memory_usage_a, c.memory_usage_b
            row.append(tuple(c.id for c in tmpcs))
        tmpc_ids.append(tuple(row))

    edges = instance.edges
    src = np.array([number[e.src] for e in edges], dtype=np.int64)
    dst = np.array([number[e.dst] for e in edges], dtype=np.int64)
    cost = np.array([e.communication_cost for e in edges], dtype=np.float64)
    sync_in, sync_out = np.zeros((len(edges), *shape[1:])), np.zeros((len(edges), *shape[1:]))
    for e, edge in enumerate(edges):
        for k, t in enumerate(degrees):
            for l, c in enumerate(nodes[dst[e]].configurations.get(t, ())):
                sync_in[e, k, l] = c.sync_time_fw[edge.src]
            for l, c in enumerate(nodes[src[e]].configurations.get(t, ())):
                sync_out[e, k, l] = c.sync_time_bw[edge.dst]
    in_ptr, in_idx = _csr([np.flatnonzero(dst == r) for r in range(n)])
    out_ptr, out_idx = _csr([np.flatnonzero(src == r) for r in range(n)])
    dominant = _dominant(options, time, params, sync_in, sync_out, in_ptr, in_idx, out_ptr, out_idx)

    return Tables(tuple(node.id for node in nodes), degrees, options, time, params, mem_a, mem_b, tuple(tmpc_ids),
                  src, dst, cost, sync_in, sync_out, in_ptr, in_idx, out_ptr, out_idx, dominant)


def all_sets(tables: Tables, max_sets: int) -> Family:
    """Every successor-closed set: the ideals of the reversed graph (edge ``dst -> src`` goes from a
    lower to a higher number); :class:`LimitExceededError` past ``max_sets``."""
    n = len(tables.ids)
    succ = [sorted(set(tables.src[tables.dst == r].tolist())) for r in range(n)]
    contraction = Contraction(tuple((r,) for r in range(n)), tuple(tuple(s) for s in succ), tuple(range(n)), 0)
    try:
        parent, added = enumerate_ideals(contraction, max_sets)
    except LimitExceededError:   # the message of the ideals speaks of colour classes, which Piper's graphs lack
        raise LimitExceededError(f"more than {max_sets:,} successor-closed node sets in a graph of {n} nodes; the "
                                 "DP over them would need too much time and memory. Raise the limit max_ideals "
                                 "(time and memory grow with it, memory also with the nodes), or merge nodes into "
                                 "layers", "max_ideals") from None
    check_memory_of_sets(len(parent), n, len(tables.src))
    member = np.zeros((len(parent), n), dtype=np.bool_)
    for i in range(1, len(parent)):
        member[i] = member[parent[i]]
        member[i, added[i]] = True
    return family(tables, member)


#: Bytes the DP's tables of a family of sets take at most at once, per set and node (its membership, and the
#: same as floating-point numbers for the sums per set), and per set and edge (the edges entering each set)
BYTES_PER_SET_NODE, BYTES_PER_SET_EDGE = 9, 3


def check_memory_of_sets(count: int, nodes: int, edges: int) -> None:
    """:class:`LimitExceededError` where the tables of ``count`` sets of a graph of ``nodes`` nodes and ``edges``
    edges (a row per set, a column per node or edge: a long chain has one set more than it has nodes) would take
    more than the memory the DP may use (:func:`placement.solvers.dp_table.memory_budget`): they are refused
    before they are built, rather than run the machine out of memory."""
    from placement.solvers.dp_table import memory_budget

    needed = count * (BYTES_PER_SET_NODE * nodes + BYTES_PER_SET_EDGE * edges)
    budget = memory_budget()
    if needed > budget:
        raise LimitExceededError(f"the DP's tables of {count:,} successor-closed node sets in a graph of {nodes:,} "
                                 f"nodes would take {needed / 2.0 ** 30:,.1f} GiB of memory, more than the "
                                 f"{budget / 2.0 ** 30:,.1f} GiB it may use (80% of the memory available); merge "
                                 "nodes into layers")


def chain_sets(tables: Tables) -> Family:
    """The sets ``{0, …, j}`` (every ``j``, and ∅): the unions of the last stages of the pipelines that
    follow the topological order the numbering reverses."""
    n = len(tables.ids)
    return family(tables, np.tri(n + 1, n, -1, dtype=np.bool_))


def family(tables: Tables, member: np.ndarray) -> Family:
    """The :class:`Family` of the sets given as rows of a membership matrix (row 0 the empty set)."""
    count, n = member.shape
    words = (n + 63) // 64
    bits = np.zeros((count, words), dtype=np.uint64)
    for r in range(n):
        bits[member[:, r], r >> 6] |= np.uint64(1) << np.uint64(r & 63)
    entering = ~member[:, tables.src] & member[:, tables.dst]
    cut_ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(entering.sum(axis=1), out=cut_ptr[1:])
    cut_idx = np.nonzero(entering)[1].astype(np.int64)
    size = member.sum(axis=1).astype(np.int64)
    full = int(np.flatnonzero(size == n)[0])
    return Family(member, bits, size, cut_ptr, cut_idx, full)


def _csr(lists) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    idx = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else np.zeros(0, np.int64)
    return ptr, idx.astype(np.int64)


def _dominant(options, time, params, sync_in, sync_out, in_ptr, in_idx, out_ptr, out_idx) -> np.ndarray:
    n, degrees, _ = time.shape
    out = np.full((n, degrees), -1, dtype=np.int64)
    for r in range(n):
        ins, outs = in_idx[in_ptr[r]:in_ptr[r + 1]], out_idx[out_ptr[r]:out_ptr[r + 1]]
        for k in range(degrees):
            count = options[r, k]
            if count == 0:
                continue
            rows = [np.concatenate(([time[r, k, l], params[r, k, l]], sync_in[ins, k, l], sync_out[outs, k, l]))
                    for l in range(count)]
            for l in range(count):
                if all(np.all(rows[l] <= rows[o]) for o in range(count)):
                    out[r, k] = l
                    break
    return out


__all__ = ["Family", "Tables", "all_sets", "build_tables", "chain_sets", "check_memory_of_sets", "family"]
