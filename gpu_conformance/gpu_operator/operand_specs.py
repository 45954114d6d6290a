"""What the operator renders into its operands for a release and a ClusterPolicy: the validator's stages, the
device plugin's and the toolkit's env, the operand DaemonSets' labels, the RuntimeClasses, the MPS control daemon.

Facts from NVIDIA/gpu-operator at each release tag (assets/, controllers/object_controls.go,
controllers/clusterpolicy_controller.go) as ../shared/docs/gpu-operator-facts.md records them (§1c, §3, §6).
"""

from __future__ import annotations

from typing import Any

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.versions import Version, parse_or_newest

Obj = dict[str, Any]

# state-mps-control-daemon's DaemonSet: created with the device plugin, its pods only on nodes labelled
# nvidia.com/mps.capable=true.
MPS_DAEMONSET = "nvidia-device-plugin-mps-control-daemon"
# Every operand pod tolerates the GPU taint and runs at node-critical priority (spec.daemonsets defaults).
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PRIORITY_CLASS = "system-node-critical"
# Where the validator leaves its *-ready files, which the other operands wait for.
VALIDATIONS_DIR = "/run/nvidia/validations"
# The shell gate the operands after the toolkit run first: toolkit-ready is written by the validator.
TOOLKIT_GATE_ARGS = (f"until [ -f {VALIDATIONS_DIR}/toolkit-ready ]; do echo waiting for nvidia container stack to "
                     "be setup; sleep 5; done",)


