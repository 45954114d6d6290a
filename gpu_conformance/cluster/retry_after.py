"""Retrying as the API server asks: a 429 (or 5xx) with ``Retry-After: N`` is tried again after N seconds.

API Priority and Fairness answers 429 with Retry-After when a client should back off; coming back sooner only
earns another 429, so the exponential backoff alone gave up after ~1.5 s on a server that was merely busy.
client-go waits what Retry-After says for up to 10 retries; here, the same within the caller's time bound.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState
from tenacity.stop import stop_base
from tenacity.wait import wait_base

T = TypeVar("T")
# client-go's maxRetries for answers with Retry-After.
RETRY_AFTER_ATTEMPTS = 10


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the Retry-After header of an ApiException asks for, or None without a readable one."""
    value = _header(getattr(exc, "headers", None), "Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def asked_wait(exc: BaseException) -> str:
    """" (the server asked to retry after N s)" for an answer with Retry-After, else "": why a retry stopped."""
    delay = retry_after(exc)
    return f" (the server asked to retry after {delay:g} s)" if delay is not None else ""


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    try:
        items = headers.items()
    except AttributeError:
        return None
    return next((str(v) for k, v in items if str(k).lower() == name.lower()), None)


def _asked(retry_state: RetryCallState) -> float | None:
    outcome = retry_state.outcome
    return retry_after(outcome.exception()) if outcome is not None and outcome.failed else None


def _elapsed(retry_state: RetryCallState) -> float:
    return retry_state.seconds_since_start or 0.0


class wait_retry_after(wait_base):  # noqa: N801 - named like tenacity's own waits
    """Wait what Retry-After says, else what ``fallback`` says; never past ``bound`` seconds from the start."""

    def __init__(self, fallback: wait_base, bound: float) -> None:
        self.fallback = fallback
        self.bound = bound

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = _asked(retry_state)
        if delay is None:
            delay = self.fallback(retry_state)
        return max(0.0, min(delay, self.bound - _elapsed(retry_state)))


class stop_retry_after(stop_base):  # noqa: N801 - named like tenacity's own stops
    """Stop after ``bound`` seconds; without Retry-After after ``attempts`` tries (None: no limit), with it after
    RETRY_AFTER_ATTEMPTS, or at once when it asks for a wait that ends beyond the bound."""

    def __init__(self, bound: float, attempts: int | None = None) -> None:
        self.bound = bound
        self.attempts = attempts

    def __call__(self, retry_state: RetryCallState) -> bool:
        elapsed = _elapsed(retry_state)
        if elapsed >= self.bound:
            return True
        delay = _asked(retry_state)
        if delay is None:
            return self.attempts is not None and retry_state.attempt_number >= self.attempts
        return retry_state.attempt_number >= RETRY_AFTER_ATTEMPTS or elapsed + delay > self.bound


def while_busy(call: Callable[[], T], bound: float = 15.0) -> T:
    """``call()``, tried again while the server answers 429/503 with a Retry-After that fits in ``bound`` seconds.

    For the simulated cluster's own clients: a fresh API server answers 429 "storage is (re)initializing"
    (Retry-After: 1) for a moment after a CRD is created. urllib3 used to retry those silently; it no longer waits
    for Retry-After (connect.py says why), so the callers that need it say so here.
    """
    deadline = time.monotonic() + bound
    while True:
        try:
            return call()
        except ApiException as e:
            delay = retry_after(e) if e.status in (429, 503) else None
            if delay is None or time.monotonic() + delay > deadline:
                raise
            time.sleep(max(delay, 0.1))
