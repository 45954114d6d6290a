"""From findings to verdicts: per GPU node the first failing layer is the root cause, later layers are blocked.

Two relations refine the layer order, both following the operator's own dependencies: a finding `explained_by` a
check that fails defers to it (that check is the root cause, whatever its layer), and a check off the GPU path
(monitoring) fails without blocking the layers after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_conformance.model import LAYER_ORDER, STATUS_SEVERITY, Check, Finding, Layer, Status, worst

CONFORMANT = "CONFORMANT"
NOT_CONFORMANT = "NOT CONFORMANT"
INCOMPLETE = "INCOMPLETE"


@dataclass(frozen=True)
class RootCause:
    layer: Layer
    check_id: str
    message: str
    # From a gate check (node health): every other failure on the node is its consequence, whatever its layer.
    gate: bool = False
    # A pause (cordon, driver upgrade step, MIG change), not a break: it holds back only the probe.
    pause: bool = False
    # Off the GPU path (monitoring): the node's root cause only because nothing on the path failed; blocks nothing.
    off_path: bool = False

    def covers(self, check: Check) -> bool:
        """Whether a failure of `check` on this node is explained by (blocked behind) this root cause."""
        if check.id == self.check_id or self.off_path:
            return False
        if self.pause:
            # A paused node is still judged layer by layer (a broken component under a pause is its root cause);
            # only the probe, which needs a schedulable node with its operands in place, waits for the pause.
            return check.layer == Layer.PROBE
        return self.gate or self.layer.index < check.layer.index

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"layer": str(self.layer), "check": self.check_id, "message": self.message}
        if self.off_path:
            d["off_gpu_path"] = True
        return d

    def sentence(self) -> str:
        return f"{self.layer} ({self.check_id}): {self.message}"


@dataclass
class NodeVerdict:
    node: str
    layers: dict[Layer, Status] = field(default_factory=dict)
    root_cause: RootCause | None = None
    # A transient state (cordon, driver upgrade step, MIG change), recorded whatever the layers say. It makes the
    # node INCOMPLETE (not probed) only while no layer fails: a failure under a pause is still the root cause.
    transient: RootCause | None = None

    @property
    def gpu_path_clear(self) -> bool:
        """Nothing on the GPU path failed or paused here (an off-path failure does not stop the probe)."""
        return (self.root_cause is None or self.root_cause.off_path) and self.transient is None

    @property
    def stop(self) -> RootCause | None:
        """What ends this node's chain: a root cause, else a pause (which holds back only the probe)."""
        return self.root_cause or self.transient

    def blocked_reason(self) -> str:
        if self.root_cause:
            return f"blocked by {self.root_cause.layer}: {self.root_cause.message}"
        if self.transient:
            return f"paused ({self.transient.layer}): {self.transient.message}"
        return ""


@dataclass
class CheckOutcome:
    """How one check ends as a test: fail where it is the root cause, skip where an earlier layer broke."""

    check: Check
    status: Status
    findings: list[Finding]
    failing_nodes: list[str] = field(default_factory=list)
    blocked_nodes: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class Verdict:
    nodes: list[NodeVerdict]
    cluster_blocker: RootCause | None
    outcomes: dict[str, CheckOutcome]
    layers_run: list[Layer]

    @property
    def overall(self) -> str:
        if self.cluster_blocker or any(o.status == Status.FAIL for o in self.outcomes.values()):
            return NOT_CONFORMANT
        if any(n.root_cause for n in self.nodes):
            return NOT_CONFORMANT
        if set(self.layers_run) != set(LAYER_ORDER) or not self.nodes or any(n.transient for n in self.nodes):
            return INCOMPLETE
        return CONFORMANT

    def layer_counts(self) -> dict[Layer, dict[str, int]]:
        counts: dict[Layer, dict[str, int]] = {}
        for layer in LAYER_ORDER:
            c = {str(s): 0 for s in Status}
            for n in self.nodes:
                c[str(n.layers.get(layer, Status.NA))] += 1
            counts[layer] = c
        return counts


def _first_fail(findings: list[Finding], check_order: dict[str, int]) -> Finding | None:
    fails = [f for f in findings if f.status == Status.FAIL]
    if not fails:
        return None
    # Node-specific evidence explains a node better than a cluster-wide line, at equal check order.
    return sorted(fails, key=lambda f: (check_order.get(f.check_id, 999), f.node is None))[0]


