"""Layer 6, probe: judged from what the probe captured (the check input's `probe`), like every layer judges the read.

Only the judging lives here, as pure functions of the observations. The probe itself is the package
`gpu_conformance.probe`: its plan (which nodes, which path), the run (create, wait, capture, delete), the
observations and the parsed output. The words for a pod's states (`probe/states.py`) and for the scheduler's
answers (`probe/claims.py`) are the run's, so waiting and judging name the same states alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.gpu_usage import FINISHED
from gpu_conformance.cluster.snapshot import ClusterSnapshot, advertised_gpu_resources
from gpu_conformance.model import CheckFunc, Finding, Layer, Status
from gpu_conformance.probe.claims import (
    CANNOT_ALLOCATE,
    CANNOT_FIT,
    CLAIM_CREATION_FAILED,
    CLAIM_ELSEWHERE,
    CLAIM_IN_USE,
    DEVICE_CLASS,
    NO_DEVICE_CLASS,
    ProbePath,
    claim_name_of,
    claim_summary,
)
from gpu_conformance.probe.devices import node_devices
from gpu_conformance.probe.observations import NotProbed, PodObservation, ProbeObservations
from gpu_conformance.probe.plan import gpu_resource_for
from gpu_conformance.probe.states import pull_failure, start_failure, taken_away

L = Layer.PROBE
ObservedCheck = Callable[[CheckInput, ProbeObservations], list[Finding]]


def cdi_expected(inp: CheckInput) -> bool:
    """--expect-cdi, else the ClusterPolicy's CDI setting as DPL-007 reads it (one fact, one answer)."""
    settings = inp.settings
    if settings.expect_cdi in ("yes", "no"):
        return settings.expect_cdi == "yes"
    return inp.facts.cdi.on


# ---- the checks -------------------------------------------------------------------------------
def _from_observations(check_id: str) -> Callable[[ObservedCheck], CheckFunc]:
    """Adapt a judge of (input, observations) to a check: nothing before the probe ran, n/a if skipped."""

    def wrap(judge: ObservedCheck) -> CheckFunc:
        @functools.wraps(judge)
        def run(inp: CheckInput) -> list[Finding]:
            obs = inp.probe
            if obs is None:
                return []
            if obs.skipped:
                return [Finding(Status.NA, obs.skipped)]
            return judge(inp, obs)

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
def probe_scheduled(inp: CheckInput, obs: ProbeObservations) -> list[Finding]:
    snap = inp.snapshot
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


# The CDI kinds of the device plugin's own spec (vendor k8s.device-plugin.nvidia.com, which it writes at start) and
# of the DRA driver's; any other kind in an unresolvable name is the NVIDIA runtime's default kind, under which it
# reads NVIDIA_VISIBLE_DEVICES when no CDI annotation reaches it (nvidia-container-toolkit modifier/cdi.go).
PLUGIN_CDI_VENDOR = "k8s.device-plugin.nvidia.com/"
DRA_CDI_VENDORS = ("k8s.gpu.nvidia.com/", "gpu.nvidia.com/")
# The kind the operator's toolkit gives NVIDIA's runtime as its default (assets/state-container-toolkit).
MANAGEMENT_CDI_KIND = "management.nvidia.com/gpu"


def _unresolvable_cdi_cause(message: str, path: ProbePath) -> str:
    """Who should have written the CDI spec a refused probe container names, from the device names the runtime
    quotes ("unresolvable CDI devices <kind>=<id>, ...")."""
    if path != ProbePath.DEVICE_PLUGIN:
        return ("the DRA driver prepared a CDI device for the claim that no CDI spec on the node resolves: the spec "
                "its kubelet plugin writes is missing or stale")
    names = [w.rstrip(",;:") for w in message.split("unresolvable CDI devices", 1)[-1].split() if "=" in w]
    other = sorted({n.split("=", 1)[0] for n in names if not n.startswith((PLUGIN_CDI_VENDOR, *DRA_CDI_VENDORS))})
    if names and other:
        management = " (the toolkit's management spec has only `all`)" if MANAGEMENT_CDI_KIND in other else ""
        return (f"NVIDIA's runtime read NVIDIA_VISIBLE_DEVICES as CDI devices of its default kind {', '.join(other)}, "
                f"which no spec on the node resolves{management}: the device plugin's CDI annotation did not reach "
                "the runtime (containerd's `nvidia` runtime without container_annotations for it, or the plugin not "
                "on a CDI strategy)")
    return ("the device plugin allocated a CDI device that no CDI spec on the node resolves: the CDI spec is missing "
            "or stale (the device plugin writes it at start: restarting its pod rewrites it)")


@check("PRB-002", L, "the probe container starts",
       hint="Pass --probe-image with an image your nodes can pull (a mirror of a CUDA base image). A container "
            "the runtime cannot create (e.g. 'unresolvable CDI devices') points at the toolkit's CDI specs or "
            "runtime configuration on that node.",
       kubectl="kubectl describe pod <probe-pod> (events)",
       detects="probe image cannot be pulled (ImagePullBackOff); container not creatable (CreateContainerError, "
               "e.g. unresolvable CDI device)")
@_from_observations("PRB-002")
def probe_started(inp: CheckInput, obs: ProbeObservations) -> list[Finding]:
    settings = inp.settings
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
            cdi = f" — {_unresolvable_cdi_cause(str(start['message']), p.path)}" \
                if "cdi" in str(start["message"]).lower() else ""
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
def probe_sees_gpus(inp: CheckInput, obs: ProbeObservations) -> list[Finding]:
    settings = inp.settings
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
def probe_injection(inp: CheckInput, obs: ProbeObservations) -> list[Finding]:
    mode_cdi = cdi_expected(inp)

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