def env(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def env_field(name: str, path: str) -> Obj:
    """An env var the kubelet fills from the pod's own fields (downward API)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def validator_init_containers(operator_version: str, device_plugin_enabled: bool = True,
                              gds_enabled: bool = False, gdrcopy_enabled: bool = False) -> tuple[str, ...]:
    """nvidia-operator-validator init containers in order, as the operator deploys them.

    The asset lists of facts §3a are what the DaemonSet template holds; TransformValidatorComponent then
    removes nvidia-fs-validation unless gds.enabled and gdrcopy-validation unless gdrcopy.enabled (GO
    v25.3.4/v25.10.1 controllers/object_controls.go), and plugin-validation without a device plugin (from v23.9.0:
    before, plugin-validation stays and loops waiting for a GPU resource).
    From v26.3 those checks live inside driver-validation.
    """
    v = parse_or_newest(operator_version)
    if versions.since(versions.FS_VALIDATION_IN_DRIVER_VALIDATION, v):
        names = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
    elif versions.since(versions.GDRCOPY_VALIDATION, v):
        names = ["driver-validation", "nvidia-fs-validation", "gdrcopy-validation", "toolkit-validation",
                 "cuda-validation", "plugin-validation"]
    else:
        names = ["driver-validation", "nvidia-fs-validation", "toolkit-validation", "cuda-validation",
                 "plugin-validation"]
    if not gds_enabled and "nvidia-fs-validation" in names:
        names.remove("nvidia-fs-validation")
    if not gdrcopy_enabled and "gdrcopy-validation" in names:
        names.remove("gdrcopy-validation")
    if not device_plugin_enabled and versions.since(versions.PLUGIN_VALIDATION_FOLLOWS_DEVICE_PLUGIN, v):
        names.remove("plugin-validation")
    return tuple(names)


def daemonset_labels(chart_version: str) -> dict[str, str]:
    """spec.daemonsets.labels as the chart renders them: on every operand DaemonSet and its pods."""
    return {"helm.sh/chart": f"gpu-operator-{chart_version}", "app.kubernetes.io/managed-by": "gpu-operator"}


def driver_daemonset_labels(version: Version) -> dict[str, str]:
    """The driver DaemonSet's own labels: its component (from v23.9) and whether it runs precompiled modules."""
    component = dict([op.DRIVER_COMPONENT_LABEL]) if versions.since(versions.DRIVER_COMPONENT_LABEL, version) else {}
    return {**component, "nvidia.com/precompiled": "false"}


def plugin_validation_workload(version: Version) -> str:
    """WITH_WORKLOAD of plugin-validation: whether it runs a pod that asks for a GPU."""
    return "false" if versions.since(versions.PLUGIN_VALIDATION_NO_WORKLOAD, version) else "true"


def validator_main_args(version: Version) -> list[str]:
    """The validator's main container, which idles once every stage passed."""
    sleep = ("while true; do sleep 86400; done" if versions.since(versions.VALIDATOR_SLEEP_LOOP, version)
             else "sleep infinity")
    return [f"echo all validations are successful; {sleep}"]


def device_plugin_env(version: Version, mig_strategy: str, cdi: bool, with_config: bool) -> list[Obj]:
    """Device plugin env as TransformDevicePlugin sets it (facts §6b); with_config: a devicePlugin.config."""
    out = [env("PASS_DEVICE_SPECS", "true"), env("FAIL_ON_INIT_ERROR", "true"),
           env("DEVICE_LIST_STRATEGY", "envvar"), env("DEVICE_ID_STRATEGY", "uuid"),
           env("NVIDIA_VISIBLE_DEVICES", "all"), env("NVIDIA_DRIVER_CAPABILITIES", "all"),
           env("MPS_ROOT", "/run/nvidia/mps"), env("MIG_STRATEGY", mig_strategy),
           env("NVIDIA_MIG_MONITOR_DEVICES", "all")]
    if cdi:
        if versions.since(versions.CDI_DEFAULT_ON, version):
            strategy, prefix = "cdi-annotations,cdi-cri", "cdi.k8s.io/"
        else:
            strategy, prefix = "envvar,cdi-annotations", "nvidia.cdi.k8s.io/"
        for e in out:
            if e["name"] == "DEVICE_LIST_STRATEGY":
                e["value"] = strategy
        out += [env("CDI_ENABLED", "true"), env("CDI_ANNOTATION_PREFIX", prefix),
                env("NVIDIA_CDI_HOOK_PATH", "/usr/local/nvidia/toolkit/nvidia-cdi-hook")]
    if with_config:
        out.append(env("CONFIG_FILE", "/config/config.yaml"))
    return out


def toolkit_env(version: Version, cdi: bool, nri: bool) -> list[Obj]:
    """Toolkit env: asset defaults + transformForRuntime (containerd) + CDI (facts §6d, §6f)."""
    out = [env("ROOT", "/usr/local/nvidia"),
           env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
           env("NVIDIA_VISIBLE_DEVICES", "void"), env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid")]
    if cdi:
        out += [env("CDI_ENABLED", "true"), env("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
                env("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"), env("CRIO_CONFIG_MODE", "config")]
        if nri:
            out.append(env("ENABLE_NRI_PLUGIN", "true"))
    out += [env("RUNTIME", "containerd"), env("CONTAINERD_RUNTIME_CLASS", "nvidia"),
            env("RUNTIME_CONFIG", "/runtime/config-dir/config.toml"),
            env("CONTAINERD_CONFIG", "/runtime/config-dir/config.toml"),
            env("RUNTIME_SOCKET", "/runtime/sock-dir/containerd.sock"),
            env("CONTAINERD_SOCKET", "/runtime/sock-dir/containerd.sock")]
    if versions.since(versions.RUNTIME_DROP_IN_CONFIG, version):
        out += [env("RUNTIME_DROP_IN_CONFIG", "/runtime/config-dir.d/99-nvidia.toml"),
                env("RUNTIME_DROP_IN_CONFIG_HOST_PATH", "/etc/containerd/conf.d/99-nvidia.toml")]
    return out


def runtime_class_names(cdi: bool, nri: bool) -> list[str]:
    """RuntimeClasses (facts §6e): `nvidia`; + `nvidia-cdi`, `nvidia-legacy` with CDI; none with NRI."""
    if nri:
        return []
    return ["nvidia"] + (["nvidia-cdi", "nvidia-legacy"] if cdi else [])
