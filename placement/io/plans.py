"""Plan files: Tarnawski's plan format (and the published expert splits), and ours.

Tarnawski's format::

    {"maxLoad"?, "fpgas": [{"load"?, "nodes": [ids]}], "cpus": [{"load"?, "nodes": [ids]}]}

read as accelerator devices (``fpgas``, file order) followed by CPU devices.
Our format, ``"format": "placement-plan/1"``, is a superset of it that adds
``"devices": [{"type", "load", "memory", "nodes", "calls"?}]`` in pipeline order
(preferred when present; ``fpgas`` and ``cpus`` beside it must place the nodes of its
accelerator and CPU devices, in order, as it does), the solver's claims (status, objective, bound, gap, ...) and the
evaluator's verdict; :meth:`placement.Result.to_json` writes it, with the verified loads.
JSON has no infinity: non-finite numbers are written as ``null``.

``calls`` (latency objective; optional, in ``devices``, ``fpgas`` and ``cpus``
entries alike) lists the device's nodes as separate calls in the order the
device runs them: ``[[ids], [ids], ...]``. Absent, ``null`` or ``[]``: one call
holding all of ``nodes``. It is written only for devices that have calls.

``b_tasks`` and ``w_tasks`` (split-backward plans, ``docs/backward-split.md``; optional arrays of
backward node ids in ``devices`` entries) say which backward nodes run their activation-gradient
task B and their weight-gradient task W on the device; ``nodes`` then places the layers.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import unicodedata
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

from placement.errors import InvalidParameterError, InvalidPlanError, PlacementError
from placement.jsonfile import (MAX_INPUT_BYTES, ROUNDED_INTEGER, json_type_name, json_value_text, load_json,
                               refuse_huge_integers)
from placement.misspelling import misspelling_message, misspelt_field
from placement.problem.instance import ACCELERATOR, CPU
from placement.plan import DeviceAssignment, Plan

FORMAT = "placement-plan/1"


def node_ids(value: Any, where: str) -> tuple[int, ...]:
    """The node ids of a plan file's array ``value`` (integers, or floats with integer values);
    anything else raises :class:`InvalidPlanError` naming ``where``."""
    if not isinstance(value, list):
        raise InvalidPlanError(f"{where}: must be an array of node ids, got {json_type_name(value)}")
    if all(type(v) is int for v in value):   # as JSON decodes them
        return tuple(value)
    ids: list[int] = []
    for k, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):   # numpy's integers and floats are numbers
            raise InvalidPlanError(f"{where}[{k}]: node id must be an integer, got {json_type_name(v)}")
        if not isinstance(v, numbers.Integral):
            if not float(v).is_integer():
                raise InvalidPlanError(f"{where}[{k}]: node id must be an integer, got {float(v)!r}")
            if abs(v) >= 2 ** 53:
                raise InvalidPlanError(f"{where}[{k}]: node id reads {float(v):.17g}, {ROUNDED_INTEGER}")
        ids.append(int(v))
    return tuple(ids)


def _placed(device: DeviceAssignment) -> tuple[frozenset[int], tuple[frozenset[int], ...]]:
    """What a device entry places: its nodes, and the nodes of each of its calls, in call order."""
    return frozenset(device.nodes), tuple(frozenset(call) for call in device.calls)


def parse_plan(data: Any) -> Plan:
    """Build a :class:`Plan` from the decoded JSON of a plan file (either format)."""
    if not isinstance(data, dict):
        raise InvalidPlanError(f"the plan must be a JSON object, got {json_type_name(data)}")
    from placement.loading import design_document, named_document

    # read field by field, a sweep's 'objectives' was refused as a misspelt 'objective', a verdict's 'max_load' as
    # a misspelt 'maxLoad', and a split's form as a wrong 'format'
    other = named_document(data) or design_document(data)
    if other:
        raise InvalidPlanError(f"the document is {other}, not a plan, which has 'devices' (or 'fpgas' and 'cpus')")
    if "format" in data and data["format"] != FORMAT:
        raise InvalidPlanError(f"field 'format' must be {FORMAT!r}, got {json_value_text(data['format'])}")
    # 'fpga' was read as no accelerators at all, 'contiguty' as no class to check; a document with nodes is an
    # instance or its description (info's 'device_types' is none), refused as such below
    misspelt = None if "nodes" in data else misspelt_field([data], PLACING_FIELDS + WRITTEN_FIELDS,
                                                           PLACING_FIELDS + READ_FIELDS)
    if misspelt is not None:
        raise InvalidPlanError(misspelling_message(misspelt[1], misspelt[2]))
    if "devices" in data:
        devices = _device_list(data["devices"], "devices", None)
        for key, kind in (("fpgas", ACCELERATOR), ("cpus", CPU)):   # the superset's Tarnawski fields
            if key in data and ([_placed(d) for d in _device_list(data[key], key, kind)]
                                != [_placed(d) for d in devices if d.type == kind]):
                other = next((k for k, d in enumerate(devices) if d.type not in (ACCELERATOR, CPU)), None)
                if other is not None:   # a type the two-type fields cannot hold: the likely edit
                    raise InvalidPlanError(f"devices[{other}] has type {devices[other].type!r}, but the plan's fields "
                                           f"'fpgas' and 'cpus' place every node on an {ACCELERATOR!r} or a {CPU!r} "
                                           "device: which of the two was meant is not clear")
                raise InvalidPlanError(f"field {key!r} places the nodes or calls otherwise than field 'devices' does "
                                       f"(on its {kind} devices, in order): which of the two was meant is not clear "
                                       "(a plan edited in 'devices' is read as it is once 'fpgas' and 'cpus' are "
                                       "left out)")
        return _a_plan(data, Plan(devices))
    if "fpgas" not in data and "cpus" not in data:
        raise InvalidPlanError("the plan has none of the fields 'devices', 'fpgas', 'cpus'"
                               + ("; the document has 'nodes': it is an instance, or a description of one, not a plan"
                                  if "nodes" in data else
                                  "; its 'stages' give degrees 'd' and 't': it is a data- and tensor-parallel plan, "
                                  "which a Piper instance takes" if _parallel_stages(data) else ""))
    return _a_plan(data, Plan(_device_list(data.get("fpgas", []), "fpgas", ACCELERATOR)
                              + _device_list(data.get("cpus", []), "cpus", CPU)))


def _parallel_stages(data: dict) -> bool:
    """Whether ``data`` has the ``stages`` of a data- and tensor-parallel plan (each an object with ``d`` and ``t``),
    which :mod:`placement.parallel.plan` reads for a Piper instance."""
    stages = data.get("stages")
    return (isinstance(stages, list) and bool(stages)
            and all(isinstance(stage, dict) and "d" in stage and "t" in stage for stage in stages))


#: the fields of a plan document that place nodes on devices: a document has at least one of them
PLACING_FIELDS = ("devices", "fpgas", "cpus")

#: the other fields of a plan document that :meth:`placement.Result.to_json` writes (never misspellings)
WRITTEN_FIELDS = ("format", "maxLoad", "instance", "status", "method", "backend", "objective_kind", "contiguity",
                  "stages", "objective", "bound", "gap", "runtime_s", "stats", "verified", "message", "notes",
                  "backward", "overrides")

#: the fields of those that a check of the plan reads (what to check, and the claims it compares): a field alike
#: one of them is refused as its misspelling, which, ignored, would have the plan checked for something else
#: (``contiguty: "stages"``: a plan of class ``none`` found valid)
READ_FIELDS = ("format", "maxLoad", "instance", "status", "objective_kind", "contiguity", "stages", "objective",
               "bound", "verified", "backward", "overrides")

#: the fields of a device entry (``devices``, ``fpgas``, ``cpus``); others are ignored, but a misspelling
#: of one of these is refused
DEVICE_FIELDS = ("type", "load", "memory", "nodes", "calls", "b_tasks", "w_tasks")


def refuse_misspelt_device_fields(raw: list, key: str) -> None:
    """Refuse a misspelt field (:mod:`placement.misspelling`) in the device entries ``raw`` of the plan
    document's field ``key``: a ``call`` or ``w_task`` ignored would run another schedule than the file's."""
    misspelt = misspelt_field(raw, DEVICE_FIELDS)
    if misspelt is not None:
        k, field, meant = misspelt
        raise InvalidPlanError(f"{key}[{k}]: {misspelling_message(field, meant)}")


#: the statuses of a solve that found no plan, as a plan document records them
NO_PLAN_STATUSES = ("infeasible", "no_solution")


def _a_plan(data: dict, plan: Plan) -> Plan:
    """``plan``, unless it places no node and the document records a solve that found none (``solve --json``
    of an infeasible instance): that is no plan to check or run, and is refused as such."""
    status, message = data.get("status"), data.get("message")
    if status in NO_PLAN_STATUSES and not any(device.nodes for device in plan.devices):
        said = f" ({message})" if isinstance(message, str) and message else ""
        raise InvalidPlanError(f"it holds no plan: the solve that wrote it ended {status!r}{said}")
    return plan


def _device_list(raw: Any, key: str, type_name: str | None) -> tuple[DeviceAssignment, ...]:
    """The devices of one list field; ``type_name`` None means each entry names its own ``type``."""
    if not isinstance(raw, list):
        raise InvalidPlanError(f"field {key!r} must be an array, got {json_type_name(raw)}")
    refuse_misspelt_device_fields(raw, key)
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
        devices.append(DeviceAssignment(kind, node_ids(dev["nodes"], f"{where}.nodes"),
                                        _calls(dev.get("calls"), f"{where}.calls"),
                                        *(node_ids(dev.get(f, []) if dev.get(f) is not None else [], f"{where}.{f}")
                                          for f in ("b_tasks", "w_tasks"))))
    return tuple(devices)


def _calls(raw: Any, where: str) -> tuple[tuple[int, ...], ...]:
    """The optional ``calls`` field of a device: an array of arrays of node ids (absent or null: none)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidPlanError(f"{where}: must be an array of calls (arrays of node ids), got {json_type_name(raw)}")
    return tuple(node_ids(call, f"{where}[{k}]") for k, call in enumerate(raw))


