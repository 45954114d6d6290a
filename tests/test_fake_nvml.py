"""The fake NVML (fixtures/fake-gpu/nvml): the library itself through ctypes (fast tier, needs gcc), and NVIDIA's
`nvidia-ctk cdi generate` v1.20.2 run unmodified against it, with every NVML call it makes recorded (slow tier:
builds nvidia-ctk with Go, ~30 s cold; the device nodes need root).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_conformance import gotools
from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.profiles.catalogue import A100, H100, T4, GpuHardware, cuda_version_for_driver, get_profile

NODE = "gpu-node-7"
RECORDED_CALLS = Path(__file__).parent / "data" / "nvml-calls" / "nvidia-ctk-cdi-generate.txt"


@pytest.fixture(scope="module")
def library() -> Path:
    try:
        return fakenvml.ensure_library()
    except fakenvml.CompilerMissingError as exc:
        pytest.skip(f"the fake NVML cannot be built here: {exc}")


class PciInfo(ctypes.Structure):
    # nvmlPciInfo_t (nvml.h), the layout nvmlDeviceGetPciInfo_v3 fills.
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


@pytest.fixture
def nvml(library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ctypes.CDLL]:
    """The library loaded in this process, reading a 3-GPU table and logging to tmp_path/calls.log."""
    table = tmp_path / "gpus"
    table.write_text(fakegpu.gpu_table(NODE, 3))
    monkeypatch.setenv(fakenvml.TABLE_ENV, str(table))
    monkeypatch.setenv(fakenvml.LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.delenv(fakenvml.DRIVER_VERSION_ENV, raising=False)
    lib = ctypes.CDLL(str(library))
    yield lib
    # NVML counts init against shutdown: leave it at zero for the next test whatever this one did.
    while lib.nvmlShutdown() == 0:
        pass


def _string(fn: object, *args: object) -> str:
    buf = ctypes.create_string_buffer(96)
    assert fn(*args, buf, 96) == 0  # type: ignore[operator]
    return buf.value.decode()


def _device(nvml: ctypes.CDLL, index: int) -> ctypes.c_void_p:
    handle = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0
    return handle


# ------------------------------------------------------------------------------------- the library itself

def test_the_library_answers_from_the_gpu_table_as_the_simulated_cluster_does(nvml: ctypes.CDLL) -> None:
    assert nvml.nvmlInit_v2() == 0
    count = ctypes.c_uint()
    assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 and count.value == 3
    hw = get_profile("default").gpu_hardware[0]
    for i, uuid in enumerate(fakegpu.uuids(NODE, 3)):
        dev = _device(nvml, i)
        assert _string(nvml.nvmlDeviceGetUUID, dev) == uuid
        assert _string(nvml.nvmlDeviceGetName, dev) == hw.name
        minor, index, mig, pending = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(9), ctypes.c_uint(9)
        assert nvml.nvmlDeviceGetMinorNumber(dev, ctypes.byref(minor)) == 0 and minor.value == i
        assert nvml.nvmlDeviceGetIndex(dev, ctypes.byref(index)) == 0 and index.value == i
        assert nvml.nvmlDeviceGetMigMode(dev, ctypes.byref(mig), ctypes.byref(pending)) == 0
        assert (mig.value, pending.value) == (0, 0)
        pci = PciInfo()
        assert nvml.nvmlDeviceGetPciInfo_v3(dev, ctypes.byref(pci)) == 0
        # The DRA tier's pciBusID of the same GPU (sim/operator/dra.py), in NVML's 8-digit-domain spelling.
        assert pci.busId.decode().lower() == f"00000000:{0x18 + 0x10 * i:02x}:00.0"
        mem = Memory()
        assert nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(mem)) == 0
        assert mem.total == hw.memory_mib << 20 and mem.used == 0
        by_uuid = ctypes.c_void_p()
        assert nvml.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(by_uuid)) == 0
        assert by_uuid.value == dev.value
    assert _string(nvml.nvmlSystemGetDriverVersion) == get_profile("default").driver_version
    assert nvml.nvmlDeviceGetHandleByUUID(b"GPU-not-here", ctypes.byref(ctypes.c_void_p())) == 6  # NOT_FOUND
    calls, missing = fakenvml.read_calls(Path(os.environ[fakenvml.LOG_ENV]))
    assert calls[0] == "nvmlInit_v2" and "nvmlDeviceGetPciInfo_v3" in calls and missing == []


@pytest.mark.parametrize("hw", [H100, A100, T4], ids=lambda hw: hw.product)
def test_memory_is_the_simulated_products(nvml: ctypes.CDLL, tmp_path: Path, hw: GpuHardware) -> None:
    (tmp_path / "gpus").write_text(fakegpu.gpu_table(NODE, 1, hw.product))
    assert nvml.nvmlInit_v2() == 0
    mem = Memory()
    assert nvml.nvmlDeviceGetMemoryInfo(_device(nvml, 0), ctypes.byref(mem)) == 0
    assert mem.total == hw.memory_mib << 20


@pytest.mark.parametrize("driver", ["550.163.01", "570.195.03", "575.57.08", "580.95.05", "595.91.07"])
def test_cuda_version_follows_the_driver_branch_as_in_the_simulator(nvml: ctypes.CDLL, driver: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fakenvml.DRIVER_VERSION_ENV, driver)
    assert nvml.nvmlInit_v2() == 0
    cuda = ctypes.c_int()
    assert nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == 0
    assert f"{cuda.value // 1000}.{cuda.value % 1000 // 10}" == cuda_version_for_driver(driver)
    assert _string(nvml.nvmlSystemGetDriverVersion) == driver


def test_no_table_is_a_node_without_a_driver(nvml: ctypes.CDLL, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fakenvml.TABLE_ENV, str(tmp_path / "missing"))
    assert nvml.nvmlInit_v2() == 9  # NVML_ERROR_DRIVER_NOT_LOADED
    count = ctypes.c_uint()
    assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 1  # NVML_ERROR_UNINITIALIZED


def test_an_unimplemented_entry_point_logs_itself_and_is_not_supported(nvml: ctypes.CDLL, tmp_path: Path) -> None:
    assert nvml.nvmlInit_v2() == 0
    brand = ctypes.c_int()
    assert nvml.nvmlDeviceGetBrand(_device(nvml, 0), ctypes.byref(brand)) == 3  # NVML_ERROR_NOT_SUPPORTED
    calls, missing = fakenvml.read_calls(tmp_path / "calls.log")
    assert calls[-1] == "nvmlDeviceGetBrand" and missing == ["nvmlDeviceGetBrand"]


def test_an_edited_source_builds_into_a_new_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "nvml"
    shutil.copytree(fakenvml.SOURCE_DIR, src)
    before = fakenvml.source_hash()
    monkeypatch.setattr(fakenvml, "SOURCE_DIR", src)
    assert fakenvml.source_hash() == before
    (src / "fakenvml.c").write_text((src / "fakenvml.c").read_text() + "\n/* edited */\n")
    assert fakenvml.source_hash() != before


def test_no_compiler_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(fakenvml.CompilerMissingError, match="`no-such-cc` is not on PATH"):
        fakenvml.ensure_library()
    assert fakenvml.main(["build"]) == fakenvml.CompilerMissingError.exit_code
    assert fakenvml.main(["nonsense"]) == 4


def test_the_driver_root_has_the_drivers_layout(library: Path, tmp_path: Path) -> None:
    root = fakenvml.make_driver_root(tmp_path / "root", fakegpu.gpu_table(NODE, 2), "580.126.20", library,
                                     device_nodes=False)
    assert root.library.resolve().name == "libnvidia-ml.so.580.126.20"
    assert root.table.read_text() == fakegpu.gpu_table(NODE, 2)
    assert root.minors == (0, 1)
    assert sorted(p.name for p in (root.path / "dev").iterdir()) == [
        "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidiactl"]


# -------------------------------------------------------------------------------- NVIDIA's CDI generator

@pytest.fixture(scope="module")
def nvidia_ctk() -> Path:
    try:
        return gotools.ensure_tool(gotools.NVIDIA_CTK)
    except gotools.GoMissingError as exc:
        pytest.skip(str(exc))


def _root(tmp_path: Path, library: Path, count: int, device_nodes: bool = True) -> fakenvml.DriverRoot:
    try:
        return fakenvml.make_driver_root(tmp_path / "root", fakegpu.gpu_table(NODE, count), "580.126.20", library,
                                         device_nodes=device_nodes)
    except fakenvml.DeviceNodesError as exc:
        pytest.skip(str(exc))


def _exported(library: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if " T " in line}


@pytest.mark.slow
def test_nvidia_ctk_generates_a_spec_of_the_fake_gpus_and_makes_only_calls_the_fake_answers(
        nvidia_ctk: Path, library: Path, tmp_path: Path) -> None:
    run = fakenvml.generate_cdi_spec(nvidia_ctk, _root(tmp_path, library, 3))
    assert run.returncode == 0, run.stderr[-2000:]
    # Every call answered: a stub's call is logged UNIMPLEMENTED; an entry point the library does not export
    # ends nvidia-ctk with the loader's "symbol lookup error" (the return code above).
    assert run.unimplemented == [], f"nvidia-ctk called NVML entry points the fake does not answer: {run.unimplemented}"
    assert run.unexported == []
    assert set(run.calls) <= _exported(library)
    uuids = fakegpu.uuids(NODE, 3)
    # Its default naming (index and uuid) and "all": the names fakegpu.go's spec imitates.
    assert sorted(run.device_names) == sorted(["0", "1", "2", *uuids, "all"])
    assert run.spec["kind"] == fakegpu.CDI_KIND
    for i, uuid in enumerate(uuids):
        assert run.device_nodes(str(i)) == run.device_nodes(uuid) == [f"/dev/nvidia{i}"]
    assert run.device_nodes("all") == [f"/dev/nvidia{i}" for i in range(3)]
    common = run.spec["containerEdits"]
    assert "NVIDIA_VISIBLE_DEVICES=void" in common["env"]
    assert {n["path"] for n in common["deviceNodes"]} == {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                                          "/dev/nvidia-uvm-tools"}
    # The calls are recorded: a new nvidia-ctk (or a change in how it reaches NVML) shows up here by name.
    recorded = [ln for ln in RECORDED_CALLS.read_text().splitlines() if ln and not ln.startswith("#")]
    assert sorted(set(run.calls)) == recorded


@pytest.mark.slow
def test_regular_files_are_no_device_nodes_to_nvidia_ctk(nvidia_ctk: Path, library: Path, tmp_path: Path) -> None:
    # nvidia-ctk keeps only character devices: with regular files it still succeeds, naming the GPUs with no
    # device node, so a container would get none. Why make_driver_root uses mknod.
    run = fakenvml.generate_cdi_spec(nvidia_ctk, _root(tmp_path, library, 2, device_nodes=False))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "0" in run.device_names and run.device_nodes("0") == []


@pytest.mark.slow
def test_nvidia_ctk_fails_on_a_node_whose_driver_does_not_answer(nvidia_ctk: Path, library: Path,
                                                                 tmp_path: Path) -> None:
    root = _root(tmp_path, library, 2)
    root.table.unlink()
    run = fakenvml.generate_cdi_spec(nvidia_ctk, root)
    assert run.returncode != 0 and run.spec == {}
    assert "nvmlInit_v2" in run.calls


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["stub", "unexported"])
def test_a_call_the_fake_does_not_answer_is_named(nvidia_ctk: Path, tmp_path: Path, fault: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The library with nvmlDeviceGetMinorNumber (which nvidia-ctk needs for /dev/nvidiaN) as a stub, or not
    # exported at all, built from an edited copy of the sources into a private cache.
    src = tmp_path / "src"
    shutil.copytree(fakenvml.SOURCE_DIR, src)
    c = (src / "fakenvml.c").read_text()
    real = "EXPORT int nvmlDeviceGetMinorNumber("
    assert real in c
    c = c.replace(real, "static int unused_minor_number(")
    if fault == "stub":
        (src / "unimplemented.h").write_text((src / "unimplemented.h").read_text()
                                             + "UNIMPLEMENTED(nvmlDeviceGetMinorNumber)\n")
    (src / "fakenvml.c").write_text(c.replace("#define EXPORT", "#pragma GCC diagnostic ignored "
                                              "\"-Wunused-function\"\n#define EXPORT"))
    monkeypatch.setattr(fakenvml, "SOURCE_DIR", src)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = fakenvml.generate_cdi_spec(nvidia_ctk, _root(tmp_path, fakenvml.ensure_library(), 2))
    if fault == "stub":
        assert run.unimplemented == ["nvmlDeviceGetMinorNumber"] and run.unexported == []
    else:
        assert run.returncode == 127 and run.unexported == ["nvmlDeviceGetMinorNumber"]


def test_the_driver_version_is_the_one_in_the_librarys_file_name(library: Path, tmp_path: Path) -> None:
    """Installed as a driver installs it (libnvidia-ml.so.1 -> libnvidia-ml.so.<version>), the library reports that
    version to any reader, whatever its environment: the kind tier's old-driver fault replaces the driver on one
    node, and the toolkit's nvidia-ctk there must see the old one. (In a child process: this one has the library
    loaded under another name already.)"""
    old = "418.226.00"
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    shutil.copy(library, lib_dir / f"libnvidia-ml.so.{old}")
    (lib_dir / fakenvml.LIBRARY).symlink_to(f"libnvidia-ml.so.{old}")
    (tmp_path / "gpus").write_text(fakegpu.gpu_table(NODE, 1))
    script = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); assert lib.nvmlInit_v2() == 0; "
              "buf = ctypes.create_string_buffer(96); assert lib.nvmlSystemGetDriverVersion(buf, 96) == 0; "
              "print(buf.value.decode())")
    env = {k: v for k, v in os.environ.items() if k not in (fakenvml.DRIVER_VERSION_ENV, fakenvml.TABLE_ENV)}
    env[fakenvml.TABLE_ENV] = str(tmp_path / "gpus")
    out = subprocess.run([sys.executable, "-c", script, str(lib_dir / fakenvml.LIBRARY)], env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == old
    # A name without a version (the build's own file) keeps the default profile's driver.
    out = subprocess.run([sys.executable, "-c", script, str(library)], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == get_profile("default").driver_version
