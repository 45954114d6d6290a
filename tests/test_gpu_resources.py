"""Resources as the node advertises them (issue #20 item 6, audit C2/m8).

The device plugin registers no resource it has no device for, and kubelet keeps the key of a resource that
stopped being registered at 0. So the probe must request a GPU resource the node advertises above 0, and the
device-plugin checks must read the same nodes the same way: a stale 0 beside advertised resources is healthy;
a node advertising no GPU resource above 0 is the device-plugin layer's failure, not the probe's.
"""

from __future__ import annotations

import pytest
from check_runner import N1, on, only_node, run
from factory import healthy_snapshot, node, set_node_resource

from gpu_conformance.check_input import check_input
from gpu_conformance.checks import device_plugin, probe_checks  # noqa: F401  (registers the checks)
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.cluster.snapshot import ClusterSnapshot, advertised_gpu_resources
from gpu_conformance.model import Layer, Status
from gpu_conformance.probe.manifests import pod_manifest
from gpu_conformance.probe.observations import NotProbed, PodObservation, ProbeObservations, ProbePlan
from gpu_conformance.probe.plan import gpu_resource_for, gpus_in_use, plan_probe
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import decide

GPU, SHARED, MIG = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.5gb"
BEFORE_PROBE = [Layer.OPERATOR, Layer.NFD, Layer.DEPLOY_LABELS, Layer.DRIVER_TOOLKIT, Layer.DEVICE_PLUGIN]


def mig_mixed_stale() -> ClusterSnapshot:
    """All-MIG mixed node after a switch from whole GPUs: nvidia.com/gpu kept at 0 by kubelet."""
    snap = healthy_snapshot(mig="mixed")
    set_node_resource(snap, N1, 0, 0)
    return snap


def shared_stale() -> ClusterSnapshot:
    """Time-slicing with renameByDefault after plain GPUs: nvidia.com/gpu.shared advertised, nvidia.com/gpu at 0."""
    snap = healthy_snapshot(time_slicing_replicas=4, rename_shared=True)
    set_node_resource(snap, N1, 0, 0)
    return snap


def only_stale_zero() -> ClusterSnapshot:
    """The failing case: the plugin advertises nothing now, only the stale key at 0 is left."""
    snap = healthy_snapshot()
    set_node_resource(snap, N1, 0, 0)
    return snap


# name, snapshot, the resource the probe requests on gpu-node-1
HEALTHY = [
    ("mig-mixed-stale-gpu-0", mig_mixed_stale, MIG),
    ("renamed-shared-stale-gpu-0", shared_stale, SHARED),
    ("mig-single", lambda: healthy_snapshot(mig="single"), GPU),
    ("plain", lambda: healthy_snapshot(mig="none"), GPU),
]


def _verdict_before_probe(snap: ClusterSnapshot):  # noqa: ANN202 - verdict.Verdict
    checks = [c for c in REGISTRY.values() if c.layer in BEFORE_PROBE]
    inp = check_input(snap, Settings())
    findings = [f for c in checks for f in c.run(inp)]
    return decide(checks, findings, snap.gpu_node_names, BEFORE_PROBE)


def test_advertised_reads_only_resources_above_zero_in_a_stable_order() -> None:
    n = {"status": {"capacity": {GPU: "0", "nvidia.com/mig-2g.10gb": "1", MIG: "2", "cpu": "8",
                                 "nvidia.com/hostdev": "4"},
                    "allocatable": {GPU: "0", "nvidia.com/mig-2g.10gb": "1", MIG: "2", "cpu": "8",
                                    "nvidia.com/hostdev": "4"}}}
    # Not a GPU: the Network Operator's SR-IOV resource shares the nvidia.com/ prefix.
    assert advertised_gpu_resources(n) == {MIG: 2, "nvidia.com/mig-2g.10gb": 1}
    n["status"]["capacity"][GPU] = n["status"]["allocatable"][GPU] = "1"
    assert list(advertised_gpu_resources(n)) == [GPU, MIG, "nvidia.com/mig-2g.10gb"]
    # capacity above 0 but nothing allocatable (unhealthy devices) is not advertised either
    n["status"]["allocatable"][GPU] = "0"
    assert GPU not in advertised_gpu_resources(n)


