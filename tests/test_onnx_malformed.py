"""ONNX models the importer must read right or refuse clearly: invalid graphs, shapes that inference
alone cannot follow, declared shapes that contradict the operators, malformed fields, fusion that
must not swallow a value read elsewhere, sizes at the edges.

Expected values are derived in the comments (fp32: 4 bytes per element, int64: 8).
"""

from __future__ import annotations

import warnings

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import numpy as np  # noqa: E402

from placement.cli import main  # noqa: E402
from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.errors import InvalidInstanceError  # noqa: E402
from placement.io.onnx_import import graph_from_onnx, import_onnx  # noqa: E402
from placement.io.opgraph import CostModelWarning  # noqa: E402


def model(nodes, inputs, outputs, inits=(), value_info=(), opset=17):
    """A model of ``nodes``; ``inputs`` and ``outputs`` are (name, shape) pairs (fp32; shape None: unknown)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], list(inits),
                              value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def weight(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.ones(shape, dtype=dtype), name)


def edges(graph):
    return [(k, src) for k, op in enumerate(graph.ops) for src, _ in op.inputs]


def test_a_bias_after_a_split_does_not_hide_the_splits_other_output():
    """MatMul -> Split -> (half 0 + bias) and (half 1 -> Relu) -> Add. The bias Add reads the MatMul's
    result through a view, but the Split's other half goes to the Relu: fusing the Add into the MatMul
    would leave the Relu reading a value no operator writes (it lost its edge and its 512 KiB transfer).
    Every node stays an operator: edges mm->split, split->bias, split->relu, bias->sum, relu->sum."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
             helper.make_node("Split", ["a", "sizes"], ["a0", "a1"], name="split", axis=1),
             helper.make_node("Add", ["a0", "bias"], ["y0"], name="bias"),
             helper.make_node("Relu", ["a1"], ["y1"], name="relu"),
             helper.make_node("Add", ["y0", "y1"], ["y"], name="sum")]
    inits = [weight("W", (512, 512)), numpy_helper.from_array(np.array([256, 256], np.int64), "sizes"),
             weight("bias", (256,))]
    graph = graph_from_onnx(model(nodes, [("x", [512, 512])], [("y", [512, 256])], inits), "split")
    assert [op.name for op in graph.ops] == ["mm", "split", "bias", "relu", "sum"]
    assert edges(graph) == [(1, 0), (2, 1), (3, 1), (4, 2), (4, 3)]
    assert graph.ops[1].outputs == (512 * 256 * 4.0, 512 * 256 * 4.0)


def test_nodes_stored_out_of_order_are_sorted():
    """A chain of three MatMuls stored last first: ONNX requires a topological order, and read in the
    stored order the reads of earlier-stored nodes found no writer, so the graph had no edges at all."""
    chain = [helper.make_node("MatMul", ["x", "W0"], ["a"], name="m0"),
             helper.make_node("MatMul", ["a", "W1"], ["b"], name="m1"),
             helper.make_node("MatMul", ["b", "W2"], ["y"], name="m2")]
    inits = [weight(f"W{k}", (8, 8)) for k in range(3)]
    stored = graph_from_onnx(model(chain[::-1], [("x", [4, 8])], [("y", [4, 8])], inits), "reversed")
    ordered = graph_from_onnx(model(chain, [("x", [4, 8])], [("y", [4, 8])], inits), "ordered")
    assert [op.name for op in stored.ops] == ["m0", "m1", "m2"]
    assert edges(stored) == edges(ordered) == [(1, 0), (2, 1)]


@pytest.mark.parametrize("nodes, message", [
    ([helper.make_node("Relu", ["b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")],
     "cycle: the graph has a cycle through node 'n1'"),
    ([helper.make_node("Relu", ["x"], ["a"], name="n1"), helper.make_node("Relu", ["x"], ["a"], name="n2")],
     "cycle: node 'n2' writes 'a', which node 'n1' already holds (an ONNX tensor is written once)"),
    ([helper.make_node("Relu", ["x"], ["x"], name="n1")],
     "cycle: node 'n1' writes 'x', which a graph input or initializer already holds (an ONNX tensor is written once)"),
    ([helper.make_node("Add", ["x", "ghost"], ["a"], name="n1")],
     "cycle: node 'n1' reads 'ghost', which is no graph input, initializer or output of a node"),
    ([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["c"], ["b"]),
      helper.make_node("Relu", ["b"], ["c"])],
     "cycle: the graph has a cycle through node 1 (Relu)"),
    # an output nothing writes was imported, without the outputs the exporters check the last stage for
    ([helper.make_node("Relu", ["x"], ["b"], name="n1")],
     "cycle: the graph output 'a' is no graph input, initializer or output of a node"),
])
def test_an_invalid_graph_is_refused(nodes, message):
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [2, 2])], [("a", [2, 2])]), "cycle")
    assert str(err.value) == message


def test_shape_arithmetic_that_inference_does_not_follow_is_evaluated():
    """X[6,8] -> Slice(X, 0, Div(Shape(X)[0], 2)) -> Relu: onnx's data propagation does not follow Div,
    so the Slice's output was [?, 8] and the import refused it. Evaluated: the slice keeps rows 0..2,
    [3, 8]; the Relu reads and writes 96 B each and does 24 FLOPs."""
    consts = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dtype=np.int64)))
              for name, v in (("zero", [0]), ("two", [2]))]
    nodes = consts + [helper.make_node("Shape", ["X"], ["s"], name="/shape", start=0, end=1),
                      helper.make_node("Div", ["s", "two"], ["half"], name="/div"),
                      helper.make_node("Slice", ["X", "zero", "half", "zero"], ["top"], name="/slice"),
                      helper.make_node("Relu", ["top"], ["Y"], name="/relu")]
    graph = graph_from_onnx(model(nodes, [("X", [6, 8])], [("Y", None)]), "halves")
    assert [(op.name, op.outputs) for op in graph.ops] == [("/slice", (96.0,)), ("/relu", (96.0,))]
    assert (graph.ops[1].flops, graph.ops[1].bytes_moved) == (24.0, 192.0)


@pytest.mark.parametrize("opset", [11, 13])
def test_shape_arithmetic_is_evaluated_at_the_model_s_opset(opset):
    """An LSTM's initial state as an exporter builds it: h0 = Expand(z[1,1,12], Concat([1], Unsqueeze(
    Shape(X)[1]), [12])) = [1, 3, 12] for X[7,3,8], then Y = h0 + y[1,3,12] (36 elements: 144 B out).
    Before opset 13 Unsqueeze takes its axes as an attribute; evaluated with the newest version of the
    operator it failed, and the import refused the Expand as not static."""
    unsqueeze = (helper.make_node("Unsqueeze", ["b"], ["b1"], axes=[0]) if opset < 13
                 else helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]))
    nodes = [helper.make_node("Shape", ["X"], ["s"]), helper.make_node("Gather", ["s", "one"], ["b"], axis=0),
             unsqueeze, helper.make_node("Concat", ["first", "b1", "last"], ["shape"], axis=0),
             helper.make_node("Expand", ["z", "shape"], ["h0"], name="/expand"),
             helper.make_node("Add", ["h0", "y"], ["Y"], name="/add")]
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), name)
             for name, v in (("one", 1), ("first", [1]), ("last", [12]), ("axes", [0]))]
    inits.append(numpy_helper.from_array(np.zeros((1, 1, 12), dtype=np.float32), "z"))
    graph = graph_from_onnx(model(nodes, [("X", [7, 3, 8]), ("y", [1, 3, 12])], [("Y", None)], inits, opset=opset),
                            "state")
    assert [op.outputs for op in graph.ops if op.name == "/add"] == [(144.0,)]


