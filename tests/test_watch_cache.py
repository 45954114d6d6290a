"""The simulated kubelet's LIST+WATCH copy (sim/services/watch_cache.py) against a real
kube-apiserver (etcd + apiserver)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpu_conformance.sim.controlplane.cluster import SimCluster
from gpu_conformance.sim.services.kube_client import Kube, collection_path
from gpu_conformance.sim.services.watch_cache import WatchCache, WatchSet

NS = "watch-cache-test"


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with SimCluster(api_only=True) as sim:
        k = Kube(sim.api_client())
        k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield k


def _cm(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"v": value}}


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "the watch did not deliver in time"
        time.sleep(0.05)


def _values(cache: WatchCache) -> dict[str, str]:
    return {o["metadata"]["name"]: o["data"]["v"] for o in cache.items()}


@pytest.mark.sim
def test_the_copy_follows_creates_updates_and_deletes_and_says_who_changed(kube: Kube) -> None:
    kube.create(_cm("before", "0"))
    touched: list[str] = []
    watches = WatchSet(kube)
    cache = watches.watch("cm", collection_path("ConfigMap", NS), lambda o: touched.append(o["metadata"]["name"]))
    try:
        assert _values(cache) == {"before": "0"}  # the LIST
        seen = watches.generation()
        kube.create(_cm("after", "1"))
        assert watches.wait_for_change(seen, 10.0, debounce=0)
        kube.patch("ConfigMap", "before", {"data": {"v": "2"}}, NS)
        kube.delete("ConfigMap", "after", NS)
        _until(lambda: _values(cache) == {"before": "2"})
        assert {"before", "after"} <= set(touched)
        seen = watches.generation()
        assert not watches.wait_for_change(seen, 0.3, debounce=0)  # nothing changed: the wait times out
    finally:
        watches.stop()


@pytest.mark.sim
def test_an_own_write_is_seen_at_once_and_an_older_event_does_not_undo_it(kube: Kube) -> None:
    created = kube.create(_cm("mine", "a"))
    cache = WatchCache(kube, collection_path("ConfigMap", NS), threading.Condition()).start()
    try:
        newer = kube.patch("ConfigMap", "mine", {"data": {"v": "b"}}, NS)
        cache.apply(newer)
        assert _values(cache)["mine"] == "b"  # before any event arrived
        cache._event({"type": "MODIFIED", "object": created})  # a late event with the older version
        assert _values(cache)["mine"] == "b"
        cache._event({"type": "DELETED", "object": created})   # nor does a delete older than what we hold
        assert _values(cache)["mine"] == "b"
    finally:
        cache.stop()


class _GoneOnce(WatchCache):
    """The first watch answers as the API server does for a compacted resourceVersion: an ERROR event, 410."""

    gone = False

    def _watch(self) -> None:
        if not self.gone:
            self.gone = True
            self._event({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                                     "message": "too old resource version"}})
        super()._watch()


@pytest.mark.sim
def test_a_watch_from_a_compacted_version_starts_over_from_a_list(kube: Kube) -> None:
    cache = _GoneOnce(kube, collection_path("ConfigMap", NS), threading.Condition()).start()
    try:
        _until(lambda: cache.relists == 2)  # the first LIST, then the one after 410 Gone
        kube.create(_cm("later", "x"))
        _until(lambda: "later" in _values(cache))
    finally:
        cache.stop()


class _CountingKube(Kube):
    """Kube that remembers every GET of a collection (a LIST) it sent."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.lists: list[str] = []

    def request(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        if method == "GET" and path.rsplit("/", 1)[-1] in ("pods", "nodes"):
            self.lists.append(path)
        return super().request(method, path, body, query, content_type)


def _pod_on(ds: dict[str, Any], node: str) -> dict[str, Any]:
    tpl = ds["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{ds['metadata']['name']}-x", "namespace": ds["metadata"]["namespace"],
                         "labels": dict(tpl["metadata"]["labels"])},
            "spec": {**tpl["spec"], "nodeName": node}}


@pytest.mark.sim
def test_the_operand_loop_lists_once_then_runs_every_stage_from_its_copy(kube: Kube) -> None:
    """At 1,000 nodes a LIST of every pod each round was the install's largest cost: rounds read the watch copy,
    and the loop's own writes are in it at once (the validator's stages pass one per round, with no LIST)."""
    from gpu_conformance import operands as op
    from gpu_conformance.sim.operator import install as inst
    from gpu_conformance.sim.operator import operand_loop as ol
    from gpu_conformance.sim.operator import pod_states
    from gpu_conformance.sim.operator.kwok_nodes import node_object
    from gpu_conformance.sim.profiles.catalogue import get_profile

    counting = _CountingKube(kube.client)
    profile, ns, node = get_profile("v25.3"), "gpu-operator", "gpu-node-0"
    m = inst.build(profile, ns, [node], [])
    kube.create(m.namespace_object)
    for obj in [*m.runtime_classes, *m.service_accounts, node_object(m.gpu_nodes[0], profile, "v1.36.0")]:
        kube.create(obj)
    wanted = (op.DRIVER.daemonset, op.TOOLKIT.daemonset, op.VALIDATOR.daemonset, op.DEVICE_PLUGIN.daemonset)
    for ds in m.daemonsets:
        if ds["metadata"]["name"] in wanted:
            pod = kube.create(_pod_on(ds, node))
            if not ol.played(pod):  # the driver: what kwok would report for it
                kube.patch("Pod", pod["metadata"]["name"], {"status": pod_states.running_ready(pod)}, ns, status=True)
    sim = ol.OperandSim(counting, profile, ns, watch=True)
    try:
        progress: list[int] = []
        for _ in range(40):
            seen = sim.generation()
            sim.step()
            validator = next(p for p in sim.pods if p["metadata"]["labels"].get("app") == op.VALIDATOR.daemonset)
            progress.append(pod_states.init_progress(validator))
            if (validator.get("status") or {}).get("phase") == "Running" and node in sim.advertised:
                break
            sim.wait_for_change(seen, 1.0)
        else:
            pytest.fail(f"the validator did not get through its init containers: progress {progress}")
        assert sorted(counting.lists) == ["/api/v1/namespaces/gpu-operator/pods", "/api/v1/nodes"]
        assert progress == sorted(progress) and len(set(progress)) >= 4  # a stage at a time, in order
    finally:
        sim.close()
