"""Layer 5 checks (DPL-*): healthy clusters pass in every version/mode; each fault fails the right check, and the
verdict puts an upstream break (driver/toolkit) before the device plugin it blocks."""

from __future__ import annotations

import pytest
from check_runner import N1, cluster, on, only_node, run
from factory import (
    add_runtimeclass,
    crash_container,
    drop_label,
    drop_runtimeclass,
    healthy_snapshot,
    pin_images_by_digest,
    pod_for,
    remove_pods,
    set_env,
    set_label,
    set_log,
    set_node_resource,
    set_operator_version,
    set_policy,
    set_restarts,
    stuck_init,
)

from gpu_conformance.check_input import check_input
from gpu_conformance.checks import device_plugin, driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.model import Layer, Status
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import decide

DPL_IDS = [f"DPL-00{i}" for i in range(1, 10)]
PER_NODE = DPL_IDS[:6] + ["DPL-009"]
CLUSTER = ["DPL-007", "DPL-008"]
PLUGIN = "nvidia-device-plugin-daemonset"
VALIDATOR = "nvidia-operator-validator"
GFD = "gpu-feature-discovery"











# ---- healthy clusters ------------------------------------------------------------------------------------------
HEALTHY = [
    ("v25.3.4", {}), ("v25.10.1", {}), ("v26.3.3", {}), ("v26.7.0", {}), ("v26.3.3", {"driver": "host"}),
    ("v26.3.3", {"driver": "pre-installed"}), ("v25.3.4", {"cdi": True}), ("v26.3.3", {"cdi": False}),
    ("v26.3.3", {"nri": True}), ("v26.3.3", {"mig": "mixed"}), ("v26.3.3", {"mig": "none"}),
    ("v25.10.1", {"time_slicing_replicas": 4}), ("v26.3.3", {"time_slicing_replicas": 4, "rename_shared": True}),
    ("v26.3.3", {"gpus_per_node": 8, "gpu_product": "NVIDIA-H100-80GB-HBM3"}),
]


@pytest.mark.parametrize(("version", "kw"), HEALTHY, ids=[f"{v}-{kw}" for v, kw in HEALTHY])
@pytest.mark.parametrize("check_id", DPL_IDS)
def test_healthy_cluster_passes(version, kw, check_id):
    snap = healthy_snapshot(version, **kw)
    findings = run(check_id, snap)
    if check_id in PER_NODE:
        assert sorted(f.node for f in findings) == snap.gpu_node_names
    else:
        assert [f.node for f in findings] == [None]
    assert {f.status for f in findings} == {Status.PASS}, [f.message for f in findings]


def test_healthy_messages_show_mode():
    assert "nvidia.com/mig-1g.5gb capacity 7" in on("DPL-002", healthy_snapshot(mig="mixed")).message
    assert "nvidia.com/gpu.shared capacity 4" in on(
        "DPL-002", healthy_snapshot(time_slicing_replicas=4, rename_shared=True)).message
    assert "× nvidia.com/gpu.replicas=4" in on("DPL-004", healthy_snapshot(time_slicing_replicas=4)).message
    assert "envvar" in cluster("DPL-007", healthy_snapshot("v25.3.4")).message
    assert "cdi-annotations,cdi-cri" in cluster("DPL-007", healthy_snapshot("v26.3.3")).message
    assert "envvar,cdi-annotations" in cluster("DPL-007", healthy_snapshot("v25.3.4", cdi=True)).message
    assert "NRI" in cluster("DPL-008", healthy_snapshot(nri=True)).message


# ---- DPL-001 device plugin pod ----------------------------------------------------------------------------------
def test_plugin_waiting_for_toolkit_is_blocked_upstream_but_fails_here():
    snap = healthy_snapshot()
    stuck_init(pod_for(snap, PLUGIN, N1), "toolkit-validation", reason="Running", restarts=0, snapshot=snap)
    f = only_node("DPL-001", snap)
    assert "toolkit-validation" in f.message and "Init:0/1" in f.message and "blocked upstream" in f.message


def test_plugin_crashloop_quotes_log():
    snap = healthy_snapshot()
    pod = pod_for(snap, PLUGIN, "gpu-node-2")
    crash_container(pod, "nvidia-device-plugin", restarts=8, snapshot=snap,
                    log="I1001 starting\nE1001 failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\n")
    f = only_node("DPL-001", snap, node="gpu-node-2")
    assert "nvidia-device-plugin" in f.message and "CrashLoopBackOff" in f.message and "8 restarts" in f.message
    assert "ERROR_LIBRARY_NOT_FOUND" in f.message and "ERROR_LIBRARY_NOT_FOUND" in f.evidence["log"]
    assert f.kubectl == f"kubectl -n gpu-operator logs {pod['metadata']['name']} -c nvidia-device-plugin --previous"


