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
from gpu_conformance.gpu_operator import gpu_node
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.hardware import GpuHardware
from gpu_conformance.gpu_operator.operand_specs import (
    GPU_TOLERATION,
    MPS_DAEMONSET,
    PRIORITY_CLASS,
    VALIDATIONS_DIR,
    env,
    validator_init_containers,
)
from gpu_conformance.gpu_operator.releases import Images
from gpu_conformance.gpu_operator.releases import images as release_images
from gpu_conformance.sim.operator import dra
from gpu_conformance.sim.profiles.catalogue import Profile

Obj = dict[str, Any]

CLUSTERPOLICY_NAME = "cluster-policy"
CLUSTERPOLICY_API_VERSION = "nvidia.com/v1"
RELEASE = "gpu-operator"  # Helm release name; NFD object names derive from it
NFD_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"



# ---- small builders ----------------------------------------------------------------------
def env_field(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def host_volume(name: str, path: str, mount: str, *, read_only: bool = False,
                propagation: str | None = None, host_type: str | None = None) -> tuple[Obj, Obj]:
    """A hostPath volume and its mount (the operands' evidence of what they touch on the host)."""
    vol: Obj = {"name": name, "hostPath": {"path": path}}
    if host_type:
        vol["hostPath"]["type"] = host_type
    m: Obj = {"name": name, "mountPath": mount}
    if read_only:
        m["readOnly"] = True
    if propagation:
        m["mountPropagation"] = propagation
    return vol, m


def owner_reference(clusterpolicy_uid: str) -> Obj:
    """The operator sets ClusterPolicy as controller of everything it creates (GC cascades from it)."""
    return {"apiVersion": CLUSTERPOLICY_API_VERSION, "kind": "ClusterPolicy", "name": CLUSTERPOLICY_NAME,
            "uid": clusterpolicy_uid, "controller": True, "blockOwnerDeletion": True}


def _owned(meta: Obj, clusterpolicy_uid: str | None) -> Obj:
    if clusterpolicy_uid:
        meta["ownerReferences"] = [owner_reference(clusterpolicy_uid)]
    return meta


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
    c = profile.components
    return {
        "apiVersion": CLUSTERPOLICY_API_VERSION, "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTERPOLICY_NAME, "labels": {
            **policy.CHART_CR_LABELS, "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/name": "gpu-operator",
            "app.kubernetes.io/version": c.operator, "helm.sh/chart": f"gpu-operator-{c.operator}"}},
        "spec": clusterpolicy_spec(profile),
    }


# ---- Helm-created workloads --------------------------------------------------------------
def _helm_labels(profile: Profile) -> dict[str, str]:
    v = profile.components.operator
    return {"app.kubernetes.io/name": "gpu-operator", "helm.sh/chart": f"gpu-operator-{v}",
            "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/version": v,
            "app.kubernetes.io/managed-by": "Helm"}


def operator_deployment(profile: Profile, namespace: str) -> Obj:
    img = images(profile)
    labels = {**_helm_labels(profile), "app.kubernetes.io/component": "gpu-operator",
              "nvidia.com/gpu-driver-upgrade-drain.skip": "true"}
    pod_labels = {**labels, "app": "gpu-operator"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": op.OPERATOR_DEPLOYMENT, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/component": "gpu-operator", "app": "gpu-operator"}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": "gpu-operator",
                    "priorityClassName": PRIORITY_CLASS,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [
                        {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "",
                         "effect": "NoSchedule"},
                        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                         "effect": "NoSchedule"}],
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [
                            {"key": "node-role.kubernetes.io/control-plane", "operator": "In",
                             "values": [""]}]}}]}},
                    "containers": [{
                        "name": "gpu-operator", "image": img.operator, "imagePullPolicy": "IfNotPresent",
                        "command": ["gpu-operator"], "args": ["--leader-elect"],
                        "env": [env("WATCH_NAMESPACE", ""), env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
                                env("VALIDATOR_IMAGE", img.validator),
                                env("DRIVER_MANAGER_IMAGE", img.driver_manager)],
                        "ports": [{"name": "metrics", "containerPort": 8080}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081},
                                          "initialDelaySeconds": 15, "periodSeconds": 20},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081},
                                           "initialDelaySeconds": 5, "periodSeconds": 10},
                    }],
                },
            },
        },
    }


