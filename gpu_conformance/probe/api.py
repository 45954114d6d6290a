"""The probe's API client: raw requests with transient errors retried within a bound, and the API's own words
when it refuses (an admission webhook's, a quota's).

Every write and read of the probe goes through `ProbeApi`; the run (`run.py`) and the leftover sweep
(`leftovers.py`) share it. A lost API server is retried for API_OUTAGE_BOUND seconds, then the run ends with
exit 3; cleanup retries for CLEANUP_BOUND so an API-server restart mid-probe does not leak the probe's pods.
"""

from __future__ import annotations

import json
import re
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import Retrying, retry_if_exception, wait_exponential

from gpu_conformance.cluster.connect import Connection, raw_request
from gpu_conformance.cluster.retry_after import asked_wait, stop_retry_after, wait_retry_after
from gpu_conformance.cluster.unreachable import unreachable
from gpu_conformance.errors import ClusterAccessError

# How long a lost API server (connection refused, reset, 5xx, 429) is retried before the run gives up
# (exit 3), and how long cleanup keeps trying to delete what the run created.
API_OUTAGE_BOUND = 30.0
CLEANUP_BOUND = 60.0
REQUEST_TIMEOUT = (5, 30)


class ProbeApiError(Exception):
    """An HTTP error answer, with its status and the API's own message (e.g. an admission policy's)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')
_POD_PREFIX = re.compile(r'^pods? "[^"]*" is forbidden: ')
# How the API server words an admission webhook it could not call (hanging, down, bad certificate): a 500, or
# a 504 when the request's own deadline ran out first. Retrying waits out the webhook's timeout again each time.
_WEBHOOK_CALL_FAILED = re.compile(r"failed (?:calling|to call) webhook")


def _status_text(e: ApiException) -> str:
    """The Status object's message (the body may be cut short), without 'pods "x" is forbidden: '; '' if none."""
    m = _MESSAGE.search(str(e.body or ""))
    if not m:
        return ""
    try:
        text = json.loads(f'"{m.group(1)}"')
    except ValueError:
        text = m.group(1)
    return _POD_PREFIX.sub("", text)


def _status_message(e: ApiException) -> str:
    """The Status message, else the start of the body, else the HTTP reason: never empty."""
    return _status_text(e) or str(e.body or "")[:500] or str(e.reason)


def _webhook_failure(e: ApiException) -> bool:
    """A 5xx that is an admission webhook failing, not the API server: a refusal in the webhook's words."""
    return e.status in (500, 504) and bool(_WEBHOOK_CALL_FAILED.search(_status_text(e)))


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in (429, 500, 502, 503, 504) and not _webhook_failure(exc)
    return isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


class ProbeApi:
    """Raw requests with transient errors retried for up to `bound` seconds."""

    def __init__(self, conn: Connection, bound: float | None = None) -> None:
        self.conn = conn
        self.bound = API_OUTAGE_BOUND if bound is None else bound
        self.requests = 0

    def request(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
                bound: float | None = None, retry_http: bool = True) -> bytes:
        limit = self.bound if bound is None else bound

        def retryable(e: BaseException) -> bool:
            return _transient(e) and (retry_http or not isinstance(e, ApiException))

        # A 429's Retry-After is waited for (within the bound), not knocked on sooner.
        retrying = Retrying(retry=retry_if_exception(retryable), stop=stop_retry_after(limit),
                            wait=wait_retry_after(wait_exponential(multiplier=0.2, max=2), limit), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    self.requests += 1
                    return raw_request(self.conn.api, method, path, query, body, timeout=REQUEST_TIMEOUT)
        except ApiException as e:
            if _transient(e) and retry_http:
                # The last answer's own words (an etcd timeout, a quota controller) say more than "HTTP 500".
                said = _status_text(e)
                raise ClusterAccessError(f"the API server at {self.conn.server} kept failing for {limit:g}s "
                                         f"during the probe: HTTP {e.status} {e.reason}{asked_wait(e)}"
                                         + (f": {said}" if said else "")) from None
            raise ProbeApiError(e.status or 0, _status_message(e)) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterAccessError(f"{unreachable(self.conn, e)} (retried for {limit:g}s during the probe)") from None
        raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises

    def json(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
             **kw: Any) -> Any:
        data = self.request(method, path, query, body, **kw)
        return json.loads(data) if data else {}

    def items(self, path: str, query: list[tuple[str, str]] | None = None, **kw: Any) -> list[dict]:
        return self.json("GET", path, query, **kw).get("items") or []

    def get_or_none(self, path: str) -> dict | None:
        try:
            return self.json("GET", path)
        except ProbeApiError as e:
            if e.status == 404:
                return None
            raise

