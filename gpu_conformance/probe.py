"""The probe: the suite's only writes. A pod per target node that requests a GPU with no runtimeClassName.

Everything it creates lives in one namespace of its own, labelled with the run id, and is deleted in a
`finally` (so also on timeout, errors and Ctrl-C), after its logs and events were captured.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from gpu_conformance.cluster.connect import Connection, raw_request
from gpu_conformance.cluster.reader import ClusterReader
from gpu_conformance.cluster.snapshot import ClusterSnapshot, gpu_resources, name_of
from gpu_conformance.errors import ConformanceError
from gpu_conformance.model import Finding, Status
from gpu_conformance.operands import parse_version
from gpu_conformance.probe_output import PROBE_SCRIPT, ProbeOutput, parse_probe_output
from gpu_conformance.settings import Settings

RUN_LABEL = "gpu-conformance.nvidia.com/run-id"
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpu-operator-conformance")
CONTAINER = "gpu-probe"
PULL_FAILURES = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
# The runtime refused to create or start the container (a real node's answer to, e.g., a CDI device name
# no CDI spec resolves): the kubelet retries forever, so waiting longer only delays the report.
CREATE_FAILURES = ("CreateContainerError", "CreateContainerConfigError", "RunContainerError")
# Marks the last-seen copy of a probe pod deleted before it finished (its namespace deleted mid-run).
VANISHED = "gpu-conformance/vanished"
CDI_HINT = ("the device plugin allocated a CDI device that no CDI spec on the node resolves: the spec is "
            "missing or stale (the toolkit writes it: nvidia-ctk cdi generate / restart the toolkit pod)")
# After the scheduler has said no this long, waiting more only delays the report.
UNSCHEDULABLE_GRACE = 8.0
MAX_PROBE_NODES = 16


@dataclass
class ProbeRun:
    findings: list[Finding] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    namespace: str = ""
    skipped: str = ""
    deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "skipped": self.skipped, "deleted": self.deleted, "pods": self.pods}


def probe_namespace(run_id: str) -> str:
    return f"gpu-conformance-probe-{run_id}"[:63].rstrip("-")


def gpu_resource_for(node: dict) -> str:
    """The resource a workload asks for on this node: nvidia.com/gpu, else what the plugin renamed it to."""
    res = gpu_resources(node, "allocatable") or gpu_resources(node, "capacity")
    if "nvidia.com/gpu" in res or not res:
        return "nvidia.com/gpu"
    return sorted(res)[0]


def pod_manifest(run_id: str, node: str, resource: str, settings: Settings) -> dict[str, Any]:
    suffix = hashlib.sha1(node.encode()).hexdigest()[:8]
    gpus = str(settings.probe_gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"gpu-probe-{suffix}",
            "labels": {RUN_LABEL: run_id, MANAGED_BY[0]: MANAGED_BY[1], "gpu-conformance.nvidia.com/node": suffix},
            "annotations": {"gpu-conformance.nvidia.com/target-node": node},
        },
        "spec": {
            # No runtimeClassName on purpose: under CDI an ordinary workload must get its GPU without one.
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            # Pinned through the scheduler (not spec.nodeName) so NodeResourcesFit judges it as any workload.
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "containers": [{
                "name": CONTAINER,
                "image": settings.probe_image,
                "command": ["sh", "-c", PROBE_SCRIPT],
                "resources": {"limits": {resource: gpus}, "requests": {resource: gpus}},
            }],
        },
    }


def cdi_expected(snap: ClusterSnapshot, settings: Settings) -> bool:
    if settings.expect_cdi in ("yes", "no"):
        return settings.expect_cdi == "yes"
    enabled = snap.policy_spec("cdi", "enabled")
    if enabled is not None:
        return bool(enabled)
    from gpu_conformance.checks.common import operator_version

    return parse_version(operator_version(snap) or "v99") >= (25, 10, 0)


def poll_until(condition: Callable[[], bool], timeout: float, interval: float) -> bool:
    """Call condition until it is true or the time is up; returns its last answer."""
    retrying = Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(interval),
                        retry=retry_if_result(lambda ok: not ok),
                        retry_error_callback=lambda state: state.outcome.result() if state.outcome else False)
    return bool(retrying(condition))


class Probe:
    def __init__(self, conn: Connection, settings: Settings, snap: ClusterSnapshot) -> None:
        self.reader = ClusterReader(conn)
        self.settings = settings
        self.snap = snap
        self.ns = probe_namespace(settings.run_id)

    def run(self, nodes: list[str]) -> ProbeRun:
        result = ProbeRun(namespace=self.ns)
        if not nodes:
            result.skipped = "no GPU node is free of earlier-layer failures; nothing to probe"
            return result
        targets = nodes[:MAX_PROBE_NODES]
        for n in nodes[MAX_PROBE_NODES:]:
            result.findings.append(Finding(Status.NA, f"not probed (only the first {MAX_PROBE_NODES} "
                                                                 "healthy GPU nodes are)", node=n, check_id="PRB-001"))
        try:
            self._create_namespace()
            manifests = {}
            for n in targets:
                node = self.snap.node_by_name[n]
                m = pod_manifest(self.settings.run_id, n, gpu_resource_for(node), self.settings)
                manifests[name_of(m)] = (n, m)
                self.reader.call("POST", f"/api/v1/namespaces/{self.ns}/pods", body=m,
                                 what=f"create pods in namespace {self.ns}")
            pods, events = self._wait(set(manifests))
            for pod_name, (n, m) in manifests.items():
                pod = pods.get(pod_name, {})
                evs = [f"{e.get('reason')}: {e.get('message')}" for e in events
                       if e.get("involvedObject", {}).get("name") == pod_name]
                logs = self._logs(pod_name) if pod.get("status", {}).get("phase") in ("Succeeded", "Failed",
                                                                                        "Running") else ""
                parsed = parse_probe_output(logs)
                result.pods.append({"name": pod_name, "node": n, "phase": pod.get("status", {}).get("phase", "?"),
                                    "image": self.settings.probe_image,
                                    "resource": next(iter(m["spec"]["containers"][0]["resources"]["limits"])),
                                    "events": evs, "logs": logs, "output": logs,
                                    "gpus_seen": parsed.gpus, "visible_devices": parsed.visible_devices,
                                    "cdi": parsed.injected_by_cdi})
                result.findings.extend(self.judge(n, pod, evs, parsed))
        finally:
            result.deleted = self._delete_namespace()
        return result

    # ---- judging (pure given the observations) --------------------------------------------
    def judge(self, node: str, pod: dict, events: list[str], out: ProbeOutput) -> list[Finding]:
        phase = pod.get("status", {}).get("phase", "")
        want = self.settings.probe_gpus
        pod_name = name_of(pod) or "<probe pod>"
        kubectl = f"kubectl -n {self.ns} describe pod {pod_name}"
        f: list[Finding] = []
        if not pod.get("spec", {}).get("nodeName"):
            reason = next((e for e in events if e.startswith("FailedScheduling")), "")
            f.append(Finding(Status.FAIL, self._unschedulable_message(node, reason or "not scheduled"),
                             node=node, evidence={"pod": pod_name, "phase": phase or "Pending", "events": events},
                             kubectl=kubectl, check_id="PRB-001"))
            return f
        f.append(Finding(Status.PASS, f"scheduled on {node}", node=node, evidence={"pod": pod_name},
                         check_id="PRB-001"))
        waiting = [cs.get("state", {}).get("waiting", {}) for cs in pod.get("status", {}).get("containerStatuses")
                   or []]
        pull = next((w for w in waiting if w.get("reason") in PULL_FAILURES), None)
        if pull:
            f.append(Finding(Status.FAIL,
                             f"probe image {self.settings.probe_image} cannot be pulled ({pull.get('reason')}): "
                             f"{pull.get('message', '')}".rstrip(": "),
                             node=node, evidence={"pod": pod_name, "waiting": pull, "events": events}, kubectl=kubectl,
                             check_id="PRB-002"))
            return f
        create = next((w for w in waiting if w.get("reason") in CREATE_FAILURES), None)
        if create:
            message = create.get("message", "")
            hint = f" — {CDI_HINT}" if "CDI" in message else ""
            f.append(Finding(Status.FAIL,
                             f"probe container could not be created ({create.get('reason')}): {message}{hint}",
                             node=node, evidence={"pod": pod_name, "waiting": create, "events": events},
                             kubectl=kubectl, check_id="PRB-002"))
            return f
        status = pod.get("status", {})
        ran = any(cs.get("state", {}).get("terminated") or cs.get("state", {}).get("running")
                  for cs in status.get("containerStatuses") or [])
        if phase == "Failed" and status.get("reason") and not ran:
            # The kubelet refused the pod at admission (e.g. UnexpectedAdmissionError when the device plugin
            # cannot hand out the GPU the scheduler counted as free): no container ever ran.
            f.append(Finding(Status.FAIL,
                             f"the kubelet on {node} rejected the probe pod ({status.get('reason')}): "
                             f"{status.get('message', '')}".rstrip(": "), node=node,
                             evidence={"pod": pod_name, "status": status, "events": events},
                             kubectl=kubectl, check_id="PRB-002"))
            return f
        deleted = pod.get(VANISHED) or pod.get("metadata", {}).get("deletionTimestamp")
        if deleted and phase not in ("Succeeded", "Failed"):
            f.append(Finding(Status.FAIL,
                             f"probe pod {pod_name} was deleted before it finished (phase {phase or '?'}): "
                             f"namespace {self.ns} was deleted while the probe ran", node=node,
                             evidence={"pod": pod_name, "status": pod.get("status", {}), "events": events},
                             kubectl=f"kubectl get namespace {self.ns}", check_id="PRB-002"))
            return f
        if phase not in ("Succeeded", "Failed"):
            f.append(Finding(Status.FAIL,
                             f"probe did not finish within --probe-timeout {self.settings.probe_timeout:g}s "
                             f"(phase {phase or '?'})", node=node,
                             evidence={"pod": pod_name, "status": pod.get("status", {}), "events": events},
                             kubectl=kubectl, check_id="PRB-002"))
            return f
        f.append(Finding(Status.PASS, f"probe container ran ({phase})", node=node, check_id="PRB-002"))
        logs_cmd = f"kubectl -n {self.ns} logs {pod_name}"
        ev = {"pod": pod_name, "phase": phase, "gpus_seen": out.gpus, "nvidia_smi_rc": out.smi_rc,
              "requested": want}
        if out.smi_rc != 0 or out.gpu_count == 0:
            why = out.smi_error or (f"exit code {out.smi_rc}" if out.smi_rc is not None else "no output")
            f.append(Finding(Status.FAIL,
                             f"nvidia-smi -L in a pod with {want} GPU requested failed: {why}",
                             node=node, evidence=ev, kubectl=logs_cmd, check_id="PRB-003"))
        elif out.gpu_count < want:
            f.append(Finding(Status.FAIL,
                             f"the pod sees {out.gpu_count} GPU(s) but requested {want}", node=node, evidence=ev,
                             kubectl=logs_cmd, check_id="PRB-003"))
        else:
            f.append(Finding(Status.PASS, f"nvidia-smi lists {out.gpu_count} GPU(s): "
                             + "; ".join(out.gpus[:4]), node=node, evidence=ev, check_id="PRB-003"))
        cdi = cdi_expected(self.snap, self.settings)
        ev4 = {"NVIDIA_VISIBLE_DEVICES": out.visible_devices, "devices": out.devices, "cdi_expected": cdi}
        if out.gpu_count == 0:
            f.append(Finding(Status.FAIL, "no GPU was injected into the probe container "
                             "(no runtimeClassName was set, as for any ordinary workload)",
                             node=node, evidence=ev4, kubectl=logs_cmd, check_id="PRB-004"))
        elif cdi and not out.injected_by_cdi:
            f.append(Finding(Status.FAIL,
                             f"CDI expected but NVIDIA_VISIBLE_DEVICES={out.visible_devices!s} (CDI injection "
                             "leaves 'void') — the GPU came by the legacy env-var path", node=node,
                             evidence=ev4, kubectl=logs_cmd, check_id="PRB-004"))
        elif not out.has_device_nodes:
            f.append(Finding(Status.FAIL, "no /dev/nvidiaN device node in the container", node=node,
                             evidence=ev4, kubectl=logs_cmd, check_id="PRB-004"))
        else:
            how = "CDI (NVIDIA_VISIBLE_DEVICES=void, /dev/nvidia* present)" if out.injected_by_cdi else \
                f"the nvidia runtime (NVIDIA_VISIBLE_DEVICES={out.visible_devices})"
            f.append(Finding(Status.PASS, f"GPU injected by {how} without runtimeClassName",
                             node=node, evidence=ev4, check_id="PRB-004"))
        return f

    def _unschedulable_message(self, node: str, event: str) -> str:
        n = self.snap.node_by_name.get(node, {})
        res = gpu_resource_for(n)
        alloc = (n.get("status", {}).get("allocatable") or {}).get(res)
        if f"Insufficient {res}" in event:
            if not alloc or alloc == "0":
                cause = f"{node} advertises no allocatable {res} (device plugin / unhealthy devices)"
            else:
                cause = f"all {alloc} {res} on {node} are allocated to other pods"
            return f"probe Pending: {event.removeprefix('FailedScheduling: ')} — {cause}"
        if "taint" in event:
            return f"probe Pending: {event.removeprefix('FailedScheduling: ')} — the GPU node carries a taint " \
                   "ordinary GPU workloads do not tolerate"
        return f"probe Pending on {node}: {event.removeprefix('FailedScheduling: ')}"

    # ---- API -----------------------------------------------------------------------------
    def _create_namespace(self) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.ns,
                             "labels": {RUN_LABEL: self.settings.run_id, MANAGED_BY[0]: MANAGED_BY[1]}}}
        self.reader.call("POST", "/api/v1/namespaces", body=body, what="create namespaces")
        # Pods are rejected until the namespace's default ServiceAccount exists (a short race after creation).
        def sa_ready() -> bool:
            return any(name_of(s) == "default"
                       for s in self.reader.list_raw_path(f"/api/v1/namespaces/{self.ns}/serviceaccounts"))

        # If it never appears, pod creation will say what is wrong.
        poll_until(sa_ready, timeout=20, interval=0.3)

    def _wait(self, names: set[str]) -> tuple[dict[str, dict], list[dict]]:
        deadline = time.monotonic() + self.settings.probe_timeout
        unschedulable_since: dict[str, float] = {}
        pods: dict[str, dict] = {}
        seen: dict[str, dict] = {}
        vanished: set[str] = set()
        events: list[dict] = []

        def done() -> bool:
            nonlocal pods, events
            pods = {name_of(p): p for p in self.reader.list_raw_path(f"/api/v1/namespaces/{self.ns}/pods")}
            events = self.reader.list_raw_path(f"/api/v1/namespaces/{self.ns}/events") or events
            now = time.monotonic()
            finished = 0
            for n in names:
                if n not in pods and n in seen:
                    vanished.add(n)
                    pods[n] = {**seen[n], VANISHED: True}  # judge the last state seen
                p = pods.get(n, {})
                if p:
                    seen[n] = p
                if n in vanished or p.get("metadata", {}).get("deletionTimestamp"):
                    finished += 1
                    continue
                st = p.get("status", {})
                if st.get("phase") in ("Succeeded", "Failed"):
                    finished += 1
                    continue
                waiting = [cs.get("state", {}).get("waiting", {}).get("reason")
                           for cs in st.get("containerStatuses") or []]
                if any(w in PULL_FAILURES + CREATE_FAILURES for w in waiting):
                    finished += 1
                    continue
                unsched = any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                              for c in st.get("conditions") or [])
                if unsched:
                    first = unschedulable_since.setdefault(n, now)
                    if now - first >= UNSCHEDULABLE_GRACE:
                        finished += 1
            return finished == len(names)

        # On timeout judge() reports the pods that did not finish.
        poll_until(done, timeout=max(0.0, deadline - time.monotonic()), interval=1.0)
        return pods, events

    def _logs(self, pod: str) -> str:
        try:
            data = raw_request(self.reader.conn.api, "GET", f"/api/v1/namespaces/{self.ns}/pods/{pod}/log",
                               [("container", CONTAINER)], timeout=(5, 30))
            return data.decode("utf-8", "replace")
        except Exception as e:  # noqa: BLE001 — logs are evidence; their absence is reported, not raised
            return f"<logs unavailable: {getattr(e, 'reason', e)}>"

    def _delete_namespace(self) -> bool:
        try:
            self.reader.call("DELETE", f"/api/v1/namespaces/{self.ns}", body={"propagationPolicy": "Background"},
                             what=f"delete namespace {self.ns}")
            return True
        except ConformanceError as e:
            return "404" in str(e)  # already gone counts as deleted
