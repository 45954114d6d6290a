"""No node is exempt from judgement (issue 20 item 3): a cordon, a driver upgrade step or a paused deploy label
pauses a node (INCOMPLETE, not probed) only while its components are healthy; a broken component under a pause
is that node's root cause, and upgrade-failed is a failure in the driver's own words."""

from __future__ import annotations

import copy

import pytest
from factory import (
    DRIVER_CRD_DS,
    crash_container,
    healthy_snapshot,
    pod_for,
    refresh,
    remove_daemonset,
    remove_pods,
    set_label,
    set_node_resource,
    stuck_init,
)
from test_root_cause import causes, judge, not_ready

from gpu_conformance import operands as ops
from gpu_conformance import upgrade_states as upg
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Layer, Status
from gpu_conformance.verdict import INCOMPLETE, NOT_CONFORMANT, NodeVerdict, Verdict

N1 = "gpu-node-1"
DRIVER = ops.DRIVER.daemonset


def node_verdict(v: Verdict, name: str = N1) -> NodeVerdict:
    return next(n for n in v.nodes if n.node == name)


def cordon(snap: ClusterSnapshot, name: str = N1) -> None:
    next(n for n in snap.nodes if n["metadata"]["name"] == name)["spec"]["unschedulable"] = True


def upgrade(snap: ClusterSnapshot, state: str, name: str = N1) -> None:
    set_label(snap, name, upg.UPGRADE_STATE_LABEL, state)
    if state in upg.STATES and upg.STATES[state].cordoned:
        cordon(snap, name)


def pause_operands(snap: ClusterSnapshot, name: str = N1) -> None:
    """What k8s-driver-manager does while it reloads the driver: every other operand's label paused, pods gone,
    and the device plugin's resource withdrawn by kubelet."""
    for o in ops.OPERANDS:
        if o is ops.DRIVER:
            continue
        labels = next(n for n in snap.nodes if n["metadata"]["name"] == name)["metadata"]["labels"]
        if labels.get(o.deploy_label) == "true":
            set_label(snap, name, o.deploy_label, "paused-for-driver-upgrade")
            snap.pods[:] = [p for p in snap.pods if not (p["metadata"].get("labels", {}).get("app") == o.app
                                                         and p["spec"].get("nodeName") == name)]
    snap.pods[:] = [p for p in snap.pods if not (p["metadata"].get("labels", {}).get("app") ==
                                                 ops.CUDA_VALIDATOR_APP and p["spec"].get("nodeName") == name)]
    # kubelet keeps the resource in capacity and counts no healthy device once the plugin is gone
    cap = next(n for n in snap.nodes if n["metadata"]["name"] == name)["status"]["capacity"]["nvidia.com/gpu"]
    set_node_resource(snap, name, cap, 0)
    refresh(snap)


def test_cordoned_healthy_node_is_incomplete_judged_and_not_probed() -> None:
    snap = healthy_snapshot()
    cordon(snap)
    v = judge(snap)
    nv = node_verdict(v)
    assert nv.root_cause is None and nv.transient is not None and "cordoned" in nv.transient.message
    assert nv.layers[Layer.DRIVER_TOOLKIT] == Status.PASS and nv.layers[Layer.DEVICE_PLUGIN] == Status.PASS
    assert nv.layers[Layer.PROBE] == Status.BLOCKED
    assert v.overall == INCOMPLETE


def test_cordoned_node_with_crashlooping_driver_has_the_driver_as_root_cause() -> None:
    # An admin cordoned the node because its GPU is broken: the cordon does not hide the broken driver.
    snap = healthy_snapshot("v25.3.4")
    cordon(snap)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=9, snapshot=snap)
    v = judge(snap)
    nv = node_verdict(v)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-002"
    assert nv.transient is not None  # the cordon is still recorded
    assert v.outcomes["DRV-002"].failing_nodes == [N1] and v.overall == NOT_CONFORMANT


def test_upgrade_failed_with_crashlooping_driver_is_a_driver_failure() -> None:
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.FAILED)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=11, snapshot=snap,
                    log="Could not resolve Linux kernel version")
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-002" and rc.layer == Layer.DRIVER_TOOLKIT
    assert "driver upgrade failed" in rc.message and "upgrade-failed" in rc.message
    assert "CrashLoopBackOff" in rc.message and "Could not resolve Linux kernel version" in rc.message
    assert causes(v)["gpu-node-2"] is None and v.overall == NOT_CONFORMANT


def test_upgrade_failed_with_ready_driver_still_fails_and_names_the_events() -> None:
    # A drain that failed leaves the old, working driver and a node cordoned until someone acts.
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.FAILED)
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-002" and "stays cordoned" in rc.message
    f = next(f for f in v.outcomes["DRV-002"].findings if f.node == N1)
    assert "GPUDriverUpgrade" in f.kubectl