# A Go program that dies in a panic, a runtime fatal error or klog's Fatal prints every goroutine's stack after its
# error, so its last line is a source position: the quote is the line above the dump (log_quote).
_FRAMES = ("goroutine 1 [running]:\nmain.(*migStrategySingle).GetPlugins(0xc0001321b0)\n"
           "\t/build/cmd/nvidia-device-plugin/mig-strategy.go:87 +0x336\nmain.main()\n"
           "\t/build/cmd/nvidia-device-plugin/main.go:43 +0x3a\n")


@pytest.mark.parametrize("log, cause", [
    # v0.13 plugin, mig.strategy=single on a node with a mixed MIG layout (gpu-operator #460)
    ("Retreiving plugins.\npanic: At least one device with migEnabled=true was not configured correctly: More than "
     "one MIG device type present on node\n\n" + _FRAMES, "More than one MIG device type present on node"),
    # a nil dereference: the runtime error, then the signal line, then the dump
    ("Starting Plugins.\npanic: runtime error: invalid memory address or nil pointer dereference\n"
     "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x9a2b1c]\n\n" + _FRAMES + "exit status 2",
     "panic: runtime error: invalid memory address or nil pointer dereference"),
    # the runtime's own fatal error
    ("fatal error: concurrent map writes\n\n" + _FRAMES + "created by main.main in goroutine 1\n"
     "\t/build/cmd/nvidia-device-plugin/main.go:40 +0x1f", "fatal error: concurrent map writes"),
    # klog.Fatal dumps the goroutines after its F-line
    ("I1215 12:28:27.1 1 main.go:317] Loading configuration.\nF1215 12:28:28.123456       1 main.go:171] unable to "
     "load config: unable to parse config file: yaml: line 3: mapping values are not allowed\n" + _FRAMES,
     "unable to load config"),
    # a panic while panicking: the first one is what it died of
    ("panic: error creating plugins: nvml: Not Supported [recovered]\n\tpanic: close of closed channel\n\n" + _FRAMES,
     "panic: error creating plugins: nvml: Not Supported"),
])
def test_plugin_go_panic_quotes_the_panic_not_a_stack_frame(log, cause):
    snap = healthy_snapshot()
    crash_container(pod_for(snap, PLUGIN, N1), "nvidia-device-plugin", restarts=6, exit_code=2, snapshot=snap, log=log)
    f = only_node("DPL-001", snap)
    assert cause in f.message and "+0x" not in f.message, f.message


def test_plugin_go_panic_cut_off_says_so():
    # The 20 lines read start inside the dump: the panic is above them, and no frame is quoted as the cause.
    snap = healthy_snapshot()
    crash_container(pod_for(snap, PLUGIN, N1), "nvidia-device-plugin", restarts=6, exit_code=2, snapshot=snap,
                    log=_FRAMES * 5)
    f = only_node("DPL-001", snap)
    assert "Go stack trace" in f.message and "+0x" not in f.message, f.message


