"""The ClusterPolicy status the real operator writes, recomputed from the cluster as pods change.

The real ClusterPolicy controller (GO v25.3.4 controllers/clusterpolicy_controller.go, object_controls.go
`isDaemonSetReady`) walks its states in order and marks a state not ready when its DaemonSet is:

* found, with desiredNumberScheduled > 0 and status.numberUnavailable != 0; or
* OnDelete (the driver) and some pod of it is on an older controller revision, not Running, or has a
  container that is not Ready (also: no pods at all).

A DaemonSet that is not found, or wants 0 pods, counts as ready: hence the first reconcile, before the
DaemonSet controller has counted anything, reports ready/Reconciled. Any state not ready makes the whole
ClusterPolicy `notReady`, Ready=False/Error, Error=True/OperandNotReady with the message below, whichever
node the unavailable pod is on. A stopped operator writes nothing: its last status stays.

The gpucluster model has no ClusterPolicy; its GPUCluster gets the status the v26.7.0 GPUCluster controller writes
(sim/operator/dra.py gpucluster_status): ready once the DRA driver's kubelet plugin DaemonSet is, else notReady.

    python -m gpu_conformance.sim.operator.status --kubeconfig K --namespace NS --version V   # the loop
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.gpu_operator.clusterpolicy import READY_MESSAGE, clusterpolicy_conditions
from gpu_conformance.gpu_operator.operand_specs import MPS_DAEMONSET

Obj = dict[str, Any]

CLUSTERPOLICY_NAME = "cluster-policy"
NO_GPU_MESSAGE = "No GPU node found, watching for new nodes to join the cluster."
NFD_PCI_LABELS = ("feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-0302_10de.present",
                  "feature.node.kubernetes.io/pci-0300_10de.present")
REVISION_LABEL = "controller-revision-hash"

# The operator's states that own an operand DaemonSet, in its reconcile order (GO state_manager.go addState).
STATE_DAEMONSETS: tuple[tuple[str, str], ...] = (
    ("state-driver", op.DRIVER.daemonset),
    ("state-container-toolkit", op.TOOLKIT.daemonset),
    ("state-operator-validation", op.VALIDATOR.daemonset),
    ("state-device-plugin", op.DEVICE_PLUGIN.daemonset),
    ("state-mps-control-daemon", MPS_DAEMONSET),
    ("state-dcgm", op.DCGM.daemonset),
    ("state-dcgm-exporter", op.DCGM_EXPORTER.daemonset),
    ("gpu-feature-discovery", op.GFD.daemonset),
    ("state-mig-manager", op.MIG_MANAGER.daemonset),
    ("state-node-status-exporter", op.NODE_STATUS_EXPORTER.daemonset),
)


def not_ready_message(operator_version: str, states: Sequence[str]) -> str:
    """Go's `%v` of the []string: "[a b]"; the separator before "states" changed in a release."""
    sep = ";" if versions.since(versions.NOT_READY_SEMICOLON, versions.parse_or_newest(operator_version)) else ","
    return f"ClusterPolicy is not ready{sep} states not ready: [{' '.join(states)}]"


def _owned_by(pod: Obj, ds: Obj) -> bool:
    refs = pod["metadata"].get("ownerReferences") or []
    return bool(refs) and refs[0].get("uid") == ds["metadata"].get("uid")


def current_revision_hash(ds: Obj, revisions: list[Obj]) -> str | None:
    """The newest ControllerRevision named after the DaemonSet; its name's suffix is the pods' hash label."""
    name = ds["metadata"]["name"]
    mine = [r for r in revisions if r["metadata"]["name"].startswith(name)]
    if not mine:
        return None
    newest = max(mine, key=lambda r: int(r.get("revision", 0)))
    return newest["metadata"]["name"].removeprefix(f"{name}-")


