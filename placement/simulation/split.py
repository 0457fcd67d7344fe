"""A split-backward plan seen as a pipeline: forward, activation-gradient and weight-gradient tasks.

Model implemented
-----------------
A split plan (:mod:`placement.problem.split`) lists its devices in pipeline order; a device's
``nodes`` are its *layers*, ``b_tasks`` / ``w_tasks`` the backward nodes whose activation-gradient
task B and weight-gradient task W run there (a node listed nowhere runs both with its layer). The
stages are the devices with layer nodes, in the plan's order. Per micro-batch a stage runs up to
three calls: ``F`` (its forward layer nodes), ``B`` (the B parts it runs) and ``W`` (the W parts
it runs), each receive + compute + send. A backward node ``u`` splits its time into ``W_t(u)`` and
``B_t(u) = p_t(u) − W_t(u)`` (:func:`placement.problem.split.split_times`).

This module derives everything else from the instance's edges, tensor by tensor:

* a node ``x`` produces one tensor, in the call of the part that computes it (``F`` of its
  layer stage for a forward node, ``B`` where ``B(x)`` runs for a backward node);
* the parts that read it: ``F`` of the layer stage of every forward successor; ``B`` and ``W``
  of every backward successor (where each runs); and ``W(u)`` of every backward ``u`` whose colour
  class holds a forward node that reads ``x`` (W reads its layer's forward input);
* a stage that pays communication pays ``c(x)`` once if it produces ``x`` and a reader runs
  elsewhere (in the producing call) and once if it reads ``x`` produced elsewhere (in its first
  call that reads it, in the order ``F``, ``B``, ``W``).

A call waits for the calls that produce what it receives (same micro-batch); on a stage ``B``
waits for ``F`` and ``W`` for ``B``. Per micro-batch a stage is then busy exactly its load: the
sum of its parts' times and its transfers.

Memory: node memory (``m(v)`` of its layer nodes and of the backward nodes whose B it runs for
another stage) is held throughout; a W part that runs away from its layer keeps the tensors it
reads from the moment they are on its stage (the end of the call that produces them: a send ends
its call) to the end of the W call (``w_inputs``); the activations of the stage's forward nodes
are held per micro-batch in flight, as for joint plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from placement.errors import InvalidParameterError
from placement.plan import Plan
from placement.problem.instance import Instance
from placement.problem.split import SplitModel, split_model, split_times
from placement.simulation.pipeline import BACKWARD, FORWARD, WEIGHT, Pipeline, Stage, runnable_inputs
from placement.verification.split import tensor_bytes

KIND_ORDER = (FORWARD, BACKWARD, WEIGHT)


@dataclass(frozen=True)
class WInput:
    """A tensor a stage's W call reads for a part whose layer is elsewhere: its bytes and the
    call ``(stage, kind)`` that produces it."""

    node: int
    stage: int
    kind: str
    size: float


def is_split_plan(plan: Plan) -> bool:
    """Whether ``plan`` places some B or W task explicitly (a split-backward plan)."""
    return any(d.b_tasks or d.w_tasks for d in plan.devices)


def plan_split_record(recorded: Mapping[str, Any], plan: object = None) -> dict[str, object]:
    """What a split plan records of how it was solved, from its backward record (``recorded``:
    :func:`placement.io.plans.recorded_backward` of a Result, plan document or plan file, ``plan``): ``w_share``
    (a float), ``w_placement`` and ``inter_layer``, each left out when not recorded (``null``). A value that
    is no value of its option (:func:`placement.problem.split.split_model`) is an :class:`InvalidPlanError`
    naming the plan's file, worded as :func:`placement.verify` words it: run under another variant than the one
    solved, the plan would be judged by rules it was not made for."""
    from placement.io.plans import plan_error

    found = {k: recorded[k] for k in ("w_share", "w_placement", "inter_layer") if recorded.get(k) is not None}
    try:
        checked = split_model(**found)
    except InvalidParameterError as exc:
        raise plan_error(plan, f"the plan's backward record: {exc}") from None
    return {k: getattr(checked, k) for k in found}


def build_split_pipeline(problem: Instance, plan: Plan, model: SplitModel) -> Pipeline:
    """The pipeline of the split plan ``plan`` under ``model`` (see the module docstring).

    Raises :class:`InvalidParameterError` for a plan that does not place every node's layer,
    places a part on a device without layers, or whose calls wait for each other in a cycle.
    """
    if not problem.is_training:
        raise InvalidParameterError("plan", "is a split-backward plan, but the instance has no backward nodes")
    stage_of_device = {}
    for d, dev in enumerate(plan.devices):
        if dev.nodes:
            stage_of_device[d] = len(stage_of_device)
    layer: dict[int, int] = {}
    for d, dev in enumerate(plan.devices):
        for v in dev.nodes:
            if v in layer:
                raise InvalidParameterError("plan", f"places node {v} on two devices")
            layer[v] = stage_of_device[d]
    known = {n.id for n in problem.nodes}
    unknown = [v for v in layer if v not in known]
    if unknown:
        raise InvalidParameterError("plan", f"places node {unknown[0]}, which is not in the instance")
    missing = [n.id for n in problem.nodes if n.id not in layer]
    if missing:
        raise InvalidParameterError("plan", f"places no layer for node {missing[0]} (a split plan lists every node)")
    backward = [n.id for n in problem.nodes if n.backward]
    b_at = {u: layer[u] for u in backward}
    w_at = {u: layer[u] for u in backward}
    listed: dict[tuple[str, int], int] = {}
    for d, dev in enumerate(plan.devices):
        for field, where in (("b_tasks", b_at), ("w_tasks", w_at)):
            for u in getattr(dev, field):
                if u not in where:
                    raise InvalidParameterError("plan", f"device {d} lists node {u} in {field}, which is not a "
                                                        "backward node")
                if (field, u) in listed:
                    raise InvalidParameterError("plan", f"lists node {u} in {field} on devices {listed[field, u]} "
                                                        f"and {d} (a task runs once)")
                listed[field, u] = d
                if d not in stage_of_device:
                    raise InvalidParameterError("plan", f"device {d} runs a task of node {u} but holds no layer")
                where[u] = stage_of_device[d]

    devices = [plan.devices[d] for d in stage_of_device]
    n = len(devices)
    types = [problem.type_index(dev.type) for dev in devices]
    b_times, w_times = split_times(problem, model)
    index = problem.index_of

    # who produces each tensor, and which calls read it
    produced = {v: ((b_at[v], BACKWARD) if problem.node(v).backward else (layer[v], FORWARD)) for v in layer}
    readers: dict[int, set[tuple[int, str]]] = {v: set() for v in layer}
    forward_of_colour: dict[int, list[int]] = {}
    for node in problem.nodes:
        if not node.backward and node.colour is not None:
            forward_of_colour.setdefault(node.colour, []).append(node.id)
    preds: dict[int, list[int]] = {v: [] for v in layer}
    for e in problem.edges:
        preds[e.dst].append(e.src)
        if problem.node(e.dst).backward:
            readers[e.src].update(((b_at[e.dst], BACKWARD), (w_at[e.dst], WEIGHT)))
        else:
            readers[e.src].add((layer[e.dst], FORWARD))
    w_reads: dict[int, set[int]] = {}
    for u in backward:
        reads = set(preds[u])
        colour = problem.node(u).colour
        for f in forward_of_colour.get(colour, []) if colour is not None else []:
            reads.update(preds[f])
        w_reads[u] = reads
        for x in reads:
            readers[x].add((w_at[u], WEIGHT))

    compute = [{k: 0.0 for k in KIND_ORDER} for _ in range(n)]
    receive = [{k: 0.0 for k in KIND_ORDER} for _ in range(n)]
    send = [{k: 0.0 for k in KIND_ORDER} for _ in range(n)]
    static = [0.0] * n
    static_sizes: list[list[float]] = [[] for _ in range(n)]
    for v in layer:
        node = problem.node(v)
        i = index(v)
        if node.backward:
            s_b, s_w = b_at[v], w_at[v]
            compute[s_b][BACKWARD] += _time(b_times[i][types[s_b]], v, s_b)
            compute[s_w][WEIGHT] += _time(w_times[i][types[s_w]], v, s_w)
            if s_b != layer[v]:
                static[s_b] += node.memory
                static_sizes[s_b].append(node.memory)
        else:
            compute[layer[v]][FORWARD] += _time(node.times[types[layer[v]]], v, layer[v])
        static[layer[v]] += node.memory
        static_sizes[layer[v]].append(node.memory)

    inputs: dict[tuple[int, str], set[tuple[int, str]]] = {(s, k): set() for s in range(n) for k in KIND_ORDER}
    pays = [problem.device_types[t].pays_comm for t in types]
    size = tensor_bytes(problem)
    w_inputs: list[list[WInput]] = [[] for _ in range(n)]
    from_start = problem.timeless_backward_sources()   # waits that need not be (placement.simulation.pipeline)
    held: set[tuple[tuple[int, str], tuple[int, str]]] = set()
    for x in sorted(layer, key=index):
        source = produced[x]
        cost = problem.node(x).out_cost
        outside = {s for s, _ in readers[x]} - {source[0]}
        if outside and pays[source[0]]:
            send[source[0]][source[1]] += cost
        for s in sorted(outside):
            first = min((k for t, k in readers[x] if t == s), key=KIND_ORDER.index)
            inputs[(s, first)].add(source)
            if x in from_start and source[0] < s:
                held.add(((s, first), source))
            if pays[s]:
                receive[s][first] += cost
        for s, k in readers[x]:
            if s == source[0] and k != source[1]:
                inputs[(s, k)].add(source)
    for u in backward:
        if w_at[u] != layer[u]:
            for x in sorted(w_reads[u], key=index):
                s_x, k_x = produced[x]
                w_inputs[w_at[u]].append(WInput(x, s_x, k_x, size[x]))

    unsized = {e.src for e in problem.edges if e.size is None}
    counted = {x.node for kept in w_inputs for x in kept}   # W inputs, and the activations below
    stages = []
    for s, dev in enumerate(devices):
        dtype = problem.device_types[types[s]]
        activation = 0.0
        activation_sizes = []
        for v in dev.nodes:
            if not problem.node(v).backward and readers[v]:
                activation += size[v]
                activation_sizes.append(size[v])
                counted.add(v)
        load = sum(compute[s].values()) + sum(receive[s].values()) + sum(send[s].values())
        stages.append(Stage(index=s, position=list(stage_of_device)[s], type=dev.type, pays_comm=dtype.pays_comm,
                            nodes=tuple(dev.nodes), compute=compute[s], receive=receive[s], send=send[s],
                            load=load, static_memory=static[s], memory_bound=dtype.memory,
                            activation_bytes=activation, static_sizes=tuple(static_sizes[s]),
                            activation_sizes=tuple(activation_sizes)))
    # on a stage, B waits for F and W for B
    for s in range(n):
        inputs[(s, BACKWARD)].add((s, FORWARD))
        inputs[(s, WEIGHT)].add((s, BACKWARD))
        for k in KIND_ORDER:
            inputs[(s, k)].discard((s, k))
    inputs = runnable_inputs(stages, inputs, held, KIND_ORDER)
    return Pipeline(stages=tuple(stages), inputs={key: tuple(sorted(val)) for key, val in inputs.items()},
                    training=True, max_load=max(st.load for st in stages), evaluation=None,
                    w_inputs=tuple(tuple(w) for w in w_inputs), split=True, unsized=bool(counted & unsized))


def _time(value: float | None, node: int, stage: int) -> float:
    if value is None:
        raise InvalidParameterError("plan", f"runs a task of node {node} on stage {stage}, whose device type "
                                            "does not support it")
    return value
