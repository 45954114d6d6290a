"""The real-case files themselves: each follows the schema and builds a cluster (no apiserver needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_case_loader import CaseError, build, case_files, load_case

from gpu_conformance.cluster.snapshot import name_of

SOURCE_REPOS = ("NVIDIA/gpu-operator", "NVIDIA/nvidia-container-toolkit", "NVIDIA/k8s-device-plugin",
                "redhat-openshift-ecosystem/certified-operators")


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case_builds_and_names_its_nodes(path: Path) -> None:
    case = load_case(path)
    assert any(f"github.com/{repo}/" in case.source for repo in SOURCE_REPOS), case.source
    snap = build(case).snapshot
    names = {name_of(n) for n in snap.nodes}
    assert set(case.nodes) <= names, f"expectations name nodes the cluster does not have: {set(case.nodes) - names}"


def test_the_set_is_large_enough_and_has_healthy_cases() -> None:
    cases = [load_case(p) for p in case_files()]
    assert len(cases) >= 12
    healthy = [c for c in cases if c.verdict != "NOT CONFORMANT"]
    assert len(healthy) >= 2, [c.id for c in healthy]


def test_bad_case_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("source: https://example.com/x\ntitle: t\noperator_version: v1\nsummary: s\ncluster: {}\n"
                   "expect: {verdict: CONFORMANT, nodes: {n: {layer: none}}}\n")
    with pytest.raises(CaseError, match="bad.yaml: source must be a GitHub issue"):
        load_case(bad)
