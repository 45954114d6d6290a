"""conformance.html: one self-contained page a person can read in a minute, and print.

The page is rendered from the redacted conformance.json dict (not from the live objects), so the HTML and
the JSON can never disagree, and an old conformance.json can be rendered again with ``render_html``.
Everything is grouped before it reaches the template: a 1,000-node cluster gives a grid of a few rows,
not a thousand, and the findings of healthy nodes are summarised rather than listed one by one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import Any

import jinja2

from gpu_conformance.report.common import (
    LAYER_NAMES,
    STATUS_ORDER,
    STATUS_SYMBOL,
    compress_names,
    driver_config_summary,
    format_duration,
    group_root_causes,
    layer_rank,
    names_are_complete,
    natural_key,
    node_sorted,
    plural,
    policy_items,
    root_cause_sentence,
)
from gpu_conformance.report.json_report import result_dict, write_text_atomic
from gpu_conformance.report.redact import redact, redact_markup
from gpu_conformance.run_result import RunResult

HTML_NAME = "conformance.html"

# Up to this many GPU nodes every node gets its own grid row; above it, identical rows are merged.
GRID_GROUP_THRESHOLD = 40
# Caps that keep the page small on big clusters; conformance.json always has everything.
MAX_PROBLEM_GROUPS_PER_CHECK = 50
MAX_OTHER_GROUPS_PER_CHECK = 10
MAX_PROBE_PODS_LISTED = 40
MAX_LOG_CHARS = 20_000

_FINDING_RANK = {"fail": 0, "blocked": 1, "warn": 2, "pass": 3, "n/a": 4}
_VERDICT_CLASS = {"CONFORMANT": "conformant", "NOT CONFORMANT": "not-conformant", "INCOMPLETE": "incomplete"}
_VERDICT_SYMBOL = {"CONFORMANT": "\u2714", "NOT CONFORMANT": "\u2718", "INCOMPLETE": "?"}


class _StatusSymbol:
    """The one-character symbol of a status, for the rows and groups that carry one."""

    status: str

    @property
    def symbol(self) -> str:
        return STATUS_SYMBOL.get(self.status, "?")


@dataclass
class Cell(_StatusSymbol):
    layer: str
    status: str
    title: str = ""


@dataclass
class GridRow:
    names: list[str]
    label: str
    # The full name list, only when the label had to fall back to examples ("a, b, c and 40 more").
    full: str
    cells: list[Cell]
    driver: str
    root_cause: dict[str, Any] | None
    problem: bool

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass
class FindingGroup(_StatusSymbol):
    status: str
    nodes: list[str]
    nodes_label: str
    message: str
    evidence: str
    hint: str
    kubectl: str
    note: str = ""


@dataclass
class CheckView:
    id: str
    layer: str
    title: str
    status: str
    reason: str
    hint: str
    kubectl: str
    failing_label: str
    blocked_label: str
    groups: list[FindingGroup] = field(default_factory=list)
    hidden: dict[str, int] = field(default_factory=dict)
    total_findings: int = 0

    @property
    def symbol(self) -> str:
        return STATUS_SYMBOL.get(self.status, "?")

    @property
    def hidden_text(self) -> str:
        if not self.hidden:
            return ""
        parts = [f"{n} more {status}" for status, n in sorted(self.hidden.items(), key=lambda kv: _FINDING_RANK[kv[0]])]
        return (f"Not shown here: {', '.join(parts)} findings. "
                "conformance.json keeps every failure and warning per node.")


@lru_cache(maxsize=1)
def template_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        # Every value on the page comes from the cluster (pod logs, event text): never trust it as markup.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["symbol"] = lambda status: STATUS_SYMBOL.get(status, "?")
    return env


def _pretty_time(iso: str) -> str:
    try:
        dt = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    suffix = " UTC" if dt.utcoffset() is not None and dt.utcoffset().total_seconds() == 0 else ""  # type: ignore[union-attr]
    return dt.strftime("%Y-%m-%d %H:%M:%S") + suffix


def _names_label(names: list[str]) -> tuple[str, str]:
    """(short label, full list or '') for a set of nodes."""
    if len(names) == 1:
        return names[0], ""
    phrase = compress_names(names)
    label = f"{phrase} \u2014 {plural(len(names), 'node')}"
    full = "" if names_are_complete(names, phrase) else ", ".join(node_sorted(names))
    return label, full


def _grid_rows(data: Mapping[str, Any]) -> tuple[list[GridRow], bool]:
    nodes = list(data.get("nodes") or [])
    grouped = len(nodes) > GRID_GROUP_THRESHOLD
    buckets: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for n in nodes:
        layers = n.get("layers") or {}
        rc = n.get("root_cause")
        key: tuple[Any, ...] = (
            tuple(str(layers.get(layer, "n/a")) for layer in LAYER_NAMES),
            (rc or {}).get("layer"),
            (rc or {}).get("check"),
            n.get("driver_config", "unknown"),
        )
        if not grouped:
            key = (*key, n["name"])
        buckets.setdefault(key, []).append(n)
    rows: list[GridRow] = []
    for members in buckets.values():
        names = node_sorted(m["name"] for m in members)
        first = next(m for m in members if m["name"] == names[0])
        rc = first.get("root_cause")
        if rc and len(names) > 1:
            # The row stands for several nodes: name the problem, not one node's wording of it.
            rc = {"layer": rc.get("layer"), "check": rc.get("check"), "message": rc.get("message")}
        layers = first.get("layers") or {}
        cells: list[Cell] = []
        for layer in LAYER_NAMES:
            status = str(layers.get(layer, "n/a"))
            title = f"{layer}: {status}"
            if status == "fail" and rc:
                title = root_cause_sentence(rc)
            elif status == "blocked" and rc:
                title = f"{layer}: blocked by {rc.get('layer')} ({rc.get('check')})"
            cells.append(Cell(layer, status, title))
        label, full = _names_label(names)
        statuses = {c.status for c in cells}
        rows.append(GridRow(names, label, full, cells, str(first.get("driver_config", "unknown")), rc,
                            problem=bool(rc) or bool(statuses & {"fail", "blocked"})))

    def order(r: GridRow) -> tuple[Any, ...]:
        statuses = {c.status for c in r.cells}
        if r.root_cause:
            rank = (0, layer_rank(str(r.root_cause.get("layer"))))
        elif r.problem:
            rank = (1, 0)
        elif "warn" in statuses:
            rank = (2, 0)
        else:
            rank = (3, 0)
        return (*rank, natural_key(r.names[0]))

    rows.sort(key=order)
    return rows, grouped


def _layer_counts(data: Mapping[str, Any]) -> list[list[tuple[str, int]]]:
    summary = data.get("summary") or {}
    out: list[list[tuple[str, int]]] = []
    for layer in LAYER_NAMES:
        counts = summary.get(layer) or {}
        out.append([(s, int(counts.get(s, 0))) for s in STATUS_ORDER if counts.get(s)])
    return out


def _for_node(text: str, node: str | None) -> str:
    return text.replace("<node>", node) if node and text else text


def _neutral(text: str, node: str | None) -> str:
    return text.replace(node, "<node>") if node and text else text


def _check_view(check: Mapping[str, Any]) -> CheckView:
    failing = [n for n in check.get("failing_nodes") or []]
    blocked = [n for n in check.get("blocked_nodes") or []]
    kubectl = str(check.get("kubectl") or "")
    real_failing = [n for n in failing if n != "<cluster>"]
    if len(real_failing) == 1:
        kubectl = _for_node(kubectl, real_failing[0])
    view = CheckView(
        id=str(check.get("id")),
        layer=str(check.get("layer")),
        title=str(check.get("title") or ""),
        status=str(check.get("status") or "n/a"),
        reason=str(check.get("reason") or ""),
        hint=str(check.get("hint") or ""),
        kubectl=kubectl,
        failing_label=_affected_label(failing),
        blocked_label=_affected_label(blocked),
    )
    blocked_set = set(blocked)
    groups: dict[tuple[str, ...], FindingGroup] = {}
    findings = list(check.get("findings") or [])
    view.total_findings = len(findings)
    for f in findings:
        node = f.get("node")
        status = str(f.get("status") or "n/a")
        note = ""
        if status == "fail" and (node in blocked_set or (node is None and "<cluster>" in blocked_set)):
            # The check saw a failure, but an earlier layer explains it: show it as the consequence it is.
            status, note = "blocked", view.reason
        evidence = f.get("evidence") or {}
        # Shown in the check's own order (object, field, observed, expected reads as a sentence); compared
        # in sorted order so that equal evidence groups whatever order it was built in.
        evidence_json = json.dumps(evidence, indent=2, ensure_ascii=False, default=str) if evidence else ""
        evidence_key = json.dumps(evidence, sort_keys=True, default=str) if evidence else ""
        hint = str(f.get("hint") or "")
        hint = "" if hint == view.hint else hint
        f_kubectl = _for_node(str(f.get("kubectl") or ""), node)
        f_kubectl = "" if f_kubectl in ("", view.kubectl) else f_kubectl
        message = str(f.get("message") or "")
        # Findings that differ only by their node's name are one finding on several nodes.
        key = (status, _neutral(message, node), _neutral(evidence_key, node), _neutral(hint, node),
               _neutral(f_kubectl, node), note)
        g = groups.get(key)
        if f.get("nodes"):
            # Already grouped in conformance.json (many passing nodes): one group of its own.
            groups[(*key, "grouped")] = FindingGroup(status, list(f["nodes"]), "", message, evidence_json, hint,
                                                     f_kubectl, note)
        elif g is None:
            groups[key] = FindingGroup(status, [node] if node else [], "", message, evidence_json, hint,
                                       f_kubectl, note)
        else:
            if len(g.nodes) == 1 and node:
                # From now on the group speaks for several nodes: use the name-neutral wording.
                g.message, g.hint, g.kubectl = key[1], key[3], key[4]
                g.evidence = _neutral(g.evidence, g.nodes[0])
            if node:
                g.nodes.append(node)
    ordered = sorted(groups.values(), key=lambda g: (_FINDING_RANK.get(g.status, 9),
                                                     natural_key(g.nodes[0]) if g.nodes else ()))
    shown: list[FindingGroup] = []
    counts: Counter[str] = Counter()
    for g in ordered:
        limit = MAX_PROBLEM_GROUPS_PER_CHECK if g.status in ("fail", "blocked", "warn") else MAX_OTHER_GROUPS_PER_CHECK
        counts[g.status] += 1
        if counts[g.status] > limit:
            view.hidden[g.status] = view.hidden.get(g.status, 0) + 1
            continue
        # A group's name-neutral command or hint can turn out to be the check's own: say it once.
        if g.kubectl == view.kubectl:
            g.kubectl = ""
        if g.hint == view.hint:
            g.hint = ""
        g.nodes = node_sorted(set(g.nodes))
        g.nodes_label = _names_label(g.nodes)[0] if g.nodes else "cluster-wide"
        shown.append(g)
    view.groups = shown
    return view


def _affected_label(names: Iterable[str]) -> str:
    names = list(names)
    if not names:
        return ""
    cluster = "<cluster>" in names
    real = [n for n in names if n != "<cluster>"]
    parts = []
    if cluster:
        parts.append("cluster-wide")
    if real:
        parts.append(_names_label(real)[0] if len(real) > 1 else real[0])
    return "; ".join(parts)


def _check_layers(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    by_layer: dict[str, list[CheckView]] = {layer: [] for layer in LAYER_NAMES}
    for c in data.get("checks") or []:
        by_layer.setdefault(str(c.get("layer")), []).append(_check_view(c))
    out = []
    for i, (layer, checks) in enumerate(by_layer.items(), start=1):
        statuses = Counter(c.status for c in checks)
        out.append({
            "layer": layer,
            "index": i,
            "checks": checks,
            "counts": [(s, statuses[s]) for s in STATUS_ORDER if statuses[s]],
        })
    return out


def _tail(text: str, limit: int = MAX_LOG_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[-limit:], True


def _claim_line(claim: Any) -> str:
    """The probe pod's ResourceClaim in one line: its name and the devices allocated, or 'not allocated'."""
    if not isinstance(claim, Mapping) or not claim.get("name"):
        return ""
    devices = [str(d) for d in claim.get("devices") or []]
    return f"claim {claim['name']}: " + (", ".join(devices) if claim.get("allocated") and devices else
                                         "not allocated")


