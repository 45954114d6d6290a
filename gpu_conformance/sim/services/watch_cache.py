"""A LIST-then-WATCH copy of one kind of object, for the simulated kubelet (sim/operator/operand_loop.py).

Why: the operand loop used to LIST every node and every operator pod each round. At 1,000 GPU nodes that is
~9,000 pods serialised by the API server and decoded in Python several times a second, the largest share of a
1,000-node install's CPU on these 2 cores. One LIST and one WATCH per kind keep the same view for the cost
of the changes alone, as a kubelet's or controller's informer does.

Read-your-writes: the loop puts what the API server answered to its own writes into the cache at once
(`apply`), so the next round does not act again on the old state; an event older than what the cache holds
(by resourceVersion, which this simulated cluster's etcd numbers in order) is ignored.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpu_conformance.cluster.connect import raw_stream

Obj = dict[str, Any]
# The API server ends a watch after a random 5-10 min by itself; asking for less keeps a stalled stream short.
_WATCH_SECONDS = 240
_RETRY_SECONDS = 0.5


def _rv(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


class WatchCache:
    """Objects of one collection path, kept current by a watch thread; `changed` wakes whoever waits on it."""

    def __init__(self, kube: Any, path: str, changed: threading.Condition,
                 on_change: Callable[[Obj], None] | None = None) -> None:
        self.kube = kube
        self.path = path
        self.changed = changed
        self.on_change = on_change or (lambda obj: None)
        self._objs: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._rv = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.relists = 0
        self.events = 0

    # ---- reading ----------------------------------------------------------------------------
    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objs.values())

    # ---- writing from the loop's own requests ---------------------------------------------------
    def apply(self, obj: Obj) -> None:
        """What the API server answered to our write: newer than (or as new as) what the watch brought so far."""
        if obj.get("metadata", {}).get("name"):
            self._put(obj)
            self.on_change(obj)

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._objs.pop(f"{namespace}/{name}", None)

    def _put(self, obj: Obj) -> None:
        key = _key(obj)
        with self._lock:
            have = self._objs.get(key)
            if have is None or _rv(obj) >= _rv(have):
                self._objs[key] = obj

    # ---- the watch ------------------------------------------------------------------------------
    def start(self) -> WatchCache:
        self._list()
        self._thread = threading.Thread(target=self._run, name=f"watch {self.path}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> None:
        body = self.kube.request("GET", self.path)
        fresh = {_key(o): o for o in body.get("items") or []}
        with self._lock:
            self._objs = fresh
        self._rv = (body.get("metadata") or {}).get("resourceVersion") or ""
        for obj in fresh.values():
            self.on_change(obj)
        self.relists += 1
        self._notify()

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch()
            except ApiException as e:
                if e.status == 410:  # our resourceVersion is too old (compacted): start over from a LIST
                    with contextlib.suppress(Exception):
                        self._list()
                    continue
                time.sleep(_RETRY_SECONDS)
            except Exception:  # a dropped connection or an API server restart: resume from where we were
                time.sleep(_RETRY_SECONDS)

    def _watch(self) -> None:
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("resourceVersion", self._rv),
                 ("timeoutSeconds", str(_WATCH_SECONDS))]
        resp = raw_stream(self.kube.client, self.path, query, timeout=(10.0, _WATCH_SECONDS + 30.0))
        try:
            buf = b""
            for chunk in resp.stream(1 << 16, decode_content=True):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._event(json.loads(line))
                if self._stop.is_set():
                    return
        finally:
            resp.release_conn()

    def _event(self, ev: Obj) -> None:
        kind, obj = ev.get("type"), ev.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=int(obj.get("code") or 500), reason=obj.get("reason") or "watch error")
        rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
        if kind == "BOOKMARK":
            self._rv = rv
            return
        if kind == "DELETED":
            with self._lock:
                have = self._objs.get(_key(obj))
                if have is not None and _rv(have) <= _rv(obj):
                    del self._objs[_key(obj)]
        else:
            self._put(obj)
        self.on_change(obj)
        self._rv = rv
        self.events += 1
        self._notify()


class WatchSet:
    """Several WatchCaches that wake one waiter: whoever reacts to changes of any of them."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.changed = threading.Condition()
        self.caches: dict[str, WatchCache] = {}

    def watch(self, name: str, path: str, on_change: Callable[[Obj], None] | None = None) -> WatchCache:
        cache = self.caches[name] = WatchCache(self.kube, path, self.changed, on_change).start()
        return cache

    def generation(self) -> int:
        """Grows with every change any watch saw (wait_for_change compares it)."""
        return sum(c.events + c.relists for c in self.caches.values())

    def wait_for_change(self, since: int, timeout: float, debounce: float = 0.05) -> bool:
        """Until a watch saw something after generation `since` (then `debounce` s more: changes come in
        bursts, a DaemonSet's pods or a node's writes, and one round should take them together), or `timeout`
        s. True when woken by a change."""
        with self.changed:
            woken = self.changed.wait_for(lambda: self.generation() != since, timeout)
        if woken and debounce:
            time.sleep(debounce)
        return woken

    def stop(self) -> None:
        for cache in self.caches.values():
            cache.stop()
