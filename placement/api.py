"""``placement.verification``, ``placement.simulation`` and ``placement.hypar``: the checks and studies of a plan.

Each takes keyword-only options, checks their values (an :class:`InvalidParameterError` names
the parameter), and returns a result object with ``to_json()``:

* :func:`verify` — the independent evaluator's :class:`placement.Verification` of a plan;
* :func:`simulate` — the event-driven pipeline simulator's run of a plan under a schedule;
* :func:`hypar` — every HyPar/AccPar planner's hybrid data/model-parallel plan of a layer chain.

``solve`` lives in :mod:`placement.solving`, ``load`` in :mod:`placement.loading`.
"""

from __future__ import annotations

import numbers
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from os import PathLike
from typing import Any, Callable, Iterator, Mapping

from placement.errors import InvalidParameterError, LimitExceededError
from placement.io.plans import as_plan, made_for_text
from placement.loading import as_loaded, is_piper, loaded_as_overridden, override_devices
from placement.parameters import callback, flag, integer, keywords_checked, number, one_of, shown
from placement.result import Verification

HYPAR_FORMAT = "placement-hypar/1"
DEFAULT_MICROBATCHES = 64


@keywords_checked
def verify(instance: Any, plan: Any, *, objective: str | None = None, contiguity: str | None = None,
           calls: int | None = None, infer_from_colours: bool | None = None, ledger: bool | None = None,
           accelerators: int | None = None, cpus: int | None = None, memory: float | None = None,
           backward: str | None = None, w_placement: str | None = None, inter_layer: bool | None = None,
           w_share: float | None = None) -> Any:
    """Check ``plan`` (a Result, Plan, plan document or plan file) against ``instance``, sharing nothing
    with any solver.

    ``contiguity`` is the class the plan must belong to (default: the class a solved plan records it
    was solved in, a Result's or a plan file's, else ``none``: any assignment);
    ``objective`` the value to compute (``throughput-gpipe`` on training graphs, ``latency`` on
    inference graphs; default: the objective a solved plan records, a Result's or a plan file's,
    else ``throughput``); ``calls`` the most calls per accelerator (latency only; default: the limit a
    plan solved for latency records it was verified with, else none);
    ``infer_from_colours`` places nodes the plan omits on the device of their colour class (as
    Tarnawski's published expert splits need; not given, ``None``: ``False``); ``ledger`` also runs the
    communication ledger (not given: ``False``).
    What a solved plan's record claims that the check refutes (its value, the instance it names, an
    exact stage count) is added to the verdict's ``notes``.
    ``accelerators``, ``cpus`` and ``memory`` override the instance's devices as in ``solve``; those not
    given are, by default, what a solved plan records it was solved with (``Result.overrides``).
    ``backward="split"`` checks a split-backward plan under the variant ``w_placement``,
    ``inter_layer``, ``w_share`` (docs/backward-split.md; contiguity ``stages``, its own rules);
    by default a plan that records a split-backward solve is checked so, under the variant it
    records where these are not given, and any other plan as joint. A split-backward check runs in class
    ``stages`` with one call per device, and infers no node and runs no ledger: ``contiguity`` other than
    ``"stages"``, ``calls`` other than 1, and ``infer_from_colours`` and ``ledger`` given, whatever their
    value, are refused there.

    On a Piper instance (data- and tensor-parallel stages) the plan (a plan file or document as
    ``solve`` writes it, a ``ParallelResult`` or a ``ParallelPlan``) is checked on the devices and
    memory it records, under its own schedule, and a
    :class:`placement.verification.parallel_check.ParallelVerification` is returned (``ledger``: the
    communication ledger of :mod:`placement.verification.parallel_ledger`); the other options do not
    apply there, and are refused given, whatever their value (``infer_from_colours=False`` too).
    """
    from placement.io.plans import (read_plan_file, recorded_backward, recorded_calls, recorded_contiguity,
                                    recorded_objective, recorded_objective_refusal)
    from placement.verification.check import check_plan

    loaded, plan = _loaded_for_check(instance, plan, accelerators, cpus, memory)
    if is_piper(loaded):
        given = {"objective": objective, "contiguity": contiguity, "calls": calls, "accelerators": accelerators,
                 "cpus": cpus, "memory": memory, "backward": backward, "w_placement": w_placement,
                 "inter_layer": inter_layer, "w_share": w_share, "infer_from_colours": infer_from_colours}
        unused = next((name for name, value in given.items() if value is not None), None)
        if unused is not None:
            raise InvalidParameterError(unused, "does not apply to a Piper instance (its plan is checked on the "
                                                "devices and memory it records, with its own schedule)")
        return _verify_parallel(loaded, plan, flag("ledger", False if ledger is None else ledger))
    plan = read_plan_file(plan)   # once: for the plan, its record and the claims the record makes
    problem = solved_devices(loaded, plan, accelerators, cpus, memory)
    from placement.problem.split import (BACKWARD_MODES, check_training, checked_backward, refuse_split_options,
                                         refuse_unused_w_share, solved_otherwise, split_model)

    solved_for = recorded_objective(plan)
    if objective is None:
        objective = solved_for or "throughput"
        refusal = recorded_objective_refusal(problem, solved_for) if solved_for is not None else None
        if refusal:   # the plan's record, not an argument: the refusal speaks of the plan
            raise InvalidParameterError("plan", f"{refusal}; pass objective= to check it for another objective")
    asked_calls = calls
    calls_taken = calls is None and objective == "latency" and solved_for == "latency"
    if calls_taken:
        calls = recorded_calls(plan)   # the call limit the plan was solved and verified with
    given = {"w_placement": w_placement, "inter_layer": inter_layer, "w_share": w_share}
    solved_backward = recorded_backward(plan)
    options, taken = checked_backward(solved_backward, backward, **given)
    otherwise = solved_otherwise(solved_backward, options)
    try:
        model = split_model(options["w_placement"], options["inter_layer"], options["w_share"])
    except InvalidParameterError as exc:
        if exc.parameter not in taken:
            raise
        from placement.io.plans import plan_error   # a value the plan records, not one the caller passed

        raise plan_error(plan, f"the plan's backward record: {exc}") from None
    if one_of("backward", options["backward"], BACKWARD_MODES) == "split":
        from placement.backward_split import SPLIT_OBJECTIVES
        from placement.verification.split import check_split_plan

        # split because the caller asked, or because the plan records a split solve: the refusals name which
        split = ("backward='split'" if "backward" not in taken
                 else "the plan, which was solved with its backward pass split")
        if "backward" in taken and not problem.is_training:   # the plan's record, not an argument
            raise InvalidParameterError("plan", "records a split-backward solve, which needs a training instance "
                                                "(one with backward nodes); this instance has none "
                                                "(backward='joint' checks the plan's layers only)")
        check_training(problem)
        if "w_share" not in taken:   # the caller's, not the plan's record
            refuse_unused_w_share(problem, w_share)
        if objective not in SPLIT_OBJECTIVES:
            raise InvalidParameterError("objective", f"{objective!r} does not apply to {split} (a split-backward "
                                                     "plan is checked for 'throughput' or 'throughput-gpipe')")
        for name, value, fits in (("contiguity", contiguity, "stages"), ("calls", asked_calls, 1)):
            if value is not None and value != fits:
                raise InvalidParameterError(name, f"does not apply to {split} (a split-backward plan is "
                                                  "checked as a pipeline: contiguity stages, one call per device)")
        for name, value, why in (("infer_from_colours", infer_from_colours, "places no node the plan leaves out"),
                                 ("ledger", ledger, "runs no communication ledger")):
            if value is not None:   # given, whatever its value
                raise InvalidParameterError(name, f"does not apply to {split} (the check of a "
                                                  f"split-backward plan {why})")
        checked = as_plan(plan)
        return _with_record_notes(check_split_plan(problem, checked, model, objective), plan, checked, problem,
                                  otherwise=otherwise)
    refuse_split_options(**given)
    unread = _unread_record_notes(plan, contiguity is None, calls_taken)
    if contiguity is None:
        contiguity = recorded_contiguity(plan) or "none"
    checked = as_plan(plan)
    verification = check_plan(problem, checked, objective=objective, contiguity=contiguity, calls=calls,
                              infer_from_colours=flag("infer_from_colours", False if infer_from_colours is None
                                                      else infer_from_colours),
                              ledger=flag("ledger", False if ledger is None else ledger))
    verification = _with_record_notes(verification, plan, checked, problem, otherwise=otherwise)
    if not unread:
        return verification
    from dataclasses import replace

    return replace(verification, notes=(*unread, *verification.notes))


