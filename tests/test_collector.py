"""The collector pause around bulk work: the collector's state is restored, whatever it was."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import placement
from placement.collector import collector_paused


def test_the_collector_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():   # nested: the inner block leaves it paused for the outer one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_restored_after_an_exception_of_the_work():
    from placement.verification.check import check_plan

    problem = placement.load(Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json")
    plan = placement.solve(problem).to_plan()
    with pytest.raises(placement.InvalidParameterError):
        check_plan(problem, plan, objective="speed")   # the check pauses it, then refuses the objective
    assert gc.isenabled()
