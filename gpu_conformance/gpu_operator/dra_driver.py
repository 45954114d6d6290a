"""The DRA side of a GPU Operator v26.7.0 install, read by the simulator and tests/factory.py: the DRA driver's
kubelet plugin, DeviceClasses, ResourceSlices, and the GPUCluster CR with the status its controller writes.

What v26.7.0 deploys (NVIDIA/gpu-operator at v26.7.0):

* `manifests/state-dra-driver/0500_daemonset.yaml`: DaemonSet `nvidia-dra-driver-kubelet-plugin` (label and
  selector `app`), nodeSelector `nvidia.com/gpu.deploy.dra-driver=true`, init container `driver-validation`
  (the validator in the operator image, COMPONENT=driver, WITH_WAIT=true), container `gpus` running
  `gpu-kubelet-plugin`; with computeDomains enabled (the chart's default) also container `compute-domains`
  and (0600) Deployment `nvidia-dra-driver-controller` (container `compute-domain`). The simulated machines have
  no multi-node NVLink, so nothing publishes compute-domain devices.
* `manifests/state-dra-driver/0400..0430`: DeviceClasses `gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`
  selecting `device.driver == 'gpu.nvidia.com'` by the `type` attribute, and with computeDomains
  `compute-domain-daemon.nvidia.com` / `compute-domain-default-channel.nvidia.com`. No extendedResourceName.
* `api/nvidia/v1alpha1/gpucluster_types.go`: GPUCluster (cluster-scoped singleton `gpu-cluster`),
  status.state ready|notReady|disabled, status.namespace, metav1 conditions; `controllers/gpucluster_controller.go`
  + `internal/conditions/gpucluster.go`: Ready=True/Reconciled "All resources have been successfully
  reconciled" with Error=False, or Ready=False + Error=True/OperandNotReady "Waiting for operand pods to be ready".
* The Helm chart's `draDriver` values: image nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0.

What the kubelet plugin publishes (NVIDIA/k8s-dra-driver-gpu v0.4.0, the newest tag stored;
cmd/gpu-kubelet-plugin/deviceinfo.go, partitions.go, driver.go, main.go): driver `gpu.nvidia.com`, one pool named
after the node, one device `gpu-<minor>` per full GPU with attributes type=gpu, uuid, productName, brand,
architecture, cudaComputeCapability, driverVersion, cudaDriverVersion (versions as semver) and
resource.kubernetes.io/pciBusID, and capacity `memory` in bytes.

The `dra-driver` profile is no operator feature: v26.7.0's ClusterPolicy has no draDriver field (its values.yaml
leaves the DRA driver to the GPUCluster). It is a ClusterPolicy with the device plugin off and NVIDIA's DRA driver
installed from its own Helm chart beside it, as the chart renders it for GPUs (NVIDIA/k8s-dra-driver-gpu v25.8.1,
deployments/helm/nvidia-dra-driver-gpu, release `nvidia-dra-driver-gpu` in namespace `nvidia-dra-driver-gpu` with
resources.gpus.enabled=true, gpuResourcesEnabledOverride=true, resources.computeDomains.enabled=false,
nvidiaDriverRoot=/run/nvidia/driver): templates/kubeletplugin.yaml (DaemonSet `nvidia-dra-driver-gpu-kubelet-plugin`,
init container `init-container` waiting for the driver root, container `gpus`; NFD-label node affinity from
values.yaml), _helpers.tpl (labels), deviceclass-gpu.yaml and deviceclass-mig.yaml. controller.yaml renders the
controller only with computeDomains, so there is none.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance import dra_chart
from gpu_conformance import operands as op
from gpu_conformance.gpu_operator.clusterpolicy import CHART_CR_LABELS
from gpu_conformance.gpu_operator.hardware import GpuHardware
from gpu_conformance.gpu_operator.releases import ComponentVersions

Obj = dict[str, Any]

DRIVER_NAME = "gpu.nvidia.com"
KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
KUBELET_PLUGIN_CONTAINER = "gpus"
CONTROLLER = "nvidia-dra-driver-controller"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"
GPU_DEVICE_CLASS = "gpu.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"
GPUCLUSTER_API = "nvidia.com/v1alpha1"
GPUCLUSTER_NAME = "gpu-cluster"
GPUCLUSTER_CRD = "gpuclusters.nvidia.com"
READY_MESSAGE = "All resources have been successfully reconciled"
NOT_READY_MESSAGE = "Waiting for operand pods to be ready"
# The deploy labels the GPUCluster stack gates its operands on (controllers/state_manager.go gpuClusterStateLabels).
GPUCLUSTER_DEPLOY_LABELS = op.GPUCLUSTER_DEPLOY_LABELS
_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# NVML's architecture string per GFD family (nvlib GetArchitectureAsString).
_ARCHITECTURE = {"hopper": "Hopper", "ampere": "Ampere", "turing": "Turing", "blackwell": "Blackwell"}
# NVML brand strings: data-centre parts report "Nvidia", the Tesla line "Tesla".
_BRAND = {"turing": "Tesla"}


def image(dra_driver_version: str) -> str:
    """draDriver's image at the chart's default repository (values.yaml draDriver)."""
    return f"nvcr.io/nvidia/dra-driver-nvidia-gpu:{dra_driver_version}"


CHART_VERSION = "v25.8.1"
CHART_IMAGE = f"nvcr.io/nvidia/k8s-dra-driver-gpu:{CHART_VERSION}"
CHART_NAMESPACE = dra_chart.DEFAULT_NAMESPACE
CHART_SERVICE_ACCOUNT = f"{dra_chart.CHART_NAME}-service-account-kubeletplugin"
# The operand loop keys a node's pods by their `app` label; the chart sets none, so its kubelet plugin goes by the
# DaemonSet's name there (operand_loop.pod_app).
CHART_KUBELET_PLUGIN = dra_chart.KUBELET_PLUGIN_DAEMONSET


def _chart_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": dra_chart.CHART_NAME, "app.kubernetes.io/instance": dra_chart.CHART_NAME}


def chart_objects(driver_root: str) -> list[Obj]:
    """What `helm install nvidia-dra-driver-gpu` creates that a check can observe, in creation order: the
    namespace, the kubelet plugin's ServiceAccount and its DaemonSet (DeviceClasses: chart_device_classes).
    driver_root: the chart's nvidiaDriverRoot (/run/nvidia/driver under the operator's driver, / for a host's)."""
    helm = {**_chart_labels(), "helm.sh/chart": f"{dra_chart.CHART_NAME}-{CHART_VERSION.lstrip('v')}",
            "app.kubernetes.io/version": CHART_VERSION.lstrip("v"), "app.kubernetes.io/managed-by": "Helm"}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": CHART_NAMESPACE, "labels": {"kubernetes.io/metadata.name": CHART_NAMESPACE}}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
        "name": CHART_SERVICE_ACCOUNT, "namespace": CHART_NAMESPACE, "labels": dict(helm)}}
    pod_labels = {**_chart_labels(), **dra_chart.KUBELET_PLUGIN_LABELS}
    init = {"name": "init-container", "image": CHART_IMAGE, "securityContext": {"privileged": True},
            "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],
            "env": [{"name": "NVIDIA_DRIVER_ROOT", "value": driver_root},
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
            "volumeMounts": [{"name": "driver-root-parent", "mountPath": "/driver-root-parent",
                              "mountPropagation": "HostToContainer"}]}
    gpus = {"name": dra_chart.GPUS_CONTAINER, "image": CHART_IMAGE, "securityContext": {"privileged": True},
            "command": ["bash", "-c"], "args": ["exec gpu-kubelet-plugin -v \"${LOG_VERBOSITY}\""],
            "env": [{"name": "LOG_VERBOSITY", "value": "6"}, {"name": "NVIDIA_DRIVER_ROOT", "value": driver_root},
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "CDI_ROOT", "value": "/var/run/cdi"},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
            "volumeMounts": [{"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                             {"name": "plugins", "mountPath": "/var/lib/kubelet/plugins",
                              "mountPropagation": "Bidirectional"},
                             {"name": "cdi", "mountPath": "/var/run/cdi"}]}
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]} for k, v in (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"))]
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": CHART_KUBELET_PLUGIN, "namespace": CHART_NAMESPACE, "labels": dict(helm)},
        "spec": {
            "selector": {"matchLabels": {f"{dra_chart.CHART_NAME}-component": "kubelet-plugin"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": pod_labels}, "spec": {
                "priorityClassName": "system-node-critical", "serviceAccountName": CHART_SERVICE_ACCOUNT,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": terms}}},
                # values.yaml sets no tolerations: the simulated GPU nodes carry no taint to tolerate.
                "initContainers": [init], "containers": [gpus],
                "volumes": [{"name": "plugins-registry", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
                            {"name": "plugins", "hostPath": {"path": "/var/lib/kubelet/plugins"}},
                            {"name": "cdi", "hostPath": {"path": "/var/run/cdi"}},
                            {"name": "driver-root-parent", "hostPath": {"path": "/run/nvidia",
                                                                         "type": "DirectoryOrCreate"}}]}}}}
    return [ns, sa, ds]


def chart_device_classes() -> list[Obj]:
    """deviceclass-gpu.yaml and deviceclass-mig.yaml (resources.gpus.enabled): no vfio class in the chart."""
    return [d for d in device_classes() if d["metadata"]["name"] in (GPU_DEVICE_CLASS, "mig.nvidia.com")]


def owner_reference(kind: str, name: str, uid: str) -> Obj:
    return {"apiVersion": GPUCLUSTER_API if kind == "GPUCluster" else "nvidia.com/v1", "kind": kind, "name": name,
            "uid": uid, "controller": True, "blockOwnerDeletion": True}


def kubelet_plugin_daemonset(operator_version: str, dra_driver_version: str, compute_domains: bool, namespace: str,
                             owner: Obj | None = None) -> Obj:
    """The kubelet plugin's DaemonSet, trimmed to what a check can observe (0500_daemonset.yaml)."""
    labels = {"app.kubernetes.io/name": "nvidia-dra-driver", "app.kubernetes.io/component": KUBELET_PLUGIN,
              "app": KUBELET_PLUGIN}
    validator = f"nvcr.io/nvidia/gpu-operator:{operator_version}"
    mounts = [{"name": "validations", "mountPath": "/run/nvidia/validations"}]
    init = {"name": "driver-validation", "image": validator, "command": ["nvidia-validator"],
            "securityContext": {"privileged": True, "runAsUser": 0},
            "env": [{"name": "COMPONENT", "value": "driver"}, {"name": "WITH_WAIT", "value": "true"},
                    {"name": "DRIVER_VALIDATION_SKIP_GPU_INIT", "value": "true"},
                    {"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}],
            "volumeMounts": mounts}
    gpus = {"name": KUBELET_PLUGIN_CONTAINER, "image": image(dra_driver_version), "command": ["bash", "-c"],
            "args": ["exec gpu-kubelet-plugin -v \"${LOG_VERBOSITY}\""], "securityContext": {"privileged": True},
            "env": [{"name": "LOG_VERBOSITY", "value": "4"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
                    {"name": "CDI_ROOT", "value": "/var/run/cdi"},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "KUBELET_REGISTRAR_DIRECTORY_PATH", "value": "/var/lib/kubelet/plugins_registry"},
                    {"name": "KUBELET_PLUGINS_DIRECTORY_PATH", "value": "/var/lib/kubelet/plugins"}],
            "volumeMounts": [{"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                             {"name": "plugins", "mountPath": "/var/lib/kubelet/plugins",
                              "mountPropagation": "Bidirectional"},
                             {"name": "cdi", "mountPath": "/var/run/cdi"},
                             {**mounts[0], "readOnly": True}]}
    gpu_node_terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]} for k, v in (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"), ("nvidia.com/gpu.present", "true"))]
    containers = [gpus]
    if compute_domains:
        containers.append({**gpus, "name": "compute-domains",
                           "args": ["exec compute-domain-kubelet-plugin -v \"${LOG_VERBOSITY}\""]})
    meta: Obj = {"name": KUBELET_PLUGIN, "namespace": namespace, "labels": dict(labels)}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"app": KUBELET_PLUGIN}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": labels}, "spec": {
                "priorityClassName": "system-node-critical",
                "serviceAccountName": "nvidia-dra-driver-kubeletplugin",
                "nodeSelector": {DEPLOY_LABEL: "true"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": gpu_node_terms}}},
                "tolerations": [_TOLERATION],
                "initContainers": [init], "containers": containers,
                "volumes": [{"name": "plugins-registry", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
                            {"name": "plugins", "hostPath": {"path": "/var/lib/kubelet/plugins"}},
                            {"name": "cdi", "hostPath": {"path": "/var/run/cdi"}},
                            {"name": "validations", "hostPath": {"path": "/run/nvidia/validations",
                                                                  "type": "DirectoryOrCreate"}}]}},
        },
    }


