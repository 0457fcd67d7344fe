"""Which gradients the training cost model charges (placement.io.opgraph.gradient_flow)."""

from __future__ import annotations

import pytest

from placement.io.op_grouping import group_ops
from placement.io.opgraph import Gradient, Op, OpGraph, Param, backward_values, gradient_flow, gradient_values


def _op(name: str, kind: str, inputs=(), params=(), model_inputs=(), outputs=(4.0,), floating=()) -> Op:
    return Op(name, "t", kind, "fp32", 10.0, 20.0, outputs, tuple(inputs), tuple(params), (), (), (),
              tuple(model_inputs), tuple(floating))


W = Param("w", 16.0, True)
FROZEN = Param("f", 16.0, False)


def test_gradients_start_at_the_first_trained_parameter_and_follow_floating_outputs():
    # 0: a mask from the input ids (integer output); 1: a frozen matmul on the features; 2: max with
    # indices (values floating, indices integer) of a trained matmul 3's output ... in program order:
    ops = (
        _op("mask", "pointwise", model_inputs=["ids"], floating=(False,)),        # no trained operand
        _op("frozen", "matmul", model_inputs=["x"], params=[FROZEN]),              # nothing needs a gradient
        _op("trained", "matmul", inputs=[(1, 0)], params=[W]),                     # weight gradient alone
        _op("masked", "pointwise", inputs=[(2, 0), (0, 0)]),                       # one operand needs one
        _op("max", "reduction", inputs=[(3, 0)], outputs=(4.0, 8.0), floating=(True, False)),
        _op("gather", "gather", inputs=[(4, 1)]),                                  # reads only the indices
        _op("both", "matmul", inputs=[(4, 0), (3, 0)]),                            # two activations
        _op("frozen2", "matmul", inputs=[(6, 0)], params=[FROZEN]),                # input gradient alone
    )
    graph = OpGraph(ops, "m", "test", inputs=("ids", "x"))
    flow = gradient_flow(graph)
    assert flow == (Gradient(0, False), Gradient(0, False), Gradient(0, True), Gradient(1, False),
                    Gradient(1, False), Gradient(0, False), Gradient(2, False), Gradient(1, False))
    # factors: none, none, weight GEMM alone, pointwise 1, reduction 1, none, both GEMMs, input GEMM alone
    assert [op.backward_factor(g) for op, g in zip(ops, flow)] == [0, 0, 1, 1, 1, 0, 2, 1]
    assert [op.backward_kernels(g) for op, g in zip(ops, flow)] == [0, 0, 1, 1, 1, 0, 2, 1]
    # an input that needs a gradient (requires_grad=True) reaches the frozen matmul
    with_x = gradient_flow(OpGraph(ops, "m", "test", inputs=("ids", "x"), grad_inputs=("x",)))
    assert with_x[1] == Gradient(1, False) and with_x[2] == Gradient(1, True)
    assert ops[2].backward_factor(with_x[2]) == 2
    # a trained bias is no operand: the output needs a gradient, no GEMM is charged (BitFit)
    bias = Param("b", 4.0, True, operand=False)
    bitfit = _op("bitfit", "matmul", model_inputs=["x"], params=[FROZEN, bias])
    after = _op("after", "matmul", inputs=[(0, 0)], params=[FROZEN])
    flow = gradient_flow(OpGraph((bitfit, after), "m", "test", inputs=("x",)))
    assert flow == (Gradient(0, False, True), Gradient(1, False)) and flow[0].needed
    assert (bitfit.backward_factor(flow[0]), after.backward_factor(flow[1])) == (0, 1)


def test_only_tensors_that_need_a_gradient_flow_back_along_an_edge():
    ops = (
        _op("frozen", "matmul", model_inputs=["x"], params=[FROZEN], outputs=(12.0,)),
        _op("trained", "matmul", inputs=[(0, 0)], params=[W], outputs=(6.0,)),
        _op("add", "pointwise", inputs=[(0, 0), (1, 0)], outputs=(6.0,)),
        _op("positive", "pointwise", inputs=[(1, 0)], outputs=(1.0,), floating=(False,)),
    )
    pg = group_ops(OpGraph(ops, "m", "test", inputs=("x",)), "operator")
    # edges 0→1 (12 bytes), 0→2 (12), 1→2 (6), 1→3 (6): only the trained matmul's output needs a
    # gradient, and the comparison that reads it has none to send back
    assert [(a, b, size) for a, b, size in pg.edges] == [(0, 1, 12.0), (0, 2, 12.0), (1, 2, 6.0), (1, 3, 6.0)]
    assert [pg.gradient_bytes(e) for e in range(4)] == [0.0, 0.0, 6.0, 0.0]
    # the frozen matmul and the comparison save nothing for a backward pass; the others their outputs
    assert [pg.activation_bytes(v) for v in range(4)] == [0.0, 6.0, 6.0, 0.0]