def test_a_declared_shape_the_operators_contradict_is_an_error():
    """y = x[4,8] @ W[8,16] is [4,16]; the file says [4,1000]. Costed as declared, the MatMul had 64,000
    FLOPs instead of 2*4*16*8 = 1,024."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"])]
    info = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1000])]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [4, 8])], [("z", None)], [weight("W", (8, 16))], info), "wrong")
    assert str(err.value) == ("wrong: a shape or element type the model declares contradicts its operators: node "
                              "'mm' (MatMul): inferred shape and existing shape differ in dimension 1: (16) vs (1000)")


def test_a_graph_input_whose_initializer_has_another_shape_or_type_is_an_error():
    """W listed as a graph input [8, 4] (IR version 3 lists every weight so) whose initializer holds [8, 16]:
    onnx reported it as a conflict of inferred and existing shapes, naming neither the input nor the
    initializer. A dimension left free ('?') matches any; the element type is compared too."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    for declared, held, said in (([8, 4], weight("W", (8, 16)), "of shape [8, 4], but the initializer of its name "
                                  "holds a tensor of shape [8, 16]"),
                                 ([8], weight("W", (8, 16)), "of shape [8], but the initializer of its name holds a "
                                  "tensor of shape [8, 16]"),
                                 (["n", 16], weight("W", (8, 16), np.float64), "of element type FLOAT, but the "
                                  "initializer of its name holds DOUBLE")):
        with pytest.raises(InvalidInstanceError) as err:
            graph_from_onnx(model(nodes, [("x", [4, 8]), ("W", declared)], [("y", None)], [held]), "weights")
        assert str(err.value) == f"weights: the graph input 'W' is declared {said}"
    graph = graph_from_onnx(model(nodes, [("x", [4, 8]), ("W", ["n", 16])], [("y", None)], [weight("W", (8, 16))]),
                            "weights")
    assert [op.flops for op in graph.ops] == [2 * 4 * 8 * 16]


def test_the_symbolic_dimensions_of_an_initialised_input_are_its_initializer_s():
    """W listed as a graph input [a, b] (a weight a runtime may replace) whose initializer holds [8, 16]: the
    weight's shape is known, yet the import asked for dims a and b. A size dims gives them is still compared."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    inputs = [("x", [4, 8]), ("W", ["a", "b"])]
    graph = graph_from_onnx(model(nodes, inputs, [("y", None)], [weight("W", (8, 16))]), "weights")
    assert [(op.flops, op.outputs) for op in graph.ops] == [(2 * 4 * 8 * 16, (4 * 16 * 4.0,))]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, inputs, [("y", None)], [weight("W", (8, 16))]), "weights", dims={"b": 12})
    assert str(err.value) == ("weights: the graph input 'W' is declared of shape [8, 12], but the initializer of "
                              "its name holds a tensor of shape [8, 16]")


def test_an_initialised_input_declaring_no_shape_takes_its_initializer_s():
    """W listed as a graph input of type float and no shape, whose initializer holds [8, 16]: onnx took the
    declared type, and the MatMul reading W was refused as if its shape followed from values the graph computes."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    graph = graph_from_onnx(model(nodes, [("x", [4, 8]), ("W", None)], [("y", None)], [weight("W", (8, 16))]),
                            "weights")
    assert [(op.flops, [(p.name, p.nbytes) for p in op.params]) for op in graph.ops] == [
        (2 * 4 * 8 * 16, [("W", 512.0)])]


@pytest.mark.parametrize("node, inits, said", [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv"), [weight("w", (2, 3, 5, 5))],
     "its kernel [5, 5] spans more than its input 'x' of shape [1, 3, 4, 4] padded by [0, 0, 0, 0], so its output "
     "'y' has the shape [1, 2, 0, 0]"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="conv", dilations=[2, 1], pads=[0, 1, 0, 1]),
     [weight("w", (2, 3, 3, 3))], "its kernel [3, 3] dilated by [2, 1] spans more than its input 'x' of shape "
     "[1, 3, 4, 4] padded by [0, 1, 0, 1], so its output 'y' has the shape [1, 2, 0, 4]"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[5, 1]), [],
     "its kernel [5, 1] spans more than its input 'x' of shape [1, 3, 4, 4] padded by [0, 0, 0, 0], so its output "
     "'y' has the shape [1, 3, 0, 4]"),
])
def test_a_kernel_larger_than_its_padded_input_is_an_error(node, inits, said):
    """A 5×5 convolution of a 4×4 input: onnx infers an empty output, and the node was costed at 0 FLOPs, where
    PyTorch and ONNX Runtime refuse the kernel (a larger one gave a negative dimension, refused already)."""
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model([node], [("x", [1, 3, 4, 4])], [("y", None)], inits), "kernel")
    assert str(err.value) == f"kernel: the model cannot run: node {node.name!r} ({node.op_type}): {said}"


def test_a_transpose_whose_perm_names_too_few_axes_is_named_so():
    """perm [1] on x [2, 8]: onnx infers y [8], and the refusal asked whether a shape the model holds as a constant
    was made for other input sizes, which a Transpose holds none of."""
    node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model([node], [("x", [2, 8])], [("y", None)]), "perm")
    assert str(err.value) == ("perm: the model cannot run: node 't' (Transpose) turns 'x' of shape [2, 8] (16 "
                              "elements) into 'y' of shape [8] (8 elements); a Transpose keeps the number of elements "
                              "(its perm [1] names 1 axis, and 'x' has 2)")


def _convolution(op_type, weight_shape, group=None):
    """X [1, 4, 6, 6] by a 1x1 kernel of ``weight_shape`` (output shape left to inference)."""
    attrs = {} if group is None else {"group": group}
    node = helper.make_node(op_type, ["x", "w"], ["y"], name="conv", **attrs)
    return model([node], [("x", [1, 4, 6, 6])], [("y", None)], [weight("w", weight_shape)])


@pytest.mark.parametrize("op_type, weight_shape, group, problem", [
    # more weight input channels than X has: the groups were taken as 4 // 6 = 0, a ZeroDivisionError
    ("Conv", [8, 6, 1, 1], None, "it reads 'x' of 4 channels, and its weight 'w' of shape [8, 6, 1, 1] takes 6 "
                                 "(group 1 × the weight's dimension 1)"),
    # a depthwise weight without its group: costed as 4 groups, a convolution the model does not hold
    ("Conv", [8, 1, 1, 1], None, "it reads 'x' of 4 channels, and its weight 'w' of shape [8, 1, 1, 1] takes 1 "
                                 "(group 1 × the weight's dimension 1)"),
    ("Conv", [8, 4, 1, 1], 2, "it reads 'x' of 4 channels, and its weight 'w' of shape [8, 4, 1, 1] takes 8 "
                              "(group 2 × the weight's dimension 1)"),
    ("Conv", [6, 1, 1, 1], 4, "its weight 'w' of shape [6, 1, 1, 1] has 6 output channels, which its group 4 does "
                              "not divide"),
    ("Conv", [8, 4, 1, 1], 0, "its group is 0, not a positive number of groups"),
    ("ConvTranspose", [2, 3, 1, 1], None, "it reads 'x' of 4 channels, and its weight 'w' of shape [2, 3, 1, 1] "
                                          "takes 2 (the weight's dimension 0)"),
    ("ConvTranspose", [4, 3, 1, 1], 3, "its weight 'w' of shape [4, 3, 1, 1] has 4 input channels, which its group 3 "
                                       "does not divide"),
])
def test_a_convolution_whose_group_does_not_fit_its_channels_is_an_error(op_type, weight_shape, group, problem):
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_convolution(op_type, weight_shape, group), "conv")
    assert str(err.value) == f"conv: the model cannot run: node 'conv' ({op_type}): {problem}"