@pytest.mark.parametrize("state", [s for s, st in upg.STATES.items() if st.in_progress])
def test_every_upgrade_step_with_healthy_components_is_a_pause(state: str) -> None:
    snap = healthy_snapshot("v25.10.1")
    upgrade(snap, state)
    v = judge(snap)
    nv = node_verdict(v)
    assert nv.root_cause is None and nv.transient is not None, nv
    f = next(f for f in v.outcomes["DRV-002"].findings if f.node == N1)
    assert f.status == Status.WARN and f.evidence.get("transient") and f"{upg.UPGRADE_STATE_LABEL}={state}" in \
        f.message
    assert nv.layers[Layer.PROBE] == Status.BLOCKED and v.overall == INCOMPLETE


def test_pending_upgrade_does_not_pause_a_working_node() -> None:
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.PENDING)
    v = judge(snap)
    nv = node_verdict(v)
    assert nv.root_cause is None and nv.transient is None
    f = next(f for f in v.outcomes["DRV-002"].findings if f.node == N1)
    assert f.status == Status.WARN and "pending" in f.message


def test_driver_being_replaced_with_paused_operands_is_not_a_failure() -> None:
    # pod-restart-required: the new driver pod's k8s-driver-manager paused every operand and withdrew its pods;
    # the device plugin's resource is gone with it. All of that is the pause, none of it a failure.
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.POD_RESTART)
    pause_operands(snap)
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", reason="Running", restarts=0, snapshot=snap)
    v = judge(snap)
    nv = node_verdict(v)
    failing = {cid for cid, o in v.outcomes.items() if o.status == Status.FAIL}
    assert nv.root_cause is None and not failing, (nv.root_cause, failing)
    assert nv.transient is not None and v.overall == INCOMPLETE
    assert "explained by the pause" in next(f for f in v.outcomes["DPL-002"].findings if f.node == N1).message


def test_driver_failing_past_the_controllers_threshold_under_pod_restart_is_the_root_cause() -> None:
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.POD_RESTART)
    pause_operands(snap)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=upg.DRIVER_POD_FAILING_RESTARTS + 1,
                    snapshot=snap)
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-002" and "pod-restart-required" in rc.message


def test_driver_image_unpullable_under_pod_restart_is_not_waited_out() -> None:
    # The controller never marks it failed (no restarts), so the node would sit in the step forever.
    snap = healthy_snapshot("v25.3.4")
    upgrade(snap, upg.POD_RESTART)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", reason="ImagePullBackOff", restarts=0,
                    message='Back-off pulling image "nvcr.io/nvidia/driver:580.95.05-ubuntu24.04"', snapshot=snap)
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-002" and "cannot pull its image" in rc.message


def test_paused_label_with_operand_pod_still_there_is_not_a_misplacement() -> None:
    snap = healthy_snapshot()
    set_label(snap, N1, ops.DEVICE_PLUGIN.deploy_label, "paused-for-driver-upgrade")
    refresh(snap)
    v = judge(snap)
    assert next(f for f in v.outcomes["LBL-002"].findings if f.node == N1).status == Status.PASS
    assert node_verdict(v).root_cause is None and node_verdict(v).transient is not None


def test_unknown_upgrade_state_is_a_warning_by_name() -> None:
    snap = healthy_snapshot("v25.3.4")
    set_label(snap, N1, upg.UPGRADE_STATE_LABEL, "rollback-required")
    refresh(snap)
    v = judge(snap)
    f = next(f for f in v.outcomes["DRV-002"].findings if f.node == N1)
    assert f.status == Status.WARN and "unknown driver upgrade state" in f.message and "rollback-required" in \
        f.message
    assert node_verdict(v).root_cause is None and node_verdict(v).transient is None


# ---- v26.7: the ClusterPolicy is notReady while an NVIDIADriver rollout is open (audit C5) -------------------------
ROLLOUT = ("ClusterPolicy is not ready; NVIDIADriver upgrade has not completed; one or more NVIDIADriver-owned "
           "Nodes are marked pending, in-progress, or failed")


def crd_cluster() -> ClusterSnapshot:
    snap = healthy_snapshot("v26.7.0", driver="crd")
    for n in snap.gpu_node_names:
        set_label(snap, n, upg.DRIVER_OWNER_LABEL, "default")
    return snap


