"""The ``devices`` parameter of a Piper solve: a count, or counts per device type.

An instance without ``deviceTypes`` has one unnamed type: ``devices`` is a positive integer
(default ``maxDevices``). An instance with ``deviceTypes`` (:class:`placement.io.piper.PiperDeviceType`)
takes counts per type: a mapping ``{"a100": 8, "v100": 16}`` or the text ``"a100:8,v100:16"``;
a type it does not name gets no device (as ``devices="h100:4"`` of the torch planner uses no CPU);
default: each type's ``count``. Counts are non-negative integers, at least one positive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placement.errors import InvalidParameterError
from placement.io.piper import PiperInstance
from placement.parameters import integer, recordable
from placement.problem.instance import format_number

FORM = "'<type>:<count>[,<type>:<count>]' (e.g. 'a100:8,v100:16')"


def parse_type_counts(text: str) -> dict[str, int]:
    """``"a100:8,v100:16"`` as ``{"a100": 8, "v100": 16}``; one-line errors about ``devices``."""
    counts: dict[str, int] = {}
    for item in text.split(","):
        name, sep, count = item.strip().partition(":")
        name, count = name.strip(), count.strip()
        if not sep or not name or not (count.isascii() and count.isdigit()):
            raise InvalidParameterError("devices", f"must be a device count or {FORM}; {item.strip()!r} in "
                                                   f"{text!r} is not '<type>:<count>'")
        if name in counts:
            raise InvalidParameterError("devices", f"names {name!r} twice in {text!r}")
        counts[name] = int(count)
    return counts


def device_counts(instance: PiperInstance, devices: Any) -> int | dict[str, int]:
    """``devices`` resolved for ``instance`` (module docstring): an ``int`` for an instance without
    types, else ``{type name: count}`` over every type in the instance's order."""
    types = instance.device_types
    if not types:
        count = devices.strip() if isinstance(devices, str) else ""
        if count.isascii() and count.isdigit():
            raise InvalidParameterError("devices", f"must be an integer count, not the text {devices!r} "
                                                   f"(devices={int(count)})")
        if isinstance(devices, (str, Mapping)):
            raise InvalidParameterError("devices", "names device types, but the instance has no deviceTypes; "
                                                   "give a device count")
        value = integer("devices", devices, smallest=1, optional=True)
        return instance.max_devices if value is None else recordable("devices", value)
    if devices is None:
        return {t.name: t.count for t in types}
    if isinstance(devices, str):
        devices = parse_type_counts(devices)
    if not isinstance(devices, Mapping):
        raise InvalidParameterError("devices", f"must give counts per device type for an instance with deviceTypes, "
                                               f"as a mapping or {FORM}, not {devices!r}")
    known = [t.name for t in types]
    for name, count in devices.items():
        if name not in known:
            raise InvalidParameterError("devices", f"names {name!r}, which is not a device type of the instance "
                                                   f"(its types: {', '.join(known)})")
        recordable(f"devices[{name!r}]", integer(f"devices[{name!r}]", count, smallest=0))
    if not any(devices.values()):
        raise InvalidParameterError("devices", "gives no device of any type")
    return {name: int(devices.get(name, 0)) for name in known}


def check_memory(instance: PiperInstance, memory: Any) -> None:
    """Refuse a ``memory`` override for an instance with ``deviceTypes`` (each type gives its own)."""
    if instance.device_types and memory is not None:
        raise InvalidParameterError("memory", "does not apply to an instance with deviceTypes: each type gives "
                                              "the memory of its devices")


def at_most(devices: int | dict[str, int], largest: int) -> int | dict[str, int]:
    """``devices`` with every count cut to ``largest``."""
    if isinstance(devices, dict):
        return {name: min(count, largest) for name, count in devices.items()}
    return min(devices, largest)


def describe(devices: int | dict[str, int], memory: float) -> str:
    """``"8 devices of 8e+10 bytes"``, or ``"a100:8, v100:16 devices"`` (each type's memory) for types. The
    memory is written exactly (``0.29999999999999``, not ``0.3``, which may fit where it does not)."""
    if isinstance(devices, dict):
        return ", ".join(f"{name}:{count}" for name, count in devices.items()) + " devices"
    return f"{devices} device{'' if devices == 1 else 's'} of {format_number(memory)} bytes"


__all__ = ["FORM", "at_most", "check_memory", "describe", "device_counts", "parse_type_counts"]
