"""The end-of-run summary printed to the terminal."""

from __future__ import annotations

from pathlib import Path

from report_data import (
    DRIVER_FAIL_MESSAGE,
    OPERATOR_FAIL_MESSAGE,
    driver_failure_cluster,
    fleet,
    healthy_cluster,
    large_cluster,
    operator_failure_cluster,
)

from gpu_conformance.report.terminal import summary_lines


def _layer_row(lines: list[str], layer: str) -> list[int]:
    row = next(line for line in lines if line.split()[:1] == [layer])
    return [int(x) for x in row.split()[1:6]]


def test_healthy() -> None:
    lines = summary_lines(healthy_cluster(), [Path("reports/conformance.json"), Path("reports/conformance.html")])
    assert lines[-3:] == ["verdict: CONFORMANT", "report: reports/conformance.json",
                          "report: reports/conformance.html"]
    assert lines[2].split() == ["layer", "pass", "fail", "blocked", "warn", "n/a"]
    for layer in ("operator", "nfd", "deploy-labels", "driver-toolkit", "device-plugin", "probe"):
        assert _layer_row(lines, layer) == [3, 0, 0, 0, 0]
    assert not any("root cause" in line for line in lines)
    assert "driver: operator driver container on 3 nodes" in lines


def test_driver_failure() -> None:
    lines = summary_lines(driver_failure_cluster(), {"json": "r/conformance.json"})
    assert _layer_row(lines, "driver-toolkit") == [2, 1, 0, 0, 0]
    assert _layer_row(lines, "device-plugin") == [2, 0, 1, 0, 0]
    assert f"  gpu-node-1: driver-toolkit (DRV-004): {DRIVER_FAIL_MESSAGE}" in lines
    assert "verdict: NOT CONFORMANT" in lines
    assert lines[-1] == "report (json): r/conformance.json"


def test_cluster_blocker_is_said_once() -> None:
    lines = summary_lines(operator_failure_cluster())
    assert f"cluster blocker: operator (OPR-003): {OPERATOR_FAIL_MESSAGE}" in lines
    assert "  gpu-node-[0-2] (3 nodes): the cluster blocker above" in lines
    assert sum(OPERATOR_FAIL_MESSAGE in line for line in lines) == 1


def test_large_cluster_stays_short() -> None:
    lines = summary_lines(large_cluster())
    assert len(lines) < 25
    assert _layer_row(lines, "driver-toolkit") == [993, 7, 0, 0, 0]
    assert "  gpu-node-995: driver-toolkit (DRV-004): validator on gpu-node-995 stuck in toolkit-validation" in lines


def test_many_failing_nodes_are_grouped() -> None:
    failing = [f"gpu-node-{i}" for i in range(100, 160)]
    lines = summary_lines(fleet(300, failing, ["gpu-node-7"]))
    assert "root causes (61 of 300 nodes failing):" in lines
    assert ("  gpu-node-[100-159] (60 nodes): driver-toolkit (DRV-004): validator on <node> stuck in "
            "toolkit-validation") in lines
    assert "  gpu-node-7: device-plugin (DPL-002): gpu-node-7 advertises 0 nvidia.com/gpu" in lines
    assert len(lines) < 20
