"""The collector pause around bulk work: the collector's state is restored, whatever it was."""

from __future__ import annotations

import gc

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
    with pytest.raises(placement.InvalidInstanceError):
        placement.load({"nodes": "not a list"})   # load pauses it while it reads
    assert gc.isenabled()