def daemonset_ready(ds: Obj | None, pods: list[Obj], revisions: list[Obj]) -> bool:
    """isDaemonSetReady of GO v25.3.4 object_controls.go, on plain dicts."""
    if ds is None:
        return True  # not found: the operator logs an error and treats the empty object as 0 desired
    st = ds.get("status") or {}
    if not st.get("desiredNumberScheduled"):
        return True
    if st.get("numberUnavailable"):
        return False
    if (ds["spec"].get("updateStrategy") or {}).get("type") != "OnDelete":
        return True
    template_labels = ds["spec"]["template"]["metadata"].get("labels") or {}
    matching = [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v
                                       for k, v in template_labels.items())]
    if not matching:
        return False
    want = current_revision_hash(ds, revisions)
    if want is None:
        return False
    for pod in (p for p in matching if _owned_by(p, ds)):
        labels = pod["metadata"].get("labels") or {}
        if labels.get(REVISION_LABEL) != want or (pod.get("status") or {}).get("phase") != "Running":
            return False
        if not all(c.get("ready") for c in (pod.get("status") or {}).get("containerStatuses") or []):
            return False
    return True


def states_not_ready(daemonsets: list[Obj], pods: list[Obj], revisions: list[Obj]) -> list[str]:
    by_name = {d["metadata"]["name"]: d for d in daemonsets}
    return [state for state, name in STATE_DAEMONSETS
            if not daemonset_ready(by_name.get(name), pods, revisions)]


def has_gpu_nodes(nodes: list[Obj]) -> bool:
    return any((n["metadata"].get("labels") or {}).get(k) == "true" for n in nodes for k in NFD_PCI_LABELS)


def has_nfd_labels(nodes: list[Obj]) -> bool:
    return any(k.startswith("feature.node.kubernetes.io/") for n in nodes for k in n["metadata"].get("labels") or {})


def desired_status(namespace: str, operator_version: str, not_ready: Sequence[str], gpu_nodes: bool,
                   nfd_labels: bool) -> tuple[str, str, str, str]:
    """(state, condition type that is True, its reason, its message), in the controller's order of tests."""
    if not_ready:
        return "notReady", "Error", "OperandNotReady", not_ready_message(operator_version, not_ready)
    if not nfd_labels:
        return "ready", "Ready", "NFDLabelsMissing", "No NFD labels found"
    if not gpu_nodes:
        return "ready", "Ready", "NoGPUNodes", NO_GPU_MESSAGE
    return "ready", "Ready", "Reconciled", READY_MESSAGE


def apply_status(current: Obj | None, namespace: str, state: str, true_type: str, reason: str, message: str,
                 now: str) -> Obj:
    """The new status: meta.SetStatusCondition keeps lastTransitionTime unless a condition's status flips."""
    old = {c["type"]: c for c in (current or {}).get("conditions") or []}
    conditions = []
    for ctype, status, why, text in clusterpolicy_conditions(true_type == "Ready", reason, message):
        prev = old.get(ctype)
        since = prev["lastTransitionTime"] if prev and prev.get("status") == status else now
        conditions.append({"type": ctype, "status": status, "reason": why, "message": text,
                           "lastTransitionTime": since})
    return {"state": state, "namespace": namespace, "conditions": conditions}


def status_equal(a: Obj | None, b: Obj) -> bool:
    def key(s: Obj | None) -> Any:
        s = s or {}
        return (s.get("state"), s.get("namespace"),
                sorted((c["type"], c["status"], c.get("reason"), c.get("message") or "")
                       for c in s.get("conditions") or []))
    return key(a) == key(b)


