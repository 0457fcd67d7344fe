"""``plan_pipeline``: from a PyTorch model to an optimal, verified pipeline plan and its torch stages.

One call imports the model through ``torch.export`` (:func:`placement.io.torch_export.import_torch`,
module granularity by default), charges the gradient exchange of shared parameters
(:mod:`placement.torch.sharing`), solves with :func:`placement.solve` (objective
``throughput`` for ``1f1b`` and inference, ``throughput-gpipe`` for ``gpipe`` training;
``stages=N``: exactly ``N`` non-empty stages), and cuts the exported program at the plan's
stages (:mod:`placement.torch.partition`). The user's model is read, never modified: every
stage module holds its own copies of its tensors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import numbers
import warnings
from typing import Any, Callable, Iterator, Sequence

from placement.errors import InvalidInstanceError, InvalidParameterError, LimitExceededError
from placement.parameters import flag, integer, number, one_of
from placement.result import Status
from placement.torch.schedules import SCHEDULES, STEP_KEYWORDS, check_microbatches, make_schedule
from placement.wording import first_few


class UnprovenPlanWarning(UserWarning):
    """The plan is the best the solver found within the time limit, not a proven optimum."""


class OutputBatchWarning(UserWarning):
    """An output of the model does not have the micro-batch as its first dimension: ``step()`` returns it
    concatenated along that dimension, otherwise than the model does for the whole batch."""


class SampleMixingWarning(UserWarning):
    """The model's outputs for a sample depend on the other samples of its batch (a statistic over the batch,
    in-batch negatives): the pipeline runs each micro-batch alone, so ``step()`` computes, and trains on, what
    each micro-batch's samples give among themselves."""


class TrainingModeWarning(UserWarning):
    """The model is planned for inference (``training=False``) in training mode with modules that behave
    otherwise in evaluation (dropout, batch normalisation): its stages keep the training behaviour."""


class UninitialisedStateWarning(UserWarning):
    """A stage of a model planned on the meta device, made on another device, holds tensors that are no
    entries of the model's ``state_dict`` (non-persistent buffers): uninitialised, and no checkpoint fills them."""


class RandomStateWarning(UserWarning):
    """Stages that draw random numbers (dropout in training) run on ranks whose random states are equal (seeded
    alike): their draws repeat each other's, where the unsplit model's draws are independent."""


class SequenceFirstWarning(UserWarning):
    """A module that takes ``[sequence, batch, ...]`` (``batch_first=False``) reads the model inputs' first
    dimension, which torch's pipeline cuts into micro-batches, as its sequence."""


class CustomGradientWarning(UserWarning):
    """A training plan of a model whose forward applies a custom ``torch.autograd.Function`` or registers a
    gradient hook on a tensor, or whose modules or parameters hold backward hooks: ``torch.export`` keeps the
    operators the Function's forward runs, not its backward, and no hook, so the stages' gradients are the
    derivatives of those operators (not the reversed or passed-through gradient a gradient reversal layer or
    a straight-through estimator returns, nor what a hook makes of it)."""


def takes_hooks(module: Any) -> bool:
    """Whether ``module`` takes forward hooks: a scripted module (``torch.jit.script``) raises torch's
    ``RuntimeError`` instead (a traced one takes them); the checks that hook the modules see nothing of it, and
    the export refuses it, as the model or inside it."""
    import torch

    return not isinstance(module, torch.jit.RecursiveScriptModule)


@contextlib.contextmanager
def custom_gradients(model: Any) -> Iterator[list[str]]:
    """While in the context, what ``model``'s forward does that ``torch.export`` does not keep of its
    backward (:class:`CustomGradientWarning`): one entry per custom ``torch.autograd.Function`` whose output
    an operator or the model's output reads (``"Function 'GradReverse' (module __main__)"``; torch's own
    Functions differentiate their forward and are left out) and per ``register_hook`` call (``"a gradient
    hook registered at FILE:LINE"``), in order of first appearance, after the backward hooks of modules and
    the gradient hooks of parameters and buffers registered before planning, which the stages do not run
    either."""
    import os
    import traceback

    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves

    found: list[str] = []
    library = os.path.dirname(torch.__file__) + os.sep
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def note(entry: str) -> None:
        if entry not in found:
            found.append(entry)

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            if func is torch.Tensor.register_hook:
                frames = [f for f in traceback.extract_stack()[:-1]
                          if not f.filename.startswith((library, own)) and not f.filename.startswith("<")]
                note(f"a gradient hook registered at {frames[-1].filename}:{frames[-1].lineno}" if frames
                     else "a gradient hook")
            read((args, kwargs))
            return func(*args, **(kwargs or {}))

    def read(values: Any) -> None:
        for tensor in tree_leaves(values):
            function = getattr(type(getattr(tensor, "grad_fn", None)), "_forward_cls", None)
            if function is not None and not function.__module__.startswith("torch."):
                note(f"Function {function.__qualname__!r} (module {function.__module__})")

    for name, module in model.named_modules():   # hooks registered before planning, which no stage runs
        if module._backward_hooks or module._backward_pre_hooks:
            note(f"a backward hook of module {name or type(module).__name__!r}")
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor._backward_hooks or getattr(tensor, "_post_accumulate_grad_hooks", None):
            note(f"a gradient hook of {name!r} (the stages hold copies of it)")
    watch = Watch()
    if not takes_hooks(model):
        with watch:
            yield found
        return

    entered = [0]   # forwards under way

    def enter(module: Any, args: Any) -> None:
        watch.__enter__()
        entered[0] += 1

    def leave(module: Any, args: Any, output: Any) -> None:
        try:
            read(output)   # what no operator reads
        finally:
            watch.__exit__(None, None, None)
            entered[0] -= 1

    # the mode watches the model's forward alone (its hooks included), not the export's own work before and
    # after it, nor what runs in the context afterwards: a torch function mode sends every call torch makes
    # through Python, which made the export of a deep model a third slower
    depth = torch._C._len_torch_function_stack()
    handles = [model.register_forward_pre_hook(enter, prepend=True),
               model.register_forward_hook(leave, always_call=True)]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()
        if entered[0]:   # a forward that raised while torch traced it skips even the always-called hooks, and
            # the tracer's own modes, left in turn, took the mode off the stack in their place: what is left
            # above the stack as it was is theirs
            while torch._C._len_torch_function_stack() > depth:
                torch._C._pop_torch_function_stack()


def custom_gradient_note(found: list[str]) -> str | None:
    """The warning (:class:`CustomGradientWarning`) for what :func:`custom_gradients` found, or ``None``."""
    if not found:
        return None
    return (f"the stages run none of {first_few(found)}: torch.export keeps the operators a custom "
            "Function's forward runs, not its backward, and no gradient hook, so the stages' gradients are the "
            "derivatives of those operators, which differ wherever a backward or a hook returns another gradient "
            "(a gradient reversal, a straight-through estimator, a clipping hook); write it as operators whose "
            "derivative is the gradient wanted, or apply it outside the pipeline")


