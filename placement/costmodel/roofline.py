"""Roofline times of operators on catalogued devices, and transfer times over links.

Model
-----
A device ``d`` has, per data type ``τ``, a peak rate ``peak_d(τ)`` in FLOP/s, a memory
bandwidth ``bw_d`` in bytes/s, a memory size and named links (bytes/s, one direction).
An operator that performs ``F`` FLOPs in data type ``τ``, moves ``B`` bytes to and from
the device's memory and launches ``k`` kernels takes, in milliseconds::

    time_d = 1000 · (max(F / peak_d(τ), B / bw_d) + k · overhead_d)

The first term is the roofline (an operator is either compute-bound or memory-bound);
``overhead_d`` (seconds, the catalogue's ``op_overhead``) is the fixed cost of one kernel
in eager PyTorch: the framework's dispatch plus the launch, paid whatever the kernel's
size. It is added to the roofline, not overlapped with it: a device running small
kernels waits for the host to dispatch each one, and for a large kernel, whose dispatch
the host could hide, it is a negligible addition. ``k`` is 0 for an operator that launches no
kernel (a view, a no-op such as dropout in evaluation or of probability 0, or a cast to the same
type), 1 for every other forward operator; :mod:`placement.io.opgraph` gives the backward
counts. A tensor of ``b`` bytes crosses a link of bandwidth ``β`` in ``1000 · b / β``
milliseconds.

Data types are named ``fp64``, ``fp32``, ``tf32``, ``fp16``, ``bf16`` and ``fp8``.
A device without a peak for a data type cannot run it (V100 has no ``bf16``); asking
for it is an error, never a silent substitute.

The catalogue
-------------
``devices.json`` beside this module holds the bundled devices (H100, A100 80 GB and
40 GB, V100, one AMD EPYC 7763 socket), each citing its vendor datasheet. Users add or
replace devices with files of the same format::

    {"devices": {"my-gpu": {"model": "...", "kind": "accelerator",
                            "peak_flops": {"fp32": 1e13, "fp16": 1e14},
                            "memory_bandwidth": 1e12, "memory": 17179869184,
                            "links": {"pcie": 32e9}, "default_link": "pcie",
                            "op_overhead": 5e-6, "sources": ["..."]}}}

``kind`` is ``accelerator`` (pays communication, bounded memory) or ``cpu``. ``links``
and ``default_link`` are required for accelerators (transfer costs are computed from
them) and optional for CPUs; ``op_overhead`` (seconds per kernel, non-negative) is optional,
0 when absent; ``sources`` is optional. Other fields are ignored, but for a misspelling of one of these
(:mod:`placement.misspelling`: ``op_overheads`` would leave the overhead 0), which is refused.
Ids are case-insensitive: a file's ``H100`` replaces the bundled ``h100``, and one file may not hold
two ids that differ only in case. A file may say what it is, ``"format": "placement-devices/1"``
(:data:`CATALOGUE_FORMAT`), as the bundled one does; one that says another format is refused, and so is
another document of this package (a plan, an instance), named as what it is.
"""

from __future__ import annotations

import collections.abc
import math
import numbers
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.jsonfile import json_type_name, json_value_text, load_json
from placement.misspelling import misspelling_message, misspelt_field
from placement.parameters import integer, keywords_checked

#: Data types the catalogue may give peaks for, with their element sizes in bytes.
ELEMENT_BYTES: dict[str, int] = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
KINDS = ("accelerator", "cpu")
#: what a catalogue file's optional ``format`` field says
CATALOGUE_FORMAT = "placement-devices/1"


def check_dtype(dtype: str | None) -> str | None:
    """``dtype`` when it is ``None`` or a data type of :data:`ELEMENT_BYTES`."""
    if dtype is not None and dtype not in ELEMENT_BYTES:
        raise InvalidParameterError("dtype", f"must be one of {', '.join(map(repr, ELEMENT_BYTES))} or None, "
                                             f"not {dtype!r}")
    return dtype


