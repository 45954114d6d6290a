"""Per-node root causes as a real cluster presents them (issue 8): ClusterPolicy notReady is a symptom, node
health comes first, the runtime's and the registry's own words outrank a guess from a stuck validator."""

from __future__ import annotations

import copy

from factory import (
    add_event,
    add_mps_control_daemon,
    crash_container,
    healthy_snapshot,
    lose_nfd_gpu_label,
    node,
    pod_for,
    refresh,
    remove_daemonset,
    remove_pods,
    sandbox_refused,
    set_node_condition,
    set_node_resource,
    stuck_init,
)

from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Layer, Status
from gpu_conformance.operands import OPERANDS
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import NOT_CONFORMANT, Verdict, decide

DRIVER = "nvidia-driver-daemonset"
VALIDATOR = "nvidia-operator-validator"
DCGM_EXPORTER = "nvidia-dcgm-exporter"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
NO_NVIDIA_RUNTIME = ('Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: '
                     'no runtime for "nvidia" is configured')


def judge(snap: ClusterSnapshot) -> Verdict:
    refresh(snap)
    inp = check_input(snap, Settings())
    findings = [f for c in catalogue.all_checks() if c.func for f in c.run(inp)]
    layers = [layer for layer in Layer if layer != Layer.PROBE]
    return decide(catalogue.all_checks(), findings, snap.gpu_node_names, layers)


def causes(v: Verdict) -> dict[str, str | None]:
    return {n.node: n.root_cause.check_id if n.root_cause else None for n in v.nodes}