def test_a_training_import_mirrors_no_edge_that_carries_a_boolean_mask_or_integer_positions():
    """A GPT-2-style model builds its causal mask (boolean) from the positions (integers) in the node that
    also adds the token and position embeddings, and every block's attention reads the mask: the edges that
    carry only the mask or the positions get no backward mirror (such values carry no gradient), those that
    carry the embeddings' sum do. An importer that mirrored every edge charged the mask's bytes as a gradient
    sent back to each block."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.nn import functional as F

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(8, 24), nn.Linear(8, 8)

        def forward(self, x, mask):
            b, s, _ = x.shape
            q, k, v = (t.view(b, s, 2, 4).transpose(1, 2) for t in self.qkv(x).split(8, -1))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return x + self.proj(y.transpose(1, 2).reshape(b, s, 8))

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(50, 8), nn.Embedding(6, 8)
            self.h = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(8, 50)

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1])
            x = self.wte(tokens) + self.wpe(pos)
            mask = (pos[None, :] <= pos[:, None]).expand(tokens.shape[0], 1, -1, -1)
            for block in self.h:
                x = block(x, mask)
            return self.head(x)

    torch.manual_seed(0)
    instance = import_torch(Masked(), (torch.randint(0, 50, (2, 6)),),
                            platform=make_platform("h100", "epyc-7763", 2, 0), training=True).instance
    names = {n["id"]: n["name"] for n in instance["nodes"]}
    mate = {n["forward"]: n["id"] for n in instance["nodes"] if n["isBackwardNode"]}
    sizes = {(e["sourceId"], e["destId"]): e["size"] for e in instance["edges"]}
    forward = {(names[a], names[b]): (size, sizes.get((mate[b], mate[a])))
               for (a, b), size in sizes.items() if a in mate and b in mate}
    assert {pair: sent for pair, sent in forward.items() if pair[0] in ("(model)", "(model)#1")} == {
        ("(model)", "wpe"): (48.0, None), ("(model)", "(model)#1"): (48.0, None),   # the positions, int64
        ("(model)#1", "h.0"): (72.0, None), ("(model)#1", "h.1"): (72.0, None),     # the mask, bool
        ("(model)#1", "h.0.qkv"): (384.0, 384.0), ("(model)#1", "h.0#1"): (384.0, 384.0)}   # the embeddings' sum


def _autograd_truth(model, args):
    """Per operator of the exported program, whether autograd gives its output ``requires_grad`` once
    the program has run (a tensor written in place later, ``out[:, 0] = h``, has one from then on):
    the program run on ``args`` with the model's parameters, node by node (tensor outputs only)."""
    import torch

    program = torch.export.export(model, args)
    seen: dict[str, torch.Tensor] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op == "call_function" and isinstance(out, torch.Tensor):
                seen[n.name] = out
            return out

    Recorder(program.module()).run(*args)
    return program, {name: out.requires_grad for name, out in seen.items()}


def _models():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class StopAndMask(nn.Module):   # detach, a comparison, an index, a constant from a shape, where
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)

        def forward(self, x):
            h = self.a(x)
            keep, z = h > 0, torch.zeros_like(h)
            g = self.b(torch.where(keep, h, z).detach())
            return self.c(g + torch.full_like(g, 2.0).triu(1)), h.argmax(-1)

    class Masked(nn.Module):        # an attention-style mask from integer inputs, a frozen embedding
        def __init__(self):
            super().__init__()
            self.emb, self.fc = nn.Embedding(10, 8), nn.Linear(8, 8)
            self.emb.weight.requires_grad_(False)

        def forward(self, ids, mask):
            bias = (1.0 - mask.to(torch.float32)) * -1e4
            return torch.softmax(self.fc(self.emb(ids)) + bias.unsqueeze(-1), -1)

    frozen_stem = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(),
                                nn.Linear(64, 2))
    for p in (*frozen_stem[0].parameters(), *frozen_stem[1].parameters()):
        p.requires_grad_(False)
    bitfit = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 2))
    for layer in (bitfit[0], bitfit[2], bitfit[3]):
        layer.weight.requires_grad_(False)
    class Assembled(nn.Module):     # a tensor made by zeros and filled through slices (ViT's class token)
        def __init__(self):
            super().__init__()
            self.cls, self.embed, self.head = nn.Parameter(torch.randn(4)), nn.Linear(4, 4), nn.Linear(4, 2)

        def forward(self, x):
            h = torch.zeros(x.shape[0] + 1, 4)
            h[0] = self.cls
            h[1:] = self.embed(x)
            return self.head(h)

    x = torch.randn(3, 4)
    return [(StopAndMask(), (x,)), (StopAndMask(), (x.clone().requires_grad_(True),)), (Assembled(), (x,)),
            (Masked(), (torch.randint(0, 10, (2, 5)), torch.ones(2, 5, dtype=torch.int64))),
            (frozen_stem.train(), (torch.randn(2, 3, 8, 8),)), (bitfit, (x,))]


