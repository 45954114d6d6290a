"""The fake GPU's host side: a CDI spec for containerd and the `nvidia-smi` it mounts into containers.

The device plugin (gobuild/fakegpu) hands out CDI names `nvidia.com/gpu=<index>`; this spec resolves them
the way nvidia-ctk's generated spec does for a real driver: a device node per GPU, /dev/nvidiactl,
NVIDIA_VISIBLE_DEVICES=void and the driver's nvidia-smi bind-mounted in. The device nodes are fully
specified (type c, major 195, minor N), so runc creates them inside the container and nothing is created
on the host. Opening them fails (there is no driver); listing them is what the probe does.

The fake nvidia-smi is a /bin/sh script: `-L` lists the GPUs whose /dev/nvidiaN character device the
container received, with the UUIDs the simulated nodes use (sim/nvidia_smi.gpu_uuid), in nvidia-smi's
format, so the probe parses a real node's output exactly like a simulated one.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from gpu_conformance.sim.nvidia_smi import gpu_name, gpu_uuid
from gpu_conformance.sim.profiles import get_profile

CDI_KIND = "nvidia.com/gpu"
CDI_SPEC_FILE = "nvidia.yaml"
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
SMI_IN_CONTAINER = "/usr/bin/nvidia-smi"


def default_product() -> str:
    """The GPU product of the default sim profile's first GPU node (the real node looks like its sibling)."""
    return get_profile("default").gpu_hardware[0].product


def uuids(node: str, count: int) -> list[str]:
    return [gpu_uuid(node, i) for i in range(count)]


def cdi_device_name(index: int) -> str:
    return f"{CDI_KIND}={index}"


def cdi_spec(count: int, smi_host_path: Path) -> dict:
    """The CDI spec (cdiVersion 0.5.0) naming devices by index, with the driver-wide edits."""
    return {
        "cdiVersion": "0.5.0",
        "kind": CDI_KIND,
        "devices": [{"name": str(i), "containerEdits": {"deviceNodes": [
            {"path": f"/dev/nvidia{i}", "type": "c", "major": NVIDIA_MAJOR, "minor": i,
             "permissions": "rw"}]}} for i in range(count)],
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": "/dev/nvidiactl", "type": "c", "major": NVIDIA_MAJOR,
                             "minor": NVIDIACTL_MINOR, "permissions": "rw"}],
            "mounts": [{"hostPath": str(smi_host_path), "containerPath": SMI_IN_CONTAINER,
                        "options": ["ro", "nosuid", "nodev", "bind"]}],
        },
    }


def nvidia_smi_script(node: str, count: int, product: str) -> str:
    """A POSIX sh `nvidia-smi` listing the injected /dev/nvidiaN devices of this node's fake GPUs."""
    name = gpu_name(product)
    cases = "\n".join(f"    {i}) uuid={shlex.quote(u)} ;;" for i, u in enumerate(uuids(node, count)))
    return f"""#!/bin/sh
# Fake nvidia-smi of the real-node tier (node {node}): only -L is implemented.
if [ "$1" != "-L" ]; then
  echo "fake nvidia-smi: only -L is implemented" >&2
  exit 2
fi
i=0
for dev in /dev/nvidia[0-9]*; do
  [ -c "$dev" ] || continue
  case "${{dev#/dev/nvidia}}" in
{cases}
    *) continue ;;
  esac
  echo "GPU $i: {name} (UUID: $uuid)"
  i=$((i + 1))
done
if [ "$i" = 0 ]; then
  echo "No devices were found"
  exit 6
fi
"""


def write_stack(node: str, count: int, cdi_dir: Path, smi_path: Path, product: str | None = None) -> Path:
    """Write the fake nvidia-smi and the CDI spec; returns the spec's path."""
    smi_path.parent.mkdir(parents=True, exist_ok=True)
    smi_path.write_text(nvidia_smi_script(node, count, product or default_product()))
    smi_path.chmod(0o755)
    cdi_dir.mkdir(parents=True, exist_ok=True)
    spec = cdi_dir / CDI_SPEC_FILE
    spec.write_text(yaml.safe_dump(cdi_spec(count, smi_path), sort_keys=False))
    return spec
