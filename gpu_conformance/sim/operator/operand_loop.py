"""What the operand programs do on a node, whichever operator created their pods (hand-written or real).

kwok runs pods but not the programs in them, and it would complete every init container at once. This loop
is the kubelet and the programs for the operand side, in the order a real node goes through it:

* the validation chain. kwok leaves alone every pod with a `*-validation` init container (kwok-stages.yaml);
  this loop runs their init containers one at a time, each held until what it validates is ready (facts
  §3a/§3d): `driver-validation` (validator and toolkit pods) until the node's driver pod is Ready (or the host
  driver works); the validator's `toolkit-validation` until the toolkit pod is Ready; `cuda-validation`
  creates an `nvidia-cuda-validator` pod on the node and waits until it Succeeded; `plugin-validation` until
  the node's capacity has a GPU resource; the other operands' `toolkit-validation` until the validator passed
  its toolkit stage (the toolkit-ready file). A stage that is not ready shows as kubelet shows it: that
  init container running (or crash-looping), the later ones waiting in PodInitializing (kubectl: Init:k/N);
* the nvidia runtime handler: with the operator's toolkit, a fresh node has none until its toolkit pod first came
  up, so runtimeClassName nvidia pods (validator, device plugin, GFD, ...) get no sandbox until then;
* the device plugin's pod runs on a GPU node -> kubelet advertises the node's GPU resources; the pod is
  gone -> the resources become unallocatable (allocatable 0, capacity kept, as kubelet does when a plugin
  unregisters);
* GFD's pod runs -> the GFD labels (the operator then deploys mig-manager on MIG-capable GPUs);
* mig-manager's pod runs -> nvidia.com/mig.config.state=success;
* the cuda validator pod's vectorAdd runs -> the pod completes;
* the DRA models: the DRA driver's kubelet plugin pod is Ready -> it publishes the node's ResourceSlice
  (sim/operator/dra.py); the pod is gone or not Ready -> the slice is withdrawn (kubelet deletes a deregistered
  driver's slices); a pod
  whose ResourceClaims the scheduler allocated gets, per container using them, the probe output naming exactly
  those GPUs (status.allocation.devices.results -> the ResourceSlice's device uuid), served as its own log
  (sim/operator/pod_logs.py; only with --logs-dir).

What is wrong on a machine itself, where no Kubernetes object shows it (a driver that cannot load, a
clobbered containerd config, a failing vectorAdd), faults record in the ConfigMap gpu-sim-hosts
(kube-system), node -> comma-separated host faults (set_host_fault); the loop plays the node accordingly.

Effects fire on changes (a new pod uid, a pod gone), never as a level every round, so a fault that
changes a node's resources or labels afterwards stays as the fault left it; a pod's status is written only
when its shape changes (pod_states.shape), and pods past their init chain are left to whoever writes them.

    python -m gpu_conformance.sim.operator.operand_loop --kubeconfig K --namespace NS --profile P
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpu_conformance import dra_chart
from gpu_conformance import operands as op
from gpu_conformance.cluster.selectors import match_labels
from gpu_conformance.sim.controlplane.cluster import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from gpu_conformance.sim.operator import dra, kubelet_events, pod_states
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.profiles.catalogue import Profile, get_profile
from gpu_conformance.sim.services.processes import is_same_process
from gpu_conformance.sim.services.watch_cache import WatchCache, WatchSet

Obj = dict[str, Any]
Action = Callable[[], Any]

HOSTS_NAMESPACE = "kube-system"
HOSTS_CONFIGMAP = "gpu-sim-hosts"
# The loop's first round is done (value: its pid): faults may change what it would otherwise undo.
STARTED_ANNOTATION = "gpu-conformance.nvidia.com/operand-loop-pid"
# Host faults: what is broken on the machine, under Kubernetes.
DRIVER_UNLOADABLE = "driver-unloadable"  # the kernel module does not load: driver pod crash-loops, no nvidia-smi
RUNTIME_CLOBBERED = "runtime-clobbered"  # the nvidia handler injects nothing (runs plain runc): nvidia-smi not found
RUNTIME_MISSING = "runtime-missing"      # no "nvidia" runtime handler: runtimeClassName nvidia pods get no sandbox
CUDA_FAILING = "cuda-failing"            # vectorAdd fails (GPU off the bus, driver/CUDA mismatch)
# The node restarted: the toolkit removed the nvidia handler when it exited (the installer's cleanup) and writes it
# again only once it is Ready, after its driver-validation passed. Until then runtimeClassName nvidia pods get no
# sandbox — the normal state of a node whose driver is not up yet.
HANDLER_REMOVED = "handler-removed"
HOST_FAULTS = (DRIVER_UNLOADABLE, RUNTIME_CLOBBERED, RUNTIME_MISSING, CUDA_FAILING, HANDLER_REMOVED)
# A fresh node's toolkit pod is Ready as its container starts; the installer then writes containerd's config and
# restarts containerd before the nvidia handler exists (~12 s on the kind tier's nodes, here shortened so that a
# bring-up stays quick while pods created meanwhile still meet a node without it, as on kind).
HANDLER_DELAY = 2.0
# Init containers this loop runs (kwok-stages.yaml leaves every pod that has one to it).
PLAYED_SUFFIX = "-validation"
# Stage outcomes of one init container.
PASS, WAIT, CRASH = "pass", "wait", "crash"


def played(pod: Obj) -> bool:
    """Pods whose init containers this loop runs (exactly those kwok's pod stages leave alone)."""
    return any(c["name"].endswith(PLAYED_SUFFIX) for c in pod.get("spec", {}).get("initContainers") or [])


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: Obj) -> bool:
    return _running(pod) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                 for c in (pod.get("status") or {}).get("conditions") or [])