def test_plugin_log_that_goes_on_after_a_stack_dump_quotes_its_last_line():
    # A dump the program survived (SIGQUIT) is not its death: the last line stays the quote.
    snap = healthy_snapshot()
    crash_container(pod_for(snap, PLUGIN, N1), "nvidia-device-plugin", restarts=2, snapshot=snap,
                    log="panic: recovered\n" + _FRAMES + "E1001 failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    assert "ERROR_LIBRARY_NOT_FOUND" in only_node("DPL-001", snap).message


def test_plugin_config_manager_init_stuck_names_config():
    snap = healthy_snapshot(time_slicing_replicas=4)
    stuck_init(pod_for(snap, PLUGIN, N1), "config-manager-init", restarts=3, snapshot=snap)
    f = only_node("DPL-001", snap)
    assert "config-manager-init" in f.message and "time-slicing-config" in f.message


def test_plugin_missing_disabled_opted_out_restarts():
    snap = healthy_snapshot()
    remove_pods(snap, PLUGIN, N1)
    assert "no device plugin pod" in only_node("DPL-001", snap).message
    set_label(snap, N1, "nvidia.com/gpu.deploy.device-plugin", "false")
    assert on("DPL-001", snap).status == Status.NA
    set_label(snap, N1, "nvidia.com/gpu.deploy.device-plugin", "paused-for-mig-change")
    assert "paused" in only_node("DPL-001", snap, status=Status.WARN).message

    snap = healthy_snapshot(device_plugin=False)
    findings = run("DPL-001", snap)
    assert {f.status for f in findings} == {Status.NA} and "devicePlugin.enabled=false" in findings[0].message

    snap = healthy_snapshot()
    set_restarts(pod_for(snap, PLUGIN, N1), "nvidia-device-plugin", 5)
    assert "restarted 5 times" in only_node("DPL-001", snap, status=Status.WARN).message


# ---- DPL-002 / DPL-003 resources --------------------------------------------------------------------------------
def test_resource_absent_fails_and_says_present_is_not_installed():
    snap = healthy_snapshot()
    set_node_resource(snap, N1, None, None)
    f = only_node("DPL-002", snap)
    assert "nvidia.com/gpu capacity=absent, allocatable=absent" in f.message
    assert "nvidia.com/gpu.present=true only means the hardware was detected" in f.message
    assert f.evidence["observed"] == "no GPU resource"


def test_resource_zero_allocatable_fails():
    snap = healthy_snapshot(gpus_per_node=4)
    set_node_resource(snap, "gpu-node-3", 4, 0)
    f = only_node("DPL-002", snap, node="gpu-node-3")
    assert "capacity=4, allocatable=0" in f.message and "unhealthy" in f.message
    f = only_node("DPL-003", snap, node="gpu-node-3")
    assert "4 of 4 devices unhealthy" in f.message


def test_mixed_mig_without_mig_resource_fails():
    snap = healthy_snapshot(mig="mixed")
    set_node_resource(snap, N1, None, None, resource="nvidia.com/mig-1g.5gb")
    f = only_node("DPL-002", snap)
    assert "nvidia.com/mig-<profile>" in f.message


def test_device_plugin_disabled_and_no_resource_is_na():
    snap = healthy_snapshot(device_plugin=False)
    assert {f.status for f in run("DPL-002", snap)} == {Status.NA}
    assert {f.status for f in run("DPL-003", snap)} == {Status.NA}


def test_allocatable_below_capacity_reports_unhealthy_devices():
    snap = healthy_snapshot(gpus_per_node=8)
    set_node_resource(snap, N1, 8, 6)
    f = only_node("DPL-003", snap)
    assert "nvidia.com/gpu allocatable 6 < capacity 8: 2 of 8 devices unhealthy" in f.message
    assert f.evidence["observed"] == {"nvidia.com/gpu": "6"} and f.evidence["expected"] == {"nvidia.com/gpu": "8"}
    assert "logs" in f.kubectl and "nvidia-device-plugin" in f.kubectl
    assert on("DPL-002", snap).status == Status.PASS
    set_node_resource(snap, N1, 8, 7)  # a single unhealthy device counts too
    assert "1 of 8 devices unhealthy" in only_node("DPL-003", snap).message


# ---- DPL-004 count vs GFD ---------------------------------------------------------------------------------------
def test_count_below_gfd():
    snap = healthy_snapshot(gpus_per_node=2)
    set_node_resource(snap, N1, 1, 1)
    f = only_node("DPL-004", snap)
    assert "capacity nvidia.com/gpu=1 but GFD expects 2" in f.message and "nvidia.com/gpu.count=2" in f.message


def test_count_time_slicing_multiplies():
    snap = healthy_snapshot(time_slicing_replicas=4)
    set_node_resource(snap, N1, 1, 1)
    f = only_node("DPL-004", snap)
    assert "GFD expects 4" in f.message and "nvidia.com/gpu.replicas=4" in f.message


def test_count_mixed_mig_per_profile():
    snap = healthy_snapshot(mig="mixed")
    set_node_resource(snap, N1, 3, 3, resource="nvidia.com/mig-1g.5gb")
    f = only_node("DPL-004", snap)
    assert "nvidia.com/mig-1g.5gb=3 but GFD expects 7" in f.message and "MIG profile" in f.message


def test_count_not_applicable_without_gfd():
    snap = healthy_snapshot(gfd=False)
    assert {f.status for f in run("DPL-004", snap)} == {Status.NA}
    snap = healthy_snapshot()
    drop_label(snap, N1, "nvidia.com/gpu.count")
    assert on("DPL-004", snap).status == Status.NA


# ---- DPL-005 GFD labels -----------------------------------------------------------------------------------------
def test_gfd_labels_missing_with_gfd_blocked():
    snap = healthy_snapshot()
    for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.memory"):
        drop_label(snap, N1, key)
    stuck_init(pod_for(snap, GFD, N1), "toolkit-validation", reason="Running", restarts=0, snapshot=snap)
    f = only_node("DPL-005", snap)
    assert "nvidia.com/gpu.product, nvidia.com/gpu.memory" in f.message
    assert "toolkit-validation" in f.message and "Init:0/1" in f.message


def test_gfd_labels_missing_with_gfd_ready_points_at_nfd():
    snap = healthy_snapshot()
    drop_label(snap, N1, "nvidia.com/gpu.count")
    f = only_node("DPL-005", snap)
    assert "nvidia.com/gpu.count" in f.message and "extraLabelNs" in f.message


def test_gfd_cuda_driver_label_alternatives():
    snap = healthy_snapshot()
    drop_label(snap, N1, "nvidia.com/cuda.driver-version.full")
    assert on("DPL-005", snap).status == Status.PASS
    drop_label(snap, N1, "nvidia.com/cuda.driver-version.major")
    drop_label(snap, N1, "nvidia.com/cuda.driver.major")
    assert "nvidia.com/cuda.driver-version.full" in only_node("DPL-005", snap).message


def test_gfd_disabled_or_opted_out_is_na():
    assert {f.status for f in run("DPL-005", healthy_snapshot(gfd=False))} == {Status.NA}
    snap = healthy_snapshot()
    set_label(snap, N1, "nvidia.com/gpu.deploy.gpu-feature-discovery", "false")
    assert on("DPL-005", snap).status == Status.NA


# ---- DPL-006 plugin-validation ----------------------------------------------------------------------------------
# The device plugin withdrawn by configuration while the validator still waits for a GPU resource: releases before
# v23.9.0 keep plugin-validation with spec.devicePlugin.enabled=false (gpu-operator #486), and no release's
# validator skips a node labelled nvidia.com/gpu.deploy.device-plugin=false (gpu-operator #2550).
_WAITING = "GPU resources are not yet discovered by the node, retry: 30"


@pytest.mark.parametrize("version", ["v22.9.0", "v22.9.2", "v23.3.2", "v23.6.2"])
def test_plugin_validation_waits_for_a_disabled_device_plugin_before_v23_9(version):
    snap = healthy_snapshot(version, device_plugin=False)
    pod = pod_for(snap, VALIDATOR, N1)
    stuck_init(pod, "plugin-validation", restarts=5, snapshot=snap, log=_WAITING)
    f = only_node("DPL-006", snap)
    assert "spec.devicePlugin.enabled=false" in f.message and "v23.9.0" in f.message, f.message
    assert "retry: 30" in f.message
    # Nothing says the plugin failed: DPL-002 leaves a disabled plugin's missing resource to another plugin.
    assert {x.status for x in run("DPL-002", snap)} == {Status.NA}


@pytest.mark.parametrize("version", ["v23.9.0", "v25.3.4", "v26.7.0"])
def test_disabled_device_plugin_has_no_plugin_validation_from_v23_9(version):
    snap = healthy_snapshot(version, device_plugin=False)
    assert {f.status for f in run("DPL-006", snap)} == {Status.NA}


def test_disabled_device_plugin_before_v23_9_passes_when_another_plugin_advertises():
    snap = healthy_snapshot("v22.9.2", device_plugin=False)
    set_node_resource(snap, N1, 1, 1)
    assert on("DPL-006", snap).status == Status.PASS
    assert on("DPL-002", snap).status == Status.PASS


@pytest.mark.parametrize("version", ["v22.9.2", "v25.10.1", "v26.7.0"])
def test_device_plugin_opted_out_on_a_node_is_named_not_blamed(version):
    snap = healthy_snapshot(version)
    set_label(snap, N1, "nvidia.com/gpu.deploy.device-plugin", "false")
    remove_pods(snap, "nvidia-device-plugin-daemonset", N1)
    set_node_resource(snap, N1, None, None)
    stuck_init(pod_for(snap, VALIDATOR, N1), "plugin-validation", restarts=9, snapshot=snap, log=_WAITING)
    f = only_node("DPL-002", snap)
    assert "nvidia.com/gpu.deploy.device-plugin=false" in f.message and "never registered" not in f.message, f.message
    f = only_node("DPL-006", snap)
    assert "nvidia.com/gpu.deploy.device-plugin=false" in f.message and "no release" in f.message, f.message


def test_plugin_validation_stuck():
    snap = healthy_snapshot("v25.10.1")
    set_node_resource(snap, N1, None, None)
    pod = pod_for(snap, VALIDATOR, N1)
    stuck_init(pod, "plugin-validation", restarts=3, snapshot=snap, log="GPU resources are not discovered by the node")
    f = only_node("DPL-006", snap)
    assert f.message.startswith("validator stuck in plugin-validation (Init:CrashLoopBackOff, 3 restarts): "
                                "the device plugin has not advertised")
    assert "GPU resources are not discovered" in f.message and f.evidence["stage"] == "plugin-validation"
    assert f.kubectl.endswith(f"logs {pod['metadata']['name']} -c plugin-validation --previous")


# plugin-validation with its test workload (WITH_WORKLOAD=true: the chart's default through v23.3, v22.9.1 here).
OLD = "v22.9.1"
TEST_POD_APP = "nvidia-device-plugin-validator"
REFUSED = ("Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
           "Requested: 1, Available: 0, which is unexpected")


def _workload(name: str, ns: str, node: str, gpus: dict[str, int], phase: str = "Running", *,
              init: dict[str, int] | None = None, app: str = "trainer") -> dict:
    """A pod of any namespace bound to the node, asking for GPUs (limits only, as most workloads write it)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
           "spec": {"nodeName": node, "containers": [
               {"name": "main", "image": "cuda", "resources": {"limits": {k: str(v) for k, v in gpus.items()}}}]},
           "status": {"phase": phase}}
    if init is not None:
        pod["spec"]["initContainers"] = [{"name": "warmup", "image": "cuda",
                                          "resources": {"limits": {k: str(v) for k, v in init.items()}}}]
    return pod


def _stuck_with_workload(version: str = OLD, gpus: int = 1, refused: bool = True, *,
                         pods: list[dict] | None = None) -> dict:
    """gpu-operator #481: plugin-validation crash-loops because kubelet refuses its test pod."""
    snap = healthy_snapshot(version, gpu_nodes=2)
    set_node_resource(snap, N1, gpus, gpus)
    stuck_init(pod_for(snap, VALIDATOR, N1), "plugin-validation", restarts=14, snapshot=snap,
               log="gave up waiting for pod nvidia-device-plugin-validator-x7k2p to be available")
    if refused:
        test = _workload("nvidia-device-plugin-validator-x7k2p", snap.operator_namespace, N1, {"nvidia.com/gpu": 1},
                         "Failed", app=TEST_POD_APP)
        test["status"].update({"reason": "UnexpectedAdmissionError", "message": REFUSED})
        snap.pods.append(test)
    if pods is not None:
        snap.node_pods[N1] = pods
    return snap


def test_plugin_validation_all_gpus_in_use_by_other_namespaces_is_busy_not_broken():
    """#481: the node's only GPU is held by a user pod; the validator's own test pod is refused. Not a failure."""
    snap = _stuck_with_workload(pods=[_workload("jupyter-0", "ml-team", N1, {"nvidia.com/gpu": 1})])
    f = only_node("DPL-006", snap, status=Status.WARN)
    assert f.message.startswith("all GPUs in use, not broken: all 1 nvidia.com/gpu held by running pods: "
                                "ml-team/jupyter-0 (nvidia.com/gpu: 1)")
    assert "Available: 0" in f.message and f.evidence["busy"] is True
    assert f.evidence["gpus_held_by_pods"] == {"ml-team/jupyter-0": {"nvidia.com/gpu": 1}}
    # Several pods, of several namespaces, sharing the node's 4 GPUs: all in use as well.
    snap = _stuck_with_workload(gpus=4, pods=[_workload("a", "team-a", N1, {"nvidia.com/gpu": 3}),
                                              _workload("b", "team-b", N1, {"nvidia.com/gpu": 1})])
    assert only_node("DPL-006", snap, status=Status.WARN).evidence["busy"] is True


def test_plugin_validation_with_a_free_gpu_is_a_failure():
    """Some GPUs allocated, one free: the test pod should have had it; its failure is the node's."""
    snap = _stuck_with_workload(gpus=4, pods=[_workload("a", "team-a", N1, {"nvidia.com/gpu": 3})])
    f = only_node("DPL-006", snap)
    assert "the device plugin advertises nvidia.com/gpu=4 (3 of 4 nvidia.com/gpu held by running pods)" in f.message
    assert 'kubelet refused its test pod nvidia-device-plugin-validator-x7k2p: "Pod was rejected' in f.message


def test_finished_pods_hold_no_gpus():
    """The scheduler's rule: Succeeded and Failed pods hold nothing, whatever their spec asks for."""
    done = [_workload("job-1", "batch", N1, {"nvidia.com/gpu": 1}, "Succeeded"),
            _workload("job-2", "batch", N1, {"nvidia.com/gpu": 1}, "Failed"),
            _workload("elsewhere", "batch", "gpu-node-2", {"nvidia.com/gpu": 1})]
    f = only_node("DPL-006", _stuck_with_workload(pods=done))
    assert "0 of 1 nvidia.com/gpu held by running pods" in f.message


def test_gpu_requests_follow_the_schedulers_rule():
    from gpu_conformance.cluster.gpu_usage import pod_gpu_requests

    # A regular init container runs alone: the pod needs the larger of it and its app containers.
    assert pod_gpu_requests(_workload("p", "x", N1, {"nvidia.com/gpu": 1}, init={"nvidia.com/gpu": 2})) == \
        {"nvidia.com/gpu": 2}
    # A sidecar (restartPolicy Always) runs alongside: it adds up.
    pod = _workload("p", "x", N1, {"nvidia.com/gpu": 1}, init={"nvidia.com/gpu": 1})
    pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    assert pod_gpu_requests(pod) == {"nvidia.com/gpu": 2}
    # Requests win over limits where both are given; other resources are not GPUs.
    pod = _workload("p", "x", N1, {"nvidia.com/mig-1g.10gb": 2, "cpu": 4})
    assert pod_gpu_requests(pod) == {"nvidia.com/mig-1g.10gb": 2}


def test_plugin_validation_busy_by_kubelets_word_when_holders_were_not_read():
    """More stuck nodes than the reader lists pods for: kubelet's "Available: 0" is the evidence."""
    f = only_node("DPL-006", _stuck_with_workload(pods=None), status=Status.WARN)
    assert "kubelet has no free GPU for it (who holds them was not read)" in f.message
    # No refusal and nothing read: nothing says the GPUs are in use, so the failed test is the node's.
    f = only_node("DPL-006", _stuck_with_workload(refused=False, pods=None))
    assert "who holds its GPUs was not read" in f.message and "test pod nvidia-device-plugin-validator-*" in f.message


def test_plugin_validation_mig_resource_all_in_use():
    snap = _stuck_with_workload(gpus=0, refused=False,
                                pods=[_workload("a", "team-a", N1, {"nvidia.com/mig-1g.10gb": 7})])
    set_node_resource(snap, N1, 7, 7, resource="nvidia.com/mig-1g.10gb")
    set_node_resource(snap, N1, None, None)
    f = only_node("DPL-006", snap, status=Status.WARN)
    assert "all 7 nvidia.com/mig-1g.10gb held by running pods" in f.message


def test_plugin_validation_without_workload_and_gpus_advertised_is_transient():
    """WITH_WORKLOAD=false checks capacity only: capacity there now means its next retry passes."""
    snap = healthy_snapshot("v25.3.4")
    stuck_init(pod_for(snap, VALIDATOR, N1), "plugin-validation", restarts=2, snapshot=snap)
    f = only_node("DPL-006", snap, status=Status.WARN)
    assert f.message.startswith("transient: ") and f.evidence["WITH_WORKLOAD"] == "false"


def test_plugin_validation_not_reached_or_not_present():
    snap = healthy_snapshot()
    stuck_init(pod_for(snap, VALIDATOR, N1), "toolkit-validation", snapshot=snap)
    f = on("DPL-006", snap)
    assert f.status == Status.NA and "toolkit-validation" in f.message and "DRV-004" in f.message
    assert {f.status for f in run("DPL-006", healthy_snapshot(device_plugin=False))} == {Status.NA}
    snap = healthy_snapshot()
    pod = pod_for(snap, VALIDATOR, N1)
    pod["spec"]["initContainers"] = [c for c in pod["spec"]["initContainers"] if c["name"] != "plugin-validation"]
    assert only_node("DPL-006", snap, status=Status.WARN).evidence["observed"] == "absent"


# ---- DPL-007 CDI mode -------------------------------------------------------------------------------------------
def test_cdi_expected_but_plugin_on_envvar():
    snap = healthy_snapshot("v26.3.3")
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "envvar")
    for expect in ("yes", "auto"):
        f = cluster("DPL-007", snap, expect_cdi=expect)
        assert f.status == Status.FAIL
        assert "the device plugin is on envvar" in f.message
        assert "a probe without runtimeClassName gets no GPU" in f.message
        assert f.evidence["observed"]["DEVICE_LIST_STRATEGY"] == "envvar"


