"""What the package promises is in it (issue 15 item 8): rbac.yaml, which error messages tell users to apply."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from gpu_conformance.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_every_package_data_entry_names_files_of_the_package() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    for package, patterns in pyproject["tool"]["setuptools"]["package-data"].items():
        root = REPO / package.replace(".", "/")
        for pattern in patterns:
            assert list(root.glob(pattern)), f"package-data {package}: {pattern!r} matches no file in {root}"


def test_rbac_yaml_is_shipped_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = resources.files("gpu_conformance").joinpath("rbac.yaml").read_text()
    assert shipped == (REPO / "rbac.yaml").read_text()
    assert main(["rbac"]) == 0
    assert capsys.readouterr().out == shipped
