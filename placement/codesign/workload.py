"""A model as the co-design sees it: the placement graph plus, per node, the operators it runs.

A model file is an instance of the Tarnawski format (:mod:`placement.io.tarnawski`; the
importers' output) whose nodes also say what they compute, in one of two ways:

* ``"operators"``: a list of operators, each one of
  ``{"kind": "gemm", "m": M, "n": N, "k": K, "batch": B}`` (``B`` independent products of an
  ``M×K`` by a ``K×N`` matrix; ``batch`` defaults to 1; a convolution is given as its implicit
  GEMM: ``M`` = batch × output pixels, ``N`` = output channels, ``K`` = input channels × kernel
  area / groups) or ``{"kind": "vector", "op": NAME, "elements": E}`` (an elementwise or
  reduction operator over ``E`` elements; ``NAME`` one of :data:`placement.codesign.opcost.VECTOR_CYCLES`),
  optionally with ``"bytes"`` (the DRAM bytes it moves, when not the default of its kind), and no other
  field (:data:`OPERATOR_FIELDS`); ``M``, ``N``, ``K``, ``B`` and ``E`` are positive integers up to 2^40 (a
  whole number written as a float, ``64.0``, reads as that integer);
* or, without shapes, ``"flops"`` and ``"bytes"`` (what the importers record): the node is then
  costed as a GEMM at full array utilisation (an optimistic estimate, stated in the result's
  ``shapeless_nodes``).

Transfers between chips: node ``u``'s output of ``b`` bytes costs ``b / LINK_BYTES_PER_S``. The
bytes are the file's transfer cost ``c(u)`` (ms) times ``about.link_bytes_per_s`` (the link the
importer costed it on); a file without that field keeps its transfer times as given. A chip
holds at most :data:`.template.DRAM_BYTES` of node memory (the nodes' ``size``), whatever memory
the file gives its accelerators (``maxSizePerFPGA``, a device type's ``memory``): the chips are
the template's, not the file's devices. Every node runs on
a chip, so a node the file supports on no accelerator (Tarnawski's ``supportedOnFpga`` false; in
the native format, on no type that pays communication) is refused.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

from placement.codesign.template import DRAM_BYTES, LINK_BYTES_PER_S
from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.io.tarnawski import check_device_bounds, parse_instance
from placement.jsonfile import file_stem, json_type_name, json_value_text, load_json
from placement.loading import design_document, other_document
from placement.problem.instance import Instance, format_number
from placement.problem.memory_fit import fits


@dataclass(frozen=True)
class Operator:
    """One operator: ``kind`` ``gemm`` (``batch`` products ``m×k · k×n``), ``vector`` (``op`` over
    ``elements``) or ``flops`` (shapeless: ``flops`` and ``bytes`` only). ``bytes``: DRAM bytes moved,
    ``None`` for the kind's default."""

    kind: str
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    op: str = ""
    elements: int = 0
    flops: float = 0.0
    bytes: float | None = None


@dataclass(frozen=True)
class Workload:
    """A model's placement graph (``instance``: its nodes, edges, memory, colours; its times are not
    used), the operators of every node (by node position), and every node's transfer cost in ms on
    the template's link."""

    instance: Instance
    operators: tuple[tuple[Operator, ...], ...]
    transfer_ms: tuple[float, ...]
    name: str = ""

    def __post_init__(self) -> None:
        # read from a file or made in code, a workload has no node that no chip of any design holds
        for node in self.instance.nodes:
            if node.memory > DRAM_BYTES:
                raise InvalidInstanceError(f"node {node.id} needs {format_number(node.memory)} bytes, more than a "
                                           f"chip's {DRAM_BYTES:,} bytes of DRAM")

    def usable_chips(self, chips: int) -> int:
        """The chips a plan of this model can use: ``chips``, or the colour classes where they are fewer (a
        class sits on one chip, so no plan has more non-empty stages than classes)."""
        return min(chips, len(self.instance.colour_classes()))

    @property
    def has_work(self) -> bool:
        """Whether any operator computes or moves something: without, every design runs the model in no time
        on one chip, where no node's output is transferred, and no design is better than another."""
        return any(
            (op.bytes or 0) > 0 or (op.kind == "gemm" and op.m * op.n * op.k * op.batch > 0)
            or (op.kind == "vector" and op.elements > 0) or (op.kind == "flops" and op.flops > 0)
            for ops in self.operators for op in ops)

    @property
    def shapeless_nodes(self) -> int:
        """Nodes costed from FLOPs and bytes alone (no operator shapes)."""
        return sum(1 for ops in self.operators if any(op.kind == "flops" for op in ops))


