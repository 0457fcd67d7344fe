"""From a plan of an imported model to what pipeline runtimes consume.

An instance made by the importers (:func:`placement.io.torch_export.import_torch`,
:func:`placement.io.onnx_import.import_onnx`) records, per forward node, the module it
belongs to, the modules whose call begins at it (``starts``) and the program's operators it
holds (``ops``); node ids follow program order.
A plan in ``stages`` contiguity lists its devices in pipeline order. The *stages* of a plan
are the forward nodes of its devices, in that order (backward nodes go with their forward
mates).

* :func:`split_spec` — ``{module FQN: SplitPoint.BEGINNING}`` for
  ``torch.distributed.pipelining.pipeline``. It exists when every stage is an interval of
  program order and every stage after the first begins where a module, called once in the
  program, begins its call.
* :func:`pipe_split_module` — otherwise (a boundary inside a module, or stages that are not
  intervals of program order): the exported program as a ``GraphModule`` whose operators
  are reordered stage by stage (a topological order, since stages form a chain of ideals)
  with a ``pipe_split()`` call between consecutive stages; ``pipeline(gm, mb_args)``
  splits it there.
* :func:`deepspeed_parts` — the ``parts`` list of DeepSpeed's ``PipelineModule`` (stage
  ``i`` holds layers ``parts[i]`` to ``parts[i+1] - 1``), the layers being the forward
  nodes in program order; needs stages that are intervals of program order.
* :func:`megatron_layout` — Megatron-Core's pipeline layout string (its
  ``pipeline_model_parallel_layout`` setting: ``E`` embedding, ``t`` transformer layer,
  ``L`` loss, ``|`` between stages), where the graph is a layer chain: the transformer
  layers are the modules ``P.0, P.1, …`` of the longest numbered module list ``P``; what
  precedes the first layer is the embedding, what follows the last is the loss part; each
  must lie in one stage and no boundary may fall inside a layer.

Every function raises an :class:`InvalidParameterError` with a one-line reason when the plan
(or the layout, or the program) cannot be expressed in its form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.jsonfile import load_json
from placement.plan import Plan


@dataclass(frozen=True)
class LayoutNode:
    """A forward node of an imported instance: its module, the modules beginning at it, its operators."""

    id: int
    name: str
    module: str
    starts: tuple[str, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    """The forward nodes of an imported instance in program order, and backward id -> forward id."""

    nodes: tuple[LayoutNode, ...]
    mates: dict[int, int]

    def position(self) -> dict[int, int]:
        return {node.id: k for k, node in enumerate(self.nodes)}


def layout_from_instance(data: Any) -> Layout:
    """The :class:`Layout` recorded in an instance made by the importers."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise InvalidInstanceError("the instance has no node list")
    forward: list[LayoutNode] = []
    mates: dict[int, int] = {}
    for raw in data["nodes"]:
        if not isinstance(raw, dict) or "id" not in raw:
            raise InvalidInstanceError("the instance has a node without an id")
        if raw.get("isBackwardNode") in (True, 1):
            if "forward" not in raw:
                raise InvalidInstanceError(f"backward node {raw['id']} does not name its forward node; "
                                           "only instances made by the model importers can be exported")
            mates[raw["id"]] = raw["forward"]
            continue
        if "ops" not in raw or "module" not in raw:
            raise InvalidInstanceError(f"node {raw['id']} has no module metadata; "
                                       "only instances made by the model importers can be exported")
        forward.append(LayoutNode(raw["id"], str(raw.get("name", raw["id"])), raw["module"],
                                  tuple(raw.get("starts", ())), tuple(raw["ops"])))
    forward.sort(key=lambda n: n.id)
    return Layout(tuple(forward), mates)


def read_layout(path: str | Path) -> Layout:
    """The layout of an instance file made by the model importers; errors name the file."""
    data = load_json(path, InvalidInstanceError)
    try:
        return layout_from_instance(data)
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None


