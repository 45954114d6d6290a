"""What a GPU Operator install consists of, as plain Kubernetes objects (dicts). No API calls.

Given a Profile, the operator namespace and the node names, `build()` returns every object a real
install has: what Helm creates (CRDs, ClusterPolicy, operator Deployment, NFD), what the operator then
creates from the ClusterPolicy (RuntimeClasses, ServiceAccounts, ConfigMaps, operand DaemonSets,
Services), the labels NFD / the operator / GFD put on each node, and the extended resources the
device plugin advertises. The kwok reconciler and a later kind tier both apply these; neither
duplicates them.

Names, labels, selectors, init-container order, env and images follow
shared/docs/gpu-operator-facts.md (§1c DaemonSets, §2 labels, §3 validator, §5 GFD, §6 device plugin,
CDI and RuntimeClasses). The manifests are our own, smaller than the operator's assets: they keep
what a conformance check can observe and drop the rest (RBAC, most volumes, probes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import yaml

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.gpu_operator import clusterpolicy as policy
from gpu_conformance.gpu_operator import gpu_node, nfd
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.cuda_validator import cuda_validator_pod as validator_cuda_pod
from gpu_conformance.gpu_operator.hardware import GpuHardware
from gpu_conformance.gpu_operator.operand_daemonsets import RenderInput
from gpu_conformance.gpu_operator.operand_daemonsets import operand_daemonsets as rendered_operand_daemonsets
from gpu_conformance.gpu_operator.operand_specs import VALIDATIONS_DIR
from gpu_conformance.gpu_operator.operator_deployment import chart_labels as operator_chart_labels
from gpu_conformance.gpu_operator.operator_deployment import operator_deployment as gpu_operator_deployment
from gpu_conformance.gpu_operator.releases import Images
from gpu_conformance.gpu_operator.releases import images as release_images
from gpu_conformance.sim.operator import dra
from gpu_conformance.sim.profiles.catalogue import Profile

Obj = dict[str, Any]

CLUSTERPOLICY_NAME = policy.NAME
CLUSTERPOLICY_API_VERSION = policy.API_VERSION
RELEASE = nfd.RELEASE  # Helm release name; NFD object names derive from it
NFD_PCI_LABEL = nfd.PCI_LABEL
nfd_name = nfd.object_name
validator_init_containers = specs.validator_init_containers


# ---- small builders ----------------------------------------------------------------------
def _owned(meta: Obj, clusterpolicy_uid: str | None) -> Obj:
    return policy.owned(meta, clusterpolicy_uid)


def render_input(profile: Profile) -> RenderInput:
    """What the operator renders the profile's operands from (its release, ClusterPolicy spec and node OS)."""
    return RenderInput(profile.components, clusterpolicy_spec(profile), f"{profile.os_id}{profile.os_version_id}")


# ---- images ------------------------------------------------------------------------------
def images(profile: Profile) -> Images:
    # The operator appends the node OS to the driver tag (e.g. 580.126.20-ubuntu22.04).
    return release_images(profile.components, f"{profile.os_id}{profile.os_version_id}")


# ---- CRDs and ClusterPolicy --------------------------------------------------------------
# Fields of the ClusterPolicy spec that releases after v25.3.4 added to the CRD (the only CRD the Go module
# proxy serves is v25.3.4's). Profiles of those releases write them, so their CRD gets them; every other
# field is validated by the real v25.3.4 schema. Facts: gpu-operator-facts.md §4a (CRD defaults per release).
_LATER_CRD_FIELDS: tuple[tuple[str, tuple[str, ...], Obj], ...] = (
    (versions.SANDBOX_WORKLOADS_MODE, ("sandboxWorkloads", "mode"),
     {"type": "string", "default": "kubevirt", "enum": ["kubevirt", "kata"],
      "description": "Mode indicates the sandbox mode (kubevirt or kata)"}),
    (versions.CDI_NRI_PLUGIN, ("cdi", "nriPluginEnabled"),
     {"type": "boolean", "default": False,
      "description": "NRIPluginEnabled indicates whether the toolkit runs an NRI plugin to inject CDI devices"}),
)


