"""The table of MILP backends: which can be used here, and why not."""

from __future__ import annotations


def format_solvers(rows: list[tuple[str, bool, str]]) -> str:
    """One line per backend: name, available or not, and the reason (version or what is missing)."""
    width = max([len("backend")] + [len(name) for name, _, _ in rows])
    lines = [f"{'backend':<{width}}  available  detail"]
    for name, ok, why in rows:
        lines.append(f"{name:<{width}}  {'yes' if ok else 'no':<9}  {why}")
    return "\n".join(lines)
