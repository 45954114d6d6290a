"""When things happened: the timestamps of events, pods and conditions, read so that missing ones are 'unknown'.

Evidence only explains the present if it is newer than what changed since. A FailedCreatePodSandBox event from
the node's bring-up (before the toolkit wrote the nvidia runtime handler) is history once the toolkit is Ready;
an event older than a pod's last container start says nothing about why the pod is stuck now. Every helper here
returns None for a timestamp that is absent or unparsable, and callers say so instead of guessing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 API timestamp ('2026-10-01T09:05:00Z', MicroTime '…:00.123456Z') as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def event_last_seen(event: Obj) -> datetime | None:
    """The last time the event's condition was observed.

    core/v1 Events carry it in lastTimestamp (kubelet's legacy recorder); events written through events.k8s.io/v1
    leave lastTimestamp empty and carry eventTime plus, once repeated, series.lastObservedTime. The latest of the
    three is the truth; none of them present is 'unknown' (creationTimestamp is only the first occurrence).
    """
    times = [parse_time(event.get("lastTimestamp")), parse_time(event.get("eventTime")),
             parse_time((event.get("series") or {}).get("lastObservedTime"))]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def condition_since(obj: Obj, ctype: str, status: str = "True") -> datetime | None:
    """When the condition `ctype` last became `status` (its lastTransitionTime), None when it is not or unknown."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == status:
            return parse_time(c.get("lastTransitionTime"))
    return None


def container_started(status: Obj) -> datetime | None:
    """When the container (as one entry of containerStatuses) was last started, from its current state."""
    state = status.get("state") or {}
    for key in ("running", "terminated"):
        t = parse_time((state.get(key) or {}).get("startedAt"))
        if t is not None:
            return t
    return None


def pod_last_start(pod: Obj) -> datetime | None:
    """The latest moment the pod demonstrably ran: a container (init or main) started, or the pod became Ready.

    Anything a kubelet event said before that moment was followed by a sandbox that worked.
    """
    st = pod.get("status") or {}
    times = [container_started(cs) for cs in (st.get("initContainerStatuses") or [])
             + (st.get("containerStatuses") or [])]
    times.append(condition_since(pod, "Ready"))
    known = [t for t in times if t is not None]
    return max(known) if known else None


def any_container_started(pod: Obj) -> bool:
    """A container of the pod has a running or terminated state: the pod's sandbox existed at that point."""
    st = pod.get("status") or {}
    return any((cs.get("state") or {}).get("running") is not None or (cs.get("state") or {}).get("terminated")
               is not None for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []))


def stamp(t: datetime | None) -> str:
    """A timestamp for a message or evidence: as the API writes it, or 'unknown'."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "unknown"