def test_v26_7_nvidiadriver_rollout_is_a_per_node_matter_naming_failed_nodes() -> None:
    snap = crd_cluster()
    upgrade(snap, "drain-required", "gpu-node-1")
    upgrade(snap, upg.PENDING, "gpu-node-2")
    upgrade(snap, upg.FAILED, "gpu-node-3")
    crash_container(pod_for(snap, DRIVER_CRD_DS, "gpu-node-3"), "nvidia-driver-ctr", restarts=11, snapshot=snap)
    not_ready(snap, ROLLOUT)
    v = judge(snap)
    assert v.cluster_blocker is None
    opr3 = v.outcomes["OPR-003"]
    msg = opr3.findings[0].message
    assert opr3.status == Status.WARN, msg
    assert "upgrade-failed on gpu-node-3" in msg and "drain-required on gpu-node-1" in msg
    assert "pending (upgrade-required) on gpu-node-2" in msg
    assert causes(v) == {"gpu-node-1": None, "gpu-node-2": None, "gpu-node-3": "DRV-002"}
    assert node_verdict(v, "gpu-node-1").transient is not None and node_verdict(v, "gpu-node-2").transient is None


def test_v26_7_rollout_message_no_node_explains_fails_without_blocking() -> None:
    snap = crd_cluster()
    not_ready(snap, ROLLOUT)
    v = judge(snap)
    f = v.outcomes["OPR-003"].findings[0]
    assert f.status == Status.FAIL and not f.blocking and "NVIDIADriver upgrade has not completed" in f.message
    assert v.cluster_blocker is None and causes(v) == {n: None for n in snap.gpu_node_names}


def test_rollout_ignores_nodes_opted_out_of_upgrades() -> None:
    snap = crd_cluster()
    upgrade(snap, "drain-required", "gpu-node-1")
    set_label(snap, "gpu-node-1", upg.UPGRADE_SKIP_LABEL, "true")
    not_ready(snap, ROLLOUT)
    assert v_opr3_status(snap) == Status.FAIL


def v_opr3_status(snap: ClusterSnapshot) -> Status:
    return judge(snap).outcomes["OPR-003"].status


# ---- NVIDIADriver status (audit m3) -------------------------------------------------------------------------------
def _error(cr: dict, reason: str, message: str) -> None:
    cr["status"] = {"state": "notReady", "conditions": [
        {"type": "Ready", "status": "False", "reason": "Error"},
        {"type": "Error", "status": "True", "reason": reason, "message": message}]}


def test_conflicting_nvidiadrivers_are_the_nodes_root_cause_in_the_crs_words() -> None:
    snap = healthy_snapshot("v25.3.4", driver="crd")
    first = snap.nvidiadrivers[0]
    first["spec"]["nodeSelector"] = {"pool": "gpu"}
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "team-b"
    snap.nvidiadrivers.append(second)
    msg = "conflicting NVIDIADriver NodeSelectors found for resource: team-b, nodeSelector: map[pool:gpu]"
    for cr in snap.nvidiadrivers:
        _error(cr, "ConflictingNodeSelector", msg)
    for n in snap.gpu_node_names:
        set_label(snap, n, "pool", "gpu")
    remove_pods(snap, DRIVER_CRD_DS, N1)
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-001", rc
    assert "ConflictingNodeSelector" in rc.message and msg in rc.message
    drv2 = next(f for f in v.outcomes["DRV-002"].findings if f.node == N1)
    assert "ConflictingNodeSelector" in drv2.message
    # nodes whose driver pods still run (deployed before the conflict) are not failed for it
    assert causes(v)["gpu-node-2"] is None


def test_node_no_nvidiadriver_selects_says_so() -> None:
    snap = healthy_snapshot("v25.3.4", driver="crd")
    snap.nvidiadrivers[0]["spec"]["nodeSelector"] = {"pool": "a100"}
    remove_pods(snap, DRIVER_CRD_DS, N1)
    v = judge(snap)
    rc = node_verdict(v).root_cause
    assert rc is not None and rc.check_id == "DRV-001" and "no NVIDIADriver selects this node" in rc.message


def test_healthy_nvidiadriver_with_missing_pod_is_still_a_missing_pod() -> None:
    snap = healthy_snapshot("v25.3.4", driver="crd")
    remove_pods(snap, DRIVER_CRD_DS, N1)
    v = judge(snap)
    assert next(f for f in v.outcomes["DRV-001"].findings if f.node == N1).status == Status.PASS
    assert causes(v)[N1] == "LBL-002"  # labelled for the driver, no pod: as without NVIDIADriver


