"""Layer operator: each check passes on healthy installs and fails on the fault it exists for."""

from __future__ import annotations

import pytest
from factory import (
    crash_container,
    healthy_snapshot,
    pin_images_by_digest,
    pod_for,
    refresh,
    remove_daemonset,
    set_operator_version,
    set_policy,
    stuck_init,
)

from gpu_conformance.check_input import check_input
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Finding, Status
from gpu_conformance.settings import Settings

SETTINGS = Settings(operator_namespace="gpu-operator")
VERSIONS = ["v25.3.4", "v25.10.1", "v26.3.3"]


def run(check_id: str, snap: ClusterSnapshot) -> list[Finding]:
    return REGISTRY[check_id].run(check_input(refresh(snap), SETTINGS))


def statuses(findings: list[Finding]) -> set[Status]:
    return {f.status for f in findings}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("driver", ["operator", "host", "pre-installed"])
def test_healthy_installs_pass_every_operator_check(version: str, driver: str) -> None:
    snap = healthy_snapshot(version, driver=driver)
    for cid in ("OPR-001", "OPR-002", "OPR-003", "OPR-004", "OPR-005", "OPR-006", "OPR-007"):
        assert statuses(run(cid, snap)) == {Status.PASS}, (cid, [f.message for f in run(cid, snap)])
    assert version in run("OPR-005", snap)[0].message


def test_crd_missing_fails() -> None:
    snap = healthy_snapshot()
    snap.crds.clear()
    (f,) = run("OPR-001", snap)
    assert f.status == Status.FAIL and "not installed" in f.message and f.node is None


@pytest.mark.parametrize(("served", "ok"), [(["v1"], True), (["v1alpha1", "v1"], True), (["v1alpha1"], False),
                                             ([], False)])
def test_a_crd_that_does_not_serve_v1_is_named_not_read_as_no_clusterpolicy(served: list[str], ok: bool) -> None:
    # Issue 26: a CRD serving only another version answered 404 to the ClusterPolicy LIST: "no ClusterPolicy".
    snap = healthy_snapshot()
    snap.crd_served = {"clusterpolicies.nvidia.com": served}
    if not ok:
        snap.clusterpolicies.clear()  # what the 404 on nvidia.com/v1 leaves
    (f,) = run("OPR-001", snap)
    assert f.status == (Status.PASS if ok else Status.FAIL), f.message
    if not ok:
        assert "does not serve v1" in f.message and f.evidence["observed"] == served


def test_served_versions_are_read_from_the_crd() -> None:
    from gpu_conformance.cluster.reader import served_versions

    crd = {"spec": {"versions": [{"name": "v1", "served": False}, {"name": "v1alpha1", "served": True}]}}
    assert served_versions(crd) == ["v1alpha1"]
    assert served_versions({"spec": {}}) is None  # an object that does not say is not judged


def test_no_clusterpolicy_fails_and_later_checks_say_na() -> None:
    snap = healthy_snapshot()
    snap.clusterpolicies.clear()
    assert run("OPR-002", snap)[0].status == Status.FAIL
    assert run("OPR-003", snap)[0].status == Status.NA
    assert run("OPR-006", snap)[0].status == Status.NA


def _set_condition(snap: ClusterSnapshot, state: str, ready: str, reason: str, message: str,
                   error_reason: str = "", error_message: str = "") -> None:
    cp = snap.clusterpolicies[0]
    cp["status"]["state"] = state
    cp["status"]["conditions"] = [
        {"type": "Ready", "status": ready, "reason": reason, "message": message},
        {"type": "Error", "status": "True" if ready == "False" else "False",
         "reason": error_reason or ("Ready" if ready == "True" else "Error"), "message": error_message},
    ]


def test_operand_not_ready_names_the_states() -> None:
    snap = healthy_snapshot()
    _set_condition(snap, "notReady", "False", "Error", "", "OperandNotReady",
                   "ClusterPolicy is not ready; states not ready: [state-container-toolkit]")
    (f,) = run("OPR-003", snap)
    # Nothing is unavailable in this snapshot, so no node explains the state: a (non-blocking) failure.
    assert f.status == Status.FAIL and "state-container-toolkit" in f.message and "OperandNotReady" in f.message
    assert not f.blocking


def test_not_ready_read_before_the_operator_rewrote_its_conditions_is_the_operand_symptom() -> None:
    # The operator writes state=notReady, then (a second update) Ready=False OperandNotReady: read in between, as the
    # kind tier's CUDA-stage fault once was, the unavailable validator explains it; no cluster blocker.
    snap = healthy_snapshot("v25.3.4")
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-1"), "cuda-validation", reason="Running",
               restarts=0, snapshot=snap)
    _set_condition(snap, "notReady", "True", "Reconciled",
                   "ClusterPolicy is ready as all resources have been successfully reconciled")
    (f,) = run("OPR-003", snap)
    assert f.status == Status.WARN and not f.blocking and "gpu-node-1" in f.message, f.message


