"""The ONNX importer: shape inference, FLOPs and bytes by hand, module paths, unknown operators.

Expected values are derived in the comments from the table of placement.io.onnx_import
(fp32: 4 bytes per element, int64: 8).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import numpy as np  # noqa: E402

from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.errors import InvalidInstanceError, InvalidParameterError  # noqa: E402
from placement.io.onnx_import import graph_from_onnx, import_onnx  # noqa: E402
from placement.io.op_grouping import group_ops  # noqa: E402
from placement.io.opgraph import CostModelWarning, build  # noqa: E402


def mlp_model(batch="2", extra_nodes=(), extra_info=()):
    """X[batch,4] -> MatMul W1[4,8] -> Add B1 -> Relu -> Reshape [2,8] -> Gemm(W2[3,8]ᵀ, B2[3]) -> Y[batch,3]."""
    rng = np.random.default_rng(0)
    dim = int(batch) if batch.isdigit() else batch
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("W1", (4, 8)), ("B1", (8,)), ("W2", (3, 8)), ("B2", (3,)))]
    nodes = [
        helper.make_node("MatMul", ["X", "W1"], ["H"], name="/enc/mm/MatMul"),
        helper.make_node("Add", ["H", "B1"], ["H2"], name="/enc/mm/Add"),
        helper.make_node("Relu", ["H2"], ["R"], name="/enc/act/Relu"),
        helper.make_node("Constant", [], ["shape"], name="/enc/Constant",
                         value=numpy_helper.from_array(np.array([2, 8], dtype=np.int64))),
        helper.make_node("Reshape", ["R", "shape"], ["R2"], name="/enc/Reshape"),
        helper.make_node("Gemm", ["R2", "W2", "B2"], ["Y"], name="/head/Gemm", transB=1),
        *extra_nodes,
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [dim, 4])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], inits,
                              value_info=list(extra_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


def test_operators_flops_bytes_and_parameters_by_hand():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_onnx(mlp_model(), "mlp")
    # MatMul 2x4 @ 4x8 with the Add of the parameter B1 as its epilogue (torch's linear, one kernel):
    # 2*2*8*4 = 128 FLOPs (bias not counted); reads X 32 B + W1 128 B + B1 32 B, writes 64 B: 256 B.
    # Relu: 16; reads and writes 64.  Reshape: a view, whose int64 shape constant is a host value: no bytes.
    # Gemm 2x8 @ (3x8)ᵀ: 2*2*3*8 = 96; reads 64 + 96 + 12, writes 24.
    assert [(op.name, op.target, op.kind, op.flops, op.bytes_moved, op.outputs) for op in graph.ops] == [
        ("/enc/mm/MatMul", "MatMul+Add", "matmul", 128.0, 256.0, (64.0,)),
        ("/enc/act/Relu", "Relu", "pointwise", 16.0, 128.0, (64.0,)),
        ("/enc/Reshape", "Reshape", "view", 0.0, 0.0, (64.0,)),
        ("/head/Gemm", "Gemm", "matmul", 96.0, 196.0, (24.0,)),
    ]
    assert graph.total_flops == 240.0
    assert [op.inputs for op in graph.ops] == [(), ((0, 0),), ((1, 0),), ((2, 0),)]
    # initializers are trained parameters; the Constant's value, the Reshape's sizes, is no memory of the view
    assert [[(p.name, p.nbytes, p.trainable) for p in op.params] for op in graph.ops] == [
        [("W1", 128.0, True), ("B1", 32.0, True)], [], [],
        [("W2", 96.0, True), ("B2", 12.0, True)]]
    # module paths from /a/b/Op names
    assert [op.module_path for op in graph.ops] == [("enc", "enc.mm"), ("enc", "enc.act"), ("enc",), ("head",)]
    modules = group_ops(graph, "module")
    assert [(n.name, len(n.ops)) for n in modules.nodes] == [("enc.mm", 1), ("enc.act", 1), ("enc", 1), ("head", 1)]
    assert [(n.name, len(n.ops)) for n in group_ops(graph, "module", 1).nodes] == [("enc", 3), ("head", 1)]


def test_module_granularity_of_a_model_without_modules_is_warned(tmp_path, capsys):
    """A graph whose nodes carry neither scope metadata nor /a/b/Op names (hand-made, or from another
    framework's converter) is one module run: granularity='module', the default of the command line, makes
    one node of its operators, which no plan splits; the import says so and names the granularity to use."""
    from placement.io.onnx_import import ModuleScopeWarning

    path = tmp_path / "bare.onnx"
    model = mlp_model()
    for node in model.graph.node:
        node.name = ""
    onnx.save(model, str(path))
    platform = make_platform("h100", "epyc-7763", 2, 0)
    with pytest.warns(ModuleScopeWarning, match="makes one node of all 4 operators.*use granularity='operator'"):
        imported = import_onnx(path, platform=platform, granularity="module")
    assert len(imported.problem.nodes) == 1
    from placement.cli import main
    assert main(["import", str(path), "--out", str(tmp_path / "bare.json")]) == 0   # the option is named
    assert "makes one node of all 4 operators, which no plan can split: use --granularity operator\n" in \
        capsys.readouterr().err
    model.producer_name = "pytorch"   # torch.onnx.export (dynamo) at opset 17 drops its scope metadata
    onnx.save(model, str(path))
    with pytest.warns(ModuleScopeWarning) as caught:
        import_onnx(path, platform=platform, granularity="module")
    assert ("node names of the form /a/b/Op; PyTorch wrote this file: torch.onnx.export records the modules at "
            "opset 18 or later, or with dynamo=False, and its conversion to an earlier opset drops them), so "
            in str(caught[0].message))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(import_onnx(path, platform=platform, granularity="operator").problem.nodes) == 4
        onnx.save(mlp_model(), str(path))
        assert len(import_onnx(path, platform=platform, granularity="module").problem.nodes) == 4


def test_a_model_whose_operators_all_run_outside_its_submodules_is_told_so(tmp_path):
    """torch.onnx.export at opset 20 records every node's scopes; where each is the model itself (a forward of
    functional calls, a torch.cond whose branches hold the layers), the warning said the file recorded no scope
    and that torch records them at opset 18 or later, which it did."""
    from placement.io.onnx_import import ModuleScopeWarning

    model = mlp_model()
    for k, node in enumerate(model.graph.node):
        node.name = f"node_{k}"
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=f"['', 'op_{k}']")
    model.producer_name = "pytorch"
    onnx.save(model, str(path := tmp_path / "functional.onnx"))
    with pytest.warns(ModuleScopeWarning) as caught:
        import_onnx(path, platform=make_platform(), granularity="module")
    assert str(caught[0].message) == (
        "functional: every operator of the model runs in the model itself, outside its submodules (the module "
        "scopes the file records say so), so granularity='module' makes one node of all 4 operators, which no "
        "plan can split: use granularity='operator'")


def test_symbolic_dimensions_must_be_fixed(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model(batch="batch"), str(path))
    platform = make_platform("h100", "epyc-7763", 2, 0)
    with pytest.raises(InvalidInstanceError) as err:
        import_onnx(path, platform=platform)
    assert str(err.value) == ("mlp: cannot cost node '/enc/mm/MatMul' (MatMul): the shape of its input 'X' is not "
                              "static after shape inference (fix the symbolic input dimension 'batch' with dims)")
    from placement.cli import main
    assert main(["import", str(path), "--out", str(tmp_path / "mlp.json")]) == 2   # the command line's option
    assert capsys.readouterr().err.endswith("(fix the symbolic input dimension 'batch' with --dim batch=VALUE)\n")
    imported = import_onnx(path, platform=platform, dims={"batch": 2}, training=True)
    assert imported.graph.graph.total_flops == 240.0
    assert len(imported.problem.nodes) == 8 and imported.problem.is_training  # 4 operators, forward and backward
    assert imported.instance["about"]["generator"] == "placement.io.onnx_import"
    unnamed = mlp_model()
    unnamed.graph.input[0].type.tensor_type.shape.dim[0].Clear()   # neither a value nor a name: 'X[0]'
    onnx.save(unnamed, str(path := tmp_path / "unnamed.onnx"))
    assert main(["import", str(path), "--out", str(tmp_path / "mlp.json")]) == 2   # quoted for the shell
    assert capsys.readouterr().err.endswith("(fix the symbolic input dimension 'X[0]' with --dim 'X[0]=VALUE')\n")
    assert main(["import", str(path), "--out", str(tmp_path / "mlp.json"), "--dim", "X[0]=2", "--quiet"]) == 0


@pytest.mark.parametrize("dims, message", [
    ({"nosuch": 4}, "dims names 'nosuch', which is not a symbolic input dimension of the model (it has: batch)"),
    ({"batch": 2 ** 63}, "dims must give each dimension a positive integer up to 2^40, got batch=9223372036854775808"),
    ({"batch": 0}, "dims must give each dimension a positive integer up to 2^40, got batch=0"),
    ({"batch": 2.0}, "dims must give each dimension a positive integer up to 2^40, got batch=2.0"),
])
def test_bad_dimensions_are_named(dims, message):
    with pytest.raises(InvalidParameterError) as err:
        graph_from_onnx(mlp_model(batch="batch"), "mlp", dims=dims)
    assert str(err.value) == message


def test_dimensions_not_given_as_a_mapping_are_named():
    # a list of pairs failed with AttributeError: 'list' object has no attribute 'items'
    with pytest.raises(InvalidParameterError) as err:
        graph_from_onnx(mlp_model(batch="batch"), "mlp", dims=[("batch", 2)])
    assert str(err.value) == ("dims must be a mapping of symbolic input dimension names to sizes, or None, not "
                              "[('batch', 2)]")


@pytest.mark.parametrize("options, message", [
    # a training flag of another type was read by its truth: "no" imported a training graph, its about.training "no"
    ({"training": "no"}, "training must be True or False, not 'no'"),
    ({"operators": 1.5}, "operators must be True or False, not 1.5"),
    # these failed deep inside with AttributeError and TypeError
    ({"platform": None}, "platform must be a Platform (placement.costmodel.roofline.make_platform), not NoneType"),
    ({"path": None}, "path must be the path of an ONNX file (a str or os.PathLike), not NoneType"),
    ({"path": b"m.onnx"}, "path must be the path of an ONNX file (a str or os.PathLike), not bytes"),
])
def test_bad_import_options_are_named(tmp_path, options, message):
    onnx.save(mlp_model(), str(tmp_path / "m.onnx"))
    given = {"path": tmp_path / "m.onnx", "platform": make_platform(), **options}
    with pytest.raises(InvalidParameterError) as err:
        import_onnx(given.pop("path"), **given)
    assert str(err.value) == message


def test_an_unnamed_unknown_dimension_is_fixed_by_its_input_and_position():
    relu = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    model = _graph([relu], [("X", [None, 4])], ["Y"])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "g")
    assert str(err.value).endswith("(fix the symbolic input dimension 'X[0]' with dims)")
    (op,) = graph_from_onnx(model, "g", dims={"X[0]": 3}).ops
    assert op.bytes_moved == 2 * 3 * 4 * 4.0     # reads and writes 3·4 floats of 4 bytes


def test_an_input_that_declares_no_shape_is_named():
    relu = helper.make_node("Relu", ["X"], ["Y"], name="relu")
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_graph([relu], [("X", None)], ["Y"]), "g")
    assert str(err.value) == ("g: cannot cost node 'relu' (Relu): the shape of its input 'X' is not static after "
                              "shape inference (the model's input 'X' declares no shape; export the model with its "
                              "input shapes)")


@pytest.mark.parametrize("domain", ["", "com.microsoft"])
def test_an_operator_onnx_does_not_know_is_named_as_why_its_output_has_no_shape(domain):
    """onnx infers no shape for an operator it has no schema for (a contrib operator of an optimised file,
    a custom one): the error says so, not that the graph computes values the importer could not evaluate."""
    model = _graph([helper.make_node("FusedMatMul", ["X", "X"], ["Y"], name="fused", domain=domain)],
                   [("X", [4, 4])], ["Y"])
    if domain:
        model.opset_import.extend([helper.make_opsetid(domain, 1)])
    label = f"{domain}::FusedMatMul" if domain else "FusedMatMul"
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "g")
    assert str(err.value) == ("g: cannot cost node 'fused' (FusedMatMul): the shape of its output 'Y' is not static "
                              f"after shape inference (onnx knows no operator {label}, so it infers no shape for "
                              "its outputs; declare them in the model's value_info)")


def test_a_node_with_more_inputs_than_its_operator_takes_is_refused():
    # a Relu given two inputs was imported and costed as it stood (onnx.checker refuses it)
    two = helper.make_node("Relu", ["X", "X"], ["Y"], name="relu2")
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_graph([two], [("X", [2, 4])], ["Y"]), "g")
    assert str(err.value) == "g: node 'relu2' (Relu) has 2 inputs; Relu takes 1 at opset 17"
    # what the checker also refuses but exporters write is read as before: LayerNormalization in the
    # default domain at opset 12 (ONNX Runtime's optimizer), costed as a normalisation
    norm = helper.make_node("LayerNormalization", ["X", "S"], ["Y"], name="ln", axis=-1)
    model = _graph([norm], [("X", [2, 4])], ["Y"], [numpy_helper.from_array(np.ones(4, np.float32), "S")])
    model.opset_import[0].version = 12
    model.graph.value_info.append(helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4]))
    (op,) = graph_from_onnx(model, "g").ops
    assert op.kind == "norm"


@pytest.mark.parametrize("node, opset, message", [
    # costed by name as opset 23's Attention, which reads a query, keys and values: a ValueError unpacking one
    (helper.make_node("Attention", ["X"], ["Y"], name="attn"), 18,
     "g: node 'attn' (Attention) has 1 input; Attention takes 3 to 6 at opset 23, the first that defines it (the "
     "model imports opset 18)"),
    # costed as a normalisation of its first input: an IndexError
    (helper.make_node("LayerNormalization", [], ["Y"], name="ln"), 12,
     "g: node 'ln' (LayerNormalization) has 0 inputs; LayerNormalization takes 2 to 3 at opset 17, the first that "
     "defines it (the model imports opset 12)"),
])
def test_a_node_of_an_operator_of_a_later_opset_with_more_or_fewer_inputs_than_it_takes_is_refused(node, opset,
                                                                                                    message):
    model = _graph([node], [("X", [2, 4])], ["Y"])
    model.opset_import[0].version = opset
    model.graph.value_info.append(helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4]))
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "g")
    assert str(err.value) == message


def _loop_model(body_shape):
    """X[4,8] -> Loop (3 times: acc = Relu(acc @ WL), WL [8,8]) -> MatMul W[8,16]; the body declares its
    carried input and output with ``body_shape``."""
    rng = np.random.default_rng(0)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["acc_in", "WL"], ["acc_mm"], name="body_mm"),
         helper.make_node("Relu", ["acc_mm"], ["acc_out"], name="body_relu"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, body_shape)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, body_shape)])
    inits = [numpy_helper.from_array(np.array(3, dtype=np.int64), "trip"),
             numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "WL"),
             numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W")]
    nodes = [helper.make_node("Loop", ["trip", "cond", "X"], ["LX"], name="loop", body=body),
             helper.make_node("MatMul", ["LX", "W"], ["Y"], name="mm")]
    return _graph(nodes, [("X", [4, 8])], ["Y"], inits)


def test_a_value_a_loop_carries_keeps_its_shape_where_the_body_declares_it():
    # shape inference leaves the Loop's output without a shape, and the MatMul reading it could not be costed;
    # the body's acc_out is [4, 8], the shape of X, so LX is [4, 8] after any number of iterations
    with pytest.warns(CostModelWarning):      # the Loop itself has no FLOP formula
        graph = graph_from_onnx(_loop_model([4, 8]), "g")
    (mm,) = [op for op in graph.ops if op.kind == "matmul"]
    assert mm.flops == 2 * 4 * 8 * 16
    with pytest.raises(InvalidInstanceError, match="the shape of its output 'LX' is not static"):
        graph_from_onnx(_loop_model(None), "g")   # a body of unknown shapes: the iterations may change it


def _input_shaped_model(op_type, opset, declared=None):
    """X[2,4,3,3] -> op_type (GroupNormalization of 2 groups, its scale and bias as opset reads them) -> Relu -> Y;
    its output H declared of shape ``declared`` (None: not declared, as a hand-made file leaves it)."""
    channels = 2 if opset == 18 else 4
    inits = [numpy_helper.from_array(np.ones(channels, dtype=np.float32), "S"),
             numpy_helper.from_array(np.zeros(channels, dtype=np.float32), "B")]
    norm = (helper.make_node(op_type, ["X", "S", "B"], ["H"], name="/norm/Op", num_groups=2)
            if op_type == "GroupNormalization" else helper.make_node(op_type, ["X"], ["H"], name="/norm/Op"))
    model = _graph([norm, helper.make_node("Relu", ["H"], ["Y"], name="/act/Relu")], [("X", [2, 4, 3, 3])], ["Y"],
                   inits if op_type == "GroupNormalization" else ())
    if declared is not None:
        model.graph.value_info.append(helper.make_tensor_value_info("H", TensorProto.FLOAT, declared))
    model.opset_import[0].version = opset
    return model


@pytest.mark.parametrize("op_type, opset, param_bytes", [
    ("GroupNormalization", 18, 16), ("GroupNormalization", 21, 32), ("MeanVarianceNormalization", 13, 0)])
def test_a_normalisation_onnx_infers_no_shape_of_has_its_inputs_shape(op_type, opset, param_bytes):
    # onnx defines these operators without a shape inference, so H had no shape and neither node could be
    # costed; H is X's shape [2, 4, 3, 3], 72 elements: the norm 5 * 72 FLOPs, reading X (288 B) and its scale and
    # bias, writing H (288 B); the Relu 72 FLOPs, reading and writing 288 B
    graph = graph_from_onnx(_input_shaped_model(op_type, opset), "g")
    assert [(op.target, op.flops, op.bytes_moved) for op in graph.ops] == [
        (op_type, 360.0, 576.0 + param_bytes), ("Relu", 72.0, 576.0)]


def test_a_normalisation_whose_output_is_declared_of_another_shape_is_refused():
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_input_shaped_model("GroupNormalization", 21, declared=[2, 4, 3, 4]), "g")
    assert str(err.value) == ("g: node '/norm/Op' (GroupNormalization) writes 'H' of shape [2, 4, 3, 3], the shape of "
                              "its input 'X'; the model declares [2, 4, 3, 4]")


def test_the_shapeless_input_is_blamed_only_where_it_is_read():
    # A declares no shape, B has a symbolic batch; the MatMul reads B: the hint is to fix batch (it named A)
    mm = helper.make_node("MatMul", ["B", "W"], ["Y"], name="mm")
    relu = helper.make_node("Relu", ["A"], ["Z"], name="relu")
    model = _graph([mm, relu], [("A", None), ("B", ["batch", 8])], ["Y", "Z"],
                   [numpy_helper.from_array(np.ones((8, 2), np.float32), "W")])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "g")
    assert str(err.value).endswith("(fix the symbolic input dimension 'batch' with dims)")
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "g", dims={"batch": 2})
    assert str(err.value).endswith("the shape of its input 'A' is not static after shape inference (the model's "
                                   "input 'A' declares no shape; export the model with its input shapes)")


def test_integer_tables_and_declared_weights_stay_in_shape_inference():
    """A shape gathered from an int64 table of 2,048 entries, and a weight its value info declares with
    another shape: inference must see the table's values (the Reshape's shape follows from them) and the
    weight's data (the contradiction is refused); both were lost when every large initializer became an
    input."""
    table = numpy_helper.from_array(np.arange(2048, dtype=np.int64), "tab")
    where = numpy_helper.from_array(np.array([2, 4], dtype=np.int64), "idx")
    nodes = [helper.make_node("Gather", ["tab", "idx"], ["shape"], name="g"),
             helper.make_node("Reshape", ["X", "shape"], ["R"], name="r"),
             helper.make_node("Relu", ["R"], ["Y"], name="relu")]
    graph = graph_from_onnx(_graph(nodes, [("X", [8])], ["Y"], [table, where]), "g")
    assert [op.flops for op in graph.ops if op.kind == "pointwise"] == [8.0]   # Relu over the [2, 4] of Reshape
    weight = numpy_helper.from_array(np.ones((8, 2048), np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], [("X", [4, 8])], ["Y"], [weight])
    model.graph.value_info.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [8, 1000]))
    with pytest.raises(InvalidInstanceError, match="a shape or element type the model declares contradicts"):
        graph_from_onnx(model, "g")


def test_renamed_operators_keep_distinct_names():
    # a, a_2, a, a_2 at positions 0..3: a repeated name takes its position (a_2, which the second has, so
    # a_3), and the fourth a_2 becomes a_2_3; before, the third was renamed a_2, a name already taken
    nodes = [helper.make_node("Relu", [x], [y], name=name)
             for x, y, name in (("X", "A", "a"), ("A", "B", "a_2"), ("B", "C", "a"), ("C", "Y", "a_2"))]
    graph = graph_from_onnx(_graph(nodes, [("X", [2, 4])], ["Y"]), "g")
    assert [op.name for op in graph.ops] == ["a", "a_2", "a_3", "a_2_3"]


def test_large_weights_are_left_out_of_shape_inference():
    from placement.io.onnx_shapes import SMALL, shapes_only

    rng = np.random.default_rng(0)
    big = numpy_helper.from_array(rng.standard_normal((SMALL + 1, 2)).astype(np.float32), "W")
    small = numpy_helper.from_array(np.array([2, SMALL + 1], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["W", "shape"], ["R"], name="reshape"),
             helper.make_node("MatMul", ["X", "R"], ["Y"], name="mm")]
    model = _graph(nodes, [("X", [3, 2])], ["Y"], [big, small])
    light = shapes_only(model, onnx)
    assert [init.name for init in light.graph.initializer] == ["shape"]
    assert [(v.name, [d.dim_value for d in v.type.tensor_type.shape.dim]) for v in light.graph.input] == [
        ("X", [3, 2]), ("W", [SMALL + 1, 2])]
    assert len(model.graph.initializer) == 2                    # the model itself is unchanged
    (mm,) = [op for op in graph_from_onnx(model, "g").ops if op.kind == "matmul"]
    assert mm.flops == 2 * 3 * 2 * (SMALL + 1)                  # [3, 2] @ [2, SMALL + 1]


def test_unknown_operators_are_costed_by_bytes_and_warned():
    mystery = helper.make_node("Mystery", ["Y"], ["Z"], name="/head/Mystery", domain="com.example")
    info = helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3])
    with pytest.warns(CostModelWarning) as record:
        graph = graph_from_onnx(mlp_model(extra_nodes=[mystery], extra_info=[info]), "mlp")
    assert str(record[0].message) == ("mlp: no FLOP formula for 1 operator type(s), costed by bytes moved only: "
                                      "com.example::Mystery")
    op = graph.ops[-1]
    # reads Y (24 B), writes Z (24 B)
    assert (op.kind, op.flops, op.bytes_moved, op.inputs) == ("unknown", 0.0, 48.0, ((3, 0),))


def test_a_file_that_is_not_onnx(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\xff\xfe not a protobuf")
    with pytest.raises(InvalidInstanceError, match=r"^.*bad.onnx: not an ONNX model \("):
        import_onnx(path, platform=make_platform())
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(InvalidInstanceError, match=r"^.*empty.onnx: an empty file, not an ONNX model$"):
        import_onnx(empty, platform=make_platform())
    parses = tmp_path / "text.onnx"
    parses.write_bytes(b"\x0a\x05hello")   # bytes that protobuf reads as a model with no graph
    with pytest.raises(InvalidInstanceError, match=r"^.*text.onnx: not an ONNX model \(it holds no graph\)$"):
        import_onnx(parses, platform=make_platform())


def test_weights_stored_outside_the_file_are_not_read(tmp_path):
    """A model whose weights live in a side file (as ONNX requires beyond 2 GiB), copied without that
    file: only shapes are needed, so it imports as the model with its weights inline does."""
    from onnx.external_data_helper import convert_model_to_external_data

    platform = make_platform()
    onnx.save_model(mlp_model(), str(tmp_path / "inline.onnx"))
    model = mlp_model()
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="mlp.onnx.data", size_threshold=0)
    onnx.save_model(model, str(tmp_path / "mlp.onnx"))
    (tmp_path / "mlp.onnx.data").unlink()
    inline = import_onnx(tmp_path / "inline.onnx", platform=platform).instance
    outside = import_onnx(tmp_path / "mlp.onnx", platform=platform).instance
    assert outside["nodes"] == inline["nodes"] and outside["edges"] == inline["edges"]


def test_a_shape_stored_outside_the_file_is_read_and_its_file_must_exist(tmp_path):
    """An integer initializer may be a shape the graph reshapes with: its external data is read (the
    Reshape's output is [2, 8], 64 B), and a missing file is an error naming the tensor."""
    from onnx.external_data_helper import convert_model_to_external_data

    shape = numpy_helper.from_array(np.array([2, 8], dtype=np.int64), "shape")
    model = _graph([helper.make_node("Reshape", ["X", "shape"], ["Y"], name="/reshape"),
                    helper.make_node("Relu", ["Y"], ["Z"], name="/relu")], [("X", [4, 4])], ["Z"], [shape])
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="shape.bin", size_threshold=0)
    onnx.save_model(model, str(tmp_path / "m.onnx"))
    graph = import_onnx(tmp_path / "m.onnx", platform=make_platform()).graph.graph
    assert [(op.name, op.outputs) for op in graph.ops] == [("/reshape", (64.0,)), ("/relu", (64.0,))]
    (tmp_path / "shape.bin").unlink()
    with pytest.raises(InvalidInstanceError, match=r"^.*m\.onnx: cannot read the data of tensor 'shape', stored "
                                                   r"outside the model \(.*shape\.bin"):
        import_onnx(tmp_path / "m.onnx", platform=make_platform())


