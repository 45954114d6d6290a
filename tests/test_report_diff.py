"""report diff OLD NEW / --baseline: what broke, what got fixed, what moved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report_data import (
    DRIVER_FAIL_MESSAGE,
    cluster_pass,
    driver_failure_cluster,
    driver_failure_findings,
    finding,
    fleet,
    healthy_cluster,
    make_result,
    node_names,
    node_pass,
    operator_failure_cluster,
    operator_info,
)

from gpu_conformance.model import Layer, Status
from gpu_conformance.report.diff import diff_runs, format_diff
from gpu_conformance.report.json_report import result_dict, write_json
from gpu_conformance.report_format import load_json
from gpu_conformance.run_result import RunResult

CHAIN = "Validator chain driver → toolkit → cuda completed"


def d(result: RunResult) -> dict[str, Any]:
    return result_dict(result)


def test_no_changes() -> None:
    diff = diff_runs(d(driver_failure_cluster()), d(driver_failure_cluster(run_id="run-2")))
    assert not diff.has_changes and not diff.regressed
    assert format_diff(diff) == "no changes"


def test_new_failure() -> None:
    diff = diff_runs(d(healthy_cluster()), d(driver_failure_cluster()))
    assert diff.verdict and (diff.verdict.old, diff.verdict.new) == ("CONFORMANT", "NOT CONFORMANT")
    assert [(c.check_id, c.nodes, c.old_status) for c in diff.newly_failing] == [("DRV-004", ["gpu-node-1"], "pass")]
    assert diff.fixed == []
    assert [(n.node, n.kind) for n in diff.nodes] == [("gpu-node-1", "new failure")]
    assert diff.regressed
    assert format_diff(diff).splitlines() == [
        "verdict: CONFORMANT -> NOT CONFORMANT",
        f"newly failing: DRV-004 [driver-toolkit] {CHAIN} on gpu-node-1 (was pass)",
        f"node gpu-node-1: new failure at driver-toolkit (DRV-004): {DRIVER_FAIL_MESSAGE}",
    ]


def test_fixed() -> None:
    diff = diff_runs(d(driver_failure_cluster()), d(healthy_cluster()))
    # DPL-002 was blocked, not failing, in the old run: only the root cause counts as fixed.
    assert [(c.check_id, c.nodes, c.new_status) for c in diff.fixed] == [("DRV-004", ["gpu-node-1"], "pass")]
    assert diff.newly_failing == []
    assert [(n.node, n.kind) for n in diff.nodes] == [("gpu-node-1", "fixed")]
    assert not diff.regressed
    assert format_diff(diff).splitlines() == [
        "verdict: NOT CONFORMANT -> CONFORMANT",
        f"fixed: DRV-004 [driver-toolkit] {CHAIN} (was failing on gpu-node-1, now pass)",
        f"node gpu-node-1: fixed (was driver-toolkit (DRV-004): {DRIVER_FAIL_MESSAGE})",
    ]


def test_operator_version_policy_and_driver_config() -> None:
    old = healthy_cluster(operator=operator_info("v24.6.2"))
    new = healthy_cluster(operator=operator_info("v24.9.0", **{"CDI": True}),
                          driver_config={"gpu-node-0": "operator", "gpu-node-1": "operator", "gpu-node-2": "host"})
    diff = diff_runs(d(old), d(new))
    assert diff.operator_version and (diff.operator_version.old, diff.operator_version.new) == ("v24.6.2", "v24.9.0")
    assert diff.verdict is None
    assert format_diff(diff).splitlines() == [
        "operator version: v24.6.2 -> v24.9.0",
        "policy CDI: off -> on",
        "driver config gpu-node-2: operator -> host",
    ]


def test_root_cause_moves_to_another_layer() -> None:
    nodes = node_names(3)
    old = driver_failure_cluster()
    findings = cluster_pass() + node_pass("gpu-node-0") + node_pass("gpu-node-2")
    findings.append(finding("NFD-002", Status.FAIL, "gpu-node-1 lost pci-10de.present", "gpu-node-1"))
    # The validator is still stuck, but now an earlier layer explains it.
    findings.append(finding("DRV-004", Status.FAIL, DRIVER_FAIL_MESSAGE, "gpu-node-1"))
    new = make_result(nodes, findings)
    diff = diff_runs(d(old), d(new))
    assert [(n.node, n.kind) for n in diff.nodes] == [("gpu-node-1", "changed")]
    text = format_diff(diff)
    assert ("node gpu-node-1: root cause moved from driver-toolkit (DRV-004) to nfd (NFD-002): "
            "gpu-node-1 lost pci-10de.present") in text.splitlines()
    assert "newly failing: NFD-002 [nfd]" in text
    # DRV-004 did not recover on gpu-node-1: it is hidden behind the earlier failure, so not "fixed".
    assert [c.check_id for c in diff.fixed] == []


def test_failure_spreads_and_shrinks() -> None:
    nodes = node_names(3)
    base = cluster_pass() + node_pass("gpu-node-2")
    one = make_result(nodes, base + driver_failure_findings("gpu-node-1") + node_pass("gpu-node-0"))
    two = make_result(nodes, base + driver_failure_findings("gpu-node-1") + driver_failure_findings("gpu-node-0"))
    spread = diff_runs(d(one), d(two))
    assert [(c.check_id, c.old_status, c.nodes) for c in spread.newly_failing] == [("DRV-004", "fail", ["gpu-node-0"])]
    assert f"now also failing: DRV-004 [driver-toolkit] {CHAIN} on gpu-node-0" in format_diff(spread)
    shrink = diff_runs(d(two), d(one))
    assert [(c.check_id, c.new_status, c.nodes) for c in shrink.fixed] == [("DRV-004", "fail", ["gpu-node-0"])]
    assert (f"fixed on gpu-node-0: DRV-004 [driver-toolkit] {CHAIN} (still failing elsewhere)"
            in format_diff(shrink))


def test_cluster_blocker_appears() -> None:
    diff = diff_runs(d(healthy_cluster()), d(operator_failure_cluster()))
    lines = format_diff(diff).splitlines()
    assert lines[0] == "verdict: CONFORMANT -> NOT CONFORMANT"
    assert lines[1].startswith("cluster blocker: none -> operator (OPR-003): ClusterPolicy cluster-policy is notReady")
    assert "newly failing: OPR-003 [operator] ClusterPolicy is ready and reconciled on cluster-wide (was pass)" in lines
    # Three nodes with the same new root cause: one line each (few nodes) in node order.
    assert [line.split(":")[0] for line in lines if line.startswith("node ")] == [
        "node gpu-node-0", "node gpu-node-1", "node gpu-node-2"]


def test_nodes_added_and_removed() -> None:
    old = healthy_cluster(3)
    new_nodes = ["gpu-node-0", "gpu-node-1", "gpu-node-3"]
    new = make_result(new_nodes, cluster_pass() + [f for n in new_nodes for f in node_pass(n)])
    lines = format_diff(diff_runs(d(old), d(new))).splitlines()
    assert "node gpu-node-2: no longer in the run" in lines
    assert "node gpu-node-3: new GPU node, passes" in lines
    assert "driver config gpu-node-2: operator -> none" in lines
    assert "driver config gpu-node-3: none -> operator" in lines


def test_many_nodes_group_into_one_line() -> None:
    failing = [f"gpu-node-{i}" for i in range(900, 1000)]
    diff = diff_runs(d(fleet(1000)), d(fleet(1000, failing)))
    lines = format_diff(diff).splitlines()
    assert ("node gpu-node-[900-999] (100 nodes): new failure at driver-toolkit (DRV-004)") in lines
    assert len(lines) == 3
    assert [c.nodes for c in diff.newly_failing] == [failing]


def test_stable_order() -> None:
    old = d(fleet(50, ["gpu-node-3"], ["gpu-node-40"]))
    new = d(fleet(50, ["gpu-node-4", "gpu-node-40"], ["gpu-node-3"], operator=operator_info("v25.3.0")))
    text = format_diff(diff_runs(old, new))
    # Reversing the input lists must not change the output.
    for key in ("checks", "nodes"):
        new[key] = list(reversed(new[key]))
    assert format_diff(diff_runs(old, new)) == text
    lines = text.splitlines()
    assert lines[0] == "operator version: v24.9.0 -> v25.3.0"
    kinds = [line.split(":")[0] for line in lines]
    assert kinds.index("now also failing") < kinds.index("fixed on gpu-node-3") < kinds.index("node gpu-node-3")
    assert f"now also failing: DRV-004 [driver-toolkit] {CHAIN} on gpu-node-[4,40] (2 nodes)" in lines


def test_diff_of_written_files(tmp_path: Path) -> None:
    old = load_json(write_json(healthy_cluster(), tmp_path / "old"))
    new = load_json(write_json(driver_failure_cluster(), tmp_path / "new"))
    assert diff_runs(old, new).regressed
    assert diff_runs(old, new).to_dict()["newly_failing"][0]["check_id"] == "DRV-004"


def test_layer_not_in_selection() -> None:
    only_early = [Layer.OPERATOR, Layer.NFD]
    a = d(make_result(node_names(2), cluster_pass() + [f for n in node_names(2)
                                                      for f in node_pass(n, only_early)], layers_run=only_early))
    b = d(healthy_cluster(2))
    diff = diff_runs(a, b)
    assert diff.verdict and (diff.verdict.old, diff.verdict.new) == ("INCOMPLETE", "CONFORMANT")
    assert diff.newly_failing == [] and diff.fixed == []
