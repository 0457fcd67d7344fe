"""From a plan of an imported model to what pipeline runtimes consume.

An instance made by the importers (:func:`placement.io.torch_export.import_torch`,
:func:`placement.io.onnx_import.import_onnx`) records, per forward node, the module it
belongs to, the modules called once whose call begins at it (``starts``, which hold the node's own module
wherever they hold any, unless that module is called more than once: its ``repeats`` then name it) and the
program's operators it holds (``ops``); node ids follow program order.
A plan in ``stages`` contiguity lists its devices in pipeline order. The *stages* of a plan
are the forward nodes of its devices, in that order (backward nodes go with their forward
mates). Each hand-off form (:data:`FORMATS`) exists only for some plans:

* every form needs a pipeline (no stage reads a node of a later stage) without a CPU stage
  between accelerator stages: no pipeline runtime sends activations from an accelerator
  to a CPU and back (a CPU stage at either end is a stage like the others, for a rank on the host;
  Megatron's layouts, whose stages are GPUs, refuse it);
* :func:`split_spec` — ``{module FQN: SplitPoint.BEGINNING}`` for
  ``torch.distributed.pipelining.pipeline``. It exists when every stage is an interval of
  program order and every stage after the first begins where a module, called once in the
  program, begins its call (an import records as ``repeats`` the modules called more than once
  whose call a node begins: a refusal names them).
* :func:`pipe_split_module` — any other plan (a boundary inside a module, or stages that
  are not intervals of program order): the exported program as a ``GraphModule`` whose
  operators are reordered stage by stage (a topological order, since stages form a chain
  of ideals) with a ``pipe_split()`` call between consecutive stages; ``pipeline(gm,
  mb_args)`` splits it there. :func:`pipe_split_ops` lists the operators of each stage.
* for a training graph neither of these two exists where a stage reads a node of a stage two
  or more before it: ``pipeline()`` runs no backward of such a skip connection
  (:func:`require_neighbour_reads`; :mod:`placement.torch.partition` relays it instead); nor,
  for any graph, where an input of the model is read after the first stage, or by no node
  (:func:`require_inputs_in_first_stage`: ``pipeline()`` passes the model's inputs to stage 0
  only), where the instance records the model's inputs (``about.inputs``, and ``inputs`` per
  node); nor where the model returns a value an earlier stage than the last makes, or one of its inputs
  as given (:func:`require_outputs_in_last_stage`: ``pipeline()`` returns what the last stage computes),
  where the instance records them (``about.outputs``, ``about.returned_inputs``);
* for a training graph, neither a split_spec nor DeepSpeed parts exist where a stage writes in place
  into a value an earlier stage computes (:func:`require_no_writes_into_received`): both runtimes give
  a stage what it receives as leaves that require a gradient, which autograd refuses to write into;
  :func:`pipe_split_module` copies such a value;
* for any graph, neither a split_spec nor DeepSpeed parts exist where a stage sends a value laid out
  non-contiguous (:func:`require_contiguous_sends`): both runtimes send a stage's values as they are, which
  gloo refuses (and NCCL sends DeepSpeed's as their memory lies, out of order); :func:`pipe_split_module` sends
  such a value contiguous;
* :func:`deepspeed_parts` — the ``layers`` and ``parts`` of DeepSpeed's ``PipelineModule``
  (stage ``i`` holds layers ``parts[i]`` to ``parts[i+1] - 1``). The layers are modules,
  never single operators: each stage, an interval of program order, is covered by the
  fewest whole calls of modules called once (outermost first). A stage that holds part of
  a module's call, or an operator outside every module, has no such cover; nor does a plan
  where a layer reads a node of any layer but the one before it (a skip connection across
  layers), since a PipelineModule passes each layer the previous layer's outputs only, nor one
  where a layer takes several tensors (:func:`_require_one_argument`), since it calls each layer
  with one argument.
* :func:`placement.io.megatron.megatron_layout` — Megatron-Core's pipeline layout string,
  counting the repeated blocks the forward calls (:func:`placement.io.megatron.megatron_notes` names the
  entries it did not call when exported, as :func:`deepspeed_notes` does).

Every function raises an :class:`InvalidParameterError` when the plan (or the program)
cannot be expressed in its form; for a plan, the message is ``plan cannot be written as
FORM: REASON`` (:func:`refusal` gives the reason alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, NoReturn, Sequence

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.io.plans import as_plan
from placement.jsonfile import json_type_name, load_json
from placement.plan import Plan
from placement.problem.instance import CPU, Instance

#: what an instance made by the ONNX importer records as its ``about.generator``
ONNX_GENERATOR = "placement.io.onnx_import"
#: The hand-off forms, by their command-line names, with the names their messages use.
FORMATS = {"split-spec": "a split_spec", "deepspeed": "DeepSpeed parts", "megatron": "a Megatron layout",
           "pipe-split": "a pipe_split program"}


@dataclass(frozen=True)
class LayoutNode:
    """A forward node of an imported instance: its module, the modules called once beginning at it, its
    operators, the model's inputs it reads, the modules called more than once beginning at it where the
    instance records them (``repeats``), and those called once beginning at a later operator of it
    (``inner``; a node of a module cut to a few levels)."""

    id: int
    name: str
    module: str
    starts: tuple[str, ...]
    ops: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    repeats: tuple[str, ...] = ()
    inner: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layout:
    """The forward nodes of an imported instance in program order, backward id -> forward id, the
    edges between forward nodes, the model's tensor inputs (``None``: the instance does not
    record them), the trained parameters that several nodes read (training instances), the
    forward edges a gradient flows back along (those whose backward mirror the instance has), and the
    entries of numbered containers (``layers.1``) that the model's forward did not call when exported
    (``uncalled``, the torch importer's ``about.uncalled_entries``; ``None``: the instance does not record them),
    and the reads of values laid out non-contiguous (``non_contiguous``, ``about.non_contiguous_reads``)."""

    nodes: tuple[LayoutNode, ...]
    mates: dict[int, int]
    edges: tuple[tuple[int, int], ...] = ()
    inputs: tuple[str, ...] | None = None
    shared: tuple[tuple[str, tuple[int, ...]], ...] = ()   # trained parameters several nodes read, with them
    gradient_edges: frozenset[tuple[int, int]] = frozenset()
    generator: str = ""        # the importer that made the instance (its about.generator)
    writes: tuple[tuple[int, int], ...] = ()   # (u, v): node v writes in place into a value node u computes
    outputs: tuple[int, ...] | None = None     # the nodes whose values the model returns (None: not recorded)
    returned_inputs: tuple[str, ...] = ()      # the model's inputs it returns as given
    scalar_outputs: tuple[int, ...] = ()       # the nodes whose returned value is 0-dimensional (a loss)
    uncalled: tuple[str, ...] | None = None    # numbered entries forward did not call (None: no record)
    free_reads: tuple[tuple[int, ...], ...] = ()  # (u, readers...): a gradient-free floating value of u they read
    non_contiguous: tuple[tuple[int, int], ...] = ()   # (u, v): v reads a value of u laid out non-contiguous

    def position(self) -> dict[int, int]:
        return {node.id: k for k, node in enumerate(self.nodes)}


def layout_from_instance(data: Any) -> Layout:
    """The :class:`Layout` recorded in an instance made by the importers (its decoded document; ``data`` that is
    no document is an :class:`InvalidParameterError`)."""
    if not isinstance(data, dict):
        raise InvalidParameterError("data", "must be the decoded document of an instance file the model importers "
                                            f"wrote (read_layout reads the file), not {type(data).__name__}")
    if not isinstance(data.get("nodes"), list):
        raise InvalidInstanceError("the instance has no node list")
    forward: list[LayoutNode] = []
    mates: dict[int, int] = {}
    for raw in data["nodes"]:
        if not isinstance(raw, dict) or "id" not in raw:
            raise InvalidInstanceError("the instance has a node without an id")
        if raw.get("isBackwardNode") in (True, 1):
            if "forward" not in raw:
                raise InvalidInstanceError(f"backward node {raw['id']} does not name its forward node; "
                                           "only instances made by the model importers can be exported")
            if isinstance(raw["forward"], bool) or not isinstance(raw["forward"], int):
                raise InvalidInstanceError(f"backward node {raw['id']}: field 'forward' must be a node id")
            mates[raw["id"]] = raw["forward"]
            continue
        if "ops" not in raw or "module" not in raw:
            raise InvalidInstanceError(f"node {raw['id']} has no module metadata; "
                                       "only instances made by the model importers can be exported")
        _check_strings(raw, raw["id"])
        _check_starts(raw, raw["id"])
        name = raw.get("name")   # missing or null: the id, as the instance loader names it
        forward.append(LayoutNode(raw["id"], str(raw["id"] if name is None else name), raw["module"],
                                  tuple(raw.get("starts", ())), tuple(raw["ops"]), tuple(raw.get("inputs", ())),
                                  tuple(raw.get("repeats", ())), tuple(raw.get("inner", ()))))
    forward.sort(key=lambda n: n.id)
    about = data.get("about")
    _check_module_names(forward, about if isinstance(about, dict) else {})
    ids = {node.id for node in forward}
    for backward_id, forward_id in mates.items():
        if forward_id not in ids:
            raise InvalidInstanceError(f"backward node {backward_id}: field 'forward' names {forward_id}, which is no "
                                       "forward node of the instance")
    edges = tuple((e["sourceId"], e["destId"]) for e in data.get("edges", ())
                  if isinstance(e, dict) and e.get("sourceId") in ids and e.get("destId") in ids)
    inputs = about.get("inputs") if isinstance(about, dict) else None
    if inputs is not None and (not isinstance(inputs, list) or not all(isinstance(v, str) for v in inputs)):
        raise InvalidInstanceError("field 'about.inputs' must be an array of strings")
    shared = about.get("shared_parameters", {}) if isinstance(about, dict) else {}
    if not isinstance(shared, dict) or not all(
            isinstance(v, list) and all(isinstance(u, int) and not isinstance(u, bool) for u in v)
            for v in shared.values()):
        raise InvalidInstanceError("field 'about.shared_parameters' must map parameter names to arrays of node ids")
    mate_of = {forward_id: backward_id for backward_id, forward_id in mates.items()}
    mirrored = {(e.get("sourceId"), e.get("destId")) for e in data.get("edges", ()) if isinstance(e, dict)}
    gradient_edges = frozenset((u, v) for u, v in edges if (mate_of.get(v), mate_of.get(u)) in mirrored)
    generator = about.get("generator") if isinstance(about, dict) else None
    writes = _node_pairs(about, "in_place_writes")
    strided = _node_pairs(about, "non_contiguous_reads")
    outputs = about.get("outputs") if isinstance(about, dict) else None
    if outputs is not None and (not isinstance(outputs, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v in ids for v in outputs)):
        raise InvalidInstanceError("field 'about.outputs' must be an array of forward node ids")
    returned_inputs = about.get("returned_inputs", []) if isinstance(about, dict) else []
    if not isinstance(returned_inputs, list) or not all(isinstance(name, str) for name in returned_inputs):
        raise InvalidInstanceError("field 'about.returned_inputs' must be an array of strings")
    scalar = about.get("scalar_outputs", []) if isinstance(about, dict) else []
    if not isinstance(scalar, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v in ids
                                               for v in scalar):
        raise InvalidInstanceError("field 'about.scalar_outputs' must be an array of forward node ids")
    free = about.get("gradient_free_reads", []) if isinstance(about, dict) else []
    if not isinstance(free, list) or not all(
            isinstance(group, list) and len(group) > 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                             and v in ids for v in group) for group in free):
        raise InvalidInstanceError("field 'about.gradient_free_reads' must be an array of arrays of forward node ids")
    uncalled = about.get("uncalled_entries") if isinstance(about, dict) else None
    if uncalled is not None and (not isinstance(uncalled, list) or not all(isinstance(v, str) for v in uncalled)):
        raise InvalidInstanceError("field 'about.uncalled_entries' must be an array of strings")
    return Layout(tuple(forward), mates, edges, None if inputs is None else tuple(inputs),
                  tuple((name, tuple(ids)) for name, ids in shared.items()), gradient_edges,
                  generator if isinstance(generator, str) else "",
                  tuple((u, v) for u, v in writes if u in ids and v in ids),
                  None if outputs is None else tuple(outputs), tuple(returned_inputs), tuple(scalar),
                  None if uncalled is None else tuple(uncalled), tuple(tuple(group) for group in free),
                  tuple((u, v) for u, v in strided if u in ids and v in ids))


def _node_pairs(about: Any, field: str) -> list[list[int]]:
    """The array of pairs of node ids an instance's ``about`` records under ``field`` (none where it records no
    such field); :class:`InvalidInstanceError` where it is anything else."""
    pairs = about.get(field, []) if isinstance(about, dict) else []
    if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                              for v in pair) for pair in pairs):
        raise InvalidInstanceError(f"field 'about.{field}' must be an array of pairs of node ids")
    return pairs


def _check_strings(raw: dict, node_id: int) -> None:
    """A forward node's module metadata: ``module`` a string, ``ops``, ``starts``, ``inputs``, ``repeats`` and
    ``inner`` arrays of strings."""
    if not isinstance(raw["module"], str):
        raise InvalidInstanceError(f"node {node_id}: field 'module' must be a string, got {json_type_name(raw['module'])}")
    for key in ("ops", "starts", "inputs", "repeats", "inner"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidInstanceError(f"node {node_id}: field {key!r} must be an array of strings")


def _check_starts(raw: dict, node_id: int) -> None:
    """A forward node's ``starts`` hold its own ``module`` where they hold anything, unless the module is called
    more than once (``repeats`` then names it). The modules whose calls begin at an operator are the innermost of
    its call path, down to its innermost module; a node's first operator begins the call of the node's module
    (the innermost, or the one the path is cut to) wherever it begins any: a node begins where that module
    changes. So an entry of ``starts`` the import did not write, which a split would name as a module to
    split at, is refused where it is not joined by the node's module."""
    starts = raw.get("starts", [])
    if starts and raw["module"] not in starts and not raw.get("repeats"):
        raise InvalidInstanceError(f"node {node_id}: field 'starts' is {starts}, without the node's own module "
                                   f"{raw['module']!r} (field 'module'): modules' calls that begin at a node begin "
                                   "with its module's, which 'starts' lists where it is called once ('repeats' "
                                   "where more often)")


