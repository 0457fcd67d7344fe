"""``plan_pipeline`` in one process: parameters, stage counts, stage modules, the user's model, the exchange charge.

The distributed runs are in ``test_torch_pipeline_training.py``; here the stages of a plan are
chained in one process (stage ``s`` fed with what stage ``s - 1`` returns), which must compute
the model's output and, summed over the stages that hold a parameter, its gradients.
"""

from __future__ import annotations

import collections
import inspect
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import placement  # noqa: E402
from placement.io.module_names import GraphModuleNameWarning  # noqa: E402
from placement.io.opgraph import CostModelWarning  # noqa: E402
from placement.plan import DeviceAssignment, Plan  # noqa: E402
from placement.torch import RelayWarning, plan_pipeline  # noqa: E402
from placement.torch.sharing import SUFFIX  # noqa: E402
from tests.test_torch_pipeline_training import LateInput, UNet, case, loss_fn, micro  # noqa: E402


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))


def chained(pp, args):
    """The stages of ``pp`` run one after another in this process: the last stage's output and the modules."""
    modules = [pp.stage_module(s) for s in range(pp.num_stages)]
    values = tuple(args)
    for module in modules:
        out = module(*values)
        values = out if isinstance(out, tuple) else (out,)
    return out, modules


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_stages_n_gives_exactly_n_non_empty_verified_stages(stages):
    pp = plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:4", stages=stages)
    assert pp.num_stages == stages == pp.result.num_stages
    assert pp.result.ok and pp.result.verified and pp.result.stages == stages
    assert all(s.nodes for s in pp.result.plan)


def test_a_plan_not_proven_optimal_says_so_and_what_to_change(monkeypatch):
    """A plan the solver stopped on before proving it optimal (the time limit on a large operator graph)
    comes with a warning that says how far it may be from the optimum and what the call can change;
    a proven plan with none."""
    import dataclasses
    import warnings

    from placement.torch import UnprovenPlanWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", UnprovenPlanWarning)
        proven = plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:4", stages=2, granularity="operator")
    value = proven.result.value
    solve = placement.solve

    def stopped(*args, **kwargs):   # the same plan, as a MILP stopped by its time limit would give it
        return dataclasses.replace(solve(*args, **kwargs), status=placement.Status.FEASIBLE, bound=value / 2,
                                   gap=0.5, method="milp")

    monkeypatch.setattr(placement, "solve", stopped)
    with pytest.warns(UnprovenPlanWarning) as caught:
        pp = plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:4", stages=2, time_limit=5,
                           granularity="operator")
    assert pp.result.status == "feasible" and pp.result.value == value
    assert str(caught[0].message) == (f"the plan is not proven optimal: its largest load is {value:.6g}, the best "
                                      f"lower bound {value / 2:.6g} (gap 50.00%) when the solver stopped "
                                      "(time_limit=5 s); a larger time_limit gives it more time; "
                                      "granularity='module' plans a smaller graph")


class TwoFunctions(nn.Module):
    def forward(self, x):
        return torch.tanh(torch.relu(x))


def test_too_few_nodes_for_the_stages_asked_for():
    # nn.Sequential(Linear) exports to one operator: one node at either granularity.
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(nn.Sequential(nn.Linear(8, 2)), (torch.randn(4, 8),), stages=2)
    assert error.value.parameter == "stages"
    assert str(error.value) == ("stages must be at most the number of nodes of the model (1 at granularity "
                                "'module'), got 2")
    # a model with no submodules and two operators (ReLU, tanh) is one node at granularity 'module'
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(TwoFunctions(), (torch.randn(4, 8),), stages=2)
    assert str(error.value) == ("stages must be at most the number of nodes of the model (1 at granularity "
                                "'module'), got 2; granularity 'operator' plans finer nodes, one per operator")
    assert plan_pipeline(TwoFunctions(), (torch.randn(4, 8),), stages=2, granularity="operator").num_stages == 2
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:4", stages=5)
    assert str(error.value) == "stages must be at most the number of devices (4 in 'h100:4'), got 5"
    # before the 1F1B micro-batch count, whose advice (fewer stages or schedule 'gpipe') a second refusal met
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:8,epyc-7763:1", stages=100, microbatches=4)
    assert str(error.value) == "stages must be at most the number of devices (9 in 'h100:8,epyc-7763:1'), got 100"


def test_a_model_that_is_no_module_is_refused():
    """A function or an exported program is no model to split into stages: refused by name, before the
    arguments are read (a function failed with an AttributeError of nn.Module's named_modules)."""
    model, x = mlp(), torch.randn(4, 8)
    for given, said in ((lambda t: model(t), "function"), (None, "NoneType"),
                        (torch.export.export(model, (x,)),
                         "ExportedProgram; give the nn.Module it was exported from")):
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(given, (x,), devices="h100:2")
        assert (error.value.parameter, str(error.value)) == ("model", f"model must be a torch.nn.Module, not {said}")


def test_arguments_and_micro_batches_that_no_schedule_can_run_are_refused():
    x = torch.randn(4, 8)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), x, devices="h100:2")
    assert str(error.value) == ("args must be a tuple of the model's positional inputs (one micro-batch), not "
                                "Tensor; for one input write (x,)")
    # a number given positionally: torch's stages refused it at the first step ("Use kwargs")
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x, 2.0), devices="h100:2")
    assert str(error.value) == ("args must hold tensors only, but args[1] is a float: pipeline stages take tensors "
                                "as positional inputs; pass it by keyword, in kwargs")
    # torch's runtime splits every tensor input along its first dimension: a 0-dimensional one failed at the
    # first step inside torch, one whose first dimension is not the batch was split along the wrong one
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x,), {"temperature": torch.tensor(2.0)}, devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("kwargs", (
        "kwargs holds the 0-dimensional tensor kwargs['temperature'], which the pipeline runtime cannot split into "
        "micro-batches (it splits every tensor input along its first dimension): give it a first dimension of the "
        "micro-batch's size, or make it a buffer of the model"))
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x, torch.ones(2, 1)), devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("args", (
        "args holds args[1] of first dimension 2, but args[0]'s is 4: the pipeline runtime splits every tensor input "
        "into micro-batches along its first dimension, so each must have the micro-batch as its first dimension "
        "(move the batch of an input such as an LSTM's initial state to the front; an input no sample owns, such as "
        "an attention mask all samples share, belongs in the model: a buffer, or made in forward)"))
    # torch's step(*args, target=, losses=, ...) keeps these names: stage 0 waited for an input no call could give
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x,), {"temperature": torch.ones(4, 1), "target": x, "losses": x}, devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("kwargs", (
        "kwargs holds the keyword inputs 'target', 'losses', which the step() of torch's pipeline schedules takes "
        "for itself (target, losses, return_outputs, loss_kwargs) and never passes to the model: rename them in the "
        "model's forward"))
    # the export's TypeError blamed the model ('model Tempered cannot be exported: torch.export raised TypeError:
    # got an unexpected keyword argument 'temprature'')
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x,), {"temprature": torch.ones(4, 1)}, devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("kwargs", (
        "kwargs holds the keyword 'temprature', which Tempered.forward does not take (its keyword parameters: 'x', "
        "'temperature')"))
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Tempered(), (x,), {2: torch.ones(4, 1)}, devices="h100:2")
    assert str(error.value) == ("kwargs must map the names of forward's keyword parameters to inputs, but holds the "
                                "key 2 (int)")
    with pytest.raises(placement.InvalidParameterError) as error:   # it was planned as a model that costs nothing
        plan_pipeline(mlp(), (torch.randn(0, 8),), devices="h100:2")
    assert str(error.value) == "args must be one micro-batch of samples, but they hold no elements (shapes (0, 8))"
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (x,), devices="h100:3", stages=3, microbatches=2)
    assert str(error.value) == ("microbatches must be at least the number of stages (3) under the 1f1b schedule, "
                                "got 2; use more micro-batches, fewer stages or schedule 'gpipe'")
    with pytest.raises(placement.InvalidParameterError) as error:     # a V100 has no bf16 peak
        plan_pipeline(mlp().to(torch.bfloat16), (x.to(torch.bfloat16),), devices="v100:2")
    assert str(error.value) == ("devices 'v100:2' cannot run the model's data type, which must be one of the data "
                                "types with a peak FLOP/s on device 'v100' (NVIDIA Tesla V100 SXM2 32GB): 'fp64', "
                                "'fp32', 'fp16', not 'bf16'")
    pp = plan_pipeline(mlp(), (x,), devices="h100:3", stages=3, microbatches=2, schedule="gpipe")
    assert pp.num_stages == 3
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.stage_module(0, "bogus")
    assert error.value.parameter == "device"
    assert str(error.value).startswith("device must be a torch device ('cpu', 'cuda:0', a torch.device), not 'bogus' (")
    if not torch.cuda.is_available():   # torch's own AssertionError ('Torch not compiled with CUDA enabled') came through
        with pytest.raises(placement.InvalidParameterError) as error:
            pp.stage_module(0, "cuda:0")
        assert str(error.value) == f"device names 'cuda:0', but this torch sees no CUDA device (torch {torch.__version__})"