@pytest.mark.parametrize("op_type, weight_shape, kernel, problem", [
    # given kernel_shape, shape inference reads no kernel from the weight: the costing failed on the weight
    # (an IndexError for [8], a ZeroDivisionError for [8, 4])
    ("Conv", [8], [1, 1], "its weight 'w' of shape [8] has rank 1, and its input 'x' of shape [1, 4, 6, 6] rank 4: "
                          "a convolution's weight has its input's rank, at least 3 (two dimensions of channels, then "
                          "the kernel's)"),
    ("Conv", [8, 4], [1, 1], "its weight 'w' of shape [8, 4] has rank 2, and its input 'x' of shape [1, 4, 6, 6] "
                             "rank 4: a convolution's weight has its input's rank, at least 3 (two dimensions of "
                             "channels, then the kernel's)"),
    # inference wrote a 6x6 output of a 1x1 kernel, costed with the 3x3 kernel of the weight
    ("Conv", [8, 4, 3, 3], [1, 1], "its kernel_shape [1, 1] is not the shape [3, 3] of the kernel of its weight 'w' "
                                   "of shape [8, 4, 3, 3]"),
    ("ConvTranspose", [4, 3, 3, 3], [1, 1], "its kernel_shape [1, 1] is not the shape [3, 3] of the kernel of its "
                                            "weight 'w' of shape [4, 3, 3, 3]"),
])
def test_a_convolution_whose_weight_does_not_fit_its_input_or_kernel_shape_is_an_error(op_type, weight_shape, kernel,
                                                                                         problem):
    node = helper.make_node(op_type, ["x", "w"], ["y"], name="conv", kernel_shape=kernel)
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model([node], [("x", [1, 4, 6, 6])], [("y", None)], [weight("w", weight_shape)]), "conv")
    assert str(err.value) == f"conv: the model cannot run: node 'conv' ({op_type}): {problem}"


def _lstm(w_shape, r_shape, direction="forward", hidden_size=32):
    """X [7, 2, 16] (7 steps of 2 samples of 16) through an LSTM of weights ``w_shape`` and ``r_shape``."""
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=hidden_size, direction=direction)
    return model([node], [("x", [7, 2, 16])], [("y", None)], [weight("W", w_shape), weight("R", r_shape)])


@pytest.mark.parametrize("w_shape, r_shape, direction, hidden_size, problem", [
    # shape inference wrote the output of hidden_size 64, and the FLOPs were those of 64 units: 573440, not 172032
    ([1, 128, 16], [1, 128, 32], "forward", 64, "its weight W 'W' has the shape [1, 128, 16], not [1, 256, 16]: 1 "
                                                "direction × 256 (gates × hidden_size) × 16 (the input size of 'x')"),
    # two directions written, one costed (the costing takes them from W)
    ([1, 128, 16], [1, 128, 32], "bidirectional", 32, "its weight W 'W' has the shape [1, 128, 16], not [2, 128, 16]: "
                                                       "2 directions × 128 (gates × hidden_size) × 16 (the input size "
                                                       "of 'x')"),
    ([1, 128, 8], [1, 128, 32], "forward", 32, "its weight W 'W' has the shape [1, 128, 8], not [1, 128, 16]: 1 "
                                               "direction × 128 (gates × hidden_size) × 16 (the input size of 'x')"),
    ([1, 128, 16], [1, 100, 32], "forward", 32, "its recurrent weight R 'R' has the shape [1, 100, 32], not "
                                                "[1, 128, 32]: 1 direction × 128 (gates × hidden_size) × 32 "
                                                "(hidden_size)"),
])
def test_a_recurrent_operator_whose_weights_do_not_fit_it_is_an_error(w_shape, r_shape, direction, hidden_size,
                                                                      problem):
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_lstm(w_shape, r_shape, direction, hidden_size), "rnn")
    assert str(err.value) == f"rnn: the model cannot run: node 'lstm' (LSTM): {problem}"


def test_a_recurrent_operator_whose_weights_fit_it_is_costed():
    # 2 · T · N · G·H · (I + H) per direction: 2 · 7 · 2 · 128 · (16 + 32) = 172032
    (op,) = graph_from_onnx(_lstm([1, 128, 16], [1, 128, 32]), "rnn").ops
    assert op.flops == 172032
    (op,) = graph_from_onnx(_lstm([2, 128, 16], [2, 128, 32], "bidirectional"), "rnn").ops
    assert op.flops == 2 * 172032


@pytest.mark.parametrize("op_type, weight_shape, group, flops", [
    # a 1x1 Conv of 36 positions: 2 · 36 · (input channels per group) · (output channels)
    ("Conv", [8, 4, 1, 1], None, 2 * 36 * 4 * 8),
    ("Conv", [8, 1, 1, 1], 4, 2 * 36 * 1 * 8),      # depthwise, two outputs per channel
    ("Conv", [8, 2, 1, 1], 2, 2 * 36 * 2 * 8),
    # a ConvTranspose of weight [4, 3] in 2 groups writes 6 channels: 2 · 36 · 2 (inputs per group) · 6
    ("ConvTranspose", [4, 3, 1, 1], 2, 2 * 36 * 2 * 6),
])
def test_a_grouped_convolution_that_fits_is_costed(op_type, weight_shape, group, flops):
    graph = graph_from_onnx(_convolution(op_type, weight_shape, group), "conv")
    assert [op.flops for op in graph.ops] == [flops]


def test_a_reshape_to_another_number_of_elements_is_an_error():
    """x[100,32] reshaped to the constant [8,2,16] (256 elements, as an export traced at other sizes holds),
    then multiplied by W[16,16]: shape inference takes the target as written, and the MatMul was costed
    as 2*8*2*16*16 = 8,192 FLOPs for a graph that cannot run."""
    target = numpy_helper.from_array(np.array([8, 2, 16], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="view"),
             helper.make_node("MatMul", ["r", "W"], ["y"], name="mm")]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [100, 32])], [("y", None)], [target, weight("W", (16, 16))]), "baked")
    assert str(err.value) == ("baked: the model cannot run: node 'view' (Reshape) turns 'x' of shape [100, 32] "
                              "(3,200 elements) into 'r' of shape [8, 2, 16] (256 elements); a Reshape keeps the "
                              "number of elements (a shape the model holds as a constant, made for other input "
                              "sizes?)")
    ok = numpy_helper.from_array(np.array([200, 16], dtype=np.int64), "shape")   # 3,200 elements: costed
    graph = graph_from_onnx(model(nodes, [("x", [100, 32])], [("y", None)], [ok, weight("W", (16, 16))]), "fine")
    assert [op.flops for op in graph.ops if op.name == "mm"] == [2 * 200 * 16 * 16]


def test_shapes_that_do_not_fit_an_operator_are_an_error():
    """x[8,16] + y[8,5] broadcasts nowhere: the import said the sum's shape 'is not static after shape
    inference (it follows from values the graph computes ...)', which sent the user looking elsewhere."""
    nodes = [helper.make_node("Add", ["x", "y"], ["z"], name="add"), helper.make_node("Relu", ["z"], ["o"])]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [8, 16]), ("y", [8, 5])], [("o", None)]), "broadcast")
    assert str(err.value) == ("broadcast: the model cannot run: the shapes reaching an operator do not fit it: "
                              "node 'add' (Add): incompatible dimensions")


