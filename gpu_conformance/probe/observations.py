"""What the probe captured, as plain data: the plan (which nodes, why others not), pods, events and logs.

`plan.py` and `run.py` fill these in (plan / create / wait / capture / delete); the session adds them to the check
input (check_input.py) and `checks/probe_checks.py` judges them there, like any other layer judges the read.
Nothing here talks to the cluster.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpu_conformance.probe.claims import ProbePath, claim_summary
from gpu_conformance.probe.output import ProbeOutput, parse_probe_output

Obj = dict[str, Any]


class NotProbed(StrEnum):
    """Why an eligible GPU node got no probe pod."""

    CORDONED = "cordoned"        # spec.unschedulable: no workload would land there either
    BUSY = "busy"                # every GPU is requested by pods already running there
    NOT_SAMPLED = "not-sampled"  # --probe-nodes chose other nodes


@dataclass(frozen=True)
class Skip:
    kind: NotProbed
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbePlan:
    """Which nodes get a probe pod, and a plain sentence of what that covers (said in the verdict)."""

    targets: list[str] = field(default_factory=list)
    not_probed: dict[str, Skip] = field(default_factory=dict)
    eligible: int = 0   # GPU nodes that passed every earlier layer
    scope: str = ""
    # Per target, the GPU resource its probe pod requests (one the node advertises with room for the probe).
    resources: dict[str, str] = field(default_factory=dict)


@dataclass
class PodObservation:
    """One probe pod as last seen: the object, its events, its (bounded) log, or why it never ran."""

    node: str
    name: str
    resource: str
    pod: Obj | None = None
    events: list[Obj] = field(default_factory=list)
    logs: str = ""
    logs_truncated: bool = False
    logs_error: str = ""
    # The API refused to create the pod (admission webhook / ValidatingAdmissionPolicy): its own message.
    refused: str = ""
    # The pod vanished or got a deletionTimestamp that we did not set.
    gone: str = ""
    # The pod's node no longer exists (a GET of it answered 404): nothing will ever run the pod.
    node_deleted: bool = False
    # How the pod asks for its GPU: "device-plugin", "claim" or "extended-resource" (claims.ProbePath).
    path: str = ProbePath.DEVICE_PLUGIN
    # Its ResourceClaim as last seen (claim and extended-resource paths), None until there is one.
    claim: Obj | None = None

    @property
    def output(self) -> ProbeOutput:
        return parse_probe_output(self.logs)

    @property
    def phase(self) -> str:
        return ((self.pod or {}).get("status") or {}).get("phase", "")

    def event_lines(self) -> list[str]:
        return [f"{e.get('reason')}: {e.get('message')}" for e in self.events]

    def to_dict(self, image: str) -> dict[str, Any]:
        out = self.output
        return {"name": self.name, "node": self.node, "phase": self.phase or ("Refused" if self.refused else "?"),
                "image": image, "resource": self.resource, "path": str(self.path),
                "claim": claim_summary(self.claim), "events": self.event_lines(), "logs": self.logs,
                "logs_truncated": self.logs_truncated, "logs_error": self.logs_error,
                "refused": self.refused, "gone": self.gone, "node_deleted": self.node_deleted,
                "gpus_seen": out.gpus, "visible_devices": out.visible_devices, "cdi": out.injected_by_cdi}


# When a probe object's run will be over (RFC 3339, UTC), written on every pod and namespace the probe creates: a
# concurrent run leaves a live run's objects alone and reports them as a run in progress, not as leftovers.
EXPIRES_ANNOTATION = "gpu-conformance.nvidia.com/expires-at"
# Objects written before that annotation: their run is taken as alive this long after it started (the timestamp
# in its run id, else the object's creation), beyond any probe that runs with the default --probe-timeout.
LIFETIME_WITHOUT_ANNOTATION = 15 * 60.0
_RUN_ID_TIME = re.compile(r"^(\d{8}-\d{6})-")


@dataclass(frozen=True)
class Leftover:
    """A probe namespace or pod of another run: a dead run's leftover, or (expires_in > 0) a run in progress."""

    kind: str          # "namespace", "pod" or "resourceclaimtemplate" (the DRA models' probe)
    name: str
    namespace: str     # for pods
    run_id: str
    age_seconds: float
    # Seconds until its run is over by its own account (expires-at); <= 0: the run is over, the object is left.
    expires_in: float = 0.0

    @property
    def in_progress(self) -> bool:
        return self.expires_in > 0

    @classmethod
    def of(cls, kind: str, obj: dict[str, Any], run_id: str, now: dt.datetime) -> Leftover:
        meta = obj.get("metadata") or {}
        created = _timestamp(meta.get("creationTimestamp"))
        age = (now - created).total_seconds() if created else 0.0
        expires = _expiry(meta, run_id, created)
        return cls(kind, str(meta.get("name", "")), str(meta.get("namespace", "")), run_id, age,
                   (expires - now).total_seconds() if expires else 0.0)

    def describe(self) -> str:
        what = f"namespace {self.name}" if self.kind == "namespace" else f"{self.kind} {self.namespace}/{self.name}"
        running = f", in progress for up to {format_age(self.expires_in)} more" if self.in_progress else ""
        return f"{what} (run {self.run_id or '?'}, age {format_age(self.age_seconds)}{running})"


