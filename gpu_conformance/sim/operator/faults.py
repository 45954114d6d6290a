"""Named faults: each breaks a running simulated GPU cluster the way real clusters break.

A fault changes objects through the API as the broken component would leave them (kubelet's pod
statuses, the operator's labels, the device plugin's node resources, the runtime's probe output);
it never touches the suite's expectations. Each fault declares what the suite must report: the root
cause layer, the checks that must fail (exactly those), and the affected nodes. The matrix test in
tests/test_fault_matrix.py holds the suite to that.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpu_conformance import dra_chart
from gpu_conformance import operands as op
from gpu_conformance.cluster.snapshot import advertised_gpu_resources
from gpu_conformance.errors import UsageError
from gpu_conformance.model import Layer
from gpu_conformance.sim.operator import dra, pod_states
from gpu_conformance.sim.operator import operand_loop as hosts
from gpu_conformance.sim.operator.install import (
    CLUSTERPOLICY_NAME,
    NFD_PCI_LABEL,
    cuda_validator_pod,
)
from gpu_conformance.sim.operator.kubelet_events import NO_NVIDIA_RUNTIME
from gpu_conformance.sim.operator.reconcile import SimInstall, daemonset_rolled_out
from gpu_conformance.sim.services.kube_client import Kube
from gpu_conformance.verdict import CONFORMANT, INCOMPLETE, NOT_CONFORMANT

Obj = dict[str, Any]
NODE = "gpu-node-1"  # the node a single-node fault breaks; gpu-node-0 and gpu-node-2 must stay green
CLUSTER = "cluster"
# No node is affected: the cluster works, and the operator's own status says something a person should know.
NONE = "none"
ALL = "all"
PROBE_LOG = "gpu-probe"
# Why a fault is simulated-only (the README's fault table says so).
HEALED = "the real operator repairs what it owns within seconds (healed, no fault left to find)"
# Why a fault cannot share a cluster (the README's fault table says so); measured with sim/restore.undo.
CASCADE = "garbage collection of what it deleted goes on after any write-back (new owner uids)"
ROLLOUT = ("a new DaemonSet template: changing it back is another revision (pods created later carry a later "
           "template generation and were measured to differ), not the installed state")
NOT_CHART_DEFAULT = "profile host-driver (driver.enabled=false) is not the chart's default the real operator runs"


@dataclass
class FaultContext:
    sim: SimInstall
    log_writer: Callable[[str, str], None] | None

    @property
    def kube(self) -> Kube:
        return self.sim.api

    @property
    def ns(self) -> str:
        return self.sim.namespace

    def pods(self, app: str, node: str | None = None) -> list[Obj]:
        pods = self.kube.list("Pod", self.ns, label_selector=f"app={app}")
        return [p for p in pods if node is None or p.get("spec", {}).get("nodeName") == node]

    def pod(self, app: str, node: str) -> Obj:
        pods = self.pods(app, node)
        if not pods:
            raise RuntimeError(f"fault: no {app} pod on {node}")
        return pods[0]

    def set_status(self, pod: Obj, status: Obj) -> None:
        ns = pod["metadata"].get("namespace") or self.ns
        self.kube.patch("Pod", pod["metadata"]["name"], {"status": status}, ns, status=True)

    def log(self, container: str, text: str) -> None:
        if self.log_writer is not None:
            self.log_writer(container, text if text.endswith("\n") else text + "\n")

    def node_patch(self, node: str, patch: Obj, status: bool = False) -> None:
        self.kube.patch("Node", node, patch, status=status)

    def drop_gpu_resources(self, node: str, allocatable_only: bool = False, value: str | None = None) -> None:
        n = self.kube.get("Node", node)
        keys = [k for k in (n.get("status", {}).get("capacity") or {})
                if k.startswith("nvidia.com/gpu") or k.startswith("nvidia.com/mig-")]
        alloc = dict.fromkeys(keys, value)
        st: Obj = {"allocatable": alloc}
        if not allocatable_only:
            st["capacity"] = dict.fromkeys(keys, value)
        self.node_patch(node, {"status": st}, status=True)

    def wait(self, cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.2)
        raise RuntimeError(f"fault did not take effect: {what}")

    def wait_no_pods(self, app: str, node: str) -> None:
        self.wait(lambda: not self.pods(app, node), f"{app} pod gone from {node}")

    def host_fault(self, node: str, fault: str) -> None:
        """What is broken on the machine itself: the operand loop plays the node accordingly (held stages)."""
        hosts.set_host_fault(self.kube, node, fault)


@dataclass(frozen=True)
class Fault:
    name: str
    description: str            # the real-world situation it reproduces
    injection: str              # what it changes, in one line
    apply: Callable[[FaultContext], None]
    layer: Layer | None         # root-cause layer of the affected nodes (None: nothing may fail)
    checks: frozenset[str]      # exactly the checks whose outcome must be FAIL
    nodes: str                  # NODE, ALL, or CLUSTER (a cluster-wide root cause)
    profile: str = "default"
    settings: dict[str, Any] = field(default_factory=dict)  # run options the situation implies
    verdict: str = NOT_CONFORMANT
    warns: frozenset[str] = frozenset()  # checks that must report WARN (e.g. an opt-out)
    # States the operator must report not ready with this fault (its ClusterPolicy status; subset).
    states_not_ready: frozenset[str] = frozenset()
    # Why the fault cannot run against the real v25.3.4 operator (empty: it runs in the differential test).
    simulated_only: str = ""
    # The affected nodes' root cause: this check, and its message says this (the issue's "named as such").
    root_cause_check: str = ""
    root_cause_says: str = ""
    # Why the fault needs a simulated cluster of its own (empty: the matrix applies it to the profile's reused
    # cluster and undoes it with sim/controlplane/restore.py, whose check against the installed state reboots on any
    # miss).
    fresh: str = ""

    def affected(self, gpu_nodes: list[str]) -> list[str]:
        if self.nodes == NODE:
            return [NODE]
        if self.nodes == NONE:
            return []
        return list(gpu_nodes)


FAULTS: dict[str, Fault] = {}


def fault(name: str, description: str, injection: str, layer: Layer | None, checks: set[str], nodes: str,
          **kw: Any) -> Callable[[Callable[[FaultContext], None]], Callable[[FaultContext], None]]:
    def wrap(fn: Callable[[FaultContext], None]) -> Callable[[FaultContext], None]:
        FAULTS[name] = Fault(name, description, injection, fn, layer, frozenset(checks), nodes, **kw)
        return fn
    return wrap


class FaultCombinationError(UsageError):
    """Faults that cannot be applied together on one simulated cluster: one line, exit 4."""


class FaultNodeMissingError(UsageError):
    """A fault names a node the simulated cluster was not booted with: one line, exit 4."""


def apply_all(sim: SimInstall, names: list[str], cluster: Any = None) -> list[Fault]:
    """Apply faults in order; when a fault cannot be applied on top of the earlier ones, refuse in one line."""
    applied: list[Fault] = []
    for name in names:
        try:
            applied.append(apply(sim, name, cluster))
        except Exception as e:  # noqa: BLE001 — any failure of a fault on top of another is this one error
            if not applied:
                raise
            raise FaultCombinationError(
                f"sim fault {name!r} cannot be combined with {', '.join(repr(f.name) for f in applied)}: "
                f"{type(e).__name__}: {e}") from None
    return applied


def apply(sim: SimInstall, name: str, cluster: Any = None) -> Fault:
    """Inject a fault into a running simulated cluster (gpu-conformance sim up --fault, the matrix)."""
    f = FAULTS[name]
    gpu_nodes = getattr(sim, "gpu_nodes", None)
    if f.nodes == NODE and gpu_nodes is not None and NODE not in gpu_nodes:
        # A one-node fault breaks gpu-node-1 (gpu-node-0 stays the healthy witness): with fewer GPU nodes there is
        # nothing to break, which is the user's choice of options, not a bug of the simulator.
        raise FaultNodeMissingError(f"sim fault {name!r} breaks {NODE}, which this simulated cluster does not have "
                                    f"(GPU nodes: {', '.join(gpu_nodes) or 'none'}): use --sim-gpu-nodes=2 or more")
    writer = getattr(cluster, "write_container_log", None) or sim.log_writer
    f.apply(FaultContext(sim, writer))
    return f


# ---- the chain of the validator, broken at one stage on one node --------------------------
GATED = (op.DEVICE_PLUGIN, op.GFD, op.DCGM_EXPORTER, op.DCGM, op.MIG_MANAGER)


def _gated_pods_wait_for_toolkit(ctx: FaultContext, node: str) -> None:
    """Without toolkit-ready every operand gated on it sits in Init:0/1 (the field note's picture)."""
    for o in GATED:
        for p in ctx.pods(o.daemonset, node):
            if any(c["name"] == "toolkit-validation" for c in p["spec"].get("initContainers") or []):
                ctx.set_status(p, pod_states.stuck_in_init(p, "toolkit-validation", crash=False))
    ctx.drop_gpu_resources(node)  # the device plugin never registered with kubelet


def _validator_stuck(ctx: FaultContext, node: str, stage: str, crash: bool, restarts: int) -> None:
    v = ctx.pod(op.VALIDATOR.daemonset, node)
    ctx.set_status(v, pod_states.stuck_in_init(v, stage, crash=crash, restarts=restarts))


def _waiting_for_driver(ctx: FaultContext, node: str, log: str | None = None) -> None:
    """The driver never became ready on `node`: the toolkit and the validator wait in driver-validation (the
    validator logging `log`), every gated operand waits for the toolkit, and no cuda validator runs."""
    t = ctx.pod(op.TOOLKIT.daemonset, node)
    ctx.set_status(t, pod_states.stuck_in_init(t, "driver-validation", crash=False))
    _validator_stuck(ctx, node, "driver-validation", crash=False, restarts=0)
    ctx.log("driver-validation", (log or DRIVER_FAIL_LOG).format(t=_t()))
    _gated_pods_wait_for_toolkit(ctx, node)
    _no_cuda_validator(ctx, node)


def _driver_not_up(ctx: FaultContext, node: str) -> None:
    """What a containerd node shows when its driver does not come up after the node (re)started: the toolkit
    (no runtime class) waits in driver-validation; it removed the nvidia handler when it last exited and writes it
    again only once Ready, so every runtimeClassName nvidia operand (validator, device plugin, GFD, DCGM exporter,
    MIG manager) is Pending without a sandbox, with FailedCreatePodSandBox events. No validation stage ever runs
    there. Operands without a runtime class (NRI) wait at their first gate as before."""
    ctx.host_fault(node, hosts.HANDLER_REMOVED)
    t = ctx.pod(op.TOOLKIT.daemonset, node)
    ctx.set_status(t, pod_states.stuck_in_init(t, "driver-validation", crash=False))
    ctx.log("driver-validation", DRIVER_FAIL_LOG.format(t=_t()))
    _no_cuda_validator(ctx, node)
    for o in (op.VALIDATOR, *GATED):
        pods = ctx.pods(o.daemonset, node)
        if not pods:
            continue
        if pods[0]["spec"].get("runtimeClassName") != "nvidia":
            if o is op.VALIDATOR:
                _validator_stuck(ctx, node, "driver-validation", crash=False, restarts=0)
            elif any(c["name"] == "toolkit-validation" for c in pods[0]["spec"].get("initContainers") or []):
                ctx.set_status(pods[0], pod_states.stuck_in_init(pods[0], "toolkit-validation", crash=False))
            continue
        pod = _recreate(ctx, o.daemonset, node)
        ctx.set_status(pod, pod_states.no_sandbox(pod))
        _event(ctx, pod, "FailedCreatePodSandBox", NO_NVIDIA_RUNTIME, count=14)
    ctx.drop_gpu_resources(node)  # the device plugin never started


def _no_cuda_validator(ctx: FaultContext, node: str) -> None:
    # The validator never reached cuda-validation, so it never created its workload pod on this node.
    for p in ctx.pods(op.CUDA_VALIDATOR_APP, node):
        ctx.kube.request("DELETE", ctx.kube.path("Pod", p["metadata"]["name"], ctx.ns),
                         body={"gracePeriodSeconds": 0})
    ctx.wait(lambda: not ctx.pods(op.CUDA_VALIDATOR_APP, node), "cuda validator gone")


DRIVER_FAIL_LOG = ('time="{t}" level=info msg="Attempting to validate a driver container installation"\n'
                   'time="{t}" level=info msg="driver container is not ready: waiting for '
                   '/run/nvidia/validations/.driver-ctr-ready"\n')
HOST_DRIVER_FAIL_LOG = ('time="{t}" level=info msg="Attempting to validate a pre-installed driver on the host"\n'
                        'running command chroot with args [/host nvidia-smi]\n'
                        'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver. Make sure '
                        'that the latest NVIDIA driver is installed and running.\n'
                        'time="{t}" level=info msg="command failed, retrying after 5 seconds"\n')
TOOLKIT_FAIL_LOG = ('time="{t}" level=info msg="version: {v}"\nrunning command nvidia-smi with args []\n'
                    'sh: 1: nvidia-smi: not found\n'
                    'time="{t}" level=info msg="command failed, retrying after 5 seconds"\n'
                    'time="{t}" level=fatal msg="error validating toolkit installation: exit status 127"\n')


def _t() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- operator ------------------------------------------------------------------------------
@fault("operator-scaled-to-zero", "someone scaled the gpu-operator Deployment to 0: nothing reconciles any more",
       "Deployment gpu-operator spec.replicas=0 (kube-controller-manager removes the pod)",
       Layer.OPERATOR, {"OPR-004"}, CLUSTER)
def _operator_scaled_to_zero(ctx: FaultContext) -> None:
    ctx.kube.patch("Deployment", op.OPERATOR_DEPLOYMENT, {"spec": {"replicas": 0}}, ctx.ns)
    ctx.wait(lambda: not ctx.pods("gpu-operator"), "operator pod deleted")


@fault("operator-crashloop", "the operator pod crash-loops (e.g. a bad operator image or RBAC change)",
       "operator pod status: container gpu-operator CrashLoopBackOff, 12 restarts",
       Layer.OPERATOR, {"OPR-004"}, CLUSTER)
def _operator_crashloop(ctx: FaultContext) -> None:
    p = ctx.pods("gpu-operator")[0]
    ctx.set_status(p, pod_states.crash_looping(p, "gpu-operator", restarts=12))
    ctx.wait(lambda: (ctx.kube.get("Deployment", op.OPERATOR_DEPLOYMENT, ctx.ns).get("status", {})
                      .get("availableReplicas") or 0) == 0, "Deployment unavailable")


@fault("clusterpolicy-operand-not-ready", "the operator reports state-driver not ready although every driver pod "
       "runs: the driver DaemonSet changed (kernelModuleType switched to open) with auto-upgrade off, so its pods "
       "(OnDelete) stay on the old revision until someone deletes them. GPUs still reach pods: a warning naming "
       "the pending driver change, not a failure",
       "ClusterPolicy driver.kernelModuleType=open, driver.upgradePolicy.autoUpgrade=false; driver DaemonSet "
       "template gets KERNEL_MODULE_TYPE=open (new revision, pods untouched); the operator then writes notReady, "
       "OperandNotReady [state-driver]",
       None, set(), NONE, verdict=CONFORMANT, warns=frozenset({"OPR-003"}),
       states_not_ready=frozenset({"state-driver"}), fresh=ROLLOUT)
def _operand_not_ready(ctx: FaultContext) -> None:
    ctx.kube.patch("ClusterPolicy", CLUSTERPOLICY_NAME, {"spec": {"driver": {
        "kernelModuleType": "open", "upgradePolicy": {"autoUpgrade": False}}}})
    # What the operator does with that spec (the real one does it too, concurrently: retry on a conflict).
    for attempt in range(10):
        ds = ctx.kube.get("DaemonSet", op.DRIVER.daemonset, ctx.ns)
        for c in ds["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "nvidia-driver-ctr":
                c["env"] = [e for e in c.get("env") or [] if e["name"] != "KERNEL_MODULE_TYPE"] + [
                    {"name": "KERNEL_MODULE_TYPE", "value": "open"}]
        try:
            ctx.kube.request("PUT", ctx.kube.path("DaemonSet", op.DRIVER.daemonset, ctx.ns), body=ds)
            break
        except ApiException as e:
            if e.status != 409 or attempt == 9:
                raise
            time.sleep(0.2)
    ctx.wait(lambda: len([r for r in ctx.kube.list("ControllerRevision", ctx.ns)
                          if r["metadata"]["name"].startswith(op.DRIVER.daemonset)]) >= 2, "new driver revision")


@fault("no-gpu-nodes", "NFD never labelled anything: the operator reports ready but NoGPUNodes. NFD is the root "
       "cause; the operator's NoGPUNodes (OPR-003) is its consequence, reported as explained by NFD-001",
       "remove NFD PCI, gpu.present, deploy and GFD labels and GPU resources from every node; ClusterPolicy "
       "Ready reason NoGPUNodes",
       Layer.NFD, {"NFD-001"}, CLUSTER)
def _no_gpu_nodes(ctx: FaultContext) -> None:
    for n in ctx.sim.gpu_nodes:
        labels = ctx.kube.get("Node", n)["metadata"].get("labels") or {}
        drop = {k: None for k in labels if k.startswith("nvidia.com/") or k == NFD_PCI_LABEL}
        ctx.node_patch(n, {"metadata": {"labels": drop}})
        ctx.drop_gpu_resources(n)
    # The operator then reports ready/NoGPUNodes (its status loop sees no node with an NFD PCI label).
    ctx.wait(lambda: not ctx.pods(op.DEVICE_PLUGIN.daemonset), "operand pods withdrawn")


@fault("toolkit-daemonset-deleted", "the toolkit DaemonSet was deleted while the ClusterPolicy enables it",
       "delete DaemonSet nvidia-container-toolkit-daemonset (its pods go with it)",
       Layer.OPERATOR, {"OPR-006"}, CLUSTER,
       simulated_only=HEALED)
def _toolkit_ds_deleted(ctx: FaultContext) -> None:
    ctx.kube.request("DELETE", ctx.kube.path("DaemonSet", op.TOOLKIT.daemonset, ctx.ns),
                     body={"propagationPolicy": "Foreground"})
    ctx.wait(lambda: not any(d["metadata"]["name"] == op.TOOLKIT.daemonset
                             for d in ctx.kube.list("DaemonSet", ctx.ns)), "toolkit DaemonSet gone")


@fault("dcgm-exporter-crashloop", "DCGM exporter crash-loops on one node (a known issue on some GPUs/drivers); "
       "GPUs still work, monitoring does not",
       "nvidia-dcgm-exporter pod status on gpu-node-1: CrashLoopBackOff, 9 restarts",
       Layer.OPERATOR, {"OPR-007"}, NODE)
def _dcgm_exporter_crashloop(ctx: FaultContext) -> None:
    p = ctx.pod(op.DCGM_EXPORTER.daemonset, NODE)
    ctx.set_status(p, pod_states.crash_looping(p, "nvidia-dcgm-exporter", restarts=9))


# ---- nfd -------------------------------------------------------------------------------------
@fault("gpu-pool-gone", "the nightly job judges a GPU pool by label, and no node carries that label any more "
       "(pool renamed or scaled to zero)",
       "run with --gpu-node-selector=nvidia.com/gpu.product=NVIDIA-B200 on a cluster without B200 nodes",
       Layer.NFD, {"NFD-001"}, CLUSTER, settings={"gpu_node_selector": "nvidia.com/gpu.product=NVIDIA-B200"})
def _gpu_pool_gone(ctx: FaultContext) -> None:
    return None  # the cluster is healthy; the selected pool is empty



@fault("nfd-worker-missing", "NFD worker broken on one node: nfd-gc removes its PCI label, the operator sets "
       "gpu.present=false and withdraws every operand from the node",
       "nfd-worker pod on gpu-node-1 CrashLoopBackOff; node loses pci-10de, deploy and GFD labels, "
       "gpu.present=false, GPU resources gone",
       Layer.NFD, {"NFD-002", "NFD-003"}, NODE)
def _nfd_worker_missing(ctx: FaultContext) -> None:
    w = next(p for p in ctx.kube.list("Pod", ctx.ns, label_selector="role=worker")
             if p["spec"].get("nodeName") == NODE)
    ctx.set_status(w, pod_states.crash_looping(w, w["spec"]["containers"][0]["name"], restarts=6))
    labels = ctx.kube.get("Node", NODE)["metadata"].get("labels") or {}
    drop: dict[str, str | None] = {k: None for k in labels if k.startswith("nvidia.com/") or k == NFD_PCI_LABEL}
    drop["nvidia.com/gpu.present"] = "false"
    ctx.node_patch(NODE, {"metadata": {"labels": drop}})
    ctx.drop_gpu_resources(NODE)
    ctx.wait_no_pods(op.DEVICE_PLUGIN.daemonset, NODE)


# ---- deploy labels ----------------------------------------------------------------------------
@fault("device-plugin-opted-out", "an admin set nvidia.com/gpu.deploy.device-plugin=false on one node while the "
       "ClusterPolicy enables the device plugin: the node can no longer give pods a GPU",
       "label gpu-node-1 nvidia.com/gpu.deploy.device-plugin=false (DaemonSet controller removes the pod; "
       "kubelet marks the GPUs unhealthy: allocatable 0)",
       Layer.DEVICE_PLUGIN, {"DPL-002", "DPL-003"}, NODE, warns=frozenset({"LBL-001"}))
def _dp_opted_out(ctx: FaultContext) -> None:
    ctx.node_patch(NODE, {"metadata": {"labels": {op.DEVICE_PLUGIN.deploy_label: "false"}}})
    ctx.wait_no_pods(op.DEVICE_PLUGIN.daemonset, NODE)
    ctx.drop_gpu_resources(NODE, allocatable_only=True, value="0")


@fault("deploy-labels-missing", "the operator stopped labelling one node (its deploy labels are gone)",
       "remove every nvidia.com/gpu.deploy.* label from gpu-node-1 (operand pods are withdrawn)",
       Layer.DEPLOY_LABELS, {"LBL-001"}, NODE,
       simulated_only=HEALED)
def _deploy_labels_missing(ctx: FaultContext) -> None:
    labels = ctx.kube.get("Node", NODE)["metadata"].get("labels") or {}
    ctx.node_patch(NODE, {"metadata": {"labels": {k: None for k in labels if k.startswith(op.DEPLOY_PREFIX)}}})
    ctx.wait_no_pods(op.DEVICE_PLUGIN.daemonset, NODE)
    ctx.drop_gpu_resources(NODE)


@fault("operand-pod-not-scheduled", "a taint added to one node keeps the GFD DaemonSet from (re)creating its pod "
       "there although the node is labelled for it",
       "taint gpu-node-1 maintenance.example.com/reboot=true:NoSchedule, delete its GFD pod",
       Layer.DEPLOY_LABELS, {"LBL-002"}, NODE)
def _operand_not_scheduled(ctx: FaultContext) -> None:
    node = ctx.kube.get("Node", NODE)
    taints = (node.get("spec", {}).get("taints") or []) + [
        {"key": "maintenance.example.com/reboot", "value": "true", "effect": "NoSchedule"}]
    ctx.node_patch(NODE, {"spec": {"taints": taints}})
    p = ctx.pod(op.GFD.daemonset, NODE)
    ctx.kube.request("DELETE", ctx.kube.path("Pod", p["metadata"]["name"], ctx.ns), body={"gracePeriodSeconds": 0})
    ctx.wait_no_pods(op.GFD.daemonset, NODE)


@fault("driver-upgrade-in-progress", "the driver on one node is being upgraded: k8s-driver-manager paused the "
       "operands (paused-for-driver-upgrade) — transient, not broken",
       "gpu-node-1 operand deploy labels = paused-for-driver-upgrade, upgrade-state pod-restart-required; "
       "operand pods withdrawn, GPUs unadvertised",
       None, set(), NODE, verdict=INCOMPLETE, warns=frozenset({"LBL-001"}))
def _driver_upgrade(ctx: FaultContext) -> None:
    paused = {op.DEPLOY_PREFIX + k: "paused-for-driver-upgrade" for k in (
        "operator-validator", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter",
        "dcgm")}
    paused["nvidia.com/gpu-driver-upgrade-state"] = "pod-restart-required"
    ctx.node_patch(NODE, {"metadata": {"labels": paused}})
    ctx.wait_no_pods(op.DEVICE_PLUGIN.daemonset, NODE)
    ctx.drop_gpu_resources(NODE)


# ---- driver-toolkit ---------------------------------------------------------------------------
@fault("driver-crashloop", "the operator's driver container crash-loops on one node (e.g. no precompiled driver "
       "for a new kernel after a reboot): the toolkit waits for it, so the nvidia runtime handler is not there and "
       "every runtimeClass operand is refused its sandbox — the driver is the root cause, not the runtime",
       "gpu-node-1: nvidia-driver-ctr CrashLoopBackOff; toolkit waiting in driver-validation; validator, device "
       "plugin, GFD, DCGM exporter re-created Pending without a sandbox (FailedCreatePodSandBox 'no runtime for "
       "\"nvidia\" is configured'); no GPU resources; no cuda validator",
       Layer.DRIVER_TOOLKIT, {"DRV-002", "DRV-003"}, NODE,
       states_not_ready=frozenset({"state-driver", "state-operator-validation", "state-device-plugin"}),
       root_cause_check="DRV-002", root_cause_says="CrashLoopBackOff")
def _driver_crashloop(ctx: FaultContext) -> None:
    ctx.host_fault(NODE, hosts.DRIVER_UNLOADABLE)
    d = ctx.pod(op.DRIVER.daemonset, NODE)
    ctx.set_status(d, pod_states.crash_looping(d, "nvidia-driver-ctr", restarts=8))
    _driver_not_up(ctx, NODE)


@fault("host-driver-broken", "host driver mode (driver.enabled=false) with a broken host driver (e.g. kernel "
       "upgraded without rebuilding the module): the validator is stuck in driver-validation",
       "gpu-node-1: validator and toolkit looping in driver-validation (host nvidia-smi fails); gated operands "
       "in Init:0/1; no GPU resources",
       Layer.DRIVER_TOOLKIT, {"DRV-003", "DRV-004"}, NODE, profile="host-driver",
       simulated_only=NOT_CHART_DEFAULT)
def _host_driver_broken(ctx: FaultContext) -> None:
    ctx.host_fault(NODE, hosts.DRIVER_UNLOADABLE)
    _waiting_for_driver(ctx, NODE, HOST_DRIVER_FAIL_LOG)


@fault("toolkit-validation-failing", "the nvidia runtime handler is there but injects nothing: the toolkit's "
       "runtime wrapper finds no nvidia module in /proc/modules and execs plain runc (nvidia-container-toolkit "
       "v1.17.8 tools/container/toolkit/runtime.go); the validator's toolkit-validation crash-loops and the device "
       "plugin, GFD and DCGM exporter sit in Init:0/1. (A containerd config without the nvidia runtime is "
       "runtime-handler-missing: no sandbox at all, as the kind tier shows)",
       "gpu-node-1: validator Init:CrashLoopBackOff in toolkit-validation (nvidia-smi: not found, 14 restarts); "
       "gated operands Init:0/1; no GPU resources; no cuda validator",
       Layer.DRIVER_TOOLKIT, {"DRV-004"}, NODE)
def _toolkit_validation_failing(ctx: FaultContext) -> None:
    ctx.host_fault(NODE, hosts.RUNTIME_CLOBBERED)
    _validator_stuck(ctx, NODE, "toolkit-validation", crash=True, restarts=14)
    ctx.log("toolkit-validation", TOOLKIT_FAIL_LOG.format(t=_t(), v=ctx.sim.profile.operator_version))
    _gated_pods_wait_for_toolkit(ctx, NODE)
    _no_cuda_validator(ctx, NODE)


@fault("cuda-validation-failing", "CUDA workloads fail on one node (vectorAdd cannot run: e.g. a GPU fallen off "
       "the bus or a driver/CUDA mismatch)",
       "gpu-node-1: nvidia-cuda-validator pod Pending, its init cuda-validation in CrashLoopBackOff; validator "
       "waiting in cuda-validation",
       Layer.DRIVER_TOOLKIT, {"DRV-005"}, NODE)
def _cuda_validation_failing(ctx: FaultContext) -> None:
    # What NVIDIA's validator v25.3.4 does (validator/main.go, seen on the kind tier): its cuda-validation creates
    # the workload pod and polls it every 5 s for phase Succeeded (60 tries, then it exits 1 and its next attempt
    # replaces the pod). The pod's restartPolicy is OnFailure, so kubelet restarts the failing vectorAdd init
    # container: the pod stays Pending in Init:CrashLoopBackOff, never Failed. A finished pod's status cannot be
    # rewritten, so the validator's next attempt is the pod that fails: delete the Succeeded one; the operand loop
    # runs the new one's vectorAdd, which fails on this host.
    ctx.host_fault(NODE, hosts.CUDA_FAILING)
    _no_cuda_validator(ctx, NODE)
    c = ctx.kube.create(cuda_validator_pod(ctx.sim.profile, ctx.ns, NODE, ctx.sim.clusterpolicy_uid))
    name = c["metadata"]["name"]

    def restarts() -> int:
        status = ctx.kube.get("Pod", name, ctx.ns).get("status", {})
        return max((cs.get("restartCount", 0) for cs in status.get("initContainerStatuses") or []
                    if cs.get("name") == "cuda-validation"), default=0)

    ctx.wait(lambda: restarts() > 0, "cuda validator's vectorAdd restarting")
    # The sim serves logs per container name, and the validator's stage and the CUDA pod's init container are both
    # cuda-validation: the text is the CUDA pod's (vectorAdd's, which the suite quotes); the validator's own says
    # only `pod <name> is curently in Pending phase` every 5 s.
    ctx.log("cuda-validation", "[Vector addition of 50000 elements]\nFailed to allocate device vector A "
                               "(error code CUDA driver version is insufficient for CUDA runtime version)!\n")
    _validator_stuck(ctx, NODE, "cuda-validation", crash=False, restarts=0)


@fault("expect-operator-driver-on-host", "the admin expects the operator to manage the driver but the cluster "
       "runs a host driver (driver.enabled=false): a configuration drift",
       "run with --expect-driver=operator on the host-driver profile",
       Layer.DRIVER_TOOLKIT, {"DRV-001"}, ALL, profile="host-driver", settings={"expect_driver": "operator"},
       simulated_only=NOT_CHART_DEFAULT)
def _expect_operator_driver(ctx: FaultContext) -> None:
    return None  # the cluster is healthy; the expectation differs


# ---- device-plugin ----------------------------------------------------------------------------
@fault("device-plugin-down", "the device plugin crash-loops on one node: kubelet never gets nvidia.com/gpu, the "
       "validator waits in plugin-validation",
       "gpu-node-1: nvidia-device-plugin CrashLoopBackOff; GPU resources removed; validator running in "
       "plugin-validation",
       Layer.DEVICE_PLUGIN, {"DPL-001", "DPL-002", "DPL-006"}, NODE)
def _device_plugin_down(ctx: FaultContext) -> None:
    p = ctx.pod(op.DEVICE_PLUGIN.daemonset, NODE)
    ctx.set_status(p, pod_states.crash_looping(p, "nvidia-device-plugin", restarts=7))
    ctx.drop_gpu_resources(NODE)
    _validator_stuck(ctx, NODE, "plugin-validation", crash=False, restarts=0)


@fault("unhealthy-devices", "the device plugin reports two GPUs unhealthy (XID errors): allocatable drops "
       "below capacity",
       "gpu-node-1 status.allocatable nvidia.com/gpu = capacity - 2 (capacity unchanged)",
       Layer.DEVICE_PLUGIN, {"DPL-003"}, NODE)
def _unhealthy_devices(ctx: FaultContext) -> None:
    have = int(ctx.kube.get("Node", NODE)["status"]["capacity"]["nvidia.com/gpu"])
    ctx.drop_gpu_resources(NODE, allocatable_only=True, value=str(max(have - 2, 1)))


@fault("capacity-gfd-mismatch", "the node advertises fewer GPUs than GFD counted (a GPU lost after boot)",
       "gpu-node-1 capacity and allocatable nvidia.com/gpu lowered by one; gpu.count label unchanged",
       Layer.DEVICE_PLUGIN, {"DPL-004"}, NODE)
def _capacity_mismatch(ctx: FaultContext) -> None:
    n = ctx.kube.get("Node", NODE)
    have = int(n["status"]["capacity"]["nvidia.com/gpu"])
    ctx.drop_gpu_resources(NODE, value=str(max(have - 1, 1)))


@fault("mig-config-failed", "an admin asked for a MIG layout (all-balanced) and the MIG manager failed to apply "
       "it (a GPU still in use, a reset refused): the node keeps its old layout",
       "gpu-node-1 labels nvidia.com/mig.config=all-balanced, nvidia.com/mig.config.state=failed",
       Layer.DEVICE_PLUGIN, {"DPL-009"}, NODE)
def _mig_config_failed(ctx: FaultContext) -> None:
    ctx.node_patch(NODE, {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced",
                                                  "nvidia.com/mig.config.state": "failed"}}})


