"""Hostile input for the co-design, Piper and split-backward surfaces of the command line: each
bad document or option must end with exit status 2 and one line ``error: ...`` on stderr —
never a traceback, never a plan — and a valid request that cannot be met with its documented
status (exit 1).

The surfaces:

* ``placement codesign``: model files, ``--grid`` files, ``--sweep`` specification files and the
  ``--out`` JSON Lines records they resume from, and the numeric options;
* ``placement solve`` on Piper instances (``--devices``, ``--memory``, ``--schedule``) and
  ``placement simulate PIPER PLAN`` with a hand-written or corrupted parallel plan;
* ``placement solve|verify|simulate --backward split`` and split plan files (``b_tasks``,
  ``w_tasks``).

Built like ``tests/test_fuzz.py`` (whose helpers it reuses): a fixed corpus of wrong values field
by field, then Hypothesis with every example found pinned.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings, strategies as st

from tests.test_fuzz import PIPER, RAW_TEXTS, changed, refused, removed, run, write

NAN, INF = math.nan, math.inf
ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "instances" / "models" / "mlp-training.json"
GRID = {"tensor_cores": [1, 2], "array_width": [64], "array_depth": [128], "vector_cores": [1],
        "vector_lanes": [128], "buffer_mb": [8]}
SPEC = {"models": [str(MODEL)], "chips": [1], "budgets": [[606.68, 130]], "baselines": ["fixed"]}
#: the split-backward training pair: f1 -> f2 -> b2 -> b1, f1 -> b1 (backward nodes 3 and 4)
TRAINING = ROOT / "instances" / "tiny" / "training-pair.json"
SPLIT_PLAN = {"format": "placement-plan/1", "devices": [
    {"type": "accelerator", "nodes": [1, 4], "b_tasks": [4], "w_tasks": [3]},
    {"type": "accelerator", "nodes": [2, 3], "b_tasks": [3], "w_tasks": [4]}]}
#: PIPER's two nodes on one stage of one device (each node has one TMPC, "vanilla", of degree 1)
PIPER_PLAN = {"schedule": "piper", "stages": [{"nodes": [1, 2], "d": 1, "t": 1,
                                                "tmpcs": {"1": "vanilla", "2": "vanilla"}}]}

NOT_NUMBERS = ["1", [], {}, True, None]
BAD_COUNTS = NOT_NUMBERS + [0, -1, 1.5, NAN, INF, 10**400]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-new")
    for name, doc in (("piper.json", PIPER), ("piper-plan.json", PIPER_PLAN), ("grid.json", GRID),
                      ("split-plan.json", SPLIT_PLAN), ("spec.json", SPEC)):
        write(root, name, doc)
    return root


def codesign(folder: Path, *extra: Any) -> list[Any]:
    return ["codesign", MODEL, "--chips", "2", "--power", "130", "--grid", folder / "grid.json", *extra]


def test_the_valid_documents_are_accepted(folder):
    assert run(codesign(folder, "--json"))[0] == 0
    assert run(["solve", folder / "piper.json", "--devices", "2", "--quiet"])[0] == 0
    assert run(["simulate", folder / "piper.json", folder / "piper-plan.json"])[0] == 0
    assert run(["verify", TRAINING, folder / "split-plan.json", "--backward", "split"])[0] == 0
    assert run(["simulate", TRAINING, folder / "split-plan.json"])[0] == 0


# ----- placement codesign -------------------------------------------------------------------------

GRID_SITES = [(("tensor_cores",), NOT_NUMBERS + [[], [0], [-1], [1.5], [NAN], [INF], [True], [2**21], [10**400],
                                                  ["1"], [1, 1], [[1]], 1]),
              (("buffer_mb",), NOT_NUMBERS + [[], [0], [-8], [NAN], [INF], [-INF], [1e300], [True], [8, 8.0]]),
              ((), [None, [], "x", 1, {}, {**GRID, "colour": [1]}])]


@pytest.mark.parametrize("path, value", [(p, v) for p, values in GRID_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_bad_grid_file(folder, path, value):
    grid = write(folder, "bad-grid.json", changed(GRID, path, value))
    refused(codesign(folder, "--grid", grid)[:-2] + ["--grid", grid])


@pytest.mark.parametrize("name", list(RAW_TEXTS))
def test_raw_grid_model_and_spec_texts(folder, name):
    bad = write(folder, "raw.json", RAW_TEXTS[name])
    refused(["codesign", MODEL, "--chips", "2", "--power", "130", "--grid", bad])
    refused(["codesign", bad, "--chips", "2", "--power", "130", "--grid", folder / "grid.json"])
    refused(["codesign", "--sweep", bad, "--out", folder / "never.jsonl"])
    assert not (folder / "never.jsonl").exists()


def _model() -> dict:
    return json.loads(MODEL.read_text(encoding="utf-8"))


OPERATOR = ("nodes", 0, "operators", 0)
MODEL_SITES = [
    (OPERATOR, [None, 1, "gemm", [], {}]),
    (OPERATOR + ("kind",), [None, 1, "conv", []]),
    (OPERATOR + ("m",), BAD_COUNTS + [2**41]),
    (OPERATOR + ("bytes",), ["1", [], True, -1, NAN, INF, 1e30]),
    (("nodes", 0, "operators"), [None, {}, "x", 1, [1]]),
    (("about", "link_bytes_per_s"), [0, -1, NAN, INF, "fast", True]),
]


@pytest.mark.parametrize("path, value", [(p, v) for p, values in MODEL_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_bad_model_file(folder, path, value):
    model = write(folder, "bad-model.json", changed(_model(), path, value))
    refused(["codesign", model, "--chips", "2", "--power", "130", "--grid", folder / "grid.json"])


def test_model_node_without_operators(folder):
    model = write(folder, "bad-model.json", removed(_model(), ("nodes", 3, "operators")))
    err = refused(["codesign", model, "--chips", "2", "--power", "130", "--grid", folder / "grid.json"])
    assert "node 3: has neither 'operators' nor 'flops' and 'bytes'" in err


BAD_POSITIVE = ["0", "-1", "nan", "inf", "-inf", "1e400", "x", "", "0x10"]
CODESIGN_OPTIONS = [("--chips", ["0", "-1", "1.5", "x", "", "nan", "1e3"]), ("--power", BAD_POSITIVE),
                    ("--area", BAD_POSITIVE), ("--max-ideals", ["0", "-5", "x"]),
                    ("--max-combinations", ["0", "nan"]), ("--objective", ["latency", ""]),
                    ("--baseline", ["best"])]


@pytest.mark.parametrize("option, value", [(o, v) for o, values in CODESIGN_OPTIONS for v in values])
def test_bad_codesign_option(folder, option, value):
    refused(codesign(folder, option, value))


def test_codesign_usage_errors(folder):
    assert refused(["codesign", "--chips", "2", "--power", "130"]) == \
        "error: codesign needs a model file (or --sweep SPEC)\n"
    assert refused(["codesign", MODEL, "--sweep", folder / "spec.json", "--out", folder / "o.jsonl"]) == \
        "error: give a model file or --sweep SPEC, not both\n"
    assert refused(["codesign", "--sweep", folder / "spec.json"]) == \
        "error: --sweep needs --out FILE (the records, resumed if present)\n"


def test_codesign_power_below_every_design_is_infeasible_not_an_error(folder):
    status, out, err = run(codesign(folder, "--json")[:-1] + ["--power", "1e-9", "--json"])
    assert (status, json.loads(out)["status"]) == (1, "infeasible"), err


SPEC_SITES = [
    ((), [None, [], "x", 1, {}, {**SPEC, "colour": 1}]),
    (("models",), [None, "m.json", [], {}, 1, [None], [1], [["m.json"]]]),
    (("chips",), [None, 2, [], [0], [-1], [1.5], [True], ["2"], [NAN], [10**400]]),
    (("budgets",), [None, [], [1], [[1]], [[1, 2, 3]], [[NAN, 1]], [[1, INF]], [[-1, 1]], [[1, 0]], [["a", 1]],
                    [[True, 1]], [{"area": 1}]]),
    (("grids",), [[], "g.json", [1], [{}], [True]]),
    (("objectives",), [[], ["latency"], [1]]),
    (("homogeneous",), [[], [1], ["yes"], [None]]),
    (("baselines",), [["best"], [1], None]),
    (("random_budget",), [0, -1, 1.5, "8", True, NAN, None, 10**400]),
    (("seed",), [-1, 1.5, "0", True, NAN, 10**400]),
]


@pytest.mark.parametrize("path, value", [(p, v) for p, values in SPEC_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_bad_sweep_spec(folder, path, value):
    spec = write(folder, "bad-spec.json", changed(SPEC, path, value))
    refused(["codesign", "--sweep", spec, "--out", folder / "never.jsonl"])
    assert not (folder / "never.jsonl").exists()


@pytest.mark.parametrize("key", ["models", "chips", "budgets"])
def test_sweep_spec_missing_key(folder, key):
    spec = write(folder, "bad-spec.json", removed(SPEC, (key,)))
    assert refused(["codesign", "--sweep", spec, "--out", folder / "never.jsonl"]).endswith(
        f"bad-spec.json: missing key {key!r}\n")


@pytest.mark.parametrize("where, value", [("models", "no-such-model.json"), ("grids", "no-such-grid.json")])
def test_sweep_spec_naming_missing_files(folder, where, value):
    spec = write(folder, "bad-spec.json", changed(SPEC, (where,), [value]))
    refused(["codesign", "--sweep", spec, "--out", folder / "never.jsonl"])
    assert not (folder / "never.jsonl").exists()


@pytest.mark.parametrize("text", ["{not json}\n", "[1, 2]\n", '{"id": 5}\n', "\n{\n", "null\n", '"id"\n',
                                  '{"id": "a"}\n' * 2 + "garbage\n"])
def test_corrupt_records_file(folder, text):
    out = write(folder, "records.jsonl", text)
    err = refused(["codesign", "--sweep", folder / "spec.json", "--out", out, "--workers", "1"])
    assert "records.jsonl: line " in err
    assert out.read_text(encoding="utf-8") == text  # nothing appended to a file that could not be read


def test_records_file_not_utf8(folder):
    out = write(folder, "records.jsonl", b'{"id": "\xff"}\n')
    refused(["codesign", "--sweep", folder / "spec.json", "--out", out, "--workers", "1"])


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5"])
def test_bad_workers(folder, value):
    refused(["codesign", "--sweep", folder / "spec.json", "--out", folder / "never.jsonl", "--workers", value])


@pytest.mark.parametrize("text", [b"[" * 100_000 + b"]" * 100_000 + b"\n", b'{"id": ' + b"9" * 5000 + b"}\n",
                                  b'{"id": "a"}\n' + b"[" * 100_000 + b"\n"])
def test_records_line_nested_too_deep_or_too_long(folder, text):
    out = write(folder, "records.jsonl", text)
    assert "records.jsonl: line " in refused(["codesign", "--sweep", folder / "spec.json", "--out", out])


def test_out_is_not_a_records_file_and_is_left_whole(folder):
    """A spec file given as --out by mistake (its last line without a newline) is refused, not cut."""
    text = json.dumps(SPEC, indent=1)
    out = write(folder, "mistaken.json", text)
    assert "mistaken.json: the file is a sweep specification, not sweep records" in refused(
        ["codesign", "--sweep", folder / "spec.json", "--out", out])
    assert out.read_text(encoding="utf-8") == text


def test_out_is_a_directory(folder):
    refused(["codesign", "--sweep", folder / "spec.json", "--out", folder])


# ----- placement solve / simulate on a Piper instance ---------------------------------------------

STAGE = ("stages", 0)
PIPER_PLAN_SITES = [
    ((), [None, [], "x", 1, {}, {"stages": {}}, {"stages": "x"}, {"stages": []}]),
    (("schedule",), [None, 1, [], {}, "zb", "PIPER"]),
    (("stages",), [None, {}, [1], [None], [[]]]),
    (STAGE, [None, [], "x", {}]),
    (STAGE + ("nodes",), [None, {}, "1", [1.5], ["1"], [True], [1], [1, 2, 99], [1, 1, 2], [2, 1, 2], []]),
    (STAGE + ("d",), BAD_COUNTS + [10**30]),
    (STAGE + ("t",), BAD_COUNTS + [2, 10**30]),
    (STAGE + ("tmpcs",), [None, [], "x", {"1": 1, "2": "vanilla"}, {"x": "vanilla"}, {"1": "nope", "2": "vanilla"},
                          {"1": "vanilla"}, {"1": "vanilla", "2": "vanilla", "99": "vanilla"},
                          {"1.5": "vanilla", "2": "vanilla"}]),
    (STAGE + ("deviceType",), [1, [], {}, True, None]),
]


@pytest.mark.parametrize("path, value", [(p, v) for p, values in PIPER_PLAN_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_bad_piper_plan(folder, path, value):
    plan = write(folder, "bad-plan.json", changed(PIPER_PLAN, path, value))
    refused(["simulate", folder / "piper.json", plan])


@pytest.mark.parametrize("key", ["stages", "d", "t"])
def test_piper_plan_missing_field(folder, key):
    doc = removed(PIPER_PLAN, ("stages",) if key == "stages" else STAGE + (key,))
    refused(["simulate", folder / "piper.json", write(folder, "bad-plan.json", doc)])


def test_piper_solve_output_is_a_plan_file(folder):
    """The fields a solve writes beside the plan's (status, timePerSample, ...) are not errors: its
    output simulates (here one stage replicated on all 4 devices)."""
    status, out, _ = run(["solve", folder / "piper.json", "--json", "--quiet"])
    document = json.loads(out)
    assert status == 0 and [(s["d"], s["t"]) for s in document["stages"]] == [(4, 1)]
    status, simulated, err = run(["simulate", folder / "piper.json", write(folder, "solved.json", out), "--json"])
    assert status == 0, err


def test_piper_plan_for_another_instance(folder):
    """A plan of the split training pair, or a Tarnawski plan, given with a Piper instance."""
    for plan in (folder / "split-plan.json", write(folder, "bad-plan.json", {"fpgas": [{"nodes": [1, 2]}]})):
        refused(["simulate", folder / "piper.json", plan])
    refused(["simulate", TRAINING, folder / "piper-plan.json"])


@pytest.mark.parametrize("name", list(RAW_TEXTS))
def test_raw_piper_plan(folder, name):
    refused(["simulate", folder / "piper.json", write(folder, "bad-plan.json", RAW_TEXTS[name])])


PIPER_OPTIONS = [("solve", "--devices", ["0", "-1", "x", "1.5", "nan", ""]),
                 ("solve", "--memory", ["-1", "nan", "inf", "x", "1e400", "1e308GiB"]),
                 ("solve", "--schedule", ["zb", ""]),
                 ("simulate", "--unit-scale", ["nan", "inf", "-inf", "-1", "0", "x", "1e400", "1e308"]),
                 ("simulate", "--forward-share", ["nan", "-0.5", "1.5", "x"]),
                 ("simulate", "--chunks", ["0", "-1", "x"]),
                 ("simulate", "--microbatches", ["0", "-1", "x"]),
                 ("simulate", "--allreduce", ["tree"])]


@pytest.mark.parametrize("command, option, value", [(c, o, v) for c, o, values in PIPER_OPTIONS for v in values])
def test_bad_piper_option(folder, command, option, value):
    argv = [command, folder / "piper.json"] + ([folder / "piper-plan.json"] if command == "simulate" else ["--quiet"])
    refused(argv + [option, value])


def test_piper_plan_on_too_few_devices_or_too_little_memory(folder):
    """Valid requests that cannot be met: solve reports infeasible (exit 1)."""
    status, out, err = run(["solve", folder / "piper.json", "--memory", "1", "--json", "--quiet"])
    assert (status, json.loads(out)["status"]) == (1, "infeasible"), err


# ----- split-backward plans: b_tasks and w_tasks --------------------------------------------------

DEVICE = ("devices", 0)
SPLIT_SITES = [
    (DEVICE + ("b_tasks",), [{}, 0, False, "", "4", 4, [4.5], ["4"], [True], [None], [[4]], [99], [1], [4, 4], [4, 3]]),
    (DEVICE + ("w_tasks",), [{}, 0, False, "", "3", [3.5], ["3"], [True], [99], [2], [3, 3], [3, 4]]),
    (DEVICE + ("nodes",), [[1], [1, 4, 99], [1, 4, 2]]),
]


@pytest.mark.parametrize("path, value", [(p, v) for p, values in SPLIT_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_bad_split_plan(folder, path, value):
    plan = write(folder, "bad-split.json", changed(SPLIT_PLAN, path, value))
    status, out, err = run(["verify", TRAINING, plan, "--backward", "split", "--json"])
    if status == 1:  # read, and found to break the rules: the verifier's documented answer
        assert not json.loads(out)["valid"] and json.loads(out)["violations"], (value, out)
        text = run(["verify", TRAINING, plan, "--backward", "split"])
        assert text[0] == 1 and "INVALID" in text[1] and text[2] == "", text
    else:
        refused(["verify", TRAINING, plan, "--backward", "split"])
    if status == 2:  # what verify could not read, simulate cannot either
        refused(["simulate", TRAINING, plan])


@pytest.mark.parametrize("value", [{}, 0, False, ""])
def test_empty_but_not_a_list_b_tasks_refused(folder, value):
    plan = write(folder, "bad-split.json", changed(SPLIT_PLAN, DEVICE + ("b_tasks",), value))
    assert "devices[0].b_tasks: must be an array of node ids" in refused(
        ["verify", TRAINING, plan, "--backward", "split"])


def test_absent_null_or_empty_task_lists_mean_the_layer_device(folder):
    """A backward node listed in no b_tasks runs B on its layer's device (docs/backward-split.md): on
    device 0 b_tasks [4] says just that, so [], null and no field give the same verdict and loads."""
    expected = run(["verify", TRAINING, folder / "split-plan.json", "--backward", "split", "--json"])
    assert expected[0] == 0
    for doc in (changed(SPLIT_PLAN, DEVICE + ("b_tasks",), []), changed(SPLIT_PLAN, DEVICE + ("b_tasks",), None),
                removed(SPLIT_PLAN, DEVICE + ("b_tasks",))):
        assert run(["verify", TRAINING, write(folder, "same.json", doc), "--backward", "split", "--json"]) == expected


def test_split_plan_on_an_instance_without_backward_nodes(folder):
    refused(["verify", ROOT / "instances" / "tiny" / "chain4.json", folder / "split-plan.json", "--backward", "split"])
    refused(["solve", ROOT / "instances" / "tiny" / "chain4.json", "--backward", "split", "--quiet"])


SPLIT_OPTIONS = [("--w-share", ["nan", "inf", "-0.1", "1.5", "x", ""]), ("--w-placement", ["near"]),
                 ("--backward", ["both", ""])]


@pytest.mark.parametrize("command", ["solve", "verify"])
@pytest.mark.parametrize("option, value", [(o, v) for o, values in SPLIT_OPTIONS for v in values])
def test_bad_split_option(folder, command, option, value):
    argv = [command, TRAINING] + ([folder / "split-plan.json"] if command == "verify" else ["--quiet"])
    refused(argv + ["--backward", "split", option, value] if option != "--backward" else argv + [option, value])


def test_split_options_without_backward_split(folder):
    refused(["solve", TRAINING, "--w-placement", "adjacent", "--quiet"])


@pytest.mark.parametrize("path, value", [(p, v) for p, values in SPLIT_SITES for v in values],
                         ids=lambda x: repr(x)[:30])
def test_simulate_bad_split_plan(folder, path, value):
    """simulate refuses what it cannot read (2) or reports the rules the plan breaks (1), never a trace."""
    plan = write(folder, "bad-split.json", changed(SPLIT_PLAN, path, value))
    status, _, err = run(["simulate", TRAINING, plan])
    assert status in (1, 2) and err.count("\n") <= 1 and "Traceback" not in err, (status, err)
    if status == 2:
        refused(["simulate", TRAINING, plan])


# ----- Hypothesis: any JSON value at any field -----------------------------------------------------

_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                   max_size=3), max_leaves=6)
_FIELDS = [("piper-plan", PIPER_PLAN, p) for p in [("schedule",), ("stages",), STAGE, STAGE + ("nodes",),
                                                     STAGE + ("nodes", 0), STAGE + ("d",), STAGE + ("t",),
                                                     STAGE + ("tmpcs",), STAGE + ("tmpcs", "1")]] + \
          [("grid", GRID, (key,)) for key in GRID] + [("grid", GRID, ("buffer_mb", 0))] + \
          [("spec", SPEC, (key,)) for key in SPEC] + [("spec", SPEC, ("budgets", 0, 1)), ("spec", SPEC, ("chips", 0))]


def _argv_for(kind: str, folder: Path, path: Path) -> list[Any]:
    if kind == "piper-plan":
        return ["simulate", folder / "piper.json", path]
    if kind == "grid":
        return ["codesign", MODEL, "--chips", "1", "--power", "130", "--grid", path]
    return ["codesign", "--sweep", path, "--out", folder / "random.jsonl", "--quiet", "--workers", "1"]


@settings(max_examples=150, deadline=None)
@given(site=st.sampled_from(_FIELDS), value=_values)
@example(site=("spec", SPEC, ("models",)), value=[None])
@example(site=_FIELDS[5], value=2)                        # t = 2: no TMPC of degree 2
@example(site=_FIELDS[1], value=[{"nodes": [1], "d": 1, "t": 1, "tmpcs": {"1": "vanilla"}}])  # node 2 nowhere
def test_random_value_at_a_field(folder, site, value):
    """Whatever replaces a field: the command refuses it (2) or, if it is a valid document still,
    runs it (0) or reports it infeasible (1) — and never prints a traceback."""
    kind, doc, path = site
    bad = write(folder, f"random-{kind}.json", changed(doc, path, value))
    status, _, err = run(_argv_for(kind, folder, bad))
    assert status in (0, 1, 2) and "Traceback" not in err, (status, err)
    if status == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not (folder / "random.jsonl").exists()
    (folder / "random.jsonl").unlink(missing_ok=True)  # a valid sweep ran: the next starts afresh


def test_huge_device_counts_are_solved_as_the_reachable_count(folder):
    """PIPER has 2 nodes, mbsInBatch 8 and only t = 1: no plan uses more than 2·8·1 = 16 devices, so
    10^12 devices (on the command line or as maxDevices) answer as 16 do, at once, and say 10^12."""
    def solve(path, *extra):
        status, out, err = run(["solve", path, "--json", "--quiet", *extra])
        assert status == 0, err
        return json.loads(out)

    reachable = solve(folder / "piper.json", "--devices", "16")
    for result in (solve(folder / "piper.json", "--devices", str(10**12)),
                   solve(write(folder, "huge.json", changed(PIPER, ("maxDevices",), 10**12)))):
        assert result["devices"] == 10**12
        assert (result["value"], result["stages"]) == (reachable["value"], reachable["stages"])


def test_too_many_microbatches_refused_before_simulating(folder):
    """One stage, 10^11 micro-batches: 2·10^11 tasks of 400 bytes each, far over the 2 GiB limit;
    2 GiB / 400 B / 2 tasks = 2,684,354 micro-batches fit."""
    err = refused(["simulate", folder / "piper.json", folder / "piper-plan.json", "--microbatches", str(10**11)])
    assert err == ("error: 100,000,000,000 micro-batches make 200,000,000,000 tasks, about 7.45e+04 GiB to "
                   "simulate, over the simulator's fixed limit of 2 GiB; at most 2,684,354 micro-batches fit\n")
    refused(["simulate", write(folder, "many.json", changed(PIPER, ("mbsInBatch",), 10**11)),
             folder / "piper-plan.json"])


@pytest.mark.parametrize("tasks, microbatches, room", [
    # 2 GiB / 400 B = 5,368,709.12 tasks: two micro-batches of 3,000,000 tasks make room for one
    (6_000_000, 2, "at most 1 micro-batch fits"),
    (6_000_000, 1, "not even 1 micro-batch fits"),
])
def test_the_task_limit_says_how_many_micro_batches_fit_in_english(tasks, microbatches, room):
    from placement.errors import LimitExceededError
    from placement.simulation.program import check_task_count

    with pytest.raises(LimitExceededError) as caught:
        check_task_count(tasks, microbatches)
    assert str(caught.value).endswith(f"over the simulator's fixed limit of 2 GiB; {room}"), str(caught.value)


@pytest.fixture(scope="module")
def records(folder) -> str:
    """The one record of SPEC's sweep (one configuration), as the sweep wrote it."""
    out = folder / "done.jsonl"
    assert run(["codesign", "--sweep", folder / "spec.json", "--out", out, "--workers", "1", "--quiet"])[0] == 0
    return out.read_text(encoding="utf-8")