@contextlib.contextmanager
def sequence_first_reads(model: Any) -> Iterator[list[tuple[str, str, tuple[int, ...]]]]:
    """While in the context, what each module of ``model`` built with ``batch_first=False``
    (``nn.MultiheadAttention``, ``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) is called with: its name, its type and
    its first input's shape, one entry per call (the export runs the model's forward)."""
    import torch

    calls: list[tuple[str, str, tuple[int, ...]]] = []

    def hook(name: str, module: Any, args: tuple, kwargs: dict) -> None:
        first = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(first, torch.Tensor) and first.dim() >= 2:
            calls.append((name, type(module).__name__, tuple(int(d) for d in first.shape)))

    handles = [module.register_forward_pre_hook(functools.partial(hook, name), with_kwargs=True)
               for name, module in model.named_modules()
               if getattr(module, "batch_first", None) is False and takes_hooks(module)]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def sequence_first_note(calls: list[tuple[str, str, tuple[int, ...]]], batch: int) -> str | None:
    """The warning (:class:`SequenceFirstWarning`) for the first call of :func:`sequence_first_reads` whose
    sequence dimension is the micro-batch's size ``batch``, the inputs' first dimension; ``None`` where none
    is (a model that makes its inputs sequence-first inside its forward passes ``[sequence, batch]``). Where
    the second dimension is ``batch`` too, the shapes cannot tell the two layouts apart, and the warning
    says so."""
    wrong = [(name, kind, shape) for name, kind, shape in calls if shape[0] == batch]
    if not wrong:
        return None
    name, kind, shape = wrong[0]
    more = len({n for n, _, _ in wrong}) - 1
    others = f" (and {more} more such module{'s' * (more > 1)})" if more else ""
    both = (" (so is its second: where forward makes the inputs sequence-first for it, the sequence is as long as "
            "the micro-batch and this does not apply)") if len(shape) > 1 and shape[1] == batch else ""
    return (f"nn.{kind} {name!r}{others} takes [sequence, batch, ...] (batch_first=False) and is given {list(shape)}, "
            f"whose first dimension is the micro-batch's ({batch}){both}: torch's pipeline cuts every input along its "
            "first dimension into micro-batches, so an input laid out [sequence, batch, ...] would be cut along its "
            "sequence; give the model batch-first inputs (batch_first=True, or transpose inside forward)")


def training_mode_note(program: Any, training: bool) -> str | None:
    """What an inference plan (``training=False``) of the exported ``program`` keeps of training
    (:class:`TrainingModeWarning`), or ``None``: its operators that behave as in training
    (:func:`placement.torch.partition.training_behaviour`: random dropout, batch statistics), and the
    modules whose forward runs them, found in the graph whatever made them so (the model or a submodule left
    in training mode, attention's dropout, a functional dropout given ``training=True``)."""
    from placement.torch.partition import training_behaviour

    if training:
        return None
    sites: dict[str, list[str]] = {}
    for what, node in training_behaviour(program):
        stack = list((node.meta.get("nn_module_stack") or {}).values())
        path, kind = stack[-1] if stack else ("", None)
        kind = str(getattr(kind, "__name__", kind)).rsplit(".", 1)[-1]
        site = f"{path!r} ({kind})" if path else "the model's own forward"
        if site not in sites.setdefault(what, []):
            sites[what].append(site)
    if not sites:
        return None
    listed = []
    for what, where in sites.items():
        listed.append(f"{what} in {first_few(where)}")
    return (f"the model is planned for inference (training=False), but its forward runs {'; '.join(listed)} as in "
            "training, and so do the stages (random dropout, batch statistics updated); call model.eval() before "
            "planning to run evaluation (a functional dropout follows it given training=self.training)")


