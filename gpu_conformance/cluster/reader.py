"""Read the cluster once: one LIST per resource kind, concurrently, as raw JSON.

Pods are the exception, each LIST selected by label across namespaces for a component the operator namespace does
not hold: the operator's own pod, NFD's, and the kubelet plugin of NVIDIA's DRA driver installed from its own Helm
chart (dra_chart.py; its release namespace is the user's choice). Still a constant number of requests.

The number of requests is constant in the number of nodes (no per-node GETs); the only
per-object reads are the last log lines of containers that are stuck, capped at MAX_LOG_READS.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import retry, retry_if_exception, wait_exponential

from gpu_conformance.cluster import trim
from gpu_conformance.cluster.connect import API_ERRORS, Connection, raw_request, raw_stream
from gpu_conformance.cluster.retry_after import asked_wait, stop_retry_after, wait_retry_after
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.cluster.stream_list import CHUNK, decode_list
from gpu_conformance.cluster.trim import Shape
from gpu_conformance.cluster.unreachable import unreachable
from gpu_conformance.dra_chart import KUBELET_PLUGIN_SELECTOR
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.operands import CLUSTERPOLICY_CRD, NVIDIADRIVER_CRD, OPERATOR_POD_LABEL

log = logging.getLogger(__name__)
MAX_LOG_READS = 20
# Nodes whose pods of every namespace are listed to count GPU holders (DPL-006, DRV-002); one LIST each.
MAX_NODE_POD_READS = 20
# rbac.yaml ships in the package; this is how a user without a clone of the repository applies it.
APPLY_RBAC = "gpu-conformance rbac | kubectl apply -f -"
LOG_TAIL_LINES = 20
# tailLines alone does not bound a read: one 5 MB log line gave a 33 MB pytest.html. The API server stops at
# limitBytes, so nothing beyond it reaches memory or a report.
LOG_LIMIT_BYTES = 16 * 1024
# Stuck init containers whose log's start is read too (limitBytes without tailLines returns the log from its
# first byte): nvidia-validator's driver stage logs the host driver's error once, then retries the driver-container
# path every 5 s, so within a minute that line is above the last LOG_TAIL_LINES (cmd/nvidia-validator/main.go
# runValidation, v25.10.0..v26.7.0). One more request per such container, within MAX_LOG_READS containers.
HEAD_LOG_CONTAINERS = ("driver-validation",)
HEAD_LOG_BYTES = 4 * 1024
# A transient error is tried this many times (backing off exponentially); an answer with Retry-After waits what
# it says, within READ_RETRY_BOUND seconds for one request (retry_after.py).
READ_ATTEMPTS = 4
READ_RETRY_BOUND = 30.0
# LISTs in flight at once (a kubeconfig's client keeps about as many connections open).
READ_CONCURRENCY = 8


@dataclass(frozen=True)
class ListSpec:
    """One LIST: what the snapshot calls it, its API path, and the RBAC verb/resource it needs."""

    attr: str
    path: str
    group: str
    resource: str
    namespace: str = ""
    label_selector: str = ""
    field_selector: str = ""
    # 404 means "this kind does not exist here" (an optional CRD), not an error.
    optional: bool = False
    # Extra evidence only: not preflighted, and a 403 or 404 leaves it empty instead of ending the run.
    best_effort: bool = False
    # What of each item is kept (cluster/trim.py); None keeps items whole.
    shape: Shape | None = None


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in (429, 500, 502, 503, 504)
    return isinstance(exc, urllib3.exceptions.ProtocolError | ConnectionResetError)


class ClusterReader:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.requests = 0
        self._lock = threading.Lock()

    # ---- raw requests --------------------------------------------------------------------
    @retry(retry=retry_if_exception(_transient), stop=stop_retry_after(READ_RETRY_BOUND, READ_ATTEMPTS),
           wait=wait_retry_after(wait_exponential(multiplier=0.2, max=2), READ_RETRY_BOUND), reraise=True)
    def _call(self, method: str, path: str, query: list[tuple[str, str]] | None = None,
              body: Any = None) -> Any:
        with self._lock:
            self.requests += 1
        data = raw_request(self.conn.api, method, path, query, body)
        return _kubernetes_json(data)

    @retry(retry=retry_if_exception(_transient), stop=stop_retry_after(READ_RETRY_BOUND, READ_ATTEMPTS),
           wait=wait_retry_after(wait_exponential(multiplier=0.2, max=2), READ_RETRY_BOUND), reraise=True)
    def _list(self, path: str, query: list[tuple[str, str]], shape: Shape | None) -> Any:
        """A LIST decoded as it streams in, items trimmed on the way (stream_list.py says why)."""
        with self._lock:
            self.requests += 1
        resp = raw_stream(self.conn.api, path, query)
        try:
            return decode_list(resp.stream(CHUNK), shape)
        except ValueError as e:
            raise NotKubernetesResponse(str(e)) from None
        finally:
            resp.release_conn()

    def call(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
             what: str = "") -> Any:
        """A request with errors turned into one clear line naming the verb and resource."""
        try:
            return self._call(method, path, query, body)
        except ApiException as e:
            raise self._api_error(e, what or f"{method} {path}") from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterAccessError(unreachable(self.conn, e)) from None
        except NotKubernetesResponse as e:
            raise self._not_kubernetes(e, what or f"{method} {path}") from None

    def _api_error(self, e: ApiException, what: str) -> ClusterAccessError:
        if e.status == 401:
            return ClusterAccessError(f"401 Unauthorized from {self.conn.server}: the credentials of context "
                                      f"{self.conn.context!r} were rejected ({what})", status=e.status)
        if e.status == 403:
            return ClusterAccessError(f"403 Forbidden: {self.conn.user or 'this user'} cannot {what} "
                                      f"(grant it with rbac.yaml: {APPLY_RBAC})", status=e.status)
        return ClusterAccessError(f"{what} failed: HTTP {e.status} {e.reason}{asked_wait(e)}", status=e.status)

    def _not_kubernetes(self, e: NotKubernetesResponse, what: str) -> ClusterAccessError:
        return ClusterAccessError(f"{self.conn.server} does not answer like a Kubernetes API server ({what}: {e})")

    def list_raw(self, spec: ListSpec) -> list[dict[str, Any]] | None:
        query = [("labelSelector", spec.label_selector)] if spec.label_selector else []
        if spec.field_selector:
            query.append(("fieldSelector", spec.field_selector))
        scope = f" in namespace {spec.namespace}" if spec.namespace else ""
        what = f"list {spec.resource}{'.' + spec.group if spec.group else ''}{scope}"
        t0 = time.monotonic()
        try:
            data = self._list(spec.path, query, spec.shape)
        except ApiException as e:
            if (e.status == 404 and spec.optional) or (e.status in (403, 404) and spec.best_effort):
                return None
            raise self._api_error(e, what) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterAccessError(unreachable(self.conn, e)) from None
        except NotKubernetesResponse as e:
            raise self._not_kubernetes(e, what) from None
        items = data.get("items") or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise self._not_kubernetes(NotKubernetesResponse("'items' is not a list of objects"), what)
        # Visible with --log-cli-level=DEBUG: what was read, how much, how long.
        log.debug("%s: %d items in %.2fs", what, len(items), time.monotonic() - t0)
        return items

    def list_raw_path(self, path: str) -> list[dict[str, Any]]:
        return self.call("GET", path, what=f"list {path}").get("items") or []

    # ---- permissions ---------------------------------------------------------------------
    def missing_permissions(self, needs: list[tuple[str, str, str, str]]) -> list[str]:
        """SelfSubjectAccessReview for each (verb, group, resource, namespace); returns what is denied."""

        def review(need: tuple[str, str, str, str]) -> str | None:
            verb, group, resource, ns = need
            attrs: dict[str, str] = {"verb": verb, "group": group, "resource": resource}
            if ns:
                attrs["namespace"] = ns
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": attrs}}
            out = self.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body,
                            what="create selfsubjectaccessreviews.authorization.k8s.io")
            status = out.get("status")
            if not isinstance(status, dict):
                raise self._not_kubernetes(NotKubernetesResponse("no review status in the answer"),
                                           "create selfsubjectaccessreviews.authorization.k8s.io")
            if status.get("allowed") is True:
                return None
            return f"{verb} {resource}{'.' + group if group else ''}" + (f" in namespace {ns}" if ns else "")

        with ThreadPoolExecutor(max_workers=8) as pool:
            return [m for m in pool.map(review, needs) if m]

    # ---- the snapshot --------------------------------------------------------------------
    def read(self, operator_namespace: str | None = None, gpu_node_selector: str | None = None,
             preflight: bool = True) -> ClusterSnapshot:
        start = time.monotonic()
        snap = ClusterSnapshot(server=self.conn.server, context=self.conn.context,
                               gpu_node_selector=gpu_node_selector,
                               read_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        cluster_lists = [
            ListSpec("nodes", "/api/v1/nodes", "", "nodes", shape=trim.NODE),
            ListSpec("clusterpolicies", "/apis/nvidia.com/v1/clusterpolicies", "nvidia.com", "clusterpolicies",
                     optional=True),
            ListSpec("nvidiadrivers", "/apis/nvidia.com/v1alpha1/nvidiadrivers", "nvidia.com", "nvidiadrivers",
                     optional=True),
            ListSpec("runtimeclasses", "/apis/node.k8s.io/v1/runtimeclasses", "node.k8s.io", "runtimeclasses"),
            ListSpec("operator_pods", "/api/v1/pods", "", "pods", label_selector="=".join(OPERATOR_POD_LABEL),
                     shape=trim.POD),
            ListSpec("nfd_pods", "/api/v1/pods", "", "pods",
                     label_selector="app.kubernetes.io/name=node-feature-discovery", shape=trim.POD),
            # The DRA driver's chart (the dra-driver model): its kubelet plugin lives in the chart's namespace.
            ListSpec("dra_plugin_pods", "/api/v1/pods", "", "pods", label_selector=KUBELET_PLUGIN_SELECTOR,
                     shape=trim.POD),
            # The DRA model (resource_model.py): absent on clusters before resource.k8s.io/v1 (Kubernetes 1.34) or
            # without the GPUCluster CRD (operators before v26.7), which reads as "none", not as an error.
            ListSpec("resource_slices", "/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io",
                     "resourceslices", optional=True, shape=trim.RESOURCE_SLICE),
            ListSpec("device_classes", "/apis/resource.k8s.io/v1/deviceclasses", "resource.k8s.io",
                     "deviceclasses", optional=True),
            ListSpec("resource_claims", "/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io",
                     "resourceclaims", optional=True, shape=trim.RESOURCE_CLAIM),
            ListSpec("gpu_clusters", "/apis/nvidia.com/v1alpha1/gpuclusters", "nvidia.com", "gpuclusters",
                     optional=True),
            # Only the two CRDs that matter: a cluster can hold hundreds of large CRD objects.
            ListSpec("crd_cp", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "apiextensions.k8s.io",
                     "customresourcedefinitions", field_selector=f"metadata.name={CLUSTERPOLICY_CRD}"),
            ListSpec("crd_nvd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "apiextensions.k8s.io",
                     "customresourcedefinitions", field_selector=f"metadata.name={NVIDIADRIVER_CRD}"),
        ]
        if preflight:
            needs = [("list", s.group, s.resource, s.namespace) for s in cluster_lists]
            missing = self.missing_permissions(sorted(set(needs)))
            if missing:
                raise ClusterAccessError(f"missing permissions: {'; '.join(missing)} (apply rbac.yaml: {APPLY_RBAC})")

        jobs: dict[str, Callable[[], Any]] = {s.attr: (lambda s=s: self.list_raw(s)) for s in cluster_lists}
        jobs["version"] = lambda: self.call("GET", "/version", what="get /version")
        with ThreadPoolExecutor(max_workers=READ_CONCURRENCY) as pool:
            futures = {k: pool.submit(fn) for k, fn in jobs.items()}
            # The namespace's LISTs start as soon as the namespace is known (from the small operator pod and
            # ClusterPolicy LISTs), while the nodes are still read: its pods are the biggest LIST of all, and
            # waiting for every cluster-wide LIST first made the read the sum of the two largest instead of the max.
            ns = operator_namespace or self._namespace(futures)
            ns_lists = _namespace_lists(ns) if ns else []
            denied: ClusterAccessError | None = None
            if ns_lists and preflight:
                try:
                    missing = self.missing_permissions([("list", s.group, s.resource, ns) for s in ns_lists
                                                        if not s.best_effort] + [("get", "", "pods/log", ns)])
                except ClusterAccessError as e:
                    denied = e
                else:
                    if missing:
                        denied = ClusterAccessError(f"missing permissions: {'; '.join(missing)} "
                                                    f"(apply rbac.yaml: {APPLY_RBAC})")
            ns_futures = {} if denied else {s.attr: pool.submit(self.list_raw, s) for s in ns_lists}
            # Cluster-wide results first: their errors are reported before the namespace's, as when read in turn.
            results = {k: f.result() for k, f in futures.items()}
            if denied is not None:
                raise denied
            res2 = {k: f.result() for k, f in ns_futures.items()}

        snap.nodes = results["nodes"] or []
        snap.clusterpolicies = results["clusterpolicies"] or []
        snap.nvidiadrivers = results["nvidiadrivers"] or []
        snap.runtimeclasses = results["runtimeclasses"] or []
        snap.operator_pods = results["operator_pods"] or []
        snap.nfd_pods = results["nfd_pods"] or []
        snap.dra_plugin_pods = results["dra_plugin_pods"] or []
        snap.resource_slices = results["resource_slices"] or []
        snap.device_classes = results["device_classes"] or []
        snap.resource_claims = results["resource_claims"] or []
        snap.gpu_clusters = results["gpu_clusters"] or []
        crds = (results["crd_cp"] or []) + (results["crd_nvd"] or [])
        snap.crds = {name_of(c) for c in crds}
        snap.crd_served = {name_of(c): v for c in crds if (v := served_versions(c)) is not None}
        snap.kubernetes_version = (results["version"] or {}).get("gitVersion", "")

        snap.operator_namespace = ns or ""
        if ns:
            snap.pods = res2["pods"] or []
            snap.daemonsets = res2["daemonsets"] or []
            snap.deployments = res2["deployments"] or []
            snap.events = res2["events"] or []
            snap.csvs = res2["csvs"] or []
            snap.logs = self._stuck_container_logs(ns, snap.pods, mig_failed_nodes(snap.nodes))
            snap.log_heads = self._log_heads(ns, [k for k in snap.logs if k[1] in HEAD_LOG_CONTAINERS])
            snap.node_pods = self._gpu_holder_pods(gpu_holder_nodes(snap.pods))
        snap.requests = self.requests
        snap.read_seconds = time.monotonic() - start
        return snap

    def _gpu_holder_pods(self, nodes: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Unfinished pods of every namespace on each node, for the few nodes whose GPU holders DPL-006 counts.

        One LIST per node by field selector (spec.nodeName, and not Succeeded/Failed: finished pods hold no GPU),
        at most MAX_NODE_POD_READS nodes, so the cost stays bounded whatever the cluster's size; the list of pods
        across all namespaces is already preflighted (operator_pods). Evidence only: a failed read leaves the node
        out (unknown), it does not end the run.
        """
        def read(node: str) -> tuple[str, list[dict[str, Any]] | None]:
            spec = ListSpec(f"pods on {node}", "/api/v1/pods", "", "pods", shape=trim.POD,
                            field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed")
            try:
                return node, self.list_raw(spec)
            except ClusterAccessError as e:
                log.debug("pods on %s not read: %s", node, e)
                return node, None

        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=4) as pool:
            return {n: pods for n, pods in pool.map(read, nodes[:MAX_NODE_POD_READS]) if pods is not None}

    @staticmethod
    def _namespace(futures: dict[str, Future[Any]]) -> str | None:
        """The operator namespace from the operator pod and ClusterPolicy LISTs in flight; None when either failed
        (its error is raised with the other cluster-wide results)."""
        needed = (futures["operator_pods"], futures["clusterpolicies"])
        if any(f.exception() is not None for f in needed):
            return None
        found = ClusterSnapshot(operator_pods=needed[0].result() or [], clusterpolicies=needed[1].result() or [])
        return discover_namespace(found)

    def _stuck_container_logs(self, ns: str, pods: list[dict[str, Any]],
                              mig_failed: frozenset[str] = frozenset()) -> dict[tuple[str, str], str]:
        """Last lines of the containers a finding will quote: a stuck init container, a crash loop, and the MIG
        manager on a node where it reported failed (it keeps running, so neither of the others catches it)."""
        from gpu_conformance.cluster.podstate import crashlooping, stuck_init_container

        wanted: list[tuple[str, str]] = []
        for p in pods:
            if p.get("status", {}).get("phase") in ("Succeeded",):
                continue
            if (p.get("spec") or {}).get("nodeName") in mig_failed and _runs_container(p, MIG_MANAGER_CONTAINER):
                wanted.append((name_of(p), MIG_MANAGER_CONTAINER))
            stuck = stuck_init_container(p)
            if stuck and (stuck.get("restarts") or stuck.get("state") != "waiting"
                          or stuck.get("reason") not in ("PodInitializing", None, "")):
                wanted.append((name_of(p), stuck["name"]))
            wanted.extend((name_of(p), c) for c in crashlooping(p))
            if p.get("status", {}).get("phase") == "Failed":
                for cs in p.get("status", {}).get("initContainerStatuses") or []:
                    if (cs.get("state", {}).get("terminated") or {}).get("exitCode", 0) != 0:
                        wanted.append((name_of(p), cs["name"]))
        wanted = wanted[:MAX_LOG_READS]

        def fetch(key: tuple[str, str]) -> tuple[tuple[str, str], str]:
            pod, container = key
            try:
                data = self._get_log(ns, pod, [("container", container), ("tailLines", str(LOG_TAIL_LINES)),
                                               ("limitBytes", str(LOG_LIMIT_BYTES))])
                text = data[:LOG_LIMIT_BYTES].decode("utf-8", "replace")
                if len(data) >= LOG_LIMIT_BYTES:
                    text += f"\n<log cut at {LOG_LIMIT_BYTES} bytes>"
                return key, text
            except API_ERRORS as e:
                # Logs are evidence, not a requirement: a missing log must not end the run.
                return key, f"<logs unavailable: {getattr(e, 'reason', e)}>"

        if not wanted:
            return {}
        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(pool.map(fetch, wanted))


    def _get_log(self, ns: str, pod: str, params: list[tuple[str, str]]) -> bytes:
        """One counted GET of a container's log (the tail and head reads differ only in their parameters)."""
        with self._lock:
            self.requests += 1
        return raw_request(self.conn.api, "GET", f"/api/v1/namespaces/{ns}/pods/{pod}/log", params)

    def _log_heads(self, ns: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The first HEAD_LOG_BYTES of each container's log (its earliest lines), for keys already read."""
        def fetch(key: tuple[str, str]) -> tuple[tuple[str, str], str]:
            pod, container = key
            try:
                data = self._get_log(ns, pod, [("container", container), ("limitBytes", str(HEAD_LOG_BYTES))])
                return key, data[:HEAD_LOG_BYTES].decode("utf-8", "replace")
            except API_ERRORS:
                # Only a better explanation depends on it: without it the tail is judged as before.
                return key, ""

        if not keys:
            return {}
        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(pool.map(fetch, keys))


def _namespace_lists(ns: str) -> list[ListSpec]:
    """The LISTs of the operator namespace."""
    return [
        ListSpec("pods", f"/api/v1/namespaces/{ns}/pods", "", "pods", namespace=ns, shape=trim.POD),
        ListSpec("daemonsets", f"/apis/apps/v1/namespaces/{ns}/daemonsets", "apps", "daemonsets", namespace=ns),
        ListSpec("deployments", f"/apis/apps/v1/namespaces/{ns}/deployments", "apps", "deployments", namespace=ns),
        ListSpec("events", f"/api/v1/namespaces/{ns}/events", "", "events", namespace=ns, shape=trim.EVENT),
        ListSpec("csvs", f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions",
                 "operators.coreos.com", "clusterserviceversions", namespace=ns, best_effort=True),
    ]


# The MIG manager's container and the label it reports its outcome in (mig-parted; DPL-009 judges it).
MIG_MANAGER_CONTAINER = "nvidia-mig-manager"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"


def driver_manager_stuck_nodes(pods: list[dict[str, Any]]) -> list[str]:
    """Nodes where an operand pod is stuck in its k8s-driver-manager init container (the driver's, the vGPU
    manager's, the VFIO manager's): it cannot unload the driver while pods hold the node's GPUs (DRV-002)."""
    from gpu_conformance.cluster.podstate import stuck_init_container

    nodes = set()
    for p in pods:
        stuck = stuck_init_container(p)
        if stuck is not None and stuck["name"] == "k8s-driver-manager" and (p.get("spec") or {}).get("nodeName"):
            nodes.add(p["spec"]["nodeName"])
    return sorted(nodes)


def gpu_holder_nodes(pods: list[dict[str, Any]]) -> list[str]:
    """Nodes whose GPU holders a check names: plugin-validation stuck (DPL-006), the driver manager stuck (DRV-002)."""
    return sorted(set(plugin_validation_stuck_nodes(pods)) | set(driver_manager_stuck_nodes(pods)))


def plugin_validation_stuck_nodes(pods: list[dict[str, Any]]) -> list[str]:
    """Nodes whose validator is stuck in plugin-validation: its test pod may have found every GPU in use (DPL-006)."""
    from gpu_conformance.cluster.podstate import stuck_init_container

    nodes = set()
    for p in pods:
        if labels_of(p).get("app") != "nvidia-operator-validator":
            continue
        stuck = stuck_init_container(p)
        if stuck is not None and stuck["name"] == "plugin-validation" and (p.get("spec") or {}).get("nodeName"):
            nodes.add(p["spec"]["nodeName"])
    return sorted(nodes)


def mig_failed_nodes(nodes: list[dict[str, Any]]) -> frozenset[str]:
    return frozenset(name_of(n) for n in nodes if labels_of(n).get(MIG_STATE_LABEL) == "failed")


def _runs_container(pod: dict[str, Any], container: str) -> bool:
    return any(c.get("name") == container for c in (pod.get("spec") or {}).get("containers") or [])


def served_versions(crd: dict[str, Any]) -> list[str] | None:
    """The versions a CRD serves; None when the object does not say (no spec.versions: nothing to judge)."""
    versions = (crd.get("spec") or {}).get("versions")
    if not isinstance(versions, list) or not versions:
        return None
    return [str(v.get("name")) for v in versions if isinstance(v, dict) and v.get("served")]


class NotKubernetesResponse(ValueError):
    """A 2xx answer that is not a Kubernetes JSON object (an HTML login page, a proxy's JSON, a list)."""


def _kubernetes_json(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except ValueError:
        start = data[:40].decode("utf-8", "replace").strip()
        raise NotKubernetesResponse(f"not JSON, starts with {start!r}") from None
    if not isinstance(parsed, dict):
        raise NotKubernetesResponse(f"a JSON {type(parsed).__name__}, not an object")
    return parsed


def discover_namespace(snap: ClusterSnapshot) -> str | None:
    """Where the operator runs: the app=gpu-operator pod (as must-gather finds it), else ClusterPolicy status."""
    for p in snap.operator_pods:
        ns = p.get("metadata", {}).get("namespace")
        if ns:
            return ns
    cp = snap.active_clusterpolicy
    if cp:
        return cp.get("status", {}).get("namespace") or None
    return None


def read_snapshot(conn: Connection, operator_namespace: str | None = None, gpu_node_selector: str | None = None,
                  preflight: bool = True) -> ClusterSnapshot:
    return ClusterReader(conn).read(operator_namespace, gpu_node_selector, preflight)
