"""The DRA models' objects as the simulated v26.7.0 operator and kubelet plugin create them (pure, no cluster)."""

from __future__ import annotations

from gpu_conformance import dra_chart
from gpu_conformance import operands as op
from gpu_conformance.cluster.selectors import match_labels
from gpu_conformance.probe.output import parse_probe_output
from gpu_conformance.sim.operator import dra
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.profiles.catalogue import H100, get_profile
from gpu_conformance.sim.profiles.nvidia_smi import claim_probe_output, gpu_uuid

NODES = ["gpu-node-0", "gpu-node-1"]


def build(profile: str) -> inst.InstallManifests:
    return inst.build(get_profile(profile), "gpu-operator", NODES, ["cpu-node-0"])


def test_gpucluster_model_has_a_gpucluster_and_only_the_dra_driver() -> None:
    m = build("gpucluster")
    assert m.clusterpolicy is None and m.gpucluster is not None
    assert m.gpucluster["metadata"]["name"] == "gpu-cluster" and m.gpucluster["kind"] == "GPUCluster"
    assert [d["metadata"]["name"] for d in m.daemonsets] == [dra.KUBELET_PLUGIN]
    assert not m.runtime_classes and not m.configmaps and not m.services
    gpu = m.gpu_nodes[0]
    assert all(gpu.labels[k] == "true" for k in dra.GPUCLUSTER_DEPLOY_LABELS)
    assert op.DEVICE_PLUGIN.deploy_label not in gpu.labels and not gpu.gpu_resources
    assert inst.expected_daemonset_nodes(m) == {dra.KUBELET_PLUGIN: NODES}
    assert dra.GPUCLUSTER_CRD in {c["metadata"]["name"] for c in m.crds}
    # The chart's default computeDomains.enabled=true: the controller, the second container, two more classes.
    assert m.gpucluster["spec"]["draDriver"]["computeDomains"] == {"enabled": True}
    assert [d["metadata"]["name"] for d in m.deployments] == [dra.CONTROLLER]
    pod = m.daemonsets[0]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["gpus", "compute-domains"]
    assert {"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"} <= {
        c["metadata"]["name"] for c in m.device_classes}
    assert {a["metadata"]["name"] for a in m.service_accounts} == {"nvidia-dra-driver-kubeletplugin",
                                                                    "nvidia-dra-driver-controller"}


def test_dra_driver_model_is_the_clusterpolicy_beside_the_dra_driver_chart() -> None:
    m = build("dra-driver")
    spec = m.clusterpolicy["spec"]
    # No invented field: v26.7.0's ClusterPolicy (and its CRD) has no draDriver.
    assert "draDriver" not in spec and spec["devicePlugin"]["enabled"] is False
    cp_crd = next(c for c in m.crds if c["metadata"]["name"] == op.CLUSTERPOLICY_CRD)
    assert "draDriver" not in cp_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]
    names = [d["metadata"]["name"] for d in m.daemonsets]
    assert dra.KUBELET_PLUGIN not in names and op.DEVICE_PLUGIN.daemonset not in names
    # The chart's objects, in the chart's namespace, with the chart's names and labels (k8s-dra-driver-gpu v25.8.1).
    kinds = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in m.dra_chart_objects]
    assert kinds == [("Namespace", "nvidia-dra-driver-gpu", None),
                     ("ServiceAccount", "nvidia-dra-driver-gpu-service-account-kubeletplugin", "nvidia-dra-driver-gpu"),
                     ("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu")]
    ds = m.dra_chart_objects[-1]
    tmpl = ds["spec"]["template"]
    assert match_labels(ds["spec"]["selector"]["matchLabels"], tmpl["metadata"]["labels"])
    assert match_labels(dra_chart.KUBELET_PLUGIN_LABELS, tmpl["metadata"]["labels"])
    assert "app" not in tmpl["metadata"]["labels"] and "nodeSelector" not in tmpl["spec"]
    assert [c["name"] for c in tmpl["spec"]["initContainers"]] == ["init-container"]
    assert [c["name"] for c in tmpl["spec"]["containers"]] == [dra_chart.GPUS_CONTAINER]
    # GPUs only (computeDomains off): no controller, the chart's two GPU classes.
    assert not m.deployments
    assert sorted(d["metadata"]["name"] for d in m.device_classes) == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert dra.DEPLOY_LABEL not in m.gpu_nodes[0].labels
    # The default profile is untouched: no DRA objects.
    default = build("default")
    assert not default.device_classes and not default.dra_chart_objects


def test_device_classes_select_the_drivers_devices_by_type() -> None:
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"] for c in dra.device_classes()}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}
    assert classes["gpu.nvidia.com"] == ("device.driver == 'gpu.nvidia.com' && "
                                         "device.attributes['gpu.nvidia.com'].type == 'gpu'")


def test_resource_slice_publishes_every_gpu_of_the_node() -> None:
    p = get_profile("dra-driver")
    sl = dra.resource_slice("gpu-node-1", "uid-1", H100, p)
    spec = sl["spec"]
    assert spec["driver"] == "gpu.nvidia.com" and spec["nodeName"] == "gpu-node-1"
    assert spec["pool"] == {"name": "gpu-node-1", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    a = spec["devices"][3]["attributes"]
    assert a["uuid"] == {"string": gpu_uuid("gpu-node-1", 3)} and a["type"] == {"string": "gpu"}
    assert a["productName"] == {"string": "NVIDIA H100 80GB HBM3"} and a["architecture"] == {"string": "Hopper"}
    assert a["driverVersion"] == {"version": "595.91.7"} and a["cudaComputeCapability"] == {"version": "9.0.0"}
    assert spec["devices"][3]["capacity"] == {"memory": {"value": "81559Mi"}}


def test_a_claims_allocation_maps_to_the_slice_devices_and_the_probe_output() -> None:
    sl = dra.resource_slice("gpu-node-1", "uid-1", H100, get_profile("dra-driver"))
    claim = {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-5"}]}}}}
    devices = dra.allocated_devices(claim, [sl])
    assert devices == [(5, gpu_uuid("gpu-node-1", 5), "NVIDIA H100 80GB HBM3")]
    assert dra.allocated_devices({"status": {}}, [sl]) == []
    other_pool = {"status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.nvidia.com", "pool": "gpu-node-0", "device": "gpu-5"}]}}}}
    assert dra.allocated_uuids(other_pool, [sl]) == []
    out = parse_probe_output(claim_probe_output(devices[0][2], [(5, devices[0][1])]))
    assert out.complete and out.uuids == [gpu_uuid("gpu-node-1", 5)] and out.visible_devices == "void"
    assert "/dev/nvidia5" in out.devices and "/dev/nvidia0" not in out.devices


def test_gpucluster_status_as_the_controller_writes_it() -> None:
    ready = dra.gpucluster_status("gpu-operator", True, "2026-12-04T00:00:00Z")
    assert ready["state"] == "ready" and ready["namespace"] == "gpu-operator"
    assert {c["type"]: (c["status"], c["reason"]) for c in ready["conditions"]} == {
        "Ready": ("True", "Reconciled"), "Error": ("False", "Ready")}
    waiting = dra.gpucluster_status("gpu-operator", False, "2026-12-04T00:00:00Z")
    assert waiting["state"] == "notReady"
    assert {c["type"]: (c["status"], c["reason"]) for c in waiting["conditions"]} == {
        "Ready": ("False", "OperandNotReady"), "Error": ("True", "OperandNotReady")}
