"""The torch.export importer: operators, FLOPs, bytes, parameters, modules, training nodes.

Every expected value is derived by hand in the comments from the formulas of
placement.io.torch_export and placement.io.opgraph (fp32: 4 bytes per element).
"""

from __future__ import annotations

import inspect
import json
import re
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from placement.costmodel.roofline import bundled_catalogue, make_platform, roofline_ms  # noqa: E402
from placement.errors import InvalidParameterError  # noqa: E402
from placement.io.op_grouping import group_ops  # noqa: E402
from placement.io.opgraph import CostModelWarning, node_time_ms  # noqa: E402
from placement.io.torch_export import graph_from_program, import_module, import_torch  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (torch.randn(3, 4),)


class Block(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(h)
        self.ff = nn.Linear(h, h)

    def forward(self, x):
        return x + F.gelu(self.ff(self.ln(x)))


def test_mlp_operators_flops_bytes_and_parameters_by_hand():
    graph = import_module(*mlp())
    # x is 3x4. linear(4->8): 2*3*4*8 = 192 FLOPs; reads x (48 B), W (128 B), b (32 B), writes 3x8 (96 B): 304 B.
    # relu: 24 FLOPs (one per element); reads and writes 96 B: 192 B.
    # linear(8->2): 2*3*8*2 = 96 FLOPs; reads 96 + 64 + 8 B, writes 24 B: 192 B.
    assert [(op.name, op.kind, op.flops, op.bytes_moved, op.outputs) for op in graph.ops] == [
        ("linear", "matmul", 192.0, 304.0, (96.0,)),
        ("relu", "pointwise", 24.0, 192.0, (96.0,)),
        ("linear_1", "matmul", 96.0, 192.0, (24.0,)),
    ]
    assert graph.total_flops == 312.0
    assert [op.inputs for op in graph.ops] == [(), ((0, 0),), ((1, 0),)]
    assert [[(p.name, p.nbytes, p.trainable) for p in op.params] for op in graph.ops] == [
        [("0.weight", 128.0, True), ("0.bias", 32.0, True)], [], [("2.weight", 64.0, True), ("2.bias", 8.0, True)]]
    assert [op.module_path for op in graph.ops] == [("0",), ("1",), ("2",)]
    assert graph.unknown == ()


def test_small_cnn_node_count_and_total_flops_by_hand():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10))
    graph = import_module(model, (torch.randn(2, 3, 8, 8),))
    # conv: output 2x8x8x8 = 1024 elements, weight 8x3x3x3 = 216 = 8 * 27: 2 * 1024 * 27 = 55,296
    # relu: 1024; max pool: one per input element, 1024; flatten: a view, 0; linear(128->10): 2*2*128*10 = 5,120
    assert [(op.target, op.kind, op.flops) for op in graph.ops] == [
        ("aten::conv2d", "conv", 55296.0), ("aten::relu", "pointwise", 1024.0),
        ("aten::max_pool2d", "pool", 1024.0), ("aten::flatten.using_ints", "view", 0.0),
        ("aten::linear", "matmul", 5120.0)]
    assert graph.total_flops == 55296 + 1024 + 1024 + 5120
    assert graph.ops[3].bytes_moved == 0.0  # views move nothing
    pg = group_ops(graph, "operator")
    assert len(pg.nodes) == 5 and len(pg.edges) == 4


def test_matmul_and_attention_flops_agree_with_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    from tests.test_torch_pipelining import TinyTransformer

    torch.manual_seed(0)
    model = TinyTransformer()
    tokens = torch.randint(0, 50, (2, 8))
    graph = import_module(model, (tokens,))
    with FlopCounterMode(display=False) as counter:
        model(tokens)
    # FlopCounterMode counts the matmuls (on CPU it has no rule for the fused attention kernel,
    # whose count torch gives by sdpa_flop_count: q, k, v are 2x4x8x8 here).
    matmuls = sum(op.flops for op in graph.ops if op.kind == "matmul")
    assert matmuls == counter.get_total_flops()
    attention = [op.flops for op in graph.ops if op.kind == "attention"]
    assert attention == [sdpa_flop_count((2, 4, 8, 8), (2, 4, 8, 8), (2, 4, 8, 8))] * 4
    counted = matmuls + sum(attention)
    # and by hand: per block qkv 2*16*32*96, proj 2*16*32*32, up and down 2*16*32*128 each,
    # attention 2*(2*4*8)*8*(8+8); head 2*16*32*50
    per_block = 2 * 16 * 32 * 96 + 2 * 16 * 32 * 32 + 2 * (2 * 16 * 32 * 128) + 2 * 64 * 8 * 16
    assert counted == 4 * per_block + 2 * 16 * 32 * 50


def test_module_granularity_runs_names_and_split_starts():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Block(8), nn.Linear(8, 2))
    graph = import_module(model, (torch.randn(3, 4),))
    leaf = group_ops(graph, "module")
    # Block's own operators (gelu, add) run after its children: a run keyed "1".
    assert [(n.name, len(n.ops), n.starts) for n in leaf.nodes] == [
        ("0", 1, ("0",)), ("1.ln", 1, ("1", "1.ln")), ("1.ff", 1, ("1.ff",)), ("1", 2, ()), ("2", 1, ("2",))]
    # "1" and "1.ln" both begin at the layer norm; the outer one comes first
    # The output of "0" (96 B) feeds the layer norm and the residual add: one tensor on two edges, counted
    # once in out_bytes. gelu+add read 1.ff's output (96 B) and write 96 B for node "2".
    assert leaf.edges == ((0, 1, 96.0), (0, 3, 96.0), (1, 2, 96.0), (2, 3, 96.0), (3, 4, 96.0))
    assert leaf.out_bytes == (96.0, 96.0, 96.0, 96.0, 0.0)
    top = group_ops(graph, "module", module_depth=1)
    assert [(n.name, n.starts) for n in top.nodes] == [("0", ("0",)), ("1", ("1", "1.ln")), ("2", ("2",))]
    assert top.edges == ((0, 1, 96.0), (1, 2, 96.0))
    # Block's parameters: layer norm 2*8*4 B, linear (8*8+8)*4 B
    assert top.param_bytes(1) == 64 + 288


def test_a_module_called_twice_is_no_split_point():
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            return self.b(self.a(self.a(x)))

    graph = import_module(Twice(), (torch.randn(2, 4),))
    pg = group_ops(graph, "operator")
    assert [n.starts for n in pg.nodes] == [(), (), ("b",)]
    # the two calls of "a" are one run at module granularity; the weight is counted once
    module = group_ops(graph, "module")
    assert [(n.name, len(n.ops)) for n in module.nodes] == [("a", 2), ("b", 1)]
    assert module.param_bytes(0) == (16 + 4) * 4


def test_training_instance_backward_nodes_edges_memory_and_costs():
    platform = make_platform("h100", "epyc-7763", 2, 1)
    imported = import_torch(*mlp(), platform=platform, training=True, granularity="operator")
    data = imported.instance
    nodes = {n["id"]: n for n in data["nodes"]}
    assert len(nodes) == 6 and [nodes[v]["isBackwardNode"] for v in range(6)] == [False] * 3 + [True] * 3
    # backward work: the first linear x1 (its weight gradient: the model's input needs no gradient),
    # relu x1, the second linear x2 (input and weight gradients)
    assert [nodes[v]["flops"] for v in range(3, 6)] == [192.0, 24.0, 2 * 96.0]
    assert [nodes[v]["bytes"] for v in range(3, 6)] == [304.0, 192.0, 2 * 192.0]
    assert [nodes[v]["colorClass"] for v in range(6)] == [0, 1, 2, 0, 1, 2]
    assert [nodes[v]["forward"] for v in range(3, 6)] == [0, 1, 2]
    # memory: forward = parameters + saved output, backward = trained parameters
    assert [nodes[v]["size"] for v in range(6)] == [160 + 96, 96, 72 + 24, 160, 0, 72]
    edges = sorted((e["sourceId"], e["destId"], e["size"]) for e in data["edges"])
    assert edges == [(0, 1, 96), (0, 3, 96), (1, 2, 96), (1, 4, 96), (2, 5, 24), (4, 3, 96), (5, 4, 96)]
    # costs: bytes over PCIe Gen5 (64 GB/s per direction), in ms, on the binary time grid
    q = data["about"]["time_quantum_ms"]
    cost = {e["sourceId"]: e["cost"] for e in data["edges"]}
    for v, nbytes in ((0, 96), (1, 96), (2, 0), (4, 96), (5, 96)):
        assert abs(cost[v] - 1e3 * nbytes / 64e9) <= q / 2
    # times: each node's roofline sum plus the H100's 5 µs per kernel (one forward; backward one per
    # gradient GEMM: the first linear's weight gradient alone); backward from the scaled work
    h100 = bundled_catalogue()["h100"]
    assert abs(nodes[0]["fpgaLatency"] - 1e3 * (max(192 / 67e12, 304 / 3.35e12) + 5e-6)) <= q / 2
    assert abs(nodes[0]["fpgaLatency"] - roofline_ms(192, 304, h100, "fp32", 1)) <= q / 2
    assert abs(nodes[3]["fpgaLatency"] - 1e3 * (max(192 / 67e12, 304 / 3.35e12) + 5e-6)) <= q / 2
    assert abs(nodes[5]["cpuLatency"] - node_time_ms(imported.graph, 2, platform.cpu, backward=True)) <= q / 2
    problem = imported.problem
    assert problem.is_training and problem.name == "Sequential-training"


def test_times_lie_on_the_binary_quantum():
    imported = import_torch(*mlp(), platform=make_platform("h100", "epyc-7763", 2, 1), training=True)
    q = imported.instance["about"]["time_quantum_ms"]
    assert q == 2.0 ** round(__import__("math").log2(q))
    for node in imported.instance["nodes"]:
        for key in ("cpuLatency", "fpgaLatency"):
            assert (node[key] / q).is_integer()


def test_dtype_override_scales_bytes_and_picks_the_peak():
    graph = import_module(*mlp(), dtype="bf16")
    # bf16 halves every floating-point tensor: linear reads 24 + 64 + 16 B and writes 48 B
    assert [(op.dtype, op.bytes_moved) for op in graph.ops] == [("bf16", 152.0), ("bf16", 96.0), ("bf16", 96.0)]
    pg = group_ops(graph, "operator")
    with pytest.raises(InvalidParameterError, match="^dtype must be one of the data types with a peak FLOP/s on "
                                                    "device 'v100' .*, not 'bf16'$"):
        node_time_ms(pg, 0, bundled_catalogue()["v100"])
    with pytest.raises(InvalidParameterError, match="^dtype must be one of 'fp64', 'fp32', 'tf32', 'fp16', 'bf16', "
                                                    "'fp8' or None, not 'fp12'$"):
        import_module(*mlp(), dtype="fp12")


class _Positions(nn.Module):
    """An embedding of token ids plus one of their positions, ``arange(T) + 1``: an operator on integers alone."""

    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(10, 4), nn.Embedding(9, 4)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]) + 1)


def test_an_operator_on_integers_alone_takes_the_models_data_type(tmp_path):
    """``arange(T) + 1`` is an add of int64s (2 FLOPs for T = 2) with no floating-point type: it was timed at the
    fp32 peak, and on an accelerator with bf16 peaks alone a bf16 import of the model was refused, its message
    naming the dtype the import was given ('not fp32'). It takes the type of the model's first floating-point
    operator now: bf16 here, fp32 without the override."""
    import json

    ids = torch.tensor([[1, 2], [3, 4]])
    ops = import_module(_Positions(), (ids,), dtype="bf16").ops
    assert [(op.target, op.dtype) for op in ops if op.flops and not op.floating[0]] == [("aten::add.Tensor", "bf16")]
    assert {op.dtype for op in import_module(_Positions(), (ids,)).ops} == {"fp32"}
    device = {"model": "an accelerator of bf16 alone", "kind": "accelerator", "peak_flops": {"bf16": 1e15},
              "memory_bandwidth": 3e12, "memory": 8e10, "links": {"link": 1e11}, "default_link": "link"}
    catalogue = tmp_path / "bf16.json"
    catalogue.write_text(json.dumps({"devices": {"bf16-only": device}}))
    platform = make_platform("bf16-only", accelerators=2, cpus=0, catalogues=[catalogue])
    imported = import_torch(_Positions(), (ids,), platform=platform, dtype="bf16")
    assert imported.instance["maxFPGAs"] == 2 and len(imported.instance["nodes"]) > 0


def test_the_instance_records_the_data_types_its_times_use():
    """The times of an instance imported with dtype="bf16" are bf16 roofline times: ``about`` says so, as the
    instance of the model's own fp32 says fp32 (both recorded the same ``about`` before)."""
    model, args = mlp()
    platform = make_platform("h100", accelerators=2, cpus=0)
    assert import_torch(model, args, platform=platform, dtype="bf16").instance["about"]["dtypes"] == ["bf16"]
    assert import_torch(model, args, platform=platform).instance["about"]["dtypes"] == ["fp32"]
    half = import_torch(model.to(torch.float16), (args[0].half(),), platform=platform)
    assert half.instance["about"]["dtypes"] == ["fp16"]


def test_a_data_type_only_the_unused_device_type_lacks_is_no_reason_to_refuse():
    """fp8 on H100s with no CPU: the EPYC has no fp8 peak, but the platform has none of it, so the
    instance is costed (the CPU times at the EPYC's largest peak, never used); with a CPU in the
    platform the data type is refused, naming the CPU."""
    model, args = mlp()
    h100 = bundled_catalogue()["h100"]
    imported = import_torch(model, args, platform=make_platform("h100", accelerators=2, cpus=0), dtype="fp8")
    assert imported.instance["maxCPUs"] == 0
    # the first operator on the H100: its time is the fp8 roofline of its FLOPs and bytes
    first = imported.instance["nodes"][0]
    assert first["fpgaLatency"] > 0 and dict(h100.peak_flops)["fp8"] > dict(h100.peak_flops)["bf16"]
    with pytest.raises(InvalidParameterError, match="^dtype must be one of the data types with a peak FLOP/s on "
                                                    "device 'epyc-7763' .*, not 'fp8'$"):
        import_torch(model, args, platform=make_platform("h100", accelerators=2, cpus=1), dtype="fp8")


@torch.library.custom_op("placement_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


def test_an_unknown_operator_is_costed_by_bytes_and_named_in_a_warning():
    class WithMystery(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 8)
            self.b = nn.Linear(8, 2)

        def forward(self, x):
            return self.b(mystery(self.a(x)))

    torch.manual_seed(0)
    with pytest.warns(CostModelWarning) as record:
        graph = import_module(WithMystery(), (torch.randn(3, 4),))
    assert len(record) == 1
    assert str(record[0].message) == ("WithMystery: no FLOP formula for 1 operator type(s), costed by bytes moved "
                                      "only: placement_test::mystery")
    op = graph.ops[1]
    # kept, with its data flow: reads the 3x8 output of a (96 B) and writes 96 B
    assert (op.kind, op.flops, op.bytes_moved, op.inputs) == ("unknown", 0.0, 192.0, ((0, 0),))
    assert graph.ops[2].inputs == ((1, 0),) and graph.unknown == ("placement_test::mystery",)
    h100 = bundled_catalogue()["h100"]
    # 192 B at 3.35 TB/s plus one kernel's 5 µs
    assert node_time_ms(group_ops(graph, "operator"), 1, h100) == 1e3 * (192 / 3.35e12 + 5e-6)


def test_export_failures_and_bad_arguments_are_one_line_errors():
    with pytest.raises(InvalidParameterError, match="^model must be a torch.nn.Module, not function$"):
        import_module(lambda x: x, (torch.randn(2),))

    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("no forward here\nsecond line")

    with pytest.raises(InvalidParameterError) as err:
        import_module(Broken(), (torch.randn(2),))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("model Broken cannot be exported: torch.export raised ")
    # the export's TypeError blamed the model ('model Broken cannot be exported: torch.export raised TypeError:
    # keywords must be strings'), where the example inputs were at fault
    linear = nn.Linear(2, 2)
    with pytest.raises(InvalidParameterError) as err:
        import_module(linear, (torch.randn(2),), {("x",): torch.randn(2)})
    assert str(err.value) == ("kwargs must map the names of forward's keyword parameters to inputs, but holds the "
                              "key ('x',) (tuple)")
    with pytest.raises(InvalidParameterError) as err:
        import_module(linear, (torch.randn(2),), {"mask": torch.randn(2), "scale": 2.0})
    assert str(err.value) == ("kwargs holds the keywords 'mask', 'scale', which Linear.forward does not take (its "
                              "keyword parameters: 'input')")
    with pytest.raises(InvalidParameterError) as err:
        import_module(linear, (torch.randn(2), torch.randn(2)))
    assert str(err.value) == "args holds 2 positional inputs, but Linear.forward takes at most 1"
    with pytest.raises(InvalidParameterError, match="^granularity must be one of 'operator', 'module', "
                                                    "not 'layer'$"):
        group_ops(import_module(*mlp()), "layer")
    with pytest.raises(InvalidParameterError, match="^module_depth applies to granularity='module' only, "
                                                    "not 'operator'$"):
        group_ops(import_module(*mlp()), "operator", module_depth=1)


class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x, mask, *, scale):
        return self.layer(x) * mask * scale


@pytest.mark.parametrize("args, kwargs, parameter, message", [
    ((), None, "args", "args gives Linear.forward no value for its required parameter 'input', nor does kwargs"),
    (("x",), {"input": "x"}, "kwargs", "kwargs holds 'input', which args gives Linear.forward already (positional "
                                       "input 0)"),
])
def test_inputs_that_forward_cannot_bind_are_refused_about_args_or_kwargs(args, kwargs, parameter, message):
    """An input given twice, or a required one given not at all, was blamed on the model ('model Linear cannot be
    exported: torch.export raised TypeError: multiple values for argument 'input''); import_torch and
    plan_pipeline name the example input at fault, before the export."""
    from placement.torch import plan_pipeline

    x = torch.randn(3, 4)
    args = tuple(x for _ in args)
    kwargs = None if kwargs is None else {key: x for key in kwargs}
    with pytest.raises(InvalidParameterError) as imported:
        import_torch(nn.Linear(4, 4), args, kwargs, platform=make_platform("h100", "epyc-7763", 2, 0))
    with pytest.raises(InvalidParameterError) as planned:
        plan_pipeline(nn.Linear(4, 4), args, kwargs, devices="h100:2")
    for err in (imported, planned):
        assert (err.value.parameter, str(err.value)) == (parameter, message)


def test_required_inputs_of_forward_are_named_where_they_are_missing():
    x = torch.randn(3, 4)
    platform = make_platform("h100", "epyc-7763", 2, 0)
    with pytest.raises(InvalidParameterError) as err:
        import_torch(_Masked(), (x,), platform=platform)
    assert (err.value.parameter, str(err.value)) == (
        "args", "args gives _Masked.forward no value for its required parameters 'mask', 'scale', nor does kwargs")
    with pytest.raises(InvalidParameterError) as err:
        import_torch(_Masked(), (x, x), platform=platform)
    assert (err.value.parameter, str(err.value)) == (
        "kwargs", "kwargs gives _Masked.forward no value for its required keyword parameter 'scale'")
    assert len(import_torch(_Masked(), (x,), {"mask": x, "scale": 2.0}, platform=platform).problem.nodes) == 2


def test_a_model_whose_forward_computes_nothing_is_refused_about_the_model():
    """A forward that returns its input as given has no operator to place: import_torch and plan_pipeline raised
    InvalidInstanceError ('the model 'Identity' has no operators to place'), naming no parameter, where the model,
    not an instance, is at fault."""
    from placement.torch import plan_pipeline

    x = torch.randn(3, 4)
    with pytest.raises(InvalidParameterError) as imported:
        import_torch(nn.Identity(), (x,), platform=make_platform("h100", "epyc-7763", 2, 0))
    with pytest.raises(InvalidParameterError) as planned:
        plan_pipeline(nn.Identity(), (x,), devices="h100:2")
    for err in (imported, planned):
        assert (err.value.parameter, str(err.value)) == (
            "model", "model Identity has no operators to place: its exported forward runs none (it returns its "
                     "inputs as given, or constants)")


def test_a_positional_input_that_is_no_tensor_is_refused_as_plan_pipeline_refuses_it():
    """A number given positionally was imported, and its plans split for torch's pipeline(), whose stages take
    tensors as positional inputs and refuse it at the first step; plan_pipeline refused it. Both refuse it alike,
    before the export; by keyword it is imported."""
    from placement.torch import plan_pipeline
    from tests.test_torch_cli import Scaled

    x = torch.randn(3, 4)
    platform = make_platform("h100", "epyc-7763", 2, 0)
    for value, kind in ((0.5, "float"), (None, "NoneType")):
        with pytest.raises(InvalidParameterError) as imported:
            import_torch(Scaled(), (x, value), platform=platform)
        with pytest.raises(InvalidParameterError) as planned:
            plan_pipeline(Scaled(), (x, value), devices="h100:2")
        for err in (imported, planned):
            assert (err.value.parameter, str(err.value)) == ("args", (
                f"args must hold tensors only, but args[1] is a {kind}: pipeline stages take tensors as positional "
                "inputs; pass it by keyword, in kwargs"))
    assert len(import_torch(Scaled(), (x,), {"scale": 0.5}, platform=platform).problem.nodes) == 2


def test_example_inputs_given_as_one_tensor_are_refused_as_plan_pipeline_refuses_them():
    """A tensor given as args, not in a tuple, was read as its rows: 'args holds 3 positional inputs, but
    Linear.forward takes at most 1', where plan_pipeline says what to write."""
    from placement.torch import plan_pipeline

    x = torch.randn(3, 4)
    with pytest.raises(InvalidParameterError) as imported:
        import_torch(nn.Linear(4, 2), x, platform=make_platform("h100", "epyc-7763", 2, 0))
    with pytest.raises(InvalidParameterError) as planned:
        plan_pipeline(nn.Linear(4, 2), x, devices="h100:2")
    for err in (imported, planned):
        assert (err.value.parameter, str(err.value)) == ("args", (
            "args must be a tuple of the model's positional inputs (one micro-batch), not Tensor; for one input "
            "write (x,)"))


def test_a_blank_or_non_text_model_name_is_refused_before_the_export():
    # import_torch(name="") named the instance after the model's class, as if no name had been given
    model, args = mlp()
    platform = make_platform("h100", "epyc-7763", 2, 1)
    for name, said in (("", "''"), ("  ", "'  '"), (3, "3 (int)")):
        with pytest.raises(InvalidParameterError) as err:
            import_torch(model, args, platform=platform, name=name)
        assert str(err.value) == ("name must be some text besides spaces (or None for the model's class name), "
                                  f"not {said}")
        with pytest.raises(InvalidParameterError) as err:
            import_module(model, args, name=name)
        assert err.value.parameter == "name"
    assert import_torch(model, args, platform=platform, name="mlp-1").problem.name == "mlp-1-inference"