def test_1f1b_with_fewer_micro_batches_than_devices_plans_fewer_stages():
    """Six equal linears on four H100s: the unrestricted optimum uses four stages, which 1F1B with
    two micro-batches cannot run. Left to choose, the planner returns the best plan of at most two
    stages: the 2-stage optimum (the 1-stage plan carries all six), proven, with a note."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)])
    x = (torch.randn(8, 64),)
    assert plan_pipeline(model, x, devices="h100:4").num_stages == 4
    pp = plan_pipeline(model, x, devices="h100:4", microbatches=2)
    two = plan_pipeline(model, x, devices="h100:4", stages=2, microbatches=2)
    one = plan_pipeline(model, x, devices="h100:4", stages=1, microbatches=2)
    assert pp.num_stages == 2
    assert (pp.result.status, pp.result.value, pp.result.bound) == ("optimal", two.result.value, two.result.value)
    assert two.result.value < one.result.value
    assert pp.result.message.endswith("1f1b with 2 micro-batches runs at most 2 stages: the best such plan")
    assert plan_pipeline(model, x, devices="h100:4", microbatches=1).num_stages == 1
    # inference too: torch's Schedule1F1B refuses fewer micro-batches than stages (the plan had 4 stages, and
    # its schedule() then refused the plan's own 2 micro-batches)
    assert plan_pipeline(model, x, devices="h100:4", training=False).num_stages == 4
    served = plan_pipeline(model, x, devices="h100:4", training=False, microbatches=2)
    assert served.num_stages == 2
    assert served.result.value == plan_pipeline(model, x, devices="h100:4", training=False, stages=2).result.value
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, x, devices="h100:4", training=False, stages=3, microbatches=2)
    assert str(error.value) == ("microbatches must be at least the number of stages (3) under the 1f1b schedule, "
                                "got 2; use more micro-batches, fewer stages or schedule 'gpipe'")


@pytest.mark.parametrize(("devices", "message"), [
    ("h100", "devices must be '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4') with positive counts; 'h100' in 'h100' "
             "is not '<id>:<count>'"),
    ("h100:0", "devices must be '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4') with positive counts; 'h100:0' in "
               "'h100:0' is not '<id>:<count>'"),
    ("h100:\u00b2", "devices must be '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4') with positive counts; "
                    "'h100:\u00b2' in 'h100:\u00b2' is not '<id>:<count>'"),   # a superscript: a digit int() refuses
    ("h100:2,,", "devices must be '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4') with positive counts; '' in "
                 "'h100:2,,' is not '<id>:<count>'"),
    ("tpu:2", "devices must name a device of the catalogue (a100, a100-40gb, epyc-7763, h100, v100), not 'tpu'"),
    ("h100:2,a100:2", "devices names two accelerator types ('h100' and 'a100'); a pipeline plan takes one "
                      "accelerator type and one CPU type"),
    ("h100:2,h100:2", "devices names 'h100' twice in 'h100:2,h100:2'"),
    ("", "devices must be a string '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4'), not ''"),
    (4, "devices must be a string '<id>:<count>[,<id>:<count>]' (e.g. 'h100:4'), not 4"),
])
def test_bad_devices_strings_are_one_line_errors(devices, message):
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (torch.randn(4, 8),), devices=devices)
    assert error.value.parameter == "devices"
    assert str(error.value) == message and "\n" not in message


def test_devices_name_the_platform():
    # CPUs only when named: 2 H100s and no CPU; then 1 H100 and 2 CPU sockets.
    pp = plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:2")
    assert [(t.name, t.count) for t in pp.imported.problem.device_types] == [("accelerator", 2), ("cpu", 0)]
    pp = plan_pipeline(mlp(), (torch.randn(4, 8),), devices="H100:1, epyc-7763:2", stages=3)
    assert [(t.name, t.count) for t in pp.imported.problem.device_types] == [("accelerator", 1), ("cpu", 2)]
    assert sorted(s.device_type for s in pp.result.plan) == ["accelerator", "cpu", "cpu"]


def test_the_users_model_is_not_modified():
    model, args, target = case("gpt")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = dict(model.named_parameters())
    modes = [m.training for m in model.modules()]
    pp = plan_pipeline(model, micro(args, 0), devices="epyc-7763:3", stages=3)
    out, modules = chained(pp, micro(args, 0))
    loss_fn(out, micro((target,), 0)[0]).backward()
    for module in modules:  # the stages' own tensors change; the model's must not
        for p in module.parameters():
            p.data.add_(1.0)
    assert dict(model.named_parameters()) == params and all(params[k] is p for k, p in model.named_parameters())
    assert model.lm_head.weight is model.wte.weight
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert sorted(model.state_dict()) == sorted(before)
    assert all(p.grad is None for p in model.parameters())
    assert [m.training for m in model.modules()] == modes
    for m in model.modules():
        assert not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks)


@pytest.mark.parametrize("granularity", ["module", "operator"])
def test_chained_stages_compute_the_model_and_its_gradients(granularity):
    # The tied LM at 3 stages: wte.weight is read by the embedding (stage 0) and by the output
    # projection (last stage); each holds it once and the parts of its gradient add up.
    model, args, target = case("gpt")
    pp = plan_pipeline(model, micro(args, 0), devices="epyc-7763:3", stages=3, granularity=granularity)
    assert pp.shared_parameters == {"wte.weight": (0, 2)}
    out, modules = chained(pp, micro(args, 0))
    reference = model(*micro(args, 0))
    assert torch.allclose(out, reference, rtol=1e-5, atol=1e-6)
    loss_fn(out, micro((target,), 0)[0]).backward()
    loss_fn(reference, micro((target,), 0)[0]).backward()
    summed: dict[str, torch.Tensor] = {}
    for module in modules:
        names = [k for k, _ in module.named_parameters(remove_duplicate=False)]
        assert len(names) == len(set(names)) and "lm_head.weight" not in names  # one tensor per stage, one name
        for k, p in module.named_parameters():
            summed[k] = summed.get(k, 0) + p.grad
    assert sorted(summed) == sorted(k for k, _ in model.named_parameters())
    for k, p in model.named_parameters():
        assert torch.allclose(summed[k], p.grad, rtol=1e-4, atol=1e-6), k


class VmapMask(nn.Module):
    """A causal mask built as recent ``transformers`` builds it: nested ``torch.vmap`` over positions,
    indexing a tensor inside (``torch.export`` writes functorch's calls and ``flat_apply``), then
    BatchNorm in training mode and masked attention."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.norm, self.out = nn.Linear(8, 8), nn.BatchNorm1d(6), nn.Linear(8, 4)

    def forward(self, x):
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

        position = torch.ones(x.shape[1], dtype=torch.long).cumsum(0)
        index = torch.arange(x.shape[1])
        with TransformGetItemToIndex():
            mask = torch.vmap(torch.vmap(lambda i, j: position[i] >= position[j], (None, 0)), (0, None))(index, index)
        h = self.norm(self.q(x))
        scores = (h @ h.transpose(-1, -2)).masked_fill(~mask, float("-inf")).softmax(-1)
        return self.out(scores @ h)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_a_vmap_region_is_traced_through_and_the_stages_compute_the_model(stages):
    # the vmap's plumbing would fail at run time where a stage boundary cut it; traced to ATen
    # operators, any split computes the model, its gradients and its BatchNorm statistics
    torch.manual_seed(0)
    model, x = VmapMask().train(), torch.randn(2, 6, 8)
    reference = VmapMask().train()
    reference.load_state_dict(model.state_dict())
    pp = plan_pipeline(model, (x,), devices="epyc-7763:4", stages=stages, granularity="operator")
    assert pp.num_stages == stages
    out, modules = chained(pp, (x,))
    expected = reference(x)
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    expected.square().sum().backward()
    summed: dict[str, torch.Tensor] = {}
    for module in modules:
        for k, p in module.named_parameters():
            summed[k] = summed.get(k, 0) + p.grad
    assert sorted(summed) == sorted(k for k, _ in reference.named_parameters())
    for k, p in reference.named_parameters():
        assert torch.allclose(summed[k], p.grad, rtol=1e-4, atol=1e-6), k
    buffers = {k: b for module in modules for k, b in module.named_buffers()}
    for k, b in reference.named_buffers():
        assert torch.equal(buffers[k], b), k


def test_a_full_checkpoint_loads_stage_by_stage():
    model, args, _ = case("unet")
    pp = plan_pipeline(model, micro(args, 0), devices="epyc-7763:4", stages=4)
    torch.manual_seed(7)
    checkpoint = UNet().state_dict()   # other values, same names
    covered = set()
    for s in range(pp.num_stages):
        module = pp.stage_module(s)
        assert set(module.state_dict()) <= set(checkpoint)
        loaded = module.load_state_dict(checkpoint, strict=False)
        assert loaded.missing_keys == []
        for k, v in module.state_dict().items():
            assert torch.equal(v, checkpoint[k])
        covered |= set(module.state_dict())
    assert covered == set(checkpoint)


class IdleState(nn.Module):
    """State the exported program never reads: BatchNorm's ``num_batches_tracked`` in eval mode, a
    parameter and a buffer ``forward`` never uses, a whole unused layer and a second name of it."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.norm, self.b = nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 8)
        self.unused = nn.Parameter(torch.randn(3))
        self.register_buffer("idle", torch.arange(4.0))
        self.spare = nn.Linear(2, 2)
        self.spare_alias = self.spare   # tied: its state_dict names are second names of spare's tensors

    def forward(self, x):
        return self.b(torch.relu(self.norm(self.a(x))))


@pytest.mark.parametrize("training", [False, True])
def test_the_stages_checkpoints_hold_every_entry_of_the_model_s(training):
    """Stages held only what their operators read, so saving the stages' checkpoints lost the state no
    operator reads; each such entry is now kept by one stage: that of its module's other state, or
    stage 0. Their union is the model's state_dict (tied tensors under their first name), with its
    values, and loads back into a fresh model."""
    torch.manual_seed(0)
    model, x = IdleState().eval(), torch.randn(4, 8)
    model.norm.num_batches_tracked.fill_(5)
    pp = plan_pipeline(model, (x,), devices="epyc-7763:3", stages=3, training=training)
    out, modules = chained(pp, (x,))
    assert torch.allclose(out, model(x))
    states = [module.state_dict() for module in modules]
    union = {k: v for state in states for k, v in state.items()}
    full = model.state_dict()
    aliases = {"spare_alias.weight", "spare_alias.bias"}
    assert set(union) == set(full) - aliases
    assert sum(map(len, states)) == len(union)   # none of these is read by two stages
    for k, v in union.items():
        assert torch.equal(v, full[k]), k
    holder = next(s for s, state in enumerate(states) if "norm.running_mean" in state)
    assert "norm.num_batches_tracked" in states[holder] and holder > 0
    assert {"unused", "idle", "spare.weight", "spare.bias"} <= set(states[0])
    assert isinstance(modules[0].get_parameter("unused"), nn.Parameter)
    torch.manual_seed(1)
    rebuilt = IdleState()
    loaded = rebuilt.load_state_dict(union, strict=False)
    assert sorted(loaded.missing_keys) == sorted(aliases) and loaded.unexpected_keys == []
    for k, v in rebuilt.state_dict().items():
        assert torch.equal(v, full[k]), k


def test_a_non_persistent_buffer_stays_out_of_the_stages_checkpoints():
    """A buffer registered with persistent=False (as position ids or rotary frequencies are) is not
    in the model's state_dict, so no stage may expect it there: the full checkpoint loads into each
    stage with no key missing, and the stages still compute the model."""
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
            self.register_buffer("scale", torch.tensor(2.0), persistent=False)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)) * self.scale)

    torch.manual_seed(0)
    model, x = Scaled(), torch.randn(4, 16)
    pp = plan_pipeline(model, (x,), devices="h100:2", stages=2)
    out, modules = chained(pp, (x,))
    assert torch.allclose(out, model(x))
    for module in modules:
        assert set(module.state_dict()) <= set(model.state_dict())
        assert module.load_state_dict(model.state_dict(), strict=False).missing_keys == []


def test_a_stage_may_write_into_the_activation_it_receives():
    """Linear → ReLU(inplace=True) → Linear on three CPUs: one module per stage, so stage 1 starts
    with relu_ on the tensor it receives, a leaf that requires grad, as a pipeline stage hands it
    over. The stage works on a copy: it returns relu(h), and the gradient it sends back is 1 where
    h > 0, else 0; chained, the stages give the model's output and gradients."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(32, 32), nn.ReLU(inplace=True), nn.Linear(32, 32)), torch.randn(4, 32)
    pp = plan_pipeline(model, (x,), devices="epyc-7763:3", stages=3)
    middle = pp.stage_module(1)
    assert any("relu_" in str(n.target) for n in middle.graph.nodes)
    h = torch.randn(4, 32).requires_grad_()
    out = middle(h)
    out = out[0] if isinstance(out, tuple) else out
    assert torch.equal(out, torch.relu(h))
    out.sum().backward()
    assert torch.equal(h.grad, (h > 0).float())
    out, modules = chained(pp, (x,))
    assert torch.allclose(out, model(x))
    out.sum().backward()
    model(x).sum().backward()
    grads = {k: p.grad for m in modules for k, p in m.named_parameters()}
    assert sorted(grads) == sorted(k for k, _ in model.named_parameters())
    for k, p in model.named_parameters():
        assert torch.allclose(grads[k], p.grad), k



class ScaledInput(nn.Module):
    """Scales its input in place (as an image model's ``x /= 255``), then clamps its token ids in place."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.net = nn.Embedding(5, 8), nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, x, tokens):
        x.div_(2)
        tokens.clamp_(max=4)
        return self.net(x + self.emb(tokens))


def test_stage_0_writes_into_a_copy_of_the_model_input_it_writes_in_place():
    """torch's runtime gives stage 0 each micro-batch as a view of the step's input, and views share one
    version counter: the second micro-batch's in-place write invalidated what autograd kept of the first (the
    divided input, the embedding's indices), and its backward pass raised. Stage 0 writes into copies, and the
    step's inputs are left as they were."""
    torch.manual_seed(0)
    model, x, tokens = ScaledInput(), torch.randn(4, 2, 8), torch.tensor([[1, 7], [4, 0], [9, 2], [3, 3]])
    pp = plan_pipeline(model, (x[:2], tokens[:2]), devices="epyc-7763:2", stages=2, microbatches=2)
    modules = [pp.stage_module(s) for s in range(2)]
    batch, ids = x.clone(), tokens.clone()
    outs = []
    for chunk in zip(batch.tensor_split(2), ids.tensor_split(2)):   # both forward passes, then both backward
        values = modules[0](*chunk)
        outs.append(modules[1](*values))
    torch.cat(outs).square().sum().backward()
    assert torch.equal(batch, x) and torch.equal(ids, tokens)
    expected = torch.cat([model(a.clone(), b.clone()) for a, b in zip(x.tensor_split(2), tokens.tensor_split(2))])
    expected.square().sum().backward()
    assert torch.allclose(torch.cat(outs), expected, rtol=1e-6, atol=1e-7)
    grads = {k: p.grad for m in modules for k, p in m.named_parameters()}
    assert sorted(grads) == sorted(k for k, _ in model.named_parameters())
    for k, p in model.named_parameters():
        assert torch.allclose(grads[k], p.grad, rtol=1e-5, atol=1e-7), k

def test_a_cpu_stage_between_accelerators_gives_way_to_the_accelerators_alone():
    """a → b → c; a and c take 1 on an accelerator and 100 on the CPU, b the other way round; no
    transfer costs; two accelerators and a CPU. The optimum, 1, runs b on the CPU between a and c
    on the accelerators, which no pipeline runtime executes. On the accelerators alone, b goes with
    a or with c: 101. That plan is returned, feasible, with the optimum 1 as its bound."""
    from placement.torch.planning import accelerators_only, cpu_between_accelerators

    doc = {"maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": f, "cpuLatency": c, "size": 1}
                     for i, f, c in ((1, 1, 100), (2, 100, 1), (3, 1, 100))],
           "edges": [{"sourceId": 1, "destId": 2, "cost": 0}, {"sourceId": 2, "destId": 3, "cost": 0}]}
    problem = placement.load(doc)
    optimum = placement.solve(problem)
    assert (optimum.status, optimum.value) == ("optimal", 1.0)
    assert cpu_between_accelerators(optimum.to_plan())
    assert not cpu_between_accelerators(Plan((DeviceAssignment("cpu", (1, 2)), DeviceAssignment("cpu", (3,)))))
    found = accelerators_only(problem, optimum, "x:2,y:1", objective="throughput", stages=None, time_limit=None)
    assert (found.status, found.value, found.bound) == ("feasible", 101.0, 1.0)
    assert found.gap == pytest.approx(100 / 101, rel=1e-12)
    assert not cpu_between_accelerators(found.to_plan())
    assert "runs a CPU stage between accelerator stages" in found.message
    with pytest.raises(placement.errors.InvalidParameterError, match=r"^devices 'x:2,y:1': the optimal plan runs "
                                                                      r"a CPU stage between accelerator stages"):
        accelerators_only(problem, optimum, "x:2,y:1", objective="throughput", stages=3, time_limit=None)
    # b needs 20 bytes, more than an accelerator's 10: only the CPU holds it, and the refusal says so
    doc["nodes"][1]["size"] = 20
    big = placement.load(doc)
    optimum = placement.solve(big)
    assert (optimum.status, optimum.value) == ("optimal", 1.0)
    with pytest.raises(placement.errors.InvalidParameterError, match=r"^devices 'x:2,y:1': the optimal plan runs "
                                                                      r"a CPU stage between accelerator stages, "
                                                                      r"which no pipeline runtime executes, and the "
                                                                      r"accelerators alone hold no plan \(node 2 "
                                                                      r"fits no device: "):
        accelerators_only(big, optimum, "x:2,y:1", objective="throughput", stages=None, time_limit=None)


def test_a_gap_too_small_for_two_decimals_is_told_with_its_digits():
    """a → b → c as above, b taking 1/50,000 on an accelerator: on the accelerators alone the plan is 1.00002
    against the optimum's 1, a gap of 0.002%, which the warning wrote as "gap 0.00%" beside "not proven
    optimal", as if the two contradicted each other."""
    from placement.torch.planning import accelerators_only, unproven_note

    doc = {"maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 1,
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": f, "cpuLatency": c, "size": 1}
                     for i, f, c in ((1, 1, 100), (2, 2e-5, 1), (3, 1, 100))],
           "edges": [{"sourceId": 1, "destId": 2, "cost": 0}, {"sourceId": 2, "destId": 3, "cost": 0}]}
    problem = placement.load(doc)
    found = accelerators_only(problem, placement.solve(problem), "x:2,y:1", objective="throughput", stages=None,
                              time_limit=None)
    assert (found.status, found.value, found.bound) == ("feasible", 1.00002, 1.0)
    assert unproven_note(found, None, "module") == (
        "the plan is not proven optimal: its largest load is 1.00002, the best lower bound 1 (gap 0.0020%) (the "
        "optimum (1) runs a CPU stage between accelerator stages, which no pipeline runtime executes: this is the "
        "best plan on the accelerators alone)")


def test_the_plan_on_the_accelerators_alone_keeps_1f1b_s_limit_on_stages():
    """a → b → c as above on three accelerators and a CPU: on the accelerators alone the optimum runs
    each node on its own (100), but 1F1B with 2 micro-batches runs 2 stages at most: b goes with a or c
    (101). That search returned the 3-stage plan, which plan_pipeline, with stages left open, then
    refused for having more stages than micro-batches."""
    from placement.torch.planning import accelerators_only

    doc = {"maxSizePerFPGA": 10, "maxFPGAs": 3, "maxCPUs": 1,
           "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": f, "cpuLatency": c, "size": 1}
                     for i, f, c in ((1, 1, 100), (2, 100, 1), (3, 1, 100))],
           "edges": [{"sourceId": 1, "destId": 2, "cost": 0}, {"sourceId": 2, "destId": 3, "cost": 0}]}
    problem = placement.load(doc)
    optimum = placement.solve(problem)
    options = dict(objective="throughput", stages=None, time_limit=None)
    found = accelerators_only(problem, optimum, "x:3,y:1", **options)
    assert (found.num_stages, found.value) == (3, 100.0)
    found = accelerators_only(problem, optimum, "x:3,y:1", 2, **options)
    assert (found.status, found.num_stages, found.value, found.bound) == ("feasible", 2, 101.0, 1.0)
    for node in doc["nodes"]:   # each node fills an accelerator: no plan of 2 stages on the accelerators alone
        node["size"] = 10
    problem = placement.load(doc)
    with pytest.raises(placement.errors.InvalidParameterError) as error:
        accelerators_only(problem, placement.solve(problem), "x:3,y:1", 2, **options)
    assert str(error.value) == ("devices 'x:3,y:1': the optimal plan runs a CPU stage between accelerator stages, "
                                "which no pipeline runtime executes, and the accelerators alone hold no plan (none of "
                                "at most 2 stages, the most that 1f1b runs with 2 micro-batches)")