@dataclass(frozen=True)
class DeviceSpec:
    """Roofline figures of one catalogued device (units: FLOP/s, bytes/s, bytes)."""

    id: str
    model: str
    kind: str
    peak_flops: tuple[tuple[str, float], ...]
    memory_bandwidth: float
    memory: float
    links: tuple[tuple[str, float], ...] = ()
    default_link: str | None = None
    sources: tuple[str, ...] = ()
    op_overhead: float = 0.0
    #: the catalogue file the entry was read from ("" where it was not read from a file)
    catalogue: str = field(default="", compare=False)

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``; an :class:`InvalidParameterError` if the device has none."""
        for name, value in self.peak_flops:
            if name == dtype:
                return value
        have = ", ".join(repr(name) for name, _ in self.peak_flops)
        raise InvalidParameterError("dtype", f"must be one of the data types with a peak FLOP/s on device "
                                             f"{self.id!r} ({self.model}): {have}, not {dtype!r}")

    def link_bandwidth(self, link: str | None = None) -> float:
        """Bandwidth in bytes/s of the named link (default: ``default_link``), one direction."""
        name = link if link is not None else self.default_link
        for key, value in self.links:
            if key == name:
                return value
        have = ", ".join(repr(key) for key, _ in self.links) or "none"
        if name is None:
            raise InvalidParameterError("link", f"must name a link of device {self.id!r}, which has no default "
                                                f"link (links: {have})")
        raise InvalidParameterError("link", f"must be a link of device {self.id!r} (links: {have}), not {name!r}")


def roofline_ms(flops: float, bytes_moved: float, device: DeviceSpec, dtype: str, kernels: float = 0) -> float:
    """Time in milliseconds of an operator launching ``kernels`` kernels:
    ``1000 · (max(flops / peak(dtype), bytes / bandwidth) + kernels · op_overhead)``."""
    compute = flops / device.peak(dtype) if flops else 0.0
    return 1e3 * (max(compute, bytes_moved / device.memory_bandwidth) + kernels * device.op_overhead)


def transfer_ms(nbytes: float, bandwidth: float) -> float:
    """Time in milliseconds to move ``nbytes`` over a link of ``bandwidth`` bytes/s."""
    return 1e3 * nbytes / bandwidth


# ----- catalogue files ---------------------------------------------------------------------

def _number(entry: dict, key: str, where: str, zero_allowed: bool = False) -> float:
    """The finite number ``entry[key]``, positive (non-negative if ``zero_allowed``)."""
    if key not in entry:
        raise InvalidInstanceError(f"{where}: missing field {key!r}")
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstanceError(f"{where}: field {key!r} must be a number, got {json_type_name(value)}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
        sign = "non-negative" if zero_allowed else "positive"
        raise InvalidInstanceError(f"{where}: field {key!r} must be {sign} and finite, got {value!r}")
    return float(value)


def _positive(entry: dict, key: str, where: str) -> float:
    return _number(entry, key, where)


def _rates(entry: dict, key: str, where: str, names: Iterable[str] | None) -> tuple[tuple[str, float], ...]:
    """A JSON object of positive rates; ``names`` (if given) are the keys allowed."""
    raw = entry.get(key, {})
    if not isinstance(raw, dict):
        raise InvalidInstanceError(f"{where}: field {key!r} must be an object, got {json_type_name(raw)}")
    allowed = tuple(names) if names is not None else None
    rates = []
    for name in raw:
        if allowed is not None and name not in allowed:
            raise InvalidInstanceError(f"{where}: {key} has unknown data type {name!r} (known: {', '.join(allowed)})")
        rates.append((name, _positive(raw, name, f"{where}: {key}")))
    return tuple(rates)


#: the fields of a catalogue entry
DEVICE_FIELDS = ("kind", "model", "peak_flops", "memory_bandwidth", "memory", "links", "default_link", "sources",
                 "op_overhead")


def parse_device(device_id: str, entry: Any) -> DeviceSpec:
    """One catalogue entry as a :class:`DeviceSpec`; errors name the device and field."""
    where = f"device {device_id!r}"
    if not isinstance(entry, dict):
        raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(entry)}")
    misspelt = misspelt_field([entry], DEVICE_FIELDS)
    if misspelt is not None:
        raise InvalidInstanceError(f"{where}: {misspelling_message(*misspelt[1:])}")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise InvalidInstanceError(f"{where}: field 'kind' must be one of {', '.join(KINDS)}, "
                                   f"got {json_value_text(kind)}")
    model = entry.get("model", device_id)
    if not isinstance(model, str):
        raise InvalidInstanceError(f"{where}: field 'model' must be a string, got {json_type_name(model)}")
    peaks = _rates(entry, "peak_flops", where, ELEMENT_BYTES)
    if not peaks:
        raise InvalidInstanceError(f"{where}: field 'peak_flops' must give at least one data type")
    links = _rates(entry, "links", where, None)
    default_link = entry.get("default_link")
    if default_link is not None and (not isinstance(default_link, str) or default_link not in dict(links)):
        named = ", ".join(repr(name) for name, _ in links) or "none"
        raise InvalidInstanceError(f"{where}: field 'default_link' must name one of its links ({named}), "
                                   f"got {json_value_text(default_link)}")
    if kind == "accelerator" and default_link is None:
        raise InvalidInstanceError(f"{where}: an accelerator needs 'links' and a 'default_link' (transfer costs use them)")
    sources = entry.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InvalidInstanceError(f"{where}: field 'sources' must be an array of strings")
    return DeviceSpec(device_id, model, kind, peaks, _positive(entry, "memory_bandwidth", where),
                      _positive(entry, "memory", where), links, default_link, tuple(sources),
                      _number(entry, "op_overhead", where, zero_allowed=True) if "op_overhead" in entry else 0.0)


def _other_document(data: dict) -> str | None:
    """What a document that is no catalogue is, where its fields say (an instance or a model file, a plan, a
    co-design document, another document of this package); ``None`` for a catalogue or what may be one (one
    of another version of the format is told so)."""
    from placement.loading import document_kind

    kind = data.get("format")
    if isinstance(kind, str) and kind.startswith(CATALOGUE_FORMAT.split("/")[0] + "/"):
        return None
    other = document_kind(data)
    return None if other == "a device catalogue" else other


def parse_catalogue(data: Any) -> dict[str, DeviceSpec]:
    """The devices of a decoded catalogue file, by id."""
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"a device catalogue must be a JSON object, got {json_type_name(data)}")
    other = _other_document(data)
    if other:
        raise InvalidInstanceError(f"the document is {other}, not a device catalogue, which has an object "
                                   "'devices' (id -> device)")
    if data.get("format", CATALOGUE_FORMAT) != CATALOGUE_FORMAT:   # absent: the documented example gives none
        raise InvalidInstanceError(f"field 'format' must be {CATALOGUE_FORMAT!r}, "
                                   f"got {json_value_text(data['format'])}")
    devices = data.get("devices")
    if not isinstance(devices, dict):
        raise InvalidInstanceError("a device catalogue needs an object field 'devices' (id -> device)")
    seen: dict[str, str] = {}
    for device_id in devices:   # ids are looked up case-insensitively: two that differ in case are one name
        if not device_id.strip() or device_id != device_id.strip():
            raise InvalidInstanceError(f"device id {device_id!r} is no name to look up: give it a non-empty id "
                                       "without leading or trailing spaces")
        other = seen.setdefault(device_id.lower(), device_id)
        if other != device_id:
            raise InvalidInstanceError(f"devices {other!r} and {device_id!r} differ only in case; device ids "
                                       "are case-insensitive, so which one is meant is not clear")
    return {device_id: parse_device(device_id, entry) for device_id, entry in devices.items()}


def read_catalogue(path: str | Path) -> dict[str, DeviceSpec]:
    """Read a catalogue file; errors name the file, and so does each device's ``catalogue``."""
    data = load_json(path, InvalidInstanceError)
    try:
        devices = parse_catalogue(data)
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None
    return {device_id: replace(spec, catalogue=str(path)) for device_id, spec in devices.items()}


