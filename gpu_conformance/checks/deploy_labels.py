"""Layer 3, deploy-labels: nvidia.com/gpu.deploy.* on each GPU node, and DaemonSets placed accordingly."""

from __future__ import annotations

from gpu_conformance import upgrade_states as upg
from gpu_conformance import versions
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.common import enabled_operands
from gpu_conformance.checks.pods import UPGRADE_BRINGUP, why_no_pod
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.snapshot import labels_of, name_of
from gpu_conformance.facts import operand_daemonsets
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.operands import (
    DEPLOY_PREFIX,
    DRIVER,
    OPERANDS,
    expected_deploy_labels,
)
from gpu_conformance.resource_model import ResourceModel

L = Layer.DEPLOY_LABELS
# v26.7.0's GPUCluster stack labels nodes with its own deploy labels (controllers/state_manager.go
# gpuClusterStateLabels: gpu.deploy.driver, dra-driver, dra-validator, dcgm-dra, dcgm-exporter-dra).
GPUCLUSTER_LABELS = ("the GPUCluster stack's deploy labels (nvidia.com/gpu.deploy.dra-driver, dra-validator, "
                     "dcgm-dra, dcgm-exporter-dra) gate its own DaemonSets; a node without the kubelet plugin "
                     "fails DPL-010")
UPGRADE_STATE_LABEL = upg.UPGRADE_STATE_LABEL


def _mig_capable(labels: dict[str, str]) -> bool:
    if labels.get("nvidia.com/mig.capable") in ("true", "false"):
        return labels["nvidia.com/mig.capable"] == "true"
    product = labels.get("nvidia.com/gpu.product", "").lower()
    return any(m in product for m in ("h100", "a100", "a30"))


@check("LBL-001", L, "deploy labels present with healthy values",
       hint="The operator adds every nvidia.com/gpu.deploy.* label as 'true' and never overwrites a value: "
            "'false' is an admin opt-out, 'pre-installed' on driver means a host driver was detected, "
            "'paused-for-*' is a driver upgrade or MIG change in progress.",
       kubectl="kubectl get node {node} -o json | grep -o 'nvidia.com/gpu.deploy[^,]*'",
       detects="deploy labels missing (operator not labelling); opt-outs and pauses reported",
       na_in=(ResourceModel.GPUCLUSTER,), na_why=GPUCLUSTER_LABELS)
def deploy_labels_present(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    version = inp.facts.operator.parsed
    enabled_labels = {o.deploy_label: o for o in enabled_operands(snap)}
    findings = []
    for node in snap.gpu_nodes:
        n, labels = name_of(node), labels_of(node)
        expected = expected_deploy_labels(version, _mig_capable(labels))
        values = {k: labels.get(k) for k in expected}
        missing = [k for k, v in values.items() if v is None or v == ""]
        opted_out = [k for k, v in values.items() if v == "false" and k in enabled_labels]
        paused = [f"{k}={v}" for k, v in values.items() if v and "paused-for-" in v]
        odd = [f"{k}={v}" for k, v in values.items()
               if v not in (None, "", "true", "false") and "paused-for-" not in v
               and not (k == DRIVER.deploy_label and v == "pre-installed")]
        ev = {"labels": {k.removeprefix(DEPLOY_PREFIX): v for k, v in values.items()},
              "expected_for_version": versions.text(version)}
        if missing:
            short = ", ".join(k.removeprefix(DEPLOY_PREFIX) for k in missing)
            findings.append(Finding(Status.FAIL, f"deploy labels missing: {short}", node=n, evidence=ev))
        elif odd:
            findings.append(Finding(Status.FAIL, f"unexpected deploy label values: {', '.join(odd)}",
                                    node=n, evidence=ev))
        elif paused:
            upgrade = labels.get(UPGRADE_STATE_LABEL)
            findings.append(Finding(Status.WARN,
                                    "transient: " + ", ".join(p.removeprefix(DEPLOY_PREFIX) for p in paused)
                                    + (f" (driver upgrade state {upgrade})" if upgrade else ""),
                                    node=n, evidence={**ev, UPGRADE_STATE_LABEL: upgrade, "transient": True}))
        elif opted_out:
            short = ", ".join(k.removeprefix(DEPLOY_PREFIX) for k in opted_out)
            findings.append(Finding(Status.WARN,
                                    f"opted out on this node although the ClusterPolicy enables it: {short}=false",
                                    node=n, evidence=ev))
        else:
            extra = " (driver=pre-installed: host driver detected)" if values.get(DRIVER.deploy_label) == \
                "pre-installed" else ""
            findings.append(Finding(Status.PASS, f"{len(expected)} deploy labels set{extra}",
                                    node=n, evidence=ev))
    return findings


@check("LBL-002", L, "each operand DaemonSet runs exactly on the nodes labelled for it",
       hint="Each operand DaemonSet selects nodes with its deploy label = 'true'. A labelled node without "
            "the pod usually means an untolerated taint or an edited nodeSelector; a pod on an unlabelled "
            "node means the selector was changed.",
       kubectl="kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node}",
       detects="an operand pod missing on a node labelled for it, or running where it should not")
def daemonsets_match_labels(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    problems: dict[str, list[str]] = {}
    for o in OPERANDS:
        dss = operand_daemonsets(snap, o)
        if not dss:
            continue  # existence is OPR-006's question
        on_nodes = {p.get("spec", {}).get("nodeName") for p in inp.operand_pods(o)
                    if not p.get("metadata", {}).get("deletionTimestamp")}
        for node in snap.gpu_nodes:
            n = name_of(node)
            labelled = labels_of(node).get(o.deploy_label) == "true"
            # The MPS control daemon-style extra selectors do not apply to these operands.
            mode = inp.facts.driver_modes.get(n)
            if labelled and n not in on_nodes and o is DRIVER and mode is not None and mode.problem:
                # NVIDIADriver CRs place the driver by their own nodeSelector: the CR's condition (DRV-001) says why
                # no driver pod is here better than the deploy label can.
                continue
            if labelled and n not in on_nodes and upg.upgrade_state(labels_of(node)) in UPGRADE_BRINGUP:
                continue  # the driver upgrade step is bringing its operands back (DRV-002 says which step)
            if labelled and n not in on_nodes:
                why = why_no_pod(snap, dss[0], n)
                problems.setdefault(n, []).append(f"{o.daemonset}: label true but no pod"
                                                  + (f" ({why})" if why else ""))
            elif not labelled and n in on_nodes and "paused-for-" not in (labels_of(node).get(o.deploy_label) or ""):
                # A paused label withdraws the pod: the DaemonSet controller is deleting it, not misplacing it.
                problems.setdefault(n, []).append(
                    f"{o.daemonset}: pod runs although {o.deploy_label.removeprefix(DEPLOY_PREFIX)}="
                    f"{labels_of(node).get(o.deploy_label) or '<absent>'}")
    findings = []
    for n in snap.gpu_node_names:
        if n in problems:
            findings.append(Finding(Status.FAIL, "; ".join(problems[n]), node=n,
                                    evidence={"mismatches": problems[n]}))
        else:
            findings.append(Finding(Status.PASS, "operand pods match the deploy labels", node=n))
    return findings
