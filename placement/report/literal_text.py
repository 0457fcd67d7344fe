"""Chart text shown as written: matplotlib reads a pair of ``$`` in a label as mathematical notation, so a
name such as ``a$\\frac$b`` (an instance, a model, a device type) drew altered or made the chart fail."""

from __future__ import annotations

import contextlib
import importlib
from typing import Iterator


@contextlib.contextmanager
def literal_text() -> Iterator[None]:
    """Within the block (or the function it decorates), text matplotlib creates or draws is not parsed as
    mathematical notation (``text.parse_math`` off); without matplotlib, nothing changes."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:   # the drawing function says what is missing
        yield
        return
    with matplotlib.rc_context({"text.parse_math": False}):
        yield
