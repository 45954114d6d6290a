"""Put a reused simulated cluster back to the objects its install left (issue 24 item 3).

The fault matrix used to boot a cluster per fault (boot ~3 s, install ~4 to 6 s, stop ~2 s of a ~13 s
fault). A fault whose changes are all API objects, container logs and host faults (the ConfigMap the
operand loop reads) can be undone instead: `capture` records every object of every listable resource
(found by discovery, so a fault that touches a kind nobody thought of is still seen) and the log files;
`undo` deletes what was added, recreates what was removed and writes back what was changed, then waits
until `differences` against the capture is empty. A non-empty result means the cluster is not the one a
fresh install gives, and the caller boots a fresh one: a fault never poisons the next.

What "the same objects" means is what two fresh installs share: uids, resourceVersions, generations,
timestamps, pod IPs and the random suffix of a generated name differ between any two installs, so they are
left out (a DaemonSet's pod is known by its DaemonSet and node, a Deployment's by its ReplicaSet). Events are
compared by what happened to what kind (reason, type), not by their generated names and counts.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpu_conformance.sim.services.json_tree import without
from gpu_conformance.sim.services.kube_client import Kube

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (resource path, namespace, name)

# Resources that change on their own on a healthy idle cluster (heartbeats, the apiserver's bookkeeping) or
# repeat another resource (events.k8s.io is the core Event again): never a fault's change to undo.
VOLATILE = frozenset({"leases", "endpoints", "endpointslices", "componentstatuses", "flowschemas",
                      "prioritylevelconfigurations", "apiservices"})
SKIPPED_GROUPS = frozenset({"events.k8s.io"})
# Set once at creation by whoever created the object, different on every install.
META_VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink")
# Fields a status carries that differ between two installs of the same cluster (times, addresses, counters
# of the controller's own progress), at any depth.
STATUS_VOLATILE = frozenset({"lastHeartbeatTime", "lastTransitionTime", "lastUpdateTime", "lastProbeTime",
                             "startTime", "startedAt", "finishedAt", "containerID", "imageID", "podIP", "podIPs",
                             "hostIP", "hostIPs", "observedGeneration", "collisionCount"})
SETTLE_TIMEOUT = 10.0  # every undoable fault of the matrix converged within 5 s (measured)
TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")


@dataclass(frozen=True)
class Resource:
    path: str         # collection path across namespaces: /api/v1/pods, /apis/apps/v1/daemonsets
    kind: str
    namespaced: bool
    has_status: bool


@dataclass
class Capture:
    """Every object of every listable resource, and the container log files, at one moment."""

    resources: list[Resource]
    objects: dict[Key, Obj]
    logs: dict[str, bytes] = field(default_factory=dict)


def discover(kube: Kube) -> list[Resource]:
    """Every resource that can be listed, created and deleted, at its group's preferred version."""
    versions = ["/api/v1"]
    for g in kube.request("GET", "/apis").get("groups") or []:
        if g["name"] not in SKIPPED_GROUPS:
            versions.append(f"/apis/{g['preferredVersion']['groupVersion']}")
    out: list[Resource] = []
    for base in versions:
        items = kube.request("GET", base).get("resources") or []
        subs = {r["name"] for r in items if "/" in r["name"]}
        for r in items:
            verbs = set(r.get("verbs") or [])
            if "/" in r["name"] or r["name"] in VOLATILE or not {"list", "create", "delete"} <= verbs:
                continue
            out.append(Resource(f"{base}/{r['name']}", r["kind"], bool(r.get("namespaced")),
                                f"{r['name']}/status" in subs))
    return out


def capture(kube: Kube, logs_dir: Path | None = None, resources: list[Resource] | None = None) -> Capture:
    resources = discover(kube) if resources is None else resources
    objects: dict[Key, Obj] = {}
    for r in resources:
        try:
            items = kube.request("GET", r.path).get("items") or []
        except ApiException as e:
            if e.status == 404:  # a CRD deleted since discovery: none of its objects exist
                continue
            raise
        for o in items:
            meta = o.get("metadata") or {}
            objects[(r.path, meta.get("namespace", ""), meta["name"])] = {**o, "kind": r.kind}
    logs = {p.name: p.read_bytes() for p in sorted(logs_dir.iterdir()) if p.is_file()} \
        if logs_dir is not None and logs_dir.is_dir() else {}
    return Capture(resources, objects, logs)