@pytest.mark.parametrize(("reason", "words"), [("NoGPUNodes", "NoGPUNodes"), ("NFDLabelsMissing", "Node Feature")])
def test_ready_but_not_reconciled_fails_with_own_message(reason: str, words: str) -> None:
    snap = healthy_snapshot()
    _set_condition(snap, "ready", "True", reason, "x")
    (f,) = run("OPR-003", snap)
    assert f.status == Status.FAIL and words in f.message


def test_operator_scaled_to_zero_fails() -> None:
    snap = healthy_snapshot()
    dep = snap.deployment("gpu-operator")
    dep["spec"]["replicas"] = 0
    dep["status"] = {"replicas": 0}
    snap.operator_pods.clear()
    snap.pods[:] = [p for p in snap.pods if p["metadata"].get("labels", {}).get("app") != "gpu-operator"]
    (f,) = run("OPR-004", snap)
    assert f.status == Status.FAIL and "scaled to 0" in f.message


def test_operator_crashloop_fails() -> None:
    snap = healthy_snapshot()
    pod = snap.operator_pods[0]
    crash_container(pod, "gpu-operator", restarts=7)
    snap.deployment("gpu-operator")["status"]["availableReplicas"] = 0
    (f,) = run("OPR-004", snap)
    assert f.status == Status.FAIL and "CrashLoopBackOff" in f.message and "7" in f.message


def test_untagged_operator_image_reads_version_elsewhere() -> None:
    snap = healthy_snapshot("v25.3.4")
    set_operator_version(snap, "main-latest")
    (f,) = run("OPR-005", snap)
    assert f.status == Status.PASS and "v25.3.4" in f.message and "validator image" in f.message


def test_version_pinned_by_digest_everywhere_warns_and_fails_nothing() -> None:
    snap = healthy_snapshot("v25.10.1")
    pin_images_by_digest(snap)
    (f,) = run("OPR-005", snap)
    assert f.status == Status.WARN and "version unknown" in f.message
    # A healthy OLM-style cluster: no check may fail for want of a version (LBL-001 must not demand v26.7's label).
    inp = check_input(snap, Settings())
    assert not [g for c in REGISTRY.values() if c.func for g in c.run(inp) if g.status == Status.FAIL]


def test_version_from_olm_csv() -> None:
    snap = healthy_snapshot("v25.10.1")
    pin_images_by_digest(snap)
    snap.csvs = [{"metadata": {"name": "gpu-operator-certified.v25.10.1", "namespace": "gpu-operator"},
                  "spec": {"version": "25.10.1"}}]
    refresh(snap)
    (f,) = run("OPR-005", snap)
    assert f.status == Status.PASS and "v25.10.1" in f.message and "ClusterServiceVersion" in f.message


def test_pre_conditions_version_noted() -> None:
    snap = healthy_snapshot("v25.3.4")
    set_operator_version(snap, "v23.6.2")
    pin_images_by_digest(snap)
    dep = snap.deployment("gpu-operator")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    c["image"] = "nvcr.io/nvidia/gpu-operator:v23.6.2"
    refresh(snap)
    (f,) = run("OPR-005", snap)
    assert f.status == Status.PASS and "no ClusterPolicy status conditions before v23.9" in f.message


def test_deleted_toolkit_daemonset_fails() -> None:
    snap = healthy_snapshot()
    remove_daemonset(snap, "nvidia-container-toolkit-daemonset")
    (f,) = run("OPR-006", snap)
    assert f.status == Status.FAIL and "nvidia-container-toolkit-daemonset" in f.message


def test_disabled_operand_with_daemonset_fails() -> None:
    snap = healthy_snapshot()
    set_policy(snap, "gfd.enabled", False)
    (f,) = run("OPR-006", snap)
    assert f.status == Status.FAIL and "disabled" in f.message and "gpu-feature-discovery" in f.message


def test_host_driver_mode_expects_no_driver_daemonset() -> None:
    snap = healthy_snapshot(driver="host")
    assert run("OPR-006", snap)[0].status == Status.PASS
    assert snap.daemonset("nvidia-driver-daemonset") is None


def test_dcgm_exporter_crashloop_fails_only_on_its_node() -> None:
    snap = healthy_snapshot()
    crash_container(pod_for(snap, "nvidia-dcgm-exporter", "gpu-node-2"), "nvidia-dcgm-exporter", restarts=9)
    by_node = {f.node: f for f in run("OPR-007", snap)}
    assert by_node["gpu-node-2"].status == Status.FAIL and "nvidia-dcgm-exporter" in by_node["gpu-node-2"].message
    assert by_node["gpu-node-1"].status == Status.PASS