@fault("gfd-labels-missing", "GPU Feature Discovery stopped publishing labels on one node",
       "remove nvidia.com/gpu.product, gpu.memory and cuda.driver-version.* labels from gpu-node-1",
       Layer.DEVICE_PLUGIN, {"DPL-005"}, NODE)
def _gfd_labels_missing(ctx: FaultContext) -> None:
    labels = ctx.kube.get("Node", NODE)["metadata"].get("labels") or {}
    drop = {k: None for k in labels if k in ("nvidia.com/gpu.product", "nvidia.com/gpu.memory")
            or k.startswith("nvidia.com/cuda.driver-version.")}
    ctx.node_patch(NODE, {"metadata": {"labels": drop}})


@fault("runtimeclass-nvidia-missing", "RuntimeClass nvidia was deleted: every operand pod that names it can no "
       "longer be (re)created",
       "delete RuntimeClass nvidia",
       Layer.DEVICE_PLUGIN, {"DPL-008"}, CLUSTER,
       simulated_only=HEALED)
def _runtimeclass_missing(ctx: FaultContext) -> None:
    ctx.kube.delete("RuntimeClass", "nvidia")


@fault("cdi-expected-envvar", "CDI is expected (operator v25.10+) but the device plugin runs with "
       "DEVICE_LIST_STRATEGY=envvar: a pod without runtimeClassName gets no GPU",
       "DaemonSet nvidia-device-plugin-daemonset env DEVICE_LIST_STRATEGY=envvar; the probe container sees no GPU",
       Layer.DEVICE_PLUGIN, {"DPL-007"}, CLUSTER, settings={"expect_cdi": "yes"},
       simulated_only="the real operator reverts the device plugin DaemonSet's env (healed); v25.3 has CDI off",
       fresh=ROLLOUT)