class Tables(nn.Module):
    """Linears, indices computed from them, four embedding tables of 57 GiB each (one per H100), linears:
    the tables fit together on the CPU only, between the linears."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(*(nn.Linear(4096, 4096) for _ in range(4)), nn.Linear(4096, 8))
        self.tables = nn.ModuleList(nn.Embedding(15_000_000, 1024) for _ in range(4))
        self.tail = nn.Sequential(nn.Linear(8 * 1024, 8192), *(nn.Linear(8192, 8192) for _ in range(4)))

    def forward(self, x):
        ids = (self.head(x).abs() * 1000).long()
        return self.tail(sum(table(ids) for table in self.tables).flatten(1))


def test_with_stages_left_open_1f1b_s_micro_batches_bound_the_plan_on_the_accelerators_alone():
    with torch.device("meta"):
        model = Tables().eval()
    x = torch.empty(64, 4096, device="meta")
    pp = plan_pipeline(model, (x,), devices="h100:4,epyc-7763:1", training=False, microbatches=4)
    assert [s.device_type for s in pp.result.plan] == ["accelerator"] * 4 and pp.result.status == "feasible"
    # it refused the microbatches for the 4 stages it had planned with no limit
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (x,), devices="h100:4,epyc-7763:1", training=False, microbatches=3)
    assert str(error.value).endswith("the accelerators alone hold no plan (none of at most 3 stages, the most that "
                                     "1f1b runs with 3 micro-batches)")


def test_the_exchange_of_a_shared_parameter_is_charged_once_per_step():
    # The exchange runs once per step, after every micro-batch's backward pass: a micro-batch's load
    # carries 1/m of it (3072 bytes over 64e9 B/s, 4.8e-5 ms per step), not all of it.
    model, args, _ = case("gpt")
    for m in (2, 8):
        pp = plan_pipeline(model, micro(args, 0), devices="h100:2", stages=2, microbatches=m)
        (exchange,) = [n["id"] for n in pp.instance["nodes"] if n["name"].endswith(SUFFIX)]
        (cost,) = [e["cost"] for e in pp.instance["edges"] if e["sourceId"] == exchange]
        assert abs(cost - 4.8e-5 / m) <= pp.instance["about"]["time_quantum_ms"] / 2


def test_the_plan_charges_the_exchange_of_a_shared_parameter():
    # TiedLM: wte.weight is 24 x 16 fp32 = 1536 bytes, read by the embedding and the output
    # projection. Its exchange moves 2 * 1536 bytes over the H100's PCIe link (64e9 B/s) once per step:
    # 3072 / 64e9 s = 4.8e-5 ms, 2.4e-5 ms per micro-batch of a step of 2 (to the instance's time quantum).
    model, args, _ = case("gpt")
    pp = plan_pipeline(model, micro(args, 0), devices="h100:2", stages=2, microbatches=2)
    nodes = pp.instance["nodes"]
    (exchange,) = [n for n in nodes if n["name"].endswith(SUFFIX)]
    assert exchange["name"] == "wte.weight" + SUFFIX and exchange["isBackwardNode"]
    quantum = pp.instance["about"]["time_quantum_ms"]
    edges = [e for e in pp.instance["edges"] if e["sourceId"] == exchange["id"]]
    assert len(edges) == 1 and edges[0]["size"] == 3072.0
    assert abs(edges[0]["cost"] - 2.4e-5) <= quantum / 2
    forward = len(pp.imported.graph.nodes)
    # torch.export names the tied tensor by its last alias; the plan by the model's first name
    readers = [v for v in range(forward) if any(p.name == "lm_head.weight" for op in pp.imported.graph.node_ops(v)
                                                for p in op.params)]
    assert exchange["colorClass"] == readers[0] and edges[0]["destId"] == forward + readers[1]
    # The holders sit on both devices: each pays the exchange once, beyond the plan's load without it.
    assert pp.shared_parameters == {"wte.weight": (0, 1)}
    plan = pp.result.to_plan()
    without = Plan(tuple(DeviceAssignment(d.type, tuple(v for v in d.nodes if v != exchange["id"]))
                         for d in plan.devices))
    charged = placement.verify(pp.instance, plan, contiguity="stages").report[0].devices
    plain = placement.verify(pp.imported.instance, without, contiguity="stages").report[0].devices
    assert [a.load - b.load for a, b in zip(charged, plain)] == [edges[0]["cost"]] * 2
    # At run time each stage sends or receives h.0's 768-byte output and its gradient, 1,536 B / 64e9 B/s
    # = 2.4e-5 ms, and the exchange's share (counted as charged): 4.8e-5 ms. The plan charges 7.2e-5 ms:
    # it also charges the residual add's gradient (1,536 B) that PyTorch sums before sending.
    assert [abs(t.runtime - 4.8e-5) <= 3 * quantum for t in pp.transfers] == [True, True]
    assert [abs(t.charged - 7.2e-5) <= 3 * quantum for t in pp.transfers] == [True, True]
    # The simulator runs the plan at its load: the exchange's edge, from the first holder's stage to the
    # second's, orders no backward call (it refused every such plan as waiting in a cycle)
    simulated = placement.simulate(pp.instance, pp.result, schedule="1f1b-async")
    assert simulated.time_per_sample == pytest.approx(pp.result.value, rel=1e-9)


def test_build_stage_needs_a_process_group_and_schedule_its_own_stages():
    pp = plan_pipeline(mlp(), (torch.randn(4, 8),), stages=2)
    assert not torch.distributed.is_initialized()
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.build_stage(0, "cpu")
    assert str(error.value) == "group needs an initialised process group (torch.distributed.init_process_group)"
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.schedule(object(), loss_fn)
    assert str(error.value) == "stage must be a stage made by this plan's build_stage"
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.stage_module(2)
    assert str(error.value) == "stage_index must be below the number of stages (2), got 2"


def test_keyword_inputs_go_to_the_first_stage_and_travel_to_their_reader():
    torch.manual_seed(0)
    model, x, scale = LateInput(), torch.randn(2, 16), torch.randn(2, 4)
    pp = plan_pipeline(model, (x,), {"scale": scale}, devices="epyc-7763:3", stages=3)
    assert all("scale" in received for received in pp.relayed)   # read by the last operator only
    first = pp.stage_module(0)
    values = first(x, scale=scale)
    for s in range(1, pp.num_stages):
        values = pp.stage_module(s)(*values)
    assert torch.equal(values, model(x, scale=scale))


def test_the_schedule_chooses_the_objective_and_inference_plans_have_no_backward_nodes():
    torch.manual_seed(0)
    model, args = LateInput(), (torch.randn(2, 16), torch.randn(2, 4))
    gpipe = plan_pipeline(model, args, devices="h100:2", stages=2, schedule="gpipe")
    assert (gpipe.result.objective, gpipe.result.method, gpipe.result.status) == ("throughput-gpipe", "milp", "optimal")
    assert gpipe.default_schedule == "gpipe"
    inference = plan_pipeline(model, args, devices="h100:2", stages=2, training=False)
    assert inference.result.objective == "throughput" and inference.result.ok
    assert not any(node["isBackwardNode"] for node in inference.instance["nodes"])
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, args, schedule="zb")
    assert str(error.value) == "schedule must be one of 'gpipe', '1f1b', not 'zb'"


Named = collections.namedtuple("Named", ["logits", "aux"])


class Outputs(nn.Module):
    """Three linears; returns what ``form`` says."""

    def __init__(self, form: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.form = form

    def forward(self, x):
        y = self.c(self.b(self.a(x)))
        return {"pair": (y, y), "dict": {"y": y}, "int": (y, 3), "scalar": (y, y.square().sum()),
                "named": Named(y, y), "none": (y, None), "weight": (y, self.a.weight),
                "nested": (y, (y, y))}[self.form]


def test_the_model_returns_a_tensor_or_a_tuple_of_tensors():
    x = torch.randn(2, 4)
    model = Outputs("pair")
    pp = plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2)
    out, _ = chained(pp, (x,))
    assert isinstance(out, tuple) and len(out) == 2 and all(torch.equal(o, model(x)[0]) for o in out)
    for form, message in (("dict", "model returns a dict; a pipelined model returns a tensor or a tuple of tensors: "
                                   "return a tuple of its values (a transformers model does when called with "
                                   "return_dict=False)"),
                          ("named", "model returns a namedtuple, Named; a pipelined model returns a tensor or a plain "
                                    "tuple of tensors (the last stage returns a tuple): return tuple() of it"),
                          ("int", "model returns output 1 (3), which is not a tensor; a pipelined model returns a "
                                  "tensor or a tuple of tensors"),
                          ("nested", "model returns a nested tuple (output 1 is a tuple); a pipelined model returns a "
                                     "tensor or a flat tuple of tensors: return its tensors as items of one tuple (a "
                                     "transformers model returns a tuple inside its output when called with "
                                     "output_hidden_states or output_attentions, and a dual-encoder such as CLIP "
                                     "always does, its encoders' outputs: wrap it in a module that returns the "
                                     "tensors the loss needs)"),
                          # a loss computed inside the model: torch's runtime failed after the backward pass,
                          # concatenating the micro-batches' losses
                          ("scalar", "model returns the 0-dimensional tensor 'sum_1', which the pipeline runtime "
                                     "cannot gather over micro-batches (it concatenates each output along its first "
                                     "dimension); return it with a first dimension (a loss as loss.unsqueeze(0), or "
                                     "one per sample) and reduce it in loss_fn")):
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(Outputs(form), (x,), devices="epyc-7763:2", stages=2)
        assert str(error.value) == message


def test_an_output_no_pipeline_returns_is_refused_before_the_search(monkeypatch):
    # a search of minutes on a large model (the MILP's time limit) was run before the refusal
    def no_search(*args, **kwargs):
        raise AssertionError("the plan was searched for")

    monkeypatch.setattr(placement, "solve", no_search)
    with pytest.raises(placement.InvalidParameterError, match=r"^model returns a dict; "):
        plan_pipeline(Outputs("dict"), (torch.randn(2, 4),), devices="epyc-7763:2", stages=2)
    # a value that is not a tensor, a 0-dimensional tensor, a parameter: they were refused after the search
    for form, start in (("int", "model returns output 1 (3), which is not a tensor"),
                        ("none", "model returns output 1 (None), which is not a tensor"),
                        ("scalar", "model returns the 0-dimensional tensor 'sum_1', "),
                        ("weight", "model returns its parameter or buffer 'a.weight' itself; ")):
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(Outputs(form), (torch.randn(2, 4),), devices="epyc-7763:2", stages=2)
        assert str(error.value).startswith(start), form
    # more stages than 1F1B's micro-batches: the search ran to its end (a MILP's time limit) before the refusal
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:3", stages=3, microbatches=2)
    assert str(error.value) == ("microbatches must be at least the number of stages (3) under the 1f1b schedule, "
                                "got 2; use more micro-batches, fewer stages or schedule 'gpipe'")


class Tempered(nn.Module):
    """A linear layer whose output is divided by a constant keyword input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, temperature: float = 1.0):
        return self.fc(x) / temperature


class Biased(nn.Module):
    """A linear layer plus a bias taken from a dict given by keyword."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, extra):
        return self.fc(x) + extra["bias"]


def test_tensors_inside_a_keyword_input_are_refused_as_the_others():
    """torch's runtime splits the tensors inside a keyword input's dict along their first dimension too: a
    0-dimensional one was planned, and the first step failed with an IndexError inside torch."""
    x = torch.randn(4, 8)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Biased(), (x,), {"extra": {"bias": torch.tensor(2.0)}}, devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("kwargs", (
        "kwargs holds the 0-dimensional tensor kwargs['extra']['bias'], which the pipeline runtime cannot split "
        "into micro-batches (it splits every tensor input along its first dimension): give it a first dimension of "
        "the micro-batch's size, or make it a buffer of the model"))
    with pytest.raises(placement.InvalidParameterError, match=r"^kwargs holds kwargs\['extra'\]\['bias'\] of first "
                                                              r"dimension 1, but args\[0\]'s is 4: "):
        plan_pipeline(Biased(), (x,), {"extra": {"bias": torch.randn(1, 8)}}, devices="h100:2")
    pp = plan_pipeline(Biased(), (x,), {"extra": {"bias": torch.randn(4, 8)}}, devices="h100:2", stages=2)
    assert pp.num_stages == 2


class WithState(nn.Module):
    """A layer plus an initial state laid out as an LSTM's, ``[layers, batch, hidden]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, h):
        return self.fc(x) + h.sum(0)


