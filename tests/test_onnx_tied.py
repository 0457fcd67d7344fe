"""Tied weights in ONNX exports (placement.io.onnx_tied): a weight and its transposed copy are one
parameter, found by value; look-alike initializers that are distinct parameters stay apart."""

from __future__ import annotations

import warnings

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import numpy as np  # noqa: E402

from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.io.onnx_import import graph_from_onnx, import_onnx  # noqa: E402
from placement.io.onnx_tied import transposed_copies  # noqa: E402


def tied_lm(table: np.ndarray, projection: np.ndarray):
    """ids[2] -> Gather(E[6,4]) -> MatMul(P[4,6]) -> logits[2,6], all in module ``lm``: the embedding
    table E and the output projection P, which is E's transpose when the two are tied."""
    inits = [numpy_helper.from_array(table, "E"), numpy_helper.from_array(projection, "P")]
    nodes = [helper.make_node("Gather", ["E", "ids"], ["h"], name="/lm/Gather"),
             helper.make_node("MatMul", ["h", "P"], ["logits"], name="/lm/MatMul")]
    graph = helper.make_graph(nodes, "lm", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def params(model, **kwargs) -> list[list[tuple[str, float]]]:
    return [[(p.name, p.nbytes) for p in op.params] for op in graph_from_onnx(model, "lm", **kwargs).ops]


E = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)


def test_a_transposed_copy_is_the_same_parameter():
    # E is 6 x 4 fp32 = 96 B; P = Eᵀ is read as E: one parameter of 96 B, read by both operators
    assert params(tied_lm(E, np.ascontiguousarray(E.T))) == [[("E", 96.0)], [("E", 96.0)]]


def test_distinct_parameters_stay_apart():
    other = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    assert params(tied_lm(E, other)) == [[("E", 96.0)], [("P", 96.0)]]
    # one element off: not a copy
    near = np.ascontiguousarray(E.T)
    near[2, 3] += 1.0
    assert params(tied_lm(E, near)) == [[("E", 96.0)], [("P", 96.0)]]


def test_constant_look_alikes_stay_apart():
    """Zeros [6,4] and zeros [4,6] equal each other's transpose, but two parameters initialised to
    zero are two parameters."""
    zeros = np.zeros((6, 4), dtype=np.float32)
    assert params(tied_lm(zeros, zeros.T.copy())) == [[("E", 96.0)], [("P", 96.0)]]


def test_square_matrices_stay_apart():
    eye = np.eye(4, dtype=np.float32)
    spread = np.arange(16, dtype=np.float32).reshape(4, 4)
    model = tied_lm(E, np.ascontiguousarray(E.T))
    model.graph.initializer.extend([numpy_helper.from_array(spread, "S"),
                                    numpy_helper.from_array(spread.T.copy(), "ST"),
                                    numpy_helper.from_array(eye, "I")])
    assert transposed_copies(model.graph) == {"P": "E"}


def test_the_instance_counts_a_tied_weight_once(tmp_path):
    """At module granularity both operators are node ``lm``, whose size is the parameters it reads:
    96 B, not 192 B (E and its copy)."""
    path = tmp_path / "lm.onnx"
    onnx.save(tied_lm(E, np.ascontiguousarray(E.T)), str(path))
    imported = import_onnx(path, platform=make_platform(), granularity="module")
    assert [(n["name"], n["size"]) for n in imported.instance["nodes"]] == [("lm", 96.0)]


def test_weights_stored_outside_the_file(tmp_path):
    """Read from the model's folder to compare; without the weight file the import still works and the
    copies stay apart."""
    model = tied_lm(E, np.ascontiguousarray(E.T))
    path = tmp_path / "lm.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="lm.data",
              size_threshold=0)
    kept = onnx.load(str(path), load_external_data=False)
    assert all(init.data_location == TensorProto.EXTERNAL for init in kept.graph.initializer)
    assert params(kept, folder=tmp_path) == [[("E", 96.0)], [("E", 96.0)]]
    (tmp_path / "lm.data").unlink()
    assert params(kept, folder=tmp_path) == [[("E", 96.0)], [("P", 96.0)]]
    imported = import_onnx(path, platform=make_platform(), granularity="module")
    assert [(n["name"], n["size"]) for n in imported.instance["nodes"]] == [("lm", 192.0)]


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_tied_language_model_exported_by_torch(tmp_path, dynamo):
    """An embedding tied to the output projection, both in module ``body``: torch.export reads one
    parameter, emb.weight (32 x 16 fp32 = 2,048 B), and the exporters write a transposed copy of it.
    The node ``body`` holds emb.weight 2,048 B and lin (16 x 16 + 16) x 4 = 1,088 B: 3,136 B, as
    imported from the module itself."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    from torch import nn

    from placement.io.torch_export import import_torch

    class Body(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.lin, self.head = nn.Embedding(32, 16), nn.Linear(16, 16), nn.Linear(16, 32, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            return self.head(torch.relu(self.lin(self.emb(ids))))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = Body()

        def forward(self, ids):
            return self.body(ids)

    torch.manual_seed(0)
    model, ids = Model().eval(), torch.randint(0, 32, (4, 8))
    path = tmp_path / "tied.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), str(path), dynamo=dynamo)
    platform = make_platform()
    from_onnx = import_onnx(path, platform=platform, granularity="module", module_depth=1)
    from_torch = import_torch(model, (ids,), platform=platform, granularity="module", module_depth=1)
    assert [(n["name"], n["size"]) for n in from_onnx.instance["nodes"]] == [("body", 3136.0)]
    assert [(n["name"], n["size"]) for n in from_torch.instance["nodes"]] == [("body", 3136.0)]
