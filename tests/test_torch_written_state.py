"""State the forward pass writes in place (placement.torch.state): which operators share its stage.

A stage holds its own copy of the state it reads; the operators that write it, read it as it is,
or read a value sharing its memory before the last write must be on one stage, else a copy goes
stale (module docstring of placement.torch.state). Checked on exported programs, by name, and on
plans whose stages are chained in this process over several micro-batches against the unsplit
model: the state written in place changes from one micro-batch to the next, so a stale copy shows
from the second micro-batch on.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402

import placement  # noqa: E402
from placement.torch import plan_pipeline  # noqa: E402
from placement.torch.state import written_state  # noqa: E402

WIDTH = 8


class CountTwice(nn.Module):
    """A step counter incremented before and after the body, the second time through the first
    increment's result (``add_(add_, 1)`` in the exported program), and multiplied into the output."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(()))
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, x):
        self.n.add_(1)
        h = self.body(x)
        self.n.add_(1)
        return self.out(h) * self.n


class NormTwice(nn.Module):
    """One BatchNorm (training mode) called before and after a body, its running mean also read after
    the second call: ``batch_norm`` updates the running statistics, though its schema does not say so."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(WIDTH)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.head = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 4))

    def forward(self, x):
        return self.head(self.bn(self.body(self.bn(x))) + self.bn.running_mean)


class TiedMaxNorm(nn.Module):
    """An embedding renormalised in place (``max_norm``) and tied to the output layer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, WIDTH, max_norm=1.0)
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, tokens):
        return self.out(self.body(self.emb(tokens)))


class ReadAfterWrite(nn.Module):
    """A buffer scaled in place once, its result read after the body: sent on as a copy, no constraint."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("m", torch.ones(WIDTH))
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH))

    def forward(self, x):
        scaled = self.m.mul_(0.5)
        return self.body(x) - scaled


class ChunkedState(nn.Module):
    """A buffer split by ``chunk`` (whose schema gives its items' aliasing only as a wildcard), one part
    updated in place from the input, and the buffer itself read again by the last operator."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("m", torch.ones(2 * WIDTH))
        self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh())
        self.out = nn.Linear(WIDTH, 4)

    def forward(self, x):
        scale, shift = self.m.chunk(2)
        shift.add_(0.1 * x.detach().mean(0))
        return self.out(self.body(x) * scale + shift) + self.m[-4:]


