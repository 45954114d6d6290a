"""Which way the cluster hands GPUs to pods — its GPU resource model — and the DRA facts the checks share.

Three models (issue #22):

* ``device-plugin``: a ClusterPolicy, and the NVIDIA device plugin advertising ``nvidia.com/gpu`` on each node
  (every operator release).
* ``dra-driver``: a ClusterPolicy beside NVIDIA's DRA driver for GPUs installed from its own Helm chart
  (NVIDIA/k8s-dra-driver-gpu, chart nvidia-dra-driver-gpu; dra_chart.py), the way NVIDIA's GPU Operator docs
  (dra-intro-install) install it: the operator brings driver, toolkit, NFD and GFD, the chart's kubelet plugin
  publishes the GPUs. No ClusterPolicy field says so (v26.7.0's api/nvidia/v1/clusterpolicy_types.go has no
  draDriver; its values.yaml leaves the DRA driver to the GPUCluster), so it is recognised from what the driver
  leaves in the API: the DeviceClass ``gpu.nvidia.com`` (templates/deviceclass-gpu.yaml), ResourceSlices of driver
  ``gpu.nvidia.com``, or the chart's kubelet-plugin pods.
* ``gpucluster``: a ``GPUCluster`` (nvidia.com/v1alpha1, v26.7.0 tech preview) and no ClusterPolicy: the operator
  deploys the DRA driver (manifests/state-dra-driver), no device plugin, no GFD, no driver or toolkit of its own.

The DRA driver publishes each node's GPUs as ResourceSlices of driver ``gpu.nvidia.com`` and a pod asks for one
with a ResourceClaim of DeviceClass ``gpu.nvidia.com``. Names below are from gpu-operator v26.7.0
(manifests/state-dra-driver/0400_deviceclass-gpu.yaml, 0500_daemonset.yaml, controllers/state_manager.go) and
NVIDIA/k8s-dra-driver-gpu (cmd/gpu-kubelet-plugin/main.go DriverName, deviceinfo.go Attributes, partitions.go
fullGpuCapacity; the chart at v25.8.1).
"""

from __future__ import annotations

from enum import StrEnum

from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of


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
# The kubelet plugin as the operator renders it in the GPUCluster model (the chart's names: dra_chart.py):
# DaemonSet name, pod label, the container serving gpu.nvidia.com,
# its init container (waits for the driver) and the node label that schedules it.
KUBELET_PLUGIN_DAEMONSET = "nvidia-dra-driver-kubelet-plugin"
KUBELET_PLUGIN_APP = KUBELET_PLUGIN_DAEMONSET
KUBELET_PLUGIN_CONTAINER = "gpus"
KUBELET_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"


def dra_driver_present(snapshot: ClusterSnapshot) -> bool:
    """Evidence of NVIDIA's DRA driver for GPUs in the API: its GPU DeviceClass, a ResourceSlice of its driver, or
    a kubelet-plugin pod of its chart. Any one is enough: a broken install loses the others (that is what the
    DRA checks then judge)."""
    return (any(name_of(d) == GPU_DEVICE_CLASS for d in snapshot.device_classes)
            or any((s.get("spec") or {}).get("driver") == DRA_DRIVER_NAME for s in snapshot.resource_slices)
            or bool(snapshot.dra_plugin_pods))


def resource_model(snapshot: ClusterSnapshot) -> ResourceModel:
    """The model the cluster runs. A ClusterPolicy beside a GPUCluster is OPR-009's failure (v26.7.0 reconciles
    neither); the ClusterPolicy's model is named then, since the operator's Helm default creates it."""
    if snapshot.gpu_clusters and not snapshot.clusterpolicies:
        return ResourceModel.GPUCLUSTER
    if snapshot.clusterpolicies and not snapshot.gpu_clusters and dra_driver_present(snapshot):
        return ResourceModel.DRA_DRIVER
    return ResourceModel.DEVICE_PLUGIN


def both_models(snapshot: ClusterSnapshot) -> bool:
    return bool(snapshot.gpu_clusters) and bool(snapshot.clusterpolicies)
