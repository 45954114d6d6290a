"""The operand DaemonSets the operator renders from a ClusterPolicy: per operand its containers (commands, args,
env), volumes, service account, node selector, labels and update strategy, in the order its states create them.

From NVIDIA/gpu-operator at each release tag: assets/state-*/0500_daemonset.yaml (the templates) and
controllers/object_controls.go (Transform*: images, env from the ClusterPolicy, RuntimeClass or NRI annotations,
validator stages kept or removed, config-manager with a devicePlugin.config), as ../shared/docs/gpu-operator-facts.md
records them (§1c, §3, §6). The templates keep what a check can observe and drop the rest (RBAC, most probes, some
volumes). Read by the simulated operator and by tests/factory.py, which adds what the API server and kubelet fill in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.clusterpolicy import owned
from gpu_conformance.gpu_operator.operand_specs import (
    GPU_TOLERATION,
    MPS_DAEMONSET,
    PRIORITY_CLASS,
    VALIDATIONS_DIR,
    env,
    env_field,
    validator_init_containers,
)
from gpu_conformance.gpu_operator.releases import ComponentVersions, Images, images
from gpu_conformance.versions import Version

Obj = dict[str, Any]

# The CDI device an NRI-mode operand asks the toolkit's NRI plugin for (object_controls.go setNRIPluginAnnotation).
MANAGEMENT_CDI_DEVICE = "management.nvidia.com/gpu=all"


def nri_annotation(container: str) -> str:
    """The pod annotation through which NRI mode injects MANAGEMENT_CDI_DEVICE into `container`."""
    return f"nvidia.cdi.k8s.io/container.{container}"


@dataclass(frozen=True)
class RenderInput:
    """What the operator renders operands from: the release's defaults, the ClusterPolicy's spec and the node OS
    it appends to the driver images (e.g. ubuntu22.04)."""

    components: ComponentVersions
    spec: Obj
    os_tag: str

    @property
    def version(self) -> Version:
        return self.components.version

    @property
    def images(self) -> Images:
        return images(self.components, self.os_tag)

    @property
    def cdi(self) -> bool:
        return bool(self.spec.get("cdi", {}).get("enabled"))

    @property
    def nri(self) -> bool:
        return bool(self.spec.get("cdi", {}).get("nriPluginEnabled"))

    @property
    def mig_strategy(self) -> str:
        return str(self.spec["mig"]["strategy"])

    @property
    def with_config(self) -> bool:
        """A devicePlugin.config (time-slicing): the device plugin and GFD run config-manager."""
        return "config" in self.spec["devicePlugin"]

    @property
    def gds_enabled(self) -> bool:
        return bool(self.spec["gds"]["enabled"])

    @property
    def gdrcopy_enabled(self) -> bool:
        return bool(self.spec["gdrcopy"]["enabled"])

    @property
    def dcgm_enabled(self) -> bool:
        return bool(self.spec["dcgm"]["enabled"])


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


def _validation_env(component: str, r: RenderInput, img: Images) -> list[Obj]:
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
        if not r.nri:
            out.append(env("VALIDATOR_RUNTIME_CLASS", "nvidia"))
        return out
    # plugin
    out = [env("COMPONENT", "plugin"), env("WITH_WAIT", "false"),
           env("WITH_WORKLOAD", specs.plugin_validation_workload(r.version)),
           env("MIG_STRATEGY", r.mig_strategy), env_field("NODE_NAME", "spec.nodeName"),
           env_field("OPERATOR_NAMESPACE", "metadata.namespace"), env("VALIDATOR_IMAGE", img.validator),
           env("VALIDATOR_IMAGE_PULL_POLICY", "IfNotPresent")]
    if not r.nri:
        out.append(env("VALIDATOR_RUNTIME_CLASS", "nvidia"))
    return out


def _validator_container(name: str, r: RenderInput, img: Images, mounts: list[Obj]) -> Obj:
    component = name.removesuffix("-validation")
    return {"name": name, "image": img.validator, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c"], "args": ["nvidia-validator"], "securityContext": {"privileged": True},
            "env": _validation_env(component, r, img), "volumeMounts": mounts}


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


def _daemonset(name: str, namespace: str, r: RenderInput, deploy_label: str, *, init: list[Obj],
               containers: list[Obj], volumes: list[Obj], service_account: str,
               runtime_class: bool, extra_labels: dict[str, str] | None = None,
               extra_selector: dict[str, str] | None = None, update_strategy: str = "RollingUpdate",
               host_pid: bool = False, clusterpolicy_uid: str | None = None,
               select_extra_labels: bool = False, nri_container: str | None = None) -> Obj:
    # spec.daemonsets.labels go on the DaemonSet and on every operand pod (the real v25.3.4/v26.7 do both).
    common = specs.daemonset_labels(r.components.operator)
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
        if r.nri:
            # NRI mode: no RuntimeClass; the toolkit's NRI plugin injects the management CDI device into the one
            # container setNRIPluginAnnotation names: the main container, the validator's toolkit-validation.
            annotations[nri_annotation(nri_container or containers[0]["name"])] = MANAGEMENT_CDI_DEVICE
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
        "metadata": owned({"name": name, "namespace": namespace, "labels": ds_labels}, clusterpolicy_uid),
        "spec": {"selector": {"matchLabels": selector}, "updateStrategy": strategy,
                 "template": {"metadata": template_meta, "spec": pod_spec}},
    }


def _vols(*pairs: tuple[Obj, Obj]) -> tuple[list[Obj], list[Obj]]:
    return [p[0] for p in pairs], [p[1] for p in pairs]



def operand_daemonsets(r: RenderInput, namespace: str, clusterpolicy_uid: str | None = None) -> list[Obj]:
    """Every DaemonSet the operator creates for the ClusterPolicy, in reconcile order."""
    img = r.images
    spec = r.spec
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
        if r.gds_enabled:
            # The operator keeps nvidia-fs-ctr only with GDS (it strips it otherwise).
            driver_containers.append({
                "name": "nvidia-fs-ctr",
                "image": f"nvcr.io/nvidia/cloud-native/nvidia-fs:{r.components.gds}-{r.os_tag}",
                "imagePullPolicy": "IfNotPresent", "command": ["nvidia-gds-driver"], "args": ["start"],
                "securityContext": {"privileged": True}, "volumeMounts": mounts[:1]})
        ds = _daemonset(op.DRIVER.daemonset, namespace, r, op.DRIVER.deploy_label, init=[manager],
                        containers=driver_containers, volumes=vols, service_account="nvidia-driver",
                        runtime_class=False,
                        extra_labels=specs.driver_daemonset_labels(r.version),
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
        if versions.since(versions.RUNTIME_DROP_IN_CONFIG, r.version):
            v, m = host_volume("containerd-drop-in-config", "/etc/containerd/conf.d", "/runtime/config-dir.d/",
                               host_type="DirectoryOrCreate")
            vols.append(v)
            mounts.append(m)
        init = [_validator_container("driver-validation", r, img, [*driver_mounts[1], val_mount])]
        ctr = {"name": "nvidia-container-toolkit-ctr", "image": img.toolkit, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/bash", "-c"], "args": ["/bin/entrypoint.sh"],
               "securityContext": {"privileged": True}, "env": specs.toolkit_env(r.version, r.cdi, r.nri),
               "volumeMounts": [*mounts, val_mount]}
        out.append(_daemonset(op.TOOLKIT.daemonset, namespace, r, op.TOOLKIT.deploy_label, init=init,
                              containers=[ctr], volumes=[*vols, *driver_mounts[0][2:], val_vol],
                              service_account="nvidia-container-toolkit", runtime_class=False, host_pid=True,
                              clusterpolicy_uid=uid))

    # The validator: always deployed (facts §1c).
    v_init = [_validator_container(n, r, img, [val_mount] if n != "driver-validation"
                                   else [*driver_mounts[1], val_mount])
              for n in validator_init_containers(r.components.operator, enabled(op.DEVICE_PLUGIN),
                                                 r.gds_enabled, r.gdrcopy_enabled)]
    for c in v_init:
        if c["name"] == "plugin-validation":
            c["securityContext"] = {"privileged": True}
    v_main = {"name": "nvidia-operator-validator", "image": img.validator, "imagePullPolicy": "IfNotPresent",
              "command": ["sh", "-c"], "args": specs.validator_main_args(r.version),
              "securityContext": {"privileged": True},
              "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", f"rm -f {VALIDATIONS_DIR}/*-ready"]}}},
              "volumeMounts": [val_mount]}
    out.append(_daemonset(op.VALIDATOR.daemonset, namespace, r, op.VALIDATOR.deploy_label, init=v_init,
                          containers=[v_main], volumes=[*driver_mounts[0], val_vol],
                          service_account="nvidia-operator-validator", runtime_class=True,
                          extra_labels={"app.kubernetes.io/part-of": "gpu-operator"}, clusterpolicy_uid=uid,
                          select_extra_labels=True, nri_container="toolkit-validation"))

    with_config = r.with_config
    if enabled(op.DEVICE_PLUGIN):
        init = [_wait_for_toolkit(img)]
        ctr = {"name": "nvidia-device-plugin", "image": img.device_plugin, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
               "securityContext": {"privileged": True},
               "env": specs.device_plugin_env(r.version, r.mig_strategy, r.cdi, r.with_config),
               "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                                val_mount, {"name": "cdi-root", "mountPath": "/var/run/cdi"}]}
        containers = [ctr]
        if with_config:
            init.append(_config_manager(img.device_plugin, True, "nvidia-device-plugin"))
            containers.append(_config_manager(img.device_plugin, False, "nvidia-device-plugin"))
        vols = [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}, val_vol,
                {"name": "cdi-root", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}}]
        out.append(_daemonset(op.DEVICE_PLUGIN.daemonset, namespace, r, op.DEVICE_PLUGIN.deploy_label,
                              init=init, containers=containers, volumes=vols, service_account="nvidia-device-plugin",
                              runtime_class=True, clusterpolicy_uid=uid))
        if versions.since(versions.MPS_CONTROL_DAEMON, r.version):
            # MPS control daemon: created with the device plugin, but only nodes labelled
            # nvidia.com/mps.capable=true (MPS sharing configured) get a pod -> 0 pods by default.
            mps_init = [_wait_for_toolkit(img),
                        {"name": "mps-control-daemon-mounts", "image": img.device_plugin,
                         "command": ["mps-control-daemon", "mount-shm"], "securityContext": {"privileged": True}}]
            mps_ctr = {"name": "mps-control-daemon-ctr", "image": img.device_plugin, "command": ["mps-control-daemon"],
                       "securityContext": {"privileged": True},
                       "env": [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "all"),
                               env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
                               env("MIG_STRATEGY", r.mig_strategy), env("NVIDIA_MIG_MONITOR_DEVICES", "all")]}
            out.append(_daemonset(MPS_DAEMONSET, namespace, r, op.DEVICE_PLUGIN.deploy_label, init=mps_init,
                                  containers=[mps_ctr], volumes=[val_vol],
                                  service_account="nvidia-device-plugin-mps-control-daemon",
                                  runtime_class=True, extra_selector={"nvidia.com/mps.capable": "true"},
                                  host_pid=True, clusterpolicy_uid=uid))

    if enabled(op.DCGM) and spec["dcgm"]["enabled"]:
        ctr = {"name": "nvidia-dcgm-ctr", "image": img.dcgm, "imagePullPolicy": "IfNotPresent",
               "command": ["nv-hostengine", "-n", "-b", "ALL"], "securityContext": {"privileged": True},
               "ports": [{"name": "dcgm", "containerPort": 5555}]}
        out.append(_daemonset(op.DCGM.daemonset, namespace, r, op.DCGM.deploy_label,
                              init=[_wait_for_toolkit(img)], containers=[ctr], volumes=[val_vol],
                              service_account="nvidia-dcgm", runtime_class=True, clusterpolicy_uid=uid))

    if enabled(op.DCGM_EXPORTER):
        e = [env("DCGM_EXPORTER_LISTEN", ":9400"), env("DCGM_EXPORTER_KUBERNETES", "true"),
             env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
             env_field("NODE_NAME", "spec.nodeName")]
        if r.dcgm_enabled:
            e.append(env("DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555"))
        ctr = {"name": "nvidia-dcgm-exporter", "image": img.dcgm_exporter, "imagePullPolicy": "IfNotPresent",
               "env": e, "securityContext": {"privileged": True},
               "ports": [{"name": "metrics", "containerPort": 9400}],
               "volumeMounts": [{"name": "pod-gpu-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                                 "readOnly": True}]}
        vols = [{"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}, val_vol]
        out.append(_daemonset(op.DCGM_EXPORTER.daemonset, namespace, r, op.DCGM_EXPORTER.deploy_label,
                              init=[_wait_for_toolkit(img)], containers=[ctr], volumes=vols,
                              service_account="nvidia-dcgm-exporter", runtime_class=True, clusterpolicy_uid=uid))

    if enabled(op.GFD):
        ctr = {"name": "gpu-feature-discovery", "image": img.gfd, "imagePullPolicy": "IfNotPresent",
               "command": ["/usr/bin/gpu-feature-discovery"], "securityContext": {"privileged": True},
               "env": [env("GFD_SLEEP_INTERVAL", "60s"), env("GFD_FAIL_ON_INIT_ERROR", "true"),
                       env_field("NAMESPACE", "metadata.namespace"), env_field("NODE_NAME", "spec.nodeName"),
                       env("MIG_STRATEGY", r.mig_strategy), env("NVIDIA_MIG_MONITOR_DEVICES", "all")],
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
        out.append(_daemonset(op.GFD.daemonset, namespace, r, op.GFD.deploy_label, init=init,
                              containers=containers, volumes=vols, service_account="nvidia-gpu-feature-discovery",
                              runtime_class=True, extra_labels={"app.kubernetes.io/part-of": "nvidia-gpu"},
                              clusterpolicy_uid=uid, select_extra_labels=True))

    if enabled(op.MIG_MANAGER):
        ctr = {"name": "nvidia-mig-manager", "image": img.mig_manager, "imagePullPolicy": "IfNotPresent",
               "command": ["/bin/entrypoint.sh"], "securityContext": {"privileged": True},
               "env": [env_field("NODE_NAME", "spec.nodeName"), env("CONFIG_FILE", "/mig-parted-config/config.yaml"),
                       env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
                       env_field("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace")]}
        out.append(_daemonset(op.MIG_MANAGER.daemonset, namespace, r, op.MIG_MANAGER.deploy_label,
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
        out.append(_daemonset(op.NODE_STATUS_EXPORTER.daemonset, namespace, r,
                              op.NODE_STATUS_EXPORTER.deploy_label, init=[], containers=[ctr], volumes=[val_vol],
                              service_account="nvidia-node-status-exporter", runtime_class=False,
                              clusterpolicy_uid=uid))
    return out