def not_ready(snap: ClusterSnapshot, message: str) -> None:
    """What the real operator writes when any operand DaemonSet has an unavailable pod."""
    cp = snap.clusterpolicies[0]
    cp["status"]["state"] = "notReady"
    cp["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
        {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": message}]


def test_one_crashlooping_driver_is_that_nodes_root_cause_not_the_clusters() -> None:
    snap = healthy_snapshot("v25.3.4")
    crash_container(pod_for(snap, DRIVER, "gpu-node-2"), "nvidia-driver-ctr", restarts=9, snapshot=snap)
    not_ready(snap, "ClusterPolicy is not ready, states not ready: [state-driver]")
    v = judge(snap)
    assert v.cluster_blocker is None
    assert causes(v) == {"gpu-node-1": None, "gpu-node-2": "DRV-002", "gpu-node-3": None}
    opr3 = v.outcomes["OPR-003"]
    assert opr3.status == Status.WARN and "gpu-node-2" in opr3.findings[0].message
    assert v.overall == NOT_CONFORMANT


def test_not_ready_state_that_no_node_explains_fails_without_blocking_nodes() -> None:
    snap = healthy_snapshot("v26.3.3")
    not_ready(snap, "ClusterPolicy is not ready; states not ready: [state-sandbox-device-plugin]")
    v = judge(snap)
    assert v.cluster_blocker is None and causes(v) == {n: None for n in snap.gpu_node_names}
    assert v.outcomes["OPR-003"].status == Status.FAIL and v.overall == NOT_CONFORMANT


def test_no_gpu_nodes_still_blocks_everything() -> None:
    snap = healthy_snapshot()
    cp = snap.clusterpolicies[0]
    cp["status"]["conditions"][0].update({"reason": "NoGPUNodes"})
    v = judge(snap)
    assert v.cluster_blocker is not None and v.cluster_blocker.check_id == "OPR-003"


def test_pre_conditions_operator_reads_daemonsets() -> None:
    # v22.9-v23.6 write only status.state; the states come from the DaemonSets as the operator computes them.
    snap = healthy_snapshot("v25.3.4")
    crash_container(pod_for(snap, DRIVER, "gpu-node-1"), "nvidia-driver-ctr", snapshot=snap)
    snap.clusterpolicies[0]["status"] = {"state": "notReady", "namespace": "gpu-operator"}
    v = judge(snap)
    assert "state-driver" in v.outcomes["OPR-003"].findings[0].message
    assert causes(v)["gpu-node-1"] == "DRV-002" and causes(v)["gpu-node-2"] is None


def test_node_not_ready_is_the_root_cause_ahead_of_its_pods() -> None:
    snap = healthy_snapshot()
    set_node_condition(snap, "gpu-node-3", "Ready", "False", "KubeletNotReady",
                       "container runtime is down, PLEG is not healthy")
    # Its operand pods look broken as a consequence (the real case: "NFD worker is Running" was blamed).
    crash_container(pod_for(snap, DCGM_EXPORTER, "gpu-node-3"), "nvidia-dcgm-exporter", snapshot=snap)
    stuck_init(pod_for(snap, VALIDATOR, "gpu-node-3"), "driver-validation", reason="Running", restarts=0,
               snapshot=snap)
    v = judge(snap)
    node = next(n for n in v.nodes if n.node == "gpu-node-3")
    assert node.root_cause is not None and node.root_cause.check_id == "NFD-004"
    assert "container runtime is down" in node.root_cause.message
    assert v.outcomes["OPR-007"].status == Status.BLOCKED  # the DCGM exporter is a consequence
    assert causes(v)["gpu-node-1"] is None


def test_unreachable_node_and_pressure() -> None:
    snap = healthy_snapshot()
    set_node_condition(snap, "gpu-node-1", "Ready", "Unknown", "NodeStatusUnknown",
                       "Kubelet stopped posting node status.")
    set_node_condition(snap, "gpu-node-2", "DiskPressure", "True", "KubeletHasDiskPressure",
                       "kubelet has disk pressure")
    v = judge(snap)
    assert causes(v) == {"gpu-node-1": "NFD-004", "gpu-node-2": "NFD-004", "gpu-node-3": None}
    msgs = {n.node: n.root_cause.message for n in v.nodes if n.root_cause}
    assert "Unknown" in msgs["gpu-node-1"] and "DiskPressure" in msgs["gpu-node-2"]


def test_cordoned_node_warns_and_passes() -> None:
    snap = healthy_snapshot()
    snap.nodes[0]["spec"]["unschedulable"] = True
    v = judge(snap)
    assert causes(v)[snap.nodes[0]["metadata"]["name"]] is None
    f = next(f for f in v.outcomes["NFD-004"].findings if f.node == snap.nodes[0]["metadata"]["name"])
    assert f.status == Status.WARN and "cordoned" in f.message and "not probed" in f.message


def test_runtime_without_nvidia_handler_is_named_ahead_of_the_validator() -> None:
    snap = healthy_snapshot("v25.3.4")
    for app in (VALIDATOR, "nvidia-device-plugin-daemonset", "gpu-feature-discovery", DCGM_EXPORTER):
        sandbox_refused(snap, pod_for(snap, app, "gpu-node-1"), NO_NVIDIA_RUNTIME)
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.check_id == "DRV-006"
    assert "no nvidia handler" in rc.message and 'no runtime for "nvidia" is configured' in rc.message
    assert causes(v)["gpu-node-2"] is None


def test_cri_o_runtime_handler_and_unresolvable_cdi() -> None:
    snap = healthy_snapshot("v26.3.3")
    sandbox_refused(snap, pod_for(snap, VALIDATOR, "gpu-node-1"),
                    'rpc error: code = Unknown desc = RuntimeHandler "nvidia" not supported')
    pod = pod_for(snap, "nvidia-device-plugin-daemonset", "gpu-node-2")
    crash_container(pod, "nvidia-device-plugin", reason="CreateContainerError", restarts=0,
                    message='failed to create containerd container: CDI device injection failed: unresolvable CDI '
                            'devices nvidia.com/gpu=all', snapshot=snap)
    v = judge(snap)
    assert causes(v)["gpu-node-1"] == "DRV-006" and causes(v)["gpu-node-2"] == "DRV-006"
    msg2 = next(n for n in v.nodes if n.node == "gpu-node-2").root_cause.message  # type: ignore[union-attr]
    assert "CDI" in msg2


def test_driver_image_pull_is_an_image_problem() -> None:
    snap = healthy_snapshot("v25.3.4")
    pod = pod_for(snap, DRIVER, "gpu-node-1")
    crash_container(pod, "nvidia-driver-ctr", reason="ImagePullBackOff", restarts=0,
                    message='Back-off pulling image "nvcr.io/nvidia/driver:570.172.08-ubuntu24.04"', snapshot=snap)
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.check_id == "DRV-002"
    assert "cannot pull its image" in rc.message and "not a failure of the program" in rc.message
    assert "kernel" not in rc.message


def test_missing_operand_pod_names_untolerated_taint_and_failed_create() -> None:
    snap = healthy_snapshot()
    snap.pods.remove(pod_for(snap, "gpu-feature-discovery", "gpu-node-1"))
    snap.nodes[0]["spec"].setdefault("taints", []).append({"key": "dedicated", "value": "ml",
                                                           "effect": "NoSchedule"})
    snap.pods.remove(pod_for(snap, "nvidia-device-plugin-daemonset", "gpu-node-2"))
    add_event(snap, "DaemonSet", "nvidia-device-plugin-daemonset", "FailedCreate",
              'Error creating: pods "nvidia-device-plugin-daemonset-x" is forbidden: exceeded quota: gpu-quota')
    v = judge(snap)
    msgs = {n.node: n.root_cause.message for n in v.nodes if n.root_cause}
    assert "dedicated=ml:NoSchedule" in msgs[snap.nodes[0]["metadata"]["name"]]
    assert "exceeded quota" in msgs["gpu-node-2"]


def test_second_clusterpolicy_is_reported_not_failed() -> None:
    snap = healthy_snapshot()
    other = copy.deepcopy(snap.clusterpolicies[0])
    other["metadata"].update({"name": "team-b-policy", "creationTimestamp": "2026-11-01T00:00:00Z"})
    other["status"] = {"state": "ignored"}
    snap.clusterpolicies.append(other)
    v = judge(snap)
    f = v.outcomes["OPR-002"].findings[0]
    assert f.status == Status.WARN and "acts on the oldest, cluster-policy" in f.message and "team-b" in f.message
    assert causes(v) == {n: None for n in snap.gpu_node_names}


def test_unified_memory_gpu_without_memory_label_passes_with_a_warning() -> None:
    # GB10 (DGX Spark): GFD publishes no nvidia.com/gpu.memory, the node is healthy.
    snap = healthy_snapshot("v25.10.1")
    for n in snap.nodes:
        labels = n["metadata"]["labels"]
        if labels.pop("nvidia.com/gpu.memory", None) is not None:
            labels["nvidia.com/gpu.product"] = "NVIDIA-GB10"
    v = judge(snap)
    assert causes(v) == {n: None for n in snap.gpu_node_names}
    assert v.outcomes["DPL-005"].status == Status.WARN


def test_validator_image_pull_is_named_by_the_validator_not_by_dcgm() -> None:
    # gpu-operator#1968: the old validator image does not exist; every pod with a validation init container stalls.
    snap = healthy_snapshot("v25.10.1")
    msg = 'Back-off pulling image "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1"'
    stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "driver-validation", reason="ImagePullBackOff", restarts=0,
               message=msg, snapshot=snap)
    stuck_init(pod_for(snap, DCGM_EXPORTER, "gpu-node-1"), "toolkit-validation", reason="ImagePullBackOff",
               restarts=0, message=msg, snapshot=snap)
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.check_id == "DRV-004", rc
    assert "cannot pull its image" in rc.message and "driver is not usable" not in rc.message


def test_cuda_validation_root_cause_quotes_the_cuda_pod() -> None:
    # gpu-operator#375: the validator waits in cuda-validation; the CUDA pod's own log says why.
    snap = healthy_snapshot("v25.3.4")
    from factory import fail_pod

    stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "cuda-validation", reason="Running", restarts=0,
               snapshot=snap)
    fail_pod(pod_for(snap, "nvidia-cuda-validator", "gpu-node-1"), "cuda-validation", snapshot=snap,
             log="Failed to allocate device vector A (error code system not yet initialized)!")
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.check_id == "DRV-005" and "system not yet initialized" in rc.message, rc