_CONFIG = {"model": "m", "chips": 1, "area_mm2": 1, "power_w": 1}


@pytest.mark.parametrize("extra, field", [
    ({"config": 5, "throughput": 1.0}, "config"),
    ({"config": {"model": 1}, "throughput": "x", "designs": []}, "config.model"),
    ({"config": {**_CONFIG, "chips": "1"}, "throughput": 1.0, "designs": []}, "config.chips"),
    ({"config": _CONFIG, "throughput": "fast", "designs": []}, "throughput"),   # NaN: refused where it is read
    ({"config": _CONFIG, "throughput": 1.0, "area_mm2": 1, "tdp_w": "1", "designs": []}, "tdp_w"),
    ({"config": _CONFIG, "throughput": 1.0, "area_mm2": 1, "tdp_w": 1, "designs": [{"label": "x"}]}, "designs[0]"),
    # no grid holds these designs: 2^64 tensor cores and 1e308 lanes overflowed the plot's axes (OverflowError)
    *(({"config": _CONFIG, "throughput": 1.0, "area_mm2": 1, "tdp_w": 1, "designs": [{
        "label": "x", "tensor_cores": 1, "array_width": 8, "array_depth": 8, "vector_cores": 1, "vector_lanes": 8,
        "buffer_mb": 8, **wrong}]}, "designs[0]")
      for wrong in ({"tensor_cores": 2**64}, {"vector_lanes": 1e308}, {"array_width": 0.5}, {"buffer_mb": 2**21})),
])
def test_records_the_plots_cannot_read(folder, records, extra, field):
    pytest.importorskip("matplotlib")
    out = write(folder, "plotted.jsonl", records + json.dumps({"id": "zzz", "status": "optimal", **extra}) + "\n")
    err = refused(["codesign", "--sweep", folder / "spec.json", "--out", out, "--plots", folder / "plots", "--quiet"])
    assert err == f"error: --out record 'zzz' cannot be plotted: its field {field} is not what a sweep writes\n"