class FrozenParameterState(nn.Module):
    """A running statistic kept in a frozen parameter, updated in place and multiplied into the
    activations (autograd keeps it for the backward pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.stat = nn.Parameter(torch.ones(WIDTH), requires_grad=False)
        self.a, self.b = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        self.stat.mul_(0.9).add_(0.1 * h.detach().mean(0))
        return self.b(h * self.stat)


def _written(model, args):
    return written_state(torch.export.export(model, args))


def test_the_operators_that_write_state_or_read_it_before_the_last_write_are_named():
    x = torch.randn(2, WIDTH)
    # both increments write the counter (the second through the first one's result); the product reads
    # the second increment's result after the last write: not constrained
    assert _written(CountTwice(), (x,)) == {"n": {"add_", "add__1"}}
    # both BatchNorm calls update the statistics; the last add reads the running mean as it is; each call
    # increments the batch counter
    assert _written(NormTwice(), (x,)) == {"bn.running_mean": {"batch_norm", "batch_norm_1", "add"},
                                           "bn.running_var": {"batch_norm", "batch_norm_1"},
                                           "bn.num_batches_tracked": {"add_", "add__1"}}
    # the renormalisation writes the tied weight; the lookup and the output layer read it as it is
    tied = _written(TiedMaxNorm(), (torch.randint(0, 10, (2, 3)),))
    assert len(tied) == 1 and {"embedding_renorm_", "embedding", "linear_1"} <= next(iter(tied.values()))
    # one write; its result is read after it
    assert _written(ReadAfterWrite(), (x,)) == {"m": {"mul_"}}
    # in evaluation mode BatchNorm writes nothing
    assert _written(NormTwice().eval(), (x,)) == {}
    # chunk's items alias the buffer: the write into one is a write into it
    assert {"chunk", "add_"} <= _written(ChunkedState(), (x,))["m"]


def _two_stages(model: type) -> tuple[nn.Module, torch.Tensor, list]:
    """A copy of ``model`` unsplit, four micro-batches of two, and the stage modules of a 2-stage plan."""
    torch.manual_seed(0)
    net = model()
    unsplit = copy.deepcopy(net)
    batches = torch.randn(4, 2, WIDTH, generator=torch.Generator().manual_seed(1))
    pp = plan_pipeline(net, (batches[0],), devices="epyc-7763:2", stages=2, microbatches=4)
    return unsplit, batches, [pp.stage_module(s) for s in range(pp.num_stages)]


def _chained(modules: list, x: torch.Tensor) -> torch.Tensor:
    """The stages run one after another, each fed what the one before returned."""
    values: tuple = (x,)
    for module in modules:
        out = module(*values)
        values = out if isinstance(out, tuple) else (out,)
    return out


@pytest.mark.parametrize("model", [CountTwice, NormTwice, ReadAfterWrite, ChunkedState])
def test_stages_chained_over_micro_batches_compute_what_the_unsplit_model_does(model):
    unsplit, batches, modules = _two_stages(model)
    for x in batches:
        torch.testing.assert_close(_chained(modules, x), unsplit(x), rtol=1e-5, atol=1e-6)
    # the stage that holds the state holds what the unsplit model's state became
    for key, value in unsplit.state_dict().items():
        if key in dict(unsplit.named_buffers()):
            held = [m.state_dict()[key] for m in modules if key in m.state_dict()]
            assert len(held) == 1 and torch.equal(held[0], value), key


@pytest.mark.filterwarnings("ignore:TiedMaxNorm. no FLOP formula")   # embedding_renorm_, costed by its bytes
def test_a_tied_weight_renormalised_in_place_keeps_its_readers_on_one_stage():
    # the weight goes by its first name in the model (the export may name it by its second, out.weight)
    with pytest.raises(placement.InvalidParameterError,
                       match=r"^stages 2: no plan has 2 non-empty stages: the graph has 1 part .*share one stage, which "
                             r"holds its only up-to-date copy: 'emb.weight' \(written in place; read by emb, out\)"):
        plan_pipeline(TiedMaxNorm(), (torch.randint(0, 10, (2, 3)),), devices="epyc-7763:2", stages=2)


def test_state_in_a_frozen_parameter_is_read_through_a_copy_autograd_can_keep():
    """GPipe's order, every forward before any backward: the next micro-batch's update of the statistic
    changed what autograd had kept, and the backward pass failed ("modified by an inplace operation").
    The stages give the unsplit model's gradients (run micro-batch by micro-batch, where it works)."""
    unsplit, batches, modules = _two_stages(FrozenParameterState)
    losses = [_chained(modules, x).square().sum() for x in batches]
    for loss in losses:
        loss.backward()
    for x in batches:
        unsplit(x).square().sum().backward()
    grads = {name: p.grad for m in modules for name, p in m.named_parameters() if p.grad is not None}
    assert sorted(grads) == ["a.bias", "a.weight", "b.bias", "b.weight"]
    for name, p in unsplit.named_parameters():
        if p.requires_grad:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-5, atol=1e-6)


