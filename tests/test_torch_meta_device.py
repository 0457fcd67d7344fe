"""A model built on the meta device is planned without memory, and its stages are made on a real device
with uninitialised tensors, which a checkpoint of the model fills."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402

from placement.torch import plan_pipeline  # noqa: E402


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4)).eval()


def test_the_stages_of_a_meta_model_load_a_checkpoint_on_a_real_device_and_compute_the_model():
    torch.manual_seed(0)
    real = model()
    with torch.device("meta"):
        meta = model()
    pp = plan_pipeline(meta, (torch.empty(4, 16, device="meta"),), devices="h100:2", stages=2, training=False)
    assert pp.stage_module(0).get_parameter("0.weight").is_meta   # no device: where the model is
    stages = [pp.stage_module(s, "cpu") for s in range(pp.num_stages)]
    for stage in stages:
        assert {value.device.type for value in stage.state_dict().values()} == {"cpu"}
        assert stage.load_state_dict(real.state_dict(), strict=False).missing_keys == []
    x = torch.randn(4, 16)
    values = stages[0](x)
    assert torch.equal(stages[1](*values), real(x))


def test_a_meta_model_in_training_mode_is_planned_as_the_same_model_on_the_cpu():
    # every meta tensor reports storage address 0; read as one memory, the BatchNorm's running statistics
    # (written in place) and the trained weights were refused as views of one another
    torch.manual_seed(0)
    real = model().train()
    with torch.device("meta"):
        meta = model().train()
    x = torch.randn(8, 16)
    planned = plan_pipeline(meta, (torch.empty(8, 16, device="meta"),), devices="h100:2", stages=2, microbatches=2)
    expected = plan_pipeline(real, (x,), devices="h100:2", stages=2, microbatches=2)
    assert planned.result.status == expected.result.status == "optimal"
    assert planned.result.value == expected.result.value
    assert [s.nodes for s in planned.result.plan] == [s.nodes for s in expected.result.plan]


class Positions(nn.Module):
    """Token and position embeddings, the positions made in ``forward`` on the tokens' device (as language
    models make them); with ``rotary``, scaled by a non-persistent buffer computed at construction."""

    def __init__(self, rotary: bool = False) -> None:
        super().__init__()
        self.emb, self.pos, self.out = nn.Embedding(16, 8), nn.Embedding(6, 8), nn.Linear(8, 4)
        self.rotary = rotary
        if rotary:
            self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8).float() / 8), persistent=False)

    def forward(self, tokens):
        h = self.emb(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        return self.out(torch.relu(h * self.inv_freq if self.rotary else h))


def test_tensors_a_meta_model_makes_in_forward_are_made_on_the_stage_s_device():
    # torch.export writes the traced device into arange: the stage on the CPU made the positions on the meta
    # device, and the embedding read them as memory never filled (no error, other values)
    torch.manual_seed(0)
    real, tokens = Positions(), torch.randint(0, 16, (2, 6))
    with torch.device("meta"):
        meta = Positions()
    pp = plan_pipeline(meta, (tokens.to("meta"),), devices="epyc-7763:2", stages=2, training=False,
                       granularity="operator")
    stages = [pp.stage_module(s, "cpu") for s in range(pp.num_stages)]
    for stage in stages:
        stage.load_state_dict(real.state_dict(), strict=False)
    assert torch.equal(stages[1](*stages[0](tokens)), real(tokens))
    assert "device(type='meta')" in pp.stage_module(0).code   # no device: where the model is


def test_a_stage_holding_non_persistent_buffers_of_a_meta_model_says_that_no_checkpoint_fills_them():
    from placement.torch import UninitialisedStateWarning

    torch.manual_seed(0)
    real, tokens = Positions(rotary=True), torch.randint(0, 16, (2, 6))
    with torch.device("meta"):
        meta = Positions(rotary=True)
    pp = plan_pipeline(meta, (tokens.to("meta"),), devices="epyc-7763:2", stages=2, training=False,
                       granularity="operator")
    (holder,) = [s for s in range(pp.num_stages) if "inv_freq" in dict(pp.stage_module(s).named_buffers())]
    with pytest.warns(UninitialisedStateWarning) as caught:
        stages = [pp.stage_module(s, "cpu") for s in range(pp.num_stages)]
    assert [str(w.message) for w in caught] == [
        f"stage {holder} on cpu holds 'inv_freq', which the model on the meta device has outside its state_dict "
        "(non-persistent buffers, or tensors the program keeps as constants): uninitialised there, and "
        "load_state_dict cannot fill them; copy their values in before the first step "
        "(module.get_buffer(name).copy_(value), from the model made on a real device), or give the model these "
        "tensors on a real device before planning"]
    for stage in stages:
        assert stage.load_state_dict(real.state_dict(), strict=False).missing_keys == []
    stages[holder].get_buffer("inv_freq").copy_(real.inv_freq)
    assert torch.equal(stages[1](*stages[0](tokens)), real(tokens))


def test_a_transformers_language_model_on_the_meta_device_runs_as_stages_on_the_cpu():
    # its causal mask and positions are made in forward: the stages raised torch's 'Tensor device mismatch'
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (placement[models])")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=64, use_cache=False)
    torch.manual_seed(0)
    real = transformers.GPT2LMHeadModel(config).eval()
    with torch.device("meta"):
        meta = transformers.GPT2LMHeadModel(config).eval()
    tokens, mask = torch.randint(0, 100, (2, 8)), torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    kwargs = {"attention_mask": mask, "return_dict": False}
    pp = plan_pipeline(meta, (tokens.to("meta"),), {**kwargs, "attention_mask": mask.to("meta")},
                       devices="epyc-7763:2", stages=2, training=False)
    stages = [pp.stage_module(s, "cpu") for s in range(pp.num_stages)]
    for stage in stages:
        stage.load_state_dict(real.state_dict(), strict=False)
    (logits,) = stages[1](*stages[0](tokens, **kwargs))
    assert torch.equal(logits, real(tokens, **kwargs)[0])
