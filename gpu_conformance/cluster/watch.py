"""A local copy of one collection kept current by one LIST and one WATCH (what an informer does).

Polling a collection re-reads every object each round: at 1,000 GPU nodes a pod LIST is ~10,000 objects,
so a loop that polls it costs the API server and this process O(rounds x objects). A watch sends each
change once. Used where something waits for many objects to change state (the simulated install, the
probe); the checks' snapshot read stays one LIST per kind.

    with WatchedList(api, "/api/v1/namespaces/ns/pods", [("labelSelector", "app=x")]) as pods:
        while not done(pods.items()):
            pods.wait(timeout=1.0)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpu_conformance.cluster.connect import raw_request

Obj = dict[str, Any]

# The server ends a watch after this long; the stream is then resumed from the last resourceVersion.
WATCH_SECONDS = 240
_RETRY_PAUSE = 0.5


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class WatchedList:
    """Objects of one collection path (plus query: labelSelector, fieldSelector), current within a watch event.

    `items()` is a snapshot of the objects; `take_changed()` the ones added, modified or deleted since the
    last call (deleted ones as None); `wait()` blocks until something changed. A watch that expires is
    resumed; one whose resourceVersion is too old (410 Gone) re-lists, and objects gone meanwhile count as
    changed. `error` holds the last failure of the background stream (it keeps retrying).
    """

    def __init__(self, api: client.ApiClient, path: str, query: list[tuple[str, str]] | None = None) -> None:
        self.api = api
        self.path = path
        self.query = list(query or [])
        self._objs: dict[str, Obj] = {}
        self._changed: set[str] = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        self.resource_version = ""
        self.requests = 0
        self.error: BaseException | None = None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> WatchedList:
        """List once (errors raise here), then follow changes in a daemon thread."""
        self._list()
        self._thread = threading.Thread(target=self._run, name=f"watch {self.path}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            # Unblocks the reading thread at once instead of at the next event or the watch's end.
            with contextlib.suppress(Exception):
                response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> WatchedList:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- reading -------------------------------------------------------------------------
    def items(self) -> list[Obj]:
        with self._cond:
            return list(self._objs.values())

    def take_changed(self) -> dict[str, Obj | None]:
        """namespace/name -> object now (None: deleted), for everything changed since the last call."""
        with self._cond:
            out = {k: self._objs.get(k) for k in self._changed}
            self._changed.clear()
            return out

    def wait(self, timeout: float) -> bool:
        """Block until something changed since the last take_changed() (True) or the timeout (False)."""
        end = time.monotonic() + timeout
        with self._cond:
            while not self._changed and not self._stop.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return bool(self._changed)

    # ---- the stream ----------------------------------------------------------------------
    def _list(self) -> None:
        self.requests += 1
        data = json.loads(raw_request(self.api, "GET", self.path, self.query))
        objs = {_key(o): o for o in data.get("items") or []}
        with self._cond:
            gone = set(self._objs) - set(objs)
            changed = {k for k, o in objs.items()
                       if (self._objs.get(k) or {}).get("metadata", {}).get("resourceVersion")
                       != o["metadata"].get("resourceVersion")}
            self._objs = objs
            self._changed |= gone | changed
            self.resource_version = (data.get("metadata") or {}).get("resourceVersion", "")
            self._cond.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
                self.error = None
            except ApiException as e:
                self.error = e
                if e.status == 410:
                    self._relist()
                    continue
                self._stop.wait(_RETRY_PAUSE)
            except Exception as e:  # noqa: BLE001 - connection lost, stopped mid-read: retry unless stopping
                self.error = e
                self._stop.wait(_RETRY_PAUSE)

    def _relist(self) -> None:
        try:
            self._list()
        except Exception as e:  # noqa: BLE001 - the next round retries
            self.error = e
            self._stop.wait(_RETRY_PAUSE)

    def _follow(self) -> None:
        query = [*self.query, ("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("resourceVersion", self.resource_version), ("timeoutSeconds", str(WATCH_SECONDS))]
        m, url, headers, _, _ = self.api.param_serialize(
            method="GET", resource_path=self.path, query_params=query, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"])
        self.requests += 1
        resp = self.api.call_api(m, url, header_params=headers, _request_timeout=(5, WATCH_SECONDS + 30))
        if resp.status >= 400:
            raise ApiException(status=resp.status, reason=resp.reason, body=resp.read()[:500])
        self._response = resp.response
        try:
            for line in resp.response:
                if self._stop.is_set():
                    return
                if line.strip():
                    self._apply(json.loads(line))
        finally:
            self._response = None
            resp.response.release_conn()

    def _apply(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=int(obj.get("code") or 500), reason=obj.get("reason"), body=obj.get("message"))
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        with self._cond:
            if kind in ("ADDED", "MODIFIED"):
                self._objs[_key(obj)] = obj
                self._changed.add(_key(obj))
            elif kind == "DELETED":
                self._objs.pop(_key(obj), None)
                self._changed.add(_key(obj))
            if rv:
                self.resource_version = rv
            if kind != "BOOKMARK":
                self._cond.notify_all()