def controller_deployment(dra_driver_version: str, namespace: str, owner: Obj | None = None) -> Obj:
    """The compute-domain controller (0600_controller-deployment.yaml), rendered only with computeDomains."""
    labels = {"app.kubernetes.io/name": "nvidia-dra-driver", "app.kubernetes.io/component": CONTROLLER,
              "app": CONTROLLER}
    meta: Obj = {"name": CONTROLLER, "namespace": namespace, "labels": dict(labels)}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": CONTROLLER}},
        "template": {"metadata": {"labels": labels}, "spec": {
            "priorityClassName": "system-node-critical", "serviceAccountName": "nvidia-dra-driver-controller",
            "tolerations": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane",
                             "operator": "Exists"}, _TOLERATION],
            "containers": [{"name": "compute-domain", "image": image(dra_driver_version),
                            "command": ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"],
                            "env": [{"name": "LOG_VERBOSITY", "value": "4"},
                                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}]}}}}


def service_accounts(compute_domains: bool, namespace: str, owner: Obj | None = None) -> list[Obj]:
    names = ["nvidia-dra-driver-kubeletplugin"] + (["nvidia-dra-driver-controller"] if compute_domains else [])
    out = []
    for name in names:
        meta: Obj = {"name": name, "namespace": namespace}
        if owner:
            meta["ownerReferences"] = [owner]
        out.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    return out


