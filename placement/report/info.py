"""Facts about an instance before solving it (``placement info``).

:func:`instance_info` returns a plain dict; :func:`format_info` renders it as aligned text.
The ideal count is not computed here (it needs the solver's enumeration): the key
``"ideals"`` is ``None`` until a caller fills it in with the count, or, where counting stopped, with
``None`` beside ``"ideals_more_than"`` (the number past which it stopped) and ``"ideals_stopped_by"``
(``"max_ideals"``, or ``"memory"``: the most ideals whose tables the DP could hold);
:func:`format_info` also shows an optional ``"supernodes"`` key.
"""

from __future__ import annotations

import math
from typing import Any

from placement.problem.bounds import (class_without_device, memory_without_room, throughput_lower_bound,
                                      weighted_applies)
from placement.problem.instance import Instance, format_number
from placement.report.table import printable


def instance_info(problem: Instance) -> dict[str, Any]:
    """Sizes, device catalogue, work per device type and a throughput lower bound of ``problem``.

    Keys: ``name``, ``nodes``, ``edges``, ``forward``, ``backward``, ``kind`` (``"training"``
    if there is a backward node, else ``"inference"``), ``colour_classes``, ``device_types``
    (list of ``{name, count, memory, pays_comm}``), ``work`` (per device type name: Σ of the
    node times on that type, unsupported nodes excluded), ``unsupported`` (per device type
    name: nodes it cannot run), ``total_memory`` (Σ node bytes), ``lower_bound`` (see
    :func:`throughput_lower_bound`), ``lower_bound_class``, ``lower_bound_average``,
    ``lower_bound_weighted`` (``None`` unless two device types have devices), ``no_plan`` (why the instance has no
    plan where a colour class fits no device, the bound then infinite, or where the nodes that only devices of
    bounded memory run need more than all of them hold; else ``None``) and ``ideals``
    (``None``; filled in by the caller).
    """
    forward = sum(1 for n in problem.nodes if not n.backward)
    work: dict[str, float] = {}
    unsupported: dict[str, int] = {}
    for t, dtype in enumerate(problem.device_types):
        times = [n.times[t] for n in problem.nodes]
        work[dtype.name] = float(sum(p for p in times if p is not None))
        unsupported[dtype.name] = sum(1 for p in times if p is None)
    bound = throughput_lower_bound(problem)
    return {
        "name": problem.name,
        "nodes": len(problem.nodes),
        "edges": len(problem.edges),
        "forward": forward,
        "backward": len(problem.nodes) - forward,
        "kind": "training" if problem.is_training else "inference",
        "colour_classes": len(problem.colour_classes()),
        "device_types": [{"name": t.name, "count": t.count, "memory": t.memory, "pays_comm": t.pays_comm}
                         for t in problem.device_types],
        "work": work,
        "unsupported": unsupported,
        "total_memory": float(sum(n.memory for n in problem.nodes)),
        "lower_bound": bound["bound"],
        "lower_bound_class": bound["class"],
        "lower_bound_average": bound["average"],
        "lower_bound_weighted": bound["weighted"] if weighted_applies(problem) else None,
        # the class bound is infinite exactly where a colour class fits no device; else the memory may not fit
        "no_plan": class_without_device(problem) if math.isinf(bound["class"]) else memory_without_room(problem),
        "ideals": None,
    }


def _num(value: float) -> str:
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        return f"{value:.6g}"
    return format_number(value)


#: counts up to this are written in full; past it as their float (a count read as 1e300 is that float's
#: 301-digit integer, whose digits past the 17th were never written)
FULL_COUNT = 10**21


def _count(count: int) -> str:
    return str(count) if count <= FULL_COUNT else format_number(float(count))


def format_info(info: dict[str, Any]) -> str:
    """Plain-text rendering of :func:`instance_info`'s dict, one fact per line, values aligned."""
    rows: list[tuple[str, str]] = []
    if info.get("name"):
        rows.append(("instance", str(info["name"])))
    rows.append(("kind", str(info["kind"])))
    rows.append(("nodes", f"{info['nodes']} ({info['forward']} forward, {info['backward']} backward)"))
    rows.append(("edges", str(info["edges"])))
    rows.append(("colour classes", str(info["colour_classes"])))
    for t in info["device_types"]:
        memory = "unbounded" if math.isinf(t["memory"]) else f"{_num(t['memory'])} bytes each"
        comm = "pays communication" if t["pays_comm"] else "no communication"
        rows.append((f"devices ({t['name']})", f"{_count(t['count'])}, memory {memory}, {comm}"))
    for name, total in info["work"].items():
        rows.append((f"work ({name})", f"{_num(total)} (unsupported nodes: {info['unsupported'][name]})"))
    rows.append(("total memory", f"{_num(info['total_memory'])} bytes"))
    if info.get("supernodes") is not None:
        rows.append(("supernodes", str(info["supernodes"])))
    ideals, above = info.get("ideals"), info.get("ideals_more_than")
    if above is not None:
        why = "" if info.get("ideals_stopped_by") != "memory" else \
            " (the most the DP's tables could hold in the memory available here)"
        rows.append(("ideals", f"more than {above:,}{why}"))
    else:
        rows.append(("ideals", "not counted" if ideals is None else f"{ideals:,}"))
    lb = info["lower_bound"]
    weighted = info.get("lower_bound_weighted")
    detail = (f"max(class {_num(info['lower_bound_class'])}, average {_num(info['lower_bound_average'])}"
              + (f", speed-weighted {_num(weighted)})" if weighted is not None else ")"))
    rows.append(("throughput lower bound",
                 f"{_num(lb)}  {detail}" + (f"  ({info['no_plan'] or 'a colour class fits no device'})"
                                            if math.isinf(lb) else "")))
    if info.get("no_plan") and not math.isinf(lb):   # a finite bound, yet the sizes show no plan exists
        rows.append(("no plan", str(info["no_plan"])))
    rows = [(printable(key), printable(value)) for key, value in rows]   # a name's newline splits no line
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key + ':':<{width + 1}} {value}" for key, value in rows)
