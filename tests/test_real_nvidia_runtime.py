"""The kind tier's fake NVIDIA runtime against NVIDIA's nvidia-container-runtime v1.20.2 in CDI mode.

Both run `create` on the same bundle and the same node files (sim/nvidia_runtime.py), each exec'ing a recording
runc; what each handed runc must agree. The real runtime is the reference: the fake must make its device nodes,
cgroup rules, mounts and hooks exactly. Where the fake is legacy mode by design, the test asserts the difference
itself (env, "none"); see the fake's main.go header.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpu_conformance.errors import ConformanceError
from gpu_conformance.gotools import NVIDIA_CONTAINER_RUNTIME, ensure_tool
from gpu_conformance.sim import nvidia_runtime as nr
from gpu_conformance.sim.realnode import binaries as rnbin

# NVIDIA's own runtime beside ours, in real bundles: a real-component tier, slow.
pytestmark = pytest.mark.slow

CTL, GPU0, GPU1 = "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"
DRIVER_MOUNTS = ["/usr/bin/nvidia-smi", "/etc/fake-gpu/gpus"]


@pytest.fixture(scope="module")
def runtimes() -> dict[str, Path]:
    """The real runtime, the fake and the device plugin that writes the node's files (built if needed)."""
    try:
        real = ensure_tool(NVIDIA_CONTAINER_RUNTIME)
        bins = rnbin.ensure_binaries()
    except ConformanceError as exc:
        error = str(exc)
    else:
        return {"real": real, "fake": bins / "fake-nvidia-container-runtime",
                "plugin": bins / "fake-gpu-device-plugin"}
    # Only a machine without Go skips; any other failure to build is this test's failure, in one line.
    if shutil.which("go") is None:
        pytest.skip(error)
    pytest.fail(f"cannot build the runtimes to compare: {error}", pytrace=False)


@pytest.fixture
def node(runtimes: dict[str, Path], tmp_path: Path) -> nr.Node:
    return nr.write_node(runtimes["plugin"], tmp_path / "node")


def both(runtimes: dict[str, Path], node: nr.Node, work: Path,
         config: dict[str, Any]) -> tuple[nr.RuntimeRun, nr.RuntimeRun]:
    return (nr.run_real(runtimes["real"], node, work / "real", config),
            nr.run_fake(runtimes["fake"], node, work / "fake", config))


def device_paths(config: dict[str, Any]) -> list[str]:
    return [d["path"] for d in config.get("linux", {}).get("devices") or []]


def with_void(env: list[str]) -> list[str]:
    """CDI mode's env after injection: the spec's NVIDIA_VISIBLE_DEVICES=void replaces the variable, or is
    appended where the image left it unset."""
    name = "NVIDIA_VISIBLE_DEVICES="
    if not any(e.startswith(name) for e in env):
        return [*env, f"{name}void"]
    return [f"{name}void" if e.startswith(name) else e for e in env]


# NVIDIA_VISIBLE_DEVICES (and the image's CUDA variables) -> the GPU device nodes the reference gives. "{uuidN}"
# is GPU N's UUID on the node.
CASES = {
    "all": (["NVIDIA_VISIBLE_DEVICES=all"], [GPU0, GPU1]),
    "one UUID": (["NVIDIA_VISIBLE_DEVICES={uuid1}"], [GPU1]),
    "one index": (["NVIDIA_VISIBLE_DEVICES=1"], [GPU1]),
    "two, in request order": (["NVIDIA_VISIBLE_DEVICES=1,{uuid0}"], [GPU1, GPU0]),
    "one GPU by index and UUID": (["NVIDIA_VISIBLE_DEVICES=1, {uuid1}"], [GPU1]),
    "legacy CUDA image, unset": (["CUDA_VERSION=12.6.0"], [GPU0, GPU1]),
    "void": (["NVIDIA_VISIBLE_DEVICES=void"], []),
    "unset": ([], []),
    "empty": (["NVIDIA_VISIBLE_DEVICES="], []),
    "void among GPUs": (["NVIDIA_VISIBLE_DEVICES=0,void"], []),
    "CUDA image with its requirement, unset": (["CUDA_VERSION=12.6.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.6"], []),
}


