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
