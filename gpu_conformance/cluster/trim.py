"""What the snapshot keeps of each object: the fields the checks, the verdict, the reports and the probe read.

Why: a pod as the API server returns it is ~7x what the checks look at (managedFields, volumes, env,
securityContext, probes, image IDs...), and a node carries its whole image list. At 1,000 GPU nodes the
operator namespace alone holds ~9,000 pods: kept whole they were most of a 777 MiB peak. Each LIST body is
trimmed while it is decoded (cluster/stream_list.py), item by item, so the full objects of a kind never all live
at once.

A shape is a dict of the keys kept; a key's value is KEEP (the whole value) or a nested shape (applied to a
dict value, or to every dict of a list value). Kinds read in small numbers (ClusterPolicy, DaemonSets,
Deployments, CSVs, RuntimeClasses) are kept whole: checks read deep into them and they cost nothing.

Adding a check that reads a pod/node/event field not listed here: add the field below, or the check sees it
missing on a real cluster (factory snapshots bypass the reader, so only sim/real-case tests would notice).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
KEEP: None = None
Shape = dict[str, "Shape | None"]

_METADATA: Shape = {
    "name": KEEP, "namespace": KEEP, "uid": KEEP, "labels": KEEP, "ownerReferences": KEEP,
    "creationTimestamp": KEEP, "deletionTimestamp": KEEP, "generateName": KEEP,
}
# Containers: identity, image (image-pull evidence, version detection), GPU requests (probe plan's GPUs in use),
# restartPolicy (a sidecar init container, as kubectl prints it).
_CONTAINER: Shape = {"name": KEEP, "image": KEEP, "resources": KEEP, "restartPolicy": KEEP}

# Container statuses: what pod states, evidence and timelines quote (state/lastState whole). Not the volume mounts
# kubelet reports since Kubernetes 1.30 (RecursiveReadOnlyMounts; one entry per mount: 8 on an operand pod, a
# third of a trimmed pod's memory), nor imageID, containerID, allocatedResources, resources, user.
_CONTAINER_STATUS: Shape = {"name": KEEP, "image": KEEP, "state": KEEP, "lastState": KEEP, "ready": KEEP,
                            "started": KEEP, "restartCount": KEEP}

POD: Shape = {
    "metadata": _METADATA,
    "spec": {"nodeName": KEEP, "containers": _CONTAINER, "initContainers": _CONTAINER, "runtimeClassName": KEEP,
             "nodeSelector": KEEP},
    "status": {"phase": KEEP, "reason": KEEP, "message": KEEP, "conditions": KEEP,
               "containerStatuses": _CONTAINER_STATUS, "initContainerStatuses": _CONTAINER_STATUS,
               "startTime": KEEP},
}
NODE: Shape = {
    "metadata": {**_METADATA, "annotations": KEEP},
    "spec": {"taints": KEEP, "unschedulable": KEEP},
    # Not status.images (every image on the node: the biggest part of a real node) nor addresses/daemonEndpoints.
    "status": {"capacity": KEEP, "allocatable": KEEP, "conditions": KEEP, "nodeInfo": KEEP},
}
EVENT: Shape = {
    "metadata": {"name": KEEP, "namespace": KEEP, "creationTimestamp": KEEP},
    "involvedObject": {"kind": KEEP, "name": KEEP, "namespace": KEEP, "fieldPath": KEEP},
    "type": KEEP, "reason": KEEP, "message": KEEP, "count": KEEP, "firstTimestamp": KEEP, "lastTimestamp": KEEP,
    "eventTime": KEEP, "series": KEEP, "source": KEEP, "reportingComponent": KEEP,
}
# The DRA objects: everything but metadata's bulk (managedFields, annotations). Claims are read cluster-wide, one per
# GPU workload, so their managedFields would be most of them.
RESOURCE_CLAIM: Shape = {"metadata": _METADATA, "spec": KEEP, "status": KEEP}
RESOURCE_SLICE: Shape = {"metadata": _METADATA, "spec": KEEP}
# Per API kind of a LIST's items ("PodList" -> POD); kinds not named here are kept whole.
SHAPES: dict[str, Shape] = {"Pod": POD, "Node": NODE, "Event": EVENT, "ResourceClaim": RESOURCE_CLAIM,
                            "ResourceSlice": RESOURCE_SLICE}


def trim(obj: Any, shape: Shape) -> Any:
    """`obj` reduced to `shape` (a list: every item). Non-dict values where a shape expects a dict pass unchanged."""
    if isinstance(obj, list):
        return [trim(o, shape) for o in obj]
    if not isinstance(obj, dict):
        return obj
    out: Obj = {}
    for key, sub in shape.items():
        if key in obj:
            out[key] = obj[key] if sub is None else trim(obj[key], sub)
    return out


def trim_items(items: list[Obj], kind: str) -> list[Obj]:
    """The LIST's items reduced to what is read, in place of the list (frees each full item as it goes)."""
    shape = SHAPES.get(kind)
    if shape is None:
        return items
    for i, item in enumerate(items):
        items[i] = trim(item, shape)
    return items
