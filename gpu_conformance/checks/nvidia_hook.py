"""A runtime refusal in which the NVIDIA hook speaks for the driver, not for the runtime's configuration.

When kubelet reports CreateContainerError / RunContainerError / StartError for a GPU container, the runtime ran
NVIDIA's prestart hook (nvidia-container-cli, legacy mode) and quotes its stderr. Some of those words mean the
runtime is configured and working, and the driver behind it failed the hook's request — the node's GPU or
driver is the cause. The error names are the hook's (`initialization error` / `detection error`, then the
driver-side `driver error`, `driver rpc error`, `nvml error`) with NVML's return names after them (NVML
nvmlReturn_t: ERROR_DRIVER_NOT_LOADED, ERROR_LIB_RM_VERSION_MISMATCH "driver/library version mismatch").
What they mean in the field: a hook that timed out waiting for the driver was a GPU in an error state in
NVIDIA/gpu-operator#523 (the maintainer's diagnosis), and NVIDIA/nvidia-container-toolkit#202 recommends
nvidia-persistenced so the driver stays initialised between clients.
"""

from __future__ import annotations

HINT_DRIVER_SIDE = ("The NVIDIA hook could not get the GPUs from the driver: run `nvidia-smi` on the node (its error "
                    "and exit status name the fault) and read dmesg for XID errors; a GPU in an error state needs a "
                    "reset or replacement, a driver/library mismatch a module reload or reboot.")

# (words in the hook's message, lower case) → what they say about the node. First match wins.
_DRIVER_SIDE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("driver error: timed out", "driver rpc error: timed out"),
     "the NVIDIA driver did not answer the runtime's hook in time (nvidia-container-cli timed out): a GPU in an "
     "error state (nvidia-smi and dmesg/XID on the node) or a driver not kept initialised (nvidia-persistenced)"),
    (("driver/library version mismatch",),
     "the NVIDIA kernel module loaded on the node and the driver's libraries differ (a driver changed without "
     "reloading the module: reload it or reboot the node)"),
    (("nvml error: driver not loaded",),
     "the NVIDIA kernel module is not loaded on the node"),
    (("libnvidia-ml.so",),
     "the hook cannot load the driver's NVML library (libnvidia-ml.so.1) under its driver root: the driver is not "
     "installed where the toolkit looks"),
)


def driver_side_refusal(message: str) -> str | None:
    """What a refusal quoting nvidia-container-cli says about the driver; None when it is not the driver's."""
    low = message.lower()
    if "nvidia-container-cli" not in low:
        return None
    for words, meaning in _DRIVER_SIDE:
        if any(w in low for w in words):
            return f"{meaning} — the container runtime itself is configured"
    return None
