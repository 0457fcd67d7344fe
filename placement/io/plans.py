"""Plan files: Tarnawski's plan format (and the published expert splits), and ours.

Tarnawski's format::

    {"maxLoad"?, "fpgas": [{"load"?, "nodes": [ids]}], "cpus": [{"load"?, "nodes": [ids]}]}

read as accelerator devices (``fpgas``, file order) followed by CPU devices.
Our format, ``"format": "placement-plan/1"``, is a superset of it that adds
``"devices": [{"type", "load", "memory", "nodes", "calls"?}]`` in pipeline order
(preferred when present), the solver's claims (status, objective, bound, gap, ...) and the
evaluator's verdict. Loads and max load written are always the verified ones.
JSON has no infinity: non-finite numbers are written as ``null``.

``calls`` (latency objective; optional, in ``devices``, ``fpgas`` and ``cpus``
entries alike) lists the device's nodes as separate calls in the order the
device runs them: ``[[ids], [ids], ...]``. Absent, ``null`` or ``[]``: one call
holding all of ``nodes``. It is written only for devices that have calls.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any

from placement.errors import PlacementError, InvalidPlanError
from placement.jsonfile import json_type_name, load_json
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution
from placement.verification.evaluate import Evaluation, evaluate

FORMAT = "placement-plan/1"


def _node_ids(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise InvalidPlanError(f"{where}: must be an array of node ids, got {json_type_name(value)}")
    ids: list[int] = []
    for k, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InvalidPlanError(f"{where}[{k}]: node id must be an integer, got {json_type_name(v)}")
        if isinstance(v, float):
            if not v.is_integer():
                raise InvalidPlanError(f"{where}[{k}]: node id must be an integer, got {v!r}")
            v = int(v)
        ids.append(v)
    return tuple(ids)


def parse_plan(data: Any) -> Plan:
    """Build a :class:`Plan` from the decoded JSON of a plan file (either format)."""
    if not isinstance(data, dict):
        raise InvalidPlanError(f"the plan must be a JSON object, got {json_type_name(data)}")
    if "devices" in data:
        return Plan(_device_list(data["devices"], "devices", None))
    if "fpgas" not in data and "cpus" not in data:
        raise InvalidPlanError("the plan has none of the fields 'devices', 'fpgas', 'cpus'")
    return Plan(_device_list(data.get("fpgas", []), "fpgas", ACCELERATOR)
                + _device_list(data.get("cpus", []), "cpus", CPU))


def _device_list(raw: Any, key: str, type_name: str | None) -> tuple[DeviceAssignment, ...]:
    """The devices of one list field; ``type_name`` None means each entry names its own ``type``."""
    if not isinstance(raw, list):
        raise InvalidPlanError(f"field {key!r} must be an array, got {json_type_name(raw)}")
    devices = []
    for k, dev in enumerate(raw):
        where = f"{key}[{k}]"
        if not isinstance(dev, dict):
            raise InvalidPlanError(f"{where}: must be an object, got {json_type_name(dev)}")
        kind = type_name
        if kind is None:
            if "type" not in dev:
                raise InvalidPlanError(f"{where}: missing field 'type'")
            kind = dev["type"]
            if not isinstance(kind, str):
                raise InvalidPlanError(f"{where}: field 'type' must be a string, got {json_type_name(kind)}")
        if "nodes" not in dev:
            raise InvalidPlanError(f"{where}: missing field 'nodes'")
        devices.append(DeviceAssignment(kind, _node_ids(dev["nodes"], f"{where}.nodes"),
                                        _calls(dev.get("calls"), f"{where}.calls")))
    return tuple(devices)


def _calls(raw: Any, where: str) -> tuple[tuple[int, ...], ...]:
    """The optional ``calls`` field of a device: an array of arrays of node ids (absent or null: none)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidPlanError(f"{where}: must be an array of calls (arrays of node ids), got {json_type_name(raw)}")
    return tuple(_node_ids(call, f"{where}[{k}]") for k, call in enumerate(raw))


def read_plan(path: str | Path) -> Plan:
    """Read a plan file (Tarnawski's format or ours); errors name the file."""
    data = load_json(path, InvalidPlanError)
    try:
        return parse_plan(data)
    except InvalidPlanError as exc:
        raise InvalidPlanError(f"{path}: {exc}") from None


def _jsonable(value: Any) -> Any:
    """``value`` made strict-JSON-ready: tuples and sets as lists, non-finite floats as ``None``.

    Numpy scalars and arrays become Python numbers and lists; values of other types
    (enums such as :class:`Status`, paths) are written as their ``str()``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy arrays
        return _jsonable(value.tolist())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    return str(value)


def plan_to_json(problem: Instance, solution: Solution, evaluation: Evaluation | None = None) -> dict:
    """The plan file content: Tarnawski's fields (verified loads) plus ours.

    ``evaluation`` should be the evaluator's verdict on ``solution.plan``; when
    it is ``None`` and there is a plan, the plan is evaluated here under the
    solution's contiguity class. Without a plan the device lists are empty and
    ``maxLoad`` and ``verified`` are ``null``.
    """
    if evaluation is None and solution.plan is not None:
        evaluation = evaluate(problem, solution.plan, solution.contiguity)
    reports = evaluation.devices if evaluation is not None else ()
    plan_devices = solution.plan.devices if solution.plan is not None else ()

    def entry(r: Any, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` plus the device's calls, when the plan gives it calls."""
        if r.position < len(plan_devices) and plan_devices[r.position].calls:
            out["calls"] = [list(call) for call in plan_devices[r.position].calls]
        return out

    devices = [entry(r, {"type": r.type, "load": r.load, "memory": r.memory, "nodes": list(r.nodes)})
               for r in reports]
    data: dict[str, Any] = {
        "maxLoad": evaluation.max_load if evaluation is not None else None,
        "fpgas": [entry(r, {"load": r.load, "nodes": list(r.nodes)}) for r in reports if r.type == ACCELERATOR],
        "cpus": [entry(r, {"load": r.load, "nodes": list(r.nodes)}) for r in reports if r.type == CPU],
        "format": FORMAT,
        "devices": devices,
        "method": solution.method,
        "objective_kind": solution.objective_kind,
        "contiguity": solution.contiguity,
        "status": str(solution.status),
        "objective": solution.objective,
        "bound": solution.bound,
        "gap": solution.gap,
        "runtime_s": solution.runtime_s,
        "stats": solution.stats,
        "instance": problem.name,
        "verified": None if evaluation is None else {
            "valid": evaluation.valid,
            "max_load": evaluation.max_load,
            "violations": list(evaluation.violations),
            "contiguity": evaluation.contiguity,
            "finest_class": evaluation.finest_class,
            "inferred": list(evaluation.inferred),
        },
    }
    if solution.message:
        data["message"] = solution.message
    return _jsonable(data)


def write_plan(path: str | Path, problem: Instance, solution: Solution,
               evaluation: Evaluation | None = None) -> None:
    """Write :func:`plan_to_json` to ``path`` (strict JSON, two-space indent)."""
    text = json.dumps(plan_to_json(problem, solution, evaluation), indent=2, allow_nan=False)
    try:
        Path(path).write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise PlacementError(f"{path}: cannot write the plan: {exc.strerror}") from None
