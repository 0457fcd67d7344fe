"""``plan_pipeline`` end to end: eight models, 2, 3 and 4 stages, GPipe and 1F1B, gradients equal to the unsplit model.

Models (small widths): an encoder-decoder ``nn.Transformer``, a GPT-style LM whose output
projection is its token embedding (tied), a U-Net-like net with skip concatenations, a model
whose second input is read only by its last operator, a BERT-style encoder reading an integer
attention mask in every layer, an MLP, an MLP with BatchNorm in training mode (its running
statistics must equal the unsplit model's too), and a model that updates a running mean kept in a
buffer in place and reads it again in a later stage (the buffer and the loss must equal the
unsplit model's: the stage sent the buffer itself, which the next micro-batch overwrote before
the send was done). Each is planned by ``plan_pipeline(...,
stages=N)`` for N = 2, 3, 4 (the plan's stages, not hand-picked ones) and run in 4 processes
(gloo on 127.0.0.1, CPU; an N-stage pipeline on ranks 0..N-1; planned for 4 CPU sockets, which
pay no transfers, so the optimum balances compute and cuts through skip connections) with both schedules over 4
micro-batches, losses summed (``scale_grads=False``). The summed loss and every parameter
gradient of every stage must equal those of the unsplit model over the same micro-batches
within 1e-4, relative (``‖pipelined − reference‖ / ‖reference‖``); a parameter held by
several stages (the tied weight) must have the full gradient on each holder. The GPT 1F1B
case runs ``step()`` twice without zeroing: gradients add up (twice the reference), the
gradients of shared parameters included.

The plans are made once in the test process; the workers are forked, so they inherit them.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import socket
import warnings
from datetime import timedelta

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import placement  # noqa: E402
from placement.torch import AccumulatedGradientWarning, RandomStateWarning, plan_pipeline  # noqa: E402
from tests.test_torch_pipelining import _free_port, _relative  # noqa: E402

TOLERANCE = 1e-4
WIDTH = 16
BATCH, MICROBATCHES = 8, 4
WORLD = 4
STAGES = (2, 3, 4)
SCHEDULES = ("gpipe", "1f1b")
MODELS = ("transformer", "gpt", "unet", "late-input", "bert", "mlp", "batchnorm", "running-mean", "frozen", "keyword",
          "step-count", "late-update")
#: the stage counts of the models that cannot have every count of STAGES
STAGES_OF = {"late-update": (2,)}
#: the models whose last inputs are passed by keyword, with their names
KEYWORDS = {"keyword": ("scale",)}
REPEATED = ("gpt", "1f1b")   # the case whose step() runs twice


class Attention(nn.Module):
    """Multi-head self-attention (2 heads) with an optional key mask of shape ``[batch, keys]``."""

    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.causal = causal

    def forward(self, x, mask=None):
        b, s, h = x.shape
        q, k, v = (t.reshape(b, s, 2, h // 2).transpose(1, 2) for t in self.qkv(x).split(h, dim=-1))
        keep = None if mask is None else mask[:, None, None, :].bool()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(b, s, h))


class Block(nn.Module):
    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = Attention(causal)
        self.up, self.down = nn.Linear(WIDTH, 2 * WIDTH), nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TiedLM(nn.Module):
    """GPT-style: token and position embeddings, causal blocks, an output projection tied to ``wte``."""

    def __init__(self, vocab: int = 24, seq: int = 6) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, WIDTH), nn.Embedding(seq, WIDTH)
        self.h = nn.ModuleList(Block(causal=True) for _ in range(2))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Bert(nn.Module):
    """BERT-style: embedding, encoder blocks masked by an integer attention mask, pooler, classifier."""

    def __init__(self, vocab: int = 24) -> None:
        super().__init__()
        self.emb, self.ln = nn.Embedding(vocab, WIDTH), nn.LayerNorm(WIDTH)
        self.layers = nn.ModuleList(Block() for _ in range(2))
        self.pool, self.cls = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, 3)

    def forward(self, tokens, attention_mask):
        x = self.ln(self.emb(tokens))
        for layer in self.layers:
            x = layer(x, attention_mask)
        return self.cls(torch.tanh(self.pool(x[:, 0])))


class UNet(nn.Module):
    """Two levels down, two up, the encoder's outputs concatenated into the decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1, self.enc2 = nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up2, self.dec2 = nn.ConvTranspose2d(8, 8, 2, stride=2), nn.Conv2d(16, 4, 3, padding=1)
        self.up1, self.dec1 = nn.ConvTranspose2d(4, 4, 2, stride=2), nn.Conv2d(8, 4, 3, padding=1)
        self.head = nn.Conv2d(4, 1, 1)

    def forward(self, x):
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(F.max_pool2d(e1, 2)))
        m = F.relu(self.mid(F.max_pool2d(e2, 2)))
        d2 = F.relu(self.dec2(torch.cat([self.up2(m), e2], 1)))
        d1 = F.relu(self.dec1(torch.cat([self.up1(d2), e1], 1)))
        return self.head(d1)


class LateInput(nn.Module):
    """The second input, ``scale``, is read by the last operator only."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(),
                                  nn.Linear(WIDTH, WIDTH))
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x, scale):
        return self.head(self.body(x)) * scale


class RunningMean(nn.Module):
    """A running mean of the first hidden layer, kept in a buffer that every forward updates in place
    and the last operator reads again: each micro-batch must read the mean after its own update,
    wherever the plan cuts."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(WIDTH, WIDTH)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.head = nn.Linear(WIDTH, 4)
        self.register_buffer("mean", torch.zeros(WIDTH))

    def forward(self, x):
        h = torch.tanh(self.a(x))
        self.mean.mul_(0.9).add_(0.1 * h.detach().mean(0))
        return self.head(self.body(h - self.mean)) + self.mean.sum()


class FrozenPrefix(nn.Module):
    """A frozen backbone (two linears), a layer that trains its bias alone, a detached side value and a
    trained head: the stages before the first trained parameter send no gradient back, and take none."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.bitfit = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 4))
        for p in (*self.backbone.parameters(), self.bitfit.weight):
            p.requires_grad_(False)

    def forward(self, x):
        h = self.backbone(x)
        g = torch.tanh(self.bitfit(h))
        return self.head(g + h.detach() * (h > 0))


class StepCount(nn.Module):
    """A step counter kept in a buffer, incremented in place and multiplied into the output: autograd
    keeps the counter for the backward pass, and the next micro-batch's increment (under GPipe, before
    that backward runs) must not change what it kept."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(),
                                 nn.Linear(WIDTH, 4))
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps.add_(1.0)
        return self.net(x) * self.steps


class LateUpdate(RunningMean):
    """The running mean's layers, its buffer read by the first layer and written in place after the
    body: both reads are the buffer's own, so they must share a stage (the first stage's copy went
    stale, and gradients came out 12% off, where the write was in another stage). Only two stages
    keep them together here."""

    def forward(self, x):
        h = self.body(torch.tanh(self.a(x - self.mean)))
        self.mean.mul_(0.5).add_(0.5 * h.detach().mean(0))
        return self.head(h)