def _node_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _node_order(name: str) -> tuple[str, int, str]:
    # gpu-node-2 before gpu-node-10: the install assigns hardware by this index.
    m = re.match(r"(.*?)(\d+)$", name)
    return (m.group(1), int(m.group(2)), name) if m else (name, -1, name)


def _gpu_node_names(nodes: list[Obj]) -> list[str]:
    """kwok's GPU nodes: the loop plays their kubelet; a node with a kubelet of its own is not its to play."""
    def kwok_gpu(n: Obj) -> bool:
        meta = n["metadata"]
        return ((meta.get("labels") or {}).get(inst.NFD_PCI_LABEL) == "true"
                and (meta.get("annotations") or {}).get(KWOK_NODE_ANNOTATION) == KWOK_NODE_ANNOTATION_VALUE)

    return sorted((n["metadata"]["name"] for n in nodes if kwok_gpu(n)), key=_node_order)


# ---- host faults ---------------------------------------------------------------------------------
def host_faults(kube: Any) -> dict[str, set[str]]:
    """node -> the host faults recorded for it."""
    try:
        cm = kube.get("ConfigMap", HOSTS_CONFIGMAP, HOSTS_NAMESPACE)
    except ApiException as e:
        if e.status == 404:
            return {}
        raise
    return {node: {f for f in value.split(",") if f} for node, value in (cm.get("data") or {}).items()}


def _ensure_hosts(kube: Any) -> None:
    with contextlib.suppress(ApiException):  # 409: it exists
        kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": HOSTS_CONFIGMAP, "namespace": HOSTS_NAMESPACE}, "data": {}})


def set_host_fault(kube: Any, node: str, fault: str, present: bool = True) -> None:
    """Record (or clear) a host fault on a node; the loop plays the node accordingly from its next round."""
    if fault not in HOST_FAULTS:
        raise ValueError(f"unknown host fault {fault!r} (known: {', '.join(HOST_FAULTS)})")
    _ensure_hosts(kube)
    have = host_faults(kube).get(node, set())
    have = (have | {fault}) if present else (have - {fault})
    kube.patch("ConfigMap", HOSTS_CONFIGMAP, {"data": {node: ",".join(sorted(have)) or None}}, HOSTS_NAMESPACE)


def wait_started(kube: Any, pid: int, timeout: float = 60.0) -> None:
    """Until the loop process `pid` finished its first round."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(ApiException):
            cm = kube.get("ConfigMap", HOSTS_CONFIGMAP, HOSTS_NAMESPACE)
            if (cm["metadata"].get("annotations") or {}).get(STARTED_ANNOTATION) == str(pid):
                return
        time.sleep(0.2)
    raise RuntimeError(f"the operand loop (pid {pid}) did not complete a round within {timeout:.0f} s")


def join_gpu_node(sim: Any, name: str, operator: str = "sim", host: Sequence[str] = ()) -> None:
    """A new GPU node registers (its host faults recorded first, so its first pods already meet them).

    Its labels are NFD's; with the hand-written operator also the operator's (gpu.present, deploy labels),
    which the real operator writes itself when it sees the node.
    """
    from gpu_conformance.sim.operator.kwok_nodes import node_object

    for fault in host:
        set_host_fault(sim.api, name, fault)
    names = sorted({*sim.gpu_nodes, name}, key=_node_order)
    plan = next(p for p in inst.node_plans(sim.profile, names, []) if p.name == name)
    if operator != "sim":
        plan = inst.NodePlan(name=plan.name, gpu=True, hardware=plan.hardware,
                             labels=inst.nfd_labels(sim.profile, True), annotations={})
    version = sim.api.request("GET", "/version").get("gitVersion", "v1.36.0")
    sim.api.create(node_object(plan, sim.profile, version))
    if name not in sim.gpu_nodes:
        sim.gpu_nodes.append(name)


# ---- one node, as this round sees it ---------------------------------------------------------------
def pod_app(pod: Obj) -> str:
    """The pod's `app` label, or for the DRA driver chart's kubelet plugin (which has none) its DaemonSet's name."""
    labels = pod["metadata"].get("labels") or {}
    if "app" in labels:
        return labels["app"]
    return dra.CHART_KUBELET_PLUGIN if match_labels(dra_chart.KUBELET_PLUGIN_LABELS, labels) else ""


