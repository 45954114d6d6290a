"""Everything one run learned, in one object that every reporter reads (JSON, HTML, terminal, diff)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_conformance.model import LAYER_ORDER, Check, Finding, Status
from gpu_conformance.report_format import SCHEMA_VERSION
from gpu_conformance.verdict import Verdict


@dataclass
class RunResult:
    run_id: str
    started_at: str  # ISO 8601, UTC
    duration_seconds: float
    # server, context, kubernetes_version, requests (API calls of the snapshot), read_seconds
    cluster: dict[str, Any]
    # namespace, version (operator image tag), image, policy: {driver, toolkit, cdi, nri, mig_strategy, ...}
    operator: dict[str, Any]
    # node -> "operator" | "host" | "pre-installed" | "nvidiadriver-cr" | "unknown"
    driver_config: dict[str, str]
    checks: list[Check]
    findings: list[Finding]
    verdict: Verdict
    # pods: [{name, node, phase, output, events, logs, gpus_seen, cdi}], skipped: reason or ""
    probe: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    # The redacted schema-v1 dict, built once (report/json_report.result_dict): every reporter renders it, and
    # at 1,000 nodes building and redacting it took seconds each time. Read-only for reporters.
    redacted: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def to_json_dict(self) -> dict[str, Any]:
        """conformance.json (schema version 1; documented in the README)."""
        v = self.verdict
        by_check: dict[str, list[Finding]] = {}
        for f in self.findings:
            by_check.setdefault(f.check_id, []).append(f)
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "duration_seconds": round(self.duration_seconds, 3),
            "verdict": v.overall,
            "cluster": self.cluster,
            "operator": self.operator,
            "driver_config": self.driver_config,
            "cluster_blocker": v.cluster_blocker.to_dict() if v.cluster_blocker else None,
            "layers": [str(layer) for layer in LAYER_ORDER],
            "layers_run": [str(layer) for layer in v.layers_run],
            "summary": {str(layer): counts for layer, counts in v.layer_counts().items()},
            "checks": [
                {
                    "id": c.id,
                    "layer": str(c.layer),
                    "title": c.title,
                    "status": str(v.outcomes[c.id].status) if c.id in v.outcomes else "n/a",
                    "reason": v.outcomes[c.id].reason if c.id in v.outcomes else "",
                    "nodes": sorted({f.node for f in by_check.get(c.id, []) if f.node and str(f.status) == "fail"}),
                    "failing_nodes": v.outcomes[c.id].failing_nodes if c.id in v.outcomes else [],
                    "blocked_nodes": v.outcomes[c.id].blocked_nodes if c.id in v.outcomes else [],
                    "hint": c.hint,
                    "kubectl": c.render_kubectl(self.operator.get("namespace") or "gpu-operator", None),
                    "findings": compact_findings(by_check.get(c.id, [])),
                }
                for c in self.checks
            ],
            "nodes": [
                {
                    "name": n.node,
                    "layers": {str(layer): str(s) for layer, s in n.layers.items()},
                    "root_cause": n.root_cause.to_dict() if n.root_cause else None,
                    "transient": n.transient.to_dict() if n.transient else None,
                    "driver_config": self.driver_config.get(n.node, "unknown"),
                }
                for n in v.nodes
            ],
            "probe": self.probe,
            "settings": self.settings,
        }


# From this many passing (or n/a) per-node findings of one check on, they are stored as one group: at 1,000 nodes
# per-node pass lines made conformance.json 16 MB. Failures and warnings always keep their per-node detail.
COMPACT_FROM = 50


def compact_findings(findings: list[Finding]) -> list[dict[str, Any]]:
    """A check's findings as conformance.json stores them: per node where something is wrong, grouped where not."""
    quiet = [f for f in findings if f.node and f.status in (Status.PASS, Status.NA)]
    if len(quiet) < COMPACT_FROM:
        return [f.to_dict() for f in findings]
    out = [f.to_dict() for f in findings if not (f.node and f.status in (Status.PASS, Status.NA))]
    for status in (Status.PASS, Status.NA):
        group = [f for f in quiet if f.status == status]
        if not group:
            continue
        first = group[0]
        out.append({"check_id": first.check_id, "status": str(status), "node": None,
                    "nodes": [f.node for f in group],
                    "message": f"{len(group)} nodes, e.g. {first.node}: {first.message}",
                    "evidence": {}, "hint": "", "kubectl": "", "blocking": True, "grouped": True})
    return out
