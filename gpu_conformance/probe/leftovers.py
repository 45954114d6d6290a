"""Probe objects other runs left behind (a kill -9, a lost node) or still own (a concurrent run), found by the
probe's run-id label, and their deletion (`gpu-conformance probe cleanup`).
"""

from __future__ import annotations

import datetime as dt
import logging

from gpu_conformance.cluster.connect import Connection
from gpu_conformance.cluster.snapshot import labels_of, name_of
from gpu_conformance.probe.api import ProbeApi, ProbeApiError
from gpu_conformance.probe.claims import RESOURCE_API
from gpu_conformance.probe.manifests import RUN_LABEL, SHARED_NAMESPACE
from gpu_conformance.probe.observations import Leftover

log = logging.getLogger("gpu_conformance.probe")


def find_leftovers(api: ProbeApi, run_id: str = "") -> list[Leftover]:
    """Probe namespaces and pods of other runs, found by the probe's run-id label: a dead run's leftovers (a
    kill -9, a lost node) or a concurrent run's live objects (Leftover.in_progress, from their expires-at)."""
    now = dt.datetime.now(dt.UTC)
    sel = [("labelSelector", RUN_LABEL)]
    out: list[Leftover] = []
    namespaces = set()  # listed already, or being deleted (their pods go with them)
    for ns in api.items("/api/v1/namespaces", sel):
        rid = labels_of(ns).get(RUN_LABEL, "")
        if rid == run_id:
            continue
        namespaces.add(name_of(ns))
        if not ns["metadata"].get("deletionTimestamp"):
            out.append(Leftover.of("namespace", ns, rid, now))
    for p in api.items("/api/v1/pods", sel):
        rid = labels_of(p).get(RUN_LABEL, "")
        ns = p["metadata"].get("namespace", "")
        if rid != run_id and ns not in namespaces and not p["metadata"].get("deletionTimestamp"):
            out.append(Leftover.of("pod", p, rid, now))
    for t in _shared_templates(api, sel):
        rid = labels_of(t).get(RUN_LABEL, "")
        if rid != run_id and not t["metadata"].get("deletionTimestamp"):
            out.append(Leftover.of("resourceclaimtemplate", t, rid, now))
    return sorted(out, key=lambda lo: -lo.age_seconds)


def _shared_templates(api: ProbeApi, sel: list[tuple[str, str]]) -> list[dict]:
    """ResourceClaimTemplates of the DRA models' probe in the shared namespace (a run's own namespace goes whole):
    none where the cluster has no resource.k8s.io API, the namespace does not exist or listing them is not allowed."""
    try:
        return api.items(f"{RESOURCE_API}/namespaces/{SHARED_NAMESPACE}/resourceclaimtemplates", sel)
    except ProbeApiError as e:
        log.debug("cannot list probe ResourceClaimTemplates: %s", e)
        return []


def list_leftovers(conn: Connection, run_id: str) -> list[Leftover]:
    """find_leftovers for a run: a warning's worth of information, so a refusal to list is not an error."""
    try:
        return find_leftovers(ProbeApi(conn), run_id)
    except ProbeApiError as e:
        log.debug("cannot list leftover probe objects: %s", e)
        return []


def delete_leftovers(api: ProbeApi, leftovers: list[Leftover]) -> list[str]:
    """Delete what find_leftovers found; returns one line per object that could not be deleted."""
    errors = []
    for lo in leftovers:
        path = {"namespace": f"/api/v1/namespaces/{lo.name}",
                "resourceclaimtemplate": f"{RESOURCE_API}/namespaces/{lo.namespace}/resourceclaimtemplates/{lo.name}",
                }.get(lo.kind, f"/api/v1/namespaces/{lo.namespace}/pods/{lo.name}")
        try:
            api.request("DELETE", path, body={"propagationPolicy": "Background", "gracePeriodSeconds": 0})
        except ProbeApiError as e:
            if e.status != 404:
                errors.append(f"{lo.describe()}: {e.message}")
    return errors
