"""The ClusterPolicy of an install: the spec Helm renders from a release's defaults and the admin's switches, and
the status the controller writes once every state is ready.

Facts from NVIDIA/gpu-operator at each release tag (deployments/gpu-operator/values.yaml and
templates/clusterpolicy.yaml, api/v1/clusterpolicy_types.go, controllers/clusterpolicy_controller.go) as
../shared/docs/gpu-operator-facts.md §4 records them; only the switches and images a check can observe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_conformance import versions
from gpu_conformance.gpu_operator.operand_specs import (
    GPU_TOLERATION,
    PRIORITY_CLASS,
    daemonset_labels,
    env,
    plugin_validation_workload,
)
from gpu_conformance.gpu_operator.releases import ComponentVersions
from gpu_conformance.versions import Version

Obj = dict[str, Any]

NAME = "cluster-policy"  # the chart's ClusterPolicy (templates/clusterpolicy.yaml)
API_VERSION = "nvidia.com/v1"
READY_MESSAGE = "ClusterPolicy is ready as all resources have been successfully reconciled"
# The labels the chart's templates give every custom resource they render (ClusterPolicy, GPUCluster); each
# template adds its own after these.
CHART_CR_LABELS = {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}


def chart_labels(chart_version: str) -> dict[str, str]:
    """The ClusterPolicy's labels: templates/clusterpolicy.yaml gives it gpu-operator.labels and its component."""
    return {**CHART_CR_LABELS, "app.kubernetes.io/instance": "gpu-operator", "app.kubernetes.io/name": "gpu-operator",
            "app.kubernetes.io/version": chart_version, "helm.sh/chart": f"gpu-operator-{chart_version}"}


# The spec sections the chart switches on by default (dcgm: Helm default false, the Go default would be true).
CHART_DEFAULT_ON = frozenset({"driver", "toolkit", "devicePlugin", "gfd", "dcgmExporter", "migManager"})


@dataclass(frozen=True)
class PolicySwitches:
    """The admin's ClusterPolicy switches (Helm values); `on` names the spec sections whose `enabled` is true
    (driver, toolkit, devicePlugin, gfd, dcgm, dcgmExporter, migManager, nodeStatusExporter, gds, gdrcopy)."""

    cdi: bool
    nri: bool = False
    mig_strategy: str = "single"
    on: frozenset[str] = CHART_DEFAULT_ON
    driver_crd: bool = False  # driver.useNvidiaDriverCRD: NVIDIADriver CRs manage the driver
    sharing_config: str | None = None  # devicePlugin.config.name (time-slicing), None: no config


