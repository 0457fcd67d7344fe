"""Runtime hand-off of a plan: split points, DeepSpeed parts, Megatron layouts, pipe_split graph modules.

The first tests write layouts by hand in the form ``placement import`` records (module,
starts, ops per forward node; ``forward`` per backward node); the later ones import real
small models (tests/handoff_models.py) through ``import_torch`` and need torch.
"""

from __future__ import annotations

import importlib.util
import re
import warnings

import pytest

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.io.exporters import (Layout, LayoutNode, deepspeed_notes, deepspeed_parts, layout_from_instance,
                                    pipe_split_ops, split_points, stage_types, stages)
from placement.io.megatron import block_stacks, layer_stack, megatron_layout, megatron_notes
from placement.plan import DeviceAssignment, Plan


def layout(nodes, training=False, edges=(), no_gradient=()):
    """An instance dict with forward nodes ``(name, module, starts)`` (ids in order), and if training their
    mates, with the mirror of every edge but those of ``no_gradient`` (which carry no gradient back)."""
    entries = [{"id": k, "name": name, "module": module, "starts": list(starts), "ops": [f"op{k}"],
                "isBackwardNode": False} for k, (name, module, starts) in enumerate(nodes)]
    links = [{"sourceId": a, "destId": b} for a, b in edges]
    if training:
        n = len(nodes)
        entries += [{"id": n + k, "name": name + ".grad", "isBackwardNode": True, "forward": k}
                    for k, (name, _, _) in enumerate(nodes)]
        links += [{"sourceId": n + b, "destId": n + a} for a, b in edges if (a, b) not in no_gradient]
    return layout_from_instance({"nodes": entries, "edges": links})


def block(prefix, k):
    """The three nodes of block ``prefix.k``: attention (begins the block), its residual add, the MLP."""
    entry = f"{prefix}.{k}"
    return [(f"{entry}.attn", f"{entry}.attn", (entry, f"{entry}.attn")), (entry, entry, ()),
            (f"{entry}.mlp", f"{entry}.mlp", (f"{entry}.mlp",))]


# 0 embed | 1-3 h.0 | 4-6 h.1 | 7-9 h.2 | 10 norm | 11 head
GPT = [("embed", "embed", ("embed",)), *block("h", 0), *block("h", 1), *block("h", 2),
       ("norm", "norm", ("norm",)), ("head", "head", ("head",))]
CHAIN = [(k, k + 1) for k in range(len(GPT) - 1)]


def plan(*groups, kinds=None):
    kinds = kinds or ["accelerator"] * len(groups)
    return Plan(tuple(DeviceAssignment(kind, tuple(g)) for kind, g in zip(kinds, groups)))


def test_interval_plan_at_a_block_boundary_in_every_form():
    lay = layout(GPT, edges=CHAIN)
    p = plan(range(0, 4), range(4, 12))
    assert stages(lay, p) == [[0, 1, 2, 3], list(range(4, 12))]
    assert split_points(lay, p) == ["h.1"]
    # DeepSpeed layers are whole module calls: embed, then block h.0 (nodes 1-3) in stage 0
    assert deepspeed_parts(lay, p) == {"layers": ["embed", "h.0", "h.1", "h.2", "norm", "head"], "parts": [0, 2, 6]}
    assert megatron_layout(lay, p) == "Et|ttL"
    three = plan([0], range(1, 7), range(7, 12))
    assert split_points(lay, three) == ["h.0", "h.2"]
    assert deepspeed_parts(lay, three)["parts"] == [0, 1, 3, 6]
    assert megatron_layout(lay, three) == "E|tt|tL"
    assert pipe_split_ops(lay, three) == [["op0"], [f"op{k}" for k in range(1, 7)], [f"op{k}" for k in range(7, 12)]]


def test_training_plans_use_forward_nodes_and_check_mates():
    lay = layout(GPT, training=True)
    n = len(GPT)
    p = plan([*range(0, 4), *range(n, n + 4)], [*range(4, 12), *range(n + 4, 2 * n)])
    assert stages(lay, p) == [[0, 1, 2, 3], list(range(4, 12))] and megatron_layout(lay, p) == "Et|ttL"
    with pytest.raises(InvalidParameterError, match=f"^plan does not place backward node {n + 3} on the device of "
                                                    "its forward node 3$"):
        stages(lay, plan([*range(0, 4), *range(n, n + 3)], [*range(4, 12), *range(n + 3, 2 * n)]))


def test_devices_in_pipeline_order_not_node_order():
    lay = layout(GPT)
    # the plan's device order is the pipeline: a later device holding earlier nodes is not a pipeline split
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a split_spec: it needs stages that "
                                                    "are consecutive intervals of program order, and stage 0 lacks "
                                                    "'embed', which runs before its node 'head'$"):
        split_points(lay, plan(range(4, 12), range(0, 4)))
    # with the edges recorded, no form takes a plan whose stage reads a later stage
    chained = layout(GPT, edges=CHAIN)
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a pipe_split program: it is no "
                                                    "pipeline: 'h.1.attn' in stage 0 reads 'h.0.mlp' of the later "
                                                    "stage 1$"):
        pipe_split_ops(chained, plan(range(4, 12), range(0, 4)))


def test_stage_that_is_no_interval_of_program_order():
    lay = layout(GPT)
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts: it needs stages "
                                                    "that are consecutive intervals of program order, and stage 0 "
                                                    "lacks 'h.0.attn', which runs before its node 'h.0'$"):
        deepspeed_parts(lay, plan([0, 2], [1, *range(3, 12)]))


def test_a_boundary_inside_a_block_names_the_block():
    lay = layout(GPT)
    p = plan(range(0, 3), range(3, 12))  # node 3 is h.0.mlp: h.0 spans both stages
    assert split_points(lay, p) == ["h.0.mlp"]  # a module called once begins there
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: stage 0 ends "
                                                    "inside block h.0$"):
        megatron_layout(lay, p)
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts: stage 0 holds 'h.0' "
                                                    "but not the whole call of h.0, the smallest module holding it, "
                                                    "and a PipelineModule layer is a whole module$"):
        deepspeed_parts(lay, p)
    at_add = plan(range(0, 2), range(2, 12))  # node 2 is h.0's own residual add: no module begins there
    # named like the block: the message says it is the block's own operators, and where the block begins
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a split_spec: stage 1 begins at "
                                                    r"'h.0' \(the operators of module 'h.0' itself, which begins at "
                                                    r"'h.0.attn'\), which is not where a module called once begins$"):
        split_points(lay, at_add)


def test_a_cpu_stage_between_accelerators_is_refused_by_every_form():
    lay = layout(GPT, edges=CHAIN)
    middle = plan(range(0, 4), range(4, 7), range(7, 12), kinds=["accelerator", "cpu", "accelerator"])
    assert stage_types(lay, middle) == ["accelerator", "cpu", "accelerator"]
    reason = ("stage 1 runs on a CPU between accelerator stages 0 and 2, and no pipeline runtime sends activations "
              "from an accelerator to a CPU and back")
    for export, form in ((split_points, "a split_spec"), (deepspeed_parts, "DeepSpeed parts"),
                         (megatron_layout, "a Megatron layout"), (pipe_split_ops, "a pipe_split program")):
        with pytest.raises(InvalidParameterError) as caught:
            export(lay, middle)
        assert str(caught.value) == f"plan cannot be written as {form}: {reason}"
    # at the ends a CPU stage is a stage of the hand-off, for a rank on the host; Megatron's stages are GPUs
    ends = plan(range(0, 4), range(4, 7), range(7, 12), kinds=["cpu", "accelerator", "cpu"])
    assert split_points(lay, ends) == ["h.1", "h.2"]
    with pytest.raises(InvalidParameterError) as caught:
        megatron_layout(lay, ends)
    assert str(caught.value) == ("plan cannot be written as a Megatron layout: stage 0 runs on a CPU, and every "
                                 "stage of a Megatron layout is a GPU's")


def test_megatron_layers_are_the_outermost_stack_of_repeated_blocks():
    # each block's MLP is a numbered list too (mlp.0 Linear, mlp.1 GELU, mlp.2 Linear): three entries against
    # two blocks, but its entries are single modules and it lies inside the blocks, so the layers are h.0, h.1
    nodes = [("embed", "embed", ("embed",))]
    for k in range(2):
        nodes += [(f"h.{k}.attn", f"h.{k}.attn", (f"h.{k}", f"h.{k}.attn"))]
        nodes += [(f"h.{k}.mlp.{j}", f"h.{k}.mlp.{j}", ((f"h.{k}.mlp",) if j == 0 else ()) + (f"h.{k}.mlp.{j}",))
                  for j in range(3)]
    nodes += [("head", "head", ("head",))]
    lay = layout(nodes)
    assert block_stacks(lay) == {"h": [0, 1]}
    assert layer_stack(lay) == ("h", [None, 0, 0, 0, 0, 1, 1, 1, 1, None])
    assert megatron_layout(lay, plan(range(0, 5), range(5, 10))) == "Et|tL"
    # a stack at the root (an nn.Sequential of blocks), numbered "0", "1": Megatron's layout needs an
    # embedding before the first block and a loss part after the last
    root = layout([("0.attn", "0.attn", ("0", "0.attn")), ("0.mlp", "0.mlp", ("0.mlp",)),
                   ("1.attn", "1.attn", ("1", "1.attn")), ("1.mlp", "1.mlp", ("1.mlp",))])
    assert block_stacks(root) == {"": [0, 1]}
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: nothing runs "
                                                    "before block 0, and a Megatron layout begins with the embedding "
                                                    "\\(E\\)$"):
        megatron_layout(root, plan([0, 1], [2, 3]))
    ends = layout([("embed", "embed", ("embed",)), *block("h", 0), *block("h", 1)])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: nothing runs "
                                                    "after block h.1, and a Megatron layout ends with the loss part "
                                                    "\\(L\\)$"):
        megatron_layout(ends, plan(range(0, 4), range(4, 7)))


