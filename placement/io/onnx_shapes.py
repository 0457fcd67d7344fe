"""The shape of every tensor of an ONNX graph: shape inference, helped by evaluating shape arithmetic.

``onnx.shape_inference.infer_shapes`` with data propagation follows a shape the graph computes
(``Shape`` → ``Gather`` → ``Concat`` → ``Reshape``) only through the operators its propagation
knows. Exporters write more on shapes: ``Mod`` on a head count, ``Squeeze`` → ``Mul`` →
``Reshape``, ``Slice`` ends read from a ``Shape`` (an unoptimised export of
``nn.TransformerEncoder`` or of an LSTM), and every shape after such a node stayed unknown. So
:func:`shaped_model`, after inference, evaluates with ONNX's reference implementation
(``onnx.reference``) every node of the default domain whose inputs it knows the values of:

* the values of ``Constant`` nodes and of initializers of at most :data:`SMALL` elements;
* the ``Shape`` and ``Size`` of a tensor whose shape inference made static;
* the results of such evaluations that hold at most :data:`SMALL` elements each.

Nodes that draw random numbers or hold subgraphs are not evaluated. Inference leaves the outputs
of a ``Loop`` without shapes; a value the loop carries gets its initial value's static shape where
the body's output for it has that same shape (:func:`_loop_carried_shapes`); the output of a normalisation
that onnx defines without an inference gets its input's (:func:`_input_shaped_outputs`). In a copy of the model the
evaluated nodes become ``Constant`` nodes and inference runs again, until no new value is found
(at most :data:`ROUNDS` times). Only shapes are read from the copy: the importer costs the graph
as the file holds it.

Inference runs in strict mode, so that a shape or element type the file declares and its
operators contradict (a ``value_info`` of ``[4, 1000]`` for a ``MatMul`` of ``[4, 8]`` and
``[8, 16]``), or shapes that do not fit an operator (a ``MatMul`` of ``[4, 8]`` and ``[12, 16]``),
are an error rather than a wrong FLOP count; so is a node whose own operator's inference refuses it
(:func:`_node_fault`: a ``Transpose`` whose ``perm`` repeats an axis, a ``Gemm`` whose inner dimensions
differ). Where strict inference fails for another reason (a node inside a subgraph, whose branch may never
run; an input whose type is missing; an error naming no node), lenient inference is used instead, as it
is in the rounds after evaluation (below), where ``Constant`` nodes stand for the nodes evaluated.
:func:`check_gemm_bias` checks the bias of a ``Gemm``, which inference does not read. Inference takes a
``Reshape``'s target shape as written, so :func:`check_element_counts` checks that the operators that
rearrange a tensor keep its number of elements, :func:`check_convolution_kernels` that a convolution's
weight fits its input and ``kernel_shape``, and :func:`check_convolution_groups` that its ``group`` fits its
channels; :func:`check_recurrent_weights` checks that a recurrent operator's weights fit its input, ``hidden_size``
and ``direction``. Before
inference, :func:`check_declared_dimensions` refuses a declared negative dimension
and :func:`check_split_parts` a ``Split`` that cannot split the declared size of its axis into its parts:
onnx's inference gave either a negative dimension and aborted the process on some operators after it.
After it, :func:`check_split_parts` refuses such a ``Split`` of a size inference found.

Inference runs in a child process (:mod:`placement.io.onnx_child`), so that where it aborts (a negative
dimension it inferred from a computed tensor, which no check before it sees) the import is refused
(:class:`InferenceAbortedError`) rather than the caller's process ended: :func:`_aborted` finds the node
it ended on and says what is wrong where the shapes inferred before that node show it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Collection

from placement.errors import InvalidInstanceError
from placement.io.onnx_branches import graph_attribute
from placement.io.onnx_checks import default_opset
from placement.io.onnx_child import InferenceAborted, infer_shapes

#: the most elements of a value evaluated while following shapes
SMALL = 1024
#: the most rounds of evaluation and inference
ROUNDS = 64
#: ONNX element types that are no floating-point numbers (integers, bool, string): a table of them may
#: hold shapes, and :func:`shapes_only` keeps it
INTEGER_TYPES = frozenset({2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 21, 22})
#: operators never evaluated: their results are random or not functions of their inputs
RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                    "Bernoulli", "Dropout"})


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _conflict(line: str) -> str:
    """onnx's report of a conflict, ``(op_type:MatMul, node name: mm): [ShapeInferenceError] Inferred shape
    and existing shape differ ...``, as ``node 'mm' (MatMul): inferred shape and existing shape differ ...``."""
    found = re.search(r"\(op_type:([^,]*), node name: (.*?)\): (?:\[\w+\] )?(.*)", line)
    if found is None:
        return line
    op_type, node, detail = found.groups()
    return f"node {node!r} ({op_type}): {detail[:1].lower()}{detail[1:]}"


class InferenceAbortedError(InvalidInstanceError):
    """onnx's shape inference ended the process it ran in (:mod:`placement.io.onnx_child`); the message names
    the node it failed on and, where it can, what is wrong (:func:`_aborted`)."""


#: a node's report in onnx's inference error: its operator, its name, the kind of error and what is wrong
NODE_ERROR = re.compile(r"\(op_type:([^,)]*)(?:, node name: (.*?))?\): (?:\[(\w+)\] )?(.*)")
#: what onnx says where a node's inference lacked an input's type, or its element type (an input declaring
#: element type 0, UNDEFINED): information missing, not contradicted
MISSING_TYPE = re.compile(r"expected to have type but instead is null|Element type of input \d+ unknown")


def _node_fault(text: str, names: Collection[str] = ()) -> tuple[str, str, str] | None:
    """``(op_type, node name, what is wrong)`` where onnx's strict inference error ``text`` is a node's own
    inference refusing the node, given its attributes and the types and shapes it knows of its inputs: an
    operator's inference does nothing where what it needs is not known, so such a failure means the node
    cannot run (a ``Transpose`` whose ``perm`` repeats an axis, a ``Gemm`` whose inner dimensions differ, a
    ``Concat`` of tensors of different ranks). ``None`` where the failure is not one (lenient inference then
    serves): an error naming no node, a node of a subgraph (reported nested under its ``If`` or ``Loop``: a
    branch that may never run, inferred again once the importer takes a branch it knows), or an input whose
    type or element type is missing (a graph input declaring none). A node's name may hold ``): `` itself: it
    is the longest of ``names`` (the graph's) that the line gives whole, where one is."""
    for line in text.splitlines():
        found = NODE_ERROR.search(line)
        if found is None:
            continue
        op_type, node, _, detail = found.groups()
        if node:
            after = line[found.start(2):]
            whole = max((name for name in names if after.startswith(f"{name}): ")), key=len, default=node)
            node, detail = whole, re.sub(r"^\[\w+\] ", "", after[len(whole) + len("): "):])
        if detail.startswith("Inference error(s)") or MISSING_TYPE.search(detail):
            return None
        return op_type, node or "", detail.strip()
    return None


def _refused(model: Any, lenient: Any, name: str, fault: tuple[str, str, str], onnx: Any) -> InvalidInstanceError:
    """The error for a node whose own inference refuses it (:func:`_node_fault`), after the importer's checks of
    the shapes ``lenient`` inference found, whose messages say more where they see what is wrong."""
    check_split_parts(lenient.graph, name, default_opset(model), onnx)
    check_element_counts(lenient.graph, name)
    check_convolution_kernels(lenient.graph, name)
    check_convolution_groups(lenient.graph, name)
    check_gemm_bias(lenient.graph, name)
    check_recurrent_weights(lenient.graph, name)
    op_type, node, detail = fault
    unnamed = [k for k, n in enumerate(model.graph.node) if n.op_type == op_type and not n.name]
    label = node or (f"{op_type}_{unnamed[0]}" if len(unnamed) == 1 else "")
    who = f"node {label!r} ({op_type})" if label else f"a node {op_type} without a name"
    remedy = ""
    if op_type == "Einsum" and "ellipsis for input" in detail:   # ONNX's rule, which torch's exporters do not keep
        remedy = (" ONNX requires every ellipsis of an Einsum's equation to stand for as many dimensions "
                  "(torch.einsum broadcasts ellipses of different ranks, and torch's exporters write them unchanged): "
                  "give the operands equal ranks before the einsum (unsqueeze), or import the PyTorch model through "
                  "placement.io.torch_export.import_torch")
    return InvalidInstanceError(f"{name}: the model cannot run: ONNX shape inference refuses {who}: "
                                f"{detail[:1].lower()}{detail[1:]}{remedy}")


def _infer(model: Any, name: str, onnx: Any, refuse: bool = True) -> Any:
    """``model`` with every shape inference finds, in strict mode where it succeeds (module docstring); run in
    a child process, whose end by a signal is an :class:`InferenceAbortedError` (:func:`_aborted`). Where strict
    inference fails as a node's own inference refuses the node (:func:`_node_fault`), the model cannot run: an
    :class:`InvalidInstanceError` naming the node (``refuse``; else lenient inference serves, as it does where
    strict inference fails for another reason)."""
    fault = None
    try:
        return infer_shapes(model, onnx, strict=True)
    except InferenceAborted as exc:
        raise _aborted(model, name, onnx, exc) from None
    except Exception as exc:  # onnx raises InferenceError and others
        fault = _node_fault(str(exc), {node.name for node in model.graph.node})
        lines = [line.strip() for line in str(exc).splitlines() if "differ" in line]
        if lines:
            raise InvalidInstanceError(f"{name}: a shape or element type the model declares contradicts its "
                                       f"operators: {_conflict(lines[0])}") from None
        lines = [line.strip() for line in str(exc).splitlines() if "Incompatible dimensions" in line]
        if lines:   # e.g. a broadcast of [8, 16] with [8, 5], or a MatMul whose inner dimensions differ
            raise InvalidInstanceError(f"{name}: the model cannot run: the shapes reaching an operator do not "
                                       f"fit it: {_conflict(lines[0])}") from None
    try:
        lenient = infer_shapes(model, onnx, strict=False)
    except InferenceAborted as exc:
        raise _aborted(model, name, onnx, exc) from None
    except Exception as exc:
        raise InvalidInstanceError(f"{name}: ONNX shape inference failed: {_first_line(exc)}") from None
    if fault is not None and refuse:
        raise _refused(model, lenient, name, fault, onnx)
    return lenient


def _prefix(model: Any, count: int, onnx: Any) -> Any:
    """A copy of ``model`` with its first ``count`` nodes and no graph outputs (which later nodes may write)."""
    part = onnx.ModelProto()
    _copy_fields(part, model, skip="graph")
    _copy_fields(part.graph, model.graph, skip="node")
    part.graph.node.extend(model.graph.node[:count])
    del part.graph.output[:]
    return part


def _aborted(model: Any, name: str, onnx: Any, exc: InferenceAborted) -> InferenceAbortedError:
    """The error for onnx's shape inference ending the process it ran in on ``model``: it runs again on the
    model's first nodes (bisecting, each time in a child) to find the node it ends on, then on the nodes before
    it, whose inferred shapes say what is wrong: a ``Split`` that cannot split the size inferred for its axis
    (:func:`check_split_parts`), or the node's input inferred with a negative dimension, named with the node
    that writes it. Otherwise the message names the node and onnx's failed assertion."""
    nodes = model.graph.node

    def outcome(count: int) -> Any:
        """The inferred prefix of ``count`` nodes; ``None`` where inference raised; the abort where it ended."""
        try:
            return infer_shapes(_prefix(model, count, onnx), onnx, strict=False)
        except InferenceAborted as abort:
            return abort
        except Exception:  # onnx's own error on a prefix: no abort there
            return None

    reason = f"{exc.signal}: {exc.detail}" if exc.detail else exc.signal
    low, high = 0, len(nodes)   # inference on the first ``high`` nodes ends the process, on ``low`` it does not
    if not isinstance(outcome(high), InferenceAborted):
        return InferenceAbortedError(f"{name}: ONNX shape inference failed and ended the process it ran in "
                                     f"({reason})")
    while high - low > 1:
        middle = (low + high) // 2
        if isinstance(outcome(middle), InferenceAborted):
            high = middle
        else:
            low = middle
    node = nodes[high - 1]
    label = f"{node.name or f'{node.op_type}_{high - 1}'!r} ({node.op_type})"
    before = outcome(high - 1)
    if before is not None and not isinstance(before, InferenceAborted):
        try:
            check_split_parts(before.graph, name, default_opset(model), onnx)
        except InvalidInstanceError as error:
            return InferenceAbortedError(str(error))
        shapes = static_shapes(before.graph)
        for tensor in node.input:
            shape = shapes.get(tensor)
            if shape is None or min(shape, default=0) >= 0:
                continue
            source = written_by(before.graph, tensor) or f"{tensor!r} has"
            return InferenceAbortedError(f"{name}: the model cannot run: {source} the shape {list(shape)}, with a "
                                         f"negative dimension (ONNX shape inference ended the process it ran in "
                                         f"on node {label}, which reads it)")
    return InferenceAbortedError(f"{name}: ONNX shape inference failed on node {label} and ended the process it "
                                 f"ran in ({reason})")


def written_by(graph: Any, tensor: str) -> str | None:
    """``node 'pad' (Pad) gives 't'``: the node of ``graph`` that writes ``tensor`` (unnamed, its operator and
    position, as the importer names it), for a message about the shape it gave; ``None`` where no node writes it."""
    for k, node in enumerate(graph.node):
        if tensor in node.output:
            label = node.name or f"{node.op_type}_{k}"
            return f"node {label!r} ({node.op_type}) gives {tensor!r}"
    return None


#: operators whose output holds the elements of their first input, rearranged
KEEPS_ELEMENTS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose"})


def check_element_counts(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a node of :data:`KEEPS_ELEMENTS` whose input and output have static
    shapes of different element counts: shape inference takes a ``Reshape``'s target shape as written,
    so a shape baked into the model for other input sizes (an export traced at one sequence length, run
    at another) would otherwise be costed as if it could run."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in KEEPS_ELEMENTS:
            continue
        if not node.input or not node.output or node.input[0] not in shapes or node.output[0] not in shapes:
            continue
        before, after = shapes[node.input[0]], shapes[node.output[0]]
        if math.prod(before) != math.prod(after):
            perm = next((list(attr.ints) for attr in node.attribute if attr.name == "perm"), None)
            why = ("a shape the model holds as a constant, made for other input sizes?" if node.op_type != "Transpose"
                   or perm is None or len(perm) == len(before) else
                   f"its perm {perm} names {len(perm)} axis{'es' * (len(perm) != 1)}, and {node.input[0]!r} has "
                   f"{len(before)}")
            raise InvalidInstanceError(
                f"{name}: the model cannot run: node {node.name or f'{node.op_type}_{k}'!r} ({node.op_type}) turns "
                f"{node.input[0]!r} of shape {list(before)} ({math.prod(before):,} elements) into {node.output[0]!r} "
                f"of shape {list(after)} ({math.prod(after):,} elements); a {node.op_type} keeps the number of "
                f"elements ({why})")


def check_convolution_kernels(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a ``Conv`` or ``ConvTranspose`` whose weight does not fit its input and
    its ``kernel_shape`` (static shapes): the weight has the input's rank, two dimensions of channels then the
    kernel's, and a ``kernel_shape`` given is the weight's spatial shape (ONNX Runtime refuses either). Shape
    inference takes the kernel from ``kernel_shape`` where the node gives one, and checks neither, and the costing
    takes the kernel from the weight."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("Conv", "ConvTranspose") or len(node.input) < 2:
            continue
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        if x is None or w is None:
            continue
        kernel = next((list(attr.ints) for attr in node.attribute if attr.name == "kernel_shape"), None)
        problem = None
        if len(w) != len(x) or len(w) < 3:
            problem = (f"its weight {node.input[1]!r} of shape {list(w)} has rank {len(w)}, and its input "
                       f"{node.input[0]!r} of shape {list(x)} rank {len(x)}: a convolution's weight has its input's "
                       "rank, at least 3 (two dimensions of channels, then the kernel's)")
        elif kernel is not None and kernel != list(w[2:]):
            problem = (f"its kernel_shape {kernel} is not the shape {list(w[2:])} of the kernel of its weight "
                       f"{node.input[1]!r} of shape {list(w)}")
        if problem is not None:
            raise InvalidInstanceError(f"{name}: the model cannot run: node {node.name or f'{node.op_type}_{k}'!r} "
                                       f"({node.op_type}): {problem}")


#: the operators that slide a kernel over their input's spatial axes (ConvTranspose widens it instead)
SLIDING = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})


def check_kernel_extents(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a ``Conv`` or pooling whose kernel (dilated) spans more than its input
    with its pads along a spatial axis (static shapes): shape inference gives that axis of the output the size 0,
    and the node would be costed at nothing, where PyTorch and ONNX Runtime refuse it (a kernel larger still gives
    a negative size, refused as such). An input already empty along the axis is not judged."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in SLIDING or not node.output:
            continue
        x, y = shapes.get(node.input[0]), shapes.get(node.output[0])
        if x is None or y is None or len(x) < 3 or len(y) != len(x):
            continue
        attributes = {attr.name: list(attr.ints) for attr in node.attribute}
        spatial = len(x) - 2
        if node.op_type == "Conv":
            w = shapes.get(node.input[1]) if len(node.input) > 1 else None
            kernel = list(w[2:]) if w is not None and len(w) == len(x) else attributes.get("kernel_shape")
        else:
            kernel = attributes.get("kernel_shape")
        if kernel is None or len(kernel) != spatial:
            continue
        if not any(y[2 + axis] == 0 and x[2 + axis] > 0 for axis in range(spatial)):
            continue
        dilations = attributes.get("dilations") or [1] * spatial
        pads = attributes.get("pads") or [0] * (2 * spatial)
        dilated = f" dilated by {dilations}" if any(d != 1 for d in dilations) else ""
        raise InvalidInstanceError(f"{name}: the model cannot run: node {node.name or f'{node.op_type}_{k}'!r} "
                                   f"({node.op_type}): its kernel {kernel}{dilated} spans more than its input "
                                   f"{node.input[0]!r} of shape {list(x)} padded by {pads}, so its output "
                                   f"{node.output[0]!r} has the shape {list(y)}")


def check_convolution_groups(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a ``Conv`` or ``ConvTranspose`` whose ``group`` does not fit the static
    shapes of its input and weight: a ``Conv`` reads ``group × W[1]`` channels and writes ``W[0]``, a multiple
    of ``group``; a ``ConvTranspose`` reads ``W[0]`` channels, a multiple of ``group``. Shape inference does not
    check them, and the costing takes the groups from these shapes."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("Conv", "ConvTranspose") or len(node.input) < 2:
            continue
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        if x is None or w is None or len(x) < 3 or len(x) != len(w) or 0 in x or 0 in w:
            continue
        group = next((attr.i for attr in node.attribute if attr.name == "group"), 1)
        transposed = node.op_type == "ConvTranspose"
        takes = w[0] if transposed else group * w[1]
        divided = w[0]   # a Conv's output channels, a ConvTranspose's input channels
        problem = None
        if group < 1:
            problem = f"its group is {group}, not a positive number of groups"
        elif x[1] != takes:
            taken = "the weight's dimension 0" if transposed else f"group {group} × the weight's dimension 1"
            problem = (f"it reads {node.input[0]!r} of {x[1]} channels, and its weight {node.input[1]!r} of shape "
                       f"{list(w)} takes {takes} ({taken})")
        elif divided % group:
            channels = "input" if transposed else "output"
            problem = (f"its weight {node.input[1]!r} of shape {list(w)} has {divided} {channels} channels, which "
                       f"its group {group} does not divide")
        if problem is not None:
            raise InvalidInstanceError(f"{name}: the model cannot run: node {node.name or f'{node.op_type}_{k}'!r} "
                                       f"({node.op_type}): {problem}")


def check_gemm_bias(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a ``Gemm`` whose bias ``C`` does not broadcast to its output ``M × N``
    (static shapes): ONNX takes ``C`` of shape ``[N]``, ``[M, N]``, or either with dimensions of 1 for the ones
    it repeats. Shape inference gives the output ``M × N`` from ``A`` and ``B`` alone, and does not check it."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type != "Gemm" or len(node.input) < 3 or not node.output:
            continue
        bias, out = shapes.get(node.input[2]), shapes.get(node.output[0])
        if bias is None or out is None or len(out) != 2:
            continue
        if len(bias) <= 2 and all(b in (1, o) for b, o in zip(reversed(bias), reversed(out))):
            continue
        raise InvalidInstanceError(f"{name}: the model cannot run: node {node.name or f'Gemm_{k}'!r} (Gemm): its bias "
                                   f"{node.input[2]!r} of shape {list(bias)} does not broadcast to the shape "
                                   f"{list(out)} (M × N) of its output {node.output[0]!r}; give a bias of shape "
                                   f"[{out[1]}], [1, {out[1]}], [{out[0]}, 1] or {list(out)}")


#: ONNX's recurrent layers, by their gates per step
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def check_recurrent_weights(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for an ``LSTM``, ``GRU`` or ``RNN`` whose weights do not fit its input and
    attributes (static shapes): ``G`` gates, ``D`` directions (2 where ``direction`` is ``bidirectional``), ``H`` its
    ``hidden_size`` and ``I`` the size of its input's last axis, ``W`` is ``[D, G·H, I]``, ``R`` ``[D, G·H, H]``
    and ``B`` ``[D, 2·G·H]`` (ONNX Runtime refuses others). Shape inference gives the outputs from ``hidden_size``
    and ``direction`` alone, and the costing takes the directions from ``W``."""
    shapes = static_shapes(graph)
    for k, node in enumerate(graph.node):
        gates = RECURRENT_GATES.get(node.op_type)
        if node.domain not in ("", "ai.onnx") or gates is None or len(node.input) < 3:
            continue
        attributes = {attr.name: attr for attr in node.attribute}
        x = shapes.get(node.input[0])
        if "hidden_size" not in attributes or x is None or not x:
            continue
        hidden = attributes["hidden_size"].i
        direction = attributes["direction"].s if "direction" in attributes else b"forward"
        directions = 2 if direction == b"bidirectional" else 1
        expected = {1: [directions, gates * hidden, x[-1]], 2: [directions, gates * hidden, hidden],
                    3: [directions, 2 * gates * hidden]}
        meaning = {1: f"{gates * hidden} (gates × hidden_size) × {x[-1]} (the input size of {node.input[0]!r})",
                   2: f"{gates * hidden} (gates × hidden_size) × {hidden} (hidden_size)",
                   3: f"{2 * gates * hidden} (2 × gates × hidden_size)"}
        for position, role in ((1, "weight W"), (2, "recurrent weight R"), (3, "bias B")):
            if position >= len(node.input) or not node.input[position]:
                continue
            shape = shapes.get(node.input[position])
            if shape is not None and list(shape) != expected[position]:
                raise InvalidInstanceError(
                    f"{name}: the model cannot run: node {node.name or f'{node.op_type}_{k}'!r} ({node.op_type}): its "
                    f"{role} {node.input[position]!r} has the shape {list(shape)}, not {expected[position]}: "
                    f"{directions} direction{'s' if directions > 1 else ''} × {meaning[position]}")


def check_declared_dimensions(graph: Any, name: str) -> None:
    """:class:`InvalidInstanceError` for a tensor the graph declares (an input, an output, a value info) with a
    negative dimension (``-1`` for "any", as some converters write it): onnx's shape inference, given one,
    aborted the whole process on some operators (a ``Slice`` of it: a failed assertion, nothing to catch)."""
    for value in (*graph.input, *graph.output, *graph.value_info):
        if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        if any(d.HasField("dim_value") and d.dim_value < 0 for d in dims):
            shown = [int(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
            raise InvalidInstanceError(f"{name}: tensor {value.name!r} is declared with the shape {shown}, with a "
                                       "negative dimension; declare that dimension symbolic (a name, fixed with "
                                       "dims) or give its size")


def _declared_dimensions(graph: Any) -> dict[str, list[int | str]]:
    """The dimensions of every tensor ``graph`` declares with a shape (inputs, value infos, outputs,
    initializers): a size, or the name of a symbolic one (``"?"``: not given)."""
    dims: dict[str, list[int | str]] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            dims.setdefault(value.name, [int(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?"
                                         for d in value.type.tensor_type.shape.dim])
    for init in graph.initializer:
        dims[init.name] = [int(d) for d in init.dims]
    return dims


def _split_sizes(node: Any, graph: Any, onnx: Any) -> list[int] | None:
    """The part sizes ``Split`` ``node`` is given: its ``split`` attribute (opsets 2 to 12) or the value of
    its second input where an initializer or a ``Constant`` node holds it; ``None`` where it is given none
    or its value is not held in the graph."""
    for attr in node.attribute:
        if attr.name == "split":
            return [int(v) for v in attr.ints]
    if len(node.input) < 2 or not node.input[1]:
        return None
    tensors = [init for init in graph.initializer if init.name == node.input[1]]
    for constant in graph.node:
        if constant.op_type == "Constant" and list(constant.output) == [node.input[1]]:
            for attr in constant.attribute:
                if attr.name == "value_ints":
                    return [int(v) for v in attr.ints]
                if attr.name == "value":
                    tensors.append(attr.t)
    from onnx import numpy_helper

    for tensor in tensors[:1]:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        try:
            return [int(v) for v in numpy_helper.to_array(tensor).reshape(-1)]
        except Exception:  # a tensor that cannot be read is simply not known
            return None
    return None


def check_split_parts(graph: Any, name: str, opset: int | None, onnx: Any) -> None:
    """:class:`InvalidInstanceError` for a ``Split`` of the default domain along an axis whose size the graph
    declares (an input, a value info, an initializer) that cannot split it: part sizes the graph holds (an
    attribute, an initializer, a ``Constant``), one negative or their sum not that size; no part sizes, and
    parts of ``ceil(size / parts)`` elements (opset 18 on; the last the rest) that leave the last a negative
    size, or (before opset 18, equal parts) a size that is no multiple of the parts. Part sizes the graph
    computes are not known here, and not checked. onnx's shape inference gave such a part a negative
    dimension and, on some operators after it (a ``Slice`` of it: a failed assertion, nothing to catch),
    aborted the whole process."""
    dims = _declared_dimensions(graph)
    for k, node in enumerate(graph.node):
        if node.op_type != "Split" or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        shape = dims.get(node.input[0])
        axis = next((int(attr.i) for attr in node.attribute if attr.name == "axis"), 0)
        if shape is None or not -len(shape) <= axis < len(shape) or not isinstance(shape[axis], int):
            continue
        axis %= len(shape)
        size = shape[axis]
        where = (f"{name}: node {node.name or f'Split_{k}'!r} (Split) splits axis {axis} of tensor {node.input[0]!r}, "
                 f"of shape {shape}, into ")
        sizes = _split_sizes(node, graph, onnx)
        if sizes is not None:
            if any(v < 0 for v in sizes):
                raise InvalidInstanceError(f"{where}parts of sizes {sizes}, with a negative size; give part sizes "
                                           f"of at least 0 that sum to {size}")
            if sum(sizes) != size:
                raise InvalidInstanceError(f"{where}parts of sizes {sizes}, which sum to {sum(sizes)}, not {size}; "
                                           f"give part sizes that sum to {size}")
            continue
        if len(node.input) > 1 and node.input[1]:   # part sizes the graph computes: not known before inference
            continue
        parts = next((int(attr.i) for attr in node.attribute if attr.name == "num_outputs"), len(node.output))
        if parts < 1:
            continue
        if opset is not None and opset < 18 and size % parts:
            raise InvalidInstanceError(f"{where}{parts} equal parts, which its {size} element{'s' * (size != 1)} "
                                       f"along it do not make (opset {opset}: a Split without part sizes makes "
                                       f"equal parts); give the part sizes")
        chunk = -(-size // parts)
        rest = size - chunk * (parts - 1)
        if rest < 0:   # equal parts, the rule before opset 18, would not be whole either
            raise InvalidInstanceError(f"{where}{parts} parts of {chunk} element{'s' * (chunk != 1)} but the last, "
                                       f"which holds the rest, {rest} elements; give the part sizes")


def check_initialised_inputs(graph: Any, name: str, onnx: Any) -> None:
    """:class:`InvalidInstanceError` for a graph input that an initializer of its name gives a default
    (IR version 3 lists every weight so) of another shape (a dimension the input fixes) or element type than
    the input declares: shape inference reports it as a conflict of the first operator that reads it."""
    initial = {init.name: init for init in graph.initializer}
    for value in graph.input:
        init = initial.get(value.name)
        if init is None or not value.type.HasField("tensor_type"):
            continue
        tensor = value.type.tensor_type
        held = list(int(d) for d in init.dims)
        if tensor.HasField("shape"):
            dims = tensor.shape.dim
            declared = [int(d.dim_value) if d.HasField("dim_value") else None for d in dims]
            if len(declared) != len(held) or any(d is not None and d != h for d, h in zip(declared, held)):
                shown = [d if d is not None else "?" for d in declared]
                raise InvalidInstanceError(f"{name}: the graph input {value.name!r} is declared of shape {shown}, "
                                           f"but the initializer of its name holds a tensor of shape {held}")
        if tensor.elem_type and init.data_type and tensor.elem_type != init.data_type:
            kinds = [onnx.TensorProto.DataType.Name(t) if t in onnx.TensorProto.DataType.values() else str(t)
                     for t in (tensor.elem_type, init.data_type)]
            raise InvalidInstanceError(f"{name}: the graph input {value.name!r} is declared of element type "
                                       f"{kinds[0]}, but the initializer of its name holds {kinds[1]}")


def static_shapes(graph: Any) -> dict[str, tuple[int, ...]]:
    """The static shape of every tensor ``graph`` declares with one (inputs, value infos, outputs)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes.setdefault(value.name, tuple(int(d.dim_value) for d in dims))
    for init in graph.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
    return shapes


def _initial_values(graph: Any, onnx: Any) -> dict[str, Any]:
    """The values of the small initializers whose data the model holds."""
    from onnx import numpy_helper

    values: dict[str, Any] = {}
    for init in graph.initializer:
        if math.prod(init.dims) > SMALL or init.data_location == onnx.TensorProto.EXTERNAL:
            continue
        try:
            values[init.name] = numpy_helper.to_array(init)
        except Exception:  # a tensor the reference cannot read is simply not known
            continue
    return values


def _shape_value(node: Any, shape: tuple[int, ...], np: Any) -> Any:
    """The value of ``Shape`` (with its ``start`` and ``end``) or ``Size`` of a tensor of ``shape``."""
    if node.op_type == "Size":
        return np.array(math.prod(shape), dtype=np.int64)
    attrs = {attr.name: attr.i for attr in node.attribute}
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = (min(max(x + rank if x < 0 else x, 0), rank) for x in (start, end))
    return np.array(shape[start:end], dtype=np.int64)


def _evaluate(graph: Any, opsets: dict[str, int], known: dict[str, Any]) -> set[int]:
    """Evaluate every node of ``graph`` whose inputs are known (module docstring), adding its results to
    ``known``; the positions of the nodes whose results are all known now and were not before."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    shapes = static_shapes(graph)
    found: set[int] = set()
    for k, node in enumerate(graph.node):
        outputs = [name for name in node.output if name]
        if not outputs or all(name in known for name in outputs):
            continue
        if (node.domain not in ("", "ai.onnx") or node.op_type in RANDOM
                or any(attr.HasField("g") or attr.graphs for attr in node.attribute)):
            continue
        if node.op_type in ("Shape", "Size") and node.input and node.input[0] in shapes:
            results = [_shape_value(node, shapes[node.input[0]], np)]
        else:
            if not all(name in known for name in node.input if name):
                continue
            feeds = {name: known[name] for name in node.input if name}
            try:
                results = _run_node(node, opsets, feeds, ReferenceEvaluator)
            except Exception:  # an operator the reference cannot run on these values is not followed
                continue
        values = list(results)
        if (len(values) != len(outputs) or not all(isinstance(v, np.ndarray) for v in values)
                or any(v.size > SMALL for v in values)):
            continue   # a sequence (SplitToSequence), a map or a large result is not followed
        known.update(zip(outputs, values))
        if node.op_type != "Constant":
            found.add(k)
    return found


def _run_node(node: Any, opsets: dict[str, int], feeds: dict[str, Any], evaluator: Any) -> list[Any]:
    """``node``'s named outputs on ``feeds`` by ONNX's reference implementation, run as a one-node model
    that imports ``opsets``: given a bare node, the reference takes its newest version of the operator
    whatever opset it is told (an opset-11 ``Unsqueeze``, whose axes are an attribute, then fails)."""
    from onnx import ValueInfoProto, helper

    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), None)
              for name, value in feeds.items()]
    outputs = [ValueInfoProto(name=name) for name in node.output if name]
    imports = [helper.make_opsetid(domain, version) for domain, version in opsets.items()]
    model = helper.make_model(helper.make_graph([node], "node", inputs, outputs), opset_imports=imports or None)
    return evaluator(model).run(None, feeds)


def _as_constants(graph: Any, positions: set[int], known: dict[str, Any]) -> None:
    """Replace the nodes of ``graph`` at ``positions`` by ``Constant`` nodes writing their known results."""
    from onnx import helper, numpy_helper

    nodes = []
    for k, node in enumerate(graph.node):
        if k not in positions:
            nodes.append(node)
            continue
        nodes.extend(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(known[name], name))
                     for name in node.output if name)
    del graph.node[:]
    graph.node.extend(nodes)


def shapes_only(model: Any, onnx: Any) -> Any:
    """A copy of ``model`` in which every large weight, and every sparse initializer, is an input of the same
    element type and (dense) shape: onnx's inference gives a sparse initializer no tensor shape (a ``MatMul``
    of it read it as of rank 0). Inference reads only a large weight's shape, and each round of it copied the
    whole model, weights and all (a model of 335 MB took 2.4 GB to import). A large weight is an initializer
    of more than :data:`SMALL` floating-point elements that the graph declares nowhere else, or declares with
    its own type and shape; integer initializers stay (inference follows the values of a table a ``Gather``
    or ``Slice`` reads a shape from), and so do those declared otherwise (inference checks the declaration). The
    copy is made field by field, the weights' data never copied."""
    graph = model.graph
    declared = {value.name: value for value in (*graph.input, *graph.value_info, *graph.output)}

    def weight(init: Any) -> bool:
        if init.data_type in INTEGER_TYPES or math.prod(init.dims) <= SMALL:
            return False
        other = declared.get(init.name)
        if other is None:
            return True
        kind = other.type.tensor_type
        return (other.type.HasField("tensor_type") and kind.elem_type == init.data_type and kind.HasField("shape")
                and [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim] == list(init.dims))

    large = [init for init in graph.initializer if weight(init)]
    if not large and not graph.sparse_initializer:
        return model
    light = onnx.ModelProto()
    _copy_fields(light, model, skip="graph")
    _copy_fields(light.graph, model.graph, skip="initializer")
    names = {init.name for init in large}
    light.graph.initializer.extend(init for init in model.graph.initializer if init.name not in names)
    declared = {value.name: value for value in light.graph.input}
    for init in large:
        value = declared.get(init.name) or light.graph.input.add()
        value.CopyFrom(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    del light.graph.sparse_initializer[:]
    for sparse in graph.sparse_initializer:
        value = declared.get(sparse.values.name) or light.graph.input.add()
        value.CopyFrom(onnx.helper.make_tensor_value_info(sparse.values.name, sparse.values.data_type,
                                                          list(sparse.dims)))
    return light


def _copy_fields(target: Any, source: Any, skip: str) -> None:
    """Copy every field that ``source`` (a protobuf message) has set into ``target``, but ``skip``, and text that
    is not UTF-8 (protobuf hands it over as bytes, and refuses to set it: a model's producer name, which
    nothing here reads)."""
    for field, value in source.ListFields():
        if field.name == skip or (field.type == field.TYPE_STRING and isinstance(value, bytes)):
            continue
        if hasattr(value, "ListFields"):   # a message (the descriptor's label is deprecated in protobuf 6)
            getattr(target, field.name).CopyFrom(value)
        elif not isinstance(value, (str, bytes)) and hasattr(value, "extend"):   # a repeated field
            getattr(target, field.name).extend(value)
        else:
            setattr(target, field.name, value)


def _element_types(graph: Any) -> dict[str, int]:
    """The element type (an ``onnx.TensorProto`` data type) of each input, declared value and initializer of
    ``graph``, by name."""
    types = {value.name: value.type.tensor_type.elem_type for value in (*graph.input, *graph.value_info)}
    types.update((init.name, init.data_type) for init in graph.initializer)
    return types


def _declare_like(graph: Any, value: str, like: str, shapes: dict[str, Any], types: dict[str, int], onnx: Any) -> None:
    """Declare ``value`` in ``graph`` with the static shape and element type of ``like``, and record them in
    ``shapes`` and ``types`` (the maps of :func:`static_shapes` and :func:`_element_types`), where later values
    are read."""
    graph.value_info.append(onnx.helper.make_tensor_value_info(value, types[like], list(shapes[like])))
    shapes[value], types[value] = shapes[like], types[like]


def _loop_carried_shapes(graph: Any, onnx: Any) -> bool:
    """Give each value a ``Loop`` carries (its outputs before the scan outputs) the static shape of its initial
    value where the body declares that same shape for it: it holds that shape after any number of
    iterations, none included. Shape inference leaves a Loop's outputs without one. Whether any was given."""
    loops = [node for node in graph.node if node.op_type == "Loop" and node.domain in ("", "ai.onnx")]
    if not loops:
        return False
    shapes = static_shapes(graph)
    types = _element_types(graph)
    given = False
    for node in loops:
        body = graph_attribute(node, "body")
        if body is None:
            continue
        declared = static_shapes(body)
        for k, (initial, out) in enumerate(zip(node.input[2:], node.output)):
            if not out or out in shapes or initial not in shapes or initial not in types:
                continue
            if 1 + k < len(body.output) and declared.get(body.output[1 + k].name) == shapes[initial]:
                _declare_like(graph, out, initial, shapes, types, onnx)   # a later loop may carry it on
                given = True
    return given


#: operators of the default domain whose output has its first input's shape and type, which onnx defines without a
#: shape inference (GroupNormalization at opsets 18 and 21, MeanVarianceNormalization at 9 and 13)
INPUT_SHAPED = frozenset({"GroupNormalization", "MeanVarianceNormalization"})


def _input_shaped_outputs(graph: Any, name: str, onnx: Any) -> bool:
    """Give the output of each :data:`INPUT_SHAPED` node its input's static shape and type, which inference
    leaves it without; an output the file declares with another shape contradicts the operator: an error naming
    the node. Whether any was given."""
    nodes = [node for node in graph.node if node.op_type in INPUT_SHAPED and node.domain in ("", "ai.onnx")
             and node.input and node.output and node.output[0]]
    if not nodes:
        return False
    shapes = static_shapes(graph)
    types = _element_types(graph)
    given = False
    for node in nodes:
        x, y = node.input[0], node.output[0]
        if x not in shapes:
            continue
        if y in shapes:
            if shapes[y] != shapes[x]:
                raise InvalidInstanceError(f"{name}: node {node.name or y!r} ({node.op_type}) writes {y!r} of shape "
                                           f"{list(shapes[x])}, the shape of its input {x!r}; the model declares "
                                           f"{list(shapes[y])}")
            continue
        if x in types:
            _declare_like(graph, y, x, shapes, types, onnx)   # a later node may read it
            given = True
    return given


def shaped_model(model: Any, name: str, onnx: Any) -> tuple[Any, dict[str, Any]]:
    """A copy of ``model`` whose value infos hold every shape found (module docstring), and the values
    known on the way (by tensor name: small constants and the results evaluated); ``model`` is not
    changed. Inference runs on the model without the data of its large initializers (:func:`shapes_only`)."""
    check_declared_dimensions(model.graph, name)
    check_initialised_inputs(model.graph, name, onnx)
    check_split_parts(model.graph, name, default_opset(model), onnx)
    shaped = _infer(shapes_only(model, onnx), name, onnx)
    carried = _loop_carried_shapes(shaped.graph, onnx)
    if _input_shaped_outputs(shaped.graph, name, onnx) or carried:
        shaped = _infer(shaped, name, onnx)
    opsets = {"": entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")}
    known = _initial_values(model.graph, onnx)
    for _ in range(ROUNDS):
        found = _evaluate(shaped.graph, opsets, known)
        if not _input_shaped_outputs(shaped.graph, name, onnx) and not found:
            break
        _as_constants(shaped.graph, found, known)
        try:
            shaped = _infer(shaped, name, onnx, refuse=False)
        except InferenceAbortedError:
            raise
        except InvalidInstanceError:
            break
    check_split_parts(shaped.graph, name, default_opset(model), onnx)
    check_element_counts(shaped.graph, name)
    check_convolution_kernels(shaped.graph, name)
    check_convolution_groups(shaped.graph, name)
    check_kernel_extents(shaped.graph, name)
    check_gemm_bias(shaped.graph, name)
    check_recurrent_weights(shaped.graph, name)
    return shaped, known