def test_element_types_an_operator_cannot_take_are_an_error():
    """Add binds both inputs to its one type T: a float [8, 16] plus an int64 [8, 16] cannot run (ONNX's
    strict shape inference lets it pass; its checker does not), and was costed as a float Add. Pow's
    exponent has a type of its own (T1): a float to an int64 power is a model that runs."""
    int64 = numpy_helper.from_array(np.ones((8, 16), np.int64), "k")
    nodes = [helper.make_node("Add", ["x", "k"], ["z"], name="add"), helper.make_node("Relu", ["z"], ["o"])]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [8, 16])], [("o", [8, 16])], [int64]), "mixed")
    assert str(err.value) == ("mixed: node 'add' (Add) cannot run: its operator takes one element type for T, but "
                              "'x' is FLOAT and 'k' is INT64")
    nodes = [helper.make_node("Pow", ["x", "k"], ["z"], name="pow"), helper.make_node("Relu", ["z"], ["o"])]
    graph = graph_from_onnx(model(nodes, [("x", [8, 16])], [("o", [8, 16])], [int64]), "power")
    assert [op.name for op in graph.ops] == ["pow", "Relu_1"]


def _relu(name="r"):
    return model([helper.make_node("Relu", ["x"], ["y"], name=name)], [("x", [4, 8])], [("y", [4, 8])])


def test_a_name_that_is_not_text_is_an_error(tmp_path):
    data = _relu("NODENAME").SerializeToString().replace(b"NODENAME", b"NODE\xff\xfeME")
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    with pytest.raises(InvalidInstanceError) as err:
        import_onnx(path, platform=make_platform())
    assert str(err.value) == r"bad: the name of node 0 ('NODE\xff\xfeME') is not valid UTF-8 text"


@pytest.mark.parametrize("name, shown", [("n1", "'n1'"), ("", "1")])
def test_a_node_without_an_operator_type_is_an_error(name, shown):
    # it was costed by bytes moved, with the warning "no FLOP formula for 1 operator type(s) ...: " naming none
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="n0"), helper.make_node("", ["r"], ["a"], name=name)]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [2, 2])], [("a", [2, 2])]), "empty")
    assert str(err.value) == f"empty: node {shown} has no operator type (its op_type is empty)"


def test_an_operator_newer_than_the_model_s_opset_is_named():
    """onnxruntime's transformer optimiser writes LayerNormalization (defined from opset 17) into an opset-14
    model: the message blamed values the graph computes that the importer could not evaluate."""
    gain = numpy_helper.from_array(np.ones(8, dtype=np.float32), "g")
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["l"], name="LayerNorm_0"),
             helper.make_node("Relu", ["l"], ["y"], name="r")]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [4, 8])], [("y", None)], [gain], opset=14), "ln")
    assert str(err.value) == (
        "ln: cannot cost node 'LayerNorm_0' (LayerNormalization): the shape of its output 'l' is not static after "
        "shape inference (onnx defines operator LayerNormalization from opset 17 on, and the model imports opset "
        "14, so it infers no shape for its outputs; export the model at opset 17 or later, or declare them in the "
        "model's value_info)")
    assert [op.name for op in graph_from_onnx(model(nodes, [("x", [4, 8])], [("y", None)], [gain]), "ln").ops] == [
        "LayerNorm_0", "r"]


def test_an_operator_onnx_infers_no_shape_for_at_the_model_s_opset_is_named():
    """Before opset 6, onnx defines BatchNormalization (and Relu, Add, Concat, ...) without a shape inference: a
    valid opset-4 model (onnx.checker accepts it) was refused as though its shapes followed from values the graph
    computes. The message names the operator's version and the opset from which onnx infers its shapes."""
    stats = [numpy_helper.from_array(np.ones(4, dtype=np.float32), n) for n in ("s", "b", "m", "v")]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn",
                              consumed_inputs=[0, 0, 0, 1, 1], is_test=1)]
    old = model(nodes, [("x", [2, 3, 8, 8])], [("y", None)], [weight("W", (4, 3, 3, 3)), *stats], opset=4)
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(old, "bn")
    assert str(err.value) == (
        "bn: cannot cost node 'bn' (BatchNormalization): the shape of its output 'y' is not static after shape "
        "inference (onnx defines BatchNormalization-1, the version of opset 4, which the model imports, without a "
        "shape inference, so it infers no shape for its outputs; export the model at opset 6 or later, or declare "
        "them in the model's value_info)")
    declared = model(nodes, [("x", [2, 3, 8, 8])], [("y", [2, 4, 8, 8])], [weight("W", (4, 3, 3, 3)), *stats],
                     opset=4)
    onnx.checker.check_model(declared)
    assert [op.name for op in graph_from_onnx(declared, "bn").ops] == ["conv", "bn"]


def test_a_producer_name_that_is_not_text_is_not_read(tmp_path):
    """The model's producer name is no name the importer reads; where it is not UTF-8, the copy made for shape
    inference of a model with a large weight (64 x 64, more than SMALL elements) failed with protobuf's
    UnicodeDecodeError. The model imports: a 4 x 64 by 64 x 64 MatMul, 2 · 4 · 64 · 64 = 32,768 FLOPs."""
    weight = numpy_helper.from_array(np.ones((64, 64), dtype=np.float32), "W")
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [("x", [4, 64])], [("y", [4, 64])],
              [weight])
    m.producer_name = "PRODUCER"
    path = tmp_path / "producer.onnx"
    path.write_bytes(m.SerializeToString().replace(b"PRODUCER", b"PROD\xff\xfeER"))
    (op,) = graph_from_onnx(onnx.load(str(path)), "producer").ops
    assert (op.name, op.flops) == ("mm", 32768.0)


@pytest.mark.parametrize("data_type, shown", [(72, 72), (0, 0)])
def test_an_unknown_element_type_is_an_error(data_type, shown):
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [("x", [4, 8])], [("y", [4, 8])],
              [weight("W", (8, 8))])
    m.graph.initializer[0].data_type = data_type
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "types")
    assert str(err.value) == (f"types: tensor 'W' has element type {shown}, which is no ONNX element type this onnx "
                              "version knows")


@pytest.mark.parametrize("scopes", ["None", "[1, 2, 3]", "['a', 'b'", "'a'"])
def test_scope_metadata_that_is_no_list_of_names_is_ignored(scopes):
    """torch writes ``pkg.torch.onnx.name_scopes`` as a list of module names; anything else is not read,
    and the node name /enc/Relu gives the module path ('enc',)."""
    m = _relu("/enc/Relu")
    prop = m.graph.node[0].metadata_props.add()
    prop.key, prop.value = "pkg.torch.onnx.name_scopes", scopes
    assert [op.module_path for op in graph_from_onnx(m, "scopes").ops] == [("enc",)]


def test_an_expand_of_a_constant_is_a_tensor_not_parameter_memory():
    """Add(X, Expand(1.0, [64, 64])): the Expand reads a number (its int64 shape is a host value); it is an
    operator (a view) whose output the Add reads, not 16 KiB of constant data held as memory."""
    one = helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32)))
    size = helper.make_node("Constant", [], ["size"], value=numpy_helper.from_array(np.array([64, 64], np.int64)))
    nodes = [one, size, helper.make_node("Expand", ["one", "size"], ["E"], name="/expand"),
             helper.make_node("Add", ["X", "E"], ["Y"], name="/add")]
    graph = graph_from_onnx(model(nodes, [("X", [64, 64])], [("Y", None)]), "expand")
    assert [(op.name, op.kind) for op in graph.ops] == [("/expand", "view"), ("/add", "pointwise")]
    assert [[(p.name, p.nbytes) for p in op.params] for op in graph.ops] == [[], []]
    assert edges(graph) == [(1, 0)]