def test_megatron_refuses_models_without_one_stack_of_blocks():
    linears = layout([("embed", "embed", ("embed",)), ("layers.0", "layers.0", ("layers", "layers.0")),
                      ("layers.1", "layers.1", ("layers.1",)), ("head", "head", ("head",))])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the model has no "
                                                    "stack of repeated blocks \\(modules P.0, P.1, … with the same "
                                                    "submodules\\); a Megatron layer is a block, not a single "
                                                    "module$"):
        megatron_layout(linears, plan([0, 1], [2, 3]))
    two = layout([*block("encoder.layers", 0), *block("encoder.layers", 1), *block("decoder.layers", 0),
                  *block("decoder.layers", 1)])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the model has 2 "
                                                    "stacks of repeated blocks \\(decoder.layers, encoder.layers\\); "
                                                    "a Megatron layout has one$"):
        megatron_layout(two, plan(range(0, 6), range(6, 12)))
    unlike = layout([*block("h", 0), ("h.1.ff", "h.1.ff", ("h.1", "h.1.ff"))])  # h.1 has other submodules
    assert block_stacks(unlike) == {}
    cut = layout([("embed", "embed", ("embed",)), ("h.0", "h.0", ("h.0", "h.0.attn")),
                  ("h", "h", ("h", "h.1", "h.1.attn")), ("head", "head", ("head",))])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the model has "
                                                    "node 'h' holding block h.1 with other modules; import with a "
                                                    "deeper module_depth$"):
        megatron_layout(cut, plan([0, 1, 2, 3]))


def test_megatron_refuses_values_that_skip_past_the_next_layer():
    # embed 0 | h.0 1-3 | h.1 4-6 | h.2 7-9 | norm 10 | head 11: the embedding's value (a mask) may reach every block
    masks = CHAIN + [(0, 4), (0, 7)]
    assert megatron_layout(layout(GPT, edges=masks), plan(range(0, 4), range(4, 12))) == "Et|ttL"
    side = layout(GPT, edges=CHAIN + [(0, 11)])   # the head reads the embedding's output around every block
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: 'head' of the "
                                                    "loss part reads 'embed' of the embedding, and each Megatron "
                                                    "layer passes on only its hidden states, to the layer after it$"):
        megatron_layout(side, plan(range(0, 4), range(4, 12)))
    skip = layout(GPT, edges=CHAIN + [(3, 7)])    # block h.2 reads block h.0's output
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: 'h.2.attn' of "
                                                    "block h.2 reads 'h.0.mlp' of block h.0, and each Megatron"):
        megatron_layout(skip, plan(range(0, 4), range(4, 12)))
    early = layout(GPT, edges=CHAIN + [(6, 10)])  # the loss part reads block h.1, not the last
    with pytest.raises(InvalidParameterError, match="'norm' of the loss part reads 'h.1.mlp' of block h.1"):
        megatron_layout(early, plan(range(0, 4), range(4, 12)))


def test_megatron_layout_needs_a_chain_of_blocks_and_one_stage_each_for_embedding_and_loss():
    between = layout([("embed", "embed", ("embed",)), *block("h", 0), ("mix", "mix", ("mix",)), *block("h", 1),
                      ("head", "head", ("head",))])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: 'mix' lies between "
                                                    "blocks h.0 and h.1 but in none, and Megatron's layers follow one "
                                                    "another$"):
        megatron_layout(between, plan(range(9)))
    # the model's own operators amid one block's (a ModuleDict block whose forward calls its entries and
    # applies a functional activation between them): the refusal named that block twice, "between blocks h.0
    # and h.0"
    amid = layout([("embed", "embed", ("embed",)), *block("h", 0)[:2], ("gelu", "", ()), block("h", 0)[2],
                   *block("h", 1), ("head", "head", ("head",))])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: 'gelu' runs "
                                                    "between nodes of block h.0 but in none of its modules, and a "
                                                    "Megatron layer holds its block's operators only$"):
        megatron_layout(amid, plan(range(9)))
    lay = layout([("wte", "wte", ("wte",)), ("wpe", "wpe", ("wpe",)), *block("h", 0), *block("h", 1),
                  ("ln_f", "ln_f", ("ln_f",)), ("lm_head", "lm_head", ("lm_head",))])
    assert megatron_layout(lay, plan(range(0, 5), range(5, 10))) == "Et|tL"
    assert megatron_layout(lay, plan([0, 1], range(2, 8), [8, 9])) == "E|tt|L"
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the part before "
                                                    "the first block \\(the embedding\\) spans stages 0 to 1, and "
                                                    "Megatron keeps it in one stage$"):
        megatron_layout(lay, plan([0], range(1, 10)))
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: the part after "
                                                    "the last block \\(the loss part\\) spans stages 1 to 2, and "
                                                    "Megatron keeps it in one stage$"):
        megatron_layout(lay, plan(range(0, 5), range(5, 9), [9]))



def test_notes_tell_entries_forward_never_calls_from_those_it_runs():
    """Blocks h.0, h.2 and h.4 hold the nodes; h.1 (an nn.Identity) is called and holds no operator, h.3 and h.5
    are never called, as the import records. The DeepSpeed note said the model runs h.3 between h.2 and h.4,
    and the Megatron layout counted 3 blocks without a word: both name h.3 and h.5 as holding no stage's work,
    and only h.1 as run between two layers. An instance that records no calls (from ONNX) says a child it
    skips may be never called."""
    nodes = [("embed", "embed", ("embed",)), *block("h", 0), *block("h", 2), *block("h", 4),
             ("head", "head", ("head",))]
    data = {"nodes": [{"id": k, "name": name, "module": module, "starts": list(starts), "ops": [f"op{k}"]}
                      for k, (name, module, starts) in enumerate(nodes)],
            "edges": [{"sourceId": k, "destId": k + 1} for k in range(len(nodes) - 1)],
            "about": {"uncalled_entries": ["h.3", "h.5"]}}
    layers = ["embed", "h.0", "h.2", "h.4", "head"]
    lay = layout_from_instance(data)
    assert megatron_layout(lay, plan(range(0, 4), range(4, 11))) == "Et|ttL"
    never = ("the model's forward did not call h.3 and h.5 in the run the export traced: they hold no stage's work, "
             "and ")
    assert deepspeed_notes(lay, layers) == [
        "layers skips h.1, which the model runs between h.0 and h.2 but of which the instance holds no operator (a "
        "batch normalisation folded into the convolution before it, an nn.Identity, a dropout in eval mode): a "
        "PipelineModule of these layers does not run it; insert it where it belongs if it computes anything",
        never + "a PipelineModule of these layers does not run them either"]
    assert megatron_notes(lay) == [never + "the layout leaves them out of its count of blocks: it counts the 3 "
                                           "entries of h that the forward calls"]
    unrecorded = layout_from_instance({**data, "about": {}})
    may = ("layers skips {}, which lies between {} and {} but of which the instance holds no operator (a batch "
           "normalisation folded into the convolution before it, an nn.Identity, a dropout in eval mode, or an entry "
           "the model's forward never calls: the instance does not record which): a PipelineModule of these layers "
           "does not run it; insert it where it belongs if the model runs it and it computes anything")
    assert deepspeed_notes(unrecorded, layers) == [may.format("h.1", "h.0", "h.2"), may.format("h.3", "h.2", "h.4")]
    assert megatron_notes(unrecorded) == []

def test_deepspeed_notes_do_not_call_a_layer_run_out_of_order_skipped():
    """A forward that calls its blocks in the order 0, 2, 1, 3: every block is a layer, so none is skipped; the
    notes said h.1 and h.2 were, and told the reader to insert them, which would run each twice."""
    nodes = [("embed", "embed", ("embed",)), *block("h", 0), *block("h", 2), *block("h", 1), *block("h", 3),
             ("head", "head", ("head",))]
    data = {"nodes": [{"id": k, "name": name, "module": module, "starts": list(starts), "ops": [f"op{k}"]}
                      for k, (name, module, starts) in enumerate(nodes)],
            "edges": [{"sourceId": k, "destId": k + 1} for k in range(len(nodes) - 1)],
            "about": {"uncalled_entries": []}}
    lay = layout_from_instance(data)
    layers = deepspeed_parts(lay, plan(range(0, 7), range(7, 14)))["layers"]
    assert layers == ["embed", "h.0", "h.2", "h.1", "h.3", "head"]
    assert deepspeed_notes(lay, layers) == []
    assert deepspeed_notes(layout_from_instance({**data, "about": {}}), layers) == []


def test_deepspeed_layers_are_modules_never_operators_outside_them():
    root_op = layout([("embed", "embed", ("embed",)), ("(model)", "", ()), *block("h", 0), ("head", "head", ("head",))])
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts: '\\(model\\)' in "
                                                    "stage 0 is an operator outside every module, and a "
                                                    "PipelineModule layer is a module$"):
        deepspeed_parts(root_op, plan([0, 1], range(2, 6)))
    # layers [embed, h.0, h.1, head]; the head also reads the embedding (a skip across two layers)
    nodes = [("embed", "embed", ("embed",)), *block("h", 0), *block("h", 1), ("head", "head", ("head",))]
    chain = [(k, k + 1) for k in range(7)]
    assert deepspeed_parts(layout(nodes, edges=chain), plan(range(0, 4), range(4, 8))) == {
        "layers": ["embed", "h.0", "h.1", "head"], "parts": [0, 2, 4]}
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts: layer head reads "
                                                    "'embed' of layer embed, and a PipelineModule passes each layer "
                                                    "the outputs of the layer before it only$"):
        deepspeed_parts(layout(nodes, edges=[*chain, (0, 7)]), plan(range(0, 4), range(4, 8)))


def test_plans_that_do_not_fit_the_instance():
    lay = layout(GPT)
    with pytest.raises(InvalidParameterError, match="^plan does not place node 11 \\(head\\)$"):
        stages(lay, plan(range(0, 4), range(4, 11)))
    with pytest.raises(InvalidParameterError, match="^plan places node 3 on two devices$"):
        stages(lay, plan(range(0, 4), range(3, 12)))
    with pytest.raises(InvalidParameterError, match="^plan places node 19, which the instance does not have$"):
        stages(lay, plan([0, 19], range(1, 12)))


