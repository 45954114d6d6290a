"""Simulated GPU Operator installs: which operator version, which ClusterPolicy switches, which hardware.

A Profile describes one cluster as a real admin would have set it up (Helm values + the GPU nodes'
hardware and host driver). `install.py` turns a Profile into the objects a real install consists of;
`reconcile.py` brings them up on kwok nodes. Versions and defaults come from
shared/docs/gpu-operator-facts.md §0 (Helm defaults per operator tag); nothing here is invented
except the hardware mix of each profile, which is a plausible cluster, not a measured one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_conformance import versions
from gpu_conformance.gpu_operator.hardware import (
    A100,
    A100_MIG_BALANCED,
    H100,
    T4,
    T4X4,
    GpuHardware,
    cuda_version_for_driver,
)
from gpu_conformance.gpu_operator.releases import ComponentVersions, components_for
from gpu_conformance.versions import parse_or_newest


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    operator_version: str = "v26.3.3"
    # ClusterPolicy switches (Helm values). None = the Helm default of that operator version.
    driver_enabled: bool = True
    toolkit_enabled: bool = True
    device_plugin_enabled: bool = True
    gfd_enabled: bool = True
    dcgm_exporter_enabled: bool = True
    dcgm_enabled: bool = False  # Helm default false (the Go default would be true)
    node_status_exporter_enabled: bool = False
    mig_manager_enabled: bool = True
    # nfd.enabled (Helm): the NFD sub-chart. Off, the nodes still carry NFD's labels (put there another way).
    nfd_enabled: bool = True
    cdi_enabled: bool | None = None
    nri_plugin_enabled: bool = False
    mig_strategy: str = "single"
    # GPUDirect Storage / GDRCopy (Helm default off). Before v26.3 they add validator init containers.
    gds_enabled: bool = False
    gdrcopy_enabled: bool = False
    # devicePlugin.config: time-slicing replicas of nvidia.com/gpu (None = no config, no config-manager).
    time_slicing_replicas: int | None = None
    time_slicing_config_name: str = "time-slicing-config-all"
    # Hardware of gpu-node-0, gpu-node-1, ...; the last entry repeats for further nodes.
    gpu_hardware: tuple[GpuHardware, ...] = (H100,)
    # A driver installed on the GPU nodes' host OS (not by the operator).
    host_driver: bool = False
    host_driver_version: str = ""
    container_runtime: str = "containerd://2.2.1"
    os_id: str = "ubuntu"
    os_version_id: str = "22.04"
    os_image: str = "Ubuntu 22.04.5 LTS"
    kernel_version: str = "5.15.0-153-generic"
    # How pods get GPUs: "device-plugin" (ClusterPolicy + device plugin), "dra-driver" (ClusterPolicy with the
    # device plugin off and NVIDIA's DRA driver publishing ResourceSlices) or "gpucluster" (the GPUCluster CR of
    # v26.7.0: DRA driver, no ClusterPolicy, no toolkit/validator/device plugin/GFD; the driver is the host's).
    resource_model: str = "device-plugin"
    # draDriver.computeDomains.enabled (chart default true): the compute-domain controller Deployment, the kubelet
    # plugin's compute-domains container and the compute-domain DeviceClasses.
    compute_domains: bool = False
    # What the profile's cluster legitimately lacks, for the report of expected n/a verdicts.
    lacks: tuple[str, ...] = field(default_factory=tuple)

    # ---- derived facts ------------------------------------------------------------------
    @property
    def components(self) -> ComponentVersions:
        return components_for(self.operator_version)

    @property
    def version(self) -> tuple[int, int, int]:
        return parse_or_newest(self.operator_version)

    @property
    def cdi(self) -> bool:
        """cdi.enabled as installed: the Helm default of the profile's release unless the profile sets it."""
        if self.cdi_enabled is not None:
            return self.cdi_enabled
        return bool(versions.since(versions.CDI_DEFAULT_ON, self.version))

    @property
    def nri(self) -> bool:
        # NRI mode needs CDI and the toolkit, and exists from v26.3.
        return (self.nri_plugin_enabled and self.cdi and self.toolkit_enabled
                and bool(versions.since(versions.CDI_NRI_PLUGIN, self.version)))

    @property
    def driver_version(self) -> str:
        """The driver the GPUs run: the host's if one is installed, else the operator's container."""
        return self.host_driver_version if self.host_driver else self.components.driver

    @property
    def cuda_version(self) -> str:
        return cuda_version_for_driver(self.driver_version)

    @property
    def driver_pre_installed(self) -> bool:
        """driver.enabled left on with a host driver: k8s-driver-manager labels nodes pre-installed."""
        return self.driver_enabled and self.host_driver

    @property
    def driver_pods_expected(self) -> bool:
        return self.driver_enabled and not self.host_driver

    @property
    def dra(self) -> bool:
        """GPUs are published as ResourceSlices by the DRA driver's kubelet plugin."""
        return self.resource_model != "device-plugin"

    @property
    def has_clusterpolicy(self) -> bool:
        return self.resource_model != "gpucluster"

    def hardware_for(self, index: int) -> GpuHardware:
        return self.gpu_hardware[min(index, len(self.gpu_hardware) - 1)]


