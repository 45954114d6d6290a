"""The real-node tier's pure parts (no root needed): OCI archives, the fake nvidia-smi and CDI spec, the
probe's judgement of a container the runtime refused or a pod deleted under it."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from test_probe_output import _pod, _probe

from gpu_conformance.model import Status
from gpu_conformance.probe import VANISHED
from gpu_conformance.probe_output import parse_probe_output
from gpu_conformance.sim.nvidia_smi import gpu_uuid
from gpu_conformance.sim.realnode import binaries as rnbin
from gpu_conformance.sim.realnode import fakegpu, oci


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


def test_cdi_spec_names_devices_by_index_and_sets_void(tmp_path: Path) -> None:
    spec = fakegpu.cdi_spec(2, tmp_path / "nvidia-smi")
    assert spec["kind"] == "nvidia.com/gpu" and [d["name"] for d in spec["devices"]] == ["0", "1"]
    node = spec["devices"][1]["containerEdits"]["deviceNodes"][0]
    assert (node["path"], node["type"], node["major"], node["minor"]) == ("/dev/nvidia1", "c", 195, 1)
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert fakegpu.cdi_device_name(1) == "nvidia.com/gpu=1"


def test_fake_nvidia_smi_without_devices_says_so(tmp_path: Path) -> None:
    # This machine has no /dev/nvidiaN, like a container the GPU was not injected into.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(fakegpu.nvidia_smi_script("real-gpu-node-0", 2, fakegpu.default_product()))
    out = subprocess.run(["sh", str(smi), "-L"], capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout) == (6, "No devices were found\n")
    assert subprocess.run(["sh", str(smi)], capture_output=True, check=False).returncode == 2


def test_fake_nvidia_smi_lines_parse_as_the_probe_expects() -> None:
    script = fakegpu.nvidia_smi_script("real-gpu-node-0", 2, fakegpu.default_product())
    uuid = gpu_uuid("real-gpu-node-0", 1)
    assert f"1) uuid={uuid} ;;" in script
    # The line the script prints for a device, with its values filled in, parses as a GPU line.
    line = f"GPU 0: {fakegpu.gpu_name(fakegpu.default_product())} (UUID: {uuid})"
    assert parse_probe_output(f"== nvidia-smi -L\n{line}\nrc=0\n== end\n").uuids == [uuid]


def test_static_elf_detection() -> None:
    assert rnbin._is_static_elf(Path("/bin/sh")) is False
    assert rnbin._is_static_elf(Path("/etc/hostname")) is False


def test_probe_stops_at_create_container_error_with_cdi_hint() -> None:
    msg = ("failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
           "nvidia.com/gpu=0")
    fs = _probe().judge("gpu-node-1", _pod("gpu-node-1", "Pending", {"reason": "CreateContainerError", "message": msg}),
                        [], parse_probe_output(""))
    assert [(f.check_id, f.status) for f in fs] == [("PRB-001", Status.PASS), ("PRB-002", Status.FAIL)]
    assert "CreateContainerError" in fs[1].message and "CDI spec" in fs[1].message


def test_probe_reports_a_pod_deleted_under_it() -> None:
    pod = {**_pod("gpu-node-1", "Running"), VANISHED: True}
    fs = _probe().judge("gpu-node-1", pod, [], parse_probe_output(""))
    assert fs[1].check_id == "PRB-002" and fs[1].status == Status.FAIL
    assert "was deleted before it finished" in fs[1].message


def test_probe_reports_a_pod_the_kubelet_rejected() -> None:
    pod = _pod("gpu-node-1", "Failed")
    pod["status"].update(reason="UnexpectedAdmissionError", message="Allocate failed due to requested number of "
                         "devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected")
    fs = _probe().judge("gpu-node-1", pod, [], parse_probe_output(""))
    assert [(f.check_id, f.status) for f in fs] == [("PRB-001", Status.PASS), ("PRB-002", Status.FAIL)]
    assert "rejected the probe pod (UnexpectedAdmissionError)" in fs[1].message


def test_unsupported_machine_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_conformance.cli import main
    from gpu_conformance.sim.realnode import node

    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert node.unsupported_reason() == "the real-node tier needs root (namespaces, mounts, cgroups, veth)"
    # `sim up --real-nodes` stops before building or starting anything, with that line.
    assert main(["sim", "up", "--real-nodes", "1", "--state-dir", "/nonexistent/never-created"]) == 3
    assert not Path("/nonexistent/never-created").exists()


def test_missing_debian_tools_name_the_apt_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rnbin.shutil, "which", lambda tool: None)
    monkeypatch.setattr(rnbin.os, "access", lambda path, mode: False)
    with pytest.raises(rnbin.HostToolsError) as e:
        rnbin.host_tools()
    msg = str(e.value)
    assert msg.startswith("the real-node tier needs runc, ip") and "apt-get install runc" in msg
