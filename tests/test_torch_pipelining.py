"""From a model to an optimal 2-stage plan to ``torch.distributed.pipelining`` and back.

A small transformer (module granularity, handed off as a ``split_spec``) and a small CNN
with a residual branch (operator granularity, handed off as a graph module with
``pipe_split()`` calls) are imported for training, planned by the DP onto 2 accelerators
whose memory (60% of the model's) forces two stages, split with the plan and run forward
and backward in 2 processes (gloo on 127.0.0.1, GPipe schedule, 2 micro-batches). The
summed micro-batch losses and every parameter gradient must equal those of the unsplit
model within 1e-5, relative (``‖pipelined − reference‖ / ‖reference‖``).
"""

from __future__ import annotations

import json
import os
import socket
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import placement  # noqa: E402
from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.io.exporters import layout_from_instance, split_points, stages  # noqa: E402
from placement.io.torch_export import import_torch  # noqa: E402

TOLERANCE = 1e-5
BATCH, MICROBATCHES = 4, 2
WORLD = 2


class Block(nn.Module):
    """Pre-norm transformer block: attention and MLP, each with a residual connection."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, s, h))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 50, hidden: int = 32, heads: int = 4, layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.Sequential(*(Block(hidden, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens))))


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.norm1 = nn.GroupNorm(2, 8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.relu(x + self.conv2(F.relu(self.norm1(self.conv1(x)))))
        x = F.relu(self.down(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ViewedAttention(nn.Module):
    """Attention on transposed queries, keys and values whose result is viewed after its transpose back:
    ``torch.export`` drops the ``contiguous()``, a no-op on the layout ``scaled_dot_product_attention`` gave
    its result, and keeps the ``view``, which only that layout allows."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(8, 24), nn.Linear(8, 2)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (t.transpose(1, 2) for t in self.qkv(x).view(b, s, 3, 2, 4).unbind(2))
        attention = F.scaled_dot_product_attention(q, k, v)
        return self.out(attention.transpose(1, 2).contiguous().view(b, s, 8))


class BatchFirstGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn, self.head = nn.GRU(8, 8, batch_first=True), nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def _case(name: str):
    """Model, full-batch input, target and summed loss of a test case (the same in every process)."""
    torch.manual_seed(0)
    if name == "transformer":
        model = TinyTransformer()
        x = torch.randint(0, 50, (BATCH, 8))
        y = torch.randint(0, 50, (BATCH, 8))

        def loss(out, target):
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1), reduction="sum")
    elif name in ("attention", "gru"):
        model = ViewedAttention() if name == "attention" else BatchFirstGRU()
        x = torch.randn(BATCH, 6, 8)
        y = torch.randn(BATCH, 6, 2)

        def loss(out, target):
            return F.mse_loss(out, target, reduction="sum")
    else:
        model = SmallCNN()
        x = torch.randn(BATCH, 3, 8, 8)
        y = torch.randint(0, 10, (BATCH,))

        def loss(out, target):
            return F.cross_entropy(out, target, reduction="sum")
    return model, x, y, loss


