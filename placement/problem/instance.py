"""The placement problem of DESIGN.md §2 (Tarnawski et al. 2020), generalised to device types.

A :class:`Instance` is a DAG of :class:`Node` objects plus a catalogue of
:class:`DeviceType` objects. It is validated once, on construction, and frozen.

Model
-----
* Node ``v``: ``times[t]`` is its processing time on one device of type ``t``
  (``None``: not supported there), ``memory`` the bytes it occupies,
  ``backward`` whether it is a backward (gradient) node, ``colour`` its colour
  class (nodes of one colour share a device; ``None``: a class of its own), and
  ``out_cost`` = c(v), the time to move its output across a device boundary.
  A backward node may give ``weight_times[t]``, the weight-gradient part of ``times[t]`` (the
  split-backward model, ``docs/backward-split.md``; ``None``: not given).
* Edge ``(u, w)``: a data dependency; ``size`` the tensor bytes (optional).
* Device type ``t``: ``count`` devices, each with memory bound ``memory``
  (``math.inf`` for none); ``pays_comm`` tells whether a device of this type
  pays communication (accelerators do, CPU cores do not).

Load of a device of type ``t`` holding the set ``S``::

    load(S) = Σ_{v∈S} times[t](v) + [pays_comm] (Σ_{u∈In(S)} c(u) + Σ_{u∈Out(S)} c(u))

with ``In(S)`` the nodes outside ``S`` with a successor in ``S`` and
``Out(S)`` the nodes of ``S`` with a successor outside ``S``.
"""

from __future__ import annotations

import heapq
import math
import numbers
import sys
from collections.abc import Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from placement.errors import InvalidInstanceError
from placement.jsonfile import past_floats
from placement.parameters import keywords_checked

if TYPE_CHECKING:
    import numpy as np

ACCELERATOR = "accelerator"
CPU = "cpu"

#: The most the times on one device type, the transfer costs, the node memory sizes or the edge sizes
#: may sum to over a graph. Far above any real instance; the factor of 10^208 left below the float
#: limit (1.8e308) keeps every load finite however the In/Out sets count transfers (each at most once
#: per device or call), and so every product the solvers form with device counts and scales.
MAX_SUM = 1e100


def _as_int(value: object) -> object:
    """An integer of any integer type (numpy's too) as ``int``; anything else unchanged, for
    :func:`validate` to name."""
    if type(value) is int:
        return value
    return int(value) if isinstance(value, numbers.Integral) and not is_flag(value) else value


def _as_float(value: object) -> object:
    """A real number of any type (numpy's too) as ``float``; anything else, and an integer past the float range
    (for :func:`validate` to name), unchanged."""
    if type(value) is float:
        return value
    try:
        return float(value) if isinstance(value, numbers.Real) and not is_flag(value) else value
    except OverflowError:
        return value


