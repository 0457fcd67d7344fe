"""A plan seen as a pipeline of stages: what each stage's tasks cost and what they wait for.

Model implemented
-----------------
A *stage* is one non-empty device of a valid ``stages`` plan; stages are numbered
in pipeline order (:func:`placement.verification.evaluate.pipeline_order`). Per
micro-batch a stage runs a forward task ``F`` (its forward nodes) and, for a
training graph, a backward task ``B`` (its backward nodes), each as one *call*
in the sense of the load model: receive the inputs, compute, send the outputs.

Communication of a device holding ``S`` (devices whose type pays communication
only; CPU cores pay none) follows the load model: ``c(u)`` once for every
``u ∈ Out(S)`` (a *send*) and once for every ``u ∈ In(S)`` (a *receive*). A send
belongs to the task that produces ``u`` (``F`` for a forward node, ``B`` for a
backward node); a receive belongs to the first task of the device that consumes
``u``: ``F`` when some forward node of ``S`` reads ``u``, otherwise ``B``. So per
micro-batch ``F + B`` = compute + communication = the evaluator's load of the
device, and a CPU stage's tasks are pure compute (the accelerator on the other
side of the edge pays the transfer, inside its own call).

Dependencies (same micro-batch): the task of stage ``s`` that receives ``u``
(as above, also on devices that pay no communication) waits for the task of
stage ``s'`` that produces it, and ``B`` waits for ``F`` on the same stage (it
needs the activations), so every reader of ``u`` on ``s`` has it in time. One
exception, where those waits form a cycle (no schedule could run the plan): a
backward node that reads nothing and takes no time on any device (the exchange
of a shared parameter's gradient, :mod:`placement.torch.sharing`, which charges
its transfer to every holder and adds no precedence between stages) holds its
output from the start of the step, so where it goes to a later stage, against
the backward pass, its readers pay the transfer but their task does not wait
for the task that sends it, if that breaks every cycle (a tied embedding's
exchange, from the first stage to a later one, made every such plan wait in a
cycle). A plan that runs as it is keeps every wait.

Split backward: ``B`` keeps the activation-gradient work, its communication
and the rest of the backward compute; a weight-gradient task ``W`` holds the
weight-gradient part and waits for ``B`` of its stage. That part is ``α`` of the
backward compute (``w_fraction``); where ``α`` is not given, it is the sum of the
weight-gradient times the instance gives its backward nodes (``Stage.weight``:
``fpgaWeightLatency`` and the like, which imported models record), on a stage
whose every backward node gives one, and ``α = 0.5`` elsewhere.

Activation memory: a micro-batch in flight on a stage holds the outputs of the
stage's forward nodes; the output size of a node is the largest ``size`` of its
out-edges. It is unknown (``None``) when such an edge has no size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from placement.errors import InvalidParameterError, PlacementError
from placement.problem.instance import Instance, find_cycle
from placement.plan import DeviceAssignment, Plan
from placement.problem.memory_fit import fits_counted
from placement.verification.evaluate import Evaluation, evaluate, pipeline_order
from placement.verification.latency import call_violations

FORWARD = "F"
BACKWARD = "B"
WEIGHT = "W"
KINDS = (FORWARD, BACKWARD)


@dataclass(frozen=True)
class Stage:
    """One device of the pipeline and the per-micro-batch cost of its tasks.

    ``compute``, ``receive`` and ``send`` map a task kind (``F``, ``B``) to its
    compute time and to the communication it pays (zero on devices that pay
    none); ``load`` is the evaluator's load, which equals the sum of all of them.
    """

    index: int                   # position in the pipeline
    position: int                # index of the device in plan.devices
    type: str
    pays_comm: bool
    nodes: tuple[int, ...]
    compute: dict[str, float]
    receive: dict[str, float]
    send: dict[str, float]
    load: float
    static_memory: float         # Σ node memory (weights)
    memory_bound: float
    activation_bytes: float | None
    weight: float | None = None  # Σ weight-gradient times of its backward nodes, where it has some and each gives one
    static_sizes: tuple[float, ...] = ()       # the node memories static_memory sums (empty: static_memory alone)
    activation_sizes: tuple[float, ...] = ()   # the tensors activation_bytes sums (empty: activation_bytes alone)

    def task_time(self, kind: str) -> float:
        """Receive + compute + send of task ``kind``: its length when communication is inside the call."""
        return self.receive[kind] + self.compute[kind] + self.send[kind]

    def holds(self, microbatches: int, buffers: Sequence[float] = ()) -> bool:
        """Whether node memory and the activations of ``microbatches`` micro-batches (each with ``buffers``
        besides, a split plan's W inputs) fit the memory bound, by the model's rule on the sizes as written
        (:func:`placement.problem.memory_fit.fits_counted`: node memory 0.1 and two micro-batches of 0.1 fit a
        bound of 0.3, whose floating-point sum exceeds)."""
        static = self.static_sizes or (self.static_memory,)
        activation = self.activation_sizes or (self.activation_bytes or 0.0,)
        held = [(size, microbatches) for size in (*activation, *buffers)]
        return fits_counted([(size, 1) for size in static] + held, self.memory_bound)

    def most_held(self, most: int) -> int | None:
        """The most micro-batches, up to ``most``, whose activations fit beside the node memory (:meth:`holds`,
        found by bisection: a count that fits is never above one that does not); ``None`` where nothing limits
        them (no activation bytes, no memory bound). No quotient of the sizes is taken: at a bound of 1e300 and
        activations of 1e-300 it is no integer, and far from the exact count it is off by many."""
        if not self.activation_bytes or not math.isfinite(self.memory_bound):
            return None
        if self.holds(most):
            return most
        fits, over = 0, most   # holds(fits) or fits == 0; not holds(over)
        while over - fits > 1:
            middle = (fits + over) // 2
            fits, over = (middle, over) if self.holds(middle) else (fits, middle)
        return fits

    @property
    def comm(self) -> float:
        return sum(self.receive.values()) + sum(self.send.values())

    @property
    def label(self) -> str:
        return f"stage {self.index} (device {self.position}, {self.type})"


@dataclass(frozen=True)
class Pipeline:
    """The stages of a plan in pipeline order and the task-level data flow between them.

    ``inputs[(s, kind)]`` lists the tasks ``(s', kind')`` of *other* stages whose
    outputs task ``kind`` of stage ``s`` receives (same micro-batch).
    """

    stages: tuple[Stage, ...]
    inputs: dict[tuple[int, str], tuple[tuple[int, str], ...]]
    training: bool
    max_load: float
    evaluation: Evaluation | None          # the evaluator's verdict (joint plans)
    #: split-backward plans (:mod:`placement.simulation.split`): per stage, the tensors its W call
    #: reads for parts whose layer is elsewhere; empty for a joint plan
    w_inputs: tuple[tuple, ...] = ()
    split: bool = False                    # the plan places W tasks itself (stages have a W call)
    #: split-backward plans: some tensor its memory counts has an out-edge without a size (counted as 0 bytes,
    #: as the split planner counts it)
    unsized: bool = False


def invalid_plan_error(violations: Sequence[str]) -> InvalidParameterError:
    """The error for a plan the evaluator found invalid: its first violation, and how many more."""
    count = len(violations)
    more = f" (and {count - 1} more; verifying the plan lists them all)" if count > 1 else ""
    return InvalidParameterError("plan", f"is not valid for this instance: {violations[0]}{more}")


def build_pipeline(problem: Instance, plan: Plan) -> Pipeline:
    """The pipeline a valid ``stages`` plan describes; :class:`InvalidParameterError` if there is none.

    Nodes a plan omits are placed by colour, as ``verify(..., infer_from_colours=True)`` does.
    """
    evaluation = evaluate(problem, plan, contiguity="none", infer_from_colours=True)
    if not evaluation.valid:
        raise invalid_plan_error(evaluation.violations)
    wrong_calls = call_violations(problem, plan)
    if wrong_calls:
        raise invalid_plan_error(wrong_calls)
    reports = [r for r in evaluation.devices if r.nodes]
    if not reports:
        raise InvalidParameterError("plan", "places no nodes")
    full = Plan(tuple(DeviceAssignment(r.type, r.nodes) for r in reports))
    order = pipeline_order(problem, full)
    if order is None:
        raise InvalidParameterError("plan", "is not a pipeline: its devices cannot be ordered so that data flows "
                                            "forward (it is not in the 'stages' contiguity class); the simulator "
                                            "runs 'stages' plans")
    reports = [reports[k] for k in order]
    stage_of = {v: s for s, r in enumerate(reports) for v in r.nodes}

    consumers: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    producers: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    out_size: dict[int, float | None] = {n.id: 0.0 for n in problem.nodes}
    for e in problem.edges:
        if e.dst not in consumers[e.src]:
            consumers[e.src].append(e.dst)
            producers[e.dst].append(e.src)
        size = out_size[e.src]
        out_size[e.src] = None if size is None or e.size is None else max(size, e.size)

    def kind_of(v: int) -> str:
        return BACKWARD if problem.node(v).backward else FORWARD

    from_start = problem.timeless_backward_sources()
    held: set[tuple[tuple[int, str], tuple[int, str]]] = set()   # waits that need not be (module docstring)

    stages: list[Stage] = []
    inputs: dict[tuple[int, str], set[tuple[int, str]]] = {(s, k): set() for s in range(len(reports)) for k in KINDS}
    for s, report in enumerate(reports):
        t = problem.type_index(report.type)
        dtype = problem.device_types[t]
        members = set(report.nodes)
        compute = {FORWARD: 0.0, BACKWARD: 0.0}
        receive = {FORWARD: 0.0, BACKWARD: 0.0}
        send = {FORWARD: 0.0, BACKWARD: 0.0}
        activation: float | None = 0.0
        activation_sizes: list[float] = []
        weight: float | None = 0.0
        received: dict[int, str] = {}     # u ∈ In(S) -> the task that receives it
        for v in sorted(report.nodes, key=problem.index_of):
            node = problem.node(v)
            compute[kind_of(v)] += node.times[t]
            if node.backward:
                given = None if node.weight_times is None else node.weight_times[t]
                weight = None if weight is None or given is None else weight + given
            if not node.backward and consumers[v]:
                size = out_size[v]
                activation = None if activation is None or size is None else activation + size
                if size is not None:
                    activation_sizes.append(size)
            if any(w not in members for w in consumers[v]) and dtype.pays_comm:
                send[kind_of(v)] += node.out_cost
        # the nodes of other stages that this one reads, in instance order (from its members' producers:
        # a pass over every node per stage was stages × nodes)
        feeding = {u for w in members for u in producers[w] if u not in members and u in stage_of}
        for u in sorted(feeding, key=problem.index_of):
            readers = [w for w in consumers[u] if w in members]
            if readers:
                received[u] = FORWARD if any(kind_of(w) == FORWARD for w in readers) else BACKWARD
                inputs[(s, received[u])].add((stage_of[u], kind_of(u)))
                if u in from_start and stage_of[u] < s:
                    held.add(((s, received[u]), (stage_of[u], kind_of(u))))
        if dtype.pays_comm:
            for u, kind in received.items():
                receive[kind] += problem.node(u).out_cost
        total = sum(compute.values()) + sum(receive.values()) + sum(send.values())
        if not math.isclose(total, report.load, rel_tol=1e-9, abs_tol=1e-12):
            raise PlacementError(f"internal error: the tasks of device {report.position} add up to {total!r}, "
                                 f"but its verified load is {report.load!r}; please report this instance")
        stages.append(Stage(index=s, position=report.position, type=report.type, pays_comm=dtype.pays_comm,
                            nodes=report.nodes, compute=compute, receive=receive, send=send, load=report.load,
                            static_memory=report.memory, memory_bound=report.memory_bound,
                            activation_bytes=activation,
                            static_sizes=tuple(problem.node(v).memory for v in report.nodes),
                            activation_sizes=tuple(activation_sizes),
                            # a stage without backward nodes is given no weight-gradient time
                            weight=weight if any(problem.node(v).backward for v in report.nodes) else None))

    inputs = runnable_inputs(stages, inputs, held)
    return Pipeline(stages=tuple(stages),
                    inputs={key: tuple(sorted(val)) for key, val in inputs.items()},
                    training=problem.is_training, max_load=evaluation.max_load, evaluation=evaluation)


def runnable_inputs(stages: list[Stage], inputs: dict[tuple[int, str], set[tuple[int, str]]],
                    held: set[tuple[tuple[int, str], tuple[int, str]]], kinds: tuple[str, ...] = KINDS
                    ) -> dict[tuple[int, str], set[tuple[int, str]]]:
    """``inputs`` where its tasks wait in no cycle; else ``inputs`` less the waits of ``held`` (a task for a
    later stage's timeless backward source, module docstring) where that breaks every cycle; else the
    cycle of ``inputs`` is refused (:func:`check_acyclic`)."""
    try:
        check_acyclic(stages, inputs, kinds)
        return inputs
    except InvalidParameterError:
        if not held:
            raise
        relaxed = {key: {source for source in sources if (key, source) not in held} for key, sources in inputs.items()}
        try:
            check_acyclic(stages, relaxed, kinds)
        except InvalidParameterError:
            check_acyclic(stages, inputs, kinds)   # the cycle of the plan as it is
            raise
        return relaxed


def check_acyclic(stages: list[Stage], inputs: dict[tuple[int, str], set[tuple[int, str]]],
                  kinds: tuple[str, ...] = KINDS) -> None:
    """Refuse a plan whose stage tasks wait for each other in a cycle (no schedule could run it)."""
    keys = [(s, k) for s in range(len(stages)) for k in kinds]
    index = {key: i for i, key in enumerate(keys)}
    succ: list[list[int]] = [[] for _ in keys]
    for (s, k), sources in inputs.items():
        for source in sources:
            succ[index[source]].append(index[(s, k)])
    for s in range(len(stages)):
        succ[index[(s, FORWARD)]].append(index[(s, BACKWARD)])
    cycle = find_cycle(len(keys), succ)
    if cycle is not None:
        names = " -> ".join(f"{keys[i][1]} of {stages[keys[i][0]].label}" for i in cycle + cycle[:1])
        raise InvalidParameterError("plan", "has stages that wait for each other in a cycle (a stage runs its "
                                            "forward nodes as one call and its backward nodes as another), so no "
                                            f"schedule can run it: {names}")

