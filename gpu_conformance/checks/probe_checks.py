"""Layer 6, probe: judged from what the probe captured (`snapshot.probe`), like every layer judges the snapshot.

`gpu_conformance.probe` only creates, waits, captures and deletes. Which nodes it probes (`plan_probe`) and
when a pod has said all it will say (`settled`) are pure functions here too, so that waiting and judging
use the same words for the same states.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from gpu_conformance.checks.device_plugin import effective_cdi
from gpu_conformance.checks.gpu_usage import pod_gpu_requests
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.selectors import matches, parse_probe_nodes
from gpu_conformance.cluster.snapshot import (
    GPU_RESOURCE,
    ClusterSnapshot,
    advertised_gpu_resources,
    gpu_resources,
    labels_of,
)
from gpu_conformance.dra_snapshot import device_holders, node_devices
from gpu_conformance.model import CheckFunc, Finding, Layer, Status
from gpu_conformance.probe_claims import DEVICE_CLASS, ProbePath, claim_name_of, claim_summary
from gpu_conformance.probe_observations import NotProbed, PodObservation, ProbeObservations, ProbePlan, Skip
from gpu_conformance.settings import Settings

L = Layer.PROBE
PULL_FAILURES = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
# The runtime could not create or start the container (e.g. "unresolvable CDI devices"): the kubelet
# retries, but the answer will not change within a probe's lifetime.
START_FAILURES = ("CreateContainerError", "CreateContainerConfigError", "RunContainerError", "StartError",
                  "ContainerCannotRun")
FINISHED = ("Succeeded", "Failed")
ObservedCheck = Callable[[ClusterSnapshot, Settings, ProbeObservations], list[Finding]]
# After the scheduler has said no this long, waiting more only delays the report.
UNSCHEDULABLE_GRACE = 8.0


# ---- facts the probe and its checks share ---------------------------------------------------
def gpu_resource_for(node: dict, in_use: dict[str, int] | None = None, want: int = 1) -> str:
    """The GPU resource a workload asks for on this node: one it advertises (> 0) with `want` free, else any it
    advertises (all busy), else the name it carries at 0 (nothing advertised: said, not requested, by PRB-001).

    Every use — the probe plan, the probe pod's request, busy accounting and PRB-001's words — goes through
    this one function, so a stale `nvidia.com/gpu: 0` beside MIG or .shared resources is never asked for.
    """
    advertised = advertised_gpu_resources(node)
    used = in_use or {}
    free = [r for r, alloc in advertised.items() if alloc - used.get(r, 0) >= want]
    if free or advertised:
        return (free or list(advertised))[0]
    names = set(gpu_resources(node, "capacity")) | set(gpu_resources(node, "allocatable"))
    return GPU_RESOURCE if GPU_RESOURCE in names or not names else sorted(names)[0]


def cdi_expected(snap: ClusterSnapshot, settings: Settings) -> bool:
    """--expect-cdi, else the ClusterPolicy's CDI setting as DPL-007 reads it (one fact, one answer)."""
    if settings.expect_cdi in ("yes", "no"):
        return settings.expect_cdi == "yes"
    return effective_cdi(snap)[0]


def gpus_in_use(pods: list[dict]) -> dict[str, dict[str, int]]:
    """Per node, GPU resources requested by pods that hold them (bound, not finished), by the scheduler's rule."""
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in FINISHED:
            continue
        for k, v in pod_gpu_requests(p).items():
            used[node][k] += v
    return {n: dict(v) for n, v in used.items()}