#: The fields an operator of each kind may have.
OPERATOR_FIELDS = {"gemm": ("kind", "m", "n", "k", "batch", "bytes"), "vector": ("kind", "op", "elements", "bytes")}


def _positive_int(raw: Mapping, key: str, where: str, default: int | None = None) -> int:
    """Field ``key`` of an operator, a positive integer up to 2^40; a whole number written as a float (``64.0``,
    what a generator dividing sizes writes) reads as that integer, as in grid and instance files."""
    if key not in raw and default is None:
        raise InvalidInstanceError(f"{where}: missing field {key!r}")
    value = raw.get(key, default)
    whole = isinstance(value, numbers.Integral) or (isinstance(value, numbers.Real) and math.isfinite(value)
                                                    and float(value).is_integer())
    if isinstance(value, bool) or not whole or value <= 0 or value > 2**40:
        raise InvalidInstanceError(f"{where}: field {key!r} must be a positive integer up to 2^40, "
                                   f"got {json_value_text(value)}")
    return int(value)


def _amount(raw: Mapping, key: str, where: str, default: float | None = None, positive: bool = False) -> float | None:
    """``raw[key]`` as a float below 1e30, not negative (``positive``: above 0); ``default`` where it is absent,
    ``None`` where that is ``None`` too."""
    value = raw.get(key, default)
    if value is None and default is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1e30
            or positive and value == 0):
        raise InvalidInstanceError(f"{where}: field {key!r} must be a {'positive' if positive else 'non-negative'} "
                                   f"number below 1e30, got {json_value_text(value)}")
    return float(value)


def parse_operator(raw: Any, where: str) -> Operator:
    """One operator of a node's ``operators`` list (module docstring)."""
    from placement.codesign.opcost import VECTOR_CYCLES

    if not isinstance(raw, Mapping):
        raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(raw)}")
    kind = raw.get("kind")
    fields = OPERATOR_FIELDS.get(kind) if isinstance(kind, str) else None
    unknown = sorted(set(raw) - set(fields)) if fields else []
    if unknown:   # a misspelt optional field ("bacth") would silently take its default
        raise InvalidInstanceError(f"{where}: unknown field {unknown[0]!r} (the fields of a {kind} operator are "
                                   f"{', '.join(fields)})")
    nbytes = _amount(raw, "bytes", where)
    if kind == "gemm":
        return Operator("gemm", m=_positive_int(raw, "m", where), n=_positive_int(raw, "n", where),
                        k=_positive_int(raw, "k", where), batch=_positive_int(raw, "batch", where, 1), bytes=nbytes)
    if kind == "vector":
        if "op" not in raw:
            raise InvalidInstanceError(f"{where}: missing field 'op'")
        op = raw["op"]
        if not isinstance(op, str) or op not in VECTOR_CYCLES:
            raise InvalidInstanceError(f"{where}: field 'op' must be one of {', '.join(VECTOR_CYCLES)}, "
                                       f"got {json_value_text(op)}")
        return Operator("vector", op=op, elements=_positive_int(raw, "elements", where), bytes=nbytes)
    raise InvalidInstanceError(f"{where}: field 'kind' must be 'gemm' or 'vector', got {json_value_text(kind)}")


def _node_operators(raw: Mapping, where: str) -> tuple[Operator, ...]:
    if "operators" in raw:
        ops = raw["operators"]
        if not isinstance(ops, list):
            raise InvalidInstanceError(f"{where}: field 'operators' must be an array, got {json_type_name(ops)}")
        return tuple(parse_operator(op, f"{where}: operator #{i}") for i, op in enumerate(ops))
    if "flops" in raw and "bytes" in raw:
        return (Operator("flops", flops=_amount(raw, "flops", where), bytes=_amount(raw, "bytes", where)),)
    for given, missing in (("flops", "bytes"), ("bytes", "flops")):
        if given in raw:
            raise InvalidInstanceError(f"{where}: has {given!r} but no {missing!r}: the co-design cost model needs "
                                       "both (or 'operators')")
    raise InvalidInstanceError(f"{where}: has neither 'operators' nor 'flops' and 'bytes': the co-design "
                               "cost model needs what each node computes")


