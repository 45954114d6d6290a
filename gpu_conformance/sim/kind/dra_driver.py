"""The kind tier's DRA driver: our fake DRA kubelet plugin (fixtures/fake-dra) installed as NVIDIA's DRA driver
chart installs its own (dra_chart.py), so a ResourceClaim gets a fake GPU into a real container through CDI.

What is real here: the kubelet (v1.36.3) registers the plugin over its plugin-registration socket and calls its
NodePrepareResources through the kubeletplugin helper of k8s.io/dynamic-resource-allocation v0.36.3 (the same
release); kube-scheduler allocates the claim from the ResourceSlice the plugin publishes; containerd resolves the
CDI name the plugin answers with against the spec it wrote into /var/run/cdi. What is fake: the GPUs (the node's
fake driver, read from its GPU table as NVIDIA's plugin reads NVML) and the image (the probe's busybox running the
plugin binary mounted into each node, as the fake device plugin is).

The objects are the chart's names (NVIDIA/k8s-dra-driver-gpu v25.8.1, deployments/helm/nvidia-dra-driver-gpu):
release namespace nvidia-dra-driver-gpu, DaemonSet nvidia-dra-driver-gpu-kubelet-plugin with the chart's pod labels
and container `gpus`, the kubelet's plugin directories as hostPaths, DeviceClasses gpu.nvidia.com and
mig.nvidia.com. RBAC is the driver's needs only (ResourceSlices written, ResourceClaims and Nodes read).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gpu_conformance import dra_chart
from gpu_conformance.go_build import MIN_GO, build_lock, cache_root, go_executable, repo_root, run_build
from gpu_conformance.settings import DEFAULT_PROBE_IMAGE
from gpu_conformance.sim.operator import dra as simdra

Obj = dict[str, Any]

MODULE = repo_root() / "fixtures" / "fake-dra"
BINARY = "fake-dra-kubelet-plugin"
# Where each kind node holds the plugin (a read-only extraMount) and the pod runs it from (a hostPath).
NODE_PATH = f"/usr/local/bin/{BINARY}"
NAMESPACE = dra_chart.DEFAULT_NAMESPACE
SERVICE_ACCOUNT = f"{dra_chart.CHART_NAME}-service-account-kubeletplugin"
_HINT = "install Go 1.26 or later (the kind tier's DRA driver is built from fixtures/fake-dra)"


def version() -> str:
    """A digest of the plugin's sources and of the fake-GPU package it uses: a changed source is a new build."""
    digest = hashlib.sha256()
    for root in (MODULE, repo_root() / "fixtures" / "fake-gpu"):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".go", ".mod", ".sum", "")):
            digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def ensure_plugin() -> Path:
    """The plugin binary, built once per source version into the tier's cache (outside the repo)."""
    out_dir = cache_root() / "bin" / f"fake-dra-{version()}"
    binary = out_dir / BINARY
    if binary.is_file():
        return binary
    go = go_executable(MIN_GO, "the kind tier's DRA driver is not built", _HINT)
    with build_lock(out_dir):
        if not binary.is_file():
            tmp = out_dir / f".{BINARY}.tmp"
            run_build(go, MODULE, "-s -w", tmp, [f"./cmd/{BINARY}"], out_dir / "build.log", _HINT)
            tmp.rename(binary)
    return binary


def daemonset(driver_root: str, cdi_dir: str, gpu_label: str) -> Obj:
    """The chart's kubelet-plugin DaemonSet, running the fake plugin on the nodes that have fake GPUs."""
    labels = dict(dra_chart.KUBELET_PLUGIN_LABELS)
    host = {"registry": "/var/lib/kubelet/plugins_registry", "plugins": "/var/lib/kubelet/plugins",
            "cdi": cdi_dir, "driver-root": driver_root}
    container = {
        "name": dra_chart.GPUS_CONTAINER, "image": DEFAULT_PROBE_IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": [NODE_PATH, f"--table={driver_root}/gpus", f"--host-driver-root={driver_root}",
                    f"--cdi-root={cdi_dir}"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        # Like the chart's: the plugin writes the kubelet's sockets and the CDI spec on the host.
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "plugin-binary", "mountPath": NODE_PATH, "readOnly": True},
                         *({"name": name, "mountPath": path} for name, path in host.items())],
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": dra_chart.KUBELET_PLUGIN_DAEMONSET, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": SERVICE_ACCOUNT, "priorityClassName": "system-node-critical",
                "nodeSelector": {gpu_label: "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [container],
                "volumes": [{"name": "plugin-binary", "hostPath": {"path": NODE_PATH, "type": "File"}},
                            *({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}
                              for name, path in host.items())]}}}}


def objects(driver_root: str, cdi_dir: str, gpu_label: str) -> list[Obj]:
    """Namespace, ServiceAccount, RBAC, the DeviceClasses and the kubelet plugin's DaemonSet."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}}
    role_name = f"{dra_chart.CHART_NAME}-kubeletplugin-role"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role_name},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                      {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                       "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": role_name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
               "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]}
    return [ns, sa, role, binding, *simdra.chart_device_classes(), daemonset(driver_root, cdi_dir, gpu_label)]


def slice_devices(slices: list[Obj], node: str) -> int:
    """How many devices of driver gpu.nvidia.com the ResourceSlices publish for `node`."""
    return sum(len((s.get("spec") or {}).get("devices") or []) for s in slices
               if (s.get("spec") or {}).get("driver") == simdra.DRIVER_NAME
               and (s.get("spec") or {}).get("nodeName") == node)
