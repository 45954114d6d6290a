"""Tools built from Go modules, cached outside the repository and keyed by version: actionlint (the workflow
lint test), NVIDIA's nvidia-container-runtime (the reference the fake runtime is tested against,
tests/test_real_nvidia_runtime.py), nvidia-ctk (its CDI generator, run on the fake NVML: tests/test_fake_nvml.py,
and on the kind tier's GPU nodes) and nvidia-cdi-hook (the hooks of the spec nvidia-ctk generates, installed on
the kind tier's nodes).

    python -m gpu_conformance.gotools actionlint                  # build if needed, print the binary's path
    python -m gpu_conformance.gotools nvidia-container-runtime
    python -m gpu_conformance.gotools nvidia-ctk
    python -m gpu_conformance.gotools nvidia-cdi-hook
    python -m gpu_conformance.gotools toolkit                     # the toolkit image's v1.17.8 binaries

`go install MODULE/cmd/NAME@VERSION` needs no go.mod of ours and fetches only through the Go module proxy;
the binary lands in ~/.cache/gpu-operator-conformance/tools/NAME-VERSION/, so a version bump builds into a
fresh directory and never runs a stale binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.go_build import CACHE_NAME, build_lock


class ToolBuildError(ConformanceError):
    """A tool is not built and cannot be built (no Go, no module proxy, a failed build)."""


class GoMissingError(ToolBuildError):
    """No `go` on PATH: tests may skip on this one, and on nothing else."""


@dataclass(frozen=True)
class GoTool:
    name: str
    package: str
    version: str
    version_args: tuple[str, ...]
    # Must appear in the output of version_args: proves the cached binary is the pinned one.
    version_text: str
    ldflags: str = ""
    # cgo needs a C compiler (gcc) at build time; the binary then links libc dynamically.
    cgo: bool = False

    @property
    def dir_name(self) -> str:
        return f"{self.name}-{self.version}"


ACTIONLINT = GoTool("actionlint", "github.com/rhysd/actionlint/cmd/actionlint", "v1.7.12", ("-version",), "1.7.12")
_NCT = "github.com/NVIDIA/nvidia-container-toolkit"
_NCT_VERSION = "1.20.2"
# cgo: the runtime's packages import go-nvml and internal/cuda, which have no cgo-free build (in CDI mode
# neither is used at run time: no libnvidia-ml, no GPU). The -X is what NVIDIA's Makefile stamps; without it
# `--version` says "unknown".
NVIDIA_CONTAINER_RUNTIME = GoTool(
    "nvidia-container-runtime", f"{_NCT}/cmd/nvidia-container-runtime", f"v{_NCT_VERSION}", ("--version",),
    f"NVIDIA Container Runtime version {_NCT_VERSION}",
    ldflags=f"-s -w -X {_NCT}/internal/info.version={_NCT_VERSION}", cgo=True)
# NVIDIA's CDI generator (`nvidia-ctk cdi generate`), run against the fake NVML (sim/fakegpu/nvml.py): the same module,
# version, cgo need and version stamp as the runtime. urfave/cli prints "<Name> version <Version>".
NVIDIA_CTK = GoTool(
    "nvidia-ctk", f"{_NCT}/cmd/nvidia-ctk", f"v{_NCT_VERSION}", ("--version",),
    f"NVIDIA Container Toolkit CLI version {_NCT_VERSION}",
    ldflags=f"-s -w -X {_NCT}/internal/info.version={_NCT_VERSION}", cgo=True)
# The hook binary the CDI spec nvidia-ctk generates names (createContainer hooks: create-symlinks, update-ldcache,
# ...); the kind tier installs it on the nodes at /usr/bin/nvidia-cdi-hook, nvidia-ctk's default hook path.
# cgo as for the runtime: its packages reach go-nvml, which has no cgo-free build.
NVIDIA_CDI_HOOK = GoTool(
    "nvidia-cdi-hook", f"{_NCT}/cmd/nvidia-cdi-hook", f"v{_NCT_VERSION}", ("--version",),
    f"NVIDIA CDI Hook version {_NCT_VERSION}",
    ldflags=f"-s -w -X {_NCT}/internal/info.version={_NCT_VERSION}", cgo=True)

# The container toolkit the GPU Operator v25.3.4 deploys (its chart's toolkit.version v1.17.8), built for the kind
# tier's toolkit image (sim/kind/toolkit_image.py) as NVIDIA's image holds it: the installer the operator's
# entrypoint execs (`nvidia-toolkit`, at this tag tools/container/nvidia-toolkit, stamped through main.Version as
# the image's Dockerfile does; `nvidia-ctk-installer` only exists from v1.18) and the binaries it copies into the
# host's toolkit directory (the nvidia-container-toolkit-base and -toolkit packages: cmd/*, stamped through
# internal/info like the v1.20.2 ones above).
TOOLKIT_VERSION = "1.17.8"


def _toolkit_tool(name: str, version_text: str, package: str = "") -> GoTool:
    return GoTool(name, f"{_NCT}/{package or 'cmd/' + name}", f"v{TOOLKIT_VERSION}", ("--version",),
                  version_text, ldflags=f"-s -w -X {_NCT}/internal/info.version={TOOLKIT_VERSION}", cgo=True)


TOOLKIT_INSTALLER = GoTool(
    "nvidia-toolkit", f"{_NCT}/tools/container/nvidia-toolkit", f"v{TOOLKIT_VERSION}", ("--version",),
    f"nvidia-toolkit version {TOOLKIT_VERSION}", ldflags=f"-s -w -X main.Version={TOOLKIT_VERSION}", cgo=True)
TOOLKIT_BINARIES = (
    _toolkit_tool("nvidia-container-runtime", f"NVIDIA Container Runtime version {TOOLKIT_VERSION}"),
    _toolkit_tool("nvidia-container-runtime.cdi", f"NVIDIA Container Runtime version {TOOLKIT_VERSION}"),
    _toolkit_tool("nvidia-container-runtime.legacy", f"NVIDIA Container Runtime version {TOOLKIT_VERSION}"),
    _toolkit_tool("nvidia-container-runtime-hook", f"NVIDIA Container Runtime Hook version {TOOLKIT_VERSION}"),
    _toolkit_tool("nvidia-ctk", f"NVIDIA Container Toolkit CLI version {TOOLKIT_VERSION}"),
    _toolkit_tool("nvidia-cdi-hook", f"NVIDIA CDI Hook version {TOOLKIT_VERSION}"),
)
TOOLKIT_TOOLS = (TOOLKIT_INSTALLER, *TOOLKIT_BINARIES)
# The release's nvidia-ctk: also the CDI generator of the device plugin v0.17.4 that v25.3.4 deploys (its go.mod
# requires nvidia-container-toolkit v1.17.8), so the kind tier writes the plugin's spec with it.
TOOLKIT_CTK = next(t for t in TOOLKIT_BINARIES if t.name == "nvidia-ctk")
TOOLS = {t.name: t for t in (ACTIONLINT, NVIDIA_CONTAINER_RUNTIME, NVIDIA_CTK, NVIDIA_CDI_HOOK)}
# `python -m gpu_conformance.gotools toolkit`: every binary of the toolkit image.
TOOL_GROUPS = {"toolkit": TOOLKIT_TOOLS}


def tools_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / CACHE_NAME / "tools"


def _answers_version(path: Path, tool: GoTool) -> bool:
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        out = subprocess.run([str(path), *tool.version_args], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    # The text alone, not the exit code: nvidia-container-runtime prints its version, then looks for runc and
    # exits non-zero on a host without one.
    return tool.version_text in out.stdout + out.stderr


def _go_env(gobin: Path, tool: GoTool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GOBIN=str(gobin), CGO_ENABLED="1" if tool.cgo else "0", GOTOOLCHAIN="local", GOFLAGS="-trimpath")
    return env


def _install_command(go: str, tool: GoTool) -> list[str]:
    ldflags = [f"-ldflags={tool.ldflags}"] if tool.ldflags else []
    return [go, "install", *ldflags, f"{tool.package}@{tool.version}"]


def ensure_tool(tool: GoTool) -> Path:
    """The path of the tool's binary, built with `go install` on first use (idempotent, locked)."""
    out_dir = tools_dir() / tool.dir_name
    binary = out_dir / tool.name
    if _answers_version(binary, tool):
        return binary
    go = shutil.which("go")
    if go is None:
        raise GoMissingError(f"{tool.name} {tool.version} is not built and `go` is not on PATH "
                             f"(install Go from https://go.dev/dl)")
    if tool.cgo and shutil.which(os.environ.get("CC") or "gcc") is None:
        raise ToolBuildError(f"{tool.name} {tool.version} needs cgo and no C compiler is on PATH "
                             f"(apt-get install gcc, or set CC)")
    # The sim binaries' lock: a second session waits for the first build instead of building too.
    with build_lock(out_dir):
        if _answers_version(binary, tool):
            return binary
        log_path = out_dir / "build.log"
        # Built into a temporary GOBIN inside out_dir, then renamed: an interrupted build never leaves a
        # half-written binary under the real name.
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            cmd = _install_command(go, tool)
            started = time.monotonic()
            with open(log_path, "w") as log:
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                proc = subprocess.run(cmd, env=_go_env(Path(tmp), tool), cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                                      check=False)
            built = Path(tmp) / tool.name
            if proc.returncode != 0:
                lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
                raise ToolBuildError(f"`go install {tool.package}@{tool.version}` failed (exit {proc.returncode}); "
                                     f"see {log_path}: {lines[-1][:200] if lines else 'no output'}")
            if not _answers_version(built, tool):
                raise ToolBuildError(f"built {tool.name}, but `{tool.name} {' '.join(tool.version_args)}` does not "
                                     f"print {tool.version_text!r}")
            os.replace(built, binary)
        print(f"built {tool.name} {tool.version} in {time.monotonic() - started:.0f} s: {binary}", file=sys.stderr)
    return binary


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in {**TOOLS, **TOOL_GROUPS}:
        print(f"usage: python -m gpu_conformance.gotools {{{','.join([*TOOLS, *TOOL_GROUPS])}}}", file=sys.stderr)
        return 4
    if args[0] in TOOL_GROUPS:
        return cli_main(lambda: "\n".join(str(ensure_tool(t)) for t in TOOL_GROUPS[args[0]]))
    return cli_main(lambda: ensure_tool(TOOLS[args[0]]))


if __name__ == "__main__":
    sys.exit(main())
