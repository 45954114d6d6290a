"""Layer 1, operator: the ClusterPolicy CRD and object, the operator Deployment, the operand DaemonSets."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gpu_conformance import upgrade_states as upg
from gpu_conformance import versions
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.common import (
    cluster_finding,
    enabled_operands,
    operator_deployment,
    operator_image,
)
from gpu_conformance.checks.pods import (
    awaits_toolkit,
    last_log,
    probe_failures,
    quote_probe_failures,
    start_problem,
    with_log,
)
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.podstate import (
    crashlooping,
    failing_container,
    pod_ready,
    pod_status_text,
    restart_count,
    stuck_init_container,
)
from gpu_conformance.cluster.snapshot import ClusterSnapshot, has_nfd_gpu_label, labels_of, name_of
from gpu_conformance.facts import nvidiadriver_error
from gpu_conformance.facts import operand_daemonsets as daemonsets_of  # OPR-006's function has the name
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.operands import (
    BY_STATE,
    CLUSTERPOLICY_CRD,
    DCGM,
    DCGM_EXPORTER,
    DRIVER,
    GPUCLUSTER_CRD,
    MIG_MANAGER,
    NODE_STATUS_EXPORTER,
    NVIDIADRIVER_CRD,
    OPERANDS,
    Operand,
    known_state,
)
from gpu_conformance.resource_model import ResourceModel

L = Layer.OPERATOR
# The only version of ClusterPolicy any operator release serves (api/nvidia/v1 in every tag from v22.9).
CLUSTERPOLICY_VERSION = "v1"
# Operands no later layer examines: their pods' health is judged here, per node.
MONITORING = (DCGM, DCGM_EXPORTER, MIG_MANAGER, NODE_STATUS_EXPORTER)
# Init containers that only wait for an earlier stage; a pod stuck there is a symptom, not a cause.
GATES = ("toolkit-validation", "driver-validation")
# What explains an operator that deploys nothing: no node carries NFD's NVIDIA PCI label, so the operator sees no
# GPU node (state_manager.go labelGPUNodes), creates no operand DaemonSet (object_controls.go: "No GPU node in the
# cluster, do not create DaemonSets") and reports ready with NoGPUNodes / NFDLabelsMissing. The NFD layer's checks
# say why; the operator is doing what it should.
NFD_EXPLAINS = ("NFD-001", "NFD-002", "NFD-003")
# v26.7.0's GPUCluster stack runs without a ClusterPolicy (Helm gpuCluster.deployCR=true, clusterPolicy.deployCR=
# false) and creates its own DaemonSets (manifests/state-dra-*, state-dcgm*), so the ClusterPolicy's checks have
# nothing to judge there. The ClusterPolicy CRD stays (the chart ships it; the GPUCluster controller lists
# ClusterPolicies before it reconciles), so OPR-001 still applies.
GPUCLUSTER_MODEL = (ResourceModel.GPUCLUSTER,)
NO_CP = "the GPUCluster stack runs without a ClusterPolicy by design; OPR-008 judges the GPUCluster"
OWN_DS = ("the GPUCluster creates its own DaemonSets: the DRA kubelet plugin is judged per node by DPL-010, the "
          "others are named by OPR-008 when they keep it notReady")


def operator_sees_gpu_nodes(snap: ClusterSnapshot) -> bool:
    """The operator's hasGPUNodes: some node carries an NFD NVIDIA PCI label (it then sets gpu.present=true)."""
    return any(has_nfd_gpu_label(n) for n in snap.nodes)


@check("OPR-001", L, "ClusterPolicy CRD is served",
       hint="The GPU Operator's CRDs come with its Helm chart; reinstall or upgrade the chart.",
       kubectl=f"kubectl get crd {CLUSTERPOLICY_CRD}",
       detects="operator not installed, or its CRD deleted")