def test_a_backward_node_must_name_a_forward_node_and_a_null_name_is_the_id():
    """A ``forward`` naming no forward node was taken, and the plan file blamed later; a null name read as
    'None' where the instance loader names the node by its id."""
    def forward(i, **fields):
        return {"id": i, "module": "m", "ops": ["linear"], "name": f"n{i}", **fields}

    data = {"nodes": [forward(0, name=None), forward(1), {"id": 2, "isBackwardNode": 1, "forward": 999}],
            "edges": [{"sourceId": 0, "destId": 1}]}
    with pytest.raises(InvalidInstanceError, match="^backward node 2: field 'forward' names 999, which is no forward "
                                                   "node of the instance$"):
        layout_from_instance(data)
    data["nodes"][2]["forward"] = 1
    assert [n.name for n in layout_from_instance(data).nodes] == ["0", "n1"]


def test_instances_without_module_metadata_are_refused():
    data = {"nodes": [{"id": 0, "name": "a", "isBackwardNode": 0}]}
    with pytest.raises(InvalidInstanceError, match="^node 0 has no module metadata; only instances made by the "
                                                   "model importers can be exported$"):
        layout_from_instance(data)


@pytest.mark.parametrize("field, value, message", [
    ("module", 3, "node 0: field 'module' must be a string, got integer"),
    ("starts", "a", "node 0: field 'starts' must be an array of strings"),
    ("inner", ["a", 1], "node 0: field 'inner' must be an array of strings"),
    ("repeats", None, "node 0: field 'repeats' must be an array of strings"),
])
def test_module_metadata_of_the_wrong_type_is_refused(field, value, message):
    node = {"id": 0, "name": "a", "isBackwardNode": False, "module": "a", "starts": ["a"], "ops": ["op0"]}
    with pytest.raises(InvalidInstanceError, match=f"^{re.escape(message)}$"):
        layout_from_instance({"nodes": [{**node, field: value}]})


def test_starts_that_leave_out_the_nodes_own_module_are_refused(tmp_path, capsys):
    """A node at which modules' calls begin begins its own module's call (its first operator's innermost module,
    or the one its path is cut to): ``starts`` lists that module where it is called once, ``repeats`` names it
    where it is called more often. GPT-2's node 54 with ``starts`` ["x"] was split at a module the model lacks,
    ``{"x": "BEGINNING"}``, exit 0."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json"
    data = json.loads(path.read_text())
    assert data["nodes"][54]["starts"] == ["transformer.h.4", "transformer.h.4.ln_1"]
    data["nodes"][54]["starts"] = ["x"]
    message = ("node 54: field 'starts' is ['x'], without the node's own module 'transformer.h.4.ln_1' (field "
               "'module'): modules' calls that begin at a node begin with its module's, which 'starts' lists where "
               "it is called once ('repeats' where more often)")
    _refused_at_node_54(data, message, tmp_path, capsys)


def _refused_at_node_54(data, message, tmp_path, capsys):
    """``data`` (a GPT-2 instance) is refused with ``message``, read as a layout and by ``placement split`` with a
    plan cut at node 54, which names the file."""
    import json

    from placement.cli import main

    with pytest.raises(InvalidInstanceError, match=f"^{re.escape(message)}$"):
        layout_from_instance(data)
    instance, plan_file = tmp_path / "gpt2.json", tmp_path / "plan.json"
    instance.write_text(json.dumps(data))
    forward = [node["id"] for node in data["nodes"] if not node["isBackwardNode"]]
    plan_file.write_text(json.dumps({"fpgas": [{"nodes": forward[:54]}, {"nodes": forward[54:]}], "cpus": []}))
    assert main(["split", str(instance), str(plan_file)]) == 2
    assert capsys.readouterr().err == f"error: {instance}: {message}\n"


def _gpt2_with_starts(changes):
    """The bundled GPT-2 instance with the ``starts`` of some nodes replaced (node id -> list)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json"
    data = json.loads(path.read_text())
    for node_id, starts in changes.items():
        data["nodes"][node_id]["starts"] = starts
    return data


@pytest.mark.parametrize("starts, made_up", [(["x", "transformer.h.4.ln_1"], "x"),
                                             (["transformer.h.4", "x", "transformer.h.4.ln_1"], "x"),
                                             (["transformer.h.4.ln_1", "transformer.h.4.ln_1.x"],
                                              "transformer.h.4.ln_1.x")])
@pytest.mark.parametrize("listed", [False, True])
def test_a_made_up_module_beside_the_nodes_own_in_starts_is_refused(tmp_path, capsys, starts, made_up, listed):
    """A module named in ``starts`` is one a node belongs to, one a node's module lies in, or one the import lists
    in ``about.other_modules``: GPT-2's node 54 with ``starts`` ["x", "transformer.h.4.ln_1"] was split at
    ``{"x": "BEGINNING"}``, a module the model lacks, exit 0. An instance without that field (the bundled one,
    whose modules all have nodes, or one imported before the field was written) is asked to be imported again."""
    data = _gpt2_with_starts({54: starts})
    if listed:
        data["about"]["other_modules"] = []
    message = (f"node 54: field 'starts' names {made_up!r}, which is no module of the model: no node belongs to it "
               "or to a module inside it (field 'module'), and " + (
                   "field 'about.other_modules', where the import lists the modules called under no such name, "
                   "does not list it" if listed else
                   "the instance has no field 'about.other_modules', where an import lists the modules called under "
                   "no such name (import the model again if it calls such a module)"))
    _refused_at_node_54(data, message, tmp_path, capsys)


@pytest.mark.parametrize("value", ["blocks", ["blocks", 1], {"blocks": 1}])
def test_other_modules_that_are_no_array_of_strings_are_refused(value):
    node = {"id": 0, "name": "a", "isBackwardNode": False, "module": "a", "starts": ["a"], "ops": ["op0"]}
    with pytest.raises(InvalidInstanceError, match="^field 'about.other_modules' must be an array of strings$"):
        layout_from_instance({"nodes": [node], "about": {"other_modules": value}})


def test_the_model_itself_is_no_module_a_call_begins():
    """A node of the operators outside every module (module '') that lists '' in ``starts`` was split at
    ``{"": "BEGINNING"}``, the model itself, which no split_spec can name."""
    message = ("node 1: field 'starts' names '', which is no module of the model: no node belongs to it or to a "
               "module inside it (field 'module'), and the instance has no field 'about.other_modules', where an "
               "import lists the modules called under no such name (import the model again if it calls such a "
               "module)")
    with pytest.raises(InvalidInstanceError, match=f"^{re.escape(message)}$"):
        layout([("a", "a", ("a",)), ("(model)", "", ("",))], edges=[(0, 1)])


def test_a_module_called_once_is_begun_at_one_node_after_the_nodes_in_its_call():
    """A module of the model named where its call does not begin is refused: GPT-2's node 54 listing
    transformer.h.5, which node 66 begins, was split at ``{"transformer.h.5": "BEGINNING"}``, twelve nodes later
    than the plan's stage; and naming transformer.h.3.mlp.act, to which node 50 belongs, at node 54."""
    moved = _gpt2_with_starts({54: ["transformer.h.5", "transformer.h.4.ln_1"]})
    message = ("node 66: field 'starts' names 'transformer.h.5', a module called once, whose call node 54 begins "
               "already (a module called more than once is named in field 'repeats')")
    with pytest.raises(InvalidInstanceError, match=f"^{re.escape(message)}$"):
        layout_from_instance(moved)
    late = _gpt2_with_starts({50: [], 54: ["transformer.h.3.mlp.act", "transformer.h.4.ln_1"]})
    message = ("node 54: field 'starts' names 'transformer.h.3.mlp.act', a module called once, whose call node 50, "
               "which belongs to it, is in before this node begins it")
    with pytest.raises(InvalidInstanceError, match=f"^{re.escape(message)}$"):
        layout_from_instance(late)


def test_starts_without_the_nodes_module_are_read_where_its_call_repeats():
    """A node whose module is called more than once (a shared layer) begins that module's call without listing
    it in ``starts``: the module is in ``repeats``, and ``starts`` holds the modules called once that enclose it
    (here by no name of a node's module: the import lists them in ``about.other_modules``)."""
    data = {"nodes": [{"id": 0, "name": "head", "isBackwardNode": False, "module": "head",
                       "starts": ["blocks", "blocks.0"], "repeats": ["head"], "ops": ["op0"]}],
            "about": {"other_modules": ["blocks", "blocks.0"]}}
    assert layout_from_instance(data).nodes[0].starts == ("blocks", "blocks.0")


@pytest.mark.parametrize("stem, stack", [("bert-base", "bert.encoder.layer"), ("gpt2", "transformer.h"),
                                         ("vit-base", "vit.layers")])
def test_bundled_transformers_have_twelve_blocks(stem, stack):
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "instances" / "models" / f"{stem}-inference.json"
    lay = layout_from_instance(json.loads(path.read_text()))
    # BERT-Base, GPT-2 small and ViT-Base/16 have 12 transformer layers each; their attention and MLP
    # submodules are no layers of their own
    assert block_stacks(lay) == {stack: list(range(12))}
    assert megatron_layout(lay, plan([node.id for node in lay.nodes])) == "E" + "t" * 12 + "L"


# ----- real models through import_torch -----------------------------------------------------

#: the tests whose models come from tests/handoff_models.py, which imports torch
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (pip install 'placement[torch]')")


def imported_layout(factory, granularity="module", module_depth=None):
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    model, args = factory()
    imported = import_torch(model, args, platform=make_platform("h100", "epyc-7763", 4, 0), granularity=granularity,
                            module_depth=module_depth)
    return layout_from_instance(imported.instance)


