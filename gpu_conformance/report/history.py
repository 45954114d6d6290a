"""`gpu-conformance report history DIR`: one self-contained page from a folder of nightly conformance.json files.

The questions after a week of nightly runs are "since when is it red?", "what changed that night?" and
"which node moved, in which layer?". So the page shows the verdict of every night with the changes since the
night before (the same diff as `report diff` and --baseline), each open problem of the newest night with the
first night of its unbroken streak, and the node × layer cells whose status changed, with the nights they
changed on. Identical cell histories of several nodes share one row, so a big cluster stays readable.

A night whose run failed before a verdict (verdict ERROR) is shown as such and skipped by the comparisons:
the night after it is compared with the last night that had a verdict.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpu_conformance.errors import UsageError
from gpu_conformance.report.common import (
    LAYER_NAMES,
    STATUS_SYMBOL,
    compress_names,
    layer_rank,
    natural_key,
    node_sorted,
    plural,
    root_cause_sentence,
)
from gpu_conformance.report.diff import RunDiff, diff_runs, format_diff
from gpu_conformance.report.html import HTML_NAME, template_environment
from gpu_conformance.report.json_report import write_text_atomic
from gpu_conformance.report.redact import redact, redact_markup, redact_text
from gpu_conformance.report.reporters import ERROR_VERDICT  # a run that ended before a verdict
from gpu_conformance.report_format import JSON_NAME, load_json

HISTORY_NAME = "history.html"
# Status of a cell on a night the node was not in the run, or the run had no verdict.
ABSENT = "absent"
NO_VERDICT = "no verdict"
_VERDICT_CLASS = {"CONFORMANT": "conformant", "NOT CONFORMANT": "not-conformant", "INCOMPLETE": "incomplete",
                  ERROR_VERDICT: "error"}
_SYMBOLS = {**STATUS_SYMBOL, ABSENT: "\u00b7", NO_VERDICT: "?"}


class HistoryInputError(UsageError):
    """The folder holds no report, or a file in it is not a conformance.json: one line, exit 4."""


@dataclass
class Night:
    path: Path
    data: dict[str, Any]
    # The night's conformance.html, when one lies next to its JSON: the page links to it (relative link).
    report_html: Path | None = None
    report_href: str = ""

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id") or "")

    @property
    def started_at(self) -> str:
        return str(self.data.get("started_at") or "")

    @property
    def verdict(self) -> str:
        return str(self.data.get("verdict") or "INCOMPLETE")

    @property
    def has_verdict(self) -> bool:
        return self.verdict != ERROR_VERDICT

    @property
    def label(self) -> str:
        return night_label(self.started_at) or self.path.parent.name


def night_label(started_at: str) -> str:
    """'2026-12-02 02:30 UTC' (minutes are enough to tell nights apart, and to find one in a CronJob log)."""
    try:
        t = dt.datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return started_at
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC)
    return t.strftime("%Y-%m-%d %H:%M") + (" UTC" if t.tzinfo is not None else "")


def _sort_key(n: Night) -> tuple[Any, ...]:
    try:
        t = dt.datetime.fromisoformat(n.started_at.replace("Z", "+00:00"))
        when = t.timestamp() if t.tzinfo else t.replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        when = float("-inf")
    return (when, str(n.path))


# --- reading the folder ----------------------------------------------------------------------------------

def find_reports(directory: Path) -> list[Path]:
    """conformance.json at any depth (a folder per night), and any *.json directly in DIR (a flat folder)."""
    found = set(directory.rglob(JSON_NAME)) | set(directory.glob("*.json"))
    return sorted(p for p in found if p.is_file())


def load_nights(directory: Path | str) -> list[Night]:
    """Every report in the folder, oldest first, redacted; HistoryInputError naming the first bad one."""
    d = Path(directory)
    if not d.exists():
        raise HistoryInputError(f"{d}: no such folder")
    if not d.is_dir():
        raise HistoryInputError(f"{d}: not a folder (give the folder that holds the nightly conformance.json "
                                f"files)")
    paths = find_reports(d)
    if not paths:
        raise HistoryInputError(f"{d}: no conformance.json in this folder or below it")
    nights: dict[str, Night] = {}
    for p in paths:
        try:
            data = load_json(p)
        except ValueError as e:  # ReportFileError: already one line naming the file
            raise HistoryInputError(str(e)) from None
        problem = _shape_problem(data)
        if problem:
            raise HistoryInputError(f"{p}: not a conformance.json ({problem})")
        html = p.parent / HTML_NAME
        night = Night(p, redact(_what_history_reads(data)), html if p.name == JSON_NAME and html.is_file() else None)
        # The same run twice (a baseline copied next to the nights it came from) is one night.
        key = night.run_id or str(p)
        if key not in nights or str(p) < str(nights[key].path):
            nights[key] = night
    return sorted(nights.values(), key=_sort_key)


# A check's fields that the diff reads; its findings (most of a big cluster's file) are never shown here.
_CHECK_FIELDS = ("id", "layer", "title", "status", "nodes", "failing_nodes", "blocked_nodes")


def _what_history_reads(data: Mapping[str, Any]) -> dict[str, Any]:
    """The night without findings, probe logs and settings: redacting only this keeps 30 nights of a
    1,000-node cluster to seconds, and nothing the page does not show can leak into it."""
    slim = {k: v for k, v in data.items() if k not in ("checks", "probe", "settings")}
    slim["checks"] = [{k: c[k] for k in _CHECK_FIELDS if k in c} for c in data.get("checks") or []]
    return slim


def _shape_problem(data: Mapping[str, Any]) -> str | None:
    """What this page reads beyond what load_json already checks (checks, nodes, root causes, blocker)."""
    for i, node in enumerate(data.get("nodes") or []):
        if not isinstance(node.get("layers") or {}, Mapping):
            return f"nodes[{i}].layers is not an object"
    if not isinstance(data.get("started_at", ""), str):
        return "'started_at' is not a string"
    return None


# --- what changed ----------------------------------------------------------------------------------------

@dataclass
class NightView:
    night: Night
    index: int
    # Compared with: the last earlier night that had a verdict (None for the first one).
    previous: Night | None
    diff: RunDiff | None
    changes: list[str]
    regressed: bool
    failing_nodes: int
    gpu_nodes: int
    error: str = ""
    # The night compared with is not the one just before (the nights between had no verdict).
    across_gap: bool = False

    @property
    def verdict_class(self) -> str:
        return _VERDICT_CLASS.get(self.night.verdict, "incomplete")


@dataclass
class OpenProblem:
    """A problem of the newest night (a node's root cause, or the cluster blocker) and its first night."""

    nodes: list[str]
    label: str
    sentence: str
    layer: str
    check: str
    since: Night
    # True when it was there already in the oldest night with a verdict: it started before the history.
    from_the_start: bool


@dataclass
class CellStep:
    night: str
    old: str
    new: str


@dataclass
class CellRow:
    layer: str
    nodes: list[str]
    label: str
    statuses: list[str]
    changed: list[bool]
    steps: list[CellStep] = field(default_factory=list)

    def symbol(self, status: str) -> str:
        return _SYMBOLS.get(status, "?")


@dataclass
class History:
    nights: list[NightView]
    problems: list[OpenProblem]
    cells: list[CellRow]
    unchanged_cells: int
    node_count: int

    @property
    def latest(self) -> NightView:
        return self.nights[-1]

    @property
    def first_regression(self) -> Night | None:
        """The first night of the oldest open problem that appeared within the history (not from its start)."""
        appeared = [p.since for p in self.problems if not p.from_the_start]
        return min(appeared, key=_sort_key) if appeared else None

    @property
    def latest_regressed(self) -> bool:
        """What `--fail-on-regression` fails on: the newest night got worse than the one before it.

        A single night is compared with nothing, so any failure in it counts; a night without a verdict
        cannot show it did not get worse, so it counts too.
        """
        return self.latest.regressed or not self.latest.night.has_verdict


def _rc_key(rc: Mapping[str, Any] | None) -> tuple[str, str] | None:
    return (str(rc.get("layer")), str(rc.get("check"))) if rc else None


def _node_map(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(n["name"]): n for n in data.get("nodes") or []}


def _night_views(nights: Sequence[Night]) -> list[NightView]:
    views: list[NightView] = []
    previous: Night | None = None
    for i, n in enumerate(nights):
        nodes = n.data.get("nodes") or []
        failing = sum(1 for x in nodes if x.get("root_cause"))
        if not n.has_verdict:
            err = n.data.get("error") or {}
            message = redact_text(str(err.get("message") or "the run ended before a verdict")) \
                if isinstance(err, Mapping) else "the run ended before a verdict"
            views.append(NightView(n, i, previous, None, [], False, 0, 0, error=message))
            continue
        diff = diff_runs(previous.data if previous else {}, n.data)
        # The first night is compared with nothing: its failures are what it found, not changes.
        changes = [] if previous is None else [ln for ln in format_diff(diff).splitlines() if ln != "no changes"]
        views.append(NightView(n, i, previous, diff, changes, diff.regressed, failing, len(nodes),
                               across_gap=previous is not None and nights[i - 1] is not previous))
        previous = n
    return views


def _open_problems(nights: Sequence[Night]) -> list[OpenProblem]:
    judged = [n for n in nights if n.has_verdict]
    if not judged:
        return []
    latest = judged[-1]

    def since(present: Any) -> tuple[Night, bool]:
        # Walk back while the problem is there; the earliest night of that streak is when it appeared.
        first = latest
        for n in reversed(judged[:-1]):
            if not present(n):
                return first, False
            first = n
        return first, True

    groups: dict[tuple[Any, ...], list[str]] = {}
    found: dict[tuple[Any, ...], tuple[Mapping[str, Any], Night, bool]] = {}
    blocker = latest.data.get("cluster_blocker")
    problems: list[OpenProblem] = []
    if blocker:
        first, start = since(lambda n: _rc_key(n.data.get("cluster_blocker")) == _rc_key(blocker))
        problems.append(OpenProblem([], "cluster-wide", redact_text(root_cause_sentence(blocker)),
                                    str(blocker.get("layer")), str(blocker.get("check")), first, start))
    # One name -> node map per night, built once: a 1,000-node cluster's failing nodes each walk back the nights.
    maps = {id(n): _node_map(n.data) for n in judged}
    for name, node in maps[id(latest)].items():
        rc = node.get("root_cause")
        if not rc:
            continue
        key = _rc_key(rc)
        first, start = since(lambda n, name=name, key=key: _rc_key(
            (maps[id(n)].get(name) or {}).get("root_cause")) == key)
        gkey = (key, first.run_id, str(first.path), start)
        groups.setdefault(gkey, []).append(name)
        found.setdefault(gkey, (rc, first, start))
    for gkey, names in groups.items():
        rc, first, start = found[gkey]
        names = node_sorted(names)
        # Several nodes share a row: name the problem, not one node's wording of it.
        sentence = root_cause_sentence(rc) if len(names) == 1 else f"{rc.get('layer')} ({rc.get('check')})"
        label = names[0] if len(names) == 1 else f"{compress_names(names)} \u2014 {plural(len(names), 'node')}"
        problems.append(OpenProblem(names, label, redact_text(sentence), str(rc.get("layer")), str(rc.get("check")),
                                    first, start))
    # Oldest first: the top line is the problem that has been open longest.
    problems.sort(key=lambda p: (_sort_key(p.since), bool(p.nodes), layer_rank(p.layer),
                                 natural_key(p.nodes[0] if p.nodes else "")))
    return problems


def _cell_rows(nights: Sequence[Night]) -> tuple[list[CellRow], int, int]:
    """(rows of node × layer cells that changed, count of cells that never changed, node count)."""
    maps = [_node_map(n.data) if n.has_verdict else None for n in nights]
    names = node_sorted({name for m in maps if m for name in m})
    buckets: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    unchanged = 0
    for name in names:
        for layer in LAYER_NAMES:
            statuses: list[str] = []
            for m in maps:
                if m is None:
                    statuses.append(NO_VERDICT)
                elif name not in m:
                    statuses.append(ABSENT)
                else:
                    statuses.append(str((m[name].get("layers") or {}).get(layer, "n/a")))
            judged = [s for s in statuses if s != NO_VERDICT]
            if all(s == judged[0] for s in judged):
                unchanged += 1
                continue
            buckets.setdefault((layer, tuple(statuses)), []).append(name)
    rows: list[CellRow] = []
    for (layer, statuses), members in buckets.items():
        members = node_sorted(members)
        changed: list[bool] = []
        steps: list[CellStep] = []
        last: str | None = None
        for n, s in zip(nights, statuses, strict=True):
            if s == NO_VERDICT:
                changed.append(False)
                continue
            moved = last is not None and s != last
            changed.append(moved)
            if moved:
                steps.append(CellStep(n.label, str(last), s))
            last = s
        label = members[0] if len(members) == 1 else f"{compress_names(members)} \u2014 {plural(len(members), 'node')}"
        rows.append(CellRow(layer, members, label, list(statuses), changed, steps))
    rows.sort(key=lambda r: (natural_key(r.nodes[0]), layer_rank(r.layer)))
    return rows, unchanged, len(names)


def build_history(nights: Sequence[Night]) -> History:
    if not nights:
        raise HistoryInputError("no nights to show")
    cells, unchanged, node_count = _cell_rows(nights)
    return History(_night_views(nights), _open_problems(nights), cells, unchanged, node_count)


# --- output ----------------------------------------------------------------------------------------------

def render_history(history: History) -> str:
    first, last = history.nights[0].night, history.nights[-1].night
    # The main report's environment (autoescape, strict undefined); `symbol` also knows absent/no-verdict cells.
    page = template_environment().get_template("history.html.j2").render(
        symbol=lambda status: _SYMBOLS.get(status, "?"),
        h=history,
        title=f"GPU conformance history: {last.verdict} ({plural(len(history.nights), 'night')})",
        span=first.label if first is last else f"{first.label} \u2013 {last.label}",
        nights_newest_first=list(reversed(history.nights)),
        layers=LAYER_NAMES,
        verdict_class=history.latest.verdict_class,
    )
    # The data was redacted on reading; this last pass catches a secret that reached the page another way.
    return redact_markup(page)


def summary_lines(history: History, page: Path | None = None, markdown: bool = False) -> list[str]:
    """What `report history` prints: the newest verdict, its changes, and when each open problem appeared."""
    latest = history.latest
    bullet = "- " if markdown else "  "
    # Markdown needs a blank line before a list after a paragraph line; the terminal does not.
    gap = [""] if markdown else []
    out: list[str] = []
    head = f"{latest.night.verdict} on {latest.night.label} ({plural(len(history.nights), 'night')} in the history)"
    out.append(f"### GPU conformance: {head}" if markdown else f"verdict: {head}")
    out.extend(gap)
    if latest.error:
        out.append(f"{bullet}the run failed: {latest.error}")
    elif latest.previous is None:
        out.append(f"{bullet}no earlier night to compare with")
    else:
        out.extend([f"changes since {latest.previous.label}:", *gap])
        out.extend(f"{bullet}{line}" for line in latest.changes or ["no changes"])
    if history.problems:
        out.extend([*gap, "open problems, first night seen:", *gap])
        for p in history.problems:
            when = f"since the first report ({p.since.label})" if p.from_the_start else f"since {p.since.label}"
            out.append(f"{bullet}{p.label}: {p.sentence} \u2014 {when}")
    if history.latest_regressed and latest.previous is not None:
        out.extend([*gap, f"{'**REGRESSION**' if markdown else 'REGRESSION'} since {latest.previous.label}"])
    if page is not None:
        out.extend([*gap, f"history (html): {page}"])
    return [redact_text(line) for line in out]


def write_history(directory: Path | str, output: Path | str | None = None) -> tuple[Path, History]:
    """Read every night under directory, write the page (default DIR/history.html); return (path, history)."""
    nights = load_nights(directory)
    path = Path(output) if output else Path(directory) / HISTORY_NAME
    for n in nights:
        if n.report_html is not None:
            n.report_href = quote(Path(os.path.relpath(n.report_html.resolve(), path.resolve().parent)).as_posix())
    history = build_history(nights)
    try:
        write_text_atomic(path, render_history(history))
    except OSError as e:
        raise HistoryInputError(f"{path}: cannot write the page ({e.strerror or e})") from None
    return path, history

