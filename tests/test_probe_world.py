"""The probe's world moving (issue 26 item 2): a node deleted under its probe pod, an eviction, a hanging admission
webhook, another run in progress. Each is named at once in its own words, the verdict is INCOMPLETE (not a GPU
failure) and nothing is left behind.

The probe's real I/O runs against `FakeCluster`, a raw_request over a few in-memory objects: no cluster, no network.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from factory import healthy_snapshot
from kubernetes.client.exceptions import ApiException

import gpu_conformance.probe.run as probe_mod
from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.model import LAYER_ORDER, Finding, Status
from gpu_conformance.probe import api as probe_api
from gpu_conformance.probe import leftovers as probe_leftovers
from gpu_conformance.probe import manifests as probe_manifests
from gpu_conformance.probe.observations import ProbeObservations
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
            pod = self.pods.get(parts[-2], {})
            return OK_LOG.encode() if pod.get("status", {}).get("phase") == "Succeeded" else b""
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
def world(monkeypatch: pytest.MonkeyPatch, fake_api_probe: Callable[..., probe_mod.Probe],
          ) -> Callable[..., tuple[FakeCluster, probe_mod.Probe]]:
    """(cluster, probe) over a healthy 3-GPU-node snapshot, with quick polls and quick node checks."""
    monkeypatch.setattr(probe_mod, "NODE_CHECK_AFTER", 0.2, raising=False)
    monkeypatch.setattr(probe_mod, "NODE_CHECK_GAP_MAX", 1.0, raising=False)

    def make(probe_timeout: float = 10.0) -> tuple[FakeCluster, probe_mod.Probe]:
        snap = healthy_snapshot()
        cluster = FakeCluster(snap.gpu_node_names)
        return cluster, fake_api_probe(cluster.request, snap, RUN, probe_timeout)

    return make


def run_probe(probe: probe_mod.Probe) -> ProbeObservations:
    return probe.run(probe.snap.gpu_node_names, (NS, "shared"))


def judged(snap: ClusterSnapshot, settings: Settings, obs: ProbeObservations) -> tuple[str, list[Finding]]:
    """The verdict and every finding of a run whose probe saw `obs` on `snap`."""
    inp = check_input(snap, settings, obs)
    findings = [f for c in catalogue.all_checks() if c.func is not None for f in c.run(inp)]
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
    verdict, findings = judged(probe.snap, probe.settings, probe.obs)
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


# ---- 1. a GPU node deleted while its probe pod is bound ----------------------------------------------------------

def node_gets(cluster: FakeCluster) -> list[str]:
    return [path for method, path in cluster.requests if method == "GET" and path.startswith("/api/v1/nodes/")]


def everyone_succeeds_but(node: str, then: Callable[[FakeCluster, dict[str, Any]], None], at: int = 1) -> Callable:
    """on_poll: every probe pod succeeds at the first poll except the one on `node`, which `then` moves at poll `at`."""
    def on_poll(c: FakeCluster) -> None:
        for pod in list(c.pods.values()):
            if pod["spec"]["nodeName"] != node and c.polls == 1:
                succeed(pod)
            elif pod["spec"]["nodeName"] == node and c.polls == at:
                then(c, pod)

    return on_poll


def test_a_node_deleted_under_its_bound_probe_pod_is_named_at_once_and_incomplete(world) -> None:
    # Was: the pod stayed Pending on a node that no longer exists until --probe-timeout, then PRB-002 "did not
    # finish" and NOT CONFORMANT. No pod GC here (as in the simulated cluster): only a GET of the node can tell.
    cluster, probe = world(probe_timeout=20)
    n2 = probe.snap.gpu_node_names[1]
    cluster.on_poll = everyone_succeeds_but(n2, lambda c, pod: c.nodes.pop(n2))
    t0 = time.monotonic()
    obs = run_probe(probe)
    assert time.monotonic() - t0 < 5, "noticed right away, not after --probe-timeout"
    assert obs.pods[n2].node_deleted and node_gets(cluster) == [f"/api/v1/nodes/{n2}"]
    verdict, findings = judged(probe.snap, probe.settings, probe.obs)
    (warn,) = probe_findings(findings, Status.WARN)
    assert warn.node == n2 and warn.message == f"node {n2} was deleted while its probe pod ran"
    assert warn.evidence["transient"] and not probe_findings(findings, Status.FAIL)
    assert {f.node for f in probe_findings(findings, Status.PASS)} == set(probe.snap.gpu_node_names) - {n2}
    assert verdict == "INCOMPLETE"
    assert obs.deleted and not cluster.pods, "nothing left behind"
    assert f"/{obs.pods[n2].name}/log" not in " ".join(p for _, p in cluster.requests)


def test_a_probe_pod_the_pod_gc_deleted_with_its_node_names_the_node(world) -> None:
    # With kube-controller-manager the pod GC deletes a deleted node's pods: "deleted by someone else" hid why.
    cluster, probe = world()
    n1 = probe.snap.gpu_node_names[0]

    def gc(c: FakeCluster, pod: dict[str, Any]) -> None:
        c.nodes.pop(n1)
        c.pods.pop(pod["metadata"]["name"])

    # Bound and Pending from the first poll, its node looked up once while it waited (there), then node and pod gone.
    cluster.on_poll = everyone_succeeds_but(n1, gc, at=20)
    obs = run_probe(probe)
    asked = node_gets(cluster)
    assert obs.pods[n1].node_deleted and set(asked) == {f"/api/v1/nodes/{n1}"}
    assert len(asked) >= 2  # asked while it waited (the node was there), and once more when the pod vanished
    verdict, findings = judged(probe.snap, probe.settings, probe.obs)
    (warn,) = probe_findings(findings, Status.WARN)
    assert warn.node == n1 and warn.message == f"node {n1} was deleted while its probe pod ran"
    assert verdict == "INCOMPLETE"


def test_waiting_pods_ask_for_their_node_rarely_and_healthy_ones_never(world) -> None:
    # The suite reads the cluster once: a healthy probe makes no node request at all, and a pod stuck for the whole
    # timeout (image still pulling) asks in rounds whose gap doubles, not once per poll.
    cluster, probe = world()
    cluster.on_poll = lambda c: [succeed(p) for p in c.pods.values()]
    run_probe(probe)
    assert node_gets(cluster) == []

    cluster, probe = world(probe_timeout=3)
    obs = run_probe(probe)  # every pod stays Pending, every node exists
    polls = cluster.polls
    asked = len(node_gets(cluster)) / 3
    assert polls > 20 and 2 <= asked <= 6, (polls, asked)  # rounds at 0.2, 0.4, 0.8, 1.6, 2.6 s
    assert not any(p.node_deleted for p in obs.pods.values())
    _, findings = judged(probe.snap, probe.settings, probe.obs)
    assert len([f for f in probe_findings(findings, Status.FAIL) if "did not finish" in f.message]) == 3


# ---- 2. a probe pod evicted --------------------------------------------------------------------------------------

def test_an_evicted_probe_pod_is_named_in_the_kubelets_words_and_incomplete(world) -> None:
    # Was: a Failed pod "ran", its empty log judged: nvidia-smi failed, NOT CONFORMANT for a node low on memory.
    cluster, probe = world()
    n3 = probe.snap.gpu_node_names[2]

    def evict(c: FakeCluster, pod: dict[str, Any]) -> None:
        pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": EVICTED, "containerStatuses": [
            {"name": "gpu-probe", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}],
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                            "message": EVICTED}]}

    cluster.on_poll = everyone_succeeds_but(n3, evict)
    obs = run_probe(probe)
    verdict, findings = judged(probe.snap, probe.settings, probe.obs)
    (warn,) = probe_findings(findings, Status.WARN)
    assert warn.node == n3 and warn.message == f"the probe pod was evicted: {EVICTED}"
    assert warn.evidence["transient"] and not probe_findings(findings, Status.FAIL)
    assert verdict == "INCOMPLETE" and obs.deleted and not cluster.pods


def _disrupted(reason: str = "", message: str = "", condition: str = "", phase: str = "Failed",
               deleting: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [
        {"name": "gpu-probe", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
    if reason:
        status.update(reason=reason, message=message)
    if condition:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": condition,
                                 "message": message}]
    meta: dict[str, Any] = {"name": "gpu-probe-t1-1"}
    if deleting:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "gpu-node-1"}, "status": status}


@pytest.mark.parametrize(("pod", "said"), [
    (_disrupted("Evicted", EVICTED), f"the probe pod was evicted: {EVICTED}"),
    (_disrupted(condition="EvictionByEvictionAPI", message="Eviction API: evicting", phase="Running", deleting=True),
     "the probe pod was evicted through the Eviction API (e.g. kubectl drain): Eviction API: evicting"),
    (_disrupted(condition="PreemptionByScheduler", message="default-scheduler: preempting to accommodate a higher "
                "priority pod", phase="Pending", deleting=True),
     "the probe pod was preempted by the scheduler: default-scheduler: preempting to accommodate a higher priority "
     "pod"),
    (_disrupted(condition="DeletionByPodGC", message="PodGC: node no longer exists"),
     "node gpu-node-1 was deleted while its probe pod ran: PodGC: node no longer exists"),
    (_disrupted("NodeLost", "Node gpu-node-1 which was running pod gpu-probe-t1-1 is unresponsive", phase="Unknown"),
     "node gpu-node-1 was lost while its probe pod ran: Node gpu-node-1 which was running pod gpu-probe-t1-1 is "
     "unresponsive"),
    (_disrupted("Terminated", "Pod was terminated in response to imminent node shutdown."),
     "the probe pod was terminated: Pod was terminated in response to imminent node shutdown."),
    (_disrupted(condition="DeletionByTaintManager", message="Taint manager: deleting due to NoExecute taint",
                phase="Running", deleting=True),
     "the probe pod was deleted for a NoExecute taint on its node: Taint manager: deleting due to NoExecute taint"),
], ids=["evicted", "drained", "preempted", "pod-gc", "node-lost", "node-shutdown", "taint-manager"])
def test_a_pod_the_cluster_took_away_is_said_in_its_own_words_and_incomplete(pod: dict[str, Any], said: str) -> None:
    # Pure judging of what the probe saw: transient for that node (INCOMPLETE), never a GPU failure, and the pod's
    # own words rather than "deleted by someone else" or "nvidia-smi failed".
    from test_probe_checks import observed

    snap, obs = observed(pod=pod)
    p = obs.pods["gpu-node-1"]
    if pod["metadata"].get("deletionTimestamp"):
        p.gone = "probe pod gpu-probe-t1-1 is being deleted by someone else before it finished"  # as the probe sets it
    verdict, findings = judged(snap, Settings(run_id="t1"), obs)
    assert [(f.check_id, f.status, f.message) for f in findings if f.check_id.startswith("PRB-")] == [
        ("PRB-001", Status.WARN, said)]
    assert verdict == "INCOMPLETE"
    from gpu_conformance.probe.states import settled

    assert settled(p, 0.0)  # the wait loop stops at once for it: the same words for waiting and judging


def test_a_finished_pod_is_not_taken_away_by_a_late_condition() -> None:
    from test_probe_checks import observed

    from gpu_conformance.probe.states import taken_away

    pod = _disrupted(condition="DeletionByPodGC", message="PodGC: node no longer exists", phase="Succeeded")
    assert taken_away(observed(pod=pod, logs=OK_LOG)[1].pods["gpu-node-1"]) == ""


# ---- 4. another run in progress ----------------------------------------------------------------------------------

EXPIRES = "gpu-conformance.nvidia.com/expires-at"


def stamp(seconds_from_now: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_id_at(seconds_from_now: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)).strftime("%Y%m%d-%H%M%S") + "-0abc12"


def probe_object(kind: str, name: str, run_id: str, age: float, expires_in: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {probe_manifests.RUN_LABEL: run_id},
                            "creationTimestamp": stamp(-age)}
    if kind != "namespace":
        meta["namespace"] = NS
    if expires_in is not None:
        meta["annotations"] = {EXPIRES: stamp(expires_in)}
    return {"metadata": meta}


LIVE, DEAD, OLD = run_id_at(-300), run_id_at(-7200), "20200101-000000-dead00"


class LabelledObjects:
    """raw_request over other runs' probe namespaces and pods (LIST by label, DELETE recorded)."""

    def __init__(self) -> None:
        self.namespaces = [
            # A concurrent run of an admin in its own namespace, 5 minutes old, with 8 minutes to go.
            probe_object("namespace", f"gpu-conformance-probe-{LIVE}", LIVE, 300, expires_in=480)]
        self.pods = [
            probe_object("pod", "gpu-probe-dead-1", DEAD, 7200, expires_in=-6600),   # its run ended long ago
            probe_object("pod", "gpu-probe-old-1", OLD, 9e7),                        # before the annotation
            probe_object("pod", "gpu-probe-young-1", run_id_at(-120), 120),          # no annotation, 2 min old
        ]
        # A dead run's ResourceClaimTemplate (the DRA models' probe) in the shared namespace.
        self.templates = [probe_object("resourceclaimtemplate", f"gpu-conformance-probe-{DEAD}", DEAD, 7200,
                                       expires_in=-6600)]
        self.deleted: list[str] = []

    def request(self, api: object, method: str, path: str, *_: object, **__: object) -> bytes:
        if method == "DELETE":
            self.deleted.append(path.rsplit("/", 1)[1])
            return b"{}"
        items = (self.namespaces if path == "/api/v1/namespaces" else self.templates if "resource.k8s.io" in path
                 else self.pods)
        return json.dumps({"items": items}).encode()