def _unread_record_notes(plan: Any, contiguity: bool, calls: bool) -> tuple[str, ...]:
    """What a solved plan (a plan document, or a :class:`placement.Result` read from one) records, for the check
    to take, that cannot be read, as ``placement verify`` says it: a contiguity class that names none (where
    ``contiguity``, the check takes the class from the record: it checks class ``none``) and a call limit that
    is no count (where ``calls``, the check takes the limit from the record: it checks none)."""
    import json

    from placement.io.plans import garbled_calls, garbled_contiguity, unread_contiguity_note

    source = "the plan file" if isinstance(plan, dict) else "the result"
    notes = []
    garbled = garbled_contiguity(plan) if contiguity else None
    if garbled is not None:
        notes.append(unread_contiguity_note(source, garbled))
    garbled = garbled_calls(plan) if calls else None
    if garbled is not None:
        notes.append(f"{source}'s 'verified.calls' is no positive integer: {json.dumps(garbled, default=repr)[:40]}; "
                     "checked with no limit on the calls per accelerator")
    return tuple(notes)


def _with_record_notes(result: Any, plan: Any, checked: Any, problem: Any, objective: str | None = None,
                       value: float | None = None, otherwise: tuple[str, str] | None = None) -> Any:
    """``result`` (a verdict, or a run) with the notes of what ``plan``'s record claims that its check refutes
    or cannot check (:func:`placement.io.plans.record_notes`: a claimed value, the instance named, a stage
    count; a verdict's device loads); the claimed value is checked against ``value`` for ``objective``, by default
    the verdict's own (none for an invalid plan, whose value and loads are no verdict on the claims), unless the
    check ran under another backward model than the plan was solved under (``otherwise``,
    :func:`placement.problem.split.solved_otherwise`)."""
    from dataclasses import replace

    from placement.io.plans import record_notes

    loads = None
    if objective is None:
        objective, value = result.objective, result.value if result.valid else None
        report = result.report[0] if result.valid and isinstance(result.report, tuple) else None
        loads = None if report is None else {device.position: device.load for device in report.devices}
    non_empty = sum(1 for device in checked.devices if device.nodes)
    notes = record_notes(plan, objective, value, problem.name, non_empty, otherwise, loads)
    return replace(result, notes=tuple(result.notes) + tuple(notes)) if notes else result