def _cdi_envvar(ctx: FaultContext) -> None:
    ds = ctx.kube.get("DaemonSet", op.DEVICE_PLUGIN.daemonset, ctx.ns)
    containers = ds["spec"]["template"]["spec"]["containers"]
    for c in containers:
        if c["name"] == "nvidia-device-plugin":
            env = [e for e in c.get("env") or [] if e["name"] not in ("DEVICE_LIST_STRATEGY",)]
            env.append({"name": "DEVICE_LIST_STRATEGY", "value": "envvar"})
            c["env"] = env
    ctx.kube.request("PUT", ctx.kube.path("DaemonSet", op.DEVICE_PLUGIN.daemonset, ctx.ns), body=ds)
    # The plugin runs fine in envvar mode: the fault is in place once the new pods have rolled out. Their
    # toolkit-validation stage takes operand-loop rounds, and until then the old pods are gone and the node has
    # no allocatable GPUs (a transient the run must not read).
    def rolled_out() -> bool:
        now = ctx.kube.get("DaemonSet", op.DEVICE_PLUGIN.daemonset, ctx.ns)
        return daemonset_rolled_out(now, (now.get("status") or {}).get("desiredNumberScheduled", 0))

    ctx.wait(rolled_out, "device plugin rolled out in envvar mode", 120)
    ctx.log(PROBE_LOG, "== nvidia-smi -L\nsh: 1: nvidia-smi: not found\nrc=127\n== env\n"
                       "NVIDIA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000\n== devices\n== cdi\n== end\n")


