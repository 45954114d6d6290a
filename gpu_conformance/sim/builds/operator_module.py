"""The real NVIDIA GPU Operator's Go module: its CRDs, chart and assets, (for `--operator=real`) its binary, and
(for the kind tier) its validator.

The Go module proxy serves github.com/NVIDIA/gpu-operator at exactly one version, the v25.3.4 release
commit as a pseudo-version. <repo>/gobuild/gpu-operator wraps it. Nothing of it is committed here: the
module zip lands in the Go module cache (`go mod download`, part of the binaries step), where the sim
reads the real CRDs for every profile, and `go build` puts the operator binary in a versioned cache
directory beside the control plane's. The validator (`nvidia-validator`, package validator/) is a main package
of the same module with no go.mod of its own: the same wrapper builds it into the same directory, as NVIDIA's
validator Makefile does (CGO_ENABLED=0, the version stamped).

    python -m gpu_conformance.sim.builds.operator_module   # download + build both if needed, print the operator
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.go_build import (
    MIN_GO,
    GoBuildError,
    GoNotFoundError,
    build_lock,
    cache_root,
    go_env,
    go_executable,
    repo_root,
    run_build,
)

MODULE = "github.com/NVIDIA/gpu-operator"
# The v25.3.4 release commit d73a0086a6ba, the only version the proxy serves (newer ones: 403).
MODULE_VERSION = "v0.0.0-20250917190837-d73a0086a6ba"
OPERATOR_VERSION = "v25.3.4"
PACKAGE = f"{MODULE}/cmd/gpu-operator"
BINARY = "gpu-operator"
BIN_DIR_NAME = f"gpu-operator-{OPERATOR_VERSION}"
BINARY_ENV = "GPU_CONFORMANCE_OPERATOR_BINARY"
# Release-like: stripped, and the version stamped where `version: ...` is logged from (unstamped: "unknown").
LDFLAGS = f"-s -w -X {MODULE}/internal/info.version={OPERATOR_VERSION}"
VERSION_TEXT = f"version: {OPERATOR_VERSION}"
VALIDATOR_PACKAGE = f"{MODULE}/validator"
VALIDATOR_BINARY = "nvidia-validator"
# urfave/cli answers --version with "<argv[0] base name> version <stamped version>".
VALIDATOR_VERSION_TEXT = f"version {OPERATOR_VERSION}"
# The validator's own manifests (the pods its cuda and plugin stages create), which NVIDIA's image carries at
# /var/nvidia/manifests.
VALIDATOR_MANIFESTS = ("validator/cuda-workload-validation.yaml", "validator/plugin-workload-validation.yaml")
VALIDATOR_COLD_MINUTES = 4
CRD_DIR = "deployments/gpu-operator/crds"
CHART_DIR = "deployments/gpu-operator"
COLD_MINUTES = 4
GO_HINT = f"install Go >= {MIN_GO[0]}.{MIN_GO[1]} (https://go.dev/dl) or set {BINARY_ENV} to a prebuilt gpu-operator"


class OperatorModuleError(ConformanceError):
    """The operator's Go module or binary is missing and cannot be fetched or built."""


def wrapper_dir() -> Path:
    path = repo_root() / "gobuild" / "gpu-operator"
    if not (path / "go.mod").is_file():
        raise OperatorModuleError(f"{path}/go.mod not found: the real operator's CRDs and binary come from a "
                                  "source checkout of this repository")
    return path


def _escape(module_path: str) -> str:
    # The module cache spells upper-case letters as '!' + lower case (golang.org/x/mod/module.EscapePath).
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in module_path)


def _gomodcache() -> Path:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0] or str(Path.home() / "go")
    return Path(gopath) / "pkg" / "mod"


def _complete(path: Path) -> bool:
    return (path / CRD_DIR / "nvidia.com_clusterpolicies.yaml").is_file() and (path / "assets").is_dir()


def _go(what_needs_it: str) -> str:
    """The Go toolchain, or one line saying what cannot be done without it."""
    try:
        return go_executable(MIN_GO, what_needs_it, GO_HINT)
    except GoNotFoundError as exc:
        raise OperatorModuleError(str(exc)) from None


def cached_module_dir() -> Path | None:
    """The unpacked module if the Go module cache already holds it complete; None otherwise (no network)."""
    guess = _gomodcache() / f"{_escape(MODULE)}@{MODULE_VERSION}"
    return guess if _complete(guess) else None


@cache
def module_dir() -> Path:
    """The unpacked module in the Go module cache, downloading it first if needed (network once)."""
    cached = cached_module_dir()
    if cached is not None:
        return cached
    guess = _gomodcache() / f"{_escape(MODULE)}@{MODULE_VERSION}"
    go = _go(f"{MODULE}@{MODULE_VERSION} is not in the Go module cache ({guess}) and it cannot be downloaded")
    out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{MODULE_VERSION}"], cwd=wrapper_dir(),
                         capture_output=True, text=True, env=go_env(), check=False)
    try:
        info = json.loads(out.stdout or "{}")
    except ValueError:
        info = {}
    path = Path(info.get("Dir") or guess)
    if out.returncode != 0 or not _complete(path):
        why = info.get("Error") or out.stderr.strip().splitlines()[-1:] or f"exit code {out.returncode}"
        raise OperatorModuleError(f"`go mod download {MODULE}@{MODULE_VERSION}` failed: {why} (the Go module "
                                  "proxy must be reachable once; the real CRDs come from this module)")
    return path