class _Node:
    def __init__(self, name: str, plan: inst.NodePlan, node: Obj, pods: list[Obj], host: set[str],
                 need_driver_pod: bool, need_toolkit_pod: bool) -> None:
        self.name = name
        self.plan = plan
        self.node = node
        self.host = host
        self.by_app: dict[str, list[Obj]] = {}
        for p in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", "")):
            self.by_app.setdefault(pod_app(p), []).append(p)
        self.need_driver_pod = need_driver_pod
        self.need_toolkit_pod = need_toolkit_pod

    def pods(self, app: str) -> list[Obj]:
        return self.by_app.get(app, [])

    def current(self, app: str) -> Obj | None:
        """The newest pod of the app on the node (a DaemonSet has one per node)."""
        pods = self.pods(app)
        return pods[-1] if pods else None

    def running(self, app: str) -> Obj | None:
        return next((p for p in reversed(self.pods(app)) if _running(p)), None)

    def driver_ready(self) -> bool:
        """What driver-validation waits for: the driver pod's startup probe passed (.driver-ctr-ready), or,
        without the operator's driver here, the host's own driver answers nvidia-smi."""
        if DRIVER_UNLOADABLE in self.host:
            return False
        driver = self.current(op.DRIVER.daemonset)
        labels = self.node["metadata"].get("labels") or {}
        if driver is None and not (self.need_driver_pod and labels.get(op.DRIVER.deploy_label) == "true"):
            return True
        return driver is not None and _ready(driver)

    def toolkit_ready(self) -> bool:
        """The toolkit pod runs, so containerd has the nvidia runtime the validator's nvidia-smi needs."""
        toolkit = self.current(op.TOOLKIT.daemonset)
        return _ready(toolkit) if toolkit is not None else not self.need_toolkit_pod

    def validated(self, stage: str) -> bool:
        """The validator on this node passed `stage` (its status file, e.g. toolkit-ready, exists)."""
        v = self.current(op.VALIDATOR.daemonset)
        if v is None:
            return False
        names = [c["name"] for c in v["spec"].get("initContainers") or []]
        return stage in names and pod_states.init_progress(v) > names.index(stage)

    def gpu_capacity(self) -> bool:
        """What plugin-validation polls: a nvidia.com/gpu* or nvidia.com/mig-* resource of at least 1."""
        cap = (self.node.get("status") or {}).get("capacity") or {}
        for key, qty in cap.items():
            if key.startswith(("nvidia.com/gpu", "nvidia.com/mig-")):
                with contextlib.suppress(ValueError):
                    if float(str(qty)) >= 1:
                        return True
        return False