def _probe_view(data: Mapping[str, Any]) -> dict[str, Any]:
    probe = data.get("probe") or {}
    pods_in = [p for p in (probe.get("pods") or []) if isinstance(p, Mapping)]
    pods = []
    for p in pods_in:
        logs, truncated = _tail(str(p.get("logs") or ""))
        events = p.get("events") or []
        if isinstance(events, str):
            events = [events]
        phase = str(p.get("phase") or "Unknown")
        pods.append({
            "name": str(p.get("name") or ""),
            "node": str(p.get("node") or ""),
            "phase": phase,
            "ok": phase == "Succeeded",
            "output": str(p.get("output") or ""),
            "events": [str(e) for e in events],
            "logs": logs,
            "logs_truncated": truncated,
            "gpus_seen": p.get("gpus_seen"),
            # How the pod asked for its GPU (device-plugin, claim, extended-resource); reports before it: ''.
            "path": str(p.get("path") or ""),
            "claim": _claim_line(p.get("claim")),
            "cdi": p.get("cdi"),
        })
    pods.sort(key=lambda p: (p["ok"], natural_key(p["node"]), p["name"]))
    problems = [p for p in pods if not p["ok"]]
    ok = [p for p in pods if p["ok"]]
    if len(pods) <= MAX_PROBE_PODS_LISTED:
        listed, ok_summary, ok_hidden = pods, "", 0
    else:
        # Keep every problem pod (capped) and a few healthy examples; the rest is one line.
        listed = problems[:MAX_PROBE_PODS_LISTED] + ok[:3]
        ok_summary = f"Succeeded on {_names_label([p['node'] or p['name'] for p in ok])[0]}" if ok else ""
        ok_hidden = len(pods) - len(listed)
    return {
        "skipped": str(probe.get("skipped") or ""),
        "scope": str(probe.get("scope") or ""),
        "aborted": str(probe.get("aborted") or ""),
        "leftovers": [str(x) for x in probe.get("leftovers") or []],
        "pods": listed,
        "total": len(pods),
        "problems": len(problems),
        "ok_summary": ok_summary,
        "hidden": ok_hidden,
        "present": bool(probe),
    }


