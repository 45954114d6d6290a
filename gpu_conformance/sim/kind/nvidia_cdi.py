"""A GPU node of the kind tier's CDI path as a node with a preinstalled host driver (the operator's
`driver.enabled=false`), and the device plugin's CDI spec from NVIDIA's own generator (`nvidia-ctk cdi generate`
v1.17.8, the release of the CDI library device plugin v0.17.4 vendors, on the fake NVML).

What a GPU node gets at setup (node_setup_script, run in the kind node container with `docker exec`):

* the host driver where a distribution's driver packages put it, under the node's root (the validator's
  driver-ready then says NVIDIA_DRIVER_ROOT=/, and the operator's toolkit and device plugin look there): the fake
  NVML at HOST_LIB_DIR under the driver's versioned name with the libnvidia-ml.so.1 link (NVIDIA's CDI code finds
  the driver's libraries by that version) and a stand-in libcuda.so.<version> beside it, `nvidia-smi` at HOST_SMI,
  and the GPU table at operator.DRIVER_ROOT (the validator and device plugin stand-ins read it there; a relative
  link beside the library lets the fake NVML find it from the node's root and from a container's /host alike);
* the device nodes /dev/nvidiaN, /dev/nvidiactl and /dev/nvidia-uvm{,-tools}, mknod'd in the node container's own
  /dev (a tmpfs of the privileged container, never the host's): NVIDIA's code leaves out any candidate that is not
  a character device;
* the nvidia kernel module listed as loaded: the runtime wrapper NVIDIA's installer writes
  (tools/container/toolkit/runtime.go at v1.17.8) execs plain runc while `cat /proc/modules | grep "^nvidia "`
  finds nothing, as on a node whose driver is not loaded. Where the kernel has /proc/modules, MODULES_FILE (its
  lines plus the nvidia module) is bind-mounted over it in the node container's own mount namespace; on a kernel
  without loadable modules (no /proc/modules at all, as on these machines) a systemd path unit on the node points
  the wrappers' check at MODULES_FILE each time the installer writes them (_module_list_unit);
* PLUGIN_SPEC, kind k8s.device-plugin.nvidia.com/gpu named by UUID: the spec NVIDIA's device plugin v0.17.4
  generates at start with the same library (nvcdi, vendor k8s.device-plugin.nvidia.com, DEVICE_ID_STRATEGY uuid,
  the hook at the NVIDIA_CDI_HOOK_PATH the operator gives it: the toolkit's nvidia-cdi-hook), and the names its
  Allocate annotates the container with. Our plugin stand-in cannot run nvcdi, so the generator writes it for it and the
  plugin keeps a spec it finds (fixtures/fake-gpu, table mode).

What the toolkit writes (its runtime binaries and hook under TOOLKIT_DIR, containerd's config, the management CDI
spec `management.nvidia.com/gpu`) is the operator's toolkit DaemonSet's doing (toolkit_image.py), not the tier's.
No node spec of kind nvidia.com/gpu is written: at v25.3.4 nothing of the operator writes one.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.profiles.catalogue import get_profile

# Where the tier mounts the generator and the fake NVML into every node (read-only).
TOOLS_DIR = "/opt/gpu-conformance"
NVIDIA_CTK = f"{TOOLS_DIR}/nvidia-ctk"
NVML_LIBRARY = f"{TOOLS_DIR}/{fakenvml.LIBRARY}"
# The operator's toolkit installs into <toolkit.installDir>/toolkit (default /usr/local/nvidia) and gives the
# device plugin NVIDIA_CDI_HOOK_PATH=<that>/nvidia-cdi-hook (TransformDevicePlugin at v25.3.4).
TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
HOOK_PATH = f"{TOOLKIT_DIR}/nvidia-cdi-hook"
# The host driver's files on the node's root, where Debian/Ubuntu driver packages put them.
HOST_LIB_DIR = "/" + fakenvml.LIB_DIR
HOST_SMI = "/usr/bin/nvidia-smi"
LIBCUDA_STAND_IN = "the kind tier's stand-in for the CUDA driver library (no CUDA runs on fake GPUs)"
# The node's /proc/modules with the nvidia module added, bind-mounted over /proc/modules.
MODULES_FILE = "/run/fake-gpu/modules"
NVIDIA_MODULE_LINE = "nvidia 0 0 - Live 0x0000000000000000 (POE)"
# The driver version the fake NVML reports on the nodes (the default profile's driver); the versioned library
# name must match it, since nvidia-ctk looks the driver's libraries up by it.
DRIVER_VERSION = get_profile("default").driver_version
# The CUDA driver library under the driver's version: the toolkit's management spec (nvcdi's management mode at
# v1.17.8) takes the driver's libraries by libcuda.so.<version> and fails without it. A text stand-in: no CUDA runs
# here, and nothing in a container loads it.
LIBCUDA = f"libcuda.so.{DRIVER_VERSION}"
CDI_DIR = "/var/run/cdi"
PLUGIN_KIND = fakegpu.PLUGIN_CDI_KIND
PLUGIN_SPEC = PLUGIN_KIND.replace("/", "-") + ".json"
# (kind, file, device-name strategies) of the specs the tier writes on a GPU node: the plugin's kind by UUID (NVIDIA's
# plugin's DEVICE_ID_STRATEGY default, which the operator leaves as is).
SPECS = ((PLUGIN_KIND, PLUGIN_SPEC, ("uuid",)),)
# The management spec the operator's toolkit writes with cdi.enabled (v1.17.8: --cdi-kind default, nvcdi's name).
MANAGEMENT_KIND = "management.nvidia.com/gpu"
SMI_IN_ROOT = HOST_SMI.lstrip("/")
# The major nvidia-ctk is told for nvidia-uvm; the kernel allocates the real one dynamically.
UVM_MAJOR = fakenvml.UVM_MAJOR


def node_mounts(nvidia_ctk: Path, library: Path) -> dict[str, str]:
    """Host file -> path on every node: the generator and the fake NVML to install as the host driver's."""
    return {str(nvidia_ctk): NVIDIA_CTK, str(library): NVML_LIBRARY}


