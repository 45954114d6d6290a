"""The kind tier's fake NVIDIA runtime against NVIDIA's nvidia-container-runtime v1.20.2 in CDI mode.

Both run `create` on the same bundle and the same node files (sim/fakegpu/nvidia_runtime.py), each exec'ing a recording
runc; what each handed runc must agree. The real runtime is the reference: the fake must make its device nodes,
cgroup rules, mounts and hooks exactly. Where the fake is legacy mode by design, the test asserts the difference
itself (env, "none"); see the fake's main.go header.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpu_conformance.errors import ConformanceError
from gpu_conformance.gotools import NVIDIA_CONTAINER_RUNTIME, ensure_tool
from gpu_conformance.sim.builds import node_binaries as nodebin
from gpu_conformance.sim.fakegpu import nvidia_runtime as nr
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import operator as kindop

# NVIDIA's own runtime beside ours, in real bundles: a real-component tier, slow.
pytestmark = pytest.mark.slow

CTL, GPU0, GPU1 = "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"
DRIVER_MOUNTS = ["/usr/bin/nvidia-smi", "/etc/fake-gpu/gpus"]


@pytest.fixture(scope="module")
def runtimes() -> dict[str, Path]:
    """The real runtime, the fake and the device plugin that writes the node's files (built if needed)."""
    try:
        real = ensure_tool(NVIDIA_CONTAINER_RUNTIME)
        bins = nodebin.ensure_binaries()
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


def _allocate_as_nvidia(plugin: Path, node: nr.Node, tmp_path: Path, ids: list[str], env: dict[str, str]) -> Any:
    """The fake plugin run as nvidia-device-plugin (as in the operator's image) on the node's driver, with the
    environment the operator renders: its Allocate answer for `ids`; its own CDI spec lands in the node's dir."""
    link = tmp_path / "bin" / "nvidia-device-plugin"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(plugin)
    proc = subprocess.run([str(link), f"-table={node.driver_root / fakegpu.TABLE_FILE}",
                           f"-cdi-spec-dir={node.cdi_dir}", f"-allocate={','.join(ids)}"],
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, check=False,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_operator_cdi_path_gives_the_gpu_through_nvidias_runtime_with_void(runtimes: dict[str, Path],
                                                                        node: nr.Node, tmp_path: Path) -> None:
    """The kind tier's CDI path end to end on one bundle: what operator v25.3.4 renders with cdi.enabled and
    cdi.default (plugin: envvar,cdi-annotations under nvidia.cdi.k8s.io/; runtime: CDI mode on that prefix),
    the fake plugin's Allocate answer as containerd would pass it on, NVIDIA's runtime resolving it."""
    env = {"DEVICE_LIST_STRATEGY": "envvar,cdi-annotations", "CDI_ANNOTATION_PREFIX": kindop.CDI_ANNOTATION_PREFIX,
           "DEVICE_ID_STRATEGY": "uuid", "CDI_ENABLED": "true"}
    resp = _allocate_as_nvidia(runtimes["plugin"], node, tmp_path, [node.uuid(1)], env)
    # NVIDIA's plugin v0.17.4: envvar beside a CDI strategy keeps the variable; the annotation names the GPU
    # in the plugin's own CDI kind, by UUID, under the operator's prefix.
    assert resp["envs"] == {"NVIDIA_VISIBLE_DEVICES": node.uuid(1)}
    [(key, value)] = resp["annotations"].items()
    assert key.startswith(f"{kindop.CDI_ANNOTATION_PREFIX}nvidia-device-plugin_")
    assert value == f"{fakegpu.PLUGIN_CDI_KIND}={node.uuid(1)}"
    assert (node.cdi_dir / f"{fakegpu.PLUGIN_CDI_KIND.replace('/', '-')}.json").is_file()
    config = nr.container_config([f"NVIDIA_VISIBLE_DEVICES={node.uuid(1)}"])
    config["annotations"].update(resp["annotations"])
    run = nr.run_real(runtimes["real"], node, tmp_path / "real", config, prefixes=(kindop.CDI_ANNOTATION_PREFIX,))
    assert run.returncode == 0 and run.config is not None, run.output
    assert device_paths(run.config) == [CTL, GPU1]
    assert "NVIDIA_VISIBLE_DEVICES=void" in run.config["process"]["env"]
    # Resolved from the annotation and the plugin's spec (the variable alone would name nvidia.com/gpu=<uuid>).
    log = (tmp_path / "real" / "nvidia-container-runtime.log").read_text()
    assert f"{fakegpu.PLUGIN_CDI_KIND}={node.uuid(1)}" in log, log[-2000:]


def test_operator_cdi_path_with_a_missing_plugin_spec_fails_the_container(runtimes: dict[str, Path],
                                                                         node: nr.Node, tmp_path: Path) -> None:
    """Its fault: the plugin's CDI spec gone from the node (deleted, or a plugin that never wrote it). The
    annotation names a device no spec has, and NVIDIA's runtime refuses the container."""
    env = {"DEVICE_LIST_STRATEGY": "envvar,cdi-annotations", "CDI_ANNOTATION_PREFIX": kindop.CDI_ANNOTATION_PREFIX}
    resp = _allocate_as_nvidia(runtimes["plugin"], node, tmp_path, [node.uuid(0)], env)
    (node.cdi_dir / f"{fakegpu.PLUGIN_CDI_KIND.replace('/', '-')}.json").unlink()
    config = nr.container_config([f"NVIDIA_VISIBLE_DEVICES={node.uuid(0)}"])
    config["annotations"].update(resp["annotations"])
    run = nr.run_real(runtimes["real"], node, tmp_path / "real", config, prefixes=(kindop.CDI_ANNOTATION_PREFIX,))
    assert run.returncode != 0 and not run.ran_runc
    assert f"unresolvable CDI devices {fakegpu.PLUGIN_CDI_KIND}={node.uuid(0)}" in run.output, run.output
