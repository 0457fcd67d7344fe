"""The independent evaluator of split-backward plans (``docs/backward-split.md``).

Part of the verification package: it imports nothing from :mod:`placement.solvers` and
recomputes every figure from the :class:`Instance`, task by task.

Model implemented
-----------------
A split plan lists its devices in pipeline order. ``nodes`` is the *layer* assignment: a
``stages`` plan of today's model (colour classes, support, counts, contiguity), which fixes the
layer stage ``L(v)`` of every node. ``b_tasks`` / ``w_tasks`` say where the B and W task of each
backward node runs (a node listed nowhere runs that task on ``L(u)``). The stages are the
devices with layer nodes; ``prev``/``next`` are the neighbouring stages in the plan's order, which
must be a pipeline order (no edge of the extended forward graph H goes from a later stage to an
earlier one). Rules: ``B(u)`` on ``L(u)``, or on ``prev(L(u))`` with ``inter_layer``; ``W(u)`` on
any stage (``any``) or on ``L(u)`` / ``next(L(u))`` (``adjacent``); the stage's type supports ``u``.

Tensors: node ``x`` produces one tensor, on ``L(x)`` (forward ``x``) or where ``B(x)`` runs
(backward ``x``). Its readers: ``L(w)`` of each forward successor ``w``; where ``B(w)`` and
``W(w)`` run for each backward successor ``w``; and where ``W(w)`` runs for each backward ``w``
whose colour class holds a forward node with ``x`` among its predecessors (W reads its layer's
forward input). A device that pays communication pays ``c(x)`` once when it produces ``x`` and
some reader is elsewhere (Out), and once when it reads ``x`` produced elsewhere (In).

With ``inter_layer``, the B calls must not wait for each other in a cycle: the graph on devices
with an arc from the device of ``B(x)`` to the device of ``B(w)`` for every backward edge ``x → w``
(between different devices) is acyclic. (Each device runs its B tasks as one call per micro-batch,
as the load model charges them; a cycle would deadlock a pipeline schedule.) A forward edge
``x → w`` into a backward ``w`` whose B runs on a stage before ``L(x)`` is an arc too: that B call
waits for the later stage's F call of the same micro-batch, and a B arc back to that stage (a moved
B feeding a B it left behind) makes its F, the moved B and its own B run in turn, one micro-batch at
a time (1F1B gives the last stage no forward to run meanwhile): 27 per sample where the loads say 18.

For a device of type ``t``::

    load   = Σ_{forward v, L(v)=d} p_t(v) + Σ_{B(u) on d} B_t(u) + Σ_{W(u) on d} W_t(u) + [pays_t] Σ c(x)
    memory = Σ_{L(v)=d} m(v) + Σ_{B(u) on d, L(u)≠d} m(u) + H(d) · (Σ_{forward v, L(v)=d} bytes(v) + Σ_{x ∈ K(d)} bytes(x))

``K(d)`` is the union of the tensors the moved W tasks on ``d`` read, less the forward tensors ``d``
produces itself (each tensor's bytes: the largest ``size`` of its out-edges, 0 where none is given).
``H(d)`` is the number of micro-batches ``d`` holds under bounded asynchronous 1F1B
(:func:`micro_batches_held`): ``S − p + δ``, ``p`` its position among the ``S`` stages and ``δ`` its
W call's lag (0, or ``1 + max |p − q|`` over the stages ``q`` whose B output its W call receives);
per micro-batch in flight it holds its activations and one copy of each tensor of ``K(d)``. ``throughput`` is the max load; ``throughput-gpipe`` is
``max_d FW_d + max_d BW_d``: ``FW_d`` is the forward compute plus ``c(x)`` of the forward tensors ``d``
sends and of those it receives for a forward node; ``BW_d`` the rest (backward tensors, and forward
tensors ``d`` receives only for its B and W tasks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance, find_cycle
from placement.problem.memory_fit import fits_counted, written_sum_text
from placement.problem.split import SplitModel, split_times
from placement.plan import DeviceAssignment, Plan
from placement.result import Verification
from placement.verification.contiguity import _quotient, pipeline_order
from placement.verification.evaluate import DeviceReport, Evaluation, evaluate, fmt_number


@dataclass(frozen=True)
class SplitEvaluation:
    """The verdict on a split plan: per-device figures, where each B and W runs, violations."""

    evaluation: Evaluation                 # devices: the split loads and memory
    b_device: dict[int, int]               # backward node id -> device position of its B task
    w_device: dict[int, int]               # backward node id -> device position of its W task

    @property
    def valid(self) -> bool:
        return self.evaluation.valid

    @property
    def violations(self) -> tuple[str, ...]:
        return self.evaluation.violations

    def objective(self, kind: str) -> float:
        return self.evaluation.objective(kind)


def tensor_bytes(problem: Instance) -> dict[int, float]:
    """Per node id, the bytes of its output: the largest size of its out-edges (0 when none is given)."""
    out: dict[int, float] = {n.id: 0.0 for n in problem.nodes}
    for e in problem.edges:
        if e.size is not None and e.size > out[e.src]:
            out[e.src] = e.size
    return out


def w_reads(problem: Instance) -> dict[int, list[int]]:
    """Per backward node id, the node ids whose tensors its W task reads: its predecessors, and the
    predecessors of the forward nodes of its colour class."""
    preds: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    for e in problem.edges:
        if e.src not in preds[e.dst]:
            preds[e.dst].append(e.src)
    forward_of: dict[int, list[int]] = {}
    for n in problem.nodes:
        if not n.backward and n.colour is not None:
            forward_of.setdefault(n.colour, []).append(n.id)
    reads: dict[int, list[int]] = {}
    for n in problem.nodes:
        if n.backward:
            found = list(preds[n.id])
            for f in forward_of.get(n.colour, []) if n.colour is not None else []:
                found += [x for x in preds[f] if x not in found]
            reads[n.id] = found
    return reads


def _task_devices(problem: Instance, plan: Plan, layer: dict[int, int], field: str,
                  violations: list[str]) -> dict[int, int]:
    """Where the B (``field='b_tasks'``) or W task of every backward node runs."""
    backward = {n.id for n in problem.nodes if n.backward}
    known = {n.id for n in problem.nodes}
    found: dict[int, int] = {}
    for d, dev in enumerate(plan.devices):
        for u in getattr(dev, field):
            if u not in backward:
                what = "not a backward node" if u in known else "not in the instance"
                violations.append(f"device {d}: {field} lists node {u}, which is {what}")
            elif u in found:
                violations.append(f"node {u}: {field} lists it on devices {found[u]} and {d}")
            else:
                found[u] = d
    return {u: found.get(u, layer.get(u, -1)) for u in backward}


def _b_call_cycles(problem: Instance, b_dev: dict[int, int], layer: dict[int, int], rank: dict[int, int]
                   ) -> list[str]:
    """A violation when the devices' B calls wait for each other in a cycle (:func:`_b_call_cycle`)."""
    cycle = _b_call_cycle(problem, b_dev, layer, rank)
    return [] if cycle is None else [f"the B tasks of devices {cycle} wait for each other in a cycle"]


