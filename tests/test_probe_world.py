"""The probe's world moving (issue 26 item 2): a node deleted under its probe pod, an eviction, a hanging admission
webhook, another run in progress. Each is named at once in its own words, the verdict is INCOMPLETE (not a GPU
failure) and nothing is left behind.

The probe's real I/O runs against `FakeCluster`, a raw_request over a few in-memory objects: no cluster, no network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from factory import healthy_snapshot
from kubernetes.client.exceptions import ApiException

import gpu_conformance.probe as probe_mod
from gpu_conformance import catalogue
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.model import LAYER_ORDER, Finding, Status
from gpu_conformance.probe_observations import ProbeObservations
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import decide

NS = "gpu-conformance-probe"
RUN = "20990101-000000-abcdef"
OK_LOG = ("== nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\nrc=0\n"
          "== env\nNVIDIA_VISIBLE_DEVICES=void\n== devices\n/dev/nvidia0\n/dev/nvidiactl\n== cdi\nnvidia.yaml\n"
          "== end\n")
WEBHOOK_MESSAGE = ('Internal error occurred: failed calling webhook "policy.example.com": failed to call webhook: '
                   'Post "https://policy.example.svc:443/validate?timeout=10s": context deadline exceeded')
EVICTED = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container gpu-probe "
           "was using 10Mi, request is 0, has larger consumption of memory.")


def status_error(code: int, message: str, reason: str = "InternalError") -> ApiException:
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                       "reason": reason, "code": code})
    return ApiException(status=code, reason=reason, body=body)


class FakeCluster:
    """Nodes and probe pods in memory, served as raw_request answers; `on_poll` moves the world between polls."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = {n: {"metadata": {"name": n}} for n in nodes}
        self.pods: dict[str, dict[str, Any]] = {}
        self.namespaces = {NS: {"metadata": {"name": NS}}}
        self.requests: list[tuple[str, str]] = []
        # Answers to pod creation: None binds the pod and lets it succeed; an ApiException is raised.
        self.create_error: ApiException | None = None
        self.on_poll: Callable[[FakeCluster], None] = lambda c: None
        self.polls = 0

    def request(self, api: object, method: str, path: str, query: list | None = None, body: Any = None,
                *_: object, **__: object) -> bytes:
        self.requests.append((method, path))
        parts = path.strip("/").split("/")
        if method == "POST" and path.endswith("/pods"):
            return self._create(body)
        if method == "DELETE" and path.endswith("/pods"):
            self.pods.clear()
            return b"{}"
        if path.endswith("/events") or path == "/api/v1/pods":
            return json.dumps({"items": []}).encode()
        if path.endswith("/pods"):
            self.polls += 1
            self.on_poll(self)
            return json.dumps({"items": list(self.pods.values())}).encode()
        if path.endswith("/log"):
            return OK_LOG.encode()
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            return self._get(self.nodes.get(parts[3]))
        if parts[:3] == ["api", "v1", "nodes"]:
            return json.dumps({"items": list(self.nodes.values()), "metadata": {}}).encode()
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
            return self._get(self.namespaces.get(parts[3]))
        raise AssertionError(f"unexpected request {method} {path}")

    @staticmethod
    def _get(obj: dict | None) -> bytes:
        if obj is None:
            raise status_error(404, "not found", "NotFound")
        return json.dumps(obj).encode()

    def _create(self, body: dict[str, Any]) -> bytes:
        if self.create_error is not None:
            raise self.create_error
        pod = json.loads(json.dumps(body))
        node = pod["metadata"]["annotations"]["gpu-conformance.nvidia.com/target-node"]
        pod["metadata"]["namespace"] = NS
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Pending", "containerStatuses": [
            {"name": "gpu-probe", "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        self.pods[pod["metadata"]["name"]] = pod
        return json.dumps(pod).encode()

    def pod_on(self, node: str) -> dict[str, Any]:
        return next(p for p in self.pods.values() if p["spec"]["nodeName"] == node)


def succeed(pod: dict[str, Any]) -> None:
    pod["status"] = {"phase": "Succeeded", "containerStatuses": [
        {"name": "gpu-probe", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[FakeCluster, probe_mod.Probe]]:
    """(cluster, probe) over a healthy 3-GPU-node snapshot, with quick polls."""
    monkeypatch.setattr(probe_mod, "POLL_INTERVAL", 0.05)

    def make(probe_timeout: float = 10.0) -> tuple[FakeCluster, probe_mod.Probe]:
        snap = healthy_snapshot()
        cluster = FakeCluster(snap.gpu_node_names)
        monkeypatch.setattr(probe_mod, "raw_request", cluster.request)
        conn: Any = SimpleNamespace(api=None, server="https://fake", user="u")
        probe = probe_mod.Probe(conn, Settings(run_id=RUN, probe_timeout=probe_timeout), snap)
        snap.probe = probe.obs
        return cluster, probe

    return make


def run_probe(probe: probe_mod.Probe) -> ProbeObservations:
    return probe.run(probe.snap.gpu_node_names, (NS, "shared"))


def judged(snap: ClusterSnapshot, settings: Settings) -> tuple[str, list[Finding]]:
    """The verdict and every finding of a run whose probe observations are in `snap.probe`."""
    findings = [f for c in catalogue.all_checks() if c.func is not None for f in c.run(snap, settings)]
    return decide(catalogue.all_checks(), findings, snap.gpu_node_names, list(LAYER_ORDER)).overall, findings


def probe_findings(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.check_id.startswith("PRB-") and f.status == status]


# ---- 3. a hanging admission webhook ------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [500, 504])
def test_a_hanging_webhook_is_a_refusal_in_its_own_words_not_an_outage(world, code: int) -> None:
    # Was: HTTP 500 retried for 30 s as an API-server outage, then "kept failing: HTTP 500" (exit 3), the webhook's
    # name and its timeout lost.
    cluster, probe = world()
    cluster.create_error = status_error(code, WEBHOOK_MESSAGE, "InternalError" if code == 500 else "Timeout")
    t0 = time.monotonic()
    obs = run_probe(probe)
    assert time.monotonic() - t0 < 5, "a webhook failure is not retried as an outage"
    creates = [r for r in cluster.requests if r[0] == "POST"]
    assert len(creates) == 3  # one per pod: not retried
    assert not obs.aborted and all(p.refused == WEBHOOK_MESSAGE for p in obs.pods.values())
    verdict, findings = judged(probe.snap, probe.settings)
    warns = probe_findings(findings, Status.WARN)
    assert [f.message for f in warns] == [f"the cluster refused the probe pods: {WEBHOOK_MESSAGE}"]  # said once
    assert warns[0].evidence["transient"] and not probe_findings(findings, Status.FAIL)
    assert verdict == "INCOMPLETE" and obs.deleted


def test_an_outage_that_outlasts_the_retries_says_the_last_status_message(world, monkeypatch) -> None:
    cluster, probe = world()
    probe.api.bound = 0.3
    cluster.create_error = status_error(500, "etcdserver: request timed out")
    with pytest.raises(ClusterAccessError) as exc:
        run_probe(probe)
    assert "HTTP 500" in str(exc.value) and "etcdserver: request timed out" in str(exc.value)
    assert len([r for r in cluster.requests if r[0] == "POST"]) > 3  # retried: an outage, not a refusal