def test_an_input_of_another_first_dimension_is_planned_for_one_micro_batch():
    """torch's runtime cuts every tensor input into the step's micro-batches along its first dimension: with
    more than one, a state [layers, batch, hidden] is cut along its layers, and refused; with one, nothing
    is cut, and the plan runs it as the model does."""
    torch.manual_seed(0)
    model, x, h = WithState(), torch.randn(4, 8), torch.randn(2, 4, 8)
    with pytest.raises(placement.InvalidParameterError):
        plan_pipeline(model, (x, h), devices="h100:2", schedule="gpipe", microbatches=2)
    pp = plan_pipeline(model, (x, h), devices="h100:2", schedule="gpipe", microbatches=1)
    outputs = (x, h)
    for k in range(pp.num_stages):
        outputs = pp.stage_module(k)(*outputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert torch.allclose(outputs[0], model(x, h))


class WithFinalState(nn.Module):
    """A layer and an LSTM returning its output at the last step and its final state ``[layers, batch, hidden]``,
    and the output again flattened over batch and time, ``[batch · time, hidden]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.rnn = nn.Linear(8, 16), nn.LSTM(16, 16, num_layers=2, batch_first=True)

    def forward(self, x):
        o, (h, _) = self.rnn(self.fc(x))
        return o[:, -1], h, o.reshape(-1, 16)


def test_an_output_without_the_batch_first_is_told_of():
    """torch's runtime concatenates each output over the micro-batches along its first dimension: the final
    state of 2 micro-batches of 4 came back [4, 4, 16] where the model returns [2, 8, 16], without a word.
    The output flattened over batch and time ([4 · 5, 16] per micro-batch) concatenates as the model's; with
    one micro-batch a step nothing is concatenated."""
    import warnings

    from placement.torch import OutputBatchWarning

    torch.manual_seed(0)
    x = torch.randn(4, 5, 8)
    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(WithFinalState(), (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    assert [str(w.message) for w in caught if w.category is OutputBatchWarning] == [
        "the model returns output 1 of shape [2, 4, 16], whose first dimension is not the "
        "micro-batch's (4): the pipeline runtime concatenates each output over the micro-batches along its first "
        "dimension, so step() returns it otherwise than the model does for the whole batch (losses and gradients "
        "are not affected: loss_fn sees each micro-batch's own outputs); return it with the batch first"]
    whole = WithFinalState()
    assert [tuple(t.shape) for t in whole(torch.cat([x, x]))] == [(8, 16), (2, 8, 16), (40, 16)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutputBatchWarning)
        plan_pipeline(WithFinalState(), (x,), devices="epyc-7763:2", stages=2, microbatches=1, schedule="gpipe")
        # a loss the model computes, returned as docs/pytorch.md says (loss.unsqueeze(0)): one per micro-batch
        plan_pipeline(WithLoss(), (x,), devices="epyc-7763:2", stages=2, microbatches=2)


class WithStatistics(nn.Module):
    """Two layers returning their output, its mean over the batch ([8] for a micro-batch of 4), a sum of a
    parameter ([8], no batch at all) and the output flattened ([4 · 4, 2])."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.b(self.a(x))
        return h, h.mean(0), self.a.weight.sum(1), h.reshape(-1, 2)


def test_an_output_whose_first_dimension_is_a_multiple_of_the_micro_batch_but_does_not_grow_is_told_of():
    """A first dimension that is a multiple of the micro-batch's (8 for 4) was taken as flattened over the
    batch, without a word: step() of 4 micro-batches returned the batch mean and the parameter's sum as [32],
    where the model returns [8]. An export with a symbolic batch tells them from the flattened output,
    [16, 2] per micro-batch and [64, 2] for the whole batch, which concatenates as the model's."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    whole = WithStatistics()
    assert [tuple(t.shape) for t in whole(torch.cat([x] * 4))] == [(16, 8), (8,), (8,), (64, 2)]
    from placement.torch import OutputBatchWarning

    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(whole, (x,), devices="h100:2", stages=2, microbatches=4)
    assert [str(w.message).split(", whose")[0] for w in caught if w.category is OutputBatchWarning] == [
        "the model returns output 1 of shape [8], output 2 of shape [8]"]


def test_an_output_flattened_over_the_batch_is_read_off_the_graph_without_a_second_export():
    """[4, 5, 16] viewed as [20, 16] merges the batch with the steps: the graph says it grows with the batch,
    and the export with a symbolic batch (seconds on a large model) is not asked for; the mean over the
    batch of WithStatistics ([8] for 4) is asked about, once."""
    from placement.io.torch_export import export_program
    from placement.torch.partition import batch_outputs

    asked = []

    def follows():   # what the export with a symbolic batch says of WithStatistics's four outputs
        asked.append(True)
        return [(True, False), (False,), (False,), (True, False)]

    flattened = export_program(WithFinalState(), (torch.randn(4, 5, 8),))
    assert batch_outputs(flattened, 4, follows).outputs == (1,)   # the final state [2, 4, 16]
    assert asked == []
    statistics = export_program(WithStatistics(), (torch.randn(4, 8),))
    assert batch_outputs(statistics, 4, follows).note.startswith("the model returns output 1 of shape [8], output 2 "
                                                                 "of shape [8], whose")
    assert asked == [True]


class Interleaved(nn.Module):
    """Outputs whose first dimension grows with the batch but does not list one sample's rows after another's:
    an LSTM's output [time, batch, 16] flattened time-major and projected ([time · batch, 5]), the batch's two
    halves of the features stacked ([2 · batch, 5]), the output repeated ([2 · batch, 5]); and the same
    output flattened batch-major and projected ([batch · time, 5]), which is not told of."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.rnn, self.out = nn.Linear(8, 16), nn.LSTM(16, 16), nn.Linear(16, 5)

    def forward(self, x):
        h, _ = self.rnn(self.fc(x).transpose(0, 1))
        y = self.out(h)
        return (self.out(h.reshape(-1, 16)), torch.cat([y[0], y[-1]]), y[0].repeat(2, 1),
                self.out(h.transpose(0, 1).reshape(-1, 16)))


def test_an_output_interleaving_the_samples_is_told_of():
    """The three outputs concatenate over micro-batches otherwise than the model returns them for the whole
    batch (shown below on two micro-batches of 4), and had no warning: their first dimension grows with the
    batch, which was all the export with a symbolic batch was asked. The operator that makes that dimension
    tells them from the batch-major one (whose concatenation is the model's)."""
    from placement.torch import OutputBatchWarning

    torch.manual_seed(0)
    model, x = Interleaved(), torch.randn(8, 3, 8)
    whole, halves = model(x), [model(x[:4]), model(x[4:])]
    assert [torch.allclose(torch.cat([a, b]), whole[k], atol=1e-6) for k, (a, b) in
            enumerate(zip(*halves))] == [False, False, False, True]
    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(model, (x[:4],), devices="epyc-7763:2", stages=2, training=False, microbatches=2)
    assert [str(w.message) for w in caught if w.category is OutputBatchWarning] == [
        "the model returns output 0 of shape [12, 5], output 1 of shape [8, 5], output 2 of shape [8, 5], whose "
        "first dimension is not the micro-batch's (4): the pipeline runtime concatenates each output over the "
        "micro-batches along its first dimension, so step() returns it otherwise than the model does for the whole "
        "batch (losses and gradients are not affected: loss_fn sees each micro-batch's own outputs); return it "
        "with the batch first"]


class Flattened(nn.Module):
    def forward(self, x):   # x: [batch, time, 8]
        y = x.transpose(0, 1)
        return (y.flatten(0, 1) * 2, y.contiguous().view(-1, 8), torch.stack([x, x]).flatten(0, 1),
                torch.cat([x.flatten(), x.flatten()], -1), x.flatten(0, 1), x.repeat_interleave(2, 0))


def test_which_merge_of_dimensions_lists_the_samples_one_after_another():
    """Time-major [time, batch] merged by flatten or view, [2, batch] stacked then merged, and two flattened
    copies concatenated along their last (and only) dimension interleave the samples' rows; [batch, time]
    merged, and each sample repeated in place, list them one after another (every first dimension here grows
    with the batch)."""
    from placement.torch.partition import outputs_following_batch

    assert outputs_following_batch(Flattened(), (torch.randn(4, 3, 8),), None) == [
        (False, False), (False, False), (False, False, False), (False,), (True, False), (True, False, False)]


class BatchMean(nn.Module):
    """A layer returning its output and the output's mean over the batch, flattened; a mask and a flag by
    keyword, in forward's order ``mask``, ``scale``, ``flag``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x, mask=None, scale=1.0, flag=False):
        h = self.a(x) * (mask if mask is not None else 1.0) * scale
        return h, h.mean(0).flatten()


@pytest.mark.parametrize("shape, kwargs", [
    ((4, 4, 8), {}),                                         # the sequence as long as the micro-batch: [4, 8] -> [32]
    ((4, 8), {"flag": True, "mask": torch.ones(4, 8)}),      # keywords out of forward's order: [8]
])
def test_a_batch_mean_is_told_of_whatever_sizes_coincide_and_keywords_come_in(shape, kwargs):
    """The mean over a micro-batch of 4 of a [4, 4, 8] input, flattened, is [32]: read off the graph as a
    [4, 8] tensor of the batch flattened, it drew no warning (the 4 is the sequence's); keywords given in
    another order than forward's failed the export with a symbolic batch (its shapes were matched to forward's
    parameters by position), and the [8] mean was taken as flattened."""
    from placement.torch import OutputBatchWarning

    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(BatchMean(), (torch.randn(*shape),), kwargs, devices="h100:2", stages=2, microbatches=4)
    assert [str(w.message).split(", whose")[0] for w in caught if w.category is OutputBatchWarning] == [
        f"the model returns output 1 of shape [{32 if len(shape) == 3 else 8}]"]


def test_a_micro_batch_of_one_is_exported_as_two_copies_of_it(monkeypatch):
    """torch.export fixes a dimension of size 1 whatever it is told (and logs that it did): with one sample a
    micro-batch, the export with a symbolic batch told nothing, and a mean over the batch went unwarned. Two
    copies of the sample give a batch it keeps symbolic."""
    import placement.io.torch_export as torch_export
    from placement.torch.partition import outputs_following_batch

    shapes = []
    export = torch_export.export_program
    def recorded(model, args, kwargs, **k):
        shapes.append([tuple(args[0].shape), tuple(kwargs["mask"].shape)])
        return export(model, args, kwargs, **k)

    monkeypatch.setattr(torch_export, "export_program", recorded)
    follows = outputs_following_batch(BatchMean(), (torch.randn(1, 8),), {"mask": torch.ones(1, 8)})
    assert follows == [(True, False), (False,)]
    assert shapes == [[(2, 8), (2, 8)]]
    # an input with no sample, or of another first dimension than another's: no batch to make symbolic
    assert outputs_following_batch(BatchMean(), (torch.randn(0, 8),), None) is None
    assert outputs_following_batch(BatchMean(), (torch.randn(1, 8),), {"mask": torch.ones(2, 8)}) is None
    assert len(shapes) == 1


class SampleStatistics(nn.Module):
    """A layer returning its output ([batch, tokens, 8]), the output's mean over the batch keeping the dimension
    ([1, tokens, 8]) and the output sequence-first ([tokens, batch, 8])."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        return h, h.mean(0, keepdim=True), h.transpose(0, 1)


@pytest.mark.parametrize("shape, told", [
    ((1, 3, 8), "output 2 of shape [3, 1, 8], whose first dimension is not the micro-batch's (1); output 1 of shape "
                "[1, 3, 8], whose first dimension has the micro-batch's size (1) but does not grow with the batch"),
    ((4, 4, 8), "output 1 of shape [1, 4, 8], whose first dimension is not the micro-batch's (4); output 2 of "
                "shape [4, 4, 8], whose first dimension has the micro-batch's size (4) but does not grow with the "
                "batch"),
])
def test_an_output_of_the_micro_batch_s_size_that_does_not_grow_with_the_batch_is_told_of(shape, told):
    """With one sample a micro-batch every first dimension is a multiple of it, and with as many tokens as
    samples the sequence-first output has the micro-batch's size first: the mean over the batch ([1, tokens,
    8] for any batch) and the sequence-first output ([tokens, batch, 8]) went unwarned where sizes did not tell
    them from the batch's, while step() of 4 micro-batches returned them concatenated along their first
    dimension, otherwise than the model (shown below); the batch-first output concatenates as the model's and
    is not told of."""
    from placement.torch import OutputBatchWarning

    torch.manual_seed(0)
    model, x = SampleStatistics(), torch.randn(4 * shape[0], *shape[1:])
    whole, parts = model(x), [model(part) for part in x.split(shape[0])]
    assert [torch.cat(outputs).shape == whole[k].shape and torch.allclose(torch.cat(outputs), whole[k])
            for k, outputs in enumerate(zip(*parts))] == [True, False, False]
    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(model, (x[:shape[0]],), devices="h100:2", stages=2, microbatches=4)
    assert [str(w.message) for w in caught if w.category is OutputBatchWarning] == [
        f"the model returns {told}: the pipeline runtime concatenates each output over the micro-batches along its "
        "first dimension, so step() returns it otherwise than the model does for the whole batch (losses and "
        "gradients are not affected: loss_fn sees each micro-batch's own outputs); return it with the batch first"]
    with warnings.catch_warnings():   # one sample a micro-batch, flattened with its tokens: as the model's
        warnings.simplefilter("error", OutputBatchWarning)
        plan_pipeline(nn.Sequential(nn.Linear(8, 8), nn.Flatten(0, 1)), (x[:1],), devices="h100:2", stages=2,
                      microbatches=4)


def test_a_model_on_the_meta_device_is_told_of_at_one_sample_a_micro_batch_too():
    """A model that cannot run (its tensors on the meta device) is asked through the export with a symbolic
    batch, of two copies of its sample: the mean over the batch is told of as where the model runs."""
    from placement.torch import OutputBatchWarning

    with torch.device("meta"):
        model, x = SampleStatistics(), torch.randn(1, 3, 8)
    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(model, (x,), devices="h100:2", stages=2, microbatches=4)
    assert [str(w.message).split(":")[0] for w in caught if w.category is OutputBatchWarning] == [
        "the model returns output 2 of shape [3, 1, 8], whose first dimension is not the micro-batch's (1); output 1 "
        "of shape [1, 3, 8], whose first dimension has the micro-batch's size (1) but does not grow with the batch"]


class InBatchNegatives(nn.Module):
    """Two towers and, per sample, the cross-entropy of its pair against every other sample of the batch
    (CLIP's in-batch negatives), one loss per sample."""

    def __init__(self) -> None:
        super().__init__()
        self.img, self.txt = nn.Linear(12, 16), nn.Linear(10, 16)

    def forward(self, image, text):
        logits = F.normalize(self.img(image), dim=-1) @ F.normalize(self.txt(text), dim=-1).t()
        return F.cross_entropy(logits / 0.1, torch.arange(image.shape[0]), reduction="none")


class Centred(nn.Module):
    """Features centred on the batch's mean, and the features themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = self.a(x)
        return self.b(h), self.b(h - h.mean(0, keepdim=True))


MIXING = ("on the other samples of its batch (what it returns for two micro-batches at once differs from what it "
          "returns for each: a statistic over the batch, in-batch negatives, a flip along the batch, state forward "
          "updates from the batch): the pipeline runtime runs each micro-batch alone, so step() returns, and "
          "loss_fn and the gradients see, what each micro-batch's samples give among themselves, otherwise than the "
          "model does for the whole batch; compute what mixes the samples of different micro-batches outside the "
          "pipeline, or plan one micro-batch a step")


def test_a_model_mixing_the_samples_of_its_batch_is_told_of():
    """Each output keeps the batch first, so no shape told: a per-sample loss against in-batch negatives, and
    features centred on the batch, came back from step() as each micro-batch's among themselves (shown
    below on two micro-batches: the model's for both at once differ from its for each), without a word. The
    uncentred output is as the model's and is not named."""
    from placement.torch import SampleMixingWarning

    torch.manual_seed(0)
    image, text, x = torch.randn(8, 12), torch.randn(8, 10), torch.randn(8, 8)
    clip, centred = InBatchNegatives(), Centred()
    with torch.no_grad():
        assert not torch.allclose(clip(image, text), torch.cat([clip(image[:4], text[:4]), clip(image[4:], text[4:])]))
        both, halves = centred(x), [centred(x[:4]), centred(x[4:])]
        assert [torch.allclose(both[k], torch.cat([halves[0][k], halves[1][k]]), atol=1e-6) for k in (0, 1)] == [
            True, False]
    for model, inputs, which in ((clip, (image[:4], text[:4]), "output for a sample depends"),
                                 (centred, (x[:4],), "output 1 for a sample depends")):
        with pytest.warns(SampleMixingWarning) as caught:
            plan_pipeline(model, inputs, devices="epyc-7763:2", stages=2, microbatches=2)
        assert [str(w.message) for w in caught if w.category is SampleMixingWarning] == [
            f"the model's {which} {MIXING}"]


def test_a_process_forked_after_planning_runs_multi_threaded_operators():
    """The mixing check runs the model in the planning process; on torch's threads it started their pool
    (OpenMP's), which a process forked after inherits unusable: the stages of ranks forked after
    plan_pipeline hung in their first multi-threaded operator and never sent a micro-batch. In a fresh
    interpreter: plan, fork, and a 4-thread matrix product in the child ends."""
    import subprocess
    import sys

    script = """
import multiprocessing, torch
from torch import nn
from placement.torch import plan_pipeline
torch.set_num_threads(4)
plan_pipeline(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)), (torch.randn(64, 64),),
              devices="epyc-7763:2", stages=2, microbatches=2)
def work():
    torch.randn(512, 512) @ torch.randn(512, 512)
child = multiprocessing.get_context("fork").Process(target=work, daemon=True)
child.start()
child.join(30)
print("exit", child.exitcode)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["exit", "0"], done.stderr[-2000:]


class Noisy(nn.Module):
    """A layer whose output gets noise drawn in forward, whatever the mode (a diffusion model's training
    forward), and a dropout module."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.drop = nn.Linear(8, 8), nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.a(x)) + torch.randn_like(x)


class InPlaceState(nn.Module):
    """Writes into its input and updates a running mean of it, in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.register_buffer("mean", torch.zeros(8))

    def forward(self, x):
        self.mean.mul_(0.5).add_(0.5 * x.mean(0))
        x.mul_(2)
        return self.a(x) - self.mean


def test_the_mixing_check_leaves_the_model_its_inputs_and_the_random_state_as_found():
    """The check runs the model: the running mean it updates in forward (which mixes the samples: told of),
    the input it writes into, its mode and torch's random state are as they were; a model that draws noise
    in forward, and one in training mode with dropout, keep their samples apart and are not told of."""
    from placement.torch import SampleMixingWarning

    torch.manual_seed(0)
    model, x = InPlaceState().train(), torch.randn(4, 8)
    given, state = x.clone(), {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(7)
    with pytest.warns(SampleMixingWarning):
        plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3))
    assert torch.equal(x, given) and model.training
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with warnings.catch_warnings():
        warnings.simplefilter("error", SampleMixingWarning)
        plan_pipeline(Noisy(), (torch.randn(4, 8),), devices="epyc-7763:2", stages=2, microbatches=2)
        plan_pipeline(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 2)), (torch.randn(4, 8),),
                      devices="epyc-7763:2", stages=2, microbatches=2)


class PaddedEncoder(nn.Module):
    """An nn.TransformerEncoder given a padding mask: in evaluation without gradients it takes its nested-tensor
    path, of which torch warns."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
        self.out = nn.Linear(8, 2)

    def forward(self, x, padding):
        return self.out(self.encoder(x, src_key_padding_mask=padding)[:, 0])


def test_the_mixing_check_passes_on_no_warning_of_its_own_runs():
    """The check runs the model in evaluation without gradients, a mode the caller did not ask for: a training
    plan of an encoder given a padding mask passed on torch's warning of the nested tensors of that mode."""
    torch.manual_seed(0)
    padding = torch.zeros(4, 5, dtype=torch.bool)
    padding[:, 3:] = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pp = plan_pipeline(PaddedEncoder(), (torch.randn(4, 5, 8), padding), devices="epyc-7763:2", stages=2,
                           microbatches=2)
    assert pp.num_stages == 2
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


class WithPosition(nn.Module):
    """Returns, beside its output, a learned position expanded over the batch: a view of its parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.pos = nn.Linear(8, 8), nn.Linear(8, 8), nn.Parameter(torch.randn(8))

    def forward(self, x):
        return self.b(torch.relu(self.a(x))), self.pos.expand(x.shape[0], 8)


@pytest.mark.parametrize("training", [False, True])
def test_an_output_viewing_a_parameter_is_planned_with_micro_batches(training):
    # the mixing check compared the view after putting the parameter back in place, and torch raised
    # "A view was created in no_grad mode and its base ... has been modified inplace"
    from placement.torch import SampleMixingWarning

    torch.manual_seed(0)
    model, x = WithPosition(), torch.randn(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SampleMixingWarning)
        pp = plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, microbatches=4, training=training,
                           schedule="gpipe")
    assert pp.num_stages == 2
    (out, pos), _ = chained(pp, (x,))   # the example inputs are one micro-batch
    want = model(x)
    assert torch.allclose(out, want[0]) and torch.equal(pos, want[1])


class Similarity(nn.Module):
    """Two towers and the similarities of every image to every text of the batch, [batch, batch]."""

    def __init__(self) -> None:
        super().__init__()
        self.img, self.txt = nn.Linear(12, 16), nn.Linear(10, 16)

    def forward(self, image, text):
        return F.normalize(self.img(image), dim=-1) @ F.normalize(self.txt(text), dim=-1).t()


def test_an_output_pairing_the_samples_of_a_batch_is_told_of():
    """Similarities [2, 2] of a micro-batch of 2: step() of 4 micro-batches returned [8, 2], the pairs within
    each micro-batch, where the model returns [8, 8] for the batch, without a word (its first dimension is the
    micro-batch's). The export with a symbolic batch shows the second dimension growing with it; an output
    whose later dimension only equals the micro-batch's size (a sequence of 2) is not told of."""
    from placement.torch import OutputBatchWarning

    x, y = torch.randn(8, 12), torch.randn(8, 10)
    assert tuple(Similarity()(x, y).shape) == (8, 8)
    with pytest.warns(OutputBatchWarning) as caught:
        plan_pipeline(Similarity(), (x[:2], y[:2]), devices="h100:2", stages=2, training=False, microbatches=4)
    assert [str(w.message) for w in caught if w.category is OutputBatchWarning] == [
        "the model returns an output of shape [2, 2], whose later dimensions grow with the micro-batch (2) too (it "
        "pairs the samples): the pipeline runtime concatenates each output over the micro-batches along its first "
        "dimension, so step() returns each micro-batch's pairs alone, otherwise than the model does for the whole "
        "batch (losses and gradients are those of each micro-batch's pairs: loss_fn sees them); compute what pairs "
        "samples of different micro-batches outside the pipeline"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutputBatchWarning)
        plan_pipeline(nn.Linear(8, 8), (torch.randn(2, 2, 8),), devices="h100:2", stages=1, training=False,
                      microbatches=4)


class WithLoss(WithFinalState):
    def forward(self, x):
        o, _ = self.rnn(self.fc(x))
        return o[:, -1], o.square().mean().unsqueeze(0)


def test_a_micro_batch_unlike_the_planned_one_is_refused_by_stage_0():
    """The program is exported for one micro-batch: its shapes and its constant inputs. Torch's
    schedule splits a batch of 7 rows into micro-batches of 2, 2, 2 and 1 rows: the stages ran the
    last one anyway (a wrong row came back), and a temperature of 4 ran as the planned 2. Stage 0
    now refuses both, naming the input."""
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    pp = plan_pipeline(Tempered(), (x,), kwargs={"temperature": 2.0}, devices="h100:2", stages=1, microbatches=1)
    first = pp.stage_module(0)
    assert torch.equal(first(x, temperature=2.0), pp.imported.source.module()(x, temperature=2.0))
    with pytest.raises(placement.InvalidParameterError) as error:
        first(torch.randn(1, 8), temperature=2.0)
    assert str(error.value) == ("args of the pipeline's step() must split into micro-batches like the example inputs "
                                "of plan_pipeline: input 'x' of a micro-batch is [1, 8], planned [2, 8]")
    with pytest.raises(placement.InvalidParameterError) as error:
        first(x, temperature=4.0)
    assert str(error.value) == ("kwargs of the pipeline's step() must hold the values the plan was made with: "
                                "input 'temperature' is 4.0, planned 2.0 (the program is exported for it; plan again "
                                "for another)")
    # a tensor where a number was planned: the check compared them elementwise, and torch refused the bool of that
    with pytest.raises(placement.InvalidParameterError) as error:
        first(x, temperature=torch.full((2, 1), 2.0))
    assert str(error.value) == ("kwargs of the pipeline's step() must hold the values the plan was made with: "
                                "input 'temperature' is a tensor of shape [2, 1], planned 2.0 (the program is exported "
                                "for it; plan again for another)")
    # a tensor of another type: a relayed one aborted the process of the stage that receives the planned type
    with pytest.raises(placement.InvalidParameterError) as error:
        first(x.double(), temperature=2.0)
    assert str(error.value) == ("args of the pipeline's step() must have the data types of the example inputs of "
                                "plan_pipeline: input 'x' is torch.float64, planned torch.float32 (the program is "
                                "exported for it; convert the input, or plan again with it)")
    # nn.Sequential's forward takes `input`, which the exported program renames input_1: named as the model does
    sequential = plan_pipeline(nn.Sequential(nn.Linear(8, 8)), (x,), devices="h100:1", stages=1, microbatches=1)
    with pytest.raises(placement.InvalidParameterError) as error:
        sequential.stage_module(0)(torch.randn(3, 8))
    assert str(error.value).endswith("input 'input' of a micro-batch is [3, 8], planned [2, 8]")


class LateSide(nn.Module):
    """Four linears on ``x`` [64, 256] and, at the end, a linear on a second input ``side`` [64, 64, 256]
    (4 MiB in fp32) summed over its middle axis: ``side`` travels from stage 0 to the last stage."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(nn.Linear(256, 256) for _ in range(4))
        self.side = nn.Linear(256, 256)

    def forward(self, x, side):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x + self.side(side).sum(1)


def test_run_time_transfers_of_relayed_values_are_reported():
    """Over PCIe (64e9 B/s), the 4 MiB of ``side`` take 4,194,304 / 64e9 s = 0.065536 ms each way. In a
    three-stage inference plan of LateSide on H100s, a middle stage receives and sends ``side`` (and the
    [64, 256] activation, 64 KiB, 0.001024 ms each way): 0.13312 ms per micro-batch, where the plan charges
    it the activation alone, 0.002048 ms. Its run-time load is the plan's load less the charged transfer
    plus the run-time one, above the plan's largest load: a RelayWarning says so."""
    x, side = torch.randn(64, 256), torch.randn(64, 64, 256)
    with pytest.warns(RelayWarning) as caught:
        pp = plan_pipeline(LateSide(), (x, side), devices="h100:3", stages=3, training=False)
    assert all("side" in names for names in pp.relayed)
    middle = pp.transfers[1]
    q = pp.instance["about"]["time_quantum_ms"]
    assert abs(middle.runtime - 0.13312) <= 1e-12 and abs(middle.charged - 0.002048) <= 2 * q
    assert middle.runtime_load == pytest.approx(middle.load - middle.charged + 0.13312, abs=1e-15)
    assert pp.result.stats["runtime_loads"] == [t.runtime_load for t in pp.transfers]
    message = str(caught[0].message)
    assert message.startswith("at run time stage 1 spends 0.13312 ms per micro-batch sending and receiving, where "
                              f"the plan charges {middle.charged:.6g} ms: it relays values that later stages read")
    assert message.endswith(f"so its load is {middle.runtime_load:.6g} ms against the plan's largest load of "
                            f"{pp.result.value:.6g} ms; a plan with fewer stages (stages=N) may run faster")
    # the first stage is given ``side`` and sends it on: received nothing, sent 4 MiB + 64 KiB
    assert abs(pp.transfers[0].runtime - 0.065536 - 0.001024) <= 1e-12


def test_a_plan_without_relays_raises_no_relay_warning():
    import warnings

    x = torch.randn(64, 256)
    model = nn.Sequential(*(nn.Linear(256, 256) for _ in range(4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RelayWarning)
        pp = plan_pipeline(model, (x,), devices="h100:2", stages=2, training=False)
    # the stage boundary carries the one activation, which the plan charges on both sides
    assert [abs(t.runtime - t.charged) <= 2 * pp.instance["about"]["time_quantum_ms"] for t in pp.transfers] == \
        [True, True]


def test_shared_gradients_accumulate_over_steps_as_torch_scales_the_others():
    """torch's schedule with scale_grads divides every gradient a stage holds by the micro-batch count
    M at the end of each step, earlier steps' included: two steps leave (g1/M + g2)/M. The shared
    parameters' earlier gradients were set aside for the exchange and came back undivided, g1/M + g2/M:
    one model, two scalings (0.625 apart at M = 4). A stand-in schedule that does what torch's does
    (add this step's gradient, then divide all by M), wrapped as a stage holding a shared parameter
    is, must leave the shared and the other parameter equal."""
    from placement.torch.schedules import SumsSharedGradients
    from placement.torch.sharing import GradientExchange

    shared, other = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(3))

    class TorchLike:
        _has_backward, scale_grads, _n_microbatches = True, True, 4

        def step(self):
            for p in (shared, other):
                p.grad = torch.ones(3) if p.grad is None else p.grad + 1
                p.grad.div_(self._n_microbatches)

    schedule = type("Wrapped", (SumsSharedGradients, TorchLike), {})()
    schedule.gradient_exchange = GradientExchange(0, [(shared, (0,))], lambda stage: stage, None)
    for _ in range(2):
        schedule.step()
    # (1/4 + 1)/4 = 0.3125 for both
    assert torch.equal(shared.grad, other.grad) and float(other.grad[0]) == 0.3125


def test_a_step_that_raises_keeps_the_shared_gradients_accumulated_before():
    """Stage 0's step() raises its typed error for a batch unlike the plan's, which a caller may catch and
    go on with another batch. The shared parameters' gradients, set aside for the exchange before torch's
    step ran, were lost with it: a tied embedding's gradient on stage 0 lacked the earlier steps' while
    its other holder kept them. A stand-in schedule whose second step raises before any backward pass."""
    from placement.torch.schedules import SumsSharedGradients
    from placement.torch.sharing import GradientExchange

    shared, other = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(3))

    class TorchLike:
        _has_backward, scale_grads, _n_microbatches = True, False, 4
        fail = False

        def step(self):
            if self.fail:
                raise placement.InvalidParameterError("args", "of the pipeline's step() is unlike the plan's")
            for p in (shared, other):
                p.grad = torch.ones(3) if p.grad is None else p.grad + 1

    schedule = type("Wrapped", (SumsSharedGradients, TorchLike), {})()
    schedule.gradient_exchange = GradientExchange(0, [(shared, (0,))], lambda stage: stage, None)
    schedule.step()
    schedule.fail = True
    with pytest.raises(placement.InvalidParameterError):
        schedule.step()
    assert torch.equal(shared.grad, torch.ones(3)) and torch.equal(other.grad, torch.ones(3))
    schedule.fail = False
    schedule.step()
    assert torch.equal(shared.grad, other.grad) and float(shared.grad[0]) == 2.0


def test_a_model_that_returns_its_own_parameter_is_refused_by_name():
    # each stage holds its own copy of the parameters; the last stage's module failed with KeyError('pos')
    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import layout_from_instance, pipe_split_module
    from placement.io.torch_export import import_torch

    class ReturnsParameter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.pos = nn.Linear(8, 8), nn.Linear(8, 8), nn.Parameter(torch.randn(4, 8))

        def forward(self, x):
            return self.b(self.a(x) + self.pos), self.pos

    model, x = ReturnsParameter(), torch.randn(4, 8)
    with pytest.raises(placement.InvalidParameterError, match="^model returns its parameter or buffer 'pos' itself; "
                                                              "a pipeline returns what its stages compute per "
                                                              "micro-batch: leave it out and read it from the model$"):
        plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2)
    imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 0))
    with pytest.raises(placement.InvalidParameterError, match="^plan cannot be written as .*: the model returns its "
                                                              "parameter or buffer 'pos' itself"):
        pipe_split_module(imported.source, layout_from_instance(imported.instance),
                          placement.solve(imported.problem, stages=2).to_plan())