class KeywordScale(nn.Module):
    """BatchNorm layers, and an input the model takes by keyword only: the first stage's inputs are then
    no longer its positional ones alone, and its static metadata must still describe them (without it,
    torch's runtime ran every stage's forward once more to learn the shapes, the later stages on
    uninitialised memory, and the running statistics came out as 4e25 and inf)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WIDTH, 32, bias=False), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, 32, bias=False), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x, *, scale):
        return self.net(x) * scale


class Seq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Transformer(WIDTH, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
                                  dropout=0.0, batch_first=True)
        self.out = nn.Linear(WIDTH, 3)

    def forward(self, src, tgt):
        return self.out(self.net(src, tgt))


ONE_INPUT = {"late-update": LateUpdate, "step-count": StepCount, "frozen": FrozenPrefix, "running-mean": RunningMean}


def case(name: str):
    """Model, full-batch inputs and target of a model (the same in every process)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name == "transformer":
        return Seq2Seq(), (torch.randn(BATCH, 5, WIDTH, generator=g), torch.randn(BATCH, 4, WIDTH, generator=g)), \
            torch.randn(BATCH, 4, 3, generator=g)
    if name == "gpt":
        return TiedLM(), (torch.randint(0, 24, (BATCH, 6), generator=g),), torch.randint(0, 24, (BATCH, 6), generator=g)
    if name == "bert":
        mask = torch.ones(BATCH, 6, dtype=torch.long)
        mask[:, 4:] = 0
        return Bert(), (torch.randint(0, 24, (BATCH, 6), generator=g), mask), torch.randint(0, 3, (BATCH,), generator=g)
    if name == "unet":
        return UNet(), (torch.randn(BATCH, 2, 8, 8, generator=g),), torch.randn(BATCH, 1, 8, 8, generator=g)
    if name == "late-input":
        return LateInput(), (torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 4, generator=g)), \
            torch.randn(BATCH, 4, generator=g)
    if name in ONE_INPUT:   # one input WIDTH wide, a target 4 wide
        return ONE_INPUT[name](), (torch.randn(BATCH, WIDTH, generator=g),), torch.randn(BATCH, 4, generator=g)
    if name == "keyword":
        return KeywordScale(), (torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 4, generator=g)), \
            torch.randn(BATCH, 4, generator=g)
    if name == "batchnorm":
        # linear layers before a BatchNorm without bias: its gradient would be 0 up to rounding
        layers = [nn.Linear(WIDTH, 32, bias=False), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 32, bias=False),
                  nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4)]
        return nn.Sequential(*layers), (torch.randn(BATCH, WIDTH, generator=g),), torch.randn(BATCH, 4, generator=g)
    layers = [nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)]
    return nn.Sequential(*layers), (torch.randn(BATCH, WIDTH, generator=g),), torch.randn(BATCH, 4, generator=g)


def loss_fn(out, target):
    """Summed loss: cross-entropy for integer targets, squared error otherwise."""
    if target.dtype == torch.long:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1), reduction="sum")
    return F.mse_loss(out, target, reduction="sum")


def micro(tensors, k: int):
    size = BATCH // MICROBATCHES
    return tuple(t[k * size:(k + 1) * size] for t in tensors)


def call(name: str, tensors) -> tuple[tuple, dict]:
    """A model's inputs as positional and keyword arguments (:data:`KEYWORDS`)."""
    names = KEYWORDS.get(name, ())
    split = len(tensors) - len(names)
    return tuple(tensors[:split]), dict(zip(names, tensors[split:]))


def statistics(module) -> dict:
    """A module's buffers (BatchNorm's running statistics, the running mean), by state-dict key."""
    trained = dict(module.named_parameters(remove_duplicate=False))   # frozen ones too: not statistics
    return {k: v.detach().clone() for k, v in module.state_dict().items() if k not in trained}


def reference(name: str):
    """The unsplit model's summed loss, gradients and running statistics over the micro-batches."""
    model, args, target = case(name)
    total = 0.0
    for k in range(MICROBATCHES):
        positional, keywords = call(name, micro(args, k))
        loss = loss_fn(model(*positional, **keywords), micro((target,), k)[0])
        loss.backward()
        total += float(loss.detach())
    return total, {n: p.grad for n, p in model.named_parameters() if p.requires_grad}, statistics(model)


def _join_group(rank: int, world: int, port: int) -> None:
    """Join the gloo group of ``world`` ranks at ``port`` on this host, one thread each (the cores are few)."""
    torch.set_num_threads(1)
    if "lo" in {name for _, name in socket.if_nameindex()}:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}",
                                         timeout=timedelta(seconds=120))


def _run_ranks(target, args: tuple, world: int, timeout: float) -> list:
    """Run ``target(rank, port, *args)`` in ``world`` forked processes on a free port; their exit codes."""
    port = _free_port()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=target, args=(rank, port, *args)) for rank in range(world)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=timeout)
    return [w.exitcode for w in workers]


