"""One order of an instance's nodes and edges that the order its file lists them in does not change.

An instance is a graph: listing its nodes or edges in another order changes neither its plans nor their
values. Searches that follow the order they are given (a MILP solver's branching, the heuristics that
seed it) may still end elsewhere within a time limit: BERT-24 inference under ``none`` was proven in
about 9 s from the published file and not in 60 s from the same file with its nodes and edges shuffled.
:func:`canonical` lists the nodes in the topological order of Kahn's algorithm taking the ready node of
least id, and the edges by the places of their ends in it, so every listing of one graph (the same ids)
gives one instance; :func:`listed_as` puts a plan's nodes back in the order of the instance the caller
gave.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Sequence

from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import Instance


def least_key_order(succ: Sequence[Sequence[int]], key: Sequence[int]) -> list[int]:
    """The vertices of the DAG of successor lists ``succ`` in the topological order of Kahn's algorithm
    taking the ready vertex of least ``key`` (keys distinct: the order depends on the keys alone, not on
    the numbering of the vertices)."""
    remaining = [0] * len(succ)
    for targets in succ:
        for w in targets:
            remaining[w] += 1
    ready = [(key[v], v) for v in range(len(succ)) if remaining[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, v = heapq.heappop(ready)
        order.append(v)
        for w in succ[v]:
            remaining[w] -= 1
            if remaining[w] == 0:
                heapq.heappush(ready, (key[w], w))
    return order


def canonical(problem: Instance) -> Instance:
    """``problem`` with its nodes in the order of :func:`least_key_order` by node id and its edges sorted
    by the places of their source and destination in it (``problem`` itself where it is so already)."""
    order = least_key_order(problem.adjacency()[0], [n.id for n in problem.nodes])
    place = {problem.nodes[v].id: i for i, v in enumerate(order)}
    edges = sorted(problem.edges, key=lambda e: (place[e.src], place[e.dst]))
    if order == list(range(len(order))) and all(a is b for a, b in zip(edges, problem.edges)):
        return problem
    return dataclasses.replace(problem, nodes=tuple(problem.nodes[v] for v in order), edges=tuple(edges))


def listed_as(problem: Instance, plan: Plan) -> Plan:
    """``plan`` with every device's nodes (and each of its calls', B and W tasks') in ``problem``'s order;
    the devices and the order of their calls stay as they are. Ids that are no node of ``problem`` (a
    plan the checks will refuse) go last, in the plan's order."""
    index = {node.id: k for k, node in enumerate(problem.nodes)}
    unknown = len(index)

    def ordered(ids: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(ids, key=lambda i: index.get(i, unknown)))

    return Plan(tuple(dataclasses.replace(dev, nodes=ordered(dev.nodes), calls=tuple(map(ordered, dev.calls)),
                                          b_tasks=ordered(dev.b_tasks), w_tasks=ordered(dev.w_tasks))
                      for dev in plan.devices))