# ---- probe -------------------------------------------------------------------------------------
@fault("gpus-all-allocated", "every GPU is already taken by other workloads: busy, not broken, so no node is "
       "probed (each warned 'all GPUs in use') and the run is INCOMPLETE",
       "one pod per GPU node in namespace busy-workloads requesting all of the node's GPUs",
       None, set(), ALL, verdict=INCOMPLETE, warns=frozenset({"PRB-001"}))
def _gpus_all_allocated(ctx: FaultContext) -> None:
    try:
        ctx.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "busy-workloads"}})
    except ApiException as e:
        if e.status != 409:
            raise
    ctx.wait(lambda: bool(ctx.kube.list("ServiceAccount", "busy-workloads")), "default ServiceAccount")
    for n in ctx.sim.gpu_nodes:
        # Every GPU resource the node advertises above 0 (all MIG profiles of a mixed node), as the probe reads
        # them: a node with one free profile is not busy, and a key kubelet keeps at 0 holds nothing.
        held = {r: str(q) for r, q in advertised_gpu_resources(ctx.kube.get("Node", n)).items()}
        if not held:
            continue  # a node another fault left without advertised GPUs has none to allocate
        ctx.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"training-{n}",
                                                                          "namespace": "busy-workloads"},
                         "spec": {"nodeName": n, "tolerations": [{"operator": "Exists"}],
                                  "containers": [{"name": "train", "image": "example.com/train:1",
                                                  "resources": {"limits": held}}]}})


