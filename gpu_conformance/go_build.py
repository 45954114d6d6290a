"""Shared services for everything this project builds from Go modules: the cache, the toolchain, one build.

The simulated cluster's binaries, the real operator, the kind tier's binaries and the CI's Go tools
all build into ~/.cache/gpu-operator-conformance with the same toolchain rules; this module is the one place
those rules live (none of those modules reaches into another's private helpers).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpu_conformance.errors import ConformanceError

CACHE_NAME = "gpu-operator-conformance"
# The oldest Go that builds every pinned module (Kubernetes v1.36 needs 1.26).
MIN_GO = (1, 26)


class GoBuildError(ConformanceError):
    """Something built from a Go module is missing and cannot be built."""


class GoNotFoundError(GoBuildError):
    """No usable Go toolchain and nothing prebuilt: callers such as tests may skip on this one."""


def cache_root() -> Path:
    """~/.cache/gpu-operator-conformance (honours XDG_CACHE_HOME): every build's versioned directory is below."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / CACHE_NAME


def repo_root() -> Path:
    # The package lives at <repo>/gpu_conformance/go_build.py; the Go wrapper modules at <repo>/gobuild.
    return Path(__file__).resolve().parents[1]


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    # Never let `go` fetch a newer toolchain behind our back: the version check is the contract.
    env["GOTOOLCHAIN"] = "local"
    return env


def go_executable(min_go: tuple[int, int], needed_for: str, hint: str) -> str:
    """`go` on PATH at min_go or newer; GoNotFoundError saying what needs it and what to do instead."""
    go = shutil.which("go")
    if go is None:
        raise GoNotFoundError(f"{needed_for} and `go` is not on PATH: {hint}")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False, env=go_env())
    match = re.match(r"go(\d+)\.(\d+)", out.stdout.strip())
    if out.returncode != 0 or match is None or (int(match[1]), int(match[2])) < min_go:
        found = out.stdout.strip() or out.stderr.strip() or "unknown version"
        raise GoNotFoundError(f"{go} is {found}, too old ({needed_for}): {hint}")
    return go


@contextlib.contextmanager
def build_lock(bin_dir: Path) -> Iterator[None]:
    """One builder per directory: two test sessions starting at once must not both spend minutes on it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    with open(bin_dir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_build(go: str, cwd: Path, ldflags: str, out: Path, packages: Sequence[str], log_path: Path,
              hint: str) -> None:
    """`go build` of packages into out (a file, or a directory for several), its output appended to log_path."""
    cmd = [go, "build", "-trimpath", "-ldflags", ldflags, "-o", f"{out}/" if len(packages) > 1 else str(out),
           *packages]
    with open(log_path, "a") as log:
        log.write(f"\n$ (cd {cwd} && {' '.join(cmd)})\n")
        log.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=go_env(), stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = ""
        with contextlib.suppress(OSError):
            lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            tail = f" (last line: {lines[-1].strip()[:200]})" if lines else ""
        raise GoBuildError(f"`go build` of {', '.join(p.rsplit('/', 1)[-1] for p in packages)} failed with "
                           f"exit code {proc.returncode}; see {log_path}{tail}; {hint}")
