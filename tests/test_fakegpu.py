"""The fake-GPU stack of fixtures/fake-gpu: the files the device plugin writes (CDI spec, nvidia-smi, GPU table),
the fake nvidia-smi itself, and the agreement of its Dockerfile with the offline image builder.

The plugin's tests need its binary (built with Go in ~2 s into the node binaries cache); without Go they skip.
The Docker build test runs only where a Docker daemon answers and can pull golang/busybox.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from gpu_conformance.probe.output import parse_probe_output
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid

SMI = fakegpu.FIXTURE_DIR / "nvidia-smi"
DOCKERFILE = fakegpu.FIXTURE_DIR / "Dockerfile"


@pytest.fixture(scope="module")
def bin_dir(fake_gpu_bins: Path) -> Path:
    return fake_gpu_bins


def _setup(bin_dir: Path, tmp_path: Path, node: str = "gpu-node-7", count: int = 3, **kw: object) -> dict:
    cdi, drv = tmp_path / "cdi", tmp_path / "driver"
    cmd = fakegpu.plugin_command(bin_dir / "fake-gpu-device-plugin", node, count, cdi, drv, setup_only=True,
                                 **kw)  # type: ignore[arg-type]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})
    assert out.stdout.strip() == str(cdi / fakegpu.CDI_SPEC_FILE)
    return json.loads((cdi / fakegpu.CDI_SPEC_FILE).read_text())


# ------------------------------------------------------------------------------- what the plugin writes

def test_plugin_writes_the_cdi_spec_by_index_uuid_and_all_with_void_and_nvidia_smi(bin_dir: Path,
                                                                                   tmp_path: Path) -> None:
    spec = _setup(bin_dir, tmp_path, host_driver_root="/var/lib/fake-gpu")
    # nvidia-ctk's default names (strategies index and uuid, and "all"): what NVIDIA_VISIBLE_DEVICES can say.
    uuids = [gpu_uuid("gpu-node-7", i) for i in range(3)]
    assert spec["kind"] == "nvidia.com/gpu"
    assert [d["name"] for d in spec["devices"]] == ["0", uuids[0], "1", uuids[1], "2", uuids[2], "all"]
    by_name = {d["name"]: d["containerEdits"]["deviceNodes"] for d in spec["devices"]}
    node = by_name["1"][0]
    assert (node["path"], node["type"], node["major"], node["minor"]) == ("/dev/nvidia1", "c", 195, 1)
    assert by_name[uuids[1]] == by_name["1"]
    assert [n["path"] for n in by_name["all"]] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"]
    edits = spec["containerEdits"]
    assert edits["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [d["path"] for d in edits["deviceNodes"]] == ["/dev/nvidiactl"]
    # The mounts name the node's paths (host-driver-root), not where the plugin's container wrote them.
    assert {m["containerPath"]: m["hostPath"] for m in edits["mounts"]} == {
        "/usr/bin/nvidia-smi": "/var/lib/fake-gpu/nvidia-smi", "/etc/fake-gpu/gpus": "/var/lib/fake-gpu/gpus"}
    assert fakegpu.cdi_device_name(1) == "nvidia.com/gpu=1"


def test_plugin_derives_the_simulated_nodes_uuids_and_installs_our_nvidia_smi(bin_dir: Path,
                                                                               tmp_path: Path) -> None:
    _setup(bin_dir, tmp_path, node="real-gpu-node-0", count=2)
    drv = tmp_path / "driver"
    name = fakegpu.gpu_name(fakegpu.default_product())
    # Go's GPUUUID and Python's gpu_uuid are one derivation: a GPU has one UUID in every tier.
    table = "".join(f"{i} {gpu_uuid('real-gpu-node-0', i)} {name}\n" for i in range(2))
    assert (drv / fakegpu.TABLE_FILE).read_text() == table
    # The table the fake NVML's tests write is the plugin's, line for line.
    assert fakegpu.gpu_table("real-gpu-node-0", 2) == table
    assert (drv / fakegpu.SMI_FILE).read_bytes() == SMI.read_bytes()
    assert os.access(drv / fakegpu.SMI_FILE, os.X_OK)


def test_plugin_refuses_an_unknown_strategy(bin_dir: Path, tmp_path: Path) -> None:
    cmd = fakegpu.plugin_command(bin_dir / "fake-gpu-device-plugin", "n", 1, tmp_path, tmp_path, strategy="magic",
                                 setup_only=True)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode != 0 and 'unknown strategy "magic"' in out.stderr
    assert not (tmp_path / fakegpu.CDI_SPEC_FILE).exists()


def test_daemonset_runs_the_plugin_image_with_flags_it_knows(bin_dir: Path) -> None:
    docs = list(yaml.safe_load_all((fakegpu.FIXTURE_DIR / "daemonset.yaml").read_text()))
    (container,) = docs[1]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == fakegpu.FAKE_GPU_IMAGE
    usage = subprocess.run([str(bin_dir / "fake-gpu-device-plugin"), "-h"], capture_output=True, text=True,
                           check=False).stderr
    for arg in container["args"]:
        assert f"  -{arg.lstrip('-').split('=')[0]} " in usage, arg
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    hosts = {v["name"]: v["hostPath"]["path"] for v in docs[1]["spec"]["template"]["spec"]["volumes"]}
    # The spec the plugin writes into /host/cdi must name the node's driver root, where /host/fake-gpu is.
    assert f"--driver-root={mounts['fake-gpu']}" in container["args"]
    assert f"--host-driver-root={hosts['fake-gpu']}" in container["args"]
    assert f"--cdi-spec-dir={mounts['cdi']}" in container["args"] and hosts["cdi"] == "/var/run/cdi"


def test_plugin_takes_node_and_gpus_from_the_daemonsets_environment(bin_dir: Path, tmp_path: Path) -> None:
    # What daemonset.yaml gives it: NODE_NAME from the downward API, the rest from the optional ConfigMap.
    env = {"PATH": os.environ["PATH"], "NODE_NAME": "kind-worker", "FAKE_GPU_COUNT": "3", "FAKE_GPU_NAME": "Fake X"}
    subprocess.run([str(bin_dir / "fake-gpu-device-plugin"), f"--cdi-spec-dir={tmp_path}",
                    f"--driver-root={tmp_path}", "--setup-only"], env=env, check=True, capture_output=True)
    assert (tmp_path / "gpus").read_text() == "".join(f"{i} {gpu_uuid('kind-worker', i)} Fake X\n" for i in range(3))
    env["FAKE_GPU_COUNT"] = "three"
    out = subprocess.run([str(bin_dir / "fake-gpu-device-plugin"), "--setup-only"], env=env, capture_output=True,
                         text=True, check=False)
    assert out.returncode != 0 and 'FAKE_GPU_COUNT="three" is not a number' in out.stderr


# ------------------------------------------------------------------------------- the fake nvidia-smi

def _smi(tmp_path: Path, *args: str, table: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "FAKE_GPU_TABLE": str(tmp_path / "gpus"), "FAKE_GPU_DEV_DIR": str(tmp_path)}
    if table is not None:
        (tmp_path / "gpus").write_text(table)
    return subprocess.run(["sh", str(SMI), *args], capture_output=True, text=True, check=False, env=env)


def _table(node: str, count: int) -> str:
    return "".join(f"{i} {gpu_uuid(node, i)} NVIDIA H100 80GB HBM3\n" for i in range(count))


def test_fake_nvidia_smi_without_devices_or_driver_says_so(tmp_path: Path) -> None:
    out = _smi(tmp_path, "-L")                        # no GPU table: no driver
    assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stderr
    out = _smi(tmp_path, "-L", table=_table("n", 2))  # a driver, but no /dev/nvidiaN in the container
    assert (out.returncode, out.stdout) == (6, "No devices were found\n")
    # The bare call (NVIDIA's validator: driver and toolkit stages) fails on the same conditions.
    assert (_smi(tmp_path).returncode, _smi(tmp_path).stdout) == (6, "No devices were found\n")
    (tmp_path / "gpus").unlink()
    assert _smi(tmp_path).returncode == 9
    assert _smi(tmp_path, "-q").returncode == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="creating character devices (mknod) needs root")
def test_fake_nvidia_smi_lists_exactly_the_injected_devices(tmp_path: Path) -> None:
    # The container got /dev/nvidia1 only (and /dev/nvidia7, a device of no GPU of this node); a regular file
    # named like a device is not one.
    for minor in (1, 7):
        os.mknod(tmp_path / f"nvidia{minor}", 0o600 | 0o020000, os.makedev(195, minor))
    (tmp_path / "nvidia0").write_text("")
    out = _smi(tmp_path, "-L", table=_table("real-gpu-node-0", 3))
    assert out.returncode == 0
    uuid = gpu_uuid("real-gpu-node-0", 1)
    assert out.stdout == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid})\n"
    assert parse_probe_output(f"== nvidia-smi -L\n{out.stdout}rc=0\n== end\n").uuids == [uuid]
    bare = _smi(tmp_path)
    assert bare.returncode == 0 and uuid in bare.stdout and gpu_uuid("real-gpu-node-0", 0) not in bare.stdout


# ------------------------------------------------------------------------------- Dockerfile vs builder

def test_dockerfile_and_offline_builder_agree() -> None:
    assert fakegpu.disagreements() == []


@pytest.mark.parametrize(("old", "new", "said"), [
    ('ENTRYPOINT ["/pause"]', 'ENTRYPOINT ["/pause", "-v"]', "stage pause: ENTRYPOINT ['/pause', '-v']"),
    ("COPY --from=build /out/pause /pause", "COPY --from=build /out/pause /bin/pause",
     "stage pause: copies [('pause', '/bin/pause')]"),
    ('CMD ["sh"]', 'ENV FOO=1\nCMD ["sh"]', "stage probe: ENV ['FOO=1']"),
    ("FROM scratch AS pause", "FROM ${BUSYBOX_IMAGE} AS pause", "stage pause: FROM busybox"),
    ("ARG GO_IMAGE=golang:1.26-bookworm", "ARG GO_IMAGE=golang:1.24", "build stage: golang:1.24"),
    ("FROM ${BUSYBOX_IMAGE} AS probe\n", "FROM ${BUSYBOX_IMAGE} AS probe\nRUN mkdir /x\n",
     "stage probe: 'RUN mkdir /x'"),
    ("FROM ${BUSYBOX_IMAGE} AS probe", "FROM ${BUSYBOX_IMAGE} AS extra\nFROM ${BUSYBOX_IMAGE} AS probe",
     "stage extra: an image the offline builder does not make"),
])
def test_a_dockerfile_that_drifts_from_the_builder_is_named(tmp_path: Path, old: str, new: str, said: str) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    (tmp_path / "Dockerfile").write_text(text.replace(old, new, 1))
    shutil.copy(fakegpu.FIXTURE_DIR / "go.mod", tmp_path / "go.mod")
    problems = fakegpu.disagreements(tmp_path / "Dockerfile")
    assert len(problems) == 1 and problems[0].startswith(said), problems


def _archive(path: Path) -> tuple[dict, dict[str, tuple[tarfile.TarInfo, bytes]]]:
    """An OCI archive's config (plus the names it is tagged with) and its one layer's members with contents."""
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(files["index.json"])
    manifest = json.loads(files["blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    layer_gz = files["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer_gz))) as layer:
        members = {m.name: (m, layer.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
                   for m in layer.getmembers()}
    config["names"] = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
    return config, members


def test_offline_images_are_the_dockerfile_stages(bin_dir: Path, tmp_path: Path) -> None:
    archives = fakegpu.write_images(tmp_path, bin_dir=bin_dir)
    stages = fakegpu.dockerfile_stages(DOCKERFILE)
    for archive, (target, spec) in zip(archives, fakegpu.IMAGES.items(), strict=True):
        config, members = _archive(archive)
        stage = stages[target]
        assert config["names"] == list(spec.names)
        assert (config["config"]["Entrypoint"] or []) == list(stage.entrypoint)
        assert (config["config"]["Cmd"] or []) == list(stage.cmd)
        assert config["config"]["Env"] == [*oci.DEFAULT_ENV, *stage.env]
        for frm, src, dest in stage.copies:
            assert frm == "build"
            member, data = members[dest.lstrip("/")]
            assert data == (bin_dir / src.rsplit("/", 1)[-1]).read_bytes() and member.mode & 0o111, dest
        regular = {n for n, (m, _) in members.items() if m.isfile()}
        if stage.base == "busybox":
            assert "bin/busybox" in regular and members["bin/sh"][0].linkname == "busybox"
        else:
            assert regular == {dest.lstrip("/") for _, _, dest in stage.copies}


def _docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "no docker CLI"
    out = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                         check=False, timeout=30)
    return None if out.returncode == 0 else f"no Docker daemon answers ({out.stderr.strip()[:120]})"


@pytest.mark.skipif(bool(os.environ.get("GPU_CONFORMANCE_SKIP_DOCKER_BUILD")), reason="asked to skip")
def test_docker_build_gives_the_offline_images(tmp_path: Path) -> None:
    """Where Docker is available (and can pull golang and busybox): each stage built by Docker has the
    entrypoint, command, environment and files of the offline builder's image."""
    reason = _docker_ready()
    if reason:
        pytest.skip(reason)
    for target, spec in fakegpu.IMAGES.items():
        tag = f"gpu-conformance-test/fake-gpu-{target}:test"
        build = subprocess.run(["docker", "build", "--target", target, "-t", tag, str(fakegpu.FIXTURE_DIR)],
                               capture_output=True, text=True, check=False)
        if build.returncode != 0 and ("pull" in build.stderr or "resolve" in build.stderr):
            pytest.skip(f"docker build cannot pull its base images: {build.stderr.strip()[-200:]}")
        assert build.returncode == 0, build.stderr[-2000:]
        try:
            cfg = json.loads(subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True,
                                            check=True).stdout)[0]["Config"]
            assert (cfg.get("Entrypoint") or []) == list(spec.entrypoint)
            assert (cfg.get("Cmd") or []) == list(spec.cmd)
            assert [e for e in cfg.get("Env") or [] if not e.startswith("PATH=")] == list(spec.env)
            cid = subprocess.run(["docker", "create", tag, "x"], capture_output=True, text=True,
                                 check=True).stdout.strip()
            try:
                export = subprocess.run(["docker", "export", cid], capture_output=True, check=True).stdout
            finally:
                subprocess.run(["docker", "rm", cid], capture_output=True, check=False)
            with tarfile.open(fileobj=io.BytesIO(export)) as tar:
                names = tar.getnames()
            for _, at in spec.binaries:
                assert at.lstrip("/") in names
            if spec.base == "busybox":
                assert "bin/sh" in names
        finally:
            subprocess.run(["docker", "rmi", tag], capture_output=True, check=False)


def test_without_a_source_checkout_the_stack_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # An installed package has no fixtures/ (like gobuild/): the tiers that need them stop with one line.
    monkeypatch.setattr(fakegpu, "FIXTURE_DIR", tmp_path / "nowhere")
    with pytest.raises(fakegpu.FixtureError, match="nowhere not found: the fake-GPU stack is built from a source"):
        fakegpu.fixture_dir()
    assert fakegpu.main(["images", "--out", str(tmp_path / "out")]) == fakegpu.FixtureError.exit_code
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "out").exists()
