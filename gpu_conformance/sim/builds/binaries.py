"""Build (once) and locate the simulated cluster's binaries.

The control plane is built from Go modules because nothing else reachable from the project's machines
ships kube-apiserver: <repo>/gobuild wraps Kubernetes + etcd, <repo>/gobuild/kwok wraps kwok. Binaries
land in a versioned cache directory, so a version bump builds into a fresh directory and never mixes.

    python -m gpu_conformance.sim.builds.binaries     # build if needed, print the bin dir

The same step fetches the real GPU Operator's Go module and builds its binary (sim/builds/operator_module.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import cli_main
from gpu_conformance.go_build import (
    MIN_GO,
    GoBuildError,
    build_lock,
    cache_root,
    go_executable,
    repo_root,
    run_build,
)

K8S_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.8"
KWOK_VERSION = "v0.8.0"

BIN_DIR_ENV = "GPU_CONFORMANCE_BIN_DIR"
BIN_DIR_NAME = f"k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}-kwok-{KWOK_VERSION}"

_K8S_MAJOR, _K8S_MINOR = K8S_VERSION.lstrip("v").split(".")[:2]
# Stamp k8s.io/component-base/version, otherwise the binaries report v0.0.0-master and clients'
# version-skew logic (and `kubectl version`) would see a nonsense server version.
K8S_LDFLAGS = " ".join([
    "-s -w",
    f"-X k8s.io/component-base/version.gitVersion={K8S_VERSION}",
    f"-X k8s.io/component-base/version.gitMajor={_K8S_MAJOR}",
    f"-X k8s.io/component-base/version.gitMinor={_K8S_MINOR}",
    "-X k8s.io/component-base/version.gitTreeState=clean",
    "-X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z",
])

GO_HINT = f"install Go >= {MIN_GO[0]}.{MIN_GO[1]} (https://go.dev/dl) or set {BIN_DIR_ENV}"


# A failed build of any tier's binaries (the shared Go build's error, under the name callers here know).
BinariesError = GoBuildError


@dataclass(frozen=True)
class Binary:
    name: str
    package: str
    module_subdir: str            # relative to <repo>/gobuild: "" = gobuild, "kwok", "../fixtures/fake-gpu"
    ldflags: str
    version_args: tuple[str, ...]
    version_text: str             # must appear in the output of version_args


BINARIES: tuple[Binary, ...] = (
    Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", "", K8S_LDFLAGS,
           ("--version",), f"Kubernetes {K8S_VERSION}"),
    Binary("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", "", K8S_LDFLAGS,
           ("--version",), f"Kubernetes {K8S_VERSION}"),
    Binary("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", "", K8S_LDFLAGS,
           ("--version",), f"Kubernetes {K8S_VERSION}"),
    Binary("kubectl", "k8s.io/kubernetes/cmd/kubectl", "", K8S_LDFLAGS,
           ("version", "--client"), f"Client Version: {K8S_VERSION}"),
    Binary("etcd", "go.etcd.io/etcd/server/v3", "", "-s -w",
           ("--version",), f"etcd Version: {ETCD_VERSION.lstrip('v')}"),
    Binary("kwok", "sigs.k8s.io/kwok/cmd/kwok", "kwok", "-s -w",
           ("--version",), f"kwok version {KWOK_VERSION}"),
)
BINARY_NAMES: tuple[str, ...] = tuple(b.name for b in BINARIES)

# Rough cold-build minutes on a 2-core machine (empty GOCACHE), shown so nobody kills a slow build.
_COLD_MINUTES = {"kube-apiserver": 6, "etcd": 1, "kwok": 2, "coredns": 4}


def cache_bin_dir() -> Path:
    """The versioned cache directory (honours XDG_CACHE_HOME)."""
    return cache_root() / "bin" / BIN_DIR_NAME


def gobuild_dir() -> Path:
    path = repo_root() / "gobuild"
    if not (path / "go.mod").is_file() or not (path / "kwok" / "go.mod").is_file():
        raise BinariesError(f"{path}/go.mod (and kwok/go.mod) not found: the simulated cluster is built from "
                            f"a source checkout of this repository; set {BIN_DIR_ENV} to prebuilt binaries")
    return path


def _answers_version(path: Path, binary: Binary) -> bool:
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        out = subprocess.run([str(path), *binary.version_args], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and binary.version_text in (out.stdout + out.stderr)


def missing_binaries(bin_dir: Path, binaries: Sequence[Binary] = BINARIES) -> list[Binary]:
    """Binaries in bin_dir that are absent or do not report the pinned version."""
    return [b for b in binaries if not _answers_version(bin_dir / b.name, b)]


def _check_prebuilt(bin_dir: Path) -> Path:
    absent = [n for n in BINARY_NAMES if not os.access(bin_dir / n, os.X_OK)]
    if absent:
        raise BinariesError(f"{BIN_DIR_ENV}={bin_dir} lacks executable {', '.join(absent)} "
                            f"(needs {', '.join(BINARY_NAMES)})")
    return bin_dir


def binaries_available() -> bool:
    """True when ensure_binaries() would not need to build (env dir complete, or cache complete)."""
    env_dir = os.environ.get(BIN_DIR_ENV)
    if env_dir:
        return all(os.access(Path(env_dir) / n, os.X_OK) for n in BINARY_NAMES)
    return not missing_binaries(cache_bin_dir())


def _go_executable() -> str:
    return go_executable(MIN_GO, "the simulated cluster's binaries are not built",
                         f"{GO_HINT} to a directory with {', '.join(BINARY_NAMES)}")


def _build(go: str, gobuild: Path, missing: list[Binary], bin_dir: Path) -> None:
    # Leftovers of a build killed hard (SIGKILL, power loss); we hold the lock, so none is in use.
    for stale in bin_dir.glob(".build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    log_path = bin_dir / "build.log"
    log_path.write_text(f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')} building {BIN_DIR_NAME}\n")
    # Group by wrapper module and linker flags: one `go build` for the Kubernetes commands shares
    # the compile of their common packages.
    groups: dict[tuple[str, str], list[Binary]] = {}
    for binary in missing:
        groups.setdefault((binary.module_subdir, binary.ldflags), []).append(binary)
    for (subdir, ldflags), group in groups.items():
        names = ", ".join(b.name for b in group)
        minutes = sum(_COLD_MINUTES.get(b.name, 0) for b in group) or 1
        print(f"building {names} ... (first build takes ~{minutes} min; log: {log_path})",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        # A temp dir inside bin_dir keeps the final rename on one filesystem, hence atomic: an
        # interrupted build leaves a stray .build-* dir, never a half-written binary under its real name.
        with tempfile.TemporaryDirectory(prefix=".build-", dir=bin_dir) as tmp:
            tmp_dir = Path(tmp)
            if len(group) == 1:
                run_build(go, gobuild / subdir, ldflags, tmp_dir / group[0].name, [group[0].package], log_path,
                          f"{GO_HINT} to prebuilt binaries")
            else:
                run_build(go, gobuild / subdir, ldflags, tmp_dir, [b.package for b in group], log_path,
                          f"{GO_HINT} to prebuilt binaries")
            for binary in group:
                built = tmp_dir / binary.name
                if not _answers_version(built, binary):
                    raise BinariesError(f"built {binary.name} does not report {binary.version_text!r}; "
                                        f"see {log_path}")
                os.replace(built, bin_dir / binary.name)
        print(f"built {names} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def ensure_binaries() -> Path:
    """Return a directory holding every binary, building into the cache if needed (idempotent)."""
    env_dir = os.environ.get(BIN_DIR_ENV)
    if env_dir:
        return _check_prebuilt(Path(env_dir).expanduser().resolve())
    return build_missing(cache_bin_dir(), BINARIES)


def build_missing(bin_dir: Path, binaries: Sequence[Binary],
                  check_go: Callable[[str], None] | None = None) -> Path:
    """bin_dir holding `binaries` at their pinned versions, the missing ones built under the cache lock.

    Shared by every tier's binaries (sim, kind); check_go refuses a too old toolchain first.
    """
    if not missing_binaries(bin_dir, binaries):
        return bin_dir
    # Fail on a missing toolchain or checkout before creating anything in the cache.
    go = _go_executable()
    if check_go is not None:
        check_go(go)
    gobuild = gobuild_dir()
    with build_lock(bin_dir):
        # Re-check under the lock: another process may have finished the build while we waited.
        missing = missing_binaries(bin_dir, binaries)
        if missing:
            _build(go, gobuild, missing, bin_dir)
    return bin_dir


def _ensure_all() -> Path:
    from gpu_conformance.sim.builds import operator_module
    bin_dir = ensure_binaries()
    # The real operator's module (its CRDs are the sim's, in every profile) and its binary
    # (`--operator=real`, the differential test).
    operator_module.module_dir()
    operator_module.ensure_binary()
    return bin_dir


def main(argv: Sequence[str] | None = None) -> int:
    del argv  # no options: the versions are pinned in this module
    return cli_main(_ensure_all)


if __name__ == "__main__":
    sys.exit(main())
