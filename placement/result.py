"""What the public API returns: a verified :class:`Result` and the evaluator's :class:`Verification`.

A :class:`Result` is the answer of :func:`placement.solve`: the status (a proof word, see
:class:`Status`), the plan's stages in pipeline order, the value *as the independent
evaluator computed it*, the solver's proven bound and the relative gap, and the
evaluator's report. :meth:`Result.to_json` writes the plan file format
``placement-plan/1``, a superset of the plan format of Tarnawski et al. (``maxLoad``,
``fpgas``, ``cpus``), and :meth:`Result.from_json` reads it back: the round trip keeps every
field but the evaluator's per-device detail used by renderers.

This module holds data only; it imports neither solvers nor the evaluator.
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from placement.errors import InvalidPlanError
from placement.jsonfile import json_type_name, json_value_text, strict_json
from placement.plan import DeviceAssignment, Plan

PLAN_FORMAT = "placement-plan/1"
_ACCELERATOR, _CPU = "accelerator", "cpu"   # the two types of the Tarnawski plan fields


class Status(enum.StrEnum):
    """The answer's status.

    ``optimal``: a plan and a proof that none is better (the DP, or a solver whose incumbent is
    the verified value of its plan and whose proven bound meets it; a heuristic never says so). ``feasible``: a verified plan, with ``bound`` and ``gap``, when a
    limit stopped the search or the method is a heuristic. ``infeasible``: a proof that no plan
    satisfies the constraints. ``no_solution``: no plan, and no proof that none exists (a limit
    stopped the search first, or the method's plan failed verification).
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"


@dataclass(frozen=True)
class Stage:
    """One device of a plan: its type, the node ids it holds, and its verified load and memory.

    ``calls`` (latency objective) splits ``nodes`` into calls the device runs in this order;
    empty means one call holding every node. ``b_tasks`` / ``w_tasks`` (split-backward plans): the
    backward nodes whose B / W task runs here (``nodes`` then places the layers).
    """

    device_type: str
    nodes: tuple[int, ...]
    load: float
    memory: float = 0.0
    calls: tuple[tuple[int, ...], ...] = ()
    b_tasks: tuple[int, ...] = ()
    w_tasks: tuple[int, ...] = ()


def plan_of_stages(stages: tuple[Stage, ...] | list[Stage]) -> Plan:
    """The plan whose devices are ``stages`` (a :attr:`Result.plan`), as the evaluator and the simulator
    take it."""
    return Plan(tuple(DeviceAssignment(s.device_type, s.nodes, s.calls, s.b_tasks, s.w_tasks) for s in stages))


@dataclass(frozen=True)
class Verification:
    """The independent evaluator's verdict on a plan, under one objective and contiguity class.

    ``value`` is the objective the evaluator computed (max load for ``throughput``, max forward
    plus max backward load for ``throughput-gpipe``, the single-sample finish time for
    ``latency``); ``max_load`` the largest device load; ``violations`` one line each (none:
    ``valid``); ``finest_class`` the smallest contiguity class the plan belongs to; ``calls``
    the call limit per accelerator that was checked (latency, ``None``: none); ``ledger``
    whether the HyPar-style communication ledger agrees with the communication charged in the
    loads (``None`` where it was not run, or where nothing disagrees but the instance gives no
    tensor sizes to check against). ``notes`` are findings that do not make the plan invalid (a
    training pipeline whose devices' backward calls wait for each other in a cycle; what the plan's
    record claims that the check refutes).
    ``report`` carries the evaluator's full report for renderers; it is not written to JSON.
    """

    valid: bool
    objective: str
    contiguity: str
    value: float | None
    max_load: float | None
    violations: tuple[str, ...] = ()
    finest_class: str | None = None
    inferred: tuple[int, ...] = ()
    calls: int | None = None
    ledger: bool | None = None
    notes: tuple[str, ...] = ()
    report: Any = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The verdict as strict JSON (non-finite numbers as ``null``)."""
        return strict_json({
            "valid": self.valid, "objective": self.objective, "contiguity": self.contiguity,
            "value": self.value, "max_load": self.max_load, "violations": list(self.violations),
            "finest_class": self.finest_class, "inferred": list(self.inferred), "calls": self.calls,
            "ledger_agrees": self.ledger, "notes": list(self.notes)})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Verification":
        """Read :meth:`to_json`'s output back (``report`` is ``None``). Every verdict records ``valid``,
        ``objective`` (one of the objectives), ``contiguity``, ``value`` and ``max_load`` (numbers, never negative;
        ``null`` only in an invalid verdict); a verdict ``valid`` that lists violations contradicts itself and is
        refused."""
        from placement.io.plans import node_ids
        from placement.jsonfile import json_type_name
        from placement.problem.objectives import OBJECTIVES

        _require_object(data, "verified")
        violations, notes = (_array(data, key, "verified", "an array of strings") for key in ("violations", "notes"))
        for key, value in (("violations", violations), ("notes", notes)):
            if not all(isinstance(item, str) for item in value):
                raise InvalidPlanError(f"verified.{key}: must be an array of strings, got an array holding "
                                       f"{json_type_name(next(i for i in value if not isinstance(i, str)))}")
        valid, ledger = data.get("valid"), data.get("ledger_agrees")
        if not isinstance(valid, bool):
            raise InvalidPlanError(f"verified.valid: must be true or false, got {_found(data, 'valid')}")
        objective = data.get("objective")
        if not isinstance(objective, str) or objective not in OBJECTIVES:
            raise InvalidPlanError(f"verified.objective: must be one of {', '.join(map(repr, OBJECTIVES))}, got "
                                   + _found(data, "objective"))
        if not isinstance(data.get("contiguity"), str):
            raise InvalidPlanError(f"verified.contiguity: must be a string, got {_found(data, 'contiguity')}")
        if ledger is not None and not isinstance(ledger, bool):
            raise InvalidPlanError("verified.ledger_agrees: must be true, false or null, got "
                                   + json_value_text(ledger))
        if valid and violations:   # the evaluator's verdict is valid exactly where it lists no violation
            raise InvalidPlanError(f"verified.valid is true, but verified.violations lists {len(violations)}: a "
                                   "verdict is valid where it finds none")
        value, max_load = (_number(data.get(key), f"verified.{key}") for key in ("value", "max_load"))
        for key, found in (("value", value), ("max_load", max_load)):
            if valid and found is None:   # the evaluator values every plan it finds valid
                raise InvalidPlanError(f"verified.{key}: must be a number in a valid verdict, got {_found(data, key)}")
        return cls(valid=valid, objective=objective, contiguity=data["contiguity"], value=value, max_load=max_load,
                   violations=tuple(str(v) for v in violations),
                   finest_class=_text(data, "finest_class", "verified.finest_class", None),
                   inferred=node_ids(_array(data, "inferred", "verified", "an array of node ids"),
                                     "verified.inferred"),
                   calls=_count(data.get("calls"), "verified.calls"), ledger=ledger,
                   notes=tuple(str(n) for n in notes))


@dataclass(frozen=True)
class Result:
    """The verified answer of :func:`placement.solve`.

    ``value`` is the evaluator's value of the plan (``None`` without a plan); ``bound`` the
    proven lower bound (``None`` when nothing is proven; equal to ``value`` when ``optimal``);
    ``gap`` the relative gap ``(value - bound) / value`` (``0`` when optimal, ``None`` without a
    plan). ``plan`` holds the stages in pipeline order (empty without a plan). ``verified`` is
    true exactly when a plan was returned and the evaluator accepted it; ``solve`` never returns
    a plan that failed the check.
    """

    status: Status
    value: float | None
    bound: float | None
    gap: float | None
    plan: tuple[Stage, ...]
    method: str
    backend: str | None
    objective: str
    contiguity: str
    runtime_s: float
    stats: Mapping[str, Any] = field(default_factory=dict)
    verification: Verification | None = None
    verified: bool = False
    instance: str = ""
    message: str = ""
    stages: int | None = None
    #: the split-backward model of the plan (``mode``, ``w_placement``, ``inter_layer``, ``w_share``); None: joint
    backward: Mapping[str, Any] | None = None
    #: the device overrides the solve was given (``accelerators``, ``cpus``, ``memory``; None: the instance's
    #: devices), which ``verify`` and ``simulate`` take by default
    overrides: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "plan", tuple(self.plan))
        # as the plan file holds them (JSON has no infinity): a stat that is not finite, as the path bound of a
        # graph no plan fits, is None, and a Result read back from its to_json() equals it
        object.__setattr__(self, "stats", MappingProxyType({k: _finite_or_none(v) for k, v in self.stats.items()}))
        if self.overrides is not None:   # read-only as the stats: verify and simulate take them by default
            object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    def __reduce__(self):  # mapping proxies do not pickle (nor copy.deepcopy): rebuild from plain dicts
        return (type(self), tuple(dict(value) if isinstance(value, MappingProxyType) else value
                                  for value in (getattr(self, member.name) for member in fields(self))))

    def __hash__(self) -> int:   # over the fields that hash (equal Results have equal ones); stats do not
        return hash((self.status, self.value, self.bound, self.plan, self.method, self.backend, self.objective,
                     self.contiguity, self.instance, self.stages))

    @property
    def ok(self) -> bool:
        """A verified plan was found (status ``optimal`` or ``feasible``)."""
        return self.status in (Status.OPTIMAL, Status.FEASIBLE) and self.verified

    @property
    def num_stages(self) -> int:
        """Non-empty stages of the plan."""
        return sum(1 for s in self.plan if s.nodes)

    def to_plan(self) -> Plan:
        """The plan as the evaluator and the simulator take it."""
        return plan_of_stages(self.plan)

    def to_json(self) -> dict[str, Any]:
        """The plan file ``placement-plan/1``: Tarnawski's fields (verified loads; only where every device is an
        accelerator or a CPU, the two types they know) plus ours."""

        def device(s: Stage, typed: bool) -> dict[str, Any]:
            out: dict[str, Any] = {"type": s.device_type} if typed else {}
            out["load"] = s.load
            if typed:
                out["memory"] = s.memory
            out["nodes"] = list(s.nodes)
            if s.calls:
                out["calls"] = [list(c) for c in s.calls]
            if typed and self.backward is not None:
                out.update(b_tasks=list(s.b_tasks), w_tasks=list(s.w_tasks))
            return out

        v = self.verification
        placed = [device(s, True) for s in self.plan]
        data: dict[str, Any] = {"maxLoad": v.max_load if v is not None and placed else None}   # none without a plan
        if all(s.device_type in (_ACCELERATOR, _CPU) for s in self.plan):   # else Tarnawski's fields would omit nodes
            data["fpgas"] = [device(s, False) for s in self.plan if s.device_type == _ACCELERATOR]
            data["cpus"] = [device(s, False) for s in self.plan if s.device_type == _CPU]
        data.update({
            "format": PLAN_FORMAT,
            "devices": placed,
            "instance": self.instance,
            "status": str(self.status),
            "method": self.method,
            "backend": self.backend,
            "objective_kind": self.objective,
            "contiguity": self.contiguity,
            "stages": self.stages,
            "objective": self.value,
            "bound": self.bound,
            "gap": self.gap,
            "runtime_s": self.runtime_s,
            "stats": dict(self.stats),
            "verified": v.to_json() if v is not None else None,
        })
        if self.message:
            data["message"] = self.message
        if self.backward is not None:
            data["backward"] = dict(self.backward)
        if self.overrides:
            data["overrides"] = dict(self.overrides)
        return strict_json(data)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Result":
        """Read a plan file written by :meth:`to_json`; raises :class:`InvalidPlanError` when malformed, when its
        objective, bound and gap contradict each other (the gap is ``(objective - bound) / objective``, 0 where
        optimal), when its Tarnawski fields place the nodes otherwise than ``devices`` (as a plan file read by
        ``verify`` is refused), or when a plan of status ``optimal`` or ``feasible`` places no node. Its
        ``verification`` and loads are the document's record of the check it passed when written; with no
        instance at hand they are not checked again (``placement.verify(instance, result)`` does)."""
        _require_object(data, "the plan")
        from placement.jsonfile import refuse_huge_integers

        refuse_huge_integers(data, InvalidPlanError)   # as a file holding them is refused
        if data.get("format") != PLAN_FORMAT:
            found = "it has no field 'format'" if "format" not in data else \
                f"field 'format' is {json_value_text(data['format'])}"
            raise InvalidPlanError(f"not a {PLAN_FORMAT} document ({found})")
        try:
            status = Status(data.get("status"))
        except ValueError:
            found = "; it is missing" if "status" not in data else f", not {json_value_text(data['status'])}"
            raise InvalidPlanError(f"field 'status' must be one of {', '.join(repr(s.value) for s in Status)}"
                                   f"{found}") from None
        devices = data.get("devices")
        if not isinstance(devices, list):
            raise InvalidPlanError("field 'devices' must be an array")
        from placement.problem.objectives import OBJECTIVES

        kind = data.get("objective_kind", "throughput")
        if kind not in OBJECTIVES:
            raise InvalidPlanError(f"field 'objective_kind' must be one of {', '.join(map(repr, OBJECTIVES))}, "
                                   f"not {json_value_text(kind)}")
        from placement.io.plans import node_ids, parse_plan, read_overrides, refuse_misspelt_device_fields

        refuse_misspelt_device_fields(devices, "devices")
        stages = []
        for k, d in enumerate(devices):
            _require_object(d, f"devices[{k}]")
            where = f"devices[{k}]"
            if "memory" in d and d["memory"] is None:   # to_json writes a typed device's memory, always a number
                raise InvalidPlanError(f"{where}.memory: must be a number (the bytes the device's nodes hold), "
                                       "got null")
            calls = _array(d, "calls", where, "an array of arrays of node ids")
            if not isinstance(d.get("type"), str):
                raise InvalidPlanError(f"{where}.type: must be a string, got "
                                       + ("nothing" if "type" not in d else json_value_text(d["type"])))
            tasks = [node_ids(_array(d, f, where, "an array of node ids"), f"{where}.{f}")
                     for f in ("b_tasks", "w_tasks")]
            try:
                stages.append(Stage(d["type"], node_ids(d["nodes"], f"{where}.nodes"),
                                    _number(d.get("load"), f"{where}.load"),
                                    _number(d.get("memory"), f"{where}.memory") or 0.0,
                                    tuple(node_ids(c, f"{where}.calls[{j}]") for j, c in enumerate(calls)),
                                    *tasks))
            except InvalidPlanError:
                raise
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidPlanError(f"{where}: malformed device entry ({exc})") from None
        has_plan = status in (Status.OPTIMAL, Status.FEASIBLE)
        # what verify and simulate would read ('fpgas' and 'cpus' agree with 'devices'), where there is a plan
        placed = parse_plan(dict(data)).devices if has_plan or devices else ()
        if has_plan and not any(d.nodes or d.calls for d in placed):
            raise InvalidPlanError(f"a plan document of status {status.value!r} must place the instance's nodes, "
                                   "but field 'devices' places none")
        stats = data.get("stats")
        stats = {} if stats is None else stats
        if not isinstance(stats, dict):
            raise InvalidPlanError(f"field 'stats' must be an object, got {json_type_name(stats)}")
        verified = data.get("verified")
        if has_plan and verified is None:   # solve returns a plan only with the verdict of the check it passed
            raise InvalidPlanError(f"field 'verified' must be an object in a plan document of status "
                                   f"{status.value!r} (the verdict of the check its plan passed); "
                                   + ("got null" if "verified" in data else "it is missing"))
        verification = Verification.from_json(verified) if verified is not None else None
        if has_plan and not verification.valid:
            raise InvalidPlanError(f"verified.valid is false in a plan document of status {status.value!r}: a plan "
                                   "that fails the check is no result's plan")
        if verification is not None and verification.objective != kind:
            raise InvalidPlanError(f"verified.objective {verification.objective!r} is not field 'objective_kind' "
                                   f"{kind!r}: a result's verdict is of the objective it was solved for")
        value = _number(data.get("objective"), "field 'objective'")
        if status in (Status.OPTIMAL, Status.FEASIBLE) and value is None:
            found = f"got {json_type_name(data['objective'])}" if "objective" in data else "it is missing"
            raise InvalidPlanError(f"field 'objective' must be a number in a plan document of status "
                                   f"{status.value!r}; {found}")
        bound = _number(data.get("bound"), "field 'bound'")
        if status is Status.OPTIMAL and bound is None:
            found = f"got {json_type_name(data['bound'])}" if "bound" in data else "it is missing"
            raise InvalidPlanError(f"field 'bound' must be a number in a plan document of status 'optimal' (the "
                                   f"proven bound, equal to the objective); {found}")
        if value is not None and bound is not None and bound > value + 1e-9 * max(abs(value), 1.0):
            raise InvalidPlanError(f"field 'bound' ({bound!r}) is above field 'objective' ({value!r}): a lower "
                                   "bound on the objective cannot exceed a plan's value")
        if status is Status.OPTIMAL and bound < value - 1e-9 * max(abs(value), 1.0):
            raise InvalidPlanError(f"field 'bound' ({bound!r}) is below field 'objective' ({value!r}) in a plan "
                                   "document of status 'optimal', whose bound is its objective")
        gap = _number(data.get("gap"), "field 'gap'")
        if value is not None and bound is not None:   # the gap is the objective's and bound's
            derived = 0.0 if status is Status.OPTIMAL or value <= 0 else max(0.0, (value - bound) / value)
            if gap is None:
                raise InvalidPlanError(f"field 'gap' must be a number where fields 'objective' ({value!r}) and "
                                       f"'bound' ({bound!r}) are (their relative gap, {derived!r}); "
                                       + ("got null" if "gap" in data else "it is missing"))
            if not math.isclose(gap, derived, rel_tol=1e-9, abs_tol=1e-9):
                raise InvalidPlanError(f"field 'gap' ({gap!r}) disagrees with fields 'objective' ({value!r}) and "
                                       f"'bound' ({bound!r}), whose relative gap is {derived!r}")
        _check_verified_values(data, verification, value, stages)
        contiguity = _text(data, "contiguity", "field 'contiguity'", "stages")   # a class verify notes if unknown
        overrides, unread = read_overrides(data)
        if unread:   # as verify and simulate refuse them: a Result must not drop what the document records
            raise InvalidPlanError(f"the plan's device overrides cannot be read: {', '.join(unread)} (accelerators "
                                   "and cpus are counts, memory a number of bytes, none negative)")
        backward = data.get("backward")
        if backward is not None and not isinstance(backward, dict):
            raise InvalidPlanError(f"field 'backward' must be an object or null, got {json_value_text(backward)}")
        backward = _backward_record(data) or backward
        return cls(status=status, value=value, bound=bound,
                   gap=gap, plan=tuple(stages),
                   method=_text(data, "method", "field 'method'", ""),
                   backend=_text(data, "backend", "field 'backend'", None), objective=kind, contiguity=contiguity,
                   runtime_s=_number(data.get("runtime_s"), "field 'runtime_s'") or 0.0, stats=stats,
                   verification=verification,
                   verified=bool(verification is not None and verification.valid and stages),
                   instance=_text(data, "instance", "field 'instance'", ""),
                   message=_text(data, "message", "field 'message'", ""),
                   stages=_count(data.get("stages"), "field 'stages'"), backward=backward,
                   overrides=overrides or None)


def _require_object(data: Any, where: str) -> None:
    if not isinstance(data, Mapping):
        raise InvalidPlanError(f"{where} must be a JSON object, got {json_type_name(data)}")


def _array(data: Mapping[str, Any], key: str, where: str, what: str) -> list:
    """``data[key]``, an array (empty where absent or null); anything else is an :class:`InvalidPlanError`
    saying that it must be ``what``."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidPlanError(f"{where}.{key}: must be {what}, got {json_type_name(value)}")
    return value


