"""One model, two importers: torch.export and ONNX give the same node groups, costs and plans.

Each model is imported through ``torch.export`` (placement.io.torch_export) and through
``torch.onnx.export`` + the ONNX reader (placement.io.onnx_import), at module granularity,
on 4 H100 and 1 EPYC 7763 socket. The two readers share no operator table: the ONNX side
sees the exporter's decomposition (MatMul + Add for a linear layer on a 3-D tensor,
InstanceNormalization + Mul + Add for GroupNorm, MatMul/Softmax/MatMul for attention) and
must cost it as the one kernel PyTorch runs. Per node group: equal FLOPs, times within 10%
on both devices, the same transfer sizes within 10%; and the optimal plans (DP) hold the
same node names per stage with the same objective within 10%.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")
pytest.importorskip("onnxscript", reason="torch.onnx.export needs onnxscript")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import placement  # noqa: E402
from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.io.onnx_import import import_onnx  # noqa: E402
from placement.io.torch_export import import_torch  # noqa: E402
from tests.test_torch_pipelining import TinyTransformer  # noqa: E402

TOLERANCE = 0.10


class MLP(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, width)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.norm(F.relu(self.fc2(self.act(self.fc1(x))))))


class UNet(nn.Module):
    """Two-level U-Net: BatchNorm convolutions, a residual add, a transposed convolution, a skip concat."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.enc2 = nn.Sequential(nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU())
        self.mid = nn.Conv2d(2 * width, 2 * width, 3, padding=1)
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * width, width, 3, padding=1), nn.ReLU())
        self.out = nn.Conv2d(width, 2, 1)

    def forward(self, x):
        skip = self.enc1(x)
        low = self.enc2(self.pool(skip))
        low = low + self.mid(low)
        return self.out(self.dec(torch.cat([self.up(low), skip], dim=1)))


class Activations(nn.Module):
    """The kernels an exporter writes as several ONNX nodes at the opsets without them: GELU (both
    forms), SiLU, Mish, Hardswish, softplus, log-sigmoid, LayerNorm (below opset 17), RMSNorm; with ``elu``,
    an ELU after the softplus."""

    def __init__(self, width: int = 32, rms: bool = True, elu: bool = False) -> None:
        super().__init__()
        self.elu = nn.ELU() if elu else nn.Identity()
        self.up = nn.Linear(16, width)
        self.gelu = nn.GELU()
        self.tanh_gelu = nn.GELU(approximate="tanh")
        self.silu = nn.SiLU()
        self.mish = nn.Mish()
        self.hardswish = nn.Hardswish()
        self.softplus = nn.Softplus()
        self.log_sigmoid = nn.LogSigmoid()
        self.norm = nn.LayerNorm(width)
        self.rms = nn.RMSNorm(width) if rms else nn.Identity()
        self.down = nn.Linear(width, 10)

    def forward(self, x):
        h = self.up(x)
        h = self.hardswish(self.mish(self.silu(self.tanh_gelu(self.gelu(h)))))
        return self.down(self.rms(self.norm(self.log_sigmoid(self.elu(self.softplus(h))))))


class MaskedAttention(nn.Module):
    """Attention under a boolean mask given as an input: the exporters write it as ``Where(mask, 0, -inf)``
    added to the scores and guard the softmax's fully hidden rows with ``IsNaN`` and ``Where``."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(h.transpose(1, 2).reshape(b, n, d))


class Sampling(nn.Module):
    """A convolution resampled at a grid (grid_sample: ONNX GridSample), laid out as 3 × 3 patches by a 1 × 1
    convolution and folded back (col2im: Col2Im), then sorted (sort: TopK of every element) and the 4 largest
    of each row kept (topk: TopK)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.columns = nn.Conv2d(3, 27, 1)

    def forward(self, x, grid):
        h = self.columns(F.grid_sample(self.conv(x), grid, align_corners=False))
        h = F.fold(h.flatten(2), (8, 8), 3, padding=1)
        return torch.topk(torch.sort(h.flatten(1), dim=-1)[0], 4)[0]