def clusterpolicy_crd(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    if CLUSTERPOLICY_CRD in snap.crds:
        served = snap.crd_served.get(CLUSTERPOLICY_CRD)
        # Every release from v22.9 on writes ClusterPolicy as nvidia.com/v1 only; a CRD edited (or left by a
        # broken upgrade) to serve something else hides every ClusterPolicy from the operator and from us.
        if served is not None and CLUSTERPOLICY_VERSION not in served:
            return [cluster_finding(
                Status.FAIL, f"CRD {CLUSTERPOLICY_CRD} exists but does not serve {CLUSTERPOLICY_VERSION} "
                f"(serves: {', '.join(served) or 'no version'}): the operator reads and writes nvidia.com/"
                f"{CLUSTERPOLICY_VERSION}, so no ClusterPolicy can be read",
                object=f"customresourcedefinition/{CLUSTERPOLICY_CRD}", observed=served,
                expected=[CLUSTERPOLICY_VERSION])]
        return [cluster_finding(Status.PASS, f"CRD {CLUSTERPOLICY_CRD} is served")]
    return [cluster_finding(Status.FAIL,
                            f"CRD {CLUSTERPOLICY_CRD} does not exist: the GPU Operator is not installed",
                            object=f"customresourcedefinition/{CLUSTERPOLICY_CRD}", observed="absent",
                            expected="present")]


@check("OPR-002", L, "exactly one active ClusterPolicy",
       hint="Helm creates ClusterPolicy/cluster-policy (clusterPolicy.deployCR=true). Only the oldest one is "
            "active; the operator marks others 'ignored'.",
       kubectl="kubectl get clusterpolicies.nvidia.com",
       detects="no ClusterPolicy, or several competing ones",
       na_in=GPUCLUSTER_MODEL, na_why=NO_CP)
def one_clusterpolicy(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    cps = snap.clusterpolicies
    if not cps:
        return [cluster_finding(Status.FAIL, "no ClusterPolicy exists: the operator deploys nothing",
                                object="clusterpolicies.nvidia.com", observed=0, expected=1)]
    acting = snap.active_clusterpolicy or {}
    if len(cps) > 1:
        others = sorted(name_of(c) for c in cps if c is not acting)
        marked = [n for n in others if next(c for c in cps if name_of(c) == n).get("status", {}).get("state")
                  == "ignored"]
        return [cluster_finding(Status.WARN, f"{len(cps)} ClusterPolicies: the operator acts on the oldest, "
                                f"{name_of(acting)}, and ignores {', '.join(others)}"
                                + ("" if len(marked) == len(others) else
                                   f" (not yet marked 'ignored': {', '.join(n for n in others if n not in marked)})"),
                                object="clusterpolicies.nvidia.com", observed=[name_of(c) for c in cps],
                                expected="one", active=name_of(acting), ignored=others)]
    return [cluster_finding(Status.PASS, f"ClusterPolicy {name_of(acting)} is the active one", total=len(cps))]


def _condition(cp: dict, ctype: str) -> dict:
    return next((c for c in cp.get("status", {}).get("conditions") or [] if c.get("type") == ctype), {})


def not_ready_states(message: str) -> list[str]:
    """'ClusterPolicy is not ready, states not ready: [state-driver state-dcgm]' -> ['state-driver', 'state-dcgm']."""
    m = re.search(r"states not ready:\s*\[([^\]]*)\]", message or "")
    return [t for t in re.split(r"[\s,]+", m.group(1)) if t] if m else []


def unavailable_nodes(snap: ClusterSnapshot, operand: Operand) -> tuple[list[str], list[str]]:
    """Nodes where the operand's pod is missing or not Ready, and nodes whose driver pod is on an old revision.

    The operator's rule per DaemonSet: ready iff status.numberUnavailable == 0; for the driver (OnDelete) also
    every pod on the current revision. So these are exactly the nodes that make its state notReady.
    """
    down: set[str] = set()
    outdated: list[str] = []
    for ds in daemonsets_of(snap, operand):
        st = ds.get("status") or {}
        pods = [p for p in snap.pods_of(ds) if not p.get("metadata", {}).get("deletionTimestamp")]
        have = {p.get("spec", {}).get("nodeName") for p in pods}
        down |= {p.get("spec", {}).get("nodeName") or "<unscheduled>" for p in pods if not pod_ready(p)}
        selector = ds.get("spec", {}).get("template", {}).get("spec", {}).get("nodeSelector") or {}
        if selector:
            down |= {name_of(n) for n in snap.nodes if name_of(n) not in have
                     and all(labels_of(n).get(k) == v for k, v in selector.items())}
        if operand is DRIVER and not down and (st.get("updatedNumberScheduled", 0) or 0) < (
                st.get("desiredNumberScheduled", 0) or 0):
            outdated.append(name_of(ds))
    return sorted(down), outdated


@check("OPR-003", L, "ClusterPolicy is ready and reconciled",
       hint="status.state=ready is not enough: Ready must be True with reason Reconciled. NoGPUNodes and "
            "NFDLabelsMissing also report 'ready'. notReady with OperandNotReady names operand states whose pods "
            "are unavailable on some node: a symptom, judged per node by the later layers. v26.7 with NVIDIADriver "
            "CRs also stays notReady while a driver rollout is open (nodes in a driver upgrade state other than "
            "upgrade-done): each such node is judged by its upgrade state (DRV-002).",
       kubectl="kubectl get clusterpolicies.nvidia.com -o jsonpath='{range .items[*]}{.metadata.name} "
               "{.status.state} {.status.conditions}{\"\\n\"}{end}'",
       detects="never reconciled, reconcile errors; operand states notReady that no node's unavailable pod "
               "explains, or a v26.7 NVIDIADriver rollout no node's upgrade state explains; MPS control daemon or "
               "sandbox/vGPU operand pods unavailable on a node; NoGPUNodes / NFDLabelsMissing where no NFD check "
               "explains them",
       na_in=GPUCLUSTER_MODEL, na_why=NO_CP)
def clusterpolicy_ready(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    cp = snap.active_clusterpolicy
    if cp is None:
        return [cluster_finding(Status.NA, "no ClusterPolicy (see OPR-002)")]
    state = cp.get("status", {}).get("state", "")
    conditions = cp.get("status", {}).get("conditions") or []
    ready = _condition(cp, "Ready")
    error = _condition(cp, "Error")
    ev: dict = {"object": f"clusterpolicy/{name_of(cp)}", "field": "status", "status.state": state or "<unset>",
                "Ready": {k: ready.get(k) for k in ("status", "reason", "message")},
                "Error": {k: error.get(k) for k in ("status", "reason", "message")}}
    reason = ready.get("reason", "")
    if state == "ready" and ready.get("status") == "True" and reason == "Reconciled":
        return [cluster_finding(Status.PASS, "ClusterPolicy ready (Ready=True, reason Reconciled)", **ev)]
    if state == "ready" and not conditions:
        return [cluster_finding(Status.PASS, "ClusterPolicy state ready (no status conditions: an operator before "
                                "v23.9 writes only status.state)", **ev)]
    # Both are the operator's report of a failure elsewhere (NFD or the nodes): explained by the NFD layer where
    # that layer fails, the operator's own failure only where nothing there does.
    if reason == "NoGPUNodes":
        return [replace(cluster_finding(Status.FAIL, "ClusterPolicy reports NoGPUNodes: the operator found no node "
                                        "with NFD's NVIDIA PCI label (feature.node.kubernetes.io/pci-10de.present), "
                                        "so it deployed nothing", **ev), explained_by=NFD_EXPLAINS)]
    if reason == "NFDLabelsMissing":
        return [replace(cluster_finding(Status.FAIL, "ClusterPolicy reports NFDLabelsMissing: no node has any "
                                        "feature.node.kubernetes.io/ label — Node Feature Discovery is not running "
                                        "or not labelling", **ev), explained_by=NFD_EXPLAINS)]
    if not state:
        return [cluster_finding(Status.FAIL, "ClusterPolicy has no status: the operator has never reconciled it "
                                "(is the operator running?)", **ev)]
    message = error.get("message") or ready.get("message") or ""
    # notReady with Ready still True: the operator writes status.state and then the conditions in two updates
    # (v25.3.4 clusterpolicy_controller.go: updateCRState(NotReady), then SetConditionsError(OperandNotReady)), so a
    # read between them sees the old conditions. Judged as the OperandNotReady that follows, from the DaemonSets.
    mid_update = state == "notReady" and ready.get("status") == "True"
    operand_not_ready = (error.get("reason") == "OperandNotReady" or "states not ready" in message
                         or (state == "notReady" and not conditions) or mid_update)
    if not operand_not_ready:
        msg = f"ClusterPolicy state={state}, Ready={ready.get('status', '?')} reason={reason or '?'}" + (
            f": {message}" if message else "")
        return [cluster_finding(Status.FAIL, msg, **ev)]
    if state == "notReady" and not conditions and not operator_sees_gpu_nodes(snap):
        # Before v23.9 the operator writes notReady when no node has any NFD label (clusterpolicy_controller.go).
        return [replace(cluster_finding(Status.FAIL, "ClusterPolicy notReady and no node carries NFD's NVIDIA PCI "
                                        "label: the operator sees no GPU node and deploys nothing", **ev),
                        explained_by=NFD_EXPLAINS)]
    return _operand_states_findings(snap, not_ready_states(message), ev, NVIDIADRIVER_ROLLOUT in message)


def _unjudged_operand_findings(snap: ClusterSnapshot, st: str, operand: Operand, nodes: list[str]) -> list[Finding]:
    """Per node, the pods of a state no later layer judges (MPS control daemon, sandbox/vGPU operands)."""
    out = []
    for ds in daemonsets_of(snap, operand):
        have = {p.get("spec", {}).get("nodeName") for p in snap.pods_of(ds)}
        out += [Finding(Status.FAIL, f"{st} not ready on this node: DaemonSet {name_of(ds)} selects it but has no "
                        "pod here (see its FailedCreate events)", node=n,
                        evidence={"object": f"daemonset/{name_of(ds)}", "state": st, "observed": "no pod",
                                  "expected": "one Ready pod"},
                        kubectl=f"kubectl -n {snap.operator_namespace} describe daemonset {name_of(ds)}")
                for n in nodes if n not in have and n in snap.gpu_node_names]
        for pod in snap.pods_of(ds):
            n = pod.get("spec", {}).get("nodeName")
            if n not in nodes or pod_ready(pod) or pod.get("metadata", {}).get("deletionTimestamp"):
                continue
            stuck = stuck_init_container(pod)
            if stuck and stuck["name"] in GATES:
                continue  # waits on the driver/toolkit: that layer names the cause on this node
            out.append(Finding(Status.FAIL, f"{st} not ready on this node: {name_of(pod)} is "
                               f"{pod_status_text(pod)} ({restart_count(pod)} restarts)", node=n,
                               evidence={"object": f"pod/{name_of(pod)}", "state": st, "daemonset": name_of(ds),
                                         "status": pod_status_text(pod)},
                               kubectl=f"kubectl -n {snap.operator_namespace} describe pod {name_of(pod)}"))
    return out


# v26.7.0 with useNvidiaDriverCRD: the ClusterPolicy stays notReady (OperandNotReady) while any node an NVIDIADriver
# owns is in a driver upgrade state other than upgrade-done / unset — pending, in progress or failed.
NVIDIADRIVER_ROLLOUT = "NVIDIADriver upgrade has not completed"


def driver_rollout_nodes(snap: ClusterSnapshot) -> dict[str, list[str]]:
    """Nodes that keep a v26.7 NVIDIADriver rollout open, by upgrade state, as the operator counts them.

    The operator counts nodes labelled with their NVIDIADriver owner and skips those opted out of upgrades; a
    snapshot where no node carries the owner label (an older operator) is read by the state label alone.
    """
    owned = [n for n in snap.nodes if upg.DRIVER_OWNER_LABEL in labels_of(n)] or snap.nodes
    by_state: dict[str, list[str]] = {}
    for n in owned:
        labels = labels_of(n)
        state = upg.upgrade_state(labels)
        if labels.get(upg.UPGRADE_SKIP_LABEL) != "true" and upg.rollout_incomplete(state):
            by_state.setdefault(str(state), []).append(name_of(n))
    return by_state


def _rollout_part(by_state: dict[str, list[str]]) -> str:
    def names(ns: list[str]) -> str:
        return ", ".join(ns[:5]) + (" …" if len(ns) > 5 else "")

    failed = by_state.get(upg.FAILED, [])
    pending = by_state.get(upg.PENDING, [])
    moving = {s: ns for s, ns in by_state.items() if s not in (upg.FAILED, upg.PENDING)}
    parts = []
    if failed:
        parts.append(f"upgrade-failed on {names(failed)} (a driver failure, see DRV-002)")
    parts += [f"{s} on {names(ns)}" for s, ns in sorted(moving.items())]
    if pending:
        parts.append(f"pending (upgrade-required) on {names(pending)}")
    return f"NVIDIADriver driver upgrade not completed: {', '.join(parts)}"


def _operand_states_findings(snap: ClusterSnapshot, named: list[str], ev: dict,
                             rollout: bool = False) -> list[Finding]:
    """notReady because of operand states or a v26.7 NVIDIADriver rollout: which states, on which nodes; a symptom
    where nodes explain it (each such node is judged on its own: a pause, or a root cause)."""
    states = list(named)
    for o in OPERANDS:  # before v23.9 no message names the states: read the DaemonSets as the operator does
        if o.state not in states and any((d.get("status") or {}).get("numberUnavailable")
                                         for d in daemonsets_of(snap, o)):
            states.append(o.state)
    where: dict[str, list[str]] = {}
    upgrading: dict[str, list[str]] = {}
    unexplained: list[str] = []
    unknown = [st for st in states if not known_state(st)]
    per_node: list[Finding] = []
    for st in states:
        operand = BY_STATE.get(st)
        nodes, outdated = unavailable_nodes(snap, operand) if operand else ([], [])
        if nodes:
            where[st] = nodes
            if operand not in OPERANDS:
                per_node += _unjudged_operand_findings(snap, st, operand, nodes)  # type: ignore[arg-type]
        elif st in unknown:
            continue
        elif outdated:
            upgrading[st] = outdated
        else:
            unexplained.append(st)
    rollout_nodes = driver_rollout_nodes(snap) if rollout else {}
    if rollout and not rollout_nodes:
        unexplained.append(NVIDIADRIVER_ROLLOUT)
    ev = {**ev, "observed": {"states not ready": states, "unavailable on": where, "unknown states": unknown,
                             "driver pods on an old revision (OnDelete)": upgrading,
                             **({"NVIDIADriver upgrade states": rollout_nodes} if rollout else {})},
          "expected": "every not-ready state explained by unavailable pods on named nodes"}
    parts = [f"{st} (unavailable on {', '.join(n[:5])}{' …' if len(n) > 5 else ''})" for st, n in where.items()]
    parts += [f"{st} (DaemonSet {', '.join(ds)}: pods on an old revision, upgrade pending)"
              for st, ds in upgrading.items()]
    if rollout_nodes:
        parts.append(_rollout_part(rollout_nodes))
    # A state no release this suite read names (a newer operator): reported by name, judged by nothing.
    if unknown:
        parts.append(f"{', '.join(unknown)} (a state unknown to this suite: no operator release it read, up to "
                     f"the inventory's newest, names it; read the operator log)")
    if unexplained:
        return [Finding(Status.FAIL, "ClusterPolicy notReady (OperandNotReady): no node explains "
                        f"{', '.join(unexplained)}" + (f"; also {'; '.join(parts)}" if parts else "")
                        + ": read the operator log for these states", evidence=ev, blocking=False)] + per_node
    if not states and not rollout_nodes:
        return [Finding(Status.FAIL, "ClusterPolicy notReady (OperandNotReady) without naming a state, and every "
                        "operand DaemonSet is available: read the operator log", evidence=ev, blocking=False)]
    return [Finding(Status.WARN, "ClusterPolicy notReady (OperandNotReady) — a symptom of: " + "; ".join(parts)
                    + (". Each of those nodes is judged below (a root cause, or a pause while its components are "
                       "healthy); the other nodes are judged on their own" if where or upgrading or rollout_nodes
                       else ""), evidence=ev, blocking=False)] + per_node


# The CRDs the operator's controllers watch from start-up, by release (cmd/gpu-operator/main.go): without one the
# controller's informer never syncs and the operator exits ("timed out waiting for cache to be synced for Kind
# *v1alpha1.NVIDIADriver"). A Helm upgrade leaves the CRDs a newer chart adds uninstalled unless its CRD-upgrade
# hook runs (operator.upgradeCRD). The ClusterPolicy CRD itself is OPR-001's.
_WATCHED_CRDS = ((versions.NVIDIADRIVER_CONTROLLER, NVIDIADRIVER_CRD, "NVIDIADriver"),
                 (versions.GPUCLUSTER_CONTROLLER, GPUCLUSTER_CRD, "GPUCluster"))
# controller-runtime's words for a watched kind the apiserver does not serve (quotes escaped in JSON/klog lines).
# The CRDs the reader lists (cluster/reader.py): their absence is read, the others' only told by the log.
_READ_CRDS = (CLUSTERPOLICY_CRD, NVIDIADRIVER_CRD)
_UNSERVED_KIND = re.compile(r"for Kind \*(?:\w+\.)*(\w+)|no matches for kind \\*\"(\w+)\\*\"")


def _why_operator_down(inp: CheckInput, pod: dict[str, Any]) -> tuple[str, str]:
    """Why the operator cannot run, when the cluster says so: a CRD its release watches is missing (read from the
    cluster, or named by the operator's own log); and its log."""
    snap = inp.snapshot
    log = last_log(snap, pod, "gpu-operator")
    version = inp.facts.operator.parsed
    named = {a or b for a, b in _UNSERVED_KIND.findall(log)}
    for rule, crd, kind in _WATCHED_CRDS:
        if versions.since(rule, version) is False:
            continue  # a release without that controller
        # A CRD the reader lists is missing as a fact (needed when the version is known or the log names its kind);
        # another only when the operator's log names its kind.
        absent = (crd not in snap.crds and (version is not None or kind in named)) if crd in _READ_CRDS \
            else kind in named
        if absent:
            return (f": the {kind} CRD ({crd}) is missing — from {versions.text(versions.RULES[rule])} the operator "
                    f"watches it at start-up and exits without it; a Helm upgrade does not install the CRDs a newer "
                    "chart adds (apply the chart's crds/ first, or enable its operator.upgradeCRD hook)"), log
    return "", log


@check("OPR-004", L, "operator Deployment is available",
       hint="Without the operator nothing is reconciled: read its pod's log (and --previous after a crash).",
       kubectl="kubectl -n {ns} get deploy,pods -l app=gpu-operator -o wide",
       detects="operator scaled to 0, crash-looping or missing; a crash-looping operator's own error quoted, and a "
               "CRD its release watches from start-up that is missing (NVIDIADriver from v23.9, GPUCluster from "
               "v26.7: a Helm upgrade without the new chart's CRDs) named")
def operator_available(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    dep = operator_deployment(snap)
    ns = snap.operator_namespace
    if dep is None:
        where = f"namespace {ns}" if ns else "any namespace (no pod labelled app=gpu-operator)"
        return [cluster_finding(Status.FAIL, f"no gpu-operator Deployment in {where}",
                                observed="absent", expected="Deployment gpu-operator")]
    st = dep.get("status", {})
    want = dep.get("spec", {}).get("replicas", 1)
    avail = st.get("availableReplicas", 0) or 0
    pods = [p for p in snap.operator_pods if p.get("metadata", {}).get("namespace") == ns]
    ev = {"object": f"deployment/{name_of(dep)}", "spec.replicas": want, "status.availableReplicas": avail,
          "pods": {name_of(p): {"status": pod_status_text(p), "restarts": restart_count(p)} for p in pods}}
    looping = [name_of(p) for p in pods if crashlooping(p)]
    if want == 0:
        return [cluster_finding(Status.FAIL, "gpu-operator Deployment is scaled to 0 replicas", **ev)]
    if looping:
        pod = next(p for p in pods if name_of(p) == looping[0])
        why, log = _why_operator_down(inp, pod)
        return [cluster_finding(Status.FAIL, with_log(f"gpu-operator pod {looping[0]} is in CrashLoopBackOff "
                                                      f"({restart_count(pod)} restarts){why}", log),
                                **ev, **({"log": log} if log else {}))]
    if avail < 1:
        states = ", ".join(f"{n} {v['status']}" for n, v in ev["pods"].items()) or "no pods"
        why, log = _why_operator_down(inp, pods[0]) if pods else ("", "")
        return [cluster_finding(Status.FAIL, with_log(f"gpu-operator Deployment has 0 available replicas "
                                                      f"({states}){why}", log), **ev)]
    restarts = max((restart_count(p) for p in pods), default=0)
    if restarts > 1:
        return [cluster_finding(Status.WARN,
                                f"gpu-operator available, but its pod restarted {restarts} times", **ev)]
    return [cluster_finding(Status.PASS, f"gpu-operator available ({avail}/{want})", **ev)]


@check("OPR-005", L, "operator version is known",
       hint="The version decides which labels, init containers and CDI defaults to expect. It is read from the "
            "operator image tag, else the OLM ClusterServiceVersion, the Deployment's Helm labels, or the validator "
            "image tag. Where none names it, version-dependent checks accept what every supported version does.",
       kubectl="kubectl -n {ns} get deploy,csv -o wide",
       detects="an operator whose version nothing in the cluster names (image pinned by digest without OLM "
               "or Helm labels), or a version older than the suite supports")
def operator_version_known(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    image = operator_image(snap)
    ov = inp.facts.operator
    if not image and not ov.known:
        return [cluster_finding(Status.NA, "no operator image to read a version from (see OPR-004)")]
    ev = {"object": f"deployment/{name_of(operator_deployment(snap) or {})}", "field": "image", "observed": image,
          "version": ov.tag or "unknown", "source": ov.source}
    if not ov.known:
        return [cluster_finding(Status.WARN, f"operator version unknown: image {image} has no release tag and no "
                                "ClusterServiceVersion, Helm label or validator image names one; version-dependent "
                                "checks accept what every supported version does", **ev)]
    assert ov.parsed is not None
    if ov.parsed < versions.OLDEST_SUPPORTED:
        return [cluster_finding(Status.WARN, f"GPU Operator {ov.tag} is older than "
                                f"{versions.text(versions.OLDEST_SUPPORTED)}, the oldest this suite knows: its "
                                "labels and status may be judged wrongly", **ev)]
    notes = []
    if not versions.since(versions.STATUS_CONDITIONS, ov.parsed):
        notes.append("no ClusterPolicy status conditions before v23.9: OPR-003 reads status.state only")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return [cluster_finding(Status.PASS, f"GPU Operator {ov.tag}, from the {ov.source}{tail}", **ev)]


@check("OPR-006", L, "each enabled operand has its DaemonSet, each disabled one has none",
       hint="The operator creates one DaemonSet per enabled state; a missing one means its state failed "
            "(see the operator log) or was deleted and not yet recreated.",
       kubectl="kubectl -n {ns} get daemonsets",
       detects="an operand DaemonSet deleted or never created (with NVIDIADriver CRs: their error condition "
               "quoted); a disabled operand still deployed",
       na_in=GPUCLUSTER_MODEL, na_why=OWN_DS)
def operand_daemonsets(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    if snap.active_clusterpolicy is None:
        return [cluster_finding(Status.NA, "no ClusterPolicy (see OPR-002)")]
    enabled = enabled_operands(snap)
    spec = snap.active_clusterpolicy.get("spec") or {}
    missing, unexpected, present = [], [], []
    for o in OPERANDS:
        exists = bool(daemonsets_of(snap, o))
        if o is DRIVER and (spec.get("driver") or {}).get("useNvidiaDriverCRD"):
            # The NVIDIADriver CRs own the driver DaemonSets; ClusterPolicy's own must be gone.
            if NVIDIADRIVER_CRD not in snap.crds or not snap.nvidiadrivers:
                missing.append("NVIDIADriver CR (driver.useNvidiaDriverCRD=true)")
            elif not exists:
                said = [f"{name_of(cr)}: {err[0]}" + (f" — {err[1]}" if err[1] else "")
                        for cr in snap.nvidiadrivers if (err := nvidiadriver_error(cr)) is not None]
                missing.append("driver DaemonSet owned by an NVIDIADriver"
                               + (f" (NVIDIADriver status: {'; '.join(said)})" if said else ""))
            else:
                present.append("driver (NVIDIADriver)")
            continue
        if o in enabled and not exists:
            missing.append(o.daemonset)
        elif o not in enabled and exists:
            unexpected.append(o.daemonset)
        elif exists:
            present.append(o.daemonset)
    ev = {"enabled": [o.key for o in enabled], "present": present, "missing": missing, "unexpected": unexpected}
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"enabled but no DaemonSet: {', '.join(missing)}")
        if unexpected:
            parts.append(f"disabled in the ClusterPolicy but a DaemonSet exists: {', '.join(unexpected)}")
        if missing and not unexpected and not operator_sees_gpu_nodes(snap):
            # The operator creates no DaemonSet while it sees no GPU node: NFD's missing label explains them.
            parts.append("the operator creates none while no node carries NFD's NVIDIA PCI label")
            return [replace(cluster_finding(Status.FAIL, "; ".join(parts), **ev), explained_by=NFD_EXPLAINS)]
        return [cluster_finding(Status.FAIL, "; ".join(parts), **ev)]
    return [cluster_finding(Status.PASS, f"{len(present)} operand DaemonSets match the ClusterPolicy",
                            **ev)]


@check("OPR-007", L, "operand DaemonSets are rolled out; monitoring operands healthy per node",
       hint="Driver, toolkit, validator, device plugin and GFD are judged by the later layers; DCGM, DCGM "
            "exporter, MIG manager and node-status exporter are judged here. A pod waiting in "
            "toolkit-validation is a symptom of the driver-toolkit layer. DCGM, its exporter and the node status "
            "exporter are off the GPU path: their failure fails the run but blocks no later layer, and is the "
            "node's root cause only if nothing on the GPU path fails there.",
       kubectl="kubectl -n {ns} get daemonsets -o wide && kubectl -n {ns} get pods -o wide --field-selector "
               "spec.nodeName={node}",
       detects="DCGM / DCGM exporter / MIG manager crash-looping or not Ready on a node (quoting kubelet's "
               "readiness/liveness probe failures); a rollout stuck on an old generation",
       gpu_path=False)
def operand_rollout(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    if snap.active_clusterpolicy is None:
        return [cluster_finding(Status.NA, "no ClusterPolicy (see OPR-002)")]
    findings: list[Finding] = []
    enabled = enabled_operands(snap)
    stale = []
    for ds in snap.daemonsets:
        md, st = ds.get("metadata", {}), ds.get("status", {})
        if st.get("observedGeneration", md.get("generation", 0)) < md.get("generation", 0):
            stale.append(name_of(ds))
    monitoring = [o for o in MONITORING if o in enabled and snap.daemonset(o.daemonset)]
    for node in snap.gpu_nodes:
        n = name_of(node)
        labels = labels_of(node)
        problems: dict[str, str] = {}
        waiting: dict[str, str] = {}
        for o in monitoring:
            if labels.get(o.deploy_label) != "true":
                continue  # not scheduled here by design (deploy-labels layer reports why)
            pod = inp.operand_pod(o, n)
            if pod is None or pod_ready(pod):
                continue  # a missing pod is the deploy-labels layer's finding (LBL-002)
            sp = start_problem(inp, pod)
            if sp is not None and sp.kind != "image":
                waiting[o.daemonset] = f"{pod_status_text(pod)}, refused by the container runtime (see DRV-006)"
                continue
            if sp is not None and sp.container in GATES:
                # The gate init containers run the validator image: the validator's own check names the pull.
                waiting[o.daemonset] = f"{pod_status_text(pod)}, cannot pull the validator image (see DRV-004)"
                continue
            if sp is not None:
                problems[o.daemonset] = f"{name_of(pod)} cannot pull its image ({sp.reason}): {sp.message}"
                continue
            if awaits_toolkit(inp, pod):
                # Refused its sandbox while the node's toolkit is not Ready: no nvidia handler yet, by design.
                waiting[o.daemonset] = f"{pod_status_text(pod)}, no sandbox before the toolkit is Ready"
                continue
            stuck = stuck_init_container(pod)
            if stuck and stuck["name"] in GATES:
                waiting[o.daemonset] = f"{pod_status_text(pod)}, waiting in {stuck['name']}"
            else:
                # DCGM and the DCGM exporter have readiness/liveness probes (v26.3+ assets): kubelet's words first.
                bad = failing_container(pod)
                said = quote_probe_failures(probe_failures(snap, pod, bad["name"])) if bad else ""
                problems[o.daemonset] = (f"{name_of(pod)} {pod_status_text(pod)} ({restart_count(pod)} restarts)"
                                         f"{said}")
        if problems:
            # The MIG manager lays out the GPUs pods get: on the GPU path, unlike DCGM and the exporters.
            on_path = MIG_MANAGER.daemonset in problems
            findings.append(Finding(Status.FAIL,
                                    "monitoring operand not healthy on this node: "
                                    + "; ".join(f"{k}: {v}" for k, v in problems.items())
                                    + ("" if on_path else " (off the GPU path: later layers are still judged)"),
                                    node=n, evidence={"pods": problems, "waiting_on_gates": waiting},
                                    kubectl=f"kubectl -n {snap.operator_namespace} get pods -o wide "
                                            f"--field-selector spec.nodeName={n}",
                                    gpu_path=True if on_path else None))
        elif waiting:
            findings.append(Finding(Status.WARN,
                                    "operands waiting on an earlier stage (see driver-toolkit): "
                                    + "; ".join(f"{k}: {v}" for k, v in waiting.items()),
                                    node=n, evidence={"waiting_on_gates": waiting}))
        else:
            findings.append(Finding(Status.PASS, "operand rollout healthy on this node", node=n))
    if stale:
        findings.append(cluster_finding(Status.WARN,
                                        f"rollout in progress (observedGeneration < generation): {', '.join(stale)}",
                                        daemonsets=stale))
    return findings
