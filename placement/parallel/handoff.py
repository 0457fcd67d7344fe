"""A parallel plan as a Megatron-style configuration, where one exists.

Megatron-LM runs every pipeline stage with the same tensor-parallel size and the same data-
parallel size: ``world size = tensor · pipeline · data``. A plan whose stages all share one
``t`` and one ``d`` is expressible: tensor ``t``, pipeline ``S`` (the number of stages), data ``d``,
and the layout (each stage's nodes as ``id:name``, or ``id`` where the instance names none). A plan
whose degrees differ between stages is not, and :func:`megatron_config` says which stages differ;
nor is a plan whose stages run on different device types (Megatron-LM's world is one kind of device).
"""

from __future__ import annotations

from typing import Any

from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan


def megatron_config(instance: PiperInstance, plan: ParallelPlan) -> dict[str, Any]:
    """``{"expressible": True, "tensor", "pipeline", "data", "devices", "layout"}`` for uniform degrees;
    ``{"expressible": False, "reason"}`` otherwise."""
    kinds = list(dict.fromkeys(s.device_type for s in plan.stages))
    if len(kinds) > 1:
        listed = ", ".join(f"stage {i}: {s.device_type}" for i, s in enumerate(plan.stages))
        return {"expressible": False,
                "reason": f"Megatron-LM runs every stage on one kind of device; this plan's stages differ ({listed})"}
    degrees = sorted({(s.t, s.d) for s in plan.stages})
    if len(degrees) != 1:
        listed = ", ".join(f"stage {i}: t={s.t}, d={s.d}" for i, s in enumerate(plan.stages))
        return {"expressible": False,
                "reason": "Megatron-LM gives every pipeline stage the same tensor- and data-parallel sizes; "
                          f"this plan's stages differ ({listed})"}
    t, d = degrees[0]
    names = {node.id: f"{node.id}:{node.name}" if node.name else str(node.id) for node in instance.nodes}
    return {"expressible": True, "tensor": t, "pipeline": len(plan.stages), "data": d,
            "devices": t * d * len(plan.stages),
            "layout": [[names[v] for v in stage.nodes] for stage in plan.stages]}


__all__ = ["megatron_config"]