def test_a_constant_stored_outside_the_file_whose_file_is_missing_is_named_by_its_node(tmp_path):
    """A Constant node's value stored outside the file (``convert_attribute=True``) is a tensor without a name:
    the error named "tensor ''"; it names the Constant node."""
    from onnx.external_data_helper import convert_model_to_external_data

    shape = numpy_helper.from_array(np.array([2, 8], dtype=np.int64))
    model = _graph([helper.make_node("Constant", [], ["shape"], name="/shape", value=shape),
                    helper.make_node("Reshape", ["X", "shape"], ["Y"], name="/reshape")], [("X", [4, 4])], ["Y"])
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="shape.bin", size_threshold=0,
                                   convert_attribute=True)
    onnx.save_model(model, str(tmp_path / "m.onnx"))
    (tmp_path / "shape.bin").unlink()
    with pytest.raises(InvalidInstanceError, match=r"^.*m\.onnx: cannot read the value of Constant node '/shape', "
                                                   r"stored outside the model \(.*shape\.bin"):
        import_onnx(tmp_path / "m.onnx", platform=make_platform())


def test_onnx_and_torch_importers_agree_on_an_exported_model(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript")
    from torch import nn

    from placement.io.torch_export import import_module
    from tests.test_torch_import import Block

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Block(8), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    path = tmp_path / "block.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), verbose=False)
    from_onnx = graph_from_onnx(onnx.load(str(path)), "block")
    from_torch = import_module(model, (x,))
    # the same operators with the same FLOPs, bytes, outputs and module paths, by two independent readers
    assert [(op.kind, op.flops, op.bytes_moved, op.outputs, op.module_path) for op in from_onnx.ops] == \
           [(op.kind, op.flops, op.bytes_moved, op.outputs, op.module_path) for op in from_torch.ops]
    assert [n.name for n in group_ops(from_onnx, "module").nodes] == \
           [n.name for n in group_ops(from_torch, "module").nodes]


def _graph(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_view_of_the_whole_of_a_parameter_is_that_parameter_not_an_operator():
    """An unoptimised export multiplies by the transpose of a linear layer's weight ``W`` [5, 4], a ``Transpose``
    node that PyTorch never runs (linear reads W itself), and casts the weight ``U`` [5, 5] to its own type
    before the next MatMul. Each was an operator of its own holding the weight, a node of no time at operator
    granularity whose edge carried all of W (and whose backward node held W's gradient); now each MatMul reads
    its weight, as the torch importer has it. A ``Slice`` of a weight (a part of it) stays an operator."""
    weights = [numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4) / 10, "W"),
               numpy_helper.from_array(np.arange(25, dtype=np.float32).reshape(5, 5) / 10, "U"),
               numpy_helper.from_array(np.array([0, 0], dtype=np.int64), "starts"),
               numpy_helper.from_array(np.array([5, 3], dtype=np.int64), "ends")]
    model = _graph([helper.make_node("Transpose", ["W"], ["Wt"], name="/a/Transpose", perm=[1, 0]),
                    helper.make_node("MatMul", ["X", "Wt"], ["H"], name="/a/MatMul"),
                    helper.make_node("CastLike", ["U", "H"], ["Uc"], name="/b/CastLike"),
                    helper.make_node("MatMul", ["H", "Uc"], ["G"], name="/b/MatMul"),
                    helper.make_node("Slice", ["U", "starts", "ends"], ["Us"], name="/c/Slice"),
                    helper.make_node("MatMul", ["G", "Us"], ["Y"], name="/c/MatMul")],
                   [("X", [2, 4])], ["Y"], weights)
    graph = graph_from_onnx(model, "views")
    # X [2, 4] · W^T [4, 5]: 2·2·4·5 = 80 FLOPs; H [2, 5] · U [5, 5]: 100; G [2, 5] · U[:, :3] [5, 3]: 60
    assert [(op.name, op.kind, op.flops, [(p.name, p.nbytes, p.trainable) for p in op.params])
            for op in graph.ops] == [
        ("/a/MatMul", "matmul", 80.0, [("W", 80.0, True)]),
        ("/b/MatMul", "matmul", 100.0, [("U", 100.0, True)]),
        ("/c/Slice", "view", 0.0, [("U", 100.0, True)]),   # its starts and ends: host values
        ("/c/MatMul", "matmul", 60.0, [])]


def test_an_identity_of_an_operators_result_is_that_result():
    """An unoptimised export writes a dropout in evaluation as an Identity in the dropout's scope; PyTorch runs
    nothing there (the torch importer has no node for it), but it was a node of its own (d, of no time)
    between a and b. An Identity that the graph returns stays (the second of two outputs of one value)."""
    weights = [numpy_helper.from_array(np.ones((4, 4), dtype=np.float32) / (k + 2), name) for k, name in
               enumerate(("A", "B"))]
    model = _graph([helper.make_node("MatMul", ["X", "A"], ["H"], name="/a/MatMul"),
                    helper.make_node("Identity", ["H"], ["D"], name="/d/Identity"),
                    helper.make_node("MatMul", ["D", "B"], ["Y"], name="/b/MatMul"),
                    helper.make_node("Identity", ["Y"], ["Z"], name="/Identity")],
                   [("X", [2, 4])], ["Y", "Z"], weights)
    graph = graph_from_onnx(model, "dropout")
    assert [(op.name, op.kind) for op in graph.ops] == [("/a/MatMul", "matmul"), ("/b/MatMul", "matmul"),
                                                        ("/Identity", "view")]
    assert [node.name for node in group_ops(graph, "module").nodes] == ["a", "b", "(model)"]


def test_attention_pattern_is_one_fused_operator():
    scale = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "S")
    model = _graph([helper.make_node("Mul", ["Q", "S"], ["q"], name="/attn/Mul"),
                    helper.make_node("MatMul", ["q", "K"], ["s"], name="/attn/MatMul"),
                    helper.make_node("Softmax", ["s"], ["p"], name="/attn/Softmax", axis=-1),
                    helper.make_node("MatMul", ["p", "V"], ["O"], name="/attn/MatMul_1")],
                   [("Q", [1, 2, 4, 8]), ("K", [1, 2, 8, 4]), ("V", [1, 2, 4, 8])], ["O"], [scale])
    graph = graph_from_onnx(model, "attn")
    # torch's rule for q [1,2,4,8], k with S = 4 keys, v [1,2,4,8]: 2 * (64 / 8) * 4 * (8 + 8) = 1,024 FLOPs
    # (the two MatMuls: 2*32*8 + 2*64*4). Bytes: Q, K, V 256 B each, output 256 B (the scale is a number); the
    # 4x4 score matrices are never written.
    assert [(op.name, op.target, op.kind, op.flops, op.bytes_moved, op.kernels) for op in graph.ops] == [
        ("/attn/MatMul_1", "Mul+MatMul+Softmax+MatMul", "attention", 1024.0, 1024.0, 1)]
    assert graph.ops[0].module_path == ("attn",)


@pytest.mark.parametrize("mask, held", [
    # is_causal=True folded by the dynamo exporter's optimiser: 0 on and below the diagonal, the float minimum above
    (np.where(np.tril(np.ones((4, 4), bool)), 0, np.finfo(np.float32).min).astype(np.float32), False),
    (np.where(np.tril(np.ones((4, 4), bool)), 0, -np.inf).astype(np.float32)[None, None], False),
    # a bias the model holds (a relative position bias), and a mask that hides the diagonal too: the model's own
    (np.arange(16, dtype=np.float32).reshape(4, 4), True),
    (np.where(np.tril(np.ones((4, 4), bool), -1), 0, -np.inf).astype(np.float32), True),
])
def test_a_causal_mask_folded_into_an_initializer_is_made_by_the_attention_kernel(mask, held):
    """The dynamo exporter's optimiser folds the mask it writes for scaled_dot_product_attention(is_causal=True),
    at opsets without causal attention, into an initializer of the scores' [L, S] added to them. It was a trained
    parameter of the attention: read (64 B) and held, with a gradient in training, where PyTorch's kernel makes the
    mask itself, as it does for the mask an unoptimised export computes from constants."""
    scale = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "S")
    model = _graph([helper.make_node("Mul", ["Q", "S"], ["q"], name="/attn/Mul"),
                    helper.make_node("MatMul", ["q", "K"], ["s"], name="/attn/MatMul"),
                    helper.make_node("Add", ["s", "M"], ["m"], name="/attn/Add"),
                    helper.make_node("Softmax", ["m"], ["p"], name="/attn/Softmax", axis=-1),
                    helper.make_node("MatMul", ["p", "V"], ["O"], name="/attn/MatMul_1")],
                   [("Q", [1, 2, 4, 8]), ("K", [1, 2, 8, 4]), ("V", [1, 2, 4, 8])], ["O"],
                   [scale, numpy_helper.from_array(mask, "M")])
    graph = graph_from_onnx(model, "attn")
    # as the attention without a mask (1,024 FLOPs, 1,024 B), and the 64 B of the model's own [4, 4] bias
    assert [(op.target, op.kind, op.flops, op.bytes_moved, [(p.name, p.nbytes, p.trainable) for p in op.params])
            for op in graph.ops] == [("Mul+MatMul+Add+Softmax+MatMul", "attention", 1024.0, 1024.0 + 64 * held,
                                      [("M", 64.0, True)] if held else [])]


@pytest.mark.parametrize("axis, opset", [(2, 17), (1, 17), (None, 12), (2, 12)])
def test_a_softmax_along_another_axis_than_the_keys_is_no_attention(axis, opset):
    """MatMul → Softmax → MatMul whose softmax normalises along the queries' axis (2), the heads' (1), or, below
    opset 13, from its default axis 1 on (the heads, queries and keys as one row): no attention kernel runs
    that, so the three nodes are three kernels, as torch runs matmul, softmax and matmul. Q, K, V [1,2,4,4]:
    each MatMul 2 * 32 * 4 = 256 FLOPs, reading 128 + 128 B and writing 128 B; the softmax 5 * 32 FLOPs,
    reading and writing 128 B."""
    attributes = {} if axis is None else {"axis": axis}
    model = _graph([helper.make_node("MatMul", ["Q", "K"], ["s"], name="/attn/MatMul"),
                    helper.make_node("Softmax", ["s"], ["p"], name="/attn/Softmax", **attributes),
                    helper.make_node("MatMul", ["p", "V"], ["O"], name="/attn/MatMul_1")],
                   [("Q", [1, 2, 4, 4]), ("K", [1, 2, 4, 4]), ("V", [1, 2, 4, 4])], ["O"])
    model.opset_import[0].version = opset
    graph = graph_from_onnx(model, "attn")
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("MatMul", "matmul", 256.0, 384.0), ("Softmax", "softmax", 160.0, 256.0), ("MatMul", "matmul", 256.0, 384.0)]
    model.graph.node[1].ClearField("attribute")
    model.graph.node[1].attribute.append(helper.make_attribute("axis", 3))   # the keys' axis: attention
    assert [op.target for op in graph_from_onnx(model, "attn").ops] == ["MatMul+Softmax+MatMul"]


@pytest.mark.parametrize("layout", ["4d", "3d"])
def test_the_attention_operator_of_opset_23_is_costed_as_scaled_dot_product_attention(layout):
    """Opset 23's ``Attention`` (the dynamo exporter's ``scaled_dot_product_attention`` there), 4 query heads
    over 2 key-value heads, q [1, 4, 4, 8] (or [1, 4, 32] with head counts), k and v of S = 6 keys: torch's rule,
    2 * (128 / 8) * 6 * (8 + 8) = 3,072 FLOPs, and the GEMMs of its scores and weighted values."""
    if layout == "4d":
        shapes = [("Q", [1, 4, 4, 8]), ("K", [1, 2, 6, 8]), ("V", [1, 2, 6, 8])]
        node = helper.make_node("Attention", ["Q", "K", "V"], ["O"], name="/attn/Attention")
    else:
        shapes = [("Q", [1, 4, 32]), ("K", [1, 6, 16]), ("V", [1, 6, 16])]
        node = helper.make_node("Attention", ["Q", "K", "V"], ["O"], name="/attn/Attention", q_num_heads=4,
                                kv_num_heads=2)
    model = _graph([node], shapes, ["O"])
    model.opset_import[0].version = 23
    graph = graph_from_onnx(model, "attn")
    assert [(op.kind, op.flops, op.kernels) for op in graph.ops] == [("attention", 3072.0, 1)]
    assert [(s.kind, s.m, s.n, s.k, s.batch) for s in graph.ops[0].operators if s.kind == "gemm"] == [
        ("gemm", 4, 6, 8, 4), ("gemm", 4, 8, 6, 4)]


