"""The verdict chain: per node the first failing layer is the root cause; later layers are blocked."""

from __future__ import annotations

from gpu_conformance.model import Check, Finding, Layer, Status
from gpu_conformance.verdict import CONFORMANT, INCOMPLETE, NOT_CONFORMANT, decide

CHECKS = [
    Check("OPR-X", Layer.OPERATOR, "op", "", ""),
    Check("DRV-X", Layer.DRIVER_TOOLKIT, "drv", "", ""),
    Check("DPL-X", Layer.DEVICE_PLUGIN, "dp", "", ""),
    Check("PRB-X", Layer.PROBE, "probe", "", ""),
]
NODES = ["n1", "n2"]


def per_node(status_by: dict[tuple[str, str], Status]) -> list[Finding]:
    out = [Finding(Status.PASS, "ok", check_id="OPR-X")]
    for cid in ("DRV-X", "DPL-X", "PRB-X"):
        for n in NODES:
            s = status_by.get((cid, n), Status.PASS)
            out.append(Finding(s, f"{cid} {s} on {n}", node=n, check_id=cid))
    return out


def test_all_pass_is_conformant() -> None:
    v = decide(CHECKS, per_node({}), NODES)
    assert v.overall == CONFORMANT
    assert all(n.root_cause is None for n in v.nodes)
    assert {o.status for o in v.outcomes.values()} == {Status.PASS}


def test_first_failing_layer_is_root_cause_and_later_layers_blocked() -> None:
    v = decide(CHECKS, per_node({("DRV-X", "n1"): Status.FAIL, ("DPL-X", "n1"): Status.FAIL,
                                 ("PRB-X", "n1"): Status.FAIL}), NODES)
    n1, n2 = v.nodes
    assert n1.root_cause and n1.root_cause.layer == Layer.DRIVER_TOOLKIT and n1.root_cause.check_id == "DRV-X"
    assert n1.layers[Layer.DEVICE_PLUGIN] == Status.BLOCKED and n1.layers[Layer.PROBE] == Status.BLOCKED
    assert n2.root_cause is None and n2.layers[Layer.DEVICE_PLUGIN] == Status.PASS
    assert v.outcomes["DRV-X"].status == Status.FAIL and v.outcomes["DRV-X"].failing_nodes == ["n1"]
    dpl = v.outcomes["DPL-X"]
    assert dpl.status == Status.BLOCKED and dpl.blocked_nodes == ["n1"]
    assert dpl.reason.startswith("blocked by driver-toolkit: DRV-X fail on n1")
    assert v.overall == NOT_CONFORMANT


def test_later_failure_on_another_node_still_fails_its_check() -> None:
    v = decide(CHECKS, per_node({("DRV-X", "n1"): Status.FAIL, ("DPL-X", "n1"): Status.FAIL,
                                 ("DPL-X", "n2"): Status.FAIL}), NODES)
    o = v.outcomes["DPL-X"]
    assert o.status == Status.FAIL and o.failing_nodes == ["n2"] and o.blocked_nodes == ["n1"]
    assert v.nodes[1].root_cause and v.nodes[1].root_cause.layer == Layer.DEVICE_PLUGIN


def test_cluster_wide_failure_blocks_everything_with_one_message() -> None:
    findings = [Finding(Status.FAIL, "operator scaled to 0", check_id="OPR-X")] + per_node({})[1:]
    findings.append(Finding(Status.FAIL, "RuntimeClass nvidia missing", check_id="DPL-X"))
    v = decide(CHECKS, findings, NODES)
    assert v.cluster_blocker and v.cluster_blocker.message == "operator scaled to 0"
    assert all(n.root_cause and n.root_cause.layer == Layer.OPERATOR for n in v.nodes)
    assert v.outcomes["DPL-X"].status == Status.BLOCKED
    assert "operator scaled to 0" in v.outcomes["DPL-X"].reason
    # checks of later layers that saw nothing wrong are blocked too: they cannot vouch for this cluster
    assert v.outcomes["DRV-X"].status == Status.BLOCKED and v.outcomes["PRB-X"].status == Status.BLOCKED


