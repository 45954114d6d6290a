"""The kind tier's container-toolkit image (gpu_conformance/sim/kind/toolkit_image.py), without a cluster: its
installer, NVIDIA's nvidia-toolkit v1.17.8, run from the image's own filesystem (chroot) with the environment the
GPU Operator v25.3.4 gives its toolkit DaemonSet, against a fake host (the node's root at /host, as the DaemonSet
mounts it) holding the fake host driver and containerd v2.4.2 with the kind node's config. It must do on that host
what it does on a real node. Needs root (chroot, mknod) and the built binaries; skips otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from gpu_conformance import gotools
from gpu_conformance.sim.builds import node_binaries as nodebin
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import nvidia_cdi, toolkit_image
from gpu_conformance.sim.kind import operator as kindop

NODE = "gpu-conformance-worker"
KIND_NODE = Path(__file__).resolve().parents[1] / "kind" / "node"


def _unpack(image: oci.Image, root: Path) -> None:
    """The image's filesystem in `root` (what the runtime would unpack)."""
    for e in image.entries:
        path = root / e.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if e.link is not None:
            path.symlink_to(e.link)
        elif e.source is not None:
            shutil.copyfile(e.source, path)
            path.chmod(e.mode)
        else:
            path.mkdir(exist_ok=True)


def _fake_host(host: Path, containerd: Path) -> None:
    """A GPU node's root as the tier leaves it before the operator comes: containerd and its config, the fake host
    driver where nvidia_cdi.py installs it (library, GPU table, nvidia-smi, device nodes)."""
    table = fakegpu.gpu_table(NODE, 2)
    lib = host / nvidia_cdi.HOST_LIB_DIR.lstrip("/")
    lib.mkdir(parents=True)
    versioned = f"libnvidia-ml.so.{nvidia_cdi.DRIVER_VERSION}"
    shutil.copyfile(fakenvml.ensure_library(), lib / versioned)
    (lib / fakenvml.LIBRARY).symlink_to(versioned)
    (lib / nvidia_cdi.LIBCUDA).write_text(nvidia_cdi.LIBCUDA_STAND_IN)
    driver_root = host / kindop.DRIVER_ROOT.lstrip("/")
    driver_root.mkdir(parents=True)
    (driver_root / fakegpu.TABLE_FILE).write_text(table)
    (lib / fakegpu.TABLE_FILE).symlink_to("../../.." + kindop.DRIVER_ROOT + "/" + fakegpu.TABLE_FILE)
    smi = host / nvidia_cdi.SMI_IN_ROOT
    smi.parent.mkdir(parents=True)
    smi.write_text(nvidia_cdi.node_smi(table, kindop.DRIVER_ROOT))
    smi.chmod(0o755)
    dev = host / "dev"
    dev.mkdir()
    for minor in fakenvml.table_minors(table):
        os.mknod(dev / f"nvidia{minor}", 0o666 | stat.S_IFCHR, os.makedev(fakenvml.NVIDIA_MAJOR, minor))
    os.mknod(dev / "nvidiactl", 0o666 | stat.S_IFCHR, os.makedev(fakenvml.NVIDIA_MAJOR, fakenvml.NVIDIACTL_MINOR))
    os.mknod(dev / "nvidia-uvm", 0o666 | stat.S_IFCHR, os.makedev(fakenvml.UVM_MAJOR, 0))
    (host / "usr/local/bin").mkdir(parents=True)
    shutil.copyfile(containerd, host / "usr/local/bin/containerd")
    (host / "usr/local/bin/containerd").chmod(0o755)
    (host / "etc/containerd").mkdir(parents=True)
    (host / "etc/containerd/config.toml").write_text(
        (KIND_NODE / "containerd-config.toml").read_text().replace("@PAUSE_IMAGE@", "registry.k8s.io/pause:3.10"))


def _operator_env() -> dict[str, str]:
    """The toolkit container's environment as operator v25.3.4 renders it with cdi.enabled and cdi.default
    (assets/state-container-toolkit/0500_daemonset.yaml, TransformToolkit, transformForRuntime), plus what the
    entrypoint sources from the validator's driver-ready for a host driver, plus the tier's toolkit.env. Restart
    mode none: there is no containerd process to signal here."""
    return {"PATH": toolkit_image.ENV[0].removeprefix("PATH="), "ROOT": "/usr/local/nvidia",
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND": nvidia_cdi.MANAGEMENT_KIND,
            "NVIDIA_VISIBLE_DEVICES": "void", "TOOLKIT_PID_FILE": "/run/nvidia/toolkit/toolkit.pid",
            "CDI_ENABLED": "true", "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES": "nvidia.cdi.k8s.io/",
            "CRIO_CONFIG_MODE": "config", "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi", "RUNTIME": "containerd",
            "CONTAINERD_RUNTIME_CLASS": "nvidia", "RUNTIME_CONFIG": "/runtime/config-dir/config.toml",
            "CONTAINERD_CONFIG": "/runtime/config-dir/config.toml",
            "RUNTIME_SOCKET": "/runtime/sock-dir/containerd.sock",
            "CONTAINERD_SOCKET": "/runtime/sock-dir/containerd.sock",
            "IS_HOST_DRIVER": "true", "NVIDIA_DRIVER_ROOT": "/", "DRIVER_ROOT_CTR_PATH": "/host",
            "NVIDIA_DEV_ROOT": "/", "DEV_ROOT_CTR_PATH": "/host",
            **{e["name"]: e["value"] for e in kindop.TOOLKIT_ENV},
            "NO_DAEMON": "true", "RUNTIME_RESTART_MODE": "none"}