def _worker(rank: int, port: int, plans: dict, out_dir: str) -> None:
    """Rank ``rank``: run stage ``rank`` of every plan with at least ``rank + 1`` stages, save its gradients."""
    _join_group(rank, WORLD, port)
    try:
        groups = {n: torch.distributed.new_group(list(range(n))) for n in STAGES if n < WORLD}
        report = {}
        for (name, n), pp in plans.items():
            if rank >= n:
                continue
            _, args, target = case(name)
            for schedule in SCHEDULES:
                stage = pp.build_stage(rank, torch.device("cpu"), group=groups.get(n))
                sched = pp.schedule(stage, loss_fn, schedule=schedule)
                losses: list = []
                for _ in range(2 if (name, schedule) == REPEATED else 1):
                    step_losses: list = []   # one loss per micro-batch, on the last stage
                    if rank == 0:
                        positional, keywords = call(name, args)
                        sched.step(*positional, **keywords)
                    elif rank == n - 1:
                        sched.step(target=target, losses=step_losses)
                    else:
                        sched.step()
                    losses += step_losses
                report[name, n, schedule] = {
                    "kind": [c.__name__ for c in type(sched).__mro__],
                    "torch's own class": type(sched).__module__.startswith("torch."),
                    "grads": {k: p.grad.detach().clone() for k, p in stage.submod.named_parameters()
                              if p.requires_grad},
                    "statistics": statistics(stage.submod),
                    "losses": [float(loss) for loss in losses]}
        torch.save(report, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def plans():
    out = {}
    for name in MODELS:
        for n in STAGES_OF.get(name, STAGES):
            model, args, _ = case(name)
            positional, keywords = call(name, micro(args, 0))
            out[name, n] = plan_pipeline(model, positional, keywords or None, devices="epyc-7763:4", stages=n,
                                         microbatches=MICROBATCHES)
    return out


def test_plans_have_the_stages_asked_for_and_relay_what_later_stages_read(plans):
    for (name, n), pp in plans.items():
        assert pp.num_stages == n == pp.result.num_stages, name
        assert pp.result.ok and pp.result.status == "optimal"
        assert len(pp.relayed) == n - 1
    # The tied weight is held by the first and the last stage, and the plan says so.
    for n in STAGES:
        gpt = plans["gpt", n]
        assert gpt.shared_parameters == {"wte.weight": (0, n - 1)}
        assert gpt.result.stats["shared_parameters"] == {"wte.weight": [0, n - 1]}
    # The buffer's updated value is made before the last stage and read there: sent as a copy.
    for n in STAGES:
        assert any(name.startswith("add_") for received in plans["running-mean", n].relayed for name in received)
    # The buffer written in place after the body is read, as itself, by the first layer: one stage has both.
    late = plans["late-update", 2]
    assert late.instance["about"]["written_buffers"] == {"mean": [0, len(late.imported.graph.nodes) - 2]}
    assert [stage.attributes.count("mean") for stage in late.partition.stages] == [1, 0]
    assert "written_buffers" not in plans["running-mean", 2].instance["about"]   # it reads the updated value
    with pytest.raises(placement.InvalidParameterError, match="'mean' .written in place; read by "):
        model, args, _ = case("late-update")
        plan_pipeline(model, micro(args, 0), devices="epyc-7763:4", stages=3, microbatches=MICROBATCHES)
    # The late input is received by every stage after the first: relayed, not read.
    for n in STAGES:
        assert all("scale" in received for received in plans["late-input", n].relayed)
    # What the tests below exercise: an integer tensor relayed through a middle stage (the attention
    # mask), a skip connection relayed through a middle stage, and a plan whose stages are not
    # intervals of program order (forward node ids follow program order).
    assert "attention_mask" in set(plans["bert", 4].relayed[0]) & set(plans["bert", 4].relayed[1])
    assert any(set(a) & set(b) - {"scale", "attention_mask", "tgt"}
               for pp in plans.values() for a, b in zip(pp.relayed, pp.relayed[1:]))
    forward = {name: len(pp.imported.graph.nodes) for (name, _), pp in plans.items()}
    assert any(sorted(v for v in s.nodes if v < forward[name]) != list(range(min(s.nodes), min(s.nodes) + sum(
        1 for v in s.nodes if v < forward[name]))) for (name, _), pp in plans.items() for s in pp.result.plan)


def test_pipelines_train_like_the_unsplit_models(plans, tmp_path):
    assert _run_ranks(_worker, (plans, str(tmp_path)), WORLD, timeout=240) == [0] * WORLD
    reports = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD)]

    worst = {}
    for name in MODELS:
        ref_loss, ref_grads, ref_statistics = reference(name)
        for n in STAGES_OF.get(name, STAGES):
            for schedule in SCHEDULES:
                times = 2 if (name, schedule) == REPEATED else 1
                held: dict[str, list[int]] = {}
                errors = []
                statistics_seen: dict = {}
                for rank in range(n):
                    entry = reports[rank][name, n, schedule]
                    expected_class = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B"}[schedule]
                    assert expected_class in entry["kind"]
                    # wrapped only where the stage holds a shared parameter, on stage 0 (its input check) and on
                    # the last (its target check)
                    holds_shared = any(rank in r for r in plans[name, n].shared_parameters.values())
                    assert entry["torch's own class"] == (not holds_shared and rank not in (0, n - 1))
                    for param, grad in entry["grads"].items():
                        held.setdefault(param, []).append(rank)
                        errors.append(_relative(grad, times * ref_grads[param]))
                    statistics_seen.update(entry["statistics"])
                # BatchNorm statistics as after the unsplit model's micro-batches: the stages were once
                # updated one extra time, by torch's runtime shape inference (infinite variances after stage 0)
                assert sorted(statistics_seen) == sorted(ref_statistics), (name, n, schedule)
                for key, value in statistics_seen.items():
                    if value.dtype == torch.long:
                        assert int(value) == int(ref_statistics[key]), (name, n, schedule, key)
                    else:
                        errors.append(_relative(value, ref_statistics[key]))
                # every parameter is on some stage; only shared ones on several
                assert sorted(held) == sorted(ref_grads)
                assert {p: tuple(r) for p, r in held.items() if len(r) > 1} == plans[name, n].shared_parameters
                losses = reports[n - 1][name, n, schedule]["losses"]
                assert len(losses) == times * MICROBATCHES
                loss_error = abs(sum(losses) - times * ref_loss) / abs(times * ref_loss)
                worst[name, n, schedule] = (max(errors), loss_error)
    print("\nmodel, stages, schedule: max relative gradient error, relative loss error")
    for key, (grad_error, loss_error) in worst.items():
        print(*key, f"{grad_error:.1e}", f"{loss_error:.1e}")
    assert max(g for g, _ in worst.values()) <= TOLERANCE
    assert max(loss for _, loss in worst.values()) <= TOLERANCE


def _build_or_refuse(rank: int, port: int, plans: list, out_dir: str, indices: list | None = None) -> None:
    """Rank ``rank`` of ``len(plans)``: build stage ``indices[rank]`` (default ``rank``) of ``plans[rank]``, and write
    what build_stage said (another error's type and first line where it raised one)."""
    _join_group(rank, len(plans), port)
    try:
        try:
            plans[rank].build_stage(rank if indices is None else indices[rank], torch.device("cpu"))
            said = "built"
        except placement.InvalidParameterError as error:
            said = str(error)
        except Exception as error:   # noqa: BLE001 - what the other ranks saw, for the assertion's message
            said = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as out:
            out.write(said)
    finally:
        torch.distributed.destroy_process_group()