def test_runtime_refusal_is_one_failure_not_three() -> None:
    snap = healthy_snapshot("v26.3.3")
    sandbox_refused(snap, pod_for(snap, VALIDATOR, "gpu-node-1"), NO_NVIDIA_RUNTIME)
    v = judge(snap)
    failing = {cid for cid, o in v.outcomes.items() if o.status == Status.FAIL}
    assert failing == {"DRV-006"}, failing


def test_cordoned_node_pauses_its_later_layers() -> None:
    snap = healthy_snapshot()
    name = snap.nodes[0]["metadata"]["name"]
    snap.nodes[0]["spec"]["unschedulable"] = True
    v = judge(snap)
    nv = next(n for n in v.nodes if n.node == name)
    assert nv.root_cause is None and nv.transient is not None and "cordoned" in nv.transient.message


# ---- cause before symptom along the operator's own dependencies (issue 20 item 5) -----------------------------------
def without_nfd(snap: ClusterSnapshot, *, fresh: bool) -> None:
    """NFD gone: no node carries a feature.node.kubernetes.io/ label, the operator reports ready/NFDLabelsMissing.

    fresh: NFD never ran, so no node was ever labelled gpu.present and the operator created no operand DaemonSet
    (object_controls.go: no GPU node, no DaemonSets); else NFD went away later and the operator marked every node it
    had labelled gpu.present=false (its DaemonSets stay, their pods withdrawn).
    """
    for n in list(snap.gpu_node_names):
        lose_nfd_gpu_label(snap, n)
        if fresh:  # nothing ever labelled it: neither the operator nor GFD
            labels = node(snap, n)["metadata"]["labels"]
            for key in [k for k in labels if k.startswith("nvidia.com/")]:
                labels.pop(key)
    nfd = set(map(id, snap.nfd_pods))
    snap.pods = [p for p in snap.pods if id(p) not in nfd]
    snap.nfd_pods = []
    if fresh:
        for o in OPERANDS:
            if any(d["metadata"]["name"] == o.daemonset for d in snap.daemonsets):
                remove_daemonset(snap, o.daemonset)
    # Before v23.9 the operator writes no conditions (the factory builds that shape): the caller sets the state.
    for cond in snap.clusterpolicies[0]["status"].get("conditions") or []:
        cond.update({"status": "True", "reason": "NFDLabelsMissing", "message": "No NFD labels found"})
        break


