"""A probe pod's states in the words both the wait loop (`run.py`) and the checks use: pulled or not, started or
not, unschedulable, taken away by the cluster, settled (waiting longer cannot change what it tells).

Pure functions of the pod as last seen; the waiting reasons are kubelet's, shared with the operand pods' checks
(`cluster/podstate.py`).
"""

from __future__ import annotations

from gpu_conformance.cluster.gpu_usage import FINISHED
from gpu_conformance.cluster.podstate import IMAGE_REASONS, RUNTIME_REASONS
from gpu_conformance.probe.claims import CLAIM_CREATION_FAILED
from gpu_conformance.probe.observations import PodObservation

# After the scheduler has said no this long, waiting more only delays the report.
UNSCHEDULABLE_GRACE = 8.0


def _container_states(pod: dict) -> list[dict]:
    return [cs.get("state") or {} for cs in (pod.get("status") or {}).get("containerStatuses") or []]


def pull_failure(pod: dict) -> dict | None:
    return next((s["waiting"] for s in _container_states(pod)
                 if (s.get("waiting") or {}).get("reason") in IMAGE_REASONS), None)


def start_failure(pod: dict, events: list[dict] | None = None) -> dict | None:
    """The runtime refused to create or start the container: {reason, message} (message from the event if bare)."""
    for s in _container_states(pod):
        st = s.get("waiting") or s.get("terminated") or {}
        if st.get("reason") in RUNTIME_REASONS:
            msg = st.get("message") or next((e.get("message", "") for e in reversed(events or [])
                                             if e.get("type") == "Warning"), "")
            return {"reason": st["reason"], "message": msg}
    return None


def unschedulable(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


# status.reason of a pod the kubelet or the node controller stopped for the node's sake, not the GPU's.
_STOPPED_FOR_NODE = {
    "Evicted": "the probe pod was evicted",                              # node-pressure eviction
    "Preempting": "the probe pod was preempted by the kubelet",          # to admit a critical pod
    "Terminated": "the probe pod was terminated",                        # graceful node shutdown
    "NodeShutdown": "the probe pod was rejected: the node is shutting down",
    "NodeLost": "node {node} was lost while its probe pod ran",          # the node controller, older clusters
}
# DisruptionTarget condition reasons (Kubernetes 1.26+): who is taking the pod away, set before it goes.
_DISRUPTIONS = {
    "DeletionByPodGC": "node {node} was deleted while its probe pod ran",  # only orphans get this condition
    "EvictionByEvictionAPI": "the probe pod was evicted through the Eviction API (e.g. kubectl drain)",
    "PreemptionByScheduler": "the probe pod was preempted by the scheduler",
    "PreemptionByKubeScheduler": "the probe pod was preempted by the scheduler",  # its name in 1.26
    "DeletionByTaintManager": "the probe pod was deleted for a NoExecute taint on its node",
    "TerminationByKubelet": "the probe pod was terminated by the kubelet",
}


def _said(sentence: str, node: str, message: str) -> str:
    return f"{sentence.format(node=node)}: {message}".rstrip(": ")


def disruption(pod: dict, node: str) -> str:
    """Why the cluster took a probe pod away (evicted, preempted, node gone), in its own words; '' if it did not.

    Transient, not a GPU failure: the same pod on a calm node would have run.
    """
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return ""
    reason = status.get("reason") or ""
    if reason in _STOPPED_FOR_NODE:
        return _said(_STOPPED_FOR_NODE[reason], node, status.get("message") or "")
    for c in status.get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True" and c.get("reason") in _DISRUPTIONS:
            return _said(_DISRUPTIONS[c["reason"]], node, c.get("message") or "")
    return ""


def taken_away(obs: PodObservation) -> str:
    """Why this probe pod cannot speak for its node's GPU (deleted node, eviction, someone deleted it); '' if none."""
    if obs.node_deleted:
        return f"node {obs.node} was deleted while its probe pod ran"
    return disruption(obs.pod or {}, obs.node) or obs.gone


def settled(obs: PodObservation, unschedulable_for: float) -> bool:
    """True once waiting longer cannot change what this pod tells us."""
    if obs.refused or taken_away(obs):
        return True
    pod = obs.pod or {}
    if obs.phase in FINISHED or pull_failure(pod) or start_failure(pod):
        return True
    if not (pod.get("spec") or {}).get("nodeName") and any(e.get("reason") == CLAIM_CREATION_FAILED
                                                          for e in obs.events):
        # The claim controller could not create the pod's claim from the run's template: kube-scheduler never
        # tries the pod (no condition, no FailedScheduling), and retries meet the same refusal.
        return True
    return unschedulable(pod) and unschedulable_for >= UNSCHEDULABLE_GRACE

