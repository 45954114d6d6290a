"""Write a real case's cluster into a bare kube-apiserver, exactly as given, and take it away again.

Nothing reconciles in that control plane (etcd + kube-apiserver only), so every object keeps the spec and
status the case gives it: objects are created, then their status is written through the status
subresource. Owner references are rewritten to the server-assigned UIDs. Container logs are served by
`LogServer`, a stand-in for the kubelet's log endpoint that the apiserver proxies `pods/log` to.
"""

from __future__ import annotations

import copy
import http.server
import json
import ssl
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from real_case_loader import ClusterState

from gpu_conformance.cluster.connect import raw_request
from gpu_conformance.cluster.retry_after import while_busy
from gpu_conformance.cluster.snapshot import name_of
from gpu_conformance.sim.operator import install

Obj = dict[str, Any]
LOOPBACK = "127.0.0.1"
_MERGE = "application/merge-patch+json"
# Cluster-scoped kinds a case may create, and the namespaced kinds, as (API path prefix, plural).
_CLUSTER_KINDS = {"Node": ("/api/v1", "nodes"), "ClusterPolicy": ("/apis/nvidia.com/v1", "clusterpolicies"),
                  "NVIDIADriver": ("/apis/nvidia.com/v1alpha1", "nvidiadrivers"),
                  "RuntimeClass": ("/apis/node.k8s.io/v1", "runtimeclasses")}
_NAMESPACED_KINDS = {"Pod": ("/api/v1", "pods"), "DaemonSet": ("/apis/apps/v1", "daemonsets"),
                     "Deployment": ("/apis/apps/v1", "deployments"), "Event": ("/api/v1", "events"),
                     "ServiceAccount": ("/api/v1", "serviceaccounts")}
# Kinds without a status subresource; every other kind a case creates has one (the CRDs cases declare too).
_NO_STATUS = {"RuntimeClass", "ServiceAccount", "Event"}
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