class StatusWriter:
    """One reconcile's status write, as the hand-written operator does it (also used by the loop)."""

    def __init__(self, kube: Any, namespace: str, operator_version: str, watches: Any = None) -> None:
        self.kube = kube
        self.namespace = namespace
        self.operator_version = operator_version
        # A watch_cache.WatchSet with "DaemonSet", "Pod", "ControllerRevision", "Node": the loop's copies (at
        # 1,000 nodes a LIST of the pods and nodes every second was a large share of the API server's CPU).
        self.watches = watches
        self._no_gpucluster = False  # the GPUCluster CRD is not installed (the install creates it before the loop)

    def _list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        if self.watches is not None and kind in self.watches.caches:
            return self.watches.caches[kind].items()
        return self.kube.list(kind, namespace)

    def operator_running(self) -> bool:
        # The real operator's status stops changing when its pod is gone or crash-looping.
        deps = [d for d in self.kube.list("Deployment", self.namespace)
                if d["metadata"]["name"] == op.OPERATOR_DEPLOYMENT]
        return not deps or bool((deps[0].get("status") or {}).get("availableReplicas"))

    def compute(self) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            cps = self.kube.list("ClusterPolicy")
        except ApiException as e:
            if e.status == 404:  # the CRD is gone: nothing to reconcile
                return None
            raise
        if not cps:
            return None
        cp = min(cps, key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"]))
        dss = self._list("DaemonSet", self.namespace)
        pods = self._list("Pod", self.namespace)
        revisions = self._list("ControllerRevision", self.namespace)
        nodes = self._list("Node")
        state, true_type, reason, message = desired_status(
            self.namespace, self.operator_version, states_not_ready(dss, pods, revisions), has_gpu_nodes(nodes),
            has_nfd_labels(nodes))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"name": cp["metadata"]["name"], "current": cp.get("status"),
                "status": apply_status(cp.get("status"), self.namespace, state, true_type, reason, message, now)}

    def write_gpucluster(self) -> Obj | None:
        """The GPUCluster's status, written if it changed (None: no GPUCluster)."""
        from kubernetes.client.exceptions import ApiException

        from gpu_conformance.sim.operator import dra
        if self._no_gpucluster:
            return None
        try:
            gcs = self.kube.list("GPUCluster")
        except ApiException as e:
            if e.status == 404:
                self._no_gpucluster = True
                return None
            raise
        if not gcs:
            return None
        gc = gcs[0]
        dss = {d["metadata"]["name"]: d for d in self._list("DaemonSet", self.namespace)}
        ds = dss.get(dra.KUBELET_PLUGIN)
        # A DaemonSet not created yet is not ready here: the GPUCluster controller renders it in the same reconcile.
        ready = ds is not None and daemonset_ready(ds, self._list("Pod", self.namespace),
                                                   self._list("ControllerRevision", self.namespace))
        # With computeDomains the state also owns the controller Deployment: ready once it has a pod available.
        ctl = [d for d in self.kube.list("Deployment", self.namespace) if d["metadata"]["name"] == dra.CONTROLLER]
        ready = ready and all((d.get("status") or {}).get("availableReplicas") for d in ctl)
        current = gc.get("status") or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        want = dra.gpucluster_status(self.namespace, ready, now)
        if current.get("state") == want["state"] and current.get("namespace") == want["namespace"]:
            return current
        self.kube.patch("GPUCluster", gc["metadata"]["name"], {"status": want}, status=True)
        return want

    def write(self) -> Obj | None:
        """Recompute and write if it changed; returns the status now in place (None: no ClusterPolicy)."""
        got = self.compute()
        if got is None:
            return self.write_gpucluster()
        if not status_equal(got["current"], got["status"]):
            self.kube.patch("ClusterPolicy", got["name"], {"status": got["status"]}, status=True)
        return got["status"]


def daemonsets_settled(kube: Any, namespace: str, watches: Any = None) -> bool:
    """Every DaemonSet's status counts its pods as they are now (the controller has caught up).

    watches: a WatchSet with "Pod" and "DaemonSet" copies of the namespace, read instead of two LISTs."""
    if watches is not None:
        pods, dss = watches.caches["Pod"].items(), watches.caches["DaemonSet"].items()
    else:
        pods, dss = kube.list("Pod", namespace), kube.list("DaemonSet", namespace)
    for ds in dss:
        st = ds.get("status") or {}
        if st.get("observedGeneration", 0) < ds["metadata"].get("generation", 1):
            return False
        mine = [p for p in pods if _owned_by(p, ds) and not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in mine if any(c.get("type") == "Ready" and c.get("status") == "True"
                                           for c in (p.get("status") or {}).get("conditions") or []))
        if st.get("numberReady", 0) != ready or st.get("currentNumberScheduled", 0) + st.get(
                "numberMisscheduled", 0) != len(mine):
            return False
    return True