def test_warn_does_not_fail_and_missing_probe_layer_is_incomplete() -> None:
    findings = per_node({("DPL-X", "n1"): Status.WARN})
    v = decide(CHECKS, findings, NODES, [Layer.OPERATOR, Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN,
                                          Layer.NFD, Layer.DEPLOY_LABELS])
    assert v.outcomes["DPL-X"].status == Status.WARN
    assert v.nodes[0].layers[Layer.DEVICE_PLUGIN] == Status.WARN
    assert v.overall == INCOMPLETE


def _paused(status_by: dict[tuple[str, str], Status]) -> list[Finding]:
    findings = per_node(status_by)
    findings = [f for f in findings if not (f.check_id == "DRV-X" and f.node == "n1")]
    findings.append(Finding(Status.WARN, "paused for driver upgrade", node="n1",
                            evidence={"transient": True}, check_id="DRV-X"))
    return findings


def test_pause_with_healthy_layers_is_incomplete_and_holds_back_only_the_probe() -> None:
    v = decide(CHECKS, _paused({}), NODES)
    n1 = v.nodes[0]
    assert n1.root_cause is None and n1.transient and n1.transient.message == "paused for driver upgrade"
    # the layers after the pause are judged, not blocked; only the probe waits for it
    assert n1.layers[Layer.DEVICE_PLUGIN] == Status.PASS and n1.layers[Layer.PROBE] == Status.BLOCKED
    assert v.outcomes["DPL-X"].status == Status.PASS
    assert v.overall == INCOMPLETE


def test_failure_under_a_pause_is_the_root_cause() -> None:
    v = decide(CHECKS, _paused({("DPL-X", "n1"): Status.FAIL, ("PRB-X", "n1"): Status.FAIL}), NODES)
    n1 = v.nodes[0]
    assert n1.transient is not None  # recorded
    assert n1.root_cause and n1.root_cause.check_id == "DPL-X" and n1.layers[Layer.DEVICE_PLUGIN] == Status.FAIL
    assert v.outcomes["DPL-X"].status == Status.FAIL and v.outcomes["DPL-X"].failing_nodes == ["n1"]
    assert v.outcomes["PRB-X"].blocked_nodes == ["n1"]
    assert v.overall == NOT_CONFORMANT


def test_probe_failure_on_a_paused_node_is_held_back_by_the_pause() -> None:
    v = decide(CHECKS, _paused({("PRB-X", "n1"): Status.FAIL}), NODES)
    assert v.nodes[0].root_cause is None
    o = v.outcomes["PRB-X"]
    assert o.status == Status.BLOCKED and o.blocked_nodes == ["n1"] and o.reason.startswith("paused (")
    assert v.overall == INCOMPLETE


def test_check_is_blocked_when_every_node_stopped_earlier() -> None:
    v = decide(CHECKS, per_node({("DRV-X", "n1"): Status.FAIL, ("DRV-X", "n2"): Status.FAIL}), NODES)
    assert v.outcomes["DPL-X"].status == Status.BLOCKED and "every GPU node is blocked" in v.outcomes["DPL-X"].reason
    assert v.outcomes["OPR-X"].status == Status.PASS


def test_a_finding_explained_by_a_later_layer_defers_to_it() -> None:
    # The operator's layer reports what NFD's failure caused: NFD is the root cause, whatever the layer order says.
    checks = CHECKS + [Check("NFD-X", Layer.NFD, "nfd", "", "")]
    findings = [Finding(Status.FAIL, "operator deployed nothing", check_id="OPR-X", explained_by=("NFD-X",)),
                Finding(Status.FAIL, "no node carries NFD's GPU label", check_id="NFD-X")]
    findings += per_node({})[1:]
    v = decide(checks, findings, NODES)
    assert v.cluster_blocker and v.cluster_blocker.check_id == "NFD-X"
    o = v.outcomes["OPR-X"]
    assert o.status == Status.BLOCKED and o.reason == "explained by nfd (NFD-X): no node carries NFD's GPU label"
    assert v.outcomes["NFD-X"].status == Status.FAIL and v.overall == NOT_CONFORMANT