class _Box:
    def __init__(self, t):
        self.t = t


class DynamicCache(_Box):   # named as a transformers model's key-value cache
    pass


def test_an_output_of_a_type_torch_cannot_flatten_is_named():
    """torch.export's own message for an output it cannot flatten advises registering a pytree; a model's
    user needs to know which output it is (a transformers model's cache, left on by use_cache: an encoder-decoder
    model's decoder keeps a copy of the config, which setting use_cache on the model's config after it is
    built leaves on, so the call's keyword comes first)."""

    class Returns(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.layer, self.kind = nn.Linear(4, 4), kind

        def forward(self, x):
            y = self.layer(x)
            return y, self.kind(y)

    with pytest.raises(InvalidParameterError) as err:
        import_module(Returns(_Box), (torch.randn(2, 4),))
    assert str(err.value) == (f"model Returns cannot be exported: its output holds a {__name__}._Box, which is no "
                              "tensor, tuple, list or dict: return its tensors in a tuple")
    with pytest.raises(InvalidParameterError) as err:
        import_module(Returns(DynamicCache), (torch.randn(2, 4),))
    assert str(err.value).endswith(f"holds a {__name__}.DynamicCache, which is no tensor, tuple, list or dict (a "
                                   "transformers model returns its key-value cache unless called with "
                                   "use_cache=False in kwargs, or built from a config that sets it)")

    class LocalCache(_Box):   # a class defined in a function: torch names it through <locals>
        pass

    with pytest.raises(InvalidParameterError) as err:
        import_module(Returns(LocalCache), (torch.randn(2, 4),))
    assert str(err.value).endswith(f"holds a {LocalCache.__module__}.{LocalCache.__qualname__}, which is no tensor, "
                                   "tuple, list or dict (a transformers model returns its key-value cache unless "
                                   "called with use_cache=False in kwargs, or built from a config that sets it)")


def test_a_failed_export_writes_nothing_but_its_error(capfd):
    """torch logs a warning and prints the partial graph when it cannot export data-dependent control
    flow; the one-line error says it all."""

    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(InvalidParameterError, match="^model DataDependent cannot be exported: torch.export raised "
                                                    "GuardOnDataDependentSymNode: ") as err:
        import_module(DataDependent(), (torch.randn(2),))
    assert capfd.readouterr() == ("", "")
    # and where in the model's code: the line that branches on the tensor's values, and what to change
    line = inspect.getsourcelines(DataDependent.forward)[1] + 1
    assert str(err.value).endswith(f" (at {__file__}:{line}, in forward: return x * 2 if x.sum() > 0 else x)"
                                   f"{VALUES_IN_PYTHON}")


#: what a refused export says to change where forward takes a Python value from values computed from its inputs
VALUES_IN_PYTHON = ("; forward takes a Python value from a tensor's values computed from its inputs (an if, a loop or "
                    "an assert on them, .item(), int() or float() of them, or the size of a tensor they decide), which "
                    "one exported program cannot hold: keep such values in tensors, compute every branch with shapes "
                    "the values do not decide (masks, torch.where), not with torch.cond, which is not costed")


def test_a_branch_on_a_size_the_values_decide_says_what_to_change():
    """A mixture of experts that skips an expert no token is routed to (``if picked.numel() == 0``): the size of
    the nonzero's result is data-dependent, and the refusal says so, with the remedy."""

    class Routed(nn.Module):
        def forward(self, x):
            picked = torch.nonzero(x > 0)
            if picked.numel() == 0:
                return x
            return x * 2

    with pytest.raises(InvalidParameterError) as err:
        import_module(Routed(), (torch.randn(4),))
    assert str(err.value).startswith("model Routed cannot be exported: torch.export raised ")
    assert str(err.value).endswith(VALUES_IN_PYTHON)


def test_a_number_taken_from_the_values_is_not_called_a_branch():
    """``float(x.max())`` (a scale), ``int(x.argmax())`` (a slice's end): torch.export stops there in the words of a
    branch on the values ("Could not guard on data-dependent expression zuf0", "Could not extract specialized
    integer from data-dependent expression u0"), where forward branches on nothing; the refusal said it did."""

    class Scaled(nn.Module):
        def forward(self, x):
            return x / float(x.abs().max())

    class Cut(nn.Module):
        def forward(self, x):
            return x[:int(x.argmax())]

    for model, code in ((Scaled(), "return x / float(x.abs().max())"), (Cut(), "return x[:int(x.argmax())]")):
        with pytest.raises(InvalidParameterError) as err:
            import_module(model, (torch.randn(4),))
        name = type(model).__name__
        line = inspect.getsourcelines(type(model).forward)[1] + 1
        assert str(err.value).startswith(f"model {name} cannot be exported: torch.export raised ")
        assert str(err.value).endswith(f" (at {__file__}:{line}, in forward: {code}){VALUES_IN_PYTHON}")
        assert "branches" not in str(err.value)


def test_a_failure_whose_message_names_no_frame_is_placed_by_its_traceback():
    """torch.export's error for a branch on ``.item()``, or for a forward that raises, names no frame of the model's
    code (no "The following call raised this error"): the refusal named none. The innermost frame of the model's own
    code in the error's traceback is named instead (not a frame of Python's library that the model called)."""

    class ItemBranch(nn.Module):
        def forward(self, x):
            if x.sum().item() > 0:
                return x * 2
            return x

    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("no forward here")

    class Configured(nn.Module):   # raised in Python's own library, which is not the model's code
        def forward(self, x):
            return x * json.loads("{scale: 2}")["scale"]

    for model, code, remedy in (
            (ItemBranch(), "if x.sum().item() > 0:", VALUES_IN_PYTHON),
            (Broken(), 'raise ValueError("no forward here")', ""),
            (Configured(), 'return x * json.loads("{scale: 2}")["scale"]', "")):
        with pytest.raises(InvalidParameterError) as err:
            import_module(model, (torch.randn(4),))
        line = inspect.getsourcelines(type(model).forward)[1] + 1
        assert str(err.value).startswith(f"model {type(model).__name__} cannot be exported: torch.export raised ")
        assert str(err.value).endswith(f" (at {__file__}:{line}, in forward: {code}){remedy}")


class Packed(nn.Module):
    """An LSTM over sequences of several lengths, packed as research code packs them."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.out = nn.LSTM(6, 8, batch_first=True), nn.Linear(8, 2)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.out(h[-1])


def test_a_packed_sequence_is_refused_with_what_to_change():
    # torch.export stopped inside the LSTM: "zeros(): argument 'size' failed to unpack the object at pos 2 with
    # error "type must be tuple of ints,but got FakeTensor"", naming neither the packing nor the model's line
    with pytest.raises(InvalidParameterError) as err:
        import_module(Packed(), (torch.randn(2, 5, 6), torch.tensor([5, 3])))
    assert str(err.value) == (
        "model Packed cannot be exported: its LSTM 'lstm' is given a PackedSequence (pack_padded_sequence), whose "
        "batch sizes are values of a tensor, which torch.export cannot read as sizes: give it the padded tensor, and "
        "mask or gather by the lengths what the steps past each sequence's end change")


def test_exported_program_can_be_read_directly():
    model, args = mlp()
    program = torch.export.export(model, args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = graph_from_program(program, "mlp")
    assert graph.name == "mlp" and graph.source == "torch.export" and len(graph.ops) == 3


def test_dropout_in_evaluation_is_no_operator_and_views_launch_no_kernel():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Flatten(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    evaluation = import_module(model.eval(), (x,))
    # the dropout returns its input: the flatten (a view) reads the first linear directly
    assert [(op.target, op.kind, op.kernels, op.inputs) for op in evaluation.ops] == [
        ("aten::linear", "matmul", 1, ()), ("aten::flatten.using_ints", "view", 0, ((0, 0),)),
        ("aten::linear", "matmul", 1, ((1, 0),))]
    training = import_module(model.train(), (x,))
    assert [op.kind for op in training.ops] == ["matmul", "pointwise", "view", "matmul"]
    # backward kernels: ⌈factor⌉ (the first linear 1, its weight gradient alone; dropout 1, view 0,
    # the second linear 2)
    pg = group_ops(training, "operator")
    assert [op.backward_kernels(g) for op, g in zip(training.ops, pg.gradients)] == [1, 1, 0, 2]
    h100 = bundled_catalogue()["h100"]
    # on the H100 the view costs nothing; each linear its roofline plus one 5 µs kernel
    pg = group_ops(evaluation, "operator")
    assert node_time_ms(pg, 1, h100) == 0.0
    assert node_time_ms(pg, 0, h100) == roofline_ms(192, 304, h100, "fp32") + 1e3 * 5e-6


@pytest.mark.parametrize("module", [nn.Dropout(0.0), nn.AlphaDropout(0.0)], ids=["dropout", "alpha"])
def test_dropout_of_probability_zero_in_training_is_no_operator(module):
    """ATen's dropouts return their input itself at p = 0 (no kernel, no mask), in training as in
    evaluation: the graph is the evaluation's, where it was charged a pointwise kernel (5 µs on an H100)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), module, nn.Flatten(), nn.Linear(8, 2)).train()
    training = import_module(model, (torch.randn(3, 4),))
    assert [(op.target, op.kind, op.inputs) for op in training.ops] == [
        ("aten::linear", "matmul", ()), ("aten::flatten.using_ints", "view", ((0, 0),)),
        ("aten::linear", "matmul", ((1, 0),))]
    module.p = 0.5   # a mask: an operator
    assert [op.kind for op in import_module(model, (torch.randn(3, 4),)).ops] == ["matmul", "pointwise", "view",
                                                                                  "matmul"]

def test_scatter_style_aggregations_are_copies_without_a_warning():
    """A GNN's aggregations move bytes: index_add reads x (10x16 fp32, 640 B), the index (20 int64, 160 B)
    and the source (20x16, 1,280 B) and writes 640 B: 2,720 B; scatter_reduce reads the index expanded
    to 20x16 (2,560 B) instead: 5,120 B. They were costed so already, but warned of as unknown."""
    class Aggregate(nn.Module):
        def forward(self, x, index, src):
            return x.index_add(0, index, src) + x.scatter_reduce(0, index[:, None].expand(-1, 16), src, "amax")

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Aggregate(), (torch.randn(10, 16), torch.randint(0, 10, (20,)), torch.randn(20, 16)))
    costs = {op.name: (op.kind, op.flops, op.bytes_moved) for op in graph.ops if op.name in ("index_add",
                                                                                              "scatter_reduce")}
    assert costs == {"index_add": ("copy", 0.0, 2720.0), "scatter_reduce": ("copy", 0.0, 5120.0)}
    assert graph.unknown == ()