def _verify_parallel(instance: Any, plan: Any, ledger: bool) -> Any:
    """:func:`verify` on a Piper instance: the plan (a plan file or document as ``solve`` writes it, a
    ``ParallelResult`` or a ``ParallelPlan``) checked on the devices and memory it records (the instance's
    where it records none); the claims of its record that the check refutes become its ``notes``, after one that
    names the instance it records where that is another."""
    from dataclasses import replace

    from placement.jsonfile import load_json
    from placement.errors import InvalidPlanError
    from placement.simulation.parallel import read_parallel_plan, recorded_forward_share
    from placement.verification.parallel_check import check_parallel_plan, refuted_claims

    if isinstance(plan, (str, PathLike)):   # read once: the plan and the claims of its record
        plan = load_json(plan, InvalidPlanError)   # its errors name the file
    parallel_plan, devices, plan_memory = read_parallel_plan(plan)
    verified = check_parallel_plan(instance, parallel_plan, devices=devices, memory=plan_memory, ledger=ledger,
                                   forward_share=recorded_forward_share(plan))
    notes = refuted_claims(_parallel_record(plan), verified)
    made_for = parallel_plan_made_for(plan, instance.name)
    if made_for is not None:
        notes.insert(0, made_for_text("the plan", made_for, instance.name))
    return replace(verified, notes=tuple(notes))