class OperandSim:
    """One instance per cluster; step() is one round (also used in-process by the hand-written install)."""

    def __init__(self, kube: Any, profile: Profile, namespace: str, workers: int = 8,
                 show_fresh_waiting: bool = True, watch: bool = False, logs_dir: Path | None = None,
                 kubelet_events: bool = False, handler_delay: float = 0.0) -> None:
        self.kube = kube
        # Record kubelet's container events (Pulled/Created/Started, BackOff) as the loop moves containers on
        # (kubelet_events.py). Off by default: the fault matrix's expectations were set without them, and at the
        # benchmark's 1,000 nodes they would be ~40,000 more writes; the bring-up comparison with kind turns them on.
        self.kubelet_events = kubelet_events
        self.logs_dir = logs_dir
        self.served: set[str] = set()              # claim pods (uid) whose containers' logs are written
        # False (the hand-written install's own rounds): a fresh pod whose first init container waits keeps
        # its empty status (kubectl: Pending) instead of Init:0/N. Nobody reads it mid-install, and on big
        # clusters those writes were a third of the install's.
        self.show_fresh_waiting = show_fresh_waiting
        self.profile = profile
        self.ns = namespace
        # The namespaces whose pods the loop plays kubelet for: the operator's, and the DRA driver chart's.
        self.namespaces = [namespace] + ([dra.CHART_NAMESPACE] if profile.resource_model == "dra-driver" else [])
        self.workers = workers
        spec = inst.clusterpolicy_spec(profile)
        self.need_driver_pod = profile.driver_pods_expected
        self.need_toolkit_pod = op.operand_enabled(op.TOOLKIT, spec)
        self.advertised: dict[str, str] = {}       # node -> device-plugin pod uid whose resources are in
        self.labelled: dict[tuple[str, str], str] = {}  # (node, operand key) -> pod uid
        self.crashed_drivers: set[str] = set()    # driver pod uids this loop made crash-loop
        self.published: dict[str, str] = {}       # node -> DRA kubelet plugin pod uid whose ResourceSlice is in
        self.handler_nodes: set[str] = set()      # nodes whose toolkit wrote the nvidia runtime handler
        self._toolkit_up: dict[str, float] = {}   # node -> when its toolkit pod was first seen Ready
        self.handler_delay = handler_delay
        self.clock = time.monotonic
        self.evented: set[str] = set()            # kwok-run pods (uid) whose start events are recorded
        self.alive: dict[str, Obj] = {}            # played pods (uid) not being deleted, as last seen
        self.seeded = False
        self.pods: list[Obj] = []                  # what the last round listed
        self._plans: dict[str, inst.NodePlan] = {}
        self._plan_names: list[str] = []
        self._cp_uid: str | None = None
        # watch=True: nodes and pods from a LIST+WATCH copy (watch_cache.py) instead of two LISTs a round,
        # and a round looks only at the nodes something changed on since the last one.
        self.watch = watch
        self._watches: WatchSet | None = None
        self._node_cache: WatchCache | None = None
        self._pod_cache: WatchCache | None = None
        self._chart_pod_caches: dict[str, WatchCache] = {}
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._last_hosts: dict[str, set[str]] | None = None

    def _clusterpolicy_uid(self) -> str | None:
        if self._cp_uid is None:
            with contextlib.suppress(ApiException):
                cps = self.kube.list("ClusterPolicy")
                if cps:
                    self._cp_uid = min(cps, key=lambda c: c["metadata"].get("creationTimestamp", ""))["metadata"]["uid"]
        return self._cp_uid

    def plans(self, nodes: list[Obj]) -> dict[str, inst.NodePlan]:
        names = _gpu_node_names(nodes)
        if names != self._plan_names:
            # Hardware by node index, as the hand-written install assigns it (gpu-node-<i>).
            self._plans = {p.name: p for p in inst.node_plans(self.profile, names, [])}
            self._plan_names = names
        return self._plans

    # ---- what the round reads --------------------------------------------------------------------
    def _start_watching(self) -> None:
        from gpu_conformance.sim.services.kube_client import collection_path

        self._watches = WatchSet(self.kube)
        # Named by kind: StatusWriter and settle (status.py) read the same copies during an install.
        self._node_cache = self._watches.watch("Node", collection_path("Node"),
                                               lambda n: self._touched(n["metadata"]["name"]))
        self._pod_cache = self._watches.watch("Pod", collection_path("Pod", self.ns),
                                              lambda p: self._touched((p.get("spec") or {}).get("nodeName")))
        for ns in self.namespaces[1:]:
            self._chart_pod_caches[ns] = self._watches.watch(
                f"pods {ns}", collection_path("Pod", ns),
                lambda p: self._touched((p.get("spec") or {}).get("nodeName")))

    def close(self) -> None:
        if self._watches is not None:
            self._watches.stop()

    def status_watches(self) -> WatchSet | None:
        """The loop's watch copies plus the operator namespace's DaemonSets and ControllerRevisions: what the
        ClusterPolicy status is computed from (status.StatusWriter), without a LIST of every pod and
        node per status write (at 300 GPU nodes those LISTs were most of the installer's own CPU)."""
        if self._watches is None:
            return None
        from gpu_conformance.sim.services.kube_client import collection_path

        for kind in ("DaemonSet", "ControllerRevision"):
            if kind not in self._watches.caches:
                self._watches.watch(kind, collection_path(kind, self.ns))
        return self._watches

    def _touched(self, node: str | None) -> None:
        if node:
            with self._dirty_lock:
                self._dirty.add(node)

    def generation(self) -> int:
        return self._watches.generation() if self._watches is not None else 0

    def wait_for_change(self, since: int, timeout: float) -> None:
        """Until the watches saw something new after generation `since`, or `timeout` s (a LIST-mode loop just
        sleeps)."""
        if self._watches is None:
            time.sleep(timeout)
        else:
            self._watches.wait_for_change(since, timeout)

    def _read(self) -> tuple[list[Obj], list[Obj], set[str] | None]:
        """Nodes, the namespace's pods, and the nodes to look at (None: all)."""
        if not self.watch:
            return self.kube.list("Node"), [p for ns in self.namespaces for p in self.kube.list("Pod", ns)], None
        if self._node_cache is None or self._pod_cache is None:
            self._start_watching()
            assert self._node_cache is not None and self._pod_cache is not None
            with self._dirty_lock:
                self._dirty.clear()
            return self._node_cache.items(), self._all_pods(), None
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        return self._node_cache.items(), self._all_pods(), dirty

    def _all_pods(self) -> list[Obj]:
        assert self._pod_cache is not None
        return [*self._pod_cache.items(), *(p for c in self._chart_pod_caches.values() for p in c.items())]

    def _applied(self, obj: Obj) -> None:
        """Our own write's answer, into the copy at once (the next round must not redo it)."""
        ns = (obj.get("metadata") or {}).get("namespace")
        cache = self._node_cache if obj.get("kind") == "Node" else self._chart_pod_caches.get(ns or "", self._pod_cache)
        if cache is not None:
            cache.apply(obj)

    def step(self) -> int:
        """One round; returns how many writes it made."""
        nodes, self.pods, dirty = self._read()
        by_name = {n["metadata"]["name"]: n for n in nodes}
        plans = self.plans(nodes)
        hosts = host_faults(self.kube)
        if hosts != self._last_hosts or not self.seeded:
            dirty = None  # a host fault changed: every node is looked at again
            self._last_hosts = hosts
        # Nodes whose toolkit came up and whose handler is due are looked at again without a change of theirs.
        due = {n for n in self._toolkit_up if n not in self.handler_nodes}
        look = plans if dirty is None else {n: plans[n] for n in dirty | due if n in plans}
        per_node: dict[str, list[Obj]] = {}
        for p in self.pods:
            node = p["spec"].get("nodeName") or ""
            if node in look and not p["metadata"].get("deletionTimestamp"):
                per_node.setdefault(node, []).append(p)
        views = [_Node(name, plan, by_name[name], per_node.get(name, []), hosts.get(name, set()),
                       self.need_driver_pod, self.need_toolkit_pod) for name, plan in look.items()]
        if not self.seeded:
            for v in views:
                self._seed(v)
            self.seeded = True
        actions: list[Action] = []
        for v in views:
            actions += self._kubelet(v)
            actions += self._programs(v)
        if self.profile.dra and self.logs_dir is not None:
            actions += self._claim_pod_logs()
        if self.kubelet_events:
            actions += self._kwok_pod_events()
            actions += self._killing_events()
        if actions:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(actions))) as pool:
                list(pool.map(lambda f: f(), actions))
        return len(actions)

    def _kwok_pod_events(self) -> list[Action]:
        """kubelet's start events for the pods kwok runs (the operator's stand-in, NFD), once each."""
        actions: list[Action] = []
        for p in self.pods:
            uid = p["metadata"].get("uid", "")
            if uid in self.evented or played(p) or not _running(p):
                continue
            self.evented.add(uid)
            objs = [kubelet_events.event_object(p, *e) for e in kubelet_events.kwok_started(p)]
            actions.append(lambda objs=objs: [self.kube.create(o) for o in objs])
        return actions

    def _killing_events(self) -> list[Action]:
        """kubelet's Killing events of the played pods deleted since the last round, from their last status (kwok
        removes a deleted pod at once: the loop may never see its deletionTimestamp)."""
        now = {p["metadata"].get("uid", ""): p for p in self.pods if played(p)}
        gone = [p for uid, p in self.alive.items() if uid not in now or now[uid]["metadata"].get("deletionTimestamp")]
        self.alive = {uid: p for uid, p in now.items() if not p["metadata"].get("deletionTimestamp")}
        objs = [kubelet_events.event_object(p, *e) for p in gone for e in kubelet_events.killed(p)]
        return [lambda: [self.kube.create(o) for o in objs]] if objs else []

    def _seed(self, v: _Node) -> None:
        """What an earlier loop (the install's, or this process before a restart) already did stays done."""
        if v.toolkit_ready() or any(_running(p) and p["spec"].get("runtimeClassName") == "nvidia"
                                    for pods in v.by_app.values() for p in pods):
            self.handler_nodes.add(v.name)  # the toolkit came up here before: its handler is in containerd
        cap = (v.node.get("status") or {}).get("capacity") or {}
        dp = v.running(op.DEVICE_PLUGIN.daemonset)
        if dp is not None and any(k in cap for k in v.plan.gpu_resources):
            self.advertised[v.name] = dp["metadata"]["uid"]
        plugin = v.current(dra.kubelet_plugin_name(self.profile))
        if self.profile.dra and plugin is not None and _ready(plugin) and node_slices(self.kube, v.name):
            self.published[v.name] = plugin["metadata"]["uid"]
        labels = v.node["metadata"].get("labels") or {}
        for operand in (op.GFD, op.MIG_MANAGER):
            pod = v.running(operand.daemonset)
            want = v.plan.operand_labels.get(operand.key) or {}
            if pod is not None and want and all(k in labels for k in want):
                self.labelled[(v.name, operand.key)] = pod["metadata"]["uid"]

    # ---- kubelet: pod statuses ------------------------------------------------------------------
    def _write_status(self, pod: Obj, status: Obj, events: bool = False) -> Action:
        """The status write; with `events`, then kubelet's events of the containers it starts or backs off, in
        kubelet's order."""
        name = pod["metadata"]["name"]
        changes = kubelet_events.changes(pod, pod.get("status"), status) if events else []

        def write() -> None:
            with contextlib.suppress(ApiException):  # deleted meanwhile: nothing to write
                self._applied(self.kube.patch("Pod", name, {"status": status}, pod["metadata"].get("namespace")
                                              or self.ns, status=True))
                for change in changes:
                    self.kube.create(kubelet_events.event_object(pod, *change))
        return write

    def _kubelet(self, v: _Node) -> list[Action]:
        actions: list[Action] = []
        driver = v.current(op.DRIVER.daemonset)
        if driver is not None and DRIVER_UNLOADABLE in v.host:
            want = pod_states.crash_looping(driver, "nvidia-driver-ctr", restarts=8)
            if pod_states.shape(driver.get("status")) != pod_states.shape(want):
                actions.append(self._write_status(driver, want))
            self.crashed_drivers.add(driver["metadata"]["uid"])
        elif driver is not None and driver["metadata"]["uid"] in self.crashed_drivers:
            # The module loads again (the host was mended): the container's next restart comes up and its
            # startup probe passes. Only pods this loop crashed: others' statuses are a fault's to keep.
            self.crashed_drivers.discard(driver["metadata"]["uid"])
            want = pod_states.running_ready(driver)
            for cs in want["containerStatuses"]:
                cs["restartCount"] = 9 if cs["name"] == "nvidia-driver-ctr" else 0
            actions.append(self._write_status(driver, want))
        if _node_ready(v.node):
            # The node lifecycle controller marked the pods of this node not ready while kwok (starved of
            # CPU on a big install) missed heartbeats; the node posts again, so kubelet reports them Ready.
            for pods in v.by_app.values():
                actions += [self._write_status(p, pod_states.ready_again(p)) for p in pods
                            if pod_states.marked_back_ready(p)]
        for pods in v.by_app.values():
            for pod in pods:
                if not played(pod) or (pod.get("status") or {}).get("phase", "Pending") != "Pending":
                    continue  # past its init chain: its containers are kubelet's (or a fault's) to report
                want = self._next_status(pod, v, actions)
                if (not self.show_fresh_waiting and not (pod.get("status") or {}).get("initContainerStatuses")
                        and want.get("phase") == "Pending" and pod_states.init_progress({**pod, "status": want}) == 0):
                    continue
                if pod_states.shape(pod.get("status")) != pod_states.shape(want):
                    actions.append(self._write_status(pod, want, events=self.kubelet_events))
        return actions

    def _has_handler(self, v: _Node) -> bool:
        """Whether the node's containerd has the `nvidia` runtime handler that runtimeClassName nvidia pods need.

        With the operator's toolkit, a fresh node has none until its toolkit came up: its container starts (the
        pod is Ready, it has no probe), the installer writes containerd's config and restarts containerd
        (handler_delay later; ~12 s on the kind tier's nodes). Until then every such pod gets
        FailedCreatePodSandBox, 'no runtime for "nvidia" is configured', as on the kind tier. Without the
        operator's toolkit the host provides it. Host faults: missing for good, or removed until the toolkit is
        Ready again."""
        if RUNTIME_MISSING in v.host:
            return False
        if self.need_toolkit_pod and v.toolkit_ready():
            if v.name not in self.handler_nodes:
                since = self._toolkit_up.setdefault(v.name, self.clock())
                if self.clock() - since < self.handler_delay:
                    return False
                self.handler_nodes.add(v.name)
            return True
        if HANDLER_REMOVED in v.host:
            return False
        return v.name in self.handler_nodes or not self.need_toolkit_pod

    def _next_status(self, pod: Obj, v: _Node, actions: list[Action]) -> Obj:
        """The pod's status after this round: at most one more init container through, as a node runs them."""
        if pod["spec"].get("runtimeClassName") == "nvidia" and not self._has_handler(v):
            return pod_states.no_sandbox(pod)
        app = (pod["metadata"].get("labels") or {}).get("app", "")
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        done = pod_states.init_progress(pod)
        finished = pod_states.completed if app == op.CUDA_VALIDATOR_APP else pod_states.running_ready
        if done >= len(inits):
            return finished(pod)
        stage = inits[done]
        outcome = self._gate(pod, app, stage, v, actions)
        if outcome in (WAIT, CRASH):
            restarts = next((cs.get("restartCount", 0) for cs in (pod.get("status") or {}).get(
                "initContainerStatuses") or [] if cs.get("name") == stage), 0)
            return pod_states.stuck_in_init(pod, stage, crash=outcome == CRASH,
                                            restarts=max(restarts, 1) if outcome == CRASH else restarts)
        if done + 1 < len(inits):
            return pod_states.stuck_in_init(pod, inits[done + 1], crash=False)  # the next one starts
        return finished(pod)

    def _gate(self, pod: Obj, app: str, stage: str, v: _Node, actions: list[Action]) -> str:
        """Whether init container `stage` of the pod exits 0 now (facts §3a, §3d)."""
        if app == op.CUDA_VALIDATOR_APP:
            # Its cuda-validation runs vectorAdd. restartPolicy OnFailure (validator/cuda-workload-validation.yaml)
            # makes kubelet restart a failed init container: the pod stays Pending in Init:CrashLoopBackOff, never
            # Failed (seen on the kind tier with NVIDIA's validator).
            return CRASH if CUDA_FAILING in v.host else PASS
        if stage in ("driver-validation", "init-container"):
            # driver-validation: WITH_WAIT=true, loops until the driver answers; the DRA driver chart's
            # init-container (kubelet-plugin-prestart.sh) likewise waits for the driver root.
            return PASS if v.driver_ready() else WAIT
        if stage == "toolkit-validation" and app == op.VALIDATOR.daemonset:
            if RUNTIME_CLOBBERED in v.host:
                return CRASH  # WITH_WAIT=false: nvidia-smi not found, exit 127, kubelet restarts it
            return PASS if v.toolkit_ready() else WAIT
        if stage == "toolkit-validation":  # the other operands: until [ -f toolkit-ready ]
            return PASS if v.validated("toolkit-validation") else WAIT
        if stage == "cuda-validation":
            return self._cuda_stage(pod, v, actions)
        if stage == "plugin-validation":
            return PASS if v.gpu_capacity() else WAIT
        return PASS  # nvidia-fs/gdrcopy (after driver-validation), sandbox validations: nothing to hold them

    def _cuda_stage(self, validator: Obj, v: _Node, actions: list[Action]) -> str:
        """cuda-validation: create this run's nvidia-cuda-validator pod (deleting an older one), wait until it
        Succeeded."""
        created = validator["metadata"].get("creationTimestamp", "")
        cudas = v.pods(op.CUDA_VALIDATOR_APP)
        mine = [p for p in cudas if p["metadata"].get("creationTimestamp", "") >= created]
        if mine:
            return PASS if (mine[-1].get("status") or {}).get("phase") == "Succeeded" else WAIT
        actions.append(lambda: self._create_cuda_validator(v.name, cudas))
        return WAIT

    def _create_cuda_validator(self, node: str, old: list[Obj]) -> None:
        from gpu_conformance.sim.operator.kwok_nodes import cuda_validator_name

        for p in old:  # the validator deletes its previous workload pod before creating a new one
            with contextlib.suppress(ApiException):
                self.kube.request("DELETE", self.kube.path("Pod", p["metadata"]["name"], self.ns),
                                  body={"gracePeriodSeconds": 0})
                if self._pod_cache is not None:
                    self._pod_cache.forget(self.ns, p["metadata"]["name"])
        # Named like generateName would; the first one deterministically (the cuda-validation log cites it).
        pod = inst.cuda_validator_pod(self.profile, self.ns, node, self._clusterpolicy_uid(),
                                      name=None if old else cuda_validator_name(node))
        self._applied(self.kube.create(pod))

    # ---- the programs: node resources and labels -------------------------------------------------
    def _programs(self, v: _Node) -> list[Action]:
        actions: list[Action] = []
        plan = v.plan
        dp = v.running(op.DEVICE_PLUGIN.daemonset)
        if dp is not None and self.advertised.get(v.name) != dp["metadata"]["uid"] and plan.gpu_resources:
            actions.append(lambda n=v.name, r=plan.gpu_resources: self._applied(self.kube.patch(
                "Node", n, {"status": {"capacity": r, "allocatable": r}}, status=True)))
            self.advertised[v.name] = dp["metadata"]["uid"]
        elif dp is None and v.name in self.advertised:
            # The plugin unregistered: kubelet keeps the capacity but nothing is allocatable any more.
            cap = (v.node.get("status") or {}).get("capacity") or {}
            zero = {k: "0" for k in plan.gpu_resources if k in cap}
            if zero:
                actions.append(lambda n=v.name, z=zero: self._applied(self.kube.patch(
                    "Node", n, {"status": {"allocatable": z}}, status=True)))
            del self.advertised[v.name]
        if self.profile.dra:
            actions += self._resource_slices(v)
        for operand in (op.GFD, op.MIG_MANAGER):
            pod = v.running(operand.daemonset)
            labels = plan.operand_labels.get(operand.key)
            if pod and labels and self.labelled.get((v.name, operand.key)) != pod["metadata"]["uid"]:
                actions.append(lambda n=v.name, lb=labels: self._applied(
                    self.kube.patch("Node", n, {"metadata": {"labels": lb}})))
                self.labelled[(v.name, operand.key)] = pod["metadata"]["uid"]
        return actions


    def _resource_slices(self, v: _Node) -> list[Action]:
        """The kubelet plugin publishes the node's GPUs once Ready (again after a restart); gone, they are withdrawn."""
        plugin = v.current(dra.kubelet_plugin_name(self.profile))
        uid = plugin["metadata"]["uid"] if plugin is not None and _ready(plugin) else None
        if uid is not None and self.published.get(v.name) != uid and v.plan.hardware is not None:
            self.published[v.name] = uid
            sl = dra.resource_slice(v.name, v.node["metadata"].get("uid", ""), v.plan.hardware, self.profile)
            return [lambda n=v.name, obj=sl: self._republish(n, obj)]
        if uid is None and v.name in self.published:
            del self.published[v.name]
            return [lambda n=v.name: self._withdraw(n)]
        return []

    def _claim_pod_logs(self) -> list[Action]:
        """Pods the scheduler allocated GPUs to (claims reserved for them) and not yet given their output."""
        from gpu_conformance.sim.services.kube_client import collection_path

        claims = self.kube.request("GET", collection_path("ResourceClaim")).get("items") or []
        held: dict[tuple[str, str, str], list[Obj]] = {}  # (namespace, pod, uid) -> its allocated claims
        for c in claims:
            if not ((c.get("status") or {}).get("allocation") or {}).get("devices"):
                continue
            for r in (c.get("status") or {}).get("reservedFor") or []:
                if r.get("resource") == "pods" and r.get("uid") not in self.served:
                    held.setdefault((c["metadata"]["namespace"], r["name"], r["uid"]), []).append(c)
        if not held:
            return []
        slices = self.kube.request("GET", collection_path("ResourceSlice")).get("items") or []
        return [lambda k=key, cs=cs: self._serve_claim_pod(*k, cs, slices) for key, cs in held.items()]

    def _serve_claim_pod(self, namespace: str, name: str, uid: str, claims: list[Obj], slices: list[Obj]) -> None:
        from gpu_conformance.sim.operator import pod_logs
        from gpu_conformance.sim.profiles.nvidia_smi import claim_probe_output

        assert self.logs_dir is not None
        devices = [d for c in claims for d in dra.allocated_devices(c, slices)]
        if not devices:
            return  # a device of another driver, or the slice withdrawn meanwhile: nothing to show
        try:
            pod = self.kube.get("Pod", name, namespace)
        except ApiException:
            return
        users = [c["name"] for c in pod["spec"].get("containers") or []
                 if ((c.get("resources") or {}).get("claims"))]
        text = claim_probe_output(devices[0][2], [(minor, uuid) for minor, uuid, _ in devices])
        try:
            pod_logs.serve(self.kube, self.logs_dir, namespace, name, dict.fromkeys(users, text))
        except ApiException as e:
            if e.status != 409:  # 409: served by an earlier loop
                raise
        try:
            # kwok's pod-ready stage holds a claim pod until this mark (data/kwok-stages.yaml).
            self.kube.patch("Pod", name, {"metadata": {"annotations": {pod_logs.SERVED_ANNOTATION: "served"}}},
                            namespace)
        except ApiException as e:
            if e.status != 404:  # 404: the pod went away meanwhile
                raise
        self.served.add(uid)

    def _withdraw(self, node: str) -> None:
        for sl in node_slices(self.kube, node):
            with contextlib.suppress(ApiException):  # gone meanwhile
                self.kube.delete("ResourceSlice", sl["metadata"]["name"])

    def _republish(self, node: str, obj: Obj) -> None:
        self._withdraw(node)
        self.kube.create(obj)


