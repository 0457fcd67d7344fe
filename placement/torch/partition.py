"""A program reordered stage by stage, cut into one ``GraphModule`` per pipeline stage.

Input: the graph module of :func:`placement.io.exporters.pipe_split_module`, whose operators
run stage by stage with a ``pipe_split()`` call between consecutive stages (a topological
order exists because the stages of a plan form a chain of ideals).

Model
-----
Stage ``s`` computes the operators between the ``s``-th and ``s+1``-th ``pipe_split``; a
``getitem`` that selects an output of an operator runs in that operator's stage, so that
only tensors cross stage boundaries. A value ``v`` (a model input, or an operator output) is
*live* at boundary ``b`` (between stages ``b - 1`` and ``b``) when it is made before ``b``
(model inputs: in stage 0) and read at or after ``b`` (the model's outputs are read by the
last stage). ``torch.distributed.pipelining`` stages only talk to their neighbours, so:

* stage 0 takes the model's inputs, with the model's signature;
* stage ``s > 0`` takes the values live at boundary ``s``, in program order;
* stage ``s`` returns the values live at boundary ``s + 1``: those it makes and those it
  relays unchanged; the last stage returns the model's output (a tensor or a tuple).

A value read by several later stages, or first read several stages after it is made (a
skip connection, an input read near the end), is thus relayed stage by stage. Its gradient
flows back the same way: a relayed tensor is returned as the very tensor received, so
autograd adds the gradient of the relay to the gradients of the stage's own reads. What a
stage makes leaves contiguous, and the floating-point tensors it receives are read through
:func:`placement.torch.contiguity.contiguous_gradient` (gloo sends contiguous tensors only). A
value that may share memory with a parameter or buffer (:func:`~placement.torch.contiguity.aliases_state`:
a running average updated in place, read again by a later stage) leaves as a copy, so that each
micro-batch sends the value it made, not the buffer, which the next micro-batch writes into.

Parameters and buffers (``get_attr`` nodes) are read in every stage that uses them; each
stage reads a tensor under one name, the name ``model.named_parameters()`` (or
``named_buffers()``) gives it, so a tied weight is one tensor in each stage that uses it and
stage state-dict keys are the model's own. An entry of the model's ``state_dict`` that no operator
reads (BatchNorm's ``num_batches_tracked`` in eval mode, a parameter ``forward`` never uses) is kept
by one stage (:meth:`Partition.unread`): the first stage that reads state of its module, or of the
closest module around it that has state read, else stage 0. So every entry of the model's
``state_dict`` is in a stage's, under its first name where it is tied.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from placement.errors import InvalidParameterError

#: Call-module targets of guards that ``ExportedProgram.module()`` adds; the stages drop them.
GUARDS = "_guards_fn"


@dataclass(frozen=True)
class StageGraph:
    """One stage: the fx nodes it runs (program order), the values it takes and returns, the
    attributes it reads (canonical names)."""

    nodes: tuple[Any, ...]
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class Partition:
    """The stages of a reordered program. ``root`` holds its attributes, ``canonical`` maps each
    ``get_attr`` target to the name stages use, ``state`` holds the names of the model's own
    parameters and persistent buffers, its ``state_dict`` keys (other attributes, and the model's
    non-persistent buffers, are non-persistent buffers of the stages)."""

    root: Any
    stages: tuple[StageGraph, ...]
    canonical: Mapping[str, str]
    state: frozenset[str]
    #: which values get a gradient, by name (:func:`placement.io.opgraph.backward_values`); None: unknown
    gradients: Mapping[str, tuple[bool, ...]] | None = None

    def carries_gradient(self, value: Any) -> bool:
        """Whether the value ``value`` (an fx node) sends a gradient back when it crosses a boundary:
        a floating-point tensor that gets one. Where :attr:`gradients` does not name it, every value
        the model computes is taken to (its own inputs not)."""
        import torch

        example = value.meta.get("val")
        if not isinstance(example, torch.Tensor) or not (example.is_floating_point() or example.is_complex()):
            return False
        known = self.gradients or {}
        if value.op == "call_function" and value.target is operator.getitem and value.args[0].name in known:
            flags = known[value.args[0].name]
            return flags[value.args[1]] if isinstance(value.args[1], int) and value.args[1] < len(flags) else True
        if value.name in known:
            return any(known[value.name])
        return value.op != "placeholder"

    def relayed(self) -> tuple[tuple[str, ...], ...]:
        """Per boundary ``b = 1 … S-1``, the names of the values stage ``b`` receives."""
        return tuple(tuple(v.name for v in stage.inputs) for stage in self.stages[1:])

    def trained(self) -> set[str]:
        """Canonical names of the trained parameters (``requires_grad``) the stages read."""
        import torch

        return {name for target, name in self.canonical.items()
                if isinstance(value := _attribute(self.root, target), torch.nn.Parameter) and value.requires_grad}

    def unread(self) -> dict[str, int]:
        """Per entry of the model's ``state_dict`` that no stage reads (canonical name), the stage that keeps
        it: the first stage that reads state of the module owning it, or of the closest module around that
        one with state read; stage 0 where none has (module docstring)."""
        holders = self.holders()
        out: dict[str, int] = {}
        for name in sorted(self.state.intersection(self.canonical.values()) - holders.keys()):
            owner, stage = name.rpartition(".")[0], 0
            while owner:
                reading = [stages[0] for read, stages in holders.items() if read.startswith(f"{owner}.")]
                if reading:
                    stage = min(reading)
                    break
                owner = owner.rpartition(".")[0]
            out[name] = stage
        return out

    def holders(self) -> dict[str, tuple[int, ...]]:
        """Per attribute (canonical name), the stages that read it."""
        out: dict[str, list[int]] = {}
        for s, stage in enumerate(self.stages):
            for name in stage.attributes:
                out.setdefault(name, []).append(s)
        return {name: tuple(stages) for name, stages in out.items()}


def shared_tensors(part: Partition) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Per tensor that two or more stages of ``part`` read (canonical name, in name order): those stages and the
    tensor each copies (:func:`stage_module`)."""
    import torch

    targets = {name: target for target, name in reversed(tuple(part.canonical.items()))}
    out = {}
    for name, stages in sorted(part.holders().items()):
        value = _attribute(part.root, targets[name]) if len(stages) > 1 else None
        if isinstance(value, torch.Tensor):
            out[name] = (stages, value)
    return out


