"""The probe's output parser, and the probe checks judging what the probe captured (pure, like every layer)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from factory import healthy_snapshot, node, set_node_resource

from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.errors import UsageError
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.probe.manifests import pod_manifest
from gpu_conformance.probe.observations import NotProbed, PodObservation, ProbeObservations, ProbePlan
from gpu_conformance.probe.output import PROBE_SCRIPT, parse_probe_output
from gpu_conformance.probe.plan import gpus_in_use, plan_probe
from gpu_conformance.probe.states import settled
from gpu_conformance.settings import Settings

CDI_OUTPUT = """== nvidia-smi -L
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5c1b9b0e-7f3a-4e2b-9c61-0d3f2a1b4c5d)
rc=0
== env
NVIDIA_VISIBLE_DEVICES=void
== devices
/dev/nvidia-uvm
/dev/nvidia-uvm-tools
/dev/nvidia0
/dev/nvidiactl
== cdi
== end
"""
NO_GPU_OUTPUT = """== nvidia-smi -L
sh: 1: nvidia-smi: not found
rc=127
== env
NVIDIA_VISIBLE_DEVICES=all
== devices
== cdi
== end
"""


N1 = "gpu-node-1"


def _pod(node: str | None, phase: str = "Succeeded", waiting: dict | None = None,
         terminated: dict | None = None) -> dict:
    st: dict = {"phase": phase}
    if waiting or terminated:
        st["containerStatuses"] = [{"name": "gpu-probe",
                                    "state": {"waiting": waiting} if waiting else {"terminated": terminated}}]
    if node is None:
        st["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {"metadata": {"name": "gpu-probe-t1-1"}, "spec": {"nodeName": node} if node else {}, "status": st}


def observed(snap=None, pod: dict | None = None, logs: str = "", events: list[str] | None = None,
             **obs) -> tuple[ClusterSnapshot, ProbeObservations]:
    """A snapshot, and a probe that saw `pod` (with these logs and 'Reason: message' events) on gpu-node-1."""
    snap = snap or healthy_snapshot()
    evs = [{"type": "Warning", "reason": e.split(": ", 1)[0], "message": e.split(": ", 1)[1]} for e in events or []]
    seen = ProbeObservations(run_id="t1", namespace="gpu-conformance-probe", mode="shared",
                             image="cuda:12", plan=ProbePlan(targets=[N1], eligible=1), **obs)
    if pod is not None or logs:
        seen.pods[N1] = PodObservation(N1, "gpu-probe-t1-1", "nvidia.com/gpu", pod=pod, events=evs, logs=logs)
    return snap, seen


def judge(snap: ClusterSnapshot, obs: ProbeObservations | None = None, **settings) -> dict[str, list[Finding]]:
    s = Settings(run_id="t1", **settings)
    inp = check_input(snap, s, obs)
    return {c.id: c.run(inp) for c in catalogue.checks_for(Layer.PROBE)}


def by_id(snap: ClusterSnapshot, obs: ProbeObservations | None = None, **settings) -> dict[str, Finding]:
    """Each probe check's one finding (about gpu-node-1)."""
    out = {}
    for cid, fs in judge(snap, obs, **settings).items():
        assert len(fs) <= 1, fs
        if fs:
            out[cid] = fs[0]
    return out


def test_parse_cdi_output() -> None:
    out = parse_probe_output(CDI_OUTPUT)
    assert out.gpu_count == 1 and out.smi_rc == 0 and out.injected_by_cdi and out.complete
    assert out.uuids == ["GPU-5c1b9b0e-7f3a-4e2b-9c61-0d3f2a1b4c5d"]


def test_parse_failure_output() -> None:
    out = parse_probe_output(NO_GPU_OUTPUT)
    assert out.gpu_count == 0 and out.smi_rc == 127 and "not found" in out.smi_error
    assert not out.injected_by_cdi


def test_script_really_prints_what_the_parser_reads(tmp_path) -> None:
    # Run the real script with a fake nvidia-smi on PATH: the markers must survive a real shell.
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Tesla T4 (UUID: GPU-11111111-2222-3333-4444-555555555555)'\n")
    smi.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES": "void"}
    text = subprocess.run(["sh", "-c", PROBE_SCRIPT], capture_output=True, text=True, env=env, check=False).stdout
    out = parse_probe_output(text)
    assert out.gpu_count == 1 and out.smi_rc == 0 and out.visible_devices == "void" and out.complete