def test_no_nfd_labels_anywhere_is_nfds_failure_not_the_operators() -> None:
    snap = healthy_snapshot("v25.3.4")
    without_nfd(snap, fresh=True)
    v = judge(snap)
    assert v.cluster_blocker is not None and v.cluster_blocker.check_id == "NFD-001", v.cluster_blocker
    for cid in ("OPR-003", "OPR-006"):
        o = v.outcomes[cid]
        assert o.status == Status.BLOCKED and o.reason.startswith("explained by nfd (NFD-001)"), (cid, o.reason)
    assert v.outcomes["NFD-001"].status == Status.FAIL and v.overall == NOT_CONFORMANT
    assert not [cid for cid, o in v.outcomes.items() if o.status == Status.FAIL and cid != "NFD-001"]


def test_nfd_gone_after_install_blames_nfd_on_each_node() -> None:
    snap = healthy_snapshot("v25.3.4")
    without_nfd(snap, fresh=False)
    v = judge(snap)
    assert v.cluster_blocker is None
    assert causes(v) == {n: "NFD-003" for n in snap.gpu_node_names}
    assert all("NFD stopped labelling" in n.root_cause.message for n in v.nodes if n.root_cause)
    opr3 = v.outcomes["OPR-003"]
    assert opr3.status == Status.BLOCKED and "explained by nfd (NFD-003)" in opr3.reason


