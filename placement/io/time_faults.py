"""Which catalogue figure an imported instance's refused times or costs come from.

Model. An imported node's time on a device is the sum over its operators of the roofline
``max(F / peak_d(τ), B / bw_d) + k · overhead_d`` (:mod:`placement.costmodel.roofline`), and an edge's
cost is its bytes over the link's bandwidth. Where the instance check refuses such a figure (infinite, or
past the largest total a graph may hold), the fault is in the catalogue entry of the device it names: the
accelerator's for ``fpgaLatency`` and ``fpgaWeightLatency`` (a time on ``accelerator``), the CPU's for
``cpuLatency`` and ``cpuWeightLatency`` (a time on ``cpu``), the accelerator's link for ``cost`` (a
transfer cost). Of the device's figures, the one named is the term whose sum over the graph's forward
operators is largest: ``peak_flops`` of one data type, ``memory_bandwidth`` or ``op_overhead``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from placement.costmodel.roofline import DeviceSpec, Platform
from placement.errors import InvalidParameterError
from placement.problem.instance import format_number

#: a refused figure of an imported instance: ``node N: field 'fpgaLatency' ...``, ``node N: time on cpu ...``,
#: ``edge A -> B: field 'cost' ...`` or ``node N: transfer cost ...``
_FIGURE = re.compile(r"^(?:node \d+|edge \d+ -> \d+): (?:field '(?P<field>\w+)'|time on (?P<type>\w+)|"
                     r"(?P<transfer>transfer cost))")
_ACCELERATOR_FIELDS = ("fpgaLatency", "fpgaWeightLatency")
_CPU_FIELDS = ("cpuLatency", "cpuWeightLatency")


def _figure(value: float) -> str:
    """A catalogue figure as short as it reads exactly: ``6.4e+10``, and ``1e-320`` where ``%g`` gives a
    subnormal's ``9.99989e-321``."""
    return min(format_number(value), repr(float(value)), key=len)


def _in_catalogue(device: DeviceSpec) -> str:
    return f" in catalogue {device.catalogue}" if device.catalogue else ""


def largest_part(graph: Any, device: DeviceSpec) -> str:
    """The figure of ``device`` most of ``graph``'s forward operator times come from, with its value:
    ``peak_flops fp32, 1e-300 FLOP/s``, ``memory_bandwidth, 1e-320 bytes/s`` or ``op_overhead, 1e+308 s per
    kernel``."""
    parts: dict[str, float] = {}
    for op in graph.ops:
        try:
            peak = device.peak(op.dtype)
        except InvalidParameterError:   # a data type the device is not asked to run
            peak = math.inf
        key = f"peak_flops {op.dtype}, {_figure(peak)} FLOP/s"
        parts[key] = parts.get(key, 0.0) + (op.flops / peak if op.flops else 0.0)
        key = f"memory_bandwidth, {_figure(device.memory_bandwidth)} bytes/s"
        parts[key] = parts.get(key, 0.0) + op.bytes_moved / device.memory_bandwidth
        key = f"op_overhead, {_figure(device.op_overhead)} s per kernel"
        parts[key] = parts.get(key, 0.0) + op.kernels * device.op_overhead
    return max(parts, key=parts.__getitem__)


def figures_at_fault(message: str, graph: Any, platform: Platform) -> str:
    """Where the figure that ``message`` (the instance check's) refuses comes from, for the import's error:
    the device, its catalogue file and the figure most of its times come from, or the link; both devices
    and every figure where the message names no device."""
    found = _FIGURE.match(message)
    field = found and (found["field"] or found["type"] or found["transfer"])
    if field in _ACCELERATOR_FIELDS + _CPU_FIELDS + ("accelerator", "cpu"):
        kind, device = (("accelerator", platform.accelerator) if field in _ACCELERATOR_FIELDS + ("accelerator",)
                        else ("cpu", platform.cpu))
        return (f"times on {kind} {device.id!r} come from its roofline{_in_catalogue(device)}, most of them from its "
                f"{largest_part(graph, device)}; check its peak_flops, memory_bandwidth and op_overhead")
    accelerator, cpu = platform.accelerator, platform.cpu
    link = platform.link if platform.link is not None else accelerator.default_link
    if field in ("cost", "transfer cost"):
        return (f"transfer costs come from link {link!r} of accelerator {accelerator.id!r}"
                f"{_in_catalogue(accelerator)}, {_figure(platform.link_bandwidth)} bytes/s; check its links")
    return (f"times from the roofline of accelerator {accelerator.id!r}{_in_catalogue(accelerator)} and CPU "
            f"{cpu.id!r}{_in_catalogue(cpu)}, transfer costs from its link {link!r}; check their peak_flops, "
            "memory_bandwidth, op_overhead and links")
