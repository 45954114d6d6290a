"""The cluster as read once: raw JSON objects per kind, shared by every check.

Checks never call the API; they only look at this object. Accessors here answer the questions
several layers ask ("which nodes are GPU nodes", "which pods does this DaemonSet own on that node").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpu_conformance.cluster.selectors import match_labels, matches, parse_selector

Obj = dict[str, Any]

# NFD labels the GPU Operator accepts as "this node has an NVIDIA GPU" (operator's own NFD config
# gives pci-10de, a stock NFD gives class+vendor: 0302 = 3D controller, 0300 = VGA).
NFD_GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# The operator's documented per-node opt-out of every operand.
OPERANDS_OFF = ("nvidia.com/gpu.deploy.operands", "false")


def labels_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def name_of(obj: Obj) -> str:
    return obj.get("metadata", {}).get("name", "")


def has_nfd_gpu_label(node: Obj) -> bool:
    labels = labels_of(node)
    return any(labels.get(k) == "true" for k in NFD_GPU_LABELS)


GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def is_gpu_resource(name: str) -> bool:
    """A name the NVIDIA device plugin advertises GPUs under.

    Its defaults are nvidia.com/gpu (whole GPUs, and MIG devices under the single strategy) and
    nvidia.com/mig-<profile> (mixed strategy); time-slicing/MPS with renameByDefault appends `.shared` to either.
    Other nvidia.com/ resources (the Network Operator's SR-IOV/RDMA devices) are not GPUs and are left out.
    """
    return name.startswith(GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


def gpu_resources(node: Obj, field: str = "capacity") -> dict[str, str]:
    """GPU resource keys in status.<field>, whatever their value (a key at "0" included)."""
    res = node.get("status", {}).get(field) or {}
    return {k: v for k, v in res.items() if is_gpu_resource(k)}


def quantity(value: Any) -> int:
    """A device count as kubelet writes it ("8"); anything else counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def advertised_gpu_resources(node: Obj) -> dict[str, int]:
    """The GPU resources a workload can ask for on this node now: name -> allocatable, both quantities > 0.

    A key at 0 is not one. The device plugin registers no resource it has no device for (a mixed-strategy
    node whose GPUs are all in MIG mode has no nvidia.com/gpu; a renamed time-sliced node has only
    nvidia.com/gpu.shared), and kubelet, once a resource it knew stops being registered, sets its capacity
    to 0 and keeps the key, to remember that a device plugin manages it. So `nvidia.com/gpu: 0` beside
    `nvidia.com/mig-1g.12gb: 2` is a healthy node. Order: nvidia.com/gpu, its .shared rename, then by name.
    """
    cap, alloc = gpu_resources(node, "capacity"), gpu_resources(node, "allocatable")
    rank = {GPU_RESOURCE: 0, GPU_SHARED_RESOURCE: 1}
    names = sorted((r for r in alloc if quantity(cap.get(r)) > 0 and quantity(alloc[r]) > 0),
                   key=lambda r: (rank.get(r, 2), r))
    return {r: quantity(alloc[r]) for r in names}


def has_gpu_evidence(node: Obj) -> bool:
    labels = labels_of(node)
    return (has_nfd_gpu_label(node) or GPU_PRESENT_LABEL in labels or "nvidia.com/gpu.product" in labels
            or bool(gpu_resources(node)))


@dataclass
class ClusterSnapshot:
    nodes: list[Obj] = field(default_factory=list)
    # Pods, DaemonSets, Deployments and events of the operator namespace.
    pods: list[Obj] = field(default_factory=list)
    daemonsets: list[Obj] = field(default_factory=list)
    deployments: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    # Pods labelled app=gpu-operator and NFD pods, from any namespace (namespace discovery, NFD layer).
    operator_pods: list[Obj] = field(default_factory=list)
    nfd_pods: list[Obj] = field(default_factory=list)
    # Kubelet-plugin pods of NVIDIA's DRA driver Helm chart (dra_chart.py), from any namespace.
    dra_plugin_pods: list[Obj] = field(default_factory=list)
    clusterpolicies: list[Obj] = field(default_factory=list)
    nvidiadrivers: list[Obj] = field(default_factory=list)
    runtimeclasses: list[Obj] = field(default_factory=list)
    # OLM ClusterServiceVersions in the operator namespace (empty without OLM): they name the operator version
    # where OLM pinned the image by digest.
    csvs: list[Obj] = field(default_factory=list)
    # The DRA model (resource.k8s.io/v1, nvidia.com/v1alpha1 GPUCluster; empty where the API or CRD is absent):
    # every ResourceSlice and DeviceClass, every ResourceClaim (who holds which device) and every GPUCluster.
    resource_slices: list[Obj] = field(default_factory=list)
    device_classes: list[Obj] = field(default_factory=list)
    resource_claims: list[Obj] = field(default_factory=list)
    gpu_clusters: list[Obj] = field(default_factory=list)
    # Names of the CRDs that matter (clusterpolicies.nvidia.com, nvidiadrivers.nvidia.com) that exist.
    crds: set[str] = field(default_factory=set)
    # The versions each of those CRDs serves (spec.versions[].served): a CRD that exists but no longer serves the
    # version the operator writes reads like "no ClusterPolicy" unless it is told apart.
    crd_served: dict[str, list[str]] = field(default_factory=dict)
    # Last log lines of containers the checks want to quote, keyed by (pod, container).
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    # The first lines of the log of a container that says why once and then retries for ever (the validator's
    # driver-validation: from v25.10.0 it logs the host driver's error once, then loops on the driver-container
    # path), keyed like `logs`; read only for those containers (reader.py HEAD_LOG_CONTAINERS).
    log_heads: dict[tuple[str, str], str] = field(default_factory=dict)
    # Unfinished pods of every namespace on the nodes whose GPU holders a check must count (a validator stuck in
    # plugin-validation: its test pod may find every GPU in use), keyed by node. Read only for those nodes (a
    # bounded number, see reader.py): a node absent here was not read, so who holds its GPUs is unknown.
    node_pods: dict[str, list[Obj]] = field(default_factory=dict)
    operator_namespace: str = ""
    server: str = ""
    context: str = ""
    kubernetes_version: str = ""
    # How many API requests built this snapshot: must not grow with the number of nodes.
    requests: int = 0
    read_seconds: float = 0.0
    # When the read started (RFC 3339, UTC, this machine's clock); "" = unknown (e.g. a snapshot built in a test).
    # Only durations against the cluster's own timestamps use it (a driver's startup window), so a skewed clock
    # shifts those by the skew.
    read_at: str = ""
    gpu_node_selector: str | None = None

    # ---- ClusterPolicy -------------------------------------------------------------------
    @cached_property
    def active_clusterpolicy(self) -> Obj | None:
        """The oldest ClusterPolicy is the active one (the operator marks the others 'ignored')."""
        if not self.clusterpolicies:
            return None
        return sorted(
            self.clusterpolicies,
            key=lambda cp: (cp.get("metadata", {}).get("creationTimestamp", ""), name_of(cp)),
        )[0]

    def policy_spec(self, *path: str, default: Any = None) -> Any:
        cur: Any = (self.active_clusterpolicy or {}).get("spec", {})
        for p in path:
            if not isinstance(cur, dict) or p not in cur:
                return default
            cur = cur[p]
        return cur

    def policy_enabled(self, component: str, default: bool) -> bool:
        value = self.policy_spec(component, "enabled")
        return default if value is None else bool(value)

    # ---- nodes ---------------------------------------------------------------------------
    @cached_property
    def node_by_name(self) -> dict[str, Obj]:
        return {name_of(n): n for n in self.nodes}

    @cached_property
    def gpu_nodes(self) -> list[Obj]:
        """Nodes with any NVIDIA GPU evidence; the NFD layer reports the ones whose evidence disagrees.

        `nvidia.com/gpu.present=false` counts: the operator writes it (rather than removing the label)
        when a node's NFD labels disappear, so a GPU node that lost NFD is still found and reported.
        """
        return [n for n in self._gpu_evidence_nodes if labels_of(n).get(OPERANDS_OFF[0]) != OPERANDS_OFF[1]]

    @cached_property
    def _gpu_evidence_nodes(self) -> list[Obj]:
        sel = parse_selector(self.gpu_node_selector) if self.gpu_node_selector else None
        out = []
        for n in self.nodes:
            if not has_gpu_evidence(n):
                continue
            if sel is not None and not matches(sel, labels_of(n)):
                continue
            out.append(n)
        return sorted(out, key=name_of)

    @cached_property
    def excluded_gpu_nodes(self) -> list[Obj]:
        """GPU nodes an admin took out of the GPU Operator's hands (nvidia.com/gpu.deploy.operands=false, usually
        with nvidia.com/gpu.present=false): not judged, listed as excluded."""
        return [n for n in self._gpu_evidence_nodes if labels_of(n).get(OPERANDS_OFF[0]) == OPERANDS_OFF[1]]

    @cached_property
    def gpu_node_names(self) -> list[str]:
        return [name_of(n) for n in self.gpu_nodes]

    # ---- workloads -----------------------------------------------------------------------
    def daemonset(self, name: str) -> Obj | None:
        return next((d for d in self.daemonsets if name_of(d) == name), None)

    def deployment(self, name: str) -> Obj | None:
        return next((d for d in self.deployments if name_of(d) == name), None)

    @cached_property
    def _pods_by_owner_uid(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = defaultdict(list)
        for p in self.pods:
            for ref in p.get("metadata", {}).get("ownerReferences") or []:
                out[ref.get("uid", "")].append(p)
        return out

    def pods_of(self, owner: Obj) -> list[Obj]:
        return self._pods_by_owner_uid.get(owner.get("metadata", {}).get("uid", ""), [])

    def pods_with_labels(self, selector: dict[str, str]) -> list[Obj]:
        return [p for p in self.pods if match_labels(selector, labels_of(p))]

    @cached_property
    def pods_by_node(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = defaultdict(list)
        for p in self.pods:
            out[p.get("spec", {}).get("nodeName") or ""].append(p)
        return out

    def pod_on_node(self, pods: list[Obj], node: str) -> Obj | None:
        """The newest non-terminating pod of the given set on the node.

        Pass a node's own pods (pods_by_node, labelled_pod_on_node, facts.operand_pod): scanning a
        cluster-wide list once per node is quadratic and takes minutes at 5,000 nodes.
        """
        candidates = [p for p in pods if p.get("spec", {}).get("nodeName") == node
                      and not p.get("metadata", {}).get("deletionTimestamp")]
        if not candidates:
            return None
        return sorted(candidates, key=lambda p: p["metadata"].get("creationTimestamp", ""))[-1]

    def labelled_pod_on_node(self, selector: dict[str, str], node: str) -> Obj | None:
        """The node's newest pod whose labels include the selector (e.g. {"app": "nvidia-device-plugin-daemonset"})."""
        return self.pod_on_node([p for p in self.pods_by_node.get(node, []) if match_labels(selector, labels_of(p))],
                                node)

    @cached_property
    def _events_by_object(self) -> dict[tuple[str, str], list[Obj]]:
        out: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for e in self.events:
            io = e.get("involvedObject", {})
            out[(io.get("kind", ""), io.get("name", ""))].append(e)
        return out

    def events_for(self, kind: str, name: str) -> list[Obj]:
        """Events about one object; indexed once, since pod diagnosis asks for every operand pod of every node."""
        return self._events_by_object.get((kind, name), [])

    @cached_property
    def runtimeclass_names(self) -> set[str]:
        return {name_of(rc) for rc in self.runtimeclasses}
