"""``placement import`` and ``placement split`` on the command line."""

from __future__ import annotations

import json

import pytest

from placement.cli import main

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")

from torch import nn  # noqa: E402


def tiny_mlp():
    """Factory: Linear(4, 8) -> ReLU -> Linear(8, 2) on a 3x4 input (see test_torch_import for its numbers)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (torch.randn(3, 4),)


def chain():
    """Factory: four linear layers in a numbered list, with an embedding-like first and a head-like last layer."""
    torch.manual_seed(0)

    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(8, 64)
            self.layers = nn.Sequential(*(nn.Linear(64, 64) for _ in range(4)))
            self.head = nn.Linear(64, 8)

        def forward(self, x):
            return self.head(self.layers(self.embed(x)))

    return Chain(), (torch.randn(16, 8),), {}


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


def test_split_prints_every_format(tmp_path, capsys):
    instance, plan = tmp_path / "chain.json", tmp_path / "plan.json"
    # Weights: embed 2,304 B, each of the four layers 16,640 B, head 2,080 B (fp32). With 35,000 B per
    # accelerator no two intervals hold them all ({embed, 0, 1} alone is 35,584 B), three do.
    assert main(["import", "tests.test_torch_cli:chain", "--out", str(instance), "--accelerators", "3", "--cpus",
                 "0", "--memory", "35000"]) == 0
    assert main(["solve", str(instance), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    doc = json.loads(plan.read_text())
    groups = [d["nodes"] for d in doc["devices"]]
    assert sorted(v for g in groups for v in g) == list(range(6)) and len(groups) == 3
    names = ["embed", "layers.0", "layers.1", "layers.2", "layers.3", "head"]
    bounds = [0]
    for g in groups:
        assert g == list(range(bounds[-1], bounds[-1] + len(g)))  # a chain: stages are intervals
        bounds.append(bounds[-1] + len(g))

    assert main(["split", str(instance), str(plan)]) == 0
    spec = json.loads(capsys.readouterr().out)
    expected = [names[b] if names[b] != "layers.0" else "layers" for b in bounds[1:-1]]
    assert spec == {fqn: "BEGINNING" for fqn in expected}

    assert main(["split", str(instance), str(plan), "--format", "deepspeed"]) == 0
    assert json.loads(capsys.readouterr().out) == {"layers": names, "parts": bounds}

    out = tmp_path / "layout.txt"
    assert main(["split", str(instance), str(plan), "--format", "megatron", "--out", str(out)]) == 0
    layout = capsys.readouterr().out.strip()
    symbols = "E" + "tttt" + "L"
    assert layout == "|".join(symbols[a:b] for a, b in zip(bounds, bounds[1:]))
    assert out.read_text() == layout + "\n"

    assert main(["split", str(instance), str(plan), "--format", "stages"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["stage", "device", "#nodes", "first", "last"]
    assert [row.split()[1:] for row in table[1:]] == [
        ["accelerator", str(b - a), names[a], names[b - 1]] for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("argv, message", [
    (["import", "nonsense", "--out", "x.json"],
     "error: cannot read model 'nonsense': expected pkg.module:factory, file.py:factory or FILE.onnx"),
    (["import", "tests.no_such_module:f", "--out", "x.json"],
     "error: cannot import tests.no_such_module: ModuleNotFoundError: No module named 'tests.no_such_module'"),
    (["import", "tests.test_torch_cli:missing", "--out", "x.json"],
     "error: tests.test_torch_cli has no function 'missing'"),
    (["import", "tests.test_torch_cli:not_a_tuple", "--out", "x.json"],
     "error: tests.test_torch_cli:not_a_tuple() must return (model, args) or (model, args, kwargs), got Linear"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--devices", "tpu"],
     "error: --devices must name a device of the catalogue (a100, a100-40gb, epyc-7763, h100, v100), not 'tpu'"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--devices", "a100", "h100"],
     "error: --devices names 2 accelerators (a100, h100); give one"),
    (["import", "tests.test_torch_cli:tiny_mlp", "--out", "x.json", "--accelerators", "0", "--cpus", "0"],
     "error: --accelerators must be at least 1 when there are no CPUs: a platform needs at least one device"),
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


def test_split_refuses_instances_without_metadata(tmp_path, capsys):
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    plan = tmp_path / "plan.json"
    assert main(["solve", str(tiny), "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["split", str(tiny), str(plan)]) == 2
    assert capsys.readouterr().err == (f"error: {tiny}: node 1 has no module metadata; only instances made by "
                                       "the model importers can be exported\n")


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
