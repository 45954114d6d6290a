"""Node Feature Discovery as the GPU Operator's chart installs it: the sub-chart's objects (master, gc, worker) with
their names and labels, and the labels NFD's worker publishes on a node.

Names and labels: NVIDIA/gpu-operator deployments/gpu-operator/charts/node-feature-discovery at each release tag
(templates/_helpers.tpl `fullname` = <release>-node-feature-discovery, `labels` = helm.sh/chart
node-feature-discovery-<chart version>, the selector labels, app.kubernetes.io/version <appVersion> and managed-by;
master.yaml, nfd-gc.yaml and worker.yaml add `role`); the operator's values.yaml sets the priority class, the shared
ServiceAccount `node-feature-discovery`, the worker's tolerations and the master's extraLabelNs (in its config file,
not its args). Node labels: NFD's kernel and system sources,
and the pci source with the operator's deviceClassWhitelist (facts §1e, §2). The objects keep what a check can
observe; probes, RBAC and config maps are left out.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance.gpu_operator.operand_specs import GPU_TOLERATION, PRIORITY_CLASS, env_field

Obj = dict[str, Any]

RELEASE = "gpu-operator"  # the Helm release name the install docs use; NFD's object names derive from it
NAME = "node-feature-discovery"
PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"  # NVIDIA's PCI vendor id, what the operator selects on
# The control-plane toleration the chart's values give NFD's worker (beside the GPU taint's).
CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                            "effect": "NoSchedule"}


def object_name(role: str) -> str:
    """The name of the sub-chart's master / gc Deployment or worker DaemonSet."""
    return f"{RELEASE}-{NAME}-{role}"


def selector_labels(role: str) -> dict[str, str]:
    """The labels the role's pods carry and its selector matches."""
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": RELEASE, "role": role}


def object_labels(nfd_version: str, role: str) -> dict[str, str]:
    """The labels of the role's Deployment / DaemonSet; nfd_version: the sub-chart's version (= its appVersion)."""
    return {**selector_labels(role), "helm.sh/chart": f"{NAME}-{nfd_version.lstrip('v')}",
            "app.kubernetes.io/version": nfd_version if nfd_version.startswith("v") else "v" + nfd_version,
            "app.kubernetes.io/managed-by": "Helm"}


def chart_args(nfd_version: str, role: str) -> list[str]:
    """The role's args as the sub-chart renders them with the operator's values (master.yaml, worker.yaml, nfd-gc.yaml
    at NFD v0.17.3, v0.18.x, v0.19.0: featureGates NodeFeatureGroupAPI=false until v0.19, metrics and gRPC health
    ports until v0.18, one -port after; leader election always until v0.19, then only with several replicas; the
    worker's -owner-refs from v0.19; gc.interval 1h). Sub-charts before v0.17 are not modelled: no args."""
    if role == "gc":
        return ["-gc-interval=1h"]
    minor = tuple(int(p) for p in nfd_version.lstrip("v").split(".")[:2])
    if minor < (0, 17):
        return []
    gates = [] if minor >= (0, 19) else ["-feature-gates=NodeFeatureGroupAPI=false"]
    ports = ["-metrics=8081", "-grpc-health=8082"] if minor < (0, 18) else ["-port=8080"]
    if role == "master":
        return (["-enable-leader-election"] if minor < (0, 19) else []) + gates + ports
    return gates + (["-owner-refs=pod,ds"] if minor >= (0, 19) else []) + ports


def chart_objects(nfd_version: str, image: str, namespace: str) -> list[Obj]:
    """Master and gc Deployments and the worker DaemonSet (on every node), in the order Helm lists them."""
    out: list[Obj] = []
    for role, kind in (("master", "Deployment"), ("worker", "DaemonSet"), ("gc", "Deployment")):
        selector = selector_labels(role)
        container: Obj = {"name": role, "image": image, "imagePullPolicy": "IfNotPresent",
                          "command": [f"nfd-{role}"]}
        if args := chart_args(nfd_version, role):
            container["args"] = args
        if role == "worker":
            container["env"] = [env_field("NODE_NAME", "spec.nodeName"),
                                env_field("POD_NAME", "metadata.name"), env_field("POD_UID", "metadata.uid")]
        else:
            container["env"] = [env_field("NODE_NAME", "spec.nodeName")]
        pod_spec: Obj = {"serviceAccountName": NAME, "priorityClassName": PRIORITY_CLASS, "containers": [container]}
        if role == "worker":
            pod_spec["tolerations"] = [dict(CONTROL_PLANE_TOLERATION), GPU_TOLERATION]
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        spec: Obj = {"selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": dict(selector)}, "spec": pod_spec}}
        if kind == "Deployment":
            spec["replicas"] = 1
        out.append({"apiVersion": "apps/v1", "kind": kind,
                    "metadata": {"name": object_name(role), "namespace": namespace,
                                 "labels": object_labels(nfd_version, role)},
                    "spec": spec})
    return out


def node_labels(kernel_version: str, os_id: str, os_version_id: str, gpu: bool) -> dict[str, str]:
    """What NFD's worker publishes: kernel and OS on every node, the NVIDIA PCI vendor on GPU nodes."""
    kernel = kernel_version.split("-")[0].split(".")
    major, minor = os_version_id.split(".")[:2] if "." in os_version_id else (os_version_id, "0")
    labels = {
        "feature.node.kubernetes.io/kernel-version.full": kernel_version,
        "feature.node.kubernetes.io/kernel-version.major": kernel[0],
        "feature.node.kubernetes.io/kernel-version.minor": kernel[1] if len(kernel) > 1 else "0",
        "feature.node.kubernetes.io/kernel-version.revision": kernel[2] if len(kernel) > 2 else "0",
        "feature.node.kubernetes.io/system-os_release.ID": os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": os_version_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": major,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": minor,
        "feature.node.kubernetes.io/cpu-cpuid.AVX2": "true",
    }
    if gpu:
        labels[PCI_LABEL] = "true"
    return labels
