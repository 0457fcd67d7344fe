"""Chart text shown as written: matplotlib reads a pair of ``$`` in a label as mathematical notation, so a
name such as ``a$\\frac$b`` (an instance, a model, a device type) drew altered or made the chart fail."""

from __future__ import annotations


def literal(text: str) -> str:
    """``text`` with every ``$`` escaped, so that matplotlib draws it as written (its own labels, such as the
    ticks of a logarithmic axis, keep their notation)."""
    return text.replace("$", r"\$")
