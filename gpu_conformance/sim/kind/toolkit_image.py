"""The container toolkit's image of the kind tier: NVIDIA's installer and binaries at the release the GPU Operator
v25.3.4 deploys, laid out as NVIDIA's image (nvidia-container-toolkit v1.17.8, deployments/container/
Dockerfile.ubuntu) lays them out, under the name the ClusterPolicy gives (`toolkit.repository/image:version`).

What the operator's toolkit DaemonSet runs from it (assets/state-container-toolkit at v25.3.4): `/bin/bash -c
/bin/entrypoint.sh`, which waits for the validator's driver-ready, sources it and execs `nvidia-toolkit` from PATH.
So the image holds:

* `/work/nvidia-toolkit` with `/work` first on PATH (the Dockerfile's `ENV PATH=/work:$PATH`): the installer,
  tools/container/nvidia-toolkit at v1.17.8 (`nvidia-ctk-installer` exists only from v1.18);
* what the installer copies into the host's toolkit directory, at the paths the nvidia-container-toolkit packages
  install them: /usr/bin/nvidia-container-runtime{,.cdi,.legacy}, nvidia-container-runtime-hook, nvidia-ctk and
  nvidia-cdi-hook, all v1.17.8 from the Go module proxy (gotools.TOOLKIT_BINARIES);
* stand-ins for libnvidia-container (nvidia-container-cli and its two libraries, fixtures/fake-gpu/toolkit): C, not
  served by the Go module proxy; the installer only copies them, and CDI mode never runs them;
* a static busybox for the shell, `chroot` (the installer reads containerd's config with `chroot /host containerd
  config dump`) and the entrypoint's utilities, with /bin/bash as busybox's sh (fixtures/fake-gpu/bash);
* the glibc the cgo-built installer links against, from this machine (`ldd`): the binaries copied to the host run
  against the kind node's own glibc (Debian bookworm, as here).

No /etc/nvidia-container-runtime/config.toml: the installer starts from the toolkit's defaults when the package's
file is absent, and the package's file is those defaults written out.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from gpu_conformance.errors import ConformanceError
from gpu_conformance.gotools import TOOLKIT_BINARIES, TOOLKIT_INSTALLER, ensure_tool
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.fakegpu import stack as fakegpu

INSTALLER_DIR = "/work"
ENV = (f"PATH={INSTALLER_DIR}:{oci.DEFAULT_ENV[0].removeprefix('PATH=')}",)
STAND_INS = fakegpu.fixture_dir() / "toolkit"
# Where the Debian/Ubuntu packages put libnvidia-container's libraries: the installer looks for them there.
LIB_DIR = "/usr/lib/x86_64-linux-gnu"


class ToolkitImageError(ConformanceError):
    """The toolkit image cannot be put together (a binary's libraries not found)."""


def shared_libraries(binary: Path) -> list[tuple[str, Path]]:
    """(path in the image, file on this machine) of every library `binary` loads, the dynamic loader included."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolkitImageError(f"ldd {binary.name}: {(proc.stderr or proc.stdout).strip()[:200]}")
    libs = []
    for line in proc.stdout.splitlines():
        # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        if m := re.match(r"\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)", line):
            path = m.group(1)
            libs.append((path, Path(path).resolve()))
    return libs


def image(toolkit: dict[str, Any], busybox: Path) -> oci.Image:
    """The toolkit image named as the ClusterPolicy's `toolkit` section names it (the binaries built on first use)."""
    name = f"{toolkit['repository']}/{toolkit['image']}:{toolkit['version']}"
    installer = ensure_tool(TOOLKIT_INSTALLER)
    entries = [*oci.busybox_entries(busybox, fakegpu.busybox_applets(busybox)),
               oci.Entry("/bin/bash", source=fakegpu.fixture_dir() / "bash"),
               oci.Entry(f"{INSTALLER_DIR}/{TOOLKIT_INSTALLER.name}", source=installer)]
    entries += [oci.Entry(f"/usr/bin/{tool.name}", source=ensure_tool(tool)) for tool in TOOLKIT_BINARIES]
    entries += [oci.Entry("/usr/bin/nvidia-container-cli", source=STAND_INS / "nvidia-container-cli")]
    entries += [oci.Entry(f"{LIB_DIR}/{lib}", source=STAND_INS / lib, mode=0o644)
                for lib in ("libnvidia-container.so.1", "libnvidia-container-go.so.1")]
    entries += [oci.Entry(path, source=src) for path, src in shared_libraries(installer)]
    return oci.Image((name,), entries, env=ENV)