def _check_module_names(nodes: Sequence[LayoutNode], about: dict) -> None:
    """The modules a node's ``starts``, ``inner`` and ``repeats`` name are modules of the model, and each module
    called once begins its call at one place. The import names a module there where its call begins, so the module
    is one a node belongs to (field ``module``), one a node's module lies in by name (``h.4`` for ``h.4.ln_1``), one
    ``about.other_modules`` lists (called, but by no such name: a module whose forward only calls a module passed
    to it, one below the level the paths are cut to), or, in an instance that records no ``other_modules`` and no
    ``about.module_depth`` of null (paths not cut), one inside the node's own module. A module called once begins at
    one node, after every node that belongs to it. An entry the import did not write, which a split would name as a
    module to split at, is refused otherwise."""
    other = about.get("other_modules")
    if other is not None and (not isinstance(other, list) or not all(isinstance(v, str) for v in other)):
        raise InvalidInstanceError("field 'about.other_modules' must be an array of strings")
    known = named_modules(node.module for node in nodes)
    known |= set(other or ())   # never '', the model itself, whose operators outside every module no call begins
    cut = other is None and about.get("module_depth", 0) is not None   # may list modules inside a node's
    first_node = {node.module: node.id for node in reversed(nodes)}   # the first node of each module
    begun: dict[str, int] = {}
    for node in nodes:
        for field in ("starts", "inner", "repeats"):
            for fqn in getattr(node, field):
                if fqn not in known and not (cut and fqn.startswith(node.module + ".")):
                    raise InvalidInstanceError(
                        f"node {node.id}: field {field!r} names {fqn!r}, which is no module of the model: no node "
                        "belongs to it or to a module inside it (field 'module'), and " + (
                            "field 'about.other_modules', where the import lists the modules called under no such "
                            "name, does not list it" if other is not None else
                            "the instance has no field 'about.other_modules', where an import lists the modules "
                            "called under no such name (import the model again if it calls such a module)"))
                if field == "repeats":
                    continue
                if fqn in begun:
                    raise InvalidInstanceError(
                        f"node {node.id}: field {field!r} names {fqn!r}, a module called once, whose call node "
                        f"{begun[fqn]} begins already (a module called more than once is named in field 'repeats')")
                if first_node.get(fqn, node.id) < node.id:
                    raise InvalidInstanceError(
                        f"node {node.id}: field {field!r} names {fqn!r}, a module called once, whose call node "
                        f"{first_node[fqn]}, which belongs to it, is in before this node begins it")
                begun[fqn] = node.id