def test_manifest_has_no_runtime_class_and_tolerates_gpu_taint() -> None:
    m = pod_manifest("r1", "gpu-node-1", "nvidia.com/gpu", Settings(run_id="r1"))
    spec = m["spec"]
    assert "runtimeClassName" not in spec
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert m["metadata"]["labels"]["gpu-conformance.nvidia.com/run-id"] == "r1"


def test_judge_pass_under_cdi() -> None:
    fs = by_id(*observed(pod=_pod(N1), logs=CDI_OUTPUT))
    assert {f.status for f in fs.values()} == {Status.PASS} and len(fs) == 4
    assert "CDI" in fs["PRB-004"].message


def test_not_probed_yet_means_no_findings_and_skipped_means_na() -> None:
    assert all(fs == [] for fs in judge(healthy_snapshot()).values())
    fs = by_id(*observed(skipped="probe disabled (--no-probe)"))
    assert {(f.status, f.node) for f in fs.values()} == {(Status.NA, None)} and len(fs) == 4


def test_judge_nvidia_smi_failure() -> None:
    fs = by_id(*observed(pod=_pod(N1), logs=NO_GPU_OUTPUT))
    assert fs["PRB-003"].status == Status.FAIL and "not found" in fs["PRB-003"].message
    assert fs["PRB-004"].status == Status.FAIL


def test_judge_unreadable_logs_warn_once_and_fail_nothing() -> None:
    # The pod ran but its log could not be read: no output proves nothing either way. PRB-003 warns
    # (transient), PRB-004 stays silent instead of repeating it; a failure would point at `kubectl logs`.
    snap, obs = observed(pod=_pod(N1), logs=CDI_OUTPUT)
    obs.pods[N1].logs_error = "log could not be read: 502 Bad Gateway"
    fs = by_id(snap, obs)
    assert fs["PRB-003"].status == Status.WARN and fs["PRB-003"].evidence["transient"]
    assert "502 Bad Gateway" in fs["PRB-003"].message and "logs gpu-probe-t1-1" in fs["PRB-003"].kubectl
    assert "PRB-004" not in fs
    failing = by_id(*observed(pod=_pod(N1), logs=NO_GPU_OUTPUT))
    assert failing["PRB-004"].kubectl == "kubectl -n gpu-conformance-probe logs gpu-probe-t1-1"


def test_judge_cdi_expected_but_legacy_injection() -> None:
    legacy = CDI_OUTPUT.replace("NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=GPU-5c1b9b0e")
    fs = by_id(*observed(pod=_pod(N1), logs=legacy))
    assert fs["PRB-003"].status == Status.PASS
    assert fs["PRB-004"].status == Status.FAIL and "CDI expected" in fs["PRB-004"].message
    # without CDI (v25.3) the same output is the expected path
    fs = by_id(*observed(healthy_snapshot(version="v25.3.4"), pod=_pod(N1), logs=legacy))
    assert fs["PRB-004"].status == Status.PASS


def test_judge_pending_insufficient_attributes_cause() -> None:
    ev = ["FailedScheduling: 0/4 nodes are available: 1 Insufficient nvidia.com/gpu."]
    snap, obs = observed(pod=_pod(None, "Pending"), events=ev)
    f = by_id(snap, obs)["PRB-001"]
    assert f.status == Status.FAIL and "allocated to other pods" in f.message
    assert set(by_id(snap, obs)) == {"PRB-001"}
    set_node_resource(snap, N1, capacity=8, allocatable=0)
    assert "advertises no allocatable" in by_id(snap, obs)["PRB-001"].message


def test_judge_taint_and_image_pull() -> None:
    ev = ["FailedScheduling: 0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: ml}."]
    assert "taint" in by_id(*observed(pod=_pod(None, "Pending"), events=ev))["PRB-001"].message
    fs = by_id(*observed(pod=_pod(N1, "Pending", {"reason": "ImagePullBackOff", "message": "x"})))
    assert [(k, f.status) for k, f in sorted(fs.items())] == [("PRB-001", Status.PASS), ("PRB-002", Status.FAIL)]