def bundled_catalogue() -> dict[str, DeviceSpec]:
    """The devices shipped with the package (``devices.json``)."""
    resource = resources.files("placement.costmodel") / "devices.json"
    with resources.as_file(resource) as file:
        return read_catalogue(file)


def load_catalogue(paths: Iterable[str | Path] = ()) -> dict[str, DeviceSpec]:
    """The bundled catalogue extended by the files in ``paths``, in order (later ids replace earlier, ids
    compared case-insensitively, as :func:`find_device` looks them up)."""
    catalogue = bundled_catalogue()
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidParameterError("catalogues", f"must list catalogue file paths, not {type(path).__name__}")
        for device_id, spec in read_catalogue(path).items():
            for key in [key for key in catalogue if key.lower() == device_id.lower()]:
                del catalogue[key]
            catalogue[device_id] = spec
    return catalogue


def find_device(catalogue: dict[str, DeviceSpec], device: str, parameter: str = "device") -> DeviceSpec:
    """The device called ``device`` (its id, case-insensitive); if unknown, an :class:`InvalidParameterError`
    about ``parameter`` (the caller's name for ``device``) listing the ids."""
    by_key = {key.lower(): spec for key, spec in catalogue.items()}
    spec = by_key.get(device.lower()) if isinstance(device, str) else None
    if spec is None:
        raise InvalidParameterError(parameter, f"must name a device of the catalogue "
                                               f"({', '.join(sorted(catalogue))}), not {device!r}")
    return spec


