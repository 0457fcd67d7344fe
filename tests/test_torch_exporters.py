"""Runtime hand-off of a plan: split points, DeepSpeed parts, Megatron layouts, pipe_split graph modules.

The layouts are written by hand in the form ``placement import`` records (module,
starts, ops per forward node; ``forward`` per backward node); only the last two tests
need torch.
"""

from __future__ import annotations

import pytest

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.io.exporters import (deepspeed_parts, layer_stack, layout_from_instance, megatron_layout,
                                    split_points, stages)
from placement.plan import DeviceAssignment, Plan


def layout(nodes, training=False):
    """An instance dict with forward nodes ``(name, module, starts)`` (ids in order), and mates if training."""
    entries = [{"id": k, "name": name, "module": module, "starts": list(starts), "ops": [f"op{k}"],
                "isBackwardNode": False} for k, (name, module, starts) in enumerate(nodes)]
    if training:
        n = len(nodes)
        entries += [{"id": n + k, "name": name + ".grad", "isBackwardNode": True, "forward": k}
                    for k, (name, _, _) in enumerate(nodes)]
    return layout_from_instance({"nodes": entries})


GPT = [("embed", "embed", ("embed",)), ("layers.0", "layers.0", ("layers", "layers.0")),
       ("layers.1", "layers.1", ("layers.1",)), ("layers.2", "layers.2", ("layers.2",)),
       ("norm", "norm", ("norm",)), ("head", "head", ("head",))]


def plan(*groups, kind="accelerator"):
    return Plan(tuple(DeviceAssignment(kind, tuple(g)) for g in groups))


def test_interval_plan_gives_split_points_parts_and_layout():
    lay = layout(GPT)
    p = plan([0, 1], [2, 3, 4, 5])
    assert stages(lay, p) == [[0, 1], [2, 3, 4, 5]]
    assert split_points(lay, p) == ["layers.1"]
    assert deepspeed_parts(lay, p) == {"layers": ["embed", "layers.0", "layers.1", "layers.2", "norm", "head"],
                                       "parts": [0, 2, 6]}
    assert megatron_layout(lay, p) == "Et|ttL"
    three = plan([0], [1, 2], [3, 4, 5])
    assert split_points(lay, three) == ["layers", "layers.2"]  # the outermost module beginning there
    assert deepspeed_parts(lay, three)["parts"] == [0, 1, 3, 6]
    assert megatron_layout(lay, three) == "E|tt|tL"


def test_training_plans_use_forward_nodes_and_check_mates():
    lay = layout(GPT, training=True)
    p = plan([0, 1, 6, 7], [2, 3, 4, 5, 8, 9, 10, 11])
    assert stages(lay, p) == [[0, 1], [2, 3, 4, 5]] and megatron_layout(lay, p) == "Et|ttL"
    with pytest.raises(InvalidParameterError, match="^plan does not place backward node 7 on the device of its "
                                                    "forward node 1$"):
        stages(lay, plan([0, 1, 6], [2, 3, 4, 5, 7, 8, 9, 10, 11]))


def test_devices_in_pipeline_order_not_node_order():
    lay = layout(GPT)
    # the plan's device order is the pipeline: a later device holding earlier nodes is not a pipeline split
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a split_spec, which needs stages "
                                                    "that are intervals of program order: stage 0 does not hold "
                                                    "'embed', which comes between its nodes$"):
        split_points(lay, plan([2, 3, 4, 5], [0, 1]))


def test_stage_that_is_no_interval_of_program_order():
    lay = layout(GPT)
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts, which needs "
                                                    "stages that are intervals of program order: stage 0 does not "
                                                    "hold 'layers.0', which comes between its nodes$"):
        deepspeed_parts(lay, plan([0, 2], [1, 3, 4, 5]))


def test_boundary_where_no_module_begins():
    nodes = [("embed", "embed", ("embed",)), ("block.attn", "block.attn", ("block", "block.attn")),
             ("block", "block", ()), ("head", "head", ("head",))]
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a split_spec: stage 1 begins at "
                                                    "'block', which is not where a module called once begins; use "
                                                    "pipe_split_module instead$"):
        split_points(layout(nodes), plan([0, 1], [2, 3]))


