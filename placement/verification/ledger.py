"""The communication ledger of a plan: bytes crossing device boundaries, checked against the load model.

Verification code: it imports nothing from :mod:`placement.solvers` or from the evaluator, and
recomputes everything from the :class:`Instance` and the :class:`Plan`.

Model implemented
-----------------
For a device holding the node set ``S`` (DESIGN.md §2)::

    In(S)  = { u ∉ S : u has a successor in S }
    Out(S) = { u ∈ S : u has a successor outside S }

The load model charges the transfer cost ``c(u)`` once per boundary node, device and
direction; the ledger counts the tensor of ``u`` once in the same way, from the edges' ``size``
fields (bytes)::

    bytes_in(S)  = Σ_{u ∈ In(S)}  max{ size(u, w) : w ∈ S }
    bytes_out(S) = Σ_{u ∈ Out(S)} max{ size(u, w) : w ∉ S }

(the largest crossing edge, where the out-edges of ``u`` disagree on their size). A tensor is an
*activation* when ``u`` is a forward node and an *error* (a gradient flowing backward) when ``u``
is a backward node. Per link ``i → j`` (devices ``i ≠ j``) the ledger holds
``Σ_u max{ size(u, w) : w on j }`` over the nodes ``u`` on ``i`` with a successor on ``j``.

Under the latency model (``by_call``), each call a communication-paying device lists is such a set
``S`` of its own, paid and counted apart, and the device's figures add up its calls'.

**One bandwidth per instance.** Every out-edge of ``u`` carries ``c(u)`` and possibly a size; a
sized tensor ``(u, size > 0)`` has the ratio ``c(u) / size``. The instance's time per byte ``ρ`` is
the ratio shared by the most distinct sized tensors; ties go to the larger byte total, then to
the smaller ratio. With no sized tensor, ``ρ`` is unknown and nothing is checked.

**The costs' quantum.** Instances the model importers write round every time and cost to the
nearest multiple of one quantum ``q`` (:mod:`placement.io.opgraph`), which they record
(:attr:`Instance.time_quantum`; 0 elsewhere), so a cost is ``ρ · size`` only to within ``q/2``.
Two ratios are shared when they differ by at most a relative ``1e-9`` plus ``q/2`` over each
tensor's size; ``ρ`` is the ratio of the largest tensor of its group (the least rounded), of
``s_ρ`` bytes; a node's cost agrees with ``ρ · size`` to within a relative ``1e-9`` plus ``q/2``
plus the rounding ``ρ`` may carry, ``size · q / (2 s_ρ)``.

**Agreement.** On every device whose type pays communication, the charged communication
``Σ_{u ∈ In(S) ∪ Out(S)} c(u)`` must equal ``ρ · (bytes_in(S) + bytes_out(S))`` to within the sum
of its boundary nodes' tolerances. A device that disagrees is reported with the boundary nodes
whose own cost differs from ``ρ`` times their bytes; a device with a boundary node of unknown
size is reported as unchecked.

**What a disagreement means.** ``charged`` is the communication the load model charges the
device — the same ``In(S) ∪ Out(S)`` as the evaluator's, on training graphs too, where the
costs of forward boundary nodes go to the forward load and those of backward nodes to the
backward load, as the ledger's activations and errors. The check therefore compares the
instance's transfer costs with its tensor sizes: a disagreement is a finding about the
instance's data (on the published training layer graphs, backward nodes whose cost is not
their tensor's size times ``ρ``), never about the plan, whose validity and loads rest on the
charged costs. It is informational: :attr:`Ledger.summary` says so in one line, and
``placement verify`` exits on the plan's validity alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.errors import InvalidParameterError
from placement.io.plans import as_plan
from placement.parameters import keywords_checked
from placement.problem.instance import Instance
from placement.plan import Plan

RELATIVE_TOLERANCE = 1e-9
AGREES = "agrees"
DISAGREES = "disagrees"
UNCHECKED = "unchecked"
NOT_CHARGED = "not charged"


@dataclass(frozen=True)
class TimePerByte:
    """The instance's inferred time per byte ``ρ`` and how many sized tensors share it."""

    value: float | None   # None: no sized tensor to infer it from
    supporting: int       # distinct sized tensors (u, size) with c(u) = ρ·size
    sized: int            # distinct sized tensors (u, size > 0)
    size: float = 0.0     # bytes of the tensor whose ratio ρ is
    quantum: float = 0.0  # q: the costs are rounded to multiples of it (module docstring)

    def slack(self, size: float) -> float:
        """How far a cost rounded to the quantum may be from ``ρ · size``, besides the relative tolerance."""
        if self.value is None or self.size <= 0:
            return 0.0
        return self.quantum / 2 + size * self.quantum / (2 * self.size)