def device_classes(compute_domains: bool = False) -> list[Obj]:
    """gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com (0400-0430), the compute-domain ones with computeDomains."""
    out = []
    for name, kind in ((GPU_DEVICE_CLASS, "gpu"), ("mig.nvidia.com", "mig"), ("vfio.gpu.nvidia.com", "vfio")):
        expr = f"device.driver == '{DRIVER_NAME}' && device.attributes['{DRIVER_NAME}'].type == '{kind}'"
        out.append({"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    if compute_domains:
        cd = "compute-domain.nvidia.com"
        for name, extra in (("compute-domain-daemon.nvidia.com", "type == 'daemon'"),
                            ("compute-domain-default-channel.nvidia.com",
                             f"type == 'channel' && device.attributes['{cd}'].id == 0")):
            expr = f"device.driver == '{cd}' && device.attributes['{cd}'].{extra}"
            out.append({"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name},
                        "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    return out


def gpucluster_crd() -> Obj:
    """Our own schema of the GPUCluster CRD: the real group/kind/scope/short name and status subresource; the spec
    is kept whole (x-kubernetes-preserve-unknown-fields) since the sim only writes the chart's values into it."""
    status = {"type": "object", "properties": {
        "state": {"type": "string", "enum": ["ready", "notReady", "disabled"]},
        "namespace": {"type": "string"},
        "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": GPUCLUSTER_CRD},
        "spec": {"group": "nvidia.com", "scope": "Cluster",
                 "names": {"kind": "GPUCluster", "listKind": "GPUClusterList", "plural": "gpuclusters",
                           "singular": "gpucluster", "shortNames": ["gc"]},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   "metadata": {"type": "object"},
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                   "status": status}}}}]},
    }