def read_layout(path: str | Path | dict, source: str | None = None) -> Layout:
    """The layout of an instance file made by the model importers (or of the document read from one, the
    file ``source`` where it was one); errors name the file. The instance is validated first (as
    :func:`placement.load` does), so its ids and edges are sound."""
    from placement.io.tarnawski import parse_instance
    from placement.whole_file import text_path

    data = path if isinstance(path, dict) else load_json(text_path(path, "path"), InvalidInstanceError)
    named = source if isinstance(path, dict) else str(path)
    try:
        parse_instance(data)
        return layout_from_instance(data)
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{named}: {exc}" if named is not None else str(exc)) from None


def stages(layout: Layout, plan: Plan) -> list[list[int]]:
    """The forward node ids of each device of the plan, in pipeline order, each in program order.

    Devices holding no forward node are left out. Every forward node must be placed once,
    and a backward node on the device of its forward mate.
    """
    return [part for _, part in _typed_stages(layout, plan)]


def stage_types(layout: Layout, plan: Plan) -> list[str]:
    """The device type (accelerator or CPU) of each stage of :func:`stages`."""
    return [kind for kind, _ in _typed_stages(layout, plan)]


def in_pipeline_order(problem: Instance, plan: Plan) -> tuple[Plan, tuple[int, ...] | None]:
    """``plan`` with its devices listed in a pipeline order (:func:`placement.verification.contiguity.
    pipeline_order`) and that order, where it lists them in another; else ``plan`` and ``None`` (already in
    order, or no pipeline order exists: the exporters then say what reads backwards)."""
    from placement.verification.contiguity import pipeline_order

    if not isinstance(problem, Instance):
        raise InvalidParameterError("problem", "must be an Instance (placement.load reads one from a file), "
                                               f"not {type(problem).__name__}")
    plan = as_plan(plan)
    order = pipeline_order(problem, plan)
    if order is None or list(order) == list(range(len(plan.devices))):
        return plan, None
    return Plan(tuple(plan.devices[d] for d in order)), order


def _typed_stages(layout: Layout, plan: Plan) -> list[tuple[str, list[int]]]:
    """The device type and the forward node ids of each device of ``plan`` (a :class:`Plan`, or what
    :func:`placement.io.plans.as_plan` reads: a ``Result``, a plan document or file) that holds any, in the plan's
    order, each in program order; :class:`InvalidParameterError` where ``layout`` is no :class:`Layout` or the plan
    does not place the forward nodes once each and each backward node with its forward mate."""
    if not isinstance(layout, Layout):
        raise InvalidParameterError("layout", "must be a Layout (read_layout reads one from an instance file the "
                                              f"model importers wrote), not {type(layout).__name__}")
    plan = as_plan(plan)
    known = {node.id for node in layout.nodes}
    where: dict[int, int] = {}
    result: list[tuple[str, list[int]]] = []
    for d, device in enumerate(plan.devices):
        mine = []
        for v in device.nodes:
            if v in layout.mates:
                continue
            if v not in known:
                raise InvalidParameterError("plan", f"places node {v}, which the instance does not have")
            if v in where:
                raise InvalidParameterError("plan", f"places node {v} on two devices")
            where[v] = d
            mine.append(v)
        if mine:
            result.append((device.type, sorted(mine)))
    missing = sorted(known - set(where))
    if missing:
        raise InvalidParameterError("plan", f"does not place node {missing[0]} ({_name(layout, missing[0])})")
    for d, device in enumerate(plan.devices):
        for v in device.nodes:
            if v in layout.mates and where.get(layout.mates[v]) != d:
                raise InvalidParameterError("plan", f"does not place backward node {v} on the device of its forward "
                                                    f"node {layout.mates[v]}")
    return result


