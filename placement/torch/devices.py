"""The ``devices`` parameter of :func:`placement.torch.plan_pipeline`: ``"<id>:<count>[,<id>:<count>]"``.

Each ``<id>`` names a device of the catalogue (:func:`placement.costmodel.roofline.bundled_catalogue`,
case-insensitive) and ``<count>`` how many of it the pipeline may use (a positive integer).
A platform holds one accelerator type and one CPU type (:class:`~placement.costmodel.roofline.Platform`),
so at most one id of each kind may appear. CPUs are used only when named: ``"h100:4"`` plans
on four H100s and no CPU.
"""

from __future__ import annotations

from placement.costmodel.roofline import DEFAULT_ACCELERATOR, DEFAULT_CPU, Platform, bundled_catalogue, find_device
from placement.errors import InvalidParameterError

FORM = "'<id>:<count>[,<id>:<count>]' (e.g. 'h100:4')"


def parse_devices(devices: object) -> Platform:
    """The :class:`Platform` that ``devices`` names (module docstring); one-line errors about ``devices``."""
    if not isinstance(devices, str) or not devices.strip():
        raise InvalidParameterError("devices", f"must be a string {FORM}, not {devices!r}")
    catalogue = bundled_catalogue()
    counts: dict[str, tuple[object, int]] = {}
    for item in devices.split(","):
        name, sep, count = item.strip().partition(":")
        if not sep or not name.strip() or not (count.strip().isascii() and count.strip().isdigit()) or int(count) < 1:
            raise InvalidParameterError("devices", f"must be {FORM} with positive counts; {item.strip()!r} in "
                                                   f"{devices!r} is not '<id>:<count>'")
        spec = find_device(catalogue, name.strip(), "devices")
        if spec.kind in counts and counts[spec.kind][0].id == spec.id:
            raise InvalidParameterError("devices", f"names {spec.id!r} twice in {devices!r}")
        if spec.kind in counts:
            raise InvalidParameterError("devices", f"names two {spec.kind} types ({counts[spec.kind][0].id!r} and "
                                                   f"{spec.id!r}); a pipeline plan takes one accelerator type and "
                                                   "one CPU type")
        counts[spec.kind] = (spec, int(count))
    accelerator, accelerators = counts.get("accelerator", (find_device(catalogue, DEFAULT_ACCELERATOR), 0))
    cpu, cpus = counts.get("cpu", (find_device(catalogue, DEFAULT_CPU), 0))
    return Platform(accelerator, cpu, accelerators, cpus)
