"""``placement import`` and ``placement split`` on the command line."""

from __future__ import annotations

import json
import sys

import pytest

from placement.cli import main

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")

from torch import nn  # noqa: E402


def tiny_mlp():
    """Factory: Linear(4, 8) -> ReLU -> Linear(8, 2) on a 3x4 input (see test_torch_import for its numbers)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (torch.randn(3, 4),)


def tiny_mlp_no_kwargs():
    """Factory: :func:`tiny_mlp` with its keyword arguments given as None (none), as plan_pipeline takes them."""
    return (*tiny_mlp(), None)


def not_a_tuple():
    return nn.Linear(2, 2)


def test_import_writes_an_instance_that_solves(tmp_path, capsys):
    out = tmp_path / "mlp.json"
    code = main(["import", "tests.test_torch_cli:tiny_mlp", "--out", str(out), "--accelerators", "2", "--cpus", "1",
                 "--training", "--devices", "a100", "epyc-7763"])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"wrote {out}: 6 nodes (3 forward), 7 edges, 312 forward FLOPs; 2 x a100 ")
    assert captured.err == ""
    data = json.loads(out.read_text())
    assert (data["maxFPGAs"], data["maxCPUs"], data["maxSizePerFPGA"]) == (2, 1, 80 * 2**30)
    assert data["about"]["model"] == "tiny_mlp" and data["about"]["accelerator"]["id"] == "a100"
    assert [n["name"] for n in data["nodes"]] == ["0", "1", "2", "0.grad", "1.grad", "2.grad"]
    assert main(["solve", str(out), "--quiet"]) == 0
    assert "status      optimal" in capsys.readouterr().out
    again = tmp_path / "mlp-none.json"
    assert main(["import", "tests.test_torch_cli:tiny_mlp_no_kwargs", "--out", str(again), "--accelerators", "2",
                 "--cpus", "1", "--training", "--devices", "a100", "epyc-7763"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {again}: 6 nodes (3 forward), 7 edges, 312 forward FLOPs")
    assert [n["name"] for n in json.loads(again.read_text())["nodes"]] == [n["name"] for n in data["nodes"]]


def one_layer():
    """Factory: a single Linear(4, 2), one node and no edge."""
    return nn.Linear(4, 2).eval(), (torch.randn(3, 4),)


def test_import_counts_one_node_in_the_singular(tmp_path, capsys):
    # it read "1 nodes (1 forward), 0 edges"
    out = tmp_path / "one.json"
    assert main(["import", "tests.test_torch_cli:one_layer", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 1 node (1 forward), 0 edges, ")


def test_import_json_is_the_one_document_on_standard_output(tmp_path, capsys):
    """A model file that prints when imported and when its factory runs: with --json, what it prints goes
    to standard error, and standard output is the one JSON document."""
    model = tmp_path / "noisy.py"
    model.write_text("import torch\nprint('hello from module import')\n\n\ndef noisy():\n"
                     "    print('hello from factory')\n"
                     "    return torch.nn.Sequential(torch.nn.Linear(4, 2)), (torch.randn(3, 4),)\n")
    out = tmp_path / "noisy.json"
    assert main(["import", f"{model}:noisy", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["nodes"] == 1
    assert captured.err == "hello from module import\nhello from factory\n"


def test_an_instance_imported_onto_standard_output_is_all_it_holds(tmp_path):
    """`placement import MODEL --out /dev/stdout | placement solve -`: the summary line followed the instance on
    standard output, and so did what the model printed, and the solve refused the text after the document; the
    instance is now all standard output holds, the rest going to standard error."""
    import subprocess

    model = tmp_path / "noisy.py"
    model.write_text("import torch\nprint('hello from module import')\n\n\ndef noisy():\n"
                     "    print('hello from factory')\n"
                     "    return torch.nn.Sequential(torch.nn.Linear(4, 2)), (torch.randn(3, 4),)\n")
    done = subprocess.run([sys.executable, "-m", "placement", "import", f"{model}:noisy", "--out", "/dev/stdout"],
                          capture_output=True, text=True, check=False)
    assert (done.returncode, len(json.loads(done.stdout)["nodes"])) == (0, 1)
    assert done.stderr == ("hello from module import\nhello from factory\nwrote /dev/stdout: 1 node (1 forward), "
                           "0 edges, 48 forward FLOPs; 4 x h100 (8.58993e+10 bytes each), 0 x epyc-7763\n")
    solved = subprocess.run([sys.executable, "-m", "placement", "solve", "-", "--quiet", "--json"], input=done.stdout,
                            capture_output=True, text=True, check=False)
    assert (solved.returncode, json.loads(solved.stdout)["status"], solved.stderr) == (0, "optimal", "")

def write_plan(path, *groups, kinds=None):
    """A plan file with one device per group of node ids, accelerators unless ``kinds`` says otherwise."""
    kinds = kinds or ["accelerator"] * len(groups)
    path.write_text(json.dumps({"devices": [{"type": kind, "nodes": list(g)} for kind, g in zip(kinds, groups)]}))
    return str(path)


def test_import_offers_cpus_only_when_asked(tmp_path, capsys):
    out = tmp_path / "gpt.json"
    for extra, cpus in (([], 0), (["--devices", "h100", "epyc-7763"], 1), (["--cpus", "2"], 2)):
        assert main(["import", "tests.handoff_models:gpt", "--out", str(out), *extra]) == 0
        data = json.loads(out.read_text())
        assert (data["maxFPGAs"], data["maxCPUs"], data["about"]["cpu"]["id"]) == (4, cpus, "epyc-7763")
    assert capsys.readouterr().out.splitlines()[0].endswith("; 4 x h100 (8.58993e+10 bytes each), 0 x epyc-7763")


def test_split_prints_every_format(tmp_path, capsys):
    instance = tmp_path / "stack.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2"]) == 0
    # nodes: 0 embed | 1-3 blocks.0 (norm, ff, residual add) | 4-6 blocks.1 | 7 head; the plan splits between the blocks
    plan = write_plan(tmp_path / "plan.json", range(0, 4), range(4, 8))
    capsys.readouterr()
    assert main(["split", str(instance), plan]) == 0
    assert json.loads(capsys.readouterr().out) == {"blocks.1": "BEGINNING"}

    assert main(["split", str(instance), plan, "--format", "deepspeed"]) == 0
    assert json.loads(capsys.readouterr().out) == {"layers": ["embed", "blocks.0", "blocks.1", "head"],
                                                   "parts": [0, 2, 4]}
    out = tmp_path / "layout.txt"
    assert main(["split", str(instance), plan, "--format", "megatron", "--out", str(out)]) == 0
    assert capsys.readouterr().out == "Et|tL\n" and out.read_text() == "Et|tL\n"

    assert main(["split", str(instance), plan, "--format", "pipe-split", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"format": "pipe-split", "split": {"ops": [
        ["linear", "layer_norm", "linear_1", "add"], ["layer_norm_1", "linear_2", "add_1", "linear_3"]]},
        "notes": [], "warnings": [], "order": None}

    assert main(["split", str(instance), plan, "--format", "stages"]) == 0
    assert [row.split() for row in capsys.readouterr().out.splitlines()] == [
        ["stage", "device", "#forward", "nodes", "first", "last"], ["0", "accelerator", "4", "embed", "blocks.0"],
        ["1", "accelerator", "4", "blocks.1.norm", "head"]]
    assert main(["split", str(instance), plan, "--format", "stages", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["split"] == [
        {"stage": 0, "device": "accelerator", "forward_nodes": 4, "first": "embed", "last": "blocks.0"},
        {"stage": 1, "device": "accelerator", "forward_nodes": 4, "first": "blocks.1.norm", "last": "head"}]


def test_a_cpu_stage_at_an_end_is_a_stage_of_the_hand_off(tmp_path, capsys):
    """The GPT-like model at module depth 2 with a CPU: nodes 0-3 (the embeddings) on the CPU, then blocks h.0 and
    h.1 on two accelerators. Megatron's stages are GPUs: refused; split_spec makes the CPU's part stage 0, and
    says so (it read as the host's work outside the pipeline)."""
    instance, plan = tmp_path / "gpt.json", tmp_path / "plan.json"
    assert main(["import", "tests.handoff_models:gpt", "--out", str(instance), "--accelerators", "2", "--cpus", "1",
                 "--module-depth", "2", "--quiet"]) == 0
    plan.write_text(json.dumps({"devices": [{"type": "cpu", "nodes": [0, 1, 2, 3]},
                                            {"type": "accelerator", "nodes": [4]},
                                            {"type": "accelerator", "nodes": [5, 6, 7]}]}))
    capsys.readouterr()
    assert main(["split", str(instance), str(plan), "--format", "megatron"]) == 2
    assert capsys.readouterr().err == ("error: --format megatron cannot express this plan: stage 0 runs on a CPU, and every "
                                       "stage of a Megatron layout is a GPU's; use --format split-spec\n")
    assert main(["split", str(instance), str(plan)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"transformer.h.0": "BEGINNING", "transformer.h.1": "BEGINNING"}
    assert captured.err == ("note: stage 0 runs on a CPU: the hand-off makes it a pipeline stage like the others, "
                            "for a rank on the host\n")


def test_split_notes_a_plan_made_for_another_instance(tmp_path, capsys):
    """As verify and simulate do: the plan file names the instance it was solved for."""
    instance, other = tmp_path / "stack.json", tmp_path / "other.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2"]) == 0
    other.write_text(instance.read_text())
    assert main(["solve", str(other), "--quiet", "--out", str(tmp_path / "plan.json")]) == 0
    capsys.readouterr()
    assert main(["split", str(instance), str(tmp_path / "plan.json"), "--format", "stages"]) == 0
    assert "note: the plan file was made for instance 'other', not 'stack'\n" in capsys.readouterr().err