def _name(layout: Layout, node_id: int) -> str:
    for node in layout.nodes:
        if node.id == node_id:
            return node.name
    return str(node_id)


def refuse(form: str, reason: str) -> NoReturn:
    """Raise the error saying that hand-off ``form`` (a key of :data:`FORMATS`) cannot express the plan."""
    raise InvalidParameterError("plan", f"cannot be written as {FORMATS[form]}: {reason}")


def refusal(exc: InvalidParameterError, form: str) -> str | None:
    """The reason of an error raised by :func:`refuse` for ``form``; ``None`` for any other error."""
    prefix = f"cannot be written as {FORMATS[form]}: "
    return exc.detail[len(prefix):] if exc.parameter == "plan" and exc.detail.startswith(prefix) else None


def cpu_between(kinds: Sequence[str]) -> int | None:
    """The first stage of a pipeline whose stages run on device types ``kinds`` (in order) that runs on a
    CPU between two accelerator stages, which no pipeline runtime executes; ``None`` when there is none."""
    accelerators = [k for k, kind in enumerate(kinds) if kind != CPU]
    if not accelerators:
        return None
    return next((k for k, kind in enumerate(kinds) if kind == CPU and accelerators[0] < k < accelerators[-1]),
                None)


def runtime_stages(layout: Layout, plan: Plan, form: str) -> list[list[int]]:
    """:func:`stages`, checked to be a pipeline without a CPU stage between accelerator stages."""
    typed = _typed_stages(layout, plan)
    k = cpu_between([kind for kind, _ in typed])
    if k is not None:
        before = max(a for a, (kind, _) in enumerate(typed[:k]) if kind != CPU)
        after = min(a for a, (kind, _) in enumerate(typed) if a > k and kind != CPU)
        refuse(form, f"stage {k} runs on a CPU between accelerator stages {before} and {after}, and no pipeline "
                     "runtime sends activations from an accelerator to a CPU and back")
    stage_of = {v: k for k, (_, part) in enumerate(typed) for v in part}
    for u, v in layout.edges:
        if stage_of[u] > stage_of[v]:
            refuse(form, f"it is no pipeline: {_name(layout, v)!r} in stage {stage_of[v]} reads "
                         f"{_name(layout, u)!r} of the later stage {stage_of[u]}")
    return [part for _, part in typed]


def require_neighbour_reads(layout: Layout, parts: list[list[int]], form: str) -> None:
    """For a training graph, no stage may read a node of a stage two or more before it where a
    gradient flows back along the read (:attr:`Layout.gradient_edges`): torch's ``pipeline()`` sends
    the value on, but runs no backward of such a skip connection (``PipeliningMetadataError: Backward
    of skip connections not supported yet``); :func:`placement.torch.plan_pipeline` relays it stage by
    stage instead. Nor may two later stages read one floating-point value that needs no gradient
    (:attr:`Layout.free_reads`: rotary tables computed from a buffer): a training stage sends every
    floating-point value as one that needs a gradient, and ``pipeline()`` refused one sent to two stages
    with the same error."""
    if not layout.mates:
        return
    stage_of = {v: k for k, part in enumerate(parts) for v in part}
    for u, *readers in layout.free_reads:
        later = sorted({stage_of[v]: v for v in readers if stage_of[v] > stage_of[u]}.items())
        if len(later) > 1:
            (first, v), (last, w) = later[0], later[-1]
            refuse(form, f"{_name(layout, v)!r} in stage {first} and {_name(layout, w)!r} in stage {last} read a "
                         f"floating-point value of {_name(layout, u)!r} of stage {stage_of[u]}, and torch's "
                         "pipeline() sends such a value of a training stage to one stage only "
                         "(placement.torch.plan_pipeline relays it)")
    for u, v in layout.edges:
        if stage_of[v] - stage_of[u] > 1 and (u, v) in layout.gradient_edges:
            refuse(form, f"{_name(layout, v)!r} in stage {stage_of[v]} reads {_name(layout, u)!r} of stage "
                         f"{stage_of[u]}, and torch's pipeline() runs no backward of a value that skips a stage "
                         "(placement.torch.plan_pipeline relays it)")


def require_no_writes_into_received(layout: Layout, parts: list[list[int]], form: str) -> None:
    """For a training graph, no stage may write in place into a value an earlier stage computes
    (:attr:`Layout.writes`: ``nn.ReLU(inplace=True)`` first in a stage, ``x += y`` on a received ``x``): the
    runtime gives a stage what it receives as leaves that require a gradient, and autograd refuses to
    write into one (``RuntimeError: a leaf Variable that requires grad is being used in an in-place
    operation`` at the first step). :func:`pipe_split_module` copies such a value at the boundary; the
    split points of the model's own modules cannot."""
    if not layout.mates:
        return
    runtime = "DeepSpeed's PipelineModule" if form == "deepspeed" else "torch's pipeline()"
    for u, v, earlier, later in _forward_crossings(layout.writes, parts):
        refuse(form, f"{_name(layout, v)!r} in stage {later} writes in place into the value of "
                     f"{_name(layout, u)!r} it receives from stage {earlier}, and {runtime} gives a stage "
                     "what it receives as leaves that require a gradient, which autograd refuses to write into")


def _forward_crossings(pairs: tuple[tuple[int, int], ...], parts: list[list[int]]) -> list[tuple[int, int, int, int]]:
    """The pairs ``(u, v)`` whose ``v`` is on a later stage than ``u`` (both placed), with the two stages."""
    stage_of = {v: k for k, part in enumerate(parts) for v in part}
    return [(u, v, stage_of[u], stage_of[v]) for u, v in pairs
            if u in stage_of and v in stage_of and stage_of[v] > stage_of[u]]


def require_contiguous_sends(layout: Layout, parts: list[list[int]], form: str) -> None:
    """No stage may read a value of an earlier stage that the model lays out non-contiguous
    (:attr:`Layout.non_contiguous`: a transpose, an RNN's batch-first output): torch's runtime sends what a
    stage returns as it is, and gloo sends contiguous tensors only (``RuntimeError: input tensor has to be
    contiguous`` at the first step). DeepSpeed's ``PipelineModule`` sends it as it is too, to a contiguous
    buffer of the next stage: gloo refuses it, and NCCL, which refuses no non-contiguous tensor sent point to
    point, sends its memory as it lies, which the next stage reads as laid out contiguous (the elements out of
    order). Split points and layers of the model's own modules do not change its layout, where
    :func:`pipe_split_module` sends such a value contiguous."""
    runtime = ("DeepSpeed's PipelineModule sends a stage's values as they are to a contiguous buffer, which gloo "
               "refuses (input tensor has to be contiguous) and NCCL fills with the value's memory as it lies (its "
               "elements out of order)" if form == "deepspeed" else
               "torch's pipeline() sends a stage's values as they are, which gloo refuses (input tensor has to be "
               "contiguous)")
    for u, v, earlier, later in _forward_crossings(layout.non_contiguous, parts):
        refuse(form, f"{_name(layout, v)!r} in stage {later} reads a value of {_name(layout, u)!r} of "
                     f"stage {earlier} that is not contiguous in memory, and {runtime}: call .contiguous() on it "
                     "in the model, or hand the plan over as a pipe_split program, which sends it contiguous")


