"""The probe's plan: which GPU nodes get a probe pod and which path each takes to its GPU; the others get a reason.

Pure functions of the snapshot and the settings (the run feeds in what it read: GPUs in use per node, the
scheduler's events), so one set of words serves the run (`run.py`) and the judging (`checks/probe_checks.py`).
A node is not probed when it is cordoned, when every GPU it offers is taken (busy, not broken) or when
--probe-nodes chose other nodes; after the wait, the scheduler's own "Insufficient"/"cannot allocate" on a node
that does advertise GPUs moves it to busy too (`scheduler_busy`).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from gpu_conformance.cluster.gpu_usage import FINISHED, pod_gpu_requests
from gpu_conformance.cluster.selectors import matches, parse_probe_nodes
from gpu_conformance.cluster.snapshot import (
    GPU_RESOURCE,
    ClusterSnapshot,
    advertised_gpu_resources,
    gpu_resources,
    labels_of,
    name_of,
)
from gpu_conformance.probe.claims import CANNOT_ALLOCATE, DEVICE_CLASS, ProbePath
from gpu_conformance.probe.devices import device_holders, node_devices
from gpu_conformance.probe.observations import NotProbed, PodObservation, ProbeObservations, ProbePlan, Skip
from gpu_conformance.probe.states import taken_away
from gpu_conformance.settings import Settings


# ---- which nodes ------------------------------------------------------------------------------
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


# ---- which path -------------------------------------------------------------------------------
def extended_resource_class(snap: ClusterSnapshot, resource: str = GPU_RESOURCE) -> str:
    """The DeviceClass that maps `resource` (spec.extendedResourceName), '' when none does."""
    for dc in snap.device_classes:
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


def pod_requests(snap: ClusterSnapshot, model: str, plan: ProbePlan) -> dict[str, tuple[ProbePath, str]]:
    """Per target node, the path its probe pod takes and what it asks for: one device of the GPU DeviceClass (claim),
    nvidia.com/gpu backed by a DeviceClass (extended resource), or the GPU resource the plan chose for the node."""
    paths = plan_paths(model, plan.targets, extended_resource_class(snap))
    out: dict[str, tuple[ProbePath, str]] = {}
    for n in plan.targets:
        path = paths[n]
        res = (DEVICE_CLASS if path == ProbePath.CLAIM else GPU_RESOURCE
               if path == ProbePath.EXTENDED_RESOURCE else
               plan.resources.get(n) or gpu_resource_for(snap.node_by_name[n]))
        out[n] = (path, res)
    return out
