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

Split backward (``docs/backward-split.md``): a backward node may give the weight-gradient part of its
times, ``"fpgaWeightLatency"`` and ``"cpuWeightLatency"`` (both, in the two-type format), or
``"weightTimes": {type name: time or null}`` (with ``deviceTypes``, null exactly where ``times`` is).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from pathlib import Path
from typing import Any

from placement.errors import InvalidInstanceError
from placement.jsonfile import ROUNDED_INTEGER, json_type_name, json_value_text, parse_file
from placement.misspelling import misspelling_message, misspelt_field
from placement.problem.instance import (DeviceType, Edge, Node, Instance, format_number, make_two_type_problem,
                                        plain_numbers)
from placement.wording import written_otherwise

#: what a number or an integer field takes: Python's, checked first (the abstract classes are slower
#: to test, and a large file has millions of fields), and numpy's (numpy registers its scalar types)
_NUMBER = (int, float, numbers.Real)
_INTEGER = (int, numbers.Integral)


def read_field(obj: dict, key: str, where: str, kind: str, *, default: Any = ..., ) -> Any:
    """``obj[key]`` as a ``kind`` (number, int, id, count, bool, str), or ``default`` when it is missing or
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
        if key == "size" and isinstance(value, _INTEGER) and float(value) != value:   # summed as written: say so
            raise InvalidInstanceError(f"{where}: field {key!r} is {value}, which a double cannot hold exactly "
                                       "(above 2^53 = 9007199254740992 not every integer is one); give it in a "
                                       "larger unit")
        return float(value)
    if kind == "int":
        if isinstance(value, float) and not math.isfinite(value):   # as a number's (1e400 is no integer)
            raise InvalidInstanceError(f"{where}: field {key!r} is {'NaN' if math.isnan(value) else 'infinite'}")
        if isinstance(value, bool) or not isinstance(value, _INTEGER):
            if isinstance(value, _NUMBER) and not isinstance(value, bool) and float(value).is_integer():
                return int(value)
            raise InvalidInstanceError(f"{where}: field {key!r} must be an integer, got {json_type_name(value)}")
        return int(value)
    if kind == "id":
        if isinstance(value, float) and math.isfinite(value) and abs(value) >= 2 ** 53:   # may spell another, rounded
            raise InvalidInstanceError(f"{where}: field {key!r} reads {value:.17g}, {ROUNDED_INTEGER}")
        return read_field(obj, key, where, "int")
    if kind == "count":
        value = read_field(obj, key, where, "int")
        if value < 0:
            raise InvalidInstanceError(f"{where}: field {key!r} is negative ({value})")
        return value
    if kind == "bool":
        if getattr(value, "ndim", None) == 0:   # a numpy scalar (np.bool_ is neither a bool nor an integer)
            value = value.tolist()
        # an integer, not any value equal to 0 or 1: a numpy array of one 1 was read as true, of two an error
        if isinstance(value, bool) or isinstance(value, _INTEGER) and value in (0, 1):
            return bool(value)
        raise InvalidInstanceError(f"{where}: field {key!r} must be true/false or 0/1, got {json_value_text(value)}")
    if kind == "str":
        if not isinstance(value, (str, _INTEGER)) or isinstance(value, bool):
            raise InvalidInstanceError(f"{where}: field {key!r} must be a string (an integer is read as its "
                                       f"digits), got {json_value_text(value)}")
        return str(value)
    raise AssertionError(kind)


TWO_TYPE_FIELDS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")
#: a node's fields in the two-type format, which ``times`` and ``weightTimes`` replace with ``deviceTypes``
TWO_TYPE_NODE_FIELDS = ("supportedOnFpga", "fpgaLatency", "cpuLatency", "fpgaWeightLatency", "cpuWeightLatency")
#: ``about``: what the model importers record (model, devices, FLOPs); read by nobody here
TOP_LEVEL_FIELDS = ("nodes", "edges", *TWO_TYPE_FIELDS, "deviceTypes", "about")
#: the fields of an entry of ``deviceTypes``
DEVICE_TYPE_FIELDS = ("name", "count", "memory", "paysComm")
#: a node's fields in either format besides its times; others (the model importers record ``layerId``,
#: ``flops``, ``module`` and more) are ignored, unless :func:`_refuse_misread_fields` refuses them
COMMON_NODE_FIELDS = ("id", "name", "isBackwardNode", "colorClass", "size")
#: a node's times with ``deviceTypes``
CATALOGUE_NODE_FIELDS = ("times", "weightTimes")
#: the fields of an edge
EDGE_FIELDS = ("sourceId", "destId", "cost", "size")


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


def check_device_bounds(data: dict) -> None:
    """Refuse the devices' memory bounds of an instance document (``maxSizePerFPGA``, or every ``deviceTypes``
    entry) as :func:`parse_instance` refuses them, for readers that replace the bounds before parsing."""
    if "deviceTypes" in data:
        _device_types(data["deviceTypes"])
    elif "maxSizePerFPGA" in data:
        read_field(data, "maxSizePerFPGA", "instance", "number")


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
    raw_nodes = data["nodes"]
    if not isinstance(raw_nodes, list):
        raise InvalidInstanceError(f"{top}: field 'nodes' must be an array, got {json_type_name(raw_nodes)}")
    raw_edges = data["edges"]
    if not isinstance(raw_edges, list):
        raise InvalidInstanceError(f"{top}: field 'edges' must be an array, got {json_type_name(raw_edges)}")

    if catalogue is None:
        _refuse_misread_fields(raw_nodes, (*COMMON_NODE_FIELDS, *TWO_TYPE_NODE_FIELDS), _node_place,
                               {"times": "'supportedOnFpga', 'fpgaLatency' and 'cpuLatency'",
                                "weightTimes": "'fpgaWeightLatency' and 'cpuWeightLatency'"})
    else:
        _refuse_misread_fields(raw_nodes, (*COMMON_NODE_FIELDS, *CATALOGUE_NODE_FIELDS), _node_place, {})
    _refuse_misread_fields(raw_edges, EDGE_FIELDS, _edge_place, {})
    plain = _plain_edges(raw_edges)
    costs, edges = plain if plain is not None else _read_edges(raw_edges)
    nodes = _plain_nodes(raw_nodes, costs) if catalogue is None else None
    if nodes is None:
        nodes = _read_nodes(raw_nodes, costs, catalogue)
    quantum = _time_quantum(data.get("about"), top)
    if catalogue is None:
        return make_two_type_problem(nodes, edges, accelerators, cpus, memory, name, quantum)
    return Instance(tuple(nodes), tuple(edges), catalogue, name, quantum)


def _node_place(k: int, node: dict) -> str:
    """How errors name the ``k``-th node: by its id where that is an integer."""
    return f"node {node['id']}" if type(node.get("id")) is int else f"node #{k}"


def _edge_place(k: int, edge: dict) -> str:
    """How errors name the ``k``-th edge: by its ends where they are integers."""
    ends = edge.get("sourceId"), edge.get("destId")
    return f"edge {ends[0]} -> {ends[1]}" if all(type(end) is int for end in ends) else f"edge #{k}"


def _refuse_misread_fields(objects: list, known: tuple[str, ...], place: Callable[[int, dict], str],
                           other_format: dict[str, str]) -> None:
    """Refuse the fields of ``objects`` (nodes or edges) that ignoring would turn into another plan without a
    word: one of ``other_format`` (read with ``deviceTypes`` only; its value names this format's fields), and
    a misspelling of a ``known`` one (:mod:`placement.misspelling`). Any other unknown field is ignored, as
    the model importers' records are."""
    for field, fields in other_format.items():
        k, obj = next(((k, obj) for k, obj in enumerate(objects) if isinstance(obj, dict) and field in obj),
                      (None, None))
        if obj is not None:
            raise InvalidInstanceError(f"{place(k, obj)}: field {field!r} goes with 'deviceTypes'; in the two-type "
                                       f"format a node gives {fields}")
    misspelt = misspelt_field(objects, known)
    if misspelt is not None:
        k, field, meant = misspelt
        raise InvalidInstanceError(f"{place(k, objects[k])}: {misspelling_message(field, meant)}")


def _time_quantum(about: Any, top: str) -> float:
    """The quantum the model importers record (``about.time_quantum_ms``, a finite number ≥ 0), 0 where none is
    recorded (``about`` is otherwise read by nobody here). An ``about`` that is no object, or a quantum that is
    no such number, is refused: read as no record, it would drop what the file says without a word."""
    if about is None:
        return 0.0
    if not isinstance(about, dict):
        raise InvalidInstanceError(f"{top}: field 'about' must be an object, got {json_type_name(about)}")
    found = about.get("time_quantum_ms")
    if found is None:
        return 0.0
    if not (isinstance(found, _NUMBER) and not isinstance(found, bool) and 0 <= found < math.inf):
        raise InvalidInstanceError(f"{top}: field 'about.time_quantum_ms' must be a finite number ≥ 0 (0: none "
                                   f"recorded), got {json_value_text(found)}")
    return float(found)


def _read_edges(raw_edges: list) -> tuple[dict[int, float], list[Edge]]:
    """The edges and the transfer cost of every source, read one field at a time; raises on the first
    malformed field, or on a node whose out-edges disagree on the cost."""
    costs: dict[int, float] = {}
    edges: list[Edge] = []
    for k, e in enumerate(raw_edges):
        where = f"edge #{k}"
        if not isinstance(e, dict):
            raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(e)}")
        src = read_field(e, "sourceId", where, "id")
        dst = read_field(e, "destId", where, "id")
        where = f"edge {src} -> {dst}"
        cost = read_field(e, "cost", where, "number")
        size = read_field(e, "size", where, "number", default=None)
        if src == dst:   # named as such, before its cost is compared with the node's other out-edges
            raise InvalidInstanceError(f"{where} is a self-loop")
        if src in costs and costs[src] != cost:
            raise InvalidInstanceError(
                f"node {src}: out-edges have different costs ({format_number(costs[src])} and {format_number(cost)}); "
                "the transfer cost is a property of the source node")
        costs[src] = cost
        edges.append(Edge(src, dst, size))
    return costs, edges


