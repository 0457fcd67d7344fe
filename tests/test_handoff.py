"""``placement.split``: the library call behind ``placement split``, on the bundled GPT-2 small instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import placement
from placement.cli import main

GPT2 = str(Path(__file__).resolve().parents[1] / "instances" / "models" / "gpt2-inference.json")


def gpt2_ids() -> list[int]:
    with open(GPT2, encoding="utf-8") as f:
        return [node["id"] for node in json.load(f)["nodes"]]


def test_split_of_a_result_is_what_the_command_writes_for_its_plan_file(tmp_path, capsys):
    """The optimal plan on the 4 accelerators alone: the embedding and blocks 0-3, blocks 4-7, blocks 8-11, the
    head; the command, given the plan file, prints the same split and the same note on stderr."""
    result = placement.solve(GPT2, cpus=0)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(result.to_json()))
    for form, expected in (("megatron", "Etttt|tttt|tttt|L"),
                           ("split-spec", {"transformer.h.4": "BEGINNING", "transformer.h.8": "BEGINNING",
                                           "transformer.ln_f": "BEGINNING"})):
        done = placement.split(GPT2, result, format=form)
        assert (done.format, done.split, done.order, done.warnings) == (form, expected, None, ())
        assert done.notes == ("split on the devices the plan records it was solved with: cpus=0",)
        assert main(["split", GPT2, str(plan), "--format", form]) == 0
        captured = capsys.readouterr()
        assert captured.out == done.text + "\n"
        assert captured.err == "note: split on the devices the plan file records it was solved with: cpus=0\n"


def test_the_json_form_carries_the_notes_that_go_to_standard_error(tmp_path, capsys):
    """A plan file that lists the optimum's devices last first: the split and the two notes (the devices the plan
    records, its pipeline order) are in the JSON document, with --quiet too, as in Split.to_json."""
    document = placement.solve(GPT2, cpus=0).to_json()
    document = {key: value for key, value in document.items() if key not in ("fpgas", "cpus")}
    document["devices"] = document["devices"][::-1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(document))
    order_note = ("the plan lists its devices out of pipeline order; its stages are its devices 3, 2, 1, 0, in "
                  "that order")
    assert placement.split(GPT2, document, format="megatron").to_json() == {
        "format": "megatron", "split": "Etttt|tttt|tttt|L", "warnings": [], "order": [3, 2, 1, 0],
        "notes": ["split on the devices the plan records it was solved with: cpus=0", order_note]}
    assert main(["split", GPT2, str(plan), "--format", "megatron", "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert json.loads(captured.out) == {
        "format": "megatron", "split": "Etttt|tttt|tttt|L", "warnings": [], "order": [3, 2, 1, 0],
        "notes": ["split on the devices the plan file records it was solved with: cpus=0", order_note]}


def test_the_pipeline_order_names_the_devices_that_are_stages():
    """The optimum's four devices listed last first, with an empty device between the second and the
    third: the note and order counted the empty device as a stage ("devices 4, 3, 1, 0, 2" for four
    stages, mapping stage i to order[i] put every stage after the first on the wrong device). An empty
    device first, the others in order, is no other order at all."""
    document = placement.solve(GPT2, cpus=0).to_json()
    document = {key: value for key, value in document.items() if key not in ("fpgas", "cpus")}
    devices = document["devices"][::-1]
    empty = {"type": "accelerator", "nodes": []}
    shuffled = placement.split(GPT2, {**document, "devices": devices[:2] + [empty] + devices[2:]}, format="megatron")
    assert (shuffled.split, shuffled.order) == ("Etttt|tttt|tttt|L", (4, 3, 1, 0))
    assert shuffled.notes[-1] == ("the plan lists its devices out of pipeline order; its stages are its devices "
                                  "4, 3, 1, 0, in that order")
    first = placement.split(GPT2, {**document, "devices": [empty] + document["devices"]}, format="megatron")
    assert (first.split, first.order) == ("Etttt|tttt|tttt|L", None)
    assert not any("pipeline order" in note for note in first.notes)


def test_a_form_that_cannot_express_the_plan_names_one_that_can():
    """Stage 0 ends after transformer.drop (node 5), inside the call of module 'transformer': Megatron's layout
    and split_spec take that (block h.0 begins stage 1); DeepSpeed's layers are whole modules."""
    ids = gpt2_ids()
    plan = {"devices": [{"type": "accelerator", "nodes": ids[:6]}, {"type": "accelerator", "nodes": ids[6:]}]}
    assert placement.split(GPT2, plan, format="megatron").split == "E|ttttttttttttL"
    with pytest.raises(placement.InvalidParameterError) as caught:
        placement.split(GPT2, plan, format="deepspeed")
    assert (caught.value.parameter, caught.value.detail) == (
        "format", "deepspeed cannot express this plan: stage 0 holds 'transformer' but not the whole call of "
                  "transformer, the smallest module holding it, and a PipelineModule layer is a whole module; use "
                  "format='split-spec'")