def test_plan_probes_every_eligible_node_by_default_and_says_why_not_elsewhere() -> None:
    snap = healthy_snapshot(gpu_nodes=4)
    names = snap.gpu_node_names
    node(snap, names[0])["spec"]["unschedulable"] = True
    set_node_resource(snap, names[1], capacity=2, allocatable=2)
    in_use = gpus_in_use([{"spec": {"nodeName": names[1], "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Running"}},
        # finished pods hold nothing
        {"spec": {"nodeName": names[2], "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
         "status": {"phase": "Succeeded"}}])
    plan = plan_probe(snap, Settings(run_id="r"), names, in_use)
    assert plan.targets == names[2:]
    assert plan.not_probed[names[0]].kind == NotProbed.CORDONED
    assert plan.not_probed[names[1]].kind == NotProbed.BUSY and "all 2 nvidia.com/gpu in use" in \
        plan.not_probed[names[1]].message
    assert plan.scope == ("probed 2 of 4 GPU node(s) that passed the earlier layers; 1 cordoned, "
                          "1 with all GPUs in use")
    obs = ProbeObservations(plan=plan)
    fs = {f.node: f for f in judge(snap, obs)["PRB-001"]}
    assert fs[names[0]].status == fs[names[1]].status == Status.WARN
    assert not any(f.evidence.get("transient") for f in fs.values())


def test_plan_samples_a_count_or_a_selector_and_says_so() -> None:
    snap = healthy_snapshot(gpu_nodes=5)
    names = snap.gpu_node_names
    plan = plan_probe(snap, Settings(run_id="r", probe_nodes="2"), names, {})
    assert len(plan.targets) == 2 and plan.targets == plan_probe(snap, Settings(run_id="r", probe_nodes="2"),
                                                                 names, {}).targets  # reproducible per run id
    assert plan.scope.endswith("3 not sampled (--probe-nodes=2)")
    node(snap, names[3])["metadata"]["labels"]["pool"] = "a"
    plan = plan_probe(snap, Settings(run_id="r", probe_nodes="pool=a"), names, {})
    assert plan.targets == [names[3]]
    obs = ProbeObservations(plan=plan)
    assert {f.status for f in judge(snap, obs)["PRB-001"]} == {Status.NA}
    # Nothing left to probe: the layer did not run, and the verdict must not pretend it did.
    plan = plan_probe(snap, Settings(run_id="r", probe_nodes="pool=none"), names, {})
    obs = ProbeObservations(plan=plan)
    assert any(f.node is None and f.evidence.get("transient") for f in judge(snap, obs)["PRB-001"])


@pytest.mark.parametrize("value", ["0", "a in (b", "-3"])
def test_probe_nodes_nonsense_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="--probe-nodes"):
        Settings(probe_nodes=value).validate()


def test_create_container_error_is_settled_at_once_and_judged_with_its_message() -> None:
    msg = "failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all"
    pod = _pod(N1, "Pending", {"reason": "CreateContainerError", "message": msg})
    assert settled(PodObservation(N1, "p", "nvidia.com/gpu", pod=pod), unschedulable_for=0)
    assert not settled(PodObservation(N1, "p", "nvidia.com/gpu", pod=_pod(N1, "Pending")), unschedulable_for=0)
    fs = by_id(*observed(pod=pod))
    assert fs["PRB-002"].status == Status.FAIL and msg in fs["PRB-002"].message
    assert set(fs) == {"PRB-001", "PRB-002"}
    # The same from a container that started and failed (restartPolicy Never: the pod is Failed)
    fs = by_id(*observed(pod=_pod(N1, "Failed", terminated={"reason": "StartError", "exitCode": 128,
                                                           "message": "nvidia-container-cli: device error"})))
    assert fs["PRB-002"].status == Status.FAIL and "device error" in fs["PRB-002"].message



