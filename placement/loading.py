"""``placement.load``: an instance from a file or a decoded JSON document, in any format read here.

Formats (``format=``; by default told from the content):

* ``tarnawski`` — the instance format of Tarnawski et al. (NeurIPS 2020): ``maxFPGAs``,
  ``maxCPUs``, ``maxSizePerFPGA``, nodes with ``fpgaLatency``/``cpuLatency``
  (:mod:`placement.io.tarnawski`);
* ``native`` — this package's extension of it to any device catalogue: a top-level
  ``deviceTypes`` list and per-node ``times`` by type name (same module);
* ``piper`` — the instances of Piper (NeurIPS 2021): per node and tensor-parallel degree, the
  configurations ("TMPCs"); top-level ``maxDevices``, ``maxMemoryPerDevice``, ``bandwidth``,
  ``mbsInBatch`` (:mod:`placement.io.piper`). It loads as a :class:`PiperInstance`.
"""

from __future__ import annotations

import os
from os import PathLike
from typing import Any, Callable, Mapping

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.jsonfile import (MAX_INPUT_BYTES, json_type_name, parse_file, refuse_non_finite_document,
                                refuse_non_string_keys)
from placement.parameters import keywords_checked
from placement.problem.instance import ACCELERATOR, CPU, Instance

FORMATS = ("tarnawski", "native", "piper")


def other_document(data: Mapping[str, Any]) -> str | None:
    """What a document without ``nodes`` is instead of an instance, where its fields say: a plan, a document
    :func:`named_document` names, another document of this package (named by its ``format``: a simulation's
    has ``stages`` too, yet is no plan), or a description of an instance (its ``nodes`` a count); ``None``
    otherwise."""
    nodes = data.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and "device_types" in data:
        return "a description of an instance"
    if "nodes" in data:
        return None
    kind = data.get("format")
    if kind in ("placement-plan/1", "placement-parallel-plan/1"):
        return "a plan"
    named = named_document(data)
    if named:
        return named
    if isinstance(kind, str) and kind.startswith("placement-"):
        return f"a {kind} document"
    if "fpgas" in data or "cpus" in data or "stages" in data:
        return "a plan"
    return None


def named_document(data: Mapping[str, Any]) -> str | None:
    """What a document without ``nodes`` is where its fields say so beyond a ``format`` of this package's
    plans: a verification verdict (``verify --json``: ``valid`` and ``violations``), a split of a plan
    (``split``'s form and ``split``) or the file of one form (:func:`hand_off_file`), a simulation's trace
    (``traceEvents``) or a device catalogue (its ``format``, or its ``devices`` by id); ``None`` otherwise."""
    from placement.costmodel.roofline import CATALOGUE_FORMAT
    from placement.handoff import SPLIT_FORMATS

    if "nodes" in data:
        return None
    kind = data.get("format")
    if "valid" in data and "violations" in data:
        return "a verification verdict"
    if "split" in data and isinstance(kind, str) and kind in SPLIT_FORMATS:
        return "a split (the hand-off form of a plan)"
    form = hand_off_file(data)
    if form:
        return f"{form} (a split's hand-off file)"
    if "traceEvents" in data:
        return "a trace of a simulation"
    devices = data.get("devices")
    if kind == CATALOGUE_FORMAT or (isinstance(devices, Mapping) and devices
                                    and all(isinstance(entry, Mapping) for entry in devices.values())):
        return "a device catalogue"
    return None


def hand_off_file(data: Mapping[str, Any]) -> str | None:
    """The hand-off form a document is the file of, as ``split --out`` writes them (:mod:`placement.io.exporters`):
    a split_spec (module names, each ``"BEGINNING"``), DeepSpeed parts (``layers``, module names, and ``parts``)
    or a pipe_split program (``ops``); ``None`` for none."""
    if set(data) == {"layers", "parts"} and isinstance(data["layers"], list) \
            and all(isinstance(name, str) for name in data["layers"]):
        return "DeepSpeed parts"
    if set(data) == {"ops"} and isinstance(data["ops"], list):
        return "a pipe_split program"
    if data and all(isinstance(value, str) and value == "BEGINNING" for value in data.values()):
        return "a split_spec"
    return None