@fault("gpu-nodes-tainted", "GPU nodes carry a taint ordinary GPU workloads do not tolerate "
       "(dedicated=ml:NoSchedule)",
       "taint every GPU node dedicated=ml:NoSchedule (running operand pods stay)",
       Layer.PROBE, {"PRB-001"}, ALL)
def _gpu_nodes_tainted(ctx: FaultContext) -> None:
    for n in ctx.sim.gpu_nodes:
        node = ctx.kube.get("Node", n)
        taints = (node.get("spec", {}).get("taints") or []) + [{"key": "dedicated", "value": "ml",
                                                                  "effect": "NoSchedule"}]
        ctx.node_patch(n, {"spec": {"taints": taints}})


@fault("probe-image-unpullable", "the probe image cannot be pulled (air-gapped cluster without a mirror)",
       "run with --probe-image=registry.invalid/nvidia/cuda:12.6.0-base-ubuntu22.04",
       Layer.PROBE, {"PRB-002"}, ALL, settings={"probe_image": "registry.invalid/nvidia/cuda:12.6.0-base-ubuntu22.04"})
def _probe_image_unpullable(ctx: FaultContext) -> None:
    return None


@fault("probe-nvml-error", "the pod is scheduled and runs, but nvidia-smi fails inside it (NVML cannot talk to "
       "the driver: a stale device or a runtime that injected nothing)",
       "the probe container prints 'Failed to initialize NVML: Unknown Error', rc=255, no /dev/nvidia0",
       Layer.PROBE, {"PRB-003", "PRB-004"}, ALL)
