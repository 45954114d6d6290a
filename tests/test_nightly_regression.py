"""A regression between two nights, end to end on the simulated cluster, through the CronJob's own entrypoint.

Three nights of `deploy/nightly-entrypoint.sh pytest --cluster` (the suite as the CronJob runs it, with the
report folder and --baseline the script picks): a green night, then a fault injected (GFD stopped labelling
gpu-node-1), then the same fault a night later. The second night exits 1 and its log says what changed
against the first; the third says nothing new; the history page shows all three nights and names the second
as the first night of the regression. (In-cluster, the same script runs as the CronJob's Job in the kind tier:
tests/test_kind.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_conformance.report.history import build_history, load_nights

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = REPO / "deploy" / "nightly-entrypoint.sh"
FAULT = "gfd-labels-missing"
NODE = "gpu-node-1"


def nightly(kubeconfig: Path, reports: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "GPU_CONFORMANCE_REPORTS": str(reports)}
    cmd = ["sh", str(ENTRYPOINT), sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
           "--cluster=current", f"--kubeconfig={kubeconfig}", "--probe-timeout=60", str(REPO / "tests_conformance")]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    print(f"night took {time.monotonic() - t0:.1f} s, exit {proc.returncode}")
    return proc


def changes(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines --baseline printed after 'changes since ...:' (the end of the terminal summary)."""
    lines = proc.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("changes since "))
    return [ln for ln in lines[start + 1:] if ln.strip() and not ln.startswith("=")]


def history(reports: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_conformance.cli", "report", "history", str(reports), *extra],
                          capture_output=True, text=True, timeout=120, check=False)


def test_fault_between_nights_is_a_regression_with_a_first_night(tmp_path: Path) -> None:
    from gpu_conformance.sim.operator import faults
    from gpu_conformance.sim.session import start_sim

    reports = tmp_path / "reports"
    booted = start_sim(gpu_nodes=2, cpu_nodes=0, quiet=True)
    try:
        first = nightly(booted.kubeconfig, reports)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
        assert "no earlier night to compare with" in first.stderr
        [night1] = sorted(p for p in reports.iterdir() if p.is_dir())

        faults.apply(booted.install, FAULT, booted.cluster)
        second = nightly(booted.kubeconfig, reports)
        assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-2000:]
        assert f"changes since {night1}/conformance.json:" in second.stdout
        diff = changes(second)
        assert "verdict: CONFORMANT -> NOT CONFORMANT" in diff, diff
        assert any(ln.startswith("newly failing: DPL-005 [device-plugin]") and NODE in ln for ln in diff), diff
        assert any(ln.startswith(f"node {NODE}: new failure at device-plugin (DPL-005)") for ln in diff), diff
        assert not any("gpu-node-0" in ln for ln in diff), diff
        # Between the nights, the history command already fails the CI job on it.
        proc = history(reports, "--fail-on-regression")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "REGRESSION since" in proc.stdout

        third = nightly(booted.kubeconfig, reports)
        assert third.returncode == 1
        assert not any("new failure" in ln or "newly failing" in ln for ln in changes(third)), changes(third)
    finally:
        booted.stop()

    night2 = sorted(p for p in reports.iterdir() if p.is_dir())[1]
    proc = history(reports, "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the third night got no worse than the second
    h = build_history(load_nights(reports))
    assert [v.night.verdict for v in h.nights] == ["CONFORMANT", "NOT CONFORMANT", "NOT CONFORMANT"]
    assert h.first_regression is not None and h.first_regression.path.parent == night2
    [problem] = h.problems
    assert (problem.nodes, problem.check, problem.from_the_start) == ([NODE], "DPL-005", False)
    cells = {(r.label, r.layer): r.statuses for r in h.cells}
    assert cells[(NODE, "device-plugin")] == ["pass", "fail", "fail"]
    page = (reports / "history.html").read_text()  # written by the entrypoint after the third night
    assert page.count('data-regressed="yes"') == 1 and page.count("<tr data-run=") == 3
    assert f'data-since="{h.first_regression.run_id}"' in page