def _number(value: Any, where: str, signed: bool = False) -> float | None:
    """A JSON number as float; ``null`` (how JSON writes infinities and absent values) as ``None``. A number
    that is not finite (``NaN``, which ``json.loads`` decodes) is refused, as a plan file holding one is, and so is
    a negative one unless ``signed`` (times, loads, memory and the values made of them are never negative)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidPlanError(f"{_named(where)} must be a number or null, got {json_value_text(value)}")
    if not math.isfinite(value):
        raise InvalidPlanError(f"{_named(where)} must be a finite number or null (as to_json writes one that is "
                               f"not), got {json_value_text(float(value))}")
    if value < 0 and not signed:
        raise InvalidPlanError(f"{_named(where)} must not be negative, got {json_value_text(value)}")
    return float(value)


def _found(data: Mapping[str, Any], key: str) -> str:
    """``data[key]`` as a message names what it found there: ``nothing`` where the key is missing."""
    return json_value_text(data[key]) if key in data else "nothing"


def _close(a: float, b: float) -> bool:
    """Two recorded values of the same figure agree (to rounding)."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _check_verified_values(data: Mapping[str, Any], verification: Verification | None, value: float | None,
                           stages: list[Stage]) -> None:
    """Refuse a document whose verdict's figures disagree with what it records beside them: the objective (the
    verified value of its plan), the devices' loads (the verdict's max load is the largest) and Tarnawski's
    ``maxLoad`` (that max load; a negative one, as Tarnawski's ``-1``, means not computed)."""
    claimed = _number(data.get("maxLoad"), "field 'maxLoad'", signed=True)
    if verification is None:
        return
    if value is not None and verification.value is not None and not _close(verification.value, value):
        raise InvalidPlanError(f"verified.value ({verification.value!r}) disagrees with field 'objective' "
                               f"({value!r}), the verified value of the plan")
    loads = [stage.load for stage in stages]
    largest = verification.max_load
    if largest is not None and loads and None not in loads and not _close(largest, max(loads)):
        raise InvalidPlanError(f"verified.max_load ({largest!r}) disagrees with the largest load of field "
                               f"'devices' ({max(loads)!r})")
    if claimed is not None and claimed >= 0 and largest is not None and not _close(claimed, largest):
        raise InvalidPlanError(f"field 'maxLoad' ({claimed!r}) disagrees with verified.max_load ({largest!r})")


