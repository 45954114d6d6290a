"""The operand side, the same for the hand-written and the real operator: a stuck stage holds the later ones.

A GPU node joins whose driver cannot load. Its validator must sit in Init:0/N (no sandbox: the toolkit never
came up, so containerd has no nvidia handler), the toolkit and the gated operands in Init:0/1, no GPU allocatable,
no GFD labels, no cuda validator. Once the host is mended the stages complete in order, each only after what it
validates was ready (read from a watch of every write, ordered by resourceVersion).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpu_conformance import operands as op
from gpu_conformance.cluster.podstate import pod_status_text
from gpu_conformance.sim.operator import operand_loop as hosts
from gpu_conformance.sim.operator import pod_states

pytestmark = pytest.mark.sim
NEW = "gpu-node-1"
Obj = dict[str, Any]


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.realop)])
def booted(request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    from gpu_conformance.sim.session import start_sim

    operator = request.param
    b = start_sim(profile="v25.3", gpu_nodes=1, cpu_nodes=1, quiet=True, operator=operator)
    try:
        yield b, operator
    finally:
        b.stop()


class Recorder:
    """Every version of the pods on one node and of the node itself, from watches, in resourceVersion order."""

    def __init__(self, api_client: Any, namespace: str, node: str) -> None:
        from kubernetes import client, watch

        self.events: list[tuple[int, str, Obj]] = []   # (resourceVersion, "pod"/"node", object)
        self._lock = threading.Lock()
        core = client.CoreV1Api(api_client)
        self._watches = [watch.Watch(), watch.Watch()]
        streams = [(self._watches[0], core.list_namespaced_pod, (namespace,), f"spec.nodeName={node}", "pod"),
                   (self._watches[1], core.list_node, (), f"metadata.name={node}", "node")]
        self._threads = [threading.Thread(target=self._run, args=s, daemon=True) for s in streams]
        for t in self._threads:
            t.start()

    def _run(self, w: Any, fn: Callable[..., Any], args: tuple[Any, ...], selector: str, kind: str) -> None:
        # The stream ends with an error when the cluster stops before stop() was seen: what was recorded stays.
        with contextlib.suppress(Exception):
            for ev in w.stream(fn, *args, field_selector=selector, timeout_seconds=300):
                obj = ev["raw_object"]
                with self._lock:
                    self.events.append((int(obj["metadata"]["resourceVersion"]), kind, obj))

    def stop(self) -> list[tuple[int, str, Obj]]:
        for w in self._watches:
            w.stop()
        with self._lock:
            return sorted(self.events, key=lambda e: e[0])


def _app(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get("app", "")


def _versions(events: list[tuple[int, str, Obj]], app: str) -> list[tuple[int, Obj]]:
    return [(rv, o) for rv, kind, o in events if kind == "pod" and _app(o) == app]


def _at(versions: list[tuple[int, Obj]], rv: int) -> Obj:
    """The object as it was just before resourceVersion rv."""
    before = [o for v, o in versions if v < rv]
    assert before, f"nothing recorded before {rv}"
    return before[-1]


def _stage(pod: Obj) -> str:
    names = [c["name"] for c in pod["spec"].get("initContainers") or []]
    done = pod_states.init_progress(pod)
    return names[done] if done < len(names) else "done"


def _first(versions: list[tuple[int, Obj]], pred: Callable[[Obj], bool]) -> int:
    return next(rv for rv, o in versions if pred(o))


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _gpus(node: Obj, key: str = "allocatable") -> int:
    return int((node.get("status") or {}).get(key, {}).get("nvidia.com/gpu", "0"))


def _wait(what: Callable[[], bool], message: Callable[[], str], timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError(f"timed out: {message()}")
        time.sleep(0.3)


def test_a_stuck_driver_holds_every_later_stage_until_mended(booted: tuple[Any, str]) -> None:
    b, operator = booted
    sim = b.install
    kube = sim.api
    ns = sim.namespace

    def pods() -> dict[str, Obj]:
        live = [p for p in kube.list("Pod", ns) if p["spec"].get("nodeName") == NEW
                and not p["metadata"].get("deletionTimestamp")]
        return {_app(p): p for p in sorted(live, key=lambda p: p["metadata"]["creationTimestamp"])}

    def picture() -> dict[str, str]:
        return {app: pod_status_text(p) for app, p in pods().items()}

    recorder = Recorder(b.cluster.api_client(), ns, NEW)
    hosts.join_gpu_node(sim, NEW, operator, host=[hosts.DRIVER_UNLOADABLE])
    validator_inits = [c["name"] for c in sim.manifests.daemonset(op.VALIDATOR.daemonset)["spec"]["template"]
                       ["spec"]["initContainers"]]
    held = {op.DRIVER.daemonset: "CrashLoopBackOff", op.TOOLKIT.daemonset: "Init:0/1",
            op.VALIDATOR.daemonset: f"Init:0/{len(validator_inits)}", op.DEVICE_PLUGIN.daemonset: "Init:0/1",
            op.GFD.daemonset: "Init:0/1", op.DCGM_EXPORTER.daemonset: "Init:0/1"}
    _wait(lambda: all(picture().get(app) == text for app, text in held.items()), lambda: str(picture()))
    time.sleep(3)  # held, not just slow: nothing moved on
    now = pods()
    assert {app: pod_status_text(now[app]) for app in held} == held
    states = {cs["name"]: next(iter(cs["state"])) for cs in now[op.VALIDATOR.daemonset]["status"]
              ["initContainerStatuses"]}
    # The toolkit never came up on the new node, so containerd has no nvidia handler: the validator
    # (runtimeClassName nvidia) gets no sandbox and none of its init containers runs.
    assert states == dict.fromkeys(validator_inits, "waiting")
    assert op.CUDA_VALIDATOR_APP not in now
    node = kube.get("Node", NEW)
    assert not any(k.startswith("nvidia.com/") for k in node["status"]["allocatable"]), node["status"]
    labels = node["metadata"]["labels"]
    assert "nvidia.com/gpu.product" not in labels and "nvidia.com/mig.config.state" not in labels

    hosts.set_host_fault(kube, NEW, hosts.DRIVER_UNLOADABLE, present=False)

    def healthy() -> bool:
        now = pods()
        n = kube.get("Node", NEW)
        return (all(_ready(now[a]) for a in held if a in now) and set(held) <= set(now)
                and (now.get(op.CUDA_VALIDATOR_APP) or {}).get("status", {}).get("phase") == "Succeeded"
                and _gpus(n) > 0 and "nvidia.com/gpu.product" in n["metadata"]["labels"]
                and n["metadata"]["labels"].get("nvidia.com/mig.config.state") == "success")

    _wait(healthy, lambda: str(picture()))
    time.sleep(1)
    events = recorder.stop()

    validator = _versions(events, op.VALIDATOR.daemonset)
    # One stage after the other, in the DaemonSet's order, none skipped.
    seen: list[str] = []
    for _, v in validator:
        if not seen or seen[-1] != _stage(v):
            seen.append(_stage(v))
    assert seen == [*validator_inits, "done"], seen
    passed = {name: _first(validator, lambda v, i=i: pod_states.init_progress(v) > i)
              for i, name in enumerate(validator_inits)}
    # Each stage passed only once what it validates was ready.
    assert _ready(_at(_versions(events, op.DRIVER.daemonset), passed["driver-validation"]))
    assert _ready(_at(_versions(events, op.TOOLKIT.daemonset), passed["toolkit-validation"]))
    cuda = _at(_versions(events, op.CUDA_VALIDATOR_APP), passed["cuda-validation"])
    assert cuda["status"]["phase"] == "Succeeded"
    nodes = [(rv, o) for rv, kind, o in events if kind == "node"]
    assert _gpus(_at(nodes, passed["plugin-validation"]), "capacity") > 0
    # The gated operands start after the validator's toolkit stage (toolkit-ready), the GPUs come with the
    # device plugin's running pod, GFD's labels with GFD's.
    for app in (op.DEVICE_PLUGIN.daemonset, op.GFD.daemonset, op.DCGM_EXPORTER.daemonset):
        started = _first(_versions(events, app), lambda p: pod_states.init_progress(p) > 0)
        assert pod_states.init_progress(_at(validator, started)) > validator_inits.index("toolkit-validation")
    advertised = _first(nodes, lambda n: _gpus(n, "capacity") > 0)
    assert _at(_versions(events, op.DEVICE_PLUGIN.daemonset), advertised)["status"]["phase"] == "Running"
    labelled = _first(nodes, lambda n: "nvidia.com/gpu.product" in n["metadata"]["labels"])
    assert _at(_versions(events, op.GFD.daemonset), labelled)["status"]["phase"] == "Running"
    # mig-manager (deployed on MIG-capable GPUs) reports its state once its pod runs.
    reported = _first(nodes, lambda n: "nvidia.com/mig.config.state" in n["metadata"]["labels"])
    assert _at(_versions(events, op.MIG_MANAGER.daemonset), reported)["status"]["phase"] == "Running"
    # Healthy stages never crashed: the validator waited, it did not restart.
    final = pods()[op.VALIDATOR.daemonset]["status"]["initContainerStatuses"]
    assert all(cs["restartCount"] == 0 for cs in final), final