def _plan(name: str, granularity: str, module_depth: int | None):
    """Import the case for training, plan it with the DP onto 2 accelerators, return (imported, plan)."""
    model, x, _, _ = _case(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every operator of these models has a FLOP formula
        imported = import_torch(model, (x[:BATCH // MICROBATCHES],), platform=make_platform("h100", "epyc-7763", 2, 0),
                                training=True, granularity=granularity, module_depth=module_depth)
    memory = 0.6 * sum(node.memory for node in imported.problem.nodes)
    result = placement.solve(imported.problem, memory=memory)
    assert (result.status, result.method, result.num_stages) == ("optimal", "dp", 2)
    return imported, result.to_plan()


def _relative(a, b) -> float:
    return float((a - b).norm() / b.norm()) if float(b.norm()) > 0 else float(a.norm())


def _worker(rank: int, port: int, jobs: list, out_dir: str) -> None:
    """One pipeline rank: run every job's stage ``rank`` and record its errors against the unsplit model."""
    from torch.distributed.pipelining import ScheduleGPipe, pipeline

    from placement.io.exporters import pipe_split_module, split_spec
    from placement.io.torch_export import export_program

    if "lo" in {name for _, name in socket.if_nameindex()}:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo on the loopback, whatever the hostname resolves to
    torch.distributed.init_process_group("gloo", rank=rank, world_size=WORLD, init_method=f"tcp://127.0.0.1:{port}",
                                         timeout=timedelta(seconds=120))
    try:
        report = {}
        for name, layout, plan, handoff in jobs:
            model, x, y, loss_fn = _case(name)
            reference = _case(name)[0]
            ref_loss = loss_fn(reference(x), y)
            ref_loss.backward()
            ref_grads = {n: p.grad for n, p in reference.named_parameters()}

            micro = (x[:BATCH // MICROBATCHES],)
            if handoff == "split_spec":
                pipe = pipeline(model, mb_args=micro, split_spec=split_spec(layout, plan))
            else:
                pipe = pipeline(pipe_split_module(export_program(model, micro), layout, plan), mb_args=micro)
            assert pipe.num_stages == WORLD
            stage = pipe.build_stage(rank, torch.device("cpu"))
            # Summed losses: gradients add up over micro-batches, unscaled, as in the unsplit model.
            schedule = ScheduleGPipe(stage, MICROBATCHES, loss_fn=loss_fn, scale_grads=False)
            losses: list = []
            if rank == 0:
                schedule.step(x)
            else:
                schedule.step(target=y, losses=losses)
            entry = {"grads": {n: _relative(p.grad, ref_grads[n]) for n, p in stage.submod.named_parameters()}}
            if losses:
                entry["loss"] = [float(sum(loss.detach() for loss in losses)), float(ref_loss.detach())]
            report[name] = entry
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_planned_pipelines_match_the_unsplit_models(tmp_path):
    transformer, transformer_plan = _plan("transformer", "module", 2)
    cnn, cnn_plan = _plan("cnn", "operator", None)
    transformer_layout = layout_from_instance(transformer.instance)
    cnn_layout = layout_from_instance(cnn.instance)
    # The transformer's stages begin at whole modules: a split_spec expresses the plan.
    points = split_points(transformer_layout, transformer_plan)
    assert len(points) == 1 and points[0].startswith(("blocks.", "norm", "head"))
    # The CNN is split between operators, with its plan's stages as they are.
    assert len(stages(cnn_layout, cnn_plan)) == 2

    jobs = [("transformer", transformer_layout, transformer_plan, "split_spec"),
            ("cnn", cnn_layout, cnn_plan, "pipe_split")]
    torch.multiprocessing.start_processes(_worker, args=(_free_port(), jobs, str(tmp_path)), nprocs=WORLD,
                                          join=True, start_method="spawn")

    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for name in ("transformer", "cnn"):
        model = _case(name)[0]
        covered: dict[str, float] = {}
        for report in reports:
            covered.update(report[name]["grads"])
        # every parameter lives on exactly one stage and its gradient matches
        assert sorted(covered) == sorted(n for n, _ in model.named_parameters())
        worst = max(covered.items(), key=lambda item: item[1])
        assert worst[1] <= TOLERANCE, f"{name}: gradient of {worst[0]} differs by {worst[1]:.2e}"
        pipelined, reference = reports[-1][name]["loss"]
        assert abs(pipelined - reference) <= TOLERANCE * abs(reference)
        assert "loss" not in reports[0][name]


def test_pipe_split_programs_that_send_values_laid_out_non_contiguous_match_the_unsplit_models(tmp_path):
    """A stage that makes a value laid out non-contiguous sends it contiguous: the transposed output of the
    attention (whose next stage views it after a transpose, as traced) and the batch-first output of an
    ``nn.GRU``, which torch's pipeline() sent as they were and gloo refused (input tensor has to be
    contiguous); the steps now match the unsplit models."""
    from placement.plan import DeviceAssignment, Plan

    jobs = []
    for name, first in (("attention", ["scaled_dot_product_attention"]), ("gru", ["gru"])):
        model, x, _, _ = _case(name)
        imported = import_torch(model, (x[:BATCH // MICROBATCHES],), platform=make_platform("h100", "epyc-7763", 2, 0),
                                training=True, granularity="operator")
        nodes = imported.instance["nodes"]
        last = next(n["id"] for n in nodes if n["name"] == first[0])
        ahead = {n["id"] for n in nodes if not n["isBackwardNode"] and n["id"] <= last}
        ahead |= {n["id"] for n in nodes if n["isBackwardNode"] and n["forward"] in ahead}
        crossing = [(u, v) for u, v in imported.instance["about"]["non_contiguous_reads"]
                    if u in ahead and v not in ahead]
        assert crossing, f"{name}: no value laid out non-contiguous crosses the cut"
        plan = Plan((DeviceAssignment("accelerator", tuple(sorted(ahead))),
                     DeviceAssignment("accelerator", tuple(n["id"] for n in nodes if n["id"] not in ahead))))
        jobs.append((name, layout_from_instance(imported.instance), plan, "pipe_split"))
    torch.multiprocessing.start_processes(_worker, args=(_free_port(), jobs, str(tmp_path)), nprocs=WORLD,
                                          join=True, start_method="spawn")

    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for name, _, _, _ in jobs:
        covered: dict[str, float] = {}
        for report in reports:
            covered.update(report[name]["grads"])
        assert sorted(covered) == sorted(n for n, _ in _case(name)[0].named_parameters())
        worst = max(covered.items(), key=lambda item: item[1])
        assert worst[1] <= TOLERANCE, f"{name}: gradient of {worst[0]} differs by {worst[1]:.2e}"
        pipelined, reference = reports[-1][name]["loss"]
        assert abs(pipelined - reference) <= TOLERANCE * abs(reference)
