"""What a GPU node shows once the operator labelled it and its operands run: the operator's and the MIG
manager's labels (facts §2), GPU Feature Discovery's (facts §5; k8s-device-plugin internal/lm) and the extended
resources the device plugin advertises (facts §6a).

Read by the simulated operator (sim/operator/install.py) and tests/factory.py: both follow from the node's hardware, the
driver it runs, the operator release and the device plugin's sharing and MIG settings.
"""

from __future__ import annotations

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.cluster.snapshot import GPU_PRESENT_LABEL, GPU_RESOURCE, MIG_RESOURCE_PREFIX
from gpu_conformance.gpu_operator.hardware import A100_40GB_MIG, GpuHardware, MigProfile, cuda_version_for_driver
from gpu_conformance.versions import Version


def gfd_labels(hw: GpuHardware, driver_version: str, operator_version: Version, mig_strategy: str,
               replicas: int, timestamp: int, *, rename_shared: bool = False) -> dict[str, str]:
    """GFD's labels for `hw` running `driver_version`; replicas: time-slicing replicas (1 = no sharing);
    rename_shared: the sharing config's renameByDefault, which keeps the product name without -SHARED."""
    parts = driver_version.split(".")
    cuda = cuda_version_for_driver(driver_version)
    cuda_major, cuda_minor = cuda.split(".")
    labels = {
        "nvidia.com/cuda.driver.major": parts[0], "nvidia.com/cuda.driver.minor": parts[1],
        "nvidia.com/cuda.driver.rev": parts[2] if len(parts) > 2 else "",
        "nvidia.com/cuda.driver-version.major": parts[0], "nvidia.com/cuda.driver-version.minor": parts[1],
        "nvidia.com/cuda.driver-version.revision": parts[2] if len(parts) > 2 else "",
        "nvidia.com/cuda.driver-version.full": driver_version,
        "nvidia.com/cuda.runtime.major": cuda_major, "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.major": cuda_major, "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/gfd.timestamp": str(timestamp),
        "nvidia.com/gpu.machine": hw.machine,
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": str(hw.mig_capable).lower(),
        "nvidia.com/mps.capable": "false",
        "nvidia.com/vgpu.present": "false",
    }
    if not versions.since(versions.MPS_CONTROL_DAEMON, operator_version):
        del labels["nvidia.com/mps.capable"]   # GFD labels MPS capability with the MPS control daemon's release
    shared = replicas > 1
    # Full-GPU labels. MIG-enabled GPUs are labelled without sharing (replicas 0), like GFD does.
    suffix = "-SHARED" if shared and not hw.mig_enabled and not rename_shared else ""
    labels.update({
        "nvidia.com/gpu.product": hw.product + suffix,
        "nvidia.com/gpu.count": str(hw.count),
        "nvidia.com/gpu.replicas": "0" if hw.mig_enabled else str(replicas),
        "nvidia.com/gpu.sharing-strategy": "time-slicing" if shared and not hw.mig_enabled else "none",
        "nvidia.com/gpu.memory": str(hw.memory_mib),
        "nvidia.com/gpu.family": hw.family,
        "nvidia.com/gpu.compute.major": str(hw.compute_major),
        "nvidia.com/gpu.compute.minor": str(hw.compute_minor),
    })
    if mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig_strategy
    if hw.mig_enabled and mig_strategy == "mixed":
        for name, per_gpu in hw.mig_layout:
            labels.update(_mig_labels(f"{MIG_RESOURCE_PREFIX}{name}", hw, A100_40GB_MIG[name], per_gpu * hw.count))
    elif hw.mig_enabled and mig_strategy == "single":
        name, per_gpu = hw.mig_layout[0]
        labels.update(_mig_labels(GPU_RESOURCE, hw, A100_40GB_MIG[name], per_gpu * hw.count))
    return labels


def _mig_labels(resource: str, hw: GpuHardware, mig: MigProfile, count: int) -> dict[str, str]:
    attrs = {"count": count, "replicas": 1, "sharing-strategy": "none", "product": f"{hw.product}-MIG-{mig.name}",
             "memory": mig.memory_mb, "multiprocessors": mig.multiprocessors, "slices.gi": mig.slices_gi,
             "slices.ci": mig.slices_ci, "engines.copy": mig.engines_copy, "engines.decoder": mig.engines_decoder,
             "engines.encoder": mig.engines_encoder, "engines.jpeg": mig.engines_jpeg, "engines.ofa": mig.engines_ofa}
    return {f"{resource}.{k}": str(v) for k, v in attrs.items()}


def device_plugin_resources(hw: GpuHardware, mig_strategy: str, replicas: int, *,
                            rename_shared: bool = False) -> dict[str, str]:
    """Extended resources the device plugin registers with kubelet for the node; rename_shared: time-slicing
    with renameByDefault advertises nvidia.com/gpu.shared instead of nvidia.com/gpu."""
    if hw.mig_enabled and mig_strategy == "mixed":
        return {f"{MIG_RESOURCE_PREFIX}{name}": str(n * hw.count) for name, n in hw.mig_layout}
    if hw.mig_enabled and mig_strategy == "single":
        return {GPU_RESOURCE: str(sum(n for _, n in hw.mig_layout) * hw.count)}
    name = f"{GPU_RESOURCE}.shared" if rename_shared and replicas > 1 else GPU_RESOURCE
    return {name: str(hw.count * replicas)}


def operator_node_labels(operator_version: Version | str, hw: GpuHardware, *, mig_manager: bool,
                         driver_pre_installed: bool, driver_pods: bool) -> dict[str, str]:
    """Labels the operator puts on a GPU node of the ClusterPolicy stack: gpu.present, the deploy labels, the MIG
    config request. driver_pre_installed: k8s-driver-manager found a working host driver; driver_pods: the
    operator's driver container runs here (its upgrade controller labels the node)."""
    labels = {GPU_PRESENT_LABEL: "true"}
    for key in op.expected_deploy_labels(operator_version, hw.mig_capable):
        labels[key] = "true"
    if driver_pre_installed:
        # k8s-driver-manager found a working host driver and disabled the driver container here.
        labels[op.DRIVER.deploy_label] = "pre-installed"
    if _mig_configured(operator_version, hw, mig_manager):
        labels["nvidia.com/mig.config"] = hw.mig_config
    if driver_pods:
        labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
    return labels


def mig_manager_labels(operator_version: Version | str, hw: GpuHardware, mig_manager: bool) -> dict[str, str]:
    """mig-manager reports the applied config on the nodes it runs on."""
    return {"nvidia.com/mig.config.state": "success"} if _mig_configured(operator_version, hw, mig_manager) else {}


def _mig_configured(operator_version: Version | str, hw: GpuHardware, mig_manager: bool) -> bool:
    v = versions.parse_or_newest(operator_version) if isinstance(operator_version, str) else operator_version
    return mig_manager and hw.mig_capable and bool(versions.since(versions.MIG_CONFIG_LABEL, v))