def _probe_nvml_error(ctx: FaultContext) -> None:
    ctx.log(PROBE_LOG, "== nvidia-smi -L\nFailed to initialize NVML: Unknown Error\nrc=255\n== env\n"
                       "NVIDIA_VISIBLE_DEVICES=void\n== devices\n/dev/nvidiactl\n== cdi\n== end\n")


@fault("probe-sees-fewer-gpus", "a pod that requested 2 GPUs sees only 1 (the runtime injected part of the "
       "allocation)",
       "run with 2 GPUs requested; the probe container lists 1 GPU",
       Layer.PROBE, {"PRB-003"}, ALL, settings={"probe_gpus": 2})
def _probe_fewer(ctx: FaultContext) -> None:
    return None  # the default probe output lists one GPU; the request is two


@fault("clusterpolicy-crd-deleted", "the ClusterPolicy CRD was deleted (e.g. a botched chart upgrade): the "
       "ClusterPolicy and every operand it owns go with it, while the operator pod still runs",
       "delete CRD clusterpolicies.nvidia.com (garbage collection removes the owned DaemonSets)",
       Layer.OPERATOR, {"OPR-001", "OPR-002"}, CLUSTER, fresh=CASCADE)
def _crd_deleted(ctx: FaultContext) -> None:
    ctx.kube.delete("CustomResourceDefinition", op.CLUSTERPOLICY_CRD)
    # The garbage collector removes the owned DaemonSets on its own schedule; the CRD going is the fault.
    ctx.wait(lambda: not any(c["metadata"]["name"] == op.CLUSTERPOLICY_CRD
                             for c in ctx.kube.list("CustomResourceDefinition")), "CRD gone", 60)


@fault("clusterpolicy-deleted", "the ClusterPolicy was deleted: the operator runs but has nothing to reconcile",
       "delete ClusterPolicy cluster-policy (garbage collection removes the owned DaemonSets)",
       Layer.OPERATOR, {"OPR-002"}, CLUSTER, fresh=CASCADE)
def _cp_deleted(ctx: FaultContext) -> None:
    ctx.kube.delete("ClusterPolicy", CLUSTERPOLICY_NAME)
    ctx.wait(lambda: not ctx.kube.list("ClusterPolicy"), "ClusterPolicy gone", 30)


# ---- node health and the container runtime (issue 8 items 1, 3, 4) ----------------------------------
RUNTIME_DOWN_MESSAGE = ("container runtime is down, PLEG is not healthy: pleg was last seen active 3m4.512s ago; "
                        "threshold is 3m0s")


def _set_node_conditions(ctx: FaultContext, node: str, changes: dict[str, tuple[str, str, str]]) -> None:
    """Write node conditions as kubelet (or the node controller) reports them; kwok's heartbeat keeps them."""
    n = ctx.kube.get("Node", node)
    now = _t()
    conds = []
    for c in n["status"].get("conditions") or []:
        if c["type"] in changes:
            status, reason, message = changes[c["type"]]
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update(status=status, reason=reason, message=message, lastHeartbeatTime=now)
        conds.append(c)
    ctx.node_patch(node, {"status": {"conditions": conds}}, status=True)


def _pods_on(ctx: FaultContext, node: str) -> list[Obj]:
    return [p for p in ctx.kube.list("Pod", ctx.ns) if p["spec"].get("nodeName") == node]


def _mark_pods_not_ready(ctx: FaultContext, node: str) -> None:
    """Every running pod on the node Ready=False, containers still "running".

    kube-controller-manager's node lifecycle controller does this (MarkPodsNotReady) only when it turns a
    node's Ready condition itself (kubelet silent past the grace period); the sim's kwok keeps posting, so
    the fault writes what the controller would.
    """
    for p in _pods_on(ctx, node):
        if p["status"].get("phase") == "Running":
            ctx.set_status(p, pod_states.marked_not_ready(p))


def _evict_deployment_pods(ctx: FaultContext, node: str) -> None:
    """Taint-based eviction after tolerationSeconds: the node's non-DaemonSet pods (the operator, NFD master
    or gc, if the scheduler put them there) are deleted and come back on healthy nodes. DaemonSet pods
    tolerate not-ready/unreachable and stay."""
    gone = []
    for p in _pods_on(ctx, node):
        refs = p["metadata"].get("ownerReferences") or []
        if refs and refs[0].get("kind") == "ReplicaSet":
            ctx.kube.request("DELETE", ctx.kube.path("Pod", p["metadata"]["name"], ctx.ns),
                             body={"gracePeriodSeconds": 0})
            gone.append(refs[0]["name"].rsplit("-", 1)[0])

    def back() -> bool:
        deps = {d["metadata"]["name"]: d for d in ctx.kube.list("Deployment", ctx.ns)}
        return all((deps.get(name, {}).get("status") or {}).get("availableReplicas") for name in gone)

    ctx.wait(back, f"evicted Deployment pods of {node} available elsewhere", 60)


def _wait_taint(ctx: FaultContext, node: str, key: str) -> None:
    ctx.wait(lambda: any(t["key"] == key for t in ctx.kube.get("Node", node)["spec"].get("taints") or []),
             f"taint {key} on {node}", 60)


def _event(ctx: FaultContext, pod: Obj, reason: str, message: str, kind: str = "Warning", count: int = 1,
           field_path: str | None = None) -> None:
    """An event as kubelet records it about a pod (FailedCreatePodSandBox, Failed, BackOff, ...)."""
    meta = pod["metadata"]
    now = _t()
    involved: Obj = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                     "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}
    if field_path:
        involved["fieldPath"] = field_path
    ctx.kube.create({"apiVersion": "v1", "kind": "Event",
                     "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                     "involvedObject": involved, "reason": reason, "message": message, "type": kind,
                     "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
                     "reportingComponent": "kubelet", "reportingInstance": pod["spec"].get("nodeName", ""),
                     "firstTimestamp": now, "lastTimestamp": now, "count": count})


def _recreate(ctx: FaultContext, app: str, node: str) -> Obj:
    """Delete the operand's pod on the node and return its replacement (the DaemonSet controller's)."""
    old = ctx.pod(app, node)
    ctx.kube.request("DELETE", ctx.kube.path("Pod", old["metadata"]["name"], ctx.ns), body={"gracePeriodSeconds": 0})

    def replacement() -> Obj | None:
        return next((p for p in ctx.pods(app, node) if p["metadata"]["uid"] != old["metadata"]["uid"]
                     and not p["metadata"].get("deletionTimestamp")), None)

    ctx.wait(lambda: replacement() is not None, f"new {app} pod on {node}")
    pod = replacement()
    assert pod is not None
    return pod


def _lost_node_reaction(taint: str) -> str:
    """What the node controller does to a node it lost, whichever way it was lost (the faults' expected text)."""
    return (f"kube-controller-manager adds node.kubernetes.io/{taint} taints; every pod there Ready=False, "
            "its Deployment pods evicted to other nodes")