def test_ranks_that_planned_different_pipelines_are_refused_by_build_stage(tmp_path):
    """Every process runs plan_pipeline on its own; where their plans differ (here one rank planned the MLP for
    inference, the other for training: its plan holds backward nodes too; a search stopped by its time limit
    may stop at different plans as well), torch's stages would exchange tensors of another cut, or wait for
    each other forever. build_stage compares the plans of the group's ranks first and refuses on every rank,
    naming the other one; equal plans build."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                          nn.Linear(WIDTH, 2))
    x = torch.randn(BATCH // MICROBATCHES, WIDTH)
    options = dict(devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    inference, training = (plan_pipeline(model, (x,), training=t, **options) for t in (False, True))
    for plans, expected in (([inference, training], "differ"), ([training, training], "equal")):
        assert _run_ranks(_build_or_refuse, (plans, str(tmp_path)), 2, timeout=120) == [0, 0]
        said = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(2)]
        if expected == "equal":
            assert said == ["built", "built"]
            continue
        for rank, status in ((0, "optimal"), (1, "optimal")):
            assert said[rank] == (
                f"group has ranks that planned different pipelines: rank {1 - rank}'s plan is not this rank's "
                f"(rank {rank}, 2 stages, status {status!r}). Each process ran plan_pipeline on its own: with other "
                "example inputs or devices, or a search stopped by its time limit at another plan; give every rank "
                "the same inputs, and a time_limit that proves the optimum")


def _schedule_or_refuse(rank: int, port: int, pp, options: list, out_dir: str) -> None:
    """Rank ``rank`` of 2: build stage ``rank`` of ``pp`` and make its schedule with ``options[rank]``, and write
    what schedule() said."""
    _join_group(rank, 2, port)
    try:
        try:
            pp.schedule(pp.build_stage(rank, torch.device("cpu")), **options[rank])
            said = "scheduled"
        except placement.InvalidParameterError as error:
            said = str(error)
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as out:
            out.write(said)
    finally:
        torch.distributed.destroy_process_group()


def test_ranks_that_planned_other_micro_batches_schedules_or_shapes_are_refused_by_build_stage(tmp_path):
    """Ranks that planned one pipeline with other micro-batch counts or schedules, or for micro-batches of other
    sizes, have plans of the same stages: build_stage let them build, and their first step waited forever (gpipe
    against 1f1b) or aborted a rank (4 micro-batches against 2, 2 rows a micro-batch against 4). It compares those
    too, and names on every rank the setting that differs; likewise schedule() compares what its ranks run."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 2))
    x = torch.randn(2, WIDTH)
    options = dict(devices="epyc-7763:2", stages=2)
    mine = plan_pipeline(model, (x,), microbatches=4, **options)
    others = {"microbatches": plan_pipeline(model, (x,), microbatches=2, **options),
              "schedule": plan_pipeline(model, (x,), microbatches=4, schedule="gpipe", **options),
              "group": plan_pipeline(model, (torch.randn(4, WIDTH),), microbatches=4, **options)}
    values = {"microbatches": (4, 2), "schedule": ("'1f1b'", "'gpipe'")}
    for name, other in others.items():
        assert [s.nodes for s in other.result.plan] == [s.nodes for s in mine.result.plan]
        assert _run_ranks(_build_or_refuse, ([mine, other], str(tmp_path)), 2, timeout=120) == [0, 0]
        for rank in range(2):
            said = (tmp_path / f"rank{rank}.txt").read_text()
            if name == "group":
                assert said.startswith(f"group has ranks that planned different pipelines: rank {1 - rank}'s plan "
                                       f"is not this rank's (rank {rank}, 2 stages, status 'optimal')"), said
                continue
            theirs, ours = values[name][1 - rank], values[name][rank]
            assert said == (f"{name} of plan_pipeline differs between the ranks of the group: rank {1 - rank} planned "
                            f"with {name}={theirs}, this rank (rank {rank}) with {ours}; the stages run each step's "
                            "micro-batches in one schedule together (stages that disagree wait for each other forever "
                            f"or mix steps): give plan_pipeline the same {name} on every rank"), said
    runs = [dict(loss_fn=loss_fn, microbatches=2), dict(loss_fn=loss_fn)]
    assert _run_ranks(_schedule_or_refuse, (mine, runs, str(tmp_path)), 2, timeout=120) == [0, 0]
    for rank in range(2):
        assert (tmp_path / f"rank{rank}.txt").read_text() == (
            f"microbatches of schedule() differs between the ranks of the group: rank {1 - rank} runs {4 - 2 * rank}, "
            f"this rank (rank {rank}) {2 + 2 * rank}; the stages run each step together (stages that disagree wait for "
            "each other forever, mix steps or scale their gradients apart): give schedule() the same microbatches on "
            "every rank")
    runs = [dict(loss_fn=loss_fn), dict(loss_fn=None)]
    assert _run_ranks(_schedule_or_refuse, (mine, runs, str(tmp_path)), 2, timeout=120) == [0, 0]
    assert (tmp_path / "rank0.txt").read_text().startswith(
        "loss_fn of schedule() differs between the ranks of the group: rank 1 runs none (the forward alone), this "
        "rank (rank 0) a loss_fn (forward and backward);")