def _timestamp(value: Any) -> dt.datetime | None:
    try:
        ts = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)


def _expiry(meta: dict[str, Any], run_id: str, created: dt.datetime | None) -> dt.datetime | None:
    """When the object's run is over: its expires-at annotation, else a fixed lifetime from the run's start."""
    stated = _timestamp((meta.get("annotations") or {}).get(EXPIRES_ANNOTATION))
    if stated:
        return stated
    m = _RUN_ID_TIME.match(run_id)
    try:
        started = dt.datetime.strptime(m.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=dt.UTC) if m else created
    except ValueError:
        started = created
    return started + dt.timedelta(seconds=LIFETIME_WITHOUT_ANNOTATION) if started else None


def runs_in_progress(leftovers: list[Leftover]) -> list[str]:
    """One line per other run whose probe objects are still within their lifetime: run id, objects, age."""
    runs: dict[str, list[Leftover]] = {}
    for lo in leftovers:
        if lo.in_progress:
            runs.setdefault(lo.run_id, []).append(lo)
    return [f"run {rid or '?'} ({len(los)} probe object(s), age {format_age(max(lo.age_seconds for lo in los))}, "
            f"done within {format_age(max(lo.expires_in for lo in los))})" for rid, los in runs.items()]


def leftovers_dict(leftovers: list[Leftover]) -> dict[str, list[str]]:
    """The report's view: what dead runs left (a warning) apart from the runs still in progress (information)."""
    return {"leftovers": [lo.describe() for lo in leftovers if not lo.in_progress],
            "other_runs": runs_in_progress(leftovers)}


def format_age(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


@dataclass
class ProbeObservations:
    """Everything one probe run saw. `skipped` set: no pod was created (and why)."""

    run_id: str = ""
    namespace: str = ""
    # "own": a namespace created and deleted by this run; "shared": a namespace the admin created (rbac.yaml).
    mode: str = "own"
    image: str = ""
    # The GPU resource model the probe followed ("device-plugin", "dra-driver", "gpucluster") and, in the DRA
    # models, the ResourceClaimTemplate it created in its namespace ("" if none).
    model: str = "device-plugin"
    template: str = ""
    plan: ProbePlan = field(default_factory=ProbePlan)
    pods: dict[str, PodObservation] = field(default_factory=dict)  # by node
    skipped: str = ""
    # The probe stopped before its pods finished (interrupted, namespace deleted by someone else, API lost).
    aborted: str = ""
    leftovers: list[Leftover] = field(default_factory=list)
    deleted: bool = False
    cleanup_error: str = ""
    seconds: float = 0.0
    requests: int = 0  # API requests of the probe (polls list by label: not one per pod)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "mode": self.mode, "model": self.model, "template": self.template,
                "skipped": self.skipped, "aborted": self.aborted,
                "scope": self.plan.scope, "deleted": self.deleted, "cleanup_error": self.cleanup_error,
                "seconds": round(self.seconds, 2), "requests": self.requests,
                "not_probed": {n: {"reason": str(s.kind), "message": s.message}
                               for n, s in sorted(self.plan.not_probed.items())},
                **leftovers_dict(self.leftovers),
                "pods": [p.to_dict(self.image) for p in self.pods.values()]}
