"""The fake NVML (fixtures/fake-gpu/nvml): a libnvidia-ml.so.1 built with gcc that answers NVML from the fake-GPU
table, so NVIDIA's own binaries run unmodified on fake GPUs; and a fake driver root to run them against.

* `ensure_library()` builds the library into ~/.cache/gpu-operator-conformance/fake-nvml/<source hash>/ (an edit
  of the C source builds into a fresh directory; a second session waits on the lock instead of building too);
* `make_driver_root()` lays out what `nvidia-ctk cdi generate --driver-root` looks for: the library under its
  versioned name with the libnvidia-ml.so.1 link (the version suffix is how nvidia-ctk finds the driver's
  libraries), the GPU table next to it, and the device nodes /dev/nvidiaN, /dev/nvidiactl and /dev/nvidia-uvm*.
  Those must be character devices: nvidia-ctk v1.20.2 filters candidates with a char-device check
  (internal/devices AssertCharDevice) and silently leaves a regular file out of the spec. They are made with
  mknod inside the temporary root, so this needs CAP_MKNOD (root) and never touches the host's /dev;
* `generate_cdi_spec()` runs NVIDIA's generator there and returns the spec with the NVML calls it made (the
  library logs each entry point to $FAKE_NVML_LOG; one it exports without answering logs "UNIMPLEMENTED").

    python -m gpu_conformance.sim.fakegpu.nvml build      # build if needed, print the library's path
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.go_build import build_lock, cache_root
from gpu_conformance.sim.fakegpu.stack import FIXTURE_DIR, TABLE_FILE

SOURCE_DIR = FIXTURE_DIR / "nvml"
LIBRARY = "libnvidia-ml.so.1"
LOG_ENV, TABLE_ENV, DRIVER_VERSION_ENV = "FAKE_NVML_LOG", "FAKE_GPU_TABLE", "FAKE_GPU_DRIVER_VERSION"
UNIMPLEMENTED = "UNIMPLEMENTED"
# Where a Debian/Ubuntu driver puts its libraries; nvidia-ctk searches it under the driver root.
LIB_DIR = "usr/lib/x86_64-linux-gnu"
# -fvisibility=hidden: only the EXPORT-ed NVML entry points are symbols of the library, so `nm -D` lists
# exactly what it answers. -Werror: a warning in a library others dlopen is a bug we want at build time.
CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden",
          f"-Wl,-soname,{LIBRARY}")
NVIDIA_MAJOR, NVIDIACTL_MINOR = 195, 255
# nvidia-uvm's major is allocated dynamically by the kernel; any unused one serves for a stat.
UVM_MAJOR = 510


class FakeNvmlError(ConformanceError):
    """The fake NVML cannot be built or run here."""


class CompilerMissingError(FakeNvmlError):
    """No C compiler: tests may skip on this one, and on nothing else."""


class DeviceNodesError(FakeNvmlError):
    """Device nodes cannot be created (not root): tests may skip on this one."""


def source_files() -> list[Path]:
    if not (SOURCE_DIR / "fakenvml.c").is_file():
        raise FakeNvmlError(f"{SOURCE_DIR} not found: the fake NVML is built from a source checkout of this "
                            f"repository")
    return sorted(p for p in SOURCE_DIR.iterdir() if p.suffix in (".c", ".h"))


def source_hash() -> str:
    """A hash of the sources and flags: the cache directory's name, so any edit builds afresh."""
    digest = hashlib.sha256(" ".join(CFLAGS).encode())
    for path in source_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def library_dir() -> Path:
    return cache_root() / "fake-nvml" / source_hash()