def _scalar(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


GELU_NODES = [helper.make_node("Div", ["X", "sqrt2"], ["d"], name="/act/Div"),
              helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
              helper.make_node("Add", ["e", "one"], ["a"], name="/act/Add"),
              helper.make_node("Mul", ["X", "a"], ["m"], name="/act/Mul"),
              helper.make_node("Mul", ["m", "half"], ["Y"], name="/act/Mul_1")]
GELU_SCALARS = [_scalar("sqrt2", 2 ** 0.5), _scalar("one", 1.0), _scalar("half", 0.5)]


def test_a_decomposed_gelu_is_one_kernel_unless_a_piece_is_read_elsewhere():
    """GELU below opset 20, as the exporters write it, on X [2, 8]: one pointwise kernel of torch's
    8 FLOPs per element (128), reading X (64 B) and writing Y (64 B): 128 B (its three scalars are numbers,
    read from no memory), where its five nodes alone would move 128 + 128 + 128 + 192 + 128 = 704 B."""
    graph = graph_from_onnx(_graph(GELU_NODES, [("X", [2, 8])], ["Y"], GELU_SCALARS), "gelu")
    assert [(op.target, op.kind, op.flops, op.bytes_moved, op.kernels) for op in graph.ops] == [
        ("Div+Erf+Add+Mul+Mul", "pointwise", 128.0, 128.0, 1)]
    assert [s.op for s in graph.ops[0].operators] == ["gelu"]
    # the Erf's result is also returned: it is written, so every node stays a kernel of its own
    graph = graph_from_onnx(_graph(GELU_NODES, [("X", [2, 8])], ["Y", "e"], GELU_SCALARS), "gelu")
    assert [op.target for op in graph.ops] == ["Div", "Erf", "Add", "Mul", "Mul"]


def test_silu_needs_its_input_read_twice_and_scalars_only():
    """Sigmoid then Mul is SiLU when the Mul reads the Sigmoid's input (one kernel: 5 FLOPs per element,
    X and Y 64 B each); a Sigmoid scaled by a constant, or multiplied by a weight of many elements,
    is two kernels."""
    silu = [helper.make_node("Sigmoid", ["X"], ["s"], name="/act/Sigmoid"),
            helper.make_node("Mul", ["X", "s"], ["Y"], name="/act/Mul")]
    graph = graph_from_onnx(_graph(silu, [("X", [2, 8])], ["Y"]), "silu")
    assert [(op.target, op.flops, op.bytes_moved) for op in graph.ops] == [("Sigmoid+Mul", 80.0, 128.0)]
    scaled = [silu[0], helper.make_node("Mul", ["s", "c"], ["Y"], name="/act/Mul")]
    graph = graph_from_onnx(_graph(scaled, [("X", [2, 8])], ["Y"], [_scalar("c", 3.0)]), "scaled")
    assert [op.target for op in graph.ops] == ["Sigmoid", "Mul"]
    weighted = [silu[0], helper.make_node("Mul", ["s", "W"], ["Z"], name="/act/Mul_1"),
                helper.make_node("Mul", ["X", "Z"], ["Y"], name="/act/Mul_2")]
    weight = numpy_helper.from_array(np.ones((2, 8), dtype=np.float32), "W")
    graph = graph_from_onnx(_graph(weighted, [("X", [2, 8])], ["Y"], [weight]), "weighted")
    assert [op.target for op in graph.ops] == ["Sigmoid", "Mul", "Mul"]


def test_a_decomposed_layer_norm_is_one_normalisation_with_its_affine_epilogue():
    """LayerNorm below opset 17 (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div), then its weight and
    bias, on X [2, 8]: one normalisation of 5 FLOPs per element (80), reading X 64 B, weight and bias 32 B
    each, writing 64 B: 192 B; the weight and bias are its parameters (the two scalars are numbers)."""
    nodes = [helper.make_node("ReduceMean", ["X"], ["mu"], name="/ln/ReduceMean", axes=[-1]),
             helper.make_node("Sub", ["X", "mu"], ["c"], name="/ln/Sub"),
             helper.make_node("Pow", ["c", "two"], ["sq"], name="/ln/Pow"),
             helper.make_node("ReduceMean", ["sq"], ["var"], name="/ln/ReduceMean_1", axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="/ln/Add"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="/ln/Sqrt"),
             helper.make_node("Div", ["c", "sd"], ["n"], name="/ln/Div"),
             helper.make_node("Mul", ["n", "G"], ["g"], name="/ln/Mul"),
             helper.make_node("Add", ["g", "B"], ["Y"], name="/ln/Add_1")]
    inits = [_scalar("two", 2.0), _scalar("eps", 1e-5), numpy_helper.from_array(np.ones(8, dtype=np.float32), "G"),
             numpy_helper.from_array(np.zeros(8, dtype=np.float32), "B")]
    graph = graph_from_onnx(_graph(nodes, [("X", [2, 8])], ["Y"], inits), "ln")
    assert [(op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [("norm", 80.0, 192.0)]
    assert [(p.name, p.trainable) for p in graph.ops[0].params] == [("G", True), ("B", True)]
    assert [s.op for s in graph.ops[0].operators] == ["layernorm"]


def test_an_rms_norm_whose_rsqrt_is_a_division_is_one_normalisation():
    """The TorchScript exporter writes ``torch.rsqrt(v)`` as ``Div(1, Sqrt(v))``, not ``Reciprocal``: T5's and
    LLaMA's RMSNorm (Pow, ReduceMean, Add, Sqrt, Div, Mul), then its weight, on X [2, 8], is one normalisation
    of 5 FLOPs per element (80), reading X 64 B and the weight 32 B, writing 64 B (the three scalars are numbers)."""
    nodes = [helper.make_node("Pow", ["X", "two"], ["sq"], name="/rms/Pow"),
             helper.make_node("ReduceMean", ["sq"], ["var"], name="/rms/ReduceMean", axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="/rms/Add"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="/rms/Sqrt"),
             helper.make_node("Div", ["one", "sd"], ["r"], name="/rms/Div"),
             helper.make_node("Mul", ["X", "r"], ["n"], name="/rms/Mul"),
             helper.make_node("Mul", ["G", "n"], ["Y"], name="/rms/Mul_1")]
    inits = [_scalar("two", 2.0), _scalar("eps", 1e-6), _scalar("one", 1.0),
             numpy_helper.from_array(np.ones(8, dtype=np.float32), "G")]
    graph = graph_from_onnx(_graph(nodes, [("X", [2, 8])], ["Y"], inits), "rms")
    assert [(op.kind, op.flops, op.bytes_moved, op.kernels) for op in graph.ops] == [("norm", 80.0, 160.0, 1)]
    assert [s.op for s in graph.ops[0].operators] == ["layernorm"]


def test_a_cast_to_the_type_a_tensor_already_has_is_no_kernel():
    """``x.to(torch.float32)`` of a float32 tensor returns ``x`` (the torch importer costs it as nothing); the
    TorchScript exporter still writes a ``Cast``, which is then a view. A Cast that converts is a copy."""
    def cast_then_relu(to):
        model = _graph([helper.make_node("Cast", ["X"], ["C"], name="/n/Cast", to=to),
                        helper.make_node("Relu", ["C"], ["Y"], name="/r/Relu")], [("X", [2, 4])], [])
        model.graph.output.extend([helper.make_tensor_value_info("Y", to, None)])
        return graph_from_onnx(model, "cast")
    assert [(op.kind, op.bytes_moved, op.kernels) for op in cast_then_relu(TensorProto.FLOAT).ops] == [
        ("view", 0.0, 0), ("pointwise", 64.0, 1)]
    assert [(op.kind, op.bytes_moved, op.kernels) for op in cast_then_relu(TensorProto.FLOAT16).ops] == [
        ("copy", 48.0, 1), ("pointwise", 32.0, 1)]


def test_a_kernel_with_its_own_bias_takes_no_second_one():
    """Gemm(X, W, C) already adds C: a later Add of a parameter is torch's add, a kernel of its own."""
    inits = [numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W"),
             numpy_helper.from_array(np.ones(8, dtype=np.float32), "C"),
             numpy_helper.from_array(np.ones(8, dtype=np.float32), "P")]
    graph = graph_from_onnx(_graph([helper.make_node("Gemm", ["X", "W", "C"], ["H"], name="/fc/Gemm"),
                                    helper.make_node("Add", ["H", "P"], ["Y"], name="/Add")],
                                   [("X", [2, 4])], ["Y"], inits), "gemm")
    assert [op.target for op in graph.ops] == ["Gemm", "Add"]


@pytest.mark.parametrize("layer, bias_shape, fused", [
    ("conv", (4, 1, 1), True), ("conv", (5,), False), ("conv", (1, 4, 5, 1), False),
    ("matmul", (16,), True), ("matmul", (1, 1, 16), True), ("matmul", (4, 1), False)])
def test_an_epilogue_runs_along_its_kernels_bias_axis(layer, bias_shape, fused):
    """A convolution's bias runs along its channels, a linear layer's along its output features: a parameter
    of one axis added along another (the width of a Conv's [1,4,5,5] result, the rows of a MatMul's [2,4,16])
    is torch's add, a kernel of its own, after the one its operand was fused into."""
    if layer == "conv":
        weight, x_shape = numpy_helper.from_array(np.ones((4, 2, 3, 3), dtype=np.float32), "W"), [1, 2, 5, 5]
        product = helper.make_node("Conv", ["X", "W"], ["H"], name="/c/Conv", pads=[1, 1, 1, 1])
    else:
        weight, x_shape = numpy_helper.from_array(np.ones((8, 16), dtype=np.float32), "W"), [2, 4, 8]
        product = helper.make_node("MatMul", ["X", "W"], ["H"], name="/fc/MatMul")
    bias = numpy_helper.from_array(np.ones(bias_shape, dtype=np.float32), "B")
    graph = graph_from_onnx(_graph([product, helper.make_node("Add", ["H", "B"], ["Y"], name="/Add")],
                                   [("X", x_shape)], ["Y"], [weight, bias]), "bias")
    assert [op.target for op in graph.ops] == ([f"{product.op_type}+Add"] if fused else [product.op_type, "Add"])


def test_an_operand_that_broadcasts_the_result_larger_is_no_epilogue():
    # P [64, 1, 1] added to a [1, 4, 16] product writes 64 times its elements: torch's add, after the matmul
    inits = [numpy_helper.from_array(np.ones((8, 16), dtype=np.float32), "W"),
             numpy_helper.from_array(np.ones((64, 1, 1), dtype=np.float32), "P")]
    graph = graph_from_onnx(_graph([helper.make_node("MatMul", ["X", "W"], ["H"], name="/fc/MatMul"),
                                    helper.make_node("Add", ["H", "P"], ["Y"], name="/Add")],
                                   [("X", [1, 4, 8])], ["Y"], inits), "wide")
    assert [op.target for op in graph.ops] == ["MatMul", "Add"]


def test_a_mask_from_a_trained_table_is_no_constant_mask_of_the_attention():
    """A relative-position bias gathered from a trained table is a kernel of its own (the gather), read by
    the attention; only a mask made from constants of one element (or integers) joins it."""
    table = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "T")
    index = numpy_helper.from_array(np.arange(4, dtype=np.int64), "I")
    model = _graph([helper.make_node("MatMul", ["Q", "K"], ["s"], name="/attn/MatMul"),
                    helper.make_node("Gather", ["T", "I"], ["b"], name="/bias/Gather"),
                    helper.make_node("Add", ["s", "b"], ["m"], name="/attn/Add"),
                    helper.make_node("Softmax", ["m"], ["p"], name="/attn/Softmax", axis=-1),
                    helper.make_node("MatMul", ["p", "V"], ["O"], name="/attn/MatMul_1")],
                   [("Q", [1, 1, 4, 8]), ("K", [1, 1, 8, 4]), ("V", [1, 1, 4, 8])], ["O"], [table, index])
    assert [op.target for op in graph_from_onnx(model, "bias").ops] == ["Gather", "MatMul+Add+Softmax+MatMul"]


def test_an_epilogue_fuses_only_a_result_nobody_else_reads():
    bias = numpy_helper.from_array(np.ones(8, dtype=np.float32), "B")
    weight = numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["X", "W"], ["H"], name="/fc/MatMul"),
                    helper.make_node("Add", ["H", "B"], ["Y"], name="/fc/Add"),
                    helper.make_node("Relu", ["H"], ["Z"], name="/act/Relu")],
                   [("X", [2, 4])], ["Y", "Z"], [weight, bias])
    graph = graph_from_onnx(model, "fc")
    # H is read by the Add and the Relu: the Add is an operator of its own (and the MatMul writes H)
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("MatMul", "matmul", 128.0, 32 + 128 + 64.0), ("Add", "pointwise", 16.0, 64 + 32 + 64.0),
        ("Relu", "pointwise", 16.0, 128.0)]


def test_a_bias_read_through_identity_still_fuses_and_is_counted_once():
    """The TorchScript exporter deduplicates equal initializers and reads them through Identity nodes
    (nn.MultiheadAttention's zero q, k and v biases all become Identity(out_proj.bias)). Such an alias
    is the parameter itself: both bias Adds fuse with their MatMul (128 FLOPs each; reads X 32 + W 128 +
    B 32, writes 64: 256 B), and B is one parameter read by both, not three."""
    bias = numpy_helper.from_array(np.ones(8, dtype=np.float32), "B")
    weight = numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W")
    model = _graph([helper.make_node("Identity", ["B"], ["B_q"], name="/Identity"),
                    helper.make_node("Identity", ["B"], ["B_k"], name="/Identity_1"),
                    helper.make_node("MatMul", ["X", "W"], ["H"], name="/q/MatMul"),
                    helper.make_node("Add", ["B_q", "H"], ["Q"], name="/q/Add"),
                    helper.make_node("MatMul", ["X", "W"], ["G"], name="/k/MatMul"),
                    helper.make_node("Add", ["B_k", "G"], ["K"], name="/k/Add")],
                   [("X", [2, 4])], ["Q", "K"], [weight, bias])
    graph = graph_from_onnx(model, "qk")
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("MatMul+Add", "matmul", 128.0, 256.0), ("MatMul+Add", "matmul", 128.0, 256.0)]
    assert [[p.name for p in op.params] for op in graph.ops] == [["W", "B"], ["W", "B"]]


def test_an_identity_of_a_parameter_that_is_a_graph_output_stays():
    bias = numpy_helper.from_array(np.ones(8, dtype=np.float32), "B")
    graph = graph_from_onnx(_graph([helper.make_node("Identity", ["B"], ["Y"], name="/Identity")], [("X", [2, 4])],
                                   ["Y"], [bias]), "alias")
    assert [(op.target, op.kind) for op in graph.ops] == [("Identity", "view")]


def test_layout_operators_are_views_without_kernels():
    model = _graph([helper.make_node("Transpose", ["X"], ["T"], name="/t/Transpose", perm=[1, 0]),
                    helper.make_node("Relu", ["T"], ["Y"], name="/r/Relu")], [("X", [2, 4])], ["Y"])
    graph = graph_from_onnx(model, "t")
    # PyTorch transposes by strides: no bytes, no kernel; the Relu reads and writes 32 B, one kernel
    assert [(op.kind, op.bytes_moved, op.kernels) for op in graph.ops] == [("view", 0.0, 0), ("pointwise", 64.0, 1)]


def test_a_dropout_in_evaluation_or_of_probability_0_is_no_operator():
    """Dropout(X, ratio, training_mode) over X [2,4] returns X where training_mode is false or ratio is 0
    (given as initializers or Constant nodes): a view, no bytes and no kernel, as a Dropout without
    training_mode. In training with a ratio of 0.5 it is the pointwise kernel: 8 FLOPs, reading 32 B of X
    and writing Y (32 B) and its mask (8 B of bool)."""
    def dropout(ratio, training, constants=False):
        values = [numpy_helper.from_array(np.array(ratio, dtype=np.float32), "r"),
                  numpy_helper.from_array(np.array(training), "t")]
        nodes = [helper.make_node("Dropout", ["X", "r", "t"], ["D", "M"], name="/drop/Dropout"),
                 helper.make_node("Relu", ["D"], ["Y"], name="/act/Relu")]
        if constants:
            nodes[:0] = [helper.make_node("Constant", [], [v.name], value=v) for v in values]
        return graph_from_onnx(_graph(nodes, [("X", [2, 4])], ["Y"], [] if constants else values), "drop").ops

    for ratio, training, constants in ((0.5, False, False), (0.0, True, False), (0.5, False, True), (0.0, True, True)):
        ops = dropout(ratio, training, constants)
        assert [(op.kind, op.flops, op.bytes_moved, op.kernels) for op in ops] == [("view", 0.0, 0.0, 0),
                                                                                   ("pointwise", 8.0, 64.0, 1)]
    ops = dropout(0.5, True)
    # ratio and training_mode are numbers of the program (F.dropout's p and training): no bytes, no memory
    assert [(op.kind, op.flops, op.bytes_moved, op.kernels, op.params) for op in ops][0] == ("pointwise", 8.0,
                                                                                            32 + 40, 1, ())


def test_a_constant_of_one_element_is_a_number_of_the_program_not_memory():
    """Exporters write the numbers PyTorch passes to its kernels (``x * -10000.0``, ``torch.where(z > 0, z, 0.0)``,
    an attention's scale) as one-element initializers or ``Constant`` nodes, which PyTorch neither holds nor reads
    from memory. Over X [2, 4] @ W [4, 4]: the Mul by ``s`` reads and writes 32 B each, the Greater reads 32 B and
    writes 8 B of bool, the Where reads 8 + 32 B and writes 32 B; none holds ``s`` or ``zero``."""
    inits = [numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 10, "W"),
             numpy_helper.from_array(np.array(-10000.0, dtype=np.float32), "s")]
    nodes = [helper.make_node("MatMul", ["X", "W"], ["H"], name="/lin/MatMul"),
             helper.make_node("Mul", ["H", "s"], ["M"], name="/mask/Mul"),
             helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0.0, dtype=np.float32))),
             helper.make_node("Greater", ["M", "zero"], ["C"], name="/act/Greater"),
             helper.make_node("Where", ["C", "M", "zero"], ["Y"], name="/act/Where")]
    ops = graph_from_onnx(_graph(nodes, [("X", [2, 4])], ["Y"], inits), "g").ops
    assert [(op.name, op.bytes_moved, [(p.name, p.nbytes, p.trainable) for p in op.params]) for op in ops] == [
        ("/lin/MatMul", 128.0, [("W", 64.0, True)]), ("/mask/Mul", 64.0, []), ("/act/Greater", 40.0, []),
        ("/act/Where", 72.0, [])]


@pytest.mark.parametrize("scale, constants, held", [(1.0, False, False), (1.0, True, False), (2.0, False, True)],
                         ids=["initializers", "constants", "a-scale-of-twos"])