def _read_nodes(raw_nodes: list, costs: dict[int, float], catalogue: tuple[DeviceType, ...] | None) -> list[Node]:
    """The nodes, read one field at a time; raises on the first malformed field."""
    nodes: list[Node] = []
    for k, n in enumerate(raw_nodes):
        if not isinstance(n, dict):
            raise InvalidInstanceError(f"node #{k}: must be an object, got {json_type_name(n)}")
        node_id = read_field(n, "id", f"node #{k}", "id")
        where = f"node {node_id}"
        if catalogue is None:
            supported = read_field(n, "supportedOnFpga", where, "bool")
            cpu = read_field(n, "cpuLatency", where, "number")
            acc = read_field(n, "fpgaLatency", where, "number")
            times: tuple[float | None, ...] = (acc if supported else None, cpu)
            weights = None
            if n.get("fpgaWeightLatency") is not None or n.get("cpuWeightLatency") is not None:  # null: missing
                w_acc = read_field(n, "fpgaWeightLatency", where, "number")
                weights = (w_acc if supported else None, read_field(n, "cpuWeightLatency", where, "number"))
        else:
            mixed = next((key for key in TWO_TYPE_NODE_FIELDS if key in n), None)
            if mixed is not None:   # ignored, it would have changed the plan without a word
                raise InvalidInstanceError(f"{where}: field {mixed!r} goes with the two-type format; with "
                                           "'deviceTypes' a node's 'times' give its time on each type (null: "
                                           "unsupported there)")
            times = _node_times(n, where, catalogue)
            weights = _node_times(n, where, catalogue, "weightTimes") if n.get("weightTimes") is not None else None
        size = read_field(n, "size", where, "number", default=0.0)
        backward = read_field(n, "isBackwardNode", where, "bool", default=False)
        colour = read_field(n, "colorClass", where, "int", default=None)
        label = read_field(n, "name", where, "str", default=str(node_id))
        nodes.append(Node(node_id, label, times, size, backward, colour, costs.get(node_id, 0.0), weights))
    return nodes


