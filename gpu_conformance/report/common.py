"""Wording and grouping shared by the HTML, terminal and diff reporters, so that they say the same thing."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gpu_conformance.model import LAYER_ORDER
from gpu_conformance.operands import POLICY_SWITCHES

# Text labels and symbols for every status: reports must read without colour (print, colour-blind readers).
STATUS_SYMBOL: dict[str, str] = {
    "pass": "\u2714",     # heavy check mark
    "fail": "\u2718",     # heavy ballot x
    "blocked": "\u2298",  # circled division slash
    "warn": "!",
    "n/a": "\u2013",      # en dash
}
STATUS_ORDER = ["pass", "fail", "blocked", "warn", "n/a"]

DRIVER_CONFIG_LABEL: dict[str, str] = {
    "operator": "operator driver container",
    "host": "host-installed driver",
    "pre-installed": "pre-installed driver (driver container disabled)",
    "nvidiadriver-cr": "NVIDIADriver custom resource",
    "unknown": "unknown driver setup",
}

LAYER_NAMES = [str(layer) for layer in LAYER_ORDER]


def layer_rank(layer: str) -> int:
    """Position of a layer in the operator -> probe chain; unknown names sort last."""
    return LAYER_NAMES.index(layer) if layer in LAYER_NAMES else len(LAYER_NAMES)


_NAT_SPLIT = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort gpu-node-2 before gpu-node-10, as a person expects."""
    return tuple(int(p) if p.isdigit() else p for p in _NAT_SPLIT.split(name))


def node_sorted(names: Iterable[str]) -> list[str]:
    return sorted(names, key=natural_key)


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _ranges(nums: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(set(nums)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def compress_names(names: Iterable[str], max_len: int = 100, sample: int = 3) -> str:
    """Many node names in one short phrase: "gpu-node-[0-989]", else "a, b, c and 40 more".

    Numbered fleets (the common case) compress to ranges per prefix. Names that do not (cloud host names
    with the number in the middle) fall back to a few examples, so a 1,000-node list never floods a line.
    """
    ordered = node_sorted(set(names))
    if len(ordered) <= 1:
        return ordered[0] if ordered else ""
    groups: dict[tuple[str, str, int], list[int]] = {}
    singles: list[str] = []
    for name in ordered:
        m = re.fullmatch(r"(.*?)(\d+)(\D*)", name)
        if not m:
            singles.append(name)
            continue
        digits = m.group(2)
        # Zero-padded numbers (node-007) keep their width when printed back.
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((m.group(1), m.group(3), width), []).append(int(digits))
    parts: list[str] = []
    for (prefix, suffix, width), nums in groups.items():
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}{suffix}")
            continue
        spans = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in _ranges(nums))
        parts.append(f"{prefix}[{spans}]{suffix}")
    parts.extend(singles)
    text = ", ".join(node_sorted(parts))
    if len(text) <= max_len:
        return text
    return f"{', '.join(ordered[:sample])} and {len(ordered) - sample} more"


def names_are_complete(names: Iterable[str], phrase: str) -> bool:
    """Whether compress_names gave every name (ranges) rather than examples ("... and N more")."""
    return not phrase.endswith(" more") or len(set(names)) <= 1


def driver_config_summary(driver_config: Mapping[str, str]) -> str:
    """'operator driver container on 3 nodes; host-installed driver on 1 node'."""
    if not driver_config:
        return "not detected"
    counts = Counter(driver_config.values())
    return "; ".join(
        f"{DRIVER_CONFIG_LABEL.get(kind, kind)} on {plural(n, 'node')}"
        for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def format_duration(seconds: float | int | None) -> str:
    if seconds is None:
        return "unknown"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    minutes, sec = divmod(int(round(s)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def format_value(value: Any) -> str:
    """A ClusterPolicy switch as a person says it: on/off rather than True/False."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == "":
        return "unset"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_value(v)}" for k, v in value.items()) or "none"
    return str(value)


# The switches people ask about first, in the order the session writes them (one list, operands.POLICY_SWITCHES);
# keys from elsewhere (an older report) follow alphabetically.
POLICY_ORDER = list(POLICY_SWITCHES)


def policy_items(policy: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(label, value) pairs of the ClusterPolicy switches, known ones first: 'mig strategy' -> 'single'."""
    if not policy:
        return []
    rank = {k: i for i, k in enumerate(POLICY_ORDER)}
    keys = sorted(policy, key=lambda k: (rank.get(str(k), len(rank)), str(k)))
    return [(str(k), format_value(policy[k])) for k in keys]


def root_cause_key(node: str, rc: Mapping[str, Any]) -> tuple[str, str, str]:
    """Root causes that differ only by the node's own name in the message are the same problem."""
    message = str(rc.get("message", ""))
    if node:
        message = message.replace(node, "<node>")
    return (str(rc.get("layer", "")), str(rc.get("check", "")), message)


def root_cause_sentence(rc: Mapping[str, Any]) -> str:
    """The same wording as verdict.RootCause.sentence(), from the JSON form."""
    return f"{rc.get('layer')} ({rc.get('check')}): {rc.get('message')}"


def group_root_causes(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[list[str], dict[str, Any]]]:
    """Failing nodes grouped by identical root cause: earliest layer first, then biggest group, then name.

    Each group's root cause is the first node's; when a group holds several nodes whose messages named
    themselves, the message shows "<node>" in place of the name.
    """
    groups: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = {}
    for n in nodes:
        rc = n.get("root_cause")
        if not rc:
            continue
        groups.setdefault(root_cause_key(n["name"], rc), []).append((n["name"], dict(rc)))
    out: list[tuple[list[str], dict[str, Any]]] = []
    for (layer, check, message), members in groups.items():
        names = node_sorted(name for name, _ in members)
        rc = dict(members[0][1])
        if len(names) > 1:
            rc = {"layer": layer, "check": check, "message": message}
        out.append((names, rc))
    out.sort(key=lambda g: (layer_rank(g[1].get("layer", "")), -len(g[0]), natural_key(g[0][0])))
    return out