PROFILES: dict[str, Profile] = {}


def _add(p: Profile) -> None:
    PROFILES[p.name] = p


_add(Profile(
    "default",
    "GPU Operator v26.3.3 with Helm defaults: operator-managed driver container, CDI on, H100 nodes. "
    "Every layer passes.",
    lacks=("nvidia-dcgm (dcgm.enabled=false, Helm default)",
           "nvidia-node-status-exporter (disabled by default)",
           "nvidia-device-plugin-mps-control-daemon pods (no node is nvidia.com/mps.capable)"),
))
_add(Profile(
    "host-driver",
    "The field note's cluster: v26.3.3, driver.enabled=false with the driver installed on the host, "
    "MIG manager off, T4 nodes. No nvidia-driver-daemonset exists at all.",
    driver_enabled=False, mig_manager_enabled=False, gpu_hardware=(T4,),
    host_driver=True, host_driver_version="580.95.05",
    lacks=("nvidia-driver-daemonset and driver pods: driver checks are n/a",
           "nvidia-mig-manager (migManager.enabled=false; T4 is not MIG-capable anyway)"),
))
_add(Profile(
    "preinstalled-driver",
    "v26.3.3, driver.enabled left on but a host driver is present: k8s-driver-manager labelled the "
    "nodes nvidia.com/gpu.deploy.driver=pre-installed, so the driver DaemonSet exists with 0 pods.",
    gpu_hardware=(A100,), host_driver=True, host_driver_version="570.195.03",
    lacks=("driver pods (DaemonSet nvidia-driver-daemonset has desiredNumberScheduled 0)",),
))
_add(Profile(
    "v25.3-no-cdi",
    "v25.3.4 with its Helm defaults (cdi.enabled=false: the toolkit makes `nvidia` containerd's default "
    "runtime and the device plugin passes GPUs by envvar) plus gds.enabled=true, so the validator runs "
    "v25.3's nvidia-fs-validation and the driver pod an nvidia-fs-ctr.",
    operator_version="v25.3.4", gpu_hardware=(T4X4,), gds_enabled=True,
    lacks=("RuntimeClasses nvidia-cdi and nvidia-legacy (CDI off)",
           "native CDI injection: workloads get GPUs through the nvidia default runtime"),
))
_add(Profile(
    "v25.3",
    "v25.3.4 with exactly the Helm defaults of its chart (the one the real operator's Go module ships, "
    "rendered by sim/operator/chart.py): what `--operator=real` runs, and the hand-written operator's side of the "
    "differential test. H100 nodes, so GFD's mig.capable makes the operator deploy mig-manager.",
    operator_version="v25.3.4",
    lacks=("RuntimeClasses nvidia-cdi and nvidia-legacy (CDI off)",),
))
_add(Profile(
    "kind-cdi",
    "v25.3.4 as the kind tier's CDI path installs it (sim/kind/operator.py clusterpolicy(\"cdi\")): "
    "driver.enabled=false on nodes with the driver on the host, the operator's container toolkit with cdi.enabled "
    "and cdi.default, "
    "GFD, DCGM exporter, MIG manager and node status exporter off, nfd.enabled=false (the tier labels the nodes as "
    "NFD would). The simulated side of the bring-up comparison "
    "(tests/test_bringup_order.py) runs the real operator with this profile and the kind tier's ClusterPolicy.",
    operator_version="v25.3.4", driver_enabled=False, gfd_enabled=False, dcgm_exporter_enabled=False,
    mig_manager_enabled=False, node_status_exporter_enabled=False, cdi_enabled=True, nfd_enabled=False,
    host_driver=True, host_driver_version=PROFILES["default"].driver_version,
    lacks=("nvidia-driver-daemonset (driver.enabled=false: the host's driver)",
           "gpu-feature-discovery, nvidia-dcgm-exporter, nvidia-mig-manager (switched off as on the kind tier)"),
))
_add(Profile(
    "mig-mixed",
    "v26.3.3 with mig.strategy=mixed: gpu-node-0 is an A100 node partitioned all-balanced and "
    "advertises nvidia.com/mig-1g.5gb, -2g.10gb, -3g.20gb; other GPU nodes are H100 with MIG disabled.",
    mig_strategy="mixed", gpu_hardware=(A100_MIG_BALANCED, H100),
    lacks=("nvidia.com/gpu on gpu-node-0 (all its GPUs are MIG-enabled)",),
))
_add(Profile(
    "time-slicing",
    "v26.3.3 with a device-plugin config sharing every GPU 4 ways by time-slicing (T4x4 nodes: "
    "nvidia.com/gpu 16 per node, product Tesla-T4-SHARED).",
    time_slicing_replicas=4, gpu_hardware=(T4X4,), mig_manager_enabled=True,
))
_add(Profile(
    "cdi-nri",
    "v26.3.3 with cdi.nriPluginEnabled=true: the toolkit runs an NRI plugin, no RuntimeClasses are "
    "created and operands carry NRI CDI annotations instead of runtimeClassName.",
    nri_plugin_enabled=True,
    lacks=("RuntimeClasses (NRI mode deletes them)",),
))
_add(Profile(
    "v26.7",
    "v26.7.0 (latest) with Helm defaults: driver 595.91.07, nodes also carry nvidia.com/gpu.deploy.client.",
    operator_version="v26.7.0",
))