@pytest.mark.parametrize("uid", [0, 1000], ids=["root", "uid1000"])
@pytest.mark.parametrize("case", list(CASES))
def test_fake_edits_the_bundle_as_the_real_runtime_does(runtimes: dict[str, Path], node: nr.Node, tmp_path: Path,
                                                        case: str, uid: int) -> None:
    template, gpus = CASES[case]
    env = [e.format(uuid0=node.uuid(0), uuid1=node.uuid(1)) for e in template]
    config = nr.container_config(env, uid=uid, gid=uid)
    real, fake = both(runtimes, node, tmp_path, config)
    assert real.returncode == 0 and real.config is not None, real.output
    assert fake.returncode == 0 and fake.config is not None, fake.output
    # The reference did what the case says (so the two cannot agree on doing nothing)...
    assert device_paths(real.config) == ([CTL, *gpus] if gpus else [])
    # ...and the fake did the same to every part a runtime edits, but the env.
    real_edits, fake_edits = nr.edited(real.config), nr.edited(fake.config)
    real_env, fake_env = real_edits.pop("process.env"), fake_edits.pop("process.env")
    assert fake_edits == real_edits
    # Legacy mode by design: the fake leaves the variable as the device plugin set it (the kind tier's pods and
    # the probe see what a pre-CDI node showed them); CDI mode applies the spec's NVIDIA_VISIBLE_DEVICES=void.
    assert fake_env == config["process"]["env"]
    assert real_env == (with_void(config["process"]["env"]) if gpus else config["process"]["env"])
    # Everything else reaches runc unchanged, with the same arguments.
    assert nr.pruned(nr.without_edited(fake.config)) == nr.pruned(nr.without_edited(config))
    assert nr.pruned(nr.without_edited(real.config)) == nr.pruned(nr.without_edited(config))
    assert [a.replace(str(tmp_path / "real"), str(tmp_path / "fake")) for a in real.runc_args or []] == \
        fake.runc_args


def test_none_is_the_driver_without_a_gpu_as_the_real_runtime_does_given_a_none_device(
        runtimes: dict[str, Path], node: nr.Node, tmp_path: Path) -> None:
    config = nr.container_config(["NVIDIA_VISIBLE_DEVICES=none"], uid=1000, gid=1000)
    real, fake = both(runtimes, node, tmp_path, config)
    # CDI mode asks the spec for nvidia.com/gpu=none, which nvidia-ctk's default spec (and the node's) lacks.
    assert real.returncode == 1 and not real.ran_runc
    assert "unresolvable CDI devices nvidia.com/gpu=none" in real.output
    # Legacy mode's "none" is the driver without a GPU: the spec's driver-wide edits, which is what the real
    # runtime makes when the spec has the device `nvidia-ctk cdi generate --device-id none` writes.
    assert fake.returncode == 0 and fake.config is not None, fake.output
    spec_dir = nr.spec_dir_with_none_device(node, tmp_path / "with-none")
    real = nr.run_real(runtimes["real"], node, tmp_path / "real-with-none", config, spec_dir=spec_dir)
    assert real.returncode == 0 and real.config is not None, real.output
    assert device_paths(fake.config) == [CTL]
    assert set(DRIVER_MOUNTS) <= {m["destination"] for m in fake.config["mounts"]}
    real_edits, fake_edits = nr.edited(real.config), nr.edited(fake.config)
    real_env, fake_env = real_edits.pop("process.env"), fake_edits.pop("process.env")
    assert fake_edits == real_edits
    assert fake_env == config["process"]["env"]
    assert real_env == [*with_void(config["process"]["env"]), "NVCT_EMPTY_DEVICE="]


def test_a_gpu_the_node_does_not_have_fails_the_container_in_both(runtimes: dict[str, Path], node: nr.Node,
                                                                  tmp_path: Path) -> None:
    config = nr.container_config([f"NVIDIA_VISIBLE_DEVICES={node.uuid(0)},GPU-nope"])
    real, fake = both(runtimes, node, tmp_path, config)
    assert (real.returncode, real.ran_runc) == (1, False)
    assert "unresolvable CDI devices nvidia.com/gpu=GPU-nope" in real.output
    assert (fake.returncode, fake.ran_runc) == (1, False)
    assert 'unknown device "GPU-nope"' in fake.output