def test_the_manifests_carry_when_their_run_is_over() -> None:
    from gpu_conformance.probe.manifests import pod_manifest

    settings = Settings(run_id="r1", probe_timeout=300)
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    stated = pod_manifest("r1", "gpu-node-1", "nvidia.com/gpu", settings)["metadata"]["annotations"][EXPIRES]
    lifetime = (dt.datetime.fromisoformat(stated.replace("Z", "+00:00")) - before).total_seconds()
    assert 300 + probe_api.API_OUTAGE_BOUND + probe_api.CLEANUP_BOUND <= lifetime <= 300 + 15 * 60


def test_the_own_namespace_carries_when_its_run_is_over(world, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, probe = world()
    created: list[dict[str, Any]] = []
    serve = cluster.request

    def request(api: object, method: str, path: str, query: list | None = None, body: Any = None,
                *a: object, **kw: object) -> bytes:
        if method == "POST" and path == "/api/v1/namespaces":
            created.append(body)
            cluster.namespaces[body["metadata"]["name"]] = body
            return json.dumps(body).encode()
        if path.endswith("/serviceaccounts/default"):
            return b"{}"
        if method == "DELETE" and path.startswith("/api/v1/namespaces/gpu-conformance-probe-"):
            return b"{}"
        return serve(api, method, path.replace(probe_manifests.own_namespace(RUN), NS), query, body)

    monkeypatch.setattr(probe_api, "raw_request", request)
    cluster.on_poll = lambda c: [succeed(p) for p in c.pods.values()]
    probe.run(probe.snap.gpu_node_names, (probe_manifests.own_namespace(RUN), "own"))
    assert EXPIRES in created[0]["metadata"]["annotations"]


def test_a_concurrent_run_is_in_progress_not_a_leftover(monkeypatch: pytest.MonkeyPatch) -> None:
    # Was: every other run's probe objects were "left by earlier runs", a warning, and `probe cleanup` deleted a
    # live run's pods under it (that run then ended INCOMPLETE, "deleted by someone else").
    from gpu_conformance.plugin import probe_lines

    objects = LabelledObjects()
    monkeypatch.setattr(probe_api, "raw_request", objects.request)
    conn: Any = SimpleNamespace(api=None, server="https://fake", user="u")
    found = {lo.name: lo for lo in probe_leftovers.find_leftovers(probe_api.ProbeApi(conn), run_id="mine")}
    assert {n for n, lo in found.items() if lo.in_progress} == {f"gpu-conformance-probe-{LIVE}", "gpu-probe-young-1"}
    template = f"gpu-conformance-probe-{DEAD}"
    assert {n for n, lo in found.items() if not lo.in_progress} == {"gpu-probe-dead-1", "gpu-probe-old-1", template}

    report = ProbeObservations(leftovers=list(found.values())).to_dict()
    assert [lo.split(" (")[0] for lo in report["leftovers"]] == [
        "pod gpu-conformance-probe/gpu-probe-old-1", "pod gpu-conformance-probe/gpu-probe-dead-1",
        f"resourceclaimtemplate gpu-conformance-probe/{template}"]
    runs = report["other_runs"]
    assert len(runs) == 2 and any(r.startswith(f"run {LIVE} (1 probe object(s), age 5m") for r in runs), runs
    lines = probe_lines(report)
    assert [warn for _, warn in lines] == [True, False]
    assert "3 probe object(s) left by earlier runs" in lines[0][0] and LIVE not in lines[0][0]
    assert lines[1][0].startswith("note: 2 other probe run(s) in progress: ") and LIVE in lines[1][0]


@pytest.mark.parametrize("force", [False, True])
def test_probe_cleanup_spares_a_run_in_progress_unless_forced(monkeypatch: pytest.MonkeyPatch, capsys,
                                                               force: bool) -> None:
    import gpu_conformance.cluster.connect as connect_mod
    from gpu_conformance.cli import main

    objects = LabelledObjects()
    monkeypatch.setattr(probe_api, "raw_request", objects.request)
    monkeypatch.setattr(connect_mod, "connect", lambda kubeconfig, context: SimpleNamespace(
        api=None, server="https://fake", user="u", close=lambda: None))
    assert main(["probe", "cleanup", *(["--force"] if force else [])]) == 0
    out = capsys.readouterr().out
    dead = {"gpu-probe-dead-1", "gpu-probe-old-1", f"gpu-conformance-probe-{DEAD}"}
    live = {f"gpu-conformance-probe-{LIVE}", "gpu-probe-young-1"}
    assert set(objects.deleted) == (dead | live if force else dead)
    if not force:
        assert f"left alone namespace gpu-conformance-probe-{LIVE} (run {LIVE}, age 5m" in out
        assert "another run in progress (--force deletes it)" in out
