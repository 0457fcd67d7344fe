"""The instance format of Piper (Tarnawski, Narayanan, Phanishayee, NeurIPS 2021).

``{"maxDevices", "maxMemoryPerDevice", "bandwidth", "mbsInBatch", "nodes": [{id, name?,
"TMPCs": {degree: [{id, timePerSample, parameterSize, memoryUsageA, memoryUsageB,
syncTimeFw: {predecessor id: bytes}, syncTimeBw: {successor id: bytes}}]}}],
"edges": [{sourceId, destId, communicationCost}]}``.

A TMPC ("tensor-model-parallel configuration") is one way to run a node on ``t`` devices
in tensor parallelism; ``TMPCs`` lists them per degree ``t`` (a JSON object, so the degrees
are strings of digits). The reader checks what Piper's own loader checks (distinct node ids,
distinct edges between known nodes, an acyclic graph, distinct non-empty TMPC ids per node
and degree, ``syncTimeFw``/``syncTimeBw`` naming exactly the node's in-/out-neighbours) and
more: every field is present, of the right JSON type, finite and non-negative; unknown
fields are errors; every degree lists at least one TMPC. Values are kept as written: in
``gnmt.json`` and ``resnet.json`` times are milliseconds while sizes divided by the
bandwidth are seconds, and Piper adds the two as they are.

Beyond Piper's format, an optional top-level ``deviceTypes`` object names the kinds of device a
plan may use (docs/piper.md, "Device types and CPUs")::

    "deviceTypes": {"a100": {"count": 8, "memory": 8e10},
                    "v100": {"count": 16, "memory": 3.2e10, "speed": 0.5, "bandwidth": 1.25e10},
                    "cpu": {"count": 4, "memory": 2e11, "speed": 0.05, "cpu": true}}

``count`` (devices of the type, a positive integer), ``memory`` (bytes per device), ``speed``
(optional, default 1: the profiled times are divided by it; bytes are unchanged), ``bandwidth``
(optional, default the top-level one: bytes per second of the type's stages), ``cpu`` (optional,
default false: a CPU runs tensor-parallel degree 1 only). Each stage's devices are of one type.
With ``deviceTypes``, the types' counts and memories replace ``maxDevices`` and
``maxMemoryPerDevice`` (still required, as in Piper's files, but not used).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from placement.errors import InvalidInstanceError
from placement.io.piper_shape import TOP_FIELDS, looks_like_piper
from placement.io.tarnawski import read_field
from placement.jsonfile import NODE_ID_KEY, json_type_name, parse_file
from placement.problem.instance import MAX_SUM, add_to_total, cycle_text, find_cycle, format_number

_TOP_OPTIONAL = ("deviceTypes",)
_TYPE_FIELDS = ("count", "memory")
_TYPE_OPTIONAL = ("speed", "bandwidth", "cpu")
_NODE_FIELDS = ("id", "TMPCs")
_NODE_OPTIONAL = ("name",)
_TMPC_FIELDS = ("id", "timePerSample", "parameterSize", "memoryUsageA", "memoryUsageB", "syncTimeFw", "syncTimeBw")
_EDGE_FIELDS = ("sourceId", "destId", "communicationCost")

_DEGREE = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True)
class TMPC:
    """One way to run a node with a given tensor-parallel degree ``t`` (one entry of ``TMPCs[t]``).

    * ``id``: the configuration's name, unique among the node's TMPCs for this ``t``
      (the published files use ``"vanilla"`` and ``"activation recomp"``).
    * ``time_per_sample``: compute time of the node per sample (micro-batch) on its ``t``
      devices; a stage with data-parallel degree ``d`` spends ``time_per_sample / d``. Piper
      prints results as seconds, but ``gnmt.json`` and ``resnet.json`` give milliseconds
      while the communication terms (bytes / bandwidth) are seconds; Piper adds them as they
      are and so does this package.
    * ``parameter_size``: bytes of weights; used only for the data-parallel gradient
      synchronisation, ``4·(d − 1)·parameter_size / (d · mbsInBatch)`` bytes per sample.
    * ``memory_usage_a``, ``memory_usage_b``: bytes; the node takes
      ``memory_usage_a · y + memory_usage_b`` on each device of its stage ``i``, where
      ``y = ceil((d_i + d_{i+1} + … + d_last) / d_i)`` is the number of micro-batches in
      flight there.
    * ``sync_time_fw``: predecessor id ``u`` -> extra bytes (despite the name, a volume added
      to the edge's ``communicationCost`` and divided by the bandwidth) moved on the edge
      ``u -> node`` when it enters the node's stage from another stage; one entry per in-edge.
    * ``sync_time_bw``: successor id ``w`` -> the same for the edge ``node -> w`` leaving the
      stage; one entry per out-edge.
    """

    id: str
    time_per_sample: float
    parameter_size: float
    memory_usage_a: float
    memory_usage_b: float
    sync_time_fw: Mapping[int, float]
    sync_time_bw: Mapping[int, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "sync_time_fw", MappingProxyType(dict(self.sync_time_fw)))
        object.__setattr__(self, "sync_time_bw", MappingProxyType(dict(self.sync_time_bw)))

    def __reduce__(self):  # mapping proxies do not pickle; rebuild from plain dicts
        return (type(self), (self.id, self.time_per_sample, self.parameter_size, self.memory_usage_a,
                             self.memory_usage_b, dict(self.sync_time_fw), dict(self.sync_time_bw)))

    def __hash__(self) -> int:  # mapping proxies are not hashable; equal mappings hash alike
        return hash((self.id, self.time_per_sample, self.parameter_size, self.memory_usage_a, self.memory_usage_b,
                     frozenset(self.sync_time_fw.items()), frozenset(self.sync_time_bw.items())))

    def to_json(self) -> dict[str, Any]:
        """The TMPC as Piper writes it (node ids as string keys)."""
        return {"id": self.id, "timePerSample": self.time_per_sample, "parameterSize": self.parameter_size,
                "memoryUsageA": self.memory_usage_a, "memoryUsageB": self.memory_usage_b,
                "syncTimeFw": {str(u): s for u, s in self.sync_time_fw.items()},
                "syncTimeBw": {str(w): s for w, s in self.sync_time_bw.items()}}


@dataclass(frozen=True)
class PiperNode:
    """A layer (or group of layers) of the network.

    * ``id``: the node's integer id, which edges and sync times refer to.
    * ``name``: a label for people (``""`` when the file gives none, as in Piper).
    * ``configurations``: tensor-parallel degree ``t`` (number of devices one replica of
      the stage is split over) -> the TMPCs the node can run with at that degree; a stage
      with degree ``t`` can only hold nodes that list ``t``.
    """

    id: int
    name: str
    configurations: Mapping[int, tuple[TMPC, ...]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "configurations",
                           MappingProxyType({t: tuple(c) for t, c in self.configurations.items()}))

    def __reduce__(self):
        return (type(self), (self.id, self.name, dict(self.configurations)))

    def __hash__(self) -> int:
        return hash((self.id, self.name, frozenset(self.configurations.items())))

    def to_json(self) -> dict[str, Any]:
        """The node as Piper writes it (degrees as string keys)."""
        return {"id": self.id, "name": self.name,
                "TMPCs": {str(t): [c.to_json() for c in cs] for t, cs in self.configurations.items()}}


@dataclass(frozen=True)
class PiperEdge:
    """A data dependency ``src -> dst``: ``communication_cost`` bytes per sample cross it.

    When the two ends are in different stages the edge costs ``2·(communication_cost + sync)``
    bytes (forward activations and backward gradients), ``sync`` being the TMPC's
    ``sync_time_bw[dst]`` at the source or ``sync_time_fw[src]`` at the destination.
    """

    src: int
    dst: int
    communication_cost: float

    def to_json(self) -> dict[str, Any]:
        return {"sourceId": self.src, "destId": self.dst, "communicationCost": self.communication_cost}


@dataclass(frozen=True)
class PiperDeviceType:
    """A kind of device of a heterogeneous Piper instance (an entry of ``deviceTypes``).

    * ``name``: the type's name (stages record it; ``devices="a100:8"`` counts by it).
    * ``count``: devices of the type; the stages on it use at most this many (``Σ d·t``).
    * ``memory``: bytes of memory of each device of the type.
    * ``speed``: the type's speed relative to the profiled device: a TMPC's ``timePerSample``
      becomes ``timePerSample / speed`` on it; bytes (transfers, syncs, parameters, memory) are
      unchanged.
    * ``bandwidth``: bytes per second of the transfers of the type's stages (``None``: the
      instance's ``bandwidth``).
    * ``cpu``: a CPU type, which runs tensor-parallel degree ``t = 1`` only.
    """

    name: str
    count: int
    memory: float
    speed: float = 1.0
    bandwidth: float | None = None
    cpu: bool = False

    def degrees_allowed(self, t: int) -> bool:
        """Whether a stage of tensor-parallel degree ``t`` may run on this type (CPUs: ``t = 1``)."""
        return t == 1 or not self.cpu

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"count": self.count, "memory": self.memory}
        if self.speed != 1.0:
            doc["speed"] = self.speed
        if self.bandwidth is not None:
            doc["bandwidth"] = self.bandwidth
        if self.cpu:
            doc["cpu"] = True
        return doc


@dataclass(frozen=True)
class PiperInstance:
    """A Piper instance: a DAG of nodes with TMPCs, and a pool of identical devices.

    * ``name``: the instance's name (the file's stem when read from a file).
    * ``max_devices``: devices available; a plan uses at most this many (``Σ d·t``).
    * ``max_memory_per_device``: bytes of memory of each device.
    * ``bandwidth``: bytes per second between devices (every transfer is divided by it).
    * ``microbatches_in_batch``: ``mbsInBatch``, micro-batches (samples) per batch; a
      stage's data-parallel degree divides it, and the gradient synchronisation is
      amortised over it.
    * ``nodes``, ``edges``: the graph, in file order.
    * ``device_types``: the kinds of device (:class:`PiperDeviceType`, file order); empty for
      Piper's own instances, whose ``max_devices`` devices of ``max_memory_per_device`` bytes are
      all of one (unnamed) type.
    """

    name: str
    max_devices: int
    max_memory_per_device: float
    bandwidth: float
    microbatches_in_batch: int
    nodes: tuple[PiperNode, ...]
    edges: tuple[PiperEdge, ...]
    device_types: tuple[PiperDeviceType, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "edges", tuple(self.edges))
        object.__setattr__(self, "device_types", tuple(self.device_types))

    def degrees(self) -> tuple[int, ...]:
        """The tensor-parallel degrees every node has TMPCs for, ascending.

        These are the degrees a stage may use whatever nodes it holds; a stage holding only
        some nodes may also use a degree that just those nodes support.
        """
        common: set[int] | None = None
        for n in self.nodes:
            common = set(n.configurations) if common is None else common & set(n.configurations)
        return tuple(sorted(common or ()))

    def to_json(self) -> dict[str, Any]:
        """The decoded JSON of the instance in Piper's format: ``parse_piper(i.to_json()) == i``."""
        doc = {"maxDevices": self.max_devices, "maxMemoryPerDevice": self.max_memory_per_device,
               "bandwidth": self.bandwidth, "mbsInBatch": self.microbatches_in_batch,
               "nodes": [n.to_json() for n in self.nodes], "edges": [e.to_json() for e in self.edges]}
        if self.device_types:
            doc["deviceTypes"] = {t.name: t.to_json() for t in self.device_types}
        return doc


