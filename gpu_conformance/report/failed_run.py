"""Reports of a run that ended before a verdict (exit 2, 3, 4, 6): they say it failed and why.

Without this, the report directory kept the previous run's CONFORMANT conformance.html/json and got an empty,
green junit.xml, so a nightly dashboard showed yesterday's pass. Now the previous run's own reports move to
``previous-run/`` (kept, but never mistaken for this run's), conformance.json records verdict ERROR with the
exit code and the one-line error, conformance.html says the same, and junit.xml holds one errored test case.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from gpu_conformance.report.json_report import write_text_atomic
from gpu_conformance.report.redact import redact_text
from gpu_conformance.report.reporters import ERROR_VERDICT, FILENAMES, PREVIOUS_DIR, FailedRun, write_failed_reports
from gpu_conformance.report_format import JSON_NAME


def write_failed_run(report_dir: Path | str, *, run_id: str, exit_code: int, message: str,
                     junit_path: Path | str | None = None) -> dict[str, Path]:
    """Move an earlier verdict aside and write this run's failure as every report (and junit.xml)."""
    d = Path(report_dir)
    d.mkdir(parents=True, exist_ok=True)
    message = redact_text(message)
    _move_earlier_verdict_aside(d)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    paths = write_failed_reports(d, FailedRun(run_id, now, exit_code, message))
    if junit_path is not None:
        paths["junit"] = Path(junit_path)
        write_text_atomic(paths["junit"], _junit(exit_code, message))
    return paths


def _move_earlier_verdict_aside(d: Path) -> None:
    current = d / JSON_NAME
    try:
        verdict = json.loads(current.read_text(encoding="utf-8")).get("verdict")
    except (OSError, ValueError, AttributeError):
        verdict = None
    if verdict in (None, ERROR_VERDICT):
        return  # nothing to keep: no earlier verdict, or only an earlier failure (overwritten)
    aside = d / PREVIOUS_DIR
    aside.mkdir(exist_ok=True)
    for name in FILENAMES:
        if (d / name).is_file():
            os.replace(d / name, aside / name)


def _junit(exit_code: int, message: str) -> str:
    suites = ET.Element("testsuites", name="gpu-conformance")
    suite = ET.SubElement(suites, "testsuite", name="gpu-conformance", tests="1", errors="1", failures="0",
                          skipped="0")
    case = ET.SubElement(suite, "testcase", classname="gpu_conformance", name="run")
    ET.SubElement(case, "error", message=message, type=f"exit code {exit_code}").text = message
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
