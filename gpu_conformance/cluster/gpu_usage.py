"""GPUs held on a node by its pods, counted the way the scheduler and kubelet's device manager count them.

A GPU node whose GPUs are all held by running workloads is busy, not broken: the validator's own test pod
(plugin-validation with WITH_WORKLOAD=true) and the probe both need a free GPU, and neither gets one. Only pods
bound to the node and not finished hold devices: a pod in phase Succeeded or Failed holds nothing (the
scheduler leaves such pods out of a node's requested resources, and kubelet's device manager releases their
devices), whatever its spec asks for.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpu_conformance.cluster.snapshot import is_gpu_resource, labels_of, name_of

Obj = dict[str, Any]
FINISHED = ("Succeeded", "Failed")


def _qty(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _wants(container: Obj) -> dict[str, int]:
    r = container.get("resources") or {}
    # For extended resources requests must equal limits; a pod may give only limits (requests default to them).
    merged = {**(r.get("limits") or {}), **(r.get("requests") or {})}
    return {k: _qty(v) for k, v in merged.items() if is_gpu_resource(k) and _qty(v) > 0}


def pod_gpu_requests(pod: Obj) -> dict[str, int]:
    """The pod's effective GPU request per resource, by the scheduler's rule (component-helpers PodRequests).

    App containers and sidecars (init containers with restartPolicy Always) run together and add up; a regular
    init container runs alone with the sidecars started before it, so the pod needs the larger of the two.
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = defaultdict(int)
    for c in spec.get("containers") or []:
        for k, v in _wants(c).items():
            total[k] += v
    sidecars: dict[str, int] = defaultdict(int)
    init_peak: dict[str, int] = defaultdict(int)
    for c in spec.get("initContainers") or []:
        want = _wants(c)
        if c.get("restartPolicy") == "Always":
            for k, v in want.items():
                sidecars[k] += v
            running = dict(sidecars)
        else:
            running = {k: want.get(k, 0) + sidecars.get(k, 0) for k in set(want) | set(sidecars)}
        for k, v in running.items():
            init_peak[k] = max(init_peak[k], v)
    for k, v in sidecars.items():
        total[k] += v
    out = {k: max(total.get(k, 0), init_peak.get(k, 0)) for k in set(total) | set(init_peak)}
    return {k: v for k, v in out.items() if v > 0}


def holds_devices(pod: Obj, node: str) -> bool:
    """Bound to this node and not finished: what the scheduler counts as using the node's resources."""
    return (pod.get("spec") or {}).get("nodeName") == node and (pod.get("status") or {}).get("phase") not in FINISHED


@dataclass(frozen=True)
class Holder:
    """A pod holding GPUs on a node: namespace/name and what it holds."""

    pod: str
    gpus: dict[str, int]


def gpu_holders(pods: list[Obj], node: str, skip_apps: tuple[str, ...] = ()) -> list[Holder]:
    """The pods (of any namespace) that hold GPUs on the node; pods whose app label is in skip_apps are left out."""
    out = []
    for p in pods:
        if not holds_devices(p, node) or labels_of(p).get("app") in skip_apps:
            continue
        gpus = pod_gpu_requests(p)
        if gpus:
            out.append(Holder(f"{p.get('metadata', {}).get('namespace', '')}/{name_of(p)}", gpus))
    return sorted(out, key=lambda h: h.pod)


def held(holders: list[Holder], resource: str) -> int:
    return sum(h.gpus.get(resource, 0) for h in holders)
