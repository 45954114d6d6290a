"""Running one registered check over factory data, and asserting where it lands (shared by the layer tests)."""

from __future__ import annotations

from gpu_conformance.check_input import check_input
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.model import Finding, Status
from gpu_conformance.probe.observations import ProbeObservations
from gpu_conformance.settings import Settings

N1 = "gpu-node-1"


def run(check_id: str, snap, probe: ProbeObservations | None = None, **settings) -> list[Finding]:
    """The check's findings on an input built the way the session builds it (check_input), with `probe` as the
    probe's observations (None: no probe ran)."""
    return REGISTRY[check_id].run(check_input(snap, Settings(**settings), probe))


def on(check_id: str, snap, node: str = N1, **settings) -> Finding:
    """The check's one finding about `node`."""
    found = [f for f in run(check_id, snap, **settings) if f.node == node]
    assert len(found) == 1, found
    return found[0]


def cluster(check_id: str, snap, **settings) -> Finding:
    """The check's one cluster-wide finding."""
    findings = run(check_id, snap, **settings)
    assert len(findings) == 1 and findings[0].node is None, findings
    return findings[0]


def only_node(check_id: str, snap, node: str = N1, status: Status = Status.FAIL, **settings) -> Finding:
    """Every GPU node gets a finding, and only `node`'s is neither pass nor n/a (it has `status`)."""
    findings = run(check_id, snap, **settings)
    assert {f.node for f in findings} == set(snap.gpu_node_names)
    bad = [f for f in findings if f.status not in (Status.PASS, Status.NA)]
    assert [(f.node, f.status) for f in bad] == [(node, status)], [f.message for f in bad]
    return bad[0]