def test_sub_byte_element_types_take_their_bits():
    """An int4 weight of 64x32 = 2,048 elements is 1,024 bytes; a uint2 one 512 bytes; a 6-bit float one
    2,048 · 6 / 8 = 1,536 bytes (packed, as onnx.proto says; it was counted at a byte each). (Dequantised by a
    Cast: more than SMALL elements, so the Cast is an operator, not shape arithmetic.)"""
    for elem_type, nbytes in ((TensorProto.INT4, 1024.0), (TensorProto.UINT2, 512.0),
                              (TensorProto.FLOAT6E2M3, 1536.0), (TensorProto.FLOAT6E3M2, 1536.0)):
        w = helper.make_tensor("W", elem_type, [64, 32], [1] * 2048)
        m = model([helper.make_node("Cast", ["W"], ["Wf"], to=TensorProto.FLOAT, name="/cast"),
                   helper.make_node("MatMul", ["x", "Wf"], ["y"], name="/mm")], [("x", [2, 64])], [("y", [2, 32])],
                  [w], opset=25)
        params = [p for op in graph_from_onnx(m, "narrow").ops for p in op.params]
        assert [(p.name, p.nbytes) for p in params] == [("W", nbytes)]


def test_a_tensor_beyond_any_device_is_an_error():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [2 ** 62, 2 ** 62])], [("y", None)])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "huge")
    assert str(err.value) == "huge: tensor 'x' holds 2.127e+37 elements (2 dimensions), more than any device can hold"


def test_inputs_that_hold_no_samples_are_an_error():
    """A model whose inputs all hold no elements (a static batch of 0) was costed as a run of no samples: every
    operator its overhead alone. One empty input beside one that holds samples is read as before."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [0, 4])], [("y", [0, 4])])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "empty")
    assert str(err.value) == "empty: the model's inputs hold no elements (shapes (0, 4)): give it one batch of samples"
    m = model([helper.make_node("Concat", ["x", "z"], ["y"], name="c", axis=0)], [("x", [2, 4]), ("z", [0, 4])],
              [("y", [2, 4])])
    assert [op.name for op in graph_from_onnx(m, "half").ops] == ["c"]


def test_the_scalar_index_of_a_select_is_no_parameter_memory():
    """``x[:, -1]`` is a Gather of a 0-dimensional int64 initializer, which is torch's ``select`` taking a Python
    int: a view reading no tensor. Its 8-byte index was charged to the node as parameter memory (the torch
    import charges none; an unoptimised dynamo export of nn.MultiheadAttention holds three such). A 1-element
    index of rank 1 (``x[:, [-1]]``, ``index_select``) is a tensor the gather reads: 8 bytes."""
    for index, shape, memory in ((np.array(-1, np.int64), [2, 8], 0.0), (np.array([-1], np.int64), [2, 1, 8], 8.0)):
        m = model([helper.make_node("Gather", ["x", "i"], ["s"], name="select", axis=1),
                   helper.make_node("MatMul", ["s", "W"], ["y"], name="mm")],
                  [("x", [2, 5, 8])], [("y", shape)], [numpy_helper.from_array(index, "i"), weight("W", (8, 8))])
        graph = graph_from_onnx(m, "select")
        assert [op.name for op in graph.ops] == ["select", "mm"]
        assert sum(p.nbytes for p in graph.ops[0].params) == memory
        assert graph.ops[1].params[0].nbytes == 8 * 8 * 4


def test_a_sparse_initializer_is_a_parameter():
    """A sparse 8x8 weight with two stored values is a dense 256-byte parameter of the MatMul."""
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "W")
    indices = numpy_helper.from_array(np.array([0, 9], np.int64), "W_indices")
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [("x", [4, 8])], [("y", [4, 8])])
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [8, 8]))
    graph = graph_from_onnx(m, "sparse")
    assert [[(p.name, p.nbytes, p.trainable) for p in op.params] for op in graph.ops] == [[("W", 256.0, True)]]
    assert graph.ops[0].flops == 2 * 4 * 8 * 8


def test_a_bf16_model_on_a_device_without_bf16(tmp_path, capsys):
    """The model's own data type, no --dtype given: the error says so before naming the option."""
    m = _relu()
    for value in (*m.graph.input, *m.graph.output):
        value.type.tensor_type.elem_type = TensorProto.BFLOAT16
    path = tmp_path / "bf16.onnx"
    onnx.save(m, str(path))
    out = str(tmp_path / "o.json")
    assert main(["import", str(path), "--devices", "v100", "--out", out]) == 2
    assert capsys.readouterr().err == (
        "error: the model computes in a data type a device has no peak FLOP/s for: --dtype must be one of the data "
        "types with a peak FLOP/s on device 'v100' (NVIDIA Tesla V100 SXM2 32GB): 'fp64', 'fp32', 'fp16', not "
        "'bf16'\n")
    assert main(["import", str(path), "--devices", "v100", "--dtype", "bf16", "--out", out]) == 2
    assert capsys.readouterr().err.startswith("error: --dtype must be one of the data types")
    assert main(["import", str(path), "--devices", "v100", "--dtype", "fp16", "--out", out]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--dim", "batch=8", "--dim", "batch=9"], "error: --dim gives 'batch' twice (8 and 9)\n"),
])
def test_import_options(tmp_path, capsys, argv, message):
    path = tmp_path / "m.onnx"
    m = _relu()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(m, str(path))
    assert main(["import", str(path), "--out", str(tmp_path / "o.json"), *argv]) == 2
    assert capsys.readouterr().err == message


def test_a_directory_is_no_model(tmp_path):
    (tmp_path / "x.onnx").mkdir()
    with pytest.raises(InvalidInstanceError) as err:
        import_onnx(tmp_path / "x.onnx", platform=make_platform())
    assert str(err.value) == f"{tmp_path / 'x.onnx'}: a directory, not an ONNX model"


def _sequence_model(split_input, axis, keepdims, takes, x_shape, out_shape, opset=18):
    """x -> MatMul W -> SplitToSequence(split) -> SequenceAt(i) for i in ``takes`` -> summed by Adds -> y."""
    inits = [weight("W", (x_shape[-1], x_shape[-1]))]
    inputs = ["h"]
    if split_input is not None:
        inits.append(numpy_helper.from_array(np.array(split_input, np.int64), "split"))
        inputs.append("split")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("SplitToSequence", inputs, ["parts"], name="to_sequence", axis=axis, keepdims=keepdims)]
    for k, i in enumerate(takes):
        inits.append(numpy_helper.from_array(np.array(i, np.int64), f"i{k}"))
        nodes.append(helper.make_node("SequenceAt", ["parts", f"i{k}"], [f"p{k}"], name=f"at{k}"))
    total = "p0"
    for k in range(1, len(takes)):
        nodes.append(helper.make_node("Add", [total, f"p{k}"], [f"s{k}"], name=f"add{k}"))
        total = f"s{k}"
    nodes.append(helper.make_node("Relu", [total], ["y"], name="relu"))
    return model(nodes, [("x", x_shape)], [("y", out_shape)], inits, opset=opset)


