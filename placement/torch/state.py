"""State the model writes in place: the operators that read it, as it is, share a stage.

Every stage holds its own copy of the parameters and buffers its operators read
(:mod:`placement.torch.partition`). State the forward pass writes in place (a running mean,
BatchNorm's running statistics, a step counter, an embedding renormalised by ``max_norm``) is
written in one stage's copy only. An operator of another stage that reads the state itself
would read a copy that never changes after the first micro-batch; one that writes it again
would write its own copy; and the gradients come out wrong without an error. So these
operators are kept on one stage (:func:`keep_written_buffers_together`, one colour class,
which every plan keeps on one device):

* every operator that writes into the state, or into a value sharing its memory (a view of
  it, the result of an in-place operator on it);
* every operator that reads the state itself;
* every operator that reads a value sharing its memory before the last write in program order
  (the unsplit model would show it that write's effect on values received earlier).

A value sharing the state's memory that is read after the last write leaves the writers'
stage as a copy taken after every write, so it travels on as any other value.
"""

from __future__ import annotations

from typing import Any, Mapping

from placement.problem.union_find import UnionFind


def written_state(program: Any) -> dict[str, set[str]]:
    """Per parameter or buffer (qualified name) the exported ``program`` writes in place, the names of
    the operators that must share its stage (module docstring)."""
    from placement.torch.contiguity import state_accesses

    nodes = list(program.graph.nodes)
    state = {spec.arg.name: spec.target for spec in program.graph_signature.input_specs
             if spec.kind.name in ("BUFFER", "PARAMETER") and getattr(spec.arg, "name", None) is not None}
    position = {n: i for i, n in enumerate(nodes)}
    out: dict[str, set[str]] = {}
    for n in nodes:
        if n.op != "placeholder" or n.name not in state:
            continue
        writers, readers = state_accesses(n, nodes)
        if writers:
            last = max(position[w] for w in writers)
            out[state[n.name]] = {r.name for r in readers if n in r.all_input_nodes or position[r] <= last}
    return out


def shared_storage(model: Any, written: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of distinct parameters and buffers of ``model`` (names) that share memory, where one of
    them is written in place (``written``, :func:`written_state`): every stage copies each of them on
    its own, so a write into one would not show in the copies of the others."""
    by_storage: dict[int, dict[int, str]] = {}
    for name, tensor in (*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)):
        if tensor is not None and tensor.numel() > 0:
            by_storage.setdefault(tensor.untyped_storage().data_ptr(), {}).setdefault(id(tensor), name)
    return [sorted(tensors.values()) for tensors in by_storage.values()
            if len(tensors) > 1 and any(name in written for name in tensors.values())]


def buffer_readers(pg: Any, written: Mapping[str, set[str]]) -> dict[str, tuple[int, ...]]:
    """Per parameter or buffer of ``written`` (:func:`written_state`) whose operators lie in two or more
    forward nodes of ``pg``, those nodes (ascending)."""
    node_of = {op.name: v for v in range(len(pg.nodes)) for op in pg.node_ops(v)}
    readers = {name: sorted({node_of[op] for op in ops if op in node_of}) for name, ops in sorted(written.items())}
    return {name: tuple(nodes) for name, nodes in readers.items() if len(nodes) >= 2}


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
    return ("the nodes that read a parameter or buffer the model writes in place share one stage, which "
            "holds its only up-to-date copy: " + "; ".join(parts))
