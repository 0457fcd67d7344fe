"""The examples of docs/api.md run as they are, in order, from the repository root."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_api_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = python_blocks(ROOT / "docs" / "api.md")
    assert len(blocks) >= 8
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/api.md", "exec"), namespace)
    printed = out.getvalue().splitlines()
    # What the page says the examples print.
    assert printed[0] == "optimal 7.5 [(1, 2), (3, 4)]"
    assert printed[1] == ("contiguity 'sets' is not solved by method 'dp' (it solves 'stages'; method 'milp' "
                          "solves every class)")


def test_hypar_page_examples_run(monkeypatch):
    # docs/hypar.md: the planners on VGG-A, then the ledger of BERT-Base training's optimal plan
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in python_blocks(ROOT / "docs" / "hypar.md"):
            exec(compile(block, "docs/hypar.md", "exec"), namespace)
    assert namespace["plan"].status == "optimal" and namespace["ledger"].agrees
    assert out.getvalue().splitlines()[-1] == "ledger agrees with the charged communication on every device"