def require_inputs_in_first_stage(layout: Layout, parts: list[list[int]], form: str) -> None:
    """Every input of the model is read in the first stage only: torch's ``pipeline()`` gives the model's
    inputs to stage 0 alone, and a later stage that reads one, or an input no stage reads, fails
    at run time (``TypeError: forward() takes … positional arguments``; where stage 0 reads it too, as
    the residual ``f(x) + x`` of a network whose ``f`` is cut, the later stage raised torch's
    ``PipeliningMetadataError: ... got root arg`` at the first step);
    :func:`placement.torch.plan_pipeline` relays such inputs. Instances that do not record the
    model's inputs pass unchecked."""
    if layout.inputs is None:
        return
    runtime = "DeepSpeed's PipelineModule" if form == "deepspeed" else "torch's pipeline()"
    first = set(parts[0]) if parts else set()
    read_first = {name for node in layout.nodes if node.id in first for name in node.inputs}
    stage_of = {v: k for k, part in enumerate(parts) for v in part}
    for name in layout.inputs:
        if name in read_first:
            continue
        reader = next((node for node in layout.nodes if name in node.inputs), None)
        if reader is None:
            refuse(form, f"model input {name!r} is read by no node, and {runtime} passes the model's "
                         "inputs to stage 0 only, which fails on one it does not take "
                         "(placement.torch.plan_pipeline takes it)")
        refuse(form, f"model input {name!r} is first read by {reader.name!r} in stage {stage_of[reader.id]}, and "
                     f"{runtime} passes the model's inputs to stage 0 only "
                     "(placement.torch.plan_pipeline relays them)")
    for node in layout.nodes:
        later = [name for name in node.inputs if name in read_first]
        if later and stage_of.get(node.id, 0) > 0:
            refuse(form, f"model input {later[0]!r} is read by {node.name!r} in stage {stage_of[node.id]} as well as "
                         f"in stage 0, and {runtime} passes the model's inputs to stage 0 only "
                         "(placement.torch.plan_pipeline relays them)")


def require_outputs_in_last_stage(layout: Layout, parts: list[list[int]], form: str) -> None:
    """Every value the model returns is made in the last stage: torch's ``pipeline()`` (and DeepSpeed) return
    what the last stage returns, so an output made by an earlier stage (``return h, head(h)`` with ``head``
    on a later stage) is lost, and so is an input the model returns as given (``return f(x), x``), which no
    stage returns, whatever the stages; :func:`placement.torch.plan_pipeline` relays both. Instances that do
    not record the model's outputs pass unchecked."""
    runtime = "DeepSpeed's PipelineModule" if form == "deepspeed" else "torch's pipeline()"
    for name in layout.returned_inputs:
        refuse(form, f"the model returns its input {name!r} as given, and {runtime} returns what the last "
                     "stage computes only (placement.torch.plan_pipeline relays it)")
    if form != "deepspeed":
        for v in layout.scalar_outputs:
            refuse(form, f"the model returns a 0-dimensional value of {_name(layout, v)!r}, which torch's pipeline "
                         "schedules cannot gather over micro-batches (they concatenate each output along its first "
                         "dimension); return it with a first dimension (a loss as loss.unsqueeze(0)) and reduce it "
                         "in the loss function")
    if layout.outputs is None or not parts:
        return
    stage_of = {v: k for k, part in enumerate(parts) for v in part}
    last = len(parts) - 1
    for v in layout.outputs:
        if stage_of.get(v, last) != last:
            refuse(form, f"the model returns the value of {_name(layout, v)!r}, made in stage {stage_of[v]}, and "
                         f"{runtime} returns what the last stage returns only "
                         "(placement.torch.plan_pipeline relays it)")


def shared_across_stages(layout: Layout, plan: Plan) -> dict[str, tuple[int, ...]]:
    """The trained parameters that nodes of several stages of ``plan`` read, each with those stages:
    torch's ``pipeline()`` gives every such stage its own copy and does not add their gradients (nor
    does DeepSpeed, but for layers declared tied), so the copies drift apart in training;
    :func:`placement.torch.plan_pipeline` adds them."""
    stage_of = {v: k for k, part in enumerate(stages(layout, plan)) for v in part}
    out = {}
    for name, readers in layout.shared:
        held = tuple(sorted({stage_of[v] for v in readers if v in stage_of}))
        if len(held) > 1:
            out[name] = held
    return out


def require_intervals(layout: Layout, parts: list[list[int]], form: str) -> None:
    """Each stage must be a run of consecutive nodes in program order, stages in order."""
    position = layout.position()
    expected = 0
    for k, stage in enumerate(parts):
        got = sorted(position[v] for v in stage)
        if got != list(range(expected, expected + len(stage))):
            first_out = next(p for p in range(expected, expected + len(stage) + 1) if p not in got)
            refuse(form, f"it needs stages that are consecutive intervals of program order, and stage {k} lacks "
                         f"{layout.nodes[first_out].name!r}, which runs before its node "
                         f"{layout.nodes[got[-1]].name!r}")
        expected += len(stage)


def split_points(layout: Layout, plan: Plan) -> list[str]:
    """The module FQNs at which stages 1, 2, … begin (see :func:`split_spec`)."""
    parts = runtime_stages(layout, plan, "split-spec")
    require_intervals(layout, parts, "split-spec")
    require_neighbour_reads(layout, parts, "split-spec")
    require_inputs_in_first_stage(layout, parts, "split-spec")
    require_outputs_in_last_stage(layout, parts, "split-spec")
    require_no_writes_into_received(layout, parts, "split-spec")
    require_contiguous_sends(layout, parts, "split-spec")
    by_id = {node.id: node for node in layout.nodes}
    # a module inside one called more than once runs more than once too, though an import may not record it so
    # (a parameterless child of a module a TorchScript ONNX export calls twice)
    repeated = {module for node in layout.nodes for module in node.repeats}
    points = []
    for k, stage in enumerate(parts[1:], start=1):
        first = by_id[stage[0]]
        if not first.starts and first.repeats:
            refuse("split-spec", f"stage {k} begins at {first.name!r}, a call of module {first.repeats[0]}, which "
                                 "runs more than once, and torch's pipeline() would split before each of its calls")
        outer = next((m for m in _enclosing(first.starts[0]) if m in repeated), None) if first.starts else None
        if outer is not None:
            refuse("split-spec", f"stage {k} begins at {first.name!r}, module {first.starts[0]}, which runs inside "
                                 f"module {outer}, which runs more than once: torch's pipeline() would split before "
                                 "each of its calls")
        if not first.starts:
            begins = next((node.name for node in layout.nodes if node.module == first.module
                           or node.module.startswith(f"{first.module}.")), None) if first.module else None
            inside = (f" (the operators of module {first.module!r} itself, which begins at {begins!r})"
                      if begins is not None and begins != first.name else "")
            refuse("split-spec", f"stage {k} begins at {first.name!r}{inside}, which is not where a module called "
                                 "once begins")
        points.append(first.starts[0])
    return points