def test_plugin_on_envvar_under_cdi_before_v25_10_with_the_operators_toolkit_fails():
    """Before v25.10 `nvidia` is containerd's default runtime and, in CDI mode, resolves NVIDIA_VISIBLE_DEVICES as CDI
    devices of its default kind. The operator's toolkit sets management.nvidia.com/gpu, whose spec has only `all`:
    the kind tier's real operator v25.3.4 with its toolkit v1.17.8 refuses every GPU container then
    (tests/test_kind.py)."""
    snap = healthy_snapshot("v25.3.4", cdi=True)
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "envvar")
    f = cluster("DPL-007", snap)
    assert f.status == Status.FAIL and "unresolvable CDI devices management.nvidia.com/gpu=GPU-" in f.message
    assert f.evidence["observed"]["toolkit default CDI kind"] == "management.nvidia.com/gpu"


def test_plugin_on_envvar_under_cdi_before_v25_10_with_a_host_toolkit_still_gives_gpus():
    """With the toolkit on the host (toolkit.enabled=false, no DaemonSet) the runtime's default kind is nvidia.com/gpu,
    the kind of the node spec `nvidia-ctk cdi generate` writes: an inconsistency (WARN), not a cluster without GPUs;
    asked for CDI by name, still FAIL."""
    snap = healthy_snapshot("v25.3.4", cdi=True, toolkit=False)
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "envvar")
    f = cluster("DPL-007", snap)
    assert f.status == Status.WARN and "GPUs still reach pods through the nvidia runtime" in f.message
    assert cluster("DPL-007", snap, expect_cdi="yes").status == Status.FAIL


