"""Reports of plans with many violations: each violation is looked up, not compared with every other."""

from __future__ import annotations

import dataclasses

from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import ACCELERATOR, Edge, Node, Instance, DeviceType
from placement.report.solution import format_verification
from placement.verification.check import check_plan

UNKNOWN = 2000   # nodes the plan names that the instance lacks: one violation each


class Counted(str):
    """A violation that counts how often it is compared for equality."""

    def __new__(cls, text: str, tally: list[int]) -> "Counted":
        made = super().__new__(cls, text)
        made.tally = tally
        return made

    def __eq__(self, other: object) -> bool:
        self.tally[0] += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def pair() -> Instance:
    return Instance((Node(1, "a", (1.0,), memory=1, out_cost=1.0), Node(2, "b", (2.0,), memory=1)),
                    (Edge(1, 2),), (DeviceType(ACCELERATOR, 1, memory=10),), name="pair")


def test_violations_beyond_keeps_order_and_drops_the_shown():
    from placement.verification.check import violations_beyond

    assert violations_beyond(("c", "a", "b", "a"), ("a",)) == ("c", "b")
    assert violations_beyond(("x", "y"), ()) == ("x", "y")


def test_violations_beyond_looks_each_one_up():
    from placement.verification.check import violations_beyond

    tally = [0]
    these = tuple(Counted(f"node {i} is not in the instance", tally) for i in range(UNKNOWN))
    shown = tuple(Counted(str(v), tally) for v in reversed(these))   # equal, not the same objects
    assert violations_beyond(these, shown) == ()
    assert tally[0] <= 2 * UNKNOWN   # a pairwise scan makes about UNKNOWN ** 2 / 2 comparisons


def test_report_of_many_violations_compares_each_once():
    instance = pair()
    plan = Plan((DeviceAssignment(ACCELERATOR, (1, 2) + tuple(range(100, 100 + UNKNOWN))),))
    verification = check_plan(instance, plan)
    assert len(verification.violations) == UNKNOWN
    assert verification.violations[0] == "device 0 (accelerator): node 100 is not in the instance"
    tally = [0]
    evaluation, latency, traffic = verification.report
    counted = dataclasses.replace(evaluation, violations=tuple(Counted(v, tally) for v in evaluation.violations))
    verification = dataclasses.replace(verification, violations=tuple(Counted(v, tally)
                                                                      for v in verification.violations),
                                       report=(counted, latency, traffic))
    text = format_verification(instance, verification)
    assert f"INVALID: {UNKNOWN} violations" in text
    assert f"... and {UNKNOWN - 20} more" in text
    assert tally[0] <= 2 * UNKNOWN
