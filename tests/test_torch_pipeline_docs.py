"""The one-call example that opens docs/pytorch.md runs as the page says: ``torchrun --nproc-per-node 2``.

The first ``python`` block of the page is written to a file and launched with
``python -m torch.distributed.run --standalone --nproc-per-node 2``; the last rank prints the plan's
status, its stage count and the mean loss of the step, which must be the unsplit model's loss
on the same batch (the example's model and data, made with the example's seed).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
pytest.importorskip("torch.distributed.pipelining", reason="this torch has no torch.distributed.pipelining")

from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def first_python_block(path: Path) -> str:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)[0]


def test_the_one_call_example_trains_a_two_stage_pipeline(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(first_python_block(ROOT / "docs" / "pytorch.md"), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if "lo" in {name for _, name in socket.if_nameindex()}:
        env["GLOO_SOCKET_IFNAME"] = "lo"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("plan ")]
    # The example's model and batch, as the script makes them.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    with torch.no_grad():
        loss = float(nn.functional.mse_loss(model(x), y))
    assert lines == [f"plan optimal, 2 stages, loss {loss:.4f}"]
