"""Layer 2, nfd: which nodes are GPU nodes, by NFD's PCI labels and the operator's gpu.present label."""

from __future__ import annotations

from gpu_conformance import nfd_pci_labels as pci
from gpu_conformance import upgrade_states as upg
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.common import cluster_finding
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.podstate import pod_ready, pod_status_text
from gpu_conformance.cluster.snapshot import (
    GPU_PRESENT_LABEL,
    NFD_GPU_LABELS,
    has_nfd_gpu_label,
    labels_of,
    name_of,
)
from gpu_conformance.model import Finding, Layer, Status

L = Layer.NFD
NFD_PREFIX = "feature.node.kubernetes.io/"


def _role(pod: dict) -> str:
    labels = labels_of(pod)
    if labels.get("role"):
        return labels["role"]
    name = name_of(pod)
    return next((r for r in ("master", "worker", "gc") if f"-{r}-" in name or name.endswith(f"-{r}")), "")


@check("NFD-001", L, "GPU nodes exist",
       hint="GPU nodes are found by NFD labels feature.node.kubernetes.io/pci-10de.present (operator's NFD) or "
            "pci-0302_10de / pci-0300_10de (stock NFD). None means NFD is not running, not labelling, or the "
            "node selector excludes every node.",
       kubectl="kubectl get nodes -L feature.node.kubernetes.io/pci-10de.present,nvidia.com/gpu.present",
       detects="zero GPU nodes (NFD never labelled anything, or labels the GPUs in a shape the operator does not "
               "read)")
