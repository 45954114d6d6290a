"""Small helpers several layers share: what the policy enables, the operator version, finding constructors."""

from __future__ import annotations

from gpu_conformance.check_input import CheckInput
from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.facts import operator_deployment, operator_image
from gpu_conformance.model import Finding, Status
from gpu_conformance.operands import OPERANDS, Operand, operand_enabled

__all__ = ["operator_deployment", "operator_image", "operator_version", "enabled_operands", "cluster_finding",
           "names"]


def operator_version(inp: CheckInput) -> str:
    """The operator's version ('v26.3.3') from whatever the cluster says, or '' when unknown."""
    return inp.facts.operator.tag


def enabled_operands(snap: ClusterSnapshot) -> list[Operand]:
    spec = (snap.active_clusterpolicy or {}).get("spec") or {}
    return [o for o in OPERANDS if operand_enabled(o, spec)]


def cluster_finding(status: Status, message: str, **evidence: object) -> Finding:
    return Finding(status, message, node=None, evidence=dict(evidence))


def names(objs: list[dict]) -> list[str]:
    return sorted(name_of(o) for o in objs)
