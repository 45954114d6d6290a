"""Label selectors, parsed once and matched locally (the snapshot is filtered in memory, not per node)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpu_conformance.errors import UsageError

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VAL = r"[-A-Za-z0-9_.]*"
_TERM = re.compile(
    rf"^\s*(?:(?P<neg>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|!=|=)\s*(?P<val>{_VAL})"
    rf"|\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\))?)\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op == "=":
            return value == self.values[0]
        if self.op == "!=":
            return value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        return value not in self.values  # notin


def _split_terms(text: str) -> list[str]:
    terms, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    return [t for t in terms if t.strip()]


def parse_selector(text: str) -> list[Requirement]:
    """Parse a Kubernetes label selector string ('a=b,c in (d,e),!f')."""
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        m = _TERM.match(term)
        if not m:
            raise UsageError(f"--gpu-node-selector: cannot parse {term.strip()!r} (expected e.g. 'key=value')")
        if m.group("neg"):
            reqs.append(Requirement(m.group("nkey"), "!"))
        elif m.group("op"):
            op = "=" if m.group("op") in ("=", "==") else "!="
            reqs.append(Requirement(m.group("key"), op, (m.group("val"),)))
        elif m.group("setop"):
            vals = tuple(v.strip() for v in m.group("vals").split(",") if v.strip())
            reqs.append(Requirement(m.group("key"), m.group("setop"), vals))
        else:
            reqs.append(Requirement(m.group("key"), "exists"))
    return reqs


def matches(selector: list[Requirement], labels: dict[str, str]) -> bool:
    return all(r.matches(labels) for r in selector)


def match_labels(match: dict[str, str], labels: dict[str, str]) -> bool:
    """A nodeSelector / matchLabels map: every key present with that exact value."""
    return all(labels.get(k) == v for k, v in match.items())


def parse_probe_nodes(value: str) -> str | int | list:
    """--probe-nodes: 'all', a positive count, or a label selector (said back in the usage error)."""
    value = (value or "all").strip()
    if value == "all":
        return "all"
    if value.isdigit():
        if int(value) < 1:
            raise UsageError("--probe-nodes must be 'all', a positive number of nodes, or a label selector")
        return int(value)
    try:
        return parse_selector(value)
    except UsageError:
        raise UsageError(f"--probe-nodes: {value!r} is neither 'all', a number of nodes, nor a label selector "
                         "(e.g. 'nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB')") from None
