"""Waiting on a live (simulated) cluster in tests: poll until a condition holds, fail with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T | None], what: str, timeout: float = 30.0, every: float = 0.2) -> T:
    """`cond()`'s first truthy value, polled every `every` seconds; an AssertionError naming `what` after
    `timeout` seconds. An exception `cond` raises is not a "not yet": it propagates at once."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
