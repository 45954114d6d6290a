"""DRV-006: a runtime refusal quoting the NVIDIA hook's driver-side error names the driver, not the runtime's
configuration (checks/nvidia_hook.py)."""

from __future__ import annotations

import pytest
from check_runner import N1
from check_runner import only_node as assert_only_node_fails
from factory import crash_container, healthy_snapshot, pod_for, stuck_init

from gpu_conformance.checks import driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.checks.nvidia_hook import driver_side_refusal

GFD = "gpu-feature-discovery"
VALIDATOR = "nvidia-operator-validator"
RUNTIME = "the container runtime on this node cannot create it"
HOOK = ("failed to create containerd task: OCI runtime create failed: runc create failed: unable to start container "
        "process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , "
        "stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: {}")


@pytest.mark.parametrize(("version", "error", "words"), [
    ("v23.3.2", "detection error: driver error: timed out: unknown", ["driver did not answer", "error state"]),
    ("v22.9.2", "initialization error: driver rpc error: timed out: unknown", ["driver did not answer"]),
    ("v24.3.0", "initialization error: nvml error: driver/library version mismatch: unknown",
     ["kernel module", "reboot"]),
    ("v25.10.1", "initialization error: nvml error: driver not loaded: unknown", ["not loaded"]),
    ("v26.3.3", "initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: "
                "no such file or directory: unknown", ["libnvidia-ml.so.1"]),
])
def test_a_driver_side_hook_error_names_the_driver(version, error, words):
    snap = healthy_snapshot(version)
    crash_container(pod_for(snap, GFD, N1), GFD, "RunContainerError", restarts=5, snapshot=snap,
                    message=HOOK.format(error))
    f = assert_only_node_fails("DRV-006", snap)
    assert RUNTIME not in f.message and "container runtime itself is configured" in f.message
    assert all(w in f.message for w in words), f.message
    assert "nvidia-smi" in f.hint


def test_an_init_container_refused_with_a_driver_error_reads_the_same():
    snap = healthy_snapshot("v24.3.0")
    stuck_init(pod_for(snap, VALIDATOR, N1), "toolkit-validation", "CreateContainerError", restarts=3,
               snapshot=snap, message=HOOK.format("initialization error: nvml error: driver/library version "
                                                  "mismatch: unknown"))
    f = assert_only_node_fails("DRV-006", snap)
    assert "kernel module" in f.message and RUNTIME not in f.message


@pytest.mark.parametrize("message", [
    "container create failed: error executing hook `/usr/local/nvidia/toolkit/nvidia-container-runtime-hook` "
    "(exit code: 1)",                                      # the runtime (crun) failing the hook: #1598
    HOOK.format("mount error: file creation failed: /var/lib/containerd/x/run/nvidia-persistenced/socket"),
    "driver error: timed out",                             # not the NVIDIA hook's words
])
def test_other_refusals_stay_the_runtimes(message):
    assert driver_side_refusal(message) is None
    snap = healthy_snapshot()
    crash_container(pod_for(snap, GFD, N1), GFD, "RunContainerError", restarts=5, snapshot=snap, message=message)
    assert RUNTIME in assert_only_node_fails("DRV-006", snap).message
