"""Parameters and buffers read by several nodes of one stage: memory the placement model counts more than once.

The placement model charges a node the bytes of the parameters, buffers and constant tensors it
reads (and, in training, its backward node the gradients of its trained parameters), and a device
the sum over its nodes (DESIGN.md §2). A parameter or buffer read by several nodes (a layer applied
several times, as in ALBERT's cross-layer sharing; a tied embedding and output projection; a module
called from two places; a positional table added at two places) is therefore counted once per
reading node on a stage that holds several of them, while the stage holds one copy. The plan is
valid (its true memory is lower than the one checked), but the memory a plan shows exceeds what the
stage holds, and a plan that would fit may be refused. This module measures the difference, so that
the planner can say so, naming each tensor by its kind (:func:`state_kinds`).
"""

from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

from placement.io.opgraph import PlacementGraph, parameter_readers

UNITS = (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10))

#: the kinds of tensor a node may be charged for, in the order a message lists them, and their plurals
KINDS = (("parameter", "parameters"), ("buffer", "buffers"), ("constant tensor", "constant tensors"))
#: what :func:`state_kinds` calls each input kind of an exported program's signature
_SIGNATURE_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant tensor"}
#: the kind said of a name that ``kinds`` does not give
UNKNOWN = "tensor"


class RepeatedReadWarning(UserWarning):
    """A stage of the plan is charged a parameter or buffer once per node of it that reads it."""


def state_kinds(program: Any, names: Mapping[str, str]) -> dict[str, str]:
    """Whether each tensor the exported ``program`` (a ``torch.export.ExportedProgram``) holds is a
    ``"parameter"``, a ``"buffer"`` or a ``"constant tensor"`` (a tensor attribute the model did not
    register), by the name ``names`` gives its target (the target where it gives none)."""
    kinds: dict[str, str] = {}
    for spec in program.graph_signature.input_specs:
        kind = _SIGNATURE_KINDS.get(spec.kind.name)
        if kind is not None and spec.target is not None:
            kinds.setdefault(names.get(spec.target, spec.target), kind)
    return kinds


def _kinds_of(names: Sequence[str], kinds: Mapping[str, str]) -> list[str]:
    """The kinds of ``names`` (:data:`KINDS`' order), each once."""
    found = {kinds.get(name, UNKNOWN) for name in names}
    order = [singular for singular, _ in KINDS] + [UNKNOWN]
    return [kind for kind in order if kind in found]


def _listed(items: Sequence[str], last: str) -> str:
    """``items`` as a list in words: ``"a"``, ``"a or b"``, ``"a, b or c"`` (``last`` the final joint)."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _phrase(names: Sequence[str], kinds: Mapping[str, str]) -> str:
    """What ``names`` are, by kind: ``"parameter"``, ``"parameter or buffer"``."""
    return _listed(_kinds_of(names, kinds), "or")


def _counted(names: Sequence[str], kinds: Mapping[str, str]) -> str:
    """``names`` counted by kind: ``"1 more parameter"``, ``"2 more parameters and 1 buffer"``."""
    plural = dict(KINDS) | {UNKNOWN: f"{UNKNOWN}s"}
    counts = [(kind, sum(1 for name in names if kinds.get(name, UNKNOWN) == kind)) for kind in _kinds_of(names, kinds)]
    said = [f"{n}{' more' if k == 0 else ''} {kind if n == 1 else plural[kind]}" for k, (kind, n) in enumerate(counts)]
    return _listed(said, "and")


def _size(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit it reaches, to three figures (``"4 GiB"``, ``"1000 KiB"``)."""
    for unit, scale in UNITS:
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.3g} bytes"


def _held(pg: PlacementGraph, v: int, names: Mapping[str, str], training: bool) -> dict[str, float]:
    """The bytes forward node ``v`` and (``training``) its backward node are charged per parameter or
    buffer (by ``names``' name for it): what :meth:`PlacementGraph.param_bytes` and, in training,
    :meth:`PlacementGraph.gradient_param_bytes` sum, which the instance charges them."""
    held: dict[str, float] = {}
    for sizes in (pg.param_sizes(v), pg.gradient_param_sizes(v) if training else {}):
        for name, size in sizes.items():
            shared = names.get(name, name)
            held[shared] = held.get(shared, 0.0) + size
    return held


def repeated_charges(pg: PlacementGraph, stages: Sequence[Collection[int]], names: Mapping[str, str],
                     training: bool) -> list[tuple[int, str, int, float]]:
    """Per stage of ``stages`` (instance node ids; the forward nodes are ``pg``'s), each parameter or
    buffer that two or more of its nodes read: ``(stage, name, readers on the stage, bytes counted beyond
    the one copy and, in training, a parameter's gradient)``, in stage and name order."""
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


def repeated_note(charges: Sequence[tuple[int, str, int, float]], memory: Sequence[float],
                  kinds: Mapping[str, str]) -> str | None:
    """One sentence on :func:`repeated_charges`: per stage where they come to at least
    :data:`NOTED_SHARE` of the memory charged to it (``memory[stage]``), the bytes counted beyond what
    it holds, and the parameter or buffer that adds most, each named with its kind (``kinds``:
    :func:`state_kinds`); ``None`` where no stage has such."""
    per_stage: dict[int, list[tuple[str, int, float]]] = {}
    for stage, name, count, extra in charges:
        per_stage.setdefault(stage, []).append((name, count, extra))
    parts, told = [], []
    for stage, items in per_stage.items():
        name, count, extra = max(items, key=lambda item: item[2])
        total = sum(item[2] for item in items)
        if total < NOTED_SHARE * memory[stage]:
            continue
        others = [item[0] for item in items if item[0] != name]
        also = f", and {_counted(others, kinds)}" if others else ""
        told += [item[0] for item in items]
        parts.append(f"stage {stage} by {_size(total)} ({kinds.get(name, UNKNOWN)} {name!r} is read by {count} of "
                     f"its nodes{also})")
    if not parts:
        return None
    return (f"the placement model counts a {_phrase(told, kinds)} once per node that reads it, so the "
            f"memory charged exceeds what a stage holds (one copy): {'; '.join(parts)}. The plan fits; a plan that "
            "would fit with one copy per stage may have been refused")


def repeated_reads_note(pg: PlacementGraph, names: Mapping[str, str], kinds: Mapping[str, str]) -> str | None:
    """For a refusal: the parameters and buffers the model reads from several nodes, which it counts once
    per reading node, each named with its kind (``kinds``: :func:`state_kinds`); ``None`` where there
    are none."""
    shared = parameter_readers(pg, lambda p: True, names)
    if not shared:
        return None
    size = {names.get(p.name, p.name): p.nbytes for op in pg.graph.ops for p in op.params}
    name, readers = max(shared.items(), key=lambda item: size[item[0]] * len(item[1]))
    others = [other for other in shared if other != name]
    more = (f"; {_counted(others, kinds)} {'is' if len(others) == 1 else 'are'} read by several" if others else "")
    return (f"the placement model counts a {_phrase(list(shared), kinds)} once per node that reads it ("
            f"{kinds.get(name, UNKNOWN)} {name!r}, {_size(size[name])}, is read by {len(readers)} nodes{more}), "
            "more than the one copy a stage holds, so a plan may fit that this refuses")


__all__ = ["RepeatedReadWarning", "repeated_charges", "repeated_note", "repeated_reads_note", "state_kinds"]