class PipelinePlan:
    """A verified plan of a model and the torch pipeline stages that run it.

    ``result`` is the :class:`placement.Result` (its ``stats["shared_parameters"]`` lists the
    shared parameters by stage); ``num_stages`` the number of stages; ``shared_parameters``
    maps each trained parameter held by several stages to those stages; ``relayed[b]`` names
    the values stage ``b + 1`` receives from stage ``b``; ``imported`` is the imported model
    (its instance, with the exchange nodes, in ``instance``); ``transfers`` what each stage sends
    and receives at run time against what the plan charges (:mod:`placement.torch.relays`; their
    loads are also ``result.stats["runtime_loads"]``, and a :class:`~placement.torch.relays.RelayWarning`
    says where relayed values raise the largest load).
    """

    def __init__(self, result: Any, partition: Any, imported: Any, instance: dict, schedule: str,
                 microbatches: int) -> None:
        self.result = result
        self.partition = partition
        self.imported = imported
        self.instance = instance
        self.default_schedule = schedule
        self.microbatches = microbatches
        self.num_stages = len(partition.stages)
        holders = partition.holders()
        trained = partition.trained()
        self.shared_parameters = {name: stages for name, stages in sorted(holders.items())
                                  if len(stages) > 1 and name in trained}
        self.relayed = partition.relayed()
        self._exchanges: dict[int, Any] = {}
        self.transfers: list[Any] = []

    def shared_settings(self) -> list[tuple[str, tuple[int, ...]]]:
        """What every rank's plan must share, each as integers (:func:`first_disagreement`), in the order a
        disagreement is named: the schedule (its index in ``SCHEDULES``), the micro-batches per step, the number of
        stages, and the plan (a SHA-256 digest of its stages' device types and nodes, the program's operators of each
        stage, and the names, shapes and data types of the values each stage takes and returns)."""
        import hashlib

        import torch

        def described(values: Any) -> list[tuple[str, Any, str]]:
            shown = []
            for value in values:
                example = value.meta.get("val")
                tensor = isinstance(example, torch.Tensor)
                shown.append((value.name, tuple(example.shape) if tensor else None, str(example.dtype) if tensor else
                              type(example).__name__))
            return shown

        plan = repr(([(s.device_type, sorted(s.nodes)) for s in self.result.plan],
                     [([n.name for n in stage.nodes], described(stage.inputs), described(stage.outputs))
                      for stage in self.partition.stages]))
        return [("schedule", (SCHEDULES.index(self.default_schedule),)), ("microbatches", (self.microbatches,)),
                ("stages", (self.num_stages,)), ("plan", tuple(hashlib.sha256(plan.encode()).digest()))]

    def shared_values(self, stage_index: int) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
        """Per tensor that two or more stages hold (:meth:`placement.torch.partition.Partition.holders`: tied
        parameters, buffers read by several stages), in name order, for :func:`first_disagreement`: its name, a
        SHA-256 digest of the values stage ``stage_index`` holds (:func:`tensor_digest`; zeros where that stage holds
        none of it) and the stages holding it, whose ranks must hold equal values."""
        from placement.torch.partition import shared_tensors

        return [(name, tensor_digest(tensor) if stage_index in holders else (0,) * 4, holders)
                for name, (holders, tensor) in shared_tensors(self.partition).items()]

    def stage_module(self, stage_index: int, device: Any = None) -> Any:
        """Stage ``stage_index`` as a ``torch.fx.GraphModule`` with its own copies of its tensors (on
        ``device``); its ``state_dict`` keys are the model's, so ``module.load_state_dict(full,
        strict=False)`` loads a full checkpoint of the model, and the stages' ``state_dict`` keys together
        are the model's (tied tensors under their first name): the entries no stage reads are kept by one
        stage (:meth:`placement.torch.partition.Partition.unread`). The tensors of a model on the meta device
        are uninitialised on ``device``, for a checkpoint to fill."""
        integer("stage_index", stage_index)
        if stage_index >= self.num_stages:
            raise InvalidParameterError("stage_index", f"must be below the number of stages ({self.num_stages}), "
                                                       f"got {stage_index}")
        from placement.torch.partition import stage_module, unfilled

        device = None if device is None else torch_device(device)
        module = stage_module(self.partition, stage_index, device)
        missing = () if device is None or device.type == "meta" else unfilled(self.partition, stage_index)
        if missing:
            names = ", ".join(repr(name) for name in missing)
            warnings.warn(f"stage {stage_index} on {device} holds {names}, which the model on the meta device has "
                          "outside its state_dict (non-persistent buffers, or tensors the program keeps as "
                          "constants): uninitialised there, and load_state_dict cannot fill them; copy their values "
                          "in before the first step (module.get_buffer(name).copy_(value), from the model made on a "
                          "real device), or give the model these tensors on a real device before planning",
                          UninitialisedStateWarning, stacklevel=2)
        return module

    def build_stage(self, stage_index: int, device: Any, group: Any = None) -> Any:
        """A ``torch.distributed.pipelining.PipelineStage`` running stage ``stage_index`` on ``device``.

        Stage ``i`` runs on rank ``i`` of ``group`` (default: the default process group), which
        must have :attr:`num_stages` ranks, one per stage (torch's ``PipelineStage`` refuses a larger
        group); this process must be that rank. Every rank of the group calls it: before any check one rank alone
        could fail, the ranks gather their plans' settings (:meth:`shared_settings`) and stage indices and refuse
        together where they differ; then the holders of each tensor several stages hold compare digests of its
        values (:meth:`shared_values`), and every rank refuses where they differ.
        """
        import torch
        import torch.distributed as dist
        from torch.distributed.pipelining import PipelineStage

        from placement.torch.partition import stage_examples
        from placement.torch.sharing import GradientExchange

        device = torch_device(device)
        if not dist.is_initialized():
            raise InvalidParameterError("group", "needs an initialised process group "
                                                 "(torch.distributed.init_process_group)")
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        # before any check that one rank alone fails (the stage's index among them): the other ranks would wait
        # in this comparison until the group's timeout
        given = isinstance(stage_index, numbers.Integral) and not isinstance(stage_index, bool)   # numpy's too
        offset = max(-LARGEST_OFFSET, min(LARGEST_OFFSET, int(stage_index) - rank)) if given else NOT_AN_INDEX
        differing = first_disagreement([*self.shared_settings(), ("stage_index", (offset,))], device, group)
        if differing is not None and differing[0] in ("schedule", "microbatches"):
            name, other, theirs = differing
            mine = {"schedule": self.default_schedule, "microbatches": self.microbatches}[name]
            theirs = SCHEDULES[theirs[0]] if name == "schedule" else theirs[0]
            raise InvalidParameterError(name, f"of plan_pipeline differs between the ranks of the group: rank {other} "
                                              f"planned with {name}={theirs!r}, this rank (rank {rank}) with "
                                              f"{mine!r}; the stages run each step's micro-batches in one schedule "
                                              "together (stages that disagree wait for each other forever or mix "
                                              f"steps): give plan_pipeline the same {name} on every rank")
        if differing is not None and differing[0] == "stages":
            _, other, theirs = differing
            raise InvalidParameterError("stages", f"of plan_pipeline differs between the ranks of the group: rank "
                                                  f"{other} planned {theirs[0]} stage{'' if theirs[0] == 1 else 's'}, "
                                                  f"this rank (rank {rank}) {self.num_stages}; the stages of one "
                                                  "pipeline run on its ranks together: give plan_pipeline the same "
                                                  "stages, example inputs and devices on every rank (and a time_limit "
                                                  "that proves the optimum)")
        if differing is not None and differing[0] == "plan":
            raise InvalidParameterError("group", f"has ranks that planned different pipelines: rank {differing[1]}'s "
                                                 f"plan is not this rank's (rank {rank}, {self.num_stages} stages, "
                                                 f"status {str(self.result.status)!r}). Each process ran "
                                                 "plan_pipeline on its own: with other example inputs or devices, "
                                                 "or a search stopped by its time limit at another plan; give every "
                                                 "rank the same inputs, and a time_limit that proves the optimum")
        if differing is not None:   # the stage index
            _, other, theirs = differing
            asked = "no integer" if theirs[0] == NOT_AN_INDEX else f"stage {theirs[0] + other}"
            raise InvalidParameterError("stage_index", f"of build_stage must be its rank in the group on every "
                                                       f"rank (stage i runs on rank i): rank {other} asked for "
                                                       f"{asked}, this rank (rank {rank}) for {stage_index!r}")
        if size != self.num_stages:
            ranks = f"{size} rank{'' if size == 1 else 's'}"
            more = ("" if size < self.num_stages else
                    f": make a group of the first {self.num_stages} ranks with torch.distributed.new_group on every "
                    "process and pass it as group")
            raise InvalidParameterError("group", f"has {ranks}; the plan has {self.num_stages} stages, one per "
                                                 f"rank{more}")
        integer("stage_index", stage_index)
        if rank != stage_index:
            raise InvalidParameterError("stage_index", f"{stage_index} runs on rank {stage_index} of the group; this "
                                                       f"process is rank {rank}")
        shared = self.shared_values(stage_index)
        differing = first_disagreement(shared, device, group) if shared else None
        if differing is not None:
            name, other, _ = differing
            holders = dict((n, h) for n, _, h in shared)[name]
            ours = rank if rank in holders else holders[0]
            listed = ", ".join(map(str, holders[:-1])) + f" and {holders[-1]}"
            where = "this rank" if ours == rank else f"rank {ours} (this rank, rank {rank}, holds none of it)"
            raise InvalidParameterError("model", f"holds other values of {name!r} on rank {other} than on {where}: "
                                                 f"stages {listed} each hold a copy of that one tensor of the model, "
                                                 "and copies that start apart train apart (a step adds the same "
                                                 "gradient to each). Every process planned its own model, and these "
                                                 "were made apart (a rank-dependent seed before the model was built, "
                                                 "or other weights loaded): seed every rank alike before building the "
                                                 "model (and apart, for dropout, only after it), or load the same "
                                                 "weights into it on every rank before plan_pipeline")
        module = self.stage_module(stage_index, device)
        note = random_state_note(self.partition, stage_index, device, group)
        if note is not None:
            warnings.warn(note, RandomStateWarning, stacklevel=2)
        examples = stage_examples(self.partition, stage_index, device)
        static = {} if examples is None else {"input_args": examples[0], "output_args": examples[1]}
        stage = PipelineStage(module, stage_index, self.num_stages, device, group=group, **static)
        params = dict(module.named_parameters())
        entries = [(params[name], holders) for name, holders in self.shared_parameters.items()
                   if stage_index in holders]

        def rank_of(s: int) -> int:
            return s if group is None else dist.get_global_rank(group, s)

        self._exchanges[id(stage)] = (stage, GradientExchange(stage_index, entries, rank_of, group))
        return stage

    def schedule(self, stage: Any, loss_fn: Callable | None, schedule: str | None = None, scale_grads: bool = False,
                 microbatches: int | None = None) -> Any:
        """The torch schedule (``ScheduleGPipe`` or ``Schedule1F1B``) for a stage of :meth:`build_stage`,
        with ``microbatches`` micro-batches per ``step`` (default: the plan's); see
        :mod:`placement.torch.schedules`. The plan charged each micro-batch its share of a shared parameter's
        gradient exchange for the plan's number: another number runs the same stages, not re-planned. Every rank
        of the stage's group calls it: the schedule, the micro-batches, whether there is a ``loss_fn`` (a backward
        pass) and ``scale_grads`` must be the same on every rank, and a rank whose differ is named."""
        built = self._exchanges.get(id(stage))
        if built is None or built[0] is not stage:
            raise InvalidParameterError("stage", "must be a stage made by this plan's build_stage")
        kind = schedule or self.default_schedule
        count = self.microbatches if microbatches is None else microbatches
        settings = {"schedule": SCHEDULES.index(kind) if isinstance(kind, str) and kind in SCHEDULES else -1,
                    "microbatches": count if isinstance(count, int) and not isinstance(count, bool) else -1,
                    "loss_fn": int(loss_fn is not None),
                    "scale_grads": int(scale_grads) if isinstance(scale_grads, bool) else -1}
        # before the checks of the values, which one rank alone may fail: every rank takes part
        differing = first_disagreement([(name, (code,)) for name, code in settings.items()], stage.device, stage.group)
        if differing is not None:
            name, other, theirs = differing

            def shown(code: int) -> str:
                if name == "loss_fn":
                    return "a loss_fn (forward and backward)" if code else "none (the forward alone)"
                if code < 0:
                    return "one refused"
                return repr(SCHEDULES[code] if name == "schedule" else bool(code) if name == "scale_grads" else code)

            raise InvalidParameterError(name, f"of schedule() differs between the ranks of the group: rank {other} "
                                              f"runs {shown(theirs[0])}, this rank (rank {stage.stage_index}) "
                                              f"{shown(settings[name])}; the stages run each step together (stages "
                                              "that disagree wait for each other forever, mix steps or scale their "
                                              f"gradients apart): give schedule() the same {name} on every rank")
        flag("scale_grads", scale_grads)
        return make_schedule(stage, loss_fn, kind, count, scale_grads, built[1])

    def clip_grad_norm_(self, stage: Any, max_norm: float, norm_type: float = 2.0,
                        error_if_nonfinite: bool = False) -> Any:
        """``torch.nn.utils.clip_grad_norm_`` over the whole model: the norm of the gradients of every stage's
        parameters, a shared parameter's once (its holders hold the same sum after a step), and every stage's
        gradients scaled by ``max_norm / (norm + 1e-6)`` where that is below 1. Every rank of the stage's group
        calls it (after ``step()``, before the optimiser's); returns that norm, in torch's data type for it
        (:func:`gradient_dtype`). Clipping each stage by the norm of its own gradients scales each by another
        factor, not the unsplit model's."""
        import torch
        import torch.distributed as dist
        from torch.nn.utils import clip_grads_with_norm_, get_total_norm

        built = self._exchanges.get(id(stage))
        if built is None or built[0] is not stage:
            raise InvalidParameterError("stage", "must be a stage made by this plan's build_stage")
        number("max_norm", max_norm)
        if norm_type != float("inf"):
            number("norm_type", norm_type, positive=True)
        flag("error_if_nonfinite", error_if_nonfinite)
        norm_type = float(norm_type)
        params = [p for p in stage.submod.parameters() if p.grad is not None]
        named = dict(stage.submod.named_parameters())
        later = {id(named[name]) for name, holders in self.shared_parameters.items()
                 if name in named and holders[0] != stage.stage_index}   # counted by the first holder
        grads = [p.grad for p in params if id(p) not in later]
        local = get_total_norm(grads, norm_type) if grads else torch.zeros((), device=stage.device)
        local = local.to(device=stage.device, dtype=torch.float64)
        if norm_type == float("inf"):
            dist.all_reduce(local, op=dist.ReduceOp.MAX, group=stage.group)
            total = local
        else:
            power = local ** norm_type
            dist.all_reduce(power, op=dist.ReduceOp.SUM, group=stage.group)
            total = power ** (1.0 / norm_type)
        total = total.to(gradient_dtype(grads, stage.device, stage.group))
        if error_if_nonfinite and not torch.isfinite(total):
            raise InvalidParameterError("error_if_nonfinite", f"is set and the total norm of order {norm_type:g} of "
                                                              f"the gradients is {float(total)}")
        if params:
            clip_grads_with_norm_(params, max_norm, total)
        return total