def test_ranks_that_planned_other_stage_counts_or_build_other_stages_are_refused_on_every_rank(tmp_path):
    """A rank whose plan has fewer stages than its index failed alone in build_stage (its stage index checked
    before the ranks compared their plans), while the others waited in that comparison and failed with gloo's
    untyped error when it exited (or at the group's timeout where it lived on). The comparison comes first: every
    rank refuses with the typed error naming the stage counts; likewise stage indices other than the ranks'."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                          nn.Linear(WIDTH, 2))
    x = torch.randn(2, WIDTH)
    two, three = (plan_pipeline(model, (x,), devices="epyc-7763:3", stages=n, microbatches=4) for n in (2, 3))
    assert _run_ranks(_build_or_refuse, ([three, three, two], str(tmp_path)), 3, timeout=120) == [0, 0, 0]
    said = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(3)]
    for rank, (other, theirs, ours) in enumerate([(2, "2 stages", 3), (2, "2 stages", 3), (0, "3 stages", 2)]):
        assert said[rank] == (
            f"stages of plan_pipeline differs between the ranks of the group: rank {other} planned {theirs}, this "
            f"rank (rank {rank}) {ours}; the stages of one pipeline run on its ranks together: give plan_pipeline "
            "the same stages, example inputs and devices on every rank (and a time_limit that proves the "
            "optimum)"), said
    assert _run_ranks(_build_or_refuse, ([two, two], str(tmp_path), [0, 0]), 2, timeout=120) == [0, 0]
    for rank in range(2):
        assert (tmp_path / f"rank{rank}.txt").read_text() == (
            f"stage_index of build_stage must be its rank in the group on every rank (stage i runs on rank i): rank "
            f"{1 - rank} asked for stage 0, this rank (rank {rank}) for 0")
    # numpy's integers are stage indices too: a rank given np.int64(1) was taken for one given no integer, and with
    # np.int64(0) on every rank the second refused alone while the first waited
    assert _run_ranks(_build_or_refuse, ([two, two], str(tmp_path), [0, np.int64(1)]), 2, timeout=120) == [0, 0]
    assert [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(2)] == ["built", "built"]
    assert _run_ranks(_build_or_refuse, ([two, two], str(tmp_path), [np.int64(0)] * 2), 2, timeout=120) == [0, 0]
    for rank in range(2):
        assert (tmp_path / f"rank{rank}.txt").read_text() == (
            f"stage_index of build_stage must be its rank in the group on every rank (stage i runs on rank i): rank "
            f"{1 - rank} asked for stage 0, this rank (rank {rank}) for np.int64(0)")


def test_ranks_whose_copies_of_a_shared_parameter_differ_are_refused_on_every_rank(tmp_path):
    """Each rank builds its own model; seeded with its rank before building it, the ranks' copies of a tied weight
    (held by stages 0 and 2) differ, and the holders trained apart from the first step (5.15 apart after three SGD
    steps), the exchange summing their gradients, not their values. build_stage compares digests of the values of
    the tensors several stages hold among their holders and refuses on every rank, naming the tensor and the
    ranks; models made alike build."""
    tokens = torch.randint(0, 24, (2, 5), generator=torch.Generator().manual_seed(1))
    plans = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        plans.append(plan_pipeline(TiedClassifier(), (tokens,), devices="epyc-7763:3", stages=3,
                                   microbatches=MICROBATCHES))
    assert [pp.shared_parameters for pp in plans] == [{"wte.weight": (0, 2)}] * 2
    for chosen, expected in (([0, 0, 0], "built"), ([0, 1, 1], "refused")):
        assert _run_ranks(_build_or_refuse, ([plans[k] for k in chosen], str(tmp_path)), 3, timeout=120) == [0] * 3
        said = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(3)]
        if expected == "built":
            assert said == ["built"] * 3
            continue
        where = ["rank 2 than on this rank", "rank 2 than on rank 0 (this rank, rank 1, holds none of it)",
                 "rank 0 than on this rank"]
        assert said == [
            f"model holds other values of 'wte.weight' on {where[rank]}: stages 0 and 2 each hold a copy of that one "
            "tensor of the model, and copies that start apart train apart (a step adds the same gradient to each). "
            "Every process planned its own model, and these were made apart (a rank-dependent seed before the model "
            "was built, or other weights loaded): seed every rank alike before building the model (and apart, for "
            "dropout, only after it), or load the same weights into it on every rank before plan_pipeline"
            for rank in range(3)]


def _two_stage_mlp():
    """An MLP, a batch ``x`` with targets ``y``, and its 2-stage plan of MICROBATCHES micro-batches."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 2))
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, 2)
    pp = plan_pipeline(model, (micro((x,), 0)[0],), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    return model, x, y, pp


def _one_step_each(rank: int, port: int, pp, body, out_dir: str) -> None:
    """Rank ``rank`` of 2 joins the group, builds its stage of ``pp`` under 1F1B and saves what
    ``body(rank, schedule)`` reports."""
    _join_group(rank, 2, port)
    try:
        sched = pp.schedule(pp.build_stage(rank, torch.device("cpu")), loss_fn, schedule="1f1b")
        torch.save(body(rank, sched), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def _reports(step, pp, x, y, out_dir, timeout: float) -> list[dict]:
    """What ``step(rank, schedule, x, y)`` reported on each of the 2 ranks of ``pp`` (:func:`_one_step_each`)."""
    body = functools.partial(step, x=x, y=y)
    assert _run_ranks(_one_step_each, (pp, body, str(out_dir)), 2, timeout=timeout) == [0, 0]
    return [torch.load(out_dir / f"rank{rank}.pt") for rank in range(2)]


def _step_without_inputs_first(rank: int, sched, x, y) -> dict:
    """Rank 0 first calls step() without inputs while rank 1 waits at a barrier, then both run one step of
    ``x``; rank 0 reports what its first call said, rank 1 its losses."""
    report = {}
    if rank == 0:
        with pytest.raises(placement.InvalidParameterError) as error:
            sched.step()
        report = {"error": (error.value.parameter, str(error.value))}
    torch.distributed.barrier()
    losses: list = []
    sched.step(x) if rank == 0 else sched.step(target=y, losses=losses)
    report["losses"] = len(losses)
    return report


def test_stage_zero_s_step_without_inputs_is_refused_before_it_sends(tmp_path):
    """Stage 0's step() without inputs began torch's first step, which sent to stage 1 before the forward that
    refused the call: with stage 1 not yet in its step (here at a barrier), stage 0 waited for the group's
    timeout and failed with gloo's error. It is refused first, with nothing sent, and the next step runs."""
    _, x, y, pp = _two_stage_mlp()
    first, second = _reports(_step_without_inputs_first, pp, x, y, tmp_path, timeout=150)
    assert first["error"] == ("args", "args of stage 0 must be the inputs the plan was made with, 1 positional input; "
                                      "got 0 positional (the program is exported for those inputs; plan again with the "
                                      "inputs the pipeline will be given)")
    assert second["losses"] == MICROBATCHES


def _step_without_target_first(rank: int, sched, x, y) -> dict:
    """One step of ``x``: rank 0 gives the target too, which only the last stage reads; rank 1 first calls
    step() without it, then with it, and reports what it got."""
    if rank == 0:
        sched.step(x, target=y)
        return {}
    with pytest.raises(placement.InvalidParameterError) as error:
        sched.step(losses=[])
    losses: list = []
    sched.step(target=y, losses=losses)
    return {"error": (error.value.parameter, str(error.value)), "losses": [float(v) for v in losses]}


def test_the_last_rank_s_step_without_target_is_refused_before_it_runs(tmp_path):
    """In training the last stage's loss_fn reads the target: step() without it failed in torch's code (a
    TypeError at the first loss, after the stage had received and run that micro-batch). It is refused with
    the typed error before anything runs, so the same rank's next step() with the target completes the
    step, and the losses are the unsplit model's. Stage 0 is given the target as well: only the last stage
    reads it, as in torch, so every rank may make the same call."""
    model, x, y, pp = _two_stage_mlp()
    _, report = _reports(_step_without_target_first, pp, x, y, tmp_path, timeout=120)
    assert report["error"] == ("target", "target of the pipeline's step() must be given on the last stage (stage 1) "
                                         "in training: loss_fn computes each micro-batch's loss from its output and "
                                         "that micro-batch's rows of target")
    assert len(report["losses"]) == MICROBATCHES
    with torch.no_grad():
        expected = float(loss_fn(model(x), y))
    assert abs(sum(report["losses"]) - expected) <= TOLERANCE * expected


def _accumulate_scaled(rank: int, port: int, pp, x, y, out_dir: str) -> None:
    """Rank ``rank`` of 2: three steps of ``x`` under scale_grads=True with a mean loss: the first on no gradient,
    the second on the first's, the third on gradients zeroed in place; saves the AccumulatedGradientWarnings each
    step gave and the gradients after the second and the third."""
    _join_group(rank, 2, port)
    try:
        stage = pp.build_stage(rank, torch.device("cpu"))
        sched = pp.schedule(stage, F.mse_loss, scale_grads=True)
        said, grads = [], []
        for k in range(3):
            if k == 2:
                stage.submod.zero_grad(set_to_none=False)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sched.step(x) if rank == 0 else sched.step(target=y)
            said.append([str(w.message) for w in caught if issubclass(w.category, AccumulatedGradientWarning)])
            grads.append({k: p.grad.detach().clone() for k, p in stage.submod.named_parameters()})
        torch.save({"said": said, "grads": grads[1:]}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_a_scaled_step_that_begins_with_accumulated_gradients_is_warned_on_every_rank(tmp_path):
    """With scale_grads=True torch divides every gradient a stage holds at the end of each step, the earlier steps'
    too: two steps of a mean loss without zeroing leave g / M + g (1.25 g at M = 4), not the model's 2 g, and
    nothing said so. Each rank warns at a step that begins with a non-zero gradient; not at the first step, nor
    after the gradients are zeroed, where the gradients are the unsplit model's."""
    model, x, y, pp = _two_stage_mlp()
    F.mse_loss(model(x), y).backward()
    expected = {name: p.grad for name, p in model.named_parameters()}
    assert _run_ranks(_accumulate_scaled, (pp, x, y, str(tmp_path)), 2, timeout=120) == [0, 0]
    reports = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    for rank, report in enumerate(reports):
        names = ", ".join(map(repr, report["grads"][0]))
        assert report["said"] == [[], [
            f"stage {rank}: step() with scale_grads=True begins with gradients its parameters hold from earlier steps "
            f"({names}): torch divides every gradient a stage holds by the number of micro-batches (4) at the end of "
            "each step, those of earlier steps again, so gradients accumulated over several steps are not the "
            "model's; zero the gradients before each step (optimizer.zero_grad()), or use scale_grads=False and "
            "divide the loss in loss_fn"], []]
        twice, zeroed = report["grads"]
        for name, grad in twice.items():
            assert _relative(twice[name], 1.25 * expected[name]) <= TOLERANCE
            assert _relative(zeroed[name], expected[name]) <= TOLERANCE


class SparseTables(nn.Module):
    """Embeddings with sparse gradients: ``tied`` is also the output projection (a dense gradient there), ``twice``
    also embeds the body's argmax, in the last layer. Each is read by both stages of a 2-stage plan."""

    def __init__(self) -> None:
        super().__init__()
        self.tied, self.twice = nn.Embedding(24, WIDTH, sparse=True), nn.Embedding(24, WIDTH, sparse=True)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, 24, bias=False)
        self.out.weight = self.tied.weight

    def forward(self, tokens):
        h = self.body(self.tied(tokens) + self.twice(tokens))
        return self.out(h + self.twice(h.argmax(-1)))


def _step_and_save_gradients(rank: int, port: int, pp, args: tuple, target, out_dir: str, loss=loss_fn) -> None:
    """Rank ``rank`` of 2 runs one 1F1B step of its stage of ``pp`` and saves its parameters' gradients."""
    _join_group(rank, 2, port)
    try:
        sched = pp.schedule(pp.build_stage(rank, torch.device("cpu")), loss, schedule="1f1b")
        sched.step(*args) if rank == 0 else sched.step(target=target)
        torch.save({k: p.grad for k, p in sched._stage.submod.named_parameters()}, os.path.join(out_dir, f"{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_sparse_gradients_of_shared_embeddings_are_summed_in_their_layout(tmp_path):
    """A shared parameter's gradient parts were received into a tensor of the first holder's layout, and gloo
    receives no sparse tensor: the step failed inside torch. The parts travel dense; the sum is dense where a
    holder's part is (the tied projection), sparse where every part is, as autograd sums them in the model."""
    torch.manual_seed(0)
    model = SparseTables()
    g = torch.Generator().manual_seed(1)
    tokens, target = (torch.randint(0, 24, (BATCH, 3), generator=g) for _ in range(2))
    pp = plan_pipeline(model, micro((tokens,), 0), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    assert pp.shared_parameters == {"tied.weight": (0, 1), "twice.weight": (0, 1)}
    assert _run_ranks(_step_and_save_gradients, (pp, (tokens,), target, str(tmp_path)), 2, timeout=120) == [0, 0]
    for k in range(MICROBATCHES):
        loss_fn(model(*micro((tokens,), k)), micro((target,), k)[0]).backward()
    for rank in range(2):
        grads = torch.load(tmp_path / f"{rank}.pt")
        for name in ("tied.weight", "twice.weight"):
            expected = dict(model.named_parameters())[name].grad
            assert (grads[name].layout, expected.layout) == ((torch.strided, torch.strided) if name == "tied.weight"
                                                             else (torch.sparse_coo, torch.sparse_coo))
            assert _relative(grads[name].to_dense(), expected.to_dense()) <= 1e-6, (rank, name)


def _step_with_target(rank: int, port: int, pp, x, targets: list, out_dir: str) -> None:
    """Rank ``rank`` of 2 runs its stage of ``pp``: rank 1 calls step() with each of ``targets`` and saves what
    each said; rank 0 runs one step of ``x`` for the last of them."""
    _join_group(rank, 2, port)
    try:
        sched = pp.schedule(pp.build_stage(rank, torch.device("cpu")), loss_fn, schedule="1f1b")
        if rank == 0:
            sched.step(x)
            said = []
        else:
            said = []
            for target in targets:
                try:
                    losses: list = []
                    sched.step(target=target, losses=losses)
                    said.append(len(losses))
                except placement.InvalidParameterError as error:
                    said.append((error.parameter, str(error)))
        torch.save(said, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_a_target_that_does_not_split_into_the_micro_batches_evenly_is_refused(tmp_path):
    """Torch cuts the target into micro-batches along its first dimension with tensor_split: 10 rows in 4
    micro-batches became parts of 3 and 2 rows beside micro-batches of 2 (a loss that broadcasts computed other
    numbers), 3 rows failed with torch's AssertionError, a 0-dimensional target with its IndexError. The last
    stage refuses them before it receives anything; the right target then runs the step."""
    _, x, y, pp = _two_stage_mlp()
    targets = [torch.randn(10, 2), torch.randn(3, 2), torch.tensor(1.0), y]
    assert _run_ranks(_step_with_target, (pp, x, targets, str(tmp_path)), 2, timeout=120) == [0, 0]
    said = torch.load(tmp_path / "rank1.pt")

    def refused(got: str) -> tuple:
        return ("target", "target of the pipeline's step() is cut into 4 micro-batches along its first dimension, "
                          f"like the inputs, which stage 0 takes in micro-batches of one size; got {got} not split "
                          "into 4 equal parts: give it the batch's rows, as many per micro-batch as the outputs")

    assert said == [refused("10 rows, which do"), refused("3 rows, which do"),
                    refused("a 0-dimensional target, which does"), MICROBATCHES]


class DropoutNet(nn.Module):
    """Two dropout layers of one shape, one per stage of a 2-stage plan."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, 2)
        self.drop1, self.drop2 = nn.Dropout(0.5), nn.Dropout(0.5)

    def forward(self, x):
        return self.c(self.drop2(torch.tanh(self.b(self.drop1(torch.tanh(self.a(x)))))))


def _build_and_record_warnings(rank: int, port: int, pp, seeds: list, out_dir: str) -> None:
    """Rank ``rank`` of 2 builds its stage of ``pp`` after seeding with ``seeds[rank]`` (None: as forked), and
    saves the messages of the RandomStateWarnings build_stage gave."""
    _join_group(rank, 2, port)
    try:
        if seeds[rank] is not None:
            torch.manual_seed(seeds[rank])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pp.build_stage(rank, torch.device("cpu"))
        said = [str(w.message) for w in caught if issubclass(w.category, RandomStateWarning)]
        torch.save(said, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_stages_that_draw_random_numbers_from_ranks_seeded_alike_are_warned(tmp_path):
    """Every rank seeds alike to build the same model (or not at all: torch's default seed is one), so stages
    that draw dropout masks drew the same ones: the mask of one stage's dropout was, bit for bit, that of the
    layer of the same shape in the other stage, where the unsplit model draws independent masks. build_stage
    compares the ranks' random states and warns on each such stage; ranks seeded apart are not warned, nor
    stages that draw nothing (an inference plan in eval mode)."""
    torch.manual_seed(0)
    x = torch.randn(BATCH // MICROBATCHES, WIDTH)
    pp = plan_pipeline(DropoutNet(), (x,), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    assert [[n.name for n in s.nodes if "dropout" in n.name] for s in pp.partition.stages] == [
        ["dropout"], ["dropout_1"]]
    quiet = plan_pipeline(DropoutNet().eval(), (x,), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES,
                          training=False)
    for plan, seeds, expected in ((pp, [None, None], "warned"), (pp, [1, 1], "warned"), (pp, [1, 2], []),
                                  (quiet, [None, None], [])):
        assert _run_ranks(_build_and_record_warnings, (plan, seeds, str(tmp_path)), 2, timeout=120) == [0, 0]
        said = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
        if expected == "warned":
            expected = [[f"stage {rank} draws random numbers (dropout) from the random state of stage {1 - rank} "
                         "(their ranks were seeded alike): their draws would repeat each other's (a dropout mask of "
                         "one stage the mask of a layer of the same shape in another), where the unsplit model draws "
                         "them independently; seed each rank differently after building the model and before "
                         "build_stage (torch.manual_seed(seed + rank))"] for rank in range(2)]
        else:
            expected = [expected, expected]
        assert said == expected, seeds


class SdpaAttention(nn.Module):
    """Self-attention through ``scaled_dot_product_attention`` with its own dropout probability."""

    def __init__(self, dropout_p: float) -> None:
        super().__init__()
        self.qkv, self.dropout_p = nn.Linear(WIDTH, 3 * WIDTH), dropout_p

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return x + nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p)


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_an_attention_of_dropout_probability_0_draws_no_random_numbers(training):
    """torch tags scaled_dot_product_attention as drawing random numbers whatever its dropout_p: the
    attention of stage 0 (dropout_p 0, its default) draws none, in training or not; that of stage 1 (0.2)
    draws its dropout mask in eval mode too (it does not read the module's mode), as does nn.MultiheadAttention
    in training only (it passes its dropout in training, and 0 otherwise)."""
    from placement.torch.partition import random_operators

    torch.manual_seed(0)

    class Attentions(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = SdpaAttention(0.0), SdpaAttention(0.2)
            self.mha = nn.MultiheadAttention(WIDTH, 2, dropout=0.1, batch_first=True)

        def forward(self, x):
            h = self.b(self.a(x))
            return self.mha(h, h, h, need_weights=False)[0]

    net = Attentions().train(training)
    pp = plan_pipeline(net, (torch.randn(2, 5, WIDTH),), devices="epyc-7763:3", stages=3, microbatches=3,
                       training=training, granularity="module")
    owners = {n.name: s for s, stage in enumerate(pp.partition.stages) for n in stage.nodes}
    attention = sorted((owners[name], name) for name in owners if "scaled_dot_product" in name)
    assert len(attention) == 3 and [s for s, _ in attention] == [0, 1, 2]
    expected = {1: ("scaled_dot_product_attention",)}
    if training:
        expected[2] = ("scaled_dot_product_attention",)
    assert random_operators(pp.partition) == expected


class TiedClassifier(nn.Module):
    """Token embedding, a body and an output projection tied to the embedding: a parameter held by two stages."""

    def __init__(self, vocab: int = 24) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, WIDTH)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
                                  nn.Linear(WIDTH, WIDTH))
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, tokens):
        return self.head(self.ln(self.body(self.wte(tokens))))


def _adamw(parameters):
    return torch.optim.AdamW(parameters, lr=1e-2, weight_decay=0.1)


def _train_clipped(rank: int, port: int, pp, tokens, target, norm_type: float, out_dir: str) -> None:
    """Rank ``rank`` of 3: three AdamW steps of its stage of ``pp``, clipped by pp.clip_grad_norm_; saves its
    state and the norms."""
    _join_group(rank, 3, port)
    try:
        stage = pp.build_stage(rank, torch.device("cpu"))
        sched = pp.schedule(stage, loss_fn, schedule="1f1b", scale_grads=True)
        optimizer = _adamw(stage.submod.parameters())
        norms = []
        for _ in range(3):
            optimizer.zero_grad()
            sched.step(tokens) if rank == 0 else sched.step(target=target) if rank == 2 else sched.step()
            norms.append(float(pp.clip_grad_norm_(stage, 0.5, norm_type=norm_type)))
            optimizer.step()
        torch.save({"state": stage.submod.state_dict(), "norms": norms}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_clip_grad_norm_clips_every_stage_by_the_norm_of_the_whole_model(tmp_path):
    """clip_grad_norm_ on a stage's parameters clips by the norm of that stage's gradients: each stage by
    another factor, and AdamW's parameters drifted from the unsplit model's by 1e-3 in three steps. The plan's
    clip_grad_norm_ reduces the norm over the stages (the tied weight counted once), so three clipped AdamW
    steps end where the unsplit model's do, for the norms 2, 1 and infinity, and return its norms."""
    g = torch.Generator().manual_seed(1)
    tokens, target = (torch.randint(0, 24, (BATCH, 3), generator=g) for _ in range(2))

    def model():
        torch.manual_seed(0)
        return TiedClassifier()

    pp = plan_pipeline(model(), micro((tokens,), 0), devices="epyc-7763:3", stages=3, microbatches=MICROBATCHES)
    assert pp.shared_parameters == {"wte.weight": (0, 2)}
    for norm_type in (2.0, 1.0, float("inf")):
        assert _run_ranks(_train_clipped, (pp, tokens, target, norm_type, str(tmp_path)), 3, timeout=120) == [0] * 3
        reports = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(3)]
        reference, norms = model(), []
        optimizer = _adamw(reference.parameters())
        for _ in range(3):
            optimizer.zero_grad()
            (loss_fn(reference(tokens), target) / MICROBATCHES).backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5, norm_type=norm_type)))
            optimizer.step()
        for report in reports:
            assert report["norms"] == pytest.approx(norms, rel=1e-6), norm_type
        merged = {k: v for report in reports for k, v in report["state"].items()}
        expected = reference.state_dict()
        assert sorted(merged) == sorted(k for k in expected if k != "head.weight")
        for name, value in merged.items():
            assert (value - expected[name]).abs().max() <= 1e-6, (norm_type, name)
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.clip_grad_norm_(object(), 1.0)
    assert str(error.value) == "stage must be a stage made by this plan's build_stage"


def _clip_once(rank: int, port: int, pp, x, y, out_dir: str) -> None:
    """Rank ``rank`` of 2: one step of its stage of ``pp``, clipped by pp.clip_grad_norm_; saves the norm and
    its gradients."""
    _join_group(rank, 2, port)
    try:
        stage = pp.build_stage(rank, torch.device("cpu"))
        sched = pp.schedule(stage, loss_fn)
        sched.step(x) if rank == 0 else sched.step(target=y)
        norm = pp.clip_grad_norm_(stage, 0.5)
        grads = {name: p.grad for name, p in stage.submod.named_parameters()}
        torch.save({"norm": norm, "grads": grads}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_clip_grad_norm_keeps_the_gradients_type():
    """torch's clip_grad_norm_ returns the norm of float64 gradients in float64 and scales them by it; the
    plan's cast the norm to float32, so the clipped gradients of a float64 model differed from the unsplit
    model's by 1e-8 and its norm was float32. Now both are the unsplit model's to the last bits."""
    import tempfile

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 8, generator=g, dtype=torch.float64), torch.randn(8, 4, generator=g, dtype=torch.float64)

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).double()

    pp = plan_pipeline(model(), (x[:2],), devices="epyc-7763:2", stages=2, microbatches=4)
    with tempfile.TemporaryDirectory() as out_dir:
        assert _run_ranks(_clip_once, (pp, x, y, out_dir), 2, timeout=120) == [0, 0]
        reports = [torch.load(os.path.join(out_dir, f"rank{rank}.pt")) for rank in range(2)]
    reference = model()
    for k in range(4):
        loss_fn(reference(x[2 * k:2 * k + 2]), y[2 * k:2 * k + 2]).backward()
    norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    assert norm.dtype == torch.float64 and float(norm) > 0.5   # it clips
    assert [r["norm"].dtype for r in reports] == [torch.float64] * 2
    assert [float(r["norm"]) for r in reports] == [pytest.approx(float(norm), rel=1e-13)] * 2
    expected = dict(reference.named_parameters())
    assert sorted(name for r in reports for name in r["grads"]) == sorted(expected)
    for r in reports:
        for name, grad in r["grads"].items():
            assert torch.allclose(grad, expected[name].grad, rtol=1e-12, atol=0), name


def test_a_model_input_that_stage_zero_relays_may_be_a_view(tmp_path):
    """``scale``, read by the last stage only, is relayed by stage 0; a transposed (non-contiguous) one, with a
    plan made from a contiguous example, made stage 0's send fail in gloo ("input tensor has to be contiguous")
    and the other rank lose its peer. The step's gradients now are the unsplit model's over the micro-batches."""
    torch.manual_seed(0)
    model = LateInput()
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 4, generator=g)
    scale = torch.rand(4, BATCH, generator=g).t()    # [BATCH, 4], a view: not contiguous
    assert not scale.is_contiguous()
    pp = plan_pipeline(model, micro((x, scale.contiguous()), 0), devices="epyc-7763:2", stages=2,
                       microbatches=MICROBATCHES)
    assert _run_ranks(_step_and_save_gradients, (pp, (x, scale), target, str(tmp_path)), 2, timeout=120) == [0, 0]
    for k in range(MICROBATCHES):
        loss_fn(model(*micro((x, scale), k)), micro((target,), k)[0]).backward()
    expected = dict(model.named_parameters())
    for rank in range(2):
        for name, grad in torch.load(tmp_path / f"{rank}.pt").items():
            assert _relative(grad, expected[name].grad) <= 1e-5, (rank, name)


class DetachedHead(nn.Linear):
    """A linear layer that reads its input detached: a head trained on features whose layers it does not train."""

    def forward(self, x):
        return F.linear(x.detach(), self.weight, self.bias)


def test_a_trained_layer_whose_result_reaches_the_loss_only_through_detach_gets_no_gradient(tmp_path):
    """The backbone's output crosses the boundary and is read only detached: it needs a gradient in the forward
    pass but gets none. Stage 0 declared one for it, torch's runtime sent zeros back, and the backbone's
    parameters ended with zero gradients where the model leaves none (an optimiser's weight decay or momentum
    then changed them); they now end with none, and the head's are the model's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), DetachedHead(WIDTH, 4))
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 4, generator=g)
    pp = plan_pipeline(model, micro((x,), 0), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    assert pp.relayed == (("linear",),)
    assert _run_ranks(_step_and_save_gradients, (pp, (x,), target, str(tmp_path)), 2, timeout=120) == [0, 0]
    for k in range(MICROBATCHES):
        loss_fn(model(*micro((x,), k)), micro((target,), k)[0]).backward()
    assert torch.load(tmp_path / "0.pt") == {"0.weight": None, "0.bias": None}
    assert model[0].weight.grad is None
    head = torch.load(tmp_path / "1.pt")
    assert sorted(head) == ["1.bias", "1.weight"]
    assert all(_relative(head[k], dict(model.named_parameters())[k].grad) <= 1e-6 for k in head)


class IdleTiedTable(nn.Module):
    """A table read by the first stage, detached, and by the last as an output projection whose result the loss
    does not read: no reader of it gets a gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(24, WIDTH)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, tokens, x):
        h = self.body(x + self.table(tokens).mean(1).detach())
        return self.out(h), h @ self.table.weight.t()


def _first_output_loss(out, target):
    return loss_fn(out[0], target)


def test_a_shared_parameter_no_holder_gets_a_gradient_for_keeps_none(tmp_path):
    """The holders of a shared parameter summed their parts, zeros for those that had none: where no holder had
    one, the parameter ended the step with zeros where the model leaves none (an optimiser's weight decay or
    momentum then changed it). It keeps none; the gradients of the others are the model's."""
    torch.manual_seed(0)
    model = IdleTiedTable()
    g = torch.Generator().manual_seed(1)
    tokens, x, target = (torch.randint(0, 24, (BATCH, 3), generator=g), torch.randn(BATCH, WIDTH, generator=g),
                         torch.randn(BATCH, 4, generator=g))
    pp = plan_pipeline(model, micro((tokens, x), 0), devices="epyc-7763:2", stages=2, microbatches=MICROBATCHES)
    assert pp.shared_parameters == {"table.weight": (0, 1)}
    assert _run_ranks(_step_and_save_gradients, (pp, (tokens, x), target, str(tmp_path), _first_output_loss), 2,
                      timeout=120) == [0, 0]
    grads = [torch.load(tmp_path / f"{rank}.pt") for rank in range(2)]
    for k in range(MICROBATCHES):
        _first_output_loss(model(*micro((tokens, x), k)), micro((target,), k)[0]).backward()
    assert model.table.weight.grad is None
    assert [grads[rank]["table.weight"] for rank in range(2)] == [None, None]
    expected = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    held = {name: grad for part in grads for name, grad in part.items() if grad is not None}
    assert sorted(held) == sorted(expected)
    assert all(_relative(held[name], expected[name]) <= 1e-6 for name in held)