def _verdict_detail(data: Mapping[str, Any], rows: list[GridRow]) -> str:
    nodes = data.get("nodes") or []
    failing = [n for n in nodes if n.get("root_cause")]
    verdict = str(data.get("verdict"))
    if data.get("cluster_blocker"):
        # The banner's blocker line gives the sentence; this line says what it means for the nodes.
        return f"A cluster-wide failure blocks all {plural(len(nodes), 'GPU node')}." if nodes \
            else "A cluster-wide failure blocks the cluster, and no GPU nodes were found."
    if not nodes:
        return "No GPU nodes were found, so nothing could be proven."
    if failing:
        layers = Counter(str(n["root_cause"].get("layer")) for n in failing)
        where = ", ".join(f"{layer} on {plural(k, 'node')}"
                          for layer, k in sorted(layers.items(), key=lambda kv: layer_rank(kv[0])))
        return f"{len(failing)} of {plural(len(nodes), 'GPU node')} fail: {where}."
    if verdict == "INCOMPLETE":
        run = data.get("layers_run") or []
        missing = [layer for layer in LAYER_NAMES if layer not in run]
        return f"Layers not run: {', '.join(missing) or 'none'}; the verdict needs all six."
    if verdict == "NOT CONFORMANT":
        return "A cluster-wide check failed; see the checks below."
    warn = sum(1 for r in rows for c in r.cells if c.status == "warn")
    tail = " (with warnings)" if warn else ""
    return f"All {plural(len(nodes), 'GPU node')} pass all six layers{tail}."


