"""Parameters read by several nodes of one stage: memory the placement model counts more than once.

The placement model charges a node the bytes of the parameters and buffers it reads (and, in
training, its backward node the gradients of its trained parameters), and a device the sum over
its nodes (DESIGN.md §2). A parameter read by several nodes (a layer applied several times, as in
ALBERT's cross-layer sharing; a tied embedding and output projection; a module called from two
places) is therefore counted once per reading node on a stage that holds several of them, while
the stage holds one copy. The plan is valid (its true memory is lower than the one checked), but
the memory a plan shows exceeds what the stage holds, and a plan that would fit may be refused.
This module measures the difference, so that the planner can say so.
"""

from __future__ import annotations

from typing import Collection, Mapping, Sequence

from placement.io.opgraph import PlacementGraph, parameter_readers

UNITS = (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10))


class RepeatedReadWarning(UserWarning):
    """A stage of the plan is charged a parameter once per node of it that reads the parameter."""


def _size(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit it reaches, to three figures (``"4 GiB"``, ``"1000 KiB"``)."""
    for unit, scale in UNITS:
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.3g} bytes"


def _held(pg: PlacementGraph, v: int, names: Mapping[str, str], training: bool) -> dict[str, float]:
    """The bytes forward node ``v`` and (``training``) its backward node are charged per parameter (by
    ``names``' name for it): what :meth:`PlacementGraph.param_bytes` and, in training,
    :meth:`PlacementGraph.gradient_param_bytes` sum, which the instance charges them."""
    held: dict[str, float] = {}
    for sizes in (pg.param_sizes(v), pg.gradient_param_sizes(v) if training else {}):
        for name, size in sizes.items():
            shared = names.get(name, name)
            held[shared] = held.get(shared, 0.0) + size
    return held


def repeated_charges(pg: PlacementGraph, stages: Sequence[Collection[int]], names: Mapping[str, str],
                     training: bool) -> list[tuple[int, str, int, float]]:
    """Per stage of ``stages`` (instance node ids; the forward nodes are ``pg``'s), each parameter that
    two or more of its nodes read: ``(stage, parameter, readers on the stage, bytes counted beyond the
    one copy and, in training, its gradient)``, in stage and name order."""
    n = len(pg.nodes)
    found = []
    for k, ids in enumerate(stages):
        readers: dict[str, list[float]] = {}
        for v in sorted(i for i in ids if 0 <= i < n):
            for name, size in _held(pg, v, names, training).items():
                readers.setdefault(name, []).append(size)
        found += [(k, name, len(sizes), sum(sizes) - max(sizes))
                  for name, sizes in sorted(readers.items()) if len(sizes) >= 2 and sum(sizes) > max(sizes)]
    return found


#: the share of a stage's charged memory that its repeated charges must reach to be told
NOTED_SHARE = 0.01


def repeated_note(charges: Sequence[tuple[int, str, int, float]], memory: Sequence[float]) -> str | None:
    """One sentence on :func:`repeated_charges`: per stage where they come to at least
    :data:`NOTED_SHARE` of the memory charged to it (``memory[stage]``), the bytes counted beyond what
    it holds, and the parameter that adds most; ``None`` where no stage has such."""
    per_stage: dict[int, list[tuple[str, int, float]]] = {}
    for stage, name, count, extra in charges:
        per_stage.setdefault(stage, []).append((name, count, extra))
    parts = []
    for stage, items in per_stage.items():
        name, count, extra = max(items, key=lambda item: item[2])
        total = sum(item[2] for item in items)
        if total < NOTED_SHARE * memory[stage]:
            continue
        more = len(items) - 1
        also = f", and {more} more parameter{'s' if more > 1 else ''}" if more else ""
        parts.append(f"stage {stage} by {_size(total)} ({name!r} is read by {count} of its nodes{also})")
    if not parts:
        return None
    return ("the placement model counts a parameter once per node that reads it, so the memory charged exceeds "
            f"what a stage holds (one copy): {'; '.join(parts)}. The plan fits; a plan that would fit with one "
            "copy per stage may have been refused")


def repeated_reads_note(pg: PlacementGraph, names: Mapping[str, str]) -> str | None:
    """For a refusal: the parameters the model reads from several nodes, which it counts once per
    reading node (``None`` where there are none)."""
    shared = parameter_readers(pg, lambda p: True, names)
    if not shared:
        return None
    size = {names.get(p.name, p.name): p.nbytes for op in pg.graph.ops for p in op.params}
    name, readers = max(shared.items(), key=lambda item: size[item[0]] * len(item[1]))
    more = len(shared) - 1
    return (f"the placement model counts a parameter once per node that reads it ({name!r}, "
            f"{_size(size[name])}, is read by {len(readers)} nodes"
            + (f"; {more} more parameter{'s are' if more > 1 else ' is'} read by several" if more else "")
            + "), more than the one copy a stage holds, so a plan may fit that this refuses")


__all__ = ["RepeatedReadWarning", "repeated_charges", "repeated_note", "repeated_reads_note"]
