"""The conformance.json format: its name, its schema version and the one reader of it.

A leaf module (errors and input_files only), so that Settings can check --baseline before a run without
importing the reporters, and the reporters, `report diff` and the history all read a file the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_conformance.errors import UsageError
from gpu_conformance.input_files import REPORT_LIMIT, InputFileError, read_bounded

JSON_NAME = "conformance.json"
# Bumped when a key that `report diff` or --baseline reads changes meaning.
SCHEMA_VERSION = "1"


class ReportFileError(UsageError, ValueError):
    """A file given as a report is missing or is not a conformance.json.

    A UsageError (one line, exit 4, like any bad option) and also a ValueError, so callers that catch
    ValueError around load_json keep working.
    """


def load_json(path: Path | str) -> dict[str, Any]:
    """Read a conformance.json written by this or an earlier run; ReportFileError when it is not one."""
    p = Path(path)
    try:
        text = read_bounded(p, REPORT_LIMIT).decode("utf-8")
    except InputFileError as e:
        raise ReportFileError(str(e)) from None
    except UnicodeDecodeError:
        raise ReportFileError(f"{p}: not a conformance.json (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportFileError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise ReportFileError(f"{p}: not a conformance.json (nested too deeply)") from None
    if not isinstance(data, dict) or "schema_version" not in data or "verdict" not in data:
        raise ReportFileError(f"{p}: not a conformance.json (no schema_version/verdict)")
    if str(data["schema_version"]) != SCHEMA_VERSION:
        raise ReportFileError(f"{p}: schema version {data['schema_version']} is not supported "
                         f"(this version reads {SCHEMA_VERSION})")
    problem = _shape_problem(data)
    if problem:
        raise ReportFileError(f"{p}: not a conformance.json ({problem})")
    return data


# What `report diff` and --baseline read of a conformance.json: (key, type, required). A file that passes this
# cannot crash them; a hand-made {"schema_version": "1", "verdict": ...} without checks and nodes does not pass.
_TOP_LEVEL: tuple[tuple[str, type | tuple[type, ...], bool], ...] = (
    ("verdict", str, True), ("checks", list, True), ("nodes", list, True), ("run_id", str, False),
    ("cluster", dict, False), ("operator", dict, False), ("driver_config", dict, False),
    ("cluster_blocker", (dict, type(None)), False),
)


def _shape_problem(data: dict[str, Any]) -> str | None:
    for key, kind, required in _TOP_LEVEL:
        if key not in data:
            if required:
                return f"no {key!r}"
            continue
        if data[key] is not None and not isinstance(data[key], kind):
            return f"{key!r} is a {type(data[key]).__name__}"
    for i, check in enumerate(data["checks"]):
        if not isinstance(check, dict) or not isinstance(check.get("id"), str):
            return f"checks[{i}] is not a check with an id"
        for key in ("nodes", "failing_nodes", "blocked_nodes"):
            if not isinstance(check.get(key) or [], list):
                return f"checks[{i}].{key} is not a list"
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            return f"nodes[{i}] is not a node with a name"
        if not isinstance(node.get("root_cause") or {}, dict):
            return f"nodes[{i}].root_cause is not a mapping"
    policy = (data.get("operator") or {}).get("policy")
    if policy is not None and not isinstance(policy, dict):
        return "operator.policy is not a mapping"
    return None