def test_regions_and_data_dependent_shapes_are_refused_not_costed_wrong():
    """torch.export writes a torch.no_grad block, an autocast block or a torch.cond as one higher-order
    operator whose inner linears this importer would never see (they would cost 0 FLOPs, and the
    stage modules could not be built); a boolean mask gives a shape that depends on the data. Each
    is refused by name."""

    class NoGrad(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            with torch.no_grad():
                h = self.a(x)
            return self.b(h)

    class Cond(NoGrad):
        def forward(self, x):
            h = self.a(x)
            return torch.cond(h.sum() > 0, lambda t: self.b(t), lambda t: t.tanh(), (h,))

    class Masked(NoGrad):
        def forward(self, x):
            h = self.a(x)
            return self.b(h[h.sum(-1) > 0])

    class VmapNoGrad(NoGrad):  # a vmap region is traced through, but never a torch.no_grad beside it
        def forward(self, x):
            h = torch.vmap(lambda row: row * row.sum())(self.a(x))
            with torch.no_grad():
                h = self.b(h)
            return h

    class ActivationNoGrad(NoGrad):   # no parameter inside: the activation alone needs a gradient
        def forward(self, x):
            h = self.a(x)
            with torch.no_grad():
                t = h * 2
            return self.b(h + t)

    class AutocastNoGrad(NoGrad):     # the export writes no no_grad inside an autocast region
        def forward(self, x):
            h = self.a(x)
            with torch.autocast("cpu", enabled=False):
                with torch.no_grad():
                    t = self.b(h)
            return h + t

    # each region by name, where the model's code holds it (the line of its first operator), and what to change
    no_grad = ("a torch.no_grad region over values that may need a gradient", "wrap_with_set_grad_enabled",
               "detach what it reads (x.detach()) where no gradient is to reach it, or compute it outside "
               "torch.no_grad (torch.utils.checkpoint runs its function so with use_reentrant=True: use "
               "use_reentrant=False)")
    for model, (what, hop, advice), code in (
            (NoGrad(), no_grad, "h = self.a(x)"),
            (Cond(), ("a torch.cond", "cond", "plan each branch's model, or branch in Python on what the example "
                                              "inputs fix"),
             "return torch.cond(h.sum() > 0, lambda t: self.b(t), lambda t: t.tanh(), (h,))"),
            (VmapNoGrad(), no_grad, "h = self.b(h)"), (ActivationNoGrad(), no_grad, "t = h * 2"),
            (AutocastNoGrad(), ("a torch.autocast region", "wrap_with_autocast",
                                "plan the model in the precision it is to run in, without autocast"),
             None)):   # the export opens the autocast as a region of no operators: it has no line to name
        site = rf" \(at {re.escape(__file__)}:\d+, in [^:]+: {re.escape(code)}\)" if code else ""
        with pytest.raises(InvalidParameterError, match=rf"^model {type(model).__name__} cannot be costed: its "
                                                        rf"forward holds {re.escape(what)}{site}, which torch.export "
                                                        rf"writes as the higher-order operator {hop}, whose "
                                                        rf"operators are not read; {re.escape(advice)}$"):
            import_module(model, (torch.randn(4, 8),))
    with pytest.raises(InvalidParameterError, match=r"^model Masked cannot be costed: the shape of operator 'index' "
                                                    r"\(aten::index.Tensor\) depends on the values of the inputs "
                                                    r"\(as after nonzero or a boolean mask\); only shapes that the "
                                                    r"example inputs' shapes fix are known$"):
        import_module(Masked(), (torch.randn(4, 8),))


class NormedInner(nn.Module):
    """Divides its layer by the norm of the layer's weight, taken under torch.no_grad."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            norm = self.layer.weight.norm()
        return self.layer(x) / norm


class NormedOuter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner, self.out = NormedInner(), nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.inner(x))


def test_a_refused_region_is_named_by_its_module_and_its_own_line():
    """A region in a submodule's forward was placed at the model's outermost line, the call of the submodule
    (`return self.out(self.inner(x))`); spectral_norm's power iteration, torch's own code in a Sequential, at
    the Sequential's `input = module(input)`. Now the module that opens the region is named, and the innermost
    line outside torch's files, else torch's own line."""
    from torch.nn.utils import parametrizations

    tail = (", which torch.export writes as the higher-order operator wrap_with_set_grad_enabled, whose operators "
            "are not read; detach what it reads (x.detach()) where no gradient is to reach it, or compute it outside "
            "torch.no_grad (torch.utils.checkpoint runs its function so with use_reentrant=True: use "
            "use_reentrant=False)")
    line = inspect.getsourcelines(NormedInner.forward)[1] + 2
    with pytest.raises(InvalidParameterError) as error:
        import_module(NormedOuter(), (torch.randn(4, 8),))
    assert str(error.value) == (
        "model NormedOuter cannot be costed: its forward holds a torch.no_grad region over values that may need a "
        f"gradient (in module 'inner', a tests.test_torch_import.NormedInner, at {__file__}:{line}, in forward: "
        f"norm = self.layer.weight.norm()){tail}")
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), parametrizations.spectral_norm(nn.Linear(8, 2)))
    with pytest.raises(InvalidParameterError, match=(
            r"^model Sequential cannot be costed: its forward holds a torch.no_grad region over values that may "
            r"need a gradient \(in module '2\.parametrizations\.weight\.0', a "
            r"torch\.nn\.utils\.parametrizations\._SpectralNorm, at "
            rf"{re.escape(parametrizations.__file__)}:\d+, in forward: "
            r"self\._power_method\(weight_mat, self\.n_power_iterations\)\), which torch.export writes as the "
            r"higher-order operator wrap_with_set_grad_enabled, whose operators are not read; it is spectral_norm's "
            r"power iteration: plan with that module in eval\(\) "
            r"\(model\.get_submodule\('2\.parametrizations\.weight\.0'\)\.eval\(\)\), where its vectors stay "
            r"as they are and the weight is divided by the norm they estimate, or remove the parametrization$")):
        import_module(model, (torch.randn(4, 8),))


def test_the_spectral_norm_hook_in_training_mode_is_refused_by_the_module_it_was_applied_to():
    """torch.nn.utils.spectral_norm is a forward pre-hook whose lines the export does not record: its region was
    placed in the Sequential's call of the layer, with the advice to detach what it reads, code the model's user
    does not have. It is refused before the export, by the name of the module, with the change to make; in
    eval(), or with its weight frozen, it plans."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.utils.spectral_norm(nn.Linear(8, 2)))
    with pytest.raises(InvalidParameterError) as error:
        import_module(model, (torch.randn(4, 8),))
    assert str(error.value) == (
        "model Sequential cannot be costed: its module '2' holds torch.nn.utils.spectral_norm in training mode, "
        "whose power iteration updates its vectors under torch.no_grad from the weight, which needs a gradient, a "
        "region torch.export writes as one operator, whose operators are not read; plan with that module in eval() "
        "(model.get_submodule('2').eval()), where its vectors stay as they are and the weight is divided by the "
        "norm they estimate, or remove the spectral norm")
    assert error.value.parameter == "model"
    model[2].weight_orig.requires_grad_(False)
    assert import_module(model, (torch.randn(4, 8),)).ops
    model[2].weight_orig.requires_grad_(True)
    model[2].eval()
    assert import_module(model, (torch.randn(4, 8),)).ops


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_region_is_read_alike_whatever_the_caller_s_gradient_mode(mode):
    """Exported inside the caller's torch.no_grad or torch.inference_mode, forward's own torch.no_grad region was
    written as plain operators: the region went unrefused, and a training plan's stages let the gradient through
    it ('inner.layer.weight' got another gradient than the model's, with no error). The model is traced with
    gradients enabled, so the region is refused as it is outside those modes."""
    with pytest.raises(InvalidParameterError) as outside:
        import_module(NormedOuter(), (torch.randn(4, 8),))
    with getattr(torch, mode)(), pytest.raises(InvalidParameterError) as inside:
        import_module(NormedOuter(), (torch.randn(4, 8),))
    assert str(inside.value) == str(outside.value)
    assert str(inside.value).startswith("model NormedOuter cannot be costed: its forward holds a torch.no_grad region "
                                        "over values that may need a gradient (in module 'inner', ")


def test_inputs_the_model_cannot_multiply_are_refused():
    """float64 (or int64) inputs to an fp32 Linear: eager PyTorch refuses the matmul, torch.export
    does not; the importer does, naming the operator and the types."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    for dtype, types in ((torch.float64, "float32, float64"), (torch.int64, "float32, int64")):
        with pytest.raises(InvalidParameterError, match=rf"^args cannot run Sequential: operator 'linear' "
                                                        rf"\(aten::linear\) would multiply tensors of types "
                                                        rf"{types}; give inputs of the type of the parameters$"):
            import_module(model, (torch.ones(4, 8, dtype=dtype),))


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_einsum_and_recurrent_layers_are_costed_as_their_gemms():
    """Two-operand einsums are the GEMM torch runs: FlopCounterMode's counts (bij,bjk->bik on
    [8,4,5]x[8,5,6]: 2·8·4·6·5 = 1920; nij,ijk->nk on [8,4,5]x[4,5,6]: 2·8·6·20 = 1920; bij,bij, every
    index summed: 2·160 = 320). A GRU of 2 layers (16 -> 32, 7 steps of
    3): per layer 2·7·3·96·(I + 32), I = 16 then 32: 193536 + 258048 = 451584, as FlopCounterMode
    counts; an LSTM (which FlopCounterMode does not see on CPU): 2·7·3·128·48 = 258048; bidirectional,
    batch first: 258048 for each direction of the one layer; projected to 6 (proj_size, 12 -> 20, 7 steps
    of 3): input 2·21·80·12 = 40320, recurrent 2·21·80·6 = 20160, projection 2·21·6·20 = 5040, 65520 as
    FlopCounterMode counts. An ellipsis stands for the dimensions it covers: ...ij,jk->...ik on
    [3,6,10]x[10,5] is 2·18·5·10 = 1800, ...ij,...jk on [2,3,6,10]x[3,10,5] 2·6·6·5·10 = 3600 (the
    second operand broadcast). An einsum of three operands runs products of two, left to right: ij,jk,kl->il
    on [2,3]x[3,4]x[4,5] is ij,jk->ik (2·2·4·3 = 48) then ik,kl->il (2·2·5·4 = 80), 128 as FlopCounterMode
    counts; it was costed 0 with a warning that einsum had no formula."""
    from torch.utils.flop_counter import FlopCounterMode

    class Einsums(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 5, 6))

        def forward(self, x, y):
            return (torch.einsum("bij,bjk->bik", x, y).sum() + torch.einsum("nij,ijk->nk", x, self.w).sum()
                    + torch.einsum("bij,bij", x, x))

    class Recurrent(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x)[0]

    torch.manual_seed(0)
    x, y = torch.randn(8, 4, 5), torch.randn(8, 5, 6)
    graph = import_module(Einsums(), (x, y))
    assert [op.flops for op in graph.ops if op.kind == "matmul"] == [1920.0, 1920.0, 320.0]
    with FlopCounterMode(display=False) as counter:
        Einsums()(x, y)
    assert counter.get_total_flops() == 1920 + 1920 + 320

    class Ellipsis(nn.Module):
        def forward(self, a, b, c):
            return torch.einsum("...ij,jk->...ik", a, b).sum() + torch.einsum("...ij,...jk", c, a.transpose(1, 2)).sum()

    a, b, c = torch.randn(3, 6, 10), torch.randn(10, 5), torch.randn(2, 3, 5, 10)
    graph = import_module(Ellipsis(), (a, b, c))
    with FlopCounterMode(display=False) as counter:
        Ellipsis()(a, b, c)
    assert [op.flops for op in graph.ops if op.kind == "matmul"] == [1800.0, 2 * 6 * 5 * 6 * 10]
    assert counter.get_total_flops() == 1800 + 3600
    seq = torch.randn(7, 3, 16)
    for layer, flops, counted in [(nn.GRU(16, 32, num_layers=2), 451584.0, True), (nn.LSTM(16, 32), 258048.0, False),
                                  (nn.LSTM(16, 32, bidirectional=True, batch_first=True), 2 * 258048.0, False),
                                  (nn.LSTM(12, 20, proj_size=6), 65520.0, True)]:
        model = Recurrent(layer)
        example = seq[..., :layer.input_size].transpose(0, 1) if layer.batch_first else seq[..., :layer.input_size]
        with warnings.catch_warnings():   # neither a cost-model warning nor torch's about _flat_weights
            warnings.simplefilter("error", UserWarning)
            graph = import_module(model, (example,))
        assert sum(op.flops for op in graph.ops if op.kind == "recurrent") == flops, layer
        if counted:
            with FlopCounterMode(display=False) as counter:
                model(example)
            assert counter.get_total_flops() == flops

    class Chain(nn.Module):
        def forward(self, a, b, c):
            return torch.einsum("ij,jk,kl->il", a, b, c)

    chain = (torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Chain(), chain)
    assert [(op.kind, op.flops) for op in graph.ops] == [("matmul", 128.0)]
    assert [(o.m, o.n, o.k, o.batch) for o in graph.ops[0].operators] == [(2, 4, 3, 1), (2, 5, 4, 1)]
    with FlopCounterMode(display=False) as counter:
        Chain()(*chain)
    assert counter.get_total_flops() == 128


def test_an_einsum_of_more_operands_runs_its_products_in_aten_s_order():
    """ATen multiplies an einsum's operands two at a time: left to right, or by the path torch.einsum passes
    (where opt_einsum is installed), each pair's product appended to the operands left. ij,jk,kl,lm->im on
    [20,2]x[2,20]x[20,2]x[2,20]: left to right ((AB)C)D is 2·20·20·2 + 2·20·2·20 + 2·20·20·2 = 4,800; the path
    (0, 1), (0, 1), (0, 1) multiplies A·B, then C·D, then AB·CD, 1,600 + 1,600 + 2·20·20·20 = 19,200; a
    path naming an operand that is not left fits nothing."""
    from placement.io.layer_gemms import einsum_flops, einsum_products

    shapes = [(20, 2), (2, 20), (20, 2), (2, 20)]
    assert einsum_products("ij,jk,kl,lm->im", shapes) == [((1, 20, 20, 2), False), ((1, 20, 2, 20), False),
                                                          ((1, 20, 20, 2), False)]
    assert einsum_flops(einsum_products("ij,jk,kl,lm->im", shapes)) == 4800
    paired = einsum_products("ij,jk,kl,lm->im", shapes, [0, 1, 0, 1, 0, 1])
    assert paired == [((1, 20, 20, 2), False), ((1, 20, 20, 2), False), ((1, 20, 20, 20), False)]
    assert einsum_flops(paired) == 19200
    assert einsum_products("ij,jk,kl,lm->im", shapes, [0, 1, 0, 1, 0, 3]) is None
    # products that sum nothing both operands share multiply: bi,bj,bk->bijk is bi·bj (4·3·5 = 60 multiplies)
    # then bij·bk (4·15·6 = 360)
    outer = einsum_products("bi,bj,bk->bijk", [(4, 3), (4, 5), (4, 6)])
    assert outer == [((4, 3, 5, 1), True), ((4, 15, 6, 1), True)] and einsum_flops(outer) == 420


def test_an_einsum_s_products_know_the_operands_of_their_factors():
    """Each product of two of an einsum's operands is made of operands of the equation, which autograd
    differentiates product by product: ij,jk,kl,lm->im on A [20, 2], B [2, 20], C [20, 2], D [2, 20] by the path
    (0, 1), (0, 1), (0, 1) multiplies A·B, C·D, then AB·CD; left to right, AB·C then ABC·D. With D alone
    trained, the gradient of C·D (the GEMM (batch, m, n, k) = (1, 20, 20, 2)) is D's, ``dD = Cᵀ·dCD``, (1, 2, 20,
    20), and that of AB·CD is CD's, ``dCD = ABᵀ·dY``, (1, 20, 20, 20): both weight gradients where C is a frozen
    parameter (CD is then computed from parameters alone), the second not where C is a model input."""
    from placement.io.layer_gemms import einsum_contractions, einsum_gradients

    shapes = [(20, 2), (2, 20), (20, 2), (2, 20)]
    paired = einsum_contractions("ij,jk,kl,lm->im", shapes, [0, 1, 0, 1, 0, 1])
    assert [(first, second) for _, _, first, second in paired] == [((0,), (1,)), ((2,), (3,)), ((0, 1), (2, 3))]
    ordered = einsum_contractions("ij,jk,kl,lm->im", shapes)
    assert [(first, second) for _, _, first, second in ordered] == [((0,), (1,)), ((0, 1), (2,)), ((0, 1, 2), (3,))]
    frozen = [(False, False), (False, False), (False, True), (True, True)]
    assert einsum_gradients(paired, frozen) == [((1, 2, 20, 20), False, True), ((1, 20, 20, 20), False, True)]
    given = [(False, False), (False, False), (False, False), (True, True)]
    assert einsum_gradients(paired, given) == [((1, 2, 20, 20), False, True), ((1, 20, 20, 20), False, False)]
    assert einsum_gradients(ordered, given) == [((1, 2, 20, 20), False, True)]


def test_an_einsum_reads_a_dimension_of_1_as_a_broadcast():
    """ATen reads an operand's index only where its dimension is not 1: such a dimension broadcasts.
    bhqd,bhkd->bhqk with one head of ``k`` (multi-query attention) runs ``b`` = 2 GEMMs of ``h·q`` = 12 rows,
    not 8 of 3; bij,bjk->bik with ``j`` 1 multiplies (2·3·4 = 24 elements), a pointwise operator, where a GEMM of
    48 FLOPs was charged; ij,jk,kl->il with ``k`` 1 in the last operand sums ``k`` out of the second before its
    GEMM with the first (2·2·3 = 12 FLOPs) and then multiplies (10), where two GEMMs of 48 and 80 were charged.
    Each as torch runs it (FlopCounterMode counts its GEMMs, no multiply)."""
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    cases = {"bhqd,bhkd->bhqk": [(2, 4, 3, 8), (2, 1, 5, 8)], "bij,bjk->bik": [(2, 3, 1), (2, 1, 4)],
             "ij,jk,kl->il": [(2, 3), (3, 4), (1, 5)]}

    class Einsums(nn.Module):
        def forward(self, *xs):
            return [torch.einsum(equation, *xs[i:i + len(shapes)]) for i, (equation, shapes)
                    in zip((0, 2, 4), cases.items())]

    xs = tuple(torch.randn(*shape) for shapes in cases.values() for shape in shapes)
    ops = [op for op in graph_from_program(export_program(Einsums(), xs), "Einsums").ops if "einsum" in op.target]
    assert [(op.kind, op.flops) for op in ops] == [("matmul", 1920.0), ("pointwise", 24.0), ("matmul", 22.0)]
    assert [[(s.m, s.n, s.k, s.batch) if s.kind == "gemm" else s.elements for s in op.operators] for op in ops] \
        == [[(12, 5, 8, 2)], [24], [(2, 1, 3, 1), 10]]
    assert ops[2].kernels == 2
    with FlopCounterMode(display=False) as counter:
        Einsums()(*xs)
    assert counter.get_total_flops() == 1920 + 12


def test_index_tables_and_weight_norm_have_cost_formulas():
    """``tril_indices`` makes a table of indices from sizes alone (a constant, as ``arange``), weight_norm's
    ``_weight_norm`` divides a weight by its norm (a normalisation of its 36 elements: 5 · 36 = 180): both
    were costed 0 with a warning that they had no formula."""
    from torch.nn.utils import parametrizations

    class Normed(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = parametrizations.weight_norm(nn.Linear(6, 6))

        def forward(self, x):
            rows, _ = torch.tril_indices(6, 6)
            return self.layer(x)[:, rows]

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Normed(), (torch.randn(4, 6),))
    kinds = {op.target: (op.kind, op.flops) for op in graph.ops}
    assert kinds["aten::tril_indices"] == ("constant", 0.0) and kinds["aten::_weight_norm"] == ("norm", 180.0)


def test_an_einsum_that_sums_no_shared_index_is_a_pointwise_multiply():
    """``bi,bj->bij`` (an outer product) and ``bi,bi->bi`` (a Hadamard product) sum no index both
    operands share: torch runs a broadcast multiply, no GEMM (FlopCounterMode counts none). They are
    pointwise operators, one multiply per output element (8·16·16 = 2,048 and 8·16 = 128), not GEMMs
    of 2·numel(out) FLOPs with two gradient GEMMs. ``bi,bi->b`` sums ``i``: the GEMM, 2·8·16 = 256."""
    from torch import nn

    from placement.io.torch_export import export_program, graph_from_program

    class Products(nn.Module):
        def forward(self, x, y):
            return (torch.einsum("bi,bj->bij", x, y).sum() + torch.einsum("bi,bi->bi", x, y).sum()
                    + torch.einsum("bi,bi->b", x, y).sum())

    x, y = torch.randn(8, 16), torch.randn(8, 16)
    graph = graph_from_program(export_program(Products(), (x, y)), "Products")
    assert [(op.kind, op.flops) for op in graph.ops if "einsum" in op.target] == [
        ("pointwise", 2048), ("pointwise", 128), ("matmul", 256)]


def test_addbmm_tensordot_and_multi_dot_are_costed_as_their_gemms():
    """Three products torch.export keeps whole, costed 0 with a warning before: ``addbmm`` of 4
    products of 8 × 16 by 16 × 32 (2·4·8·16·32 = 32,768; FlopCounterMode has no forward rule for it,
    its backward bmm's count 2 × that where both operands need a gradient); ``tensordot`` of
    [8, 16, 4] and [16, 4, 32] over (16, 4): 2·8·32·64 = 32,768; ``multi_dot`` of a 16-vector and
    matrices 16 × 64, 64 × 8, 8 × 4: the least multiplications, (v·A)·B·C = 1,024 + 512 + 32, times 2
    = 3,136, torch's order. The inputs need a gradient: every product computes one through each
    operand, 2 × forward, 137,344 in all. Forward and backward equal FlopCounterMode's but for
    addbmm's forward. (A chain whose first operand needs no gradient skips one GEMM that the factor
    of 2 still counts.)"""
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.opgraph import gradient_flow
    from placement.io.torch_export import export_program, graph_from_program

    class Products(nn.Module):
        def __init__(self):
            super().__init__()
            self.b2 = nn.Parameter(torch.randn(4, 16, 32))
            self.t = nn.Parameter(torch.randn(16, 4, 32))
            self.a, self.b, self.c = (nn.Parameter(torch.randn(*s)) for s in ((16, 64), (64, 8), (8, 4)))

        def forward(self, x, y, v):
            return (torch.addbmm(torch.zeros(8, 32), x, self.b2).sum()
                    + torch.tensordot(y, self.t, dims=([1, 2], [0, 1])).sum()
                    + torch.linalg.multi_dot([v, self.a, self.b, self.c]).sum())

    args = tuple(torch.randn(*s, requires_grad=True) for s in ((4, 8, 16), (8, 16, 4), (16,)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = graph_from_program(export_program(Products(), args), "Products")
    products = [(op, g) for op, g in zip(graph.ops, gradient_flow(graph)) if op.kind == "matmul"]
    assert [op.flops for op, _ in products] == [32768, 32768, 3136]
    model = Products()
    with FlopCounterMode(display=False) as forward:
        out = model(*args)
    with FlopCounterMode(display=False) as backward:
        out.backward()
    assert forward.get_total_flops() == 32768 + 3136       # no rule for addbmm
    assert sum(op.backward_flops(g) for op, g in products) == backward.get_total_flops() == 137344


def test_copies_are_copies_whatever_overload_carries_the_pointwise_tag():
    """clone, where and masked_fill are copies (no FLOPs; docs/pytorch.md), as ONNX's Where is: their
    overloads that torch tags pointwise (clone.default, where.self, masked_fill.Scalar) were costed
    one FLOP per element, the others not."""
    from placement.io.torch_export import classify

    ops = torch.ops.aten
    kinds = {classify(target, torch.float32, torch.float32)
             for target in (ops.clone.default, ops.where.self, ops.where.ScalarOther, ops.masked_fill.Scalar,
                            ops.masked_fill.Tensor)}
    assert kinds == {"copy"}


def test_divisions_and_reversed_subtractions_are_pointwise_whatever_overload_torch_tags():
    """floor_divide (as a mixture-of-experts router's x // k is exported) and rsub of two tensors are one
    FLOP per output element, like true_divide and sub: torch tags neither overload pointwise, and they were
    warned of as unknown and given no FLOPs."""
    class Arithmetic(nn.Module):
        def forward(self, x, y):
            return torch.floor_divide(x, 2) + torch.floor_divide(x, y), torch.true_divide(x, 3), torch.rsub(x, y)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Arithmetic(), (torch.randn(4, 8), torch.randn(4, 8)))
    costs = sorted((op.target.split("::")[1], op.kind, op.flops) for op in graph.ops if op.kind != "view")
    assert costs == [("add.Tensor", "pointwise", 32.0), ("floor_divide", "pointwise", 32.0),
                     ("floor_divide", "pointwise", 32.0), ("rsub.Tensor", "pointwise", 32.0),
                     ("true_divide.Tensor", "pointwise", 32.0)]
    assert graph.unknown == ()


def test_every_interpolation_is_pointwise_and_a_pixel_shuffle_a_copy():
    """F.interpolate of any mode and rank is one FLOP per output element, as ONNX's Resize, which the
    exporters write for each; pixel_shuffle and pixel_unshuffle are copies, as ONNX's DepthToSpace and
    SpaceToDepth. Only the 2-D nearest and bilinear kernels had a formula: the others were warned of as
    unknown and given no FLOPs, so a 3-D decoder's two imports differed."""
    class Resample(nn.Module):
        def forward(self, x):
            y = F.interpolate(x, scale_factor=2, mode="trilinear")                      # [1, 2, 4, 8, 8]
            z = F.interpolate(y, scale_factor=0.5, mode="nearest").mean(2)              # [1, 2, 4, 4]
            z = F.interpolate(z, scale_factor=2, mode="bicubic")                        # [1, 2, 8, 8]
            z = F.interpolate(z, size=(4, 4), mode="bilinear", antialias=True)          # [1, 2, 4, 4]
            z = F.interpolate(z, scale_factor=2, mode="nearest-exact")                  # [1, 2, 8, 8]
            w = F.interpolate(z.flatten(2), scale_factor=2, mode="linear")              # [1, 2, 128]
            return w, F.pixel_unshuffle(F.pixel_shuffle(z.repeat(1, 2, 1, 1), 2), 2)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Resample(), (torch.randn(1, 2, 2, 4, 4),))
    costs = [(op.target.split("::")[1], op.kind, op.flops) for op in graph.ops if op.kind in ("pointwise", "copy")]
    assert costs == [("upsample_trilinear3d.vec", "pointwise", 512.0), ("upsample_nearest3d.vec", "pointwise", 64.0),
                     ("upsample_bicubic2d.vec", "pointwise", 128.0), ("_upsample_bilinear2d_aa.vec", "pointwise", 32.0),
                     ("_upsample_nearest_exact2d.vec", "pointwise", 128.0),
                     ("upsample_linear1d.vec", "pointwise", 256.0),
                     ("repeat", "copy", 0.0), ("pixel_shuffle", "copy", 0.0), ("pixel_unshuffle", "copy", 0.0)]
    assert graph.unknown == ()


