"""Model data of the throughput MILPs in the instance's own units, for tests that read its numbers.

A floating-point backend's model is scaled by a power of two (``placement.solvers.milp.data.float_scaling``);
dividing by it again is exact, so values derived by hand compare with ``==``.
"""

from __future__ import annotations

from dataclasses import replace

from placement.problem.instance import Instance
from placement.solvers.milp.data import CostNode, GroupData, Scaling, prepare


def unscaled(d: GroupData) -> GroupData:
    """``d`` with its times, costs and load bound in the instance's units (scale 1)."""
    s = d.scaling.scale

    def back(row):
        return tuple(None if q is None else q / s for q in row)

    return replace(d, pf=tuple(back(r) for r in d.pf), pb=tuple(back(r) for r in d.pb),
                   cost_nodes=tuple(CostNode(c.u, c.r, c.W, c.c / s, c.backward) for c in d.cost_nodes),
                   load_ub=d.load_ub / s, scaling=Scaling(1.0, d.scaling.exact))


def float_data(problem: Instance) -> GroupData:
    """The floating-point model's data of ``problem``'s colour classes, in the instance's units."""
    return unscaled(prepare(problem, problem.colour_classes(), integer=False, max_product=2.0 ** 62))
