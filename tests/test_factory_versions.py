"""The factory builds each operator release's own object shapes (real cases replay at the thread's version).

Facts from the operator's source at each tag (deployments/gpu-operator/values.yaml, api/v1/clusterpolicy_types.go,
assets/) as recorded in gpu_conformance/data/signals.yaml; one test per shape that differs between releases.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import daemonset, healthy_snapshot, node, pod_for
from real_case_loader import CaseError, build, load_case

from gpu_conformance.cluster.snapshot import labels_of

OLD = ["v22.9.2", "v23.3.2", "v23.6.2"]


def _image(snap, ds: str, container: str) -> str:
    spec = daemonset(snap, ds)["spec"]["template"]["spec"]
    return next(c["image"] for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == container)


def _env(snap, ds: str, container: str) -> dict[str, str]:
    spec = daemonset(snap, ds)["spec"]["template"]["spec"]
    c = next(c for c in spec["containers"] if c["name"] == container)
    return {e["name"]: e["value"] for e in c.get("env", [])}


@pytest.mark.parametrize("version", OLD)
def test_before_v23_9_the_clusterpolicy_status_has_no_conditions(version: str) -> None:
    assert healthy_snapshot(version).clusterpolicies[0]["status"] == {"state": "ready", "namespace": "gpu-operator"}


@pytest.mark.parametrize("version", ["v23.9.2", "v24.9.2", "v26.7.0"])
def test_from_v23_9_the_clusterpolicy_status_has_ready_and_error_conditions(version: str) -> None:
    status = healthy_snapshot(version).clusterpolicies[0]["status"]
    assert [c["type"] for c in status["conditions"]] == ["Ready", "Error"]


def test_spec_cdi_arrives_with_v23_3() -> None:
    assert "cdi" not in healthy_snapshot("v22.9.2").clusterpolicies[0]["spec"]
    assert healthy_snapshot("v23.3.2").clusterpolicies[0]["spec"]["cdi"]["enabled"] is False


@pytest.mark.parametrize(("version", "driver", "gfd_image", "validator"), [
    ("v22.9.2", "nvcr.io/nvidia/driver:525.60.13-ubuntu22.04", "nvcr.io/nvidia/gpu-feature-discovery:v0.7.0-ubi8",
     "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v22.9.2"),
    ("v23.6.2", "nvcr.io/nvidia/driver:535.104.05-ubuntu22.04", "nvcr.io/nvidia/gpu-feature-discovery:v0.8.1-ubi8",
     "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.6.2"),
    ("v24.3.0", "nvcr.io/nvidia/driver:550.54.15-ubuntu22.04", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8",
     "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.3.0"),
    ("v26.3.3", "nvcr.io/nvidia/driver:580.126.20-ubuntu22.04", "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
     "nvcr.io/nvidia/gpu-operator:v26.3.3"),
])
def test_each_release_runs_its_own_default_images(version: str, driver: str, gfd_image: str, validator: str) -> None:
    snap = healthy_snapshot(version)
    assert _image(snap, "nvidia-driver-daemonset", "nvidia-driver-ctr") == driver
    assert _image(snap, "gpu-feature-discovery", "gpu-feature-discovery") == gfd_image
    assert _image(snap, "nvidia-operator-validator", "driver-validation") == validator


@pytest.mark.parametrize(("version", "present"), [("v23.9.2", False), ("v24.3.0", True)])
def test_mps_control_daemon_and_label_arrive_with_v24_3(version: str, present: bool) -> None:
    snap = healthy_snapshot(version)
    assert (snap.daemonset("nvidia-device-plugin-mps-control-daemon") is not None) == present
    assert ("nvidia.com/mps.capable" in labels_of(node(snap, "gpu-node-1"))) == present


def test_mig_config_label_arrives_with_v23_3() -> None:
    old = labels_of(node(healthy_snapshot("v22.9.2", gpu_product="NVIDIA-A100-SXM4-40GB"), "gpu-node-1"))
    new = labels_of(node(healthy_snapshot("v23.3.2", gpu_product="NVIDIA-A100-SXM4-40GB"), "gpu-node-1"))
    assert "nvidia.com/mig.config" not in old and old["nvidia.com/mig.capable"] == "true"
    assert new["nvidia.com/mig.config"] == "all-disabled"


@pytest.mark.parametrize(("version", "drop_in"), [("v25.3.4", False), ("v25.10.1", True)])
def test_toolkit_drop_in_config_from_v25_10(version: str, drop_in: bool) -> None:
    env = _env(healthy_snapshot(version), "nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr")
    assert ("RUNTIME_DROP_IN_CONFIG" in env) == drop_in
    assert env["CONTAINERD_CONFIG"] == "/runtime/config-dir/config.toml"


def test_v26_7_nodes_carry_the_client_deploy_label() -> None:
    assert labels_of(node(healthy_snapshot("v26.7.0"), "gpu-node-1"))["nvidia.com/gpu.deploy.client"] == "true"
    assert "nvidia.com/gpu.deploy.client" not in labels_of(node(healthy_snapshot("v26.3.3"), "gpu-node-1"))


# ---- the case loader writes the case's version shapes ---------------------------------------------------------
def _case(tmp_path: Path, version: str, extra: str = "", overrides: str = "") -> Path:
    path = tmp_path / "case.yaml"
    path.write_text("source: https://github.com/NVIDIA/gpu-operator/issues/1\ntitle: t\noperator_version: v1\n"
                    f"summary: s\ncluster: {{version: {version}, gpu_nodes: 1, cpu_nodes: 0}}\n{extra}"
                    f"overrides:\n  - clusterpolicy: {{not_ready: [state-driver]}}\n{overrides}"
                    "expect: {verdict: NOT CONFORMANT, nodes: {gpu-node-1: {layer: driver-toolkit}}}\n")
    return path


def test_not_ready_before_v23_9_writes_only_the_state(tmp_path: Path) -> None:
    snap = build(load_case(_case(tmp_path, "v23.6.2"))).snapshot
    assert snap.clusterpolicies[0]["status"] == {"state": "notReady", "namespace": "gpu-operator"}
    snap = build(load_case(_case(tmp_path, "v23.9.2"))).snapshot
    assert snap.clusterpolicies[0]["status"]["conditions"][1]["reason"] == "OperandNotReady"


def test_old_driver_pods_in_a_case_have_no_component_label(tmp_path: Path) -> None:
    snap = build(load_case(_case(tmp_path, "v23.3.2"))).snapshot
    assert "app.kubernetes.io/component" not in labels_of(pod_for(snap, "nvidia-driver-daemonset", "gpu-node-1"))


def test_known_miss_and_suite_before_are_read(tmp_path: Path) -> None:
    case = load_case(_case(tmp_path, "v25.3.4", "known_miss: the suite pauses cordoned nodes\n"
                                                "suite_before: {verdict: INCOMPLETE, nodes: {gpu-node-1: none}}\n"))
    assert case.known_miss == "the suite pauses cordoned nodes"
    assert case.suite_before == {"verdict": "INCOMPLETE", "nodes": {"gpu-node-1": "none"}}
    assert load_case(_case(tmp_path, "v25.3.4")).known_miss is None


@pytest.mark.parametrize("extra", ["known_miss: ''\n", "suite_before: {verdict: GREEN}\n"])
def test_empty_known_miss_or_bad_suite_before_is_an_error(tmp_path: Path, extra: str) -> None:
    with pytest.raises(CaseError, match="case.yaml: (known_miss|suite_before)"):
        load_case(_case(tmp_path, "v25.3.4", extra))


@pytest.mark.parametrize(("version", "workload"), [("v22.9.2", "true"), ("v23.3.2", "true"), ("v23.6.2", "false")])
def test_plugin_validation_ran_a_workload_pod_through_v23_3(version: str, workload: str) -> None:
    spec = daemonset(healthy_snapshot(version), "nvidia-operator-validator")["spec"]["template"]["spec"]
    plugin = next(c for c in spec["initContainers"] if c["name"] == "plugin-validation")
    assert {e["name"]: e.get("value") for e in plugin["env"]}["WITH_WORKLOAD"] == workload


def test_not_ready_pod_status_is_running_without_readiness(tmp_path: Path) -> None:
    path = _case(tmp_path, "v23.9.2", overrides="  - pod: {app: nvidia-driver-daemonset, node: gpu-node-1, "
                                                 "status: NotReady}\n")
    pod = pod_for(build(load_case(path)).snapshot, "nvidia-driver-daemonset", "gpu-node-1")
    cs = pod["status"]["containerStatuses"][0]
    assert pod["status"]["phase"] == "Running" and "running" in cs["state"]
    assert cs["ready"] is False and cs["restartCount"] == 0
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "False"


def test_not_ready_with_restarts_was_killed_before(tmp_path: Path) -> None:
    path = _case(tmp_path, "v23.9.2", overrides="  - pod: {app: nvidia-driver-daemonset, node: gpu-node-1, "
                                                 "status: NotReady, restarts: 3, exit_code: 137}\n")
    cs = pod_for(build(load_case(path)).snapshot, "nvidia-driver-daemonset", "gpu-node-1")["status"][
        "containerStatuses"][0]
    assert cs["restartCount"] == 3 and cs["lastState"]["terminated"]["exitCode"] == 137
