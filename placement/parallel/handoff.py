"""A parallel plan as a Megatron-style configuration, where one exists.

Megatron-LM runs every pipeline stage with the same tensor-parallel size and the same data-
parallel size: ``world size = tensor · pipeline · data``. A plan whose stages all share one
``t`` and one ``d`` is expressible: tensor ``t``, pipeline ``S`` (the number of stages), data ``d``,
and the layout (each stage's nodes as ``id:name``, or ``id`` where the instance names none). A plan
whose degrees differ between stages is not, and :func:`megatron_config` says which stages differ;
nor is a plan whose stages run on different device types (Megatron-LM's world is one kind of device).
An expressible configuration also lists the nodes that run another TMPC than their first (``other_tmpcs``:
activation recomputation, in Piper's files), which the degrees alone do not say.
"""

from __future__ import annotations

from typing import Any

from placement.io.piper import PiperInstance
from placement.parallel.plan import ParallelPlan


def megatron_config(instance: PiperInstance, plan: ParallelPlan) -> dict[str, Any]:
    """``{"expressible": True, "tensor", "pipeline", "data", "devices", "layout", "other_tmpcs"}`` for uniform degrees;
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
            "layout": [[names[v] for v in stage.nodes] for stage in plan.stages],
            "other_tmpcs": other_tmpcs(instance, plan)}


def other_tmpcs(instance: PiperInstance, plan: ParallelPlan) -> dict[str, dict[str, list[int]]]:
    """Per stage (its index, as text) that has any, the nodes whose chosen TMPC is not their first of the stage's
    degree ``t``, by TMPC id (``{"0": {"activation recomp": [5, 6, 7]}}``): a configuration the runtime must be
    told of beside the degrees (Megatron-LM's recomputation options, for one)."""
    first = {node.id: {t: tmpcs[0].id for t, tmpcs in node.configurations.items() if tmpcs} for node in instance.nodes}
    found: dict[str, dict[str, list[int]]] = {}
    for i, stage in enumerate(plan.stages):
        for v in stage.nodes:
            chosen = stage.tmpcs.get(v)
            if chosen is not None and chosen != first[v].get(stage.t):
                found.setdefault(str(i), {}).setdefault(chosen, []).append(v)
    return found


__all__ = ["megatron_config"]