def _parallel_record(plan: Any) -> Mapping[str, Any]:
    """What a parallel plan records beside its stages: a ``ParallelResult``'s JSON, a plan document itself, or
    nothing (a bare ``ParallelPlan``)."""
    from placement.parallel.result import ParallelResult

    if isinstance(plan, ParallelResult):
        return plan.to_json()
    return plan if isinstance(plan, Mapping) else {}


def parallel_plan_made_for(plan: Any, instance_name: str) -> str | None:
    """The instance a parallel plan (decoded document or ``ParallelResult``) records it was solved for, where
    that is a name other than ``instance_name``; else ``None``."""
    from placement.io.plans import another_name

    return another_name(_parallel_record(plan).get("instance"), instance_name)


@contextmanager
def _naming_the_instance(made_for: str | None, instance_name: str, named: str) -> Iterator[None]:
    """Refusals of the plan (:class:`InvalidParameterError` about ``plan``) raised within, ending with the instance
    the plan records it was made for where that is another (``made_for``): the likely reason it does not fit,
    as :func:`split` says it."""
    try:
        yield
    except InvalidParameterError as exc:
        if made_for is None or exc.parameter != "plan":
            raise
        raise InvalidParameterError("plan", f"{exc.detail} ({made_for_text(f'the {named}', made_for, instance_name)})"
                                    ) from exc


def _loaded_for_check(instance: Any, plan: Any, accelerators: Any, cpus: Any, memory: Any) -> tuple[Any, Any]:
    """The instance a check of ``plan`` reads (:func:`placement.loading.loaded_as_overridden`, with the
    overrides :func:`taken_overrides` gives), and the plan, read where that took its file."""
    from placement.io.plans import refuse_json_text

    refuse_json_text(plan)
    read: list[Any] = []
    loaded = loaded_as_overridden(instance, lambda: taken_overrides(read, plan, accelerators, cpus, memory))
    return loaded, read[0] if read else plan


def taken_overrides(read: list[Any], plan: Any, accelerators: Any, cpus: Any, memory: Any) -> dict[str, Any]:
    """The device overrides a check of ``plan`` takes: those given, else those the plan records (the plan
    file read once, into ``read``); a solve, without a plan (``None``), takes those given."""
    from placement.io.plans import read_overrides, read_plan_file

    given = {"accelerators": accelerators, "cpus": cpus, "memory": memory}
    if plan is None or any(value is not None for value in given.values()):
        return given
    read.append(read_plan_file(plan))
    return {**given, **read_overrides(read[0])[0]}


def solved_devices(instance: Any, plan: Any, accelerators: Any, cpus: Any, memory: Any) -> Any:
    """The instance a check of ``plan`` runs on: with the device overrides given, else those the plan
    records it was solved with (:func:`placement.io.plans.recorded_overrides`). A record that cannot
    be read, or whose overrides the instance cannot take, is an :class:`InvalidPlanError`."""
    from placement.errors import InvalidInstanceError
    from placement.io.plans import plan_error, read_overrides

    recorded, unread = read_overrides(plan)
    if unread:
        raise plan_error(plan, f"the plan's device overrides cannot be read: {', '.join(unread)} (accelerators "
                               "and cpus are counts, memory a number of bytes, none negative)")
    given = {"accelerators": accelerators, "cpus": cpus, "memory": memory}
    taken = {name: value for name, value in recorded.items() if given[name] is None}
    try:
        return override_devices(instance, **{**given, **taken})
    except (InvalidParameterError, InvalidInstanceError) as exc:
        if not taken or (isinstance(exc, InvalidParameterError) and exc.parameter not in taken
                         and exc.parameter != "instance"):
            raise
        listed = ", ".join(f"{name}={value!r}" for name, value in taken.items())
        raise plan_error(plan, f"the plan records the device overrides {listed}, with which {exc}") from None


