"""The GPUs a node can carry, as NVML reports them, and what GPU Feature Discovery derives from them.

Read by the simulated operator (profiles, install, nvidia-smi) and by tests/factory.py. Memory, SM and family
figures are typical `nvidia-smi` / `nvidia-smi mig -lgip` values of each product.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


def cuda_version_for_driver(driver_version: str) -> str:
    """CUDA version a driver branch reports (nvidia-smi 'CUDA Version', GFD cuda.runtime-version).

    R570 = 12.8 and R580 = 13.0 are published pairs; R595 = 13.2 is an assumption (not in the facts).
    """
    branch = int(driver_version.split(".")[0])
    if branch >= 595:
        return "13.2"
    if branch >= 580:
        return "13.0"
    if branch >= 575:
        return "12.9"
    if branch >= 570:
        return "12.8"
    return "12.4"


@dataclass(frozen=True)
class MigProfile:
    """One MIG device type as NVML reports its attributes (GFD labels nvidia.com/mig-<name>.*)."""

    name: str  # e.g. "1g.5gb"
    memory_mb: int
    multiprocessors: int
    slices_gi: int
    slices_ci: int
    engines_copy: int
    engines_decoder: int
    engines_encoder: int = 0
    engines_jpeg: int = 0
    engines_ofa: int = 0


# A100-SXM4-40GB profiles. Memory/SM figures are typical `nvidia-smi mig -lgip` values; approximate.
A100_40GB_MIG = {
    "1g.5gb": MigProfile("1g.5gb", 4864, 14, 1, 1, 1, 0),
    "2g.10gb": MigProfile("2g.10gb", 9984, 28, 2, 2, 2, 1),
    "3g.20gb": MigProfile("3g.20gb", 20096, 42, 3, 3, 3, 2),
}


@dataclass(frozen=True)
class GpuHardware:
    """The GPUs of one GPU node, as NVML would report them."""

    product: str  # GFD label value (NVML name with spaces -> '-'), e.g. NVIDIA-A100-SXM4-40GB
    name: str  # NVML / nvidia-smi name, e.g. "NVIDIA A100-SXM4-40GB"
    count: int
    memory_mib: int
    family: str
    compute_major: int
    compute_minor: int
    mig_capable: bool
    machine: str  # nvidia.com/gpu.machine (sanitised DMI product name or cloud instance type)
    # MIG devices per GPU when MIG is enabled on this node (mixed strategy): ((profile, n), ...).
    mig_layout: tuple[tuple[str, int], ...] = ()
    # mig-parted config the node is labelled with (nvidia.com/mig.config) when MIG is enabled.
    mig_config: str = "all-disabled"

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig_layout)


H100 = GpuHardware("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 8, 81559, "hopper", 9, 0, True,
                   "DGX-H100")
A100 = GpuHardware("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 8, 40960, "ampere", 8, 0, True,
                   "DGX-A100")
T4 = GpuHardware("Tesla-T4", "Tesla T4", 1, 15360, "turing", 7, 5, False, "g4dn.xlarge")
T4X4 = replace(T4, count=4, machine="g4dn.12xlarge")
# The A100 layout mig-parted's default config calls `all-balanced` (2x1g.5gb + 2g.10gb + 3g.20gb per GPU).
A100_MIG_BALANCED = replace(A100, mig_layout=(("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
                            mig_config="all-balanced")

GPU_NAMES = {hw.product: hw.name for hw in (H100, A100, T4)}


# The catalogue by GFD product label (nvidia.com/gpu.product).
BY_PRODUCT: dict[str, GpuHardware] = {hw.product: hw for hw in (H100, A100, T4)}
