"""The real-node tier's pure parts (no root needed): OCI archives, the kubelet's configuration, the probe's
judgement of a container the runtime refused or a pod deleted under it. The fake-GPU stack: test_fakegpu.py."""

from __future__ import annotations

import gzip
import hashlib
import ipaddress
import json
import tarfile
from pathlib import Path

import pytest

from gpu_conformance.checks.registry import REGISTRY
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Status
from gpu_conformance.probe_observations import PodObservation, ProbeObservations
from gpu_conformance.settings import Settings
from gpu_conformance.sim.realnode import binaries as rnbin
from gpu_conformance.sim.realnode import node, oci


def test_oci_archive_is_a_consistent_image_layout(tmp_path: Path) -> None:
    payload = tmp_path / "hello"
    payload.write_text("hi\n")
    image = oci.Image(names=("realnode.local/x:1", "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04"),
                      entries=[oci.Entry("/usr/bin/hello", source=payload), oci.Entry("/bin/sh", link="busybox")],
                      cmd=("sh",))
    out = oci.write_archive(image, tmp_path / "img.tar")
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    assert [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]] == list(image.names)
    manifest = json.loads(files["blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    layer_gz = files["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    layer = gzip.decompress(layer_gz)
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert config["config"]["Cmd"] == ["sh"] and config["os"] == "linux"
    # Same inputs, same digests: the archive is reproducible.
    again = oci.write_archive(image, tmp_path / "img2.tar")
    assert again.read_bytes() == out.read_bytes()


def test_kubelet_api_requires_authentication_and_authorization(tmp_path: Path) -> None:
    # Reachable from the host through the veth pair: no anonymous caller, every request authorized by the
    # API server (webhook), client certificates of the control plane's CA.
    cp = node.ControlPlane(api_port=1, ca_cert=tmp_path / "ca.crt", ca_key=tmp_path / "ca.key",
                           admin_kubeconfig=tmp_path / "kubeconfig")
    rn = node.RealNode(cp, work_dir=tmp_path / "gpu-rn-x")
    rn.subnet = ipaddress.ip_network("10.213.0.0/30")
    cfg = rn._kubelet_config()
    assert cfg["authentication"]["anonymous"] == {"enabled": False}
    assert cfg["authentication"]["webhook"]["enabled"] is True
    assert cfg["authentication"]["x509"] == {"clientCAFile": str(cp.ca_cert)}
    assert cfg["authorization"]["mode"] == "Webhook" and cfg["readOnlyPort"] == 0


def test_static_elf_detection() -> None:
    assert rnbin._is_static_elf(Path("/bin/sh")) is False
    assert rnbin._is_static_elf(Path("/etc/hostname")) is False


def _judge_probe_pod(pod: dict, events: list[dict] | None = None) -> dict:
    """PRB-002's findings on one observed probe pod, as the real-node tier meets them."""
    snap = ClusterSnapshot(nodes=[{"metadata": {"name": "gpu-node-1"}}])
    obs = ProbeObservations(run_id="t", namespace="gpu-conformance-probe", image="probe:1")
    obs.pods["gpu-node-1"] = PodObservation("gpu-node-1", "probe-1", "nvidia.com/gpu", pod, events or [])
    snap.probe = obs
    return {f.check_id: f for f in REGISTRY["PRB-002"].run(snap, Settings())}


def _pod(phase: str, waiting: dict | None = None, reason: str = "", message: str = "") -> dict:
    status: dict = {"phase": phase}
    if waiting:
        status["containerStatuses"] = [{"name": "gpu-probe", "state": {"waiting": waiting}}]
    if reason:
        status.update(reason=reason, message=message)
    return {"metadata": {"name": "probe-1"}, "spec": {"nodeName": "gpu-node-1"}, "status": status}


def test_probe_stops_at_create_container_error() -> None:
    msg = ("failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
           "nvidia.com/gpu=0")
    f = _judge_probe_pod(_pod("Pending", {"reason": "CreateContainerError", "message": msg}))["PRB-002"]
    assert f.status == Status.FAIL and "CreateContainerError" in f.message and "unresolvable CDI" in f.message


def test_probe_reports_a_pod_the_kubelet_rejected() -> None:
    pod = _pod("Failed", reason="UnexpectedAdmissionError", message="Allocate failed due to requested number of "
               "devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected")
    f = _judge_probe_pod(pod)["PRB-002"]
    assert f.status == Status.FAIL and "rejected the probe pod (UnexpectedAdmissionError)" in f.message


def test_unsupported_machine_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpu_conformance.cli import main

    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert node.unsupported_reason() == "the real-node tier needs root (namespaces, mounts, cgroups, veth)"
    # `sim up --real-nodes` stops before building or starting anything, with that line.
    state = tmp_path / "never-created"
    assert main(["sim", "up", "--real-nodes", "1", "--state-dir", str(state)]) == 3
    assert not state.exists()


def test_missing_debian_tools_name_the_apt_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rnbin.shutil, "which", lambda tool: None)
    monkeypatch.setattr(rnbin.os, "access", lambda path, mode: False)
    with pytest.raises(rnbin.HostToolsError) as e:
        rnbin.host_tools()
    msg = str(e.value)
    assert msg.startswith("the real-node tier needs runc, ip") and "apt-get install runc" in msg


def test_cgroup_walk_survives_a_directory_removed_while_walking(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet removes pod cgroups while stop walks them; a CI run failed on rglob's FileNotFoundError."""
    for sub in ("kubepods/besteffort/pod-a/c1", "kubepods/besteffort/pod-b", "kubepods/burstable"):
        (tmp_path / sub).mkdir(parents=True)
    real_scandir = node.os.scandir

    def vanishing_scandir(path):  # type: ignore[no-untyped-def]
        if str(path).endswith("pod-a"):  # gone between the parent's listing and its own
            (tmp_path / "kubepods/besteffort/pod-a/c1").rmdir()
            (tmp_path / "kubepods/besteffort/pod-a").rmdir()
        return real_scandir(path)

    monkeypatch.setattr(node.os, "scandir", vanishing_scandir)
    dirs = node._cgroup_dirs_deepest_first(tmp_path)
    assert dirs[-1] == tmp_path
    assert dirs.index(tmp_path / "kubepods/besteffort/pod-b") < dirs.index(tmp_path / "kubepods/besteffort")
    assert node._cgroup_dirs_deepest_first(tmp_path / "gone") == []