def document_kind(data: Mapping[str, Any]) -> str | None:
    """What a document of this package is, where its fields say: :func:`other_document`, an instance or a model
    file (its ``nodes``), or :func:`design_document`; ``None`` otherwise (the readers of other documents name
    what they were given with it)."""
    return (other_document(data) or ("an instance or a model file" if "nodes" in data else None)
            or design_document(data))


def design_document(data: Mapping[str, Any]) -> str | None:
    """What a document without ``nodes`` is where the co-design reads or wrote it: a design grid (values of the
    accelerator template's parameters), a sweep specification (its lists of models and budgets) or a co-design
    result (its chips' designs); ``None`` otherwise."""
    from placement.codesign.template import PARAMETERS

    if "nodes" in data:
        return None
    if set(PARAMETERS) & set(data):
        return "a design grid"
    if {"models", "budgets"} <= set(data):
        return "a sweep specification"
    if {"designs", "chips"} <= set(data):
        return "a co-design result"
    return None


def detect_format(data: Any) -> str:
    """The format of a decoded instance document (see the module docstring)."""
    from placement.io.piper_shape import looks_like_piper

    if not isinstance(data, Mapping):
        raise InvalidInstanceError(f"the instance must be a JSON object, got {json_type_name(data)}")
    other = other_document(data) or design_document(data)
    if other:
        raise InvalidInstanceError(f"the document is {other}, not an instance, which has 'nodes' and 'edges'"
                                   + ("; a plan goes after its instance (the instance first, then the plan)"
                                      if other == "a plan" else ""))
    if looks_like_piper(data):
        return "piper"
    return "native" if "deviceTypes" in data else "tarnawski"


