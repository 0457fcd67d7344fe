"""Exhaustive search of the split-backward model on tiny graphs: the reference the MILP is tested against.

It enumerates every pipeline of device types, every assignment of colour classes to its stages
that is a pipeline in that order, and every allowed placement of each backward node's B and W
task (with ``inter_layer``, only those whose B calls wait for no cycle of devices), and computes loads and memory with its own arithmetic (the model of
:mod:`placement.verification.split`, written out again over class positions), sharing nothing
with the solvers. Exponential: meant for a handful of classes and devices.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from placement.plan import DeviceAssignment, Plan
from placement.problem.memory_fit import as_written
from placement.problem.instance import Instance
from placement.problem.split import SplitModel, split_times


def _type_sequences(problem: Instance) -> list[tuple[int, ...]]:
    """Every sequence of device types (pipeline of 1..total devices) the counts allow."""
    types = [k for k, t in enumerate(problem.device_types) if t.count > 0]
    total = sum(problem.device_types[k].count for k in types)
    out = []
    for n in range(1, total + 1):
        for seq in itertools.product(types, repeat=n):
            if all(seq.count(k) <= problem.device_types[k].count for k in types):
                out.append(seq)
    return out


def _cyclic(arcs: set[tuple[int, int]], n: int) -> bool:
    """Whether the arcs between distinct devices ``0..n-1`` close a cycle (repeatedly drop devices with
    no incoming arc)."""
    arcs = {(a, b) for a, b in arcs if a != b}
    alive = set(range(n))
    while True:
        sources = {d for d in alive if not any(b == d and a in alive for a, b in arcs)}
        if not sources:
            return bool(alive)
        alive -= sources


def brute_force_split(problem: Instance, model: SplitModel, objective: str = "throughput"
                      ) -> tuple[float, Plan | None]:
    """The optimum of the split model and one optimal plan (``(inf, None)`` when none is feasible)."""
    nodes = problem.nodes
    n = len(nodes)
    classes = problem.colour_classes()
    cls = [0] * n
    for c, members in enumerate(classes):
        for v in members:
            cls[v] = c
    succ = problem.successors()
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for w in succ[v]:
            pred[w].append(v)
    has_forward = [any(not nodes[v].backward for v in members) for members in classes]
    order_edges = set()
    for v in range(n):
        for w in succ[v]:
            a, b = nodes[v].backward, nodes[w].backward
            if not a and not b:
                order_edges.add((cls[v], cls[w]))
            elif a and b and (not has_forward[cls[v]] or not has_forward[cls[w]]):
                order_edges.add((cls[w], cls[v]))
    backward = [u for u in range(n) if nodes[u].backward]
    b_times, w_times = split_times(problem, model)
    size = [0.0] * n
    for e in problem.edges:
        i = problem.index_of(e.src)
        if e.size is not None:
            size[i] = max(size[i], e.size)
    w_reads = {}
    for u in backward:
        found = set(pred[u])
        for f in classes[cls[u]]:
            if not nodes[f].backward and nodes[u].colour is not None:
                found |= set(pred[f])
        w_reads[u] = found
    costly = [x for x in range(n) if nodes[x].out_cost > 0]
    backward_edges = [(x, w) for x in backward for w in succ[x] if nodes[w].backward]
    into_backward = [(x, w) for x in range(n) if not nodes[x].backward for w in succ[x] if nodes[w].backward]

    best, best_plan = math.inf, None
    for seq in _type_sequences(problem):
        S = len(seq)
        for st in itertools.product(range(S), repeat=len(classes)):
            if len(set(st)) != S or any(st[a] > st[b] for a, b in order_edges):
                continue
            if any(nodes[v].times[seq[st[cls[v]]]] is None for v in range(n)):
                continue
            options = []
            for u in backward:
                home = st[cls[u]]
                b_opts = [home] + ([home - 1] if model.inter_layer and home > 0 else [])
                w_opts = (list(range(S)) if model.w_placement == "any" else [home] if model.w_placement == "home"
                          else [home] + ([home + 1] if home + 1 < S else []))
                ok = lambda d, u=u: nodes[u].times[seq[d]] is not None
                options.append([(b, w) for b in b_opts if ok(b) for w in w_opts if ok(w)])
            for choice in itertools.product(*options):
                bpos = dict(zip(backward, (c[0] for c in choice)))
                wpos = dict(zip(backward, (c[1] for c in choice)))
                fw = [0.0] * S
                bw = [0.0] * S
                mem = [Fraction(0)] * S   # exactly, on the sizes as written: 0.1 + 0.2 fits 0.3
                for v in range(n):
                    d = st[cls[v]]
                    mem[d] += as_written(nodes[v].memory)
                    if not nodes[v].backward:
                        fw[d] += nodes[v].times[seq[d]]
                kept: list[set[int]] = [set() for _ in range(S)]
                for u in backward:
                    bd, wd = bpos[u], wpos[u]
                    bw[bd] += b_times[u][seq[bd]]
                    bw[wd] += w_times[u][seq[wd]]
                    if bd != st[cls[u]]:
                        mem[bd] += as_written(nodes[u].memory)
                    if wd != st[cls[u]]:
                        kept[wd] |= {x for x in w_reads[u] if nodes[x].backward or st[cls[x]] != wd}
                # bounded async 1F1B: position d holds S - d + lag micro-batches, lag = 1 + the farthest
                # position whose B output its W call is the first call there to read (0 if none)
                lag = [0] * S
                for u in backward:
                    wd = wpos[u]
                    for x in w_reads[u]:
                        if not nodes[x].backward or bpos[x] == wd:
                            continue
                        early = ({bpos[w] for w in succ[x] if nodes[w].backward}
                                 | {st[cls[w]] for w in succ[x] if not nodes[w].backward})
                        if wd not in early:
                            lag[wd] = max(lag[wd], 1 + abs(bpos[x] - wd))
                for d in range(S):
                    footprint = sum(as_written(size[v]) for v in range(n) if st[cls[v]] == d and not nodes[v].backward)
                    mem[d] += (S - d + lag[d]) * (footprint + sum(as_written(size[x]) for x in kept[d]))
                if any(math.isfinite(problem.device_types[seq[d]].memory)
                       and mem[d] > as_written(problem.device_types[seq[d]].memory) for d in range(S)):
                    continue
                # the B calls' arcs, and a forward tensor a B on an earlier stage reads: no cycle
                if model.inter_layer and _cyclic({(bpos[x], bpos[w]) for x, w in backward_edges}
                                                 | {(st[cls[x]], bpos[w]) for x, w in into_backward
                                                    if st[cls[x]] > bpos[w]}, S):
                    continue
                for x in costly:
                    prod = bpos[x] if nodes[x].backward else st[cls[x]]
                    readers = set()
                    for w in succ[x]:
                        if nodes[w].backward:
                            readers |= {bpos[w], wpos[w]}
                        else:
                            readers.add(st[cls[w]])
                    for u in backward:
                        if x in w_reads[u]:
                            readers.add(wpos[u])
                    forward_readers = {st[cls[w]] for w in succ[x] if not nodes[w].backward}
                    paying = ({prod} if readers - {prod} else set()) | (readers - {prod})
                    for d in paying:
                        if problem.device_types[seq[d]].pays_comm:
                            if nodes[x].backward or (d != prod and d not in forward_readers):
                                bw[d] += nodes[x].out_cost
                            else:
                                fw[d] += nodes[x].out_cost
                value = (max(f + b for f, b in zip(fw, bw)) if objective == "throughput"
                         else max(fw) + max(bw))
                if value < best:
                    best = value
                    best_plan = Plan(tuple(DeviceAssignment(
                        problem.device_types[seq[d]].name,
                        tuple(nodes[v].id for v in range(n) if st[cls[v]] == d), (),
                        tuple(nodes[u].id for u in backward if bpos[u] == d),
                        tuple(nodes[u].id for u in backward if wpos[u] == d)) for d in range(S)))
    return best, best_plan