def stages(layout: Layout, plan: Plan) -> list[list[int]]:
    """The forward node ids of each device of the plan, in pipeline order, each in program order.

    Devices holding no forward node are left out. Every forward node must be placed once,
    and a backward node on the device of its forward mate.
    """
    known = {node.id for node in layout.nodes}
    where: dict[int, int] = {}
    result: list[list[int]] = []
    for d, device in enumerate(plan.devices):
        mine = []
        for v in device.nodes:
            if v in layout.mates:
                continue
            if v not in known:
                raise InvalidParameterError("plan", f"places node {v}, which the instance does not have")
            if v in where:
                raise InvalidParameterError("plan", f"places node {v} on two devices")
            where[v] = d
            mine.append(v)
        if mine:
            result.append(sorted(mine))
    missing = sorted(known - set(where))
    if missing:
        raise InvalidParameterError("plan", f"does not place node {missing[0]} ({_name(layout, missing[0])})")
    for d, device in enumerate(plan.devices):
        for v in device.nodes:
            if v in layout.mates and where.get(layout.mates[v]) != d:
                raise InvalidParameterError("plan", f"does not place backward node {v} on the device of its forward "
                                                    f"node {layout.mates[v]}")
    return result


def _name(layout: Layout, node_id: int) -> str:
    for node in layout.nodes:
        if node.id == node_id:
            return node.name
    return str(node_id)


def _require_intervals(layout: Layout, parts: list[list[int]], form: str) -> None:
    """Each stage must be a run of consecutive nodes in program order, stages in order."""
    position = layout.position()
    expected = 0
    for k, stage in enumerate(parts):
        got = sorted(position[v] for v in stage)
        if got != list(range(expected, expected + len(stage))):
            first_out = next(p for p in range(expected, expected + len(stage) + 1) if p not in got)
            raise InvalidParameterError("plan", f"cannot be written as {form}, which needs stages that are intervals "
                                                f"of program order: stage {k} does not hold "
                                                f"{layout.nodes[first_out].name!r}, which comes between its nodes")
        expected += len(stage)


def split_points(layout: Layout, plan: Plan) -> list[str]:
    """The module FQNs at which stages 1, 2, … begin (see :func:`split_spec`)."""
    parts = stages(layout, plan)
    _require_intervals(layout, parts, "a split_spec")
    by_id = {node.id: node for node in layout.nodes}
    points = []
    for k, stage in enumerate(parts[1:], start=1):
        first = by_id[stage[0]]
        if not first.starts:
            raise InvalidParameterError("plan", f"cannot be written as a split_spec: stage {k} begins at "
                                                f"{first.name!r}, which is not where a module called once begins; "
                                                "use pipe_split_module instead")
        points.append(first.starts[0])
    return points


def split_spec(layout: Layout, plan: Plan) -> dict[str, Any]:
    """``{module FQN: SplitPoint.BEGINNING}`` for ``torch.distributed.pipelining.pipeline`` (needs torch)."""
    points = split_points(layout, plan)
    from placement.io.torch_export import require_torch

    require_torch()
    from torch.distributed.pipelining import SplitPoint

    return {fqn: SplitPoint.BEGINNING for fqn in points}


def deepspeed_parts(layout: Layout, plan: Plan) -> dict[str, list]:
    """``{"layers": [node names in program order], "parts": [stage boundaries]}`` for DeepSpeed."""
    parts = stages(layout, plan)
    _require_intervals(layout, parts, "DeepSpeed parts")
    bounds = [0]
    for stage in parts:
        bounds.append(bounds[-1] + len(stage))
    return {"layers": [node.name for node in layout.nodes], "parts": bounds}


def layer_stack(layout: Layout) -> tuple[str, list[int | None]]:
    """The numbered module list ``P`` with the most entries, and each node's layer index (``None`` outside)."""
    indices: dict[str, set[int]] = {}
    for node in layout.nodes:
        module = node.module
        for match in re.finditer(r"\.(\d+)(?=\.|$)", module):
            prefix = module[:match.start()]
            indices.setdefault(prefix, set()).add(int(match.group(1)))
    candidates = [(len(ix), -len(prefix), prefix) for prefix, ix in indices.items() if len(ix) >= 2]
    if not candidates:
        raise InvalidParameterError("layout", "has no numbered list of layers (modules P.0, P.1, …), so no Megatron "
                                              "layout")
    prefix = max(candidates)[2]
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)(?=\.|$)")
    layer: list[int | None] = []
    for node in layout.nodes:
        match = pattern.match(node.module)
        layer.append(int(match.group(1)) if match else None)
    return prefix, layer