@pytest.mark.parametrize(("device", "cause"), [
    ("k8s.device-plugin.nvidia.com/gpu=GPU-1", "the CDI spec is missing or stale (the device plugin writes it"),
    ("management.nvidia.com/gpu=GPU-1", "default kind management.nvidia.com/gpu"),
])
def test_an_unresolvable_cdi_device_names_who_should_have_written_its_spec(device: str, cause: str) -> None:
    """The runtime's words name the device; its kind says whose spec is missing: the plugin's own kind (its spec,
    written by the plugin at start, gone or stale), or the NVIDIA runtime's default kind (what the runtime makes of
    NVIDIA_VISIBLE_DEVICES when the plugin's CDI annotation never reached it: the kind tier's operator v25.3.4 with
    its toolkit, tests/test_kind.py)."""
    msg = f"failed to inject CDI devices: unresolvable CDI devices {device}"
    fs = by_id(*observed(pod=_pod(N1, "Pending", {"reason": "CreateContainerError", "message": msg})))
    assert fs["PRB-002"].status == Status.FAIL and msg in fs["PRB-002"].message and cause in fs["PRB-002"].message


def test_a_pod_the_kubelet_rejected_at_admission_is_a_failure_in_its_words() -> None:
    """A probe pod the kubelet refused (its GPUs still held by a pod it is tearing down): Failed with the kubelet's
    reason, never a wait for --probe-timeout."""
    pod = _pod(N1, "Failed")
    pod["status"].update(reason="UnexpectedAdmissionError", message="Allocate failed due to requested number of "
                         "devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected")
    f = by_id(*observed(pod=pod))["PRB-002"]
    assert f.status == Status.FAIL and "rejected the probe pod (UnexpectedAdmissionError)" in f.message, f.message

def test_interrupted_or_refused_probe_is_incomplete_never_a_failure() -> None:
    snap, obs = observed(pod=_pod(N1, "Pending"), aborted="interrupted by SIGTERM; probe namespace x deleted")
    fs = judge(snap, obs)
    assert not any(f.status == Status.FAIL for f in sum(fs.values(), []))
    assert any(f.node is None and f.evidence.get("transient") and "SIGTERM" in f.message for f in fs["PRB-001"])
    snap, obs = observed()
    obs.pods[N1] = PodObservation(N1, "p", "nvidia.com/gpu", refused="denied by policy x")
    (f,) = judge(snap, obs)["PRB-001"]
    assert f.node is None and f.evidence["transient"] and "denied by policy x" in f.message


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_raises_terminated_and_cleanup_is_not_cut_short(signame: str) -> None:
    # SIGHUP (a closed terminal or ssh session, issue 26) was fatal at once: no report, probe pods left behind.
    import os
    import signal

    from gpu_conformance.signals import Terminated, install_sigterm, interruption, restore_sigterm, signals_deferred

    signum = getattr(signal, signame)
    before = signal.getsignal(signum)
    install_sigterm()
    try:
        with pytest.raises(Terminated) as exc:
            os.kill(os.getpid(), signum)
            time.sleep(1)
        assert interruption(exc.value) == f"interrupted by {signame}"
        with signals_deferred() as got:
            os.kill(os.getpid(), signum)
            time.sleep(0.1)
        assert got == [signum]
    finally:
        restore_sigterm()
    assert signal.getsignal(signum) == before


def _pods_server(pods: list[dict]):  # noqa: ANN202 - a fake raw_request
    """raw_request over a cluster's pods: fieldSelector spec.nodeName / status.phase!=, limit and continue."""
    import json

    def request(api: object, method: str, path: str, query: list | None = None, *_: object, **__: object) -> bytes:
        q = dict(query or [])
        chosen = pods
        for term in q.get("fieldSelector", "").split(","):
            key, _, value = term.partition("!=") if "!=" in term else term.partition("=")
            get = (lambda p: p["spec"].get("nodeName")) if key == "spec.nodeName" else \
                (lambda p: p["status"].get("phase"))
            chosen = [p for p in chosen if (get(p) != value) == ("!=" in term)]
        start = int(q.get("continue") or 0)
        end = start + int(q.get("limit") or len(chosen) or 1)
        page = {"metadata": {"continue": str(end) if end < len(chosen) else ""}, "items": chosen[start:end]}
        return json.dumps(page).encode()

    return request