class TransposedHeads(nn.Module):
    """q as a transposed view of a slice (a split of one projection: strides with gaps), attention
    in another module, then transpose(1, 2).contiguous().view(...): torch.export drops the
    contiguous() (a no-op when traced, where attention gave its result q's layout) and keeps the
    view, which only that layout allows."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)

    def heads(self, x):
        q, k, v = self.qkv(x).split(32, -1)
        return tuple(t.view(2, 8, 2, 16).transpose(1, 2) for t in (q, k, v))

    def forward(self, x):
        q, k, v = self.heads(x)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).contiguous().view(2, 8, 32))


def assert_stages_compute(model, x, stages: int, devices: str = "epyc-7763:4") -> None:
    """The operator-granularity plan of ``model`` on ``stages`` stages of ``devices``, chained, computes its output
    and, each parameter held by one stage, its gradients."""
    pp = plan_pipeline(model, (x,), devices=devices, stages=stages, granularity="operator")
    out, modules = chained(pp, (x,))
    expected = model(x)
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    grads = {k: p.grad.clone() for module in modules for k, p in module.named_parameters()}
    model.zero_grad()
    expected.square().sum().backward()
    assert all(torch.allclose(grads[k], p.grad, rtol=1e-4, atol=1e-6) for k, p in model.named_parameters())


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_a_received_view_is_laid_out_as_traced(stages):
    # a boundary before the attention sent q, k, v contiguous: the view after it raised
    torch.manual_seed(0)
    model, x = TransposedHeads(), torch.randn(2, 8, 32)
    assert_stages_compute(model, x, stages)


class StridedView(nn.Module):
    """``as_strided`` of a transposed slice of an activation, which reads the activation's memory row by row: 4
    elements of each sample's row, from the slice's storage offset (or from ``offset``) on, each repeated 64 times
    (a result larger than the slice, so that a plan that may cut between them sends the slice)."""

    def __init__(self, offset: int | None) -> None:
        super().__init__()
        self.first, self.inner, self.out = nn.Linear(8, 8), nn.Linear(8, 16), nn.Linear(64, 8)
        self.offset = offset

    def forward(self, x):
        z = self.inner(self.first(x).relu())[:, :12].t()
        return self.out(torch.as_strided(z, (x.shape[0], 4, 64), (16, 1, 0), self.offset))


@pytest.mark.parametrize("offset", [None, 8])
def test_as_strided_shares_a_stage_with_the_memory_it_reads(offset):
    # a boundary between the slice and as_strided gave it a dense copy of the slice's values: other elements
    # (largest difference 0.63), or past the copy's end (RuntimeError: setStorage ... out of bounds)
    torch.manual_seed(0)
    model, x = StridedView(offset), torch.randn(2, 8)
    assert_stages_compute(model, x, 4, devices="h100:4")
    pp = plan_pipeline(model, (x,), devices="h100:4", stages=4, granularity="operator")
    assert pp.instance["about"]["storage_views"] == {"linear_1": [2, 3, 4, 5]}
    assert [[n.name for n in stage.nodes] for stage in pp.partition.stages] == [
        ["linear"], ["relu"], ["linear_1", "slice_1", "t", "as_strided"], ["linear_2"]]
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (x,), devices="h100:4,epyc-7763:1", stages=5, granularity="operator")
    assert error.value.parameter == "stages"
    assert str(error.value) == (
        "stages 5: no plan has 5 non-empty stages: the graph has 4 parts that a pipeline can separate (colour classes "
        "and cycles stay on one device); the nodes of an operator that reads a tensor's memory by storage offset and "
        "strides (as_strided) share a stage with those that make that memory and the views of it it reads, which a "
        "later stage receives as a copy of their values alone: linear_1, slice_1, t, as_strided (around the memory "
        "of 'linear_1')")


class InputStrided(nn.Module):
    """``as_strided`` that interleaves each sample's 8 features, applied to the model's input (``how="input"``), to a
    transposed view of it (``"view"``) or to a contiguous copy of it made in forward (``"copy"``), added to a branch
    of linear layers."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.how = how

    def forward(self, x):
        h = self.b(self.a(x).relu()).relu()
        y = {"input": x, "view": x.t(), "copy": x.clone(memory_format=torch.contiguous_format)}[self.how]
        return self.c(h + torch.as_strided(y, (x.shape[0], 4, 2), (8, 1, 4)).flatten(1))


def test_as_strided_of_a_model_input_is_refused_and_of_a_copy_made_in_forward_computes_the_model():
    # the input as a slice of a wider tensor (storage offset 1): a plan that put as_strided on stage 1 gave outputs
    # 1.07 away from the model's, as that stage receives a dense copy of the input; stage 0 receives micro-batches
    # as views of the step's batch, at other offsets
    torch.manual_seed(0)
    x = torch.randn(2, 10)[:, 1:9]
    for how in ("input", "view"):
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(InputStrided(how), (x,), devices="h100:4", stages=2, granularity="operator")
        assert (error.value.parameter, str(error.value)) == ("model", (
            "model applies as_strided to its input 'x' (operator 'as_strided'), which reads the input's memory by "
            "storage offset and strides: the pipeline gives each stage its micro-batches as views of the step's batch "
            "(stage 0) or as dense copies of their values (a later stage), which keep neither, so it would read other "
            "elements than in the model; apply it to a contiguous copy made in forward (x.clone(memory_format="
            "torch.contiguous_format)), or use view operators (view, transpose, unfold, slicing)"))
    for stages in (2, 3, 4):
        assert_stages_compute(InputStrided("copy"), x, stages, devices="h100:4")


class Windows(nn.Module):
    """``as_strided`` straight on a linear layer's output (contiguous, at storage offset 0, owning its memory): each
    sample's 16 features read as 4 windows of 4."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return self.b(torch.as_strided(self.a(x), (x.shape[0], 4, 4), (16, 4, 1)).relu().flatten(1))


def test_as_strided_of_a_value_owning_its_dense_memory_may_begin_a_stage():
    # a later stage receives such a value contiguous, in memory laid out as the model's: a boundary before
    # as_strided computes the model, and the plan of 5 stages, one operator each, was refused for want of parts
    torch.manual_seed(0)
    model, x = Windows(), torch.randn(2, 8)
    pp = plan_pipeline(model, (x,), devices="h100:5", stages=5, granularity="operator")
    assert "storage_views" not in pp.instance["about"]
    assert [[n.name for n in stage.nodes] for stage in pp.partition.stages] == [
        ["linear"], ["as_strided"], ["relu"], ["flatten"], ["linear_1"]]
    assert_stages_compute(model, x, 5, devices="h100:5")


class Rotary(nn.Module):
    """Rotary position embeddings as recent decoder models compute them: under torch.no_grad and an
    autocast that turns itself off, from a buffer and the positions (no value there needs a
    gradient), applied to q and k outside."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8), persistent=False)
        self.q, self.k, self.out = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    @torch.no_grad()
    def angles(self, positions):
        with torch.autocast("cpu", enabled=False):
            freqs = positions[:, None].float() * self.inv_freq[None, :]
            emb = torch.cat((freqs, freqs), -1)
            return emb.cos(), emb.sin()

    def forward(self, x):
        cos, sin = self.angles(torch.arange(x.shape[1]))
        q, k = self.q(x), self.k(x)
        rotate = lambda t: torch.cat((-t[..., 4:], t[..., :4]), -1)  # noqa: E731
        q, k = q * cos + rotate(q) * sin, k * cos + rotate(k) * sin
        return self.out(torch.softmax(q @ k.transpose(-1, -2), -1) @ x)


@pytest.mark.parametrize("stages", [2, 3])
def test_a_no_grad_region_over_values_without_gradients_is_read_through(stages):
    # Llama, Mistral, Qwen2, GPT-NeoX, Phi and Falcon were all refused for their rotary embeddings
    torch.manual_seed(0)
    model, x = Rotary(), torch.randn(2, 6, 8)
    assert_stages_compute(model, x, stages)


class FrozenBackbone(nn.Module):
    """A frozen feature extractor (parameters with requires_grad off) run under torch.no_grad, and a
    trained head on its features: nothing in the region could get a gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8)).requires_grad_(False)
        self.head = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        with torch.no_grad():
            features = self.backbone(x)
        return self.head(features)


@pytest.mark.parametrize("stages", [2, 3])
def test_a_no_grad_region_over_a_frozen_backbone_is_read_through(stages):
    # the region was refused: every parameter was taken as trained, whatever its requires_grad
    torch.manual_seed(0)
    model, x = FrozenBackbone(), torch.randn(2, 8)
    pp = plan_pipeline(model, (x,), devices="epyc-7763:4", stages=stages, granularity="operator")
    out, modules = chained(pp, (x,))
    expected = model(x)
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    held = {k: p for module in modules for k, p in module.named_parameters()}
    assert all(p.grad is None for k, p in held.items() if k.startswith("backbone."))
    model.zero_grad()
    expected.square().sum().backward()
    assert all(torch.allclose(held[k].grad, p.grad, rtol=1e-4, atol=1e-6) for k, p in model.head.named_parameters(
        prefix="head"))


class DetachedAverage(nn.Module):
    """A running average of detached features, updated in a torch.no_grad region (an EMA statistic, a
    codebook update), and subtracted from the features: nothing in the region could get a gradient. The
    features are detached before the region or, ``inside``, in it."""

    def __init__(self, inside: bool = False) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 3)
        self.register_buffer("ema", torch.zeros(16))
        self.inside = inside

    def forward(self, x):
        h = torch.relu(self.a(x))
        d = h if self.inside else h.detach()
        with torch.no_grad():
            self.ema.mul_(0.9).add_(0.1 * (d.detach() if self.inside else d).mean(0))
        return self.b(h - self.ema)


@pytest.mark.parametrize("stages, inside", [(2, False), (3, False), (2, True), (3, True)])
def test_a_no_grad_region_over_detached_values_is_read_through(stages, inside):
    # the region was refused: a detach's result was taken as one that may need a gradient, and so was
    # the region reading the features to detach them first (as the refusal advised)
    torch.manual_seed(0)
    model, x = DetachedAverage(inside), torch.randn(2, 8)
    reference = DetachedAverage(inside)
    reference.load_state_dict(model.state_dict())
    pp = plan_pipeline(model, (x,), devices="epyc-7763:4", stages=stages, granularity="operator")
    out, modules = chained(pp, (x,))
    expected = reference(x)
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    held = {k: v for module in modules for k, v in module.named_buffers()}
    assert torch.allclose(held["ema"], reference.ema) and reference.ema.abs().sum() > 0
    out.square().sum().backward()
    expected.square().sum().backward()
    params = {k: p for module in modules for k, p in module.named_parameters()}
    assert all(torch.allclose(params[k].grad, p.grad, rtol=1e-4, atol=1e-6) for k, p in reference.named_parameters())


class TiedOutput(nn.Module):
    """An embedding whose weight is also the output projection's (1000 × 256 fp32: 1,024,000 bytes)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 256)
        self.mid = nn.Linear(256, 256)
        self.out = nn.Linear(256, 1000, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x):
        return self.out(torch.relu(self.mid(self.emb(x))))


class SharedBlock(nn.Module):
    """One bias-free square layer applied ``n`` times (ALBERT's cross-layer sharing)."""

    def __init__(self, width: int, n: int):
        super().__init__()
        self.block = nn.Linear(width, width, bias=False)
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = torch.tanh(self.block(x))
        return x


def test_a_stage_charged_a_parameter_once_per_reading_node_is_told_so(recwarn):
    from placement.torch import RepeatedReadWarning

    torch.manual_seed(0)
    tokens = torch.randint(0, 1000, (4, 8))
    # One stage holds both readers of the tied weight: charged twice for the weight and twice for its
    # gradient, it holds one of each, so 2 · 1,024,000 bytes = 1.95 MiB are counted beyond what it holds.
    plan_pipeline(TiedOutput(), (tokens,), devices="h100:2", stages=1, training=True)
    [warning] = [w for w in recwarn if w.category is RepeatedReadWarning]
    assert str(warning.message) == (
        "the placement model counts a parameter once per node that reads it, so the memory charged exceeds what a "
        "stage holds (one copy): stage 0 by 1.95 MiB (parameter 'emb.weight' is read by 2 of its nodes). The plan fits; a plan "
        "that would fit with one copy per stage may have been refused")
    recwarn.clear()
    # On two stages each holds one reader (and its copy of the weight): nothing counted twice.
    pp = plan_pipeline(TiedOutput(), (tokens,), devices="h100:2", stages=2, training=True)
    assert not [w for w in recwarn if w.category is RepeatedReadWarning]
    assert list(pp.shared_parameters) == ["emb.weight"]


