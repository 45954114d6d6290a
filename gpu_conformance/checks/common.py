"""Small helpers several layers share: operator version, what the policy enables, pass/fail constructors."""

from __future__ import annotations

from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.model import Finding, Status
from gpu_conformance.operands import OPERANDS, OPERATOR_DEPLOYMENT, OPERATOR_POD_LABEL, Operand, operand_enabled


def operator_deployment(snap: ClusterSnapshot) -> dict | None:
    """The Helm chart names it gpu-operator; other installs (OLM) keep the app=gpu-operator pod label."""
    dep = snap.deployment(OPERATOR_DEPLOYMENT)
    if dep:
        return dep
    key, value = OPERATOR_POD_LABEL
    for d in snap.deployments:
        tmpl = d.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}
        if tmpl.get(key) == value:
            return d
    return None


def operator_image(snap: ClusterSnapshot) -> str:
    dep = operator_deployment(snap)
    if dep:
        for c in dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
            if c.get("name") == "gpu-operator" or "gpu-operator" in c.get("image", ""):
                return c.get("image", "")
    for p in snap.operator_pods:
        for c in p.get("spec", {}).get("containers") or []:
            return c.get("image", "")
    return ""


def operator_version(snap: ClusterSnapshot) -> str:
    """The operator's image tag ('v26.3.3'), or '' when unknown (checks then assume the newest behaviour)."""
    image = operator_image(snap)
    if "@" in image:
        image = image.split("@")[0]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def enabled_operands(snap: ClusterSnapshot) -> list[Operand]:
    spec = (snap.active_clusterpolicy or {}).get("spec") or {}
    return [o for o in OPERANDS if operand_enabled(o, spec)]


def node_finding(check_id: str, node: str, ok: bool, message: str, **evidence: object) -> Finding:
    return Finding(check_id, Status.PASS if ok else Status.FAIL, message, node=node, evidence=dict(evidence))


def cluster_finding(check_id: str, status: Status, message: str, **evidence: object) -> Finding:
    return Finding(check_id, status, message, node=None, evidence=dict(evidence))


def names(objs: list[dict]) -> list[str]:
    return sorted(name_of(o) for o in objs)
