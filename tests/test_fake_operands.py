"""The kind tier's stand-ins under the real GPU Operator: the NVIDIA runtime (legacy mode) and the validator.

Both are built from fixtures/fake-gpu and run here as binaries on files a node would have: a fake driver
(GPU table, nvidia-smi) and its CDI spec written by the device plugin's --setup-only, an OCI bundle.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid

NODE = "kind-worker"


@pytest.fixture(scope="module")
def bin_dir(fake_gpu_bins: Path) -> Path:
    return fake_gpu_bins


@pytest.fixture
def node(bin_dir: Path, tmp_path: Path) -> Path:
    """A node's root with the fake driver at /var/lib/fake-gpu and its CDI spec in /var/run/cdi."""
    root = tmp_path / "node"
    cmd = fakegpu.plugin_command(bin_dir / "fake-gpu-device-plugin", NODE, 2, root / "var/run/cdi",
                                 root / "var/lib/fake-gpu", strategy="envvar", host_driver_root="/var/lib/fake-gpu",
                                 setup_only=True)
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    return root


def _runtime(bin_dir: Path, node: Path, tmp_path: Path, env: list[str], *args: str) -> tuple[int, str, dict]:
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    config = {"process": {"env": ["PATH=/bin", *env]}, "mounts": [{"destination": "/proc", "type": "proc"}],
              "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
    (bundle / "config.json").write_text(json.dumps(config))
    runc = tmp_path / "runc"
    runc.write_text("#!/bin/sh\necho \"runc $*\"\n")
    runc.chmod(0o755)
    proc = subprocess.run([str(bin_dir / "fake-nvidia-container-runtime"), *(a.replace("@B", str(bundle))
                                                                             for a in args)],
                          capture_output=True, text=True, check=False,
                          env={"FAKE_GPU_DRIVER_ROOT": str(node / "var/lib/fake-gpu"),
                               "FAKE_GPU_CDI_SPEC": str(node / "var/run/cdi" / fakegpu.CDI_SPEC_FILE),
                               "FAKE_NVIDIA_RUNC": str(runc)})
    return proc.returncode, proc.stdout + proc.stderr, json.loads((bundle / "config.json").read_text())


def test_runtime_injects_the_gpu_named_by_uuid_and_passes_through_to_runc(bin_dir: Path, node: Path,
                                                                           tmp_path: Path) -> None:
    uuid = gpu_uuid(NODE, 1)
    rc, out, config = _runtime(bin_dir, node, tmp_path, [f"NVIDIA_VISIBLE_DEVICES={uuid}"],
                               "--root", "/r", "create", "--bundle", "@B", "c1")
    assert rc == 0, out
    assert out.strip() == f"runc --root /r create --bundle {tmp_path / 'bundle'} c1"
    assert [d["path"] for d in config["linux"]["devices"]] == ["/dev/nvidiactl", "/dev/nvidia1"]
    # The access the CDI spec gives (NVIDIA's runtime does the same: tests/test_real_nvidia_runtime.py).
    assert [(r.get("major"), r.get("minor"), r["access"]) for r in config["linux"]["resources"]["devices"]
            if r["allow"]] == [(195, 255, "rw"), (195, 1, "rw")]
    assert {m["destination"] for m in config["mounts"]} == {"/proc", "/usr/bin/nvidia-smi", "/etc/fake-gpu/gpus"}
    # Legacy mode: the variable stays as the device plugin set it (CDI injection would leave 'void').
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in config["process"]["env"]


def test_runtime_all_gives_every_gpu_and_void_or_unset_changes_nothing(bin_dir: Path, node: Path,
                                                                       tmp_path: Path) -> None:
    _, _, config = _runtime(bin_dir, node, tmp_path, ["NVIDIA_VISIBLE_DEVICES=all"], "create", "-b", "@B", "c")
    assert [d["path"] for d in config["linux"]["devices"]] == ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"]
    # A legacy CUDA image (CUDA_VERSION, no NVIDIA_REQUIRE_CUDA) that leaves the variable unset gets every GPU.
    _, _, config = _runtime(bin_dir, node, tmp_path, ["CUDA_VERSION=12.6.0"], "create", "-b", "@B", "c")
    assert [d["path"] for d in config["linux"]["devices"]] == ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"]
    for env in (["NVIDIA_VISIBLE_DEVICES=void"], [], ["NVIDIA_VISIBLE_DEVICES=0,void"],
                ["CUDA_VERSION=12.6.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.6"]):
        rc, _, config = _runtime(bin_dir, node, tmp_path, env, "create", "--bundle", "@B", "c")
        assert rc == 0 and "devices" not in config["linux"] and len(config["mounts"]) == 1, env
    # "none": the driver without a GPU (legacy mode's meaning).
    _, _, config = _runtime(bin_dir, node, tmp_path, ["NVIDIA_VISIBLE_DEVICES=none"], "create", "-b", "@B", "c")
    assert [d["path"] for d in config["linux"]["devices"]] == ["/dev/nvidiactl"]
    assert {m["destination"] for m in config["mounts"]} == {"/proc", "/usr/bin/nvidia-smi", "/etc/fake-gpu/gpus"}
    # Not a create: nothing is read or changed.
    rc, out, _ = _runtime(bin_dir, node, tmp_path, ["NVIDIA_VISIBLE_DEVICES=all"], "delete", "c")
    assert rc == 0 and out.strip() == "runc delete c"


def test_runtime_refuses_a_gpu_the_node_does_not_have(bin_dir: Path, node: Path, tmp_path: Path) -> None:
    rc, out, _ = _runtime(bin_dir, node, tmp_path, ["NVIDIA_VISIBLE_DEVICES=GPU-nope"], "create", "-b", "@B", "c")
    assert rc == 1 and 'unknown device "GPU-nope"' in out and "runc" not in out.replace("fake-nvidia", "")
    (node / "var/lib/fake-gpu/gpus").unlink()
    rc, out, _ = _runtime(bin_dir, node, tmp_path, ["NVIDIA_VISIBLE_DEVICES=0"], "create", "-b", "@B", "c")
    assert rc == 1 and "no driver on this node" in out


def _validator(bin_dir: Path, tmp_path: Path, component: str, host: Path, path: str = "") -> tuple[int, str]:
    env = {"COMPONENT": component, "WITH_WAIT": "false", "FAKE_GPU_HOST_ROOT": str(host),
           "FAKE_GPU_VALIDATIONS": str(tmp_path / "validations"),
           "FAKE_GPU_VALIDATOR_TIMEOUT": "0s", "PATH": path or os.environ["PATH"]}
    proc = subprocess.run([str(bin_dir / "fake-nvidia-validator")], capture_output=True, text=True, timeout=30,
                          env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_validator_driver_stage_needs_the_host_driver(bin_dir: Path, node: Path, tmp_path: Path) -> None:
    rc, out = _validator(bin_dir, tmp_path, "driver", node)
    assert rc == 0, out
    ready = (tmp_path / "validations" / "driver-ready").read_text()
    # What the operator's device-plugin entrypoint sources before it execs the plugin.
    assert "IS_HOST_DRIVER=true" in ready and f"DRIVER_ROOT_CTR_PATH={node}" in ready
    assert gpu_uuid(NODE, 0) in out
    (node / "var/lib/fake-gpu/gpus").unlink()
    (tmp_path / "validations" / "driver-ready").unlink()
    rc, out = _validator(bin_dir, tmp_path, "driver", node)
    assert rc == 1 and "no host driver" in out and not (tmp_path / "validations" / "driver-ready").exists()


def test_validator_toolkit_stage_needs_nvidia_smi_injected(bin_dir: Path, node: Path, tmp_path: Path) -> None:
    smi_dir = tmp_path / "smi"
    smi_dir.mkdir()
    (smi_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-x)'\n")
    (smi_dir / "nvidia-smi").chmod(0o755)
    rc, out = _validator(bin_dir, tmp_path, "toolkit", node, path=str(smi_dir))
    assert rc == 0 and (tmp_path / "validations" / "toolkit-ready").exists(), out
    assert "GPU 0: NVIDIA H100" in out
    (tmp_path / "validations" / "toolkit-ready").unlink()
    rc, out = _validator(bin_dir, tmp_path, "toolkit", node, path=str(tmp_path / "empty"))
    assert rc == 1 and "is the NVIDIA runtime the node's runtime?" in out


# ------------------------------------------------------------------------------- vectorAdd (the CUDA sample)

def _vector_add(bin_dir: Path, dev: Path, lib: Path) -> tuple[int, str, str]:
    proc = subprocess.run([str(bin_dir / "vectorAdd")], capture_output=True, text=True, timeout=30, check=False,
                          env={"FAKE_GPU_DEV_DIR": str(dev), "LD_LIBRARY_PATH": str(lib)})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="creating character devices (mknod) needs root")
def test_vector_add_runs_where_the_runtime_gave_a_gpu_and_a_new_enough_driver(bin_dir: Path, tmp_path: Path) -> None:
    """NVIDIA's validator runs the CUDA sample vectorAdd in its CUDA workload pod; the stand-in fails as the sample
    does (first cudaMalloc: its message on stderr, exit 1) when the container lacks a GPU device or the driver's
    library, or when the driver is older than the sample's CUDA 11 runtime accepts."""
    dev, lib = tmp_path / "dev", tmp_path / "lib"
    dev.mkdir()
    lib.mkdir()
    failed = "Failed to allocate device vector A (error code {})!\n"
    rc, out, err = _vector_add(bin_dir, dev, lib)
    assert (rc, err) == (1, failed.format("no CUDA-capable device is detected"))
    assert out == "[Vector addition of 50000 elements]\n"
    os.mknod(dev / "nvidiactl", 0o600 | 0o020000, os.makedev(195, 255))
    (dev / "nvidia0").write_text("")  # a regular file named like a GPU device is not one
    assert _vector_add(bin_dir, dev, lib)[2] == failed.format("no CUDA-capable device is detected")
    (dev / "nvidia0").unlink()
    os.mknod(dev / "nvidia0", 0o600 | 0o020000, os.makedev(195, 0))
    insufficient = failed.format("CUDA driver version is insufficient for CUDA runtime version")
    assert _vector_add(bin_dir, dev, lib)[::2] == (1, insufficient)  # no driver library mounted
    (lib / "libnvidia-ml.so.418.226.00").write_text("")
    assert _vector_add(bin_dir, dev, lib)[::2] == (1, insufficient)  # R418 (CUDA 10.1) under a CUDA 11 sample
    (lib / "libnvidia-ml.so.418.226.00").unlink()
    (lib / "libnvidia-ml.so.580.126.20").write_text("")
    rc, out, err = _vector_add(bin_dir, dev, lib)
    assert (rc, err) == (0, "") and out.splitlines()[-2:] == ["Test PASSED", "Done"], out


# ------------------------------------------------------------------------------- NVIDIA's validator on the fakes

@pytest.fixture(scope="module")
def nvidia_validator() -> Path:
    from gpu_conformance.go_build import GoNotFoundError
    from gpu_conformance.sim.builds import operator_module

    try:
        return operator_module.ensure_validator()
    except (GoNotFoundError, operator_module.OperatorModuleError) as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="creating character devices (mknod) needs root")
