"""The Result an interrupted ``placement.solve`` carries, for the tests of Ctrl-C in each method."""

from __future__ import annotations

from typing import Any

import pytest

import placement


def result_of_interrupted_solve(instance: Any, **options: Any) -> placement.Result:
    """The Result that ``placement.solve(instance, **options)`` raises on in its :class:`placement.Interrupted`; a
    plain interrupt fails the test (and does not end the test run, as it would if it went on), and so does a solve
    that ends without one."""
    try:
        placement.solve(instance, **options)
    except placement.Interrupted as caught:
        assert isinstance(caught, KeyboardInterrupt)
        return caught.result
    except KeyboardInterrupt:   # a failure, not the end of the test run
        pytest.fail("the interrupt went on without the plan in hand")
    pytest.fail("the interrupt was lost")