def test_a_refusal_names_the_parameter_counted_once_per_reading_node():
    # A 4 GiB layer (32768² fp32) applied 12 times is charged 48 GiB on one stage, more than a V100's
    # 32 GiB, though the stage would hold one copy.
    with torch.device("meta"):
        model, x = SharedBlock(32768, 12), torch.randn(8, 32768)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (x,), devices="v100:1", stages=1, training=False)
    assert str(error.value).endswith(
        "; the placement model counts a parameter once per node that reads it (parameter 'block.weight', 4 GiB, is "
        "read by 12 nodes), more than the one copy a stage holds, so a plan may fit that this refuses")
    assert "cannot hold the model in 1 stage: no plan fits" in str(error.value)


class TableAndLayer(nn.Module):
    """A buffer (a fixed n x n table) read by two nodes, and a layer applied once or twice between them."""

    def __init__(self, n: int, twice: bool):
        super().__init__()
        self.layer = nn.Linear(n, n, bias=False)
        self.register_buffer("table", torch.randn(n, n))
        self.twice = twice

    def forward(self, x):
        h = self.layer(x @ self.table)
        h = torch.relu(h) @ self.table
        return self.layer(h) if self.twice else h


@pytest.mark.parametrize("twice, told", [
    (False, "a buffer once per node that reads it, so the memory charged exceeds what a stage holds (one copy): "
            "stage 0 by 256 KiB (buffer 'table' is read by 2 of its nodes)"),
    (True, "a parameter or buffer once per node that reads it, so the memory charged exceeds what a stage holds (one "
           "copy): stage 0 by 512 KiB (parameter 'layer.weight' is read by 2 of its nodes, and 1 more buffer)")])
def test_a_buffer_charged_once_per_reading_node_is_called_a_buffer(recwarn, twice, told):
    # the warning called every tensor it counted a parameter, the buffers the placement model charges too
    from placement.torch import RepeatedReadWarning

    plan_pipeline(TableAndLayer(256, twice), (torch.randn(8, 256),), devices="h100:1", training=False)
    [warning] = [w for w in recwarn if w.category is RepeatedReadWarning]
    assert str(warning.message) == (f"the placement model counts {told}. The plan fits; a plan that would fit with "
                                    "one copy per stage may have been refused")


def test_a_refusal_names_the_kind_of_each_tensor_counted_once_per_reading_node():
    # A 9 GiB table (49152² fp32) and a 9 GiB layer, each read by two nodes: 36 GiB charged on one stage,
    # more than a V100's 32 GiB, though the stage would hold 18 GiB.
    with torch.device("meta"):
        model, x = TableAndLayer(49152, True), torch.randn(8, 49152)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (x,), devices="v100:1", stages=1, training=False)
    assert str(error.value).endswith(
        "; the placement model counts a parameter or buffer once per node that reads it (parameter 'layer.weight', "
        "9 GiB, is read by 2 nodes; 1 more buffer is read by several), more than the one copy a stage holds, so a "
        "plan may fit that this refuses")


def test_the_repeated_read_note_counts_each_kind_of_tensor_apart():
    """Parameters, buffers and tensor attributes the model did not register (constants of the exported
    program), by what ``torch.export`` made of each, under the name of a tied tensor's first name."""
    from placement.torch.repeated_reads import repeated_note, state_kinds

    class Held(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w, self.v = nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(3))
            self.register_buffer("b", torch.ones(3))
            self.t = torch.ones(3)
            self.tied = self.w

        def forward(self, x):
            return x * self.w * self.v + self.b + self.t + self.tied

    program = torch.export.export(Held(), (torch.randn(2, 3),))
    kinds = state_kinds(program, {"tied": "w"})
    assert kinds == {"w": "parameter", "v": "parameter", "b": "buffer", "t": "constant tensor"}
    charges = [(0, "w", 2, 400.0), (0, "v", 2, 100.0), (0, "x", 2, 100.0), (0, "b", 3, 100.0), (0, "t", 2, 100.0),
               (1, "v", 3, 2.0 ** 20), (1, "w", 2, 2.0 ** 20)]
    assert repeated_note(charges, [1000.0, 2.0 ** 30], kinds) == (
        "the placement model counts a parameter, buffer, constant tensor or tensor once per node that reads it, so "
        "the memory charged exceeds what a stage holds (one copy): stage 0 by 800 bytes (parameter 'w' is read by 2 "
        "of its nodes, and 1 more parameter, 1 buffer, 1 constant tensor and 1 tensor). The plan fits; a plan that "
        "would fit with one copy per stage may have been refused")
    assert repeated_note(charges[-2:], [1.0, 100 * 2.0 ** 20], kinds) == (
        "the placement model counts a parameter once per node that reads it, so the memory charged exceeds what a "
        "stage holds (one copy): stage 1 by 2 MiB (parameter 'v' is read by 3 of its nodes, and 1 more parameter). "
        "The plan fits; a plan that would fit with one copy per stage may have been refused")


def test_stage_zero_called_with_other_inputs_than_planned_gives_the_typed_error():
    x = torch.randn(4, 8)
    model = Tempered()
    pp = plan_pipeline(model, (x,), {"temperature": 2.0}, devices="h100:1")
    stage = pp.stage_module(0)
    torch.testing.assert_close(stage(x, temperature=2.0), model(x, temperature=2.0))   # the one stage: the model
    expected = ("{} of stage 0 must be the inputs the plan was made with, 1 positional input and the keyword "
                "input 'temperature'; got {} (the program is exported for those inputs; plan again with the inputs "
                "the pipeline will be given)")
    for args, kwargs, parameter, got in [((x,), {}, "kwargs", "no 'temperature'"),   # Python's TypeError came through
                                         ((x,), {"temperature": 2.0, "bias": x}, "kwargs", "the keyword 'bias'"),
                                         ((x, x), {"temperature": 2.0}, "args", "2 positional")]:
        with pytest.raises(placement.InvalidParameterError) as error:
            stage(*args, **kwargs)
        assert (error.value.parameter, str(error.value)) == (parameter, expected.format(parameter, got))


