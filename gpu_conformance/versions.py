"""Version rules of the GPU Operator, as data: what changed in which release (kube-bench keeps its mappings so too).

Checks, the probe, the report and the simulated operator ask `since(RULE, version)`; none writes a version
number of its own. An unknown version answers None, and a caller then accepts what every supported version does.
Sources: the operator's source per release (../shared/docs/gpu-operator-facts.md, research/realism-audit.md).
"""

from __future__ import annotations

Version = tuple[int, int, int]

# The oldest release the suite knows: status shapes and labels before it differ too much to judge.
OLDEST_SUPPORTED: Version = (22, 9, 0)

# ClusterPolicy status has conditions (Ready / Error with reasons) from here; before it only status.state.
STATUS_CONDITIONS = "status-conditions"
# spec.cdi.enabled defaults to true (kubebuilder default, Helm cdi.enabled) and the device plugin hands out
# CDI devices with DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri; before, false and envvar.
CDI_DEFAULT_ON = "cdi-default-on"
# The validator runs from the operator image (no separate gpu-operator-validator image).
VALIDATOR_IN_OPERATOR_IMAGE = "validator-in-operator-image"
# The operator adds nvidia.com/gpu.deploy.client to GPU nodes.
CLIENT_DEPLOY_LABEL = "client-deploy-label"
# "ClusterPolicy is not ready; states not ready: [...]" (semicolon) instead of ", states not ready" (v26.3.3
# clusterpolicy_controller.go:178 still has the comma).
NOT_READY_SEMICOLON = "not-ready-message-semicolon"
# What the chart and the operator deploy, as the simulated operator installs it (research/realism-audit.md):
# spec.sandboxWorkloads.mode (kubevirt|kata) in the CRD and the chart's values.
SANDBOX_WORKLOADS_MODE = "sandbox-workloads-mode"
# The chart no longer renders the deprecated spec.cdi.default.
CDI_DEFAULT_KEY_DROPPED = "cdi-default-key-dropped"
# spec.cdi.nriPluginEnabled: the toolkit can inject CDI devices through an NRI plugin.
CDI_NRI_PLUGIN = "cdi-nri-plugin"
# The toolkit writes a containerd drop-in (conf.d/99-nvidia.toml) instead of editing config.toml.
RUNTIME_DROP_IN_CONFIG = "runtime-drop-in-config"
# The validator has a gdrcopy-validation init container (removed unless gdrcopy.enabled).
GDRCOPY_VALIDATION = "gdrcopy-validation"
# nvidia-fs and gdrcopy validation run inside driver-validation: no init containers of their own.
FS_VALIDATION_IN_DRIVER_VALIDATION = "fs-validation-in-driver-validation"
# The validator's main container sleeps in a loop (`while true; do sleep 86400; done`), not `sleep infinity`.
VALIDATOR_SLEEP_LOOP = "validator-sleep-loop"
# The driver's startup probe ships as a ConfigMap (nvidia-driver-startup-probe), not inline.
DRIVER_STARTUP_PROBE_CONFIGMAP = "driver-startup-probe-configmap"
# spec.cdi in the ClusterPolicy (api/v1/clusterpolicy_types.go CDIConfigSpec); before, no such field.
CDI_SPEC = "cdi-spec"
# The MIG manager labels MIG-capable nodes nvidia.com/mig.config (the config it applies) and mig.config.state.
MIG_CONFIG_LABEL = "mig-config-label"
# The chart's validator.plugin.env sets WITH_WORKLOAD=false: plugin-validation no longer runs a pod asking for one
# GPU (nvidia-device-plugin-validator); through v23.3 it was true (values.yaml).
PLUGIN_VALIDATION_NO_WORKLOAD = "plugin-validation-no-workload"
# Driver DaemonSets and their pods carry app.kubernetes.io/component=nvidia-driver; before, only app=<DaemonSet>.
# Checks find driver pods by their owning DaemonSet, so they never need this rule; the factory builds by it.
DRIVER_COMPONENT_LABEL = "driver-component-label"
# The chart's operator Deployment passes VALIDATOR_IMAGE (the validator image the operator's states use); before,
# only DRIVER_MANAGER_IMAGE (deployments/gpu-operator/templates/operator.yaml at v26.3.3 and v26.7.0).
OPERATOR_VALIDATOR_IMAGE_ENV = "operator-validator-image-env"
# state-mps-control-daemon (DaemonSet nvidia-device-plugin-mps-control-daemon) and GFD's nvidia.com/mps.capable
# label (signals.yaml: both first at v24.3.0).
MPS_CONTROL_DAEMON = "mps-control-daemon"
# The operator starts an NVIDIADriver controller whatever the ClusterPolicy says (cmd/gpu-operator/main.go): it waits
# for the nvidiadrivers.nvidia.com CRD's informer and exits without it.
NVIDIADRIVER_CONTROLLER = "nvidiadriver-controller"
# Likewise a GPUCluster controller (gpuclusters.nvidia.com, shipped in the chart's crds/ from v26.7.0).
GPUCLUSTER_CONTROLLER = "gpucluster-controller"
# The operator removes the validator's plugin-validation init container when devicePlugin.enabled=false
# (TransformValidatorComponent, controllers/object_controls.go, commit 081a96a "add filter device-plugin validate
# container"); before, plugin-validation stays and waits for a GPU resource nothing advertises.
PLUGIN_VALIDATION_FOLLOWS_DEVICE_PLUGIN = "plugin-validation-follows-device-plugin"