def test_the_values_that_need_a_gradient_are_those_autograd_gives_one():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.io.torch_export import graph_from_program

    for model, args in _models():
        program, truth = _autograd_truth(model, args)
        graph = graph_from_program(program, type(model).__name__)
        values = gradient_values(graph)
        checked = {name: (any(values[name]), wanted) for name, wanted in truth.items() if name in values}
        assert len(checked) >= 4 and all(ours == wanted for ours, wanted in checked.values()), (
            type(model).__name__, {name: pair for name, pair in checked.items() if pair[0] != pair[1]})
    assert torch is not None


def _backward_truth(model, args):
    """Per operator of the exported program, whether autograd gives its output a gradient (none: ``None``)
    in the backward pass of the sum of the program's floating-point results (tensor outputs that need
    one once the program has run only, as :func:`_autograd_truth` records them)."""
    import torch

    program = torch.export.export(model, args)
    seen: dict[str, torch.Tensor] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op == "call_function" and isinstance(out, torch.Tensor) and out.requires_grad:
                seen[n.name] = out
            return out

    results = Recorder(program.module()).run(*args)
    results = results if isinstance(results, tuple) else (results,)
    loss = sum(r.sum() for r in results if r.is_floating_point())
    grads = torch.autograd.grad(loss, list(seen.values()), allow_unused=True)
    return program, {name: grad is not None for name, grad in zip(seen, grads)}


def test_the_values_that_get_a_gradient_are_those_autograd_gives_one():
    """backward_values leaves out the values that need a gradient but get none (StopAndMask's first linear,
    read through detach and argmax alone, and what it computes from it before them): a stage sending such a
    value declared a gradient for it, and torch's runtime sent zeros back, which left zero gradients where
    autograd leaves none. It leaves out no value autograd gives a gradient (views written through later, as
    Assembled's slices, are kept: autograd gives their old versions none, but what they were written with,
    one)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.io.torch_export import graph_from_program

    left_out = {}
    for model, args in _models():
        program, truth = _backward_truth(model, args)
        graph = graph_from_program(program, type(model).__name__)
        values, needs = backward_values(graph), gradient_values(graph)
        assert sum(name in values for name in truth) >= 3
        assert not [name for name, wanted in truth.items() if wanted and not any(values[name])], type(model).__name__
        left_out[type(model).__name__] = sorted(name for name in values if any(needs[name]) and not any(values[name]))
    assert left_out == {"StopAndMask": ["linear", "where"], "Assembled": [], "Masked": [], "Sequential": []}


def test_a_layer_whose_result_reaches_the_loss_only_through_detach_computes_no_gradient():
    """StopAndMask's first linear needs a gradient in the forward pass (it is trained), but what it
    makes reaches the results only through detach, a comparison and argmax: autograd never runs its
    backward (its weight gets no gradient), and neither is it charged."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.io.torch_export import graph_from_program

    model, args = _models()[0]
    graph = graph_from_program(torch.export.export(model, args), "StopAndMask")
    flow = dict(zip((op.name for op in graph.ops), gradient_flow(graph)))
    assert any(gradient_values(graph)["linear"]) and not flow["linear"].needed
    assert flow["linear_1"] == Gradient(0, True, True) and flow["linear_2"].needed   # weight and bias, not input
    out, index = model(*args)
    out.sum().backward()
    assert model.a.weight.grad is None and model.b.weight.grad is not None


