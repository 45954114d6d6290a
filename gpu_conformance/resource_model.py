"""Which way the cluster hands GPUs to pods — its GPU resource model — and the DRA facts the checks share.

Three models (issue #22):

* ``device-plugin``: a ClusterPolicy, and the NVIDIA device plugin advertising ``nvidia.com/gpu`` on each node
  (every operator release).
* ``dra-driver``: a ClusterPolicy whose ``spec.draDriver.enabled`` is true: the operator runs NVIDIA's DRA driver
  instead of the device plugin. v26.7.0's ClusterPolicy type (api/nvidia/v1/clusterpolicy_types.go) has no such
  field: the model is recognised for the releases that add it and renders the same kubelet-plugin DaemonSet.
* ``gpucluster``: a ``GPUCluster`` (nvidia.com/v1alpha1, v26.7.0 tech preview) and no ClusterPolicy: the operator
  deploys the DRA driver (manifests/state-dra-driver), no device plugin, no GFD, no driver or toolkit of its own.

The DRA driver publishes each node's GPUs as ResourceSlices of driver ``gpu.nvidia.com`` and a pod asks for one
with a ResourceClaim of DeviceClass ``gpu.nvidia.com``. Names below are from gpu-operator v26.7.0
(manifests/state-dra-driver/0400_deviceclass-gpu.yaml, 0500_daemonset.yaml, controllers/state_manager.go) and
NVIDIA/k8s-dra-driver-gpu at the 0.5.0 development line v26.7.0 deploys (values.yaml draDriver.version v0.5.0;
cmd/gpu-kubelet-plugin/main.go DriverName, deviceinfo.go Attributes, partitions.go fullGpuCapacity).
"""

from __future__ import annotations

from enum import StrEnum

from gpu_conformance.cluster.snapshot import ClusterSnapshot


class ResourceModel(StrEnum):
    DEVICE_PLUGIN = "device-plugin"
    DRA_DRIVER = "dra-driver"
    GPUCLUSTER = "gpucluster"

    @property
    def dra(self) -> bool:
        """GPUs reach pods through ResourceClaims, not the device plugin's extended resource."""
        return self is not ResourceModel.DEVICE_PLUGIN


# The DRA driver's name in ResourceSlices (spec.driver) and the qualifier of its device attributes.
DRA_DRIVER_NAME = "gpu.nvidia.com"
# The DeviceClass a pod's claim names to get a whole GPU (its CEL selects type == 'gpu' of that driver); the
# operator also creates mig.nvidia.com and vfio.gpu.nvidia.com, and the compute-domain ones when enabled.
GPU_DEVICE_CLASS = "gpu.nvidia.com"
# The device types the driver publishes (deviceinfo.go / types.go): a whole GPU, a MIG device, a VFIO passthrough GPU.
GPU_DEVICE_TYPES = ("gpu", "mig")
# The kubelet plugin as the operator renders it: DaemonSet name, pod label, the container serving gpu.nvidia.com,
# its init container (waits for the driver) and the node label that schedules it.
KUBELET_PLUGIN_DAEMONSET = "nvidia-dra-driver-kubelet-plugin"
KUBELET_PLUGIN_APP = KUBELET_PLUGIN_DAEMONSET
KUBELET_PLUGIN_CONTAINER = "gpus"
KUBELET_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"


def dra_driver_enabled(snapshot: ClusterSnapshot) -> bool:
    return snapshot.active_clusterpolicy is not None and snapshot.policy_spec("draDriver", "enabled") is True


def resource_model(snapshot: ClusterSnapshot) -> ResourceModel:
    """The model the cluster runs. A ClusterPolicy beside a GPUCluster is OPR-009's failure (v26.7.0 reconciles
    neither); the ClusterPolicy's model is named then, since the operator's Helm default creates it."""
    if snapshot.gpu_clusters and not snapshot.clusterpolicies:
        return ResourceModel.GPUCLUSTER
    if dra_driver_enabled(snapshot):
        return ResourceModel.DRA_DRIVER
    return ResourceModel.DEVICE_PLUGIN


def both_models(snapshot: ClusterSnapshot) -> bool:
    return bool(snapshot.gpu_clusters) and bool(snapshot.clusterpolicies)