def random_operators(part: Partition) -> dict[int, tuple[str, ...]]:
    """Per stage that draws random numbers, the operators that draw them (sorted, unique): those torch tags
    ``nondeterministic_seeded`` (dropout in training, ``rand_like``, ``bernoulli``), but for one whose dropout
    draws nothing (:func:`_draws_nothing`: a dropout of probability 0 or not in training, an attention's of
    ``dropout_p`` 0)."""
    import torch

    out: dict[int, tuple[str, ...]] = {}
    for s, stage in enumerate(part.stages):
        ops = set()
        for node in stage.nodes:
            target = node.target
            if node.op != "call_function" or torch.Tag.nondeterministic_seeded not in getattr(target, "tags", ()):
                continue
            if not _draws_nothing(node):
                ops.add(target.name().split("::")[-1].split(".")[0])
        if ops:
            out[s] = tuple(sorted(ops))
    return out


def training_behaviour(program: Any) -> list[tuple[str, Any]]:
    """The operators of the exported ``program`` that behave as in training, each as ``(what, node)``:
    ``"dropout"`` (a seeded operator with a dropout probability or a ``train`` flag that draws:
    :func:`_draws_nothing`), and ``"batch statistics"`` (a normalisation that updates running statistics,
    :data:`placement.torch.contiguity.RUNNING_STATISTICS`, and normalises by the batch's). The graph says so
    whatever set it: a module left in training mode, or a functional call given ``training=True``."""
    import torch

    from placement.torch.contiguity import RUNNING_STATISTICS, argument_values

    found = []
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        schema = getattr(getattr(node.target, "_schema", None), "name", "")
        values = argument_values(node)
        if (torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
                and {"train", "p", "dropout_p", "dropout"} & values.keys() and not _draws_nothing(node)):
            found.append(("dropout", node))
        elif schema in RUNNING_STATISTICS:
            flag, updated = RUNNING_STATISTICS[schema]
            if values.get(flag) is True and all(values.get(name) is not None for name in updated):
                found.append(("batch statistics", node))
    return found


def _draws_nothing(node: Any) -> bool:
    """Whether a call of a seeded operator draws no random number, by the arguments its schema names: a
    ``train`` of ``False`` (``dropout``, ``native_dropout``, the recurrent layers), a dropout probability (``p``,
    ``dropout_p``: ``scaled_dot_product_attention``'s, which defaults to 0; ``dropout``: a recurrent layer's) of
    0, or a recurrent layer of one layer (its dropout falls between layers)."""
    from placement.torch.contiguity import argument_values

    values = argument_values(node)
    return values.get("train", True) is False or values.get("num_layers") == 1 or any(
        isinstance(values.get(name), (int, float)) and values[name] == 0 for name in ("p", "dropout_p", "dropout"))


def canonical_names(model: Any) -> dict[int, str]:
    """``id(tensor) -> name`` for the model's parameters and buffers, the first name of each tensor."""
    names: dict[int, str] = {}
    for name, tensor in (*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)):
        names.setdefault(id(tensor), name)
    return names


def _attribute(root: Any, target: str) -> Any:
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _is_tensor(node: Any) -> bool:
    import torch

    return node.op == "placeholder" or isinstance(node.meta.get("val"), torch.Tensor)


def _single_output(gm: Any) -> bool:
    """Whether the program returns one tensor (else a tuple or list of them; anything else is an error)."""
    from torch.fx.graph import _PyTreeCodeGen

    codegen = gm.graph._codegen
    return check_output_spec(codegen.pytree_info.out_spec if isinstance(codegen, _PyTreeCodeGen) else None)


def check_output_spec(spec: Any) -> bool:
    """Whether the output structure ``spec`` (a pytree ``TreeSpec``, ``None`` for one value) is one value;
    else it must be a flat tuple or list (anything else is an :class:`InvalidParameterError`)."""
    if spec is None or spec.is_leaf():
        return spec is not None
    if spec.type not in (tuple, list) or not all(child.is_leaf() for child in spec.children()):
        what = spec.type.__name__ if spec.type not in (tuple, list) else f"nested {spec.type.__name__}"
        if isinstance(spec.context, type) and issubclass(spec.context, tuple):   # a namedtuple, by its class
            raise InvalidParameterError("model", f"returns a namedtuple, {spec.context.__name__}; a pipelined model "
                                                 "returns a tensor or a plain tuple of tensors (the last stage "
                                                 "returns a tuple): return tuple() of it")
        if spec.type in (tuple, list):
            inner = next(k for k, child in enumerate(spec.children()) if not child.is_leaf())
            kind = getattr(spec.children()[inner].type, "__name__", "structure")
            raise InvalidParameterError("model", f"returns a {what} (output {inner} is a {kind}); a pipelined model "
                                                 "returns a tensor or a flat tuple of tensors: return its tensors as "
                                                 "items of one tuple (a transformers model returns a tuple inside "
                                                 "its output when called with output_hidden_states or "
                                                 "output_attentions, and a dual-encoder such as CLIP always does, "
                                                 "its encoders' outputs: wrap it in a module that returns the "
                                                 "tensors the loss needs)")
        raise InvalidParameterError("model", f"returns a {what}; a pipelined model returns a tensor or a tuple of "
                                             "tensors: return a tuple of its values (a transformers model does when "
                                             "called with return_dict=False)")
    return False


def check_results(results: Any, state_name: Callable[[Any], str | None],
                  check_structure: Callable[[], Any] = lambda: None) -> None:
    """Refuse model outputs ``results`` (FX nodes, or the constants a program returns) that no pipeline
    returns: a value that is not a tensor, the structure ``check_structure`` refuses, a parameter or
    buffer itself (``state_name(node)``: its name, ``None`` for a computed value), a sparse tensor, a
    0-dimensional tensor.
    An :class:`InvalidParameterError` about the model."""
    import torch

    other = next((k for k, value in enumerate(results) if not isinstance(value, torch.fx.Node)), None)
    if other is not None:
        which = f"output {other} ({results[other]!r})" if len(results) > 1 else f"{results[other]!r}"
        raise InvalidParameterError("model", f"returns {which}, which is not a tensor; a pipelined model returns a "
                                             "tensor or a tuple of tensors")
    check_structure()
    for value in results:
        name = state_name(value)
        if name is not None:   # each stage holds its own copies of the parameters and buffers
            raise InvalidParameterError("model", f"returns its parameter or buffer {name!r} itself; a pipeline "
                                                 "returns what its stages compute per micro-batch: leave it out and "
                                                 "read it from the model")
        example = value.meta.get("val")
        if isinstance(example, torch.Tensor) and example.layout != torch.strided:
            raise InvalidParameterError("model", f"returns the sparse tensor {value.name!r} (layout {example.layout}); "
                                                 "a pipelined model returns strided tensors, which its stages send "
                                                 "and gather over micro-batches: return it dense (to_dense())")
        if isinstance(example, torch.Tensor) and example.dim() == 0:
            raise InvalidParameterError("model", f"returns the 0-dimensional tensor {value.name!r}, which the "
                                                 "pipeline runtime cannot gather over micro-batches (it "
                                                 "concatenates each output along its first dimension); return it "
                                                 "with a first dimension (a loss as loss.unsqueeze(0), or one per "
                                                 "sample) and reduce it in loss_fn")


