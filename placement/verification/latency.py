"""The independent latency evaluator: one sample through an inference graph (DESIGN.md §2).

Like :mod:`placement.verification.evaluate`, this module is a check of solvers, so it
imports nothing from :mod:`placement.solvers`.

Model implemented
-----------------
Only inference graphs (no backward nodes). A device whose type pays
communication (an accelerator) runs its nodes as *calls*: the ordered sets of
``DeviceAssignment.calls``, or one call holding all of ``nodes`` when ``calls``
is empty. For a call ``S`` on a device of type ``t``::

    In(S)    = { u ∉ S : u has a successor in S }
    Out(S)   = { u ∈ S : u has a successor outside S }
    duration = Σ_{u∈In(S)} c(u) + Σ_{v∈S} times[t](v) + Σ_{u∈Out(S)} c(u)
    start    = max( finish(u) for u ∈ In(S),  end of the device's previous call,  0 )
    end      = start + duration;   finish(v) = end for every v ∈ S

``In`` and ``Out`` are taken per call: a node feeding a later call of the same
device is paid as an output of its own call and as an input of the later one.
A device whose type pays no communication (a CPU) runs every node on its own as
soon as its inputs are ready, with unlimited parallelism:
``finish(v) = max(finish(u) for predecessors u, 0) + times[t](v)``.
The latency is the finish time of the last node.

Constraints checked (each failure is one line in ``LatencyEvaluation.violations``):
everything :func:`placement.verification.evaluate.evaluate` checks under contiguity
``none`` (every node placed exactly once, known node ids and device types,
supported nodes only, memory ``Σ node.memory`` per device within its type's
bound — summed over all calls of the device —, colour classes on one device,
device counts), and, for the calls:

* the calls of a device partition its nodes (no empty call, every node of the
  device in exactly one call, no call holding a node the device does not list);
  a device that pays no communication has no calls;
* every call is contiguous (convex): no path leaves it and re-enters it;
* the calls and CPU nodes can be scheduled: a cycle among them (two calls
  feeding each other, or a call that must wait for its own output) is reported
  with the cycle, and the latency is then ``inf``.

Times are computed whenever the placement is well defined (every node on
exactly one device of a known type, calls partitioning each device); memory,
support, colour and count violations do not stop them. Without a well-defined
placement, or on a cycle, the affected times and the latency are ``inf``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

from placement.collector import collector_paused
from placement.problem.objectives import check_objective
from placement.problem.instance import Instance, find_cycle
from placement.plan import Plan
from placement.verification.contiguity import convexity_witness, topological_rank_by_id
from placement.verification.evaluate import evaluate, fmt_number


@dataclass(frozen=True)
class CallReport:
    """One call of an accelerator: its set, boundary, duration and schedule."""

    device: int                 # position of the device in plan.devices
    index: int                  # position of the call among the device's calls
    type: str                   # device type name
    nodes: tuple[int, ...]      # node ids of the call, as listed
    inputs: tuple[int, ...]     # In(S), in instance order
    outputs: tuple[int, ...]    # Out(S), in instance order
    receive: float              # Σ c(u) over In(S)
    compute: float              # Σ times[t](v) over S
    send: float                 # Σ c(u) over Out(S)
    duration: float             # receive + compute + send
    start: float                # inf when not schedulable
    end: float


@dataclass(frozen=True)
class CpuNodeReport:
    """One node on a device that pays no communication: it runs alone, as soon as its inputs are ready."""

    node: int
    device: int
    type: str
    start: float
    end: float


@dataclass(frozen=True)
class LatencyEvaluation:
    """The verdict on a plan under the latency objective."""

    calls: tuple[CallReport, ...]          # device by device, call by call, in plan order
    cpu_nodes: tuple[CpuNodeReport, ...]   # in instance order
    node_finish: Mapping[int, float]       # node id -> finish time (inf when undefined)
    latency: float                         # finish time of the last node; inf when undefined
    memory: tuple[float, ...]              # per device position: Σ memory of its nodes
    violations: tuple[str, ...]
    critical: tuple[str, ...] = field(default=())  # the chain of calls / CPU nodes that ends last
    #: the structural check it rests on (:func:`placement.verification.evaluate.evaluate`, class ``none``)
    structural: Evaluation | None = field(default=None, repr=False, compare=False)

    @property
    def valid(self) -> bool:
        return not self.violations


def call_violations(problem: Instance, plan: Plan) -> list[str]:
    """What is wrong with the plan's ``calls`` fields, whatever the objective: a call that holds a node its
    device does not list, a node in two calls or in none, an empty call, calls on a device that pays no
    communication (its nodes run one by one)."""
    return _device_calls(problem, plan, {t.name: t.pays_comm for t in problem.device_types})[1]


def _device_calls(problem: Instance, plan: Plan, pays: dict[str, bool]
                  ) -> tuple[list[list[tuple[int, ...]]], list[str], bool]:
    """Per device its calls (accelerators) or ``[]`` (other types); violations; whether they partition."""
    violations: list[str] = []
    sound = True
    calls: list[list[tuple[int, ...]]] = []
    for d, dev in enumerate(plan.devices):
        label = f"device {d} ({dev.type})"
        if dev.type not in pays:            # an unknown type: the evaluator says so
            calls.append([])
            continue
        if not pays[dev.type]:
            if dev.calls:
                violations.append(f"{label}: has calls, but a device that pays no communication runs "
                                  "each node on its own")
            calls.append([])
            continue
        if not dev.calls:
            calls.append([tuple(dev.nodes)] if dev.nodes else [])
            continue
        listed = set(dev.nodes)
        seen: dict[int, int] = {}
        for k, call in enumerate(dev.calls):
            if not call:
                violations.append(f"{label}: call {k} is empty")
            for v in call:
                if v in seen:
                    if seen[v] == k:
                        violations.append(f"{label}: node {v} is listed twice in call {k}")
                    else:
                        violations.append(f"{label}: node {v} is in calls {seen[v]} and {k}")
                        sound = False
                elif v not in listed:
                    violations.append(f"{label}: call {k} holds node {v}, which the device does not list")
                    sound = False
                seen.setdefault(v, k)
        for v in dev.nodes:
            if v not in seen:
                violations.append(f"{label}: node {v} is in none of its calls")
                sound = False
        calls.append([tuple(c) for c in dev.calls if c])
    return calls, violations, sound


@collector_paused()
def evaluate_latency(problem: Instance, plan: Plan) -> LatencyEvaluation:
    """Verify ``plan`` under the latency model of the module docstring; times, latency, violations.

    Raises :class:`InvalidParameterError` (about ``objective``) for a training graph (the
    latency objective is defined for inference only).
    """
    check_objective(problem, "latency")
    structural = evaluate(problem, plan, "none")
    violations = list(structural.violations)
    pays = {t.name: t.pays_comm for t in problem.device_types}
    type_of = {t.name: i for i, t in enumerate(problem.device_types)}
    device_calls, wrong_calls, sound = _device_calls(problem, plan, pays)
    violations.extend(wrong_calls)

    succ: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    pred: dict[int, list[int]] = {n.id: [] for n in problem.nodes}
    seen: set[tuple[int, int]] = set()   # a set, not the lists: a node may have thousands of successors
    for e in problem.edges:
        if (e.src, e.dst) not in seen:
            seen.add((e.src, e.dst))
            succ[e.src].append(e.dst)
            pred[e.dst].append(e.src)
    rank = topological_rank_by_id(problem)

    # where every node is: exactly one device of a known type, or the placement is not sound
    owner_device: dict[int, int] = {}
    counts: dict[int, int] = {n.id: 0 for n in problem.nodes}
    for d, dev in enumerate(plan.devices):
        for v in set(dev.nodes):
            if v in counts:
                counts[v] += 1
                owner_device[v] = d
        if dev.type not in type_of:
            sound = False
    if any(c != 1 for c in counts.values()):
        sound = False

    index = problem.index_of
    # tasks: accelerator calls, then CPU nodes
    labels: list[str] = []
    durations: list[float] = []
    call_info: list[tuple[int, int, tuple[int, ...], list[int], list[int], float, float, float]] = []
    task_of: dict[int, int] = {}
    for d, calls in enumerate(device_calls):
        dev = plan.devices[d]
        t = type_of.get(dev.type)
        for k, call in enumerate(calls):
            members = set(call)
            ordered = sorted((v for v in members if v in counts), key=index)
            inputs = sorted({u for v in ordered for u in pred[v] if u not in members}, key=index)
            outputs = [v for v in ordered if any(w not in members for w in succ[v])]
            # exactly rounded sums: a call's time does not depend on the order a plan or a file lists nodes in
            times = (problem.node(v).times[t] if t is not None else None for v in ordered)
            compute = math.fsum(p for p in times if p is not None)
            receive = math.fsum(problem.node(u).out_cost for u in inputs)
            send = math.fsum(problem.node(u).out_cost for u in outputs)
            witness = convexity_witness(set(ordered), succ, rank)
            if witness is not None:
                violations.append(f"device {d} ({dev.type}) call {k}: path {' -> '.join(map(str, witness))} "
                                  "leaves and re-enters the call")
            task = len(labels)
            labels.append(f"device {d} call {k}")
            durations.append(receive + compute + send)
            call_info.append((d, k, tuple(call), inputs, outputs, receive, compute, send))
            for v in ordered:
                task_of[v] = task
    n_calls = len(labels)
    cpu_nodes: list[tuple[int, int]] = []  # (node id, device)
    for n in problem.nodes:
        d = owner_device.get(n.id)
        if d is None or n.id in task_of or pays.get(plan.devices[d].type, True):
            continue
        t = type_of[plan.devices[d].type]
        task_of[n.id] = len(labels)
        labels.append(f"{plan.devices[d].type} node {n.id}")
        p = n.times[t]
        durations.append(p if p is not None else 0.0)
        cpu_nodes.append((n.id, d))

    n_tasks = len(labels)
    start = [math.inf] * n_tasks
    end = [math.inf] * n_tasks
    critical: tuple[str, ...] = ()
    if sound:
        deps: list[list[int]] = [[] for _ in range(n_tasks)]
        for task, (d, k, _, inputs, _, _, _, _) in enumerate(call_info):
            deps[task] = sorted({task_of[u] for u in inputs})
            if k > 0:
                deps[task].append(task - 1)   # the device's previous call
        for j, (v, _) in enumerate(cpu_nodes):
            deps[n_calls + j] = sorted({task_of[u] for u in pred[v]})
        after: list[list[int]] = [[] for _ in range(n_tasks)]
        indegree = [0] * n_tasks
        for task, ds in enumerate(deps):
            for p in set(ds):
                after[p].append(task)
                indegree[task] += 1
        ready = deque(task for task in range(n_tasks) if indegree[task] == 0)
        latest_dep = [-1] * n_tasks
        while ready:
            task = ready.popleft()
            begin = 0.0
            for p in deps[task]:
                if end[p] > begin:
                    begin, latest_dep[task] = end[p], p
            start[task] = begin
            end[task] = begin + durations[task]
            for w in after[task]:
                indegree[w] -= 1
                if indegree[w] == 0:
                    ready.append(w)
        if any(math.isinf(s) for s in start):
            cycle = find_cycle(n_tasks, after)
            if cycle is not None:
                violations.append("calls cannot be scheduled, they wait on each other in a cycle "
                                  "(each must end before the next can start): "
                                  + " -> ".join(labels[i] for i in cycle + cycle[:1]))
        elif n_tasks:
            last = max(range(n_tasks), key=lambda i: end[i])
            chain = [last]
            while latest_dep[chain[-1]] >= 0:
                chain.append(latest_dep[chain[-1]])
            critical = tuple(labels[i] for i in reversed(chain))

    calls = tuple(CallReport(device=d, index=k, type=plan.devices[d].type, nodes=nodes, inputs=tuple(inputs),
                             outputs=tuple(outputs), receive=receive, compute=compute, send=send,
                             duration=durations[task], start=start[task], end=end[task])
                  for task, (d, k, nodes, inputs, outputs, receive, compute, send) in enumerate(call_info))
    cpu_reports = tuple(CpuNodeReport(node=v, device=d, type=plan.devices[d].type, start=start[n_calls + j],
                                      end=end[n_calls + j])
                        for j, (v, d) in enumerate(cpu_nodes))
    finish = {n.id: (end[task_of[n.id]] if sound and n.id in task_of else math.inf) for n in problem.nodes}
    latency = max(finish.values()) if sound else math.inf
    return LatencyEvaluation(calls=calls, cpu_nodes=cpu_reports, node_finish=finish, latency=latency,
                             memory=tuple(r.memory for r in structural.devices),
                             violations=tuple(violations), critical=critical, structural=structural)


def describe_latency(evaluation: LatencyEvaluation) -> str:
    """One line: the latency, or why the plan is invalid (first violation and count)."""
    if evaluation.valid:
        return f"latency {fmt_number(evaluation.latency)}"
    count = len(evaluation.violations)
    return f"invalid ({count} violation{'' if count == 1 else 's'}): {evaluation.violations[0]}"


__all__ = ["CallReport", "CpuNodeReport", "LatencyEvaluation", "evaluate_latency", "describe_latency"]