def test_the_identity_scale_and_bias_of_a_group_norm_decomposition_are_no_parameters(scale, constants, held):
    """Both exporters write nn.GroupNorm(2, 8) on X [2, 8, 4] as X reshaped to [2, 2, 16], an
    InstanceNormalization with a scale of ones and a bias of zeros per group (ONNX requires both), reshaped
    back, then Mul(weight) and Add(bias) of the 8 channels: one group_norm kernel, which reads the weight and
    bias alone (32 B each). The ones and zeros, as initializers (dynamo) or Constant nodes (TorchScript), counted
    as 16 B of trained parameters and 16 B read; they are no parameters now. A scale of other values is the
    model's own: a trained parameter, as before."""
    affine = [numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(8, 1) / 10 + k, n)
              for k, n in ((1, "w"), (0, "b"))]
    sizes = [numpy_helper.from_array(np.array(s, dtype=np.int64), n) for s, n in (([0, 2, -1], "groups"),
                                                                                 ([2, 8, 4], "shape"))]
    identity = [numpy_helper.from_array(np.full(2, scale, dtype=np.float32), "ones"),
                numpy_helper.from_array(np.zeros(2, dtype=np.float32), "zeros")]
    nodes = [helper.make_node("Reshape", ["X", "groups"], ["R"], name="/gn/Reshape"),
             helper.make_node("InstanceNormalization", ["R", "ones", "zeros"], ["N"], name="/gn/InstanceNormalization"),
             helper.make_node("Reshape", ["N", "shape"], ["S"], name="/gn/Reshape_1"),
             helper.make_node("Mul", ["S", "w"], ["M"], name="/gn/Mul"),
             helper.make_node("Add", ["M", "b"], ["Y"], name="/gn/Add")]
    if constants:
        nodes[:0] = [helper.make_node("Constant", [], [v.name], value=v) for v in identity]
    inits = affine + sizes + ([] if constants else identity)
    ops = graph_from_onnx(_graph(nodes, [("X", [2, 8, 4])], ["Y"], inits), "gn").ops
    own = [("ones", 8.0, True), ("zeros", 8.0, True)] if held else []
    # X and Y 256 B each, the weight and bias 32 B each (and the model's own scale and bias 8 B each)
    assert [(op.target, op.bytes_moved, [(p.name, p.nbytes, p.trainable) for p in op.params]) for op in ops] == [
        ("Reshape", 0.0, []),
        ("InstanceNormalization+Reshape+Mul+Add", 576.0 + (16 if held else 0),
         [*own, ("w", 32.0, True), ("b", 32.0, True)])]


def test_the_calls_of_a_model_s_own_function_are_its_nodes_in_the_caller_s_module():
    """A model-local function Block(x, w) = Relu(MatMul(x, w)) + x, called by /b1/Block and /b2/Block on X [2,8]
    with weights W1, W2 [8,8], as the TorchScript exporter writes modules given in export_modules_as_functions.
    Each call was one operator of no FLOPs (a warning); its body's nodes are operators now, costed by the
    rules (MatMul 2 · 16 · 8, Relu and Add 16 each), in the caller's module, as the same graph written
    without a function."""
    weights = [numpy_helper.from_array(np.full((8, 8), k, dtype=np.float32), f"W{k}") for k in (1, 2)]
    body = [helper.make_node("MatMul", ["x", "w"], ["m"], name="MatMul_0"),
            helper.make_node("Relu", ["m"], ["r"], name="Relu_1"),
            helper.make_node("Add", ["r", "x"], ["y"], name="Add_2")]
    block = helper.make_function("__main__", "Block", ["x", "w"], ["y"], body, [helper.make_opsetid("", 17)])
    calls = [helper.make_node("Block", ["X", "W1"], ["H"], name="/b1/Block", domain="__main__"),
             helper.make_node("Block", ["H", "W2"], ["Y"], name="/b2/Block", domain="__main__")]
    model = _graph(calls, [("X", [2, 8])], ["Y"], weights)
    model.opset_import.append(helper.make_opsetid("__main__", 1))
    model.functions.append(block)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_onnx(model, "blocks")
    plain = [helper.make_node(n.op_type, [{"x": x, "w": w, "m": f"{c}m", "r": f"{c}r"}.get(t, t) for t in n.input],
                              [{"y": y}.get(t, f"{c}{t}") for t in n.output], name=f"/{c}/{n.name}")
             for c, x, w, y in (("b1", "X", "W1", "H"), ("b2", "H", "W2", "Y")) for n in body]
    expected = graph_from_onnx(_graph(plain, [("X", [2, 8])], ["Y"], weights), "blocks")
    assert [(op.target, op.flops, op.bytes_moved, op.inputs, op.module_path) for op in graph.ops] == [
        (op.target, op.flops, op.bytes_moved, op.inputs, op.module_path) for op in expected.ops]
    assert [(op.target, op.flops, op.module_path) for op in graph.ops] == [
        ("MatMul", 2 * 16 * 8, ("b1",)), ("Relu", 16, ("b1",)), ("Add", 16, ("b1",)),
        ("MatMul", 2 * 16 * 8, ("b2",)), ("Relu", 16, ("b2",)), ("Add", 16, ("b2",))]


def test_a_function_called_from_a_function_is_in_the_module_of_the_outer_call():
    """Block(x) = Linear(Relu(x)) with Linear(x) = MatMul(x, W) another local function, as the TorchScript
    exporter writes export_modules_as_functions={Block, nn.Linear}, called by /b1/Block and /b2/Block. The inner
    call's MatMul took no scope and inherited that of its reader: b1's MatMul was costed in b2."""
    weight = numpy_helper.from_array(np.ones((8, 8), dtype=np.float32), "W")
    linear = helper.make_function("__main__", "Linear", ["x"], ["y"], [helper.make_node("MatMul", ["x", "W"], ["y"])],
                                  [helper.make_opsetid("", 17)])
    block = helper.make_function("__main__", "Block", ["x"], ["y"],
                                 [helper.make_node("Relu", ["x"], ["r"], name="Relu_0"),
                                  helper.make_node("Linear", ["r"], ["y"], name="Linear_1", domain="__main__")],
                                 [helper.make_opsetid("", 17), helper.make_opsetid("__main__", 1)])
    calls = [helper.make_node("Block", ["X"], ["H"], name="/b1/Block", domain="__main__"),
             helper.make_node("Block", ["H"], ["Y"], name="/b2/Block", domain="__main__")]
    model = _graph(calls, [("X", [2, 8])], ["Y"], [weight])
    model.opset_import.append(helper.make_opsetid("__main__", 1))
    model.functions.extend([linear, block])
    graph = graph_from_onnx(model, "nested")
    assert [(op.target, op.flops, op.module_path) for op in graph.ops] == [
        ("Relu", 16, ("b1",)), ("MatMul", 2 * 16 * 8, ("b1",)), ("Relu", 16, ("b2",)), ("MatMul", 2 * 16 * 8, ("b2",))]


def test_a_shape_computed_in_the_graph_is_propagated():
    """Y[1,3] is expanded to the shape of X[2,3], read from X by Shape, as the TorchScript exporter
    writes broadcasts: the Expand's output is [2,3] only when shape inference propagates Shape's
    value (without it, the import refused the Expand as not static). Then X + E: an Add of 6
    elements, reading 24 + 24 B and writing 24 B."""
    one = numpy_helper.from_array(np.ones((1, 3), dtype=np.float32), "Y")
    nodes = [helper.make_node("Shape", ["X"], ["s"], name="/shape"),
             helper.make_node("Expand", ["Y", "s"], ["E"], name="/expand"),
             helper.make_node("Add", ["X", "E"], ["Z"], name="/add")]
    graph = helper.make_graph(nodes, "broadcast", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ops = {op.name: op for op in graph_from_onnx(model, "broadcast").ops}
    assert ops["/expand"].outputs == (24.0,)
    assert (ops["/add"].flops, ops["/add"].bytes_moved) == (6.0, 72.0)


def test_a_control_flow_operator_reads_what_its_subgraphs_read():
    """fc1 -> If -> fc2, where the If takes only its condition and its branches read fc1's output H
    from the main graph (a Relu in one branch, a Loop whose body negates H in the other). H is an input
    of the If: the edge fc1 -> If exists, and the If reads H (8x32 fp32, 1,024 B) and the Loop's trip
    count N (int64, 8 B) besides its bool condition (1 B, a model input: a constant one would take its
    branch), and writes A (1,024 B). Without it the If would have no predecessor and a plan could run it
    before fc1."""
    w1 = numpy_helper.from_array(np.ones((16, 32), dtype=np.float32), "W1")
    w2 = numpy_helper.from_array(np.ones((32, 4), dtype=np.float32), "W2")
    trip = numpy_helper.from_array(np.array(1, dtype=np.int64), "N")
    body = helper.make_graph([helper.make_node("Neg", ["H"], ["neg"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("neg", TensorProto.FLOAT, [8, 32])])
    then_branch = helper.make_graph([helper.make_node("Relu", ["H"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, [8, 32])])
    else_branch = helper.make_graph([helper.make_node("Loop", ["N", "C"], ["e"], body=body)], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 8, 32])])
    model = _graph([helper.make_node("MatMul", ["X", "W1"], ["H"], name="/fc1/MatMul"),
                    helper.make_node("If", ["C"], ["A"], name="/act/If", then_branch=then_branch,
                                     else_branch=else_branch),
                    helper.make_node("MatMul", ["A", "W2"], ["Y"], name="/fc2/MatMul")],
                   [("X", [8, 16])], ["Y"], [w1, w2, trip])
    model.graph.input.append(helper.make_tensor_value_info("C", TensorProto.BOOL, []))
    model.graph.value_info.append(helper.make_tensor_value_info("A", TensorProto.FLOAT, [8, 32]))
    with pytest.warns(CostModelWarning) as warned:
        graph = graph_from_onnx(model, "branchy")
    assert [str(w.message) for w in warned] == [
        "branchy: no FLOP formula for 1 operator type(s), costed by bytes moved only: If; the work inside the "
        "subgraphs of If (a branch, a loop's body) is not costed at all: export without control flow to cost it"]
    assert [(op.name, op.inputs) for op in graph.ops] == [
        ("/fc1/MatMul", ()), ("/act/If", ((0, 0),)), ("/fc2/MatMul", ((1, 0),))]
    assert graph.ops[1].bytes_moved == 1 + 8 + 1024 + 1024


def test_the_weights_a_subgraph_holds_are_its_control_flow_operator_s_parameters():
    """An If whose branches each multiply by an 8x8 weight (256 B) they hold as initializers of their own, and a
    Loop whose body holds one, inside the then-branch. The If holds all three, 768 B, as it holds a weight
    its branches read from the main graph: they were no parameter of any node, so a plan's memory left them
    out. The same name in two subgraphs is two weights."""
    def value(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 8])

    def eight(name):
        return numpy_helper.from_array(np.ones((8, 8), dtype=np.float32), name)

    flags = [helper.make_tensor_value_info(n, TensorProto.BOOL, []) for n in ("c", "d")]
    shape = numpy_helper.from_array(np.array([4, 8], dtype=np.int64), "shape")   # a size: no parameter
    body = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["w"]),
                              helper.make_node("Reshape", ["w", "shape"], ["m"]),
                              helper.make_node("Identity", ["c"], ["d"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), flags[0], value("h")],
                             [flags[1], value("m")], [eight("W"), shape])
    then_branch = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["p"]),
                                     helper.make_node("Loop", ["", "C", "p"], ["t"], body=body)],
                                    "then", [], [value("t")], [eight("W")])
    else_branch = helper.make_graph([helper.make_node("MatMul", ["X", "V"], ["e"])], "else", [], [value("e")],
                                    [eight("V")])
    model = _graph([helper.make_node("If", ["C"], ["Y"], name="if", then_branch=then_branch,
                                     else_branch=else_branch)], [("X", [4, 8])], ["Y"])
    model.graph.input.append(helper.make_tensor_value_info("C", TensorProto.BOOL, []))
    with pytest.warns(CostModelWarning):
        (op,) = graph_from_onnx(model, "held").ops
    assert [(p.nbytes, p.trainable) for p in op.params] == [(256.0, True)] * 3
    assert op.bytes_moved == 128 + 1 + 3 * 256 + 128


def test_a_loop_s_trip_count_and_condition_are_host_values():
    """A Loop of 3 steps (an int64 initializer) while a bool initializer holds, whose body multiplies by the main
    graph's 8x8 weight W: PyTorch runs such a loop from Python, its count and condition no tensor. They were
    the Loop's parameters (9 B of memory) and reads; W (256 B) is its one parameter, and it reads W and its
    4x8 initial value (128 B) and writes its result (128 B)."""
    def value(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 8])

    flags = [helper.make_tensor_value_info(n, TensorProto.BOOL, []) for n in ("c", "d")]
    body = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["m"]),
                              helper.make_node("Identity", ["c"], ["d"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), flags[0], value("h")],
                             [flags[1], value("m")])
    inits = [numpy_helper.from_array(np.ones((8, 8), dtype=np.float32), "W"),
             numpy_helper.from_array(np.array(3, dtype=np.int64), "N"), numpy_helper.from_array(np.array(True), "C")]
    model = _graph([helper.make_node("Loop", ["N", "C", "X"], ["Y"], name="loop", body=body)], [("X", [4, 8])],
                   ["Y"], inits)
    model.graph.value_info.append(value("Y"))
    with pytest.warns(CostModelWarning):
        (op,) = graph_from_onnx(model, "loop").ops
    assert [(p.name, p.nbytes) for p in op.params] == [("W", 256.0)]
    assert op.bytes_moved == 128 + 256 + 128


def test_shape_arithmetic_of_an_unoptimised_export_is_data_not_operators(tmp_path):
    """torch.onnx.export(..., optimize=False) writes the reshapes and the attention scale of a GPT as
    Concat, Gather, Slice, CastLike, Sqrt and Div nodes on Shape outputs and constants; PyTorch
    computes them on the host. Folded as data, the instance matches torch.export's node for node:
    names, times, edges (the arange of the positions stays a kernel in both)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript")
    from placement.io.onnx_import import import_onnx
    from placement.io.torch_export import import_torch
    from tests.handoff_models import gpt

    model, args = gpt()
    model.eval()
    path = tmp_path / "gpt.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=True, optimize=False, verbose=False)
    platform = make_platform("h100", "epyc-7763", 4, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        from_onnx = import_onnx(path, platform=platform, granularity="module").instance
    from_torch = import_torch(model, args, platform=platform).instance
    assert len(from_onnx["nodes"]) == len(from_torch["nodes"]) == 22

    def summary(instance):
        return ([(n["name"], pytest.approx(n["fpgaLatency"], rel=1e-12)) for n in instance["nodes"]],
                sorted((e["sourceId"], e["destId"]) for e in instance["edges"]))

    assert summary(from_onnx) == summary(from_torch)


def test_sizes_and_axes_an_unoptimised_export_holds_are_host_values():
    """An unoptimised export holds a reshape's sizes and a mean's axes as int64 constants: each was memory of
    the operator reading it (40 B for a reshape to five sizes) and bytes it moved (8 B for the mean's axis).
    PyTorch passes them as host integers: the ONNX import now gives the operators torch.export's bytes and
    no memory."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript")
    import io

    from placement.io.torch_export import import_module

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 48)

        def forward(self, x):
            return self.proj(x).reshape(2, 5, 3, 2, 8).mean(dim=1)

    model, x = Heads(), torch.randn(2, 5, 16)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buffer, dynamo=True, optimize=False)
    from_onnx = graph_from_onnx(onnx.load_from_string(buffer.getvalue()), "heads")
    from_torch = import_module(model, (x,))
    # linear 2·10·48·16 = 15,360 FLOPs; the reshape a view; the mean reads 1,920 B and writes 384 B
    assert [(op.kind, op.flops, op.bytes_moved) for op in from_onnx.ops] == \
           [(op.kind, op.flops, op.bytes_moved) for op in from_torch.ops] == \
           [("matmul", 15360.0, 5824.0), ("view", 0.0, 0.0), ("reduction", 480.0, 2304.0)]
    assert [p for op in from_onnx.ops for p in op.params if not p.trainable] == []


