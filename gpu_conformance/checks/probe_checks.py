"""Layer 6, probe: declared here so they are in the catalogue; gpu_conformance.probe produces their findings."""

from __future__ import annotations

from gpu_conformance.checks.registry import declare
from gpu_conformance.model import Layer

L = Layer.PROBE
NS = "kubectl -n <probe-namespace>"

declare("PRB-001", L, "a pod requesting a GPU is scheduled on the node",
        hint="The scheduler sees only allocatable nvidia.com/gpu. 'Insufficient nvidia.com/gpu' comes from the "
             "device plugin (nothing advertised), unhealthy devices (allocatable 0), or GPUs used by other pods; "
             "'untolerated taint' from a taint the workload does not tolerate.",
        kubectl="kubectl get events -A --field-selector involvedObject.kind=Pod,reason=FailedScheduling",
        detects="all GPUs allocated; untolerated taint; GPU resource not advertised")
declare("PRB-002", L, "the probe container starts",
        hint="Pass --probe-image with an image your nodes can pull (a mirror of a CUDA base image).",
        kubectl="kubectl describe pod <probe-pod> (events)",
        detects="probe image cannot be pulled (ImagePullBackOff)")
declare("PRB-003", L, "the probe sees the GPUs it requested (nvidia-smi -L)",
        hint="A pod that got its GPU lists exactly the requested devices. Fewer, or nvidia-smi failing, means "
             "the runtime did not inject the GPU: check the toolkit's runtime config and CDI mode.",
        kubectl="kubectl logs <probe-pod>",
        detects="nvidia-smi fails or lists fewer GPUs than requested")
declare("PRB-004", L, "the GPU arrived the way the mode says (CDI: no runtimeClassName needed)",
        hint="With CDI (operator v25.10+ default) a pod without runtimeClassName gets its GPU from "
             "containerd/CRI-O CDI injection: NVIDIA_VISIBLE_DEVICES=void and /dev/nvidia* present.",
        kubectl="kubectl logs <probe-pod>",
        detects="CDI expected but the GPU was injected another way, or not at all")