@needs_torch
def test_a_module_whose_forward_only_calls_a_module_passed_to_it_is_recorded_and_split_at():
    """A module whose call no node's module names (its forward only calls a layer it is given) is listed in
    ``about.other_modules``, so that ``starts`` naming it reads as the model's and a stage begins there."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Apply(torch.nn.Module):
        def forward(self, x, layer):
            return layer(x)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre, self.apply_ = torch.nn.Linear(4, 4), Apply()
            self.inner, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(torch.relu(self.apply_(self.pre(x), self.inner)))

    imported = import_torch(Model(), (torch.randn(2, 4),), platform=make_platform("h100", "epyc-7763", 2, 0))
    assert imported.instance["about"]["other_modules"] == ["apply_"]
    lay = layout_from_instance(imported.instance)
    assert [(node.module, node.starts) for node in lay.nodes] == [
        ("pre", ("pre",)), ("inner", ("apply_", "inner")), ("", ()), ("head", ("head",))]
    assert split_points(lay, plan([0], [1, 2, 3])) == ["apply_"]


@needs_torch
def test_gpt_megatron_layout_counts_blocks_not_linears():
    from tests.handoff_models import gpt

    lay = imported_layout(gpt)
    # program order: 0-3 embeddings (wte, the arange and the add in transformer's own forward, wpe),
    # 4-11 block transformer.h.0 (ln_1, attn, add, ln_2, mlp.0 Linear, mlp.1 GELU, mlp.2 Linear, add),
    # 12-19 block transformer.h.1, 20 ln_f, 21 lm_head
    assert [node.name for node in lay.nodes[4:12]] == [
        "transformer.h.0.ln_1", "transformer.h.0.attn", "transformer.h.0", "transformer.h.0.ln_2",
        "transformer.h.0.mlp.0", "transformer.h.0.mlp.1", "transformer.h.0.mlp.2", "transformer.h.0#1"]
    assert layer_stack(lay) == ("transformer.h", [None] * 4 + [0] * 8 + [1] * 8 + [None] * 2)
    assert megatron_layout(lay, plan(range(0, 12), range(12, 22))) == "Et|tL"
    assert megatron_layout(lay, plan(range(0, 4), range(4, 20), range(20, 22))) == "E|tt|L"
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a Megatron layout: stage 0 ends "
                                                    "inside block transformer.h.0$"):
        megatron_layout(lay, plan(range(0, 8), range(8, 22)))  # between ln_2 and the MLP of h.0
    # at operator granularity the nodes are the same operators here, and so is the layout
    ops = imported_layout(gpt, "operator")
    assert [node.ops for node in ops.nodes] == [node.ops for node in lay.nodes]
    assert megatron_layout(ops, plan(range(0, 12), range(12, 22))) == "Et|tL"


@needs_torch
def test_megatron_finds_blocks_cut_to_one_node_whose_first_operator_is_the_blocks_own():
    from tests.handoff_models import scaled_residual_stack

    lay = imported_layout(scaled_residual_stack, module_depth=1)
    # cut to one level: embed | blocks.0 (x * 0.5, its norm, ff and add) | blocks.1 | head; the blocks'
    # submodules begin after their first operator, so only the nodes' inner modules show them
    assert [(node.name, node.starts, node.inner) for node in lay.nodes] == [
        ("embed", ("embed",), ()),
        ("blocks.0", ("blocks.0",), ("blocks.0.norm", "blocks.0.ff")),
        ("blocks.1", ("blocks.1",), ("blocks.1.norm", "blocks.1.ff")),
        ("head", ("head",), ())]
    assert block_stacks(lay) == {"blocks": [0, 1]}
    assert megatron_layout(lay, plan([0, 1], [2, 3])) == "Et|tL"


@needs_torch
def test_gpt_deepspeed_refuses_the_embedding_sum_outside_a_layer_module():
    from tests.handoff_models import gpt

    lay = imported_layout(gpt)
    # stage 0 would hold wte, then the arange of transformer's own forward: only the whole transformer
    # (which runs into stage 1) holds that operator
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as DeepSpeed parts: stage 0 holds "
                                                    "'transformer' but not the whole call of transformer, the "
                                                    "smallest module holding it, and a PipelineModule layer is a "
                                                    "whole module$"):
        deepspeed_parts(lay, plan(range(0, 12), range(12, 22)))
    # as one stage, the layers are the model's two top-level modules
    assert deepspeed_parts(lay, plan(range(22))) == {"layers": ["transformer", "lm_head"], "parts": [0, 2]}


@needs_torch
@pytest.mark.parametrize("granularity", ["module", "operator"])
def test_deepspeed_parts_index_modules_of_a_residual_stack(granularity):
    from tests.handoff_models import residual_stack, residual_stack_with_root_op

    lay = imported_layout(residual_stack, granularity)
    # 0 embed | 1-3 blocks.0 (norm, ff, its residual add) | 4-6 blocks.1 | 7 head; the adds are no layers
    assert [node.module for node in lay.nodes] == ["embed", "blocks.0.norm", "blocks.0.ff", "blocks.0",
                                                  "blocks.1.norm", "blocks.1.ff", "blocks.1", "head"]
    p = plan(range(0, 4), range(4, 8))
    parts = deepspeed_parts(lay, p)
    assert parts == {"layers": ["embed", "blocks.0", "blocks.1", "head"], "parts": [0, 2, 4]}
    # what a PipelineModule runs: each stage its layers in turn, each layer fed the previous one's output
    torch = pytest.importorskip("torch")
    model, (x,) = residual_stack()
    value = x
    for a, b in zip(parts["parts"], parts["parts"][1:]):
        value = torch.nn.Sequential(*(model.get_submodule(f) for f in parts["layers"][a:b]))(value)
    assert torch.equal(value, model(x))
    assert megatron_layout(lay, p) == "Et|tL" and split_points(lay, p) == ["blocks.1"]
    assert pipe_split_ops(lay, p) == [["linear", "layer_norm", "linear_1", "add"],
                                      ["layer_norm_1", "linear_2", "add_1", "linear_3"]]
    # with a ReLU in the model's own forward (node 1), no PipelineModule layer holds it
    rooted = imported_layout(residual_stack_with_root_op, granularity)
    assert (rooted.nodes[1].module, rooted.nodes[1].ops) == ("", ("relu",))
    name = "(model)" if granularity == "module" else "relu"
    with pytest.raises(InvalidParameterError) as caught:
        deepspeed_parts(rooted, plan(range(0, 5), range(5, 9)))
    assert str(caught.value) == (f"plan cannot be written as DeepSpeed parts: {name!r} in stage 0 is an operator "
                                 "outside every module, and a PipelineModule layer is a module")
    assert split_points(rooted, plan(range(0, 5), range(5, 9))) == ["blocks.1"]


def _pair_join():
    """pair returns (a(x), b(x)); join takes them as two arguments, join(h1, h2)."""
    import torch
    from torch import nn

    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            return self.a(x), self.b(x)

    class Join(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(16, 3)

        def forward(self, h1, h2):
            return self.lin(torch.cat([h1, h2], -1))

    class PairJoin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pair, self.join = Pair(), Join()

        def forward(self, x):
            return self.join(*self.pair(x))

    torch.manual_seed(0)
    return PairJoin(), (torch.randn(4, 8),)


def _join_first():
    """join(x, cond) of two model inputs, then head."""
    import torch
    from torch import nn

    from tests.handoff_models import Join

    class JoinFirst(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.join, self.head = Join(), nn.Linear(4, 3)

        def forward(self, x, cond):
            return self.head(self.join(x, cond))

    torch.manual_seed(0)
    return JoinFirst(), (torch.randn(3, 4), torch.randn(3, 2))


def test_a_deepspeed_layer_takes_one_tensor():
    """A PipelineModule runs ``inputs = layer(inputs)``: a layer that takes two tensors (join(h1, h2) after
    pair, or a first layer given both model inputs) would receive one tuple; a chain of layers that take one
    tensor each is a PipelineModule."""
    lay = imported_layout(_pair_join)
    assert [(node.name, node.module) for node in lay.nodes] == [("pair.a", "pair.a"), ("pair.b", "pair.b"),
                                                               ("join", "join"), ("join.lin", "join.lin")]
    for p in (plan(range(0, 2), range(2, 4)), plan(range(4))):
        with pytest.raises(InvalidParameterError) as caught:
            deepspeed_parts(lay, p)
        assert str(caught.value) == ("plan cannot be written as DeepSpeed parts: layer join takes 2 tensors, the "
                                     "outputs of 'pair.a' and 'pair.b' of layer pair, and a PipelineModule calls "
                                     "each layer with one argument, the output of the layer before it (a tensor or "
                                     "one tuple)")
    assert split_points(lay, plan(range(0, 2), range(2, 4))) == ["join"]
    first = imported_layout(_join_first)
    with pytest.raises(InvalidParameterError) as caught:
        deepspeed_parts(first, plan(range(0, 2), range(2, 3)))
    assert str(caught.value) == ("plan cannot be written as DeepSpeed parts: layer join takes 2 tensors, the model "
                                 "inputs 'x' and 'cond', and a PipelineModule calls its first layer with one "
                                 "argument, the model's inputs as one tuple")
    assert deepspeed_parts(layout(GPT, edges=CHAIN), plan(range(0, 4), range(4, 12)))["layers"] == [
        "embed", "h.0", "h.1", "h.2", "norm", "head"]


def test_split_spec_maps_points_to_split_point_beginning():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch.distributed.pipelining import SplitPoint

    from placement.io.exporters import split_spec

    assert split_spec(layout(GPT), plan(range(0, 4), range(4, 12))) == {"h.1": SplitPoint.BEGINNING}


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
            self.stem = nn.Linear(4, 4)
            self.left = nn.Linear(4, 4)
            self.right = nn.Linear(4, 4)

        def forward(self, x):
            h = self.stem(x)
            return self.left(h) + self.right(h)

    torch.manual_seed(0)
    model, x = Branches(), torch.randn(2, 4)
    imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 0), granularity="operator")
    lay = layout_from_instance(imported.instance)
    assert [node.ops for node in lay.nodes] == [("linear",), ("linear_1",), ("linear_2",), ("add",)]
    # the stem and right first, then left and the sum: a pipeline (an ideal chain), not an interval of program order
    p = plan([0, 2], [1, 3])
    with pytest.raises(InvalidParameterError, match="intervals of program order"):
        split_points(lay, p)
    assert pipe_split_ops(lay, p) == [["linear", "linear_2"], ["linear_1", "add"]]
    gm = pipe_split_module(imported.source, lay, p)
    calls = [n.name if n.target is not pipe_split else "|" for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == ["linear", "linear_2", "|", "linear_1", "add"]
    assert torch.equal(gm(x), model(x))
    with pytest.raises(InvalidParameterError, match="^plan cannot be written as a pipe_split program: stage 1 runs on "
                                                    "a CPU between accelerator stages 0 and 2"):
        pipe_split_module(imported.source, lay, plan([0, 2], [1], [3], kinds=["accelerator", "cpu", "accelerator"]))


def _shared_linear():
    """nn.Sequential(fc, shared, ReLU, shared, head): one Linear registered as "1" and "3"."""
    import torch

    torch.manual_seed(0)
    shared = torch.nn.Linear(8, 8)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), shared, torch.nn.ReLU(), shared, torch.nn.Linear(8, 2))
    return model, (torch.randn(4, 8),)


def test_a_module_registered_under_two_names_is_called_twice():
    """Modules "1" and "3" are one object: torch's pipeline() would split before both of its calls,
    so neither name may begin a stage, and no DeepSpeed layer may be it; both forms refuse."""
    lay = imported_layout(_shared_linear)
    assert [(node.name, node.starts) for node in lay.nodes] == [("0", ("0",)), ("1", ()), ("2", ("2",)), ("3", ()),
                                                               ("4", ("4",))]
    before_second = plan(range(0, 3), range(3, 5))
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a split_spec: stage 1 begins at "
                                                    r"'3', a call of module 1, which runs more than once, and torch's "
                                                    r"pipeline\(\) would split before each of its calls$"):
        split_points(lay, before_second)
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as DeepSpeed parts: stage 0 holds '1', "
                                                    r"a call of module 1, which runs more than once, and a "
                                                    r"PipelineModule layer is a module called once$"):
        deepspeed_parts(lay, before_second)
    assert split_points(lay, plan(range(0, 2), range(2, 5))) == ["2"]


def onnx_layout(factory, tmp_path, dynamo):
    """The layout of the model ``factory`` makes, exported to ONNX (by the dynamo exporter or TorchScript's) and
    imported from there at module granularity."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    import contextlib
    import io
    import warnings

    from placement.costmodel.roofline import make_platform
    from placement.io.onnx_import import import_onnx

    model, args = factory()
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), args, str(path), dynamo=dynamo)
    imported = import_onnx(path, platform=make_platform("h100", "epyc-7763", 4, 0), granularity="module")
    return layout_from_instance(imported.instance)


