"""The operand loop's stage logic without a cluster: one init container per round, each held by its stage."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gpu_conformance import operands as op
from gpu_conformance.cluster.podstate import pod_status_text
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.operator import operand_loop as ol
from gpu_conformance.sim.operator import pod_states
from gpu_conformance.sim.operator.kwok_nodes import node_object
from gpu_conformance.sim.profiles.catalogue import get_profile

Obj = dict[str, Any]
NODE = "gpu-node-0"
NS = "gpu-operator"


class FakeKube:
    """Just what OperandSim uses: list, get (the hosts ConfigMap), merge-patch of status/labels, create."""

    def __init__(self, nodes: list[Obj], pods: list[Obj]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.configmaps: dict[str, Obj] = {}
        self.events: list[Obj] = []

    def list(self, kind: str, namespace: str | None = None, label_selector: str = "") -> list[Obj]:
        items = {"Node": self.nodes, "Pod": self.pods}.get(kind, {})
        return [copy.deepcopy(o) for o in items.values()]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        if kind == "ConfigMap" and name in self.configmaps:
            return copy.deepcopy(self.configmaps[name])
        raise ApiException(status=404)

    def create(self, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        if obj["kind"] == "Event":
            self.events.append(obj)
        elif obj["kind"] == "ConfigMap":
            if obj["metadata"]["name"] in self.configmaps:
                raise ApiException(status=409)  # as the API server: a second host fault must not reset the first
            self.configmaps[obj["metadata"]["name"]] = obj
        else:
            obj["metadata"].setdefault("name", f"{op.CUDA_VALIDATOR_APP}-x{len(self.pods)}")
            obj["metadata"].update(uid=obj["metadata"]["name"], creationTimestamp="2026-01-01T00:00:09Z")
            self.pods[obj["metadata"]["name"]] = obj
        return obj

    def patch(self, kind: str, name: str, patch: Obj, namespace: str | None = None, status: bool = False) -> Obj:
        target = {"Node": self.nodes, "Pod": self.pods, "ConfigMap": self.configmaps}[kind][name]
        for key, value in patch.items():
            if key == "data":
                data = target.setdefault("data", {})
                data.update({k: v for k, v in value.items() if v is not None})
                for k in [k for k, v in value.items() if v is None]:  # merge patch: null deletes the key
                    data.pop(k, None)
            elif key == "status" and kind == "Pod":
                target["status"] = value
            else:
                for sub, val in value.items():
                    target.setdefault(key, {}).setdefault(sub, {}).update(val) if isinstance(val, dict) \
                        else target.setdefault(key, {}).__setitem__(sub, val)
        return target

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Obj:
        self.pods.pop(path.rsplit("/", 1)[1], None)
        return {}

    def path(self, kind: str, name: str, namespace: str | None = None) -> str:
        return f"/{kind}/{name}"


def _pod(ds: Obj, uid: str, status: Obj | None = None) -> Obj:
    tpl = ds["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": uid, "uid": uid, "namespace": NS, "labels": dict(tpl["metadata"]["labels"]),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {**copy.deepcopy(tpl["spec"]), "nodeName": NODE}, "status": status or {"phase": "Pending"}}


@pytest.fixture
def cluster() -> tuple[FakeKube, ol.OperandSim]:
    profile = get_profile("v25.3")
    m = inst.build(profile, NS, [NODE], [])
    node = node_object(m.gpu_nodes[0], profile, "v1.36.0")
    pods = []
    for ds in m.daemonsets:
        if ds["metadata"]["name"] in (op.DRIVER.daemonset, op.TOOLKIT.daemonset, op.VALIDATOR.daemonset,
                                      op.DEVICE_PLUGIN.daemonset, op.GFD.daemonset):
            pod = _pod(ds, ds["metadata"]["name"])
            if not ol.played(pod):  # the driver pod: kwok made it Running and Ready
                pod["status"] = pod_states.running_ready(pod)
            pods.append(pod)
    kube = FakeKube([node], pods)
    return kube, ol.OperandSim(kube, profile, NS, workers=1)


def _text(kube: FakeKube, app: str) -> str:
    return pod_status_text(next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == app))


def _with_host_fault(cluster: tuple[FakeKube, ol.OperandSim], fault: str, rounds: int) -> FakeKube:
    kube, sim = cluster
    ol.set_host_fault(kube, NODE, fault)
    for _ in range(rounds):
        sim.step()
    return kube


def test_only_validation_pods_are_played() -> None:
    m = inst.build(get_profile("v25.3"), NS, [NODE], [])
    played = {d["metadata"]["name"] for d in m.daemonsets if ol.played(_pod(d, "x"))}
    assert op.DRIVER.daemonset not in played
    assert {op.TOOLKIT.daemonset, op.VALIDATOR.daemonset, op.DEVICE_PLUGIN.daemonset, op.GFD.daemonset} <= played


def test_driver_unloadable_holds_everything_then_stages_pass_one_per_round(cluster: Any) -> None:
    kube = _with_host_fault(cluster, ol.DRIVER_UNLOADABLE, 5)
    sim = cluster[1]
    assert _text(kube, op.DRIVER.daemonset) == "CrashLoopBackOff"
    assert _text(kube, op.TOOLKIT.daemonset) == "Init:0/1"
    assert _text(kube, op.VALIDATOR.daemonset) == "Init:0/4"
    assert _text(kube, op.DEVICE_PLUGIN.daemonset) == "Init:0/1"
    # A fresh node: no toolkit has run, so containerd has no nvidia handler and the runtimeClassName nvidia pods
    # get no sandbox (kubelet shows them Init:0/N all the same).
    v = next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == op.VALIDATOR.daemonset)
    assert {"type": "PodReadyToStartContainers", "status": "False"}.items() <= v["status"]["conditions"][0].items()
    assert not any(k.startswith("nvidia.com/") for k in kube.nodes[NODE]["status"]["capacity"])
    assert "nvidia.com/gpu.product" not in kube.nodes[NODE]["metadata"]["labels"]

    ol.set_host_fault(kube, NODE, ol.DRIVER_UNLOADABLE, present=False)
    progress = []
    for _ in range(12):
        sim.step()
        progress.append(_text(kube, op.VALIDATOR.daemonset))
    # Driver back (round 1); the toolkit passes driver-validation and writes containerd's nvidia handler (round
    # 2), so the validator gets its sandbox; then one stage per round; cuda waits while its pod is created and
    # completes.
    assert progress[:8] == ["Init:0/4", "Init:0/4", "Init:1/4", "Init:2/4", "Init:2/4", "Init:2/4", "Init:3/4",
                            "Running"]
    assert _text(kube, op.CUDA_VALIDATOR_APP) == "Completed"
    assert kube.nodes[NODE]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert "nvidia.com/gpu.product" in kube.nodes[NODE]["metadata"]["labels"]


def test_kubelet_events_follow_the_containers_the_loop_starts_and_backs_off(cluster: Any) -> None:
    kube, sim = cluster
    sim.kubelet_events = True
    ol.set_host_fault(kube, NODE, ol.CUDA_FAILING)
    for _ in range(8):
        sim.step()

    def seen(app: str) -> list[tuple[str, str]]:
        return [(e["reason"], e["involvedObject"]["fieldPath"]) for e in kube.events
                if e["involvedObject"]["name"].startswith(app)]

    v = seen(op.VALIDATOR.daemonset)
    # No sandbox until the toolkit came up on the node; then each container once, in kubelet's order, the validator's
    # chain as far as cuda-validation (held by the cuda pod).
    assert v[:4] == [("FailedCreatePodSandBox", ""), *[(r, "spec.initContainers{driver-validation}")
                                                       for r in ("Pulled", "Created", "Started")]]
    assert next(e for e in kube.events if e["reason"] == "FailedCreatePodSandBox")["message"].endswith(
        'no runtime for "nvidia" is configured')
    assert [f for r, f in v if r == "Started"] == [f"spec.initContainers{{{c}}}" for c in (
        "driver-validation", "toolkit-validation", "cuda-validation")]
    assert ("Started", "spec.containers{nvidia-device-plugin}") in seen(op.DEVICE_PLUGIN.daemonset)
    # The failing vectorAdd: started once, then kubelet's back-off.
    assert seen(op.CUDA_VALIDATOR_APP) == [(r, "spec.initContainers{cuda-validation}") for r in (
        "Pulled", "Created", "Started", "BackOff")]
    e = next(e for e in kube.events if e["reason"] == "Pulled")
    assert e["message"].startswith('Container image "') and e["source"] == {"component": "kubelet", "host": NODE}


def test_a_deleted_pod_leaves_kubelets_killing_events_for_the_containers_it_ran(cluster: Any) -> None:
    kube, sim = cluster
    sim.kubelet_events = True
    ol.set_host_fault(kube, NODE, ol.DRIVER_UNLOADABLE)
    sim.handler_nodes.add(NODE)  # the toolkit ran here before: the validator gets its sandbox, waits for the driver
    for _ in range(3):
        sim.step()
    assert _text(kube, op.VALIDATOR.daemonset) == "Init:0/4"
    kube.pods.pop(op.VALIDATOR.daemonset)
    kube.pods.pop(op.DRIVER.daemonset)  # not a pod the loop runs: kwok's
    sim.step()
    sim.step()
    killing = [(e["involvedObject"]["name"], e["message"], e["involvedObject"]["fieldPath"]) for e in kube.events
               if e["reason"] == "Killing"]
    # The init container it was held in (as the kind tier shows for the validator in driver-validation); once.
    assert killing == [(op.VALIDATOR.daemonset, "Stopping container driver-validation",
                        "spec.initContainers{driver-validation}")]


def test_a_fresh_nodes_handler_comes_a_while_after_its_toolkit_is_ready(cluster: Any) -> None:
    kube, sim = cluster
    now = [100.0]
    sim.handler_delay, sim.clock = 12.0, lambda: now[0]

    def validator() -> Obj:
        return next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == op.VALIDATOR.daemonset)

    for _ in range(4):
        sim.step()
    assert _text(kube, op.TOOLKIT.daemonset) == "Running"
    assert pod_states.init_progress(validator()) == 0 and validator()["status"]["conditions"][0]["status"] == "False"
    now[0] += 12.0  # the installer wrote containerd's config and restarted it
    sim.step()
    sim.step()
    assert pod_states.init_progress(validator()) >= 1


def test_clobbered_runtime_crash_loops_toolkit_validation_and_keeps_operands_waiting(cluster: Any) -> None:
    kube = _with_host_fault(cluster, ol.RUNTIME_CLOBBERED, 6)
    assert _text(kube, op.VALIDATOR.daemonset) == "Init:CrashLoopBackOff"
    assert _text(kube, op.GFD.daemonset) == "Init:0/1"
    assert "nvidia.com/gpu" not in kube.nodes[NODE]["status"]["capacity"]


def test_failing_vectoradd_crash_loops_the_cuda_pod_and_holds_the_validator(cluster: Any) -> None:
    kube = _with_host_fault(cluster, ol.CUDA_FAILING, 8)
    # restartPolicy OnFailure (validator/cuda-workload-validation.yaml): kubelet restarts vectorAdd, the pod stays
    # Pending in its init container's back-off — as the kind tier shows with NVIDIA's validator — never Failed.
    assert _text(kube, op.CUDA_VALIDATOR_APP) == "Init:CrashLoopBackOff"
    assert _text(kube, op.VALIDATOR.daemonset) == "Init:2/4"
    # The device plugin is not held by cuda: GPUs are advertised, plugin-validation is simply not reached.
    assert kube.nodes[NODE]["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_missing_runtime_handler_leaves_runtime_class_pods_without_sandbox(cluster: Any) -> None:
    kube = _with_host_fault(cluster, ol.RUNTIME_MISSING, 4)
    assert _text(kube, op.TOOLKIT.daemonset) == "Running"  # no runtime class: its sandbox is runc's
    assert _text(kube, op.VALIDATOR.daemonset) == "Init:0/4"
    v = next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == op.VALIDATOR.daemonset)
    assert all(cs["state"]["waiting"]["reason"] == "PodInitializing" for cs in v["status"]["initContainerStatuses"])


def test_removed_handler_keeps_runtime_class_pods_without_sandbox_until_the_toolkit_is_ready(cluster: Any) -> None:
    # A node restarted with a driver that does not load: the toolkit's cleanup removed the nvidia handler, and it
    # writes it again only once its driver-validation passed — no validator stage can run before that.
    kube, sim = cluster
    ol.set_host_fault(kube, NODE, ol.HANDLER_REMOVED)
    _with_host_fault(cluster, ol.DRIVER_UNLOADABLE, 5)
    assert _text(kube, op.TOOLKIT.daemonset) == "Init:0/1"
    v = next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == op.VALIDATOR.daemonset)
    assert v["spec"].get("runtimeClassName") == "nvidia"
    assert all(cs["state"]["waiting"]["reason"] == "PodInitializing" for cs in v["status"]["initContainerStatuses"])

    ol.set_host_fault(kube, NODE, ol.DRIVER_UNLOADABLE, present=False)
    for _ in range(12):
        sim.step()
    assert _text(kube, op.TOOLKIT.daemonset) == "Running" and _text(kube, op.VALIDATOR.daemonset) == "Running"


def test_unknown_host_fault_is_refused(cluster: Any) -> None:
    kube, _ = cluster
    with pytest.raises(ValueError, match="unknown host fault"):
        ol.set_host_fault(kube, NODE, "gpu-on-fire")


def _marked(kube: FakeKube, app: str, seconds_ago: float) -> Obj:
    """The node lifecycle controller's MarkPodsNotReady on the app's pod, `seconds_ago` s ago."""
    pod = next(p for p in kube.pods.values() if p["metadata"]["labels"].get("app") == app)
    pod["status"] = pod_states.marked_not_ready(pod)
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))
    for c in pod["status"]["conditions"]:
        if c["type"] == "Ready":
            c["lastTransitionTime"] = ts
    return pod


def _set_node_ready(kube: FakeKube, status: str) -> None:
    kube.nodes[NODE]["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": "KubeletReady"}]


@pytest.mark.parametrize(("node_ready", "seconds_ago", "ready_after"), [
    ("True", 30, "True"),    # the node posts again: kubelet reports its running pods Ready
    ("False", 30, "False"),  # the node is still down (a fault): nobody sets them Ready
    ("True", 0, "False"),    # marked just now: the node's NotReady may not have reached the loop's watch yet
])
def test_pods_marked_not_ready_are_ready_again_once_their_node_is(cluster: Any, node_ready: str, seconds_ago: float,
                                                                  ready_after: str) -> None:
    kube, sim = cluster
    _set_node_ready(kube, node_ready)
    pod = _marked(kube, op.DRIVER.daemonset, seconds_ago)
    sim.step()
    conds = {c["type"]: c["status"] for c in kube.pods[pod["metadata"]["name"]]["status"]["conditions"]}
    assert conds["Ready"] == ready_after
    assert conds["ContainersReady"] == "True"