def test_nvidias_validator_toolkit_stage_accepts_the_fake_nvidia_smi(nvidia_validator: Path, tmp_path: Path) -> None:
    """NVIDIA's nvidia-validator v25.3.4, unmodified: its toolkit stage runs the bare `nvidia-smi` it finds (the one
    the runtime injected) and writes toolkit-ready only when it succeeds. It is static and cgo-free (NVIDIA builds it
    with CGO_ENABLED=0), so it cannot load libnvidia-ml: it makes no NVML call for the fake NVML to answer."""
    from gpu_conformance.sim.builds.node_binaries import is_static_elf

    assert is_static_elf(nvidia_validator)
    smi_dir, out_dir, dev = tmp_path / "bin", tmp_path / "validations", tmp_path / "dev"
    for d in (smi_dir, dev):
        d.mkdir()
    os.mknod(dev / "nvidia0", 0o600 | 0o020000, os.makedev(195, 0))
    (tmp_path / "gpus").write_text(f"0 {gpu_uuid(NODE, 0)} NVIDIA H100 80GB HBM3\n")
    (smi_dir / "nvidia-smi").write_bytes((fakegpu.fixture_dir() / "nvidia-smi").read_bytes())
    (smi_dir / "nvidia-smi").chmod(0o755)
    env = {"PATH": f"{smi_dir}:/usr/bin:/bin", "COMPONENT": "toolkit", "WITH_WAIT": "false",
           "OUTPUT_DIR": str(out_dir), "FAKE_GPU_TABLE": str(tmp_path / "gpus"), "FAKE_GPU_DEV_DIR": str(dev)}

    def stage() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(nvidia_validator)], capture_output=True, text=True, timeout=60, env=env,
                              check=False)

    run = stage()
    assert run.returncode == 0 and (out_dir / "toolkit-ready").exists(), run.stdout + run.stderr
    assert gpu_uuid(NODE, 0) in run.stdout and "version: v25.3.4" in run.stdout + run.stderr
    (tmp_path / "gpus").unlink()  # no driver: the fake nvidia-smi exits 9 as the real one
    run = stage()
    assert run.returncode == 1 and "toolkit is not ready" in run.stdout, run.stdout + run.stderr
    assert not (out_dir / "toolkit-ready").exists()