class LogServer:
    """HTTPS on 127.0.0.1 answering GET /containerLogs/<ns>/<pod>/<container> from a dict, like a kubelet.

    logs[(pod, container)] = (HTTP status, body): 200 and the log text for a container that ran, 400 and
    kubelet's "is waiting to start" message for one that never started; anything else is 404.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        self.logs: dict[tuple[str, str], tuple[int, str]] = {}
        logs = self.logs

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = urllib.parse.urlparse(self.path).path.strip("/").split("/")
                key = (parts[2], parts[3]) if len(parts) == 4 and parts[0] == "containerLogs" else ("", "")
                code, text = logs.get(key, (404, ""))
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (signature of the base)
                pass

        self._server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class CaseWriter:
    """Creates a ClusterState in the apiserver and deletes what it created."""

    def __init__(self, api: ApiClient, log_server: LogServer) -> None:
        self.api = api
        self.log_server = log_server
        self._created: list[tuple[str, str]] = []   # (collection path, name), in creation order
        self._namespaces: set[str] = set()
        self._crds: set[str] = set()

    # ---- raw API ------------------------------------------------------------------------------------------
    def _req(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             query: list[tuple[str, str]] | None = None) -> Obj:
        data = while_busy(lambda: raw_request(self.api, method, path, query, body, content_type=content_type))
        return json.loads(data) if data else {}

    def _create(self, prefix: str, plural: str, obj: Obj, namespace: str | None) -> Obj:
        coll = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
        body = copy.deepcopy(obj)
        status = body.pop("status", None)
        meta = body.setdefault("metadata", {})
        for k in _SERVER_FIELDS:
            meta.pop(k, None)
        created = self._req("POST", coll, body)
        self._created.append((coll, name_of(created)))
        if status and obj.get("kind") not in _NO_STATUS:
            created = self._req("PATCH", f"{coll}/{name_of(created)}/status", {"status": status}, _MERGE)
        return created

    # ---- one case -------------------------------------------------------------------------------------------
    def ensure_base(self) -> None:
        """The GPU Operator's CRDs, once per apiserver."""
        for crd in install.crds():
            self._ensure_crd(crd)

    def _ensure_crd(self, crd: Obj) -> None:
        name = name_of(crd)
        if name in self._crds:
            return
        try:
            self._req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        except ApiException as e:
            if e.status != 409:
                raise
        self._crds.add(name)
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        version = crd["spec"]["versions"][0]["name"]
        deadline = time.monotonic() + 20
        while True:  # a new CRD serves its resource a moment after it is accepted
            try:
                self._req("GET", f"/apis/{group}/{version}/{plural}")
                return
            except ApiException as e:
                if e.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _ensure_namespace(self, ns: str) -> None:
        if ns in self._namespaces:
            return
        try:
            self._req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns}})
        except ApiException as e:
            if e.status != 409:
                raise
        self._namespaces.add(ns)

    def write(self, state: ClusterState) -> None:
        snap = state.snapshot
        ns = snap.operator_namespace
        self.ensure_base()
        for crd in state.crds:
            self._ensure_crd(crd)
        self._ensure_namespace(ns)
        uids: dict[str, str] = {}

        def create(obj: Obj) -> Obj:
            kind = obj["kind"]
            o = copy.deepcopy(obj)
            for ref in o["metadata"].get("ownerReferences") or []:
                ref["uid"] = uids.get(ref["uid"], ref["uid"])
            if kind in _CLUSTER_KINDS:
                prefix, plural = _CLUSTER_KINDS[kind]
                namespace = None
            elif kind in _NAMESPACED_KINDS:
                prefix, plural = _NAMESPACED_KINDS[kind]
                namespace = o["metadata"].get("namespace") or ns
            else:
                prefix, plural, namespace = _generic_path(o, ns)
            if namespace:
                self._ensure_namespace(namespace)
            try:
                created = self._create(prefix, plural, o, namespace)
            except ApiException as e:
                if e.status == 409 and kind == "ServiceAccount":   # e.g. "default", if a controller made it
                    return o
                raise
            if obj["metadata"].get("uid"):
                uids[obj["metadata"]["uid"]] = created["metadata"]["uid"]
            return created

        nodes = []
        for node in snap.nodes:
            n = copy.deepcopy(node)
            # The apiserver proxies pods/log to the node's InternalIP and kubelet port: our LogServer.
            n["status"]["addresses"] = [{"type": "InternalIP", "address": LOOPBACK},
                                        {"type": "Hostname", "address": name_of(n)}]
            n["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.log_server.port}}
            nodes.append(n)
        # Pods a case writes as raw objects (workloads of other namespaces) go with the operand pods, after the
        # ServiceAccounts their namespaces need: no controller creates "default" in an api-only control plane.
        extra_pods = [o for o in state.objects if o.get("kind") == "Pod"]
        others = [o for o in state.objects if o.get("kind") != "Pod"]
        pod_accounts = {(p["metadata"].get("namespace") or ns, p["spec"].get("serviceAccountName") or "default")
                        for p in [*snap.pods, *extra_pods]}
        accounts = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": sa_ns}}
                    for sa_ns, sa in sorted(pod_accounts)]
        # Tiers in dependency order (owners before what they own); objects within a tier go in parallel.
        tiers = [nodes + snap.clusterpolicies + snap.nvidiadrivers + accounts + others,
                 snap.runtimeclasses + snap.deployments + snap.daemonsets, snap.pods + extra_pods]
        with ThreadPoolExecutor(max_workers=8) as pool:
            for tier in tiers:
                list(pool.map(create, tier))
            events = []
            for ev in snap.events:
                e = copy.deepcopy(ev)
                e["involvedObject"]["uid"] = uids.get(e["involvedObject"].get("uid", ""), "")
                events.append(e)
            list(pool.map(create, events))
        self.log_server.logs.clear()
        self.log_server.logs.update(container_logs(snap.pods, snap.logs))

    def reset(self) -> None:
        """Delete everything the last write created (pods at once: no kubelet would ever confirm them)."""
        def delete(item: tuple[str, str]) -> None:
            coll, name = item
            try:
                self._req("DELETE", f"{coll}/{name}", {"apiVersion": "v1", "kind": "DeleteOptions",
                                                        "gracePeriodSeconds": 0, "propagationPolicy": "Background"})
            except ApiException as e:
                if e.status != 404:
                    raise

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(delete, self._created))
        self._created.clear()
        self.log_server.logs.clear()


def container_logs(pods: list[Obj], texts: dict[tuple[str, str], str]) -> dict[tuple[str, str], tuple[int, str]]:
    """What a kubelet answers for each container's log: its text, or why there is none yet."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for pod in pods:
        st = pod.get("status") or {}
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            key = (name_of(pod), cs["name"])
            waiting = (cs.get("state") or {}).get("waiting")
            if key in texts:
                out[key] = (200, texts[key])
            elif waiting is not None and not cs.get("lastState"):
                reason = waiting.get("reason", "")
                if reason in ("ImagePullBackOff", "ErrImagePull"):
                    reason = "trying and failing to pull image"
                out[key] = (400, f'container "{cs["name"]}" in pod "{name_of(pod)}" is waiting to start: {reason}')
            else:
                out[key] = (200, "")
    return out


def _generic_path(obj: Obj, default_ns: str) -> tuple[str, str, str | None]:
    """API path of a custom resource: plural = lower-case kind + 's' (true of the CRDs cases declare)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = kind.lower() + "s"
    namespace = obj["metadata"].get("namespace") or default_ns
    return f"/apis/{api_version}", plural, namespace