def parse_workload(data: Any, name: str = "") -> Workload:
    """A :class:`Workload` from a decoded model file (module docstring)."""
    other = (other_document(data) or design_document(data)) if isinstance(data, Mapping) else None
    if other:
        raise InvalidInstanceError(f"the document is {other}, not a model file, which has 'nodes' (each with its "
                                   "operators, or FLOPs and bytes) and 'edges'")
    instance = parse_instance(_on_chips(data), name)
    accelerators = [t for t, dt in enumerate(instance.device_types) if dt.pays_comm]
    for node in instance.nodes:
        if all(node.times[t] is None for t in accelerators):
            raise InvalidInstanceError(f"node {node.id}: not supported on any accelerator, but the co-design "
                                       "places every node on a chip")
    link = None
    about = data.get("about")
    if isinstance(about, Mapping) and about.get("link_bytes_per_s") is not None:
        link = _amount(about, "link_bytes_per_s", "about", positive=True)
    operators = tuple(_node_operators(raw, f"node {node.id}") for raw, node in zip(data["nodes"], instance.nodes))
    scale = 1.0 if link is None else link / LINK_BYTES_PER_S
    transfer = tuple(node.out_cost * scale for node in instance.nodes)
    return Workload(instance, operators, transfer, name)


def _on_chips(data: Any) -> Any:
    """The decoded model file with its accelerators' memory at least the chips'
    (:data:`.template.DRAM_BYTES`) and its largest node: a bound of the file's own devices would
    refuse a node that fits a chip (the chips' bound is checked with the designs, by name). A bound the file
    gives is refused first where the instance would refuse it: one replaced unread let a malformed file through."""
    if not isinstance(data, Mapping):
        return data
    check_device_bounds(dict(data))
    nodes = data.get("nodes") if isinstance(data.get("nodes"), list) else []
    sizes = [n["size"] for n in nodes if isinstance(n, Mapping) and isinstance(n.get("size"), numbers.Real)
             and not isinstance(n["size"], bool) and math.isfinite(n["size"])]
    bound = max([DRAM_BYTES, *sizes])
    if "maxSizePerFPGA" in data:
        return {**data, "maxSizePerFPGA": bound}
    types = data.get("deviceTypes")
    if isinstance(types, list):
        return {**data, "deviceTypes": [{**t, "memory": bound}
                                        if isinstance(t, Mapping) and t.get("paysComm") in (True, 1) else t
                                        for t in types]}
    return data


def load_workload(source: str | Path | Mapping | Workload) -> Workload:
    """The workload held by ``source``: a model file's path, a decoded model (dict), or a :class:`Workload`."""
    if isinstance(source, Workload):
        return _with_work(source)
    if isinstance(source, Mapping):
        return _with_work(parse_workload(dict(source)))
    if not isinstance(source, (str, PathLike)):
        raise InvalidParameterError("model", f"must be a model file path, a dict or a Workload, "
                                             f"not {type(source).__name__}")
    source = os.fspath(source)
    data = load_json(source, InvalidInstanceError)
    from placement.io.piper_shape import looks_like_piper

    if isinstance(data, dict) and looks_like_piper(data):
        raise InvalidInstanceError(f"{source} is a Piper instance (per-stage data- and tensor-parallel "
                                   "configurations): the co-design takes a model file, whose nodes give their "
                                   "operators")
    try:
        return _with_work(parse_workload(data, file_stem(source)))
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{source}: {exc}") from None


def _with_work(workload: Workload) -> Workload:
    """``workload``, unless it has no work (:attr:`Workload.has_work`) and a plan of no load holds it: one chip
    holding every node, or any plan where no transfer costs time. Every design would then run it in no time,
    at an infinite throughput, and no design is better than another. A model of no work that no one chip
    holds, with a transfer that costs time, is placed: the search finds whether its stages must pay a transfer
    (where a plan of no load still exists, its throughput is infinite, as the result reports it)."""
    if workload.has_work:
        return workload
    said = "the model has no work to place: its operators compute nothing and move no bytes"
    if fits([node.memory for node in workload.instance.nodes], DRAM_BYTES):
        raise InvalidInstanceError(f"{said}, so every design runs it in no time on one chip")
    if not any(workload.transfer_ms):
        raise InvalidInstanceError(f"{said}, and no transfer between chips costs time, so every design runs it in "
                                   "no time")
    return workload