def test_explanation_applies_only_where_the_explaining_check_fails() -> None:
    checks = CHECKS + [Check("NFD-X", Layer.NFD, "nfd", "", "")]
    findings = [Finding(Status.FAIL, "operator deployed nothing", check_id="OPR-X", explained_by=("NFD-X",)),
                Finding(Status.PASS, "NFD fine", check_id="NFD-X")] + per_node({})[1:]
    v = decide(checks, findings, NODES)
    assert v.cluster_blocker and v.cluster_blocker.check_id == "OPR-X"


def test_per_node_explanation_and_no_cycle() -> None:
    checks = CHECKS + [Check("NFD-X", Layer.NFD, "nfd", "", "")]
    findings = per_node({}) + [
        Finding(Status.FAIL, "monitoring pod missing", node="n1", check_id="OPR-Y", explained_by=("NFD-X",)),
        Finding(Status.FAIL, "GPU gone from PCI", node="n1", check_id="NFD-X"),
        # Two findings that each claim the other: neither hides the other.
        Finding(Status.FAIL, "a", node="n2", check_id="DRV-X", explained_by=("DPL-X",)),
        Finding(Status.FAIL, "b", node="n2", check_id="DPL-X", explained_by=("DRV-X",))]
    checks.append(Check("OPR-Y", Layer.OPERATOR, "op2", "", ""))
    v = decide(checks, findings, NODES)
    n1, n2 = v.nodes
    assert n1.root_cause and n1.root_cause.check_id == "NFD-X"
    assert n1.layers[Layer.OPERATOR] == Status.BLOCKED
    assert v.outcomes["OPR-Y"].status == Status.BLOCKED and "explained by nfd" in v.outcomes["OPR-Y"].reason
    assert n2.root_cause and n2.root_cause.check_id == "DRV-X"


def test_off_path_failure_blocks_nothing_and_yields_to_the_gpu_path() -> None:
    checks = [Check("MON-X", Layer.OPERATOR, "monitoring", "", "", gpu_path=False)] + CHECKS
    findings = per_node({("DPL-X", "n2"): Status.FAIL}) + [
        Finding(Status.FAIL, "dcgm-exporter crash-looping", node=n, check_id="MON-X") for n in NODES]
    v = decide(checks, findings, NODES)
    n1, n2 = v.nodes
    # n1: nothing on the GPU path failed, so the monitoring failure is its root cause, and every layer was judged.
    assert n1.root_cause and n1.root_cause.check_id == "MON-X" and n1.root_cause.off_path and n1.gpu_path_clear
    assert n1.layers[Layer.DEVICE_PLUGIN] == Status.PASS and n1.layers[Layer.PROBE] == Status.PASS
    # n2: the device plugin is the root cause; the monitoring check still fails there.
    assert n2.root_cause and n2.root_cause.check_id == "DPL-X" and not n2.gpu_path_clear
    assert v.outcomes["MON-X"].status == Status.FAIL and v.outcomes["MON-X"].failing_nodes == ["n1", "n2"]
    assert v.outcomes["PRB-X"].status == Status.PASS and v.overall == NOT_CONFORMANT


def test_a_finding_can_put_itself_on_the_gpu_path() -> None:
    checks = [Check("MON-X", Layer.OPERATOR, "monitoring", "", "", gpu_path=False)] + CHECKS
    findings = per_node({}) + [Finding(Status.FAIL, "MIG manager failed", node="n1", check_id="MON-X", gpu_path=True)]
    v = decide(checks, findings, NODES)
    assert v.nodes[0].root_cause and not v.nodes[0].root_cause.off_path
    assert v.nodes[0].layers[Layer.DEVICE_PLUGIN] == Status.BLOCKED