# ----- the devices of one instance --------------------------------------------------------

DEFAULT_ACCELERATOR = "h100"
DEFAULT_CPU = "epyc-7763"


@dataclass(frozen=True)
class Platform:
    """The devices an instance is costed for: ``accelerators`` of one catalogued accelerator
    (memory ``memory``, default the catalogue's; transfers over ``link``, default its
    ``default_link``) and ``cpus`` CPU units of one catalogued CPU (a unit is a whole socket)."""

    accelerator: DeviceSpec
    cpu: DeviceSpec
    accelerators: int
    cpus: int
    memory: float | None = None
    link: str | None = None

    def __post_init__(self) -> None:
        if self.accelerator.kind != "accelerator":
            raise InvalidParameterError("accelerator", f"must be an accelerator, not device {self.accelerator.id!r} "
                                                       f"(a {self.accelerator.kind})")
        if self.cpu.kind != "cpu":
            raise InvalidParameterError("cpu", f"must be a CPU, not device {self.cpu.id!r} (an {self.cpu.kind})")
        for what in ("accelerators", "cpus"):   # numpy's integers as the ints they hold
            object.__setattr__(self, what, integer(what, getattr(self, what)))
        if self.accelerators + self.cpus == 0:
            raise InvalidParameterError("accelerators", "must be at least 1 when there are no CPUs: a platform needs "
                                                        "at least one device")
        if self.memory is not None and (isinstance(self.memory, bool) or not isinstance(self.memory, numbers.Real)
                                        or not math.isfinite(self.memory) or self.memory < 0):
            raise InvalidParameterError("memory", f"must be a finite non-negative number of bytes or None, "
                                                  f"not {self.memory!r}")
        self.accelerator.link_bandwidth(self.link)  # the link must exist

    @property
    def link_bandwidth(self) -> float:
        return self.accelerator.link_bandwidth(self.link)

    @property
    def accelerator_memory(self) -> float:
        return self.accelerator.memory if self.memory is None else self.memory


@keywords_checked
def make_platform(accelerator: str = DEFAULT_ACCELERATOR, cpu: str = DEFAULT_CPU, accelerators: int = 4,
                  cpus: int = 0, memory: float | None = None, link: str | None = None,
                  catalogues: Iterable[str | Path] = ()) -> Platform:
    """A :class:`Platform` from device names, looked up in the bundled catalogue extended by ``catalogues``;
    CPUs only when ``cpus`` asks for them."""
    if isinstance(catalogues, (str, Path)):   # iterated, a path's characters were read as file names
        raise InvalidParameterError("catalogues", f"must be a list of catalogue files, not the one path "
                                                  f"{str(catalogues)!r}: give [{str(catalogues)!r}]")
    if not isinstance(catalogues, collections.abc.Iterable):
        raise InvalidParameterError("catalogues", f"must be a list of catalogue files, not "
                                                  f"{type(catalogues).__name__}")
    catalogue = load_catalogue(catalogues)
    return Platform(find_device(catalogue, accelerator, "accelerator"), find_device(catalogue, cpu, "cpu"),
                    accelerators, cpus, memory, link)
