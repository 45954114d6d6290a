"""Simulated nodes as kubelet registers them, and the pod names the operand side derives from a node."""

from __future__ import annotations

import hashlib
from typing import Any

from gpu_conformance import operands as op
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.profiles.catalogue import Profile

Obj = dict[str, Any]

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
# Base capacity of the simulated machines (what kubelet reports before any device plugin).
GPU_NODE_CAPACITY = {"cpu": "128", "memory": "2113511180Ki", "ephemeral-storage": "1843561464Ki",
                     "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"}
CPU_NODE_CAPACITY = {"cpu": "16", "memory": "65842284Ki", "ephemeral-storage": "203056560Ki",
                     "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"}


def cuda_validator_name(node: str) -> str:
    return f"{op.CUDA_VALIDATOR_APP}-{_suffix(node)}"


def _suffix(seed: str) -> str:
    """A 5-character pod-name suffix like generateName's (deterministic from the seed)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet
    h = int(hashlib.sha256(seed.encode()).hexdigest(), 16)
    out = ""
    for _ in range(5):
        h, i = divmod(h, len(alphabet))
        out += alphabet[i]
    return out



def node_object(plan: inst.NodePlan, profile: Profile, kubelet_version: str) -> Obj:
    """A kwok node as kubelet would register it: labels, capacity without GPUs, nodeInfo."""
    capacity = dict(GPU_NODE_CAPACITY if plan.gpu else CPU_NODE_CAPACITY)
    labels = {"kubernetes.io/hostname": plan.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", **plan.labels}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": plan.name, "labels": labels, "annotations": {**KWOK_ANNOTATION, **plan.annotations}},
        "spec": {},
        # No addresses: kwok fills loopback ones. No nvidia.com/* resources until the plugin registers.
        "status": {
            "capacity": capacity, "allocatable": dict(capacity),
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "osImage": profile.os_image,
                         "kernelVersion": profile.kernel_version,
                         "containerRuntimeVersion": profile.container_runtime,
                         "kubeletVersion": kubelet_version, "kubeProxyVersion": kubelet_version},
        },
    }