def test_state_sharing_memory_that_is_written_in_place_is_refused():
    class Views(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            base = torch.zeros(2, WIDTH)
            self.register_buffer("all", base)
            self.register_buffer("lo", base[0])
            self.register_buffer("hi", base[1])
            self.body = nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            self.all.add_(1)
            return self.body(x + self.lo) * self.hi

    with pytest.raises(placement.InvalidParameterError,
                       match=r"^model holds 'all', 'hi', 'lo', which share memory, and writes one of them in place; "
                             r"every stage copies each parameter and buffer on its own"):
        plan_pipeline(Views(), (torch.randn(2, WIDTH),), devices="epyc-7763:2", stages=2)


class WriteAfterRead(nn.Module):
    """``h`` read by ``cat`` and then rewritten by an in-place ReLU, nothing ordering the two: the plan
    put the ReLU on stage 0 and ``cat`` on stage 1, which then received ``relu(h)`` (output 64% off)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.act = nn.Linear(64, 64), nn.ReLU(inplace=True)
        self.heavy = nn.Sequential(nn.Linear(128, 512), nn.Linear(512, 512), nn.Linear(512, 64))
        self.c = nn.Sequential(nn.Linear(64, 512), *[nn.Linear(512, 512) for _ in range(5)], nn.Linear(512, 64))

    def forward(self, x):
        h = self.a(x)
        t = torch.cat([h, h], -1)
        h = self.act(h)
        return self.heavy(t) + self.c(h)


class ViewBeforeWrite(nn.Module):
    """A view of ``g`` taken before ``g.relu_()`` and read after it: in eager mode the view shows the
    ReLU; the plan put the view's reader on stage 1 and the ReLU on stage 2 (output 99% off)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.pre = nn.Sequential(*[nn.Linear(64, 64) for _ in range(5)])
        self.c = nn.Sequential(nn.Linear(64, 512), *[nn.Linear(512, 512) for _ in range(5)], nn.Linear(512, 64))

    def forward(self, x):
        h = self.pre(self.a(x))
        h.mul_(2.0)
        g = self.a(x)
        w = g.view(32, 64)
        g.relu_()
        return self.c(h) + w * 3


class InPlaceChains(nn.Module):
    """In-place operators that each read the last one's result (a ReLU after a normalisation, a residual
    ``x += f(x)``): the values order them, and no stage boundary is constrained."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.act = nn.LayerNorm(WIDTH), nn.ReLU(inplace=True)
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(3))

    def forward(self, x):
        x = self.act(self.norm(x))
        for layer in self.layers:
            x += layer(x)
        return x


class WrittenInput(nn.Module):
    """A model input read, then written in place, then read again through the write's result: the
    first reader shares the write's stage."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        y = self.a(x)
        x.mul_(2.0)
        return self.b(x) + y


def test_writes_into_activations_share_a_stage_with_the_readers_they_must_not_pass():
    from placement.torch.state import written_activations

    def grouped(model, x):
        return sorted(map(sorted, written_activations(torch.export.export(model, (x,))).values()))

    # cat reads h before the ReLU and no value leads from it to the ReLU
    assert grouped(WriteAfterRead(), torch.randn(32, 64)) == [["cat", "relu_"]]
    # the view is made before the ReLU and read after it: it is made on the ReLU's stage; its reader,
    # after the view, follows
    assert grouped(ViewBeforeWrite(), torch.randn(32, 64)) == [["relu_", "view"]]
    assert grouped(InPlaceChains(), torch.randn(2, WIDTH)) == []
    # a reads the input before the write, and no value leads from it to the write; b reads the write's
    # result, which the export gives it
    assert grouped(WrittenInput(), torch.randn(2, WIDTH)) == [["linear", "mul_"]]


def test_the_import_finds_the_activations_once_for_the_writes_into_them(monkeypatch):
    """Importing a model walks its activations' aliases once, for both the groups around writes into them and the
    writes into values another node computes; the groups and pairs are those each finds alone."""
    from placement.io.torch_export import import_torch
    from placement.torch import state
    from placement.torch.devices import parse_devices

    walks = []
    walk = state._activations
    monkeypatch.setattr(state, "_activations", lambda *args: walks.append(1) or walk(*args))
    imported = import_torch(WriteAfterRead(), (torch.randn(32, 64),), platform=parse_devices("h100:2"),
                            granularity="operator")
    assert len(walks) == 1
    program, about = imported.source, imported.instance["about"]
    groups = state.buffer_readers(imported.graph, state.written_activations(program))
    assert about["written_activations"] == {name: list(nodes) for name, nodes in groups.items()} != {}
    assert about.get("in_place_writes", []) == [list(p) for p in state.received_writes(program, imported.graph)]


@pytest.mark.parametrize("model, stages, granularity", [(WriteAfterRead, 2, "module"),
                                                        (ViewBeforeWrite, 3, "operator")])
def test_stages_around_an_activation_written_in_place_compute_the_unsplit_model(model, stages, granularity):
    torch.manual_seed(0)
    net, x = model(), torch.randn(32, 64)
    unsplit = copy.deepcopy(net)
    pp = plan_pipeline(net, (x,), devices="h100:4", stages=stages, granularity=granularity)
    values: tuple = (x,)
    for s in range(pp.num_stages):
        out = pp.stage_module(s)(*(v.clone() for v in values))   # what crosses a boundary is a copy
        values = out if isinstance(out, tuple) else (out,)
    torch.testing.assert_close(out, unsplit(x), rtol=1e-5, atol=1e-6)


class DropoutThenInPlace(nn.Module):
    """In evaluation, dropout returns its input itself (its schema says nothing of it), so the in-place
    ReLU after it writes into ``h``, which ``a`` read before: ``a`` shares the ReLU's stage. Where a
    stage received ``h`` and ran the dropout and the ReLU, the write went into the received tensor
    unseen, and autograd refused it."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(8, 32), nn.Linear(32, 32), nn.Linear(32, 32)
        self.drop, self.act = nn.Dropout(0.1), nn.ReLU(inplace=True)
        self.out = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 8))

    def forward(self, x):
        h = self.l2(self.l1(x))
        a = self.l3(h)
        return self.out(self.act(self.drop(h))) + a[:, :8]


def test_operators_that_return_their_argument_unannotated_alias_it():
    from placement.torch.state import written_activations

    model = DropoutThenInPlace().eval()
    groups = written_activations(torch.export.export(model, (torch.randn(4, 8),)))
    assert sorted(map(sorted, groups.values())) == [["linear_2", "relu_"]]
    assert written_activations(torch.export.export(model.train(), (torch.randn(4, 8),))) == {}   # a new tensor
    model.drop.p = 0.0   # in training too, the input itself
    groups = written_activations(torch.export.export(model, (torch.randn(4, 8),)))
    assert sorted(map(sorted, groups.values())) == [["linear_2", "relu_"]]
    model.drop.p = 0.1
    torch.manual_seed(0)
    model, x = DropoutThenInPlace().eval(), torch.randn(4, 8)
    unsplit = copy.deepcopy(model)
    for stages in (2, 3, 4):
        pp = plan_pipeline(copy.deepcopy(model), (x,), devices="h100:4", stages=stages, granularity="operator",
                           training=False)
        values: tuple = (x,)
        for module in [pp.stage_module(s) for s in range(pp.num_stages)]:
            out = module(*(v.clone() for v in values))
            values = out if isinstance(out, tuple) else (out,)
        torch.testing.assert_close(out, unsplit(x), rtol=1e-5, atol=1e-6)


class InputViewWritten(nn.Module):
    """A view of the input written in place after a body, the input read after the write: the view is
    made on the write's stage, or the write reaches only the view a stage received."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(*[nn.Linear(4, 4) for _ in range(4)])
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        v = x[:, :4]
        v.mul_(torch.sigmoid(self.body(v * 1.0)))
        return self.out(x)


def test_a_write_through_a_view_keeps_the_view_on_its_stage():
    from placement.torch.state import written_activations

    groups = written_activations(torch.export.export(InputViewWritten(), (torch.randn(2, 8),)))
    (names,) = groups.values()
    assert names == {"slice_1", "mul_", "linear_4"}      # the view, the write, the reader of the input
    with pytest.raises(placement.InvalidParameterError, match="share a stage with those that must see it"):
        plan_pipeline(InputViewWritten(), (torch.randn(2, 8),), devices="epyc-7763:4", stages=2)


class InPlaceDropoutThenWrite(nn.Module):
    """``nn.Dropout(inplace=True)`` in evaluation returns ``h`` itself, and the graph leaves it out; a
    column of ``h`` is then written and ``h`` read after: the write shares a stage with the operator
    that made ``h``. Joined with the dropout, the constraint fell away with it, and the head ran
    before the write (output 55% off)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.drop = nn.Linear(8, 8), nn.Dropout(0.1, inplace=True)
        self.side = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)])
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        h = self.drop(self.l1(x))
        h[:, 0] = self.side(h * 1.0)[:, 0]
        return self.head(h)


def test_a_join_through_a_dropout_the_graph_leaves_out_lands_on_its_input():
    from placement.torch.state import written_activations

    model = InPlaceDropoutThenWrite().eval()
    x = torch.randn(4, 8)
    (names,) = written_activations(torch.export.export(model, (x,))).values()
    assert "linear" in names and "copy_" in names and "dropout_" not in names
    unsplit = copy.deepcopy(model)
    pp = plan_pipeline(model, (x,), devices="h100:4", stages=2, granularity="operator", training=False)
    values: tuple = (x,)
    for module in [pp.stage_module(s) for s in range(pp.num_stages)]:
        out = module(*(v.clone() for v in values))
        values = out if isinstance(out, tuple) else (out,)
    torch.testing.assert_close(out, unsplit(x), rtol=1e-5, atol=1e-6)


def test_more_stages_than_the_written_state_leaves_separable_are_refused_by_their_count():
    """A counter buffer read at the start and the end keeps both on one stage: the model has two parts a
    pipeline can separate, so three stages are refused naming stages (it named the devices)."""
    class Counter(nn.Module):
        def __init__(self, d: int = 16) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            h = torch.relu(self.a(x))
            self.count = self.count + 1
            return self.c(torch.relu(self.b(h))) * self.count

    x = torch.randn(4, 16)
    assert plan_pipeline(Counter(), (x,), devices="h100:4", stages=2).num_stages == 2
    with pytest.raises(placement.InvalidParameterError) as refused:
        plan_pipeline(Counter(), (x,), devices="h100:4", stages=3)
    assert refused.value.parameter == "stages"
    assert str(refused.value).startswith("stages 3: no plan has 3 non-empty stages: the graph has 2 parts that a "
                                         "pipeline can separate (colour classes and cycles stay on one device); ")


class ParameterViews(nn.Module):
    """``lo`` is a parameter registered as a view of the parameter ``all``: in the model an optimiser
    step on either writes the memory both read."""

    def __init__(self) -> None:
        super().__init__()
        self.all = nn.Parameter(torch.zeros(2, WIDTH))
        self.lo = nn.Parameter(self.all.data[0])
        self.body = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return self.body(x + self.lo) * self.all[1]


def test_trained_parameters_sharing_memory_are_refused_in_a_training_plan():
    with pytest.raises(placement.InvalidParameterError,
                       match=r"^model holds 'all', 'lo', which share memory, and trains one of them \(an optimiser "
                             r"step writes it in place\); every stage copies each parameter and buffer on its own"):
        plan_pipeline(ParameterViews(), (torch.randn(2, WIDTH),), devices="epyc-7763:2", stages=2)


def test_parameters_sharing_memory_plan_for_inference_or_frozen():
    # nothing writes them: an inference plan, or a training plan whose shared parameters are frozen
    pp = plan_pipeline(ParameterViews(), (torch.randn(2, WIDTH),), devices="epyc-7763:2", stages=2, training=False)
    assert pp.result.ok
    frozen = ParameterViews()
    frozen.all.requires_grad_(False)
    frozen.lo.requires_grad_(False)
    assert plan_pipeline(frozen, (torch.randn(2, WIDTH),), devices="epyc-7763:2", stages=2).result.ok


def test_trained_parameters_in_disjoint_parts_of_one_storage_are_planned():
    # views of disjoint rows of one tensor (weights flattened into one buffer, as cuDNN does an RNN's):
    # a step on one writes none of the other's memory, so the stages' copies stay the model's
    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            flat = torch.randn(2, WIDTH)
            self.lo, self.hi = nn.Parameter(flat[0]), nn.Parameter(flat[1])
            self.body = nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            return self.body(x + self.lo) * self.hi

    model = Flat()
    assert model.lo.untyped_storage().data_ptr() == model.hi.untyped_storage().data_ptr()
    assert plan_pipeline(model, (torch.randn(2, WIDTH),), devices="epyc-7763:2", stages=2).result.ok
