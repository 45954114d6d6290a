"""The probe's output parser and its judgement of what a probe pod saw."""

from __future__ import annotations

import subprocess

from factory import healthy_snapshot, set_node_resource

from gpu_conformance.model import Status
from gpu_conformance.probe import Probe, pod_manifest
from gpu_conformance.probe_output import PROBE_SCRIPT, parse_probe_output
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


class _Conn:
    api = None


def _probe(settings: Settings | None = None, **kw) -> Probe:
    p = Probe.__new__(Probe)
    p.settings = settings or Settings(run_id="t1")
    p.snap = healthy_snapshot(**kw)
    p.ns = "gpu-conformance-probe-t1"
    return p


def _pod(node: str | None, phase: str = "Succeeded", waiting: dict | None = None) -> dict:
    st: dict = {"phase": phase}
    if waiting:
        st["containerStatuses"] = [{"name": "gpu-probe", "state": {"waiting": waiting}}]
    return {"metadata": {"name": "gpu-probe-1"}, "spec": {"nodeName": node} if node else {}, "status": st}


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
    fs = {f.check_id: f for f in _probe().judge("gpu-node-1", _pod("gpu-node-1"), [], parse_probe_output(CDI_OUTPUT))}
    assert {f.status for f in fs.values()} == {Status.PASS}
    assert "CDI" in fs["PRB-004"].message


def test_judge_nvidia_smi_failure() -> None:
    fs = {f.check_id: f for f in _probe().judge("gpu-node-1", _pod("gpu-node-1"), [],
                                                  parse_probe_output(NO_GPU_OUTPUT))}
    assert fs["PRB-003"].status == Status.FAIL and "not found" in fs["PRB-003"].message
    assert fs["PRB-004"].status == Status.FAIL


def test_judge_cdi_expected_but_legacy_injection() -> None:
    legacy = CDI_OUTPUT.replace("NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=GPU-5c1b9b0e")
    fs = {f.check_id: f for f in _probe().judge("gpu-node-1", _pod("gpu-node-1"), [], parse_probe_output(legacy))}
    assert fs["PRB-003"].status == Status.PASS
    assert fs["PRB-004"].status == Status.FAIL and "CDI expected" in fs["PRB-004"].message
    # without CDI (v25.3) the same output is the expected path
    fs = {f.check_id: f for f in _probe(version="v25.3.4").judge("gpu-node-1", _pod("gpu-node-1"), [],
                                                                 parse_probe_output(legacy))}
    assert fs["PRB-004"].status == Status.PASS


def test_judge_pending_insufficient_attributes_cause() -> None:
    p = _probe()
    ev = ["FailedScheduling: 0/4 nodes are available: 1 Insufficient nvidia.com/gpu."]
    (f,) = p.judge("gpu-node-1", _pod(None, "Pending"), ev, parse_probe_output(""))
    assert f.check_id == "PRB-001" and f.status == Status.FAIL and "allocated to other pods" in f.message
    set_node_resource(p.snap, "gpu-node-1", capacity=8, allocatable=0)
    (f,) = p.judge("gpu-node-1", _pod(None, "Pending"), ev, parse_probe_output(""))
    assert "advertises no allocatable" in f.message


def test_judge_taint_and_image_pull() -> None:
    p = _probe()
    ev = ["FailedScheduling: 0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: ml}."]
    (f,) = p.judge("gpu-node-1", _pod(None, "Pending"), ev, parse_probe_output(""))
    assert "taint" in f.message
    fs = p.judge("gpu-node-1", _pod("gpu-node-1", "Pending", {"reason": "ImagePullBackOff", "message": "x"}), [],
                 parse_probe_output(""))
    assert [(f.check_id, f.status) for f in fs] == [("PRB-001", Status.PASS), ("PRB-002", Status.FAIL)]
