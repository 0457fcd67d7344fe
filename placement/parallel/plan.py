"""Plans with data- and tensor-parallel stages: the data a parallel planner returns.

A :class:`ParallelPlan` is a pipeline of :class:`ParallelStage` s in order (stage 0 first): each
stage is a contiguous node set (a difference of two nested successor-closed sets, as in the
``stages`` contiguity class: no edge goes from a later stage to an earlier one), run by ``d``
data-parallel replicas of ``t`` tensor-parallel devices each, with one TMPC chosen per node
among the node's TMPCs of degree ``t``. The plan also names the schedule whose memory model it
was planned for (:mod:`placement.parallel.schedules`). The plan uses ``Σ d·t`` devices.

This module holds data only (and its JSON form); it neither solves nor evaluates.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from placement.errors import InvalidPlanError
from placement.io.plans import node_ids, positive_count
from placement.jsonfile import NODE_ID_KEY, json_value_text, refuse_huge_integers, refuse_non_string_keys
from placement.misspelling import misspelling_message, misspelt_field
from placement.plan import _ids, typed_sequence
from placement.problem.instance import is_flag

#: the schedules a plan may be planned for (see :mod:`placement.parallel.schedules`)
SCHEDULES = ("piper", "1f1b", "gpipe", "interleaved")
#: the fields of a plan document (:meth:`placement.parallel.result.ParallelResult.to_json` writes them all); the
#: reader ignores other fields (a benchmark's record carries its own) unless they are misspellings of these
DOCUMENT_FIELDS = ("format", "instance", "status", "schedule", "objective", "devices", "memory", "value", "bound",
                   "gap", "timePerBatch", "forwardShare", "devicesUsed", "stages", "megatron", "message", "runtime_s",
                   "chunks")
#: the fields of a stage of a plan document, read as :data:`DOCUMENT_FIELDS` are
STAGE_FIELDS = ("nodes", "d", "t", "tmpcs", "deviceType", "timePerSample", "memory", "inFlight", "group", "chunk")


def _integer(value: object, what: str) -> int:
    """``value`` (an integer of any integer type, not a boolean) as an ``int``; :class:`InvalidPlanError`
    naming ``what`` otherwise. Its range is the evaluator's to judge (a degree below 1 is a violation)."""
    if type(value) is int:
        return value
    if not isinstance(value, numbers.Integral) or is_flag(value):
        raise InvalidPlanError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


@dataclass(frozen=True)
class ParallelStage:
    """One pipeline stage: ``nodes`` (Piper node ids, ascending) on ``d·t`` devices.

    ``d``: data-parallel degree (replicas, each processing its share of the micro-batches);
    ``t``: tensor-parallel degree (devices one replica is split over); ``tmpcs``: node id -> the
    id of the chosen TMPC among the node's TMPCs of degree ``t``; ``device_type``: the name of the
    devices' type (``""``: the instance's one type).
    """

    nodes: tuple[int, ...]
    d: int
    t: int
    tmpcs: Mapping[int, str]
    device_type: str = ""

    def __post_init__(self) -> None:
        # a stage built in code is checked here as ParallelPlan.from_json checks a file's: the evaluator and
        # the simulator would otherwise meet a degree of the wrong kind as a TypeError
        object.__setattr__(self, "nodes", _ids(self.nodes, "a stage's nodes"))
        object.__setattr__(self, "d", _integer(self.d, "a stage's d"))
        object.__setattr__(self, "t", _integer(self.t, "a stage's t"))
        if not isinstance(self.tmpcs, Mapping):
            raise InvalidPlanError(f"a stage's tmpcs must map node ids to TMPC ids (strings), got "
                                   f"{type(self.tmpcs).__name__}")
        tmpcs = {}
        for v, c in self.tmpcs.items():
            if not isinstance(c, str):
                raise InvalidPlanError(f"a stage's tmpcs must map node ids to TMPC ids (strings), got "
                                       f"{type(c).__name__} {c!r}")
            tmpcs[_ids((v,), "a stage's tmpcs")[0]] = c
        object.__setattr__(self, "tmpcs", MappingProxyType(tmpcs))
        if not isinstance(self.device_type, str):
            raise InvalidPlanError(f"a stage's device_type must be a string, got {type(self.device_type).__name__}")

    def __reduce__(self):  # mapping proxies do not pickle
        return (type(self), (self.nodes, self.d, self.t, dict(self.tmpcs), self.device_type))

    def __hash__(self) -> int:
        return hash((self.nodes, self.d, self.t, frozenset(self.tmpcs.items()), self.device_type))

    @property
    def devices(self) -> int:
        """Devices the stage occupies: ``d·t``."""
        return self.d * self.t

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"nodes": list(self.nodes), "d": self.d, "t": self.t,
                               "tmpcs": {str(v): self.tmpcs[v] for v in self.nodes if v in self.tmpcs}}
        if self.device_type:
            doc["deviceType"] = self.device_type
        return doc