def test_cdi_expected_but_policy_off():
    f = cluster("DPL-007", healthy_snapshot("v25.3.4"), expect_cdi="yes")
    assert f.status == Status.FAIL and "--expect-cdi=yes" in f.message and "spec.cdi.enabled=false" in f.message
    assert cluster("DPL-007", healthy_snapshot("v25.3.4"), expect_cdi="no").status == Status.PASS


def test_cdi_not_expected_but_on():
    f = cluster("DPL-007", healthy_snapshot("v26.3.3"), expect_cdi="no")
    assert f.status == Status.FAIL and "--expect-cdi=no" in f.message
    assert cluster("DPL-007", healthy_snapshot("v26.3.3"), expect_cdi="yes").status == Status.PASS


def test_plugin_cdi_but_policy_off():
    snap = healthy_snapshot("v26.3.3", cdi=False)
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
    f = cluster("DPL-007", snap)
    assert f.status == Status.FAIL and "has CDI off" in f.message and "enable_cdi" in f.message


def test_cdi_default_follows_operator_version_when_field_absent():
    snap = healthy_snapshot("v26.3.3")
    set_policy(snap, "cdi.enabled", None)
    f = cluster("DPL-007", snap)
    assert f.status == Status.PASS and "unset (default true for operator v26.3.3)" in f.message
    snap = healthy_snapshot("v25.3.4")
    set_policy(snap, "cdi.enabled", None)
    assert "default false" in cluster("DPL-007", snap).message
    set_operator_version(snap, "main-latest")  # no release tag: the validator image still names v25.3.4
    assert "default false for operator v25.3.4" in cluster("DPL-007", snap).message
    pin_images_by_digest(snap)  # OLM: no tag anywhere, the version is unknown
    f = cluster("DPL-007", snap)
    assert f.status == Status.PASS and "operator version unknown" in f.message
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
    f = cluster("DPL-007", snap)  # either rendering of a supported version is accepted
    assert f.status == Status.PASS, f.message