def build_context(data: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows, computed and grouped here so the template stays presentational."""
    cluster = data.get("cluster") or {}
    operator = data.get("operator") or {}
    rows, grouped = _grid_rows(data)
    verdict = str(data.get("verdict") or "INCOMPLETE")
    requests = cluster.get("requests")
    read_seconds = cluster.get("read_seconds")
    api = "unknown" if requests is None else str(requests)
    if requests is not None and read_seconds is not None:
        api += f" (snapshot read in {format_duration(read_seconds)})"
    root_causes = []
    for names, rc in group_root_causes(data.get("nodes") or []):
        label, full = _names_label(names)
        root_causes.append({"label": label, "full": full, "sentence": root_cause_sentence(rc),
                            "check": rc.get("check"), "count": len(names)})
    blocker = data.get("cluster_blocker")
    return {
        "title": f"GPU conformance: {verdict}",
        "verdict": verdict,
        "verdict_class": _VERDICT_CLASS.get(verdict, "incomplete"),
        "verdict_symbol": _VERDICT_SYMBOL.get(verdict, "?"),
        "verdict_detail": _verdict_detail(data, rows),
        "cluster_blocker": root_cause_sentence(blocker) if blocker else "",
        "cluster_blocker_check": (blocker or {}).get("check", ""),
        "cluster_facts": [
            ("API server", str(cluster.get("server") or "unknown")),
            ("Kubernetes", str(cluster.get("kubernetes_version") or "unknown")),
            ("Context", str(cluster.get("context") or "unknown")),
        ],
        "operator_facts": [
            ("Operator version", str(operator.get("version") or "unknown")),
            ("Namespace", str(operator.get("namespace") or "unknown")),
            ("Driver", driver_config_summary(data.get("driver_config") or {})),
            # Reports written before the DRA models existed have no key: they ran the device-plugin model.
            ("GPU resource model", str(operator.get("resource_model") or "device-plugin")),
        ],
        "run_facts": [
            ("Run", str(data.get("run_id") or "")),
            ("Started", _pretty_time(str(data.get("started_at") or ""))),
            ("Duration", format_duration(data.get("duration_seconds"))),
            ("API requests", api),
        ],
        "policy": policy_items(operator.get("policy")),
        "layers": LAYER_NAMES,
        "layers_run": list(data.get("layers_run") or LAYER_NAMES),
        "rows": rows,
        "grouped": grouped,
        "node_count": len(data.get("nodes") or []),
        "layer_counts": _layer_counts(data),
        "root_causes": root_causes,
        "check_layers": _check_layers(data),
        "probe": _probe_view(data),
        "schema_version": str(data.get("schema_version") or ""),
    }


def _render(clean: Mapping[str, Any]) -> str:
    html = template_environment().get_template("conformance.html.j2").render(**build_context(clean))
    return redact_markup(html)


def render_html(data: Mapping[str, Any]) -> str:
    """The page for a conformance.json dict (redacted here: the dict may come from an old or foreign file)."""
    return _render(redact(dict(data)))


def render_clean(clean: Mapping[str, Any]) -> str:
    """The page for a dict that is already redacted (result_dict): what the reporter table renders."""
    return _render(clean)


def render_failed(run_id: str, when: str, exit_code: int, message: str, verdict: str, previous_dir: str) -> str:
    """The page of a run that ended before a verdict (the failed-run path)."""
    e = escape
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>GPU conformance: {verdict}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem}}
.verdict{{background:#b00020;color:#fff;padding:.5rem 1rem;display:inline-block}}</style></head>
<body><h1>GPU conformance: <span class="verdict">{verdict}</span> — the run failed, there is no verdict</h1>
<p><strong>exit code {exit_code}:</strong> {e(message)}</p>
<p>run {e(run_id)}, {e(when)}. No check was judged. Reports of an earlier run, if any, are in
<code>{e(previous_dir)}/</code>.</p>
</body></html>
"""


def write_html(result: RunResult, report_dir: Path) -> Path:
    """Write report_dir/conformance.html and return its path."""
    path = Path(report_dir) / HTML_NAME
    write_text_atomic(path, _render(result_dict(result)))
    return path