def gradient_dtype(grads: list[Any], device: Any, group: Any) -> Any:
    """The data type of ``torch.nn.utils.clip_grad_norm_``'s norm of the gradients of every rank of ``group``
    (``grads`` this rank's): their real types promoted (float64 for float64 gradients, float32 where float16
    meets bfloat16), the default type where no rank has one. Every rank of the group calls it."""
    import functools

    import torch
    import torch.distributed as dist

    kinds = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
    held = {real.get(g.dtype, g.dtype) for g in grads}
    present = torch.tensor([kind in held for kind in kinds], dtype=torch.int32, device=device)
    dist.all_reduce(present, op=dist.ReduceOp.MAX, group=group)
    found = [kind for kind, flag in zip(kinds, present.tolist()) if flag]
    return functools.reduce(torch.promote_types, found) if found else torch.get_default_dtype()


#: what :meth:`PipelinePlan.build_stage` gathers for a stage index that is no integer
NOT_AN_INDEX = -(2 ** 62)
#: the largest offset of a stage index from its rank that it gathers as it is (larger ones are gathered as this, so
#: that a huge integer fits the 64-bit integers every rank gathers)
LARGEST_OFFSET = 2 ** 61


def first_disagreement(settings: Sequence[tuple[str, Sequence[int]] | tuple[str, Sequence[int], Sequence[int]]],
                       device: Any, group: Any) -> tuple[str, int, tuple[int, ...]] | None:
    """The first of ``settings`` (each its name and the integers that stand for this rank's value) on which a rank
    of ``group`` differs from this one: its name, the first such rank and that rank's integers; ``None`` where every
    rank's are this rank's. A setting with a third entry, ranks of the group, is compared among those ranks alone
    (the others' integers are not read): with this rank's where it is one of them, else with the first one's.
    Gathered on ``device``, the stage's (a tensor collective runs on any backend); every rank of the group calls
    it, with the same names and as many integers for each."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor([code for _, codes, *_ in settings for code in codes], dtype=torch.int64, device=device)
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    everyone = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(everyone, mine, group=group)
    start = 0
    for name, codes, *among in settings:
        end = start + len(codes)
        ranks = [k for k in among[0] if k < size] if among else list(range(size))
        ours = rank if rank in ranks or not ranks else ranks[0]
        other = next((k for k in ranks if not torch.equal(everyone[k][start:end], everyone[ours][start:end])), None)
        if other is not None:
            return name, other, tuple(int(code) for code in everyone[other][start:end].tolist())
        start = end
    return None


def tensor_digest(tensor: Any) -> tuple[int, ...]:
    """A SHA-256 digest of ``tensor``'s data type, layout, shape and bytes, as four signed 64-bit integers; a tensor
    on the meta device, which holds no values, digests its type and shape alone; a sparse one (a graph's adjacency),
    which has no strided memory, the bytes of its coalesced indices and values."""
    import hashlib

    import torch

    digest = hashlib.sha256(repr((str(tensor.dtype), str(tensor.layout), tuple(tensor.shape))).encode())
    if tensor.is_meta:
        parts = []
    elif tensor.layout == torch.strided:   # the bytes read in place: no copy of a tensor already in memory, densely
        parts = [tensor.detach()]
    else:
        coalesced = tensor.detach().to_sparse_coo().coalesce()
        parts = [coalesced.indices(), coalesced.values()]
    for part in parts:
        digest.update(part.cpu().contiguous().flatten().view(torch.uint8).numpy().data)
    return tuple(int.from_bytes(digest.digest()[k:k + 8], "little", signed=True) for k in range(0, 32, 8))


def gathered_digests(data: bytes, device: Any, group: Any) -> tuple[Any, list[Any]]:
    """This rank's SHA-256 digest of ``data`` and every rank's of ``group``, in rank order: tensors of 32 integers
    on ``device``, the stage's (a tensor collective runs on any backend). Every rank of the group calls it."""
    import hashlib

    import torch
    import torch.distributed as dist

    mine = torch.tensor(list(hashlib.sha256(data).digest()), dtype=torch.int64, device=device)
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, mine, group=group)
    return mine, everyone


