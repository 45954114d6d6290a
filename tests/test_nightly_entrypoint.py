"""deploy/nightly-entrypoint.sh: a folder per night, the newest earlier real verdict as --baseline, pruning.

The run itself is a stand-in command here (it records its arguments and writes a conformance.json); the real
suite behind the same script is exercised in tests/test_nightly_regression.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_data import driver_failure_cluster, healthy_cluster

from gpu_conformance.report.json_report import write_json

REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = REPO / "deploy" / "nightly-entrypoint.sh"
STAMP = "20261202T023000Z"
NIGHT = re.compile(r"^\d{8}T\d{6}Z(-\d+)?$")

FAKE_RUN = """
import json, os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
out = Path(next(a.split("=", 1)[1] for a in args if a.startswith("--report-dir=")))
(out / "argv.json").write_text(json.dumps(args))
shutil.copyfile(os.environ["FAKE_REPORT"], out / "conformance.json")
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A fixed clock: the night's folder name is known, and two runs land in the same second.
    (bin_dir / "date").write_text(f"#!/bin/sh\necho {STAMP}\n")
    (bin_dir / "date").chmod(0o755)
    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    report = tmp_path / "report.json"
    result = driver_failure_cluster(run_id="tonight")
    result.started_at = "2026-12-02T02:30:00+00:00"
    write_json(result, tmp_path / "tonight")
    shutil.copyfile(tmp_path / "tonight" / "conformance.json", report)
    return {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "GPU_CONFORMANCE_REPORTS": str(tmp_path / "reports"), "FAKE_REPORT": str(report), "FAKE_RC": "1"}


def run(env: dict[str, str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(ENTRYPOINT), sys.executable, str(tmp_path / "fake_run.py"), "--cluster=current"],
                          env={**env, **extra}, capture_output=True, text=True, timeout=120, check=False)


def old_night(reports: Path, name: str, verdict: str = "CONFORMANT", day: str = "2026-11-29") -> Path:
    d = reports / name
    if verdict == "ERROR":
        d.mkdir(parents=True)
        (d / "conformance.json").write_text(json.dumps({
            "schema_version": "1", "run_id": name, "started_at": f"{day}T02:30:00+00:00", "verdict": "ERROR",
            "error": {"exit_code": 3, "message": "API server unreachable"}, "checks": [], "nodes": []}, indent=2))
        return d
    result = healthy_cluster(run_id=name) if verdict == "CONFORMANT" else driver_failure_cluster(run_id=name)
    result.started_at = f"{day}T02:30:00+00:00"
    write_json(result, d)
    return d


def argv(night: Path) -> list[str]:
    return json.loads((night / "argv.json").read_text())


def test_baseline_is_the_newest_earlier_night_with_a_verdict(env: dict[str, str], tmp_path: Path) -> None:
    reports = Path(env["GPU_CONFORMANCE_REPORTS"])
    old_night(reports, "20261129T023000Z", "CONFORMANT", "2026-11-29")
    want = old_night(reports, "20261130T023000Z", "NOT CONFORMANT", "2026-11-30")
    old_night(reports, "20261201T023000Z", "ERROR", "2026-12-01")    # the run failed: no verdict to compare
    (reports / "20261201T120000Z").mkdir()                           # died before writing anything
    old_night(reports, "zz-manual-run", "CONFORMANT", "2026-12-01")  # not a night folder: never a baseline
    proc = run(env, tmp_path)
    assert proc.returncode == 1, proc.stderr  # the run's own exit code
    tonight = reports / STAMP
    args = argv(tonight)
    assert args[0] == "--cluster=current"
    assert f"--report-dir={tonight}" in args
    assert [a for a in args if a.startswith("--baseline")] == [f"--baseline={want}/conformance.json"]
    assert f"baseline {want}/conformance.json" in proc.stderr
    # The history page of every night was written next to them.
    page = (reports / "history.html").read_text()
    assert 'data-run="tonight"' in page and 'data-run="20261130T023000Z"' in page


def test_first_night_has_no_baseline(env: dict[str, str], tmp_path: Path) -> None:
    proc = run(env, tmp_path, FAKE_RC="0")
    assert proc.returncode == 0, proc.stderr
    reports = Path(env["GPU_CONFORMANCE_REPORTS"])
    assert not [a for a in argv(reports / STAMP) if a.startswith("--baseline")]
    assert "no earlier night to compare with" in proc.stderr
    # A second run in the same second gets a folder of its own, and the first as its baseline.
    proc = run(env, tmp_path)
    assert proc.returncode == 1
    assert f"--baseline={reports / STAMP}/conformance.json" in argv(reports / f"{STAMP}-1")
    assert sorted(p.name for p in reports.iterdir() if p.is_dir()) == [STAMP, f"{STAMP}-1"]


def test_keeps_the_newest_nights_only(env: dict[str, str], tmp_path: Path) -> None:
    reports = Path(env["GPU_CONFORMANCE_REPORTS"])
    for day in ["2026-11-28", "2026-11-29", "2026-11-30"]:
        old_night(reports, f"{day.replace('-', '')}T023000Z", "CONFORMANT", day)
    old_night(reports, "manual", "CONFORMANT", "2026-11-01")
    proc = run(env, tmp_path, GPU_CONFORMANCE_KEEP_NIGHTS="2")
    assert proc.returncode == 1, proc.stderr
    assert sorted(p.name for p in reports.iterdir() if p.is_dir()) == ["20261130T023000Z", STAMP, "manual"]
    assert all(NIGHT.match(n) for n in ("20261130T023000Z", STAMP))


@pytest.mark.parametrize("keep", ["0", "ten", "-3"])
def test_bad_keep_is_one_line_and_exit_4(env: dict[str, str], tmp_path: Path, keep: str) -> None:
    proc = run(env, tmp_path, GPU_CONFORMANCE_KEEP_NIGHTS=keep)
    assert proc.returncode == 4
    assert proc.stderr.strip().splitlines() == [
        f"nightly: GPU_CONFORMANCE_KEEP_NIGHTS must be a whole number above 0, not '{keep}'"]
    assert not Path(env["GPU_CONFORMANCE_REPORTS"]).exists()


def test_report_folder_that_is_a_file(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    proc = run(env, tmp_path, GPU_CONFORMANCE_REPORTS=str(tmp_path / "afile"))
    assert proc.returncode == 4
    assert proc.stderr.strip() == f"nightly: report folder {tmp_path / 'afile'} is not writable"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_entrypoint_passes_shellcheck() -> None:
    proc = subprocess.run(["shellcheck", "--shell=sh", str(ENTRYPOINT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout
