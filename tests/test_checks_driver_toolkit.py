"""Layer 4 checks (DRV-*): healthy clusters pass in every driver mode and version; each fault fails the right check
on the right node and names the stuck stage."""

from __future__ import annotations

import pytest
from check_runner import N1, on, run
from check_runner import only_node as assert_only_node_fails
from factory import (
    DRIVER_CRD_DS,
    add_event,
    crash_container,
    fail_pod,
    healthy_snapshot,
    pod_for,
    refresh,
    remove_pods,
    set_label,
    set_policy,
    set_restarts,
    stuck_init,
)

from gpu_conformance.checks import driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.model import Status

DRV_IDS = ["DRV-001", "DRV-002", "DRV-003", "DRV-004", "DRV-005"]
VALIDATOR = "nvidia-operator-validator"
TOOLKIT = "nvidia-container-toolkit-daemonset"
DRIVER = "nvidia-driver-daemonset"
CUDA = "nvidia-cuda-validator"









# ---- healthy clusters ----------------------------------------------------------------------------------------
HEALTHY = [
    ("v25.3.4", "operator"), ("v25.10.1", "operator"), ("v26.3.3", "operator"), ("v26.7.0", "operator"),
    ("v26.3.3", "host"), ("v25.3.4", "host"), ("v26.3.3", "pre-installed"), ("v25.10.1", "pre-installed"),
    ("v26.3.3", "crd"),
]


@pytest.mark.parametrize(("version", "driver"), HEALTHY)
@pytest.mark.parametrize("check_id", DRV_IDS)
def test_healthy_cluster_passes(version, driver, check_id):
    snap = healthy_snapshot(version, driver=driver)
    findings = run(check_id, snap)
    assert sorted(f.node for f in findings) == snap.gpu_node_names
    expected = Status.NA if (check_id == "DRV-002" and driver in ("host", "pre-installed")) else Status.PASS
    assert {f.status for f in findings} == {expected}, [f.message for f in findings]


def test_host_driver_na_says_why():
    f = on("DRV-002", healthy_snapshot(driver="host"))
    assert f.status == Status.NA
    assert "spec.driver.enabled=false" in f.message and "no driver pod expected" in f.message
    f = on("DRV-002", healthy_snapshot(driver="pre-installed"))
    assert "pre-installed" in f.message


def test_healthy_validator_lists_version_chain():
    assert "gdrcopy-validation" in on("DRV-004", healthy_snapshot("v25.10.1")).message
    assert "nvidia-fs-validation" in on("DRV-004", healthy_snapshot("v25.3.4")).message
    msg = on("DRV-004", healthy_snapshot("v26.3.3")).message
    assert "driver-validation, toolkit-validation, cuda-validation" in msg and "nvidia-fs" not in msg


# ---- DRV-001 driver configuration ------------------------------------------------------------------------------
@pytest.mark.parametrize(("driver", "expect", "ok"), [
    ("operator", "operator", True), ("operator", "host", False), ("host", "operator", False),
    ("host", "host", True), ("pre-installed", "host", True), ("pre-installed", "operator", False),
    ("crd", "operator", True), ("crd", "host", False), ("host", "auto", True), ("operator", "auto", True),
])
def test_driver_configuration_against_expectation(driver, expect, ok):
    snap = healthy_snapshot(driver=driver)
    findings = run("DRV-001", snap, expect_driver=expect)
    assert {f.status for f in findings} == {Status.PASS if ok else Status.FAIL}
    if not ok:
        assert f"--expect-driver={expect}" in findings[0].message
        assert findings[0].evidence["observed"] in ("operator", "host", "pre-installed")


def test_driver_configuration_names_pre_installed_detection():
    f = on("DRV-001", healthy_snapshot(driver="pre-installed"), expect_driver="operator")
    assert f.status == Status.FAIL
    assert "nvidia.com/gpu.deploy.driver=pre-installed" in f.message


def test_driver_crd_mode_without_cr_fails():
    snap = healthy_snapshot(driver="crd")
    snap.nvidiadrivers = []
    remove_pods(snap, DRIVER_CRD_DS)
    f = on("DRV-001", snap)
    assert f.status == Status.FAIL and "no NVIDIADriver CR exists" in f.message
    assert on("DRV-002", snap).status == Status.FAIL
    snap.crds.discard("nvidiadrivers.nvidia.com")
    refresh(snap)
    assert "is not installed" in on("DRV-001", snap).message


def test_driver_opted_out_by_label_counts_as_host_on_that_node():
    snap = healthy_snapshot(driver="operator")
    remove_pods(snap, DRIVER, "gpu-node-2")
    set_label(snap, "gpu-node-2", "nvidia.com/gpu.deploy.driver", "false")
    f = on("DRV-001", snap, node="gpu-node-2")
    assert f.status == Status.PASS and "opted out" in f.message
    assert on("DRV-002", snap, node="gpu-node-2").status == Status.NA
    assert on("DRV-001", snap, node="gpu-node-2", expect_driver="operator").status == Status.FAIL


# ---- DRV-002 driver pod ----------------------------------------------------------------------------------------
def test_driver_manager_stuck():
    snap = healthy_snapshot("v26.3.3")
    pod = pod_for(snap, DRIVER, N1)
    stuck_init(pod, "k8s-driver-manager", restarts=5, snapshot=snap,
               log="Evicting GPU pods\nfailed to drain node: timed out\n")
    f = assert_only_node_fails("DRV-002", snap)
    assert "k8s-driver-manager" in f.message and "Init:CrashLoopBackOff" in f.message and "5 restarts" in f.message
    assert "failed to drain node: timed out" in f.message
    assert f.evidence["stuck_init_container"] == "k8s-driver-manager"
    assert "failed to drain node" in f.evidence["log"]
    assert f.kubectl == f"kubectl -n gpu-operator logs {pod['metadata']['name']} -c k8s-driver-manager --previous"


def _gpu_pod(name: str, ns: str, gpus: dict[str, int], phase: str = "Running") -> dict:
    """A pod of any namespace bound to gpu-node-1 asking for GPUs (limits only)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": {"nodeName": N1, "containers": [{"name": "main", "image": "cuda", "resources": {
                "limits": {k: str(v) for k, v in gpus.items()}}}]},
            "status": {"phase": phase}}


# k8s-driver-manager unloads the driver only once no pod uses the GPUs; with driver.upgradePolicy.autoUpgrade on it
# leaves evicting them to the upgrade controller (gpu-operator #2166: a driver pod replaced outside an upgrade).
@pytest.mark.parametrize("version, held, named", [
    ("v25.10.0", [_gpu_pod("trainer-0", "ml", {"nvidia.com/gpu": 1})], ["ml/trainer-0 (nvidia.com/gpu: 1)"]),
    ("v23.9.2", [_gpu_pod("infer-0", "serving", {"nvidia.com/mig-1g.5gb": 2}),
                 _gpu_pod("bound-0", "ml", {"nvidia.com/gpu": 1}, phase="Pending")],
     ["serving/infer-0 (nvidia.com/mig-1g.5gb: 2)", "ml/bound-0 (nvidia.com/gpu: 1)"]),
    ("v26.7.0", [_gpu_pod("shared-0", "ml", {"nvidia.com/gpu.shared": 1}),
                 _gpu_pod("done-0", "ml", {"nvidia.com/gpu": 1}, phase="Succeeded")], ["ml/shared-0"]),
])
def test_driver_manager_stuck_names_the_pods_holding_gpus(version, held, named):
    snap = healthy_snapshot(version)
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", restarts=5, snapshot=snap,
               log="level=info msg=Starting driver uninstallation process")
    snap.node_pods[N1] = held
    f = assert_only_node_fails("DRV-002", snap)
    assert all(n in f.message for n in named) and "done-0" not in f.message, f.message
    assert "upgrade controller" in f.message


def test_driver_manager_stuck_with_auto_upgrade_off_points_at_its_own_eviction():
    snap = healthy_snapshot("v25.10.0")
    set_policy(snap, "driver.upgradePolicy.autoUpgrade", False)
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", restarts=5, snapshot=snap)
    snap.node_pods[N1] = [_gpu_pod("trainer-0", "ml", {"nvidia.com/gpu": 1})]
    f = assert_only_node_fails("DRV-002", snap)
    assert "ml/trainer-0" in f.message and "ENABLE_GPU_POD_EVICTION" in f.message, f.message


def test_driver_manager_stuck_without_gpu_holders_keeps_the_general_reading():
    snap = healthy_snapshot("v25.10.0")
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", restarts=5, snapshot=snap)
    snap.node_pods[N1] = [_gpu_pod("done-0", "ml", {"nvidia.com/gpu": 1}, phase="Failed")]
    assert "could not prepare the node" in assert_only_node_fails("DRV-002", snap).message


def test_driver_container_crashloop_reports_restarts():
    snap = healthy_snapshot("v25.10.1")
    crash_container(pod_for(snap, DRIVER, "gpu-node-3"), "nvidia-driver-ctr", restarts=9, snapshot=snap)
    f = assert_only_node_fails("DRV-002", snap, node="gpu-node-3")
    assert "nvidia-driver-ctr" in f.message and "CrashLoopBackOff" in f.message and "9 restarts" in f.message
    assert f.evidence["restarts"] == 9


def test_driver_running_but_not_ready_startup_probe():
    snap = healthy_snapshot()
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", reason="Running", restarts=0, snapshot=snap)
    # Started 09:06; read 34 min later: past the startup probe's 60 s + 120×10 s, no longer "in progress".
    snap.read_at = "2026-10-01T09:40:00Z"
    f = assert_only_node_fails("DRV-002", snap)
    assert "running but not Ready" in f.message and "startup probe" in f.message
    assert "for 34 min, longer than its startup probe allows (21 min)" in f.message


def _probe_event(snap, pod, container, message, count=1, at="2026-01-01T00:10:00Z", field_path=True):
    ev = add_event(snap, "Pod", pod["metadata"]["name"], "Unhealthy", message, count=count)
    ev["lastTimestamp"] = at
    if field_path:
        ev["involvedObject"]["fieldPath"] = f"spec.containers{{{container}}}"
    return ev


@pytest.mark.parametrize("version", ["v22.9.1", "v23.9.1", "v25.3.4", "v26.7.0"])
def test_driver_not_ready_quotes_kubelets_startup_probe(version):
    """gpu-operator #649: the startup probe's own output (nvidia-smi: "No devices were found") is the diagnosis."""
    snap = healthy_snapshot(version)
    pod = pod_for(snap, DRIVER, N1)
    crash_container(pod, "nvidia-driver-ctr", reason="Running", restarts=390, snapshot=snap)
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe failed: No devices were found", count=41235)
    f = assert_only_node_fails("DRV-002", snap)
    assert 'kubelet: "Startup probe failed: No devices were found" (41235 times)' in f.message
    assert "nvidia-driver-ctr" in f.message and "startup probe fails" in f.message
    assert f.evidence["probe_failures"] == ['"Startup probe failed: No devices were found" (41235 times)']
    # The same pod without the event: the check still fails, with its generic reading and no quote.
    snap = healthy_snapshot(version)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", reason="Running", restarts=390, snapshot=snap)
    f = assert_only_node_fails("DRV-002", snap)
    assert "kubelet:" not in f.message and "did not build/load" in f.message


def test_probe_quotes_are_newest_first_distinct_bounded_and_per_container():
    snap = healthy_snapshot()
    pod = pod_for(snap, DRIVER, N1)
    crash_container(pod, "nvidia-driver-ctr", reason="Running", restarts=2, snapshot=snap)
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe failed: old words", at="2026-01-01T00:01:00Z")
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe failed: " + "x" * 900, at="2026-01-01T00:09:00Z")
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe errored: rpc error: context deadline exceeded",
                 at="2026-01-01T00:05:00Z")
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe failed: ancient", at="2025-12-31T00:00:00Z")
    # Another container's probe and kubelet's other Unhealthy-free events are not this container's words.
    _probe_event(snap, pod, "nvidia-peermem-ctr", "Liveness probe failed: peermem gone", at="2026-01-02T00:00:00Z")
    add_event(snap, "Pod", pod["metadata"]["name"], "BackOff", "Back-off restarting failed container")
    f = assert_only_node_fails("DRV-002", snap)
    quotes = f.evidence["probe_failures"]
    assert len(quotes) == 2
    assert quotes[0].startswith('"Startup probe failed: xxx') and quotes[0].endswith('…"') and len(quotes[0]) < 320
    assert quotes[1] == '"Startup probe errored: rpc error: context deadline exceeded"'
    assert "peermem" not in f.message and "ancient" not in f.message and "old words" not in f.message
    assert '; before: "Startup probe errored' in f.message


def test_probe_event_without_field_path_counts_for_the_pod():
    snap = healthy_snapshot()
    pod = pod_for(snap, DRIVER, N1)
    # Restarted: kubelet gave up on the startup probe at least once (within the window, with no restart, a failing
    # startup probe is what a driver that is still compiling shows: in progress, see test_time_order).
    crash_container(pod, "nvidia-driver-ctr", reason="Running", restarts=1, snapshot=snap)
    _probe_event(snap, pod, "nvidia-driver-ctr", "Startup probe failed: NVIDIA-SMI has failed", field_path=False)
    assert 'kubelet: "Startup probe failed: NVIDIA-SMI has failed"' in assert_only_node_fails("DRV-002", snap).message


def test_driver_pod_missing():
    snap = healthy_snapshot()
    remove_pods(snap, DRIVER, N1)
    f = assert_only_node_fails("DRV-002", snap)
    # The DaemonSet's own selector: app.kubernetes.io/component=nvidia-driver would select nothing before v23.9.
    assert "no driver pod" in f.message and "(app=nvidia-driver-daemonset)" in f.message
    assert "desired 3, ready 2" in f.message


def test_driver_restarts_warn():
    snap = healthy_snapshot()
    set_restarts(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", 3)
    f = assert_only_node_fails("DRV-002", snap, status=Status.WARN)
    assert "restarted 3 times" in f.message
    set_restarts(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", 1)
    assert on("DRV-002", snap).status == Status.PASS


def test_kubectl_uses_operator_namespace():
    snap = healthy_snapshot(namespace="nvidia-gpu-operator")
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", snapshot=snap)
    assert on("DRV-002", snap).kubectl.startswith("kubectl -n nvidia-gpu-operator logs ")
    assert on("DRV-002", snap, operator_namespace="ops").kubectl.startswith("kubectl -n ops logs ")


# ---- DRV-003 toolkit pod ---------------------------------------------------------------------------------------
def test_toolkit_waiting_in_driver_validation_blames_driver():
    snap = healthy_snapshot(driver="host")
    stuck_init(pod_for(snap, TOOLKIT, N1), "driver-validation", reason="Running", restarts=0, snapshot=snap)
    f = assert_only_node_fails("DRV-003", snap)
    assert "driver-validation" in f.message and "driver is not usable" in f.message and "(driver)" in f.message
    assert "nvidia-smi" in f.hint


def test_toolkit_container_crash_blames_runtime_config():
    snap = healthy_snapshot()
    crash_container(pod_for(snap, TOOLKIT, N1), "nvidia-container-toolkit-ctr", restarts=4, snapshot=snap,
                    log="unable to restart containerd: signal: killed")
    f = assert_only_node_fails("DRV-003", snap)
    assert "nvidia-container-toolkit-ctr" in f.message and "container runtime" in f.message
    assert "unable to restart containerd" in f.message
    assert "containerd" in f.hint and "CRI plugin section" in f.hint


def test_toolkit_missing_and_opt_outs():
    snap = healthy_snapshot()
    remove_pods(snap, TOOLKIT, N1)
    f = assert_only_node_fails("DRV-003", snap)
    assert "no container toolkit pod" in f.message
    set_label(snap, N1, "nvidia.com/gpu.deploy.container-toolkit", "false")
    assert on("DRV-003", snap).status == Status.NA
    set_label(snap, N1, "nvidia.com/gpu.deploy.container-toolkit", "paused-for-driver-upgrade")
    assert on("DRV-003", snap).status == Status.WARN


def test_toolkit_disabled_is_na():
    snap = healthy_snapshot(toolkit=False)
    findings = run("DRV-003", snap)
    assert {f.status for f in findings} == {Status.NA}
    assert "spec.toolkit.enabled=false" in findings[0].message


def test_toolkit_restarts_warn():
    snap = healthy_snapshot()
    set_restarts(pod_for(snap, TOOLKIT, N1), "nvidia-container-toolkit-ctr", 2)
    assert_only_node_fails("DRV-003", snap, status=Status.WARN)


# ---- DRV-004 validator chain -----------------------------------------------------------------------------------
def test_validator_stuck_in_toolkit_validation_message():
    snap = healthy_snapshot("v26.3.3", driver="host")
    pod = pod_for(snap, VALIDATOR, N1)
    stuck_init(pod, "toolkit-validation", restarts=12, snapshot=snap,
               log="running nvidia-smi\nFailed to initialize NVML: Unknown Error\n")
    f = assert_only_node_fails("DRV-004", snap)
    assert f.message.startswith("validator stuck in toolkit-validation (Init:CrashLoopBackOff, 12 restarts): "
                                "the container runtime is not configured for NVIDIA (toolkit)")
    assert 'last log line: "Failed to initialize NVML: Unknown Error"' in f.message
    assert f.evidence["stage"] == "toolkit-validation" and f.evidence["restarts"] == 12
    assert f.evidence["state"] == "waiting" and f.evidence["reason"] == "CrashLoopBackOff"
    assert "Failed to initialize NVML" in f.evidence["log"]
    assert f.kubectl == f"kubectl -n gpu-operator logs {pod['metadata']['name']} -c toolkit-validation --previous"
    assert "containerd" in f.hint


@pytest.mark.parametrize(("version", "stage", "words"), [
    ("v26.3.3", "driver-validation", "driver is not usable"),
    ("v26.3.3", "cuda-validation", "nvidia-cuda-validator"),
    ("v25.3.4", "nvidia-fs-validation", "nvidia_fs"),
    ("v25.10.1", "gdrcopy-validation", "gdrdrv"),
    ("v25.3.4", "toolkit-validation", "not configured for NVIDIA"),
])
def test_validator_names_the_stuck_stage(version, stage, words):
    snap = healthy_snapshot(version)
    stuck_init(pod_for(snap, VALIDATOR, "gpu-node-2"), stage, reason="Running", restarts=0, snapshot=snap)
    f = assert_only_node_fails("DRV-004", snap, node="gpu-node-2")
    assert f"validator stuck in {stage} (Init:" in f.message and words in f.message
    assert f.evidence["stage"] == stage and f.evidence["state"] == "running"


def test_validator_stuck_in_plugin_validation_is_not_this_layers_fault():
    snap = healthy_snapshot()
    stuck_init(pod_for(snap, VALIDATOR, N1), "plugin-validation", restarts=3, snapshot=snap)
    f = on("DRV-004", snap)
    assert f.status == Status.PASS
    assert "plugin-validation" in f.message and "DPL-006" in f.message


def test_validator_without_device_plugin_has_no_plugin_validation():
    snap = healthy_snapshot(device_plugin=False)
    assert "plugin-validation" not in [c["name"] for c in pod_for(snap, VALIDATOR, N1)["spec"]["initContainers"]]
    assert {f.status for f in run("DRV-004", snap)} == {Status.PASS}


def test_validator_missing_or_main_container_down():
    snap = healthy_snapshot()
    remove_pods(snap, VALIDATOR, N1)
    f = assert_only_node_fails("DRV-004", snap)
    assert "no validator pod" in f.message
    snap = healthy_snapshot()
    crash_container(pod_for(snap, VALIDATOR, N1), "nvidia-operator-validator", snapshot=snap)
    f = assert_only_node_fails("DRV-004", snap)
    assert "nvidia-operator-validator" in f.message and "CrashLoopBackOff" in f.message


def test_validator_lacking_a_required_stage_warns():
    snap = healthy_snapshot()
    pod = pod_for(snap, VALIDATOR, N1)
    pod["spec"]["initContainers"] = [c for c in pod["spec"]["initContainers"] if c["name"] != "cuda-validation"]
    pod["status"]["initContainerStatuses"] = [c for c in pod["status"]["initContainerStatuses"]
                                              if c["name"] != "cuda-validation"]
    f = assert_only_node_fails("DRV-004", snap, status=Status.WARN)
    assert "cuda-validation" in f.message


def test_validator_opted_out_is_na():
    snap = healthy_snapshot()
    set_label(snap, N1, "nvidia.com/gpu.deploy.operator-validator", "false")
    remove_pods(snap, VALIDATOR, N1)
    assert on("DRV-004", snap).status == Status.NA
    assert on("DRV-005", snap).status == Status.NA


def test_validator_restarts_warn():
    snap = healthy_snapshot()
    set_restarts(pod_for(snap, VALIDATOR, N1), "toolkit-validation", 4)
    assert_only_node_fails("DRV-004", snap, status=Status.WARN)


# ---- DRV-005 CUDA validator pod ---------------------------------------------------------------------------------
def test_cuda_validator_failed():
    snap = healthy_snapshot()
    pod = pod_for(snap, CUDA, "gpu-node-2")
    fail_pod(pod, "cuda-validation", exit_code=1, snapshot=snap, log="Failed to allocate device vector A "
             "(error code no CUDA-capable device is detected)!")
    f = assert_only_node_fails("DRV-005", snap, node="gpu-node-2")
    assert pod["metadata"]["name"] in f.message and "Failed" in f.message and "cuda-validation" in f.message
    assert "exit code 1" in f.message and "no CUDA-capable device" in f.message
    assert f.evidence["observed"] == "Failed" and f.evidence["expected"] == "Succeeded"
    assert f.kubectl.endswith(f"logs {pod['metadata']['name']} -c cuda-validation")


def test_cuda_validator_failure_quotes_vectoradds_error_above_its_banner():
    # vectorAdd's banner (stdout) and error (stderr) reach the log in the order the runtime read the two streams:
    # on a quick failure the banner can be last (kind tier, NVIDIA's validator v25.3.4). The error is the quote.
    snap = healthy_snapshot()
    pod = pod_for(snap, CUDA, "gpu-node-2")
    fail_pod(pod, "cuda-validation", exit_code=1, snapshot=snap, log="Failed to allocate device vector A "
             "(error code CUDA driver version is insufficient for CUDA runtime version)!\n"
             "[Vector addition of 50000 elements]")
    f = assert_only_node_fails("DRV-005", snap, node="gpu-node-2")
    assert 'error in its log: "Failed to allocate device vector A (error code CUDA driver version is insufficient' \
        in f.message, f.message
    assert "Vector addition" not in f.message


def test_cuda_validator_crashlooping():
    snap = healthy_snapshot()
    pod = pod_for(snap, CUDA, N1)
    stuck_init(pod, "cuda-validation", restarts=6, snapshot=snap)
    f = assert_only_node_fails("DRV-005", snap)
    assert "Init:CrashLoopBackOff" in f.message and "6 restarts" in f.message


def test_cuda_validator_image_pull():
    snap = healthy_snapshot()
    stuck_init(pod_for(snap, CUDA, N1), "cuda-validation", reason="ImagePullBackOff", restarts=0, snapshot=snap)
    f = assert_only_node_fails("DRV-005", snap)
    assert "Init:ImagePullBackOff" in f.message


def test_cuda_validator_still_running_warns():
    snap = healthy_snapshot()
    crash_container(pod_for(snap, CUDA, N1), CUDA, reason="Running", restarts=0, snapshot=snap)
    f = assert_only_node_fails("DRV-005", snap, status=Status.WARN)
    assert "still running" in f.message


def test_cuda_validator_new_attempt_after_the_validator_gave_up_fails():
    # NVIDIA's validator (v25.3.4) waits 5 min for its CUDA pod, exits 1 and, restarted, replaces the pod: a fresh
    # pod then looks in progress, but the validator's restarts say vectorAdd never succeeded here.
    snap = healthy_snapshot("v25.3.4")
    stuck_init(pod_for(snap, VALIDATOR, N1), "cuda-validation", reason="Running", restarts=2, snapshot=snap)
    stuck_init(pod_for(snap, CUDA, N1), "cuda-validation", reason="Running", restarts=0, snapshot=snap)
    f = assert_only_node_fails("DRV-005", snap)
    assert "new attempt" in f.message and "2 times" in f.message and f.evidence["validator_restarts"] == 2
    assert f.kubectl.endswith("-c cuda-validation --previous"), f.kubectl
    # The first attempt, still within the validator's wait: in progress.
    stuck_init(pod_for(snap, VALIDATOR, N1), "cuda-validation", reason="Running", restarts=0, snapshot=snap)
    assert assert_only_node_fails("DRV-005", snap, status=Status.WARN)


def test_cuda_validator_absent_depends_on_validator_progress():
    snap = healthy_snapshot()
    remove_pods(snap, CUDA, N1)
    f = on("DRV-005", snap)
    assert f.status == Status.PASS and "removed" in f.message

    stuck_init(pod_for(snap, VALIDATOR, N1), "toolkit-validation", snapshot=snap)
    f = on("DRV-005", snap)
    assert f.status == Status.NA and "toolkit-validation" in f.message

    snap = healthy_snapshot()
    remove_pods(snap, CUDA, N1)
    stuck_init(pod_for(snap, VALIDATOR, N1), "cuda-validation", reason="Running", restarts=0, snapshot=snap)
    f = on("DRV-005", snap)
    assert f.status == Status.FAIL and "no nvidia-cuda-validator-* pod" in f.message

    remove_pods(snap, VALIDATOR, N1)
    assert on("DRV-005", snap).status == Status.NA


def test_driver_disabled_via_policy_switches_mode():
    snap = healthy_snapshot(driver="operator")
    set_policy(snap, "driver.enabled", False)
    remove_pods(snap, DRIVER)
    assert {f.status for f in run("DRV-002", snap)} == {Status.NA}
    assert {f.evidence["observed"] for f in run("DRV-001", snap)} == {"host"}


@pytest.mark.parametrize("situation", ["opted-out-no-pod", "pod-missing", "host", "pre-installed", "healthy"])
def test_report_header_and_drv001_name_the_same_driver_mode(situation: str) -> None:
    # Issue 23: a node labelled deploy.driver=false without a driver pod was "host" in DRV-001 and "unknown" in
    # the report header; both now read facts.driver_mode.
    from gpu_conformance.facts import build_facts
    from gpu_conformance.session import driver_config

    snap = healthy_snapshot(driver="host" if situation == "host" else
                            "pre-installed" if situation == "pre-installed" else "operator")
    if situation in ("opted-out-no-pod", "pod-missing"):
        remove_pods(snap, DRIVER, "gpu-node-2")
    if situation == "opted-out-no-pod":
        set_label(snap, "gpu-node-2", "nvidia.com/gpu.deploy.driver", "false")
    refresh(snap)
    header = driver_config(build_facts(snap))
    for node in snap.gpu_node_names:
        f = on("DRV-001", snap, node=node)
        assert f.evidence["observed"] == header[node].replace("nvidiadriver-cr", "operator"), (node, f.evidence, header)
    if situation == "opted-out-no-pod":
        assert header["gpu-node-2"] == "host"


# The driver script's EXIT trap (_shutdown) ends every failed attempt with its cleanup lines: the cause is above.
_CLEANUP = "Stopping NVIDIA persistence daemon...\nUnloading NVIDIA driver kernel modules...\n" \
           "Unmounting NVIDIA driver rootfs...\n"


@pytest.mark.parametrize(("version", "log", "cause"), [
    # Build: the compiler's error under make's generic *** lines (gpu-operator #729/#751, kernels >= 5.15.0-1064).
    ("v23.9.0", "Compiling NVIDIA driver kernel modules...\nERROR: modpost: GPL-incompatible module nvidia.ko uses "
     "GPL-only symbol 'rcu_read_unlock_strict'\nmake[2]: *** [scripts/Makefile.modpost:133: Module.symvers] Error 1\n"
     "make[1]: *** [Makefile:1830: modules] Error 2\n", "GPL-only symbol 'rcu_read_unlock_strict'"),
    # Load under Secure Boot, the kernel's words quoted by the installer (gpu-operator #1726).
    ("v25.3.4", "-> Kernel module compilation complete.\nERROR: Unable to load the kernel module 'nvidia.ko'.  This "
     "happens most frequently when this kernel module was built against the wrong kernel sources\nKernel messages:\n"
     "[  412.118207] Loading of unsigned module is rejected\n", "Loading of unsigned module is rejected"),
    # Load under Secure Boot, the installer's own explanation above its boilerplate (gpu-operator #266, OpenShift).
    ("v22.9.2", "ERROR: The kernel module failed to load, because it was not signed by a key that is trusted by the "
     "kernel.\nERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when ...\n"
     "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for details.\n",
     "not signed by a key that is trusted"),
    # Kernel headers the package repositories do not have (gpu-operator #234, #85).
    ("v24.9.2", "Installing Linux kernel headers...\nError: Unable to find a match: "
     "kernel-headers-4.18.0-240.23.2.el8_3.x86_64\n", "Unable to find a match: kernel-headers"),
    ("v26.7.0", "Resolving Linux kernel version...\nCould not resolve Linux kernel version\n",
     "Could not resolve Linux kernel version"),
])
def test_driver_crashloop_quotes_the_error_above_the_cleanup(version: str, log: str, cause: str) -> None:
    snap = healthy_snapshot(version)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=11, snapshot=snap, log=log + _CLEANUP)
    f = assert_only_node_fails("DRV-002", snap)
    assert cause in f.message and "error in its log" in f.message, f.message
    assert "Unmounting NVIDIA driver rootfs" not in f.message


def test_driver_log_without_cleanup_quotes_its_last_line() -> None:
    """A container that died on its error (no cleanup after it) is quoted as before: its last line."""
    snap = healthy_snapshot("v25.10.1")
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=3, snapshot=snap,
                    log="Starting installation of NVIDIA driver\nnvidia-installer: permission denied\n")
    f = assert_only_node_fails("DRV-002", snap)
    assert 'last log line: "nvidia-installer: permission denied"' in f.message
