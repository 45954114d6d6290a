"""The fake DRA kubelet plugin (fixtures/fake-dra) as a binary: what it publishes and the CDI spec it writes for a
node's fake GPUs, and one clear line on bad input. The kubelet side (registration, NodePrepareResources) runs in
tests/test_kind_dra.py on a real kubelet; the prepare logic's own cases are Go tests (draplugin_test.go), run here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpu_conformance.errors import ConformanceError
from gpu_conformance.go_build import go_env
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import dra_driver
from gpu_conformance.sim.operator import dra as simdra
from gpu_conformance.sim.profiles.catalogue import H100
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid

NODE = "kind-worker"


@pytest.fixture(scope="module")
def plugin() -> Path:
    try:
        return dra_driver.ensure_plugin()
    except ConformanceError as exc:
        pytest.skip(f"the fake DRA kubelet plugin cannot be built here: {exc}")


@pytest.fixture
def table(fake_gpu_bins: Path, tmp_path: Path) -> Path:
    """A node's fake driver, written by the fake device plugin's --setup-only as the kind tier writes it."""
    root = tmp_path / "var/lib/fake-gpu"
    cmd = fakegpu.plugin_command(fake_gpu_bins / "fake-gpu-device-plugin", NODE, 2, tmp_path / "cdi", root,
                                 strategy="envvar", setup_only=True)
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    return root / "gpus"


def _print(plugin: Path, *args: str) -> dict:
    proc = subprocess.run([str(plugin), "-print", f"-node-name={NODE}", *args], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)


def test_publishes_the_nodes_gpus_as_nvidias_dra_driver_does(plugin: Path, table: Path) -> None:
    out = _print(plugin, f"-table={table}")
    want = [simdra.gpu_device(NODE, i, H100, "570.0", "12.8") for i in range(2)]
    assert [d["name"] for d in out["devices"]] == [d["name"] for d in want] == ["gpu-0", "gpu-1"]
    for got, exp in zip(out["devices"], want, strict=True):
        for attr in ("type", "uuid", "productName"):
            assert got["attributes"][attr] == exp["attributes"][attr], attr
        assert got["capacity"]["memory"]["value"] == exp["capacity"]["memory"]["value"] == "81559Mi"
    assert out["devices"][1]["attributes"]["uuid"]["string"] == gpu_uuid(NODE, 1)


def test_cdi_spec_names_each_device_by_its_slice_name_with_its_node_and_void(plugin: Path, table: Path) -> None:
    spec = _print(plugin, f"-table={table}", "-host-driver-root=/var/lib/fake-gpu")["cdiSpec"]
    assert spec["kind"] == "k8s.gpu.nvidia.com/device"
    assert {d["name"]: [n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in spec["devices"]} == \
        {"gpu-0": ["/dev/nvidia0"], "gpu-1": ["/dev/nvidia1"]}
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert {m["hostPath"] for m in spec["containerEdits"]["mounts"]} == {"/var/lib/fake-gpu/nvidia-smi",
                                                                         "/var/lib/fake-gpu/gpus"}


@pytest.mark.parametrize(("args", "says"), [
    (["-memory-mib=lots"], '-memory-mib "lots" is not a positive number'),
    (["-table=/nonexistent/gpus"], "/nonexistent/gpus"),
])
def test_bad_input_is_one_line(plugin: Path, args: list[str], says: str) -> None:
    proc = subprocess.run([str(plugin), "-print", *args], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "goroutine" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_go_unit_tests_of_the_prepare_logic(plugin: Path) -> None:
    proc = subprocess.run(["go", "test", "./..."], cwd=dra_driver.MODULE, env=go_env(), capture_output=True,
                          text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