def refusal_of(export, lay, p) -> str:
    """The message with which ``export`` refuses plan ``p`` of layout ``lay``."""
    with pytest.raises(InvalidParameterError) as caught:
        export(lay, p)
    return str(caught.value)


def repeated_split(stage: int, name: str, module: str) -> str:
    return (f"plan cannot be written as a split_spec: stage {stage} begins at {name!r}, a call of module {module}, "
            "which runs more than once, and torch's pipeline() would split before each of its calls")


def repeated_layer(stage: int, name: str, module: str) -> str:
    return (f"plan cannot be written as DeepSpeed parts: stage {stage} holds {name!r}, a call of module {module}, "
            "which runs more than once, and a PipelineModule layer is a module called once")


def _reuse():
    """layer, norm, shared, layer_1, shared again, norm2: ``shared`` runs twice; ``layer_1`` is a module of its
    own, and the new LayerNorms ``norm`` and ``norm2`` hold equal values, which the exporters merge into one
    initializer."""
    import torch
    from torch import nn

    class Reuse(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer, self.layer_1, self.shared = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
            self.norm, self.norm2 = nn.LayerNorm(8), nn.LayerNorm(8)

        def forward(self, x):
            return self.norm2(self.shared(self.layer_1(self.shared(self.norm(self.layer(x))))))

    torch.manual_seed(0)
    return Reuse(), (torch.randn(4, 8),)


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_a_module_an_onnx_file_shows_called_twice_is_no_split_point(tmp_path, dynamo):
    """The TorchScript exporter names the second call of ``shared`` ``shared_1``, a scope that reads the
    parameters of ``shared``; the dynamo exporter names both calls ``shared``. Neither is a split point or a
    DeepSpeed layer (torch's pipeline() would split before both calls, and no module ``shared_1`` exists);
    ``layer_1``, a module of its own, is one, and so is ``norm2``, whose equal values the exporters merged
    with those of ``norm``."""
    lay = onnx_layout(_reuse, tmp_path, dynamo)
    second = "shared#1" if dynamo else "shared_1"
    assert [(node.name, node.starts) for node in lay.nodes] == [
        ("layer", ("layer",)), ("norm", ("norm",)), ("shared", ()), ("layer_1", ("layer_1",)), (second, ()),
        ("norm2", ("norm2",))]
    assert refusal_of(split_points, lay, plan(range(0, 4), range(4, 6))) == repeated_split(1, second, "shared")
    assert refusal_of(split_points, lay, plan(range(0, 2), range(2, 6))) == repeated_split(1, "shared", "shared")
    assert refusal_of(deepspeed_parts, lay, plan(range(0, 3), range(3, 6))) == repeated_layer(0, "shared", "shared")
    assert split_points(lay, plan(range(0, 3), range(3, 6))) == ["layer_1"]
    assert split_points(lay, plan(range(0, 5), [5])) == ["norm2"]
    assert split_points(lay, plan([0], range(1, 6))) == ["norm"]
    assert [node.repeats for node in lay.nodes] == [(), (), ("shared",), (), ("shared",), ()]


def _conv_bn():
    """Two blocks layer.0 and layer.1 (conv1, bn1, up, bn2 and a residual add), a Linear fc and a BatchNorm1d
    bnf after it, in evaluation: the dynamo exporter folds each BatchNorm into the layer before it, one node
    scoped to the BatchNorm that reads the layer's weight."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
            self.up, self.bn2 = nn.ConvTranspose2d(4, 4, 1), nn.BatchNorm2d(4)

        def forward(self, x):
            return x + self.bn2(self.up(self.bn1(self.conv1(x))))

    class ConvBN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Sequential(Block(), Block())
            self.fc, self.bnf = nn.Linear(4 * 6 * 6, 3), nn.BatchNorm1d(3)

        def forward(self, x):
            return self.bnf(self.fc(self.layer(x).flatten(1)))

    torch.manual_seed(0)
    return ConvBN(), (torch.randn(2, 4, 6, 6),)


def test_a_batch_norm_the_dynamo_exporter_folds_is_the_call_of_the_layer_before_it(tmp_path):
    """A stage beginning at the folded node began at 'layer.1.bn1' (its scope), and torch's pipeline() ran
    layer.1.conv1, whose work the plan put in that stage, in the stage before; the node is the call of the
    layer whose weight it reads."""
    lay = onnx_layout(_conv_bn, tmp_path, dynamo=True)
    assert [(node.name, node.starts) for node in lay.nodes] == [
        ("layer.0.conv1", ("layer", "layer.0", "layer.0.conv1")), ("layer.0.up", ("layer.0.up",)), ("layer.0", ()),
        ("layer.1.conv1", ("layer.1", "layer.1.conv1")), ("layer.1.up", ("layer.1.up",)), ("layer.1", ()),
        ("(model)", ()), ("fc", ("fc",))]
    assert split_points(lay, plan(range(0, 3), range(3, 8))) == ["layer.1"]
    assert split_points(lay, plan(range(0, 4), range(4, 8))) == ["layer.1.up"]
    assert split_points(lay, plan(range(0, 7), [7])) == ["fc"]


def _repeated_sequence():
    """inp, a Sequential (Linear, ReLU) called twice with mid between, out: the ReLU has no parameters, so the
    TorchScript export's scopes show its calls as two modules (``shared.1``, ``shared.1_1``) called once each."""
    import torch
    from torch import nn

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp, self.mid, self.out = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)
            self.shared = nn.Sequential(nn.Linear(32, 32), nn.ReLU())

        def forward(self, x):
            return self.out(self.shared(self.mid(self.shared(self.inp(x)))))

    torch.manual_seed(0)
    return Twice(), (torch.randn(4, 16),)


def test_a_module_inside_one_called_twice_is_no_split_point(tmp_path):
    """The split at 'shared.1' (the ReLU of the first call) was written, and torch's pipeline() made 3 stages
    of the plan's 2, splitting before both calls; the second call's 'shared.1_1' is no module at all. The
    Sequential runs twice, so everything inside it does: both are refused."""
    lay = onnx_layout(_repeated_sequence, tmp_path, False)
    assert [(node.name, node.starts, node.repeats) for node in lay.nodes][1:3] == [
        ("shared.0", (), ("shared", "shared.0")), ("shared.1", ("shared.1",), ())]
    for k, name in ((2, "shared.1"), (5, "shared.1_1")):
        assert refusal_of(split_points, lay, plan(range(0, k), range(k, 7))) == (
            f"plan cannot be written as a split_spec: stage 1 begins at {name!r}, module {name}, which runs inside "
            "module shared, which runs more than once: torch's pipeline() would split before each of its calls")
    assert split_points(lay, plan(range(0, 3), range(3, 7))) == ["mid"]