def _column(objects: list[dict], key: str, required: bool = True) -> list | None:
    """``obj[key]`` of every object (``None`` where it is missing and not ``required``), or ``None`` when a
    required one is missing."""
    if not required:
        return [obj.get(key) for obj in objects]
    try:
        return [obj[key] for obj in objects]
    except KeyError:
        return None


def _plain_ints(values: list | None, optional: bool = False) -> bool:
    """Whether every value is a plain int (or ``None``, where ``optional``)."""
    return values is not None and set(map(type, values)) <= ({int, type(None)} if optional else {int})


def _plain_bools(values: list | None, optional: bool = False) -> list[bool] | None:
    """The values as booleans when each is true/false or the integer 0/1 (or ``None``, read as false, where
    ``optional``), else ``None``."""
    none = {None} if optional else set()
    if values is None or not set(map(type, values)) <= {bool, int, *map(type, none)} or not set(values) <= {0, 1, *none}:
        return None
    return [bool(v) for v in values]


def _plain_edges(raw_edges: list) -> tuple[dict[int, float], list[Edge]] | None:
    """What :func:`_read_edges` returns, checked in bulk; ``None`` when any field is not plainly valid
    (then :func:`_read_edges` names the first problem)."""
    if not all(type(e) is dict for e in raw_edges):
        return None
    src, dst, cost = (_column(raw_edges, key) for key in ("sourceId", "destId", "cost"))
    if not (_plain_ints(src) and _plain_ints(dst)) or cost is None:
        return None
    costs_array = plain_numbers(cost)  # type: ignore[arg-type]
    sizes_array = plain_numbers(_column(raw_edges, "size", required=False), optional=True)
    if costs_array is None or sizes_array is None:
        return None
    cost = costs_array.tolist()
    costs = dict(zip(src, cost))  # type: ignore[arg-type]
    if any(costs[s] != c for s, c in zip(src, cost)):  # type: ignore[arg-type]
        return None
    sizes = [None if math.isnan(x) else x for x in sizes_array.tolist()]
    return costs, list(map(Edge, src, dst, sizes))  # type: ignore[arg-type]


