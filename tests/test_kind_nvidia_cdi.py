"""The kind tier's host driver and device plugin CDI spec (gpu_conformance/sim/kind/nvidia_cdi.py), without a
cluster: the generate command a GPU node runs, run here on a fake driver root with NVIDIA's nvidia-ctk v1.17.8 and
the fake NVML, and the node's nvidia-smi that carries its GPU table. Needs root (mknod) and the built tools; skips
otherwise."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gpu_conformance import gotools
from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import nvidia_cdi
from gpu_conformance.sim.kind import operator as kindop

NODE = "gpu-conformance-worker"


def _nvidia_ctk() -> Path:
    try:
        return gotools.ensure_tool(gotools.TOOLKIT_CTK)
    except gotools.GoMissingError as exc:
        pytest.skip(str(exc))


def _root_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("device nodes need mknod (root)")


def test_node_smi_lists_the_gpus_whose_device_nodes_the_container_has(tmp_path: Path) -> None:
    """NVIDIA's spec mounts the driver's nvidia-smi but not our GPU table: the node's copy carries it."""
    _root_or_skip()
    smi = tmp_path / "nvidia-smi"
    smi.write_text(nvidia_cdi.node_smi(fakegpu.gpu_table(NODE, 2), kindop.DRIVER_ROOT))
    smi.chmod(0o755)
    dev = tmp_path / "dev"
    dev.mkdir()
    os.mknod(dev / "nvidia1", 0o666 | stat.S_IFCHR, os.makedev(fakenvml.NVIDIA_MAJOR, 1))
    env = {"PATH": "/usr/bin:/bin", "FAKE_GPU_DEV_DIR": str(dev)}
    out = subprocess.run([str(smi), "-L"], env=env, capture_output=True, text=True, check=False)
    uuid = fakegpu.uuids(NODE, 2)[1]
    assert (out.returncode, out.stdout) == (0, f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid})\n"), out.stderr
    (dev / "nvidia1").unlink()
    out = subprocess.run([str(smi), "-L"], env=env, capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout) == (6, "No devices were found\n")


def test_the_nodes_generate_command_gives_nvidia_ctks_spec_with_the_plugins_names(tmp_path: Path) -> None:
    """The spec a GPU node gets for the device plugin, generated here as there: the plugin's kind by UUID (the
    names its Allocate annotates), with NVIDIA's hook where the operator's toolkit installs it and the driver's
    nvidia-smi and library mounted from the driver root."""
    _root_or_skip()
    ctk = _nvidia_ctk()
    table = fakegpu.gpu_table(NODE, 2)
    root = fakenvml.make_driver_root(tmp_path / "root", table, nvidia_cdi.DRIVER_VERSION)
    # v1.17.8 takes the driver's libraries by libcuda.so.<version>: the node's stand-in, as node setup writes it.
    (root.path / fakenvml.LIB_DIR / nvidia_cdi.LIBCUDA).write_text(nvidia_cdi.LIBCUDA_STAND_IN)
    (root.path / nvidia_cdi.SMI_IN_ROOT).parent.mkdir(parents=True)
    (root.path / nvidia_cdi.SMI_IN_ROOT).write_text(nvidia_cdi.node_smi(table, kindop.DRIVER_ROOT))
    (root.path / nvidia_cdi.SMI_IN_ROOT).chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", fakenvml.TABLE_ENV: str(root.table),
           fakenvml.DRIVER_VERSION_ENV: nvidia_cdi.DRIVER_VERSION}
    uuids = fakegpu.uuids(NODE, 2)
    ((kind, name, strategies),) = nvidia_cdi.SPECS
    out = tmp_path / name
    cmd = nvidia_cdi.generate_command(kind, str(out), strategies, str(root.path), dev_root=str(root.path),
                                      nvidia_ctk=str(ctk))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-1000:]
    plugin = fakenvml.CdiRun(json.loads(out.read_text()), [], [], [], 0, "")
    assert plugin.spec["kind"] == nvidia_cdi.PLUGIN_KIND
    assert plugin.device_names == [*uuids, "all"]
    assert plugin.device_nodes(uuids[1]) == ["/dev/nvidia1"]
    edits = plugin.spec["containerEdits"]
    assert {h["path"] for h in edits["hooks"]} == {nvidia_cdi.HOOK_PATH}
    assert nvidia_cdi.HOOK_PATH == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    assert mounts["/usr/bin/nvidia-smi"] == str(root.path / nvidia_cdi.SMI_IN_ROOT)


def test_node_setup_script_installs_the_host_driver_and_generates_the_plugins_spec() -> None:
    """What runs on each GPU node (sh -ec): the library under the driver's versioned name and libcuda's stand-in in
    the host's library directory, the table, nvidia-smi, the device nodes in the node's own /dev, the nvidia module
    in the node's /proc/modules, then one nvidia-ctk run against the node's root, failing with its log's tail; in the
    DRA model no run at all (its plugin writes its own spec)."""
    script = nvidia_cdi.node_setup_script(fakegpu.gpu_table(NODE, 2), "/var/lib/fake-gpu")
    assert f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{nvidia_cdi.DRIVER_VERSION}" in script
    assert f"/usr/lib/x86_64-linux-gnu/{nvidia_cdi.LIBCUDA}" in script and "> /usr/bin/nvidia-smi" in script
    assert "mknod -m 666 /dev/nvidia1 c 195 1" in script and "mknod -m 666 /dev/nvidiactl c 195 255" in script
    assert f"mount --bind {nvidia_cdi.MODULES_FILE} /proc/modules" in script
    runs = [ln for ln in script.splitlines() if f"{nvidia_cdi.NVIDIA_CTK} cdi generate" in ln]
    assert len(runs) == 1 and all("--driver-root=/ --dev-root=/ " in r and "exit 1" in r for r in runs)
    assert f"--output={nvidia_cdi.CDI_DIR}/{nvidia_cdi.PLUGIN_SPEC}" in runs[0]
    proc = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    dra = nvidia_cdi.node_setup_script(fakegpu.gpu_table(NODE, 2), "/var/lib/fake-gpu", plugin_spec=False)
    assert "cdi generate" not in dra and "libnvidia-ml.so.1" in dra