def nfd_name(role: str) -> str:
    return f"{RELEASE}-node-feature-discovery-{role}"


def _nfd_labels(profile: Profile, role: str) -> tuple[dict[str, str], dict[str, str]]:
    c = profile.components
    version = c.nfd if c.nfd.startswith("v") else "v" + c.nfd
    chart_version = c.nfd.lstrip("v")
    selector = {"app.kubernetes.io/name": "node-feature-discovery", "app.kubernetes.io/instance": RELEASE,
                "role": role}
    labels = {**selector, "helm.sh/chart": f"node-feature-discovery-{chart_version}",
              "app.kubernetes.io/version": version, "app.kubernetes.io/managed-by": "Helm"}
    return labels, selector


def nfd_objects(profile: Profile, namespace: str) -> list[Obj]:
    """NFD sub-chart: master and gc Deployments, worker DaemonSet on every node (facts §1e)."""
    img = images(profile).nfd
    out: list[Obj] = []
    for role, kind in (("master", "Deployment"), ("worker", "DaemonSet"), ("gc", "Deployment")):
        labels, selector = _nfd_labels(profile, role)
        container: Obj = {"name": role, "image": img, "imagePullPolicy": "IfNotPresent",
                          "command": [f"nfd-{role}"]}
        if role == "worker":
            container["args"] = ["-server=" + nfd_name("master") + ":8080"]
            container["env"] = [env_field("NODE_NAME", "spec.nodeName"),
                                env_field("POD_NAME", "metadata.name"), env_field("POD_UID", "metadata.uid")]
        else:
            container["env"] = [env_field("NODE_NAME", "spec.nodeName")]
            if role == "master":
                container["args"] = ["-extra-label-ns=nvidia.com"]
        pod_spec: Obj = {"serviceAccountName": "node-feature-discovery", "priorityClassName": PRIORITY_CLASS,
                         "containers": [container]}
        if role == "worker":
            pod_spec["tolerations"] = [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                 "effect": "NoSchedule"}, GPU_TOLERATION]
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        spec: Obj = {"selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": dict(selector)}, "spec": pod_spec}}
        if kind == "Deployment":
            spec["replicas"] = 1
        out.append({"apiVersion": "apps/v1", "kind": kind,
                    "metadata": {"name": nfd_name(role), "namespace": namespace, "labels": labels},
                    "spec": spec})
    return out


# ---- operand DaemonSets ------------------------------------------------------------------
def _validation_env(component: str, profile: Profile, img: Images) -> list[Obj]:
    """Env of one validator init container (what nvidia-validator's COMPONENT mode reads)."""
    if component == "driver":
        return [env("WITH_WAIT", "true"), env("COMPONENT", "driver"),
                env_field("OPERATOR_NAMESPACE", "metadata.namespace")]
    if component in ("nvidia-fs", "gdrcopy"):
        return [env("WITH_WAIT", "true"), env("COMPONENT", component), env_field("NODE_NAME", "spec.nodeName")]
    if component == "toolkit":
        return [env("NVIDIA_VISIBLE_DEVICES", "all"), env("WITH_WAIT", "false"), env("COMPONENT", "toolkit")]
    if component == "cuda":
        out = [env("WITH_WAIT", "false"), env("COMPONENT", "cuda"), env_field("NODE_NAME", "spec.nodeName"),
               env_field("OPERATOR_NAMESPACE", "metadata.namespace"), env("VALIDATOR_IMAGE", img.validator),
               env("VALIDATOR_IMAGE_PULL_POLICY", "IfNotPresent")]
        if not profile.nri:
            out.append(env("VALIDATOR_RUNTIME_CLASS", "nvidia"))
        return out
    # plugin
    out = [env("COMPONENT", "plugin"), env("WITH_WAIT", "false"),
           env("WITH_WORKLOAD", specs.plugin_validation_workload(profile.version)),
           env("MIG_STRATEGY", profile.mig_strategy), env_field("NODE_NAME", "spec.nodeName"),
           env_field("OPERATOR_NAMESPACE", "metadata.namespace"), env("VALIDATOR_IMAGE", img.validator),
           env("VALIDATOR_IMAGE_PULL_POLICY", "IfNotPresent")]
    if not profile.nri:
        out.append(env("VALIDATOR_RUNTIME_CLASS", "nvidia"))
    return out


