"""The kind tier's CDI specs from NVIDIA's own generator: `nvidia-ctk cdi generate` (v1.20.2) run on each GPU node
against the fake NVML, at node setup, as the operator's toolkit runs it with `cdi.enabled`.

What a GPU node gets (node_setup_script, run in the kind node container with `docker exec`):

* a fake driver root at operator.DRIVER_ROOT: the fake NVML under the driver's versioned library name with the
  libnvidia-ml.so.1 link (nvidia-ctk finds the driver's libraries by that version), the GPU table `gpus` (the
  fake NVML, the validator and the device plugin stand-ins read it), and `usr/bin/nvidia-smi`, which nvidia-ctk
  mounts into GPU containers from there;
* /usr/bin/nvidia-smi on the node itself, where a host driver install puts it: NVIDIA's validator checks the host
  driver with `chroot /host nvidia-smi` (driver.enabled=false). It runs the driver root's nvidia-smi on the driver
  root's GPU table, so a node whose table is gone has a host nvidia-smi that fails as with no driver loaded;
* the device nodes /dev/nvidiaN, /dev/nvidiactl and /dev/nvidia-uvm{,-tools}, mknod'd in the node container's own
  /dev (a tmpfs of the privileged container, never the host's): nvidia-ctk leaves out any candidate that is not a
  character device, and its spec then names each node by its path there (`--dev-root=/`);
* two specs in /var/run/cdi, both written by nvidia-ctk:
  - NODE_SPEC, kind nvidia.com/gpu with nvidia-ctk's default device names (index, uuid, all): what NVIDIA's
    runtime resolves NVIDIA_VISIBLE_DEVICES against in CDI mode (its default kind);
  - PLUGIN_SPEC, kind k8s.device-plugin.nvidia.com/gpu named by UUID: the spec NVIDIA's device plugin v0.17
    generates at start with the same library (nvcdi, vendor k8s.device-plugin.nvidia.com, DEVICE_ID_STRATEGY
    uuid), and the names its Allocate annotates the container with. Our plugin stand-in cannot run nvcdi, so
    the generator writes it for it and the plugin keeps a spec it finds (fixtures/fake-gpu, table mode).

Every hook the spec names runs NVIDIA's way: nvidia-cdi-hook, built from the same module, is installed at
HOOK_PATH (nvidia-ctk's default) on every node. No hook is disabled (see README, the kind tier).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.profiles.catalogue import get_profile

# Where the tier mounts the generator and the fake NVML into every node (read-only), and the hook's path.
TOOLS_DIR = "/opt/gpu-conformance"
NVIDIA_CTK = f"{TOOLS_DIR}/nvidia-ctk"
NVML_LIBRARY = f"{TOOLS_DIR}/{fakenvml.LIBRARY}"
HOOK_PATH = "/usr/bin/nvidia-cdi-hook"
# The driver version the fake NVML reports on the nodes (the default profile's driver); the versioned library
# name must match it, since nvidia-ctk looks the driver's libraries up by it.
DRIVER_VERSION = get_profile("default").driver_version
CDI_DIR = "/var/run/cdi"
NODE_KIND = fakegpu.CDI_KIND
PLUGIN_KIND = fakegpu.PLUGIN_CDI_KIND
NODE_SPEC = "nvidia.json"
PLUGIN_SPEC = PLUGIN_KIND.replace("/", "-") + ".json"
# nvidia-ctk's defaults (cmd/nvidia-ctk/cdi/generate: --device-name-strategy index,uuid, an `all` device).
NODE_NAME_STRATEGIES = ("index", "uuid")
# (kind, file, device-name strategies) of the specs a GPU node gets. The plugin's kind by UUID: NVIDIA's plugin's
# DEVICE_ID_STRATEGY default, which the operator leaves as is.
SPECS = ((NODE_KIND, NODE_SPEC, NODE_NAME_STRATEGIES), (PLUGIN_KIND, PLUGIN_SPEC, ("uuid",)))
SMI_IN_ROOT = "usr/bin/nvidia-smi"
HOST_SMI = "/usr/bin/nvidia-smi"
# The major nvidia-ctk is told for nvidia-uvm; the kernel allocates the real one dynamically.
UVM_MAJOR = fakenvml.UVM_MAJOR


def node_mounts(nvidia_ctk: Path, hook: Path, library: Path) -> dict[str, str]:
    """Host file -> path on every node: the generator, the hook its spec names, the fake NVML to copy."""
    return {str(nvidia_ctk): NVIDIA_CTK, str(hook): HOOK_PATH, str(library): NVML_LIBRARY}


def node_smi(table: str) -> str:
    """The driver root's nvidia-smi for one node: the fake nvidia-smi with the node's GPU table on fd 3.

    NVIDIA's spec mounts the driver's own files into a container (nvidia-smi, the libraries), not our GPU table,
    so the node's nvidia-smi carries it: a here-document on fd 3, read through /dev/fd/3 (runc makes /dev/fd)."""
    script = (fakegpu.fixture_dir() / "nvidia-smi").read_text()
    shebang, _, body = script.partition("\n")
    return (f"{shebang}\n# The kind tier's driver root: this node's GPU table (\"<minor> <uuid> <name>\") on fd 3.\n"
            f"exec 3<<'FAKE_GPU_TABLE_EOF'\n{table.rstrip()}\nFAKE_GPU_TABLE_EOF\n"
            f"FAKE_GPU_TABLE=${{FAKE_GPU_TABLE:-/dev/fd/3}}\n{body}")