@pytest.mark.parametrize("split_input, axis, keepdims, takes, out_shape", [
    (16, -1, 1, [0, 1, -1], [2, 16]),          # q, k, v = h.split(16, -1): three parts of 16
    ([16, 32], 1, 1, [0], [2, 16]),            # h.split([16, 32], 1)[0]
    (None, 0, 0, [0, 1], [48]),                # a, b = h.unbind(0): parts of 1 row, squeezed
])
def test_a_split_written_as_a_sequence_is_read_as_the_split(split_input, axis, keepdims, takes, out_shape):
    """torch.onnx.export(..., optimize=False) writes torch.split, chunk and unbind as SplitToSequence and one
    SequenceAt per part taken; they were refused (and an uneven split of a parameter crashed the shape
    evaluation with a numpy traceback). Read as the Split they are: the parts are views of the MatMul's
    result, the Adds and the Relu cost their true sizes (2x48 fp32 = 384 B for h)."""
    graph = graph_from_onnx(_sequence_model(split_input, axis, keepdims, takes, [2, 48], out_shape), "seq")
    names = [op.name for op in graph.ops]
    assert names[:2] == ["mm", "to_sequence"] and names[-1] == "relu"
    # the split and the parts it is read as (Identity nodes of its outputs where kept whole, squeezed where not)
    assert all(op.kind == "view" for op in graph.ops if op.name == "to_sequence" or op.name.startswith("at"))
    assert [op.kind for op in graph.ops if op.kind != "view"] == ["matmul"] + ["pointwise"] * len(takes)
    relu = graph.ops[-1]
    size = 4.0 * np.prod(out_shape)
    assert relu.flops == np.prod(out_shape) and relu.outputs == (size,)
    assert graph.ops[0].outputs == (384.0,)


def test_a_sequence_that_is_no_split_is_refused_clearly():
    """A sequence read as a whole (ConcatFromSequence) is no split of known parts: refused by name."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"], name="to_sequence", axis=0),
             helper.make_node("ConcatFromSequence", ["parts"], ["y"], name="concat", axis=0)]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [2, 16])], [("y", None)]), "seq")
    assert str(err.value) == ("seq: node 'to_sequence' (SplitToSequence) makes or reads an ONNX sequence that is no "
                              "split of a known tensor into parts taken at known positions, which is all the importer "
                              "reads of sequences (placement.io.onnx_sequences); export with optimize=True or "
                              "dynamo=False")


def test_a_sequence_built_element_by_element_is_refused_without_export_advice_that_cannot_help():
    """torch.onnx.export writes nn.EmbeddingBag as SequenceEmpty and a Loop inserting a row per bag, with
    optimize=True and dynamo=True, the defaults; the TorchScript exporter as a Loop whose output has no
    static shape. The refusal advised exporting with optimize=True or dynamo=False, neither of which helps;
    it now says where such a model can be read."""
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], name="empty"),
             helper.make_node("SequenceInsert", ["empty", "x"], ["rows"], name="insert"),
             helper.make_node("ConcatFromSequence", ["rows"], ["y"], name="concat", axis=0)]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [2, 16])], [("y", None)]), "bag")
    assert str(err.value) == ("bag: node 'empty' (SequenceEmpty) makes or reads an ONNX sequence that is no split of "
                              "a known tensor into parts taken at known positions, which is all the importer reads of "
                              "sequences (placement.io.onnx_sequences); such a sequence is built element by element "
                              "(as the exporters write nn.EmbeddingBag, in a Loop): import the PyTorch model through "
                              "torch.export instead (placement.io.torch_export.import_torch)")


def test_an_epilogue_is_a_bias_or_an_affine_not_any_parameter():
    """MatMul + Add(bias [16]) + Add(pos [6, 16]) + Mul(g [16]), as torch exports (linear(x) + pos) * g:
    torch runs linear (with its bias), the add and the mul, three kernels. The position embedding has
    two axes, and a matmul takes one Add: the Add of pos and the Mul are operators of their own (they
    had joined the MatMul as one kernel with no FLOPs of their own)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "bias"], ["hb"], name="bias"),
             helper.make_node("Add", ["hb", "pos"], ["hp"], name="pos"),
             helper.make_node("Mul", ["hp", "g"], ["y"], name="scale")]
    inits = [weight("W", (16, 16)), weight("bias", (16,)), weight("pos", (6, 16)), weight("g", (16,))]
    graph = graph_from_onnx(model(nodes, [("x", [2, 6, 16])], [("y", None)], inits), "epilogue")
    # 2*192*16 = 6,144 FLOPs for the matmul; 192 each for the add and the mul
    assert [(op.target, op.flops) for op in graph.ops] == [("MatMul+Add", 6144.0), ("Add", 192.0), ("Mul", 192.0)]


def test_a_small_int8_weight_dequantized_is_a_weight_of_one_byte_an_element():
    """DequantizeLinear of a 16x16 int8 weight with a constant scale reads only constants; folded as
    shape arithmetic, it became a 1,024-byte fp32 constant and no kernel, where a 64x64 one stayed a
    kernel with its 4,096 int8 bytes. Both are kernels now: the 16x16 weight is 256 bytes (the scale a
    number, held in no memory), and the dequantization 256 FLOPs, one per element."""
    scale = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array(0.1, np.float32)))
    nodes = [scale, helper.make_node("DequantizeLinear", ["wq", "s"], ["w"], name="dq"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    wq = numpy_helper.from_array(np.ones((16, 16), np.int8), "wq")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_onnx(model(nodes, [("x", [2, 16])], [("y", None)], [wq]), "qdq")
    assert [(op.name, op.flops) for op in graph.ops] == [("dq", 256.0), ("mm", 1024.0)]
    assert [(p.name, p.nbytes) for p in graph.ops[0].params] == [("wq", 256.0)]


def test_an_uneven_split_of_a_parameter_written_as_a_sequence():
    """b (48 floats) split into 16 and 32, x + b[:16]: evaluating the shape arithmetic met a list of two
    arrays of different lengths and died with a numpy traceback. The split is a view reading b (192 B),
    and the Add does 2x16 = 32 FLOPs."""
    nodes = [helper.make_node("SplitToSequence", ["b", "sizes"], ["parts"], name="split"),
             helper.make_node("SequenceAt", ["parts", "zero"], ["b0"], name="at"),
             helper.make_node("Add", ["x", "b0"], ["y"], name="add")]
    inits = [weight("b", (48,)), numpy_helper.from_array(np.array([16, 32], np.int64), "sizes"),
             numpy_helper.from_array(np.array(0, np.int64), "zero")]
    graph = graph_from_onnx(model(nodes, [("x", [2, 16])], [("y", [2, 16])], inits), "param")
    # the part taken whole is the Split's output itself (the Identity it is read as names it)
    assert [(op.name, op.kind, op.flops) for op in graph.ops] == [("split", "view", 0.0), ("add", "pointwise", 32.0)]
    # the part sizes become a constant of the Split (two int64), a host value: no memory of it
    assert [(p.name, p.nbytes, p.trainable) for p in graph.ops[0].params] == [("b", 192.0, True)]


def test_a_renamed_node_takes_no_name_another_node_has():
    """Nodes named n, n, n_1: the second n was renamed n_1, the name of the file's third node (a Sigmoid),
    which became n_1_2; a user matching stages to the file's nodes by name took the Relu for the Sigmoid. Each
    name the file gives once stays its node's."""
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="n"), helper.make_node("Relu", ["a"], ["b"], name="n"),
             helper.make_node("Sigmoid", ["b"], ["y"], name="n_1"),
             helper.make_node("Neg", ["y"], ["z"]), helper.make_node("Exp", ["z"], ["w"], name="Neg_3")]
    graph = graph_from_onnx(model(nodes, [("x", [8, 16])], [("w", None)]), "names")
    assert [(op.name, op.target) for op in graph.ops] == [("n", "Abs"), ("n_2", "Relu"), ("n_1", "Sigmoid"),
                                                          ("Neg_3_3", "Neg"), ("Neg_3", "Exp")]


