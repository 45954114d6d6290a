"""What a GPU Operator install consists of: operands, their DaemonSets, labels and switches.

Facts from the GPU Operator's manifests (assets/*/0*_daemonset.yaml, state_manager.go, clusterpolicy_types.go);
see ../shared/docs/gpu-operator-facts.md §1c, §2b, §3. Both the checks and the simulated operator read
this table, so the simulation cannot drift from what the checks expect without a test noticing.
"""

from __future__ import annotations

from dataclasses import dataclass

DEPLOY_PREFIX = "nvidia.com/gpu.deploy."


@dataclass(frozen=True)
class Operand:
    key: str                  # short name used in messages and deploy labels
    daemonset: str            # DaemonSet name (also the pod `app` label)
    spec_field: str | None    # ClusterPolicy spec field with `.enabled`; None = always on
    default_enabled: bool     # the operator's Go default when the field is absent
    deploy_label: str         # nodeSelector key with value "true"
    # Init containers of the operand's pod, in order (the gate on the validator chain).
    init_containers: tuple[str, ...] = ()
    # Only MIG-capable nodes carry this deploy label.
    mig_only: bool = False
    # The operator's state name for it, as in ClusterPolicy status "states not ready: [...]".
    state: str = ""

    @property
    def app(self) -> str:
        return self.daemonset


DRIVER = Operand("driver", "nvidia-driver-daemonset", "driver", True, DEPLOY_PREFIX + "driver",
                 ("k8s-driver-manager",), state="state-driver")
TOOLKIT = Operand("container-toolkit", "nvidia-container-toolkit-daemonset", "toolkit", True,
                  DEPLOY_PREFIX + "container-toolkit", ("driver-validation",), state="state-container-toolkit")
VALIDATOR = Operand("operator-validator", "nvidia-operator-validator", None, True,
                    DEPLOY_PREFIX + "operator-validator",
                    ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
                    state="state-operator-validation")
DEVICE_PLUGIN = Operand("device-plugin", "nvidia-device-plugin-daemonset", "devicePlugin", True,
                        DEPLOY_PREFIX + "device-plugin", ("toolkit-validation",), state="state-device-plugin")
GFD = Operand("gpu-feature-discovery", "gpu-feature-discovery", "gfd", True,
              DEPLOY_PREFIX + "gpu-feature-discovery", ("toolkit-validation",), state="gpu-feature-discovery")
DCGM_EXPORTER = Operand("dcgm-exporter", "nvidia-dcgm-exporter", "dcgmExporter", True,
                        DEPLOY_PREFIX + "dcgm-exporter", ("toolkit-validation",), state="state-dcgm-exporter")
DCGM = Operand("dcgm", "nvidia-dcgm", "dcgm", True, DEPLOY_PREFIX + "dcgm", ("toolkit-validation",), state="state-dcgm")
MIG_MANAGER = Operand("mig-manager", "nvidia-mig-manager", "migManager", True, DEPLOY_PREFIX + "mig-manager",
                      ("toolkit-validation",), mig_only=True, state="state-mig-manager")
NODE_STATUS_EXPORTER = Operand("node-status-exporter", "nvidia-node-status-exporter", "nodeStatusExporter", False,
                               DEPLOY_PREFIX + "node-status-exporter", state="state-node-status-exporter")

# Operands of the default `container` workload config, in the operator's reconcile order.
OPERANDS: tuple[Operand, ...] = (
    DRIVER, TOOLKIT, VALIDATOR, DEVICE_PLUGIN, DCGM, DCGM_EXPORTER, GFD, MIG_MANAGER, NODE_STATUS_EXPORTER,
)

def _state_operands() -> dict[str, Operand]:
    """Every operator state that owns a DaemonSet, in any release (state_manager.go addState lists), by name.

    The `container` operands above come first; the others (MPS control daemon from v24.3, the sandbox and vGPU
    states, kata, CC manager) come from the signal inventory, so a not-ready state is mapped to its DaemonSet and
    nodes whichever workload config runs. No later layer judges those per node: OPR-003 does.
    """
    from gpu_conformance import inventory

    out = {o.state: o for o in OPERANDS}
    for row in inventory.load().of_kind("daemonset"):
        if row.state and row.state not in out:
            out[row.state] = Operand(row.name, row.name, None, False,
                                     row.node_selector[0] if row.node_selector else "", state=row.state)
    return out


BY_STATE: dict[str, Operand] = _state_operands()


def known_state(name: str) -> bool:
    """Whether some operator release has a state of this name (with or without a DaemonSet of its own)."""
    from gpu_conformance import inventory

    return name in BY_STATE or any(r.name == name for r in inventory.load().of_kind("operator-state"))