# libyaml's loader where PyYAML has it: the CRDs are ~1 MB of YAML, parsed twice per install (~9% of the
# installer's own CPU with the pure-Python loader at 150 GPU nodes).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _real_crds() -> tuple[str, ...]:
    from gpu_conformance.sim.builds.operator_module import crd_files

    return tuple(p.read_text() for p in crd_files())


def crds(profile: Profile | None = None) -> list[Obj]:
    """The CRDs the operator's chart ships (ClusterPolicy, NVIDIADriver), read from its Go module.

    For a profile newer than v25.3.4 the ClusterPolicy schema also gets the spec fields that release added;
    without a profile (objects of any release, e.g. real clusters' cases), all of them.
    """
    out = [yaml.load(text, Loader=_SAFE_LOADER) for text in _real_crds()]
    version = profile.version if profile is not None else (99, 0, 0)
    for crd in out:
        if crd["metadata"]["name"] != op.CLUSTERPOLICY_CRD:
            continue
        for rule, path, schema in _LATER_CRD_FIELDS:
            if not versions.since(rule, version):
                continue
            for v in crd["spec"]["versions"]:
                props = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                props[path[0]]["properties"][path[1]] = dict(schema)
    return out


def clusterpolicy_spec(profile: Profile) -> Obj:
    """The spec Helm renders from the profile's values (only the switches and images that matter)."""
    on = {section for section, enabled in (
        ("driver", profile.driver_enabled), ("toolkit", profile.toolkit_enabled),
        ("devicePlugin", profile.device_plugin_enabled), ("gfd", profile.gfd_enabled), ("dcgm", profile.dcgm_enabled),
        ("dcgmExporter", profile.dcgm_exporter_enabled), ("migManager", profile.mig_manager_enabled),
        ("nodeStatusExporter", profile.node_status_exporter_enabled), ("gds", profile.gds_enabled),
        ("gdrcopy", profile.gdrcopy_enabled)) if enabled}
    sharing = profile.time_slicing_config_name if profile.time_slicing_replicas else None
    return policy.clusterpolicy_spec(profile.components, policy.PolicySwitches(
        cdi=profile.cdi, nri=profile.nri, mig_strategy=profile.mig_strategy, on=frozenset(on), sharing_config=sharing))


def clusterpolicy(profile: Profile) -> Obj:
    return {
        "apiVersion": CLUSTERPOLICY_API_VERSION, "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTERPOLICY_NAME, "labels": policy.chart_labels(profile.components.operator)},
        "spec": clusterpolicy_spec(profile),
    }


# ---- Helm-created workloads --------------------------------------------------------------
def _helm_labels(profile: Profile) -> dict[str, str]:
    return operator_chart_labels(profile.components.operator)


def operator_deployment(profile: Profile, namespace: str) -> Obj:
    return gpu_operator_deployment(profile.components.operator, profile.version, images(profile), namespace)


def nfd_objects(profile: Profile, namespace: str) -> list[Obj]:
    """NFD sub-chart: master and gc Deployments, worker DaemonSet on every node (facts §1e)."""
    return nfd.chart_objects(profile.components.nfd, images(profile).nfd, namespace)


# ---- operand DaemonSets ------------------------------------------------------------------
def device_plugin_env(profile: Profile) -> list[Obj]:
    return specs.device_plugin_env(profile.version, profile.mig_strategy, profile.cdi,
                                   bool(profile.time_slicing_replicas))


def toolkit_env(profile: Profile) -> list[Obj]:
    return specs.toolkit_env(profile.version, profile.cdi, profile.nri)


def operand_daemonsets(profile: Profile, namespace: str, clusterpolicy_uid: str | None = None) -> list[Obj]:
    """Every DaemonSet the operator creates for the profile's ClusterPolicy, in reconcile order."""
    return rendered_operand_daemonsets(render_input(profile), namespace, clusterpolicy_uid)


