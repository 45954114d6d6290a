"""The signal inventory (gpu_conformance/data/signals.yaml): what the GPU Operator writes per release, who judges it.

Data, not logic: every row names a signal (a DaemonSet, an init container, a node label, a ClusterPolicy reason, an
event reason, ...), the values it takes, the first and last operator release that has it, the component that
writes it, and either the check ids that judge it or why none does. This module only reads the file and answers
"what is there at version X"; tests/test_signal_inventory.py holds it against the operator's own assets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpu_conformance import versions
from gpu_conformance.versions import Version

PATH = Path(__file__).parent / "data" / "signals.yaml"

KINDS = (
    "daemonset", "deployment", "init-container", "pod-label", "node-label", "node-annotation", "node-resource",
    "clusterpolicy-state", "clusterpolicy-condition", "clusterpolicy-reason", "clusterpolicy-message",
    "operator-state", "nvidiadriver-state", "nvidiadriver-condition", "nvidiadriver-reason", "event-reason",
    # The DRA models (resource_model.py).
    "gpucluster-state", "gpucluster-condition", "gpucluster-reason", "deviceclass", "resourceslice-field",
    "resourceclaim-field",
)


@dataclass(frozen=True)
class Span:
    """A value, or a list of names, that holds from `first` to `last` (inclusive)."""

    first: Version
    last: Version
    value: Any
    note: str = ""

    def covers(self, version: Version) -> bool:
        return self.first <= version <= self.last


@dataclass(frozen=True)
class Signal:
    kind: str
    name: str
    component: str
    first: Version
    last: Version
    judged_by: tuple[str, ...] = ()
    ignored: str = ""
    values: tuple[Span, ...] = ()
    daemonset: str = ""                  # init-container rows: the DaemonSet it belongs to
    state: str = ""                      # daemonset rows: the operator's state name
    pod_labels: dict[str, str] = field(default_factory=dict)
    node_selector: tuple[str, ...] = ()
    init_containers: tuple[Span, ...] = ()  # daemonset rows: Span.value = tuple of names, in order
    containers: tuple[Span, ...] = ()
    conditional: str = ""
    in_default_install: bool = True      # init-container rows: False = the operator strips it with chart defaults
    templated: bool = False
    note: str = ""
    gap: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    def present_in(self, version: Version) -> bool:
        return self.first <= version <= self.last

    def init_containers_at(self, version: Version) -> tuple[str, ...] | None:
        """The DaemonSet's init containers at `version` in order; None if the row says nothing for it."""
        return next((s.value for s in self.init_containers if s.covers(version)), None)

    def values_at(self, version: Version) -> tuple[Any, ...]:
        return tuple(s.value for s in self.values if s.covers(version))


@dataclass(frozen=True)
class Inventory:
    newest: Version
    versions_read: tuple[Version, ...]
    signals: tuple[Signal, ...]

    def of_kind(self, kind: str) -> list[Signal]:
        return [s for s in self.signals if s.kind == kind]

    def daemonset(self, name: str) -> Signal | None:
        return next((s for s in self.signals if s.kind == "daemonset" and s.name == name), None)

    def init_container(self, daemonset: str, name: str) -> Signal | None:
        return next((s for s in self.signals if s.kind == "init-container" and s.daemonset == daemonset
                     and s.name == name), None)


def _version(text: object, where: str) -> Version:
    v = versions.parse(str(text)) if text else None
    if v is None:
        raise ValueError(f"{where}: {text!r} is not a release tag")
    return v


def _spans(items: list | None, first: Version, last: Version, where: str, key: str = "value") -> tuple[Span, ...]:
    out = []
    for i, item in enumerate(items or []):
        if isinstance(item, dict):
            value = item[key]
            out.append(Span(_version(item.get("first") or versions.text(first), f"{where}[{i}].first"),
                            _version(item.get("last") or versions.text(last), f"{where}[{i}].last"),
                            tuple(value) if isinstance(value, list) else value, str(item.get("note", ""))))
        else:
            out.append(Span(first, last, item))
    return tuple(out)


def _signal(row: dict, index: int) -> Signal:
    where = f"signals[{index}] {row.get('name', '?')}"
    first = _version(row.get("first"), f"{where}.first")
    last = _version(row.get("last"), f"{where}.last")
    judged = row.get("judged_by") or ()
    return Signal(
        kind=str(row.get("kind", "")), name=str(row.get("name", "")), component=str(row.get("component", "")),
        first=first, last=last, judged_by=tuple(judged), ignored=str(row.get("ignored") or ""),
        values=_spans(row.get("values"), first, last, f"{where}.values"),
        daemonset=str(row.get("daemonset", "")), state=str(row.get("state", "")),
        pod_labels=dict(row.get("pod_labels") or {}), node_selector=tuple(row.get("node_selector") or ()),
        init_containers=_spans(row.get("init_containers"), first, last, f"{where}.init_containers", "names"),
        containers=_spans(row.get("containers"), first, last, f"{where}.containers", "names"),
        conditional=str(row.get("conditional", "")), in_default_install=bool(row.get("in_default_install", True)),
        templated=bool(row.get("templated", False)),
        note=str(row.get("note", "")), gap=str(row.get("gap", "")), raw=row)


def parse(data: dict) -> Inventory:
    return Inventory(newest=_version(data.get("newest"), "newest"),
                     versions_read=tuple(_version(t, "versions_read") for t in data.get("versions_read") or ()),
                     signals=tuple(_signal(row, i) for i, row in enumerate(data.get("signals") or ())))


@cache
def load(path: Path = PATH) -> Inventory:
    with open(path, encoding="utf-8") as fh:
        return parse(yaml.safe_load(fh))
