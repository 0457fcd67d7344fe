"""Forward hooks and pre-hooks of a planned model: the stages compute what they returned, call none of them."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402

from placement.cli import main  # noqa: E402
from placement.costmodel.roofline import make_platform  # noqa: E402
from placement.io.opgraph import CostModelWarning  # noqa: E402
from placement.io.torch_export import import_torch  # noqa: E402
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
    assert [str(w.message) for w in caught if issubclass(w.category, ForwardHookWarning)] == [
        "the stages call no forward hook of module '0' (a forward hook), module '2' (a forward pre-hook and a "
        f"forward hook): {NOTE}"]   # once: not the import's warning besides
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


IMPORT_NOTE = ("the split-spec and pipe-split forms run a program that torch.export traced through the hooks (in "
               "torch.distributed.pipelining.pipeline(), or export_program for pipe_split_module), which computes "
               "what they returned, with the Python values they read fixed as they were when it was exported, as "
               "the instance costs it, but calls no hook, so what a hook records, logs or counts is not done in a "
               "pipeline step; compute in forward what a hook should do at every step (a DeepSpeed PipelineModule "
               "calls the hooks of the modules it is given as layers, no others)")


def hooked_factory() -> tuple[nn.Module, tuple]:
    """Factory for ``placement import``: the model of :func:`hooked` and one micro-batch."""
    return hooked()[0], (torch.randn(4, 8),)


def test_an_import_warns_of_the_forward_hooks_its_hand_off_forms_never_call():
    """The import said nothing of them, though split-spec and pipe-split stages compute what they returned and
    call none of them, as plan_pipeline's do; the warning is a CostModelWarning, which placement import prints."""
    from placement.torch import ForwardHookWarning, ImportedForwardHookWarning

    assert issubclass(ImportedForwardHookWarning, ForwardHookWarning)
    assert issubclass(ImportedForwardHookWarning, CostModelWarning)
    with pytest.warns(ImportedForwardHookWarning) as caught:
        import_torch(*hooked_factory(), platform=make_platform("h100", "epyc-7763", 2, 0))
    assert [str(w.message) for w in caught if issubclass(w.category, ForwardHookWarning)] == [
        "forward hooks of module '0' (a forward hook), module '2' (a forward pre-hook and a forward hook) run in "
        f"the model's forward: {IMPORT_NOTE}"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForwardHookWarning)
        import_torch(nn.Sequential(nn.Linear(8, 2)), (torch.randn(4, 8),),
                     platform=make_platform("h100", "epyc-7763", 2, 0))


def test_placement_import_prints_the_forward_hook_warning(tmp_path, capsys):
    out = tmp_path / "hooked.json"
    assert main(["import", "tests.test_torch_forward_hooks:hooked_factory", "--out", str(out)]) == 0
    assert capsys.readouterr().err == (
        "warning: forward hooks of module '0' (a forward hook), module '2' (a forward pre-hook and a forward hook) "
        f"run in the model's forward: {IMPORT_NOTE}\n")