def test_a_refused_form_says_the_plan_was_made_for_another_instance():
    """A plan of another model with as many nodes fits the instance; the form's reason may then be that."""
    ids = gpt2_ids()
    plan = {"instance": "other",
            "devices": [{"type": "accelerator", "nodes": ids[:6]}, {"type": "accelerator", "nodes": ids[6:]}]}
    assert placement.split(GPT2, plan, format="megatron").notes == (
        "the plan was made for instance 'other', not 'gpt2-inference'",)
    with pytest.raises(placement.InvalidParameterError) as caught:
        placement.split(GPT2, plan, format="deepspeed")
    assert (caught.value.parameter, caught.value.detail) == (
        "format", "deepspeed cannot express this plan: stage 0 holds 'transformer' but not the whole call of "
                  "transformer, the smallest module holding it, and a PipelineModule layer is a whole module; use "
                  "format='split-spec' (the plan was made for instance 'other', not 'gpt2-inference')")


def test_split_takes_instance_files_and_documents_only_and_checks_the_plan(tmp_path):
    with pytest.raises(placement.InvalidParameterError) as caught:
        placement.split(placement.load(GPT2), {"devices": []})
    assert str(caught.value) == ("instance must be an instance file or document written by the model importers (it "
                                 "records every node's modules), not Instance")
    with pytest.raises(placement.InvalidParameterError) as caught:
        placement.split(GPT2, {"devices": []}, format="gpipe")
    assert str(caught.value) == ("format must be one of 'split-spec', 'deepspeed', 'megatron', 'pipe-split', "
                                 "'stages', not 'gpipe'")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"instance": "other", "devices": [{"type": "tpu", "nodes": gpt2_ids()}]}))
    with pytest.raises(placement.InvalidPlanError) as refused:
        placement.split(GPT2, plan)
    assert str(refused.value) == (f"{plan}: the plan does not fit the instance: device 0: unknown device type 'tpu' "
                                  "(the plan file was made for instance 'other', not 'gpt2-inference')")
    with open(GPT2, encoding="utf-8") as f:
        document = json.load(f)   # an instance read from a document has no name to compare the plan's with
    with pytest.raises(placement.InvalidPlanError) as refused:
        placement.split(document, plan)
    assert str(refused.value) == f"{plan}: the plan does not fit the instance: device 0: unknown device type 'tpu'"


def test_the_readme_example_of_split_runs_as_written(capsys):
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "placement.split(" in b]
    exec(compile(block, "README.md", "exec"), {"__name__": "readme", "placement": placement})
    assert capsys.readouterr().out == "Etttt|tttt|tttt|L\n"


@pytest.mark.parametrize("overrides, unread", [("x", "'x'"), ({"cpus": -1}, "'cpus': -1"), ({"cpus": "none"},
                                                                                         "'cpus': 'none'")])
def test_a_plan_whose_device_overrides_cannot_be_read_is_refused_as_verify_refuses_it(tmp_path, capsys, overrides,
                                                                                      unread):
    """split read only the well-formed device overrides of a plan's record: a record holding none of them
    ("overrides": "x", {"cpus": -1}) was split on the instance's own devices without a word, where verify and
    simulate refuse the plan; split now refuses it as they do."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"overrides": overrides, "devices": [{"type": "accelerator", "nodes": gpt2_ids()}]}))
    expected = (f"{plan}: the plan's device overrides cannot be read: {unread} (accelerators and cpus are counts, "
                "memory a number of bytes, none negative)")
    for check in (placement.split, placement.verify):
        with pytest.raises(placement.InvalidPlanError) as refused:
            check(GPT2, plan)
        assert str(refused.value) == expected
    assert main(["split", GPT2, str(plan), "--quiet"]) == 2
    assert capsys.readouterr().err == f"error: {expected}\n"
