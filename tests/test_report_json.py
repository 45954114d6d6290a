"""conformance.json: schema fields, round trip, and clear errors for files that are not one."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from report_data import (
    DRIVER_FAIL_MESSAGE,
    DRIVER_FAIL_NODE,
    OPERATOR_FAIL_MESSAGE,
    driver_failure_cluster,
    healthy_cluster,
    operator_failure_cluster,
)

from gpu_conformance.errors import UsageError
from gpu_conformance.report.json_report import result_dict, write_json
from gpu_conformance.report_format import JSON_NAME, load_json


def test_round_trip_and_schema(tmp_path: Path) -> None:
    result = driver_failure_cluster()
    path = write_json(result, tmp_path / "reports")
    assert path == tmp_path / "reports" / JSON_NAME
    data = load_json(path)
    assert data == json.loads(json.dumps(result_dict(result)))

    assert data["schema_version"] == "1"
    assert data["verdict"] == "NOT CONFORMANT"
    assert data["layers"] == ["operator", "nfd", "deploy-labels", "driver-toolkit", "device-plugin", "probe"]
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes[DRIVER_FAIL_NODE]["root_cause"] == {
        "layer": "driver-toolkit", "check": "DRV-004", "message": DRIVER_FAIL_MESSAGE}
    assert nodes[DRIVER_FAIL_NODE]["layers"]["device-plugin"] == "blocked"
    assert nodes["gpu-node-0"]["root_cause"] is None
    checks = {c["id"]: c for c in data["checks"]}
    assert checks["DRV-004"]["status"] == "fail"
    assert checks["DRV-004"]["nodes"] == [DRIVER_FAIL_NODE]
    assert checks["DPL-002"]["status"] == "blocked"
    assert checks["OPR-003"]["status"] == "pass"
    for c in data["checks"]:
        assert {"id", "status", "nodes", "layer", "title", "findings"} <= set(c)


def test_healthy_and_cluster_blocker(tmp_path: Path) -> None:
    assert load_json(write_json(healthy_cluster(), tmp_path / "ok"))["verdict"] == "CONFORMANT"
    data = load_json(write_json(operator_failure_cluster(), tmp_path / "op"))
    assert data["cluster_blocker"] == {"layer": "operator", "check": "OPR-003", "message": OPERATOR_FAIL_MESSAGE}
    assert all(n["root_cause"]["layer"] == "operator" for n in data["nodes"])


def test_write_is_atomic_and_readable(tmp_path: Path) -> None:
    path = write_json(healthy_cluster(), tmp_path)
    write_json(driver_failure_cluster(), tmp_path)  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == [JSON_NAME], "no temporary files left behind"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert load_json(path)["verdict"] == "NOT CONFORMANT"


def test_odd_values_in_settings_do_not_break_the_report(tmp_path: Path) -> None:
    result = healthy_cluster(settings={"report_dir": Path("/tmp/x"), "levels": {1, 2}})
    data = load_json(write_json(result, tmp_path))
    assert data["settings"]["report_dir"] == "/tmp/x"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a conformance.json"),
        ('{"schema_version": "99", "verdict": "CONFORMANT"}', "schema version 99"),
    ],
)
def test_load_json_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "conformance.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_json(path)


def test_load_json_error_is_also_a_value_error(tmp_path: Path) -> None:
    # Callers (CLI, --baseline) may catch either: the usage error's one-line message, or ValueError.
    with pytest.raises(ValueError, match="no such file"):
        load_json(tmp_path / "missing.json")