# ---- other operator-created objects ------------------------------------------------------
def runtime_classes(profile: Profile, clusterpolicy_uid: str | None = None) -> list[Obj]:
    """RuntimeClasses (facts §6e): `nvidia`; + `nvidia-cdi`, `nvidia-legacy` with CDI; none with NRI."""
    return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": _owned({"name": n, "labels": {"app.kubernetes.io/component": "gpu-operator"}},
                                clusterpolicy_uid),
             "handler": n} for n in specs.runtime_class_names(profile.cdi, profile.nri)]


def service_accounts(profile: Profile, namespace: str, daemonsets: list[Obj],
                     clusterpolicy_uid: str | None = None) -> list[Obj]:
    """Operand ServiceAccounts (pods are rejected at admission if theirs is missing)."""
    names = sorted({d["spec"]["template"]["spec"]["serviceAccountName"] for d in daemonsets})
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": _owned({"name": n, "namespace": namespace}, clusterpolicy_uid)} for n in names]


def operand_configmaps(profile: Profile, namespace: str, clusterpolicy_uid: str | None = None) -> list[Obj]:
    """ConfigMaps the operator renders (entrypoint scripts, MIG configs). Contents are our own stubs."""
    spec = clusterpolicy_spec(profile)
    data: dict[str, dict[str, str]] = {}
    if op.operand_enabled(op.TOOLKIT, spec):
        data["nvidia-container-toolkit-entrypoint"] = {
            "entrypoint.sh": f"#!/bin/bash\n# wait for {VALIDATIONS_DIR}/driver-ready, then exec nvidia-toolkit\n"}
    if op.operand_enabled(op.DEVICE_PLUGIN, spec):
        data["nvidia-device-plugin-entrypoint"] = {
            "entrypoint.sh": f"#!/bin/sh\n# wait for {VALIDATIONS_DIR}/driver-ready, then exec nvidia-device-plugin\n"}
    if op.operand_enabled(op.DRIVER, spec) and versions.since(versions.DRIVER_STARTUP_PROBE_CONFIGMAP, profile.version):
        data["nvidia-driver-startup-probe"] = {
            "startup-probe.sh": "#!/bin/sh\n# /sys/module/nvidia/refcnt + nvidia-smi, then .driver-ctr-ready\n"}
    if op.operand_enabled(op.MIG_MANAGER, spec):
        data["nvidia-mig-manager-entrypoint"] = {
            "entrypoint.sh": f"#!/bin/sh\n# wait for {VALIDATIONS_DIR}/toolkit-ready, then exec nvidia-mig-manager\n"}
        data["default-mig-parted-config"] = {"config.yaml": _MIG_PARTED_CONFIG}
        data["default-gpu-clients"] = {"clients.yaml": "version: v1\nsystemd-services:\n  - nvsm.service\n"}
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": _owned({"name": n, "namespace": namespace}, clusterpolicy_uid), "data": d}
            for n, d in data.items()]