_add(Profile(
    "dra-driver",
    "v26.7.0 with devicePlugin.enabled=false and NVIDIA's DRA driver for GPUs installed beside it from its own Helm "
    "chart (nvidia-dra-driver-gpu v25.8.1 in namespace nvidia-dra-driver-gpu: DaemonSet "
    "nvidia-dra-driver-gpu-kubelet-plugin, DeviceClasses gpu.nvidia.com and mig.nvidia.com): GPUs are ResourceSlices "
    "of driver gpu.nvidia.com, requested through ResourceClaims (sim/operator/dra.py).",
    operator_version="v26.7.0", device_plugin_enabled=False, resource_model="dra-driver",
    lacks=("nvidia-device-plugin-daemonset and nvidia.com/gpu resources (GPUs are claimed through DRA)",),
))
_add(Profile(
    "gpucluster",
    "v26.7.0 with gpuCluster.deployCR=true and clusterPolicy.deployCR=false (tech preview): a GPUCluster CR, no "
    "ClusterPolicy; the operator runs the DRA driver's kubelet plugin on nodes labelled "
    "nvidia.com/gpu.deploy.dra-driver; the driver is installed on the hosts (GPUCluster does not manage it).",
    operator_version="v26.7.0", resource_model="gpucluster", driver_enabled=False, toolkit_enabled=False,
    device_plugin_enabled=False, gfd_enabled=False, dcgm_exporter_enabled=False, mig_manager_enabled=False,
    host_driver=True, host_driver_version="595.91.07", compute_domains=True,
    lacks=("ClusterPolicy and all its operands (toolkit, validator, device plugin, GFD, MIG manager)",
           "GFD labels (no GFD in the GPUCluster stack)", "dcgm-exporter (left off in this profile)"),
))


def get_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise KeyError(f"unknown sim profile {profile!r}; known: {', '.join(PROFILES)}") from None
