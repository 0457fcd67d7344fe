"""Buffers the model writes in place: the nodes that read one directly share a stage.

Every stage holds its own copy of the buffers its operators read (:mod:`placement.torch.partition`).
A buffer the forward pass writes in place (a running mean, a step counter, a cache) is written
in one stage's copy only; an operator of another stage that reads the buffer itself, not the
value the writing stage computes and sends on, would read a copy that never changes after the
first step (before the write in the unsplit model, or after it), and the gradients come out
wrong without an error. So the placement nodes whose operators read such a buffer directly are
put in one colour class (:func:`keep_written_buffers_together`), which every plan keeps on one
device: one stage holds the buffer and every direct read of it. Values computed from the buffer
and read further on travel between stages as any other value.
"""

from __future__ import annotations

from typing import Any, Mapping

from placement.problem.union_find import UnionFind


def written_buffers(program: Any) -> set[str]:
    """The buffers (qualified names) the exported ``program`` writes in place: an operator with a
    mutable schema applied to the buffer, or to a view of it."""
    from placement.torch.contiguity import written_in_place

    nodes = list(program.graph.nodes)
    buffers = {spec.arg.name: spec.target for spec in program.graph_signature.input_specs
               if spec.kind.name == "BUFFER" and getattr(spec.arg, "name", None) is not None}
    return {buffers[n.name] for n in nodes
            if n.op == "placeholder" and n.name in buffers and written_in_place(n, nodes)}


def buffer_readers(pg: Any, buffers: set[str]) -> dict[str, tuple[int, ...]]:
    """Per buffer of ``buffers`` read by two or more forward nodes of ``pg``, those nodes (ascending)."""
    from placement.io.opgraph import parameter_readers

    return parameter_readers(pg, lambda p: p.name in buffers)


def keep_written_buffers_together(instance: Mapping[str, Any], pg: Any,
                                  readers: Mapping[str, tuple[int, ...]]) -> dict:
    """``instance`` (of ``pg``, written by :func:`placement.io.opgraph.to_instance`, possibly with
    added nodes) with the readers of each buffer in ``readers`` in one colour class, with their
    backward nodes and every node of their classes; ``about.written_buffers`` records them."""
    if not readers:
        return dict(instance)
    classes = UnionFind(len(pg.nodes))
    for nodes in readers.values():
        for v in nodes[1:]:
            classes.union(v, nodes[0])
    merged = {v: classes.find(v) for nodes in readers.values() for v in nodes}
    nodes = []
    for node in instance["nodes"]:
        colour = node.get("colorClass", node["id"] if node["id"] < len(pg.nodes) else None)
        if colour in merged:
            node = dict(node, colorClass=merged[colour])
        nodes.append(node)
    about = dict(instance.get("about", {}), written_buffers={name: list(v) for name, v in readers.items()})
    return {**instance, "about": about, "nodes": nodes}


def together_note(readers: Mapping[str, tuple[int, ...]], pg: Any) -> str:
    """Why some nodes share a stage, for a message when no plan fits."""
    parts = [f"{name!r} (written in place; read by {', '.join(pg.nodes[v].name for v in nodes)})"
             for name, nodes in readers.items()]
    return ("the nodes that read a buffer the model writes in place share one stage, which holds its "
            "only up-to-date copy: " + "; ".join(parts))
