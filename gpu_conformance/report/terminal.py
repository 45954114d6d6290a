"""The few lines printed at the end of a run: enough to know what broke where without opening a file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpu_conformance.control_chars import printable
from gpu_conformance.report.common import (
    LAYER_NAMES,
    STATUS_ORDER,
    compress_names,
    driver_config_summary,
    format_duration,
    group_root_causes,
    layer_rank,
    natural_key,
    plural,
    root_cause_sentence,
)
from gpu_conformance.report.json_report import result_dict
from gpu_conformance.report.redact import redact_text
from gpu_conformance.run_result import RunResult

# Up to this many failing nodes each gets its own line; above it identical root causes share one line.
MAX_NODE_LINES = 10
# Above this many distinct root causes the rest is one "and N more" line: the HTML report has them all.
MAX_ROOT_CAUSE_LINES = 20


def summary_lines(result: RunResult, paths: Iterable[Path | str] | Mapping[str, Path | str] = ()) -> list[str]:
    """Per-layer counts, the cluster blocker, each failing node's root cause, the verdict, report paths."""
    return summary_lines_from_dict(result_dict(result), paths)


def summary_lines_from_dict(data: Mapping[str, Any],
                            paths: Iterable[Path | str] | Mapping[str, Path | str] = ()) -> list[str]:
    """The same summary from a conformance.json dict (e.g. a saved run)."""
    nodes = list(data.get("nodes") or [])
    summary = data.get("summary") or {}
    lines: list[str] = []

    cluster = data.get("cluster") or {}
    operator = data.get("operator") or {}
    lines.append(
        f"GPU conformance run {data.get('run_id') or '?'}: {plural(len(nodes), 'GPU node')}, "
        f"context {cluster.get('context') or '?'}, Kubernetes {cluster.get('kubernetes_version') or '?'}, "
        f"operator {operator.get('version') or '?'}, GPU resource model "
        # Reports written before the DRA models existed have no key: they ran the device-plugin model.
        f"{operator.get('resource_model') or 'device-plugin'}, {format_duration(data.get('duration_seconds'))}"
    )
    lines.append(f"driver: {driver_config_summary(data.get('driver_config') or {})}")

    # A fixed-width table: the eye finds the one non-zero fail column fastest when columns line up.
    width = max(len(layer) for layer in LAYER_NAMES)
    header = f"{'layer':<{width}}  " + "  ".join(f"{s:>7}" for s in STATUS_ORDER)
    lines.append(header)
    run = set(data.get("layers_run") or LAYER_NAMES)
    for layer in LAYER_NAMES:
        counts = summary.get(layer) or {}
        row = f"{layer:<{width}}  " + "  ".join(f"{int(counts.get(s, 0)):>7}" for s in STATUS_ORDER)
        if layer not in run:
            row += "  (not run)"
        lines.append(row)

    blocker = data.get("cluster_blocker")
    if blocker:
        lines.append(f"cluster blocker: {root_cause_sentence(blocker)}")

    failing = [n for n in nodes if n.get("root_cause")]
    if failing:
        lines.append(f"root causes ({len(failing)} of {plural(len(nodes), 'node')} failing):")
    if blocker:
        # Nodes whose root cause is the cluster blocker would only repeat the line above: name them once.
        same = [n["name"] for n in failing if _rc_id(n["root_cause"]) == _rc_id(blocker)]
        if same:
            who = same[0] if len(same) == 1 else f"{compress_names(same)} ({len(same)} nodes)"
            lines.append(f"  {who}: the cluster blocker above")
        failing = [n for n in failing if _rc_id(n["root_cause"]) != _rc_id(blocker)]
    if failing:
        if len(failing) <= MAX_NODE_LINES:
            for n in sorted(failing, key=lambda n: (layer_rank(n["root_cause"].get("layer")),
                                                    natural_key(n["name"]))):
                lines.append(f"  {n['name']}: {root_cause_sentence(n['root_cause'])}")
        else:
            groups = group_root_causes(failing)
            for names, rc in groups[:MAX_ROOT_CAUSE_LINES]:
                who = names[0] if len(names) == 1 else f"{compress_names(names)} ({len(names)} nodes)"
                lines.append(f"  {who}: {root_cause_sentence(rc)}")
            rest = groups[MAX_ROOT_CAUSE_LINES:]
            if rest:
                lines.append(f"  and {plural(len(rest), 'more root cause')} on "
                             f"{plural(sum(len(g[0]) for g in rest), 'node')} (see the HTML report)")

    # What the probe covered belongs to the verdict: "CONFORMANT" over 4 sampled nodes is not over all 1,000.
    scope = (data.get("probe") or {}).get("scope")
    lines.append(f"verdict: {data.get('verdict')}" + (f" ({scope})" if scope else ""))
    for label, path in _path_items(paths):
        lines.append(f"{label}: {path}")
    # Node names, messages and root causes come from the cluster: one printed line each, no escape sequences.
    return [printable(redact_text(line), keep_newlines=False) for line in lines]


def _rc_id(rc: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (rc.get("layer"), rc.get("check"), rc.get("message"))


def _path_items(paths: Iterable[Path | str] | Mapping[str, Path | str]) -> list[tuple[str, str]]:
    if isinstance(paths, Mapping):
        return [(f"report ({k})", str(v)) for k, v in paths.items()]
    return [("report", str(p)) for p in paths]