# Deploy labels every GPU node carries in the `container` workload config (the field note's 8),
# plus `client` from v26.7 and `mig-manager` on MIG-capable nodes.
BASE_DEPLOY_LABELS = tuple(DEPLOY_PREFIX + k for k in (
    "driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm", "dcgm-exporter",
    "node-status-exporter", "operator-validator",
))
CLIENT_DEPLOY_LABEL = DEPLOY_PREFIX + "client"
MIG_DEPLOY_LABEL = DEPLOY_PREFIX + "mig-manager"

# Driver pods of every flavour (ClusterPolicy, precompiled, OpenShift DTK, NVIDIADriver CR) carry this.
DRIVER_COMPONENT_LABEL = ("app.kubernetes.io/component", "nvidia-driver")
OPERATOR_POD_LABEL = ("app", "gpu-operator")
# The device plugin DaemonSet's plugin container: its env (DEVICE_LIST_STRATEGY) says how GPUs are injected.
DEVICE_PLUGIN_CONTAINER = "nvidia-device-plugin"
OPERATOR_DEPLOYMENT = "gpu-operator"
CUDA_VALIDATOR_APP = "nvidia-cuda-validator"
# The test pod plugin-validation creates when WITH_WORKLOAD=true: bound to the node (spec.nodeName, past the
# scheduler), asking for one GPU; kubelet refuses it (UnexpectedAdmissionError) when no GPU is free.
PLUGIN_VALIDATOR_APP = "nvidia-device-plugin-validator"
CLUSTERPOLICY_CRD = "clusterpolicies.nvidia.com"
NVIDIADRIVER_CRD = "nvidiadrivers.nvidia.com"
# Shipped in the chart's crds/ from v26.7.0; the suite reads GPUCluster objects, not this CRD.
GPUCLUSTER_CRD = "gpuclusters.nvidia.com"

# Validator init containers that exist only on some versions (v24.9–v25.10); allowed, never required.
VALIDATOR_OPTIONAL_INITS = ("nvidia-fs-validation", "gdrcopy-validation")
VALIDATOR_CHAIN = VALIDATOR.init_containers


def operand_enabled(operand: Operand, spec: dict) -> bool:
    """Whether the ClusterPolicy spec enables an operand (driver: unless the NVIDIADriver CRD manages it)."""
    if operand.spec_field is None:
        return True
    section = spec.get(operand.spec_field) or {}
    enabled = section.get("enabled")
    on = operand.default_enabled if enabled is None else bool(enabled)
    if operand is DRIVER and section.get("useNvidiaDriverCRD"):
        return False
    return on


def expected_deploy_labels(operator_version: str | tuple[int, int, int] | None,
                           mig_capable: bool) -> tuple[str, ...]:
    """Deploy labels every version writes, plus the version's own; an unknown version is held to the common set."""
    from gpu_conformance import versions

    if isinstance(operator_version, str):
        operator_version = versions.parse(operator_version)
    labels = list(BASE_DEPLOY_LABELS)
    if versions.since(versions.CLIENT_DEPLOY_LABEL, operator_version):
        labels.append(CLIENT_DEPLOY_LABEL)
    if mig_capable:
        labels.append(MIG_DEPLOY_LABEL)
    return tuple(labels)


# gpuClusterStateLabels (controllers/state_manager.go, v26.7.0): the deploy labels of the GPUCluster stack.
GPUCLUSTER_DEPLOY_LABELS = ("nvidia.com/gpu.deploy.driver", "nvidia.com/gpu.deploy.dra-driver",
                            "nvidia.com/gpu.deploy.dra-validator", "nvidia.com/gpu.deploy.dcgm-dra",
                            "nvidia.com/gpu.deploy.dcgm-exporter-dra")

# The ClusterPolicy switches a report shows, in the order people ask about them: label -> spec path.
POLICY_SWITCHES = {
    "driver": ("driver", "enabled"), "driver CRD": ("driver", "useNvidiaDriverCRD"),
    "toolkit": ("toolkit", "enabled"), "device plugin": ("devicePlugin", "enabled"), "GFD": ("gfd", "enabled"),
    "DCGM exporter": ("dcgmExporter", "enabled"), "DCGM": ("dcgm", "enabled"),
    "MIG manager": ("migManager", "enabled"), "MIG strategy": ("mig", "strategy"),
    "CDI": ("cdi", "enabled"), "CDI NRI plugin": ("cdi", "nriPluginEnabled"),
    "sandbox workloads": ("sandboxWorkloads", "enabled"),
}