def is_flag(value: object) -> bool:
    """Whether ``value`` is a boolean: Python's or numpy's."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def _as_flag(value: object) -> object:
    """A boolean of either kind as ``bool``; anything else unchanged."""
    if type(value) is bool:
        return value
    return bool(value) if is_flag(value) else value


def _as_times(value: object) -> object:
    """A sequence of times (``None`` where unsupported) as a tuple of floats; anything else unchanged, for
    :func:`validate` to name: a mapping or a set too, whose iteration gives no time per device type in order
    (a dict would give its keys)."""
    if type(value) is tuple and all(type(p) is float or p is None for p in value):
        return value
    if isinstance(value, (str, bytes, Mapping, Set)) or not isinstance(value, Iterable):
        return value
    return tuple(None if p is None else _as_float(p) for p in value)


@keywords_checked
@dataclass(frozen=True)
class DeviceType:
    """A kind of device: how many there are, their memory (``None``, as ``null`` in a file: unbounded), and
    whether they pay communication."""

    name: str
    count: int
    memory: float = math.inf
    pays_comm: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _as_int(self.count))
        object.__setattr__(self, "memory", math.inf if self.memory is None else _as_float(self.memory))
        object.__setattr__(self, "pays_comm", _as_flag(self.pays_comm))


@keywords_checked
@dataclass(frozen=True, slots=True)
class Node:
    """One operator or layer of the graph."""

    id: int
    name: str
    times: tuple[float | None, ...]
    memory: float = 0.0
    backward: bool = False
    colour: int | None = None
    out_cost: float = 0.0
    weight_times: tuple[float | None, ...] | None = None

    def __post_init__(self) -> None:
        if (type(self.id) is int and type(self.memory) is float and type(self.backward) is bool
                and type(self.out_cost) is float and (self.colour is None or type(self.colour) is int)
                and self.weight_times is None and type(self.times) is tuple
                and all(type(p) is float or p is None for p in self.times)):
            return   # every field in its own type already, as the readers build nodes
        fields = {"id": _as_int(self.id), "times": _as_times(self.times), "memory": _as_float(self.memory),
                  "backward": _as_flag(self.backward), "out_cost": _as_float(self.out_cost)}
        if self.colour is not None:
            fields["colour"] = _as_int(self.colour)
        if self.weight_times is not None:
            fields["weight_times"] = _as_times(self.weight_times)
        for name, value in fields.items():
            if value is not getattr(self, name):
                object.__setattr__(self, name, value)


@keywords_checked
@dataclass(frozen=True, slots=True)
class Edge:
    """A data dependency ``src -> dst``; ``size`` is the tensor size in bytes, if known."""

    src: int
    dst: int
    size: float | None = None

    def __post_init__(self) -> None:
        if type(self.src) is not int or type(self.dst) is not int:
            object.__setattr__(self, "src", _as_int(self.src))
            object.__setattr__(self, "dst", _as_int(self.dst))
        if self.size is not None and type(self.size) is not float:
            object.__setattr__(self, "size", _as_float(self.size))


@keywords_checked
@dataclass(frozen=True)
class Instance:
    """A validated, immutable placement instance.

    ``nodes`` keep the order of the input; ``device_types`` fix the meaning of
    each position of ``Node.times``.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    device_types: tuple[DeviceType, ...]
    name: str = ""
    #: the quantum every time and transfer cost is a multiple of, rounded to the nearest, where the instance
    #: records one (``about.time_quantum_ms`` of the files the model importers write); 0: none recorded
    time_quantum: float = 0.0
    _index: Mapping[int, int] = field(default=None, repr=False, compare=False)  # type: ignore[assignment]
    #: successor lists and topological order, computed on first use (the instance never changes)
    _graph: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", _elements(self.nodes, "nodes", Node))
        object.__setattr__(self, "edges", _elements(self.edges, "edges", Edge))
        object.__setattr__(self, "device_types", _elements(self.device_types, "device_types", DeviceType))
        object.__setattr__(self, "time_quantum", _as_float(self.time_quantum))
        validate(self)
        object.__setattr__(self, "_index", {n.id: i for i, n in enumerate(self.nodes)})

    # ----- lookups -------------------------------------------------------
    def index_of(self, node_id: int) -> int:
        """Position of the node with id ``node_id`` in ``nodes``."""
        return self._index[node_id]

    def node(self, node_id: int) -> Node:
        return self.nodes[self._index[node_id]]

    def type_index(self, name: str) -> int:
        for i, t in enumerate(self.device_types):
            if t.name == name:
                return i
        raise KeyError(name)

    @property
    def is_training(self) -> bool:
        return any(n.backward for n in self.nodes)

    def edge_positions(self) -> tuple:
        """Positions (in ``nodes``) of every edge's source and destination, as two read-only
        ``int64`` arrays in edge order; computed once per instance."""
        if "positions" not in self._graph:
            import numpy as np

            m = len(self.edges)
            src = np.fromiter(map(self._index.__getitem__, [e.src for e in self.edges]), np.int64, m)
            dst = np.fromiter(map(self._index.__getitem__, [e.dst for e in self.edges]), np.int64, m)
            src.setflags(write=False)
            dst.setflags(write=False)
            self._graph["positions"] = (src, dst)
        return self._graph["positions"]

    def successors(self) -> list[list[int]]:
        """Successor lists by node position (duplicates removed, order kept)."""
        return [list(targets) for targets in self._successor_tuples()]

    def predecessors(self) -> list[list[int]]:
        """Predecessor lists by node position (duplicates removed), the reverse of :meth:`successors`."""
        return [list(sources) for sources in self._predecessor_tuples()]

    def adjacency(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        """:meth:`successors` and :meth:`predecessors` as tuples, computed once per instance and not
        copied (for readers of a large graph that change neither)."""
        return self._successor_tuples(), self._predecessor_tuples()

    def _successor_tuples(self) -> tuple[tuple[int, ...], ...]:
        if "succ" not in self._graph:
            import numpy as np

            n = len(self.nodes)
            src, dst = self.edge_positions()
            _, first = np.unique(src * n + dst, return_index=True)
            first.sort()   # the first edge of every pair, in input order
            src, dst = src[first], dst[first]
            by_source = np.argsort(src, kind="stable")
            bounds = np.searchsorted(src[by_source], np.arange(n + 1)).tolist()
            targets = dst[by_source].tolist()
            self._graph["succ"] = tuple(tuple(targets[bounds[v]:bounds[v + 1]]) for v in range(n))
        return self._graph["succ"]

    def _predecessor_tuples(self) -> tuple[tuple[int, ...], ...]:
        if "pred" not in self._graph:
            pred: list[list[int]] = [[] for _ in self.nodes]
            for u, targets in enumerate(self._successor_tuples()):
                for w in targets:
                    pred[w].append(u)
            self._graph["pred"] = tuple(tuple(sources) for sources in pred)
        return self._graph["pred"]

    def topological_positions(self) -> list[int]:
        """Node positions in a topological order (Kahn's algorithm, ties broken by input order)."""
        if "order" not in self._graph:
            self._graph["order"] = tuple(self._kahn_order())
        return list(self._graph["order"])

    def topological_ids(self) -> list[int]:
        """Node ids in :meth:`topological_positions`' order."""
        return [self.nodes[v].id for v in self.topological_positions()]

    def timeless_backward_sources(self) -> frozenset[int]:
        """Ids of the backward nodes that read nothing and take no time on any device (the exchange of a
        shared parameter's gradient, :mod:`placement.torch.sharing`): their output is there from the start
        of a step, so they order no task of a step after another; their edges carry transfer costs only."""
        fed = {e.dst for e in self.edges}
        return frozenset(n.id for n in self.nodes
                         if n.backward and n.id not in fed and all(not t for t in n.times if t is not None))

    def topological_rank(self) -> list[int]:
        """Each node's place (by node position) in :meth:`topological_positions`' order."""
        if "rank" not in self._graph:
            rank = [0] * len(self.nodes)
            for place, v in enumerate(self.topological_positions()):
                rank[v] = place
            self._graph["rank"] = tuple(rank)
        return list(self._graph["rank"])

    def _kahn_order(self) -> list[int]:
        succ = self._successor_tuples()
        indeg = [0] * len(self.nodes)
        for targets in succ:
            for w in targets:
                indeg[w] += 1
        ready = [v for v in range(len(self.nodes)) if indeg[v] == 0][::-1]
        order: list[int] = []
        while ready:
            v = ready.pop()
            order.append(v)
            for w in reversed(succ[v]):
                indeg[w] -= 1
                if indeg[w] == 0:
                    ready.append(w)
        return order

    def colour_classes(self) -> list[list[int]]:
        """Colour classes as lists of node positions; an uncoloured node is a class of its own."""
        colours = [n.colour for n in self.nodes]
        if colours.count(None) == len(colours):
            return [[i] for i in range(len(colours))]
        by_colour: dict[int, list[int]] = {}
        classes: list[list[int]] = []
        for i, colour in enumerate(colours):
            if colour is None:
                classes.append([i])
            elif colour in by_colour:
                by_colour[colour].append(i)
            else:
                members = [i]
                by_colour[colour] = members
                classes.append(members)
        return classes

    def with_reachable_counts(self, stages: int | None = None) -> "Instance":
        """This instance with every device count cut to the number of colour classes, or to
        ``stages`` where that is larger (itself when no count is larger).

        Nodes of one colour share a device, so at most that many devices hold nodes whatever the
        objective, contiguity class or number of calls; the devices past it stay empty in every
        plan, and an empty device adds no load, no stage and no call. Solving the cut instance
        therefore gives the same plans, loads and optimum, without the work and memory that a
        count of 10^9 would cost. A request for exactly ``stages`` non-empty stages keeps that
        many devices, so that it stays a question the methods answer (infeasible when there are
        fewer classes), not one they refuse.
        """
        reachable = max(len(self.colour_classes()), stages or 0)
        if all(t.count <= reachable for t in self.device_types):
            return self
        return self.with_devices({t.name: min(t.count, reachable) for t in self.device_types})

    def with_devices(self, counts: Mapping[str, int] | None = None,
                     memory: Mapping[str, float] | None = None) -> "Instance":
        """A copy with some device counts or memory bounds overridden (re-validated)."""
        counts = dict(counts or {})
        memory = dict(memory or {})
        unknown = (set(counts) | set(memory)) - {t.name for t in self.device_types}
        if unknown:
            raise InvalidInstanceError(f"unknown device type {sorted(unknown)[0]!r}")
        types = tuple(
            DeviceType(t.name, counts.get(t.name, t.count), memory.get(t.name, t.memory), t.pays_comm)
            for t in self.device_types)
        return Instance(self.nodes, self.edges, types, self.name, self.time_quantum)


def _elements(value: object, what: str, kind: type) -> tuple:
    """``value`` as a tuple of ``kind``; :class:`InvalidInstanceError` when it is no sequence of them."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInstanceError(f"{what} must be a sequence of {kind.__name__}, got {type(value).__name__}")
    items = tuple(value)
    for k, item in enumerate(items):
        if not isinstance(item, kind):
            article = "an" if kind.__name__[0] in "AEIOU" else "a"
            raise InvalidInstanceError(f"{what}[{k}] must be {article} {kind.__name__}, got {type(item).__name__}")
    return items


def _check_number(value: float, what: str, *, allow_inf: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstanceError(f"{what} must be a number, got {type(value).__name__}")
    if isinstance(value, int) and past_floats(value):
        raise InvalidInstanceError(f"{what} is {past_floats(value)}")
    if math.isnan(value):
        raise InvalidInstanceError(f"{what} is NaN")
    if math.isinf(value) and not allow_inf:
        raise InvalidInstanceError(f"{what} is infinite")
    if value < 0:
        raise InvalidInstanceError(f"{what} is negative ({format_number(value)})")


def add_to_total(sums: dict[str, float], where: str, field: str, value: float) -> None:
    """Add ``value`` to the sum of ``field`` over the graph; refuse a sum above :data:`MAX_SUM`."""
    total = sums.get(field, 0.0) + value
    if total > MAX_SUM:
        raise InvalidInstanceError(f"{where}: {field} {format_number(value)} takes the graph's total {field} above "
                                   f"{MAX_SUM:g}, the most a total of times, costs or sizes may be")
    sums[field] = total


def format_number(value: float) -> str:
    """Exact, short text for a number: ``%g`` when that round-trips, whole numbers in full, else ``repr``;
    a negative zero (``-0.0``, as a file may write it) is 0."""
    value = value + 0   # -0.0 + 0 is 0.0 (any other number stays itself): "-0" named a number no one meant
    short = f"{value:g}"
    if float(short) == value:
        return short
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


class NodeFitsNoDeviceError(InvalidInstanceError):
    """A node that no device of the instance can run: too large for every memory, or supported by none."""


def _why_no_fit(n: Node, types: tuple[DeviceType, ...]) -> str:
    """Why node ``n`` fits no device, one reason per device type, e.g. ``not supported on accelerator; no cpu devices``."""
    reasons = []
    for t, p in zip(types, n.times):
        if p is None:
            reasons.append(f"not supported on {t.name}")
        elif t.count == 0:
            reasons.append(f"no {t.name} devices")
        else:
            reasons.append(f"needs {format_number(n.memory)} bytes, {t.name} memory is {format_number(t.memory)}")
    return "; ".join(reasons)


def least_first_order(n: int, succ: Sequence[Iterable[int]]) -> list[int]:
    """Positions ``0..n−1`` in a topological order of the arcs ``succ`` (Kahn's algorithm, the least
    ready position first, so the given order where it is one); shorter than ``n`` where a cycle holds
    the rest back."""
    indegree = [0] * n
    for targets in succ:
        for j in targets:
            indegree[j] += 1
    ready = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    return order


#: the longest cycle a message lists whole; a longer one shows its first and last :data:`CYCLE_ENDS` nodes
CYCLE_SHOWN = 40
CYCLE_ENDS = 10


def cycle_text(ids: list[int]) -> str:
    """``the graph has a cycle: a -> b -> c -> a`` for the nodes ``ids`` of a cycle, in order (the first not
    repeated). A cycle of more than :data:`CYCLE_SHOWN` nodes is counted and shown by its ends, the nodes
    between counted: a cycle through a whole large graph would otherwise be one line of hundreds of
    kilobytes."""
    closed = [str(i) for i in ids] + [str(ids[0])]
    if len(ids) <= CYCLE_SHOWN:
        return f"the graph has a cycle: {' -> '.join(closed)}"
    between = len(ids) - 2 * CYCLE_ENDS
    return (f"the graph has a cycle of {len(ids):,} nodes: {' -> '.join(closed[:CYCLE_ENDS])} -> ... "
            f"({between:,} more) -> {' -> '.join(closed[-CYCLE_ENDS - 1:])}")


def find_cycle(n: int, succ: list[list[int]]) -> list[int] | None:
    """A directed cycle as a list of positions (first node not repeated), or ``None``."""
    colour = [0] * n  # 0 new, 1 on stack, 2 done
    parent = [-1] * n
    for root in range(n):
        if colour[root]:
            continue
        stack = [(root, iter(succ[root]))]
        colour[root] = 1
        while stack:
            v, it = stack[-1]
            for w in it:
                if colour[w] == 0:
                    colour[w] = 1
                    parent[w] = v
                    stack.append((w, iter(succ[w])))
                    break
                if colour[w] == 1:
                    cycle = [v]
                    while cycle[-1] != w:
                        cycle.append(parent[cycle[-1]])
                    return cycle[::-1]
            else:
                colour[v] = 2
                stack.pop()
    return None


def validate(problem: Instance) -> None:
    """Check every invariant of the model; raise :class:`InvalidInstanceError` naming the first violation."""
    types = problem.device_types
    if not types:
        raise InvalidInstanceError("no device types")
    quantum = problem.time_quantum
    if isinstance(quantum, bool) or not isinstance(quantum, (int, float)) or not 0 <= quantum < math.inf:
        raise InvalidInstanceError(f"time_quantum must be a finite number ≥ 0 (0: none recorded), got {quantum!r}")
    if not isinstance(problem.name, str):
        raise InvalidInstanceError(f"the instance's name must be a string, got {type(problem.name).__name__} "
                                   f"{problem.name!r}")
    seen_types: set[str] = set()
    for t in types:
        if not isinstance(t.name, str):
            raise InvalidInstanceError(f"a device type's name must be a string, got {type(t.name).__name__}")
        if not t.name.strip() or t.name != t.name.strip():
            raise InvalidInstanceError(f"a device type's name must be a non-empty string without surrounding spaces "
                                       f"(plans name the type by it), got {t.name!r}")
        if not isinstance(t.pays_comm, bool):
            raise InvalidInstanceError(f"device type {t.name!r}: pays_comm must be true or false, got "
                                       f"{type(t.pays_comm).__name__} {t.pays_comm!r}")
        if t.name in seen_types:
            raise InvalidInstanceError(f"duplicate device type {t.name!r}")
        seen_types.add(t.name)
        if isinstance(t.count, bool) or not isinstance(t.count, int) or t.count < 0:
            raise InvalidInstanceError(f"device type {t.name!r}: count must be a non-negative integer, got {t.count!r}")
        _check_number(t.memory, f"device type {t.name!r}: memory", allow_inf=True)
    if sum(t.count for t in types) == 0:
        raise InvalidInstanceError("zero devices: every device count is 0")
    if not problem.nodes:
        raise InvalidInstanceError("the graph has no nodes")
    if not _plainly_valid(problem):
        _validate_each(problem)


def _validate_each(problem: Instance) -> None:
    """The node and edge checks of :func:`validate`, one element at a time, in input order: raises the
    first violation (or returns, where :func:`_plainly_valid` was only cautious)."""
    types = problem.device_types
    ids: dict[int, Node] = {}
    sums: dict[str, float] = {}
    for n in problem.nodes:
        if not isinstance(n.id, int) or isinstance(n.id, bool):
            raise InvalidInstanceError(f"a node id must be an integer, got {type(n.id).__name__} {n.id!r}")
        if past_floats(n.id):   # a plan's ids are read as numbers: it could not be read back
            raise InvalidInstanceError(f"a node id is {past_floats(n.id)}")
        if n.id in ids:
            raise InvalidInstanceError(f"duplicate node id {n.id}")
        ids[n.id] = n
        if not isinstance(n.name, str):
            raise InvalidInstanceError(f"node {n.id}: name must be a string, got {type(n.name).__name__} {n.name!r}")
        if not isinstance(n.backward, bool):
            raise InvalidInstanceError(f"node {n.id}: backward must be true or false, got "
                                       f"{type(n.backward).__name__} {n.backward!r}")
        if n.colour is not None and (not isinstance(n.colour, int) or isinstance(n.colour, bool)):
            raise InvalidInstanceError(f"node {n.id}: colour must be an integer or None, got "
                                       f"{type(n.colour).__name__} {n.colour!r}")
        if not isinstance(n.times, tuple):
            raise InvalidInstanceError(f"node {n.id}: times must be a sequence of numbers (None where "
                                       f"unsupported), got {type(n.times).__name__}")
        if len(n.times) != len(types):
            raise InvalidInstanceError(f"node {n.id}: {len(n.times)} times given for {len(types)} device types")
        for t, p in zip(types, n.times):
            if p is not None:
                _check_number(p, f"node {n.id}: time on {t.name}")
                add_to_total(sums, f"node {n.id}", f"time on {t.name}", p)
        _check_number(n.memory, f"node {n.id}: memory size")
        _check_number(n.out_cost, f"node {n.id}: transfer cost")
        add_to_total(sums, f"node {n.id}", "memory size", n.memory)
        add_to_total(sums, f"node {n.id}", "transfer cost", n.out_cost)
        if n.weight_times is not None:
            _check_weight_times(n, types)
        if not any(
            p is not None and t.count > 0 and n.memory <= t.memory for t, p in zip(types, n.times)
        ):
            named = f" ({n.name!r})" if n.name and n.name not in (str(n.id), f"node{n.id}") else ""
            raise NodeFitsNoDeviceError(f"node {n.id}{named} fits no device: {_why_no_fit(n, types)}")

    index = {n.id: i for i, n in enumerate(problem.nodes)}
    succ: list[list[int]] = [[] for _ in problem.nodes]
    for e in problem.edges:
        for end in (e.src, e.dst):
            if not isinstance(end, int) or isinstance(end, bool):   # as node ids are: True would be node 1
                raise InvalidInstanceError(f"edge {e.src!r} -> {e.dst!r}: an end must be a node id (an integer), "
                                           f"got {type(end).__name__} {end!r}")
            if end not in ids:
                raise InvalidInstanceError(f"edge {e.src} -> {e.dst} refers to unknown node {end}")
        if e.src == e.dst:
            raise InvalidInstanceError(f"edge {e.src} -> {e.dst} is a self-loop")
        if e.size is not None:
            _check_number(e.size, f"edge {e.src} -> {e.dst}: size")
            add_to_total(sums, f"edge {e.src} -> {e.dst}", "tensor size", e.size)
        if ids[e.src].backward and not ids[e.dst].backward:
            raise InvalidInstanceError(f"edge {e.src} -> {e.dst} goes from a backward node to a forward node")
        succ[index[e.src]].append(index[e.dst])

    cycle = find_cycle(len(problem.nodes), succ)
    if cycle is not None:
        raise InvalidInstanceError(cycle_text([problem.nodes[i].id for i in cycle]))


def _check_weight_times(n: Node, types: tuple[DeviceType, ...]) -> None:
    """A backward node's ``weight_times``: one per device type, given exactly where ``times`` is, each at
    most the node's time there."""
    if not n.backward:
        raise InvalidInstanceError(f"node {n.id}: weight times given for a forward node")
    if not isinstance(n.weight_times, tuple):
        raise InvalidInstanceError(f"node {n.id}: weight_times must be a sequence of numbers (None where "
                                   f"unsupported), got {type(n.weight_times).__name__}")
    if len(n.weight_times) != len(types):
        raise InvalidInstanceError(f"node {n.id}: {len(n.weight_times)} weight times given for {len(types)} device types")
    for t, p, w in zip(types, n.times, n.weight_times):
        if (p is None) != (w is None):
            raise InvalidInstanceError(f"node {n.id}: weight time on {t.name} must be given exactly where its time is")
        if w is not None:
            _check_number(w, f"node {n.id}: weight time on {t.name}")
            if w > p:
                raise InvalidInstanceError(f"node {n.id}: weight time on {t.name} ({format_number(w)}) exceeds its "
                                           f"time ({format_number(p)})")


def plain_numbers(values: list, optional: bool = False) -> np.ndarray | None:
    """``values`` as floats (``None`` as NaN where ``optional``), or ``None`` unless every one is a plain
    int or float (no bool, no other type) that is finite and not negative as a float, and every int one
    that a float holds exactly: the bulk form of the checks that name the first offending value, for
    callers that fall back on those."""
    import numpy as np

    allowed = {int, float, type(None)} if optional else {int, float}
    if not set(map(type, values)) <= allowed:
        return None
    try:
        array = np.array(values, dtype=np.float64)
    except OverflowError:  # an integer too large for a float
        return None
    present = array[~np.isnan(array)] if optional else array
    if len(present) != len(values) - (values.count(None) if optional else 0):   # NaN among the numbers
        return None
    if not (np.all(np.isfinite(present)) and np.all(present >= 0)):
        return None
    if present.size and present.max() >= 2.0 ** 53 and any(type(v) is int and float(v) != v for v in values):
        return None   # an integer a double cannot hold
    return array


def _plainly_valid(problem: Instance) -> bool:
    """Whether the nodes and edges pass every check of :func:`_validate_each`, tested in bulk.

    ``True`` only when nothing is amiss: unique ids, as many times as device types, plain
    finite non-negative numbers, every node fitting a device, edges between distinct known
    nodes, none from a backward node to a forward one, no cycle, and every total at most half
    of :data:`MAX_SUM` (the margin covers the rounding of a different summation order). Any
    doubt returns ``False``, and the element-wise checks then find and name the first
    violation, so the messages do not depend on this shortcut.
    """
    import numpy as np

    nodes, edges, types = problem.nodes, problem.edges, problem.device_types
    n = len(nodes)
    limit = MAX_SUM / 2
    with np.errstate(over="ignore", invalid="ignore"):   # a total past the largest float is inf: refused below
        try:
            if not all(type(v.id) is int and abs(v.id) <= sys.float_info.max and type(v.backward) is bool
                       and type(v.times) is tuple and type(v.name) is str
                       and (v.colour is None or type(v.colour) is int) for v in nodes):
                return False
            index = dict(zip([v.id for v in nodes], range(n)))
            if len(index) != n:
                return False
            times = [v.times for v in nodes]
            if set(map(len, times)) != {len(types)} or any(v.weight_times is not None for v in nodes):
                return False
            memory = plain_numbers([v.memory for v in nodes])
            out_cost = plain_numbers([v.out_cost for v in nodes])
            if memory is None or out_cost is None or memory.sum() > limit or out_cost.sum() > limit:
                return False
            fits = np.zeros(n, dtype=np.bool_)
            for k, t in enumerate(types):
                column = plain_numbers([p[k] for p in times], optional=True)
                if column is None:
                    return False
                supported = ~np.isnan(column)
                if column[supported].sum() > limit:
                    return False
                if t.count > 0:
                    fits |= supported & (memory <= t.memory)
            if not np.all(fits):
                return False
            if not all(type(e.src) is int and type(e.dst) is int for e in edges):
                return False
            src = np.array([index[e.src] for e in edges], dtype=np.int64)
            dst = np.array([index[e.dst] for e in edges], dtype=np.int64)
            sizes = plain_numbers([e.size for e in edges], optional=True)
            if sizes is None or np.nansum(sizes) > limit or np.any(src == dst):
                return False
            backward = np.array([bool(v.backward) for v in nodes], dtype=np.bool_)
            if np.any(backward[src] & ~backward[dst]):
                return False
        except (KeyError, TypeError, ValueError):   # an unknown or unhashable end, an odd type
            return False
    if np.all(src < dst):   # every edge goes forward in input order: no cycle
        return True
    order = np.argsort(src, kind="stable")
    bounds = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    targets = dst[order].tolist()
    return find_cycle(n, [targets[bounds[v]:bounds[v + 1]] for v in range(n)]) is None


def make_two_type_problem(nodes: Iterable[Node], edges: Iterable[Edge], accelerators: int, cpus: int,
                          memory: float, name: str = "", time_quantum: float = 0.0) -> Instance:
    """Tarnawski's two-type case: ``accelerators`` with memory ``memory`` (pay communication), ``cpus`` cores."""
    types = (DeviceType(ACCELERATOR, accelerators, memory, True), DeviceType(CPU, cpus, math.inf, False))
    return Instance(tuple(nodes), tuple(edges), types, name, time_quantum)


def class_index(classes: list[list[int]], count: int) -> list[int]:
    """Per node position (``count`` of them), the position of its class in ``classes`` (lists of node positions
    covering every node once, as :meth:`Instance.colour_classes` gives them)."""
    index = [0] * count
    for c, members in enumerate(classes):
        for v in members:
            index[v] = c
    return index
