"""WatchedList: one LIST and one WATCH keep a local copy current (what the sim install and its waits rely on)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gpu_conformance.cluster.watch import WatchedList
from gpu_conformance.sim.controlplane import SimCluster
from gpu_conformance.sim.reconcile import Kube

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with SimCluster(api_only=True) as sim:
        k = Kube(sim.api_client())
        k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}})
        yield k


def cm(name: str, data: str = "x", labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "w", "labels": labels or {"set": "a"}}, "data": {"v": data}}


def settle(w: WatchedList, want: set[str]) -> dict[str, dict | None]:
    """Changes until the ones named in `want` have all been seen (the watch is asynchronous)."""
    seen: dict[str, dict | None] = {}
    end = time.monotonic() + 20
    while not want <= set(seen) and time.monotonic() < end:
        w.wait(1.0)
        seen.update(w.take_changed())
    return seen


def test_list_then_each_change_once(kube: Kube) -> None:
    kube.create(cm("before"))
    with WatchedList(kube.client, "/api/v1/namespaces/w/configmaps", [("labelSelector", "set=a")]) as w:
        assert {o["metadata"]["name"] for o in w.items()} == {"before"}
        assert set(w.take_changed()) == {"w/before"}  # the first LIST counts as a change
        kube.create(cm("new"))
        kube.create(cm("other-set", labels={"set": "b"}))  # outside the selector: never seen
        kube.patch("ConfigMap", "before", {"data": {"v": "y"}}, "w")
        changed = settle(w, {"w/new", "w/before"})
        assert changed["w/before"]["data"] == {"v": "y"} and "w/other-set" not in changed
        kube.delete("ConfigMap", "new", "w")
        assert settle(w, {"w/new"})["w/new"] is None
        assert {o["metadata"]["name"] for o in w.items()} == {"before"}
        assert not w.wait(0.3)  # nothing pending: wait times out
        assert w.requests == 2  # one LIST, one WATCH: nothing per object or per round


def test_stop_ends_an_idle_watch_at_once(kube: Kube) -> None:
    w = WatchedList(kube.client, "/api/v1/namespaces/w/configmaps", [("labelSelector", "set=none")]).start()
    time.sleep(0.5)  # the stream is open and idle
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 2 and w._thread is not None and not w._thread.is_alive()
