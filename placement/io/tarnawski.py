"""The instance format of Tarnawski et al. (NeurIPS 2020).

``{"maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes": [{id, name?, supportedOnFpga,
cpuLatency, fpgaLatency, isBackwardNode, colorClass?, size?}], "edges": [{sourceId,
destId, cost, size?}]}``. Booleans may be 0/1 or true/false; ``colorClass`` may be
missing or null (the node is then a class of its own). The transfer cost is a
property of the source node: all out-edges of a node must carry the same ``cost``.
Times are in milliseconds and sizes in bytes in the published files; the package
does not depend on the unit.

Extension for device catalogues with any number of types: a top-level
``"deviceTypes": [{"name", "count", "memory"?, "paysComm"}]`` (``memory`` missing or
null: unbounded) replaces ``maxSizePerFPGA``, ``maxFPGAs`` and ``maxCPUs``, and every
node then gives ``"times": {type name: time or null}`` (null: unsupported on that type)
instead of ``supportedOnFpga``, ``cpuLatency`` and ``fpgaLatency``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from placement.errors import InvalidInstanceError
from placement.jsonfile import json_type_name, parse_file
from placement.problem.instance import DeviceType, Edge, Node, Instance, format_number, make_two_type_problem

_NUMBER = (int, float)


def read_field(obj: dict, key: str, where: str, kind: str, *, default: Any = ..., ) -> Any:
    """``obj[key]`` as a ``kind`` (number, int, count, bool, str), or ``default`` when it is missing or
    null; an :class:`InvalidInstanceError` naming ``where`` and ``key`` otherwise (readers of other
    formats share it)."""
    if key not in obj or (obj[key] is None and default is not ...):
        if default is ...:
            raise InvalidInstanceError(f"{where}: missing field {key!r}")
        return default
    value = obj[key]
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, _NUMBER):
            raise InvalidInstanceError(f"{where}: field {key!r} must be a number, got {json_type_name(value)}")
        try:
            float(value)
        except OverflowError:  # an integer too large for a float
            raise InvalidInstanceError(f"{where}: field {key!r} is not a finite number (an integer of "
                                       f"{len(str(abs(value)))} digits)") from None
        if math.isnan(value):
            raise InvalidInstanceError(f"{where}: field {key!r} is NaN")
        if math.isinf(value):
            raise InvalidInstanceError(f"{where}: field {key!r} is infinite")
        if value < 0:
            raise InvalidInstanceError(f"{where}: field {key!r} is negative ({format_number(value)})")
        return float(value)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise InvalidInstanceError(f"{where}: field {key!r} must be an integer, got {json_type_name(value)}")
        return value
    if kind == "count":
        value = read_field(obj, key, where, "int")
        if value < 0:
            raise InvalidInstanceError(f"{where}: field {key!r} is negative ({value})")
        return value
    if kind == "bool":
        if value in (0, 1) and not isinstance(value, float) or isinstance(value, bool):
            return bool(value)
        raise InvalidInstanceError(f"{where}: field {key!r} must be true/false or 0/1, got {value!r}")
    if kind == "str":
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise InvalidInstanceError(f"{where}: field {key!r} must be a string, got {json_type_name(value)}")
        return str(value)
    raise AssertionError(kind)


TWO_TYPE_FIELDS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")
#: ``about``: what the model importers record (model, devices, FLOPs); read by nobody here
TOP_LEVEL_FIELDS = ("nodes", "edges", *TWO_TYPE_FIELDS, "deviceTypes", "about")


def _check_top_level(data: dict, top: str) -> None:
    """Every top-level field known, and ``nodes`` and ``edges`` present: a misspelt or missing
    ``edges`` must not turn into a graph without edges (a graph without edges says ``"edges": []``)."""
    unknown = sorted(k for k in data if k not in TOP_LEVEL_FIELDS)
    if unknown:
        raise InvalidInstanceError(f"{top}: unknown field {unknown[0]!r} (the fields are "
                                   f"{', '.join(TOP_LEVEL_FIELDS)})")
    for key in ("nodes", "edges"):
        if key not in data:
            raise InvalidInstanceError(f"{top}: missing field {key!r}")
    if "deviceTypes" in data:
        mixed = [k for k in TWO_TYPE_FIELDS if k in data]
        if mixed:
            raise InvalidInstanceError(f"{top}: field {mixed[0]!r} goes with the two-type format; with "
                                       "'deviceTypes' the catalogue gives every count and memory")


def parse_instance(data: Any, name: str = "") -> Instance:
    """Build a validated :class:`Instance` from the decoded JSON of a Tarnawski instance."""
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"the instance must be a JSON object, got {json_type_name(data)}")
    top = "instance"
    _check_top_level(data, top)
    catalogue = _device_types(data["deviceTypes"]) if "deviceTypes" in data else None
    if catalogue is None:
        memory = read_field(data, "maxSizePerFPGA", top, "number")
        accelerators = read_field(data, "maxFPGAs", top, "count")
        cpus = read_field(data, "maxCPUs", top, "count")
        if accelerators == 0 and cpus == 0:
            raise InvalidInstanceError(f"{top}: no devices (maxFPGAs and maxCPUs are both 0)")
    raw_nodes = data.get("nodes")
    if raw_nodes is None:
        raise InvalidInstanceError(f"{top}: missing field 'nodes'")
    if not isinstance(raw_nodes, list):
        raise InvalidInstanceError(f"{top}: field 'nodes' must be an array, got {json_type_name(raw_nodes)}")
    raw_edges = data["edges"]
    if not isinstance(raw_edges, list):
        raise InvalidInstanceError(f"{top}: field 'edges' must be an array, got {json_type_name(raw_edges)}")

    costs: dict[int, float] = {}
    edges: list[Edge] = []
    for k, e in enumerate(raw_edges):
        where = f"edge #{k}"
        if not isinstance(e, dict):
            raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(e)}")
        src = read_field(e, "sourceId", where, "int")
        dst = read_field(e, "destId", where, "int")
        where = f"edge {src} -> {dst}"
        cost = read_field(e, "cost", where, "number")
        size = read_field(e, "size", where, "number", default=None)
        if src in costs and costs[src] != cost:
            raise InvalidInstanceError(
                f"node {src}: out-edges have different costs ({format_number(costs[src])} and {format_number(cost)}); "
                "the transfer cost is a property of the source node")
        costs[src] = cost
        edges.append(Edge(src, dst, size))

    nodes: list[Node] = []
    for k, n in enumerate(raw_nodes):
        if not isinstance(n, dict):
            raise InvalidInstanceError(f"node #{k}: must be an object, got {json_type_name(n)}")
        node_id = read_field(n, "id", f"node #{k}", "int")
        where = f"node {node_id}"
        if catalogue is None:
            supported = read_field(n, "supportedOnFpga", where, "bool")
            cpu = read_field(n, "cpuLatency", where, "number")
            acc = read_field(n, "fpgaLatency", where, "number")
            times: tuple[float | None, ...] = (acc if supported else None, cpu)
        else:
            times = _node_times(n, where, catalogue)
        size = read_field(n, "size", where, "number", default=0.0)
        backward = read_field(n, "isBackwardNode", where, "bool", default=False)
        colour = read_field(n, "colorClass", where, "int", default=None)
        label = read_field(n, "name", where, "str", default=str(node_id))
        nodes.append(Node(node_id, label, times, size, backward, colour, costs.get(node_id, 0.0)))
    if catalogue is None:
        return make_two_type_problem(nodes, edges, accelerators, cpus, memory, name)
    return Instance(tuple(nodes), tuple(edges), catalogue, name)


def _device_types(raw: Any) -> tuple[DeviceType, ...]:
    """The ``deviceTypes`` extension: a non-empty array of distinct, well-formed types."""
    if not isinstance(raw, list) or not raw:
        raise InvalidInstanceError(f"instance: field 'deviceTypes' must be a non-empty array, got {json_type_name(raw)}")
    types: list[DeviceType] = []
    for k, t in enumerate(raw):
        where = f"device type #{k}"
        if not isinstance(t, dict):
            raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(t)}")
        name = read_field(t, "name", where, "str")
        where = f"device type {name!r}"
        if any(d.name == name for d in types):
            raise InvalidInstanceError(f"{where}: listed twice")
        types.append(DeviceType(name, read_field(t, "count", where, "count"),
                                read_field(t, "memory", where, "number", default=math.inf),
                                read_field(t, "paysComm", where, "bool")))
    if all(t.count == 0 for t in types):
        raise InvalidInstanceError("instance: no devices (every device type has count 0)")
    return tuple(types)


def _node_times(n: dict, where: str, catalogue: tuple[DeviceType, ...]) -> tuple[float | None, ...]:
    """A node's ``times`` object: one number or null per device type, nothing else."""
    raw = n.get("times")
    if not isinstance(raw, dict):
        raise InvalidInstanceError(f"{where}: field 'times' must be an object (one time per device type), "
                            f"got {json_type_name(raw) if 'times' in n else 'nothing'}")
    names = [t.name for t in catalogue]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise InvalidInstanceError(f"{where}: 'times' names unknown device type {unknown[0]!r}")
    missing = [name for name in names if name not in raw]
    if missing:
        raise InvalidInstanceError(f"{where}: 'times' gives no time for device type {missing[0]!r} (null if unsupported)")
    return tuple(None if raw[name] is None else read_field(raw, name, where, "number") for name in names)


def read_instance(path: str | Path) -> Instance:
    """Read and validate a Tarnawski instance file; errors name the file."""
    return parse_file(path, parse_instance)