def test_gpu_fallen_off_the_bus_is_a_node_fault_not_nfd() -> None:
    # NFD still labels the node; only the NVIDIA PCI device is gone (XID 79): the operator's gpu.present=false.
    snap = healthy_snapshot("v25.3.4")
    lose_nfd_gpu_label(snap, "gpu-node-2", keep_features=True)
    v = judge(snap)
    assert causes(v) == {"gpu-node-1": None, "gpu-node-2": "NFD-003", "gpu-node-3": None}
    f = next(f for f in v.outcomes["NFD-003"].findings if f.node == "gpu-node-2")
    assert "gone from the PCI bus" in f.message and "XID 79" in f.message and "NFD stopped" not in f.message
    assert f.evidence["cause"] == "gpu-gone-from-pci"


def test_dcgm_exporter_crash_does_not_hide_a_broken_device_plugin() -> None:
    snap = healthy_snapshot("v25.3.4")
    crash_container(pod_for(snap, DCGM_EXPORTER, "gpu-node-1"), "nvidia-dcgm-exporter", restarts=9, snapshot=snap)
    crash_container(pod_for(snap, DEVICE_PLUGIN, "gpu-node-1"), "nvidia-device-plugin", restarts=7, snapshot=snap)
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.layer == Layer.DEVICE_PLUGIN and not rc.off_path, rc
    opr7 = v.outcomes["OPR-007"]
    assert opr7.status == Status.FAIL and opr7.failing_nodes == ["gpu-node-1"]
    assert causes(v)["gpu-node-2"] is None and v.overall == NOT_CONFORMANT


def test_dcgm_exporter_crash_alone_fails_the_run_and_blocks_nothing() -> None:
    snap = healthy_snapshot("v25.3.4")
    crash_container(pod_for(snap, DCGM_EXPORTER, "gpu-node-1"), "nvidia-dcgm-exporter", restarts=9, snapshot=snap)
    v = judge(snap)
    nv = next(n for n in v.nodes if n.node == "gpu-node-1")
    assert nv.root_cause is not None and nv.root_cause.check_id == "OPR-007" and nv.root_cause.off_path
    assert nv.root_cause.to_dict()["off_gpu_path"] is True
    assert nv.gpu_path_clear  # still probed
    assert nv.layers[Layer.OPERATOR] == Status.FAIL
    assert all(nv.layers[layer] in (Status.PASS, Status.WARN)
               for layer in (Layer.NFD, Layer.DEPLOY_LABELS, Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN)), nv.layers
    assert v.outcomes["OPR-007"].status == Status.FAIL
    assert not [cid for cid, o in v.outcomes.items() if o.status == Status.BLOCKED]
    assert v.overall == NOT_CONFORMANT


def test_mig_manager_failure_stays_on_the_gpu_path() -> None:
    snap = healthy_snapshot("v25.3.4", mig="mixed")
    crash_container(pod_for(snap, "nvidia-mig-manager", "gpu-node-1"), "nvidia-mig-manager", snapshot=snap)
    v = judge(snap)
    nv = next(n for n in v.nodes if n.node == "gpu-node-1")
    assert nv.root_cause is not None and not nv.root_cause.off_path and not nv.gpu_path_clear


def test_mps_control_daemon_not_ready_is_named_on_its_node() -> None:
    snap = healthy_snapshot("v25.3.4")
    ds = add_mps_control_daemon(snap, ["gpu-node-1", "gpu-node-2"])
    crash_container(pod_for(snap, ds["metadata"]["name"], "gpu-node-2"), "mps-control-daemon-ctr", restarts=4,
                    snapshot=snap)
    not_ready(snap, "ClusterPolicy is not ready, states not ready: [state-mps-control-daemon]")
    v = judge(snap)
    assert causes(v) == {"gpu-node-1": None, "gpu-node-2": "OPR-003", "gpu-node-3": None}
    cluster = next(f for f in v.outcomes["OPR-003"].findings if f.node is None)
    assert cluster.status == Status.WARN and "state-mps-control-daemon (unavailable on gpu-node-2)" in cluster.message
    rc = next(n for n in v.nodes if n.node == "gpu-node-2").root_cause
    assert rc is not None and "nvidia-device-plugin-mps-control-daemon" in rc.message


