"""What the snapshot says of the DRA resource models, as the probe and its checks need it: which model the cluster
runs, which DeviceClass maps nvidia.com/gpu, which devices a node publishes and which claims hold them.

Everything reads lists the snapshot may not carry yet (DeviceClasses, ResourceSlices, ResourceClaims come with the
DRA reader): a snapshot without them reads as the device-plugin model with nothing published.
"""

from __future__ import annotations

from gpu_conformance.cluster.snapshot import GPU_RESOURCE, ClusterSnapshot, name_of
from gpu_conformance.probe_claims import DRA_DRIVER, ProbePath


def probe_model(snap: ClusterSnapshot) -> str:
    """The cluster's GPU resource model as the probe needs it: "device-plugin", "dra-driver" or "gpucluster".

    Stands in for `resource_model()` until it exists (the checks' side of issue #22): a GPUCluster CR without a
    ClusterPolicy is the tech-preview DRA model; a ClusterPolicy with draDriver enabled runs the DRA driver
    instead of the device plugin; anything else is the device-plugin model, probed exactly as before.
    """
    gpu_clusters = getattr(snap, "gpu_clusters", None) or []
    if gpu_clusters and not snap.clusterpolicies:
        return "gpucluster"
    for cp in snap.clusterpolicies:
        dra = ((cp.get("spec") or {}).get("draDriver")) or {}
        if isinstance(dra, dict) and dra.get("enabled") is True:
            return "dra-driver"
    return "device-plugin"


def extended_resource_class(snap: ClusterSnapshot, resource: str = GPU_RESOURCE) -> str:
    """The DeviceClass that maps `resource` (spec.extendedResourceName), '' when none does."""
    for dc in getattr(snap, "device_classes", None) or []:
        if ((dc.get("spec") or {}).get("extendedResourceName")) == resource:
            return name_of(dc)
    return ""


def plan_paths(model: str, targets: list[str], extended_class: str) -> dict[str, ProbePath]:
    """The path each target node's probe pod takes.

    One probe pod per node, so a node with one GPU is never asked for two. In the DRA models every node is probed
    through a claim; where a DeviceClass maps nvidia.com/gpu, the last node (of two or more) is probed through that
    extended resource instead, so both ways a workload asks for a GPU are tried once in the run.
    """
    if model == "device-plugin":
        return {n: ProbePath.DEVICE_PLUGIN for n in targets}
    paths = {n: ProbePath.CLAIM for n in targets}
    if extended_class and len(targets) >= 2:
        paths[targets[-1]] = ProbePath.EXTENDED_RESOURCE
    return paths


def node_devices(snap: ClusterSnapshot, node: str) -> list[str]:
    """Names of the devices the DRA driver publishes for the node (ResourceSlices with spec.nodeName = node)."""
    out: list[str] = []
    for s in getattr(snap, "resource_slices", None) or []:
        spec = s.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName") == node:
            out.extend(str(d.get("name", "")) for d in spec.get("devices") or [])
    return out


def device_holders(snap: ClusterSnapshot, node: str) -> dict[str, str] | None:
    """Which claim (namespace/name) holds each allocated device of the node's pools, from the snapshot's
    ResourceClaims; None when the snapshot did not read claims (then only the scheduler's words say the devices
    are taken)."""
    claims = getattr(snap, "resource_claims", None)
    if claims is None:
        return None
    pools = {str(((s.get("spec") or {}).get("pool") or {}).get("name", ""))
             for s in getattr(snap, "resource_slices", None) or []
             if (s.get("spec") or {}).get("nodeName") == node and (s.get("spec") or {}).get("driver") == DRA_DRIVER}
    held: dict[str, str] = {}
    for c in claims:
        meta = c.get("metadata") or {}
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            if r.get("driver") == DRA_DRIVER and r.get("pool") in pools:
                held[str(r.get("device", ""))] = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return held