def test_overridden_strategy_warns():
    snap = healthy_snapshot("v26.3.3")
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "cdi-cri")
    f = cluster("DPL-007", snap)
    assert f.status == Status.WARN and "cdi-annotations,cdi-cri" in f.message


def test_cdi_without_device_plugin_compares_policy_only():
    snap = healthy_snapshot(device_plugin=False)
    assert cluster("DPL-007", snap).status == Status.PASS
    assert cluster("DPL-007", snap, expect_cdi="no").status == Status.FAIL


# ---- DPL-008 RuntimeClasses -------------------------------------------------------------------------------------
def test_runtimeclass_nvidia_missing():
    snap = healthy_snapshot("v25.3.4")
    drop_runtimeclass(snap, "nvidia")
    f = cluster("DPL-008", snap)
    assert f.status == Status.FAIL and "RuntimeClass nvidia missing" in f.message and "cannot start" in f.message


def test_runtimeclass_cdi_missing_when_cdi_on():
    snap = healthy_snapshot("v26.3.3")
    drop_runtimeclass(snap, "nvidia-cdi")
    f = cluster("DPL-008", snap)
    assert f.status == Status.FAIL and "nvidia-cdi missing" in f.message and "CDI on" in f.message


def test_runtimeclass_wrong_handler():
    snap = healthy_snapshot("v26.3.3")
    drop_runtimeclass(snap, "nvidia")
    add_runtimeclass(snap, "nvidia", handler="runc")
    f = cluster("DPL-008", snap)
    assert f.status == Status.FAIL and "handler 'runc'" in f.message


