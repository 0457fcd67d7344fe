"""A lower bound on the latency: the longest path with every node at its cheapest time.

Model
-----
With ``t_min(v)`` the least of ``times[t](v)`` over the device types that
support ``v`` and have at least one device, the bound is the longest path of
the graph weighted by ``t_min``:

    LB = max over paths v_1 → … → v_m of Σ_i t_min(v_i).

It holds for every valid plan of the latency model (DESIGN.md §2): along a
path, a CPU node starts after its predecessor finishes and runs ``p_cpu``; the
path cannot leave a call and re-enter it (calls are contiguous), so the nodes
it has in one call are consecutive, the call starts after the path's previous
node finishes and lasts at least their compute. By induction ``finish(v_i) ≥
Σ_{j≤i} t_min(v_j)``. Communication is ignored, so the bound is weak when
transfers matter; it is what a result table can compare with before a proven
optimum exists.
"""

from __future__ import annotations

from placement.model.problem import Problem


def latency_lower_bound(problem: Problem) -> float:
    """The longest ``t_min``-weighted path of the module docstring."""
    types = problem.device_types
    cheapest = [min(p for p, t in zip(n.times, types) if p is not None and t.count > 0) for n in problem.nodes]
    succ = problem.successors()
    finish = [0.0] * len(problem.nodes)
    reached = [0.0] * len(problem.nodes)  # the longest path into each node, before it
    for node_id in problem.topological_ids():
        v = problem.index_of(node_id)
        finish[v] = reached[v] + cheapest[v]
        for w in succ[v]:
            if finish[v] > reached[w]:
                reached[w] = finish[v]
    return max(finish)