@keywords_checked
def load(source: str | PathLike[str] | Mapping[str, Any], *, format: str | None = None,
         max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """The validated instance held by ``source``: a file path, or a decoded JSON document (dict).

    Returns a :class:`placement.Instance` (formats ``tarnawski`` and ``native``) or a
    :class:`placement.io.piper.PiperInstance` (format ``piper``). Raises
    :class:`InvalidInstanceError` naming the file and the first problem,
    :class:`LimitExceededError` for a file longer than ``max_bytes`` (default 256 MiB), or
    :class:`InvalidParameterError` for an unknown ``format`` or a ``source`` of another type.
    """
    return _load(source, format, max_bytes)[0]


def _load(source: Any, format: str | None, max_bytes: int) -> tuple[Any, Any]:
    """:func:`load`'s instance, and the decoded document it was parsed from (a file read once)."""
    from placement.parameters import integer

    if format is not None and format not in FORMATS:
        raise InvalidParameterError("format", f"must be one of {', '.join(map(repr, FORMATS))} or None, "
                                              f"not {format!r}")
    max_bytes = integer("max_bytes", max_bytes, smallest=1)
    if isinstance(source, Mapping):
        data = dict(source)
        refuse_non_string_keys(data, InvalidInstanceError)   # before the parser, which matches keys as text
        parsed = _parse(data, format, name="")
        refuse_non_finite_document(data, InvalidInstanceError)   # after the parser, as a file's (parse_file)
        return parsed, data
    if not isinstance(source, (str, PathLike)):
        raise InvalidParameterError("source", f"must be a file path or a decoded JSON document (dict), "
                                              f"not {type(source).__name__}")
    if isinstance(source, str) and source.lstrip()[:1] in ("{", "[") and not os.path.exists(source):
        raise InvalidParameterError("source", "is JSON text, not a file name; pass the decoded document "
                                              "(json.loads of the text) or the path of a file holding it")
    return parse_file(source, lambda data, name: (_parse(data, format, name), data), max_bytes)


def _parse(data: Any, format: str | None, name: str) -> Any:
    detected = detect_format(data)
    chosen = format or detected
    if format is not None and detected != format:
        raise InvalidInstanceError(f"the document is not in the {format} format (its fields are those of "
                                   f"the {detected} format)")
    if chosen == "piper":
        from placement.io.piper import parse_piper

        return parse_piper(data, name)
    from placement.io.tarnawski import parse_instance

    return parse_instance(data, name)


def _to_blame(problem: Instance, counts: dict[str, int], sizes: dict[str, float]) -> str:
    """The override (``memory``, ``cpus`` or ``accelerators``) without which the devices would hold every node,
    or, where no one alone is, the first of them given."""
    given = [("memory", ACCELERATOR, sizes), ("cpus", CPU, counts), ("accelerators", ACCELERATOR, counts)]
    given = [(name, kind, where) for name, kind, where in given if kind in where]
    for name, kind, where in given:
        rest_counts = {k: v for k, v in counts.items() if where is not counts or k != kind}
        rest_sizes = {k: v for k, v in sizes.items() if where is not sizes or k != kind}
        try:
            problem.with_devices(rest_counts, rest_sizes)
        except InvalidInstanceError:
            continue
        return name
    return given[0][0]


def _read_with_devices(source: str | PathLike[str] | Mapping[str, Any], counts: dict[str, int],
                       sizes: dict[str, float]) -> Instance:
    """The instance of ``source`` (refused as written) read with the device counts ``counts`` and the memory
    bounds ``sizes`` in place of its own (``maxFPGAs``, ``maxCPUs``, ``maxSizePerFPGA``, or the ``count`` and
    ``memory`` of its device types of those names): a node too large for the file's accelerators, or a file
    with no device, is an instance once the overrides hold it. Where they do not, the refusal speaks of the
    devices overridden."""

    def overridden(data: Any) -> Any:
        from placement.io.piper_shape import looks_like_piper

        if not isinstance(data, dict) or looks_like_piper(data):   # a Piper instance's own refusal stands
            return data
        data = dict(data)
        if "deviceTypes" not in data:
            fields = {"maxFPGAs": counts.get(ACCELERATOR), "maxCPUs": counts.get(CPU),
                      "maxSizePerFPGA": sizes.get(ACCELERATOR)}
            data.update({field: value for field, value in fields.items() if value is not None})
            left = [data.get("maxFPGAs"), data.get("maxCPUs")]
        elif isinstance(data["deviceTypes"], list):
            data["deviceTypes"] = [
                {**entry, **({"count": counts[entry["name"]]} if entry["name"] in counts else {}),
                 **({"memory": sizes[entry["name"]]} if entry["name"] in sizes else {})}
                if isinstance(entry, dict) and entry.get("name") in (ACCELERATOR, CPU) else entry
                for entry in data["deviceTypes"]]
            left = [entry.get("count") if isinstance(entry, dict) else None for entry in data["deviceTypes"]]
        else:
            return data
        # the overrides that zero every count are to blame, not the file, whose own counts are not all 0
        zeroed = [name for name, kind in (("accelerators", ACCELERATOR), ("cpus", CPU)) if counts.get(kind) == 0]
        if zeroed and left and all(type(count) is int and count == 0 for count in left):
            raise InvalidParameterError(zeroed[0], f"leaves no device ({' and '.join(f'{n}=0' for n in zeroed)}: "
                                                   f"every device count is 0)")
        return data

    if isinstance(source, Mapping):
        return as_instance(overridden(dict(source)))
    return as_instance(parse_file(source, lambda data, name: _parse(overridden(data), None, name), MAX_INPUT_BYTES))


def loaded_as_overridden(instance: Any, overrides: Callable[[], Mapping[str, Any]]) -> Any:
    """:func:`as_loaded`'s instance; one refused as written (a node too large for the file's accelerators,
    no device) is read with the device overrides ``overrides()`` gives (``accelerators``, ``cpus``,
    ``memory``; ``None``: not given) in place of its own, and refused only where they do not hold it either."""
    try:
        return as_loaded(instance)
    except InvalidInstanceError:
        given = {name: value for name, value in overrides().items() if value is not None}
        if not given:
            raise
    # refused as written: read once more, with the devices overridden
    return override_devices(_read_with_devices(instance, *_checked_overrides(**given)[1:]), **given)


def as_loaded(instance: Any) -> Any:
    """``instance`` itself, or the instance (an :class:`Instance` or a Piper instance) a path or document holds;
    a refusal of what it is names the caller's parameter, ``instance``."""
    if not isinstance(instance, (str, PathLike, Mapping)):
        return instance
    return loaded_with_document(instance)[0]


def loaded_with_document(instance: str | PathLike[str] | Mapping[str, Any]) -> tuple[Any, Any]:
    """The instance a path or document holds, read as :func:`as_loaded` reads it, and the decoded document
    (for a caller that needs more of the file than the instance: a file is read once)."""
    try:
        return _load(instance, None, MAX_INPUT_BYTES)
    except InvalidParameterError as exc:
        if exc.parameter != "source":
            raise
        raise InvalidParameterError("instance", exc.detail) from None


def is_piper(instance: Any) -> bool:
    """Whether ``instance`` is a Piper instance (per-stage data- and tensor-parallel configurations): never
    where the Piper reader has not been loaded (none was read), which is then not loaded for the test."""
    import sys

    reader = sys.modules.get("placement.io.piper")
    return reader is not None and isinstance(instance, reader.PiperInstance)


def as_instance(instance: Any) -> Instance:
    """``instance`` itself, or the instance a path or document holds; a Piper instance is refused
    (its stages carry data- and tensor-parallel degrees, which the one-device-per-stage methods do not model)."""
    instance = as_loaded(instance)
    if isinstance(instance, Instance):
        return instance
    if is_piper(instance):
        named = f"{instance.name}: " if instance.name else ""
        raise InvalidParameterError("instance", f"is a Piper instance ({named}per-stage data- and "
                                                "tensor-parallel configurations): only solve, simulate and verify "
                                                "take it")
    raise InvalidParameterError("instance", f"must be an Instance, a file path or a decoded JSON document, "
                                            f"not {type(instance).__name__}")


def _checked_overrides(accelerators: Any = None, cpus: Any = None,
                       memory: Any = None) -> tuple[tuple[Any, Any, Any], dict[str, int], dict[str, float]]:
    """The device overrides checked (counts non-negative integers, memory a non-negative number of bytes;
    ``None``: not given), and as the counts and memory bounds they set per device type."""
    from placement.parameters import integer, number

    accelerators = integer("accelerators", accelerators, optional=True)
    cpus = integer("cpus", cpus, optional=True)
    memory = number("memory", memory, optional=True)
    counts = {name: value for name, value in ((ACCELERATOR, accelerators), (CPU, cpus)) if value is not None}
    sizes = {ACCELERATOR: memory} if memory is not None else {}
    return (accelerators, cpus, memory), counts, sizes


def override_devices(problem: Any, accelerators: Any = None, cpus: Any = None, memory: Any = None) -> Instance:
    """The instance ``problem`` holds (see :func:`as_instance`) with the accelerator count, CPU count and
    accelerator memory overridden where given (checked: counts are non-negative integers, memory a
    non-negative number of bytes)."""
    problem = as_instance(problem)
    (accelerators, cpus, memory), counts, sizes = _checked_overrides(accelerators, cpus, memory)
    names = {t.name for t in problem.device_types}
    for parameter, type_name, value in (("accelerators", ACCELERATOR, accelerators), ("cpus", CPU, cpus),
                                        ("memory", ACCELERATOR, memory)):
        if value is not None and type_name not in names:
            raise InvalidParameterError(parameter, f"overrides the device type {type_name!r}, which this instance "
                                                   f"does not have (it has {', '.join(sorted(names))})")
    if counts and not any(counts.get(t.name, t.count) for t in problem.device_types):
        zeroed = [name for name, value in (("accelerators", accelerators), ("cpus", cpus)) if value == 0]
        raise InvalidParameterError(zeroed[0], f"leaves no device ({' and '.join(f'{n}=0' for n in zeroed)}: every "
                                               f"device count is 0)")
    if not counts and not sizes:
        return problem
    try:
        return problem.with_devices(counts, sizes)
    except InvalidInstanceError as exc:   # a node that fits no device left (the instance itself is valid)
        raise InvalidParameterError(_to_blame(problem, counts, sizes), f"leaves a node no device: {exc}") from exc