def gpu_nodes_exist(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    n = len(snap.gpu_nodes)
    if n == 0:
        sel = f" matching --gpu-node-selector {snap.gpu_node_selector!r}" if snap.gpu_node_selector else ""
        # Nodes NFD labels in a shape the operator does not read: NFD's configuration, not the hardware, hides them.
        unread = {name_of(node): pci.unread_pci_labels(labels_of(node)) for node in snap.nodes}
        unread = {k: v for k, v in unread.items() if v[0] or v[1]}
        why = ""
        if unread:
            first, (nvidia, vendorless) = next(iter(unread.items()))
            why = f"; on {len(unread)} node(s) (e.g. {first}) " + pci.explain(nvidia, vendorless)
        return [cluster_finding(Status.FAIL,
                                f"no GPU node found{sel}: no node has an NFD NVIDIA PCI label or "
                                f"{GPU_PRESENT_LABEL}; {len(snap.nodes)} nodes in the cluster{why}",
                                labels=list(NFD_GPU_LABELS), nodes_total=len(snap.nodes),
                                unread_pci_labels={k: v[0] + v[1] for k, v in unread.items()})]
    return [cluster_finding(Status.PASS, f"{n} GPU node(s) of {len(snap.nodes)}",
                            gpu_nodes=snap.gpu_node_names[:50])]


@check("NFD-002", L, "NFD master and a worker on each GPU node are running",
       hint="nfd-worker labels its own node; a node without a running worker loses its PCI labels when "
            "nfd-gc removes its NodeFeature, and the operator then withdraws every operand from it.",
       kubectl="kubectl get pods -A -l app.kubernetes.io/name=node-feature-discovery -o wide",
       detects="NFD worker missing or broken on a node; NFD master down")
def nfd_pods_running(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    if not snap.nfd_pods:
        # NFD may be installed separately under other labels; the PCI labels are what matters (NFD-003).
        return [cluster_finding(Status.NA,
                                "no NFD pods labelled app.kubernetes.io/name=node-feature-discovery "
                                "(NFD not deployed by the operator chart); judging by node labels only")]
    findings: list[Finding] = []
    masters = [p for p in snap.nfd_pods if _role(p) == "master"]
    if masters and not any(pod_ready(p) for p in masters):
        states = ", ".join(f"{name_of(p)} {pod_status_text(p)}" for p in masters)
        findings.append(cluster_finding(Status.FAIL, f"NFD master not ready: {states}",
                                        pods=[name_of(p) for p in masters]))
    workers = [p for p in snap.nfd_pods if _role(p) == "worker"]
    by_node = {p.get("spec", {}).get("nodeName"): p for p in workers}
    for n in snap.gpu_node_names:
        w = by_node.get(n)
        if w is None:
            findings.append(Finding(Status.FAIL, "no NFD worker pod on this node", node=n,
                                    evidence={"observed": "no nfd-worker pod", "expected": "one Ready nfd-worker"}))
        elif not pod_ready(w):
            findings.append(Finding(Status.FAIL, f"NFD worker {name_of(w)} is {pod_status_text(w)}",
                                    node=n, evidence={"pod": name_of(w), "status": pod_status_text(w)}))
        else:
            findings.append(Finding(Status.PASS, f"NFD worker {name_of(w)} ready", node=n))
    return findings


@check("NFD-003", L, "NFD PCI label and nvidia.com/gpu.present agree",
       hint="nvidia.com/gpu.present only says the hardware was detected. The operator sets it from NFD's PCI "
            "label, and to 'false' when that label disappears: the GPU is gone from the PCI bus (fallen off the bus, "
            "XID 79; check `lspci -d 10de:` and the kernel log on the node) or NFD stopped labelling the node.",
       kubectl="kubectl get node {node} --show-labels",
       detects="a GPU node that lost its NFD PCI label (gpu.present=false): GPU gone from the PCI bus, NFD "
               "not labelling it, or NFD labelling it in a shape the operator does not read (deviceLabelFields "
               "with a device id, or without the vendor); a label set by hand without NFD")
def nfd_labels_consistent(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    findings = []
    for node in snap.gpu_nodes:
        n, labels = name_of(node), labels_of(node)
        nfd = has_nfd_gpu_label(node)
        present = labels.get(GPU_PRESENT_LABEL)
        nfd_found = [k for k in NFD_GPU_LABELS if labels.get(k) == "true"]
        ev = {"nfd_labels": nfd_found, GPU_PRESENT_LABEL: present}
        if nfd and present == "true":
            findings.append(Finding(Status.PASS, f"{nfd_found[0].split('/')[-1]} and gpu.present=true",
                                    node=n, evidence=ev))
        elif nfd:
            findings.append(Finding(Status.FAIL,
                                    f"NFD found an NVIDIA GPU but {GPU_PRESENT_LABEL}={present or '<absent>'}: "
                                    "the operator has not labelled this node (is it running?)", node=n, evidence=ev))
        elif (shape := pci.explain(*pci.unread_pci_labels(labels))):
            # NFD sees the GPU but labels it in a shape the operator does not read: its configuration, not the
            # hardware (with gpu.present=false the operator has withdrawn every operand, as for a GPU gone).
            nvidia, vendorless = pci.unread_pci_labels(labels)
            withdrawn = (" — the operator's mark of a GPU node that lost NFD's label, so it withdrew every operand"
                         if present == "false" else "")
            findings.append(Finding(Status.FAIL,
                                    f"{GPU_PRESENT_LABEL}={present or '<absent>'} and no NFD NVIDIA PCI label the "
                                    f"operator reads{withdrawn}: {shape}", node=n,
                                    evidence={**ev, "cause": "nfd-label-shape",
                                              "unread_pci_labels": nvidia + vendorless}))
        elif present == "false":
            # The operator writes false when a node it labelled loses NFD's PCI label (state_manager.go
            # labelGPUNodes: "Node no longer has GPUs"). Whether NFD still labels the node tells which loss it is.
            features = [k for k in labels if k.startswith(NFD_PREFIX)]
            worker = next((p for p in snap.nfd_pods if _role(p) == "worker"
                           and p.get("spec", {}).get("nodeName") == n), None)
            worker_down = bool(snap.nfd_pods) and (worker is None or not pod_ready(worker))
            if features and not worker_down:
                why = (f"NFD still labels this node ({len(features)} feature labels) but no longer sees an NVIDIA PCI "
                       "device: the GPU is gone from the PCI bus (fallen off the bus, XID 79, or removed) — a "
                       "hardware/node fault; `lspci -d 10de:` and the kernel log on the node say which")
                cause = "gpu-gone-from-pci"
            else:
                why = ("NFD stopped labelling it (its nfd-worker is not running: see NFD-002)" if worker_down else
                       "the node carries no NFD label at all: NFD stopped labelling it (worker down, or nfd-gc "
                       "removed its NodeFeature)")
                cause = "nfd-not-labelling"
            findings.append(Finding(Status.FAIL,
                                    f"{GPU_PRESENT_LABEL}=false and no NFD NVIDIA PCI label — the operator's mark "
                                    f"of a GPU node that lost it, so it withdrew every operand: {why}", node=n,
                                    evidence={**ev, "cause": cause, "nfd_feature_labels": len(features)}))
        else:
            findings.append(Finding(Status.FAIL,
                                    f"GPU evidence ({GPU_PRESENT_LABEL}={present or '<absent>'}, GFD labels or GPU "
                                    "capacity) but no NFD NVIDIA PCI label: set by hand, or NFD is not labelling",
                                    node=n, evidence=ev))
    return findings


# Conditions that mean trouble when True (Ready means trouble when not True).
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
# Taints the node controller sets for those conditions.
HEALTH_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                 "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
                 "node.kubernetes.io/pid-pressure", "node.kubernetes.io/network-unavailable")


def _conditions(node: dict) -> dict[str, dict]:
    return {c.get("type", ""): c for c in node.get("status", {}).get("conditions") or []}


@check("NFD-004", L, "GPU node is healthy: Ready, no pressure, schedulable",
       hint="A node that is NotReady or Unknown has a kubelet or container runtime that stopped working (the node "
            "controller then taints it not-ready/unreachable); every operand pod on it looks broken as a "
            "consequence. Fix the node first: `systemctl status kubelet containerd` and `journalctl -u kubelet` "
            "on it. A cordoned node is reported, not failed, and not probed; its operands are still judged, so a "
            "broken driver under a cordon (e.g. driver upgrade state upgrade-failed) is its root cause.",
       kubectl="kubectl describe node {node} | sed -n '/Conditions:/,/Addresses:/p'",
       detects="GPU node NotReady/Unknown (kubelet or runtime down), under memory/disk/PID pressure or network "
               "unavailable; cordoned nodes and nodes excluded with gpu.deploy.operands=false reported",
       gate=True)
def node_health(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    findings = []
    for node in snap.excluded_gpu_nodes:
        n, labels = name_of(node), labels_of(node)
        findings.append(Finding(Status.WARN, "excluded from the GPU Operator by its admin "
                                f"(nvidia.com/gpu.deploy.operands=false, {GPU_PRESENT_LABEL}="
                                f"{labels.get(GPU_PRESENT_LABEL, '<absent>')}): not judged", node=n,
                                evidence={"object": f"Node/{n}", "field": "metadata.labels", "excluded": True}))
    for node in snap.gpu_nodes:
        n = name_of(node)
        conds = _conditions(node)
        ready = conds.get("Ready", {})
        taints = [t for t in node.get("spec", {}).get("taints") or [] if t.get("key") in HEALTH_TAINTS]
        ev = {"object": f"Node/{n}", "field": "status.conditions",
              "observed": {t: {k: c.get(k) for k in ("status", "reason", "message")} for t, c in conds.items()
                           if (t == "Ready") or c.get("status") == "True"},
              "expected": "Ready=True, no pressure", "taints": [f"{t.get('key')}:{t.get('effect')}" for t in taints]}
        if ready.get("status") != "True":
            what = "Unknown (the kubelet stopped reporting)" if ready.get("status") == "Unknown" else "NotReady"
            said = ": ".join(x for x in (ready.get("reason"), ready.get("message")) if x)
            findings.append(Finding(Status.FAIL, f"node is {what}" + (f" — {said}" if said else "")
                                    + ": every GPU operand on it is down as a consequence", node=n, evidence=ev))
            continue
        bad = [(t, c) for t, c in conds.items() if t in PRESSURE_CONDITIONS and c.get("status") == "True"]
        if bad:
            parts = [f"{t}" + (f" ({c.get('message')})" if c.get("message") else "") for t, c in bad]
            findings.append(Finding(Status.FAIL, f"node under {', '.join(parts)}: the kubelet evicts or refuses "
                                    "pods, GPU operands included", node=n, evidence=ev))
            continue
        if node.get("spec", {}).get("unschedulable"):
            state = upg.upgrade_state(labels_of(node))
            by = (f" by the driver upgrade ({upg.UPGRADE_STATE_LABEL}={state})"
                  if state in upg.STATES and upg.STATES[state].cordoned else "")
            findings.append(Finding(Status.WARN, f"node is cordoned (spec.unschedulable){by}: running GPU pods keep "
                                    "their GPUs, but no new pod lands here, so it is not probed; its operands are "
                                    "judged as on any node", node=n,
                                    evidence={**ev, "field": "spec.unschedulable", "observed": True,
                                              "expected": False, "cordoned": True,
                                              upg.UPGRADE_STATE_LABEL: state,
                                              # Maintenance, not a break: a pause (no probe). The later layers are
                                              # still judged, and a broken component there is the root cause.
                                              "transient": True}))
            continue
        findings.append(Finding(Status.PASS, "node Ready, no pressure, schedulable", node=n, evidence=ev))
    if not findings:
        return [Finding(Status.NA, "no GPU nodes (see NFD-001)")]
    return findings