def test_the_default_domain_named_ai_onnx_is_the_default_domain():
    """ONNX names its default domain "" and "ai.onnx"; a Relu written with the second was refused ("onnx knows
    no operator Relu", as onnx's shape inference finds operators under the first name only)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/relu", domain="ai.onnx"),
             helper.make_node("Sigmoid", ["a"], ["y"], name="/sigmoid")]
    graph = graph_from_onnx(model(nodes, [("x", [8, 16])], [("y", None)]), "domains")
    assert [(op.name, op.target, op.outputs) for op in graph.ops] == [("/relu", "Relu", (512.0,)),
                                                                     ("/sigmoid", "Sigmoid", (512.0,))]


def test_two_initializers_of_one_name_are_refused_as_such():
    """Two weights named W ([16, 16] and [16, 32]): onnx's shape inference took one for the other, and the
    refusal spoke of a declared shape contradicting an operator."""
    weights = [numpy_helper.from_array(np.ones((16, 16), np.float32), "W"),
               numpy_helper.from_array(np.ones((16, 32), np.float32), "W")]
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"], name="/mm")], [("x", [2, 16])], [("y", None)], weights)
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "twice")
    assert str(err.value) == ("twice: two initializers are named 'W' (an ONNX tensor has one name and one "
                              "definition); rename one and the nodes that read it")


@pytest.mark.parametrize("ir_version", [0, 3])
def test_an_old_model_reads_the_initializers_it_does_not_list_as_inputs(ir_version):
    """Before IR version 4 every initializer is a graph input too, and onnx's shape inference reads only those
    listed: a weight W of [16, 8] left out of the inputs made the MatMul "not static after shape inference"
    (it follows from values the graph computes). 2·16·8 multiply-adds: 512 FLOPs, W 512 bytes."""
    weight = numpy_helper.from_array(np.ones((16, 8), np.float32), "W")
    m = model([helper.make_node("MatMul", ["x", "W"], ["y"], name="/mm")], [("x", [2, 16])], [("y", None)], [weight],
              opset=9)
    m.ir_version = ir_version
    graph = graph_from_onnx(m, "old")
    assert [(op.name, op.flops, [(p.name, p.nbytes) for p in op.params]) for op in graph.ops] == [
        ("/mm", 512.0, [("W", 512.0)])]


def test_an_input_declaring_no_type_is_named():
    """An input made by make_empty_tensor_value_info (no type, no shape) was blamed on "values the graph
    computes"; it is named as an input declaring no shape is."""
    m = model([helper.make_node("Relu", ["x"], ["y"], name="/relu")], [], [("y", None)])
    m.graph.input.append(helper.make_empty_tensor_value_info("x"))
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "typeless")
    assert str(err.value) == ("typeless: cannot cost node '/relu' (Relu): the shape of its input 'x' is not static "
                              "after shape inference (the model's input 'x' declares no shape; export the model with "
                              "its input shapes)")


def test_an_input_that_is_no_tensor_is_named():
    """An input of optional type (read by OptionalGetElement) has no tensor shape: the message blamed values the
    graph computes that the importer could not evaluate."""
    m = model([helper.make_node("OptionalGetElement", ["o"], ["a"], name="/get"),
               helper.make_node("Relu", ["a"], ["y"], name="/relu")], [], [("y", None)], opset=18)
    tensor = helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 4])
    m.graph.input.append(helper.make_value_info("o", helper.make_optional_type_proto(tensor)))
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "optional")
    assert str(err.value) == ("optional: cannot cost node '/get' (OptionalGetElement): the shape of its input 'o' is "
                              "not static after shape inference (the model's input 'o' is an optional, not a tensor, "
                              "and the importer reads tensors only)")


def test_a_sequence_the_model_takes_as_input_is_named_as_such():
    """A sequence given as a graph input, read by SequenceAt: the refusal said such a sequence is built element
    by element, as the exporters write nn.EmbeddingBag in a Loop, which this model does not do."""
    m = model([helper.make_node("SequenceAt", ["s", "i"], ["a"], name="/at"),
               helper.make_node("Relu", ["a"], ["y"], name="/relu")], [], [("y", None)],
              [numpy_helper.from_array(np.array(0, np.int64), "i")])
    m.graph.input.append(helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2, 4]))
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "taken")
    assert str(err.value) == ("taken: node '/at' (SequenceAt) makes or reads an ONNX sequence that is no split of a "
                              "known tensor into parts taken at known positions, which is all the importer reads of "
                              "sequences (placement.io.onnx_sequences); it reads the model's input 's', a sequence: "
                              "the importer reads models whose inputs are tensors")