@dataclass(frozen=True)
class NodeMismatch:
    """A boundary node whose charged cost is not ``ρ`` times the bytes the ledger counts for it."""

    node: int
    name: str
    cost: float
    bytes: float
    backward: bool = False


@dataclass(frozen=True)
class DeviceTraffic:
    """Bytes one device receives and sends, by kind, and the check against the charged communication."""

    position: int
    type: str
    activations_in: float
    activations_out: float
    errors_in: float
    errors_out: float
    charged: float                 # Σ c(u) over In ∪ Out; 0 for a device that pays no communication
    ledger_time: float | None      # ρ · (bytes in + bytes out); None when ρ or a size is unknown
    status: str                    # agrees | disagrees | unchecked | not charged
    mismatches: tuple[NodeMismatch, ...] = ()
    unsized: tuple[int, ...] = ()  # boundary nodes with no size on a crossing edge

    @property
    def bytes_in(self) -> float:
        return self.activations_in + self.errors_in

    @property
    def bytes_out(self) -> float:
        return self.activations_out + self.errors_out


@dataclass(frozen=True)
class LinkTraffic:
    """Bytes sent from device ``source`` to device ``target`` (plan positions)."""

    source: int
    target: int
    activations: float
    errors: float


@dataclass(frozen=True)
class Ledger:
    """The ledger of a plan: per device, per link, the bandwidth, and what disagrees."""

    time_per_byte: TimePerByte
    devices: tuple[DeviceTraffic, ...]
    links: tuple[LinkTraffic, ...]

    @property
    def disagreements(self) -> tuple[str, ...]:
        """One line per device whose ledger does not match its charged communication (or cannot be checked)."""
        lines = []
        if self.time_per_byte.value is None:
            if any(d.charged > 0 for d in self.devices):
                lines.append("no edge carries a tensor size above 0: the ledger cannot be checked")
            return tuple(lines)
        for d in self.devices:
            if d.status == DISAGREES:
                nodes = "; ".join(f"node {m.node} ({m.name}) costs {m.cost:.10g} for {format_bytes(m.bytes)} bytes"
                                  for m in d.mismatches[:3])
                more = f" and {len(d.mismatches) - 3} more" if len(d.mismatches) > 3 else ""
                lines.append(f"device {d.position} ({d.type}): charged {d.charged:.10g}, ledger "
                             f"{d.ledger_time:.10g}: {nodes}{more}")
            elif d.status == UNCHECKED:
                ids = ", ".join(str(v) for v in d.unsized[:5]) + (" ..." if len(d.unsized) > 5 else "")
                lines.append(f"device {d.position} ({d.type}): unchecked, no size for boundary nodes {ids}")
        return tuple(lines)

    @property
    def summary(self) -> str:
        """The ledger's verdict in one line (see "What a disagreement means" in the module docstring)."""
        problems = self.disagreements
        if self.time_per_byte.value is None:
            if not problems:
                return "ledger: no communication is charged"
            return "ledger unchecked: no edge carries a tensor size above 0"
        if not problems:
            return "ledger agrees with the charged communication on every device"
        def count(n: int, what: str) -> str:
            return f"{n} {what}{'' if n == 1 else 's'}"

        disagreeing = sum(1 for d in self.devices if d.status == DISAGREES)
        unchecked = sum(1 for d in self.devices if d.status == UNCHECKED)
        nodes = {m.node for d in self.devices for m in d.mismatches}
        backward = {m.node for d in self.devices for m in d.mismatches if m.backward}
        findings = []
        if disagreeing:
            kind = (" (a backward node)" if len(nodes) == 1 else " (all backward nodes)") if nodes == backward else ""
            findings.append(f"the transfer costs of {count(len(nodes), 'boundary node')}{kind} are not the time per "
                            f"byte times their tensor sizes, on {count(disagreeing, 'device')}")
        if unchecked:
            findings.append(f"{count(unchecked, 'device')} unchecked (boundary nodes without a size)")
        return ("ledger (informational: about the instance's data, not the plan, which is checked against the "
                f"charged costs): {'; '.join(findings)}")

    @property
    def agrees(self) -> bool:
        """Every charging device's communication equals ``ρ`` times its ledger bytes."""
        return not self.disagreements

    @property
    def verdict(self) -> bool | None:
        """``True`` when the ledger agrees on every charging device, ``False`` when it disagrees on one,
        ``None`` when nothing disagrees but something could not be checked (no tensor sizes)."""
        if any(d.status == DISAGREES for d in self.devices):
            return False
        return None if self.disagreements else True