def settle(kube: Any, namespace: str, operator_version: str, timeout: float = 20.0,
           write: bool = True, watches: Any = None) -> Obj | None:
    """Wait until the DaemonSet controller has counted the pods, then write the status they imply.

    Faults change pod statuses directly; the operator's next reconcile (at most 5 s later on a real
    cluster) sees them only through the DaemonSet status, so wait for that before judging. write=False
    (the real operator writes its own): wait until its status equals what the rule implies, or time out.
    """
    if watches is None:
        # One LIST+WATCH per kind for the whole wait, not a LIST of every pod per 0.3 s poll (at 300 GPU nodes
        # those LISTs were the largest part of a booted cluster's own CPU after the install).
        from gpu_conformance.sim.services.kube_client import collection_path
        from gpu_conformance.sim.services.watch_cache import WatchSet

        own = WatchSet(kube)
        try:
            for kind in ("Pod", "DaemonSet", "ControllerRevision", "Node"):
                own.watch(kind, collection_path(kind, None if kind == "Node" else namespace))
            return settle(kube, namespace, operator_version, timeout, write, own)
        finally:
            own.stop()
    writer = StatusWriter(kube, namespace, operator_version, watches)
    end = time.monotonic() + timeout
    stable = 0
    while time.monotonic() < end and stable < 2:
        stable = stable + 1 if daemonsets_settled(kube, namespace, watches) else 0
        time.sleep(0.3)
    if not writer.operator_running():
        return None
    if write:
        return writer.write()
    stop = time.monotonic() + timeout
    while True:
        got = writer.compute()
        if got is None or status_equal(got["current"], got["status"]) or time.monotonic() > stop:
            return got["current"] if got else None
        time.sleep(0.5)


# ---- the loop: a separate process, like the operator ------------------------------------------
LOOP_NAME = "sim-operator-status"


def start_status_loop(cluster: Any, namespace: str, operator_version: str, period: float = 1.0) -> None:
    """Run the loop as one of the cluster's processes (in pids.json, stopped by `sim down` / stop())."""
    cluster.spawn(LOOP_NAME, [sys.executable, "-m", "gpu_conformance.sim.operator.status",
                              f"--kubeconfig={cluster.kubeconfig}", f"--namespace={namespace}",
                              f"--version={operator_version}", f"--period={period}"])


def _on_term(signum: int, frame: FrameType | None) -> None:
    # Out at once, wherever the loop waits (a sleep, a watch's condition): it holds nothing to put back, and a
    # flag read once per round kept the cluster's stop waiting up to 3 periods.
    del signum, frame
    raise SystemExit(0)


def run_loop(kubeconfig: str, namespace: str, operator_version: str, period: float) -> int:
    from kubernetes import config

    from gpu_conformance.cluster.connect import API_ERRORS
    from gpu_conformance.sim.services.kube_client import Kube, collection_path
    from gpu_conformance.sim.services.watch_cache import WatchSet

    kube = Kube(config.new_client_from_config(config_file=kubeconfig))
    watches = WatchSet(kube)
    signal.signal(signal.SIGTERM, _on_term)
    for kind in ("DaemonSet", "Pod", "ControllerRevision", "Node"):
        while True:
            try:
                watches.watch(kind, collection_path(kind, None if kind == "Node" else namespace))
                break
            except (*API_ERRORS, ValueError):
                time.sleep(period)
    writer = StatusWriter(kube, namespace, operator_version, watches)
    while True:
        seen = watches.generation()
        # An API hiccup (or a body cut short): the next round retries, like a requeue.
        with contextlib.suppress(*API_ERRORS, ValueError):
            if writer.operator_running():
                writer.write()
        # At most a round per period; between, only when something changed (the ClusterPolicy and the
        # operator's Deployment, read by small LISTs, are looked at again at least every 3 periods).
        time.sleep(period)
        watches.wait_for_change(seen, 2 * period, debounce=0)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.operator.status")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="gpu-operator")
    ap.add_argument("--version", required=True, help="operator version whose wording to use")
    ap.add_argument("--period", type=float, default=1.0)
    a = ap.parse_args(argv)
    return run_loop(a.kubeconfig, a.namespace, a.version, a.period)


if __name__ == "__main__":
    sys.exit(main())
