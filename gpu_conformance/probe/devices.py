"""What the snapshot says of the DRA driver's GPU devices, as the probe's plan and its checks need it: which
devices a node publishes and which claims hold them.

The model itself is `resource_model.resource_model()`, the one the checks and the report header use.
"""

from __future__ import annotations

from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.probe.claims import DRA_DRIVER


def node_devices(snap: ClusterSnapshot, node: str) -> list[str]:
    """Names of the devices the DRA driver publishes for the node (ResourceSlices with spec.nodeName = node)."""
    out: list[str] = []
    for s in snap.resource_slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName") == node:
            out.extend(str(d.get("name", "")) for d in spec.get("devices") or [])
    return out


def device_holders(snap: ClusterSnapshot, node: str) -> dict[str, str]:
    """Which claim (namespace/name) holds each allocated device of the node's pools, from the snapshot's
    ResourceClaims (every claim of the cluster, read with the snapshot)."""
    claims = snap.resource_claims
    pools = {str(((s.get("spec") or {}).get("pool") or {}).get("name", ""))
             for s in snap.resource_slices
             if (s.get("spec") or {}).get("nodeName") == node and (s.get("spec") or {}).get("driver") == DRA_DRIVER}
    held: dict[str, str] = {}
    for c in claims:
        meta = c.get("metadata") or {}
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            # An adminAccess allocation (the validator's) does not take the device from other claims.
            if r.get("driver") == DRA_DRIVER and r.get("pool") in pools and not r.get("adminAccess"):
                held[str(r.get("device", ""))] = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return held