def format_bytes(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.10g}"


def _close(a: float, b: float, slack: float = 0.0) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(abs(a), abs(b)) + slack


# ----------------------------------------------------------------------------------------
# one bandwidth per instance
# ----------------------------------------------------------------------------------------

def infer_time_per_byte(problem: Instance) -> TimePerByte:
    """``ρ``: the ratio ``c(u)/size`` shared by the most distinct sized tensors ``(u, size > 0)``, the costs
    rounded to the instance's quantum (module docstring)."""
    quantum = problem.time_quantum
    tensors = sorted({(e.src, e.size) for e in problem.edges if e.size is not None and e.size > 0})
    ratios = sorted((problem.node(u).out_cost / size, size) for u, size in tensors)
    groups: list[list[tuple[float, float]]] = []   # consecutive ratios close to the group's first
    for ratio, size in ratios:
        if groups:
            first, first_size = groups[-1][0]
            if _close(first, ratio, quantum / (2 * first_size) + quantum / (2 * size)):
                groups[-1].append((ratio, size))
                continue
        groups.append([(ratio, size)])
    if not groups:
        return TimePerByte(None, 0, 0)
    best = min(groups, key=lambda g: (-len(g), -sum(s for _, s in g), g[0][0]))
    ratio, size = max(best, key=lambda pair: (pair[1], -pair[0]))     # the largest tensor's, least rounded
    return TimePerByte(ratio, len(best), len(tensors), size, quantum)


# ----------------------------------------------------------------------------------------
# the ledger
# ----------------------------------------------------------------------------------------

def _max_size(current: float | None, size: float | None, missing: set[int], u: int) -> float | None:
    if size is None:
        missing.add(u)
        return current
    return size if current is None else max(current, size)


def refuse_split_plan(plan: Plan) -> None:
    """Refuse a split-backward plan (one whose devices list B or W tasks): its transfers follow the tasks
    (docs/backward-split.md), where the ledger counts those of the joint model, node by node."""
    if any(dev.b_tasks or dev.w_tasks for dev in plan.devices):
        raise InvalidParameterError("plan", "places backward tasks (B or W) itself, as a split-backward plan does: "
                                            "the ledger counts the transfers of the joint model, not those the split "
                                            "model charges (docs/backward-split.md)")


