"""The DRA models on the simulated cluster: the kubelet plugin publishes each GPU node's ResourceSlice, the real
kube-scheduler (v1.36, DRA GA) allocates a ResourceClaim from it, and the claim pod runs seeing the GPU it got.

Objects and attributes: sim/operator/dra.py (NVIDIA/gpu-operator v26.7.0 manifests/state-dra-driver,
NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpu_conformance import dra_chart
from gpu_conformance.cluster.connect import raw_request
from gpu_conformance.probe.output import ProbeOutput, parse_probe_output
from gpu_conformance.sim.operator import dra
from gpu_conformance.sim.profiles.catalogue import get_profile
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid
from gpu_conformance.sim.services.kube_client import Kube

pytestmark = pytest.mark.sim
NS = "dra-claims"


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(profile="dra-driver", gpu_nodes=2, cpu_nodes=1, quiet=True)
    try:
        yield booted
    finally:
        booted.stop()


@pytest.fixture
def kube(sim: Any) -> Kube:
    return Kube(sim.cluster.api_client())


def slices_by_node(kube: Kube) -> dict[str, dict]:
    return {s["spec"]["nodeName"]: s for s in kube.list("ResourceSlice") if s["spec"]["driver"] == dra.DRIVER_NAME}


def test_every_gpu_node_publishes_its_gpus(kube: Kube) -> None:
    hw = get_profile("dra-driver").hardware_for(0)
    assert {c["metadata"]["name"] for c in kube.list("DeviceClass")} >= {dra.GPU_DEVICE_CLASS, "mig.nvidia.com"}
    slices = slices_by_node(kube)
    assert sorted(slices) == ["gpu-node-0", "gpu-node-1"]  # not the CPU node
    for node, sl in slices.items():
        assert sl["spec"]["pool"]["name"] == node
        devices = sl["spec"]["devices"]
        assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(hw.count)]
        assert [d["attributes"]["uuid"]["string"] for d in devices] == [gpu_uuid(node, i) for i in range(hw.count)]
        assert devices[0]["attributes"]["productName"]["string"] == hw.name
        assert devices[0]["capacity"]["memory"]["value"] == f"{hw.memory_mib}Mi"
        assert devices[0]["attributes"]["driverVersion"]["version"] == "595.91.7"


def test_claim_pod_is_allocated_a_gpu_of_its_node_and_runs(kube: Kube) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    wait_for(lambda: kube.list("ServiceAccount", NS), "default ServiceAccount")
    kube.create({"apiVersion": dra.RESOURCE_API, "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "gpu-conformance-probe", "namespace": NS},
                 "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": dra.GPU_DEVICE_CLASS}}]}}}})
    node = "gpu-node-1"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claimer", "namespace": NS},
                 # Kept running: the resourceclaim controller deletes a template's claim once its pod is done.
                 "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                              "nodeSelectorTerms": [{"matchFields": [
                                  {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                          "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-conformance-probe"}],
                          "containers": [{"name": "gpu-probe", "image": "example.com/probe:1",
                                          "resources": {"claims": [{"name": "gpu"}]}}]}})
    pod = wait_for(lambda: next((p for p in kube.list("Pod", NS) if p["status"].get("phase") == "Running"), None),
                   "the claim pod to run")
    assert pod["spec"]["nodeName"] == node
    (claim,) = kube.list("ResourceClaim", NS)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == dra.DRIVER_NAME and result["pool"] == node
    uuids = dra.allocated_uuids(claim, kube.list("ResourceSlice"))
    assert len(uuids) == 1 and uuids[0] in {gpu_uuid(node, i) for i in range(8)}
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claimer"]
    # What the container prints names exactly that GPU, and its device node by the device's minor.
    minor = int(result["device"].removeprefix("gpu-"))

    def output() -> ProbeOutput | None:
        text = raw_request(kube.client, "GET", f"/api/v1/namespaces/{NS}/pods/claimer/log",
                           [("container", "gpu-probe")]).decode()
        out = parse_probe_output(text)
        return out if out.complete else None

    out = wait_for(output, "the claim pod's own output", timeout=20)
    assert out.uuids == uuids and out.visible_devices == "void"
    assert f"/dev/nvidia{minor}" in out.devices and len([d for d in out.devices if d[11:].isdigit()]) == 1


def test_slice_is_withdrawn_with_the_plugin_pod_and_published_again(kube: Kube, sim: Any) -> None:
    # The dra-driver profile's kubelet plugin is the DRA driver chart's, in the chart's namespace.
    ns = dra.CHART_NAMESPACE
    node = "gpu-node-0"
    old = slices_by_node(kube)[node]["metadata"]["name"]
    pod = next(p for p in kube.list("Pod", ns, label_selector=dra_chart.KUBELET_PLUGIN_SELECTOR)
               if p["spec"]["nodeName"] == node)
    kube.request("DELETE", kube.path("Pod", pod["metadata"]["name"], ns), body={"gracePeriodSeconds": 0})
    # The replacement pod passes its init-container (the driver root is there) within a round or two: the old
    # slice goes, a new one comes.
    new = wait_for(lambda: (slices_by_node(kube).get(node) or {}).get("metadata", {}).get("name") not in (None, old)
                   and slices_by_node(kube)[node], "the slice published again by the new plugin pod", timeout=30)
    assert len([s for s in kube.list("ResourceSlice") if s["spec"]["nodeName"] == node]) == 1
    assert new["spec"]["devices"][0]["attributes"]["uuid"]["string"] == gpu_uuid(node, 0)