def random_state_note(part: Any, stage_index: int, device: Any, group: Any) -> str | None:
    """What :class:`RandomStateWarning` says to the rank of stage ``stage_index``, or ``None``: where stages draw
    random numbers (:func:`placement.torch.partition.random_operators`), every rank of ``group`` gathers a digest
    of its random state on ``device`` (every rank plans alike, so every rank takes part or none), and this stage,
    where it draws, is told of the other drawing stages whose state is its own."""
    import torch

    from placement.torch.partition import random_operators

    drawing = random_operators(part)
    if not drawing:
        return None
    try:
        state = torch.get_rng_state() if device.type == "cpu" else torch.get_device_module(device.type).get_rng_state(
            device)
        data: bytes | None = state.cpu().numpy().tobytes()
    except (AttributeError, RuntimeError, TypeError):   # a device type without a generator of its own: not compared
        data = None
    mine, everyone = gathered_digests(b"" if data is None else data, device, group)   # every rank takes part
    if stage_index not in drawing or data is None:
        return None
    alike = [s for s in drawing if s != stage_index and torch.equal(everyone[s], mine)]
    if not alike:
        return None
    others = ", ".join(map(str, alike))
    return (f"stage {stage_index} draws random numbers ({', '.join(drawing[stage_index])}) from the random state of "
            f"stage{'s' * (len(alike) > 1)} {others} (their ranks were seeded alike): their draws would repeat each "
            "other's (a dropout mask of one stage the mask of a layer of the same shape in another), where the "
            "unsplit model draws them independently; seed each rank differently after building the model and "
            "before build_stage (torch.manual_seed(seed + rank))")


def torch_device(device: Any) -> Any:
    """``device`` as a ``torch.device``; an :class:`InvalidParameterError` for what torch does not read as one."""
    import torch

    try:
        found = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InvalidParameterError("device", f"must be a torch device ('cpu', 'cuda:0', a torch.device), "
                                              f"not {device!r} ({str(exc).splitlines()[0]})") from None
    if found.type == "cuda" and not torch.cuda.is_available():
        raise InvalidParameterError("device", f"names {str(found)!r}, but this torch sees no CUDA device "
                                              f"(torch {torch.__version__})")
    return found


def cpu_between_accelerators(plan: Any) -> bool:
    """Whether a stage of ``plan`` (devices in pipeline order) runs on a CPU between two accelerator
    stages: no pipeline runtime sends activations from an accelerator to a CPU and back."""
    from placement.io.exporters import cpu_between

    return cpu_between([device.type for device in plan.devices if device.nodes]) is not None


def separable_parts(problem: Any) -> int:
    """How many stages the graph can be cut into at most: its parts that a pipeline can separate (colour
    classes, with what they close cycles with, stay on one device)."""
    from placement.solvers.ideals import contract

    return contract(problem, merge_zero_cost=False).size