def _two_names():
    """a, then one Linear registered as ``b`` and as ``e`` and called by both names, then d."""
    import torch
    from torch import nn

    class TwoNames(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.d = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
            self.e = self.b

        def forward(self, x):
            return self.d(self.e(self.b(self.a(x))))

    torch.manual_seed(0)
    return TwoNames(), (torch.randn(4, 8),)


def test_a_module_an_onnx_file_shows_under_two_names_is_no_split_point(tmp_path):
    """The TorchScript exporter names the second call ``b_1``; both scopes read the one Linear's parameters, so
    both are calls of module ``b``. (The dynamo exporter names it ``e`` and reads one parameter name in both
    scopes, as it does for deep copies whose equal values it merged: there the file cannot show it, below.)"""
    lay = onnx_layout(_two_names, tmp_path, False)
    second = "b_1"
    assert [(node.name, node.starts) for node in lay.nodes] == [("a", ("a",)), ("b", ()), (second, ()), ("d", ("d",))]
    assert refusal_of(split_points, lay, plan(range(0, 2), range(2, 4))) == repeated_split(1, second, "b")
    assert refusal_of(deepspeed_parts, lay, plan(range(0, 2), range(2, 4))) == repeated_layer(0, "b", "b")
    assert split_points(lay, plan(range(0, 3), [3])) == ["d"]
    assert [node.repeats for node in lay.nodes] == [(), ("b",), ("b",), ()]


def _copies():
    """inp, four deep copies of one block (Linear, ReLU), head: the blocks hold equal values, which the dynamo
    exporter merges into the first block's parameter names."""
    import copy

    import torch
    from torch import nn

    class Copies(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            block = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
            self.inp, self.head = nn.Linear(16, 16), nn.Linear(16, 3)
            self.blocks = nn.ModuleList([copy.deepcopy(block) for _ in range(4)])

        def forward(self, x):
            x = self.inp(x)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    torch.manual_seed(0)
    return Copies(), (torch.randn(4, 16),)


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_deep_copies_of_a_block_are_modules_called_once(tmp_path, dynamo):
    """Nodes: inp, then each block's Linear and ReLU, then head. Under dynamo the copies read the first block's
    parameter names, and were taken for calls of blocks.0, which refused every split of the stack."""
    lay = onnx_layout(_copies, tmp_path, dynamo)
    assert [node.repeats for node in lay.nodes] == [()] * len(lay.nodes)
    assert split_points(lay, plan(range(0, 5), range(5, len(lay.nodes)))) == ["blocks.2"]


def test_a_training_plan_whose_value_skips_a_stage_is_no_split_for_torchs_pipeline():
    """GPT in three stages with the embedding read again by the head (a skip from stage 0 to stage 2):
    torch's pipeline() sends such a value on but runs no backward of it (PipeliningMetadataError at the
    first step), so a training plan cannot be written as a split_spec or a pipe_split program;
    plan_pipeline relays it. An inference plan can."""
    n = len(GPT)
    edges = CHAIN + [(0, 11)]
    groups = ([0, 1, 2, 3], list(range(4, 7)), list(range(7, 12)))
    assert split_points(layout(GPT, edges=edges), plan(*groups)) == ["h.1", "h.2"]
    lay = layout(GPT, training=True, edges=edges)
    p = plan(*([*g, *(n + v for v in g)] for g in groups))
    reason = ("'head' in stage 2 reads 'embed' of stage 0, and torch's pipeline() runs no backward of a value that "
              "skips a stage (placement.torch.plan_pipeline relays it)")
    for export, name in ((split_points, "a split_spec"), (pipe_split_ops, "a pipe_split program")):
        with pytest.raises(InvalidParameterError) as err:
            export(lay, p)
        assert str(err.value) == f"plan cannot be written as {name}: {reason}"
    # a value that skips a stage but carries no gradient back (a constant, a mask) is runnable
    frozen = layout(GPT, training=True, edges=edges, no_gradient={(0, 11)})
    assert split_points(frozen, p) == ["h.1", "h.2"]


def _prealloc():
    """A tensor filled by slice assignment (the copy_ of each write into a zeros tensor), then read."""
    import torch
    from torch import nn

    class Prealloc(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(16, 8)

        def forward(self, x):
            out = torch.zeros(x.shape[0], 16)
            out[:, :8] = torch.relu(self.a(x))
            out[:, 8:] = torch.tanh(self.b(x))
            return self.c(out)

    torch.manual_seed(0)
    return Prealloc(), (torch.randn(4, 8),)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_the_import_keeps_in_place_writes_and_their_readers_on_one_stage(training):
    """The writes into ``out`` (``copy_``) read ``relu`` and ``tanh``, and ``c`` reads ``out`` itself
    (``zeros``): no edge orders the writes before ``c``, and every solver was free to run ``c``
    first (the split program then read zeros, 90% off). The import puts ``zeros``, its slices and
    the writes into them in one colour class, as plan_pipeline does: ``c`` follows ``zeros``, so
    every plan of the instance runs it after the writes."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    import placement
    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import pipe_split_module
    from placement.io.torch_export import import_torch

    model, args = _prealloc()
    imported = import_torch(model, args, platform=make_platform("h100", "epyc-7763", 0, 2), training=training,
                            granularity="operator")
    ids = {n["name"]: n["id"] for n in imported.instance["nodes"]}
    colour = {n["id"]: n.get("colorClass", n["id"]) for n in imported.instance["nodes"]}
    assert imported.instance["about"]["written_activations"] == {
        "zeros": [ids[name] for name in ("zeros", "slice_1", "copy_", "slice_2", "copy__1")]}
    assert len({colour[ids[name]] for name in ("zeros", "slice_1", "copy_", "slice_2", "copy__1")}) == 1
    result = placement.solve(imported.problem, stages=2)
    assert result.status == "optimal"
    gm = pipe_split_module(imported.source, layout_from_instance(imported.instance), result.to_plan())
    assert torch.equal(gm(*args), model(*args))


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")   # torch's pipeline() copying its tree specs
def test_a_stage_that_writes_into_what_it_receives_writes_into_a_copy():
    """``total += layer(h)`` with the layers on two stages: torch's stages receive ``total`` as a leaf
    that requires a gradient, and autograd refuses to write into one. The split program copies it
    at the boundary; the stage then runs, forward and backward, as the model does."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.distributed.pipelining import pipeline

    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import pipe_split_module
    from placement.io.torch_export import import_torch

    class Accumulate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

        def forward(self, x):
            total, h = x * 1.0, x
            for layer in self.layers:
                total += layer(h)
                h = torch.tanh(total)
            return total

    torch.manual_seed(0)
    model, x = Accumulate(), torch.randn(4, 8)
    imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 0), training=True)
    ops = [op for node in layout_from_instance(imported.instance).nodes for op in node.ops]
    cut = ops.index("linear_2")   # layers 0 and 1 on stage 0, layers 2 and 3 (and their adds) on stage 1
    forward = [n["id"] for n in imported.instance["nodes"] if not n["isBackwardNode"]]
    first, second = forward[:cut], forward[cut:]
    mates = {n["id"]: n["colorClass"] for n in imported.instance["nodes"] if n["isBackwardNode"]}
    p = Plan(tuple(DeviceAssignment("accelerator", tuple(part + [b for b, f in mates.items() if f in part]))
                   for part in (first, second)))
    pipe = pipeline(pipe_split_module(imported.source, layout_from_instance(imported.instance), p), mb_args=(x,))
    received = tuple(t.detach().requires_grad_() for t in pipe.get_stage_module(0)(x))
    out = pipe.get_stage_module(1)(*received)
    expected = model(x)
    assert torch.allclose(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert all(t.grad is not None for t in received)
    stage = dict(pipe.get_stage_module(1).named_parameters())
    checked = [torch.allclose(stage[k].grad, p.grad) for k, p in model.named_parameters() if k in stage]
    assert checked and all(checked)


def _relu_in_place(training):
    """Four nodes in a chain, node 2 an ``nn.ReLU(inplace=True)`` writing into the value of node 1."""
    names = ["0", "1", "2", "3"]
    entries = [{"id": k, "name": name, "module": name, "starts": [name], "ops": [f"op{k}"], "isBackwardNode": False}
               for k, name in enumerate(names)]
    links = [{"sourceId": k, "destId": k + 1} for k in range(3)]
    if training:
        entries += [{"id": 4 + k, "name": name + ".grad", "isBackwardNode": True, "forward": k}
                    for k, name in enumerate(names)]
        links += [{"sourceId": 5 + k, "destId": 4 + k} for k in range(3)]
    return layout_from_instance({"nodes": entries, "edges": links, "about": {"in_place_writes": [[1, 2]]}})


def test_a_training_stage_that_writes_into_what_it_receives_has_no_split_points():
    """torch's stages (and DeepSpeed's) receive their inputs as leaves that require a gradient in
    training, and autograd refuses an in-place write into one: a stage that begins with
    ``nn.ReLU(inplace=True)`` fails at the first step. The pipe_split program copies the value."""
    lay = _relu_in_place(training=True)
    p = plan([0, 1, 4, 5], [2, 3, 6, 7])
    for export, name, runtime in ((split_points, "a split_spec", "torch's pipeline()"),
                                  (deepspeed_parts, "DeepSpeed parts", "DeepSpeed's PipelineModule")):
        with pytest.raises(InvalidParameterError) as err:
            export(lay, p)
        assert str(err.value) == (f"plan cannot be written as {name}: '2' in stage 1 writes in place into the value "
                                  f"of '1' it receives from stage 0, and {runtime} gives a stage what it receives "
                                  "as leaves that require a gradient, which autograd refuses to write into")
    assert pipe_split_ops(lay, p) == [["op0", "op1"], ["op2", "op3"]]
    assert split_points(lay, plan([0, 4], [1, 2, 3, 5, 6, 7])) == ["1"]   # the write and its value on one stage
    assert split_points(_relu_in_place(training=False), plan([0, 1], [2, 3])) == ["2"]   # no gradient: no leaf


def test_in_place_writes_must_be_pairs_of_node_ids():
    with pytest.raises(InvalidInstanceError, match="about.in_place_writes"):
        layout_from_instance({"nodes": [], "about": {"in_place_writes": [[0]]}})


def test_the_import_records_writes_into_values_of_other_nodes():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.ReLU(inplace=True), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 2))
    imported = import_torch(model, (torch.randn(4, 8),), platform=make_platform("h100", "epyc-7763", 2, 0),
                            training=True)
    assert [n["name"] for n in imported.instance["nodes"][:6]] == ["0", "1", "2", "3", "4", "5"]
    assert imported.instance["about"]["in_place_writes"] == [[1, 2]]
    lay = layout_from_instance(imported.instance)
    assert lay.writes == ((1, 2),)
    p = plan([0, 1, 6, 7], [2, 3, 4, 5, 8, 9, 10, 11])
    with pytest.raises(InvalidParameterError, match="'2' in stage 1 writes in place into the value of '1'"):
        split_points(lay, p)


def _gpt_with(shared=None, repeats=None):
    """The GPT layout above with ``about.shared_parameters`` and per-node ``repeats`` (node id -> modules)."""
    entries = [{"id": k, "name": name, "module": module, "starts": list(starts), "ops": [f"op{k}"],
                "repeats": list((repeats or {}).get(k, ())), "isBackwardNode": False}
               for k, (name, module, starts) in enumerate(GPT)]
    return layout_from_instance({"nodes": entries, "edges": [{"sourceId": a, "destId": b} for a, b in CHAIN],
                                 "about": {"shared_parameters": shared or {}}})


def test_megatron_refuses_blocks_that_share_weights_and_keeps_a_tied_embedding():
    """Megatron builds every layer with weights of its own: a parameter read by two blocks, or by a block and
    the part outside the blocks, cannot be kept shared, and the layout would train more weights than the
    model has. The embedding and the head may share theirs (Megatron ties them); a module called twice
    inside its own block (a dropout) is no other block's."""
    two_blocks = plan(range(0, 7), range(7, 12))   # E h.0 h.1 | h.2 L
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a Megatron layout: trained parameter "
                                                    r"'h.0.attn.weight' is read by block h.0 and block h.1, and each "
                                                    r"Megatron layer has weights of its own$"):
        megatron_layout(_gpt_with(shared={"h.0.attn.weight": [1, 4]}), two_blocks)
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a Megatron layout: trained parameter "
                                                    r"'embed.weight' is read by block h.2 and a node outside the "
                                                    r"blocks, and each Megatron layer has weights of its own$"):
        megatron_layout(_gpt_with(shared={"embed.weight": [0, 9]}), two_blocks)
    assert megatron_layout(_gpt_with(shared={"embed.weight": [0, 11]}), two_blocks) == "Ett|tL"
    assert megatron_layout(_gpt_with(repeats={6: ["h.1.mlp.drop"]}), two_blocks) == "Ett|tL"
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a Megatron layout: 'h.1.mlp' is a "
                                                    r"call of module h.0.mlp, which runs more than once, and each "
                                                    r"Megatron layer is a module of its own, called once, with "
                                                    r"weights of its own$"):
        megatron_layout(_gpt_with(repeats={6: ["h.0.mlp"]}), two_blocks)