def test_only_shape_arithmetic_is_folded():
    """Shape -> Gather -> Concat with a constant computes the new shape of X on the host: data, so
    the graph's operators are the Reshape (a view), the Range (torch's arange, a kernel) and the
    other domain's node (it may be a kernel, though it reads a constant only) and the Add of its
    output, in graph order."""
    consts = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dtype=np.int64)))
              for name, v in (("i0", [0]), ("m1", [-1]), ("z", 0), ("n", 4), ("one", 1))]
    nodes = consts + [helper.make_node("Shape", ["X"], ["s"], name="/shape"),
                      helper.make_node("Gather", ["s", "i0"], ["d"], name="/gather", axis=0),
                      helper.make_node("Concat", ["d", "m1"], ["t"], name="/concat", axis=0),
                      helper.make_node("Reshape", ["X", "t"], ["Y"], name="/reshape"),
                      helper.make_node("Range", ["z", "n", "one"], ["R"], name="/range"),
                      helper.make_node("Seed", ["n"], ["S"], name="/seed", domain="com.example"),
                      helper.make_node("Add", ["S", "S"], ["T"], name="/add")]
    graph = helper.make_graph(nodes, "shapes", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("R", TensorProto.INT64, None),
                               helper.make_tensor_value_info("T", TensorProto.FLOAT, [2])],
                              value_info=[helper.make_tensor_value_info("S", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.warns(CostModelWarning):
        ops = graph_from_onnx(model, "shapes").ops
    assert [(op.name, op.kind) for op in ops] == [("/reshape", "view"), ("/range", "constant"),
                                                  ("/seed", "unknown"), ("/add", "pointwise")]
    assert ops[0].outputs == (96.0,)   # Y is [2, 12] fp32


def test_the_model_inputs_and_their_readers_are_recorded():
    """X is the model's one input (the initializers W1, B1, W2, B2 are no inputs, even where an older
    exporter lists them among the graph's inputs); the MatMul+Add that reads it records it, and the
    instance lists it per node and in ``about.inputs``, which the hand-off forms check."""
    model = mlp_model()
    model.graph.input.extend([helper.make_tensor_value_info("W1", TensorProto.FLOAT, [4, 8])])
    graph = graph_from_onnx(model, "mlp")
    assert graph.inputs == ("X",)
    assert [op.model_inputs for op in graph.ops] == [("X",), (), (), ()]


def test_resize_and_where_are_costed_as_torch_costs_upsample_and_masked_fill():
    """torch.export's upsample is a pointwise operator (one FLOP per output element) and its where and
    masked_fill are copies (no FLOPs); their ONNX exports, Resize and Where, are costed alike. Resize of
    X [1,2,4,4] by 2 along both spatial axes writes [1,2,8,8]: 128 FLOPs. Where over [2,4]: 0 FLOPs,
    one kernel."""
    scales = numpy_helper.from_array(np.array([1.0, 1.0, 2.0, 2.0], dtype=np.float32), "scales")
    zero = numpy_helper.from_array(np.zeros((2, 4), dtype=np.float32), "Z")
    nodes = [helper.make_node("Resize", ["X", "", "scales"], ["Y"], name="/up/Resize", mode="nearest"),
             helper.make_node("Greater", ["M", "Z"], ["C"], name="/mask/Greater"),
             helper.make_node("Where", ["C", "M", "Z"], ["W"], name="/mask/Where")]
    model = _graph(nodes, [("X", [1, 2, 4, 4]), ("M", [2, 4])], ["Y", "W"], [scales, zero])
    graph = graph_from_onnx(model, "rw")
    costs = {op.target: (op.kind, op.flops, op.kernels) for op in graph.ops}
    assert costs["Resize"] == ("pointwise", 128.0, 1)
    assert costs["Where"] == ("copy", 0.0, 1)


def test_the_scales_of_a_resize_are_no_trained_parameter():
    """The dynamo exporter's optimiser folds the scales of the Resize it writes for F.interpolate into a
    float initializer of four elements; F.interpolate reads no parameter, so nothing before the Relu needs
    a gradient (the Resize runs first on the model input), and its backward is free. The scales are host
    values, as F.interpolate's scale_factor is: the Resize reads X (128 B) and writes U (512 B), as torch's
    upsample does, not the scales' 16 B too. The opset-9 Upsample the TorchScript exporter writes for it is
    the same resampling: one FLOP per output element."""
    from placement.io.opgraph import gradient_flow

    scales = numpy_helper.from_array(np.array([1.0, 1.0, 2.0, 2.0], dtype=np.float32), "scales")
    for op_type, inputs, opset in (("Resize", ["X", "", "scales"], 13), ("Upsample", ["X", "scales"], 9)):
        nodes = [helper.make_node(op_type, inputs, ["U"], name=f"/up/{op_type}", mode="nearest"),
                 helper.make_node("Relu", ["U"], ["Y"], name="/act/Relu")]
        model = _graph(nodes, [("X", [1, 2, 4, 4])], ["Y"], [scales])
        model.opset_import[0].version = opset
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            graph = graph_from_onnx(model, "up")
        assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
            (op_type, "pointwise", 1 * 2 * 8 * 8, 640.0), ("Relu", "pointwise", 1 * 2 * 8 * 8, 1024.0)]
        assert [p.name for op in graph.ops for p in op.params] == []
        assert [g.needed for g in gradient_flow(graph)] == [False, False]


def test_empty_dimensions_are_costed_by_the_rules_without_dividing_by_them():
    """Tensors with a dimension of 0: a Conv of X [1,0,4,4] by W [3,0,1,1] (no input channels) writes
    [1,3,4,4] with 2 · 48 · numel(W)/C_out = 0 FLOPs, a ConvTranspose of X [1,0,4,4] by W [0,3,1,1] also 0;
    an Attention of q [1,1,2,0], k [1,1,3,0], v [1,1,3,4] 2 · (numel(q)/E) · S · (E + E_v) = 2 · 2 · 3 · 4
    (the query rows are L = 2 though E = 0); an Einsum ij,jk->ik summing j of size 0 runs no multiply-add."""
    empty = np.zeros((3, 0, 1, 1), dtype=np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"], name="/conv/Conv"),
             helper.make_node("ConvTranspose", ["X", "WT"], ["T"], name="/up/ConvTranspose"),
             helper.make_node("Attention", ["Q", "K", "V"], ["O"], name="/attn/Attention"),
             helper.make_node("Einsum", ["A", "B"], ["E"], name="/mix/Einsum", equation="ij,jk->ik")]
    model = _graph(nodes, [("X", [1, 0, 4, 4]), ("Q", [1, 1, 2, 0]), ("K", [1, 1, 3, 0]), ("V", [1, 1, 3, 4]),
                           ("A", [2, 0]), ("B", [0, 3])], ["C", "T", "O", "E"],
                   [numpy_helper.from_array(empty, "W"), numpy_helper.from_array(empty.transpose(1, 0, 2, 3), "WT")])
    model.opset_import[0].version = 23
    graph = graph_from_onnx(model, "empty")
    assert [(op.target, op.flops) for op in graph.ops] == [("Conv", 0.0), ("ConvTranspose", 0.0),
                                                           ("Attention", 2.0 * 2 * 3 * (0 + 4)), ("Einsum", 0.0)]
    assert [sum(shape.kind == "gemm" for shape in op.operators) for op in graph.ops] == [0, 0, 1, 0]


def test_biases_are_no_operands_and_a_single_float_is_no_parameter():
    """mlp_model's MatMul+Add fuses into one matmul reading W1 (an operand) and B1 (added: no operand);
    the Gemm reads W2 (operand) and B2 (its C, added). A mask-style Mul by a one-element float
    initializer reads a number of the program, no parameter: nothing before it needs a gradient, so its
    backward is free."""
    graph = graph_from_onnx(mlp_model())
    params = {p.name: (p.trainable, p.operand) for op in graph.ops for p in op.params}
    assert params == {"W1": (True, True), "B1": (True, False), "W2": (True, True), "B2": (True, False)}
    scale = numpy_helper.from_array(np.array(-1e4, dtype=np.float32), "S")
    masked = _graph([helper.make_node("Mul", ["M", "S"], ["m"], name="/mask/Mul"),
                     helper.make_node("Add", ["X", "m"], ["Y"], name="/mask/Add")],
                    [("M", [2, 4]), ("X", [2, 4])], ["Y"], [scale])
    graph = graph_from_onnx(masked)
    from placement.io.opgraph import gradient_flow

    assert [p.trainable for op in graph.ops for p in op.params] == []
    assert [g.needed for g in gradient_flow(graph)] == [False, False]


def test_a_product_given_one_value_twice_has_a_gradient_through_each_operand():
    """MatMul(h, h), h = MatMul(X, W) with W trained and X needing no gradient: the product's gradient
    is two GEMMs (factor 2), as the torch importer counts it (and autograd); one was charged. And
    MatMul(W, W) of a trained W alone: two weight-gradient GEMMs."""
    from placement.io.opgraph import gradient_flow

    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["X", "W"], ["h"], name="/l/MatMul"),
                    helper.make_node("MatMul", ["h", "h"], ["Y"], name="/gram/MatMul"),
                    helper.make_node("MatMul", ["W", "W"], ["P"], name="/square/MatMul")],
                   [("X", [4, 4])], ["Y", "P"], [weight])
    graph = graph_from_onnx(model)
    factors = {op.name: (op.backward_factor(g), op.weight_factor(g)) for op, g in zip(graph.ops, gradient_flow(graph))}
    assert factors == {"/l/MatMul": (1.0, 1.0), "/gram/MatMul": (2.0, 0.0), "/square/MatMul": (2.0, 2.0)}


def test_a_computed_term_added_to_a_product_is_no_operand_of_it():
    """A Gemm whose C is an activation (``addmm(h, X, W)``) and a MatMul whose Add reads a part of a packed bias
    (the dynamo exporter's Split of ``nn.MultiheadAttention``'s ``in_proj_bias`` for cross-attention) add those
    values to their products: with ``X`` needing no gradient, each computes its weight gradient alone, one GEMM,
    as autograd does. Both were charged a second GEMM, as if the added value were an operand."""
    from placement.io.opgraph import gradient_flow

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("W1", (4, 4)), ("B1", (4,)), ("W2", (4, 4)), ("W3", (4, 4)), ("packed", (8,)))]
    split = numpy_helper.from_array(np.array([4, 4], dtype=np.int64), "halves")
    model = _graph([helper.make_node("Gemm", ["X", "W1", "B1"], ["h"], name="/first/Gemm"),
                    helper.make_node("Gemm", ["X", "W2", "h"], ["a"], name="/addmm/Gemm"),
                    helper.make_node("Split", ["packed", "halves"], ["b", "unused"], name="/kv/Split", axis=0),
                    helper.make_node("MatMul", ["X", "W3"], ["m"], name="/kv/MatMul"),
                    helper.make_node("Add", ["m", "b"], ["k"], name="/kv/Add")],
                   [("X", [2, 4])], ["a", "k"], [*inits, split])
    graph = graph_from_onnx(model)
    factors = {op.name: (op.backward_factor(g), op.weight_factor(g)) for op, g in zip(graph.ops, gradient_flow(graph))
               if op.kind == "matmul"}
    assert factors == {"/first/Gemm": (1.0, 1.0), "/addmm/Gemm": (1.0, 1.0), "/kv/MatMul": (1.0, 1.0)}


def test_a_value_added_to_a_product_and_multiplied_in_it_is_one_operand_of_it():
    """``Gemm(h, W, h)`` (``addmm(h, h, W)``) and ``Gemm(X, P, P)`` add a value to the product and multiply by it:
    its gradient through the product is a GEMM, as autograd runs it. Read as an added term alone, ``h`` was no
    operand (one GEMM charged where autograd runs two) and ``P`` no weight (none where autograd runs one). An
    ``Einsum``'s third operand is multiplied, not added: it was read as a Gemm's ``C``. Its products, ``X·W3``
    then ``(X·W3)·h`` (128 FLOPs each), have gradients for ``W3`` (a weight's) and for both factors of the
    second, ``h`` needing one: 3 · 128 for 256 forward, 1.5, the weight part 0.5."""
    from placement.io.opgraph import gradient_flow

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("W1", (4, 4)), ("B1", (4,)), ("W2", (4, 4)), ("P", (4, 4)), ("W3", (4, 4)))]
    model = _graph([helper.make_node("Gemm", ["X", "W1", "B1"], ["h"], name="/first/Gemm"),
                    helper.make_node("Gemm", ["h", "W2", "h"], ["a"], name="/addmm/Gemm"),
                    helper.make_node("Gemm", ["X", "P", "P"], ["b"], name="/both/Gemm"),
                    helper.make_node("Einsum", ["X", "W3", "h"], ["c"], name="/einsum/Einsum",
                                     equation="ij,jk,kl->il")],
                   [("X", [4, 4])], ["a", "b", "c"], inits)
    graph = graph_from_onnx(model)
    factors = {op.name: (op.backward_factor(g), op.weight_factor(g)) for op, g in zip(graph.ops, gradient_flow(graph))
               if op.kind == "matmul"}
    assert factors == {"/first/Gemm": (1.0, 1.0), "/addmm/Gemm": (2.0, 1.0), "/both/Gemm": (1.0, 1.0),
                       "/einsum/Einsum": (1.5, 0.5)}


def test_an_einsum_of_three_operands_has_the_gradient_of_each_of_its_products():
    """``Einsum(X, W1, W2)``, ij,jk,kl->il on ``X`` [2, 3] (a model input: no gradient) and trained ``W1`` [3, 4],
    ``W2`` [4, 5], as the torch importer has it: left to right, ``X·W1`` (48 FLOPs) then ``(X·W1)·W2`` (80); its
    gradient ``W1``'s of the first and both factors' of the second, 208 FLOPs in 3 kernels (as FlopCounterMode
    counts for torch.einsum), of which the weight gradients ``W1``'s and ``W2``'s, 48 + 80 in 2 kernels: the
    W part of the split backward. One GEMM per operand, at most 2, charged 256, all of it weight gradient."""
    from placement.costmodel.roofline import bundled_catalogue, roofline_ms
    from placement.io.opgraph import gradient_flow, weight_time_ms

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("W1", (3, 4)), ("W2", (4, 5)))]
    model = _graph([helper.make_node("Einsum", ["X", "W1", "W2"], ["Y"], name="/e/Einsum", equation="ij,jk,kl->il")],
                   [("X", [2, 3])], ["Y"], inits)
    graph = graph_from_onnx(model, "e")
    (op,), (gradient,) = graph.ops, gradient_flow(graph)
    assert (op.flops, op.backward_flops(gradient), op.weight_factor(gradient) * op.flops) == (128.0, 208.0, 128.0)
    assert (op.backward_kernels(gradient), op.weight_kernels(gradient)) == (3, 2)
    assert [(s.m, s.n, s.k) for s in op.backward_operators(gradient)] == [(3, 4, 2), (2, 4, 5), (4, 5, 2)]
    device = next(iter(bundled_catalogue().values()))
    pg = group_ops(graph, "operator")
    assert weight_time_ms(pg, 0, device) == roofline_ms(128.0, op.bytes_moved, device, op.dtype, 2)


def test_batch_norm_statistics_are_not_trained():
    """BatchNormalization's inputs 3 and 4 are its running mean and variance: buffers, which the torch
    importer reads as such. Read as trained, they gave a frozen first layer a backward pass and
    gradient memory."""
    vector = lambda name, value: numpy_helper.from_array(np.full(4, value, dtype=np.float32), name)  # noqa: E731
    model = _graph([helper.make_node("BatchNormalization", ["X", "scale", "shift", "mean", "var"], ["Y"],
                                     name="/bn/BatchNormalization")],
                   [("X", [2, 4])], ["Y"], [vector("scale", 1), vector("shift", 0), vector("mean", 0.5),
                                            vector("var", 2)])
    graph = graph_from_onnx(model)
    assert {p.name: p.trainable for op in graph.ops for p in op.params} == {"scale": True, "shift": True,
                                                                            "mean": False, "var": False}