@keywords_checked
def simulate(instance: Any, plan: Any, *, schedule: str | None = None, microbatches: int | None = None,
             comm: str | None = None, w_fraction: float | None = None, engine: str | None = None,
             accelerators: int | None = None, cpus: int | None = None, memory: float | None = None,
             memory_limit: float | None = None, keep_tasks: bool | None = None,
             progress: Callable[[str], None] | None = None, chunks: int | None = None,
             forward_share: float | None = None, allreduce: str | None = None,
             unit_scale: float | None = None) -> Any:
    """Run ``plan`` (a valid ``stages`` plan) through a pipeline schedule, micro-batch by micro-batch.

    ``schedule`` defaults to ``stream`` for inference graphs and ``1f1b-async`` for training
    graphs; ``microbatches`` is the number run (default 64; one iteration of that many for the flush
    schedules); ``comm`` is ``inline`` (communication inside each call, as in the load model; the default)
    or ``link`` (a link per device, overlapping compute); ``w_fraction`` the share of each
    backward's compute that is weight-gradient work (the schedules that split the backward; default:
    the weight-gradient times the instance gives its backward nodes, else 0.5; for a
    split-backward plan, the W share of its backward nodes, by default the one the plan records);
    ``engine`` ``heap`` (built in, the default) or ``simpy``; ``accelerators``, ``cpus`` and ``memory`` as in
    ``verify``; ``memory_limit`` the bytes the run may take (default 2 GiB; a longer run is refused
    with :class:`LimitExceededError` before it starts); ``keep_tasks=False`` (default ``True``)
    keeps the figures only (no task table; a steady-state schedule with communication inline then runs
    in memory independent of ``microbatches``); ``progress``, a callable taking one line of text, hears
    how far a long run of that kind has got (every few million tasks), and, on any instance, when a run
    compiles the event engine first (once per install). Returns a
    :class:`placement.simulation.simulator.SimulationResult` (``to_json()`` included), whose ``notes`` end with
    what the plan's record claims that the check before the run refutes, as :func:`verify` notes it.

    A Piper instance (data- and tensor-parallel stages) runs one batch of its parallel plan (a
    plan file or document as ``solve`` writes it for such an instance, the ``ParallelResult`` of
    ``solve``, or a :class:`placement.parallel.plan.ParallelPlan`), checked first on the devices and memory the
    plan records (a ``ParallelResult`` or a plan file records them; a bare ``ParallelPlan`` is checked on
    the instance's): :func:`placement.simulation.parallel.simulate_parallel`, with ``schedule`` (default
    the plan's), ``microbatches`` (default the instance's ``mbsInBatch``), ``chunks``,
    ``forward_share`` (default the one the plan records its time per batch was timed with, else 1/3),
    ``allreduce`` (default ``ring``) and ``unit_scale`` (default 1); it
    returns a :class:`placement.simulation.parallel.ParallelSimulation`, whose ``notes`` begin with one that names
    the instance the plan records it was made for, where that is another, as :func:`verify` notes it. Those four
    options apply to Piper instances only, and ``comm``, ``w_fraction``, ``engine``, the device overrides,
    ``memory_limit`` and ``keep_tasks`` to the others only: each is ``None`` where not given and takes its
    default after the check, so that one given where it does not apply is refused whatever its value, its
    default too (``allreduce="ring"`` on an instance that is not a Piper instance).
    """
    from placement.simulation.program import COMM_MODES, DEFAULT_MEMORY_LIMIT, INLINE
    from placement.simulation.schedules import get_schedule
    from placement.simulation.simulator import ENGINES, simulate as run
    from placement.io.plans import (PlanFile, made_for_another, read_plan_file, recorded_backward, recorded_calls,
                                    recorded_objective)
    from placement.simulation.split import is_split_plan, plan_split_record

    # given: not None, whatever the value (the default too)
    given = {"comm": comm, "w_fraction": w_fraction, "engine": engine, "accelerators": accelerators, "cpus": cpus,
             "memory": memory, "memory_limit": memory_limit, "keep_tasks": keep_tasks}
    parallel = {"chunks": chunks, "forward_share": forward_share, "allreduce": allreduce, "unit_scale": unit_scale}
    loaded, plan = _loaded_for_check(instance, plan, accelerators, cpus, memory)
    if is_piper(loaded):
        unused = next((name for name, value in given.items() if value is not None), None)
        if unused is not None:
            raise InvalidParameterError(unused, "does not apply to a Piper instance (its plans run data- and "
                                                "tensor-parallel stages)")
        from placement.errors import InvalidPlanError
        from placement.jsonfile import load_json
        from placement.simulation.parallel import (FORWARD_SHARE, RING, read_parallel_plan, recorded_forward_share,
                                                   simulate_parallel)

        if isinstance(plan, (str, PathLike)):   # read once: the plan and the share its record was timed with
            plan = load_json(plan, InvalidPlanError)   # its errors name the file
        parallel_plan, devices, plan_memory = read_parallel_plan(plan)
        if forward_share is None:
            forward_share = recorded_forward_share(plan)
        made_for = parallel_plan_made_for(plan, loaded.name)
        with _naming_the_instance(made_for, loaded.name, "plan"):
            simulated = simulate_parallel(loaded, parallel_plan, schedule=schedule, chunks=chunks,
                                          microbatches=microbatches,
                                          forward_share=FORWARD_SHARE if forward_share is None else forward_share,
                                          allreduce=RING if allreduce is None else allreduce,
                                          unit_scale=1.0 if unit_scale is None else unit_scale,
                                          checked_on=(devices, plan_memory), progress=callback("progress", progress))
        if made_for is None:
            return simulated
        from dataclasses import replace

        return replace(simulated, notes=(made_for_text("the plan", made_for, loaded.name),) + simulated.notes)
    unused = next((name for name, value in parallel.items() if value is not None), None)
    if unused is not None:
        raise InvalidParameterError(unused, "applies to Piper instances only (data- and tensor-parallel stages)")
    if microbatches is None:
        microbatches = DEFAULT_MICROBATCHES
    plan = read_plan_file(plan)   # once: for the plan, its record and the claims the record makes
    problem = solved_devices(loaded, plan, accelerators, cpus, memory)
    record = recorded_backward(plan)   # a malformed record is refused whatever the graph, as verify refuses it
    if schedule is None:
        schedule = "1f1b-async" if problem.is_training else "stream"
    given, plan = plan, as_plan(plan)
    # the run measures throughput: a claimed throughput is checked against the verified max load, any other
    # claimed value is left unchecked
    objective = recorded_objective(given) or "throughput"
    # a split record (every split plan has one) is checked before the run, as verify checks it; a joint plan
    # whose record says split (edited) runs its layers as they are placed
    recorded = plan_split_record(record, given) if record.get("mode") == "split" else {}
    variant: dict[str, Any] = recorded if is_split_plan(plan) else {}
    otherwise = None
    if variant:   # the W share and the variant it was solved under
        share = variant.pop("w_share", None)
        if w_fraction is not None and share is not None and w_fraction != share:
            otherwise = f"w_share {share!r}", f"w_fraction {w_fraction!r}"
        w_fraction = share if w_fraction is None else w_fraction
    number("w_fraction", w_fraction, largest=1.0, optional=True)   # one message for 2 and for nan
    named = "plan file" if isinstance(given, PlanFile) else "plan"
    with _naming_the_instance(made_for_another(given, problem.name), problem.name, named):
        result = run(problem, plan, get_schedule(schedule).name,
                     integer("microbatches", microbatches, smallest=1),
                     one_of("comm", INLINE if comm is None else comm, COMM_MODES), w_fraction,
                     one_of("engine", "heap" if engine is None else engine, ENGINES),
                     number("memory_limit", memory_limit, positive=True, optional=True) or DEFAULT_MEMORY_LIMIT,
                     flag("keep_tasks", True if keep_tasks is None else keep_tasks), callback("progress", progress),
                     calls=recorded_calls(given) if objective == "latency" else None, **variant)
    return _with_record_notes(result, given, plan, problem, objective,
                              result.max_load if objective == "throughput" else None, otherwise)


