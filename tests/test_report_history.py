"""report history DIR: the verdict per night, what changed, the first night of each problem, cells that moved."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from report_data import SECRET_MARKERS, driver_failure_cluster, fleet, healthy_cluster, secret_cluster, text_of

from gpu_conformance.cli import main
from gpu_conformance.errors import EXIT_REGRESSION, EXIT_USAGE
from gpu_conformance.report.history import build_history, load_nights, render_history, write_history
from gpu_conformance.report.html import write_html
from gpu_conformance.report.json_report import write_json
from gpu_conformance.run_result import RunResult

DAYS = ["2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02"]


def night(root: Path, day: int, result: RunResult, html: bool = False) -> Path:
    result.run_id = f"run-{day}"
    result.started_at = f"{DAYS[day]}T02:30:00+00:00"
    d = root / f"{DAYS[day].replace('-', '')}T023000Z"
    write_json(result, d)
    if html:
        write_html(result, d)
    return d


def error_night(root: Path, day: int, message: str = "cannot reach the API server") -> Path:
    # What a run that ended before a verdict writes (exit 3): verdict ERROR, no checks, no nodes.
    d = root / f"{DAYS[day].replace('-', '')}T023000Z"
    d.mkdir(parents=True)
    (d / "conformance.json").write_text(json.dumps({
        "schema_version": "1", "run_id": f"run-{day}", "started_at": f"{DAYS[day]}T02:30:00+00:00",
        "verdict": "ERROR", "error": {"exit_code": 3, "message": message}, "checks": [], "nodes": []}))
    return d


@pytest.fixture
def week(tmp_path: Path) -> Path:
    """Two green nights, then the driver breaks on gpu-node-1 and stays broken."""
    night(tmp_path, 0, healthy_cluster(), html=True)
    night(tmp_path, 1, healthy_cluster(), html=True)
    night(tmp_path, 2, driver_failure_cluster(), html=True)
    night(tmp_path, 3, driver_failure_cluster(), html=True)
    return tmp_path


def test_verdict_per_night_changes_and_first_night(week: Path) -> None:
    h = build_history(load_nights(week))
    assert [v.night.verdict for v in h.nights] == ["CONFORMANT", "CONFORMANT", "NOT CONFORMANT", "NOT CONFORMANT"]
    assert [v.regressed and v.previous is not None for v in h.nights] == [False, False, True, False]
    regression = h.nights[2]
    assert "verdict: CONFORMANT -> NOT CONFORMANT" in regression.changes
    assert any(line.startswith("node gpu-node-1: new failure at driver-toolkit (DRV-004)")
               for line in regression.changes), regression.changes
    assert h.nights[3].changes == [] and h.nights[0].changes == []
    # The open problem appeared on the third night, and that is the first regression of the history.
    [p] = h.problems
    assert (p.nodes, p.layer, p.check, p.since.run_id, p.from_the_start) == (
        ["gpu-node-1"], "driver-toolkit", "DRV-004", "run-2", False)
    assert h.first_regression is not None and h.first_regression.run_id == "run-2"
    assert not h.latest_regressed


def test_cells_that_changed_and_when(week: Path) -> None:
    h = build_history(load_nights(week))
    rows = {(r.label, r.layer): r for r in h.cells}
    assert set(rows) == {("gpu-node-1", "driver-toolkit"), ("gpu-node-1", "device-plugin"), ("gpu-node-1", "probe")}
    drv = rows[("gpu-node-1", "driver-toolkit")]
    assert drv.statuses == ["pass", "pass", "fail", "fail"]
    assert drv.changed == [False, False, True, False]
    assert [(s.night, s.old, s.new) for s in drv.steps] == [("2026-11-30 02:30 UTC", "pass", "fail")]
    assert rows[("gpu-node-1", "probe")].statuses == ["pass", "pass", "blocked", "blocked"]
    # 3 nodes x 6 layers, of which 3 cells moved.
    assert (h.unchanged_cells, h.node_count) == (15, 3)


def test_page_shows_it(week: Path) -> None:
    path, _ = write_history(week)
    assert path == week / "history.html"
    page = path.read_text()
    text = text_of(page)
    assert "Open regression first seen on 2026-11-30 02:30 UTC (run run-2)" in text
    assert page.count('data-regressed="yes"') == 1
    assert re.search(r'<tr data-run="run-2" data-verdict="NOT CONFORMANT" class="regressed"', page)
    assert '<tr data-check="DRV-004" data-since="run-2">' in page
    assert "2026-11-30 02:30 UTC: pass → fail" in text
    assert page.count('class="cell s-fail changed"') == 1
    # Every night links its own report, relative to the page.
    for d in sorted(p.name for p in week.iterdir() if p.is_dir()):
        assert f'href="{d}/conformance.html"' in page


def test_page_loads_nothing(week: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "h.html"
    path, _ = write_history(week, out)
    page = path.read_text()
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", page)
    assert "url(" not in page and "@import" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "default-src 'none'" in page  # the browser itself refuses any load (checked in test_history_browser)
    # Links to the nights' reports follow the page wherever it is written.
    assert 'href="../20261128T023000Z/conformance.html"' in page


def test_problem_present_from_the_first_night(tmp_path: Path) -> None:
    for day in range(3):
        night(tmp_path, day, driver_failure_cluster())
    h = build_history(load_nights(tmp_path))
    [p] = h.problems
    assert p.from_the_start and p.since.run_id == "run-0"
    assert h.first_regression is None and not h.cells
    assert "Open problems, all present since the first night in this history." in text_of(render_history(h))


def test_several_nodes_with_one_history_share_a_row(tmp_path: Path) -> None:
    night(tmp_path, 0, fleet(12))
    night(tmp_path, 1, fleet(12, driver_failing=["gpu-node-3", "gpu-node-4", "gpu-node-5"]))
    h = build_history(load_nights(tmp_path))
    drv = next(r for r in h.cells if r.layer == "driver-toolkit")
    assert drv.nodes == ["gpu-node-3", "gpu-node-4", "gpu-node-5"] and drv.label.startswith("gpu-node-[3-5]")
    assert len(h.cells) == 3  # driver-toolkit, device-plugin, probe: one row each for the three nodes
    [p] = h.problems
    assert p.nodes == ["gpu-node-3", "gpu-node-4", "gpu-node-5"] and p.since.run_id == "run-1"


def test_a_night_without_verdict_is_skipped_by_the_comparison(tmp_path: Path) -> None:
    night(tmp_path, 0, healthy_cluster())
    error_night(tmp_path, 1)
    night(tmp_path, 2, driver_failure_cluster())
    h = build_history(load_nights(tmp_path))
    assert [v.night.verdict for v in h.nights] == ["CONFORMANT", "ERROR", "NOT CONFORMANT"]
    assert h.nights[1].error == "cannot reach the API server"
    last = h.nights[2]
    assert last.previous is not None and last.previous.run_id == "run-0" and last.across_gap and last.regressed
    drv = next(r for r in h.cells if r.layer == "driver-toolkit")
    assert drv.statuses == ["pass", "no verdict", "fail"] and drv.changed == [False, False, True]
    page = text_of(render_history(h))
    assert "The run failed before a verdict: cannot reach the API server" in page
    assert "the nights between had no verdict" in page
    # The newest night failing before a verdict cannot prove it did not regress.
    error_night(tmp_path, 3)
    assert build_history(load_nights(tmp_path)).latest_regressed


def test_flat_folder_and_duplicates(tmp_path: Path) -> None:
    a = night(tmp_path / "n", 0, healthy_cluster())
    b = night(tmp_path / "n", 1, driver_failure_cluster())
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "monday.json").write_text((a / "conformance.json").read_text())
    (flat / "tuesday.json").write_text((b / "conformance.json").read_text())
    # The same run a second time (a baseline copied next to the night it came from): one night.
    (flat / "baseline.json").write_text((a / "conformance.json").read_text())
    nights = load_nights(flat)
    assert [n.run_id for n in nights] == ["run-0", "run-1"]


def test_secrets_are_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    night(tmp_path, 0, healthy_cluster())
    d = night(tmp_path, 1, secret_cluster())
    # A report written before redaction existed: the history must not pass it on.
    raw = json.loads((d / "conformance.json").read_text())
    raw["nodes"][1]["root_cause"]["message"] = f"login with token={SECRET_MARKERS[2]} failed"
    (d / "conformance.json").write_text(json.dumps(raw))
    assert main(["report", "history", str(tmp_path)]) == 0
    out = capsys.readouterr().out + (tmp_path / "history.html").read_text()
    for marker in SECRET_MARKERS:
        assert marker not in out
    assert "token=<redacted>" in out


def test_cli_fail_on_regression_and_markdown(week: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The newest night equals the one before: no regression.
    assert main(["report", "history", str(week), "--fail-on-regression"]) == 0
    capsys.readouterr()
    newest = max(p for p in week.iterdir() if p.is_dir())
    (newest / "conformance.json").unlink()
    (newest / "conformance.html").unlink()
    assert main(["report", "history", str(week), "--fail-on-regression", "--summary=markdown"]) == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert out.startswith("### GPU conformance: NOT CONFORMANT on 2026-11-30 02:30 UTC (3 nights in the history)")
    assert "- newly failing: DRV-004 [driver-toolkit]" in out
    assert "**REGRESSION** since 2026-11-29 02:30 UTC" in out
    # One night only: compared with nothing, any failure counts.
    single = week / "single"
    night(single, 0, driver_failure_cluster())
    assert main(["report", "history", str(single), "--fail-on-regression"]) == EXIT_REGRESSION
    night(single / "ok", 0, healthy_cluster())
    assert main(["report", "history", str(single / "ok"), "--fail-on-regression"]) == 0


@pytest.mark.parametrize("case", ["empty", "missing", "file", "wrong-shape", "not-json", "nodes-not-list",
                                  "layers-not-object"])
def test_bad_input_is_one_line_and_exit_4(case: str, tmp_path: Path) -> None:
    d = tmp_path / "nights"
    d.mkdir()
    night(d, 0, healthy_cluster())
    if case == "empty":
        d = tmp_path / "empty"
        d.mkdir()
    elif case == "missing":
        d = tmp_path / "nope"
    elif case == "file":
        d = d / "20261128T023000Z" / "conformance.json"
    elif case == "wrong-shape":
        (d / "x").mkdir()
        (d / "x" / "conformance.json").write_text('{"hello": "world"}')
    elif case == "not-json":
        (d / "notes.json").write_text("not json at all")
    elif case == "nodes-not-list":
        (d / "x").mkdir()
        (d / "x" / "conformance.json").write_text(
            '{"schema_version": "1", "verdict": "CONFORMANT", "checks": [], "nodes": "gpu-node-0"}')
    else:
        (d / "x").mkdir()
        (d / "x" / "conformance.json").write_text('{"schema_version": "1", "verdict": "CONFORMANT", "checks": [], '
                                                  '"nodes": [{"name": "gpu-node-0", "layers": ["pass"]}]}')
    proc = subprocess.run([sys.executable, "-m", "gpu_conformance.cli", "report", "history", str(d)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-conformance: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    expected = {"empty": "no conformance.json", "missing": "no such folder", "file": "not a folder",
                "wrong-shape": "not a conformance.json", "not-json": "not valid JSON",
                "nodes-not-list": "not a conformance.json ('nodes' is",
                "layers-not-object": "nodes[0].layers is not an object"}[case]
    assert expected in lines[0]