def test_a_negative_dimension_is_refused():
    """An input declared (-3, 16) was costed as it stood: -768 FLOPs for its MatMul, and, in training, an
    error about an edge's negative size that did not name the shape. Declared (-1, 3) ("any", as converters
    write it) and sliced, onnx's shape inference aborted the process (a failed assertion): refused before it."""
    weight = numpy_helper.from_array(np.ones((16, 8), dtype=np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", [-3, 16])], ["y"], [weight])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "neg")
    assert str(err.value) == ("neg: tensor 'x' is declared with the shape [-3, 16], with a negative dimension; "
                              "declare that dimension symbolic (a name, fixed with dims) or give its size")
    bounds = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", [1]), ("e", [100]), ("a", [0]))]
    sliced = _graph([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [("x", [-1, 3])], ["y"], bounds)
    assert refusal_in_a_child(sliced, "sliced").endswith(
        "sliced: tensor 'x' is declared with the shape [-1, 3], with a negative dimension; declare that dimension "
        "symbolic (a name, fixed with dims) or give its size")


def test_a_negative_dimension_names_the_option_that_fixes_a_symbolic_one(tmp_path, capsys):
    # the command printed the library's parameter: "(a name, fixed with dims)"
    from placement.cli import main

    weight = numpy_helper.from_array(np.ones((16, 8), dtype=np.float32), "W")
    onnx.save(_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", [-3, 16])], ["y"], [weight]),
              str(path := tmp_path / "neg.onnx"))
    assert main(["import", str(path), "--out", str(tmp_path / "neg.json")]) == 2
    assert capsys.readouterr().err == (
        "error: neg: tensor 'x' is declared with the shape [-3, 16], with a negative dimension; declare that "
        "dimension symbolic (a name, fixed with --dim NAME=VALUE) or give its size\n")


def refusal_in_a_child(model, name: str) -> str:
    """The last line of standard error of a child process that imports ``model`` as ``name``, after checking that
    the import was refused (status 1): onnx's shape inference aborts the whole process on some graphs."""
    script = ("import sys, onnx\nfrom placement.errors import InvalidInstanceError\n"
              "from placement.io.onnx_import import graph_from_onnx\ntry:\n"
              f"    graph_from_onnx(onnx.load_from_string(sys.stdin.buffer.read()), {name!r})\n"
              "except InvalidInstanceError as err:\n    sys.exit(f'refused: {err}')\n")
    child = subprocess.run([sys.executable, "-c", script], input=model.SerializeToString(), capture_output=True,
                           timeout=120)
    assert child.returncode == 1, child.stderr   # the refusal raised, where the process was aborted (-6)
    return child.stderr.decode().splitlines()[-1]


def _split_model(shape, parts, opset, sizes=None, attribute=False, sliced=False):
    """x of ``shape`` -> Split along axis 1 into ``parts`` outputs (``sizes``: the part sizes, as the ``split``
    input or, with ``attribute``, attribute; none: ``num_outputs`` from opset 18) -> the last part, sliced from
    index 1 along axis 1 with ``sliced``."""
    outputs = [f"p{k}" for k in range(parts)]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", [1]), ("e", [100]), ("a", [1]))]
    inputs, attrs = ["x"], {"axis": 1}
    if sizes is not None and attribute:
        attrs["split"] = sizes
    elif sizes is not None:
        inputs.append("sizes")
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    elif opset >= 18:
        attrs["num_outputs"] = parts
    nodes = [helper.make_node("Split", inputs, outputs, name="split", **attrs)]
    if sliced:
        nodes.append(helper.make_node("Slice", [outputs[-1], "s", "e", "a"], ["y"], name="slice"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                               for n in (["y"] if sliced else outputs)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_a_split_into_more_parts_than_its_axis_holds_is_refused():
    """A Split of an axis of size 1 into 3 parts (opset 18, num_outputs=3: parts of 1 element, the last the
    rest, -1): onnx's shape inference gave the last part the dimension -1 and, on a Slice of it, aborted the
    process (a failed assertion). Refused before inference, as are part sizes that do not sum to the axis's
    size or are negative, parts of ceil(5 / 4) = 2 elements that leave the last -1, and, before opset 18
    (equal parts), a size that is no multiple of the parts."""
    assert refusal_in_a_child(_split_model(["batch", 1, 4], 3, 18, sliced=True), "split").endswith(
        "split: node 'split' (Split) splits axis 1 of tensor 'x', of shape ['batch', 1, 4], into 3 parts of 1 "
        "element but the last, which holds the rest, -1 elements; give the part sizes")
    where = "split: node 'split' (Split) splits axis 1 of tensor 'x', of shape [2, {}, 4], into "
    for model, message in (
            (_split_model([2, 1, 4], 3, 17), "3 equal parts, which its 1 element along it do not make (opset 17: a "
                                             "Split without part sizes makes equal parts); give the part sizes"),
            (_split_model([2, 5, 4], 4, 18), "4 parts of 2 elements but the last, which holds the rest, -1 elements; "
                                             "give the part sizes"),
            (_split_model([2, 1, 4], 3, 17, [1, 1, 1]), "parts of sizes [1, 1, 1], which sum to 3, not 1; give part "
                                                        "sizes that sum to 1"),
            (_split_model([2, 1, 4], 3, 11, [2, -1, 0], attribute=True),
             "parts of sizes [2, -1, 0], with a negative size; give part sizes of at least 0 that sum to 1")):
        with pytest.raises(InvalidInstanceError) as err:
            graph_from_onnx(model, "split")
        assert str(err.value) == where.format(model.graph.input[0].type.tensor_type.shape.dim[1].dim_value) + message
    # valid splits import: parts of 2, 2 and 0 elements, and of 1, 1 and 0 (ceil(2 / 3) = 1: the spec's rule,
    # though more parts than elements)
    assert len(graph_from_onnx(_split_model([2, 4, 4], 3, 18), "split").ops) == 1
    assert len(graph_from_onnx(_split_model([2, 2, 4], 3, 18), "split").ops) == 1


def test_a_split_whose_part_sizes_the_graph_computes_is_not_judged_before_inference():
    """Part sizes computed in the graph (a Concat of two initializers: [2, 1, 1, 1] for an axis of 5, in 4
    parts) are not known before shape inference: the check took the Split for one given no sizes (parts of
    2, the last -1) and refused a valid model."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("a", [2, 1]), ("b", [1, 1]))]
    nodes = [helper.make_node("Concat", ["a", "b"], ["sizes"], name="concat", axis=0),
             helper.make_node("Split", ["x", "sizes"], [f"p{k}" for k in range(4)], name="split", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 4])],
                              [helper.make_tensor_value_info(f"p{k}", TensorProto.FLOAT, None) for k in range(4)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert [op.name for op in graph_from_onnx(model, "split").ops] == ["split"]


def _inferred_split_model(after="Slice", opset=18):
    """x [1, 4] -> Slice of its first column -> t [1, 1], a shape the model does not declare -> Split along axis 1
    into 3 parts (num_outputs) -> ``after`` (a Slice from index 1 along axis 1, or a Relu) of the last part -> y."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s0", [0]), ("e0", [1]), ("a", [1]),
                                                                             ("s", [1]), ("e", [100]))]
    nodes = [helper.make_node("Slice", ["x", "s0", "e0", "a"], ["t"], name="first"),
             helper.make_node("Split", ["t"], ["p0", "p1", "p2"], name="split", axis=1, num_outputs=3),
             helper.make_node("Slice", ["p2", "s", "e", "a"], ["y"], name="slice") if after == "Slice" else
             helper.make_node("Relu", ["p2"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


INFERRED_SPLIT = ("node 'split' (Split) splits axis 1 of tensor 't', of shape [1, 1], into 3 parts of 1 element but "
                  "the last, which holds the rest, -1 elements; give the part sizes")


def test_a_split_of_a_computed_tensor_into_more_parts_than_its_axis_holds_is_refused_after_inference():
    """The Split's input is computed (a Slice), its size of 1 along the axis known only from shape inference, which
    gave the last of its 3 parts the dimension -1: the import was refused for that part's negative dimension
    ("tensor 'p2' has the shape [1, -1]"), which did not name the Split. Checked after inference, it is refused as
    a Split of a declared shape is."""
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(_inferred_split_model("Relu"), "inferred")
    assert str(err.value) == f"inferred: {INFERRED_SPLIT}"


def test_a_split_of_a_computed_tensor_that_aborts_shape_inference_is_refused():
    """As above, with a Slice of the part of dimension -1: onnx's shape inference aborted the process on the Slice
    (a failed assertion in its C++). Inference runs in a child process now: the import is refused, naming the
    Split."""
    assert refusal_in_a_child(_inferred_split_model(), "inferred") == f"refused: inferred: {INFERRED_SPLIT}"


def test_inference_in_a_child_under_an_ignored_sigchld(tmp_path):
    """Where the caller ignores SIGCHLD the system reaps the child, and waiting for it raised ChildProcessError: the
    import that aborts inference is still refused (the signal unknown: the Split's message does not need it), and
    one that does not abort still imports."""
    script = ("import signal, sys, onnx\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
              "from placement.errors import InvalidInstanceError\n"
              "from placement.io.onnx_import import graph_from_onnx\n"
              "for name in sys.argv[1:]:\n    try:\n"
              "        graph = graph_from_onnx(onnx.load(name), 'model')\n        print('imported', len(graph.ops))\n"
              "    except InvalidInstanceError as err:\n        print(f'refused: {err}')\n")
    onnx.save(_inferred_split_model(), str(aborts := tmp_path / "aborts.onnx"))
    onnx.save(mlp_model("2"), str(runs := tmp_path / "runs.onnx"))
    child = subprocess.run([sys.executable, "-c", script, str(aborts), str(runs)], capture_output=True, text=True,
                           timeout=120)
    assert (child.returncode, child.stdout) == (0, f"refused: model: {INFERRED_SPLIT}\nimported "
                                                   f"{len(graph_from_onnx(mlp_model('2'), 'm').ops)}\n"), child.stderr


def test_the_command_line_refuses_a_model_that_aborts_shape_inference_in_one_line(tmp_path):
    """``placement import`` of a model on which onnx's shape inference aborts: exit status 2 and one line on
    standard error, no traceback (it was killed by SIGABRT, status -6, with onnx's assertion on standard error)."""
    onnx.save(_inferred_split_model(), str(path := tmp_path / "inferred.onnx"))
    child = subprocess.run([sys.executable, "-m", "placement", "import", str(path), "--out", str(tmp_path / "o.json")],
                           capture_output=True, text=True, timeout=120)
    assert (child.returncode, child.stdout, child.stderr) == (2, "", f"error: inferred: {INFERRED_SPLIT}\n")
    assert not (tmp_path / "o.json").exists()


def test_a_negative_dimension_that_aborts_shape_inference_is_named_with_the_node_that_makes_it():
    """Pads of -3 on both ends of an axis of 4 (a negative size, -2, which onnx's inference gives the result), then
    a Slice of it: inference aborted the process on the Slice. The refusal names the Pad, its output's shape and the
    Slice; so for a Split whose part sizes the graph computes (a Concat: [6, -2]), known in a later round of
    inference."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("pads", [0, -3, 0, -3]), ("s", [0]), ("e", [2]), ("a", [1]), ("six", [6]), ("neg", [-2]))]
    padded = _graph([helper.make_node("Pad", ["x", "pads"], ["t"], name="pad"),
                     helper.make_node("Slice", ["t", "s", "e", "a"], ["y"], name="slice")], [("x", [1, 4])], ["y"],
                    inits[:4])
    assert refusal_in_a_child(padded, "pad") == (
        "refused: pad: the model cannot run: node 'pad' (Pad) gives 't' the shape [1, -2], with a negative dimension "
        "(ONNX shape inference ended the process it ran in on node 'slice' (Slice), which reads it)")
    # a Relu of it in place of the Slice: inference goes on, and the shape is refused as the Pad's doing
    relu = _graph([helper.make_node("Pad", ["x", "pads"], ["t"], name="pad"), helper.make_node("Relu", ["t"], ["y"])],
                  [("x", [1, 4])], ["y"], inits[:1])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(relu, "relu")
    assert str(err.value) == "relu: the model cannot run: node 'pad' (Pad) gives 't' the shape [1, -2], with a " \
                             "negative dimension"
    computed = _graph([helper.make_node("Concat", ["six", "neg"], ["sizes"], name="concat", axis=0),
                       helper.make_node("Split", ["x", "sizes"], ["p0", "p1"], name="split", axis=1),
                       helper.make_node("Slice", ["p1", "s", "e", "a"], ["y"], name="slice")], [("x", [1, 4])], ["y"],
                      inits[1:])
    assert refusal_in_a_child(computed, "computed") == (
        "refused: computed: node 'split' (Split) splits axis 1 of tensor 'x', of shape [1, 4], into parts of sizes "
        "[6, -2], with a negative size; give part sizes of at least 0 that sum to 4")


def test_an_abort_of_shape_inference_names_the_node_it_ended_on(monkeypatch):
    """Where the shapes inferred before it say nothing wrong, the refusal names the node on which inference ended
    the process, found by inferring the model's first nodes (here a stand-in for onnx's inference, which aborts on
    every model holding the node 'boom'), and onnx's failed assertion."""
    from placement.io import onnx_child, onnx_shapes

    real = onnx_shapes.infer_shapes

    def aborting(model, onnx_module, strict):
        """onnx's inference, but the end of the process (as a child reports it) on a model holding node 'boom'."""
        if any(node.name == "boom" for node in model.graph.node):
            raise onnx_child.InferenceAborted("SIGABRT", "Assertion 'x' failed.")
        return real(model, onnx_module, strict)

    monkeypatch.setattr(onnx_shapes, "infer_shapes", aborting)
    model = _graph([helper.make_node("Relu", ["x"], ["h"], name="first"), helper.make_node("Relu", ["h"], ["k"]),
                    helper.make_node("Relu", ["k"], ["y"], name="boom")], [("x", [2, 3])], ["y"])
    with pytest.raises(InvalidInstanceError) as err:
        graph_from_onnx(model, "m")
    assert str(err.value) == ("m: ONNX shape inference failed on node 'boom' (Relu) and ended the process it ran in "
                              "(SIGABRT: Assertion 'x' failed.)")


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="inference runs in a child only where it can fork")
def test_inference_in_a_child_reports_how_it_ended(capfd):
    """onnx_child.infer_shapes hands back the inferred model, onnx's exception as InferenceFailed with its text, and
    a child ended by a signal as InferenceAborted naming the signal and the assertion the child wrote to standard
    error, which does not reach the caller's."""
    import os
    from types import SimpleNamespace

    from placement.io.onnx_child import InferenceAborted, InferenceFailed, infer_shapes

    def fake(infer):
        """A stand-in for the onnx module whose shape inference is ``infer``."""
        return SimpleNamespace(shape_inference=SimpleNamespace(infer_shapes=infer),
                               load_from_string=onnx.load_from_string)

    def assertion(*args, **kwargs):
        os.write(2, b"onnx/defs/x.cc:12: void f(): Assertion 'n >= 0' failed.\n")
        os.abort()

    def refusal(*args, **kwargs):
        raise ValueError("[ShapeInferenceError] bad\nsecond line")

    model = mlp_model("2")
    inferred = infer_shapes(model, onnx, strict=True)
    assert [d.dim_value for d in {v.name: v for v in inferred.graph.value_info}["H"].type.tensor_type.shape.dim] \
        == [2, 8]
    with pytest.raises(InferenceAborted) as aborted:
        infer_shapes(model, fake(assertion), strict=True)
    assert (aborted.value.signal, aborted.value.detail) == ("SIGABRT", "Assertion 'n >= 0' failed.")
    with pytest.raises(InferenceFailed) as failed:
        infer_shapes(model, fake(refusal), strict=False)
    assert str(failed.value) == "[ShapeInferenceError] bad\nsecond line"
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("refused", ["fork", "tempfile"])
def test_inference_runs_in_the_calling_process_where_no_child_can_be_had(monkeypatch, refused):
    """fork refused (EAGAIN past a limit on processes, a container's or RLIMIT_NPROC; ENOMEM), or no temporary file
    for the child's standard error: a valid model was refused ("ONNX shape inference failed: [Errno 11] Resource
    temporarily unavailable"), where inference in the calling process imports it, as it did before it ran in a
    child."""
    import errno
    import os
    import tempfile

    from placement.io import onnx_child

    expected = [(op.name, op.flops) for op in graph_from_onnx(mlp_model("2"), "m").ops]

    def fork():
        raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    def temporary_file(*args, **kwargs):
        raise FileNotFoundError(errno.ENOENT, "No usable temporary directory found")

    if refused == "fork":
        monkeypatch.setattr(onnx_child.os, "fork", fork)
    else:
        monkeypatch.setattr(tempfile, "TemporaryFile", temporary_file)
    assert [(op.name, op.flops) for op in graph_from_onnx(mlp_model("2"), "m").ops] == expected
    inferred = onnx_child.infer_shapes(mlp_model("2"), onnx, strict=True)
    assert [d.dim_value for d in {v.name: v for v in inferred.graph.value_info}["H"].type.tensor_type.shape.dim] \
        == [2, 8]


def _recurrent_model(op_type: str, directions: int = 1, layout: int = 0):
    """X [T=5, N=4, I=12] (batch first with layout 1) -> one LSTM, GRU or RNN layer of hidden size 16 ->
    Y; W [D, G·16, 12], R [D, G·16, 16], B [D, 2·G·16]."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op_type]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
             (("W", (directions, gates * 16, 12)), ("R", (directions, gates * 16, 16)),
              ("B", (directions, 2 * gates * 16)))]
    node = helper.make_node(op_type, ["X", "W", "R", "B"], ["Y"], name=f"/rnn/{op_type}", hidden_size=16,
                            direction="bidirectional" if directions == 2 else "forward", layout=layout)
    shape = [4, 5, 12] if layout else [5, 4, 12]
    graph = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# 2·T·N·G·H·(I + H) per direction (the torch importer's formula): T = 5, N = 4, H = 16, I = 12:
# LSTM 2·5·4·64·28 = 71,680, GRU (48 gates) 53,760, RNN (16) 17,920; two directions twice that.
@pytest.mark.parametrize("op_type, directions, layout, flops", [
    ("LSTM", 1, 0, 71_680.0), ("GRU", 1, 0, 53_760.0), ("RNN", 1, 0, 17_920.0), ("LSTM", 2, 0, 143_360.0),
    ("GRU", 1, 1, 53_760.0)])
def test_recurrent_layers_are_costed_as_their_gemms(op_type, directions, layout, flops):
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # no "no FLOP formula" warning
        graph = graph_from_onnx(_recurrent_model(op_type, directions, layout), "rnn")
    (op,) = graph.ops
    assert (op.kind, op.flops) == ("recurrent", flops)
    assert sum(2 * o.m * o.n * o.k * o.batch for o in op.operators) == flops
    # training, the model input needing no gradient: the weight gradients (the forward GEMMs' size) and
    # the state's through time, the recurrent GEMM over T - 1 = 4 steps, 2·4·N·G·H·H per direction
    from placement.io.opgraph import Gradient
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op_type]
    state = directions * 2 * 4 * 4 * gates * 16 * 16
    assert op.backward_flops(Gradient(inputs=0, weights=2)) == pytest.approx(flops + state)


def _relaid_lstm(extra_reader: bool = False, scaled: bool = False):
    """The LSTM of :func:`_recurrent_model` with its R written in PyTorch's gate order (i, f, g, o) as R_pt
    [64, 16] and laid out as ONNX's (i, o, f, c) the way exporters do: four Slices, a Concat and an
    Unsqueeze. ``extra_reader``: the Concat's result is also added to an input (a computation of the
    model's own); ``scaled``: R_pt is first multiplied by a trained g [64, 1] (as a weight norm does)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
             (("W", (1, 64, 12)), ("R_pt", (64, 16)), ("B", (1, 128)), ("g", (64, 1)))]
    inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), name) for name, v in
              (("zero", [0]), ("q1", [16]), ("q2", [32]), ("q3", [48]), ("q4", [64]))]
    cut = [("zero", "q1"), ("q1", "q2"), ("q2", "q3"), ("q3", "q4")]
    source = "R_g" if scaled else "R_pt"
    nodes = [helper.make_node("Mul", ["R_pt", "g"], ["R_g"], name="/own/Mul")] if scaled else []
    nodes += [helper.make_node("Slice", [source, a, b, "zero"], [f"g{k}"], name=f"/relayout/Slice_{k}")
              for k, (a, b) in enumerate(cut)]
    nodes += [helper.make_node("Concat", ["g0", "g3", "g1", "g2"], ["R2"], name="/relayout/Concat", axis=0),
              helper.make_node("Unsqueeze", ["R2", "zero"], ["R"], name="/relayout/Unsqueeze"),
              helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], name="/rnn/LSTM", hidden_size=16)]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 4, 12])]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)]
    if extra_reader:
        nodes.append(helper.make_node("Add", ["R2", "Z"], ["S"], name="/own/Add"))
        inputs.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, [64, 16]))
        outputs.append(helper.make_tensor_value_info("S", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "rnn", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_recurrent_weight_laid_out_by_the_exporter_is_the_parameter_itself():
    """PyTorch reads R_pt as it is; the export's Slices, Concat and Unsqueeze only reorder its gates for
    ONNX's LSTM. They were six operators (a kernel each, in training activations too), and an
    unoptimised LSTM export cost 4.6 times the torch import. Now the LSTM alone is the operator, with
    the FLOPs of the plain model (71,680) and R_pt's 4,096 bytes among its parameters. A result the
    model also computes with stays an operator: the re-layout then runs in every forward."""
    (lstm,) = graph_from_onnx(_relaid_lstm(), "relaid").ops
    (plain,) = graph_from_onnx(_recurrent_model("LSTM"), "rnn").ops
    assert (lstm.kind, lstm.flops) == ("recurrent", plain.flops) == ("recurrent", 71_680.0)
    assert [(p.name, p.nbytes, p.trainable) for p in lstm.params] == [("W", 3072.0, True), ("R_pt", 4096.0, True),
                                                                      ("B", 512.0, True)]
    assert sum(p.nbytes for p in lstm.params) == sum(p.nbytes for p in plain.params)
    own = graph_from_onnx(_relaid_lstm(extra_reader=True), "own")
    assert [op.name for op in own.ops][:4] == ["/relayout/Slice_0", "/relayout/Slice_1", "/relayout/Slice_2",
                                               "/relayout/Slice_3"]
    # a product of parameters (a weight norm's scale) is a kernel every forward: it and the re-layout of its
    # result stay operators (g's 256 bytes are the Mul's parameter, R_pt's too)
    scaled = graph_from_onnx(_relaid_lstm(scaled=True), "scaled")
    assert scaled.ops[0].name == "/own/Mul" and [p.name for p in scaled.ops[0].params] == ["R_pt", "g"]
    assert "/relayout/Concat" in [op.name for op in scaled.ops]


def test_an_einsum_of_two_operands_is_the_gemm_it_runs():
    """bi,ij->bj on X [4, 16] and W [16, 16]: one GEMM, 2·4·16·16 = 2,048 FLOPs; bi,bj->bij multiplies
    (numel of the output, 4·16·16 = 1,024); three operands, bi,ij,jk->bk, run bi,ij->bj then bj,jk->bk, two
    such GEMMs (they had no formula: costed 0, with a warning)."""
    def model(equation, extra):
        inits = [numpy_helper.from_array(np.ones((16, 16), dtype=np.float32), "W")]
        node = helper.make_node("Einsum", ["X", *extra], ["Y"], name="/e/Einsum", equation=equation)
        graph = helper.make_graph([node], "e", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 16])],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    (gemm,) = graph_from_onnx(model("bi,ij->bj", ["W"]), "e").ops
    assert (gemm.kind, gemm.flops) == ("matmul", 2048.0)
    (outer,) = graph_from_onnx(model("bi,bj->bij", ["X"]), "e").ops
    assert (outer.kind, outer.flops) == ("pointwise", 1024.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        (three,) = graph_from_onnx(model("bi,ij,jk->bk", ["W", "W"]), "e").ops
    assert (three.kind, three.flops) == ("matmul", 4096.0)


def test_deepspeed_layers_of_an_onnx_instance_say_which_modules_they_do_not_run(tmp_path):
    """The TorchScript exporter folds nn.Sequential(conv, bn, relu, conv, bn, relu)'s batch norms into their
    convolutions: no operator of modules 1 and 4 is left, and the DeepSpeed layers listed 0, 2, 3, 5 without
    a word, a PipelineModule of them a model without its normalisations. The split names the children it
    skips (an ONNX file does not say whether the model calls them) and says that an ONNX instance lists no
    folded normalisation."""
    import json

    weights = [numpy_helper.from_array(np.ones(shape, dtype=np.float32), name)
               for name, shape in (("w0", (4, 3, 3, 3)), ("b0", (4,)), ("w3", (4, 4, 3, 3)), ("b3", (4,)))]
    nodes = [helper.make_node("Conv", ["X", "w0", "b0"], ["A"], name="/0/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["A"], ["B"], name="/2/Relu"),
             helper.make_node("Conv", ["B", "w3", "b3"], ["C"], name="/3/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["C"], ["Y"], name="/5/Relu")]
    import placement
    from placement.cli import main

    path, instance = tmp_path / "folded.onnx", tmp_path / "folded.json"
    onnx.save(_graph(nodes, [("X", [2, 3, 8, 8])], ["Y"], weights), str(path))
    assert main(["import", str(path), "--out", str(instance), "--quiet"]) == 0
    ids = [n["id"] for n in json.loads(instance.read_text())["nodes"]]
    hand_off = placement.split(str(instance), {"devices": [{"type": "accelerator", "nodes": ids[:2]},
                                                           {"type": "accelerator", "nodes": ids[2:]}]},
                               format="deepspeed")
    assert hand_off.split == {"layers": ["0", "2", "3", "5"], "parts": [0, 2, 4]}
    skips = ("layers skips {}, which lies between {} and {} but of which the instance holds no operator (a batch "
             "normalisation folded into the convolution before it, an nn.Identity, a dropout in eval mode, or an "
             "entry the model's forward never calls: the instance does not record which): a PipelineModule of these "
             "layers does not run it; insert it where it belongs if the model runs it and it computes anything")
    assert hand_off.notes == (skips.format("1", "0", "2"), skips.format("4", "3", "5"),
                              "the instance was imported from ONNX, whose exporters fold a batch normalisation "
                              "into the convolution before it: layers lists no normalisation so folded, and a "
                              "PipelineModule of these layers must run each after its convolution")


def test_pipe_split_of_an_onnx_instance_is_refused_for_another_form(tmp_path, capsys):
    """pipe-split names the operators of a torch.export program; an instance imported from ONNX has
    ONNX nodes instead, which no program has: refused, naming a form that can hand the plan over."""
    import json

    from placement.cli import main

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model(), str(path))
    instance, plan = tmp_path / "mlp.json", tmp_path / "plan.json"
    assert main(["import", str(path), "--out", str(instance), "--quiet"]) == 0
    ids = [n["id"] for n in json.loads(instance.read_text())["nodes"]]
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": ids[:2]},
                                            {"type": "accelerator", "nodes": ids[2:]}]}))
    capsys.readouterr()
    assert main(["split", str(instance), str(plan), "--format", "pipe-split"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --format pipe-split cannot express this plan: the instance was imported from ONNX, so its operators are "
        "ONNX nodes, and pipe_split_module cuts the operators of a torch.export program")


def test_an_expand_s_sizes_computed_from_a_constant_of_shape_are_data():
    """The TorchScript exporter writes ``cls.expand(2, -1, 4)`` (a class token's) as ConstantOfShape, Mul,
    Equal and Where on constants that give the Expand its sizes: PyTorch runs no kernel for them, so only
    the Expand (a view) and the Concat are operators. A ConstantOfShape whose integers a kernel reads as
    data (the Add) stays one, as torch's ``full``."""
    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=np.int64)))

    cls = numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(1, 1, 4), "cls")
    nodes = [const("n", [3]), const("sizes", [2, -1, 4]), const("m1", -1),
             helper.make_node("ConstantOfShape", ["n"], ["ones"], name="/ConstantOfShape",
                              value=numpy_helper.from_array(np.array([1], dtype=np.int64))),
             helper.make_node("Mul", ["ones", "m1"], ["neg"], name="/Mul"),
             helper.make_node("Equal", ["sizes", "neg"], ["open"], name="/Equal"),
             helper.make_node("Where", ["open", "ones", "sizes"], ["shape"], name="/Where"),
             helper.make_node("Expand", ["cls", "shape"], ["tokens"], name="/Expand"),
             helper.make_node("Concat", ["tokens", "X"], ["Y"], name="/Concat", axis=1),
             helper.make_node("ConstantOfShape", ["n"], ["zeros"], name="/ConstantOfShape_1",
                              value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
             helper.make_node("Add", ["zeros", "I"], ["J"], name="/Add")]
    graph = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 5, 4]),
                                             helper.make_tensor_value_info("I", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("J", TensorProto.INT64, None)], [cls])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ops = graph_from_onnx(model, "cls").ops
    assert [(op.name, op.kind, op.flops) for op in ops] == [
        ("/Expand", "view", 0.0), ("/Concat", "copy", 0.0), ("/ConstantOfShape_1", "constant", 0.0),
        ("/Add", "pointwise", 3.0)]
    assert ops[1].bytes_moved == 2 * 4 * 4 + 2 * 5 * 4 * 4 + 2 * 6 * 4 * 4   # tokens, X read; Y written


def test_a_constant_of_shape_another_domain_s_operator_reads_stays_a_kernel():
    """A ``Reshape`` of another domain is no default ``Reshape``: it may read its second input as data, so
    the ConstantOfShape that feeds it is a kernel (torch's ``full``), as it is when an ``Add`` reads it."""
    nodes = [helper.make_node("Constant", [], ["n"], value=numpy_helper.from_array(np.array([2], dtype=np.int64))),
             helper.make_node("ConstantOfShape", ["n"], ["shape"], name="/ConstantOfShape",
                              value=numpy_helper.from_array(np.array([5], dtype=np.int64))),
             helper.make_node("Reshape", ["X", "shape"], ["Y"], name="/Reshape", domain="com.example")]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 5])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.warns(CostModelWarning, match="com.example::Reshape"):
        ops = graph_from_onnx(model, "custom").ops
    assert [(op.name, op.kind) for op in ops] == [("/ConstantOfShape", "constant"), ("/Reshape", "unknown")]


@pytest.mark.parametrize("value, trained", [(0.0, False), (0.5, True)], ids=["zeros", "trained"])
def test_the_zeros_a_recurrent_layer_starts_from_are_no_trained_parameter(value, trained):
    """The dynamo exporter's optimiser folds the zeros nn.LSTM starts from when given no state into an
    initializer, which two stacked layers read as their initial hidden and cell state. Like torch.export's
    zeros, it is no parameter: no gradient, not shared between the layers, held in no node's memory (the layers
    still read its 256 B). An initial state of other values (here ``value`` plus steps of 0.01, not all equal)
    is a parameter the model trains."""
    model = _recurrent_model("LSTM")
    graph = model.graph
    state = np.full((1, 4, 16), value, dtype=np.float32) + (np.arange(64, dtype=np.float32).reshape(1, 4, 16) / 100
                                                            if trained else 0)
    graph.initializer.append(numpy_helper.from_array(state, "state"))
    graph.node[0].input.extend(["", "state", "state"])
    graph.node.append(helper.make_node("Squeeze", ["Y", "axis"], ["Y2"], name="/rnn/Squeeze"))
    graph.node.append(helper.make_node("LSTM", ["Y2", "W2", "R", "B", "", "state", "state"], ["Z"],
                                       name="/rnn2/LSTM", hidden_size=16))
    graph.initializer.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "axis"))
    graph.initializer.append(numpy_helper.from_array(np.ones((1, 64, 16), dtype=np.float32), "W2"))
    graph.output[0].name = "Z"
    ops = graph_from_onnx(model, "rnn").ops
    state = [("state", 256.0, True)] if trained else []
    assert [[(p.name, p.nbytes, p.trainable) for p in op.params] for op in ops] == [
        [("W", 3072.0, True), ("R", 4096.0, True), ("B", 512.0, True), *state],
        [],   # the Squeeze's axis: a host value
        [("W2", 4096.0, True), ("R", 4096.0, True), ("B", 512.0, True), *state]]
    imported = build(group_ops(graph_from_onnx(model, "rnn"), "operator"), make_platform("h100", "epyc-7763", 4, 0),
                     training=True)
    assert imported.graph.param_bytes(0) == 3072 + 4096 + 512 + (256 if trained else 0)
    assert imported.instance["about"].get("shared_parameters") == ({"R": [0, 2], "B": [0, 2], "state": [0, 2]}
                                                                   if trained else {"R": [0, 2], "B": [0, 2]})


def test_a_parameter_of_equal_values_that_several_operators_read_is_not_counted_as_shared():
    """Exporters merge initializers of equal values into one name (two new LayerNorms' ones), so a parameter
    whose values are all equal read by several operators may be several modules' parameters: it is not
    recorded as shared (split would warn that the stages' copies drift apart). ``V``, of varied values, read by
    the last two MatMuls, is one parameter: shared."""
    rows = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
    nodes = [helper.make_node("MatMul", [a, w], [b], name=f"/m{k}/MatMul")
             for k, (a, w, b) in enumerate([("X", "W", "A"), ("A", "W", "B"), ("B", "V", "C"), ("C", "V", "Y")])]
    graph = helper.make_graph(nodes, "merged", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "W"),
                               numpy_helper.from_array(rows, "V")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    graph_of = graph_from_onnx(model, "merged")
    assert graph_of.merged == ("W",)
    imported = build(group_ops(graph_of, "operator"), make_platform("h100", "epyc-7763", 4, 0), training=True)
    assert imported.instance["about"]["shared_parameters"] == {"V": [2, 3]}
    # every reader still holds its copy of W
    assert [node["size"] for node in imported.instance["nodes"][:4]] == [64.0 + 32.0] * 4


def test_an_input_returned_through_identity_nodes_is_a_returned_input(tmp_path, capsys):
    """The TorchScript exporter writes ``return self.lin(x), x`` as a Gemm and an ``Identity`` of x that
    the graph returns. PyTorch runs no operator there: as the torch importer records it, the model returns
    x as given (``about.returned_inputs``), its only output node is the Gemm, and no form of ``split`` can
    hand the plan over. Here x reaches its output through two Identity nodes, and a third, read by the
    Relu, is x itself to that reader."""
    import json

    from placement.cli import main

    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="/lin/MatMul"),
                    helper.make_node("Identity", ["X"], ["A"], name="Identity_1"),
                    helper.make_node("Identity", ["A"], ["B"], name="Identity_2"),
                    helper.make_node("Identity", ["X"], ["C"], name="Identity_3"),
                    helper.make_node("Relu", ["C"], ["R"], name="/act/Relu")],
                   [("X", [3, 4])], ["Y", "B", "R"], [w])
    graph = graph_from_onnx(model, "m")
    assert [op.name for op in graph.ops] == ["/lin/MatMul", "/act/Relu"]
    assert [op.model_inputs for op in graph.ops] == [("X",), ("X",)]
    assert (graph.outputs, graph.returned_inputs) == ((0, 1), ("X",))
    path, instance, plan = tmp_path / "m.onnx", tmp_path / "m.json", tmp_path / "plan.json"
    onnx.save(model, str(path))
    assert main(["import", str(path), "--out", str(instance), "--quiet"]) == 0
    about = json.loads(instance.read_text())["about"]
    assert (about["outputs"], about["returned_inputs"]) == ([0, 1], ["X"])
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": [0, 1]}]}))
    capsys.readouterr()
    for form, runtime in (("split-spec", "torch's pipeline()"), ("deepspeed", "DeepSpeed's PipelineModule")):
        assert main(["split", str(instance), str(plan), "--format", form]) == 2
        assert capsys.readouterr().err.startswith(
            f"error: --format {form} cannot express this plan: the model returns its input 'X' as given, and "
            f"{runtime} returns what the last stage computes only (placement.torch.plan_pipeline relays it)")


def test_an_identity_that_writes_the_input_it_reads_returns_that_input():
    """torch's dynamo exporter writes ``return self.lin(x), x`` with ``Identity(x) -> x``, though ONNX has a
    tensor written once: the import refused it as a node writing a graph input. The node computes nothing:
    dropped, the model returns x as given; another node writing a graph input is still refused."""
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "W")
    model = _graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="/lin/MatMul"),
                    helper.make_node("Identity", ["X"], ["X"], name="node_Identity_0")],
                   [("X", [3, 4])], [], [w])
    model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("Y", [3, 2]),
                                                                                                 ("X", [3, 4])))
    graph = graph_from_onnx(model, "m")
    assert [op.name for op in graph.ops] == ["/lin/MatMul"]
    assert (graph.outputs, graph.returned_inputs) == ((0,), ("X",))
    model.graph.node[1].op_type = "Relu"
    with pytest.raises(InvalidInstanceError) as error:
        graph_from_onnx(model, "m")
    assert str(error.value) == ("m: node 'node_Identity_0' writes 'X', which a graph input or initializer already "
                                "holds (an ONNX tensor is written once)")


@pytest.mark.parametrize("declared, dims", [(None, None), (["batch", 4], {"batch": 3})])
def test_an_input_returned_as_given_keeps_its_shape_whatever_its_output_declares(declared, dims):
    """X (3×4) is returned as given beside Y = X·W; its graph output declares no shape, or the symbolic
    batch dimension that ``dims`` fixes on the input. That declaration overrode X's shape in ONNX's shape
    inference, and the MatMul had no shape to be costed by (3·4·5 multiply-adds: 120 FLOPs)."""
    shape = [3, 4] if dims is None else ["batch", 4]
    weight = numpy_helper.from_array(np.ones((4, 5), np.float32), "W")
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None if declared is None else ["batch", 5]),
               helper.make_tensor_value_info("X", TensorProto.FLOAT, declared)]
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)], outputs, [weight])
    imported = graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), dims=dims)
    assert [(op.name, op.flops) for op in imported.ops] == [("mm", 120.0)]
    assert imported.returned_inputs == ("X",)


@pytest.mark.parametrize("ir_version", [3, 8])
def test_a_returned_initializer_keeps_its_shape_whatever_its_output_declares(ir_version):
    """The graph returns its weight W (4×5) beside Y = X·W, the output W declaring no shape. That declaration
    overrode W's shape in ONNX's shape inference, and the MatMul reading W had no shape to be costed by
    (3·4·5 multiply-adds: 120 FLOPs)."""
    weight = numpy_helper.from_array(np.ones((4, 5), np.float32), "W")
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("W", TensorProto.FLOAT, None)]
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 4])], outputs, [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    imported = graph_from_onnx(model)
    assert [(op.name, op.flops, [(p.name, p.nbytes) for p in op.params]) for op in imported.ops] == [
        ("mm", 120.0, [("W", 80.0)])]


def test_a_slice_with_a_negative_step_is_torch_s_flip_a_copy():
    """Both exporters write ``torch.flip`` as a ``Slice`` of step -1 (steps an initializer or a ``Constant``);
    PyTorch cannot stride backwards, so its ``flip`` is a copy kernel, as the torch importer costs it. A
    ``Slice`` of positive steps (``x[:, ::2]``) is a strided view."""
    def sliced(step, constant):
        arrays = {name: np.array([value], dtype=np.int64)
                  for name, value in (("starts", -1 if step < 0 else 0), ("ends", -2**63 if step < 0 else 4),
                                      ("axes", 1), ("steps", step))}
        made = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))
                for name, array in arrays.items()] if constant else []
        model = _graph([*made, helper.make_node("Slice", ["X", *arrays], ["S"], name="/f/Slice"),
                        helper.make_node("Relu", ["S"], ["Y"], name="/r/Relu")], [("X", [2, 4])], ["Y"])
        if not constant:
            model.graph.initializer.extend(numpy_helper.from_array(array, name) for name, array in arrays.items())
        graph = graph_from_onnx(model, "flip")
        return [(op.kind, op.bytes_moved, op.kernels) for op in graph.ops if op.target != "Constant"]
    for constant in (False, True):
        # flip: reads 32 B (its four int64 arguments are host values), writes 32 B, one kernel; the Relu reads
        # and writes 32 B
        assert sliced(-1, constant) == [("copy", 64.0, 1), ("pointwise", 64.0, 1)]
        # every other column: a view (2 x 2 elements, 16 B, for the Relu to read and write)
        assert sliced(2, constant) == [("view", 0.0, 0), ("pointwise", 32.0, 1)]


def test_an_unread_node_without_a_scope_takes_that_of_what_it_reads():
    """The dynamo exporter writes ``return y, y`` as ``y`` and an ``Identity`` of it with no module scope,
    both graph outputs. Nothing reads the Identity, so it has no reader to take a scope from: it takes that
    of the node that writes what it reads, and joins that module's node, as in the torch import (it was a
    node of its own, ``(model)``, a stage the plan could hold alone)."""
    def scoped(node, scopes):
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(scopes))
        return node
    model = _graph([scoped(helper.make_node("Relu", ["X"], ["A"], name="node_relu"), ["", "a", "relu"]),
                    scoped(helper.make_node("Relu", ["A"], ["B"], name="node_relu_1"), ["", "b", "relu_1"]),
                    helper.make_node("Identity", ["B"], ["B_alias"], name="node_Identity_0")],
                   [("X", [2, 4])], ["B", "B_alias"])
    graph = graph_from_onnx(model, "twice")
    assert [op.module_path for op in graph.ops] == [("a",), ("b",), ("b",)]
    assert [(n.name, len(n.ops)) for n in group_ops(graph, "module").nodes] == [("a", 1), ("b", 2)]


@pytest.mark.parametrize("rules", ["FuseBatchNormIntoConv", "FuseBatchNormIntoConv, RemoveOptionalBiasFromConv",
                                   "RemoveOptionalBiasFromConv, FuseBatchNormIntoConv, RemoveOptionalBiasFromConv"])
def test_a_batch_norm_folded_into_a_conv_is_the_call_of_the_conv(rules):
    """The dynamo exporter folds ``bn(conv(x))`` into one Conv scoped to ``bn`` and records the rewrites that
    made it; for a convolution without bias (every torchvision CNN's) it lists two or three of them in one
    string, and the node was named ``bn``, so that a stage beginning there began after the conv in PyTorch."""
    weight = numpy_helper.from_array(np.ones((8, 3, 3, 3), dtype=np.float32), "conv.weight")
    bias = numpy_helper.from_array(np.ones(8, dtype=np.float32), "conv.weight_bias")
    conv = helper.make_node("Conv", ["X", "conv.weight", "conv.weight_bias"], ["C"], name="node_Conv_0")
    conv.metadata_props.add(key="pkg.torch.onnx.name_scopes",
                            value=repr(["", "bn", "_native_batch_norm_legit_no_training"]))
    conv.metadata_props.add(key="pkg.onnxscript.rewriter.rule_name", value=rules)
    relu = helper.make_node("Relu", ["C"], ["Y"], name="node_relu")
    relu.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", "relu"]))
    graph = graph_from_onnx(_graph([conv, relu], [("X", [2, 3, 16, 16])], ["Y"], [weight, bias]), "folded")
    assert [op.module_path for op in graph.ops] == [("conv",), ()]


def test_top_k_is_costed_as_torch_costs_sort_and_topk():
    """Both exporters write torch's sort, argsort and topk as TopK: X [8, 4], along axis 0 (n = 8) the
    comparisons of sorting its 4 rows, 32 · ⌈log2 8⌉ = 96 FLOPs, along the last axis 32 · 2 = 64, as the
    torch importer counts them; a reduction, not an operator without a formula."""
    k = numpy_helper.from_array(np.array([2], dtype=np.int64), "k")
    nodes = [helper.make_node("TopK", ["X", "k"], ["V", "I"], name="/rows/TopK", axis=0),
             helper.make_node("TopK", ["X", "k"], ["V1", "I1"], name="/cols/TopK")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = graph_from_onnx(_graph(nodes, [("X", [8, 4])], ["V", "V1"], [k]), "topk")
    assert [(op.target, op.kind, op.flops) for op in graph.ops] == [("TopK", "reduction", 96.0),
                                                                   ("TopK", "reduction", 64.0)]


def test_grid_sample_is_costed_as_torch_costs_grid_sample():
    """GridSample of X [1, 3, 8, 8] at a grid [1, 5, 6, 2] writes [1, 3, 5, 6]: one FLOP per output element,
    90, as the torch importer costs grid_sample (and Resize); it reads 768 + 240 B and writes 360 B."""
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], name="/warp/GridSample")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = graph_from_onnx(_graph([node], [("X", [1, 3, 8, 8]), ("G", [1, 5, 6, 2])], ["Y"]), "warp")
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("GridSample", "pointwise", 90.0, 1368.0)]


