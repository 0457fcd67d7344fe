"""``verify`` on a Piper instance: the evaluator's verdict, the simulated batch and the communication ledger.

The ledger is checked by hand on a two-stage plan, and against the evaluator and the planner's own
figures on every plan of random instances (one and two device types) and of the published ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings

import placement
from placement.cli import main
from placement.errors import InvalidParameterError, InvalidPlanError
from placement.io.piper import TMPC, PiperEdge, PiperInstance, PiperNode
from placement.parallel.plan import ParallelPlan, ParallelStage
from placement.verification.parallel_ledger import parallel_ledger
from tests.strategies_parallel import piper_instances, typed_piper_instances

SHARED = Path(__file__).resolve().parents[2] / "shared" / "piper"


def two_nodes() -> PiperInstance:
    """0 → 1, 12 bytes over the edge, bandwidth 4, m = 4. Node 0: 6 s per sample, 20 bytes of weights;
    node 1: 2 s per sample at t = 1, and at t = 2 (1 s) with 2 bytes of resharding on its in-edge and
    node 0's t = 1 TMPC 0 on its out-edge."""
    n0 = PiperNode(0, "a", {1: (TMPC("x", 6.0, 20.0, 1.0, 0.0, {}, {1: 0.0}),)})
    n1 = PiperNode(1, "b", {1: (TMPC("x", 2.0, 0.0, 1.0, 0.0, {0: 0.0}, {}),),
                            2: (TMPC("x", 1.0, 0.0, 1.0, 0.0, {0: 2.0}, {}),)})
    return PiperInstance("two", 8, 100.0, 4.0, 4, (n0, n1), (PiperEdge(0, 1, 12.0),))


# Stage 0 = {0} with d = 2, t = 1; stage 1 = {1} with d = 1, t = 2 (4 devices).
# Stage 0: F out 12, E in 12; its TMPC's syncTimeBw[1] = 0; bytes per device per sample
#   2·(0 + 12)/2 = 12, plus the all-reduce 4·(2 − 1)/2·20 = 40 bytes per batch, 10 per sample: 22 bytes,
#   5.5 s over bandwidth 4; compute 6/2 = 3: time per sample 8.5.
# Stage 1: F in 12, E out 12, resharding 2·2 = 4 (syncTimeFw[0] = 2, forward and backward): 28 bytes,
#   7 s; compute 1: time per sample 8.
# Links: 0 → 1 carries 12 (activations), 1 → 0 carries 12 (errors).
PLAN = ParallelPlan((ParallelStage((0,), 2, 1, {0: "x"}), ParallelStage((1,), 1, 2, {1: "x"})), "1f1b")


def test_ledger_of_two_stages_by_hand():
    verified = placement.verify(two_nodes(), PLAN, ledger=True)
    assert verified.valid and verified.value == 8.5
    assert [s.time_per_sample for s in verified.report.stages] == [8.5, 8.0]
    first, second = verified.ledger.stages
    assert (first.activations_out, first.errors_in, first.resharding, first.gradients_per_batch,
            first.bytes_per_device, first.communication, first.compute) == (12.0, 12.0, 0.0, 40.0, 22.0, 5.5, 3.0)
    assert (second.activations_in, second.errors_out, second.resharding, second.bytes_per_device,
            second.communication, second.compute) == (12.0, 12.0, 4.0, 28.0, 7.0, 1.0)
    assert verified.ledger.links == {(0, 1): 12.0, (1, 0): 12.0} and verified.ledger.agrees
    # a charged time that differs is named
    off = parallel_ledger(two_nodes(), PLAN, [8.5, 8.25])
    assert off.disagreements == ("stage 1: the ledger's 8.0 (communication 7.0 + compute 1.0) against 8.25 charged",)