_MIG_PARTED_CONFIG = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  all-balanced:
    - device-filter: ["0x20B010DE", "0x20B110DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 2
        "2g.10gb": 1
        "3g.20gb": 1
"""


def time_slicing_configmap(profile: Profile, namespace: str) -> Obj | None:
    """The admin's device-plugin config (not owned by the operator) for time-slicing profiles."""
    if not profile.time_slicing_replicas:
        return None
    body = ("version: v1\nflags:\n  migStrategy: " + profile.mig_strategy + "\nsharing:\n  timeSlicing:\n"
            "    resources:\n    - name: nvidia.com/gpu\n      replicas: " + str(profile.time_slicing_replicas) + "\n")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": profile.time_slicing_config_name, "namespace": namespace}, "data": {"any": body}}


def services(profile: Profile, namespace: str, clusterpolicy_uid: str | None = None) -> list[Obj]:
    out = [{"apiVersion": "v1", "kind": "Service",
            "metadata": _owned({"name": "gpu-operator", "namespace": namespace, "labels": {"app": "gpu-operator"}},
                               clusterpolicy_uid),
            "spec": {"type": "ClusterIP", "selector": {"app": "gpu-operator"},
                     "ports": [{"name": "gpu-operator-metrics", "port": 8080, "targetPort": 8080,
                                "protocol": "TCP"}]}}]
    if profile.dcgm_exporter_enabled:
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": _owned({"name": "nvidia-dcgm-exporter", "namespace": namespace,
                                        "labels": {"app": "nvidia-dcgm-exporter"},
                                        "annotations": {"prometheus.io/scrape": "true"}}, clusterpolicy_uid),
                    "spec": {"type": "ClusterIP", "internalTrafficPolicy": "Cluster",
                             "selector": {"app": "nvidia-dcgm-exporter"},
                             "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400,
                                        "protocol": "TCP"}]}})
    if profile.dcgm_enabled:
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": _owned({"name": "nvidia-dcgm", "namespace": namespace,
                                        "labels": {"app": "nvidia-dcgm"}}, clusterpolicy_uid),
                    "spec": {"type": "ClusterIP", "internalTrafficPolicy": "Local",
                             "selector": {"app": "nvidia-dcgm"},
                             "ports": [{"name": "dcgm", "port": 5555, "targetPort": 5555, "protocol": "TCP"}]}})
    if profile.node_status_exporter_enabled:
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": _owned({"name": "nvidia-node-status-exporter", "namespace": namespace,
                                        "labels": {"app": "nvidia-node-status-exporter"}}, clusterpolicy_uid),
                    "spec": {"type": "ClusterIP", "selector": {"app": "nvidia-node-status-exporter"},
                             "ports": [{"name": "node-status", "port": 8000, "targetPort": 8000,
                                        "protocol": "TCP"}]}})
    return out


def cuda_validator_pod(profile: Profile, namespace: str, node: str, clusterpolicy_uid: str | None = None,
                       name: str | None = None) -> Obj:
    """The pod the validator's cuda-validation creates on each node (facts §3c).

    The validator uses generateName; `name` fixes the same-shaped name instead (so a log can cite it).
    """
    return validator_cuda_pod(images(profile).validator, namespace, node, None if profile.nri else "nvidia",
                              policy.owner_reference(clusterpolicy_uid) if clusterpolicy_uid else None, name)


# ---- node labels and resources -----------------------------------------------------------
def nfd_labels(profile: Profile, gpu: bool) -> dict[str, str]:
    """What NFD's worker publishes: kernel and OS on every node, the NVIDIA PCI vendor on GPU nodes."""
    return nfd.node_labels(profile.kernel_version, profile.os_id, profile.os_version_id, gpu)


def operator_node_labels(profile: Profile, hw: GpuHardware) -> dict[str, str]:
    """Labels the operator puts on a GPU node: gpu.present, deploy labels, MIG config request."""
    if not profile.has_clusterpolicy:
        # The GPUCluster stack's own deploy labels (controllers/state_manager.go gpuClusterStateLabels).
        return {"nvidia.com/gpu.present": "true", **dict.fromkeys(op.GPUCLUSTER_DEPLOY_LABELS, "true")}
    return gpu_node.operator_node_labels(profile.operator_version, hw, mig_manager=profile.mig_manager_enabled,
                                         driver_pre_installed=profile.driver_pre_installed,
                                         driver_pods=profile.driver_pods_expected)


def gfd_labels(profile: Profile, hw: GpuHardware, now: float | None = None) -> dict[str, str]:
    """The labels GPU Feature Discovery publishes for the node's GPUs (facts §5; DP internal/lm)."""
    return gpu_node.gfd_labels(hw, profile.driver_version, profile.version, profile.mig_strategy,
                               profile.time_slicing_replicas or 1, int(now if now is not None else time.time()))