def node_slices(kube: Any, node: str) -> list[Obj]:
    """The DRA GPU driver's ResourceSlices of a node."""
    from gpu_conformance.sim.services.kube_client import collection_path

    query = [("fieldSelector", f"spec.nodeName={node},spec.driver={dra.DRIVER_NAME}")]
    return kube.request("GET", collection_path("ResourceSlice"), query=query).get("items") or []


class OperatorPause:
    """Keeps the real operator process in step with its stand-in pod: when the gpu-operator Deployment has
    no available pod (scaled to 0, crash-looping), the process is stopped (SIGSTOP), so nothing reconciles,
    as on a real cluster; it continues (SIGCONT) when the Deployment is available again."""

    def __init__(self, kube: Any, namespace: str, pid: int, start_time: int) -> None:
        self.kube = kube
        self.ns = namespace
        self.pid = pid
        self.start_time = start_time
        self.paused = False

    def step(self) -> None:
        deps = [d for d in self.kube.list("Deployment", self.ns) if d["metadata"]["name"] == op.OPERATOR_DEPLOYMENT]
        available = not deps or bool((deps[0].get("status") or {}).get("availableReplicas"))
        if available == (not self.paused):
            return
        self.set_paused(not available)

    def set_paused(self, paused: bool) -> None:
        # The pid must still be the process the cluster started (same start time), never a recycled one.
        if is_same_process(self.pid, self.start_time):
            os.kill(self.pid, signal.SIGSTOP if paused else signal.SIGCONT)
            self.paused = paused


