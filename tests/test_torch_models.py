"""The bundled real-model instances (instances/models, written by instances/generate_models.py)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from placement.io.exporters import layout_from_instance, stages
from placement.io.tarnawski import read_instance
from placement.solution import Status
from placement.solvers.dp import solve_dp
from placement.verification.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "instances" / "models"
STEMS = [f"{m}-{k}" for m in ("bert-base", "gpt2", "resnet50", "vit-base") for k in ("inference", "training")]


def _generator(path: Path) -> str:
    return json.loads(path.read_text())["about"]["generator"]


def test_every_model_is_bundled_for_inference_and_training():
    imported = [p.stem for p in MODELS.glob("*.json") if _generator(p) == "placement.io.torch_export"]
    assert sorted(imported) == sorted(STEMS)


def test_the_other_bundled_models_are_what_their_generators_write():
    # the co-design's model files (operators with shapes) come from a function named in the file
    others = [p for p in MODELS.glob("*.json") if _generator(p) != "placement.io.torch_export"]
    assert [p.stem for p in others] == ["mlp-training"]
    for path in others:
        data = json.loads(path.read_text())
        module, _, function = data["about"]["generator"].rpartition(".")
        about = data["about"]
        generate = getattr(importlib.import_module(module), function)
        assert generate(about["widths"], about["batch"], training=about["training"]) == data


@pytest.mark.parametrize("stem", STEMS)
def test_bundled_instance_solves_with_the_dp_and_hands_off(stem):
    path = MODELS / f"{stem}.json"
    data = json.loads(path.read_text())
    about = data["about"]
    assert (about["accelerator"]["id"], about["cpu"]["id"], data["maxFPGAs"], data["maxCPUs"]) == (
        "h100", "epyc-7763", 4, 1)
    assert (about["granularity"], about["training"]) == ("module", stem.endswith("training"))
    assert about["unknown_operators"] == []
    problem = read_instance(path)
    forward = [n for n in problem.nodes if not n.backward]
    assert len(problem.nodes) == (2 if problem.is_training else 1) * len(forward)
    solution = solve_dp(problem)
    assert solution.status is Status.OPTIMAL
    evaluation = evaluate(problem, solution.plan, contiguity="stages")
    assert evaluation.valid and evaluation.max_load == solution.objective
    # every plan has stages for a runtime: each forward node once, backward nodes with their mates
    parts = stages(layout_from_instance(data), solution.plan)
    assert sorted(v for part in parts for v in part) == [n.id for n in forward]


def _generated(stem: str) -> str:
    """The text instances/generate_models.py writes for ``stem``."""
    spec = importlib.util.spec_from_file_location("generate_models", ROOT / "instances" / "generate_models.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own deprecation notices
        return generator.render(generator.instance(stem))


def test_bundled_resnet50_is_what_the_generator_writes():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    assert _generated("resnet50-inference") == (MODELS / "resnet50-inference.json").read_text()


def test_bundled_bert_base_inference_is_what_the_generator_writes_with_the_recorded_transformers():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (placement[models])")
    text = (MODELS / "bert-base-inference.json").read_text()
    recorded = json.loads(text)["about"]["versions"]["transformers"]
    if transformers.__version__ != recorded:
        pytest.skip(f"transformers {transformers.__version__} is installed; the file was written with {recorded}")
    assert _generated("bert-base-inference") == text


def _generator_module():
    spec = importlib.util.spec_from_file_location("generate_models", ROOT / "instances" / "generate_models.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    return generator


def test_the_generator_leaves_the_kept_files_unless_named_and_refuses_an_unknown_name_before_writing(capsys):
    # a run without names rewrote the files the README says are kept as an earlier importer wrote them
    generator = _generator_module()
    assert generator.to_write([]) == ["bert-base-inference", "gpt2-inference", "resnet50-inference",
                                      "resnet50-training"]
    assert generator.to_write(["vit-base-training"]) == ["vit-base-training"]
    # an unknown name (or --help, once taken for a name) ended the run after the names before it were written
    with pytest.raises(SystemExit) as ended:
        generator.main(["resnet50-inference", "bogus"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.endswith("error: unknown instance 'bogus'; known: " + ", ".join(STEMS) + "\n")


def test_the_generator_says_in_one_line_that_a_model_needs_transformers():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed: the generator would rewrite the bundled file")
    run = subprocess.run([sys.executable, str(ROOT / "instances" / "generate_models.py"), "bert-base-inference"],
                         capture_output=True, text=True, timeout=300)
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == "error: this model needs transformers: pip install 'placement[models]'\n"


def test_every_bundled_model_records_the_versions_that_wrote_it():
    # the pins of the torch and models extras; transformers builds BERT, GPT-2 and ViT only
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["models"] == ["torch==2.13.0", "transformers==5.24.0"]
    for stem in STEMS:
        versions = json.loads((MODELS / f"{stem}.json").read_text())["about"]["versions"]
        expected = {"torch": "2.13.0"}
        if not stem.startswith("resnet50"):
            expected["transformers"] = "5.24.0"
        assert versions == expected, stem


def test_the_milp_proves_the_dp_optimum_of_a_bundled_instance():
    pytest.importorskip("ortools", reason="the MILP needs OR-Tools (pip install 'placement[milp]')")
    from placement.solvers.milp import solve_milp

    # Times lie on a binary grid (placement.io.opgraph, "Units"): CP-SAT's integer model is exact.
    problem = read_instance(MODELS / "resnet50-inference.json")
    dp, milp = solve_dp(problem), solve_milp(problem, contiguity="stages", backend="cp-sat", time_limit=120)
    assert (dp.status, milp.status) == (Status.OPTIMAL, Status.OPTIMAL)
    assert milp.objective == dp.objective