def _loadable(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def ensure_library() -> Path:
    """The built libnvidia-ml.so.1 (gcc, a second or two), built on first use."""
    out_dir = library_dir()
    lib = out_dir / LIBRARY
    if _loadable(lib):
        return lib
    cc = os.environ.get("CC") or "gcc"
    if shutil.which(cc) is None:
        raise CompilerMissingError(f"the fake NVML is not built and `{cc}` is not on PATH "
                                   f"(apt-get install gcc libc6-dev, or set CC)")
    with build_lock(out_dir):
        if _loadable(lib):
            return lib
        log_path = out_dir / "build.log"
        # Built under a temporary name, then renamed: an interrupted build never leaves half a library.
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            built = Path(tmp) / LIBRARY
            cmd = [cc, *CFLAGS, "-o", str(built), str(SOURCE_DIR / "fakenvml.c")]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            log_path.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
            if proc.returncode != 0:
                lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
                raise FakeNvmlError(f"building the fake NVML failed (exit {proc.returncode}); see {log_path}: "
                                    f"{lines[0][:200] if lines else 'no output'}")
            os.replace(built, lib)
    return lib


# ------------------------------------------------------------------------------------------- a driver root

@dataclass(frozen=True)
class DriverRoot:
    path: Path
    driver_version: str
    minors: tuple[int, ...]

    @property
    def library(self) -> Path:
        return self.path / LIB_DIR / LIBRARY

    @property
    def table(self) -> Path:
        return self.path / TABLE_FILE


def table_minors(table: str) -> tuple[int, ...]:
    """The minor numbers of a GPU table ("<minor> <uuid> <name>" per line)."""
    return tuple(int(line.split()[0]) for line in table.splitlines() if line.strip())


def _char_device(path: Path, major: int, minor: int) -> None:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError as exc:
        raise DeviceNodesError(f"cannot create the device node {path} (mknod needs root/CAP_MKNOD): {exc}") \
            from exc


def make_driver_root(root: Path, table: str, driver_version: str, library: Path | None = None,
                     device_nodes: bool = True) -> DriverRoot:
    """A fake driver's files under `root` for the GPUs of `table` (device_nodes=False: regular files instead)."""
    library = library or ensure_library()
    lib_dir = root / LIB_DIR
    lib_dir.mkdir(parents=True, exist_ok=True)
    # The real driver's layout: the library under its versioned name, the soname a link to it.
    versioned = lib_dir / f"libnvidia-ml.so.{driver_version}"
    shutil.copyfile(library, versioned)
    (lib_dir / LIBRARY).symlink_to(versioned.name)
    (root / TABLE_FILE).write_text(table)
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    minors = table_minors(table)
    nodes = [(f"nvidia{m}", NVIDIA_MAJOR, m) for m in minors]
    nodes += [("nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR), ("nvidia-uvm", UVM_MAJOR, 0),
              ("nvidia-uvm-tools", UVM_MAJOR, 1)]
    for name, major, minor in nodes:
        if device_nodes:
            _char_device(dev / name, major, minor)
        else:
            (dev / name).touch()
    return DriverRoot(root, driver_version, minors)


# ------------------------------------------------------------------------------------ NVIDIA's generator

@dataclass(frozen=True)
class CdiRun:
    spec: dict
    calls: list[str]           # NVML entry points in call order, one per call
    unimplemented: list[str]   # those the fake exports without answering, each once
    unexported: list[str]      # those it does not export: the loader ended nvidia-ctk at the first one
    returncode: int
    stderr: str

    @property
    def device_names(self) -> list[str]:
        return [d.get("name", "") for d in self.spec.get("devices", [])]

    def device_nodes(self, name: str) -> list[str]:
        """The container paths of the device nodes the spec gives one device."""
        for d in self.spec.get("devices", []):
            if d.get("name") == name:
                return [n.get("path", "") for n in d.get("containerEdits", {}).get("deviceNodes", [])]
        return []


def read_calls(log: Path) -> tuple[list[str], list[str]]:
    """(every call, the unimplemented ones once each, in first-call order) from the library's log."""
    lines = log.read_text().splitlines() if log.is_file() else []
    calls = [line.split()[0] for line in lines if line.strip()]
    missing = [line.split()[0] for line in lines if line.endswith(f" {UNIMPLEMENTED}")]
    return calls, list(dict.fromkeys(missing))


def generate_cdi_spec(nvidia_ctk: Path, root: DriverRoot, timeout: float = 120) -> CdiRun:
    """`nvidia-ctk cdi generate --driver-root=<root>` against the fake NVML, with the calls it made."""
    out = root.path / "cdi" / "nvidia.json"
    log = root.path / "nvml-calls.log"
    log.unlink(missing_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), LOG_ENV: str(log),
           DRIVER_VERSION_ENV: root.driver_version}
    cmd = [str(nvidia_ctk), "cdi", "generate", f"--driver-root={root.path}", f"--output={out}", "--format=json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False,
                              cwd=root.path)
    except subprocess.TimeoutExpired as exc:
        raise FakeNvmlError(f"`nvidia-ctk cdi generate` did not finish within {timeout:.0f} s") from exc
    calls, missing = read_calls(log)
    spec = json.loads(out.read_text()) if proc.returncode == 0 and out.is_file() else {}
    return CdiRun(spec, calls, missing, undefined_symbols(proc.stderr), proc.returncode, proc.stderr)


def undefined_symbols(stderr: str) -> list[str]:
    """The NVML functions the dynamic loader could not resolve (glibc: "symbol lookup error: ...: undefined
    symbol: NAME"); go-nvml binds them lazily, so the process runs until its first call of one."""
    return list(dict.fromkeys(re.findall(r"undefined symbol: (nvml\w+)", stderr)))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["build"]:
        print("usage: python -m gpu_conformance.sim.fakegpu.nvml build", file=sys.stderr)
        return 4
    return cli_main(ensure_library)


if __name__ == "__main__":
    sys.exit(main())