def _refused_import(tmp_path, **figures) -> str:
    """The message of importing the MLP on a copy of the bundled H100 with ``figures`` changed, read from a
    catalogue file of its own."""
    from importlib.resources import files

    from placement.errors import InvalidInstanceError

    bundled = json.loads(files("placement.costmodel").joinpath("devices.json").read_text(encoding="utf-8"))
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"devices": {"slow-gpu": {**bundled["devices"]["h100"], **figures}}}))
    model, args = mlp()
    with pytest.raises(InvalidInstanceError) as raised:
        import_torch(model, args, platform=make_platform("slow-gpu", accelerators=2, catalogues=[path]))
    return str(raised.value).replace(str(path), "SLOW")


@pytest.mark.parametrize("figures, part", [
    ({"memory_bandwidth": 1e-320}, "memory_bandwidth, 1e-320 bytes/s"),
    ({"op_overhead": 1e308}, "op_overhead, 1e+308 s per kernel"),
])
def test_a_catalogued_device_too_slow_for_the_float_range_is_refused_naming_its_catalogue_and_field(
        tmp_path, figures, part):
    """A memory bandwidth of 1e-320 bytes/s or an op_overhead of 1e308 s makes the roofline times infinite: the
    import raised OverflowError from its rounding, then named the devices but neither the catalogue file they
    come from nor the field (op_overhead was not among those it told to check); now the instance's check names
    the field, the device, its catalogue and the figure most of the times come from."""
    assert _refused_import(tmp_path, **figures) == (
        "node 0: field 'fpgaLatency' is infinite (times on accelerator 'slow-gpu' come from its roofline in catalogue "
        f"SLOW, most of them from its {part}; check its peak_flops, memory_bandwidth and op_overhead)")