def _cases():
    torch.manual_seed(0)
    causal = torch.ones(2, 1, 8, 8, dtype=torch.bool).tril()
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2,
                                    enable_nested_tensor=False)
    decoder = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True)
    return {
        "mlp": (MLP(), (torch.randn(8, 16),), {}),
        # eval-mode BatchNorm: the exporter's optimiser would fold it into the convolution (a
        # different program from the one PyTorch runs), so this export is not optimised
        "unet": (UNet().eval(), (torch.randn(2, 3, 16, 16),), {"optimize": False}),
        # unoptimised, GroupNorm's weight and bias are unsqueezed along the axes of a Range and cast to their
        # own type before the affine Mul and Add: views of the parameters, which join the one group_norm kernel
        "groupnorm-unoptimised": (nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                                                nn.Conv2d(16, 8, 1)), (torch.randn(2, 8, 8, 8),), {"optimize": False}),
        "transformer": (TinyTransformer(layers=2), (torch.randint(0, 50, (2, 8)),), {}),
        # causal attention (is_causal=True) has its mask computed from constants in ONNX by these
        # exports, and the TorchScript exporter names a container's children "blocks/blocks.0"
        "transformer-unoptimised": (TinyTransformer(layers=2), (torch.randint(0, 50, (2, 8)),), {"optimize": False}),
        "transformer-opset17": (TinyTransformer(layers=2), (torch.randint(0, 50, (2, 8)),),
                                {"opset_version": 17, "dynamo": False}),
        "encoder": (encoder.eval(), (torch.randn(2, 8, 32),), {}),  # dropout in evaluation: no operator
        # cross-attention: the dynamo exporter splits in_proj_bias into the query's and the key-value
        # projections' biases, which PyTorch takes as views, one linear kernel each (one layer: of two, the
        # second would read the first's transpose of the memory, which the exporter writes once)
        "decoder": (decoder.eval(), (torch.randn(2, 8, 32), torch.randn(2, 6, 32)), {}),
        # the default opset has Gelu, Mish, HardSwish and LayerNormalization, but no SiLU, RMSNorm,
        # thresholded softplus or log-sigmoid; opset 13 without dynamo has none of them
        "activations": (Activations(), (torch.randn(4, 8, 16),), {}),
        # unoptimised: softplus with its beta as a Mul and a Div, ELU between the Muls of its scales
        "activations-unoptimised": (Activations(elu=True), (torch.randn(4, 8, 16),), {"optimize": False}),
        "activations-opset13": (Activations(rms=False), (torch.randn(4, 8, 16),),
                                {"opset_version": 13, "dynamo": False}),
        "bool-mask": (MaskedAttention(), (torch.randn(2, 8, 32), causal), {}),
        "bool-mask-opset17": (MaskedAttention(), (torch.randn(2, 8, 32), causal), {"opset_version": 17, "dynamo": False}),
        # grid_sample, fold (Col2Im, opset 18: the dynamo exporter's), sort and topk (both TopK)
        "sampling": (Sampling(), (torch.randn(2, 3, 8, 8), torch.rand(2, 8, 8, 2) * 2 - 1), {}),
    }


CASES = _cases()


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    paths = {}
    for name, (model, args, options) in CASES.items():
        paths[name] = folder / f"{name}.onnx"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(paths[name]), **options)
    return paths


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", list(CASES))
def test_both_importers_cost_and_plan_alike(onnx_files, name, training):
    model, args, _ = CASES[name]
    platform = make_platform("h100", "epyc-7763", 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no operator without a cost formula on either side
        via_torch = import_torch(model, args, platform=platform, training=training, granularity="module")
        via_onnx = import_onnx(onnx_files[name], platform=platform, training=training, granularity="module")
    a, b = via_torch.instance, via_onnx.instance
    assert [n["name"] for n in a["nodes"]] == [n["name"] for n in b["nodes"]]
    for x, y in zip(a["nodes"], b["nodes"]):
        assert x["flops"] == y["flops"], x["name"]
        for key in ("fpgaLatency", "cpuLatency"):
            assert _close(x[key], y[key]), (x["name"], key, x[key], y[key])
    edges = {(e["sourceId"], e["destId"]): e["size"] for e in a["edges"]}
    assert set(edges) == {(e["sourceId"], e["destId"]) for e in b["edges"]}
    assert all(_close(edges[e["sourceId"], e["destId"]], e["size"]) for e in b["edges"])

    plan_a, plan_b = placement.solve(via_torch.problem), placement.solve(via_onnx.problem)
    assert plan_a.status == plan_b.status == "optimal"
    assert _close(plan_a.value, plan_b.value)
    names_a = [n.name for n in via_torch.problem.nodes]
    names_b = [n.name for n in via_onnx.problem.nodes]
    stages_a = [(s.device_type, sorted(names_a[v] for v in s.nodes)) for s in plan_a.plan if s.nodes]
    stages_b = [(s.device_type, sorted(names_b[v] for v in s.nodes)) for s in plan_b.plan if s.nodes]
    if stages_a != stages_b:  # a tie: then each plan is optimal for the other importer's costs too
        assert _close(placement.verify(via_torch.problem, plan_b).value, plan_a.value)