def test_runtimeclass_leftovers_warn():
    snap = healthy_snapshot("v26.3.3", cdi=False)
    add_runtimeclass(snap, "nvidia-cdi")
    assert "left over" in cluster("DPL-008", snap).message
    assert cluster("DPL-008", snap).status == Status.WARN
    snap = healthy_snapshot("v26.3.3", nri=True)
    add_runtimeclass(snap, "nvidia")
    assert cluster("DPL-008", snap).status == Status.WARN


# ---- with the verdict: an upstream break is the root cause, the plugin is blocked ---------------------------------
def test_verdict_orders_toolkit_before_plugin():
    snap = healthy_snapshot("v26.3.3", driver="host")
    stuck_init(pod_for(snap, VALIDATOR, N1), "toolkit-validation", restarts=12, snapshot=snap)
    stuck_init(pod_for(snap, PLUGIN, N1), "toolkit-validation", reason="Running", restarts=0, snapshot=snap)
    set_node_resource(snap, N1, None, None)
    checks = [REGISTRY[c] for c in sorted(REGISTRY) if c.startswith(("DRV-", "DPL-"))]
    inp = check_input(snap, Settings())
    findings = [f for c in checks for f in c.run(inp)]
    verdict = decide(checks, findings, snap.gpu_node_names, [Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN])
    node = next(n for n in verdict.nodes if n.node == N1)
    assert node.root_cause is not None and node.root_cause.check_id == "DRV-004"
    assert "toolkit-validation" in node.root_cause.message
    assert node.layers[Layer.DEVICE_PLUGIN] == Status.BLOCKED
    assert verdict.outcomes["DPL-001"].status == Status.BLOCKED
    assert verdict.outcomes["DPL-002"].blocked_nodes == [N1]
    assert all(n.root_cause is None for n in verdict.nodes if n.node != N1)


