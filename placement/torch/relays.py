"""What the stages of a plan send and receive at run time, against what the plan charges.

Model
-----
The placement model (DESIGN.md §2) charges a device that pays for transfers ``Σ_{u∈In(S)} c(u)
+ Σ_{u∈Out(S)} c(u)``: a value once where it is made and once on each device that reads it.
``torch.distributed.pipelining`` stages talk to their neighbours only
(:mod:`placement.torch.partition`): stage ``s`` receives every value live at its first boundary
and sends every value live at its second, whether it reads the value or relays it to a later
stage (a skip connection across it, a model input that a later stage reads; model inputs are
no nodes of the instance, so the model charges them nowhere). In training the gradients of the
floating-point values the model computes travel back the same way (its inputs carry none). So a
stage's transfers at run time, ``(bytes received + bytes sent) / link bandwidth`` per
micro-batch, plus the gradient exchange of the parameters it shares with other stages
(:mod:`placement.torch.sharing`) counted as the plan charges it, exceed the plan's charge by
what it relays, less what the plan charges beyond the bytes that cross: at a cut through a
residual stream in training, the add after the cut is charged the gradients of both its inputs
where one crosses (docs/pytorch.md, "Edges that carry gradients"). (The exchange runs once per
step, after every micro-batch's backward pass, so the plan's per-sample charge for it overstates
its share of a micro-batch; it is counted as charged so that it does not widen the difference.)
:func:`stage_transfers` gives both per stage, and the stage's load with its run-time transfers in
place of the charged ones. Stages on devices that pay no transfers (CPUs) are charged nothing and
counted so here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement.costmodel.roofline import transfer_ms


class RelayWarning(UserWarning):
    """A plan whose stages move more at run time than the plan charges raises its largest load."""


@dataclass(frozen=True)
class StageTransfers:
    """One stage: the transfer time the plan charges it, the time its sends and receives take at run
    time (both per micro-batch, in the instance's unit), and its verified load in the plan."""

    charged: float
    runtime: float
    load: float

    @property
    def runtime_load(self) -> float:
        """The stage's load with its run-time transfers in place of the charged ones."""
        return self.load - self.charged + self.runtime


def _nbytes(part: Any, value: Any, gradients: bool) -> float:
    """Bytes of an FX value's tensor, and of its gradient where ``gradients`` and it carries one
    (:meth:`placement.torch.partition.Partition.carries_gradient`)."""
    import torch

    example = value.meta.get("val")
    if not isinstance(example, torch.Tensor):
        return 0.0
    size = float(example.numel() * example.element_size())
    return 2 * size if gradients and part.carries_gradient(value) else size


def stage_transfers(part: Any, result: Any, problem: Any, bandwidth: float, training: bool) -> list[StageTransfers]:
    """Per stage of ``part`` (:class:`placement.torch.partition.Partition`) and of the plan of ``result``
    (the same stages, in order; the charged transfers and loads are its evaluator's), on the instance
    ``problem``, whose times are in milliseconds, with links of ``bandwidth`` bytes per second (module
    docstring)."""
    out = []
    last = len(part.stages) - 1
    used = [device for device in result.verification.report[0].devices if device.nodes]
    for s, (stage, device) in enumerate(zip(part.stages, used)):
        if not problem.device_types[problem.type_index(device.type)].pays_comm:
            out.append(StageTransfers(0.0, 0.0, device.load))
            continue
        moved = sum(_nbytes(part, v, training) for v in stage.inputs) if s > 0 else 0.0
        moved += sum(_nbytes(part, v, training) for v in stage.outputs) if s < last else 0.0
        runtime = transfer_ms(moved, bandwidth) + exchange_charge(problem, device.nodes)
        out.append(StageTransfers(device.comm, runtime, device.load))
    return out


def exchange_charge(problem: Any, held: Any) -> float:
    """What the plan charges a device holding the nodes ``held`` (ids) for the gradient exchange nodes
    (:mod:`placement.torch.sharing`): ``c(x)`` for each such node ``x`` in its ``In`` or ``Out``."""
    from placement.torch.sharing import SUFFIX

    inside = {problem.index_of(v) for v in held}
    succ = problem.successors()
    total = 0.0
    for x, node in enumerate(problem.nodes):
        if not node.name.endswith(SUFFIX) or not succ[x]:
            continue
        readers_inside = sum(1 for w in succ[x] if w in inside)
        if (x in inside and readers_inside < len(succ[x])) or (x not in inside and readers_inside):
            total += node.out_cost
    return total


#: The relative rise of the plan's largest load, by run-time transfers, that :func:`relay_note` reports
#: (below it, the rise is within the accuracy of the cost model)
NOTED_RISE = 0.01


def relay_note(transfers: list[StageTransfers], unit: str = "ms") -> str | None:
    """A sentence on the stage whose run-time transfers raise the plan's largest load the most, or
    ``None`` where they raise it by at most :data:`NOTED_RISE`."""
    planned = max((t.load for t in transfers), default=0.0)
    worst = max(range(len(transfers)), key=lambda s: transfers[s].runtime_load, default=None)
    if worst is None or transfers[worst].runtime_load <= planned * (1 + NOTED_RISE):
        return None
    t = transfers[worst]
    return (f"at run time stage {worst} spends {t.runtime:.6g} {unit} per micro-batch sending and receiving, "
            f"where the plan charges {t.charged:.6g} {unit}: it relays values that later stages read (skip "
            f"connections, model inputs), which the placement model does not charge, so its load is "
            f"{t.runtime_load:.6g} {unit} against the plan's largest load of {planned:.6g} {unit}; a plan with fewer "
            "stages (stages=N) may run faster")