def _b_call_cycle(problem: Instance, b_dev: dict[int, int], layer: dict[int, int], rank: dict[int, int],
                  forward_arcs: bool = True) -> str | None:
    """The cycle, as ``a -> b -> a``, in which the devices' B calls wait for each other (module docstring): the
    backward edges, taken between the devices running the B tasks at their ends, and (``forward_arcs``) the
    forward edges into a B that runs on an earlier stage (``rank``) than the edge's forward node, close a cycle
    of devices, and still do without the edges to a later stage from a backward node that reads nothing and
    takes no time (whose output is there from the start of a step: the simulator drops those waits where
    they close a cycle, :mod:`placement.simulation.pipeline`)."""
    every: dict[int, set[int]] = {}
    needed: dict[int, set[int]] = {}
    timeless = problem.timeless_backward_sources()
    for e in problem.edges:
        if not problem.node(e.dst).backward:
            continue
        if problem.node(e.src).backward:
            a, b = b_dev[e.src], b_dev[e.dst]
        elif not forward_arcs:
            continue
        else:
            a, b = layer.get(e.src, -1), b_dev[e.dst]
            if a not in rank or b not in rank or rank[a] <= rank[b]:
                continue
        if a != b and a >= 0 and b >= 0:
            every.setdefault(a, set()).add(b)
            if not (e.src in timeless and a in rank and b in rank and rank[a] < rank[b]):
                needed.setdefault(a, set()).add(b)
    if _device_cycle(every) is None:
        return None
    return _device_cycle(needed)