@pytest.mark.parametrize(("name", "make", "resource"), HEALTHY, ids=[h[0] for h in HEALTHY])
def test_healthy_nodes_pass_the_device_plugin_layer_and_are_probed_for_what_they_advertise(
        name: str, make, resource: str) -> None:
    snap = make()
    assert gpu_resource_for(node(snap, N1)) == resource
    for cid in ("DPL-002", "DPL-003", "DPL-004"):
        assert on(cid, snap).status == Status.PASS, on(cid, snap).message
    if "stale" in name:
        assert "nvidia.com/gpu at 0: kept by kubelet" in on("DPL-002", snap).message
    verdict = _verdict_before_probe(snap)
    assert all(n.root_cause is None for n in verdict.nodes), [n.root_cause for n in verdict.nodes]
    plan = plan_probe(snap, Settings(run_id="r"), snap.gpu_node_names, {})
    assert N1 in plan.targets and plan.resources[N1] == resource
    limits = pod_manifest("r", N1, plan.resources[N1], Settings(run_id="r"))["spec"]["containers"][0]["resources"]
    assert limits["limits"] == limits["requests"] == {resource: "1"}


def test_only_a_stale_zero_fails_the_device_plugin_layer_not_the_probe() -> None:
    snap = only_stale_zero()
    f = only_node("DPL-002", snap)
    assert "nvidia.com/gpu capacity=0, allocatable=0" in f.message and "registers no GPU resource now" in f.message
    assert on("DPL-003", snap).status == Status.NA
    node_verdict = next(n for n in _verdict_before_probe(snap).nodes if n.node == N1)
    assert node_verdict.root_cause is not None and node_verdict.root_cause.check_id == "DPL-002"
    # Were it probed anyway (no operator plugin), the pod names the resource the node carries and PRB-001
    # says the node advertises none, not that other pods hold the GPUs.
    assert gpu_resource_for(node(snap, N1)) == GPU
    plan = plan_probe(snap, Settings(run_id="r"), [N1], {})
    assert plan.targets == [N1]
    obs = ProbeObservations(run_id="r", namespace="ns", plan=plan)
    pod = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    obs.pods[N1] = PodObservation(N1, "p", GPU, pod=pod, events=[
        {"type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available: 1 Insufficient "
                                                                    "nvidia.com/gpu."}])
    f = next(f for f in run("PRB-001", snap, probe=obs) if f.node == N1)
    assert f.status == Status.FAIL and "advertises no allocatable GPU resource" in f.message


def test_prb001_names_the_requested_resource_on_a_mig_node() -> None:
    snap = mig_mixed_stale()
    obs = ProbeObservations(run_id="r", namespace="ns", plan=ProbePlan(targets=[N1], eligible=1))
    pod = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    obs.pods[N1] = PodObservation(N1, "p", MIG, pod=pod, events=[
        {"type": "Warning", "reason": "FailedScheduling", "message": f"1 Insufficient {MIG}."}])
    f = next(f for f in run("PRB-001", snap, probe=obs) if f.node == N1)
    assert "all 7 nvidia.com/mig-1g.5gb on gpu-node-1 are allocated to other pods" in f.message


def test_busy_accounting_moves_to_a_free_profile_and_skips_only_when_every_resource_is_taken() -> None:
    snap = mig_mixed_stale()
    set_node_resource(snap, N1, 1, 1, resource="nvidia.com/mig-3g.20gb")
    holding = [{"spec": {"nodeName": N1, "containers": [{"resources": {"limits": {MIG: "7"}}}]},
                "status": {"phase": "Running"}}]
    used = gpus_in_use(holding)
    plan = plan_probe(snap, Settings(run_id="r"), [N1], used)
    assert plan.resources[N1] == "nvidia.com/mig-3g.20gb"
    holding.append({"spec": {"nodeName": N1, "containers": [
        {"resources": {"requests": {"nvidia.com/mig-3g.20gb": "1"}}}]}, "status": {"phase": "Running"}})
    plan = plan_probe(snap, Settings(run_id="r"), [N1], gpus_in_use(holding))
    skip = plan.not_probed[N1]
    assert plan.targets == [] and skip.kind == NotProbed.BUSY
    # the stale nvidia.com/gpu: 0 is neither a free GPU nor counted as one
    assert skip.message.startswith("all 7 nvidia.com/mig-1g.5gb in use, all 1 nvidia.com/mig-3g.20gb in use")
    assert GPU not in skip.evidence["allocatable"]


def test_count_follows_the_advertised_name_when_the_rename_was_dropped() -> None:
    # Renamed once (nvidia.com/gpu.shared), now plain again: kubelet keeps gpu.shared at 0; GFD's count is
    # compared with the nvidia.com/gpu the plugin advertises now.
    snap = healthy_snapshot()
    set_node_resource(snap, N1, 0, 0, resource=SHARED)
    assert on("DPL-004", snap).status == Status.PASS and "nvidia.com/gpu=1" in on("DPL-004", snap).message
    assert on("DPL-002", snap).status == Status.PASS
    assert gpu_resource_for(node(snap, N1)) == GPU