def _one_block_four_times():
    """pre, one block (Linear, Tanh) registered four times as layers.0 … layers.3, post."""
    import torch

    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())

    class Aliased(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre, self.layers, self.post = torch.nn.Linear(8, 8), torch.nn.ModuleList([block] * 4), \
                torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.pre(x)
            for layer in self.layers:
                h = layer(h)
            return self.post(h)

    return Aliased(), (torch.randn(4, 8),)


def test_megatron_refuses_one_block_registered_as_every_layer():
    """Four names of one module look like a stack of four blocks; Megatron would build four layers of their
    own weights where the model has one. Every hand-off form but pipe_split refuses the plan, and the
    refusals point to that one."""
    lay = imported_layout(_one_block_four_times)
    assert [node.name for node in lay.nodes] == ["pre", "layers.0.0", "layers.0.1", "layers.1.0", "layers.1.1",
                                                 "layers.2.0", "layers.2.1", "layers.3.0", "layers.3.1", "post"]
    halves = plan(range(0, 5), range(5, 10))
    with pytest.raises(InvalidParameterError, match=r"^plan cannot be written as a Megatron layout: 'layers.0.0' is a "
                                                    r"call of module layers.0, which runs more than once"):
        megatron_layout(lay, halves)
    assert pipe_split_ops(lay, halves)


def test_uncalled_entries_leave_out_entries_whose_weights_forward_reads_and_models_that_take_no_hook():
    """An entry the forward reads a weight of without calling it (ReadingStack: blocks.3.ff.weight) was listed
    as never called and said to hold no stage's work; a model with a TorchScript child raised the hook's
    RuntimeError past the export's own refusal and left the hooks already registered on the model."""
    torch = pytest.importorskip("torch")
    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch
    from tests.handoff_models import reading_stack

    platform = make_platform("h100", "epyc-7763", 2, 0)
    model, args = reading_stack()
    assert import_torch(model, args, platform=platform).instance["about"]["uncalled_entries"] == ["blocks.1"]

    class WithScripted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = torch.nn.Linear(4, 2)
            with warnings.catch_warnings():   # torch.jit.script is deprecated, and still what users have
                warnings.simplefilter("ignore", DeprecationWarning)
                self.a = torch.jit.script(torch.nn.Linear(4, 4))

        def forward(self, x):
            return self.b(self.a(x))

    scripted = WithScripted()
    with pytest.raises(InvalidParameterError) as error:
        import_torch(scripted, (torch.randn(2, 4),), platform=platform)
    assert str(error.value) == ("model WithScripted cannot be exported: its module 'a' is a TorchScript module "
                                "(torch.jit.script), which torch.export does not trace: put the nn.Module it was "
                                "scripted from in its place")
    assert [len(m._forward_pre_hooks) for m in (scripted, scripted.b)] == [0, 0]


def test_a_quantized_module_is_refused_by_name_with_what_to_plan():
    """A model after ``torch.ao.quantization.quantize_dynamic`` holds its linears' weights packed in TorchScript
    objects, which ``torch.export`` does not trace: the refusal quoted torch's AttributeError about
    ``LinearPackedParamsBase`` lacking ``__obj_flatten__``, which names no module and no way on."""
    torch = pytest.importorskip("torch")
    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    with warnings.catch_warnings():   # quantized tensors are deprecated, and still what users have
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    with pytest.raises(InvalidParameterError) as error:
        import_torch(quantized, (torch.randn(2, 4),), platform=make_platform("h100", "epyc-7763", 2, 0))
    assert str(error.value) == ("model Sequential cannot be exported: its module '0' is a quantized Linear "
                                "(torch.ao.nn.quantized.dynamic), whose packed weights torch.export does not trace: "
                                "plan the floating-point model it was quantized from")


def test_a_value_without_gradient_read_by_two_later_stages_is_no_split_for_torchs_pipeline():
    """``k``, computed from a buffer alone, needs no gradient, and ``b``'s and ``c``'s stages both read it: torch's
    ``pipeline()`` marks every floating-point value a training stage sends as needing a gradient and refused this
    one at the first step (``PipeliningMetadataError: Backward of skip connections not supported yet``), as it did
    for the rotary tables of a Llama whose layers are on two stages. Read by one later stage, it runs."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(8))
            self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            k = self.scale * 2
            return self.c(self.b(self.a(x)) * k) * k

    torch.manual_seed(0)
    platform = make_platform("h100", "epyc-7763", 3, 0)
    imported = import_torch(Scaled(), (torch.randn(2, 8),), platform=platform, training=True, granularity="operator")
    instance = imported.instance
    assert [n["name"] for n in instance["nodes"][:6]] == ["mul", "linear", "linear_1", "mul_1", "linear_2", "mul_2"]
    assert instance["about"]["gradient_free_reads"] == [[0, 3, 5]]
    reason = ("'mul_1' in stage 1 and 'mul_2' in stage 2 read a floating-point value of 'mul' of stage 0, and "
              "torch's pipeline() sends such a value of a training stage to one stage only "
              "(placement.torch.plan_pipeline relays it)")
    lay, cut = _refused_in_three_stages(instance, reason)
    assert split_points(lay, cut([0, 1, 2, 3], [4, 5])) == ["c"]
    inference = import_torch(Scaled(), (torch.randn(2, 8),), platform=platform, granularity="operator").instance
    assert "gradient_free_reads" not in inference["about"]
    assert split_points(layout_from_instance(inference), plan([0, 1], [2, 3], [4, 5])) == ["b", "c"]


class _CountedName(str):
    """A module name that counts the prefix tests made on it."""

    tests = [0]

    def startswith(self, *args):
        self.tests[0] += 1
        return super().startswith(*args)


def test_block_stacks_test_each_module_name_a_bounded_number_of_times():
    # 400 blocks of three modules: the stack is found with a few prefix tests per module, not one per module
    # and block (1,200 x 400 of them)
    nodes = [LayoutNode(0, "embed", _CountedName("embed"), ("embed",), ("op0",))]
    for k in range(400):
        names = [_CountedName(f"h.{k}"), _CountedName(f"h.{k}.attn"), _CountedName(f"h.{k}.mlp")]
        nodes += [LayoutNode(len(nodes) + j, name, name, (name,), (f"op{len(nodes) + j}",))
                  for j, name in enumerate(names)]
    nodes.append(LayoutNode(len(nodes), "head", _CountedName("head"), ("head",), (f"op{len(nodes)}",)))
    lay = Layout(tuple(nodes), {})
    _CountedName.tests[0] = 0
    assert block_stacks(lay) == {"h": list(range(400))}
    assert _CountedName.tests[0] <= 4 * len(nodes)
    assert megatron_layout(lay, plan([node.id for node in nodes])) == "E" + "t" * 400 + "L"


def test_a_value_read_through_detach_and_by_the_next_stage_is_no_split_for_torchs_pipeline():
    """``h`` needs a gradient: ``b``, on the next stage, reads it so, and ``h.detach()``, two stages on, reads it
    without one. torch's ``pipeline()`` sends ``h`` to both stages and, as for every floating-point value a
    training stage sends to two stages, raised at the first step (``PipeliningMetadataError: Backward of skip
    connections not supported yet``); the detached read carries no gradient, so no skip connection was seen,
    and the split_spec and the pipe_split program were written. Read by one later stage, it runs."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Detached(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x):
            h = torch.relu(self.a(x))
            return self.c(torch.relu(self.b(h))), h.detach()

    torch.manual_seed(0)
    platform = make_platform("h100", "epyc-7763", 3, 0)
    instance = import_torch(Detached(), (torch.randn(2, 8),), platform=platform, training=True,
                            granularity="operator").instance
    assert [n["name"] for n in instance["nodes"][:6]] == ["linear", "relu", "linear_1", "relu_1", "linear_2",
                                                          "detach"]
    assert instance["about"]["gradient_free_reads"] == [[1, 2, 5]]
    reason = ("'linear_1' in stage 1 and 'detach' in stage 2 read a floating-point value of 'relu' of stage 0, and "
              "torch's pipeline() sends such a value of a training stage to one stage only "
              "(placement.torch.plan_pipeline relays it)")
    lay, cut = _refused_in_three_stages(instance, reason)
    assert split_points(lay, cut([0, 1, 2, 3], [4, 5])) == ["c"]


def test_a_value_laid_out_non_contiguous_that_crosses_a_stage_is_no_split_spec_but_a_pipe_split_program():
    """The output of a transpose (as an RNN's batch-first output, or a residual stream kept transposed) is not
    contiguous in memory: torch's pipeline runtime sends what a stage returns as it is, and gloo sends none
    (``RuntimeError: input tensor has to be contiguous`` at the first step). The split points of the model's
    own modules cannot change that, so no split_spec exists; the pipe_split program sends such a value
    contiguous (:func:`pipe_split_module`), so it exists. Cut where the values are contiguous, both exist."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Transposed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(6, 6), nn.Linear(8, 2)

        def forward(self, x):
            return self.c(self.b(self.a(x).transpose(1, 2)).transpose(1, 2))

    torch.manual_seed(0)
    platform = make_platform("h100", "epyc-7763", 3, 0)
    for training in (True, False):
        instance = import_torch(Transposed(), (torch.randn(2, 6, 8),), platform=platform, training=training,
                                granularity="operator").instance
        assert [n["name"] for n in instance["nodes"][:5]] == ["linear", "transpose", "linear_1", "transpose_1",
                                                              "linear_2"]
        assert instance["about"]["non_contiguous_reads"] == [[1, 2], [3, 4]]
        mates = {n["id"]: n["forward"] for n in instance["nodes"] if n["isBackwardNode"]}

        def cut(*groups):
            return plan(*([*g, *(b for b, f in mates.items() if f in g)] for g in groups))

        lay = layout_from_instance(instance)
        reason = ("'linear_1' in stage 1 reads a value of 'transpose' of stage 0 that is not contiguous in memory, "
                  "and torch's pipeline() sends a stage's values as they are, which gloo refuses (input tensor has "
                  "to be contiguous): call .contiguous() on it in the model, or hand the plan over as a pipe_split "
                  "program, which sends it contiguous")
        with pytest.raises(InvalidParameterError) as err:
            split_points(lay, cut([0, 1], [2, 3, 4]))
        assert str(err.value) == f"plan cannot be written as a split_spec: {reason}"
        assert pipe_split_ops(lay, cut([0, 1], [2, 3, 4])) == [["linear", "transpose"],
                                                               ["linear_1", "transpose_1", "linear_2"]]
        assert pipe_split_ops(lay, cut([0], [1, 2, 3, 4])) == [["linear"], ["transpose", "linear_1", "transpose_1",
                                                                            "linear_2"]]


def test_a_layer_that_returns_a_value_laid_out_non_contiguous_across_a_stage_is_no_deepspeed_part():
    """DeepSpeed's PipelineModule sends what a stage's last layer returns as it is (``p2p.send`` of its
    outputs) to a contiguous buffer of the next stage: gloo refuses it (``input tensor has to be
    contiguous``), NCCL sends its memory as it lies (a warning, then the elements out of order); the parts were
    written without a word for a stage whose last layer returns a transposed value. Cut where the value stays
    within a stage, they exist."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.costmodel.roofline import make_platform
    from placement.io.torch_export import import_torch

    class Swap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x).transpose(1, 2)

    torch.manual_seed(0)
    for training in (True, False):
        instance = import_torch(nn.Sequential(Swap(), nn.Linear(6, 2), nn.ReLU()), (torch.randn(2, 6, 8),),
                                platform=make_platform("h100", "epyc-7763", 2, 0), training=training).instance
        assert [n["name"] for n in instance["nodes"][:4]] == ["0.lin", "0", "1", "2"]
        assert instance["about"]["non_contiguous_reads"] == [[1, 2]]
        mates = {n["id"]: n["forward"] for n in instance["nodes"] if n["isBackwardNode"]}

        def cut(*groups):
            return plan(*([*g, *(b for b, f in mates.items() if f in g)] for g in groups))

        lay = layout_from_instance(instance)
        with pytest.raises(InvalidParameterError) as err:
            deepspeed_parts(lay, cut([0, 1], [2, 3]))
        assert str(err.value) == (
            "plan cannot be written as DeepSpeed parts: '1' in stage 1 reads a value of '0' of stage 0 that is not "
            "contiguous in memory, and DeepSpeed's PipelineModule sends a stage's values as they are to a "
            "contiguous buffer, which gloo refuses (input tensor has to be contiguous) and NCCL fills with the "
            "value's memory as it lies (its elements out of order): call .contiguous() on it in the model, or hand "
            "the plan over as a pipe_split program, which sends it contiguous")
        assert deepspeed_parts(lay, cut([0, 1, 2], [3])) == {"layers": ["0", "1", "2"], "parts": [0, 2, 3]}


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")   # torch's pipeline() copying its tree specs
def test_pipe_split_module_sends_a_value_laid_out_non_contiguous_contiguous():
    """The stage that makes a transposed value sends it contiguous, its dimensions in the order they lie in
    memory, and the stage that reads it permutes them back: the value crosses as gloo sends it, and the reading
    stage computes on the layout the program was traced with. Before, the program sent the transposed value as
    it was, and gloo refused it at the first step (input tensor has to be contiguous)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn
    from torch.distributed.pipelining import pipeline

    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import pipe_split_module
    from placement.io.torch_export import import_torch

    class Transposed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(6, 2)

        def forward(self, x):
            return self.b(self.a(x).transpose(1, 2))

    torch.manual_seed(0)
    model, x = Transposed(), torch.randn(2, 6, 8)
    imported = import_torch(model, (x,), platform=make_platform("h100", "epyc-7763", 2, 0), granularity="operator")
    lay = layout_from_instance(imported.instance)
    assert [node.name for node in lay.nodes] == ["linear", "transpose", "linear_1"]
    pipe = pipeline(pipe_split_module(imported.source, lay, plan([0, 1], [2])), mb_args=(x,))
    assert pipe.num_stages == 2
    sent = pipe.get_stage_module(0)(x)
    assert (tuple(sent.shape), sent.is_contiguous()) == ((2, 6, 8), True)
    assert torch.equal(sent, model.a(x).detach())   # transpose(1, 2) of it in the order of its memory
    assert torch.allclose(pipe.get_stage_module(1)(sent), model(x), atol=1e-6)


def _refused_in_three_stages(instance, reason):
    """The layout of a training ``instance`` of six forward operators and ``cut``, its plan of the forward groups
    given (each with its backward mates), after checking that both forms refuse the three stages ``[0, 1]``,
    ``[2, 3]``, ``[4, 5]`` for ``reason``."""
    mates = {n["id"]: n["forward"] for n in instance["nodes"] if n["isBackwardNode"]}

    def cut(*groups):
        return plan(*([*g, *(b for b, f in mates.items() if f in g)] for g in groups))

    lay = layout_from_instance(instance)
    for export, name in ((split_points, "a split_spec"), (pipe_split_ops, "a pipe_split program")):
        with pytest.raises(InvalidParameterError) as err:
            export(lay, cut([0, 1], [2, 3], [4, 5]))
        assert str(err.value) == f"plan cannot be written as {name}: {reason}"
    return lay, cut


def test_a_program_whose_state_the_graph_module_cannot_hold_is_refused_by_name():
    """``program.module()`` registers the program's state under the model's names on a GraphModule, which holds
    ``graph`` itself: torch failed on the first operator reading ``graph.weight`` ("references nonexistent
    attribute"); torch's ``pipeline()`` fails alike, so no pipe_split program helps."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from placement.costmodel.roofline import make_platform
    from placement.io.exporters import pipe_split_module
    from placement.io.module_names import GraphModuleNameWarning
    from placement.io.torch_export import import_torch

    model = torch.nn.Sequential()
    for name in ("first", "graph", "last"):
        model.add_module(name, torch.nn.Linear(4, 4))
    with pytest.warns(GraphModuleNameWarning) as caught:
        imported = import_torch(model, (torch.randn(2, 4),), platform=make_platform("h100", "epyc-7763", 2, 0))
    assert [str(w.message) for w in caught if w.category is GraphModuleNameWarning] == [
        "model has a submodule named 'graph', which torch.fx.GraphModule uses for an attribute of its own: torch "
        "cannot make a module of the exported program, so torch.distributed.pipelining.pipeline() (the split-spec "
        "and pipe-split forms) fails on it, and pipe_split_module refuses it; rename the submodule (the deepspeed "
        "and megatron forms are not affected)"]
    with pytest.raises(InvalidParameterError) as error:
        pipe_split_module(imported.source, layout_from_instance(imported.instance), plan([0], [1, 2]))
    assert (error.value.parameter, str(error.value)) == ("program", (
        "program has a submodule named 'graph', which torch.fx.GraphModule uses for an attribute of its own: torch "
        "cannot make a module of the exported program (ExportedProgram.module(), from which the stages and "
        "torch.distributed.pipelining.pipeline() are built); rename the submodule"))


def test_the_exporters_take_a_plan_as_placement_split_does_and_refuse_what_is_none_by_name():
    """A Result (docs/pytorch.md passes result.to_plan()), a plan document or a plan file name ended the exporters in
    an AttributeError ('Result' object has no attribute 'devices'), as did a layout or an instance that is none, and
    read_layout and read_plan of None in a TypeError."""
    from pathlib import Path

    import placement
    from placement.io.exporters import in_pipeline_order, read_layout, split_spec
    from placement.io.plans import read_plan

    gpt2 = str(Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json")
    lay, result = read_layout(gpt2), placement.solve(gpt2, cpus=0)
    expected = split_points(lay, result.to_plan())
    assert expected == ["transformer.h.4", "transformer.h.8", "transformer.ln_f"]
    for given in (result, result.plan, result.to_json()):
        assert split_points(lay, given) == expected and split_spec(lay, given).keys() == set(expected)
        assert in_pipeline_order(placement.load(gpt2), given) == (result.to_plan(), None)
    for call, message in [
            (lambda: split_points(None, result), "layout must be a Layout (read_layout reads one from an instance file "
                                                 "the model importers wrote), not NoneType"),
            (lambda: in_pipeline_order(gpt2, result), "problem must be an Instance (placement.load reads one from a "
                                                      "file), not str"),
            (lambda: layout_from_instance(gpt2), "data must be the decoded document of an instance file the model "
                                                 "importers wrote (read_layout reads the file), not str"),
            (lambda: read_layout(None), "path must be a file path (a str or os.PathLike), not NoneType"),
            (lambda: read_plan(None), "path must be a file path (a str or os.PathLike), not NoneType"),
            (lambda: split_points(lay, 3), "plan must be a Plan, a Result or its plan, a plan document (dict) or a "
                                           "plan file path, not int")]:
        with pytest.raises(InvalidParameterError) as error:
            call()
        assert str(error.value) == message