def _validator_container(name: str, profile: Profile, img: Images, mounts: list[Obj]) -> Obj:
    component = name.removesuffix("-validation")
    return {"name": name, "image": img.validator, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c"], "args": ["nvidia-validator"], "securityContext": {"privileged": True},
            "env": _validation_env(component, profile, img), "volumeMounts": mounts}


def _wait_for_toolkit(img: Images) -> Obj:
    """The shell gate operands run before starting: toolkit-ready is written by the validator."""
    return {"name": "toolkit-validation", "image": img.validator, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c"],
            "args": list(specs.TOOLKIT_GATE_ARGS),
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "run-nvidia-validations", "mountPath": VALIDATIONS_DIR,
                              "mountPropagation": "HostToContainer"}]}


def _config_manager(img: str, oneshot: bool, process: str) -> Obj:
    """config-manager(-init): picks the devicePlugin.config entry for the node (only with a config)."""
    return {"name": "config-manager-init" if oneshot else "config-manager", "image": img,
            "command": ["config-manager"],
            "env": [env("ONESHOT", "true" if oneshot else "false"), env("KUBECONFIG", ""),
                    env_field("NODE_NAME", "spec.nodeName"), env("NODE_LABEL", "nvidia.com/device-plugin.config"),
                    env("CONFIG_FILE_SRCDIR", "/available-configs"), env("CONFIG_FILE_DST", "/config/config.yaml"),
                    env("DEFAULT_CONFIG", "any"), env("SEND_SIGNAL", "false" if oneshot else "true"),
                    env("SIGNAL", "" if oneshot else "1"), env("PROCESS_TO_SIGNAL", "" if oneshot else process)]}


def _daemonset(name: str, namespace: str, profile: Profile, deploy_label: str, *, init: list[Obj],
               containers: list[Obj], volumes: list[Obj], service_account: str,
               runtime_class: bool, extra_labels: dict[str, str] | None = None,
               extra_selector: dict[str, str] | None = None, update_strategy: str = "RollingUpdate",
               host_pid: bool = False, clusterpolicy_uid: str | None = None,
               select_extra_labels: bool = False) -> Obj:
    # spec.daemonsets.labels go on the DaemonSet and on every operand pod (the real v25.3.4/v26.7 do both).
    common = specs.daemonset_labels(profile.components.operator)
    ds_labels = {"app": name, **(extra_labels or {}), **common}
    pod_labels = {"app": name, **(extra_labels or {}), **common}
    selector = {"app": name, **((extra_labels or {}) if select_extra_labels else {})}
    pod_spec: Obj = {
        "nodeSelector": {deploy_label: "true", **(extra_selector or {})},
        "tolerations": [GPU_TOLERATION],
        "priorityClassName": PRIORITY_CLASS,
        "serviceAccountName": service_account,
        "containers": containers,
        "volumes": volumes,
    }
    if init:
        pod_spec["initContainers"] = init
    if host_pid:
        pod_spec["hostPID"] = True
    annotations: dict[str, str] = {}
    if runtime_class:
        if profile.nri:
            # NRI mode: no RuntimeClass; the toolkit's NRI plugin injects the management CDI device.
            for c in [*init, *containers]:
                annotations[f"nvidia.cdi.k8s.io/container.{c['name']}"] = "management.nvidia.com/gpu=all"
        else:
            pod_spec["runtimeClassName"] = "nvidia"
    template_meta: Obj = {"labels": pod_labels}
    if annotations:
        template_meta["annotations"] = annotations
    strategy: Obj = {"type": update_strategy}
    if update_strategy == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxUnavailable": 1}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": _owned({"name": name, "namespace": namespace, "labels": ds_labels}, clusterpolicy_uid),
        "spec": {"selector": {"matchLabels": selector}, "updateStrategy": strategy,
                 "template": {"metadata": template_meta, "spec": pod_spec}},
    }


def _vols(*pairs: tuple[Obj, Obj]) -> tuple[list[Obj], list[Obj]]:
    return [p[0] for p in pairs], [p[1] for p in pairs]


def device_plugin_env(profile: Profile) -> list[Obj]:
    return specs.device_plugin_env(profile.version, profile.mig_strategy, profile.cdi,
                                   bool(profile.time_slicing_replicas))


def toolkit_env(profile: Profile) -> list[Obj]:
    return specs.toolkit_env(profile.version, profile.cdi, profile.nri)