def megatron_layout(layout: Layout, plan: Plan) -> str:
    """Megatron-Core's pipeline layout string for the plan (module docstring)."""
    parts = stages(layout, plan)
    _require_intervals(layout, parts, "a Megatron layout")
    prefix, layer = layer_stack(layout)
    positions = [k for k, index in enumerate(layer) if index is not None]
    first, last = positions[0], positions[-1]
    for k in range(first, last + 1):
        if layer[k] is None:
            raise InvalidParameterError("layout", f"is not a layer chain, so no Megatron layout: "
                                                  f"{layout.nodes[k].name!r} lies between the layers of {prefix} "
                                                  "but in none of them")
    position = layout.position()
    stage_of = {position[v]: s for s, stage in enumerate(parts) for v in stage}
    layer_stage: dict[int, int] = {}
    for k in positions:
        index = layer[k]
        if layer_stage.setdefault(index, stage_of[k]) != stage_of[k]:
            raise InvalidParameterError("plan", f"cannot be written as a Megatron layout: a stage boundary falls "
                                                f"inside layer {prefix}.{index}")
    pre = {stage_of[k] for k in range(first)}
    post = {stage_of[k] for k in range(last + 1, len(layout.nodes))}
    if len(pre) > 1:
        raise InvalidParameterError("plan", f"cannot be written as a Megatron layout: the part before the first "
                                            f"layer spans stages {min(pre)} to {max(pre)}; Megatron keeps the "
                                            "embedding in one stage")
    if len(post) > 1:
        raise InvalidParameterError("plan", f"cannot be written as a Megatron layout: the part after the last "
                                            f"layer spans stages {min(post)} to {max(post)}; Megatron keeps the "
                                            "loss part in one stage")
    text = []
    for s in range(len(parts)):
        count = sum(1 for stage in layer_stage.values() if stage == s)
        text.append(("E" if s in pre else "") + "t" * count + ("L" if s in post else ""))
    return "|".join(text)


def pipe_split_module(program: Any, layout: Layout, plan: Plan) -> Any:
    """The exported program as a ``GraphModule`` reordered stage by stage, with ``pipe_split()`` between stages.

    ``program`` is the ``torch.export.ExportedProgram`` the instance was made from
    (``ImportedModel.source``). Operators the instance does not hold (getitems, shape
    queries, assertions, guards) go to the earliest stage that uses them, or, unused, to
    the stage of their latest input.
    """
    from placement.io.torch_export import require_torch

    require_torch()
    from torch.distributed.pipelining import pipe_split

    parts = stages(layout, plan)
    by_id = {node.id: node for node in layout.nodes}
    stage_of_op = {op: s for s, stage in enumerate(parts) for v in stage for op in by_id[v].ops}
    gm = program.module()
    graph = gm.graph
    fixed_kinds = ("placeholder", "get_attr", "output")
    movable = [n for n in graph.nodes if n.op not in fixed_kinds]
    missing = sorted(set(stage_of_op) - {n.name for n in movable})
    if missing:
        raise InvalidParameterError("program", f"has no operator {missing[0]!r}; was the instance made from this "
                                               "program?")
    low: dict[Any, int] = {}
    for n in movable:
        low[n] = max((low.get(a, 0) for a in n.all_input_nodes), default=0)
        if n.name in stage_of_op:
            if stage_of_op[n.name] < low[n]:
                raise InvalidParameterError("plan", f"is not a pipeline: it places operator {n.name!r} in stage "
                                                    f"{stage_of_op[n.name]}, before an input computed in stage "
                                                    f"{low[n]}")
            low[n] = stage_of_op[n.name]
    stage: dict[Any, int] = {}
    for n in reversed(movable):
        if n.name in stage_of_op:
            stage[n] = stage_of_op[n.name]
            continue
        users = [stage[u] for u in n.users if u in stage]
        stage[n] = min(users) if users else low[n]
    for n in movable:
        late = [a for a in n.all_input_nodes if stage.get(a, 0) > stage[n]]
        if late:
            raise InvalidParameterError("plan", f"is not a pipeline: operator {n.name!r} would run in stage "
                                                f"{stage[n]}, before its input {late[0].name!r} in stage "
                                                f"{stage[late[0]]}")
    order = [n for n in graph.nodes if n.op in ("placeholder", "get_attr")]
    anchor = order[-1] if order else None
    for s in range(len(parts)):
        if s > 0:
            if anchor is None:
                raise InvalidParameterError("program", "has no inputs to anchor the first pipe_split")
            with graph.inserting_after(anchor):
                anchor = graph.call_function(pipe_split, ())
        for n in movable:
            if stage[n] == s:
                if anchor is not None and anchor is not n:
                    anchor.append(n)
                anchor = n
    graph.lint()
    gm.recompile()
    return gm