@dataclass(frozen=True)
class HyparResult:
    """Every HyPar/AccPar planner's plan of one network on ``accelerators`` (a power of two) at ``batch``.

    ``plans`` are :class:`placement.solvers.hypar.HyparPlan` objects (per layer, one partition
    type per hierarchy level, and the communication they cost); ``skipped`` maps a planner that
    refused (its search would exceed a limit) to the reason.
    """

    network: Any
    accelerators: int
    batch: int
    types: tuple[str, ...]
    plans: tuple[Any, ...]
    skipped: Mapping[str, str]

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per plan whose ``dp`` choices split the batch into shares that are not whole samples
        (the model counts them as divisible, as HyPar's does; a real run cannot)."""
        from placement.costmodel.hypar import undivided_batch

        notes = []
        for p in self.plans:
            found = undivided_batch(self.network, p.partition, self.batch)
            if found:
                layer, shares = found
                notes.append(f"{p.planner} splits the batch of layer {layer} into {shares} shares, which batch "
                             f"{self.batch} does not divide: its amounts count fractions of a sample")
        return tuple(notes)

    def to_json(self) -> dict[str, Any]:
        """The document ``placement-hypar/1``: setting, per planner the choices, totals and per-level amounts."""
        from placement.costmodel.hypar import BYTES_PER_ELEMENT, SIDES, hierarchy_levels

        def amount(x: Fraction) -> int | float:
            return x.numerator if x.denominator == 1 else float(x)

        return {
            "format": HYPAR_FORMAT, "network": self.network.name, "source": self.network.source,
            "accelerators": self.accelerators, "levels": hierarchy_levels(self.accelerators), "batch": self.batch,
            "types": list(self.types), "bytes_per_element": BYTES_PER_ELEMENT, "sides": SIDES,
            "parameters": self.network.parameters,
            "planners": [{
                "planner": p.planner,
                "choices": [{"layer": layer.name, "levels": list(p.partition[k])}
                            for k, layer in enumerate(self.network.layers)],
                "elements": amount(p.communication.elements), "bytes": amount(p.communication.bytes),
                "levels": [{"level": lv.level, "pairs": lv.pairs, "elements": amount(lv.elements)}
                           for lv in p.communication.levels],
                "runtime_s": p.runtime_s,
            } for p in self.plans],
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        }


@keywords_checked
def hypar(network: str | PathLike[str], *, accelerators: int, batch: int, types: int = 2,
          progress: Callable[[str], None] | None = None) -> HyparResult:
    """Plan hybrid data/model parallelism of a layer chain with every planner of
    :mod:`placement.solvers.hypar` (HyPar/AccPar communication model, :mod:`placement.costmodel.hypar`).

    ``network`` is a bundled network name (``vgg-a``, ``lenet-c``, ...) or a network file;
    ``accelerators`` a power of two from 2 to 2^53; ``batch`` the batch size; ``types`` 2 for HyPar's
    partition types (dp, mp) or 3 for AccPar's (dp, mp, mp-out). ``progress`` hears how far the exact
    planner, the one whose search can take minutes, has come, about once a second after its first.
    """
    from placement.costmodel.hypar import MAX_BATCH, hierarchy_levels, partition_types
    from placement.costmodel.network import load_network
    from placement.solvers.hypar import PLANNERS

    if not isinstance(network, (str, PathLike)):
        raise InvalidParameterError("network", f"must be a network name or file path, not {type(network).__name__}")
    hierarchy_levels(accelerators)   # one message for 1 and for 12: a power of two from 2
    accelerators = int(accelerators)
    batch = integer("batch", batch, smallest=1, largest=MAX_BATCH)
    if isinstance(types, bool) or not isinstance(types, numbers.Integral) or types not in (2, 3):   # not 2.0
        raise InvalidParameterError("types", f"must be 2 (HyPar) or 3 (AccPar), not {shown(types)}")
    callback("progress", progress)
    chain = load_network(network)
    kinds = partition_types(types)
    plans, skipped = [], {}
    for name, plan in PLANNERS.items():
        try:
            plans.append(plan(chain, accelerators, batch, kinds, **({"progress": progress} if name == "exact" else {})))
        except LimitExceededError as exc:
            skipped[name] = str(exc)
    return HyparResult(chain, accelerators, batch, kinds, tuple(plans), skipped)
