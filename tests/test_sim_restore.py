"""A reused simulated cluster is put back to the objects of its fresh install (issue 24 item 3).

The comparison itself first, on objects (no cluster): it ignores what differs between any two installs and
sees every real change. Then on a running cluster: after each kind of change the matrix's faults make, the
undo leaves the cluster's objects equal to those its fresh install had, and a fault left in place is caught.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from gpu_conformance.sim.controlplane.restore import Capture, Resource, differences

PODS = Resource("/api/v1/pods", "Pod", True, True)
NODES = Resource("/api/v1/nodes", "Node", False, True)
EVENTS = Resource("/api/v1/events", "Event", True, False)


def _pod(name: str, node: str, uid: str, started: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "gpu-operator", "uid": uid,
                                        "resourceVersion": uid, "generateName": "nvidia-device-plugin-daemonset-",
                                        "ownerReferences": [{"kind": "DaemonSet",
                                                             "name": "nvidia-device-plugin-daemonset",
                                                             "uid": "ds-" + uid, "controller": True}]},
            "spec": {"nodeName": node, "volumes": [{"name": f"kube-api-access-{uid[:5]}"}]},
            "status": {"phase": "Running", "podIP": "10.0.0." + uid[-1], "startTime": started,
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}}


def _capture(*objs: dict[str, Any], logs: dict[str, bytes] | None = None) -> Capture:
    paths = {"Pod": PODS.path, "Node": NODES.path, "Event": EVENTS.path}
    return Capture([PODS, NODES, EVENTS],
                   {(paths[o["kind"]], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs},
                   logs or {})


def _event(name: str, reason: str) -> dict[str, Any]:
    return {"kind": "Event", "metadata": {"name": name, "namespace": "gpu-operator"}, "reason": reason,
            "type": "Normal", "involvedObject": {"kind": "Pod", "name": name.split(".")[0]}}


@pytest.mark.fast
def test_two_installs_of_the_same_cluster_compare_equal() -> None:
    """Generated names, uids, token volume suffixes, IPs and times differ between any two installs."""
    a = _capture(_pod("nvidia-device-plugin-daemonset-abcde", "gpu-node-1", "11111"),
                 _event("nvidia-device-plugin-daemonset-abcde.1", "Scheduled"))
    b = _capture(_pod("nvidia-device-plugin-daemonset-xyzkq", "gpu-node-1", "22222", "2026-01-02T00:00:00Z"),
                 _event("nvidia-device-plugin-daemonset-xyzkq.2", "Scheduled"))
    assert differences(a, b) == []


@pytest.mark.fast
def test_every_kind_of_change_a_fault_makes_is_seen() -> None:
    pod = _pod("nvidia-device-plugin-daemonset-abcde", "gpu-node-1", "11111")
    node = {"kind": "Node", "metadata": {"name": "gpu-node-1", "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    base = _capture(pod, node, _event("a.1", "Scheduled"), logs={"gpu-probe.log": b"ok"})
    crashed = copy.deepcopy(pod)
    crashed["status"]["phase"] = "Pending"
    relabelled = copy.deepcopy(node)
    relabelled["metadata"]["labels"]["nvidia.com/gpu.present"] = "false"
    other_node = copy.deepcopy(pod)
    other_node["spec"]["nodeName"] = "gpu-node-2"
    cases = {
        "changed: /api/v1/pods/gpu-operator/generated:nvidia-device-plugin-daemonset-/gpu-node-1":
            _capture(crashed, node, _event("a.1", "Scheduled"), logs={"gpu-probe.log": b"ok"}),
        "changed: /api/v1/nodes/gpu-node-1":
            _capture(pod, relabelled, _event("a.1", "Scheduled"), logs={"gpu-probe.log": b"ok"}),
        "missing: /api/v1/pods/gpu-operator/generated:nvidia-device-plugin-daemonset-/gpu-node-1":
            _capture(other_node, node, _event("a.1", "Scheduled"), logs={"gpu-probe.log": b"ok"}),
        "events: ('gpu-operator', 'Pod', 'BackOff', 'Normal') 0 -> 1":
            _capture(pod, node, _event("a.1", "Scheduled"), _event("a.2", "BackOff"), logs={"gpu-probe.log": b"ok"}),
        "container logs: gpu-probe.log": _capture(pod, node, _event("a.1", "Scheduled"), logs={"gpu-probe.log": b"x"}),
    }
    for expected, after in cases.items():
        assert expected in differences(base, after), expected


# ---- on a running cluster ---------------------------------------------------------------------------
# One fault per kind of change the matrix makes: node labels (nfd-worker-missing also withdraws and brings back
# operand pods), node conditions and taints with evicted Deployment pods, pod statuses, pods re-created without
# a sandbox plus events and host faults, an added namespace with pods, a Deployment scaled (its new pod then
# crash-looping, on whichever node the scheduler chose), a deleted DaemonSet,
# a deleted cluster-scoped object, container logs, a host mended under a crash-looping driver.
KINDS_OF_CHANGE = ("nfd-worker-missing", "gpu-node-runtime-down", "device-plugin-down", "runtime-handler-missing",
                   "gpus-all-allocated", "operator-scaled-to-zero", "operator-crashloop", "toolkit-daemonset-deleted",
                   "runtimeclass-nvidia-missing", "toolkit-validation-failing", "driver-crashloop")


@pytest.mark.sim
def test_undo_leaves_the_objects_of_the_fresh_install() -> None:
    from gpu_conformance.sim.controlplane.restore import capture, undo
    from gpu_conformance.sim.operator.faults import FAULTS, apply_all
    from gpu_conformance.sim.operator.status import settle
    from gpu_conformance.sim.services.kube_client import Kube
    from gpu_conformance.sim.session import start_sim

    assert not any(FAULTS[f].fresh for f in KINDS_OF_CHANGE)
    booted = start_sim(quiet=True)
    try:
        kube = Kube(booted.cluster.api_client())
        logs: Path = booted.cluster.logs_dir
        # The node lifecycle controller records each node's RegisteredNode event on its own schedule: once in a CI
        # run they came after the capture below and read as drift. The baseline is taken once they are all in.
        nodes = {n["metadata"]["name"] for n in kube.list("Node")}
        wait_for(lambda: nodes <= {e.get("involvedObject", {}).get("name") for e in kube.list("Event", "default")
                                   if e.get("reason") == "RegisteredNode"},
                 "a RegisteredNode event for every node", timeout=60)
        fresh = capture(kube, logs)
        time.sleep(1)
        assert differences(fresh, capture(kube, logs)) == []  # an idle cluster does not drift
        for name in KINDS_OF_CHANGE:
            apply_all(booted.install, [name], booted.cluster)
            settle(kube, booted.install.namespace, booted.install.profile.operator_version)
            assert differences(fresh, capture(kube, logs)), f"{name} changed nothing the comparison sees"
            assert undo(kube, fresh, logs) == [], name
            # Undone means undone for good: nothing the controllers or loops do afterwards brings the fault back.
            time.sleep(1)
            assert differences(fresh, capture(kube, logs)) == [], name
    finally:
        booted.stop()


@pytest.mark.sim
def test_a_fault_that_is_not_undone_sends_the_next_one_to_a_fresh_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_conformance.sim import reuse
    pool = reuse.ClusterPool()
    try:
        with pool.cluster("default", ["unhealthy-devices"]):
            pass
        monkeypatch.setattr(reuse, "undo", lambda *a, **k: ["changed: /api/v1/nodes/gpu-node-1"])
        with pool.cluster("default", ["mig-config-failed"]):
            pass
        assert pool.reboots == ["mig-config-failed: not undone (changed: /api/v1/nodes/gpu-node-1)"]
        assert not pool.clusters  # stopped: the next fault boots a fresh cluster
        assert (pool.boots, pool.reuses) == (1, 1)
    finally:
        pool.close()