def test_megatron_layout_needs_whole_layers_and_one_stage_each_for_embedding_and_loss():
    ops = [("embed", "embed", ("embed",)), ("pos", "pos", ("pos",)),
           ("h.0.attn", "h.0.attn", ("h", "h.0", "h.0.attn")), ("h.0.mlp", "h.0.mlp", ("h.0.mlp",)),
           ("h.1.attn", "h.1.attn", ("h.1", "h.1.attn")), ("h.1.mlp", "h.1.mlp", ("h.1.mlp",)),
           ("ln_f", "ln_f", ("ln_f",)), ("lm_head", "lm_head", ("lm_head",))]
    lay = layout(ops)
    assert layer_stack(lay) == ("h", [None, None, 0, 0, 1, 1, None, None])
    assert megatron_layout(lay, plan([0, 1, 2, 3], [4, 5, 6, 7])) == "Et|tL"
    assert megatron_layout(lay, plan([0, 1], [2, 3, 4, 5], [6, 7])) == "E|tt|L"
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: a stage "
                                                    "boundary falls inside layer h.0$"):
        megatron_layout(lay, plan([0, 1, 2], [3, 4, 5, 6, 7]))
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the part before "
                                                    "the first layer spans stages 0 to 1; Megatron keeps the "
                                                    "embedding in one stage$"):
        megatron_layout(lay, plan([0], [1, 2, 3, 4, 5, 6, 7]))
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the part after "
                                                    "the last layer spans stages 1 to 2; Megatron keeps the loss "
                                                    "part in one stage$"):
        megatron_layout(lay, plan([0, 1, 2, 3], [4, 5, 6], [7]))


def test_megatron_layout_needs_a_layer_chain():
    between = layout([("embed", "embed", ()), ("h.0", "h.0", ()), ("mix", "mix", ()), ("h.1", "h.1", ()),
                      ("head", "head", ())])
    with pytest.raises(InvalidParameterError, match="^layout is not a layer chain, so no Megatron layout: 'mix' "
                                                    "lies between the layers of h but in none of them$"):
        megatron_layout(between, plan([0, 1, 2, 3, 4]))
    flat = layout([("a", "a", ()), ("b", "b", ())])
    with pytest.raises(InvalidParameterError, match="^layout has no numbered list of layers \\(modules P.0, P.1, "
                                                    "…\\), so no Megatron layout$"):
        megatron_layout(flat, plan([0, 1]))


def test_plans_that_do_not_fit_the_instance():
    lay = layout(GPT)
    with pytest.raises(InvalidParameterError, match="^plan does not place node 5 \\(head\\)$"):
        stages(lay, plan([0, 1, 2], [3, 4]))
    with pytest.raises(InvalidParameterError, match="^plan places node 2 on two devices$"):
        stages(lay, plan([0, 1, 2], [2, 3, 4, 5]))
    with pytest.raises(InvalidParameterError, match="^plan places node 9, which the instance does not have$"):
        stages(lay, plan([0, 1, 2, 9], [3, 4, 5]))


def test_instances_without_module_metadata_are_refused():
    data = {"nodes": [{"id": 0, "name": "a", "isBackwardNode": 0}]}
    with pytest.raises(InvalidInstanceError, match="^node 0 has no module metadata; only instances made by the "
                                                   "model importers can be exported$"):
        layout_from_instance(data)


def test_split_spec_maps_points_to_split_point_beginning():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch.distributed.pipelining import SplitPoint

    from placement.io.exporters import split_spec

    assert split_spec(layout(GPT), plan([0, 1], [2, 3, 4, 5])) == {"layers.1": SplitPoint.BEGINNING}


def test_pipe_split_module_reorders_stages_and_keeps_the_function():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.distributed.pipelining import pipe_split

    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import pipe_split_module
    from placement.io.torch_export import import_torch

    class Branches(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.left = nn.Linear(4, 4)
            self.right = nn.Linear(4, 4)

        def forward(self, x):
            return self.left(x) + self.right(x)

    torch.manual_seed(0)
    model, x = Branches(), torch.randn(2, 4)
    imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 0), granularity="operator")
    lay = layout_from_instance(imported.instance)
    assert [node.ops for node in lay.nodes] == [("linear",), ("linear_1",), ("add",)]
    # right first, then left and the sum: a pipeline (an ideal chain), not an interval of program order
    p = plan([1], [0, 2])
    with pytest.raises(InvalidParameterError, match="needs stages that are intervals of program order"):
        split_points(lay, p)
    gm = pipe_split_module(imported.source, lay, p)
    calls = [n.name if n.target is not pipe_split else "|" for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == ["linear_1", "|", "linear", "add"]
    assert torch.equal(gm(x), model(x))