def test_a_node_listed_twice_is_named_once_with_every_stage_it_is_in():
    """A node listed twice in one stage read 'node 0 is in stages 0 and 0'; one listed in three stages had
    a violation for each stage after the first."""
    twice = ParallelPlan((ParallelStage((0, 0), 2, 1, {0: "x"}), ParallelStage((1,), 1, 2, {1: "x"})), "1f1b")
    assert placement.verify(two_nodes(), twice).violations == ("node 0 is placed 2 times (stages 0, 0)",)
    thrice = ParallelPlan((ParallelStage((0,), 1, 1, {0: "x"}), ParallelStage((0, 1), 1, 1, {0: "x", 1: "x"}),
                           ParallelStage((0,), 1, 1, {0: "x"})), "1f1b")
    assert placement.verify(two_nodes(), thrice).violations == ("node 0 is placed 3 times (stages 0, 1, 2)",)


def agrees_with_the_planner(inst: PiperInstance, schedule: str) -> None:
    result = placement.solve(inst, schedule=schedule)
    if result.plan is None:
        return
    verified = placement.verify(inst, json.loads(json.dumps(result.to_json())), ledger=True)
    assert verified.valid and verified.ledger.agrees, verified.ledger.disagreements
    assert verified.value == result.evaluation.value and verified.notes == ()
    if result.time_per_batch is not None:
        assert verified.time_per_batch == pytest.approx(result.time_per_batch, rel=1e-12)


@settings(max_examples=40)
@given(piper_instances())
def test_every_planned_plan_verifies_and_its_ledger_agrees(inst):
    for schedule in ("piper", "gpipe"):
        agrees_with_the_planner(inst, schedule)


@settings(max_examples=40)
@given(typed_piper_instances())
def test_every_planned_plan_on_device_types_verifies_and_its_ledger_agrees(inst):
    agrees_with_the_planner(inst, "1f1b")


@pytest.mark.parametrize("stem, options", [("bert32a100", {}),
                                           ("bert32a100", {"schedule": "interleaved", "devices": 8}),
                                           ("gnmt", {"devices": 4, "schedule": "gpipe"}), ("resnet", {"devices": 8})])
def test_published_plans_verify(stem, options):
    path = SHARED / f"{stem}.json"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    result = placement.solve(str(path), **options)
    verified = placement.verify(str(path), json.loads(json.dumps(result.to_json())), ledger=True)
    assert verified.valid and verified.ledger.agrees and verified.value == result.value
    assert verified.time_per_batch == pytest.approx(result.time_per_batch, rel=1e-12)


@pytest.mark.parametrize("value", [False, True])
def test_infer_from_colours_is_refused_on_a_piper_instance_whatever_its_value(value):
    """infer_from_colours defaulted to False and the Piper check refused it only when true, so
    infer_from_colours=False passed in silence; given, it is refused at either value, and left out the
    check runs."""
    with pytest.raises(InvalidParameterError) as raised:
        placement.verify(two_nodes(), PLAN, infer_from_colours=value)
    assert raised.value.parameter == "infer_from_colours"
    assert str(raised.value) == ("infer_from_colours does not apply to a Piper instance (its plan is checked on the "
                                 "devices and memory it records, with its own schedule)")
    assert placement.verify(two_nodes(), PLAN).valid