@keywords_checked
def communication_ledger(problem: Instance, plan: Plan | object, *, by_call: bool = False) -> Ledger:
    """The ledger of ``plan`` (see the module docstring): a :class:`Plan`, or what
    :func:`placement.io.plans.as_plan` reads (a ``Result``, a plan document, a plan file path);
    unknown node ids in the plan are ignored. With ``by_call`` (the latency model), each call a
    communication-paying device lists is a set of its own, whose boundary is paid and counted
    apart, as the latency schedule charges it; the device's figures add up its calls'. A split-backward plan is
    refused (:func:`refuse_split_plan`), as is a ``problem`` that is no :class:`Instance`
    (:class:`InvalidParameterError`)."""
    if not isinstance(problem, Instance):
        raise InvalidParameterError("problem", "must be an Instance (placement.load reads one from a file), "
                                               f"not {type(problem).__name__}")
    plan = as_plan(plan)
    refuse_split_plan(plan)
    rho = infer_time_per_byte(problem)
    known = {n.id for n in problem.nodes}
    type_pays = {t.name: t.pays_comm for t in problem.device_types}
    members = [{v for v in dev.nodes if v in known} for dev in plan.devices]
    where: dict[int, list[int]] = {}
    for d, held in enumerate(members):
        for v in held:
            where.setdefault(v, []).append(d)
    # the sets whose boundaries are paid: one per device, or one per call of a paying device
    owner: list[int] = []                              # per set, its device
    units_of: list[list[int]] = [[] for _ in plan.devices]   # per device, its sets
    unit_where: dict[int, list[int]] = {}
    for d, (dev, held) in enumerate(zip(plan.devices, members)):
        sets = [held]
        if by_call and dev.calls and type_pays.get(dev.type, True):
            called = [{v for v in call if v in held} for call in dev.calls]
            rest = held - set().union(*called)
            sets = [c for c in called if c] + ([rest] if rest else [])
        for unit in sets:
            for v in unit:
                unit_where.setdefault(v, []).append(len(owner))
            units_of[d].append(len(owner))
            owner.append(d)

    # per set, the tensors crossing its boundary each way, from one pass over the edges
    incoming_of: list[dict[int, float | None]] = [{} for _ in owner]
    outgoing_of: list[dict[int, float | None]] = [{} for _ in owner]
    missing_of: list[set[int]] = [set() for _ in plan.devices]
    for e in problem.edges:
        at_src, at_dst = unit_where.get(e.src, ()), unit_where.get(e.dst, ())
        for k in dict.fromkeys(at_dst):
            if k not in at_src:
                incoming_of[k][e.src] = _max_size(incoming_of[k].get(e.src), e.size, missing_of[owner[k]], e.src)
        for k in dict.fromkeys(at_src):
            if k not in at_dst:
                outgoing_of[k][e.src] = _max_size(outgoing_of[k].get(e.src), e.size, missing_of[owner[k]], e.src)

    devices = []
    for d, dev in enumerate(plan.devices):
        missing = missing_of[d]
        totals = {"activations_in": 0.0, "activations_out": 0.0, "errors_in": 0.0, "errors_out": 0.0}
        boundary: list[int] = []    # a node once per set whose boundary it crosses
        sizes: list[float | None] = []
        for k in units_of[d]:
            incoming, outgoing = incoming_of[k], outgoing_of[k]
            for direction, tensors in (("in", incoming), ("out", outgoing)):
                for u in sorted(tensors, key=problem.index_of):
                    kind = "errors" if problem.node(u).backward else "activations"
                    totals[f"{kind}_{direction}"] += tensors[u] or 0.0
            for u in sorted(set(incoming) | set(outgoing), key=problem.index_of):
                boundary.append(u)
                sizes.append(incoming[u] if u in incoming else outgoing[u])
        pays = type_pays.get(dev.type, True)
        charged = sum(problem.node(u).out_cost for u in boundary) if pays else 0.0
        unsized = tuple(sorted(missing, key=problem.index_of))
        ledger_time = None
        mismatches: tuple[NodeMismatch, ...] = ()
        if not pays:
            status = NOT_CHARGED
        elif rho.value is None or unsized:
            status = UNCHECKED if charged > 0 or unsized else AGREES
        else:
            ledger_time = rho.value * (sum(totals.values()))
            if _close(charged, ledger_time, sum(rho.slack(size) for size in sizes)):
                status = AGREES
            else:
                status = DISAGREES
                found: dict[int, NodeMismatch] = {}
                for u, size in zip(boundary, sizes):
                    cost = problem.node(u).out_cost
                    if u not in found and not _close(cost, rho.value * size, rho.slack(size)):
                        found[u] = NodeMismatch(u, problem.node(u).name, cost, size, problem.node(u).backward)
                mismatches = tuple(found.values())
        devices.append(DeviceTraffic(d, dev.type, charged=charged, ledger_time=ledger_time, status=status,
                                     mismatches=mismatches, unsized=unsized if pays else (), **totals))

    link_tensors: dict[tuple[int, int], dict[int, float]] = {}
    for e in problem.edges:
        for i in where.get(e.src, ()):
            for j in where.get(e.dst, ()):
                if i != j and e.size is not None:
                    held = link_tensors.setdefault((i, j), {})
                    held[e.src] = max(held.get(e.src, 0.0), e.size)
    links = []
    for (i, j), tensors in sorted(link_tensors.items()):
        acts = sum(s for u, s in tensors.items() if not problem.node(u).backward)
        errs = sum(s for u, s in tensors.items() if problem.node(u).backward)
        links.append(LinkTraffic(i, j, acts, errs))
    return Ledger(rho, tuple(devices), tuple(links))