def test_the_toolkit_is_on_with_cdi_and_off_on_the_legacy_path() -> None:
    cdi, legacy = kindop.clusterpolicy("cdi")["spec"]["toolkit"], kindop.clusterpolicy("legacy")["spec"]["toolkit"]
    assert (cdi["enabled"], legacy["enabled"]) == (True, False)
    # The chart's toolkit release of v25.3.4: the installer and its binaries are built at that version.
    assert cdi["version"].startswith(f"v{gotools.TOOLKIT_VERSION}-")
    assert cdi["env"] == kindop.TOOLKIT_ENV


def test_the_installer_sets_up_containerd_and_writes_the_management_spec(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chroot and mknod need root")
    try:
        busybox = nodebin.static_busybox()
        image = toolkit_image.image(kindop.clusterpolicy("cdi")["spec"]["toolkit"], busybox)
        containerd = nodebin.ensure_binaries() / "containerd"
    except gotools.GoMissingError as exc:
        pytest.skip(str(exc))
    root = tmp_path / "rootfs"
    _unpack(image, root)
    host = root / "host"
    _fake_host(host, containerd)
    # The DaemonSet's hostPath mounts, as directories of the fake host linked into the container's filesystem.
    for inside, on_host in (("usr/local/nvidia", "usr/local/nvidia"), ("runtime/config-dir", "etc/containerd"),
                            ("var/run/cdi", "var/run/cdi"), ("run/nvidia/toolkit", "run/nvidia/toolkit")):
        (host / on_host).mkdir(parents=True, exist_ok=True)
        (root / inside).parent.mkdir(parents=True, exist_ok=True)
        (root / inside).symlink_to("/host/" + on_host)
    # The fake NVML logs every entry point the installer calls (and "UNIMPLEMENTED" for one it does not answer).
    env = {**_operator_env(), fakenvml.LOG_ENV: "/tmp/nvml.log"}
    proc = subprocess.run(["chroot", str(root), "/work/nvidia-toolkit"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = (root / "tmp/nvml.log").read_text()
    assert "nvmlSystemGetDriverVersion" in calls and fakenvml.UNIMPLEMENTED not in calls, calls
    toolkit = host / nvidia_cdi.TOOLKIT_DIR.lstrip("/")
    # The runtime binaries and their wrappers, the hook the plugin's spec names included.
    for name in ("nvidia-container-runtime", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy",
                 "nvidia-ctk", "nvidia-cdi-hook"):
        assert (toolkit / name).is_file() and (toolkit / f"{name}.real").is_file(), name
    wrapper = (toolkit / "nvidia-container-runtime").read_text()
    assert 'grep -e "^nvidia "' in wrapper and "exec runc" in wrapper
    runtime_toml = (toolkit / ".config/nvidia-container-runtime/config.toml").read_text()
    assert 'mode = "cdi"' in runtime_toml and "nvidia.cdi.k8s.io/" in runtime_toml
    assert nvidia_cdi.MANAGEMENT_KIND in runtime_toml
    # containerd's config: config.toml itself, written whole from `containerd config dump` (v1.17.8 writes no
    # drop-in), `nvidia` the default runtime with the plugin's annotation prefix passed through.
    cfg = tomllib.loads((host / "etc/containerd/config.toml").read_text())
    cri = cfg["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == f"{nvidia_cdi.TOOLKIT_DIR}/nvidia-container-runtime"
    assert nvidia["container_annotations"] == ["nvidia.cdi.k8s.io/*"]
    assert {"nvidia-cdi", "nvidia-legacy"} <= set(cri["containerd"]["runtimes"])
    assert not (host / "etc/containerd/conf.d").exists()
    # The management spec: every device node of the fake driver, the driver's nvidia-smi and NVML library, paths
    # on the node (the container's /host taken off).
    specs = list((host / "var/run/cdi").iterdir())
    assert [p.name for p in specs] == ["management.nvidia.com-gpu.yaml"], specs
    spec = specs[0].read_text()
    assert "kind: management.nvidia.com/gpu" in spec and "name: all" in spec
    assert "/dev/nvidia1" in spec and "/dev/nvidiactl" in spec and "/host" not in spec
    assert "hostPath: /usr/bin/nvidia-smi" in spec
    assert f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{nvidia_cdi.DRIVER_VERSION}" in spec