def joint_b_call_cycle(problem: Instance, plan: Plan) -> str | None:
    """For a plan of the joint model in stages (every backward node runs on its own device, in one B call
    per device and micro-batch), the cycle in which those calls wait for each other through the backward
    edges (:func:`_b_call_cycle`), as ``a -> b -> a``: the cycle that makes the simulator refuse the plan;
    ``None`` where there is none or the devices have no pipeline order. Where the backward edges mirror the
    forward ones there is none. A backward call that waits for a later stage's forward call of the same
    micro-batch closes no such cycle: such a plan runs, slower than its loads say (docs/simulator.md,
    "Limits"), and the simulator says so."""
    order = pipeline_order(problem, plan)
    if order is None:
        return None
    rank = {d: i for i, d in enumerate(order)}
    layer = {v: d for d, dev in enumerate(plan.devices) for v in dev.nodes}
    b_dev = {n.id: layer.get(n.id, -1) for n in problem.nodes if n.backward}
    return _b_call_cycle(problem, b_dev, layer, rank, forward_arcs=False)


def joint_b_call_cycle_note(problem: Instance, plan: Plan) -> str | None:
    """What :func:`joint_b_call_cycle` finds in ``plan``, as a note on the plan; ``None`` where it finds
    nothing."""
    cycle = joint_b_call_cycle(problem, plan)
    if cycle is None:
        return None
    return (f"the backward calls of devices {cycle} wait for each other in a cycle (the instance's backward "
            "edges do not mirror its forward ones): no pipeline runtime runs the plan as one backward call per "
            "stage and micro-batch, and the simulator refuses it (docs/backward-split.md)")


def _device_cycle(succ: dict[int, set[int]]) -> str | None:
    """A cycle of the graph of devices ``succ`` as ``a -> b -> a``, or ``None``."""
    devices = sorted(set(succ) | {b for targets in succ.values() for b in targets})
    index = {d: i for i, d in enumerate(devices)}
    cycle = find_cycle(len(devices), [sorted(index[b] for b in succ.get(d, ())) for d in devices])
    return None if cycle is None else " -> ".join(str(devices[i]) for i in cycle + cycle[:1])


def micro_batches_held(problem: Instance, b_dev: dict[int, int], w_dev: dict[int, int], layer: dict[int, int],
                       reads: dict[int, list[int]], rank: dict[int, int]) -> dict[int, int]:
    """Per stage (device position), ``H = (S − p) + δ``: the micro-batches it holds at once under bounded
    asynchronous 1F1B, ``S`` the stages, ``p`` its position among them, ``δ`` the lag of its W call: 0 when
    the call receives no B output of another stage, else ``1 + max |p − q|`` over the stages ``q`` whose
    B output it receives (a tensor is received by the first call on the stage that reads it, in the order
    F, B, W: a backward tensor that a B task of the stage also reads is received by the B call)."""
    n_stages = len(rank)
    f_read: dict[int, set[int]] = {n.id: set() for n in problem.nodes}    # devices whose F or B call reads x
    for e in problem.edges:
        dst = problem.node(e.dst)
        if dst.backward:
            f_read[e.src].add(b_dev[e.dst])
        elif e.dst in layer:
            f_read[e.src].add(layer[e.dst])
    lag = {d: 0 for d in rank}
    for u, xs in reads.items():
        d = w_dev[u]
        if d not in rank:
            continue
        for x in xs:
            q = b_dev.get(x)
            if problem.node(x).backward and q in rank and q != d and d not in f_read[x]:
                lag[d] = max(lag[d], 1 + abs(rank[q] - rank[d]))
    return {d: n_stages - rank[d] + lag[d] for d in rank}