def generate_command(kind: str, output: str, name_strategies: tuple[str, ...], driver_root: str,
                     dev_root: str = "/", nvidia_ctk: str = NVIDIA_CTK) -> list[str]:
    """`nvidia-ctk cdi generate` for one spec of `kind` (on a node: the device nodes in its own /dev)."""
    vendor, cls = kind.split("/", 1)
    return [nvidia_ctk, "cdi", "generate", f"--driver-root={driver_root}", f"--dev-root={dev_root}",
            f"--nvidia-cdi-hook-path={HOOK_PATH}", f"--vendor={vendor}", f"--class={cls}",
            *(f"--device-name-strategy={s}" for s in name_strategies), "--format=json", f"--output={output}"]


def host_smi(driver_root: str) -> str:
    """The node's own /usr/bin/nvidia-smi: the driver root's, reading the driver root's GPU table (not the copy the
    driver root's nvidia-smi carries for containers), so that moving the table away takes the host driver away."""
    q = shlex.quote
    return (f"#!/bin/sh\n# The kind tier's host driver: the fake driver root's nvidia-smi on its GPU table.\n"
            f"FAKE_GPU_TABLE=${{FAKE_GPU_TABLE:-{q(driver_root)}/{fakegpu.TABLE_FILE}}} "
            f"exec {q(driver_root)}/{SMI_IN_ROOT} \"$@\"\n")


def node_setup_script(table: str, driver_root: str, driver_version: str = DRIVER_VERSION) -> str:
    """The shell script (sh -ec) that lays out one GPU node's fake driver and writes both specs with nvidia-ctk.
    `driver_version` names the driver's libraries and is what the fake NVML reports (a fault may install an old
    driver on one node)."""
    q = shlex.quote
    lib_dir = f"{driver_root}/{fakenvml.LIB_DIR}"
    versioned = f"libnvidia-ml.so.{driver_version}"
    lines = [f"mkdir -p {q(lib_dir)} {q(driver_root)}/usr/bin {CDI_DIR}",
             f"cp {NVML_LIBRARY} {q(lib_dir)}/{versioned}",
             f"ln -sfn {versioned} {q(lib_dir)}/{fakenvml.LIBRARY}",
             f"cat > {q(driver_root)}/{fakegpu.TABLE_FILE} <<'FAKE_GPU_EOF'\n{table.rstrip()}\nFAKE_GPU_EOF",
             f"cat > {q(driver_root)}/{SMI_IN_ROOT} <<'FAKE_GPU_EOF'\n{node_smi(table).rstrip()}\nFAKE_GPU_EOF",
             f"chmod 755 {q(driver_root)}/{SMI_IN_ROOT}",
             f"cat > {HOST_SMI} <<'FAKE_GPU_EOF'\n{host_smi(driver_root).rstrip()}\nFAKE_GPU_EOF",
             f"chmod 755 {HOST_SMI}"]
    nodes = [(f"nvidia{m}", fakenvml.NVIDIA_MAJOR, m) for m in fakenvml.table_minors(table)]
    nodes += [("nvidiactl", fakenvml.NVIDIA_MAJOR, fakenvml.NVIDIACTL_MINOR), ("nvidia-uvm", UVM_MAJOR, 0),
              ("nvidia-uvm-tools", UVM_MAJOR, 1)]
    lines += [f"[ -c /dev/{name} ] || mknod -m 666 /dev/{name} c {major} {minor}" for name, major, minor in nodes]
    env = (f"{fakenvml.TABLE_ENV}={q(driver_root)}/{fakegpu.TABLE_FILE} "
           f"{fakenvml.DRIVER_VERSION_ENV}={driver_version}")
    for kind, spec, names in SPECS:
        cmd = " ".join(q(a) for a in generate_command(kind, f"{CDI_DIR}/{spec}", names, driver_root))
        # nvidia-ctk logs every driver file a fake driver lacks (EGL, Vulkan, ...) as a warning: kept for a
        # failure's message, not printed on success.
        lines.append(f"{env} {cmd} 2>/tmp/nvidia-ctk-{spec}.log || "
                     f"{{ tail -n 5 /tmp/nvidia-ctk-{spec}.log >&2; exit 1; }}")
    return "\n".join(lines) + "\n"