def plan_probe(snap: ClusterSnapshot, settings: Settings, eligible: list[str],
               in_use: dict[str, dict[str, int]]) -> ProbePlan:
    """Which of the nodes that passed every earlier layer get a probe pod; the others get a reason."""
    plan = ProbePlan(eligible=len(eligible))
    want = settings.probe_gpus
    candidates: list[str] = []
    for n in eligible:
        node = snap.node_by_name.get(n, {})
        if (node.get("spec") or {}).get("unschedulable"):
            plan.not_probed[n] = Skip(NotProbed.CORDONED, "cordoned (spec.unschedulable): not probed, no new "
                                      "workload lands there", {"spec.unschedulable": True})
            continue
        used = in_use.get(n, {})
        res = gpu_resource_for(node, used, want)
        advertised = advertised_gpu_resources(node)
        if advertised and advertised[res] - used.get(res, 0) < want:
            # Every GPU resource the node advertises is taken. A node advertising none is not skipped: it
            # passed the device-plugin layer only without the operator's plugin, and PRB-001 says what it lacks.
            plan.not_probed[n] = Skip(
                NotProbed.BUSY, f"{_busy_text(advertised, used)} (requested by running pods), the probe needs "
                f"{want}: not probed",
                {"object": f"node/{n}", "allocatable": advertised[res] if len(advertised) == 1 else advertised,
                 "requested_by_pods": used.get(res, 0) if len(advertised) == 1 else
                 {r: used.get(r, 0) for r in advertised}, "probe_needs": want})
            continue
        plan.resources[n] = res
        candidates.append(n)
    sample = parse_probe_nodes(settings.probe_nodes)
    if sample == "all":
        plan.targets = candidates
    elif isinstance(sample, int):
        # Seeded by the run id: reproducible for one run, and nightly runs cover different nodes over time.
        picked = set(random.Random(settings.run_id).sample(candidates, min(sample, len(candidates))))
        plan.targets = [n for n in candidates if n in picked]
    else:
        plan.targets = [n for n in candidates if matches(sample, labels_of(snap.node_by_name.get(n, {})))]
    for n in candidates:
        if n not in plan.targets:
            plan.not_probed[n] = Skip(NotProbed.NOT_SAMPLED, f"not sampled (--probe-nodes={settings.probe_nodes})")
    plan.scope = _scope(plan, settings)
    return plan


