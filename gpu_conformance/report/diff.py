"""What changed between two runs (two conformance.json dicts): `report diff OLD NEW` and --baseline.

The question a person asks after an upgrade or a fix is "what broke, what got fixed, and did anything move",
so the diff compares verdicts, checks and per-node root causes, and the context that explains them
(operator version, ClusterPolicy switches, driver setup). Messages are not compared: they carry pod names
and timestamps that change on every run; a root cause "changed" only when its layer or check did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpu_conformance.report.common import (
    compress_names,
    format_value,
    layer_rank,
    natural_key,
    node_sorted,
    root_cause_sentence,
)
from gpu_conformance.report.redact import redact_text

CLUSTER = "<cluster>"
# Node changes of one kind shared by more than this many nodes are printed as one line with a name range.
GROUP_NODES_ABOVE = 3


@dataclass(frozen=True)
class ValueChange:
    what: str
    old: Any
    new: Any


@dataclass(frozen=True)
class CheckChange:
    check_id: str
    layer: str
    title: str
    # "absent" when the check was not in that run (a newer catalogue).
    old_status: str
    new_status: str
    # newly_failing: the nodes failing now that were not before; fixed: the nodes that recovered.
    # "<cluster>" stands for a cluster-wide finding.
    nodes: list[str]


@dataclass(frozen=True)
class NodeChange:
    node: str
    # "new failure" | "fixed" | "changed" | "added" | "removed"
    kind: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None


@dataclass
class RunDiff:
    old_run: str = ""
    new_run: str = ""
    verdict: ValueChange | None = None
    cluster: ValueChange | None = None
    cluster_blocker: ValueChange | None = None
    operator_version: ValueChange | None = None
    kubernetes_version: ValueChange | None = None
    policy: list[ValueChange] = field(default_factory=list)
    # what = node name; old/new = "operator" | "host" | ... | None (node not in that run)
    driver_config: list[ValueChange] = field(default_factory=list)
    newly_failing: list[CheckChange] = field(default_factory=list)
    fixed: list[CheckChange] = field(default_factory=list)
    nodes: list[NodeChange] = field(default_factory=list)

    @property
    def has_changes(self) -> bool:
        return any([self.verdict, self.cluster, self.cluster_blocker, self.operator_version,
                    self.kubernetes_version, self.policy, self.driver_config, self.newly_failing,
                    self.fixed, self.nodes])

    @property
    def regressed(self) -> bool:
        """Something got worse: a CLI can exit non-zero on this for --baseline."""
        return bool(self.newly_failing) or any(n.kind in ("new failure", "changed") for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _change(what: str, old: Any, new: Any) -> ValueChange | None:
    return None if old == new else ValueChange(what, old, new)


def _rc_id(rc: Mapping[str, Any] | None) -> tuple[str, str] | None:
    return (str(rc.get("layer")), str(rc.get("check"))) if rc else None


def _failing_set(check: Mapping[str, Any]) -> set[str]:
    if "failing_nodes" in check:
        return set(check.get("failing_nodes") or [])
    # Older or hand-made files: every node with a failing finding.
    return set(check.get("nodes") or [])


def _check_sort_key(c: CheckChange) -> tuple[Any, ...]:
    return (layer_rank(c.layer), c.check_id)


def _diff_checks(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[CheckChange], list[CheckChange]]:
    old_checks = {str(c.get("id")): c for c in old.get("checks") or []}
    new_checks = {str(c.get("id")): c for c in new.get("checks") or []}
    newly: list[CheckChange] = []
    fixed: list[CheckChange] = []
    for cid in set(old_checks) | set(new_checks):
        o, n = old_checks.get(cid), new_checks.get(cid)
        ref = n or o
        assert ref is not None
        o_status = str(o.get("status")) if o else "absent"
        n_status = str(n.get("status")) if n else "absent"
        o_fail = _failing_set(o) if o and o_status == "fail" else set()
        n_fail = _failing_set(n) if n and n_status == "fail" else set()
        n_blocked = set(n.get("blocked_nodes") or []) if n else set()
        layer, title = str(ref.get("layer")), str(ref.get("title") or "")
        if n_status == "fail":
            started = node_sorted(n_fail - o_fail)
            if o_status != "fail" or started:
                newly.append(CheckChange(cid, layer, title, o_status, n_status, started))
        if o_status == "fail" and n is not None:
            # A node that is now blocked by an earlier layer did not recover: it only hides behind another
            # failure, which the per-node root-cause changes report.
            recovered = node_sorted(o_fail - n_fail - n_blocked)
            if n_status in ("pass", "warn", "n/a") or (n_status == "fail" and recovered):
                fixed.append(CheckChange(cid, layer, title, o_status, n_status, recovered))
    return sorted(newly, key=_check_sort_key), sorted(fixed, key=_check_sort_key)


def _diff_nodes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[NodeChange]:
    old_nodes = {str(n.get("name")): n for n in old.get("nodes") or []}
    new_nodes = {str(n.get("name")): n for n in new.get("nodes") or []}
    out: list[NodeChange] = []
    for name in node_sorted(set(old_nodes) | set(new_nodes)):
        o, n = old_nodes.get(name), new_nodes.get(name)
        o_rc = (o or {}).get("root_cause")
        n_rc = (n or {}).get("root_cause")
        if o is None:
            out.append(NodeChange(name, "new failure" if n_rc else "added", None, n_rc))
        elif n is None:
            out.append(NodeChange(name, "removed", o_rc, None))
        elif not o_rc and n_rc:
            out.append(NodeChange(name, "new failure", None, n_rc))
        elif o_rc and not n_rc:
            out.append(NodeChange(name, "fixed", o_rc, None))
        elif o_rc and n_rc and _rc_id(o_rc) != _rc_id(n_rc):
            out.append(NodeChange(name, "changed", o_rc, n_rc))
    return out


def _diff_driver_config(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[ValueChange]:
    o, n = old.get("driver_config") or {}, new.get("driver_config") or {}
    return [ValueChange(node, o.get(node), n.get(node))
            for node in node_sorted(set(o) | set(n)) if o.get(node) != n.get(node)]


def _diff_policy(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[ValueChange]:
    o = (old.get("operator") or {}).get("policy") or {}
    n = (new.get("operator") or {}).get("policy") or {}
    return [ValueChange(str(k), o.get(k), n.get(k)) for k in sorted(set(o) | set(n), key=str)
            if o.get(k) != n.get(k)]


def diff_runs(old: dict[str, Any], new: dict[str, Any]) -> RunDiff:
    """Compare two conformance.json dicts (as from json_report.load_json): old first, new second."""
    o_op, n_op = old.get("operator") or {}, new.get("operator") or {}
    o_cl, n_cl = old.get("cluster") or {}, new.get("cluster") or {}
    o_block, n_block = old.get("cluster_blocker"), new.get("cluster_blocker")
    newly, fixed = _diff_checks(old, new)
    return RunDiff(
        old_run=str(old.get("run_id") or ""),
        new_run=str(new.get("run_id") or ""),
        verdict=_change("verdict", old.get("verdict"), new.get("verdict")),
        # Comparing two different clusters is allowed (staging vs production) but must be said.
        cluster=_change("API server", o_cl.get("server"), n_cl.get("server")),
        cluster_blocker=None if _rc_id(o_block) == _rc_id(n_block) else ValueChange("cluster blocker",
                                                                                   o_block, n_block),
        operator_version=_change("operator version", o_op.get("version"), n_op.get("version")),
        kubernetes_version=_change("Kubernetes version", o_cl.get("kubernetes_version"),
                                   n_cl.get("kubernetes_version")),
        policy=_diff_policy(old, new),
        driver_config=_diff_driver_config(old, new),
        newly_failing=newly,
        fixed=fixed,
        nodes=_diff_nodes(old, new),
    )


# --- terminal text ---------------------------------------------------------------------------------------

def _v(value: Any) -> str:
    return "none" if value is None else str(value)


def _what(c: CheckChange) -> str:
    return f"{c.check_id} [{c.layer}] {c.title}"


def _where(nodes: list[str]) -> str:
    real = [n for n in nodes if n != CLUSTER]
    parts = ["cluster-wide"] if CLUSTER in nodes else []
    if real:
        parts.append(compress_names(real) + (f" ({len(real)} nodes)" if len(real) > 1 else ""))
    return " and ".join(parts) if parts else "no node"


def _rc_short(rc: Mapping[str, Any] | None) -> str:
    return f"{rc.get('layer')} ({rc.get('check')})" if rc else "none"


def _node_line(names: list[str], kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    who = names[0] if len(names) == 1 else f"{compress_names(names)} ({len(names)} nodes)"

    def detail(rc: Mapping[str, Any] | None) -> str:
        # A shared line shows layer and check only: one node's message would misdescribe the others.
        return root_cause_sentence(rc) if rc and len(names) == 1 else _rc_short(rc)

    if kind == "new failure":
        return f"node {who}: new failure at {detail(new)}"
    if kind == "fixed":
        return f"node {who}: fixed (was {detail(old)})"
    if kind == "changed":
        return f"node {who}: root cause moved from {_rc_short(old)} to {detail(new)}"
    if kind == "added":
        return f"node {who}: new GPU node, passes"
    return f"node {who}: no longer in the run (root cause was {_rc_short(old)})" if old \
        else f"node {who}: no longer in the run"


def _grouped_node_lines(changes: list[NodeChange]) -> list[str]:
    groups: dict[tuple[Any, ...], list[NodeChange]] = {}
    for c in changes:
        groups.setdefault((c.kind, _rc_id(c.old), _rc_id(c.new)), []).append(c)
    lines: list[tuple[tuple[Any, ...], str]] = []
    for members in groups.values():
        first = members[0]
        chunks = [members] if len(members) > GROUP_NODES_ABOVE else [[m] for m in members]
        for chunk in chunks:
            names = node_sorted(m.node for m in chunk)
            lines.append(((natural_key(names[0]), first.kind),
                          _node_line(names, first.kind, chunk[0].old, chunk[0].new)))
    return [text for _, text in sorted(lines, key=lambda t: t[0])]


def _grouped_driver_lines(changes: list[ValueChange]) -> list[str]:
    groups: dict[tuple[Any, Any], list[str]] = {}
    for c in changes:
        groups.setdefault((c.old, c.new), []).append(c.what)
    out: list[tuple[tuple[Any, ...], str]] = []
    for (o, n), names in groups.items():
        chunks = [names] if len(names) > GROUP_NODES_ABOVE else [[x] for x in names]
        for chunk in chunks:
            chunk = node_sorted(chunk)
            who = chunk[0] if len(chunk) == 1 else f"{compress_names(chunk)} ({len(chunk)} nodes)"
            out.append((natural_key(chunk[0]), f"driver config {who}: {_v(o)} -> {_v(n)}"))
    return [text for _, text in sorted(out, key=lambda t: t[0])]


def format_diff(d: RunDiff) -> str:
    """One line per change, in a fixed order; "no changes" when the runs agree."""
    if not d.has_changes:
        return "no changes"
    lines: list[str] = []
    for vc in (d.verdict, d.cluster, d.operator_version, d.kubernetes_version):
        if vc:
            lines.append(f"{vc.what}: {_v(vc.old)} -> {_v(vc.new)}")
    if d.cluster_blocker:
        o, n = d.cluster_blocker.old, d.cluster_blocker.new
        lines.append(f"cluster blocker: {root_cause_sentence(o) if o else 'none'} -> "
                     f"{root_cause_sentence(n) if n else 'none'}")
    for vc in d.policy:
        lines.append(f"policy {vc.what}: {format_value(vc.old)} -> {format_value(vc.new)}")
    lines.extend(_grouped_driver_lines(d.driver_config))
    for c in d.newly_failing:
        # A check that failed before and fails on more nodes now is not "newly" failing.
        still = c.old_status == "fail"
        lines.append(f"{'now also' if still else 'newly'} failing: {_what(c)} on {_where(c.nodes)}"
                     + ("" if still else f" (was {c.old_status})"))
    for c in d.fixed:
        lines.append(f"fixed on {_where(c.nodes)}: {_what(c)} (still failing elsewhere)" if c.new_status == "fail"
                     else f"fixed: {_what(c)} (was failing on {_where(c.nodes)}, now {c.new_status})")
    lines.extend(_grouped_node_lines(d.nodes))
    # A baseline file may predate redaction; the terminal output must not leak what it held.
    return "\n".join(redact_text(line) for line in lines)
