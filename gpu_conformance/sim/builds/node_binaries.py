"""Build (once) and locate what a kind tier's node runs beyond the control plane, and the static busybox its images use.

Built from Go modules, like the control plane, into their own versioned cache directory:

* kubelet v1.36.3 from the Kubernetes wrapper module (<repo>/gobuild), with the control plane's ldflags;
* containerd, ctr and containerd-shim-runc-v2 v2.4.2 from <repo>/gobuild/containerd (CGO_ENABLED=0);
* the fake-GPU device plugin and the pause binary from <repo>/fixtures/fake-gpu (the fake-GPU stack every
  tier shares, see gpu_conformance/sim/fakegpu/stack.py), stamped with a hash of their sources so an edited
  plugin is rebuilt.

From Debian (`apt-get install busybox-static`, see .ci/run): a static busybox for the images' root filesystem
(the node image's runc and CNI plugins come from its own debootstrap, sim/kind/nodeimage.py).

    python -m gpu_conformance.sim.builds.node_binaries     # build if needed, print the bin dir
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.go_build import GoNotFoundError, go_env, repo_root
from gpu_conformance.sim.builds import binaries as simbin

CONTAINERD_VERSION = "v2.4.2"
# containerd v2.4.2's go.mod asks for this toolchain; GOTOOLCHAIN=local means no silent download.
MIN_GO_CONTAINERD = (1, 26, 6)
BUSYBOX_PATHS = (Path("/bin/busybox"), Path("/usr/bin/busybox"))


# The fake-GPU stack's Go module (a source checkout only, like gobuild/); its path relative to gobuild/ is
# what the build groups by.
FAKEGPU_MODULE = repo_root() / "fixtures" / "fake-gpu"
_FAKEGPU_SUBDIR = "../fixtures/fake-gpu"
# Files of the module that go into the binaries (nvidia-smi is embedded in the plugin).
_FAKEGPU_BUILD_FILES = (".go", ".mod", ".sum")
_FAKEGPU_EMBEDDED = ("nvidia-smi",)


def _fakegpu_version() -> str:
    """A hash of the fake-GPU module's sources: part of the binaries' version, so edits rebuild them."""
    root = FAKEGPU_MODULE
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()
                       and (p.suffix in _FAKEGPU_BUILD_FILES or p.name in _FAKEGPU_EMBEDDED)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


FAKEGPU_VERSION = _fakegpu_version() if (FAKEGPU_MODULE / "go.mod").is_file() else "prebuilt"
# The fake-GPU binaries' version is checked per binary (not part of the name): editing the plugin must not
# rebuild kubelet and containerd.
BIN_DIR_NAME = f"node-k8s-{simbin.K8S_VERSION}-containerd-{CONTAINERD_VERSION}"

_CONTAINERD_LDFLAGS = f"-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"
_FAKEGPU_LDFLAGS = f"-s -w -X main.version={FAKEGPU_VERSION}"
_CONTAINERD_PKG = "github.com/containerd/containerd/v2/cmd"
_FAKEGPU_PKG = "gpu-operator-conformance.local/fixtures/fake-gpu/cmd"

BINARIES: tuple[simbin.Binary, ...] = (
    simbin.Binary("kubelet", "k8s.io/kubernetes/cmd/kubelet", "", simbin.K8S_LDFLAGS,
                  ("--version",), f"Kubernetes {simbin.K8S_VERSION}"),
    simbin.Binary("containerd", f"{_CONTAINERD_PKG}/containerd", "containerd", _CONTAINERD_LDFLAGS,
                  ("--version",), f"containerd/v2 {CONTAINERD_VERSION}"),
    simbin.Binary("ctr", f"{_CONTAINERD_PKG}/ctr", "containerd", _CONTAINERD_LDFLAGS,
                  ("--version",), f"containerd/v2 {CONTAINERD_VERSION}"),
    simbin.Binary("containerd-shim-runc-v2", f"{_CONTAINERD_PKG}/containerd-shim-runc-v2", "containerd",
                  _CONTAINERD_LDFLAGS, ("-v",), f"Version:  {CONTAINERD_VERSION}"),
    simbin.Binary("fake-gpu-device-plugin", f"{_FAKEGPU_PKG}/fake-gpu-device-plugin", _FAKEGPU_SUBDIR, _FAKEGPU_LDFLAGS,
                  ("-version",), f"fake-gpu-device-plugin {FAKEGPU_VERSION}"),
    simbin.Binary("pause", f"{_FAKEGPU_PKG}/pause", _FAKEGPU_SUBDIR, _FAKEGPU_LDFLAGS,
                  ("-version",), f"pause {FAKEGPU_VERSION}"),
    # The kind tier's stand-ins for NVIDIA's runtime (legacy mode) and validator under the real operator.
    simbin.Binary("fake-nvidia-container-runtime", f"{_FAKEGPU_PKG}/fake-nvidia-container-runtime", _FAKEGPU_SUBDIR,
                  _FAKEGPU_LDFLAGS, ("--fake-version",), f"fake-nvidia-container-runtime {FAKEGPU_VERSION}"),
    simbin.Binary("fake-nvidia-validator", f"{_FAKEGPU_PKG}/fake-nvidia-validator", _FAKEGPU_SUBDIR,
                  _FAKEGPU_LDFLAGS, ("-version",), f"fake-nvidia-validator {FAKEGPU_VERSION}"),
    # The CUDA sample NVIDIA's validator runs in its CUDA workload pod (the kind tier's validator image).
    simbin.Binary("vectorAdd", f"{_FAKEGPU_PKG}/vectorAdd", _FAKEGPU_SUBDIR, _FAKEGPU_LDFLAGS,
                  ("-version",), f"vectorAdd {FAKEGPU_VERSION}"),
)
BINARY_NAMES = tuple(b.name for b in BINARIES)


class HostToolsError(ConformanceError):
    """The static busybox the images are made of is missing (Debian's busybox-static)."""


def cache_bin_dir() -> Path:
    return simbin.cache_bin_dir().parent / BIN_DIR_NAME


def missing_binaries(bin_dir: Path) -> list[simbin.Binary]:
    return simbin.missing_binaries(bin_dir, BINARIES)


def _check_go(go: str) -> None:
    import re
    import subprocess

    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False,
                         env=go_env()).stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", out)
    found = tuple(int(g or 0) for g in match.groups()) if match else (0, 0, 0)
    if found < MIN_GO_CONTAINERD:
        need = ".".join(map(str, MIN_GO_CONTAINERD))
        raise GoNotFoundError(f"{go} is {out or 'unknown'}, too old to build containerd "
                               f"{CONTAINERD_VERSION} (needs go >= {need})")


def ensure_binaries() -> Path:
    """A directory with kubelet, containerd, ctr, the shim and the fake-GPU binaries (built if needed)."""
    return simbin.build_missing(cache_bin_dir(), BINARIES, check_go=_check_go)


def is_static_elf(path: Path) -> bool:
    """True for an ELF executable without a PT_INTERP segment (no dynamic loader needed in an image)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only: what Debian amd64/arm64 ship
                return False
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))  # 3 = PT_INTERP


def static_busybox() -> Path:
    """The host's static busybox (an image's whole userland: no dynamic loader there), or one clear error."""
    busybox = next((p for p in BUSYBOX_PATHS if is_static_elf(p)), None)
    if busybox is None:
        raise HostToolsError(f"no static busybox in {' or '.join(map(str, BUSYBOX_PATHS))}: "
                             "apt-get install busybox-static")
    return busybox


def _ensure_all() -> Path:
    bin_dir = ensure_binaries()
    static_busybox()
    return bin_dir


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    return cli_main(_ensure_all)


if __name__ == "__main__":
    sys.exit(main())