def _plain_nodes(raw_nodes: list, costs: dict[int, float]) -> list[Node] | None:
    """What :func:`_read_nodes` returns for the two-type format, checked in bulk; ``None`` when any field
    is not plainly valid (then :func:`_read_nodes` names the first problem)."""
    if not all(type(n) is dict for n in raw_nodes) or any("fpgaWeightLatency" in n or "cpuWeightLatency" in n
                                                          for n in raw_nodes):
        return None
    ids = _column(raw_nodes, "id")
    supported = _plain_bools(_column(raw_nodes, "supportedOnFpga"))
    backward = _plain_bools(_column(raw_nodes, "isBackwardNode", required=False), optional=True)
    colours = _column(raw_nodes, "colorClass", required=False)
    labels = _column(raw_nodes, "name", required=False)
    if not (_plain_ints(ids) and _plain_ints(colours, optional=True)) or supported is None or backward is None:
        return None
    if not set(map(type, labels)) <= {str, int, type(None)}:  # type: ignore[arg-type]
        return None
    columns = [_column(raw_nodes, key) for key in ("cpuLatency", "fpgaLatency")]
    if columns[0] is None or columns[1] is None:
        return None
    numbers = [plain_numbers(column) for column in columns]
    sizes = plain_numbers(_column(raw_nodes, "size", required=False), optional=True)
    if numbers[0] is None or numbers[1] is None or sizes is None:
        return None
    cpu, acc = numbers[0].tolist(), numbers[1].tolist()
    memory = [0.0 if math.isnan(x) else x for x in sizes.tolist()]
    return [Node(i, str(i) if label is None else str(label), (a if s else None, c), m, b, colour, costs.get(i, 0.0))
            for i, label, s, c, a, m, b, colour
            in zip(ids, labels, supported, cpu, acc, memory, backward, colours)]  # type: ignore[arg-type]


def _device_types(raw: Any) -> tuple[DeviceType, ...]:
    """The ``deviceTypes`` extension: a non-empty array of distinct, well-formed types."""
    if not isinstance(raw, list) or not raw:
        got = "an empty array" if isinstance(raw, list) else json_type_name(raw)
        raise InvalidInstanceError(f"instance: field 'deviceTypes' must be a non-empty array, got {got}")
    types: list[DeviceType] = []
    for k, t in enumerate(raw):
        where = f"device type #{k}"
        if not isinstance(t, dict):
            raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(t)}")
        name = t.get("name")
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            got = repr(name) if isinstance(name, str) else json_type_name(name) if "name" in t else "nothing"
            raise InvalidInstanceError(f"{where}: field 'name' must be a non-empty string without surrounding "
                                       f"spaces (plans name the type by it), got {got}")
        where = f"device type {name!r}"
        if any(d.name == name for d in types):
            raise InvalidInstanceError(f"{where}: listed twice")
        unknown = sorted(key for key in t if key not in DEVICE_TYPE_FIELDS)
        if unknown:   # a misspelt 'memory' would be no bound at all
            raise InvalidInstanceError(f"{where}: unknown field {unknown[0]!r} (the fields are "
                                       f"{', '.join(DEVICE_TYPE_FIELDS)})")
        types.append(DeviceType(name, read_field(t, "count", where, "count"),
                                read_field(t, "memory", where, "number", default=math.inf),
                                read_field(t, "paysComm", where, "bool")))
    if all(t.count == 0 for t in types):
        raise InvalidInstanceError("instance: no devices (every device type has count 0)")
    return tuple(types)


def _node_times(n: dict, where: str, catalogue: tuple[DeviceType, ...], key: str = "times") -> tuple[float | None, ...]:
    """A node's ``times`` (or ``key``) object: one number or null per device type, nothing else."""
    raw = n.get(key)
    if not isinstance(raw, dict):
        raise InvalidInstanceError(f"{where}: field {key!r} must be an object (one time per device type), "
                            f"got {json_type_name(raw) if key in n else 'nothing'}")
    names = [t.name for t in catalogue]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise InvalidInstanceError(f"{where}: {key!r} names unknown device type {unknown[0]!r} (the device types "
                                   f"are {', '.join(map(repr, names))})"
                                   + written_otherwise(unknown[0], names, "device type"))
    missing = [name for name in names if name not in raw]
    if missing:
        raise InvalidInstanceError(f"{where}: {key!r} gives no time for device type {missing[0]!r} (null if unsupported)")
    return tuple(None if raw[name] is None else read_field(raw, name, where, "number") for name in names)


def read_instance(path: str | Path) -> Instance:
    """Read and validate a Tarnawski instance file; errors name the file."""
    return parse_file(path, parse_instance)