def test_a_peak_so_small_that_the_times_pass_the_largest_total_names_the_peak(tmp_path):
    assert _refused_import(tmp_path, peak_flops={"fp32": 1e-300}) == (
        "node 0: time on accelerator 1.9200000156260187e+305 takes the graph's total time on accelerator above "
        "1e+100, the most a total of times, costs or sizes may be (times on accelerator 'slow-gpu' come from its "
        "roofline in catalogue SLOW, most of them from its peak_flops fp32, 1e-300 FLOP/s; check its peak_flops, memory_bandwidth and "
        "op_overhead)")


def test_a_link_too_slow_for_the_float_range_names_the_link_and_its_catalogue(tmp_path):
    message = _refused_import(tmp_path, links={"pcie": 1e-320}, default_link="pcie")
    assert message.endswith("(transfer costs come from link 'pcie' of accelerator 'slow-gpu' in catalogue SLOW, "
                            "1e-320 bytes/s; check its links)"), message


def test_a_refused_figure_on_the_cpu_or_of_no_one_device_names_what_it_comes_from():
    from placement.costmodel.roofline import bundled_catalogue
    from placement.io.time_faults import figures_at_fault

    graph = import_module(*mlp())
    platform = make_platform("h100", accelerators=2, cpus=1)
    bundled = bundled_catalogue()["h100"].catalogue
    assert bundled.endswith("devices.json")
    assert figures_at_fault("node 3: field 'cpuWeightLatency' is infinite", graph, platform) == (
        f"times on cpu 'epyc-7763' come from its roofline in catalogue {bundled}, most of them from its op_overhead, "
        "3e-05 s per kernel; check its peak_flops, memory_bandwidth and op_overhead")
    assert figures_at_fault("the graph's times are refused", graph, platform) == (
        f"times from the roofline of accelerator 'h100' in catalogue {bundled} and CPU 'epyc-7763' in catalogue "
        f"{bundled}, transfer costs from its link 'pcie'; check their peak_flops, memory_bandwidth, op_overhead and "
        "links")


def _grouped_mm_fallback_op():
    """The grouped GEMM transformers registers for mixtures of experts whose weights are not bfloat16
    (``transformers::grouped_mm_fallback``: rows of ``x`` by expert, ``offs`` the experts' ends), registered
    here as transformers registers it where transformers has not done so in this process."""
    if not hasattr(torch.ops.transformers, "grouped_mm_fallback"):
        def grouped(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
            out, start = torch.zeros(x.shape[0], w.shape[2], dtype=x.dtype), 0
            for i, end in enumerate(offs.tolist()):
                out[start:end] = x[start:end] @ w[i]
                start = end
            return out

        torch.library.custom_op("transformers::grouped_mm_fallback", grouped, mutates_args=())
        torch.library.register_fake("transformers::grouped_mm_fallback",
                                    lambda x, w, offs: x.new_empty(x.shape[0], w.shape[2]))
    return torch.ops.transformers.grouped_mm_fallback


@pytest.mark.parametrize("kind", ["aten", "transformers"])
def test_the_grouped_gemm_of_a_mixture_of_experts_is_costed(kind):
    """16 token rows of width 32 through 3 experts' 32 x 8 weights, the rows split 4 / 6 / 6 among them:
    2 · 16 · 8 · 32 = 8,192 FLOPs, one GEMM of 16 x 8 over 32. Costed by bytes moved alone, it was a
    fraction of the experts' work, and the plan was made on a model without its experts."""
    fallback = _grouped_mm_fallback_op() if kind == "transformers" else None
    dtype = torch.bfloat16 if kind == "aten" else torch.float32   # aten's grouped GEMM takes bfloat16

    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 32, 8, dtype=dtype))

        def forward(self, x, offs):
            return torch._grouped_mm(x, self.w, offs=offs) if fallback is None else fallback(x, self.w, offs)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)   # no operator left without a formula
        tokens, ends = torch.randn(16, 32, dtype=dtype), torch.tensor([4, 10, 16], dtype=torch.int32)
        graph = import_module(Experts(), (tokens, ends))
    (op,) = graph.ops
    assert (op.kind, op.flops) == ("matmul", 8192.0)
    assert [(o.kind, o.m, o.n, o.k, o.batch) for o in op.operators] == [("gemm", 16, 8, 32, 1)]


@pytest.mark.parametrize("ends, gemms", [([10, 20, 32], [(16, 8, 11, 2), (16, 8, 10, 1)]),
                                         ([1, 2, 3, 4, 5, 6, 7, 8] + [8] * 8, [(16, 8, 1, 8)])])
