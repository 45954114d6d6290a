"""A thin raw-JSON client for the simulator: dict in, dict out, through the caller's ApiClient.

Shared by the install, the operand loop, the status loop and the faults (none of them owns it).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import ApiClient

from gpu_conformance.cluster.connect import raw_request
from gpu_conformance.cluster.retry_after import while_busy

Obj = dict[str, Any]
_REQUEST_TIMEOUT = 20

_CORE = {"Namespace": "namespaces", "Node": "nodes", "Pod": "pods", "Service": "services",
         "ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Event": "events"}
_GROUPED = {"Deployment": ("apps/v1", "deployments"), "DaemonSet": ("apps/v1", "daemonsets"),
            "ControllerRevision": ("apps/v1", "controllerrevisions"),
            "RuntimeClass": ("node.k8s.io/v1", "runtimeclasses"),
            "CustomResourceDefinition": ("apiextensions.k8s.io/v1", "customresourcedefinitions"),
            "ClusterPolicy": ("nvidia.com/v1", "clusterpolicies"),
            "NVIDIADriver": ("nvidia.com/v1alpha1", "nvidiadrivers"),
            "GPUCluster": ("nvidia.com/v1alpha1", "gpuclusters"),
            "ResourceSlice": ("resource.k8s.io/v1", "resourceslices"),
            "DeviceClass": ("resource.k8s.io/v1", "deviceclasses"),
            "ResourceClaim": ("resource.k8s.io/v1", "resourceclaims"),
            "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates"),
            "Logs": ("kwok.x-k8s.io/v1alpha1", "logs")}
# Everything the sim writes must fit the real schemas (the operator's CRDs included): unknown or duplicate
# fields are an error, not silently pruned.
_STRICT = [("fieldValidation", "Strict")]
_CLUSTER_SCOPED = {"Namespace", "Node", "RuntimeClass", "CustomResourceDefinition", "ClusterPolicy",
                   "NVIDIADriver", "GPUCluster", "ResourceSlice", "DeviceClass"}


def collection_path(kind: str, namespace: str | None = None) -> str:
    """REST collection path of a kind (namespaced kinds in `namespace`)."""
    if kind in _CORE:
        base, plural = "/api/v1", _CORE[kind]
    else:
        group_version, plural = _GROUPED[kind]
        base = f"/apis/{group_version}"
    if kind in _CLUSTER_SCOPED or not namespace:
        return f"{base}/{plural}"
    return f"{base}/namespaces/{namespace}/{plural}"


class Kube:
    """Dict-in, dict-out requests through the caller's ApiClient (no model classes, no validation)."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.requests = 0

    def request(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None,
                content_type: str = "application/json") -> Obj:
        self.requests += 1
        data = while_busy(lambda: raw_request(self.client, method, path, query, body, timeout=_REQUEST_TIMEOUT,
                                              content_type=content_type))
        return json.loads(data) if data else {}

    def create(self, obj: Obj) -> Obj:
        ns = obj.get("metadata", {}).get("namespace")
        return self.request("POST", collection_path(obj["kind"], ns), obj, query=_STRICT)

    def path(self, kind: str, name: str, namespace: str | None = None) -> str:
        return f"{collection_path(kind, namespace)}/{name}"

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.request("GET", self.path(kind, name, namespace))

    def list(self, kind: str, namespace: str | None = None, label_selector: str = "") -> list[Obj]:
        query = [("labelSelector", label_selector)] if label_selector else []
        return self.request("GET", collection_path(kind, namespace), query=query).get("items") or []

    def patch(self, kind: str, name: str, patch: Obj, namespace: str | None = None, status: bool = False) -> Obj:
        """A JSON merge patch (works for built-in and custom kinds alike)."""
        path = self.path(kind, name, namespace) + ("/status" if status else "")
        return self.request("PATCH", path, patch, query=_STRICT, content_type="application/merge-patch+json")

    def delete(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.request("DELETE", self.path(kind, name, namespace))