def accelerators_only(problem: Any, optimum: Any, devices: str, most: int | None = None, **options: Any) -> Any:
    """The plan on the accelerators alone, where the optimum ``optimum`` puts a CPU stage between two
    accelerator stages; ``feasible``, its bound the optimum's (every pipeline the runtime executes is
    a plan, so none is faster), the note saying why. Plans with CPU stages only at the ends are not
    searched. ``most``: the plan has at most this many stages (1F1B's micro-batches, where the number
    of stages is left open: :func:`best_within_stages`)."""
    import placement

    try:
        found = placement.solve(problem, cpus=0, **options)
        if most is not None and found.ok and found.num_stages > most:
            found = best_within_stages(problem, most, cpus=0, **{k: v for k, v in options.items() if k != "stages"})
        why = (found.message or str(found.status)) if found is not None else (
            f"none of at most {most} stage{'s' if most != 1 else ''}, the most that 1f1b runs with {most} "
            f"micro-batch{'es' if most != 1 else ''}")
    except InvalidParameterError as exc:      # more stages asked for than accelerators, or a node only a CPU holds
        held_by_cpus_only = isinstance(exc.__cause__, InvalidInstanceError)
        found, why = None, str(exc.__cause__) if held_by_cpus_only else f"{exc.parameter} {exc.detail}"
    if found is None or not found.ok:
        raise InvalidParameterError("devices", f"{devices!r}: the optimal plan runs a CPU stage between "
                                               f"accelerator stages, which no pipeline runtime executes, and the "
                                               f"accelerators alone hold no plan ({why})")
    bound = min(optimum.bound, found.value)
    note = (f"the optimum ({optimum.value:.6g}) runs a CPU stage between accelerator stages, which no pipeline "
            f"runtime executes: this is the best plan on the accelerators alone")
    return dataclasses.replace(found, status=Status.FEASIBLE if found.value > bound else found.status, bound=bound,
                               gap=(found.value - bound) / found.value if found.value > 0 else 0.0,
                               message="; ".join(m for m in (found.message, note) if m))


def best_within_stages(problem: Any, most: int, **options: Any) -> Any:
    """The best plan of at most ``most`` non-empty stages: the best of the optima with exactly
    ``1 … most`` stages, optimal when each of them is proven (or proven infeasible), else feasible
    with the least of their bounds. Where none was found: ``None`` when each stage count is proven
    infeasible, else the first search that stopped without a plan (a time limit)."""
    import placement

    found = []
    for count in range(1, most + 1):
        try:
            found.append(placement.solve(problem, stages=count, **options))
        except InvalidParameterError:      # more stages than devices or nodes
            break
    plans = [r for r in found if r.ok]
    if not plans:
        return next((r for r in found if r.status != Status.INFEASIBLE), None)
    best = min(plans, key=lambda r: r.value)
    bound = min((r.bound for r in found if r.status != Status.INFEASIBLE), default=best.value)
    bound = min(bound, best.value)
    proven = all(r.status in (Status.OPTIMAL, Status.INFEASIBLE) for r in found)
    note = (f"1f1b with {most} micro-batch{'es' if most > 1 else ''} runs at most {most} "
            f"stage{'s' if most > 1 else ''}: the best such plan")
    return dataclasses.replace(best, status=Status.OPTIMAL if proven else Status.FEASIBLE, bound=bound,
                               gap=(best.value - bound) / best.value if best.value > 0 else 0.0,
                               message="; ".join(m for m in (best.message, note) if m))


def tensor_inputs(args: Sequence[Any], kwargs: dict, torch: Any) -> list[tuple[str, str, Any]]:
    """Each tensor input that torch's pipeline runtime splits into micro-batches (positional or keyword, and
    those inside an input's dict, list or tuple), as ``(where, parameter, tensor)``: ``where`` its place
    (``args[0]``, ``kwargs['mask']``), ``parameter`` ``"args"`` or ``"kwargs"``."""
    from torch.utils._pytree import keystr, tree_flatten_with_path

    return [(f"{parameter}{keystr(path)}", parameter, value)
            for parameter, given in (("args", list(args)), ("kwargs", kwargs))
            for path, value in tree_flatten_with_path(given)[0] if isinstance(value, torch.Tensor)]


def first_dimension_outlier(inputs: list[tuple[str, str, Any]]) -> tuple[tuple, tuple] | None:
    """The first of :func:`tensor_inputs`' ``inputs`` whose first dimension is not the first input's, with the
    first input; ``None`` where all agree."""
    for entry in inputs[1:]:
        if entry[2].shape[0] != inputs[0][2].shape[0]:
            return entry, inputs[0]
    return None


def check_micro_batch_dimension(args: Sequence[Any], kwargs: dict, torch: Any, microbatches: int = 2) -> int | None:
    """Refuse tensor inputs that torch's pipeline runtime cannot split into micro-batches: it splits every
    tensor input, positional or keyword (those inside a keyword input's dict, list or tuple too), along its
    first dimension, so each needs one and a strided layout (no sparse or nested tensor, which it cannot cut, nor
    gloo send), and, where a step has more than one micro-batch (``microbatches``),
    of one size (the micro-batch's; an input whose first dimension is something else, as an LSTM's initial
    state ``[layers, batch, hidden]``, would be split along the wrong dimension; into one micro-batch, it is
    not cut). Returns the first tensor input's first dimension, the micro-batch's samples (``None`` without
    a tensor input)."""
    inputs = tensor_inputs(args, kwargs, torch)
    for where, parameter, value in inputs:
        if value.is_nested or value.layout != torch.strided:   # no first dimension to cut, nothing gloo sends
            kind = "a nested tensor" if value.is_nested else f"a tensor of layout {value.layout}"
            advice = ("pad it (torch.nested.to_padded_tensor) and give a mask of the padding beside it"
                      if value.is_nested else
                      "give it dense (to_dense()), or make a sparse tensor that every sample shares a buffer of "
                      "the model")
            raise InvalidParameterError(parameter, f"holds {where}, {kind}, which the pipeline runtime cannot split "
                                                   "into micro-batches (it cuts every tensor input along its first "
                                                   f"dimension, and sends strided tensors only): {advice}")
        if value.dim() == 0:
            raise InvalidParameterError(parameter, f"holds the 0-dimensional tensor {where}, which the pipeline "
                                                   "runtime cannot split into micro-batches (it splits every tensor "
                                                   "input along its first dimension): give it a first dimension of "
                                                   "the micro-batch's size, or make it a buffer of the model")
    outlier = first_dimension_outlier(inputs) if microbatches > 1 else None
    if outlier is not None:
        (where, parameter, value), (first_where, _, first) = outlier
        raise InvalidParameterError(parameter, f"holds {where} of first dimension {value.shape[0]}, but "
                                               f"{first_where}'s is {first.shape[0]}: the pipeline runtime "
                                               "splits every tensor input into micro-batches along its first "
                                               "dimension, so each must have the micro-batch as its first "
                                               "dimension (move the batch of an input such as an LSTM's initial "
                                               "state to the front; an input no sample owns, such as an attention "
                                               "mask all samples share, belongs in the model: a buffer, or made "
                                               "in forward)")
    return int(inputs[0][2].shape[0]) if inputs else None


