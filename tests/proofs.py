"""What a MILP backend may claim where an exact method has the answer: a floating-point backend's
infeasibility rests on its tolerances, so where the truth is "infeasible" it reports no plan and
no proof (``no_solution``); CP-SAT proves it. Where the instance alone shows that no plan exists (a
colour class that fits no device, memory summed as the evaluator sums it), every backend says
``infeasible`` before any solver runs."""

from __future__ import annotations

from placement.problem.bounds import class_without_device
from placement.problem.instance import Instance
from placement.solution import Status

#: the backends whose proofs are exact (integer data)
EXACT_BACKENDS = ("cp-sat",)


def claimable(truth: Status, backend: str, problem: Instance) -> Status:
    """The status ``backend`` reports on ``problem`` where an exact method's answer is ``truth``."""
    if truth is Status.INFEASIBLE and backend not in EXACT_BACKENDS and class_without_device(problem) is None:
        return Status.NO_SOLUTION
    return truth