def evaluate_split(problem: Instance, plan: Plan, model: SplitModel) -> SplitEvaluation:
    """Verify the split plan ``plan`` under ``model``: loads, memory and every rule of the module docstring."""
    anchor = evaluate(problem, Plan(tuple(DeviceAssignment(d.type, d.nodes) for d in plan.devices)),
                      contiguity="stages")
    violations = [v for v in anchor.violations if "exceeds the bound" not in v]
    known = {n.id for n in problem.nodes}  # the anchor reports the others
    layer = {v: d for d, dev in enumerate(plan.devices) for v in dev.nodes if v in known}
    n_dev = len(plan.devices)
    stages = [d for d, dev in enumerate(plan.devices) if dev.nodes]
    rank = {d: i for i, d in enumerate(stages)}
    where = {n.id: ([layer[n.id]] if n.id in layer else []) for n in problem.nodes}
    labels, succ = _quotient(problem, where, n_dev)
    for i in range(n_dev):
        for j in succ[i]:
            if j < n_dev and j < i:
                violations.append(f"the devices are not in pipeline order: device {i} feeds device {j}")
    b_dev = _task_devices(problem, plan, layer, "b_tasks", violations)
    w_dev = _task_devices(problem, plan, layer, "w_tasks", violations)
    types = {t.name: (k, t) for k, t in enumerate(problem.device_types)}

    def supports(u: int, d: int) -> bool:
        kt = types.get(plan.devices[d].type)
        return kt is not None and problem.node(u).times[kt[0]] is not None

    for u in sorted(b_dev, key=problem.index_of):
        home = layer.get(u)
        if home is None:
            continue
        prev = stages[rank[home] - 1] if rank[home] > 0 else None
        nxt = stages[rank[home] + 1] if rank[home] + 1 < len(stages) else None
        allowed_b = {home} | ({prev} if model.inter_layer and prev is not None else set())
        allowed_w = (set(stages) if model.w_placement == "any" else {home} if model.w_placement == "home"
                     else {home} | ({nxt} if nxt is not None else set()))
        for task, d, allowed in (("B", b_dev[u], allowed_b), ("W", w_dev[u], allowed_w)):
            if d not in allowed:
                earlier = task == "B" and d == prev and not model.inter_layer
                hint = "; a B task on the device before its layer's needs an inter-layer variant" if earlier else ""
                violations.append(f"node {u}: its {task} task runs on device {d}, which the variant "
                                  f"{model.name!r} does not allow (layer on device {home}{hint})")
            elif not supports(u, d):
                violations.append(f"node {u}: its {task} task runs on device {d} ({plan.devices[d].type}), "
                                  "which does not support it")

    b_times, w_times = split_times(problem, model)
    reads = w_reads(problem)
    size = tensor_bytes(problem)
    readers: dict[int, set[int]] = {n.id: set() for n in problem.nodes}
    forward_readers: dict[int, set[int]] = {n.id: set() for n in problem.nodes}
    for e in problem.edges:
        if problem.node(e.dst).backward:
            readers[e.src].update((b_dev[e.dst], w_dev[e.dst]))
        elif e.dst in layer:
            readers[e.src].add(layer[e.dst])
            forward_readers[e.src].add(layer[e.dst])
    for u, xs in reads.items():
        for x in xs:
            readers[x].add(w_dev[u])
    producer = {n.id: (b_dev[n.id] if n.backward else layer.get(n.id, -1)) for n in problem.nodes}
    if model.inter_layer:
        violations += _b_call_cycles(problem, b_dev, layer, rank)
    held = micro_batches_held(problem, b_dev, w_dev, layer, reads, rank)

    reports = []
    for d, dev in enumerate(plan.devices):
        k, dtype = types.get(dev.type, (None, None))
        fw_times: list[float] = []
        bw_times: list[float] = []
        sizes: list[float] = []
        for v in dev.nodes:
            if v not in layer or layer[v] != d:
                continue
            node = problem.node(v)
            sizes.append(node.memory)
            if not node.backward and k is not None:
                fw_times.append(node.times[k] or 0.0)
        kept: set[int] = set()   # tensors moved W tasks read here, one copy each
        for u in problem.nodes:
            if not u.backward:
                continue
            i = problem.index_of(u.id)
            if b_dev[u.id] == d:
                bw_times.append((b_times[i][k] or 0.0) if k is not None else 0.0)
                if layer.get(u.id) != d:
                    sizes.append(u.memory)
            if w_dev[u.id] == d:
                bw_times.append((w_times[i][k] or 0.0) if k is not None else 0.0)
                if layer.get(u.id) != d:
                    kept.update(x for x in reads[u.id] if problem.node(x).backward or layer.get(x) != d)
        # exactly rounded sums: loads and memory do not depend on the order a plan or a file lists nodes in
        memory = math.fsum(sizes)
        in_flight: list[float] = []   # the footprint of a micro-batch in flight: activations, the moved W's inputs
        if d in rank:
            in_flight = [size[v] for v in dev.nodes if layer.get(v) == d and not problem.node(v).backward]
            in_flight += [size[x] for x in kept]
            memory += held[d] * math.fsum(in_flight)
        fw_costs: list[float] = []
        bw_costs: list[float] = []
        if dtype is not None and dtype.pays_comm:
            for x in problem.nodes:
                if x.out_cost <= 0:
                    continue
                here = producer[x.id] == d
                if (here and readers[x.id] - {d}) or (not here and d in readers[x.id]):
                    # a send goes with the call producing x; a receive with the first call reading it here
                    if x.backward or (not here and d not in forward_readers[x.id]):
                        bw_costs.append(x.out_cost)
                    else:
                        fw_costs.append(x.out_cost)
        fw, bw, comm_fw, comm_bw = map(math.fsum, (fw_times, bw_times, fw_costs, bw_costs))
        bound = dtype.memory if dtype is not None else math.inf
        # the bound is met or not exactly on the sizes as written (0.1 + 0.2 fits 0.3), as in the joint model
        if not fits_counted([(m, 1) for m in sizes] + [(m, held[d]) for m in in_flight], bound):
            written = written_sum_text(sizes + in_flight * held[d])
            shown = fmt_number(memory) if memory > bound else \
                f"{written} (summed as written; {fmt_number(memory)} in floating point)"
            violations.append(f"device {d} ({dev.type}): memory {shown} exceeds the bound {fmt_number(bound)}")
        reports.append(DeviceReport(position=d, type=dev.type, nodes=tuple(dev.nodes), compute=fw + bw,
                                    comm=comm_fw + comm_bw, load=(fw + bw) + (comm_fw + comm_bw), memory=memory,
                                    memory_bound=bound, forward_load=fw + comm_fw, backward_load=bw + comm_bw))
    evaluation = Evaluation(devices=tuple(reports), max_load=max((r.load for r in reports), default=0.0),
                            violations=tuple(violations), contiguity="stages", finest_class=anchor.finest_class,
                            inferred=())
    return SplitEvaluation(evaluation, b_dev, w_dev)


def check_split_plan(problem: Instance, plan: Plan, model: SplitModel, objective: str = "throughput") -> Verification:
    """The evaluator's verdict on the split plan ``plan`` as a :class:`Verification` (``value``: max load for
    ``throughput``, max FW + max BW for ``throughput-gpipe``); ``report`` holds ``(evaluation, None, None)``."""
    if objective not in ("throughput", "throughput-gpipe"):
        raise InvalidParameterError("objective", f"{objective!r} does not apply to backward='split' "
                                                 "(it solves 'throughput', 'throughput-gpipe')")
    ev = evaluate_split(problem, plan, model)
    return Verification(valid=ev.valid, objective=objective, contiguity="stages", value=ev.objective(objective),
                        max_load=ev.evaluation.max_load, violations=ev.violations,
                        finest_class=ev.evaluation.finest_class, report=(ev.evaluation, None, None))