@pytest.mark.parametrize("probed", [1, 3, 40])
def test_gpus_in_use_costs_the_same_requests_whatever_the_cluster_size(probed: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 14: a one-node probe paged through every pod of the cluster (~20 s at 1,000 nodes).
    from types import SimpleNamespace

    import gpu_conformance.probe.run as probe_mod
    from gpu_conformance.probe import api as probe_api

    def pod(node: str, gpus: int, phase: str = "Running") -> dict:
        return {"spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
                "status": {"phase": phase}}

    counts, found = [], []
    for nodes in (50, 1000):
        pods = [pod(f"gpu-node-{i}", 1) for i in range(nodes) for _ in range(9)]
        pods += [pod("gpu-node-0", 4, "Succeeded")]  # finished pods hold nothing
        monkeypatch.setattr(probe_api, "raw_request", _pods_server(pods))
        conn: Any = SimpleNamespace(api=None, server="https://x", user="u")
        p = probe_mod.Probe(conn, Settings(run_id="r"), ClusterSnapshot())
        wanted = [f"gpu-node-{i}" for i in range(probed)]
        found.append({n: v for n, v in p._gpus_in_use(wanted).items() if n in wanted})
        counts.append(p.api.requests)
    assert found[0] == found[1] == {f"gpu-node-{i}": {"nvidia.com/gpu": 9} for i in range(probed)}
    assert counts == [probed, probed]  # one LIST per node read, whatever the cluster's pods


@pytest.mark.parametrize(("nodes", "reads"), [(3, 3), (40, 0)])
def test_gpus_in_use_are_read_only_for_few_nodes(nodes: int, reads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: no read of every pod in the cluster; many nodes learn of busy GPUs from the scheduler instead."""
    from types import SimpleNamespace

    import gpu_conformance.probe.run as probe_mod

    snap = healthy_snapshot(gpu_nodes=nodes)
    asked: list[list[str]] = []
    monkeypatch.setattr(probe_mod.Probe, "_gpus_in_use", lambda self, ns: asked.append(list(ns)) or {})
    for name in ("_create_namespace", "_create_pods", "_wait", "_capture_logs", "_cleanup"):
        monkeypatch.setattr(probe_mod.Probe, name, lambda self: None)
    conn: Any = SimpleNamespace(api=None, server="https://x", user="u")
    p = probe_mod.Probe(conn, Settings(run_id="r"), snap)
    obs = p.run(snap.gpu_node_names, namespace=("probe-ns", "own"))
    assert len(obs.plan.targets) == nodes
    assert sum(len(a) for a in asked) == reads and all(set(a) <= set(obs.plan.targets) for a in asked)


def _pending(node: str, resource: str, said: str) -> PodObservation:
    p = PodObservation(node=node, name=f"probe-{node}", resource=resource)
    p.pod = {"spec": {}, "status": {"phase": "Pending"}}
    p.events = [{"reason": "FailedScheduling", "message": said}]
    return p


def test_the_schedulers_insufficient_on_an_advertised_resource_is_busy_not_broken() -> None:
    from gpu_conformance.probe.plan import scheduler_busy

    snap = healthy_snapshot(gpu_nodes=3)
    busy, running, dead = snap.gpu_node_names
    set_node_resource(snap, dead, capacity=0, allocatable=0)  # a dead resource: the plugin's fault, not busy
    insufficient = "0/4 nodes are available: 1 Insufficient nvidia.com/gpu."
    obs = ProbeObservations(run_id="r", image="i")
    obs.plan = ProbePlan(targets=[busy, running, dead], eligible=3)
    obs.pods = {busy: _pending(busy, "nvidia.com/gpu", insufficient),
                running: PodObservation(node=running, name="probe-r", resource="nvidia.com/gpu",
                                        pod={"spec": {"nodeName": running}, "status": {"phase": "Running"}}),
                dead: _pending(dead, "nvidia.com/gpu", insufficient)}
    scheduler_busy(snap, Settings(run_id="r"), obs)
    assert obs.plan.targets == [running, dead] and sorted(obs.pods) == sorted([running, dead])
    skip = obs.plan.not_probed[busy]
    assert skip.kind == NotProbed.BUSY and "in use" in skip.message and "Insufficient" in skip.message
    assert "1 with all GPUs in use" in obs.plan.scope