def test_mps_control_daemon_waiting_for_the_toolkit_defers_to_it() -> None:
    snap = healthy_snapshot("v25.3.4")
    ds = add_mps_control_daemon(snap, ["gpu-node-1"])
    stuck_init(pod_for(snap, ds["metadata"]["name"], "gpu-node-1"), "toolkit-validation", reason="Running",
               restarts=0, snapshot=snap)
    not_ready(snap, "ClusterPolicy is not ready, states not ready: [state-mps-control-daemon]")
    v = judge(snap)
    assert causes(v)["gpu-node-1"] is None
    assert v.outcomes["OPR-003"].status == Status.WARN


def test_unknown_state_is_reported_by_name_as_unknown() -> None:
    snap = healthy_snapshot("v26.7.0")
    not_ready(snap, "ClusterPolicy is not ready, states not ready: [state-quantum-manager]")
    v = judge(snap)
    o = v.outcomes["OPR-003"]
    assert o.status == Status.WARN, o
    assert "state-quantum-manager" in o.findings[0].message and "unknown" in o.findings[0].message
    assert causes(v) == {n: None for n in snap.gpu_node_names}


def test_sandbox_state_maps_to_its_daemonset() -> None:
    from gpu_conformance.operands import BY_STATE

    assert BY_STATE["state-sandbox-device-plugin"].daemonset == "nvidia-sandbox-device-plugin-daemonset"
    assert BY_STATE["state-vgpu-manager"].daemonset == "nvidia-vgpu-manager-daemonset"
    assert BY_STATE["state-mps-control-daemon"].daemonset == "nvidia-device-plugin-mps-control-daemon"


def test_before_conditions_no_nfd_labels_is_still_nfds_failure() -> None:
    # v22.9-v23.6 write only status.state: notReady when no node has any NFD label (clusterpolicy_controller.go).
    snap = healthy_snapshot("v23.6.2")
    without_nfd(snap, fresh=True)
    snap.clusterpolicies[0]["status"] = {"state": "notReady", "namespace": "gpu-operator"}
    v = judge(snap)
    assert v.cluster_blocker is not None and v.cluster_blocker.check_id == "NFD-001"
    assert v.outcomes["OPR-003"].status == Status.BLOCKED


def test_validator_waiting_for_a_missing_driver_blames_the_driver() -> None:
    snap = healthy_snapshot("v25.3.4")
    remove_pods(snap, DRIVER, "gpu-node-1")
    stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "driver-validation", reason="Running", restarts=0,
               snapshot=snap)
    v = judge(snap)
    rc = next(n for n in v.nodes if n.node == "gpu-node-1").root_cause
    assert rc is not None and rc.check_id == "LBL-002" and DRIVER in rc.message, rc
    assert v.outcomes["DRV-004"].status == Status.BLOCKED


def test_gpu_fallen_off_the_bus_that_also_crashes_dcgm_exporter_is_the_device_plugins_finding() -> None:
    # Audit m10: XID 79 marks the GPU unhealthy (allocatable drops) and crashes the DCGM exporter on that node.
    snap = healthy_snapshot("v25.3.4", gpus_per_node=2)
    set_node_resource(snap, "gpu-node-1", 2, 1)
    crash_container(pod_for(snap, DCGM_EXPORTER, "gpu-node-1"), "nvidia-dcgm-exporter", restarts=9, snapshot=snap)
    v = judge(snap)
    assert causes(v)["gpu-node-1"] == "DPL-003"
    assert v.outcomes["DPL-003"].status == Status.FAIL and v.outcomes["OPR-007"].status == Status.FAIL


def test_mps_control_daemon_without_a_pod_on_its_node() -> None:
    snap = healthy_snapshot("v25.3.4")
    ds = add_mps_control_daemon(snap, ["gpu-node-1", "gpu-node-3"])
    remove_pods(snap, ds["metadata"]["name"], "gpu-node-3")
    not_ready(snap, "ClusterPolicy is not ready, states not ready: [state-mps-control-daemon]")
    v = judge(snap)
    assert causes(v) == {"gpu-node-1": None, "gpu-node-2": None, "gpu-node-3": "OPR-003"}
    rc = next(n for n in v.nodes if n.node == "gpu-node-3").root_cause
    assert rc is not None and "has no pod here" in rc.message