def test_the_text_lists_the_first_20_violations_of_an_invalid_plan_and_counts_the_rest(tmp_path, capsys):
    """As for every other plan (README, verify): a plan of one node on a chain of 30 misses 29, and the text
    listed all 29 where the other checks list 20; --json lists them all."""
    nodes = tuple(PiperNode(i, f"n{i}", {1: (TMPC("x", 1.0, 0.0, 1.0, 0.0, {i - 1: 0.0} if i else {},
                                                    {i + 1: 0.0} if i < 29 else {}),)}) for i in range(30))
    chain = PiperInstance("chain30", 8, 100.0, 4.0, 4, nodes, tuple(PiperEdge(i, i + 1, 1.0) for i in range(29)))
    path, plan = tmp_path / "chain30.json", tmp_path / "plan.json"
    path.write_text(json.dumps(chain.to_json()))
    plan.write_text(json.dumps({"schedule": "1f1b", "stages": [{"nodes": [0], "d": 1, "t": 1, "tmpcs": {"0": "x"}}]}))
    assert main(["verify", str(path), str(plan)]) == 1
    out = capsys.readouterr().out.splitlines()
    start = out.index("INVALID: 29 violations")
    assert out[start + 1:start + 22] == [f"  node {v} is in no stage" for v in range(1, 21)] + [
        "  ... and 9 more (the JSON report lists them all)"]
    assert main(["verify", str(path), str(plan), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["violations"] == [f"node {v} is in no stage" for v in range(1, 30)]


def test_the_text_names_the_memory_checked_on_exactly(tmp_path, capsys):
    """Nodes of 0.2 and 0.1 bytes on one device of 0.29999999999999: the stage needs 0.3 (as written), more than
    there is. The header said 'checked on 1 devices of 0.3 bytes', the bound that fits."""
    tmpcs = [{"id": "v", "timePerSample": 1, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": size,
              "syncTimeFw": {}, "syncTimeBw": {}} for size in (0.2, 0.1)]
    path, plan = tmp_path / "two.json", tmp_path / "plan.json"
    path.write_text(json.dumps({"maxDevices": 1, "maxMemoryPerDevice": 0.29999999999999, "bandwidth": 1,
                                "mbsInBatch": 1, "edges": [],
                                "nodes": [{"id": k, "TMPCs": {"1": [tmpc]}} for k, tmpc in enumerate(tmpcs)]}))
    plan.write_text(json.dumps({"stages": [{"nodes": [0, 1], "d": 1, "t": 1, "tmpcs": {"0": "v", "1": "v"}}]}))
    assert main(["verify", str(path), str(plan)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("instance two: checked on 1 device of 0.29999999999999 bytes, schedule piper, 1 micro-batch "
                      "per batch")
    assert "  stage 0 needs 0.3 bytes per device (y=1 micro-batches in flight), more than the 0.29999999999999 " \
           "available" in out


def test_a_claim_the_check_refutes_is_a_note_and_an_invalid_plan_fails(tmp_path, capsys):
    inst = two_nodes()
    path = tmp_path / "two.json"
    path.write_text(json.dumps(inst.to_json()))
    result = placement.solve(inst, schedule="1f1b")
    doc = json.loads(json.dumps(result.to_json()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**doc, "value": 1.0}))
    assert main(["verify", str(path), str(plan)]) == 0
    out = capsys.readouterr().out
    assert "valid: no violations" in out
    assert (f"note: the plan file claims value 1.0 (largest time per sample); the verified one is {result.value!r}"
            in out)
    assert "ledger: agrees" in out
    # node 0 has no TMPC at t = 2
    plan.write_text(json.dumps({"schedule": "1f1b", "stages": [
        {"nodes": [0, 1], "d": 4, "t": 2, "tmpcs": {"0": "x", "1": "x"}}]}))
    assert main(["verify", str(path), str(plan)]) == 1
    out = capsys.readouterr().out
    assert "INVALID: 1 violation\n  stage 0: node 0 has no TMPC for tensor-parallel degree t=2\n" in out
    with pytest.raises(InvalidParameterError) as raised:
        placement.verify(inst, PLAN, objective="throughput")
    assert str(raised.value) == ("objective does not apply to a Piper instance (its plan is checked on the devices "
                                 "and memory it records, with its own schedule)")
    assert main(["verify", str(path), str(plan), "--contiguity", "sets"]) == 2
    assert capsys.readouterr().err == ("error: --contiguity does not apply to a Piper instance (its plan is checked "
                                       "on the devices and memory it records, with its own schedule)\n")
    for flag in ("--inter-layer", "--no-inter-layer"):   # each named as given
        assert main(["verify", str(path), str(plan), flag]) == 2
        assert capsys.readouterr().err.startswith(f"error: {flag} does not apply to a Piper instance")
    plan.write_text(json.dumps({"format": "placement-parallel-plan/9", "stages": []}))
    with pytest.raises(InvalidPlanError) as caught:
        placement.verify(inst, str(plan))
    assert str(caught.value) == ("unknown plan format 'placement-parallel-plan/9' (a parallel plan is "
                                 "'placement-parallel-plan/1')")
    missing = tmp_path / "missing.json"
    for check in (placement.verify, placement.simulate):   # the file's name once, as the command says it
        with pytest.raises(InvalidPlanError) as caught:
            check(inst, str(missing))
        assert str(caught.value) == f"{missing}: no such file"


def test_json_output(tmp_path, capsys):
    inst = two_nodes()
    path = tmp_path / "two.json"
    path.write_text(json.dumps(inst.to_json()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schedule": "1f1b", **PLAN.to_json()}))
    assert main(["verify", str(path), str(plan), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] and doc["value"] == 8.5 and doc["ledger"]["agrees"]
    assert doc["ledger"]["links"] == [{"from": 0, "to": 1, "bytes_per_sample": 12.0},
                                      {"from": 1, "to": 0, "bytes_per_sample": 12.0}]
    assert [s["time_per_sample"] for s in doc["stages"]] == [8.5, 8.0]
    assert math.isfinite(doc["time_per_batch"])


def test_interleaved_plans_that_cannot_run_are_invalid(tmp_path, capsys):
    """An interleaved plan on an instance with deviceTypes (the interleaved evaluator read neither the type's
    memory nor its speed: 'valid', while the ledger disagreed on every stage), and a plan for the
    interleaved schedule with one chunk per group (evaluated as 1F1B: 'valid'). A plan file holding a JSON
    string was read as the path of another plan."""
    from dataclasses import replace

    from placement.io.piper import PiperDeviceType

    chain4 = PiperInstance("chain4", 4, 100.0, 1.0, 4, tuple(
        PiperNode(i, f"n{i}", {1: (TMPC("x", 1.0, 0.0, 1.0, 0.0, {i - 1: 0.0} if i else {},
                                    {i + 1: 0.0} if i < 3 else {}),)}) for i in range(4)),
        tuple(PiperEdge(i, i + 1, 0.0) for i in range(3)))
    stages = tuple(ParallelStage((i,), 1, 1, {i: "x"}) for i in range(4))
    interleaved = ParallelPlan(stages, "interleaved", 2)
    assert placement.verify(chain4, interleaved).valid
    typed = replace(chain4, device_types=(PiperDeviceType("slow", 4, 1.0, 0.5),))
    assert placement.verify(typed, interleaved).violations[0] == (
        "an interleaved plan runs on an instance without deviceTypes; this one has 'slow'")
    one_chunk = placement.verify(chain4, ParallelPlan(stages, "interleaved", 1))
    assert one_chunk.violations == ("the plan is for schedule 'interleaved' with chunks = 1; an interleaved plan "
                                    "runs at least 2 model chunks per device group",)
    path, plan = tmp_path / "chain4.json", tmp_path / "plan.json"
    path.write_text(json.dumps(chain4.to_json()))
    inner = tmp_path / "inner.json"
    inner.write_text(json.dumps(interleaved.to_json()))
    plan.write_text(json.dumps(str(inner)))
    for command in ("verify", "simulate"):
        assert main([command, str(path), str(plan)]) == 2
        assert capsys.readouterr().err == f"error: {plan}: a parallel plan must be a JSON object with a list 'stages'\n"


@pytest.mark.parametrize("fields, note", [
    ({"value": "x"}, "the plan file's 'value' is not a number: \"x\"; its claimed largest time per sample was "
                     "not checked"),
    ({"value": True}, "the plan file's 'value' is not a number: true; its claimed largest time per sample was "
                      "not checked"),
    ({"objective": "time-per-batch", "value": [1]}, "the plan file's 'value' is not a number: [1]; its claimed "
                                                    "time per batch was not checked"),
    ({"timePerBatch": {"a": 1}}, "the plan file's 'timePerBatch' is not a number: {\"a\": 1}; its claimed time "
                                 "per batch was not checked"),
    ({"objective": "latency"}, "the plan file's 'objective' names no objective ('throughput', 'time-per-batch'): "
                               "\"latency\"; its claimed value was not checked"),
])
def test_a_claim_the_check_cannot_read_is_a_note(tmp_path, capsys, fields, note):
    """A plan file whose value or time per batch is no number, or whose value is of no objective, was
    passed in silence (nothing compared, nothing said), where a plan of one device per stage says so."""
    inst = two_nodes()
    path = tmp_path / "two.json"
    path.write_text(json.dumps(inst.to_json()))
    doc = json.loads(json.dumps(placement.solve(inst, schedule="1f1b").to_json()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**doc, **fields}))
    assert main(["verify", str(path), str(plan)]) == 0
    assert f"note: {note}\n" in capsys.readouterr().out
    assert placement.verify(inst, {**doc, **fields}).notes == (note,)


def test_a_lower_bound_above_the_verified_value_is_a_note():
    """A parallel plan claiming a bound of 100 on a value the plan attains at 5.75 was read without a word, where a
    plan of one device per stage is noted for it."""
    inst = two_nodes()
    doc = json.loads(json.dumps(placement.solve(inst, schedule="1f1b").to_json()))
    assert (doc["value"], doc["bound"]) == (5.75, 5.75)
    assert placement.verify(inst, {**doc, "bound": 100}).notes == (
        "the plan file claims a lower bound of 100 (largest time per sample), above the verified value 5.75",)
    assert placement.verify(inst, {**doc, "bound": 5.0}).notes == ()
    # an infinite bound lies above every value too (a plan document given as a dict may hold one); NaN is none
    assert placement.verify(inst, {**doc, "bound": math.inf}).notes == (
        "the plan file claims a lower bound of inf (largest time per sample), above the verified value 5.75",)
    assert placement.verify(inst, {**doc, "bound": math.nan}).notes == ()


def test_a_stage_figure_the_check_refutes_is_a_note():
    # the 1f1b optimum of two_nodes is one stage of both nodes, d = 4: time per sample 5.75, memory 2 bytes
    # per device, 1 micro-batch in flight; claims other than these were read without a word
    inst = two_nodes()
    doc = json.loads(json.dumps(placement.solve(inst, schedule="1f1b").to_json()))
    assert [(s["timePerSample"], s["memory"], s["inFlight"]) for s in doc["stages"]] == [(5.75, 2.0, 1)]
    assert placement.verify(inst, doc).notes == ()
    lying = {**doc, "stages": [{**doc["stages"][0], "timePerSample": 3.0, "memory": 0.5, "inFlight": "one"}]}
    assert placement.verify(inst, lying).notes == (
        "the plan file claims stage 0 timePerSample 3.0 (time per sample); the verified one is 5.75",
        "the plan file claims stage 0 memory 0.5 (memory per device); the verified one is 2.0",
        "the plan file's stage 0 'inFlight' is not a number: \"one\"; its claimed micro-batches in flight was not "
        "checked")


def test_a_null_claim_is_a_claim_left_out():
    # null reads as missing, as in every file of the package: an objective of null is Piper's throughput
    inst = two_nodes()
    doc = json.loads(json.dumps(placement.solve(inst, schedule="1f1b").to_json()))
    assert placement.verify(inst, {**doc, "value": None, "timePerBatch": None}).notes == ()
    verified = placement.verify(inst, {**doc, "objective": None, "value": 1.0})
    assert verified.notes == (f"the plan file claims value 1.0 (largest time per sample); the verified one is "
                              f"{verified.value!r}",)


def test_the_stage_table_shows_the_nodes_and_degrees_as_checked(tmp_path, capsys):
    """A plan file that writes node 1 as 1.0 and the degrees as 2.0 and 1.0 is read as nodes 1 and degrees 2 and
    1, as every plan file is; the table showed them as written ('1.0', '2.0'), beside the stages it checked."""
    tmpc = {"id": "v", "timePerSample": 1, "parameterSize": 0, "memoryUsageA": 0, "memoryUsageB": 1,
            "syncTimeFw": {}, "syncTimeBw": {}}
    path, plan = tmp_path / "two.json", tmp_path / "plan.json"
    path.write_text(json.dumps({"maxDevices": 3, "maxMemoryPerDevice": 10, "bandwidth": 1, "mbsInBatch": 4,
                                "edges": [], "nodes": [{"id": k, "TMPCs": {"1": [tmpc]}} for k in (0, 1)]}))
    plan.write_text(json.dumps({"stages": [{"nodes": [0], "d": 1, "t": 1, "tmpcs": {"0": "v"}},
                                           {"nodes": [1.0], "d": 2.0, "t": 1.0, "tmpcs": {"1": "v"}}]}))
    assert main(["verify", str(path), str(plan)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:5] == ["stage  nodes  d  t  time/sample  memory  in flight",
                        "-----  -----  -  -  -----------  ------  ---------",
                        "    0  0      1  1            1       1          3",
                        "    1  1      2  1          0.5       1          1"]


def test_a_plan_made_for_another_instance_says_so():
    # The solve records the instance's name (its file's stem); verify notes a plan checked on another one, first,
    # whether the plan is valid there or not, and a record of no name, or the same one, gives no such note.
    from dataclasses import replace

    from tests.test_simulate_parallel import chain

    first, second = replace(chain([1.0, 2.0]), name="first"), replace(chain([1.0, 2.0]), name="second")
    document = json.loads(json.dumps(placement.solve(first, devices=2).to_json()))
    assert document["instance"] == "first"
    there = placement.verify(second, document)
    assert there.valid and there.notes == ("the plan was made for instance 'first', not 'second'",)
    assert placement.verify(first, document).notes == ()
    assert placement.verify(second, dict(document, instance="")).notes == ()
    longer = replace(chain([1.0, 2.0, 3.0]), name="longer")
    invalid = placement.verify(longer, document)
    assert not invalid.valid and invalid.notes == ("the plan was made for instance 'first', not 'longer'",)
    assert ParallelPlan.from_json(document) == placement.solve(first, devices=2).plan


def test_a_plan_of_devices_given_for_a_piper_instance_is_named_as_such():
    # A Result of an instance without data- and tensor-parallel stages, its plan (a tuple of its stages) or a Plan
    # is no plan of a Piper instance: verify and simulate name the parameter and what was given, not "tuple".
    chain4 = placement.solve("instances/tiny/chain4.json")
    given = ((chain4, "a Result"), (chain4.plan, "a Result's plan (its stages)"),
             (placement.Plan((placement.DeviceAssignment("accelerator", (1,)),)), "a Plan"), (5, "int"))
    for check in (placement.verify, placement.simulate):
        for plan, what in given:
            with pytest.raises(InvalidParameterError) as raised:
                check(two_nodes(), plan)
            assert raised.value.parameter == "plan"
            assert str(raised.value) == (
                "plan must be a plan of a Piper instance (a ParallelPlan, a ParallelResult, a plan document (dict) or "
                f"a plan file path), not {what}"
                + ("" if what == "int" else ": it places nodes on devices, as plans of instances without data- and "
                                            "tensor-parallel stages do"))


def test_a_plan_document_of_numpy_numbers_is_the_document_of_the_numbers_they_hold():
    """A plan document built in code with numpy numbers had its memory refused ('the plan's 'memory' must be a
    number of bytes, not int64') by verify and simulate, and its forwardShare by simulate."""
    import numpy as np

    from tests.test_simulate_parallel import chain

    inst = chain([1.0, 2.0])
    document = json.loads(json.dumps(placement.solve(inst, devices=2, schedule="1f1b").to_json()))
    typed = {**document, "devices": np.int64(document["devices"]), "memory": np.int64(document["memory"]),
             "forwardShare": np.float32(0.5)}
    check = placement.verify(inst, typed)
    assert (check.valid, check.memory, check.notes) == (True, document["memory"], ())
    run = placement.simulate(inst, typed)
    assert (run.forward_share, run.time_per_batch) == \
        (0.5, placement.simulate(inst, {**document, "forwardShare": 0.5}).time_per_batch)


def test_a_claim_in_numpy_s_numbers_is_written_as_the_number_it_holds():
    """A refuted claim of a plan document built with numpy numbers read 'claims value np.float32(1.0)'."""
    import numpy as np

    from tests.test_simulate_parallel import chain

    inst = chain([1.0, 2.0])
    document = json.loads(json.dumps(placement.solve(inst, devices=2, schedule="1f1b").to_json()))
    value = document["value"]
    notes = placement.verify(inst, {**document, "value": np.float32(1.0), "bound": np.int64(9)}).notes
    assert notes == (f"the plan file claims value 1.0 (largest time per sample); the verified one is {value!r}",
                     f"the plan file claims a lower bound of 9 (largest time per sample), above the verified value "
                     f"{value!r}")