def test_no_driver_daemonset_names_the_nvidiadriver_condition() -> None:
    snap = healthy_snapshot("v25.3.4", driver="crd")
    _error(snap.nvidiadrivers[0], "ReconcileFailed", "Error syncing state state-driver: failed to get kernel "
                                                     "version")
    remove_daemonset(snap, DRIVER_CRD_DS)
    f = judge(snap).outcomes["OPR-006"].findings[0]
    assert f.status == Status.FAIL and "ReconcileFailed" in f.message and "failed to get kernel version" in f.message


def test_upgrade_states_agree_with_the_signal_inventory() -> None:
    # One list of the upgrade controller's states: the inventory row (read from the source at every tag) and the
    # table the checks judge by, with the same first releases.
    from gpu_conformance import inventory, versions

    row = next(s for s in inventory.load().of_kind("node-label") if s.name == upg.UPGRADE_STATE_LABEL)
    assert {sp.value for sp in row.values} == set(upg.STATES)
    assert {sp.value: versions.text(sp.first) for sp in row.values} == {v: s.first for v, s in upg.STATES.items()}


def test_sim_fault_driver_upgrade_in_progress_stays_incomplete() -> None:
    # What sim fault driver-upgrade-in-progress leaves (its GPU resources removed outright): a pause, no failure.
    snap = healthy_snapshot("v25.3.4")
    set_label(snap, N1, upg.UPGRADE_STATE_LABEL, upg.POD_RESTART)
    pause_operands(snap)
    set_node_resource(snap, N1, None, None)
    refresh(snap)
    v = judge(snap)
    assert not [cid for cid, o in v.outcomes.items() if o.status == Status.FAIL]
    assert node_verdict(v).transient is not None and v.overall == INCOMPLETE
    assert {"LBL-001", "DRV-002"} <= {cid for cid, o in v.outcomes.items() if o.status == Status.WARN}


def _bringing_back(snap: ClusterSnapshot, restarts: int) -> None:
    """validation-required: the new driver is Ready, the operands it paused are back and start their stages."""
    upgrade(snap, upg.VALIDATION)
    stuck_init(pod_for(snap, ops.VALIDATOR.daemonset, N1), "toolkit-validation",
               reason="Running" if not restarts else "CrashLoopBackOff", restarts=restarts, snapshot=snap)
    stuck_init(pod_for(snap, ops.DEVICE_PLUGIN.daemonset, N1), "toolkit-validation", reason="Running", restarts=0,
               snapshot=snap)
    snap.pods[:] = [p for p in snap.pods if not (p["metadata"].get("labels", {}).get("app") ==
                                                 ops.CUDA_VALIDATOR_APP and p["spec"].get("nodeName") == N1)]
    set_node_resource(snap, N1, None, None)
    refresh(snap)


def test_validation_step_bringing_operands_back_is_a_pause() -> None:
    snap = healthy_snapshot("v25.3.4")
    _bringing_back(snap, restarts=0)
    v = judge(snap)
    failing = {cid: o.failing_nodes for cid, o in v.outcomes.items() if o.status == Status.FAIL}
    assert node_verdict(v).root_cause is None and not failing, failing
    assert node_verdict(v).transient is not None and v.overall == INCOMPLETE


def test_validator_crashlooping_in_the_validation_step_is_the_root_cause() -> None:
    snap = healthy_snapshot("v25.3.4")
    _bringing_back(snap, restarts=6)
    rc = node_verdict(judge(snap)).root_cause
    assert rc is not None and rc.check_id == "DRV-004" and "toolkit-validation" in rc.message


def test_which_nvidiadrivers_select_a_node() -> None:
    from gpu_conformance.facts import nvidiadrivers_for_node

    snap = healthy_snapshot("v26.7.0", driver="crd")
    everywhere = snap.nvidiadrivers[0]  # no nodeSelector: every GPU node (GetNodeSelector: gpu.present=true)
    pool = copy.deepcopy(everywhere)
    pool["metadata"]["name"] = "a100-pool"
    pool["spec"]["nodeSelector"] = {"pool": "a100"}
    snap.nvidiadrivers.append(pool)
    set_label(snap, N1, "pool", "a100")
    refresh(snap)

    def names(node: str) -> list[str]:
        return sorted(cr["metadata"]["name"] for cr in nvidiadrivers_for_node(snap, node))

    assert names(N1) == ["a100-pool", "default"] and names("gpu-node-2") == ["default"]  # a conflict on N1
    everywhere["spec"]["default"] = True  # v26.7: the fallback of nodes no other CR selects
    assert names(N1) == ["a100-pool"] and names("gpu-node-2") == ["default"]
    set_label(snap, "gpu-node-2", upg.DRIVER_OWNER_LABEL, "a100-pool")  # v26.7 routing label wins
    refresh(snap)
    assert names("gpu-node-2") == ["a100-pool"]
