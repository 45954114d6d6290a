"""Every report file a run writes, in one table that the verdict path and the failed-run path both walk.

A reporter renders the redacted result dict (so the files cannot disagree) and, for a run that ended before a
verdict, the failure itself. Adding a format is one row here; neither `session` nor `failed_run` names files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_conformance.report import html as html_report
from gpu_conformance.report import json_report
from gpu_conformance.report_format import SCHEMA_VERSION
from gpu_conformance.run_result import RunResult

ERROR_VERDICT = "ERROR"
# Where a failed run moves the last verdict's files, so they are kept but never read as this run's.
PREVIOUS_DIR = "previous-run"


@dataclass(frozen=True)
class FailedRun:
    """A run that ended before a verdict: what its reports say instead of one."""

    run_id: str
    when: str
    exit_code: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "run_id": self.run_id, "started_at": self.when,
                "verdict": ERROR_VERDICT, "error": {"exit_code": self.exit_code, "message": self.message},
                "checks": [], "nodes": []}


@dataclass(frozen=True)
class Reporter:
    key: str
    filename: str
    render: Callable[[dict[str, Any]], str]
    render_failed: Callable[[FailedRun], str]


REPORTERS: tuple[Reporter, ...] = (
    Reporter("json", json_report.JSON_NAME, json_report.dumps, lambda f: json_report.dumps(f.to_dict())),
    Reporter("html", html_report.HTML_NAME, html_report.render_clean,
             lambda f: html_report.render_failed(f.run_id, f.when, f.exit_code, f.message, ERROR_VERDICT,
                                                      PREVIOUS_DIR)),
)
FILENAMES: tuple[str, ...] = tuple(r.filename for r in REPORTERS)


def write_reports(result: RunResult, report_dir: Path | str) -> dict[str, Path]:
    """Every reporter's file for `result` in report_dir; {key: path}."""
    data = json_report.result_dict(result)
    return _write(Path(report_dir), {r: r.render(data) for r in REPORTERS})


def write_failed_reports(report_dir: Path | str, failed: FailedRun) -> dict[str, Path]:
    """Every reporter's file saying the run failed and why; {key: path}."""
    return _write(Path(report_dir), {r: r.render_failed(failed) for r in REPORTERS})


def _write(d: Path, texts: dict[Reporter, str]) -> dict[str, Path]:
    # Rendered first, written after: a renderer's bug leaves no mix of this run's and the last run's files.
    paths: dict[str, Path] = {}
    for r, text in texts.items():
        paths[r.key] = d / r.filename
        json_report.write_text_atomic(paths[r.key], text)
    return paths