def test_blocks_as_whole_nodes_give_solved_plans_megatron_can_express(tmp_path, capsys):
    instance, plan = tmp_path / "gpt.json", tmp_path / "plan.json"
    # --module-depth 2 cuts module paths to transformer.h.N: each block is one node, so no optimal plan can
    # end a stage inside a block
    assert main(["import", "tests.handoff_models:gpt", "--out", str(instance), "--module-depth", "2",
                 "--accelerators", "2", "--training"]) == 0
    data = json.loads(instance.read_text())
    forward = [n["name"] for n in data["nodes"] if not n["isBackwardNode"]]
    assert forward == ["transformer.wte", "transformer", "transformer.wpe", "transformer#1", "transformer.h.0",
                       "transformer.h.1", "transformer.ln_f", "lm_head"]
    assert main(["solve", str(instance), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    stages = [d for d in json.loads(plan.read_text())["devices"] if d["nodes"]]
    assert main(["split", str(instance), str(plan), "--format", "megatron"]) == 0
    text = capsys.readouterr().out.strip()
    assert text.count("t") == 2 and len(text.split("|")) == len(stages)
    assert text.startswith("E") and text.endswith("L")


# gpt nodes: 0-3 embeddings (wte, arange, wpe, their sum), 4-11 block transformer.h.0 (4 ln_1, 5 attn, 6 residual
# add, 7 ln_2, 8-10 mlp.0 Linear, mlp.1 GELU, mlp.2 Linear, 11 residual add), 12-19 block transformer.h.1, 20 ln_f,
# 21 lm_head
@pytest.mark.parametrize("form, groups, kinds, message", [
    ("deepspeed", [range(0, 12), range(12, 22)], None,
     "deepspeed cannot express this plan: stage 0 holds 'transformer' but not the whole call of transformer, the "
     "smallest module holding it, and a PipelineModule layer is a whole module; use --format split-spec"),
    ("megatron", [range(0, 8), range(8, 22)], None,  # the MLP of h.0 begins stage 1: a split point
     "megatron cannot express this plan: stage 0 ends inside block transformer.h.0; use --format split-spec"),
    ("megatron", [range(0, 6), range(6, 22)], None,  # h.0's residual add begins stage 1: no module begins there
     "megatron cannot express this plan: stage 0 ends inside block transformer.h.0; use --format pipe-split"),
    ("split-spec", [range(0, 6), range(6, 22)], None,
     "split-spec cannot express this plan: stage 1 begins at 'transformer.h.0' (the operators of module "
     "'transformer.h.0' itself, which begins at 'transformer.h.0.ln_1'), which is not where a module called once "
     "begins; use --format pipe-split"),
    ("split-spec", [[1, 2], [0, *range(3, 22)]], None,  # arange and wpe first, then wte and the rest: a pipeline
     "split-spec cannot express this plan: it needs stages that are consecutive intervals of program order, and "
     "stage 0 lacks 'transformer.wte', which runs before its node 'transformer.wpe'; no hand-off format can "
     "(placement.torch.plan_pipeline runs a model cut at stages of any shape: docs/pytorch.md)"),
    # ... whose first stage does not read the token ids: torch's stage 1 would be called without them
    ("pipe-split", [[1, 2], [0, *range(3, 22)]], None,
     "pipe-split cannot express this plan: model input 'idx' is first read by 'transformer.wte' in stage 1, and "
     "torch's pipeline() passes the model's inputs to stage 0 only (placement.torch.plan_pipeline relays them); "
     "no hand-off format can (placement.torch.plan_pipeline runs a model cut at stages of any shape: "
     "docs/pytorch.md)"),
    ("pipe-split", [range(0, 4), range(4, 12), range(12, 22)], ["accelerator", "cpu", "accelerator"],
     "pipe-split cannot express this plan: stage 1 runs on a CPU between accelerator stages 0 and 2, and no "
     "pipeline runtime sends activations from an accelerator to a CPU and back; no hand-off format can (a runtime "
     "needs a pipeline with no CPU stage between accelerator stages; a placement solve with --cpus 0 plans on the "
     "accelerators alone)"),
    # ... and one that is no pipeline at all: the accelerator's nodes come before and after the CPU's
    ("pipe-split", [[*range(0, 4), *range(12, 22)], range(4, 12)], ["accelerator", "cpu"],
     "pipe-split cannot express this plan: it is no pipeline: 'transformer.h.1.ln_1' in stage 0 reads "
     "'transformer.h.0#1' of the later stage 1; no hand-off format can (a runtime needs a pipeline, as a placement "
     "solve with --contiguity stages plans, with no CPU stage between accelerator stages; a placement solve with "
     "--cpus 0 plans on the accelerators alone)"),
    ("megatron", [range(0, 4), range(4, 12), range(12, 22)], ["accelerator", "cpu", "accelerator"],
     "megatron cannot express this plan: stage 1 runs on a CPU between accelerator stages 0 and 2, and no "
     "pipeline runtime sends activations from an accelerator to a CPU and back; no hand-off format can (a runtime "
     "needs a pipeline with no CPU stage between accelerator stages; a placement solve with --cpus 0 plans on the "
     "accelerators alone)"),
])
def test_split_refuses_with_the_reason_and_names_a_format_that_can(tmp_path, capsys, form, groups, kinds, message):
    instance = tmp_path / "gpt.json"
    assert main(["import", "tests.handoff_models:gpt", "--out", str(instance), "--devices", "h100", "epyc-7763"]) == 0
    plan = write_plan(tmp_path / "plan.json", *groups, kinds=kinds)
    capsys.readouterr()
    assert main(["split", str(instance), plan, "--format", form]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: --format {message}\n")
    assert main(["split", str(instance), plan, "--format", "stages", "--quiet"]) == 0  # the table shows any plan
    assert len(capsys.readouterr().out.splitlines()) == 1 + len(groups)


def test_split_writes_a_plan_listed_out_of_pipeline_order_in_pipeline_order(tmp_path, capsys):
    """The GPT's blocks h.1 .. lm_head (12-21) listed first, the embeddings and h.0 (0-11) second: the same
    pipeline that verify and simulate accept. Its stages are written in pipeline order, as if listed so,
    with a note; a plan with no pipeline order is still refused for what reads backwards."""
    instance = tmp_path / "gpt.json"
    assert main(["import", "tests.handoff_models:gpt", "--out", str(instance)]) == 0
    ordered = write_plan(tmp_path / "ordered.json", range(0, 12), range(12, 22))
    reversed_ = write_plan(tmp_path / "reversed.json", range(12, 22), range(0, 12))
    capsys.readouterr()
    for form in ("split-spec", "pipe-split", "stages"):
        assert main(["split", str(instance), ordered, "--format", form, "--json"]) == 0
        expected = json.loads(capsys.readouterr().out)
        assert main(["split", str(instance), reversed_, "--format", form, "--json"]) == 0
        captured = capsys.readouterr()
        note = "the plan lists its devices out of pipeline order; its stages are its devices 1, 0, in that order"
        assert json.loads(captured.out) == {**expected, "notes": [note], "order": [1, 0]}   # the same split
        assert captured.err == f"note: {note}\n"
    crossed = write_plan(tmp_path / "crossed.json", [*range(0, 8), *range(12, 22)], range(8, 12))
    assert main(["split", str(instance), crossed, "--format", "split-spec"]) == 2
    assert "it is no pipeline" in capsys.readouterr().err


#: the hand-off forms run by torch's pipeline() or DeepSpeed, with the runtime's name as refusals give it
RUNTIME_FORMS = (("split-spec", "torch's pipeline()"), ("pipe-split", "torch's pipeline()"),
                 ("deepspeed", "DeepSpeed's PipelineModule"))


def assert_no_form_expresses(instance, plan, capsys, reason) -> None:
    """Every form of :data:`RUNTIME_FORMS` refuses ``plan`` of ``instance`` for ``reason(runtime)``, and says that
    no form can."""
    for form, runtime in RUNTIME_FORMS:
        assert main(["split", str(instance), plan, "--format", form]) == 2
        assert capsys.readouterr().err == (
            f"error: --format {form} cannot express this plan: {reason(runtime)}; no hand-off format can "
            "(placement.torch.plan_pipeline runs a model cut at stages of any shape: docs/pytorch.md)\n")


def test_split_refuses_a_model_input_that_stage_0_does_not_read(tmp_path, capsys):
    """torch's pipeline() (and DeepSpeed) give the model's inputs to stage 0 alone. Conditioned's nodes in
    program order: a, b, c (on x), cond_proj (on cond), the add. A plan whose stage 0 holds cond_proj
    with a is written; one whose stage 0 is a and b leaves cond to stage 1, where torch's stage was
    called without it (TypeError); an input nothing reads fails alike."""
    instance = tmp_path / "cond.json"
    assert main(["import", "tests.handoff_models:conditioned", "--out", str(instance)]) == 0
    data = json.loads(instance.read_text())
    assert data["about"]["inputs"] == ["x", "cond"]
    assert [(n["name"], n.get("inputs")) for n in data["nodes"]] == [
        ("a", ["x"]), ("b", None), ("c", None), ("cond_proj", ["cond"]), ("(model)", None)]
    capsys.readouterr()
    late = write_plan(tmp_path / "late.json", [0, 1], [2, 3, 4])
    assert_no_form_expresses(instance, late, capsys, lambda runtime: (
        f"model input 'cond' is first read by 'cond_proj' in stage 1, and {runtime} passes the model's inputs to "
        "stage 0 only (placement.torch.plan_pipeline relays them)"))
    early = write_plan(tmp_path / "early.json", [0, 3], [1, 2, 4])
    assert main(["split", str(instance), early, "--format", "pipe-split"]) == 0
    capsys.readouterr()
    # an instance that does not record the model's inputs (made before they were recorded) is not checked
    del data["about"]["inputs"]
    instance.write_text(json.dumps(data))
    assert main(["split", str(instance), late, "--format", "pipe-split"]) == 0
    capsys.readouterr()

    unused = tmp_path / "unused.json"
    assert main(["import", "tests.handoff_models:conditioned_unused", "--out", str(unused)]) == 0
    assert json.loads(unused.read_text())["about"]["inputs"] == ["x", "cond", "extra"]
    capsys.readouterr()
    assert main(["split", str(unused), early, "--format", "pipe-split"]) == 2
    assert capsys.readouterr().err == (
        "error: --format pipe-split cannot express this plan: model input 'extra' is read by no node, and torch's pipeline() "
        "passes the model's inputs to stage 0 only, which fails on one it does not take "
        "(placement.torch.plan_pipeline takes it); no hand-off format can (placement.torch.plan_pipeline runs a "
        "model cut at stages of any shape: docs/pytorch.md)\n")


def test_split_refuses_a_model_input_that_a_later_stage_reads_beside_stage_0(tmp_path, capsys):
    """ResidualInput's nodes: a (on x), b, the add of x. Cut after a, stage 1 reads x as well as stage 0:
    torch's pipeline() gives the model's inputs to stage 0 alone, and stage 1 raised
    ``PipeliningMetadataError: _retrieve_recv_activations expected non-root _RecvInfo but got root arg`` at
    the first step, where every form was written. One stage holding them all is written."""
    instance = tmp_path / "residual.json"
    assert main(["import", "tests.handoff_models:residual_input", "--out", str(instance)]) == 0
    data = json.loads(instance.read_text())
    assert [(n["name"], n.get("inputs")) for n in data["nodes"]] == [("a", ["x"]), ("b", None), ("(model)", ["x"])]
    capsys.readouterr()
    cut = write_plan(tmp_path / "cut.json", [0], [1, 2])
    assert_no_form_expresses(instance, cut, capsys, lambda runtime: (
        f"model input 'x' is read by '(model)' in stage 1 as well as in stage 0, and {runtime} passes the model's "
        "inputs to stage 0 only (placement.torch.plan_pipeline relays them)"))
    whole = write_plan(tmp_path / "whole.json", [0, 1, 2])
    assert main(["split", str(instance), whole, "--format", "pipe-split"]) == 0
    capsys.readouterr()


def test_split_refuses_a_model_output_that_an_earlier_stage_than_the_last_makes(tmp_path, capsys):
    """EarlyOutput's nodes: a (0), b (1), c (2); the model returns a's value and c's. torch's pipeline() (and
    DeepSpeed) return what the last stage returns: with a on stage 0, the step returned c's value alone."""
    instance = tmp_path / "early.json"
    assert main(["import", "tests.handoff_models:early_output", "--out", str(instance)]) == 0
    data = json.loads(instance.read_text())
    assert data["about"]["outputs"] == [0, 2]
    apart = write_plan(tmp_path / "apart.json", [0], [1, 2])
    capsys.readouterr()
    assert_no_form_expresses(instance, apart, capsys, lambda runtime: (
        f"the model returns the value of 'a', made in stage 0, and {runtime} returns what the last stage returns "
        "only (placement.torch.plan_pipeline relays it)"))
    assert main(["split", str(instance), write_plan(tmp_path / "one.json", [0, 1, 2]), "--format", "split-spec"]) == 0
    capsys.readouterr()
    # an instance that does not record the model's outputs (made before they were recorded) is not checked
    del data["about"]["outputs"]
    instance.write_text(json.dumps(data))
    assert main(["split", str(instance), apart, "--format", "split-spec"]) == 0


def test_split_refuses_a_model_that_returns_a_0_dimensional_value_for_torch(tmp_path, capsys):
    """ReturnsLoss returns a mean: the split went through, and torch's schedules failed over two micro-batches
    ("zero-dimensional tensor ... cannot be concatenated"), as plan_pipeline says. DeepSpeed's last stage hands
    its output to the loss function per micro-batch: not refused for this."""
    instance = tmp_path / "loss.json"
    assert main(["import", "tests.handoff_models:returns_loss", "--out", str(instance), "--granularity",
                 "operator"]) == 0
    data = json.loads(instance.read_text())
    last = data["about"]["outputs"]
    assert data["about"]["scalar_outputs"] == last and len(last) == 1
    name = next(n["name"] for n in data["nodes"] if n["id"] == last[0])
    plan = write_plan(tmp_path / "plan.json", [n["id"] for n in data["nodes"] if n["id"] != last[0]], last)
    capsys.readouterr()
    for form in ("split-spec", "pipe-split"):
        assert main(["split", str(instance), plan, "--format", form]) == 2
        # (no form can here: DeepSpeed refuses the operators outside modules of this operator-level import)
        assert capsys.readouterr().err.startswith(
            f"error: --format {form} cannot express this plan: the model returns a 0-dimensional value of "
            f"{name!r}, which torch's pipeline schedules cannot gather over micro-batches (they concatenate each "
            "output along its first dimension); return it with a first dimension (a loss as loss.unsqueeze(0)) "
            "and reduce it in the loss function; ")
    data["about"]["scalar_outputs"] = [True]
    instance.write_text(json.dumps(data))
    assert main(["split", str(instance), plan, "--format", "split-spec"]) == 2
    assert capsys.readouterr().err.endswith("field 'about.scalar_outputs' must be an array of forward node ids\n")


def test_split_refuses_a_model_that_returns_its_input_as_given(tmp_path, capsys):
    """ReturnsInput returns (b(a(x)), x): torch's pipeline() returns what its last stage computes, and x is no
    stage's result, so every form loses it, on one stage too (pipeline()'s stage 0 returns b's value alone)."""
    instance = tmp_path / "returns.json"
    assert main(["import", "tests.handoff_models:returns_input", "--out", str(instance)]) == 0
    data = json.loads(instance.read_text())
    assert (data["about"]["outputs"], data["about"]["returned_inputs"]) == ([1], ["x"])
    capsys.readouterr()
    for parts in (([0, 1],), ([0], [1])):
        plan = write_plan(tmp_path / f"plan{len(parts)}.json", *parts)
        assert_no_form_expresses(instance, plan, capsys, lambda runtime: (
            f"the model returns its input 'x' as given, and {runtime} returns what the last stage computes only "
            "(placement.torch.plan_pipeline relays it)"))
    data["about"]["returned_inputs"] = "x"
    instance.write_text(json.dumps(data))
    assert main(["split", str(instance), plan, "--format", "split-spec"]) == 2
    assert capsys.readouterr().err.endswith("field 'about.returned_inputs' must be an array of strings\n")



def test_split_names_the_entries_forward_never_calls(tmp_path, capsys):
    """SkippingStack's forward calls blocks.0 and blocks.2 of its four: the DeepSpeed note said the model runs
    blocks.1 between them, and the Megatron layout counted two blocks of four without a word. The import
    records the entries forward never calls; both forms name them as holding no stage's work."""
    instance = tmp_path / "skipping.json"
    assert main(["import", "tests.handoff_models:skipping_stack", "--out", str(instance), "--accelerators", "2"]) == 0
    data = json.loads(instance.read_text())
    assert data["about"]["uncalled_entries"] == ["blocks.1", "blocks.3"]
    plan = write_plan(tmp_path / "plan.json", range(0, 4), range(4, 8))   # embed, blocks.0 | blocks.2, head
    never = ("note: the model's forward did not call blocks.1 and blocks.3 in the run the export traced: they hold "
             "no stage's work, and ")
    capsys.readouterr()
    assert main(["split", str(instance), plan, "--format", "deepspeed"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"layers": ["embed", "blocks.0", "blocks.2", "head"], "parts": [0, 2, 4]}
    assert captured.err == never + "a PipelineModule of these layers does not run them either\n"
    assert main(["split", str(instance), plan, "--format", "megatron"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("Et|tL\n", never + "the layout leaves them out of its count of blocks: "
                                                               "it counts the 2 entries of blocks that the forward "
                                                               "calls\n")
    data["about"]["uncalled_entries"] = "blocks.1"
    instance.write_text(json.dumps(data))
    assert main(["split", str(instance), plan, "--format", "deepspeed"]) == 2
    assert capsys.readouterr().err.endswith("field 'about.uncalled_entries' must be an array of strings\n")

def test_deepspeed_refuses_a_layer_after_the_first_that_reads_a_model_input(tmp_path, capsys):
    """SecondInput's nodes: a (0), join (1, reads the model input cond), join.lin (2), head (3). Stage 0
    holding a and join reads every input there, as torch's pipeline() needs, but the PipelineModule's
    layers a, join, head pass each the one before's output, and join never got cond (a TypeError when
    the layers ran): refused, as split-spec, which hands the stage its inputs, is not."""
    instance = tmp_path / "second.json"
    assert main(["import", "tests.handoff_models:second_input", "--out", str(instance)]) == 0
    assert [n.get("inputs") for n in json.loads(instance.read_text())["nodes"]] == [["x"], ["cond"], None, None]
    plan = write_plan(tmp_path / "plan.json", [0, 1, 2], [3])
    capsys.readouterr()
    assert main(["split", str(instance), plan, "--format", "deepspeed"]) == 2
    assert capsys.readouterr().err == ("error: --format deepspeed cannot express this plan: layer join reads the model input "
                                       "'cond', and a PipelineModule passes the model's inputs to its first layer "
                                       "only; use --format split-spec\n")
    assert main(["split", str(instance), plan, "--format", "split-spec"]) == 0


def test_split_warns_of_a_trained_parameter_that_stages_share(tmp_path, capsys):
    """TiedLM's nodes: wte (0), body.0 (1), body.1 (2), body.2 (3), head (4), whose weight is wte's. A
    training plan with wte and head on different stages: torch's pipeline() gives both a copy and does not
    add their gradients (the copies drift apart; gradients were 88-103% off), so split says so on stderr.
    One stage holding both, or an inference instance, draws no warning."""
    instance = tmp_path / "lm.json"
    assert main(["import", "tests.handoff_models:tied_lm", "--out", str(instance), "--training"]) == 0
    # the tied tensor by its first name, as the stages and the ONNX import name it (export says head.weight)
    assert json.loads(instance.read_text())["about"]["shared_parameters"] == {"wte.weight": [0, 4]}
    apart = write_plan(tmp_path / "apart.json", [0, 1, 5, 6], [2, 3, 4, 7, 8, 9])
    together = write_plan(tmp_path / "together.json", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    capsys.readouterr()
    for form in ("split-spec", "pipe-split", "deepspeed"):
        assert main(["split", str(instance), apart, "--format", form]) == 0
        assert capsys.readouterr().err == (
            "warning: trained parameter 'wte.weight' is read by stages 0 and 1; the runtime gives each stage its "
            "own copy and does not add their gradients, so the copies drift apart in training "
            "(placement.torch.plan_pipeline adds them)\n")
    assert main(["split", str(instance), together, "--format", "pipe-split"]) == 0
    assert capsys.readouterr().err == ""
    inference = tmp_path / "lm-inference.json"
    assert main(["import", "tests.handoff_models:tied_lm", "--out", str(inference)]) == 0
    assert "shared_parameters" not in json.loads(inference.read_text())["about"]
    capsys.readouterr()
    assert main(["split", str(inference), write_plan(tmp_path / "i.json", [0, 1], [2, 3, 4]), "--format",
                 "pipe-split"]) == 0
    assert capsys.readouterr().err == ""


def test_a_model_file_imports_its_neighbours(tmp_path, monkeypatch, capsys):
    """``file.py:factory`` finds the modules beside the file, as ``python file.py`` would, from any
    current directory."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "layers.py").write_text("from torch import nn\n\ndef block():\n    return nn.Linear(4, 2)\n")
    (models / "net.py").write_text("import torch\nfrom layers import block\n\n"
                                   "def factory():\n    return block(), (torch.randn(3, 4),)\n")
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["import", str(models / "net.py") + ":factory", "--out", "net.json"]) == 0
    assert [n["name"] for n in json.loads((elsewhere / "net.json").read_text())["nodes"]] == ["(model)"]
    capsys.readouterr()


NOT_CALLABLE = 5


def exits():
    sys.exit(0)


def number_keyword():
    """Factory: :func:`tiny_mlp` with a keyword input whose key is no string."""
    return (*tiny_mlp(), {1: torch.randn(3, 4)})


def unknown_keyword():
    """Factory: :func:`tiny_mlp` with a keyword input its forward (``nn.Sequential``'s, of ``input``) has no
    parameter for."""
    return (*tiny_mlp(), {"mask": torch.randn(3, 4)})


class Scaled(nn.Module):
    """A linear whose output is multiplied by a number forward is given."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x, scale):
        return self.linear(x) * scale


def number_positional():
    """Factory: :class:`Scaled` given its number positionally, which pipeline stages refuse."""
    torch.manual_seed(0)
    return Scaled(), (torch.randn(3, 4), 0.5)


def not_a_module():
    return "model", (torch.randn(2, 2),)


def no_samples():
    return torch.nn.Linear(4, 2), (torch.ones(0, 4),)


@pytest.mark.parametrize("argv, message", [
    (["import", "nonsense", "--out", "x.json"],
     "error: cannot read model 'nonsense': expected pkg.module:factory, file.py:factory or FILE.onnx"),
    (["import", "tests.no_such_module:f", "--out", "x.json"],
     "error: cannot import tests.no_such_module: ModuleNotFoundError: No module named 'tests.no_such_module'"),
    (["import", "tests.test_torch_cli:missing", "--out", "x.json"],
     "error: tests.test_torch_cli has no function 'missing'"),
    (["import", "tests.test_torch_cli:NOT_CALLABLE", "--out", "x.json"],   # it has the name, bound to a number
     "error: tests.test_torch_cli: 'NOT_CALLABLE' is not a function (it is of type 'int')"),
    (["import", "tests.test_torch_cli:not_a_tuple", "--out", "x.json"],
     "error: tests.test_torch_cli:not_a_tuple() must return (model, args) or (model, args, kwargs), got Linear"),
    # the message blamed the factory ('tests.test_torch_cli:not_a_module must be a torch.nn.Module, not str')
    (["import", "tests.test_torch_cli:not_a_module", "--out", "x.json"],
     "error: tests.test_torch_cli:not_a_module() must return a torch.nn.Module as the model, got str"),
    # sys.exit(0) in a factory ended the import with status 0, nothing written and nothing said
    (["import", "tests.test_torch_cli:exits", "--out", "x.json"],
     "error: tests.test_torch_cli:exits() called sys.exit(0) instead of returning (model, args)"),
    # an example of no samples was costed as such: every node took its operators' overhead alone, and it solved
    (["import", "tests.test_torch_cli:no_samples", "--out", "x.json"],
     "error: tests.test_torch_cli:no_samples(): the example args must be one micro-batch of samples, but they hold "
     "no elements (shapes (0, 4))"),
    # the export's TypeError blamed the model ('M cannot be exported: torch.export raised TypeError: keywords
    # must be strings')
    (["import", "tests.test_torch_cli:number_keyword", "--out", "x.json"],
     "error: tests.test_torch_cli:number_keyword(): the example kwargs must map the names of forward's keyword "
     "parameters to inputs, but holds the key 1 (int)"),
    (["import", "tests.test_torch_cli:unknown_keyword", "--out", "x.json"],
     "error: tests.test_torch_cli:unknown_keyword(): the example kwargs holds the keyword 'mask', which "
     "Sequential.forward does not take (its keyword parameters: 'input')"),
    # a number given positionally was imported, and the split-spec and pipe-split forms printed for torch's
    # pipeline(), whose stages refuse it at the first step, as plan_pipeline refuses it
    (["import", "tests.test_torch_cli:number_positional", "--out", "x.json"],
     "error: tests.test_torch_cli:number_positional(): the example args must hold tensors only, but args[1] is a "
     "float: pipeline stages take tensors as positional inputs; pass it by keyword, in kwargs"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--devices", "tpu"],
     "error: --devices must name a device of the catalogue (a100, a100-40gb, epyc-7763, h100, v100), not 'tpu'"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--devices", "a100", "h100"],
     "error: --devices names 2 accelerators (a100, h100); give one"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--accelerators", "0", "--cpus", "0"],
     "error: --accelerators must be at least 1 when there are no CPUs: a platform needs at least one device"),
    # an empty name wrote the default one (from MODEL) into about.model, silently
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--name", ""],
     "error: argument --name: expected a model name, got ''"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--name", " "],
     "error: argument --name: expected a model name, got ' '"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--dim", "batch=2"],
     "error: --dim applies to ONNX models only"),
    (["import", "missing.onnx", "--out", "x.json"], "error: missing.onnx: no such file"),
])
def test_import_errors_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    if argv[1].endswith(".onnx"):
        pytest.importorskip("onnx", reason="onnx is not installed (pip install 'placement[onnx]')")
    assert main(argv) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["import", "model.pt", "--out", "x.json"],
     "error: cannot read model 'model.pt': expected pkg.module:factory, file.py:factory or FILE.onnx"),
    (["import", "nothere.py:build", "--out", "x.json"], "error: nothere.py: no such file"),
    (["import", "nothere.onnx", "--out", "x.json"], "error: nothere.onnx: no such file"),
])
def test_a_name_of_no_model_is_refused_before_the_extra_is_asked_for(tmp_path, monkeypatch, capsys, argv, message):
    """Without torch or onnx installed, a name that can never be a model was answered with "pip install
    'placement[torch]'" (several GB), and only once that was installed with what is wrong with the name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)   # `import torch` raises ImportError
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert main(argv) == 2
    assert capsys.readouterr().err == message + "\n"


def test_bundled_transformer_factories_name_the_extra_without_torch(monkeypatch):
    from placement.errors import SolverUnavailableError
    from placement.zoo import factories

    monkeypatch.setitem(sys.modules, "torch", None)
    for factory in (factories.bert_base, factories.gpt2, factories.vit_base, factories.resnet50):
        with pytest.raises(SolverUnavailableError, match=r"^importing PyTorch models needs torch: pip install "
                                                         r"'placement\[torch\]' \(torch==2.13.0\)$"):
            factory()


def test_split_refuses_a_plan_the_instance_cannot_run(tmp_path, capsys):
    """Three accelerator stages on an instance with two accelerators: the hand-off would need a device
    the instance does not have, so the split is refused with the evaluator's reason."""
    instance = tmp_path / "stack.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2"]) == 0
    plan = write_plan(tmp_path / "plan.json", range(0, 3), range(3, 6), range(6, 8))
    capsys.readouterr()
    assert main(["split", str(instance), plan]) == 2
    assert capsys.readouterr().err == (f"error: {plan}: the plan does not fit the instance: device type accelerator: "
                                       "3 devices used, but only 2 exist\n")


def test_a_stage_table_of_a_plan_no_runtime_can_run_says_so(tmp_path, capsys):
    """`--format stages` lists any plan, but one whose stages read a later stage is no pipeline: the
    table came with no word of it, where every hand-off format refuses the plan with that reason."""
    instance = tmp_path / "stack.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2"]) == 0
    # the embedding, blocks.1 and the head on one device, blocks.0 between them on the other: the
    # devices feed each other, in either order
    plan = write_plan(tmp_path / "plan.json", [0, 1, 6, 7], range(2, 6))
    capsys.readouterr()
    assert main(["split", str(instance), plan, "--format", "stages"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("note: the stages are the plan's devices in its order, but no pipeline runtime can run "
                            "them: it is no pipeline: 'blocks.1' in stage 0 reads 'blocks.0' of the later stage 1\n")
    assert captured.out.splitlines()[0].split() == ["stage", "device", "#forward", "nodes", "first", "last"]


def test_a_stage_table_put_in_pipeline_order_does_not_say_it_keeps_the_plans_order(tmp_path, capsys):
    """A plan listing a CPU stage last that runs between its accelerator stages: the table is in pipeline
    order, as the first note says, so the second must not say it keeps the plan's order."""
    instance = tmp_path / "stack.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2",
                 "--cpus", "1"]) == 0
    plan = write_plan(tmp_path / "plan.json", [0, 1], [6, 7], range(2, 6), kinds=["accelerator", "accelerator", "cpu"])
    capsys.readouterr()
    assert main(["split", str(instance), plan, "--format", "stages"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("note: the plan lists its devices out of pipeline order; its stages are its devices 0, 2, "
                            "1, in that order\n"
                            "note: the stages are in pipeline order, but no pipeline runtime can run them: stage 1 "
                            "runs on a CPU between accelerator stages 0 and 2, and no pipeline runtime sends "
                            "activations from an accelerator to a CPU and back\n")
    assert [line.split()[1] for line in captured.out.splitlines()[1:]] == ["accelerator", "cpu", "accelerator"]


def test_split_refuses_instances_without_metadata(tmp_path, capsys):
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    plan = tmp_path / "plan.json"
    assert main(["solve", str(tiny), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["split", str(tiny), str(plan)]) == 2
    assert capsys.readouterr().err == (f"error: {tiny}: node 1 has no module metadata; only instances made by "
                                       "the model importers can be exported\n")
    # read through a pipe, the instance went unnamed ('error: node 1 has no module metadata; ...')
    import subprocess

    done = subprocess.run([sys.executable, "-m", "placement", "split", "-", str(plan)], input=tiny.read_text(),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, "error: /dev/stdin: node 1 has no module metadata; only instances "
                                                 "made by the model importers can be exported\n")


def test_file_factories_and_unknown_operators_warn(tmp_path, capsys):
    source = tmp_path / "models.py"
    source.write_text(
        "import torch\n"
        "@torch.library.custom_op('placement_cli_test::odd', mutates_args=())\n"
        "def odd(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x + 1\n"
        "@odd.register_fake\n"
        "def _(x):\n"
        "    return torch.empty_like(x)\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return odd(x) * 2\n"
        "def make():\n"
        "    return M(), (torch.ones(2, 2),)\n")
    out = tmp_path / "m.json"
    assert main(["import", f"{source}:make", "--out", str(out), "--granularity", "operator"]) == 0
    assert capsys.readouterr().err == ("warning: make: no FLOP formula for 1 operator type(s), costed by bytes moved "
                                       "only: placement_cli_test::odd\n")
    data = json.loads(out.read_text())
    assert [n["name"] for n in data["nodes"]] == ["odd", "mul"]
    assert data["about"]["unknown_operators"] == ["placement_cli_test::odd"]


def test_split_places_the_nodes_a_plan_leaves_to_their_colour_class(tmp_path, capsys):
    """A training plan that lists the forward nodes only (as the published expert splits do): verify
    places each gradient with its layer, and split does the same, with a note, rather than refusing
    the plan for the nodes it does not list. The tiny MLP's gradients 3, 4, 5 are the mates of 0, 1, 2."""
    instance = tmp_path / "mlp.json"
    assert main(["import", "tests.test_torch_cli:tiny_mlp", "--out", str(instance), "--accelerators", "2",
                 "--training"]) == 0
    full = write_plan(tmp_path / "full.json", [0, 1, 3, 4], [2, 5])
    forward = write_plan(tmp_path / "forward.json", [0, 1], [2])
    capsys.readouterr()
    assert main(["split", str(instance), full, "--json"]) == 0
    expected = capsys.readouterr()
    assert main(["split", str(instance), forward, "--json"]) == 0
    captured = capsys.readouterr()
    note = "3 nodes the plan does not list go with their colour class, as verify places them"
    assert json.loads(captured.out) == {**json.loads(expected.out), "notes": [note]} and expected.err == ""
    assert captured.err == f"note: {note}\n"
    assert main(["split", str(instance), forward, "--json", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    one = write_plan(tmp_path / "one.json", [0, 1, 3, 4], [2])   # gradient 5 left to its layer's device
    assert main(["split", str(instance), one]) == 0
    assert capsys.readouterr().err == ("note: 1 node the plan does not list goes with its colour class, as verify "
                                       "places it\n")


def test_split_refuses_a_plan_that_moves_backward_tasks(tmp_path, capsys):
    """A split-backward plan may run a node's W (or B) task on another device than its layer's; the
    hand-off formats keep a layer's whole backward on its stage, so such a plan would not run as solved
    (it was handed off in silence, at the joint plan's value). A joint plan of the same stages splits."""
    instance = tmp_path / "stack.json"
    assert main(["import", "tests.handoff_models:residual_stack", "--out", str(instance), "--accelerators", "2",
                 "--training"]) == 0
    data = json.loads(instance.read_text())
    forward = [n["id"] for n in data["nodes"] if not n["isBackwardNode"]]
    mate = {n["colorClass"]: n["id"] for n in data["nodes"] if n["isBackwardNode"]}
    first = forward[:4] + [mate[v] for v in forward[:4]]
    second = forward[4:] + [mate[v] for v in forward[4:]]
    moved = mate[forward[5]]   # the backward node of a layer of device 1, its W task run on device 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": first, "w_tasks": [moved]},
                                            {"type": "accelerator", "nodes": second}]}))
    capsys.readouterr()
    refusal = (f"error: {plan}: the plan runs the W task of node {moved} on device 0, not on its node's device 1 (a "
               "split-backward plan, docs/backward-split.md); the hand-off forms keep a layer's whole backward on "
               "its stage, so the plan would not run as solved: hand off a plan solved with backward='joint'\n")
    assert main(["split", str(instance), str(plan)]) == 2
    assert capsys.readouterr().err == refusal
    # the same move in a plan that lists the forward nodes alone, whose backward nodes go with their colour
    # class (as verify places them): refused alike, where it was handed off in silence
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": forward[:4], "w_tasks": [moved]},
                                            {"type": "accelerator", "nodes": forward[4:]}]}))
    assert main(["split", str(instance), str(plan)]) == 2
    assert capsys.readouterr().err == refusal
    plan.write_text(json.dumps({"devices": [{"type": "accelerator", "nodes": first},
                                            {"type": "accelerator", "nodes": second}]}))
    assert main(["split", str(instance), str(plan)]) == 0