def _lose_node(ctx: FaultContext, conditions: dict[str, tuple[str, str, str]], taint: str) -> None:
    """The node's conditions as kubelet (or its silence) leaves them, then the node controller's reaction."""
    _set_node_conditions(ctx, NODE, conditions)
    _wait_taint(ctx, NODE, f"node.kubernetes.io/{taint}")
    _evict_deployment_pods(ctx, NODE)
    _mark_pods_not_ready(ctx, NODE)


@fault("gpu-node-runtime-down", "containerd died on one GPU node: kubelet reports the node NotReady (container "
       "runtime is down), the node controller taints it and marks its pods not ready; the operand pods still "
       "read Running",
       "gpu-node-1 Ready=False KubeletNotReady 'container runtime is down, PLEG is not healthy ...'; "
       + _lost_node_reaction("not-ready"),
       Layer.NFD, {"NFD-004"}, NODE, root_cause_check="NFD-004", root_cause_says="container runtime is down")
def _node_runtime_down(ctx: FaultContext) -> None:
    _lose_node(ctx, {"Ready": ("False", "KubeletNotReady", RUNTIME_DOWN_MESSAGE)}, "not-ready")


@fault("gpu-node-unreachable", "the kubelet of one GPU node stopped posting status (node powered off or "
       "network-partitioned): the node controller sets its conditions Unknown, taints it unreachable and marks "
       "its pods not ready",
       "gpu-node-1 every condition Unknown NodeStatusUnknown 'Kubelet stopped posting node status.'; "
       + _lost_node_reaction("unreachable"),
       Layer.NFD, {"NFD-004"}, NODE, root_cause_check="NFD-004", root_cause_says="Kubelet stopped posting")
def _node_unreachable(ctx: FaultContext) -> None:
    unknown = ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    _lose_node(ctx, dict.fromkeys(("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"), unknown),
               "unreachable")


@fault("gpu-node-cordoned", "an admin cordoned one GPU node for maintenance: nothing new schedules there, its "
       "operands keep running; the node is not probed, and that is not a broken GPU",
       "kubectl cordon gpu-node-1 (spec.unschedulable=true; the node controller adds the unschedulable taint)",
       None, set(), NODE, verdict=INCOMPLETE, warns=frozenset({"NFD-004"}))
def _node_cordoned(ctx: FaultContext) -> None:
    ctx.node_patch(NODE, {"spec": {"unschedulable": True}})
    _wait_taint(ctx, NODE, "node.kubernetes.io/unschedulable")


@fault("runtime-handler-missing", "containerd on one node has no 'nvidia' runtime handler (the field note's "
       "story: its config.toml rewritten by another tool after the toolkit wrote it, as the kind tier does it on "
       "containerd v2.4.2, where a later drop-in cannot remove a runtime): every operand pod that names "
       "runtimeClassName nvidia cannot get a sandbox, "
       "while the driver and toolkit pods (no runtime class) run; the validator looks stuck in driver-validation",
       "gpu-node-1: validator, device plugin, GFD, DCGM exporter (and mig-manager) pods re-created and left "
       "Pending with every container PodInitializing, FailedCreatePodSandBox events 'no runtime for \"nvidia\" "
       "is configured'; no GPU resources; no cuda validator",
       Layer.DRIVER_TOOLKIT, {"DRV-006"}, NODE,
       states_not_ready=frozenset({"state-operator-validation", "state-device-plugin"}),
       root_cause_check="DRV-006", root_cause_says='no runtime for "nvidia" is configured')
def _runtime_handler_missing(ctx: FaultContext) -> None:
    ctx.host_fault(NODE, hosts.RUNTIME_MISSING)
    _no_cuda_validator(ctx, NODE)
    for o in (op.VALIDATOR, *GATED):
        if not ctx.pods(o.daemonset, NODE):
            continue
        pod = _recreate(ctx, o.daemonset, NODE)
        if pod["spec"].get("runtimeClassName") != "nvidia":
            continue  # NRI profiles: no runtime class, nothing to fail
        ctx.set_status(pod, pod_states.no_sandbox(pod))
        _event(ctx, pod, "FailedCreatePodSandBox", NO_NVIDIA_RUNTIME, count=14)
    ctx.drop_gpu_resources(NODE)  # the device plugin never started


@fault("driver-image-pull-failure", "the driver image cannot be pulled on one node (air-gapped registry mirror "
       "without the image for this kernel/OS): the driver pod sits in ImagePullBackOff, everything after it waits",
       "gpu-node-1: driver pod re-created, nvidia-driver-ctr ImagePullBackOff with Failed/ErrImagePull and "
       "BackOff events; toolkit waiting in driver-validation; validator and gated operands re-created Pending "
       "without a sandbox (FailedCreatePodSandBox: no nvidia handler before the toolkit is Ready); no GPU "
       "resources; no cuda validator",
       Layer.DRIVER_TOOLKIT, {"DRV-002", "DRV-003"}, NODE,
       states_not_ready=frozenset({"state-driver"}), root_cause_check="DRV-002", root_cause_says="pull")
def _driver_image_pull(ctx: FaultContext) -> None:
    pod = _recreate(ctx, op.DRIVER.daemonset, NODE)
    where = "spec.containers{nvidia-driver-ctr}"
    image = next(c["image"] for c in pod["spec"]["containers"] if c["name"] == "nvidia-driver-ctr")
    ctx.set_status(pod, pod_states.image_pull_backoff(pod, "nvidia-driver-ctr"))
    reg = image.split("/", 1)[0]
    _event(ctx, pod, "Failed", f'Failed to pull image "{image}": rpc error: code = Unknown desc = failed to pull '
           f'and unpack image "{image}": failed to resolve reference "{image}": failed to do request: Head '
           f'"https://{reg}/v2/": dial tcp: lookup {reg}: i/o timeout', count=6,
           field_path=where)
    _event(ctx, pod, "Failed", "Error: ErrImagePull", count=6, field_path=where)
    _event(ctx, pod, "BackOff", f'Back-off pulling image "{image}"', kind="Normal", count=40,
           field_path=where)
    _event(ctx, pod, "Failed", "Error: ImagePullBackOff", count=40, field_path=where)
    _driver_not_up(ctx, NODE)




# ---- the DRA models (issue #22): kubelet plugin, DeviceClass, ResourceSlices, claims ---------------------
NO_DRA = "the real operator v25.3.4 has no DRA driver state (DRA arrives with v26.7.0)"
DRA_PROFILE = "dra-driver"


def _plugin_pod(ctx: FaultContext, node: str) -> Obj:
    """The node's DRA kubelet-plugin pod: the DRA driver chart's (its own namespace, its labels; the dra-driver
    profile) or the operator's (the GPUCluster stack, app label)."""
    pods = [p for p in ctx.kube.list("Pod", dra.CHART_NAMESPACE, label_selector=dra_chart.KUBELET_PLUGIN_SELECTOR)
            if p.get("spec", {}).get("nodeName") == node]
    return pods[0] if pods else ctx.pod(dra.KUBELET_PLUGIN, node)


def _wait_slice_gone(ctx: FaultContext, node: str) -> None:
    # The operand loop withdraws the node's slice once the plugin pod is not Ready (kubelet drops a
    # deregistered driver's slices). DPL-012's failure there is blocked behind DPL-010, its cause.
    ctx.wait(lambda: not hosts.node_slices(ctx.kube, node), f"ResourceSlice of {node} withdrawn")


@fault("dra-no-resourceslices", "the DRA kubelet plugin on one node runs but never registers with kubelet "
       "(its gRPC socket under /var/lib/kubelet/plugins is not served): the node publishes no ResourceSlice",
       "gpu-node-1: the DRA kubelet plugin (the chart's nvidia-dra-driver-gpu-kubelet-plugin) Running with "
       "container gpus not Ready (startup probe "
       "failing); its ResourceSlice withdrawn",
       Layer.DEVICE_PLUGIN, {"DPL-010"}, NODE, profile=DRA_PROFILE, simulated_only=NO_DRA,
       root_cause_check="DPL-010")