def mig_manager_labels(profile: Profile, hw: GpuHardware) -> dict[str, str]:
    """mig-manager reports the applied config on the nodes it runs on."""
    return gpu_node.mig_manager_labels(profile.operator_version, hw, profile.mig_manager_enabled)


def device_plugin_resources(profile: Profile, hw: GpuHardware) -> dict[str, str]:
    """Extended resources the device plugin registers with kubelet for this node (facts §6a)."""
    return gpu_node.device_plugin_resources(hw, profile.mig_strategy, profile.time_slicing_replicas or 1)


# ---- the whole install -------------------------------------------------------------------
@dataclass
class NodePlan:
    """One node as the install leaves it."""

    name: str
    gpu: bool
    hardware: GpuHardware | None
    # Labels present when the operator has labelled the node (NFD + operator), before operands run.
    labels: dict[str, str]
    annotations: dict[str, str]
    # Labels operands add once their pod runs on the node, keyed by operand key (op.Operand.key).
    operand_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # Extended resources in capacity == allocatable once the device plugin registered.
    gpu_resources: dict[str, str] = field(default_factory=dict)

    @property
    def final_labels(self) -> dict[str, str]:
        out = dict(self.labels)
        for extra in self.operand_labels.values():
            out.update(extra)
        return out


@dataclass
class InstallManifests:
    profile: Profile
    namespace: str
    namespace_object: Obj
    crds: list[Obj]
    clusterpolicy: Obj | None  # None: the gpucluster model has no ClusterPolicy
    # Created by Helm or the admin, not owned by the ClusterPolicy.
    helm_objects: list[Obj]
    # Created by the operator, owned by the ClusterPolicy (ownerReferences need its uid).
    runtime_classes: list[Obj]
    service_accounts: list[Obj]
    configmaps: list[Obj]
    daemonsets: list[Obj]
    services: list[Obj]
    nodes: list[NodePlan]
    # The DRA models: the GPUCluster CR (gpucluster only) and the DeviceClasses the DRA driver's state creates.
    gpucluster: Obj | None = None
    device_classes: list[Obj] = field(default_factory=list)
    deployments: list[Obj] = field(default_factory=list)  # operator-created Deployments (DRA compute domains)
    # The dra-driver model: NVIDIA's DRA driver chart (namespace, ServiceAccount, kubelet-plugin DaemonSet).
    dra_chart_objects: list[Obj] = field(default_factory=list)

    @property
    def operand_objects(self) -> list[Obj]:
        """In the order the operator's states create them (pods need their SA and RuntimeClass first)."""
        return [*self.runtime_classes, *self.service_accounts, *self.configmaps, *self.device_classes,
                *self.daemonsets, *self.deployments, *self.services]

    def daemonset(self, name: str) -> Obj | None:
        return next((d for d in self.daemonsets if d["metadata"]["name"] == name), None)

    @property
    def gpu_nodes(self) -> list[NodePlan]:
        return [n for n in self.nodes if n.gpu]

    @property
    def cpu_nodes(self) -> list[NodePlan]:
        return [n for n in self.nodes if not n.gpu]


def node_plans(profile: Profile, gpu_nodes: list[str], cpu_nodes: list[str],
               now: float | None = None) -> list[NodePlan]:
    plans: list[NodePlan] = []
    for i, name in enumerate(gpu_nodes):
        hw = profile.hardware_for(i)
        annotations = {}
        if profile.driver_pods_expected:
            annotations["nvidia.com/gpu-driver-upgrade-enabled"] = "true"
        operand_labels = {}
        if profile.gfd_enabled:
            operand_labels[op.GFD.key] = gfd_labels(profile, hw, now)
        if mig := mig_manager_labels(profile, hw):
            operand_labels[op.MIG_MANAGER.key] = mig
        plans.append(NodePlan(
            name=name, gpu=True, hardware=hw,
            labels={**nfd_labels(profile, True), **operator_node_labels(profile, hw)},
            annotations=annotations, operand_labels=operand_labels,
            gpu_resources=device_plugin_resources(profile, hw) if profile.device_plugin_enabled else {}))
    for name in cpu_nodes:
        plans.append(NodePlan(name=name, gpu=False, hardware=None, labels=nfd_labels(profile, False),
                              annotations={}))
    return plans


