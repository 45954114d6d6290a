"""The simulated operator's ClusterPolicy status follows the real operator's readiness rule and wording."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpu_conformance.sim.operator import status as st

Obj = dict[str, Any]
NOW = "2026-12-02T00:00:00Z"


def ds(name: str, desired: int = 3, unavailable: int = 0, strategy: str = "RollingUpdate", uid: str = "u1") -> Obj:
    return {"metadata": {"name": name, "uid": uid},
            "spec": {"updateStrategy": {"type": strategy},
                     "template": {"metadata": {"labels": {"app": name}}}},
            "status": {"desiredNumberScheduled": desired, "numberUnavailable": unavailable}}


def pod(app: str, rev: str = "abc", phase: str = "Running", ready: bool = True, uid: str = "u1") -> Obj:
    return {"metadata": {"name": f"{app}-x", "labels": {"app": app, st.REVISION_LABEL: rev},
                         "ownerReferences": [{"uid": uid}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "c", "ready": ready}]}}


def rev(ds_name: str, h: str, n: int) -> Obj:
    return {"metadata": {"name": f"{ds_name}-{h}"}, "revision": n}


DRIVER = "nvidia-driver-daemonset"


def test_rolling_daemonset_ready_iff_nothing_unavailable() -> None:
    assert st.daemonset_ready(ds("a"), [], [])
    assert not st.daemonset_ready(ds("a", unavailable=1), [], [])


def test_not_found_or_zero_desired_counts_as_ready() -> None:
    # The first-reconcile race: the operator's own DaemonSets are not counted yet.
    assert st.daemonset_ready(None, [], [])
    assert st.daemonset_ready(ds("a", desired=0, unavailable=3), [], [])


def test_ondelete_driver_needs_current_revision_and_ready_containers() -> None:
    d = ds(DRIVER, strategy="OnDelete")
    revs = [rev(DRIVER, "old", 1), rev(DRIVER, "abc", 2)]
    assert st.daemonset_ready(d, [pod(DRIVER)], revs)
    assert not st.daemonset_ready(d, [pod(DRIVER, rev="old")], revs)  # upgrade pending
    assert not st.daemonset_ready(d, [pod(DRIVER, ready=False)], revs)
    assert not st.daemonset_ready(d, [pod(DRIVER, phase="Pending")], revs)
    assert not st.daemonset_ready(d, [], revs)  # no pods at all
    assert not st.daemonset_ready(d, [pod(DRIVER)], [])  # no revision
    assert st.daemonset_ready(d, [pod(DRIVER), pod(DRIVER, rev="old", uid="other-ds")], revs)


def test_states_not_ready_in_reconcile_order_with_state_names() -> None:
    dss = [ds("gpu-feature-discovery", unavailable=1), ds(DRIVER, unavailable=1, strategy="OnDelete"),
           ds("nvidia-container-toolkit-daemonset")]
    assert st.states_not_ready(dss, [], []) == ["state-driver", "gpu-feature-discovery"]


def test_message_wording_per_release() -> None:
    # v25.3.4 (read in the module cache) and up to v26.3.3 use a comma; v26.7 a semicolon.
    assert st.not_ready_message("v25.3.4", ["state-driver"]) == \
        "ClusterPolicy is not ready, states not ready: [state-driver]"
    assert st.not_ready_message("v26.3.3", ["state-driver", "gpu-feature-discovery"]) == \
        "ClusterPolicy is not ready, states not ready: [state-driver gpu-feature-discovery]"
    assert st.not_ready_message("v26.7.0", ["state-driver"]) == \
        "ClusterPolicy is not ready; states not ready: [state-driver]"


def test_status_conditions_as_the_operator_sets_them() -> None:
    ready = st.apply_status(None, "gpu-operator", *st.desired_status("gpu-operator", "v25.3.4", [], True, True), NOW)
    assert ready["state"] == "ready" and ready["namespace"] == "gpu-operator"
    assert [(c["type"], c["status"], c["reason"]) for c in ready["conditions"]] == [
        ("Ready", "True", "Reconciled"), ("Error", "False", "Ready")]
    assert ready["conditions"][0]["message"] == st.READY_MESSAGE
    bad = st.apply_status(ready, "gpu-operator",
                          *st.desired_status("gpu-operator", "v25.3.4", ["state-driver"], True, True), "later")
    assert bad["state"] == "notReady"
    assert [(c["type"], c["status"], c["reason"]) for c in bad["conditions"]] == [
        ("Ready", "False", "Error"), ("Error", "True", "OperandNotReady")]
    assert all(c["lastTransitionTime"] == "later" for c in bad["conditions"])
    again = st.apply_status(bad, "gpu-operator",
                            *st.desired_status("gpu-operator", "v25.3.4", ["state-driver"], True, True), "even later")
    assert all(c["lastTransitionTime"] == "later" for c in again["conditions"])  # no flip, no new time
    assert st.status_equal(bad, again)


def test_no_gpu_nodes_and_no_nfd_labels_stay_ready() -> None:
    assert st.desired_status("ns", "v25.3.4", [], False, True)[1:3] == ("Ready", "NoGPUNodes")
    assert st.desired_status("ns", "v25.3.4", [], False, False)[1:3] == ("Ready", "NFDLabelsMissing")
    nodes = [{"metadata": {"labels": {"feature.node.kubernetes.io/pci-0302_10de.present": "true"}}}]
    assert st.has_gpu_nodes(nodes) and st.has_nfd_labels(nodes)
    assert not st.has_gpu_nodes([{"metadata": {"labels": {"feature.node.kubernetes.io/kernel-version.full": "6"}}}])


# ---- against a simulated control plane -----------------------------------------------------------
@pytest.fixture(scope="module")
def booted() -> Iterator[Any]:
    from gpu_conformance.sim.builds.binaries import binaries_available
    from gpu_conformance.sim.session import start_sim

    if not binaries_available():
        pytest.skip("simulated cluster binaries not built")
    sim = start_sim(profile="v25.3-no-cdi", gpu_nodes=2, cpu_nodes=0, quiet=True)
    try:
        yield sim
    finally:
        sim.stop()


def _cp(kube: Any) -> Obj:
    return kube.get("ClusterPolicy", "cluster-policy")


@pytest.mark.sim
def test_sim_writes_only_what_the_real_crd_accepts(booted: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    from gpu_conformance.sim.services.kube_client import Kube

    kube = Kube(booted.cluster.api_client())
    bad = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "typo"},
           "spec": {"driver": {"enabeld": True}}}
    with pytest.raises(ApiException) as err:
        kube.create(bad)
    assert err.value.status in (400, 422) and "enabeld" in str(err.value.body)
    bad["spec"] = {"mig": {"strategy": "sometimes"}}
    with pytest.raises(ApiException):
        kube.create(bad)


@pytest.mark.sim
def test_sim_status_follows_the_pods_through_the_loop(booted: Any) -> None:
    from gpu_conformance.sim.operator import pod_states
    from gpu_conformance.sim.services.kube_client import Kube

    kube = Kube(booted.cluster.api_client())
    assert _cp(kube)["status"]["state"] == "ready"
    driver = next(p for p in kube.list("Pod", "gpu-operator", label_selector="app=nvidia-driver-daemonset")
                  if p["spec"]["nodeName"] == "gpu-node-1")
    kube.patch("Pod", driver["metadata"]["name"], {"status": pod_states.crash_looping(driver, "nvidia-driver-ctr")},
               "gpu-operator", status=True)
    # Nobody but the status loop (a process of the cluster) writes the ClusterPolicy from here on.
    deadline = time.monotonic() + 30
    while _cp(kube)["status"]["state"] != "notReady" and time.monotonic() < deadline:
        time.sleep(0.5)
    status = _cp(kube)["status"]
    error = next(c for c in status["conditions"] if c["type"] == "Error")
    assert (status["state"], error["reason"]) == ("notReady", "OperandNotReady")
    assert error["message"] == "ClusterPolicy is not ready, states not ready: [state-driver]"
    # The pod is replaced (kubelet restarted it fine): ready again.
    kube.request("DELETE", kube.path("Pod", driver["metadata"]["name"], "gpu-operator"), body={"gracePeriodSeconds": 0})
    deadline = time.monotonic() + 60
    while _cp(kube)["status"]["state"] != "ready" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _cp(kube)["status"]["state"] == "ready"