@pytest.mark.parametrize("extra, message", [
    (["--plots", "p"], "--plots: only with --sweep SPEC"),
    (["--out", "o.jsonl", "--workers", "2"], "--out, --workers: only with --sweep SPEC"),
])
def test_sweep_options_without_sweep_are_refused_not_ignored(folder, extra, message):
    assert refused(codesign(folder, *extra)) == f"error: {message}\n"
    assert not (Path("p").exists() or Path("o.jsonl").exists())


@pytest.mark.parametrize("extra, named", [(["--chips", "2"], "--chips"),
                                          (["--power", "1", "--grid", "g"], "--power, --grid"),
                                          (["--objective", "perf-per-watt"], "--objective"),
                                          (["--objective", "throughput"], "--objective"),   # the default, typed
                                          (["--chips", "2", "--objective", "throughput"], "--chips, --objective"),
                                          (["--homogeneous"], "--homogeneous")])
def test_single_run_options_with_sweep_are_refused_not_ignored(folder, extra, named):
    err = refused(["codesign", "--sweep", folder / "spec.json", "--out", folder / "never.jsonl", *extra])
    assert err == f"error: {named}: a sweep takes its settings from SPEC\n"
    assert not (folder / "never.jsonl").exists()


def test_the_limit_on_ideals_beside_a_sweep_is_refused_naming_its_key_in_spec(folder):
    # a sweep's DPs take their limit on ideals from SPEC's max_ideals, which the refusal names
    err = refused(["codesign", "--sweep", folder / "spec.json", "--out", folder / "never.jsonl", "--chips", "2",
                   "--max-ideals", "50"])
    assert err == ("error: --chips, --max-ideals: a sweep takes its settings from SPEC (the limit on ideals: its key "
                   "max_ideals)\n")
    assert not (folder / "never.jsonl").exists()