def operand_daemonsets(profile: Profile, namespace: str, clusterpolicy_uid: str | None = None) -> list[Obj]:
    """Every DaemonSet the operator creates for the profile's ClusterPolicy, in reconcile order."""
    img = images(profile)
    spec = clusterpolicy_spec(profile)
    uid = clusterpolicy_uid
    val_vol, val_mount = host_volume("run-nvidia-validations", VALIDATIONS_DIR, VALIDATIONS_DIR,
                                     host_type="DirectoryOrCreate")
    out: list[Obj] = []

    def enabled(operand: op.Operand) -> bool:
        return op.operand_enabled(operand, spec)

    if enabled(op.DRIVER):
        vols, mounts = _vols(
            host_volume("run-nvidia", "/run/nvidia", "/run/nvidia", propagation="Bidirectional",
                        host_type="DirectoryOrCreate"),
            host_volume("host-root", "/", "/host", read_only=True, propagation="HostToContainer"),
            host_volume("host-sys", "/sys", "/sys", host_type="Directory"))
        manager = {"name": "k8s-driver-manager", "image": img.driver_manager, "imagePullPolicy": "IfNotPresent",
                   "command": ["driver-manager"], "args": ["uninstall_driver"],
                   "securityContext": {"privileged": True},
                   "env": [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "void"),
                           env("ENABLE_GPU_POD_EVICTION", "true"), env("ENABLE_AUTO_DRAIN", "false"),
                           env("DRAIN_USE_FORCE", "false"), env("DRAIN_POD_SELECTOR_LABEL", ""),
                           env("DRAIN_TIMEOUT_SECONDS", "0s"), env("DRAIN_DELETE_EMPTYDIR_DATA", "false"),
                           env_field("OPERATOR_NAMESPACE", "metadata.namespace")],
                   "volumeMounts": mounts}
        driver_ctr = {"name": "nvidia-driver-ctr", "image": img.driver, "imagePullPolicy": "IfNotPresent",
                      "command": ["nvidia-driver"], "args": ["init"], "securityContext": {"privileged": True},
                      "env": [env_field("NODE_NAME", "spec.nodeName"), env_field("NODE_IP", "status.hostIP"),
                              env("KERNEL_MODULE_TYPE", "auto")],
                      "startupProbe": {"exec": {"command": ["sh", "/usr/local/bin/startup-probe.sh"]},
                                       "initialDelaySeconds": 60, "periodSeconds": 10, "failureThreshold": 120,
                                       "timeoutSeconds": 60},
                      "volumeMounts": mounts[:1]}
        driver_containers = [driver_ctr]
        if profile.gds_enabled:
            # The operator keeps nvidia-fs-ctr only with GDS (it strips it otherwise).
            os_tag = f"{profile.os_id}{profile.os_version_id}"
            driver_containers.append({
                "name": "nvidia-fs-ctr",
                "image": f"nvcr.io/nvidia/cloud-native/nvidia-fs:{profile.components.gds}-{os_tag}",
                "imagePullPolicy": "IfNotPresent", "command": ["nvidia-gds-driver"], "args": ["start"],
                "securityContext": {"privileged": True}, "volumeMounts": mounts[:1]})
        ds = _daemonset(op.DRIVER.daemonset, namespace, profile, op.DRIVER.deploy_label, init=[manager],
                        containers=driver_containers, volumes=vols, service_account="nvidia-driver",
                        runtime_class=False,
                        extra_labels=specs.driver_daemonset_labels(profile.version),
                        update_strategy="OnDelete", host_pid=True, clusterpolicy_uid=uid)
        # One driver pod per node across every driver DaemonSet flavour.
        ds["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "nvidia-driver"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
        out.append(ds)

    driver_mounts = _vols(
        host_volume("driver-install-dir", "/run/nvidia/driver", "/run/nvidia/driver",
                    propagation="HostToContainer", host_type="DirectoryOrCreate"),
        host_volume("host-root", "/", "/host", read_only=True, propagation="HostToContainer"),
        host_volume("host-dev-char", "/dev/char", "/host-dev-char"))

    if enabled(op.TOOLKIT):
        vols, mounts = _vols(
            host_volume("toolkit-install-dir", "/usr/local/nvidia", "/usr/local/nvidia"),
            host_volume("toolkit-root", "/run/nvidia/toolkit", "/run/nvidia/toolkit",
                        host_type="DirectoryOrCreate"),
            host_volume("driver-install-dir", "/run/nvidia/driver", "/driver-root", propagation="HostToContainer",
                        host_type="DirectoryOrCreate"),
            host_volume("host-root", "/", "/host", read_only=True, propagation="HostToContainer"),
            host_volume("cdi-root", "/var/run/cdi", "/var/run/cdi", host_type="DirectoryOrCreate"),
            host_volume("containerd-config", "/etc/containerd", "/runtime/config-dir/",
                        host_type="DirectoryOrCreate"),
            host_volume("containerd-socket", "/run/containerd", "/runtime/sock-dir/"))
        if versions.since(versions.RUNTIME_DROP_IN_CONFIG, profile.version):
            v, m = host_volume("containerd-drop-in-config", "/etc/containerd/conf.d", "/runtime/config-dir.d/",
                               host_type="DirectoryOrCreate")
            vols.append(v)
            mounts.append(m)
        init = [_validator_container("driver-validation", profile, img, [*driver_mounts[1], val_mount])]
        ctr = {"name": "nvidia-container-toolkit-ctr", "image": img.toolkit, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/bash", "-c"], "args": ["/bin/entrypoint.sh"],
               "securityContext": {"privileged": True}, "env": toolkit_env(profile),
               "volumeMounts": [*mounts, val_mount]}
        out.append(_daemonset(op.TOOLKIT.daemonset, namespace, profile, op.TOOLKIT.deploy_label, init=init,
                              containers=[ctr], volumes=[*vols, *driver_mounts[0][2:], val_vol],
                              service_account="nvidia-container-toolkit", runtime_class=False, host_pid=True,
                              clusterpolicy_uid=uid))

    # The validator: always deployed (facts §1c).
    v_init = [_validator_container(n, profile, img, [val_mount] if n != "driver-validation"
                                   else [*driver_mounts[1], val_mount])
              for n in validator_init_containers(profile.operator_version, enabled(op.DEVICE_PLUGIN),
                                                 profile.gds_enabled, profile.gdrcopy_enabled)]
    for c in v_init:
        if c["name"] == "plugin-validation":
            c["securityContext"] = {"privileged": True}
    v_main = {"name": "nvidia-operator-validator", "image": img.validator, "imagePullPolicy": "IfNotPresent",
              "command": ["sh", "-c"], "args": specs.validator_main_args(profile.version),
              "securityContext": {"privileged": True},
              "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", f"rm -f {VALIDATIONS_DIR}/*-ready"]}}},
              "volumeMounts": [val_mount]}
    out.append(_daemonset(op.VALIDATOR.daemonset, namespace, profile, op.VALIDATOR.deploy_label, init=v_init,
                          containers=[v_main], volumes=[*driver_mounts[0], val_vol],
                          service_account="nvidia-operator-validator", runtime_class=True,
                          extra_labels={"app.kubernetes.io/part-of": "gpu-operator"}, clusterpolicy_uid=uid,
                          select_extra_labels=True))

    with_config = bool(profile.time_slicing_replicas)
    if enabled(op.DEVICE_PLUGIN):
        init = [_wait_for_toolkit(img)]
        ctr = {"name": "nvidia-device-plugin", "image": img.device_plugin, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
               "securityContext": {"privileged": True}, "env": device_plugin_env(profile),
               "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                                val_mount, {"name": "cdi-root", "mountPath": "/var/run/cdi"}]}
        containers = [ctr]
        if with_config:
            init.append(_config_manager(img.device_plugin, True, "nvidia-device-plugin"))
            containers.append(_config_manager(img.device_plugin, False, "nvidia-device-plugin"))
        vols = [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}, val_vol,
                {"name": "cdi-root", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}}]
        out.append(_daemonset(op.DEVICE_PLUGIN.daemonset, namespace, profile, op.DEVICE_PLUGIN.deploy_label,
                              init=init, containers=containers, volumes=vols, service_account="nvidia-device-plugin",
                              runtime_class=True, clusterpolicy_uid=uid))
        if versions.since(versions.MPS_CONTROL_DAEMON, profile.version):
            # MPS control daemon: created with the device plugin, but only nodes labelled
            # nvidia.com/mps.capable=true (MPS sharing configured) get a pod -> 0 pods by default.
            mps_init = [_wait_for_toolkit(img),
                        {"name": "mps-control-daemon-mounts", "image": img.device_plugin,
                         "command": ["mps-control-daemon", "mount-shm"], "securityContext": {"privileged": True}}]
            mps_ctr = {"name": "mps-control-daemon-ctr", "image": img.device_plugin, "command": ["mps-control-daemon"],
                       "securityContext": {"privileged": True},
                       "env": [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "all"),
                               env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                               env("MIG_STRATEGY", profile.mig_strategy), env("NVIDIA_MIG_MONITOR_DEVICES", "all")]}
            out.append(_daemonset(MPS_DAEMONSET, namespace, profile, op.DEVICE_PLUGIN.deploy_label, init=mps_init,
                                  containers=[mps_ctr], volumes=[val_vol],
                                  service_account="nvidia-device-plugin-mps-control-daemon",
                                  runtime_class=True, extra_selector={"nvidia.com/mps.capable": "true"},
                                  host_pid=True, clusterpolicy_uid=uid))

    if enabled(op.DCGM) and spec["dcgm"]["enabled"]:
        ctr = {"name": "nvidia-dcgm-ctr", "image": img.dcgm, "imagePullPolicy": "IfNotPresent",
               "command": ["nv-hostengine", "-n", "-b", "ALL"], "securityContext": {"privileged": True},
               "ports": [{"name": "dcgm", "containerPort": 5555}]}
        out.append(_daemonset(op.DCGM.daemonset, namespace, profile, op.DCGM.deploy_label,
                              init=[_wait_for_toolkit(img)], containers=[ctr], volumes=[val_vol],
                              service_account="nvidia-dcgm", runtime_class=True, clusterpolicy_uid=uid))

    if enabled(op.DCGM_EXPORTER):
        e = [env("DCGM_EXPORTER_LISTEN", ":9400"), env("DCGM_EXPORTER_KUBERNETES", "true"),
             env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
             env_field("NODE_NAME", "spec.nodeName")]
        if profile.dcgm_enabled:
            e.append(env("DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555"))
        ctr = {"name": "nvidia-dcgm-exporter", "image": img.dcgm_exporter, "imagePullPolicy": "IfNotPresent",
               "env": e, "securityContext": {"privileged": True},
               "ports": [{"name": "metrics", "containerPort": 9400}],
               "volumeMounts": [{"name": "pod-gpu-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                                 "readOnly": True}]}
        vols = [{"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}, val_vol]
        out.append(_daemonset(op.DCGM_EXPORTER.daemonset, namespace, profile, op.DCGM_EXPORTER.deploy_label,
                              init=[_wait_for_toolkit(img)], containers=[ctr], volumes=vols,
                              service_account="nvidia-dcgm-exporter", runtime_class=True, clusterpolicy_uid=uid))

    if enabled(op.GFD):
        ctr = {"name": "gpu-feature-discovery", "image": img.gfd, "imagePullPolicy": "IfNotPresent",
               "command": ["/usr/bin/gpu-feature-discovery"], "securityContext": {"privileged": True},
               "env": [env("GFD_SLEEP_INTERVAL", "60s"), env("GFD_FAIL_ON_INIT_ERROR", "true"),
                       env_field("NAMESPACE", "metadata.namespace"), env_field("NODE_NAME", "spec.nodeName"),
                       env("MIG_STRATEGY", profile.mig_strategy), env("NVIDIA_MIG_MONITOR_DEVICES", "all")],
               "volumeMounts": [{"name": "output-dir",
                                 "mountPath": "/etc/kubernetes/node-feature-discovery/features.d"},
                                {"name": "host-sys", "mountPath": "/sys"}]}
        if with_config:
            ctr["env"].append(env("CONFIG_FILE", "/config/config.yaml"))
        init = [_wait_for_toolkit(img)]
        containers = [ctr]
        if with_config:
            init.append(_config_manager(img.gfd, True, "gpu-feature-discovery"))
            containers.append(_config_manager(img.gfd, False, "gpu-feature-discovery"))
        vols = [{"name": "output-dir", "hostPath": {"path": "/etc/kubernetes/node-feature-discovery/features.d"}},
                {"name": "host-sys", "hostPath": {"path": "/sys"}}, val_vol]
        out.append(_daemonset(op.GFD.daemonset, namespace, profile, op.GFD.deploy_label, init=init,
                              containers=containers, volumes=vols, service_account="nvidia-gpu-feature-discovery",
                              runtime_class=True, extra_labels={"app.kubernetes.io/part-of": "nvidia-gpu"},
                              clusterpolicy_uid=uid, select_extra_labels=True))

    if enabled(op.MIG_MANAGER):
        ctr = {"name": "nvidia-mig-manager", "image": img.mig_manager, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
               "env": [env_field("NODE_NAME", "spec.nodeName"), env("CONFIG_FILE", "/mig-parted-config/config.yaml"),
                       env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
                       env_field("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace")]}
        out.append(_daemonset(op.MIG_MANAGER.daemonset, namespace, profile, op.MIG_MANAGER.deploy_label,
                              init=[_wait_for_toolkit(img)], containers=[ctr], volumes=[val_vol],
                              service_account="nvidia-mig-manager", runtime_class=True, host_pid=True,
                              clusterpolicy_uid=uid))

    if enabled(op.NODE_STATUS_EXPORTER):
        ctr = {"name": "nvidia-node-status-exporter", "image": img.validator, "imagePullPolicy": "IfNotPresent",
               "command": ["nvidia-validator"], "securityContext": {"privileged": True},
               "env": [env("NVIDIA_VISIBLE_DEVICES", "void"), env("COMPONENT", "metrics"),
                       env("METRICS_PORT", "8000"), env_field("NODE_NAME", "spec.nodeName"),
                       env_field("OPERATOR_NAMESPACE", "metadata.namespace")],
               "ports": [{"name": "node-status", "containerPort": 8000}], "volumeMounts": [val_mount]}
        out.append(_daemonset(op.NODE_STATUS_EXPORTER.daemonset, namespace, profile,
                              op.NODE_STATUS_EXPORTER.deploy_label, init=[], containers=[ctr], volumes=[val_vol],
                              service_account="nvidia-node-status-exporter", runtime_class=False,
                              clusterpolicy_uid=uid))
    return out


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
    img = images(profile)
    meta: Obj = {"namespace": namespace, "labels": {"app": op.CUDA_VALIDATOR_APP},
                 "annotations": {"nvidia.cdi.k8s.io/container.cuda-validation": "management.nvidia.com/gpu=all"}}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{op.CUDA_VALIDATOR_APP}-"
    spec: Obj = {
        "nodeName": node, "restartPolicy": "OnFailure", "serviceAccountName": "nvidia-operator-validator",
        "tolerations": [GPU_TOLERATION],
        "initContainers": [{"name": "cuda-validation", "image": img.validator, "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c"], "args": ["vectorAdd"], "securityContext": {"privileged": True},
                            "env": [env("NVIDIA_VISIBLE_DEVICES", "all")]}],
        "containers": [{"name": op.CUDA_VALIDATOR_APP, "image": img.validator, "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c"], "args": ["echo cuda workload validation is successful"],
                        "securityContext": {"allowPrivilegeEscalation": False}}],
    }
    if not profile.nri:
        spec["runtimeClassName"] = "nvidia"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _owned(meta, clusterpolicy_uid), "spec": spec}


# ---- node labels and resources -----------------------------------------------------------
def nfd_labels(profile: Profile, gpu: bool) -> dict[str, str]:
    """What NFD's worker publishes: kernel and OS on every node, the NVIDIA PCI vendor on GPU nodes."""
    kernel = profile.kernel_version.split("-")[0].split(".")
    major, minor = profile.os_version_id.split(".")[:2] if "." in profile.os_version_id else (
        profile.os_version_id, "0")
    labels = {
        "feature.node.kubernetes.io/kernel-version.full": profile.kernel_version,
        "feature.node.kubernetes.io/kernel-version.major": kernel[0],
        "feature.node.kubernetes.io/kernel-version.minor": kernel[1] if len(kernel) > 1 else "0",
        "feature.node.kubernetes.io/kernel-version.revision": kernel[2] if len(kernel) > 2 else "0",
        "feature.node.kubernetes.io/system-os_release.ID": profile.os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": profile.os_version_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": major,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": minor,
        "feature.node.kubernetes.io/cpu-cpuid.AVX2": "true",
    }
    if gpu:
        labels[NFD_PCI_LABEL] = "true"
    return labels


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
    helm += [operator_deployment(profile, namespace), *nfd_objects(profile, namespace)]
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