CALLS: list[str] = []


def counted_mlp():
    """:func:`tiny_mlp`, counting its calls."""
    CALLS.append("counted_mlp")
    return tiny_mlp()


def test_import_never_writes_over_its_inputs_and_checks_the_output_first(tmp_path, monkeypatch, capsys):
    """--out naming the factory's module file (pkg.module:factory form) or a --devices catalogue replaced it with
    the instance; a folder that does not exist was found only after the model was traced."""
    module = tmp_path / "models_to_keep.py"
    module.write_text("from tests.test_torch_cli import tiny_mlp as mlp\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "models_to_keep", raising=False)
    source = module.read_text()
    assert main(["import", "models_to_keep:mlp", "--out", "models_to_keep.py"]) == 2
    assert capsys.readouterr().err == ("error: models_to_keep.py: is also an input of the command, which writing "
                                       "would overwrite; choose another name\n")
    assert module.read_text() == source
    catalogue = tmp_path / "cat.json"
    catalogue.write_text("{}")
    CALLS.clear()
    assert main(["import", "tests.test_torch_cli:counted_mlp", "--devices", str(catalogue), "h100",
                 "--out", str(catalogue)]) == 2
    assert "is also an input of the command" in capsys.readouterr().err
    assert catalogue.read_text() == "{}"
    assert main(["import", "tests.test_torch_cli:counted_mlp", "--out", str(tmp_path / "no" / "x.json")]) == 2
    assert capsys.readouterr().err.endswith("x.json: cannot write: No such file or directory\n")
    assert CALLS == []     # neither run called the factory
    assert main(["import", "tests.test_torch_cli:counted_mlp", "--out", str(tmp_path / "x.json")]) == 0
    assert CALLS == ["counted_mlp"]   # the count is seen here: the checks above ran before any call


def test_module_depth_without_module_granularity_names_both_options(tmp_path, capsys):
    """The refusal named the library's granularity 'module' where the command's user typed --granularity."""
    assert main(["import", "tests.handoff_models:gpt", "--out", str(tmp_path / "gpt.json"), "--granularity",
                 "operator", "--module-depth", "1"]) == 2
    assert capsys.readouterr().err == "error: --module-depth applies to --granularity module only, not 'operator'\n"


def test_options_that_cannot_group_are_refused_before_the_model_is_built(tmp_path, capsys):
    # the clash was found after the factory ran and torch.export traced the model (4 s on a small model)
    CALLS.clear()
    assert main(["import", "tests.test_torch_cli:counted_mlp", "--out", str(tmp_path / "x.json"), "--granularity",
                 "operator", "--module-depth", "2"]) == 2
    assert capsys.readouterr().err == "error: --module-depth applies to --granularity module only, not 'operator'\n"
    assert CALLS == []
    from placement.errors import InvalidParameterError
    from placement.io.torch_export import import_torch
    from placement.costmodel.roofline import make_platform

    class Untraceable(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("traced")

    with pytest.raises(InvalidParameterError, match="^module_depth applies to granularity='module' only"):
        import_torch(Untraceable(), (torch.randn(2),), platform=make_platform(), granularity="operator",
                     module_depth=1)