@dataclass(frozen=True)
class ParallelPlan:
    """Stages in pipeline order, and the schedule (``piper``, ``1f1b``, ``gpipe`` or ``interleaved``) planned
    for. ``chunks``: model chunks per device group (``v``, interleaved only): stage ``k`` is chunk ``k div S``
    of device group ``k mod S``, ``S = len(stages) / chunks`` (:mod:`placement.parallel.interleaved`)."""

    stages: tuple[ParallelStage, ...]
    schedule: str = "piper"
    chunks: int = 1

    def __post_init__(self) -> None:
        # checked as from_json checks a file: verify took an unknown schedule as valid (with 1F1B's memory)
        object.__setattr__(self, "stages", typed_sequence(self.stages, "stages", ParallelStage))
        if not isinstance(self.schedule, str) or self.schedule not in SCHEDULES:
            raise InvalidPlanError(f"unknown schedule {self.schedule!r} (known: {', '.join(SCHEDULES)})")
        if not isinstance(self.chunks, numbers.Integral) or is_flag(self.chunks) or self.chunks < 1:
            raise InvalidPlanError(f"chunks must be a positive integer, not {self.chunks!r}")
        object.__setattr__(self, "chunks", int(self.chunks))

    @property
    def devices(self) -> int:
        """Devices the plan occupies: ``Σ d·t`` over its stages (over one chunk of each group when interleaved)."""
        return sum(s.devices for s in self.stages[:len(self.stages) // self.chunks])

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schedule": self.schedule, "stages": [s.to_json() for s in self.stages]}
        if self.chunks != 1:
            doc["chunks"] = self.chunks
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "ParallelPlan":
        """Read back :meth:`to_json`; :class:`InvalidPlanError` for a malformed document, or one with a field
        misspelt (:mod:`placement.misspelling`: ``schedul`` ignored would check the plan under another
        schedule)."""
        refuse_huge_integers(doc, InvalidPlanError)   # a decoded document's, as a file's are refused
        refuse_non_string_keys(doc, InvalidPlanError)   # 'tmpcs' keys are matched as text
        # a document without stages is another document (an instance's 'maxDevices' is no misspelt 'devices')
        misspelt = misspelt_field([doc], DOCUMENT_FIELDS if isinstance(doc, Mapping) and "stages" in doc
                                  else ("stages",))
        if misspelt is not None:
            raise InvalidPlanError(misspelling_message(*misspelt[1:]))
        if not isinstance(doc, Mapping) or not isinstance(doc.get("stages"), list):
            raise InvalidPlanError("a parallel plan must be a JSON object with a list 'stages'")
        misspelt = misspelt_field(doc["stages"], STAGE_FIELDS)
        if misspelt is not None:
            raise InvalidPlanError(f"stages[{misspelt[0]}]: {misspelling_message(*misspelt[1:])}")
        schedule = doc.get("schedule", "piper")
        if schedule not in SCHEDULES:
            raise InvalidPlanError(f"unknown schedule {json_value_text(schedule)} (known: {', '.join(SCHEDULES)})")
        chunks = positive_count(doc.get("chunks", 1))
        if chunks is None:
            raise InvalidPlanError(f"chunks must be a positive integer, not {json_value_text(doc['chunks'])}")
        if schedule == "interleaved" and "chunks" not in doc:
            raise InvalidPlanError("an interleaved plan must give 'chunks', its model chunks per device group")
        if schedule == "interleaved" and chunks < 2:
            raise InvalidPlanError(f"an interleaved plan's chunks must be at least 2 (model chunks per device group), "
                                   f"not {chunks}")
        if chunks > 1 and schedule != "interleaved":   # a plan of one chunk per group records none
            said = f"its schedule is {schedule!r}" if "schedule" in doc else "it gives no schedule (read as 'piper')"
            raise InvalidPlanError(f"chunks {chunks} belongs to interleaved plans (model chunks per device group), "
                                   f"and {said}")
        groups = len(doc["stages"]) // chunks if len(doc["stages"]) % chunks == 0 else None
        stages = []
        for k, raw in enumerate(doc["stages"]):
            where = f"stages[{k}]"
            if not isinstance(raw, Mapping):
                raise InvalidPlanError(f"{where} must be a JSON object")
            nodes, tmpcs = raw.get("nodes"), raw.get("tmpcs", {})
            if not isinstance(nodes, list):
                raise InvalidPlanError(f"{where}.nodes must be a list of node ids (integers)")
            nodes = node_ids(nodes, f"{where}.nodes")   # 3.0 is node 3, as an ordinary plan file reads it
            degrees = {}
            for key in ("d", "t"):
                if key not in raw:
                    raise InvalidPlanError(f"{where}: missing field {key!r}")
                degrees[key] = positive_count(raw[key])
                if degrees[key] is None:
                    raise InvalidPlanError(f"{where}.{key} must be a positive integer, not {json_value_text(raw[key])}")
            if not isinstance(tmpcs, Mapping) or not all(isinstance(c, str) for c in tmpcs.values()):
                raise InvalidPlanError(f"{where}.tmpcs must map node ids to TMPC ids (strings)")
            odd = next((v for v in tmpcs if not NODE_ID_KEY.fullmatch(v)), None)
            if odd is not None:   # int() would read '1_0' as 10 and ' 7' as 7, as the instance reader does not
                raise InvalidPlanError(f"{where}.tmpcs: key {json.dumps(odd)} is not a node id (an integer in "
                                       "decimal digits)")
            chosen = {int(v): c for v, c in tmpcs.items()}
            for key in ("group", "chunk"):
                if key not in raw:
                    continue
                if chunks == 1 or not groups:
                    raise InvalidPlanError(f"{where}.{key} belongs to interleaved plans with 'chunks' dividing the "
                                           f"number of stages; this plan has {len(doc['stages'])} stages and "
                                           f"{chunks} chunk{'s' if chunks != 1 else ''}")
                expected = k % groups if key == "group" else k // groups
                value = raw[key]
                if is_flag(value) or not (isinstance(value, int) or isinstance(value, float) and value.is_integer()):
                    raise InvalidPlanError(f"{where}.{key} must be a whole number, not {json_value_text(value)}")
                if value != expected:
                    raise InvalidPlanError(f"{where}.{key} is {json_value_text(raw[key])}, but stage {k} of an "
                                           f"interleaved plan of {len(doc['stages'])} stages in {chunks} chunks is "
                                           f"chunk {k // groups} of device group {k % groups}")
            device_type = raw.get("deviceType", "")
            if not isinstance(device_type, str):
                raise InvalidPlanError(f"{where}.deviceType must be a device type name (a string), "
                                       f"not {json_value_text(device_type)}")
            stages.append(ParallelStage(nodes, degrees["d"], degrees["t"], chosen, device_type))
        return cls(tuple(stages), schedule, chunks)


__all__ = ["DOCUMENT_FIELDS", "SCHEDULES", "STAGE_FIELDS", "ParallelPlan", "ParallelStage"]