def named_modules(modules: Iterable[str]) -> set[str]:
    """The modules ``modules`` name (dotted paths; ``''``, the model itself, names none) and every module they lie
    in: the modules of the model a node's module attests (:func:`_check_module_names`, and the import's
    :func:`placement.io.opgraph.other_modules`, which lists the others)."""
    return {fqn for module in modules if module for fqn in (*_enclosing(module), module)}


def _enclosing(module: str) -> list[str]:
    """The modules that hold ``module`` (a dotted path), outermost first: ``a``, ``a.b`` for ``a.b.c``."""
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def split_spec(layout: Layout, plan: Plan) -> dict[str, Any]:
    """``{module FQN: SplitPoint.BEGINNING}`` for ``torch.distributed.pipelining.pipeline`` (needs torch)."""
    points = split_points(layout, plan)
    from placement.io.torch_export import require_torch

    require_torch()
    from torch.distributed.pipelining import SplitPoint

    return {fqn: SplitPoint.BEGINNING for fqn in points}


def module_runs(layout: Layout) -> dict[str, tuple[int, int]]:
    """Each module whose nodes (those whose module key is it or lies inside it) form one run of
    consecutive positions in program order: module -> (first position, position after the last)."""
    seen: dict[str, list[int]] = {}
    for k, node in enumerate(layout.nodes):
        for fqn in (*_enclosing(node.module), node.module) if node.module else ():
            span = seen.setdefault(fqn, [k, k, 0])
            span[1], span[2] = k + 1, span[2] + 1
    return {fqn: (first, end) for fqn, (first, end, count) in seen.items() if end - first == count}


def _cover(layout: Layout, runs: dict[str, tuple[int, int]], begin: int, end: int, k: int) -> list[str]:
    """The fewest whole module calls making up nodes ``begin`` to ``end - 1`` (stage ``k``), outermost first."""
    layers: list[str] = []
    p = begin
    while p < end:
        node = layout.nodes[p]
        whole = [fqn for fqn in node.starts if runs.get(fqn, (None,))[0] == p]
        fits = [fqn for fqn in whole if runs[fqn][1] <= end]
        if fits:
            layers.append(fits[0])
            p = runs[fits[0]][1]
            continue
        if not node.module:
            refuse("deepspeed", f"{node.name!r} in stage {k} is an operator outside every module, and a "
                                "PipelineModule layer is a module")
        if not whole and node.repeats:
            refuse("deepspeed", f"stage {k} holds {node.name!r}, a call of module {node.repeats[-1]}, which runs "
                                "more than once, and a PipelineModule layer is a module called once")
        if not whole and not any(node.module in other.starts for other in layout.nodes):
            refuse("deepspeed", f"stage {k} holds {node.name!r} of module {node.module}, called more than once "
                                "(or registered under several names), and a PipelineModule layer is a module "
                                "called once")
        smallest = whole[-1] if whole else node.module
        refuse("deepspeed", f"stage {k} holds {node.name!r} but not the whole call of {smallest}, the smallest "
                            "module holding it, and a PipelineModule layer is a whole module")
    return layers


def deepspeed_parts(layout: Layout, plan: Plan) -> dict[str, list]:
    """``{"layers": [module FQNs in program order], "parts": [stage boundaries]}`` for DeepSpeed (module
    docstring): each stage covered by the fewest whole module calls, each layer reading only the layer before it."""
    parts = runtime_stages(layout, plan, "deepspeed")
    require_intervals(layout, parts, "deepspeed")
    require_inputs_in_first_stage(layout, parts, "deepspeed")
    require_outputs_in_last_stage(layout, parts, "deepspeed")
    require_no_writes_into_received(layout, parts, "deepspeed")
    require_contiguous_sends(layout, parts, "deepspeed")
    layers: list[str] = []
    bounds = [0]
    begin = 0
    layer_of: list[int] = []
    runs = module_runs(layout)
    for k, stage in enumerate(parts):
        for fqn in _cover(layout, runs, begin, begin + len(stage), k):
            layer_of += [len(layers)] * (runs[fqn][1] - runs[fqn][0])
            layers.append(fqn)
        begin += len(stage)
        bounds.append(len(layers))
    position = layout.position()
    for u, v in layout.edges:
        a, b = layer_of[position[u]], layer_of[position[v]]
        if a != b and a != b - 1:
            refuse("deepspeed", f"layer {layers[b]} reads {_name(layout, u)!r} of layer {layers[a]}, and a "
                                "PipelineModule passes each layer the outputs of the layer before it only")
    for node in layout.nodes:   # the model's inputs go to the first layer alone
        layer = layer_of[position[node.id]]
        if node.inputs and layer > 0:
            refuse("deepspeed", f"layer {layers[layer]} reads the model input {node.inputs[0]!r}, and a "
                                "PipelineModule passes the model's inputs to its first layer only")
    _require_one_argument(layout, layers, layer_of)
    return {"layers": layers, "parts": bounds}


def uncalled_note(entries: Sequence[str]) -> str:
    """The beginning of the note that the model's forward did not call ``entries`` when exported (an instance's
    ``uncalled``), which both the DeepSpeed and the Megatron forms go on with."""
    listed = entries[0] if len(entries) == 1 else f"{', '.join(entries[:-1])} and {entries[-1]}"
    held = "it holds" if len(entries) == 1 else "they hold"
    return f"the model's forward did not call {listed} in the run the export traced: {held} no stage's work"