def build(profile: Profile, namespace: str = "gpu-operator", gpu_nodes: list[str] | None = None,
          cpu_nodes: list[str] | None = None, clusterpolicy_uid: str | None = None,
          now: float | None = None, gpucluster_uid: str | None = None) -> InstallManifests:
    """Everything a GPU Operator install of this profile consists of, on the given nodes.

    The gpucluster model has no ClusterPolicy: its operands are owned by the GPUCluster (gpucluster_uid).
    """
    gpu_nodes = list(gpu_nodes or [])
    cpu_nodes = list(cpu_nodes or [])
    helm: list[Obj] = [{"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": n, "namespace": namespace, "labels": _helm_labels(profile)}}
                       for n in ("gpu-operator", "node-feature-discovery")]
    helm += [operator_deployment(profile, namespace), *(nfd_objects(profile, namespace) if profile.nfd_enabled else [])]
    if cm := time_slicing_configmap(profile, namespace):
        helm.append(cm)
    cp = profile.has_clusterpolicy
    daemonsets = operand_daemonsets(profile, namespace, clusterpolicy_uid) if cp else []
    service_accts = service_accounts(profile, namespace, daemonsets, clusterpolicy_uid) if cp else []
    device_classes: list[Obj] = []
    deployments: list[Obj] = []  # operator-created (not Helm's): the DRA driver's compute-domain controller
    chart: list[Obj] = []
    if profile.resource_model == "dra-driver":
        # NVIDIA's DRA driver chart beside the ClusterPolicy, in its own namespace, owned by nobody (dra.py).
        chart = dra.chart_objects(profile)
        device_classes = dra.chart_device_classes()
    elif profile.dra:
        owner = dra.owner_reference("GPUCluster", dra.GPUCLUSTER_NAME, gpucluster_uid) if gpucluster_uid else None
        daemonsets.append(dra.kubelet_plugin_daemonset(profile, namespace, owner))
        service_accts += dra.service_accounts(profile, namespace, owner)
        device_classes = dra.device_classes(profile)
        if profile.compute_domains:
            deployments.append(dra.controller_deployment(profile, namespace, owner))
    return InstallManifests(
        profile=profile,
        namespace=namespace,
        namespace_object={"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": namespace, "labels": {"kubernetes.io/metadata.name": namespace}}},
        crds=crds(profile) + ([dra.gpucluster_crd()] if profile.dra else []),
        clusterpolicy=clusterpolicy(profile) if cp else None,
        helm_objects=helm,
        runtime_classes=runtime_classes(profile, clusterpolicy_uid) if cp else [],
        service_accounts=service_accts,
        configmaps=operand_configmaps(profile, namespace, clusterpolicy_uid) if cp else [],
        daemonsets=daemonsets,
        services=services(profile, namespace, clusterpolicy_uid) if cp else [],
        nodes=node_plans(profile, gpu_nodes, cpu_nodes, now),
        gpucluster=None if cp else dra.gpucluster(profile),
        device_classes=device_classes,
        deployments=deployments,
        dra_chart_objects=chart,
    )


def expected_daemonset_nodes(manifests: InstallManifests) -> dict[str, list[str]]:
    """Per operand DaemonSet, the nodes whose final labels match its nodeSelector (where pods run)."""
    out: dict[str, list[str]] = {}
    for ds in manifests.daemonsets:
        sel = ds["spec"]["template"]["spec"].get("nodeSelector", {})
        out[ds["metadata"]["name"]] = [n.name for n in manifests.nodes
                                       if all(n.final_labels.get(k) == v for k, v in sel.items())]
    return out
