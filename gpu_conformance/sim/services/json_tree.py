"""Walking a JSON-shaped value (dicts, lists, scalars) the way the test bed compares and sends objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def without(value: Any, drop: Callable[[str, Any], bool]) -> Any:
    """A copy of `value` without the dict entries `drop(key, value)` selects, at every depth (lists walked)."""
    if isinstance(value, dict):
        return {k: without(v, drop) for k, v in value.items() if not drop(k, v)}
    if isinstance(value, list):
        return [without(v, drop) for v in value]
    return value
