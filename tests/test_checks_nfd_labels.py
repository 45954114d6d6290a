"""Layers nfd and deploy-labels: healthy passes; lost NFD labels, missing/opted-out/paused labels, misplaced pods."""

from __future__ import annotations

import pytest
from factory import drop_label, healthy_snapshot, refresh, remove_pods, set_label, set_node_resource

from gpu_conformance.check_input import check_input
from gpu_conformance.checks import deploy_labels, nfd  # noqa: F401 — registers the checks
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Finding, Status
from gpu_conformance.settings import Settings

SETTINGS = Settings(operator_namespace="gpu-operator")
PCI = "feature.node.kubernetes.io/pci-10de.present"


def run(check_id: str, snap: ClusterSnapshot) -> dict[str | None, Finding]:
    return {f.node: f for f in REGISTRY[check_id].run(check_input(refresh(snap), SETTINGS))}


@pytest.mark.parametrize("version", ["v25.3.4", "v25.10.1", "v26.3.3", "v26.7.0"])
@pytest.mark.parametrize("driver", ["operator", "host", "pre-installed"])
def test_healthy_passes(version: str, driver: str) -> None:
    snap = healthy_snapshot(version, driver=driver)
    for cid in ("NFD-001", "NFD-002", "NFD-003", "LBL-001", "LBL-002"):
        found = run(cid, snap)
        assert {f.status for f in found.values()} == {Status.PASS}, (cid, [f.message for f in found.values()])


def test_v26_7_expects_the_client_label() -> None:
    snap = healthy_snapshot("v26.7.0")
    drop_label(snap, "gpu-node-1", "nvidia.com/gpu.deploy.client")
    f = run("LBL-001", snap)["gpu-node-1"]
    assert f.status == Status.FAIL and "client" in f.message
    # the same node on v26.3 does not need it
    snap = healthy_snapshot("v26.3.3")
    assert run("LBL-001", snap)["gpu-node-1"].status == Status.PASS


def test_zero_gpu_nodes_is_a_clear_cluster_failure() -> None:
    snap = healthy_snapshot(gpu_nodes=0)
    f = run("NFD-001", snap)[None]
    assert f.status == Status.FAIL and "no GPU node" in f.message


def test_node_that_lost_nfd_label_is_still_found_and_fails() -> None:
    snap = healthy_snapshot()
    drop_label(snap, "gpu-node-2", PCI)
    set_label(snap, "gpu-node-2", "nvidia.com/gpu.present", "false")
    assert "gpu-node-2" in snap.gpu_node_names
    f = run("NFD-003", snap)["gpu-node-2"]
    assert f.status == Status.FAIL and "gpu.present=false" in f.message
    assert run("NFD-003", snap)["gpu-node-1"].status == Status.PASS


def test_gpu_present_without_nfd_evidence_fails() -> None:
    snap = healthy_snapshot()
    drop_label(snap, "gpu-node-1", PCI)
    f = run("NFD-003", snap)["gpu-node-1"]
    assert f.status == Status.FAIL and "no NFD NVIDIA PCI label" in f.message


def test_nfd_label_without_gpu_present_fails() -> None:
    snap = healthy_snapshot()
    drop_label(snap, "gpu-node-3", "nvidia.com/gpu.present")
    f = run("NFD-003", snap)["gpu-node-3"]
    assert f.status == Status.FAIL and "has not labelled" in f.message


def test_stock_nfd_class_labels_count() -> None:
    snap = healthy_snapshot()
    drop_label(snap, "gpu-node-1", PCI)
    set_label(snap, "gpu-node-1", "feature.node.kubernetes.io/pci-0302_10de.present", "true")
    assert run("NFD-003", snap)["gpu-node-1"].status == Status.PASS


def test_missing_nfd_worker_fails_on_that_node() -> None:
    snap = healthy_snapshot()
    snap.nfd_pods[:] = [p for p in snap.nfd_pods if p["spec"].get("nodeName") != "gpu-node-2"
                        or p["metadata"]["labels"].get("role") != "worker"]
    found = run("NFD-002", snap)
    assert found["gpu-node-2"].status == Status.FAIL and "no NFD worker" in found["gpu-node-2"].message
    assert found["gpu-node-1"].status == Status.PASS


# One change to a healthy cluster, and the one finding it gives: (change, check, node, status, words in the message).
LABEL_CASES = {
    "missing deploy label fails": (
        lambda s: drop_label(s, "gpu-node-1", "nvidia.com/gpu.deploy.container-toolkit"),
        "LBL-001", "gpu-node-1", Status.FAIL, ["container-toolkit"]),
    "opt-out is reported, not failed": (
        lambda s: set_label(s, "gpu-node-1", "nvidia.com/gpu.deploy.device-plugin", "false"),
        "LBL-001", "gpu-node-1", Status.WARN, ["device-plugin=false"]),
    "labelled node without pod fails": (
        lambda s: remove_pods(s, "nvidia-device-plugin-daemonset", "gpu-node-2"),
        "LBL-002", "gpu-node-2", Status.FAIL, ["nvidia-device-plugin-daemonset: label true but no pod"]),
    "pod on a node opted out fails": (
        lambda s: set_label(s, "gpu-node-1", "nvidia.com/gpu.deploy.gpu-feature-discovery", "false"),
        "LBL-002", "gpu-node-1", Status.FAIL, ["gpu-feature-discovery", "=false"]),
}


@pytest.mark.parametrize("case", LABEL_CASES)
def test_one_label_or_pod_change(case: str) -> None:
    change, check_id, node, status, words = LABEL_CASES[case]
    snap = healthy_snapshot()
    change(snap)
    f = run(check_id, snap)[node]
    assert f.status == status and all(w in f.message for w in words), f.message


