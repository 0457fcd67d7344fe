"""Forward hooks and pre-hooks of a planned model: the stages compute what they returned, call none of them."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402

from placement.torch import plan_pipeline  # noqa: E402

NOTE = ("torch.export traced what the hooks returned into the program, which the stages compute (with the Python "
        "values the hooks read, fixed as they were when it was exported), but no hook runs in a pipeline step, so "
        "what a hook records, logs or counts is not done; compute in forward what a hook should do at every step")


def hooked() -> tuple[nn.Module, list]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    seen: list = []
    model[0].register_forward_hook(lambda module, args, output: seen.append(output.detach()))   # records
    model[2].register_forward_pre_hook(lambda module, args: (args[0] - 0.5,))                # changes the input
    model[2].register_forward_hook(lambda module, args, output: output * 3.0)                 # changes the output
    return model, seen


def test_forward_hooks_are_computed_by_the_stages_and_their_calls_are_warned_of():
    """A hook that records activations recorded nothing in the stages' runs, silently; the hooks that change a
    module's input or output are computed by the stages as in the model. Each module holding one is named."""
    from placement.torch import ForwardHookWarning

    model, seen = hooked()
    x = torch.randn(4, 8)
    with pytest.warns(ForwardHookWarning) as caught:
        pp = plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    assert [str(w.message) for w in caught if w.category is ForwardHookWarning] == [
        "the stages call no forward hook of module '0' (a forward hook), module '2' (a forward pre-hook and a "
        f"forward hook): {NOTE}"]
    seen.clear()
    values = (x,)
    for s in range(pp.num_stages):
        out = pp.stage_module(s)(*values)
        values = out if isinstance(out, tuple) else (out,)
    assert seen == []   # what the warning says: the recording hook ran in no stage
    assert torch.allclose(out, model(x), rtol=1e-5, atol=1e-6) and len(seen) == 1


def test_torch_s_own_weight_hooks_and_a_model_without_hooks_draw_no_warning():
    from placement.torch import ForwardHookWarning

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # weight_norm's deprecation
        warnings.simplefilter("error", ForwardHookWarning)
        model = nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 16)), nn.ReLU(), nn.Linear(16, 2))
        assert model[0]._forward_pre_hooks   # torch's WeightNorm, which computes the weight before each call
        plan_pipeline(model, (torch.randn(4, 8),), devices="epyc-7763:2", stages=2, microbatches=2)
        plan_pipeline(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)), (torch.randn(4, 8),),
                      devices="epyc-7763:2", stages=2, microbatches=2)


def test_global_forward_hooks_are_warned_of():
    from placement.torch import ForwardHookWarning

    handle = nn.modules.module.register_module_forward_hook(lambda module, args, output: None)
    try:
        with pytest.warns(ForwardHookWarning) as caught:
            plan_pipeline(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)), (torch.randn(4, 8),),
                          devices="epyc-7763:2", stages=2, microbatches=2)
    finally:
        handle.remove()
    assert [str(w.message) for w in caught if w.category is ForwardHookWarning] == [
        f"the stages call no forward hook of torch's global hooks (a forward hook): {NOTE}"]
