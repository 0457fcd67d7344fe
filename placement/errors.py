"""Typed exceptions of the package.

Every error a user can cause with bad input is an :class:`InstanceError` (or a
subclass); the CLI prints its one-line message and exits with status 2. Errors
that come from limits the user set (too many ideals) are :class:`LimitError`.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base class of every error the package raises on purpose."""


class InstanceError(PlacementError):
    """An instance (or a file holding one) is malformed or inconsistent."""


class PlanFormatError(PlacementError):
    """A plan file is malformed (unknown nodes in a well-formed plan are violations, not format errors)."""


class LimitError(PlacementError):
    """A configured limit (ideal count, model size) was exceeded before solving."""


class UsageError(PlacementError):
    """A command-line option or argument combination makes no sense."""