def deepspeed_notes(layout: Layout, layers: list[str]) -> list[str]:
    """What a ``PipelineModule`` of ``layers`` would not run: modules of which the instance holds no operator.
    Where two layers are children ``P.i`` and ``P.j`` of one container with ``j > i + 1`` (an
    ``nn.Sequential``'s), the children between them that the model's forward calls run between them and are
    named, but for those that are layers elsewhere (a forward calling its entries out of order); so are, in a
    note of their own, the entries the instance records the forward did not call (``uncalled``; where it
    records none, as from ONNX, the first note says a child may be one). An instance imported from ONNX may
    lack others too, whose names the file does not keep (an exporter folds a batch normalisation into the
    convolution before it, leaving one operator)."""
    notes = []
    never = set(layout.uncalled or ())
    listed = set(layers)
    for before, after in zip(layers, layers[1:]):
        parent, _, first = before.rpartition(".")
        other, _, last = after.rpartition(".")
        if parent == other and first.isdigit() and last.isdigit() and int(last) > int(first) + 1:
            skipped = [f"{parent}.{k}" if parent else str(k) for k in range(int(first) + 1, int(last))]
            skipped = [fqn for fqn in skipped if fqn not in never and fqn not in listed]   # not one run elsewhere
            if skipped and layout.uncalled is not None:
                notes.append(f"layers skips {', '.join(skipped)}, which the model runs between {before} and {after} "
                             "but of which the instance holds no operator (a batch normalisation folded into the "
                             "convolution before it, an nn.Identity, a dropout in eval mode): a PipelineModule of "
                             "these layers does not run it; insert it where it belongs if it computes anything")
            elif skipped:
                notes.append(f"layers skips {', '.join(skipped)}, which lies between {before} and {after} but of which "
                             "the instance holds no operator (a batch normalisation folded into the convolution before "
                             "it, an nn.Identity, a dropout in eval mode, or an entry the model's forward never calls: "
                             "the instance does not record which): a PipelineModule of these layers does not run it; "
                             "insert it where it belongs if the model runs it and it computes anything")
    if layout.uncalled:
        it = "it" if len(layout.uncalled) == 1 else "them"
        notes.append(f"{uncalled_note(layout.uncalled)}, and a PipelineModule of these layers does not run {it} "
                     "either")
    if layout.generator == ONNX_GENERATOR:
        notes.append("the instance was imported from ONNX, whose exporters fold a batch normalisation into the "
                     "convolution before it: layers lists no normalisation so folded, and a PipelineModule of these "
                     "layers must run each after its convolution")
    return notes


def _require_one_argument(layout: Layout, layers: list[str], layer_of: list[int]) -> None:
    """Refuse DeepSpeed layers of which one takes several tensors: a ``PipelineModule`` runs ``inputs =
    layer(inputs)``, one argument per call, the whole output of the layer before (for the first layer, the
    model's inputs as one tuple), so a module taking ``(h1, h2)`` would receive one tuple. Counted are the
    distinct nodes of the layer before that a layer reads and, for the first layer, the model's inputs it
    reads (where the instance records them); several tensors that one node passes on are not seen."""
    position = layout.position()
    read: list[dict[str, None]] = [{} for _ in layers]   # per layer, the values it takes, in program order
    for node in layout.nodes:
        if layer_of[position[node.id]] == 0:
            read[0].update(dict.fromkeys(node.inputs))
    sources = sorted({(position[u], v) for u, v in layout.edges})
    for p, v in sources:
        a, b = layer_of[p], layer_of[position[v]]
        if a == b - 1:
            read[b][layout.nodes[p].name] = None
    for b, names in enumerate(read):
        if len(names) < 2:
            continue
        quoted = [repr(name) for name in names]
        listed = f"{', '.join(quoted[:-1])} and {quoted[-1]}"
        if b == 0:
            refuse("deepspeed", f"layer {layers[0]} takes {len(names)} tensors, the model inputs {listed}, and a "
                                "PipelineModule calls its first layer with one argument, the model's inputs as one "
                                "tuple")
        refuse("deepspeed", f"layer {layers[b]} takes {len(names)} tensors, the outputs of {listed} of layer "
                            f"{layers[b - 1]}, and a PipelineModule calls each layer with one argument, the output "
                            "of the layer before it (a tensor or one tuple)")


def pipe_split_ops(layout: Layout, plan: Plan) -> list[list[str]]:
    """The program's operators of each stage, in program order (what :func:`pipe_split_module` splits);
    refused for an instance imported from ONNX, whose operators are the ONNX graph's nodes, which no
    ``torch.export`` program has."""
    if layout.generator == ONNX_GENERATOR:
        refuse("pipe-split", "the instance was imported from ONNX, so its operators are ONNX nodes, and "
                             "pipe_split_module cuts the operators of a torch.export program (import the PyTorch "
                             "model to hand this plan over as one)")
    parts = runtime_stages(layout, plan, "pipe-split")
    require_neighbour_reads(layout, parts, "pipe-split")
    require_inputs_in_first_stage(layout, parts, "pipe-split")
    require_outputs_in_last_stage(layout, parts, "pipe-split")
    by_id = {node.id: node for node in layout.nodes}
    return [[op for v in stage for op in by_id[v].ops] for stage in parts]


def _copy_what_stages_write_into(graph: Any, movable: list[Any], stage: dict[Any, int], stages: int) -> list[Any]:
    """Where stage ``s`` writes in place into a floating-point value an earlier stage made (or into a
    view of it), a copy of the value that stage ``s`` and the later stages read instead: a stage
    receives its inputs as leaves that require a gradient, which autograd refuses to write into.
    The operators of the graph, in order, with the copies."""
    import torch

    from placement.torch.contiguity import written_in_place

    added = False
    for s in range(1, stages):
        here = [n for n in graph.nodes if stage.get(n) == s]
        received = dict.fromkeys(a for n in here for a in n.all_input_nodes
                                 if a.op != "get_attr" and stage.get(a, 0) < s)
        for value in received:
            example = value.meta.get("val")
            floating = isinstance(example, torch.Tensor) and example.is_floating_point()
            if not (floating and written_in_place(value, here)):
                continue
            with graph.inserting_after(value):
                copy = graph.call_function(torch.ops.aten.clone.default, (value,))
            copy.meta = dict(value.meta)
            stage[copy] = s
            for user in list(value.users):
                if user is not copy and stage.get(user, -1) >= s:
                    user.replace_input_with(value, copy)
            added = True
    return [n for n in graph.nodes if n in stage] if added else movable