def plan_pipeline(model: Any, args: Sequence[Any], kwargs: dict | None = None, *, devices: str = "h100:4",
                  training: bool = True, microbatches: int = 8, stages: int | None = None, schedule: str = "1f1b",
                  time_limit: float | None = None, granularity: str = "module") -> PipelinePlan:
    """Plan ``model`` as a pipeline over ``devices`` (module docstring, ``docs/pytorch.md``).

    ``args``/``kwargs`` are one micro-batch; ``devices`` is ``"<id>:<count>[,<id>:<count>]"``
    (:mod:`placement.torch.devices`); ``microbatches`` the micro-batches per ``step`` of
    :meth:`PipelinePlan.schedule`; ``stages=N`` exactly ``N`` non-empty stages; ``schedule``
    ``"1f1b"`` or ``"gpipe"``; ``time_limit`` bounds each MILP solve where one runs (the plan may take
    several: one per stage count when the stages must not outnumber the micro-batches, and again on the
    accelerators alone); ``granularity``
    ``"module"`` or ``"operator"`` (:mod:`placement.io.op_grouping`).
    """
    import placement
    from placement.io.exporters import layout_from_instance, pipe_split_module
    from placement.io.module_names import GraphModuleNameWarning, check_state_names
    from placement.io.opgraph import backward_values
    from placement.io.tarnawski import parse_instance
    from placement.io.torch_export import (check_forward_takes, check_module, check_tensor_args, import_torch,
                                          require_torch)
    from placement.problem.instance import NodeFitsNoDeviceError
    from placement.torch.devices import parse_devices
    from placement.torch.forward_hooks import (ForwardHookWarning, ImportedForwardHookWarning, forward_hook_note,
                                               forward_hooks)
    from placement.torch.partition import (batch_outputs, canonical_names, check_program_outputs,
                                           outputs_following_batch, partition, user_outputs)
    from placement.torch.relays import RelayWarning, relay_note, stage_transfers
    from placement.torch.repeated_reads import (RepeatedReadWarning, repeated_charges, repeated_note,
                                                repeated_reads_note, state_kinds)
    from placement.torch.sample_mixing import mixing_note, runs_following_batch, sample_runs
    from placement.torch.sharing import charge_gradient_exchange
    from placement.torch.state import (input_storage_reads, keep_written_buffers_together, shared_storage,
                                       together_note, written_state)

    torch = require_torch()
    check_module(model)
    check_tensor_args(args)   # a tuple of tensors: torch's stages refuse others at the first step
    if args and all(value.numel() == 0 for value in args):   # every cost would be that of no samples
        raise InvalidParameterError("args", f"must be one micro-batch of samples, but they hold no elements "
                                            f"(shapes {', '.join(str(tuple(v.shape)) for v in args)})")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise InvalidParameterError("kwargs", f"must be a dict of the model's keyword inputs or None, "
                                              f"not {type(kwargs).__name__}")
    reserved = [name for name in kwargs or {} if name in STEP_KEYWORDS]
    if reserved:   # step() keeps them for itself: stage 0 would wait for inputs no call can give it
        raise InvalidParameterError("kwargs", f"holds the keyword input{'s' * (len(reserved) > 1)} "
                                              f"{', '.join(map(repr, reserved))}, which the step() of torch's pipeline "
                                              f"schedules takes for itself ({', '.join(STEP_KEYWORDS)}) and never "
                                              f"passes to the model: rename {'them' if len(reserved) > 1 else 'it'} "
                                              "in the model's forward")
    flag("training", training)
    integer("microbatches", microbatches, smallest=1)
    batch = check_micro_batch_dimension(args, kwargs or {}, torch, microbatches)
    check_forward_takes(model, args, kwargs)   # before the hooks of sequence_first_reads, and the export
    integer("stages", stages, smallest=1, optional=True)
    one_of("schedule", schedule, SCHEDULES)
    number("time_limit", time_limit, positive=True, optional=True)
    platform = parse_devices(devices)
    if stages is not None:   # before the export and the search, which a refusal after them wasted
        total = platform.accelerators + platform.cpus   # first: no schedule or micro-batch count helps here
        if stages > total:
            raise InvalidParameterError("stages", f"must be at most the number of devices ({total} in {devices!r}), "
                                                  f"got {stages}")
        check_microbatches(schedule, microbatches, stages)
    hooks = forward_hooks(model)   # before the hooks of sequence_first_reads and custom_gradients
    try:
        with sequence_first_reads(model) as sequence_first, (
                custom_gradients(model) if training else contextlib.nullcontext([])) as gradients, \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphModuleNameWarning)   # refused below, by check_state_names
            warnings.simplefilter("ignore", ImportedForwardHookWarning)   # warned of below, of the stages
            imported = import_torch(model, args, kwargs, platform=platform, training=training,
                                    granularity=granularity)
    except InvalidParameterError as exc:
        if exc.parameter != "dtype":
            raise
        raise InvalidParameterError("devices", f"{devices!r} cannot run the model's data type, which "
                                               f"{exc.detail}") from None
    except NodeFitsNoDeviceError as exc:   # a module larger than every device's memory, whatever the stages
        raise InvalidParameterError("devices", f"{devices!r} cannot hold the model: no plan fits ({exc})") from None
    names = canonical_names(model)
    aliases = {target: names.get(id(t), target) for target, t in imported.source.state_dict.items()}
    check_program_outputs(imported.source, aliases)   # before solving: a refusal takes no search
    check_state_names(imported.source, "model")
    strided = input_storage_reads(imported.source)
    if strided:
        operator, node, name = strided[0]
        raise InvalidParameterError("model", f"applies {operator} to its input {name!r} (operator {node!r}), which "
                                             "reads the input's memory by storage offset and strides: the pipeline "
                                             "gives each stage its micro-batches as views of the step's batch (stage "
                                             "0) or as dense copies of their values (a later stage), which keep "
                                             "neither, so it would read other elements than in the model; apply it "
                                             f"to a contiguous copy made in forward ({name}.clone(memory_format="
                                             "torch.contiguous_format)), or use view operators (view, transpose, "
                                             "unfold, slicing)")
    if microbatches > 1 and batch is not None:
        runs = sample_runs(model, args, kwargs, batch, imported.graph.graph.total_flops,
                           len(user_outputs(imported.source)))
        # one sample a micro-batch leaves every output ambiguous: the runs tell at once where there are any
        # (the export with a symbolic batch takes twice the first export's time)
        garbled = batch_outputs(imported.source, batch,
                                (lambda: runs_following_batch(runs)) if runs is not None and batch == 1 else
                                (lambda: outputs_following_batch(model, args, kwargs)))
        if garbled.note is not None:
            warnings.warn(garbled.note, OutputBatchWarning, stacklevel=2)
        mixing = mixing_note(runs, set(garbled.outputs)) if runs is not None else None
        if mixing is not None:
            warnings.warn(mixing, SampleMixingWarning, stacklevel=2)
    hooked = forward_hook_note(hooks)
    if hooked is not None:
        warnings.warn(hooked, ForwardHookWarning, stacklevel=2)
    custom = custom_gradient_note(gradients)
    if custom is not None:
        warnings.warn(custom, CustomGradientWarning, stacklevel=2)
    mode = training_mode_note(imported.source, training)
    if mode is not None:
        warnings.warn(mode, TrainingModeWarning, stacklevel=2)
    cut = sequence_first_note(sequence_first, batch) if microbatches > 1 and batch is not None else None
    if cut is not None:
        warnings.warn(cut, SequenceFirstWarning, stacklevel=2)
    nodes = len(imported.graph.nodes)
    if stages is not None and stages > nodes:
        finer = ("; granularity 'operator' plans finer nodes, one per operator"
                 if granularity != "operator" and len(imported.graph.graph.ops) > nodes else "")
        raise InvalidParameterError("stages", f"must be at most the number of nodes of the model ({nodes} at "
                                              f"granularity {granularity!r}), got {stages}{finer}")
    instance, problem = imported.instance, imported.problem
    if training:
        instance = charge_gradient_exchange(instance, imported.graph, platform.link_bandwidth, aliases,
                                            microbatches)
    written = written_state(imported.source)
    overlapping = shared_storage(model, written, trained=training)
    if overlapping:
        names = overlapping[0]
        how = ("writes one of them in place" if any(name in written for name in names) else
               "trains one of them (an optimiser step writes it in place)")
        raise InvalidParameterError("model", f"holds {', '.join(map(repr, names))}, which share memory, and {how}; "
                                             "every stage copies each parameter and buffer on its own, so the copies "
                                             "would drift apart: register one of them and take the others as views "
                                             "of it in forward")
    # one stage holds state the model writes in place and what reads it, a write into an
    # activation and what is ordered against it, and a read of memory by storage offset and strides and
    # what that memory comes from: the import's colour classes, which the exchange nodes join
    about = imported.instance["about"]
    readers = {name: tuple(nodes) for name, nodes in about.get("written_buffers", {}).items()}
    activations = {name: tuple(nodes) for name, nodes in about.get("written_activations", {}).items()}
    views = {name: tuple(nodes) for name, nodes in about.get("storage_views", {}).items()}
    sparse = {name: tuple(nodes) for name, nodes in about.get("sparse_values", {}).items()}
    if readers or activations or views or sparse:
        instance = keep_written_buffers_together(instance, imported.graph, readers, activations, views, sparse)
    if instance is not imported.instance:   # the exchange nodes, the classes: the problem they make
        problem = parse_instance(instance, imported.problem.name)
    objective = "throughput-gpipe" if training and schedule == "gpipe" else "throughput"
    result = placement.solve(problem, objective=objective, stages=stages, time_limit=time_limit)
    if schedule == "1f1b" and stages is None and result.ok and result.num_stages > microbatches:
        # torch's 1F1B (for inference too) needs a micro-batch per stage to fill the pipeline
        within = best_within_stages(problem, microbatches, objective=objective, time_limit=time_limit)
        if within is None:   # none of so few stages fits (proven): the optimum has more than the fewest that fit
            limit = f"{microbatches} stage{'s' * (microbatches > 1)}"
            raise InvalidParameterError("microbatches", f"is {microbatches}, so the 1f1b schedule runs at most "
                                                        f"{limit}, and no plan of at most {limit} fits {devices!r} "
                                                        f"(the optimal plan has {result.num_stages}); use more "
                                                        "micro-batches or schedule 'gpipe'")
        result = within
    if result.ok and cpu_between_accelerators(result.to_plan()):
        most = microbatches if schedule == "1f1b" and stages is None else None   # as above
        result = accelerators_only(problem, result, devices, most, objective=objective, stages=stages,
                                   time_limit=time_limit)
    if not result.ok:
        if result.status == "infeasible":   # why some nodes share a stage, for the refusal
            together = together_note(readers, imported.graph, activations, views, sparse)   # "" where none share one
            if stages is not None and stages > separable_parts(problem):   # the stage count, not the devices
                raise InvalidParameterError("stages", f"{stages}: {result.message}"
                                                      + (f"; {together}" if together else ""))
            repeated = repeated_reads_note(imported.graph, aliases, state_kinds(imported.source, aliases))
            in_stages = f" in {stages} stage{'' if stages == 1 else 's'}" if stages else ""
            raise InvalidParameterError("devices", f"{devices!r} cannot hold the model{in_stages}"
                                                   + f": no plan fits ({result.message or 'proven infeasible'})"
                                                   + (f"; {together}" if together else "")
                                                   + (f"; {repeated}" if repeated else ""))
        raise LimitExceededError(f"no plan found within the limits: {result.message}", "time_limit")
    gm = pipe_split_module(imported.source, layout_from_instance(instance), result.to_plan(), relayed=True)
    part = partition(gm, names, frozenset(model.state_dict().keys()))
    if training:   # the values that get a gradient: those stages send one back for
        part = dataclasses.replace(part, gradients=backward_values(imported.graph.graph))
    if len(part.stages) != result.num_stages:
        raise InvalidInstanceError(f"the program splits into {len(part.stages)} stages, the plan has "
                                   f"{result.num_stages}")
    check_microbatches(schedule, microbatches, len(part.stages))
    plan = PipelinePlan(result, part, imported, instance, schedule, microbatches)
    plan.transfers = stage_transfers(part, result, problem, platform.link_bandwidth, training)
    stats = dict(result.stats, shared_parameters={k: list(v) for k, v in plan.shared_parameters.items()},
                 runtime_loads=[t.runtime_load for t in plan.transfers])
    plan.result = dataclasses.replace(result, stats=stats)
    note = relay_note(plan.transfers)
    if note is not None:
        warnings.warn(note, RelayWarning, stacklevel=2)
    repeated = repeated_note(repeated_charges(imported.graph, [s.nodes for s in result.plan], aliases, training),
                             [s.memory for s in result.plan], state_kinds(imported.source, aliases))
    if repeated is not None:
        warnings.warn(repeated, RepeatedReadWarning, stacklevel=2)
    if result.status != Status.OPTIMAL:
        warnings.warn(unproven_note(result, time_limit, granularity), UnprovenPlanWarning, stacklevel=2)
    return plan


def unproven_note(result: Any, time_limit: float | None, granularity: str) -> str:
    """What :class:`UnprovenPlanWarning` says of a plan the solver did not prove optimal, and what
    :func:`plan_pipeline`'s caller can change."""
    from placement.report.table import percent
    from placement.solvers.milp import DEFAULT_TIME_LIMIT

    # a gap that two decimals round to 0.00% is given with its digits: beside "not proven optimal" it read as none
    bound = (f", the best lower bound {result.bound:.6g} (gap {percent(result.gap, 2)})" if result.bound is not None
             and result.gap is not None else "")
    said = f"the plan is not proven optimal: its largest load is {result.value:.6g}{bound}"
    if result.method != "milp":
        return f"{said} ({result.message})"
    limit = f"time_limit={time_limit:g} s" if time_limit is not None else f"the default {DEFAULT_TIME_LIMIT:g} s"
    coarser = "; granularity='module' plans a smaller graph" if granularity == "operator" else ""
    return f"{said} when the solver stopped ({limit}); a larger time_limit gives it more time{coarser}"
