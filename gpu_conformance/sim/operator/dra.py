"""The DRA side of a simulated GPU Operator v26.7.0: the install model's DRA objects (gpu_operator/dra_driver.py,
where the facts and their sources are) for a Profile, and the allocations a ResourceClaim got.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance.gpu_operator import dra_driver as model
from gpu_conformance.sim.profiles.catalogue import GpuHardware, Profile
from gpu_conformance.sim.profiles.nvidia_smi import gpu_name, gpu_uuid

Obj = dict[str, Any]

DRIVER_NAME = model.DRIVER_NAME
KUBELET_PLUGIN = model.KUBELET_PLUGIN
KUBELET_PLUGIN_CONTAINER = model.KUBELET_PLUGIN_CONTAINER
CONTROLLER = model.CONTROLLER
DEPLOY_LABEL = model.DEPLOY_LABEL
GPU_DEVICE_CLASS = model.GPU_DEVICE_CLASS
RESOURCE_API = model.RESOURCE_API
GPUCLUSTER_API = model.GPUCLUSTER_API
GPUCLUSTER_NAME = model.GPUCLUSTER_NAME
GPUCLUSTER_CRD = model.GPUCLUSTER_CRD
GPUCLUSTER_DEPLOY_LABELS = model.GPUCLUSTER_DEPLOY_LABELS
CHART_NAMESPACE = model.CHART_NAMESPACE
CHART_KUBELET_PLUGIN = model.CHART_KUBELET_PLUGIN
owner_reference = model.owner_reference
chart_device_classes = model.chart_device_classes
gpucluster_crd = model.gpucluster_crd
gpucluster_status = model.gpucluster_status


def image(profile: Profile) -> str:
    return model.image(profile.components.dra_driver)


def kubelet_plugin_name(profile: Profile) -> str:
    """The kubelet plugin's DaemonSet in this profile: the chart's beside a ClusterPolicy, the operator's else."""
    return CHART_KUBELET_PLUGIN if profile.resource_model == "dra-driver" else KUBELET_PLUGIN


def kubelet_plugin_namespace(profile: Profile, operator_namespace: str) -> str:
    return CHART_NAMESPACE if profile.resource_model == "dra-driver" else operator_namespace


def chart_objects(profile: Profile) -> list[Obj]:
    """NVIDIA's DRA driver chart beside the profile's ClusterPolicy (its driver root follows the profile's driver)."""
    return model.chart_objects("/run/nvidia/driver" if profile.driver_pods_expected else "/")


def kubelet_plugin_daemonset(profile: Profile, namespace: str, owner: Obj | None = None) -> Obj:
    return model.kubelet_plugin_daemonset(profile.components.operator, profile.components.dra_driver,
                                          profile.compute_domains, namespace, owner)


def controller_deployment(profile: Profile, namespace: str, owner: Obj | None = None) -> Obj:
    return model.controller_deployment(profile.components.dra_driver, namespace, owner)


def service_accounts(profile: Profile, namespace: str, owner: Obj | None = None) -> list[Obj]:
    return model.service_accounts(profile.compute_domains, namespace, owner)


def device_classes(profile: Profile | None = None) -> list[Obj]:
    return model.device_classes(profile is not None and profile.compute_domains)


def gpucluster(profile: Profile) -> Obj:
    return model.gpucluster(profile.components, profile.compute_domains)


def gpu_device(node: str, index: int, hw: GpuHardware, driver_version: str, cuda_version: str) -> Obj:
    """One full GPU of the simulated node as the plugin announces it (the fake NVML's uuid and name)."""
    return model.gpu_device(index, gpu_uuid(node, index), gpu_name(hw.product), hw, driver_version, cuda_version)


def resource_slice(node: str, node_uid: str, hw: GpuHardware, profile: Profile, generation: int = 1) -> Obj:
    """The node's one ResourceSlice: pool = node name, a device per GPU (MIG-enabled GPUs are not modelled)."""
    devices = [gpu_device(node, i, hw, profile.driver_version, profile.cuda_version) for i in range(hw.count)]
    return model.resource_slice(node, node_uid, devices, generation)


def allocated_devices(claim: Obj, slices: list[Obj]) -> list[tuple[int, str, str]]:
    """The GPUs a ResourceClaim was allocated, as (minor, uuid, productName): status.allocation.devices.results
    (driver, pool, device) looked up in the ResourceSlices; the minor is the device name's (gpu-<minor>)."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    by_key: dict[tuple[str, str, str], tuple[int, str, str]] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        for d in spec.get("devices") or []:
            attrs = d.get("attributes") or {}
            uuid = (attrs.get("uuid") or {}).get("string")
            name = d.get("name", "")
            if uuid and name.removeprefix("gpu-").isdigit():
                product = (attrs.get("productName") or {}).get("string", "")
                by_key[(spec.get("driver", ""), pool, name)] = (int(name.removeprefix("gpu-")), uuid, product)
    out = []
    for r in results:
        got = by_key.get((r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
        if got:
            out.append(got)
    return out


def allocated_uuids(claim: Obj, slices: list[Obj]) -> list[str]:
    """The GPU UUIDs a ResourceClaim was allocated."""
    return [uuid for _, uuid, _ in allocated_devices(claim, slices)]