def test_a_grouped_gemm_splitting_its_inner_dimension_is_costed_whole(ends, gemms):
    """Both operands matrices, ``offs`` splits the contracted K = 32 (or 8) among 3 (or 16) groups, one output
    matrix per group: 2 · 16 · 8 · K FLOPs whatever the split. K / G rounded down left 2 of 32 out (7,680
    FLOPs), and all of K where the groups outnumber it (none)."""

    class Contracted(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.w = nn.Parameter(torch.randn(k, 8, dtype=torch.bfloat16))

        def forward(self, x, offs):
            return torch._grouped_mm(x, self.w, offs=offs)

    k = ends[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Contracted(k), (torch.randn(16, k, dtype=torch.bfloat16),
                                              torch.tensor(ends, dtype=torch.int32)))
    (op,) = graph.ops
    assert (op.kind, op.flops) == ("matmul", 2.0 * 16 * 8 * k)
    assert [(o.kind, o.m, o.n, o.k, o.batch) for o in op.operators] == [("gemm", *gemm) for gemm in gemms]


@pytest.mark.parametrize("mode, weighted, flops, written", [("sum", False, 160.0, 240.0), ("mean", False, 160.0, 320.0),
                                                            ("max", False, 160.0, 680.0), ("sum", True, 320.0, 240.0)])
def test_an_embedding_bag_reads_the_rows_its_indices_select(mode, weighted, flops, written):
    """nn.EmbeddingBag(1000, 16) over 10 int64 indices in 3 bags: 10 rows of 16 summed (or averaged, or
    maxed): 160 FLOPs, 320 with per-sample weights (a multiply and an add per element). It reads its
    indices (80 B), offsets (24 B), the 10 rows it selects (10·16·4 = 640 B, not the 64,000 B table)
    and, weighted, the 10 weights (40 B); it writes its output 3·16·4 = 192 B, bag sizes 24 B and
    maximum indices 24 B; with mean or max also offset2bag (10·8 = 80 B), with max its maximum indices
    3·16·8 = 384 B.
    FlopCounterMode counts no FLOPs for it."""
    from torch.utils.flop_counter import FlopCounterMode

    class Bags(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(1000, 16, mode=mode)

        def forward(self, indices, offsets, *weights):
            return self.bag(indices, offsets, per_sample_weights=weights[0] if weights else None)

    torch.manual_seed(0)
    args = (torch.randint(0, 1000, (10,)), torch.tensor([0, 3, 7])) + ((torch.rand(10),) if weighted else ())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Bags(), args)
    (op,) = graph.ops
    assert (op.kind, op.flops, op.bytes_moved) == ("reduction", flops, 80 + 24 + 640 + 40 * weighted + written)
    assert [(p.name, p.nbytes) for p in op.params] == [("bag.weight", 64000.0)]
    assert [(o.op, o.elements) for o in op.operators] == [("mul", 160)] * weighted + [("reduce", 160)]
    with FlopCounterMode(display=False) as counter:
        Bags()(*args)
    assert counter.get_total_flops() == 0


def test_a_bilinear_layer_is_costed_as_its_gemms():
    """nn.Bilinear(5, 7, 3) on x1 [2, 4, 5] and x2 [2, 4, 7]: N = 8 rows; torch runs, for each of the 3
    outputs, x1 by the weight's 5 × 7 slice (GEMM 8 × 7 over 5: 560 FLOPs) and the 8 rows of that by
    x2's (8 dot products over 7: 112 FLOPs): 3 · 672 = 2 · 24 · 7 · (5 + 1) = 2,016 FLOPs (the ONNX
    exporter writes the same two products as MatMuls). It reads x1 (160 B), x2 (224 B), the weight
    (420 B) and the bias (12 B) and writes 2 · 4 · 3 · 4 = 96 B: 912 B. The bias is added, no operand."""

    class Pairs(nn.Module):
        def __init__(self):
            super().__init__()
            self.pair = nn.Bilinear(5, 7, 3)

        def forward(self, a, b):
            return self.pair(a, b)

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Pairs(), (torch.randn(2, 4, 5), torch.randn(2, 4, 7)))
    (op,) = graph.ops
    assert (op.kind, op.flops, op.bytes_moved) == ("matmul", 2016.0, 912.0)
    assert [(p.name, p.nbytes, p.operand) for p in op.params] == [("pair.weight", 420.0, True),
                                                                  ("pair.bias", 12.0, False)]
    assert [(o.kind, o.m, o.n, o.k, o.batch) if o.kind == "gemm" else (o.op, o.elements) for o in op.operators] == [
        ("gemm", 8, 7, 5, 3), ("gemm", 1, 1, 7, 24), ("add", 24)]


def test_sorting_and_top_k_are_costed_as_the_comparisons_of_sorting_each_row():
    """x [8, 4]: sorting along dimension 0 (stable, its dim given by name), msort (dimension 0) and topk(2)
    along 0 sort 4 rows of n = 8: 32 · ⌈log2 8⌉ = 96 FLOPs; argsort and topk(1) along the last dimension
    sort 8 rows of n = 4: 32 · 2 = 64. Reads x (128 B); sort writes values and indices (128 + 256 B),
    argsort its indices (256 B), topk(2) along 0 [2, 4] values and indices (32 + 64 B). FlopCounterMode
    counts none of them."""
    from torch.utils.flop_counter import FlopCounterMode

    class Sorts(nn.Module):
        def forward(self, x):
            return (torch.sort(x, dim=0, stable=True)[0], torch.msort(x), torch.topk(x, 2, 0), torch.argsort(x),
                    torch.topk(x, 1))

    x = torch.randn(8, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Sorts(), (x,))
    assert [(op.target, op.kind, op.flops) for op in graph.ops] == [
        ("aten::sort.stable", "reduction", 96.0), ("aten::msort", "reduction", 96.0),
        ("aten::topk", "reduction", 96.0), ("aten::argsort", "reduction", 64.0), ("aten::topk", "reduction", 64.0)]
    assert [op.bytes_moved for op in graph.ops[:4]] == [512.0, 256.0, 224.0, 384.0]
    with FlopCounterMode(display=False) as counter:
        Sorts()(x)
    assert counter.get_total_flops() == 0


def test_cosine_similarity_is_costed_as_the_three_products_it_sums():
    """F.cosine_similarity of x1 [4, 1, 16] and x2 [3, 16] along the last dimension: torch broadcasts
    them to [4, 3, 16], 192 elements, and passes over those six times (the two norms, reductions, the
    two quotients and the product, pointwise, and the sum, a reduction): 6 · 192 = 1,152 FLOPs.
    Reads 256 + 192 B, writes [4, 3]: 48 B."""

    class Similarity(nn.Module):
        def forward(self, a, b):
            return F.cosine_similarity(a, b, dim=-1)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Similarity(), (torch.randn(4, 1, 16), torch.randn(3, 16)))
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("aten::cosine_similarity", "reduction", 1152.0, 496.0)]


def test_grid_sample_is_a_resampling_costed_as_interpolate():
    """F.grid_sample of x [1, 3, 8, 8] at a grid [1, 5, 6, 2] writes [1, 3, 5, 6]: one FLOP per output
    element, 90, as F.interpolate's kernels in every mode; in 3-D, x [1, 2, 4, 4, 4] at [1, 2, 3, 3, 3]
    writes [1, 2, 2, 3, 3]: 36. The 2-D one reads x (768 B) and the grid (240 B) and writes 360 B."""

    class Warp(nn.Module):
        def forward(self, x, grid, volume, points):
            return F.grid_sample(x, grid, align_corners=False), F.grid_sample(volume, points, align_corners=True)

    args = (torch.randn(1, 3, 8, 8), torch.rand(1, 5, 6, 2) * 2 - 1, torch.randn(1, 2, 4, 4, 4),
            torch.rand(1, 2, 3, 3, 3) * 2 - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Warp(), args)
    assert [(op.target, op.kind, op.flops) for op in graph.ops] == [("aten::grid_sampler", "pointwise", 90.0),
                                                                    ("aten::grid_sampler", "pointwise", 36.0)]
    assert graph.ops[0].bytes_moved == 768 + 240 + 360


def test_unfold_is_a_copy_and_fold_sums_its_patches():
    """F.unfold of x [2, 3, 4, 4] by 3 × 3 patches (padding 1) is im2col, a copy: 0 FLOPs, reads 384 B and
    writes [2, 27, 16], 3,456 B. F.fold of those columns back is col2im, which sums the patches that
    overlap: one FLOP per input element, 864, a reduction; reads 3,456 B and writes 384 B."""

    class Patches(nn.Module):
        def forward(self, x, columns):
            return F.unfold(x, 3, padding=1), F.fold(columns, (4, 4), 3, padding=1)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Patches(), (torch.randn(2, 3, 4, 4), torch.randn(2, 27, 16)))
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("aten::im2col", "copy", 0.0, 3840.0), ("aten::col2im", "reduction", 864.0, 3840.0)]


def test_max_unpool_is_a_copy():
    """F.max_unpool2d of the 2 × 2 maxima of x [1, 2, 4, 4] writes each at its index in zeros [1, 2, 4, 4]: a
    copy, 0 FLOPs; reads the maxima (32 B) and their int64 indices (64 B), writes 128 B. In 3-D, of the
    maxima [1, 1, 2, 2, 2] of [1, 1, 4, 4, 4]: reads 32 + 64 B, writes 256 B."""

    class Unpool(nn.Module):
        def forward(self, x, volume):
            pooled, where = F.max_pool2d(x, 2, return_indices=True)
            cubes, at = F.max_pool3d(volume, 2, return_indices=True)
            return F.max_unpool2d(pooled, where, 2), F.max_unpool3d(cubes, at, 2)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Unpool(), (torch.randn(1, 2, 4, 4), torch.randn(1, 1, 4, 4, 4)))
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops if "unpool" in op.target] == [
        ("aten::max_unpool2d", "copy", 0.0, 224.0), ("aten::max_unpool3d", "copy", 0.0, 352.0)]


def test_known_export_failures_say_what_in_the_model_to_change():
    """torch.export's own words for a BatchNorm with momentum=None in training (a data-dependent guard) and
    for a parameter's .data read in forward or a gradient taken there (a fake tensor in the program's constants)
    name neither the module nor the change."""
    norm = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8, momentum=None), nn.Linear(8, 2))
    with pytest.raises(InvalidParameterError) as err:
        import_module(norm, (torch.randn(4, 4),))
    assert str(err.value) == (
        "model Sequential cannot be exported: its BatchNorm1d '1' has momentum=None, a cumulative average whose "
        "factor 1 / num_batches_tracked is read from a tensor, which torch.export cannot trace in training mode: "
        "give it a momentum (torch's default is 0.1), or plan the model in eval()")
    import_module(norm.eval(), (torch.randn(4, 4),))   # in evaluation the statistics are only read

    class ReadsData(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 4)

        def forward(self, x):
            return self.layer(x) + self.layer.weight.data.sum()

    class TakesGradient(nn.Module):   # a physics-informed residual: the derivative of the output by the input
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def forward(self, x):
            x = x.clone().requires_grad_(True)
            u = torch.tanh(self.layer(x))
            return torch.cat([u, torch.autograd.grad(u.sum(), x, create_graph=True)[0]], 1)

    # torch's words for both are the same: the message says the one for a gradient too, where it said .data alone
    for model in (ReadsData(), TakesGradient()):
        with pytest.raises(InvalidParameterError) as err:
            import_module(model, (torch.randn(4, 4),))
        assert str(err.value) == (
            f"model {type(model).__name__} cannot be exported: forward uses a tensor torch.export cannot trace to the "
            "model's parameters, buffers or inputs (it calls it lifted_tensor_0), such as a parameter's .data or a "
            "gradient forward takes itself (torch.autograd.grad: a gradient penalty, the derivatives of a "
            "physics-informed residual): read the parameter itself (.detach() where no gradient is to flow), and "
            "write into parameters outside forward, between steps; a gradient taken in forward has no such form "
            "(no stage runs autograd on another's operators): plan the model without it")


def test_a_batch_norm_in_training_given_one_value_per_channel_is_named_with_the_change_to_make():
    """A micro-batch of one sample gives a BatchNorm1d in training one value per channel: torch's words named
    neither the module nor the change (every frame of the error is torch's, so no line either)."""
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.BatchNorm1d(8)

        def forward(self, x):
            return torch.relu(self.norm(x))

    model = nn.Sequential(nn.Linear(4, 8), Block(), nn.Linear(8, 2))
    with pytest.raises(InvalidParameterError) as err:
        import_module(model, (torch.randn(1, 4),))
    assert str(err.value) == (
        "model Sequential cannot be exported: its BatchNorm1d '1.norm' normalises each channel by the statistics "
        "of its input in training mode, and is given one value per channel (an input of shape [1, 8]), which "
        "torch refuses: give micro-batches of more samples (the example inputs are one micro-batch), or plan the "
        "model in eval()")
    assert err.value.parameter == "model"
    import_module(model, (torch.randn(2, 4),))
    import_module(model.eval(), (torch.randn(1, 4),))


