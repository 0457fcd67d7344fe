"""Parameters read by several stages: what the plan charges for them, and how their gradients are summed.

A trained parameter read by operators of several stages (a tied embedding and output
projection, a module called from two places) is held by every such stage, one tensor per
stage. Each holder computes the part of the gradient that its operators contribute; after
the backward pass of a step the parts are summed and every holder receives the sum, so the
copies take identical optimiser steps and never drift apart.

The exchange (:class:`GradientExchange`)
----------------------------------------
Per shared parameter, in the order of their names, over point-to-point messages in the
pipeline's process group: every holder but the first (in stage order) sends its part to the
first, which adds them in stage order and sends the sum back. Every holder ends with the same
bits; no process group beyond the pipeline's is created. Gradients a holder had before the
step (accumulation over several steps) are kept out of the exchange and added back after it.

The cost charged (:func:`charge_gradient_exchange`)
---------------------------------------------------
For a training instance, each trained parameter of ``P`` bytes read by forward nodes
``u_1, …, u_k`` (``k ≥ 2``, in program order) adds one backward node ``x`` named
``<parameter>.grad-exchange``: zero time and memory, colour class of ``u_1`` (so it sits on
``u_1``'s device), transfer cost ``c(x) = 2P / (link bandwidth · m)``, and an edge ``x → grad(u_i)``
for ``i ≥ 2`` of ``2P`` bytes. Loads are times per micro-batch, and the exchange runs once per step
of ``m`` micro-batches, so each micro-batch is charged its ``1/m`` share (charged whole, it made the
exchange of GPT-2's tied 200 MiB embedding the largest load and left a stage to the output
projection alone). By the load of DESIGN.md §2 a device pays ``c(x)`` once when
the readers of the parameter span more than one device (``u_1``'s device in ``Out``, every
other holder in ``In``), and nothing when they share one. That is the exchange above between
two holders exactly (each sends ``P`` and receives ``P``, not overlapped); with ``k > 2``
holding devices the first one moves ``2(k-1)P`` and is charged ``2P``. The node is a backward
node of a class that has forward nodes, so it adds no precedence between stages: any plan of
the model without it remains a plan, with the same stages.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from placement.costmodel.roofline import transfer_ms
from placement.io.opgraph import shared_parameters

SUFFIX = ".grad-exchange"


def charge_gradient_exchange(instance: Mapping[str, Any], pg: Any, bandwidth: float,
                             names: Mapping[str, str], microbatches: int = 1) -> dict:
    """``instance`` (a training instance of ``pg``) with the exchange nodes of the module docstring,
    for steps of ``microbatches`` micro-batches; ``names`` as in
    :func:`placement.io.opgraph.shared_parameters`."""
    shared = shared_parameters(pg, names)
    if not shared:
        return dict(instance)
    n = len(pg.nodes)
    nbytes = {names.get(p.name, p.name): p.nbytes for op in pg.graph.ops for p in op.params}
    quantum = float(instance["about"].get("time_quantum_ms", 0.0)) or None
    nodes = list(instance["nodes"])
    edges = list(instance["edges"])
    next_id = max(node["id"] for node in nodes) + 1
    for name, readers in shared.items():
        size = 2.0 * nbytes[name]
        cost = transfer_ms(size, bandwidth) / microbatches   # once per step: its share per micro-batch
        if quantum is not None:
            cost = quantum * round(cost / quantum)
        first = readers[0]
        nodes.append({"id": next_id, "name": name + SUFFIX, "supportedOnFpga": True, "cpuLatency": 0.0,
                      "fpgaLatency": 0.0, "isBackwardNode": True, "colorClass": first, "size": 0.0,
                      "forward": first, "flops": 0.0, "bytes": 0.0})
        edges += [{"sourceId": next_id, "destId": n + v, "cost": cost, "size": size} for v in readers[1:]]
        next_id += 1
    about = dict(instance["about"], shared_parameters={name: list(readers) for name, readers in shared.items()})
    return {**instance, "about": about, "nodes": nodes, "edges": edges}


class GradientExchange:
    """Sums the gradients of shared parameters across their holder stages (module docstring).

    ``entries`` are ``(parameter, holder stages)`` for the parameters this stage holds, in the
    order of their names; ``rank_of(stage)`` is the global rank that runs a stage.
    """

    def __init__(self, stage_index: int, entries: Sequence[tuple[Any, tuple[int, ...]]],
                 rank_of: Callable[[int], int], group: Any) -> None:
        self.stage_index = stage_index
        self.entries = tuple(entries)
        self.rank_of = rank_of
        self.group = group

    def set_aside(self) -> list[Any]:
        """Take the gradients the shared parameters hold now out of the way of the next step."""
        kept = [p.grad for p, _ in self.entries]
        for p, _ in self.entries:
            p.grad = None
        return kept

    def put_back(self, kept: Sequence[Any]) -> None:
        """Give back what :meth:`set_aside` took, where the step raised before the exchange: a step that
        failed (stage 0's typed error for a micro-batch unlike the plan's) must leave the gradients the
        caller accumulated, as it leaves those of every other parameter."""
        for (p, _), before in zip(self.entries, kept):
            if before is not None:
                p.grad = before if p.grad is None else before + p.grad

    def exchange(self, kept: Sequence[Any], scale: float = 1) -> None:
        """Sum this step's gradients over the holders; add back what :meth:`set_aside` took, divided by
        ``scale`` (as the schedule divided every other gradient the stage holds)."""
        import torch
        import torch.distributed as dist

        for (p, holders), before in zip(self.entries, kept):
            # an embedding's sparse gradient travels dense (gloo sends strided tensors only), with the layouts'
            # maximum beside it: 0 no gradient, 1 sparse, 2 dense; the sum is sparse where no holder's part is
            # dense, as autograd adds sparse gradients into a sparse one and a dense one into a dense one
            layout = 0 if p.grad is None else 1 if p.grad.is_sparse else 2
            part = torch.zeros_like(p) if p.grad is None else p.grad.to_dense() if layout == 1 else p.grad
            first = holders[0]
            if self.stage_index == first:
                total = part.clone()
                buffer, theirs = torch.empty_like(part), torch.zeros(1, dtype=torch.int64, device=p.device)
                for h in holders[1:]:
                    dist.recv(theirs, src=self.rank_of(h), group=self.group)
                    layout = max(layout, int(theirs))
                    dist.recv(buffer, src=self.rank_of(h), group=self.group)
                    total += buffer
                for h in holders[1:]:
                    dist.send(torch.tensor([layout], device=p.device), dst=self.rank_of(h), group=self.group)
                    dist.send(total, dst=self.rank_of(h), group=self.group)
            else:
                dist.send(torch.tensor([layout], device=p.device), dst=self.rank_of(first), group=self.group)
                dist.send(part.contiguous(), dst=self.rank_of(first), group=self.group)
                theirs, total = torch.zeros(1, dtype=torch.int64, device=p.device), torch.empty_like(part)
                dist.recv(theirs, src=self.rank_of(first), group=self.group)
                dist.recv(total, src=self.rank_of(first), group=self.group)
                layout = int(theirs)
            if layout == 0:   # no holder got a gradient this step: none, as autograd leaves none in the model
                p.grad = before / scale if before is not None and scale != 1 else before
                continue
            total = total.to_sparse() if layout == 1 else total
            p.grad = total if before is None else (before / scale if scale != 1 else before) + total