def _dra_no_resourceslices(ctx: FaultContext) -> None:
    pod = _plugin_pod(ctx, NODE)
    st = pod_states.running_ready(pod)
    for c in st["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "False"
    for cs in st["containerStatuses"]:
        cs["ready"] = False
    ctx.set_status(pod, st)
    _event(ctx, pod, "Unhealthy", "Startup probe failed: service unhealthy (responded with \"NOT_SERVING\")",
           count=30, field_path=f"spec.containers{{{dra.KUBELET_PLUGIN_CONTAINER}}}")
    _wait_slice_gone(ctx, NODE)


@fault("dra-kubelet-plugin-crashloop", "the DRA kubelet plugin crash-loops on one node (NVML cannot initialise, "
       "a CDI root it cannot write): kubelet deletes its ResourceSlices, no GPU of the node can be claimed",
       "gpu-node-1: the DRA kubelet plugin (the chart's nvidia-dra-driver-gpu-kubelet-plugin) container gpus "
       "CrashLoopBackOff; its ResourceSlice withdrawn",
       Layer.DEVICE_PLUGIN, {"DPL-010"}, NODE, profile=DRA_PROFILE, simulated_only=NO_DRA,
       root_cause_check="DPL-010")
def _dra_plugin_crashloop(ctx: FaultContext) -> None:
    pod = _plugin_pod(ctx, NODE)
    ctx.set_status(pod, pod_states.crash_looping(pod, dra.KUBELET_PLUGIN_CONTAINER, restarts=6))
    _wait_slice_gone(ctx, NODE)


@fault("dra-deviceclass-missing", "DeviceClass gpu.nvidia.com was deleted (a cleanup of another DRA driver's "
       "classes, a GitOps prune): every ResourceClaim for a GPU is unallocatable",
       "delete DeviceClass gpu.nvidia.com (the ResourceSlices stay)",
       Layer.DEVICE_PLUGIN, {"DPL-011"}, CLUSTER, profile=DRA_PROFILE, simulated_only=NO_DRA + "; " + HEALED)
def _dra_deviceclass_missing(ctx: FaultContext) -> None:
    ctx.kube.delete("DeviceClass", dra.GPU_DEVICE_CLASS)
    ctx.wait(lambda: dra.GPU_DEVICE_CLASS not in {d["metadata"]["name"] for d in ctx.kube.list("DeviceClass")},
             "DeviceClass gone")


@fault("dra-fewer-devices", "the DRA kubelet plugin on one node publishes one GPU fewer than the node has (a GPU "
       "NVML failed to enumerate at the plugin's start)",
       "gpu-node-1's ResourceSlice: last device removed (pool generation bumped); GFD's gpu.count unchanged",
       Layer.DEVICE_PLUGIN, {"DPL-012"}, NODE, profile=DRA_PROFILE, simulated_only=NO_DRA,
       root_cause_check="DPL-012")
def _dra_fewer_devices(ctx: FaultContext) -> None:
    (sl,) = hosts.node_slices(ctx.kube, NODE)
    spec = sl["spec"]
    pool = {**spec["pool"], "generation": spec["pool"]["generation"] + 1}
    ctx.kube.patch("ResourceSlice", sl["metadata"]["name"], {"spec": {"devices": spec["devices"][:-1], "pool": pool}})


@fault("dra-device-plugin-too", "a device plugin still runs beside the DRA driver on one node (one installed "
       "before the switch to DRA, or a ClusterPolicy left with devicePlugin.enabled=true): kubelet advertises "
       "nvidia.com/gpu there while the DRA driver publishes the same GPUs as ResourceSlices",
       "gpu-node-1: capacity and allocatable nvidia.com/gpu set to the node's GPU count, as a registered device "
       "plugin has kubelet report them; its ResourceSlice stays",
       Layer.DEVICE_PLUGIN, {"DPL-014"}, NODE, profile=DRA_PROFILE, simulated_only=NO_DRA,
       root_cause_check="DPL-014")
def _dra_device_plugin_too(ctx: FaultContext) -> None:
    (sl,) = hosts.node_slices(ctx.kube, NODE)
    count = str(len(sl["spec"].get("devices") or []))
    ctx.node_patch(NODE, {"status": {"capacity": {"nvidia.com/gpu": count},
                                     "allocatable": {"nvidia.com/gpu": count}}}, status=True)
    ctx.wait(lambda: ((ctx.kube.get("Node", NODE).get("status") or {}).get("allocatable") or {}).get(
        "nvidia.com/gpu") == count, "nvidia.com/gpu advertised")


@fault("dra-all-claimed", "every GPU device is already allocated to other workloads' ResourceClaims: busy, not "
       "broken; no node can be probed",
       "per GPU node, in namespace busy-workloads, a ResourceClaim for all of the node's gpu.nvidia.com devices "
       "(allocationMode All) held by a running pod the scheduler placed there",
       None, set(), ALL, profile=DRA_PROFILE, simulated_only=NO_DRA, verdict=INCOMPLETE,
       warns=frozenset({"DPL-013"}))
def _dra_all_claimed(ctx: FaultContext) -> None:
    ns = "busy-workloads"
    try:
        ctx.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    except ApiException as e:
        if e.status != 409:
            raise
    ctx.wait(lambda: bool(ctx.kube.list("ServiceAccount", ns)), "default ServiceAccount")
    for n in ctx.sim.gpu_nodes:
        claim = f"training-{n}"
        ctx.kube.create({"apiVersion": dra.RESOURCE_API, "kind": "ResourceClaim",
                         "metadata": {"name": claim, "namespace": ns},
                         "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                             "deviceClassName": dra.GPU_DEVICE_CLASS, "allocationMode": "All"}}]}}})
        # Placed by the scheduler (not spec.nodeName), which is what allocates the claim.
        ctx.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": claim, "namespace": ns},
                         "spec": {"tolerations": [{"operator": "Exists"}],
                                  "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                      "nodeSelectorTerms": [{"matchFields": [
                                          {"key": "metadata.name", "operator": "In", "values": [n]}]}]}}},
                                  "resourceClaims": [{"name": "gpus", "resourceClaimName": claim}],
                                  "containers": [{"name": "train", "image": "example.com/train:1",
                                                  "resources": {"claims": [{"name": "gpus"}]}}]}})

    def allocated() -> bool:
        claims = ctx.kube.list("ResourceClaim", ns)
        return len(claims) == len(ctx.sim.gpu_nodes) and all(
            (c.get("status") or {}).get("allocation") for c in claims)
    ctx.wait(allocated, "every busy claim allocated")


def markdown_table() -> str:
    """The README's fault table: what each fault reproduces and what the suite must report."""
    rows = ["| Fault | Reproduces | Suite reports (root cause → failing checks) | Nodes | Real operator v25.3.4 "
            "| Matrix cluster |",
            "|---|---|---|---|---|---|"]
    for f in FAULTS.values():
        where = {NODE: NODE, ALL: "every GPU node", CLUSTER: "cluster-wide", NONE: "no node"}[f.nodes]
        if f.layer is None and f.verdict == CONFORMANT:
            what = f"not broken ({f.verdict}); warns {', '.join(sorted(f.warns))}"
        elif f.layer is None:
            what = f"transient, not broken ({f.verdict}); warns {', '.join(sorted(f.warns))}"
        else:
            what = f"{f.layer} → {', '.join(sorted(f.checks))}"
        extra = f" (profile `{f.profile}`)" if f.profile != "default" else ""
        real = f"simulated-only: {f.simulated_only}" if f.simulated_only else "differential: same verdicts"
        cluster = f"fresh: {f.fresh}" if f.fresh else "reused, undone"
        rows.append(f"| `{f.name}`{extra} | {f.description} | {what} | {where} | {real} | {cluster} |")
    return "\n".join(rows)
