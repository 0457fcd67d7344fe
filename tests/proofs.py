"""What a MILP backend may claim where an exact method has the answer: a floating-point backend's
infeasibility rests on its tolerances, so where the truth is "infeasible" it reports no plan and
no proof (``no_solution``); CP-SAT proves it."""

from __future__ import annotations

from placement.solution import Status

#: the backends whose proofs are exact (integer data)
EXACT_BACKENDS = ("cp-sat",)


def claimable(truth: Status, backend: str) -> Status:
    """The status ``backend`` reports where an exact method's answer is ``truth``."""
    if truth is Status.INFEASIBLE and backend not in EXACT_BACKENDS:
        return Status.NO_SOLUTION
    return truth