def parse_piper(data: Any, name: str = "") -> PiperInstance:
    """Build a validated :class:`PiperInstance` from the decoded JSON of a Piper instance.

    Raises :class:`InvalidInstanceError` with a one-line message naming the place, e.g.
    ``nodes[3].TMPCs["2"][0]: field 'timePerSample' is negative (-1)``.
    """
    top = "instance"
    _object(data, top, TOP_FIELDS, _TOP_OPTIONAL)
    max_devices = _positive(data, "maxDevices", top, "count")
    memory = _positive(data, "maxMemoryPerDevice", top, "number")
    bandwidth = _positive(data, "bandwidth", top, "number")
    microbatches = _positive(data, "mbsInBatch", top, "count")
    raw_nodes = _typed(data, "nodes", top, list)
    raw_edges = _typed(data, "edges", top, list)
    if not raw_nodes:
        raise InvalidInstanceError(f"{top}: field 'nodes' is empty")

    nodes: list[PiperNode] = []
    position: dict[int, int] = {}
    for k, raw in enumerate(raw_nodes):
        node = _node(raw, f"nodes[{k}]")
        if node.id in position:
            raise InvalidInstanceError(f"nodes[{k}]: id {node.id} already used by nodes[{position[node.id]}]")
        position[node.id] = k
        nodes.append(node)

    edges: list[PiperEdge] = []
    seen: dict[tuple[int, int], int] = {}
    succ: list[list[int]] = [[] for _ in nodes]
    for k, raw in enumerate(raw_edges):
        where = f"edges[{k}]"
        _object(raw, where, _EDGE_FIELDS)
        edge = PiperEdge(read_field(raw, "sourceId", where, "id"), read_field(raw, "destId", where, "id"),
                         read_field(raw, "communicationCost", where, "number"))
        for key, end in (("sourceId", edge.src), ("destId", edge.dst)):
            if end not in position:
                raise InvalidInstanceError(f"{where}: {key} {end} is not the id of a node")
        if edge.src == edge.dst:
            raise InvalidInstanceError(f"{where}: self-loop on node {edge.src}")
        pair = (edge.src, edge.dst)
        if pair in seen:
            raise InvalidInstanceError(f"{where}: edge {edge.src} -> {edge.dst} repeats edges[{seen[pair]}]")
        seen[pair] = k
        succ[position[edge.src]].append(position[edge.dst])
        edges.append(edge)

    cycle = find_cycle(len(nodes), succ)
    if cycle is not None:
        raise InvalidInstanceError(f"{top}: {cycle_text([nodes[i].id for i in cycle])}")
    _check_sync_times(nodes, edges)
    times, volume = _check_totals(nodes, edges)
    _check_bandwidth(bandwidth, volume, "bandwidth")
    types = _device_types(data, times, volume) if "deviceTypes" in data else ()
    return PiperInstance(name, max_devices, memory, bandwidth, microbatches, tuple(nodes), tuple(edges), types)


