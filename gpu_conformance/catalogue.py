"""The one list of checks. README, reports and tests are generated from it."""

from __future__ import annotations

# Importing the layer modules registers their checks, in layer order.
from gpu_conformance.checks import (  # noqa: F401
    deploy_labels,
    device_plugin,
    dra,
    driver_toolkit,
    nfd,
    operator,
    probe_checks,
)
from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.model import LAYER_ORDER, Check, Layer


def all_checks() -> list[Check]:
    return sorted(REGISTRY.values(), key=lambda c: (c.layer.index, c.rank, c.id))


def checks_for(layer: Layer) -> list[Check]:
    return [c for c in all_checks() if c.layer == layer]


def get(check_id: str) -> Check:
    return REGISTRY[check_id]


def markdown_table() -> str:
    """The README's table of checks."""
    rows = ["| ID | Layer | Check | Catches |", "|---|---|---|---|"]
    for layer in LAYER_ORDER:
        for c in checks_for(layer):
            na = f" (n/a in the {' and '.join(c.na_in)} model{'s' if len(c.na_in) > 1 else ''})" if c.na_in else ""
            rows.append(f"| `{c.id}` | {c.layer} | {c.title} | {c.detects}{na} |")
    return "\n".join(rows)