def decide(
    checks: list[Check],
    findings: list[Finding],
    gpu_nodes: list[str],
    layers_run: list[Layer] | None = None,
) -> Verdict:
    """Per GPU node: a failing gate check (node health) first, else the first failing layer, is the root cause.

    No node is exempt: a pause (a transient warning: cordon, driver upgrade step, paused deploy label, MIG change)
    is recorded and holds back the probe, but every layer is still judged; the node is paused (INCOMPLETE) only
    when none fails. What a pause explains the checks themselves report as warnings.

    A cluster-wide failure stops every node only when it is `blocking` (no CRD, no ClusterPolicy, operator down);
    a non-blocking one (operand states notReady that no node explains) fails its check without hiding the nodes.
    """
    layers_run = layers_run or list(LAYER_ORDER)
    check_order = {c.id: i for i, c in enumerate(sorted(checks, key=lambda c: (c.layer.index, c.rank, c.id)))}
    by_id = {c.id: c for c in checks}
    gate_ids = {c.id for c in checks if c.gate}

    # Where each check fails, and what its failures name as their explanation: `explained_by` is followed only to
    # a check that fails there and does not itself claim to be explained by this one (no cycle hides both).
    failing_at: dict[str, dict[str | None, str]] = {}
    claims: dict[str, set[str]] = {}
    for f in findings:
        if f.status == Status.FAIL:
            failing_at.setdefault(f.check_id, {}).setdefault(f.node, f.message)
            claims.setdefault(f.check_id, set()).update(f.explained_by)

    def explainer(f: Finding) -> tuple[str, str] | None:
        """The failing check (and its message) that explains failing finding f: on f's node or cluster-wide; for a
        cluster-wide finding, on any node."""
        if f.status != Status.FAIL:
            return None
        for x in f.explained_by:
            where = failing_at.get(x, {})
            if f.check_id in claims.get(x, set()):
                continue
            for at in ((f.node, None) if f.node is not None else (None, *sorted(k for k in where if k))):
                if at in where:
                    return x, where[at]
        return None

    cluster_findings: dict[Layer, list[Finding]] = {layer: [] for layer in LAYER_ORDER}
    node_findings: dict[str, dict[Layer, list[Finding]]] = {n: {layer: [] for layer in LAYER_ORDER}
                                                            for n in gpu_nodes}
    for f in findings:
        layer = by_id[f.check_id].layer
        if f.node is None:
            # A non-blocking cluster finding speaks for no node in particular: it only decides its own check.
            if f.blocking or f.status != Status.FAIL:
                cluster_findings[layer].append(f)
        elif f.node in node_findings:
            node_findings[f.node][layer].append(f)
        # Findings on nodes outside the GPU set (e.g. a CPU node wrongly labelled) only count per check.

    cluster_blocker: RootCause | None = None
    for layer in LAYER_ORDER:
        ff = _first_fail([f for f in cluster_findings[layer] if explainer(f) is None], check_order)
        if ff:
            cluster_blocker = RootCause(layer, ff.check_id, ff.message)
            break

    nodes: list[NodeVerdict] = []
    for n in gpu_nodes:
        nv = NodeVerdict(node=n)
        gate_fail = _first_fail([f for fs in node_findings[n].values() for f in fs if f.check_id in gate_ids],
                                check_order)
        if gate_fail is not None and (cluster_blocker is None
                                      or cluster_blocker.layer.index > by_id[gate_fail.check_id].layer.index):
            nv.root_cause = RootCause(by_id[gate_fail.check_id].layer, gate_fail.check_id, gate_fail.message,
                                      gate=True)
        off_path: RootCause | None = None
        for layer in LAYER_ORDER:
            if nv.root_cause is not None and nv.root_cause.gate:
                nv.layers[layer] = Status.FAIL if layer == nv.root_cause.layer else Status.BLOCKED
                continue
            if nv.root_cause is not None or (layer == Layer.PROBE and nv.transient is not None):
                nv.layers[layer] = Status.BLOCKED
                continue
            if layer not in layers_run:
                nv.layers[layer] = Status.NA
                continue
            fs = node_findings[n][layer] + cluster_findings[layer]
            # A failure another failing check explains is that check's consequence: blocked, never a root cause.
            judged = [f for f in fs if explainer(f) is None]
            status = worst({f.status for f in judged} | ({Status.BLOCKED} if len(judged) < len(fs) else set())) \
                if fs else Status.NA
            nv.layers[layer] = status
            on_path = [f for f in judged if by_id[f.check_id].on_gpu_path(f)]
            ff = _first_fail(on_path, check_order)
            if ff is not None:
                nv.root_cause = RootCause(layer, ff.check_id, ff.message)
            else:
                if status == Status.FAIL and off_path is None:
                    # Only off-path checks failed here: remembered, and the GPU path is judged on.
                    off = _first_fail(judged, check_order)
                    if off is not None:
                        off_path = RootCause(layer, off.check_id, off.message, off_path=True)
                if nv.transient is None:
                    # Recorded, and the node's later layers still judged: what the pause itself explains the
                    # checks already report as a warning; anything else failing there is the node's root cause.
                    tr = next((f for f in fs if f.status == Status.WARN and f.evidence.get("transient")), None)
                    if tr is not None:
                        nv.transient = RootCause(layer, tr.check_id, tr.message, pause=True)
        if nv.root_cause is None and off_path is not None:
            nv.root_cause = off_path
        nodes.append(nv)
    node_by_name = {nv.node: nv for nv in nodes}

    def all_stopped_before(c: Check) -> RootCause | None:
        """Every GPU node stopped by something that explains c's failures; the first such cause."""
        stops = [node_by_name[n].stop for n in gpu_nodes]
        if gpu_nodes and all(st is not None and st.covers(c) for st in stops):
            return stops[0]
        return None

    outcomes: dict[str, CheckOutcome] = {}
    # Grouped once: a scan of every finding per check was checks x findings (31 x 18,000 at 1,000 nodes).
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check_id, []).append(f)
    for c in checks:
        fs = by_check.get(c.id, [])
        failing, blocked, reasons = [], [], []
        cluster_blocks_c = cluster_blocker is not None and cluster_blocker.layer.index < c.layer.index
        for f in fs:
            if f.status != Status.FAIL:
                continue
            if (why := explainer(f)) is not None:
                blocked.append(f.node or "<cluster>")
                reasons.append(f"explained by {by_id[why[0]].layer} ({why[0]}): {why[1]}")
                continue
            if f.node is None:
                if cluster_blocks_c:
                    blocked.append("<cluster>")
                    reasons.append(f"blocked by {cluster_blocker.layer}: {cluster_blocker.message}")  # type: ignore[union-attr]
                elif (rc0 := all_stopped_before(c)) is not None:
                    blocked.append("<cluster>")
                    reasons.append(f"every GPU node is blocked by an earlier layer, e.g. {rc0.layer}: {rc0.message}")
                else:
                    failing.append("<cluster>")
                continue
            nv = node_by_name.get(f.node)
            rc = nv.stop if nv else None
            if nv is not None and rc is not None and rc.covers(c):
                blocked.append(f.node)
                reasons.append(nv.blocked_reason())
            elif cluster_blocks_c:
                blocked.append(f.node)
                reasons.append(f"blocked by {cluster_blocker.layer}: {cluster_blocker.message}")  # type: ignore[union-attr]
            else:
                failing.append(f.node)
        stopped = all_stopped_before(c)
        if failing:
            status = Status.FAIL
            reason = ""
        elif cluster_blocks_c:
            # Whatever this check saw, it cannot speak for a cluster whose earlier layer is broken.
            status, reason = Status.BLOCKED, f"blocked by {cluster_blocker.layer}: {cluster_blocker.message}"  # type: ignore[union-attr]
        elif stopped is not None and c.layer in layers_run and not c.gate:
            status, reason = Status.BLOCKED, f"every GPU node is blocked by an earlier layer, e.g. {stopped.layer}: " \
                                             f"{stopped.message}"
        elif blocked:
            status = Status.BLOCKED
            reason = reasons[0]
        elif c.layer not in layers_run:
            status, reason = Status.NA, "layer not selected"
        elif fs:
            non_fail = {f.status for f in fs if f.status != Status.FAIL}
            status = max(non_fail, key=lambda s: STATUS_SEVERITY[s]) if non_fail else Status.PASS
            if status == Status.NA:
                reason = next((f.message for f in fs if f.status == Status.NA), "not applicable")
            else:
                reason = ""
        else:
            status, reason = Status.NA, "no findings (nothing to check)"
        outcomes[c.id] = CheckOutcome(c, status, fs, failing, blocked, reason)
    return Verdict(nodes=nodes, cluster_blocker=cluster_blocker, outcomes=outcomes, layers_run=layers_run)