class Residual(nn.Module):
    """A linear whose output is read by the layer after it and by the residual add after that: two values cross a
    boundary placed after it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 2)

    def forward(self, x):
        h = self.a(x)
        return self.c(torch.relu(self.b(h)) + h)


def test_a_later_stage_given_the_tuple_of_outputs_as_one_argument_gives_the_typed_error():
    """Stage 0 returns a tuple; a stage given it as one argument, not unpacked, failed with "AttributeError: 'tuple'
    object has no attribute 'view_as'" from inside its program. It names the tensors it takes, in order."""
    x = torch.randn(4, 8)
    pp = plan_pipeline(mlp(), (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    first, second = pp.stage_module(0), pp.stage_module(1)
    sent = first(x)
    assert isinstance(sent, tuple) and len(sent) == 1
    for given, kind in ((sent, "tuple"), (list(sent), "list"), (None, "NoneType")):
        with pytest.raises(placement.InvalidParameterError) as error:
            second(given)
        assert (error.value.parameter, str(error.value)) == ("args", (
            "args of stage 1 must be the 1 tensor that stage 0 returns ('linear_1'), each an argument of its own; "
            f"got a {kind} for 'linear_1' (unpack the tuple of stage 0's outputs: module(*outputs))"))
    torch.testing.assert_close(second(*sent), mlp()(x))
    pp = plan_pipeline(Residual(), (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    sent = pp.stage_module(0)(x)
    with pytest.raises(placement.InvalidParameterError) as error:
        pp.stage_module(1)(list(sent), sent[1])
    assert str(error.value) == (
        "args of stage 1 must be the 2 tensors that stage 0 returns, in its order ('linear', 'linear_1'), each an "
        "argument of its own; got a list for 'linear' (unpack the tuple of stage 0's outputs: module(*outputs))")
    torch.testing.assert_close(pp.stage_module(1)(*sent), Residual()(x))


def test_a_later_stage_given_the_wrong_number_of_tensors_gives_the_typed_error():
    """Stage 1 of Residual takes the 2 tensors stage 0 returns; a call with 1 or 3, or with a keyword the stage does
    not take, failed with Python's TypeError about the generated forward's arguments. The tensors may be given by
    their names after the positional ones, as Python allows."""
    x = torch.randn(4, 8)
    pp = plan_pipeline(Residual(), (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    second = pp.stage_module(1)
    first, last = pp.stage_module(0)(x)
    expected = ("{} of stage 1 must be the 2 tensors that stage 0 returns, in its order ('linear', 'linear_1'), "
                "each an argument of its own; got {}")
    for args, kwargs, parameter, got in [((first,), {}, "args", "1 argument"),
                                         ((first, last, last), {}, "args", "3 arguments"),
                                         ((first,), {"bias": last}, "kwargs", "the keyword 'bias'"),
                                         ((first, last), {"linear": last}, "kwargs", "the keyword 'linear'"),
                                         ((), {"linear": first}, "args", "no 'linear_1'")]:
        with pytest.raises(placement.InvalidParameterError) as error:
            second(*args, **kwargs)
        assert (error.value.parameter, str(error.value)) == (parameter, expected.format(parameter, got))
    with pytest.raises(placement.InvalidParameterError) as error:   # a tuple and a tensor: the tuple is named
        second((first, last), last, last)
    assert str(error.value).endswith("got a tuple for 'linear' (unpack the tuple of stage 0's outputs: "
                                     "module(*outputs))")
    torch.testing.assert_close(second(first, linear_1=last), Residual()(x))
    torch.testing.assert_close(second(linear=first, linear_1=last), Residual()(x))


def test_build_stage_needs_a_group_of_one_rank_per_stage(tmp_path, monkeypatch):
    """Torch's PipelineStage refuses a group larger than the number of stages with a RuntimeError of its
    own: a 2-stage plan run by 3 processes on the default group failed there. One process, its group's
    size as torch would report it for a smaller and a larger world."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        pp = plan_pipeline(mlp(), (torch.randn(4, 8),), stages=2, microbatches=2)
        with pytest.raises(placement.InvalidParameterError) as error:
            pp.build_stage(0, "cpu")
        assert str(error.value) == "group has 1 rank; the plan has 2 stages, one per rank"
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 3)
        # the world is only said to be larger: no rank to compare plans with (they agree)
        monkeypatch.setattr("placement.torch.planning.first_disagreement", lambda settings, device, group: None)
        with pytest.raises(placement.InvalidParameterError) as error:
            pp.build_stage(0, "cpu")
        assert (error.value.parameter, str(error.value)) == (
            "group", "group has 3 ranks; the plan has 2 stages, one per rank: make a group of the first 2 ranks with "
                     "torch.distributed.new_group on every process and pass it as group")
    finally:
        torch.distributed.destroy_process_group()


def tempered_gpipe():
    """A batch of 8 rows and its targets, and Tempered planned for micro-batches of 2 rows (4 per step, gpipe)
    with the temperature 2 on one accelerator."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 8), torch.zeros(8, 8)
    pp = plan_pipeline(Tempered(), (x[:2],), {"temperature": 2.0}, devices="h100:1", microbatches=4, schedule="gpipe")
    return x, y, pp


def test_the_schedule_s_step_raises_stage_zero_s_typed_error(tmp_path):
    """Torch's runtime wraps what a stage's forward raises in a RuntimeError of its own ("[Stage 0] failed
    to run forward"), so ``except placement.InvalidParameterError`` around ``step()`` caught nothing. One
    process, one stage: 7 rows cut into 4 micro-batches give one of 1 row, and the temperature is not
    the planned one."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        x, y, pp = tempered_gpipe()
        schedule = pp.schedule(pp.build_stage(0, torch.device("cpu")), lambda out, target: ((out - target) ** 2).sum())
        losses: list = []
        schedule.step(x, temperature=2.0, target=y, losses=losses)
        assert len(losses) == 4
        for rows, temperature, parameter, message in (
                (7, 2.0, "args", "must split into micro-batches like the example inputs of plan_pipeline: input 'x' "
                                 "of a micro-batch is [1, 8], planned [2, 8]"),
                (8, 3.0, "kwargs", "must hold the values the plan was made with: input 'temperature' is 3.0, planned "
                                   "2.0 (the program is exported for it; plan again for another)")):
            with pytest.raises(placement.InvalidParameterError) as error:
                schedule.step(x[:rows], temperature=temperature, target=y[:rows], losses=[])
            assert (error.value.parameter, str(error.value)) == (parameter,
                                                                 f"{parameter} of the pipeline's step() {message}")
    finally:
        torch.distributed.destroy_process_group()


def test_a_step_s_inputs_that_torch_cannot_split_are_refused_by_name(tmp_path):
    """A 0-dimensional tensor given to step() (a temperature planned as a number, a scalar batch) failed inside
    torch's splitting into micro-batches with an IndexError ('Dimension specified as 0 but tensor has no
    dimensions'), and a tensor input of fewer rows than the batch left the batch uncut, refused as the wrong
    input (the batch was named, at its full size). Both are refused by name, before anything runs."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        x, y, pp = tempered_gpipe()
        schedule = pp.schedule(pp.build_stage(0, torch.device("cpu")), lambda out, target: ((out - target) ** 2).sum())
        scalar = ("the 0-dimensional tensor {}, which torch's runtime cannot split into micro-batches (it splits every "
                  "tensor input along its first dimension): give the inputs the plan was made with, a batch of "
                  "micro-batches like them")
        for args, kwargs, parameter, message in (
                ((x,), {"temperature": torch.tensor(2.0)}, "kwargs", scalar.format("kwargs['temperature']")),
                ((torch.tensor(1.0),), {"temperature": 2.0}, "args", scalar.format("args[0]"))):
            with pytest.raises(placement.InvalidParameterError) as error:
                schedule.step(*args, **kwargs, target=y, losses=[])
            assert error.value.parameter == parameter
            assert str(error.value) == f"{parameter} of the pipeline's step() holds {message}"
        torch.manual_seed(0)
        bias = torch.randn(8, 8)
        pp = plan_pipeline(Biased(), (x[:2],), {"extra": {"bias": bias[:2]}}, devices="h100:1", microbatches=4,
                           schedule="gpipe")
        schedule = pp.schedule(pp.build_stage(0, torch.device("cpu")), lambda out, target: ((out - target) ** 2).sum())
        with pytest.raises(placement.InvalidParameterError) as error:
            schedule.step(x, extra={"bias": bias[:1]}, target=y, losses=[])
        assert (error.value.parameter, str(error.value)) == (
            "kwargs", "kwargs of the pipeline's step() holds kwargs['extra']['bias'] of first dimension 1, but "
                      "args[0]'s is 8: torch's runtime splits every tensor input into micro-batches along its first "
                      "dimension, so each must hold the step's batch (4 micro-batches like the example inputs the "
                      "plan was made with)")
        losses: list = []
        schedule.step(x, extra={"bias": bias}, target=y, losses=losses)
        assert len(losses) == 4
    finally:
        torch.distributed.destroy_process_group()


def test_a_loss_fn_that_cannot_be_called_is_refused_by_schedule(tmp_path):
    # torch took it and raised "TypeError: 'str' object is not callable" inside the first step
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        x, y, pp = tempered_gpipe()
        with pytest.raises(placement.InvalidParameterError) as error:
            pp.schedule(pp.build_stage(0, "cpu"), "mse")
        assert (error.value.parameter, str(error.value)) == (
            "loss_fn", "loss_fn must be a callable (output, target) -> loss, or None for a forward-only schedule, "
                       "not str")
    finally:
        torch.distributed.destroy_process_group()


def test_a_refused_step_runs_no_micro_batch(tmp_path):
    """A batch whose last micro-batch alone is short (7 rows into 4 micro-batches of 2: 2, 2, 2, 1) was
    refused by stage 0's forward of that micro-batch, after the others had run and been sent: the later
    stages waited for it, and the caller's next step completed their step. Every micro-batch is checked
    before the first runs: the stage's forward never starts. One process, one stage."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        x, y, pp = tempered_gpipe()
        stage = pp.build_stage(0, torch.device("cpu"))
        schedule = pp.schedule(stage, lambda out, target: ((out - target) ** 2).sum())
        calls = []
        stage.submod.register_forward_pre_hook(lambda module, args: calls.append(len(args)))
        for rows, kwargs in ((7, {"temperature": 2.0}), (8, {"temperature": 2.0, "bias": x})):
            with pytest.raises(placement.InvalidParameterError):
                schedule.step(x[:rows], target=y[:rows], losses=[], **kwargs)
        assert calls == []
        losses: list = []
        schedule.step(x, temperature=2.0, target=y, losses=losses)
        assert len(calls) == 4 and len(losses) == 4
    finally:
        torch.distributed.destroy_process_group()


TARGET_MISSING = ("target of the pipeline's step() must be given on the last stage (stage 0) in training: loss_fn "
                  "computes each micro-batch's loss from its output and that micro-batch's rows of target")
TARGET_UNREAD = ("target of the pipeline's step() is read on the last stage (stage 0) by loss_fn only, and this "
                 "schedule has none: it runs the forward alone, with no loss and no gradient; give loss_fn to train, "
                 "or no target")


def test_the_last_stage_s_step_needs_a_target_with_a_loss_and_none_without(tmp_path):
    """With a loss_fn, the last stage's step() without target failed in torch's own code (a TypeError at the
    first micro-batch's loss, after its forward ran); without one, a target was ignored, the step computing
    no loss and no gradient. Both are refused before any micro-batch runs, by step() and by eval(), which
    calls it. One process, one stage (the first is the last)."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        x, y, pp = tempered_gpipe()
        stage = pp.build_stage(0, torch.device("cpu"))
        calls = []
        stage.submod.register_forward_pre_hook(lambda module, args: calls.append(len(args)))
        training = pp.schedule(stage, lambda out, target: ((out - target) ** 2).sum())
        inference = pp.schedule(stage, None)
        for run, kwargs, message in ((training.step, {}, TARGET_MISSING), (training.eval, {}, TARGET_MISSING),
                                     (training.step, {"target": None}, TARGET_MISSING),
                                     (inference.step, {"target": y}, TARGET_UNREAD),
                                     (inference.eval, {"target": y}, TARGET_UNREAD)):
            with pytest.raises(placement.InvalidParameterError) as error:
                run(x, temperature=2.0, losses=[], **kwargs)
            assert (error.value.parameter, str(error.value)) == ("target", message)
        assert calls == []
        losses: list = []
        training.step(x, temperature=2.0, target=y, losses=losses)
        assert (len(calls), len(losses)) == (4, 4)
        out = inference.step(x, temperature=2.0)
        assert len(calls) == 8 and torch.allclose(out[:2], pp.stage_module(0)(x[:2], temperature=2.0))
    finally:
        torch.distributed.destroy_process_group()


def readme_block_prints(marker: str, capsys) -> list[str]:
    """The lines the README's one Python block that holds ``marker`` prints, run as written."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if marker in b]
    capsys.readouterr()
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    return capsys.readouterr().out.splitlines()


def test_the_readme_example_of_the_planner_s_warnings_runs_as_written(capsys):
    # The README's block on over-counted parameters and unsplittable inputs: a 256 x 256 fp32 layer
    # (262,144 bytes = 256 KiB) applied twice on the one stage is counted once more than it is held.
    assert readme_block_prints("RepeatedReadWarning", capsys) == [
        "optimal",
        "the placement model counts a parameter once per node that reads it, so the memory charged exceeds what a "
        "stage holds (one copy): stage 0 by 256 KiB (parameter 'layer.weight' is read by 2 of its nodes). The plan fits; a "
        "plan that would fit with one copy per stage may have been refused",
        "kwargs holds the 0-dimensional tensor kwargs['scale'], which the pipeline runtime cannot split into "
        "micro-batches (it splits every tensor input along its first dimension): give it a first dimension of the "
        "micro-batch's size, or make it a buffer of the model"]


def test_the_readme_example_of_the_planner_s_guards_runs_as_written(capsys):
    # The README's block on autocast and the two warnings: a GRU built sequence-first given [batch 4, time 10,
    # 16], with dropout, planned for inference in training mode; then planned inside autocast
    assert readme_block_prints("SequenceFirstWarning", capsys) == [
        "TrainingModeWarning SequenceFirstWarning",
        "model Tagger cannot be exported inside torch.autocast (bfloat16 on cpu): plan it outside, with the model "
        "and its inputs in the precision it is to run in (model.to(torch.bfloat16))"]


def test_the_readme_example_of_an_output_interleaving_the_samples_runs_as_written(capsys):
    # The README's block on OutputBatchWarning: a GRU's [10, 4, 2] output per micro-batch of 4, flattened
    # time-major to [40, 2]; concatenated over 2 micro-batches it is not the [80, 2] of the whole batch
    assert readme_block_prints("TimeMajor", capsys) == [
        "the model returns an output of shape [40, 2], whose first dimension is not the micro-batch's (4)"]


def test_the_readme_example_of_a_model_mixing_its_samples_runs_as_written(capsys):
    # The README's block on SampleMixingWarning: features centred on the batch's mean, [4, 2] per micro-batch;
    # for two micro-batches at once each is centred on the mean of 8 samples, not of its own 4
    assert readme_block_prints("class Centred", capsys) == [
        "the model's output for a sample depends on the other samples of its batch"]


def test_autocast_is_refused_when_planning_and_when_a_stage_runs():
    """Inside torch.autocast the export mixed bfloat16 with the parameters' float32, and the refusal blamed the
    inputs; a stage run inside one computed in bfloat16 and sent it to a stage that received float32 (torch's
    static mode), which read memory never filled: losses of inf, exit status 0. Both are refused by name."""
    from placement.errors import InvalidParameterError

    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(InvalidParameterError) as planning:
        plan_pipeline(mlp(), (x,), devices="h100:2", stages=2)
    assert str(planning.value) == ("model Sequential cannot be exported inside torch.autocast (bfloat16 on cpu): "
                                   "plan it outside, with the model and its inputs in the precision it is to run in "
                                   "(model.to(torch.bfloat16))")
    pp = plan_pipeline(mlp(), (x,), devices="h100:2", stages=2)
    first, second = pp.stage_module(0), pp.stage_module(1)
    sent = first(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for s, module, values in ((0, first, (x,)), (1, second, sent)):
            with pytest.raises(InvalidParameterError) as running:
                module(*values)
            assert str(running.value) == (
                f"step of the pipeline cannot run inside torch.autocast (bfloat16 on cpu): stage {s} runs the "
                "program exported for the planned types, which the stages send and receive; run it outside, or plan "
                "the model in the precision it is to run in (model.to(torch.bfloat16))")
    assert torch.allclose(second(*sent), mlp()(x))   # outside autocast the stages run as planned


def test_an_inference_plan_of_a_model_in_training_mode_is_warned_of():
    """training=False on a model left in training mode planned (and ran) inference with dropout drawing at
    random and BatchNorm updating its statistics, without a word; evaluation mode, a training plan, or a
    model whose modules do not differ in evaluation (dropout of 0) draw no warning."""
    import warnings

    from placement.torch import TrainingModeWarning

    def model(p=0.1):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 8), nn.Dropout(p), nn.BatchNorm1d(8), nn.Linear(8, 2))

    x = torch.randn(4, 8)
    with pytest.warns(TrainingModeWarning) as caught:
        plan_pipeline(model(), (x,), devices="h100:2", stages=2, training=False, microbatches=2)
    assert [str(w.message) for w in caught if w.category is TrainingModeWarning] == [
        "the model is planned for inference (training=False), but its forward runs dropout in '1' (Dropout); batch "
        "statistics in '2' (BatchNorm1d) as in training, and so do the stages (random dropout, batch statistics "
        "updated); call model.eval() before planning to run evaluation (a functional dropout follows it given "
        "training=self.training)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingModeWarning)
        plan_pipeline(model().eval(), (x,), devices="h100:2", stages=2, training=False, microbatches=2)
        plan_pipeline(model(), (x,), devices="h100:2", stages=2, microbatches=2)
        plan_pipeline(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.0), nn.Linear(8, 2)), (x,), devices="h100:2",
                      stages=2, training=False, microbatches=2)


class FunctionalDropout(nn.Module):
    """Dropout with no nn.Dropout module: a functional call that follows the module's mode, and attention's
    own dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.att = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)

    def forward(self, x):
        h = F.dropout(self.a(x), 0.5, self.training)[:, None]
        return self.b(self.att(h, h, h)[0][:, 0])


def test_dropout_without_a_dropout_module_and_a_submodule_in_training_mode_are_warned_of():
    """What makes an inference plan draw at random is read from the exported graph: F.dropout given the
    module's mode and MultiheadAttention's dropout (no nn.Dropout among the modules), and an nn.Dropout left
    in training mode inside a model put in evaluation mode, each planned random stages without a warning
    (the modules' types and the model's own mode were looked at)."""
    import warnings

    from placement.torch import TrainingModeWarning

    x = torch.randn(4, 8)
    with pytest.warns(TrainingModeWarning) as caught:
        plan_pipeline(FunctionalDropout(), (x,), devices="h100:2", stages=2, training=False, microbatches=2)
    assert [str(w.message).split(" as in training")[0] for w in caught if w.category is TrainingModeWarning] == [
        "the model is planned for inference (training=False), but its forward runs dropout in the model's own "
        "forward, 'att' (MultiheadAttention)"]
    mixed = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8)).eval()
    mixed[1].train()
    with pytest.warns(TrainingModeWarning) as caught:
        plan_pipeline(mixed, (x,), devices="h100:2", stages=2, training=False, microbatches=2)
    assert [str(w.message).split(" as in training")[0] for w in caught if w.category is TrainingModeWarning] == [
        "the model is planned for inference (training=False), but its forward runs dropout in '1' (Dropout)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingModeWarning)
        plan_pipeline(FunctionalDropout().eval(), (x,), devices="h100:2", stages=2, training=False, microbatches=2)
        # a recurrent layer's dropout falls between its layers: one layer, or a probability of 0, draws nothing
        for layers, p in ((1, 0.3), (2, 0.0)):
            plan_pipeline(Recurrent(layers, p), (x[:, None],), devices="h100:2", stages=2, training=False,
                          microbatches=2)
    with pytest.warns(TrainingModeWarning, match=r"forward runs dropout in 'rnn' \(GRU\) as in training"):
        plan_pipeline(Recurrent(2, 0.3), (x[:, None],), devices="h100:2", stages=2, training=False, microbatches=2)


class Recurrent(nn.Module):
    """A layer and a GRU of ``layers`` layers and dropout ``p`` between them, returning its outputs."""

    def __init__(self, layers: int, p: float) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        with warnings.catch_warnings():   # torch's: dropout of one layer applies to no layer
            warnings.simplefilter("ignore", UserWarning)
            self.rnn = nn.GRU(8, 8, num_layers=layers, dropout=p, batch_first=True)

    def forward(self, x):
        return self.rnn(self.fc(x))[0]


class SequenceFirstGRU(nn.Module):
    """A GRU built with batch_first=False; with ``transpose``, the model makes its batch-first input
    sequence-first for it (and its output batch-first again)."""

    def __init__(self, transpose: bool = False, batch_first: bool = False) -> None:
        super().__init__()
        self.transpose = transpose
        self.rnn, self.head = nn.GRU(8, 8, batch_first=batch_first), nn.Linear(8, 2)

    def forward(self, x):
        if self.transpose:
            return self.head(self.rnn(x.transpose(0, 1))[0].transpose(0, 1))
        return self.head(self.rnn(x)[0])


def test_a_sequence_first_module_given_the_micro_batch_as_its_sequence_is_warned_of():
    """torch's runtime cuts every input along its first dimension: a batch_first=False GRU given the model's
    input [batch 2, time 5, 8] reads the micro-batch dimension as its sequence, and step() ran each micro-batch
    over a piece of a sequence-first input without a word. A model that transposes for it, a batch-first GRU,
    or one micro-batch a step draws no warning."""
    import warnings

    from placement.torch import SequenceFirstWarning

    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    planned = SequenceFirstGRU()
    with pytest.warns(SequenceFirstWarning) as caught:
        plan_pipeline(planned, (x,), devices="epyc-7763:2", stages=2, microbatches=2, training=False)
    assert [str(w.message) for w in caught if w.category is SequenceFirstWarning] == [
        "nn.GRU 'rnn' takes [sequence, batch, ...] (batch_first=False) and is given [2, 5, 8], whose first dimension "
        "is the micro-batch's (2): torch's pipeline cuts every input along its first dimension into micro-batches, "
        "so an input laid out [sequence, batch, ...] would be cut along its sequence; give the model batch-first "
        "inputs (batch_first=True, or transpose inside forward)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SequenceFirstWarning)
        for model, microbatches in ((SequenceFirstGRU(transpose=True), 2), (SequenceFirstGRU(batch_first=True), 2),
                                    (SequenceFirstGRU(), 1)):
            plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, microbatches=microbatches, training=False,
                          schedule="gpipe")
    # the hooks that watched the model's calls while it was exported are gone
    assert not planned.rnn._forward_pre_hooks


def test_a_sequence_first_warning_says_when_the_sequence_is_as_long_as_the_micro_batch():
    # a model that transposes for its GRU, given sequences of 2 steps in micro-batches of 2: the GRU's
    # [sequence 2, batch 2, 8] looks like an input cut along its sequence, and the warning says it may not be
    from placement.torch import SequenceFirstWarning

    with pytest.warns(SequenceFirstWarning) as caught:
        plan_pipeline(SequenceFirstGRU(transpose=True), (torch.randn(2, 2, 8),), devices="epyc-7763:2", stages=2,
                      microbatches=2, training=False)
    assert [str(w.message) for w in caught if w.category is SequenceFirstWarning] == [
        "nn.GRU 'rnn' takes [sequence, batch, ...] (batch_first=False) and is given [2, 2, 8], whose first dimension "
        "is the micro-batch's (2) (so is its second: where forward makes the inputs sequence-first for it, the "
        "sequence is as long as the micro-batch and this does not apply): torch's pipeline cuts every input along "
        "its first dimension into micro-batches, so an input laid out [sequence, batch, ...] would be cut along its "
        "sequence; give the model batch-first inputs (batch_first=True, or transpose inside forward)"]


class GradientReversal(torch.autograd.Function):
    """The identity forward, the negated gradient backward (domain-adversarial training)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class StraightThrough(torch.autograd.Function):
    """Rounding forward, the gradient passed through unchanged backward."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Adversarial(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f, self.g, self.d = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = self.g(torch.relu(self.f(x)))
        h.register_hook(lambda grad: grad * 10)
        return StraightThrough.apply(self.d(GradientReversal.apply(h)))


class Keyword(nn.Module):
    """Two layers, the gradient reversal of the first's output passed to torch.add by keyword."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.add(x, other=GradientReversal.apply(self.a(x))))


def test_custom_autograd_functions_and_gradient_hooks_of_a_training_plan_are_warned_of():
    """torch.export keeps the operators of a custom autograd.Function's forward, not its backward, and drops
    a tensor's gradient hook: the stages of this model trained with the gradient of view_as (not reversed)
    and of round (zero, not passed through) and without the hook, silently. A training plan names each
    (the Function whose output the model returns too); an inference plan, which takes no gradient, and
    torch's checkpointing draw no warning."""
    import warnings

    from torch.utils.checkpoint import checkpoint

    from placement.torch import CustomGradientWarning

    x = torch.randn(4, 8)
    with pytest.warns(CustomGradientWarning) as caught:
        plan_pipeline(Adversarial(), (x,), devices="h100:2", stages=2, microbatches=2)
    hooked = inspect.getsourcelines(Adversarial.forward)[1] + 2
    assert [str(w.message) for w in caught if w.category is CustomGradientWarning] == [
        f"the stages run none of a gradient hook registered at {__file__}:{hooked}, Function 'GradientReversal' "
        f"(module {__name__}), Function 'StraightThrough' (module {__name__}): torch.export keeps the operators a "
        "custom Function's forward runs, not its backward, and no gradient hook, so the stages' gradients are the "
        "derivatives of those operators, which differ wherever a backward or a hook returns another gradient (a "
        "gradient reversal, a straight-through estimator, a clipping hook); write it as operators whose "
        "derivative is the gradient wanted, or apply it outside the pipeline"]
    # hooks registered before planning, and a Function's output read by keyword
    keyword = Keyword()
    keyword.b.register_full_backward_hook(lambda module, grad_in, grad_out: None)
    keyword.a.weight.register_hook(lambda grad: grad.clamp(-1, 1))
    with pytest.warns(CustomGradientWarning) as caught:
        plan_pipeline(keyword, (x,), devices="h100:2", stages=2, microbatches=2)
    assert [str(w.message).split(":")[0] for w in caught if w.category is CustomGradientWarning] == [
        "the stages run none of a backward hook of module 'b', a gradient hook of 'a.weight' (the stages hold "
        f"copies of it), Function 'GradientReversal' (module {__name__})"]

    class Checkpointed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x):
            return self.b(checkpoint(self.a, x, use_reentrant=False))

    with warnings.catch_warnings():
        warnings.simplefilter("error", CustomGradientWarning)
        plan_pipeline(Adversarial(), (x,), devices="h100:2", stages=2, microbatches=2, training=False)
        plan_pipeline(Checkpointed(), (x,), devices="h100:2", stages=2, microbatches=2)


def test_the_custom_gradient_watch_runs_in_the_models_forward_alone():
    """The torch function mode that finds custom Functions and gradient hooks is on torch's mode stack only
    while the model's forward runs (its hooks included), not around the export's own work, nor after a
    forward that raised; what it finds is the same."""
    from placement.torch.planning import custom_gradients

    seen = []

    class Probe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)

        def forward(self, x):
            seen.append(torch._C._len_torch_function_stack())
            if x.shape[0] == 3:
                raise ValueError("three")
            return GradientReversal.apply(self.a(x))

    probe = Probe()
    probe.register_forward_pre_hook(lambda module, args: seen.append(torch._C._len_torch_function_stack()))
    with custom_gradients(probe) as found:
        outside = torch._C._len_torch_function_stack()
        probe(torch.randn(4, 8))
        with pytest.raises(ValueError, match="three"):
            probe(torch.randn(3, 8))
        after = torch._C._len_torch_function_stack()
    assert (outside, after, seen) == (0, 0, [1, 1, 1, 1])
    assert found == [f"Function 'GradientReversal' (module {__name__})"]
    # torch skips the always-called hooks of a forward that raises while it traces: the stack is as it was after
    with custom_gradients(probe) as found:
        with pytest.raises(Exception, match="three"):
            torch.export.export(probe, (torch.randn(3, 8),))
    assert torch._C._len_torch_function_stack() == 0


class HugeTable(nn.Module):
    """A 64 GB embedding table (2.5e8 rows of 64 fp32) and a small head: no V100 holds the table alone."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(250_000_000, 64), nn.Linear(64, 8)

    def forward(self, ids):
        return self.head(self.emb(ids))


@pytest.mark.parametrize("training", [False, True])
def test_a_module_no_device_holds_is_refused_naming_the_devices(training):
    """A node larger than every device's memory is a refusal of the devices, as a model no plan fits is (it
    was an InvalidInstanceError about 'node 0', naming no parameter)."""
    with torch.device("meta"):
        model, ids = HugeTable(), torch.randint(0, 10, (8,))
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (ids,), devices="v100:4", training=training)
    needs = "64000002048" if training else "6.4e+10"   # the table, in training with its output kept for the backward
    assert (error.value.parameter, str(error.value)) == (
        "devices", f"devices 'v100:4' cannot hold the model: no plan fits (node 0 ('emb') fits no device: needs "
                   f"{needs} bytes, accelerator memory is 34359738368; no cpu devices)")
    # a CPU holds it: planned, the table on the CPU
    pp = plan_pipeline(model, (ids,), devices="v100:4,epyc-7763:1", training=training)
    assert [s.device_type for s in pp.result.plan] == ["cpu", "accelerator"]


def test_a_torchscript_module_is_refused_by_name():
    """A scripted module takes no forward hook: planning failed with torch's RuntimeError ('register_forward_hook
    is not supported on ScriptModules') before the export's refusal, which said 'Exporting a ScriptModule is not
    supported' of the model and named none inside it ("'RecursiveScriptModule' object has no attribute
    'forward'"); no hook is left behind."""
    class WithScriptedGRU(nn.Module):
        def __init__(self):
            super().__init__()
            with warnings.catch_warnings():   # torch.jit.script is deprecated, and still what users have
                warnings.simplefilter("ignore", DeprecationWarning)
                self.rnn = torch.jit.script(nn.GRU(8, 8))
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(mlp())
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(scripted, (torch.randn(4, 8),), devices="h100:2")
    assert (error.value.parameter, str(error.value)) == (
        "model", "model RecursiveScriptModule cannot be exported: it is a TorchScript module (RecursiveScriptModule), "
                 "which torch.export does not trace: give the nn.Module it was scripted or traced from")
    model = WithScriptedGRU()
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (torch.randn(4, 3, 8),), devices="h100:2")
    assert (error.value.parameter, str(error.value)) == (
        "model", "model WithScriptedGRU cannot be exported: its module 'rnn' is a TorchScript module "
                 "(torch.jit.script), which torch.export does not trace: put the nn.Module it was scripted from in its "
                 "place")
    assert [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in (model, model.head)] == [0, 0]


def test_micro_batches_too_few_for_any_plan_that_fits_are_refused_as_such():
    """With stages left open under 1f1b, a model that fits on no plan of at most ``microbatches`` stages is refused
    for its micro-batches, without a stage count it never asked for: it was told the micro-batches must be at least
    the optimum's 8 stages, where 4 hold the model (128 GiB of weights and as much of gradients)."""
    with torch.device("meta"):
        model, x = nn.Sequential(*[nn.Linear(32768, 32768) for _ in range(32)]), torch.randn(8, 32768)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(model, (x,), devices="h100:8", microbatches=2)
    assert (error.value.parameter, str(error.value)) == (
        "microbatches", "microbatches is 2, so the 1f1b schedule runs at most 2 stages, and no plan of at most 2 "
                        "stages fits 'h100:8' (the optimal plan has 8); use more micro-batches or schedule 'gpipe'")
    assert plan_pipeline(model, (x,), devices="h100:8", microbatches=4).num_stages == 4


def test_micro_batches_whose_plans_the_search_did_not_find_are_a_limit_not_a_refusal(monkeypatch):
    """Where the searches of at most ``microbatches`` stages stop without a plan (a MILP's time limit), the call
    says the limit stopped them, not that no plan of so few stages fits."""
    import dataclasses

    search = placement.solve

    def stopped(*args, **kwargs):   # every search of a given stage count stops at its limit without a plan
        found = search(*args, **kwargs)
        if kwargs.get("stages") is None:
            return found
        return dataclasses.replace(found, status="no_solution", value=None, bound=None, gap=None, plan=(),
                                   message="time limit reached before any plan")

    monkeypatch.setattr(placement, "solve", stopped)
    with pytest.raises(placement.LimitExceededError) as error:
        plan_pipeline(mlp(), (torch.randn(4, 8),), devices="h100:4", microbatches=2)
    assert (error.value.parameter, str(error.value)) == (
        "time_limit", "no plan found within the limits: time limit reached before any plan")


class CastScale(nn.Module):
    """A scale read through a cast to float32, ``x * (1 + weight.float())``, as Gemma's RMSNorm reads its weight:
    ``torch.export`` writes a metadata assertion on the weight beside the cast, which nothing reads."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return x * (1.0 + self.weight.float())


def test_a_parameter_read_by_one_stage_through_a_cast_is_held_by_that_stage_alone():
    # the assertion went to stage 0 (the stage of its latest input, a parameter alone), so stage 0 held the
    # last scale too, and the stages exchanged its gradient every step
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), CastScale(8), nn.Linear(8, 8), CastScale(8))
    x = torch.randn(4, 8)
    pp = plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, microbatches=2)
    assert [s.nodes for s in pp.result.plan] == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert pp.shared_parameters == {}
    assert pp.result.stats["shared_parameters"] == {}
    assert [[k for k, _ in pp.stage_module(s).named_parameters()] for s in range(2)] == [
        ["0.weight", "0.bias", "1.weight"], ["2.weight", "2.bias", "3.weight"]]
    out, _ = chained(pp, (x,))
    assert torch.equal(out, model(x))


class CheckpointedNorm(nn.Module):
    """Two blocks with BatchNorm in training mode, each run under non-reentrant activation checkpointing."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU()) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return x


def test_checkpointed_batch_norm_updates_its_statistics_once_per_micro_batch_in_the_stages():
    """The stages run the checkpointed blocks as their operators and recompute nothing: their BatchNorms count
    one update per forward, where the model's backward pass recomputes each block and updates them again
    (docs/pytorch.md, Limits of the one call); outputs and gradients are the model's."""
    import copy

    torch.manual_seed(0)
    model, x = CheckpointedNorm(), torch.randn(4, 8)
    pp = plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2)
    reference = copy.deepcopy(model)
    out, modules = chained(pp, (x,))
    out.square().sum().backward()
    expected = reference(x)
    expected.square().sum().backward()
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    grads = {k: p.grad for module in modules for k, p in module.named_parameters()}
    assert all(torch.allclose(grads[k], p.grad, rtol=1e-4, atol=1e-6) for k, p in reference.named_parameters())
    counts = {k: int(v) for module in modules for k, v in module.state_dict().items() if k.endswith("tracked")}
    assert counts == {"blocks.0.1.num_batches_tracked": 1, "blocks.1.1.num_batches_tracked": 1}
    assert [int(reference.blocks[i][1].num_batches_tracked) for i in range(2)] == [2, 2]