def test_products_searches_and_selections_without_a_kernel_of_their_own_are_costed():
    """Per output element 1 FLOP for outer (a [4] by b [8]: 32), kron ([2, 3] by [2, 2]: [4, 6], 24), erfinv (32)
    and cross ([4, 3]: 12), 4 for polar (a cosine, a sine and two products: 4 · 32 = 128); per input element
    1 for logcumsumexp, pairwise_distance and histc (x [4, 8]: 32 each); selections as the comparisons of sorting
    (numel · ⌈log2 n⌉): median along 1 and mode (n = 8: 32 · 3 = 96), kthvalue along 0 (n = 4: 64), median and
    quantile of the whole tensor (n = 32: 32 · 5 = 160); searchsorted in 5 boundaries and bucketize by 7
    (⌈log2(n + 1)⌉ = 3 comparisons for each of 32 values: 96); one_hot and diag copy (0); cdist of [2, 5, 8]
    and [2, 6, 8] the GEMM of every pair of rows, 2 · 2 · 5 · 6 · 8 = 960. FlopCounterMode counts none of them."""
    from torch.utils.flop_counter import FlopCounterMode

    class Odd(nn.Module):
        def forward(self, a, b, x, y, p, q, seq, edges, ids, m, c1, c2):
            return (torch.outer(a, b), torch.kron(x[:2, :3], m[:2, :2]), torch.polar(x.abs(), y),
                    torch.special.erfinv(x), torch.linalg.cross(p, q), torch.logcumsumexp(x, -1),
                    F.pairwise_distance(x, y), torch.histc(x, 4), torch.median(x, 1)[0], torch.mode(x)[0],
                    torch.kthvalue(x, 2, 0)[0], torch.median(x), torch.quantile(x, 0.5), torch.searchsorted(seq, x),
                    torch.bucketize(x, edges), F.one_hot(ids, 5), torch.diag(m), torch.cdist(c1, c2))

    args = (torch.randn(4), torch.randn(8), torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 3), torch.randn(4, 3),
            torch.arange(5.0), torch.arange(7.0), torch.tensor([0, 4, 2, 1, 3, 0]), torch.randn(3, 3),
            torch.randn(2, 5, 8), torch.randn(2, 6, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Odd(), args)
    costed = [(op.target, op.kind, op.flops) for op in graph.ops if op.kind not in ("view", "copy") or op.flops]
    assert costed == [
        ("aten::outer", "pointwise", 32.0), ("aten::kron", "pointwise", 24.0), ("aten::abs", "pointwise", 32.0),
        ("aten::polar", "pointwise", 128.0), ("aten::special_erfinv", "pointwise", 32.0),
        ("aten::linalg_cross", "pointwise", 12.0), ("aten::logcumsumexp", "reduction", 32.0),
        ("aten::pairwise_distance", "reduction", 32.0), ("aten::histc", "reduction", 32.0),
        ("aten::median.dim", "reduction", 96.0), ("aten::mode", "reduction", 96.0),
        ("aten::kthvalue", "reduction", 64.0), ("aten::median", "reduction", 160.0),
        ("aten::quantile.scalar", "reduction", 160.0), ("aten::searchsorted.Tensor", "reduction", 96.0),
        ("aten::bucketize.Tensor", "reduction", 96.0), ("aten::cdist", "matmul", 960.0)]
    assert sorted(op.target for op in graph.ops if op.kind == "copy") == ["aten::diag", "aten::one_hot"]
    with FlopCounterMode(display=False) as counter:
        Odd()(*args)
    assert counter.get_total_flops() == 0


def test_window_functions_are_constants():
    """hann_window(16) and hamming_window(16) write 16 floats (64 B) each: constants, 0 FLOPs, no warning;
    the product with x [16] is pointwise (16 FLOPs each)."""

    class Windowed(nn.Module):
        def forward(self, x):
            return x * torch.hann_window(16), x * torch.hamming_window(16)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Windowed(), (torch.randn(16),))
    assert [(op.target, op.kind, op.flops, op.bytes_moved) for op in graph.ops] == [
        ("aten::hann_window", "constant", 0.0, 64.0), ("aten::mul.Tensor", "pointwise", 16.0, 192.0),
        ("aten::hamming_window", "constant", 0.0, 64.0), ("aten::mul.Tensor", "pointwise", 16.0, 192.0)]


def test_cdist_counts_the_batches_of_both_operands_broadcast():
    """x1 [5, 8] against x2 [3, 6, 8]: torch broadcasts the batch to 3, out [3, 5, 6]; 2 · 90 · 8 = 1,440 FLOPs
    (the batch of x1 alone, 1, gave 480). x1 [3, 1, 5, 8] against x2 [4, 6, 8]: batch [3, 4], 2 · 360 · 8 = 5,760."""

    class Distances(nn.Module):
        def forward(self, a, b, c, d):
            return torch.cdist(a, b), torch.cdist(c, d)

    graph = import_module(Distances(), (torch.randn(5, 8), torch.randn(3, 6, 8), torch.randn(3, 1, 5, 8),
                                        torch.randn(4, 6, 8)))
    assert [(op.target, op.flops) for op in graph.ops] == [("aten::cdist", 1440.0), ("aten::cdist", 5760.0)]
    assert [(o.m, o.n, o.k, o.batch) for op in graph.ops for o in op.operators] == [(5, 6, 8, 3), (5, 6, 8, 12)]


def test_fourier_transforms_are_costed_as_five_n_log2_n_over_their_complex_points():
    """5 · B · P · log2 N: B transforms of N points, P complex points each (N for a complex transform, the
    n // 2 + 1 per row of n points a real one keeps). x [8, 32] real: rfft, 8 of 32 points keeping 17:
    5 · 8 · 17 · 5 = 3,400, and irfft of it back to n = 32 the same; rfft to n = 64 keeps 33: 5 · 8 · 33 · 6 =
    7,920; fftn of x over both dimensions, one real transform of 256 points keeping 8 · 17 = 136: 5 · 136 · 8 =
    5,440. c [8, 32] complex: fft2, one of 256 points, 5 · 256 · 8 = 10,240; ifft along 0, 32 of 8 points:
    5 · 32 · 8 · 3 = 3,840. stft of s [2, 256] with n_fft 16 and hop 4 (centred: 65 frames) keeps 9 points of
    each of 2 · 65 frames: 5 · 130 · 9 · 4 = 23,400. FlopCounterMode counts none of them."""
    from torch.utils.flop_counter import FlopCounterMode

    class Spectra(nn.Module):
        def forward(self, x, c, s, window):
            return (torch.fft.irfft(torch.fft.rfft(x), n=32), torch.fft.rfft(x, n=64), torch.fft.fft2(c),
                    torch.fft.ifft(c, dim=0), torch.fft.fftn(x, dim=(-2, -1)),
                    torch.stft(s, n_fft=16, hop_length=4, window=window, return_complex=True))

    args = (torch.randn(8, 32), torch.randn(8, 32, dtype=torch.complex64), torch.randn(2, 256), torch.hann_window(16))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Spectra(), args)
    assert [(op.target, op.flops) for op in graph.ops if op.kind == "reduction"] == [
        ("aten::fft_rfft", 3400.0), ("aten::fft_irfft", 3400.0), ("aten::fft_rfft", 7920.0),
        ("aten::fft_fft2", 10240.0), ("aten::fft_ifft", 3840.0), ("aten::fft_fftn", 5440.0), ("aten::stft", 23400.0)]
    with FlopCounterMode(display=False) as counter:
        Spectra()(*args)
    assert counter.get_total_flops() == 0


def test_broadcast_operands_of_the_built_in_losses_are_views():
    """F.mse_loss of the prediction [4, 1] and the target [4, 1] runs aten::broadcast_tensors first, which
    returns the operands expanded (aliases: no kernel, no bytes): it was warned about as an operator with no
    FLOP formula and charged as a kernel of 64 bytes."""

    class Regression(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 1)

        def forward(self, x, y):
            return F.mse_loss(self.a(x), y).unsqueeze(0)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelWarning)
        graph = import_module(Regression(), (torch.randn(4, 8), torch.randn(4, 1)))
    broadcast = [op for op in graph.ops if op.target == "aten::broadcast_tensors"]
    assert [(op.kind, op.flops, op.bytes_moved) for op in broadcast] == [("view", 0.0, 0.0)]


def test_a_node_too_large_for_every_device_is_not_blamed_on_the_peaks():
    """A node no device's memory holds is refused as such, whatever its name: a module named 'time_embed'
    matched the words of a time that does not fit the float range and was told to check the devices' peaks."""
    from placement.errors import InvalidInstanceError
    from placement.problem.instance import NodeFitsNoDeviceError

    class Diffusion(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_embed = nn.Embedding(250_000_000, 64)

        def forward(self, t):
            return self.time_embed(t)

    with torch.device("meta"):
        model, t = Diffusion(), torch.randint(0, 10, (8,))
    with pytest.raises(InvalidInstanceError) as error:
        import_torch(model, (t,), platform=make_platform("v100", "epyc-7763", 4, 0))
    assert type(error.value) is NodeFitsNoDeviceError
    assert str(error.value) == ("node 0 ('time_embed') fits no device: needs 6.4e+10 bytes, accelerator memory is "
                                "34359738368; no cpu devices")


class CachingNormed(nn.Module):
    """Two layers given torch.nn.utils.weight_norm, and a tensor forward keeps as a plain attribute."""

    def __init__(self) -> None:
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # deprecated for the parametrization
            self.a, self.b = nn.utils.weight_norm(nn.Linear(8, 8)), nn.utils.weight_norm(nn.Linear(8, 2))

    def forward(self, x):
        self.cache = x * 2
        return self.b(torch.tanh(self.a(x)))


def test_weights_the_norm_and_pruning_hooks_compute_draw_no_warning_to_register_them_as_buffers():
    """torch warned that weight_norm's, spectral_norm's and pruning's weights, which their hooks compute before
    each call, were tensor attributes assigned during export that must be registered as buffers: advice the
    model's user cannot follow, for weights the export reads as the operators they are. Other attributes are
    still told of."""
    from torch.nn.utils import prune

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        normed = nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 8)), nn.Tanh(),
                               nn.utils.spectral_norm(nn.Linear(8, 8)), nn.Tanh(), nn.Linear(8, 2)).eval()
    prune.l1_unstructured(normed[4], "weight", amount=0.5)
    for model, told in ((normed, []), (CachingNormed(), [["self.a.weight", "self.b.weight", "self.cache"]])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert import_module(model, (torch.randn(4, 8),)).ops
        assert [sorted(re.search(r"attributes? (.*) (?:was|were) assigned", str(w.message))[1].split(", "))
                for w in caught if "assigned during export" in str(w.message)] == told   # in any order


def test_a_misspelt_keyword_of_import_torch_names_the_one_meant():
    """docs/pytorch.md calls import_torch from Python: it said only 'got an unexpected keyword argument', where
    placement.solve names the keyword meant; refused before the model is exported."""
    with pytest.raises(TypeError) as error:
        import_torch(*mlp(), platform=make_platform(), trainig=True)
    assert str(error.value) == "import_torch() got an unexpected keyword argument 'trainig'; did you mean 'training'?"