class PlanFile(dict):
    """The decoded document of a plan file, read once, that keeps the file's ``path``: the readers of this
    module (and :func:`placement.verify`, :func:`placement.simulate`, :func:`placement.split`) take it as
    they take the document, and name the file in their errors and notes as they do for the path itself."""

    def __init__(self, path: str | Path, document: dict) -> None:
        super().__init__(document)
        self.path = os.fspath(path)


def refuse_json_text(plan: object, parameter: str = "plan") -> None:
    """Refuse ``plan`` where it is JSON text rather than the name of a file (no file of that name, and it opens an
    object or an array), as :func:`placement.load` refuses an instance given so: reading it as a file name only
    said there was no such file."""
    if isinstance(plan, str) and plan.lstrip()[:1] in ("{", "[") and not os.path.exists(plan):
        raise InvalidParameterError(parameter, "is JSON text, not the name of a plan file; pass the decoded "
                                               "document (json.loads of the text) or the path of a file holding it")


def read_plan_file(plan: object) -> object:
    """``plan`` read into a :class:`PlanFile` where it is the path of a plan file (a regular file, or a pipe,
    which can be read once); anything else as it is. A document that is no JSON object is refused as
    :func:`read_plan` refuses it."""
    if not isinstance(plan, (str, PathLike)):
        if isinstance(plan, Mapping):   # a decoded document: refused where a file holding it is
            refuse_huge_integers(plan, InvalidPlanError)
        return plan
    plan = os.fspath(plan)
    document = load_json(plan, InvalidPlanError)    # no number in it may be NaN or infinite
    if not isinstance(document, dict):
        raise InvalidPlanError(f"{plan}: the plan must be a JSON object, got {json_type_name(document)}")
    return PlanFile(plan, document)


