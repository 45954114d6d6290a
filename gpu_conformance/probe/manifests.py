"""What the probe writes: its pods' manifests, names and labels, and the lifetime each object carries.

Pure (no I/O): `run.py` creates these objects, `leftovers.py` finds other runs' by the same labels, and the
checks name the pods with `pod_name`. The DRA path's ResourceClaimTemplate and claim wiring are in `claims.py`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from gpu_conformance.probe import api
from gpu_conformance.probe.claims import ProbePath, wire_claim
from gpu_conformance.probe.observations import EXPIRES_ANNOTATION
from gpu_conformance.probe.output import PROBE_SCRIPT
from gpu_conformance.settings import Settings

RUN_LABEL = "gpu-conformance.nvidia.com/run-id"
NODE_LABEL = "gpu-conformance.nvidia.com/node"
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpu-operator-conformance")
# Created once by the admin with rbac.yaml; used when it exists (or named by --probe-namespace).
SHARED_NAMESPACE = "gpu-conformance-probe"
CONTAINER = "gpu-probe"
# Beyond the wait and the API bounds (api.py): creating the pods (16 at a time) and reading their logs. With them,
# the lifetime written on each probe object (expires-at) after which another run may treat it as left behind.
EXPIRY_MARGIN = 120.0


def own_namespace(run_id: str) -> str:
    return f"gpu-conformance-probe-{run_id}"[:63].rstrip("-")


def pod_name(run_id: str, node: str) -> str:
    # The run id keeps runs apart in a shared namespace; the node hash keeps names short and valid.
    return f"gpu-probe-{run_id}-{hashlib.sha1(node.encode()).hexdigest()[:8]}"[:63].rstrip("-")


def expires_at(settings: Settings) -> str:
    """When an object created now by this run is past its run's end (RFC 3339): the annotation concurrent runs read."""
    lifetime = settings.probe_timeout + api.API_OUTAGE_BOUND + api.CLEANUP_BOUND + EXPIRY_MARGIN
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lifetime)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_manifest(run_id: str, node: str, resource: str, settings: Settings,
                 path: str = ProbePath.DEVICE_PLUGIN, template: str = "") -> dict[str, Any]:
    """The probe pod: `resource` requested (device-plugin and extended-resource paths), or the claim from
    `template` (claim path)."""
    suffix = hashlib.sha1(node.encode()).hexdigest()[:8]
    gpus = str(settings.probe_gpus)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run_id, node),
            "labels": {RUN_LABEL: run_id, MANAGED_BY[0]: MANAGED_BY[1], NODE_LABEL: suffix},
            "annotations": {"gpu-conformance.nvidia.com/target-node": node, EXPIRES_ANNOTATION: expires_at(settings)},
        },
        "spec": {
            # No runtimeClassName on purpose: under CDI an ordinary workload must get its GPU without one.
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            # Pinned through the scheduler (not spec.nodeName) so NodeResourcesFit judges it as any workload.
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "containers": [{
                "name": CONTAINER,
                "image": settings.probe_image,
                "command": ["sh", "-c", PROBE_SCRIPT],
                "resources": {"limits": {resource: gpus}, "requests": {resource: gpus}},
            }],
        },
    }
    return wire_claim(pod, template) if path == ProbePath.CLAIM else pod
