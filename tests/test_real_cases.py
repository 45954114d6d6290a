"""Real cluster states from public issue threads, run through `pytest --cluster` against a real apiserver.

Each case (tests/real_cases/*.yaml, see real_case_loader) is written into one shared etcd+kube-apiserver
with nothing reconciling it, the real suite runs against it as a subprocess, and its conformance.json
must name the root cause the issue thread established, per GPU node. The healthy baseline of every
supported operator version runs through the same path first: it proves the harness itself writes a
cluster the suite passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import factory
import pytest
from real_case_apiserver import CaseWriter, LogServer
from real_case_loader import Case, ClusterState, NodeExpectation, build, case_files, load_case

from gpu_conformance.sim.controlplane.cluster import SimCluster

REPO = Path(__file__).resolve().parent.parent
# The releases the cases run at, oldest (no status conditions, no driver component label) to newest.
BASELINE_VERSIONS = ("v22.9.2", "v23.9.2", "v24.9.0", "v25.3.4", "v25.10.1", "v26.3.3", "v26.7.0")
RUN_TIMEOUT = 120


@pytest.fixture(scope="module")
def apiserver() -> Iterator[SimCluster]:
    with SimCluster(api_only=True) as sim:
        yield sim


@pytest.fixture(scope="module")
def writer(apiserver: SimCluster) -> Iterator[tuple[CaseWriter, Path]]:
    pki = apiserver.state_dir / "pki"
    logs = LogServer(pki / "admin.crt", pki / "admin.key").start()
    try:
        w = CaseWriter(apiserver.api_client(), logs)
        w.ensure_base()
        yield w, apiserver.kubeconfig
    finally:
        logs.stop()


@pytest.mark.sim
def test_api_only_control_plane_runs_nothing_that_reconciles(apiserver: SimCluster) -> None:
    """Only etcd and the apiserver: no controller could rewrite what a case writes."""
    procs = json.loads((apiserver.state_dir / "pids.json").read_text())["processes"]
    assert sorted(procs) == ["etcd", "kube-apiserver"]


def run_suite(writer: tuple[CaseWriter, Path], state: ClusterState, tmp_path: Path) -> dict[str, Any]:
    """Write the state, run the real suite against it read-only, return its conformance.json."""
    w, kubeconfig = writer
    w.write(state)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--cluster=current", "--kubeconfig", str(kubeconfig), "--no-probe",
             "--report-dir", str(tmp_path), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
             # Only conformance.json is read: skip the HTML and Allure reports.
             "-p", "no:html", "-p", "no:allure_pytest",
             str(REPO / "tests_conformance")],
            cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        w.reset()
    report = tmp_path / "conformance.json"
    assert report.is_file(), f"no conformance.json (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr}"
    return json.loads(report.read_text())


def judged(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in report["nodes"]}


def describe(report: dict[str, Any]) -> str:
    """Today's outcome in one block: what the assertion message shows and the notes table quotes."""
    lines = [f"verdict {report['verdict']}; cluster blocker: {report.get('cluster_blocker')}"]
    for name, n in judged(report).items():
        rc = n.get("root_cause")
        lines.append(f"  {name}: " + (f"{rc['layer']} ({rc['check']}): {rc['message']}" if rc else "no root cause"))
        # What the per-node checks found under the root cause: shows whether only the verdict hides it.
        for c in report["checks"]:
            for f in c["findings"]:
                if f["node"] == name and f["status"] == "fail" and (not rc or f["check_id"] != rc["check"]):
                    lines.append(f"    also {f['check_id']}: {f['message']}")
    return "\n".join(lines)


@pytest.mark.sim
@pytest.mark.parametrize("version", BASELINE_VERSIONS)
def test_healthy_baseline_passes(writer: tuple[CaseWriter, Path], tmp_path: Path, version: str) -> None:
    """The harness is right: a healthy cluster written this way has no root cause on any node."""
    report = run_suite(writer, ClusterState(factory.healthy_snapshot(version)), tmp_path)
    nodes = judged(report)
    assert sorted(nodes) == ["gpu-node-1", "gpu-node-2", "gpu-node-3"], describe(report)
    assert all(n["root_cause"] is None for n in nodes.values()), describe(report)
    assert report["cluster_blocker"] is None, describe(report)
    assert report["verdict"] != "NOT CONFORMANT", describe(report)


def case_params() -> list[Any]:
    """One parameter per case file; a case with known_miss is a strict xfail (it must still fail)."""
    out = []
    for path in case_files():
        miss = load_case(path).known_miss
        marks = [pytest.mark.xfail(strict=True, reason=f"known miss: {miss}")] if miss else []
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


@pytest.mark.sim
@pytest.mark.parametrize("path", case_params())
def test_real_case(writer: tuple[CaseWriter, Path], tmp_path: Path, path: Path) -> None:
    case = load_case(path)
    report = run_suite(writer, build(case), tmp_path)
    failures = check_expectations(case, report)
    assert not failures, f"{case.source}\n" + "\n".join(failures) + "\ntoday:\n" + describe(report)


def check_expectations(case: Case, report: dict[str, Any]) -> list[str]:
    """Every way the report differs from what the thread established (empty: it agrees)."""
    failures = []
    healthy_verdicts = {"CONFORMANT", "INCOMPLETE"}   # --no-probe: the probe layer is not run
    want, got = case.verdict, report["verdict"]
    if want != got and not (want in healthy_verdicts and got in healthy_verdicts):
        failures.append(f"verdict: expected {want}, got {got}")
    nodes = judged(report)
    for name, exp in case.nodes.items():
        failures.extend(f"{name}: {why}" for why in node_disagreement(exp, nodes.get(name), sorted(nodes)))
    return failures


def node_disagreement(exp: NodeExpectation, node: dict[str, Any] | None, judged_names: list[str]) -> list[str]:
    """How one node's report differs from what the thread established for it."""
    if not exp.judged:
        return [] if node is None else [f"must not be judged as a GPU node, but is ({node.get('root_cause')})"]
    if node is None:
        return [f"not judged as a GPU node (judged: {judged_names})"]
    rc = node.get("root_cause")
    if exp.layer == "none":
        return [] if rc is None else [f"expected no root cause, got {rc['layer']} ({rc['check']}): {rc['message']}"]
    if rc is None:
        return [f"expected root cause in {exp.layer}, got none"]
    out = []
    if rc["layer"] != exp.layer:
        out.append(f"expected layer {exp.layer}, got {rc['layer']} ({rc['check']}): {rc['message']}")
    missing = [s for s in exp.message_contains if s.lower() not in rc["message"].lower()]
    if missing:
        out.append(f"root cause message lacks {missing}: {rc['message']}")
    return out