def scheduler_busy(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> None:
    """Probe pods the scheduler left Pending with 'Insufficient <resource>' on a node that advertises that resource
    above 0: every GPU there is taken, so the node is busy, not broken — moved from the targets to not probed.

    How a probe of many nodes learns which GPUs are in use without reading every pod of the cluster (a 100,000-pod
    cluster must not cost a gigabyte of JSON), and how a probe of few nodes hears of a workload that took the GPUs
    after it looked.
    """
    for n, p in list(obs.pods.items()):
        if p.refused or taken_away(p) or ((p.pod or {}).get("spec") or {}).get("nodeName"):
            continue
        said = next((line for line in p.event_lines() if line.startswith("FailedScheduling")), "")
        if p.path != ProbePath.DEVICE_PLUGIN:
            busy = _claims_busy(snap, settings, p, said)
            if busy is None:
                continue
            obs.plan.not_probed[n] = busy
        else:
            advertised = advertised_gpu_resources(snap.node_by_name.get(n, {}))
            if f"Insufficient {p.resource}" not in said or advertised.get(p.resource, 0) <= 0:
                continue
            obs.plan.not_probed[n] = Skip(
                NotProbed.BUSY, f"{_busy_text(advertised, advertised)} (the scheduler: "
                f"{said.removeprefix('FailedScheduling: ')}), the probe needs {settings.probe_gpus}: not probed",
                {"object": f"node/{n}", "allocatable": advertised, "probe_pod": p.name, "scheduler": said,
                 "probe_needs": settings.probe_gpus})
        obs.plan.targets = [t for t in obs.plan.targets if t != n]
        obs.plan.resources.pop(n, None)
        del obs.pods[n]
    obs.plan.scope = _scope(obs.plan, settings)


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


def _devices_busy_text(snap: ClusterSnapshot, node: str, want: int) -> tuple[str, dict[str, Any]] | None:
    """'all N gpu.nvidia.com device(s) of X are allocated to ns/claim, …' when fewer than `want` of the devices the
    node publishes are free by the snapshot's ResourceClaims (as DPL-013 reads them); None when enough are free or
    none is published."""
    devices = node_devices(snap, node)
    held = device_holders(snap, node)
    free = [d for d in devices if d not in held]
    if not devices or len(free) >= want:
        return None
    claims = sorted({held[d] for d in devices if d in held})
    whose = f" to {', '.join(claims[:5])}{' …' if len(claims) > 5 else ''}"
    text = (f"all {len(devices)} {DEVICE_CLASS} device(s) of {node} are allocated{whose}" if not free else
            f"only {len(free)} of {len(devices)} {DEVICE_CLASS} device(s) of {node} free, the others allocated{whose}")
    return text, {"object": f"node/{node}", "devices": devices, "claims": claims}


def skip_claimed_nodes(snap: ClusterSnapshot, settings: Settings, plan: ProbePlan) -> None:
    """DRA models: targets whose published GPU devices are all held by other claims in the snapshot are busy, not
    probed — the counterpart of the device plugin's GPUs in use (plan_probe), read from the claims the snapshot
    already holds, so no pod is created to hear the scheduler say so."""
    want = settings.probe_gpus
    for n in list(plan.targets):
        busy = _devices_busy_text(snap, n, want)
        if busy is None:
            continue
        text, evidence = busy
        plan.not_probed[n] = Skip(NotProbed.BUSY, f"{text} (ResourceClaims), the probe needs {want}: not probed",
                                  {**evidence, "probe_needs": want})
        plan.targets.remove(n)
        plan.resources.pop(n, None)
    plan.scope = _scope(plan, settings)


def _claims_busy(snap: ClusterSnapshot, settings: Settings, p: PodObservation, said: str) -> Skip | None:
    """A claim the scheduler cannot allocate on a node that publishes GPU devices: busy, not broken — a workload
    took them after the cluster was read (the probe asks for any device of the class, and the node passed
    DPL-011/012, so its devices match it). Only a node that publishes none is PRB-001's failure."""
    if CANNOT_ALLOCATE not in said:
        return None
    devices = node_devices(snap, p.node)
    if not devices:
        return None  # nothing published: the DRA driver's fault on the node, judged by PRB-001
    want = settings.probe_gpus
    known = _devices_busy_text(snap, p.node, want)
    if known is None:
        held = device_holders(snap, p.node)
        claims = sorted({held[d] for d in devices if d in held})
        free = len([d for d in devices if d not in held])
        others = f"; {', '.join(claims[:5])} held the others" if claims else ""
        known = (f"the {len(devices)} {DEVICE_CLASS} device(s) of {p.node} are allocated ({free} free when the "
                 f"cluster was read, claimed since{others})",
                 {"object": f"node/{p.node}", "devices": devices, "claims": claims})
    text, evidence = known
    return Skip(NotProbed.BUSY, f"{text} (the scheduler: {said.removeprefix('FailedScheduling: ')}), the probe "
                f"needs {want}: not probed",
                {**evidence, "probe_pod": p.name, "path": p.path, "scheduler": said, "probe_needs": want})


def _busy_text(advertised: dict[str, int], used: dict[str, int]) -> str:
    def one(r: str, alloc: int) -> str:
        u = used.get(r, 0)
        return f"all {alloc} {r} in use" if u >= alloc else f"only {alloc - u} of {alloc} {r} free"

    return ", ".join(one(r, a) for r, a in advertised.items())


def _scope(plan: ProbePlan, settings: Settings) -> str:
    counts = defaultdict(int)
    for s in plan.not_probed.values():
        counts[s.kind] += 1
    if plan.eligible == 0:
        return "no GPU node passed the earlier layers: none probed"
    head = (f"probed all {plan.eligible} GPU node(s) that passed the earlier layers"
            if len(plan.targets) == plan.eligible else
            f"probed {len(plan.targets)} of {plan.eligible} GPU node(s) that passed the earlier layers")
    parts = []
    if counts[NotProbed.NOT_SAMPLED]:
        parts.append(f"{counts[NotProbed.NOT_SAMPLED]} not sampled (--probe-nodes={settings.probe_nodes})")
    if counts[NotProbed.CORDONED]:
        parts.append(f"{counts[NotProbed.CORDONED]} cordoned")
    if counts[NotProbed.BUSY]:
        parts.append(f"{counts[NotProbed.BUSY]} with all GPUs in use")
    return head + ("; " + ", ".join(parts) if parts else "")


# ---- pod states shared by waiting and judging ------------------------------------------------
def _container_states(pod: dict) -> list[dict]:
    return [cs.get("state") or {} for cs in (pod.get("status") or {}).get("containerStatuses") or []]


def pull_failure(pod: dict) -> dict | None:
    return next((s["waiting"] for s in _container_states(pod)
                 if (s.get("waiting") or {}).get("reason") in PULL_FAILURES), None)


def start_failure(pod: dict, events: list[dict] | None = None) -> dict | None:
    """The runtime refused to create or start the container: {reason, message} (message from the event if bare)."""
    for s in _container_states(pod):
        st = s.get("waiting") or s.get("terminated") or {}
        if st.get("reason") in START_FAILURES:
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


# ---- the checks -------------------------------------------------------------------------------
def _from_observations(check_id: str) -> Callable[[ObservedCheck], CheckFunc]:
    """Adapt a judge of (snapshot, settings, observations) to a check: nothing before the probe ran, n/a if skipped."""

    def wrap(judge: ObservedCheck) -> CheckFunc:
        @functools.wraps(judge)
        def run(snap: ClusterSnapshot, settings: Settings) -> list[Finding]:
            obs = snap.probe
            if obs is None:
                return []
            if obs.skipped:
                return [Finding(Status.NA, obs.skipped)]
            return judge(snap, settings, obs)

        return run

    return wrap


def _kubectl(obs: ProbeObservations, p: PodObservation, verb: str = "describe pod") -> str:
    return f"kubectl -n {obs.namespace} {verb} {p.name}"


def _judged(obs: ProbeObservations) -> list[PodObservation]:
    """Pods that got as far as the scheduler: not refused by admission, not taken away (node deleted, evicted)."""
    return [p for p in obs.pods.values() if not p.refused and not taken_away(p)]


@check("PRB-001", L, "a pod requesting a GPU is scheduled on the node",
       hint="The probe requests one GPU resource the node advertises above 0 (nvidia.com/gpu, its .shared rename "
            "or a nvidia.com/mig-<profile>; a key kubelet keeps at 0 is not asked for), and the scheduler sees only "
            "its allocatable count. 'Insufficient nvidia.com/…' comes from the device plugin (nothing advertised), "
            "unhealthy devices (allocatable 0), or GPUs used by other pods; 'untolerated taint' from a taint the "
            "workload does not tolerate. In the DRA models the probe claims one device of DeviceClass gpu.nvidia.com "
            "through a ResourceClaimTemplate: 'cannot allocate all claims' on a node that publishes no device in a "
            "ResourceSlice is the DRA driver's kubelet plugin; every device held by other claims is busy, not broken.",
       kubectl="kubectl get events -A --field-selector involvedObject.kind=Pod,reason=FailedScheduling",
       detects="all GPUs allocated; untolerated taint; GPU resource not advertised; a GPU claim kube-scheduler "
               "cannot allocate (no published device, no DeviceClass, every device claimed: busy)")
@_from_observations("PRB-001")
def probe_scheduled(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> list[Finding]:
    f: list[Finding] = []
    for node, skip in sorted(obs.plan.not_probed.items()):
        status = Status.NA if skip.kind == NotProbed.NOT_SAMPLED else Status.WARN
        f.append(Finding(status, skip.message, node=node, evidence={"not_probed": str(skip.kind),
                                                                                  **skip.evidence}))
    if obs.plan.eligible and not obs.plan.targets:
        # Nothing was probed (every node busy, cordoned or unselected): the layer did not run.
        f.append(Finding(Status.WARN, f"no GPU node could be probed: {obs.plan.scope}",
                         evidence={"transient": True}))
    f.extend(_refusals(obs))
    if obs.aborted:
        # Whatever the pods did so far, the run cannot speak for the nodes: INCOMPLETE, said once.
        f.append(Finding(Status.WARN, f"the probe did not finish: {obs.aborted}",
                         evidence={"transient": True, "namespace": obs.namespace}))
    for p in obs.pods.values():
        why = "" if p.refused else taken_away(p)
        if why:
            # The node's or the cluster's doing, not the GPU's: INCOMPLETE for this node, said in its own words.
            f.append(Finding(Status.WARN, why, node=p.node,
                             evidence={"transient": True, "pod": p.name, "phase": p.phase or "?"},
                             kubectl=_kubectl(obs, p, "get pod")))
    for p in _judged(obs):
        pod = p.pod or {}
        if (pod.get("spec") or {}).get("nodeName"):
            f.append(Finding(Status.PASS, f"scheduled on {p.node}", node=p.node,
                             evidence={"pod": p.name}))
            continue
        if obs.aborted:
            continue
        reason = next((line for line in p.event_lines() if line.startswith("FailedScheduling")), "")
        if p.path != ProbePath.DEVICE_PLUGIN:
            f.append(Finding(Status.FAIL, _claim_unschedulable_message(snap, obs, p, reason), node=p.node,
                             evidence={"pod": p.name, "phase": p.phase or "Pending", "path": p.path,
                                       "claim": claim_summary(p.claim), "devices": node_devices(snap, p.node),
                                       "events": p.event_lines()},
                             kubectl=f"kubectl -n {obs.namespace} describe pod {p.name}; kubectl -n {obs.namespace} "
                                     "get resourceclaims -o wide"))
            continue
        f.append(Finding(Status.FAIL, _unschedulable_message(snap, p, reason or "not scheduled"),
                         node=p.node, evidence={"pod": p.name, "phase": p.phase or "Pending",
                                                "events": p.event_lines()}, kubectl=_kubectl(obs, p)))
    return f


def _refusals(obs: ProbeObservations) -> list[Finding]:
    """A pod the API refused (admission webhook, ValidatingAdmissionPolicy): said once, with the policy's words."""
    refused = [p for p in obs.pods.values() if p.refused]
    if not refused:
        return []
    messages = sorted({p.refused for p in refused})
    hint = ("An admission policy refused the probe pod; the GPU path was not tested. Allow the probe (its "
            "namespace, image and GPU request) in the policy, or pass --probe-image / --probe-namespace.")
    if len(refused) == len(obs.pods) and len(messages) == 1:
        return [Finding(Status.WARN, f"the cluster refused the probe pods: {messages[0]}",
                        evidence={"transient": True, "namespace": obs.namespace, "pods": len(refused),
                                  "observed": messages[0]}, hint=hint)]
    return [Finding(Status.WARN, f"the cluster refused the probe pod: {p.refused}", node=p.node,
                    evidence={"transient": True, "pod": p.name, "observed": p.refused}, hint=hint)
            for p in refused]


def _unschedulable_message(snap: ClusterSnapshot, p: PodObservation, event: str) -> str:
    node = p.node
    n = snap.node_by_name.get(node, {})
    res = p.resource or gpu_resource_for(n)
    advertised = advertised_gpu_resources(n)
    text = event.removeprefix("FailedScheduling: ")
    if f"Insufficient {res}" in event:
        if not advertised:
            cause = (f"{node} advertises no allocatable GPU resource (no nvidia.com/gpu, .shared or mig-* above 0): "
                     "device plugin / unhealthy devices")
        elif res not in advertised:
            cause = f"{node} advertises no allocatable {res} (it advertises {', '.join(advertised)})"
        else:
            cause = f"all {advertised[res]} {res} on {node} are allocated to other pods"
        return f"probe Pending: {text} — {cause}"
    if "taint" in event:
        return f"probe Pending: {text} — the GPU node carries a taint ordinary GPU workloads do not tolerate"
    return f"probe Pending on {node}: {text}"


def _claim_unschedulable_message(snap: ClusterSnapshot, obs: ProbeObservations, p: PodObservation,
                                 event: str) -> str:
    """Why a claim-path (or DRA-backed extended-resource) probe pod was not scheduled, in kube-scheduler v1.36's
    words and the claim's status."""
    node = p.node
    text = event.removeprefix("FailedScheduling: ")
    claim = claim_summary(p.claim)
    state = ""
    if claim:
        state = (f"; claim {claim['name']} allocated {', '.join(claim['devices'])}" if claim["allocated"] else
                 f"; claim {claim['name']} not allocated")
    if not event:
        created = next((line for line in p.event_lines() if line.startswith(CLAIM_CREATION_FAILED)), "")
        if created:
            return (f"probe Pending: the ResourceClaim was not created from template {obs.template or '?'} "
                    f"({created}) — kube-controller-manager's resource-claim controller")
        if p.path == ProbePath.CLAIM and not claim and not claim_name_of(p.pod or {}):
            return (f"probe Pending on {node}: its ResourceClaim was never created from template "
                    f"{obs.template or '?'}, so kube-scheduler never tried the pod — is the resource-claim "
                    "controller of kube-controller-manager running (DynamicResourceAllocation enabled)?")
        return f"probe Pending on {node}: not scheduled{state}"
    if NO_DEVICE_CLASS in event and "device class" in event:
        return (f"probe Pending: {text} — the DeviceClass {DEVICE_CLASS} is missing (the operator creates it with "
                "the DRA driver)")
    if CANNOT_ALLOCATE in event and not node_devices(snap, node):
        return (f"probe Pending: {text}{state} — {node} publishes no {DEVICE_CLASS} device in a ResourceSlice: "
                "the DRA driver's kubelet plugin is not running there or found no GPU")
    if CLAIM_ELSEWHERE in event or CLAIM_IN_USE in event:
        return f"probe Pending: {text}{state} — the probe's claim is held elsewhere"
    if CANNOT_FIT in event or f"Insufficient {p.resource}" in event:
        return (f"probe Pending: {text} — {node} advertises no {p.resource} and no DeviceClass backs it there "
                "(spec.extendedResourceName)")
    if "taint" in event:
        return f"probe Pending: {text} — the GPU node carries a taint ordinary GPU workloads do not tolerate"
    return f"probe Pending on {node}: {text}{state}"


@check("PRB-002", L, "the probe container starts",
       hint="Pass --probe-image with an image your nodes can pull (a mirror of a CUDA base image). A container "
            "the runtime cannot create (e.g. 'unresolvable CDI devices') points at the toolkit's CDI specs or "
            "runtime configuration on that node.",
       kubectl="kubectl describe pod <probe-pod> (events)",
       detects="probe image cannot be pulled (ImagePullBackOff); container not creatable (CreateContainerError, "
               "e.g. unresolvable CDI device)")
@_from_observations("PRB-002")
def probe_started(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> list[Finding]:
    f: list[Finding] = []
    for p in _judged(obs):
        pod = p.pod or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            continue
        kubectl = _kubectl(obs, p)
        pull = pull_failure(pod)
        if pull:
            f.append(Finding(Status.FAIL,
                             f"probe image {obs.image} cannot be pulled ({pull.get('reason')}): "
                             f"{pull.get('message', '')}".rstrip(": "),
                             node=p.node, evidence={"pod": p.name, "waiting": pull, "events": p.event_lines()},
                             kubectl=kubectl))
            continue
        start = start_failure(pod, p.events)
        if start:
            writer = ("the DRA driver prepared a CDI device for the claim that no CDI spec on the node resolves: "
                      "the spec its kubelet plugin writes is missing or stale" if p.path != ProbePath.DEVICE_PLUGIN
                      else "the device plugin allocated a CDI device that no CDI spec on the node resolves: the CDI "
                      "spec is missing or stale (the toolkit writes it)")
            cdi = f" — {writer}" if "cdi" in str(start["message"]).lower() else ""
            f.append(Finding(Status.FAIL,
                             f"the runtime could not start the probe container ({start['reason']}): "
                             f"{start['message']}".rstrip(": ") + cdi,
                             node=p.node, evidence={"pod": p.name, "observed": start, "events": p.event_lines()},
                             kubectl=kubectl))
            continue
        rejected = (pod.get("status") or {}).get("reason")
        if p.phase == "Failed" and rejected and not (pod.get("status") or {}).get("containerStatuses"):
            # The kubelet refused the pod before any container ran (UnexpectedAdmissionError: the device plugin
            # could not allocate; OutOfnvidia.com/gpu): its words, not "probe container ran".
            f.append(Finding(Status.FAIL, f"the kubelet rejected the probe pod ({rejected}): "
                             f"{(pod.get('status') or {}).get('message', '')}".rstrip(": "), node=p.node,
                             evidence={"pod": p.name, "reason": rejected, "events": p.event_lines()},
                             kubectl=kubectl))
            continue
        if p.phase not in FINISHED:
            if not obs.aborted:
                f.append(Finding(Status.FAIL,
                                 f"probe did not finish within --probe-timeout {settings.probe_timeout:g}s "
                                 f"(phase {p.phase or '?'})", node=p.node,
                                 evidence={"pod": p.name, "status": pod.get("status", {}),
                                           "events": p.event_lines()}, kubectl=kubectl))
            continue
        f.append(Finding(Status.PASS, f"probe container ran ({p.phase})", node=p.node))
    return f


def _ran(obs: ProbeObservations) -> list[PodObservation]:
    return [p for p in _judged(obs) if p.phase in FINISHED and not start_failure(p.pod or {})]


# A verdict on one probe pod that ran, from its output: status, message, evidence.
OutputJudge = Callable[[PodObservation], tuple[Status, str, dict[str, Any]]]


def _judge_outputs(obs: ProbeObservations, judge: OutputJudge, warn_without_logs: bool) -> list[Finding]:
    """One finding per probe pod that ran, from its output; a failure points at the pod's logs.

    A pod whose logs could not be read proves nothing either way (e.g. the kubelet's log endpoint is down):
    one check warns about it (transient), the others stay silent rather than repeat the warning.
    """
    f: list[Finding] = []
    for p in _ran(obs):
        logs_cmd = _kubectl(obs, p, "logs")
        if p.logs_error:
            if warn_without_logs:
                f.append(Finding(Status.WARN, f"the probe ran but its {p.logs_error}", node=p.node,
                                 evidence={"pod": p.name, "transient": True}, kubectl=logs_cmd))
            continue
        status, message, ev = judge(p)
        f.append(Finding(status, message, node=p.node, evidence=ev,
                         kubectl=logs_cmd if status == Status.FAIL else ""))
    return f


@check("PRB-003", L, "the probe sees the GPUs it requested (nvidia-smi -L)",
       hint="A pod that got its GPU lists exactly the requested devices. Fewer, or nvidia-smi failing, means "
            "the runtime did not inject the GPU: check the toolkit's runtime config and CDI mode.",
       kubectl="kubectl logs <probe-pod>",
       detects="nvidia-smi fails or lists fewer GPUs than requested")
@_from_observations("PRB-003")
def probe_sees_gpus(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> list[Finding]:
    want = settings.probe_gpus

    def judge(p: PodObservation) -> tuple[Status, str, dict[str, Any]]:
        out = p.output
        ev = {"pod": p.name, "phase": p.phase, "gpus_seen": out.gpus, "nvidia_smi_rc": out.smi_rc,
              "requested": want}
        if out.smi_rc != 0 or out.gpu_count == 0:
            why = out.smi_error or (f"exit code {out.smi_rc}" if out.smi_rc is not None else "no output")
            return Status.FAIL, f"nvidia-smi -L in a pod with {want} GPU requested failed: {why}", ev
        if out.gpu_count < want:
            return Status.FAIL, f"the pod sees {out.gpu_count} GPU(s) but requested {want}", ev
        return Status.PASS, f"nvidia-smi lists {out.gpu_count} GPU(s): " + "; ".join(out.gpus[:4]), ev

    return _judge_outputs(obs, judge, warn_without_logs=True)


@check("PRB-004", L, "the GPU arrived the way the mode says (CDI: no runtimeClassName needed)",
       hint="With CDI (operator v25.10+ default) a pod without runtimeClassName gets its GPU from "
            "containerd/CRI-O CDI injection: NVIDIA_VISIBLE_DEVICES=void and /dev/nvidia* present. A device "
            "claimed from the DRA driver arrives only that way, whatever the ClusterPolicy's CDI setting.",
       kubectl="kubectl logs <probe-pod>",
       detects="CDI expected but the GPU was injected another way, or not at all")
@_from_observations("PRB-004")
def probe_injection(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> list[Finding]:
    mode_cdi = cdi_expected(snap, settings)

    def judge(p: PodObservation) -> tuple[Status, str, dict[str, Any]]:
        # A device the DRA driver prepared reaches the container only as a CDI device (its kubelet plugin writes
        # the spec from nvcdi's edits: k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/cdi.go), whatever ClusterPolicy says.
        cdi = mode_cdi or p.path != ProbePath.DEVICE_PLUGIN
        out = p.output
        ev = {"NVIDIA_VISIBLE_DEVICES": out.visible_devices, "devices": out.devices, "cdi_expected": cdi,
              "path": p.path}
        if out.gpu_count == 0:
            return Status.FAIL, ("no GPU was injected into the probe container "
                                 "(no runtimeClassName was set, as for any ordinary workload)"), ev
        if cdi and not out.injected_by_cdi:
            return Status.FAIL, (f"CDI expected but NVIDIA_VISIBLE_DEVICES={out.visible_devices!s} (CDI injection "
                                 "leaves 'void') — the GPU came by the legacy env-var path"), ev
        if not out.has_device_nodes:
            return Status.FAIL, "no /dev/nvidiaN device node in the container", ev
        how = "CDI (NVIDIA_VISIBLE_DEVICES=void, /dev/nvidia* present)" if out.injected_by_cdi else \
            f"the nvidia runtime (NVIDIA_VISIBLE_DEVICES={out.visible_devices})"
        return Status.PASS, f"GPU injected by {how} without runtimeClassName", ev

    return _judge_outputs(obs, judge, warn_without_logs=False)