def read_piper(path: str | Path) -> PiperInstance:
    """Read and validate a Piper instance file; errors name the file."""
    return parse_file(path, parse_piper)


def _object(value: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """``value`` is a JSON object with every ``required`` field and no field outside ``required + optional``."""
    if not isinstance(value, dict):
        what = "the instance" if where == "instance" else where
        raise InvalidInstanceError(f"{what} must be a JSON object, got {json_type_name(value)}")
    allowed = required + optional
    for key in value:
        if key not in allowed:
            raise InvalidInstanceError(f"{where}: unknown field {key!r} (allowed: {', '.join(allowed)})")
    for key in required:
        if key not in value:
            raise InvalidInstanceError(f"{where}: missing field {key!r} (required: {', '.join(required)})")


#: the largest count or degree read: every whole number up to it is a float, and the DP's integer
#: arrays hold it (2^63 overflowed them with a traceback)
MAX_COUNT = 2 ** 53


def _positive(obj: dict, key: str, where: str, kind: str) -> Any:
    """A ``count`` or ``number`` field that must also be greater than zero (a count at most
    :data:`MAX_COUNT`)."""
    value = read_field(obj, key, where, kind)
    if value == 0:
        raise InvalidInstanceError(f"{where}: field {key!r} must be positive, got 0")
    if kind == "count" and value > MAX_COUNT:
        shown = str(value) if len(str(value)) <= 20 else f"a number of {len(str(value))} digits"
        raise InvalidInstanceError(f"{where}: field {key!r} is {shown}, above 2^53, the largest count read")
    return value


def _typed(obj: dict, key: str, where: str, kind: type) -> Any:
    """Field ``key``, which must be a JSON array (``kind`` list) or object (``kind`` dict)."""
    value = obj[key]
    if not isinstance(value, kind):
        raise InvalidInstanceError(f"{where}: field {key!r} must be an {json_type_name(kind())}, "
                                   f"got {json_type_name(value)}")
    return value


def _string(obj: dict, key: str, where: str, *, empty: bool) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise InvalidInstanceError(f"{where}: field {key!r} must be a string, got {json_type_name(value)}")
    if not value and not empty:
        raise InvalidInstanceError(f"{where}: field {key!r} is empty")
    return value


def _node(raw: Any, where: str) -> PiperNode:
    _object(raw, where, _NODE_FIELDS, _NODE_OPTIONAL)
    node_id = read_field(raw, "id", where, "id")
    label = _string(raw, "name", where, empty=True) if "name" in raw else ""
    table = _typed(raw, "TMPCs", where, dict)
    if not table:
        raise InvalidInstanceError(f"{where}: field 'TMPCs' is empty (the node needs at least one TMPC)")
    configurations: dict[int, tuple[TMPC, ...]] = {}
    for key, raw_list in table.items():
        if not _DEGREE.fullmatch(key):
            raise InvalidInstanceError(f"{where}.TMPCs: key {json.dumps(key)} is not a tensor-parallel degree "
                                       "(a positive integer in decimal digits, no leading zeros)")
        if len(key) > 16 or int(key) > MAX_COUNT:
            shown = key if len(key) <= 20 else f"of {len(key)} digits"
            raise InvalidInstanceError(f"{where}.TMPCs: degree {shown} is above 2^53, the largest degree read")
        at = f"{where}.TMPCs[{json.dumps(key)}]"
        if not isinstance(raw_list, list):
            raise InvalidInstanceError(f"{at}: must be an array of TMPCs, got {json_type_name(raw_list)}")
        if not raw_list:
            raise InvalidInstanceError(f"{at}: no TMPC (each listed degree needs at least one)")
        tmpcs: list[TMPC] = []
        for j, raw_tmpc in enumerate(raw_list):
            tmpc = _tmpc(raw_tmpc, f"{at}[{j}]")
            for i, other in enumerate(tmpcs):
                if other.id == tmpc.id:
                    raise InvalidInstanceError(f"{at}[{j}]: id {tmpc.id!r} already used by {at}[{i}]")
            tmpcs.append(tmpc)
        configurations[int(key)] = tuple(tmpcs)
    return PiperNode(node_id, label, configurations)


def _tmpc(raw: Any, where: str) -> TMPC:
    _object(raw, where, _TMPC_FIELDS)
    return TMPC(_string(raw, "id", where, empty=False),
                *(read_field(raw, key, where, "number") for key in _TMPC_FIELDS[1:5]),
                _sync_times(raw, "syncTimeFw", where), _sync_times(raw, "syncTimeBw", where))


def _sync_times(raw: dict, key: str, where: str) -> dict[int, float]:
    table = _typed(raw, key, where, dict)
    at = f"{where}.{key}"
    for neighbour in table:
        if not NODE_ID_KEY.fullmatch(neighbour):
            raise InvalidInstanceError(
                f"{at}: key {json.dumps(neighbour)} is not a node id (an integer in decimal digits)")
    return {int(neighbour): read_field(table, neighbour, at, "number") for neighbour in table}


def _check_sync_times(nodes: Iterable[PiperNode], edges: list[PiperEdge]) -> None:
    """Every TMPC gives one ``syncTimeFw`` per in-edge and one ``syncTimeBw`` per out-edge, and no other."""
    preds: dict[int, set[int]] = {}
    succs: dict[int, set[int]] = {}
    for e in edges:
        preds.setdefault(e.dst, set()).add(e.src)
        succs.setdefault(e.src, set()).add(e.dst)
    for k, node in enumerate(nodes):
        for t, tmpcs in node.configurations.items():
            for j, tmpc in enumerate(tmpcs):
                where = f"nodes[{k}].TMPCs[{json.dumps(str(t))}][{j}]"
                _match_neighbours(tmpc.sync_time_fw, preds.get(node.id, set()), f"{where}.syncTimeFw",
                                  "{} -> " + str(node.id))
                _match_neighbours(tmpc.sync_time_bw, succs.get(node.id, set()), f"{where}.syncTimeBw",
                                  f"{node.id} -> {{}}")


def _check_bandwidth(bandwidth: float, volume: float, where: str) -> None:
    """Every transfer time a planner forms (bytes over ``bandwidth``) stays at most ``MAX_SUM``: ``volume``
    bounds the bytes a stage moves per sample (every edge both ways, every sync, Piper's all-reduce)."""
    if volume / bandwidth > MAX_SUM:
        raise InvalidInstanceError(f"{where}: {format_number(bandwidth)} bytes per second takes the graph's "
                                   f"transfers ({format_number(volume)} bytes) above {MAX_SUM:g} seconds, the most a "
                                   "total of times may be")


def _device_types(data: dict, times: float, volume: float) -> tuple[PiperDeviceType, ...]:
    """The ``deviceTypes`` object (module docstring); ``times``: the total of every ``timePerSample``,
    which divided by a type's speed must stay at most :data:`placement.problem.instance.MAX_SUM`."""
    top = "instance"
    table = _typed(data, "deviceTypes", top, dict)
    if not table:
        raise InvalidInstanceError(f"{top}: field 'deviceTypes' is empty (name at least one type, or leave it out)")
    types = []
    for name, entry in table.items():
        where = f"deviceTypes[{json.dumps(name)}]"
        if not name or "," in name or ":" in name or name != name.strip():
            raise InvalidInstanceError(f"{where}: a device type's name must be non-empty, without ',' or ':' "
                                       "and without surrounding spaces")
        _object(entry, where, _TYPE_FIELDS, _TYPE_OPTIONAL)
        count = _positive(entry, "count", where, "count")
        memory = _positive(entry, "memory", where, "number")
        speed = _positive(entry, "speed", where, "number") if "speed" in entry else 1.0
        if times / speed > MAX_SUM:
            raise InvalidInstanceError(f"{where}: speed {format_number(speed)} takes the graph's total timePerSample "
                                       f"on the type above {MAX_SUM:g}, the most a total of times may be")
        bandwidth = _positive(entry, "bandwidth", where, "number") if "bandwidth" in entry else None
        if bandwidth is not None:
            _check_bandwidth(bandwidth, volume, f"{where}.bandwidth")
        cpu = read_field(entry, "cpu", where, "bool") if "cpu" in entry else False
        types.append(PiperDeviceType(name, count, memory, speed, bandwidth, cpu))
    return tuple(types)


def _check_totals(nodes: Iterable[PiperNode], edges: list[PiperEdge]) -> tuple[float, float]:
    """Each field summed over every TMPC (and the edges' costs over the edges) stays at most
    :data:`placement.problem.instance.MAX_SUM`, as for the other formats, so every stage time,
    memory and objective the planners form is finite. Returns the total ``timePerSample`` and a bound
    on the bytes a stage moves per sample: ``2·(Σ communicationCost + Σ syncTimeFw + Σ syncTimeBw) +
    4·Σ parameterSize``."""
    sums: dict[str, float] = {}
    for k, node in enumerate(nodes):
        for t, tmpcs in node.configurations.items():
            for j, c in enumerate(tmpcs):
                where = f"nodes[{k}].TMPCs[{json.dumps(str(t))}][{j}]"
                for field, value in (("timePerSample", c.time_per_sample), ("parameterSize", c.parameter_size),
                                     ("memoryUsageA", c.memory_usage_a), ("memoryUsageB", c.memory_usage_b),
                                     ("syncTimeFw", sum(c.sync_time_fw.values())),
                                     ("syncTimeBw", sum(c.sync_time_bw.values()))):
                    add_to_total(sums, where, field, value)
    for k, edge in enumerate(edges):
        add_to_total(sums, f"edges[{k}]", "communicationCost", edge.communication_cost)
    volume = 2 * (sums.get("communicationCost", 0.0) + sums.get("syncTimeFw", 0.0) + sums.get("syncTimeBw", 0.0)) \
        + 4 * sums.get("parameterSize", 0.0)
    return sums.get("timePerSample", 0.0), volume


def _match_neighbours(table: Mapping[int, float], neighbours: set[int], where: str, edge: str) -> None:
    """``table`` has a key for each of ``neighbours`` and no other; ``edge`` formats a neighbour as an edge."""
    for other in table:
        if other not in neighbours:
            raise InvalidInstanceError(f"{where}: key \"{other}\" names no edge {edge.format(other)}")
    for other in sorted(neighbours):
        if other not in table:
            raise InvalidInstanceError(f"{where}: no entry for the edge {edge.format(other)}")


__all__ = ["TMPC", "PiperDeviceType", "PiperEdge", "PiperInstance", "PiperNode", "looks_like_piper", "parse_piper",
           "read_piper"]