def test_a_tensor_filled_through_slices_carries_the_gradients_written_into_it():
    """``h = zeros(...); h[0] = cls; h[1:] = embed(x); head(h)``: autograd gives ``h`` a gradient through
    the writes into it, so ``embed`` runs backward (its weight and bias; its input ``x`` needs none)
    and ``head`` computes the gradient of ``h`` besides its weight's, as for ``torch.cat``; both were
    charged as if ``h`` needed none (``embed`` no backward at all), and a stage boundary after ``h``
    declared it no gradient. ``h`` holds data once ``embed``'s result is written into it: ``head``'s
    gradient of it is an activation gradient, not a weight gradient."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.io.torch_export import graph_from_program

    model, args = _models()[2]
    graph = graph_from_program(torch.export.export(model, args), "Assembled")
    flow = dict(zip((op.name for op in graph.ops), gradient_flow(graph)))
    assert gradient_values(graph)["zeros"] == (True,)
    assert flow["linear"] == Gradient(0, 1, True) and flow["linear_1"] == Gradient(1, 1, True)
    assert [op.writes for op in graph.ops if op.target.startswith("aten::copy_")] == [
        ((1, 0), (0, 0)), ((4, 0), (0, 0))]   # the select or slice written into, and zeros itself


def test_weights_read_through_a_view_or_multiplied_together_are_weight_gradients():
    """``h @ W.t()`` reads its weight through a transpose and ``y @ (A @ B)`` a product of two
    parameters (a merged low-rank update): their gradients are weight gradients. Checked against
    autograd's GEMM FLOPs: the weight part is what the backward does beyond the one it does with
    every parameter frozen (activation gradients alone), the input needing a gradient in both."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.costmodel.roofline import bundled_catalogue
    from placement.io.opgraph import node_time_ms, weight_time_ms
    from placement.io.torch_export import graph_from_program

    class Merged(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(4, 8, bias=False)
            self.w = nn.Parameter(torch.randn(6, 8))
            self.a, self.b = nn.Parameter(torch.randn(6, 3)), nn.Parameter(torch.randn(3, 5))

        def forward(self, x):
            return (torch.relu(self.first(x)) @ self.w.t()) @ (self.a @ self.b)

    torch.manual_seed(0)
    model, x = Merged(), torch.randn(2, 4, requires_grad=True)

    def backward_flops(trained: bool) -> int:
        for p in model.parameters():
            p.requires_grad_(trained)
        out = model(x)
        with FlopCounterMode(display=False) as counter:
            out.sum().backward()
        return counter.get_total_flops()

    activations = backward_flops(False)
    everything = backward_flops(True)      # and the parameters stay trained for the export
    graph = graph_from_program(torch.export.export(model, (x,)), "Merged")
    flow = dict(zip((op.name for op in graph.ops), gradient_flow(graph)))
    # first: x (an input needing a gradient) and its weight; matmul: h and W through t; matmul_1: a and b
    # alone (its output is made of parameters); matmul_2: the activation and that product
    assert (flow["linear"], flow["t"], flow["matmul"], flow["matmul_1"], flow["matmul_2"]) == (
        Gradient(1, 1), Gradient(0, 1, weight_only=True), Gradient(1, 1), Gradient(0, 2, weight_only=True),
        Gradient(1, 1))
    gemms = [(op, flow[op.name]) for op in graph.ops if op.kind == "matmul"]
    # forward 2·2·4·8 = 128, 2·2·8·6 = 192, 2·6·3·5 = 180, 2·2·6·5 = 120: backward 2 × 620, of which
    # the weight part 128 + 192 + 2·180 + 120 = 800 and the activation part 128 + 192 + 120 = 440
    assert sum(op.backward_flops(g) for op, g in gemms) == everything == 1240
    assert sum(op.weight_factor(g) * op.flops for op, g in gemms) == everything - activations == 800
    # one node per operator: the product of the two parameters is weight gradient entirely
    pg = group_ops(graph, "operator")
    device = next(iter(bundled_catalogue().values()))
    product = next(v for v in range(len(pg.nodes)) if [op.name for op in pg.node_ops(v)] == ["matmul_1"])
    assert weight_time_ms(pg, product, device) == node_time_ms(pg, product, device, backward=True) > 0


def test_a_layer_nobody_reads_runs_no_backward_and_a_layer_without_gradients_holds_none():
    """``unused`` is trained but its result is neither read nor returned; ``cut``'s result reaches the
    loss only through ``detach``: autograd gives neither weight a gradient, so their backward nodes do
    no work and hold no gradient (``used``'s holds its 8·4 + 4 floats: 144 bytes)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Dead(nn.Module):
        def __init__(self):
            super().__init__()
            self.unused, self.cut, self.used = nn.Linear(8, 4), nn.Linear(8, 8), nn.Linear(8, 4)

        def forward(self, x):
            self.unused(x)
            return self.used(torch.relu(self.cut(x)).detach())

    torch.manual_seed(0)
    model, x = Dead(), torch.randn(2, 8)
    model(x).sum().backward()
    assert model.unused.weight.grad is None and model.cut.weight.grad is None and model.used.weight.grad is not None
    instance = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 1), training=True,
                            granularity="module").instance
    nodes = {n["name"]: n for n in instance["nodes"]}
    for name in ("unused", "cut"):
        assert (nodes[f"{name}.grad"]["fpgaLatency"], nodes[f"{name}.grad"]["size"]) == (0, 0), name
    # the forward nodes keep their parameters and save no activation: (8·4 + 4)·4 and (8·8 + 8)·4 bytes
    assert (nodes["unused"]["size"], nodes["cut"]["size"]) == (144, 288)
    assert nodes["used.grad"]["size"] == (8 * 4 + 4) * 4 and nodes["used.grad"]["fpgaLatency"] > 0


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("layer, pre", [("rnn", False), ("gru2", False), ("gru2", True), ("birnn", False),
                                        ("lstm-proj", False)])
def test_recurrent_layers_are_charged_the_gradient_gemms_autograd_runs(layer, pre):
    """Backward through time: the weight gradients (the forward's FLOPs), the hidden state's gradient
    over T − 1 steps, the later layers' input gradients, and the first layer's only where its input
    needs one (``pre``: a trained linear before it). An RNN of 20 on 7 steps of 3 × 12 whose input
    needs none: weights 2·21·20·12 + 2·21·20·20 = 26,880, state 2·18·20·20 = 14,400: 41,280, as
    autograd's GEMMs (FlopCounterMode, less the head's) count. It was 2 × forward, all of it weight
    gradient in the split-backward model, where the state's gradient is activation gradient."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    torch.manual_seed(0)
    recurrent, width = {"rnn": (lambda: nn.RNN(12, 20), 20), "gru2": (lambda: nn.GRU(12, 16, num_layers=2), 16),
                        "birnn": (lambda: nn.RNN(12, 20, bidirectional=True), 40),
                        "lstm-proj": (lambda: nn.LSTM(12, 20, proj_size=6), 6)}[layer]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre, self.layer, self.head = nn.Linear(12, 12), recurrent(), nn.Linear(width, 3)

        def forward(self, x):
            return self.head(self.layer(self.pre(x) if pre else x)[0])

    model, x = Model(), torch.randn(7, 3, 12)
    graph = graph_from_program(export_program(model, (x,)), "Model")
    flow = gradient_flow(graph)
    out = model(x)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    linear = sum(op.backward_flops(g) for op, g in zip(graph.ops, flow) if op.kind == "matmul")
    (op, gradient), = [(op, g) for op, g in zip(graph.ops, flow) if op.kind == "recurrent"]
    assert op.backward_flops(gradient) == counter.get_total_flops() - linear
    # the weight gradients are the forward's FLOPs; the rest is activation gradient
    assert op.weight_factor(gradient) * op.flops == op.flops
    if layer == "rnn":
        assert (op.flops, op.backward_flops(gradient)) == (26880, 41280)


@pytest.mark.parametrize("layer, state, trained, expected", [
    ("rnn", "parameter", True, 43680), ("rnn", "parameter", False, 16800), ("rnn", "expanded", False, 16800),
    ("rnn", "input", False, 16800), ("rnn", "plain input", True, 41280), ("gru2", "parameter", False, 151200)])
def test_a_learned_initial_state_is_charged_its_own_gradient(layer, state, trained, expected):
    """A recurrent layer whose initial hidden state needs a gradient (a trained parameter, a value
    computed from one, or an input that asks for one) runs the recurrent GEMM of the first step
    backward too; its weight gradients only where its weights train. An RNN of 20 on 7 steps of 3 × 12
    (one step's state GEMM: 2·3·20·20 = 2,400): trained, 26,880 for the weights and 7 · 2,400 for the
    state, 43,680; frozen, the state alone, 16,800; the initial state a plain input, 41,280 (6 steps).
    A frozen 2-layer GRU of 20 (one step's GEMM 2·3·60·20 = 7,200): 2 · 7 · 7,200 for the state and
    2·21·60·20 = 50,400 for the second layer's input, 151,200. The weights were charged whatever the
    state: 41,280 and 318,240 with frozen weights, 2.5 and 2.1 times autograd's GEMMs."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    layers = 2 if layer == "gru2" else 1

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.GRU(12, 20, num_layers=2) if layer == "gru2" else nn.RNN(12, 20)
            self.h0 = nn.Parameter(torch.randn(layers, 1 if state == "expanded" else 3, 20))
            for p in self.layer.parameters():
                p.requires_grad_(trained)

        def forward(self, x, h=None):
            initial = {"parameter": self.h0, "expanded": self.h0.expand(layers, 3, 20)}.get(state, h)
            return self.layer(x, initial)[0].sum(dim=-1)

    torch.manual_seed(0)
    x = torch.randn(7, 3, 12)
    h = torch.randn(layers, 3, 20, requires_grad=state == "input")
    model = Model()
    args = (x, h) if "input" in state else (x,)
    graph = graph_from_program(export_program(model, args), "Model")
    out = model(*args)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    (op, gradient), = [(op, g) for op, g in zip(graph.ops, gradient_flow(graph)) if op.kind == "recurrent"]
    assert op.backward_flops(gradient) == counter.get_total_flops() == expected
    # the first step's state GEMM is no weight gradient
    assert op.weight_factor(gradient) * op.flops == (op.flops if trained else 0)


@pytest.mark.parametrize("form", ["mm", "einsum", "parameter"])
def test_an_operand_given_twice_has_a_gradient_through_each_place(form):
    """``h @ h``, ``einsum("bid,bjd->bij", h, h)`` and ``W @ W``: autograd computes a GEMM per place the
    operand fills, 2 × forward; one was charged. ``mm`` of 64 × 64 (forward 2·64³ = 524,288) after a
    linear of 64 whose input needs none (its weight gradient, 524,288): 1,572,864, as FlopCounterMode
    counts; the einsum of 4 × 16 × 32 (forward 2·4·16·16·32 = 65,536) after a linear of 32 on 64 rows
    (65,536): 262,144. ``x @ (W @ W)``, ``x`` needing none: the product's GEMM for ``W @ W`` (524,288)
    and the weight product's two (1,048,576), 1,572,864, all of it weight gradient."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            width = 32 if form == "einsum" else 64
            self.l = nn.Linear(width, width)
            self.w = nn.Parameter(torch.randn(64, 64) / 8)

        def forward(self, x):
            if form == "parameter":
                return x @ (self.w @ self.w)
            h = self.l(x)
            return torch.mm(h, h) if form == "mm" else torch.einsum("bid,bjd->bij", h, h)

    torch.manual_seed(0)
    x = torch.randn(4, 16, 32) if form == "einsum" else torch.randn(64, 64)
    model = Model()
    graph = graph_from_program(export_program(model, (x,)), "Model")
    flow = gradient_flow(graph)
    out = model(x)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    total = sum(op.backward_flops(g) for op, g in zip(graph.ops, flow))
    assert total == counter.get_total_flops() == {"mm": 1572864, "einsum": 262144, "parameter": 1572864}[form]
    product = [(op, g) for op, g in zip(graph.ops, flow) if op.kind == "matmul"][-1 if form != "parameter" else 0]
    assert product[0].backward_factor(product[1]) == 2.0
    assert product[0].weight_factor(product[1]) == (2.0 if form == "parameter" else 0.0)


@pytest.mark.parametrize("form", ["cross-attention", "addmm", "cast bias"])
def test_a_term_added_to_a_product_is_no_operand_of_it_whatever_computes_it(form):
    """The bias of ``nn.MultiheadAttention``'s cross-attention projections is a slice of its packed bias, an
    operator's output computed from parameters alone; ``addmm``'s added term is an activation; a bias cast to
    another type is a cast of a parameter: each was counted as an operand of the product, a second GEMM. So the
    key-value projection of a memory that needs no gradient (a model input) was charged 2 × its forward where
    autograd runs one GEMM, and the query projection's gradient was all weight gradient. Checked against the
    GEMMs autograd runs (``aten.mm``). ``cross-attention`` (query 2 × 5 × 16 after a linear of 16 on the input,
    memory 2 × 6 × 16, 2 heads): that linear's weight GEMM (2·10·16·16 = 5,120), the query projection's two,
    the key-value projection's weight GEMM (2·12·32·16 = 12,288) and the output projection's two: 37,888.
    ``addmm(h, x, W)`` after a linear of 16 on 8 rows, ``x`` needing none: its weight GEMM (2·8·16·16 = 4,096)
    and the linear's (4,096): 8,192. The cast bias of a linear on the input: its weight GEMM alone, 4,096."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            self.w = nn.Parameter(torch.randn(16, 16) / 4)
            self.b = nn.Parameter(torch.randn(16, dtype=torch.float64))

        def forward(self, x, memory):
            if form == "cross-attention":
                return self.attn(self.q(x), memory, memory, need_weights=False)[0]
            if form == "addmm":
                return torch.addmm(self.q(x), x, self.w)
            return nn.functional.linear(x, self.w, self.b.float())

    torch.manual_seed(0)
    model = Model()
    args = (torch.randn(2, 5, 16), torch.randn(2, 6, 16)) if form == "cross-attention" else (
        torch.randn(8, 16), torch.randn(1))
    graph = graph_from_program(export_program(model, args), "Model")
    products = [(op, g) for op, g in zip(graph.ops, gradient_flow(graph)) if op.kind == "matmul"]
    out = model(*args)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    gemms = counter.get_flop_counts()["Global"][torch.ops.aten.mm]
    charged = sum(op.backward_flops(g) for op, g in products)
    assert charged == gemms == {"cross-attention": 37888, "addmm": 8192, "cast bias": 4096}[form]
    weights = [op.weight_factor(g) for op, g in products]
    assert weights == {"cross-attention": [1.0, 1.0, 1.0, 1.0], "addmm": [1.0, 1.0], "cast bias": [1.0]}[form]


@pytest.mark.parametrize("form", ["parameter", "activation", "model input"])
def test_a_value_added_to_a_product_and_multiplied_in_it_is_one_operand_of_it(form):
    """``addmm(P, x, P)`` adds the trained ``P`` to the product and multiplies by it: its gradient through the
    product is a GEMM (the added place's is the output's), as autograd runs it (``aten.mm``). Read as an added
    term alone, ``P`` was no operand, and the weight gradient went uncharged (factor 0). ``addmm(h, h, W)`` and
    ``addmm(x, x, W)`` (``x`` needing a gradient) count their value once, in the place it is multiplied: the
    added place is no second operand. 16 × 16 matrices: a GEMM of 2·16·16·16 = 8,192 FLOPs; ``activation``
    adds the weight GEMM of the linear making ``h``."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.p = nn.Parameter(torch.randn(16, 16) / 4)

        def forward(self, x):
            if form == "parameter":
                return torch.addmm(self.p, x, self.p)
            if form == "activation":
                h = self.q(x)
                return torch.addmm(h, h, self.p)
            return torch.addmm(x, x, self.p)

    torch.manual_seed(0)
    model = Model()
    x = torch.randn(16, 16).requires_grad_(form == "model input")
    graph = graph_from_program(export_program(model, (x,)), "Model")
    products = [(op, g) for op, g in zip(graph.ops, gradient_flow(graph)) if op.kind == "matmul"]
    out = model(x)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    gemms = counter.get_flop_counts()["Global"][torch.ops.aten.mm]
    charged = sum(op.backward_flops(g) for op, g in products)
    assert charged == gemms == {"parameter": 8192, "activation": 24576, "model input": 16384}[form]
    assert [(op.backward_factor(g), op.weight_factor(g)) for op, g in products] == {
        "parameter": [(1.0, 1.0)], "activation": [(1.0, 1.0), (2.0, 1.0)], "model input": [(2.0, 1.0)]}[form]


# equation, operands (x: a model input, needing a gradient where upper case; w: trained, f: frozen; c: computed
# from an input and a trained scale; r1: operand 1 again), shapes; then backward FLOPs, their weight part,
# kernels (all, weight part's), and the gradient's GEMMs (m, n, k) or multiplies (elements)
EINSUMS = {
    "input needing none": ("ij,jk,kl->il", "x w w", [(2, 3), (3, 4), (4, 5)], 208, 128, (3, 2),
                           [(3, 4, 2), (2, 4, 5), (4, 5, 2)]),
    "input needing one": ("ij,jk,kl->il", "X w w", [(2, 3), (3, 4), (4, 5)], 256, 128, (4, 2),
                          [(2, 3, 4), (3, 4, 2), (2, 4, 5), (4, 5, 2)]),
    "first weight frozen": ("ij,jk,kl->il", "x f w", [(2, 3), (3, 4), (4, 5)], 80, 80, (1, 1), [(4, 5, 2)]),
    "last weight frozen": ("ij,jk,kl->il", "x w f", [(2, 3), (3, 4), (4, 5)], 128, 48, (2, 1),
                           [(3, 4, 2), (2, 4, 5)]),
    "parameters alone": ("ij,jk,kl->il", "w w w", [(2, 3), (3, 4), (4, 5)], 256, 256, (4, 4),
                         [(2, 3, 4), (3, 4, 2), (2, 4, 5), (4, 5, 2)]),
    "computed, repeated": ("ij,jk,kl,lm->im", "c w r1 x", [(8, 9), (9, 9), (9, 11)], 6768, 2592, (5, 2),
                           [(8, 9, 9), (9, 9, 8), (8, 9, 9), (9, 9, 8), (8, 9, 11)]),
    "ellipsis": ("...ij,jk,kl->...il", "X w f", [(2, 3, 4, 5), (5, 6), (6, 7)], 4896, 1440, (3, 1),
                 [(24, 5, 6), (5, 6, 24), (24, 6, 7)]),
    "multiplies": ("bi,bj,bk->bijk", "x w w", [(4, 3), (4, 5), (4, 6)], 780, 420, (3, 2), [60, 360, 360]),
    # 54 + 36 forward, 54 + 2 · 36 = 126 backward: the factor 126 / 90 times 90 is 125.99999999999999
    "whole count": ("ij,jk,kl->il", "x w w", [(3, 3), (3, 3), (3, 2)], 126, 90, (3, 2),
                    [(3, 3, 3), (3, 3, 2), (3, 2, 3)]),
}


@pytest.mark.parametrize("case", sorted(EINSUMS))
def test_an_einsum_of_three_or_more_operands_differentiates_each_of_its_products(case, monkeypatch):
    """An einsum of three or more operands runs products of two (``ij,jk,kl->il``: ``x·W1``, 48 FLOPs, then
    ``(x·W1)·W2``, 80), and autograd differentiates each: one product of its size per factor that needs a
    gradient, a factor that is a product needing one where any of its operands does. ``x`` needing none: 48
    for ``W1`` and 2 · 80, 208 as FlopCounterMode counts, where one GEMM per operand, at most 2, charged 256;
    the weight part, 48 + 80, those of factors computed from parameters alone (``x·W1`` is not one: its
    gradient is an activation's, as between two matmuls), in 2 kernels of the 3. A product that sums no index
    both factors share multiplies (``bi,bj,bk->bijk``: 60 and 360 elements; FlopCounterMode counts no
    multiply); its gradient multiplies as often."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from placement.io.torch_export import export_program, graph_from_program

    equation, kinds, shapes, backward, weight, kernels, gradient_ops = EINSUMS[case]
    kinds = kinds.split()
    monkeypatch.setattr(torch.backends.opt_einsum, "enabled", False)   # left to right, whatever is installed
    torch.manual_seed(0)
    given = iter(shapes)
    shape_of = [None if kind.startswith("r") else next(given) for kind in kinds]

    class Einsum(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.tensor(2.0))
            self.w = nn.ParameterList(nn.Parameter(torch.randn(*shape), requires_grad=kind == "w")
                                      for kind, shape in zip(kinds, shape_of) if kind in "wf")

        def forward(self, *inputs):
            values, weights, given = [], iter(self.w), iter(inputs)
            for kind in kinds:
                values.append(next(weights) if kind in "wf" else values[int(kind[1])] if kind.startswith("r")
                              else torch.sin(next(given)) * self.scale if kind == "c" else next(given))
            return torch.einsum(equation, *values)

    inputs = tuple(torch.randn(*shape, requires_grad=kind == "X") for kind, shape in zip(kinds, shape_of)
                   if kind in "xXc")
    model = Einsum()
    graph = graph_from_program(export_program(model, inputs), "Einsum")
    (op, gradient), = [(op, g) for op, g in zip(graph.ops, gradient_flow(graph)) if "einsum" in op.target]
    out = model(*inputs)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    gemm_flops = sum(2 * s.m * s.n * s.k * s.batch for s in op.backward_operators(gradient) if s.kind == "gemm")
    assert gemm_flops == counter.get_total_flops()
    assert (op.backward_flops(gradient), op.weight_factor(gradient) * op.flops) == (backward, weight)
    assert (op.backward_kernels(gradient), op.weight_kernels(gradient)) == kernels
    assert kernels[0] == len(op.backward_operators(gradient))
    assert op.kernels == len(op.operators) == len(kinds) - 1    # forward: one kernel per product
    assert [(s.m, s.n, s.k) if s.kind == "gemm" else s.elements for s in op.backward_operators(gradient)] \
        == gradient_ops
    assert op.backward_bytes(gradient) == op.bytes_moved * backward / op.flops