def node_smi(table: str, driver_root: str) -> str:
    """The host driver's nvidia-smi for one node: the fake nvidia-smi, reading the node's GPU table.

    On the node itself (and under `chroot /host`, as NVIDIA's validator checks a host driver) it reads the table at
    `driver_root`, so that moving the table away takes the driver away: it then fails as with no driver loaded.
    NVIDIA's specs mount this file into GPU containers, where `driver_root` is not: there it reads the copy it
    carries, a here-document on fd 3, through /dev/fd/3 (runc makes /dev/fd)."""
    q = shlex.quote
    script = (fakegpu.fixture_dir() / "nvidia-smi").read_text()
    shebang, _, body = script.partition("\n")
    return (f"{shebang}\n# The kind tier's host driver: this node's GPU table (\"<minor> <uuid> <name>\") at "
            f"{driver_root} on the node, on fd 3 in a container.\n"
            f"exec 3<<'FAKE_GPU_TABLE_EOF'\n{table.rstrip()}\nFAKE_GPU_TABLE_EOF\n"
            f"[ -n \"$FAKE_GPU_TABLE\" ] || [ ! -d {q(driver_root)} ] || "
            f"FAKE_GPU_TABLE={q(driver_root)}/{fakegpu.TABLE_FILE}\n"
            f"FAKE_GPU_TABLE=${{FAKE_GPU_TABLE:-/dev/fd/3}}\n{body}")


def generate_command(kind: str, output: str, name_strategies: tuple[str, ...], driver_root: str,
                     dev_root: str = "/", nvidia_ctk: str = NVIDIA_CTK) -> list[str]:
    """`nvidia-ctk cdi generate` for one spec of `kind` (on a node: the device nodes in its own /dev)."""
    vendor, cls = kind.split("/", 1)
    return [nvidia_ctk, "cdi", "generate", f"--driver-root={driver_root}", f"--dev-root={dev_root}",
            f"--nvidia-cdi-hook-path={HOOK_PATH}", f"--vendor={vendor}", f"--class={cls}",
            *(f"--device-name-strategy={s}" for s in name_strategies), "--format=json", f"--output={output}"]


# The runtime wrappers NVIDIA's installer writes, each starting with the module check.
RUNTIME_WRAPPERS = tuple(f"{TOOLKIT_DIR}/nvidia-container-runtime{s}" for s in ("", ".cdi", ".legacy"))
MODULE_CHECK = "cat /proc/modules "
MODULES_UNIT = "fake-gpu-module-list"


