"""Operand pods are found by the DaemonSet that owns them (issue 20, item 2), not by a label only some operator
versions put on them: driver pods carry app.kubernetes.io/component=nvidia-driver only from v23.9.0."""

from __future__ import annotations

import copy

import pytest
from check_runner import N1, on
from check_runner import only_node as assert_only_node_fails
from factory import healthy_snapshot, pod_for, refresh, remove_pods

from gpu_conformance import catalogue
from gpu_conformance import operands as ops
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.facts import operand_daemonsets, operand_index
from gpu_conformance.model import Layer, Status
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import decide

DRIVER = ops.DRIVER.daemonset
COMPONENT_KEY, COMPONENT_VALUE = ops.DRIVER_COMPONENT_LABEL
# The last patch of every minor release the suite supports, oldest first (v22.9-v23.6 lack the component label).
LAST_PATCHES = ["v22.9.2", "v23.3.2", "v23.6.2", "v23.9.2", "v24.3.0", "v24.6.2", "v24.9.2", "v25.3.4",
                "v25.10.1", "v26.3.3", "v26.7.0"]


def _layers_per_node(snap: ClusterSnapshot) -> dict[str, dict[Layer, Status]]:
    checks = catalogue.all_checks()
    inp = check_input(snap, Settings())
    findings = [f for c in checks if c.func for f in c.run(inp)]
    layers = [layer for layer in Layer if layer != Layer.PROBE]
    verdict = decide(checks, findings, snap.gpu_node_names, layers)
    assert verdict.cluster_blocker is None
    return {n.node: {layer: s for layer, s in n.layers.items() if layer in layers} for n in verdict.nodes
            if n.root_cause is not None or any(s == Status.FAIL for s in n.layers.values())}


@pytest.mark.parametrize("version", ["v22.9.2", "v23.3.2", "v23.6.2"])
def test_old_driver_pods_lack_the_component_label(version: str) -> None:
    """The factory shapes pre-v23.9 driver pods as the operator's assets did: app label only."""
    snap = healthy_snapshot(version)
    labels = labels_of(pod_for(snap, DRIVER, N1))
    assert labels["app"] == DRIVER and COMPONENT_KEY not in labels


@pytest.mark.parametrize("version", ["v22.9.2", "v23.3.2", "v23.6.2"])
def test_old_healthy_cluster_passes_driver_checks(version: str) -> None:
    snap = healthy_snapshot(version)
    for check_id in ("DRV-001", "DRV-002"):
        for node in snap.gpu_node_names:
            f = on(check_id, snap, node)
            assert f.status == Status.PASS, f.message
    assert "operator driver container (pod nvidia-driver-daemonset-" in on("DRV-001", snap).message


@pytest.mark.parametrize("version", LAST_PATCHES)
def test_healthy_cluster_passes_every_layer_at_every_version(version: str) -> None:
    assert _layers_per_node(healthy_snapshot(version)) == {}


@pytest.mark.parametrize("version", LAST_PATCHES)
def test_missing_driver_pod_fails_at_every_version(version: str) -> None:
    snap = healthy_snapshot(version)
    remove_pods(snap, DRIVER, N1)
    f = assert_only_node_fails("DRV-002", snap)
    assert "no driver pod" in f.message and f"app={DRIVER}" in f.message


def _foreign_driver(snap: ClusterSnapshot, node: str) -> dict:
    """Another team's DaemonSet in the operator namespace whose pods carry the driver's component label."""
    if snap.daemonset("acme-gpu-driver") is None:
        ds = copy.deepcopy(snap.daemonset(DRIVER))
        assert ds is not None
        ds["metadata"].update({"name": "acme-gpu-driver", "uid": "acme-uid", "ownerReferences": []})
        ds["metadata"]["labels"] = {"app": "acme-gpu-driver", COMPONENT_KEY: COMPONENT_VALUE}
        ds["spec"]["selector"] = {"matchLabels": {"app": "acme-gpu-driver"}}
        ds["spec"]["template"]["metadata"]["labels"] = {"app": "acme-gpu-driver", COMPONENT_KEY: COMPONENT_VALUE}
        snap.daemonsets.append(ds)
    pod = copy.deepcopy(pod_for(snap, DRIVER, node))
    pod["metadata"].update({"name": f"acme-gpu-driver-{node}", "uid": f"acme-{node}",
                            "labels": {"app": "acme-gpu-driver", COMPONENT_KEY: COMPONENT_VALUE},
                            "creationTimestamp": "2026-10-02T09:00:00Z",  # newer than the operator's pod
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                 "name": "acme-gpu-driver", "uid": "acme-uid", "controller": True}]})
    snap.pods.append(pod)
    refresh(snap)
    return pod


@pytest.mark.parametrize("version", ["v23.3.2", "v26.3.3"])
def test_foreign_daemonset_with_the_driver_label_is_not_the_operators(version: str) -> None:
    snap = healthy_snapshot(version)
    _foreign_driver(snap, "gpu-node-2")
    _foreign_driver(snap, N1)
    remove_pods(snap, DRIVER, N1)
    assert [name_of(d) for d in operand_daemonsets(snap, ops.DRIVER)] == [DRIVER]
    # The operator's own pod wins on node 2, though the foreign one is newer; on node 1 there is none.
    assert name_of(operand_index(snap).pod(ops.DRIVER, "gpu-node-2") or {}).startswith(f"{DRIVER}-")
    assert operand_index(snap).pod(ops.DRIVER, N1) is None
    assert "acme-gpu-driver" not in {name_of(p).rsplit("-", 1)[0] for p in operand_index(snap).pods(ops.DRIVER)}
    f = assert_only_node_fails("DRV-002", snap)
    assert "no driver pod" in f.message


def test_precompiled_and_crd_driver_daemonsets_are_the_drivers() -> None:
    snap = healthy_snapshot("v23.6.2")
    ds = snap.daemonset(DRIVER)
    assert ds is not None
    ds["metadata"]["name"] = f"{DRIVER}-5.15.0-122-generic-ubuntu22.04"  # a precompiled driver's DaemonSet
    for p in snap.pods:
        for ref in p["metadata"].get("ownerReferences") or []:
            if ref.get("name") == DRIVER:
                ref["name"] = name_of(ds)
    refresh(snap)
    assert on("DRV-002", snap).status == Status.PASS
    crd = healthy_snapshot("v26.3.3", driver="crd")
    assert len(operand_daemonsets(crd, ops.DRIVER)) == 1
    assert all(on("DRV-002", crd, n).status == Status.PASS for n in crd.gpu_node_names)


def test_pods_without_owner_references_are_found_by_the_daemonsets_selector() -> None:
    """Pods whose ownerReferences were lost (hand-built or filtered data) match the DaemonSet's selector."""
    snap = healthy_snapshot("v23.3.2")
    for p in snap.pods:
        p["metadata"].pop("ownerReferences", None)
    refresh(snap)
    assert on("DRV-002", snap).status == Status.PASS
    assert on("DPL-001", snap).status == Status.PASS


def test_operand_pods_without_their_daemonset_fall_back_to_the_labels() -> None:
    """No DaemonSet in the snapshot (deleted, or not readable): the operand's own labels still name its pods."""
    snap = healthy_snapshot("v26.3.3")
    snap.daemonsets = [d for d in snap.daemonsets if name_of(d) != ops.DEVICE_PLUGIN.daemonset]
    refresh(snap)
    assert name_of(operand_index(snap).pod(ops.DEVICE_PLUGIN, N1) or {}).startswith(ops.DEVICE_PLUGIN.daemonset)