def gpucluster(c: ComponentVersions, compute_domains: bool) -> Obj:
    """The GPUCluster the chart renders with gpuCluster.deployCR=true (templates/gpucluster.yaml, default values)."""
    return {
        "apiVersion": GPUCLUSTER_API, "kind": "GPUCluster",
        "metadata": {"name": GPUCLUSTER_NAME,
                     "labels": {**CHART_CR_LABELS, "helm.sh/chart": f"gpu-operator-{c.operator}"},
                     "annotations": {"helm.sh/resource-policy": "keep"}},
        "spec": {
            "draDriver": {"repository": "nvcr.io/nvidia", "image": "dra-driver-nvidia-gpu", "version": c.dra_driver,
                          "imagePullPolicy": "IfNotPresent",
                          "computeDomains": {"enabled": compute_domains}},
            "dcgm": {"enabled": False},
            "dcgmExporter": {"enabled": False},
            "hostPaths": {"driverInstallDir": "/run/nvidia/driver"},
            "daemonsets": {"priorityClassName": "system-node-critical", "tolerations": [_TOLERATION],
                           "updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
        },
    }


def gpucluster_status(namespace: str, ready: bool, now: str) -> Obj:
    """status of the GPUCluster as the controller leaves it after a reconcile."""
    if ready:
        conds = [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": READY_MESSAGE},
                 {"type": "Error", "status": "False", "reason": "Ready", "message": ""}]
    else:
        conds = [{"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": NOT_READY_MESSAGE},
                 {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": NOT_READY_MESSAGE}]
    for c in conds:
        c["lastTransitionTime"] = now
    return {"state": "ready" if ready else "notReady", "namespace": namespace, "conditions": conds}


# ---- what the kubelet plugin publishes -----------------------------------------------------------
def _semver(version: str) -> str:
    """Masterminds semver's String() of a loose version: missing parts 0, leading zeros dropped."""
    parts = [str(int(p)) for p in version.split(".")[:3]]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def gpu_device(index: int, uuid: str, name: str, hw: GpuHardware, driver_version: str, cuda_version: str) -> Obj:
    """One full GPU as the plugin announces it (GpuInfo.GetDevice); uuid and name: what NVML reports for it."""
    def s(v: str) -> Obj:
        return {"string": v}

    def ver(v: str) -> Obj:
        return {"version": _semver(v)}

    return {"name": f"gpu-{index}", "attributes": {
        "type": s("gpu"), "uuid": s(uuid), "productName": s(name),
        "brand": s(_BRAND.get(hw.family, "Nvidia")), "architecture": s(_ARCHITECTURE.get(hw.family, hw.family)),
        "cudaComputeCapability": ver(f"{hw.compute_major}.{hw.compute_minor}"),
        "driverVersion": ver(driver_version), "cudaDriverVersion": ver(cuda_version),
        "resource.kubernetes.io/pciBusID": s(f"0000:{0x18 + 0x10 * index:02x}:00.0")},
        "capacity": {"memory": {"value": f"{hw.memory_mib}Mi"}}}


def resource_slice(node: str, node_uid: str, devices: list[Obj], generation: int = 1) -> Obj:
    """The node's one ResourceSlice: pool = node name, a device per GPU (MIG-enabled GPUs are not modelled)."""
    return {
        "apiVersion": RESOURCE_API, "kind": "ResourceSlice",
        "metadata": {"generateName": f"{node}-{DRIVER_NAME}-",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                          "controller": True}]},
        "spec": {"driver": DRIVER_NAME, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                 "devices": devices},
    }