def clusterpolicy_spec(c: ComponentVersions, sw: PolicySwitches) -> Obj:
    """The spec Helm renders from release `c`'s defaults and the switches."""
    spec: Obj = {
        "operator": {"defaultRuntime": "containerd", "runtimeClass": "nvidia",
                     "initContainer": {"repository": "nvcr.io/nvidia", "image": "cuda",
                                       "version": "13.0.1-base-ubi9"}},
        "daemonsets": {
            "labels": daemonset_labels(c.operator),
            "priorityClassName": PRIORITY_CLASS,
            "tolerations": [GPU_TOLERATION],
            "updateStrategy": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "1"},
        },
        "validator": {"repository": c.validator_repository, "image": c.validator_image, "version": c.operator,
                      "plugin": {"env": [env("WITH_WORKLOAD", plugin_validation_workload(c.version))]}},
        "mig": {"strategy": sw.mig_strategy},
        "psa": {"enabled": False},
        "cdi": {"enabled": sw.cdi},
        "driver": {
            "enabled": "driver" in sw.on, "useNvidiaDriverCRD": sw.driver_crd, "kernelModuleType": "auto",
            "repository": "nvcr.io/nvidia", "image": "driver", "version": c.driver,
            "manager": {"repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager",
                        "version": c.driver_manager},
            "rdma": {"enabled": False}, "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1},
        },
        "toolkit": {"enabled": "toolkit" in sw.on, "repository": "nvcr.io/nvidia/k8s",
                    "image": "container-toolkit", "version": c.toolkit, "installDir": "/usr/local/nvidia"},
        "devicePlugin": {"enabled": "devicePlugin" in sw.on, "repository": "nvcr.io/nvidia",
                         "image": "k8s-device-plugin", "version": c.device_plugin},
        "dcgm": {"enabled": "dcgm" in sw.on, "repository": "nvcr.io/nvidia/cloud-native", "image": "dcgm",
                 "version": c.dcgm},
        "dcgmExporter": {"enabled": "dcgmExporter" in sw.on, "repository": "nvcr.io/nvidia/k8s",
                         "image": "dcgm-exporter", "version": c.dcgm_exporter,
                         "serviceMonitor": {"enabled": False}},
        "gfd": {"enabled": "gfd" in sw.on, "repository": "nvcr.io/nvidia", "image": "k8s-device-plugin",
                "version": c.device_plugin},
        "migManager": {"enabled": "migManager" in sw.on, "repository": "nvcr.io/nvidia/cloud-native",
                       "image": "k8s-mig-manager", "version": c.mig_manager,
                       "config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
        "nodeStatusExporter": {"enabled": "nodeStatusExporter" in sw.on},
        "gds": {"enabled": "gds" in sw.on, "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs",
                "version": c.gds},
        "gdrcopy": {"enabled": "gdrcopy" in sw.on},
        "vgpuManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": True},
        "sandboxDevicePlugin": {"enabled": True},
        "vfioManager": {"enabled": True},
        "kataManager": {"enabled": False},
        "ccManager": {"enabled": False},
        "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
        "hostPaths": {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver"},
    }
    if versions.since(versions.SANDBOX_WORKLOADS_MODE, c.version):
        spec["sandboxWorkloads"]["mode"] = "kubevirt"
    if versions.since(versions.CDI_NRI_PLUGIN, c.version):
        spec["cdi"]["nriPluginEnabled"] = sw.nri
    if not versions.since(versions.CDI_DEFAULT_KEY_DROPPED, c.version):
        spec["cdi"]["default"] = False
    if sw.sharing_config:
        spec["devicePlugin"]["config"] = {"name": sw.sharing_config, "default": "any"}
    if not versions.since(versions.CDI_SPEC, c.version):
        del spec["cdi"]
    return spec


def clusterpolicy_conditions(ready: bool, reason: str, message: str) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of the Ready and Error conditions the controller sets (ready: Ready=True
    with `reason`; else Error=True with it)."""
    if ready:
        return [("Ready", "True", reason, message), ("Error", "False", "Ready", "")]
    return [("Ready", "False", "Error", ""), ("Error", "True", reason, message)]


def ready_status(namespace: str, version: Version, at: str) -> Obj:
    """The status of a ClusterPolicy whose states are all ready; before v23.9 it holds only state and namespace
    (ClusterPolicyStatus at v23.6.2)."""
    status: Obj = {"state": "ready", "namespace": namespace}
    if versions.since(versions.STATUS_CONDITIONS, version):
        status["conditions"] = [
            {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": at}
            for t, s, r, m in clusterpolicy_conditions(True, "Reconciled", READY_MESSAGE)]
    return status


def owner_reference(clusterpolicy_uid: str) -> Obj:
    """The operator sets ClusterPolicy as controller of everything it creates (GC cascades from it)."""
    return {"apiVersion": API_VERSION, "kind": "ClusterPolicy", "name": NAME,
            "uid": clusterpolicy_uid, "controller": True, "blockOwnerDeletion": True}


def owned(meta: Obj, clusterpolicy_uid: str | None) -> Obj:
    """`meta` with the ClusterPolicy as its owner, when the ClusterPolicy's uid is known."""
    if clusterpolicy_uid:
        meta["ownerReferences"] = [owner_reference(clusterpolicy_uid)]
    return meta