def plan_source(plan: object) -> str | None:
    """The file ``plan`` was read from (a path, or a :class:`PlanFile`), to name in messages; else ``None``."""
    if isinstance(plan, PlanFile):
        return plan.path
    return os.fspath(plan) if isinstance(plan, (str, PathLike)) else None


def read_plan(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> Plan:
    """Read a plan file (Tarnawski's format or ours); errors name the file. A file longer than
    ``max_bytes`` raises :class:`placement.errors.LimitExceededError`, a ``path`` that is no file path an
    :class:`InvalidParameterError`."""
    from placement.whole_file import text_path

    data = load_json(text_path(path, "path"), InvalidPlanError, max_bytes)    # no number may be NaN or infinite
    try:
        return parse_plan(data)
    except InvalidPlanError as exc:
        raise InvalidPlanError(f"{path}: {exc}") from None


#: how far a plan document's claimed figure may lie from the verified one before a note says so: relative,
#: and absolute for figures near 0
CLAIM_REL, CLAIM_ABS = 1e-9, 1e-12


def refutes(verified: float, claim: float) -> bool:
    """Whether the ``verified`` figure refutes a document's ``claim`` of it (beyond :data:`CLAIM_REL`)."""
    return not math.isclose(claim, verified, rel_tol=CLAIM_REL, abs_tol=CLAIM_ABS)


@dataclass(frozen=True)
class FileClaims:
    """What a plan file claims that verification refutes: ``value``, the objective value it claims where the
    verified one differs by more than 1e-9 relative; ``instance``, the instance it names (field
    ``instance``) where that is not the instance it was checked against; ``unreadable``, the field
    that holds the claimed value where that is not a number (so nothing could be checked), or
    ``objective_kind`` where that names no objective. ``None`` where nothing is refuted."""

    value: float | None = None
    instance: str | None = None
    unreadable: str | None = None


def refuted_claims(path: str | Path | dict, objective: str, value: float | None, instance_name: str) -> FileClaims:
    """The claims of the plan file at ``path`` (or of the document read from it) that a verification
    against the instance named ``instance_name`` refutes (:class:`FileClaims`), given the verified
    ``value`` of ``objective``.

    The claimed values are the file's ``objective`` where its ``objective_kind`` (by default ``throughput``,
    as the plan is checked) is that objective (a solved plan of ours) and, for ``throughput``, its ``maxLoad``
    (Tarnawski's format, which plans of ours also write); the first one refuted is returned. A negative value,
    such as Tarnawski's ``-1``, means "not computed". The instance is named by a plan of ours."""
    data = path if isinstance(path, dict) else load_json(path, InvalidPlanError)
    if not isinstance(data, dict):
        return FileClaims()
    from placement.problem.objectives import OBJECTIVES

    other = made_for_another(data, instance_name)
    kind = claimed_objective(data)
    if not (isinstance(kind, str) and kind in OBJECTIVES):
        return FileClaims(None, other, "objective_kind")
    fields = ["objective"] if kind == objective else []
    if kind == objective == "throughput" and "maxLoad" in data:
        fields.append("maxLoad")
    for field in fields:
        raw = data.get(field)
        claim = recorded_figure(raw)
        if raw is not None and (claim is None or not math.isfinite(claim)):   # a file's are finite (load_json)
            return FileClaims(None, other, field)
        claim = claim if claim is not None and claim >= 0 else None
        if claim is not None and value is not None and refutes(value, claim):
            return FileClaims(claim, other, None)
    return FileClaims(None, other, None)


def recorded_figure(found: object) -> float | None:
    """A figure a plan document records (a claimed value, bound or load) as a float, where it is a real number,
    Python's or numpy's, as node ids are read (a bool or a string is none); else ``None``."""
    if isinstance(found, bool) or not isinstance(found, numbers.Real):
        return None
    return float(found)


def claimed_objective(record: dict) -> Any:
    """The objective a plan document records its claims for: its ``objective_kind``, ``throughput`` where it
    has none (as a plan is checked by default)."""
    return record.get("objective_kind", "throughput")


def load_notes(record: dict, source: str, loads: Mapping[int, float]) -> list[str]:
    """What a plan document ``record`` (``source``: "the plan file" or "the result") claims of each device's load
    that the verified ``loads`` (by position in the plan's devices) refute beyond the tolerance of the claimed
    value (1e-9 relative), one sentence per device: the ``load`` of its ``devices`` entry, and of its ``fpgas`` or
    ``cpus`` entry (Tarnawski's fields: where ``devices`` is there too, the accelerators and the CPUs among them, in
    order; else the ``fpgas`` and then the ``cpus``). A negative load (Tarnawski's ``-1``: not computed), one that
    is no finite number and a device the check did not report are no claims."""
    devices = record.get("devices")
    fpgas, cpus = (record.get(field) if isinstance(record.get(field), list) else [] for field in ("fpgas", "cpus"))
    entries: list[tuple[str, Any, int]] = []
    if isinstance(devices, list):
        entries += [(f"device {k}", entry, k) for k, entry in enumerate(devices)]
        typed = {kind: [k for k, entry in enumerate(devices) if isinstance(entry, dict) and entry.get("type") == kind]
                 for kind in (ACCELERATOR, CPU)}
    else:
        typed = {ACCELERATOR: list(range(len(fpgas))), CPU: list(range(len(fpgas), len(fpgas) + len(cpus)))}
    for field, listed, kind in (("fpgas", fpgas, ACCELERATOR), ("cpus", cpus, CPU)):
        entries += [(f"{field}[{i}] (device {k})", entry, k) for i, (entry, k) in enumerate(zip(listed, typed[kind]))]
    notes, noted = [], set()
    for name, entry, k in entries:
        claim = recorded_figure(entry.get("load")) if isinstance(entry, dict) else None
        if k not in loads or claim is None or not math.isfinite(claim) or claim < 0:
            continue
        if refutes(loads[k], claim) and (k, claim) not in noted:
            noted.add((k, claim))   # a devices entry and its Tarnawski twin that claim the same: one note
            notes.append(f"{source} records load {claim:.10g} for {name}; the verified load is {loads[k]:.10g}")
    return notes


def record_notes(plan: object, objective: str, value: float | None, instance_name: str, non_empty: int,
                 otherwise: tuple[str, str] | None = None,
                 loads: Mapping[int, float] | None = None) -> list[str]:
    """What a solved plan's record (a plan file, a plan document or a :class:`placement.Result`) claims that a
    verification of ``objective`` against the instance named ``instance_name`` refutes or cannot check, one
    sentence each: its claimed value (:func:`refuted_claims`; ``value`` is the verified value, ``None`` for an
    invalid plan, whose value is no verdict on the claim), a lower bound above that value, the instance it was
    made for, the number of non-empty stages it was solved into exactly against the plan's ``non_empty``
    devices, and each device's load against the verified ``loads`` where given (:func:`load_notes`). Where the
    check ran under another backward model than the plan was solved under (``otherwise``:
    the record's settings and the check's, in words), its value and bound are no claims about the check's: a
    note says so instead."""
    if isinstance(plan, (str, PathLike)):
        try:
            record: Any = load_json(os.fspath(plan), InvalidPlanError)
        except PlacementError:
            return []
        source = "the plan file"
    elif isinstance(plan, dict):
        record, source = plan, "the plan file"
    elif hasattr(plan, "to_json") and hasattr(plan, "objective"):   # a Result
        record, source = plan.to_json(), "the result"
    else:
        return []
    if not isinstance(record, dict) or not any(key in record for key in PLACING_FIELDS):
        return []
    from placement.problem.objectives import OBJECTIVES

    claims = refuted_claims(record, objective, None if otherwise else value, instance_name)
    notes = []
    if otherwise is not None:
        value = None
        notes.append(f"{source} was solved with {otherwise[0]}, and checked with {otherwise[1]} as asked: its "
                     "claimed value was not compared")
    if claims.value is not None:
        notes.append(f"{source} claims {objective} {claims.value:.10g}; the verified value is {value:.10g}")
    if loads is not None and otherwise is None:
        notes += load_notes(record, source, loads)
    if claims.unreadable == "objective_kind":
        notes.append(f"{source}'s 'objective_kind' names no objective ({', '.join(OBJECTIVES)}); checked for "
                     f"{objective}, and its claimed value was not checked")
    elif claims.unreadable is not None:
        notes.append(f"{source}'s {claims.unreadable!r} is not a number; its claimed value was not checked")
    bound = recorded_figure(record.get("bound"))
    if (claimed_objective(record) == objective and value is not None and bound is not None
            and bound > value * (1 + CLAIM_REL) + CLAIM_ABS):
        notes.append(f"{source} claims a lower bound of {bound:.10g}, above the verified value {value:.10g}")
    if claims.instance is not None:
        notes.append(made_for_text(source, claims.instance, instance_name))
    stages = recorded_stages(record)
    if stages is not None and stages != non_empty:
        notes.append(f"{source} records a solve into exactly {stages} non-empty stage{'s' if stages > 1 else ''}; "
                     f"the plan has {non_empty} non-empty device{'s' if non_empty != 1 else ''}")
    garbled = garbled_stages(record)
    if garbled is not None:
        try:
            shown = json.dumps(garbled, default=repr)
        except TypeError:   # a key JSON has no form for (a tuple), which no default is asked about
            shown = json.dumps(repr(garbled))
        notes.append(f"{source}'s 'stages' is no positive integer: {shown[:40]}; the "
                     "number of non-empty devices was not checked against it")
    return notes


def _recorded(plan: object, field: str, attribute: str) -> Any:
    """What a solved plan records under ``field`` (a plan document or plan file) or ``attribute`` (a
    :class:`placement.Result`); ``None`` where it records nothing, and for a file that cannot be read or a
    document that places nothing, so is no plan (reading the plan itself reports what is wrong with it)."""
    if isinstance(plan, (str, PathLike)):
        try:
            plan = load_json(os.fspath(plan), InvalidPlanError)
        except PlacementError:
            return None
        if not isinstance(plan, dict):
            return None
    if isinstance(plan, dict):
        return plan.get(field) if any(key in plan for key in PLACING_FIELDS) else None
    return getattr(plan, attribute, None)


def recorded_objective(plan: object) -> str | None:
    """The objective a solved plan records it was solved for (``objective_kind`` of a plan document or
    file, or a :class:`placement.Result`'s ``objective``), where it records a known one; else ``None``."""
    from placement.problem.objectives import OBJECTIVES

    kind = _recorded(plan, "objective_kind", "objective")
    return kind if isinstance(kind, str) and kind in OBJECTIVES else None


def recorded_contiguity(plan: object) -> str | None:
    """The contiguity class a solved plan records it was solved in (``contiguity`` of a plan document
    or file, or a :class:`placement.Result`'s), where it records a known one; else ``None``."""
    from placement.verification.evaluate import CONTIGUITY_CLASSES

    found = _recorded(plan, "contiguity", "contiguity")
    return found if isinstance(found, str) and found in CONTIGUITY_CLASSES else None


def recorded_calls(plan: object) -> int | None:
    """The most calls per accelerator a solved latency plan was verified with (``verified.calls`` of a
    plan document or file), where it records a positive count; else ``None``."""
    return positive_count(_recorded_calls(plan))


def garbled_calls(plan: object) -> object | None:
    """What a solved plan records as its call limit where that is no positive integer (a value to name in a
    note); ``None`` where it records a count or nothing."""
    found = _recorded_calls(plan)
    return None if found is None or positive_count(found) is not None else found


def _recorded_calls(plan: object) -> object | None:
    verified = _recorded(plan, "verified", "verification")
    if isinstance(verified, dict):
        return verified.get("calls")
    return getattr(verified, "calls", None)


def made_for_another(plan: object, instance_name: str) -> str | None:
    """The instance a plan of ours records it was made for (``instance``), where that is not
    ``instance_name``; else ``None``. An unnamed instance (``""``: one loaded from a mapping) names
    nothing to compare with, so no record is refuted by it."""
    return another_name(_recorded(plan, "instance", "instance"), instance_name)


def made_for_text(what: str, other: str, instance_name: str) -> str:
    """What a note says of ``what`` (``the plan``, ``the plan file``, ``the split``) made for the instance named
    ``other`` (:func:`made_for_another`) and checked on the one named ``instance_name``."""
    return f"{what} was made for instance {other!r}, not {instance_name!r}"


def another_name(named: object, instance_name: str) -> str | None:
    """``named``, the instance a record says it was made for, where it is a name and not ``instance_name``;
    else ``None`` (an unnamed instance names nothing to compare with). Names are compared as text (Unicode
    canonical equivalence, NFC): a file name written with a combining accent, as macOS stores it, names the
    instance its precomposed spelling names."""
    if not (isinstance(named, str) and named and instance_name):
        return None
    same = unicodedata.normalize("NFC", named) == unicodedata.normalize("NFC", instance_name)
    return None if same else named


def recorded_stages(plan: object) -> int | None:
    """The number of non-empty stages a plan was solved to have exactly (``stages`` of a plan document or
    file, or a :class:`placement.Result`'s), where it records a positive count; else ``None``."""
    return positive_count(_recorded(plan, "stages", "stages"))


def garbled_stages(plan: object) -> object | None:
    """What a solved plan records as its stage count where that is no positive integer (a value to name in
    a note); ``None`` where it records a count or nothing."""
    found = _recorded(plan, "stages", "stages")
    return None if found is None or positive_count(found) is not None else found


def positive_count(found: object) -> int | None:
    """A recorded value as a positive integer, where it is one (:func:`whole_number`); else ``None``."""
    count = whole_number(found)
    return count if count is not None and count >= 1 else None


def whole_number(found: object) -> int | None:
    """A recorded value as an integer, where it is one (an integer, or a number with no fraction up to 2^53
    in size, ``2.0``, read as that integer, as node ids are; a bool or a string is none); else ``None``."""
    if isinstance(found, bool) or not isinstance(found, numbers.Real):
        return None
    if not isinstance(found, numbers.Integral) and not (
            math.isfinite(found) and float(found).is_integer() and abs(found) <= 2.0 ** 53):
        return None
    return int(found)


def garbled_contiguity(plan: object) -> object | None:
    """What a solved plan records as its contiguity class where that is no class (a value to name in a
    note); ``None`` where it records a class or nothing."""
    from placement.verification.evaluate import CONTIGUITY_CLASSES

    found = _recorded(plan, "contiguity", "contiguity")
    return None if found is None or (isinstance(found, str) and found in CONTIGUITY_CLASSES) else found


def unread_contiguity_note(source: str, garbled: object) -> str:
    """The note on a contiguity class ``garbled`` that a plan's record (``source``: "the plan file", "the
    result") gives and that names no class, which the check then takes as ``none``."""
    from placement.verification.evaluate import CONTIGUITY_CLASSES

    return (f"{source}'s 'contiguity' names no class ({', '.join(CONTIGUITY_CLASSES)}): "
            f"{json.dumps(garbled, default=repr)[:40]}; checked for contiguity none")


def recorded_objective_refusal(problem: Any, objective: str) -> str | None:
    """Why ``problem`` cannot take ``objective``, the objective a plan records it was solved for, as
    words about the plan (``records a solve for throughput-gpipe, which is for training graphs; ...``);
    ``None`` where it can."""
    from placement.errors import InvalidParameterError
    from placement.problem.objectives import check_objective

    try:
        check_objective(problem, objective)
    except InvalidParameterError as exc:
        return f"records a solve for {objective}, which {exc.detail.removeprefix(repr(objective) + ' ')}"
    return None


def plan_error(plan: object, message: str) -> InvalidPlanError:
    """The :class:`InvalidPlanError` of ``message`` about ``plan``, which names the plan's file where it is one
    (as the reader's errors do)."""
    source = plan_source(plan)
    return InvalidPlanError(f"{source}: {message}" if source is not None else message)


def recorded_backward(plan: object) -> dict[str, Any]:
    """The ``backward`` record of a split-backward plan (``{"mode": "split", "w_placement",
    "inter_layer", "w_share"}``) where the plan has one: a :class:`placement.Result`'s ``backward``,
    or that section of a plan document or plan file; ``{}`` otherwise. A plan that places B or W
    tasks (``b_tasks``, ``w_tasks``) is a split-backward plan whatever it records: its mode is then
    ``split``. :class:`InvalidPlanError` for a mode other than ``joint`` and ``split``, and for a
    record of a joint solve beside B or W tasks (which of the two was meant is not clear)."""
    backward = _recorded(plan, "backward", "backward")
    if backward is not None and not isinstance(backward, Mapping):
        raise plan_error(plan, f"the plan's backward record must be an object, not {json_type_name(backward)}")
    record = dict(backward) if backward is not None else {}
    mode = record.get("mode")
    if mode is not None and mode not in ("joint", "split"):
        raise plan_error(plan, f"the plan's backward record has mode {json_value_text(mode)}; it is 'joint' or "
                               "'split'")
    try:
        tasks = any(d.b_tasks or d.w_tasks for d in as_plan(plan).devices)
    except PlacementError:   # reading the plan itself reports what is wrong with it
        tasks = False
    if tasks:
        if mode == "joint":
            raise plan_error(plan, "the plan places b_tasks or w_tasks, as a split-backward plan does, but its "
                                   "backward record says mode 'joint'")
        record["mode"] = "split"
    return record


#: the device overrides a solve records (``Result.overrides``), by the keyword that gives them
OVERRIDES = ("accelerators", "cpus", "memory")


def recorded_overrides(plan: object) -> dict[str, Any]:
    """The device overrides a solved plan records it was solved with (``accelerators``, ``cpus``,
    ``memory``: a :class:`placement.Result`'s ``overrides``, or that section of a plan document or plan
    file), those that are well-formed (counts non-negative integers, memory a non-negative number);
    ``{}`` where it records none."""
    return read_overrides(plan)[0]


def read_overrides(plan: object) -> tuple[dict[str, Any], list[str]]:
    """The well-formed overrides of :func:`recorded_overrides`, and what the record holds besides (each
    as the file writes it, ``'cpus': -1``, not as a parameter given, or the whole record where it is no
    object), from one reading of the plan."""
    record = _recorded(plan, "overrides", "overrides")
    if record is None:
        return {}, []
    if not isinstance(record, Mapping):
        return {}, [json_value_text(record)]
    found = {}
    for name in OVERRIDES:
        value = record.get(name)
        if name != "memory":   # a device count, read as the recorded stage count is
            value = whole_number(value)
        else:
            value = recorded_figure(value)
            value = value if value is not None and math.isfinite(value) else None
        if value is not None and value >= 0:
            found[name] = value
    return found, [f"{name!r}: {json_value_text(value)}" for name, value in record.items() if name not in found]


def plan_document(plan: Plan) -> dict[str, Any]:
    """A bare plan as a document :func:`parse_plan` reads back: its devices in order, with their calls.

    A solved plan is written by :meth:`placement.Result.to_json`, which adds the verified loads and
    the solver's claims; this is for plans that were never solved (a split given by hand).
    """
    devices = []
    for dev in plan.devices:
        entry: dict[str, Any] = {"type": dev.type, "nodes": list(dev.nodes)}
        if dev.calls:
            entry["calls"] = [list(call) for call in dev.calls]
        if dev.b_tasks or dev.w_tasks:
            entry.update(b_tasks=list(dev.b_tasks), w_tasks=list(dev.w_tasks))
        devices.append(entry)
    return {"format": FORMAT, "devices": devices}


def as_plan(plan: object, parameter: str = "plan") -> Plan:
    """A :class:`Plan` from what callers hold: a Plan, a :class:`placement.Result` or its ``plan`` (the
    stages), a decoded plan document (dict), or the path of a plan file (either format of this module).
    Raises :class:`InvalidParameterError` naming ``parameter`` (the caller's name for it) for anything
    else."""
    from placement.result import Result, Stage, plan_of_stages

    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, (tuple, list)) and all(isinstance(s, Stage) for s in plan):   # () too: a Result's, planless
        return plan_of_stages(plan)
    if isinstance(plan, Result) and plan.status in NO_PLAN_STATUSES and not any(s.nodes for s in plan.plan):
        said = f" ({plan.message})" if plan.message else ""
        raise InvalidPlanError(f"the Result holds no plan: its solve ended {str(plan.status)!r}{said}")
    to_plan = getattr(plan, "to_plan", None)
    if callable(to_plan):
        return to_plan()
    if isinstance(plan, (str, PathLike)):
        refuse_json_text(plan, parameter)
        return read_plan(os.fspath(plan))
    if isinstance(plan, PlanFile):   # its errors name the file, as read_plan's do
        try:
            return parse_plan(plan)
        except InvalidPlanError as exc:
            raise InvalidPlanError(f"{plan.path}: {exc}") from None
    if isinstance(plan, dict):
        return parse_plan(plan)
    raise InvalidParameterError(parameter, f"must be a Plan, a Result or its plan, a plan document (dict) or a plan "
                                f"file path, not {type(plan).__name__}")