def crd_files() -> list[Path]:
    """Every CRD the operator's chart ships (ClusterPolicy, NVIDIADriver), in a stable order."""
    return sorted((module_dir() / CRD_DIR).glob("*.yaml"))


def chart_dir() -> Path:
    return module_dir() / CHART_DIR


def assets_dir() -> Path:
    return module_dir() / "assets"


def manifests_dir() -> Path:
    return module_dir() / "manifests"


# ---- the binary --------------------------------------------------------------------------
def bin_dir() -> Path:
    return cache_root() / "bin" / BIN_DIR_NAME


def answers_version(path: Path) -> bool:
    """The binary logs its stamped version first; with an unusable kubeconfig it then exits at once."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPERATOR_NAMESPACE": "gpu-operator",
           "HOME": tempfile.gettempdir()}
    try:
        out = subprocess.run([str(path), "--kubeconfig=/nonexistent/kubeconfig", "--metrics-bind-address=0",
                              "--health-probe-bind-address=127.0.0.1:0"], capture_output=True, text=True,
                             timeout=30, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return VERSION_TEXT in out.stdout + out.stderr


def binary_available() -> bool:
    env = os.environ.get(BINARY_ENV)
    return answers_version(Path(env)) if env else answers_version(bin_dir() / BINARY)


def ensure_binary() -> Path:
    """The operator binary, built into the versioned cache dir if needed (idempotent, locked)."""
    env = os.environ.get(BINARY_ENV)
    if env:
        path = Path(env).expanduser().resolve()
        if not answers_version(path):
            raise OperatorModuleError(f"{BINARY_ENV}={path} is not a gpu-operator binary that logs "
                                      f"{VERSION_TEXT!r}")
        return path
    target = bin_dir() / BINARY
    if answers_version(target):
        return target
    go = _go(f"the real GPU Operator {OPERATOR_VERSION} is not built and cannot be")
    wrapper = wrapper_dir()
    module_dir()
    out_dir = bin_dir()
    with build_lock(out_dir):
        if answers_version(target):
            return target
        log_path = out_dir / "build.log"
        log_path.write_text(f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')} building {BIN_DIR_NAME}\n")
        print(f"building gpu-operator {OPERATOR_VERSION} ... (first build takes ~{COLD_MINUTES} min; "
              f"log: {log_path})", file=sys.stderr, flush=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            built = Path(tmp) / BINARY
            try:
                run_build(go, wrapper, LDFLAGS, built, [PACKAGE], log_path, f"or set {BINARY_ENV}")
            except GoBuildError as exc:
                raise OperatorModuleError(str(exc)) from None
            if not answers_version(built):
                raise OperatorModuleError(f"built gpu-operator does not log {VERSION_TEXT!r}; see {log_path}")
            os.replace(built, target)
        print(f"built gpu-operator {OPERATOR_VERSION} in {time.monotonic() - started:.0f} s", file=sys.stderr,
              flush=True)
    return target


def validator_answers_version(path: Path) -> bool:
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and VALIDATOR_VERSION_TEXT in out.stdout


def ensure_validator() -> Path:
    """NVIDIA's nvidia-validator of this release, built into the operator's versioned cache dir if needed
    (idempotent, locked): the binary of NVIDIA's validator image, run by the kind tier's operator."""
    target = bin_dir() / VALIDATOR_BINARY
    if validator_answers_version(target):
        return target
    go = _go(f"NVIDIA's validator {OPERATOR_VERSION} is not built and cannot be")
    wrapper = wrapper_dir()
    module_dir()
    out_dir = bin_dir()
    with build_lock(out_dir):
        if validator_answers_version(target):
            return target
        log_path = out_dir / "validator-build.log"
        log_path.write_text(f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')} building nvidia-validator "
                            f"{OPERATOR_VERSION}\n")
        print(f"building nvidia-validator {OPERATOR_VERSION} ... (first build takes ~{VALIDATOR_COLD_MINUTES} "
              f"min; log: {log_path})", file=sys.stderr, flush=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            built = Path(tmp) / VALIDATOR_BINARY
            try:
                run_build(go, wrapper, LDFLAGS, built, [VALIDATOR_PACKAGE], log_path, "the kind tier needs it")
            except GoBuildError as exc:
                raise OperatorModuleError(str(exc)) from None
            if not validator_answers_version(built):
                raise OperatorModuleError(f"built nvidia-validator does not answer {VALIDATOR_VERSION_TEXT!r}; "
                                          f"see {log_path}")
            os.replace(built, target)
        print(f"built nvidia-validator {OPERATOR_VERSION} in {time.monotonic() - started:.0f} s", file=sys.stderr,
              flush=True)
    return target


def validator_manifests() -> list[Path]:
    """The pod manifests NVIDIA's validator image carries (validator/ of the module)."""
    return [module_dir() / m for m in VALIDATOR_MANIFESTS]


def _ensure_all() -> Path:
    module_dir()
    ensure_validator()
    return ensure_binary()


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    return cli_main(_ensure_all)


if __name__ == "__main__":
    sys.exit(main())
