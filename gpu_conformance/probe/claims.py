"""The probe in the DRA resource models: which path each probe pod takes to its GPU, and what that path needs.

Pure data and manifests (no I/O, no snapshot: `observations.py` holds these words): `run.py` creates what is
built here and `checks/probe_checks.py` judges with the same words, kube-scheduler's and the claim controller's
answers included (the end of this module); which DeviceClass maps nvidia.com/gpu is read in `plan.py`, which
devices a node publishes and which claims hold them in `devices.py`.

Three paths, recorded per probe pod:
- "device-plugin": the pod requests the extended resource the NVIDIA device plugin advertises (the only path
  before the DRA models, unchanged there).
- "claim": the pod references a ResourceClaimTemplate asking for one device of the DeviceClass `gpu.nvidia.com`;
  kube-controller-manager's resource-claim controller creates the claim and kube-scheduler allocates a device
  from the node's ResourceSlices (Kubernetes 1.34+ resource.k8s.io/v1).
- "extended-resource": the pod requests `nvidia.com/gpu` on a node with no device plugin, and a DeviceClass that
  names it in `spec.extendedResourceName` lets the scheduler back it with a claim of its own (DRAExtendedResource,
  beta and on by default from Kubernetes 1.36). The operator's own DeviceClass does not set it
  (manifests/state-dra-driver/0400_deviceclass-gpu.yaml at v26.7.0): only an admin's class does.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

Obj = dict[str, Any]

# The DRA driver's driver name and the operator's GPU DeviceClass (manifests/state-dra-driver/0400_deviceclass-gpu.yaml
# at v26.7.0: selects device.driver == 'gpu.nvidia.com' with attribute type 'gpu'). The same names as
# resource_model.DRA_DRIVER_NAME / GPU_DEVICE_CLASS, which this module cannot import (resource_model reads the
# snapshot, whose probe field is probe.observations, which uses this module); tests/test_probe_dra.py holds them equal.
DRA_DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"
# The pod's name for its claim (spec.resourceClaims[].name, the container's resources.claims[].name).
CLAIM = "gpu"
RESOURCE_API = "/apis/resource.k8s.io/v1"
TEMPLATE_PREFIX = "gpu-conformance-probe"


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class ProbePath(StrEnum):
    DEVICE_PLUGIN = "device-plugin"
    CLAIM = "claim"
    EXTENDED_RESOURCE = "extended-resource"


def template_name(run_id: str) -> str:
    # The run id keeps concurrent runs in the shared namespace from deleting each other's template.
    return f"{TEMPLATE_PREFIX}-{run_id}"[:63].rstrip("-")


def template_manifest(name: str, labels: dict[str, str], annotations: dict[str, str], gpus: int) -> Obj:
    """The ResourceClaimTemplate: `gpus` devices of the GPU DeviceClass. Its spec.metadata labels are copied onto
    every claim generated from it, so this run's claims are listed by its run-id label."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations)},
        "spec": {
            "metadata": {"labels": dict(labels)},
            "spec": {"devices": {"requests": [{"name": CLAIM, "exactly": {
                "deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": gpus}}]}},
        },
    }


def wire_claim(pod: Obj, template: str) -> Obj:
    """Turn a probe pod manifest into the claim path: the pod references the template, its container the claim,
    and it requests no extended resource (the claim is the request)."""
    pod["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    for c in pod["spec"]["containers"]:
        c["resources"] = {"claims": [{"name": CLAIM}]}
    return pod


# ---- the claim as observed ---------------------------------------------------------------------------------------
def claim_name_of(pod: Obj) -> str:
    """The ResourceClaim the controller generated for the pod (status.resourceClaimStatuses), or the claim the
    scheduler made for an extended-resource request (status.extendedResourceClaimStatus); '' if none yet."""
    status = pod.get("status") or {}
    for s in status.get("resourceClaimStatuses") or []:
        if s.get("name") == CLAIM and s.get("resourceClaimName"):
            return str(s["resourceClaimName"])
    return str((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or "")


def claim_for(pod: Obj, claims: list[Obj]) -> Obj | None:
    """The pod's claim among `claims`: by the name the pod's status gives, else by owner reference (the claim
    exists before the controller has written the pod's status)."""
    name = claim_name_of(pod)
    uid = (pod.get("metadata") or {}).get("uid")
    for c in claims:
        if name and _name(c) == name:
            return c
        if uid and any(o.get("uid") == uid for o in (c.get("metadata") or {}).get("ownerReferences") or []):
            return c
    return None


def allocated_devices(claim: Obj) -> list[str]:
    """'<driver>/<pool>/<device>' per allocated device (status.allocation.devices.results)."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results]


def claim_summary(claim: Obj | None) -> dict[str, Any]:
    """What the report says of a probe pod's claim: its name, whether allocated, which devices, who holds it."""
    if claim is None:
        return {}
    status = claim.get("status") or {}
    return {"name": _name(claim), "allocated": bool(status.get("allocation")),
            "devices": allocated_devices(claim),
            "reserved_for": [str(r.get("name", "")) for r in status.get("reservedFor") or []]}


# ---- what kube-scheduler and the claim controller say of a claim ----------------------------------------------
# kube-scheduler v1.36's DynamicResources plugin (pkg/scheduler/framework/plugins/dynamicresources): the
# allocator found no set of devices on the node for the pod's claims ...
CANNOT_ALLOCATE = "cannot allocate all claims"
# ... the DeviceClass a request names does not exist (PreFilter, so said for every node at once) ...
NO_DEVICE_CLASS = "does not exist"
# ... a claim already allocated on another node, or reserved by as many pods as it may be ...
CLAIM_ELSEWHERE = "resourceclaim not available on the node"
CLAIM_IN_USE = "resourceclaim in use"
# ... an extended resource neither a device plugin advertises nor a DeviceClass backs (DRAExtendedResource).
CANNOT_FIT = "cannot fit resource"
# kube-controller-manager's resource-claim controller could not create a pod's claim from its template (an
# event on the pod; until the claim exists kube-scheduler does not try the pod, so no FailedScheduling).
CLAIM_CREATION_FAILED = "FailedResourceClaimCreation"