# ---- comparison ------------------------------------------------------------------------------
def _scrub(value: Any) -> Any:
    return without(value, lambda key, _value: key in STATUS_VOLATILE)


def _owner(o: Obj) -> Obj | None:
    return next((r for r in o["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def identity(key: Key, o: Obj) -> tuple[str, ...]:
    """What an object is across installs: its name, or for a generated name its generator (and a DaemonSet
    pod's node, the one thing that tells two of its pods apart)."""
    path, ns, name = key
    meta = o["metadata"]
    gen = meta.get("generateName")
    if not gen:
        return (path, ns, name)
    owner = _owner(o)
    node = (o.get("spec") or {}).get("nodeName", "") if owner and owner.get("kind") == "DaemonSet" else ""
    return (path, ns, "generated:" + gen, node)


def comparable(o: Obj) -> Obj:
    """The object without what differs between two installs of the same cluster."""
    o = copy.deepcopy(o)
    meta = o["metadata"]
    for k in META_VOLATILE:
        meta.pop(k, None)
    if meta.get("generateName"):
        meta.pop("name", None)
        owner = _owner(o)
        if not (owner and owner.get("kind") == "DaemonSet"):
            (o.get("spec") or {}).pop("nodeName", None)  # where the scheduler put a Deployment's pod
    for r in meta.get("ownerReferences") or []:
        r.pop("uid", None)
    # Revision counters a rollout back to the same template bumps (a controller's bookkeeping).
    (meta.get("annotations") or {}).pop("deprecated.daemonset.template.generation", None)
    if o.get("kind") == "ControllerRevision":
        o.pop("revision", None)
    if "status" in o:
        o["status"] = _scrub(o["status"])
    if "spec" in o:
        o["spec"] = _unsuffixed(o["spec"])
    return o


def _unsuffixed(value: Any) -> Any:
    """The API server names each pod's service-account token volume with a random suffix."""
    if isinstance(value, dict):
        return {k: _unsuffixed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unsuffixed(v) for v in value]
    if isinstance(value, str) and TOKEN_VOLUME.fullmatch(value):
        return TOKEN_VOLUME.pattern.split("-[")[0]
    return value


def _events(objs: Iterable[tuple[Key, Obj]]) -> Counter[tuple[str, ...]]:
    return Counter((k[1], o.get("involvedObject", {}).get("kind", ""), o.get("reason", ""), o.get("type", ""))
                   for k, o in objs)


def differences(before: Capture, after: Capture) -> list[str]:
    """One line per object that is not as `before` had it (empty: the same cluster, as two installs agree)."""
    def split(c: Capture) -> tuple[dict[tuple[str, ...], list[Obj]], list[tuple[Key, Obj]]]:
        by_id: dict[tuple[str, ...], list[Obj]] = {}
        events = []
        for k, o in c.objects.items():
            if o["kind"] == "Event":
                events.append((k, o))
            else:
                by_id.setdefault(identity(k, o), []).append(comparable(o))
        return by_id, events

    b, b_events = split(before)
    a, a_events = split(after)
    out = []
    for ident in sorted(set(b) | set(a)):
        was, now = b.get(ident, []), a.get(ident, [])
        name = "/".join(x for x in ident if x)
        if not now:
            out.append(f"missing: {name}")
        elif not was:
            out.append(f"added: {name}")
        elif sorted(map(repr, was)) != sorted(map(repr, now)):
            out.append(f"changed: {name}")
    ev_b, ev_a = _events(b_events), _events(a_events)
    out += [f"events: {k} {ev_b[k]} -> {ev_a[k]}" for k in sorted(set(ev_b) | set(ev_a)) if ev_b[k] != ev_a[k]]
    if before.logs != after.logs:
        changed = sorted(n for n in set(before.logs) | set(after.logs) if before.logs.get(n) != after.logs.get(n))
        out.append(f"container logs: {', '.join(changed)}")
    return out


# ---- undo ----------------------------------------------------------------------------------------
def _path(r: Resource, o: Obj) -> str:
    ns = o["metadata"].get("namespace")
    if not r.namespaced or not ns:
        return f"{r.path}/{o['metadata']['name']}"
    base, plural = r.path.rsplit("/", 1)
    return f"{base}/namespaces/{ns}/{plural}/{o['metadata']['name']}"


def _delete(kube: Kube, r: Resource, o: Obj) -> None:
    with contextlib.suppress(ApiException):  # already gone (a cascade got there first)
        kube.request("DELETE", _path(r, o), body={"propagationPolicy": "Background", "gracePeriodSeconds": 0})


def _rebased(baseline: Any, current: Any, now: str) -> Any:
    """The baseline's status to write back onto the current object: what differs between installs (addresses,
    container ids, times: STATUS_VOLATILE) stays the current object's, matched by a list item's name or type;
    a condition whose status changes gets the time now (a heartbeat minutes old would make the node controller
    act, and the API server refuses a pod's assigned addresses changed)."""
    if isinstance(baseline, dict):
        cur = current if isinstance(current, dict) else {}
        out = {}
        for k, v in baseline.items():
            if k in STATUS_VOLATILE:
                if k in cur:
                    out[k] = cur[k]
                elif k.startswith("last") or k.endswith("Time"):
                    out[k] = now
                else:
                    out[k] = v
            else:
                out[k] = _rebased(v, cur.get(k), now)
        for k in STATUS_VOLATILE & cur.keys() - out.keys():
            out[k] = cur[k]
        if "status" in baseline and cur.get("status") != baseline.get("status"):
            for k in ("lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime"):
                if k in out:
                    out[k] = now
        return out
    if isinstance(baseline, list):
        def key(x: Any) -> Any:
            return (x.get("name"), x.get("type")) if isinstance(x, dict) else None
        by_key = {key(x): x for x in current or [] if isinstance(current, list)} if isinstance(current, list) else {}
        return [_rebased(x, by_key.get(key(x)), now) for x in baseline]
    return baseline


def _put_back(kube: Kube, r: Resource, was: Obj, now_obj: Obj) -> None:
    """Write the baseline's content over the current object (its identity kept), field by field: only what
    differs as two installs would not differ (a replacement pod keeps its own token volume, which the API
    server refuses to change)."""
    body = {k: copy.deepcopy(v) for k, v in now_obj.items() if k != "status"}
    changed = False
    for k in (set(was) | set(now_obj)) - {"status", "metadata", "kind", "apiVersion"}:
        # Compared with each object's own metadata: a generated pod's node is its identity only under a DaemonSet.
        if comparable({"metadata": was["metadata"], k: was.get(k)}) != comparable(
                {"metadata": now_obj["metadata"], k: now_obj.get(k)}):
            changed = True
            if k in was:
                body[k] = copy.deepcopy(was[k])
            else:
                body.pop(k, None)
    for k in ("labels", "annotations"):
        if (was["metadata"].get(k) or {}) != (now_obj["metadata"].get(k) or {}):
            body["metadata"][k] = was["metadata"].get(k) or {}
            changed = True
    if changed:
        now_obj = kube.request("PUT", _path(r, now_obj), body=body)
    if r.has_status and "status" in was and _scrub(was["status"]) != _scrub(now_obj.get("status")):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # A merge patch, not a PUT: no resourceVersion to lose to a controller's write in between.
        kube.request("PATCH", _path(r, now_obj) + "/status",
                     body={"status": _rebased(was["status"], now_obj.get("status"), stamp)},
                     content_type="application/merge-patch+json")


def _recreate(kube: Kube, r: Resource, was: Obj, uids: dict[tuple[str, str], str]) -> None:
    body = copy.deepcopy(was)
    status = body.pop("status", None)
    for k in META_VOLATILE:
        body["metadata"].pop(k, None)
    for ref in body["metadata"].get("ownerReferences") or []:
        ref["uid"] = uids.get((ref["kind"], ref["name"]), ref.get("uid", ""))
    body["metadata"].pop("generateName", None)
    ns = body["metadata"].get("namespace")
    base, plural = r.path.rsplit("/", 1)
    created = kube.request("POST", f"{base}/namespaces/{ns}/{plural}" if r.namespaced and ns else r.path, body=body)
    if r.has_status and status:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.request("PUT", _path(r, created) + "/status",
                     body={**created, "status": _rebased(status, None, stamp)})


def undo(kube: Kube, baseline: Capture, logs_dir: Path | None = None,
         timeout: float = SETTLE_TIMEOUT) -> list[str]:
    """Bring the cluster back to `baseline`; return what still differs once it stopped changing (empty: done).

    Order matters: the host-fault ConfigMap first (the operand loop stops playing the fault), then objects
    added (their controllers see them go), then objects changed, then objects missing. A pod a controller
    replaced is not recreated under its old name: the replacement gets the old one's status (what kubelet
    reports once it runs), since generated names differ between installs anyway.
    """
    if logs_dir is not None:
        for name, data in baseline.logs.items():
            target = logs_dir / name
            if not target.exists() or target.read_bytes() != data:
                tmp = target.with_suffix(".undo")
                tmp.write_bytes(data)
                tmp.replace(target)
    res = {r.path: r for r in baseline.resources}
    end = time.monotonic() + timeout
    errors: list[str] = []
    clean = 0
    while True:
        now = capture(kube, logs_dir, baseline.resources)
        left = differences(baseline, now)
        # Undone means undone twice in a row: a loop or controller still acting on the fault (the operand loop
        # restarting a mended driver, the node controller) would otherwise change the cluster after the check.
        clean = 0 if left else clean + 1
        if clean == 2:
            return []
        if left and time.monotonic() > end:
            return left + [e[:300] for e in errors[:3]]
        errors = _undo_round(kube, baseline, now, res) if left else []
        time.sleep(0.3)


def _undo_round(kube: Kube, baseline: Capture, now: Capture, res: dict[str, Resource]) -> list[str]:
    """One pass of write-backs; returns the API's refusals (other than conflicts, which the next pass retries)."""
    errors: list[str] = []
    b_ids = {identity(k, o): (k, o) for k, o in baseline.objects.items()}
    n_ids: dict[tuple[str, ...], list[tuple[Key, Obj]]] = {}
    for k, o in now.objects.items():
        n_ids.setdefault(identity(k, o), []).append((k, o))
    # Host faults first: the loop stops holding stages for a fault that is over.
    order = sorted(b_ids, key=lambda i: (i[0] != "/api/v1/configmaps", i[0] != "/api/v1/nodes"))
    for ident in order:
        key, was = b_ids[ident]
        live = [x for x in n_ids.get(ident, []) if not x[1]["metadata"].get("deletionTimestamp")]
        if not live:
            continue
        k, cur = live[0]
        if was["kind"] == "Event":
            continue  # events are only ever added back or taken away, never edited into shape
        if comparable(was) != comparable(cur):
            try:
                _put_back(kube, res[key[0]], was, cur)
            except ApiException as e:  # a controller's write in between (409): the next round again
                if e.status != 409:
                    errors.append(f"{e.status} writing back {'/'.join(x for x in key if x)}: {e.body or e.reason}")
    # Added objects: deleted. An added namespace is emptied here and finalized once empty, the namespace
    # controller's own steps: it would first wait out its pods' grace and its own requeue (measured: 5 to 11 s
    # for the probe's namespace or the busy workloads', of a ~7 s fault).
    added_ns = _namespaces(now) - _namespaces(baseline)
    for ns in sorted(added_ns):
        ns_obj = now.objects[("/api/v1/namespaces", "", ns)]
        if not ns_obj["metadata"].get("deletionTimestamp"):
            _delete(kube, res["/api/v1/namespaces"], ns_obj)
    for ident, items in n_ids.items():
        for k, o in items if ident not in b_ids else items[1:]:
            if not o["metadata"].get("deletionTimestamp") and o["kind"] != "Namespace":
                _delete(kube, res[k[0]], o)
    for ns in sorted(added_ns):
        if not any(k[1] == ns for k in now.objects):
            with contextlib.suppress(ApiException):  # gone already
                kube.request("PUT", f"/api/v1/namespaces/{ns}/finalize",
                             body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                                   "spec": {"finalizers": []}})
    # Missing objects: what a controller brings back (its own pods) is left to it; the rest is recreated.
    uids = {(o["kind"], k[2]): o["metadata"].get("uid", "") for k, o in now.objects.items()}
    for ident, (key, was) in b_ids.items():
        if ident in n_ids:
            continue
        if _owner(was) is not None and _owner(was).get("kind") in ("DaemonSet", "ReplicaSet", "Job"):
            continue
        if was["metadata"].get("namespace") and was["metadata"]["namespace"] not in _namespaces(now):
            continue  # its namespace is being recreated first
        try:
            _recreate(kube, res[key[0]], was, uids)
        except ApiException as e:
            if e.status != 409:
                errors.append(f"{e.status} recreating {'/'.join(x for x in key if x)}: {e.body or e.reason}")
    return errors


def _namespaces(c: Capture) -> set[str]:
    return {k[2] for k in c.objects if k[0] == "/api/v1/namespaces"}
