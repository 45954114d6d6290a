"""The kind tier in the DRA model: a real claim in a real container (issue #22, item 4).

The real GPU Operator v25.3.4 with its device plugin off, and beside it our fake DRA kubelet plugin
(fixtures/fake-dra, on k8s.io/dynamic-resource-allocation v0.36.3, the cluster's release) installed under the
names of NVIDIA's DRA driver chart (gpu_conformance/sim/kind/dra_driver.py). The kubelet registers the plugin,
kube-scheduler allocates each probe pod's claim from the node's ResourceSlice, the kubelet's NodePrepareResources
call gets the GPU's CDI name back and containerd injects it: the probe's container sees the fake GPU of its own
node through CDI, with NVIDIA_VISIBLE_DEVICES=void and the device node present.

A cluster of its own (one kind tier per machine, so not beside tests/test_kind.py's module cluster); measured
with `pytest --tiers=slow tests/test_kind_dra.py -k real_container` on a warm tier cache, 2 shared cores:
77 s (cluster ready in 70 s, then the suite and the probe).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpu_conformance.model import Status
from gpu_conformance.session import ConformanceRun
from gpu_conformance.settings import Settings
from gpu_conformance.sim.kind import dra_driver
from gpu_conformance.sim.kind.cluster import KindCluster
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid


def test_the_dra_driver_is_installed_under_the_charts_names() -> None:
    """No cluster: the objects the kind tier applies, as the checks find NVIDIA's chart."""
    objs = {(o["kind"], o["metadata"]["name"]): o for o in dra_driver.objects("/var/lib/fake-gpu", "/var/run/cdi",
                                                                               "example/gpu")}
    ds = objs[("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
    assert ds["metadata"]["namespace"] == "nvidia-dra-driver-gpu"
    assert ds["spec"]["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-component": "kubelet-plugin"}
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "gpus"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {
        "/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi", "/var/lib/fake-gpu"}
    assert ("DeviceClass", "gpu.nvidia.com") in objs


def test_kind_config_mounts_the_dra_plugin_into_every_node(tmp_path: Path) -> None:
    c = KindCluster(work=tmp_path, gpu_path="cdi", dra=True)
    c.image, c.dra_plugin = "example.local/node:1", tmp_path / "plugin"
    c.nvidia_ctk, c.fake_nvml = tmp_path / "nvidia-ctk", tmp_path / "libnvidia-ml.so.1"
    config = yaml.safe_load(c._write_config(tmp_path).read_text())
    for node in config["nodes"]:
        assert {"hostPath": str(tmp_path / "plugin"), "containerPath": dra_driver.NODE_PATH,
                "readOnly": True} in node["extraMounts"]
    assert c.clusterpolicy()["spec"]["devicePlugin"]["enabled"] is False


@pytest.mark.kind
def test_a_probe_claim_puts_a_fake_gpu_into_a_real_container_through_the_dra_plugin(tmp_path: Path) -> None:
    cluster = KindCluster(work=tmp_path / "kind", gpu_path="cdi", dra=True).start()
    try:
        gpu_nodes = cluster.gpu_nodes()
        settings = Settings(kubeconfig=str(cluster.kubeconfig), probe_timeout=120).validate()
        run = ConformanceRun(settings, "current")
        try:
            run.start()
            probe = run.run_probe()
            result = run.result()
        finally:
            run.close()
    finally:
        cluster.stop()
    assert result.operator["resource_model"] == "dra-driver"
    for check_id in ("DPL-010", "DPL-011", "DPL-012"):
        found = [f for f in run.findings if f.check_id == check_id]
        assert found and all(f.status is Status.PASS for f in found), [(f.node, f.message) for f in found]
    assert {f.node for f in run.findings if f.check_id == "DPL-012"} == set(gpu_nodes)
    blocked = {n.node: n.blocked_reason() for n in run.verdict().nodes if not n.gpu_path_clear}
    assert sorted(probe.pods) == sorted(gpu_nodes), (probe.skipped, blocked)
    for node, pod in probe.pods.items():
        out = pod.output
        assert pod.path == "claim" and pod.phase == "Succeeded", (node, pod.phase, pod.event_lines(), pod.logs)
        # The GPU the scheduler allocated on this node, by its UUID (the fake nvidia-smi the CDI spec mounted).
        assert len(out.uuids) == 1 and out.uuids[0] in {gpu_uuid(node, i) for i in range(cluster.gpus)}, pod.logs
        assert out.visible_devices == "void", pod.logs
        assert any(d.startswith("/dev/nvidia") and d[len("/dev/nvidia"):].isdigit() for d in out.devices), pod.logs
    probe_ids = ("PRB-001", "PRB-002", "PRB-003", "PRB-004")
    by_id = {f.check_id: f for f in run.findings if f.check_id in probe_ids}
    assert {k: by_id[k].status for k in probe_ids} == dict.fromkeys(probe_ids, Status.PASS), \
        {k: f.message for k, f in by_id.items()}