_STOP = False


def _on_term(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    global _STOP
    _STOP = True


def _mark_started(kube: Any) -> None:
    _ensure_hosts(kube)
    kube.patch("ConfigMap", HOSTS_CONFIGMAP, {"metadata": {"annotations": {STARTED_ANNOTATION: str(os.getpid())}}},
               HOSTS_NAMESPACE)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.operator.operand_loop")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="gpu-operator")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--period", type=float, default=0.5)
    ap.add_argument("--operator-pid", type=int, default=0, help="the real operator's process, paused with its pod")
    ap.add_argument("--operator-start-time", type=int, default=0)
    ap.add_argument("--logs-dir", default="", help="where claim pods' own logs go (the control plane's logs dir)")
    ap.add_argument("--kubelet-events", action="store_true", help="record kubelet's container events")
    ap.add_argument("--handler-delay", type=float, default=HANDLER_DELAY,
                    help="seconds from a fresh node's toolkit pod Ready to containerd's nvidia handler")
    a = ap.parse_args(argv)
    from kubernetes import config

    from gpu_conformance.sim.services.kube_client import Kube

    sim = OperandSim(Kube(config.new_client_from_config(config_file=a.kubeconfig)), get_profile(a.profile),
                     a.namespace, watch=True, logs_dir=Path(a.logs_dir) if a.logs_dir else None,
                     kubelet_events=a.kubelet_events, handler_delay=a.handler_delay)
    pause = OperatorPause(sim.kube, a.namespace, a.operator_pid, a.operator_start_time) if a.operator_pid else None
    signal.signal(signal.SIGTERM, _on_term)
    started = False
    while not _STOP:
        seen = sim.generation()
        try:
            busy = sim.step()
            if pause is not None:
                pause.step()
            if not started:
                _mark_started(sim.kube)
                started = True
        except Exception:  # an API hiccup or a race with a deleted object: the next round retries
            busy = 0
        if not busy:
            # The operator's Deployment (OperatorPause) is read by LIST: look at least every period.
            sim.wait_for_change(seen, a.period)
    if pause is not None and pause.paused:
        pause.set_paused(False)  # stopped before the operator: let it take its own SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