def test_dcgm_exporter_not_ready_quotes_its_readiness_probe() -> None:
    """The exporter has readiness/liveness probes on /health from v26.3: kubelet's words name why it is not Ready."""
    from factory import add_event

    snap = healthy_snapshot("v26.7.0")
    pod = pod_for(snap, "nvidia-dcgm-exporter", "gpu-node-2")
    crash_container(pod, "nvidia-dcgm-exporter", reason="Running", restarts=0)
    ev = add_event(snap, "Pod", pod["metadata"]["name"], "Unhealthy",
                   "Readiness probe failed: Get \"http://10.0.0.7:9400/health\": connect: connection refused", count=30)
    ev["involvedObject"]["fieldPath"] = "spec.containers{nvidia-dcgm-exporter}"
    f = {f.node: f for f in run("OPR-007", snap)}["gpu-node-2"]
    assert f.status == Status.FAIL
    assert 'kubelet: "Readiness probe failed: Get ' in f.message
    assert 'connection refused" (30 times)' in f.message


def test_exporter_waiting_on_toolkit_validation_is_only_a_warning() -> None:
    from factory import stuck_init

    snap = healthy_snapshot()
    stuck_init(pod_for(snap, "nvidia-dcgm-exporter", "gpu-node-1"), "toolkit-validation", reason="", restarts=0)
    by_node = {f.node: f for f in run("OPR-007", snap)}
    assert by_node["gpu-node-1"].status == Status.WARN and "toolkit-validation" in by_node["gpu-node-1"].message


# The operator's NVIDIADriver controller (v23.9+) and GPUCluster controller (v26.7+) wait for their CRD's informer
# at start-up; without the CRD (a Helm upgrade that did not install the new chart's CRDs) the operator exits.
_CACHE_TIMEOUT = ('{"level":"error","msg":"Could not wait for Cache to sync","error":"failed to wait for '
                  '%s caches to sync: timed out waiting for cache to be synced for Kind *v1alpha1.%s"}')


def _operator_crashloops(snap: ClusterSnapshot, log: str | None = None) -> None:
    pod = snap.operator_pods[0]
    crash_container(pod, "gpu-operator", restarts=9, snapshot=snap, log=log)
    snap.deployment("gpu-operator")["status"]["availableReplicas"] = 0


@pytest.mark.parametrize("version", ["v23.9.0", "v24.9.2", "v25.10.1", "v26.7.0"])
@pytest.mark.parametrize("with_log", [True, False])
def test_operator_crashloop_names_the_missing_nvidiadriver_crd(version: str, with_log: bool) -> None:
    snap = healthy_snapshot(version)
    snap.crds = snap.crds - {"nvidiadrivers.nvidia.com"}
    _operator_crashloops(snap, _CACHE_TIMEOUT % ("nvidia-driver-controller", "NVIDIADriver") if with_log else None)
    (f,) = run("OPR-004", snap)
    assert f.status == Status.FAIL and "NVIDIADriver CRD (nvidiadrivers.nvidia.com) is missing" in f.message
    assert "from v23.9.0" in f.message
    assert ("*v1alpha1.NVIDIADriver" in f.message) == with_log


def test_operator_crashloop_names_the_gpucluster_crd_its_log_names() -> None:
    """The suite does not read the GPUCluster CRD: the operator's own words name it."""
    snap = healthy_snapshot("v26.7.0")
    _operator_crashloops(snap, 'E1204 "failed to get informer" err="no matches for kind \\"GPUCluster\\" in '
                               'version \\"nvidia.com/v1alpha1\\""')
    (f,) = run("OPR-004", snap)
    assert f.status == Status.FAIL and "GPUCluster CRD (gpuclusters.nvidia.com) is missing" in f.message


def test_operator_crashloop_with_a_crd_unknown_version_needs_the_log() -> None:
    snap = healthy_snapshot("v25.3.4")
    pin_images_by_digest(snap)
    for dep in snap.deployments:
        dep["metadata"].get("labels", {}).pop("helm.sh/chart", None)
    snap.crds = snap.crds - {"nvidiadrivers.nvidia.com"}
    _operator_crashloops(snap, _CACHE_TIMEOUT % ("nvidia-driver-controller", "NVIDIADriver"))
    (f,) = run("OPR-004", snap)
    assert "NVIDIADriver CRD" in f.message


@pytest.mark.parametrize(("version", "log"), [
    ("v23.6.2", None),      # no NVIDIADriver controller before v23.9: its CRD is no requirement
    ("v26.3.3", 'no matches for kind "GPUCluster"'),  # no GPUCluster controller before v26.7
    ("v25.3.4", "panic: runtime error: invalid memory address or nil pointer dereference"),  # CRDs all there
])
def test_operator_crashloop_blames_no_crd_a_release_does_not_watch(version: str, log: str | None) -> None:
    snap = healthy_snapshot(version)
    if version == "v23.6.2":
        snap.crds = snap.crds - {"nvidiadrivers.nvidia.com"}
    _operator_crashloops(snap, log)
    (f,) = run("OPR-004", snap)
    assert f.status == Status.FAIL and "CRD" not in f.message
    if log:
        assert log in f.message