# What changed in which release: the rules each release brought.
RELEASES: dict[Version, tuple[str, ...]] = {
    (23, 3, 0): (CDI_SPEC, MIG_CONFIG_LABEL),
    (23, 6, 0): (PLUGIN_VALIDATION_NO_WORKLOAD,),
    (23, 9, 0): (STATUS_CONDITIONS, DRIVER_COMPONENT_LABEL, NVIDIADRIVER_CONTROLLER,
                PLUGIN_VALIDATION_FOLLOWS_DEVICE_PLUGIN),
    (24, 3, 0): (MPS_CONTROL_DAEMON,),
    (25, 10, 0): (CDI_DEFAULT_ON, VALIDATOR_IN_OPERATOR_IMAGE, SANDBOX_WORKLOADS_MODE, CDI_DEFAULT_KEY_DROPPED,
                  RUNTIME_DROP_IN_CONFIG, GDRCOPY_VALIDATION, VALIDATOR_SLEEP_LOOP, DRIVER_STARTUP_PROBE_CONFIGMAP),
    (26, 3, 0): (CDI_NRI_PLUGIN, FS_VALIDATION_IN_DRIVER_VALIDATION),
    (26, 7, 0): (NOT_READY_SEMICOLON, CLIENT_DEPLOY_LABEL, GPUCLUSTER_CONTROLLER, OPERATOR_VALIDATOR_IMAGE_ENV),
}
RULES: dict[str, Version] = {rule: release for release, rules in RELEASES.items() for rule in rules}


def parse(tag: str | None) -> Version | None:
    """'v26.3.3' / '26.3.3' / 'gpu-operator-v25.3.4' -> (26, 3, 3); None for anything that is not a release."""
    if not tag:
        return None
    t = tag.rsplit("-v", 1)[-1] if "-v" in tag else tag
    t = t.lstrip("v").split("-")[0].split("+")[0]
    parts = t.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:3]):
        return None
    nums = [int(p) for p in parts[:3]] + [0] * (3 - len(parts[:3]))
    # Image tags like 'latest' fail above; a bare '1.2' of an unrelated scheme is not an operator release.
    if nums[0] < 1:
        return None
    return (nums[0], nums[1], nums[2])


# What the simulated operator and the test factory build for a tag that is no release ('main-latest'): the newest
# behaviour. Checks never use it; they ask since(), which answers None for an unknown version.
NEWEST: Version = (99, 0, 0)


def parse_or_newest(tag: str) -> Version:
    """parse(tag), or NEWEST for a tag that is no release (the simulated operator's and factory's reading)."""
    return parse(tag) or NEWEST


def since(rule: str, version: Version | None) -> bool | None:
    """Whether `rule` holds for `version`; None when the version is unknown."""
    if version is None:
        return None
    return version >= RULES[rule]


def text(version: Version | None) -> str:
    return "v{}.{}.{}".format(*version) if version else "unknown"