def _module_list_unit() -> str:
    """Shell lines installing a systemd path unit on the node that points the toolkit's runtime wrappers' module
    check at MODULES_FILE whenever the installer (re)writes them: on a kernel without loadable modules there is no
    /proc/modules to bind-mount over (these machines' kernel), and the unmodified wrapper would exec plain runc.
    The only change to anything NVIDIA's installer writes; grep first, so the rewrite does not trigger itself."""
    files = " ".join(RUNTIME_WRAPPERS)
    path_unit = "[Path]\n" + "".join(f"PathChanged={w}\n" for w in RUNTIME_WRAPPERS) + \
        "[Install]\nWantedBy=multi-user.target\n"
    sed = f"s#{MODULE_CHECK}#cat {MODULES_FILE} #"
    # No start rate limit: the installer writes three wrappers, each rewrite here triggers the path again, and a
    # crash-looping toolkit reinstalls them; systemd's default (5 starts in 10 s) would stop the unit for good, and
    # a wrapper left unrewritten runs every GPU container on plain runc.
    service = ("[Unit]\nStartLimitIntervalSec=0\n[Service]\nType=oneshot\n"
               f"ExecStart=/bin/sh -c 'grep -l \"{MODULE_CHECK}\" {files} 2>/dev/null | xargs -r sed -i \"{sed}\"'\n")
    unit_dir = "/etc/systemd/system"
    return "\n".join([f"cat > {unit_dir}/{MODULES_UNIT}.path <<'FAKE_GPU_EOF'\n{path_unit}FAKE_GPU_EOF",
                      f"cat > {unit_dir}/{MODULES_UNIT}.service <<'FAKE_GPU_EOF'\n{service}FAKE_GPU_EOF",
                      "systemctl daemon-reload", f"systemctl start {MODULES_UNIT}.path"])


def node_setup_script(table: str, driver_root: str, plugin_spec: bool = True,
                      driver_version: str = DRIVER_VERSION) -> str:
    """The shell script (sh -ec) that installs one GPU node's fake host driver and writes the plugin's spec (not in
    the DRA model, whose fake plugin writes its own). `driver_version` names the driver's libraries, which is what
    the fake NVML then reports (a fault may install an old driver on one node); run again, it replaces the driver
    installed before."""
    q = shlex.quote
    versioned = f"libnvidia-ml.so.{driver_version}"
    libcuda = f"libcuda.so.{driver_version}"
    table_path = f"{driver_root}/{fakegpu.TABLE_FILE}"
    # Relative, so that it resolves under a container's /host too (the toolkit reads the driver there).
    table_link = "../../.." + table_path
    lines = [f"mkdir -p {q(driver_root)} {HOST_LIB_DIR} {CDI_DIR} {MODULES_FILE.rsplit('/', 1)[0]}",
             # A driver installed before: its versioned libraries go (the unversioned links are replaced below).
             f"rm -f {HOST_LIB_DIR}/libnvidia-ml.so.*.* {HOST_LIB_DIR}/libcuda.so.*.*",
             f"cat > {q(table_path)} <<'FAKE_GPU_EOF'\n{table.rstrip()}\nFAKE_GPU_EOF",
             f"cp {NVML_LIBRARY} {HOST_LIB_DIR}/{versioned}",
             f"ln -sfn {versioned} {HOST_LIB_DIR}/{fakenvml.LIBRARY}",
             f"ln -sfn {q(table_link)} {HOST_LIB_DIR}/{fakegpu.TABLE_FILE}",
             f"echo {q(LIBCUDA_STAND_IN)} > {HOST_LIB_DIR}/{libcuda}",
             f"ln -sfn {libcuda} {HOST_LIB_DIR}/libcuda.so.1",
             f"cat > {HOST_SMI} <<'FAKE_GPU_EOF'\n{node_smi(table, driver_root).rstrip()}\nFAKE_GPU_EOF",
             f"chmod 755 {HOST_SMI}"]
    nodes = [(f"nvidia{m}", fakenvml.NVIDIA_MAJOR, m) for m in fakenvml.table_minors(table)]
    nodes += [("nvidiactl", fakenvml.NVIDIA_MAJOR, fakenvml.NVIDIACTL_MINOR), ("nvidia-uvm", UVM_MAJOR, 0),
              ("nvidia-uvm-tools", UVM_MAJOR, 1)]
    lines += [f"[ -c /dev/{name} ] || mknod -m 666 /dev/{name} c {major} {minor}" for name, major, minor in nodes]
    lines.append(f"{{ cat /proc/modules 2>/dev/null || true; echo {q(NVIDIA_MODULE_LINE)}; }} > {MODULES_FILE}")
    lines.append(f"if [ -e /proc/modules ]; then grep -q '^nvidia ' /proc/modules || "
                 f"mount --bind {MODULES_FILE} /proc/modules; else\n{_module_list_unit()}\nfi")
    env = f"{fakenvml.TABLE_ENV}={q(table_path)} {fakenvml.DRIVER_VERSION_ENV}={driver_version}"
    for kind, spec, names in SPECS if plugin_spec else ():
        cmd = " ".join(q(a) for a in generate_command(kind, f"{CDI_DIR}/{spec}", names, "/"))
        # nvidia-ctk logs every driver file a fake driver lacks (EGL, Vulkan, ...) as a warning: kept for a
        # failure's message, not printed on success.
        lines.append(f"{env} {cmd} 2>/tmp/nvidia-ctk-{spec}.log || "
                     f"{{ tail -n 5 /tmp/nvidia-ctk-{spec}.log >&2; exit 1; }}")
    return "\n".join(lines) + "\n"