def test_col2im_is_costed_as_torch_costs_fold():
    """Col2Im (opset 18; the dynamo exporter writes torch's F.fold so) of X [2, 27, 16] into 4 × 4 images by
    3 × 3 blocks, padding 1, sums the blocks that overlap: one FLOP per input element, 864, a reduction, as
    the torch importer costs col2im. Reads X (3,456 B) and its two int64 shapes (16 B each), writes
    [2, 3, 4, 4]: 384 B."""
    shapes = [numpy_helper.from_array(np.array(size, dtype=np.int64), name) for name, size in (("image", [4, 4]),
                                                                                              ("block", [3, 3]))]
    node = helper.make_node("Col2Im", ["X", "image", "block"], ["Y"], name="/fold/Col2Im", pads=[1, 1, 1, 1])
    model = _graph([node], [("X", [2, 27, 16])], ["Y"], shapes)
    model.opset_import[0].version = 18
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = graph_from_onnx(model, "fold")
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("Col2Im", "reduction", 864.0, 3872.0)]


def test_max_unpool_is_a_copy_as_torch_costs_max_unpool():
    """MaxUnpool of X [1, 2, 2, 2] at its int64 indices by 2 × 2 writes each value at its index in zeros
    [1, 2, 4, 4]: a copy, 0 FLOPs, as the torch importer costs max_unpool2d; reads 32 + 64 B, writes 128 B."""
    where = numpy_helper.from_array(np.arange(8, dtype=np.int64).reshape(1, 2, 2, 2) * 2, "I")
    node = helper.make_node("MaxUnpool", ["X", "I"], ["Y"], name="/unpool/MaxUnpool", kernel_shape=[2, 2],
                            strides=[2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = graph_from_onnx(_graph([node], [("X", [1, 2, 2, 2])], ["Y"], [where]), "unpool")
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("MaxUnpool", "copy", 0.0, 224.0)]


def _if(condition, output, then_nodes, then_outputs, else_nodes, else_outputs, name):
    branches = {}
    for key, nodes, outputs in (("then_branch", then_nodes, then_outputs), ("else_branch", else_nodes, else_outputs)):
        branches[key] = helper.make_graph(nodes, key, [], [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                                           for n in outputs])
    return helper.make_node("If", [condition], output, name=name, **branches)


def _rank_test(name, x="X", rank=2):
    """Shape(x) -> Size -> Equal(rank): the condition the TorchScript exporter writes for ``x.dim() == rank``."""
    return [helper.make_node("Shape", [x], [f"{name}_shape"], name=f"/blk/{name}_Shape"),
            helper.make_node("Size", [f"{name}_shape"], [f"{name}_rank"], name=f"/blk/{name}_Size"),
            helper.make_node("Constant", [], [f"{name}_want"], name=f"/blk/{name}_Constant",
                             value=numpy_helper.from_array(np.array(rank, dtype=np.int64))),
            helper.make_node("Equal", [f"{name}_rank", f"{name}_want"], [name], name=f"/blk/{name}_Equal")]


def test_an_if_on_static_shapes_is_the_branch_it_takes():
    """An If whose condition the graph computes from a static shape (``x.dim() == 2``, true for X [2, 4]) runs
    its then branch: a Relu and a nested If (on the same condition) whose then branch negates X. Both are
    costed in the If's module, and the Add after them reads their results: Relu 8 FLOPs (2·4 elements),
    Neg 8, Add 8. Before, the If was an operator whose output had no static shape: an error. The second
    If takes its else branch (rank 3 is false), which returns X as given: the Mul reads X itself."""
    nested = _if("c", ["n"], [helper.make_node("Neg", ["X"], ["neg"], name="/blk/inner/Neg")], ["neg"],
                 [helper.make_node("Abs", ["X"], ["abs"], name="/blk/inner/Abs")], ["abs"], "/blk/inner/If")
    taken = _if("c", ["r", "m"], [helper.make_node("Relu", ["X"], ["relu"], name="/blk/sub/Relu"), nested],
                ["relu", "n"], [helper.make_node("Sigmoid", ["X"], ["sig"], name="/blk/Sigmoid")], ["sig", "sig"],
                "/blk/If")
    passed = _if("d", ["p"], [helper.make_node("Tanh", ["X"], ["tanh"], name="/other/Tanh")], ["tanh"], [], ["X"],
                 "/other/If")
    model = _graph([*_rank_test("c"), taken, helper.make_node("Add", ["r", "m"], ["Y"], name="/out/Add"),
                    *_rank_test("d", rank=3), passed, helper.make_node("Mul", ["p", "Y"], ["Z"], name="/out/Mul")],
                   [("X", [2, 4])], ["Z"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_onnx(model, "branches")
    assert [(op.name, op.kind, op.flops, op.module_path) for op in graph.ops] == [
        ("/blk/Relu", "pointwise", 8.0, ("blk",)),
        ("/blk/Neg", "pointwise", 8.0, ("blk",)),
        ("/out/Add", "pointwise", 8.0, ("out",)),
        ("/out/Mul", "pointwise", 8.0, ("out",))]
    assert [node.name for node in group_ops(graph, "module").nodes] == ["blk", "out"]


def test_an_if_on_values_the_model_computes_stays_an_if():
    """A condition read from the data (``x.sum() > 0``) is not known: the If stays an operator, costed by the
    bytes it moves, and named in the warning."""
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    branch = _if("c", ["r"], [helper.make_node("Relu", ["X"], ["relu"], name="/blk/Relu")], ["relu"],
                 [helper.make_node("Neg", ["X"], ["neg"], name="/blk/Neg")], ["neg"], "/blk/If")
    model = _graph([helper.make_node("ReduceSum", ["X"], ["s"], name="/blk/ReduceSum", keepdims=0),
                    helper.make_node("Greater", ["s", "zero"], ["c"], name="/blk/Greater"), branch,
                    helper.make_node("Add", ["r", "X"], ["Y"], name="/out/Add")], [("X", [2, 4])], ["Y"], [zero])
    with pytest.warns(CostModelWarning, match="no FLOP formula for 1 operator type.s., costed by bytes moved "
                                              "only: If; the work inside the subgraphs of If"):
        graph = graph_from_onnx(model, "data")
    assert [(op.name, op.kind) for op in graph.ops] == [
        ("/blk/ReduceSum", "reduction"), ("/blk/Greater", "pointwise"), ("/blk/If", "unknown"),
        ("/out/Add", "pointwise")]


def test_torchscript_local_response_norm_is_costed_as_without_its_if():
    """torch.onnx's TorchScript exporter writes nn.LocalResponseNorm at opset 11 and later with an If on the
    input's rank (at opset 9 without one); both now import to the same operators and FLOPs."""
    torch = pytest.importorskip("torch")
    import io

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.LocalResponseNorm(3), torch.nn.ReLU())
    graphs = []
    for opset in (9, 13):
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.randn(1, 3, 8, 8),), buffer, dynamo=False, opset_version=opset)
        exported = onnx.load_from_string(buffer.getvalue())
        assert ("If" in [node.op_type for node in exported.graph.node]) == (opset == 13)
        graphs.append(graph_from_onnx(exported, f"lrn{opset}"))
    old, new = graphs
    assert sum(op.flops for op in new.ops) == sum(op.flops for op in old.ops) > 0
    assert [n.name for n in group_ops(new, "module").nodes] == [n.name for n in group_ops(old, "module").nodes] == \
           ["0", "1", "2"]


def test_local_response_norm_and_quantization_have_flop_rules():
    """LRN is a normalisation, 5 per element: [1, 8, 2, 2] is 32 elements, 160 FLOPs. QuantizeLinear and
    DequantizeLinear are elementwise, 1 per element of their output: 32 each. None is left without a rule."""
    inits = [numpy_helper.from_array(np.array(0.1, dtype=np.float32), "scale"),
             numpy_helper.from_array(np.array(0, dtype=np.uint8), "zero")]
    model = _graph([helper.make_node("LRN", ["X"], ["n"], name="/norm/LRN", size=3),
                    helper.make_node("QuantizeLinear", ["n", "scale", "zero"], ["q"], name="/q/QuantizeLinear"),
                    helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["Y"], name="/dq/DequantizeLinear")],
                   [("X", [1, 8, 2, 2])], ["Y"], inits)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_onnx(model, "quantized")
    assert [(op.name, op.kind, op.flops) for op in graph.ops] == [
        ("/norm/LRN", "norm", 160.0), ("/q/QuantizeLinear", "pointwise", 32.0),
        ("/dq/DequantizeLinear", "pointwise", 32.0)]


def test_an_operator_on_integers_alone_takes_the_models_data_type():
    """An Add of int64 token ids and 1 (2 FLOPs) has no floating-point type: it takes the type of the model's
    first floating-point operator (bf16 after the override, fp32 without), not fp32 whatever the model, which
    a device with bf16 peaks alone refused."""
    one = numpy_helper.from_array(np.array([1, 1], dtype=np.int64), "one")
    table = numpy_helper.from_array(np.ones((3, 4), dtype=np.float32), "table")
    model = _graph([helper.make_node("Add", ["ids", "one"], ["p"], name="/pos/Add"),
                    helper.make_node("Gather", ["table", "p"], ["e"], name="/emb/Gather"),
                    helper.make_node("Add", ["X", "e"], ["Y"], name="/out/Add")],
                   [("X", [2, 4])], ["Y"], [one, table])
    model.graph.input.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [2]))
    graph = graph_from_onnx(model, "positions", dtype="bf16")
    assert [(op.name, op.dtype, op.flops) for op in graph.ops if op.flops] == [
        ("/pos/Add", "bf16", 2.0), ("/out/Add", "bf16", 8.0)]
    assert {op.dtype for op in graph_from_onnx(model, "positions").ops} == {"fp32"}


def test_operators_of_recent_opsets_have_their_kinds():
    """x [4, 6] float (96 B), b [4, 6] int32 (96 B), ids [4] int64. One FLOP per output element (24) for the
    inverse and hyperbolic trigonometric functions and the bitwise operators; Swish 5 per element as
    PyTorch's SiLU (120), SwiGLU a SiLU and a product, 6 (144); each reads its operand once and writes 96 B.
    BitCast is a view. OneHot of 4 indices at depth 5 writes [4, 5] floats (80 B) after reading the indices
    (32 B) and the two values (8 B; the depth is a size, no data): 120 B; ReverseSequence reads x and 4
    lengths (32 B) and writes 96 B (224 B); CenterCropPad to [3, 4] reads x and writes 48 B (144 B; the
    shape is a size): copies, 0 FLOPs. CumProd (its axis a size) and Hardmax are reductions, numel(input) =
    24 FLOPs, 192 B.
    At opset 24, RotaryEmbedding of q [1, 3, 8] is pointwise, two products and a sum per element: 72 FLOPs,
    reading q (96 B), both caches [16, 2] (128 B each) and the positions (24 B), writing 96 B; TensorScatter
    of 3 new positions into a cache [1, 2, 16, 4] is a copy: 512 + 96 read, 512 written."""
    nodes, inits = [], []
    for op in "Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Swish Hardmax".split():
        nodes.append(helper.make_node(op, ["x"], [f"{op}_y"], name=f"/{op}"))
    for op in "BitwiseAnd BitwiseOr BitwiseXor".split():
        nodes.append(helper.make_node(op, ["b", "b"], [f"{op}_y"], name=f"/{op}"))
    inits += [numpy_helper.from_array(np.array(5, np.int64), "depth"),
              numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "values"),
              numpy_helper.from_array(np.array([3, 1, 2, 2], np.int64), "lengths"),
              numpy_helper.from_array(np.array([3, 4], np.int64), "crop"),
              numpy_helper.from_array(np.array(1, np.int64), "axis")]
    nodes += [helper.make_node("BitwiseNot", ["b"], ["not_y"], name="/BitwiseNot"),
              helper.make_node("BitCast", ["x"], ["cast_y"], to=TensorProto.INT32, name="/BitCast"),
              helper.make_node("SwiGLU", ["x", "x"], ["glu_y"], name="/SwiGLU"),
              helper.make_node("OneHot", ["ids", "depth", "values"], ["hot_y"], name="/OneHot"),
              helper.make_node("ReverseSequence", ["x", "lengths"], ["rev_y"], batch_axis=0, time_axis=1,
                               name="/ReverseSequence"),
              helper.make_node("CenterCropPad", ["x", "crop"], ["crop_y"], name="/CenterCropPad"),
              helper.make_node("CumProd", ["x", "axis"], ["cumprod_y"], name="/CumProd")]
    graph = helper.make_graph(
        nodes, "ops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                       helper.make_tensor_value_info("b", TensorProto.INT32, [4, 6]),
                       helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for n in nodes for o in n.output], inits)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        ops = graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)]), "ops").ops
    unary = [(op, "pointwise", 24.0, 192.0) for op in "Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh".split()]
    bitwise = [(op, "pointwise", 24.0, 192.0) for op in "BitwiseAnd BitwiseOr BitwiseXor".split()]
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in ops] == unary + [
        ("Swish", "pointwise", 120.0, 192.0), ("Hardmax", "reduction", 24.0, 192.0)] + bitwise + [
        ("BitwiseNot", "pointwise", 24.0, 192.0), ("BitCast", "view", 0.0, 0.0),
        ("SwiGLU", "pointwise", 144.0, 192.0), ("OneHot", "copy", 0.0, 120.0),
        ("ReverseSequence", "copy", 0.0, 224.0), ("CenterCropPad", "copy", 0.0, 144.0),
        ("CumProd", "reduction", 24.0, 192.0)]

    cache = [helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["q_rot"], num_heads=2,
                              name="/RotaryEmbedding"),
             helper.make_node("TensorScatter", ["cache", "new"], ["present"], name="/TensorScatter")]
    inputs = [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in [
        ("q", TensorProto.FLOAT, [1, 3, 8]), ("cos", TensorProto.FLOAT, [16, 2]), ("sin", TensorProto.FLOAT, [16, 2]),
        ("pos", TensorProto.INT64, [1, 3]), ("cache", TensorProto.FLOAT, [1, 2, 16, 4]),
        ("new", TensorProto.FLOAT, [1, 2, 3, 4])]]
    graph = helper.make_graph(cache, "cache", inputs, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                                                       for o in ("q_rot", "present")])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        ops = graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]), "cache").ops
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in ops] == [
        ("RotaryEmbedding", "pointwise", 72.0, 472.0), ("TensorScatter", "copy", 0.0, 1120.0)]


def test_window_functions_are_constants_of_their_size():
    """HannWindow and BlackmanWindow of size 16 (an int64 scalar, read as a size) write 16 floats (64 B) each,
    0 FLOPs, as torch's hann_window: constants."""
    inits = [numpy_helper.from_array(np.array(16, np.int64), "n")]
    nodes = [helper.make_node(op, ["n"], [f"{op}_y"], name=f"/{op}") for op in ("HannWindow", "BlackmanWindow")]
    graph = helper.make_graph(nodes, "windows", [], [helper.make_tensor_value_info(f"{op}_y", TensorProto.FLOAT, [16])
                                                     for op in ("HannWindow", "BlackmanWindow")], inits)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        ops = graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "windows").ops
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in ops] == [
        ("HannWindow", "constant", 0.0, 64.0), ("BlackmanWindow", "constant", 0.0, 64.0)]


def test_a_plan_of_an_onnx_instance_no_form_holds_points_to_the_stage_table(tmp_path):
    """A plan that cuts the MLP's module 'enc' before its own Reshape: no hand-off form expresses it, and
    the refusal pointed to placement.torch.plan_pipeline, which needs the nn.Module an ONNX file's
    user may not have; it names format='stages' first, and an import of the PyTorch model where there is one."""
    import json

    import placement
    from placement.cli import main

    path, instance = tmp_path / "mlp.onnx", tmp_path / "mlp.json"
    onnx.save(mlp_model(), str(path))
    assert main(["import", str(path), "--out", str(instance), "--granularity", "operator", "--quiet"]) == 0
    ids = [n["id"] for n in json.loads(instance.read_text())["nodes"]]
    plan = {"devices": [{"type": "accelerator", "nodes": ids[:2]}, {"type": "accelerator", "nodes": ids[2:]}]}
    with pytest.raises(placement.InvalidParameterError) as info:
        placement.split(str(instance), plan)
    assert str(info.value).endswith(
        "no hand-off format can (no runtime form holds it: format='stages' lists the plan's nodes per stage; an "
        "import of the PyTorch model, where there is one, plans with placement.torch.plan_pipeline, which runs a "
        "model cut at stages of any shape: docs/pytorch.md)")
    assert len(placement.split(str(instance), plan, format="stages").split) == 2


@pytest.mark.parametrize("stored, trained", [("initializer", False), ("Constant", False), ("varied", True)])
def test_a_fill_that_a_select_reads_is_no_trained_parameter(stored, trained):
    """``torch.where(y > 0, y, torch.zeros_like(y))``: the dynamo exporter folds the zeros into an initializer
    (``zeros_like``), the TorchScript exporter into a ``Constant``. A tensor of one value that ``Where`` reads as a
    value to select, and ``Max`` as an operand, is a constant of the program (torch.export's ``zeros_like`` is an
    operator, no parameter): read (64 B), but no parameter, held in no memory. The bias of zeros that the ``Gemm``
    and the ``Add`` read as a learned term stays a trained parameter, and so does a selected tensor of varied
    values."""
    fill = np.zeros((4, 4), dtype=np.float32) + (np.arange(16, dtype=np.float32).reshape(4, 4) if trained else 0)
    inits = [numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "W"),
             numpy_helper.from_array(np.zeros(4, dtype=np.float32), "B"),
             numpy_helper.from_array(np.zeros(4, dtype=np.float32), "P"),
             numpy_helper.from_array(np.array(0.0, dtype=np.float32), "s")]
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["Y"], name="/l/Gemm", transB=1),
             helper.make_node("Greater", ["Y", "s"], ["G"], name="/Greater"),
             helper.make_node("Where", ["G", "Y", "Z"], ["O"], name="/Where"),
             helper.make_node("Max", ["O", "Z"], ["M"], name="/Max"),
             helper.make_node("Add", ["M", "P"], ["A"], name="/Add")]
    if stored == "Constant":
        nodes.insert(0, helper.make_node("Constant", [], ["Z"], name="/Constant",
                                         value=numpy_helper.from_array(fill, "Z")))
    else:
        inits.append(numpy_helper.from_array(fill, "Z"))
    graph = helper.make_graph(nodes, "select", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, [4, 4])], inits)
    ops = graph_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "select").ops
    fills = [("Z", 64.0, True)] if trained else []
    assert [(op.name, op.bytes_moved, [(p.name, p.nbytes, p.trainable) for p in op.params]) for op in ops] == [
        ("/l/Gemm", 208.0, [("W", 64.0, True), ("B", 16.0, True)]),
        ("/Greater", 80.0, []),                  # reads Y 64 B, writes 16 B; the scalar s is a number
        ("/Where", 208.0, fills),                # reads G 16 B, Y 64 B and Z 64 B, writes 64 B
        ("/Max", 192.0, fills),
        ("/Add", 144.0, [("P", 16.0, True)])]