def _send_contiguous(graph: Any, movable: list[Any], stage: dict[Any, int]) -> list[Any]:
    """Where a later stage reads a tensor laid out non-contiguous (a transpose, an RNN's batch-first output), the
    stage that computes it sends it contiguous, its dimensions permuted into the order they lie in memory
    (copied where that leaves gaps: a slice, an expanded mask), and each reading stage permutes them back: torch's
    ``pipeline()`` sends what a stage returns as it is, and gloo sends contiguous tensors only. The reading stage
    so computes on the layout the program was traced with (a dense one, :func:`placement.torch.contiguity.
    dense_order`), on which its views were traced (a ``view`` after ``scaled_dot_product_attention``, whose result
    follows its input's layout); it receives the value into a contiguous buffer and sends its gradient back laid
    out as that buffer (autograd lays a leaf's gradient out as the leaf). An item of an operator's tuple (the
    output of an ``nn.GRU``) is taken on the stage of the operator, so that it is the item that crosses. The
    operators of the graph, in order, with those added."""
    import operator

    import torch

    from placement.torch.contiguity import laid_out_apart, memory_order

    def strided(n: Any) -> bool:
        return laid_out_apart(n.meta.get("val"))

    def add(after: Any, target: Any, args: tuple, kwargs: dict, example: Any, s: int) -> Any:
        with graph.inserting_after(after):
            node = graph.call_function(target, args, kwargs)
        node.meta = {**after.meta, "val": example}
        stage[node] = s
        return node

    for n in movable:   # an item of a tuple made on an earlier stage: taken where the tuple is made
        source = n.args[0] if n.target is operator.getitem and n.args else None
        if isinstance(source, torch.fx.Node) and source in stage and stage[source] < stage[n] and strided(n):
            stage[n] = stage[source]
    added = False
    for value in movable:
        later = [user for user in value.users if stage.get(user, -1) > stage[value]]
        if not (later and strided(value)):
            continue
        example = value.meta["val"]
        order = memory_order(tuple(example.stride()))
        inverse = [order.index(d) for d in range(len(order))]
        sent = add(value, torch.ops.aten.permute.default, (value, order), {}, example.permute(order), stage[value])
        if not sent.meta["val"].is_contiguous():
            sent = add(sent, torch.ops.aten.clone.default, (sent,), {"memory_format": torch.contiguous_format},
                       sent.meta["val"].clone(memory_format=torch.contiguous_format), stage[value])
        for s in sorted({stage[user] for user in later}, reverse=True):
            back = add(sent, torch.ops.aten.permute.default, (sent, inverse), {}, sent.meta["val"].permute(inverse), s)
            for user in later:
                if stage[user] == s:
                    user.replace_input_with(value, back)
        added = True
    return [n for n in graph.nodes if n in stage] if added else movable


def _place_unused_state_reads(unused: list[Any], stage: dict[Any, int], low: dict[Any, int]) -> None:
    """Moves each operator of ``unused`` (operators the instance does not hold and nothing reads: the
    metadata assertions ``torch.export`` writes for a cast of a parameter, ``weight.float()``) that reads a
    parameter or buffer to the earliest stage whose other operators read it, where that is no earlier than
    its other inputs (``low``): at the stage of its latest input, stage 0 for a parameter alone, it would
    make stage 0 a holder of the parameter, whose gradient the stages would then exchange every step."""
    readers: dict[Any, list[int]] = {}
    skipped = set(unused)
    for n, s in stage.items():
        if n not in skipped:
            for a in n.all_input_nodes:
                if a.op == "get_attr":
                    readers.setdefault(a, []).append(s)
    for n in unused:
        held = [min(readers[a]) for a in n.all_input_nodes if a in readers]
        if held:
            stage[n] = max(low[n], min(held))


def pipe_split_module(program: Any, layout: Layout, plan: Plan, relayed: bool = False) -> Any:
    """The exported program as a ``GraphModule`` reordered stage by stage, with ``pipe_split()`` between stages.

    ``program`` is the ``torch.export.ExportedProgram`` the instance was made from
    (``ImportedModel.source``). Operators the instance does not hold (getitems, shape
    queries, assertions, guards) go to the earliest stage that uses them, or, unused, to
    the stage of their latest input, or later to the first stage that otherwise reads a parameter or buffer
    they read (:func:`_place_unused_state_reads`). For ``torch.distributed.pipelining.pipeline``, a training plan
    may not skip a stage (:func:`require_neighbour_reads`); ``relayed=True`` (for a caller that relays
    such values stage by stage and sends contiguous tensors itself, as :mod:`placement.torch.partition` does)
    allows it. Without it, a value laid out non-contiguous crosses a boundary contiguous
    (:func:`_send_contiguous`), a stage that writes in place into a value it receives writes into a copy made
    at its start (:func:`_copy_what_stages_write_into`), and a model that returns its own parameter is refused.
    """
    from placement.io.module_names import check_state_names
    from placement.io.torch_export import require_torch

    require_torch()
    from torch.distributed.pipelining import pipe_split

    parts = runtime_stages(layout, plan, "pipe-split")
    if not relayed:
        require_neighbour_reads(layout, parts, "pipe-split")
        require_inputs_in_first_stage(layout, parts, "pipe-split")
        require_outputs_in_last_stage(layout, parts, "pipe-split")
    by_id = {node.id: node for node in layout.nodes}
    stage_of_op = {op: s for s, stage in enumerate(parts) for v in stage for op in by_id[v].ops}
    check_state_names(program, "program")
    gm = program.module()
    graph = gm.graph
    fixed_kinds = ("placeholder", "get_attr", "output")
    movable = [n for n in graph.nodes if n.op not in fixed_kinds]
    missing = sorted(set(stage_of_op) - {n.name for n in movable})
    if missing:
        raise InvalidParameterError("program", f"has no operator {missing[0]!r}; was the instance made from this "
                                               "program?")
    low: dict[Any, int] = {}
    for n in movable:
        low[n] = max((low.get(a, 0) for a in n.all_input_nodes), default=0)
        if n.name in stage_of_op:
            if stage_of_op[n.name] < low[n]:
                refuse("pipe-split", f"it is no pipeline: operator {n.name!r} in stage {stage_of_op[n.name]} "
                                     f"needs an input computed in stage {low[n]}")
            low[n] = stage_of_op[n.name]
    stage: dict[Any, int] = {}
    for n in reversed(movable):
        if n.name in stage_of_op:
            stage[n] = stage_of_op[n.name]
            continue
        users = [stage[u] for u in n.users if u in stage]
        stage[n] = min(users) if users else low[n]
    _place_unused_state_reads([n for n in movable if n.name not in stage_of_op and not n.users], stage, low)
    for n in movable:
        late = [a for a in n.all_input_nodes if stage.get(a, 0) > stage[n]]
        if late:
            refuse("pipe-split", f"it is no pipeline: operator {n.name!r} would run in stage {stage[n]}, before "
                                 f"its input {late[0].name!r} in stage {stage[late[0]]}")
    if not relayed:
        movable = _send_contiguous(graph, movable, stage)
        movable = _copy_what_stages_write_into(graph, movable, stage, len(parts))
    returned = [v for n in graph.nodes if n.op == "output" for v in n.all_input_nodes]
    state = next((v for v in returned if v.op == "get_attr"), None)
    if state is not None and not relayed:   # torch's pipeline() fails on it with an assertion
        refuse("pipe-split", f"the model returns its parameter or buffer {state.target!r} itself; a pipeline "
                             "returns what its stages compute per micro-batch")
    order = [n for n in graph.nodes if n.op in ("placeholder", "get_attr")]
    anchor = order[-1] if order else None
    for s in range(len(parts)):
        if s > 0:
            if anchor is None:
                raise InvalidParameterError("program", "has no inputs to anchor the first pipe_split")
            with graph.inserting_after(anchor):
                anchor = graph.call_function(pipe_split, ())
        for n in movable:
            if stage[n] == s:
                if anchor is not None and anchor is not n:
                    anchor.append(n)
                anchor = n
    graph.lint()
    gm.recompile()
    return gm