def test_verdict_cdi_mismatch_is_device_plugin_root_cause():
    snap = healthy_snapshot("v26.3.3")
    set_env(snap, PLUGIN, "nvidia-device-plugin", "DEVICE_LIST_STRATEGY", "envvar")
    checks = [REGISTRY[c] for c in sorted(REGISTRY) if c.startswith(("DRV-", "DPL-"))]
    inp = check_input(snap, Settings(expect_cdi="yes"))
    findings = [f for c in checks for f in c.run(inp)]
    verdict = decide(checks, findings, snap.gpu_node_names, [Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN])
    assert {n.root_cause.check_id for n in verdict.nodes} == {"DPL-007"}
    assert verdict.outcomes["DPL-007"].status == Status.FAIL


# ---- the MIG manager's outcome (DPL-009) ---------------------------------------------------------------------------
MIG_MANAGER = "nvidia-mig-manager"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_LOG = ("Applying the selected MIG config to the node\n"
           "Error applying MIG configuration with hooks: error setting MIGConfig: error attempting multiple config "
           "orderings: all orderings failed")


def _dpl_verdict(snap):
    checks = [REGISTRY[c] for c in sorted(REGISTRY) if c.startswith(("DRV-", "DPL-"))]
    inp = check_input(snap, Settings())
    findings = [f for c in checks for f in c.run(inp)]
    return decide(checks, findings, snap.gpu_node_names, [Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN])


def test_mig_config_failed_is_the_nodes_root_cause_in_the_mig_managers_words():
    snap = healthy_snapshot("v26.3.3", mig="mixed")
    set_label(snap, N1, MIG_STATE, "failed")
    set_log(snap, pod_for(snap, MIG_MANAGER, N1), MIG_MANAGER, MIG_LOG)
    # What a failed repartition leaves: the GPU whole, no nvidia.com/mig-1g.5gb as GFD's count expects.
    set_node_resource(snap, N1, None, None, resource="nvidia.com/mig-1g.5gb")
    set_node_resource(snap, N1, 1, 1)
    f = only_node("DPL-009", snap)
    assert "nvidia.com/mig.config=all-1g.5gb" in f.message and "failed" in f.message
    assert 'last log line: "Error applying MIG configuration' in f.message
    assert f.evidence["log"].startswith("Applying the selected MIG config")
    assert f.kubectl.startswith("kubectl -n gpu-operator logs nvidia-mig-manager-")
    assert f.kubectl.endswith("-c nvidia-mig-manager")
    node = next(n for n in _dpl_verdict(snap).nodes if n.node == N1)
    assert node.root_cause is not None and node.root_cause.check_id == "DPL-009"


def test_mig_config_failed_without_logs_still_fails():
    snap = healthy_snapshot("v23.6.2", gpu_product="NVIDIA-A100-SXM4-40GB")
    set_label(snap, N1, MIG_STATE, "failed")
    f = only_node("DPL-009", snap)
    assert "nvidia.com/mig.config=all-disabled" in f.message and "last log line" not in f.message


@pytest.mark.parametrize("state", ["pending", "rebooting"])
def test_mig_config_in_progress_is_a_transient_pause(state):
    snap = healthy_snapshot("v26.3.3", mig="mixed")
    set_label(snap, N1, MIG_STATE, state)
    f = only_node("DPL-009", snap, status=Status.WARN)
    assert f.evidence["transient"] is True and f"{MIG_STATE}={state}" in f.message
    node = next(n for n in _dpl_verdict(snap).nodes if n.node == N1)
    assert node.root_cause is None and node.transient is not None and node.transient.check_id == "DPL-009"


def test_mig_config_unknown_state_warns_by_name():
    snap = healthy_snapshot("v26.3.3", mig="mixed")
    set_label(snap, N1, MIG_STATE, "half-done")
    f = only_node("DPL-009", snap, status=Status.WARN)
    assert "'half-done'" in f.message and "transient" not in f.evidence


def test_mig_config_success_or_absent_passes():
    snap = healthy_snapshot("v26.3.3", mig="mixed")
    assert "MIG layout all-1g.5gb applied" in on("DPL-009", snap).message
    snap = healthy_snapshot("v26.3.3", mig="none")
    assert MIG_STATE not in snap.nodes[0]["metadata"]["labels"]
    assert {f.status for f in run("DPL-009", snap)} == {Status.PASS}
