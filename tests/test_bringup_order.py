"""The simulator held to the kind bring-up: milestones and events of a poll, traces, the order learnt from kind
recordings, and (slow) the simulated cluster's bring-up with the real operator compared with them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_conformance.sim.services import bringup_order as bo
from gpu_conformance.sim.services import bringup_trace as bt

Obj = dict[str, Any]
DATA = Path(__file__).parent / "data" / "bringup"
TK, VAL, DP, CUDA = ("nvidia-container-toolkit-daemonset", "nvidia-operator-validator",
                     "nvidia-device-plugin-daemonset", "nvidia-cuda-validator")
INITS = {TK: ["driver-validation"], DP: ["toolkit-validation"], CUDA: ["cuda-validation"],
         VAL: ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]}


# ---- hand-made polls ---------------------------------------------------------------------------------------------
def pod(app: str, node: str, done: int | set[str] = 0, ready: bool = False, phase: str = "Pending", name: str = "",
        deleting: bool = False) -> Obj:
    """A pod record whose first `done` init containers (or those named) exited 0."""
    names = INITS.get(app, [])
    finished = set(names[:done]) if isinstance(done, int) else done
    inits = [{"name": c, "state": {"terminated": {"exitCode": 0}} if c in finished else {"waiting": {}}}
             for c in names]
    return {"name": name or f"{app}-x{node[-1]}bcd", "app": app, "uid": f"uid-{app}-{node}", "node": node,
            "deleting": deleting,
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "initContainerStatuses": inits, "containerStatuses": []}}


def node(name: str, gpu: bool = True, gpus: str | None = None) -> Obj:
    return {"name": name, "labels": {bt.GPU_PRESENT_LABEL: "true"} if gpu else {},
            "allocatable": {"cpu": "8", **({bt.GPU_RESOURCE: gpus} if gpus is not None else {})}, "capacity": {}}


def poll(t: float, pods: list[Obj], gpus: str | None = None, cp: str = "notReady",
         events: list[Obj] | None = None, nodes: tuple[str, ...] = ("w1",)) -> Obj:
    ready = [{"type": "Ready", "status": "True" if cp == "ready" else "False"}]
    return {"t": t, "pods": pods, "nodes": [node(n, gpus=gpus) for n in nodes] + [node("cp", gpu=False)],
            "clusterpolicy": [{"state": cp, "conditions": ready}], "events": events or []}


def event(reason: str, kind: str, name: str, message: str) -> Obj:
    return {"reason": reason, "message": message, "type": "Normal", "count": 1,
            "object": {"kind": kind, "name": name, "fieldPath": ""}}


def bringup(order: list[str], step: float = 4.0, nodes: tuple[str, ...] = ("w1",), events: tuple[Obj, ...] = (),
            source: str = "") -> bt.Trace:
    """A trace whose milestones appear one per poll in `order` (milestone names as bringup_trace names them)."""
    polls = []
    for i in range(len(order) + 1):
        reached = set(order[:i])
        pods = []
        for n in nodes:
            for app, inits in INITS.items():
                done = {c for c in inits if f"{app}/{c}" in reached}
                ok = f"{app}/ready" in reached
                phase = "Succeeded" if f"{app}/succeeded" in reached else ("Running" if ok else "Pending")
                if done or app != CUDA:
                    pods.append(pod(app, n, done, ready=ok, phase=phase))
        gpus = "2" if bt.GPU_ALLOCATABLE in reached else None
        cp = "ready" if bt.CLUSTERPOLICY_READY in reached else "notReady"
        polls.append(poll(i * step, pods, gpus, cp, list(events) if i == len(order) else [], nodes))
    return bt.trace_of(polls, source=source)


KIND_ORDER = [f"{TK}/driver-validation", f"{VAL}/driver-validation", f"{TK}/ready", f"{VAL}/toolkit-validation",
              f"{DP}/toolkit-validation", f"{DP}/ready", bt.GPU_ALLOCATABLE, f"{CUDA}/cuda-validation",
              f"{CUDA}/succeeded", f"{VAL}/cuda-validation", f"{VAL}/plugin-validation", f"{VAL}/ready",
              bt.CLUSTERPOLICY_READY]


# ---- one poll ------------------------------------------------------------------------------------------------------
@pytest.mark.fast
def test_a_poll_shows_each_gpu_nodes_milestones() -> None:
    p = poll(0, [pod(VAL, "w1", done=2), pod(TK, "w1", done=1, ready=True, phase="Running"),
                 pod(CUDA, "w1", done=1, phase="Succeeded"), pod(DP, "w1", done=1, ready=True, phase="Running",
                                                                   deleting=True),
                 pod(TK, "cp", done=1, ready=True, phase="Running"), {**pod(VAL, "w1", done=4), "app": None}],
             gpus="1", cp="ready")
    assert bt.milestones(p) == {
        "w1": {f"{VAL}/driver-validation", f"{VAL}/toolkit-validation", f"{TK}/driver-validation", f"{TK}/ready",
               f"{CUDA}/cuda-validation", f"{CUDA}/succeeded", f"{DP}/toolkit-validation", bt.GPU_ALLOCATABLE},
        bt.CLUSTER: {bt.CLUSTERPOLICY_READY}}
    # No GPU allocatable (0, or the key absent), no ready policy: nothing of theirs.
    assert bt.milestones(poll(0, [], gpus="0")) == {"w1": set(), bt.CLUSTER: set()}
    # The operator's state alone, before its Ready condition (its two status writes): not ready yet.
    assert not bt.clusterpolicy_ready({"state": "ready"})
    assert not bt.clusterpolicy_ready({"state": "ready", "conditions": [{"type": "Ready", "status": "False"}]})


@pytest.mark.fast
def test_the_poll_record_from_api_objects_is_the_kind_recorders_format() -> None:
    p = {"metadata": {"name": "v-abcde", "uid": "u", "labels": {"app": VAL}, "deletionTimestamp": "x"},
         "spec": {"nodeName": "w1"}, "status": {"phase": "Running", "hostIP": "1.2.3.4"}}
    n = {"metadata": {"name": "w1", "labels": {"nvidia.com/gpu.present": "true", "kubernetes.io/os": "linux"}},
         "status": {"allocatable": {"nvidia.com/gpu": "2"}, "capacity": {"nvidia.com/gpu": "2"}}}
    e = {"reason": "Scheduled", "message": "m", "type": "Normal", "count": 1, "source": {"component": "s"},
         "involvedObject": {"kind": "Pod", "name": "v-abcde", "uid": "u", "fieldPath": ""}}
    rec = bt.raw_poll(1.234, [p], [n], [{"status": {"state": "ready"}}], [e])
    assert rec["t"] == 1.23 and rec["pods"] == [{"name": "v-abcde", "app": VAL, "uid": "u", "node": "w1",
                                                 "deleting": True, "status": {"phase": "Running", "conditions": None,
                                                                              "initContainerStatuses": None,
                                                                              "containerStatuses": None}}]
    assert rec["nodes"][0]["labels"] == {"nvidia.com/gpu.present": "true"}
    assert rec["clusterpolicy"] == [{"state": "ready"}]
    assert rec["events"][0]["object"] == {"kind": "Pod", "name": "v-abcde", "fieldPath": ""}
    assert set(rec["events"][0]) == {*bt.EVENT_KEYS, "object"}


@pytest.mark.fast
def test_event_signatures_mask_what_differs_between_clusters() -> None:
    apps = {"nvidia-operator-validator-x7kzq": VAL}
    e = event("Scheduled", "Pod", "nvidia-operator-validator-x7kzq",
              "Successfully assigned gpu-operator/nvidia-operator-validator-x7kzq to gpu-conformance-worker2")
    sig = bt.event_signature(e, apps, ["gpu-conformance-worker", "gpu-conformance-worker2"])
    assert sig == f"Pod {VAL}: Scheduled: Successfully assigned gpu-operator/<{VAL}> to <node>"
    # A pod no poll listed loses its generated suffix; uids and numbers are masked.
    e = event("BackOff", "Pod", "nvidia-cuda-validator-bq9vw",
              "Back-off 10s restarting failed container uid 0b5e8f5c-1d4e-4a43-9f3a-2f6b5c7d8e9f in "
              "nvidia-cuda-validator-bq9vw")
    assert bt.event_signature(e, {}, []) == (
        f"Pod {CUDA}: BackOff: Back-off <n>s restarting failed container uid <uid> in <{CUDA}>")
    # kubelet names a pod as name_namespace(uid); a ReplicaSet's name carries its pod-template hash.
    e = event("BackOff", "Pod", f"{TK}-jvbkl", f"Back-off restarting failed container c in pod {TK}-jvbkl_gpu-operator"
              "(0b5e8f5c-1d4e-4a43-9f3a-2f6b5c7d8e9f)")
    assert bt.event_signature(e, {f"{TK}-jvbkl": TK}, []).endswith(f"in pod <{TK}>_gpu-operator(<uid>)")
    rs = event("ScalingReplicaSet", "Deployment", "gpu-operator",
               "Scaled up replica set gpu-operator-dc76f776b from 0 to 1")
    assert bt.event_signature(rs, {}, []) == (
        "Deployment gpu-operator: ScalingReplicaSet: Scaled up replica set <gpu-operator> from <n> to <n>")
    ds = event("SuccessfulCreate", "DaemonSet", DP, f"Created pod: {DP}-2fgh7")
    assert bt.event_signature(ds, {}, []) == f"DaemonSet {DP}: SuccessfulCreate: Created pod: <{DP}>"


# ---- traces ----------------------------------------------------------------------------------------------------------
@pytest.mark.fast
def test_a_trace_keeps_first_seen_times_and_the_longest_poll_gap() -> None:
    trace = bt.trace_of([poll(0, [pod(TK, "w1")], cp="ready"), poll(2, [pod(TK, "w1", done=1)]),
                         poll(5, [pod(TK, "w1", done=1, ready=True, phase="Running")], cp="ready"),
                         poll(6, [pod(TK, "w1", done=1)], cp="ready")])
    assert trace.nodes == {"w1": {f"{TK}/driver-validation": 2, f"{TK}/ready": 5}}
    # The ClusterPolicy's ready for an instant at 0 s does not count: it is ready since 5 s.
    assert trace.cluster == {bt.CLUSTERPOLICY_READY: 5} and trace.interval == 3 and trace.polls == 4
    assert bt.Trace.from_json(json.loads(json.dumps(trace.to_json()))).to_json() == trace.to_json()


@pytest.mark.fast
def test_raw_recordings_load_and_bad_ones_say_where_in_one_line(tmp_path: Path) -> None:
    raw = tmp_path / "kind.jsonl"
    raw.write_text(json.dumps(poll(0, [pod(TK, "w1", done=1)])) + "\n" + '{"t": 2, "po')  # stopped mid-line
    assert [p["t"] for p in bt.load_jsonl(raw)] == [0]
    out = tmp_path / "kind.json"
    assert bt.main(["derive", str(out), str(raw)]) == 0
    assert bt.load_trace(out).nodes == {"w1": {f"{TK}/driver-validation": 0}}
    bad = tmp_path / "bad.jsonl"
    for text, want in (("nope\n{}\n", "bad.jsonl:1: not JSON"), ('{"t": "x"}\n', "bad.jsonl:1: not a poll"),
                       ("\n", "bad.jsonl: no polls")):
        bad.write_text(text)
        with pytest.raises(bt.TraceError) as err:
            bt.load_jsonl(bad)
        assert want in str(err.value) and "\n" not in str(err.value)
    bad.with_suffix(".json").write_text('{"nodes": 1}')
    with pytest.raises(bt.TraceError, match="not a derived bring-up trace"):
        bt.load_trace(bad.with_suffix(".json"))


@pytest.mark.fast
def test_the_poller_records_through_any_lister_and_a_failing_list_is_empty() -> None:
    calls: list[str] = []

    def lister(kind: str) -> list[Obj] | None:
        calls.append(kind)
        if kind == "clusterpolicies":
            raise RuntimeError("the CRD is not there yet")
        return [] if kind != "nodes" else [{"metadata": {"name": "w1"}, "status": {}}]

    got: list[Obj] = []
    poller = bt.Poller(lister, interval=0.01, sink=got.append).start()
    time.sleep(0.05)
    polls = poller.stop()
    assert len(polls) >= 2 and got == polls and polls[-1]["clusterpolicy"] == []
    assert polls[-1]["nodes"][0]["name"] == "w1" and set(calls) == set(bt.KINDS)

    class Kube:
        def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
            return [{"kind": kind, "ns": namespace}]

    listed = bt.kube_lister(Kube(), "gpu-operator")
    assert [listed(k)[0]["ns"] for k in bt.KINDS] == ["gpu-operator", None, None, "gpu-operator"]


@pytest.mark.fast
def test_the_kind_recorder_lists_through_kubectl_and_stops_on_its_stop_file(tmp_path: Path) -> None:
    kubectl = tmp_path / "kubectl"
    pods = json.dumps({"items": [{"metadata": {"name": "p", "labels": {"app": TK}}, "spec": {"nodeName": "w1"}}]})
    kubectl.write_text("#!/bin/sh\n"  # kubectl --kubeconfig K get KIND [-n NS] -o json
                       f"case $4 in pods) echo '{pods}' ;; clusterpolicies) exit 1 ;;\n"
                       "*) echo '{\"items\": []}' ;; esac\n")
    kubectl.chmod(0o755)
    out = tmp_path / "rec.jsonl"
    (tmp_path / "rec.jsonl.stop").touch()  # already asked to stop: one poll, the last one
    assert bt.main(["record", str(out), "--kubeconfig", "k", "--kubectl", str(kubectl)]) == 0
    polls = bt.load_jsonl(out)
    assert polls[-1]["pods"][0]["app"] == TK and polls[-1]["clusterpolicy"] == []


# ---- the order learnt from references, and a candidate held to it ----------------------------------------------------
def _kind_refs() -> list[bt.Trace]:
    ev = (event("SuccessfulCreate", "DaemonSet", DP, f"Created pod: {DP}-2fgh7"),)
    return [bringup(KIND_ORDER, nodes=("w1", "w2"), events=ev, source="kind-1"),
            bringup(KIND_ORDER, step=3, events=(*ev, event("BackOff", "Pod", f"{TK}-x1bcd", "Back-off")),
                    source="kind-2")]


@pytest.mark.fast
def test_the_order_is_what_every_reference_and_node_agrees_on() -> None:
    refs = _kind_refs()
    order = bo.learn(refs)
    assert order.milestones == set(KIND_ORDER)
    # Two polls apart in every reference: ordered; in adjacent polls (within one poll interval): not.
    assert (f"{TK}/ready", f"{DP}/toolkit-validation") in order.before
    assert (f"{TK}/ready", f"{VAL}/toolkit-validation") not in order.before
    assert f"{DP}/ready after {TK}/ready, {VAL}/toolkit-validation" in order.describe()
    # A third reference has the validator's plugin stage before the cuda pod's Succeeded: unordered from then on.
    swapped = [*KIND_ORDER]
    swapped[8], swapped[10] = swapped[10], swapped[8]
    order = bo.learn([*refs, bringup(swapped)])
    assert (f"{CUDA}/succeeded", f"{VAL}/plugin-validation") not in order.before
    assert (f"{VAL}/plugin-validation", f"{CUDA}/succeeded") not in order.before
    assert (f"{CUDA}/cuda-validation", f"{VAL}/ready") in order.before
    # Events: those every reference left are required, those any left are tolerated.
    order = bo.learn(refs)
    assert order.events_required == {f"DaemonSet {DP}: SuccessfulCreate: Created pod: <{DP}>"}
    assert order.events_tolerated == {*order.events_required, f"Pod {TK}: BackOff: Back-off"}
    with pytest.raises(bo.NoReferenceError):
        bo.learn([bt.Trace()])


@pytest.mark.fast
def test_a_candidate_in_the_same_order_holds() -> None:
    refs = _kind_refs()
    sim = bringup(KIND_ORDER, step=0.5, nodes=("gpu-node-0", "gpu-node-1"), events=(
        event("SuccessfulCreate", "DaemonSet", DP, f"Created pod: {DP}-9hjk2"),), source="sim")
    assert bo.report(bo.learn(refs), sim) == ""


@pytest.mark.fast
def test_an_inverted_pair_a_missing_milestone_and_other_events_fail_in_one_message() -> None:
    order = bo.learn(_kind_refs())
    inverted = [m for m in KIND_ORDER if m != f"{VAL}/plugin-validation"]
    inverted.insert(inverted.index(f"{CUDA}/cuda-validation"), f"{VAL}/plugin-validation")
    sim = bringup([m for m in inverted if m != bt.CLUSTERPOLICY_READY], step=0.5, source="sim", events=(
        event("FailedCreate", "DaemonSet", TK, "Error creating: x"),))
    msg = bo.report(order, sim)
    assert msg.startswith("sim differs from 2 reference bring-up(s) in 5 way(s):")
    assert (f"order inverted on w1: {VAL}/plugin-validation at 4.0 s before {CUDA}/succeeded at 5.0 s "
            f"(the reference always has {CUDA}/succeeded first)") in msg
    assert f"order inverted on w1: {VAL}/plugin-validation at 4.0 s before {CUDA}/cuda-validation" in msg
    assert "milestone missing on w1: clusterpolicy/ready" in msg
    assert f"event missing: DaemonSet {DP}: SuccessfulCreate: Created pod: <{DP}>" in msg
    assert f"event not in the reference: DaemonSet {TK}: FailedCreate: Error creating: x" in msg
    # Milestones the reference never reached, and no GPU node at all.
    extra = bringup(KIND_ORDER, step=0.5, events=(
        event("SuccessfulCreate", "DaemonSet", DP, f"Created pod: {DP}-9hjk2"),))
    extra.nodes["w1"]["gpu-feature-discovery/ready"] = 9.0
    assert bo.differences(order, extra) == ["milestone not in the reference on w1: gpu-feature-discovery/ready"]
    assert bo.differences(order, bt.Trace()) == [
        "no GPU node in the candidate trace (no node labelled nvidia.com/gpu.present=true)"]


@pytest.mark.fast
def test_an_allowed_difference_is_accepted_with_its_reason() -> None:
    order = bo.learn(_kind_refs())
    sim = bringup(KIND_ORDER, step=0.5)  # no events at all
    line = f"event missing: DaemonSet {DP}: SuccessfulCreate: Created pod: <{DP}>"
    assert bo.differences(order, sim) == [line]
    assert bo.report(order, sim, [bo.Allowed(r"^event missing: DaemonSet ", "a reason")]) == ""


# ---- the committed kind traces and the sim side ----------------------------------------------------------------
def kind_traces() -> list[bt.Trace]:
    return [bt.load_trace(p) for p in sorted(DATA.glob("*.json"))]


@pytest.mark.fast
def test_the_committed_kind_traces_order_the_validation_chain() -> None:
    order = bo.learn(kind_traces())
    # The toolkit writes containerd's nvidia handler before the validator and device plugin get a sandbox at all.
    for a, b in ((f"{TK}/ready", f"{VAL}/driver-validation"), (f"{TK}/ready", f"{DP}/toolkit-validation"),
                 (f"{VAL}/driver-validation", bt.GPU_ALLOCATABLE),
                 (f"{CUDA}/cuda-validation", f"{VAL}/cuda-validation"),
                 (f"{VAL}/toolkit-validation", bt.CLUSTERPOLICY_READY)):
        assert (a, b) in order.before, f"{a} before {b}"


@pytest.mark.fast
def test_the_kind_profile_switches_the_operands_as_the_kind_clusterpolicy_does() -> None:
    from gpu_conformance import operands as op
    from gpu_conformance.sim.builds import operator_module
    from gpu_conformance.sim.kind import bringup, operator
    from gpu_conformance.sim.operator import install
    from gpu_conformance.sim.profiles.catalogue import get_profile

    try:
        kind_spec = operator.clusterpolicy("cdi")["spec"]
    except operator_module.OperatorModuleError as exc:
        pytest.skip(f"the operator's module is not here: {exc}")
    profile = get_profile(bringup.PROFILE)
    sim_spec = install.clusterpolicy_spec(profile)
    for operand in (op.DRIVER, op.TOOLKIT, op.DEVICE_PLUGIN, op.GFD, op.DCGM_EXPORTER, op.DCGM, op.MIG_MANAGER,
                    op.NODE_STATUS_EXPORTER):
        assert op.operand_enabled(operand, kind_spec) == op.operand_enabled(operand, sim_spec), operand.key
    assert profile.cdi and kind_spec["cdi"]["enabled"] and profile.host_driver and not profile.driver_pods_expected


@pytest.mark.sim
@pytest.mark.realop
def test_the_simulated_bringup_holds_to_the_kind_recordings(tmp_path: Path) -> None:
    from gpu_conformance.sim.kind.bringup import ALLOWED_DIFFERENCES, sim_bringup

    order = bo.learn(kind_traces())
    t0 = time.monotonic()
    sim = sim_bringup(raw=tmp_path / "sim.jsonl")
    (tmp_path / "sim-trace.json").write_text(json.dumps(sim.to_json(), indent=1, sort_keys=True))
    print(f"simulated bring-up recorded in {time.monotonic() - t0:.0f} s ({sim.polls} polls); "
          f"trace: {tmp_path / 'sim-trace.json'}")
    msg = bo.report(order, sim, ALLOWED_DIFFERENCES)
    assert not msg, msg