def test_paused_for_driver_upgrade_is_transient() -> None:
    snap = healthy_snapshot()
    set_label(snap, "gpu-node-3", "nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade")
    set_label(snap, "gpu-node-3", "nvidia.com/gpu-driver-upgrade-state", "pod-restart-required")
    f = run("LBL-001", snap)["gpu-node-3"]
    assert f.status == Status.WARN and "transient" in f.message and "pod-restart-required" in f.message


def test_node_excluded_by_admin_is_not_judged() -> None:
    # The documented way to take a node out of the operator's hands: its operands go away, the run must pass.
    snap = healthy_snapshot()
    set_label(snap, "gpu-node-1", "nvidia.com/gpu.deploy.operands", "false")
    set_label(snap, "gpu-node-1", "nvidia.com/gpu.present", "false")
    for app in ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-operator-validator"):
        remove_pods(snap, app, "gpu-node-1")
    assert "gpu-node-1" not in snap.gpu_node_names
    f = next(f for f in REGISTRY["NFD-004"].run(check_input(snap, Settings())) if f.node == "gpu-node-1")
    assert f.status == Status.WARN and "excluded" in f.message
    fails = [(c.id, g.message) for c in REGISTRY.values() if c.func for g in c.run(check_input(snap, Settings()))
             if g.status == Status.FAIL]
    assert not fails


def test_gpu_node_selector_limits_the_judged_nodes() -> None:
    snap = healthy_snapshot()
    set_label(snap, "gpu-node-2", "pool", "training")
    snap.gpu_node_selector = "pool=training"
    refresh(snap)
    assert snap.gpu_node_names == ["gpu-node-2"]
    assert set(run("NFD-003", snap)) == {"gpu-node-2"}


def _relabel(snap: ClusterSnapshot, node: str, new_key: str | None, operator_saw_it: bool) -> None:
    """NFD's deviceLabelFields changed: the node's NVIDIA label takes another shape. A node the operator had labelled
    is then marked gpu.present=false and loses its deploy labels (state_manager.go labelGPUNodes)."""
    drop_label(snap, node, PCI)
    if new_key:
        set_label(snap, node, new_key, "true")
    if operator_saw_it:
        set_label(snap, node, "nvidia.com/gpu.present", "false")
    else:
        # A fresh install: the operator never labelled the node, GFD never ran, no GPU is advertised.
        for key in [k for k in snap.node_by_name[node]["metadata"]["labels"] if k.startswith("nvidia.com/")]:
            drop_label(snap, node, key)
        set_node_resource(snap, node, None, None)


@pytest.mark.parametrize("version", ["v22.9.2", "v25.3.4", "v26.7.0"])
@pytest.mark.parametrize(("shape", "words"), [
    ("pci-10de_2237.present", "pci-10de_2237.present"),          # vendor, device (gpu-operator #1469)
    ("pci-0302_10de_20b5.present", "pci-0302_10de_20b5.present"),  # class, vendor, device
    ("pci-10de_10de.present", "pci-10de_10de.present"),           # vendor, subsystem_vendor
])
def test_nvidia_label_in_a_shape_the_operator_does_not_read_is_nfd_config(version: str, shape: str,
                                                                           words: str) -> None:
    snap = healthy_snapshot(version)
    _relabel(snap, "gpu-node-2", f"feature.node.kubernetes.io/{shape}", operator_saw_it=True)
    f = run("NFD-003", snap)["gpu-node-2"]
    assert f.status == Status.FAIL and words in f.message and "deviceLabelFields" in f.message, f.message
    assert "PCI bus" not in f.message and f.evidence["cause"] == "nfd-label-shape"
    assert run("NFD-003", snap)["gpu-node-1"].status == Status.PASS


def test_vendorless_class_label_is_nfd_config() -> None:
    snap = healthy_snapshot("v22.9.2")
    _relabel(snap, "gpu-node-1", "feature.node.kubernetes.io/pci-0302.present", operator_saw_it=True)
    f = run("NFD-003", snap)["gpu-node-1"]
    assert f.status == Status.FAIL and "pci-0302.present" in f.message and "lack 'vendor'" in f.message


@pytest.mark.parametrize(("shape", "words"), [
    ("pci-0302.present", "lack 'vendor'"),              # a fresh install with class-only labels (gpu-operator #438)
    ("pci-10de_2237.present", "pci-10de_2237.present"),  # a fresh install with the device id in the labels
])
def test_no_gpu_node_names_the_unread_nfd_labels(shape: str, words: str) -> None:
    snap = healthy_snapshot("v22.9.0", gpu_nodes=1)
    _relabel(snap, "gpu-node-1", f"feature.node.kubernetes.io/{shape}", operator_saw_it=False)
    refresh(snap)
    assert snap.gpu_node_names == []
    f = run("NFD-001", snap)[None]
    assert f.status == Status.FAIL and "no GPU node" in f.message and words in f.message, f.message


def test_gpu_gone_from_the_bus_is_still_a_node_fault() -> None:
    """No NVIDIA label of any shape while NFD labels the node: the GPU left the PCI bus, as before."""
    snap = healthy_snapshot("v25.3.4")
    _relabel(snap, "gpu-node-1", "feature.node.kubernetes.io/pci-0300_1a03.present", operator_saw_it=True)
    f = run("NFD-003", snap)["gpu-node-1"]
    assert f.status == Status.FAIL and "PCI bus" in f.message and f.evidence["cause"] == "gpu-gone-from-pci"