class SparseMixing(nn.Module):
    """Two layers, each followed by a product with one sparse 8 x 8 buffer (a graph's adjacency, a pruned
    mixing matrix), which both stages of a 3-stage plan read."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 2)
        generator = torch.Generator().manual_seed(3)
        dense = torch.randn(8, 8, generator=generator) * (torch.rand(8, 8, generator=generator) > 0.5)
        self.register_buffer("mixing", dense.to_sparse())

    def forward(self, x):
        h = torch.sparse.mm(self.mixing, torch.relu(self.a(x)).T).T
        h = torch.sparse.mm(self.mixing, torch.relu(self.b(h)).T).T
        return self.c(h)


def test_a_sparse_buffer_is_planned_and_the_stages_compute_the_model():
    """A sparse buffer has no strided memory of its own to compare with the other tensors' (torch raised
    NotImplementedError, 'Cannot access storage of SparseTensorImpl', from inside the planning); it shares
    memory with no parameter, and each stage that reads it holds its copy."""
    import copy

    torch.manual_seed(0)
    model, x = SparseMixing(), torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)   # no FLOP formula for the sparse product
        pp = plan_pipeline(model, (x,), devices="epyc-7763:3", stages=3)
    assert pp.result.status == "optimal" and pp.num_stages == 3
    reference = copy.deepcopy(model)
    out, modules = chained(pp, (x,))
    expected = reference(x)
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    expected.square().sum().backward()
    grads = {k: p.grad for module in modules for k, p in module.named_parameters()}
    assert sorted(grads) == sorted(k for k, _ in reference.named_parameters())
    assert all(torch.allclose(grads[k], p.grad, rtol=1e-4, atol=1e-6) for k, p in reference.named_parameters())
    held = [s for s, module in enumerate(modules) if "mixing" in dict(module.named_buffers())]
    assert len(held) == 2
    assert all(torch.equal(modules[s].get_buffer("mixing").to_dense(), model.mixing.to_dense()) for s in held)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_the_digests_of_a_sparse_buffer_held_by_two_stages_compare_its_values():
    """build_stage compares the digests of the tensors several stages hold: a sparse one made the holders raise
    RuntimeError ('unsupported memory format option Contiguous') while the other ranks waited for them; its
    digest now covers its type, layout, shape, indices and values."""
    from placement.torch.planning import tensor_digest

    torch.manual_seed(0)
    model = SparseMixing()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        pp = plan_pipeline(model, (torch.randn(4, 8),), devices="epyc-7763:3", stages=3)
    shared = {s: {name: (digest, holders) for name, digest, holders in pp.shared_values(s)} for s in range(3)}
    holders = shared[0]["mixing"][1]
    assert len(holders) == 2
    assert shared[holders[0]]["mixing"][0] == shared[holders[1]]["mixing"][0] != (0,) * 4
    dense = model.mixing.to_dense()
    assert tensor_digest(model.mixing) == tensor_digest(dense.to_sparse())
    assert tensor_digest(dense.to_sparse_csr()) == tensor_digest(dense.to_sparse_csr())
    assert tensor_digest(model.mixing) != tensor_digest(dense.to_sparse_csr())   # another layout
    changed = dense.clone()
    changed[changed != 0] *= 2
    assert tensor_digest(model.mixing) != tensor_digest(changed.to_sparse())
    assert tensor_digest(model.mixing) != tensor_digest(dense)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_a_sparse_or_nested_input_is_refused():
    """torch's runtime cuts every tensor input along its first dimension, which a sparse tensor cannot be
    (NotImplementedError from 'aten::as_strided' at the first step, the plan made), nor a nested one
    (RuntimeError, 'NestedTensorImpl doesn't support sizes', from inside the planning; a jagged one failed to
    export, the error naming sympy's code)."""
    x = torch.randn(4, 8)
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(mlp(), (x.to_sparse(),), devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("args", (
        "args holds args[0], a tensor of layout torch.sparse_coo, which the pipeline runtime cannot split into "
        "micro-batches (it cuts every tensor input along its first dimension, and sends strided tensors only): "
        "give it dense (to_dense()), or make a sparse tensor that every sample shares a buffer of the model"))
    with pytest.raises(placement.InvalidParameterError) as error:
        plan_pipeline(Biased(), (x,), {"extra": {"bias": torch.randn(4, 8).to_sparse_csr()}}, devices="h100:2")
    assert (error.value.parameter, str(error.value)) == ("kwargs", (
        "kwargs holds kwargs['extra']['bias'], a tensor of layout torch.sparse_csr, which the pipeline runtime "
        "cannot split into micro-batches (it cuts every tensor input along its first dimension, and sends strided "
        "tensors only): give it dense (to_dense()), or make a sparse tensor that every sample shares a buffer of "
        "the model"))
    for layout in (torch.strided, torch.jagged):
        nested = torch.nested.nested_tensor([torch.randn(2, 8), torch.randn(3, 8)], layout=layout)
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(mlp(), (nested,), devices="h100:2")
        assert (error.value.parameter, str(error.value)) == ("args", (
            "args holds args[0], a nested tensor, which the pipeline runtime cannot split into micro-batches (it "
            "cuts every tensor input along its first dimension, and sends strided tensors only): pad it "
            "(torch.nested.to_padded_tensor) and give a mask of the padding beside it"))


class SparseActivation(nn.Module):
    """A layer whose result is made sparse, and read by the next operator as dense again."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.c = nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.a(x)).to_sparse()
        return self.c(h.to_dense() * 2)


def test_a_sparse_result_shares_a_stage_with_its_readers():
    """Stages send strided tensors only: a sparse value crossing a boundary was planned, and stage 0 failed at
    its first run (RuntimeError, 'unsupported memory format option Contiguous'), as did the program of
    pipe_split_module for a plan of import_torch's instance (torch's pipeline: 'c10d::send' has no kernel for
    sparse tensors). The operator that makes a sparse result and its readers are one colour class; a plan that
    cuts there anyway (made by hand) is refused by the partition, naming the value."""
    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import layout_from_instance, pipe_split_module
    from placement.io.torch_export import import_torch
    from placement.torch.partition import canonical_names, partition

    torch.manual_seed(0)
    model, x = SparseActivation(), torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)   # no FLOP formula for to_sparse and to_dense
        for stages in (2, 3, 4, 5):
            pp = plan_pipeline(model, (x,), devices=f"epyc-7763:{stages}", stages=stages, granularity="operator")
            assert pp.instance["about"]["sparse_values"] == {"to_sparse": [2, 3]}
            assert not any("to_sparse" in received for received in pp.relayed)
            out, _ = chained(pp, (x,))
            assert torch.allclose(out, model(x), rtol=1e-5, atol=1e-6)
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(model, (x,), devices="epyc-7763:6", stages=6, granularity="operator")
        assert str(error.value).endswith(
            "the node that makes a sparse tensor shares a stage with those that read it, as stages exchange strided "
            "tensors only: to_sparse, to_dense (around the sparse result of 'to_sparse')")
        imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 0, 2), training=True,
                                granularity="operator")
    colours = {node["name"]: node.get("colorClass") for node in imported.instance["nodes"]}
    assert colours["to_sparse"] == colours["to_dense"] != colours["relu"]
    cut = Plan((DeviceAssignment("cpu", (0, 1, 2, 6, 7, 8)), DeviceAssignment("cpu", (3, 4, 5, 9, 10, 11))))
    gm = pipe_split_module(imported.source, layout_from_instance(imported.instance), cut)
    with pytest.raises(placement.InvalidParameterError) as error:
        partition(gm, canonical_names(model))
    assert (error.value.parameter, str(error.value)) == ("plan", (
        "plan passes the sparse tensor 'to_sparse' (layout torch.sparse_coo) from stage 0 to stage 1; pipeline "
        "stages exchange strided tensors only: make it dense where it is made (to_dense()), or plan with other "
        "stages"))


class SparseOutput(nn.Module):
    """Two layers, returning their result and a sparse copy of its positive part."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.b(torch.relu(self.a(x)))
        return h, torch.relu(h).detach().to_sparse()


def test_a_sparse_output_is_refused_by_name():
    """The check of the samples' outputs compared a sparse output by its values, which torch has no kernel for
    (NotImplementedError, 'aten::max' on SparseCPU, from inside the planning); stages gather strided outputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)   # no FLOP formula for to_sparse
        with pytest.raises(placement.InvalidParameterError) as error:
            plan_pipeline(SparseOutput(), (torch.randn(4, 8),), devices="epyc-7763:2", stages=2)
    assert (error.value.parameter, str(error.value)) == ("model", (
        "model returns the sparse tensor 'to_sparse' (layout torch.sparse_coo); a pipelined model returns strided "
        "tensors, which its stages send and gather over micro-batches: return it dense (to_dense())"))


class AttributeNamed(nn.Module):
    """Three linears; the middle one a submodule named ``name``, or a scale after it, a parameter or buffer so
    named."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first, self.last = nn.Linear(4, 4), nn.Linear(4, 4)
        self.middle = name
        if kind == "submodule":
            self.add_module(name, nn.Linear(4, 4))
        elif kind == "parameter":
            self.register_parameter(name, nn.Parameter(torch.randn(4)))
        else:
            self.register_buffer(name, torch.randn(4))

    def forward(self, x):
        h, middle = torch.tanh(self.first(x)), getattr(self, self.middle)
        return self.last(torch.tanh(middle(h) if isinstance(middle, nn.Module) else h * middle))


@pytest.mark.parametrize("kind, name", [("submodule", "graph"), ("parameter", "code"), ("buffer", "meta"),
                                        ("submodule", "validate_inputs"), ("parameter", "_in_spec")])
def test_a_name_the_graph_module_holds_itself_is_refused_before_the_search(monkeypatch, kind, name):
    """torch registers the exported program's state on a GraphModule under the model's names, and failed on a name
    that module holds itself (a KeyError, a TypeError, or a missing submodule weight) after the search."""
    def no_search(*args, **kwargs):
        raise AssertionError("the plan was searched for")

    monkeypatch.setattr(placement, "solve", no_search)
    with pytest.raises(placement.InvalidParameterError) as error, warnings.catch_warnings():
        warnings.simplefilter("error", GraphModuleNameWarning)   # the import's warning: the refusal says it
        plan_pipeline(AttributeNamed(kind, name), (torch.randn(2, 4),), devices="epyc-7763:2", stages=2)
    assert (error.value.parameter, str(error.value)) == ("model", (
        f"model has a {kind} named {name!r}, which torch.fx.GraphModule uses for an attribute of its own: torch "
        "cannot make a module of the exported program (ExportedProgram.module(), from which the stages and "
        f"torch.distributed.pipelining.pipeline() are built); rename the {kind}"))


def test_a_name_the_graph_module_does_not_hold_is_planned():
    model, x = AttributeNamed("submodule", "graph_module"), torch.randn(2, 4)
    out, _ = chained(plan_pipeline(model, (x,), devices="epyc-7763:2", stages=2, granularity="operator"), (x,))
    assert torch.allclose(out, model(x))
