"""A run that fails before a verdict leaves reports that say so, never an earlier run's verdict (issue 13 item 5).

Before: after exit 3/4/6 the report dir kept the previous run's CONFORMANT conformance.json/html and got an
empty, green junit.xml (tests="0" errors="0"), so a nightly dashboard showed yesterday's pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, EXIT_NOT_INSTALLED, EXIT_USAGE
from gpu_conformance.report_format import load_json

REPO = Path(__file__).resolve().parents[1]
OLD = {"schema_version": "1", "run_id": "20261201-000000-old", "verdict": "CONFORMANT", "checks": [], "nodes": []}


def earlier_pass(report_dir: Path) -> None:
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "conformance.json").write_text(json.dumps(OLD))
    (report_dir / "conformance.html").write_text("<title>GPU conformance: CONFORMANT</title>")


def run(report_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           f"--report-dir={report_dir}"], cwd=REPO, capture_output=True, text=True, timeout=180,
                          check=False)


def assert_failed_run_reports(report_dir: Path, code: int, words: str) -> None:
    data = load_json(report_dir / "conformance.json")  # still a readable conformance.json (report diff works)
    assert data["verdict"] == "ERROR" and data["run_id"] != OLD["run_id"], data
    assert data["error"]["exit_code"] == code and words in data["error"]["message"], data
    page = (report_dir / "conformance.html").read_text()
    assert "CONFORMANT" not in page and "ERROR" in page and words in page
    suite = ET.parse(report_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("errors") == "1"
    assert words in suite.find("testcase/error").get("message")  # type: ignore[union-attr]
    # The earlier run's reports are kept, but apart.
    assert json.loads((report_dir / "previous-run" / "conformance.json").read_text()) == OLD


@pytest.mark.parametrize(("args", "code", "words"), [
    (("--cluster=current", "--kubeconfig=/nonexistent/kc"), EXIT_CLUSTER_ACCESS,
     "kubeconfig /nonexistent/kc not found"),
    (("--cluster=current", "--expect-driver=gpu"), EXIT_USAGE, "--expect-driver must be one of"),
])
def test_early_failure_replaces_the_earlier_verdict(tmp_path: Path, args: tuple[str, ...], code: int,
                                                     words: str) -> None:
    earlier_pass(tmp_path / "r")
    proc = run(tmp_path / "r", *args)
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert_failed_run_reports(tmp_path / "r", code, words)
    # A second failure keeps the last real verdict aside, not the first failure's record.
    run(tmp_path / "r", *args)
    assert json.loads((tmp_path / "r" / "previous-run" / "conformance.json").read_text()) == OLD


@pytest.mark.sim
def test_operator_not_installed_replaces_the_earlier_verdict(tmp_path: Path) -> None:
    from gpu_conformance.sim.controlplane.cluster import SimCluster

    earlier_pass(tmp_path / "r")
    with SimCluster() as bare:  # a cluster without the GPU Operator
        proc = run(tmp_path / "r", "--cluster=current", f"--kubeconfig={bare.kubeconfig}")
    assert proc.returncode == EXIT_NOT_INSTALLED, proc.stdout[-2000:]
    assert_failed_run_reports(tmp_path / "r", EXIT_NOT_INSTALLED, "is not installed")


def test_verdict_and_failed_run_write_the_same_report_files(tmp_path: Path) -> None:
    """One reporter table: a format added to it is written by both paths, and neither names a file itself."""
    from report_data import healthy_cluster

    from gpu_conformance.report.failed_run import write_failed_run
    from gpu_conformance.report.reporters import FILENAMES, REPORTERS, write_reports

    ok = write_reports(healthy_cluster(), tmp_path / "ok")
    failed = write_failed_run(tmp_path / "failed", run_id="r1", exit_code=EXIT_USAGE, message="bad option")
    assert set(ok) == set(failed) == {r.key for r in REPORTERS}
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == sorted(FILENAMES)
    assert sorted(p.name for p in (tmp_path / "failed").iterdir()) == sorted(FILENAMES)
    assert load_json(failed["json"])["verdict"] == "ERROR" and "bad option" in failed["html"].read_text()
    for source in ("session.py", "report/failed_run.py"):
        text = (REPO / "gpu_conformance" / source).read_text()
        assert '"conformance.html"' not in text and "HTML_NAME" not in text and "write_html" not in text, source
