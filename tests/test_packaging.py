"""What pyproject.toml declares agrees with the package: its version, and the data files it ships."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import placement
from placement.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_the_one_the_distribution_declares(capsys):
    declared = PROJECT["project"]["version"]
    assert placement.__version__ == declared
    try:
        main(["--version"])
    except SystemExit as stop:
        assert stop.code == 0
    assert capsys.readouterr().out == f"placement {declared}\n"


def test_every_data_file_of_the_package_is_declared_package_data():
    # A wheel holds a package's modules and only the data files package-data names: one left out loads
    # in a checkout and is missing from an installed copy (the device catalogue, the HyPar networks).
    globs = PROJECT["tool"]["setuptools"]["package-data"]
    data = [p for p in (ROOT / "placement").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert data, "the package has data files (costmodel/devices.json)"
    for path in data:
        relative = path.relative_to(ROOT)
        package = ".".join(relative.parent.parts)
        owners = [(name, patterns) for name, patterns in globs.items() if package.startswith(name)]
        inside = [str(relative.relative_to(Path(*name.split(".")))) for name, _ in owners]
        assert any(fnmatch.fnmatch(rest, pattern) for (_, patterns), rest in zip(owners, inside)
                   for pattern in patterns), f"{relative} is not in pyproject.toml's package-data"


def test_the_license_is_an_spdx_expression():
    # setuptools deprecates the table form ({text = ...}) and stops building it after 2027-02-18
    assert PROJECT["project"]["license"] == "MIT"
    assert any(req.startswith("setuptools>=") and int(req.split(">=")[1].split(".")[0]) >= 77
               for req in PROJECT["build-system"]["requires"])