def user_outputs(program: Any) -> list[Any]:
    """The FX nodes the exported ``program`` (a ``torch.export.ExportedProgram``) returns to its caller, in
    order (not the buffers it writes)."""
    from torch.export.graph_signature import OutputKind

    output = next(n for n in program.graph.nodes if n.op == "output")
    return [value for value, spec in zip(output.args[0], program.graph_signature.output_specs)
            if spec.kind == OutputKind.USER_OUTPUT]


def check_program_outputs(program: Any, names: Mapping[str, str]) -> None:
    """:func:`check_results` on the outputs of the exported ``program`` (a ``torch.export.ExportedProgram``),
    before a plan is searched for; ``names`` maps its parameters' and buffers' targets to the names
    the refusal gives them."""
    signature = program.graph_signature
    results = user_outputs(program)
    state = {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
             **signature.inputs_to_lifted_tensor_constants}

    def state_name(value: Any) -> str | None:
        target = state.get(value.name) if value.op == "placeholder" else None
        return None if target is None else names.get(target, target)

    check_results(results, state_name, lambda: check_output_spec(program.call_spec.out_spec))


def outputs_following_batch(model: Any, args: Sequence[Any],
                            kwargs: dict | None) -> list[tuple[bool, ...]] | None:
    """For each output ``model`` returns (its user outputs, in order), whether each of its dimensions grows
    with the batch, read off an export whose tensor inputs have a symbolic first dimension (``torch.export``'s
    ``Dim.AUTO``): a dimension that is an expression of it does (``[batch · tokens, ...]``; ``[batch, batch]``,
    the similarities of every pair of samples), a number does not (a statistic over the batch, a parameter's
    reduction). A first dimension that grows with the batch but interleaves its samples' rows
    (:func:`_samples_interleaved`) is given as not following it: its concatenation over micro-batches is not
    the whole batch's. ``None`` where that export fails, or fixes the first dimension of an input (a model that
    reads the batch's size as a number, an input with no samples). A batch of one sample is exported as two
    copies of it: torch.export fixes a dimension of size 1 whatever it is told (and logs that it did)."""
    import torch
    from torch.utils._pytree import tree_leaves, tree_map

    from placement.io.torch_export import export_program

    def batched(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.dim() > 0

    def symbolic(value: Any) -> Any:
        return {0: torch.export.Dim.AUTO} if batched(value) else None

    sizes = {v.shape[0] for v in tree_leaves((tuple(args), kwargs or {})) if batched(v)}
    if 0 in sizes or (1 in sizes and len(sizes) > 1):
        return None
    if sizes == {1}:
        args, kwargs = tree_map(lambda v: torch.cat([v, v]) if batched(v) else v, (tuple(args), kwargs))
    try:   # by the names of forward's parameters: torch.export reads a tuple in their order, not the call's
        passed = inspect.signature(model.forward).bind(*args, **(kwargs or {})).arguments
    except (TypeError, ValueError):
        return None
    shapes = {name: tree_map(symbolic, value) for name, value in passed.items()}
    try:
        program = export_program(model, args, kwargs, dynamic_shapes=shapes)
    except InvalidParameterError:
        return None
    inputs = set(program.graph_signature.user_inputs)
    firsts = [node.meta["val"].shape[0] for node in program.graph.nodes
              if node.op == "placeholder" and node.name in inputs and getattr(node.meta.get("val"), "ndim", 0) > 0]
    if not firsts or not all(isinstance(d, torch.SymInt) for d in firsts):
        return None
    follows = []
    for value in user_outputs(program):
        dims = tuple(isinstance(d, torch.SymInt) for d in getattr(value.meta.get("val"), "shape", ()))
        follows.append((False, *dims[1:]) if dims[:1] == (True,) and _samples_interleaved(value) else dims)
    return follows


def _samples_interleaved(value: Any) -> bool:
    """Whether the first dimension of the FX ``value`` (of an export whose inputs' first dimensions are
    symbolic, :func:`outputs_following_batch`), which grows with the batch, lists the samples' rows otherwise
    than one sample's after another's, as far as the operator that made that dimension tells: a reshape
    merging a leading dimension that does not grow with the batch with a later one that does (``[time,
    batch, d]`` viewed as ``[time · batch, d]``), a concatenation along it (``[views, ...]`` of two views of
    the batch stacked as ``[2 · batch, d]``), a repeat along it. Concatenating such an output over the
    micro-batches does not give the whole batch's. The operators between that one and ``value`` are those
    whose first dimension is that of one of their inputs (a linear layer, an activation)."""
    import sympy
    import torch

    def shape(node: Any) -> tuple:
        return tuple(getattr(node.meta.get("val"), "shape", ())) if hasattr(node, "meta") else ()

    def expr(d: Any) -> Any:
        if isinstance(d, torch.SymInt):
            return d.node.expr
        return d if isinstance(d, sympy.Basic) else sympy.Integer(int(d))

    def same(a: Any, b: Any) -> bool:
        return sympy.expand(expr(a) - expr(b)) == 0

    aten = torch.ops.aten
    node = value
    while getattr(node, "op", None) == "call_function":
        first = shape(node)[:1]
        if not first or not isinstance(first[0], torch.SymInt):
            return False
        tensors = [a for a in node.args if shape(a)]
        if node.target in (aten.cat.default, aten.concat.default):
            parts = node.args[0] if node.args else ()
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            return dim % len(shape(node)) == 0 and sum(bool(shape(part)) for part in parts) > 1
        passed = next((a for a in tensors if same(shape(a)[0], first[0])), None)
        if passed is not None:
            node = passed
            continue
        if node.target == aten.repeat.default:
            return True
        if not tensors or node.target not in (aten.reshape.default, aten.view.default, aten._unsafe_view.default,
                                              aten.flatten.using_ints):
            return False
        source = shape(tensors[0])
        if isinstance(source[0], torch.SymInt) or source[0] == 1:
            return False
        return any(isinstance(d, torch.SymInt) for d in source[1:]) and any(
            same(math.prod(map(expr, source[:j + 1])), first[0]) for j in range(1, len(source)))
    return False


def _batch_is_distinct(program: Any, batch: int) -> bool:
    """Whether no dimension the exported ``program`` is given, but the first of each of its inputs, has the
    micro-batch's size ``batch``: a parameter's, a buffer's, a constant's, an input's later ones (a sequence
    as long as the micro-batch). Then a dimension of that size in the graph comes from the batch, as far
    as sizes can tell (a mean over a batch of 4 of a [4, 4, 8] input is [4, 8], its 4 the sequence's)."""
    inputs = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op == "placeholder":
            shape = tuple(getattr(node.meta.get("val"), "shape", ()))
            if batch in (shape[1:] if node.name in inputs else shape):
                return False
    return True


def _flattened_batch(value: Any, batch: int) -> bool:
    """Whether the FX ``value`` is a reshape of a tensor whose first dimension is ``batch`` that merges it with
    the dimensions after it (``[batch, tokens, vocabulary]`` viewed as ``[batch · tokens, vocabulary]``): its
    first dimension then grows with the batch, and no export is needed to tell, where the size is the batch's
    alone (:func:`_batch_is_distinct`)."""
    import torch

    node = value
    while (getattr(node, "op", None) == "call_function" and isinstance(node.target, torch._ops.OpOverload)
           and node.target.is_view and node.args and hasattr(node.args[0], "meta")):
        source = tuple(getattr(node.args[0].meta.get("val"), "shape", ()))
        first = tuple(getattr(node.meta.get("val"), "shape", ()))[:1]
        if (source and first and source[0] == batch and all(isinstance(d, int) for d in source)
                and any(math.prod(source[:j]) == first[0] for j in range(1, len(source) + 1))):
            return True
        node = node.args[0]
    return False


class BatchOutputs(NamedTuple):
    """The positions of the outputs that ``step()`` returns otherwise than the model does for the whole batch,
    and the warning that tells of them (``None`` where there are none)."""

    outputs: tuple[int, ...]
    note: str | None


def batch_outputs(program: Any, batch: int,
                  follows_batch: Callable[[], list[tuple[bool, ...]] | None] | None = None) -> BatchOutputs:
    """The outputs of the exported ``program`` whose first dimension is not that of its micro-batches
    (``batch`` samples each), and what ``step()`` returns of them. The pipeline runtime concatenates each output
    over the micro-batches along its first dimension: an output whose first dimension is no multiple of
    ``batch`` does not grow with the batch, so its concatenation is not what the model returns for the
    whole batch; one of another first dimension that has ``batch`` among its later dimensions (an LSTM's
    final state ``[layers, batch, hidden]``) is taken to hold its batch there. One of shape ``[1]`` is none (a
    loss the model computes, returned as ``loss.unsqueeze(0)``: ``step()`` returns one per micro-batch, as
    ``docs/pytorch.md`` says). One whose first dimension is another multiple of ``batch`` may be flattened
    (``[batch · tokens, vocabulary]``) or not grow at all (a statistic over the batch of twice its size):
    ``follows_batch`` (:func:`outputs_following_batch`, called only then) tells them apart; without it, or
    where it cannot tell, such an output is taken as flattened. So it tells whether one of the micro-batch's
    first dimension with ``batch`` among its later ones mixes the samples (``[batch, batch]`` similarities of
    every pair, which concatenate to ``[batch, batch]`` blocks, not the whole batch's square), and, where sizes
    cannot tell the batch from another dimension (one of the program's inputs has a later dimension, or a
    parameter one, of the micro-batch's size; a micro-batch of one sample, where every size is a multiple of
    it), whether a first dimension of the micro-batch's size grows with the batch at all (a mean over the batch
    of ``[batch, tokens, d]`` with as many tokens as samples; a ``[1, d]`` mean of one sample)."""
    results = user_outputs(program)
    shapes = [tuple(getattr(value.meta.get("val"), "shape", ())) for value in results]
    checked = [k for k, shape in enumerate(shapes)
               if shape and shape != (1,) and all(isinstance(d, int) for d in shape)]
    distinct = batch > 1 and _batch_is_distinct(program, batch)
    if batch == 1:   # every size is a multiple of 1, and 1 is everywhere: only follows_batch can tell
        wrong, multiples = [], [k for k in checked if shapes[k][0] != 1]
    else:
        wrong = [k for k in checked if shapes[k][0] != batch and (shapes[k][0] % batch or batch in shapes[k][1:])]
        multiples = [k for k in checked if shapes[k][0] != batch and k not in wrong
                     and not (distinct and _flattened_batch(results[k], batch))]
    # of the micro-batch's first dimension: a later one of its size may grow with it too, or the first be
    # another of its size (a sequence as long as the micro-batch), where the sizes do not tell them apart
    sized = [k for k in checked if shapes[k][0] == batch and (not distinct or batch in shapes[k][1:])]
    follows = follows_batch() if (multiples or sized) and follows_batch is not None else None
    if follows is None or len(follows) != len(results):
        follows = None
    else:
        wrong = sorted(wrong + [k for k in multiples + sized if follows[k][:1] != (True,) or
                                (k in sized and any(follows[k][1:]))])
    return BatchOutputs(tuple(wrong), _batch_outputs_note(results, shapes, batch, wrong, follows) if wrong else None)


def _batch_outputs_note(results: list[Any], shapes: list[tuple[int, ...]], batch: int, wrong: list[int],
                        follows: list[tuple[bool, ...]] | None) -> str:
    """The warning of :func:`batch_outputs` about the outputs at positions ``wrong``."""

    def listed(ks: list[int]) -> str:
        return ", ".join(f"{f'output {k}' if len(results) > 1 else 'an output'} of shape {list(shapes[k])}"
                         for k in ks)

    pairs = [k for k in wrong if follows is not None and shapes[k][0] == batch and follows[k][:1] == (True,)]
    alike = [k for k in wrong if shapes[k][0] == batch and k not in pairs]   # its first dimension only its size
    other = [k for k in wrong if shapes[k][0] != batch]
    if pairs and len(pairs) == len(wrong):
        return (f"the model returns {listed(pairs)}, whose later dimensions grow with the micro-batch ({batch}) "
                "too (it pairs the samples): the pipeline runtime concatenates each output over the micro-batches "
                "along its first dimension, so step() returns each micro-batch's pairs alone, otherwise than the "
                "model does for the whole batch (losses and gradients are those of each micro-batch's pairs: "
                "loss_fn sees them); compute what pairs samples of different micro-batches outside the pipeline")
    said = [f"{listed(other)}, whose first dimension is not the micro-batch's ({batch})"] if other else []
    said += [f"{listed(alike)}, whose first dimension has the micro-batch's size ({batch}) but does not grow with "
             "the batch"] if alike else []
    said += [f"{listed(pairs)}, whose later dimensions grow with the micro-batch ({batch}) too"] if pairs else []
    effect = ("loss_fn sees each micro-batch's own outputs" if pairs else
              "losses and gradients are not affected: loss_fn sees each micro-batch's own outputs")
    return (f"the model returns {'; '.join(said)}: the pipeline runtime concatenates each output over the "
            f"micro-batches along its first dimension, so step() returns it otherwise than the model does for the "
            f"whole batch ({effect}); return it with the batch first")


def partition(gm: Any, names: Mapping[int, str], saved: frozenset[str] | None = None) -> Partition:
    """Cut ``gm`` (a graph module with ``pipe_split()`` calls) into stages (module docstring).

    ``names`` maps ``id(tensor)`` to the tensor's name in the user's model
    (:func:`canonical_names`); ``saved`` are the keys of the model's ``state_dict`` (default: every
    name of ``names``): a buffer outside it is non-persistent in the model and stays so in the
    stages. A non-tensor value, or a sparse tensor (gloo sends strided ones only), that would cross a boundary
    is an :class:`InvalidParameterError` about the plan.
    """
    import torch
    from torch.distributed.pipelining import pipe_split

    count = 0
    stage_of: dict[Any, int] = {}
    order: list[Any] = []
    output = None
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is pipe_split:
            count += 1
        elif node.op == "output":
            output = node
        elif node.op == "get_attr" or (node.op == "call_module" and str(node.target).startswith(GUARDS)):
            continue
        else:
            stage = 0 if node.op == "placeholder" else count
            if node.op == "call_function" and node.target is operator.getitem and node.args[0] in stage_of:
                stage = stage_of[node.args[0]]
            stage_of[node] = stage
            order.append(node)
    last = count
    canonical = {n.target: names.get(id(_attribute(gm, n.target)), n.target)
                 for n in gm.graph.nodes if n.op == "get_attr"}

    read_until: dict[Any, int] = {}
    for node in order:
        for arg in node.all_input_nodes:
            if arg in stage_of:
                read_until[arg] = max(read_until.get(arg, 0), stage_of[node])
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    check_results(results, lambda value: canonical[value.target] if value.op == "get_attr" else None,
                  lambda: _single_output(gm))
    for value in results:
        read_until[value] = last
    for node in order:
        if read_until.get(node, 0) > stage_of[node] and not _is_tensor(node):
            raise InvalidParameterError("plan", f"passes the non-tensor value {node.name!r} from stage "
                                                f"{stage_of[node]} to stage {read_until[node]}; pipeline stages "
                                                "exchange tensors only")
        layout = getattr(node.meta.get("val"), "layout", None)
        if read_until.get(node, 0) > stage_of[node] and layout not in (None, torch.strided):
            raise InvalidParameterError("plan", f"passes the sparse tensor {node.name!r} (layout {layout}) from stage "
                                                f"{stage_of[node]} to stage {read_until[node]}; pipeline stages "
                                                "exchange strided tensors only: make it dense where it is made "
                                                "(to_dense()), or plan with other stages")

    def live(boundary: int) -> tuple[Any, ...]:
        return tuple(v for v in order if stage_of[v] < boundary <= read_until.get(v, -1))

    placeholders = tuple(n for n in order if n.op == "placeholder")
    stages = []
    for s in range(last + 1):
        nodes = tuple(n for n in order if stage_of[n] == s and n.op != "placeholder")
        attributes = dict.fromkeys(canonical[a.target] for n in nodes for a in n.all_input_nodes if a.op == "get_attr")
        stages.append(StageGraph(nodes, placeholders if s == 0 else live(s),
                                 tuple(results) if s == last else live(s + 1), tuple(attributes)))
    return Partition(gm, tuple(stages), canonical,
                     frozenset(n for n in names.values() if saved is None or n in saved))


def _planned(value: Any) -> Any:
    """What a model input was exported as: a tensor's shape (a tuple) and data type, or a constant's value."""
    import torch

    val = value.meta.get("val")
    return ("tensor", (tuple(int(d) for d in val.shape), val.dtype)) if isinstance(val, torch.Tensor) else (
        "value", val)


def check_microbatch(names: tuple[str, ...], planned: tuple[Any, ...], keywords: int, *values: Any) -> None:
    """Refuse a micro-batch unlike the one the plan's program was exported for (stage 0 runs it first);
    the last ``keywords`` of the inputs ``names`` are keyword inputs (``kwargs`` of ``step()``).

    ``torch.export`` specialises the program to its example inputs: tensor shapes and types, other
    values. ``ExportedProgram.module()`` checks them (its guards), and the stages, which drop those
    guards, check here instead: a batch that does not split into micro-batches of the planned shape
    gave wrong rows or failed deep inside torch, another value of a constant input was ignored, and a
    tensor of another data type failed inside torch or, sent on to a stage that receives the planned
    type, aborted that stage's process."""
    import torch

    for k, (name, (kind, want), got) in enumerate(zip(names, planned, values)):
        parameter = "kwargs" if k >= len(names) - keywords else "args"
        if kind == "tensor":
            shape, dtype = want
            if not isinstance(got, torch.Tensor) or tuple(got.shape) != shape:
                shown = list(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
                raise InvalidParameterError(parameter, f"of the pipeline's step() must split into micro-batches "
                                                       f"like the example inputs of plan_pipeline: input {name!r} of "
                                                       f"a micro-batch is {shown}, planned {list(shape)}")
            if got.dtype != dtype:
                raise InvalidParameterError(parameter, f"of the pipeline's step() must have the data types of the "
                                                       f"example inputs of plan_pipeline: input {name!r} is "
                                                       f"{got.dtype}, planned {dtype} (the program is exported for "
                                                       "it; convert the input, or plan again with it)")
        elif isinstance(got, torch.Tensor) or got != want:   # a tensor's != is elementwise: no bool of it
            shown = f"a tensor of shape {list(got.shape)}" if isinstance(got, torch.Tensor) else repr(got)
            raise InvalidParameterError(parameter, f"of the pipeline's step() must hold the values the plan was "
                                                   f"made with: input {name!r} is {shown}, planned {want!r} (the "
                                                   "program is exported for it; plan again for another)")


def check_no_autocast(stage: int) -> None:
    """Refuse to run stage ``stage`` inside a ``torch.autocast`` context (every stage checks, first thing):
    the stages run the program exported for the planned types, and torch's pipeline receives each value as
    the type it was planned with, so what autocast made of it (bfloat16 for float32) was read as memory of
    the planned type, never filled: losses of inf, values of thousands, and no error."""
    from placement.io.torch_export import active_autocast

    autocast = active_autocast()
    if autocast:
        raise InvalidParameterError("step", f"of the pipeline cannot run inside torch.autocast ({autocast}): stage "
                                            f"{stage} runs the program exported for the planned types, which the "
                                            "stages send and receive; run it outside, or plan the model in the "
                                            "precision it is to run in (model.to(torch.bfloat16))")


def check_received(stage: int, names: tuple[str, ...], *values: Any) -> None:
    """The first thing a stage after the first runs: refuse values that are not the tensors stage ``stage - 1``
    sends (named ``names``, in order), such as the tuple of its outputs given as one argument, which failed inside
    the program with an ``AttributeError``; then :func:`check_no_autocast`."""
    _check_tensors(stage, names, values)
    check_no_autocast(stage)


def _check_tensors(stage: int, names: tuple[str, ...], values: Sequence[Any]) -> None:
    """Refuse the first of ``values`` (given for the leading ``names``) that is not a tensor."""
    import torch

    for name, value in zip(names, values):
        if not isinstance(value, torch.Tensor):
            raise InvalidParameterError("args", f"{_received(stage, names)}; got a {type(value).__name__} for "
                                                f"{name!r} (unpack the tuple of stage {stage - 1}'s outputs: "
                                                "module(*outputs))")


def _received(stage: int, names: tuple[str, ...]) -> str:
    """What stage ``stage`` (after the first) takes: the tensors ``names`` that the stage before it returns."""
    count = f"{len(names)} tensor{'' if len(names) == 1 else 's'}"
    order = ", in its order" if len(names) > 1 else ""
    return (f"of stage {stage} must be the {count} that stage {stage - 1} returns{order} "
            f"({', '.join(map(repr, names))}), each an argument of its own")


def check_received_count(stage: int, names: tuple[str, ...], module: Any, args: tuple, kwargs: dict) -> None:
    """A forward pre-hook of every stage after the first: refuse a call that does not give each of the tensors
    ``names`` once (positionally in order, or by name after the positional ones), which Python refused with a
    ``TypeError`` about the generated ``forward``'s arguments; a value that is not a tensor is named as
    :func:`check_received` names it."""
    later = names[len(args):]
    if len(args) <= len(names) and set(kwargs) <= set(later) and len(kwargs) == len(later):
        return
    _check_tensors(stage, names, args)
    unknown = [k for k in kwargs if k not in later]
    given = f"{len(args)} argument{'' if len(args) == 1 else 's'}"
    wrong = ([given] if len(args) > len(names) or not kwargs else []) + (
        [f"the keyword{'' if len(unknown) == 1 else 's'} {', '.join(map(repr, unknown))}"] if unknown else [])
    if not wrong:
        missing = [k for k in later if k not in kwargs]
        wrong = [f"no {', '.join(map(repr, missing))}"]
    parameter = "kwargs" if unknown and len(args) <= len(names) else "args"
    raise InvalidParameterError(parameter, f"{_received(stage, names)}; got {' and '.join(wrong)}")


def check_call(positional: int, keywords: tuple[str, ...], module: Any, args: tuple, kwargs: dict) -> None:
    """A forward pre-hook of stage 0: refuse a call whose inputs are not those the program was exported
    with (``positional`` positional ones and the keyword inputs ``keywords``), which Python refused with a
    ``TypeError`` about the generated ``forward``'s arguments."""
    missing = [k for k in keywords if k not in kwargs]
    unknown = [k for k in kwargs if k not in keywords]
    if len(args) == positional and not missing and not unknown:
        return
    named = f" and the keyword input{'' if len(keywords) == 1 else 's'} {', '.join(map(repr, keywords))}"
    planned = f"{positional} positional input{'' if positional == 1 else 's'}" + (named if keywords else "")
    wrong = ([f"{len(args)} positional"] if len(args) != positional else []) + (
        [f"no {', '.join(map(repr, missing))}"] if missing else []) + (
        [f"the keyword{'' if len(unknown) == 1 else 's'} {', '.join(map(repr, unknown))}"] if unknown else [])
    parameter = "args" if len(args) != positional else "kwargs"
    raise InvalidParameterError(parameter, f"of stage 0 must be the inputs the plan was made with, {planned}; got "
                                           f"{' and '.join(wrong)} (the program is exported for those inputs; plan "
                                           "again with the inputs the pipeline will be given)")


def check_inputs(names: tuple[str, ...], planned: tuple[Any, ...], keywords: int, in_spec: Any, args: tuple,
                 kwargs: dict) -> None:
    """Stage 0's checks of one micro-batch (:func:`check_call`, :func:`check_microbatch`) without running it:
    its schedule checks every micro-batch of a step before the first runs, so that a refused step sends
    nothing (a batch whose last micro-batch alone is short failed after the others were sent, and the
    next step's micro-batches completed the later stages' step). Inputs this cannot read as the program's
    are left to the stage's own checks."""
    import torch.fx._pytree as fx_pytree

    if in_spec is None:
        values: Any = args
    else:
        children = in_spec.children()
        if len(children) == 2:   # (positional inputs, keyword inputs)
            check_call(children[0].num_leaves, tuple(children[1].context), None, args, kwargs)
        try:
            values = fx_pytree.tree_flatten_spec((tuple(args), kwargs) if len(children) == 2 else tuple(args),
                                                 in_spec)
        except Exception:   # not the program's structure: the stage's forward says what is wrong
            return
    if len(values) == len(names):
        check_microbatch(names, planned, keywords, *values)


def stage_examples(part: Partition, s: int, device: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """Empty tensors (on ``device``) with the shapes, types and ``requires_grad`` of the values stage ``s``
    takes and returns, from the exported program's metadata (stage 0: the model's positional inputs; it
    takes the keyword inputs by name); ``None`` where one is not a tensor.

    They let ``torch.distributed.pipelining.PipelineStage`` start in its static mode; without them it
    learns the shapes by running every stage's forward once more, on the first micro-batch for stage
    0 and on uninitialised memory for the others, which updated BatchNorm running statistics an extra
    time (with infinite variances on the later stages)."""
    import torch

    stage = part.stages[s]
    inputs = stage.inputs
    if s == 0:
        codegen = part.root.graph._codegen
        in_spec = getattr(getattr(codegen, "pytree_info", None), "in_spec", None)
        if in_spec is not None:
            if in_spec.num_leaves != len(stage.inputs):
                return None
            parts = list(in_spec.children())   # (positional inputs, keyword inputs)
            # the stage takes keyword inputs by name, beside the positional ones the metadata describes
            inputs = stage.inputs[:parts[0].num_leaves] if len(parts) == 2 else stage.inputs
    examples = []
    for values, trained in ((inputs, s > 0), (stage.outputs, True)):
        made = []
        for value in values:
            val = value.meta.get("val")
            if not isinstance(val, torch.Tensor):
                return None
            # the values between stages that need a gradient carry one (Partition.carries_gradient)
            made.append(torch.empty(tuple(val.shape), dtype=val.dtype, device=device)
                        .requires_grad_(trained and part.carries_gradient(value)))
        examples.append(tuple(made))
    return examples[0], examples[1]


def _state_written_in_place(part: Partition) -> set[str]:
    """The attributes (``get_attr`` targets: buffers, and parameters such as a frozen one kept as a
    running statistic) that the program writes in place."""
    from placement.torch.contiguity import written_in_place

    nodes = list(part.root.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    return {n.target for n in nodes if n.op == "get_attr" and written_in_place(n, nodes, position)}


def _stage_copy(value: Any, device: Any) -> Any:
    """A stage's own copy of the tensor ``value`` (on ``device``, else where ``value`` is). A tensor on the
    meta device holds no data: its copy on another device is uninitialised memory of its shape and type,
    as ``torch.nn.Module.to_empty`` makes, for a checkpoint to fill."""
    import torch

    if value.is_meta and device is not None and device.type != "meta":
        return torch.empty_like(value, device=device)
    return value.detach().to(device, copy=True) if device is not None else value.detach().clone()


def _device_map(part: Partition, device: Any) -> Callable[[Any], Any] | None:
    """Where ``device`` is not where the model was traced: a map of an operator's arguments that puts
    ``device`` for each device the program was traced on (that of the model's inputs, parameters and
    buffers). ``torch.export`` writes the device of a tensor the model makes (``torch.arange(n,
    device=x.device)``, a mask's ``torch.full``, ``.to(x.device)``) into the operator: a stage on another
    device made them where the model was traced (on the meta device: no data; on the CPU for a CUDA
    stage: a device mismatch). Other devices the model names (``lengths.cpu()`` of a CUDA model) stay."""
    import torch

    if device is None:
        return None
    traced = {v.meta["val"].device for v in part.root.graph.nodes
              if v.op == "placeholder" and isinstance(v.meta.get("val"), torch.Tensor)}
    traced |= {value.device for target in part.canonical
               if isinstance(value := _attribute(part.root, target), torch.Tensor)}
    traced.discard(device)
    if not traced:
        return None
    return lambda arg: device if isinstance(arg, torch.device) and arg in traced else arg


def unfilled(part: Partition, s: int) -> tuple[str, ...]:
    """The tensors stage ``s`` reads that are on the meta device and are no entries of the model's
    ``state_dict`` (non-persistent buffers, such as rotary frequencies or position ids, and tensors the
    program keeps as constants): on another device the stage holds them uninitialised, and no
    checkpoint fills them."""
    import torch

    read = set(part.stages[s].attributes)
    return tuple(sorted({name for target, name in part.canonical.items() if name in read and name not in part.state
                         and isinstance(value := _attribute(part.root, target), torch.Tensor) and value.is_meta}))


def stage_module(part: Partition, s: int, device: Any = None) -> Any:
    """Stage ``s`` as a ``GraphModule`` holding its own copies of its attributes (on ``device``).

    Parameters keep ``requires_grad``; buffers of the model stay buffers; other constants
    of the program are non-persistent buffers, so the stage's ``state_dict`` keys are names
    of the model's ``state_dict``. The stage also holds the entries of the model's ``state_dict``
    that no stage reads and :meth:`Partition.unread` gives it, which its graph does not use. The
    tensors of a model on the meta device are uninitialised on ``device`` (:func:`_stage_copy`).
    """
    import torch
    from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

    from placement.torch.contiguity import (aliases_argument, aliases_state, contiguous_copy, contiguous_gradient,
                                            dense_order, state_root, traced_layout, writes_into, written_in_place)

    stage = part.stages[s]
    graph = torch.fx.Graph()
    env: dict[Any, Any] = {}
    received: dict[Any, Any] = {}
    for value in stage.inputs:
        received[value] = graph.placeholder(value.name)
        received[value].meta = dict(value.meta)
        env[value] = received[value]
    taken = tuple(str(received[v].target) for v in stage.inputs)   # the forward's argument names
    if s == 0:   # its inputs are checked below, against the model's
        graph.call_function(check_no_autocast, (s,))
    else:
        graph.call_function(check_received, (s, taken, *(received[v] for v in stage.inputs)))
    for value in stage.inputs:
        example = value.meta.get("val")
        if s > 0 and isinstance(example, torch.Tensor) and example.is_floating_point():
            shape = tuple(example.shape)
            stride = dense_order(shape, tuple(example.stride()))
            if not example.is_contiguous() and stride != dense_order(shape, tuple(range(len(shape), 0, -1))):
                # laid out in the traced order of its dimensions (placement/torch/contiguity.py)
                env[value] = graph.call_function(traced_layout, (received[value], stride))
                if written_in_place(value, stage.nodes):   # a copy: relayed as written
                    del received[value]
            elif written_in_place(value, stage.nodes):   # relayed as written, like the one tensor of the model
                env[value] = graph.call_function(contiguous_copy, (received[value],))
                del received[value]
            else:
                env[value] = graph.call_function(contiguous_gradient, (received[value],))
    source = part.root.graph._codegen
    info = source.pytree_info if isinstance(source, _PyTreeCodeGen) else None
    if s == 0:   # the program was exported for one micro-batch of these shapes and constants
        planned = tuple(_planned(value) for value in stage.inputs)
        given = info.in_spec.children() if info is not None and info.in_spec is not None else ()
        keywords = given[1].num_leaves if len(given) == 2 else 0   # (positional inputs, keyword inputs)
        # a placeholder's target is the forward's own argument name (its name may be renamed: input_1)
        graph.call_function(check_microbatch, (tuple(str(v.target) for v in stage.inputs), planned, keywords,
                                               *(received[v] for v in stage.inputs)))
        for value in stage.inputs:
            # torch's runtime gives stage 0 each micro-batch as a view of the step's input, and views share
            # one version counter: writing into one micro-batch would invalidate what autograd kept of the
            # others (the backward pass raised), so the stage writes into a copy, relayed as written
            if isinstance(value.meta.get("val"), torch.Tensor) and written_in_place(value, stage.nodes):
                env[value] = graph.call_method("clone", (received[value],))
                del received[value]
    reads: dict[str, Any] = {}

    def read(arg: Any) -> Any:
        if arg.op == "get_attr":
            name = part.canonical[arg.target]
            if name not in reads:
                reads[name] = graph.get_attr(name)
            return reads[name]
        return env[arg]

    mutated = _state_written_in_place(part)

    def snapshot(arg: Any) -> Any:
        """``read(arg)``; a copy where ``arg`` is a buffer or parameter the program writes in place (or a
        view of it): autograd may keep what an operator reads for the backward pass, and the next
        micro-batch's forward would overwrite it before that runs."""
        root = state_root(arg)
        if root is None or root.target not in mutated:
            return read(arg)
        return graph.call_method("clone", (read(arg),))

    def argument(node: Any) -> Callable[[Any], Any]:
        """How ``node`` reads an argument: itself where it writes into it or returns a view of it or an
        item of it (it must have the argument, not a copy), else :func:`snapshot`."""
        return lambda arg: read(arg) if writes_into(node, arg) or aliases_argument(node, arg) else snapshot(arg)

    moved = _device_map(part, device)
    for node in stage.nodes:
        env[node] = graph.node_copy(node, argument(node))
        if moved is not None:   # tensors the program makes (positions, masks) on the stage's device
            env[node].args = torch.fx.node.map_aggregate(env[node].args, moved)
            env[node].kwargs = torch.fx.node.map_aggregate(env[node].kwargs, moved)
    last = s == len(part.stages) - 1
    if not last and part.gradients is not None:
        for v in stage.outputs:
            if v not in received and _is_tensor(v) and not part.carries_gradient(v):
                # one that needs a gradient but gets none (read later only through detach or argmax) leaves
                # detached: torch's runtime would send zeros back for it, and the backward pass through them
                # left zero gradients in the parameters it was computed from, where the model leaves none
                env[v] = graph.call_method("detach", (env[v],))
    if last:
        results = tuple(env[v] for v in stage.outputs)
    else:  # relayed values leave as received (contiguous, but for the model's inputs, which may be views:
        # transposed, expanded); what the stage makes leaves contiguous, a copy where it may share memory
        # with the stage's state (a buffer updated in place), which the next micro-batch may overwrite
        # before the send is done
        results = tuple((graph.call_method("contiguous", (received[v],))
                         if s == 0 and isinstance(v.meta.get("val"), torch.Tensor) else received[v])
                        if v in received else
                        graph.call_method("clone", (env[v],), {"memory_format": torch.contiguous_format})
                        if aliases_state(v) else graph.call_method("contiguous", (env[v],))
                        for v in stage.outputs)
    if last:
        graph.output(results[0] if _single_output(part.root) else results)
    else:
        graph.output(results)
    if s == 0 and info is not None:
        graph._codegen = _PyTreeCodeGen(_PyTreeInfo(info.orig_args, info.in_spec, None))

    root: dict[str, Any] = {}
    for target, name in part.canonical.items():
        if name in reads and name not in root:
            value = _attribute(part.root, target)
            copy = _stage_copy(value, device)
            root[name] = torch.nn.Parameter(copy, requires_grad=value.requires_grad) if isinstance(
                value, torch.nn.Parameter) else copy
    module = torch.fx.GraphModule(root, graph, class_name=f"Stage{s}")
    if s == 0:   # for its schedule, which checks every micro-batch before the first runs
        module.check_inputs = functools.partial(check_inputs, tuple(str(v.target) for v in stage.inputs), planned,
                                                keywords, info.in_spec if info is not None else None)
    if s == 0 and info is not None and info.in_spec is not None and len(info.in_spec.children()) == 2:
        given, keywords = info.in_spec.children()
        module.register_forward_pre_hook(functools.partial(check_call, given.num_leaves, tuple(keywords.context)),
                                         with_kwargs=True)
    if s > 0:
        module.register_forward_pre_hook(functools.partial(check_received_count, s, taken), with_kwargs=True)
    for name, value in root.items():
        if name not in part.state and not isinstance(value, torch.nn.Parameter):
            owner, _, field = name.rpartition(".")
            module.get_submodule(owner).register_buffer(field, value, persistent=False)
    targets = {name: target for target, name in reversed(tuple(part.canonical.items()))}
    for name in (name for name, holder in part.unread().items() if holder == s):
        value = _attribute(part.root, targets[name])
        copy = _stage_copy(value, device)
        owner = module
        *path, field = name.split(".")
        for part_name in path:
            if not hasattr(owner, part_name):
                owner.add_module(part_name, torch.nn.Module())
            owner = getattr(owner, part_name)
        if isinstance(value, torch.nn.Parameter):
            owner.register_parameter(field, torch.nn.Parameter(copy, requires_grad=value.requires_grad))
        else:
            owner.register_buffer(field, copy)
    return module
