"""What NVIDIA tools print on a simulated node: `nvidia-smi -L`, the nvidia-smi header, the probe's output.

UUIDs are derived from the node name and GPU index, so the same simulated GPU has the same UUID in
every run and in every place it appears (probe output, NVIDIA_VISIBLE_DEVICES, logs).
"""

from __future__ import annotations

import hashlib

from gpu_conformance.gpu_operator.hardware import GPU_NAMES, GpuHardware
from gpu_conformance.sim.profiles.catalogue import Profile, get_profile

PROBE_NODE_DEFAULT = "gpu-node-0"


def _uuid_hex(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuid(node: str, index: int) -> str:
    return "GPU-" + _uuid_hex(f"{node}/gpu/{index}")


def mig_uuid(node: str, gpu_index: int, mig_index: int) -> str:
    return "MIG-" + _uuid_hex(f"{node}/gpu/{gpu_index}/mig/{mig_index}")


def gpu_name(product: str) -> str:
    """NVML device name for a GFD product label ('NVIDIA-A100-SXM4-40GB' -> 'NVIDIA A100-SXM4-40GB')."""
    base = product.removesuffix("-SHARED")
    return GPU_NAMES.get(base, product)


def nvidia_smi_L(product: str, uuids: list[str],
                 mig_devices: list[list[tuple[str, str]]] | None = None) -> str:
    """`nvidia-smi -L`: one line per GPU, its MIG devices indented below it.

    mig_devices[i] lists (profile, MIG-uuid) of GPU i. nvidia-smi pads the profile to 12 columns and the
    device index to 2 ("  MIG 1g.5gb      Device  0: (UUID: MIG-...)").
    """
    name = gpu_name(product)
    lines = []
    for i, uuid in enumerate(uuids):
        lines.append(f"GPU {i}: {name} (UUID: {uuid})")
        for j, (profile, muuid) in enumerate((mig_devices or [])[i] if mig_devices and i < len(mig_devices)
                                             else []):
            lines.append(f"  MIG {profile:<12}Device {j:>2}: (UUID: {muuid})")
    return "\n".join(lines) + "\n"


def node_nvidia_smi_L(node: str, hw: GpuHardware) -> str:
    """`nvidia-smi -L` run on the host (or in a privileged pod seeing all GPUs) of a simulated node."""
    uuids = [gpu_uuid(node, i) for i in range(hw.count)]
    migs = None
    if hw.mig_enabled:
        migs = []
        for i in range(hw.count):
            # nvidia-smi lists the larger instances first (they occupy the lower placements).
            profiles = sorted((p for p, n in hw.mig_layout for _ in range(n)),
                              key=lambda p: -int(p.split("g.")[0]))
            migs.append([(p, mig_uuid(node, i, j)) for j, p in enumerate(profiles)])
    return nvidia_smi_L(hw.product, uuids, migs)


def nvidia_smi_header(driver_version: str, cuda_version: str) -> str:
    """The first lines of plain `nvidia-smi` (what the validator's driver/toolkit checks print)."""
    bar = "+" + "-" * 89 + "+"
    inner = f" NVIDIA-SMI {driver_version:<23}Driver Version: {driver_version:<15}CUDA Version: {cuda_version:<8}"
    return f"{bar}\n|{inner:<89}|\n{bar}\n"


def probe_node(profile: Profile) -> tuple[str, GpuHardware]:
    """Where a probe asking for nvidia.com/gpu: 1 lands: the first GPU node advertising nvidia.com/gpu."""
    for i, hw in enumerate(profile.gpu_hardware):
        if not hw.mig_enabled or profile.mig_strategy == "single":
            return f"gpu-node-{i}", hw
    return PROBE_NODE_DEFAULT, profile.gpu_hardware[-1]


def _probe_text(product: str, uuids: list[str], minors: list[int], visible: str) -> str:
    # `ls -1 /dev/nvidia*` in the C locale: '-' < digits < letters.
    devices = sorted(["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                      *(f"/dev/nvidia{i}" for i in minors)])
    lines = ["== nvidia-smi -L", nvidia_smi_L(product, uuids).rstrip("\n"), "rc=0",
             "== env", f"NVIDIA_VISIBLE_DEVICES={visible}",
             "== devices", *devices,
             "== cdi", "== end"]
    return "\n".join(lines) + "\n"


def claim_probe_output(product: str, devices: list[tuple[int, str]]) -> str:
    """What the probe container of a pod with a ResourceClaim prints: the allocated GPUs only, as (minor, uuid).

    The DRA kubelet plugin hands devices over through CDI alone (its spec sets NVIDIA_VISIBLE_DEVICES=void and
    adds /dev/nvidia<minor>); nvidia-smi inside numbers the visible GPUs from 0.
    """
    return _probe_text(product, [u for _, u in devices], [m for m, _ in devices], "void")


def probe_output(profile: str | Profile, gpus: int = 1) -> str:
    """What the conformance probe container prints on a healthy cluster of this profile.

    The probe requests `gpus` units of nvidia.com/gpu and runs `nvidia-smi -L`, prints
    NVIDIA_VISIBLE_DEVICES, lists /dev/nvidia* and /var/run/cdi. Under CDI (v25.10+) the CDI spec sets
    NVIDIA_VISIBLE_DEVICES=void; under the v25.3 envvar strategy the device plugin passes GPU UUIDs. The
    container only sees the GPUs it was allocated, so a time-sliced node still shows 1 GPU. The CDI spec
    directory is on the host, not in the container: that section stays empty.
    """
    p = get_profile(profile)
    node, hw = probe_node(p)
    uuids = [gpu_uuid(node, i) for i in range(gpus)]
    visible = "void" if p.cdi else ",".join(uuids)
    return _probe_text(hw.product, uuids, list(range(gpus)), visible)
