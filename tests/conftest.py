"""Shared test setup: `factory` importable everywhere; the simulated cluster's binaries on demand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Every check registers itself when the catalogue imports the check modules; a test module run alone must see them.
import gpu_conformance.catalogue  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))

_binaries: dict[str, str | None] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `sim` need the binaries: build them once (first time ~10 min), skip only without Go."""
    if item.get_closest_marker("sim") is None:
        return
    if "error" not in _binaries:
        from gpu_conformance.sim.binaries import GoNotFoundError, ensure_binaries

        try:
            ensure_binaries()
            _binaries["error"] = None
        except GoNotFoundError as e:
            _binaries["error"] = str(e)
    if _binaries["error"]:
        pytest.skip(f"simulated cluster binaries not available: {_binaries['error']}")
