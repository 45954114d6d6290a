"""conformance.json: the machine-readable record of a run, and the input of `report diff` and --baseline."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gpu_conformance.report.redact import redact
from gpu_conformance.report_format import JSON_NAME
from gpu_conformance.run_result import RunResult


def result_dict(result: RunResult) -> dict[str, Any]:
    """The redacted schema-v1 dict of a run: what every reporter renders, so they cannot disagree."""
    if result.redacted is None:
        result.redacted = redact(result.to_json_dict())
    return result.redacted


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a crash or a concurrent reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # mkstemp creates 0600; a report is meant to be read by others (CI artefacts, web servers).
    path.chmod(0o644)


def dumps(data: dict[str, Any]) -> str:
    # default=str: settings may carry a Path or a datetime; a report must never fail on them.
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def write_json(result: RunResult, report_dir: Path) -> Path:
    """Write report_dir/conformance.json (redacted) and return its path."""
    path = Path(report_dir) / JSON_NAME
    write_text_atomic(path, dumps(result_dict(result)))
    return path
