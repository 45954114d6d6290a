"""The probe's run: the suite's only writes. A pod per target node that requests a GPU with no runtimeClassName.

This module only creates, waits, captures and deletes; `plan.py` decides which nodes to probe and how,
`states.py` when a pod has said all it will say, and `checks/probe_checks.py` judges what was captured.
Two namespace modes:
- shared: a namespace an admin created once (rbac.yaml's `gpu-conformance-probe`, or --probe-namespace)
  with a namespaced Role; runs are kept apart by the run-id label on their pods, which are deleted by it.
- own: a namespace `gpu-conformance-probe-<run-id>` created and deleted by this run (needs cluster-wide
  create/delete of namespaces: for admins).
Cleanup runs in a `finally` (errors, timeout, Ctrl-C, SIGTERM via gpu_conformance.signals) and is not cut
short by a second signal. Transient API errors are retried within a bound, so an API-server restart
mid-probe neither fails the run nor leaks its pods.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpu_conformance.cluster.connect import Connection
from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.errors import ClusterAccessError, ConformanceError, UsageError, internal_error
from gpu_conformance.probe.api import CLEANUP_BOUND, ProbeApi, ProbeApiError
from gpu_conformance.probe.claims import (
    RESOURCE_API,
    ProbePath,
    claim_for,
    template_manifest,
    template_name,
)
from gpu_conformance.probe.manifests import (
    CONTAINER,
    MANAGED_BY,
    RUN_LABEL,
    SHARED_NAMESPACE,
    expires_at,
    own_namespace,
    pod_manifest,
    pod_name,
)
from gpu_conformance.probe.observations import EXPIRES_ANNOTATION, PodObservation, ProbeObservations
from gpu_conformance.probe.plan import gpus_in_use, plan_probe, pod_requests, scheduler_busy, skip_claimed_nodes
from gpu_conformance.probe.states import settled, taken_away, unschedulable
from gpu_conformance.resource_model import resource_model
from gpu_conformance.settings import Settings
from gpu_conformance.signals import interruption, signals_deferred

log = logging.getLogger("gpu_conformance.probe")

# Pods created and logs read at once: enough for 1,000 nodes in seconds, gentle on the API server.
CONCURRENCY = 16
# The probe prints about 1 KB; a chatty or hostile image must not fill memory and reports.
LOG_LIMIT_BYTES = 32 * 1024
POLL_INTERVAL = 1.0
# Up to this many nodes to probe, GPUs in use are read per node (2 rounds of CONCURRENCY requests); above it the
# scheduler's verdict on the probe pods says which nodes are fully taken: no read grows with the cluster's pods.
PER_NODE_LISTS_MAX = 2 * CONCURRENCY
# A bound probe pod that has not finished after this long has its node looked up (deleted under it?), in rounds
# whose gap doubles up to NODE_CHECK_GAP_MAX; a round GETs at most NODE_CHECKS_PER_ROUND nodes.
NODE_CHECK_AFTER = 5.0
NODE_CHECK_GAP_MAX = 30.0
NODE_CHECKS_PER_ROUND = 2 * CONCURRENCY


class NodeChecks:
    """Which probe pods' nodes to GET in this poll: the suite reads the cluster once, so only pods that give a reason.

    A pod that vanished is asked about once (did its node go, so the pod GC deleted it?). A pod bound for
    NODE_CHECK_AFTER seconds that has not finished is asked about in rounds whose gap doubles up to
    NODE_CHECK_GAP_MAX, at most NODE_CHECKS_PER_ROUND nodes a round (those asked longest ago first): a healthy
    probe, done in seconds, asks nothing, and the count stays bounded however many nodes are stuck.
    """

    def __init__(self) -> None:
        self.bound_since: dict[str, float] = {}
        self.asked: dict[str, float] = {}
        self.asked_vanished: set[str] = set()
        self.next_round = 0.0
        self.gap = NODE_CHECK_AFTER

    def due(self, pods: list[PodObservation], now: float) -> list[PodObservation]:
        vanished = [p for p in pods
                    if p.gone and _bound(p) and not p.node_deleted and p.name not in self.asked_vanished]
        self.asked_vanished.update(p.name for p in vanished)
        waiting: list[PodObservation] = []
        for p in pods:
            if _bound(p) and not p.gone and not settled(p, 0.0):
                self.bound_since.setdefault(p.name, now)
                if now - self.bound_since[p.name] >= NODE_CHECK_AFTER:
                    waiting.append(p)
        if waiting and now >= self.next_round:
            waiting = sorted(waiting, key=lambda p: self.asked.get(p.name, 0.0))[:NODE_CHECKS_PER_ROUND]
            self.next_round, self.gap = now + self.gap, min(2 * self.gap, NODE_CHECK_GAP_MAX)
        else:
            waiting = []
        for p in waiting:
            self.asked[p.name] = now
        return vanished + waiting


def _bound(p: PodObservation) -> bool:
    return bool(((p.pod or {}).get("spec") or {}).get("nodeName"))


def resolve_namespace(api: ProbeApi, settings: Settings) -> tuple[str, str]:
    """(namespace, mode): the admin's namespace when named or present, else one of this run's own."""
    if settings.probe_namespace:
        try:
            ns = api.get_or_none(f"/api/v1/namespaces/{settings.probe_namespace}")
        except ProbeApiError as e:
            raise ClusterAccessError(f"cannot get namespace {settings.probe_namespace} (--probe-namespace): "
                                     f"{e.message}") from None
        if ns is None or ns.get("metadata", {}).get("deletionTimestamp"):
            raise UsageError(f"--probe-namespace {settings.probe_namespace} does not exist (create it as in "
                             "rbac.yaml, or leave the option out to let an admin run create its own)")
        return settings.probe_namespace, "shared"
    try:
        ns = api.get_or_none(f"/api/v1/namespaces/{SHARED_NAMESPACE}")
    except ProbeApiError:
        ns = None  # not allowed to look: fall back to our own namespace, whose permissions are checked next
    if ns is not None and not ns.get("metadata", {}).get("deletionTimestamp"):
        return SHARED_NAMESPACE, "shared"
    return own_namespace(settings.run_id), "own"


def required_permissions(namespace: str, mode: str, dra: bool = False) -> list[tuple[str, str, str, str]]:
    """(verb, group, resource, namespace) the probe needs in this mode (SelfSubjectAccessReview); `dra`: the
    cluster runs a DRA model, so the probe also creates its ResourceClaimTemplate and reads its claims."""
    pods = [("create", "", "pods", namespace), ("list", "", "pods", namespace),
            ("get", "", "pods/log", namespace), ("list", "", "events", namespace)]
    if dra:
        pods += [("create", "resource.k8s.io", "resourceclaimtemplates", namespace),
                 ("list", "resource.k8s.io", "resourceclaims", namespace)]
        if mode == "shared":
            pods.append(("delete", "resource.k8s.io", "resourceclaimtemplates", namespace))
    if mode == "shared":
        return [*pods, ("deletecollection", "", "pods", namespace)]
    return [("create", "", "namespaces", ""), ("delete", "", "namespaces", ""), *pods]


class Probe:
    def __init__(self, conn: Connection, settings: Settings, snap: ClusterSnapshot) -> None:
        self.api = ProbeApi(conn)
        self.settings = settings
        self.snap = snap
        self.obs = ProbeObservations(run_id=settings.run_id, image=settings.probe_image)

    # ---- the run ---------------------------------------------------------------------------

    def run(self, eligible: list[str], namespace: tuple[str, str] | None = None) -> ProbeObservations:
        """Probe the eligible nodes once. Raises ClusterAccessError (API lost), KeyboardInterrupt (signals)."""
        t0 = time.monotonic()
        obs = self.obs
        try:
            if not eligible:
                obs.skipped = "no GPU node passed the earlier layers; nothing to probe"
                return obs
            # GPUs in use are read per node for the nodes a probe pod would go to, when they are few; beyond that
            # the scheduler's verdict on the probe pods says which nodes are fully taken (scheduler_busy).
            obs.model = str(resource_model(self.snap))
            obs.plan = plan_probe(self.snap, self.settings, eligible, {})
            # In the DRA models no pod requests nvidia.com/gpu from a device plugin: nothing to count per node.
            if obs.model == "device-plugin" and 0 < len(obs.plan.targets) <= PER_NODE_LISTS_MAX:
                obs.plan = plan_probe(self.snap, self.settings, eligible, self._gpus_in_use(obs.plan.targets))
            elif obs.model != "device-plugin":
                skip_claimed_nodes(self.snap, self.settings, obs.plan)
            if not obs.plan.targets:
                return obs
            log.debug("probe plan (%s model): %s", obs.model, obs.plan.scope)
            obs.namespace, obs.mode = namespace or resolve_namespace(self.api, self.settings)
            for n, (path, res) in pod_requests(self.snap, obs.model, obs.plan).items():
                obs.pods[n] = PodObservation(node=n, name=pod_name(self.settings.run_id, n), resource=res,
                                             path=str(path))
            if obs.mode == "own":
                self._create_namespace()
            if any(p.path == ProbePath.CLAIM for p in obs.pods.values()):
                self._create_template()
            self._create_pods()
            log.debug("probe pods created in %s (%s namespace): %d, %d refused", obs.namespace, obs.mode,
                      len(obs.pods), sum(1 for p in obs.pods.values() if p.refused))
            self._wait()
            log.debug("probe wait over, %.1fs into the probe%s", time.monotonic() - t0,
                      f" ({obs.aborted})" if obs.aborted else "")
            scheduler_busy(self.snap, self.settings, obs)
            self._capture_logs()
            log.debug("probe logs read: %d pod(s)", sum(1 for p in obs.pods.values() if p.logs or p.logs_error))
        except KeyboardInterrupt as e:
            obs.aborted = obs.aborted or interruption(e)
            raise
        except ClusterAccessError as e:
            obs.aborted = obs.aborted or str(e)
            raise
        except ProbeApiError as e:
            # An answer the loop has no rule for (400, 404 on a list, an aggregated API's
            # error): the probe cannot speak for the nodes. Said in the API's own words, exit 3, INCOMPLETE.
            obs.aborted = obs.aborted or f"the API server refused a probe request: {e}"
            raise ClusterAccessError(obs.aborted, status=e.status) from None
        except ConformanceError:
            raise
        except Exception as e:
            # A bug must not end in a traceback and a green report: INCOMPLETE, one line, exit 7.
            err = internal_error(e, "in the probe")
            log.debug("probe internal error", exc_info=True)
            obs.aborted = obs.aborted or str(err)
            raise err from None
        finally:
            if obs.namespace:
                with signals_deferred():
                    self._cleanup()
                if obs.aborted:
                    obs.aborted = f"{obs.aborted}; {self.cleanup_sentence()}"
            obs.seconds = time.monotonic() - t0
            obs.requests = self.api.requests
        return obs

    def _gpus_in_use(self, nodes: list[str]) -> dict[str, dict[str, int]]:
        """GPUs requested per node by pods that hold them: one LIST per node by field selector spec.nodeName, so
        the cost grows with the nodes probed, never with the cluster (paging every pod took ~20 s at 1,000 nodes
        for a one-node probe, and a gigabyte of JSON at 100,000 pods)."""
        running = "status.phase!=Succeeded,status.phase!=Failed"

        def on_node(node: str) -> dict[str, dict[str, int]]:
            query = [("fieldSelector", f"spec.nodeName={node},{running}")]
            return gpus_in_use(self.api.items("/api/v1/pods", query))

        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            return {n: r for part in pool.map(on_node, nodes) for n, r in part.items()}

    # ---- create ----------------------------------------------------------------------------
    def _ns_path(self) -> str:
        return f"/api/v1/namespaces/{self.obs.namespace}"

    def _create_namespace(self) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.obs.namespace,
                             "labels": {RUN_LABEL: self.settings.run_id, MANAGED_BY[0]: MANAGED_BY[1]},
                             "annotations": {EXPIRES_ANNOTATION: expires_at(self.settings)}}}
        self._write("POST", "/api/v1/namespaces", body, what="create namespaces")
        # Pods are rejected until the namespace's default ServiceAccount exists (a short race after creation).
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if self.api.get_or_none(f"{self._ns_path()}/serviceaccounts/default") is not None:
                return
            time.sleep(0.3)

    def _write(self, method: str, path: str, body: Any, what: str) -> Any:
        try:
            return self.api.json(method, path, body=body)
        except ProbeApiError as e:
            if e.status in (401, 403) and "cannot" in e.message:
                raise ClusterAccessError(f"403 Forbidden: {self.api.conn.user or 'this user'} cannot {what} "
                                         f"(apply rbac.yaml, or pass --no-probe)") from None
            raise

    def _labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.settings.run_id, MANAGED_BY[0]: MANAGED_BY[1]}

    def _create_template(self) -> None:
        """The ResourceClaimTemplate the claim-path pods reference (one per run, deleted with its pods)."""
        name = template_name(self.settings.run_id)
        body = template_manifest(name, self._labels(), {EXPIRES_ANNOTATION: expires_at(self.settings)},
                                 self.settings.probe_gpus)
        try:
            self._write("POST", f"{RESOURCE_API}/namespaces/{self.obs.namespace}/resourceclaimtemplates", body,
                        what=f"create resourceclaimtemplates in {self.obs.namespace}")
        except ProbeApiError as e:
            if e.status != 409:  # 409: a retried create whose first attempt went through
                raise
        self.obs.template = name

    def _create_pods(self) -> None:
        def create(p: PodObservation) -> None:
            body = pod_manifest(self.settings.run_id, p.node, p.resource, self.settings, p.path, self.obs.template)
            try:
                self._write("POST", f"{self._ns_path()}/pods", body, what=f"create pods in {self.obs.namespace}")
            except ProbeApiError as e:
                if e.status == 409:
                    return  # a retried create whose first attempt went through
                if e.status == 404:
                    self.obs.aborted = f"the probe namespace {self.obs.namespace} was deleted by someone else"
                    return
                # Admission webhooks, ValidatingAdmissionPolicies, quotas: their own words, once per pod.
                p.refused = e.message

        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            list(pool.map(create, self.obs.pods.values()))

    # ---- wait ------------------------------------------------------------------------------
    def _wait(self) -> None:
        obs = self.obs
        deadline = time.monotonic() + self.settings.probe_timeout
        unschedulable_since: dict[str, float] = {}
        nodes = NodeChecks()
        live = [p for p in obs.pods.values() if not p.refused]
        polls = 0
        while live and not obs.aborted:
            polls += 1
            ns = self.api.get_or_none(self._ns_path())
            if ns is None or ns.get("metadata", {}).get("deletionTimestamp"):
                obs.aborted = f"the probe namespace {obs.namespace} was deleted by someone else while the " \
                              "probe pods ran"
                return
            pods, by_pod = self._poll()
            claims = self._claims()
            now = time.monotonic()
            for p in live:
                if not p.gone:
                    self._observe(p, pods.get(p.name), by_pod.get(p.name, []), claims)
                if p.pod and unschedulable(p.pod):
                    unschedulable_since.setdefault(p.name, now)
            self._mark_deleted_nodes(nodes.due(live, now))
            if all(settled(p, now - unschedulable_since.get(p.name, now)) for p in live):
                return
            if now >= deadline:
                return  # the checks report the pods that did not finish
            # Quick first looks (a healthy pod is done in about a second), then once per POLL_INTERVAL.
            time.sleep(min(POLL_INTERVAL * min(1.0, 0.25 * 2 ** (polls - 1)), max(0.0, deadline - now)))

    def _poll(self) -> tuple[dict[str, dict], dict[str, list[dict]]]:
        """This run's pods by name, and their events by pod name: two LISTs, whatever the number of pods."""
        pods = {name_of(p): p for p in self.api.items(
            f"{self._ns_path()}/pods", [("labelSelector", f"{RUN_LABEL}={self.settings.run_id}")])}
        events = self.api.items(f"{self._ns_path()}/events", [("fieldSelector", "involvedObject.kind=Pod")])
        by_pod: dict[str, list[dict]] = {}
        for e in events:
            by_pod.setdefault(e.get("involvedObject", {}).get("name", ""), []).append(e)
        return pods, by_pod

    def _claims(self) -> list[dict]:
        """The namespace's ResourceClaims when a probe pod took a DRA path (one LIST, whatever the number of pods):
        the generated claims carry the run's label from the template, the scheduler's extended-resource claims
        carry none, so the namespace is listed whole and each pod finds its own by name or owner."""
        if all(p.path == ProbePath.DEVICE_PLUGIN for p in self.obs.pods.values()):
            return []
        return self.api.items(f"{RESOURCE_API}/namespaces/{self.obs.namespace}/resourceclaims")

    @staticmethod
    def _observe(p: PodObservation, current: dict | None, events: list[dict], claims: list[dict] | None = None) -> None:
        p.events = sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        if current is None:
            p.gone = f"probe pod {p.name} was deleted by someone else before it finished"
            return
        p.pod = current
        if claims:
            p.claim = claim_for(current, claims) or p.claim
        if current["metadata"].get("deletionTimestamp") and p.phase not in ("Succeeded", "Failed"):
            p.gone = f"probe pod {p.name} is being deleted by someone else before it finished"

    def _mark_deleted_nodes(self, suspects: list[PodObservation]) -> None:
        """A GET of each suspect pod's node: a 404 means nothing will ever run that pod (or the pod GC took it)."""
        if not suspects:
            return

        def deleted(p: PodObservation) -> bool:
            try:
                return self.api.get_or_none(f"/api/v1/nodes/{p.node}") is None
            except ProbeApiError as e:
                # Not allowed to get nodes (a Role with list only): the probe goes on without this shortcut.
                log.debug("cannot get node %s while probing: %s", p.node, e)
                return False

        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            for p, gone in zip(suspects, pool.map(deleted, suspects), strict=True):
                p.node_deleted = p.node_deleted or gone

    # ---- capture ---------------------------------------------------------------------------
    def _capture_logs(self) -> None:
        wanted = [p for p in self.obs.pods.values()
                  if not taken_away(p) and p.phase in ("Succeeded", "Failed", "Running")]

        def fetch(p: PodObservation) -> None:
            try:
                # limitBytes: the API server stops reading there; the rest never reaches memory or a report.
                data = self.api.request("GET", f"{self._ns_path()}/pods/{p.name}/log",
                                        [("container", CONTAINER), ("limitBytes", str(LOG_LIMIT_BYTES))],
                                        retry_http=False)
                p.logs = data.decode("utf-8", "replace")
                p.logs_truncated = len(data) >= LOG_LIMIT_BYTES
            except ProbeApiError as e:
                if e.status == 404:
                    p.gone = f"probe pod {p.name} was deleted by someone else before its log was read"
                else:
                    p.logs_error = f"log unavailable: {e.message}"

        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            list(pool.map(fetch, wanted))

    # ---- delete ----------------------------------------------------------------------------
    def _cleanup(self) -> None:
        obs = self.obs
        cleaner = ProbeApi(self.api.conn, bound=CLEANUP_BOUND)
        try:
            if obs.mode == "own":
                cleaner.request("DELETE", self._ns_path(), body={"propagationPolicy": "Background"})
            else:
                cleaner.request("DELETE", f"{self._ns_path()}/pods",
                                [("labelSelector", f"{RUN_LABEL}={self.settings.run_id}"),
                                 ("gracePeriodSeconds", "0")])
                if obs.template:
                    # The pods' generated claims are owned by the pods: the garbage collector deletes them too.
                    self._delete_template(cleaner)
            obs.deleted = True
        except ProbeApiError as e:
            obs.deleted = e.status == 404  # already gone counts as deleted
            if not obs.deleted:
                obs.cleanup_error = e.message
        except ClusterAccessError as e:
            obs.cleanup_error = f"{e}; delete them with `gpu-conformance probe cleanup`"
        what = f"namespace {obs.namespace}" if obs.mode == "own" else f"pods of run {obs.run_id} in {obs.namespace}"
        log.debug("probe cleanup: %s %s", what, "deleted" if obs.deleted else f"NOT deleted: {obs.cleanup_error}")

    def _delete_template(self, cleaner: ProbeApi) -> None:
        try:
            cleaner.request("DELETE", f"{RESOURCE_API}/namespaces/{self.obs.namespace}/resourceclaimtemplates/"
                            f"{self.obs.template}")
        except ProbeApiError as e:
            if e.status != 404:
                raise

    def cleanup_sentence(self) -> str:
        obs = self.obs
        what = (f"probe namespace {obs.namespace}" if obs.mode == "own"
                else f"probe pods of run {obs.run_id} in namespace {obs.namespace}"
                + (f" and ResourceClaimTemplate {obs.template}" if obs.template else ""))
        return f"{what} deleted" if obs.deleted else f"{what} NOT deleted ({obs.cleanup_error})"