def _backward_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """The document's split-backward record as verify and simulate read it (:func:`placement.io.plans.
    recorded_backward`: mode ``split`` where the plan places B or W tasks, whatever it records), its options those
    of the split model (:func:`placement.problem.split.split_model`); ``{}`` for a joint plan that records none."""
    from placement.errors import InvalidParameterError
    from placement.io.plans import recorded_backward
    from placement.problem.split import split_model

    record = recorded_backward(dict(data))
    if record.get("mode") == "split":
        try:
            split_model(**{key: record[key] for key in ("w_share", "w_placement", "inter_layer")
                           if record.get(key) is not None})
        except InvalidParameterError as exc:
            raise InvalidPlanError(f"the plan's backward record: {exc}") from None
    return record


def _finite_or_none(value: Any) -> Any:
    """``value`` with every float in it that is not finite (in dicts and lists too) as ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value


def _text(data: Mapping[str, Any], key: str, where: str, default: str | None) -> str | None:
    """``data[key]``, a string (``default`` where absent, or null where ``default`` is ``None``)."""
    value = data.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, str):
        raise InvalidPlanError(f"{_named(where)} must be a string, got {json_value_text(value)}")
    return value


def _count(value: Any, where: str) -> int | None:
    """A positive integer, read as the plan-file reader reads a recorded count
    (:func:`placement.io.plans.positive_count`), or ``None`` for null."""
    from placement.io.plans import positive_count

    if value is None:
        return None
    count = positive_count(value)
    if count is None:
        raise InvalidPlanError(f"{_named(where)} must be a positive integer or null, got {json_value_text(value)}")
    return count


def _named(where: str) -> str:
    """How a message names a field: ``field 'bound'`` for a top-level one, ``devices[0].load:`` for a nested one
    (as the plan-file reader names them)."""
    return where if where.startswith("field ") else f"{where}:"