def test_a_loop_s_scan_output_is_named_as_why_its_shape_is_unknown():
    """A Loop of a constant 3 iterations stacks its body's [2, 4] into a scan output: onnx infers no size for the
    iterations, and the refusal blamed values the graph computes. It names the Loop's scan output, and the
    import costs the model once the output is declared."""
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"], name="/body/cond"),
                              helper.make_node("Relu", ["h"], ["s"], name="/body/Relu")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c_in", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 4])])
    nodes = [helper.make_node("Loop", ["n", "go"], ["stacked"], name="/loop", body=body),
             helper.make_node("Relu", ["stacked"], ["y"], name="/relu")]
    trips = [numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "go")]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("h", [2, 4])], [("y", None)], trips), "loop")
    assert str(err.value) == ("loop: cannot cost node '/loop' (Loop): the shape of its output 'stacked' is not static "
                              "after shape inference (it is a scan output of Loop '/loop', whose number of iterations "
                              "onnx's shape inference does not follow; declare its shape in the model's value_info)")
    declared = model(nodes, [("h", [2, 4])], [("y", None)], trips,
                     value_info=[helper.make_tensor_value_info("stacked", TensorProto.FLOAT, [3, 2, 4])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        assert [(op.name, op.flops) for op in graph_from_onnx(declared, "loop").ops] == [("/loop", 0.0),
                                                                                          ("/relu", 24.0)]


def test_an_if_whose_branches_give_an_output_different_shapes_is_named():
    """An If on a condition the model computes, whose branches return [2, 4] and [4, 4]: the refusal blamed values
    the graph computes that the importer could not evaluate, and named neither the branches nor their shapes."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="/then/Relu")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 4])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], name="/else/Concat", axis=0)], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4, 4])])
    m = model([helper.make_node("ReduceSum", ["x"], ["s"], name="/sum", keepdims=0),
               helper.make_node("Greater", ["s", "zero"], ["c"], name="/gt"),
               helper.make_node("If", ["c"], ["i"], name="/if", then_branch=then, else_branch=other),
               helper.make_node("Relu", ["i"], ["y"], name="/relu")], [("x", [2, 4])], [("y", None)],
              [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "branches")
    assert str(err.value) == ("branches: cannot cost node '/if' (If): the shape of its output 'i' is not static after "
                              "shape inference (its branches give it the shapes [2, 4] and [4, 4], and which one runs "
                              "follows from values the graph computes)")


def test_an_operator_of_another_domain_onnx_infers_no_shape_for_is_named():
    """onnx defines ai.onnx.ml's Normalizer without a shape inference: the message blamed values the graph
    computes that the importer could not evaluate."""
    m = model([helper.make_node("Normalizer", ["x"], ["y"], name="/norm", domain="ai.onnx.ml", norm="L2")],
              [("x", [2, 4])], [("y", None)])
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "ml")
    assert str(err.value) == ("ml: cannot cost node '/norm' (Normalizer): the shape of its output 'y' is not static "
                              "after shape inference (onnx defines ai.onnx.ml::Normalizer-1, the version of the "
                              "model's opset 3 of ai.onnx.ml, without a shape inference, so it infers no shape for "
                              "its outputs; declare them in the model's value_info)")
    m.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        assert [op.target for op in graph_from_onnx(m, "ml").ops] == ["ai.onnx.ml::Normalizer"]


@pytest.mark.parametrize("nodes, inputs, outputs, inits, said", [
    # x [4, 4] transposed by perm [0, 0] is declared [4, 4]: it was costed as a 64-byte copy
    ([helper.make_node("Transpose", ["x"], ["y"], name="t0", perm=[0, 0])], [("x", [4, 4])], [("y", [4, 4])], [],
     "node 't0' (Transpose): attribute perm for Transpose has repeated value: 0"),
    # x [4, 8] times W [7, 16]: the inner dimensions differ
    ([helper.make_node("Gemm", ["x", "W"], ["y"], name="g0")], [("x", [4, 8])], [("y", None)],
     [weight("W", (7, 16))], "node 'g0' (Gemm): dimension mismatch in unification between 7 and 8"),
    # an unnamed node is named as the importer names it, by its operator and position
    ([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["r", "v"], ["y"], axis=0)],
     [("x", [4, 8])], [("y", None)], [weight("v", (8,))],
     "node 'Concat_1' (Concat): all inputs to Concat must have same rank. Input 1 has rank 1 != 2"),
])
def test_a_node_that_onnx_inference_refuses_is_an_error(nodes, inputs, outputs, inits, said):
    """Strict shape inference fails where a node's own inference, given the shapes of its inputs and its
    attributes, finds it cannot run; lenient inference, which served then, let such a model be costed."""
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, inputs, outputs, inits), "bad")
    assert str(err.value) == f"bad: the model cannot run: ONNX shape inference refuses {said}"


def test_an_einsum_whose_ellipses_stand_for_different_ranks_is_refused_with_its_remedy():
    """ONNX's Einsum requires every ellipsis of its equation to stand for as many dimensions (ONNX Runtime refuses
    others), where torch.einsum broadcasts ``...ij,...jk->...ik`` on [2, 3, 4, 5] and [3, 5, 6], and both torch
    exporters write such a node as it is: the refusal says what ONNX requires and how to import the model. With the
    second operand [1, 3, 5, 6], the same product is imported: 2·2·3·4·6·5 = 1440 FLOPs."""
    einsum = helper.make_node("Einsum", ["a", "b"], ["y"], name="/Einsum", equation="...ij,...jk->...ik")
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model([einsum], [("a", [2, 3, 4, 5]), ("b", [3, 5, 6])], [("y", None)]), "bad")
    assert str(err.value) == (
        "bad: the model cannot run: ONNX shape inference refuses node '/Einsum' (Einsum): ellipsis for input 1 "
        "represents 1 dimensions, but ellipsis for input 0 represents 2 dimensions. ONNX requires every ellipsis of "
        "an Einsum's equation to stand for as many dimensions (torch.einsum broadcasts ellipses of different ranks, "
        "and torch's exporters write them unchanged): give the operands equal ranks before the einsum (unsqueeze), "
        "or import the PyTorch model through placement.io.torch_export.import_torch")
    graph = graph_from_onnx(model([einsum], [("a", [2, 3, 4, 5]), ("b", [1, 3, 5, 6])], [("y", None)]), "good")
    assert [(op.name, op.flops, op.outputs) for op in graph.ops] == [("/Einsum", 1440.0, (576.0,))]


def test_lenient_inference_serves_for_a_branch_that_never_runs():
    """A node in the branch of an If that never runs (its condition a constant false) fails strict inference
    without making the model one that cannot run: the branch taken, a Relu of [4, 8] (32 FLOPs), is imported."""
    never = helper.make_graph([helper.make_node("Transpose", ["x"], ["a"], name="bad", perm=[0, 0])], "then", [],
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, None)])
    taken = helper.make_graph([helper.make_node("Relu", ["x"], ["b"], name="ok")], "else", [],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    cond = helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.array(False)))
    branch = helper.make_node("If", ["c"], ["y"], name="if", then_branch=never, else_branch=taken)
    graph = graph_from_onnx(model([cond, branch], [("x", [4, 8])], [("y", None)]), "branch")
    assert [(op.target, op.flops) for op in graph.ops] == [("Relu", 32.0)]


def test_a_gemm_bias_that_does_not_broadcast_to_its_output_is_an_error():
    """Gemm of x [4, 8] and W [8, 16] writes [4, 16]; a bias of 5 elements cannot be added to it (inference does
    not look at the bias), while [16], [1, 16], [4, 1], [4, 16] and one element can: 2 · 4 · 8 · 16 = 1,024
    FLOPs (the product's)."""
    def gemm(bias_shape):
        return model([helper.make_node("Gemm", ["x", "W", "C"], ["y"], name="g0")], [("x", [4, 8])], [("y", None)],
                     [weight("W", (8, 16)), weight("C", bias_shape)])

    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(gemm((5,)), "bias")
    assert str(err.value) == ("bias: the model cannot run: node 'g0' (Gemm): its bias 'C' of shape [5] does not "
                              "broadcast to the shape [4, 16] (M × N) of its output 'y'; give a bias of shape [16], "
                              "[1, 16], [4, 1] or [4, 16]")
    for shape in ((16,), (1, 16), (4, 1), (4, 16), (), (1,)):
        assert [op.flops for op in graph_from_onnx(gemm(shape), "bias").ops] == [1024.0]


def test_an_opset_that_onnx_does_not_define_is_an_error(tmp_path, capsys):
    """Opset 99 of the default domain: onnx read each operator at the newest opset it knows and the model was
    costed; on the command line the error is one line."""
    newest = onnx.defs.onnx_opset_version()
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [4, 8])], [("y", None)], opset=99)
    said = (f"the model imports opset 99 of the default ONNX domain, which onnx {onnx.__version__} does not define "
            f"(it defines opsets 1 to {newest}), so its operators cannot be read at it; export the model at an "
            f"opset from 1 to {newest}, or install an onnx that defines opset 99")
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "future")
    assert str(err.value) == f"future: {said}"
    path = tmp_path / "future.onnx"
    onnx.save(m, str(path))
    assert main(["import", str(path), "--out", str(tmp_path / "o.json")]) == 2
    assert capsys.readouterr().err == f"error: future: {said}\n"


def test_an_opset_below_the_first_is_refused_without_a_newer_onnx_to_install():
    """Opset 0 of the default domain: no onnx defines it, so the refusal offers no onnx to install."""
    newest = onnx.defs.onnx_opset_version()
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", [4, 8])], [("y", None)], opset=0)
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(m, "past")
    assert str(err.value) == (f"past: the model imports opset 0 of the default ONNX domain, which onnx "
                              f"{onnx.__version__} does not define (it defines opsets 1 to {newest}), so its operators "
                              f"cannot be read at it; export the model at an opset from 1 to {newest}")


def test_a_refused_node_whose_name_holds_a_parenthesis_and_colon_is_named_whole():
    """onnx writes a node as ``(op_type:Transpose, node name: NAME): reason``; a NAME holding ``): `` is the
    graph's own, not cut at its first ``): `` (which named a node 'a, b' and gave 'c): [TypeInferenceError]' as
    the reason)."""
    nodes = [helper.make_node("Transpose", ["x"], ["y"], name="a, b): c", perm=[0, 0])]
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model(nodes, [("x", [4, 4])], [("y", [4, 4])]), "bad")
    assert str(err.value) == ("bad: the model cannot run: ONNX shape inference refuses node 'a, b): c' (Transpose): "
                              "attribute perm for Transpose has repeated value: 0")


def test_an_input_declaring_an_undefined_element_type_is_named_not_blamed_on_its_reader():
    """An input of element type 0 (UNDEFINED) leaves the Relu reading it without one: information missing, which
    strict inference reports of the Relu ('element type of input 0 unknown'); the error names the input."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.UNDEFINED, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "untyped")
    assert str(err.value) == ("untyped: tensor 'x' has element type 0, which is no ONNX element type this onnx "
                              "version knows")
